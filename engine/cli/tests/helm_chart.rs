//! The Helm chart (deploy/helm/flotilla) against a real kube-apiserver: `helm template` output is
//! applied server-side (first with `--dry-run=server`, then for real) to kube-apiserver + etcd
//! with the CRDs of deploy/crds, and the chart's ServiceAccount is checked with
//! SubjectAccessReviews (`kubectl auth can-i --as`): it may do what the controllers do and not
//! what they never do (create Secrets, delete resource templates, write RBAC).
//!
//! Binaries: helm from `$HELM_BIN` or `target/helm` (tests/run.sh builds it from tests/helm),
//! etcd and kube-apiserver from `$FLOTILLA_REAL_APISERVER_BIN` or `target/real-apiserver/bin`,
//! kubectl from `$KUBECTL` or `PATH`. Without them the test skips with a printed reason, unless
//! `FLOTILLA_REQUIRE_HELM=1` (set by `tests/run.sh`), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn need<T>(what: Option<T>, reason: &str) -> Option<T> {
    if what.is_none() {
        let required =
            std::env::var("FLOTILLA_REQUIRE_HELM").is_ok_and(|v| !v.is_empty() && v != "0");
        assert!(!required, "FLOTILLA_REQUIRE_HELM is set but {reason}");
        eprintln!("skipping: {reason}");
    }
    what
}

fn file_from(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map_or(default, PathBuf::from)
}

fn kubectl() -> Option<PathBuf> {
    let found = match std::env::var_os("KUBECTL") {
        Some(k) => Some(PathBuf::from(k)).filter(|k| k.is_file()),
        None => std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("kubectl"))
                .find(|k| k.is_file())
        }),
    };
    need(found, "no kubectl ($KUBECTL or on PATH)")
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn ok(cmd: &mut Command) -> String {
    run(cmd).unwrap_or_else(|e| panic!("{e}"))
}

/// kube-apiserver #N started by `tests/real-apiserver.sh start`, stopped on drop.
struct RealApiserver {
    base: PathBuf,
    n: u16,
}

impl Drop for RealApiserver {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("tests/real-apiserver.sh"))
            .args(["stop", &self.n.to_string()])
            .env("BASE", &self.base)
            .status();
    }
}

