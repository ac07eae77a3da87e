//! The FederatedHPA controller: Karmada's `pkg/controllers/federatedhpa`, kube's horizontal pod
//! autoscaler over the pods of a resource template in every member it was scheduled to.
//!
//! Every [`Options::sync_period`] (Karmada's `--horizontal-pod-autoscaler-sync-period`, 15 s),
//! for each FederatedHPA:
//!
//! 1. the target template and its ResourceBinding's clusters; in each of those members the
//!    target's scale subresource (replicas and selector), the selected pods and their
//!    `metrics.k8s.io` PodMetrics (what the member's metrics-server, or for a simulated member
//!    the simulator, reports);
//! 2. one proposal per metric, combined and normalized by [`flotilla_core::autoscaling`] with
//!    the remembered recommendations and scale events: `Resource` and `ContainerResource` from
//!    the PodMetrics; `Pods` and `Object` from each member's `custom.metrics.k8s.io` (v1beta2,
//!    else v1beta1: the pods' values keyed by member, an object's values added up across the
//!    members as karmada-metrics-adapter does), `External` from each member's
//!    `external.metrics.k8s.io` (every series selected, added up). A member that serves no such
//!    API is left out; when none returns a value the metric fails with kube's
//!    `FailedGetPodsMetric` / `FailedGetObjectMetric` / `FailedGetExternalMetric` (the
//!    `ScalingActive` condition and a Warning Event name the members and why);
//! 3. the template scaled through its scale subresource (the scheduler then divides the new
//!    count by the placement's rules), the status (`currentReplicas`, `desiredReplicas`,
//!    `currentMetrics`, `lastScaleTime`) and the `AbleToScale`, `ScalingActive` and
//!    `ScalingLimited` conditions with kube's reasons and messages, and an Event per decision
//!    (`SuccessfulRescale`, `FailedRescale`, `FailedGetScale`, `FailedComputeMetricsReplicas`, …).
//!
//! The recommendations live in memory, as in Karmada: a restarted controller starts the
//! stabilization windows afresh.
//!
//! The CRDs of both autoscaling kinds are created on the control plane when missing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use flotilla_api::autoscaling::{
    ExternalMetricStatus, FederatedHPA, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricIdentifier, MetricSpec, MetricStatus, MetricValueStatus,
    ObjectMetricStatus, PodsMetricStatus,
};
use flotilla_core::autoscaling::{self as hpa, Combined, History, Pod, PodState, Proposal};
use k8s_openapi::api::core::v1::Pod as KubePod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::recorder::{EventType, Regarding};
use crate::{Context, api_resource};

/// Tunables (Karmada's controller-manager flags of the same meaning).
#[derive(Debug, Clone)]
pub struct Options {
    /// How often every FederatedHPA is synced (`--horizontal-pod-autoscaler-sync-period`).
    pub sync_period: Duration,
    /// The tolerance (`--horizontal-pod-autoscaler-tolerance`).
    pub tolerance: f64,
    /// The scale-down stabilization window without `behavior`, and the default of
    /// `behavior.scaleDown` (`--horizontal-pod-autoscaler-downscale-stabilization`).
    pub downscale_stabilization: Duration,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub initial_readiness_delay: Duration,
    /// The clock the windows and cron schedules read.
    pub clock: Clock,
    /// How often CronFederatedHPA rules are checked for a due run.
    pub cron_tick: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync_period: Duration::from_secs(15),
            tolerance: hpa::DEFAULT_TOLERANCE,
            downscale_stabilization: Duration::from_secs(300),
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
            clock: Clock::system(),
            cron_tick: Duration::from_secs(1),
        }
    }
}

/// The FederatedHPA resource.
pub fn resource() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: flotilla_api::autoscaling::GROUP.into(),
        version: "v1alpha1".into(),
        api_version: flotilla_api::autoscaling::API_VERSION.into(),
        kind: flotilla_api::autoscaling::FEDERATED_HPA.into(),
        plural: "federatedhpas".into(),
    }
}

const CRDS: [&str; 2] = [
    include_str!("../../../../deploy/crds/autoscaling.karmada.io_federatedhpas.yaml"),
    include_str!("../../../../deploy/crds/autoscaling.karmada.io_cronfederatedhpas.yaml"),
];

/// Create the autoscaling CRDs on the control plane when they are missing (a control plane
/// whose CRDs were installed some other way is left as it is).
pub async fn ensure_crds(client: &Client) {
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &api_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    );
    for text in CRDS {
        let crd: DynamicObject = match serde_yaml::from_str(text) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "an autoscaling CRD does not parse");
                continue;
            }
        };
        let name = crd.name_any();
        match crds.get_opt(&name).await {
            Ok(Some(_)) => {}
            Ok(None) => match crds.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    tracing::warn!(crd = %name, error = %e, "creating an autoscaling CRD failed")
                }
            },
            Err(e) => tracing::warn!(crd = %name, error = %e, "reading an autoscaling CRD failed"),
        }
    }
}

/// Start the FederatedHPA loop (the CRDs first).
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    let ctx = ctx.clone();
    tasks.spawn(async move {
        ensure_crds(&ctx.client).await;
        let options = ctx.settings.autoscaling.clone();
        let mut histories: HashMap<(String, String), History> = HashMap::new();
        let mut tick = tokio::time::interval(options.sync_period.max(Duration::from_millis(10)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            sync_all(&ctx, &options, &mut histories).await;
        }
    });
}

