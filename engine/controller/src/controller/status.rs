//! Cluster status controller: registers remote members, probes them, and reports their health.
//!
//! - **Registry.** Every `Push` Cluster with `spec.secretRef` gets a client built from its Secret
//!   (see [`crate::client::config_for_cluster`]) in [`crate::Members`]; it is rebuilt when the
//!   Secret, `spec.apiEndpoint` or `spec.insecureSkipTLSVerification` change and dropped when the
//!   Cluster goes or stops qualifying. A Secret that is missing or unusable makes `Ready` False
//!   with reason `StatusCollectionFailed` and a message naming the Secret.
//! - **Probe.** Every [`crate::Settings::cluster_status_update_frequency`] each remote member is
//!   probed (`/readyz`, `/healthz` when that is not served) over a fresh connection; `Ready`
//!   becomes True (`ClusterReady`), False (`ClusterNotReady`: reachable but not ok) or False
//!   (`ClusterNotReachable`), a change taking effect only once it has persisted for the
//!   success/failure threshold. Healthy members also report `kubernetesVersion`,
//!   `apiEnablements`, `nodeSummary` and `resourceSummary`. The controller renews the cluster's
//!   Lease (`karmada-cluster/<name>`) each round, as Karmada's status controller does.
//! - **Monitor.** Every [`crate::Settings::cluster_monitor_period`], a Push-with-Secret or Pull
//!   Cluster whose Lease has not been renewed within the grace period becomes `Ready=Unknown`
//!   (`ClusterStatusUnknown`, or `ClusterStatusNeverUpdated` when it never reported). This is
//!   what notices a dead `flotilla agent`.
//!
//! Pull clusters are reported by their agent ([`crate::agent`]) with the same functions.
//! Clusters without `spec.secretRef` that are not Pull (simulated members, and Clusters written
//! with a hand-made status) are left alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_api::cluster::Cluster;
use flotilla_api::labels;
use flotilla_core::quantity::{NANO_PER_MILLI, NANO_PER_UNIT, parse_nano};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use serde_json::{Value, json};

use crate::client::{MemberError, Remote};
use crate::{Context, Error, Settings, Topic, api_resource, typed_all};

/// The namespace of cluster Leases and (by convention) member Secrets.
pub const CLUSTER_NAMESPACE: &str = "karmada-cluster";
/// The field manager of the status controller's writes.
pub const MANAGER: &str = "flotilla-cluster-status-controller";

/// Karmada's `Ready` reasons and messages.
pub mod reason {
    /// Healthy.
    pub const READY: &str = "ClusterReady";
    /// Reachable, health endpoint not ok.
    pub const NOT_READY: &str = "ClusterNotReady";
    /// Not reachable.
    pub const NOT_REACHABLE: &str = "ClusterNotReachable";
    /// No client could be built.
    pub const COLLECTION_FAILED: &str = "StatusCollectionFailed";
    /// The status was not renewed in time.
    pub const UNKNOWN: &str = "ClusterStatusUnknown";
    /// The status was never posted.
    pub const NEVER_UPDATED: &str = "ClusterStatusNeverUpdated";
    /// Message of [`READY`].
    pub const READY_MSG: &str = "cluster is healthy and ready to accept workloads";
    /// Message of [`NOT_READY`].
    pub const NOT_READY_MSG: &str = "cluster is reachable but health endpoint responded without ok";
    /// Message of [`NOT_REACHABLE`].
    pub const NOT_REACHABLE_MSG: &str = "cluster is not reachable";
    /// Message of [`UNKNOWN`].
    pub const UNKNOWN_MSG: &str = "Cluster status controller stopped posting cluster status.";
    /// Message of [`NEVER_UPDATED`].
    pub const NEVER_UPDATED_MSG: &str = "Cluster status controller never posted cluster status.";
}

/// A `Ready` condition to report: `(status, reason, message)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

impl Ready {
    fn new(status: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Ready {
            status,
            reason,
            message: message.into(),
        }
    }
}

/// What one probe of a member found.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// The member answered.
    pub online: bool,
    /// Its health endpoint said ok.
    pub healthy: bool,
    /// What was collected from a healthy member (`None` when collection failed).
    pub collected: Option<Collected>,
}

