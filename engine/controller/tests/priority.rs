//! Priority-based scheduling and policy preemption, live: the embedded API server, simulated
//! members and every controller, in process.
//!
//! - 1,000 bindings of mixed priority pending before the scheduler starts are scheduled highest
//!   priority first (the order the API server commits their `Scheduled` condition in); with the
//!   `PriorityBasedScheduling` gate off the same batch is first in, first out.
//! - A policy's `schedulePriority` is resolved from a PriorityClass into its binding.
//! - A policy with `preemption: Always` and a higher priority takes a claimed template over (with
//!   Karmada's `PreemptPolicySucceed` Event), and a claim is otherwise sticky.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::{Settings, api_resource, client};
use futures::StreamExt as _;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

mod common;
use common::{cpu_deployment, eventually};

const PRIORITIES: [i32; 4] = [0, 10, 100, 1000];

struct Server {
    server: Arc<ApiServer>,
    control: Client,
    _dir: tempfile::TempDir,
}

fn server() -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(
        store,
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    let control = client::in_process(server.router(), None, None);
    Server {
        server,
        control,
        _dir: dir,
    }
}

async fn start(s: &Server, gates: &str) -> flotilla_controller::Running {
    let mut settings = Settings {
        ready_delay: Duration::from_millis(100),
        ..Settings::default()
    };
    settings
        .pipeline
        .gates
        .set(gates)
        .expect("valid feature gates");
    flotilla_controller::start_embedded(
        s.server.router(),
        flotilla_controller::Embedded {
            members: 1,
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start")
}

fn rbs(c: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        c.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    )
}

fn scheduled(rb: &DynamicObject) -> bool {
    rb.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Scheduled" && c["status"] == "True")
        })
}

/// Create `n` pending bindings (priorities cycling through [`PRIORITIES`], so creation order
/// interleaves them), start the controllers, and return the priorities in the order the bindings
/// became scheduled.
async fn schedule_batch(n: usize, gates: &str) -> Vec<i32> {
    let s = server();
    let api = rbs(&s.control);
    let cms = Api::<DynamicObject>::namespaced_with(
        s.control.clone(),
        "default",
        &api_resource("v1", "ConfigMap"),
    );
    for i in 0..n {
        // The template (a binding whose template is gone is removed by the binding controller).
        let cm = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": format!("cm-{i:04}"), "namespace": "default"},
                               "data": {"i": i.to_string()}}));
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create template");
        let p = PRIORITIES[i % PRIORITIES.len()];
        let rb: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": format!("rb-{i:04}"), "namespace": "default"},
            "spec": {
                "resource": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": format!("cm-{i:04}")},
                "placement": {"clusterAffinity": {"clusterNames": ["member1"]}},
                "schedulePriority": {"priority": p},
                "schedulerName": "default-scheduler",
            },
        }))
        .expect("binding");
        api.create(&PostParams::default(), &rb)
            .await
            .expect("create binding");
    }
    // The commit order of first `Scheduled=True`, as a watch sees it.
    let order = Arc::new(Mutex::new(Vec::<i32>::new()));
    let watching = {
        let order = order.clone();
        let stream = kube::runtime::watcher(api.clone(), kube::runtime::watcher::Config::default());
        tokio::spawn(async move {
            let mut seen = HashMap::new();
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(ev)) = stream.next().await {
                if let kube::runtime::watcher::Event::Apply(rb)
                | kube::runtime::watcher::Event::InitApply(rb) = ev
                    && scheduled(&rb)
                {
                    let name = rb.metadata.name.clone().unwrap_or_default();
                    if seen.insert(name, ()).is_none() {
                        let p = rb
                            .data
                            .pointer("/spec/schedulePriority/priority")
                            .and_then(Value::as_i64)
                            .unwrap_or(0);
                        order.lock().unwrap().push(i32::try_from(p).unwrap());
                    }
                }
            }
        })
    };
    let running = start(&s, gates).await;
    eventually(
        "every binding scheduled",
        Duration::from_secs(240),
        || async { (order.lock().unwrap().len() >= n).then_some(()) },
    )
    .await;
    watching.abort();
    let metrics = running.context.metrics.render();
    assert!(
        metrics.contains("flotilla_scheduler_pending_bindings{queue=\"unschedulable\"} 0\n"),
        "{metrics}"
    );
    drop(running);
    order.lock().unwrap().clone()
}

