package main

import (
	"fmt"

	clusterapis "github.com/karmada-io/karmada/pkg/apis/cluster"
	"github.com/karmada-io/karmada/pkg/apis/cluster/mutation"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	"github.com/karmada-io/karmada/pkg/features"
)

// storeCluster normalises a submitted Cluster the way Karmada's aggregated API server stores it
// (pkg/registry/cluster/strategy.go: PrepareForCreate's resource-model defaulting/standardising
// and Canonicalize's MutateCluster, e.g. the deprecated spec.zone moved into spec.zones). The
// status is kept as given: in Karmada it comes from the cluster-status controller. A scenario's
// clusters are what a user submits; the scheduler sees them as stored.
func storeCluster(c *clusterv1alpha1.Cluster) error {
	var internal clusterapis.Cluster
	if err := clusterv1alpha1.Convert_v1alpha1_Cluster_To_cluster_Cluster(c, &internal, nil); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	if features.FeatureGate.Enabled(features.CustomizedClusterResourceModeling) {
		if len(internal.Spec.ResourceModels) == 0 {
			mutation.SetDefaultClusterResourceModels(&internal)
		} else {
			mutation.StandardizeClusterResourceModels(internal.Spec.ResourceModels)
		}
	}
	mutation.MutateCluster(&internal)
	status := c.Status
	var out clusterv1alpha1.Cluster
	if err := clusterv1alpha1.Convert_cluster_Cluster_To_v1alpha1_Cluster(&internal, &out, nil); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	out.Status = status
	*c = out
	return nil
}
