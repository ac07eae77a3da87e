//! The controllers, one module per kind they own, each with `reconcile` and `error_policy`.

pub mod binding;
pub mod cluster;
pub mod cronfederatedhpa;
pub mod dependencies;
pub mod detector;
pub mod execution;
pub mod federatedhpa;
pub mod interpreters;
pub mod metrics;
pub mod objects;
pub mod plugins;
pub mod schedule_queue;
pub mod scheduler;
pub mod simulator;
pub mod status;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use crate::{Cached, Change, Context, Error, Subscription, Topic};
use flotilla_api::labels;
use futures::{Stream, StreamExt as _};
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};

pub use metrics::{BUCKETS, Histogram, Id, Metrics, NAMES, RESULTS};

/// Serve `GET /metrics` (Prometheus text) for `ctx` on `listener` until the task is aborted,
/// and `GET /healthz` and `/readyz` (`ok` while the process serves; the liveness and readiness
/// probes of the Helm chart).
pub fn serve_metrics(
    listener: tokio::net::TcpListener,
    ctx: Arc<Context>,
) -> tokio::task::JoinHandle<()> {
    let ok = || async { "ok" };
    let router = axum::Router::new()
        .route("/healthz", axum::routing::get(ok))
        .route("/readyz", axum::routing::get(ok))
        .route(
            "/metrics",
            axum::routing::get(move || {
                let ctx = ctx.clone();
                async move {
                    let mut text = ctx.metrics.render();
                    ctx.plugins.metrics().render(&mut text);
                    ctx.recorder.counts().render(&mut text);
                    metrics::render_sources(&mut text);
                    (
                        [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                        text,
                    )
                }
            }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    })
}

/// What one change means for one controller.
#[derive(Debug, PartialEq, Eq)]
pub enum Targets {
    /// Nothing to re-check.
    Nothing,
    /// Re-check every object the controller owns.
    All,
    /// Re-check these `(namespace, name)`s.
    Objects(Vec<(String, String)>),
    /// Re-check these `(namespace, name)`s once requests stop coming for [`COALESCE_QUIET`], and
    /// within [`COALESCE_WINDOW`] at the latest: however many changes ask for one of them
    /// meanwhile, it is re-checked once (a storm of Work status updates is one status
    /// aggregation of their binding, not one per Work). Anything asked for at once takes these
    /// along.
    Soon(Vec<(String, String)>),
}

/// How long [`Targets::Soon`] requests wait, at most, for others to join them.
pub const COALESCE_WINDOW: Duration = Duration::from_millis(250);

/// How long [`Targets::Soon`] requests wait after the last of them: a lone change is served
/// after this, a storm when it has died down (or after [`COALESCE_WINDOW`]). The Work status
/// updates of one binding's apply come a millisecond or so apart while they last.
pub const COALESCE_QUIET: Duration = Duration::from_millis(50);

/// Maps a change to the objects a controller must re-check (may keep state between changes).
pub type Mapper = Box<dyn FnMut(&Change) -> Targets + Send>;

/// The reconcile requests of `subscription`, for a controller of `resource` whose objects are in
/// `store` (for [`Targets::All`]).
pub fn mapped_triggers(
    subscription: Subscription,
    store: Store<DynamicObject>,
    resource: ApiResource,
) -> impl Stream<Item = ObjectRef<DynamicObject>> + Send + 'static {
    let subscription = Arc::new(subscription);
    futures::stream::unfold(subscription, |s| async move {
        let t = s.next().await;
        Some((t, s))
    })
    .flat_map(move |targets| {
        let refs: Vec<ObjectRef<DynamicObject>> = match targets {
            Targets::Nothing => Vec::new(),
            Targets::All => store
                .state()
                .iter()
                .map(|o| ObjectRef::from_obj_with(&**o, resource.clone()))
                .collect(),
            Targets::Objects(objects) | Targets::Soon(objects) => objects
                .into_iter()
                .map(|(ns, name)| {
                    let r = ObjectRef::new_with(&name, resource.clone());
                    if ns.is_empty() { r } else { r.within(&ns) }
                })
                .collect(),
        };
        futures::stream::iter(refs)
    })
}

/// Re-check everything on `topics`, nothing otherwise.
pub fn all_on(topics: &'static [Topic]) -> Mapper {
    Box::new(move |c: &Change| {
        if topics.contains(&c.topic) {
            Targets::All
        } else {
            Targets::Nothing
        }
    })
}

/// The annotations `namespace_key`/`name_key` of a change's object as a target; every object
/// when the change is not about one object.
fn annotated(c: &Change, namespace_key: &str, name_key: &str) -> Targets {
    let Some(o) = &c.object else {
        return Targets::All;
    };
    let a = o.metadata.annotations.as_ref();
    match (
        a.and_then(|a| a.get(namespace_key)),
        a.and_then(|a| a.get(name_key)),
    ) {
        (Some(ns), Some(name)) => Targets::Objects(vec![(ns.clone(), name.clone())]),
        _ => Targets::Nothing,
    }
}

