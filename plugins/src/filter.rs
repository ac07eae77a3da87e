//! In-tree filter plugins (Karmada `pkg/scheduler/framework/plugins/*`).

use std::sync::atomic::{AtomicI64, AtomicU8};

use flotilla_api::cluster::Cluster;
use flotilla_api::meta::{Taint, Toleration, effect};
use flotilla_api::policy::{
    CelSelector, ClusterAffinity as ClusterAffinityPolicy, ClusterAffinityTerm, spread_field,
};
use flotilla_core::PluginError;
use flotilla_core::cluster_index::{ClusterIndex, Matching};
use flotilla_core::expression;
use flotilla_core::framework::{
    BindingContext, FilterInput, FilterPlugin, Plugin, Reason, Verdict,
};
use flotilla_core::selector::{PreparedAffinity, cluster_matches, cluster_matches_inline};

use crate::memo::{PerRow, RowMemo};

/// Name of [`ApiEnablement`].
pub const API_ENABLEMENT: &str = "APIEnablement";
/// Name of [`TaintToleration`].
pub const TAINT_TOLERATION: &str = "TaintToleration";
/// Name of [`ClusterAffinity`].
pub const CLUSTER_AFFINITY: &str = "ClusterAffinity";
/// Name of [`SpreadConstraint`].
pub const SPREAD_CONSTRAINT: &str = "SpreadConstraint";
/// Name of [`ClusterEviction`].
pub const CLUSTER_EVICTION: &str = "ClusterEviction";

fn each(
    input: &FilterInput<'_>,
    out: &mut Vec<Verdict>,
    f: impl Fn(&BindingContext<'_>, &Cluster) -> Verdict,
) {
    out.extend(input.clusters.iter().map(|c| f(input.binding, c)));
}

/// Passes clusters whose API enablements list the resource's group/version and kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct ApiEnablement;

impl Plugin for ApiEnablement {
    fn name(&self) -> &str {
        API_ENABLEMENT
    }
}

/// Does `cluster` list `api_version`/`kind` among its API enablements?
fn api_enabled(cluster: &Cluster, api_version: &str, kind: &str) -> bool {
    cluster.status.as_ref().is_some_and(|s| {
        s.api_enablements
            .iter()
            .any(|e| e.group_version == api_version && e.resources.iter().any(|r| r.kind == kind))
    })
}

fn api_verdict(enabled: bool) -> Verdict {
    if enabled {
        Verdict::Fit
    } else {
        Verdict::unschedulable("cluster(s) did not have the API resource")
    }
}

impl FilterPlugin for ApiEnablement {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let res = &input.binding.spec.resource;
        each(input, out, |b, c| {
            // Already scheduled here: keep it (Karmada parity).
            if b.targets(c.name()) {
                return Verdict::Fit;
            }
            api_verdict(api_enabled(c, &res.api_version, &res.kind))
        });
        Ok(())
    }
}

/// [`ApiEnablement`] with a per-snapshot-generation memo: the verdict per (apiVersion, kind) and
/// cluster, computed once per generation instead of once per binding.
#[derive(Debug, Default)]
pub struct MemoisedApiEnablement {
    memo: RowMemo<(String, String), AtomicU8>,
}

impl Plugin for MemoisedApiEnablement {
    fn name(&self) -> &str {
        API_ENABLEMENT
    }
}

impl FilterPlugin for MemoisedApiEnablement {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let b = input.binding;
        let res = &b.spec.resource;
        let slot = self.memo.filter_slot(
            input,
            |h| {
                let _ = std::io::Write::write_all(h, res.api_version.as_bytes());
                let _ = std::io::Write::write_all(h, b"\0");
                let _ = std::io::Write::write_all(h, res.kind.as_bytes());
            },
            |k| k.0 == res.api_version && k.1 == res.kind,
            || (res.api_version.clone(), res.kind.clone()),
        );
        let Some((s, rows, slot)) = slot else {
            return ApiEnablement.filter(input, out);
        };
        out.extend(input.clusters.iter().zip(rows).map(|(c, &row)| {
            if b.targets(c.name()) {
                return Verdict::Fit;
            }
            api_verdict(slot.get(s.clusters, row, c, || {
                api_enabled(c, &res.api_version, &res.kind)
            }))
        }));
        Ok(())
    }
}

