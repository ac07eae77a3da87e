//! `flotilla controllers --leader-elect`: two replicas against one `flotilla up --no-controllers`
//! server. One holds the Lease and propagates; killed with SIGKILL, the other takes over and the
//! pipeline keeps working.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use flotilla_controller::api_resource;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

mod common;
use common::Proc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch() -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-cli-controllers");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

/// `flotilla up --no-controllers` with two simulated members, on a free port.
fn up(dir: &Path) -> (Proc, PathBuf) {
    common::up(dir, &["--members", "2", "--no-controllers"], false)
}

/// A leader-electing `flotilla controllers` replica; its output goes to `<dir>/<identity>.log`.
fn replica(dir: &Path, kubeconfig: &Path, identity: &str) -> Proc {
    let log = std::fs::File::create(dir.join(format!("{identity}.log"))).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args([
            "controllers",
            "--leader-elect",
            "--leader-elect-identity",
            identity,
            "--ready-delay-ms",
            "100",
            "--metrics-addr",
            "127.0.0.1:0",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start flotilla controllers");
    Proc(child)
}

fn log(dir: &Path, identity: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{identity}.log"))).unwrap_or_default()
}

/// `GET /metrics` from the address replica `identity` printed.
fn scrape(dir: &Path, identity: &str) -> String {
    use std::io::{Read as _, Write as _};
    let text = log(dir, identity);
    let addr = text
        .lines()
        .find_map(|l| l.strip_prefix("metrics: http://"))
        .and_then(|l| l.strip_suffix("/metrics"))
        .expect("metrics address in the log");
    let mut s = std::net::TcpStream::connect(addr).expect("connect to metrics");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("request");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

async fn config(kubeconfig: &Path) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig reads");
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("kubeconfig loads")
}

fn member(cfg: &kube::Config, name: &str) -> Client {
    let mut c = cfg.clone();
    c.cluster_url = format!(
        "{}/clusters/{name}",
        cfg.cluster_url.to_string().trim_end_matches('/')
    )
    .parse()
    .expect("member url");
    Client::try_from(c).expect("member client")
}

async fn lease(control: &Client) -> Option<Value> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        control.clone(),
        "flotilla-system",
        &api_resource("coordination.k8s.io/v1", "Lease"),
    );
    api.get_opt("flotilla-controllers")
        .await
        .ok()
        .flatten()
        .map(|l| l.data["spec"].clone())
}

async fn holder(control: &Client) -> Option<String> {
    lease(control)
        .await
        .and_then(|s| s["holderIdentity"].as_str().map(str::to_owned))
        .filter(|h| !h.is_empty())
}

async fn apply(control: &Client, obj: &Value) {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let res = api_resource(&s("/apiVersion"), &s("/kind"));
    let ns = s("/metadata/namespace");
    let api: Api<DynamicObject> = if ns.is_empty() {
        Api::all_with(control.clone(), &res)
    } else {
        Api::namespaced_with(control.clone(), &ns, &res)
    };
    api.patch(
        &s("/metadata/name"),
        &PatchParams::apply("kubectl").force(),
        &Patch::Apply(obj),
    )
    .await
    .expect("apply");
}

fn example(file: &str) -> Value {
    let text =
        std::fs::read_to_string(root().join("examples/nginx").join(file)).expect("example reads");
    serde_yaml::from_str(&text).expect("example parses")
}

/// `(replicas, image)` of the nginx copy in a member, once it exists.
async fn member_copy(c: &Client) -> Option<(i64, String)> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "default", &api_resource("apps/v1", "Deployment"));
    let d = api.get_opt("nginx").await.ok().flatten()?;
    let replicas = d.data.pointer("/spec/replicas").and_then(Value::as_i64)?;
    let image = d
        .data
        .pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)?
        .to_owned();
    Some((replicas, image))
}

