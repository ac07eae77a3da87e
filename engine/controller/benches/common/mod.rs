//! Shared by the propagation benchmarks: the embedded server with simulated members and every
//! controller, object builders, and a tracker that watches ResourceBindings and Works and records
//! when each tracked binding reaches each stage of the pipeline.
//!
//! The tracker keeps only names and timestamps, never whole objects, so the process's memory is
//! dominated by what the server and the controllers hold.

#![allow(dead_code, reason = "each bench target uses a different part")]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::{Embedded, Settings, api_resource, client};
use futures::StreamExt as _;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

/// `flotilla up`'s default `--ready-delay-ms`.
pub const READY_DELAY: Duration = Duration::from_millis(1000);
/// `flotilla up`'s default `--retain-revisions` and compaction interval.
pub const RETAIN_REVISIONS: u64 = 100_000;
pub const COMPACT_INTERVAL: Duration = Duration::from_secs(60);

/// An environment knob with a default.
pub fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The embedded server, its store, the controllers and a control-plane client.
pub struct Env {
    pub control: Client,
    pub server: Arc<ApiServer>,
    pub store: Store,
    pub running: flotilla_controller::Running,
    pub dir: tempfile::TempDir,
    pub members: usize,
    compactor: tokio::task::JoinHandle<()>,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.compactor.abort();
    }
}

/// Start what `flotilla up --members <members>` starts, in process: the server over a fresh
/// store in a temp dir (compacted as `flotilla up` does), the simulated members and every
/// controller with `flotilla up`'s default settings.
pub async fn start(members: usize) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    // `FLOTILLA_BENCH_WATCH_WINDOW`: events the store's watch window keeps (its default unless set).
    let options = flotilla_apiserver::store::StoreOptions {
        watch_window: knob(
            "FLOTILLA_BENCH_WATCH_WINDOW",
            flotilla_apiserver::store::WATCH_WINDOW,
        ),
        ..Default::default()
    };
    let store = Store::open_with(&dir.path().join("store"), &options).expect("store opens");
    let server = ApiServer::new(store.clone(), ServerOptions::default());
    let settings = Settings {
        ready_delay: READY_DELAY,
        ..Settings::default()
    };
    let opts = Embedded {
        members,
        settings,
        ..Default::default()
    };
    let running = flotilla_controller::start_embedded(server.router(), opts)
        .await
        .expect("controllers start");
    let control = client::in_process(server.router(), None, None);
    let s = store.clone();
    let compactor = tokio::spawn(async move {
        let mut tick = tokio::time::interval(COMPACT_INTERVAL);
        tick.tick().await;
        loop {
            tick.tick().await;
            let _ = s.compact(RETAIN_REVISIONS).await;
        }
    });
    Env {
        control,
        server,
        store,
        running,
        dir,
        members,
        compactor,
    }
}

fn api_for(client: &Client, obj: &Value) -> (Api<DynamicObject>, String) {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let res = api_resource(&s("/apiVersion"), &s("/kind"));
    let ns = s("/metadata/namespace");
    let api = if ns.is_empty() {
        Api::all_with(client.clone(), &res)
    } else {
        Api::namespaced_with(client.clone(), &ns, &res)
    };
    (api, s("/metadata/name"))
}

/// Server-side apply, as `kubectl apply --server-side` does.
pub async fn apply(client: &Client, obj: &Value) {
    let (api, name) = api_for(client, obj);
    api.patch(
        &name,
        &PatchParams::apply("kubectl").force(),
        &Patch::Apply(obj),
    )
    .await
    .expect("apply");
}

/// A Deployment template of about 600 bytes: labels, one container with requests and a port.
pub fn deployment(name: &str, replicas: i64, labels: &[(&str, &str)]) -> Value {
    let mut l = serde_json::Map::new();
    l.insert("app".into(), json!(name));
    for (k, v) in labels {
        l.insert((*k).into(), json!(v));
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": l},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "web",
                    "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                }]},
            },
        },
    })
}

/// A PropagationPolicy for the Deployments labelled `key=value`, with `placement`.
pub fn policy(name: &str, key: &str, value: &str, placement: Value) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {key: value}}}],
            "placement": placement,
        },
    })
}

