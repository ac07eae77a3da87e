//! Binding preemption's victim plugin as a control-plane object: a `SchedulerProfile` whose
//! `spec.preemption.plugin` names a `WasmPlugin`.
//!
//! - Live: with the plugin (`victims_reverse.wat`: every candidate, the last one first) the
//!   scheduler evicts the OLDER of two equal-priority bindings; the same scenario without it
//!   evicts the newer one (the built-in order), so the plugin's choice is what decided.
//! - A module that does not export `flotilla_victims_v1` is that WasmPlugin's load failure
//!   (`LoadFailed`, with its Event) and the profile's, as for the plugin lists' entries: the
//!   profile is not served without it (or the previous version keeps serving), never silently
//!   with the built-in choice.

use std::sync::Arc;
use std::time::Duration;

use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::controller::plugins::{Backends, Object, Registry};
use flotilla_controller::{Settings, api_resource, client};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

mod common;
use common::{bindings, condition, cpu_deployment, eventually, filter_module, sha, wasm_plugin};

/// Every candidate may go, the last of the built-in order first.
const REVERSE: &str = include_str!("../../wasm/testdata/victims_reverse.wat");

const WAIT: Duration = Duration::from_secs(60);

fn backends(module_dir: &std::path::Path) -> Backends {
    Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            Arc::new(flotilla_wasm::WasmFactory::new()),
        ]),
        module_dir: Some(module_dir.to_path_buf()),
        module_source_dir: None,
        precompile: None,
    }
}

struct Env {
    control: Client,
    running: flotilla_controller::Running,
    _server: Arc<ApiServer>,
    _dir: tempfile::TempDir,
}

/// One member of 4 CPUs, binding preemption on, the Wasm backend.
async fn env() -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(
        store,
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    let mut settings = Settings {
        ready_delay: Duration::from_millis(100),
        backends: backends(&dir.path().join("modules")),
        ..Settings::default()
    };
    settings
        .pipeline
        .gates
        .set("BindingPreemption=true")
        .expect("valid feature gates");
    let running = flotilla_controller::start_embedded(
        server.router(),
        flotilla_controller::Embedded {
            members: 1,
            capacity: flotilla_controller::members::Capacity {
                cpu: "4".into(),
                memory: "16Gi".into(),
                pods: "110".into(),
            },
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    let control = client::in_process(server.router(), None, None);
    Env {
        control,
        running,
        _server: server,
        _dir: dir,
    }
}

fn api_of(c: &Client, v: &Value) -> Api<DynamicObject> {
    let res = api_resource(
        v["apiVersion"].as_str().expect("apiVersion"),
        v["kind"].as_str().expect("kind"),
    );
    match v.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &res),
        None => Api::all_with(c.clone(), &res),
    }
}

async fn apply(c: &Client, v: Value) {
    let name = v["metadata"]["name"].as_str().expect("name").to_owned();
    let obj: DynamicObject = serde_json::from_value(v.clone()).expect("object");
    api_of(c, &v)
        .patch(
            &name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(obj),
        )
        .await
        .expect("apply");
}

/// SchedulerProfile `victims`, choosing victims with WasmPlugin `plugin` when given.
fn profile(plugin: Option<&str>) -> Value {
    let spec = match plugin {
        Some(p) => json!({"preemption": {"plugin": {"name": p, "wasm": {"plugin": p}}}}),
        None => json!({}),
    };
    json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile",
        "metadata": {"name": "victims"}, "spec": spec,
    })
}

fn get<'a>(o: &'a Value, pointer: &str) -> &'a str {
    o.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

async fn object(c: &Client, api_version: &str, kind: &str, name: &str) -> Option<Value> {
    Api::<DynamicObject>::all_with(c.clone(), &api_resource(api_version, kind))
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|o| serde_json::to_value(o).ok())
}

/// A policy placing Deployment `name` on member1, Aggregated, with PriorityClass `class`, by
/// the `victims` profile.
fn policy(name: &str, class: &str) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "victims",
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "schedulePriority": {"priorityClassSource": "KubePriorityClass", "priorityClassName": class},
            "placement": {
                "clusterAffinity": {"clusterNames": ["member1"]},
                "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
            },
        },
    })
}

