//! Member status simulator: in a simulated member, a Deployment becomes ready and available
//! (`status.readyReplicas = availableReplicas = spec.replicas`, conditions `Available` and
//! `Progressing` as kube's deployment controller reports them) after
//! [`crate::Settings::ready_delay`].
//! A Deployment annotated [`UNAVAILABLE`]` = "true"` in the member never becomes available (its
//! application is then `Unhealthy`, which drives application failover).

use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt as _, reflector, watcher};
use kube::{Client, ResourceExt as _};
use serde_json::json;

use crate::{Context, Error};

pub mod pods;

/// Annotation on a member's Deployment that keeps it unavailable (fault injection).
pub const UNAVAILABLE: &str = "flotilla.dev/simulate-unavailable";

struct Member {
    client: Client,
    ctx: Arc<Context>,
    pods: pods::Simulated,
}

/// Start the simulator of every member (the execution controller watches the members' objects
/// of the kinds it applies, see [`crate::Members::watch`]).
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    for (_, client) in ctx.members.iter() {
        let api: Api<Deployment> = Api::all(client.clone());
        let member = Arc::new(Member {
            client: client.clone(),
            ctx: ctx.clone(),
            pods: pods::Simulated::default(),
        });
        tasks.spawn(async move {
            let (reader, writer) = reflector::store();
            let deployments = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|d: &mut Deployment| d.metadata.managed_fields = None)
                .reflect(writer)
                .applied_objects();
            Controller::for_stream(deployments, reader)
                .run(reconcile, error_policy, member)
                .for_each(|_| futures::future::ready(()))
                .await;
        });
    }
}

/// The `Available` and `Progressing` conditions kube's deployment controller reports for a
/// Deployment of `want` replicas with `available` of them available: a healthy one has minimum
/// availability and has progressed; a broken one (no replica available) is still progressing,
/// as kube reports until the progress deadline passes.
fn conditions(
    d: &Deployment,
    want: i32,
    available: i32,
) -> [(&'static str, &'static str, &'static str, String); 2] {
    let max_unavailable = serde_json::to_value(d)
        .map(|v| super::binding::max_unavailable(&v))
        .unwrap_or(0);
    let name = d.name_any();
    let availability = if i64::from(available) >= i64::from(want) - max_unavailable {
        (
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".to_owned(),
        )
    } else {
        (
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".to_owned(),
        )
    };
    let progress = if available == want {
        (
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            format!("Deployment {name:?} has successfully progressed."),
        )
    } else {
        (
            "Progressing",
            "True",
            "ReplicaSetUpdated",
            format!("Deployment {name:?} is progressing."),
        )
    };
    [availability, progress]
}

fn error_policy(_obj: Arc<Deployment>, err: &Error, _m: Arc<Member>) -> Action {
    tracing::warn!(error = %err, "simulator reconcile failed; retrying");
    Action::requeue(std::time::Duration::from_millis(500))
}

async fn reconcile(d: Arc<Deployment>, m: Arc<Member>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    m.pods.sync(&m.client, &d).await?;
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let generation = d.metadata.generation.unwrap_or(0);
    let st = d.status.clone().unwrap_or_default();
    let broken = d
        .annotations()
        .get(UNAVAILABLE)
        .is_some_and(|v| v == "true");
    let available = if broken { 0 } else { want };
    let wanted = conditions(&d, want, available);
    let done = st.replicas == Some(want)
        && st.ready_replicas.unwrap_or(0) == available
        && st.available_replicas.unwrap_or(0) == available
        && st.updated_replicas.unwrap_or(0) == want
        && st.observed_generation == Some(generation)
        && wanted.iter().all(|(type_, status, reason, _)| {
            st.conditions.iter().flatten().any(|c| {
                c.type_ == *type_ && c.status == *status && c.reason.as_deref() == Some(*reason)
            })
        });
    if done || d.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !broken {
        tokio::time::sleep(m.ctx.settings.ready_delay).await;
    }
    let now = flotilla_core::time::format_rfc3339(crate::clock::now_epoch());
    let conditions: Vec<serde_json::Value> = wanted
        .iter()
        .map(|(type_, status, reason, message)| {
            // The transition time stays while the status does, as the deployment controller's.
            let since = st
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == *type_ && c.status == *status)
                .and_then(|c| c.last_transition_time.as_ref())
                .map_or_else(|| json!(now), |t| json!(t));
            json!({"type": type_, "status": status, "reason": reason, "message": message,
                   "lastUpdateTime": now, "lastTransitionTime": since})
        })
        .collect();
    let api: Api<Deployment> =
        Api::namespaced(m.client.clone(), &d.namespace().unwrap_or_default());
    let patch = json!({"status": {
        "observedGeneration": generation,
        "replicas": want,
        "updatedReplicas": want,
        "readyReplicas": available,
        "availableReplicas": available,
        "unavailableReplicas": if broken { Some(want) } else { None },
        "conditions": conditions,
    }});
    let res = match api
        .patch_status(&d.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    };
    m.ctx.metrics.record(
        super::metrics::Id::Simulator,
        started.elapsed(),
        res.is_ok(),
    );
    res
}
