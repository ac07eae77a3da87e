//! Multi-component workloads (Karmada's `MultiplePodTemplatesScheduling`): how many complete
//! component sets fit in a cluster, as Karmada's general estimator computes it
//! (`GeneralEstimator.MaxAvailableComponentSets`, `pkg/estimator/client/general.go`, v1.18.2), and
//! when the scheduler uses it (`isMultiTemplateSchedulingApplicable`).
//!
//! Per cluster:
//! * no `status.resourceSummary` → 0; `allowedPods ≤ 0` → 0;
//! * `podsPerSet = Σ component.replicas`; `≤ 0` → `allowedPods`;
//! * `podBound = int32(allowedPods / podsPerSet)`;
//! * summary bound: per resource, `perSet = Σ replicas × request` and
//!   `available = allocatable − allocated − allocating`, both measured as Karmada's
//!   `quantityAsInt64` does (milli-units for decimal quantities, whole units for binary-suffixed
//!   ones: a `1G` request against an `8Gi` cluster compares milli-bytes with bytes, exactly as
//!   Karmada does); any requested resource with `available ≤ 0` → 0; otherwise
//!   `min(podBound, ⌊available / perSet⌋)`;
//! * model bound (gate `CustomizedClusterResourceModeling`, on by default) when
//!   `allocatableModelings` is non-empty: one virtual node per modelled node (grades ascending,
//!   the grade's `min` vector, 110 pods; Karmada's defaults when the cluster has no models, the
//!   lowest grade's minimums standardised to 0), whole sets packed first-fit, component by
//!   component, up to the summary bound; the smaller of the two wins. A negative node count is
//!   Karmada's model error: the summary bound stands.
//!
//! The packing works on runs of identical nodes (split as they fill), so a cluster reporting a
//! million nodes costs a handful of runs, not a million entries. It is bounded: past
//! [`SIMULATION_BUDGET`] node-run visits the summary bound stands, as on a model error (Karmada
//! would keep simulating; no real cluster gets near it).
//!
//! The scheduler-estimator's ResourceQuota plugin (`EstimateComponents`, gate
//! `ResourceQuotaEstimate`) is [`quota_sets`]: the member's quotas in the workload's namespace cap
//! the sets further.

use std::collections::BTreeMap;

use flotilla_api::cluster::{Cluster, ResourceSummary};
use flotilla_api::meta::{Quantity, QuantityRepr, ResourceList};
use flotilla_api::policy::spread_field;
use flotilla_api::work::ResourceBindingSpec;
use serde_json::Value;

use crate::estimator::{
    DEFAULT_MODELS, FreedPods, MAX_PODS_PER_NODE as MAX_PODS_PER_NODE_I64, allowed_pods, nano,
    truncate_i32,
};
use crate::quantity::{nano_to_milli, nano_to_value};

/// Node-run visits one cluster's packing may take before the summary bound is used instead.
pub const SIMULATION_BUDGET: u64 = 4_000_000;

/// Kubernetes' default pod capacity per node (resource-model virtual nodes).
const MAX_PODS_PER_NODE: i128 = MAX_PODS_PER_NODE_I64 as i128;

/// True when Karmada schedules `spec` as a multi-component workload
/// (`isMultiTemplateSchedulingApplicable`): it has components and a spread constraint by cluster
/// with `minGroups == maxGroups == 1` (the whole workload goes to exactly one cluster). Other
/// component workloads are scheduled like non-workloads.
pub fn applicable(spec: &ResourceBindingSpec) -> bool {
    !spec.components.is_empty()
        && spec.placement.as_ref().is_some_and(|p| {
            p.spread_constraints.iter().any(|sc| {
                sc.spread_by_field == spread_field::CLUSTER
                    && sc.min_groups == 1
                    && sc.max_groups == 1
            })
        })
}

/// One component of a binding, parsed once per binding.
#[derive(Debug, Clone)]
pub struct ComponentDemand {
    /// `component.name`.
    pub name: String,
    /// `component.replicas`.
    pub replicas: i32,
    /// `replicaRequirements.resourceRequest`, as given.
    requests: Vec<(String, Quantity)>,
}

impl ComponentDemand {
    /// What one replica requests (`replicaRequirements.resourceRequest`).
    pub fn requests(&self) -> &[(String, Quantity)] {
        &self.requests
    }
}

/// A binding's components, parsed once and reused for every cluster.
#[derive(Debug, Clone, Default)]
pub struct ComponentSet {
    /// The components, in the binding's order.
    pub components: Vec<ComponentDemand>,
}

fn quantity_of(v: &Value) -> Option<Quantity> {
    match v {
        Value::String(s) => Some(Quantity(QuantityRepr::String(s.clone()))),
        Value::Number(n) => n.as_i64().map(|i| Quantity(QuantityRepr::Int(i))),
        _ => None,
    }
}

impl ComponentSet {
    /// Parse `spec.components` (entries that are not objects count as empty components; replicas
    /// outside `int32` are clamped, like an API server would have rejected them).
    pub fn parse(components: &[Value]) -> Self {
        let components = components
            .iter()
            .map(|c| {
                let replicas = c.get("replicas").and_then(Value::as_i64).unwrap_or(0);
                let requests = c
                    .pointer("/replicaRequirements/resourceRequest")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), quantity_of(v)?)))
                            .collect()
                    })
                    .unwrap_or_default();
                ComponentDemand {
                    name: c
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    replicas: i32::try_from(replicas.clamp(0, i64::from(i32::MAX))).unwrap_or(0),
                    requests,
                }
            })
            .collect();
        ComponentSet { components }
    }

    /// `Σ replicas` (Karmada's `podsInSet`).
    pub fn pods_per_set(&self) -> i64 {
        self.components.iter().map(|c| i64::from(c.replicas)).sum()
    }

    /// Per resource, `Σ replicas × quantityAsInt64(request)` (`perSetRequirement`), with Go's
    /// wrapping `int64` arithmetic.
    fn per_set(&self) -> Vec<(&str, i64)> {
        let mut out: Vec<(&str, i64)> = Vec::new();
        for c in &self.components {
            for (name, q) in &c.requests {
                let add = as_int64(nano(q), is_binary(q)).wrapping_mul(i64::from(c.replicas));
                match out.iter_mut().find(|(n, _)| n == name) {
                    Some((_, v)) => *v = v.wrapping_add(add),
                    None => out.push((name, add)),
                }
            }
        }
        out
    }
}

