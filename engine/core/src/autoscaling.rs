//! The horizontal pod autoscaler's arithmetic, as Karmada's FederatedHPA runs it (Karmada lifts
//! it from kube's `pkg/controller/podautoscaler`: `replica_calculator.go` and `horizontal.go`).
//!
//! Pure and synchronous: the controller collects pods and metrics from the member clusters and
//! keeps the per-autoscaler history ([`History`]); everything decided from them is here.
//!
//! - **Replicas from one metric**: `desired = ceil(current × currentValue / targetValue)`, unless
//!   the ratio is within the tolerance of 1 ([`DEFAULT_TOLERANCE`]). Pods whose metrics are
//!   missing count as using 0 % on a scale-up and (at least) 100 % of the target on a scale-down;
//!   pods not ready yet count as using 0 % on a scale-up; if that reverses the direction or
//!   lands within the tolerance, nothing changes ([`resource_replicas`], [`plain_replicas`]).
//! - **Object and External metrics**: one value (an external metric's series summed) against a
//!   `value` target scales the ready pods by the ratio ([`object_replicas`]); against an
//!   `averageValue` target the value is divided among the pods
//!   ([`object_average_replicas`], [`external_average_replicas`]).
//! - **Several metrics**: the largest proposal; when some metrics fail, a scale-down is not
//!   attempted ([`combine`]).
//! - **Normalization**: without `behavior`, the highest recommendation of the downscale
//!   stabilization window (300 s), then `[minReplicas, min(maxReplicas, max(2 × current, 4))]`
//!   ([`normalize`]); with `behavior`, the scale-up and scale-down stabilization windows, then
//!   the rate its policies allow over their periods (`Pods`/`Percent`, `selectPolicy`
//!   `Max`/`Min`/`Disabled`), then `[minReplicas, maxReplicas]` ([`normalize_with_behavior`]).
//!   Each returns the `AbleToScale` and `ScalingLimited` conditions' reasons and messages.
//!
//! Quantities are integers in milli-units (a CPU usage of `250m` is 250, a memory usage of
//! `1Ki` is 1 024 000), as kube's metrics client reads them.

pub mod cron;
pub mod spec;

use std::collections::{BTreeMap, BTreeSet};

/// How far from 1 the usage ratio must be before the replica count changes (kube's
/// `--horizontal-pod-autoscaler-tolerance`).
pub const DEFAULT_TOLERANCE: f64 = 0.1;
/// The downscale stabilization window without `behavior` (kube's
/// `--horizontal-pod-autoscaler-downscale-stabilization`), in seconds.
pub const DEFAULT_DOWNSCALE_STABILIZATION_SECONDS: i64 = 300;
/// Without `behavior`, a scale-up goes at most to this factor of the current replicas...
const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
/// ...or to this many replicas, whichever is more.
const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;
/// The longest stabilization window `behavior` may set (kube's validation), in seconds.
pub const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;
/// The longest policy period `behavior` may set (kube's validation), in seconds.
pub const MAX_PERIOD_SECONDS: i32 = 1800;
/// Recommendations and scale events remembered per autoscaler at most (older ones are reused
/// first, as kube reuses outdated slots; this only bounds what a hostile spec can make us keep).
pub const MAX_HISTORY: usize = 4096;

/// Why no replica count could be computed from a metric.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The target's selector matched no pod.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// Every pod is unready, ignored or without metrics.
    #[error("did not receive metrics for any ready pods")]
    NoReadyMetrics,
    /// A pod with metrics has no request for the resource (utilization needs one).
    #[error("missing request for {resource} in pod {pod}")]
    MissingRequest {
        /// The resource (`cpu`).
        resource: String,
        /// The pod.
        pod: String,
    },
    /// The requests of the pods with metrics add up to nothing.
    #[error("no metrics returned matched known pods")]
    NoKnownPods,
    /// The target value is zero or negative (admission refuses those).
    #[error("invalid target value {0}")]
    InvalidTarget(i64),
}

/// The state of one pod, as kube's `groupPods` sorts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Being deleted or failed: not counted at all.
    Ignored,
    /// Pending: counted as unready.
    Pending,
    /// Running; `ready` is false while it is not ready for CPU sampling (see [`cpu_ready`]).
    Running {
        /// Whether its samples count (resource metrics other than CPU ignore this).
        ready: bool,
    },
}

/// One pod of the scale target, in whichever member cluster it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Its name (unique across the members: the controller prefixes the cluster).
    pub name: String,
    /// Its state.
    pub state: PodState,
    /// Its containers' request for the metric's resource, summed, in milli-units; `None` when
    /// a container has none.
    pub request: Option<i64>,
}

/// Whether a running pod's CPU sample counts, as kube's `groupPods` decides: a pod that is
/// not ready, or has no start time, does not count; within `cpu_initialization_period` of its
/// start, it counts only when ready and the sample was taken a full `window` after it became
/// ready; afterwards it does not count only while it has never been ready (not ready and its
/// readiness last changed within `initial_readiness_delay` of its start). Times are epoch
/// seconds.
#[allow(clippy::too_many_arguments)]
pub fn cpu_ready(
    now: i64,
    start: Option<i64>,
    ready: Option<bool>,
    ready_since: i64,
    sample_time: i64,
    window: i64,
    cpu_initialization_period: i64,
    initial_readiness_delay: i64,
) -> bool {
    let (Some(start), Some(ready)) = (start, ready) else {
        return false;
    };
    if start.saturating_add(cpu_initialization_period) > now {
        ready && sample_time >= ready_since.saturating_add(window)
    } else {
        ready || start.saturating_add(initial_readiness_delay) <= ready_since
    }
}

/// What one metric proposes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proposal {
    /// The replica count.
    pub replicas: i32,
    /// The current average utilization in percent of the request (resource metrics with a
    /// utilization target).
    pub utilization: Option<i32>,
    /// The current average (or, for object metrics with a value target, total) value, in
    /// milli-units.
    pub value: i64,
}

fn ceil_replicas(x: f64) -> i32 {
    let c = x.ceil();
    if c.is_nan() || c <= 0.0 {
        0
    } else if c >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        c as i32
    }
}

/// Karmada's calibration: the replicas of every member over the template's (more than 1 when
/// the template is duplicated into several members); anything not positive counts as 1.
fn calibrated(calibration: f64) -> f64 {
    if calibration.is_finite() && calibration > 0.0 {
        calibration
    } else {
        1.0
    }
}

fn within(tolerance: f64, ratio: f64) -> bool {
    (1.0 - ratio).abs() <= tolerance
}

/// kube's second pass once missing pods have their assumed samples in `metrics`: unready pods
/// count as 0 on a scale-up, the ratio is recomputed (`ratio_of`), and the current count stays
/// when the new ratio is within tolerance, flips direction, or would move the other way.
fn second_pass(
    current: i32,
    ratio: f64,
    metrics: &mut BTreeMap<String, i64>,
    g: &Grouped,
    scale_up_with_unready: bool,
    (tolerance, calibration): (f64, f64),
    ratio_of: impl Fn(&BTreeMap<String, i64>) -> Result<f64, Error>,
) -> Result<i32, Error> {
    if scale_up_with_unready {
        for pod in &g.unready {
            metrics.insert(pod.clone(), 0);
        }
    }
    let new_ratio = ratio_of(metrics)?;
    if within(tolerance, new_ratio)
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(current);
    }
    let replicas = ceil_replicas(new_ratio * metrics.len() as f64 / calibration);
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(current);
    }
    Ok(replicas)
}