async fn eventually<T, Fut: std::future::Future<Output = Option<T>>>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Fut,
) -> (T, Duration) {
    let started = Instant::now();
    loop {
        if let Some(v) = f().await {
            return (v, started.elapsed());
        }
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_takes_over_after_the_leader_is_killed_and_propagation_continues() {
    let dir = scratch();
    let (_up, kubeconfig) = up(&dir);
    let cfg = config(&kubeconfig).await;
    let control = Client::try_from(cfg.clone()).expect("control client");
    let members = [member(&cfg, "member1"), member(&cfg, "member2")];

    let mut replicas = vec![
        ("a", Some(replica(&dir, &kubeconfig, "a"))),
        ("b", Some(replica(&dir, &kubeconfig, "b"))),
    ];
    let (first, _) = eventually("a lease holder", Duration::from_secs(60), || async {
        holder(&control).await
    })
    .await;
    assert!(first == "a" || first == "b", "holder {first}");
    let (first, second) = if first == "a" { ("a", "b") } else { ("b", "a") };
    let spec = lease(&control).await.expect("lease");
    assert_eq!(spec["leaseDurationSeconds"], 15);
    assert_eq!(spec["leaseTransitions"], 0);
    let renew = spec["renewTime"].as_str().expect("renewTime");
    assert_eq!(
        renew.len(),
        "2026-01-01T00:00:00.000000Z".len(),
        "MicroTime with microseconds: {renew}"
    );

    // The leader propagates the seed example.
    for f in [
        "propagationpolicy.yaml",
        "overridepolicy.yaml",
        "deployment.yaml",
    ] {
        apply(&control, &example(f)).await;
    }
    let ((c1, c2), took) = eventually("both member copies", Duration::from_secs(60), || async {
        Some((
            member_copy(&members[0]).await?,
            member_copy(&members[1]).await?,
        ))
    })
    .await;
    eprintln!("seed example propagated by {first} in {took:?}");
    assert_eq!(c1, (1, "nginx:1.27".to_owned()));
    assert_eq!(c2, (1, "registry.member2.example/nginx:1.27".to_owned()));
    assert!(
        log(&dir, first).contains("leading: starting"),
        "leader log:\n{}",
        log(&dir, first)
    );
    assert!(
        !log(&dir, second).contains("leading: starting"),
        "the standby must not run controllers:\n{}",
        log(&dir, second)
    );
    assert!(
        scrape(&dir, first).contains("flotilla_reconcile_total{controller=\"detector\"}"),
        "leader metrics"
    );
    assert!(
        scrape(&dir, second).contains("standby"),
        "standby metrics answer at once"
    );

    // Apply → copies in both members through the embedded server (real_engine.rs measures the
    // same through kube-apiserver).
    let samples = common::apply_to_copies(&control, &members, &["member1", "member2"], 50).await;
    eprintln!(
        "apply → copy in both members (embedded server, simulated members): {}",
        common::percentiles(&samples)
    );

    // SIGKILL the leader: no release, so the standby waits out the lease.
    let killed_at = Instant::now();
    let i = replicas
        .iter()
        .position(|(n, _)| *n == first)
        .expect("leader");
    drop(replicas[i].1.take());
    let (_, _) = eventually(
        "the standby holds the lease",
        Duration::from_secs(25),
        || async { (holder(&control).await.as_deref() == Some(second)).then_some(()) },
    )
    .await;
    let takeover = killed_at.elapsed();
    eprintln!("takeover after SIGKILL: {takeover:?}");
    assert!(
        takeover <= Duration::from_secs(15 + 2 + 2 + 2),
        "took over after {takeover:?}"
    );
    assert!(
        takeover >= Duration::from_secs(15 - 2 - 1),
        "took over before the lease could expire: {takeover:?}"
    );
    assert_eq!(lease(&control).await.expect("lease")["leaseTransitions"], 1);

    // The new leader's controllers pick the pipeline up: scaling re-divides 2/2.
    let deploy: Api<DynamicObject> = Api::namespaced_with(
        control.clone(),
        "default",
        &api_resource("apps/v1", "Deployment"),
    );
    deploy
        .patch(
            "nginx",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("scale");
    let (_, took) = eventually(
        "both member copies at 2 replicas",
        Duration::from_secs(60),
        || async {
            let a = member_copy(&members[0]).await?;
            let b = member_copy(&members[1]).await?;
            (a.0 == 2 && b.0 == 2 && b.1 == "registry.member2.example/nginx:1.27").then_some(())
        },
    )
    .await;
    eprintln!("scale propagated by {second} in {took:?}");
    assert!(
        log(&dir, second).contains("leading: starting"),
        "new leader log:\n{}",
        log(&dir, second)
    );

    // SIGTERM: the leader stops its controllers and releases the Lease; a standby takes over at
    // its next retry instead of waiting out the lease.
    replicas.push(("c", Some(replica(&dir, &kubeconfig, "c"))));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(holder(&control).await.as_deref(), Some(second));
    let leader = replicas
        .iter_mut()
        .find(|(n, _)| *n == second)
        .and_then(|(_, p)| p.take())
        .expect("leader");
    let terminated_at = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &leader.0.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    eventually("c holds the lease", Duration::from_secs(10), || async {
        (holder(&control).await.as_deref() == Some("c")).then_some(())
    })
    .await;
    let handover = terminated_at.elapsed();
    eprintln!("takeover after SIGTERM (release): {handover:?}");
    assert!(handover <= Duration::from_secs(5), "took {handover:?}");
    assert_eq!(lease(&control).await.expect("lease")["leaseTransitions"], 2);
    assert!(
        log(&dir, second).contains("stopped"),
        "released cleanly:\n{}",
        log(&dir, second)
    );
    drop(leader);
    drop(replicas);
    let _ = std::fs::remove_dir_all(&dir);
}
