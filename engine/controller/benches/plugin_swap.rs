//! Live plugin swap latency: how long after a `WasmPlugin` object changes do new placements use
//! the new module, and how long a restart takes to serve it again (compiled-module cache).
//!
//!     cargo bench -p flotilla-controller --bench plugin_swap
//!
//! The module is a real Go plugin of about 5 MB: examples/plugins/go-gpu-scorer built with
//! `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` after a few standard packages are
//! linked in (net/http, text/template, encoding/xml, regexp, math/big) to reach that size; or
//! the module at `FLOTILLA_BENCH_MODULE`. Version 2 is the same code with one more custom
//! section: another digest, so it is compiled anew, as a real update is.
//!
//! Everything runs in one process: the embedded API server, two simulated members and every
//! controller, with the module directory (`--module-dir`) and the store the CLI uses (compiled
//! modules kept in `<store>/compiled`). A `SchedulerProfile` scores with the plugin; Deployments
//! are created every 20 ms. A sample is the time from the `WasmPlugin` update request returning
//! to the bench seeing the first binding whose `flotilla.dev/placed-by` annotation names the new
//! digest; the time until the plugin's `status.servingDigest` names it is printed beside it
//! (compile done, profile swapped). A module compiled anew serves first from the baseline
//! compiler's code (Winch) while Cranelift compiles it in the background; each sample also
//! reports when the optimized code took over, and the next swap starts only then. Last, the
//! per-call time of the module's score export under each tier. Knobs: `FLOTILLA_BENCH_SAMPLES`
//! (5), `FLOTILLA_BENCH_CALLS` (2000).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::controller::plugins::{Backends, Object, Registry};
use flotilla_controller::{Settings, api_resource, client};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The ~5 MB Go module (built into `dir`), or `FLOTILLA_BENCH_MODULE`.
fn go_module(dir: &Path) -> Vec<u8> {
    if let Ok(p) = std::env::var("FLOTILLA_BENCH_MODULE") {
        return std::fs::read(p).expect("FLOTILLA_BENCH_MODULE");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = dir.join("go");
    std::fs::create_dir_all(&src).expect("dir");
    let example = root.join("examples/plugins/go-gpu-scorer");
    std::fs::copy(example.join("main.go"), src.join("main.go")).expect("main.go");
    let sdk = root.join("sdk/go").canonicalize().expect("sdk/go");
    std::fs::write(
        src.join("go.mod"),
        format!(
            "module flotilla.dev/bench/swap\n\ngo 1.24\n\nrequire flotilla.dev/sdk/go v0.0.0\n\nreplace flotilla.dev/sdk/go => {}\n",
            sdk.display()
        ),
    )
    .expect("go.mod");
    std::fs::write(
        src.join("extra.go"),
        "package main\n\nimport (\n\t_ \"encoding/xml\"\n\t_ \"math/big\"\n\t_ \"net/http\"\n\t_ \"regexp\"\n\t_ \"text/template\"\n)\n",
    )
    .expect("extra.go");
    let out = dir.join("module.wasm");
    let status = std::process::Command::new("go")
        .args(["build", "-buildmode=c-shared", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .status()
        .expect("go (the Go toolchain) on PATH, or FLOTILLA_BENCH_MODULE");
    assert!(status.success(), "go build failed");
    std::fs::read(out).expect("module")
}

/// `wasm` with one more custom section: the same code under another digest.
fn version(wasm: &[u8], n: u32) -> Vec<u8> {
    let name = b"flotilla-bench-version";
    let payload = n.to_le_bytes();
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(&payload);
    let mut out = wasm.to_vec();
    out.push(0);
    out.push(body.len() as u8);
    out.extend_from_slice(&body);
    out
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn backends(store: &Path, source: &Path) -> Backends {
    Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            Arc::new(flotilla_wasm::WasmFactory::with_cache_dir(
                store.join("compiled"),
            )),
        ]),
        module_dir: Some(store.to_path_buf()),
        module_source_dir: Some(source.to_path_buf()),
    }
}

fn api(c: &Client, api_version: &str, kind: &str) -> Api<DynamicObject> {
    if kind == "Deployment" || kind == "ResourceBinding" || kind == "PropagationPolicy" {
        Api::namespaced_with(c.clone(), "default", &api_resource(api_version, kind))
    } else {
        Api::all_with(c.clone(), &api_resource(api_version, kind))
    }
}

async fn apply(api: &Api<DynamicObject>, obj: Value) {
    let name = obj["metadata"]["name"].as_str().expect("name").to_owned();
    api.patch(
        &name,
        &PatchParams::apply("bench").force(),
        &Patch::Apply(&obj),
    )
    .await
    .expect("apply");
}

fn plugin(file: &str) -> Value {
    json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": "gpu"},
        "spec": {"module": {"path": file}, "config": {"resource": "nvidia.com/gpu", "label": "flotilla.dev/gpu-count"}, "failurePolicy": "Fail"},
    })
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "swap"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    })
}

