//! Scheduling and override framework: one trait per extension point, the contexts they read and the
//! decisions they return.
//!
//! Every backend (in-tree Rust, Wasm, CEL) implements the same traits; the framework cannot tell them
//! apart. Calls are batched per binding: a filter sees every remaining candidate cluster in one call,
//! so a sandboxed plugin crosses its boundary once per (plugin, binding), never once per cluster.
//!
//! Three outcomes are kept apart: a *decision* ("this cluster does not fit", "these replicas go
//! there") is `Ok` data; a *plugin fault* (trap, timeout, malformed output) is `Err(PluginError)` and
//! is handled by the plugin's [`FailurePolicy`]; bad user input never reaches plugins (it is rejected
//! by validation).

use std::sync::Arc;

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{ClusterAffinityTerm, Placement};
use flotilla_api::work::{ResourceBinding, ResourceBindingSpec, SpecMembers, TargetCluster};
use serde_json::Value;

use crate::cluster_index::ClusterIndex;
use crate::error::PluginError;
use crate::expression::ExpressionEngine;

/// Lowest score a score plugin may return after normalization.
pub const MIN_SCORE: i64 = 0;
/// Highest score a score plugin may return after normalization.
pub const MAX_SCORE: i64 = 100;

/// What every plugin has: a stable name (Karmada's, for built-ins: `"TaintToleration"`).
pub trait Plugin: Send + Sync + 'static {
    /// The plugin's name as used in profiles and reasons.
    fn name(&self) -> &str;
}

/// The binding being scheduled, as every extension point sees it. Built once per scheduling attempt.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct BindingContext<'a> {
    /// The binding spec (resource, replicas, requirements, current `clusters`, eviction tasks).
    pub spec: &'a ResourceBindingSpec,
    /// The placement in force (`spec.placement`, or an empty placement when unset).
    pub placement: &'a Placement,
    /// The `clusterAffinities` term being tried, when the placement uses ordered affinity groups.
    pub affinity_term: Option<&'a ClusterAffinityTerm>,
    /// The cluster-set snapshot the inputs' clusters are taken from, when the caller has one (the
    /// scheduler always does). Sandboxed backends use it to keep cluster data across bindings.
    pub snapshot: Option<ClusterSnapshot<'a>>,
    /// The resource template, when the host has it (CEL expressions see it as `object`).
    pub object: Option<&'a Value>,
    /// The profile's expression engine, for policies with CEL fields (see [`crate::expression`]).
    pub expressions: Option<&'a dyn ExpressionEngine>,
    /// Encodings of the binding shared by the attempt's plugins, when the caller keeps them (the
    /// scheduler does, one per attempt).
    pub encodings: Option<&'a SharedEncodings>,
    /// The binding's current targets by name, when the caller indexed them (the scheduler does,
    /// once per binding); see [`BindingContext::targets`].
    pub current: Option<&'a CurrentTargets<'a>>,
}

/// A binding's current target clusters (`spec.clusters`) by name: "already scheduled here?" per
/// cluster without scanning the list for every cluster (a binding spread over hundreds of
/// clusters would otherwise cost clusters × targets name comparisons per plugin).
#[derive(Debug, Default)]
pub struct CurrentTargets<'a> {
    by_name: std::collections::HashMap<&'a str, i32>,
}

impl<'a> CurrentTargets<'a> {
    /// Index `spec.clusters` (the first entry of a repeated name wins, as in a scan).
    pub fn new(spec: &'a ResourceBindingSpec) -> Self {
        let mut by_name = std::collections::HashMap::with_capacity(spec.clusters.len());
        for t in &spec.clusters {
            by_name.entry(t.name.as_str()).or_insert(t.replicas);
        }
        CurrentTargets { by_name }
    }

    /// True when `cluster` is a current target.
    pub fn contains(&self, cluster: &str) -> bool {
        self.by_name.contains_key(cluster)
    }

    /// Replicas currently assigned to `cluster` (0 when absent).
    pub fn replicas(&self, cluster: &str) -> i32 {
        self.by_name.get(cluster).copied().unwrap_or(0)
    }
}

