//! Multi-cluster autoscaling end to end, in process: the embedded API server, two simulated
//! members running simulated pods with simulated CPU load, and every controller, with a short
//! FederatedHPA sync period and a clock the tests can move forward.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use flotilla_controller::clock::Clock;
use flotilla_controller::controller::federatedhpa;
use flotilla_controller::{Settings, api_resource, client, members};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};

mod common;
use common::eventually;

struct Env {
    control: Client,
    member: Vec<Client>,
    /// Added to the system clock the autoscalers read (milliseconds).
    offset: Arc<AtomicI64>,
    _running: flotilla_controller::Running,
    _server: Arc<ApiServer>,
    _dir: tempfile::TempDir,
}

const SYNC: Duration = Duration::from_millis(500);
const WAIT: Duration = Duration::from_secs(40);

async fn env(offset_ms: i64) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(
        store,
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    let offset = Arc::new(AtomicI64::new(offset_ms));
    let o = Arc::clone(&offset);
    let settings = Settings {
        ready_delay: Duration::from_millis(50),
        autoscaling: federatedhpa::Options {
            sync_period: SYNC,
            cron_tick: Duration::from_millis(100),
            // Simulated pods are ready at once: count them from their first sample.
            cpu_initialization_period: Duration::ZERO,
            clock: Clock::from_fn(move || {
                flotilla_controller::clock::now_epoch_millis() + o.load(Ordering::SeqCst)
            }),
            ..Default::default()
        },
        ..Settings::default()
    };
    let opts = flotilla_controller::Embedded {
        members: 2,
        settings,
        ..Default::default()
    };
    let running = flotilla_controller::start_embedded(server.router(), opts)
        .await
        .expect("controllers start");
    let router = server.router();
    let control = client::in_process(router.clone(), None, None);
    let member = members::names(2)
        .iter()
        .map(|n| client::in_process(router.clone(), Some(n), None))
        .collect();
    Env {
        control,
        member,
        offset,
        _running: running,
        _server: server,
        _dir: dir,
    }
}

fn example(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/autoscaling")
        .join(file);
    serde_yaml::from_str(&std::fs::read_to_string(&path).expect("example reads"))
        .expect("example parses")
}

fn api_for(client: &Client, obj: &Value) -> Api<DynamicObject> {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let res = api_resource(&s("/apiVersion"), &s("/kind"));
    Api::namespaced_with(client.clone(), &s("/metadata/namespace"), &res)
}

/// Server-side apply `obj`, retrying while its kind is not served yet (the controllers create
/// the autoscaling CRDs as they start).
async fn apply(client: &Client, obj: &Value) {
    let name = obj["metadata"]["name"].as_str().expect("name").to_owned();
    eventually(&format!("applying {name}"), WAIT, || async {
        api_for(client, obj)
            .patch(
                &name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(obj),
            )
            .await
            .ok()
    })
    .await;
}

fn deployments(c: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), "default", &api_resource("apps/v1", "Deployment"))
}

fn fhpas(c: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), "default", &federatedhpa::resource())
}

async fn replicas_of(c: &Client, name: &str) -> Option<i64> {
    deployments(c)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|d| d.data.pointer("/spec/replicas").and_then(Value::as_i64))
}

async fn member_replicas(e: &Env, name: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for m in &e.member {
        out.push(replicas_of(m, name).await.unwrap_or(0));
    }
    out
}

