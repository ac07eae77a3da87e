//! Seeded scenario generator for the differential tests against Karmada's scheduler.
//!
//! A scenario is the scheduler-level input in Karmada's own JSON shapes (both engines parse the
//! same bytes): `{"name", "spec": ResourceBindingSpec, "status": ResourceBindingStatus, "clusters":
//! [Cluster]}`. Only placements Karmada's PropagationPolicy webhook admits are generated: webhook
//! defaults already applied (Divided with an empty preference is Weighted, spread constraints have
//! a field and minGroups ≥ 1), `ValidatePlacement` rules respected (the oracle re-checks both with
//! Karmada's own code and reports any scenario that slips through as invalid).

use serde_json::{Map, Value, json};

/// SplitMix64: tiny, deterministic across platforms, no dependency.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The generator for scenario `index` of run `seed`: every scenario is reproducible alone.
    pub fn for_scenario(seed: u64, index: u64) -> Self {
        let mut r = Rng(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    /// Each element independently with probability `p`, in order.
    pub fn subset<T: Clone>(&mut self, xs: &[T], p: f64) -> Vec<T> {
        xs.iter().filter(|_| self.chance(p)).cloned().collect()
    }

    /// A non-empty subset of up to `max` distinct elements, in random order.
    pub fn some_of<T: Clone>(&mut self, xs: &[T], max: usize) -> Vec<T> {
        let mut idx: Vec<usize> = (0..xs.len()).collect();
        for i in (1..idx.len()).rev() {
            let j = self.below(i + 1);
            idx.swap(i, j);
        }
        let n = 1 + self.below(max.min(xs.len()).max(1));
        idx.into_iter().take(n).map(|i| xs[i].clone()).collect()
    }

    pub fn uid(&mut self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }
}

pub const LABEL_KEYS: &[(&str, &[&str])] = &[
    ("env", &["prod", "staging", "dev"]),
    ("tier", &["gold", "silver", "bronze"]),
    ("team", &["a", "b"]),
    ("gpu", &["true"]),
];
pub const PROVIDERS: &[&str] = &["aws", "gcp", "azure"];
pub const REGIONS: &[&str] = &["us-east-1", "us-west-2", "eu-west-1", "ap-south-1"];
const ZONE_SUFFIXES: &[&str] = &["a", "b", "c"];
const NAME_PREFIXES: &[&str] = &["member", "m", "prod", "edge", "c", "zeta", "alpha", "b"];

/// Cluster taints the generator draws from (key, value, effect).
const TAINTS: &[(&str, &str, &str)] = &[
    ("dedicated", "gpu", "NoSchedule"),
    ("dedicated", "infra", "NoSchedule"),
    ("maintenance", "", "NoExecute"),
    ("soft", "yes", "PreferNoSchedule"),
    ("cluster.karmada.io/not-ready", "", "NoSchedule"),
    ("cluster.karmada.io/unreachable", "", "NoExecute"),
];

fn tolerations() -> Vec<Value> {
    vec![
        json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}),
        json!({"key": "dedicated", "operator": "Equal", "value": "infra"}),
        json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "maintenance", "operator": "Exists"}),
        json!({"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"operator": "Exists"}),
        json!({"key": "cluster.karmada.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
        json!({"key": "soft", "value": "yes", "effect": "PreferNoSchedule"}),
    ]
}

/// Shape of the clusters to generate.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Exactly this many clusters (benchmarks); `None` draws a small count (differential runs).
    pub clusters: Option<usize>,
    /// Give some clusters resource models (`allocatableModelings`), as the differential runs do.
    pub models: bool,
}

/// Generate scenario `index` of run `seed`.
pub fn scenario(seed: u64, index: u64, shape: Shape) -> Value {
    let mut r = Rng::for_scenario(seed, index);
    // One scenario in 20 has many clusters of equal capacity: ties beyond Go's 12-element
    // insertion-sort threshold (see DIFFERENCES.md).
    let ties = shape.clusters.is_none() && r.chance(0.05);
    let n = match shape.clusters {
        Some(n) => n,
        None if ties => r.range(13, 30) as usize,
        None => match r.below(10) {
            0..=3 => r.range(1, 6) as usize,
            4..=8 => r.range(7, 12) as usize,
            _ => r.range(13, 20) as usize,
        },
    };
    let big = n > 50;
    let uniform_pods = if ties {
        Some(*r.pick(&[1, 2, 3, 5, 10]))
    } else {
        None
    };
    let clusters: Vec<Value> = {
        let prefix_mode = r.below(3);
        (0..n)
            .map(|i| {
                let name = match prefix_mode {
                    0 => format!("member{}", i + 1),
                    1 => format!(
                        "{}-{}",
                        NAME_PREFIXES[i % NAME_PREFIXES.len()],
                        i / NAME_PREFIXES.len()
                    ),
                    _ => format!("{}{}", r.pick(NAME_PREFIXES), i),
                };
                cluster(&mut r, &name, big, uniform_pods, shape.models)
            })
            .collect()
    };
    let names: Vec<String> = clusters
        .iter()
        .map(|c| {
            c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();

    let mut spec = Map::new();
    let uid = if r.chance(0.85) {
        r.uid()
    } else {
        String::new()
    };
    let mut resource = json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": format!("app-{index}")});
    if !uid.is_empty() {
        resource["uid"] = json!(uid);
    }
    spec.insert("resource".into(), resource);
    let (replicas, requirements, placement) = workload(&mut r, &names);
    if replicas > 0 {
        spec.insert("replicas".into(), json!(replicas));
    }
    if let Some(req) = requirements {
        spec.insert(
            "replicaRequirements".into(),
            json!({"resourceRequest": req}),
        );
    }
    let duplicated = placement
        .get("replicaScheduling")
        .is_none_or(|rs| rs["replicaSchedulingType"] == "Duplicated");
    // Previous assignment: none (first schedule), or some clusters (scale up/down, moved clusters).
    if r.chance(0.55) && !names.is_empty() {
        let mut prev: Vec<Value> = r
            .some_of(&names, 6)
            .into_iter()
            .map(|name| {
                let reps = if duplicated && r.chance(0.7) {
                    replicas
                } else {
                    r.range(1, 15)
                };
                json!({"name": name, "replicas": reps})
            })
            .collect();
        if r.chance(0.1) {
            prev.push(json!({"name": "gone-1", "replicas": r.range(1, 8)}));
        }
        spec.insert("clusters".into(), Value::Array(prev));
    }
    spec.insert("placement".into(), placement.clone());
    components(seed, index, &mut spec);
    if r.chance(0.07) && !names.is_empty() {
        let from = r.pick(&names).clone();
        spec.insert(
            "gracefulEvictionTasks".into(),
            json!([{"fromCluster": from, "reason": "TaintUntolerated", "producer": "taint-manager"}]),
        );
    }
    let mut status = Map::new();
    match r.below(10) {
        0 => {
            // Manual reschedule after the last schedule: Fresh mode.
            spec.insert(
                "rescheduleTriggeredAt".into(),
                json!("2024-05-01T10:00:00Z"),
            );
            status.insert("lastScheduledTime".into(), json!("2024-05-01T09:00:00Z"));
        }
        1 => {
            // Reschedule already handled: Steady.
            spec.insert(
                "rescheduleTriggeredAt".into(),
                json!("2024-05-01T08:00:00Z"),
            );
            status.insert("lastScheduledTime".into(), json!("2024-05-01T09:00:00Z"));
        }
        2 => {
            status.insert("lastScheduledTime".into(), json!("2024-05-01T09:00:00Z"));
        }
        _ => {}
    }
    if let Some(terms) = placement.get("clusterAffinities").and_then(Value::as_array) {
        match r.below(10) {
            0..=4 => {
                let t = r.pick(terms);
                status.insert(
                    "schedulerObservingAffinityName".into(),
                    t["affinityName"].clone(),
                );
            }
            5 => {
                status.insert("schedulerObservingAffinityName".into(), json!("unknown"));
            }
            _ => {}
        }
    }
    json!({
        "name": format!("seed{seed}-{index}"),
        "spec": Value::Object(spec),
        "status": Value::Object(status),
        "clusters": clusters,
    })
}

/// A workload over the clusters `names`: replicas, the resource request of one replica (if
/// any) and an admitted placement, drawn from `r` as [`scenario`] draws them.
fn workload(r: &mut Rng, names: &[String]) -> (i64, Option<Value>, Value) {
    let replicas = if r.chance(0.06) {
        0
    } else if r.chance(0.5) {
        r.range(1, 10)
    } else {
        r.range(11, 60)
    };
    let mut requirements = None;
    if r.chance(0.4) {
        let mut req = Map::new();
        if r.chance(0.8) {
            req.insert(
                "cpu".into(),
                json!(r.pick(&["100m", "250m", "500m", "1", "2", "1500m"])),
            );
        }
        if r.chance(0.6) || req.is_empty() {
            req.insert(
                "memory".into(),
                json!(r.pick(&["128Mi", "512Mi", "1Gi", "2Gi", "3G"])),
            );
        }
        requirements = Some(Value::Object(req));
    }
    (replicas, requirements, placement(r, names))
}

/// Scenario `index`'s workload for a cluster set shared by many scenarios (the live-vs-offline
/// parity test): `{"replicas", "requests"?, "placement"}` over `names`.
#[allow(dead_code)]
pub fn workload_for(seed: u64, index: u64, names: &[String]) -> Value {
    let mut r = Rng::for_scenario(seed, index);
    let (replicas, requests, placement) = workload(&mut r, names);
    let mut w = json!({"replicas": replicas, "placement": placement});
    if let Some(req) = requests {
        w["requests"] = req;
    }
    w
}

/// The clusters of scenario `index` of run `seed` drawn with `shape` (see [`scenario`]).
#[allow(dead_code)]
pub fn clusters_for(seed: u64, index: u64, shape: Shape) -> Vec<Value> {
    scenario(seed, index, shape)["clusters"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Generated cluster `c` as a live member that reports Ready (the generator leaves readiness out:
/// a live cluster controller would taint every such cluster unreachable), minus what cannot be
/// created (a deletion timestamp).
#[allow(dead_code)]
pub fn ready_member(mut c: Value) -> Value {
    c["apiVersion"] = json!("cluster.karmada.io/v1alpha1");
    c["kind"] = json!("Cluster");
    if let Some(m) = c["metadata"].as_object_mut() {
        m.remove("deletionTimestamp");
    }
    let mut conditions: Vec<Value> = c["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    conditions.retain(|x| x["type"] != "Ready");
    conditions.push(json!({"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "cluster is healthy and ready to accept workloads", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
    c["status"]["conditions"] = json!(conditions);
    c
}

/// Workload `w` ([`workload_for`]) as Deployment `app-<i>` in `default`, with `labels`.
#[allow(dead_code)]
pub fn deployment(i: u64, w: &Value, labels: Value) -> Value {
    let mut container = json!({"name": "app", "image": "nginx:1.27"});
    if let Some(req) = w.get("requests") {
        container["resources"] = json!({"requests": req});
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("app-{i}"), "namespace": "default", "labels": labels},
        "spec": {
            "replicas": w["replicas"],
            "selector": {"matchLabels": {"app": format!("app-{i}")}},
            "template": {"metadata": {"labels": {"app": format!("app-{i}")}}, "spec": {"containers": [container]}},
        },
    })
}

/// PropagationPolicy `pp-<i>` placing Deployment `app-<i>` with `placement`.
#[allow(dead_code)]
pub fn propagation_policy(i: u64, placement: &Value) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": format!("pp-{i}"), "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": format!("app-{i}")}], "placement": placement},
    })
}

fn quantity_pods(r: &mut Rng, big: bool) -> i64 {
    if big {
        r.range(0, 200)
    } else {
        *r.pick(&[0, 1, 2, 3, 5, 5, 8, 10, 10, 20, 20, 50, 110])
    }
}

fn cluster(r: &mut Rng, name: &str, big: bool, uniform_pods: Option<i64>, models: bool) -> Value {
    let mut labels = Map::new();
    for (key, values) in LABEL_KEYS {
        if r.chance(0.55) {
            labels.insert((*key).into(), json!(r.pick(values)));
        }
    }
    let mut metadata = json!({"name": name});
    if !labels.is_empty() {
        metadata["labels"] = Value::Object(labels);
    }
    if r.chance(0.03) {
        metadata["deletionTimestamp"] = json!("2024-05-01T00:00:00Z");
    }
    let mut spec = json!({"syncMode": "Push"});
    if r.chance(0.8) {
        spec["provider"] = json!(r.pick(PROVIDERS));
    }
    let region = if r.chance(0.8) {
        Some(*r.pick(REGIONS))
    } else {
        None
    };
    if let Some(region) = region {
        spec["region"] = json!(region);
        if r.chance(0.7) {
            let zones: Vec<String> = r
                .some_of(ZONE_SUFFIXES, 2)
                .into_iter()
                .map(|z| format!("{region}{z}"))
                .collect();
            spec["zones"] = json!(zones);
        }
    } else if r.chance(0.3) {
        spec["zones"] = json!(["nowhere-a"]);
    }
    if r.chance(0.05) {
        spec["zone"] = json!("legacy-zone");
    }
    if r.chance(0.3) {
        let mut taints = Vec::new();
        for (k, v, e) in r.some_of(TAINTS, 2) {
            let mut t = json!({"key": k, "effect": e});
            if !v.is_empty() {
                t["value"] = json!(v);
            }
            taints.push(t);
        }
        spec["taints"] = json!(taints);
    }
    let mut status = Map::new();
    let deployment = json!({"name": "deployments", "kind": "Deployment"});
    let statefulset = json!({"name": "statefulsets", "kind": "StatefulSet"});
    match r.below(20) {
        0 => {} // no API enablements
        1 => {
            status.insert(
                "apiEnablements".into(),
                json!([{"groupVersion": "apps/v1", "resources": [statefulset]}]),
            );
        }
        2 => {
            status.insert(
                "apiEnablements".into(),
                json!([{"groupVersion": "apps/v1beta1", "resources": [deployment]}]),
            );
        }
        _ => {
            let resources = if r.chance(0.5) {
                json!([statefulset, deployment])
            } else {
                json!([deployment])
            };
            status.insert(
                "apiEnablements".into(),
                json!([{"groupVersion": "v1", "resources": [{"name": "services", "kind": "Service"}]}, {"groupVersion": "apps/v1", "resources": resources}]),
            );
        }
    }
    if r.chance(0.3) {
        let st = if r.chance(0.8) { "True" } else { "False" };
        status.insert(
            "conditions".into(),
            json!([{"type": "CompleteAPIEnablements", "status": st, "reason": "Done", "message": "", "lastTransitionTime": "2024-05-01T00:00:00Z"}]),
        );
    }
    if uniform_pods.is_some() || r.chance(0.92) {
        let pods = uniform_pods.unwrap_or_else(|| quantity_pods(r, big));
        let cpu = *r.pick(&["0", "2", "4", "8", "16", "3500m", "64"]);
        let memory = *r.pick(&["4Gi", "8Gi", "16Gi", "32Gi", "8000Mi", "10G", "128Gi"]);
        let mut allocatable = Map::new();
        allocatable.insert("pods".into(), json!(pods.to_string()));
        if r.chance(0.95) {
            allocatable.insert("cpu".into(), json!(cpu));
        }
        if r.chance(0.95) {
            allocatable.insert("memory".into(), json!(memory));
        }
        let mut summary = json!({"allocatable": allocatable});
        if uniform_pods.is_none() && r.chance(0.5) {
            summary["allocated"] = json!({
                "pods": r.range(0, pods.max(1)).to_string(),
                "cpu": r.pick(&["0", "500m", "1", "2", "1500m"]),
                "memory": r.pick(&["0", "1Gi", "2Gi", "4Gi", "512Mi"]),
            });
        }
        if uniform_pods.is_none() && r.chance(0.15) {
            summary["allocating"] =
                json!({"pods": r.range(0, 5).to_string(), "cpu": r.pick(&["250m", "1"])});
        }
        if models && uniform_pods.is_none() && r.chance(0.3) {
            // Resource models (gate CustomizedClusterResourceModeling, on by default): node counts
            // per grade, against Karmada's default models or custom ones.
            let grades = if r.chance(0.5) {
                let n = r.range(2, 4);
                let mut models: Vec<Value> = (0..n)
                    .map(|g| {
                        let cpu_min = if g == 0 {
                            *r.pick(&["0", "500m"])
                        } else {
                            *r.pick(&["1", "2", "4", "1500m", "8"])
                        };
                        let mem_min = if g == 0 {
                            *r.pick(&["0", "1Gi"])
                        } else {
                            *r.pick(&["2Gi", "4Gi", "8Gi", "16Gi", "6G"])
                        };
                        json!({"grade": g, "ranges": [
                            {"name": "cpu", "min": cpu_min, "max": "64"},
                            {"name": "memory", "min": mem_min, "max": "256Gi"},
                        ]})
                    })
                    .collect();
                if r.chance(0.3) {
                    models.reverse();
                }
                spec["resourceModels"] = json!(models);
                n
            } else {
                9
            };
            let mut modelings: Vec<Value> = Vec::new();
            for g in 0..grades {
                if r.chance(0.6) {
                    modelings.push(json!({"grade": g, "count": r.range(0, 6)}));
                }
            }
            if r.chance(0.03) {
                modelings.push(json!({"grade": 1, "count": -1}));
            }
            if !modelings.is_empty() {
                summary["allocatableModelings"] = json!(modelings);
            }
        }
        status.insert("resourceSummary".into(), summary);
    }
    json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": metadata,
        "spec": spec,
        "status": Value::Object(status),
    })
}

/// A ClusterAffinity; `non_empty` forces at least one selector (overflow needs a non-empty inline one).
fn affinity(r: &mut Rng, names: &[String], non_empty: bool) -> Map<String, Value> {
    let mut a = Map::new();
    if r.chance(0.45) {
        let mut sel = Map::new();
        if r.chance(0.5) {
            let (k, vs) = r.pick(LABEL_KEYS);
            sel.insert("matchLabels".into(), json!({ *k: r.pick(vs) }));
        }
        if r.chance(0.6) || sel.is_empty() {
            let mut exprs = Vec::new();
            for _ in 0..r.range(1, 2) {
                let (k, vs) = r.pick(LABEL_KEYS);
                let op = *r.pick(&["In", "NotIn", "Exists", "DoesNotExist"]);
                let mut e = json!({"key": k, "operator": op});
                if op == "In" || op == "NotIn" {
                    e["values"] = json!(r.some_of(vs, 2));
                }
                exprs.push(e);
            }
            sel.insert("matchExpressions".into(), json!(exprs));
        }
        a.insert("labelSelector".into(), Value::Object(sel));
    }
    if r.chance(0.25) {
        let mut exprs = Vec::new();
        for _ in 0..r.range(1, 2) {
            let key = *r.pick(&["provider", "region", "zone"]);
            let values: Vec<String> = match key {
                "provider" => r
                    .some_of(PROVIDERS, 2)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                "region" => r
                    .some_of(REGIONS, 2)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                _ => r
                    .some_of(REGIONS, 2)
                    .into_iter()
                    .map(|rg| format!("{rg}{}", r.pick(ZONE_SUFFIXES)))
                    .collect(),
            };
            exprs.push(json!({"key": key, "operator": r.pick(&["In", "NotIn"]), "values": values}));
        }
        a.insert("fieldSelector".into(), json!({"matchExpressions": exprs}));
    }
    if !names.is_empty() && (r.chance(0.3) || (non_empty && a.is_empty())) {
        let mut picked = r.some_of(names, names.len().div_ceil(2).max(1));
        if r.chance(0.1) {
            picked.push("not-a-cluster".into());
        }
        a.insert("clusterNames".into(), json!(picked));
    }
    if !names.is_empty() && r.chance(0.15) {
        a.insert("exclude".into(), json!(r.some_of(names, 2)));
    }
    if non_empty && a.is_empty() {
        a.insert("exclude".into(), json!(["not-a-cluster"]));
    }
    a
}

fn placement(r: &mut Rng, names: &[String]) -> Value {
    let mut p = Map::new();
    // Replica scheduling first: overflow affinities are only admitted with dynamic/aggregated.
    let rs: Option<Value> = match r.below(100) {
        0..=7 => None,
        8..=24 => Some(json!({"replicaSchedulingType": "Duplicated"})),
        25..=44 => {
            let mut rules = Vec::new();
            for _ in 0..r.range(1, 3) {
                let target = if r.chance(0.7) && !names.is_empty() {
                    json!({"clusterNames": r.some_of(names, 3)})
                } else {
                    let (k, vs) = r.pick(LABEL_KEYS);
                    json!({"labelSelector": {"matchLabels": { *k: r.pick(vs) }}})
                };
                rules.push(json!({"targetCluster": target, "weight": r.range(1, 5)}));
            }
            Some(
                json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted", "weightPreference": {"staticWeightList": rules}}),
            )
        }
        45..=49 => Some(
            json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}),
        ),
        50..=52 => Some(
            json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted", "weightPreference": {}}),
        ),
        53..=76 => Some(
            json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted", "weightPreference": {"dynamicWeight": "AvailableReplicas"}}),
        ),
        _ => Some(
            json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}),
        ),
    };
    let overflow_ok = rs.as_ref().is_some_and(|rs| {
        rs["replicaSchedulingType"] == "Divided"
            && (rs["replicaDivisionPreference"] == "Aggregated"
                || rs["weightPreference"]["dynamicWeight"] == "AvailableReplicas")
    });

    match r.below(100) {
        0..=34 => {}
        35..=64 => {
            p.insert(
                "clusterAffinity".into(),
                Value::Object(affinity(r, names, false)),
            );
        }
        _ => {
            let terms: Vec<Value> = (0..r.range(1, 3))
                .map(|i| {
                    let with_overflow = overflow_ok && r.chance(0.5);
                    let mut t = affinity(r, names, with_overflow);
                    t.insert("affinityName".into(), json!(format!("g{i}")));
                    if with_overflow {
                        let ofs: Vec<Value> = (0..r.range(1, 2))
                            .map(|j| {
                                let mut o = affinity(r, names, false);
                                o.insert("affinityName".into(), json!(format!("g{i}-o{j}")));
                                Value::Object(o)
                            })
                            .collect();
                        t.insert("overflowAffinities".into(), json!(ofs));
                    }
                    Value::Object(t)
                })
                .collect();
            p.insert("clusterAffinities".into(), json!(terms));
        }
    }
    if r.chance(0.4) {
        p.insert(
            "clusterTolerations".into(),
            json!(r.some_of(&tolerations(), 2)),
        );
    }
    if r.chance(0.4) {
        let sc = spread_constraints(r);
        if !sc.is_empty() {
            p.insert("spreadConstraints".into(), json!(sc));
        }
    }
    if let Some(rs) = rs {
        p.insert("replicaScheduling".into(), rs);
    }
    Value::Object(p)
}

