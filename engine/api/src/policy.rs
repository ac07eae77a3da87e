//! `policy.karmada.io/v1alpha1`: PropagationPolicy, ClusterPropagationPolicy, OverridePolicy,
//! ClusterOverridePolicy. Mirrors `pkg/apis/policy/v1alpha1/{propagation,override}_types.go`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::{LabelSelector, NodeSelectorRequirement, ObjectMeta, Toleration};

/// The API group/version of every type in this module.
pub const API_VERSION: &str = "policy.karmada.io/v1alpha1";

/// `PropagationPolicy` (namespaced) — also used for `ClusterPropagationPolicy` (cluster-scoped): same spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropagationPolicy {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: PropagationSpec,
}

/// `PropagationSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PropagationSpec {
    pub resource_selectors: Vec<ResourceSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub association: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagate_deps: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependent_overrides: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverBehavior>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict_resolution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_preference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_priority: Option<Value>,
}

impl PropagationSpec {
    /// `ExplicitPriority()`: the explicit priority, 0 when unset.
    pub fn explicit_priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }
}

/// `ResourceSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSelector {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

/// `Suspension`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Suspension {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatching: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatching_on_clusters: Option<SuspendClusters>,
    /// Only on bindings (third-party scheduling queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<bool>,
}

/// `SuspendClusters`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuspendClusters {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
}

/// `FailoverBehavior`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailoverBehavior {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<ApplicationFailoverBehavior>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterFailoverBehavior>,
}

/// `ApplicationFailoverBehavior`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplicationFailoverBehavior {
    #[serde(default)]
    pub decision_conditions: DecisionConditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_preservation: Option<StatePreservation>,
}

/// `DecisionConditions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionConditions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i32>,
}

/// `ClusterFailoverBehavior`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterFailoverBehavior {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_preservation: Option<StatePreservation>,
}

/// `StatePreservation`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatePreservation {
    #[serde(default)]
    pub rules: Vec<StatePreservationRule>,
}

/// `StatePreservationRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatePreservationRule {
    pub alias_label_name: String,
    pub json_path: String,
}

/// `Placement`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_affinity: Option<ClusterAffinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_affinities: Vec<ClusterAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread_constraints: Vec<SpreadConstraint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_scheduling: Option<ReplicaSchedulingStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_affinity: Option<Value>,
    /// Flotilla extension: CEL score expressions, combined as a weighted mean (see [`CelScore`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_scores: Vec<CelScore>,
}

/// Flotilla extension: one CEL score expression of a placement.
///
/// The expression sees `cluster` (the Karmada Cluster) and `object` (the resource template) and
/// returns a number; values are clamped to 0..=100. A placement's CEL score for a cluster is the
/// weighted mean of its expressions, contributed by the `ClusterAffinity` score plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelScore {
    pub expression: String,
    /// Relative weight, at least 1 (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub weight: i64,
}

fn one() -> i64 {
    1
}

fn is_one(v: &i64) -> bool {
    *v == 1
}

/// Flotilla extension, OCM-compatible (`ClusterSelector.celSelector`): CEL predicates over
/// `cluster`, ANDed with each other and with the rest of the affinity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
}

/// Replica scheduling types.
pub mod scheduling_type {
    /// Every cluster gets the full replica count.
    pub const DUPLICATED: &str = "Duplicated";
    /// Replicas are divided among clusters.
    pub const DIVIDED: &str = "Divided";
}

/// Replica division preferences.
pub mod division_preference {
    /// As few clusters as possible.
    pub const AGGREGATED: &str = "Aggregated";
    /// Proportional to weights.
    pub const WEIGHTED: &str = "Weighted";
}

impl Placement {
    /// `Placement.ReplicaSchedulingType()`: `Duplicated` when `replicaScheduling` is nil.
    pub fn replica_scheduling_type(&self) -> &str {
        match &self.replica_scheduling {
            None => scheduling_type::DUPLICATED,
            Some(rs) => rs
                .replica_scheduling_type
                .as_deref()
                .unwrap_or(scheduling_type::DIVIDED),
        }
    }
}

/// `ClusterAffinity`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<FieldSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Flotilla extension: CEL predicates (see [`CelSelector`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_selector: Option<CelSelector>,
}

/// `FieldSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
}

/// `ClusterAffinityTerm`: a named affinity group with optional overflow tiers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterAffinityTerm {
    pub affinity_name: String,
    #[serde(flatten)]
    pub affinity: ClusterAffinityInline,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow_affinities: Option<Vec<OverflowAffinity>>,
}

/// The inline `ClusterAffinity` fields of a term (separate type because `deny_unknown_fields`
/// cannot be combined with `flatten`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinityInline {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<FieldSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Flotilla extension: CEL predicates (see [`CelSelector`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_selector: Option<CelSelector>,
}

impl From<ClusterAffinityInline> for ClusterAffinity {
    fn from(a: ClusterAffinityInline) -> Self {
        ClusterAffinity {
            label_selector: a.label_selector,
            field_selector: a.field_selector,
            cluster_names: a.cluster_names,
            exclude: a.exclude,
            cel_selector: a.cel_selector,
        }
    }
}

