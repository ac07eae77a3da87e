// karmadactl, built from Karmada's Go module at the version tests/karmada-diff uses, for the
// tests that drive Flotilla's control plane with Karmada's own CLI (member-scope verbs go through
// the cluster proxy, /apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy/...).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd/util"

	"github.com/karmada-io/karmada/pkg/karmadactl"
)

func main() {
	cmd := karmadactl.NewKarmadaCtlCommand("karmadactl", "karmadactl")
	if err := cli.RunNoErrOutput(cmd); err != nil {
		util.CheckErr(err)
	}
}
