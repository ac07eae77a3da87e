//! The machine's real kubectl against an in-process server over TLS with a bearer token.
//!
//! Tests the oldest and newest kubectl shipped next to the `kubectl` on PATH (the
//! google-cloud-cli package ships `kubectl.1.27` … `kubectl.1.33`), plus the default one.
//! They skip, with a printed reason, only when no kubectl exists at all.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::TestServer;

/// `kubectl` on PATH, resolved through symlinks.
fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
}

/// The versioned kubectl binaries next to the resolved one, oldest first.
fn versioned_kubectls() -> Vec<PathBuf> {
    let Some(kubectl) = kubectl_on_path() else {
        return Vec::new();
    };
    let Some(dir) = kubectl.parent() else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let minor = name.strip_prefix("kubectl.1.")?.parse::<u32>().ok()?;
            Some((minor, e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

struct Kubectl<'a> {
    bin: PathBuf,
    server: &'a TestServer,
}

impl Kubectl<'_> {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig").arg(&self.server.kubeconfig_path);
        c.arg("--cache-dir")
            .arg(self.server.dir.path().join("kube-cache"));
        c.args(args);
        c.env_remove("KUBECONFIG");
        c
    }

    /// Run and return stdout; panics with stderr on failure.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().expect("kubectl runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "{} {args:?} failed:\nstdout: {stdout}\nstderr: {stderr}",
            self.bin.display()
        );
        stdout
    }

    fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        use std::io::Write as _;
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        let out = child.wait_with_output().expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?} failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:IMAGE_TAG
        ports:
        - containerPort: 80
        env:
        - {name: A, value: "1"}
"#;

const POLICY: &str = r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
"#;

