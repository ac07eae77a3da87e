//! Binding preemption (Flotilla, beyond Karmada; gate `BindingPreemption`, off by default).
//!
//! When a binding is `Unschedulable` for lack of capacity (the estimator finds too few replicas
//! anywhere) and its preemption policy is `PreemptLowerPriority` (the PriorityClass named by its
//! policy's `schedulePriority`, carried on the binding as
//! [`crate::priority::PREEMPTION_POLICY_ANNOTATION`]; absent means `PreemptLowerPriority`), the
//! scheduler looks for ONE cluster where evicting bindings of strictly lower
//! `spec.schedulePriority.priority` frees enough capacity for it:
//!
//! * candidates on a cluster are the other bindings with replicas there and a lower priority,
//!   that the profile's victim rules ([`VictimRules`]: CEL, or a Wasm victim plugin) do not veto;
//! * they are taken lowest priority first, then highest victim score (the rules' `score`, 0
//!   without one), then most replicas there (fewest victims), then newest `creationTimestamp`,
//!   then name — or, with a victim plugin, lowest priority first, then in the plugin's order —
//!   the shortest such prefix that lets the binding schedule, after which every
//!   victim that is not needed is spared again (last taken first), so no victim is superfluous;
//! * the cluster needing the fewest victims wins (tie: the lowest highest-victim priority, then
//!   the cluster name).
//!
//! "Frees" means: the victims' pods on the cluster — `replicaRequirements.resourceRequest` × their
//! replicas there, or, for a multi-component workload placed whole, every component's replicas ×
//! its requests — leave the cluster's `resourceSummary.allocated` (then `allocating`), one pod
//! each included, and the scheduler runs again for the preemptor on that summary. With resource
//! models (`allocatableModelings`), which count nodes by grade and do not say where the victims
//! ran, each freed pod counts as one more virtual node holding exactly what it requested
//! ([`crate::estimator::FreedPods`]): room that is surely there, never room counted twice. A
//! multi-component preemptor is estimated in whole component sets on that same freed cluster,
//! and multi-component workloads are victims like any other (their pods: one complete set).
//!
//! Each victim loses that cluster ([`evict_victim`]: a `Directly` graceful-eviction task with
//! reason `Preempted`, so its copy there is removed at once and Karmada's `ClusterEviction`
//! filter keeps it off the cluster while the task lasts) and goes back through the queue: it may
//! land elsewhere or become unschedulable. A binding whose policy is `Never` never evicts, and a
//! binding of equal or higher priority is never a victim.

use flotilla_api::Object;
use flotilla_api::cluster::Cluster;
use flotilla_api::meta::{Quantity, QuantityRepr, ResourceList};
use flotilla_api::work::ResourceBinding;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::component_sets::ComponentSet;
use crate::error::PluginError;
use crate::estimator::{FreedPods, nano};
use crate::expression::{ExpressionEngine, ExpressionKind};
use crate::failover::{self, Purge, purge_mode};
use crate::framework::{FailurePolicy, Profile, Slot, VictimCandidate, VictimInput, VictimPlugin};
use crate::pipeline::Snapshot;
use crate::priority::{PreemptionPolicy, preemption_policy_of};
use crate::quantity::{NANO_PER_UNIT, nano_to_value};
use crate::queue::binding_priority;
use crate::scheduler::{self, FailureKind};
use crate::time::parse_rfc3339;

/// Reason of a victim's eviction task and Event.
pub const REASON_PREEMPTED: &str = "Preempted";
/// Producer of a victim's eviction task.
pub const PRODUCER: &str = "flotilla-scheduler-preemption";
/// Most candidate victims considered on one cluster (the lowest-priority ones).
pub const MAX_CANDIDATES_PER_CLUSTER: usize = 10_000;

