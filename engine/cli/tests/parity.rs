//! Live = offline: scenarios from the differential generator are applied to a running
//! `flotilla up` (embedded API server, every controller), and each binding's placement and
//! `Scheduled` condition must equal what `flotilla plan` decides on the same objects, read back
//! from the server. Some placements carry CEL selectors and scores that read the template
//! (`object`), which the live scheduler must see exactly as `plan` does.
//!
//! `FLOTILLA_PARITY_SCENARIOS` sets the number of scenarios per cluster set (default 110, over two
//! cluster sets).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use flotilla_controller::api_resource;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

mod common;

#[allow(dead_code)]
#[path = "../../../tests/tests/diffsupport/scenarios.rs"]
mod scenarios;

fn scratch(tag: &str) -> PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flotilla-parity-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

async fn client(kubeconfig: &Path) -> Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig reads");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("kubeconfig loads");
    Client::try_from(cfg).expect("client")
}

fn api(c: &Client, api_version: &str, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let res = api_resource(api_version, kind);
    match namespace {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &res),
        None => Api::all_with(c.clone(), &res),
    }
}

async fn apply(c: &Client, obj: &Value) {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let ns = s("/metadata/namespace");
    let a = api(
        c,
        &s("/apiVersion"),
        &s("/kind"),
        (!ns.is_empty()).then_some(ns.as_str()),
    );
    a.patch(
        &s("/metadata/name"),
        &PatchParams::apply("parity").force(),
        &Patch::Apply(obj),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {}: {e}", s("/metadata/name")));
}

/// CEL that reads the template: gold workloads avoid the first cluster, silver ones score by name.
fn with_cel(placement: &mut Value, first_cluster: &str, i: u64) {
    let selector = format!(
        "object.metadata.labels['tier'] == 'gold' ? clusterName != '{first_cluster}' : true"
    );
    if placement.get("clusterAffinities").is_none() {
        let affinity = placement
            .as_object_mut()
            .expect("placement")
            .entry("clusterAffinity")
            .or_insert_with(|| json!({}));
        affinity["celSelector"] = json!({"celExpressions": [selector]});
    }
    if i.is_multiple_of(2) {
        placement["celScores"] = json!([{"expression": "object.metadata.labels['tier'] == 'silver' ? (clusterName.size() * 7) % 101 : 50"}]);
    }
}

/// What is compared: each binding's target clusters (by name) and its `Scheduled` condition.
fn decision(rb: &Value) -> Value {
    let clusters: BTreeMap<String, i64> = rb
        .pointer("/spec/clusters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["replicas"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    let scheduled = rb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Scheduled"))
        .map(|c| json!({"status": c["status"], "reason": c["reason"], "message": c["message"]}));
    json!({"clusters": clusters, "scheduled": scheduled})
}

/// An object as `kubectl get -o yaml` would hand it to `plan`, without server bookkeeping.
fn portable(o: &DynamicObject) -> Value {
    let mut v = serde_json::to_value(o).expect("object serializes");
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in [
            "managedFields",
            "resourceVersion",
            "creationTimestamp",
            "selfLink",
        ] {
            m.remove(k);
        }
    }
    v
}

async fn list(c: &Client, api_version: &str, kind: &str) -> Vec<DynamicObject> {
    api(c, api_version, kind, None)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
}

