//! Flotilla's controllers: Karmada's propagation pipeline running live on kube-rs.
//!
//! The offline pipeline of `flotilla_core::plan::plan` split into level-triggered controllers,
//! each a kube-rs `Controller` over one shared reflector cache per kind. The caches publish every
//! change on a [`Bus`]; each controller maps a change to the objects it concerns (a member
//! object to its Work, a Work to its binding, a template to its binding; a relevant Cluster
//! change to every binding) and re-checks only those:
//!
//! - [`controller::detector`]: resource templates + (Cluster)PropagationPolicies → ResourceBindings;
//! - [`controller::scheduler`]: ResourceBindings + Clusters → `spec.clusters` and the `Scheduled` condition;
//! - [`controller::binding`]: ResourceBindings + OverridePolicies → Works in `karmada-es-<cluster>`,
//!   Work status → `aggregatedStatus` → template status, and binding deletion;
//! - [`controller::execution`]: Works → server-side apply into the member, `Applied` + `manifestStatuses`;
//! - [`controller::simulator`]: simulated members' Deployments become available after a delay;
//! - [`controller::status`]: registers remote members (Push Clusters with a Secret) in [`Members`],
//!   probes them for `Ready` and their status, renews their Leases and marks Clusters whose
//!   status stopped being renewed `Ready=Unknown`.
//!
//! [`members`] registers simulated members (logical clusters of the embedded API server) as
//! `Cluster` objects, and joins real ones ([`members::join`]). [`agent`] is `flotilla agent`:
//! a Pull member's own status reporting and execution controller.

pub mod agent;
pub mod client;
pub mod clock;
pub mod controller;
pub mod leader;
pub mod members;
pub mod oci;
pub mod recorder;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

pub use client::Members;

