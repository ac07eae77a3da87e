//! Cluster failover: NoExecute taint eviction (Karmada's taint manager) and graceful eviction task
//! expiry, as pure decisions over a binding and the cluster set at a given time.

use flotilla_api::cluster::Cluster;
use flotilla_api::labels;
use flotilla_api::meta::{Taint, Toleration, effect};
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
    /// Tolerated until this time (epoch seconds, after now); evict from then on.
    EvictAt(i64),
}

/// `Toleration.ToleratesTaint` with Karmada's `enableComparisonOperators = false`.
fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    (t.effect.is_empty() || t.effect == taint.effect)
        && (t.key.is_empty() || t.key == taint.key)
        && match t.operator.as_str() {
            "Exists" => true,
            "" | "Equal" => t.value == taint.value,
            _ => false,
        }
}

/// `timeAdded + time.Duration(tolerationSeconds) * time.Second` as the first whole second at or
/// after it. Negative seconds are not clamped, and the product wraps like Go's `int64`
/// nanoseconds (tolerations beyond ~292 years), which can leave a fraction of a second.
fn trigger_at(added: i64, secs: i64) -> i64 {
    const NANOS: i64 = 1_000_000_000;
    let offset = secs.wrapping_mul(NANOS);
    added.saturating_add(offset.div_euclid(NANOS) + i64::from(offset.rem_euclid(NANOS) != 0))
}

