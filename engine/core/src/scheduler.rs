//! The generic scheduler: runs a [`Profile`] over one binding and a cluster set, exactly as Karmada's
//! `genericScheduler.Schedule` and `scheduleResourceBindingWithClusterAffinities` do.

use std::collections::BTreeMap;

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::Placement;
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};

use crate::framework::Reason;
use crate::framework::{
    AssignInput, AssignMode, Assignment, BindingContext, ClusterDetail, CurrentTargets,
    FailurePolicy, FilterInput, Profile, ScoreInput, SelectInput, Selection, SharedEncodings,
    Verdict,
};
use crate::pipeline::Snapshot;
use crate::selector::PreparedAffinity;
use crate::time::parse_rfc3339;

/// Overflow order of a cluster that matches no affinity of the term.
pub const NO_AFFINITY_MATCH: u32 = 1000;

/// Why scheduling failed, mapped to the `Scheduled` condition reason as Karmada does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No cluster passed the filters (`NoClusterFit`); clears `spec.clusters`.
    NoClusterFit,
    /// Not enough capacity (`Unschedulable`).
    Unschedulable,
    /// Anything else, including plugin faults under `Fail` (`SchedulerError`).
    SchedulerError,
}

impl FailureKind {
    /// The condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            FailureKind::NoClusterFit => "NoClusterFit",
            FailureKind::Unschedulable => "Unschedulable",
            FailureKind::SchedulerError => "SchedulerError",
        }
    }
}

/// A failed scheduling attempt: data, not a Rust error (the binding simply stays unscheduled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Classification.
    pub kind: FailureKind,
    /// Karmada-style message, e.g. `0/2 clusters are available: 2 cluster(s) had untolerated taint {k:NoSchedule}.`
    pub message: String,
}

impl Failure {
    fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

/// The condition message on success.
pub const SUCCESS_MESSAGE: &str = "Binding has been scheduled successfully.";

/// The result of scheduling one binding.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleResult {
    /// Suggested clusters on success, the failure otherwise.
    pub outcome: Result<Vec<TargetCluster>, Failure>,
    /// The `clusterAffinities` term now observed (`status.schedulerObservingAffinityName`).
    pub observed_affinity_name: String,
    /// Faults of `Ignore` plugins that were skipped, as `plugin: message`.
    pub ignored_faults: Vec<String>,
}

impl ScheduleResult {
    /// The new `spec.clusters`: `Some` when Karmada writes the result (success, or a FitError that
    /// clears it), `None` when the previous result stays.
    pub fn clusters_to_write(&self) -> Option<Vec<TargetCluster>> {
        match &self.outcome {
            Ok(c) => Some(c.clone()),
            Err(f) if f.kind == FailureKind::NoClusterFit => Some(Vec::new()),
            Err(_) => None,
        }
    }
}

/// What happened inside one attempt, for `flotilla explain`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// One entry per attempted `clusterAffinities` term (one entry when the placement has none).
    pub attempts: Vec<AttemptTrace>,
}

/// One attempt's trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptTrace {
    /// The affinity term tried, if any.
    pub affinity_name: Option<String>,
    /// Per cluster (by name), each filter plugin's verdict in profile order.
    pub filters: BTreeMap<String, Vec<(String, Verdict)>>,
    /// Per feasible cluster, each score plugin's weighted score.
    pub scores: BTreeMap<String, Vec<(String, i64)>>,
    /// Feasible clusters in canonical order: (name, total score, allocatable, available, overflow order).
    pub ordered: Vec<(String, i64, i64, i64, u32)>,
    /// Selected cluster names.
    pub selected: Vec<String>,
    /// The attempt's outcome.
    pub outcome: Option<Result<Vec<TargetCluster>, Failure>>,
}