/// A controller failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to an API server failed.
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// An object could not be read as its Karmada type.
    #[error("decoding {what}: {source}")]
    Decode {
        /// What was decoded.
        what: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// Works could not be rendered.
    #[error("rendering works: {0}")]
    Render(String),
    /// A manifest could not be applied to its member cluster.
    #[error("{0}")]
    Apply(String),
    /// A reflector store went away.
    #[error("a watch cache stopped")]
    CacheStopped,
    /// The controllers are shutting down.
    #[error("the controllers are stopping")]
    Stopped,
    /// A member cluster's client could not be built.
    #[error(transparent)]
    Member(#[from] client::MemberError),
    /// A blocking task panicked or was cancelled.
    #[error("scheduling task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// What a change event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// A resource template.
    Template,
    /// A PropagationPolicy or ClusterPropagationPolicy.
    Propagation,
    /// An OverridePolicy or ClusterOverridePolicy.
    Override,
    /// A Cluster.
    Cluster,
    /// A Work.
    Work,
    /// An object in a member cluster.
    Member,
    /// A ResourceBinding.
    Binding,
    /// A `SchedulerProfile` or `WasmPlugin` object.
    Plugin,
    /// The served scheduler profiles were swapped.
    Profiles,
    /// A `ResourceInterpreterCustomization` object.
    Interpreter,
    /// The interpreter chain was swapped because a customization was created, changed or
    /// deleted: the change's object is that customization (as it was last, when deleted), whose
    /// `spec.target` names the template kind to interpret again.
    InterpreterChain,
}

/// One change seen by a cache.
#[derive(Debug, Clone)]
pub struct Change {
    /// The kind of object.
    pub topic: Topic,
    /// The object as it is now (as it was last, when deleted); `None` when anything of the topic
    /// may have changed (a cache relisted, profiles were swapped, a member was registered).
    pub object: Option<Arc<DynamicObject>>,
    /// Whether the object was deleted.
    pub deleted: bool,
}

impl Change {
    /// A change to anything of `topic`.
    pub fn any(topic: Topic) -> Self {
        Change {
            topic,
            object: None,
            deleted: false,
        }
    }
}

/// Change notifications, fanned out to every subscriber.
///
/// Each subscriber's [`Mapper`](controller::Mapper) runs as the change is published and turns it
/// into the objects that subscriber must re-check; those are kept in a de-duplicated pending set
/// until the subscriber takes them. So a busy controller never loses a change, never falls back
/// to re-checking everything, and its backlog is at most one entry per object it owns (not one
/// object copy per event).
#[derive(Debug, Clone, Default)]
pub struct Bus {
    subscribers: Arc<Mutex<Vec<std::sync::Weak<Subscriber>>>>,
}

struct Subscriber {
    mapper: Mutex<controller::Mapper>,
    pending: Mutex<Pending>,
    notify: tokio::sync::Notify,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Pending {
    all: bool,
    objects: HashSet<(String, String)>,
    /// [`Targets::Soon`](controller::Targets::Soon) requests, when the oldest and the latest came.
    soon: HashSet<(String, String)>,
    soon_since: Option<tokio::time::Instant>,
    soon_last: Option<tokio::time::Instant>,
}

/// The receiving end of a [`Bus`] subscription; dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    inner: Arc<Subscriber>,
}

impl Subscription {
    /// Wait for changes, then take everything pending: [`Targets::All`](controller::Targets::All)
    /// when anything asked for all, otherwise the objects.
    pub async fn next(&self) -> controller::Targets {
        loop {
            let notified = self.inner.notify.notified();
            let due = {
                let mut p = self
                    .inner
                    .pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if std::mem::take(&mut p.all) {
                    p.objects.clear();
                    p.soon.clear();
                    p.soon_since = None;
                    p.soon_last = None;
                    return controller::Targets::All;
                }
                let due = p.soon_since.zip(p.soon_last).map(|(since, last)| {
                    (since + controller::COALESCE_WINDOW).min(last + controller::COALESCE_QUIET)
                });
                let soon_due = due.is_some_and(|d| d <= tokio::time::Instant::now());
                if !p.objects.is_empty() || soon_due {
                    // What waits for its window goes along with anything due now.
                    let soon = std::mem::take(&mut p.soon);
                    p.soon_since = None;
                    p.soon_last = None;
                    p.objects.extend(soon);
                    return controller::Targets::Objects(p.objects.drain().collect());
                }
                due
            };
            match due {
                Some(due) => {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep_until(due) => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

impl Bus {
    /// Subscribe with `mapper`, which decides what each change published from now on means.
    pub fn subscribe(&self, mapper: controller::Mapper) -> Subscription {
        self.subscribe_with(mapper, false)
    }

    /// [`Bus::subscribe`], with [`Targets::All`](controller::Targets::All) already pending when
    /// `all_first` (a controller's first pass over everything it owns).
    pub fn subscribe_with(&self, mapper: controller::Mapper, all_first: bool) -> Subscription {
        let pending = Pending {
            all: all_first,
            ..Pending::default()
        };
        let inner = Arc::new(Subscriber {
            mapper: Mutex::new(mapper),
            pending: Mutex::new(pending),
            notify: tokio::sync::Notify::new(),
        });
        self.subscribers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::downgrade(&inner));
        Subscription { inner }
    }

    /// Publish `change` (subscriptions that were dropped are forgotten).
    pub fn send(&self, change: Change) {
        let subscribers: Vec<Arc<Subscriber>> = {
            let mut subs = self
                .subscribers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            subs.retain(|s| s.strong_count() > 0);
            subs.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        for s in subscribers {
            let targets =
                (s.mapper
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner))(&change);
            let mut p = s
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match targets {
                controller::Targets::Nothing => continue,
                controller::Targets::All => p.all = true,
                controller::Targets::Objects(objects) => p.objects.extend(objects),
                controller::Targets::Soon(objects) => {
                    p.soon.extend(objects);
                    let now = tokio::time::Instant::now();
                    p.soon_since.get_or_insert(now);
                    p.soon_last = Some(now);
                }
            }
            drop(p);
            s.notify.notify_one();
        }
    }
}

/// Tunables.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The template kinds the detector watches, as `(apiVersion, kind)`.
    pub template_kinds: Vec<(String, String)>,
    /// How long a simulated member takes to make a Deployment available.
    pub ready_delay: Duration,
    /// Requeue interval of healthy objects (a safety net: changes arrive by watch and are mapped
    /// to the objects they concern; every object is re-checked this often regardless).
    pub resync: Duration,
    /// How often remote members are probed and their status reported (Karmada's
    /// `--cluster-status-update-frequency`, 10 s).
    pub cluster_status_update_frequency: Duration,
    /// How long a member must stay healthy before `Ready` turns True (`--cluster-success-threshold`, 30 s).
    pub cluster_success_threshold: Duration,
    /// How long a member must stay unhealthy before `Ready` turns False (`--cluster-failure-threshold`, 30 s).
    pub cluster_failure_threshold: Duration,
    /// How often the monitor checks cluster Leases (`--cluster-monitor-period`, 5 s).
    pub cluster_monitor_period: Duration,
    /// A Lease not renewed for this long makes `Ready` Unknown (`--cluster-monitor-grace-period`, 40 s).
    pub cluster_monitor_grace_period: Duration,
    /// The same for a cluster that never reported (`--cluster-startup-grace-period`, 60 s).
    pub cluster_startup_grace_period: Duration,
    /// Plugin backends and the default profile the plugin registry builds profiles with.
    pub backends: controller::plugins::Backends,
    /// How often plugin objects are re-resolved even without a change (module files on disk).
    pub plugin_resync: Duration,
    /// Where `WasmPlugin` `spec.module.imagePullSecret` Secrets are read: `WasmPlugin`s are
    /// cluster-scoped, so their pull secrets live beside the controllers (`flotilla-system`).
    pub plugin_pull_secret_namespace: String,
    /// The decision pipeline's options (taint eviction, empty workload propagation).
    pub pipeline: flotilla_core::pipeline::Options,
    /// The autoscalers' options (FederatedHPA sync period, tolerance, windows, clock).
    pub autoscaling: controller::federatedhpa::Options,
    /// Program backends of `ResourceInterpreterCustomization` rules (injected by the CLI).
    pub rule_backends: controller::interpreters::RuleBackends,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            template_kinds: DEFAULT_TEMPLATE_KINDS
                .iter()
                .map(|(a, k)| ((*a).to_owned(), (*k).to_owned()))
                .collect(),
            ready_delay: Duration::from_millis(500),
            resync: Duration::from_secs(3600),
            cluster_status_update_frequency: Duration::from_secs(10),
            cluster_success_threshold: Duration::from_secs(30),
            cluster_failure_threshold: Duration::from_secs(30),
            cluster_monitor_period: Duration::from_secs(5),
            cluster_monitor_grace_period: Duration::from_secs(40),
            cluster_startup_grace_period: Duration::from_secs(60),
            backends: controller::plugins::Backends::default(),
            plugin_resync: Duration::from_secs(10),
            plugin_pull_secret_namespace: leader::DEFAULT_NAMESPACE.to_owned(),
            pipeline: flotilla_core::pipeline::Options::default(),
            autoscaling: controller::federatedhpa::Options::default(),
            rule_backends: controller::interpreters::RuleBackends::default(),
        }
    }
}

/// The template kinds watched by default.
pub const DEFAULT_TEMPLATE_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("v1", "Secret"),
];

/// Resources learnt by [`discover`], by `(apiVersion, kind)`.
static DISCOVERED: std::sync::RwLock<BTreeMap<(String, String), ApiResource>> =
    std::sync::RwLock::new(BTreeMap::new());

/// The `ApiResource` of a kind: as the API server's discovery served it (see [`discover`]), else
/// with Kubernetes' pluralization (right for every built-in kind).
pub fn api_resource(api_version: &str, kind: &str) -> ApiResource {
    let known = DISCOVERED
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(r) = known.get(&(api_version.to_owned(), kind.to_owned())) {
        return r.clone();
    }
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

/// Learn the resources `client`'s API server serves (the plurals of custom kinds), for
/// [`api_resource`]. Groups that fail discovery are skipped, as kubectl skips them.
///
/// # Errors
/// Fails when the server's group list cannot be read.
pub async fn discover(client: &Client) -> Result<usize, Error> {
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await?;
    let mut known = DISCOVERED
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for group in discovery.groups() {
        for v in group.versions() {
            for (r, _) in group.versioned_resources(v) {
                known.insert((r.api_version.clone(), r.kind.clone()), r);
            }
        }
    }
    Ok(known.len())
}

/// A watched kind: its resource and its cache.
#[derive(Clone)]
pub struct Cached {
    /// The resource.
    pub resource: ApiResource,
    /// The reflector store.
    pub store: Store<DynamicObject>,
    /// Bumped after every change applied to the store (for [`Memo`]).
    pub version: Arc<AtomicU64>,
    /// Objects grouped by a key (see [`Index`]), when the cache keeps one.
    pub index: Option<Arc<Index>>,
}

/// Cached objects grouped by a key computed from each object (e.g. Works by their binding's
/// permanent id), maintained by the cache as changes arrive.
pub struct Index {
    key: fn(&DynamicObject) -> Option<String>,
    inner: Mutex<IndexInner>,
}

#[derive(Default)]
struct IndexInner {
    by_key: HashMap<String, HashSet<(String, String)>>,
    key_of: HashMap<(String, String), String>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").finish_non_exhaustive()
    }
}

/// An object's `(namespace, name)` (namespace empty for cluster-scoped kinds).
pub(crate) fn object_key(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

impl Index {
    /// An empty index keyed by `key` (objects it returns `None` for are not indexed).
    pub fn new(key: fn(&DynamicObject) -> Option<String>) -> Self {
        Index {
            key,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IndexInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remove_locked(inner: &mut IndexInner, id: &(String, String)) {
        if let Some(old) = inner.key_of.remove(id)
            && let Some(set) = inner.by_key.get_mut(&old)
        {
            set.remove(id);
            if set.is_empty() {
                inner.by_key.remove(&old);
            }
        }
    }

    /// Record `o` as it is now.
    pub fn apply(&self, o: &DynamicObject) {
        let id = object_key(o);
        let key = (self.key)(o);
        let mut inner = self.lock();
        if inner.key_of.get(&id) == key.as_ref() {
            return;
        }
        Self::remove_locked(&mut inner, &id);
        if let Some(k) = key {
            inner
                .by_key
                .entry(k.clone())
                .or_default()
                .insert(id.clone());
            inner.key_of.insert(id, k);
        }
    }

    /// Forget `o`.
    pub fn delete(&self, o: &DynamicObject) {
        Self::remove_locked(&mut self.lock(), &object_key(o));
    }

    /// Replace everything with `objects` (after a relist).
    pub fn rebuild(&self, objects: &[Arc<DynamicObject>]) {
        let mut fresh = IndexInner::default();
        for o in objects {
            if let Some(k) = (self.key)(o) {
                let id = object_key(o);
                fresh
                    .by_key
                    .entry(k.clone())
                    .or_default()
                    .insert(id.clone());
                fresh.key_of.insert(id, k);
            }
        }
        *self.lock() = fresh;
    }

    /// `(namespace, name)` of the objects with `key`.
    pub fn get(&self, key: &str) -> Vec<(String, String)> {
        self.lock()
            .by_key
            .get(key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// A value derived from caches, recomputed only when their version moved.
#[derive(Debug)]
pub struct Memo<T> {
    inner: Mutex<Option<(u64, Arc<T>)>>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo {
            inner: Mutex::new(None),
        }
    }
}

impl<T> Memo<T> {
    /// The value for `version` (the sum of the caches' [`Cached::version`]s, read *before* the
    /// caches themselves), computing it with `f` when the kept one is older.
    pub fn get(&self, version: u64, f: impl FnOnce() -> T) -> Arc<T> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*inner {
            Some((v, t)) if *v == version => Arc::clone(t),
            _ => {
                let t = Arc::new(f());
                *inner = Some((version, Arc::clone(&t)));
                t
            }
        }
    }
}

impl Cached {
    /// The current version (see [`Memo::get`]).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The object `namespace/name` (namespace empty for cluster-scoped kinds).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        let r = ObjectRef::new_with(name, self.resource.clone());
        let r = if namespace.is_empty() {
            r
        } else {
            r.within(namespace)
        };
        self.store.get(&r)
    }
}

/// The decision pipeline's snapshot with the Cluster-cache revision and the profiles it was built
/// from.
pub type SnapshotMemo = (
    u64,
    Arc<Vec<flotilla_core::framework::Profile>>,
    Arc<flotilla_core::pipeline::Snapshot>,
);

/// Shared state of all controllers.
pub struct Context {
    /// The control plane.
    pub client: Client,
    /// Member clusters.
    pub members: Members,
    /// Tunables.
    pub settings: Settings,
    /// The served scheduler profiles (built-in, and from `SchedulerProfile`/`WasmPlugin` objects).
    pub plugins: controller::plugins::Registry,
    /// Template caches by `(apiVersion, kind)`.
    pub templates: BTreeMap<(String, String), Cached>,
    /// PropagationPolicies.
    pub pps: Cached,
    /// ClusterPropagationPolicies.
    pub cpps: Cached,
    /// OverridePolicies.
    pub ops: Cached,
    /// ClusterOverridePolicies.
    pub cops: Cached,
    /// Clusters.
    pub clusters: Cached,
    /// ResourceBindings.
    pub bindings: Cached,
    /// Works.
    pub works: Cached,
    /// `SchedulerProfile` objects.
    pub scheduler_profiles: Cached,
    /// `WasmPlugin` objects.
    pub wasm_plugins: Cached,
    /// Application failover's memory: when each binding's clusters were first seen unhealthy.
    pub app_failover: std::sync::Mutex<std::collections::HashMap<String, BTreeMap<String, i64>>>,
    /// Change notifications.
    pub events: Bus,
    /// The decision pipeline's snapshot: rebuilt when the Cluster cache or the served profiles
    /// change, shared by every decision in between.
    pub snapshot_memo: Mutex<Option<SnapshotMemo>>,
    /// Defaulted (Cluster)OverridePolicies, kept until either cache changes.
    pub override_memo: Memo<flotilla_core::overrides::OverridePolicies>,
    /// Defaulted PropagationPolicies and ClusterPropagationPolicies, kept until either cache changes.
    pub policy_memo: Memo<(
        Vec<flotilla_api::policy::PropagationPolicy>,
        Vec<flotilla_api::policy::PropagationPolicy>,
    )>,
    /// Counters.
    pub metrics: controller::Metrics,
    /// Per-object backoff of failed reconciles.
    pub backoff: controller::Backoff,
    /// Scheduling decisions in flight: one per core.
    pub deciding: Arc<tokio::sync::Semaphore>,
    /// The binding controller's Work writes in flight, over all its workers
    /// ([`controller::binding::WORK_WRITES_IN_FLIGHT`]).
    pub work_writes: tokio::sync::Semaphore,
    /// Kubernetes Events about bindings and templates.
    pub recorder: recorder::Recorder,
    /// What the binding controller last left in each binding's `FullyApplied` condition.
    pub fully_applied: Arc<controller::binding::FullyAppliedSeen>,
    /// `ResourceInterpreterCustomization` objects.
    pub customizations: Cached,
    /// The resource interpreter chain in force (customizations, webhooks, native), swapped
    /// whole when customizations change ([`controller::interpreters`]).
    pub interpreters: controller::interpreters::Slot,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// The pipeline snapshot of the cached Clusters and the served profiles (one per generation of
    /// either: every binding in between is decided against the same snapshot).
    pub fn snapshot(&self) -> Arc<flotilla_core::pipeline::Snapshot> {
        // The version is read before the cache: a change racing with the build is seen next time.
        let version = self.clusters.version();
        let profiles = self.plugins.profiles();
        let mut memo = self
            .snapshot_memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((v, p, s)) = &*memo
            && *v == version
            && Arc::ptr_eq(p, &profiles)
        {
            return Arc::clone(s);
        }
        let snapshot = Arc::new(flotilla_core::pipeline::Snapshot::new(
            typed_all(&self.clusters),
            Arc::clone(&profiles),
            self.settings.pipeline,
        ));
        for (c, cap) in snapshot.clusters().iter().zip(snapshot.capacity()) {
            if let Some(e) = cap.quota_error() {
                tracing::warn!(cluster = %c.name(), error = %e, "the cluster's ResourceQuotas are not applied");
            }
        }
        *memo = Some((version, profiles, Arc::clone(&snapshot)));
        snapshot
    }

    /// Every (Cluster)OverridePolicy, defaulted (shared until one changes).
    pub fn overrides(&self) -> Arc<flotilla_core::overrides::OverridePolicies> {
        self.override_memo
            .get(self.ops.version() + self.cops.version(), || {
                let mut namespaced: Vec<flotilla_api::policy::OverridePolicy> =
                    typed_all(&self.ops);
                let mut cluster: Vec<flotilla_api::policy::OverridePolicy> = typed_all(&self.cops);
                for o in namespaced.iter_mut().chain(cluster.iter_mut()) {
                    flotilla_core::overrides::set_defaults(o);
                }
                flotilla_core::overrides::OverridePolicies {
                    cluster,
                    namespaced,
                }
            })
    }

    /// PropagationPolicies and ClusterPropagationPolicies, defaulted as admission would (shared
    /// until one changes).
    pub fn propagation_policies(
        &self,
    ) -> Arc<(
        Vec<flotilla_api::policy::PropagationPolicy>,
        Vec<flotilla_api::policy::PropagationPolicy>,
    )> {
        self.policy_memo
            .get(self.pps.version() + self.cpps.version(), || {
                let mut pps: Vec<flotilla_api::policy::PropagationPolicy> = typed_all(&self.pps);
                let mut cpps: Vec<flotilla_api::policy::PropagationPolicy> = typed_all(&self.cpps);
                for p in pps.iter_mut().chain(cpps.iter_mut()) {
                    flotilla_core::validate::default_propagation_policy(p);
                }
                (pps, cpps)
            })
    }
}

/// Decode a cached object as a Karmada type.
pub fn typed<T: serde::de::DeserializeOwned>(o: &DynamicObject) -> Result<T, Error> {
    let what = format!(
        "{} {}",
        o.types
            .as_ref()
            .map(|t| t.kind.as_str())
            .unwrap_or("object"),
        o.metadata.name.as_deref().unwrap_or("")
    );
    serde_json::to_value(o)
        .and_then(serde_json::from_value)
        .map_err(|source| Error::Decode { what, source })
}

/// The cached objects of `cached` decoded as `T`; undecodable objects are skipped with a warning.
pub fn typed_all<T: serde::de::DeserializeOwned>(cached: &Cached) -> Vec<T> {
    cached
        .store
        .state()
        .iter()
        .filter_map(|o| match typed(o) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "skipping an undecodable object");
                None
            }
        })
        .collect()
}

/// Start a reflector for `resource` on `client`, publishing every change as `topic`.
pub fn cache(
    client: &Client,
    resource: ApiResource,
    topic: Topic,
    events: &Bus,
    tasks: &mut tokio::task::JoinSet<()>,
) -> Cached {
    cache_indexed(client, resource, topic, events, None, tasks)
}

/// [`cache`], also keeping `index` up to date.
pub fn cache_indexed(
    client: &Client,
    resource: ApiResource,
    topic: Topic,
    events: &Bus,
    index: Option<Index>,
    tasks: &mut tokio::task::JoinSet<()>,
) -> Cached {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let events = events.clone();
    let version = Arc::new(AtomicU64::new(0));
    let index = index.map(Arc::new);
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(cached_as(&resource)),
    );
    let (v, idx, reader) = (Arc::clone(&version), index.clone(), store.clone());
    // The reflector has already applied each event to the store when the hook sees it.
    tasks.spawn(publish(stream, topic, events, false, move |ev| {
        match ev {
            watcher::Event::InitDone => {
                if let Some(i) = &idx {
                    i.rebuild(&reader.state());
                }
            }
            watcher::Event::Apply(o) => {
                if let Some(i) = &idx {
                    i.apply(o);
                }
            }
            watcher::Event::Delete(o) => {
                if let Some(i) = &idx {
                    i.delete(o);
                }
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        }
        v.fetch_add(1, Ordering::AcqRel);
    }));
    Cached {
        resource,
        store,
        version,
        index,
    }
}

/// Publish every change of a member's objects of `resource` as [`Topic::Member`], keeping no copy
/// of the objects (only their changes matter to the control plane), the objects of the first
/// list too (see [`Members::watch`]).
pub(crate) fn publish_member_changes(
    client: &Client,
    resource: &ApiResource,
    events: &Bus,
    tasks: &mut tokio::task::JoinSet<()>,
) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(cached_as(resource));
    tasks.spawn(publish(stream, Topic::Member, events.clone(), true, |_| {}));
}