/// The binding encoded once per scheduling attempt for the plugins that need it serialized
/// (sandboxed backends: every Wasm plugin of the attempt gets the same request JSON instead of
/// serializing the binding per call). Remembers which spec, placement and affinity term it
/// encodes, and encodes afresh for any other context, so a misplaced one costs time, not truth.
///
/// Plugins that declared the binding members they read get an encoding of those members only: one
/// per distinct member set, up to [`SharedEncodings::SETS`] sets an attempt (more are encoded per
/// call).
#[derive(Debug, Default)]
pub struct SharedEncodings {
    json: [std::sync::OnceLock<(Identity, SpecMembers, Vec<u8>)>; SharedEncodings::SETS],
}

/// What an encoding was made from: the addresses of the borrowed spec, placement and term (they
/// cannot change or move while borrowed).
type Identity = (usize, usize, usize);

impl SharedEncodings {
    /// Member sets kept per attempt.
    pub const SETS: usize = 4;

    /// The binding's JSON for `ctx`, made by `encode` the first time (and for a `ctx` over another
    /// binding than the first one's, every time).
    pub fn json<'s>(
        &'s self,
        ctx: &BindingContext<'_>,
        members: SpecMembers,
        encode: impl FnOnce() -> Vec<u8>,
    ) -> std::borrow::Cow<'s, [u8]> {
        let id: Identity = (
            std::ptr::from_ref(ctx.spec) as usize,
            std::ptr::from_ref(ctx.placement) as usize,
            ctx.affinity_term
                .map_or(0, |t| std::ptr::from_ref(t) as usize),
        );
        let mut fresh = Some(encode);
        for slot in &self.json {
            let (made_for, made_of, json) =
                slot.get_or_init(|| (id, members, fresh.take().map(|f| f()).unwrap_or_default()));
            if *made_of != members {
                continue;
            }
            return match fresh {
                Some(encode) if *made_for != id => std::borrow::Cow::Owned(encode()),
                // Made just now, or earlier for this very binding.
                _ => std::borrow::Cow::Borrowed(json),
            };
        }
        // Every slot holds another member set.
        std::borrow::Cow::Owned(fresh.map(|f| f()).unwrap_or_default())
    }
}

/// The cluster set a scheduling attempt runs against, with an identity: the same `generation`
/// always denotes the same clusters with the same content, so a backend may cache per-cluster data
/// (e.g. a serialized copy inside a Wasm instance) keyed by it. Every cluster a plugin input refers
/// to is one of `clusters` (the same reference).
#[derive(Debug, Clone, Copy)]
pub struct ClusterSnapshot<'a> {
    /// Process-unique identity of the set (never 0 for a [`crate::pipeline::Snapshot`]'s).
    pub generation: u64,
    /// All clusters of the set, sorted by name.
    pub clusters: &'a [Cluster],
    /// Where the set's [`ClusterIndex`] is kept once built ([`ClusterSnapshot::index`]).
    pub index: &'a std::sync::OnceLock<ClusterIndex>,
}

impl<'a> ClusterSnapshot<'a> {
    /// The clusters indexed by name, label and field values, built on first use and shared by
    /// every plugin deciding against this generation.
    pub fn index(&self) -> &'a ClusterIndex {
        self.index.get_or_init(|| ClusterIndex::new(self.clusters))
    }
}

impl<'a> BindingContext<'a> {
    /// A context for `spec` with `placement` and the affinity term being tried.
    pub fn new(
        spec: &'a ResourceBindingSpec,
        placement: &'a Placement,
        affinity_term: Option<&'a ClusterAffinityTerm>,
    ) -> Self {
        BindingContext {
            spec,
            placement,
            affinity_term,
            snapshot: None,
            object: None,
            expressions: None,
            encodings: None,
            current: None,
        }
    }

    /// The same context with the binding's current targets indexed ([`CurrentTargets`]).
    pub fn with_current(mut self, current: Option<&'a CurrentTargets<'a>>) -> Self {
        self.current = current;
        self
    }

