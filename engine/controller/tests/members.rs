//! Real members: a second embedded API server on a local TCP port (TLS + bearer token) joined
//! in Push mode through a kubeconfig Secret, or in Pull mode through the agent running in
//! process; health, status collection, taints, and the lease monitor.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use flotilla_controller::{Settings, api_resource, client};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};

const WAIT: Duration = Duration::from_secs(30);

fn settings() -> Settings {
    Settings {
        ready_delay: Duration::from_millis(100),
        cluster_status_update_frequency: Duration::from_millis(200),
        cluster_success_threshold: Duration::from_millis(300),
        cluster_failure_threshold: Duration::from_millis(300),
        cluster_monitor_period: Duration::from_millis(200),
        cluster_monitor_grace_period: Duration::from_millis(1500),
        cluster_startup_grace_period: Duration::from_secs(3),
        ..Settings::default()
    }
}

/// The control plane in process with one simulated member, `member1`.
mod common;
use common::eventually;

struct Control {
    client: Client,
    _running: flotilla_controller::Running,
    _server: Arc<ApiServer>,
    _dir: tempfile::TempDir,
}

async fn control() -> Control {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(
        store,
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    let opts = flotilla_controller::Embedded {
        members: 1,
        settings: settings(),
        ..Default::default()
    };
    let running = flotilla_controller::start_embedded(server.router(), opts)
        .await
        .expect("controllers start");
    let client = client::in_process(server.router(), None, None);
    Control {
        client,
        _running: running,
        _server: server,
        _dir: dir,
    }
}

/// A "real" member: another API server over TLS with a bearer token.
struct Member {
    kubeconfig: String,
    client: Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Member {
    async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

async fn member() -> Member {
    let dir = tempfile::tempdir().expect("tempdir");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(
        flotilla_apiserver::Config::new(dir.path().join("data")),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .expect("member server starts");
    assert!(running.url.starts_with("https://"), "{}", running.url);
    let config = client::config_from_kubeconfig(&running.kubeconfig, None, "member kubeconfig")
        .await
        .expect("config");
    let client = client::connect(&config).expect("client");
    // A node, so the member reports capacity.
    let nodes: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource("v1", "Node"));
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}});
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(node).expect("node"),
        )
        .await
        .expect("node created");
    let status = json!({"status": {
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }});
    nodes
        .patch_status("node-1", &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("node status");
    Member {
        kubeconfig: running.kubeconfig,
        client,
        stop: Some(stop),
        task: Some(running.task),
        _dir: dir,
    }
}

fn example(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/nginx")
        .join(file);
    serde_yaml::from_str(&std::fs::read_to_string(&path).expect("example reads"))
        .expect("example parses")
}

async fn apply(client: &Client, obj: &Value) {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let res = api_resource(&s("/apiVersion"), &s("/kind"));
    let ns = s("/metadata/namespace");
    let api: Api<DynamicObject> = if ns.is_empty() {
        Api::all_with(client.clone(), &res)
    } else {
        Api::namespaced_with(client.clone(), &ns, &res)
    };
    api.patch(
        &s("/metadata/name"),
        &PatchParams::apply("kubectl").force(),
        &Patch::Apply(obj),
    )
    .await
    .expect("apply");
}

async fn seed(c: &Client) {
    for f in [
        "propagationpolicy.yaml",
        "overridepolicy.yaml",
        "deployment.yaml",
    ] {
        apply(c, &example(f)).await;
    }
}

fn clusters(c: &Client) -> Api<DynamicObject> {
    Api::all_with(
        c.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    )
}

/// `(status, reason, message)` of Cluster `name`'s Ready condition.
async fn ready(c: &Client, name: &str) -> Option<(String, String, String)> {
    let obj = clusters(c).get_opt(name).await.ok()??;
    let cond = obj
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|x| x["type"] == "Ready")?
        .clone();
    let s = |k: &str| cond.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    Some((s("status"), s("reason"), s("message")))
}