struct Grouped {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
}

/// kube's `groupPods` + `removeMetricsForPods`: `metrics` keeps only the ready pods' samples.
fn group(pods: &[Pod], metrics: &mut BTreeMap<String, i64>, cpu: bool) -> Grouped {
    let mut g = Grouped {
        ready: 0,
        unready: BTreeSet::new(),
        missing: BTreeSet::new(),
    };
    let mut ignored = BTreeSet::new();
    for p in pods {
        match p.state {
            PodState::Ignored => {
                ignored.insert(p.name.clone());
            }
            PodState::Pending => {
                g.unready.insert(p.name.clone());
            }
            PodState::Running { ready } => {
                if !metrics.contains_key(&p.name) {
                    g.missing.insert(p.name.clone());
                } else if cpu && !ready {
                    g.unready.insert(p.name.clone());
                } else {
                    g.ready += 1;
                }
            }
        }
    }
    metrics.retain(|name, _| !ignored.contains(name) && !g.unready.contains(name));
    g
}

/// kube's `GetResourceUtilizationRatio`: (ratio, utilization %, raw average).
fn utilization_ratio(
    metrics: &BTreeMap<String, i64>,
    requests: &BTreeMap<&str, Option<i64>>,
    resource: &str,
    target: i32,
) -> Result<(f64, i32, i64), Error> {
    let (mut used, mut requested, mut entries) = (0i128, 0i128, 0i128);
    for (pod, value) in metrics {
        let Some(request) = requests.get(pod.as_str()) else {
            continue;
        };
        let Some(request) = request else {
            return Err(Error::MissingRequest {
                resource: resource.to_owned(),
                pod: pod.clone(),
            });
        };
        used += i128::from(*value);
        requested += i128::from(*request);
        entries += 1;
    }
    if requested == 0 || entries == 0 {
        return Err(Error::NoKnownPods);
    }
    let utilization = i32::try_from(used * 100 / requested).unwrap_or(i32::MAX);
    let average = i64::try_from(used / entries).unwrap_or(i64::MAX);
    Ok((
        f64::from(utilization) / f64::from(target),
        utilization,
        average,
    ))
}

/// Replicas for a `Resource` (or `ContainerResource`) metric with an `averageUtilization`
/// target (kube's `GetResourceReplicas`): `metrics` are the pods' usage in milli-units,
/// `current` the target's replicas. `resource` names the resource (`cpu` also applies pod
/// readiness, as kube does for CPU only).
///
/// # Errors
/// No pods, no ready pod with metrics, a pod without a request, a target below 1.
pub fn resource_replicas(
    current: i32,
    target_utilization: i32,
    resource: &str,
    pods: &[Pod],
    metrics: &BTreeMap<String, i64>,
    tolerance: f64,
    calibration: f64,
) -> Result<Proposal, Error> {
    let calibration = calibrated(calibration);
    if target_utilization <= 0 {
        return Err(Error::InvalidTarget(i64::from(target_utilization)));
    }
    if pods.is_empty() {
        return Err(Error::NoPods);
    }
    let mut metrics = metrics.clone();
    let g = group(pods, &mut metrics, resource == "cpu");
    let requests: BTreeMap<&str, Option<i64>> =
        pods.iter().map(|p| (p.name.as_str(), p.request)).collect();
    if metrics.is_empty() {
        return Err(Error::NoReadyMetrics);
    }
    let (ratio, utilization, average) =
        utilization_ratio(&metrics, &requests, resource, target_utilization)?;
    let proposal = |replicas| Proposal {
        replicas,
        utilization: Some(utilization),
        value: average,
    };
    let scale_up_with_unready = !g.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && g.missing.is_empty() {
        if within(tolerance, ratio) {
            return Ok(proposal(current));
        }
        return Ok(proposal(ceil_replicas(
            ratio * g.ready as f64 / calibration,
        )));
    }
    if ratio < 1.0 {
        // On a scale-down, missing pods use the target, at least their whole request.
        let fallback = i64::from(target_utilization.max(100));
        for pod in &g.missing {
            let request = requests.get(pod.as_str()).copied().flatten().unwrap_or(0);
            metrics.insert(pod.clone(), request.saturating_mul(fallback) / 100);
        }
    } else if ratio > 1.0 {
        for pod in &g.missing {
            metrics.insert(pod.clone(), 0);
        }
    }
    let replicas = second_pass(
        current,
        ratio,
        &mut metrics,
        &g,
        scale_up_with_unready,
        (tolerance, calibration),
        |m| Ok(utilization_ratio(m, &requests, resource, target_utilization)?.0),
    )?;
    Ok(proposal(replicas))
}

/// Replicas for a per-pod average value target: `Resource` metrics with `averageValue`, and
/// `Pods` metrics (kube's `calcPlainMetricReplicas`). `cpu` applies pod readiness as for CPU.
///
/// # Errors
/// No pods, no ready pod with metrics, a target below 1.
pub fn plain_replicas(
    current: i32,
    target_average: i64,
    cpu: bool,
    pods: &[Pod],
    metrics: &BTreeMap<String, i64>,
    tolerance: f64,
    calibration: f64,
) -> Result<Proposal, Error> {
    let calibration = calibrated(calibration);
    if target_average <= 0 {
        return Err(Error::InvalidTarget(target_average));
    }
    if pods.is_empty() {
        return Err(Error::NoPods);
    }
    let mut metrics = metrics.clone();
    let g = group(pods, &mut metrics, cpu);
    if metrics.is_empty() {
        return Err(Error::NoReadyMetrics);
    }
    let ratio_of = |m: &BTreeMap<String, i64>| {
        let total: i128 = m.values().map(|v| i128::from(*v)).sum();
        let average = i64::try_from(total / m.len().max(1) as i128).unwrap_or(i64::MAX);
        (average as f64 / target_average as f64, average)
    };
    let (ratio, average) = ratio_of(&metrics);
    let proposal = |replicas| Proposal {
        replicas,
        utilization: None,
        value: average,
    };
    let scale_up_with_unready = !g.unready.is_empty() && ratio > 1.0;
    if !scale_up_with_unready && g.missing.is_empty() {
        if within(tolerance, ratio) {
            return Ok(proposal(current));
        }
        return Ok(proposal(ceil_replicas(
            ratio * g.ready as f64 / calibration,
        )));
    }
    if ratio < 1.0 {
        for pod in &g.missing {
            metrics.insert(pod.clone(), target_average);
        }
    } else if ratio > 1.0 {
        for pod in &g.missing {
            metrics.insert(pod.clone(), 0);
        }
    }
    let replicas = second_pass(
        current,
        ratio,
        &mut metrics,
        &g,
        scale_up_with_unready,
        (tolerance, calibration),
        |m| Ok(ratio_of(m).0),
    )?;
    Ok(proposal(replicas))
}