/// What the caches keep of an object listed or watched as `resource`: typed by that resource,
/// never by what the body carries (kube-apiserver's list responses leave `apiVersion` and `kind`
/// off the items of built-in kinds), and without managedFields (nobody's business here, and up to
/// half an object's size).
pub fn cached_as(resource: &ApiResource) -> impl FnMut(&mut DynamicObject) + Send + 'static {
    let types = kube::api::TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    };
    move |o: &mut DynamicObject| {
        o.metadata.managed_fields = None;
        o.types = Some(types.clone());
    }
}

/// Drive `stream`, calling `hook` on each event, then publishing it as `topic`: applied and
/// deleted objects as themselves; a relist (every list after the first, which is every
/// controller's starting point) as a change to anything of the topic, since changes may have
/// been missed. With `announce_first_list`, the first list's objects are published one by one
/// (for a watch started after the objects it reports on).
async fn publish<S>(
    stream: S,
    topic: Topic,
    events: Bus,
    announce_first_list: bool,
    mut hook: impl FnMut(&watcher::Event<DynamicObject>),
) where
    S: futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut listed = false;
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                // A refusal does not go away by retrying: it is the deployment's RBAC, said
                // loudly (once per backoff round) rather than stalling the controllers silently.
                if forbidden(&e) {
                    tracing::error!(error = %e, ?topic, "listing or watching is forbidden; the controllers' RBAC must grant get, list and watch on it; retrying");
                } else {
                    tracing::debug!(error = %e, "watch error; retrying");
                }
                continue;
            }
        };
        hook(&ev);
        match ev {
            watcher::Event::InitApply(o) if announce_first_list && !listed => {
                events.send(Change {
                    topic,
                    object: Some(Arc::new(o)),
                    deleted: false,
                });
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
            watcher::Event::InitDone => {
                if listed {
                    events.send(Change::any(topic));
                }
                listed = true;
            }
            watcher::Event::Apply(o) => events.send(Change {
                topic,
                object: Some(Arc::new(o)),
                deleted: false,
            }),
            watcher::Event::Delete(o) => events.send(Change {
                topic,
                object: Some(Arc::new(o)),
                deleted: true,
            }),
        }
    }
}