/// Where each priority's bindings landed in the order: (first, last, mean) positions.
fn spread(order: &[i32], p: i32) -> (usize, usize, f64) {
    let pos: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, q)| **q == p)
        .map(|(i, _)| i)
        .collect();
    let mean = pos.iter().sum::<usize>() as f64 / pos.len().max(1) as f64;
    (pos[0], pos[pos.len() - 1], mean)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_pending_bindings_are_scheduled_highest_priority_first() {
    let n = 1000;
    let order = schedule_batch(n, "").await;
    assert_eq!(order.len(), n);
    let per = n / PRIORITIES.len();
    // The scheduler's workers run concurrently, so neighbours at a class boundary may commit a
    // few places apart; a class never mixes with one two steps away.
    let slack = usize::from(flotilla_controller::controller::CONCURRENCY);
    let spreads: Vec<(usize, usize, f64)> = PRIORITIES.iter().map(|p| spread(&order, *p)).collect();
    for (rank, p) in PRIORITIES.iter().rev().enumerate() {
        let (first, last, _) = spreads[PRIORITIES.len() - 1 - rank];
        assert!(
            first + slack >= rank * per && last <= (rank + 1) * per + slack,
            "priority {p} scheduled at positions {first}..={last}, expected about {}..{}",
            rank * per,
            (rank + 1) * per
        );
    }
    for w in spreads.windows(2) {
        assert!(
            w[0].2 > w[1].2,
            "mean positions not ordered by priority: {spreads:?}"
        );
    }
    for (lo, hi) in [(0, 2), (1, 3)] {
        assert!(
            spreads[hi].1 < spreads[lo].0,
            "priority {} and {} overlap: {spreads:?}",
            PRIORITIES[hi],
            PRIORITIES[lo]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gate_off_pending_bindings_are_first_in_first_out() {
    let n = 200;
    let order = schedule_batch(n, "PriorityBasedScheduling=false").await;
    assert_eq!(order.len(), n);
    let (first, last, _) = spread(&order, 1000);
    assert!(
        first < n / 8 && last > n * 7 / 8,
        "priority 1000 should be spread through the batch without priorities: {first}..={last}"
    );
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).expect("object")
}

fn api_of(c: &Client, v: &Value) -> Api<DynamicObject> {
    let res = api_resource(
        v["apiVersion"].as_str().unwrap(),
        v["kind"].as_str().unwrap(),
    );
    match v.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &res),
        None => Api::all_with(c.clone(), &res),
    }
}

async fn apply(c: &Client, v: Value) {
    let name = v["metadata"]["name"].as_str().unwrap().to_owned();
    api_of(c, &v)
        .patch(
            &name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(object(v)),
        )
        .await
        .expect("apply");
}

fn policy(name: &str, priority: i32, preemption: &str, class: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "priority": priority,
            "preemption": preemption,
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}},
        },
    });
    if let Some(c) = class {
        p["spec"]["schedulePriority"] =
            json!({"priorityClassSource": "KubePriorityClass", "priorityClassName": c});
    }
    p
}

async fn claimed_by(c: &Client) -> Option<(String, i64)> {
    let deploy = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        "default",
        &api_resource("apps/v1", "Deployment"),
    )
    .get_opt("web")
    .await
    .ok()??;
    let pp = deploy
        .metadata
        .annotations
        .as_ref()?
        .get("propagationpolicy.karmada.io/name")?
        .clone();
    let rb = rbs(c).get_opt("web-deployment").await.ok()??;
    let rb_pp = rb
        .metadata
        .annotations
        .as_ref()?
        .get("propagationpolicy.karmada.io/name")?;
    if *rb_pp != pp {
        return None;
    }
    let priority = rb
        .data
        .pointer("/spec/schedulePriority/priority")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Some((pp, priority))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempting_policy_takes_the_template_over_and_brings_its_priority() {
    let s = server();
    let _running = start(&s, "PropagationPolicyPreemption=true").await;
    let c = &s.control;
    for (name, value) in [("batch-low", 10), ("critical", 100_000)] {
        apply(
            c,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": name}, "value": value}),
        )
        .await;
    }
    apply(c, policy("low", 1, "Never", Some("batch-low"))).await;
    apply(
        c,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
        }),
    )
    .await;
    let wait = Duration::from_secs(30);
    eventually("claimed by low with its class's priority", wait, || async {
        (claimed_by(c).await == Some(("low".into(), 10))).then_some(())
    })
    .await;

    // A better policy without `preemption: Always` does not take a claimed template.
    apply(c, policy("plain", 50, "Never", None)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(claimed_by(c).await, Some(("low".into(), 10)), "sticky");

    apply(c, policy("high", 60, "Always", Some("critical"))).await;
    eventually("preempted by high", wait, || async {
        (claimed_by(c).await == Some(("high".into(), 100_000))).then_some(())
    })
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let params = kube::api::ListParams::default()
        .fields("involvedObject.kind=Deployment,involvedObject.name=web");
    let messages = eventually("the preemption event", wait, || async {
        let list = events.list(&params).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("PreemptPolicySucceed"))
            .and_then(|e| e.message)
    })
    .await;
    assert_eq!(
        messages,
        "Propagation policy(default/high) preempted propagation policy(default/low) successfully"
    );

    // A policy naming a PriorityClass that does not exist leaves no binding from it: the
    // detector reports it on the template instead.
    apply(c, policy("higher", 70, "Always", Some("missing"))).await;
    eventually("the resolution failure event", wait, || async {
        let list = events.list(&params).await.ok()?;
        list.items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("ApplyPolicyFailed")
                    && e.message
                        .as_deref()
                        .is_some_and(|m| m.contains("\"missing\" not found"))
            })
            .map(|_| ())
    })
    .await;
    assert_eq!(claimed_by(c).await, Some(("high".into(), 100_000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_classes_are_validated_as_kube_apiserver_does() {
    let s = server();
    let api = Api::<DynamicObject>::all_with(
        s.control.clone(),
        &api_resource("scheduling.k8s.io/v1", "PriorityClass"),
    );
    let pc = |name: &str, value: i64, default: bool| {
        object(
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": name}, "value": value, "globalDefault": default}),
        )
    };
    let created = api
        .create(&PostParams::default(), &pc("a", 5, true))
        .await
        .expect("create");
    assert_eq!(created.data["preemptionPolicy"], "PreemptLowerPriority");
    let err = api
        .create(&PostParams::default(), &pc("b", 6, true))
        .await
        .expect_err("a second default");
    assert!(
        err.to_string()
            .contains("PriorityClass a is already marked as default. Only one default can exist"),
        "{err}"
    );
    let err = api
        .create(&PostParams::default(), &pc("c", 2_000_000_000, false))
        .await
        .expect_err("too high");
    assert!(
        err.to_string()
            .contains("maximum allowed value of a user defined priority is 1000000000"),
        "{err}"
    );
    let err = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"value": 7})),
        )
        .await
        .expect_err("immutable value");
    assert!(
        err.to_string().contains("may not be changed in an update"),
        "{err}"
    );
}