/// Digest in the placed-by annotation of every binding, by binding name.
async fn placed_by(c: &Client) -> Vec<String> {
    let Ok(list) = api(c, "work.karmada.io/v1alpha2", "ResourceBinding")
        .list(&Default::default())
        .await
    else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter_map(|rb| {
            rb.metadata
                .annotations?
                .get("flotilla.dev/placed-by")
                .cloned()
        })
        .collect()
}

/// Wait (at most 5 minutes) until no loaded module runs baseline code and no optimized
/// compile is queued; how long that took.
async fn wait_optimized() -> Duration {
    let t = Instant::now();
    let host = flotilla_wasm::Host::global().expect("host");
    loop {
        let s = host.tiering();
        if s.serving_baseline == 0 && s.pending == 0 {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "the optimized code never came: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn wait_loaded(c: &Client, digest: &str) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let o = api(c, "flotilla.dev/v1alpha1", "WasmPlugin")
            .get("gpu")
            .await
            .expect("get");
        if o.data.pointer("/status/servingDigest") == Some(&json!(format!("sha256:{digest}"))) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the plugin never loaded: {:?}",
            o.data.get("status")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn main() {
    let samples: u32 = knob("FLOTILLA_BENCH_SAMPLES", 5);
    let tmp = tempfile::tempdir().expect("tempdir");
    let module = go_module(tmp.path());
    let source = tmp.path().join("modules");
    std::fs::create_dir_all(&source).expect("dir");
    let store = tmp.path().join("store");
    println!(
        "plugin swap bench: a {:.1} MB Go module, {samples} swaps; load average {}",
        module.len() as f64 / 1e6,
        loadavg()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(swaps(&module, &source, &store, tmp.path(), samples));
    // The controllers' tasks hold the last module; with them gone the restart below neither
    // finds it in the process-wide host (modules are shared by digest while in use) nor skips
    // the compile it means to time.
    drop(rt);
    restart(&module, &source, &store);
    guest_speed(&module);
    println!("done; load average {}", loadavg());
}

/// Per-call time of the module's score export under each tier (one warm instance, three
/// clusters, the same binding each call).
fn guest_speed(module: &[u8]) {
    use flotilla_core::framework::{BindingContext, ScoreInput, ScorePlugin};
    let calls: u32 = knob("FLOTILLA_BENCH_CALLS", 2000);
    let host = flotilla_wasm::Host::global().expect("host");
    let clusters: Vec<flotilla_api::cluster::Cluster> = ["member1", "member2", "member3"]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            serde_json::from_value(json!({
                "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                "metadata": {"name": n, "labels": {"flotilla.dev/gpu-count": (2 * i + 1).to_string()}},
                "spec": {"syncMode": "Push"},
            }))
            .expect("cluster")
        })
        .collect();
    let refs: Vec<_> = clusters.iter().collect();
    let spec: flotilla_api::work::ResourceBindingSpec = serde_json::from_value(json!({
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web", "uid": "u1"},
        "replicas": 2,
        "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
    }))
    .expect("binding");
    let placement = spec.placement.clone().unwrap_or_default();
    let config = plugin("x")["spec"]["config"].clone();
    let mut per_call = Vec::new();
    for tier in [
        flotilla_wasm::Tier::Optimized,
        flotilla_wasm::Tier::Baseline,
    ] {
        let t = Instant::now();
        let compiled = host.compile_with(module, tier).expect("compile");
        let compile = t.elapsed();
        let t = Instant::now();
        let plugin = flotilla_wasm::WasmPlugin::load(
            host,
            "gpu",
            compiled,
            Some(&config),
            flotilla_wasm::Limits::default(),
        )
        .expect("load");
        let instantiate = t.elapsed();
        let ctx = BindingContext::new(&spec, &placement, None);
        let mut out = Vec::new();
        let mut times = Vec::with_capacity(calls as usize);
        for _ in 0..calls.max(10) {
            out.clear();
            let t = Instant::now();
            plugin
                .score(&ScoreInput::new(&ctx, &refs), &mut out)
                .expect("score");
            times.push(t.elapsed());
        }
        times.sort();
        let median = times[times.len() / 2];
        println!(
            "guest score call, {}: median {:.1} µs, p90 {:.1} µs over {} calls (compile {:.0} ms, first instance with the Go runtime started {:.0} ms); scores {out:?}",
            tier.as_str(),
            median.as_secs_f64() * 1e6,
            times[times.len() * 9 / 10].as_secs_f64() * 1e6,
            times.len(),
            compile.as_secs_f64() * 1e3,
            instantiate.as_secs_f64() * 1e3
        );
        per_call.push(median);
    }
    println!(
        "baseline / optimized per call: {:.2}x",
        per_call[1].as_secs_f64() / per_call[0].as_secs_f64()
    );
}

async fn swaps(module: &[u8], source: &Path, store: &Path, dir: &Path, samples: u32) {
    let server = ApiServer::new(
        Store::open(&dir.join("etcd")).expect("store"),
        ServerOptions::default(),
    );
    let settings = Settings {
        ready_delay: Duration::from_millis(100),
        backends: backends(store, source),
        ..Settings::default()
    };
    let running = flotilla_controller::start_embedded(
        server.router(),
        flotilla_controller::Embedded {
            members: 2,
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers");
    let c = client::in_process(server.router(), None, None);
    let v0 = version(module, 0);
    std::fs::write(source.join("v0.wasm"), &v0).expect("write");
    let t = Instant::now();
    apply(
        &api(&c, "flotilla.dev/v1alpha1", "WasmPlugin"),
        plugin("v0.wasm"),
    )
    .await;
    apply(
        &api(&c, "flotilla.dev/v1alpha1", "SchedulerProfile"),
        json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "gpu"},
               "spec": {"scores": [{"name": "ClusterLocality"}, {"name": "ClusterAffinity"}, {"name": "gpu-score", "wasm": {"plugin": "gpu"}}]}}),
    )
    .await;
    apply(
        &api(&c, "policy.karmada.io/v1alpha1", "PropagationPolicy"),
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "swap", "namespace": "default"},
               "spec": {"schedulerName": "gpu",
                        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "swap"}}}],
                        "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}, "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}),
    )
    .await;
    wait_loaded(&c, &sha(&v0)).await;
    println!(
        "  first load (compile, nothing cached): {:.0} ms; optimized code serving {:.0} ms later",
        t.elapsed().as_secs_f64() * 1e3,
        wait_optimized().await.as_secs_f64() * 1e3
    );

    let deployments = api(&c, "apps/v1", "Deployment");
    let mut n = 0u32;
    let mut latencies = Vec::new();
    for s in 1..=samples {
        let next = version(module, s);
        let digest = sha(&next);
        let file = format!("v{s}.wasm");
        std::fs::write(source.join(&file), &next).expect("write");
        let want = format!("gpu=sha256:{digest}");
        let changed = Instant::now();
        apply(
            &api(&c, "flotilla.dev/v1alpha1", "WasmPlugin"),
            plugin(&file),
        )
        .await;
        let changed_at = changed.elapsed();
        let serving = json!(format!("sha256:{digest}"));
        let mut loaded = None;
        // Templates keep arriving; the sample ends at the first placement by the new version.
        let latency = loop {
            if loaded.is_none() {
                let o = api(&c, "flotilla.dev/v1alpha1", "WasmPlugin")
                    .get("gpu")
                    .await
                    .expect("get");
                if o.data.pointer("/status/servingDigest") == Some(&serving) {
                    loaded = Some(changed.elapsed() - changed_at);
                }
            }
            n += 1;
            deployments
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(deployment(&format!("d{n}"))).expect("object"),
                )
                .await
                .expect("create");
            if placed_by(&c).await.contains(&want) {
                break changed.elapsed() - changed_at;
            }
            assert!(
                changed.elapsed() < Duration::from_secs(300),
                "no placement by the new version"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        wait_optimized().await;
        let optimized = changed.elapsed() - changed_at;
        println!(
            "  swap {s}: status servingDigest new after {:.0} ms, first placement by the new version {:.0} ms after the update; optimized code serving after {:.0} ms (load average {})",
            loaded.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
            latency.as_secs_f64() * 1e3,
            optimized.as_secs_f64() * 1e3,
            loadavg()
        );
        latencies.push(latency);
    }
    latencies.sort();
    println!(
        "swap latency (update -> first placement by the new version): median {:.0} ms, max {:.0} ms over {} swaps",
        latencies[latencies.len() / 2].as_secs_f64() * 1e3,
        latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        latencies.len()
    );
    drop(running);
}