/// Schedule `spec` with `profile` against `snapshot`, exactly as Karmada's generic scheduler does.
/// `object` is the resource template, which expressions in the placement see as `object`.
///
/// This is the scheduling algorithm alone; the pipeline ([`crate::pipeline::decide`]) adds
/// failover, Karmada's scheduling triggers and the `Scheduled` condition around it, and is what
/// `plan`, `explain` and the controllers call.
pub fn schedule(
    snapshot: &Snapshot,
    profile: &Profile,
    spec: &ResourceBindingSpec,
    status: &ResourceBindingStatus,
    object: Option<&serde_json::Value>,
    mut trace: Option<&mut Trace>,
) -> ScheduleResult {
    let expressions = profile.expressions.as_deref();
    let options = snapshot.options();
    let empty = Placement::default();
    let placement = spec.placement.as_ref().unwrap_or(&empty);
    let mut ignored = Vec::new();
    let current = CurrentTargets::new(spec);
    let mode = if reschedule_required(spec, status) {
        AssignMode::Fresh
    } else {
        AssignMode::Steady
    };

    if placement.cluster_affinity.is_some() || placement.cluster_affinities.is_empty() {
        let encodings = SharedEncodings::default();
        let ctx = BindingContext::new(spec, placement, None)
            .with_snapshot(snapshot.plugin_view())
            .with_object(object)
            .with_expressions(expressions)
            .with_encodings(Some(&encodings))
            .with_current(Some(&current));
        let outcome = attempt(
            profile,
            &ctx,
            snapshot,
            options,
            mode,
            &mut ignored,
            trace.as_deref_mut(),
        );
        return ScheduleResult {
            outcome,
            observed_affinity_name: status.scheduler_observing_affinity_name.clone(),
            ignored_faults: ignored,
        };
    }

    let terms = &placement.cluster_affinities;
    let observed = &status.scheduler_observing_affinity_name;
    let mut index = terms
        .iter()
        .position(|t| &t.affinity_name == observed)
        .unwrap_or(0);
    if mode == AssignMode::Fresh {
        index = 0;
    }
    let mut first_err: Option<Failure> = None;
    while index < terms.len() {
        let term = &terms[index];
        let encodings = SharedEncodings::default();
        let ctx = BindingContext::new(spec, placement, Some(term))
            .with_snapshot(snapshot.plugin_view())
            .with_object(object)
            .with_expressions(expressions)
            .with_encodings(Some(&encodings))
            .with_current(Some(&current));
        match attempt(
            profile,
            &ctx,
            snapshot,
            options,
            mode,
            &mut ignored,
            trace.as_deref_mut(),
        ) {
            Ok(result) => {
                return ScheduleResult {
                    outcome: Ok(result),
                    observed_affinity_name: term.affinity_name.clone(),
                    ignored_faults: ignored,
                };
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
        index += 1;
    }
    ScheduleResult {
        outcome: Err(first_err.unwrap_or_else(|| {
            Failure::new(
                FailureKind::SchedulerError,
                "no cluster affinity term to schedule with",
            )
        })),
        observed_affinity_name: observed.clone(),
        ignored_faults: ignored,
    }
}

/// `RescheduleRequired`: `rescheduleTriggeredAt` strictly after `lastScheduledTime`.
pub fn reschedule_required(spec: &ResourceBindingSpec, status: &ResourceBindingStatus) -> bool {
    match (
        spec.reschedule_triggered_at
            .as_deref()
            .and_then(parse_rfc3339),
        status
            .last_scheduled_time
            .as_deref()
            .and_then(parse_rfc3339),
    ) {
        (Some(t), Some(l)) => t > l,
        _ => false,
    }
}

fn fault(
    policy: FailurePolicy,
    err: crate::PluginError,
    ignored: &mut Vec<String>,
) -> Result<(), Failure> {
    match policy {
        FailurePolicy::Fail => Err(Failure::new(FailureKind::SchedulerError, err.to_string())),
        FailurePolicy::Ignore => {
            ignored.push(err.to_string());
            Ok(())
        }
    }
}

/// The clusters at positions `idx` of `from`, in that order; an error when a position is out of
/// range or repeated.
fn pick<'a>(from: &[ClusterDetail<'a>], idx: &[usize]) -> Result<Vec<ClusterDetail<'a>>, String> {
    let mut seen = vec![false; from.len()];
    let mut next = Vec::with_capacity(idx.len());
    for &i in idx {
        match (from.get(i), seen.get_mut(i)) {
            (Some(d), Some(s)) if !*s => {
                *s = true;
                next.push(*d);
            }
            (Some(_), _) => return Err(format!("selected index {i} more than once")),
            _ => return Err(format!("selected index {i} out of range")),
        }
    }
    Ok(next)
}

