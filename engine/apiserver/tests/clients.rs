//! Real clients unchanged: `kubectl scale`, server-side tables with ages and CRD printer
//! columns, defaulted workloads, `kubectl auth` and the two shapes of Events.
//!
//! kubectl tests run the versioned binaries (`kubectl.1.27` … `kubectl.1.33`) found on PATH, next
//! to the `kubectl` on PATH, or in the google-cloud-cli directory; they skip, with a printed
//! reason, only when none exists.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use common::TestServer;
use flotilla_apiserver::{ApiServer, ServerOptions, Store};

/// The oldest and the newest kubectl this suite targets that exist here.
fn kubectls() -> Vec<PathBuf> {
    let found: Vec<PathBuf> = [27, 33]
        .into_iter()
        .filter_map(common::kubectl_release)
        .collect();
    if found.is_empty() {
        eprintln!("skipping: neither kubectl.1.27 nor kubectl.1.33 exists on this machine");
    }
    found
}

fn apply(bin: &Path, server: &TestServer, name: &str, yaml: &str) {
    let file = server.dir.path().join(name);
    std::fs::write(&file, yaml).expect("write manifest");
    common::kubectl_ok(
        bin,
        server,
        &["apply", "-f", file.to_str().expect("utf-8 path")],
    );
}

fn in_process() -> (axum::Router, Arc<ApiServer>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(store, ServerOptions::default());
    (server.router(), server, dir)
}

/// One request through `router`: status code and JSON body.
async fn send(
    router: &axum::Router,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .expect("request");
    let resp = router.clone().oneshot(req).await.expect("response");
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (code, v)
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}},
        },
    })
}

