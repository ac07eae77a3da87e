//! Scheduling-queue throughput with priority-based scheduling on and off.
//!
//!     cargo bench -p flotilla-tests --bench priority_queue
//!
//! **Live**: the shipped control plane (embedded API server, store on disk, every controller, in
//! process) with 1,000 generated member clusters and 10,000 ResourceBindings of mixed
//! `spec.schedulePriority.priority` (four levels, interleaved) created *before* the controllers
//! start, so they are all pending at once; reported: bindings/s from the controllers' start to the
//! last first decision, once with `PriorityBasedScheduling=true` and once with `=false`, and how
//! far the decision order is from priority order (inversions among consecutive decisions).
//!
//! **Offline**: the queue alone (`flotilla_core::queue::SchedulingQueue`): push 10,000 keys, pop
//! and finish them all, with priorities on and off.
//!
//! Environment: `FLOTILLA_BENCH_CLUSTERS` (default 1000), `FLOTILLA_BENCH_BINDINGS` (default
//! 10000), `FLOTILLA_BENCH_LIVE=0` skips the live part.

/// The `flotilla` binary's allocator, so the control plane here allocates as it does there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/diffsupport/mod.rs"]
mod diffsupport;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use diffsupport::scenarios;
use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::{Embedded, Settings, api_resource, client};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const PRIORITIES: [i64; 4] = [0, 10, 100, 1000];

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn offline(n: usize, priorities: bool) -> f64 {
    let keys: Vec<String> = (0..n).map(|i| format!("default/rb-{i}")).collect();
    let started = Instant::now();
    let mut q = flotilla_core::queue::SchedulingQueue::new(priorities);
    for (i, k) in keys.iter().enumerate() {
        q.push(k, PRIORITIES[i % 4] as i32, i as u64);
    }
    let mut popped = 0;
    while let Some(info) = q.pop() {
        q.forget(&info);
        q.done(&info, n as u64);
        popped += 1;
    }
    assert_eq!(popped, n);
    n as f64 / started.elapsed().as_secs_f64()
}

async fn apply_all(c: &Client, objects: Vec<Value>, create_only: bool) {
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
                let res = api_resource(&s("/apiVersion"), &s("/kind"));
                let ns = s("/metadata/namespace");
                let a: Api<DynamicObject> = if ns.is_empty() {
                    Api::all_with(c.clone(), &res)
                } else {
                    Api::namespaced_with(c.clone(), &ns, &res)
                };
                if create_only {
                    let obj: DynamicObject = serde_json::from_value(o.clone()).expect("object");
                    a.create(&PostParams::default(), &obj)
                        .await
                        .expect("create");
                    return;
                }
                a.patch(
                    &s("/metadata/name"),
                    &PatchParams::apply("bench").force(),
                    &Patch::Apply(&o),
                )
                .await
                .expect("apply");
                if o.get("status").is_some() {
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

/// One live run: bindings/s and the share of consecutive decisions out of priority order.
fn live(clusters_n: usize, n: u64, gates: &str) -> (f64, f64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    rt.block_on(async {
        let store = Store::open(&dir.path().join("store")).expect("store opens");
        let server = ApiServer::new(store, ServerOptions::default());
        let c = client::in_process(server.router(), None, None);
        let seed = 42;
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
        apply_all(&c, clusters, false).await;
        let bindings: Vec<Value> = (0..n)
            .map(|i| {
                let w = scenarios::workload_for(seed, 2_000_000 + i, &names);
                let mut spec = json!({
                    "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": format!("app-{i}")},
                    "replicas": w["replicas"],
                    "placement": w["placement"],
                    "schedulePriority": {"priority": PRIORITIES[(i % 4) as usize]},
                    "schedulerName": "default-scheduler",
                });
                if let Some(req) = w.get("requests") {
                    spec["replicaRequirements"] = json!({"resourceRequest": req});
                }
                json!({
                    "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                    "metadata": {"name": format!("rb-{i:05}"), "namespace": "default"},
                    "spec": spec,
                })
            })
            .collect();
        // Their templates (a binding whose template is gone is removed by the binding
        // controller); no policy matches them, so the detector leaves the bindings alone.
        let templates: Vec<Value> = (0..n)
            .map(|i| {
                let w = scenarios::workload_for(seed, 2_000_000 + i, &names);
                scenarios::deployment(i, &w, json!({}))
            })
            .collect();
        apply_all(&c, templates, true).await;
        apply_all(&c, bindings, true).await;

        // The order of first decisions, from a watch (commit order).
        let order = Arc::new(Mutex::new(Vec::<i64>::new()));
        let rbs: Api<DynamicObject> = Api::namespaced_with(
            c.clone(),
            "default",
            &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
        );
        let watching = {
            let order = order.clone();
            let stream = kube::runtime::watcher(rbs, kube::runtime::watcher::Config::default());
            tokio::spawn(async move {
                use futures::StreamExt as _;
                let mut seen = std::collections::HashSet::new();
                let mut stream = std::pin::pin!(stream);
                while let Some(Ok(ev)) = stream.next().await {
                    if let kube::runtime::watcher::Event::Apply(rb) = ev
                        && rb.data.pointer("/status/schedulerObservedGeneration").is_some()
                        && seen.insert(rb.metadata.name.clone().unwrap_or_default())
                    {
                        let p = rb
                            .data
                            .pointer("/spec/schedulePriority/priority")
                            .and_then(Value::as_i64)
                            .unwrap_or(0);
                        order.lock().unwrap().push(p);
                    }
                }
            })
        };
        let mut settings = Settings::default();
        settings.pipeline.gates.set(gates).expect("gates");
        let started = Instant::now();
        let running = flotilla_controller::start_embedded(
            server.router(),
            Embedded {
                members: 0,
                settings,
                ..Default::default()
            },
        )
        .await
        .expect("controllers start");
        while (order.lock().unwrap().len() as u64) < n {
            assert!(
                started.elapsed() < Duration::from_secs(1800),
                "{} of {n} bindings decided after 1800 s",
                order.lock().unwrap().len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wall = started.elapsed();
        watching.abort();
        drop(running);
        let order = order.lock().unwrap().clone();
        let inversions = order.windows(2).filter(|w| w[0] < w[1]).count();
        (
            n as f64 / wall.as_secs_f64(),
            inversions as f64 / (order.len().max(2) - 1) as f64,
        )
    })
}

fn main() {
    let clusters_n: usize = env_or("FLOTILLA_BENCH_CLUSTERS", 1000);
    let n: u64 = env_or("FLOTILLA_BENCH_BINDINGS", 10_000);
    for priorities in [true, false] {
        let rate = offline(n as usize, priorities);
        println!(
            "offline queue, priorities {}: {n} bindings pushed, popped, done: {rate:.0} bindings/s",
            if priorities { "on " } else { "off" }
        );
    }
    if env_or("FLOTILLA_BENCH_LIVE", 1u8) == 0 {
        return;
    }
    for gates in [
        "PriorityBasedScheduling=true",
        "PriorityBasedScheduling=false",
    ] {
        let (rate, inversions) = live(clusters_n, n, gates);
        println!(
            "live, {gates}: {n} pending bindings × {clusters_n} clusters: {rate:.0} bindings/s, {:.1} % of consecutive decisions out of priority order",
            inversions * 100.0
        );
    }
}