fn check_len(plugin: &str, got: usize, want: usize) -> Result<(), crate::PluginError> {
    if got == want {
        Ok(())
    } else {
        Err(crate::PluginError::InvalidOutput {
            plugin: plugin.to_owned(),
            message: format!("returned {got} results for {want} clusters"),
        })
    }
}

fn attempt(
    profile: &Profile,
    ctx: &BindingContext<'_>,
    all: &Snapshot,
    options: crate::pipeline::Options,
    mode: AssignMode,
    ignored: &mut Vec<String>,
    trace: Option<&mut Trace>,
) -> Result<Vec<TargetCluster>, Failure> {
    let mut t = trace.as_ref().map(|_| AttemptTrace {
        affinity_name: ctx.affinity_term.map(|a| a.affinity_name.clone()),
        ..Default::default()
    });
    let result = attempt_inner(profile, ctx, all, options, mode, ignored, t.as_mut());
    if let (Some(tr), Some(mut at)) = (trace, t) {
        at.outcome = Some(result.clone());
        tr.attempts.push(at);
    }
    result
}

fn attempt_inner(
    profile: &Profile,
    ctx: &BindingContext<'_>,
    all: &Snapshot,
    options: crate::pipeline::Options,
    mode: AssignMode,
    ignored: &mut Vec<String>,
    mut trace: Option<&mut AttemptTrace>,
) -> Result<Vec<TargetCluster>, Failure> {
    let spec = ctx.spec;
    let all_clusters = all.clusters();
    let candidate_idx: Vec<usize> = (0..all_clusters.len())
        .filter(|&i| !all_clusters[i].is_deleting())
        .collect();
    let candidates: Vec<&Cluster> = candidate_idx.iter().map(|&i| &all_clusters[i]).collect();

    // Filter: each plugin sees the clusters still feasible (all of them when tracing, so that
    // explain can show every verdict); a cluster's reason is its first failing plugin's.
    // Feasibility is tracked by candidate index: no per-cluster name lookups on the hot path.
    let mut reasons: Vec<Option<Reason>> = vec![None; candidates.len()];
    let mut live: Vec<usize> = (0..candidates.len()).collect();
    let mut input_clusters: Vec<&Cluster> = candidates.clone();
    // `ctx.snapshot` is `all`'s: a cluster's row there is its index in `all.clusters`.
    let rows_known = ctx
        .snapshot
        .is_some_and(|s| s.generation == all.generation());
    let row_of = |i: usize| {
        if rows_known {
            u32::try_from(candidate_idx[i]).unwrap_or(ClusterDetail::NO_ROW)
        } else {
            ClusterDetail::NO_ROW
        }
    };
    let candidate_rows: Vec<u32> = (0..candidates.len()).map(row_of).collect();
    let mut input_rows: Vec<u32> = candidate_rows.clone();
    let mut verdicts = Vec::with_capacity(candidates.len());
    for slot in &profile.filters {
        let name = slot.plugin.name();
        let tracing = trace.is_some();
        verdicts.clear();
        let input = if tracing {
            FilterInput::new(ctx, &candidates).with_rows(&candidate_rows)
        } else {
            FilterInput::new(ctx, &input_clusters).with_rows(&input_rows)
        };
        let n = input.clusters.len();
        let res = slot
            .plugin
            .filter(&input, &mut verdicts)
            .and_then(|()| check_len(name, verdicts.len(), n));
        if let Err(e) = res {
            fault(slot.failure_policy, e, ignored)?;
            continue;
        }
        let mut any_failed = false;
        for (pos, v) in verdicts.iter().enumerate() {
            let idx = if tracing { pos } else { live[pos] };
            if let Some(t) = trace.as_deref_mut() {
                t.filters
                    .entry(candidates[idx].name().to_owned())
                    .or_default()
                    .push((name.to_owned(), v.clone()));
            }
            if let Verdict::Unschedulable(reason) = v
                && reasons[idx].is_none()
            {
                reasons[idx] = Some(reason.clone());
                any_failed = true;
            }
        }
        if any_failed {
            live.retain(|&i| reasons[i].is_none());
            input_clusters.clear();
            input_clusters.extend(live.iter().map(|&i| candidates[i]));
            input_rows.clear();
            input_rows.extend(live.iter().map(|&i| candidate_rows[i]));
        }
    }
    let feasible = input_clusters;
    if feasible.is_empty() {
        let named: BTreeMap<&str, Reason> = candidates
            .iter()
            .zip(reasons)
            .filter_map(|(c, r)| Some((c.name(), r?)))
            .collect();
        return Err(fit_error(all_clusters.len(), &named));
    }

    // Score: weighted sum over plugins.
    let mut totals = vec![0i64; feasible.len()];
    let mut raw = Vec::with_capacity(feasible.len());
    for slot in &profile.scores {
        let name = slot.plugin.name();
        raw.clear();
        let input = ScoreInput::new(ctx, &feasible).with_rows(&input_rows);
        let res = slot
            .plugin
            .score(&input, &mut raw)
            .and_then(|()| check_len(name, raw.len(), feasible.len()))
            .and_then(|()| slot.plugin.normalize(&mut raw));
        if let Err(e) = res {
            fault(slot.failure_policy, e, ignored)?;
            continue;
        }
        for (i, s) in raw.iter().enumerate() {
            let weighted = s.saturating_mul(slot.weight);
            totals[i] = totals[i].saturating_add(weighted);
            if let Some(t) = trace.as_deref_mut() {
                t.scores
                    .entry(feasible[i].name().to_owned())
                    .or_default()
                    .push((name.to_owned(), weighted));
            }
        }
    }

    // Estimate and order canonically.
    let with_capacity: Vec<(&Cluster, &crate::estimator::Capacity)> = live
        .iter()
        .map(|&i| (candidates[i], &all.capacity()[candidate_idx[i]]))
        .collect();
    let allocatable = crate::estimator::available_replicas_with(&with_capacity, spec);
    let tiers = OverflowTiers::new(ctx);
    let mut details: Vec<ClusterDetail<'_>> = feasible
        .iter()
        .zip(input_rows.iter())
        .zip(totals.iter().zip(allocatable.iter()))
        .map(|((c, &row), (&score, &alloc))| ClusterDetail {
            cluster: c,
            score,
            allocatable_replicas: alloc,
            available_replicas: alloc + i64::from(ctx.assigned_replicas(c.name())),
            overflow_order: tiers.of(c),
            row,
        })
        .collect();
    crate::spread::canonical_order_presorted(&mut details);
    if let Some(t) = trace.as_deref_mut() {
        t.ordered = details
            .iter()
            .map(|d| {
                (
                    d.name().to_owned(),
                    d.score,
                    d.allocatable_replicas,
                    d.available_replicas,
                    d.overflow_order,
                )
            })
            .collect();
    }

    // Select.
    let mut selected = details;
    for slot in &profile.selects {
        let input = SelectInput {
            binding: ctx,
            clusters: &selected,
        };
        match slot.plugin.select(&input) {
            // An index out of range or repeated is the plugin's invalid output: its failure
            // policy decides (Ignore keeps the clusters as they were before it).
            Ok(Selection::Selected(idx)) => match pick(&selected, &idx) {
                Ok(next) => selected = next,
                Err(message) => {
                    let e = crate::PluginError::InvalidOutput {
                        plugin: slot.plugin.name().to_owned(),
                        message,
                    };
                    fault(slot.failure_policy, e, ignored)?;
                }
            },
            Ok(Selection::Failed(msg)) => {
                return Err(Failure::new(
                    FailureKind::SchedulerError,
                    format!("failed to select clusters: {msg}"),
                ));
            }
            Err(e) => fault(slot.failure_policy, e, ignored)?,
        }
    }
    if let Some(t) = trace {
        t.selected = selected.iter().map(|d| d.name().to_owned()).collect();
    }

    // Assign.
    let mut result = assign_replicas(profile, ctx, mode, &selected, ignored)?;
    if options.empty_workload_propagation {
        for d in &selected {
            if !result.iter().any(|t| t.name == d.name()) {
                result.push(TargetCluster::new(d.name(), 0));
            }
        }
    }
    Ok(result)
}

