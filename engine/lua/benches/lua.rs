//! Per-call cost of a Lua customization: InterpretReplica and AggregateStatus over 10 members,
//! for a Deployment-like customization of our own (fresh Lua state per call included).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::interpreter::{Operation, ResourceInterpreter};
use flotilla_lua::{Limits, LuaRule};
use serde_json::json;

const REPLICAS: &str = r#"
local kube = require("kube")
function GetReplicas(obj)
  return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)
end"#;

const AGGREGATE: &str = r#"
function AggregateStatus(obj, items)
  if items == nil then return obj end
  local s = {replicas = 0, readyReplicas = 0, updatedReplicas = 0, availableReplicas = 0}
  for i = 1, #items do
    local st = items[i].status or {}
    s.replicas = s.replicas + (st.replicas or 0)
    s.readyReplicas = s.readyReplicas + (st.readyReplicas or 0)
    s.updatedReplicas = s.updatedReplicas + (st.updatedReplicas or 0)
    s.availableReplicas = s.availableReplicas + (st.availableReplicas or 0)
  end
  obj.status = s
  return obj
end"#;

fn bench(c: &mut Criterion) {
    let obj = json!({
        "apiVersion": "example.io/v1", "kind": "Web",
        "metadata": {"name": "shop", "namespace": "prod", "labels": {"app": "shop"}},
        "spec": {"replicas": 10, "template": {"spec": {"containers": [
            {"name": "app", "image": "shop:1", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}
        ]}}}
    });
    let items: Vec<AggregatedStatusItem> = (0..10)
        .map(|i| AggregatedStatusItem {
            cluster_name: format!("member{i}"),
            status: Some(json!({"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1})),
            applied: true,
            health: "Healthy".into(),
            ..Default::default()
        })
        .collect();
    let replicas = LuaRule::new(
        "bench",
        Operation::InterpretReplica,
        REPLICAS,
        Limits::default(),
    )
    .expect("compile");
    let aggregate = LuaRule::new(
        "bench",
        Operation::AggregateStatus,
        AGGREGATE,
        Limits::default(),
    )
    .expect("compile");
    c.bench_function("lua InterpretReplica", |b| {
        b.iter(|| replicas.get_replicas(black_box(&obj)).expect("run"))
    });
    c.bench_function("lua AggregateStatus (10 members)", |b| {
        b.iter(|| {
            aggregate
                .aggregate_status(black_box(&obj), black_box(&items))
                .expect("run")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
