//! The scheduling benchmarks' fixtures: 1,000 clusters in 8 regions and 10,000 mixed-strategy
//! bindings. Shared by `plugins/benches/schedule.rs` and `engine/wasm/benches/cycle.rs` (included
//! by path) so the native and Wasm numbers are measured on the same inputs.

use std::collections::BTreeMap;

use flotilla_api::cluster::{ApiEnablement, ApiResource, Cluster, ClusterStatus, ResourceSummary};
use flotilla_api::meta::{LabelSelector, ObjectMeta, ObjectReference, Quantity, Taint, Toleration};
use flotilla_api::policy::{
    ClusterAffinity, ClusterPreferences, Placement, ReplicaSchedulingStrategy, StaticClusterWeight,
};
use flotilla_api::work::{ReplicaRequirements, ResourceBindingSpec, ResourceBindingStatus};

pub const REGIONS: [&str; 8] = [
    "eu-west",
    "eu-central",
    "us-east",
    "us-west",
    "ap-south",
    "ap-east",
    "sa-east",
    "af-south",
];

pub fn clusters(n: usize) -> Vec<Cluster> {
    (0..n)
        .map(|i| {
            let region = REGIONS[i % REGIONS.len()];
            let mut labels = BTreeMap::new();
            labels.insert("region".to_owned(), region.to_owned());
            labels.insert(
                "env".to_owned(),
                if i % 3 == 0 { "prod" } else { "staging" }.to_owned(),
            );
            labels.insert("tier".to_owned(), format!("t{}", i % 5));
            let mut api = vec![ApiEnablement {
                group_version: "apps/v1".into(),
                resources: ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"]
                    .iter()
                    .map(|k| ApiResource {
                        name: format!("{}s", k.to_lowercase()),
                        kind: (*k).into(),
                    })
                    .collect(),
            }];
            for gv in [
                "v1",
                "batch/v1",
                "networking.k8s.io/v1",
                "policy/v1",
                "autoscaling/v2",
                "rbac.authorization.k8s.io/v1",
            ] {
                api.push(ApiEnablement {
                    group_version: gv.into(),
                    resources: vec![ApiResource {
                        name: "x".into(),
                        kind: "X".into(),
                    }],
                });
            }
            let q = |s: String| Quantity::from(s.as_str());
            Cluster {
                api_version: "cluster.karmada.io/v1alpha1".into(),
                kind: "Cluster".into(),
                metadata: ObjectMeta {
                    name: Some(format!("member-{i:04}")),
                    labels,
                    ..Default::default()
                },
                spec: flotilla_api::cluster::ClusterSpec {
                    sync_mode: "Push".into(),
                    region: region.into(),
                    zones: vec![format!("{region}-{}", i % 3)],
                    taints: if i % 50 == 0 {
                        vec![Taint {
                            key: "maintenance".into(),
                            effect: "NoSchedule".into(),
                            ..Default::default()
                        }]
                    } else {
                        vec![]
                    },
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

pub fn binding(i: usize) -> (ResourceBindingSpec, ResourceBindingStatus) {
    let affinity = ClusterAffinity {
        label_selector: Some(LabelSelector {
            match_labels: BTreeMap::from([(
                "env".to_owned(),
                if i.is_multiple_of(4) {
                    "staging"
                } else {
                    "prod"
                }
                .to_owned(),
            )]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let strategy = match i % 4 {
        0 => ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Duplicated".into()),
            ..Default::default()
        },
        1 => ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Divided".into()),
            replica_division_preference: Some("Weighted".into()),
            weight_preference: Some(ClusterPreferences {
                static_weight_list: (0..4)
                    .map(|r| StaticClusterWeight {
                        target_cluster: ClusterAffinity {
                            label_selector: Some(LabelSelector {
                                match_labels: BTreeMap::from([(
                                    "region".to_owned(),
                                    REGIONS[r].to_owned(),
                                )]),
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
            weight_preference: Some(ClusterPreferences {
                dynamic_weight: "AvailableReplicas".into(),
                ..Default::default()
            }),
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
            resource_request: BTreeMap::from([
                ("cpu".to_owned(), Quantity::from("250m")),
                ("memory".to_owned(), Quantity::from("512Mi")),
            ]),
            ..Default::default()
        }),
        placement: Some(Placement {
            cluster_affinity: Some(affinity),
            cluster_tolerations: if i.is_multiple_of(7) {
                vec![Toleration {
                    key: "maintenance".into(),
                    operator: "Exists".into(),
                    ..Default::default()
                }]
            } else {
                vec![]
            },
            replica_scheduling: Some(strategy),
            ..Default::default()
        }),
        ..Default::default()
    };
    (spec, ResourceBindingStatus::default())
}
