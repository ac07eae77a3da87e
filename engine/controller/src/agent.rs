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
//!
//! It does not load `WasmPlugin`s (their modules are resolved on the control plane, from its
//! module directory, inline base64 or an image pulled with its secrets): `wasm` rules are left
//! out of the agent's chain. Those of operations the control plane runs (replicas, components,
//! revision, aggregation, dependencies) are not needed here; a `wasm` rule for a member-side
//! operation (Retain, InterpretStatus, InterpretHealth) is reported once per customization (a
//! warning log and a Warning Event `WasmRulesNotServed` on the customization) and that operation
//! falls back to the built-in interpretation on this member. The customization's other rules
//! still apply.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flotilla_api::interpreter::{
    CONFIG_API_VERSION, CUSTOMIZATION_KIND, ResourceInterpreterCustomization,
};
use flotilla_core::interpreter::{Operation, rule_for};
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
use crate::{Bus, Error, Members, Settings, Topic, api_resource};

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
    // A member object's change (of any kind a Work applied, watched from its first apply on)
    // re-checks the Work that applied it; a new interpreter chain re-checks every Work.
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
    let mut reported = Reported {
        cluster: name.clone(),
        recorder: crate::recorder::Recorder::new(agent.control.clone(), MANAGER),
        seen: BTreeMap::new(),
    };
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

    let works = api_resource("work.karmada.io/v1alpha1", "Work");
    let executor = Arc::new(Executor {
        control: agent.control.clone(),
        works: works.clone(),
        members: Members::new([(name.clone(), member)]),
        resync: agent.settings.resync,
        retry: agent.settings.cluster_status_update_frequency,
        interpreters: flotilla_plugins::interpreter::chain(Vec::new(), Vec::new()),
        recorder: crate::recorder::Recorder::new(agent.control.clone(), MANAGER),
        // The kinds applied are watched in the member as they are applied.
        events: events.clone(),
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
    mut reported: Reported,
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

/// Log message of a customization that does not compile.
const COMPILE_FAILED: &str =
    "ResourceInterpreterCustomization does not compile; keeping its previous version";
/// Log message of a customization whose member-side `wasm` rules the agent does not run.
const WASM_NOT_SERVED: &str =
    "ResourceInterpreterCustomization has wasm rules the pull agent does not run";

/// The operations the agent runs on the member side (the executor's Retain before an update,
/// and the status and health it reports).
const MEMBER_SIDE: [Operation; 3] = [
    Operation::Retain,
    Operation::InterpretStatus,
    Operation::InterpretHealth,
];

/// Why a customization's member-side rules are not all served by the agent, reported once per
/// customization and message: a warning log and a Warning Event on the customization.
struct Reported {
    cluster: String,
    recorder: crate::recorder::Recorder,
    /// `(customization, what)` → the message last reported.
    seen: BTreeMap<(String, &'static str), String>,
}

impl Reported {
    /// Report `message` about `ric` unless it was the last one reported for `(name, what)`;
    /// `event` also records it as a Warning Event with that reason.
    fn report(
        &mut self,
        ric: &ResourceInterpreterCustomization,
        what: &'static str,
        message: String,
        event: Option<&'static str>,
    ) {
        let name = ric.metadata.name().to_owned();
        if self.seen.get(&(name.clone(), what)) == Some(&message) {
            return;
        }
        tracing::warn!(customization = %name, error = %message, "{what}");
        if let Some(reason) = event {
            let regarding = crate::recorder::Regarding {
                api_version: CONFIG_API_VERSION.into(),
                kind: CUSTOMIZATION_KIND.into(),
                namespace: String::new(),
                name: name.clone(),
                uid: ric.metadata.uid.clone().unwrap_or_default(),
            };
            self.recorder.publish(
                &regarding,
                crate::recorder::EventType::Warning,
                reason,
                &message,
            );
        }
        self.seen.insert((name, what), message);
    }
}

/// `ric` as the agent compiles it: without its `wasm` rules (the agent does not load
/// `WasmPlugin`s), and the fields of those it dropped for member-side operations.
fn without_wasm_rules(
    ric: &ResourceInterpreterCustomization,
) -> (ResourceInterpreterCustomization, Vec<&'static str>) {
    let mut out = ric.clone();
    let mut unserved = Vec::new();
    let rules = &mut out.spec.customizations;
    for (op, rule) in [
        (Operation::Retain, &mut rules.retention),
        (Operation::InterpretReplica, &mut rules.replica_resource),
        (Operation::InterpretComponent, &mut rules.component_resource),
        (Operation::ReviseReplica, &mut rules.replica_revision),
        (Operation::InterpretStatus, &mut rules.status_reflection),
        (Operation::AggregateStatus, &mut rules.status_aggregation),
        (Operation::InterpretHealth, &mut rules.health_interpretation),
        (
            Operation::InterpretDependency,
            &mut rules.dependency_interpretation,
        ),
    ] {
        if rule.as_ref().is_some_and(|r| r.wasm.is_some()) {
            *rule = None;
            if MEMBER_SIDE.contains(&op) {
                unserved.push(rule_for(&ric.spec.customizations, op).0);
            }
        }
    }
    (out, unserved)
}

/// Compile `objects` (customizations) into `slot`; whether the chain changed. Customizations
/// that do not compile keep their previous version and are logged once per error (the control
/// plane reports them as Events on the object); `wasm` rules are left out and those of
/// member-side operations reported once per customization ([`without_wasm_rules`]).
fn sync_customizations(
    slot: &Slot,
    objects: &[DynamicObject],
    settings: &Settings,
    reported: &mut Reported,
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
    let mut notes = Vec::new();
    let rics: Vec<ResourceInterpreterCustomization> = rics
        .iter()
        .map(|ric| {
            let (served, unserved) = without_wasm_rules(ric);
            if !unserved.is_empty() {
                let message = format!(
                    "spec.customizations.{{{}}}: wasm rules are not run by the pull agent of cluster {} (it does not load WasmPlugins); there these operations use the built-in interpretation. Use luaScript or cel rules for Retain, InterpretStatus and InterpretHealth of Pull clusters",
                    unserved.join(", "),
                    reported.cluster
                );
                notes.push((ric.clone(), message));
            }
            served
        })
        .collect();
    let (failures, changed) = slot.sync(&rics, &settings.rule_backends.0);
    reported.seen.retain(|(name, what), _| match *what {
        COMPILE_FAILED => failures.iter().any(|(r, _)| r.metadata.name() == name),
        _ => notes.iter().any(|(r, _)| r.metadata.name() == name),
    });
    for (ric, message) in notes {
        reported.report(&ric, WASM_NOT_SERVED, message, Some("WasmRulesNotServed"));
    }
    for (ric, error) in failures {
        // The control plane reports these as Events on the object.
        reported.report(&ric, COMPILE_FAILED, error, None);
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
        let obs = status::observe(
            &agent.member,
            timeout,
            agent.settings.pipeline.gates.resource_quota_estimate,
        )
        .await;
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

    #[test]
    fn wasm_rules_are_left_out_and_only_member_side_ones_are_named() {
        let ric: ResourceInterpreterCustomization = serde_json::from_value(json!({
            "apiVersion": CONFIG_API_VERSION, "kind": CUSTOMIZATION_KIND,
            "metadata": {"name": "w"},
            "spec": {"target": {"apiVersion": "example.dev/v1", "kind": "Widget"}, "customizations": {
                "retention": {"wasm": {"plugin": "p"}},
                "replicaResource": {"wasm": {"plugin": "p"}},
                "statusReflection": {"cel": {"status": "{}"}},
                "healthInterpretation": {"wasm": {"plugin": "p"}},
                "dependencyInterpretation": {"wasm": {"plugin": "p"}},
            }}
        }))
        .expect("customization");
        let (served, unserved) = without_wasm_rules(&ric);
        assert_eq!(unserved, ["retention", "healthInterpretation"]);
        let rules = &served.spec.customizations;
        assert!(rules.status_reflection.is_some());
        assert!(rules.retention.is_none() && rules.replica_resource.is_none());
        assert!(rules.health_interpretation.is_none() && rules.dependency_interpretation.is_none());
        // Without wasm rules nothing changes.
        let mut plain = ric.clone();
        plain.spec.customizations = served.spec.customizations.clone();
        assert_eq!(without_wasm_rules(&plain), (plain.clone(), Vec::new()));
    }
}
