//! Request bodies: duplicate and unknown fields follow kube-apiserver's `fieldValidation`
//! (`Strict` refuses, `Warn` — the default — warns, `Ignore` accepts), and a seeded fuzz run of
//! mutated bodies of every kind (JSON, YAML, each patch type) never panics, never hangs, and
//! answers every failure with a well-formed `Status`.

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

/// A response: status code, `Warning` headers, raw body.
struct Answer {
    code: u16,
    warnings: Vec<String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

impl Server {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store opens");
        let router = ApiServer::new(store, ServerOptions::default()).router();
        Server { router, _dir: dir }
    }

    async fn send(&self, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> Answer {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(Body::from(body))
            .expect("request");
        let resp = self.router.clone().oneshot(req).await.expect("infallible");
        let code = resp.status().as_u16();
        let warnings = resp
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().expect("ascii warning").to_owned())
            .collect();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body")
            .to_vec();
        Answer {
            code,
            warnings,
            body,
        }
    }
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const DUP_JSON: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"a":"first","a":"last"}}"#;
const DUP_YAML: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dup\ndata:\n  a: first\n  a: last\n";
const DUP_WARNING: &str = r#"299 - "duplicate field \"data.a\"""#;

fn assert_strict_error(got: &Answer, field: &str) {
    let status = got.json();
    assert_eq!(got.code, 400, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "BadRequest");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "strict decoding error: duplicate field \"{field}\""
        )),
        "{message}"
    );
}

#[tokio::test]
async fn strict_field_validation_refuses_duplicate_fields_in_json_and_yaml_bodies() {
    let s = Server::new();
    for (ct, body) in [
        ("application/json", DUP_JSON),
        ("application/yaml", DUP_YAML),
    ] {
        let got = s
            .send(
                "POST",
                &format!("{CMS}?fieldValidation=Strict"),
                ct,
                body.into(),
            )
            .await;
        assert_strict_error(&got, "data.a");
        let status = got.json();
        assert!(
            status["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
            "{status}"
        );
    }
    let got = s.send("GET", &format!("{CMS}/dup"), "", Vec::new()).await;
    assert_eq!(got.code, 404, "nothing was stored");

    // An update too, with the path of a nested duplicate.
    s.send("POST", CMS, "application/json", DUP_JSON.into())
        .await;
    let update = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","labels":{"x":"1","x":"2"}}}"#;
    let got = s
        .send(
            "PUT",
            &format!("{CMS}/dup?fieldValidation=Strict"),
            "application/json",
            update.into(),
        )
        .await;
    assert_strict_error(&got, "metadata.labels.x");
}

#[tokio::test]
async fn warn_and_the_default_accept_duplicates_with_a_warning_and_ignore_is_silent() {
    let s = Server::new();
    for (i, (query, warned)) in [
        ("?fieldValidation=Warn", true),
        ("", true),
        ("?fieldValidation=Ignore", false),
    ]
    .into_iter()
    .enumerate()
    {
        let body = DUP_JSON.replace("\"dup\"", &format!("\"dup-{i}\""));
        let got = s
            .send(
                "POST",
                &format!("{CMS}{query}"),
                "application/json",
                body.into(),
            )
            .await;
        assert_eq!(got.code, 201, "{}", got.json());
        assert_eq!(got.json()["data"]["a"], "last", "the last value wins");
        if warned {
            assert_eq!(got.warnings, [DUP_WARNING], "{query}");
        } else {
            assert!(got.warnings.is_empty(), "{:?}", got.warnings);
        }
    }
}

#[tokio::test]
async fn every_patch_type_applies_field_validation_to_duplicates() {
    let s = Server::new();
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let created = s
        .send(
            "POST",
            DEPLOYS,
            "application/json",
            deploy.to_string().into(),
        )
        .await;
    assert_eq!(created.code, 201, "{}", created.json());
    let cases = [
        (
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"x":"1","x":"2"}}}"#,
            "metadata.labels.x",
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"spec":{"replicas":2,"replicas":3}}"#,
            "spec.replicas",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"/spec/replicas","value":2,"value":3}]"#,
            "[0].value",
        ),
        (
            "application/apply-patch+yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 2\n  replicas: 3\n",
            "spec.replicas",
        ),
    ];
    for (ct, patch, field) in cases {
        let uri = format!("{DEPLOYS}/d?fieldManager=t&fieldValidation=Strict");
        let got = s.send("PATCH", &uri, ct, patch.into()).await;
        assert_strict_error(&got, field);
        let uri = format!("{DEPLOYS}/d?fieldManager=t&fieldValidation=Warn");
        let got = s.send("PATCH", &uri, ct, patch.into()).await;
        assert_eq!(got.code, 200, "{ct}: {}", got.json());
        assert_eq!(
            got.warnings,
            [format!("299 - \"duplicate field \\\"{field}\\\"\"")],
            "{ct}"
        );
    }
}

