//! Binding preemption's Wasm victim plugin (`spec.preemption.plugin`, `flotilla_victims_v1`)
//! through the real preemption search: a module that reverses the built-in order changes which
//! binding is evicted, and hostile replies (a candidate that does not exist, one named twice, a
//! reply over `maxOutputBytes`) abandon the preemption with the fault under `failurePolicy: Fail`
//! (as a failing CEL victim rule does) or leave the built-in choice under `Ignore`, recorded.

mod common;

use std::sync::Arc;

use common::testdata;
use flotilla_api::cluster::Cluster;
use flotilla_api::work::ResourceBinding;
use flotilla_core::framework::Profile;
use flotilla_core::pipeline::{Clock, FailoverMemory, Options, Snapshot, decide};
use flotilla_core::preemption::{Preempted, decide_preempting};
use flotilla_core::priority::FeatureGates;
use flotilla_core::profile::{Factories, PluginFactory, ProfileDocument, build_profile};
use flotilla_wasm::WasmFactory;
use serde_json::{Value, json};

const NOW: i64 = 1_780_000_000;

/// A Ready cluster serving Deployments with `cpu` CPUs of which `used` are allocated.
fn cluster(name: &str, cpu: u32, used: u32) -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Push"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "ok"}],
            "apiEnablements": [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}],
            "resourceSummary": {
                "allocatable": {"cpu": cpu.to_string(), "memory": "64Gi", "pods": "110"},
                "allocated": {"cpu": used.to_string(), "memory": "0", "pods": used.to_string()},
            },
        },
    }))
    .expect("cluster")
}

fn placement() -> Value {
    json!({
        "clusterAffinity": {"clusterNames": ["m1", "m2"]},
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
    })
}

/// A Deployment binding of `priority` with `replicas` 1-CPU replicas on `on` (none: not yet
/// scheduled), created `created` seconds after an epoch of its own.
fn binding(
    name: &str,
    priority: i32,
    replicas: i32,
    on: Option<&str>,
    created: i64,
) -> ResourceBinding {
    let clusters: Vec<Value> = on
        .map(|c| json!({"name": c, "replicas": replicas}))
        .into_iter()
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {
            "name": name, "namespace": "default", "generation": 1,
            "creationTimestamp": flotilla_core::time::format_rfc3339(NOW - 100_000 + created),
        },
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": name},
            "replicas": replicas,
            "replicaRequirements": {"resourceRequest": {"cpu": "1"}},
            "placement": placement(),
            "schedulePriority": {"priority": priority},
            "schedulerName": "default-scheduler",
            "clusters": clusters,
        },
    }))
    .expect("binding")
}

/// The default profile with `preemption` as its `spec.preemption`.
fn profile(preemption: Value) -> Result<Profile, String> {
    let doc: ProfileDocument = serde_json::from_value(json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile",
        "metadata": {"name": "default-scheduler"},
        "spec": {"preemption": preemption},
    }))
    .map_err(|e| e.to_string())?;
    let factories = Factories::new([
        Arc::new(flotilla_plugins::BuiltinFactory) as Arc<dyn PluginFactory>,
        Arc::new(WasmFactory::new()),
    ]);
    build_profile(&doc, &flotilla_plugins::default_profile(), &factories).map_err(|e| e.to_string())
}

fn plugin(file: &str, policy: &str) -> Value {
    json!({"plugin": {
        "name": file.trim_end_matches(".wat"),
        "failurePolicy": policy,
        "wasm": {"path": testdata(file).display().to_string()},
        "limits": {"timeoutMs": 1000, "memoryMib": 16},
    }})
}

