//! Per-call cost of a Wasm resource interpreter (the Rust guest examples/plugins/rust-shard-interpreter):
//! InterpretReplica of a `Shard` and AggregateStatus over 10 member statuses, through the `wasm`
//! rule backend on a warm instance (request encoding, the guest's JSON parse and reply, the
//! host's checks). Build the guest first and point `FLOTILLA_INTERPRETER_WASM` at it
//! (`OUT=/some/dir examples/plugins/rust-shard-interpreter/build.sh`); without it the bench
//! prints why and measures nothing. The CEL counterpart is `engine/cel/benches/interpret.rs`.

use std::sync::Arc;

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use flotilla_api::interpreter::{CustomizationRule, CustomizationTarget, WasmRule};
use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::interpreter::{Operation, RuleBackend};
use flotilla_wasm::{PluginMap, WasmRuleBackend, load_interpreter};
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

fn bench(c: &mut Criterion) {
    let Some(path) = std::env::var_os("FLOTILLA_INTERPRETER_WASM") else {
        eprintln!(
            "interpret bench: set FLOTILLA_INTERPRETER_WASM to a built rust-shard-interpreter.wasm"
        );
        return;
    };
    let bytes = std::fs::read(&path).expect("read the module");
    let plugin = load_interpreter("rust-shard", &bytes, None, None)
        .expect("load")
        .expect("exports flotilla_interpret_v1");
    let map = Arc::new(PluginMap::new());
    map.insert("rust-shard", Ok(plugin));
    let backend = WasmRuleBackend::new(map);
    let target = CustomizationTarget {
        api_version: "example.com/v1".into(),
        kind: "Shard".into(),
    };
    let rule = CustomizationRule {
        wasm: Some(WasmRule {
            plugin: "rust-shard".into(),
        }),
        ..Default::default()
    };
    let compile = |op| {
        backend
            .compile("shards", &target, op, &rule)
            .expect("compile")
    };
    let object = shard();
    let replica = compile(Operation::InterpretReplica);
    assert_eq!(replica.get_replicas(&object).expect("replicas").replicas, 5);
    c.bench_function("interpret/wasm/InterpretReplica", |b| {
        b.iter(|| replica.get_replicas(black_box(&object)).expect("replicas"))
    });
    let aggregate = compile(Operation::AggregateStatus);
    let items = items();
    let out = aggregate
        .aggregate_status(&object, &items)
        .expect("aggregate");
    assert_eq!(out["status"], json!({"replicas": 20, "readyReplicas": 9}));
    c.bench_function("interpret/wasm/AggregateStatus_10", |b| {
        b.iter(|| {
            aggregate
                .aggregate_status(black_box(&object), black_box(&items))
                .expect("aggregate")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
