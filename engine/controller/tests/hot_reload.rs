//! Hot reload through the control plane's plugin registry, the product's one reload path.
//!
//! Direct: a `Registry` synced alternately with two versions of a `WasmPlugin` while another
//! thread schedules continuously: zero failed cycles, no cycle mixing versions, each swap used by
//! the first cycle that starts after `sync` returns, and a broken module keeps the previous version
//! with the report saying why. Live: updating the `WasmPlugin` object of a running control plane
//! moves an already scheduled binding within a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flotilla_api::cluster::Cluster;
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus};
use flotilla_controller::controller::plugins::{Backends, Object, Registry};
use flotilla_controller::{Settings, api_resource, client};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::scheduler::schedule;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};

mod common;
use common::{b64, eventually, filter_module, sha};

/// A module with a filter and an assigner that reveal their version together: v1's filter rejects
/// cluster row 2 (`c`) and its assigner picks the first row; v2's filter rejects row 0 (`a`) and
/// its assigner picks the second row. Over clusters a, b, c: v1 places on `a`, v2 on `c`, and any
/// mix of versions places on `b`.
fn module(version: u32) -> String {
    let (rejected, row) = if version == 1 { (2, 0) } else { (0, 1) };
    let reasons = format!(r#"{{"reasons":["rejected by v{version}"]}}"#);
    let assigned = format!(r#"{{"assigned":[[{row},3]]}}"#);
    format!(
        r#"(module
  (import "flotilla:host/v1" "set_result" (func $set_result (param i32 i32)))
  (import "flotilla:host/v1" "set_rows" (func $set_rows (param i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 0) "{reasons_esc}")
  (data (i32.const 512) "{assigned_esc}")
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.shr_u (global.get $heap) (i32.const 16)) (i32.const 1))))))
    (local.get $p))
  (func (export "flotilla_dealloc") (param $p i32) (param $n i32)
    (if (i32.eq (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)) (global.get $heap))
      (then (global.set $heap (local.get $p)))))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_filter_v1") (param i32 i32) (param $rows i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (i32.store8 (i32.add (i32.const 1024) (local.get $i))
        (i32.eq (i32.load (i32.add (local.get $rows) (i32.shl (local.get $i) (i32.const 2)))) (i32.const {rejected})))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $set_rows (i32.const 1024) (local.get $n))
    (call $set_result (i32.const 0) (i32.const {reasons_len}))
    (i32.const 0))
  (func (export "flotilla_assign_v1") (param i32 i32 i32 i32) (result i32)
    (call $set_result (i32.const 512) (i32.const {assigned_len}))
    (i32.const 0)))
"#,
        reasons_esc = reasons.replace('"', "\\\""),
        assigned_esc = assigned.replace('"', "\\\""),
        reasons_len = reasons.len(),
        assigned_len = assigned.len(),
    )
}

/// A module the host refuses at load: it imports a function the host does not provide.
const BROKEN: &str = "(module (import \"env\" \"abort\" (func)) (func (export \"flotilla_abi_version\") (result i32) (i32.const 1)))";

fn clusters(names: &[&str]) -> Vec<Cluster> {
    names
        .iter()
        .map(|n| {
            serde_json::from_value(json!({
                "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                "metadata": {"name": n},
                "spec": {"syncMode": "Push"},
                "status": {"apiEnablements": [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}]},
            }))
            .expect("cluster fixture")
        })
        .collect()
}

/// A Deployment with 3 replicas, Duplicated.
fn binding() -> (ResourceBindingSpec, ResourceBindingStatus) {
    let spec = serde_json::from_value(json!({
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web", "uid": "u1"},
        "replicas": 3,
        "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
    }))
    .expect("binding fixture");
    (spec, ResourceBindingStatus::default())
}

fn wasm_backends(module_dir: &std::path::Path) -> Backends {
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

/// Where `version` places over clusters a, b, c.
fn placed_by(version: u32) -> &'static str {
    if version == 1 { "a" } else { "c" }
}