/// Every simulated member, one copy each.
pub fn duplicated_to_all() -> Value {
    json!({
        "clusterAffinity": {"labelSelector": {"matchLabels": {"flotilla.dev/simulated": "true"}}},
        "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
    })
}

/// Replicas divided over every simulated member with equal static weights.
pub fn divided_over_all() -> Value {
    json!({
        "clusterAffinity": {"labelSelector": {"matchLabels": {"flotilla.dev/simulated": "true"}}},
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [{"targetCluster": {"labelSelector": {"matchLabels": {"flotilla.dev/simulated": "true"}}}, "weight": 1}]},
        },
    })
}

/// Replicas divided with equal static weights over `clusters`.
pub fn divided_over(clusters: &[String]) -> Value {
    json!({
        "clusterAffinity": {"clusterNames": clusters},
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [{"targetCluster": {"clusterNames": clusters}, "weight": 1}]},
        },
    })
}

/// Team `t`'s members when `members` are split into teams of `size`.
pub fn team_members(t: usize, size: usize) -> Vec<String> {
    (0..size)
        .map(|i| format!("member{}", t * size + i + 1))
        .collect()
}

/// The binding name of Deployment `name`.
pub fn binding_of(name: &str) -> String {
    flotilla_core::detector::binding_name("Deployment", name)
}

/// When a tracked binding reached each stage, as seen through the tracker's watches.
#[derive(Debug, Default, Clone)]
pub struct Stages {
    pub start: Option<Instant>,
    pub binding: Option<Instant>,
    pub scheduled: Option<Instant>,
    pub first_work: Option<Instant>,
    pub all_works: Option<Instant>,
    pub first_applied: Option<Instant>,
    pub all_applied: Option<Instant>,
    pub all_healthy: Option<Instant>,
}

impl Stages {
    /// Milliseconds from `start` to each stage (NaN when missing).
    pub fn millis(&self) -> [f64; 7] {
        let s = self.start.expect("started");
        let ms = |t: Option<Instant>| {
            t.map_or(f64::NAN, |t| {
                t.saturating_duration_since(s).as_secs_f64() * 1e3
            })
        };
        [
            ms(self.binding),
            ms(self.scheduled),
            ms(self.first_work),
            ms(self.all_works),
            ms(self.first_applied),
            ms(self.all_applied),
            ms(self.all_healthy),
        ]
    }
}

/// The stage names, in [`Stages::millis`] order.
pub const STAGE_NAMES: [&str; 7] = [
    "binding created",
    "binding scheduled",
    "first Work",
    "all Works",
    "first Work Applied",
    "all Works Applied",
    "all Works Healthy",
];

#[derive(Default)]
struct Track {
    expected: usize,
    works: HashSet<String>,
    applied: HashSet<String>,
    healthy: HashSet<String>,
    stages: Stages,
    applied_tx: Option<oneshot::Sender<Instant>>,
    healthy_tx: Option<oneshot::Sender<Instant>>,
}

/// Watches ResourceBindings and Works; records the stages of the bindings it is told about.
#[derive(Default)]
pub struct Tracker {
    tracks: Mutex<HashMap<String, Track>>,
    /// Works seen with `Applied=True` (tracked bindings only).
    pub applied_works: AtomicU64,
    /// Tracked bindings whose Works are all Applied.
    pub bindings_done: AtomicU64,
    /// Tracked bindings whose Works are all Healthy.
    pub bindings_healthy: AtomicU64,
    /// Work watch events received.
    pub work_events: AtomicU64,
    /// Woken whenever a binding completes.
    pub progress: Notify,
}

/// Receivers for one tracked binding.
pub struct Waiters {
    pub applied: oneshot::Receiver<Instant>,
    pub healthy: oneshot::Receiver<Instant>,
}