/// A profile's rules for choosing victims (`spec.preemption` of a `SchedulerProfile`): CEL
/// expressions evaluated by the profile's expression engine with `object` bound to
/// `{"victim": <binding>, "preemptor": <binding>}` and `cluster` to the cluster preempted on,
/// or a Wasm plugin (`plugin`, `flotilla_victims_v1` in sdk/ABI.md) that gets the candidates of
/// one cluster and replies which may go, in which order. One or the other, not both.
///
/// ```yaml
/// spec:
///   preemption:
///     victimFilter: "!has(object.victim.metadata.labels) || object.victim.metadata.labels['tier'] != 'gold'"
///     victimScore: "object.victim.spec.replicas"   # higher: evicted earlier within a priority
/// ---
/// spec:
///   preemption:
///     plugin: {name: keep-gold, wasm: {path: keep-gold.wasm}, failurePolicy: Fail}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VictimRules {
    /// A `bool`: `false` vetoes the candidate (it is never evicted for this preemptor there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim_filter: Option<String>,
    /// A number: among candidates of the same priority, the higher is evicted first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim_score: Option<String>,
    /// A Wasm plugin choosing the victims (`name`, `wasm`, `config`, `failurePolicy`,
    /// `limits`, as a profile entry). A fault under `failurePolicy: Fail` (the default)
    /// abandons the preemption as a failing CEL rule does; under `Ignore` the built-in choice
    /// stands and the fault is recorded ([`Preemption::ignored_faults`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<crate::profile::PluginSpec>,
}

impl VictimRules {
    /// Whether there is any rule (CEL or plugin).
    pub fn is_empty(&self) -> bool {
        !self.has_expressions() && self.plugin.is_none()
    }

    /// Whether there is a CEL rule.
    pub fn has_expressions(&self) -> bool {
        self.victim_filter.is_some() || self.victim_score.is_some()
    }

    /// Compile each rule with `engine`; errors name the field (`victimFilter`, `victimScore`).
    ///
    /// # Errors
    /// The first rule that does not compile, any rule without an engine, or CEL rules beside a
    /// plugin.
    pub fn check(&self, engine: Option<&dyn ExpressionEngine>) -> Result<(), String> {
        if self.plugin.is_some() && self.has_expressions() {
            return Err(
                "preemption: set victimFilter/victimScore (CEL) or plugin (Wasm), not both".into(),
            );
        }
        for (field, kind, src) in self.sites() {
            let Some(engine) = engine else {
                return Err(format!(
                    "preemption.{field}: this build has no expression engine"
                ));
            };
            engine.check(kind, src).map_err(|e| {
                format!(
                    "preemption.{field}: invalid {} expression: {}",
                    engine.language(),
                    e.message
                )
            })?;
        }
        Ok(())
    }

    fn sites(&self) -> Vec<(&'static str, ExpressionKind, &str)> {
        let mut out = Vec::new();
        if let Some(f) = &self.victim_filter {
            out.push(("victimFilter", ExpressionKind::ClusterSelector, f.as_str()));
        }
        if let Some(s) = &self.victim_score {
            out.push(("victimScore", ExpressionKind::Score, s.as_str()));
        }
        out
    }
}

/// One evicted binding.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Victim {
    /// `ResourceBinding` or `ClusterResourceBinding`.
    pub kind: String,
    /// Its namespace (empty for a ClusterResourceBinding).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its `spec.schedulePriority.priority`.
    pub priority: i32,
    /// Its pods on the preempted cluster: its replicas there, or the pods of its component set
    /// for a multi-component workload placed whole.
    pub replicas: i32,
}

impl Victim {
    /// `namespace/name` (`name` when cluster-scoped).
    pub fn key(&self) -> String {
        key_of(&self.namespace, &self.name)
    }
}

/// A chosen preemption: the cluster and its victims, in eviction order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    /// The preemptor, `namespace/name`.
    pub preemptor: String,
    /// Its priority.
    pub priority: i32,
    /// The cluster preempted on.
    pub cluster: String,
    /// The victims.
    pub victims: Vec<Victim>,
    /// Faults of the victim plugin under `failurePolicy: Ignore` (the built-in choice stood).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_faults: Vec<String>,
}

impl Preemption {
    /// `ns/a, ns/b`.
    pub fn victim_list(&self) -> String {
        self.victims
            .iter()
            .map(Victim::key)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn key_of(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_owned()
    } else {
        format!("{ns}/{name}")
    }
}

/// `namespace/name` of a binding.
pub fn binding_key(rb: &ResourceBinding) -> String {
    key_of(rb.metadata.namespace(), rb.metadata.name())
}

/// Whether `rb`, just decided with `outcome`, may preempt: the gate is on, the outcome is
/// `Unschedulable` (capacity, not filters or errors), and its preemption policy is not `Never`.
pub fn eligible(
    snapshot: &Snapshot,
    rb: &ResourceBinding,
    outcome: Option<&Result<(), scheduler::Failure>>,
) -> bool {
    snapshot.options().gates.binding_preemption
        && matches!(outcome, Some(Err(f)) if f.kind == FailureKind::Unschedulable)
        && preemption_policy_of(rb) == PreemptionPolicy::PreemptLowerPriority
        && rb.metadata.deletion_timestamp.is_none()
}

/// What one candidate frees on a cluster, with its ordering keys.
struct Candidate<'a> {
    binding: &'a ResourceBinding,
    priority: i32,
    score: f64,
    replicas: i32,
    created: i64,
    key: String,
}