#[test]
fn registry_swaps_while_scheduling_continuously_and_a_broken_module_keeps_the_previous_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = Arc::new(Registry::new(wasm_backends(dir.path())));
    let plugin = |generation: i64, module: &str| Object {
        name: "versioned".into(),
        generation: Some(generation),
        spec: json!({"module": {"base64": b64(module), "format": "wat"}}),
    };
    let profile = Object {
        name: "hot".into(),
        generation: Some(1),
        spec: json!({
            "filters": [{"name": "versioned", "wasm": {"plugin": "versioned"}}],
            "assigners": [{"name": "versioned", "wasm": {"plugin": "versioned"}}],
        }),
    };
    let r = registry.sync(&[plugin(1, &module(1))], std::slice::from_ref(&profile));
    assert!(r.changed && r.profiles["hot"].error.is_none(), "{r:?}");

    // `epoch` is even while no sync runs (epoch / 2 syncs done) and odd during one. A cycle that
    // starts and ends in the same even epoch must see the version in force in that epoch.
    let epoch = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<(u64, u64, String)>();
    let worker = {
        let (registry, epoch, stop) =
            (Arc::clone(&registry), Arc::clone(&epoch), Arc::clone(&stop));
        std::thread::spawn(move || {
            let cl = clusters(&["a", "b", "c"]);
            let (spec, status) = binding();
            while !stop.load(Ordering::Acquire) {
                let start = epoch.load(Ordering::Acquire);
                let snapshot = Snapshot::new(cl.clone(), registry.profiles(), Options::default());
                let profile = snapshot.profile("hot").expect("profile hot served");
                let r = schedule(&snapshot, profile, &spec, &status, None, None);
                let placed = match r.outcome {
                    Ok(t) if t.len() == 1 && r.ignored_faults.is_empty() => t[0].name.clone(),
                    other => format!("failed: {other:?} {:?}", r.ignored_faults),
                };
                if tx
                    .send((start, epoch.load(Ordering::Acquire), placed))
                    .is_err()
                {
                    return;
                }
            }
        })
    };

    // v2, v1, v2, ... with a broken module every fourth sync; the version in force per even epoch.
    let mut in_force = vec![1u32];
    let mut cycles: Vec<(u64, u64, String)> = Vec::new();
    let mut sync_times = Vec::new();
    let mut version = 1;
    for i in 1..=24i64 {
        let broken = i % 4 == 0;
        if !broken {
            version = 3 - version;
        }
        // Let the worker run a few cycles on the version in force first.
        let before = epoch.load(Ordering::Acquire);
        while cycles
            .iter()
            .filter(|(s, e, _)| *s == before && *e == before)
            .count()
            < 3
        {
            cycles.push(
                rx.recv_timeout(Duration::from_secs(10))
                    .expect("the scheduler thread keeps cycling"),
            );
        }
        epoch.fetch_add(1, Ordering::AcqRel);
        let started = Instant::now();
        let wasm = plugin(
            i + 1,
            &if broken {
                BROKEN.to_owned()
            } else {
                module(version)
            },
        );
        let r = registry.sync(&[wasm], std::slice::from_ref(&profile));
        sync_times.push(started.elapsed());
        epoch.fetch_add(1, Ordering::AcqRel);
        if broken {
            assert!(!r.changed, "a broken module must not be swapped in: {r:?}");
            let why = r.plugins["versioned"]
                .error
                .clone()
                .unwrap_or_else(|| panic!("the report says why: {r:?}"));
            assert!(
                why.contains("env") && why.contains("abort"),
                "names the unknown import: {why}"
            );
            assert!(r.profiles["hot"].serving_previous, "{r:?}");
            assert!(
                r.profiles["hot"]
                    .error
                    .as_deref()
                    .is_some_and(|e| e.contains("WasmPlugin \"versioned\"")),
                "{r:?}"
            );
        } else {
            assert!(r.changed, "sync {i}: {r:?}");
            assert_eq!(r.plugins["versioned"].error, None);
            assert_eq!(r.profiles["hot"].error, None);
        }
        in_force.push(version);
        // The very next cycle that starts after `sync` returned uses the version now in force.
        let now = epoch.load(Ordering::Acquire);
        let next = loop {
            let c = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the scheduler thread keeps cycling");
            cycles.push(c.clone());
            if c.0 == now {
                break c;
            }
        };
        assert_eq!(
            next.2,
            placed_by(version),
            "sync {i}: the first cycle after the swap"
        );
    }
    stop.store(true, Ordering::Release);
    worker.join().expect("scheduler thread");
    cycles.extend(rx.try_iter());

    let other: Vec<&String> = cycles
        .iter()
        .map(|(_, _, p)| p)
        .filter(|p| *p != "a" && *p != "c")
        .collect();
    assert!(
        other.is_empty(),
        "failed or mixed cycles: {:?}",
        &other[..other.len().min(5)]
    );
    let mut checked = 0;
    for (start, end, placed) in &cycles {
        if start == end && start % 2 == 0 {
            let v = in_force[usize::try_from(start / 2).expect("epoch")];
            assert_eq!(
                placed,
                placed_by(v),
                "a cycle in epoch {start} used the wrong version"
            );
            checked += 1;
        }
    }
    let slowest = sync_times.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{} cycles ({checked} within one epoch, all on the version in force), 24 syncs (6 broken), slowest sync {slowest:?}",
        cycles.len()
    );
    assert!(checked >= 24 * 3);
}

