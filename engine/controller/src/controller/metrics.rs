//! Reconcile and scheduling metrics: per-controller counters and latency histograms, rendered as
//! Prometheus text.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A Prometheus label value, escaped.
pub(crate) fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Scheduler profiles with a CPU histogram of their own; decisions of further profiles count in
/// the unlabelled histogram only (profiles are operator-defined, but the series stay bounded).
const MAX_PROFILE_SERIES: usize = 64;

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
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The sum of the observations, in microseconds.
    pub fn micros(&self) -> u64 {
        self.micros.load(Ordering::Relaxed)
    }

    pub(crate) fn render(&self, name: &str, labels: &str, out: &mut String) {
        use std::fmt::Write as _;
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count()
        );
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(
            out,
            "{name}_sum{braces} {}",
            self.micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count{braces} {}", self.count());
    }
}

/// Metrics of crates the controllers reach only through plugin factories (the Wasm host is a
/// dependency of the binaries, not of this library): each binary registers their renderers
/// ([`register_source`]) and every `/metrics` answer ends with their text.
static SOURCES: std::sync::Mutex<Vec<fn(&mut String)>> = std::sync::Mutex::new(Vec::new());

/// Add `render` (Prometheus text appended to its argument) to every `/metrics` answer; a
/// renderer registered twice is rendered once.
pub fn register_source(render: fn(&mut String)) {
    let mut sources = SOURCES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !sources.iter().any(|f| std::ptr::fn_addr_eq(*f, render)) {
        sources.push(render);
    }
}

/// Append the text of every registered renderer ([`register_source`]) to `out`.
pub fn render_sources(out: &mut String) {
    let sources = SOURCES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for render in sources {
        render(out);
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
    /// Scheduling latency: the pipeline's decision for one binding, wall time.
    pub scheduling: Histogram,
    /// The same decisions' CPU time (the deciding thread's).
    pub scheduling_cpu: Histogram,
    /// The same CPU time by the scheduler profile that decided.
    pub scheduling_cpu_by_profile: Mutex<BTreeMap<String, Arc<Histogram>>>,
    /// Scheduling attempts by result (see [`RESULTS`]).
    pub scheduling_results: [AtomicU64; RESULTS.len()],
    /// Bindings waiting in the scheduling queue, by sub-queue (see [`QUEUES`]).
    pub pending: [AtomicU64; QUEUES.len()],
    /// Binding preemptions: preemptors placed by evicting lower-priority bindings, and the
    /// bindings evicted.
    pub preemptions: [AtomicU64; 2],
    /// FederatedHPA metric computations by metric type (see [`METRIC_TYPES`]), succeeded and
    /// failed (Karmada's `metric_computation_total`).
    pub hpa_metric_computations: [[AtomicU64; 2]; METRIC_TYPES.len()],
}

/// FederatedHPA metric source types, as indexed in [`Metrics::hpa_metric_computations`]
/// (anything else counts as the last).
pub const METRIC_TYPES: [&str; 6] = [
    "Resource",
    "ContainerResource",
    "Pods",
    "Object",
    "External",
    "Unknown",
];

/// The scheduling queue's sub-queues, as indexed in [`Metrics::pending`] (Karmada's
/// `queue` label values).
pub const QUEUES: [&str; 3] = ["active", "backoff", "unschedulable"];

/// Scheduling results, as indexed in [`Metrics::scheduling_results`].
pub const RESULTS: [&str; 3] = ["scheduled", "unschedulable", "error"];

/// The controllers, each with its own metrics and backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Id {
    /// Templates → bindings.
    Detector,
    /// Bindings → target clusters.
    Scheduler,
    /// Bindings → Works, status aggregation.
    Binding,
    /// Works → member objects.
    Execution,
    /// Simulated members' workload status.
    Simulator,
    /// Cluster taints.
    Cluster,
}

/// Controller names, as [`Id`]s index [`Metrics`].
pub const NAMES: [&str; 6] = [
    "detector",
    "scheduler",
    "binding",
    "execution",
    "simulator",
    "cluster",
];

impl Id {
    /// The metrics label.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }
}