    /// True when `cluster` is in the binding's current schedule result.
    pub fn targets(&self, cluster: &str) -> bool {
        match self.current {
            Some(c) => c.contains(cluster),
            None => self.spec.targets(cluster),
        }
    }

    /// Replicas currently assigned to `cluster` (0 when absent).
    pub fn assigned_replicas(&self, cluster: &str) -> i32 {
        match self.current {
            Some(c) => c.replicas(cluster),
            None => self.spec.assigned_replicas(cluster),
        }
    }

    /// The same context with encodings shared by the plugins it is passed to ([`SharedEncodings`]).
    pub fn with_encodings(mut self, encodings: Option<&'a SharedEncodings>) -> Self {
        self.encodings = encodings;
        self
    }

    /// The same context with the resource template expressions see as `object`.
    pub fn with_object(mut self, object: Option<&'a Value>) -> Self {
        self.object = object;
        self
    }

    /// The same context with an expression engine (see [`crate::expression`]).
    pub fn with_expressions(mut self, engine: Option<&'a dyn ExpressionEngine>) -> Self {
        self.expressions = engine;
        self
    }

    /// The same context, tagged with the cluster-set snapshot its inputs come from.
    pub fn with_snapshot(mut self, snapshot: ClusterSnapshot<'a>) -> Self {
        self.snapshot = Some(snapshot);
        self
    }

    /// Karmada's `IsWorkload`: replicas, replica requirements or components present.
    pub fn is_workload(&self) -> bool {
        self.spec.is_workload()
    }
}

/// Why a cluster is unschedulable. Static reasons (the common case) cost no allocation.
pub type Reason = std::borrow::Cow<'static, str>;

/// A filter's answer for one cluster. "No" is data, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The cluster may host the binding.
    Fit,
    /// The cluster may not; the reason is reported Karmada-style (`cluster(s) had untolerated taint {k:NoSchedule}`).
    Unschedulable(Reason),
}

impl Verdict {
    /// An unschedulable verdict with `reason`.
    pub fn unschedulable(reason: impl Into<Reason>) -> Self {
        Verdict::Unschedulable(reason.into())
    }
}

/// Input of a filter call: the binding and the clusters still feasible.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct FilterInput<'a> {
    /// The binding.
    pub binding: &'a BindingContext<'a>,
    /// Candidate clusters, sorted by name.
    pub clusters: &'a [&'a Cluster],
    /// Each cluster's row in [`BindingContext::snapshot`] ([`ClusterDetail::NO_ROW`] for one not
    /// known), when the caller keeps them (the scheduler does): lets sandboxed backends refer to
    /// clusters without looking them up.
    pub rows: Option<&'a [u32]>,
}

impl<'a> FilterInput<'a> {
    /// Build the input (the framework does this; tests and other hosts may too).
    pub fn new(binding: &'a BindingContext<'a>, clusters: &'a [&'a Cluster]) -> Self {
        FilterInput {
            binding,
            clusters,
            rows: None,
        }
    }

    /// The same input with the clusters' snapshot rows ([`FilterInput::rows`]; one per cluster).
    pub fn with_rows(mut self, rows: &'a [u32]) -> Self {
        self.rows = Some(rows);
        self
    }
}

/// Filter extension point: decide, per candidate cluster, whether it may host the binding.
pub trait FilterPlugin: Plugin {
    /// Push exactly one verdict per `input.clusters[i]` onto `out`, in the same order.
    ///
    /// # Errors
    /// A plugin fault; the framework applies the plugin's failure policy.
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError>;
}

/// Input of a score call: the binding and the feasible clusters.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ScoreInput<'a> {
    /// The binding.
    pub binding: &'a BindingContext<'a>,
    /// Feasible clusters, sorted by name.
    pub clusters: &'a [&'a Cluster],
    /// Each cluster's row in [`BindingContext::snapshot`], when the caller knows them (as
    /// [`FilterInput::rows`]).
    pub rows: Option<&'a [u32]>,
}