// ------------------------------------------------------------------------------------------------
// Live: the embedded control plane.

struct Env {
    control: Client,
    _running: flotilla_controller::Running,
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
    let settings = Settings {
        ready_delay: Duration::from_millis(100),
        backends: wasm_backends(&dir.path().join("modules")),
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
        _running: running,
        _server: server,
        _dir: dir,
    }
}

fn api(c: &Client, api_version: &str, kind: &str) -> Api<DynamicObject> {
    Api::all_with(c.clone(), &api_resource(api_version, kind))
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

fn wasm_plugin(module: &str) -> Value {
    json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": "pick"},
        "spec": {"module": {"base64": b64(module), "format": "wat"}, "sha256": sha(module)},
    })
}

/// The target clusters of the binding of Deployment `web`, once scheduled.
async fn placement(c: &Client) -> Option<Vec<String>> {
    let rb = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    )
    .get_opt("web-deployment")
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
    (cond["status"] == "True").then(|| {
        rb.data
            .pointer("/spec/clusters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updating_a_wasm_plugin_object_moves_a_scheduled_binding_within_a_second() {
    let e = env().await;
    let c = &e.control;
    let plugins = api(c, "flotilla.dev/v1alpha1", "WasmPlugin");
    let v1 = filter_module(1, 1); // rejects member2
    let v2 = filter_module(2, 0); // rejects member1
    apply(&plugins, wasm_plugin(&v1)).await;
    apply(
        &api(c, "flotilla.dev/v1alpha1", "SchedulerProfile"),
        json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "wasm-pick"},
            "spec": {"filters": [{"name": "APIEnablement"}, {"name": "pick", "wasm": {"plugin": "pick"}}]},
        }),
    )
    .await;
    eventually("the profile Ready", Duration::from_secs(30), || async {
        let p = api(c, "flotilla.dev/v1alpha1", "SchedulerProfile")
            .get("wasm-pick")
            .await
            .ok()?;
        (p.data.pointer("/status/conditions/0/status")? == "True").then_some(())
    })
    .await;
    // Duplicated: re-evaluated on every scheduling trigger, a profile swap included (as in Karmada).
    apply(
        &Api::namespaced_with(c.clone(), "default", &api_resource("policy.karmada.io/v1alpha1", "PropagationPolicy")),
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "schedulerName": "wasm-pick",
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}, "replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
            },
        }),
    )
    .await;
    let deployments: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "default", &api_resource("apps/v1", "Deployment"));
    let web = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    });
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(web).expect("object"),
        )
        .await
        .expect("create");
    let first = eventually("the first placement", Duration::from_secs(30), || async {
        placement(c).await.filter(|p| !p.is_empty())
    })
    .await;
    assert_eq!(first, ["member1"], "v1 rejects member2");

    // Swap back and forth; each update of the object must move the binding within a second.
    let mut latencies = Vec::new();
    for (module, expected) in [(&v2, "member2"), (&v1, "member1"), (&v2, "member2")] {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut obj = plugins.get("pick").await.expect("get WasmPlugin");
        obj.data["spec"] = wasm_plugin(module)["spec"].clone();
        let updated = Instant::now();
        plugins
            .replace("pick", &PostParams::default(), &obj)
            .await
            .expect("update WasmPlugin");
        loop {
            if placement(c).await.is_some_and(|p| p == [expected]) {
                break;
            }
            assert!(
                updated.elapsed() < Duration::from_secs(30),
                "the binding never moved to {expected}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        latencies.push(updated.elapsed());
    }
    eprintln!("WasmPlugin update -> binding moved: {latencies:?}");
    for l in &latencies {
        assert!(
            *l <= Duration::from_secs(1),
            "the binding moved only {l:?} after the update (all: {latencies:?})"
        );
    }
}
