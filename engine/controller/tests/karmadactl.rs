//! Karmada's own CLI against the control plane `flotilla up` runs (TLS + bearer token, two
//! simulated members, the controllers): after `kubectl apply -f examples/nginx/`, the member-scope
//! verbs — `karmadactl get --operation-scope members`, `karmadactl promote` — reach the members
//! through the cluster proxy (`/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy/…`),
//! which is also checked directly with `kubectl get --raw`.
//!
//! karmadactl is built from Karmada's Go module (`tests/karmadactl`) by `tests/run.sh` into
//! `target/karmadactl`, whose path it exports as `KARMADACTL_BIN` with
//! `FLOTILLA_REQUIRE_KARMADACTL=1`. A `KARMADACTL_BIN` that is not a file fails the test; without
//! a karmadactl (`KARMADACTL_BIN`, else `target/karmadactl`) the test skips with a printed reason,
//! unless `FLOTILLA_REQUIRE_KARMADACTL` is set, where it fails. Without kubectl it skips.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

fn required() -> bool {
    std::env::var("FLOTILLA_REQUIRE_KARMADACTL").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `KARMADACTL_BIN` (which must then exist), else `target/karmadactl`; `None` after printing why
/// the test skips, a panic when karmadactl is required.
fn karmadactl() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("KARMADACTL_BIN") {
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "KARMADACTL_BIN={} is not a file (tests/run.sh builds it from tests/karmadactl)",
            bin.display()
        );
        return Some(bin);
    }
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/karmadactl");
    if default.is_file() {
        return Some(default);
    }
    assert!(
        !required(),
        "FLOTILLA_REQUIRE_KARMADACTL is set but there is no karmadactl: set KARMADACTL_BIN or build {} (cd tests/karmadactl && go build -o ../../target/karmadactl .)",
        default.display()
    );
    eprintln!("skipping: no karmadactl (KARMADACTL_BIN, or target/karmadactl)");
    None
}

fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// `bin args…` against `dir/kubeconfig`: whether it succeeded, stdout, stderr. `HOME` is `dir`,
/// so the discovery cache (karmadactl has no `--cache-dir`) is the test's own.
fn run(bin: &Path, dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin)
        .args(args)
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .env("HOME", dir)
        .env_remove("KUBECONFIG")
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`run`] off the runtime, which must succeed: its stdout.
async fn ok(bin: &Path, dir: &Path, args: &[&str]) -> String {
    let (b, dir) = (bin.to_owned(), dir.to_owned());
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let (success, stdout, stderr) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&b, &dir, &args)
    })
    .await
    .expect("join");
    assert!(
        success,
        "{} failed:\nstdout: {stdout}\nstderr: {stderr}",
        bin.display()
    );
    stdout
}