#[tokio::test]
async fn scale_subresource_reads_patches_and_refuses_a_stale_resource_version() {
    let (router, _server, _dir) = in_process();
    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    let (code, created) = send(&router, "POST", deploys, JSON, Some(deployment("web", 2))).await;
    assert_eq!(code, 201, "{created}");
    let scale_path = format!("{deploys}/web/scale");

    let (code, scale) = send(&router, "GET", &scale_path, JSON, None).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web");
    assert_eq!(
        scale["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );

    // Merge patch of the Scale changes the parent's spec.replicas and nothing else.
    let patch = json!({"spec": {"replicas": 5}});
    let (code, patched) = send(&router, "PATCH", &scale_path, MERGE, Some(patch)).await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["spec"]["replicas"], 5);
    let (_, parent) = send(&router, "GET", &format!("{deploys}/web"), JSON, None).await;
    assert_eq!(parent["spec"]["replicas"], 5);
    assert_eq!(parent["metadata"]["generation"], 2);
    assert_eq!(
        parent["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        patched["metadata"]["resourceVersion"],
        parent["metadata"]["resourceVersion"]
    );

    // The Scale read before the patch carries a stale resourceVersion: PUT is a 409.
    let mut stale = scale.clone();
    stale["spec"]["replicas"] = json!(7);
    let (code, status) = send(&router, "PUT", &scale_path, JSON, Some(stale)).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    let stale_patch = json!({"metadata": {"resourceVersion": scale["metadata"]["resourceVersion"]}, "spec": {"replicas": 8}});
    let (code, _) = send(&router, "PATCH", &scale_path, MERGE, Some(stale_patch)).await;
    assert_eq!(code, 409);
    let (_, parent) = send(&router, "GET", &format!("{deploys}/web"), JSON, None).await;
    assert_eq!(
        parent["spec"]["replicas"], 5,
        "conflicting writes change nothing"
    );

    // A current resourceVersion succeeds; a negative count is invalid.
    let mut fresh = patched.clone();
    fresh["spec"]["replicas"] = json!(1);
    let (code, put) = send(&router, "PUT", &scale_path, JSON, Some(fresh)).await;
    assert_eq!(code, 200, "{put}");
    assert_eq!(put["spec"]["replicas"], 1);
    let negative = json!({"spec": {"replicas": -1}});
    let (code, status) = send(&router, "PATCH", &scale_path, MERGE, Some(negative)).await;
    assert_eq!(code, 422, "{status}");

    // Missing objects and kinds without /scale are 404.
    let (code, _) = send(&router, "GET", &format!("{deploys}/nope/scale"), JSON, None).await;
    assert_eq!(code, 404);
    let (code, _) = send(
        &router,
        "GET",
        "/api/v1/namespaces/default/configmaps/x/scale",
        JSON,
        None,
    )
    .await;
    assert_eq!(code, 404);

    // Discovery lists deployments/scale as autoscaling/v1 Scale.
    let (_, apps) = send(&router, "GET", "/apis/apps/v1", JSON, None).await;
    let entry = apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "deployments/scale")
        .cloned()
        .expect("deployments/scale in discovery");
    assert_eq!(entry["kind"], "Scale");
    assert_eq!(entry["group"], "autoscaling");
    assert_eq!(entry["version"], "v1");
}

#[tokio::test]
async fn custom_resources_declaring_scale_serve_it_through_their_paths() {
    let (router, _server, _dir) = in_process();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.scaletest.example.com"},
        "spec": {
            "group": "scaletest.example.com", "scope": "Namespaced",
            "names": {"kind": "Pool", "plural": "pools", "singular": "pool"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.ready",
                    "labelSelectorPath": ".status.selector"}}}],
        },
    });
    let (code, body) = send(
        &router,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        JSON,
        Some(crd),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let pools = "/apis/scaletest.example.com/v1/namespaces/default/pools";
    let pool = json!({"apiVersion": "scaletest.example.com/v1", "kind": "Pool",
                      "metadata": {"name": "p"}, "spec": {"size": 1}});
    let (code, body) = send(&router, "POST", pools, JSON, Some(pool)).await;
    assert_eq!(code, 201, "{body}");
    let status = json!({"status": {"ready": 1, "selector": "app=p"}});
    let (code, body) = send(
        &router,
        "PATCH",
        &format!("{pools}/p/status"),
        MERGE,
        Some(status),
    )
    .await;
    assert_eq!(code, 200, "{body}");

    let (code, scale) = send(&router, "GET", &format!("{pools}/p/scale"), JSON, None).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(scale["status"], json!({"replicas": 1, "selector": "app=p"}));
    let patch = json!({"spec": {"replicas": 4}});
    let (code, _) = send(
        &router,
        "PATCH",
        &format!("{pools}/p/scale"),
        MERGE,
        Some(patch),
    )
    .await;
    assert_eq!(code, 200);
    let (_, p) = send(&router, "GET", &format!("{pools}/p"), JSON, None).await;
    assert_eq!(p["spec"]["size"], 4);
    assert_eq!(p["status"]["ready"], 1);

    let (_, disc) = send(&router, "GET", "/apis/scaletest.example.com/v1", JSON, None).await;
    assert!(
        disc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pools/scale" && r["kind"] == "Scale"),
        "{disc}"
    );
}

const NGINX: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
spec:
  replicas: 1
  selector:
    matchLabels: {app: nginx}
  template:
    metadata:
      labels: {app: nginx}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
"#;

#[test]
fn kubectl_scale_changes_spec_replicas() {
    for bin in kubectls() {
        let server = TestServer::start();
        apply(&bin, &server, "nginx.yaml", NGINX);
        let out = common::kubectl_ok(&bin, &server, &["scale", "deploy", "nginx", "--replicas=3"]);
        assert!(out.contains("deployment.apps/nginx scaled"), "{out}");
        let replicas = common::kubectl_ok(
            &bin,
            &server,
            &["get", "deploy", "nginx", "-o", "jsonpath={.spec.replicas}"],
        );
        assert_eq!(replicas.trim(), "3", "{}", bin.display());
        // --current-replicas is a precondition kubectl checks against the Scale.
        let refused = common::run_kubectl(
            &bin,
            &server,
            &[
                "scale",
                "deploy",
                "nginx",
                "--current-replicas=2",
                "--replicas=4",
            ],
        );
        assert!(!refused.status.success(), "{}", bin.display());
        let out = common::kubectl_ok(
            &bin,
            &server,
            &[
                "scale",
                "deploy/nginx",
                "--current-replicas=3",
                "--replicas=0",
            ],
        );
        assert!(out.contains("scaled"), "{out}");
        let replicas = common::kubectl_ok(
            &bin,
            &server,
            &["get", "deploy", "nginx", "-o", "jsonpath={.spec.replicas}"],
        );
        assert_eq!(replicas.trim(), "0", "{}", bin.display());
    }
}