async fn sync_all(
    ctx: &Context,
    options: &Options,
    histories: &mut HashMap<(String, String), History>,
) {
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource());
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(error = %e, "listing FederatedHPAs failed");
            return;
        }
    };
    let mut seen = std::collections::HashSet::new();
    for o in list.items {
        let key = (o.namespace().unwrap_or_default(), o.name_any());
        seen.insert(key.clone());
        if o.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let history = histories.entry(key).or_default();
        if let Err(e) = reconcile(ctx, options, &o, history).await {
            tracing::debug!(name = %o.name_any(), error = %e, "FederatedHPA sync failed");
        }
    }
    histories.retain(|k, _| seen.contains(k));
}

/// The conditions and status being built for one sync.
struct Status {
    old: HorizontalPodAutoscalerStatus,
    conditions: Vec<HorizontalPodAutoscalerCondition>,
    now: String,
}

impl Status {
    fn new(old: &HorizontalPodAutoscalerStatus, now: String) -> Self {
        Status {
            old: old.clone(),
            conditions: old.conditions.clone(),
            now,
        }
    }

    /// kube's `setConditionInList`: the transition time moves only when the status does.
    fn set(&mut self, type_: &str, status: bool, reason: &str, message: impl Into<String>) {
        let status = if status { "True" } else { "False" };
        let i = match self.conditions.iter().position(|c| c.type_ == type_) {
            Some(i) => i,
            None => {
                self.conditions.push(HorizontalPodAutoscalerCondition {
                    type_: type_.to_owned(),
                    ..Default::default()
                });
                self.conditions.len() - 1
            }
        };
        let c = &mut self.conditions[i];
        if c.status != status {
            c.last_transition_time = Some(self.now.clone());
        }
        c.status = status.to_owned();
        c.reason = Some(reason.to_owned());
        c.message = Some(message.into());
    }
}

/// Why a sync stopped early (already recorded as a condition and an Event).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SyncError(String);

struct Target<'a> {
    ctx: &'a Context,
    regarding: Regarding,
}

impl Target<'_> {
    fn event(&self, type_: EventType, reason: &'static str, message: &str) {
        self.ctx
            .recorder
            .publish(&self.regarding, type_, reason, message);
    }
}

/// A member the target runs in: its client and the target's pod selector there.
struct Member {
    cluster: String,
    client: Client,
    selector: String,
}

/// What one sync reads once and every metric computation uses.
struct Inputs<'a> {
    observed: &'a Observed,
    members: &'a [Member],
    namespace: &'a str,
    /// The template's replicas.
    current: i32,
    /// The pods the members' scales report.
    status_replicas: i32,
    calibration: f64,
    options: &'a Options,
    now: i64,
}

/// One member's pods and their metrics.
#[derive(Debug, Default)]
struct Observed {
    /// `<cluster>/<pod>` → the pod.
    pods: BTreeMap<String, KubePod>,
    /// `<cluster>/<pod>` → the PodMetrics.
    metrics: BTreeMap<String, Value>,
}

async fn write_status(
    ctx: &Context,
    o: &DynamicObject,
    status: &HorizontalPodAutoscalerStatus,
) -> Result<(), crate::Error> {
    let before = o.data.get("status").cloned().unwrap_or(Value::Null);
    let after = serde_json::to_value(status).map_err(|source| crate::Error::Decode {
        what: "FederatedHPA status".into(),
        source,
    })?;
    if before == after {
        return Ok(());
    }
    let mut patch = json!({"status": after});
    // A merge patch keeps what it does not name: clear what the new status leaves out.
    for k in ["currentMetrics", "lastScaleTime", "currentReplicas"] {
        if patch["status"].get(k).is_none() {
            patch["status"][k] = Value::Null;
        }
    }
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &o.namespace().unwrap_or_default(),
        &resource(),
    );
    api.patch_status(&o.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

fn milli(q: &str) -> Option<i64> {
    flotilla_core::quantity::parse_nano(q)
        .ok()
        .and_then(|n| i64::try_from(n / 1_000_000).ok())
}

/// A milli-value as a quantity (`250m`, or whole units when it has no fraction).
fn quantity(v: i64) -> flotilla_api::meta::Quantity {
    let text = if v % 1000 == 0 {
        (v / 1000).to_string()
    } else {
        format!("{v}m")
    };
    flotilla_api::meta::Quantity::from(text.as_str())
}

/// A Go duration as metrics-server writes windows (`15s`, `1m0s`, `30.5s`), in seconds.
fn go_duration_secs(s: &str) -> i64 {
    let mut total = 0.0;
    let mut num = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let v: f64 = num.parse().unwrap_or(0.0);
        num.clear();
        let unit = match c {
            'h' => 3600.0,
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                0.001
            }
            'm' => 60.0,
            's' => 1.0,
            _ => 0.0,
        };
        total += v * unit;
    }
    total.clamp(0.0, 86_400.0) as i64
}