/// The `(NAME, CLUSTER)` columns of karmadactl's table.
fn name_and_cluster(table: &str) -> Vec<(String, String)> {
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (Some(name), Some(cluster)) = (col("NAME"), col("CLUSTER")) else {
        panic!("no NAME and CLUSTER columns in:\n{table}");
    };
    let mut rows: Vec<(String, String)> = lines
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|c| c.len() > name.max(cluster))
        .map(|c| (c[name].to_owned(), c[cluster].to_owned()))
        .collect();
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karmadactl_reaches_the_members_through_the_cluster_proxy() {
    let Some(karmadactl) = karmadactl() else {
        return;
    };
    let Some(kubectl) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(
        flotilla_apiserver::Config::new(d.join("data")),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .expect("server starts");
    let token = flotilla_controller::client::token_from_kubeconfig(&running.kubeconfig);
    let router = running.server.router();
    let _controllers = flotilla_controller::start_embedded(
        router.clone(),
        flotilla_controller::Embedded {
            members: 2,
            settings: flotilla_controller::Settings {
                ready_delay: Duration::from_millis(100),
                ..Default::default()
            },
            token: token.clone(),
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    std::fs::write(d.join("kubeconfig"), &running.kubeconfig).expect("kubeconfig");

    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx");
    let applied = ok(&kubectl, d, &["apply", "-f", &examples.to_string_lossy()]).await;
    assert!(
        applied.contains("deployment.apps/nginx created"),
        "{applied}"
    );

    // The member copies, through the proxy, as soon as the execution controller has applied them.
    let proxied = |member: &str| {
        format!(
            "/apis/cluster.karmada.io/v1alpha1/clusters/{member}/proxy/apis/apps/v1/namespaces/default/deployments/nginx"
        )
    };
    let mut copies = Vec::new();
    for member in ["member1", "member2"] {
        let deadline = Instant::now() + Duration::from_secs(30);
        let copy: Value = loop {
            let (k, dd, path) = (kubectl.clone(), d.to_owned(), proxied(member));
            let (success, stdout, stderr) =
                tokio::task::spawn_blocking(move || run(&k, &dd, &["get", "--raw", &path]))
                    .await
                    .expect("join");
            if success {
                break serde_json::from_str(&stdout).expect("a Deployment");
            }
            assert!(
                stderr.contains("NotFound") && Instant::now() < deadline,
                "no copy of nginx in {member} through the proxy: {stderr}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        copies.push(copy);
    }
    // The proxied objects are the members' own copies, not the template.
    let member_client = |m: &str| {
        flotilla_controller::client::in_process(router.clone(), Some(m), token.as_deref())
    };
    let deployments = |c| {
        Api::<DynamicObject>::namespaced_with(
            c,
            "default",
            &flotilla_controller::api_resource("apps/v1", "Deployment"),
        )
    };
    for (member, copy) in ["member1", "member2"].iter().zip(&copies) {
        assert_eq!(copy["kind"], "Deployment", "{copy}");
        assert_eq!(copy["metadata"]["name"], "nginx");
        let direct = deployments(member_client(member))
            .get("nginx")
            .await
            .expect("the member copy");
        assert_eq!(
            copy["metadata"]["uid"].as_str(),
            direct.metadata.uid.as_deref(),
            "{member}"
        );
    }
    let template = deployments(flotilla_controller::client::in_process(
        router.clone(),
        None,
        token.as_deref(),
    ))
    .get("nginx")
    .await
    .expect("the template");
    assert_ne!(
        copies[0]["metadata"]["uid"].as_str(),
        template.metadata.uid.as_deref()
    );
    assert_eq!(
        copies[1]["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.member2.example/nginx:1.27",
        "member2's copy carries the OverridePolicy's registry"
    );

    // An unknown cluster is Karmada's 404.
    let (k, dd) = (kubectl.clone(), d.to_owned());
    let (success, _, stderr) = tokio::task::spawn_blocking(move || {
        run(
            &k,
            &dd,
            &[
                "get",
                "--raw",
                "/apis/cluster.karmada.io/v1alpha1/clusters/nope/proxy/api",
            ],
        )
    })
    .await
    .expect("join");
    assert!(!success);
    assert!(
        stderr.contains("(NotFound)")
            && stderr.contains("clusters.cluster.karmada.io \"nope\" not found"),
        "{stderr}"
    );

    // karmadactl get, member scope: nginx in both members (the copies are Available after the
    // simulator's delay; the listing does not wait for that).
    let got = ok(
        &karmadactl,
        d,
        &["get", "deploy", "--operation-scope", "members"],
    )
    .await;
    assert_eq!(
        name_and_cluster(&got),
        [
            ("nginx".to_owned(), "member1".to_owned()),
            ("nginx".to_owned(), "member2".to_owned())
        ],
        "{got}"
    );
    // …and with the control plane too, one member by name.
    let got = ok(
        &karmadactl,
        d,
        &[
            "get",
            "deploy",
            "nginx",
            "--operation-scope",
            "all",
            "--clusters",
            "member2",
        ],
    )
    .await;
    assert_eq!(
        name_and_cluster(&got),
        [
            ("nginx".to_owned(), "Karmada".to_owned()),
            ("nginx".to_owned(), "member2".to_owned())
        ],
        "{got}"
    );

    // karmadactl promote: a Deployment that exists only in member1 is read through the proxy
    // and becomes a template (with a PropagationPolicy) on the control plane.
    let solo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "solo", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "solo"}},
                 "template": {"metadata": {"labels": {"app": "solo"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}},
    }))
    .expect("deployment");
    deployments(member_client("member1"))
        .create(&PostParams::default(), &solo)
        .await
        .expect("create in member1");
    let promoted = ok(
        &karmadactl,
        d,
        &[
            "promote",
            "deployment",
            "solo",
            "-n",
            "default",
            "-C",
            "member1",
        ],
    )
    .await;
    assert!(promoted.contains("promoted successfully"), "{promoted}");
    let on_control_plane = ok(
        &kubectl,
        d,
        &[
            "get",
            "deploy",
            "solo",
            "-n",
            "default",
            "-o",
            "jsonpath={.metadata.name}",
        ],
    )
    .await;
    assert_eq!(on_control_plane, "solo");

    eprintln!(
        "karmadactl through the cluster proxy: {:?}",
        started.elapsed()
    );
    let _ = stop.send(());
}
