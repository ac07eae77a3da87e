//! `flotilla agent`: a Pull member's side of the control plane, run in (or next to) the member.
//!
//! Like karmada-agent, it registers the member as a `Cluster` with `syncMode: Pull`, renews the
//! cluster Lease (`karmada-cluster/<name>`), reports the member's health and status itself
//! (the same probe and reasons as [`crate::controller::status`]) and runs the execution
//! controller for `karmada-es-<name>` only, applying Works to its member and writing their
//! status back. The control plane's own execution controller and prober leave Pull clusters
//! alone; its lease monitor marks the cluster `Ready=Unknown` when the agent stops renewing.
//!
//! As karmada-agent, it applies the control plane's `ResourceInterpreterCustomization`s on the
//! member side (Retain before updates, InterpretStatus, InterpretHealth): it lists and watches
//! them, compiles them with `settings.rule_backends` into its own chain, and re-checks its Works
//! when that chain changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flotilla_api::interpreter::{
    CONFIG_API_VERSION, CUSTOMIZATION_KIND, ResourceInterpreterCustomization,
};
use futures::StreamExt as _;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::{Value, json};

use crate::client::MemberError;
use crate::controller::execution::{self, Executor};
use crate::controller::interpreters::Slot;
use crate::controller::status::{self, CLUSTER_NAMESPACE, Thresholds};
use crate::controller::{CONCURRENCY, mapped_triggers, work_of_member};
use crate::{Bus, Error, Members, Settings, Topic, api_resource, publish_changes};

/// The field manager (and Lease holder) of the agent's writes.
pub const MANAGER: &str = "flotilla-agent";

/// What an agent runs with.
#[derive(Clone)]
pub struct Agent {
    /// The control plane.
    pub control: Client,
    /// The member cluster's client configuration.
    pub member: kube::Config,
    /// The name the member is registered under.
    pub cluster_name: String,
    /// Intervals and thresholds (`cluster_*` and `resync` are used).
    pub settings: Settings,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("member", &self.member.cluster_url.to_string())
            .field("cluster_name", &self.cluster_name)
            .finish_non_exhaustive()
    }
}

pub use crate::client::validate_cluster_name;

/// Register (or refresh) `name` as a Pull Cluster served at `endpoint`.
///
/// # Errors
/// Fails when the Cluster exists in Push mode, or a request fails.
pub async fn register(control: &Client, name: &str, endpoint: &str) -> Result<(), Error> {
    let clusters: Api<DynamicObject> = Api::all_with(
        control.clone(),
        &api_resource(flotilla_api::cluster::API_VERSION, "Cluster"),
    );
    if let Some(existing) = clusters.get_opt(name).await? {
        let mode = existing
            .data
            .pointer("/spec/syncMode")
            .and_then(Value::as_str)
            .unwrap_or("");
        if mode != "Pull" {
            return Err(MemberError::Invalid {
                what: format!("cluster {name}"),
                message: format!("already registered with syncMode {mode:?}; unjoin it (delete the Cluster) before running an agent for it"),
            }
            .into());
        }
    }
    let obj = json!({
        "apiVersion": flotilla_api::cluster::API_VERSION,
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Pull", "apiEndpoint": endpoint},
    });
    clusters
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(obj),
        )
        .await?;
    for ns in [
        CLUSTER_NAMESPACE.to_owned(),
        flotilla_core::render::execution_namespace(name),
    ] {
        status::ensure_namespace(control, &ns).await?;
    }
    Ok(())
}

