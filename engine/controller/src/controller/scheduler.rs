//! Scheduler: a ResourceBinding gets its target clusters (`spec.clusters`) and `Scheduled` condition.

use std::collections::BTreeMap;
use std::sync::Arc;

use flotilla_api::cluster::Cluster;
use flotilla_api::labels;
use flotilla_api::work::{ResourceBinding, ResourceBindingStatus, TargetCluster};
use flotilla_core::failover;
use flotilla_core::scheduler::{self, FailureKind, SUCCESS_MESSAGE};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::detector::namespaced_or_all;
use crate::{Context, Error, api_resource, typed};

/// How often a binding that could not be scheduled is tried again without any change.
const UNSCHEDULABLE_RETRY: std::time::Duration = std::time::Duration::from_secs(300);

/// What one scheduling run decided.
#[derive(Debug)]
struct Decision {
    clusters: Option<Vec<TargetCluster>>,
    observed_affinity_name: String,
    outcome: Result<(), (String, String)>,
}

/// Reconcile one binding.
///
/// # Errors
/// Fails when a write fails or the scheduling task dies.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut rb: ResourceBinding = typed(&obj)?;
    if rb.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let clusters = ctx.clusters();
    let api = namespaced_or_all(&ctx, rb.metadata.namespace(), &api_resource(&rb.api_version, &rb.kind));

    // Taint manager (NoExecute eviction) and eviction-task expiry first, as Karmada runs them.
    let now_ms = crate::members::now_epoch_millis();
    let now_secs = now_ms.div_euclid(1000);
    let tasks_before = rb.spec.graceful_eviction_tasks.clone();
    let (mut evicted, next_due) = failover::evict_tainted(&mut rb, &clusters, now_secs);
    // Application failover: clusters where the workload stayed unhealthy past tolerationSeconds.
    let (app_evicted, app_due) = {
        let key = format!("{}/{}", rb.metadata.namespace(), rb.metadata.name());
        let mut memory = ctx.app_failover.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let seen = memory.entry(key.clone()).or_default();
        let r = failover::application_failover(&mut rb, seen, now_ms);
        if seen.is_empty() {
            memory.remove(&key);
        }
        r
    };
    if !app_evicted.is_empty() {
        tracing::info!(binding = rb.metadata.name(), clusters = ?app_evicted, "application failover: evicting from clusters where the workload is unhealthy");
    }
    evicted.extend(app_evicted);
    // Both in epoch milliseconds (the taint manager decides in whole seconds).
    let next_due = match (next_due.map(|s| s.saturating_mul(1000)), app_due) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    // An eviction changes the spec (a new generation the scheduler has not observed yet), so the
    // new tasks are assessed from the next reconcile on, not against the pre-eviction status.
    if evicted.is_empty() {
        failover::assess_eviction_tasks(&mut rb, now_secs);
    }
    if !evicted.is_empty() || rb.spec.graceful_eviction_tasks != tasks_before {
        if !evicted.is_empty() {
            tracing::info!(binding = rb.metadata.name(), clusters = ?evicted, "evicting from clusters with untolerated NoExecute taints");
        }
        let patch = json!({
            "metadata": {"resourceVersion": rb.metadata.resource_version},
            "spec": {"clusters": rb.spec.clusters, "gracefulEvictionTasks": rb.spec.graceful_eviction_tasks},
        });
        let updated = api.patch(rb.metadata.name(), &PatchParams::default(), &Patch::Merge(patch)).await?;
        rb.metadata.generation = updated.metadata.generation;
        rb.metadata.resource_version = updated.metadata.resource_version;
    }
    // A few milliseconds late rather than early: the decision is due at `at`, not before.
    let due = next_due.map(|at| std::time::Duration::from_millis(u64::try_from(at - now_ms + 5).unwrap_or(5).max(5)));
    let mut requeue = Action::requeue(due.unwrap_or(ctx.settings.resync));
    let needs = {
        let map: BTreeMap<&str, &Cluster> = clusters.iter().map(|c| (c.name(), c)).collect();
        scheduler::needs_scheduling(&rb, &map)
    };
    let generation = rb.metadata.generation.unwrap_or(1);
    let mut status = rb.status.clone().unwrap_or_default();
    let now = flotilla_core::time::format_rfc3339(crate::members::now_epoch());
    let mut observed_generation = generation;

    if needs {
        let profile = ctx.plugins.find(&rb.spec.scheduler_name);
        let Some(profile) = profile else {
            set_scheduled(&mut status, false, FailureKind::SchedulerError.reason(), &format!("no scheduler profile named {:?}", rb.spec.scheduler_name), &now, generation);
            status.scheduler_observed_generation = generation;
            write_status(&api, &rb, &status).await?;
            return Ok(requeue);
        };
        let spec = rb.spec.clone();
        let st = status.clone();
        let started = std::time::Instant::now();
        // The CPU-heavy part off the async workers.
        let decision = tokio::task::spawn_blocking(move || {
            let set = scheduler::ClusterSet::new(clusters.iter());
            let res = scheduler::schedule_in(&profile, &spec, &st, &set, scheduler::Options::default(), None);
            Decision {
                clusters: res.clusters_to_write(),
                observed_affinity_name: res.observed_affinity_name.clone(),
                outcome: res.outcome.map(|_| ()).map_err(|f| (f.kind.reason().to_owned(), f.message)),
            }
        })
        .await?;
        ctx.metrics.record_scheduling(started.elapsed());
        ctx.metrics.record_scheduling_result(match &decision.outcome {
            Ok(()) => 0,
            Err((reason, _)) if reason == FailureKind::SchedulerError.reason() => 2,
            Err(_) => 1,
        });
        if let Some(targets) = decision.clusters {
            let placement = serde_json::to_string(&rb.spec.placement.clone().unwrap_or_default()).unwrap_or_default();
            let patch = json!({
                "metadata": {"annotations": {labels::APPLIED_PLACEMENT: placement}},
                "spec": {"clusters": targets},
            });
            let updated = api.patch(rb.metadata.name(), &PatchParams::default(), &Patch::Merge(patch)).await?;
            observed_generation = updated.metadata.generation.unwrap_or(generation);
        }
        status.scheduler_observing_affinity_name = decision.observed_affinity_name;
        match decision.outcome {
            Ok(()) => {
                set_scheduled(&mut status, true, "Success", SUCCESS_MESSAGE, &now, observed_generation);
                status.last_scheduled_time = Some(now.clone());
            }
            Err((reason, message)) => {
                set_scheduled(&mut status, false, &reason, &message, &now, observed_generation);
                // Unschedulable bindings are retried (as Karmada's unschedulable queue flushes),
                // besides the Cluster changes that re-check them at once.
                let retry = UNSCHEDULABLE_RETRY.min(ctx.settings.resync);
                requeue = Action::requeue(due.map_or(retry, |d| d.min(retry)));
            }
        }
    }
    status.scheduler_observed_generation = observed_generation;
    if needs {
        write_status(&api, &rb, &status).await?;
    } else if rb.status.as_ref().map(|s| s.scheduler_observed_generation) != Some(observed_generation) {
        // Only the generation: the cached object may predate our own last status write.
        let patch = json!({"status": {"schedulerObservedGeneration": observed_generation}});
        api.patch_status(rb.metadata.name(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    }
    Ok(requeue)
}

async fn write_status(api: &kube::Api<DynamicObject>, rb: &ResourceBinding, status: &ResourceBindingStatus) -> Result<(), Error> {
    let patch = json!({"status": {
        "schedulerObservedGeneration": status.scheduler_observed_generation,
        "schedulerObservingAffinityName": status.scheduler_observing_affinity_name,
        "lastScheduledTime": status.last_scheduled_time,
        "conditions": status.conditions,
    }});
    api.patch_status(rb.metadata.name(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(())
}

pub use flotilla_core::plan::set_scheduled;