/// Whether a watcher error is the API server refusing the request (403).
fn forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 403,
        watcher::Error::WatchError(s) => s.code == 403,
        _ => false,
    }
}

/// Running controllers; dropping this stops them.
#[derive(Debug)]
pub struct Running {
    /// The shared state.
    pub context: Arc<Context>,
    /// Every task.
    pub tasks: tokio::task::JoinSet<()>,
}

/// Start the caches and every controller against `client` (the control plane) and `members`.
///
/// # Errors
/// Fails when a cache cannot complete its initial list.
pub async fn start(client: Client, members: Members, settings: Settings) -> Result<Running, Error> {
    // Custom kinds' plurals come from the server, as kubectl's do.
    if let Err(e) = discover(&client).await {
        tracing::warn!(error = %e, "API discovery failed; resource names fall back to Kubernetes' pluralization");
    }
    let events = Bus::default();
    let mut tasks = tokio::task::JoinSet::new();
    let mut templates = BTreeMap::new();
    for (api_version, kind) in &settings.template_kinds {
        let c = cache(
            &client,
            api_resource(api_version, kind),
            Topic::Template,
            &events,
            &mut tasks,
        );
        templates.insert((api_version.clone(), kind.clone()), c);
    }
    let k = |v: &str, kind: &str| api_resource(v, kind);
    let pps = cache(
        &client,
        k("policy.karmada.io/v1alpha1", "PropagationPolicy"),
        Topic::Propagation,
        &events,
        &mut tasks,
    );
    let cpps = cache(
        &client,
        k("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy"),
        Topic::Propagation,
        &events,
        &mut tasks,
    );
    let ops = cache(
        &client,
        k("policy.karmada.io/v1alpha1", "OverridePolicy"),
        Topic::Override,
        &events,
        &mut tasks,
    );
    let cops = cache(
        &client,
        k("policy.karmada.io/v1alpha1", "ClusterOverridePolicy"),
        Topic::Override,
        &events,
        &mut tasks,
    );
    let clusters = cache(
        &client,
        k("cluster.karmada.io/v1alpha1", "Cluster"),
        Topic::Cluster,
        &events,
        &mut tasks,
    );
    let bindings = cache(
        &client,
        k("work.karmada.io/v1alpha2", "ResourceBinding"),
        Topic::Binding,
        &events,
        &mut tasks,
    );
    let works = cache_indexed(
        &client,
        k("work.karmada.io/v1alpha1", "Work"),
        Topic::Work,
        &events,
        Some(Index::new(controller::binding::work_binding_id)),
        &mut tasks,
    );
    let scheduler_profiles = cache(
        &client,
        k(controller::plugins::API_VERSION, "SchedulerProfile"),
        Topic::Plugin,
        &events,
        &mut tasks,
    );
    let wasm_plugins = cache(
        &client,
        k(controller::plugins::API_VERSION, "WasmPlugin"),
        Topic::Plugin,
        &events,
        &mut tasks,
    );
    let customizations = cache(
        &client,
        k(
            flotilla_api::interpreter::CONFIG_API_VERSION,
            flotilla_api::interpreter::CUSTOMIZATION_KIND,
        ),
        Topic::Interpreter,
        &events,
        &mut tasks,
    );
    let all: Vec<&Cached> = templates
        .values()
        .chain([
            &customizations,
            &pps,
            &cpps,
            &ops,
            &cops,
            &clusters,
            &bindings,
            &works,
            &scheduler_profiles,
            &wasm_plugins,
        ])
        .collect();
    for c in all {
        c.store
            .wait_until_ready()
            .await
            .map_err(|_| Error::CacheStopped)?;
    }
    let plugins = controller::plugins::Registry::new(settings.backends.clone());
    let recorder = recorder::Recorder::new(client.clone(), "flotilla-controller-manager");
    let ctx = Arc::new(Context {
        recorder,
        fully_applied: Arc::default(),
        client,
        members,
        settings,
        plugins,
        templates,
        pps,
        cpps,
        ops,
        cops,
        clusters,
        bindings,
        works,
        scheduler_profiles,
        wasm_plugins,
        customizations,
        interpreters: controller::interpreters::Slot::default(),
        app_failover: std::sync::Mutex::default(),
        events,
        snapshot_memo: Mutex::new(None),
        override_memo: Memo::default(),
        policy_memo: Memo::default(),
        metrics: controller::Metrics::default(),
        backoff: controller::Backoff::default(),
        deciding: Arc::new(tokio::sync::Semaphore::new(
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
        )),
        work_writes: tokio::sync::Semaphore::new(controller::binding::WORK_WRITES_IN_FLIGHT),
    });
    controller::spawn_all(&ctx, &mut tasks);
    Ok(Running {
        context: ctx,
        tasks,
    })
}