/// Status collected from a healthy member.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// `status.kubernetesVersion`.
    pub kubernetes_version: String,
    /// `status.apiEnablements`.
    pub api_enablements: Value,
    /// `status.nodeSummary`.
    pub node_summary: Value,
    /// `status.resourceSummary`.
    pub resource_summary: Value,
    /// The member's ResourceQuotas for the Cluster's `flotilla.dev/resource-quotas` annotation
    /// (gate `ResourceQuotaEstimate`): `None` with the gate off (the annotation is left alone),
    /// `Some(None)` when they could not be listed or do not fit (the annotation is removed, so
    /// the scheduler never estimates from stale quotas), `Some(Some(text))` otherwise.
    pub resource_quotas: Option<Option<String>>,
}

impl Observation {
    /// The `Ready` condition this observation supports.
    pub fn ready(&self) -> Ready {
        match (self.online, self.healthy) {
            (true, true) => Ready::new("True", reason::READY, reason::READY_MSG),
            (true, false) => Ready::new("False", reason::NOT_READY, reason::NOT_READY_MSG),
            _ => Ready::new("False", reason::NOT_REACHABLE, reason::NOT_REACHABLE_MSG),
        }
    }
}

/// How long a probe may take.
pub fn probe_timeout(settings: &Settings) -> Duration {
    settings
        .cluster_status_update_frequency
        .clamp(Duration::from_secs(1), Duration::from_secs(10))
}

async fn health_status(client: &Client, path: &str) -> Result<u16, kube::Error> {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .map_err(kube::Error::HttpError)?;
    Ok(client.send(req).await?.status().as_u16())
}

/// Probe the member behind `config` over a fresh connection: health, then (when healthy) its
/// version, API enablements and resource summary.
pub async fn observe(config: &kube::Config, timeout: Duration, quotas: bool) -> Observation {
    let Ok(client) = crate::client::probe_client(config, timeout) else {
        return Observation::default();
    };
    let status = match tokio::time::timeout(timeout, health_status(&client, "/readyz")).await {
        Ok(Ok(404)) => tokio::time::timeout(timeout, health_status(&client, "/healthz")).await,
        other => other,
    };
    let code = match status {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            tracing::debug!(url = %config.cluster_url, error = %e, "member health check failed");
            return Observation::default();
        }
        Err(_) => return Observation::default(),
    };
    if code != 200 {
        return Observation {
            online: true,
            healthy: false,
            collected: None,
        };
    }
    let collected = match tokio::time::timeout(timeout * 3, collect(&client, quotas)).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::warn!(url = %config.cluster_url, error = %e, "collecting member status failed");
            None
        }
        Err(_) => None,
    };
    Observation {
        online: true,
        healthy: true,
        collected,
    }
}

/// A member's `status.apiEnablements`: every resource its discovery serves, by group version.
///
/// # Errors
/// Fails when a request fails.
pub async fn api_enablements(client: &Client) -> Result<Value, Error> {
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await?;
    let mut by_gv: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for group in discovery.groups() {
        for v in group.versions() {
            for (r, _) in group.versioned_resources(v) {
                by_gv
                    .entry(r.api_version.clone())
                    .or_default()
                    .push(json!({"name": r.plural, "kind": r.kind}));
            }
        }
    }
    Ok(Value::Array(
        by_gv
            .into_iter()
            .map(|(gv, mut resources)| {
                resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
                json!({"groupVersion": gv, "resources": resources})
            })
            .collect(),
    ))
}

/// Collect version, API enablements and resource summary from a member, and with `quotas` its
/// ResourceQuotas.
///
/// # Errors
/// Fails when a request fails.
pub async fn collect(client: &Client, quotas: bool) -> Result<Collected, Error> {
    let version = client.apiserver_version().await?.git_version;
    let api_enablements = api_enablements(client).await?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let (node_summary, resource_summary) = summarize(&nodes, &pods);
    // A member whose quotas cannot be listed still reports its status; it is estimated without
    // quotas.
    let resource_quotas = if quotas {
        match Api::<ResourceQuota>::all(client.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(list) => Some(quota_annotation(&list.items)),
            Err(e) => {
                tracing::warn!(error = %e, "listing the member's ResourceQuotas failed; estimating it without them");
                Some(None)
            }
        }
    } else {
        None
    };
    Ok(Collected {
        kubernetes_version: version,
        api_enablements,
        node_summary,
        resource_summary,
        resource_quotas,
    })
}