/// Run the agent until the returned future is dropped (or a task of it ends).
///
/// # Errors
/// Fails when the cluster name is invalid, the member client cannot be built or the
/// registration fails.
pub async fn run(agent: Agent) -> Result<(), Error> {
    let name = agent.cluster_name.clone();
    validate_cluster_name(&name)?;
    let member = Client::try_from(agent.member.clone()).map_err(|e| MemberError::Invalid {
        what: format!("member client for {}", agent.member.cluster_url),
        message: e.to_string(),
    })?;
    let endpoint = agent
        .member
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    register(&agent.control, &name, &endpoint).await?;
    tracing::info!(cluster = %name, "registered as a Pull cluster");

    // Dropping the set (when this future is dropped or aborted) stops every task.
    let mut tasks = tokio::task::JoinSet::new();
    let events = Bus::default();
    // A member Deployment's change re-checks the Work that applied it; a new interpreter chain
    // re-checks every Work.
    let member_changes = events.subscribe(Box::new(|c: &crate::Change| {
        if c.topic == Topic::InterpreterChain {
            crate::controller::Targets::All
        } else {
            work_of_member(c)
        }
    }));
    // The customizations, compiled before the first Work is applied, then kept in line.
    let slot = Arc::new(Slot::default());
    let customizations = api_resource(CONFIG_API_VERSION, CUSTOMIZATION_KIND);
    let rics: Api<DynamicObject> = Api::all_with(agent.control.clone(), &customizations);
    let mut reported = BTreeMap::new();
    match rics.list(&kube::api::ListParams::default()).await {
        Ok(initial) => {
            sync_customizations(&slot, &initial.items, &agent.settings, &mut reported);
        }
        // The watch below retries; Works are applied with the built-in interpreters meanwhile.
        Err(e) => tracing::warn!(error = %e, "listing the interpreter customizations failed"),
    }
    tasks.spawn(follow_customizations(
        rics,
        customizations,
        Arc::clone(&slot),
        agent.settings.clone(),
        events.clone(),
        reported,
    ));
    publish_changes(
        &member,
        &api_resource("apps/v1", "Deployment"),
        Topic::Member,
        &events,
        &mut tasks,
    );

    let works = api_resource("work.karmada.io/v1alpha1", "Work");
    let executor = Arc::new(Executor {
        control: agent.control.clone(),
        works: works.clone(),
        members: Members::new([(name.clone(), member)]),
        resync: agent.settings.resync,
        retry: agent.settings.cluster_status_update_frequency,
        interpreters: flotilla_plugins::interpreter::chain(Vec::new(), Vec::new()),
        recorder: crate::recorder::Recorder::new(agent.control.clone(), MANAGER),
    });
    let es = flotilla_core::render::execution_namespace(&name);
    let api: Api<DynamicObject> = Api::namespaced_with(agent.control.clone(), &es, &works);
    let context = Arc::new((executor, slot));
    tasks.spawn(async move {
        let controller = Controller::new_with(api, watcher::Config::default(), works.clone())
            .with_config(Config::default().concurrency(CONCURRENCY));
        let trigger = mapped_triggers(member_changes, controller.store(), works);
        controller
            .reconcile_on(trigger)
            .run(
                |obj, ctx: Arc<AgentContext>| async move {
                    let mut ex = (*ctx.0).clone();
                    ex.interpreters = ctx.1.get();
                    execution::reconcile_work(&obj, &ex).await
                },
                error_policy,
                context,
            )
            .for_each(|_| futures::future::ready(()))
            .await;
    });
    tasks.spawn(report_loop(agent));
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// The Work controller's context: the executor and the interpreter chain in force.
type AgentContext = (Arc<Executor>, Arc<Slot>);

/// Keep `slot` in line with the customizations watched through `rics`, publishing
/// [`Topic::InterpreterChain`] when the chain changes. Syncs on every change and at the end of
/// every (re)list, so customizations deleted while the watch was down are dropped too.
async fn follow_customizations(
    rics: Api<DynamicObject>,
    resource: kube::api::ApiResource,
    slot: Arc<Slot>,
    settings: Settings,
    events: Bus,
    mut reported: BTreeMap<String, String>,
) {
    let writer = kube::runtime::reflector::store::Writer::<DynamicObject>::new(resource);
    let reader = writer.as_reader();
    let stream = kube::runtime::reflector(
        writer,
        watcher(rics, watcher::Config::default()).default_backoff(),
    );
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Err(e) => {
                tracing::debug!(error = %e, "watching the interpreter customizations; retrying");
                continue;
            }
            // The store is swapped at the end of a list: sync then.
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
            Ok(_) => {}
        }
        let all: Vec<DynamicObject> = reader.state().iter().map(|o| (**o).clone()).collect();
        if sync_customizations(&slot, &all, &settings, &mut reported) {
            events.send(crate::Change::any(Topic::InterpreterChain));
        }
    }
}

