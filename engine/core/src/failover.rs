//! Cluster failover: NoExecute taint eviction (Karmada's taint manager) and graceful eviction task
//! expiry, as pure decisions over a binding and the cluster set at a given time.

use flotilla_api::cluster::Cluster;
use flotilla_api::labels;
use flotilla_api::meta::{Toleration, effect};
use flotilla_api::policy::Placement;
use flotilla_api::work::{GracefulEvictionTask, ResourceBinding};

use crate::time::{format_rfc3339, parse_rfc3339};

/// What the taint manager decides for one (binding, cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionDecision {
    /// Every NoExecute taint is tolerated forever (or there is none).
    Keep,
    /// Evict now.
    Evict,
    /// Tolerated until this time (epoch seconds); evict then.
    EvictAt(i64),
}

fn tolerates(t: &Toleration, key: &str, value: &str, eff: &str) -> bool {
    (t.effect.is_empty() || t.effect == eff)
        && (t.key.is_empty() || t.key == key)
        && match t.operator.as_str() {
            "Exists" => true,
            "" | "Equal" => t.value == value,
            _ => false,
        }
}

/// Karmada's taint-manager rule: an untolerated NoExecute taint evicts now; otherwise the earliest
/// `timeAdded + tolerationSeconds` over (first tolerating toleration, taint) pairs, evicting when it
/// is strictly before `now`.
pub fn taint_decision(cluster: &Cluster, tolerations: &[Toleration], now: i64) -> EvictionDecision {
    let mut earliest: Option<i64> = None;
    for taint in cluster.spec.taints.iter().filter(|t| t.effect == effect::NO_EXECUTE) {
        let Some(used) = tolerations.iter().find(|t| tolerates(t, &taint.key, &taint.value, &taint.effect)) else {
            return EvictionDecision::Evict;
        };
        if let (Some(secs), Some(added)) = (used.toleration_seconds, taint.time_added.as_deref().and_then(parse_rfc3339)) {
            let at = added + secs.max(0);
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        }
    }
    match earliest {
        None => EvictionDecision::Keep,
        Some(at) if at < now => EvictionDecision::Evict,
        Some(at) => EvictionDecision::EvictAt(at),
    }
}

/// The placement the scheduler last scheduled against (`policy.karmada.io/applied-placement`),
/// falling back to `spec.placement` for hand-written bindings that lack the annotation.
pub fn applied_placement(binding: &ResourceBinding) -> Option<Placement> {
    binding
        .metadata
        .annotations
        .get(labels::APPLIED_PLACEMENT)
        .and_then(|a| serde_json::from_str(a).ok())
        .or_else(|| binding.spec.placement.clone())
}

/// Purge modes of eviction tasks (Karmada v1.14+ names; the pre-1.14 names are aliases).
pub mod purge_mode {
    /// Remove the old copy at once; new Works wait until it is gone.
    pub const DIRECTLY: &str = "Directly";
    /// Keep the old copy until the new placement is healthy or the grace period ends.
    pub const GRACEFULLY: &str = "Gracefully";
    /// Keep the old copy until a user sets `suppressDeletion: false`.
    pub const NEVER: &str = "Never";

    /// The canonical name of `mode` (empty → `Gracefully`; `Immediately`/`Graciously` aliases).
    pub fn canonical(mode: Option<&str>) -> &'static str {
        match mode.unwrap_or("") {
            "Directly" | "Immediately" => DIRECTLY,
            "Never" => NEVER,
            _ => GRACEFULLY,
        }
    }
}

/// How an eviction treats the copy it leaves behind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Purge {
    /// `Directly`, `Gracefully` or `Never` (empty: `Gracefully`).
    pub mode: String,
    /// Grace period of a `Gracefully` task (`None`: the global timeout).
    pub grace_period_seconds: Option<i32>,
}

/// `GracefulEvictCluster` for the taint manager: the purge mode comes from
/// `spec.failover.cluster.purgeMode` (default `Gracefully`).
pub fn graceful_evict(binding: &mut ResourceBinding, cluster: &str, reason: &str, producer: &str, now: i64) {
    let mode = binding.spec.failover.as_ref().and_then(|f| f.cluster.as_ref()).and_then(|c| c.purge_mode.clone()).unwrap_or_default();
    evict_with(binding, cluster, reason, producer, &Purge { mode, grace_period_seconds: None }, now);
}