/// A policy placing Deployment `name` on member1 with PriorityClass `class`.
fn class_policy(name: &str, class: &str) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "schedulePriority": {"priorityClassSource": "KubePriorityClass", "priorityClassName": class},
            "placement": {
                "clusterAffinity": {"clusterNames": ["member1"]},
                "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
            },
        },
    })
}

/// The binding's `spec.clusters` as `(name, replicas)`.
async fn placed(c: &Client, name: &str) -> Option<Vec<(String, i64)>> {
    let rb = rbs(c).get_opt(name).await.ok()??;
    Some(
        rb.data
            .pointer("/spec/clusters")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|t| {
                        (
                            t["name"].as_str().unwrap_or("").to_owned(),
                            t["replicas"].as_i64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
    )
}

async fn condition(c: &Client, name: &str) -> Option<(String, String)> {
    let rb = rbs(c).get_opt(name).await.ok()??;
    rb.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Scheduled")
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_owned(),
                c["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
}

/// The messages of Events with `reason` about ResourceBinding `name`.
async fn binding_events(c: &Client, name: &str, reason: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let params = kube::api::ListParams::default().fields(&format!(
        "involvedObject.kind=ResourceBinding,involvedObject.name={name}"
    ));
    events
        .list(&params)
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .filter_map(|e| e.message)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_preemption_evicts_the_newest_lower_priority_binding_and_never_never_does() {
    let s = server();
    let mut settings = Settings {
        ready_delay: Duration::from_millis(100),
        ..Settings::default()
    };
    settings
        .pipeline
        .gates
        .set("BindingPreemption=true")
        .expect("valid feature gates");
    let running = flotilla_controller::start_embedded(
        s.server.router(),
        flotilla_controller::Embedded {
            members: 1,
            capacity: flotilla_controller::members::Capacity {
                cpu: "4".into(),
                memory: "16Gi".into(),
                pods: "110".into(),
            },
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    let c = &s.control;
    let wait = Duration::from_secs(60);
    for (name, value, policy) in [
        ("batch", 10, "PreemptLowerPriority"),
        ("critical", 1000, "PreemptLowerPriority"),
        ("critical-waits", 1000, "Never"),
    ] {
        apply(
            c,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": name}, "value": value, "preemptionPolicy": policy}),
        )
        .await;
    }
    for (name, class) in [
        ("batch-a", "batch"),
        ("batch-b", "batch"),
        ("payments", "critical"),
        ("reports", "critical-waits"),
    ] {
        apply(c, class_policy(name, class)).await;
    }
    // Two batch Deployments fill member1 (2 + 2 of its 4 CPUs), batch-b the newer.
    for name in ["batch-a", "batch-b"] {
        apply(c, cpu_deployment(name, 2)).await;
        let rb = format!("{name}-deployment");
        eventually("the batch binding placed", wait, || async {
            (placed(c, &rb).await? == [("member1".to_owned(), 2)]).then_some(())
        })
        .await;
        // Creation timestamps have one-second resolution.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    // The member reports them (simulated members keep the summary they are given).
    let clusters = Api::<DynamicObject>::all_with(
        c.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    );
    clusters
        .patch_status(
            "member1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"resourceSummary": {
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "allocated": {"cpu": "4", "memory": "0", "pods": "4"},
            }}})),
        )
        .await
        .expect("cluster status");

    // Same priority as payments, but preemptionPolicy: Never: it waits and evicts nobody.
    apply(c, cpu_deployment("reports", 1)).await;
    eventually("reports unschedulable", wait, || async {
        (condition(c, "reports-deployment").await? == ("False".into(), "Unschedulable".into()))
            .then_some(())
    })
    .await;
    let reports = rbs(c).get("reports-deployment").await.expect("reports");
    assert_eq!(
        reports.metadata.annotations.as_ref().unwrap()["scheduling.flotilla.dev/preemption-policy"],
        "Never"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        placed(c, "batch-b-deployment").await.unwrap(),
        [("member1".to_owned(), 2)]
    );
    assert_eq!(running.context.metrics.preemptions(), (0, 0));

    // payments (1000, PreemptLowerPriority) needs 2 CPUs: batch-b, the newest of the two
    // lowest, is enough.
    apply(c, cpu_deployment("payments", 2)).await;
    eventually("payments placed on the freed capacity", wait, || async {
        (placed(c, "payments-deployment").await? == [("member1".to_owned(), 2)]).then_some(())
    })
    .await;
    // The placement (spec) and the Scheduled condition (status) are two writes, as in Karmada's
    // scheduler: the condition may land a moment after the clusters.
    eventually("payments Scheduled=True/Success", wait, || async {
        (condition(c, "payments-deployment").await? == ("True".into(), "Success".into()))
            .then_some(())
    })
    .await;
    eventually("batch-b rescheduled and unschedulable", wait, || async {
        (placed(c, "batch-b-deployment").await?.is_empty()
            && condition(c, "batch-b-deployment").await?.0 == "False")
            .then_some(())
    })
    .await;
    // Its eviction task (Directly, reason Preempted) kept it off member1 while it was
    // rescheduled; the assessment drops it once the binding is scheduled (here: nowhere).
    let victim = rbs(c).get("batch-b-deployment").await.expect("victim");
    for task in victim.data["spec"]["gracefulEvictionTasks"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert_eq!(
            (&task["fromCluster"], &task["reason"], &task["purgeMode"]),
            (&json!("member1"), &json!("Preempted"), &json!("Directly"))
        );
    }
    assert_eq!(
        placed(c, "batch-a-deployment").await.unwrap(),
        [("member1".to_owned(), 2)],
        "the older batch binding stays"
    );
    let preempted = eventually("the Preempted event", wait, || async {
        binding_events(c, "batch-b-deployment", "Preempted")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        preempted,
        "Preempted by default/payments-deployment (priority 1000) on cluster member1"
    );
    let succeeded = eventually("the PreemptionSucceeded event", wait, || async {
        binding_events(c, "payments-deployment", "PreemptionSucceeded")
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(
        succeeded,
        "Preempted 1 binding(s) of lower priority on cluster member1: default/batch-b-deployment"
    );
    assert!(
        binding_events(c, "batch-a-deployment", "Preempted")
            .await
            .is_empty()
    );
    // The victim's Work leaves member1.
    let works = Api::<DynamicObject>::namespaced_with(
        c.clone(),
        "karmada-es-member1",
        &api_resource("work.karmada.io/v1alpha1", "Work"),
    );
    eventually("batch-b's Work removed from member1", wait, || async {
        let list = works.list(&Default::default()).await.ok()?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|w| w.metadata.name.clone())
            .collect();
        (names.iter().any(|n| n.starts_with("payments-"))
            && !names.iter().any(|n| n.starts_with("batch-b-")))
        .then_some(())
    })
    .await;
    // reports never preempted: one preemption, one victim, and it is still waiting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(running.context.metrics.preemptions(), (1, 1));
    let metrics = running.context.metrics.render();
    assert!(
        metrics.contains("flotilla_scheduler_preemptions_total 1\n")
            && metrics.contains("flotilla_scheduler_preemption_victims_total 1\n"),
        "{metrics}"
    );
    assert_eq!(
        condition(c, "reports-deployment").await.unwrap(),
        ("False".into(), "Unschedulable".into())
    );
    assert!(
        placed(c, "reports-deployment")
            .await
            .unwrap_or_default()
            .is_empty()
    );
}
