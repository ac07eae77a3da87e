//! Scheduling throughput with the default profile: 10,000 bindings over 1,000 clusters.
//!
//! `cargo bench -p flotilla-plugins --bench schedule` — reports time per batch of bindings; divide by
//! the batch size for the per-binding figure (printed once at start-up as well).

use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::scheduler::schedule;

#[path = "common/fixtures.rs"]
mod fixtures;
use fixtures::{binding, clusters};

fn bench(c: &mut Criterion) {
    let profile = flotilla_plugins::default_profile();
    let owned = clusters(1000);
    // The controllers keep a snapshot of the cluster set (sorted, capacities parsed); so does the
    // benchmark. Building it is not part of the per-binding time.
    let cl = Snapshot::new(owned, std::sync::Arc::default(), Options::default());
    let bindings: Vec<_> = (0..10_000).map(binding).collect();

    // One full pass over the 10,000 bindings, reported per binding.
    let start = Instant::now();
    let mut ok = 0;
    for (spec, status) in &bindings {
        if schedule(&cl, &profile, spec, status, None, None)
            .outcome
            .is_ok()
        {
            ok += 1;
        }
    }
    let per = start.elapsed() / bindings.len() as u32;
    eprintln!("10000 bindings x 1000 clusters: {per:?} per binding ({ok} scheduled)");

    let mut g = c.benchmark_group("schedule_1000_clusters");
    g.sample_size(10);
    g.bench_function("batch_of_100_bindings_mixed_strategies", |b| {
        let mut i = 0;
        b.iter(|| {
            for _ in 0..100 {
                let (spec, status) = &bindings[i % bindings.len()];
                std::hint::black_box(schedule(&cl, &profile, spec, status, None, None));
                i += 1;
            }
        });
    });
    for (name, offset) in [
        ("duplicated", 0),
        ("static_weight", 1),
        ("dynamic_weight", 2),
        ("aggregated", 3),
    ] {
        g.bench_function(format!("one_binding_{name}"), |b| {
            let (spec, status) = &bindings[offset];
            b.iter(|| std::hint::black_box(schedule(&cl, &profile, spec, status, None, None)));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