fn fit_error(num_all: usize, reasons: &BTreeMap<&str, Reason>) -> Failure {
    if num_all == 0 || reasons.is_empty() {
        return Failure::new(
            FailureKind::NoClusterFit,
            format!("0/{num_all} clusters are available: no cluster exists."),
        );
    }
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons.values() {
        *histogram.entry(r.as_ref()).or_default() += 1;
    }
    let mut parts: Vec<String> = histogram.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    Failure::new(
        FailureKind::NoClusterFit,
        format!("0/{num_all} clusters are available: {}.", parts.join(", ")),
    )
}

/// The ordered-affinity term being tried, prepared for every candidate: its primary affinity,
/// then its overflow affinities (none without ordered affinity groups).
struct OverflowTiers<'a>(Vec<PreparedAffinity<'a>>);

impl<'a> OverflowTiers<'a> {
    fn new(ctx: &BindingContext<'a>) -> Self {
        let Some(term) = ctx.affinity_term else {
            return OverflowTiers(Vec::new());
        };
        let overflow = term
            .overflow_affinities
            .iter()
            .flatten()
            .map(|o| &o.affinity);
        let tiers = std::iter::once(&term.affinity).chain(overflow);
        OverflowTiers(tiers.map(PreparedAffinity::inline).collect())
    }