/// The `flotilla.dev/resource-quotas` annotation for `quotas`: what the scheduler's quota
/// estimate reads of each (namespace, name, scopes, hard and used), sorted. `None`, with a
/// warning, when it would not fit in an annotation or list more quotas than the scheduler reads
/// ([`flotilla_core::component_sets::MAX_QUOTAS_TEXT`], `MAX_QUOTAS`).
pub fn quota_annotation(quotas: &[ResourceQuota]) -> Option<String> {
    let mut rows: Vec<Value> = quotas
        .iter()
        .map(|q| {
            let spec = q.spec.as_ref();
            let mut s = serde_json::Map::new();
            if let Some(scopes) = spec
                .and_then(|s| s.scopes.as_ref())
                .filter(|v| !v.is_empty())
            {
                s.insert("scopes".into(), json!(scopes));
            }
            if let Some(sel) = spec.and_then(|s| s.scope_selector.as_ref()) {
                s.insert("scopeSelector".into(), json!(sel));
            }
            let status = q.status.as_ref();
            json!({
                "namespace": q.metadata.namespace.clone().unwrap_or_default(),
                "name": q.metadata.name.clone().unwrap_or_default(),
                "spec": s,
                "status": {
                    "hard": status.and_then(|s| s.hard.clone()).unwrap_or_default(),
                    "used": status.and_then(|s| s.used.clone()).unwrap_or_default(),
                },
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        (a["namespace"].as_str(), a["name"].as_str())
            .cmp(&(b["namespace"].as_str(), b["name"].as_str()))
    });
    if rows.len() > flotilla_core::component_sets::MAX_QUOTAS {
        tracing::warn!(
            quotas = rows.len(),
            "the member has more ResourceQuotas than the scheduler reads; quotas not reported"
        );
        return None;
    }
    let text = Value::Array(rows).to_string();
    if text.len() > flotilla_core::component_sets::MAX_QUOTAS_TEXT {
        tracing::warn!(
            bytes = text.len(),
            "the member's ResourceQuotas do not fit in an annotation; quotas not reported"
        );
        return None;
    }
    Some(text)
}

type Sums = BTreeMap<String, i128>;

fn add(
    sums: &mut Sums,
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) {
    for (k, q) in list.into_iter().flatten() {
        match parse_nano(&q.0) {
            Ok(n) => *sums.entry(k.clone()).or_default() += n,
            Err(e) => tracing::debug!(resource = %k, error = %e, "skipping an unparsable quantity"),
        }
    }
}

/// Requests of one pod: the sum over containers, at least each init container's, plus overhead.
fn pod_requests(pod: &Pod) -> Sums {
    let mut sums = Sums::new();
    let Some(spec) = &pod.spec else { return sums };
    for c in &spec.containers {
        add(
            &mut sums,
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        );
    }
    for c in spec.init_containers.iter().flatten() {
        let mut init = Sums::new();
        add(
            &mut init,
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
        );
        for (k, v) in init {
            let e = sums.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    add(&mut sums, spec.overhead.as_ref());
    sums
}

/// A quantity in nano-units as Kubernetes would print it in canonical form (no suffix scaling).
pub fn format_nano(n: i128) -> String {
    if n % NANO_PER_UNIT == 0 {
        (n / NANO_PER_UNIT).to_string()
    } else if n % NANO_PER_MILLI == 0 {
        format!("{}m", n / NANO_PER_MILLI)
    } else {
        format!("{n}n")
    }
}

fn render(sums: &Sums, pods: i128) -> Value {
    let mut out: serde_json::Map<String, Value> = sums
        .iter()
        .filter(|(k, _)| k.as_str() != "pods")
        .map(|(k, v)| (k.clone(), Value::from(format_nano(*v))))
        .collect();
    out.insert("pods".into(), Value::from(pods.to_string()));
    Value::Object(out)
}

/// `nodeSummary` and `resourceSummary` of a member from its Nodes and Pods: allocatable summed
/// over Nodes; allocated from scheduled, non-terminal Pods; allocating from unscheduled ones.
pub fn summarize(nodes: &[Node], pods: &[Pod]) -> (Value, Value) {
    let mut allocatable = Sums::new();
    let mut ready = 0;
    for n in nodes {
        let st = n.status.as_ref();
        add(&mut allocatable, st.and_then(|s| s.allocatable.as_ref()));
        if st
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        {
            ready += 1;
        }
    }
    let (mut allocated, mut allocating) = (Sums::new(), Sums::new());
    let (mut n_allocated, mut n_allocating) = (0i128, 0i128);
    for p in pods {
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let scheduled = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let (sums, count) = if scheduled {
            (&mut allocated, &mut n_allocated)
        } else {
            (&mut allocating, &mut n_allocating)
        };
        for (k, v) in pod_requests(p) {
            *sums.entry(k).or_default() += v;
        }
        *count += 1;
    }
    let allocatable_pods = allocatable.get("pods").copied().unwrap_or(0) / NANO_PER_UNIT;
    let node_summary = json!({"totalNum": nodes.len(), "readyNum": ready});
    let summary = json!({
        "allocatable": render(&allocatable, allocatable_pods),
        "allocating": render(&allocating, n_allocating),
        "allocated": render(&allocated, n_allocated),
    });
    (node_summary, summary)
}

/// Per-cluster memory of the last observed Ready status and since when, for the thresholds.
#[derive(Debug, Default)]
pub struct Thresholds {
    seen: HashMap<String, (&'static str, Instant)>,
}

impl Thresholds {
    /// The `Ready` to report for `cluster` given `observed` and the `current` Ready status:
    /// a flip between True and not-True is held back until it has persisted for the success
    /// (towards True) or failure (away from True) threshold. The first observation of a
    /// cluster counts at once.
    pub fn adjust(
        &mut self,
        cluster: &str,
        observed: Ready,
        current: Option<&flotilla_api::meta::Condition>,
        settings: &Settings,
    ) -> Option<Ready> {
        let now = Instant::now();
        let Some(saved) = self.seen.get_mut(cluster) else {
            self.seen.insert(cluster.to_owned(), (observed.status, now));
            return Some(observed);
        };
        let Some(current) = current else {
            return Some(observed);
        };
        if saved.0 != observed.status {
            *saved = (observed.status, now);
        }
        let threshold = if observed.status == "True" {
            settings.cluster_success_threshold
        } else {
            settings.cluster_failure_threshold
        };
        let flips = (observed.status == "True") != (current.status == "True");
        if flips && now < saved.1 + threshold {
            return None;
        }
        Some(observed)
    }

    /// Forget `cluster`.
    pub fn forget(&mut self, cluster: &str) {
        self.seen.remove(cluster);
    }
}

/// The `Ready` condition of `cluster`, if any.
pub fn ready_condition(cluster: &Cluster) -> Option<&flotilla_api::meta::Condition> {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
}

/// The current time as RFC 3339 with microseconds (a `MicroTime`).
pub fn now_micro() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = flotilla_core::time::format_rfc3339(i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    format!("{}.{:06}Z", secs.trim_end_matches('Z'), d.subsec_micros())
}

fn clusters_api(control: &Client) -> Api<DynamicObject> {
    Api::all_with(
        control.clone(),
        &api_resource(flotilla_api::cluster::API_VERSION, "Cluster"),
    )
}

/// Write `ready` (and, when given, the `collected` fields) into Cluster `name`'s status; `ready`
/// `None` keeps the current condition. Nothing is written when nothing changes.
///
/// # Errors
/// Fails when the Cluster cannot be read or written.
pub async fn write_status(
    control: &Client,
    name: &str,
    ready: Option<&Ready>,
    collected: Option<&Collected>,
) -> Result<(), Error> {
    let api = clusters_api(control);
    let Some(obj) = api.get_opt(name).await? else {
        return Ok(());
    };
    let current = obj.data.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut status = current.clone();
    if !status.is_object() {
        status = json!({});
    }
    if let Some(r) = ready {
        let mut conditions: Vec<Value> = status
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let old = conditions
            .iter()
            .position(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
        let time = match old.map(|i| &conditions[i]) {
            Some(c) if c.get("status").and_then(Value::as_str) == Some(r.status) => {
                c.get("lastTransitionTime").cloned().unwrap_or(Value::Null)
            }
            _ => Value::from(flotilla_core::time::format_rfc3339(
                crate::clock::now_epoch(),
            )),
        };
        let cond = json!({"type": "Ready", "status": r.status, "reason": r.reason, "message": r.message, "lastTransitionTime": time});
        match old {
            Some(i) => conditions[i] = cond,
            None => conditions.push(cond),
        }
        status["conditions"] = Value::Array(conditions);
    }
    if let Some(c) = collected {
        status["kubernetesVersion"] = Value::from(c.kubernetes_version.clone());
        status["apiEnablements"] = c.api_enablements.clone();
        status["nodeSummary"] = c.node_summary.clone();
        status["resourceSummary"] = c.resource_summary.clone();
    }
    // The member's quotas ride on an annotation (Cluster status has no field for them); a
    // null removes it.
    if let Some(quotas) = collected.and_then(|c| c.resource_quotas.as_ref())
        && obj
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::RESOURCE_QUOTAS))
            != quotas.as_ref()
    {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {labels::RESOURCE_QUOTAS: quotas}}})),
        )
        .await?;
    }
    if status == current {
        return Ok(());
    }
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(())
}

