//! Full scheduling cycle (5 filters, 2 scores, estimator, spread selection, assigner) at 1,000
//! clusters: the native built-ins vs the same profile with the `ClusterAffinity` filter and the
//! `StaticWeight` assigner replaced by their Wasm builds (plugins/wasm, built from source here).
//! Both sides keep the same per-generation memo (verdict per affinity, weight per rule list), so
//! the comparison is equal work.
//!
//! `cargo bench -p flotilla-wasm --bench cycle`
//! (needs Debian's rustc-web toolchain, see sdk/ABI.md). The fixtures are those of
//! `plugins/benches/schedule.rs`.
//!
//! On a shared machine single passes swing with the load, so the interleaved measurement (native
//! and Wasm alternating on the same batches of 100 bindings) is the one to compare.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus};
use flotilla_core::framework::{FilterPlugin, Profile, Slot};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::profile::{ExtensionPoint, PluginSpec, WasmSource};
use flotilla_core::scheduler::schedule;
use flotilla_wasm::WasmFactory;

#[path = "../tests/common/guests.rs"]
mod guests;

#[path = "../../../plugins/benches/common/fixtures.rs"]
mod fixtures;
use fixtures::{binding, clusters};

fn wasm_profile() -> Profile {
    let dir = guests::built().expect("the Wasm built-ins (Debian rustc-web toolchain)");
    let load = |file: &str, name: &str, point| {
        let path = dir.join(file);
        let spec = PluginSpec {
            name: name.into(),
            wasm: Some(WasmSource {
                path: path.display().to_string(),
                sha256: None,
                plugin: None,
            }),
            ..Default::default()
        };
        let start = Instant::now();
        let plugin = Arc::new(WasmFactory::new().load(point, &spec, &path).expect("load"));
        eprintln!("{file}: compiled and instantiated in {:?}", start.elapsed());
        plugin
    };
    let filter = load(
        "flotilla_wasm_cluster_affinity.wasm",
        "ClusterAffinity",
        ExtensionPoint::Filter,
    );
    let assign = load(
        "flotilla_wasm_static_weight.wasm",
        "StaticWeight",
        ExtensionPoint::Assign,
    );
    let mut p = flotilla_plugins::default_profile();
    for s in &mut p.filters {
        if s.plugin.name() == "ClusterAffinity" {
            *s = Slot::new(Arc::clone(&filter) as Arc<dyn FilterPlugin>);
        }
    }
    for s in &mut p.assigners {
        if s.plugin.name() == "StaticWeight" {
            *s = Slot::new(Arc::clone(&assign) as _);
        }
    }
    p
}

fn pass(
    profile: &Profile,
    set: &Snapshot,
    bindings: &[(ResourceBindingSpec, ResourceBindingStatus)],
) -> (Duration, usize) {
    let start = Instant::now();
    let ok = bindings
        .iter()
        .filter(|(s, st)| schedule(set, profile, s, st, None, None).outcome.is_ok())
        .count();
    (start.elapsed() / bindings.len() as u32, ok)
}