/// A binary-suffixed quantity (`Ki` … `Ei`): Kubernetes' `BinarySI` format.
fn is_binary(q: &Quantity) -> bool {
    matches!(&q.0, QuantityRepr::String(s) if s.trim_end().ends_with('i'))
}

/// Karmada's `quantityAsInt64`: `MilliValue()` for decimal formats, `Value()` for binary.
fn as_int64(nano: i128, binary: bool) -> i64 {
    let v = if binary {
        nano_to_value(nano)
    } else {
        nano_to_milli(nano)
    };
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// `allocatable − allocated − allocating` for `name` as `quantityAsInt64` sees the result: its
/// format is the allocatable's, or the subtrahend's when the running value is zero (Go's
/// `Quantity.Sub`). `None` when the resource is not allocatable.
fn available(s: &ResourceSummary, name: &str) -> Option<i64> {
    let a = s.allocatable.get(name)?;
    let mut value = nano(a);
    let mut binary = is_binary(a);
    for list in [&s.allocated, &s.allocating] {
        if let Some(q) = list.get(name) {
            if value == 0 {
                binary = is_binary(q);
            }
            value -= nano(q);
        }
    }
    Some(as_int64(value, binary))
}

/// `GeneralEstimator.maxAvailableComponentSets` for one cluster.
pub fn max_sets(cluster: &Cluster, set: &ComponentSet) -> i32 {
    max_sets_traced(cluster, set).sets
}

/// [`max_sets`] with `freed` pods of a binding-preemption "what if" counted as extra model nodes
/// ([`FreedPods`]).
pub fn max_sets_with(cluster: &Cluster, set: &ComponentSet, freed: &[FreedPods]) -> i32 {
    estimate(cluster, set, freed).sets
}

/// How a cluster's component-set estimate was reached (for `flotilla explain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetsEstimate {
    /// The estimate.
    pub sets: i32,
    /// `allowedPods / podsPerSet`, before resources (None when the estimate stopped earlier).
    pub pod_bound: Option<i32>,
    /// The summary bound (None when the estimate stopped earlier).
    pub summary_bound: Option<i32>,
    /// The resource-model bound, when the model path ran.
    pub model_bound: Option<i32>,
}

/// [`max_sets`] with the intermediate bounds.
pub fn max_sets_traced(cluster: &Cluster, set: &ComponentSet) -> SetsEstimate {
    estimate(cluster, set, &[])
}

fn estimate(cluster: &Cluster, set: &ComponentSet, freed: &[FreedPods]) -> SetsEstimate {
    let mut est = SetsEstimate {
        sets: 0,
        pod_bound: None,
        summary_bound: None,
        model_bound: None,
    };
    let Some(summary) = cluster
        .status
        .as_ref()
        .and_then(|s| s.resource_summary.as_ref())
    else {
        return est;
    };
    let allowed = allowed_pods(summary);
    if allowed <= 0 {
        return est;
    }
    let pods_per_set = i128::from(set.pods_per_set());
    if pods_per_set <= 0 {
        est.sets = truncate_i32(allowed);
        return est;
    }
    let pod_bound = truncate_i32(allowed / pods_per_set);
    est.pod_bound = Some(pod_bound);
    let per_set = set.per_set();
    let mut max = pod_bound;
    if per_set.iter().any(|&(_, v)| v != 0) {
        for &(name, req) in &per_set {
            if req <= 0 {
                continue;
            }
            let avail = available(summary, name).unwrap_or(0);
            if avail <= 0 {
                est.summary_bound = Some(0);
                return est;
            }
            let bound = truncate_i32(i128::from(avail / req));
            max = max.min(bound);
        }
    }
    est.summary_bound = Some(max);
    est.sets = max;
    if summary.allocatable_modelings.is_empty() {
        return est;
    }
    if let Some(modelled) = model_sets(cluster, summary, set, max, freed) {
        est.model_bound = Some(modelled);
        est.sets = max.min(modelled);
    }
    est
}

/// Measure of one requested resource on a virtual node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Milli,
    Whole,
}

/// Karmada's `util.Resource` dimensions a request can use: cpu (milli), memory and
/// ephemeral-storage (units), scalar resources (units); anything else is not tracked.
fn unit_of(name: &str) -> Option<Unit> {
    match name {
        "cpu" => Some(Unit::Milli),
        "memory" | "ephemeral-storage" => Some(Unit::Whole),
        n if n.contains('/')
            || n.starts_with("hugepages-")
            || n.starts_with("attachable-volumes-") =>
        {
            Some(Unit::Whole)
        }
        _ => None,
    }
}

fn in_unit(nano: i128, unit: Unit) -> i128 {
    match unit {
        Unit::Milli => nano_to_milli(nano),
        Unit::Whole => nano_to_value(nano),
    }
}

/// A run of identical virtual nodes: capacity per tracked dimension (pods last) and how many.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    cap: Vec<i128>,
    count: i128,
}