#[tokio::test]
async fn unknown_fields_follow_field_validation_on_creates_and_every_patch_type() {
    let s = Server::new();
    let typo = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolcy": "Always"}]}}}});
    let field = "spec.template.spec.containers[0].imagePullPolcy";
    let got = s
        .send(
            "POST",
            &format!("{DEPLOYS}?fieldValidation=Strict"),
            "application/json",
            typo.to_string().into(),
        )
        .await;
    assert_eq!(got.code, 400, "{}", got.json());
    assert_eq!(got.json()["reason"], "BadRequest");
    assert_eq!(
        got.json()["message"],
        format!(
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"{field}\""
        )
    );
    let got = s
        .send("POST", DEPLOYS, "application/json", typo.to_string().into())
        .await;
    assert_eq!(got.code, 201, "{}", got.json());
    assert_eq!(
        got.warnings,
        [format!("299 - \"unknown field \\\"{field}\\\"\"")]
    );
    let cases = [
        (
            "application/merge-patch+json",
            r#"{"spec":{"bogus0":1}}"#,
            "spec.bogus0",
        ),
        (
            "application/strategic-merge-patch+json",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"c","bogus1":1}]}}}}"#,
            "spec.template.spec.containers[0].bogus1",
        ),
        (
            "application/json-patch+json",
            r#"[{"op":"add","path":"/spec/bogus2","value":2}]"#,
            "spec.bogus2",
        ),
        (
            "application/apply-patch+yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  bogus3: 3\n",
            "spec.bogus3",
        ),
    ];
    for (ct, patch, field) in cases {
        let uri = format!("{DEPLOYS}/d?fieldManager=t&fieldValidation=Strict");
        let got = s.send("PATCH", &uri, ct, patch.into()).await;
        assert_eq!(got.code, 400, "{ct}: {}", got.json());
        assert_eq!(
            got.json()["message"],
            format!("strict decoding error: unknown field \"{field}\""),
            "{ct}"
        );
        let uri = format!("{DEPLOYS}/d?fieldManager=t&fieldValidation=Ignore");
        let got = s.send("PATCH", &uri, ct, patch.into()).await;
        assert_eq!(got.code, 200, "{ct}: {}", got.json());
        assert!(got.warnings.is_empty(), "{ct}: {:?}", got.warnings);
    }
    // Unknown fields the stored object already has are not a later patch's.
    let uri = format!("{DEPLOYS}/d?fieldValidation=Strict");
    let got = s
        .send(
            "PATCH",
            &uri,
            "application/merge-patch+json",
            br#"{"spec":{"replicas":3}}"#.to_vec(),
        )
        .await;
    assert_eq!(got.code, 200, "{}", got.json());
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
}

#[tokio::test]
async fn an_unknown_field_validation_directive_is_422() {
    let s = Server::new();
    let got = s
        .send(
            "POST",
            &format!("{CMS}?fieldValidation=Bogus"),
            "application/json",
            DUP_JSON.into(),
        )
        .await;
    let status = got.json();
    assert_eq!(got.code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
}

use fastrand::Rng;

/// Bytes that matter to JSON and YAML parsers.
const INTERESTING: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\"",
    b"'",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"-",
    b"? ",
    b"&a ",
    b"*a",
    b"!!binary ",
    b"!tag ",
    b"\n",
    b"\n  ",
    b"\t",
    b"#",
    b"---\n",
    b"...\n",
    b"|\n",
    b">-\n",
    b"<<: ",
    b"null",
    b"true",
    b"1e999",
    b"-0",
    b"18446744073709551616",
    b"NaN",
    b".nan",
    b"\xff",
    b"\xc3",
    b"\"a\":1,\"a\":2",
    b"a: 1\na: 2\n",
    b"{\"op\":\"copy\"}",
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..=rng.usize(..6) {
        let at = rng.usize(..out.len() + 1);
        match rng.usize(..7) {
            0 if !out.is_empty() => {
                let i = rng.usize(..out.len());
                out[i] ^= 1 << rng.usize(..8);
            }
            1 => {
                let bytes = INTERESTING[rng.usize(..INTERESTING.len())];
                out.splice(at..at, bytes.iter().copied());
            }
            2 if at < out.len() => {
                let end = (at + rng.usize(..16)).min(out.len());
                out.drain(at..end);
            }
            3 if at < out.len() => {
                // Repeat a slice (duplicate keys, nesting).
                let end = (at + rng.usize(..32)).min(out.len());
                let slice = out[at..end].to_vec();
                for _ in 0..rng.usize(..4) {
                    out.splice(at..at, slice.iter().copied());
                }
            }
            4 => out.truncate(at),
            5 => {
                let depth = rng.usize(..300);
                const OPENERS: &[&[u8]] = &[b"[", b"{\"a\":", b"- ", b"a: {"];
                let open = OPENERS[rng.usize(..OPENERS.len())];
                let nest: Vec<u8> = open
                    .iter()
                    .copied()
                    .cycle()
                    .take(open.len() * depth)
                    .collect();
                out.splice(at..at, nest);
            }
            _ => {
                let byte = rng.u64(..) as u8;
                out.insert(at, byte);
            }
        }
    }
    out.truncate(64 * 1024);
    out
}