fn spread_constraints(r: &mut Rng) -> Vec<Value> {
    let groups = |r: &mut Rng, field: &str| -> Value {
        let min = r.range(1, 3);
        let max = if r.chance(0.12) {
            0
        } else {
            min + r.range(0, 3)
        };
        let mut c = json!({"minGroups": min});
        if max > 0 {
            c["maxGroups"] = json!(max);
        }
        if let Some(label) = field.strip_prefix("label:") {
            c["spreadByLabel"] = json!(label);
        } else {
            c["spreadByField"] = json!(field);
        }
        c
    };
    let fields: &[&str] = match r.below(20) {
        0..=6 => &["cluster"],
        7..=11 => &["cluster", "region"],
        12..=13 => &["region", "cluster"],
        14 => &["cluster", "zone"],
        15 => &["cluster", "provider"],
        16 => &["provider", "region", "cluster"],
        17 => &["label:env"],
        18 => &["cluster", "label:env"],
        _ => &["zone", "cluster", "region"],
    };
    fields.iter().map(|f| groups(r, f)).collect()
}

/// One scenario in eight becomes a multi-component workload (Karmada's
/// MultiplePodTemplatesScheduling, which the oracle enables): `components` instead of replicas
/// and requirements, and most of those placed in exactly one cluster (a cluster spread
/// constraint with min = max = 1), where Karmada estimates complete component sets. The draws
/// come from their own stream, so every other scenario is unchanged.
fn components(seed: u64, index: u64, spec: &mut Map<String, Value>) {
    let mut r = Rng::for_scenario(seed ^ 0x636f_6d70_6f6e_656e, index);
    if !r.chance(0.125) {
        return;
    }
    spec.remove("replicas");
    spec.remove("replicaRequirements");
    let cpus = ["100m", "500m", "1", "2", "4", "1500m", "3"];
    let mems = ["512Mi", "1Gi", "2Gi", "4Gi", "8Gi", "1G", "3G"];
    let comps: Vec<Value> = (0..r.range(1, 3))
        .map(|i| {
            let mut c = json!({"name": format!("c{i}"), "replicas": r.range(0, 6)});
            if r.chance(0.85) {
                let mut req = Map::new();
                if r.chance(0.9) {
                    req.insert("cpu".into(), json!(r.pick(&cpus)));
                }
                if r.chance(0.7) {
                    req.insert("memory".into(), json!(r.pick(&mems)));
                }
                if r.chance(0.1) {
                    req.insert("nvidia.com/gpu".into(), json!(r.range(1, 2).to_string()));
                }
                c["replicaRequirements"] = json!({"resourceRequest": req});
            }
            c
        })
        .collect();
    spec.insert("components".into(), json!(comps));
    if r.chance(0.75)
        && let Some(p) = spec.get_mut("placement").and_then(Value::as_object_mut)
    {
        p.insert(
            "spreadConstraints".into(),
            json!([{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}]),
        );
    }
}