/// Rejects clusters with a NoSchedule/NoExecute taint no placement toleration tolerates.
#[derive(Debug, Default, Clone, Copy)]
pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &str {
        TAINT_TOLERATION
    }
}

/// Standard Kubernetes toleration matching (`Toleration.ToleratesTaint`).
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if !t.effect.is_empty() && t.effect != taint.effect {
        return false;
    }
    if !t.key.is_empty() && t.key != taint.key {
        return false;
    }
    match t.operator.as_str() {
        "Exists" => true,
        "" | "Equal" => t.value == taint.value,
        _ => false,
    }
}

/// The first NoSchedule/NoExecute taint (list order) that no toleration tolerates.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    first_untolerated_at(taints, tolerations).map(|i| &taints[i])
}

/// The position of [`first_untolerated`]'s taint in `taints`.
fn first_untolerated_at(taints: &[Taint], tolerations: &[Toleration]) -> Option<usize> {
    taints.iter().position(|taint| {
        (taint.effect == effect::NO_SCHEDULE || taint.effect == effect::NO_EXECUTE)
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// `{key=value:Effect}` or `{key:Effect}`, as Karmada prints taints in reasons.
pub fn taint_text(t: &Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect)
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect)
    }
}

fn taint_verdict(taint: Option<&Taint>) -> Verdict {
    match taint {
        None => Verdict::Fit,
        Some(t) => Verdict::Unschedulable(taint_reason(t)),
    }
}

/// `cluster(s) had untolerated taint {…}` for `t`. The texts (up to 512 bytes) of the first 4,096 distinct taints
/// (key, value, effect) are kept for the process, so a tainted cluster costs a lookup per
/// binding, not a formatted string; later taints are formatted each time.
fn taint_reason(t: &Taint) -> Reason {
    use std::collections::HashMap;
    use std::hash::{DefaultHasher, Hash, Hasher};
    use std::sync::{OnceLock, PoisonError, RwLock};
    type Entry = (String, String, String, &'static str);
    type Table = RwLock<(usize, HashMap<u64, Vec<Entry>>)>;
    const MAX_ENTRIES: usize = 4096;
    const MAX_LEN: usize = 512;
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(Default::default);
    let mut h = DefaultHasher::new();
    (&t.key, &t.value, &t.effect).hash(&mut h);
    let hash = h.finish();
    let find = |entries: Option<&Vec<Entry>>| {
        entries
            .into_iter()
            .flatten()
            .find(|e| e.0 == t.key && e.1 == t.value && e.2 == t.effect)
            .map(|e| e.3)
    };
    if let Some(s) = find(
        table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .get(&hash),
    ) {
        return Reason::Borrowed(s);
    }
    let text = format!("cluster(s) had untolerated taint {{{}}}", taint_text(t));
    if text.len() > MAX_LEN {
        return Reason::Owned(text);
    }
    let mut w = table.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(s) = find(w.1.get(&hash)) {
        return Reason::Borrowed(s);
    }
    if w.0 >= MAX_ENTRIES {
        return Reason::Owned(text);
    }
    let s: &'static str = Box::leak(text.into_boxed_str());
    w.0 += 1;
    w.1.entry(hash)
        .or_default()
        .push((t.key.clone(), t.value.clone(), t.effect.clone(), s));
    Reason::Borrowed(s)
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let tolerations = &input.binding.placement.cluster_tolerations;
        each(input, out, |b, c| {
            if b.targets(c.name()) {
                return Verdict::Fit;
            }
            taint_verdict(first_untolerated(&c.spec.taints, tolerations))
        });
        Ok(())
    }
}