/// A member object's change re-checks its Work (the `work.karmada.io/namespace`/`name`
/// annotations the execution controller writes on everything it applies).
pub fn work_of_member(c: &Change) -> Targets {
    if c.topic != Topic::Member {
        return Targets::Nothing;
    }
    annotated(c, labels::WORK_NAMESPACE, labels::WORK_NAME)
}

/// What of a Cluster the scheduler and the binding controller depend on: labels, spec,
/// deletion, API enablements and the conditions' status (not heartbeats or resource summaries,
/// which Karmada does not reschedule on either).
fn cluster_fingerprint(o: &DynamicObject) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let status = o.data.get("status");
    let conditions: Vec<(
        Option<&serde_json::Value>,
        Option<&serde_json::Value>,
        Option<&serde_json::Value>,
    )> = status
        .and_then(|s| s.get("conditions"))
        .and_then(serde_json::Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| (c.get("type"), c.get("status"), c.get("reason")))
                .collect()
        })
        .unwrap_or_default();
    let relevant = serde_json::json!({
        "labels": o.metadata.labels,
        "deleting": o.metadata.deletion_timestamp.is_some(),
        "spec": o.data.get("spec"),
        "apiEnablements": status.and_then(|s| s.get("apiEnablements")),
        "conditions": conditions,
    });
    let mut h = std::collections::hash_map::DefaultHasher::new();
    relevant.to_string().hash(&mut h);
    h.finish()
}

/// Which objects changed in what a fingerprint covers, since they were last seen.
struct Seen {
    fingerprint: Relevant,
    seen: std::collections::HashMap<(String, String), u64>,
}

impl Seen {
    fn new(fingerprint: Relevant) -> Self {
        Seen {
            fingerprint,
            seen: std::collections::HashMap::new(),
        }
    }

    /// Whether `c` concerns what the fingerprint covers: a change to anything, a deletion, an
    /// object not seen before or with a new fingerprint (or none).
    fn changed(&mut self, c: &Change) -> bool {
        self.changed_unless_new(c, |_| true)
    }

    /// [`Seen::changed`], except that an object seen for the first time counts only when `news`
    /// says so of it.
    fn changed_unless_new(&mut self, c: &Change, news: impl Fn(&DynamicObject) -> bool) -> bool {
        let Some(o) = &c.object else { return true };
        let key = crate::object_key(o);
        if c.deleted {
            self.seen.remove(&key);
            return true;
        }
        match (self.fingerprint)(o) {
            None => true,
            Some(fp) => match self.seen.insert(key, fp) {
                None => news(o),
                Some(before) => before != fp,
            },
        }
    }
}

/// Cluster changes that matter for placement or rendering (see [`cluster_fingerprint`]).
fn cluster_changes() -> Seen {
    Seen::new(|o| Some(cluster_fingerprint(o)))
}

/// What of a Work its binding depends on: its status (aggregated into the binding) and whether it
/// is going away. Its spec is the binding controller's own write, its finalizer the execution
/// controller's.
fn work_changes() -> Seen {
    Seen::new(|o| {
        Some(hash_of((
            o.data.get("status").map(serde_json::Value::to_string),
            o.metadata.deletion_timestamp.is_some(),
        )))
    })
}

/// The scheduler re-checks every binding when a Cluster changes in a way that matters, or the
/// served profiles were swapped.
fn scheduler_mapper() -> Mapper {
    let mut clusters = cluster_changes();
    Box::new(move |c: &Change| match c.topic {
        Topic::Profiles => Targets::All,
        Topic::Cluster if clusters.changed(c) => Targets::All,
        _ => Targets::Nothing,
    })
}

/// Whether `c` is an interpreter chain swap by a customization targeting `api_version`/`kind`.
fn retargets(c: &Change, api_version: &str, kind: &str) -> bool {
    c.topic == Topic::InterpreterChain
        && c.object.as_ref().is_none_or(|o| {
            o.data
                .pointer("/spec/target/apiVersion")
                .and_then(serde_json::Value::as_str)
                == Some(api_version)
                && o.data
                    .pointer("/spec/target/kind")
                    .and_then(serde_json::Value::as_str)
                    == Some(kind)
        })
}

/// The detector re-checks every template of its kind when a policy changes, and when a
/// customization targeting that kind swapped the interpreter chain (its replicas, components
/// and dependencies are interpreted again), as Karmada's interpreter configuration change does.
fn detector_mapper(resource: &ApiResource) -> Mapper {
    let (api_version, kind) = (resource.api_version.clone(), resource.kind.clone());
    Box::new(move |c: &Change| match c.topic {
        Topic::Propagation => Targets::All,
        Topic::InterpreterChain if retargets(c, &api_version, &kind) => Targets::All,
        _ => Targets::Nothing,
    })
}

