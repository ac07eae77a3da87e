//! `propagateDeps` end to end, in process: the embedded API server, two simulated members, every
//! controller, and an interpreter webhook (a real HTTP server answering InterpretDependency for
//! Deployments) that names the ConfigMaps and Secrets a Deployment's pod template uses.

use std::sync::Arc;
use std::time::Duration;

use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::{Settings, api_resource, client, members};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

mod common;
use common::eventually;

const WAIT: Duration = Duration::from_secs(30);

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
    let opts = flotilla_controller::Embedded {
        members: 2,
        settings: Settings {
            ready_delay: Duration::from_millis(100),
            ..Settings::default()
        },
        ..Default::default()
    };
    let running = flotilla_controller::start_embedded(server.router(), opts)
        .await
        .expect("controllers start");
    let router = server.router();
    Env {
        control: client::in_process(router.clone(), None, None),
        member: members::names(2)
            .iter()
            .map(|n| client::in_process(router.clone(), Some(n), None))
            .collect(),
        running,
        _server: server,
        _dir: dir,
    }
}

/// The ConfigMaps and Secrets a pod template references (env, envFrom, volumes): this test's own
/// dependency interpreter.
fn pod_dependencies(object: &Value) -> Vec<Value> {
    let ns = object
        .pointer("/metadata/namespace")
        .cloned()
        .unwrap_or(json!("default"));
    let spec = object
        .pointer("/spec/template/spec")
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |kind: &str, name: Option<&Value>| {
        if let Some(n) = name.and_then(Value::as_str) {
            let entry = (kind.to_owned(), n.to_owned());
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
    };
    for c in spec["containers"].as_array().into_iter().flatten() {
        for e in c["envFrom"].as_array().into_iter().flatten() {
            add("ConfigMap", e.pointer("/configMapRef/name"));
            add("Secret", e.pointer("/secretRef/name"));
        }
        for e in c["env"].as_array().into_iter().flatten() {
            add("ConfigMap", e.pointer("/valueFrom/configMapKeyRef/name"));
            add("Secret", e.pointer("/valueFrom/secretKeyRef/name"));
        }
    }
    for v in spec["volumes"].as_array().into_iter().flatten() {
        add("ConfigMap", v.pointer("/configMap/name"));
        add("Secret", v.pointer("/secret/secretName"));
    }
    out.into_iter()
        .map(
            |(kind, name)| json!({"apiVersion": "v1", "kind": kind, "namespace": ns, "name": name}),
        )
        .collect()
}

/// Serve the interpreter webhook on 127.0.0.1; its port.
async fn dependency_webhook() -> u16 {
    use http_body_util::BodyExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    |req: http::Request<hyper::body::Incoming>| async move {
                        let body = req.into_body().collect().await?.to_bytes();
                        let ctx: Value = serde_json::from_slice(&body).unwrap_or_default();
                        let r = &ctx["request"];
                        let response = if r["operation"] == "InterpretDependency" {
                            json!({"uid": r["uid"], "successful": true, "dependencies": pod_dependencies(&r["object"])})
                        } else {
                            json!({"uid": r["uid"], "successful": false, "status": {"code": 400, "message": "not served"}})
                        };
                        let out = json!({"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterContext", "response": response});
                        Ok::<_, hyper::Error>(http::Response::new(http_body_util::Full::new(
                            hyper::body::Bytes::from(out.to_string()),
                        )))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    port
}

fn api(c: &Client, api_version: &str, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let r = api_resource(api_version, kind);
    match ns {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &r),
        None => Api::all_with(c.clone(), &r),
    }
}

async fn apply(c: &Client, obj: Value) {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let ns = s("/metadata/namespace");
    api(
        c,
        &s("/apiVersion"),
        &s("/kind"),
        (!ns.is_empty()).then_some(ns.as_str()),
    )
    .patch(
        &s("/metadata/name"),
        &PatchParams::apply("kubectl").force(),
        &Patch::Apply(&obj),
    )
    .await
    .expect("apply");
}

async fn exists(c: &Client, kind: &str, name: &str) -> bool {
    api(c, "v1", kind, Some("default"))
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .is_some()
}

async fn attached(e: &Env, name: &str) -> Option<DynamicObject> {
    api(
        &e.control,
        "work.karmada.io/v1alpha2",
        "ResourceBinding",
        Some("default"),
    )
    .get_opt(name)
    .await
    .ok()
    .flatten()
}

fn deployment(volumes: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "containers": [{"name": "web", "image": "nginx", "envFrom": [{"configMapRef": {"name": "web-config"}}]}],
                     "volumes": volumes}}},
    })
}

