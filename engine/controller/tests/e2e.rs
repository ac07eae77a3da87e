//! End to end, in process: the embedded API server, two simulated members and every controller.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use flotilla_controller::{Settings, api_resource, client, members};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};

mod common;
use common::eventually;

struct Env {
    control: Client,
    member: Vec<Client>,
    running: flotilla_controller::Running,
    _server: Arc<ApiServer>,
    _dir: tempfile::TempDir,
}

async fn env() -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(
        store,
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    let settings = Settings {
        ready_delay: Duration::from_millis(100),
        ..Settings::default()
    };
    let opts = flotilla_controller::Embedded {
        members: 2,
        settings,
        ..Default::default()
    };
    let running = flotilla_controller::start_embedded(server.router(), opts)
        .await
        .expect("controllers start");
    let router = server.router();
    let control = client::in_process(router.clone(), None, None);
    let names = members::names(2);
    let member = names
        .iter()
        .map(|n| client::in_process(router.clone(), Some(n), None))
        .collect();
    Env {
        control,
        member,
        running,
        _server: server,
        _dir: dir,
    }
}

fn example(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/nginx")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("example reads");
    serde_yaml::from_str(&text).expect("example parses")
}

fn api_for(client: &Client, obj: &Value) -> Api<DynamicObject> {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let res = api_resource(&s("/apiVersion"), &s("/kind"));
    let ns = s("/metadata/namespace");
    if ns.is_empty() {
        Api::all_with(client.clone(), &res)
    } else {
        Api::namespaced_with(client.clone(), &ns, &res)
    }
}

async fn apply(client: &Client, obj: &Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .expect("name");
    api_for(client, obj)
        .patch(
            name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(obj),
        )
        .await
        .expect("apply");
}

const WAIT: Duration = Duration::from_secs(20);

fn deployments(c: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), "default", &api_resource("apps/v1", "Deployment"))
}

async fn member_deployment(c: &Client) -> Option<DynamicObject> {
    deployments(c).get_opt("nginx").await.ok().flatten()
}

fn replicas(d: &DynamicObject) -> i64 {
    d.data
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(-1)
}