/// The binding controller re-checks a template's binding, a Work's binding, a binding whose
/// `FullyApplied` condition someone else changed, and everything on override, profile and
/// relevant Cluster changes.
fn binding_mapper(bindings: Cached, fully_applied: Arc<binding::FullyAppliedSeen>) -> Mapper {
    let mut clusters = cluster_changes();
    let mut works = work_changes();
    let mut templates = Seen::new(spec_and_annotations);
    Box::new(move |c: &Change| match c.topic {
        // A customization change re-renders (ReviseReplica) and re-aggregates every binding.
        Topic::Override | Topic::Profiles | Topic::InterpreterChain => Targets::All,
        Topic::Cluster if clusters.changed(c) => Targets::All,
        // The scheduler rewrites the binding's whole condition list; one it wrote from a copy
        // that predates the controller's last `FullyApplied` drops or reverts that condition,
        // and this puts it back. The controller's own writes are not news.
        Topic::Binding => match &c.object {
            Some(o) if !c.deleted => {
                if fully_applied.stale(o) {
                    Targets::Objects(vec![crate::object_key(o)])
                } else {
                    Targets::Nothing
                }
            }
            Some(o) => {
                fully_applied.forget(o);
                Targets::Nothing
            }
            None => Targets::Nothing,
        },
        // Work status is aggregated: a burst of Work updates is one aggregation. A Work gone is
        // handled at once (it may have to be put back). A Work seen first without a status is
        // one the controller has just written: its reconcile counted it already
        // (`binding::reconcile` aggregates the Works it creates as not yet applied).
        Topic::Work if works.changed_unless_new(c, |o| o.data.get("status").is_some()) => {
            match annotated(c, labels::RB_NAMESPACE, labels::RB_NAME) {
                Targets::Objects(v) if !c.deleted => Targets::Soon(v),
                other => other,
            }
        }
        // What renders the Works (spec-like content, labels, annotations) or deletes the
        // binding; not the status this controller aggregates into the template itself.
        Topic::Template if !templates.changed(c) => Targets::Nothing,
        // A binding not created yet is reconciled when it is (the detector's claim of a new
        // template comes before it); one not scheduled yet has nothing to render, and its
        // scheduling takes the deferred reconcile along.
        Topic::Template => match &c.object {
            Some(o) => match &o.types {
                Some(t) => {
                    let namespace = o.metadata.namespace.clone().unwrap_or_default();
                    let name = flotilla_core::detector::binding_name(
                        &t.kind,
                        o.metadata.name.as_deref().unwrap_or(""),
                    );
                    match bindings.get(&namespace, &name) {
                        None if !c.deleted => Targets::Nothing,
                        Some(b) if binding::unscheduled(&b) => {
                            Targets::Soon(vec![(namespace, name)])
                        }
                        _ => Targets::Objects(vec![(namespace, name)]),
                    }
                }
                None => Targets::All,
            },
            None => Targets::All,
        },
        _ => Targets::Nothing,
    })
}

/// Per-object exponential backoff after failed reconciles, as client-go's default per-item rate
/// limiter (the one Karmada's controllers use): 5 ms, doubling with each consecutive failure, at
/// most 1000 s; a successful reconcile resets it.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: std::sync::Mutex<std::collections::HashMap<(Id, String, String), u32>>,
}

impl Backoff {
    /// The first delay.
    pub const BASE: Duration = Duration::from_millis(5);
    /// The longest delay.
    pub const MAX: Duration = Duration::from_secs(1000);

    /// Record a failure of controller `which` on `namespace/name`; the delay before its retry.
    pub fn failed(&self, which: Id, namespace: &str, name: &str) -> Duration {
        let mut f = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = f
            .entry((which, namespace.to_owned(), name.to_owned()))
            .or_insert(0);
        *n = n.saturating_add(1);
        Self::delay(*n)
    }

    /// Forget the failures of controller `which` on `namespace/name`.
    pub fn succeeded(&self, which: Id, namespace: &str, name: &str) {
        let mut f = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !f.is_empty() {
            f.remove(&(which, namespace.to_owned(), name.to_owned()));
        }
    }

    /// The delay after `failures` consecutive failures.
    pub fn delay(failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        Self::BASE.saturating_mul(1 << doublings).min(Self::MAX)
    }
}

