//! Binding preemption's victim selection ([`flotilla_core::preemption`]) with the default
//! profile: lowest priority first, fewest victims, newest first, the cluster needing the fewest
//! victims, `Never` and equal priorities never evicting, and the profile's CEL victim rules.

use std::sync::Arc;

use flotilla_api::cluster::Cluster;
use flotilla_api::work::ResourceBinding;
use flotilla_core::framework::Profile;
use flotilla_core::pipeline::{Clock, FailoverMemory, Options, Snapshot, decide};
use flotilla_core::preemption::{Preempted, VictimRules, decide_preempting, evict_victim};
use flotilla_core::priority::{FeatureGates, PREEMPTION_POLICY_ANNOTATION};
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

/// A scheduled Deployment binding of `priority` with 1-CPU replicas placed as `on`, created at
/// `created` (seconds after an epoch of its own).
fn binding(name: &str, priority: i32, on: &[(&str, i32)], created: i64) -> ResourceBinding {
    let replicas: i32 = on.iter().map(|(_, r)| r).sum();
    let clusters: Vec<Value> = on
        .iter()
        .map(|(c, r)| json!({"name": c, "replicas": r}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {
            "name": name, "namespace": "default", "generation": 1,
            "creationTimestamp": flotilla_core::time::format_rfc3339(NOW - 100_000 + created),
            "annotations": {"policy.karmada.io/applied-placement": serde_json::to_string(&placement(&["m1", "m2"])).unwrap()},
        },
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": name},
            "replicas": replicas,
            "replicaRequirements": {"resourceRequest": {"cpu": "1"}},
            "placement": placement(&["m1", "m2"]),
            "schedulePriority": {"priority": priority},
            "schedulerName": "default-scheduler",
            "clusters": clusters,
        },
        "status": {"schedulerObservedGeneration": 1, "conditions": [{"type": "Scheduled", "status": "True", "reason": "Success", "message": "ok"}]},
    }))
    .expect("binding")
}

fn placement(on: &[&str]) -> Value {
    json!({
        "clusterAffinity": {"clusterNames": on},
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
    })
}

/// A new, unscheduled preemptor of `priority` wanting `replicas` 1-CPU replicas.
fn preemptor(priority: i32, replicas: i32) -> ResourceBinding {
    let mut rb = binding("high", priority, &[], 1_000);
    rb.spec.replicas = replicas;
    rb.spec.clusters.clear();
    rb.status = None;
    rb.metadata.annotations.clear();
    rb
}

fn snapshot(clusters: Vec<Cluster>, rules: VictimRules, gate: bool) -> Snapshot {
    let mut profile: Profile = flotilla_plugins::default_profile();
    profile.preemption = rules;
    if !profile.preemption.is_empty() {
        profile.expressions = Some(Arc::new(flotilla_cel::Engine::default()));
    }
    Snapshot::new(
        clusters,
        Arc::new(vec![profile]),
        Options {
            gates: FeatureGates {
                binding_preemption: gate,
                ..FeatureGates::default()
            },
            ..Options::default()
        },
    )
}

/// Decide `rb` on `snap`; when it is Unschedulable, preempt among `others`.
fn run(
    snap: &Snapshot,
    rb: &ResourceBinding,
    others: &[ResourceBinding],
) -> (ResourceBinding, Result<Option<Preempted>, String>) {
    let mut decided = rb.clone();
    let mut memory = FailoverMemory::default();
    let d = decide(
        snap,
        &mut decided,
        None,
        Clock::at_secs(NOW),
        &mut memory,
        None,
    );
    let others: Vec<&ResourceBinding> = others.iter().collect();
    let res = decide_preempting(
        snap,
        rb,
        &decided,
        &d,
        None,
        Clock::at_secs(NOW),
        &FailoverMemory::default(),
        &others,
    );
    (decided, res)
}

fn victims(p: &Preempted) -> Vec<String> {
    p.preemption
        .victims
        .iter()
        .map(|v| v.name.clone())
        .collect()
}

