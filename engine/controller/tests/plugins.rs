//! Plugins as control-plane objects, end to end in process: a `SchedulerProfile` object whose
//! filter is a `WasmPlugin` object; replacing the WasmPlugin (new module bytes) while templates
//! keep arriving changes subsequent placements with no restart and no failed scheduling cycle;
//! both objects report what is loaded (digest) or why not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_controller::controller::plugins::Backends;
use flotilla_controller::{Settings, api_resource, client};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};

mod common;
use common::{bindings, condition, eventually, filter_module, sha, wasm_plugin};

struct Env {
    control: Client,
    running: flotilla_controller::Running,
    _server: Arc<ApiServer>,
    _dir: tempfile::TempDir,
}

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
    let backends = Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            Arc::new(flotilla_wasm::WasmFactory::new()),
        ]),
        module_dir: Some(dir.path().join("modules")),
        module_source_dir: None,
        precompile: None,
    };
    let settings = Settings {
        ready_delay: Duration::from_millis(100),
        backends,
        ..Settings::default()
    };
    let opts = flotilla_controller::Embedded {
        members: 2,
        settings,
        ..Default::default()
    };
    let running = flotilla_controller::start_embedded(server.router(), opts)
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

fn wasm_plugins(c: &Client) -> Api<DynamicObject> {
    Api::all_with(
        c.clone(),
        &api_resource("flotilla.dev/v1alpha1", "WasmPlugin"),
    )
}

fn profiles(c: &Client) -> Api<DynamicObject> {
    Api::all_with(
        c.clone(),
        &api_resource("flotilla.dev/v1alpha1", "SchedulerProfile"),
    )
}

async fn apply(api: &Api<DynamicObject>, obj: Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .expect("name")
        .to_owned();
    api.patch(
        &name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&obj),
    )
    .await
    .expect("apply");
}

const WAIT: Duration = Duration::from_secs(30);

/// `Loaded` condition status, serving digest and `Loaded` message of WasmPlugin `name`.
async fn plugin_status(c: &Client, name: &str) -> (String, String, String) {
    let o = wasm_plugins(c).get(name).await.expect("get WasmPlugin");
    let cond = condition(&o.data, "Loaded");
    let s = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    (
        s(&cond, "/status"),
        s(&o.data, "/status/servingDigest"),
        s(&cond, "/message"),
    )
}

/// The plugin versions that placed the binding of Deployment `name`.
async fn placed_by(c: &Client, name: &str) -> Option<String> {
    let rb = bindings(c).get(&format!("{name}-deployment")).await.ok()?;
    rb.metadata
        .annotations
        .as_ref()?
        .get("flotilla.dev/placed-by")
        .cloned()
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "picked"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    })
}