/// The deploy/crds manifests, as `kubectl apply -f` takes them.
fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

/// Whether `cell` is an age as kube prints a fresh one (`0s` … `119s`).
fn is_fresh_age(cell: &str) -> bool {
    cell.strip_suffix('s')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The header and the row named `name` of kubectl's table output, split into cells at the
/// header's column starts (an empty cell is printed blank).
fn table_row(out: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let mut lines = out.lines();
    let header_line = lines.next().unwrap_or_default();
    let mut starts = Vec::new();
    let mut header = Vec::new();
    let mut prev_space = true;
    for (i, ch) in header_line.char_indices() {
        if prev_space && ch != ' ' {
            starts.push(i);
        }
        prev_space = ch == ' ';
    }
    for (n, start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(header_line.len());
        header.push(header_line[*start..end].trim().to_owned());
    }
    let line = lines
        .find(|l| l.split_whitespace().any(|c| c == name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{out}"));
    let row = starts
        .iter()
        .enumerate()
        .map(|(n, start)| {
            let end = starts.get(n + 1).copied().unwrap_or(line.len());
            line.get(*start..end.min(line.len()))
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .collect();
    (header, row)
}

const WORK: &str = r#"apiVersion: work.karmada.io/v1alpha1
kind: Work
metadata:
  name: nginx-work
  namespace: default
spec:
  workload:
    manifests:
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: nginx}
"#;

const CLUSTER: &str = r#"apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata:
  name: member1
spec:
  syncMode: Push
  apiEndpoint: https://member1.example:6443
"#;

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.tables.example.com
spec:
  group: tables.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Born, type: date, jsonPath: .spec.born}
    - {name: Color, type: string, jsonPath: .spec.color, priority: 1}
"#;

const WIDGET: &str = r#"apiVersion: tables.example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
  born: "2020-01-01T00:00:00Z"
  color: blue
"#;

#[test]
fn kubectl_tables_show_ages_and_crd_printer_columns() {
    for bin in kubectls() {
        let server = TestServer::start();
        let crds = crds_dir();
        common::kubectl_ok(
            &bin,
            &server,
            &["apply", "-f", crds.to_str().expect("utf-8")],
        );
        apply(&bin, &server, "nginx.yaml", NGINX);
        apply(&bin, &server, "work.yaml", WORK);
        apply(&bin, &server, "cluster.yaml", CLUSTER);
        apply(&bin, &server, "widget-crd.yaml", WIDGET_CRD);
        apply(&bin, &server, "widget.yaml", WIDGET);

        // Built-in kinds: AGE is an age, not a timestamp.
        let out = common::kubectl_ok(&bin, &server, &["get", "deploy", "nginx"]);
        let (header, row) = table_row(&out, "nginx");
        assert_eq!(header.last().map(String::as_str), Some("AGE"), "{out}");
        assert!(is_fresh_age(row.last().unwrap()), "{out}");

        // Karmada's Work CRD columns.
        let out = common::kubectl_ok(&bin, &server, &["get", "work", "-A"]);
        let (header, row) = table_row(&out, "nginx-work");
        assert_eq!(
            header,
            ["NAMESPACE", "NAME", "WORKLOAD-KIND", "APPLIED", "AGE"],
            "{out}"
        );
        assert_eq!(row[0], "default");
        assert_eq!(row[2], "Deployment", "{out}");
        assert_eq!(row[3], "", "no Applied condition yet: {out}");
        assert!(is_fresh_age(&row[4]), "{out}");

        // Karmada's Cluster CRD columns, also in -o wide.
        let out = common::kubectl_ok(&bin, &server, &["get", "clusters", "-o", "wide"]);
        let (header, row) = table_row(&out, "member1");
        assert_eq!(header, ["NAME", "VERSION", "MODE", "READY", "AGE"], "{out}");
        assert_eq!(row[1], "", "no status yet: {out}");
        assert_eq!(row[2], "Push", "{out}");
        assert!(is_fresh_age(&row[4]), "{out}");

        // priority 1 columns only in -o wide; date columns are ages too.
        let out = common::kubectl_ok(&bin, &server, &["get", "widgets"]);
        let (header, row) = table_row(&out, "w1");
        assert_eq!(header, ["NAME", "SIZE", "BORN"], "{out}");
        assert_eq!(row[1], "3");
        let born = &row[2];
        assert!(born.contains('y'), "2020 is years ago: {out}");
        let out = common::kubectl_ok(&bin, &server, &["get", "widgets", "-o", "wide"]);
        let (header, row) = table_row(&out, "w1");
        assert_eq!(header, ["NAME", "SIZE", "BORN", "COLOR"], "{out}");
        assert_eq!(row[3], "blue");
    }
}

#[test]
fn kubectl_auth_whoami_and_can_i_answer_for_the_token_holder() {
    for bin in kubectls() {
        let server = TestServer::start();
        let out = common::kubectl_ok(&bin, &server, &["auth", "whoami", "-o", "json"]);
        let review: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(review["kind"], "SelfSubjectReview", "{out}");
        assert_eq!(review["status"]["userInfo"]["username"], "flotilla-admin");
        assert_eq!(
            review["status"]["userInfo"]["groups"],
            json!(["system:masters", "system:authenticated"])
        );
        let out = common::kubectl_ok(&bin, &server, &["auth", "whoami"]);
        assert!(out.contains("flotilla-admin"), "{out}");
        let out = common::kubectl_ok(&bin, &server, &["auth", "can-i", "create", "deployments"]);
        assert_eq!(out.trim(), "yes");
        let out = common::kubectl_ok(&bin, &server, &["auth", "can-i", "get", "/healthz"]);
        assert_eq!(out.trim(), "yes");
        let out = common::kubectl_ok(&bin, &server, &["auth", "can-i", "--list"]);
        assert!(out.contains("*.*"), "{out}");

        // A wrong token is a kube-shaped 401, which kubectl reports as such.
        let refused = common::run_kubectl(
            &bin,
            &server,
            &["auth", "whoami", "--token", "not-the-token"],
        );
        assert!(!refused.status.success());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains("You must be logged in to the server"),
            "{stderr}"
        );
        let refused = common::run_kubectl(
            &bin,
            &server,
            &["auth", "can-i", "get", "pods", "--token", "not-the-token"],
        );
        assert!(!refused.status.success());
    }
}

fn core_event(name: &str, regarding: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": regarding, "namespace": "default"},
        "reason": "ScheduleBindingSucceed", "message": "Binding has been scheduled", "type": "Normal",
        "count": 3, "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:05:00Z",
        "source": {"component": "flotilla-scheduler"}, "reportingComponent": "flotilla-scheduler",
        "reportingInstance": "flotilla-0",
    })
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn events_k8s_io_is_a_view_of_the_core_events() {
    let (router, _server, _dir) = in_process();
    let core = "/api/v1/namespaces/default/events";
    let view = "/apis/events.k8s.io/v1/namespaces/default/events";

    // A watch through the view, opened before anything exists.
    let req = Request::builder()
        .uri(format!("{view}?watch=true"))
        .body(Body::empty())
        .unwrap();
    let watch = router.clone().oneshot(req).await.unwrap();
    assert_eq!(watch.status(), 200);
    let mut watch = watch.into_body().into_data_stream();

    // Written through core/v1, read through events.k8s.io/v1.
    let (code, created) = send(&router, "POST", core, JSON, Some(core_event("e1", "web"))).await;
    assert_eq!(code, 201, "{created}");
    let (code, e1) = send(&router, "GET", &format!("{view}/e1"), JSON, None).await;
    assert_eq!(code, 200, "{e1}");
    assert_eq!(e1["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e1["kind"], "Event");
    assert_eq!(e1["regarding"]["name"], "web");
    assert_eq!(e1["note"], "Binding has been scheduled");
    assert_eq!(e1["deprecatedCount"], 3);
    assert_eq!(e1["deprecatedFirstTimestamp"], "2025-01-01T00:00:00Z");
    assert_eq!(e1["deprecatedLastTimestamp"], "2025-01-01T00:05:00Z");
    assert_eq!(e1["deprecatedSource"]["component"], "flotilla-scheduler");
    assert_eq!(e1["reportingController"], "flotilla-scheduler");
    assert_eq!(e1["reportingInstance"], "flotilla-0");
    for core_only in [
        "involvedObject",
        "message",
        "count",
        "source",
        "reportingComponent",
    ] {
        assert!(e1.get(core_only).is_none(), "{core_only} in {e1}");
    }
    assert_eq!(
        e1["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "one object, one resourceVersion"
    );

    // Written through events.k8s.io/v1, read through core/v1.
    let new_event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e2", "namespace": "default"},
        "regarding": {"kind": "Work", "name": "other", "namespace": "default"},
        "note": "applied", "reason": "Applied", "type": "Normal", "action": "Apply",
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "reportingController": "flotilla-execution", "reportingInstance": "flotilla-0",
    });
    let (code, e2) = send(&router, "POST", view, JSON, Some(new_event)).await;
    assert_eq!(code, 201, "{e2}");
    assert_eq!(
        e2["note"], "applied",
        "the answer is in the view's shape: {e2}"
    );
    let (_, e2_core) = send(&router, "GET", &format!("{core}/e2"), JSON, None).await;
    assert_eq!(e2_core["apiVersion"], "v1");
    assert_eq!(e2_core["involvedObject"]["name"], "other");
    assert_eq!(e2_core["message"], "applied");
    assert_eq!(e2_core["reportingComponent"], "flotilla-execution");
    assert_eq!(e2_core["eventTime"], "2025-01-01T00:00:00.000000Z");

    // Both lists hold both events; field selectors work on either shape.
    let (_, all_view) = send(&router, "GET", view, JSON, None).await;
    assert_eq!(all_view["apiVersion"], "events.k8s.io/v1");
    assert_eq!(names(&all_view), ["e1", "e2"]);
    let (_, all_core) = send(&router, "GET", core, JSON, None).await;
    assert_eq!(names(&all_core), ["e1", "e2"]);
    let (_, by_regarding) = send(
        &router,
        "GET",
        &format!("{view}?fieldSelector=regarding.name%3Dweb"),
        JSON,
        None,
    )
    .await;
    assert_eq!(names(&by_regarding), ["e1"]);
    let (_, by_controller) = send(
        &router,
        "GET",
        &format!("{view}?fieldSelector=reportingController%3Dflotilla-execution"),
        JSON,
        None,
    )
    .await;
    assert_eq!(names(&by_controller), ["e2"]);
    let (_, by_involved) = send(
        &router,
        "GET",
        &format!("{core}?fieldSelector=involvedObject.name%3Dother"),
        JSON,
        None,
    )
    .await;
    assert_eq!(names(&by_involved), ["e2"]);
    let (_, cluster_wide) = send(&router, "GET", "/apis/events.k8s.io/v1/events", JSON, None).await;
    assert_eq!(names(&cluster_wide), ["e1", "e2"]);

    // A merge patch in the view's shape lands on the core fields.
    let patch = json!({"note": "rescheduled", "deprecatedCount": 4});
    let (code, patched) = send(&router, "PATCH", &format!("{view}/e1"), MERGE, Some(patch)).await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["note"], "rescheduled");
    let (_, e1_core) = send(&router, "GET", &format!("{core}/e1"), JSON, None).await;
    assert_eq!(e1_core["message"], "rescheduled");
    assert_eq!(e1_core["count"], 4);
    assert!(e1_core.get("note").is_none(), "{e1_core}");

    // The watch saw the core create in the view's shape.
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut buf = Vec::new();
        while !buf.contains(&b'\n') {
            use futures::StreamExt as _;
            buf.extend_from_slice(&watch.next().await.expect("open").expect("chunk"));
        }
        buf
    })
    .await
    .expect("an event in time");
    let line = first.split(|b| *b == b'\n').next().unwrap();
    let ev: Value = serde_json::from_slice(line).expect("json line");
    assert_eq!(ev["type"], "ADDED", "{ev}");
    assert_eq!(ev["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(ev["object"]["note"], "Binding has been scheduled");

    // Errors name the view's resource.
    let (code, status) = send(&router, "GET", &format!("{view}/missing"), JSON, None).await;
    assert_eq!(code, 404);
    assert_eq!(
        status["message"],
        "events.events.k8s.io \"missing\" not found"
    );
    let (code, _) = send(&router, "DELETE", &format!("{view}/e1"), JSON, None).await;
    assert_eq!(code, 200);
    let (code, _) = send(&router, "GET", &format!("{core}/e1"), JSON, None).await;
    assert_eq!(code, 404, "deleted through the view, gone from core/v1");
}