impl Metrics {
    /// Count one scheduling decision: its wall time and, where the platform tells, its CPU time,
    /// also under the served profile that decided (none: no profile by the binding's name).
    pub fn record_scheduling(
        &self,
        elapsed: Duration,
        cpu: Option<Duration>,
        profile: Option<&str>,
    ) {
        self.scheduling.observe(elapsed);
        if let Some(cpu) = cpu {
            self.scheduling_cpu.observe(cpu);
            if let Some(h) = profile.and_then(|p| self.profile_cpu(p)) {
                h.observe(cpu);
            }
        }
    }

    /// The CPU histogram of `profile` (created on its first decision; `None` past
    /// [`MAX_PROFILE_SERIES`] profiles).
    pub fn profile_cpu(&self, profile: &str) -> Option<Arc<Histogram>> {
        let mut m = self
            .scheduling_cpu_by_profile
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = m.get(profile) {
            return Some(Arc::clone(h));
        }
        if m.len() >= MAX_PROFILE_SERIES {
            return None;
        }
        Some(Arc::clone(m.entry(profile.to_owned()).or_default()))
    }

    /// Count one scheduling attempt's result (index into [`RESULTS`]).
    pub fn record_scheduling_result(&self, which: usize) {
        self.scheduling_results[which.min(RESULTS.len() - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// Scheduling attempts that ended with `result` (`scheduled`, `unschedulable`, `error`).
    pub fn scheduling_results_of(&self, result: &str) -> u64 {
        RESULTS
            .iter()
            .position(|r| *r == result)
            .map_or(0, |i| self.scheduling_results[i].load(Ordering::Relaxed))
    }

    pub(crate) fn record(&self, which: Id, elapsed: Duration, ok: bool) {
        let i = which as usize;
        self.reconciles[i].fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors[i].fetch_add(1, Ordering::Relaxed);
        }
        self.durations[i].observe(elapsed);
    }

    /// Count one FederatedHPA metric computation of source type `type_`.
    pub fn record_hpa_metric(&self, type_: &str, ok: bool) {
        let i = METRIC_TYPES
            .iter()
            .position(|t| *t == type_)
            .unwrap_or(METRIC_TYPES.len() - 1);
        self.hpa_metric_computations[i][usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    /// FederatedHPA metric computations of source type `type_` that succeeded (`ok`) or failed.
    pub fn hpa_metrics_of(&self, type_: &str, ok: bool) -> u64 {
        METRIC_TYPES
            .iter()
            .position(|t| *t == type_)
            .map_or(0, |i| {
                self.hpa_metric_computations[i][usize::from(!ok)].load(Ordering::Relaxed)
            })
    }

    /// Reconciles of controller `name` so far.
    pub fn reconciles_of(&self, name: &str) -> u64 {
        NAMES
            .iter()
            .position(|n| *n == name)
            .map_or(0, |i| self.reconciles[i].load(Ordering::Relaxed))
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        out.push_str("# HELP flotilla_reconcile_total Reconciles per controller.\n# TYPE flotilla_reconcile_total counter\n");
        for (i, n) in NAMES.iter().enumerate() {
            let _ = writeln!(
                out,
                "flotilla_reconcile_total{{controller=\"{n}\"}} {}",
                self.reconciles[i].load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP flotilla_reconcile_errors_total Failed reconciles per controller.\n# TYPE flotilla_reconcile_errors_total counter\n");
        for (i, n) in NAMES.iter().enumerate() {
            let _ = writeln!(
                out,
                "flotilla_reconcile_errors_total{{controller=\"{n}\"}} {}",
                self.errors[i].load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP flotilla_reconcile_duration_seconds Reconcile duration per controller.\n# TYPE flotilla_reconcile_duration_seconds histogram\n");
        for (i, n) in NAMES.iter().enumerate() {
            self.durations[i].render(
                "flotilla_reconcile_duration_seconds",
                &format!("controller=\"{n}\""),
                &mut out,
            );
        }
        out.push_str("# HELP flotilla_scheduling_duration_seconds Scheduler core latency per binding.\n# TYPE flotilla_scheduling_duration_seconds histogram\n");
        self.scheduling
            .render("flotilla_scheduling_duration_seconds", "", &mut out);
        out.push_str("# HELP flotilla_scheduling_cpu_seconds Scheduler CPU time per binding.\n# TYPE flotilla_scheduling_cpu_seconds histogram\n");
        self.scheduling_cpu
            .render("flotilla_scheduling_cpu_seconds", "", &mut out);
        out.push_str("# HELP flotilla_scheduling_profile_cpu_seconds Scheduler CPU time per binding, by scheduler profile.\n# TYPE flotilla_scheduling_profile_cpu_seconds histogram\n");
        let profiles: Vec<(String, Arc<Histogram>)> = self
            .scheduling_cpu_by_profile
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(p, h)| (p.clone(), Arc::clone(h)))
            .collect();
        for (p, h) in profiles {
            h.render(
                "flotilla_scheduling_profile_cpu_seconds",
                &format!("profile=\"{}\"", escape(&p)),
                &mut out,
            );
        }
        out.push_str("# HELP flotilla_scheduling_attempts_total Scheduling attempts by result.\n# TYPE flotilla_scheduling_attempts_total counter\n");
        for (i, r) in RESULTS.iter().enumerate() {
            let _ = writeln!(
                out,
                "flotilla_scheduling_attempts_total{{result=\"{r}\"}} {}",
                self.scheduling_results[i].load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP flotilla_scheduler_preemptions_total Bindings placed by evicting lower-priority bindings (binding preemption).\n# TYPE flotilla_scheduler_preemptions_total counter\n");
        let _ = writeln!(
            out,
            "flotilla_scheduler_preemptions_total {}",
            self.preemptions[0].load(Ordering::Relaxed)
        );
        out.push_str("# HELP flotilla_scheduler_preemption_victims_total Bindings evicted from a cluster by binding preemption.\n# TYPE flotilla_scheduler_preemption_victims_total counter\n");
        let _ = writeln!(
            out,
            "flotilla_scheduler_preemption_victims_total {}",
            self.preemptions[1].load(Ordering::Relaxed)
        );
        out.push_str("# HELP flotilla_scheduler_pending_bindings Bindings waiting in the scheduling queue, by sub-queue.\n# TYPE flotilla_scheduler_pending_bindings gauge\n");
        for (i, q) in QUEUES.iter().enumerate() {
            let _ = writeln!(
                out,
                "flotilla_scheduler_pending_bindings{{queue=\"{q}\"}} {}",
                self.pending[i].load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP flotilla_federatedhpa_metric_computation_total FederatedHPA metric computations by source type and error.\n# TYPE flotilla_federatedhpa_metric_computation_total counter\n");
        for (i, t) in METRIC_TYPES.iter().enumerate() {
            for (j, e) in ["none", "internal"].iter().enumerate() {
                let _ = writeln!(
                    out,
                    "flotilla_federatedhpa_metric_computation_total{{metric_type=\"{t}\",error=\"{e}\"}} {}",
                    self.hpa_metric_computations[i][j].load(Ordering::Relaxed)
                );
            }
        }
        out
    }

    /// Count one binding preemption that evicted `victims` bindings.
    pub fn record_preemption(&self, victims: usize) {
        self.preemptions[0].fetch_add(1, Ordering::Relaxed);
        self.preemptions[1].fetch_add(victims as u64, Ordering::Relaxed);
    }

    /// Binding preemptions so far and the bindings they evicted.
    pub fn preemptions(&self) -> (u64, u64) {
        (
            self.preemptions[0].load(Ordering::Relaxed),
            self.preemptions[1].load(Ordering::Relaxed),
        )
    }

    /// Set the scheduling queue's sizes (active, backoff, unschedulable).
    pub fn set_pending(&self, sizes: [usize; QUEUES.len()]) {
        for (g, n) in self.pending.iter().zip(sizes) {
            g.store(n as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod source_tests {
    #[test]
    fn a_registered_source_is_rendered_once() {
        fn source(out: &mut String) {
            out.push_str("flotilla_test_source 1\n");
        }
        super::register_source(source);
        super::register_source(source);
        let mut out = String::new();
        super::render_sources(&mut out);
        assert_eq!(out.matches("flotilla_test_source 1").count(), 1);
    }
}
