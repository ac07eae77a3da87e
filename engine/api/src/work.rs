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

/// The members of a binding spec other than `placement`, in serialization order: the names a
/// Wasm plugin may list as the members it reads (`bindingFields`, sdk/ABI.md §1).
pub const SPEC_MEMBERS: [&str; 16] = [
    "resource",
    "propagateDeps",
    "replicaRequirements",
    "replicas",
    "components",
    "clusters",
    "gracefulEvictionTasks",
    "requiredBy",
    "schedulerName",
    "failover",
    "conflictResolution",
    "rescheduleTriggeredAt",
    "suspension",
    "preserveResourcesOnDeletion",
    "schedulePriority",
    "workloadAffinityGroups",
];

/// A set of [`SPEC_MEMBERS`] (a bit per member, in that order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpecMembers(u32);

impl SpecMembers {
    /// Every member.
    pub const ALL: SpecMembers = SpecMembers((1 << SPEC_MEMBERS.len()) - 1);

    /// The members `names` (an empty list: every member). A name that is not a member is an
    /// error naming it and listing the members.
    pub fn named<S: AsRef<str>>(names: &[S]) -> Result<SpecMembers, String> {
        if names.is_empty() {
            return Ok(SpecMembers::ALL);
        }
        let mut bits = 0;
        for n in names {
            let n = n.as_ref();
            let i = SPEC_MEMBERS.iter().position(|m| *m == n).ok_or_else(|| {
                let shown: String = n.chars().take(64).collect();
                format!(
                    "unknown binding member {shown:?}; expected one of {}",
                    SPEC_MEMBERS.join(", ")
                )
            })?;
            bits |= 1 << i;
        }
        Ok(SpecMembers(bits))
    }

    /// Whether the member `name` is in the set.
    pub fn contains(self, name: &str) -> bool {
        SPEC_MEMBERS
            .iter()
            .position(|m| *m == name)
            .is_some_and(|i| self.0 & (1 << i) != 0)
    }
}

/// [`ResourceBindingSpec::without_placement`]: the spec's fields by reference, serialized exactly as
/// the spec's (keep in step with it; `tests::spec_without_placement_is_the_spec_minus_placement`).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecWithoutPlacement<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<&'a ObjectReference>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    propagate_deps: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    replica_requirements: Option<&'a ReplicaRequirements>,
    #[serde(skip_serializing_if = "is_zero")]
    replicas: i32,
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    components: &'a [Value],
    #[serde(skip_serializing_if = "<[TargetCluster]>::is_empty")]
    clusters: &'a [TargetCluster],
    #[serde(skip_serializing_if = "<[GracefulEvictionTask]>::is_empty")]
    graceful_eviction_tasks: &'a [GracefulEvictionTask],
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    required_by: &'a [Value],
    #[serde(skip_serializing_if = "str::is_empty")]
    scheduler_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    failover: Option<&'a FailoverBehavior>,
    #[serde(skip_serializing_if = "str::is_empty")]
    conflict_resolution: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reschedule_triggered_at: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspension: Option<&'a Suspension>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preserve_resources_on_deletion: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule_priority: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workload_affinity_groups: Option<&'a Value>,
}