/// Karmada's taint-manager rule (`GetMatchingTolerations`, `GetMinTolerationTimeWithCurrentTime`)
/// over the cluster's NoExecute taints:
///
/// * a taint no toleration tolerates evicts now;
/// * otherwise each taint *uses* its first tolerating toleration, and the eviction time is the
///   earliest `timeAdded + tolerationSeconds` over every (used toleration with
///   `tolerationSeconds`, taint with `timeAdded` that it tolerates) pair, so a toleration used for
///   one taint also times out others it matches; used tolerations without `tolerationSeconds`
///   contribute nothing, and with no pair left every taint is tolerated forever;
/// * the eviction time is inclusive: a toleration that expires at `now` evicts.
pub fn taint_decision(cluster: &Cluster, tolerations: &[Toleration], now: i64) -> EvictionDecision {
    let taints: Vec<&Taint> = cluster
        .spec
        .taints
        .iter()
        .filter(|t| t.effect == effect::NO_EXECUTE)
        .collect();
    let mut used: Vec<&Toleration> = Vec::with_capacity(taints.len());
    for taint in &taints {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(t) => used.push(t),
            None => return EvictionDecision::Evict,
        }
    }
    let earliest = used
        .iter()
        .filter_map(|u| u.toleration_seconds.map(|secs| (*u, secs)))
        .flat_map(|(u, secs)| {
            taints
                .iter()
                .filter(move |t| tolerates(u, t))
                .filter_map(move |t| {
                    t.time_added
                        .as_deref()
                        .and_then(parse_rfc3339)
                        .map(|added| trigger_at(added, secs))
                })
        })
        .min();
    match earliest {
        None => EvictionDecision::Keep,
        Some(at) if at <= now => EvictionDecision::Evict,
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
pub fn graceful_evict(
    binding: &mut ResourceBinding,
    cluster: &str,
    reason: &str,
    producer: &str,
    now: i64,
) {
    let mode = binding
        .spec
        .failover
        .as_ref()
        .and_then(|f| f.cluster.as_ref())
        .and_then(|c| c.purge_mode.clone())
        .unwrap_or_default();
    evict_with(
        binding,
        cluster,
        reason,
        producer,
        &Purge {
            mode,
            grace_period_seconds: None,
        },
        now,
    );
}

/// `GracefulEvictCluster`: drop `cluster` from `spec.clusters` and record an eviction task (once)
/// with `purge`'s mode: `Never` tasks carry `suppressDeletion: true`, `Gracefully` tasks the grace
/// period, `Directly` tasks neither.
pub fn evict_with(
    binding: &mut ResourceBinding,
    cluster: &str,
    reason: &str,
    producer: &str,
    purge: &Purge,
    now: i64,
) {
    let spec = &mut binding.spec;
    let replicas = spec.assigned_replicas(cluster);
    let before: Vec<String> = spec.clusters.iter().map(|t| t.name.clone()).collect();
    spec.clusters.retain(|t| t.name != cluster);
    if spec
        .graceful_eviction_tasks
        .iter()
        .any(|t| t.from_cluster == cluster)
    {
        return;
    }
    let mode = purge_mode::canonical(Some(purge.mode.as_str()));
    spec.graceful_eviction_tasks.push(GracefulEvictionTask {
        from_cluster: cluster.to_owned(),
        purge_mode: Some(mode.to_owned()),
        replicas: (replicas > 0).then_some(replicas),
        reason: reason.to_owned(),
        producer: producer.to_owned(),
        grace_period_seconds: if mode == purge_mode::GRACEFULLY {
            purge.grace_period_seconds
        } else {
            None
        },
        suppress_deletion: (mode == purge_mode::NEVER).then_some(true),
        creation_timestamp: Some(format_rfc3339(now)),
        clusters_before_failover: if reason == APPLICATION_FAILURE {
            before
        } else {
            Vec::new()
        },
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
pub fn application_failover(
    binding: &mut ResourceBinding,
    first_seen: &mut std::collections::BTreeMap<String, i64>,
    now_ms: i64,
) -> (Vec<String>, Option<i64>) {
    let Some(app) = binding
        .spec
        .failover
        .as_ref()
        .and_then(|f| f.application.clone())
    else {
        first_seen.clear();
        return (Vec::new(), None);
    };
    let items = binding
        .status
        .as_ref()
        .map(|s| s.aggregated_status.clone())
        .unwrap_or_default();
    if items.is_empty() || !binding.spec.propagate_deps {
        first_seen.clear();
        return (Vec::new(), None);
    }
    let toleration = app
        .decision_conditions
        .toleration_seconds
        .map_or(DEFAULT_APPLICATION_TOLERATION_SECS, i64::from)
        .saturating_mul(1000);
    let in_task = |c: &str, b: &ResourceBinding| {
        b.spec
            .graceful_eviction_tasks
            .iter()
            .any(|t| t.from_cluster == c)
    };
    let scheduled: Vec<String> = binding
        .spec
        .clusters
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let unhealthy: Vec<String> = items
        .iter()
        .filter(|i| {
            i.health == "Unhealthy"
                && scheduled.contains(&i.cluster_name)
                && !in_task(&i.cluster_name, binding)
        })
        .map(|i| i.cluster_name.clone())
        .collect();
    first_seen.retain(|c, _| unhealthy.contains(c));
    let purge = Purge {
        mode: app.purge_mode.clone().unwrap_or_default(),
        grace_period_seconds: app.grace_period_seconds,
    };
    let mut evicted = Vec::new();
    let mut next: Option<i64> = None;
    for c in unhealthy {
        let since = *first_seen.entry(c.clone()).or_insert(now_ms);
        if now_ms >= since.saturating_add(toleration) {
            evict_with(
                binding,
                &c,
                APPLICATION_FAILURE,
                APPLICATION_FAILOVER_PRODUCER,
                &purge,
                now_ms.div_euclid(1000),
            );
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
/// not (or no longer) tolerated ([`taint_decision`]). Returns the evicted clusters and the next time
/// (epoch seconds) a decision is due: the earliest [`EvictionDecision::EvictAt`] of the clusters
/// kept, at which that cluster's decision is `Evict` (Karmada's `AddAfter` the remaining time).
pub fn evict_tainted(
    binding: &mut ResourceBinding,
    clusters: &[Cluster],
    now: i64,
) -> (Vec<String>, Option<i64>) {
    evict_tainted_with(
        binding,
        |name| clusters.iter().find(|c| c.name() == name),
        now,
    )
}

/// [`evict_tainted`] with the clusters found by `find` (a snapshot's binary search).
pub fn evict_tainted_with<'c>(
    binding: &mut ResourceBinding,
    find: impl Fn(&str) -> Option<&'c Cluster>,
    now: i64,
) -> (Vec<String>, Option<i64>) {
    // The applied placement is parsed only for a target with a NoExecute taint (rare).
    let mut tolerations: Option<Vec<Toleration>> = None;
    let mut evicted = Vec::new();
    let mut next: Option<i64> = None;
    let mut due: Vec<String> = Vec::new();
    for target in &binding.spec.clusters {
        let Some(cluster) = find(&target.name) else {
            continue;
        };
        if !cluster
            .spec
            .taints
            .iter()
            .any(|t| t.effect == effect::NO_EXECUTE)
        {
            continue;
        }
        let tolerations = tolerations.get_or_insert_with(|| {
            applied_placement(binding)
                .map(|p| p.cluster_tolerations)
                .unwrap_or_default()
        });
        match taint_decision(cluster, tolerations, now) {
            EvictionDecision::Keep => {}
            EvictionDecision::Evict => due.push(target.name.clone()),
            EvictionDecision::EvictAt(at) => next = Some(next.map_or(at, |n| n.min(at))),
        }
    }
    for name in due {
        graceful_evict(binding, &name, "TaintUntolerated", "TaintManager", now);
        evicted.push(name);
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
            && binding.spec.clusters.iter().all(|c| {
                s.aggregated_status
                    .iter()
                    .any(|a| a.cluster_name == c.name && a.health == "Healthy")
            })
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
        let timeout = task
            .grace_period_seconds
            .map_or(GRACEFUL_EVICTION_TIMEOUT_SECS, i64::from);
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
        use flotilla_api::policy::{
            ApplicationFailoverBehavior, DecisionConditions, FailoverBehavior,
        };
        use flotilla_api::work::{AggregatedStatusItem, ResourceBindingStatus, TargetCluster};
        let mut rb = ResourceBinding::default();
        rb.spec.propagate_deps = true;
        rb.spec.replicas = 4;
        rb.spec.clusters = health
            .iter()
            .map(|(c, _)| TargetCluster::new(*c, 2))
            .collect();
        rb.spec.failover = Some(FailoverBehavior {
            application: Some(ApplicationFailoverBehavior {
                decision_conditions: DecisionConditions {
                    toleration_seconds: Some(30),
                },
                purge_mode: Some(mode.into()),
                grace_period_seconds: Some(120),
                ..Default::default()
            }),
            ..Default::default()
        });
        rb.status = Some(ResourceBindingStatus {
            aggregated_status: health
                .iter()
                .map(|(c, h)| AggregatedStatusItem {
                    cluster_name: (*c).into(),
                    health: (*h).into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        rb
    }

    #[test]
    fn application_failover_evicts_after_toleration_seconds_with_the_purge_mode() {
        let mut seen = std::collections::BTreeMap::new();
        let mut rb = app_binding(
            &[("m1", "Unhealthy"), ("m2", "Healthy"), ("m3", "Unknown")],
            "Gracefully",
        );
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_000_000),
            (vec![], Some(1_030_000)),
            "first seen: wait tolerationSeconds"
        );
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_029_999),
            (vec![], Some(1_030_000))
        );
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_030_000),
            (vec!["m1".to_owned()], None)
        );
        assert_eq!(
            rb.spec
                .clusters
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["m2", "m3"]
        );
        let t = &rb.spec.graceful_eviction_tasks[0];
        assert_eq!(
            (
                t.from_cluster.as_str(),
                t.reason.as_str(),
                t.purge_mode.as_deref()
            ),
            ("m1", APPLICATION_FAILURE, Some("Gracefully"))
        );
        assert_eq!(
            (t.grace_period_seconds, t.suppress_deletion, t.replicas),
            (Some(120), None, Some(2))
        );
        assert_eq!(t.clusters_before_failover, ["m1", "m2", "m3"]);
        assert_eq!(retained_by_eviction(&rb), ["m1"]);
        assert!(purged_directly(&rb).is_empty());

        let t0 = rb.spec.graceful_eviction_tasks[0]
            .creation_timestamp
            .clone();
        assert_eq!(
            t0.as_deref(),
            Some("1970-01-01T00:17:10Z"),
            "tasks are stamped in whole seconds"
        );

        // The toleration is measured to the millisecond: first seen late in one second, the
        // workload is not evicted early in the next.
        let mut seen = std::collections::BTreeMap::new();
        let mut rb = app_binding(&[("m1", "Unhealthy")], "Never");
        rb.spec
            .failover
            .as_mut()
            .unwrap()
            .application
            .as_mut()
            .unwrap()
            .decision_conditions
            .toleration_seconds = Some(1);
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_000_950),
            (vec![], Some(1_001_950))
        );
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_001_050),
            (vec![], Some(1_001_950)),
            "0.1 s later: not yet"
        );
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_001_950).0,
            ["m1"]
        );

        // Recovery before the deadline resets the clock.
        let mut seen = std::collections::BTreeMap::new();
        let mut rb = app_binding(&[("m1", "Unhealthy")], "Never");
        application_failover(&mut rb, &mut seen, 1_000_000);
        rb.status.as_mut().unwrap().aggregated_status[0].health = "Healthy".into();
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_020_000),
            (vec![], None)
        );
        rb.status.as_mut().unwrap().aggregated_status[0].health = "Unhealthy".into();
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_040_000),
            (vec![], Some(1_070_000))
        );
        assert_eq!(
            application_failover(&mut rb, &mut seen, 1_070_000).0,
            ["m1"]
        );
        let t = &rb.spec.graceful_eviction_tasks[0];
        assert_eq!(
            (t.suppress_deletion, t.grace_period_seconds),
            (Some(true), None),
            "Never suppresses deletion"
        );

        let mut rb = app_binding(&[("m1", "Unhealthy")], "Immediately");
        rb.spec
            .failover
            .as_mut()
            .unwrap()
            .application
            .as_mut()
            .unwrap()
            .decision_conditions
            .toleration_seconds = Some(0);
        assert_eq!(
            application_failover(&mut rb, &mut std::collections::BTreeMap::new(), 5_000).0,
            ["m1"],
            "0 is immediate"
        );
        assert_eq!(
            rb.spec.graceful_eviction_tasks[0].purge_mode.as_deref(),
            Some("Directly"),
            "old alias"
        );
        assert_eq!(purged_directly(&rb), ["m1"]);
        assert!(retained_by_eviction(&rb).is_empty());

        // Off without propagateDeps or without the failover block.
        let mut rb = app_binding(&[("m1", "Unhealthy")], "Directly");
        rb.spec.propagate_deps = false;
        assert_eq!(
            application_failover(&mut rb, &mut std::collections::BTreeMap::new(), 10_000_000),
            (vec![], None)
        );
    }
    use flotilla_api::work::TargetCluster;

    fn tainted(name: &str, key: &str, added: Option<&str>) -> Cluster {
        let mut c = Cluster::default();
        c.metadata.name = Some(name.into());
        c.spec.taints.push(Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            time_added: added.map(Into::into),
            ..Default::default()
        });
        c
    }

    #[test]
    fn untolerated_no_execute_evicts_and_toleration_seconds_delay_it() {
        let c = tainted(
            "m1",
            "cluster.karmada.io/not-ready",
            Some("2026-01-01T00:00:00Z"),
        );
        let t0 = parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(taint_decision(&c, &[], t0), EvictionDecision::Evict);
        let tol = Toleration {
            key: "cluster.karmada.io/not-ready".into(),
            operator: "Exists".into(),
            effect: "NoExecute".into(),
            toleration_seconds: Some(300),
            ..Default::default()
        };
        assert_eq!(
            taint_decision(&c, std::slice::from_ref(&tol), t0 + 10),
            EvictionDecision::EvictAt(t0 + 300)
        );
        assert_eq!(
            taint_decision(&c, std::slice::from_ref(&tol), t0 + 299),
            EvictionDecision::EvictAt(t0 + 300)
        );
        assert_eq!(
            taint_decision(&c, std::slice::from_ref(&tol), t0 + 300),
            EvictionDecision::Evict,
            "expiring now evicts"
        );
        assert_eq!(
            taint_decision(&c, std::slice::from_ref(&tol), t0 + 301),
            EvictionDecision::Evict
        );
        let forever = Toleration {
            toleration_seconds: None,
            ..tol
        };
        assert_eq!(
            taint_decision(&c, &[forever], t0 + 100_000),
            EvictionDecision::Keep
        );
    }

    fn exists(key: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: "Exists".into(),
            effect: "NoExecute".into(),
            toleration_seconds: secs,
            ..Default::default()
        }
    }

    #[test]
    fn eviction_time_is_the_earliest_over_used_tolerations_and_the_taints_they_match() {
        let t0 = parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        let mut c = tainted("m1", "a", Some("2026-01-01T00:00:00Z"));
        c.spec.taints.push(Taint {
            key: "b".into(),
            effect: "NoExecute".into(),
            time_added: Some("2026-01-01T00:00:50Z".into()),
            ..Default::default()
        });
        // Each taint's own toleration: a at t0 + 100, b at t0 + 50 + 30.
        let own = [exists("a", Some(100)), exists("b", Some(30))];
        assert_eq!(
            taint_decision(&c, &own, t0),
            EvictionDecision::EvictAt(t0 + 80)
        );
        assert_eq!(taint_decision(&c, &own, t0 + 80), EvictionDecision::Evict);
        // `a` uses the catch-all (b's forever toleration does not match it); the catch-all also
        // matches b, so b times out with it too: min(t0 + 300, t0 + 50 + 300).
        let mut b_first = c.clone();
        b_first.spec.taints[1].time_added = Some("2025-12-31T23:40:00Z".into());
        let catch_all = [exists("b", None), exists("", Some(300))];
        assert_eq!(
            taint_decision(&b_first, &catch_all, t0 - 901),
            EvictionDecision::EvictAt(t0 - 900)
        );
        assert_eq!(
            taint_decision(&b_first, &catch_all, t0 - 900),
            EvictionDecision::Evict
        );
        // A toleration no taint uses does not count: both taints use the forever one.
        let unused = [exists("", None), exists("a", Some(1))];
        assert_eq!(
            taint_decision(&c, &unused, t0 + 1_000_000),
            EvictionDecision::Keep
        );
        // A taint without timeAdded has no trigger time.
        c.spec.taints[1].time_added = None;
        assert_eq!(
            taint_decision(&c, &[exists("", Some(10))], t0 + 9),
            EvictionDecision::EvictAt(t0 + 10)
        );
        c.spec.taints[0].time_added = None;
        assert_eq!(
            taint_decision(&c, &[exists("", Some(10))], t0 + 1_000_000),
            EvictionDecision::Keep
        );
        // Only NoExecute taints count.
        c.spec.taints.push(Taint {
            key: "c".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
        assert_eq!(
            taint_decision(&c, &[exists("", None)], t0),
            EvictionDecision::Keep
        );
    }

    #[test]
    fn negative_and_overflowing_toleration_seconds_are_taken_as_karmada_computes_them() {
        let t0 = parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        let c = tainted("m1", "a", Some("2026-01-01T00:00:00Z"));
        // Not clamped to 0: the trigger time is before timeAdded.
        assert_eq!(
            taint_decision(&c, &[exists("a", Some(-10))], t0 - 11),
            EvictionDecision::EvictAt(t0 - 10)
        );
        assert_eq!(
            taint_decision(&c, &[exists("a", Some(-10))], t0 - 10),
            EvictionDecision::Evict
        );
        // `time.Duration(s) * time.Second` wraps past ~292 years: 9,223,372,037 s is
        // -9,223,372,036.709551616 s.
        assert_eq!(trigger_at(t0, 9_223_372_037), t0 - 9_223_372_036);
        assert_eq!(
            taint_decision(&c, &[exists("a", Some(9_223_372_037))], t0),
            EvictionDecision::Evict
        );
        assert_eq!(trigger_at(t0, 9_223_372_036), t0 + 9_223_372_036);
        assert_eq!(trigger_at(t0, i64::MIN), t0, "i64::MIN × 10^9 wraps to 0");
    }

    #[test]
    fn next_due_is_when_the_first_kept_cluster_is_evicted() {
        let t0 = parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        let mut rb = ResourceBinding::default();
        rb.spec.clusters = vec![TargetCluster::new("m1", 1), TargetCluster::new("m2", 1)];
        rb.spec.placement = Some(Placement {
            cluster_tolerations: vec![exists("slow", Some(300)), exists("fast", Some(100))],
            ..Default::default()
        });
        let clusters = [
            tainted("m1", "slow", Some("2026-01-01T00:00:00Z")),
            tainted("m2", "fast", Some("2026-01-01T00:00:00Z")),
        ];
        assert_eq!(
            evict_tainted(&mut rb, &clusters, t0 + 99),
            (vec![], Some(t0 + 100))
        );
        assert_eq!(
            evict_tainted(&mut rb, &clusters, t0 + 100),
            (vec!["m2".to_owned()], Some(t0 + 300))
        );
        assert_eq!(
            evict_tainted(&mut rb, &clusters, t0 + 300),
            (vec!["m1".to_owned()], None)
        );
        assert!(rb.spec.clusters.is_empty());
    }

    #[test]
    fn eviction_removes_cluster_and_records_one_task_with_replicas() {
        let mut rb = ResourceBinding::default();
        rb.spec.clusters = vec![TargetCluster::new("m1", 2), TargetCluster::new("m2", 3)];
        let clusters = vec![
            tainted("m1", "k", None),
            Cluster {
                metadata: flotilla_api::meta::ObjectMeta {
                    name: Some("m2".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        ];
        let (evicted, _) = evict_tainted(&mut rb, &clusters, 0);
        assert_eq!(evicted, vec!["m1"]);
        assert_eq!(rb.spec.clusters, vec![TargetCluster::new("m2", 3)]);
        let task = &rb.spec.graceful_eviction_tasks[0];
        assert_eq!(
            (
                task.from_cluster.as_str(),
                task.replicas,
                task.purge_mode.as_deref()
            ),
            ("m1", Some(2), Some("Gracefully"))
        );
        assert_eq!(
            (task.reason.as_str(), task.producer.as_str()),
            ("TaintUntolerated", "TaintManager")
        );
    }

    #[test]
    fn tasks_expire_after_grace_period_and_suppressed_tasks_stay() {
        let mut rb = ResourceBinding::default();
        rb.spec.graceful_eviction_tasks = vec![
            GracefulEvictionTask {
                from_cluster: "a".into(),
                creation_timestamp: Some(format_rfc3339(0)),
                ..Default::default()
            },
            GracefulEvictionTask {
                from_cluster: "b".into(),
                creation_timestamp: Some(format_rfc3339(0)),
                suppress_deletion: Some(true),
                ..Default::default()
            },
            GracefulEvictionTask {
                from_cluster: "c".into(),
                creation_timestamp: Some(format_rfc3339(0)),
                grace_period_seconds: Some(5000),
                ..Default::default()
            },
        ];
        assess_eviction_tasks(&mut rb, 601);
        let left: Vec<_> = rb
            .spec
            .graceful_eviction_tasks
            .iter()
            .map(|t| t.from_cluster.as_str())
            .collect();
        assert_eq!(left, vec!["b", "c"]);
    }
}
