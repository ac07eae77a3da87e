//! Shared test fixtures: an in-process server on a background runtime.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::mpsc;

use flotilla_apiserver::{Config, Running};

/// A server running on its own runtime thread, stopped on drop.
pub struct TestServer {
    pub url: String,
    pub kubeconfig: String,
    pub kubeconfig_path: PathBuf,
    pub dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Start a TLS + token server on 127.0.0.1:0 with a fresh data dir.
    pub fn start() -> Self {
        Self::start_with(|_, _| {})
    }

    /// [`TestServer::start`], with `configure` changing the configuration first (it gets the
    /// test's directory too, e.g. for a token file).
    pub fn start_with(configure: impl FnOnce(&mut Config, &std::path::Path)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::new(dir.path().join("data"));
        config.bookmark_interval = std::time::Duration::from_secs(1);
        configure(&mut config, dir.path());
        let (tx, rx) = mpsc::channel::<Running>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let running = flotilla_apiserver::start(config, async move {
                    let _ = stop_rx.await;
                })
                .await
                .expect("server starts");
                let task_url = running.url.clone();
                let _ = task_url;
                let (url, kubeconfig, task) = (
                    running.url.clone(),
                    running.kubeconfig.clone(),
                    running.task,
                );
                let _ = tx.send(Running {
                    url,
                    kubeconfig,
                    addr: running.addr,
                    server: running.server,
                    task: tokio::spawn(async {}),
                });
                let _ = task.await;
            });
        });
        let running = rx.recv().expect("server started");
        let kubeconfig_path = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig_path, &running.kubeconfig).expect("write kubeconfig");
        TestServer {
            url: running.url,
            kubeconfig: running.kubeconfig,
            kubeconfig_path,
            dir,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The kubectl release 1.`minor`: `kubectl.1.<minor>` on PATH, else beside the `kubectl` on
/// PATH once symlinks are resolved (where the google-cloud-cli package keeps its versioned
/// binaries).
pub fn kubectl_release(minor: u32) -> Option<PathBuf> {
    let name = format!("kubectl.1.{minor}");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if let Some(parent) = dirs
        .iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| p.parent().map(PathBuf::from))
    {
        dirs.push(parent);
    }
    dirs.into_iter()
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
}

/// `bin` (a kubectl) with `args` against `server`, with a discovery cache of its own per kubectl
/// release.
pub fn run_kubectl(
    bin: &std::path::Path,
    server: &TestServer,
    args: &[&str],
) -> std::process::Output {
    std::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(&server.kubeconfig_path)
        .arg("--cache-dir")
        .arg(server.dir.path().join(format!(
            "kube-cache-{}",
            bin.file_name().unwrap_or_default().to_string_lossy()
        )))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs")
}

/// [`run_kubectl`], which must succeed: its stdout.
pub fn kubectl_ok(bin: &std::path::Path, server: &TestServer, args: &[&str]) -> String {
    let out = run_kubectl(bin, server, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?} failed:\nstdout: {stdout}\nstderr: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