/// Create namespace `name` on `client` unless it exists.
///
/// # Errors
/// Fails when a request fails.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<(), Error> {
    let nss: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource("v1", "Namespace"));
    if nss.get_opt(name).await?.is_none() {
        // Created, not applied: creating needs `create` only (the Helm chart grants no `patch`
        // on namespaces), and one that appeared meanwhile is as good.
        let obj: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .map_err(|source| Error::Decode {
            what: "namespace".into(),
            source,
        })?;
        match nss.create(&kube::api::PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Renew cluster `name`'s Lease (`karmada-cluster/<name>`) as `holder`, valid for `duration`.
///
/// # Errors
/// Fails when the write fails.
pub async fn renew_lease(
    control: &Client,
    name: &str,
    holder: &str,
    duration: Duration,
) -> Result<(), Error> {
    let leases: Api<DynamicObject> = Api::namespaced_with(
        control.clone(),
        CLUSTER_NAMESPACE,
        &api_resource("coordination.k8s.io/v1", "Lease"),
    );
    let secs = i64::try_from(duration.as_secs()).unwrap_or(i64::MAX).max(1);
    let obj = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": CLUSTER_NAMESPACE},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": secs, "renewTime": now_micro()},
    });
    leases
        .patch(
            name,
            &PatchParams::apply(holder).force(),
            &Patch::Apply(obj),
        )
        .await?;
    Ok(())
}