/// Target clusters of the binding of Deployment `name` once it is scheduled (`Scheduled` True),
/// or the failure message.
async fn placement(c: &Client, name: &str) -> Option<Result<Vec<String>, String>> {
    let rb = bindings(c)
        .get_opt(&format!("{name}-deployment"))
        .await
        .ok()
        .flatten()?;
    let cond = rb
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Scheduled")?
        .clone();
    if cond["status"] == "True" {
        let clusters = rb
            .data
            .pointer("/spec/clusters")?
            .as_array()?
            .iter()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect();
        Some(Ok(clusters))
    } else {
        Some(Err(format!("{}: {}", cond["reason"], cond["message"])))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_a_wasm_plugin_object_changes_subsequent_placements_without_restart_or_failed_cycles()
 {
    let e = env().await;
    let c = &e.control;
    let v1 = filter_module(1, 1); // rejects member2
    let v2 = filter_module(2, 0); // rejects member1
    apply(&wasm_plugins(c), wasm_plugin("pick", &v1)).await;
    apply(
        &profiles(c),
        json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "wasm-pick"},
            "spec": {"filters": [{"name": "APIEnablement"}, {"name": "TaintToleration"}, {"name": "pick", "wasm": {"plugin": "pick"}}]},
        }),
    )
    .await;
    let (status, digest, message) = eventually("WasmPlugin v1 loaded", WAIT, || async {
        let s = plugin_status(c, "pick").await;
        (s.0 == "True" && s.1 == format!("sha256:{}", sha(&v1)) && s.2.contains("wasm-pick"))
            .then_some(s)
    })
    .await;
    assert_eq!(
        (status.as_str(), digest.as_str()),
        ("True", format!("sha256:{}", sha(&v1)).as_str())
    );
    assert!(message.contains("wasm-pick/filters[2]"), "{message}");
    eventually("profile Ready", WAIT, || async {
        let p = profiles(c).get("wasm-pick").await.ok()?;
        (p.data.pointer("/status/conditions/0/status")? == "True").then_some(())
    })
    .await;

    // Every template selects the profile through its policy (Divided over both members).
    apply(
        &Api::namespaced_with(c.clone(), "default", &api_resource("policy.karmada.io/v1alpha1", "PropagationPolicy")),
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "picked", "namespace": "default"},
            "spec": {
                "schedulerName": "wasm-pick",
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "picked"}}}],
                "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}, "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}},
            },
        }),
    )
    .await;
    let deployments: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "default", &api_resource("apps/v1", "Deployment"));
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment("before")).expect("object"),
        )
        .await
        .expect("create");
    let before = eventually("first placement", WAIT, || placement(c, "before")).await;
    assert_eq!(before, Ok(vec!["member1".to_owned()]), "v1 rejects member2");

    // Templates keep arriving while the plugin is replaced.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let deployments = deployments.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut names = Vec::new();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("during-{i}");
                deployments
                    .create(
                        &PostParams::default(),
                        &serde_json::from_value(deployment(&name)).expect("object"),
                    )
                    .await
                    .expect("create");
                names.push(name);
                i += 1;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            names
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let replaced = Instant::now();
    let mut obj = wasm_plugins(c).get("pick").await.expect("get");
    obj.data["spec"] = wasm_plugin("pick", &v2)["spec"].clone();
    wasm_plugins(c)
        .replace("pick", &PostParams::default(), &obj)
        .await
        .expect("replace WasmPlugin");
    eventually("WasmPlugin v2 loaded", WAIT, || async {
        let s = plugin_status(c, "pick").await;
        (s.0 == "True" && s.1 == format!("sha256:{}", sha(&v2))).then_some(())
    })
    .await;
    let swap = replaced.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let during = feeder.await.expect("feeder");
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment("after")).expect("object"),
        )
        .await
        .expect("create");
    let after = eventually("placement after the swap", WAIT, || placement(c, "after")).await;
    assert_eq!(after, Ok(vec!["member2".to_owned()]), "v2 rejects member1");
    // Each binding records the version that placed it.
    assert_eq!(
        placed_by(c, "after").await,
        Some(format!("pick=sha256:{}", sha(&v2)))
    );
    assert_eq!(
        placed_by(c, "before").await,
        Some(format!("pick=sha256:{}", sha(&v1)))
    );
    // And the profile's Events say it switched versions.
    let events: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "default", &api_resource("v1", "Event"));
    let switched = eventually("a PluginVersionSwitched event", WAIT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            (e.data["reason"] == "PluginVersionSwitched"
                && e.data["involvedObject"]["kind"] == "SchedulerProfile"
                && e.data["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&sha(&v2)[..12])))
            .then(|| e.data["message"].as_str().unwrap_or_default().to_owned())
        })
    })
    .await;
    assert!(
        switched.contains("wasm-pick") && switched.contains(&sha(&v1)[..12]),
        "{switched}"
    );

    // Every binding created around the swap scheduled on exactly one version's choice.
    let (mut on_v1, mut on_v2) = (0, 0);
    for name in &during {
        match eventually("placement during the swap", WAIT, || placement(c, name)).await {
            Ok(cs) if cs == ["member1"] => on_v1 += 1,
            Ok(cs) if cs == ["member2"] => on_v2 += 1,
            other => panic!("{name}: placed {other:?}"),
        }
    }
    // The Divided binding scheduled before the swap keeps its placement (a plugin change is not a
    // scheduling trigger for it; Duplicated bindings are re-evaluated on every trigger, as in Karmada).
    assert_eq!(
        placement(c, "before").await,
        Some(Ok(vec!["member1".to_owned()]))
    );
    let m = &e.running.context.metrics;
    assert_eq!(
        m.scheduling_results_of("error"),
        0,
        "a scheduling cycle failed"
    );
    assert_eq!(
        m.scheduling_results_of("unschedulable"),
        0,
        "a scheduling cycle found no cluster"
    );
    let (calls, failures) = e.running.context.plugins.metrics().calls("filter", "pick");
    assert!(
        calls >= during.len() as u64 + 2,
        "the Wasm filter ran once per binding: {calls}"
    );
    assert_eq!(failures, 0);
    eprintln!(
        "swap visible in status after {swap:?}; {} templates during the swap: {on_v1} on v1, {on_v2} on v2",
        during.len()
    );
    assert!(on_v1 + on_v2 == during.len());
    assert!(swap < Duration::from_secs(5), "swap took {swap:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_replacement_keeps_the_previous_version_and_both_objects_say_why() {
    let e = env().await;
    let c = &e.control;
    let v1 = filter_module(1, 1);
    apply(&wasm_plugins(c), wasm_plugin("pick", &v1)).await;
    apply(
        &profiles(c),
        json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "wasm-pick"},
            "spec": {"filters": [{"name": "pick", "wasm": {"plugin": "pick"}}]},
        }),
    )
    .await;
    eventually("v1 loaded", WAIT, || async {
        (plugin_status(c, "pick").await.0 == "True").then_some(())
    })
    .await;

    // A module with an import the host does not provide: refused at load.
    let broken = "(module (import \"env\" \"abort\" (func)) (func (export \"flotilla_abi_version\") (result i32) (i32.const 1)))";
    apply(&wasm_plugins(c), wasm_plugin("pick", broken)).await;
    let message = eventually("the load error in status", WAIT, || async {
        let s = plugin_status(c, "pick").await;
        (s.0 == "False").then_some(s.2)
    })
    .await;
    assert!(
        message.contains("env") && message.contains("abort"),
        "names the unknown import: {message}"
    );
    // The status keeps the serving version and the failed attempt apart.
    let o = wasm_plugins(c).get("pick").await.expect("get");
    assert_eq!(
        o.data.pointer("/status/servingDigest"),
        Some(&json!(format!("sha256:{}", sha(&v1))))
    );
    assert_eq!(
        o.data.pointer("/status/lastAttemptedDigest"),
        Some(&json!(format!("sha256:{}", sha(broken))))
    );
    let failed = condition(&o.data, "LoadFailed");
    assert_eq!(failed["status"], "True", "{failed}");
    assert_eq!(failed["reason"], "LoadFailed", "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("sha256:{} keeps serving", sha(&v1)))),
        "{failed}"
    );
    assert_eq!(failed["observedGeneration"], json!(o.metadata.generation));

    // Bytes that are not Wasm are refused as such, and WAT only when declared.
    for bytes in ["hello, not a module", broken] {
        let mut obj = wasm_plugin("pick", bytes);
        obj["spec"]["module"]
            .as_object_mut()
            .expect("module")
            .remove("format");
        apply(&wasm_plugins(c), obj).await;
        let want = format!(
            "spec.module.base64: not a Wasm module ({} bytes",
            bytes.len()
        );
        let (failed, o) = eventually("NotWasm", WAIT, || async {
            let o = wasm_plugins(c).get("pick").await.ok()?;
            let f = condition(&o.data, "LoadFailed");
            f["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(&want))
                .then_some((f, o))
        })
        .await;
        let m = failed["message"].as_str().unwrap_or_default();
        assert_eq!(failed["reason"], "NotWasm", "{failed}");
        assert!(m.contains("format: wat") && !m.contains("hello"), "{m}");
        assert!(
            o.data.pointer("/status/lastAttemptedDigest").is_none(),
            "{:?}",
            o.data["status"]
        );
        assert_eq!(
            o.data.pointer("/status/servingDigest"),
            Some(&json!(format!("sha256:{}", sha(&v1))))
        );
    }
    apply(&wasm_plugins(c), wasm_plugin("pick", broken)).await;
    let m = eventually("the profile's status", WAIT, || async {
        let p = profiles(c).get("wasm-pick").await.ok()?;
        let m = p
            .data
            .pointer("/status/conditions/0/message")?
            .as_str()?
            .to_owned();
        (p.data.pointer("/status/conditions/0/status")? == "False").then_some(m)
    })
    .await;
    assert!(
        m.contains("previous version keeps serving") && m.contains("WasmPlugin \"pick\""),
        "{m}"
    );
    assert_eq!(
        e.running
            .context
            .plugins
            .find("wasm-pick")
            .map(|p| p.filters.len()),
        Some(1),
        "v1 still served"
    );

    // A wrong digest and a missing plugin reference are reported with their field.
    let mut bad = wasm_plugin("pick", &v1);
    bad["spec"]["sha256"] = json!("00".repeat(32));
    apply(&wasm_plugins(c), bad).await;
    let message = eventually("digest mismatch", WAIT, || async {
        let s = plugin_status(c, "pick").await;
        (s.0 == "False" && s.2.contains("spec.sha256")).then_some(s.2)
    })
    .await;
    assert!(message.contains(&sha(&v1)), "{message}");
    apply(
        &profiles(c),
        json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "other"},
            "spec": {"scores": [{"name": "x", "wasm": {"plugin": "nope"}}]},
        }),
    )
    .await;
    let m = eventually("missing reference", WAIT, || async {
        let p = profiles(c).get("other").await.ok()?;
        let m = p
            .data
            .pointer("/status/conditions/0/message")?
            .as_str()?
            .to_owned();
        (p.data.pointer("/status/conditions/0/status")? == "False").then_some(m)
    })
    .await;
    assert_eq!(m, "spec.scores[0] (x): WasmPlugin \"nope\" not found");
}

