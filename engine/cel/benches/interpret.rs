//! Per-call cost of resource-interpreter rules in CEL: InterpretReplica (replicas and requirements
//! of a `Shard` with a two-container template) and AggregateStatus over 10 member statuses. Each
//! call converts its inputs and evaluates the rule's expressions (programs cached), as the
//! controllers call it. (The status rule sums one field: two sums over `statusItems` exceed the
//! static cost limit, whose reference input has lists of 100.) The Wasm counterpart is `engine/wasm/benches/interpret.rs`.

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use flotilla_api::interpreter::{CustomizationRule, CustomizationTarget};
use flotilla_api::work::AggregatedStatusItem;
use flotilla_cel::CelRuleBackend;
use flotilla_core::interpreter::{Operation, RuleBackend};
use serde_json::{Value, json};

fn shard() -> Value {
    json!({
        "apiVersion": "example.com/v1", "kind": "Shard",
        "metadata": {"name": "s1", "namespace": "db", "generation": 2, "labels": {"app": "db"}},
        "spec": {"replicas": 5, "template": {"spec": {"containers": [
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
            status: Some(json!({"replicas": 2, "readyReplicas": i % 3, "observedGeneration": 2})),
            applied: true,
            health: "Healthy".into(),
            ..Default::default()
        })
        .collect()
}

fn compile(
    op: Operation,
    cel: Value,
) -> std::sync::Arc<dyn flotilla_core::interpreter::ResourceInterpreter> {
    let rule = CustomizationRule {
        cel: cel.as_object().cloned(),
        ..Default::default()
    };
    let target = CustomizationTarget {
        api_version: "example.com/v1".into(),
        kind: "Shard".into(),
    };
    CelRuleBackend::default()
        .compile("shards", &target, op, &rule)
        .expect("compile")
}

fn bench(c: &mut Criterion) {
    let object = shard();
    let replica = compile(
        Operation::InterpretReplica,
        json!({
            "replicas": "object.spec.?replicas.orValue(1)",
            "requirements": "{'resourceRequest': object.spec.template.spec.containers[0].resources.requests}"
        }),
    );
    assert_eq!(replica.get_replicas(&object).expect("replicas").replicas, 5);
    c.bench_function("interpret/cel/InterpretReplica", |b| {
        b.iter(|| replica.get_replicas(black_box(&object)).expect("replicas"))
    });
    let aggregate = compile(
        Operation::AggregateStatus,
        json!({"status": "{'clusters': statusItems.size(), 'readyReplicas': statusItems.map(i, i.?status.?readyReplicas.orValue(0)).sum()}"}),
    );
    let items = items();
    let out = aggregate
        .aggregate_status(&object, &items)
        .expect("aggregate");
    assert_eq!(out["status"], json!({"clusters": 10, "readyReplicas": 9}));
    c.bench_function("interpret/cel/AggregateStatus_10", |b| {
        b.iter(|| {
            aggregate
                .aggregate_status(black_box(&object), black_box(&items))
                .expect("aggregate")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