/// `getMaximumSetsBasedOnResourceModels`: whole sets packed first-fit onto the model's virtual
/// nodes, at most `upper`; `None` on Karmada's model error or past the simulation budget.
fn model_sets(
    cluster: &Cluster,
    summary: &ResourceSummary,
    set: &ComponentSet,
    upper: i32,
    freed: &[FreedPods],
) -> Option<i32> {
    if summary.allocatable_modelings.iter().any(|a| a.count < 0) {
        return None;
    }
    // The dimensions any component requests (others never constrain), then pods.
    let mut dims: Vec<(&str, Unit)> = Vec::new();
    for c in &set.components {
        for (name, _) in &c.requests {
            if let Some(u) = unit_of(name)
                && !dims.iter().any(|(n, _)| n == name)
            {
                dims.push((name, u));
            }
        }
    }
    let pods_dim = dims.len();
    // Per-replica demand of each component over `dims` (requests summed per name).
    let demands: Vec<(i128, Vec<i128>)> = set
        .components
        .iter()
        .map(|c| {
            let mut d = vec![0i128; dims.len()];
            for (name, q) in &c.requests {
                if let Some(i) = dims.iter().position(|(n, _)| n == name) {
                    d[i] += in_unit(nano(q), dims[i].1);
                }
            }
            (i128::from(c.replicas), d)
        })
        .collect();

    let count_of = |grade: u32| -> i128 {
        summary
            .allocatable_modelings
            .iter()
            .filter(|a| a.grade == grade)
            .map(|a| i128::from(a.count))
            .sum()
    };
    let mut runs: Vec<Run> = Vec::new();
    let models = &cluster.spec.resource_models;
    let mut push = |cap: Vec<i128>, count: i128| {
        if count > 0 {
            runs.push(Run { cap, count });
        }
    };
    if models.is_empty() {
        for &(grade, cpu, mem) in &DEFAULT_MODELS {
            let mut cap: Vec<i128> = dims
                .iter()
                .map(|(n, _)| match *n {
                    "cpu" => cpu,
                    "memory" => mem,
                    _ => 0,
                })
                .collect();
            cap.push(MAX_PODS_PER_NODE);
            push(cap, count_of(grade));
        }
    } else {
        let lowest = models.iter().map(|m| m.grade).min().unwrap_or(0);
        let mut grades: Vec<u32> = models.iter().map(|m| m.grade).collect();
        grades.sort_unstable();
        grades.dedup();
        for grade in grades {
            // Grades are a map in Karmada: the last model of a grade wins.
            let Some(model) = models.iter().rev().find(|m| m.grade == grade) else {
                continue;
            };
            let mut cap: Vec<i128> = dims
                .iter()
                .map(|&(n, u)| {
                    if grade == lowest {
                        return 0;
                    }
                    model
                        .ranges
                        .iter()
                        .rev()
                        .find(|r| r.name == n)
                        .map_or(0, |r| in_unit(nano(&r.min), u))
                })
                .collect();
            cap.push(MAX_PODS_PER_NODE);
            push(cap, count_of(grade));
        }
    }
    // Freed pods of a preemption "what if": one node each, of exactly their requests.
    for f in freed {
        let mut cap: Vec<i128> = dims
            .iter()
            .map(|&(n, u)| {
                f.requests
                    .iter()
                    .find(|(name, _)| name == n)
                    .map_or(0, |&(_, v)| in_unit(v, u))
            })
            .collect();
        cap.push(MAX_PODS_PER_NODE);
        push(cap, f.count);
    }

    let mut budget = SIMULATION_BUDGET;
    let mut sets: i32 = 0;
    while sets < upper {
        for (replicas, demand) in &demands {
            match place(&mut runs, *replicas, demand, pods_dim, &mut budget)? {
                true => {}
                false => return Some(sets),
            }
        }
        sets += 1;
    }
    Some(sets)
}

/// How many replicas of `demand` (plus one pod each) fit on a node of capacity `cap`
/// (`Resource.MaxDivided`).
fn per_node(cap: &[i128], demand: &[i128], pods_dim: usize) -> i128 {
    let mut n = cap[pods_dim];
    for (c, d) in cap.iter().zip(demand) {
        if *d > 0 {
            n = n.min(c.max(&0) / d);
        }
    }
    n.max(0)
}

fn consume(cap: &[i128], demand: &[i128], pods_dim: usize, n: i128) -> Vec<i128> {
    let mut out: Vec<i128> = cap
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let d = if i == pods_dim {
                1
            } else {
                demand.get(i).copied().unwrap_or(0)
            };
            (c - d.saturating_mul(n)).max(0)
        })
        .collect();
    out.truncate(cap.len());
    out
}

/// First-fit one component (`scheduleComponent`): nodes in order each take as many replicas as
/// fit until all are placed. `Some(false)` when they do not all fit; `None` past the budget.
fn place(
    runs: &mut Vec<Run>,
    replicas: i128,
    demand: &[i128],
    pods_dim: usize,
    budget: &mut u64,
) -> Option<bool> {
    let mut remaining = replicas;
    if remaining <= 0 {
        return Some(true);
    }
    let mut i = 0;
    while i < runs.len() {
        *budget = budget.checked_sub(1)?;
        let per = per_node(&runs[i].cap, demand, pods_dim);
        if per == 0 {
            i += 1;
            continue;
        }
        let run = runs[i].clone();
        let full = run.count.min(remaining / per);
        remaining -= full * per;
        let mut replacement: Vec<Run> = Vec::with_capacity(3);
        if full > 0 {
            replacement.push(Run {
                cap: consume(&run.cap, demand, pods_dim, per),
                count: full,
            });
        }
        let mut untouched = run.count - full;
        if remaining > 0 && untouched > 0 {
            replacement.push(Run {
                cap: consume(&run.cap, demand, pods_dim, remaining),
                count: 1,
            });
            remaining = 0;
            untouched -= 1;
        }
        if untouched > 0 {
            replacement.push(Run {
                cap: run.cap,
                count: untouched,
            });
        }
        let added = replacement.len();
        runs.splice(i..=i, replacement);
        i += added;
        if remaining == 0 {
            merge(runs);
            return Some(true);
        }
    }
    merge(runs);
    Some(false)
}