/// The registry alone (no API server): statuses, reuse of unchanged profiles, keeping the
/// previous version on a failed build.
#[test]
fn registry_sync_reports_digests_and_keeps_the_previous_version_on_failure() {
    use flotilla_controller::controller::plugins::{Object, Registry};
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = Registry::new(Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            Arc::new(flotilla_wasm::WasmFactory::new()),
        ]),
        module_dir: Some(dir.path().to_path_buf()),
        module_source_dir: None,
        precompile: None,
    });
    let v1 = filter_module(1, 1);
    let wp = |module: &str| Object {
        name: "pick".into(),
        generation: Some(1),
        spec: wasm_plugin("pick", module)["spec"].clone(),
    };
    let profile = Object {
        name: "wasm-pick".into(),
        generation: Some(1),
        spec: json!({"filters": [{"name": "pick", "wasm": {"plugin": "pick"}}]}),
    };
    let r = registry.sync(&[wp(&v1)], std::slice::from_ref(&profile));
    assert!(r.changed);
    assert_eq!(
        r.plugins["pick"].attempted_digest.as_deref(),
        Some(format!("sha256:{}", sha(&v1)).as_str())
    );
    assert_eq!(
        r.plugins["pick"].serving_digest,
        r.plugins["pick"].attempted_digest
    );
    assert_eq!(
        r.switches
            .iter()
            .map(|s| (s.profile.as_str(), s.plugin.as_str(), s.from.is_none()))
            .collect::<Vec<_>>(),
        [("wasm-pick", "pick", true)]
    );
    assert_eq!(
        registry.find("wasm-pick").and_then(|p| p.placed_by()),
        Some(format!("pick=sha256:{}", sha(&v1)))
    );
    assert_eq!(r.plugins["pick"].error, None);
    assert_eq!(r.plugins["pick"].used_by, ["wasm-pick/filters[0]"]);
    assert_eq!(r.profiles["wasm-pick"].error, None);
    let names: Vec<String> = registry.profiles().iter().map(|p| p.name.clone()).collect();
    assert_eq!(names, ["default-scheduler", "wasm-pick"]);
    assert!(
        !registry
            .sync(&[wp(&v1)], std::slice::from_ref(&profile))
            .changed,
        "unchanged inputs: nothing rebuilt or swapped"
    );

    let broken = "(module (import \"env\" \"abort\" (func)) (func (export \"flotilla_abi_version\") (result i32) (i32.const 1)))";
    let r = registry.sync(&[wp(broken)], std::slice::from_ref(&profile));
    assert!(!r.changed, "the previous version keeps serving");
    let err = r.plugins["pick"]
        .error
        .clone()
        .unwrap_or_else(|| panic!("plugin error: {r:?}"));
    assert!(err.contains("env") && err.contains("abort"), "{err}");
    assert!(r.profiles["wasm-pick"].serving_previous);
    assert_eq!(
        r.plugins["pick"].serving_digest.as_deref(),
        Some(format!("sha256:{}", sha(&v1)).as_str()),
        "the previous version is still the one serving"
    );
    assert_eq!(
        r.plugins["pick"].attempted_digest.as_deref(),
        Some(format!("sha256:{}", sha(broken)).as_str())
    );
    assert!(r.switches.is_empty());
    assert!(
        r.profiles["wasm-pick"]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("spec.filters[0] (pick)")),
        "{:?}",
        r.profiles["wasm-pick"]
    );
}