/// Find the preemption for `preemptor` (decided Unschedulable; `before` its state before that
/// decision, which the scheduler is run on again) among `others` (every other binding, with
/// their current `spec.clusters`), or `None` when no single cluster can be freed enough.
///
/// # Errors
/// A victim rule failed to evaluate (the preemption is abandoned, nothing is evicted).
pub fn find(
    snapshot: &Snapshot,
    profile: &Profile,
    before: &ResourceBinding,
    template: Option<&Object>,
    others: &[&ResourceBinding],
) -> Result<Option<Preemption>, String> {
    let priority = binding_priority(before.spec.schedule_priority.as_ref());
    let me = binding_key(before);
    let preemptor_json = serde_json::to_value(before).unwrap_or(Value::Null);
    let engine = profile.expressions.as_deref();
    let rules = &profile.preemption;
    let mut ignored_faults: Vec<String> = Vec::new();
    let status = before.status.clone().unwrap_or_default();
    let fits = |snap: &Snapshot| {
        scheduler::schedule(
            snap,
            profile,
            &before.spec,
            &status,
            template.map(|t| &t.0),
            None,
        )
        .outcome
        .is_ok()
    };
    // (victims, highest victim priority, cluster name) of the best so far.
    let mut best: Option<(usize, i32, Preemption)> = None;
    for cluster in snapshot.clusters() {
        let name = cluster.name();
        let mut cands: Vec<Candidate<'_>> = Vec::new();
        for b in others {
            let key = binding_key(b);
            if key == me && b.kind == before.kind {
                continue;
            }
            let p = binding_priority(b.spec.schedule_priority.as_ref());
            let replicas = pod_count(b, name);
            if p >= priority || replicas <= 0 || b.metadata.deletion_timestamp.is_some() {
                continue;
            }
            cands.push(Candidate {
                binding: b,
                priority: p,
                score: 0.0,
                replicas,
                created: b
                    .metadata
                    .creation_timestamp
                    .as_deref()
                    .and_then(parse_rfc3339)
                    .unwrap_or(i64::MIN),
                key,
            });
        }
        if cands.is_empty() {
            continue;
        }
        if rules.has_expressions() {
            cands = apply_rules(rules, engine, &preemptor_json, cluster, cands)?;
        }
        cands.sort_by(|a, b| {
            a.priority
                .cmp(&b.priority)
                .then(b.score.total_cmp(&a.score))
                .then(b.replicas.cmp(&a.replicas))
                .then(b.created.cmp(&a.created))
                .then(a.key.cmp(&b.key))
        });
        cands.truncate(MAX_CANDIDATES_PER_CLUSTER);
        if let Some(slot) = &profile.victims {
            match choose(slot, before, cluster, cands) {
                Ok(chosen) => cands = chosen,
                Err((e, built_in)) => match slot.failure_policy {
                    FailurePolicy::Fail => return Err(format!("victim plugin: {e}")),
                    FailurePolicy::Ignore => {
                        ignored_faults.push(e.to_string());
                        cands = built_in;
                    }
                },
            }
            if cands.is_empty() {
                continue;
            }
        }
        let freed = |set: &[&Candidate<'_>]| -> Snapshot {
            let bindings: Vec<&ResourceBinding> = set.iter().map(|c| c.binding).collect();
            free(snapshot, cluster, &bindings)
        };
        let all: Vec<&Candidate<'_>> = cands.iter().collect();
        if !fits(&freed(&all)) {
            continue;
        }
        // The shortest prefix that fits (freeing more never makes it fit less).
        let (mut lo, mut hi) = (1, all.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if fits(&freed(&all[..mid])) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let mut chosen: Vec<&Candidate<'_>> = all[..lo].to_vec();
        // Spare every victim not needed, last taken first.
        let mut i = chosen.len();
        while i > 0 && chosen.len() > 1 {
            i -= 1;
            let mut without = chosen.clone();
            without.remove(i);
            if fits(&freed(&without)) {
                chosen = without;
            }
        }
        let max_p = chosen.iter().map(|c| c.priority).max().unwrap_or(i32::MIN);
        let p = Preemption {
            preemptor: me.clone(),
            priority,
            cluster: name.to_owned(),
            victims: chosen
                .iter()
                .map(|c| Victim {
                    kind: c.binding.kind.clone(),
                    namespace: c.binding.metadata.namespace().to_owned(),
                    name: c.binding.metadata.name().to_owned(),
                    priority: c.priority,
                    replicas: c.replicas,
                })
                .collect(),
            ignored_faults: Vec::new(),
        };
        // Clusters come in name order: a later cluster wins only when strictly better.
        let better = match &best {
            None => true,
            Some((n, mp, _)) => (p.victims.len(), max_p) < (*n, *mp),
        };
        if better {
            best = Some((p.victims.len(), max_p, p));
        }
    }
    Ok(best.map(|(_, _, mut p)| {
        p.ignored_faults = ignored_faults;
        p
    }))
}

/// Ask the victim plugin of `slot` which of `cands` (built-in order) may go on `cluster`, and in
/// which order: its order within each priority, lower priorities still first. The reply is
/// checked again here (positions in range, each once) whatever the backend checked. On a fault,
/// the error and `cands` unchanged (for `failurePolicy: Ignore`).
#[allow(clippy::type_complexity)]
fn choose<'a>(
    slot: &Slot<dyn VictimPlugin>,
    preemptor: &ResourceBinding,
    cluster: &Cluster,
    cands: Vec<Candidate<'a>>,
) -> Result<Vec<Candidate<'a>>, (PluginError, Vec<Candidate<'a>>)> {
    let views: Vec<VictimCandidate<'_>> = cands
        .iter()
        .map(|c| VictimCandidate::new(c.binding, c.priority, c.replicas, c.created))
        .collect();
    let reply = slot
        .plugin
        .choose(&VictimInput::new(preemptor, cluster, &views));
    let order = match reply {
        Ok(order) => order,
        Err(e) => return Err((e, cands)),
    };
    let n = cands.len();
    let mut seen = vec![false; n];
    for &i in &order {
        let invalid = match seen.get_mut(i) {
            None => Some(format!("chose candidate {i} of {n}")),
            Some(true) => Some(format!("chose candidate {i} twice")),
            Some(s) => {
                *s = true;
                None
            }
        };
        if let Some(message) = invalid {
            let e = PluginError::InvalidOutput {
                plugin: slot.plugin.name().to_owned(),
                message,
            };
            return Err((e, cands));
        }
    }
    let mut slots: Vec<Option<Candidate<'a>>> = cands.into_iter().map(Some).collect();
    let mut out: Vec<Candidate<'a>> = order
        .iter()
        .filter_map(|&i| slots.get_mut(i).and_then(Option::take))
        .collect();
    // Stable: the plugin's order stands within a priority.
    out.sort_by_key(|c| c.priority);
    Ok(out)
}