/// [`TaintToleration`] with a per-snapshot-generation memo: per toleration list and cluster, the
/// position of the first untolerated taint (or none), computed once per generation.
#[derive(Debug, Default)]
pub struct MemoisedTaintToleration {
    memo: RowMemo<Vec<Toleration>, AtomicI64>,
    /// Per row: the reason text of each of the cluster's taints ([`taint_reason`]), so that a
    /// tainted cluster costs a lookup per binding rather than a hash of its taint.
    reasons: PerRow<Box<[Reason]>>,
}

impl Plugin for MemoisedTaintToleration {
    fn name(&self) -> &str {
        TAINT_TOLERATION
    }
}

impl FilterPlugin for MemoisedTaintToleration {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let b = input.binding;
        let tolerations = &b.placement.cluster_tolerations;
        let slot = self.memo.filter_slot(
            input,
            // A failed write would leave a partial hash, still the same for equal keys.
            |h| {
                let _ = serde_json::to_writer(h, tolerations);
            },
            |k| k == tolerations,
            || tolerations.clone(),
        );
        let Some((s, rows, slot)) = slot else {
            return TaintToleration.filter(input, out);
        };
        let reasons = self.reasons.cells(&s);
        out.extend(input.clusters.iter().zip(rows).map(|(c, &row)| {
            if b.targets(c.name()) {
                return Verdict::Fit;
            }
            // -1: every taint tolerated; otherwise the untolerated taint's position.
            let at = slot.get(s.clusters, row, c, || {
                first_untolerated_at(&c.spec.taints, tolerations).map_or(-1, |i| i as i64)
            });
            let Ok(at) = usize::try_from(at) else {
                return Verdict::Fit;
            };
            // The row's reasons, when `row` holds this very cluster (as `slot.get` checks).
            let known = reasons
                .as_deref()
                .and_then(|r| r.get(row as usize))
                .filter(|_| {
                    s.clusters
                        .get(row as usize)
                        .is_some_and(|r| std::ptr::eq(r, *c))
                })
                .map(|cell| cell.get_or_init(|| c.spec.taints.iter().map(taint_reason).collect()));
            match known.and_then(|r| r.get(at)) {
                Some(reason) => Verdict::Unschedulable(reason.clone()),
                None => taint_verdict(c.spec.taints.get(at)),
            }
        }));
        Ok(())
    }
}

/// Passes clusters matching the placement's cluster affinity (or the affinity group being tried,
/// plus its overflow tiers for workloads). Evaluates every cluster on every call; the profiles use
/// [`MemoisedClusterAffinity`].
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterAffinity;

impl Plugin for ClusterAffinity {
    fn name(&self) -> &str {
        CLUSTER_AFFINITY
    }
}

/// Does `cluster` satisfy the binding's affinity? An empty affinity list passes everything.
pub fn affinity_matches(b: &BindingContext<'_>, cluster: &Cluster) -> bool {
    if let Some(a) = &b.placement.cluster_affinity {
        return cluster_matches(cluster, a);
    }
    let Some(term) = b.affinity_term else {
        return true;
    };
    if cluster_matches_inline(cluster, &term.affinity) {
        return true;
    }
    b.is_workload()
        && term
            .overflow_affinities
            .iter()
            .flatten()
            .any(|o| cluster_matches_inline(cluster, &o.affinity))
}

/// [`affinity_matches`] prepared for a whole cluster list: the binding's affinities are read once
/// and their long name lists sorted ([`PreparedAffinity`]), so each cluster costs a few lookups.
#[derive(Debug, Clone)]
pub enum AffinityMatcher<'a> {
    /// No affinity: every cluster matches.
    All,
    /// The placement's `clusterAffinity`.
    Placement(PreparedAffinity<'a>),
    /// The ordered-affinity term being tried, then its overflow tiers (workloads only).
    Term(PreparedAffinity<'a>, Vec<PreparedAffinity<'a>>),
}

/// An [`AffinityMatcher`] resolved against a [`ClusterIndex`]: the term and its tiers (`None`:
/// no affinity, everything matches).
#[derive(Debug, Clone)]
pub struct IndexedAffinity(Option<Vec<Matching>>);