/// The first status a new `WasmPlugin` gets already names the profile entries using it (they
/// come from the profiles' specs, not from a finished build), and says it is loading or loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn used_by_is_right_in_the_first_status_written() {
    use futures::{StreamExt as _, TryStreamExt as _};
    use kube::api::{WatchEvent, WatchParams};
    let e = env().await;
    let c = &e.control;
    apply(
        &profiles(c),
        json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "wasm-pick"},
            "spec": {"filters": [{"name": "pick", "wasm": {"plugin": "pick"}}]},
        }),
    )
    .await;
    // The profile is known to the controllers once they say its plugin is missing.
    eventually("the profile's status", WAIT, || async {
        let p = profiles(c).get("wasm-pick").await.ok()?;
        (condition(&p.data, "Ready")["status"] == "False").then_some(())
    })
    .await;
    let rv = wasm_plugins(c)
        .list(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut events = wasm_plugins(c)
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let v1 = filter_module(1, 1);
    apply(&wasm_plugins(c), wasm_plugin("pick", &v1)).await;
    let mut statuses = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let ev = tokio::time::timeout_at(deadline, events.try_next())
            .await
            .expect("the plugin loads in time")
            .expect("watch")
            .expect("watch open");
        let (WatchEvent::Added(o) | WatchEvent::Modified(o)) = ev else {
            continue;
        };
        let Some(status) = o.data.get("status").cloned() else {
            continue;
        };
        let loaded = condition(&o.data, "Loaded")["status"] == "True";
        statuses.push(status);
        if loaded {
            break;
        }
    }
    for st in &statuses {
        assert_eq!(
            st["usedBy"],
            json!(["wasm-pick/filters[0]"]),
            "{statuses:#?}"
        );
        assert_eq!(
            st["lastAttemptedDigest"],
            json!(format!("sha256:{}", sha(&v1)))
        );
    }
    let last = statuses.last().expect("a status");
    assert_eq!(last["servingDigest"], json!(format!("sha256:{}", sha(&v1))));
}