fn apply_rules<'a>(
    rules: &VictimRules,
    engine: Option<&dyn ExpressionEngine>,
    preemptor: &Value,
    cluster: &Cluster,
    cands: Vec<Candidate<'a>>,
) -> Result<Vec<Candidate<'a>>, String> {
    let Some(engine) = engine else {
        return Err("victim rules need an expression engine; this profile has none".into());
    };
    let mut out = Vec::with_capacity(cands.len());
    for mut c in cands {
        let object = json!({
            "victim": serde_json::to_value(c.binding).unwrap_or(Value::Null),
            "preemptor": preemptor,
        });
        let bound = engine
            .bind(Some(&object))
            .map_err(|e| format!("victim {}: {}", c.key, e.message))?;
        if let Some(f) = &rules.victim_filter {
            let v = bound
                .evaluate(ExpressionKind::ClusterSelector, f, cluster)
                .map_err(|e| format!("victimFilter for {}: {}", c.key, e.message))?;
            if v != Value::Bool(true) {
                continue;
            }
        }
        if let Some(s) = &rules.victim_score {
            let v = bound
                .evaluate(ExpressionKind::Score, s, cluster)
                .map_err(|e| format!("victimScore for {}: {}", c.key, e.message))?;
            c.score = v.as_f64().filter(|f| f.is_finite()).unwrap_or(0.0);
        }
        out.push(c);
    }
    Ok(out)
}

