//! `work.karmada.io`: ResourceBinding / ClusterResourceBinding (v1alpha2) and Work (v1alpha1).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::{Condition, ObjectMeta, ObjectReference, ResourceList};
use crate::policy::{FailoverBehavior, Placement, Suspension};

/// Group/version of ResourceBinding and ClusterResourceBinding.
pub const BINDING_API_VERSION: &str = "work.karmada.io/v1alpha2";
/// Group/version of Work.
pub const WORK_API_VERSION: &str = "work.karmada.io/v1alpha1";

/// `ResourceBinding` (namespaced) — also `ClusterResourceBinding` (cluster-scoped): same spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceBinding {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: ResourceBindingSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ResourceBindingStatus>,
}

/// `ResourceBindingSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceBindingSpec {
    pub resource: ObjectReference,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub propagate_deps: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<ReplicaRequirements>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<TargetCluster>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graceful_eviction_tasks: Vec<GracefulEvictionTask>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverBehavior>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub conflict_resolution: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_triggered_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_priority: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_affinity_groups: Option<Value>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl ResourceBindingSpec {
    /// True when `cluster` is in the current schedule result.
    pub fn targets(&self, cluster: &str) -> bool {
        self.clusters.iter().any(|t| t.name == cluster)
    }

    /// Replicas currently assigned to `cluster` (0 when absent).
    pub fn assigned_replicas(&self, cluster: &str) -> i32 {
        self.clusters.iter().find(|t| t.name == cluster).map_or(0, |t| t.replicas)
    }

    /// A workload has replicas, replica requirements or components (Karmada's `IsWorkload`).
    pub fn is_workload(&self) -> bool {
        self.replicas > 0 || self.replica_requirements.is_some() || !self.components.is_empty()
    }
}

/// `ReplicaRequirements`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaRequirements {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_claim: Option<Value>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub resource_request: ResourceList,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
}

/// `TargetCluster`: one cluster of the schedule result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetCluster {
    pub name: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<Value>,
}

impl TargetCluster {
    /// A target with a replica count.
    pub fn new(name: impl Into<String>, replicas: i32) -> Self {
        TargetCluster { name: name.into(), replicas, components: Vec::new() }
    }
}

/// `GracefulEvictionTask`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GracefulEvictionTask {
    pub from_cluster: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub producer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_deletion: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserved_label_state: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters_before_failover: Vec<String>,
}

/// `ResourceBindingStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceBindingStatus {
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub scheduler_observed_generation: i64,
    /// Note the JSON name (`Observing`) differs from Karmada's Go field name (`Observed`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_observing_affinity_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled_time: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

fn is_zero64(v: &i64) -> bool {
    *v == 0
}

/// `AggregatedStatusItem`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AggregatedStatusItem {
    pub cluster_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub applied: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub applied_message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health: String,
}

/// `Work`: one manifest destined for one member cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Work {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: WorkSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// `WorkSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkSpec {
    pub workload: WorkloadTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_dispatching: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
}

/// `WorkloadTemplate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadTemplate {
    #[serde(default)]
    pub manifests: Vec<Value>,
}