impl ResourceBindingSpec {
    /// The spec as it serializes without its `placement`, without a clone (the Wasm plugin ABI
    /// sends the placement once, beside the spec).
    pub fn without_placement(&self) -> SpecWithoutPlacement<'_> {
        self.without_placement_only(SpecMembers::ALL)
    }

    /// [`ResourceBindingSpec::without_placement`] with only the `members` serialized (the others
    /// left out as if unset): what a Wasm plugin that declared the members it reads is sent.
    pub fn without_placement_only(&self, members: SpecMembers) -> SpecWithoutPlacement<'_> {
        let has = |name: &str| members.contains(name);
        SpecWithoutPlacement {
            resource: Some(&self.resource).filter(|_| has("resource")),
            propagate_deps: self.propagate_deps && has("propagateDeps"),
            replica_requirements: self
                .replica_requirements
                .as_ref()
                .filter(|_| has("replicaRequirements")),
            replicas: if has("replicas") { self.replicas } else { 0 },
            components: if has("components") {
                &self.components
            } else {
                &[]
            },
            clusters: if has("clusters") { &self.clusters } else { &[] },
            graceful_eviction_tasks: if has("gracefulEvictionTasks") {
                &self.graceful_eviction_tasks
            } else {
                &[]
            },
            required_by: if has("requiredBy") {
                &self.required_by
            } else {
                &[]
            },
            scheduler_name: if has("schedulerName") {
                &self.scheduler_name
            } else {
                ""
            },
            failover: self.failover.as_ref().filter(|_| has("failover")),
            conflict_resolution: if has("conflictResolution") {
                &self.conflict_resolution
            } else {
                ""
            },
            reschedule_triggered_at: self
                .reschedule_triggered_at
                .as_deref()
                .filter(|_| has("rescheduleTriggeredAt")),
            suspension: self.suspension.as_ref().filter(|_| has("suspension")),
            preserve_resources_on_deletion: self
                .preserve_resources_on_deletion
                .filter(|_| has("preserveResourcesOnDeletion")),
            schedule_priority: self
                .schedule_priority
                .as_ref()
                .filter(|_| has("schedulePriority")),
            workload_affinity_groups: self
                .workload_affinity_groups
                .as_ref()
                .filter(|_| has("workloadAffinityGroups")),
        }
    }

    /// True when `cluster` is in the current schedule result.
    pub fn targets(&self, cluster: &str) -> bool {
        self.clusters.iter().any(|t| t.name == cluster)
    }

    /// Replicas currently assigned to `cluster` (0 when absent).
    pub fn assigned_replicas(&self, cluster: &str) -> i32 {
        self.clusters
            .iter()
            .find(|t| t.name == cluster)
            .map_or(0, |t| t.replicas)
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
        TargetCluster {
            name: name.into(),
            replicas,
            components: Vec::new(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The field names a derived `Deserialize` of `T` knows (serde passes them to
    /// `deserialize_struct`), captured by a deserializer that stops there.
    fn struct_fields<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
        use serde::de::{Error as _, Visitor, value::Error};
        struct Capture(&'static [&'static str]);
        impl<'de> serde::Deserializer<'de> for &mut Capture {
            type Error = Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
                Err(Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Error> {
                self.0 = fields;
                Err(Error::custom("captured"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
                unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
            }
        }
        let mut c = Capture(&[]);
        let _ = T::deserialize(&mut c);
        c.0
    }

    #[test]
    fn spec_without_placement_is_the_spec_minus_placement() {
        // A new spec field fails here until `SpecWithoutPlacement` (and `SPEC_MEMBERS`) has it
        // too: the spec's fields are the members, in order, with `placement` after `clusters`.
        let mut expected = SPEC_MEMBERS.to_vec();
        expected.insert(6, "placement");
        assert_eq!(struct_fields::<ResourceBindingSpec>(), expected);
        let full: ResourceBindingSpec = serde_json::from_value(serde_json::json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "d", "name": "web", "uid": "u"},
            "propagateDeps": true,
            "replicaRequirements": {"resourceRequest": {"cpu": "1"}, "priorityClassName": "high"},
            "replicas": 3,
            "components": [{"name": "c"}],
            "clusters": [{"name": "m1", "replicas": 3}],
            "placement": {"clusterAffinity": {"clusterNames": ["m1"]}},
            "gracefulEvictionTasks": [{"fromCluster": "m2", "reason": "TaintUntolerated", "producer": "taint-manager"}],
            "requiredBy": [{"name": "other"}],
            "schedulerName": "default-scheduler",
            "failover": {"application": {"decisionConditions": {"tolerationSeconds": 30}}},
            "conflictResolution": "Overwrite",
            "rescheduleTriggeredAt": "2026-01-01T00:00:00Z",
            "suspension": {"dispatching": true},
            "preserveResourcesOnDeletion": false,
            "schedulePriority": {"priority": 5},
            "workloadAffinityGroups": {"x": 1}
        }))
        .unwrap();
        let mut want = serde_json::to_value(&full).unwrap();
        assert_eq!(
            want.as_object().unwrap().len(),
            17,
            "every field set: {want}"
        );
        want.as_object_mut().unwrap().remove("placement");
        assert_eq!(
            serde_json::to_value(full.without_placement()).unwrap(),
            want
        );
        let empty = ResourceBindingSpec::default();
        assert_eq!(
            serde_json::to_string(&empty.without_placement()).unwrap(),
            serde_json::to_string(&empty).unwrap()
        );
        // Only the declared members, each as the whole spec has it.
        assert_eq!(
            serde_json::to_value(full.without_placement_only(SpecMembers::ALL)).unwrap(),
            want
        );
        for (i, name) in SPEC_MEMBERS.iter().enumerate() {
            let one = SpecMembers::named(&[*name, SPEC_MEMBERS[(i + 5) % 16]]).unwrap();
            let got = serde_json::to_value(full.without_placement_only(one)).unwrap();
            let mut expected = serde_json::Map::new();
            for m in SPEC_MEMBERS {
                if one.contains(m) {
                    expected.insert(m.to_owned(), want[m].clone());
                }
            }
            assert_eq!(got, serde_json::Value::Object(expected), "{name}");
        }
        assert_eq!(SpecMembers::named::<&str>(&[]), Ok(SpecMembers::ALL));
        let err = SpecMembers::named(&["replicas", "placement"]).unwrap_err();
        assert!(
            err.starts_with("unknown binding member \"placement\"; expected one of resource, "),
            "{err}"
        );
    }
}
