//! Live scheduling throughput: the shipped control plane (embedded API server, store on disk,
//! every controller, in process) schedules generated workloads over 1,000 member clusters, and
//! Karmada's own scheduler core (the Go oracle in `tests/karmada-diff`) schedules the same
//! bindings over the same clusters in the same run.
//!
//!     cargo bench -p flotilla-tests --bench live_scheduling
//!
//! Reported: bindings/s from the first template created to the last binding scheduled (detector,
//! scheduler controller and API writes all included), the scheduler controller's per-binding
//! decision time (`flotilla_scheduling_duration_seconds`: the pipeline's `decide` against the
//! shared snapshot, as the controller runs it), and Karmada's per-binding time on identical
//! inputs. Environment: `FLOTILLA_BENCH_CLUSTERS` (default 1000), `FLOTILLA_BENCH_BINDINGS`
//! (default 2000), `FLOTILLA_BENCH_SECONDS` (Karmada's measuring time, default 3),
//! `KARMADA_DIFF_BIN` (a prebuilt oracle; otherwise `go build` runs).
//!
//! With `FLOTILLA_BENCH_WASM=1` (needs Debian's rustc-web toolchain, see sdk/ABI.md) the same
//! bindings are then scheduled a second time, under new names, by a `SchedulerProfile` whose
//! `ClusterAffinity` filter and `StaticWeight` assigner are the Wasm builds of the built-ins
//! (plugins/wasm, loaded through `WasmPlugin` objects as a user would): equal work through the
//! scheduler controller, native vs Wasm, in one process. The Wasm builds run under their own
//! names in that profile (`WasmClusterAffinity`, `WasmStaticWeight`), so the per-plugin call
//! times (`flotilla_plugin_duration_seconds`, wall) of the two builds are reported apart, with the
//! Wasm host's instance and cluster-set push counts for the phase.

/// The `flotilla` binary's allocator, so the control plane here allocates as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/diffsupport/mod.rs"]
mod diffsupport;
#[path = "../../engine/wasm/tests/common/guests.rs"]
mod guests;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use diffsupport::scenarios;
use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::{Embedded, Settings, api_resource, client};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn api(c: &Client, api_version: &str, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let res = api_resource(api_version, kind);
    match namespace {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &res),
        None => Api::all_with(c.clone(), &res),
    }
}