/// Replicas for an `Object` or `External` metric with a `value` target (Karmada's
/// `GetObjectMetricReplicas` and `getUsageRatioReplicaCount`, kube's `GetExternalMetricReplicas`):
/// `usage` is the metric's value (for an external metric, the sum of every series selected),
/// `pods` how many pods the target's selector matched and `ready_pods` how many of those are
/// `Running` and `Ready`. Within the tolerance the count stays; otherwise it is
/// `ceil(ratio × ready pods / calibration)`. From zero replicas it is `ceil(ratio)`, so a
/// workload scaled to zero comes back.
///
/// # Errors
/// A target below 1, or no pod at all when the count has to change.
pub fn object_replicas(
    current: i32,
    usage: i64,
    target: i64,
    (pods, ready_pods): (usize, usize),
    tolerance: f64,
    calibration: f64,
) -> Result<Proposal, Error> {
    if target <= 0 {
        return Err(Error::InvalidTarget(target));
    }
    let calibration = calibrated(calibration);
    let ratio = usage as f64 / target as f64;
    let replicas = if current == 0 {
        ceil_replicas(ratio)
    } else if within(tolerance, ratio) {
        current
    } else {
        if pods == 0 {
            return Err(Error::NoPods);
        }
        ceil_replicas(ratio * ready_pods as f64 / calibration)
    };
    Ok(Proposal {
        replicas,
        utilization: None,
        value: usage,
    })
}

/// The per-pod average reported for a total `usage` over `status_replicas` pods (rounded up,
/// as kube does; the total itself when there are no pods).
fn per_pod(usage: i64, status_replicas: i32) -> i64 {
    if status_replicas > 0 {
        let avg = (usage as f64 / f64::from(status_replicas)).ceil();
        if avg >= i64::MAX as f64 {
            i64::MAX
        } else if avg <= i64::MIN as f64 {
            i64::MIN
        } else {
            avg as i64
        }
    } else {
        usage
    }
}

/// Replicas for an `Object` metric with an `averageValue` target, exactly as Karmada's
/// `GetObjectPerPodMetricReplicas` computes them: `status_replicas` are the pods running in the
/// members; within the tolerance of `usage / (target × status_replicas)` the count is
/// `ceil(status_replicas / calibration)`, otherwise `ceil(ceil(usage / target / calibration) /
/// calibration)` (Karmada divides by the calibration twice on this path; with templates that
/// are divided between members rather than duplicated the calibration is 1 and both are kube's
/// `ceil(usage / target)`).
///
/// # Errors
/// A target below 1.
pub fn object_average_replicas(
    status_replicas: i32,
    usage: i64,
    target_average: i64,
    tolerance: f64,
    calibration: f64,
) -> Result<Proposal, Error> {
    if target_average <= 0 {
        return Err(Error::InvalidTarget(target_average));
    }
    let calibration = calibrated(calibration);
    let mut replicas = status_replicas;
    let ratio = usage as f64 / (target_average as f64 * f64::from(status_replicas));
    if (1.0 - ratio).abs() > tolerance {
        replicas = ceil_replicas(usage as f64 / target_average as f64 / calibration);
    }
    Ok(Proposal {
        replicas: ceil_replicas(f64::from(replicas) / calibration),
        utilization: None,
        value: per_pod(usage, status_replicas),
    })
}

/// Replicas for an `External` metric with an `averageValue` target (kube's
/// `GetExternalPerPodMetricReplicas`; Karmada serves no external metrics, so the calibration is
/// applied once, as for every other metric): `usage` is the sum of the series selected and
/// `status_replicas` the pods running in the members. Within the tolerance of `usage / (target ×
/// status_replicas)` the count is `ceil(status_replicas / calibration)`, otherwise
/// `ceil(usage / target / calibration)`.
///
/// # Errors
/// A target below 1.
pub fn external_average_replicas(
    status_replicas: i32,
    usage: i64,
    target_average: i64,
    tolerance: f64,
    calibration: f64,
) -> Result<Proposal, Error> {
    if target_average <= 0 {
        return Err(Error::InvalidTarget(target_average));
    }
    let calibration = calibrated(calibration);
    let ratio = usage as f64 / (target_average as f64 * f64::from(status_replicas));
    let replicas = if (1.0 - ratio).abs() > tolerance {
        ceil_replicas(usage as f64 / target_average as f64 / calibration)
    } else {
        ceil_replicas(f64::from(status_replicas) / calibration)
    };
    Ok(Proposal {
        replicas,
        utilization: None,
        value: per_pod(usage, status_replicas),
    })
}

/// What several metrics propose together (kube's `computeReplicasForMetrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Combined {
    /// Scale to `replicas`, proposed by metric number `by` (the largest; the first of equals).
    /// `failed` metrics could not be computed (they never cause a scale-down).
    Scale {
        /// The largest proposal.
        replicas: i32,
        /// Index of the metric that proposed it.
        by: usize,
        /// How many metrics failed.
        failed: usize,
    },
    /// Every metric failed, or some failed and the others would scale down: do nothing.
    /// `first_failed` is the index of the first that failed.
    Failed {
        /// Index of the first failed metric.
        first_failed: usize,
        /// How many metrics failed.
        failed: usize,
    },
}

/// The largest of the proposals, unless every one failed or some failed and the rest would
/// scale below `spec_replicas`.
pub fn combine(spec_replicas: i32, proposals: &[Option<i32>]) -> Combined {
    let mut best: Option<(i32, usize)> = None;
    let mut first_failed = None;
    let mut failed = 0;
    for (i, p) in proposals.iter().enumerate() {
        match p {
            Some(r) => {
                if best.is_none_or(|(b, _)| *r > b) {
                    best = Some((*r, i));
                }
            }
            None => {
                failed += 1;
                first_failed.get_or_insert(i);
            }
        }
    }
    match (best, first_failed) {
        (Some((replicas, by)), None) => Combined::Scale {
            replicas,
            by,
            failed,
        },
        (Some((replicas, by)), Some(first)) => {
            if replicas < spec_replicas {
                Combined::Failed {
                    first_failed: first,
                    failed,
                }
            } else {
                Combined::Scale {
                    replicas,
                    by,
                    failed,
                }
            }
        }
        (None, first) => Combined::Failed {
            first_failed: first.unwrap_or(0),
            failed,
        },
    }
}

/// `Pods` or `Percent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyType {
    /// At most `value` pods per period.
    Pods,
    /// At most `value` percent of the pods at the period's start per period.
    Percent,
}

/// One scaling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Its type.
    pub kind: PolicyType,
    /// Pods or percent.
    pub value: i32,
    /// Over how many seconds.
    pub period_seconds: i32,
}

/// Which policy wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Select {
    /// The one allowing the largest change (the default).
    #[default]
    Max,
    /// The one allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

/// The rules for one direction (`HPAScalingRules`), defaulted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The stabilization window, in seconds.
    pub stabilization_window_seconds: i32,
    /// Which policy wins.
    pub select: Select,
    /// The policies.
    pub policies: Vec<Policy>,
}

/// `behavior`, defaulted as Karmada's mutating webhook (and kube's defaulting) does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behavior {
    /// Scaling up.
    pub scale_up: Rules,
    /// Scaling down.
    pub scale_down: Rules,
}

impl Behavior {
    /// The default scale-up rules: no stabilization, at most +4 pods or +100 % per 15 s,
    /// whichever is more.
    pub fn default_scale_up() -> Rules {
        Rules {
            stabilization_window_seconds: 0,
            select: Select::Max,
            policies: vec![
                Policy {
                    kind: PolicyType::Pods,
                    value: 4,
                    period_seconds: 15,
                },
                Policy {
                    kind: PolicyType::Percent,
                    value: 100,
                    period_seconds: 15,
                },
            ],
        }
    }

    /// The default scale-down rules: `window` seconds of stabilization (the controller's
    /// downscale stabilization), at most −100 % per 15 s.
    pub fn default_scale_down(window: i32) -> Rules {
        Rules {
            stabilization_window_seconds: window,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyType::Percent,
                value: 100,
                period_seconds: 15,
            }],
        }
    }
}