/// Compile `objects` (customizations) into `slot`; whether the chain changed. Customizations
/// that do not compile keep their previous version and are logged once per error (the control
/// plane reports them as Events on the object); `reported` remembers what was logged.
fn sync_customizations(
    slot: &Slot,
    objects: &[DynamicObject],
    settings: &Settings,
    reported: &mut BTreeMap<String, String>,
) -> bool {
    let rics: Vec<ResourceInterpreterCustomization> = objects
        .iter()
        .filter_map(|o| {
            let v = serde_json::to_value(o).ok()?;
            serde_json::from_value(v)
                .map_err(|e| {
                    tracing::warn!(
                        name = o.metadata.name.as_deref().unwrap_or(""),
                        error = %e,
                        "malformed ResourceInterpreterCustomization ignored"
                    );
                })
                .ok()
        })
        .collect();
    let (failures, changed) = slot.sync(&rics, &settings.rule_backends.0);
    reported.retain(|name, _| failures.iter().any(|(r, _)| r.metadata.name() == name));
    for (ric, error) in failures {
        let name = ric.metadata.name().to_owned();
        if reported.get(&name) != Some(&error) {
            tracing::warn!(customization = %name, %error, "ResourceInterpreterCustomization does not compile; keeping its previous version");
            reported.insert(name, error);
        }
    }
    if changed {
        tracing::info!(chain = ?slot.get(), "resource interpreter chain swapped");
    }
    changed
}

fn error_policy(_obj: Arc<DynamicObject>, err: &Error, _ex: Arc<AgentContext>) -> Action {
    tracing::warn!(error = %err, "agent reconcile failed; retrying");
    Action::requeue(Duration::from_millis(500))
}

/// Probe the member and report its status and Lease every `cluster_status_update_frequency`.
async fn report_loop(agent: Agent) {
    let mut thresholds = Thresholds::default();
    let clusters: Api<DynamicObject> = Api::all_with(
        agent.control.clone(),
        &api_resource(flotilla_api::cluster::API_VERSION, "Cluster"),
    );
    let timeout = status::probe_timeout(&agent.settings);
    let name = agent.cluster_name.as_str();
    loop {
        let obs = status::observe(&agent.member, timeout).await;
        match clusters.get_opt(name).await {
            Ok(Some(obj)) => {
                let current: Option<flotilla_api::cluster::Cluster> = crate::typed(&obj).ok();
                let ready = thresholds.adjust(
                    name,
                    obs.ready(),
                    current.as_ref().and_then(status::ready_condition),
                    &agent.settings,
                );
                if let Err(e) = status::write_status(
                    &agent.control,
                    name,
                    ready.as_ref(),
                    obs.collected.as_ref(),
                )
                .await
                {
                    tracing::warn!(cluster = %name, error = %e, "writing cluster status failed");
                }
            }
            Ok(None) => {
                // Deleted on the control plane (unjoined): nothing to report to until it is back.
                tracing::warn!(cluster = %name, "the Cluster was deleted on the control plane; not reporting");
                tokio::time::sleep(agent.settings.cluster_status_update_frequency).await;
                continue;
            }
            Err(e) => tracing::warn!(cluster = %name, error = %e, "reading the Cluster failed"),
        }
        if let Err(e) = status::renew_lease(
            &agent.control,
            name,
            MANAGER,
            agent.settings.cluster_monitor_grace_period,
        )
        .await
        {
            tracing::warn!(cluster = %name, error = %e, "renewing the cluster lease failed");
        }
        tokio::time::sleep(agent.settings.cluster_status_update_frequency).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_dns_labels_of_at_most_48_characters() {
        assert!(validate_cluster_name("edge-1").is_ok());
        for bad in ["", "Edge", "-a", "a-", "a.b", &"a".repeat(49)] {
            let e = validate_cluster_name(bad).expect_err(bad);
            assert!(e.to_string().contains("DNS-1123"), "{e}");
        }
    }
}