fn condition(o: &DynamicObject, type_: &str) -> Option<(String, String)> {
    o.data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_owned(),
                c["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
}

/// The `reason: message` of the Events about `name` (any kind).
async fn events(c: &Client, name: &str) -> Vec<String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), "default", &api_resource("v1", "Event"));
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| {
                    e.data
                        .pointer("/involvedObject/name")
                        .and_then(Value::as_str)
                        == Some(name)
                })
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.data["reason"].as_str().unwrap_or(""),
                        e.data["message"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Change the simulated load on the template (a merge patch: re-applying the whole manifest
/// would also reset the replicas the autoscaler set, as `kubectl apply` would).
async fn set_load(e: &Env, name: &str, cpu: &str) {
    let patch =
        json!({"metadata": {"annotations": {"flotilla.dev/simulated-cpu-utilization": cpu}}});
    deployments(&e.control)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch the load");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_load_scales_a_deployment_up_across_both_members_and_down_after_the_window() {
    let e = env(0).await;
    let deployment = example("deployment.yaml");
    apply(&e.control, &example("propagationpolicy.yaml")).await;
    apply(&e.control, &deployment).await;
    eventually("one replica in each member", WAIT, || async {
        (member_replicas(&e, "web").await == vec![1, 1]).then_some(())
    })
    .await;
    // Each member runs its pods with metrics the control plane aggregates.
    let pods = eventually("simulated pods with metrics", WAIT, || async {
        let m = pod_metrics(&e.control).await;
        (m.len() == 2).then_some(m)
    })
    .await;
    let mut from: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.pointer("/metadata/annotations/resource.karmada.io~1query-from-cluster"))
        .filter_map(Value::as_str)
        .collect();
    from.sort_unstable();
    assert_eq!(from, vec!["member1", "member2"]);
    assert_eq!(
        pods[0]["containers"][0]["usage"]["cpu"], "80m",
        "80 % of 100m"
    );

    // 80 % against a 50 % target: 2 → 4 (ceil(2 × 1.6)) → 6 (the maximum).
    let mut fhpa = example("federatedhpa.yaml");
    fhpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = json!(3);
    fhpa["spec"]["behavior"]["scaleDown"]["policies"][0]["periodSeconds"] = json!(1);
    apply(&e.control, &fhpa).await;
    let started = Instant::now();
    eventually(
        "the template at the maximum, 3 + 3 in the members",
        WAIT,
        || async {
            (replicas_of(&e.control, "web").await == Some(6)
                && member_replicas(&e, "web").await == vec![3, 3])
            .then_some(())
        },
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "scaled up within a few sync periods: {:?}",
        started.elapsed()
    );
    let status = eventually("the status at 6 replicas", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        (f.data.pointer("/status/currentReplicas") == Some(&json!(6))
            && condition(&f, "ScalingLimited").is_some_and(|c| c.1 == "TooManyReplicas"))
        .then_some(f)
    })
    .await;
    assert_eq!(
        condition(&status, "AbleToScale").map(|c| c.0),
        Some("True".to_owned())
    );
    assert_eq!(
        condition(&status, "ScalingActive"),
        Some(("True".to_owned(), "ValidMetricFound".to_owned()))
    );
    assert_eq!(
        condition(&status, "ScalingLimited"),
        Some(("True".to_owned(), "TooManyReplicas".to_owned()))
    );
    assert_eq!(
        status
            .data
            .pointer("/status/currentMetrics/0/resource/current/averageUtilization"),
        Some(&json!(80))
    );
    assert!(status.data.pointer("/status/lastScaleTime").is_some());
    let evs = events(&e.control, "web").await;
    assert!(
        evs.iter().any(|m| m == "SuccessfulRescale: New size: 4; reason: cpu resource utilization (percentage of request) above target"),
        "{evs:?}"
    );

    // Lower the load: nothing happens until the 3 s scale-down window has passed.
    set_load(&e, "web", "10").await;
    let lowered = Instant::now();
    eventually("the scale-down held by the window", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        (condition(&f, "AbleToScale").is_some_and(|c| c.1 == "ScaleDownStabilized")).then_some(())
    })
    .await;
    assert_eq!(replicas_of(&e.control, "web").await, Some(6));
    eventually("the template back at the minimum, 1 + 1", WAIT, || async {
        (replicas_of(&e.control, "web").await == Some(2)
            && member_replicas(&e, "web").await == vec![1, 1])
        .then_some(())
    })
    .await;
    assert!(
        lowered.elapsed() >= Duration::from_millis(2500),
        "scaled down before the window passed: {:?}",
        lowered.elapsed()
    );
    let evs = events(&e.control, "web").await;
    assert!(
        evs.iter()
            .any(|m| m == "SuccessfulRescale: New size: 2; reason: All metrics below target"),
        "{evs:?}"
    );
}

