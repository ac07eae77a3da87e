//! Karmada's cluster proxy (`/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy/{path}`)
//! on a control plane with a token: simulated members served in process, a Push member that is
//! a second server with TLS and a bearer token, reached with the credentials of its Secret in
//! each shape Karmada and `flotilla join` write, and the errors: an unknown cluster, a Pull
//! cluster, bad credentials, an untrusted certificate, an unreachable member, a body over 3 MiB.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use base64::Engine as _;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use common::TestServer;
use flotilla_apiserver::{ApiServer, ServerOptions, Store};

const TOKEN: &str = "control-plane-token";
const PROXY: &str = "/apis/cluster.karmada.io/v1alpha1/clusters";

/// The control plane: an in-process server that requires [`TOKEN`].
struct ControlPlane {
    router: axum::Router,
    _dir: tempfile::TempDir,
}

impl ControlPlane {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store opens");
        let options = ServerOptions {
            token: Some(TOKEN.into()),
            anonymous: false,
            ..ServerOptions::default()
        };
        ControlPlane {
            router: ApiServer::new(store, options).router(),
            _dir: dir,
        }
    }

    async fn response(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: impl Into<Body>,
    ) -> axum::response::Response {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            // Impersonation is honoured here (the admin may act as anyone), and the headers
            // must not reach a member; as a master the impersonated caller may do everything.
            .header("impersonate-user", "system:admin")
            .header("impersonate-group", "system:masters");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req.body(body.into()).expect("request");
        self.router.clone().oneshot(req).await.expect("infallible")
    }

    /// One authenticated request: the status code and the JSON body (`Null` when not JSON).
    async fn send(&self, method: &str, path: &str, body: impl Into<Body>) -> (u16, Value) {
        let resp = self.response(method, path, Some(TOKEN), body).await;
        let code = resp.status().as_u16();
        let bytes = tokio::time::timeout(
            Duration::from_secs(30),
            axum::body::to_bytes(resp.into_body(), usize::MAX),
        )
        .await
        .expect("the answer ends")
        .expect("body");
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn create(&self, path: &str, obj: Value) {
        let (code, body) = self.send("POST", path, obj.to_string()).await;
        assert_eq!(code, 201, "{path}: {body}");
    }

    /// Secret `karmada-cluster/<name>` with `data`, and Cluster `<name>` with `spec`.
    async fn cluster(&self, name: &str, data: Option<Value>, mut spec: Value) {
        if let Some(data) = data {
            let (code, _) = self
                .send("GET", "/api/v1/namespaces/karmada-cluster", Body::empty())
                .await;
            if code == 404 {
                self.create(
                    "/api/v1/namespaces",
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-cluster"}}),
                )
                .await;
            }
            self.create(
                "/api/v1/namespaces/karmada-cluster/secrets",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}),
            )
            .await;
            spec["secretRef"] = json!({"namespace": "karmada-cluster", "name": name});
        }
        self.create(
            "/apis/cluster.karmada.io/v1alpha1/clusters",
            json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": name}, "spec": spec}),
        )
        .await;
    }
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The member's URL, CA (PEM) and token, from its kubeconfig.
fn member_credentials(member: &TestServer) -> (String, String, String) {
    let kc: Value = serde_yaml::from_str(&member.kubeconfig).expect("kubeconfig");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            kc.pointer("/clusters/0/cluster/certificate-authority-data")
                .and_then(Value::as_str)
                .expect("ca data"),
        )
        .expect("base64");
    let token = kc
        .pointer("/users/0/user/token")
        .and_then(Value::as_str)
        .expect("token");
    (
        member.url.clone(),
        String::from_utf8(ca).expect("pem"),
        token.to_owned(),
    )
}