impl IndexedAffinity {
    /// [`affinity_matches`] for the cluster at `row` of the indexed set.
    pub fn matches(&self, row: usize) -> bool {
        self.0
            .as_ref()
            .is_none_or(|tiers| tiers.iter().any(|t| t.matches(row)))
    }
}

impl<'a> AffinityMatcher<'a> {
    /// The affinity `b` is scheduled against.
    pub fn new(b: &BindingContext<'a>) -> Self {
        if let Some(a) = &b.placement.cluster_affinity {
            return AffinityMatcher::Placement(PreparedAffinity::new(a));
        }
        let Some(term) = b.affinity_term else {
            return AffinityMatcher::All;
        };
        let overflow = if b.is_workload() {
            let tiers = term.overflow_affinities.iter().flatten();
            tiers
                .map(|o| PreparedAffinity::inline(&o.affinity))
                .collect()
        } else {
            Vec::new()
        };
        AffinityMatcher::Term(PreparedAffinity::inline(&term.affinity), overflow)
    }

    /// Resolved against `index` (the cluster set rows refer to), for
    /// [`IndexedAffinity::matches`].
    pub fn indexed(&self, index: &ClusterIndex) -> IndexedAffinity {
        match self {
            AffinityMatcher::All => IndexedAffinity(None),
            AffinityMatcher::Placement(a) => IndexedAffinity(Some(vec![index.matching(a)])),
            AffinityMatcher::Term(a, overflow) => {
                let tiers = std::iter::once(a).chain(overflow);
                IndexedAffinity(Some(tiers.map(|t| index.matching(t)).collect()))
            }
        }
    }

    /// [`affinity_matches`] for `cluster`.
    pub fn matches(&self, cluster: &Cluster) -> bool {
        match self {
            AffinityMatcher::All => true,
            AffinityMatcher::Placement(a) => a.matches(cluster),
            AffinityMatcher::Term(a, overflow) => {
                a.matches(cluster) || overflow.iter().any(|o| o.matches(cluster))
            }
        }
    }
}

/// The `celSelector` in force for an affinity: the placement's `clusterAffinity` wins over the
/// ordered-affinity term being tried (as in [`affinity_matches`]).
pub fn affinity_cel<'a>(
    affinity: Option<&'a ClusterAffinityPolicy>,
    term: Option<&'a ClusterAffinityTerm>,
) -> Option<&'a CelSelector> {
    match (affinity, term) {
        (Some(a), _) => a.cel_selector.as_ref(),
        (None, Some(t)) => t.affinity.cel_selector.as_ref(),
        (None, None) => None,
    }
}

fn affinity_verdict(fit: bool) -> Verdict {
    if fit {
        Verdict::Fit
    } else {
        Verdict::unschedulable("cluster(s) did not match the placement cluster affinity constraint")
    }
}

impl FilterPlugin for ClusterAffinity {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let b = input.binding;
        // Flotilla extension: `celSelector` expressions, ANDed with the rest of the affinity. The
        // template is bound once per binding, not per cluster (see flotilla_core::expression).
        let cel = affinity_cel(b.placement.cluster_affinity.as_ref(), b.affinity_term);
        let matcher = AffinityMatcher::new(b);
        if !expression::has_cel(cel) {
            each(input, out, |_, c| affinity_verdict(matcher.matches(c)));
            return Ok(());
        }
        let fault = |e: expression::ExpressionError| e.into_plugin_error(CLUSTER_AFFINITY);
        let engine = b.expressions.ok_or_else(|| {
            PluginError::failed(
                CLUSTER_AFFINITY,
                "celSelector needs an expression engine (the CEL backend) in the profile",
            )
        })?;
        let bound = engine.bind(b.object).map_err(fault)?;
        for c in input.clusters {
            let fit = matcher.matches(c)
                && expression::selector_matches(bound.as_ref(), cel, c).map_err(fault)?;
            out.push(affinity_verdict(fit));
        }
        Ok(())
    }
}

/// What [`affinity_matches`] reads of a binding, owned: the placement's affinity, else the term
/// being tried and whether the binding is a workload.
type AffinityKey = (
    Option<ClusterAffinityPolicy>,
    Option<ClusterAffinityTerm>,
    bool,
);