/// `GracefulEvictCluster`: drop `cluster` from `spec.clusters` and record an eviction task (once)
/// with `purge`'s mode: `Never` tasks carry `suppressDeletion: true`, `Gracefully` tasks the grace
/// period, `Directly` tasks neither.
pub fn evict_with(binding: &mut ResourceBinding, cluster: &str, reason: &str, producer: &str, purge: &Purge, now: i64) {
    let spec = &mut binding.spec;
    let replicas = spec.assigned_replicas(cluster);
    let before: Vec<String> = spec.clusters.iter().map(|t| t.name.clone()).collect();
    spec.clusters.retain(|t| t.name != cluster);
    if spec.graceful_eviction_tasks.iter().any(|t| t.from_cluster == cluster) {
        return;
    }
    let mode = purge_mode::canonical(Some(purge.mode.as_str()));
    spec.graceful_eviction_tasks.push(GracefulEvictionTask {
        from_cluster: cluster.to_owned(),
        purge_mode: Some(mode.to_owned()),
        replicas: (replicas > 0).then_some(replicas),
        reason: reason.to_owned(),
        producer: producer.to_owned(),
        grace_period_seconds: if mode == purge_mode::GRACEFULLY { purge.grace_period_seconds } else { None },
        suppress_deletion: (mode == purge_mode::NEVER).then_some(true),
        creation_timestamp: Some(format_rfc3339(now)),
        clusters_before_failover: if reason == APPLICATION_FAILURE { before } else { Vec::new() },
        ..Default::default()
    });
}

/// Reason of application-failover eviction tasks.
pub const APPLICATION_FAILURE: &str = "ApplicationFailure";
/// Producer of application-failover eviction tasks (ResourceBinding).
pub const APPLICATION_FAILOVER_PRODUCER: &str = "resource-binding-application-failover-controller";
/// Default `decisionConditions.tolerationSeconds`.
pub const DEFAULT_APPLICATION_TOLERATION_SECS: i64 = 300;

/// Clusters whose copies eviction tasks keep alive although they left `spec.clusters`: every
/// task's `fromCluster` except `Directly` ones.
pub fn retained_by_eviction(binding: &ResourceBinding) -> Vec<&str> {
    binding
        .spec
        .graceful_eviction_tasks
        .iter()
        .filter(|t| purge_mode::canonical(t.purge_mode.as_deref()) != purge_mode::DIRECTLY)
        .map(|t| t.from_cluster.as_str())
        .collect()
}

/// Clusters whose copies `Directly` tasks remove before any new Work is created.
pub fn purged_directly(binding: &ResourceBinding) -> Vec<&str> {
    binding
        .spec
        .graceful_eviction_tasks
        .iter()
        .filter(|t| purge_mode::canonical(t.purge_mode.as_deref()) == purge_mode::DIRECTLY)
        .map(|t| t.from_cluster.as_str())
        .collect()
}