impl<'a> ScoreInput<'a> {
    /// Build the input (the framework does this; tests and other hosts may too).
    pub fn new(binding: &'a BindingContext<'a>, clusters: &'a [&'a Cluster]) -> Self {
        ScoreInput {
            binding,
            clusters,
            rows: None,
        }
    }

    /// The same input with the clusters' snapshot rows ([`ScoreInput::rows`]; one per cluster).
    pub fn with_rows(mut self, rows: &'a [u32]) -> Self {
        self.rows = Some(rows);
        self
    }
}

/// Score extension point: rank feasible clusters. Scores are summed over plugins, times each
/// plugin's profile weight.
pub trait ScorePlugin: Plugin {
    /// Push exactly one raw score per `input.clusters[i]` onto `out`.
    ///
    /// # Errors
    /// A plugin fault.
    fn score(&self, input: &ScoreInput<'_>, out: &mut Vec<i64>) -> Result<(), PluginError>;

    /// Rescale raw scores into `MIN_SCORE..=MAX_SCORE`. Default: already in range.
    ///
    /// # Errors
    /// A plugin fault.
    fn normalize(&self, _scores: &mut [i64]) -> Result<(), PluginError> {
        Ok(())
    }
}

/// A feasible cluster with everything the select and assign steps read (Karmada's `ClusterDetailInfo`).
#[derive(Debug, Clone, Copy)]
pub struct ClusterDetail<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Sum of weighted scores.
    pub score: i64,
    /// Replicas the cluster can still take (estimator result).
    pub allocatable_replicas: i64,
    /// `allocatable_replicas` plus the replicas currently assigned to the cluster.
    pub available_replicas: i64,
    /// 0 for a primary-affinity cluster, `i+1` for the i-th overflow tier, 1000 for none.
    pub overflow_order: u32,
    /// The cluster's position in [`BindingContext::snapshot`] (whose clusters are sorted by name,
    /// so positions order as names do), or [`ClusterDetail::NO_ROW`] when the caller has no
    /// snapshot. Lets assigners order clusters and backends find them without comparing names.
    pub row: u32,
}

impl ClusterDetail<'_> {
    /// [`ClusterDetail::row`] of a cluster not taken from a snapshot.
    pub const NO_ROW: u32 = u32::MAX;

    /// The cluster's name.
    pub fn name(&self) -> &str {
        self.cluster.name()
    }
}

/// Input of a select call: feasible clusters in canonical order
/// (overflow order asc, score desc, available replicas desc, name asc).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct SelectInput<'a> {
    /// The binding.
    pub binding: &'a BindingContext<'a>,
    /// Feasible clusters, canonical order.
    pub clusters: &'a [ClusterDetail<'a>],
}

impl<'a> SelectInput<'a> {
    /// Build the input (the framework does this; tests and other hosts may too).
    pub fn new(binding: &'a BindingContext<'a>, clusters: &'a [ClusterDetail<'a>]) -> Self {
        SelectInput { binding, clusters }
    }
}

/// A select plugin's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Indices into `SelectInput::clusters`, in the order the assign step should see them.
    Selected(Vec<usize>),
    /// No acceptable selection (e.g. fewer groups than `minGroups`); the message is the reason.
    Failed(String),
}

/// Select extension point: choose the clusters (e.g. per spread constraints) the replicas may go to.
pub trait SelectPlugin: Plugin {
    /// Choose clusters for the binding.
    ///
    /// # Errors
    /// A plugin fault.
    fn select(&self, input: &SelectInput<'_>) -> Result<Selection, PluginError>;
}

/// Karmada's assignment mode: `Fresh` re-divides from scratch (manual reschedule), `Steady` keeps
/// what can be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignMode {
    /// Keep previous assignments where possible (scale up/down stability).
    Steady,
    /// Ignore previous assignments (`rescheduleTriggeredAt` after `lastScheduledTime`).
    Fresh,
}