fn assert_status(got: &(u16, Value), code: u16, reason: &str) {
    let (c, body) = got;
    assert_eq!(*c, code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

fn configmap(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_members_are_served_in_process_and_unknown_clusters_are_404() {
    let cp = ControlPlane::new();
    cp.cluster(
        "member1",
        None,
        json!({"syncMode": "Push", "apiEndpoint": "/clusters/member1"}),
    )
    .await;
    cp.create(
        "/clusters/member1/api/v1/namespaces/default/configmaps",
        serde_json::from_str(&configmap("in-member1")).expect("json"),
    )
    .await;

    let (code, cm) = cp
        .send(
            "GET",
            &format!("{PROXY}/member1/proxy/api/v1/namespaces/default/configmaps/in-member1"),
            Body::empty(),
        )
        .await;
    assert_eq!(code, 200, "{cm}");
    assert_eq!(cm["data"]["k"], "in-member1");
    // Writes and the query string go through; `..` stays inside the member.
    let (code, created) = cp
        .send(
            "POST",
            &format!("{PROXY}/member1/proxy/api/v1/namespaces/default/configmaps"),
            configmap("written"),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let (code, list) = cp
        .send(
            "GET",
            &format!(
                "{PROXY}/member1/proxy/../../api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dwritten"
            ),
            Body::empty(),
        )
        .await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["written"]);
    let (code, _) = cp
        .send(
            "GET",
            "/clusters/member1/api/v1/namespaces/default/configmaps/written",
            Body::empty(),
        )
        .await;
    assert_eq!(code, 200, "the write landed in the member");
    let (code, _) = cp
        .send(
            "GET",
            "/api/v1/namespaces/default/configmaps/written",
            Body::empty(),
        )
        .await;
    assert_eq!(code, 404, "not in the control plane");
    // A watch is served by the member too (it ends with its timeoutSeconds).
    let resp = cp
        .response(
            "GET",
            &format!(
                "{PROXY}/member1/proxy/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"
            ),
            Some(TOKEN),
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status().as_u16(), 200);
    let events = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(resp.into_body(), usize::MAX),
    )
    .await
    .expect("the watch ends")
    .expect("body");
    let names: Vec<String> = String::from_utf8_lossy(&events)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("an event"))
        .filter(|e| e["type"] == "ADDED")
        .filter_map(|e| e["object"]["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(names, ["in-member1", "written"]);
    // Discovery, as karmadactl reads it through the proxy.
    let (code, api) = cp
        .send("GET", &format!("{PROXY}/member1/proxy/api"), Body::empty())
        .await;
    assert_eq!(code, 200);
    assert_eq!(api["kind"], "APIVersions");

    let got = cp
        .send(
            "GET",
            &format!("{PROXY}/nope/proxy/api/v1/namespaces"),
            Body::empty(),
        )
        .await;
    assert_status(&got, 404, "NotFound");
    assert_eq!(
        got.1["message"],
        "clusters.cluster.karmada.io \"nope\" not found"
    );
    assert_eq!(got.1["details"]["name"], "nope");

    // The proxy is behind authentication like everything else.
    let resp = cp
        .response(
            "GET",
            &format!("{PROXY}/member1/proxy/api/v1/namespaces/default/configmaps/in-member1"),
            None,
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status().as_u16(), 401);
    let resp = cp
        .response(
            "GET",
            &format!("{PROXY}/member1/proxy/api"),
            Some("wrong"),
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_members_are_503_and_say_why() {
    let cp = ControlPlane::new();
    cp.cluster(
        "edge",
        None,
        json!({"syncMode": "Pull", "apiEndpoint": "https://10.0.0.1:6443"}),
    )
    .await;
    let got = cp
        .send("GET", &format!("{PROXY}/edge/proxy/api"), Body::empty())
        .await;
    assert_status(&got, 503, "ServiceUnavailable");
    let msg = got.1["message"].as_str().unwrap_or_default();
    assert!(msg.contains("Pull mode"), "{msg}");
    assert!(
        msg.contains("not reachable from the control plane"),
        "{msg}"
    );
    // A Push cluster without credentials cannot be reached either.
    cp.cluster(
        "bare",
        None,
        json!({"syncMode": "Push", "apiEndpoint": "https://10.0.0.1:6443"}),
    )
    .await;
    let got = cp
        .send("GET", &format!("{PROXY}/bare/proxy/api"), Body::empty())
        .await;
    assert_status(&got, 503, "ServiceUnavailable");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap_or_default()
            .contains("spec.secretRef"),
        "{}",
        got.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_members_are_forwarded_with_the_credentials_of_their_secret() {
    let member = TestServer::start();
    let (url, ca, token) = member_credentials(&member);
    let cp = ControlPlane::new();
    // Karmada's shape: token + caBundle.
    cp.cluster(
        "push",
        Some(json!({"token": b64(&token), "caBundle": b64(&ca)})),
        json!({"syncMode": "Push", "apiEndpoint": url}),
    )
    .await;
    let base = format!("{PROXY}/push/proxy");

    let (code, created) = cp
        .send(
            "POST",
            &format!("{base}/api/v1/namespaces/default/configmaps"),
            configmap("via-proxy"),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let (code, got) = cp
        .send(
            "GET",
            &format!("{base}/api/v1/namespaces/default/configmaps/via-proxy"),
            Body::empty(),
        )
        .await;
    assert_eq!(code, 200, "{got}");
    assert_eq!(got["data"]["k"], "via-proxy");
    assert_eq!(got["metadata"]["uid"], created["metadata"]["uid"]);
    // The member's own errors come back as they are.
    let (code, _) = cp
        .send(
            "GET",
            &format!("{base}/api/v1/namespaces/default/configmaps/absent"),
            Body::empty(),
        )
        .await;
    assert_eq!(code, 404);
    let (code, patched) = cp
        .send(
            "PATCH",
            &format!("{base}/api/v1/namespaces/default/configmaps/via-proxy"),
            Body::empty(),
        )
        .await;
    assert!(code == 400 || code == 415, "{code} {patched}");

    // A watch streams: the ADDED event arrives while the response is still open.
    let resp = cp
        .response(
            "GET",
            &format!(
                "{base}/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=metadata.name%3Dvia-proxy"
            ),
            Some(TOKEN),
            Body::empty(),
        )
        .await;
    assert_eq!(resp.status().as_u16(), 200);
    let mut body = resp.into_body();
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("a watch event in time")
        .expect("a frame")
        .expect("no error");
    let chunk = frame.into_data().expect("data");
    let event: Value =
        serde_json::from_slice(chunk.split(|b| *b == b'\n').next().expect("one line"))
            .expect("a JSON event");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "via-proxy");
    drop(body);

    // `flotilla join`'s other shape: a whole kubeconfig, its server and CA inline.
    cp.cluster(
        "by-kubeconfig",
        Some(json!({"kubeconfig": b64(&member.kubeconfig)})),
        json!({"syncMode": "Push", "apiEndpoint": url}),
    )
    .await;
    let (code, got) = cp
        .send(
            "GET",
            &format!("{PROXY}/by-kubeconfig/proxy/api/v1/namespaces/default/configmaps/via-proxy"),
            Body::empty(),
        )
        .await;
    assert_eq!(code, 200, "{got}");
    // spec.insecureSkipTLSVerification: no CA needed.
    cp.cluster(
        "insecure",
        Some(json!({"token": b64(&token)})),
        json!({"syncMode": "Push", "apiEndpoint": url, "insecureSkipTLSVerification": true}),
    )
    .await;
    let (code, got) = cp
        .send(
            "GET",
            &format!("{PROXY}/insecure/proxy/api/v1/namespaces/default/configmaps/via-proxy"),
            Body::empty(),
        )
        .await;
    assert_eq!(code, 200, "{got}");

    // A body over 3 MiB is refused before anything is sent.
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": "x".repeat(3 * 1024 * 1024 + 1)}});
    let got = cp
        .send(
            "POST",
            &format!("{base}/api/v1/namespaces/default/configmaps"),
            big.to_string(),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_untrusted_certificates_and_unreachable_members_fail_without_leaking_the_secret()
 {
    let member = TestServer::start();
    let (url, ca, token) = member_credentials(&member);
    let other = TestServer::start();
    let (_, other_ca, _) = member_credentials(&other);
    let cp = ControlPlane::new();
    const WRONG: &str = "wrong-token-that-must-not-be-echoed";

    // A token the member does not accept: the member's 401 comes back.
    cp.cluster(
        "bad-token",
        Some(json!({"token": b64(WRONG), "caBundle": b64(&ca)})),
        json!({"syncMode": "Push", "apiEndpoint": url}),
    )
    .await;
    let got = cp
        .send(
            "GET",
            &format!("{PROXY}/bad-token/proxy/api"),
            Body::empty(),
        )
        .await;
    assert_eq!(got.0, 401, "{}", got.1);
    assert!(!got.1.to_string().contains(WRONG), "{}", got.1);

    // A CA that did not sign the member's certificate: 503, naming nothing secret.
    cp.cluster(
        "wrong-ca",
        Some(json!({"token": b64(&token), "caBundle": b64(&other_ca)})),
        json!({"syncMode": "Push", "apiEndpoint": url}),
    )
    .await;
    let got = cp
        .send("GET", &format!("{PROXY}/wrong-ca/proxy/api"), Body::empty())
        .await;
    assert_status(&got, 503, "ServiceUnavailable");
    let msg = got.1["message"].as_str().unwrap_or_default().to_owned();
    assert!(msg.contains("error trying to reach service"), "{msg}");
    assert!(!msg.contains(&token), "{msg}");

    // No caBundle and no insecureSkipTLSVerification.
    cp.cluster(
        "no-ca",
        Some(json!({"token": b64(WRONG)})),
        json!({"syncMode": "Push", "apiEndpoint": url}),
    )
    .await;
    let got = cp
        .send("GET", &format!("{PROXY}/no-ca/proxy/api"), Body::empty())
        .await;
    assert_status(&got, 503, "ServiceUnavailable");
    let msg = got.1["message"].as_str().unwrap_or_default();
    assert!(msg.contains("karmada-cluster/no-ca"), "{msg}");
    assert!(!msg.contains(WRONG), "{msg}");

    // A kubeconfig that does not parse: its text is not quoted back.
    cp.cluster(
        "bad-kubeconfig",
        Some(json!({"kubeconfig": b64(&format!("clusters: [{WRONG}"))})),
        json!({"syncMode": "Push", "apiEndpoint": url}),
    )
    .await;
    let got = cp
        .send(
            "GET",
            &format!("{PROXY}/bad-kubeconfig/proxy/api"),
            Body::empty(),
        )
        .await;
    assert_status(&got, 503, "ServiceUnavailable");
    let msg = got.1["message"].as_str().unwrap_or_default();
    assert!(msg.contains("karmada-cluster/bad-kubeconfig"), "{msg}");
    assert!(!msg.contains(WRONG), "{msg}");

    // The Secret is gone.
    cp.create(
        "/apis/cluster.karmada.io/v1alpha1/clusters",
        json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "no-secret"},
               "spec": {"syncMode": "Push", "apiEndpoint": url, "secretRef": {"namespace": "karmada-cluster", "name": "absent"}}}),
    )
    .await;
    let got = cp
        .send(
            "GET",
            &format!("{PROXY}/no-secret/proxy/api"),
            Body::empty(),
        )
        .await;
    assert_status(&got, 503, "ServiceUnavailable");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap_or_default()
            .contains("karmada-cluster/absent"),
        "{}",
        got.1
    );

    // Nothing listens: a prompt 503.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    cp.cluster(
        "gone",
        Some(json!({"token": b64(&token), "caBundle": b64(&ca)})),
        json!({"syncMode": "Push", "apiEndpoint": format!("https://127.0.0.1:{closed}")}),
    )
    .await;
    let started = std::time::Instant::now();
    let got = cp
        .send("GET", &format!("{PROXY}/gone/proxy/api"), Body::empty())
        .await;
    assert_status(&got, 503, "ServiceUnavailable");
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(other);
}