/// Application failover over one binding (Karmada's `rb_application_failover_controller`):
/// clusters whose application has been `Unhealthy` (aggregatedStatus) for longer than
/// `decisionConditions.tolerationSeconds` are evicted with the policy's purge mode.
///
/// `first_seen` is the controller's memory of when each cluster was first seen unhealthy (epoch
/// milliseconds, like `now_ms`); it is updated here (healthy, unknown and unscheduled clusters are
/// forgotten). Returns the evicted clusters and the next time (epoch milliseconds) a decision is
/// due. Acts only when `spec.failover.application` is set, `propagateDeps` is on and the status is
/// non-empty.
///
/// Milliseconds, as Karmada keeps `time.Now()`: with whole seconds a workload first seen unhealthy
/// late in one second was evicted early in the next, up to a second before `tolerationSeconds`
/// (a one-second toleration could fire on a workload that was unhealthy for a few milliseconds
/// while it started).
pub fn application_failover(binding: &mut ResourceBinding, first_seen: &mut std::collections::BTreeMap<String, i64>, now_ms: i64) -> (Vec<String>, Option<i64>) {
    let Some(app) = binding.spec.failover.as_ref().and_then(|f| f.application.clone()) else {
        first_seen.clear();
        return (Vec::new(), None);
    };
    let items = binding.status.as_ref().map(|s| s.aggregated_status.clone()).unwrap_or_default();
    if items.is_empty() || !binding.spec.propagate_deps {
        first_seen.clear();
        return (Vec::new(), None);
    }
    let toleration = app.decision_conditions.toleration_seconds.map_or(DEFAULT_APPLICATION_TOLERATION_SECS, i64::from).saturating_mul(1000);
    let in_task = |c: &str, b: &ResourceBinding| b.spec.graceful_eviction_tasks.iter().any(|t| t.from_cluster == c);
    let scheduled: Vec<String> = binding.spec.clusters.iter().map(|t| t.name.clone()).collect();
    let unhealthy: Vec<String> = items
        .iter()
        .filter(|i| i.health == "Unhealthy" && scheduled.contains(&i.cluster_name) && !in_task(&i.cluster_name, binding))
        .map(|i| i.cluster_name.clone())
        .collect();
    first_seen.retain(|c, _| unhealthy.contains(c));
    let purge = Purge { mode: app.purge_mode.clone().unwrap_or_default(), grace_period_seconds: app.grace_period_seconds };
    let mut evicted = Vec::new();
    let mut next: Option<i64> = None;
    for c in unhealthy {
        let since = *first_seen.entry(c.clone()).or_insert(now_ms);
        if now_ms >= since.saturating_add(toleration) {
            evict_with(binding, &c, APPLICATION_FAILURE, APPLICATION_FAILOVER_PRODUCER, &purge, now_ms.div_euclid(1000));
            first_seen.remove(&c);
            evicted.push(c);
        } else {
            let at = since.saturating_add(toleration);
            next = Some(next.map_or(at, |n: i64| n.min(at)));
        }
    }
    (evicted, next)
}

/// Run the taint manager over one binding: evict every scheduled cluster whose NoExecute taints are
/// not (or no longer) tolerated. Returns the evicted clusters and the next time a decision is due.
pub fn evict_tainted(binding: &mut ResourceBinding, clusters: &[Cluster], now: i64) -> (Vec<String>, Option<i64>) {
    let tolerations = applied_placement(binding).map(|p| p.cluster_tolerations).unwrap_or_default();
    let mut evicted = Vec::new();
    let mut next: Option<i64> = None;
    let targets: Vec<String> = binding.spec.clusters.iter().map(|t| t.name.clone()).collect();
    for name in targets {
        let Some(cluster) = clusters.iter().find(|c| c.name() == name) else { continue };
        match taint_decision(cluster, &tolerations, now) {
            EvictionDecision::Keep => {}
            EvictionDecision::Evict => {
                graceful_evict(binding, &name, "TaintUntolerated", "TaintManager", now);
                evicted.push(name);
            }
            EvictionDecision::EvictAt(at) => next = Some(next.map_or(at, |n| n.min(at))),
        }
    }
    (evicted, next)
}

/// Default `--graceful-eviction-timeout`: 10 minutes.
pub const GRACEFUL_EVICTION_TIMEOUT_SECS: i64 = 600;

