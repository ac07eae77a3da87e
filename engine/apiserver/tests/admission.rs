//! The admission extension point through the machine's real kubectl: every write of the main
//! resource (create, replace, client- and server-side apply, JSON/merge/strategic patch, dry-run)
//! is admitted, status writes are not, rejections print as kubectl's `The X "n" is invalid: ...`,
//! and an unchanged invalid spec stays writable (ratcheting).
//! Skips, with a printed reason, only when no kubectl exists at all.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};

use flotilla_apiserver::admission::{Admission, AdmissionError, Operation};
use flotilla_apiserver::registry::Resource;
use flotilla_apiserver::{Config, Running};
use serde_json::{Value, json};

/// A toy policy on ConfigMaps: `data.reject` is refused (while `strict`), `data.defaulted` defaults
/// to `yes`. Counts calls per kind, and checks `old` is given exactly on updates.
#[derive(Debug, Default)]
struct Toy {
    strict: AtomicBool,
    configmap_calls: AtomicUsize,
    deployment_calls: AtomicUsize,
}

impl Admission for Toy {
    fn admit(
        &self,
        op: Operation,
        resource: &Resource,
        object: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), AdmissionError> {
        assert_eq!(
            op == Operation::Update,
            old.is_some(),
            "old is given exactly on updates"
        );
        match resource.kind {
            "Deployment" => {
                self.deployment_calls.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            "ConfigMap" => {
                self.configmap_calls.fetch_add(1, Ordering::SeqCst);
                if self.strict.load(Ordering::SeqCst) && object.pointer("/data/reject").is_some() {
                    return Err(AdmissionError::field(
                        "data.reject",
                        "Forbidden: must not be set",
                    ));
                }
                if object.pointer("/data/defaulted").is_none() {
                    object["data"]["defaulted"] = json!("yes");
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

struct Server {
    dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(admission: Arc<Toy>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::new(dir.path().join("data"));
        config.admission = Some(admission);
        let (tx, rx) = mpsc::channel::<String>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let running: Running = flotilla_apiserver::start(config, async move {
                    let _ = stop_rx.await;
                })
                .await
                .expect("server starts");
                let _ = tx.send(running.kubeconfig.clone());
                let _ = running.task.await;
            });
        });
        let kubeconfig = rx.recv().expect("server started");
        std::fs::write(dir.path().join("kubeconfig"), kubeconfig).expect("write kubeconfig");
        Server {
            dir,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn kubectl(&self, bin: &Path, args: &[&str]) -> Output {
        Command::new(bin)
            .arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs")
    }

    fn ok(&self, bin: &Path, args: &[&str]) -> String {
        let out = self.kubectl(bin, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// Run, expect exit 1, return stderr.
    fn refused(&self, bin: &Path, args: &[&str]) -> String {
        let out = self.kubectl(bin, args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(1),
            "kubectl {args:?} must fail with exit 1:\nstdout: {}\nstderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        stderr
    }

    fn write(&self, name: &str, contents: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, contents).expect("write manifest");
        p.display().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

const REFUSAL: &str = r#"The ConfigMap "bad" is invalid: data.reject: Forbidden: must not be set"#;

fn cm(name: &str, data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata: {data}\n")
}

#[test]
fn every_write_of_the_main_resource_is_admitted_and_refusals_print_as_invalid() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let toy = Arc::new(Toy {
        strict: AtomicBool::new(true),
        ..Toy::default()
    });
    let s = Server::start(Arc::clone(&toy));
    let k = bin.as_path();
    let bad = s.write("bad.yaml", &cm("bad", "{reject: x}"));
    let good = s.write("good.yaml", &cm("good", "{a: b}"));

    // Create: client-side apply, create, server-side apply, dry-run; refused with exit 1.
    for args in [
        vec!["apply", "-f", &bad],
        vec!["create", "-f", &bad],
        vec!["apply", "--server-side", "-f", &bad],
        vec!["apply", "--dry-run=server", "-f", &bad],
        vec!["create", "--dry-run=server", "-f", &bad],
    ] {
        let err = s.refused(k, &args);
        assert!(err.contains(REFUSAL), "{args:?}: {err}");
    }
    assert!(
        s.kubectl(k, &["get", "cm", "bad"])
            .stderr
            .starts_with(b"Error from server (NotFound)"),
        "nothing was stored"
    );

    // Dry-run of a valid object shows the defaults and stores nothing.
    let dry = s.ok(k, &["apply", "--dry-run=server", "-f", &good, "-o", "json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&dry).expect("json")["data"]["defaulted"],
        "yes",
        "{dry}"
    );
    assert!(
        !s.kubectl(k, &["get", "cm", "good"]).status.success(),
        "dry-run stores nothing"
    );

    // Stored with defaults.
    s.ok(k, &["apply", "-f", &good]);
    assert_eq!(
        s.ok(
            k,
            &["get", "cm", "good", "-o", "jsonpath={.data.defaulted}"]
        ),
        "yes"
    );

    // Updates: apply, replace, every patch type, server-side apply; all refused.
    let bad_update = s.write("bad-update.yaml", &cm("good", "{a: b, reject: x}"));
    let update_refusal =
        r#"The ConfigMap "good" is invalid: data.reject: Forbidden: must not be set"#;
    for args in [
        vec!["apply", "-f", &bad_update],
        vec!["replace", "-f", &bad_update],
        vec![
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &bad_update,
        ],
        vec!["patch", "cm", "good", "-p", r#"{"data":{"reject":"x"}}"#],
        vec![
            "patch",
            "cm",
            "good",
            "--type=merge",
            "-p",
            r#"{"data":{"reject":"x"}}"#,
        ],
        vec![
            "patch",
            "cm",
            "good",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/data/reject","value":"x"}]"#,
        ],
        vec![
            "patch",
            "cm",
            "good",
            "--dry-run=server",
            "--type=merge",
            "-p",
            r#"{"data":{"reject":"x"}}"#,
        ],
    ] {
        let err = s.refused(k, &args);
        assert!(err.contains(update_refusal), "{args:?}: {err}");
    }
    assert_eq!(
        s.ok(k, &["get", "cm", "good", "-o", "jsonpath={.data}"]),
        r#"{"a":"b","defaulted":"yes"}"#
    );

    // A valid patch that drops the defaulted key gets it back.
    s.ok(
        k,
        &[
            "patch",
            "cm",
            "good",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/data/defaulted"}]"#,
        ],
    );
    assert_eq!(
        s.ok(
            k,
            &["get", "cm", "good", "-o", "jsonpath={.data.defaulted}"]
        ),
        "yes"
    );

    // Status writes are not admitted; main-resource writes of other kinds are.
    let deploy = s.write(
        "deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: nginx}]}\n",
    );
    s.ok(k, &["apply", "-f", &deploy]);
    let calls = toy.deployment_calls.load(Ordering::SeqCst);
    assert!(calls >= 1, "the Deployment create was admitted");
    s.ok(
        k,
        &[
            "patch",
            "deploy",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":1}}"#,
        ],
    );
    assert_eq!(
        toy.deployment_calls.load(Ordering::SeqCst),
        calls,
        "status writes are not admitted"
    );
}

#[test]
fn an_unchanged_invalid_spec_stays_writable_but_cannot_get_worse() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let toy = Arc::new(Toy::default());
    let s = Server::start(Arc::clone(&toy));
    let k = bin.as_path();
    // Stored while the policy was lax (an older version of the admission, say).
    s.ok(
        k,
        &[
            "apply",
            "-f",
            &s.write("bad.yaml", &cm("bad", "{reject: x}")),
        ],
    );
    toy.strict.store(true, Ordering::SeqCst);
    // Metadata-only writes (what controllers do: labels, finalizers) still work.
    s.ok(k, &["label", "cm", "bad", "team=a"]);
    s.ok(
        k,
        &[
            "patch",
            "cm",
            "bad",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/f"]}}"#,
        ],
    );
    s.ok(
        k,
        &[
            "patch",
            "cm",
            "bad",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    );
    // A spec change is admitted in full, so the invalid field must go.
    let err = s.refused(
        k,
        &[
            "patch",
            "cm",
            "bad",
            "--type=merge",
            "-p",
            r#"{"data":{"other":"y"}}"#,
        ],
    );
    assert!(err.contains(REFUSAL), "{err}");
    s.ok(
        k,
        &[
            "patch",
            "cm",
            "bad",
            "--type=merge",
            "-p",
            r#"{"data":{"reject":null}}"#,
        ],
    );
    let data: Value =
        serde_json::from_str(&s.ok(k, &["get", "cm", "bad", "-o", "jsonpath={.data}"]))
            .expect("json");
    assert_eq!(data, json!({"defaulted": "yes"}));
}
