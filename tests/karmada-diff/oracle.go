package main

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/scheduler/cache"
	"github.com/karmada-io/karmada/pkg/scheduler/core"
	"github.com/karmada-io/karmada/pkg/scheduler/framework"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/plugins"
	"github.com/karmada-io/karmada/pkg/util"
	"github.com/karmada-io/karmada/pkg/util/helper"
	"github.com/karmada-io/karmada/pkg/util/validation"
)

// Scenario is the scheduler-level input: one binding and the cluster snapshot.
type Scenario struct {
	Name     string                             `json:"name"`
	Spec     workv1alpha2.ResourceBindingSpec   `json:"spec"`
	Status   workv1alpha2.ResourceBindingStatus `json:"status"`
	Clusters []clusterv1alpha1.Cluster          `json:"clusters"`
}

// sliceLister is a ClusterLister over a fixed slice (the scenario's clusters, in input order).
// Karmada's real lister lists from an informer's map; the scheduler sorts canonically, so the
// input order only shows in FitError reason counting, which does not depend on it.
type sliceLister struct {
	clusters []*clusterv1alpha1.Cluster
}

func (l *sliceLister) List(labels.Selector) ([]*clusterv1alpha1.Cluster, error) {
	return l.clusters, nil
}

func (l *sliceLister) Get(name string) (*clusterv1alpha1.Cluster, error) {
	for _, c := range l.clusters {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(clusterv1alpha1.Resource("cluster"), name)
}

// oracle wraps one Karmada generic scheduler (the scheduler's Algorithm) over a swappable snapshot.
type oracle struct {
	lister    *sliceLister
	algorithm core.ScheduleAlgorithm
}

func newOracle() (*oracle, error) {
	l := &sliceLister{}
	// The real scheduler cache, fed by our lister; no ResourceBinding indexer is needed because
	// the WorkloadAffinity plugins (the only users) are off by default and not registered.
	c := cache.NewCache(l, nil, 0)
	alg, err := core.NewGenericScheduler(c, plugins.NewInTreeRegistry())
	if err != nil {
		return nil, err
	}
	return &oracle{lister: l, algorithm: alg}, nil
}

func (o *oracle) setClusters(cs []clusterv1alpha1.Cluster) {
	o.lister.clusters = o.lister.clusters[:0]
	for i := range cs {
		o.lister.clusters = append(o.lister.clusters, &cs[i])
	}
}

// schedule runs one scheduling decision exactly as Karmada's Scheduler does for a binding that
// needs scheduling (pkg/scheduler/scheduler.go: scheduleResourceBindingWithClusterAffinity and
// scheduleResourceBindingWithClusterAffinities): one Algorithm.Schedule call, or the ordered walk
// over clusterAffinities terms from the observed one. It returns the suggested clusters, the
// observed affinity name Karmada would record, and the error Karmada would turn into the
// Scheduled condition.
func (o *oracle) schedule(sc *Scenario) ([]workv1alpha2.TargetCluster, string, error) {
	o.setClusters(sc.Clusters)
	spec := &sc.Spec
	opt := &core.ScheduleAlgorithmOption{EnableEmptyWorkloadPropagation: false}
	if spec.Placement.ClusterAffinities == nil {
		res, err := o.algorithm.Schedule(context.TODO(), spec, &sc.Status, opt)
		return res.SuggestedClusters, sc.Status.SchedulerObservedAffinityName, err
	}

	terms := spec.Placement.ClusterAffinities
	index := affinityIndex(terms, sc.Status.SchedulerObservedAffinityName)
	// Karmada master (after v1.18) restarts from the first term on a manual reschedule; the
	// scheduler core is unchanged. flotilla follows master here (see DIFFERENCES.md).
	if util.RescheduleRequired(spec.RescheduleTriggeredAt, sc.Status.LastScheduledTime) {
		index = 0
	}
	status := sc.Status.DeepCopy()
	var firstErr error
	for ; index < len(terms); index++ {
		status.SchedulerObservedAffinityName = terms[index].AffinityName
		res, err := o.algorithm.Schedule(context.TODO(), spec, status, opt)
		if err == nil {
			return res.SuggestedClusters, status.SchedulerObservedAffinityName, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, sc.Status.SchedulerObservedAffinityName, firstErr
}

// affinityIndex mirrors pkg/scheduler/helper.go getAffinityIndex (unexported there).
func affinityIndex(terms []policyv1alpha1.ClusterAffinityTerm, observed string) int {
	if observed == "" {
		return 0
	}
	for i, t := range terms {
		if t.AffinityName == observed {
			return i
		}
	}
	return 0
}

// conditionOf mirrors pkg/scheduler/helper.go getConditionByError for errors the algorithm returns
// (no API-server patch errors here).
func conditionOf(err error) (string, string) {
	var unschedulable *framework.UnschedulableError
	if errors.As(err, &unschedulable) {
		return workv1alpha2.BindingReasonUnschedulable, err.Error()
	}
	var fit *framework.FitError
	if errors.As(err, &fit) {
		return workv1alpha2.BindingReasonNoClusterFit, err.Error()
	}
	return workv1alpha2.BindingReasonSchedulerError, err.Error()
}

// applyWebhookDefaults is the scheduling-relevant part of the PropagationPolicy mutating webhook
// (pkg/webhook/propagationpolicy/mutating.go), plus the CRD default of replicaSchedulingType.
func applyWebhookDefaults(p *policyv1alpha1.Placement) {
	if p.ReplicaScheduling != nil && p.ReplicaScheduling.ReplicaSchedulingType == "" {
		p.ReplicaScheduling.ReplicaSchedulingType = policyv1alpha1.ReplicaSchedulingTypeDivided
	}
	helper.SetDefaultSpreadConstraints(p.SpreadConstraints)
	helper.SetReplicaDivisionPreferenceWeighted(p)
}

func validatePlacement(p policyv1alpha1.Placement, path *field.Path) field.ErrorList {
	return validation.ValidatePlacement(p, path)
}
