//! Per-evaluation cost of filter, score and override expressions on a 3 KB Deployment, with the
//! object already converted (bound once) and the program and cluster cached, as in scheduling.
//! Also: the one-time conversion of the Deployment, for comparison.

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use flotilla_api::cluster::Cluster;
use flotilla_cel::{Engine, ExpressionEngine, ExpressionKind, Limits};
use serde_json::{Value, json};

fn deployment() -> Value {
    let containers: Vec<Value> = (0..3)
        .map(|i| {
            json!({
                "name": format!("c{i}"),
                "image": format!("docker.io/library/app-{i}:1.2.{i}"),
                "args": ["--port=8080", "--log-level=info", "--metrics"],
                "env": (0..16).map(|j| json!({"name": format!("ENV_{j}"), "value": format!("value-{i}-{j}")})).collect::<Vec<_>>(),
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
            })
        })
        .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "frontend"},
                     "annotations": {"example.com/owner": "team-a", "example.com/revision": "42"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}}
    })
}

fn cluster() -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "eu-1", "resourceVersion": "7", "labels": {"example.com/priority": "80"}},
        "spec": {"region": "eu-west", "zones": ["eu-west-1a"]},
        "status": {"resourceSummary": {"allocatable": {"cpu": "16", "memory": "64Gi"}}}
    }))
    .expect("cluster")
}

fn bench(c: &mut Criterion) {
    // A long deadline: the benchmark reuses one bound object for millions of evaluations.
    let mut limits = Limits::default();
    limits.deadline = std::time::Duration::from_secs(3600);
    let engine = Engine::new(limits);
    let object = deployment();
    let size = serde_json::to_vec(&object).expect("json").len();
    eprintln!("deployment: {size} bytes of JSON");
    let cluster = cluster();
    let cases = [
        (
            "filter",
            ExpressionKind::ClusterSelector,
            "quantity(cluster.status.resourceSummary.allocatable.cpu).isGreaterThan(quantity('4')) && cluster.spec.region in ['eu-west', 'us-east']",
        ),
        (
            "score",
            ExpressionKind::Score,
            "int(clusterLabels[?'example.com/priority'].orValue('0'))",
        ),
        (
            "override_value",
            ExpressionKind::Value,
            "'registry.' + cluster.spec.region + '.example.com/' + object.spec.template.spec.containers[0].image.find('[^/]+$')",
        ),
        (
            "override_merge_patch",
            ExpressionKind::MergePatch,
            "{'spec': {'replicas': cluster.spec.region == 'us-east' ? object.spec.replicas + 1 : object.spec.replicas}}",
        ),
        (
            "override_field",
            ExpressionKind::Value,
            "object.spec.replicas",
        ),
    ];
    let bound = engine.bind(Some(&object)).expect("bind");
    for (name, kind, src) in cases {
        engine.check(kind, src).expect("valid");
        bound.evaluate(kind, src, &cluster).expect("evaluates");
        c.bench_function(&format!("cel/{name}"), |b| {
            b.iter(|| {
                bound
                    .evaluate(kind, black_box(src), &cluster)
                    .expect("eval")
            })
        });
    }
    c.bench_function("cel/bind_3kb_deployment", |b| {
        b.iter(|| engine.bind(Some(black_box(&object))).expect("bind"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