/// Input of an assign call.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AssignInput<'a> {
    /// The binding.
    pub binding: &'a BindingContext<'a>,
    /// Selected clusters, in selection order.
    pub clusters: &'a [ClusterDetail<'a>],
    /// Replicas to place on `clusters` (the binding's replicas, or one overflow tier's share).
    pub replicas: i32,
    /// Steady or fresh.
    pub mode: AssignMode,
}

impl<'a> AssignInput<'a> {
    /// Build the input (the framework does this; tests and other hosts may too).
    pub fn new(
        binding: &'a BindingContext<'a>,
        clusters: &'a [ClusterDetail<'a>],
        replicas: i32,
        mode: AssignMode,
    ) -> Self {
        AssignInput {
            binding,
            clusters,
            replicas,
            mode,
        }
    }
}

/// An assign plugin's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// Replicas per cluster (zero-replica entries are dropped by the framework).
    Assigned(Vec<TargetCluster>),
    /// Not this plugin's strategy: ask the next assign plugin in the profile.
    Skip,
    /// The replicas cannot be placed (e.g. not enough capacity); the message is the reason.
    Unschedulable(String),
}

/// Assign extension point: divide the binding's replicas over the selected clusters.
pub trait AssignPlugin: Plugin {
    /// Assign replicas.
    ///
    /// # Errors
    /// A plugin fault.
    fn assign(&self, input: &AssignInput<'_>) -> Result<Assignment, PluginError>;
}

/// Input of an override call: the manifest destined for one cluster.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct OverrideInput<'a> {
    /// The manifest after earlier overriders (and the per-cluster replica revision).
    pub object: &'a Value,
    /// The target cluster.
    pub cluster: &'a Cluster,
    /// Override policies known to the engine (ClusterOverridePolicies and OverridePolicies).
    pub policies: &'a crate::overrides::OverridePolicies,
    /// The profile's expression engine, for policies with CEL fields (see [`crate::expression`]).
    pub expressions: Option<&'a dyn ExpressionEngine>,
}

impl<'a> OverrideInput<'a> {
    /// Build the input (the framework does this; tests and other hosts may too).
    pub fn new(
        object: &'a Value,
        cluster: &'a Cluster,
        policies: &'a crate::overrides::OverridePolicies,
    ) -> Self {
        OverrideInput {
            object,
            cluster,
            policies,
            expressions: None,
        }
    }

    /// Set the expression engine.
    pub fn with_expressions(mut self, engine: Option<&'a dyn ExpressionEngine>) -> Self {
        self.expressions = engine;
        self
    }
}

/// One override policy's contribution, recorded on the Work (`policy.karmada.io/applied-overrides`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedOverride {
    /// The policy name.
    pub policy_name: String,
    /// The overriders applied, as written in the policy.
    pub overriders: Value,
}

/// Whether an applied override came from a cluster-scoped or a namespaced policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideScope {
    /// A ClusterOverridePolicy.
    Cluster,
    /// An OverridePolicy.
    Namespaced,
}

/// An overrider's decision: JSON patch operations, to be applied in order to the input object, and
/// the provenance to record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OverridePatch {
    /// RFC 6902 operations.
    pub patch: Vec<json_patch::PatchOperation>,
    /// What was applied, by scope.
    pub applied: Vec<(OverrideScope, AppliedOverride)>,
}

/// Override extension point: rewrite the manifest for one cluster.
pub trait OverridePlugin: Plugin {
    /// Compute the patch for `input.object` on `input.cluster`.
    ///
    /// # Errors
    /// A plugin fault, or an override that cannot be applied (Karmada fails the Work for that cluster).
    fn override_manifest(&self, input: &OverrideInput<'_>) -> Result<OverridePatch, PluginError>;
}

/// One candidate victim of binding preemption on one cluster (see [`crate::preemption`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct VictimCandidate<'a> {
    /// The binding that would lose the cluster.
    pub binding: &'a ResourceBinding,
    /// Its `spec.schedulePriority.priority` (always below the preemptor's).
    pub priority: i32,
    /// Its pods on the cluster: its replicas there, or its component set's pods for a
    /// multi-component workload placed whole.
    pub replicas: i32,
    /// Its `creationTimestamp`, epoch seconds (`i64::MIN` when absent or unreadable).
    pub created: i64,
}