/// One remembered recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Recommendation {
    replicas: i32,
    at_ms: i64,
}

/// One remembered scaling, for the policies' periods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScaleEvent {
    change: i32,
    at_ms: i64,
    outdated: bool,
}

/// What one autoscaler remembers between syncs: its recent recommendations (for the
/// stabilization windows) and scalings (for the policies' periods).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    recommendations: Vec<Recommendation>,
    up: Vec<ScaleEvent>,
    down: Vec<ScaleEvent>,
}

impl History {
    /// Start the history with the current replica count, once (kube's
    /// `recordInitialRecommendation`).
    pub fn record_initial(&mut self, current: i32, now_ms: i64) {
        if self.recommendations.is_empty() {
            self.recommendations.push(Recommendation {
                replicas: current,
                at_ms: now_ms,
            });
        }
    }

    /// Remember a scaling from `previous` to `new` replicas (kube's `storeScaleEvent`; only
    /// with `behavior`, whose policies read them).
    pub fn record_scale(&mut self, behavior: &Behavior, previous: i32, new: i32, now_ms: i64) {
        let (events, rules, change) = if new > previous {
            (
                &mut self.up,
                &behavior.scale_up,
                new.saturating_sub(previous),
            )
        } else {
            (
                &mut self.down,
                &behavior.scale_down,
                previous.saturating_sub(new),
            )
        };
        let longest = rules
            .policies
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0);
        let cutoff = now_ms.saturating_sub(i64::from(longest).saturating_mul(1000));
        for e in events.iter_mut() {
            if e.at_ms < cutoff {
                e.outdated = true;
            }
        }
        let event = ScaleEvent {
            change,
            at_ms: now_ms,
            outdated: false,
        };
        match events.iter().rposition(|e| e.outdated) {
            Some(i) => events[i] = event,
            None if events.len() >= MAX_HISTORY => {
                if let Some(oldest) = events.iter_mut().min_by_key(|e| e.at_ms) {
                    *oldest = event;
                }
            }
            None => events.push(event),
        }
    }

    fn remember(&mut self, replicas: i32, now_ms: i64, old: Option<usize>) {
        let r = Recommendation {
            replicas,
            at_ms: now_ms,
        };
        match old {
            Some(i) => self.recommendations[i] = r,
            None if self.recommendations.len() >= MAX_HISTORY => {
                if let Some(oldest) = self.recommendations.iter_mut().min_by_key(|r| r.at_ms) {
                    *oldest = r;
                }
            }
            None => self.recommendations.push(r),
        }
    }
}

/// A condition's status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `True` or `False`.
    pub status: bool,
    /// The reason (`ScaleDownStabilized`).
    pub reason: &'static str,
    /// The message.
    pub message: &'static str,
}

/// The outcome of normalizing a recommendation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    /// The replica count to scale to.
    pub replicas: i32,
    /// The `AbleToScale` condition.
    pub able_to_scale: Condition,
    /// The `ScalingLimited` condition.
    pub scaling_limited: Condition,
}

const READY_FOR_NEW_SCALE: Condition = Condition {
    status: true,
    reason: "ReadyForNewScale",
    message: "recommended size matches current size",
};
const SCALE_DOWN_STABILIZED: Condition = Condition {
    status: true,
    reason: "ScaleDownStabilized",
    message: "recent recommendations were higher than current one, applying the highest recent recommendation",
};
const SCALE_UP_STABILIZED: Condition = Condition {
    status: true,
    reason: "ScaleUpStabilized",
    message: "recent recommendations were lower than current one, applying the lowest recent recommendation",
};
const WITHIN_RANGE: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const SCALE_UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const SCALE_DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);

fn limited(
    replicas: i32,
    stabilized: i32,
    (reason, message): (&'static str, &'static str),
) -> Condition {
    Condition {
        status: replicas != stabilized,
        reason,
        message,
    }
}

/// Normalize `desired` without `behavior` (kube's `normalizeDesiredReplicas`): the highest
/// recommendation within `downscale_window_seconds`, then at least `min`, at most `max` and at
/// most `max(2 × current, 4)`. Records `desired` in `history`.
pub fn normalize(
    history: &mut History,
    now_ms: i64,
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
    downscale_window_seconds: i64,
) -> Normalized {
    let cutoff = now_ms.saturating_sub(downscale_window_seconds.saturating_mul(1000));
    let mut stabilized = desired;
    let mut old = None;
    for (i, r) in history.recommendations.iter().enumerate() {
        if r.at_ms < cutoff {
            old = Some(i);
        } else if r.replicas > stabilized {
            stabilized = r.replicas;
        }
    }
    history.remember(desired, now_ms, old);
    let able_to_scale = if stabilized == desired {
        READY_FOR_NEW_SCALE
    } else {
        SCALE_DOWN_STABILIZED
    };
    let scale_up_limit = (SCALE_UP_LIMIT_FACTOR * f64::from(current)).max(SCALE_UP_LIMIT_MINIMUM);
    let scale_up_limit = ceil_replicas(scale_up_limit.floor());
    let (maximum, why) = if max > scale_up_limit {
        (scale_up_limit, SCALE_UP_LIMIT)
    } else {
        (max, TOO_MANY)
    };
    let (replicas, why) = if stabilized < min {
        (min, TOO_FEW)
    } else if stabilized > maximum {
        (maximum, why)
    } else {
        (stabilized, WITHIN_RANGE)
    };
    Normalized {
        replicas,
        able_to_scale,
        scaling_limited: limited(replicas, stabilized, why),
    }
}

fn change_in_period(events: &[ScaleEvent], period_seconds: i32, now_ms: i64) -> i64 {
    let cutoff = now_ms.saturating_sub(i64::from(period_seconds).saturating_mul(1000));
    events
        .iter()
        .filter(|e| e.at_ms > cutoff)
        .map(|e| i64::from(e.change))
        .sum()
}

fn clamp_i32(v: i64) -> i32 {
    i32::try_from(v.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).unwrap_or(0)
}

/// The most replicas the scale-up policies allow now (kube's
/// `calculateScaleUpLimitWithScalingRules`).
fn scale_up_limit(history: &History, rules: &Rules, current: i32, now_ms: i64) -> i32 {
    if rules.select == Select::Disabled {
        return current;
    }
    let mut result: Option<i64> = None;
    for p in &rules.policies {
        let added = change_in_period(&history.up, p.period_seconds, now_ms);
        let deleted = change_in_period(&history.down, p.period_seconds, now_ms);
        let start = i64::from(current) - added + deleted;
        let proposed = match p.kind {
            PolicyType::Pods => start + i64::from(p.value),
            PolicyType::Percent => {
                (start as f64 * (1.0 + f64::from(p.value) / 100.0)).ceil() as i64
            }
        };
        result = Some(match (result, rules.select) {
            (None, _) => proposed,
            (Some(r), Select::Min) => r.min(proposed),
            (Some(r), _) => r.max(proposed),
        });
    }
    clamp_i32(result.unwrap_or(match rules.select {
        Select::Min => i64::from(i32::MAX),
        _ => i64::from(i32::MIN),
    }))
}

