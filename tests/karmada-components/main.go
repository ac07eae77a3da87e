// Karmada's own control plane, karmada-controller-manager and karmada-scheduler, built from
// Karmada's Go module at the version tests/karmada-diff and tests/karmadactl use, for the test
// that runs them against `flotilla up --no-controllers` (engine/cli/tests/karmada_components.rs):
// the embedded server as a drop-in karmada-apiserver. tests/run.sh builds both commands:
//
//	go build -o ../../target/karmada-controller-manager github.com/karmada-io/karmada/cmd/controller-manager
//	go build -o ../../target/karmada-scheduler github.com/karmada-io/karmada/cmd/scheduler
//
// This package only pins them in go.mod; it is never run.
package main

import (
	_ "github.com/karmada-io/karmada/cmd/controller-manager/app"
	_ "github.com/karmada-io/karmada/cmd/scheduler/app"
	_ "k8s.io/component-base/logs/json/register"
)

func main() {}