    /// 0 for the term's primary affinity, `i+1` for its i-th overflow affinity, 1000 for none;
    /// always 0 without ordered affinity groups.
    fn of(&self, cluster: &Cluster) -> u32 {
        if self.0.is_empty() {
            return 0;
        }
        self.0
            .iter()
            .position(|a| a.matches(cluster))
            .map_or(NO_AFFINITY_MATCH, |i| {
                u32::try_from(i).unwrap_or(NO_AFFINITY_MATCH)
            })
    }
}

fn assign_replicas(
    profile: &Profile,
    ctx: &BindingContext<'_>,
    mode: AssignMode,
    selected: &[ClusterDetail<'_>],
    ignored: &mut Vec<String>,
) -> Result<Vec<TargetCluster>, Failure> {
    let spec = ctx.spec;
    if selected.is_empty() {
        return Err(Failure::new(
            FailureKind::SchedulerError,
            "failed to assign replicas: no clusters available to schedule",
        ));
    }
    if (spec.replicas == 0 && spec.replica_requirements.is_none()) || spec.components.len() > 1 {
        // A multi-component workload placed whole records its components in each target
        // (Karmada master's `buildTargetComponents`; v1.18/v1.19 leave targets bare).
        let components: Vec<serde_json::Value> =
            if spec.components.len() > 1 && crate::component_sets::applicable(spec) {
                spec.components
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "name": c.get("name").cloned().unwrap_or_default(),
                            "replicas": c.get("replicas").cloned().unwrap_or_else(|| 0.into()),
                        })
                    })
                    .collect()
            } else {
                Vec::new()
            };
        return Ok(selected
            .iter()
            .map(|d| TargetCluster {
                components: components.clone(),
                ..TargetCluster::new(d.name(), 0)
            })
            .collect());
    }
    let overflow = ctx.placement.cluster_affinity.is_none()
        && ctx
            .affinity_term
            .is_some_and(|t| t.overflow_affinities.is_some());
    let mut out = Vec::new();
    if overflow {
        let mut tiers: BTreeMap<u32, Vec<ClusterDetail<'_>>> = BTreeMap::new();
        for d in selected {
            tiers.entry(d.overflow_order).or_default().push(*d);
        }
        let mut remaining = i64::from(spec.replicas);
        // Karmada runs the first non-empty tier unconditionally and checks what is left after it.
        for tier in tiers.values() {
            let capacity: i64 = tier.iter().map(|d| d.available_replicas).sum();
            let n = remaining.min(capacity);
            let n32 = i32::try_from(n).unwrap_or(i32::MAX);
            out.extend(run_assigners(profile, ctx, tier, n32, mode, ignored)?);
            remaining -= n;
            if remaining <= 0 {
                break;
            }
        }
        if remaining > 0 {
            return Err(Failure::new(
                FailureKind::Unschedulable,
                "failed to assign replicas: Clusters available replicas are not enough to schedule.",
            ));
        }
    } else {
        out = run_assigners(profile, ctx, selected, spec.replicas, mode, ignored)?;
    }
    out.retain(|t| t.replicas > 0);
    Ok(out)
}