fn epoch(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<i64> {
    t.map(|t| t.0.as_second())
}

/// The HPA's view of the pods for one resource (and container): states and requests, and the
/// samples in milli-units.
fn samples(
    observed: &Observed,
    resource: &str,
    container: Option<&str>,
    options: &Options,
    now: i64,
) -> (Vec<Pod>, BTreeMap<String, i64>) {
    let mut metrics = BTreeMap::new();
    let mut sample_times = BTreeMap::new();
    for (key, m) in &observed.metrics {
        let containers = m
            .get("containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut total = 0i64;
        let mut found = false;
        let mut missing = containers.is_empty();
        for c in &containers {
            if container.is_some_and(|want| c.get("name").and_then(Value::as_str) != Some(want)) {
                continue;
            }
            match c
                .pointer(&format!("/usage/{resource}"))
                .and_then(Value::as_str)
                .and_then(milli)
            {
                Some(v) => {
                    total = total.saturating_add(v);
                    found = true;
                }
                None => missing = true,
            }
        }
        if found && !missing {
            metrics.insert(key.clone(), total);
            let at = m
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(flotilla_core::time::parse_rfc3339)
                .unwrap_or(now);
            let window = m
                .get("window")
                .and_then(Value::as_str)
                .map_or(0, go_duration_secs);
            sample_times.insert(key.clone(), (at, window));
        }
    }
    let pods = observed
        .pods
        .iter()
        .map(|(key, p)| {
            let status = p.status.clone().unwrap_or_default();
            let phase = status.phase.as_deref().unwrap_or("Pending");
            let state = if p.metadata.deletion_timestamp.is_some() || phase == "Failed" {
                PodState::Ignored
            } else if phase == "Pending" {
                PodState::Pending
            } else {
                let ready = status
                    .conditions
                    .iter()
                    .flatten()
                    .find(|c| c.type_ == "Ready");
                let (sample, window) = sample_times.get(key).copied().unwrap_or((now, 0));
                PodState::Running {
                    ready: hpa::cpu_ready(
                        now,
                        epoch(status.start_time.as_ref()),
                        ready.map(|c| c.status == "True"),
                        ready
                            .and_then(|c| epoch(c.last_transition_time.as_ref()))
                            .unwrap_or(0),
                        sample,
                        window,
                        i64::try_from(options.cpu_initialization_period.as_secs())
                            .unwrap_or(i64::MAX),
                        i64::try_from(options.initial_readiness_delay.as_secs())
                            .unwrap_or(i64::MAX),
                    ),
                }
            };
            let request = p.spec.as_ref().and_then(|s| {
                let mut sum = 0i64;
                for c in &s.containers {
                    if container.is_some_and(|want| c.name != want) {
                        continue;
                    }
                    let r = c
                        .resources
                        .as_ref()
                        .and_then(|r| r.requests.as_ref())
                        .and_then(|r| r.get(resource))
                        .and_then(|q| milli(&q.0))?;
                    sum = sum.saturating_add(r);
                }
                Some(sum)
            });
            Pod {
                name: key.clone(),
                state,
                request,
            }
        })
        .collect();
    (pods, metrics)
}

/// One metric's proposal, its status, and its description (kube's metric names).
type MetricResult = Result<(Proposal, MetricStatus, String), (&'static str, String)>;

fn resource_metric(
    spec: &MetricSpec,
    observed: &Observed,
    current: i32,
    calibration: f64,
    options: &Options,
    now: i64,
) -> MetricResult {
    let (resource, container, target, kind) = match spec.type_.as_str() {
        "Resource" => match &spec.resource {
            Some(r) => (r.name.as_str(), None, &r.target, "Resource"),
            None => return Err(("FailedGetResourceMetric", "no resource source".into())),
        },
        "ContainerResource" => match &spec.container_resource {
            Some(r) => (
                r.name.as_str(),
                Some(r.container.as_str()),
                &r.target,
                "ContainerResource",
            ),
            None => {
                return Err((
                    "FailedGetContainerResourceMetric",
                    "no containerResource source".into(),
                ));
            }
        },
        other => {
            return Err((
                "InvalidMetricSourceType",
                format!("unknown metric source type {other:?}"),
            ));
        }
    };
    let failed = if container.is_some() {
        "FailedGetContainerResourceMetric"
    } else {
        "FailedGetResourceMetric"
    };
    let (pods, metrics) = samples(observed, resource, container, options, now);
    let what = match container {
        Some(c) => format!("{resource} container resource of container {c}"),
        None => format!("{resource} resource"),
    };
    let (proposal, description) = if let Some(u) = target.average_utilization {
        let p = hpa::resource_replicas(
            current,
            u,
            resource,
            &pods,
            &metrics,
            options.tolerance,
            calibration,
        )
        .map_err(|e| (failed, format!("failed to get {resource} utilization: {e}")))?;
        (p, format!("{what} utilization (percentage of request)"))
    } else if let Some(v) = &target.average_value {
        let target = milli(&v.as_text()).unwrap_or(0);
        let p = hpa::plain_replicas(
            current,
            target,
            resource == "cpu",
            &pods,
            &metrics,
            options.tolerance,
            calibration,
        )
        .map_err(|e| (failed, format!("failed to get {resource} usage: {e}")))?;
        (p, what)
    } else {
        return Err((
            failed,
            "the target sets no averageUtilization or averageValue".into(),
        ));
    };
    let current = MetricValueStatus {
        average_value: Some(quantity(proposal.value)),
        average_utilization: proposal.utilization,
        value: None,
    };
    let status = if kind == "Resource" {
        MetricStatus {
            type_: "Resource".into(),
            resource: Some(flotilla_api::autoscaling::ResourceMetricStatus {
                name: resource.to_owned(),
                current,
            }),
            ..Default::default()
        }
    } else {
        MetricStatus {
            type_: "ContainerResource".into(),
            container_resource: Some(flotilla_api::autoscaling::ContainerResourceMetricStatus {
                name: resource.to_owned(),
                container: container.unwrap_or_default().to_owned(),
                current,
            }),
            ..Default::default()
        }
    };
    Ok((proposal, status, description))
}

/// A metric's proposal from its source type.
async fn compute_metric(spec: &MetricSpec, i: &Inputs<'_>) -> MetricResult {
    match spec.type_.as_str() {
        "Pods" => pods_metric(spec, i).await,
        "Object" => object_metric(spec, i).await,
        "External" => external_metric(spec, i).await,
        _ => resource_metric(spec, i.observed, i.current, i.calibration, i.options, i.now),
    }
}

/// kube's `LabelSelectorAsSelector` as a query string (`None`: everything).
fn selector_string(s: Option<&flotilla_api::meta::LabelSelector>) -> Result<String, String> {
    let Some(s) = s else {
        return Ok(String::new());
    };
    let mut terms: Vec<String> = s
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in &s.match_expressions {
        let mut values = e.values.clone();
        values.sort();
        terms.push(match e.operator.as_str() {
            "In" => format!("{} in ({})", e.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", e.key, values.join(",")),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => return Err(format!("{other:?} is not a valid label selector operator")),
        });
    }
    terms.sort();
    Ok(terms.join(","))
}

/// The pods counted ready for `Object` and `External` value targets (kube's
/// `getReadyPodsCount`: `Running` with a `Ready` condition that is `True`).
fn ready_pods(observed: &Observed) -> usize {
    observed
        .pods
        .values()
        .filter(|p| {
            let status = p.status.as_ref();
            status.and_then(|s| s.phase.as_deref()) == Some("Running")
                && status
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .count()
}

/// GET `uri` on a member, as JSON.
async fn member_get(client: &Client, uri: &str) -> Result<Value, String> {
    let req = http::Request::get(uri)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client.request::<Value>(req).await.map_err(|e| match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        e => e.to_string(),
    })
}

/// The items of custom metric `tail` (`namespaces/<ns>/pods/*/<metric>`, …) with `query` from
/// each member (v1beta2, else v1beta1), v1beta1 items renamed to v1beta2's shape; and, for
/// the members that returned none, why.
async fn custom_items<'m>(
    members: impl Iterator<Item = (&'m Member, String)>,
    tail: &str,
) -> (Vec<(String, Value)>, Vec<String>) {
    let (mut items, mut misses) = (Vec::new(), Vec::new());
    for (m, query) in members {
        let mut answer = Err(String::new());
        for version in ["v1beta2", "v1beta1"] {
            answer = member_get(
                &m.client,
                &format!("/apis/custom.metrics.k8s.io/{version}/{tail}{query}"),
            )
            .await;
            if answer.is_ok() {
                break;
            }
        }
        match answer {
            Ok(list) => {
                let found = list
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if found.is_empty() {
                    misses.push(format!("{}: no values", m.cluster));
                }
                for mut item in found {
                    if item.get("metric").is_none()
                        && let Some(name) = item.get("metricName").cloned()
                    {
                        item["metric"] = json!({"name": name});
                    }
                    items.push((m.cluster.clone(), item));
                }
            }
            Err(e) => {
                tracing::debug!(cluster = %m.cluster, error = %e, "member custom metrics unavailable");
                misses.push(format!("{}: {e}", m.cluster));
            }
        }
    }
    (items, misses)
}

fn query_string(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", percent_encode(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

fn why(misses: &[String]) -> String {
    if misses.is_empty() {
        String::new()
    } else {
        format!(" ({})", misses.join("; "))
    }
}

fn item_value(item: &Value) -> Option<i64> {
    item.get("value").and_then(Value::as_str).and_then(milli)
}

fn target_milli(q: Option<&flotilla_api::meta::Quantity>) -> i64 {
    q.and_then(|q| milli(&q.as_text())).unwrap_or(0)
}

/// A `Pods` metric: each member's values for the target's pods (Karmada's
/// `computeStatusForPodsMetric` over `GetMetricReplicas`).
async fn pods_metric(spec: &MetricSpec, i: &Inputs<'_>) -> MetricResult {
    const FAILED: &str = "FailedGetPodsMetric";
    let Some(src) = &spec.pods else {
        return Err((FAILED, "no pods metric source".into()));
    };
    let name = &src.metric.name;
    let metric_selector = selector_string(src.metric.selector.as_ref())
        .map_err(|e| (FAILED, format!("failed to get pods metric value: {e}")))?;
    let tail = format!(
        "namespaces/{}/pods/*/{}",
        percent_encode(i.namespace),
        percent_encode(name)
    );
    let (items, misses) = custom_items(
        i.members.iter().map(|m| {
            let q = query_string(&[
                ("labelSelector", &m.selector),
                ("metricLabelSelector", &metric_selector),
            ]);
            (m, q)
        }),
        &tail,
    )
    .await;
    let mut values = BTreeMap::new();
    for (cluster, item) in &items {
        if let (Some(pod), Some(v)) = (
            item.pointer("/describedObject/name")
                .and_then(Value::as_str),
            item_value(item),
        ) {
            values.insert(format!("{cluster}/{pod}"), v);
        }
    }
    if values.is_empty() {
        return Err((
            FAILED,
            format!(
                "unable to get metric {name}: no metrics returned from custom metrics API{}",
                why(&misses)
            ),
        ));
    }
    let (pods, _) = samples(i.observed, "", None, i.options, i.now);
    let target = target_milli(src.target.average_value.as_ref());
    let p = hpa::plain_replicas(
        i.current,
        target,
        false,
        &pods,
        &values,
        i.options.tolerance,
        i.calibration,
    )
    .map_err(|e| (FAILED, format!("failed to get pods metric value: {e}")))?;
    let status = MetricStatus {
        type_: "Pods".into(),
        pods: Some(PodsMetricStatus {
            metric: src.metric.clone(),
            current: MetricValueStatus {
                average_value: Some(quantity(p.value)),
                ..Default::default()
            },
        }),
        ..Default::default()
    };
    Ok((p, status, format!("pods metric {name}")))
}

/// An `Object` metric: the described object's value in every member, added up (Karmada's
/// `computeStatusForObjectMetric`).
async fn object_metric(spec: &MetricSpec, i: &Inputs<'_>) -> MetricResult {
    const FAILED: &str = "FailedGetObjectMetric";
    let Some(src) = &spec.object else {
        return Err((FAILED, "no object metric source".into()));
    };
    let name = &src.metric.name;
    let obj = &src.described_object;
    let metric_selector = selector_string(src.metric.selector.as_ref())
        .map_err(|e| (FAILED, format!("failed to get object metric value: {e}")))?;
    let api_version = obj.api_version.clone().unwrap_or_else(|| "v1".into());
    let tail = if obj.kind == "Namespace" && !api_version.contains('/') {
        // A namespace's own metric lives under the HPA's namespace (kube's metrics client).
        format!(
            "namespaces/{}/metrics/{}",
            percent_encode(i.namespace),
            percent_encode(name)
        )
    } else {
        let res = api_resource(&api_version, &obj.kind);
        let resource = if res.group.is_empty() {
            res.plural.clone()
        } else {
            format!("{}.{}", res.plural, res.group)
        };
        format!(
            "namespaces/{}/{}/{}/{}",
            percent_encode(i.namespace),
            percent_encode(&resource),
            percent_encode(&obj.name),
            percent_encode(name)
        )
    };
    let q = query_string(&[("metricLabelSelector", &metric_selector)]);
    let (items, misses) = custom_items(i.members.iter().map(|m| (m, q.clone())), &tail).await;
    let values: Vec<i64> = items.iter().filter_map(|(_, it)| item_value(it)).collect();
    if values.is_empty() {
        return Err((
            FAILED,
            format!(
                "unable to get metric {name}: {} on {} {}/no metrics returned from custom metrics API{}",
                obj.kind,
                i.namespace,
                obj.name,
                why(&misses)
            ),
        ));
    }
    let usage = values.iter().fold(0i64, |a, v| a.saturating_add(*v));
    let tolerance = i.options.tolerance;
    let (p, current, description) = match src.target.type_.as_str() {
        "Value" => {
            let p = hpa::object_replicas(
                i.current,
                usage,
                target_milli(src.target.value.as_ref()),
                (i.observed.pods.len(), ready_pods(i.observed)),
                tolerance,
                i.calibration,
            )
            .map_err(|e| (FAILED, format!("failed to get object metric value: {e}")))?;
            let current = MetricValueStatus {
                value: Some(quantity(p.value)),
                ..Default::default()
            };
            (p, current, format!("{} metric {name}", obj.kind))
        }
        "AverageValue" => {
            let p = hpa::object_average_replicas(
                i.status_replicas,
                usage,
                target_milli(src.target.average_value.as_ref()),
                tolerance,
                i.calibration,
            )
            .map_err(|e| (FAILED, format!("failed to get {name} object metric: {e}")))?;
            let current = MetricValueStatus {
                average_value: Some(quantity(p.value)),
                ..Default::default()
            };
            (
                p,
                current,
                format!("external metric {name}({metric_selector})"),
            )
        }
        _ => {
            return Err((
                FAILED,
                "invalid object metric source: neither a value target nor an average value target was set".into(),
            ));
        }
    };
    let status = MetricStatus {
        type_: "Object".into(),
        object: Some(ObjectMetricStatus {
            metric: src.metric.clone(),
            current,
            described_object: obj.clone(),
        }),
        ..Default::default()
    };
    Ok((p, status, description))
}

/// An `External` metric: every series the selector picks in every member, added up (kube's
/// `computeStatusForExternalMetric`; Karmada has none).
async fn external_metric(spec: &MetricSpec, i: &Inputs<'_>) -> MetricResult {
    const FAILED: &str = "FailedGetExternalMetric";
    let Some(src) = &spec.external else {
        return Err((FAILED, "no external metric source".into()));
    };
    let name = &src.metric.name;
    let metric_selector = selector_string(src.metric.selector.as_ref())
        .map_err(|e| (FAILED, format!("failed to get external metric value: {e}")))?;
    let uri = format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{}/{}{}",
        percent_encode(i.namespace),
        percent_encode(name),
        query_string(&[("labelSelector", &metric_selector)])
    );
    let (mut values, mut misses) = (Vec::new(), Vec::new());
    for m in i.members {
        match member_get(&m.client, &uri).await {
            Ok(list) => {
                let found: Vec<i64> = list
                    .get("items")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(item_value)
                    .collect();
                if found.is_empty() {
                    misses.push(format!("{}: no values", m.cluster));
                }
                values.extend(found);
            }
            Err(e) => {
                tracing::debug!(cluster = %m.cluster, error = %e, "member external metrics unavailable");
                misses.push(format!("{}: {e}", m.cluster));
            }
        }
    }
    if values.is_empty() {
        return Err((
            FAILED,
            format!(
                "unable to get external metric {}/{name}/{metric_selector}: no metrics returned from external metrics API{}",
                i.namespace,
                why(&misses)
            ),
        ));
    }
    let usage = values.iter().fold(0i64, |a, v| a.saturating_add(*v));
    let tolerance = i.options.tolerance;
    let (p, current) = match src.target.type_.as_str() {
        "Value" => {
            let p = hpa::object_replicas(
                i.current,
                usage,
                target_milli(src.target.value.as_ref()),
                (i.observed.pods.len(), ready_pods(i.observed)),
                tolerance,
                i.calibration,
            )
            .map_err(|e| (FAILED, format!("failed to get external metric value: {e}")))?;
            let current = MetricValueStatus {
                value: Some(quantity(p.value)),
                ..Default::default()
            };
            (p, current)
        }
        "AverageValue" => {
            let p = hpa::external_average_replicas(
                i.status_replicas,
                usage,
                target_milli(src.target.average_value.as_ref()),
                tolerance,
                i.calibration,
            )
            .map_err(|e| (FAILED, format!("failed to get external metric value: {e}")))?;
            let current = MetricValueStatus {
                average_value: Some(quantity(p.value)),
                ..Default::default()
            };
            (p, current)
        }
        _ => {
            return Err((
                FAILED,
                "invalid external metric source: neither a value target nor an average value target was set".into(),
            ));
        }
    };
    let status = MetricStatus {
        type_: "External".into(),
        external: Some(ExternalMetricStatus {
            metric: MetricIdentifier {
                name: name.clone(),
                selector: src.metric.selector.clone(),
            },
            current,
        }),
        ..Default::default()
    };
    Ok((
        p,
        status,
        format!("external metric {name}({metric_selector})"),
    ))
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The PodMetrics of member `client` matching `selector` in `namespace` (none when the member
/// serves no metrics API).
async fn pod_metrics(client: &Client, namespace: &str, selector: &str) -> Vec<Value> {
    let uri = format!(
        "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods?labelSelector={}",
        percent_encode(selector)
    );
    let Ok(req) = http::Request::get(uri).body(Vec::new()) else {
        return Vec::new();
    };
    match client.request::<Value>(req).await {
        Ok(v) => v
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        Err(e) => {
            tracing::debug!(error = %e, "reading a member's pod metrics failed");
            Vec::new()
        }
    }
}

/// One sync of FederatedHPA `o`.
///
/// # Errors
/// What stopped the sync (recorded as a condition and an Event too), or a failed status write.
pub async fn reconcile(
    ctx: &Context,
    options: &Options,
    o: &DynamicObject,
    history: &mut History,
) -> Result<(), crate::Error> {
    let mut fhpa: FederatedHPA = crate::typed(o)?;
    flotilla_core::autoscaling::spec::set_defaults(&mut fhpa.spec);
    let now_ms = options.clock.now_millis();
    let now = now_ms.div_euclid(1000);
    let mut st = Status::new(&fhpa.status, flotilla_core::time::format_rfc3339(now));
    let ns = o.namespace().unwrap_or_default();
    let t = Target {
        ctx,
        regarding: Regarding {
            api_version: flotilla_api::autoscaling::API_VERSION.into(),
            kind: flotilla_api::autoscaling::FEDERATED_HPA.into(),
            namespace: ns.clone(),
            name: o.name_any(),
            uid: o.uid().unwrap_or_default(),
        },
    };
    let r = &fhpa.spec.scale_target_ref;
    let fail = |st: &mut Status,
                reason: &'static str,
                condition_reason: &str,
                prefix: &str,
                err: String| {
        t.event(EventType::Warning, reason, &err);
        st.set(
            "AbleToScale",
            false,
            condition_reason,
            format!("{prefix}: {err}"),
        );
    };
    let finish = |st: Status, current: Option<i32>| {
        let mut s = st.old.clone();
        s.conditions = st.conditions;
        if let Some(c) = current {
            s.current_replicas = c;
        }
        s
    };

    let Some(api_version) = r.api_version.clone().filter(|v| !v.is_empty()) else {
        fail(
            &mut st,
            "FailedGetScale",
            "FailedGetScale",
            "the HPA controller was unable to get the target's current scale",
            "invalid API version in scale target reference: empty".into(),
        );
        write_status(ctx, o, &finish(st, None)).await?;
        return Ok(());
    };
    let target_res = api_resource(&api_version, &r.kind);
    let templates: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &target_res);
    let template = match templates.get(&r.name).await {
        Ok(t) => t,
        Err(e) => {
            fail(
                &mut st,
                "FailedGetScaleTargetRef",
                "FailedGetScaleTargetRef",
                "the HPA controller was unable to get the target reference object",
                e.to_string(),
            );
            write_status(ctx, o, &finish(st, None)).await?;
            return Ok(());
        }
    };
    let binding_name = flotilla_core::detector::binding_name(&r.kind, &r.name);
    let binding = ctx.bindings.store.state().into_iter().find(|b| {
        b.metadata.namespace.as_deref() == Some(ns.as_str())
            && b.metadata.name.as_deref() == Some(binding_name.as_str())
    });
    let Some(binding) = binding else {
        fail(
            &mut st,
            "FailedGetBindings",
            "FailedGetBinding",
            "the HPA controller was unable to get the binding by scaleTargetRef",
            format!("no ResourceBinding {ns}/{binding_name} for the target"),
        );
        write_status(ctx, o, &finish(st, None)).await?;
        return Ok(());
    };
    let clusters: Vec<String> = binding
        .data
        .pointer("/spec/clusters")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if clusters.is_empty() {
        fail(
            &mut st,
            "FailedGetTargetClusters",
            "FailedGetTargetClusters",
            "the HPA controller was unable to get the target clusters from binding",
            format!("binding {ns}/{binding_name} is not scheduled to any cluster"),
        );
        write_status(ctx, o, &finish(st, None)).await?;
        return Ok(());
    }

    // The members' scales, pods and metrics.
    let (mut spec_sum, mut status_sum) = (0i64, 0i64);
    let mut observed = Observed::default();
    let mut members = Vec::new();
    for cluster in &clusters {
        let Some(member) = ctx.members.get(cluster) else {
            continue;
        };
        let api: Api<DynamicObject> = Api::namespaced_with(member.clone(), &ns, &target_res);
        let scale = match api.get_scale(&r.name).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(cluster = %cluster, error = %e, "member scale unavailable");
                continue;
            }
        };
        spec_sum += i64::from(scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0));
        let status = scale.status.unwrap_or_default();
        status_sum += i64::from(status.replicas);
        let selector = status.selector.unwrap_or_default();
        if selector.is_empty() {
            t.event(
                EventType::Warning,
                "SelectorRequired",
                "selector is required",
            );
            st.set(
                "ScalingActive",
                false,
                "InvalidSelector",
                "the HPA target's scale is missing a selector",
            );
            continue;
        }
        members.push(Member {
            cluster: cluster.clone(),
            client: member.clone(),
            selector: selector.clone(),
        });
        let pods: Api<KubePod> = Api::namespaced(member.clone(), &ns);
        let list = match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(cluster = %cluster, error = %e, "member pods unavailable");
                continue;
            }
        };
        for p in list.items {
            observed
                .pods
                .insert(format!("{cluster}/{}", p.name_any()), p);
        }
        for m in pod_metrics(&member, &ns, &selector).await {
            if let Some(name) = m.pointer("/metadata/name").and_then(Value::as_str) {
                observed.metrics.insert(format!("{cluster}/{name}"), m);
            }
        }
    }
    if spec_sum == 0 {
        fail(
            &mut st,
            "FailedGetScale",
            "FailedGetScale",
            "the HPA controller was unable to get the target's current scale",
            "failed to get replicas in any of clusters, possibly because all of clusters are not ready".into(),
        );
        write_status(ctx, o, &finish(st, None)).await?;
        return Ok(());
    }
    let template_scale = templates.get_scale(&r.name).await?;
    let current = template_scale
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or_else(|| {
            template
                .data
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
                .unwrap_or(0)
        });
    st.set(
        "AbleToScale",
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
    );
    history.record_initial(current, now_ms);
    let min = fhpa.spec.min_replicas.unwrap_or(1);
    let max = fhpa.spec.max_replicas;

    let mut metric_statuses = Vec::new();
    let (desired, reason) = if current > max {
        (
            max,
            "Current number of replicas above Spec.MaxReplicas".to_owned(),
        )
    } else if current < min {
        (
            min,
            "Current number of replicas below Spec.MinReplicas".to_owned(),
        )
    } else {
        let calibration = spec_sum as f64 / f64::from(current.max(1));
        let mut proposals = Vec::new();
        let mut descriptions = Vec::new();
        let mut failures = Vec::new();
        let inputs = Inputs {
            observed: &observed,
            members: &members,
            namespace: &ns,
            current,
            status_replicas: i32::try_from(status_sum).unwrap_or(i32::MAX),
            calibration,
            options,
            now,
        };
        for m in &fhpa.spec.metrics {
            let result = compute_metric(m, &inputs).await;
            ctx.metrics.record_hpa_metric(&m.type_, result.is_ok());
            match result {
                Ok((p, s, d)) => {
                    proposals.push(Some(p.replicas));
                    metric_statuses.push(s);
                    descriptions.push(d);
                }
                Err((reason, message)) => {
                    t.event(EventType::Warning, reason, &message);
                    proposals.push(None);
                    metric_statuses.push(MetricStatus::default());
                    descriptions.push(String::new());
                    failures.push((reason, message));
                }
            }
        }
        metric_statuses.retain(|s| !s.type_.is_empty());
        match hpa::combine(current, &proposals) {
            Combined::Failed { failed, .. } => {
                let (reason, message) = failures.first().cloned().unwrap_or_default();
                st.set(
                    "ScalingActive",
                    false,
                    reason,
                    format!("the HPA was unable to compute the replica count: {message}"),
                );
                let err = format!(
                    "invalid metrics ({failed} invalid out of {}), first error is: {message}",
                    proposals.len()
                );
                t.event(EventType::Warning, "FailedComputeMetricsReplicas", &err);
                let mut s = finish(st, Some(current));
                s.current_metrics = metric_statuses;
                write_status(ctx, o, &s).await?;
                return Ok(());
            }
            Combined::Scale { replicas, by, .. } => {
                let metric = descriptions.get(by).cloned().unwrap_or_default();
                st.set(
                    "ScalingActive",
                    true,
                    "ValidMetricFound",
                    format!(
                        "the HPA was able to successfully calculate a replica count from {metric}"
                    ),
                );
                let reason = if replicas > current {
                    format!("{metric} above target")
                } else if replicas < current {
                    "All metrics below target".to_owned()
                } else {
                    String::new()
                };
                let window = i32::try_from(options.downscale_stabilization.as_secs())
                    .unwrap_or(hpa::MAX_STABILIZATION_WINDOW_SECONDS);
                let behavior =
                    flotilla_core::autoscaling::spec::behavior(fhpa.spec.behavior.as_ref(), window);
                let n = match &behavior {
                    None => hpa::normalize(
                        history,
                        now_ms,
                        current,
                        replicas,
                        min,
                        max,
                        i64::from(window),
                    ),
                    Some(b) => hpa::normalize_with_behavior(
                        history, b, now_ms, current, replicas, min, max,
                    ),
                };
                st.set(
                    "AbleToScale",
                    true,
                    n.able_to_scale.reason,
                    n.able_to_scale.message,
                );
                st.set(
                    "ScalingLimited",
                    n.scaling_limited.status,
                    n.scaling_limited.reason,
                    n.scaling_limited.message,
                );
                (n.replicas, reason)
            }
        }
    };

    let mut status = finish(st, Some(current));
    status.current_metrics = metric_statuses;
    status.desired_replicas = current;
    if desired != current {
        let patch = json!({"spec": {"replicas": desired}});
        match templates
            .patch_scale(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                let mut st = Status::new(&status, flotilla_core::time::format_rfc3339(now));
                st.set(
                    "AbleToScale",
                    true,
                    "SucceededRescale",
                    format!("the HPA controller was able to update the target scale to {desired}"),
                );
                status.conditions = st.conditions;
                t.event(
                    EventType::Normal,
                    "SuccessfulRescale",
                    &format!("New size: {desired}; reason: {reason}"),
                );
                let behavior =
                    flotilla_core::autoscaling::spec::behavior(fhpa.spec.behavior.as_ref(), 0);
                if let Some(b) = &behavior {
                    history.record_scale(b, current, desired, now_ms);
                }
                status.desired_replicas = desired;
                status.last_scale_time = Some(flotilla_core::time::format_rfc3339(now));
            }
            Err(e) => {
                t.event(
                    EventType::Warning,
                    "FailedRescale",
                    &format!("New size: {desired}; reason: {reason}; error: {e}"),
                );
                let mut st = Status::new(&status, flotilla_core::time::format_rfc3339(now));
                st.set(
                    "AbleToScale",
                    false,
                    "FailedUpdateScale",
                    format!("the HPA controller was unable to update the target scale: {e}"),
                );
                status.conditions = st.conditions;
                write_status(ctx, o, &status).await?;
                return Err(e.into());
            }
        }
    }
    write_status(ctx, o, &status).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_and_quantities_read_as_metrics_server_writes_them() {
        assert_eq!(go_duration_secs("15s"), 15);
        assert_eq!(go_duration_secs("1m0s"), 60);
        assert_eq!(go_duration_secs("30.5s"), 30);
        assert_eq!(go_duration_secs("500ms"), 0);
        assert_eq!(go_duration_secs("99999h"), 86_400);
        assert_eq!(milli("250m"), Some(250));
        assert_eq!(milli("64Mi"), Some(67_108_864_000));
        assert_eq!(quantity(250).as_text(), "250m");
        assert_eq!(quantity(2000).as_text(), "2");
    }

    #[test]
    fn metric_selectors_read_as_kube_writes_them() {
        let sel: flotilla_api::meta::LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"queue": "orders"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "gone", "operator": "DoesNotExist"},
            ],
        }))
        .expect("selector");
        assert_eq!(
            selector_string(Some(&sel)).as_deref(),
            Ok("!gone,queue=orders,tier in (a,b)")
        );
        assert_eq!(selector_string(None).as_deref(), Ok(""));
        let bad: flotilla_api::meta::LabelSelector = serde_json::from_value(json!({
            "matchExpressions": [{"key": "k", "operator": "Near"}],
        }))
        .expect("selector");
        assert!(selector_string(Some(&bad)).is_err());
        assert_eq!(
            query_string(&[("labelSelector", "app=web"), ("metricLabelSelector", "")]),
            "?labelSelector=app%3Dweb"
        );
        assert_eq!(query_string(&[("labelSelector", "")]), "");
    }

    #[test]
    fn conditions_keep_their_transition_time_while_the_status_holds() {
        let mut st = Status::new(&HorizontalPodAutoscalerStatus::default(), "t1".into());
        st.set("AbleToScale", true, "A", "a");
        st.now = "t2".into();
        st.set("AbleToScale", true, "B", "b");
        assert_eq!(st.conditions[0].last_transition_time.as_deref(), Some("t1"));
        assert_eq!(st.conditions[0].reason.as_deref(), Some("B"));
        st.now = "t3".into();
        st.set("AbleToScale", false, "C", "c");
        assert_eq!(st.conditions[0].last_transition_time.as_deref(), Some("t3"));
        st.set("ScalingActive", true, "D", "d");
        assert_eq!(st.conditions.len(), 2);
    }
}
