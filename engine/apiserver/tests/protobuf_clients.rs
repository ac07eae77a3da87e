//! Real clients that speak Kubernetes protobuf against an in-process server over TLS:
//!
//! - client-go at its default configuration (`tests/client-go`, built with `go build`): typed
//!   create/update/get/list/delete of a ConfigMap and a Deployment, and leader election with a
//!   LeaseLock. Skips, with a printed reason, only when `go` is missing.
//! - kubectl 1.33 (protobuf bodies for imperative `create`) and 1.27 (JSON): `create configmap`,
//!   `deployment`, `secret generic`, `namespace`, and `--dry-run=server -o yaml`. Each skips, with
//!   a printed reason, when that kubectl is not installed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::TestServer;

fn client_go_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/client-go")
}

#[test]
fn client_go_default_config_does_typed_crud_and_leader_election_over_protobuf() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("client-go-e2e");
    let build = match Command::new("go")
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(client_go_dir())
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            println!("skipped: cannot run `go` ({e}); install Go >= 1.25");
            return;
        }
    };
    assert!(
        build.status.success(),
        "go build failed:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let server = TestServer::start();
    let run = Command::new(&out)
        .arg("-kubeconfig")
        .arg(&server.kubeconfig_path)
        .output()
        .expect("the client-go program runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "client-go program failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for step in [
        "ok configmap watch event",
        "ok informer synced",
        "ok informer add",
        "ok informer update",
        "ok informer delete",
        "ok configmap create",
        "ok configmap update",
        "ok configmap get",
        "ok configmap list",
        "ok configmap delete",
        "ok configmap gone",
        "ok deployment create",
        "ok deployment update",
        "ok deployment get",
        "ok deployment list",
        "ok deployment delete",
        "ok deployment gone",
        "ok secret create",
        "ok namespace create",
        "ok events.k8s.io event create",
        "ok events.k8s.io event read as core/v1",
        "ok leader election acquired the lease",
        "ok lease get",
        "ok protobuf on the wire",
    ] {
        assert!(stdout.contains(step), "missing {step:?} in:\n{stdout}");
    }
}

#[test]
fn kubectl_imperative_create_works_with_protobuf_bodies() {
    for minor in [33, 27] {
        let Some(bin) = common::kubectl_release(minor) else {
            println!("skipped kubectl 1.{minor}: not installed");
            continue;
        };
        let bin = bin.as_path();
        let server = TestServer::start();
        let k = |args: &[&str]| common::kubectl_ok(bin, &server, args);
        assert_eq!(
            k(&["create", "configmap", "x", "--from-literal=a=b"]).trim(),
            "configmap/x created"
        );
        assert_eq!(
            k(&["create", "deployment", "d", "--image=nginx"]).trim(),
            "deployment.apps/d created"
        );
        assert_eq!(
            k(&["create", "secret", "generic", "s", "--from-literal=k=v"]).trim(),
            "secret/s created"
        );
        assert_eq!(
            k(&["create", "namespace", "n"]).trim(),
            "namespace/n created"
        );
        let yaml = k(&[
            "create",
            "configmap",
            "y",
            "--from-literal=a=b",
            "--dry-run=server",
            "-o",
            "yaml",
        ]);
        for line in [
            "apiVersion: v1",
            "kind: ConfigMap",
            "  a: b",
            "  name: \"y\"",
            "  namespace: default",
            "  uid: ",
        ] {
            assert!(
                yaml.contains(line),
                "{}: {line:?} missing from:\n{yaml}",
                bin.display()
            );
        }

        // What was stored reads back as written.
        let got = k(&["get", "configmap", "x", "-o", "jsonpath={.data.a}"]);
        assert_eq!(got, "b", "{}", bin.display());
        let image = k(&[
            "get",
            "deployment",
            "d",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}",
        ]);
        assert_eq!(image, "1 nginx", "{}", bin.display());
        let secret = k(&["get", "secret", "s", "-o", "jsonpath={.data.k}"]);
        assert_eq!(secret, "dg==", "{}", bin.display());
        let ns = k(&["get", "namespace", "n", "-o", "jsonpath={.status.phase}"]);
        assert_eq!(ns, "Active", "{}", bin.display());
        let dry = k(&["get", "configmaps", "-o", "name"]);
        assert!(
            !dry.contains("configmap/y"),
            "{}: dry run stored y",
            bin.display()
        );

        if bin.ends_with("1.33") {
            // kubectl >= 1.32 writes protobuf here, and reads the protobuf answer.
            let out = Command::new(bin)
                .arg("--kubeconfig")
                .arg(&server.kubeconfig_path)
                .args(["create", "configmap", "z", "--from-literal=a=b", "-v=8"])
                .env_remove("KUBECONFIG")
                .output()
                .expect("kubectl runs");
            let log = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{log}");
            let protobuf = log
                .lines()
                .filter(|l| l.contains("Content-Type: application/vnd.kubernetes.protobuf"))
                .count();
            assert!(protobuf >= 2, "request and answer in protobuf:\n{log}");
        }
    }
}