/// The pods `rb` runs on `cluster`, by shape: what one pod requests per resource (nano-units,
/// not `pods`) and how many such pods. A workload with replicas there runs that many pods of its
/// `replicaRequirements`; a multi-component workload placed whole there (a target without
/// replicas) runs one complete set: each component's replicas × its requests.
fn pods_on(rb: &ResourceBinding, cluster: &str) -> Vec<FreedPods> {
    fn per_pod<'a>(
        requests: impl Iterator<Item = (&'a String, &'a Quantity)>,
    ) -> Vec<(String, i128)> {
        requests
            .filter(|(name, _)| name.as_str() != "pods")
            .map(|(name, q)| (name.clone(), nano(q).max(0)))
            .collect()
    }
    let Some(target) = rb.spec.clusters.iter().find(|t| t.name == cluster) else {
        return Vec::new();
    };
    if target.replicas > 0 {
        let requests = rb
            .spec
            .replica_requirements
            .as_ref()
            .map(|r| per_pod(r.resource_request.iter()))
            .unwrap_or_default();
        return vec![FreedPods {
            requests,
            count: i128::from(target.replicas),
        }];
    }
    ComponentSet::parse(&rb.spec.components)
        .components
        .iter()
        .filter(|c| c.replicas > 0)
        .map(|c| FreedPods {
            requests: per_pod(c.requests().iter().map(|(n, q)| (n, q))),
            count: i128::from(c.replicas),
        })
        .collect()
}

/// How many pods `rb` runs on `cluster` ([`pods_on`]), at most `i32::MAX`.
fn pod_count(rb: &ResourceBinding, cluster: &str) -> i32 {
    let pods: i128 = pods_on(rb, cluster).iter().map(|f| f.count).sum();
    i32::try_from(pods.min(i128::from(i32::MAX))).unwrap_or(0)
}

fn quantity(nano: i128) -> Quantity {
    if nano % NANO_PER_UNIT == 0 {
        Quantity(QuantityRepr::String(nano_to_value(nano).to_string()))
    } else {
        Quantity(QuantityRepr::String(format!("{nano}n")))
    }
}

fn adjust(list: &mut ResourceList, name: &str, delta: i128) -> i128 {
    let cur = list.get(name).map_or(0, nano);
    let next = cur.saturating_add(delta);
    let (value, rest) = if next < 0 { (0, next) } else { (next, 0) };
    if list.contains_key(name) || value != 0 {
        list.insert(name.to_owned(), quantity(value));
    }
    rest
}

/// `cluster` with `bindings`' pods there ([`pods_on`]) released (`sign` 1) or taken (`sign` -1):
/// the resource summary's `allocated` moves (then `allocating`, for what `allocated` did not
/// hold).
pub fn release(cluster: &Cluster, bindings: &[&ResourceBinding], sign: i128) -> Cluster {
    let mut c = cluster.clone();
    let Some(summary) = c.status.as_mut().and_then(|s| s.resource_summary.as_mut()) else {
        return c;
    };
    for b in bindings {
        for pods in pods_on(b, cluster.name()) {
            let per = pods
                .requests
                .iter()
                .map(|(name, v)| (name.as_str(), v.saturating_mul(pods.count)));
            for (name, amount) in per.chain(std::iter::once(("pods", pods.count * NANO_PER_UNIT))) {
                let rest = adjust(&mut summary.allocated, name, -sign * amount);
                if rest < 0 {
                    adjust(&mut summary.allocating, name, rest);
                }
            }
        }
    }
    c
}

/// `snapshot` with `victims`' pods gone from `cluster`: its resource summary gives their requests
/// back ([`release`]) and the estimator's resource-model path counts the room each pod leaves
/// ([`FreedPods`]).
fn free(snapshot: &Snapshot, cluster: &Cluster, victims: &[&ResourceBinding]) -> Snapshot {
    let freed = victims
        .iter()
        .flat_map(|b| pods_on(b, cluster.name()))
        .filter(|f| f.count > 0)
        .collect();
    snapshot.with_freed(release(cluster, victims, 1), freed)
}