/// A restart: a new registry over the same store loads the last version from the compiled cache;
/// then the same with the cache emptied (a compile).
fn restart(module: &[u8], source: &Path, store: &Path) {
    let last = std::fs::read_dir(source)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .max_by_key(|n| {
            n.trim_start_matches('v')
                .trim_end_matches(".wasm")
                .parse::<u32>()
                .unwrap_or(0)
        })
        .expect("a version");
    let _ = module;
    let objects = |file: &str| {
        (
            vec![Object {
                name: "gpu".into(),
                generation: Some(1),
                spec: plugin(file)["spec"].clone(),
            }],
            vec![Object {
                name: "gpu".into(),
                generation: Some(1),
                spec: json!({"scores": [{"name": "gpu-score", "wasm": {"plugin": "gpu"}}]}),
            }],
        )
    };
    let (wp, profiles) = objects(&last);
    let cached = {
        let registry = Registry::new(backends(store, source));
        let t = Instant::now();
        let r = registry.sync(&wp, &profiles);
        assert!(r.profiles["gpu"].error.is_none(), "{r:?}");
        t.elapsed()
    };
    let compiled_dir: PathBuf = store.join("compiled");
    std::fs::remove_dir_all(&compiled_dir).expect("empty the cache");
    let host = flotilla_wasm::Host::global().expect("host");
    let baseline_compiles = host.tiering().baseline_compiles;
    let (cold, optimized) = {
        let registry = Registry::new(backends(store, source));
        let t = Instant::now();
        let r = registry.sync(&wp, &profiles);
        assert!(r.profiles["gpu"].error.is_none(), "{r:?}");
        let cold = t.elapsed();
        // Served by baseline code until Cranelift is done (keep the registry until then).
        loop {
            let s = host.tiering();
            if s.serving_baseline == 0 && s.pending == 0 {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(300), "{s:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        (cold, t.elapsed())
    };
    println!(
        "restart (registry sync of the last version): {:.0} ms from the compiled cache, {:.0} ms compiling ({}; optimized code serving after {:.0} ms)",
        cached.as_secs_f64() * 1e3,
        cold.as_secs_f64() * 1e3,
        if host.tiering().baseline_compiles > baseline_compiles {
            "baseline tier"
        } else {
            "optimized only"
        },
        optimized.as_secs_f64() * 1e3
    );
}
