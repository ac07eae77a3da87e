//! Full scheduling cycle (5 filters, 2 scores, estimator, spread selection, assigner) at 1,000
//! clusters: the native built-ins vs the same profile with the `ClusterAffinity` filter and the
//! `StaticWeight` assigner replaced by their Wasm builds (plugins/wasm, built from source here).
//!
//! `CARGO_TARGET_DIR=target-wasm cargo bench -p flotilla-wasm --bench cycle`
//! (needs Debian's rustc-web toolchain, see sdk/ABI.md). The fixtures are those of
//! `plugins/benches/schedule.rs`.
//!
//! On a shared machine single passes swing with the load, so the interleaved measurement (native
//! and Wasm alternating on the same batches of 100 bindings) is the one to compare.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus};
use flotilla_core::PluginError;
use flotilla_core::division::{self, Strategy};
use flotilla_core::framework::{
    AssignInput, AssignPlugin, Assignment, BindingContext, FilterInput, FilterPlugin, Plugin, Profile, Slot, Verdict,
};
use flotilla_core::profile::{ExtensionPoint, PluginSpec, WasmSource};
use flotilla_core::pipeline::{Options, Snapshot};
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
        let spec = PluginSpec { name: name.into(), wasm: Some(WasmSource { path: path.display().to_string(), sha256: None, plugin: None }), ..Default::default() };
        let start = Instant::now();
        let plugin = Arc::new(WasmFactory::new().load(point, &spec, &path).expect("load"));
        eprintln!("{file}: compiled and instantiated in {:?}", start.elapsed());
        plugin
    };
    let filter = load("flotilla_wasm_cluster_affinity.wasm", "ClusterAffinity", ExtensionPoint::Filter);
    let assign = load("flotilla_wasm_static_weight.wasm", "StaticWeight", ExtensionPoint::Assign);
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

/// The native built-ins with the Wasm guests' memo (plugins/wasm): per cluster-set generation, the
/// filter's verdict per distinct affinity and the static weight per rule list, clusters found by
/// their snapshot rows (`FilterInput::rows`, `ClusterDetail::row`). Not a product plugin: it only
/// shows how much of the Wasm/native gap is the memo (the native built-ins evaluate selectors for
/// every cluster and binding).
#[derive(Default)]
struct Memo {
    generation: u64,
    /// Clusters in the memoised set.
    len: usize,
    verdicts: HashMap<String, Vec<u8>>,
    weights: HashMap<String, Vec<i64>>,
}

impl Memo {
    /// Start over when the binding's cluster set is not the memoised one.
    fn sync(&mut self, b: &BindingContext<'_>) {
        let Some(s) = b.snapshot else { return };
        if s.generation != self.generation {
            self.generation = s.generation;
            self.len = s.clusters.len();
            self.verdicts.clear();
            self.weights.clear();
        }
    }
}

#[derive(Default)]
struct MemoNative(Mutex<Memo>);

impl Plugin for MemoNative {
    fn name(&self) -> &str {
        "MemoNative"
    }
}

impl FilterPlugin for MemoNative {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        const MISMATCH: &str = "cluster(s) did not match the placement cluster affinity constraint";
        let b = input.binding;
        let cel = flotilla_plugins::filter::affinity_cel(b.placement.cluster_affinity.as_ref(), b.affinity_term);
        let Some(rows) = input.rows.filter(|_| b.snapshot.is_some() && !flotilla_core::expression::has_cel(cel)) else {
            return flotilla_plugins::filter::ClusterAffinity.filter(input, out);
        };
        let key = serde_json::to_string(&(&b.placement.cluster_affinity, &b.affinity_term, b.is_workload())).unwrap_or_default();
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        memo.sync(b);
        let Memo { len, verdicts, .. } = &mut *memo;
        let v = verdicts.entry(key).or_insert_with(|| vec![0; *len]);
        for (c, &row) in input.clusters.iter().zip(rows) {
            let fit = match v.get_mut(row as usize) {
                Some(v) => {
                    if *v == 0 {
                        *v = if flotilla_plugins::filter::affinity_matches(b, c) { 1 } else { 2 };
                    }
                    *v == 1
                }
                None => flotilla_plugins::filter::affinity_matches(b, c),
            };
            out.push(if fit { Verdict::Fit } else { Verdict::unschedulable(MISMATCH) });
        }
        Ok(())
    }
}