/// Evict `victim` from `cluster` for `preemption` at `now` (epoch seconds): the cluster leaves
/// `spec.clusters` and a `Directly` eviction task with reason `Preempted` records why.
pub fn evict_victim(victim: &mut ResourceBinding, preemption: &Preemption, now: i64) {
    let cluster = preemption.cluster.as_str();
    failover::evict_with(
        victim,
        cluster,
        REASON_PREEMPTED,
        PRODUCER,
        &Purge {
            mode: purge_mode::DIRECTLY.to_owned(),
            grace_period_seconds: None,
        },
        now,
    );
    if let Some(t) =
        victim.spec.graceful_eviction_tasks.iter_mut().find(|t| {
            t.from_cluster == cluster && t.reason == REASON_PREEMPTED && t.message.is_empty()
        })
    {
        t.message = victim_message(preemption);
    }
}

/// The message on a victim (its Event and eviction task).
pub fn victim_message(p: &Preemption) -> String {
    format!(
        "Preempted by {} (priority {}) on cluster {}",
        p.preemptor, p.priority, p.cluster
    )
}

/// The message on the preemptor's Event.
pub fn preemptor_message(p: &Preemption) -> String {
    format!(
        "Preempted {} binding(s) of lower priority on cluster {}: {}",
        p.victims.len(),
        p.cluster,
        p.victim_list()
    )
}

/// A decision redone after a preemption.
#[derive(Debug, Clone)]
pub struct Preempted {
    /// The preemption.
    pub preemption: Preemption,
    /// The preemptor, decided again on the freed cluster.
    pub binding: ResourceBinding,
    /// That decision.
    pub decision: crate::pipeline::Decision,
    /// Its application-failover memory after that decision.
    pub memory: crate::pipeline::FailoverMemory,
    /// `snapshot` with the victims' usage released from the cluster and the preemptor's taken.
    pub snapshot: Snapshot,
}