#[test]
fn the_chart_applies_server_side_to_a_real_kube_apiserver_with_least_privilege_rbac() {
    let helm = file_from("HELM_BIN", root().join("target/helm"));
    let Some(helm) = need(
        helm.is_file().then_some(helm.clone()),
        &format!(
            "no helm at {} (tests/run.sh builds it from tests/helm)",
            helm.display()
        ),
    ) else {
        return;
    };
    let bin = file_from(
        "FLOTILLA_REAL_APISERVER_BIN",
        root().join("target/real-apiserver/bin"),
    );
    let Some(bin) = need(
        ["etcd", "kube-apiserver"]
            .iter()
            .all(|b| bin.join(b).is_file())
            .then_some(bin.clone()),
        &format!("no etcd and kube-apiserver in {}", bin.display()),
    ) else {
        return;
    };
    let Some(kubectl) = kubectl() else { return };

    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-helm-chart");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("mkdir");
    std::os::unix::fs::symlink(&bin, base.join("bin")).expect("symlink the binaries");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // #9: etcd on 23880-23882, away from the scripts' examples (#0-#3).
    let server = RealApiserver {
        base: base.clone(),
        n: 9,
    };
    ok(Command::new("bash")
        .arg(root().join("tests/real-apiserver.sh"))
        .args(["start", "9", &port.to_string()])
        .env("BASE", &base));
    let kc = base.join("run9/kubeconfig");
    let k = |args: &[&str]| {
        let mut c = Command::new(&kubectl);
        c.args(args).arg("--kubeconfig").arg(&kc);
        c
    };

    let crds = root().join("deploy/crds").display().to_string();
    ok(&mut k(&["apply", "--server-side", "-f", &crds]));
    ok(&mut k(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd",
        "--all",
    ]));
    ok(&mut k(&["create", "namespace", "flotilla-system"]));
    // By default the chart creates karmada-cluster; a server dry run cannot create a namespace
    // and then a Role in it, so here it exists first (as after `flotilla join`).
    let chart = root().join("deploy/helm/flotilla").display().to_string();
    let defaults = ok(Command::new(&helm).args(["template", "flotilla", &chart]));
    assert!(
        defaults.contains("kind: Namespace\nmetadata:\n  name: karmada-cluster"),
        "the chart creates karmada-cluster by default:\n{defaults}"
    );
    ok(&mut k(&["create", "namespace", "karmada-cluster"]));

    let rendered = ok(Command::new(&helm).args([
        "template",
        "flotilla",
        &chart,
        "--namespace",
        "flotilla-system",
        "--set",
        "moduleConfigMap=flotilla-modules,clusterNamespace.create=false",
        "--set-json",
        r#"profiles={"spread":{"scores":[{"name":"ClusterLocality"}]}}"#,
    ]));
    let manifest = base.join("rendered.yaml");
    std::fs::write(&manifest, &rendered).expect("write the rendered chart");
    let manifest = manifest.display().to_string();
    for kind in [
        "kind: Deployment",
        "kind: ClusterRole",
        "kind: ServiceAccount",
        "kind: SchedulerProfile",
    ] {
        assert!(rendered.contains(kind), "{kind} rendered:\n{rendered}");
    }
    assert!(
        !rendered.contains(r#"resources: ["*"]"#) || !rendered.contains(r#"verbs: ["*"]"#),
        "no wildcard verbs on wildcard resources"
    );
    for want in [
        "path: /healthz",
        "path: /readyz",
        "--module-store-dir=/var/lib/flotilla/modules",
        "--module-dir=/etc/flotilla/modules",
        "readOnlyRootFilesystem: true",
        "--leader-elect-lease-duration=15",
    ] {
        assert!(rendered.contains(want), "{want} in:\n{rendered}");
    }

    // Server-side: the dry run validates every object against the server's schemas (including
    // the CRDs' for the SchedulerProfile), then the real apply.
    ok(&mut k(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        &manifest,
    ]));
    ok(&mut k(&["apply", "--server-side", "-f", &manifest]));
    let deployment = ok(&mut k(&[
        "get",
        "deployment",
        "flotilla",
        "-n",
        "flotilla-system",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].livenessProbe.httpGet.path} {.spec.template.spec.volumes[0].emptyDir.sizeLimit}",
    ]));
    assert_eq!(deployment.trim(), "/healthz 256Mi");

    // The ServiceAccount's permissions, as kube-apiserver's RBAC authorizer answers them.
    let sa = "system:serviceaccount:flotilla-system:flotilla";
    let can = |verb: &str, resource: &str, ns: Option<&str>| -> bool {
        let mut c = k(&["auth", "can-i", verb, resource, "--as", sa]);
        match ns {
            Some(ns) => c.args(["-n", ns]),
            None => c.arg("--all-namespaces"),
        };
        let out = c.output().expect("kubectl auth can-i");
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    for (verb, resource, ns) in [
        ("watch", "deployments.apps", None),
        ("patch", "deployments.apps", None),
        ("patch", "deployments.apps/scale", None),
        ("list", "propagationpolicies.policy.karmada.io", None),
        ("create", "resourcebindings.work.karmada.io", None),
        ("delete", "works.work.karmada.io", None),
        ("patch", "clusters.cluster.karmada.io/status", None),
        ("get", "secrets", Some("karmada-cluster")),
        ("create", "namespaces", None),
        ("create", "events", Some("default")),
        (
            "update",
            "leases.coordination.k8s.io",
            Some("flotilla-system"),
        ),
        (
            "patch",
            "leases.coordination.k8s.io",
            Some("karmada-cluster"),
        ),
        (
            "get",
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
        ),
    ] {
        assert!(
            can(verb, resource, ns),
            "the controllers need {verb} {resource}"
        );
    }
    for (verb, resource, ns) in [
        ("create", "secrets", Some("karmada-cluster")),
        ("delete", "deployments.apps", None),
        ("create", "deployments.apps", None),
        ("delete", "namespaces", None),
        (
            "create",
            "clusterrolebindings.rbac.authorization.k8s.io",
            None,
        ),
        ("update", "leases.coordination.k8s.io", Some("default")),
        ("delete", "propagationpolicies.policy.karmada.io", None),
    ] {
        assert!(
            !can(verb, resource, ns),
            "the controllers never {verb} {resource}; the chart must not grant it"
        );
    }

    // The RBAC suffices: `flotilla controllers` with a token of the chart's ServiceAccount
    // propagates the nginx example (with its override) to a Push member, and kube-apiserver
    // denies it nothing on the way.
    let (_member, member_kc) = common::up(
        &base.join("member"),
        &["--members", "0", "--no-controllers"],
        true,
    );
    ok(Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["join", "member1", "--kubeconfig"])
        .arg(&kc)
        .arg("--member-kubeconfig")
        .arg(&member_kc));
    let token = ok(&mut k(&[
        "create",
        "token",
        "flotilla",
        "-n",
        "flotilla-system",
        "--duration=1h",
    ]));
    let admin: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&kc).expect("kubeconfig")).expect("yaml");
    let mut sa_kc = admin.clone();
    sa_kc["users"] = serde_json::json!([{"name": "flotilla", "user": {"token": token.trim()}}]);
    sa_kc["contexts"][0]["context"]["user"] = serde_json::json!("flotilla");
    let sa_kc_path = base.join("sa-kubeconfig");
    std::fs::write(&sa_kc_path, serde_yaml::to_string(&sa_kc).expect("yaml")).expect("write");
    let log_path = base.join("controllers.log");
    let log = std::fs::File::create(&log_path).expect("log");
    let _controllers = common::Proc(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args([
                "controllers",
                "--leader-elect",
                "--leader-elect-namespace=flotilla-system",
                "--leader-elect-identity=chart-sa",
                "--kubeconfig",
            ])
            .arg(&sa_kc_path)
            .env("RUST_LOG", "info")
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("flotilla controllers"),
    );
    let nginx = root().join("examples/nginx").display().to_string();
    ok(&mut k(&["apply", "-f", &nginx]));
    let started = std::time::Instant::now();
    let want = "2 nginx:1.27";
    loop {
        let copy = Command::new(&kubectl)
            .args([
                "get",
                "deployment",
                "nginx",
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}",
                "--kubeconfig",
            ])
            .arg(&member_kc)
            .output()
            .expect("kubectl");
        if String::from_utf8_lossy(&copy.stdout).trim() == want {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(90),
            "no nginx copy ({want}) in the member with the chart's RBAC; controllers log:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    eprintln!(
        "with the chart's ServiceAccount: nginx copy in the member {:?} after kubectl apply",
        started.elapsed()
    );
    // One more round of the cluster status controller (10 s) and its Lease renewal.
    std::thread::sleep(std::time::Duration::from_secs(12));
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(
        log.contains("member registered cluster=member1"),
        "the controllers ran:\n{log}"
    );
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "kube-apiserver denied the chart's ServiceAccount something:\n{log}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&base);
}