impl AssignPlugin for MemoNative {
    fn assign(&self, input: &AssignInput<'_>) -> Result<Assignment, PluginError> {
        let b = input.binding;
        if b.snapshot.is_none() || division::strategy(b.placement).ok() != Some(Strategy::StaticWeight) {
            return flotilla_plugins::assign::StaticWeight.assign(input);
        }
        let rules = division::static_weight_rules(input);
        let key = serde_json::to_string(&rules).unwrap_or_default();
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        memo.sync(b);
        let Memo { len, weights, .. } = &mut *memo;
        let w = weights.entry(key).or_insert_with(|| vec![-1; *len]);
        Ok(division::static_weight_with(input, |c| {
            let compute = || rules.map_or(1, |r| division::rule_weight(r, c.cluster));
            match w.get_mut(c.row as usize) {
                Some(w) => {
                    if *w < 0 {
                        *w = compute();
                    }
                    *w
                }
                None => compute(),
            }
        }))
    }
}

/// The default profile with the two built-ins replaced by [`MemoNative`].
fn memo_native_profile() -> Profile {
    let filter = Arc::new(MemoNative::default());
    let assign = Arc::new(MemoNative::default());
    let mut p = flotilla_plugins::default_profile();
    for s in &mut p.filters {
        if s.plugin.name() == "ClusterAffinity" {
            *s = Slot::new(Arc::clone(&filter) as Arc<dyn FilterPlugin>);
        }
    }
    for s in &mut p.assigners {
        if s.plugin.name() == "StaticWeight" {
            *s = Slot::new(Arc::clone(&assign) as Arc<dyn AssignPlugin>);
        }
    }
    p
}

fn pass(profile: &Profile, set: &Snapshot, bindings: &[(ResourceBindingSpec, ResourceBindingStatus)]) -> (Duration, usize) {
    let start = Instant::now();
    let ok = bindings.iter().filter(|(s, st)| schedule(set, profile, s, st, None, None).outcome.is_ok()).count();
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
    let weighted: Vec<_> = (0..8000).map(binding).filter(|_| true).skip(1).step_by(4).collect();
    let memo_native = memo_native_profile();
    // Identical results first.
    for (s, st) in mixed.iter().chain(&weighted).take(400) {
        let a = schedule(&set, &native, s, st, None, None);
        let b = schedule(&set, &wasm, s, st, None, None);
        assert_eq!(a, b, "native and wasm disagree");
        assert_eq!(a, schedule(&set, &memo_native, s, st, None, None), "native and memoising native disagree");
    }
    // For profiling one side: `FLOTILLA_BENCH_ONLY=native|memo|wasm` runs only that profile on the
    // static-weight bindings for `FLOTILLA_BENCH_SECONDS` (default 20) and stops; `pairs` runs only
    // the static-weight interleaved pairs.
    if let Ok(only) = std::env::var("FLOTILLA_BENCH_ONLY") {
        if only == "pairs" {
            // Just the static-weight interleaved pairs, both comparisons (quick check).
            for (label, base) in [("native", &native), ("native+memo", &memo_native)] {
                let (n, w, [p25, p50, p75]) = interleaved(base, &wasm, &set, &weighted, 100);
                eprintln!("pairs, static weight: {label} {n:?}, wasm {w:?}: ratio median {p50:.2} (p25 {p25:.2}, p75 {p75:.2})");
            }
            return;
        }
        let profile = match only.as_str() {
            "native" => &native,
            "memo" => &memo_native,
            "wasm" => &wasm,
            other => panic!("FLOTILLA_BENCH_ONLY={other}: expected native, memo or wasm"),
        };
        let secs = std::env::var("FLOTILLA_BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
        let until = Instant::now() + Duration::from_secs(secs);
        let mut times = Vec::new();
        while Instant::now() < until {
            times.push(pass(profile, &set, &weighted[..1000]).0);
        }
        times.sort();
        eprintln!("{only} only, static weight: median {:?}/binding over {} passes of 1,000", times[times.len() / 2], times.len());
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
    // The same work on both sides: the native built-ins with the guests' memo.
    for (label, bindings) in [("mixed strategies", &mixed), ("static weight", &weighted)] {
        let (n, w, [p25, p50, p75]) = interleaved(&memo_native, &wasm, &set, bindings, 200);
        eprintln!(
            "interleaved vs native with the guests' memo ({label}): native+memo {n:?}/binding, wasm {w:?}/binding \
             (medians), ratio median {p50:.2} (p25 {p25:.2}, p75 {p75:.2})"
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