/// Requeue after a failure of controller `which`, backing off per object ([`Backoff`]).
pub fn error_policy(which: Id, obj: &DynamicObject, err: &Error, ctx: &Context) -> Action {
    let namespace = obj.metadata.namespace.as_deref().unwrap_or("");
    let name = obj.metadata.name.as_deref().unwrap_or("");
    let delay = ctx.backoff.failed(which, namespace, name);
    tracing::warn!(controller = which.name(), namespace, name, error = %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

type ReconcileFn = fn(
    Arc<DynamicObject>,
    Arc<Context>,
) -> futures::future::BoxFuture<'static, Result<Action, Error>>;

/// Reconciles in flight per controller: bounds the memory a burst of changes can take (each
/// reconcile holds its object, rendered Works and request bodies) without starving anyone.
pub const CONCURRENCY: u16 = 32;

/// What of an object makes its own controller look at it again: a hash of the parts it reacts to.
pub type Relevant = fn(&DynamicObject) -> Option<u64>;

fn hash_of(parts: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher as _;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// Spec (generation), deletion, finalizers and labels: not status, which the controller itself writes.
pub fn spec_changes(o: &DynamicObject) -> Option<u64> {
    let m = &o.metadata;
    // kube-apiserver keeps no generation for kinds such as ConfigMap and Secret: their content
    // (everything but metadata and status) stands in for it.
    let content = m.generation.is_none().then(|| {
        o.data
            .as_object()
            .map(|d| {
                d.iter()
                    .filter(|(k, _)| k.as_str() != "status" && k.as_str() != "metadata")
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    });
    Some(hash_of((
        m.generation,
        m.deletion_timestamp.is_some(),
        &m.finalizers,
        &m.labels,
        content,
    )))
}

/// [`spec_changes`] and the annotations (a template's claim and policy selection).
pub fn spec_and_annotations(o: &DynamicObject) -> Option<u64> {
    Some(hash_of((spec_changes(o), &o.metadata.annotations)))
}

/// The scheduler: [`spec_changes`], and every change of a binding whose failover decisions read
/// its status (graceful eviction tasks to assess, application failover to watch).
pub fn scheduling_changes(o: &DynamicObject) -> Option<u64> {
    let spec = o.data.get("spec");
    let tasks = spec
        .and_then(|s| s.get("gracefulEvictionTasks"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let app_failover = spec
        .and_then(|s| s.pointer("/failover/application"))
        .is_some_and(|a| !a.is_null());
    let rv = if tasks || app_failover {
        o.metadata.resource_version.clone()
    } else {
        None
    };
    Some(hash_of((spec_changes(o), rv)))
}

/// `mapper` for a controller of the objects of `cached`, whose changes are published as `topic`:
/// a change of one of them re-checks it when `relevant` says something it reacts to changed
/// (not the status the controller writes itself), a relist re-checks all of them. Such a change
/// of an object `defer` holds for waits out the coalescing window ([`Targets::Soon`]) unless
/// something else asks for it at once.
fn own(
    cached: &Cached,
    topic: Topic,
    relevant: Relevant,
    defer: fn(&DynamicObject) -> bool,
    mut mapper: Mapper,
) -> Mapper {
    let (api_version, kind) = (
        cached.resource.api_version.clone(),
        cached.resource.kind.clone(),
    );
    let mut seen = Seen::new(relevant);
    Box::new(move |c: &Change| {
        if c.topic != topic {
            return mapper(c);
        }
        let Some(o) = &c.object else {
            return Targets::All;
        };
        // Topics can span kinds (every template kind is `Template`).
        if o.types
            .as_ref()
            .is_some_and(|t| t.api_version != api_version || t.kind != kind)
        {
            return mapper(c);
        }
        let key = crate::object_key(o);
        // A deleted object is gone from the cache: nothing of its own to re-check.
        let mine = seen.changed(c) && !c.deleted;
        let later = mine && defer(o);
        match (mine, mapper(c)) {
            (false, other) => other,
            (true, Targets::All) => Targets::All,
            (true, Targets::Nothing) if later => Targets::Soon(vec![key]),
            (true, Targets::Nothing) => Targets::Objects(vec![key]),
            (true, Targets::Soon(mut v)) if later => {
                v.push(key);
                Targets::Soon(v)
            }
            (true, Targets::Objects(mut v) | Targets::Soon(mut v)) => {
                v.push(key);
                Targets::Objects(v)
            }
        }
    })
}

/// One controller, declared: what it reconciles, which changes of its own objects it reacts to,
/// and which other changes wake which of its objects (kube-runtime's `for`/`watches`, as a table).
struct Declared {
    id: Id,
    /// The objects it reconciles (each template kind's cache for the detector).
    objects: fn(&Context) -> Vec<&Cached>,
    /// The topic its objects' changes are published on.
    topic: Topic,
    /// What of its own objects it reacts to ([`Relevant`]).
    relevant: Relevant,
    /// Which of its own objects' changes wait out the coalescing window ([`own`]).
    defer: fn(&DynamicObject) -> bool,
    /// Other changes → the objects to re-check ([`Mapper`]), given the kind of the objects.
    watches: fn(&Context, &ApiResource) -> Mapper,
    reconcile: ReconcileFn,
}

/// The controllers that reconcile cached objects (the scheduler runs its own priority queue:
/// [`schedule_queue`]).
const CONTROLLERS: [Declared; 4] = [
    Declared {
        id: Id::Detector,
        objects: |ctx| ctx.templates.values().collect(),
        topic: Topic::Template,
        relevant: spec_and_annotations,
        defer: |_| false,
        watches: |_, r| detector_mapper(r),
        reconcile: |o, c| Box::pin(detector::reconcile(o, c)),
    },
    Declared {
        id: Id::Binding,
        objects: |ctx| vec![&ctx.bindings],
        topic: Topic::Binding,
        relevant: spec_changes,
        // A binding not scheduled yet has nothing to render (its scheduling comes within
        // milliseconds and takes the deferred reconcile along).
        defer: binding::unscheduled,
        watches: |ctx, _| binding_mapper(ctx.bindings.clone(), ctx.fully_applied.clone()),
        reconcile: |o, c| Box::pin(binding::reconcile(o, c)),
    },
    Declared {
        id: Id::Execution,
        objects: |ctx| vec![&ctx.works],
        topic: Topic::Work,
        relevant: spec_changes,
        defer: |_| false,
        watches: |_, _| Box::new(work_of_member),
        reconcile: |o, c| Box::pin(execution::reconcile(o, c)),
    },
    Declared {
        id: Id::Cluster,
        objects: |ctx| vec![&ctx.clusters],
        topic: Topic::Cluster,
        relevant: |o| o.metadata.resource_version.as_deref().map(hash_of),
        defer: |_| false,
        watches: |_, _| all_on(&[]),
        reconcile: |o, c| Box::pin(cluster::reconcile(o, c)),
    },
];

/// Run controller `d` over the objects of `cached` (all of them first), then over those its
/// [`Declared::watches`] (wrapped in [`own`]) name for each change. The controller reads the
/// shared cache: no watch or copy of its own.
fn run(tasks: &mut tokio::task::JoinSet<()>, ctx: &Arc<Context>, d: &Declared, cached: &Cached) {
    // Subscribed before anything runs, so no change made from now on is missed.
    let events = ctx.events.subscribe_with(
        own(
            cached,
            d.topic,
            d.relevant,
            d.defer,
            (d.watches)(ctx, &cached.resource),
        ),
        true,
    );
    let ctx = ctx.clone();
    let (store, resource) = (cached.store.clone(), cached.resource.clone());
    let (which, reconcile) = (d.id, d.reconcile);
    tasks.spawn(async move {
        let controller = Controller::for_stream_with(futures::stream::pending(), store.clone(), resource.clone()).with_config(Config::default().concurrency(CONCURRENCY));
        let trigger = mapped_triggers(events, store, resource);
        controller
            .reconcile_on(trigger)
            .run(
                move |obj, ctx: Arc<Context>| {
                    let started = std::time::Instant::now();
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    let namespace = obj.metadata.namespace.clone().unwrap_or_default();
                    let fut = reconcile(obj, ctx.clone());
                    async move {
                        let span = tracing::debug_span!("reconcile", controller = which.name(), namespace = %namespace, name = %name);
                        let res = tracing::Instrument::instrument(fut, span).await;
                        ctx.metrics.record(which, started.elapsed(), res.is_ok());
                        if res.is_ok() {
                            ctx.backoff.succeeded(which, &namespace, &name);
                        }
                        res
                    }
                },
                move |obj, err, ctx| error_policy(which, &obj, err, &ctx),
                ctx,
            )
            .for_each(|_| futures::future::ready(()))
            .await;
    });
}

/// Spawn every controller: the declared ones, then the simulator, the cluster status controller
/// and the plugin controller (loops of their own).
pub fn spawn_all(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    for d in &CONTROLLERS {
        for cached in (d.objects)(ctx) {
            run(tasks, ctx, d, cached);
        }
    }
    schedule_queue::spawn(ctx, tasks);
    simulator::spawn(ctx, tasks);
    status::spawn(ctx, tasks);
    federatedhpa::spawn(ctx, tasks);
    cronfederatedhpa::spawn(ctx, tasks);
    plugins::spawn(ctx, tasks);
    webhook::spawn(ctx, tasks);
    dependencies::spawn(ctx, tasks);
    interpreters::spawn(ctx, tasks);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: serde_json::Value) -> Arc<DynamicObject> {
        Arc::new(serde_json::from_value(v).expect("a valid object"))
    }

    /// A binding cache holding `objects`.
    fn bindings(objects: &[serde_json::Value]) -> Cached {
        let resource = crate::api_resource("work.karmada.io/v1alpha2", "ResourceBinding");
        let mut writer = kube::runtime::reflector::store::Writer::new(resource.clone());
        for o in objects {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(
                (*object(o.clone())).clone(),
            ));
        }
        Cached {
            store: writer.as_reader(),
            resource,
            version: Arc::default(),
            index: None,
        }
    }

    fn change(topic: Topic, v: serde_json::Value) -> Change {
        Change {
            topic,
            object: Some(object(v)),
            deleted: false,
        }
    }

    fn cluster(labels: serde_json::Value, ready: &str, summary_cpu: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "member1", "labels": labels},
            "spec": {"syncMode": "Push"},
            "status": {
                "conditions": [{"type": "Ready", "status": ready, "reason": "ClusterReady", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "resourceSummary": {"allocatable": {"cpu": summary_cpu}},
            },
        })
    }

    #[test]
    fn cluster_changes_reschedule_only_when_placement_inputs_change() {
        let mut m = scheduler_mapper();
        assert_eq!(
            m(&change(
                Topic::Cluster,
                cluster(serde_json::json!({"a": "1"}), "True", "8")
            )),
            Targets::All,
            "a new cluster"
        );
        assert_eq!(
            m(&change(
                Topic::Cluster,
                cluster(serde_json::json!({"a": "1"}), "True", "6")
            )),
            Targets::Nothing,
            "only the resource summary moved"
        );
        assert_eq!(
            m(&change(
                Topic::Cluster,
                cluster(serde_json::json!({"a": "2"}), "True", "6")
            )),
            Targets::All,
            "a label changed"
        );
        assert_eq!(
            m(&change(
                Topic::Cluster,
                cluster(serde_json::json!({"a": "2"}), "False", "6")
            )),
            Targets::All,
            "Ready flipped"
        );
        let mut gone = change(
            Topic::Cluster,
            cluster(serde_json::json!({"a": "2"}), "False", "6"),
        );
        gone.deleted = true;
        assert_eq!(m(&gone), Targets::All, "deleted");
        assert_eq!(m(&Change::any(Topic::Profiles)), Targets::All);
        assert_eq!(
            m(&change(
                Topic::Work,
                serde_json::json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "w"}})
            )),
            Targets::Nothing
        );
    }

    #[test]
    fn content_stands_in_for_a_missing_generation() {
        let cm = |data: &str, generation: Option<i64>| {
            let mut v = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "default"}, "data": {"k": data}});
            if let Some(g) = generation {
                v["metadata"]["generation"] = serde_json::json!(g);
            }
            object(v)
        };
        assert_ne!(
            spec_changes(&cm("1", None)),
            spec_changes(&cm("2", None)),
            "kube-apiserver keeps no generation for ConfigMaps: their data counts"
        );
        assert_eq!(
            spec_changes(&cm("1", Some(1))),
            spec_changes(&cm("2", Some(1))),
            "with a generation, the generation counts"
        );
    }

    #[test]
    fn works_templates_and_member_objects_map_to_their_owners() {
        let scheduled = |namespace: &str, name: &str| {
            serde_json::json!({
                "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusters": [{"name": "member1"}]},
            })
        };
        let mut pending = scheduled("web", "pending-deployment");
        pending["spec"]["clusters"] = serde_json::json!([]);
        let mut b = binding_mapper(
            bindings(&[scheduled("web", "nginx-deployment"), pending]),
            Arc::default(),
        );
        let work = serde_json::json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "nginx-687f7fb96f", "namespace": "karmada-es-member1",
                         "annotations": {labels::RB_NAMESPACE: "default", labels::RB_NAME: "nginx-deployment"}},
        });
        assert_eq!(
            b(&change(Topic::Work, work.clone())),
            Targets::Nothing,
            "a Work created without a status: the reconcile that wrote it counted it"
        );
        let mut other = work.clone();
        other["metadata"]["name"] = serde_json::json!("other");
        other["status"] =
            serde_json::json!({"conditions": [{"type": "Applied", "status": "False"}]});
        assert_eq!(
            b(&change(Topic::Work, other)),
            Targets::Soon(vec![("default".into(), "nginx-deployment".into())]),
            "a Work seen first with a status (a relisted or foreign one)"
        );
        let template = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "web", "generation": 1}});
        assert_eq!(
            b(&change(Topic::Template, template.clone())),
            Targets::Objects(vec![("web".into(), "nginx-deployment".into())])
        );
        let mut aggregated = template.clone();
        aggregated["status"] = serde_json::json!({"replicas": 2});
        assert_eq!(
            b(&change(Topic::Template, aggregated)),
            Targets::Nothing,
            "the status the binding controller aggregates into its template"
        );
        let mut scaled = template;
        scaled["metadata"]["generation"] = serde_json::json!(2);
        assert_eq!(
            b(&change(Topic::Template, scaled.clone())),
            Targets::Objects(vec![("web".into(), "nginx-deployment".into())]),
            "a spec change"
        );
        let mut unbound = scaled.clone();
        unbound["metadata"]["name"] = serde_json::json!("new");
        assert_eq!(
            b(&change(Topic::Template, unbound.clone())),
            Targets::Nothing,
            "no binding yet: its creation is the trigger"
        );
        let mut deleted = change(Topic::Template, unbound);
        deleted.deleted = true;
        assert_eq!(
            b(&deleted),
            Targets::Objects(vec![("web".into(), "new-deployment".into())]),
            "a template deleted is checked whatever the cache says"
        );
        let mut pending = scaled;
        pending["metadata"]["name"] = serde_json::json!("pending");
        assert_eq!(
            b(&change(Topic::Template, pending)),
            Targets::Soon(vec![("web".into(), "pending-deployment".into())]),
            "a binding not scheduled yet waits for its scheduling"
        );
        let finalized = serde_json::json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "nginx-687f7fb96f", "namespace": "karmada-es-member1", "finalizers": ["karmada.io/execution-controller"],
                         "annotations": {labels::RB_NAMESPACE: "default", labels::RB_NAME: "nginx-deployment"}},
        });
        assert_eq!(
            b(&change(Topic::Work, finalized.clone())),
            Targets::Nothing,
            "a finalizer added does not concern the binding"
        );
        let mut applied = finalized;
        applied["status"] =
            serde_json::json!({"conditions": [{"type": "Applied", "status": "True"}]});
        assert_eq!(
            b(&change(Topic::Work, applied.clone())),
            Targets::Soon(vec![("default".into(), "nginx-deployment".into())]),
            "status changed"
        );
        let mut gone = change(Topic::Work, applied);
        gone.deleted = true;
        assert_eq!(
            b(&gone),
            Targets::Objects(vec![("default".into(), "nginx-deployment".into())]),
            "deleted"
        );
        assert_eq!(b(&Change::any(Topic::Override)), Targets::All);
        assert_eq!(b(&Change::any(Topic::Member)), Targets::Nothing);

        let member = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default",
                         "annotations": {labels::WORK_NAMESPACE: "karmada-es-member1", labels::WORK_NAME: "nginx-687f7fb96f"}},
        });
        assert_eq!(
            work_of_member(&change(Topic::Member, member)),
            Targets::Objects(vec![(
                "karmada-es-member1".into(),
                "nginx-687f7fb96f".into()
            )])
        );
        let unmanaged = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mine", "namespace": "default"}});
        assert_eq!(
            work_of_member(&change(Topic::Member, unmanaged)),
            Targets::Nothing
        );
        assert_eq!(
            work_of_member(&Change::any(Topic::Member)),
            Targets::All,
            "a member registered or relisted"
        );
    }

    #[test]
    fn the_index_follows_applies_relabels_deletes_and_rebuilds() {
        let w = |ns: &str, name: &str, id: Option<&str>| {
            let labels = id.map_or(
                serde_json::json!({}),
                |id| serde_json::json!({labels::RB_PERMANENT_ID: id}),
            );
            object(
                serde_json::json!({"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work", "metadata": {"name": name, "namespace": ns, "labels": labels}}),
            )
        };
        let index = crate::Index::new(binding::work_binding_id);
        index.apply(&w("es-a", "x", Some("id1")));
        index.apply(&w("es-b", "x", Some("id1")));
        index.apply(&w("es-a", "y", Some("id2")));
        index.apply(&w("es-a", "z", None));
        let mut got = index.get("id1");
        got.sort();
        assert_eq!(
            got,
            vec![
                ("es-a".to_owned(), "x".to_owned()),
                ("es-b".to_owned(), "x".to_owned())
            ]
        );
        index.apply(&w("es-b", "x", Some("id2")));
        assert_eq!(index.get("id1"), vec![("es-a".to_owned(), "x".to_owned())]);
        assert_eq!(index.get("id2").len(), 2);
        index.delete(&w("es-a", "x", Some("id1")));
        assert!(index.get("id1").is_empty());
        index.rebuild(&[w("es-c", "q", Some("id3"))]);
        assert!(index.get("id2").is_empty());
        assert_eq!(index.get("id3"), vec![("es-c".to_owned(), "q".to_owned())]);
    }

    #[test]
    fn the_binding_controller_reacts_to_a_fully_applied_condition_it_did_not_leave() {
        let seen = Arc::new(binding::FullyAppliedSeen::default());
        let mut b = binding_mapper(bindings(&[]), seen.clone());
        let rb = |status: serde_json::Value| {
            serde_json::json!({
                "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": "b", "namespace": "default", "generation": 2},
                "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "b"},
                         "clusters": [{"name": "m1", "replicas": 1}]},
                "status": status,
            })
        };
        let applied = |s: &str| serde_json::json!({"type": "FullyApplied", "status": s, "reason": "r", "message": "m"});
        let scheduled = serde_json::json!({"type": "Scheduled", "status": "True"});
        let key = || Targets::Objects(vec![("default".into(), "b".into())]);
        // Not reconciled yet: its first reconcile is due anyway.
        assert_eq!(
            b(&change(
                Topic::Binding,
                rb(serde_json::json!({"conditions": [applied("False")]}))
            )),
            Targets::Nothing
        );
        let left = crate::typed::<flotilla_api::work::ResourceBinding>(&object(rb(
            serde_json::json!({"conditions": [scheduled, applied("True")]}),
        )))
        .unwrap();
        seen.record(&left, &left.status.clone().unwrap_or_default().conditions);
        assert_eq!(
            b(&change(
                Topic::Binding,
                rb(serde_json::json!({
                    "conditions": [applied("True")],
                    "aggregatedStatus": [{"clusterName": "m1", "applied": true}],
                }))
            )),
            Targets::Nothing,
            "what the controller left, aggregated status and other conditions are not news"
        );
        assert_eq!(
            b(&change(
                Topic::Binding,
                rb(serde_json::json!({"conditions": [scheduled]}))
            )),
            key(),
            "a dropped FullyApplied is"
        );
        assert_eq!(
            b(&change(
                Topic::Binding,
                rb(serde_json::json!({"conditions": [applied("False")]}))
            )),
            key(),
            "and so is one reverted from an older copy"
        );
        let mut gone = change(Topic::Binding, rb(serde_json::json!({})));
        gone.deleted = true;
        assert_eq!(b(&gone), Targets::Nothing);
        assert_eq!(
            b(&change(Topic::Binding, rb(serde_json::json!({})))),
            Targets::Nothing,
            "a deleted binding is forgotten"
        );
    }

    #[test]
    fn an_unscheduled_binding_waits_for_its_scheduling() {
        let resource = crate::api_resource("work.karmada.io/v1alpha2", "ResourceBinding");
        let cached = Cached {
            store: kube::runtime::reflector::store::Writer::new(resource.clone()).as_reader(),
            resource,
            version: Arc::default(),
            index: None,
        };
        let mut m = own(
            &cached,
            Topic::Binding,
            spec_changes,
            binding::unscheduled,
            binding_mapper(bindings(&[]), Arc::default()),
        );
        let rb = |generation: i64, clusters: serde_json::Value| {
            change(
                Topic::Binding,
                serde_json::json!({
                    "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                    "metadata": {"name": "b", "namespace": "default", "generation": generation},
                    "spec": {"clusters": clusters},
                }),
            )
        };
        let key = || vec![("default".to_owned(), "b".to_owned())];
        assert_eq!(
            m(&rb(1, serde_json::json!([]))),
            Targets::Soon(key()),
            "created, not scheduled"
        );
        assert_eq!(
            m(&rb(2, serde_json::json!([{"name": "m1", "replicas": 1}]))),
            Targets::Objects(key()),
            "scheduled: at once"
        );
        assert_eq!(
            m(&rb(3, serde_json::json!([]))),
            Targets::Soon(key()),
            "scheduled nowhere: its Works go within the window"
        );
    }

    #[test]
    fn backoff_doubles_per_object_and_resets_on_success() {
        let b = Backoff::default();
        assert_eq!(b.failed(Id::Scheduler, "ns", "a"), Duration::from_millis(5));
        assert_eq!(
            b.failed(Id::Scheduler, "ns", "a"),
            Duration::from_millis(10)
        );
        assert_eq!(
            b.failed(Id::Scheduler, "ns", "a"),
            Duration::from_millis(20)
        );
        assert_eq!(
            b.failed(Id::Binding, "ns", "a"),
            Duration::from_millis(5),
            "per controller"
        );
        assert_eq!(
            b.failed(Id::Scheduler, "ns", "b"),
            Duration::from_millis(5),
            "per object"
        );
        b.succeeded(Id::Scheduler, "ns", "a");
        assert_eq!(
            b.failed(Id::Scheduler, "ns", "a"),
            Duration::from_millis(5),
            "reset by a success"
        );
        assert_eq!(Backoff::delay(18), Duration::from_millis(5 << 17));
        assert_eq!(Backoff::delay(19), Backoff::MAX, "capped at 1000 s");
        assert_eq!(Backoff::delay(u32::MAX), Backoff::MAX);
    }

    #[test]
    fn profile_cpu_series_are_the_served_profiles_and_bounded() {
        let m = Metrics::default();
        let cpu = Some(Duration::from_millis(1));
        // No served profile by the binding's name: counted, but under no profile.
        m.record_scheduling(Duration::from_millis(2), cpu, None);
        assert_eq!(m.scheduling_cpu.count(), 1);
        assert!(
            !m.render()
                .contains("flotilla_scheduling_profile_cpu_seconds_count")
        );
        for i in 0..100 {
            m.record_scheduling(Duration::from_millis(2), cpu, Some(&format!("p{i}")));
        }
        let text = m.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("flotilla_scheduling_profile_cpu_seconds_count"))
            .count();
        assert_eq!(series, 64, "{text}");
        assert_eq!(m.scheduling_cpu.count(), 101);
    }

    #[test]
    fn metrics_render_counters_and_cumulative_histograms() {
        let m = Metrics::default();
        m.record(Id::Detector, Duration::from_micros(500), true);
        m.record(Id::Detector, Duration::from_millis(20), false);
        m.record_scheduling(
            Duration::from_millis(2),
            Some(Duration::from_millis(1)),
            Some("wasm-\"builtins\""),
        );
        let text = m.render();
        assert!(
            text.contains("flotilla_reconcile_total{controller=\"detector\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("flotilla_reconcile_errors_total{controller=\"detector\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("flotilla_reconcile_duration_seconds_bucket{controller=\"detector\",le=\"0.001\"} 1\n"), "{text}");
        assert!(text.contains("flotilla_reconcile_duration_seconds_bucket{controller=\"detector\",le=\"0.025\"} 2\n"), "{text}");
        assert!(
            text.contains("flotilla_reconcile_duration_seconds_count{controller=\"detector\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("flotilla_scheduling_duration_seconds_bucket{le=\"0.0025\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("flotilla_scheduling_duration_seconds_count 1\n"),
            "{text}"
        );
        assert!(
            text.contains("flotilla_scheduling_cpu_seconds_bucket{le=\"0.001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "flotilla_scheduling_profile_cpu_seconds_count{profile=\"wasm-\\\"builtins\\\"\"} 1\n"
            ),
            "{text}"
        );
        assert_eq!(m.reconciles_of("detector"), 2);
    }
}
