//! The controllers, one module per kind they own, each with `reconcile` and `error_policy`.

pub mod binding;
pub mod cluster;
pub mod detector;
pub mod execution;
pub mod plugins;
pub mod scheduler;
pub mod simulator;
pub mod status;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use tokio_stream::wrappers::BroadcastStream;

use crate::{Context, Error, Topic};

/// Upper bounds (seconds) of the latency histogram buckets.
pub const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// A latency histogram with fixed [`BUCKETS`] (counts per bucket, not cumulative) and a sum.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    count: AtomicU64,
    micros: AtomicU64,
}

impl Histogram {
    /// Record one observation.
    pub fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let i = BUCKETS.iter().position(|b| secs <= *b).unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn render(&self, name: &str, labels: &str, out: &mut String) {
        use std::fmt::Write as _;
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count());
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.micros.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count());
    }
}

/// Reconcile and scheduling metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Reconciles, by controller index (see [`NAMES`]).
    pub reconciles: [AtomicU64; NAMES.len()],
    /// Failed reconciles.
    pub errors: [AtomicU64; NAMES.len()],
    /// Reconcile durations.
    pub durations: [Histogram; NAMES.len()],
    /// Scheduling latency (the scheduler core alone).
    pub scheduling: Histogram,
    /// Scheduling attempts by result (see [`RESULTS`]).
    pub scheduling_results: [AtomicU64; RESULTS.len()],
}

/// Scheduling results, as indexed in [`Metrics::scheduling_results`].
pub const RESULTS: [&str; 3] = ["scheduled", "unschedulable", "error"];

/// Controller names, as indexed in [`Metrics`].
pub const NAMES: [&str; 6] = ["detector", "scheduler", "binding", "execution", "simulator", "cluster"];

impl Metrics {
    /// Count one scheduling run.
    pub fn record_scheduling(&self, elapsed: Duration) {
        self.scheduling.observe(elapsed);
    }

    /// Count one scheduling attempt's result (index into [`RESULTS`]).
    pub fn record_scheduling_result(&self, which: usize) {
        self.scheduling_results[which.min(RESULTS.len() - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// Scheduling attempts that ended with `result` (`scheduled`, `unschedulable`, `error`).
    pub fn scheduling_results_of(&self, result: &str) -> u64 {
        RESULTS.iter().position(|r| *r == result).map_or(0, |i| self.scheduling_results[i].load(Ordering::Relaxed))
    }

    pub(crate) fn record(&self, which: usize, elapsed: Duration, ok: bool) {
        self.reconciles[which].fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors[which].fetch_add(1, Ordering::Relaxed);
        }
        self.durations[which].observe(elapsed);
    }

    /// Reconciles of controller `name` so far.
    pub fn reconciles_of(&self, name: &str) -> u64 {
        NAMES.iter().position(|n| *n == name).map_or(0, |i| self.reconciles[i].load(Ordering::Relaxed))
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        out.push_str("# HELP flotilla_reconcile_total Reconciles per controller.\n# TYPE flotilla_reconcile_total counter\n");
        for (i, n) in NAMES.iter().enumerate() {
            let _ = writeln!(out, "flotilla_reconcile_total{{controller=\"{n}\"}} {}", self.reconciles[i].load(Ordering::Relaxed));
        }
        out.push_str("# HELP flotilla_reconcile_errors_total Failed reconciles per controller.\n# TYPE flotilla_reconcile_errors_total counter\n");
        for (i, n) in NAMES.iter().enumerate() {
            let _ = writeln!(out, "flotilla_reconcile_errors_total{{controller=\"{n}\"}} {}", self.errors[i].load(Ordering::Relaxed));
        }
        out.push_str("# HELP flotilla_reconcile_duration_seconds Reconcile duration per controller.\n# TYPE flotilla_reconcile_duration_seconds histogram\n");
        for (i, n) in NAMES.iter().enumerate() {
            self.durations[i].render("flotilla_reconcile_duration_seconds", &format!("controller=\"{n}\""), &mut out);
        }
        out.push_str("# HELP flotilla_scheduling_duration_seconds Scheduler core latency per binding.\n# TYPE flotilla_scheduling_duration_seconds histogram\n");
        self.scheduling.render("flotilla_scheduling_duration_seconds", "", &mut out);
        out.push_str("# HELP flotilla_scheduling_attempts_total Scheduling attempts by result.\n# TYPE flotilla_scheduling_attempts_total counter\n");
        for (i, r) in RESULTS.iter().enumerate() {
            let _ = writeln!(out, "flotilla_scheduling_attempts_total{{result=\"{r}\"}} {}", self.scheduling_results[i].load(Ordering::Relaxed));
        }
        out
    }
}

/// Serve `GET /metrics` (Prometheus text) for `ctx` on `listener` until the task is aborted.
pub fn serve_metrics(listener: tokio::net::TcpListener, ctx: Arc<Context>) -> tokio::task::JoinHandle<()> {
    let router = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let ctx = ctx.clone();
            async move {
                let mut text = ctx.metrics.render();
                ctx.plugins.metrics().render(&mut text);
                ([(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    })
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
    run(tasks, ctx, 1, Api::all_with(ctx.client.clone(), &rb), rb.clone(), &[Topic::Cluster, Topic::Profiles], |o, c| Box::pin(scheduler::reconcile(o, c)));
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
    let clusters = ctx.clusters.resource.clone();
    run(tasks, ctx, 5, Api::all_with(ctx.client.clone(), &clusters), clusters, &[], |o, c| Box::pin(cluster::reconcile(o, c)));
    simulator::spawn(ctx, tasks);
    status::spawn(ctx, tasks);
    plugins::spawn(ctx, tasks);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_counters_and_cumulative_histograms() {
        let m = Metrics::default();
        m.record(0, Duration::from_micros(500), true);
        m.record(0, Duration::from_millis(20), false);
        m.record_scheduling(Duration::from_millis(2));
        let text = m.render();
        assert!(text.contains("flotilla_reconcile_total{controller=\"detector\"} 2\n"), "{text}");
        assert!(text.contains("flotilla_reconcile_errors_total{controller=\"detector\"} 1\n"), "{text}");
        assert!(text.contains("flotilla_reconcile_duration_seconds_bucket{controller=\"detector\",le=\"0.001\"} 1\n"), "{text}");
        assert!(text.contains("flotilla_reconcile_duration_seconds_bucket{controller=\"detector\",le=\"0.025\"} 2\n"), "{text}");
        assert!(text.contains("flotilla_reconcile_duration_seconds_count{controller=\"detector\"} 2\n"), "{text}");
        assert!(text.contains("flotilla_scheduling_duration_seconds_bucket{le=\"0.0025\"} 1\n"), "{text}");
        assert!(text.contains("flotilla_scheduling_duration_seconds_count 1\n"), "{text}");
        assert_eq!(m.reconciles_of("detector"), 2);
    }
}