impl Tracker {
    /// Start watching on `control`.
    pub fn spawn(control: &Client, watch_bindings: bool) -> Arc<Tracker> {
        let t = Arc::new(Tracker::default());
        let works: Api<DynamicObject> = Api::all_with(
            control.clone(),
            &api_resource("work.karmada.io/v1alpha1", "Work"),
        );
        let t2 = t.clone();
        tokio::spawn(async move {
            let mut s = std::pin::pin!(watcher(works, watcher::Config::default()));
            while let Some(ev) = s.next().await {
                if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = ev {
                    t2.work_events.fetch_add(1, Ordering::Relaxed);
                    t2.on_work(&o);
                }
            }
        });
        if watch_bindings {
            let rbs: Api<DynamicObject> = Api::all_with(
                control.clone(),
                &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
            );
            let t3 = t.clone();
            tokio::spawn(async move {
                let mut s = std::pin::pin!(watcher(rbs, watcher::Config::default()));
                while let Some(ev) = s.next().await {
                    if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = ev {
                        t3.on_binding(&o);
                    }
                }
            });
        }
        t
    }

    /// Track binding `name`, expected to end with `expected` Works.
    pub fn register(&self, name: &str, expected: usize) -> Waiters {
        let (atx, arx) = oneshot::channel();
        let (htx, hrx) = oneshot::channel();
        let track = Track {
            expected,
            applied_tx: Some(atx),
            healthy_tx: Some(htx),
            ..Default::default()
        };
        self.tracks
            .lock()
            .expect("lock")
            .insert(name.to_owned(), track);
        Waiters {
            applied: arx,
            healthy: hrx,
        }
    }

    /// Mark when binding `name`'s template apply returned.
    pub fn started(&self, name: &str, at: Instant) {
        if let Some(t) = self.tracks.lock().expect("lock").get_mut(name) {
            t.stages.start = Some(at);
        }
    }

    /// The stages of binding `name`.
    pub fn stages(&self, name: &str) -> Stages {
        self.tracks
            .lock()
            .expect("lock")
            .get(name)
            .map(|t| t.stages.clone())
            .unwrap_or_default()
    }

    /// Works seen and Applied of binding `name`.
    pub fn counts(&self, name: &str) -> (usize, usize) {
        self.tracks
            .lock()
            .expect("lock")
            .get(name)
            .map(|t| (t.works.len(), t.applied.len()))
            .unwrap_or_default()
    }

    /// Forget binding `name`.
    pub fn forget(&self, name: &str) {
        self.tracks.lock().expect("lock").remove(name);
    }

    fn on_binding(&self, o: &DynamicObject) {
        let now = Instant::now();
        let Some(name) = o.metadata.name.as_deref() else {
            return;
        };
        let mut tracks = self.tracks.lock().expect("lock");
        let Some(t) = tracks.get_mut(name) else {
            return;
        };
        t.stages.binding.get_or_insert(now);
        let scheduled = o
            .data
            .pointer("/spec/clusters")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty());
        if scheduled {
            t.stages.scheduled.get_or_insert(now);
        }
    }

    fn on_work(&self, o: &DynamicObject) {
        let now = Instant::now();
        let ann = o.metadata.annotations.as_ref();
        let Some(rb) = ann.and_then(|a| a.get(flotilla_api::labels::RB_NAME)) else {
            return;
        };
        let key = format!(
            "{}/{}",
            o.metadata.namespace.as_deref().unwrap_or(""),
            o.metadata.name.as_deref().unwrap_or("")
        );
        let status = o.data.get("status");
        let applied = status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Applied" && c["status"] == "True")
            });
        let healthy = status
            .and_then(|s| s.get("manifestStatuses"))
            .and_then(Value::as_array)
            .is_some_and(|m| !m.is_empty() && m.iter().all(|m| m["health"] == "Healthy"));
        let mut tracks = self.tracks.lock().expect("lock");
        let Some(t) = tracks.get_mut(rb.as_str()) else {
            return;
        };
        if t.works.insert(key.clone()) {
            t.stages.first_work.get_or_insert(now);
            if t.works.len() == t.expected {
                t.stages.all_works = Some(now);
            }
        }
        if applied && t.applied.insert(key.clone()) {
            self.applied_works.fetch_add(1, Ordering::Relaxed);
            t.stages.first_applied.get_or_insert(now);
            if t.applied.len() == t.expected {
                t.stages.all_applied = Some(now);
                self.bindings_done.fetch_add(1, Ordering::Relaxed);
                if let Some(tx) = t.applied_tx.take() {
                    let _ = tx.send(now);
                }
                self.progress.notify_waiters();
            }
        }
        if healthy && t.healthy.insert(key) && t.healthy.len() == t.expected {
            t.stages.all_healthy = Some(now);
            self.bindings_healthy.fetch_add(1, Ordering::Relaxed);
            if let Some(tx) = t.healthy_tx.take() {
                let _ = tx.send(now);
            }
            self.progress.notify_waiters();
        }
    }
}

