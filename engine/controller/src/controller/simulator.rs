//! Member status simulator: in a simulated member, a Deployment becomes ready and available
//! (`status.readyReplicas = availableReplicas = spec.replicas`) after [`crate::Settings::ready_delay`].
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

use crate::{Context, Error, Topic, api_resource, publish_changes};

/// Annotation on a member's Deployment that keeps it unavailable (fault injection).
pub const UNAVAILABLE: &str = "flotilla.dev/simulate-unavailable";

struct Member {
    client: Client,
    ctx: Arc<Context>,
}

/// Start, for every member, the simulator and a watch that tells the execution controller about
/// member status changes.
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    for (_, client) in ctx.members.iter() {
        publish_changes(
            client,
            &api_resource("apps/v1", "Deployment"),
            Topic::Member,
            &ctx.events,
            tasks,
        );
        let api: Api<Deployment> = Api::all(client.clone());
        let member = Arc::new(Member {
            client: client.clone(),
            ctx: ctx.clone(),
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

fn error_policy(_obj: Arc<Deployment>, err: &Error, _m: Arc<Member>) -> Action {
    tracing::warn!(error = %err, "simulator reconcile failed; retrying");
    Action::requeue(std::time::Duration::from_millis(500))
}

async fn reconcile(d: Arc<Deployment>, m: Arc<Member>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let generation = d.metadata.generation.unwrap_or(0);
    let st = d.status.clone().unwrap_or_default();
    let broken = d
        .annotations()
        .get(UNAVAILABLE)
        .is_some_and(|v| v == "true");
    let available = if broken { 0 } else { want };
    let done = st.replicas == Some(want)
        && st.ready_replicas.unwrap_or(0) == available
        && st.available_replicas.unwrap_or(0) == available
        && st.updated_replicas.unwrap_or(0) == want
        && st.observed_generation == Some(generation);
    if done || d.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !broken {
        tokio::time::sleep(m.ctx.settings.ready_delay).await;
    }
    let (cond, reason, message) = if broken {
        (
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    } else {
        (
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    };
    let api: Api<Deployment> =
        Api::namespaced(m.client.clone(), &d.namespace().unwrap_or_default());
    let patch = json!({"status": {
        "observedGeneration": generation,
        "replicas": want,
        "updatedReplicas": want,
        "readyReplicas": available,
        "availableReplicas": available,
        "unavailableReplicas": if broken { Some(want) } else { None },
        "conditions": [{"type": "Available", "status": cond, "reason": reason, "message": message}],
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
