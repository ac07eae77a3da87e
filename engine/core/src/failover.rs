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

/// `GracefulEvictCluster`: drop `cluster` from `spec.clusters` and record an eviction task (once).
pub fn graceful_evict(binding: &mut ResourceBinding, cluster: &str, reason: &str, producer: &str, now: i64) {
    let spec = &mut binding.spec;
    let replicas = spec.assigned_replicas(cluster);
    spec.clusters.retain(|t| t.name != cluster);
    if spec.graceful_eviction_tasks.iter().any(|t| t.from_cluster == cluster) {
        return;
    }
    let purge_mode = spec
        .failover
        .as_ref()
        .and_then(|f| f.cluster.as_ref())
        .and_then(|c| c.purge_mode.clone())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "Gracefully".to_owned());
    spec.graceful_eviction_tasks.push(GracefulEvictionTask {
        from_cluster: cluster.to_owned(),
        purge_mode: Some(purge_mode),
        replicas: (replicas > 0).then_some(replicas),
        reason: reason.to_owned(),
        producer: producer.to_owned(),
        creation_timestamp: Some(format_rfc3339(now)),
        ..Default::default()
    });
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
