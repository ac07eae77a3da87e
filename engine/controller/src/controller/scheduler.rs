//! Scheduler: a ResourceBinding gets its target clusters (`spec.clusters`) and `Scheduled` condition.

use std::sync::Arc;

use flotilla_api::Object;
use flotilla_api::labels;
use flotilla_api::work::{ResourceBinding, ResourceBindingStatus};
use flotilla_core::pipeline::{self, Clock};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::objects::{namespaced_or_all, template_of};
use crate::recorder::EventType;
use crate::{Context, Error, api_resource, typed};

/// How often a binding that could not be scheduled is tried again without any change.
const UNSCHEDULABLE_RETRY: std::time::Duration = std::time::Duration::from_secs(300);

/// What one scheduling attempt leaves for the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// When to look at the binding again without any change (a failover deadline, the resync).
    pub requeue: std::time::Duration,
    /// No cluster fits it (Karmada's unschedulable queue holds it until an event about it).
    pub unschedulable: bool,
}

/// Reconcile one binding ([`run`]) as a kube-runtime reconciler.
///
/// # Errors
/// See [`run`].
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    run(obj, ctx).await.map(|v| Action::requeue(v.requeue))
}

/// Schedule one binding: [`pipeline::decide`] against the shared snapshot, then write what it
/// changed (spec, then status).
///
/// # Errors
/// Fails when a read or write fails or the decision task dies.
pub async fn run(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Verdict, Error> {
    let await_change = Verdict {
        requeue: ctx.settings.resync,
        unschedulable: false,
    };
    let mut rb: ResourceBinding = typed(&obj)?;
    // Karmada's scheduler only takes bindings a policy made (an attached binding of the
    // dependencies distributor follows the bindings that require it instead).
    if rb.metadata.deletion_timestamp.is_some()
        || (rb.spec.placement.is_none()
            && ![labels::PP_PERMANENT_ID, labels::CPP_PERMANENT_ID]
                .iter()
                .any(|l| rb.metadata.labels.contains_key(*l)))
    {
        return Ok(await_change);
    }
    let api = namespaced_or_all(
        &ctx,
        rb.metadata.namespace(),
        &api_resource(&rb.api_version, &rb.kind),
    );
    // New spec work, as far as the cache knows. The cache may predate this controller's own status
    // write of the previous reconcile (spec and status are two requests; reconciles of one object
    // never overlap, so the stored object has both): decide on the stored object, not on a stale
    // status that would make the scheduler's own result look like a placement change.
    if rb.status.as_ref().map(|s| s.scheduler_observed_generation) != rb.metadata.generation {
        match api.get_opt(rb.metadata.name()).await? {
            Some(stored) => rb = typed(&stored)?,
            None => return Ok(await_change),
        }
    }
    // The template, as `flotilla plan` passes it (CEL placements read it as `object`).
    let template = match template_of(&ctx, &rb).await? {
        Some(t) => Some(Object(serde_json::to_value(&*t).map_err(|source| {
            Error::Decode {
                what: "template".into(),
                source,
            }
        })?)),
        None => None,
    };
    let snapshot = ctx.snapshot();
    let key = format!("{}/{}", rb.metadata.namespace(), rb.metadata.name());
    let mut memory = ctx
        .app_failover
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&key)
        .unwrap_or_default();
    let clock = Clock {
        now_ms: crate::clock::now_epoch_millis(),
    };
    let before = rb.clone();
    // The profile deciding, when the snapshot serves one by that name (the metrics label: its
    // values are the operator's profiles, not whatever name a policy asks for).
    let profile = snapshot
        .profile(&rb.spec.scheduler_name)
        .map(|p| p.name.clone());
    // What binding preemption decides from again, should this decision leave it Unschedulable.
    let retry = (snapshot.clone(), template.clone(), memory.clone());
    // The CPU-heavy part off the async workers, at most one decision per core at a time (as
    // Karmada runs a fixed number of scheduler workers): more would only share the cores.
    let permit = Arc::clone(&ctx.deciding)
        .acquire_owned()
        .await
        .map_err(|_| Error::Stopped)?;
    let (rb, decision, memory, took, cpu) = tokio::task::spawn_blocking(move || {
        let (started, cpu) = (
            std::time::Instant::now(),
            cpu_time::ThreadTime::try_now().ok(),
        );
        let d = pipeline::decide(
            &snapshot,
            &mut rb,
            template.as_ref(),
            clock,
            &mut memory,
            None,
        );
        let cpu = cpu.and_then(|c| c.try_elapsed().ok());
        drop(permit);
        (rb, d, memory, started.elapsed(), cpu)
    })
    .await?;
    let (rb, decision, memory) =
        if flotilla_core::preemption::eligible(&retry.0, &rb, decision.outcome.as_ref()) {
            preempt(&ctx, retry, &before, rb, decision, memory, clock).await?
        } else {
            (rb, decision, memory)
        };
    if !memory.is_empty() {
        ctx.app_failover
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.clone(), memory);
    }
    if decision.scheduled {
        ctx.metrics.record_scheduling(took, cpu, profile.as_deref());
    }
    if let Some(i) = decision.result_index() {
        ctx.metrics.record_scheduling_result(i);
    }
    if !decision.taint_evicted.is_empty() {
        tracing::info!(binding = %key, clusters = ?decision.taint_evicted, "evicting from clusters with untolerated NoExecute taints");
    }
    if !decision.app_evicted.is_empty() {
        tracing::info!(binding = %key, clusters = ?decision.app_evicted, "application failover: evicting from clusters where the workload is unhealthy");
    }
    if let Some(Err(f)) = &decision.outcome {
        tracing::info!(binding = %key, reason = f.kind.reason(), message = %f.message, "binding not scheduled");
        ctx.recorder
            .publish_binding(&rb, EventType::Warning, "ScheduleBindingFailed", &f.message);
    } else if decision.scheduled && (decision.clusters_written || !was_scheduled(&before)) {
        // Karmada's message: "Binding has been scheduled successfully. Result: {m1:2, m2:1}".
        let result: Vec<String> = rb
            .spec
            .clusters
            .iter()
            .map(|t| format!("{}:{}", t.name, t.replicas))
            .collect();
        let message = format!(
            "Binding has been scheduled successfully. Result: {{{}}}",
            result.join(", ")
        );
        ctx.recorder
            .publish_binding(&rb, EventType::Normal, "ScheduleBindingSucceed", &message);
    }
    for fault in &decision.ignored_faults {
        tracing::warn!(binding = %key, fault = %fault, "plugin fault ignored (failurePolicy: Ignore)");
    }

    // Spec first: failover's changes (guarded by the resourceVersion they were decided on) and
    // the scheduler's result. The API server moves the generation the status then observes.
    let mut observed_generation = before.metadata.generation.unwrap_or(1);
    if decision.failover_changed || decision.clusters_written {
        let mut patch = json!({"spec": {"clusters": rb.spec.clusters}});
        if decision.failover_changed {
            patch["metadata"] = json!({"resourceVersion": before.metadata.resource_version});
            patch["spec"]["gracefulEvictionTasks"] = json!(rb.spec.graceful_eviction_tasks);
        }
        if decision.clusters_written {
            // The plugin versions that placed it; null removes a stale one (built-ins only now).
            patch["metadata"]["annotations"] = json!({
                labels::APPLIED_PLACEMENT: rb.metadata.annotations.get(labels::APPLIED_PLACEMENT),
                labels::PLACED_BY: decision.placed_by,
            });
        }
        let updated = api
            .patch(
                rb.metadata.name(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
        observed_generation = updated.metadata.generation.unwrap_or(observed_generation);
    }
    let mut status = rb.status.clone().unwrap_or_default();
    status.scheduler_observed_generation = observed_generation;
    if let Some(c) = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == "Scheduled")
        && decision.scheduled
    {
        c.observed_generation = Some(observed_generation);
    }
    if decision.scheduled {
        write_status(&api, &rb, &status).await?;
    } else if before
        .status
        .as_ref()
        .map(|s| s.scheduler_observed_generation)
        != Some(observed_generation)
    {
        // Only the generation: the cached object may predate our own last status write.
        let patch = json!({"status": {"schedulerObservedGeneration": observed_generation}});
        api.patch_status(
            rb.metadata.name(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    }

    // Requeue when a failover decision is due (a few milliseconds late rather than early), and
    // retry unschedulable bindings as Karmada's unschedulable queue flushes them.
    let due = decision.next_due_ms.map(|at| {
        std::time::Duration::from_millis(u64::try_from(at - clock.now_ms + 5).unwrap_or(5).max(5))
    });
    let mut requeue = due.unwrap_or(ctx.settings.resync);
    if matches!(decision.outcome, Some(Err(_))) {
        requeue = requeue.min(UNSCHEDULABLE_RETRY.min(ctx.settings.resync));
    }
    Ok(Verdict {
        requeue,
        unschedulable: matches!(&decision.outcome, Some(Err(f)) if f.kind != flotilla_core::scheduler::FailureKind::SchedulerError),
    })
}

/// Binding preemption ([`flotilla_core::preemption::decide_preempting`], as `flotilla plan` runs
/// it): against every other cached binding, find the victims on one cluster, evict each (its
/// `spec.clusters` loses the cluster and a `Directly` eviction task keeps it off it, guarded by
/// the resourceVersion it was chosen at; a `Preempted` Event on it), and return the preemptor
/// decided again on the freed cluster (a `PreemptionSucceeded` Event on it). Without a
/// preemption, the decision stands.
///
/// # Errors
/// A victim's patch fails (a conflict: it changed meanwhile); the attempt is retried.
async fn preempt(
    ctx: &Arc<Context>,
    (snapshot, template, memory_before): (
        Arc<flotilla_core::pipeline::Snapshot>,
        Option<Object>,
        pipeline::FailoverMemory,
    ),
    before: &ResourceBinding,
    decided: ResourceBinding,
    decision: pipeline::Decision,
    memory: pipeline::FailoverMemory,
    clock: Clock,
) -> Result<
    (
        ResourceBinding,
        pipeline::Decision,
        pipeline::FailoverMemory,
    ),
    Error,
> {
    use flotilla_core::preemption;
    let me = (
        before.metadata.namespace().to_owned(),
        before.metadata.name().to_owned(),
    );
    let mine = flotilla_core::queue::binding_priority(before.spec.schedule_priority.as_ref());
    let others: Vec<ResourceBinding> = ctx
        .bindings
        .store
        .state()
        .iter()
        .filter(|o| {
            (
                o.metadata.namespace.as_deref().unwrap_or(""),
                o.metadata.name.as_deref().unwrap_or(""),
            ) != (me.0.as_str(), me.1.as_str())
        })
        // Only what can be a victim is decoded: lower priority, placed somewhere.
        .filter(|o| {
            super::schedule_queue::priority_of(o) < mine
                && o.data
                    .pointer("/spec/clusters")
                    .and_then(serde_json::Value::as_array)
                    .is_some_and(|c| !c.is_empty())
        })
        .filter_map(|o| typed::<ResourceBinding>(o).ok())
        .collect();
    let base = before.clone();
    let key = preemption::binding_key(before);
    let permit = Arc::clone(&ctx.deciding)
        .acquire_owned()
        .await
        .map_err(|_| Error::Stopped)?;
    let (found, decided, decision) = tokio::task::spawn_blocking(move || {
        let refs: Vec<&ResourceBinding> = others.iter().collect();
        let found = preemption::decide_preempting(
            &snapshot,
            &base,
            &decided,
            &decision,
            template.as_ref(),
            clock,
            &memory_before,
            &refs,
        );
        drop(permit);
        (found, decided, decision)
    })
    .await?;
    let p = match found {
        Ok(Some(p)) => p,
        Ok(None) => {
            tracing::debug!(binding = %key, "binding preemption: no cluster can be freed enough");
            return Ok((decided, decision, memory));
        }
        Err(e) => {
            tracing::warn!(binding = %key, error = %e, "binding preemption abandoned");
            ctx.recorder.publish_binding(
                &decided,
                EventType::Warning,
                "PreemptionFailed",
                &format!("Binding preemption abandoned: {e}"),
            );
            return Ok((decided, decision, memory));
        }
    };
    for fault in &p.preemption.ignored_faults {
        tracing::warn!(binding = %key, error = %fault, "victim plugin fault ignored; built-in victim choice used");
    }
    let now_secs = clock.secs();
    let mut evicted_count = 0;
    for v in &p.preemption.victims {
        let Some(obj) = ctx.bindings.store.get(
            &kube::runtime::reflector::ObjectRef::new_with(&v.name, ctx.bindings.resource.clone())
                .within(&v.namespace),
        ) else {
            continue;
        };
        let mut current: ResourceBinding = typed(&obj)?;
        let api = namespaced_or_all(
            ctx,
            current.metadata.namespace(),
            &api_resource(&current.api_version, &current.kind),
        );
        // Guarded by the resourceVersion it was read at; on a conflict (a status write since the
        // cache saw it) once more from the stored object, if it is still on the cluster.
        let mut evicted = None;
        for attempt in 0..2 {
            if current.spec.assigned_replicas(&p.preemption.cluster) <= 0 {
                break;
            }
            let mut victim = current.clone();
            preemption::evict_victim(&mut victim, &p.preemption, now_secs);
            let patch = json!({
                "metadata": {"resourceVersion": victim.metadata.resource_version},
                "spec": {
                    "clusters": victim.spec.clusters,
                    "gracefulEvictionTasks": victim.spec.graceful_eviction_tasks,
                },
            });
            match api
                .patch(
                    victim.metadata.name(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
            {
                Ok(_) => {
                    evicted = Some(victim);
                    break;
                }
                Err(kube::Error::Api(e)) if e.code == 409 && attempt == 0 => {
                    match api.get_opt(&v.name).await? {
                        Some(o) => current = typed(&o)?,
                        None => break,
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        let Some(victim) = evicted else {
            tracing::info!(binding = %v.key(), preemptor = %key, "preemption victim already left the cluster");
            continue;
        };
        evicted_count += 1;
        let message = preemption::victim_message(&p.preemption);
        tracing::info!(binding = %v.key(), preemptor = %key, cluster = %p.preemption.cluster, priority = v.priority, replicas = v.replicas, "binding preempted");
        ctx.recorder
            .publish_binding(&victim, EventType::Normal, "Preempted", &message);
    }
    ctx.metrics.record_preemption(evicted_count);
    let message = preemption::preemptor_message(&p.preemption);
    tracing::info!(binding = %key, cluster = %p.preemption.cluster, victims = %p.preemption.victim_list(), "binding preemption succeeded");
    ctx.recorder.publish_binding(
        &p.binding,
        EventType::Normal,
        "PreemptionSucceeded",
        &message,
    );
    Ok((p.binding, p.decision, p.memory))
}

/// The binding's `Scheduled` condition is True (a re-decision with the same result is no news).
fn was_scheduled(rb: &ResourceBinding) -> bool {
    rb.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Scheduled" && c.status == "True")
    })
}

async fn write_status(
    api: &kube::Api<DynamicObject>,
    rb: &ResourceBinding,
    status: &ResourceBindingStatus,
) -> Result<(), Error> {
    let patch = json!({"status": {
        "schedulerObservedGeneration": status.scheduler_observed_generation,
        "schedulerObservingAffinityName": status.scheduler_observing_affinity_name,
        "lastScheduledTime": status.last_scheduled_time,
        "conditions": status.conditions,
    }});
    api.patch_status(
        rb.metadata.name(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}