fn run_assigners(
    profile: &Profile,
    ctx: &BindingContext<'_>,
    clusters: &[ClusterDetail<'_>],
    replicas: i32,
    mode: AssignMode,
    ignored: &mut Vec<String>,
) -> Result<Vec<TargetCluster>, Failure> {
    let input = AssignInput {
        binding: ctx,
        clusters,
        replicas,
        mode,
    };
    for slot in &profile.assigners {
        match slot.plugin.assign(&input) {
            Ok(Assignment::Assigned(t)) => return Ok(t),
            Ok(Assignment::Skip) => {}
            Ok(Assignment::Unschedulable(msg)) => {
                return Err(Failure::new(
                    FailureKind::Unschedulable,
                    format!("failed to assign replicas: {msg}"),
                ));
            }
            Err(e) => fault(slot.failure_policy, e, ignored)?,
        }
    }
    Err(Failure::new(
        FailureKind::SchedulerError,
        format!(
            "failed to assign replicas: no assign plugin in profile {:?} handles this placement",
            profile.name
        ),
    ))
}

/// Karmada's `doScheduleBinding` triggers (§1.1): placement changed since the last schedule,
/// replicas changed, a manual reschedule, non-workloads and Duplicated (always), or a target
/// cluster being deleted.
pub fn needs_scheduling(
    binding: &flotilla_api::work::ResourceBinding,
    snapshot: &Snapshot,
) -> bool {
    let spec = &binding.spec;
    let empty_status = ResourceBindingStatus::default();
    let status = binding.status.as_ref().unwrap_or(&empty_status);
    let empty = Placement::default();
    let placement = spec.placement.as_ref().unwrap_or(&empty);
    let applied: Option<Placement> = binding
        .metadata
        .annotations
        .get(flotilla_api::labels::APPLIED_PLACEMENT)
        .and_then(|a| serde_json::from_str(a).ok());
    let placement_changed = match &applied {
        None => true,
        Some(a) => {
            a.cluster_affinity != placement.cluster_affinity
                || a.cluster_tolerations != placement.cluster_tolerations
                || a.spread_constraints != placement.spread_constraints
                || a.replica_scheduling != placement.replica_scheduling
                || a.cel_scores != placement.cel_scores
                || (!placement.cluster_affinities.is_empty() || !a.cluster_affinities.is_empty())
                    && {
                        let name = &status.scheduler_observing_affinity_name;
                        let find = |p: &Placement| {
                            p.cluster_affinities
                                .iter()
                                .find(|t| &t.affinity_name == name)
                                .cloned()
                        };
                        name.is_empty() || find(a).is_none() || find(a) != find(placement)
                    }
        }
    };
    if placement_changed {
        return true;
    }
    if placement.replica_scheduling.is_some() {
        // A component workload whose clusters were cleared (failover evicted it) is rescheduled
        // (Karmada's `IsBindingReplicasChanged` with MultiplePodTemplatesScheduling).
        if !spec.components.is_empty() && spec.clusters.is_empty() {
            return true;
        }
        let changed = if placement.replica_scheduling_type()
            == flotilla_api::policy::scheduling_type::DUPLICATED
        {
            spec.clusters.iter().any(|c| c.replicas != spec.replicas)
        } else {
            spec.clusters
                .iter()
                .map(|c| i64::from(c.replicas))
                .sum::<i64>()
                != i64::from(spec.replicas)
        };
        if changed {
            return true;
        }
    }
    if reschedule_required(spec, status) {
        return true;
    }
    if !spec.is_workload()
        || placement.replica_scheduling_type() == flotilla_api::policy::scheduling_type::DUPLICATED
    {
        return true;
    }
    spec.clusters
        .iter()
        .any(|t| snapshot.cluster(&t.name).is_some_and(Cluster::is_deleting))
}
