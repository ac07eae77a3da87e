//! Crash safety: `kill -9` the server during a 1,000-object apply storm and restart it on the
//! same data directory. Every acknowledged object must be there, and a watch resumed from the
//! last revision seen before the crash must deliver everything that was acknowledged.
//!
//! The server runs in a child process: this test binary re-executes itself with
//! `FLOTILLA_CRASH_CHILD_DIR` set, which turns `crash_child_server` into the server.

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};

const CHILD_ENV: &str = "FLOTILLA_CRASH_CHILD_DIR";
const TOTAL: usize = 1000;
const KILL_AFTER: usize = 400;

/// Not a test on its own: the server half of the crash test, run in a child process.
#[test]
fn crash_child_server() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut config = flotilla_apiserver::Config::new(std::path::PathBuf::from(dir));
        config.tls = false;
        config.anonymous = true;
        let running = flotilla_apiserver::start(config, std::future::pending())
            .await
            .expect("server starts");
        println!("FLOTILLA_CHILD_URL={}", running.url);
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        let _ = running.task.await;
    });
}

fn spawn_child(dir: &std::path::Path) -> (Child, String) {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "crash_child_server",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child server");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("child printed its URL")
            .expect("read line");
        // libtest prints "test crash_child_server ... " on the same line first.
        if let Some(at) = line.find("FLOTILLA_CHILD_URL=") {
            break line[at + "FLOTILLA_CHILD_URL=".len()..].trim().to_owned();
        }
    };
    // Keep draining the child's stdout so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    (child, url)
}

fn client(url: &str) -> Client {
    let config = kube::Config::new(url.parse().expect("url"));
    Client::try_from(config).expect("client")
}

fn cm(i: usize) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("storm-{i:04}")}, "data": {"i": i.to_string()}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_an_apply_storm_loses_no_acknowledged_object_and_watches_resume() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, url) = spawn_child(dir.path());
    let api: Api<ConfigMap> = Api::default_namespaced(client(&url));

    // A watch from "now" records every event and the last revision it saw.
    let start_rv = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("list rv");
    let seen: Arc<Mutex<(BTreeSet<String>, u64)>> = Arc::default();
    let watch_seen = Arc::clone(&seen);
    let mut events = api
        .watch(&WatchParams::default(), &start_rv)
        .await
        .expect("watch")
        .boxed();
    let watcher = tokio::spawn(async move {
        while let Ok(Some(ev)) = events.try_next().await {
            if let WatchEvent::Added(o) | WatchEvent::Modified(o) = ev {
                let rv: u64 = o
                    .resource_version()
                    .and_then(|r| r.parse().ok())
                    .expect("numeric rv");
                let mut s = watch_seen.lock().expect("lock");
                s.0.insert(o.name_any());
                s.1 = s.1.max(rv);
            }
        }
    });

    // The storm: server-side applies, 32 in flight; kill -9 once KILL_AFTER are acknowledged.
    let acked: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let storm_acked = Arc::clone(&acked);
    let storm_api = api.clone();
    let storm = tokio::spawn(async move {
        futures::stream::iter(0..TOTAL)
            .map(|i| {
                let api = storm_api.clone();
                let acked = Arc::clone(&storm_acked);
                async move {
                    let name = format!("storm-{i:04}");
                    if api
                        .patch(&name, &PatchParams::apply("storm"), &Patch::Apply(cm(i)))
                        .await
                        .is_ok()
                    {
                        acked.lock().expect("lock").insert(name);
                    }
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;
    });
    for _ in 0..600 {
        if acked.lock().expect("lock").len() >= KILL_AFTER {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    child.kill().expect("kill -9 the server");
    let _ = child.wait();
    let _ = tokio::time::timeout(Duration::from_secs(30), storm).await;
    let _ = watcher.await;
    let acked: BTreeSet<String> = acked.lock().expect("lock").clone();
    let (seen_before, last_rv) = seen.lock().expect("lock").clone();
    eprintln!(
        "killed with {} of {TOTAL} applies acknowledged; watch saw up to revision {last_rv}",
        acked.len()
    );
    assert!(
        acked.len() >= KILL_AFTER && acked.len() < TOTAL,
        "killed mid-storm ({} acknowledged)",
        acked.len()
    );

    // Restart on the same data directory.
    let (mut child, url) = spawn_child(dir.path());
    let api: Api<ConfigMap> = Api::default_namespaced(client(&url));
    let present: BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .expect("list after restart")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let lost: Vec<&String> = acked.difference(&present).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged objects lost: {:?}",
        lost.len(),
        lost.iter().take(5).collect::<Vec<_>>()
    );

    // Resume the watch from the last revision seen before the crash: nothing acknowledged is missed.
    let mut resumed = seen_before.clone();
    let mut events = api
        .watch(&WatchParams::default(), &last_rv.to_string())
        .await
        .expect("resume watch")
        .boxed();
    while !acked.is_subset(&resumed) {
        match tokio::time::timeout(Duration::from_secs(10), events.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o)))) => {
                resumed.insert(o.name_any());
            }
            Ok(Ok(Some(WatchEvent::Error(e)))) => panic!("resumed watch failed: {e:?}"),
            Ok(Ok(Some(_))) => {}
            other => panic!("resumed watch ended early: {other:?}"),
        }
    }

    // Finish the storm after the restart: all 1,000 objects exist.
    for i in 0..TOTAL {
        let name = format!("storm-{i:04}");
        if !present.contains(&name) {
            api.patch(&name, &PatchParams::apply("storm"), &Patch::Apply(cm(i)))
                .await
                .expect("apply after restart");
        }
    }
    assert_eq!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        TOTAL
    );
    let _ = child.kill();
    let _ = child.wait();
}