fn write(dir: &Path, name: &str, contents: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, contents).expect("write manifest");
    p.display().to_string()
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// The full user journey with one kubectl binary.
fn journey(bin: PathBuf) {
    let server = TestServer::start();
    let k = Kubectl {
        bin,
        server: &server,
    };
    let dir = server.dir.path();
    let deploy = write(dir, "deploy.yaml", &DEPLOYMENT.replace("IMAGE_TAG", "1.25"));
    let policy = write(dir, "policy.yaml", POLICY);

    // Client-side apply: create, unchanged, configured.
    let out = k.ok(&["apply", "-f", &deploy, "-f", &policy]);
    assert!(out.contains("deployment.apps/web created"), "{out}");
    assert!(
        out.contains("propagationpolicy.policy.karmada.io/web created"),
        "{out}"
    );
    let out = k.ok(&["apply", "-f", &deploy, "-f", &policy]);
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");
    let before = json(&k.ok(&["get", "deployment", "web", "-o", "json"]));
    let deploy2 = write(
        dir,
        "deploy2.yaml",
        &DEPLOYMENT.replace("IMAGE_TAG", "1.26"),
    );
    let out = k.ok(&["apply", "-f", &deploy2]);
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let after = json(&k.ok(&["get", "deployment", "web", "-o", "json"]));
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.26"
    );
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(after["metadata"]["generation"], 2);
    assert_ne!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );

    // Server-side apply takes over; a conflicting manager is rejected unless forced.
    let out = k.ok(&["apply", "--server-side", "-f", &deploy2, "-f", &policy]);
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let ssa = json(&k.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]));
    let managers: Vec<&str> = ssa["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");
    let scaled = write(
        dir,
        "scaled.yaml",
        &DEPLOYMENT
            .replace("IMAGE_TAG", "1.26")
            .replace("replicas: 2", "replicas: 5"),
    );
    let conflict = k
        .cmd(&[
            "apply",
            "--server-side",
            "--field-manager",
            "other",
            "-f",
            &scaled,
        ])
        .output()
        .expect("run");
    assert!(!conflict.status.success(), "conflicting apply must fail");
    assert!(
        String::from_utf8_lossy(&conflict.stderr)
            .to_lowercase()
            .contains("conflict"),
        "{}",
        String::from_utf8_lossy(&conflict.stderr)
    );
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        &scaled,
    ]);
    assert_eq!(
        k.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "5"
    );

    // get -o yaml / wide, describe.
    let yaml = k.ok(&["get", "deploy", "web", "-o", "yaml"]);
    assert!(
        yaml.contains("kind: Deployment") && yaml.contains("image: nginx:1.26"),
        "{yaml}"
    );
    let table = k.ok(&["get", "deploy"]);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("READY") && header.contains("UP-TO-DATE") && header.contains("AGE"),
        "server-side columns: {table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("web") && l.contains("0/5")),
        "{table}"
    );
    let wide = k.ok(&["get", "deploy", "-o", "wide"]);
    assert!(
        wide.contains("IMAGES") && wide.contains("nginx:1.26") && wide.contains("app=web"),
        "{wide}"
    );
    let namespaces = k.ok(&["get", "namespaces"]);
    assert!(
        namespaces
            .lines()
            .any(|l| l.starts_with("default") && l.contains("Active")),
        "{namespaces}"
    );
    let pp = k.ok(&["get", "pp"]);
    assert!(pp.lines().any(|l| l.starts_with("web")), "{pp}");
    let described = k.ok(&["describe", "deployment", "web"]);
    assert!(
        described.contains("Name:")
            && described.contains("web")
            && described.contains("nginx:1.26"),
        "{described}"
    );
    let described = k.ok(&["describe", "propagationpolicy", "web"]);
    assert!(described.contains("member1"), "{described}");

    // Patches: strategic (merges env by name), merge, JSON.
    k.ok(&["patch", "deploy", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","env":[{"name":"B","value":"2"}]}]}}}}"#]);
    let env = k.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].env[*].name}",
    ]);
    assert_eq!(env, "A B");
    k.ok(&[
        "patch",
        "pp",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"priority":7}}"#,
    ]);
    assert_eq!(
        k.ok(&["get", "pp", "web", "-o", "jsonpath={.spec.priority}"]),
        "7"
    );
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    ]);
    assert_eq!(
        k.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "3"
    );

    // label / annotate, then select by label.
    k.ok(&["label", "deploy", "web", "tier=frontend"]);
    k.ok(&["annotate", "deploy", "web", "owner=team-a"]);
    let selected = k.ok(&["get", "deploy", "-l", "tier=frontend", "-o", "name"]);
    assert_eq!(selected.trim(), "deployment.apps/web");
    assert!(
        k.ok(&["get", "deploy", "-l", "tier!=frontend", "-o", "name"])
            .trim()
            .is_empty()
    );
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.metadata.annotations.owner}"
        ]),
        "team-a"
    );

    // wait --for=condition after a status write through the status subresource.
    let gen_before = k.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    let status = format!(
        r#"{{"status":{{"observedGeneration":{gen_before},"conditions":[{{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}}]}}}}"#
    );
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
    let gen_after = k.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    assert_eq!(
        gen_before, gen_after,
        "status writes do not bump generation"
    );
    let waited = k.ok(&[
        "wait",
        "--for=condition=Available",
        "deployment/web",
        "--timeout=10s",
    ]);
    assert!(waited.contains("condition met"), "{waited}");

    // get --watch sees a later change.
    let mut watch = k
        .cmd(&["get", "configmaps", "--watch", "--no-headers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn watch");
    std::thread::sleep(Duration::from_millis(700));
    k.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: watched}\ndata: {a: \"1\"}\n",
    );
    let stdout = watch.stdout.take().expect("watch stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let seen = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the watch prints the new ConfigMap");
    let _ = watch.kill();
    let _ = watch.wait();
    let cells: Vec<&str> = seen.split_whitespace().collect();
    assert_eq!(cells.first(), Some(&"watched"), "{seen}");
    assert_eq!(
        cells.get(1),
        Some(&"1"),
        "the DATA column counts one key: {seen}"
    );

    // delete waits for the object to go away.
    let out = k.ok(&["delete", "-f", &deploy, "-f", &policy]);
    assert!(out.contains("deployment.apps \"web\" deleted"), "{out}");
    let missing = k.cmd(&["get", "deploy", "web"]).output().expect("run");
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("NotFound")
            || String::from_utf8_lossy(&missing.stderr).contains("not found")
    );
}

#[test]
fn default_kubectl_applies_patches_waits_watches_and_deletes() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    journey(bin);
}

#[test]
fn oldest_versioned_kubectl_passes_the_journey() {
    let all = versioned_kubectls();
    let Some(bin) = all.first().cloned() else {
        assert!(
            kubectl_on_path().is_none(),
            "kubectl exists but no versioned kubectl.1.N next to it"
        );
        eprintln!("skipping: no kubectl at all");
        return;
    };
    journey(bin);
}

#[test]
fn newest_versioned_kubectl_passes_the_journey() {
    let all = versioned_kubectls();
    let Some(bin) = all.last().cloned() else {
        assert!(
            kubectl_on_path().is_none(),
            "kubectl exists but no versioned kubectl.1.N next to it"
        );
        eprintln!("skipping: no kubectl at all");
        return;
    };
    journey(bin);
}