/// Merge adjacent runs of equal capacity (keeps the run list short as nodes fill up).
fn merge(runs: &mut Vec<Run>) {
    let mut out: Vec<Run> = Vec::with_capacity(runs.len());
    for r in runs.drain(..) {
        match out.last_mut() {
            Some(last) if last.cap == r.cap => last.count += r.count,
            _ => out.push(r),
        }
    }
    *runs = out;
}

// ------------------------------------------------------------------------------ ResourceQuota

/// `requests.`/`limits.` prefixes of quota resource names.
const REQUESTS_PREFIX: &str = "requests.";
const LIMITS_PREFIX: &str = "limits.";

fn is_extended(name: &str) -> bool {
    // `IsExtendedResourceName`: not native (no `kubernetes.io/` prefix, contains a `/`), and
    // not a `requests.`-prefixed name.
    !name.starts_with("kubernetes.io/")
        && !name.contains(".kubernetes.io/")
        && name.contains('/')
        && !name.starts_with(REQUESTS_PREFIX)
}

/// One member `ResourceQuota` as the scheduler-estimator's quota plugin reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuotaView {
    /// `status.hard`.
    pub hard: ResourceList,
    /// `status.used`.
    pub used: ResourceList,
    /// `spec.scopes` (each an `Exists` selector) then `spec.scopeSelector.matchExpressions`.
    /// Empty: the quota applies to every workload; otherwise only to those whose
    /// `priorityClassName` one of them matches (Karmada's `quotaAppliesToPriority`).
    pub selectors: Vec<ScopeMatch>,
}

impl QuotaView {
    fn applies_to(&self, replica_requirements: Option<&Value>) -> bool {
        self.selectors.is_empty()
            || replica_requirements.is_some_and(|rr| {
                let class = rr
                    .get("priorityClassName")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.selectors.iter().any(|s| s.matches(class))
            })
    }
}

/// The PriorityClass scope of a quota.
#[derive(Debug, Clone, PartialEq)]
pub enum ScopeMatch {
    /// Scopes other than PriorityClass only (never match a component).
    Never,
    /// `PriorityClass` `Exists`: any non-empty priority class.
    AnyPriorityClass,
    /// `PriorityClass` `In` these values.
    In(Vec<String>),
    /// `PriorityClass` `NotIn` these values.
    NotIn(Vec<String>),
    /// `PriorityClass` `DoesNotExist`.
    NoPriorityClass,
}

impl ScopeMatch {
    fn matches(&self, priority_class: &str) -> bool {
        match self {
            ScopeMatch::Never => false,
            ScopeMatch::AnyPriorityClass => !priority_class.is_empty(),
            ScopeMatch::In(v) => {
                !priority_class.is_empty() && v.iter().any(|x| x == priority_class)
            }
            ScopeMatch::NotIn(v) => {
                priority_class.is_empty() || !v.iter().any(|x| x == priority_class)
            }
            ScopeMatch::NoPriorityClass => priority_class.is_empty(),
        }
    }
}

/// The scheduler-estimator's `ResourceQuotaEstimator.EstimateComponents` over the quotas of the
/// workload's namespace in one member: per quota, the free `requests.*`/compute/extended
/// resources (`hard − used`) divided by the per-set demand of the components the quota applies
/// to; the minimum over quotas. `i32::MAX` when no quota constrains the set.
/// Takes any sequence of quotas, so a member's are read in place.
pub fn quota_sets<'a>(
    quotas: impl IntoIterator<Item = &'a QuotaView>,
    components: &[Value],
) -> i32 {
    let mut best = i32::MAX;
    for q in quotas {
        let matched: Vec<&Value> = components
            .iter()
            .filter(|c| q.applies_to(c.get("replicaRequirements")))
            .collect();
        if matched.is_empty() {
            continue;
        }
        // Free resources, keyed by the trimmed name (`requests.cpu` → `cpu`).
        let mut free: Vec<(String, i128)> = Vec::new();
        for (name, hard) in &q.hard {
            let compute = matches!(
                name.as_str(),
                "cpu" | "memory" | "requests.cpu" | "requests.memory"
            );
            let extended =
                is_extended(name) || name.strip_prefix(REQUESTS_PREFIX).is_some_and(is_extended);
            if name.starts_with(LIMITS_PREFIX) || !(compute || extended) {
                continue;
            }
            let Some(used) = q.used.get(name) else {
                continue;
            };
            let trimmed = name.strip_prefix(REQUESTS_PREFIX).unwrap_or(name);
            free.push((trimmed.to_owned(), nano(hard) - nano(used)));
        }
        if free.is_empty() {
            continue;
        }
        let parsed = ComponentSet::parse(&matched.into_iter().cloned().collect::<Vec<_>>());
        let mut sets = i128::from(i64::MAX);
        let mut constrained = false;
        for (name, avail) in &free {
            // Per replica in the resource's unit (CPU milli, others whole, rounded up), then
            // times replicas (`aggregateComponentRequirements`).
            let unit = if name == "cpu" {
                Unit::Milli
            } else {
                Unit::Whole
            };
            let per_set: i128 = parsed
                .components
                .iter()
                .map(|c| {
                    c.requests
                        .iter()
                        .filter(|(n, _)| n == name)
                        .map(|(_, q)| in_unit(nano(q), unit) * i128::from(c.replicas))
                        .sum::<i128>()
                })
                .sum();
            if per_set <= 0 {
                continue;
            }
            constrained = true;
            sets = sets.min(in_unit(*avail, unit).max(0) / per_set);
        }
        if constrained {
            best = best.min(i32::try_from(sets).unwrap_or(i32::MAX));
        }
    }
    best
}