/// [`ClusterAffinity`] with a memo per snapshot generation (as its Wasm build keeps): the verdict
/// per distinct affinity for each snapshot row. Used when the binding has a snapshot, the input
/// has the clusters' rows and the affinity has no `celSelector` expressions (those may read the
/// template); otherwise the same as [`ClusterAffinity`].
#[derive(Debug, Default)]
pub struct MemoisedClusterAffinity {
    memo: RowMemo<AffinityKey, AtomicU8>,
}

impl Plugin for MemoisedClusterAffinity {
    fn name(&self) -> &str {
        CLUSTER_AFFINITY
    }
}

impl FilterPlugin for MemoisedClusterAffinity {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let b = input.binding;
        let key = match (&b.placement.cluster_affinity, b.affinity_term) {
            (Some(a), _) => (Some(a), None, false),
            (None, Some(t)) => (None, Some(t), b.is_workload()),
            // Nothing to match: every cluster passes.
            (None, None) => return ClusterAffinity.filter(input, out),
        };
        // Affinities with CEL selectors may read the template: evaluated every time.
        let memo = if expression::has_cel(affinity_cel(key.0, key.1)) {
            None
        } else {
            self.memo.filter_slot(
                input,
                // A failed write would leave a partial hash, still the same for equal keys.
                |h| {
                    let _ = serde_json::to_writer(h, &key);
                },
                |k: &AffinityKey| k.0.as_ref() == key.0 && k.1.as_ref() == key.1 && k.2 == key.2,
                || (key.0.cloned(), key.1.cloned(), key.2),
            )
        };
        let Some((s, rows, slot)) = memo else {
            return ClusterAffinity.filter(input, out);
        };
        // Resolved against the snapshot's index on the first row the memo does not know yet
        // (`slot.get` computes for rows outside the snapshot too: those are matched one by one).
        let matcher = AffinityMatcher::new(b);
        let mut indexed = None;
        out.extend(input.clusters.iter().zip(rows).map(|(c, &row)| {
            let row = row as usize;
            affinity_verdict(slot.get(s.clusters, row as u32, c, || {
                if !s.clusters.get(row).is_some_and(|r| std::ptr::eq(r, *c)) {
                    return matcher.matches(c);
                }
                indexed
                    .get_or_insert_with(|| matcher.indexed(s.index()))
                    .matches(row)
            }))
        }));
        Ok(())
    }
}

/// Rejects clusters missing the property a spread constraint groups by.
#[derive(Debug, Default, Clone, Copy)]
pub struct SpreadConstraint;

impl Plugin for SpreadConstraint {
    fn name(&self) -> &str {
        SPREAD_CONSTRAINT
    }
}

impl FilterPlugin for SpreadConstraint {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let constraints = &input.binding.placement.spread_constraints;
        each(input, out, |_, c| {
            for sc in constraints {
                let missing = match sc.spread_by_field.as_str() {
                    spread_field::PROVIDER if c.spec.provider.is_empty() => Some("provider"),
                    spread_field::REGION if c.spec.region.is_empty() => Some("region"),
                    spread_field::ZONE if c.spec.zones.is_empty() => Some("zones"),
                    _ => None,
                };
                if let Some(p) = missing {
                    return Verdict::unschedulable(format!("cluster(s) did not have {p} property"));
                }
            }
            Verdict::Fit
        });
        Ok(())
    }
}

/// Rejects clusters the binding is being evicted from.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterEviction;

impl Plugin for ClusterEviction {
    fn name(&self) -> &str {
        CLUSTER_EVICTION
    }
}

impl FilterPlugin for ClusterEviction {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let tasks = &input.binding.spec.graceful_eviction_tasks;
        each(input, out, |_, c| {
            if tasks.iter().any(|t| t.from_cluster == c.name()) {
                Verdict::unschedulable("cluster(s) is in the process of eviction")
            } else {
                Verdict::Fit
            }
        });
        Ok(())
    }
}
