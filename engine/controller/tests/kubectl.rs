//! The README walkthrough through the machine's real kubectl, against the server `flotilla up`
//! runs (TLS + bearer token) with two simulated members and the controllers.
//! Skips, with a printed reason, only when no kubectl exists at all.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("kubectl")).find(|p| p.is_file())
}

fn kubectl(bin: &Path, dir: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_the_nginx_example_then_get_rb_and_work_shows_the_split() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let started = Instant::now();
    let running = flotilla_apiserver::start(flotilla_apiserver::Config::new(dir.path().join("data")), async move {
        let _ = stopped.await;
    })
    .await
    .expect("server starts");
    let settings = flotilla_controller::Settings { ready_delay: Duration::from_millis(100), ..Default::default() };
    let token = flotilla_controller::client::token_from_kubeconfig(&running.kubeconfig);
    assert!(token.is_some(), "the kubeconfig has a token");
    let opts = flotilla_controller::Embedded { members: 2, settings, token, ..Default::default() };
    let _controllers = flotilla_controller::start_embedded(&running.server, opts).await.expect("controllers start");
    assert!(started.elapsed() < Duration::from_secs(5), "ready in {:?}", started.elapsed());
    std::fs::write(dir.path().join("kubeconfig"), &running.kubeconfig).expect("kubeconfig");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx");
    let d = dir.path().to_owned();
    let b = bin.clone();
    let ex = examples.to_string_lossy().into_owned();
    let applied = tokio::task::spawn_blocking(move || kubectl(&b, &d, &["apply", "-f", &ex])).await.expect("join");
    assert!(applied.contains("deployment.apps/nginx created"), "{applied}");

    // Poll `kubectl get rb,work -A` until both Works exist and the binding shows the split.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (rb, works) = loop {
        let (d, b) = (dir.path().to_owned(), bin.clone());
        let (rb, works) = tokio::task::spawn_blocking(move || {
            let rb = kubectl(&b, &d, &["get", "rb", "nginx-deployment", "-n", "default", "-o", "jsonpath={.spec.clusters}"]);
            let works = kubectl(&b, &d, &["get", "rb,work", "-A"]);
            (rb, works)
        })
        .await
        .expect("join");
        if works.contains("karmada-es-member1") && works.contains("karmada-es-member2") && rb.contains("member2") {
            break (rb, works);
        }
        assert!(Instant::now() < deadline, "no split in time:\n{rb}\n{works}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let clusters: serde_json::Value = serde_json::from_str(&rb).expect("json");
    assert_eq!(clusters, serde_json::json!([{"name": "member1", "replicas": 1}, {"name": "member2", "replicas": 1}]), "{works}");
    assert!(works.contains("nginx-deployment"), "{works}");

    // The member deployments, through kubectl against the member's logical cluster.
    let member_kubeconfig = running.kubeconfig.replace(&running.url, &format!("{}/clusters/member2", running.url));
    let mdir = dir.path().join("member2");
    std::fs::create_dir_all(&mdir).expect("dir");
    std::fs::write(mdir.join("kubeconfig"), member_kubeconfig).expect("kubeconfig");
    let image = tokio::task::spawn_blocking(move || kubectl(&bin, &mdir, &["get", "deploy", "nginx", "-n", "default", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]))
        .await
        .expect("join");
    assert_eq!(image, "registry.member2.example/nginx:1.27");
    let _ = stop.send(());
}
