//! Hostile requests: each is answered with kube-apiserver's `Status` (code and reason) — never a
//! panic, a hang, unbounded memory, or silent acceptance.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use flotilla_apiserver::{ApiServer, ServerOptions, Store};

struct Server {
    router: axum::Router,
    _dir: tempfile::TempDir,
}

impl Server {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store opens");
        let router = ApiServer::new(store, ServerOptions::default()).router();
        Server { router, _dir: dir }
    }

    /// Send one request; the status code and the JSON body (`Value::Null` when not JSON).
    async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: impl Into<Body>,
    ) -> (u16, Value) {
        self.send_with(method, path, &[("content-type", content_type)], body)
            .await
    }

    /// [`Server::send`] with these headers.
    async fn send_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> (u16, Value) {
        let mut req = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(body.into()).expect("request");
        let resp = self.router.clone().oneshot(req).await.expect("infallible");
        let code = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn create_configmap(&self, name: &str) {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "x".repeat(100)}});
        let (code, body) = self
            .send(
                "POST",
                "/api/v1/namespaces/default/configmaps",
                "application/json",
                cm.to_string(),
            )
            .await;
        assert_eq!(code, 201, "{body}");
    }
}

/// Assert a `Status` failure with `code` and `reason`.
fn assert_status(got: &(u16, Value), code: u16, reason: &str) {
    let (c, body) = got;
    assert_eq!(*c, code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

const CM: &str = "/api/v1/namespaces/default/configmaps/bomb";

/// One `add` then copies of the whole data map into itself: each copy doubles the document.
fn copy_bomb(copies: usize) -> String {
    let mut ops = vec![json!({"op": "add", "path": "/data/x", "value": "y".repeat(1000)})];
    for i in 0..copies {
        ops.push(json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}));
    }
    Value::Array(ops).to_string()
}

#[tokio::test]
async fn json_patch_copy_bomb_is_refused_quickly() {
    let s = Server::new();
    s.create_configmap("bomb").await;
    let body = copy_bomb(20);
    assert!(
        body.len() < 2048,
        "the attack is a 2 KB request ({} bytes)",
        body.len()
    );
    let started = Instant::now();
    let got = s
        .send("PATCH", CM, "application/json-patch+json", body)
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_status(&got, 422, "Invalid");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap_or_default()
            .contains("accumulated size increase of copy"),
        "{}",
        got.1
    );
    // Nothing was stored; a small copy still works.
    let got = s
        .send("PATCH", CM, "application/json-patch+json", copy_bomb(3))
        .await;
    assert_eq!(got.0, 200, "{}", got.1);
}

#[tokio::test]
async fn json_patch_with_too_many_operations_is_413() {
    let s = Server::new();
    s.create_configmap("bomb").await;
    let ops: Vec<Value> = (0..10_001)
        .map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"}))
        .collect();
    let got = s
        .send(
            "PATCH",
            CM,
            "application/json-patch+json",
            Value::Array(ops).to_string(),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
    assert_eq!(
        got.1["message"],
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    let ops: Vec<Value> = (0..10_000)
        .map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"}))
        .collect();
    let got = s
        .send(
            "PATCH",
            CM,
            "application/json-patch+json",
            Value::Array(ops).to_string(),
        )
        .await;
    assert_eq!(got.0, 200, "{}", got.1);
}

#[tokio::test]
async fn json_patch_moves_cannot_build_a_document_too_deep_to_drop() {
    let s = Server::new();
    s.create_configmap("bomb").await;
    // Each pair wraps the chain one level deeper: 5,000 levels if nothing stopped it.
    let mut ops = vec![json!({"op": "add", "path": "/data/n", "value": {}})];
    for _ in 0..2_500 {
        ops.push(json!({"op": "add", "path": "/data/w", "value": {}}));
        ops.push(json!({"op": "move", "from": "/data/n", "path": "/data/w/n"}));
        ops.push(json!({"op": "move", "from": "/data/w", "path": "/data/n"}));
    }
    let got = s
        .send(
            "PATCH",
            CM,
            "application/json-patch+json",
            Value::Array(ops).to_string(),
        )
        .await;
    assert_status(&got, 422, "Invalid");
}

#[tokio::test]
async fn request_body_over_3_mib_is_413() {
    let s = Server::new();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"a": "x".repeat(3 * 1024 * 1024)}});
    let got = s
        .send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            cm.to_string(),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
    assert_eq!(
        got.1["message"],
        "Request entity too large: limit is 3145728"
    );
}