/// The fewest replicas the scale-down policies allow now (kube's
/// `calculateScaleDownLimitWithBehaviors`).
fn scale_down_limit(history: &History, rules: &Rules, current: i32, now_ms: i64) -> i32 {
    if rules.select == Select::Disabled {
        return current;
    }
    let mut result: Option<i64> = None;
    for p in &rules.policies {
        let added = change_in_period(&history.up, p.period_seconds, now_ms);
        let deleted = change_in_period(&history.down, p.period_seconds, now_ms);
        let start = i64::from(current) - added + deleted;
        let proposed = match p.kind {
            PolicyType::Pods => start - i64::from(p.value),
            // Truncated toward zero, as kube's int32 conversion.
            PolicyType::Percent => (start as f64 * (1.0 - f64::from(p.value) / 100.0)) as i64,
        };
        result = Some(match (result, rules.select) {
            (None, _) => proposed,
            (Some(r), Select::Min) => r.max(proposed),
            (Some(r), _) => r.min(proposed),
        });
    }
    clamp_i32(result.unwrap_or(match rules.select {
        Select::Min => i64::from(i32::MIN),
        _ => i64::from(i32::MAX),
    }))
}

/// Normalize `desired` with `behavior` (kube's `normalizeDesiredReplicasWithBehaviors`):
/// stabilize within both windows (the lowest recommendation of the scale-up window, the
/// highest of the scale-down window, kept around `current`), then limit the rate by the
/// policies and `[min, max]`. Records `desired` in `history`.
pub fn normalize_with_behavior(
    history: &mut History,
    behavior: &Behavior,
    now_ms: i64,
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
) -> Normalized {
    let window = |s: i32| now_ms.saturating_sub(i64::from(s.max(0)).saturating_mul(1000));
    let up_cutoff = window(behavior.scale_up.stabilization_window_seconds);
    let down_cutoff = window(behavior.scale_down.stabilization_window_seconds);
    let (mut up, mut down) = (desired, desired);
    let mut old = None;
    for (i, r) in history.recommendations.iter().enumerate() {
        if r.at_ms > up_cutoff {
            up = up.min(r.replicas);
        }
        if r.at_ms > down_cutoff {
            down = down.max(r.replicas);
        }
        if r.at_ms < up_cutoff && r.at_ms < down_cutoff {
            old = Some(i);
        }
    }
    let stabilized = current.max(up).min(down);
    history.remember(desired, now_ms, old);
    let able_to_scale = if stabilized == desired {
        READY_FOR_NEW_SCALE
    } else if desired >= current {
        SCALE_UP_STABILIZED
    } else {
        SCALE_DOWN_STABILIZED
    };
    let (replicas, why) = if stabilized > current {
        let limit = scale_up_limit(history, &behavior.scale_up, current, now_ms).max(current);
        let (maximum, why) = if max > limit {
            (limit, SCALE_UP_LIMIT)
        } else {
            (max, TOO_MANY)
        };
        if stabilized > maximum {
            (maximum, why)
        } else {
            (stabilized, WITHIN_RANGE)
        }
    } else if stabilized < current {
        let limit = scale_down_limit(history, &behavior.scale_down, current, now_ms).min(current);
        let (minimum, why) = if min < limit {
            (limit, SCALE_DOWN_LIMIT)
        } else {
            (min, TOO_FEW)
        };
        if stabilized < minimum {
            (minimum, why)
        } else {
            (stabilized, WITHIN_RANGE)
        }
    } else {
        (stabilized, WITHIN_RANGE)
    };
    Normalized {
        replicas,
        able_to_scale,
        scaling_limited: limited(replicas, stabilized, why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(name: &str, request: i64) -> Pod {
        Pod {
            name: name.into(),
            state: PodState::Running { ready: true },
            request: Some(request),
        }
    }

    fn pods(n: usize, request: i64) -> Vec<Pod> {
        (0..n).map(|i| running(&format!("p{i}"), request)).collect()
    }

    fn usage(values: &[i64]) -> BTreeMap<String, i64> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("p{i}"), *v))
            .collect()
    }

    fn cpu(current: i32, target: i32, pods: &[Pod], m: &BTreeMap<String, i64>) -> i32 {
        resource_replicas(current, target, "cpu", pods, m, DEFAULT_TOLERANCE, 1.0)
            .expect("a proposal")
            .replicas
    }

    // The HPA documentation's algorithm: desired = ceil(current × current value / target).
    // "if the current metric value is 200m, and the desired value is 100m, the number of
    // replicas will be doubled ... If the current value is instead 50m, you'll halve".
    #[test]
    fn the_documented_ratio_doubles_and_halves() {
        let p = pods(4, 1000);
        let m = usage(&[200, 200, 200, 200]);
        assert_eq!(
            plain_replicas(4, 100, true, &p, &m, DEFAULT_TOLERANCE, 1.0)
                .expect("proposal")
                .replicas,
            8
        );
        let m = usage(&[50, 50, 50, 50]);
        assert_eq!(
            plain_replicas(4, 100, true, &p, &m, DEFAULT_TOLERANCE, 1.0)
                .expect("proposal")
                .replicas,
            2
        );
        // Utilization: 3 pods of 500m requests at 90 % against a 50 % target → ceil(3 × 1.8).
        let p = pods(3, 500);
        let m = usage(&[450, 450, 450]);
        let got =
            resource_replicas(3, 50, "cpu", &p, &m, DEFAULT_TOLERANCE, 1.0).expect("proposal");
        assert_eq!(got.replicas, 6);
        assert_eq!(got.utilization, Some(90));
        assert_eq!(got.value, 450);
    }

    // "the control plane skips any scaling action if the ratio is sufficiently close to 1.0
    // (within a globally-configurable tolerance, 0.1 by default)".
    #[test]
    fn ratios_within_the_tolerance_keep_the_count() {
        let p = pods(4, 1000);
        assert_eq!(cpu(4, 50, &p, &usage(&[540, 540, 540, 540])), 4, "1.08");
        assert_eq!(cpu(4, 50, &p, &usage(&[460, 460, 460, 460])), 4, "0.92");
        // 55 % / 50 % is 1.1000000000000000888 in binary floating point, just outside the
        // tolerance, as in kube's Go code: ceil(4 × 1.1).
        assert_eq!(cpu(4, 50, &p, &usage(&[550, 550, 550, 550])), 5, "1.1");
        assert_eq!(cpu(4, 50, &p, &usage(&[560, 560, 560, 560])), 5, "1.12");
        assert_eq!(
            cpu(4, 50, &p, &usage(&[440, 440, 440, 440])),
            4,
            "0.88 → ceil(3.52)"
        );
        assert_eq!(
            cpu(4, 50, &p, &usage(&[300, 300, 300, 300])),
            3,
            "0.6 → ceil(2.4)"
        );
        let tight = resource_replicas(4, 50, "cpu", &p, &usage(&[540; 4]), 0.01, 1.0).expect("p");
        assert_eq!(tight.replicas, 5, "a tighter tolerance acts on 1.08");
    }

    // "If any of these [pods] are missing metrics ... conservatively assume the pods are
    // consuming 100% of the desired value in case of a scale down, and 0% in case of a scale
    // up ... then recalculate. If the new ratio reverses the scale direction, or is within the
    // tolerance, the controller doesn't take any scaling action."
    #[test]
    fn missing_metrics_count_as_zero_up_and_the_target_down() {
        // Scale-up: 2 pods at 100 % of a 50 % target, 2 missing → (200 % over 4) = 1.0 → keep.
        let p = pods(4, 1000);
        let m: BTreeMap<String, i64> = [("p0".into(), 1000), ("p1".into(), 1000)].into();
        assert_eq!(
            cpu(4, 50, &p, &m),
            4,
            "0 % for the missing erases the scale-up"
        );
        // Scale-up still: 2 pods at 150 % of 50 %, 2 missing → 300/4 = 75 % → ratio 1.5 → 6.
        let m: BTreeMap<String, i64> = [("p0".into(), 1500), ("p1".into(), 1500)].into();
        assert_eq!(cpu(4, 50, &p, &m), 6);
        // Scale-down: 2 pods at 10 % of a 50 % target, 2 missing count as 100 %:
        // (10+10+100+100)/4 = 55 % → 1.1 → within the tolerance → keep.
        let m: BTreeMap<String, i64> = [("p0".into(), 100), ("p1".into(), 100)].into();
        assert_eq!(cpu(4, 50, &p, &m), 4);
        // Scale-down: 3 pods at 10 %, one missing at 100 % → (30+100)/4 = 32 % → ceil(4 × 0.64).
        let m: BTreeMap<String, i64> =
            [("p0".into(), 100), ("p1".into(), 100), ("p2".into(), 100)].into();
        assert_eq!(cpu(4, 50, &p, &m), 3);
        // A target above 100 % is what missing pods use on a scale-down: (3 × 100m + 2000m)
        // over 4000m = 57 % of 200 % → ceil(4 × 0.285) = 2.
        let m: BTreeMap<String, i64> =
            [("p0".into(), 100), ("p1".into(), 100), ("p2".into(), 100)].into();
        assert_eq!(cpu(4, 200, &p, &m), 2);
    }

    // "any pods that are not yet ready are assumed to use 0% of the desired metric on a
    // scale up" (and are left out on a scale-down).
    #[test]
    fn unready_pods_count_as_zero_on_a_scale_up_only() {
        let mut p = pods(4, 1000);
        p[3].state = PodState::Running { ready: false };
        // Ready pods at 100 % of 50 %: ratio 2; with the unready one at 0 %: 300/4 = 75 % → 1.5 → 6.
        let m = usage(&[1000, 1000, 1000, 0]);
        assert_eq!(cpu(4, 50, &p, &m), 6);
        // Scale-down: the unready pod is left out: 3 pods at 10 % → ceil(3 × 0.2) = 1.
        let m = usage(&[100, 100, 100, 900]);
        assert_eq!(cpu(4, 50, &p, &m), 1);
        // Pending pods are unready too; deleted and failed ones do not count at all.
        p[3].state = PodState::Pending;
        assert_eq!(cpu(4, 50, &p, &usage(&[1000, 1000, 1000])), 6);
        p[3].state = PodState::Ignored;
        assert_eq!(cpu(4, 50, &p, &usage(&[1000, 1000, 1000, 0])), 6, "3 × 2.0");
        // Readiness only matters for CPU.
        p[3].state = PodState::Running { ready: false };
        let mem = resource_replicas(4, 50, "memory", &p, &usage(&[1000; 4]), 0.1, 1.0).expect("p");
        assert_eq!(mem.replicas, 8);
    }

    // Karmada's calibration: a template of 2 replicas duplicated into two members runs 4 pods;
    // the proposal is divided by 4 / 2 so the template (not the pod count) is what scales.
    #[test]
    fn calibration_divides_by_the_members_share_of_the_template() {
        let p = pods(4, 1000);
        let m = usage(&[1000; 4]);
        let got = resource_replicas(2, 50, "cpu", &p, &m, 0.1, 2.0).expect("p");
        assert_eq!(got.replicas, 4, "ceil(2.0 × 4 / 2)");
        let got = resource_replicas(2, 50, "cpu", &p, &m, 0.1, 0.0).expect("p");
        assert_eq!(got.replicas, 8, "a zero calibration counts as 1");
    }

    #[test]
    fn calculation_errors_say_why() {
        assert_eq!(
            resource_replicas(1, 50, "cpu", &[], &BTreeMap::new(), 0.1, 1.0),
            Err(Error::NoPods)
        );
        let mut p = pods(2, 1000);
        p[0].state = PodState::Pending;
        p[1].state = PodState::Pending;
        assert_eq!(
            resource_replicas(2, 50, "cpu", &p, &usage(&[1, 1]), 0.1, 1.0),
            Err(Error::NoReadyMetrics)
        );
        let mut p = pods(1, 1000);
        p[0].request = None;
        assert_eq!(
            resource_replicas(1, 50, "cpu", &p, &usage(&[1]), 0.1, 1.0),
            Err(Error::MissingRequest {
                resource: "cpu".into(),
                pod: "p0".into()
            })
        );
        assert_eq!(
            resource_replicas(1, 0, "cpu", &pods(1, 1), &usage(&[1]), 0.1, 1.0),
            Err(Error::InvalidTarget(0))
        );
        assert!(object_replicas(1, 1, 0, (1, 1), 0.1, 1.0).is_err());
    }

    // kube's replica_calculator_test.go cases for custom and external metrics (values in
    // milli-units, as the metrics client reads them).
    #[test]
    fn pods_metrics_average_over_the_pods_as_kube_tests() {
        let plain = |current, target, p: &[Pod], m: &BTreeMap<String, i64>| {
            plain_replicas(current, target, false, p, m, DEFAULT_TOLERANCE, 1.0).expect("p")
        };
        // ScaleUpCM: 20, 10, 30 of 15 per pod → 20 / 15 × 3 = 4.
        let got = plain(3, 15_000, &pods(3, 0), &usage(&[20_000, 10_000, 30_000]));
        assert_eq!((got.replicas, got.value), (4, 20_000));
        // ScaleUpCMUnreadyHotCpuNoLessScale: readiness does not matter outside CPU → 6.
        let mut p = pods(3, 0);
        p[2].state = PodState::Running { ready: false };
        let got = plain(3, 15_000, &p, &usage(&[50_000, 10_000, 30_000]));
        assert_eq!((got.replicas, got.value), (6, 30_000));
        // ScaleDownCM: five pods at 12 of 20 → 3.
        assert_eq!(
            plain(5, 20_000, &pods(5, 0), &usage(&[12_000; 5])).replicas,
            3
        );
        // ToleranceCM: 20, 21, 21 of 20 → within 10 % → 3.
        let got = plain(3, 20_000, &pods(3, 0), &usage(&[20_000, 21_000, 21_000]));
        assert_eq!((got.replicas, got.value), (3, 20_666));
        // A missing pod at exactly the target changes nothing (kube leaves it out).
        let got = plain(3, 10_000, &pods(3, 0), &usage(&[10_000, 10_000]));
        assert_eq!(got.replicas, 3);
        // On a scale-up a missing pod counts as 0: (30 + 30 + 0) / 3 = 20 of 10 → 6.
        let got = plain(3, 10_000, &pods(3, 0), &usage(&[30_000, 30_000]));
        assert_eq!(got.replicas, 6);
    }

    #[test]
    fn object_and_external_value_targets_scale_by_ready_pods() {
        let t = DEFAULT_TOLERANCE;
        // ScaleUpCMObject: 20 of 15 with 3 ready pods → 4.
        let got = object_replicas(3, 20_000, 15_000, (3, 3), t, 1.0).expect("p");
        assert_eq!((got.replicas, got.value), (4, 20_000));
        // ScaleUpCMObjectIgnoresUnreadyPods: 50 of 10 with one ready pod of three → 5.
        assert_eq!(
            object_replicas(3, 50_000, 10_000, (3, 1), t, 1.0)
                .expect("p")
                .replicas,
            5
        );
        // ToleranceCMObject: 20.666 of 20 → 3.
        assert_eq!(
            object_replicas(3, 20_666, 20_000, (3, 3), t, 1.0)
                .expect("p")
                .replicas,
            3
        );
        // ScaleUpCMExternal: 8600 of 4400 with 1 ready pod → 2; ScaleDownCMExternal: 8600 of
        // 14334 with 5 → 3; ToleranceCMExternal: 8600 of 8888 → 3.
        assert_eq!(
            object_replicas(1, 8_600, 4_400, (1, 1), t, 1.0)
                .expect("p")
                .replicas,
            2
        );
        assert_eq!(
            object_replicas(5, 8_600, 14_334, (5, 5), t, 1.0)
                .expect("p")
                .replicas,
            3
        );
        assert_eq!(
            object_replicas(3, 8_600, 8_888, (3, 3), t, 1.0)
                .expect("p")
                .replicas,
            3
        );
        // From zero replicas the ratio alone decides (and no pod is needed).
        assert_eq!(
            object_replicas(0, 30, 10, (0, 0), t, 1.0)
                .expect("p")
                .replicas,
            3
        );
        // A template duplicated into two members: 4 ready pods for 2 replicas → 30/10 × 4 / 2.
        assert_eq!(
            object_replicas(2, 30, 10, (4, 4), t, 2.0)
                .expect("p")
                .replicas,
            6
        );
        assert_eq!(
            object_replicas(2, 30, 10, (0, 0), t, 1.0),
            Err(Error::NoPods)
        );
        assert_eq!(
            object_replicas(2, 30, 0, (2, 2), t, 1.0),
            Err(Error::InvalidTarget(0))
        );
    }

    #[test]
    fn per_pod_targets_divide_the_total_as_kube_tests() {
        let t = DEFAULT_TOLERANCE;
        // ScaleUpPerPodCMExternal: 8600 over 3 pods, 2150 each → ceil(8600 / 2150) = 4, the
        // reported average ceil(8600 / 3) = 2867.
        let got = external_average_replicas(3, 8_600, 2_150, t, 1.0).expect("p");
        assert_eq!((got.replicas, got.value), (4, 2_867));
        // ScaleDownPerPodCMExternal: 8600 over 5 pods, 2867 each → 3, average 1720.
        let got = external_average_replicas(5, 8_600, 2_867, t, 1.0).expect("p");
        assert_eq!((got.replicas, got.value), (3, 1_720));
        // TolerancePerPodCMExternal: 8600 over 2 pods of 4300 → 2.
        assert_eq!(
            external_average_replicas(2, 8_600, 4_300, t, 1.0)
                .expect("p")
                .replicas,
            2
        );
        // Two members running 4 pods of a 2-replica template: 8600 / 1000 = 9 pods → 5 replicas.
        assert_eq!(
            external_average_replicas(4, 8_600, 1_000, t, 2.0)
                .expect("p")
                .replicas,
            5
        );
        // Object averageValue: as external with calibration 1 ...
        let got = object_average_replicas(3, 8_600, 2_150, t, 1.0).expect("p");
        assert_eq!((got.replicas, got.value), (4, 2_867));
        assert_eq!(
            object_average_replicas(3, 31, 10, t, 1.0)
                .expect("p")
                .replicas,
            3,
            "31 / 30 is within the tolerance"
        );
        // ... and Karmada's double calibration otherwise: ceil(ceil(8600 / 1000 / 2) / 2) = 3,
        // while within the tolerance the 4 member pods are 2 replicas.
        assert_eq!(
            object_average_replicas(4, 8_600, 1_000, t, 2.0)
                .expect("p")
                .replicas,
            3
        );
        assert_eq!(
            object_average_replicas(4, 4_000, 1_000, t, 2.0)
                .expect("p")
                .replicas,
            2
        );
        // No pods: the total is the average, and the count follows the total.
        let got = external_average_replicas(0, 5_000, 1_000, t, 1.0).expect("p");
        assert_eq!((got.replicas, got.value), (5, 5_000));
        assert!(external_average_replicas(1, 1, 0, t, 1.0).is_err());
        assert!(object_average_replicas(1, 1, -1, t, 1.0).is_err());
    }

    // "if there are multiple metrics, the HPA calculates the desired count for each and uses
    // the largest"; a failed metric never lets the others scale down.
    #[test]
    fn several_metrics_take_the_largest_and_failures_block_a_scale_down() {
        assert_eq!(
            combine(4, &[Some(3), Some(7), Some(5)]),
            Combined::Scale {
                replicas: 7,
                by: 1,
                failed: 0
            }
        );
        assert_eq!(
            combine(4, &[Some(6), None]),
            Combined::Scale {
                replicas: 6,
                by: 0,
                failed: 1
            }
        );
        assert_eq!(
            combine(4, &[Some(2), None]),
            Combined::Failed {
                first_failed: 1,
                failed: 1
            }
        );
        assert_eq!(
            combine(4, &[None, None]),
            Combined::Failed {
                first_failed: 0,
                failed: 2
            }
        );
    }

    const S: i64 = 1000;

    #[test]
    fn without_behavior_a_scale_down_waits_for_the_window_and_a_scale_up_is_capped() {
        let mut h = History::default();
        h.record_initial(10, 0);
        // Down to 4 at t = 60 s: the recommendation of 10 (t = 0) is within 300 s.
        let n = normalize(&mut h, 60 * S, 10, 4, 1, 20, 300);
        assert_eq!(n.replicas, 10);
        assert_eq!(n.able_to_scale.reason, "ScaleDownStabilized");
        // At t = 301 s the first sample is out of the window, but t = 60 s's 4 is in: 4.
        let n = normalize(&mut h, 301 * S, 10, 4, 1, 20, 300);
        assert_eq!(n.replicas, 4);
        assert_eq!(n.able_to_scale.reason, "ReadyForNewScale");
        assert!(!n.scaling_limited.status);
        assert_eq!(n.scaling_limited.reason, "DesiredWithinRange");
        // Up from 4 to 50: at most max(2 × 4, 4) = 8.
        let n = normalize(&mut h, 302 * S, 4, 50, 1, 20, 300);
        assert_eq!(n.replicas, 8);
        assert!(n.scaling_limited.status);
        assert_eq!(n.scaling_limited.reason, "ScaleUpLimit");
        // maxReplicas below the rate limit: TooManyReplicas.
        let n = normalize(&mut History::default(), 0, 10, 50, 1, 12, 300);
        assert_eq!(
            (n.replicas, n.scaling_limited.reason),
            (12, "TooManyReplicas")
        );
        let n = normalize(&mut History::default(), 0, 3, 1, 2, 12, 300);
        assert_eq!(
            (n.replicas, n.scaling_limited.reason),
            (2, "TooFewReplicas")
        );
    }

    fn behavior(up: Rules, down: Rules) -> Behavior {
        Behavior {
            scale_up: up,
            scale_down: down,
        }
    }

    // The HPA documentation's scale-down example: policies Pods 4 / 60 s and Percent 10 / 60 s
    // (selectPolicy Max): from 80 replicas the first step removes 8 (10 %), from 72 the next
    // removes 8 again (7.2 rounded up), and below 40 the Pods policy's 4 wins.
    #[test]
    fn the_documented_scale_down_policies_remove_the_larger_step() {
        let down = Rules {
            stabilization_window_seconds: 0,
            select: Select::Max,
            policies: vec![
                Policy {
                    kind: PolicyType::Pods,
                    value: 4,
                    period_seconds: 60,
                },
                Policy {
                    kind: PolicyType::Percent,
                    value: 10,
                    period_seconds: 60,
                },
            ],
        };
        let b = behavior(Behavior::default_scale_up(), down);
        let mut h = History::default();
        let mut current = 80;
        let mut t = 0;
        let mut steps = Vec::new();
        for _ in 0..4 {
            let n = normalize_with_behavior(&mut h, &b, t, current, 10, 1, 100);
            h.record_scale(&b, current, n.replicas, t);
            steps.push(n.replicas);
            current = n.replicas;
            t += 61 * S; // each step in a new period
        }
        assert_eq!(steps, vec![72, 64, 57, 51]);
        let n = normalize_with_behavior(&mut History::default(), &b, 0, 38, 10, 1, 100);
        assert_eq!(n.replicas, 34, "below 40 the Pods policy removes more");
        assert_eq!(n.scaling_limited.reason, "ScaleDownLimit");
        // Within one period the removals add up: no second step before 60 s have passed.
        let mut h = History::default();
        let n = normalize_with_behavior(&mut h, &b, 0, 80, 10, 1, 100);
        h.record_scale(&b, 80, n.replicas, 0);
        let again = normalize_with_behavior(&mut h, &b, 30 * S, n.replicas, 10, 1, 100);
        assert_eq!(again.replicas, 72);
    }

    // The defaults: scale up by at most 4 pods or 100 % per 15 s, whichever is more.
    #[test]
    fn default_scale_up_allows_four_pods_or_doubling() {
        let b = behavior(
            Behavior::default_scale_up(),
            Behavior::default_scale_down(300),
        );
        let n = normalize_with_behavior(&mut History::default(), &b, 0, 1, 20, 1, 100);
        assert_eq!(n.replicas, 5, "1 + 4 beats 1 × 2");
        let n = normalize_with_behavior(&mut History::default(), &b, 0, 10, 40, 1, 100);
        assert_eq!(n.replicas, 20, "10 × 2 beats 10 + 4");
        assert_eq!(n.scaling_limited.reason, "ScaleUpLimit");
        let n = normalize_with_behavior(&mut History::default(), &b, 0, 10, 40, 1, 15);
        assert_eq!(
            (n.replicas, n.scaling_limited.reason),
            (15, "TooManyReplicas")
        );
    }

    // selectPolicy Min picks the smallest change; Disabled stops the direction altogether
    // (the documentation's "scaleDown: selectPolicy: Disabled").
    #[test]
    fn select_policy_min_and_disabled() {
        let up = Rules {
            stabilization_window_seconds: 0,
            select: Select::Min,
            policies: Behavior::default_scale_up().policies,
        };
        let b = behavior(up, Behavior::default_scale_down(0));
        let n = normalize_with_behavior(&mut History::default(), &b, 0, 10, 40, 1, 100);
        assert_eq!(n.replicas, 14, "10 + 4 is less than 10 × 2");
        let down = Rules {
            select: Select::Disabled,
            ..Behavior::default_scale_down(0)
        };
        let b = behavior(Behavior::default_scale_up(), down);
        let n = normalize_with_behavior(&mut History::default(), &b, 0, 10, 2, 1, 100);
        assert_eq!(n.replicas, 10);
        assert_eq!(n.scaling_limited.reason, "ScaleDownLimit");
        // The documentation's Percent 900 scale-up: 1 → 10 in one step.
        let up = Rules {
            stabilization_window_seconds: 0,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyType::Percent,
                value: 900,
                period_seconds: 60,
            }],
        };
        let b = behavior(up, Behavior::default_scale_down(0));
        let n = normalize_with_behavior(&mut History::default(), &b, 0, 1, 100, 1, 100);
        assert_eq!(n.replicas, 10);
    }

    // Stabilization windows: a scale-down takes the highest recommendation of its window, a
    // scale-up the lowest of its own.
    #[test]
    fn stabilization_windows_hold_both_directions() {
        let up = Rules {
            stabilization_window_seconds: 60,
            ..Behavior::default_scale_up()
        };
        let b = behavior(up, Behavior::default_scale_down(120));
        let mut h = History::default();
        h.record_initial(5, 0);
        // Up to 8 at t = 10 s: the lowest recent recommendation is 5 → stays.
        let n = normalize_with_behavior(&mut h, &b, 10 * S, 5, 8, 1, 100);
        assert_eq!(n.replicas, 5);
        assert_eq!(n.able_to_scale.reason, "ScaleUpStabilized");
        // At t = 61 s the 5 has left the scale-up window; 8 (t = 10 s) and 9 → 8.
        let n = normalize_with_behavior(&mut h, &b, 61 * S, 5, 9, 1, 100);
        assert_eq!(n.replicas, 8);
        // Down to 2 at t = 100 s: 9 (t = 61 s) is within the 120 s window → stays at 8.
        let n = normalize_with_behavior(&mut h, &b, 100 * S, 8, 2, 1, 100);
        assert_eq!(n.replicas, 8);
        assert_eq!(n.able_to_scale.reason, "ScaleDownStabilized");
        // At t = 182 s only 2 (t = 100 s) and 2 remain in the window.
        let n = normalize_with_behavior(&mut h, &b, 182 * S, 8, 2, 1, 100);
        assert_eq!(n.replicas, 2);
        assert_eq!(n.able_to_scale.reason, "ReadyForNewScale");
    }

    #[test]
    fn cpu_readiness_follows_the_initialization_period() {
        // Started 10 s ago (within 300 s): counts only when ready and sampled a window later.
        assert!(!cpu_ready(100, Some(90), Some(true), 95, 100, 30, 300, 30));
        assert!(cpu_ready(200, Some(90), Some(true), 95, 130, 30, 300, 30));
        assert!(!cpu_ready(200, Some(90), Some(false), 95, 130, 30, 300, 30));
        // Long started: unready only if it has never been ready.
        assert!(cpu_ready(1000, Some(0), Some(true), 10, 990, 30, 300, 30));
        assert!(!cpu_ready(1000, Some(0), Some(false), 10, 990, 30, 300, 30));
        assert!(cpu_ready(1000, Some(0), Some(false), 500, 990, 30, 300, 30));
        assert!(!cpu_ready(1000, None, Some(true), 0, 990, 30, 300, 30));
    }

    #[test]
    fn hostile_numbers_saturate_instead_of_overflowing() {
        let p = pods(2, 1);
        let m = usage(&[i64::MAX, i64::MAX]);
        let got = resource_replicas(i32::MAX, 1, "cpu", &p, &m, 0.1, 1.0).expect("p");
        assert_eq!(got.replicas, i32::MAX);
        let b = behavior(
            Behavior::default_scale_up(),
            Behavior::default_scale_down(0),
        );
        let n = normalize_with_behavior(&mut History::default(), &b, 0, i32::MAX, 1, 1, i32::MAX);
        assert!(n.replicas >= 1);
        let mut h = History::default();
        for t in 0..(MAX_HISTORY as i64 + 10) {
            normalize(&mut h, t, 1, 1, 1, 1, i64::MAX);
        }
        assert!(h.recommendations.len() <= MAX_HISTORY);
    }
}