fn scheduled_reason(rb: &ResourceBinding) -> String {
    rb.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Scheduled"))
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

#[test]
fn the_cluster_needing_the_fewest_victims_is_preempted() {
    // m1: a and b (priority 10, 2 replicas each) and c (priority 5, 1 replica) and d (50, 5);
    // m2: e (priority 10, 4 replicas) and f (200, 6). Both full; the preemptor needs 4.
    let others = vec![
        binding("a", 10, &[("m1", 2)], 1),
        binding("b", 10, &[("m1", 2)], 2),
        binding("c", 5, &[("m1", 1)], 3),
        binding("d", 50, &[("m1", 5)], 4),
        binding("e", 10, &[("m2", 4)], 5),
        binding("f", 200, &[("m2", 6)], 6),
    ];
    let snap = snapshot(
        vec![cluster("m1", 10, 10), cluster("m2", 10, 10)],
        VictimRules::default(),
        true,
    );
    let (decided, res) = run(&snap, &preemptor(100, 4), &others);
    assert_eq!(scheduled_reason(&decided), "Unschedulable");
    let p = res.unwrap().expect("a preemption");
    assert_eq!(p.preemption.cluster, "m2");
    assert_eq!(victims(&p), ["e"]);
    assert_eq!(p.binding.spec.clusters.len(), 1);
    assert_eq!(p.binding.spec.clusters[0].name, "m2");
    assert_eq!(p.binding.spec.clusters[0].replicas, 4);
    assert_eq!(scheduled_reason(&p.binding), "Success");
    assert_eq!(p.preemption.victims[0].replicas, 4);
    // The snapshot left behind: e's 4 CPUs freed, the preemptor's 4 taken.
    let m2 = p.snapshot.cluster("m2").unwrap();
    let allocated = &m2
        .status
        .as_ref()
        .unwrap()
        .resource_summary
        .as_ref()
        .unwrap()
        .allocated;
    assert_eq!(
        serde_json::to_value(&allocated["cpu"]).unwrap(),
        json!("10")
    );
}

#[test]
fn lowest_priority_first_and_unneeded_victims_are_spared() {
    // Only m1 has lower-priority bindings. c (5) goes first, then b (newest of the 10s), then
    // a; c alone or with b frees 3 of the 4 CPUs needed, so a is needed too — and then c is
    // not: the set is {b, a}.
    let others = vec![
        binding("a", 10, &[("m1", 2)], 1),
        binding("b", 10, &[("m1", 2)], 2),
        binding("c", 5, &[("m1", 1)], 3),
        binding("d", 50, &[("m1", 5)], 4),
        binding("f", 200, &[("m2", 10)], 6),
    ];
    let snap = snapshot(
        vec![cluster("m1", 10, 10), cluster("m2", 10, 10)],
        VictimRules::default(),
        true,
    );
    let p = run(&snap, &preemptor(100, 4), &others)
        .1
        .unwrap()
        .expect("a preemption");
    assert_eq!(p.preemption.cluster, "m1");
    assert_eq!(victims(&p), ["b", "a"]);

    // Needing 1 CPU: the lowest priority alone.
    let p = run(&snap, &preemptor(100, 1), &others)
        .1
        .unwrap()
        .expect("a preemption");
    assert_eq!(victims(&p), ["c"]);
}

#[test]
fn among_equals_the_newest_goes_and_bigger_ones_mean_fewer_victims() {
    let others = vec![
        binding("old", 10, &[("m1", 2)], 1),
        binding("newest", 10, &[("m1", 2)], 3),
        binding("middle", 10, &[("m1", 2)], 2),
        binding("big", 10, &[("m1", 4)], 0),
    ];
    let snap = snapshot(vec![cluster("m1", 10, 10)], VictimRules::default(), true);
    let p = run(&snap, &preemptor(100, 2), &others)
        .1
        .unwrap()
        .expect("a preemption");
    // 4 replicas first (fewest victims), and it alone is enough.
    assert_eq!(victims(&p), ["big"]);
    let p = run(&snap, &preemptor(100, 2), &others[..3])
        .1
        .unwrap()
        .expect("a preemption");
    assert_eq!(victims(&p), ["newest"]);
    let p = run(&snap, &preemptor(100, 4), &others[..3])
        .1
        .unwrap()
        .expect("a preemption");
    assert_eq!(victims(&p), ["newest", "middle"]);
}

#[test]
fn never_equal_priorities_and_the_gate_never_evict() {
    let others = vec![
        binding("low", 10, &[("m1", 5)], 1),
        binding("peer", 100, &[("m1", 5)], 2),
    ];
    let snap = snapshot(vec![cluster("m1", 10, 10)], VictimRules::default(), true);
    // Policy Never.
    let mut never = preemptor(100, 4);
    never
        .metadata
        .annotations
        .insert(PREEMPTION_POLICY_ANNOTATION.into(), "Never".into());
    let (decided, res) = run(&snap, &never, &others);
    assert_eq!(scheduled_reason(&decided), "Unschedulable");
    assert!(res.unwrap().is_none(), "Never never evicts");
    // Equal priority: only "low" may go, and it frees 5 >= 4.
    let p = run(&snap, &preemptor(100, 4), &others).1.unwrap().unwrap();
    assert_eq!(victims(&p), ["low"]);
    // Needing more than the lower-priority binding frees: nothing (the peer is never a victim).
    assert!(run(&snap, &preemptor(100, 6), &others).1.unwrap().is_none());
    // A priority at or below everyone's: nothing.
    assert!(run(&snap, &preemptor(10, 1), &others).1.unwrap().is_none());
    // Gate off: nothing.
    let off = snapshot(vec![cluster("m1", 10, 10)], VictimRules::default(), false);
    assert!(run(&off, &preemptor(100, 4), &others).1.unwrap().is_none());
    // A filter failure (no cluster named) is not a capacity problem: nothing.
    let mut elsewhere = preemptor(100, 1);
    elsewhere.spec.placement = serde_json::from_value(placement(&["nowhere"])).ok();
    let (decided, res) = run(&snap, &elsewhere, &others);
    assert_eq!(scheduled_reason(&decided), "NoClusterFit");
    assert!(res.unwrap().is_none());
}

#[test]
fn cel_victim_rules_veto_and_rank() {
    let others = vec![
        binding("a", 10, &[("m1", 2)], 1),
        binding("b", 10, &[("m1", 2)], 3),
        binding("c", 10, &[("m1", 2)], 2),
        binding("keep", 5, &[("m1", 2)], 0),
    ];
    let full = || vec![cluster("m1", 8, 8)];
    // Without rules: the lowest priority.
    let p = run(
        &snapshot(full(), VictimRules::default(), true),
        &preemptor(100, 2),
        &others,
    )
    .1
    .unwrap()
    .unwrap();
    assert_eq!(victims(&p), ["keep"]);
    // Veto "keep" and, for this cluster, "b": the newest remaining is c.
    let rules = VictimRules {
        victim_filter: Some(
            "object.victim.metadata.name != 'keep' && !(object.victim.metadata.name == 'b' && cluster.metadata.name == 'm1')".into(),
        ),
        victim_score: None,
        ..VictimRules::default()
    };
    let p = run(
        &snapshot(full(), rules.clone(), true),
        &preemptor(100, 2),
        &others,
    )
    .1
    .unwrap()
    .unwrap();
    assert_eq!(victims(&p), ["c"]);
    // Rank: within a priority the higher score goes first (a, the oldest).
    let ranked = VictimRules {
        victim_score: Some("object.victim.metadata.name == 'a' ? 10 : 0".into()),
        ..rules
    };
    let p = run(&snapshot(full(), ranked, true), &preemptor(100, 2), &others)
        .1
        .unwrap()
        .unwrap();
    assert_eq!(victims(&p), ["a"]);
    // The preemptor is visible too.
    let mine = VictimRules {
        victim_filter: Some("object.preemptor.spec.replicas > 5".into()),
        victim_score: None,
        ..VictimRules::default()
    };
    assert!(
        run(&snapshot(full(), mine, true), &preemptor(100, 2), &others)
            .1
            .unwrap()
            .is_none()
    );
    // A rule failing at run time abandons the preemption with the error.
    let broken = VictimRules {
        victim_filter: Some("object.victim.metadata.nope == 'x'".into()),
        victim_score: None,
        ..VictimRules::default()
    };
    let err = run(&snapshot(full(), broken, true), &preemptor(100, 2), &others)
        .1
        .unwrap_err();
    assert!(err.contains("victimFilter"), "{err}");
    // Compile errors name the field.
    let bad = VictimRules {
        victim_filter: Some("1 +".into()),
        victim_score: None,
        ..VictimRules::default()
    };
    let engine = flotilla_cel::Engine::default();
    assert!(
        bad.check(Some(&engine))
            .unwrap_err()
            .starts_with("preemption.victimFilter: invalid CEL expression")
    );
    assert!(bad.check(None).is_err());
    assert!(VictimRules::default().check(None).is_ok());
}

#[test]
fn an_evicted_victim_loses_the_cluster_and_keeps_off_it() {
    let others = vec![binding("low", 10, &[("m1", 4), ("m2", 2)], 1)];
    let snap = snapshot(
        vec![cluster("m1", 4, 4), cluster("m2", 4, 2)],
        VictimRules::default(),
        true,
    );
    let p = run(&snap, &preemptor(100, 6), &others).1.unwrap().unwrap();
    assert_eq!(p.preemption.cluster, "m1");
    let mut victim = others[0].clone();
    evict_victim(&mut victim, &p.preemption, NOW);
    assert_eq!(victim.spec.clusters.len(), 1);
    assert_eq!(victim.spec.clusters[0].name, "m2");
    let task = &victim.spec.graceful_eviction_tasks[0];
    assert_eq!(
        (
            task.from_cluster.as_str(),
            task.reason.as_str(),
            task.purge_mode.as_deref()
        ),
        ("m1", "Preempted", Some("Directly"))
    );
    assert_eq!(
        task.message,
        "Preempted by default/high (priority 100) on cluster m1"
    );
    // Back through the queue on the snapshot the preemption left: m1 is out (ClusterEviction),
    // m2 has no room for the 4 replicas it lost.
    victim.metadata.generation = Some(2);
    let d = decide(
        &p.snapshot,
        &mut victim,
        None,
        Clock::at_secs(NOW),
        &mut FailoverMemory::default(),
        None,
    );
    assert!(d.scheduled);
    assert_eq!(scheduled_reason(&victim), "Unschedulable");
    assert!(victim.spec.clusters.iter().all(|c| c.name != "m1"));
}

#[test]
fn profiles_declare_victim_rules_and_bad_ones_are_refused() {
    use flotilla_core::profile::{Factories, PluginFactory, ProfileDocument, build_profile};
    let engine = Arc::new(flotilla_cel::Engine::default());
    let factories = Factories::new([
        Arc::new(flotilla_plugins::BuiltinFactory) as Arc<dyn PluginFactory>,
        Arc::new(flotilla_cel::CelFactory::new(engine.clone())),
    ]);
    let mut base = flotilla_plugins::default_profile();
    base.expressions = Some(engine);
    let doc = |rules: Value| -> ProfileDocument {
        serde_json::from_value(json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile",
            "metadata": {"name": "careful"},
            "spec": {"preemption": rules},
        }))
        .expect("profile document")
    };
    let built = build_profile(
        &doc(json!({"victimFilter": "object.victim.metadata.namespace != 'prod'", "victimScore": "1"})),
        &base,
        &factories,
    )
    .expect("builds");
    assert_eq!(
        built.preemption.victim_filter.as_deref(),
        Some("object.victim.metadata.namespace != 'prod'")
    );
    assert_eq!(built.preemption.victim_score.as_deref(), Some("1"));
    let err = build_profile(&doc(json!({"victimScore": "'text'"})), &base, &factories)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("careful") && err.contains("spec.preemption.victimScore"),
        "{err}"
    );
    assert!(
        serde_json::from_value::<ProfileDocument>(json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile",
            "metadata": {"name": "x"}, "spec": {"preemption": {"victims": "1"}},
        }))
        .is_err(),
        "unknown fields are refused"
    );
}
