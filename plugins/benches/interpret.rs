//! Per-call cost of the native (built-in Rust) resource interpreter, the counterpart of the CEL,
//! Wasm and Lua interpreter benches: InterpretReplica of a Deployment with a two-container
//! template, and AggregateStatus of that Deployment over 10 member statuses. Each call goes
//! through the default chain's resolution, as the detector and the status controllers call it.

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use flotilla_api::work::AggregatedStatusItem;
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "db", "namespace": "db", "generation": 2, "labels": {"app": "db"}},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "db"}}, "template": {
            "metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [
                {"name": "db", "image": "example.com/db:1.2", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                {"name": "sidecar", "image": "example.com/proxy:3.1", "resources": {"requests": {"cpu": "1"}}}
            ]}}},
        "status": {"observedGeneration": 2, "replicas": 5, "readyReplicas": 5}
    })
}

fn items() -> Vec<AggregatedStatusItem> {
    (0..10)
        .map(|i| AggregatedStatusItem {
            cluster_name: format!("member-{i}"),
            status: Some(json!({
                "replicas": 2, "readyReplicas": i % 3, "updatedReplicas": 2,
                "availableReplicas": i % 3, "observedGeneration": 2,
                "generation": 2, "resourceTemplateGeneration": 2
            })),
            applied: true,
            health: "Healthy".into(),
            ..Default::default()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let chain = flotilla_plugins::interpreter::chain(Vec::new(), Vec::new());
    let object = deployment();
    let replicas = chain.get_replicas(&object).expect("replicas");
    assert_eq!(replicas.replicas, 5);
    assert!(replicas.requirements.is_some(), "{replicas:?}");
    c.bench_function("interpret/native/InterpretReplica", |b| {
        b.iter(|| chain.get_replicas(black_box(&object)).expect("replicas"))
    });
    let items = items();
    let out = chain.aggregate_status(&object, &items).expect("aggregate");
    assert_eq!(out["status"]["replicas"], json!(20), "{out}");
    assert_eq!(out["status"]["readyReplicas"], json!(9), "{out}");
    c.bench_function("interpret/native/AggregateStatus_10", |b| {
        b.iter(|| {
            chain
                .aggregate_status(black_box(&object), black_box(&items))
                .expect("aggregate")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