/// Native and Wasm on the same 100 bindings back to back, `pairs` times over `bindings` (which of
/// the two goes first alternates), so that both sides of each pair see the same machine load; the
/// medians of the per-binding times and of the per-pair ratios, and the ratios' interquartile range.
fn interleaved(
    native: &Profile,
    wasm: &Profile,
    set: &Snapshot,
    bindings: &[(ResourceBindingSpec, ResourceBindingStatus)],
    pairs: usize,
) -> (Duration, Duration, [f64; 3]) {
    const BATCH: usize = 100;
    let (mut n, mut w, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..pairs {
        let start = (k * BATCH) % (bindings.len() - BATCH);
        let batch = &bindings[start..start + BATCH];
        let (tn, tw) = if k % 2 == 0 {
            let tn = pass(native, set, batch).0;
            (tn, pass(wasm, set, batch).0)
        } else {
            let tw = pass(wasm, set, batch).0;
            (pass(native, set, batch).0, tw)
        };
        n.push(tn);
        w.push(tw);
        r.push(tw.as_secs_f64() / tn.as_secs_f64());
    }
    n.sort();
    w.sort();
    r.sort_by(f64::total_cmp);
    let q = |p: usize| r[(r.len() - 1) * p / 4];
    (n[n.len() / 2], w[w.len() / 2], [q(1), q(2), q(3)])
}

fn bench(c: &mut Criterion) {
    let native = flotilla_plugins::default_profile();
    let wasm = wasm_profile();
    let owned = clusters(1000);
    let set = Snapshot::new(owned, Arc::default(), Options::default());
    let mixed: Vec<_> = (0..2000).map(binding).collect();
    let weighted: Vec<_> = (0..8000)
        .map(binding)
        .filter(|_| true)
        .skip(1)
        .step_by(4)
        .collect();
    // Identical results first.
    for (s, st) in mixed.iter().chain(&weighted).take(400) {
        assert_eq!(
            schedule(&set, &native, s, st, None, None),
            schedule(&set, &wasm, s, st, None, None),
            "native and wasm disagree"
        );
    }
    // For profiling one side: `FLOTILLA_BENCH_ONLY=native|wasm` runs only that profile on the
    // static-weight bindings for `FLOTILLA_BENCH_SECONDS` (default 20) and stops; `pairs` runs only
    // the static-weight interleaved pairs.
    if let Ok(only) = std::env::var("FLOTILLA_BENCH_ONLY") {
        if only == "pairs" {
            let (n, w, [p25, p50, p75]) = interleaved(&native, &wasm, &set, &weighted, 100);
            eprintln!(
                "pairs, static weight: native {n:?}, wasm {w:?}: ratio median {p50:.2} (p25 {p25:.2}, p75 {p75:.2})"
            );
            return;
        }
        let profile = match only.as_str() {
            "native" => &native,
            "wasm" => &wasm,
            other => panic!("FLOTILLA_BENCH_ONLY={other}: expected native, wasm or pairs"),
        };
        let secs = std::env::var("FLOTILLA_BENCH_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20);
        let until = Instant::now() + Duration::from_secs(secs);
        let mut times = Vec::new();
        while Instant::now() < until {
            times.push(pass(profile, &set, &weighted[..1000]).0);
        }
        times.sort();
        eprintln!(
            "{only} only, static weight: median {:?}/binding over {} passes of 1,000",
            times[times.len() / 2],
            times.len()
        );
        return;
    }
    // Warm up (cluster set pushed into each warm instance once), then one pass each, twice.
    let _ = pass(&wasm, &set, &mixed[..50]);
    for round in 1..=2 {
        for (label, bindings) in [("mixed strategies", &mixed), ("static weight", &weighted)] {
            let (n, ok_n) = pass(&native, &set, bindings);
            let (w, ok_w) = pass(&wasm, &set, bindings);
            eprintln!(
                "round {round}, {} bindings ({label}) x 1000 clusters: native {n:?}/binding, wasm {w:?}/binding, ratio {:.2} ({ok_n}/{ok_w} scheduled)",
                bindings.len(),
                w.as_secs_f64() / n.as_secs_f64()
            );
        }
    }
    for (label, bindings) in [("mixed strategies", &mixed), ("static weight", &weighted)] {
        let (n, w, [p25, p50, p75]) = interleaved(&native, &wasm, &set, bindings, 200);
        eprintln!(
            "interleaved, 200 pairs of 100 bindings ({label}): native {n:?}/binding, wasm {w:?}/binding (medians), \
             ratio median {p50:.2} (p25 {p25:.2}, p75 {p75:.2})"
        );
    }
    let mut g = c.benchmark_group("cycle_1000_clusters");
    g.sample_size(10);
    for (name, profile) in [("native", &native), ("wasm", &wasm)] {
        g.bench_function(format!("{name}_static_weight_batch_of_100"), |b| {
            let mut i = 0;
            b.iter(|| {
                for _ in 0..100 {
                    let (s, st) = &weighted[i % weighted.len()];
                    std::hint::black_box(schedule(&set, profile, s, st, None, None));
                    i += 1;
                }
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