fn policy(cluster: &str) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"propagateDeps": true,
                 "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                 "placement": {"clusterAffinity": {"clusterNames": [cluster]}}},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployments_config_map_and_secret_follow_it_and_leave_when_no_longer_referenced() {
    let e = env().await;
    let port = dependency_webhook().await;
    apply(
        &e.control,
        json!({
            "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterWebhookConfiguration",
            "metadata": {"name": "pod-dependencies"},
            "webhooks": [{"name": "deps.example.com", "clientConfig": {"url": format!("http://127.0.0.1:{port}/")},
                          "rules": [{"operations": ["InterpretDependency"], "apiGroups": ["apps"], "apiVersions": ["v1"], "kinds": ["Deployment"]}],
                          "timeoutSeconds": 5, "interpreterContextVersions": ["v1alpha1"]}],
        }),
    )
    .await;
    let ctx = Arc::clone(&e.running.context);
    eventually("the webhook is in the interpreter chain", WAIT, || {
        let ctx = Arc::clone(&ctx);
        async move {
            let chain = ctx.interpreters.get();
            let i = chain.resolve_kind(
                "apps/v1",
                "Deployment",
                flotilla_core::interpreter::Operation::InterpretDependency,
            )?;
            (i.name() == "pod-dependencies/deps.example.com").then_some(())
        }
    })
    .await;

    apply(&e.control, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config", "namespace": "default"}, "data": {"MODE": "blue"}})).await;
    apply(&e.control, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-secret", "namespace": "default"}, "stringData": {"token": "t"}})).await;
    apply(&e.control, policy("member2")).await;
    apply(
        &e.control,
        deployment(json!([{"name": "s", "secret": {"secretName": "web-secret"}}])),
    )
    .await;

    // The ConfigMap and the Secret reach member2, where the Deployment goes, and only there.
    eventually("the dependencies on member2", WAIT, || async {
        (exists(&e.member[1], "ConfigMap", "web-config").await
            && exists(&e.member[1], "Secret", "web-secret").await)
            .then_some(())
    })
    .await;
    assert!(!exists(&e.member[0], "ConfigMap", "web-config").await);
    assert!(!exists(&e.member[0], "Secret", "web-secret").await);

    // The attached binding, as Karmada writes it.
    let rb = attached(&e, "web-config-configmap")
        .await
        .expect("attached binding");
    assert_eq!(
        rb.data["spec"]["requiredBy"],
        json!([{"namespace": "default", "name": "web-deployment", "clusters": [{"name": "member2", "replicas": 2}]}])
    );
    assert!(rb.data["spec"].get("placement").is_none());
    assert_eq!(rb.data["spec"]["conflictResolution"], "Abort");
    let key =
        flotilla_controller::controller::dependencies::depended_by_key("default", "web-deployment");
    let parent = attached(&e, "web-deployment")
        .await
        .expect("the Deployment's binding");
    let parent_id = parent
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(flotilla_api::labels::RB_PERMANENT_ID))
        .cloned();
    assert_eq!(
        rb.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(&key))
            .cloned(),
        parent_id
    );
    let owner = &rb.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ConfigMap", "web-config", Some(true))
    );
    let recorded: Value = serde_json::from_str(
        parent
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("resourcebinding.karmada.io/dependencies"))
            .expect("recorded"),
    )
    .expect("json");
    assert_eq!(recorded.as_array().map(Vec::len), Some(2));

    // The Deployment moves to member1: so do its dependencies.
    apply(&e.control, policy("member1")).await;
    eventually("the dependencies moved to member1", WAIT, || async {
        (exists(&e.member[0], "ConfigMap", "web-config").await
            && exists(&e.member[0], "Secret", "web-secret").await
            && !exists(&e.member[1], "ConfigMap", "web-config").await
            && !exists(&e.member[1], "Secret", "web-secret").await)
            .then_some(())
    })
    .await;

    // The Secret is no longer referenced: it leaves the member, the ConfigMap stays.
    apply(&e.control, deployment(json!([]))).await;
    eventually("the Secret left member1", WAIT, || async {
        (!exists(&e.member[0], "Secret", "web-secret").await).then_some(())
    })
    .await;
    assert!(exists(&e.member[0], "ConfigMap", "web-config").await);
    let secret_rb = attached(&e, "web-secret-secret")
        .await
        .expect("kept, released");
    assert!(
        secret_rb.data["spec"].get("requiredBy").is_none(),
        "{:?}",
        secret_rb.data["spec"]
    );
    assert!(
        !secret_rb
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(&key))
    );

    // The Deployment goes: its binding goes, and the ConfigMap leaves with it.
    api(&e.control, "apps/v1", "Deployment", Some("default"))
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the ConfigMap left member1", WAIT, || async {
        (!exists(&e.member[0], "ConfigMap", "web-config").await).then_some(())
    })
    .await;
}