fn assert_valid_status(answer: &Answer, what: &str) {
    let status: Value = serde_json::from_slice(&answer.body).unwrap_or_else(|e| {
        panic!(
            "{what}: error body is not JSON ({e}): {}",
            String::from_utf8_lossy(&answer.body)
        )
    });
    assert_eq!(status["kind"], "Status", "{what}: {status}");
    assert_eq!(status["apiVersion"], "v1", "{what}: {status}");
    assert_eq!(status["status"], "Failure", "{what}: {status}");
    assert_eq!(status["code"], answer.code, "{what}: {status}");
    assert!(
        status["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{what}: {status}"
    );
    assert!(status["message"].is_string(), "{what}: {status}");
}

#[tokio::test]
async fn fuzzed_bodies_of_every_kind_get_a_status_never_a_panic_or_a_hang() {
    const CASES: usize = 1500;
    const DEADLINE: Duration = Duration::from_secs(5);
    let s = Server::new();
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "target"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "t"}},
                 "template": {"metadata": {"labels": {"app": "t"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let created = s
        .send(
            "POST",
            DEPLOYS,
            "application/json",
            deploy.to_string().into(),
        )
        .await;
    assert_eq!(created.code, 201);
    let target = format!("{DEPLOYS}/target");
    // (method, path, content type, seed body)
    let seeds: Vec<(&str, String, &str, Vec<u8>)> = vec![
        ("POST", DEPLOYS.to_owned(), "application/json", deploy.to_string().into_bytes()),
        (
            "POST",
            CMS.to_owned(),
            "application/yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\n  labels: {a: b}\ndata:\n  k: [1, 2]\n".to_vec(),
        ),
        ("PUT", target.clone(), "application/json", deploy.to_string().into_bytes()),
        (
            "PATCH",
            target.clone(),
            "application/json-patch+json",
            br#"[{"op":"replace","path":"/spec/replicas","value":2},{"op":"add","path":"/metadata/labels","value":{"x":"y"}},{"op":"copy","from":"/spec","path":"/metadata/annotations"}]"#.to_vec(),
        ),
        (
            "PATCH",
            target.clone(),
            "application/merge-patch+json",
            br#"{"metadata":{"labels":{"x":"y"}},"spec":{"replicas":3,"paused":null}}"#.to_vec(),
        ),
        (
            "PATCH",
            target.clone(),
            "application/strategic-merge-patch+json",
            br#"{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"j"},{"$patch":"delete","name":"z"}]}}},"$setElementOrder/x":[]}"#.to_vec(),
        ),
        (
            "PATCH",
            format!("{target}?fieldManager=fuzz&force=true"),
            "application/apply-patch+yaml",
            b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: target\nspec:\n  replicas: 4\n  template:\n    spec:\n      containers:\n      - name: c\n        image: k\n".to_vec(),
        ),
    ];
    let validations = [
        "",
        "fieldValidation=Strict",
        "fieldValidation=Warn",
        "fieldValidation=Ignore",
    ];
    let mut rng = Rng::with_seed(0x5EED_F1E1_D0C5_u64);
    let started = Instant::now();
    let mut codes = std::collections::BTreeMap::<u16, usize>::new();
    let mut slowest = Duration::ZERO;
    for case in 0..CASES {
        let (method, path, ct, seed) = &seeds[rng.usize(..seeds.len())];
        let body = if rng.usize(..10) == 0 {
            seed.clone()
        } else {
            mutate(&mut rng, seed)
        };
        let sep = if path.contains('?') { '&' } else { '?' };
        let uri = format!("{path}{sep}{}", validations[rng.usize(..validations.len())]);
        let what = format!("case {case}: {method} {uri} ({ct})");
        let t = Instant::now();
        let answer = tokio::time::timeout(DEADLINE, s.send(method, &uri, ct, body))
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {DEADLINE:?}"));
        slowest = slowest.max(t.elapsed());
        *codes.entry(answer.code).or_default() += 1;
        if answer.code >= 400 {
            assert_valid_status(&answer, &what);
            assert!(
                answer.code < 500,
                "{what}: a client error, not a server one: {}",
                answer.json()
            );
        } else {
            assert!(
                answer.json().is_object(),
                "{what}: a success answers with an object"
            );
        }
    }
    eprintln!(
        "{CASES} fuzzed requests in {:?} (slowest {slowest:?}); status codes: {codes:?}",
        started.elapsed()
    );
    assert!(
        codes.keys().any(|c| *c < 300) && codes.keys().any(|c| *c >= 400),
        "the mutations reach both the decoders' successes and their errors: {codes:?}"
    );
}
