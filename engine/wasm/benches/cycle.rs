//! Full scheduling cycle (5 filters, 2 scores, estimator, spread selection, assigner) at 1,000
//! clusters: the native built-ins vs the same profile with the `ClusterAffinity` filter and the
//! `StaticWeight` assigner replaced by their Wasm builds (plugins/wasm, built from source here).
//!
//! `CARGO_TARGET_DIR=target-wasm cargo bench -p flotilla-wasm --bench cycle`
//! (needs Debian's rustc-web toolchain, see sdk/ABI.md). The fixtures are those of
//! `plugins/benches/schedule.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_api::cluster::{ApiEnablement, ApiResource, Cluster, ClusterStatus, ResourceSummary};
use flotilla_api::meta::{LabelSelector, ObjectMeta, ObjectReference, Quantity, Taint, Toleration};
use flotilla_api::policy::{
    ClusterAffinity, ClusterPreferences, Placement, ReplicaSchedulingStrategy, StaticClusterWeight,
};
use flotilla_api::work::{ReplicaRequirements, ResourceBindingSpec, ResourceBindingStatus};
use flotilla_core::framework::{FilterPlugin, Profile, Slot};
use flotilla_core::profile::{ExtensionPoint, PluginSpec, WasmSource};
use flotilla_core::scheduler::{ClusterSet, Options, schedule_in as schedule};
use flotilla_wasm::WasmFactory;

#[path = "../tests/common/guests.rs"]
mod guests;