/// Reconciles so far, per controller (in [`flotilla_controller::controller::NAMES`] order).
pub fn reconciles(env: &Env) -> Vec<u64> {
    flotilla_controller::controller::NAMES
        .iter()
        .map(|n| env.running.context.metrics.reconciles_of(n))
        .collect()
}

/// Seconds spent in reconciles, per controller, from the metrics exposition.
pub fn reconcile_seconds(env: &Env) -> Vec<f64> {
    let text = env.running.context.metrics.render();
    flotilla_controller::controller::NAMES
        .iter()
        .map(|n| {
            let prefix = format!("flotilla_reconcile_duration_seconds_sum{{controller=\"{n}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN)
        })
        .collect()
}

/// Wait until no controller has reconciled anything for `quiet` (at most `max`).
pub async fn quiesce(env: &Env, quiet: Duration, max: Duration) -> bool {
    let deadline = Instant::now() + max;
    let mut last = reconciles(env);
    let mut since = Instant::now();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = reconciles(env);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return true;
        }
    }
    false
}

/// `VmRSS` and `VmHWM` of this process, in MiB.
pub fn rss_mib() -> (f64, f64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU seconds (user + system) this process has used.
pub fn cpu_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the `(comm)`: state is field 3; utime and stime are fields 14 and 15.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Bytes under `path`, recursively.
pub fn disk_bytes(path: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(path) {
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => total += disk_bytes(&e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// The machine's load averages, from `/proc/loadavg`.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The `q` quantile (0..=1) of sorted `v`, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `p50 / p90 / p99 / max` of `v` (ms).
pub fn summary(v: &[f64]) -> String {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    s.sort_by(f64::total_cmp);
    format!(
        "p50 {:>8.1}  p90 {:>8.1}  p99 {:>8.1}  max {:>8.1}  (n={})",
        quantile(&s, 0.5),
        quantile(&s, 0.9),
        quantile(&s, 0.99),
        s.last().copied().unwrap_or(f64::NAN),
        s.len()
    )
}

/// Counters taken before a measured run, for [`amplification`].
pub struct Counters {
    reconciles: Vec<u64>,
    store: flotilla_apiserver::StoreStats,
}

/// Reconcile counts and store counters now.
pub fn counters(env: &Env) -> Counters {
    Counters {
        reconciles: reconciles(env),
        store: env.store.stats(),
    }
}

/// Per-binding and per-Work amplification since `before`: reconciles of each propagation
/// controller per binding and store writes / durable commits per Work.
pub fn amplification(env: &Env, before: &Counters, bindings: usize, works: usize) -> String {
    let now = counters(env);
    let delta = |name: &str| {
        let i = flotilla_controller::controller::NAMES
            .iter()
            .position(|n| *n == name)
            .expect("controller name");
        (now.reconciles[i] - before.reconciles[i]) as f64
    };
    let per = |name: &str| delta(name) / bindings.max(1) as f64;
    let writes = now.store.writes - before.store.writes;
    let commits = now.store.commits - before.store.commits;
    format!(
        "reconciles per binding: detector {:.2}, scheduler {:.2}, binding {:.2}; per Work: execution {:.2}, store writes {:.2}, durable commits {:.2} ({writes} writes in {commits} commits)",
        per("detector"),
        per("scheduler"),
        per("binding"),
        delta("execution") / works.max(1) as f64,
        writes as f64 / works.max(1) as f64,
        commits as f64 / works.max(1) as f64,
    )
}

/// One line of controller activity since `before` (reconcile counts and seconds).
pub fn activity(env: &Env, before: &[u64], before_secs: &[f64]) -> String {
    let now = reconciles(env);
    let secs = reconcile_seconds(env);
    flotilla_controller::controller::NAMES
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                "{n} {} ({:.1}s)",
                now[i] - before.get(i).copied().unwrap_or(0),
                secs[i] - before_secs.get(i).copied().unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