/// The binding's `spec.clusters` as `(name, replicas)`.
async fn placed(c: &Client, name: &str) -> Option<Vec<(String, i64)>> {
    let rb = bindings(c).get_opt(name).await.ok()??;
    Some(
        rb.data
            .pointer("/spec/clusters")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|t| {
                        (
                            get(t, "/name").to_owned(),
                            t["replicas"].as_i64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Messages of the Events with `reason` about the object of `kind` named `name` (any namespace).
async fn events(c: &Client, kind: &str, name: &str, reason: &str) -> Vec<String> {
    Api::<k8s_openapi::api::core::v1::Event>::all(c.clone())
        .list(&Default::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| {
                    e.involved_object.kind.as_deref() == Some(kind)
                        && e.involved_object.name.as_deref() == Some(name)
                        && e.reason.as_deref() == Some(reason)
                })
                .filter_map(|e| e.message)
                .collect()
        })
        .unwrap_or_default()
}

/// Fill member1 with two batch Deployments of priority 10 (batch-a first, batch-b one second
/// newer), then place `payments` (priority 1000, 2 CPUs) through profile `victims` (with the
/// victim plugin when `plugin`), and return which batch binding it preempted.
async fn preempted_with(plugin: bool) -> String {
    let e = env().await;
    let c = &e.control;
    if plugin {
        apply(c, wasm_plugin("reverse", REVERSE)).await;
    }
    apply(c, profile(plugin.then_some("reverse"))).await;
    eventually("the profile Ready", WAIT, || async {
        let p = object(c, "flotilla.dev/v1alpha1", "SchedulerProfile", "victims").await?;
        (condition(&p, "Ready")["status"] == "True").then_some(())
    })
    .await;
    for (name, value) in [("batch", 10), ("critical", 1000)] {
        apply(
            c,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": name}, "value": value,
                   "preemptionPolicy": "PreemptLowerPriority"}),
        )
        .await;
    }
    for (name, class) in [
        ("batch-a", "batch"),
        ("batch-b", "batch"),
        ("payments", "critical"),
    ] {
        apply(c, policy(name, class)).await;
    }
    for name in ["batch-a", "batch-b"] {
        apply(c, cpu_deployment(name, 2)).await;
        let rb = format!("{name}-deployment");
        eventually("the batch binding placed", WAIT, || async {
            (placed(c, &rb).await? == [("member1".to_owned(), 2)]).then_some(())
        })
        .await;
        // Creation timestamps have one-second resolution.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    // The member reports them full (simulated members keep the summary they are given).
    Api::<DynamicObject>::all_with(
        c.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    )
    .patch_status(
        "member1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"resourceSummary": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocated": {"cpu": "4", "memory": "0", "pods": "4"},
        }}})),
    )
    .await
    .expect("cluster status");

    apply(c, cpu_deployment("payments", 2)).await;
    eventually("payments placed on the freed capacity", WAIT, || async {
        (placed(c, "payments-deployment").await? == [("member1".to_owned(), 2)]).then_some(())
    })
    .await;
    let succeeded = eventually("the PreemptionSucceeded event", WAIT, || async {
        events(
            c,
            "ResourceBinding",
            "payments-deployment",
            "PreemptionSucceeded",
        )
        .await
        .into_iter()
        .next()
    })
    .await;
    let mut victims = Vec::new();
    for name in ["batch-a", "batch-b"] {
        let rb = format!("{name}-deployment");
        let on_member1 = placed(c, &rb)
            .await
            .unwrap_or_default()
            .iter()
            .any(|(cluster, _)| cluster == "member1");
        let preempted = !events(c, "ResourceBinding", &rb, "Preempted")
            .await
            .is_empty();
        assert_eq!(
            on_member1, !preempted,
            "{rb}: still on member1 = {on_member1}, a Preempted event = {preempted}"
        );
        if preempted {
            victims.push(rb);
        }
    }
    assert_eq!(victims.len(), 1, "one victim is enough: {victims:?}");
    assert_eq!(
        succeeded,
        format!(
            "Preempted 1 binding(s) of lower priority on cluster member1: default/{}",
            victims[0]
        )
    );
    assert_eq!(e.running.context.metrics.preemptions(), (1, 1));
    // The victim plugin's calls are counted per plugin like the other extension points'.
    let (calls, failures) = e
        .running
        .context
        .plugins
        .metrics()
        .calls("victims", "reverse");
    if plugin {
        assert!(
            calls >= 1 && failures == 0,
            "victims calls {calls}, failures {failures}"
        );
    } else {
        assert_eq!((calls, failures), (0, 0));
    }
    victims.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_plugin_named_by_a_profile_decides_which_binding_is_preempted() {
    // Built-in: lowest priority, then newest first.
    assert_eq!(preempted_with(false).await, "batch-b-deployment");
    // The plugin reverses that order: the oldest goes.
    assert_eq!(preempted_with(true).await, "batch-a-deployment");
}

/// Registry objects: WasmPlugin `name` with `module`, profile `victims` naming it as its victim
/// plugin.
fn objects(name: &str, module: &str) -> (Object, Object) {
    (
        Object {
            name: name.into(),
            generation: Some(1),
            spec: wasm_plugin(name, module)["spec"].clone(),
        },
        Object {
            name: "victims".into(),
            generation: Some(1),
            spec: profile(Some(name))["spec"].clone(),
        },
    )
}

