//! OpenAPI v3 schemas with the real kubectl: `kubectl explain` of built-in and Karmada kinds, and
//! server-side field validation of unknown fields (`kubectl apply --validate=strict|warn`).
//!
//! Runs kubectl 1.27 and 1.33 (`kubectl.1.N` beside the `kubectl` on PATH); skips, with a printed
//! reason, when a release is missing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TestServer, kubectl_release};

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(bin: &Path, server: &TestServer, args: &[&str]) -> (String, String) {
    let out = common::run_kubectl(bin, server, args);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{} {args:?} failed:\nstdout: {stdout}\nstderr: {stderr}",
        bin.display()
    );
    (stdout, stderr)
}

fn deployment(pull_policy_field: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        {pull_policy_field}: IfNotPresent
"#
    )
}

const TYPO: &str = r#"unknown field "spec.template.spec.containers[0].imagePullPolcy""#;

fn release(minor: u32) -> Option<PathBuf> {
    let bin = kubectl_release(minor);
    if bin.is_none() {
        eprintln!("skipping: no kubectl.1.{minor}");
    }
    bin
}

fn explain_and_validate(minor: u32) {
    let Some(bin) = release(minor) else {
        return;
    };
    let server = TestServer::start();

    let (out, _) = ok(&bin, &server, &["explain", "deployment.spec.template"]);
    for line in [
        "KIND:       Deployment",
        "VERSION:    v1",
        "Template describes the pods that will be created.",
        "Standard object's metadata.",
        "Specification of the desired behavior of the pod.",
    ] {
        assert!(
            out.contains(line),
            "kubectl 1.{minor} explain lacks {line:?}:\n{out}"
        );
    }
    let (out, _) = ok(
        &bin,
        &server,
        &[
            "explain",
            "deployment.spec.template.spec.containers.imagePullPolicy",
        ],
    );
    assert!(
        out.contains("Image pull policy."),
        "kubectl 1.{minor}:\n{out}"
    );

    let (out, _) = ok(
        &bin,
        &server,
        &["explain", "propagationpolicy.spec.placement"],
    );
    for line in [
        "KIND:       PropagationPolicy",
        "VERSION:    v1alpha1",
        "clusterAffinity\t<Object>",
        "spreadConstraints\t<[]Object>",
        "Flotilla extension: CEL score expressions",
    ] {
        assert!(
            out.contains(line),
            "kubectl 1.{minor} explain lacks {line:?}:\n{out}"
        );
    }

    let dir = server.dir.path();
    let typo = dir.join("typo.yaml");
    std::fs::write(&typo, deployment("imagePullPolcy")).expect("write");
    let good = dir.join("good.yaml");
    std::fs::write(&good, deployment("imagePullPolicy")).expect("write");
    let typo = typo.to_str().expect("utf-8 path");
    let good = good.to_str().expect("utf-8 path");

    // Strict (kubectl's default too): refused, naming the field.
    for args in [
        &["apply", "--validate=strict", "-f", typo][..],
        &["apply", "-f", typo][..],
        &["create", "-f", typo][..],
    ] {
        let out = common::run_kubectl(&bin, &server, args);
        let (stdout, stderr) = text(&out);
        assert!(
            !out.status.success(),
            "kubectl 1.{minor} {args:?} accepted a typo: {stdout}"
        );
        assert!(
            stderr.contains(&format!("strict decoding error: {TYPO}")),
            "kubectl 1.{minor} {args:?}: {stderr}"
        );
    }
    let missing = common::run_kubectl(&bin, &server, &["get", "deployment", "web"]);
    assert!(
        !missing.status.success(),
        "the refused Deployment was stored"
    );

    // Warn: accepted, with kube's warning.
    let (_, stderr) = ok(&bin, &server, &["apply", "--validate=warn", "-f", typo]);
    assert!(
        stderr.contains(&format!("Warning: {TYPO}")),
        "kubectl 1.{minor} --validate=warn: {stderr}"
    );
    ok(&bin, &server, &["delete", "deployment", "web"]);

    // Without the typo: accepted silently; a later patch with the typo is refused too.
    let (stdout, stderr) = ok(&bin, &server, &["apply", "--validate=strict", "-f", good]);
    assert!(stdout.contains("deployment.apps/web created"), "{stdout}");
    assert!(!stderr.contains("Warning"), "{stderr}");
    let out = common::run_kubectl(&bin, &server, &["apply", "--validate=strict", "-f", typo]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "kubectl 1.{minor} patched in a typo");
    assert!(stderr.contains(TYPO), "kubectl 1.{minor} patch: {stderr}");
    // Ignore: silent.
    let (_, stderr) = ok(&bin, &server, &["apply", "--validate=false", "-f", typo]);
    assert!(!stderr.contains("unknown field"), "{stderr}");

    // A Karmada kind is checked against its CRD schema.
    let policy = dir.join("pp.yaml");
    std::fs::write(
        &policy,
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: p\nspec:\n  resourceSelectors:\n  - apiVersion: apps/v1\n    kind: Deployment\n    nmae: web\n",
    )
    .expect("write");
    let out = common::run_kubectl(
        &bin,
        &server,
        &["apply", "-f", policy.to_str().expect("utf-8")],
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "kubectl 1.{minor} accepted nmae");
    assert!(
        stderr.contains(r#"unknown field "spec.resourceSelectors[0].nmae""#),
        "kubectl 1.{minor}: {stderr}"
    );
}

#[test]
fn kubectl_1_27_explains_and_validates_against_the_served_schemas() {
    explain_and_validate(27);
}

#[test]
fn kubectl_1_33_explains_and_validates_against_the_served_schemas() {
    explain_and_validate(33);
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: The widget's desired state.
            properties:
              size:
                type: integer
                description: How many sprockets the widget has.
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
"#;

#[test]
fn custom_resources_are_explained_and_validated_from_their_crd() {
    let Some(bin) = release(33) else {
        return;
    };
    let server = TestServer::start();
    let dir = server.dir.path();
    let crd = dir.join("crd.yaml");
    std::fs::write(&crd, CRD).expect("write");
    ok(
        &bin,
        &server,
        &["apply", "-f", crd.to_str().expect("utf-8")],
    );
    // The openapi index hash moved, so kubectl sees the new schema despite its cache.
    let mut explained = String::new();
    for _ in 0..50 {
        let out = common::run_kubectl(&bin, &server, &["explain", "widget.spec"]);
        explained = text(&out).0;
        if out.status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        explained.contains("How many sprockets the widget has."),
        "{explained}"
    );
    // The document at the index's URL is immutable (kubectl's disk cache keeps it); the hash
    // of example.com/v1 is in the index now.
    let (index, _) = ok(&bin, &server, &["get", "--raw", "/openapi/v3"]);
    let index: serde_json::Value = serde_json::from_str(&index).expect("index is JSON");
    let url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("example.com/v1 in the index")
        .to_owned();
    let (doc, headers) = ok(&bin, &server, &["-v=8", "get", "--raw", &url]);
    assert!(
        headers.contains("Cache-Control: public, immutable"),
        "{headers}"
    );
    assert!(
        doc.contains("\"com.example.v1.Widget\""),
        "{}",
        &doc[..doc.len().min(400)]
    );
    let widget = dir.join("w.yaml");
    std::fs::write(
        &widget,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 1\n  extra: {any: thing}\n  colour: red\n",
    )
    .expect("write");
    let out = common::run_kubectl(
        &bin,
        &server,
        &["apply", "-f", widget.to_str().expect("utf-8")],
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "accepted spec.colour");
    assert!(
        stderr.contains(r#"strict decoding error: unknown field "spec.colour""#),
        "{stderr}"
    );
}
