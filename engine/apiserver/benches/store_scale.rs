//! The store's per-write cost as its revision log grows, and what compaction does to writers.
//!
//! Straight against [`Store`] (no HTTP, no JSON request handling): durable group commits with
//! fsync, as the server uses them. Objects are ConfigMaps of about 500 bytes, updated round-robin
//! over `FLOTILLA_BENCH_KEYS` keys, so the log grows while the number of objects stays put.
//!
//! 1. The log is filled (256 writers in flight, no compaction) up to each checkpoint of
//!    `FLOTILLA_BENCH_REVISIONS`; at each, the bench times `FLOTILLA_BENCH_SAMPLE` sequential
//!    writes (each waits for its own commit) and as many with 64 in flight (group commits).
//! 2. With every revision stored, 8 writers write continuously while the store compacts down to
//!    the newest `FLOTILLA_BENCH_RETAIN` revisions, in steps of `FLOTILLA_BENCH_COMPACT_CHUNK`
//!    entries (the store's default; set it above the log's length for one transaction). The bench
//!    reports the writers' latencies during compaction beside the same load without it.
//!
//! Not a CI test: 1,000,000 revisions take minutes and about 1.2 GB of disk in a temp dir
//! (deleted at the end).
//!
//! ```sh
//! cargo bench -p flotilla-apiserver --bench store_scale
//! # knobs: FLOTILLA_BENCH_REVISIONS=1000,10000,100000,1000000 FLOTILLA_BENCH_KEYS=10000
//! #        FLOTILLA_BENCH_SAMPLE=2000 FLOTILLA_BENCH_RETAIN=1000 FLOTILLA_BENCH_COMPACT_CHUNK=1024
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flotilla_apiserver::store::{COMPACT_CHUNK, Op, Precondition};
use flotilla_apiserver::{Store, StoreError, StoreOptions};
use serde_json::{Value, json};

fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn configmap(i: u64, n: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("cm-{i}"),
            "namespace": "default",
            "labels": {"app": "bench", "shard": format!("s{}", i % 16)},
            "annotations": {"bench.flotilla.dev/written": n.to_string()},
        },
        "data": {
            "config.yaml": "listen: 0.0.0.0:8080\nlog_level: info\nupstreams:\n  - http://backend-a:9000\n  - http://backend-b:9000\n",
            "feature-flags": "alpha=false,beta=true,gamma=false,delta=true",
            "owner": "platform-team",
            "revision": n.to_string(),
        },
    })
}

fn key(i: u64) -> String {
    format!("/registry/configmaps/default/cm-{i}")
}

async fn put(store: &Store, keys: u64, n: u64) -> Duration {
    let i = n % keys;
    let t = Instant::now();
    match store
        .write(key(i), Op::Put(configmap(i, n)), Precondition::Exists)
        .await
    {
        // The first write of a key creates it.
        Err(StoreError::Conflict { current: None, .. }) => {
            store
                .write(key(i), Op::Put(configmap(i, n)), Precondition::Absent)
                .await
                .expect("create");
        }
        other => {
            other.expect("write");
        }
    }
    t.elapsed()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `mean / p50 / p99 / max` in µs.
fn summary(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    format!(
        "mean {mean:>7.0}  p50 {:>7.0}  p99 {:>7.0}  max {:>7.0} µs",
        quantile(&v, 0.5),
        quantile(&v, 0.99),
        v.last().copied().unwrap_or(f64::NAN)
    )
}

fn file_mib(dir: &std::path::Path) -> f64 {
    std::fs::metadata(dir.join("flotilla.redb")).map_or(f64::NAN, |m| m.len() as f64 / 1048576.0)
}

/// `writers` tasks writing continuously until `stop`; every write's latency in µs.
fn load(
    store: &Store,
    writers: u64,
    keys: u64,
    next: &Arc<AtomicU64>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<f64>>> {
    (0..writers)
        .map(|_| {
            let (store, next, stop) = (store.clone(), Arc::clone(next), Arc::clone(stop));
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    lat.push(put(&store, keys, n).await.as_secs_f64() * 1e6);
                }
                lat
            })
        })
        .collect()
}

async fn collect(handles: Vec<tokio::task::JoinHandle<Vec<f64>>>) -> Vec<f64> {
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.expect("writer"));
    }
    all
}

