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

/// The `flotilla` binary's allocator, so the control plane here allocates as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    build_go(dir, 100)
}

/// go-gpu-scorer (with the extra packages) built into `dir`, its scores scaled by `scale` %
/// instead of 100: another `scale` is a change of the guest's own code.
fn build_go(dir: &Path, scale: u32) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = dir.join(format!("go-{scale}"));
    std::fs::create_dir_all(&src).expect("dir");
    let example = root.join("examples/plugins/go-gpu-scorer");
    let main = std::fs::read_to_string(example.join("main.go")).expect("main.go");
    let scorer = "int64(100 * gpus(c) / best)";
    assert!(main.contains(scorer), "the example's scorer changed");
    std::fs::write(
        src.join("main.go"),
        main.replace(scorer, &format!("int64({scale} * gpus(c) / best)")),
    )
    .expect("main.go");
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
    let out = dir.join(format!("module-{scale}.wasm"));
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

/// As the CLI wires them: compiled modules in `<store>/compiled`, module directory files
/// compiled ahead into it.
fn backends(store: &Path, source: &Path) -> Backends {
    let wasm = Arc::new(flotilla_wasm::WasmFactory::with_cache_dir(
        store.join("compiled"),
    ));
    let precompile: flotilla_controller::controller::plugins::Precompile = {
        let wasm = Arc::clone(&wasm);
        Arc::new(move |bytes: &[u8]| wasm.precompile(bytes).map_err(|e| e.to_string()))
    };
    Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            wasm as Arc<dyn flotilla_core::profile::PluginFactory>,
        ]),
        module_dir: Some(store.to_path_buf()),
        module_source_dir: Some(source.to_path_buf()),
        precompile: Some(precompile),
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
    // `RUST_LOG=flotilla_wasm=debug,flotilla_controller::controller::plugins=debug`: where a
    // swap's time goes (registry phases, read/compile/instantiate, tiers).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let samples: u32 = knob("FLOTILLA_BENCH_SAMPLES", 5);
    let code_samples: u32 = knob("FLOTILLA_BENCH_CODE_SAMPLES", 3);
    let ahead: u32 = knob("FLOTILLA_BENCH_AHEAD_SAMPLES", 2);
    let tmp = tempfile::tempdir().expect("tempdir");
    let module = go_module(tmp.path());
    // Versions whose scorer scales by 99 %, 98 %, ...: the guest's own code changed.
    let changed: Vec<Vec<u8>> = if std::env::var_os("FLOTILLA_BENCH_MODULE").is_some() {
        Vec::new()
    } else {
        (0..code_samples.min(50))
            .map(|i| build_go(tmp.path(), 99 - i))
            .collect()
    };
    let source = tmp.path().join("modules");
    std::fs::create_dir_all(&source).expect("dir");
    let store = tmp.path().join("store");
    println!(
        "plugin swap bench: a {:.1} MB Go module, {samples} swaps of the same code, {} of changed code, {ahead} compiled ahead; load average {}",
        module.len() as f64 / 1e6,
        changed.len(),
        loadavg()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let last = rt.block_on(swaps(
        &module,
        &changed,
        ahead,
        (&source, &store, tmp.path()),
        samples,
    ));
    // The controllers' tasks hold the last module; with them gone the restart below neither
    // finds it in the process-wide host (modules are shared by digest while in use) nor skips
    // the compile it means to time.
    drop(rt);
    restart(&last, &source, &store);
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

/// The first load, then `samples` swaps to the same code under a new digest, one per module of
/// `changed` (the guest's code changed), and `ahead` swaps to a file placed and compiled ahead
/// before the update.
async fn swaps(
    module: &[u8],
    changed: &[Vec<u8>],
    ahead: u32,
    (source, store, dir): (&Path, &Path, &Path),
    samples: u32,
) -> String {
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

    let mut swap = Swapper {
        c: c.clone(),
        source: source.to_path_buf(),
        n: 0,
        file: 0,
    };
    let report = |what: &str, mut latencies: Vec<Duration>| {
        latencies.sort();
        if let Some(max) = latencies.last() {
            println!(
                "swap latency, {what} (update -> first placement by the new version): median {:.0} ms, max {:.0} ms over {} swaps",
                latencies[latencies.len() / 2].as_secs_f64() * 1e3,
                max.as_secs_f64() * 1e3,
                latencies.len()
            );
        }
    };
    let mut latencies = Vec::new();
    for s in 1..=samples {
        latencies.push(
            swap.once(
                "same code, another custom section",
                &version(module, s),
                false,
            )
            .await,
        );
    }
    report("same code (another custom section)", latencies);
    let mut latencies = Vec::new();
    for (i, m) in changed.iter().enumerate() {
        latencies.push(
            swap.once(
                "scorer constant changed",
                &version(m, 1000 + i as u32),
                false,
            )
            .await,
        );
    }
    report("the guest's code changed (scorer constant)", latencies);
    let mut latencies = Vec::new();
    for s in 1..=ahead {
        latencies.push(
            swap.once(
                "file placed first, compiled ahead",
                &version(module, 2000 + s),
                true,
            )
            .await,
        );
    }
    report(
        "module file placed before the update and compiled ahead",
        latencies,
    );
    drop(running);
    format!("s{}.wasm", swap.file)
}

/// Swaps the `gpu` plugin to new module versions while templates keep arriving.
struct Swapper {
    c: Client,
    source: PathBuf,
    /// Deployments created.
    n: u32,
    /// Module files written.
    file: u32,
}

impl Swapper {
    /// Write `next` into the module directory, update the `WasmPlugin` to it (after the file was
    /// compiled ahead, with `ahead`) and create a Deployment about every 20 ms until one is
    /// placed by the new version: the time from the update to that placement.
    async fn once(&mut self, what: &str, next: &[u8], ahead: bool) -> Duration {
        let host = flotilla_wasm::Host::global().expect("host");
        let digest = sha(next);
        self.file += 1;
        let file = format!("s{}.wasm", self.file);
        let precompiled = host.tiering().precompiled;
        let written = Instant::now();
        std::fs::write(self.source.join(&file), next).expect("write");
        if ahead {
            while host.tiering().precompiled == precompiled {
                assert!(
                    written.elapsed() < Duration::from_secs(120),
                    "the module file was never compiled ahead"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let ahead_after = written.elapsed();
        let before = host.tiering();
        let want = format!("gpu=sha256:{digest}");
        let changed = Instant::now();
        apply(
            &api(&self.c, "flotilla.dev/v1alpha1", "WasmPlugin"),
            plugin(&file),
        )
        .await;
        let changed_at = changed.elapsed();
        let serving = json!(format!("sha256:{digest}"));
        let mut loaded = None;
        let deployments = api(&self.c, "apps/v1", "Deployment");
        // Templates keep arriving; the sample ends at the first placement by the new version.
        let latency = loop {
            if loaded.is_none() {
                let o = api(&self.c, "flotilla.dev/v1alpha1", "WasmPlugin")
                    .get("gpu")
                    .await
                    .expect("get");
                if o.data.pointer("/status/servingDigest") == Some(&serving) {
                    loaded = Some(changed.elapsed() - changed_at);
                }
            }
            self.n += 1;
            deployments
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(deployment(&format!("d{}", self.n))).expect("object"),
                )
                .await
                .expect("create");
            if placed_by(&self.c).await.contains(&want) {
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
        let after = host.tiering();
        let path = if after.baseline_compiles > before.baseline_compiles {
            "baseline first"
        } else {
            "compiled-module cache"
        };
        let ahead = if ahead {
            format!(
                " (compiled ahead {:.0} ms after the file was written)",
                ahead_after.as_secs_f64() * 1e3
            )
        } else {
            String::new()
        };
        println!(
            "  swap, {what}{ahead}: {path}; status servingDigest new after {:.0} ms, first placement by the new version {:.0} ms after the update; optimized code serving after {:.0} ms (load average {})",
            loaded.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3),
            latency.as_secs_f64() * 1e3,
            optimized.as_secs_f64() * 1e3,
            loadavg()
        );
        latency
    }
}

/// A restart: a new registry over the same store loads the last version (module file `last`)
/// from the compiled cache; then the same with the cache emptied and the incremental cache
/// forgotten, as a new process without the cache directory has neither (a compile).
fn restart(last: &str, source: &Path, store: &Path) {
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
    let (wp, profiles) = objects(last);
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
    host.forget_incremental();
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