#[tokio::test]
async fn patches_cannot_grow_an_object_past_the_object_limit() {
    let s = Server::new();
    s.create_configmap("bomb").await;
    let chunk = "z".repeat(1024 * 1024);
    // Each merge patch is under the body limit; together they would pass the object limit.
    for i in 0..2 {
        let got = s
            .send(
                "PATCH",
                CM,
                "application/merge-patch+json",
                json!({"data": {format!("m{i}"): chunk}}).to_string(),
            )
            .await;
        assert_eq!(got.0, 200, "{}", got.1);
    }
    let got = s
        .send(
            "PATCH",
            CM,
            "application/merge-patch+json",
            json!({"data": {"m2": chunk}}).to_string(),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
    let got = s
        .send(
            "PATCH",
            CM,
            "application/strategic-merge-patch+json",
            json!({"data": {"s": chunk}}).to_string(),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bomb"}, "data": {"s": chunk}});
    let got = s
        .send(
            "PATCH",
            &format!("{CM}?fieldManager=t"),
            "application/apply-patch+yaml",
            apply.to_string(),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
    let got = s
        .send(
            "PATCH",
            CM,
            "application/json-patch+json",
            json!([{"op": "add", "path": "/data/j", "value": chunk}]).to_string(),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn deeply_nested_yaml_is_refused_before_parsing() {
    let s = std::sync::Arc::new(Server::new());
    // Two concurrent 120 KB bodies used to stall every request for 20 s.
    let bomb = format!("a: {}", "[".repeat(120 * 1024));
    let started = Instant::now();
    let attacks: Vec<_> = (0..2)
        .map(|_| {
            let (s, bomb) = (std::sync::Arc::clone(&s), bomb.clone());
            tokio::spawn(async move { s.send("POST", CMS, "application/yaml", bomb).await })
        })
        .collect();
    for attack in attacks {
        let got = attack.await.expect("task");
        assert_status(&got, 400, "BadRequest");
        assert!(
            got.1["message"]
                .as_str()
                .unwrap_or_default()
                .contains("nest deeper than 100"),
            "{}",
            got.1
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    // Closing brackets inside quoted scalars close nothing.
    let hidden = format!("a: {}", "[ \"]\", ".repeat(200));
    assert_status(
        &s.send("POST", CMS, "application/yaml", hidden).await,
        400,
        "BadRequest",
    );
    // Apply patches take the same path.
    let got = s
        .send(
            "PATCH",
            &format!("{CM}?fieldManager=t"),
            "application/apply-patch+yaml",
            bomb,
        )
        .await;
    assert_status(&got, 400, "BadRequest");
}

#[tokio::test]
async fn bodies_nested_deeper_than_100_levels_are_400() {
    let s = Server::new();
    let nested = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
    let cm = |d: usize| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "deep"}}, "x": {}}}"#,
            nested(d)
        )
    };
    assert_status(
        &s.send("POST", CMS, "application/json", cm(100)).await,
        400,
        "BadRequest",
    );
    let got = s.send("POST", CMS, "application/json", cm(90)).await;
    assert_eq!(got.0, 201, "{}", got.1);
}

#[tokio::test]
async fn ordinary_yaml_still_decodes() {
    let s = Server::new();
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  annotations: {app: web, tier: \"[x]\"}\n\
                data:\n  script: |\n    if [ -f x ]; then echo '}'; fi\n  list: \"[1, [2, [3]]]\"\n  note: it's [fine] # a comment ]]\n";
    let got = s.send("POST", CMS, "application/yaml", yaml).await;
    assert_eq!(got.0, 201, "{}", got.1);
    assert_eq!(got.1["data"]["note"], "it's [fine]");
    assert_eq!(got.1["metadata"]["annotations"]["tier"], "[x]");
}

#[tokio::test]
async fn writes_accept_only_kubernetes_media_types() {
    let s = Server::new();
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()
    };
    for ct in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        let got = s.send("POST", CMS, ct, cm("a")).await;
        assert_status(&got, 415, "UnsupportedMediaType");
    }
    // Protobuf is a media type of built-in kinds: a JSON body sent as
    // protobuf is a bad request, as in kube-apiserver, and custom resources
    // have no protobuf form at all.
    let got = s
        .send("POST", CMS, "application/vnd.kubernetes.protobuf", cm("a"))
        .await;
    assert_status(&got, 400, "BadRequest");
    let pps = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies";
    let got = s
        .send("POST", pps, "application/vnd.kubernetes.protobuf", "k8s\0")
        .await;
    assert_status(&got, 415, "UnsupportedMediaType");
    for (i, ct) in [
        "application/json",
        "application/json; charset=utf-8",
        "application/yaml",
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            s.send("POST", CMS, ct, cm(&format!("ok-{i}"))).await.0,
            201,
            "{ct}"
        );
    }
    // No Content-Type is JSON, as in kube-apiserver.
    assert_eq!(s.send_with("POST", CMS, &[], cm("none")).await.0, 201);
    let one = format!("{CMS}/none");
    assert_status(
        &s.send("PUT", &one, "text/plain", cm("none")).await,
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &s.send("PATCH", &one, "text/plain", "{}").await,
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &s.send("PATCH", &one, "application/json", "{}").await,
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &s.send(
            "DELETE",
            &one,
            "text/plain",
            r#"{"propagationPolicy":"Background"}"#,
        )
        .await,
        415,
        "UnsupportedMediaType",
    );
    // Strategic merge patch is for built-in kinds only.
    let pp = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies/p";
    let got = s
        .send("PATCH", pp, "application/strategic-merge-patch+json", "{}")
        .await;
    assert_status(&got, 415, "UnsupportedMediaType");
    let accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/apply-patch+json (got";
    assert!(
        got.1["message"]
            .as_str()
            .unwrap_or_default()
            .contains(accepted),
        "{}",
        got.1
    );
    assert_eq!(
        s.send(
            "DELETE",
            &one,
            "application/json",
            r#"{"propagationPolicy":"Background"}"#
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn cross_origin_browser_requests_are_403() {
    let s = Server::new();
    let cm =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "csrf"}}).to_string();
    let json = ("content-type", "application/json");
    let host = ("host", "127.0.0.1:6443");
    for extra in [
        [("origin", "http://evil.example"), host],
        [("origin", "http://127.0.0.1:6444"), host],
        [("origin", "null"), host],
        [("sec-fetch-site", "cross-site"), host],
        [("sec-fetch-site", "same-site"), host],
    ] {
        let headers = [json, extra[0], extra[1]];
        assert_status(
            &s.send_with("POST", CMS, &headers, cm.clone()).await,
            403,
            "Forbidden",
        );
        assert_status(
            &s.send_with("GET", CMS, &headers, Body::empty()).await,
            403,
            "Forbidden",
        );
    }
    // The server's own origin, and a navigation the user typed, pass.
    let own = [
        json,
        ("origin", "http://127.0.0.1:6443"),
        host,
        ("sec-fetch-site", "same-origin"),
    ];
    assert_eq!(s.send_with("POST", CMS, &own, cm).await.0, 201);
    assert_eq!(
        s.send_with("GET", CMS, &[("sec-fetch-site", "none")], Body::empty())
            .await
            .0,
        200
    );
}

