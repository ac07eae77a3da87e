//! The controllers, one module per kind they own, each with `reconcile` and `error_policy`.

pub mod binding;
pub mod detector;
pub mod execution;
pub mod scheduler;
pub mod simulator;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use tokio_stream::wrappers::BroadcastStream;

use crate::{Context, Error, Topic};

/// Reconcile counters per controller.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Reconciles, by controller index (see [`NAMES`]).
    pub reconciles: [AtomicU64; NAMES.len()],
    /// Failed reconciles.
    pub errors: [AtomicU64; NAMES.len()],
    /// Total reconcile time, microseconds.
    pub micros: [AtomicU64; NAMES.len()],
    /// Scheduling runs.
    pub schedules: AtomicU64,
    /// Total scheduling time, microseconds.
    pub schedule_micros: AtomicU64,
}

/// Controller names, as indexed in [`Metrics`].
pub const NAMES: [&str; 5] = ["detector", "scheduler", "binding", "execution", "simulator"];

impl Metrics {
    /// Count one scheduling run.
    pub fn record_scheduling(&self, elapsed: Duration) {
        self.schedules.fetch_add(1, Ordering::Relaxed);
        self.schedule_micros.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn record(&self, which: usize, elapsed: Duration, ok: bool) {
        self.reconciles[which].fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors[which].fetch_add(1, Ordering::Relaxed);
        }
        self.micros[which].fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// A stream that yields once per event on any of `topics`.
pub fn triggers(ctx: &Context, topics: &'static [Topic]) -> impl Stream<Item = ()> + Send + 'static {
    BroadcastStream::new(ctx.events.subscribe()).filter_map(move |t| {
        futures::future::ready(match t {
            Ok(t) if topics.contains(&t) => Some(()),
            Ok(_) => None,
            // Lagged: something changed that we did not see; re-check everything.
            Err(_) => Some(()),
        })
    })
}

/// Requeue after a failure.
pub fn error_policy(_obj: Arc<DynamicObject>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %err, "reconcile failed; retrying");
    Action::requeue(Duration::from_millis(500))
}

type ReconcileFn = fn(Arc<DynamicObject>, Arc<Context>) -> futures::future::BoxFuture<'static, Result<Action, Error>>;

/// Run `reconcile` over every object of `resource` reachable through `api`, also re-checking all
/// of them on `topics`.
fn run(tasks: &mut tokio::task::JoinSet<()>, ctx: &Arc<Context>, which: usize, api: Api<DynamicObject>, resource: ApiResource, topics: &'static [Topic], reconcile: ReconcileFn) {
    let trigger = triggers(ctx, topics);
    let ctx = ctx.clone();
    tasks.spawn(async move {
        Controller::new_with(api, watcher::Config::default(), resource)
            .reconcile_all_on(trigger)
            .run(
                move |obj, ctx: Arc<Context>| {
                    let started = std::time::Instant::now();
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    let namespace = obj.metadata.namespace.clone().unwrap_or_default();
                    let fut = reconcile(obj, ctx.clone());
                    async move {
                        let span = tracing::debug_span!("reconcile", controller = NAMES[which], namespace = %namespace, name = %name);
                        let res = tracing::Instrument::instrument(fut, span).await;
                        ctx.metrics.record(which, started.elapsed(), res.is_ok());
                        res
                    }
                },
                error_policy,
                ctx,
            )
            .for_each(|_| futures::future::ready(()))
            .await;
    });
}

/// Spawn every controller.
pub fn spawn_all(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    for cached in ctx.templates.values() {
        let api = Api::all_with(ctx.client.clone(), &cached.resource);
        run(tasks, ctx, 0, api, cached.resource.clone(), &[Topic::Propagation], |o, c| Box::pin(detector::reconcile(o, c)));
    }
    let rb = crate::api_resource("work.karmada.io/v1alpha2", "ResourceBinding");
    run(tasks, ctx, 1, Api::all_with(ctx.client.clone(), &rb), rb.clone(), &[Topic::Cluster], |o, c| Box::pin(scheduler::reconcile(o, c)));
    run(
        tasks,
        ctx,
        2,
        Api::all_with(ctx.client.clone(), &rb),
        rb,
        &[Topic::Template, Topic::Override, Topic::Cluster, Topic::Work],
        |o, c| Box::pin(binding::reconcile(o, c)),
    );
    let work = ctx.works.resource.clone();
    run(tasks, ctx, 3, Api::all_with(ctx.client.clone(), &work), work, &[Topic::Member], |o, c| Box::pin(execution::reconcile(o, c)));
    simulator::spawn(ctx, tasks);
}