/// Largest [`flotilla_api::labels::RESOURCE_QUOTAS`] annotation read (Kubernetes caps all of an object's
/// annotations together at 256 KiB).
pub const MAX_QUOTAS_TEXT: usize = 256 * 1024;
/// Most quotas one member's annotation may list.
pub const MAX_QUOTAS: usize = 1024;

/// A member's ResourceQuotas by namespace, read from its Cluster's [`flotilla_api::labels::RESOURCE_QUOTAS`]
/// annotation: the scheduler-estimator's `ResourceQuotaEstimator` (Karmada, gate
/// `ResourceQuotaEstimate`) for the replica and component-set estimates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberQuotas {
    by_namespace: BTreeMap<String, Vec<QuotaView>>,
}

impl MemberQuotas {
    /// The quotas `cluster`'s annotation lists; `None` without the annotation.
    ///
    /// # Errors
    /// The annotation is too large, not a JSON array of ResourceQuotas, or holds a malformed
    /// quantity (the message names the entry and field, never the text).
    pub fn of(cluster: &Cluster) -> Result<Option<Self>, String> {
        match cluster
            .metadata
            .annotations
            .get(flotilla_api::labels::RESOURCE_QUOTAS)
        {
            None => Ok(None),
            Some(text) => Self::parse(text).map(Some),
        }
    }

    /// Parse the annotation's text.
    ///
    /// # Errors
    /// As [`MemberQuotas::of`].
    pub fn parse(text: &str) -> Result<Self, String> {
        let key = flotilla_api::labels::RESOURCE_QUOTAS;
        if text.len() > MAX_QUOTAS_TEXT {
            return Err(format!(
                "metadata.annotations[{key}]: {} bytes, more than {MAX_QUOTAS_TEXT}",
                text.len()
            ));
        }
        let entries: Vec<QuotaEntry> = serde_json::from_str(text).map_err(|e| {
            format!(
                "metadata.annotations[{key}]: not a list of ResourceQuotas (line {}, column {}: {})",
                e.line(),
                e.column(),
                serde_error_kind(&e)
            )
        })?;
        if entries.len() > MAX_QUOTAS {
            return Err(format!(
                "metadata.annotations[{key}]: {} quotas, more than {MAX_QUOTAS}",
                entries.len()
            ));
        }
        let mut by_namespace: BTreeMap<String, Vec<QuotaView>> = BTreeMap::new();
        for (i, e) in entries.into_iter().enumerate() {
            let at = |field: &str| format!("metadata.annotations[{key}][{i}].{field}");
            for (field, list) in [
                ("status.hard", &e.status.hard),
                ("status.used", &e.status.used),
            ] {
                for (name, q) in list {
                    let ok = match &q.0 {
                        QuantityRepr::String(s) => crate::quantity::parse_nano(s).is_ok(),
                        QuantityRepr::Int(_) => true,
                    };
                    if !ok {
                        return Err(format!(
                            "{}: not a quantity",
                            at(&format!("{field}[{name}]"))
                        ));
                    }
                }
            }
            let mut selectors: Vec<ScopeMatch> = e
                .spec
                .scopes
                .iter()
                .map(|scope| scope_match(scope, "Exists", &[]))
                .collect();
            if let Some(sel) = &e.spec.scope_selector {
                selectors.extend(
                    sel.match_expressions
                        .iter()
                        .map(|r| scope_match(&r.scope_name, &r.operator, &r.values)),
                );
            }
            by_namespace
                .entry(e.namespace)
                .or_default()
                .push(QuotaView {
                    hard: e.status.hard,
                    used: e.status.used,
                    selectors,
                });
        }
        Ok(MemberQuotas { by_namespace })
    }

    /// The quotas of `namespace`; every quota for `""` (the lister's `NamespaceAll`).
    fn in_namespace<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a QuotaView> {
        let (one, all) = if namespace.is_empty() {
            (None, Some(self.by_namespace.values().flatten()))
        } else {
            (self.by_namespace.get(namespace), None)
        };
        one.into_iter().flatten().chain(all.into_iter().flatten())
    }

    /// `ResourceQuotaEstimator.Estimate`: replicas with `replica_requirements` the quotas of
    /// `namespace` still admit; `i32::MAX` when none constrains them (and without requirements).
    pub fn replicas(&self, namespace: &str, replica_requirements: Option<&Value>) -> i32 {
        let Some(rr) = replica_requirements else {
            return i32::MAX;
        };
        let one = serde_json::json!([{"name": "", "replicas": 1, "replicaRequirements": rr}]);
        quota_sets(
            self.in_namespace(namespace),
            one.as_array().map(Vec::as_slice).unwrap_or_default(),
        )
    }

    /// `ResourceQuotaEstimator.EstimateComponents`: complete sets of `components` the quotas of
    /// `namespace` admit; `i32::MAX` when none constrains them or `namespace` is empty.
    pub fn sets(&self, namespace: &str, components: &[Value]) -> i32 {
        if namespace.is_empty() || components.is_empty() {
            return i32::MAX;
        }
        quota_sets(self.in_namespace(namespace), components)
    }
}