/// `OverflowAffinity`: a named overflow tier of a term.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OverflowAffinity {
    pub affinity_name: String,
    #[serde(flatten)]
    pub affinity: ClusterAffinityInline,
}

/// `SpreadConstraint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadConstraint {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spread_by_field: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spread_by_label: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_groups: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_groups: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// Spread fields.
pub mod spread_field {
    /// One group per cluster.
    pub const CLUSTER: &str = "cluster";
    /// Group by `spec.region`.
    pub const REGION: &str = "region";
    /// Group by `spec.zones`.
    pub const ZONE: &str = "zone";
    /// Group by `spec.provider`.
    pub const PROVIDER: &str = "provider";
}

/// `ReplicaSchedulingStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaSchedulingStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_scheduling_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_division_preference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_preference: Option<ClusterPreferences>,
}

/// `ClusterPreferences`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterPreferences {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub static_weight_list: Vec<StaticClusterWeight>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dynamic_weight: String,
}

/// `StaticClusterWeight`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticClusterWeight {
    pub target_cluster: ClusterAffinity,
    pub weight: i64,
}

/// `OverridePolicy` (namespaced) — also used for `ClusterOverridePolicy` (cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverridePolicy {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: OverrideSpec,
}

/// `OverrideSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_selectors: Vec<ResourceSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub override_rules: Vec<RuleWithCluster>,
    /// Deprecated single-rule form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster: Option<ClusterAffinity>,
    /// Deprecated single-rule form.
    #[serde(default, skip_serializing_if = "Overriders::is_empty")]
    pub overriders: Overriders,
}

/// `RuleWithCluster`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleWithCluster {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster: Option<ClusterAffinity>,
    pub overriders: Overriders,
}

/// `Overriders`. Applied per rule in field order: image, command, args, labels, annotations, field, plaintext.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Overriders {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plaintext: Vec<PlaintextOverrider>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_overrider: Vec<ImageOverrider>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command_overrider: Vec<CommandArgsOverrider>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args_overrider: Vec<CommandArgsOverrider>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels_overrider: Vec<LabelAnnotationOverrider>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations_overrider: Vec<LabelAnnotationOverrider>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_overrider: Vec<FieldOverrider>,
    /// Flotilla extension: CEL mutations, applied after every Karmada overrider of the rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel: Vec<CelMutation>,
}

impl Overriders {
    /// True when no overrider of any type is present.
    pub fn is_empty(&self) -> bool {
        self.plaintext.is_empty()
            && self.image_overrider.is_empty()
            && self.command_overrider.is_empty()
            && self.args_overrider.is_empty()
            && self.labels_overrider.is_empty()
            && self.annotations_overrider.is_empty()
            && self.field_overrider.is_empty()
            && self.cel.is_empty()
    }
}

/// `PlaintextOverrider`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlaintextOverrider {
    pub path: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Flotilla extension: a CEL expression computing `value` (any JSON value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

/// `ImageOverrider`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageOverrider {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicate: Option<ImagePredicate>,
    pub component: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// `ImagePredicate`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagePredicate {
    pub path: String,
}

/// `CommandArgsOverrider`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandArgsOverrider {
    pub container_name: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value: Vec<String>,
}

/// `LabelAnnotationOverrider`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelAnnotationOverrider {
    pub operator: String,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub value: std::collections::BTreeMap<String, String>,
    /// Flotilla extension: a CEL expression computing `value` (a `map(string, string)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

/// Flotilla extension: one CEL mutation, in the shape of a MutatingAdmissionPolicy mutation.
///
/// `patchType: JSONPatch` with `jsonPatch.expression` returning a list of RFC 6902 operations
/// (`{op, path, value?, from?}` maps), or `patchType: ApplyConfiguration` with
/// `applyConfiguration.expression` returning a map applied as an RFC 7386 merge patch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelMutation {
    pub patch_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_patch: Option<CelExpression>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_configuration: Option<CelExpression>,
}

impl CelMutation {
    /// The expression for `patchType`, with its field name (`jsonPatch` / `applyConfiguration`).
    pub fn expression(&self) -> Option<(&'static str, &str)> {
        match self.patch_type.as_str() {
            cel_patch_type::JSON_PATCH => self
                .json_patch
                .as_ref()
                .map(|e| ("jsonPatch", e.expression.as_str())),
            cel_patch_type::APPLY_CONFIGURATION => self
                .apply_configuration
                .as_ref()
                .map(|e| ("applyConfiguration", e.expression.as_str())),
            _ => None,
        }
    }
}

/// `CelMutation.patchType` values.
pub mod cel_patch_type {
    /// The expression returns RFC 6902 operations.
    pub const JSON_PATCH: &str = "JSONPatch";
    /// The expression returns a merge-patch object.
    pub const APPLY_CONFIGURATION: &str = "ApplyConfiguration";
}

/// A CEL expression (`{expression: "..."}`), as MutatingAdmissionPolicy writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CelExpression {
    pub expression: String,
}

/// `FieldOverrider`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldOverrider {
    pub field_path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json: Vec<SubPathPatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub yaml: Vec<SubPathPatch>,
}

/// `JSONPatchOperation` / `YAMLPatchOperation`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubPathPatch {
    pub sub_path: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}