#[test]
fn a_module_without_the_victims_export_is_the_wasm_plugins_load_failure_and_the_profiles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let module_dir = dir.path().join("modules");
    let filter = filter_module(1, 1);

    // Alone: neither object loads, and the profile is not served (no built-in fallback).
    let registry = Registry::new(backends(&module_dir));
    let (wp, p) = objects("pick", &filter);
    let r = registry.sync(&[wp], &[p]);
    let st = &r.plugins["pick"];
    assert_eq!(st.used_by, ["victims/preemption.plugin"], "{r:?}");
    assert_eq!(st.reason, Some("LoadFailed"), "{r:?}");
    let err = st.error.as_deref().unwrap_or_default();
    assert!(
        err.starts_with("profile victims: spec.preemption.plugin (pick): WasmPlugin \"pick\": ")
            && err.contains("does not export flotilla_victims_v1"),
        "{err}"
    );
    let profile_err = r.profiles["victims"].error.as_deref().unwrap_or_default();
    assert!(
        profile_err.contains("spec.preemption.plugin (pick): WasmPlugin \"pick\"")
            && profile_err.contains("flotilla_victims_v1"),
        "{profile_err}"
    );
    assert!(
        !err.contains(&*module_dir.to_string_lossy())
            && !profile_err.contains(&*module_dir.to_string_lossy()),
        "messages name the WasmPlugin, not the module store: {err} / {profile_err}"
    );
    assert!(!r.profiles["victims"].serving_previous);
    assert!(
        registry.find("victims").is_none(),
        "served without its plugin"
    );
    assert!(r.switches.is_empty());

    // A victim plugin that loads is served and named in its WasmPlugin's status.
    let registry = Registry::new(backends(&module_dir));
    let (wp, p) = objects("pick", REVERSE);
    let r = registry.sync(&[wp], std::slice::from_ref(&p));
    assert_eq!(r.plugins["pick"].error, None, "{r:?}");
    assert_eq!(r.plugins["pick"].used_by, ["victims/preemption.plugin"]);
    assert_eq!(r.profiles["victims"].error, None, "{r:?}");
    let served = registry.find("victims").expect("served");
    assert!(
        served.victims.is_some(),
        "the victim plugin is in the profile"
    );
    assert_eq!(
        served.versions,
        [("pick".to_owned(), format!("sha256:{}", sha(REVERSE)))]
    );

    // Replaced by the module without the export: refused, the previous version keeps serving.
    let (wp, _) = objects("pick", &filter);
    let r = registry.sync(&[wp], std::slice::from_ref(&p));
    assert!(!r.changed, "{r:?}");
    assert_eq!(r.plugins["pick"].reason, Some("LoadFailed"), "{r:?}");
    assert_eq!(
        r.plugins["pick"].serving_digest.as_deref(),
        Some(format!("sha256:{}", sha(REVERSE)).as_str())
    );
    assert!(r.profiles["victims"].serving_previous, "{r:?}");
    assert!(
        registry
            .find("victims")
            .is_some_and(|p| p.victims.is_some())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_plugin_that_does_not_load_says_so_on_both_objects() {
    let e = env().await;
    let c = &e.control;
    apply(c, wasm_plugin("pick", &filter_module(1, 1))).await;
    apply(c, profile(Some("pick"))).await;
    let failed = eventually("the WasmPlugin's LoadFailed condition", WAIT, || async {
        let o = object(c, "flotilla.dev/v1alpha1", "WasmPlugin", "pick").await?;
        let f = condition(&o, "LoadFailed");
        (f["status"] == "True").then_some(o)
    })
    .await;
    let f = condition(&failed, "LoadFailed");
    assert_eq!(f["reason"], "LoadFailed", "{f}");
    assert!(get(&f, "/message").contains("flotilla_victims_v1"), "{f}");
    assert_eq!(condition(&failed, "Loaded")["status"], "False");
    assert_eq!(
        failed.pointer("/status/usedBy"),
        Some(&json!(["victims/preemption.plugin"]))
    );
    let event = eventually("the LoadFailed event", WAIT, || async {
        events(c, "WasmPlugin", "pick", "LoadFailed")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert!(event.contains("flotilla_victims_v1"), "{event}");
    let p = object(c, "flotilla.dev/v1alpha1", "SchedulerProfile", "victims")
        .await
        .expect("profile");
    let ready = condition(&p, "Ready");
    assert_eq!(ready["status"], "False", "{ready}");
    assert!(
        get(&ready, "/message").contains("spec.preemption.plugin (pick): WasmPlugin \"pick\""),
        "{ready}"
    );
    assert!(
        e.running.context.plugins.find("victims").is_none(),
        "served without its victim plugin"
    );
}