/// The kind of a JSON error, without the text it was reading.
fn serde_error_kind(e: &serde_json::Error) -> &'static str {
    use serde_json::error::Category;
    match e.classify() {
        Category::Io => "read error",
        Category::Syntax => "syntax error",
        Category::Data => "unexpected shape",
        Category::Eof => "unexpected end",
    }
}

/// A scope selector requirement as Karmada's `matchesScope` reads it: only `PriorityClass` can
/// match a workload; unknown operators never match (Karmada logs and skips them).
fn scope_match(scope: &str, operator: &str, values: &[String]) -> ScopeMatch {
    if scope != "PriorityClass" {
        return ScopeMatch::Never;
    }
    match operator {
        "Exists" => ScopeMatch::AnyPriorityClass,
        "In" => ScopeMatch::In(values.to_vec()),
        "NotIn" => ScopeMatch::NotIn(values.to_vec()),
        "DoesNotExist" => ScopeMatch::NoPriorityClass,
        _ => ScopeMatch::Never,
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct QuotaEntry {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    #[allow(dead_code)]
    name: String,
    #[serde(default)]
    spec: QuotaSpec,
    #[serde(default)]
    status: QuotaStatus,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct QuotaSpec {
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    scope_selector: Option<ScopeSelector>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ScopeSelector {
    #[serde(default)]
    match_expressions: Vec<ScopeRequirement>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScopeRequirement {
    scope_name: String,
    operator: String,
    #[serde(default)]
    values: Vec<String>,
}

#[derive(serde::Deserialize, Default)]
struct QuotaStatus {
    #[serde(default)]
    hard: ResourceList,
    #[serde(default)]
    used: ResourceList,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(spec: Value, summary: Value) -> Cluster {
        serde_json::from_value(
            json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "m1"}, "spec": spec, "status": {"resourceSummary": summary}}),
        )
        .expect("cluster")
    }

    fn comps(v: Value) -> ComponentSet {
        ComponentSet::parse(v.as_array().expect("array"))
    }

    fn flink(tm_replicas: i32) -> ComponentSet {
        comps(json!([
            {"name": "jobmanager", "replicas": 1,
             "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "2Gi"}}},
            {"name": "taskmanager", "replicas": tm_replicas,
             "replicaRequirements": {"resourceRequest": {"cpu": "2", "memory": "4Gi"}}}
        ]))
    }

    #[test]
    fn summary_bound_is_per_set_demand() {
        // One set: 1 + 2×2 = 5 CPU, 2Gi + 2×4Gi = 10Gi, 3 pods.
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "100", "cpu": "16", "memory": "64Gi"},
                   "allocated": {"cpu": "1", "memory": "4Gi"}}),
        );
        // CPU: 15000m / 5000m = 3; memory: 60Gi / 10Gi = 6; pods: 100 / 3 = 33.
        assert_eq!(max_sets(&c, &flink(2)), 3);
        // Pods bind: 7 pods left / 3 per set = 2.
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "7", "cpu": "100", "memory": "640Gi"}}),
        );
        assert_eq!(max_sets(&c, &flink(2)), 2);
    }

    #[test]
    fn missing_or_exhausted_resource_is_zero() {
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "100", "cpu": "16"}}),
        );
        assert_eq!(max_sets(&c, &flink(2)), 0, "memory not allocatable");
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "100", "cpu": "16", "memory": "8Gi"},
                   "allocating": {"memory": "8Gi"}}),
        );
        assert_eq!(max_sets(&c, &flink(2)), 0);
        assert_eq!(
            max_sets(
                &cluster(json!({}), json!({"allocatable": {"pods": "0"}})),
                &flink(2)
            ),
            0
        );
    }

    #[test]
    fn no_pods_per_set_is_allowed_pods() {
        let c = cluster(json!({}), json!({"allocatable": {"pods": "42"}}));
        let s = comps(json!([{"name": "a", "replicas": 0}]));
        assert_eq!(max_sets(&c, &s), 42);
        // No requirements: pods only.
        let s = comps(json!([{"name": "a", "replicas": 2}, {"name": "b", "replicas": 4}]));
        assert_eq!(max_sets(&c, &s), 7);
    }

    #[test]
    fn decimal_and_binary_formats_are_measured_as_karmada_does() {
        // A decimal `G` request is compared in milli-units against a binary `Gi` capacity in
        // bytes: Karmada's quantityAsInt64 makes that fit nothing.
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "100", "memory": "64Gi"}}),
        );
        let s = comps(json!([{"name": "a", "replicas": 1,
            "replicaRequirements": {"resourceRequest": {"memory": "1G"}}}]));
        assert_eq!(max_sets(&c, &s), 0);
        let s = comps(json!([{"name": "a", "replicas": 1,
            "replicaRequirements": {"resourceRequest": {"memory": "1Gi"}}}]));
        assert_eq!(max_sets(&c, &s), 64);
    }

    #[test]
    fn models_pack_whole_sets_first_fit() {
        // Two grade-1 nodes (4 CPU) and one grade-2 node (8 CPU). The summary says 100 CPU.
        let models = json!({"resourceModels": [
            {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "4"}]},
            {"grade": 1, "ranges": [{"name": "cpu", "min": "4", "max": "8"}]},
            {"grade": 2, "ranges": [{"name": "cpu", "min": "8", "max": "16"}]}]});
        let c = cluster(
            models,
            json!({"allocatable": {"pods": "100", "cpu": "100"},
                   "allocatableModelings": [{"grade": 0, "count": 5}, {"grade": 1, "count": 2}, {"grade": 2, "count": 1}]}),
        );
        // A set: one 3-CPU leader and two 2-CPU workers (7 CPU).
        let s = comps(json!([
            {"name": "leader", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "3"}}},
            {"name": "worker", "replicas": 2, "replicaRequirements": {"resourceRequest": {"cpu": "2"}}}]));
        // Set 1: leader on node A (4→1), workers on B (4→0). Set 2: leader on C (8→5), workers
        // on C (5→1). Set 3: no node has 3 CPU left → 2 sets (the summary alone says 14).
        let e = max_sets_traced(&c, &s);
        assert_eq!(e.summary_bound, Some(14));
        assert_eq!(e.model_bound, Some(2));
        assert_eq!(e.sets, 2);
    }

    #[test]
    fn models_are_bounded_by_the_summary_and_by_110_pods() {
        let models = json!({"resourceModels": [
            {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "1"}]},
            {"grade": 1, "ranges": [{"name": "cpu", "min": "1000", "max": "2000"}]}]});
        let c = cluster(
            models,
            json!({"allocatable": {"pods": "1000", "cpu": "100000"},
                   "allocatableModelings": [{"grade": 1, "count": 1}]}),
        );
        // 1m CPU each: CPU allows a million, the node 110 pods; 2 pods per set → 55.
        let s = comps(json!([{"name": "a", "replicas": 2,
            "replicaRequirements": {"resourceRequest": {"cpu": "1m"}}}]));
        assert_eq!(max_sets(&c, &s), 55);
        // Summary bound smaller than the model's.
        let c2 = cluster(
            json!({"resourceModels": [
                {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "1"}]},
                {"grade": 1, "ranges": [{"name": "cpu", "min": "1000", "max": "2000"}]}]}),
            json!({"allocatable": {"pods": "10", "cpu": "100000"},
                   "allocatableModelings": [{"grade": 1, "count": 1}]}),
        );
        assert_eq!(max_sets(&c2, &s), 5);
    }

    #[test]
    fn huge_node_counts_stay_cheap_and_negative_counts_fall_back() {
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "1000000000", "cpu": "1000000", "memory": "100000Gi"},
                   "allocatableModelings": [{"grade": 2, "count": 1_000_000_000_i64}]}),
        );
        let start = std::time::Instant::now();
        let sets = max_sets(&c, &flink(2));
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        // The summary bound: 1,000,000 CPU / 5 = 200,000 and 100000Gi / 10Gi = 10,000.
        assert!(sets <= 10_000, "{sets}");
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "100", "cpu": "16", "memory": "64Gi"},
                   "allocatableModelings": [{"grade": 2, "count": -1}]}),
        );
        assert_eq!(max_sets(&c, &flink(2)), 3);
    }

    #[test]
    fn default_models_apply_without_cluster_models() {
        // Grade 3 default: 4 CPU / 32Gi. Three such nodes; a set needs a 1-CPU/2Gi job manager
        // and two 2-CPU/4Gi task managers.
        let c = cluster(
            json!({}),
            json!({"allocatable": {"pods": "100", "cpu": "100", "memory": "1000Gi"},
                   "allocatableModelings": [{"grade": 3, "count": 3}]}),
        );
        // Set 1: JM on n1 (3 left), TMs: n1 takes 1 (1 left), n2 takes 1 (2 left).
        // Set 2: JM on n1 (0 left), TMs: n2 (0 left), n3 (2 left). Set 3: JM on n3 (1 left),
        // TMs: none fit → 2.
        assert_eq!(max_sets(&c, &flink(2)), 2);
    }

    #[test]
    fn applicable_needs_exactly_one_cluster() {
        let mut spec: ResourceBindingSpec = serde_json::from_value(json!({
            "resource": {"apiVersion": "x/v1", "kind": "K", "name": "n"},
            "components": [{"name": "a", "replicas": 1}],
            "placement": {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}]}}))
        .expect("spec");
        assert!(applicable(&spec));
        if let Some(p) = spec.placement.as_mut() {
            p.spread_constraints[0].max_groups = 2;
        }
        assert!(!applicable(&spec));
        spec.placement = None;
        assert!(!applicable(&spec));
    }

    #[test]
    fn cleared_clusters_reschedule_a_component_workload() {
        let placement = json!({"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}],
            "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}});
        let rb = |clusters: Value| -> flotilla_api::work::ResourceBinding {
            serde_json::from_value(
                json!({"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": "j", "namespace": "d",
                    "annotations": {"policy.karmada.io/applied-placement": placement.to_string()}},
                "spec": {"resource": {"apiVersion": "x/v1", "kind": "K", "name": "j"},
                    "components": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 1}],
                    "placement": placement, "clusters": clusters}}),
            )
            .expect("binding")
        };
        let snap = crate::pipeline::Snapshot::new(
            Vec::new(),
            std::sync::Arc::new(Vec::new()),
            crate::pipeline::Options::default(),
        );
        // Evicted by failover: nothing left → reschedule the whole set.
        assert!(crate::scheduler::needs_scheduling(&rb(json!([])), &snap));
        // Placed: steady.
        assert!(!crate::scheduler::needs_scheduling(
            &rb(json!([{"name": "m1"}])),
            &snap
        ));
    }

    #[test]
    fn quota_caps_sets_per_matching_quota() {
        let q = QuotaView {
            hard: [
                ("requests.cpu", "10"),
                ("requests.memory", "40Gi"),
                ("pods", "100"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into()))
            .collect(),
            used: [
                ("requests.cpu", "1"),
                ("requests.memory", "0"),
                ("pods", "3"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.into()))
            .collect(),
            selectors: Vec::new(),
        };
        let components = json!([
            {"name": "jobmanager", "replicas": 1,
             "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "2Gi"}}},
            {"name": "taskmanager", "replicas": 2,
             "replicaRequirements": {"resourceRequest": {"cpu": "2", "memory": "4Gi"}}}]);
        let c = components.as_array().expect("array");
        // 9 CPU free / 5 per set = 1; 40Gi / 10Gi = 4.
        assert_eq!(quota_sets(std::slice::from_ref(&q), c), 1);
        // A quota scoped to a priority class the components do not use does not apply.
        let scoped = QuotaView {
            selectors: vec![ScopeMatch::In(vec!["high".into()])],
            ..q.clone()
        };
        assert_eq!(quota_sets(&[scoped], c), i32::MAX);
        assert_eq!(quota_sets(&[], c), i32::MAX);
    }

    fn quotas(v: Value) -> MemberQuotas {
        MemberQuotas::parse(&v.to_string()).expect("quotas parse")
    }

    #[test]
    fn member_quotas_cap_replicas_per_namespace_and_priority_class() {
        let q = quotas(json!([
            {"namespace": "team-a", "name": "compute",
             "status": {"hard": {"requests.cpu": "4", "requests.memory": "8Gi", "pods": "10"},
                        "used": {"requests.cpu": "1500m", "requests.memory": "1Gi", "pods": "2"}}},
            {"namespace": "team-a", "name": "gpus",
             "spec": {"scopeSelector": {"matchExpressions": [
                 {"scopeName": "PriorityClass", "operator": "In", "values": ["batch"]}]}},
             "status": {"hard": {"requests.nvidia.com/gpu": "2"}, "used": {"requests.nvidia.com/gpu": "1"}}},
            {"namespace": "team-b", "name": "tiny",
             "status": {"hard": {"cpu": "1"}, "used": {"cpu": "0"}}}
        ]));
        let rr =
            json!({"resourceRequest": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}});
        // 2500m / 500m = 5; 7Gi / 1Gi = 7; the GPU quota is scoped to "batch": not this one.
        assert_eq!(q.replicas("team-a", Some(&rr)), 5);
        let batch = json!({"resourceRequest": {"cpu": "500m", "nvidia.com/gpu": "1"},
                           "priorityClassName": "batch"});
        assert_eq!(q.replicas("team-a", Some(&batch)), 1, "1 GPU left");
        assert_eq!(q.replicas("team-b", Some(&rr)), 2);
        assert_eq!(q.replicas("team-c", Some(&rr)), i32::MAX, "no quota there");
        assert_eq!(q.replicas("team-a", None), i32::MAX, "no requirements");
        // The lister's NamespaceAll: every quota counts.
        assert_eq!(q.replicas("", Some(&rr)), 2);
        // Over-used quota: nothing fits (never negative).
        let over = quotas(
            json!([{"namespace": "n", "status": {"hard": {"requests.cpu": "1"},
                                                               "used": {"requests.cpu": "2"}}}]),
        );
        assert_eq!(over.replicas("n", Some(&rr)), 0);
        // Components: only with a namespace.
        let comps = json!([{"name": "a", "replicas": 2, "replicaRequirements": {"resourceRequest": {"cpu": "1"}}}]);
        let c = comps.as_array().expect("array");
        assert_eq!(q.sets("team-a", c), 1);
        assert_eq!(q.sets("", c), i32::MAX);
    }

    #[test]
    fn scope_selectors_follow_karmadas_match_rules() {
        let scoped = |scope: Value| {
            quotas(json!([{"namespace": "n", "spec": scope,
                "status": {"hard": {"requests.cpu": "1"}, "used": {"requests.cpu": "0"}}}]))
        };
        let with =
            |class: &str| json!({"resourceRequest": {"cpu": "1"}, "priorityClassName": class});
        let exists = scoped(json!({"scopes": ["PriorityClass"]}));
        assert_eq!(exists.replicas("n", Some(&with("x"))), 1);
        assert_eq!(exists.replicas("n", Some(&with(""))), i32::MAX);
        let not_in = scoped(json!({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["x"]}]}}));
        assert_eq!(not_in.replicas("n", Some(&with("x"))), i32::MAX);
        assert_eq!(not_in.replicas("n", Some(&with(""))), 1);
        let absent = scoped(json!({"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}}));
        assert_eq!(absent.replicas("n", Some(&with(""))), 1);
        assert_eq!(absent.replicas("n", Some(&with("x"))), i32::MAX);
        // Other scopes never apply to a workload's estimate; one matching selector is enough.
        let terminating = scoped(json!({"scopes": ["Terminating"]}));
        assert_eq!(terminating.replicas("n", Some(&with("x"))), i32::MAX);
        let either = scoped(
            json!({"scopes": ["BestEffort"], "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["x"]}]}}),
        );
        assert_eq!(either.replicas("n", Some(&with("x"))), 1);
    }

    #[test]
    fn malformed_quota_annotations_are_named_errors_without_their_text() {
        let e = MemberQuotas::parse("{\"secret\": 1}").unwrap_err();
        assert!(e.contains("not a list of ResourceQuotas"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = MemberQuotas::parse(
            &json!([{"namespace": "n", "status": {"hard": {"cpu": "lots"}, "used": {}}}])
                .to_string(),
        )
        .unwrap_err();
        assert!(e.contains("[0].status.hard[cpu]: not a quantity"), "{e}");
        assert!(!e.contains("lots"), "{e}");
        let huge = format!("[{}]", vec!["{}"; MAX_QUOTAS + 1].join(","));
        assert!(
            MemberQuotas::parse(&huge)
                .unwrap_err()
                .contains("more than")
        );
        let long = " ".repeat(MAX_QUOTAS_TEXT + 1);
        assert!(MemberQuotas::parse(&long).unwrap_err().contains("bytes"));
    }
}
