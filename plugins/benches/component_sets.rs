//! Component-set estimation per cluster (Karmada's `MaxAvailableComponentSets` in the general
//! estimator) next to the single-template estimate, over 1,000 clusters: a Flink-like workload
//! (1 job manager + 8 task managers) against resource summaries only, and against summaries with
//! resource models (first-fit packing over each cluster's virtual nodes). Per-cluster cost is the
//! reported time / 1,000.
//!
//! `cargo bench -p flotilla-plugins --bench component_sets`

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use flotilla_api::cluster::Cluster;
use flotilla_api::work::ResourceBindingSpec;
use flotilla_core::component_sets::{ComponentSet, max_sets};
use flotilla_core::estimator::available_replicas;
use serde_json::{Value, json};

fn clusters(models: bool) -> Vec<Cluster> {
    (0..1000)
        .map(|i| {
            let mut summary = json!({
                "allocatable": {"pods": "2000", "cpu": "640", "memory": "2560Gi"},
                "allocated": {"pods": format!("{}", 100 + i % 300), "cpu": format!("{}500m", 20 + i % 200), "memory": "400Gi"},
                "allocating": {"pods": "1", "cpu": "250m", "memory": "1Gi"}});
            let mut spec = json!({});
            if models {
                summary["allocatableModelings"] = json!([
                    {"grade": 0, "count": 2}, {"grade": 1, "count": 10 + i % 7},
                    {"grade": 2, "count": 5 + i % 5}, {"grade": 3, "count": 3}]);
                spec = json!({"resourceModels": [
                    {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "4"}, {"name": "memory", "min": "0", "max": "16Gi"}]},
                    {"grade": 1, "ranges": [{"name": "cpu", "min": "4", "max": "16"}, {"name": "memory", "min": "16Gi", "max": "64Gi"}]},
                    {"grade": 2, "ranges": [{"name": "cpu", "min": "16", "max": "32"}, {"name": "memory", "min": "64Gi", "max": "128Gi"}]},
                    {"grade": 3, "ranges": [{"name": "cpu", "min": "32", "max": "64"}, {"name": "memory", "min": "128Gi", "max": "256Gi"}]}]});
            }
            serde_json::from_value(json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                "metadata": {"name": format!("m{i}")}, "spec": spec, "status": {"resourceSummary": summary}}))
            .expect("cluster")
        })
        .collect()
}

fn components() -> Value {
    json!([
        {"name": "jobmanager", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "2", "memory": "4Gi"}}},
        {"name": "taskmanager", "replicas": 8, "replicaRequirements": {"resourceRequest": {"cpu": "4", "memory": "8Gi"}}}
    ])
}

fn spec(with_components: bool) -> ResourceBindingSpec {
    let mut s = json!({"resource": {"apiVersion": "example.dev/v1", "kind": "StreamJob", "namespace": "d", "name": "j"},
        "placement": {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}]}});
    if with_components {
        s["components"] = components();
    } else {
        s["replicas"] = json!(9);
        s["replicaRequirements"] = json!({"resourceRequest": {"cpu": "4", "memory": "8Gi"}});
    }
    serde_json::from_value(s).expect("spec")
}

fn bench(c: &mut Criterion) {
    for (label, models) in [("summary", false), ("models", true)] {
        let cs = clusters(models);
        let refs: Vec<&Cluster> = cs.iter().collect();
        let single = spec(false);
        let multi = spec(true);
        c.bench_function(
            &format!("single-template replicas, 1000 clusters, {label}"),
            |b| {
                b.iter(|| black_box(available_replicas(black_box(&refs), &single)));
            },
        );
        c.bench_function(&format!("component sets, 1000 clusters, {label}"), |b| {
            b.iter(|| black_box(available_replicas(black_box(&refs), &multi)));
        });
        let set = ComponentSet::parse(&multi.components);
        let total: i64 = cs.iter().map(|c| i64::from(max_sets(c, &set))).sum();
        eprintln!("{label}: {total} sets over 1000 clusters");
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
