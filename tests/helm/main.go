// Helm, built from its Go module for the test that renders deploy/helm/flotilla with
// `helm template` and applies the output server-side to a real kube-apiserver
// (engine/cli/tests/helm_chart.rs). tests/run.sh builds it:
//
//	go build -o ../../target/helm helm.sh/helm/v4/cmd/helm
//
// This package only pins the version in go.mod; it is never run.
package main

import _ "helm.sh/helm/v4/pkg/cmd"

func main() {}