async fn taint_keys(c: &Client, name: &str) -> Vec<String> {
    let Ok(Some(obj)) = clusters(c).get_opt(name).await else {
        return Vec::new();
    };
    obj.data
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["key"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn member_deployment(c: &Client) -> Option<DynamicObject> {
    Api::<DynamicObject>::namespaced_with(
        c.clone(),
        "default",
        &api_resource("apps/v1", "Deployment"),
    )
    .get_opt("nginx")
    .await
    .ok()
    .flatten()
}

fn image(d: &DynamicObject) -> String {
    d.data
        .pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

async fn work_applied(c: &Client, cluster: &str) -> Option<()> {
    let works: Api<DynamicObject> = Api::namespaced_with(
        c.clone(),
        &format!("karmada-es-{cluster}"),
        &api_resource("work.karmada.io/v1alpha1", "Work"),
    );
    let list = works.list(&Default::default()).await.ok()?;
    let w = list.items.first()?;
    let applied = w
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .any(|x| x["type"] == "Applied" && x["status"] == "True");
    let statuses = w
        .data
        .pointer("/status/manifestStatuses")
        .and_then(Value::as_array)
        .is_some_and(|m| !m.is_empty());
    (applied && statuses).then_some(())
}

async fn put_secret(c: &Client, name: &str, data: &[(&str, &[u8])]) {
    let nss: Api<DynamicObject> = Api::all_with(c.clone(), &api_resource("v1", "Namespace"));
    let ns =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-cluster"}});
    nss.patch(
        "karmada-cluster",
        &PatchParams::apply("test").force(),
        &Patch::Apply(ns),
    )
    .await
    .expect("namespace");
    let mut s = Secret::default();
    s.metadata.name = Some(name.to_owned());
    s.metadata.namespace = Some("karmada-cluster".into());
    s.data = Some(
        data.iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
            .collect(),
    );
    let mut v = serde_json::to_value(&s).expect("secret json");
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Secret");
    let api: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "karmada-cluster", &api_resource("v1", "Secret"));
    api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(v))
        .await
        .expect("secret");
}

async fn push_cluster(c: &Client, name: &str, secret: &str) {
    let obj = json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"syncMode": "Push", "secretRef": {"namespace": "karmada-cluster", "name": secret}},
    });
    apply(c, &obj).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_member_joined_by_kubeconfig_secret_receives_the_example_and_goes_not_ready_when_stopped()
 {
    let cp = control().await;
    let mut m = member().await;
    put_secret(
        &cp.client,
        "member2",
        &[("kubeconfig", m.kubeconfig.as_bytes())],
    )
    .await;
    push_cluster(&cp.client, "member2", "member2").await;

    // Probed: Ready, with version, API enablements and the node's capacity.
    eventually("member2 Ready", WAIT, || async {
        (ready(&cp.client, "member2").await?.0 == "True").then_some(())
    })
    .await;
    let (_, reason, _) = ready(&cp.client, "member2").await.expect("ready");
    assert_eq!(reason, "ClusterReady");
    let c: flotilla_api::cluster::Cluster =
        flotilla_controller::typed(&clusters(&cp.client).get("member2").await.expect("cluster"))
            .expect("decodes");
    let status = c.status.expect("status");
    assert!(
        status.kubernetes_version.starts_with('v'),
        "{}",
        status.kubernetes_version
    );
    assert!(status.api_enablements.iter().any(
        |a| a.group_version == "apps/v1" && a.resources.iter().any(|r| r.kind == "Deployment")
    ));
    let alloc =
        serde_json::to_value(&status.resource_summary.expect("summary").allocatable).expect("json");
    assert_eq!(
        (alloc["cpu"].clone(), alloc["pods"].clone()),
        (json!("8"), json!("110")),
        "{alloc}"
    );
    // The lease is renewed by the status controller.
    let leases: Api<DynamicObject> = Api::namespaced_with(
        cp.client.clone(),
        "karmada-cluster",
        &api_resource("coordination.k8s.io/v1", "Lease"),
    );
    assert!(
        leases.get_opt("member2").await.expect("lease").is_some(),
        "a Lease for member2"
    );

    // The seed example propagates: member2's copy carries its override, in the other server.
    seed(&cp.client).await;
    let d = eventually("the Deployment in the member server", WAIT, || {
        member_deployment(&m.client)
    })
    .await;
    assert_eq!(image(&d), "registry.member2.example/nginx:1.27");
    eventually("member2's Work Applied with manifest status", WAIT, || {
        work_applied(&cp.client, "member2")
    })
    .await;

    // The member stops: NotReachable (after the failure threshold), and tainted not-ready.
    m.stop().await;
    eventually("member2 not ready", WAIT, || async {
        let (s, reason, _) = ready(&cp.client, "member2").await?;
        (s == "False" && reason == "ClusterNotReachable").then_some(())
    })
    .await;
    eventually("not-ready taint", WAIT, || async {
        taint_keys(&cp.client, "member2")
            .await
            .contains(&"cluster.karmada.io/not-ready".to_owned())
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_unusable_secret_makes_the_cluster_not_ready_naming_the_secret() {
    let cp = control().await;
    push_cluster(&cp.client, "broken", "broken-creds").await;
    let (_, reason, message) = eventually("Ready=False", WAIT, || async {
        ready(&cp.client, "broken").await.filter(|r| r.0 == "False")
    })
    .await;
    assert_eq!(reason, "StatusCollectionFailed");
    assert!(
        message.contains("karmada-cluster/broken-creds") && message.contains("not found"),
        "{message}"
    );

    put_secret(&cp.client, "broken-creds", &[("token", b"abc")]).await;
    let (_, _, message) = eventually("a new message", WAIT, || async {
        ready(&cp.client, "broken")
            .await
            .filter(|r| r.2.contains("apiEndpoint"))
    })
    .await;
    assert!(
        message.contains("karmada-cluster/broken-creds"),
        "{message}"
    );
    eventually("not-ready taint", WAIT, || async {
        taint_keys(&cp.client, "broken")
            .await
            .contains(&"cluster.karmada.io/not-ready".to_owned())
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_member_served_by_the_agent_receives_the_example_and_goes_unknown_when_the_agent_dies()
 {
    let cp = control().await;
    let m = member().await;
    let member_config = client::config_from_kubeconfig(&m.kubeconfig, None, "member kubeconfig")
        .await
        .expect("config");
    let agent = flotilla_controller::agent::Agent {
        control: cp.client.clone(),
        member: member_config,
        cluster_name: "member2".into(),
        settings: settings(),
    };
    let task = tokio::spawn(flotilla_controller::agent::run(agent));

    eventually("member2 registered Pull and Ready", WAIT, || async {
        let c = clusters(&cp.client).get_opt("member2").await.ok()??;
        let pull = c.data.pointer("/spec/syncMode") == Some(&json!("Pull"));
        (pull && ready(&cp.client, "member2").await?.0 == "True").then_some(())
    })
    .await;
    seed(&cp.client).await;
    let d = eventually("the Deployment in the member server", WAIT, || {
        member_deployment(&m.client)
    })
    .await;
    assert_eq!(image(&d), "registry.member2.example/nginx:1.27");
    eventually("member2's Work Applied by the agent", WAIT, || {
        work_applied(&cp.client, "member2")
    })
    .await;
    assert!(!task.is_finished(), "the agent keeps running");

    // The agent dies: after the grace period the monitor says Unknown, and the cluster is tainted.
    task.abort();
    let stopped = std::time::Instant::now();
    eventually("member2 Unknown", WAIT, || async {
        let (s, reason, _) = ready(&cp.client, "member2").await?;
        (s == "Unknown" && reason == "ClusterStatusUnknown").then_some(())
    })
    .await;
    assert!(
        stopped.elapsed() >= Duration::from_millis(1000),
        "not before the grace period: {:?}",
        stopped.elapsed()
    );
    eventually("unreachable taint", WAIT, || async {
        taint_keys(&cp.client, "member2")
            .await
            .contains(&"cluster.karmada.io/unreachable".to_owned())
            .then_some(())
    })
    .await;
}