const REGIONS: [&str; 8] = ["eu-west", "eu-central", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south"];

fn clusters(n: usize) -> Vec<Cluster> {
    (0..n)
        .map(|i| {
            let region = REGIONS[i % REGIONS.len()];
            let mut labels = BTreeMap::new();
            labels.insert("region".to_owned(), region.to_owned());
            labels.insert("env".to_owned(), if i % 3 == 0 { "prod" } else { "staging" }.to_owned());
            labels.insert("tier".to_owned(), format!("t{}", i % 5));
            let mut api = vec![ApiEnablement {
                group_version: "apps/v1".into(),
                resources: ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"]
                    .iter()
                    .map(|k| ApiResource { name: format!("{}s", k.to_lowercase()), kind: (*k).into() })
                    .collect(),
            }];
            for gv in ["v1", "batch/v1", "networking.k8s.io/v1", "policy/v1", "autoscaling/v2", "rbac.authorization.k8s.io/v1"] {
                api.push(ApiEnablement { group_version: gv.into(), resources: vec![ApiResource { name: "x".into(), kind: "X".into() }] });
            }
            let q = |s: String| Quantity::from(s.as_str());
            Cluster {
                api_version: "cluster.karmada.io/v1alpha1".into(),
                kind: "Cluster".into(),
                metadata: ObjectMeta { name: Some(format!("member-{i:04}")), labels, ..Default::default() },
                spec: flotilla_api::cluster::ClusterSpec {
                    sync_mode: "Push".into(),
                    region: region.into(),
                    zones: vec![format!("{region}-{}", i % 3)],
                    taints: if i % 50 == 0 { vec![Taint { key: "maintenance".into(), effect: "NoSchedule".into(), ..Default::default() }] } else { vec![] },
                    ..Default::default()
                },
                status: Some(ClusterStatus {
                    api_enablements: api,
                    resource_summary: Some(ResourceSummary {
                        allocatable: BTreeMap::from([
                            ("cpu".to_owned(), q(format!("{}", 64 + i % 64))),
                            ("memory".to_owned(), q(format!("{}Gi", 256 + i % 128))),
                            ("pods".to_owned(), q("1100".into())),
                        ]),
                        allocated: BTreeMap::from([
                            ("cpu".to_owned(), q(format!("{}", 10 + i % 20))),
                            ("memory".to_owned(), q(format!("{}Gi", 40 + i % 50))),
                            ("pods".to_owned(), q(format!("{}", 100 + i % 300))),
                        ]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }
        })
        .collect()
}

fn binding(i: usize) -> (ResourceBindingSpec, ResourceBindingStatus) {
    let affinity = ClusterAffinity {
        label_selector: Some(LabelSelector {
            match_labels: BTreeMap::from([("env".to_owned(), if i % 4 == 0 { "staging" } else { "prod" }.to_owned())]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let strategy = match i % 4 {
        0 => ReplicaSchedulingStrategy { replica_scheduling_type: Some("Duplicated".into()), ..Default::default() },
        1 => ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Divided".into()),
            replica_division_preference: Some("Weighted".into()),
            weight_preference: Some(ClusterPreferences {
                static_weight_list: (0..4)
                    .map(|r| StaticClusterWeight {
                        target_cluster: ClusterAffinity {
                            label_selector: Some(LabelSelector {
                                match_labels: BTreeMap::from([("region".to_owned(), REGIONS[r].to_owned())]),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        weight: (r + 1) as i64,
                    })
                    .collect(),
                ..Default::default()
            }),
        },
        2 => ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Divided".into()),
            replica_division_preference: Some("Weighted".into()),
            weight_preference: Some(ClusterPreferences { dynamic_weight: "AvailableReplicas".into(), ..Default::default() }),
        },
        _ => ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Divided".into()),
            replica_division_preference: Some("Aggregated".into()),
            ..Default::default()
        },
    };
    let spec = ResourceBindingSpec {
        resource: ObjectReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: format!("app-{i}"),
            uid: format!("00000000-0000-4000-8000-{i:012}"),
            ..Default::default()
        },
        replicas: 2 + (i % 40) as i32,
        replica_requirements: Some(ReplicaRequirements {
            resource_request: BTreeMap::from([("cpu".to_owned(), Quantity::from("250m")), ("memory".to_owned(), Quantity::from("512Mi"))]),
            ..Default::default()
        }),
        placement: Some(Placement {
            cluster_affinity: Some(affinity),
            cluster_tolerations: if i % 7 == 0 { vec![Toleration { key: "maintenance".into(), operator: "Exists".into(), ..Default::default() }] } else { vec![] },
            replica_scheduling: Some(strategy),
            ..Default::default()
        }),
        ..Default::default()
    };
    (spec, ResourceBindingStatus::default())
}


fn wasm_profile() -> Profile {
    let dir = guests::built().expect("the Wasm built-ins (Debian rustc-web toolchain)");
    let load = |file: &str, name: &str, point| {
        let path = dir.join(file);
        let spec = PluginSpec { name: name.into(), wasm: Some(WasmSource { path: path.display().to_string(), sha256: None }), ..Default::default() };
        Arc::new(WasmFactory::new().load(point, &spec, &path).expect("load"))
    };
    let filter = load("flotilla_wasm_cluster_affinity.wasm", "ClusterAffinity", ExtensionPoint::Filter);
    let assign = load("flotilla_wasm_static_weight.wasm", "StaticWeight", ExtensionPoint::Assign);
    let mut p = flotilla_plugins::default_profile();
    for s in &mut p.filters {
        if s.plugin.name() == "ClusterAffinity" {
            *s = Slot::new(Arc::clone(&filter) as Arc<dyn FilterPlugin>);
        }
    }
    for s in &mut p.assigners {
        if s.plugin.name() == "StaticWeight" {
            *s = Slot::new(Arc::clone(&assign) as _);
        }
    }
    p
}

fn pass(profile: &Profile, set: &ClusterSet<'_>, bindings: &[(ResourceBindingSpec, ResourceBindingStatus)]) -> (Duration, usize) {
    let start = Instant::now();
    let ok = bindings.iter().filter(|(s, st)| schedule(profile, s, st, set, Options::default(), None).outcome.is_ok()).count();
    (start.elapsed() / bindings.len() as u32, ok)
}

fn bench(c: &mut Criterion) {
    let native = flotilla_plugins::default_profile();
    let wasm = wasm_profile();
    let owned = clusters(1000);
    let set = ClusterSet::new(&owned);
    let mixed: Vec<_> = (0..2000).map(binding).collect();
    let weighted: Vec<_> = (0..8000).map(binding).filter(|_| true).skip(1).step_by(4).collect();
    // Identical results first.
    for (s, st) in mixed.iter().chain(&weighted).take(400) {
        let a = schedule(&native, s, st, &set, Options::default(), None);
        let b = schedule(&wasm, s, st, &set, Options::default(), None);
        assert_eq!(a, b, "native and wasm disagree");
    }
    // Warm up (cluster set pushed into each warm instance once), then one pass each, twice.
    let _ = pass(&wasm, &set, &mixed[..50]);
    for round in 1..=2 {
        for (label, bindings) in [("mixed strategies", &mixed), ("static weight", &weighted)] {
            let (n, ok_n) = pass(&native, &set, bindings);
            let (w, ok_w) = pass(&wasm, &set, bindings);
            eprintln!(
                "round {round}, {} bindings ({label}) x 1000 clusters: native {n:?}/binding, wasm {w:?}/binding, ratio {:.2} ({ok_n}/{ok_w} scheduled)",
                bindings.len(),
                w.as_secs_f64() / n.as_secs_f64()
            );
        }
    }
    let mut g = c.benchmark_group("cycle_1000_clusters");
    g.sample_size(10);
    for (name, profile) in [("native", &native), ("wasm", &wasm)] {
        g.bench_function(format!("{name}_static_weight_batch_of_100"), |b| {
            let mut i = 0;
            b.iter(|| {
                for _ in 0..100 {
                    let (s, st) = &weighted[i % weighted.len()];
                    std::hint::black_box(schedule(profile, s, st, &set, Options::default(), None));
                    i += 1;
                }
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
