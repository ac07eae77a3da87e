//! The CronFederatedHPA controller: Karmada's `pkg/controllers/cronfederatedhpa`.
//!
//! Each rule of each CronFederatedHPA runs at the times its five-field cron `schedule` names in
//! its `timeZone` (UTC by default), read from [`super::federatedhpa::Options::clock`] (tests
//! inject one) every [`super::federatedhpa::Options::cron_tick`]:
//!
//! - a workload target (anything with a scale subresource) gets `targetReplicas` through its
//!   scale subresource; a FederatedHPA target (`autoscaling.karmada.io/v1alpha1`) gets
//!   `targetMinReplicas`/`targetMaxReplicas` in its spec;
//! - a `suspend`ed rule does not run;
//! - each run is recorded in `status.executionHistories[rule]` (`successfulExecutions` up to
//!   `successfulHistoryLimit`, `failedExecutions` up to `failedHistoryLimit`, newest first, with
//!   the scheduled and the actual time), and `nextExecutionTime` says when it runs next; a failed
//!   run also gets a `ScaleFailed` Warning Event, as Karmada's job does. Histories of removed
//!   rules are dropped.
//!
//! A rule whose schedule or zone changes is rescheduled from now. Runs missed while the
//! controller was not running are not caught up (gocron's behaviour too).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use flotilla_api::autoscaling::{
    CronFederatedHPA, CronFederatedHPARule, ExecutionHistory, FailedExecution, SuccessfulExecution,
};
use flotilla_core::autoscaling::cron::Schedule;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use super::federatedhpa::Options;
use crate::recorder::{EventType, Regarding};
use crate::{Context, api_resource};

/// The CronFederatedHPA resource.
pub fn resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: flotilla_api::autoscaling::GROUP.into(),
        version: "v1alpha1".into(),
        api_version: flotilla_api::autoscaling::API_VERSION.into(),
        kind: flotilla_api::autoscaling::CRON_FEDERATED_HPA.into(),
        plural: "cronfederatedhpas".into(),
    }
}

/// What is remembered of one rule: what it was scheduled from, and its next run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    schedule: String,
    zone: Option<String>,
    next: Option<i64>,
}

type Key = (String, String, String);

/// Start the CronFederatedHPA loop.
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    let ctx = ctx.clone();
    tasks.spawn(async move {
        let options = ctx.settings.autoscaling.clone();
        let mut planned: HashMap<Key, Planned> = HashMap::new();
        let mut tick = tokio::time::interval(options.cron_tick.max(Duration::from_millis(10)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            sync_all(&ctx, &options, &mut planned).await;
        }
    });
}

async fn sync_all(ctx: &Context, options: &Options, planned: &mut HashMap<Key, Planned>) {
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource());
    let Ok(list) = api.list(&ListParams::default()).await else {
        return;
    };
    let mut seen = HashSet::new();
    for o in list.items {
        if o.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let cron: CronFederatedHPA = match crate::typed(&o) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "skipping an undecodable CronFederatedHPA");
                continue;
            }
        };
        let ns = o.namespace().unwrap_or_default();
        for rule in &cron.spec.rules {
            seen.insert((ns.clone(), o.name_any(), rule.name.clone()));
        }
        if let Err(e) = reconcile(ctx, options, &o, &cron, planned).await {
            tracing::debug!(name = %o.name_any(), error = %e, "CronFederatedHPA sync failed");
        }
    }
    planned.retain(|k, _| seen.contains(k));
}

fn format_time(secs: i64) -> String {
    flotilla_core::time::format_rfc3339(secs)
}