async fn apply_all(c: &Client, objects: Vec<Value>) {
    use futures::StreamExt as _;
    futures::stream::iter(objects)
        .for_each_concurrent(32, |o| {
            let c = c.clone();
            async move {
                let s = |p: &str| {
                    o.pointer(p)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                let ns = s("/metadata/namespace");
                let a = api(
                    &c,
                    &s("/apiVersion"),
                    &s("/kind"),
                    (!ns.is_empty()).then_some(ns.as_str()),
                );
                a.patch(
                    &s("/metadata/name"),
                    &PatchParams::apply("bench").force(),
                    &Patch::Apply(&o),
                )
                .await
                .expect("apply");
                if o.get("status").is_some() && s("/kind") == "Cluster" {
                    a.patch_status(
                        &s("/metadata/name"),
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": o["status"]})),
                    )
                    .await
                    .expect("status");
                }
            }
        })
        .await;
}

fn main() {
    let clusters_n: usize = env_or("FLOTILLA_BENCH_CLUSTERS", 1000);
    let bindings: u64 = env_or("FLOTILLA_BENCH_BINDINGS", 2000);
    let seconds: f64 = env_or("FLOTILLA_BENCH_SECONDS", 3.0);
    let seed: u64 = env_or("FLOTILLA_BENCH_SEED", 42);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");

    let (live, specs, clusters, wasm) = rt.block_on(async {
        let store = Store::open(&dir.path().join("store")).expect("store opens");
        let server = ApiServer::new(store, ServerOptions::default());
        let mut settings = Settings::default();
        settings.backends.factories = flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            Arc::new(flotilla_wasm::WasmFactory::new()),
        ]);
        settings.backends.module_dir = Some(dir.path().join("modules"));
        // WasmPlugin objects name the built guests relative to their directory.
        settings.backends.module_source_dir = guests::built();
        let opts = Embedded {
            members: 0,
            settings,
            ..Default::default()
        };
        let running = flotilla_controller::start_embedded(server.router(), opts)
            .await
            .expect("controllers start");
        let ctx = Arc::clone(&running.context);
        let c = client::in_process(server.router(), None, None);

        let clusters: Vec<Value> = scenarios::clusters_for(
            seed,
            0,
            scenarios::Shape {
                clusters: Some(clusters_n),
                models: false,
            },
        )
        .into_iter()
        .map(scenarios::ready_member)
        .collect();
        let names: Vec<String> = clusters
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap_or("").to_owned())
            .collect();
        apply_all(&c, clusters.clone()).await;
        let with_wasm = env_or("FLOTILLA_BENCH_WASM", 0u8) == 1;
        if with_wasm {
            wasm_setup(&c).await;
        }
        // The cluster controller's taint writes settle before any binding.
        tokio::time::sleep(Duration::from_secs(3)).await;

        let workloads: Vec<Value> = (0..bindings)
            .map(|i| scenarios::workload_for(seed, 2_000_000 + i, &names))
            .collect();
        apply_all(
            &c,
            workloads
                .iter()
                .enumerate()
                .map(|(i, w)| scenarios::propagation_policy(i as u64, &w["placement"]))
                .collect(),
        )
        .await;
        let before = decided(&ctx);
        let (count0, micros0, cpu0) = (
            ctx.metrics.scheduling.count(),
            ctx.metrics.scheduling.micros(),
            ctx.metrics.scheduling_cpu.micros(),
        );
        let calls0 = plugin_calls(&ctx);
        // The native profile's decisions over the whole run, re-decisions included (most of them
        // fall after this phase), to compare with the Wasm profile's likewise.
        let native_profile = ctx
            .metrics
            .profile_cpu(flotilla_api::labels::DEFAULT_SCHEDULER)
            .expect("a series for the profile");
        let native0 = (native_profile.count(), native_profile.micros());
        let started = Instant::now();
        apply_all(
            &c,
            workloads
                .iter()
                .enumerate()
                .map(|(i, w)| scenarios::deployment(i as u64, w, json!({})))
                .collect(),
        )
        .await;
        let created = started.elapsed();
        while decided(&ctx) - before < bindings {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "{} of {bindings} bindings decided after 600 s",
                decided(&ctx) - before
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wall = started.elapsed();
        let count = ctx.metrics.scheduling.count() - count0;
        let micros = ctx.metrics.scheduling.micros() - micros0;
        let cpu = ctx.metrics.scheduling_cpu.micros() - cpu0;
        let calls = since(calls0, plugin_calls(&ctx));
        let outcomes = outcomes(&ctx);
        for (n, what) in failures(&c, |n| index(n).is_some_and(|i| i < bindings))
            .await
            .iter()
            .take(6)
        {
            println!("  not scheduled (native profile): {n} × {what}");
        }

        // The live bindings, as Karmada's scheduler gets them.
        let rbs = api(&c, "work.karmada.io/v1alpha2", "ResourceBinding", None)
            .list(&Default::default())
            .await
            .expect("list");
        let specs: Vec<Value> = rbs
            .items
            .iter()
            .map(|rb| {
                let mut spec = rb.data["spec"].clone();
                if let Some(s) = spec.as_object_mut() {
                    s.remove("clusters");
                }
                spec
            })
            .collect();
        let stored: Vec<Value> = api(&c, "cluster.karmada.io/v1alpha1", "Cluster", None)
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .iter()
            .map(|o| serde_json::to_value(o).expect("json"))
            .collect();
        let wasm = if with_wasm {
            let w = wasm_phase(&c, &ctx, &workloads, bindings, count).await;
            let native_all = (
                native_profile.count() - native0.0,
                native_profile.micros() - native0.1,
            );
            Some((w, native_all))
        } else {
            None
        };
        (
            (wall, created, count, micros, cpu, outcomes, calls),
            specs,
            stored,
            wasm,
        )
    });
    let (wall, created, count, micros, cpu, outcomes, calls) = live;

    let per_binding_us = micros as f64 / count.max(1) as f64;
    let cpu_us = cpu as f64 / count.max(1) as f64;
    println!(
        "\nlive scheduling through the scheduler controller ({clusters_n} clusters, {bindings} bindings)"
    );
    println!(
        "  templates created in {:.2} s; all bindings decided after {:.2} s: {:.0} bindings/s end to end",
        created.as_secs_f64(),
        wall.as_secs_f64(),
        bindings as f64 / wall.as_secs_f64()
    );
    println!("  outcomes: {outcomes:?}");
    println!(
        "  scheduler controller, per-binding decision over {count} decisions: {cpu_us:.1} µs CPU, {per_binding_us:.1} µs wall (sharing 2 cores with the rest of the pipeline)"
    );

    // Karmada's core on a sample of the same bindings over the same clusters (every scenario line
    // carries the whole cluster set, so the sample keeps the oracle's memory bounded).
    let sample: u64 = env_or("FLOTILLA_BENCH_KARMADA_SAMPLE", 64);
    let step = (specs.len() / sample.max(1) as usize).max(1);
    let bin =
        diffsupport::oracle_binary().unwrap_or_else(|e| panic!("Karmada oracle unavailable: {e}"));
    let karmada = diffsupport::Karmada::start(&bin).expect("start oracle");
    let file =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-live-{clusters_n}.jsonl"));
    let lines: Vec<String> = specs
        .iter()
        .step_by(step)
        .enumerate()
        .map(|(i, spec)| {
            json!({"name": format!("live-{i}"), "spec": spec, "status": {}, "clusters": clusters})
                .to_string()
        })
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").expect("write scenarios");
    let out = Command::new(&bin)
        .args(["bench", "-min", &format!("{seconds}s")])
        .arg(&file)
        .output()
        .expect("run oracle bench");
    assert!(
        out.status.success(),
        "oracle bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("bench json");
    let karmada_ns = v["nsPerBinding"].as_f64().expect("nsPerBinding");
    let _ = std::fs::remove_file(&file);

    println!(
        "  Karmada's scheduler core ({}), {} of the same bindings, same clusters: {:.1} µs per binding",
        karmada.version,
        lines.len(),
        karmada_ns / 1000.0
    );
    println!(
        "  ratio (Karmada / flotilla live CPU per binding): {:.1}×",
        karmada_ns / 1000.0 / cpu_us
    );
    let per_call = |(n, us): (u64, u64)| us as f64 / n.max(1) as f64;
    println!(
        "  native plugin calls (wall): ClusterAffinity {:.1} µs × {}, StaticWeight {:.1} µs × {}",
        per_call(calls[0]),
        calls[0].0,
        per_call(calls[1]),
        calls[1].0
    );
    if let Some((
        ((first_n, first_us), (n, wasm_cpu_us), wasm_outcomes, wasm_calls),
        (native_n, native_us),
    )) = wasm
    {
        println!(
            "  Wasm plugin calls (wall): ClusterAffinity {:.1} µs × {} ({:.2}× native), StaticWeight {:.1} µs × {} ({:.2}× native); native calls meanwhile: {} and {}",
            per_call(wasm_calls[2]),
            wasm_calls[2].0,
            per_call(wasm_calls[2]) / per_call(calls[0]),
            per_call(wasm_calls[3]),
            wasm_calls[3].0,
            per_call(wasm_calls[3]) / per_call(calls[1]),
            wasm_calls[0].0,
            wasm_calls[1].0
        );
        println!(
            "  the same bindings again with the Wasm ClusterAffinity and StaticWeight (profile wasm-builtins): {wasm_cpu_us:.1} µs CPU per decision over its {n} decisions; outcomes {wasm_outcomes:?}"
        );
        let native_all_us = native_us as f64 / native_n.max(1) as f64;
        println!(
            "  each profile over all its decisions in the run (re-decisions included): native {native_all_us:.1} µs over {native_n}, Wasm {wasm_cpu_us:.1} µs over {n} ({:.2}×)",
            wasm_cpu_us / native_all_us
        );
        println!(
            "  Wasm / native CPU per decision through the scheduler controller, each profile's first {count} decisions: {first_us:.1} / {cpu_us:.1} µs = {:.2}× (Wasm side over {first_n})",
            first_us / cpu_us
        );
    }
}