/// What [`start_embedded`] runs: `flotilla up`'s members and controllers.
#[derive(Debug, Clone, Default)]
pub struct Embedded {
    /// Simulated members `member1..memberN`.
    pub members: usize,
    /// The capacity each simulated member reports.
    pub capacity: members::Capacity,
    /// Controller tunables.
    pub settings: Settings,
    /// The server's bearer token, when it requires one (see [`client::token_from_kubeconfig`]).
    pub token: Option<String>,
}

/// Register `opts.members` simulated members on the API server `router` serves and start every
/// controller against it, in process (no sockets). The server itself is the caller's (`flotilla
/// up` embeds one); anything that serves the Kubernetes API as an `axum::Router` will do.
///
/// # Errors
/// Fails when a member cannot be registered or a cache cannot list.
pub async fn start_embedded(router: axum::Router, opts: Embedded) -> Result<Running, Error> {
    let token = opts.token.as_deref();
    let control = client::in_process(router.clone(), None, token);
    let names = members::names(opts.members);
    members::register_all(&router, &names, token, &opts.capacity).await?;
    start(
        control,
        Members::simulated(&router, &names, token),
        opts.settings,
    )
    .await
}

#[cfg(test)]
mod bus_tests {
    use super::*;
    use controller::Targets;

    fn key(name: &str) -> (String, String) {
        ("ns".to_owned(), name.to_owned())
    }

