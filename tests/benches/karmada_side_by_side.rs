//! Side-by-side benchmark: per-binding scheduling time of flotilla's scheduler core vs Karmada's
//! own scheduler core (the Go oracle in `tests/karmada-diff`, built against the Karmada module) on
//! identical inputs, at 100 and 1,000 clusters.
//!
//!     cargo bench -p flotilla-tests --bench karmada_side_by_side
//!
//! Environment: `KARMADA_DIFF_BIN` (prebuilt oracle; otherwise `go build` runs),
//! `FLOTILLA_BENCH_SIZES` (default `100,1000`), `FLOTILLA_BENCH_BINDINGS` (distinct bindings per
//! size, default 64), `FLOTILLA_BENCH_SECONDS` (measuring time per engine and size, default 3).
//! The scenario files are left in `$CARGO_TARGET_TMPDIR/bench-<inputs>-<n>.jsonl` so the Go side can also be
//! run alone: `KARMADA_DIFF_BENCH=<files> go test -run '^$' -bench KarmadaSchedule` in tests/karmada-diff.

#[path = "../tests/diffsupport/mod.rs"]
mod diffsupport;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use diffsupport::scenarios;
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::scheduler;
use serde_json::Value;
use std::sync::Arc;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Row {
    family: &'static str,
    clusters: usize,
    bindings: usize,
    flotilla_ns: f64,
    karmada_ns: f64,
    agree: usize,
    outcomes: String,
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing special: both run once.
    let sizes: Vec<usize> = std::env::var("FLOTILLA_BENCH_SIZES")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let bindings: u64 = env_or("FLOTILLA_BENCH_BINDINGS", 64);
    let seconds: f64 = env_or("FLOTILLA_BENCH_SECONDS", 3.0);
    let seed: u64 = env_or("FLOTILLA_BENCH_SEED", 42);
    let bin =
        diffsupport::oracle_binary().unwrap_or_else(|e| panic!("Karmada oracle unavailable: {e}"));
    let mut karmada = diffsupport::Karmada::start(&bin).expect("start oracle");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let profile = flotilla_plugins::default_profile();

    let mut rows = Vec::new();
    for (family, models) in [("summary", false), ("models", true)] {
        for &n in &sizes {
            let shape = scenarios::Shape {
                clusters: Some(n),
                models,
            };
            let scs: Vec<Value> = (0..bindings)
                .map(|i| scenarios::scenario(seed, i, shape))
                .collect();
            let file = dir.join(format!("bench-{family}-{n}.jsonl"));
            let text: Vec<String> = scs
                .iter()
                .map(|s| serde_json::to_string(s).expect("json"))
                .collect();
            std::fs::write(&file, text.join("\n") + "\n").expect("write scenarios");

            // Same inputs, same answers: check before timing.
            let mut agree = 0;
            let mut kinds = std::collections::BTreeMap::<String, usize>::new();
            for s in &scs {
                if let Ok((fl, ka)) = diffsupport::both(&mut karmada, s) {
                    *kinds.entry(ka.kind.clone()).or_default() += 1;
                    if fl.agrees(&ka) {
                        agree += 1;
                    }
                }
            }
            let outcomes = kinds
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ");

            // flotilla: parse once, then schedule round-robin against each scenario's snapshot
            // (sorted and parsed once per cluster-set change, as the controllers schedule) until
            // the time budget is spent.
            let parsed: Vec<_> = scs
                .iter()
                .map(|s| diffsupport::parse(s).expect("parse"))
                .collect();
            let budget = Duration::from_secs_f64(seconds);
            let sets: Vec<_> = parsed
                .iter()
                .map(|(_, _, clusters)| {
                    Snapshot::new(clusters.clone(), Arc::default(), Options::default())
                })
                .collect();
            let start = Instant::now();
            let mut calls = 0u64;
            while start.elapsed() < budget {
                for ((spec, status, _), set) in parsed.iter().zip(&sets) {
                    std::hint::black_box(scheduler::schedule(
                        set, &profile, spec, status, None, None,
                    ));
                }
                calls += parsed.len() as u64;
            }
            let flotilla_ns = start.elapsed().as_nanos() as f64 / calls as f64;

            // Karmada: Go's testing.Benchmark over the same file (decoding outside the timer).
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
            rows.push(Row {
                family,
                clusters: n,
                bindings: scs.len(),
                flotilla_ns,
                karmada_ns,
                agree,
                outcomes,
            });
        }
    }

    println!(
        "\nper-binding scheduling time, identical inputs ({}; flotilla release build; one thread each)",
        karmada.version
    );
    println!("  flotilla against each scenario's prepared Snapshot, as the controllers schedule");
    println!(
        "{:<8} {:>8} {:>8} {:>12} {:>12} {:>8}  {:<9} karmada outcomes",
        "inputs", "clusters", "bindings", "karmada µs", "flotilla µs", "ratio", "agree"
    );
    let mut json_rows = Vec::new();
    for r in &rows {
        let ratio = r.karmada_ns / r.flotilla_ns;
        println!(
            "{:<8} {:>8} {:>8} {:>12.1} {:>12.1} {:>7.1}×  {:<9} {}",
            r.family,
            r.clusters,
            r.bindings,
            r.karmada_ns / 1000.0,
            r.flotilla_ns / 1000.0,
            ratio,
            format!("{}/{}", r.agree, r.bindings),
            r.outcomes
        );
        json_rows.push(serde_json::json!({"inputs": r.family, "clusters": r.clusters, "bindings": r.bindings,
            "karmadaNsPerBinding": r.karmada_ns, "flotillaNsPerBinding": r.flotilla_ns, "ratio": ratio, "agree": r.agree}));
    }
    let summary = dir.join("karmada-side-by-side.json");
    let _ = std::fs::write(
        &summary,
        serde_json::to_string_pretty(&json_rows).unwrap_or_default(),
    );
    println!("(summary: {})", summary.display());
}