fn main() {
    let checkpoints: Vec<u64> = knob(
        "FLOTILLA_BENCH_REVISIONS",
        "1000,10000,100000,1000000".to_owned(),
    )
    .split(',')
    .filter_map(|s| s.trim().parse().ok())
    .collect();
    let keys: u64 = knob("FLOTILLA_BENCH_KEYS", 10_000);
    let sample: u64 = knob("FLOTILLA_BENCH_SAMPLE", 2000);
    let retain: u64 = knob("FLOTILLA_BENCH_RETAIN", 1000);
    let chunk: u64 = knob("FLOTILLA_BENCH_COMPACT_CHUNK", COMPACT_CHUNK);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open_with(
        dir.path(),
        &StoreOptions {
            compact_chunk: chunk,
            ..StoreOptions::default()
        },
    )
    .expect("store");
    println!(
        "store scale bench: {keys} ConfigMaps updated round-robin, checkpoints {checkpoints:?} revisions, {sample} timed writes per checkpoint; load average {}",
        loadavg()
    );
    let next = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        for &target in &checkpoints {
            // Fill: 256 in flight until the log holds `target` revisions.
            let t = Instant::now();
            let from = store.current_rev();
            let stop = Arc::new(AtomicBool::new(false));
            let handles = load(&store, 256, keys, &next, &stop);
            while store.current_rev() < target {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop.store(true, Ordering::Relaxed);
            collect(handles).await;
            let filled = store.current_rev() - from;
            let fill_secs = t.elapsed().as_secs_f64();

            let mut seq = Vec::new();
            for _ in 0..sample {
                let n = next.fetch_add(1, Ordering::Relaxed);
                seq.push(put(&store, keys, n).await.as_secs_f64() * 1e6);
            }
            let stats0 = store.stats();
            let t = Instant::now();
            let mut tasks = Vec::new();
            for w in 0..64 {
                let (store, next) = (store.clone(), Arc::clone(&next));
                let per = sample / 64 + u64::from(w < sample % 64);
                tasks.push(tokio::spawn(async move {
                    for _ in 0..per {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        put(&store, keys, n).await;
                    }
                }));
            }
            for t in tasks {
                t.await.expect("writer");
            }
            let par = t.elapsed().as_secs_f64() * 1e6 / sample as f64;
            let stats1 = store.stats();
            println!(
                "  {:>9} revisions stored (file {:>7.1} MiB; filled {filled} at {:.0} writes/s): sequential {}; 64 in flight {par:.0} µs per write ({:.1} writes per commit)",
                store.current_rev(),
                file_mib(dir.path()),
                filled as f64 / fill_secs,
                summary(seq),
                (stats1.writes - stats0.writes) as f64 / (stats1.commits - stats0.commits).max(1) as f64,
            );
        }

        // Compaction under load: 8 writers, first without compaction (baseline), then while the
        // store compacts down to the newest `retain` revisions.
        let window = Duration::from_secs(5);
        let stop = Arc::new(AtomicBool::new(false));
        let handles = load(&store, 8, keys, &next, &stop);
        tokio::time::sleep(window).await;
        stop.store(true, Ordering::Relaxed);
        let baseline = collect(handles).await;
        println!(
            "  8 writers, no compaction ({} writes in {window:?}): {}",
            baseline.len(),
            summary(baseline)
        );
        let before = store.stats();
        let backlog = store.current_rev() - store.compacted_rev();
        let stop = Arc::new(AtomicBool::new(false));
        let handles = load(&store, 8, keys, &next, &stop);
        let t = Instant::now();
        let horizon = store.compact(retain).await.expect("compact");
        let took = t.elapsed();
        stop.store(true, Ordering::Relaxed);
        let during = collect(handles).await;
        let after = store.stats();
        println!(
            "  8 writers while compacting {} of {backlog} revisions (to {horizon}) in {:.2} s, {} steps of ≤ {chunk}: {} writes, {}",
            after.compacted_entries - before.compacted_entries,
            took.as_secs_f64(),
            after.compaction_steps - before.compaction_steps,
            during.len(),
            summary(during)
        );
        println!("  file after compaction: {:.1} MiB", file_mib(dir.path()));
    });
    drop(store);
    println!("done; load average {}", loadavg());
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