/// Whether the control plane's status controller manages `cluster`: Push with a Secret.
pub fn is_managed_push(cluster: &Cluster) -> bool {
    cluster.spec.sync_mode != "Pull" && cluster.spec.secret_ref.is_some()
}

/// Whether `cluster` is Pull mode.
pub fn is_pull(cluster: &Cluster) -> bool {
    cluster.spec.sync_mode == "Pull"
}

/// A remote member registered in [`crate::Members`] (which also holds the watches telling the
/// execution controller about its objects, see [`crate::Members::watch`]).
struct Registered {
    fingerprint: Option<String>,
    last_probe: Option<Instant>,
}

/// Start the registry + probe loop and the lease monitor.
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    let c = ctx.clone();
    tasks.spawn(async move { probe_loop(c).await });
    let c = ctx.clone();
    tasks.spawn(async move { monitor_loop(c).await });
}

async fn probe_loop(ctx: Arc<Context>) {
    let mut registered: HashMap<String, Registered> = HashMap::new();
    let mut thresholds = Thresholds::default();
    let events = ctx.events.subscribe(super::all_on(&[Topic::Cluster]));
    let mut namespaces_done: std::collections::HashSet<String> = std::collections::HashSet::new();
    let interval = ctx.settings.cluster_status_update_frequency;
    // Member credentials live in Secrets of `karmada-cluster` (where `flotilla join` and
    // karmadactl put them): a change there is a rotation to pick up now, not at the next round.
    // A Secret elsewhere is still re-read every round.
    let secrets: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        CLUSTER_NAMESPACE,
        &api_resource("v1", "Secret"),
    );
    let mut secret_changes =
        kube::runtime::watcher(secrets, kube::runtime::watcher::Config::default())
            .default_backoff()
            .boxed();
    loop {
        round(&ctx, &mut registered, &mut thresholds, &mut namespaces_done).await;
        // Wake on the next round, or early on a Cluster change (to register new members fast)
        // or a credentials change.
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = events.next() => tokio::time::sleep(Duration::from_millis(50)).await,
            Some(_) = secret_changes.next() => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn round(
    ctx: &Arc<Context>,
    registered: &mut HashMap<String, Registered>,
    thresholds: &mut Thresholds,
    namespaces_done: &mut std::collections::HashSet<String>,
) {
    let clusters: Vec<Cluster> = typed_all(&ctx.clusters);
    let interval = ctx.settings.cluster_status_update_frequency;
    let managed: Vec<&Cluster> = clusters
        .iter()
        .filter(|c| !ctx.members.is_fixed(c.name()) && !c.is_deleting() && is_managed_push(c))
        .collect();
    // Forget what no longer qualifies.
    let keep: std::collections::HashSet<&str> = managed.iter().map(|c| c.name()).collect();
    for name in registered.keys().cloned().collect::<Vec<_>>() {
        if !keep.contains(name.as_str()) {
            registered.remove(&name);
            ctx.members.remove_remote(&name);
            thresholds.forget(&name);
            tracing::info!(cluster = %name, "member unregistered");
        }
    }
    // Execution namespaces and the lease namespace for every non-simulated cluster.
    for c in clusters.iter().filter(|c| {
        !ctx.members.is_fixed(c.name()) && !c.is_deleting() && (is_managed_push(c) || is_pull(c))
    }) {
        for ns in [
            flotilla_core::render::execution_namespace(c.name()),
            CLUSTER_NAMESPACE.to_owned(),
        ] {
            if !namespaces_done.contains(&ns) {
                match ensure_namespace(&ctx.client, &ns).await {
                    Ok(()) => {
                        namespaces_done.insert(ns);
                    }
                    Err(e) => {
                        tracing::warn!(namespace = %ns, error = %e, "creating a namespace failed")
                    }
                }
            }
        }
    }
    let mut due = Vec::new();
    for c in managed {
        let name = c.name().to_owned();
        match crate::client::config_for_cluster(&ctx.client, c).await {
            Ok((config, fingerprint)) => {
                let entry = registered.get(&name);
                if entry.and_then(|e| e.fingerprint.as_deref()) != Some(fingerprint.as_str()) {
                    match Remote::new(config, fingerprint.clone()) {
                        Ok(remote) => {
                            // Replacing the client stops the watches made with the old one; the
                            // re-checked Works watch what they apply again.
                            ctx.members.insert_remote(&name, remote);
                            registered.insert(
                                name.clone(),
                                Registered {
                                    fingerprint: Some(fingerprint),
                                    last_probe: None,
                                },
                            );
                            tracing::info!(cluster = %name, "member registered");
                            // Works that waited for this member's client are re-checked.
                            ctx.events.send(crate::Change::any(Topic::Member));
                        }
                        Err(e) => {
                            fail_collection(ctx, registered, &name, &e).await;
                            continue;
                        }
                    }
                }
            }
            Err(e) => {
                fail_collection(ctx, registered, &name, &e).await;
                continue;
            }
        }
        if let Some(r) = registered.get(&name)
            && r.last_probe
                .is_none_or(|t| t.elapsed() + Duration::from_millis(20) >= interval)
        {
            due.push((c.clone(), ctx.members.remote(&name)));
        }
    }
    let timeout = probe_timeout(&ctx.settings);
    let quotas = ctx.settings.pipeline.gates.resource_quota_estimate;
    let probes = due
        .into_iter()
        .filter_map(|(c, r)| r.map(|r| (c, r)))
        .map(|(c, r)| async move {
            let obs = observe(&r.config, timeout, quotas).await;
            (c, obs)
        });
    for (c, obs) in futures::future::join_all(probes).await {
        let name = c.name().to_owned();
        if let Some(r) = registered.get_mut(&name) {
            r.last_probe = Some(Instant::now());
        }
        report(ctx, &c, &obs, thresholds).await;
    }
}

async fn report(ctx: &Context, cluster: &Cluster, obs: &Observation, thresholds: &mut Thresholds) {
    let name = cluster.name();
    let ready = thresholds.adjust(name, obs.ready(), ready_condition(cluster), &ctx.settings);
    publish(ctx, name, ready.as_ref(), obs.collected.as_ref()).await;
}

/// Renew the cluster's Lease, then write its status. The Lease first, as Karmada starts a
/// cluster's lease renewal before updating its status: a cluster reported Ready already has its
/// Lease. Failures are logged; the next round retries.
async fn publish(ctx: &Context, name: &str, ready: Option<&Ready>, collected: Option<&Collected>) {
    if let Err(e) = renew_lease(
        &ctx.client,
        name,
        MANAGER,
        ctx.settings.cluster_monitor_grace_period,
    )
    .await
    {
        tracing::warn!(cluster = %name, error = %e, "renewing the cluster lease failed");
    }
    if let Err(e) = write_status(&ctx.client, name, ready, collected).await {
        tracing::warn!(cluster = %name, error = %e, "writing cluster status failed");
    }
}

async fn fail_collection(
    ctx: &Context,
    registered: &mut HashMap<String, Registered>,
    name: &str,
    err: &MemberError,
) {
    if ctx.members.remove_remote(name) {
        tracing::info!(cluster = %name, "member unregistered");
    }
    // Remembered without a client: the Secret is re-read every round and the client built once it is fixed.
    registered.insert(
        name.to_owned(),
        Registered {
            fingerprint: None,
            last_probe: None,
        },
    );
    let ready = Ready::new(
        "False",
        reason::COLLECTION_FAILED,
        format!("failed to create a client for the member: {err}"),
    );
    publish(ctx, name, Some(&ready), None).await;
}

/// The lease monitor's memory of one cluster: the last renewTime seen and when it was seen.
#[derive(Debug)]
struct Seen {
    renew: Option<String>,
    at: Instant,
}

async fn monitor_loop(ctx: Arc<Context>) {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let leases: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        CLUSTER_NAMESPACE,
        &api_resource("coordination.k8s.io/v1", "Lease"),
    );
    loop {
        tokio::time::sleep(ctx.settings.cluster_monitor_period).await;
        let renewals: HashMap<String, String> = match leases.list(&ListParams::default()).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter_map(|o| {
                    Some((
                        o.metadata.name.clone()?,
                        o.data
                            .pointer("/spec/renewTime")
                            .and_then(Value::as_str)?
                            .to_owned(),
                    ))
                })
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "listing cluster leases failed");
                continue;
            }
        };
        let clusters: Vec<Cluster> = typed_all(&ctx.clusters);
        let now = Instant::now();
        seen.retain(|n, _| clusters.iter().any(|c| c.name() == n));
        for c in clusters.iter().filter(|c| {
            !ctx.members.is_fixed(c.name())
                && !c.is_deleting()
                && (is_managed_push(c) || is_pull(c))
        }) {
            let name = c.name();
            let renew = renewals.get(name).cloned();
            let s = seen.entry(name.to_owned()).or_insert_with(|| Seen {
                renew: renew.clone(),
                at: now,
            });
            if s.renew != renew {
                *s = Seen { renew, at: now };
                continue;
            }
            let current = ready_condition(c);
            let (grace, unknown) = match (current, &s.renew) {
                (None, _) | (_, None) => (
                    ctx.settings.cluster_startup_grace_period,
                    Ready::new("Unknown", reason::NEVER_UPDATED, reason::NEVER_UPDATED_MSG),
                ),
                _ => (
                    ctx.settings.cluster_monitor_grace_period,
                    Ready::new("Unknown", reason::UNKNOWN, reason::UNKNOWN_MSG),
                ),
            };
            if now.duration_since(s.at) <= grace || current.is_some_and(|r| r.status == "Unknown") {
                continue;
            }
            tracing::info!(cluster = %name, "cluster status not renewed within {grace:?}; Ready=Unknown");
            if let Err(e) = write_status(&ctx.client, name, Some(&unknown), None).await {
                tracing::warn!(cluster = %name, error = %e, "writing cluster status failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::meta::Condition;
    use k8s_openapi::api::core::v1::{
        Container, NodeCondition, NodeStatus, PodSpec, PodStatus, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn q(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    fn pod(node: Option<&str>, phase: &str, requests: &[(&str, &str)]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_name: node.map(str::to_owned),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(q(requests)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn summaries_sum_node_allocatable_and_non_terminal_pod_requests() {
        let node = |cpu: &str, ready: &str| Node {
            status: Some(NodeStatus {
                allocatable: Some(q(&[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")])),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let nodes = [node("4", "True"), node("3500m", "False")];
        let pods = [
            pod(Some("n1"), "Running", &[("cpu", "500m"), ("memory", "1Gi")]),
            pod(Some("n1"), "Succeeded", &[("cpu", "8")]),
            pod(None, "Pending", &[("cpu", "250m")]),
        ];
        let (nodes_summary, summary) = summarize(&nodes, &pods);
        assert_eq!(nodes_summary, json!({"totalNum": 2, "readyNum": 1}));
        assert_eq!(
            summary["allocatable"],
            json!({"cpu": "7500m", "memory": "17179869184", "pods": "220"})
        );
        assert_eq!(
            summary["allocated"],
            json!({"cpu": "500m", "memory": "1073741824", "pods": "1"})
        );
        assert_eq!(summary["allocating"], json!({"cpu": "250m", "pods": "1"}));
    }

    #[test]
    fn thresholds_hold_back_flips_until_they_persist() {
        let settings = Settings {
            cluster_success_threshold: Duration::from_millis(200),
            cluster_failure_threshold: Duration::from_millis(200),
            ..Settings::default()
        };
        let mut t = Thresholds::default();
        let up = Ready::new("True", reason::READY, reason::READY_MSG);
        let down = Ready::new("False", reason::NOT_REACHABLE, reason::NOT_REACHABLE_MSG);
        let cond = |s: &str| Condition {
            type_: "Ready".into(),
            status: s.into(),
            ..Default::default()
        };
        assert_eq!(
            t.adjust("a", up.clone(), None, &settings),
            Some(up.clone()),
            "first observation counts at once"
        );
        assert_eq!(
            t.adjust("a", up.clone(), Some(&cond("True")), &settings),
            Some(up.clone())
        );
        assert_eq!(
            t.adjust("a", down.clone(), Some(&cond("True")), &settings),
            None,
            "a fresh failure is held back"
        );
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(
            t.adjust("a", down.clone(), Some(&cond("True")), &settings),
            Some(down.clone()),
            "a persistent failure counts"
        );
        assert_eq!(
            t.adjust("a", up.clone(), Some(&cond("False")), &settings),
            None,
            "recovery is held back too"
        );
    }

    #[test]
    fn quota_annotations_read_back_and_refuse_more_than_the_scheduler_reads() {
        let quota = |ns: &str, name: &str| ResourceQuota {
            metadata: kube::api::ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            status: Some(k8s_openapi::api::core::v1::ResourceQuotaStatus {
                hard: Some(q(&[("requests.cpu", "2")])),
                used: Some(q(&[("requests.cpu", "500m")])),
            }),
            ..Default::default()
        };
        let text = quota_annotation(&[quota("b", "x"), quota("a", "y")]).expect("fits");
        let read = flotilla_core::component_sets::MemberQuotas::parse(&text).expect("reads back");
        let rr = json!({"resourceRequest": {"cpu": "500m"}});
        assert_eq!(read.replicas("a", Some(&rr)), 3);
        assert!(text.find("\"a\"") < text.find("\"b\""), "sorted: {text}");
        let many: Vec<ResourceQuota> = (0..=flotilla_core::component_sets::MAX_QUOTAS)
            .map(|i| quota("n", &format!("q{i}")))
            .collect();
        assert_eq!(quota_annotation(&many), None);
    }

    #[test]
    fn quantities_print_canonically() {
        assert_eq!(format_nano(4 * NANO_PER_UNIT), "4");
        assert_eq!(format_nano(1500 * NANO_PER_MILLI), "1500m");
        assert_eq!(format_nano(5), "5n");
        assert!(now_micro().ends_with('Z') && now_micro().contains('.'));
    }
}