/// The built-ins' Wasm builds as `WasmPlugin` objects and a profile `wasm-builtins` using them in
/// place of the native `ClusterAffinity` and `StaticWeight`, Ready before any binding exists (a
/// profile change re-triggers scheduling, which would mix the two runs).
async fn wasm_setup(c: &Client) {
    let dir = guests::built().expect("the Wasm built-ins (Debian rustc-web toolchain)");
    assert!(dir.is_dir());
    let module = |file: &str| json!({"path": file});
    let plugins = vec![
        json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": "cluster-affinity"},
               "spec": {"module": module("flotilla_wasm_cluster_affinity.wasm")}}),
        json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": "static-weight"},
               "spec": {"module": module("flotilla_wasm_static_weight.wasm")}}),
        json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "wasm-builtins"},
        "spec": {
            "filters": [{"name": "APIEnablement"}, {"name": "TaintToleration"},
                        {"name": WASM_FILTER, "wasm": {"plugin": "cluster-affinity"}},
                        {"name": "SpreadConstraint"}, {"name": "ClusterEviction"}],
            "assigners": [{"name": "Duplicated"},
                          {"name": WASM_ASSIGN, "wasm": {"plugin": "static-weight"}},
                          {"name": "DynamicWeight"}, {"name": "Aggregated"}],
        }}),
    ];
    apply_all(c, plugins).await;
    let profiles = api(c, "flotilla.dev/v1alpha1", "SchedulerProfile", None);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let p = profiles.get("wasm-builtins").await.expect("get profile");
        if p.data.pointer("/status/conditions/0/status") == Some(&json!("True")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "profile wasm-builtins not Ready: {:?}",
            p.data.get("status")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The same workloads under new names with the `wasm-builtins` profile. Returns the decisions
/// counted, their CPU time per decision (µs) and the outcomes.
async fn wasm_phase(
    c: &Client,
    ctx: &flotilla_controller::Context,
    workloads: &[Value],
    bindings: u64,
    first_decisions: u64,
) -> (
    (u64, f64),
    (u64, f64),
    [(&'static str, u64); 3],
    [(u64, u64); 4],
) {
    let before_outcomes = outcomes(ctx);
    let calls0 = plugin_calls(ctx);
    let (instances0, pushes0) = flotilla_wasm::instance_counts();
    let generation0 = ctx.snapshot().generation();
    // Which code the phase starts on: a module still served by the baseline compiler's code
    // (Cranelift compiling it in the background) would make the first decisions slower.
    let tiers0 = flotilla_wasm::Host::existing()
        .map(|h| h.tiering())
        .unwrap_or_default();
    let offset = bindings;
    apply_all(
        c,
        workloads
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut p = scenarios::propagation_policy(offset + i as u64, &w["placement"]);
                p["spec"]["schedulerName"] = json!("wasm-builtins");
                p
            })
            .collect(),
    )
    .await;
    let before = decided(ctx);
    // This profile's decisions only: re-decisions of the native phase's bindings also fall in
    // this phase.
    let profile = ctx
        .metrics
        .profile_cpu("wasm-builtins")
        .expect("a series for the profile");
    let all0 = ctx.metrics.scheduling.count();
    let (count0, cpu0) = (profile.count(), profile.micros());
    let started = Instant::now();
    apply_all(
        c,
        workloads
            .iter()
            .enumerate()
            .map(|(i, w)| scenarios::deployment(offset + i as u64, w, json!({})))
            .collect(),
    )
    .await;
    // Every binding of this phase decided (profile changes also re-trigger earlier bindings, so
    // the decision counter alone does not tell).
    let rbs = api(c, "work.karmada.io/v1alpha2", "ResourceBinding", None);
    // The profile's first `first_decisions` decisions (as many as the native phase counted, which
    // ends on its count): the like-for-like figure, mostly first decisions on both sides.
    let mut first = None;
    loop {
        if first.is_none() {
            let n = profile.count() - count0;
            if n < first_decisions {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            first = Some((n, profile.micros() - cpu0));
        }
        let decided_here = if decided(ctx) - before < bindings {
            0
        } else {
            rbs.list(&Default::default())
                .await
                .expect("list")
                .items
                .iter()
                .filter(|rb| {
                    index(rb.metadata.name.as_deref().unwrap_or("")).is_some_and(|i| i >= offset)
                })
                .filter(|rb| {
                    rb.data
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Scheduled"))
                })
                .count() as u64
        };
        if decided_here >= bindings {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{decided_here} of {bindings} Wasm-profile bindings decided after 600 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (n, what) in failures(c, |n| index(n).is_some_and(|i| i >= offset))
        .await
        .iter()
        .take(6)
    {
        println!("  not scheduled (wasm-builtins profile): {n} × {what}");
    }
    let n = profile.count() - count0;
    let cpu = profile.micros() - cpu0;
    let others = (ctx.metrics.scheduling.count() - all0).saturating_sub(n);
    let (instances, pushes) = flotilla_wasm::instance_counts();
    println!(
        "  Wasm phase: {others} decisions of other profiles (not counted), {} instances created, {} cluster sets pushed; snapshot generation {generation0} -> {}; at its start {} module(s) on baseline code ({} baseline and {} optimized compiles so far)",
        instances - instances0,
        pushes - pushes0,
        ctx.snapshot().generation(),
        tiers0.serving_baseline,
        tiers0.baseline_compiles,
        tiers0.optimized,
    );
    let after = outcomes(ctx);
    let delta = [0, 1, 2].map(|k| (after[k].0, after[k].1 - before_outcomes[k].1));
    let (first_n, first_cpu) = first.unwrap_or((0, 0));
    (
        (first_n, first_cpu as f64 / first_n.max(1) as f64),
        (n, cpu as f64 / n.max(1) as f64),
        delta,
        since(calls0, plugin_calls(ctx)),
    )
}

/// Scheduled=False bindings by reason and message (first 90 characters), most frequent first.
async fn failures(c: &Client, names: impl Fn(&str) -> bool) -> Vec<(usize, String)> {
    let rbs = api(c, "work.karmada.io/v1alpha2", "ResourceBinding", None)
        .list(&Default::default())
        .await
        .expect("list");
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for rb in &rbs.items {
        if !names(rb.metadata.name.as_deref().unwrap_or("")) {
            continue;
        }
        let conds = rb
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array);
        for cond in conds.into_iter().flatten() {
            if cond["type"] == "Scheduled" && cond["status"] == "False" {
                let msg: String = cond["message"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(90)
                    .collect();
                *by.entry(format!("{}: {msg}", cond["reason"].as_str().unwrap_or("")))
                    .or_default() += 1;
            }
        }
    }
    let mut v: Vec<(usize, String)> = by.into_iter().map(|(k, n)| (n, k)).collect();
    v.sort_by(|a, b| b.cmp(a));
    v
}

/// Profile names of the Wasm builds, so that their calls are timed apart from the native ones.
const WASM_FILTER: &str = "WasmClusterAffinity";
const WASM_ASSIGN: &str = "WasmStaticWeight";

/// `(calls, µs)` so far of the native `ClusterAffinity` filter and `StaticWeight` assigner, then
/// of their Wasm builds (`flotilla_plugin_duration_seconds`: wall time of each call).
fn plugin_calls(ctx: &flotilla_controller::Context) -> [(u64, u64); 4] {
    let m = ctx.plugins.metrics();
    [
        m.latency("filter", "ClusterAffinity"),
        m.latency("assign", "StaticWeight"),
        m.latency("filter", WASM_FILTER),
        m.latency("assign", WASM_ASSIGN),
    ]
}

/// `after - before`, element-wise.
fn since(before: [(u64, u64); 4], after: [(u64, u64); 4]) -> [(u64, u64); 4] {
    std::array::from_fn(|i| (after[i].0 - before[i].0, after[i].1 - before[i].1))
}

/// Scheduling decisions so far (every result).
fn decided(ctx: &flotilla_controller::Context) -> u64 {
    outcomes(ctx).iter().map(|(_, n)| n).sum()
}

/// Scheduling decisions so far, by result.
fn outcomes(ctx: &flotilla_controller::Context) -> [(&'static str, u64); 3] {
    ["scheduled", "unschedulable", "error"].map(|r| (r, ctx.metrics.scheduling_results_of(r)))
}

/// The workload index of a binding named `app-<i>-deployment`.
fn index(binding: &str) -> Option<u64> {
    binding
        .strip_prefix("app-")
        .and_then(|r| r.split('-').next())
        .and_then(|i| i.parse().ok())
}
