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

    let chart = root().join("deploy/helm/flotilla").display().to_string();
    let rendered = ok(Command::new(&helm).args([
        "template",
        "flotilla",
        &chart,
        "--namespace",
        "flotilla-system",
        "--set",
        "moduleConfigMap=flotilla-modules",
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
    drop(server);
    let _ = std::fs::remove_dir_all(&base);
}