/// m1 holds c (priority 5, 1 CPU), b (10, 2, newer) and a (10, 2, older); m2 is full with f
/// (200). The preemptor (100) needs 2 CPUs. Built in: c first, then b; c alone is not enough,
/// b alone is, so c is spared: the victim is b.
fn preempt(profile: Profile) -> Result<Option<Preempted>, String> {
    let others = [
        binding("a", 10, 2, Some("m1"), 1),
        binding("b", 10, 2, Some("m1"), 2),
        binding("c", 5, 1, Some("m1"), 3),
        binding("f", 200, 10, Some("m2"), 4),
    ];
    let snap = Snapshot::new(
        vec![cluster("m1", 5, 5), cluster("m2", 10, 10)],
        Arc::new(vec![profile]),
        Options {
            gates: FeatureGates {
                binding_preemption: true,
                ..FeatureGates::default()
            },
            ..Options::default()
        },
    );
    let me = binding("high", 100, 2, None, 10);
    let mut decided = me.clone();
    let d = decide(
        &snap,
        &mut decided,
        None,
        Clock::at_secs(NOW),
        &mut FailoverMemory::default(),
        None,
    );
    let refs: Vec<&ResourceBinding> = others.iter().collect();
    decide_preempting(
        &snap,
        &me,
        &decided,
        &d,
        None,
        Clock::at_secs(NOW),
        &FailoverMemory::default(),
        &refs,
    )
}

fn victims(p: &Preempted) -> Vec<&str> {
    p.preemption
        .victims
        .iter()
        .map(|v| v.name.as_str())
        .collect()
}

#[test]
fn a_wasm_victim_plugin_changes_which_binding_is_evicted() {
    let built_in = preempt(profile(json!({})).expect("profile"))
        .expect("no fault")
        .expect("a preemption");
    assert_eq!(victims(&built_in), ["b"]);

    // The plugin reverses the candidates: a before b (c still first, its priority is lower).
    let p = preempt(profile(plugin("victims_reverse.wat", "Fail")).expect("profile"))
        .expect("no fault")
        .expect("a preemption");
    assert_eq!(p.preemption.cluster, "m1");
    assert_eq!(victims(&p), ["a"]);
    assert!(p.preemption.ignored_faults.is_empty());
    assert_eq!(p.binding.spec.clusters[0].name, "m1");
}

#[test]
fn hostile_victim_replies_abandon_the_preemption_or_leave_the_built_in_choice() {
    for (file, says) in [
        ("victims_out_of_range.wat", "chose candidate 4096 of 3"),
        ("victims_duplicate.wat", "chose candidate 0 twice"),
        ("victims_huge.wat", "exceeded its resource limits"),
    ] {
        let err = preempt(profile(plugin(file, "Fail")).expect("profile"))
            .expect_err("Fail abandons the preemption");
        let name = file.trim_end_matches(".wat");
        assert!(
            err.starts_with("victim plugin: plugin ") && err.contains(name) && err.contains(says),
            "{file}: {err}"
        );
        let p = preempt(profile(plugin(file, "Ignore")).expect("profile"))
            .expect("Ignore keeps going")
            .expect("the built-in preemption");
        assert_eq!(victims(&p), ["b"], "{file}");
        assert_eq!(p.preemption.ignored_faults.len(), 1, "{file}");
        assert!(p.preemption.ignored_faults[0].contains(says), "{file}");
    }
}

#[test]
fn victim_plugins_are_checked_when_the_profile_loads() {
    // A module without flotilla_victims_v1 (a filter) never loads as a victim plugin.
    let err = profile(plugin("pass.wat", "Fail")).expect_err("no victims export");
    assert!(
        err.contains("spec.preemption.plugin (pass)") && err.contains("flotilla_victims_v1"),
        "{err}"
    );
    // CEL rules and a plugin at once are refused, naming the field.
    let mut both = plugin("victims_reverse.wat", "Fail");
    both["victimScore"] = json!("1");
    let err = profile(both).expect_err("both");
    assert!(
        err.contains(
            "spec.preemption: set victimFilter/victimScore (CEL) or plugin (Wasm), not both"
        ),
        "{err}"
    );
    // A plugin without a wasm source has no backend for victims.
    let err = profile(json!({"plugin": {"name": "nothing"}})).expect_err("no source");
    assert!(err.contains("needs a wasm source"), "{err}");
}