#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[cfg(unix)]
fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[cfg(unix)]
#[tokio::test]
async fn the_store_credentials_and_kubeconfig_are_owner_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let start = || async {
        // The store closes once the last handle (the stopped server's compactor's) is dropped.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            match flotilla_apiserver::start(flotilla_apiserver::Config::new(&data), async move {
                let _ = stopped.await;
            })
            .await
            {
                Ok(running) => return (running, stop),
                Err(e) if Instant::now() < deadline => {
                    eprintln!("retrying: {e:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("server starts: {e:?}"),
            }
        }
    };
    let check = || {
        for d in [data.clone(), data.join("store"), data.join("pki")] {
            assert_eq!(mode(&d), 0o700, "{}", d.display());
        }
        for f in [
            data.join("store/flotilla.redb"),
            data.join("pki/server.key"),
            data.join("pki/token"),
        ] {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
    };
    let (running, stop) = start().await;
    check();
    let _ = stop.send(());
    let _ = running.task.await;
    drop(running.server);
    // Loosened by hand (or left so by an older version): tightened on the next start.
    for d in [data.clone(), data.join("store"), data.join("pki")] {
        chmod(&d, 0o755);
    }
    chmod(&data.join("store/flotilla.redb"), 0o644);
    let (running, stop) = start().await;
    check();

    let existing = dir.path().join("kubeconfig");
    std::fs::write(
        &existing,
        "old contents that are longer than the new ones ".repeat(200),
    )
    .expect("write");
    chmod(&existing, 0o644);
    flotilla_apiserver::tls::write_kubeconfig(&existing, &running.kubeconfig).expect("kubeconfig");
    assert_eq!(mode(&existing), 0o600);
    assert_eq!(
        std::fs::read_to_string(&existing).expect("read"),
        running.kubeconfig
    );
    let fresh = dir.path().join("new/dir/kubeconfig");
    flotilla_apiserver::tls::write_kubeconfig(&fresh, &running.kubeconfig).expect("kubeconfig");
    assert_eq!(
        (mode(&fresh), mode(fresh.parent().expect("parent"))),
        (0o600, 0o700)
    );
    let _ = stop.send(());
    let _ = running.task.await;
}

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str, replicas: Value, labels: Value) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "w"}},
                    "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    .to_string()
}

