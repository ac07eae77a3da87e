//! Write throughput and watch fan-out latency of the API server with 10k objects stored.
//!
//! Everything runs in-process through the axum router (no sockets), so the numbers are the
//! server's: routing, JSON, the store's group commit with fsync, and watch fan-out.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;

const PRELOAD: usize = 10_000;
const WATCHERS: usize = 100;

fn configmap(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"app":"bench"}}}},"data":{{"k":"v"}}}}"#
    )
}

async fn create(router: &axum::Router, name: &str) {
    let req = Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(Body::from(configmap(name)))
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    assert!(
        resp.status().is_success(),
        "create {name}: {}",
        resp.status()
    );
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let server = ApiServer::new(store, ServerOptions::default());
    let router = server.router();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for chunk in 0..(PRELOAD / 500) {
            let router = router.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..500 {
                    create(&router, &format!("pre-{chunk}-{i}")).await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("preload");
        }
    });
    Fixture {
        rt,
        router,
        _dir: dir,
    }
}

fn benches(c: &mut Criterion) {
    let fx = fixture();
    let mut group = c.benchmark_group("apiserver_10k_objects");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(1));
    let mut n = 0u64;

    // One create at a time: each waits for its own fsync'd commit.
    group.bench_function("create_sequential", |b| {
        b.iter_custom(|iters| {
            fx.rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    n += 1;
                    create(&fx.router, &format!("seq-{n}")).await;
                }
                start.elapsed()
            })
        });
    });

    // 64 creates in flight: group commit folds them into few transactions.
    group.bench_function("create_64_concurrent_per_object", |b| {
        b.iter_custom(|iters| {
            fx.rt.block_on(async {
                let start = Instant::now();
                let mut done = 0;
                while done < iters {
                    let batch = (iters - done).min(64);
                    let mut tasks = Vec::new();
                    for _ in 0..batch {
                        n += 1;
                        let router = fx.router.clone();
                        let name = format!("par-{n}");
                        tasks.push(tokio::spawn(async move { create(&router, &name).await }));
                    }
                    for t in tasks {
                        t.await.expect("create");
                    }
                    done += batch;
                }
                start.elapsed()
            })
        });
    });

    // Watch fan-out: WATCHERS open watches; time from a write to the last watcher receiving it.
    let mut bodies = fx.rt.block_on(async {
        // Watch from the current revision: no initial replay, only live events.
        let list = Request::get("/api/v1/namespaces/default/configmaps?limit=1").body(Body::empty()).expect("request");
        let list = fx.router.clone().oneshot(list).await.expect("list").into_body().collect().await.expect("body").to_bytes();
        let list: serde_json::Value = serde_json::from_slice(&list).expect("list json");
        let rv = list["metadata"]["resourceVersion"].as_str().expect("list rv").to_owned();
        let mut bodies = Vec::new();
        for _ in 0..WATCHERS {
            let uri = format!("/api/v1/namespaces/default/configmaps?watch=true&labelSelector=app%3Dbench&resourceVersion={rv}");
            let req = Request::get(uri)
                .body(Body::empty())
                .expect("request");
            let resp = fx.router.clone().oneshot(req).await.expect("watch");
            bodies.push(resp.into_body());
        }
        // Wait until every watcher is live.
        let marker = "fanout-ready";
        create(&fx.router, marker).await;
        for body in &mut bodies {
            loop {
                let frame = body.frame().await.expect("frame").expect("ok");
                if frame.data_ref().is_some_and(|d| std::str::from_utf8(d).is_ok_and(|s| s.contains(marker))) {
                    break;
                }
            }
        }
        bodies
    });
    group.bench_function(format!("watch_fanout_{WATCHERS}_watchers"), |b| {
        b.iter_custom(|iters| {
            fx.rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let name = format!("fan-{n}");
                    let start = Instant::now();
                    create(&fx.router, &name).await;
                    for body in &mut bodies {
                        loop {
                            let frame = body.frame().await.expect("frame").expect("ok");
                            if frame.data_ref().is_some_and(|d| {
                                std::str::from_utf8(d).is_ok_and(|s| s.contains(&name))
                            }) {
                                break;
                            }
                        }
                    }
                    total += start.elapsed();
                }
                total
            })
        });
    });
    group.finish();
}

criterion_group!(apiserver, benches);
criterion_main!(apiserver);