    /// A subscription whose mapper asks for `a` soon on Work changes and for `b` at once on
    /// Template changes.
    fn subscription(bus: &Bus) -> Subscription {
        bus.subscribe(Box::new(|c: &Change| match c.topic {
            Topic::Work => Targets::Soon(vec![key("a")]),
            Topic::Template => Targets::Objects(vec![key("b")]),
            _ => Targets::Nothing,
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn soon_requests_in_one_window_are_one_recheck() {
        let bus = Bus::default();
        let sub = subscription(&bus);
        let started = tokio::time::Instant::now();
        for _ in 0..50 {
            bus.send(Change::any(Topic::Work));
            tokio::time::advance(std::time::Duration::from_millis(1)).await;
        }
        assert_eq!(sub.next().await, Targets::Objects(vec![key("a")]));
        let quiet = std::time::Duration::from_millis(49) + controller::COALESCE_QUIET;
        assert_eq!(
            started.elapsed(),
            quiet,
            "released once requests stopped for the quiet time"
        );
        let lone = tokio::time::Instant::now();
        bus.send(Change::any(Topic::Work));
        let next = tokio::time::timeout(controller::COALESCE_WINDOW * 2, sub.next()).await;
        assert_eq!(
            next.ok(),
            Some(Targets::Objects(vec![key("a")])),
            "a later request is served on its own"
        );
        assert_eq!(lone.elapsed(), controller::COALESCE_QUIET);
    }

    #[tokio::test(start_paused = true)]
    async fn a_storm_of_soon_requests_is_served_within_the_window() {
        let bus = Bus::default();
        let sub = subscription(&bus);
        let started = tokio::time::Instant::now();
        let storm = async {
            loop {
                bus.send(Change::any(Topic::Work));
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            got = sub.next() => assert_eq!(got, Targets::Objects(vec![key("a")])),
            () = storm => unreachable!(),
        }
        assert_eq!(started.elapsed(), controller::COALESCE_WINDOW);
    }

    #[tokio::test(start_paused = true)]
    async fn an_immediate_request_takes_waiting_ones_along() {
        let bus = Bus::default();
        let sub = subscription(&bus);
        bus.send(Change::any(Topic::Work));
        bus.send(Change::any(Topic::Template));
        let started = tokio::time::Instant::now();
        let Targets::Objects(mut got) = sub.next().await else {
            panic!("objects expected");
        };
        got.sort();
        assert_eq!(got, vec![key("a"), key("b")]);
        assert!(started.elapsed() < controller::COALESCE_WINDOW);
    }
}