#[tokio::test]
async fn invalid_replicas_and_labels_are_422() {
    let s = Server::new();
    for (replicas, labels, field) in [
        (
            json!(9_223_372_036_854_775_808u64),
            json!({}),
            "spec.replicas",
        ),
        (json!(-5), json!({}), "spec.replicas"),
        (json!(1), json!({"a": 5}), "metadata.labels[a]"),
        (json!(1), json!({"a": ["x"]}), "metadata.labels[a]"),
        (json!(1), json!({"bad key": "x"}), "metadata.labels"),
    ] {
        let got = s
            .send(
                "POST",
                DEPLOYS,
                "application/json",
                deployment("w", replicas, labels),
            )
            .await;
        assert_status(&got, 422, "Invalid");
        assert_eq!(got.1["details"]["causes"][0]["field"], field, "{}", got.1);
        assert!(
            got.1["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with(&format!(
                    "Deployment.apps \"w\" is invalid: {field}: Invalid value: "
                ))
        );
    }
    let got = s
        .send(
            "POST",
            CMS,
            "application/json",
            json!({"metadata": {"name": "c", "labels": {"a": 5}}}).to_string(),
        )
        .await;
    assert_status(&got, 422, "Invalid");
    let got = s
        .send(
            "POST",
            DEPLOYS,
            "application/json",
            deployment("w", json!(2), json!({"app": "w"})),
        )
        .await;
    assert_eq!(got.0, 201, "{}", got.1);
    let w = format!("{DEPLOYS}/w");
    for (ct, patch) in [
        (
            "application/merge-patch+json",
            json!({"spec": {"replicas": -1}}),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/spec/replicas", "value": 4_294_967_296u64}]),
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"app": 1}}}),
        ),
    ] {
        assert_status(
            &s.send("PATCH", &w, ct, patch.to_string()).await,
            422,
            "Invalid",
        );
    }
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": -1, "template": {}}});
    assert_status(
        &s.send(
            "POST",
            "/apis/batch/v1/namespaces/default/jobs",
            "application/json",
            job.to_string(),
        )
        .await,
        422,
        "Invalid",
    );
}

#[tokio::test]
async fn crds_cannot_take_over_built_in_groups() {
    let s = Server::new();
    let crd = |name: &str, group: &str, plural: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
               "spec": {"group": group, "scope": "Namespaced", "names": {"kind": "Thing", "plural": plural},
                        "versions": [{"name": "v2", "served": true, "storage": true}]}})
        .to_string()
    };
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    for (name, group, plural) in [
        ("deployments.apps", "apps", "deployments"),
        ("things.apps", "apps", "things"),
        (
            "ingresses.networking.k8s.io",
            "networking.k8s.io",
            "ingresses",
        ),
        ("pods", "", "pods"),
        ("things.example.com", "example.com", "others"),
    ] {
        assert_status(
            &s.send("POST", crds, "application/json", crd(name, group, plural))
                .await,
            422,
            "Invalid",
        );
    }
    assert_eq!(
        s.send("GET", "/apis/apps/v2", "application/json", Body::empty())
            .await
            .0,
        404,
        "apps/v2 is not served"
    );
    assert_eq!(
        s.send(
            "POST",
            crds,
            "application/json",
            crd("things.example.com", "example.com", "things")
        )
        .await
        .0,
        201
    );
}

#[tokio::test]
async fn records_that_no_longer_decode_are_skipped_not_fatal() {
    use flotilla_apiserver::store::{Op, Precondition};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    // Deeper than serde_json decodes: written by an older version, unreadable now.
    let mut deep = json!("x");
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad", "namespace": "default"}, "data": deep});
    for key in [
        "/@/core/configmaps/default/bad",
        "/@/apiextensions.k8s.io/customresourcedefinitions/bad.example.com",
    ] {
        store
            .write(key.into(), Op::Put(bad.clone()), Precondition::Absent)
            .await
            .expect("write");
    }
    let good = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "good", "namespace": "default"}});
    store
        .write(
            "/@/core/configmaps/default/good".into(),
            Op::Put(good),
            Precondition::Absent,
        )
        .await
        .expect("write");
    // A fresh server (start-up lists every CRD) serves lists and watches without the bad record.
    let s = Server {
        router: ApiServer::new(store, ServerOptions::default()).router(),
        _dir: dir,
    };
    let got = s.send("GET", CMS, "application/json", Body::empty()).await;
    assert_eq!(got.0, 200, "{}", got.1);
    let names: Vec<&str> = got.1["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["good"]);
    assert_eq!(
        s.send(
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "",
            Body::empty()
        )
        .await
        .0,
        200
    );
    let req = Request::builder()
        .uri(format!(
            "{CMS}?watch=true&resourceVersion=1&timeoutSeconds=1"
        ))
        .body(Body::empty())
        .expect("request");
    let resp = s.router.clone().oneshot(req).await.expect("infallible");
    assert_eq!(resp.status().as_u16(), 200);
    let text = String::from_utf8(
        axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body")
            .to_vec(),
    )
    .expect("utf-8");
    assert!(
        text.contains("\"good\"") && !text.contains("\"bad\""),
        "{text}"
    );
}