/// Assess graceful eviction tasks at `now` (Karmada `evictiontask.go`): keep suppressed tasks, drop
/// tasks past their grace period, drop all once the binding is scheduled and healthy everywhere.
pub fn assess_eviction_tasks(binding: &mut ResourceBinding, now: i64) {
    let scheduled_and_healthy = binding.status.as_ref().is_some_and(|s| {
        s.scheduler_observed_generation == binding.metadata.generation.unwrap_or(0)
            && binding.spec.clusters.iter().all(|c| s.aggregated_status.iter().any(|a| a.cluster_name == c.name && a.health == "Healthy"))
    });
    binding.spec.graceful_eviction_tasks.retain_mut(|task| {
        let created = match task.creation_timestamp.as_deref().and_then(parse_rfc3339) {
            Some(c) => c,
            None => {
                task.creation_timestamp = Some(format_rfc3339(now));
                return true;
            }
        };
        match task.suppress_deletion {
            Some(true) => return true,
            Some(false) => return false,
            None => {}
        }
        let timeout = task.grace_period_seconds.map_or(GRACEFUL_EVICTION_TIMEOUT_SECS, i64::from);
        if now > created + timeout {
            return false;
        }
        !scheduled_and_healthy
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app_binding(health: &[(&str, &str)], mode: &str) -> ResourceBinding {
        use flotilla_api::policy::{ApplicationFailoverBehavior, DecisionConditions, FailoverBehavior};
        use flotilla_api::work::{AggregatedStatusItem, ResourceBindingStatus, TargetCluster};
        let mut rb = ResourceBinding::default();
        rb.spec.propagate_deps = true;
        rb.spec.replicas = 4;
        rb.spec.clusters = health.iter().map(|(c, _)| TargetCluster::new(*c, 2)).collect();
        rb.spec.failover = Some(FailoverBehavior {
            application: Some(ApplicationFailoverBehavior {
                decision_conditions: DecisionConditions { toleration_seconds: Some(30) },
                purge_mode: Some(mode.into()),
                grace_period_seconds: Some(120),
                ..Default::default()
            }),
            ..Default::default()
        });
        rb.status = Some(ResourceBindingStatus {
            aggregated_status: health.iter().map(|(c, h)| AggregatedStatusItem { cluster_name: (*c).into(), health: (*h).into(), ..Default::default() }).collect(),
            ..Default::default()
        });
        rb
    }

    #[test]
    fn application_failover_evicts_after_toleration_seconds_with_the_purge_mode() {
        let mut seen = std::collections::BTreeMap::new();
        let mut rb = app_binding(&[("m1", "Unhealthy"), ("m2", "Healthy"), ("m3", "Unknown")], "Gracefully");
        assert_eq!(application_failover(&mut rb, &mut seen, 1_000_000), (vec![], Some(1_030_000)), "first seen: wait tolerationSeconds");
        assert_eq!(application_failover(&mut rb, &mut seen, 1_029_999), (vec![], Some(1_030_000)));
        assert_eq!(application_failover(&mut rb, &mut seen, 1_030_000), (vec!["m1".to_owned()], None));
        assert_eq!(rb.spec.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["m2", "m3"]);
        let t = &rb.spec.graceful_eviction_tasks[0];
        assert_eq!((t.from_cluster.as_str(), t.reason.as_str(), t.purge_mode.as_deref()), ("m1", APPLICATION_FAILURE, Some("Gracefully")));
        assert_eq!((t.grace_period_seconds, t.suppress_deletion, t.replicas), (Some(120), None, Some(2)));
        assert_eq!(t.clusters_before_failover, ["m1", "m2", "m3"]);
        assert_eq!(retained_by_eviction(&rb), ["m1"]);
        assert!(purged_directly(&rb).is_empty());

        let t0 = rb.spec.graceful_eviction_tasks[0].creation_timestamp.clone();
        assert_eq!(t0.as_deref(), Some("1970-01-01T00:17:10Z"), "tasks are stamped in whole seconds");

        // The toleration is measured to the millisecond: first seen late in one second, the
        // workload is not evicted early in the next.
        let mut seen = std::collections::BTreeMap::new();
        let mut rb = app_binding(&[("m1", "Unhealthy")], "Never");
        rb.spec.failover.as_mut().unwrap().application.as_mut().unwrap().decision_conditions.toleration_seconds = Some(1);
        assert_eq!(application_failover(&mut rb, &mut seen, 1_000_950), (vec![], Some(1_001_950)));
        assert_eq!(application_failover(&mut rb, &mut seen, 1_001_050), (vec![], Some(1_001_950)), "0.1 s later: not yet");
        assert_eq!(application_failover(&mut rb, &mut seen, 1_001_950).0, ["m1"]);

        // Recovery before the deadline resets the clock.
        let mut seen = std::collections::BTreeMap::new();
        let mut rb = app_binding(&[("m1", "Unhealthy")], "Never");
        application_failover(&mut rb, &mut seen, 1_000_000);
        rb.status.as_mut().unwrap().aggregated_status[0].health = "Healthy".into();
        assert_eq!(application_failover(&mut rb, &mut seen, 1_020_000), (vec![], None));
        rb.status.as_mut().unwrap().aggregated_status[0].health = "Unhealthy".into();
        assert_eq!(application_failover(&mut rb, &mut seen, 1_040_000), (vec![], Some(1_070_000)));
        assert_eq!(application_failover(&mut rb, &mut seen, 1_070_000).0, ["m1"]);
        let t = &rb.spec.graceful_eviction_tasks[0];
        assert_eq!((t.suppress_deletion, t.grace_period_seconds), (Some(true), None), "Never suppresses deletion");

        let mut rb = app_binding(&[("m1", "Unhealthy")], "Immediately");
        rb.spec.failover.as_mut().unwrap().application.as_mut().unwrap().decision_conditions.toleration_seconds = Some(0);
        assert_eq!(application_failover(&mut rb, &mut std::collections::BTreeMap::new(), 5_000).0, ["m1"], "0 is immediate");
        assert_eq!(rb.spec.graceful_eviction_tasks[0].purge_mode.as_deref(), Some("Directly"), "old alias");
        assert_eq!(purged_directly(&rb), ["m1"]);
        assert!(retained_by_eviction(&rb).is_empty());

        // Off without propagateDeps or without the failover block.
        let mut rb = app_binding(&[("m1", "Unhealthy")], "Directly");
        rb.spec.propagate_deps = false;
        assert_eq!(application_failover(&mut rb, &mut std::collections::BTreeMap::new(), 10_000_000), (vec![], None));
    }
    use flotilla_api::meta::Taint;
    use flotilla_api::work::TargetCluster;

    fn tainted(name: &str, key: &str, added: Option<&str>) -> Cluster {
        let mut c = Cluster::default();
        c.metadata.name = Some(name.into());
        c.spec.taints.push(Taint { key: key.into(), effect: "NoExecute".into(), time_added: added.map(Into::into), ..Default::default() });
        c
    }

    #[test]
    fn untolerated_no_execute_evicts_and_toleration_seconds_delay_it() {
        let c = tainted("m1", "cluster.karmada.io/not-ready", Some("2026-01-01T00:00:00Z"));
        let t0 = parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(taint_decision(&c, &[], t0), EvictionDecision::Evict);
        let tol = Toleration { key: "cluster.karmada.io/not-ready".into(), operator: "Exists".into(), effect: "NoExecute".into(), toleration_seconds: Some(300), ..Default::default() };
        assert_eq!(taint_decision(&c, std::slice::from_ref(&tol), t0 + 10), EvictionDecision::EvictAt(t0 + 300));
        assert_eq!(taint_decision(&c, std::slice::from_ref(&tol), t0 + 301), EvictionDecision::Evict);
        let forever = Toleration { toleration_seconds: None, ..tol };
        assert_eq!(taint_decision(&c, &[forever], t0 + 100_000), EvictionDecision::Keep);
    }

    #[test]
    fn eviction_removes_cluster_and_records_one_task_with_replicas() {
        let mut rb = ResourceBinding::default();
        rb.spec.clusters = vec![TargetCluster::new("m1", 2), TargetCluster::new("m2", 3)];
        let clusters = vec![tainted("m1", "k", None), Cluster { metadata: flotilla_api::meta::ObjectMeta { name: Some("m2".into()), ..Default::default() }, ..Default::default() }];
        let (evicted, _) = evict_tainted(&mut rb, &clusters, 0);
        assert_eq!(evicted, vec!["m1"]);
        assert_eq!(rb.spec.clusters, vec![TargetCluster::new("m2", 3)]);
        let task = &rb.spec.graceful_eviction_tasks[0];
        assert_eq!((task.from_cluster.as_str(), task.replicas, task.purge_mode.as_deref()), ("m1", Some(2), Some("Gracefully")));
        assert_eq!((task.reason.as_str(), task.producer.as_str()), ("TaintUntolerated", "TaintManager"));
    }

    #[test]
    fn tasks_expire_after_grace_period_and_suppressed_tasks_stay() {
        let mut rb = ResourceBinding::default();
        rb.spec.graceful_eviction_tasks = vec![
            GracefulEvictionTask { from_cluster: "a".into(), creation_timestamp: Some(format_rfc3339(0)), ..Default::default() },
            GracefulEvictionTask { from_cluster: "b".into(), creation_timestamp: Some(format_rfc3339(0)), suppress_deletion: Some(true), ..Default::default() },
            GracefulEvictionTask { from_cluster: "c".into(), creation_timestamp: Some(format_rfc3339(0)), grace_period_seconds: Some(5000), ..Default::default() },
        ];
        assess_eviction_tasks(&mut rb, 601);
        let left: Vec<_> = rb.spec.graceful_eviction_tasks.iter().map(|t| t.from_cluster.as_str()).collect();
        assert_eq!(left, vec!["b", "c"]);
    }
}