/// After [`crate::pipeline::decide`] left `decided` with `decision`: when it may preempt
/// ([`eligible`]) and a preemption is found among `others` ([`find`]), decide `before` (the
/// binding and `memory` as they were before that decision) again on the freed cluster. The caller
/// evicts the victims ([`evict_victim`]) and writes the returned binding instead of `decided`.
/// `plan` and the live scheduler both go through here.
///
/// # Errors
/// A victim rule failed to evaluate.
#[allow(clippy::too_many_arguments)]
pub fn decide_preempting(
    snapshot: &Snapshot,
    before: &ResourceBinding,
    decided: &ResourceBinding,
    decision: &crate::pipeline::Decision,
    template: Option<&Object>,
    clock: crate::pipeline::Clock,
    memory: &crate::pipeline::FailoverMemory,
    others: &[&ResourceBinding],
) -> Result<Option<Preempted>, String> {
    if !eligible(snapshot, decided, decision.outcome.as_ref()) {
        return Ok(None);
    }
    let Some(profile) = snapshot.profile(&before.spec.scheduler_name) else {
        return Ok(None);
    };
    let Some(preemption) = find(snapshot, profile, before, template, others)? else {
        return Ok(None);
    };
    let Some(cluster) = snapshot.cluster(&preemption.cluster) else {
        return Ok(None);
    };
    let victims: Vec<&ResourceBinding> = others
        .iter()
        .copied()
        .filter(|b| {
            preemption.victims.iter().any(|v| {
                v.kind == b.kind
                    && v.namespace == b.metadata.namespace()
                    && v.name == b.metadata.name()
            })
        })
        .collect();
    let freed = free(snapshot, cluster, &victims);
    let mut rb = before.clone();
    let mut memory = memory.clone();
    let d = crate::pipeline::decide(&freed, &mut rb, template, clock, &mut memory, None);
    if !matches!(d.outcome, Some(Ok(()))) {
        return Ok(None);
    }
    let after = match freed.cluster(&preemption.cluster) {
        Some(c) => freed.with_cluster(release(c, &[&rb], -1)),
        None => freed,
    };
    Ok(Some(Preempted {
        preemption,
        binding: rb,
        decision: d,
        memory,
        snapshot: after,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component_sets::{ComponentSet, max_sets, max_sets_with};
    use crate::estimator::{Capacity, available_replicas_with};
    use flotilla_api::work::ResourceBindingSpec;

    fn cluster(summary: Value) -> Cluster {
        serde_json::from_value(json!({"apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster", "metadata": {"name": "m1"}, "spec": {},
            "status": {"resourceSummary": summary}}))
        .expect("cluster")
    }

    fn binding(spec: Value) -> ResourceBinding {
        serde_json::from_value(json!({"apiVersion": "work.karmada.io/v1alpha2",
            "kind": "ResourceBinding", "metadata": {"name": "b", "namespace": "ns"},
            "spec": spec}))
        .expect("binding")
    }

    /// A Flink-like job placed whole on m1: 1 job manager (1 CPU, 1Gi) and 3 task managers
    /// (2 CPU, 4Gi each).
    fn flink() -> ResourceBinding {
        binding(json!({
            "resource": {"apiVersion": "flink.example/v1", "kind": "FlinkDeployment", "name": "f"},
            "components": [
                {"name": "jobmanager", "replicas": 1,
                 "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "taskmanager", "replicas": 3,
                 "replicaRequirements": {"resourceRequest": {"cpu": "2", "memory": "4Gi"}}}],
            "clusters": [{"name": "m1", "components": [
                {"name": "jobmanager", "replicas": 1}, {"name": "taskmanager", "replicas": 3}]}],
        }))
    }

    #[test]
    fn a_component_workload_placed_whole_frees_its_whole_set() {
        let rb = flink();
        assert_eq!(pod_count(&rb, "m1"), 4);
        assert_eq!(pod_count(&rb, "m2"), 0);
        let c = cluster(json!({
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocated": {"cpu": "16", "memory": "20Gi", "pods": "10"}}));
        let freed = release(&c, &[&rb], 1);
        let s = freed.status.unwrap().resource_summary.unwrap();
        assert_eq!(s.allocated["cpu"], quantity(9 * NANO_PER_UNIT));
        assert_eq!(
            s.allocated["memory"],
            quantity(7 * (1 << 30) * NANO_PER_UNIT)
        );
        assert_eq!(s.allocated["pods"], quantity(6 * NANO_PER_UNIT));
        // Taking it again restores the summary.
        let back = release(&c, &[&rb], 1);
        let again = release(&back, &[&rb], -1);
        assert_eq!(
            again.status.unwrap().resource_summary.unwrap().allocated["cpu"],
            quantity(16 * NANO_PER_UNIT)
        );
    }

    #[test]
    fn freed_pods_count_as_model_nodes_of_their_own_requests() {
        // One node, no CPU left (grade 0 of Karmada's default models).
        let c = cluster(json!({
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "allocated": {"cpu": "16", "memory": "20Gi", "pods": "10"},
            "allocatableModelings": [{"grade": 0, "count": 1}]}));
        let replicas: ResourceBindingSpec = serde_json::from_value(json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "replicas": 4,
            "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "1Gi"}}}))
        .expect("spec");
        let victim = flink();
        let released = release(&c, &[&victim], 1);
        let plain = Capacity::of(&released);
        // The summary alone gives 7 CPUs back, but the model's one node is still full.
        assert_eq!(
            available_replicas_with(&[(&released, &plain)], &replicas),
            vec![0]
        );
        let freed = Capacity::with_freed(&released, pods_on(&victim, "m1"));
        // The job manager's hole holds one 1-CPU replica, each task manager's two: 7.
        assert_eq!(
            available_replicas_with(&[(&released, &freed)], &replicas),
            vec![7]
        );

        // A component set of one 2-CPU and one 1-CPU pod, packed first-fit: set 1 puts its
        // 2-CPU pod in a task manager's hole and its 1-CPU pod in the job manager's; set 2 takes
        // a second task manager's hole and half the third; no 2-CPU hole is left for a third.
        let set = ComponentSet::parse(&[
            json!({"name": "a", "replicas": 1,
                   "replicaRequirements": {"resourceRequest": {"cpu": "2"}}}),
            json!({"name": "b", "replicas": 1,
                   "replicaRequirements": {"resourceRequest": {"cpu": "1"}}}),
        ]);
        assert_eq!(max_sets(&released, &set), 0);
        let holes = pods_on(&victim, "m1");
        assert_eq!(max_sets_with(&released, &set, &holes), 2);
    }
}