fn image(d: &DynamicObject) -> String {
    d.data
        .pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

async fn split(e: &Env) -> Vec<(String, i64)> {
    let rbs: Api<DynamicObject> = Api::namespaced_with(
        e.control.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    );
    let Ok(Some(rb)) = rbs.get_opt("nginx-deployment").await else {
        return Vec::new();
    };
    rb.data
        .pointer("/spec/clusters")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_owned(),
                        c["replicas"].as_i64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn seed(e: &Env) {
    for f in [
        "propagationpolicy.yaml",
        "overridepolicy.yaml",
        "deployment.yaml",
    ] {
        apply(&e.control, &example(f)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_example_propagates_one_replica_to_each_member_with_the_override_on_member2() {
    let e = env().await;
    seed(&e).await;
    let (d1, d2) = eventually("both member copies", WAIT, || async {
        Some((
            member_deployment(&e.member[0]).await?,
            member_deployment(&e.member[1]).await?,
        ))
    })
    .await;
    assert_eq!((replicas(&d1), replicas(&d2)), (1, 1));
    assert_eq!(image(&d1), "nginx:1.27");
    assert_eq!(image(&d2), "registry.member2.example/nginx:1.27");
    assert_eq!(
        split(&e).await,
        vec![("member1".to_owned(), 1), ("member2".to_owned(), 1)]
    );

    // The binding is Scheduled, both Works Applied, and member status flows back to the template.
    let rbs: Api<DynamicObject> = Api::namespaced_with(
        e.control.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    );
    let rb = rbs.get("nginx-deployment").await.expect("rb");
    let scheduled = rb
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Scheduled"))
        .cloned();
    assert_eq!(
        scheduled.as_ref().map(|c| c["status"].clone()),
        Some(json!("True")),
        "{rb:?}"
    );
    for m in ["member1", "member2"] {
        let works: Api<DynamicObject> = Api::namespaced_with(
            e.control.clone(),
            &format!("karmada-es-{m}"),
            &api_resource("work.karmada.io/v1alpha1", "Work"),
        );
        let list = works.list(&Default::default()).await.expect("works");
        assert_eq!(list.items.len(), 1, "one Work in {m}");
    }
    let template = eventually("template status summed", WAIT, || async {
        let d = deployments(&e.control).get("nginx").await.ok()?;
        let ready = d
            .data
            .pointer("/status/readyReplicas")
            .and_then(Value::as_i64);
        let available = d
            .data
            .pointer("/status/availableReplicas")
            .and_then(Value::as_i64);
        (ready == Some(2) && available == Some(2)).then_some(d)
    })
    .await;
    // The template is claimed by its policy.
    let labels = template.metadata.labels.clone().unwrap_or_default();
    assert!(
        labels.contains_key("propagationpolicy.karmada.io/permanent-id"),
        "{labels:?}"
    );
    let rb = rbs.get("nginx-deployment").await.expect("rb");
    let agg = rb
        .data
        .pointer("/status/aggregatedStatus")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(agg.len(), 2, "{agg:?}");
    assert!(agg.iter().all(|i| i["applied"] == json!(true)), "{agg:?}");

    // Every controller ran, and /metrics says so.
    let metrics = &e.running.context.metrics;
    for c in flotilla_controller::controller::NAMES {
        assert!(metrics.reconciles_of(c) > 0, "{c} reconciled");
    }
    assert!(metrics.scheduling.count() > 0);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let served =
        flotilla_controller::controller::serve_metrics(listener, e.running.context.clone());
    let body = http_get(addr, "/metrics").await;
    served.abort();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(
        body.contains("flotilla_reconcile_total{controller=\"execution\"}"),
        "{body}"
    );
    assert!(
        body.contains("flotilla_scheduling_duration_seconds_bucket{le=\"+Inf\"}"),
        "{body}"
    );
    assert!(
        body.contains("flotilla_events_total{result=\"created\"}"),
        "{body}"
    );
}

async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_the_template_to_five_redivides_stably() {
    let e = env().await;
    seed(&e).await;
    eventually("initial split", WAIT, || async {
        (split(&e).await.len() == 2).then_some(())
    })
    .await;
    deployments(&e.control)
        .patch(
            "nginx",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("scale");
    let first = eventually("split of 5", WAIT, || async {
        let s = split(&e).await;
        (s.iter().map(|(_, r)| r).sum::<i64>() == 5).then_some(s)
    })
    .await;
    let mut counts: Vec<i64> = first.iter().map(|(_, r)| *r).collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![2, 3], "{first:?}");
    // Members follow the split.
    eventually("members at 5", WAIT, || async {
        let a = replicas(&member_deployment(&e.member[0]).await?);
        let b = replicas(&member_deployment(&e.member[1]).await?);
        (vec![("member1".to_owned(), a), ("member2".to_owned(), b)] == first).then_some(())
    })
    .await;
    // A template change that does not touch replicas keeps the division.
    deployments(&e.control)
        .patch(
            "nginx",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("touch");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(split(&e).await, first, "the division is stable");
    // Back to 2 and up to 5 again gives the same answer.
    for n in [2, 5] {
        deployments(&e.control)
            .patch(
                "nginx",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": n}})),
            )
            .await
            .expect("scale");
        eventually("rescaled", WAIT, || async {
            (split(&e).await.iter().map(|(_, r)| r).sum::<i64>() == n).then_some(())
        })
        .await;
    }
    assert_eq!(
        split(&e).await,
        first,
        "the same division after scaling down and up"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_template_removes_the_member_copies_works_and_binding() {
    let e = env().await;
    seed(&e).await;
    eventually("both member copies", WAIT, || async {
        Some((
            member_deployment(&e.member[0]).await?,
            member_deployment(&e.member[1]).await?,
        ))
    })
    .await;
    deployments(&e.control)
        .delete("nginx", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("member copies gone", WAIT, || async {
        (member_deployment(&e.member[0]).await.is_none()
            && member_deployment(&e.member[1]).await.is_none())
        .then_some(())
    })
    .await;
    eventually("binding and works gone", WAIT, || async {
        let rbs: Api<DynamicObject> = Api::all_with(
            e.control.clone(),
            &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
        );
        let works: Api<DynamicObject> = Api::all_with(
            e.control.clone(),
            &api_resource("work.karmada.io/v1alpha1", "Work"),
        );
        let n = rbs.list(&Default::default()).await.ok()?.items.len()
            + works.list(&Default::default()).await.ok()?.items.len();
        (n == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preserve_resources_on_deletion_keeps_the_member_copies() {
    let e = env().await;
    let mut pp = example("propagationpolicy.yaml");
    pp["spec"]["preserveResourcesOnDeletion"] = json!(true);
    apply(&e.control, &pp).await;
    apply(&e.control, &example("deployment.yaml")).await;
    eventually("both member copies", WAIT, || async {
        Some((
            member_deployment(&e.member[0]).await?,
            member_deployment(&e.member[1]).await?,
        ))
    })
    .await;
    deployments(&e.control)
        .delete("nginx", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("works gone", WAIT, || async {
        let works: Api<DynamicObject> = Api::all_with(
            e.control.clone(),
            &api_resource("work.karmada.io/v1alpha1", "Work"),
        );
        works
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(
        member_deployment(&e.member[0]).await.is_some(),
        "member1 keeps its copy"
    );
    assert!(
        member_deployment(&e.member[1]).await.is_some(),
        "member2 keeps its copy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_members_register_ready_with_capacity_and_api_enablements() {
    let started = std::time::Instant::now();
    let e = env().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "ready in {:?}",
        started.elapsed()
    );
    let clusters: Api<DynamicObject> = Api::all_with(
        e.control.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    );
    let list = clusters.list(&Default::default()).await.expect("clusters");
    let names: Vec<String> = list
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(names, ["member1", "member2"]);
    for c in &list.items {
        let c: flotilla_api::cluster::Cluster =
            flotilla_controller::typed(c).expect("decodes as a Karmada Cluster");
        let status = c.status.expect("status");
        assert!(
            status
                .conditions
                .iter()
                .any(|x| x.type_ == "Ready" && x.status == "True")
        );
        assert!(
            status
                .api_enablements
                .iter()
                .any(|a| a.group_version == "apps/v1"
                    && a.resources.iter().any(|r| r.kind == "Deployment"))
        );
        let alloc = status.resource_summary.expect("summary").allocatable;
        assert_eq!(
            serde_json::to_value(&alloc).expect("json")["cpu"],
            json!("64")
        );
    }
}

async fn set_ready(e: &Env, cluster: &str, status: &str) {
    let clusters: Api<DynamicObject> = Api::all_with(
        e.control.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    );
    let patch = json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": "Simulated", "message": "set by the test"}]}});
    clusters
        .patch_status(cluster, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("cluster status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_member_is_failed_over_within_toleration_seconds_and_nothing_is_duplicated_when_it_returns()
 {
    let e = env().await;
    let mut pp = example("propagationpolicy.yaml");
    pp["spec"]["placement"]["clusterTolerations"] = json!([{"key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]);
    apply(&e.control, &pp).await;
    apply(&e.control, &example("deployment.yaml")).await;
    eventually("both member copies", WAIT, || async {
        Some((
            member_deployment(&e.member[0]).await?,
            member_deployment(&e.member[1]).await?,
        ))
    })
    .await;

    let marked = std::time::Instant::now();
    set_ready(&e, "member2", "Unknown").await;
    eventually("failed over to member1", WAIT, || async {
        (split(&e).await == vec![("member1".to_owned(), 2)]).then_some(())
    })
    .await;
    assert!(
        marked.elapsed() <= Duration::from_secs(2 + 5),
        "failed over after {:?}",
        marked.elapsed()
    );
    eventually("member1 runs 2, member2 none", WAIT, || async {
        let d1 = member_deployment(&e.member[0]).await?;
        (replicas(&d1) == 2 && member_deployment(&e.member[1]).await.is_none()).then_some(())
    })
    .await;

    // member2 returns: the taints go, and nothing moves back or runs twice.
    set_ready(&e, "member2", "True").await;
    let clusters: Api<DynamicObject> = Api::all_with(
        e.control.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    );
    eventually("taints removed", WAIT, || async {
        let c = clusters.get("member2").await.ok()?;
        c.data
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(split(&e).await, vec![("member1".to_owned(), 2)]);
    assert!(
        member_deployment(&e.member[1]).await.is_none(),
        "no copy on member2"
    );
    let works: Api<DynamicObject> = Api::all_with(
        e.control.clone(),
        &api_resource("work.karmada.io/v1alpha1", "Work"),
    );
    assert_eq!(
        works
            .list(&Default::default())
            .await
            .expect("works")
            .items
            .len(),
        1
    );
}

/// Make the application unavailable on member1 (fault injection, owned by its own field manager
/// so the execution controller's applies leave it alone).
async fn break_on_member1(e: &Env) {
    let broken = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "default",
        "annotations": {flotilla_controller::controller::simulator::UNAVAILABLE: "true"}},
    });
    deployments(&e.member[0])
        .patch("nginx", &PatchParams::apply("chaos"), &Patch::Apply(broken))
        .await
        .expect("annotate");
}

/// Propagate the nginx example with `propagateDeps` until both members are healthy, then give the
/// policy `failover` and wait until the binding carries it. The failover comes last on purpose: a
/// freshly created member Deployment is Unhealthy until its status catches up (Karmada's health
/// rule), and a short `tolerationSeconds` already in force could fail it over while it starts
/// when the machine is slow.
async fn propagate_then_set_failover(e: &Env, failover: Value) {
    let mut pp = example("propagationpolicy.yaml");
    pp["spec"]["propagateDeps"] = json!(true);
    apply(&e.control, &pp).await;
    apply(&e.control, &example("deployment.yaml")).await;
    eventually("both members healthy", WAIT, || async {
        let rb = binding(e).await?;
        let items = rb
            .data
            .pointer("/status/aggregatedStatus")?
            .as_array()?
            .clone();
        (items.len() == 2 && items.iter().all(|i| i["health"] == "Healthy")).then_some(())
    })
    .await;
    pp["spec"]["failover"] = failover.clone();
    apply(&e.control, &pp).await;
    eventually("the binding has the failover behaviour", WAIT, || async {
        let rb = binding(e).await?;
        (rb.data.pointer("/spec/failover")? == &failover).then_some(())
    })
    .await;
}

fn eviction_tasks(rb: &DynamicObject) -> Vec<Value> {
    rb.data
        .pointer("/spec/gracefulEvictionTasks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

async fn binding(e: &Env) -> Option<DynamicObject> {
    let rbs: Api<DynamicObject> = Api::namespaced_with(
        e.control.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    );
    rbs.get_opt("nginx-deployment").await.ok().flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_application_fails_over_after_toleration_seconds_and_the_old_copy_goes_once_the_new_one_is_healthy()
 {
    let e = env().await;
    propagate_then_set_failover(
        &e,
        json!({"application": {"decisionConditions": {"tolerationSeconds": 2}, "purgeMode": "Gracefully", "gracePeriodSeconds": 60}}),
    )
    .await;

    // The application breaks on member1.
    break_on_member1(&e).await;
    let unhealthy = eventually("member1 unhealthy", WAIT, || async {
        let rb = binding(&e).await?;
        let items = rb
            .data
            .pointer("/status/aggregatedStatus")?
            .as_array()?
            .clone();
        items
            .iter()
            .any(|i| i["clusterName"] == "member1" && i["health"] == "Unhealthy")
            .then(std::time::Instant::now)
    })
    .await;
    // Watch the binding so the (short-lived) eviction task is seen even if it goes within milliseconds.
    let rbs: Api<DynamicObject> = Api::namespaced_with(
        e.control.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    );
    let seen_task = Arc::new(std::sync::Mutex::new(None::<Value>));
    let watcher_task = {
        let seen_task = seen_task.clone();
        let stream = kube::runtime::watcher(rbs, kube::runtime::watcher::Config::default());
        tokio::spawn(async move {
            use futures::StreamExt as _;
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(ev)) = stream.next().await {
                if let kube::runtime::watcher::Event::Apply(rb)
                | kube::runtime::watcher::Event::InitApply(rb) = ev
                    && let Some(t) = eviction_tasks(&rb)
                        .into_iter()
                        .find(|t| t["fromCluster"] == "member1")
                {
                    seen_task.lock().unwrap().get_or_insert(t);
                }
            }
        })
    };
    eventually("rescheduled to member2", WAIT, || async {
        let sp = split(&e).await;
        if std::env::var_os("DEBUG_FAILOVER").is_some() {
            let rb = binding(&e).await?;
            eprintln!(
                "{:?} split {sp:?} tasks {:?} agg {}",
                unhealthy.elapsed(),
                eviction_tasks(&rb),
                rb.data
                    .pointer("/status/aggregatedStatus")
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            );
        }
        (sp == vec![("member2".to_owned(), 2)]).then_some(())
    })
    .await;
    let after = unhealthy.elapsed();
    assert!(
        after >= Duration::from_secs(1) && after <= Duration::from_secs(2 + 5),
        "failed over {after:?} after the application turned unhealthy"
    );
    let task = eventually("the eviction task", WAIT, || async {
        seen_task.lock().unwrap().clone()
    })
    .await;
    watcher_task.abort();
    assert_eq!(task["reason"], "ApplicationFailure");
    assert_eq!(
        task["producer"],
        "resource-binding-application-failover-controller"
    );
    assert_eq!(task["purgeMode"], "Gracefully");
    assert_eq!(task["gracePeriodSeconds"], 60);

    // Gracefully: member2 takes both replicas; once healthy there, the task goes and so does member1's copy.
    eventually(
        "member2 runs 2 and member1's copy is gone",
        WAIT,
        || async {
            let d2 = member_deployment(&e.member[1]).await?;
            (replicas(&d2) == 2 && member_deployment(&e.member[0]).await.is_none()).then_some(())
        },
    )
    .await;
    let rb = binding(&e).await.expect("binding");
    assert!(
        eviction_tasks(&rb).is_empty(),
        "task dropped once the new placement is healthy: {:?}",
        eviction_tasks(&rb)
    );
    assert_eq!(split(&e).await, vec![("member2".to_owned(), 2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_mode_never_keeps_the_old_copy_until_the_task_is_released() {
    let e = env().await;
    propagate_then_set_failover(&e, json!({"application": {"decisionConditions": {"tolerationSeconds": 1}, "purgeMode": "Never"}})).await;
    break_on_member1(&e).await;
    eventually("member2 runs 2", WAIT, || async {
        let d2 = member_deployment(&e.member[1]).await?;
        (replicas(&d2) == 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        member_deployment(&e.member[0]).await.is_some(),
        "Never keeps the old copy"
    );
    let rb = binding(&e).await.expect("binding");
    let tasks = eviction_tasks(&rb);
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["suppressDeletion"], true);

    // The user releases it: the task goes, and the copy with it.
    let rbs: Api<DynamicObject> = Api::namespaced_with(
        e.control.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    );
    let mut released = tasks;
    released[0]["suppressDeletion"] = json!(false);
    rbs.patch(
        "nginx-deployment",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"gracefulEvictionTasks": released}})),
    )
    .await
    .expect("release");
    eventually("member1 copy removed", WAIT, || async {
        member_deployment(&e.member[0])
            .await
            .is_none()
            .then_some(())
    })
    .await;
}

/// `(type, reason, message)` of the core/v1 Events about one object, found as `kubectl describe`
/// finds them (field selectors on `involvedObject`).
async fn events_about(e: &Env, kind: &str, name: &str) -> Vec<(String, String, String)> {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(e.control.clone(), "default");
    let params = kube::api::ListParams::default().fields(&format!(
        "involvedObject.kind={kind},involvedObject.name={name}"
    ));
    let list = events.list(&params).await.expect("events list");
    list.items
        .into_iter()
        .map(|ev| {
            (
                ev.type_.unwrap_or_default(),
                ev.reason.unwrap_or_default(),
                ev.message.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_outcomes_are_recorded_as_karmada_events_on_the_binding_and_the_template() {
    let e = env().await;
    seed(&e).await;
    let succeeded = eventually("success events", WAIT, || async {
        let on_template = events_about(&e, "Deployment", "nginx").await;
        let on_binding = events_about(&e, "ResourceBinding", "nginx-deployment").await;
        let has = |evs: &[(String, String, String)], r: &str| evs.iter().any(|ev| ev.1 == r);
        (has(&on_template, "ScheduleBindingSucceed")
            && has(&on_template, "SyncWorkSucceed")
            && has(&on_template, "ApplyPolicySucceed")
            && has(&on_binding, "ScheduleBindingSucceed")
            && has(&on_binding, "SyncWorkSucceed"))
        .then_some((on_template, on_binding))
    })
    .await;
    let (on_template, on_binding) = succeeded;
    assert!(
        on_template.contains(&(
            "Normal".into(),
            "ScheduleBindingSucceed".into(),
            "Binding has been scheduled successfully. Result: {member1:1, member2:1}".into()
        )),
        "{on_template:?}"
    );
    assert!(
        on_template.contains(&(
            "Normal".into(),
            "ApplyPolicySucceed".into(),
            "Apply policy(default/nginx-propagation) succeed".into()
        )),
        "{on_template:?}"
    );
    assert!(
        !on_binding.iter().any(|ev| ev.1 == "ApplyPolicySucceed"),
        "{on_binding:?}"
    );

    // A placement no cluster fits: a Warning with the scheduler's reason, on both objects.
    let mut policy = example("propagationpolicy.yaml");
    policy["spec"]["placement"] = json!({"clusterAffinity": {"clusterNames": ["member9"]}});
    apply(&e.control, &policy).await;
    let failed = eventually("failure event", WAIT, || async {
        let on_binding = events_about(&e, "ResourceBinding", "nginx-deployment").await;
        on_binding
            .into_iter()
            .find(|ev| ev.1 == "ScheduleBindingFailed")
    })
    .await;
    assert_eq!(failed.0, "Warning");
    assert!(
        failed.2.contains("0/2 clusters are available"),
        "{failed:?}"
    );
    let on_template = events_about(&e, "Deployment", "nginx").await;
    assert!(
        on_template.iter().any(|ev| ev.1 == "ScheduleBindingFailed"),
        "{on_template:?}"
    );
    // Repeats aggregate into one Event (client-go's count), never one object per attempt.
    assert!(
        on_template.len() <= 8,
        "events were not aggregated: {on_template:?}"
    );
    let counts = e.running.context.recorder.counts();
    assert!(
        counts.created.load(std::sync::atomic::Ordering::Relaxed) >= 6,
        "{counts:?}"
    );
}