/// One pass over CronFederatedHPA `o`: plan new or changed rules, run the due ones, and write
/// the status when it changed.
///
/// # Errors
/// A failed status write.
async fn reconcile(
    ctx: &Context,
    options: &Options,
    o: &DynamicObject,
    cron: &CronFederatedHPA,
    planned: &mut HashMap<Key, Planned>,
) -> Result<(), crate::Error> {
    let now = options.clock.now_secs();
    let ns = o.namespace().unwrap_or_default();
    let regarding = Regarding {
        api_version: flotilla_api::autoscaling::API_VERSION.into(),
        kind: flotilla_api::autoscaling::CRON_FEDERATED_HPA.into(),
        namespace: ns.clone(),
        name: o.name_any(),
        uid: o.uid().unwrap_or_default(),
    };
    let mut histories: Vec<ExecutionHistory> = Vec::new();
    for rule in &cron.spec.rules {
        let mut h = cron
            .status
            .execution_histories
            .iter()
            .find(|h| h.rule_name == rule.name)
            .cloned()
            .unwrap_or_else(|| ExecutionHistory {
                rule_name: rule.name.clone(),
                ..Default::default()
            });
        let key = (ns.clone(), o.name_any(), rule.name.clone());
        let schedule = Schedule::parse(&rule.schedule, rule.time_zone.as_deref());
        let plan = Planned {
            schedule: rule.schedule.clone(),
            zone: rule.time_zone.clone(),
            next: None,
        };
        let entry = planned.entry(key).or_insert_with(|| plan.clone());
        if entry.schedule != plan.schedule || entry.zone != plan.zone {
            *entry = plan;
        }
        let schedule = match schedule {
            Ok(s) => s,
            Err(e) => {
                // Admission refuses these; one stored some other way never runs.
                h.next_execution_time = None;
                tracing::debug!(rule = %rule.name, error = %e, "invalid schedule");
                histories.push(h);
                continue;
            }
        };
        let next = *entry.next.get_or_insert_with(|| {
            // A restarted controller resumes from what the status says was next, when that is
            // still ahead; otherwise from now.
            h.next_execution_time
                .as_deref()
                .and_then(flotilla_core::time::parse_rfc3339)
                .filter(|t| *t > now && schedule.next_after(t - 1) == Some(*t))
                .or_else(|| schedule.next_after(now))
                .unwrap_or(i64::MAX)
        });
        if next <= now {
            if !rule.suspended() {
                let result = run(ctx, cron, &ns, rule).await;
                let executed = Some(format_time(now));
                let scheduled = Some(format_time(next));
                match result {
                    Ok(()) => {
                        h.successful_executions.insert(
                            0,
                            SuccessfulExecution {
                                schedule_time: scheduled,
                                execution_time: executed,
                                applied_replicas: rule.target_replicas,
                                applied_max_replicas: rule.target_max_replicas,
                                applied_min_replicas: rule.target_min_replicas,
                            },
                        );
                    }
                    Err(message) => {
                        ctx.recorder.publish(
                            &regarding,
                            EventType::Warning,
                            "ScaleFailed",
                            &message,
                        );
                        h.failed_executions.insert(
                            0,
                            FailedExecution {
                                schedule_time: scheduled,
                                execution_time: executed,
                                message,
                            },
                        );
                    }
                }
            }
            entry.next = schedule.next_after(now);
        }
        h.successful_executions
            .truncate(rule.successful_history_limit());
        h.failed_executions.truncate(rule.failed_history_limit());
        h.next_execution_time = entry.next.filter(|t| *t != i64::MAX).map(format_time);
        histories.push(h);
    }
    if histories == cron.status.execution_histories {
        return Ok(());
    }
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &resource());
    let patch = json!({"status": {"executionHistories": histories}});
    api.patch_status(&o.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Run `rule` against the target: the workload's replicas or the FederatedHPA's bounds. The
/// error is the message recorded.
async fn run(
    ctx: &Context,
    cron: &CronFederatedHPA,
    ns: &str,
    rule: &CronFederatedHPARule,
) -> Result<(), String> {
    let t = &cron.spec.scale_target_ref;
    let api_version = t.api_version.clone().unwrap_or_default();
    if api_version == flotilla_api::autoscaling::API_VERSION {
        if t.kind != flotilla_api::autoscaling::FEDERATED_HPA {
            return Err(format!(
                "CronFederatedHPA({ns}/{}) do not support scale target {api_version}/{}",
                cron.metadata.name(),
                t.kind
            ));
        }
        return scale_fhpa(&ctx.client, ns, &t.name, rule)
            .await
            .map_err(|e| e.to_string());
    }
    let Some(replicas) = rule.target_replicas else {
        return Err(format!(
            "targetReplicas cannot be nil if you want to scale {}",
            t.kind
        ));
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), ns, &api_resource(&api_version, &t.kind));
    let scale = api.get_scale(&t.name).await.map_err(|e| e.to_string())?;
    if scale.spec.as_ref().and_then(|s| s.replicas) == Some(replicas) {
        return Ok(());
    }
    api.patch_scale(
        &t.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .map(|_| ())
    .map_err(|e| e.to_string())
}

async fn scale_fhpa(
    client: &Client,
    ns: &str,
    name: &str,
    rule: &CronFederatedHPARule,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &super::federatedhpa::resource());
    let fhpa = api.get(name).await?;
    let spec = fhpa.data.get("spec").cloned().unwrap_or(Value::Null);
    let mut patch = serde_json::Map::new();
    if let Some(max) = rule.target_max_replicas
        && spec.get("maxReplicas").and_then(Value::as_i64) != Some(i64::from(max))
    {
        patch.insert("maxReplicas".into(), json!(max));
    }
    if let Some(min) = rule.target_min_replicas
        && spec.get("minReplicas").and_then(Value::as_i64) != Some(i64::from(min))
    {
        patch.insert("minReplicas".into(), json!(min));
    }
    if patch.is_empty() {
        return Ok(());
    }
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": patch})),
    )
    .await?;
    Ok(())
}