impl<'a> VictimCandidate<'a> {
    /// Build a candidate (the preemption search does this; tests and other hosts may too).
    pub fn new(binding: &'a ResourceBinding, priority: i32, replicas: i32, created: i64) -> Self {
        VictimCandidate {
            binding,
            priority,
            replicas,
            created,
        }
    }
}

/// Input of a victim-choice call: the preemptor, the cluster it would be freed on, and the
/// bindings that could be evicted there, in the built-in order (lowest priority, then most
/// replicas, then newest, then name).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct VictimInput<'a> {
    /// The binding that fits nowhere and would preempt.
    pub preemptor: &'a ResourceBinding,
    /// The cluster being freed.
    pub cluster: &'a Cluster,
    /// The candidates, all of lower priority than the preemptor.
    pub candidates: &'a [VictimCandidate<'a>],
}

impl<'a> VictimInput<'a> {
    /// Build the input (the preemption search does this; tests and other hosts may too).
    pub fn new(
        preemptor: &'a ResourceBinding,
        cluster: &'a Cluster,
        candidates: &'a [VictimCandidate<'a>],
    ) -> Self {
        VictimInput {
            preemptor,
            cluster,
            candidates,
        }
    }
}

/// Binding preemption's victim choice (a profile's `spec.preemption.plugin`): which candidates on
/// one cluster may be evicted, and in which order they are taken. Not one of Karmada's extension
/// points: binding preemption is Flotilla's (see [`crate::preemption`]).
pub trait VictimPlugin: Plugin {
    /// Positions in `input.candidates` that may be evicted, in the order to take them (within a
    /// priority: the search still takes lower priorities first); the others are spared. Each
    /// position at most once.
    ///
    /// # Errors
    /// A plugin fault; the preemption search applies the plugin's failure policy.
    fn choose(&self, input: &VictimInput<'_>) -> Result<Vec<usize>, PluginError>;
}

/// What to do when a plugin faults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FailurePolicy {
    /// The binding's attempt fails with the fault as reason (Karmada parity; default).
    #[default]
    Fail,
    /// The plugin is skipped for this binding and the fault recorded.
    Ignore,
}

/// A plugin in a profile, with its failure policy (and weight, for scores).
pub struct Slot<P: ?Sized> {
    /// The plugin.
    pub plugin: Arc<P>,
    /// Fault handling.
    pub failure_policy: FailurePolicy,
    /// Score weight (scores only; 1 otherwise).
    pub weight: i64,
}

impl<P: ?Sized> Clone for Slot<P> {
    fn clone(&self) -> Self {
        Slot {
            plugin: Arc::clone(&self.plugin),
            failure_policy: self.failure_policy,
            weight: self.weight,
        }
    }
}

impl<P: ?Sized> Slot<P> {
    /// A slot with `Fail` policy and weight 1.
    pub fn new(plugin: Arc<P>) -> Self {
        Slot {
            plugin,
            failure_policy: FailurePolicy::Fail,
            weight: 1,
        }
    }

    /// Set the failure policy.
    pub fn with_failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// Set the score weight.
    pub fn with_weight(mut self, weight: i64) -> Self {
        self.weight = weight;
        self
    }
}