async fn pod_metrics(c: &Client) -> Vec<Value> {
    let req = http::Request::get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
        .body(Vec::new())
        .expect("request");
    c.request::<Value>(req)
        .await
        .ok()
        .and_then(|v| v.get("items").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_policy_caps_each_step() {
    let e = env(0).await;
    let mut deployment = example("deployment.yaml");
    deployment["metadata"]["annotations"]["flotilla.dev/simulated-cpu-utilization"] = json!("200");
    apply(&e.control, &example("propagationpolicy.yaml")).await;
    apply(&e.control, &deployment).await;
    let mut fhpa = example("federatedhpa.yaml");
    fhpa["spec"]["maxReplicas"] = json!(10);
    fhpa["spec"]["behavior"]["scaleUp"] = json!({
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
    });
    apply(&e.control, &fhpa).await;
    // 200 % of a 50 % target wants 8; the policy allows one more pod per minute.
    eventually("one step of one pod", WAIT, || async {
        (replicas_of(&e.control, "web").await == Some(3)).then_some(())
    })
    .await;
    let f = eventually("ScaleUpLimit", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        (f.data.pointer("/status/currentReplicas") == Some(&json!(3))
            && condition(&f, "ScalingLimited")
                .is_some_and(|c| c == ("True".to_owned(), "ScaleUpLimit".to_owned())))
        .then_some(f)
    })
    .await;
    assert_eq!(f.data.pointer("/status/desiredReplicas"), Some(&json!(3)));
    // Several more syncs: still within the policy's minute.
    tokio::time::sleep(SYNC * 6).await;
    assert_eq!(replicas_of(&e.control, "web").await, Some(3));
    let evs = events(&e.control, "web").await;
    assert_eq!(
        evs.iter()
            .filter(|m| m.starts_with("SuccessfulRescale"))
            .count(),
        1,
        "{evs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_federated_hpa_changes_replicas_at_the_scheduled_minute() {
    // The autoscalers' clock reads 2030-01-01T10:29:30Z.
    let target = flotilla_core::time::parse_rfc3339("2030-01-01T10:29:30Z").expect("time") * 1000;
    let e = env(target - flotilla_controller::clock::now_epoch_millis()).await;
    let mut deployment = example("deployment.yaml");
    deployment["metadata"]["annotations"] = json!({});
    apply(&e.control, &example("propagationpolicy.yaml")).await;
    apply(&e.control, &deployment).await;
    let mut fhpa = example("federatedhpa.yaml");
    fhpa["metadata"]["name"] = json!("bounds");
    fhpa["spec"]["scaleTargetRef"]["name"] = json!("elsewhere");
    apply(&e.control, &fhpa).await;
    let cron = json!({
        "apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "CronFederatedHPA",
        "metadata": {"name": "web-cron", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "rules": [
                {"name": "morning", "schedule": "30 10 * * *", "targetReplicas": 5},
                // 11:30 in Berlin (UTC+1 in January) is 10:30 UTC.
                {"name": "berlin", "schedule": "30 11 * * *", "timeZone": "Europe/Berlin", "targetReplicas": 5},
                {"name": "paused", "schedule": "30 10 * * *", "targetReplicas": 9, "suspend": true},
            ],
        },
    });
    apply(&e.control, &cron).await;
    let crons: Api<DynamicObject> = Api::namespaced_with(
        e.control.clone(),
        "default",
        &flotilla_controller::controller::cronfederatedhpa::resource(),
    );
    let planned = eventually("the next runs in the status", WAIT, || async {
        let c = crons.get("web-cron").await.ok()?;
        let h = c
            .data
            .pointer("/status/executionHistories")?
            .as_array()?
            .clone();
        (h.len() == 3).then_some(h)
    })
    .await;
    for h in &planned {
        assert_eq!(h["nextExecutionTime"], "2030-01-01T10:30:00Z", "{h}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(replicas_of(&e.control, "web").await, Some(2), "not yet");

    // Another CronFederatedHPA moves the FederatedHPA's bounds; one fails (no such target).
    let bounds = json!({
        "apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "CronFederatedHPA",
        "metadata": {"name": "bounds-cron", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA", "name": "bounds"},
            "rules": [{"name": "widen", "schedule": "30 10 * * *", "targetMinReplicas": 3, "targetMaxReplicas": 9}],
        },
    });
    apply(&e.control, &bounds).await;
    let missing = json!({
        "apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "CronFederatedHPA",
        "metadata": {"name": "missing-cron", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nowhere"},
            "rules": [{"name": "r", "schedule": "30 10 * * *", "targetReplicas": 1, "failedHistoryLimit": 1}],
        },
    });
    apply(&e.control, &missing).await;
    eventually("all three planned", WAIT, || async {
        let mut n = 0;
        for name in ["bounds-cron", "missing-cron"] {
            let c = crons.get(name).await.ok()?;
            if c.data
                .pointer("/status/executionHistories/0/nextExecutionTime")
                .is_some()
            {
                n += 1;
            }
        }
        (n == 2).then_some(())
    })
    .await;

    // The minute arrives.
    e.offset.fetch_add(30_000, Ordering::SeqCst);
    eventually("5 replicas, split 3 + 2", WAIT, || async {
        let m = member_replicas(&e, "web").await;
        (replicas_of(&e.control, "web").await == Some(5) && m.iter().sum::<i64>() == 5)
            .then_some(())
    })
    .await;
    let c = eventually("the runs recorded", WAIT, || async {
        let c = crons.get("web-cron").await.ok()?;
        let h = c.data.pointer("/status/executionHistories")?.as_array()?;
        (h[0].get("successfulExecutions").is_some() && h[1].get("successfulExecutions").is_some())
            .then_some(c)
    })
    .await;
    let h = c.data["status"]["executionHistories"]
        .as_array()
        .expect("histories");
    assert_eq!(
        h[0]["successfulExecutions"][0]["scheduleTime"],
        "2030-01-01T10:30:00Z"
    );
    assert_eq!(h[0]["successfulExecutions"][0]["appliedReplicas"], 5);
    assert_eq!(h[0]["nextExecutionTime"], "2030-01-02T10:30:00Z");
    assert_eq!(h[1]["ruleName"], "berlin");
    assert!(
        h[2].get("successfulExecutions").is_none(),
        "suspended: {}",
        h[2]
    );
    assert!(
        h[2].get("failedExecutions").is_none(),
        "suspended: {}",
        h[2]
    );

    let f = eventually("the FederatedHPA's bounds moved", WAIT, || async {
        let f = fhpas(&e.control).get("bounds").await.ok()?;
        (f.data.pointer("/spec/maxReplicas") == Some(&json!(9))).then_some(f)
    })
    .await;
    assert_eq!(f.data.pointer("/spec/minReplicas"), Some(&json!(3)));
    let failed = eventually("the failed run recorded", WAIT, || async {
        let c = crons.get("missing-cron").await.ok()?;
        c.data
            .pointer("/status/executionHistories/0/failedExecutions/0/message")
            .and_then(Value::as_str)
            .map(str::to_owned)
    })
    .await;
    assert!(failed.contains("nowhere"), "{failed}");
    let evs = events(&e.control, "missing-cron").await;
    assert!(
        evs.iter().any(|m| m.starts_with("ScaleFailed: ")),
        "{evs:?}"
    );
}

fn kubectl_on_path() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

fn kubectl(bin: &Path, dir: &Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .args(args)
        .output()
        .expect("kubectl runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_top_pods_and_get_fhpa_work_on_the_control_plane() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(
        flotilla_apiserver::Config::new(dir.path().join("data")),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .expect("server starts");
    let settings = Settings {
        ready_delay: Duration::from_millis(50),
        autoscaling: federatedhpa::Options {
            sync_period: SYNC,
            cpu_initialization_period: Duration::ZERO,
            ..Default::default()
        },
        ..Settings::default()
    };
    let token = flotilla_controller::client::token_from_kubeconfig(&running.kubeconfig);
    let _controllers = flotilla_controller::start_embedded(
        running.server.router(),
        flotilla_controller::Embedded {
            members: 2,
            settings,
            token,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    std::fs::write(dir.path().join("kubeconfig"), &running.kubeconfig).expect("kubeconfig");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/autoscaling");
    let d = dir.path().to_owned();
    let top = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + WAIT;
        let ex = examples.to_string_lossy().into_owned();
        loop {
            let (ok, out) = kubectl(&bin, &d, &["apply", "-f", &ex]);
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "apply: {out}");
            std::thread::sleep(Duration::from_millis(200));
        }
        let top = loop {
            let (ok, out) = kubectl(&bin, &d, &["top", "pods", "-n", "default"]);
            if ok && out.lines().filter(|l| l.starts_with("web-sim-")).count() >= 2 {
                break out;
            }
            assert!(Instant::now() < deadline, "kubectl top pods: {out}");
            std::thread::sleep(Duration::from_millis(200));
        };
        let (ok, get) = kubectl(&bin, &d, &["get", "fhpa,cronfhpa", "-n", "default"]);
        assert!(ok, "{get}");
        (top, get)
    })
    .await
    .expect("join");
    let (top, get) = top;
    assert!(top.contains("CPU(cores)"), "{top}");
    assert!(top.contains("80m"), "80 % of 100m: {top}");
    for column in [
        "REFERENCE-KIND",
        "REFERENCE-NAME",
        "MINPODS",
        "MAXPODS",
        "REPLICAS",
    ] {
        assert!(get.contains(column), "{column} in {get}");
    }
    assert!(
        get.contains("federatedhpa.autoscaling.karmada.io/web"),
        "{get}"
    );
    assert!(
        get.contains("cronfederatedhpa.autoscaling.karmada.io/web-cron"),
        "{get}"
    );
}

/// GET `uri` as JSON (`None` on any error).
async fn get_json(c: &Client, uri: &str) -> Option<Value> {
    let req = http::Request::get(uri).body(Vec::new()).ok()?;
    c.request::<Value>(req).await.ok()
}

/// Set the per-pod custom metrics of the template's simulated pods.
async fn set_pod_metrics(e: &Env, name: &str, metrics: &str) {
    let patch = json!({"metadata": {"annotations": {
        "flotilla.dev/simulated-pod-custom-metrics": metrics,
    }}});
    deployments(&e.control)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch the pod metrics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_metric_scales_up_when_the_per_pod_value_rises_within_the_policy() {
    let e = env(0).await;
    let mut deployment = example("deployment.yaml");
    // Custom metrics alone make the simulated members run pods.
    deployment["metadata"]["annotations"] = json!({
        "flotilla.dev/simulated-pod-custom-metrics": r#"{"http_requests_per_second": "10"}"#,
    });
    apply(&e.control, &example("propagationpolicy.yaml")).await;
    apply(&e.control, &deployment).await;

    // The control plane serves the members' values, aggregated as karmada-metrics-adapter
    // does: each member runs a pod `web-sim-0` at 10, and objects of the same name add up.
    let uri = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_per_second?labelSelector=app%3Dweb";
    let list = eventually("both members' pods with a value", WAIT, || async {
        let v = get_json(&e.control, uri).await?;
        (v["items"][0]["value"] == "20").then_some(v)
    })
    .await;
    assert_eq!(list["kind"], "MetricValueList");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["metric"]["name"], "http_requests_per_second");
    assert_eq!(items[0]["describedObject"]["kind"], "Pod");
    assert_eq!(items[0]["describedObject"]["name"], "web-sim-0");
    // Each member on its own has one pod at 10.
    for m in &e.member {
        let v = get_json(m, uri).await.expect("a member's values");
        assert_eq!(v["items"][0]["value"], "10", "{v}");
    }
    let discovery = get_json(&e.control, "/apis/custom.metrics.k8s.io/v1beta2")
        .await
        .expect("discovery");
    assert!(
        discovery["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r["name"] == "pods/http_requests_per_second"),
        "{discovery}"
    );
    let v1 = get_json(
        &e.control,
        "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/web-sim-0/http_requests_per_second",
    )
    .await
    .expect("one pod's value");
    assert_eq!(v1["items"][0]["metricName"], "http_requests_per_second");
    assert_eq!(v1["items"][0]["value"], "20", "{v1}");
    // Served, but not listed in /apis (kubectl's discovery fails on empty group versions).
    let group = get_json(&e.control, "/apis/custom.metrics.k8s.io")
        .await
        .expect("the group");
    assert_eq!(group["preferredVersion"]["version"], "v1beta2");
    let groups = get_json(&e.control, "/apis").await.expect("groups");
    assert!(
        !groups["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .any(|g| g["name"] == "custom.metrics.k8s.io")
    );

    // 10 per pod against a target of 10: nothing to do.
    let mut fhpa = example("federatedhpa.yaml");
    fhpa["spec"]["maxReplicas"] = json!(10);
    fhpa["spec"]["metrics"] = json!([{
        "type": "Pods",
        "pods": {"metric": {"name": "http_requests_per_second"},
                 "target": {"type": "AverageValue", "averageValue": "10"}},
    }]);
    fhpa["spec"]["behavior"]["scaleUp"] = json!({
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
    });
    apply(&e.control, &fhpa).await;
    let status = eventually("a valid pods metric at the target", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        (condition(&f, "ScalingActive")?.1 == "ValidMetricFound").then_some(f)
    })
    .await;
    assert_eq!(
        status.data.pointer("/status/currentMetrics/0"),
        Some(&json!({"type": "Pods", "pods": {
            "metric": {"name": "http_requests_per_second"},
            "current": {"averageValue": "10"},
        }}))
    );
    assert_eq!(replicas_of(&e.control, "web").await, Some(2));

    // 30 per pod: 2 × 3 = 6 wanted, the policy allows 2 more pods per 60 s → 4, and no more
    // until the period has passed.
    set_pod_metrics(&e, "web", r#"{"http_requests_per_second": "30"}"#).await;
    eventually("scaled to 4 by the policy", WAIT, || async {
        (replicas_of(&e.control, "web").await == Some(4)).then_some(())
    })
    .await;
    let f = eventually("the scale-up limited", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        (condition(&f, "ScalingLimited")? == ("True".to_owned(), "ScaleUpLimit".to_owned()))
            .then_some(f)
    })
    .await;
    assert_eq!(
        f.data
            .pointer("/status/currentMetrics/0/pods/current/averageValue"),
        Some(&json!("30"))
    );
    tokio::time::sleep(SYNC * 4).await;
    assert_eq!(replicas_of(&e.control, "web").await, Some(4));
    let evs = events(&e.control, "web").await;
    assert!(
        evs.iter().any(|m| m
            == "SuccessfulRescale: New size: 4; reason: pods metric http_requests_per_second above target"),
        "{evs:?}"
    );
    // A minute later the next step: 4 + 2.
    e.offset.fetch_add(61_000, Ordering::SeqCst);
    eventually("scaled to 6 in the next period", WAIT, || async {
        (replicas_of(&e.control, "web").await == Some(6)
            && member_replicas(&e, "web").await == vec![3, 3])
        .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_metric_adds_up_the_members_series_and_fails_without_them() {
    let e = env(0).await;
    apply(&e.control, &example("propagationpolicy.yaml")).await;
    apply(&e.control, &example("deployment.yaml")).await;
    eventually("one replica in each member", WAIT, || async {
        (member_replicas(&e, "web").await == vec![1, 1]).then_some(())
    })
    .await;
    let mut fhpa = example("federatedhpa.yaml");
    fhpa["spec"]["metrics"] = json!([{
        "type": "External",
        "external": {"metric": {"name": "queue_messages_ready",
                                "selector": {"matchLabels": {"queue": "orders"}}},
                     "target": {"type": "AverageValue", "averageValue": "5"}},
    }]);
    fhpa["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("behavior");
    apply(&e.control, &fhpa).await;

    // No member has the metric yet.
    let f = eventually("the external metric missing", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        (condition(&f, "ScalingActive")?
            == ("False".to_owned(), "FailedGetExternalMetric".to_owned()))
            .then_some(f)
    })
    .await;
    let message = f
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "ScalingActive"))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("no metrics returned from external metrics API")
            && message.contains("member1: no values"),
        "{message}"
    );
    eventually("the FailedGetExternalMetric Event", WAIT, || async {
        let evs = events(&e.control, "web").await;
        let want = "FailedGetExternalMetric: unable to get external metric default/queue_messages_ready/queue=orders";
        evs.iter().any(|m| m.starts_with(want)).then_some(())
    })
    .await;
    assert_eq!(replicas_of(&e.control, "web").await, Some(2));

    // Queue depth in each member: 20 + 10 (another queue's 1000 is not selected).
    let cm = |name: &str, queue: &str, value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "labels": {"queue": queue},
                            "annotations": {"flotilla.dev/simulated-external-metrics":
                                            format!(r#"{{"queue_messages_ready": "{value}"}}"#)}}})
    };
    apply(&e.member[0], &cm("orders", "orders", "20")).await;
    apply(&e.member[1], &cm("orders", "orders", "10")).await;
    apply(&e.member[1], &cm("billing", "billing", "1000")).await;
    let list = get_json(
        &e.control,
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dorders",
    )
    .await
    .expect("external metrics");
    let mut values: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["value"].as_str())
        .collect();
    values.sort_unstable();
    assert_eq!(values, vec!["10", "20"]);
    assert_eq!(list["items"][0]["metricLabels"]["queue"], "orders");

    // 30 over 2 pods against 5 per pod: 6 wanted; without behavior a step at most doubles
    // (or adds up to 4): 2 → 4 → 6, the maximum.
    eventually("the template at 6", WAIT, || async {
        (replicas_of(&e.control, "web").await == Some(6)).then_some(())
    })
    .await;
    let f = eventually("the status at 6 pods", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        (f.data
            .pointer("/status/currentMetrics/0/external/current/averageValue")
            == Some(&json!("5")))
        .then_some(f)
    })
    .await;
    assert_eq!(
        condition(&f, "ScalingActive"),
        Some(("True".to_owned(), "ValidMetricFound".to_owned()))
    );
    assert_eq!(
        f.data.pointer("/status/currentMetrics/0/external/metric"),
        Some(
            &json!({"name": "queue_messages_ready", "selector": {"matchLabels": {"queue": "orders"}}})
        )
    );
    let evs = events(&e.control, "web").await;
    assert!(
        evs.iter().any(|m| m
            == "SuccessfulRescale: New size: 4; reason: external metric queue_messages_ready(queue=orders) above target"),
        "{evs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_metric_adds_up_the_members_values_of_the_object() {
    let e = env(0).await;
    let mut deployment = example("deployment.yaml");
    // The template's own metric, propagated with it: each member reports 30 for its copy.
    deployment["metadata"]["annotations"]["flotilla.dev/simulated-custom-metrics"] =
        json!(r#"{"requests_per_second": "30"}"#);
    apply(&e.control, &example("propagationpolicy.yaml")).await;
    apply(&e.control, &deployment).await;
    let uri = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/requests_per_second";
    let one = eventually("the object's value from both members", WAIT, || async {
        let v = get_json(&e.control, uri).await?;
        (v["items"][0]["value"] == "60").then_some(v)
    })
    .await;
    assert_eq!(one["items"][0]["describedObject"]["kind"], "Deployment");
    assert_eq!(one["items"][0]["describedObject"]["apiVersion"], "apps/v1");
    let missing = get_json(
        &e.control,
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/nope/requests_per_second",
    )
    .await;
    assert_eq!(missing, None, "no member has it: 404");

    // 60 against a value of 30 with 2 ready pods → 4.
    let mut fhpa = example("federatedhpa.yaml");
    fhpa["spec"]["metrics"] = json!([{
        "type": "Object",
        "object": {"describedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                   "metric": {"name": "requests_per_second"},
                   "target": {"type": "Value", "value": "30"}},
    }]);
    apply(&e.control, &fhpa).await;
    eventually("the template at 4", WAIT, || async {
        (replicas_of(&e.control, "web").await == Some(4)).then_some(())
    })
    .await;
    let f = eventually("the object metric in the status", WAIT, || async {
        let f = fhpas(&e.control).get("web").await.ok()?;
        f.data.pointer("/status/currentMetrics/0/object")?;
        Some(f)
    })
    .await;
    assert_eq!(
        f.data.pointer("/status/currentMetrics/0"),
        Some(&json!({"type": "Object", "object": {
            "metric": {"name": "requests_per_second"},
            "current": {"value": "60"},
            "describedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        }}))
    );
    eventually("the rescale Event", WAIT, || async {
        let evs = events(&e.control, "web").await;
        evs.iter()
            .any(|m| {
                m == "SuccessfulRescale: New size: 4; reason: Deployment metric requests_per_second above target"
            })
            .then_some(())
    })
    .await;
}