/// One cluster set, `count` scenarios: apply, wait for every binding to be scheduled, compare
/// with `flotilla plan` on the objects read back. Returns the scenarios compared.
async fn run(
    tag: &str,
    seed: u64,
    shape: scenarios::Shape,
    cluster_source: u64,
    count: u64,
) -> usize {
    let dir = scratch(tag);
    let (_up, kubeconfig) = common::up(&dir, &["--members", "0"], true);
    let c = client(&kubeconfig).await;

    let clusters: Vec<Value> = scenarios::clusters_for(seed, cluster_source, shape)
        .into_iter()
        .map(scenarios::ready_member)
        .collect();
    let names: Vec<String> = clusters
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap_or("").to_owned())
        .collect();
    let cluster_api = api(&c, "cluster.karmada.io/v1alpha1", "Cluster", None);
    for cl in &clusters {
        apply(&c, cl).await;
        let name = cl["metadata"]["name"].as_str().expect("name");
        cluster_api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": cl["status"]})),
            )
            .await
            .expect("cluster status");
    }
    // Let the cluster controllers settle (taints, execution namespaces) before any binding.
    let mut last = String::new();
    let settle = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let now: Vec<String> = list(&c, "cluster.karmada.io/v1alpha1", "Cluster")
            .await
            .iter()
            .map(|o| o.metadata.resource_version.clone().unwrap_or_default())
            .collect();
        let joined = now.join(",");
        if joined == last || settle.elapsed() > Duration::from_secs(30) {
            break;
        }
        last = joined;
    }

    for i in 0..count {
        let index = 1_000_000 + cluster_source * 10_000 + i;
        let w = scenarios::workload_for(seed, index, &names);
        let mut placement = w["placement"].clone();
        if i % 4 == 1 {
            with_cel(&mut placement, &names[0], i);
        }
        apply(&c, &scenarios::propagation_policy(i, &placement)).await;
        let tier = if i % 3 == 0 { "gold" } else { "silver" };
        apply(&c, &scenarios::deployment(i, &w, json!({"tier": tier}))).await;
    }

    // Every binding decided for its current generation.
    let started = Instant::now();
    let bindings = loop {
        let rbs = list(&c, "work.karmada.io/v1alpha2", "ResourceBinding").await;
        let done = rbs.iter().filter(|rb| {
            let v = serde_json::to_value(rb).unwrap_or_default();
            let generation = v.pointer("/metadata/generation").and_then(Value::as_i64);
            let observed = v
                .pointer("/status/schedulerObservedGeneration")
                .and_then(Value::as_i64);
            generation.is_some() && generation == observed && decision(&v)["scheduled"].is_object()
        });
        if done.count() == count as usize && rbs.len() == count as usize {
            break rbs;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "{tag}: {} of {count} bindings scheduled after 240 s",
            rbs.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let now = flotilla_core::time::format_rfc3339(
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_secs(),
        )
        .expect("time"),
    );

    // The same objects, as files, through `flotilla plan`.
    let files = dir.join("files");
    std::fs::create_dir_all(&files).expect("mkdir");
    for (file, api_version, kind) in [
        ("clusters.json", "cluster.karmada.io/v1alpha1", "Cluster"),
        ("templates.json", "apps/v1", "Deployment"),
        (
            "policies.json",
            "policy.karmada.io/v1alpha1",
            "PropagationPolicy",
        ),
    ] {
        let items: Vec<Value> = list(&c, api_version, kind)
            .await
            .iter()
            .map(portable)
            .collect();
        std::fs::write(
            files.join(file),
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
                .expect("json"),
        )
        .expect("write");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["plan", "-o", "json", "--now", &now, "-f"])
        .arg(&files)
        .output()
        .expect("flotilla plan runs");
    assert!(
        out.status.success(),
        "flotilla plan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let planned: Value = serde_json::from_slice(&out.stdout).expect("plan prints JSON");
    let offline: BTreeMap<String, Value> = planned["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|o| o["kind"] == "ResourceBinding")
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                decision(o),
            )
        })
        .collect();

    let mut mismatches = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut with_cel: BTreeMap<String, usize> = BTreeMap::new();
    let mut errors = std::collections::BTreeSet::new();
    for rb in &bindings {
        let name = rb.metadata.name.clone().unwrap_or_default();
        let live = decision(&serde_json::to_value(rb).expect("binding"));
        *outcomes
            .entry(
                live["scheduled"]["reason"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned(),
            )
            .or_default() += 1;
        if name
            .strip_prefix("app-")
            .and_then(|n| n.strip_suffix("-deployment"))
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|i| i % 4 == 1)
        {
            *with_cel
                .entry(
                    live["scheduled"]["reason"]
                        .as_str()
                        .unwrap_or("?")
                        .to_owned(),
                )
                .or_default() += 1;
        }
        if live["scheduled"]["reason"] == "SchedulerError" {
            errors.insert(
                live["scheduled"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(120)
                    .collect::<String>(),
            );
        }
        match offline.get(&name) {
            Some(o) if *o == live => {}
            o => mismatches.push(format!(
                "{name}:\n  live:    {live}\n  offline: {}\n  spec:    {}\n  status:  {}",
                o.map_or("<none>".to_owned(), Value::to_string),
                rb.data["spec"],
                rb.data["status"]
            )),
        }
    }
    eprintln!(
        "{tag}: {} clusters, {} bindings, outcomes {outcomes:?} (with CEL: {with_cel:?}), {} mismatches",
        names.len(),
        bindings.len(),
        mismatches.len()
    );
    eprintln!("{tag}: scheduler errors: {errors:?}");
    assert!(
        mismatches.is_empty(),
        "{tag}: live and offline decisions differ for {} of {} bindings:\n{}",
        mismatches.len(),
        bindings.len(),
        mismatches.join("\n")
    );
    // A scenario set that schedules nothing would prove nothing.
    assert!(
        outcomes.get("Success").copied().unwrap_or(0) * 3 >= bindings.len(),
        "{tag}: too few successful schedules: {outcomes:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    bindings.len()
}

fn scenarios_per_set() -> u64 {
    std::env::var("FLOTILLA_PARITY_SCENARIOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(110)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_bindings_equal_flotilla_plan_on_generated_scenarios() {
    let n = scenarios_per_set();
    let a = run(
        "models",
        20_260_801,
        scenarios::Shape {
            clusters: Some(12),
            models: true,
        },
        1,
        n,
    )
    .await;
    let b = run(
        "wide",
        20_261_203,
        scenarios::Shape {
            clusters: Some(20),
            models: false,
        },
        2,
        n,
    )
    .await;
    assert!(a + b >= 200 || n < 100, "{a} + {b} scenarios compared");
}