/// A scheduler profile: the ordered plugins per extension point. `spec.schedulerName` picks it.
#[derive(Clone, Default)]
pub struct Profile {
    /// The scheduler name this profile answers to (`default-scheduler`).
    pub name: String,
    /// Filters, run in order; the first unschedulable verdict is the cluster's reason.
    pub filters: Vec<Slot<dyn FilterPlugin>>,
    /// Scores, summed with weights.
    pub scores: Vec<Slot<dyn ScorePlugin>>,
    /// Selectors, run in order, each narrowing the previous selection.
    pub selects: Vec<Slot<dyn SelectPlugin>>,
    /// Assigners, asked in order until one does not skip.
    pub assigners: Vec<Slot<dyn AssignPlugin>>,
    /// Overriders, applied in order.
    pub overriders: Vec<Slot<dyn OverridePlugin>>,
    /// Evaluates the expressions (CEL) in policies' extension fields; `None`: such policies fault.
    pub expressions: Option<Arc<dyn ExpressionEngine>>,
    /// The versions of loaded (non built-in) plugins, `(name, "sha256:<hex>")` in name order:
    /// what a placement records in [`flotilla_api::labels::PLACED_BY`]. Empty for built-ins only.
    pub versions: Vec<(String, String)>,
    /// How binding preemption chooses victims (`spec.preemption` of the profile document).
    pub preemption: crate::preemption::VictimRules,
    /// The plugin built from `spec.preemption.plugin` (a Wasm module), with its failure policy.
    pub victims: Option<Slot<dyn VictimPlugin>>,
}

impl Profile {
    /// `name=sha256:…` of every loaded plugin, comma-separated; `None` when there is none.
    pub fn placed_by(&self) -> Option<String> {
        (!self.versions.is_empty()).then(|| {
            self.versions
                .iter()
                .map(|(n, d)| format!("{n}={d}"))
                .collect::<Vec<_>>()
                .join(",")
        })
    }
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn names<P: ?Sized + Plugin>(s: &[Slot<P>]) -> Vec<&str> {
            s.iter().map(|s| s.plugin.name()).collect()
        }
        f.debug_struct("Profile")
            .field("name", &self.name)
            .field("filters", &names(&self.filters))
            .field("scores", &names(&self.scores))
            .field("selects", &names(&self.selects))
            .field("assigners", &names(&self.assigners))
            .field("overriders", &names(&self.overriders))
            .field(
                "expressions",
                &self.expressions.as_ref().map(|e| e.language()),
            )
            .field("versions", &self.versions)
            .field(
                "victims",
                &self.victims.as_ref().map(|s| s.plugin.name().to_owned()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_encodings_are_made_once_per_binding_and_never_for_another() {
        let (a, b) = (
            ResourceBindingSpec {
                replicas: 1,
                ..Default::default()
            },
            ResourceBindingSpec {
                replicas: 2,
                ..Default::default()
            },
        );
        let placement = Placement::default();
        let encodings = SharedEncodings::default();
        let ctx_a = BindingContext::new(&a, &placement, None).with_encodings(Some(&encodings));
        let ctx_b = BindingContext::new(&b, &placement, None).with_encodings(Some(&encodings));
        let mut made = 0;
        let mut json = |ctx: &BindingContext<'_>, members: SpecMembers| {
            encodings
                .json(ctx, members, || {
                    made += 1;
                    format!("{}/{members:?}", ctx.spec.replicas).into_bytes()
                })
                .into_owned()
        };
        let all = SpecMembers::ALL;
        let some = SpecMembers::named(&["replicas"]).unwrap();
        assert_eq!(json(&ctx_a, all), b"1/SpecMembers(65535)");
        assert_eq!(json(&ctx_a, all), b"1/SpecMembers(65535)");
        // Another member set: its own encoding, kept beside the first.
        assert_eq!(json(&ctx_a, some), b"1/SpecMembers(8)");
        assert_eq!(json(&ctx_a, some), b"1/SpecMembers(8)");
        // Another binding through the same encodings: its own JSON, made each time, not cached.
        assert_eq!(json(&ctx_b, all), b"2/SpecMembers(65535)");
        assert_eq!(json(&ctx_b, all), b"2/SpecMembers(65535)");
        assert_eq!(json(&ctx_a, all), b"1/SpecMembers(65535)");
        // More member sets than slots: the extra ones are encoded per call.
        for name in ["clusters", "components", "failover", "suspension"] {
            let set = SpecMembers::named(&[name]).unwrap();
            json(&ctx_a, set);
            json(&ctx_a, set);
        }
        assert_eq!(made, 4 + 2 + 2 * 2);
    }
}
