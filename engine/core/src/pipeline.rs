//! The one decision pipeline: `flotilla plan`, `flotilla explain` and the live controllers all
//! decide through [`decide`] and render through [`render`], against a long-lived [`Snapshot`].
//!
//! A [`Snapshot`] holds what changes rarely — the admitted clusters (sorted by name, capacity
//! parsed once), the scheduler profiles, the options — under one generation. It is rebuilt when
//! clusters or profiles change, never per binding, so per-generation caches (the Wasm host's
//! serialized cluster set, plugin memos) stay warm across bindings. Everything a plugin reads
//! (the template for CEL, snapshot rows for Wasm) comes through here, so live and offline cannot
//! differ by construction: the callers only differ in where the inputs come from and where the
//! results are written.

use std::collections::BTreeMap;
use std::sync::Arc;

use flotilla_api::Object;
use flotilla_api::cluster::Cluster;
use flotilla_api::labels;
use flotilla_api::work::{ResourceBinding, Work};

use crate::estimator::Capacity;
use crate::failover;
use crate::framework::Profile;
use crate::overrides::OverridePolicies;
use crate::render::RenderError;
use crate::scheduler::{self, Failure, FailureKind, SUCCESS_MESSAGE, Trace};
use crate::time::format_rfc3339;

/// Pipeline options (Karmada's scheduler and controller-manager flags).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Karmada's `--enable-empty-workload-propagation`: keep selected clusters with 0 replicas.
    pub empty_workload_propagation: bool,
    /// Karmada's `--enable-no-execute-taint-eviction`: the taint manager evicts from clusters
    /// with untolerated NoExecute taints.
    pub taint_eviction: bool,
    /// Karmada's feature gates (priority-based scheduling, policy preemption).
    pub gates: crate::priority::FeatureGates,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            empty_workload_propagation: false,
            taint_eviction: true,
            gates: crate::priority::FeatureGates::default(),
        }
    }
}

/// `cluster`'s parsed capacity with `freed` pods, and its ResourceQuotas under the
/// `ResourceQuotaEstimate` gate.
fn capacity_of(
    cluster: &Cluster,
    freed: Vec<crate::estimator::FreedPods>,
    options: &Options,
) -> Capacity {
    let cap = Capacity::with_freed(cluster, freed);
    if options.gates.resource_quota_estimate {
        cap.with_quotas(cluster)
    } else {
        cap
    }
}

/// Source of [`Snapshot`] generations (0 is never handed out).
static NEXT_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The cluster set, profiles and options every decision reads, under one process-unique
/// generation: the same generation always denotes the same clusters with the same content.
#[derive(Debug, Clone)]
pub struct Snapshot {
    clusters: Vec<Cluster>,
    capacity: Vec<Capacity>,
    generation: u64,
    profiles: Arc<Vec<Profile>>,
    options: Options,
    /// The clusters' index, built on first use (clones share it, as they share the generation).
    index: Arc<std::sync::OnceLock<crate::cluster_index::ClusterIndex>>,
}

impl Snapshot {
    /// Snapshot `clusters` (any order; kept sorted by name) with the served `profiles`.
    pub fn new(mut clusters: Vec<Cluster>, profiles: Arc<Vec<Profile>>, options: Options) -> Self {
        clusters.sort_by(|a, b| a.name().cmp(b.name()));
        let capacity = clusters
            .iter()
            .map(|c| capacity_of(c, Vec::new(), &options))
            .collect();
        let generation = NEXT_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Snapshot {
            clusters,
            capacity,
            generation,
            profiles,
            options,
            index: Arc::default(),
        }
    }

    /// This snapshot with `cluster` in place of the cluster of the same name (a new generation:
    /// the content differs). Binding preemption decides on such "what if" snapshots.
    pub fn with_cluster(&self, cluster: Cluster) -> Snapshot {
        self.with_freed(cluster, Vec::new())
    }

    /// [`Snapshot::with_cluster`] where `freed` pods have just left `cluster`: the estimator's
    /// resource-model path counts the room they leave ([`crate::estimator::FreedPods`]); the
    /// resource summary of `cluster` must already have them given back.
    pub fn with_freed(
        &self,
        cluster: Cluster,
        freed: Vec<crate::estimator::FreedPods>,
    ) -> Snapshot {
        let mut clusters = self.clusters.clone();
        let mut capacity = self.capacity.clone();
        let cap = capacity_of(&cluster, freed, &self.options);
        match clusters.binary_search_by(|c| c.name().cmp(cluster.name())) {
            Ok(i) => {
                capacity[i] = cap;
                clusters[i] = cluster;
            }
            Err(i) => {
                capacity.insert(i, cap);
                clusters.insert(i, cluster);
            }
        }
        Snapshot {
            clusters,
            capacity,
            generation: NEXT_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            profiles: self.profiles.clone(),
            options: self.options,
            index: Arc::default(),
        }
    }

    /// Process-unique identity of this snapshot (clones share it: they hold the same data).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The clusters, sorted by name.
    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    /// Each cluster's parsed capacity, in [`Snapshot::clusters`] order.
    pub fn capacity(&self) -> &[Capacity] {
        &self.capacity
    }

    /// The cluster named `name`.
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters
            .binary_search_by(|c| c.name().cmp(name))
            .ok()
            .map(|i| &self.clusters[i])
    }

    /// The served profiles.
    pub fn profiles(&self) -> &Arc<Vec<Profile>> {
        &self.profiles
    }

    /// The profile answering to `scheduler_name`.
    pub fn profile(&self, scheduler_name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name == scheduler_name)
    }

    /// The options.
    pub fn options(&self) -> Options {
        self.options
    }

    /// The snapshot as plugins see it ([`crate::framework::BindingContext::snapshot`]).
    pub fn plugin_view(&self) -> crate::framework::ClusterSnapshot<'_> {
        crate::framework::ClusterSnapshot {
            generation: self.generation,
            clusters: &self.clusters,
            index: &self.index,
        }
    }
}

/// "Now", in epoch milliseconds (the taint manager and graceful eviction decide in whole seconds,
/// application failover in milliseconds, as Karmada does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Epoch milliseconds.
    pub now_ms: i64,
}

impl Clock {
    /// At `now` epoch seconds.
    pub fn at_secs(now: i64) -> Self {
        Clock {
            now_ms: now.saturating_mul(1000),
        }
    }

    /// Epoch seconds.
    pub fn secs(self) -> i64 {
        self.now_ms.div_euclid(1000)
    }
}

/// Application failover's memory of one binding: when each cluster was first seen unhealthy
/// (epoch milliseconds). The controller keeps one per binding across reconciles; an offline plan
/// starts from an empty one, as a freshly started controller does.
pub type FailoverMemory = BTreeMap<String, i64>;

/// What [`decide`] did to a binding. The binding itself carries the result (`spec.clusters`,
/// eviction tasks, the applied-placement annotation, `status`); this says which parts changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Clusters the taint manager evicted.
    pub taint_evicted: Vec<String>,
    /// Clusters application failover evicted.
    pub app_evicted: Vec<String>,
    /// Failover changed `spec.clusters` or `spec.gracefulEvictionTasks` (a new generation).
    pub failover_changed: bool,
    /// The scheduler ran (Karmada skips unchanged Divided bindings).
    pub scheduled: bool,
    /// The scheduler wrote `spec.clusters` and the applied-placement annotation.
    pub clusters_written: bool,
    /// The scheduling outcome, when it ran.
    pub outcome: Option<Result<(), Failure>>,
    /// Faults of `Ignore` plugins.
    pub ignored_faults: Vec<String>,
    /// When (epoch milliseconds) a failover decision is next due, if any.
    pub next_due_ms: Option<i64>,
    /// The loaded plugin versions of the profile that wrote the placement
    /// ([`labels::PLACED_BY`]), when it wrote one with any.
    pub placed_by: Option<String>,
}

impl Decision {
    /// Metrics index of the outcome: 0 scheduled, 1 unschedulable, 2 error.
    pub fn result_index(&self) -> Option<usize> {
        self.outcome.as_ref().map(|o| match o {
            Ok(()) => 0,
            Err(f) if f.kind == FailureKind::SchedulerError => 2,
            Err(_) => 1,
        })
    }
}

/// Decide one binding: taint manager and application failover, eviction-task assessment, then —
/// when Karmada's triggers say so — scheduling with the profile its `schedulerName` names.
/// `template` is the resource template (CEL expressions see it as `object`); `trace` records the
/// scheduler's steps for `flotilla explain`.
///
/// An eviction changes the spec (a new generation the scheduler has not observed yet), so the new
/// tasks are assessed from the next decision on, not against the pre-eviction status.
pub fn decide(
    snapshot: &Snapshot,
    rb: &mut ResourceBinding,
    template: Option<&Object>,
    clock: Clock,
    memory: &mut FailoverMemory,
    trace: Option<&mut Trace>,
) -> Decision {
    let mut d = Decision::default();
    let now_secs = clock.secs();
    let (clusters_before, tasks_before) = (
        rb.spec.clusters.clone(),
        rb.spec.graceful_eviction_tasks.clone(),
    );
    let mut due: Option<i64> = None;
    if snapshot.options.taint_eviction {
        let (evicted, next) = failover::evict_tainted_with(rb, |n| snapshot.cluster(n), now_secs);
        d.taint_evicted = evicted;
        due = next.map(|s| s.saturating_mul(1000));
    }
    let (app_evicted, app_due) = failover::application_failover(rb, memory, clock.now_ms);
    d.app_evicted = app_evicted;
    d.next_due_ms = match (due, app_due) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if d.taint_evicted.is_empty() && d.app_evicted.is_empty() {
        failover::assess_eviction_tasks(rb, now_secs);
    }
    d.failover_changed =
        rb.spec.clusters != clusters_before || rb.spec.graceful_eviction_tasks != tasks_before;
    let mut generation = rb.metadata.generation.unwrap_or(1);
    if d.failover_changed {
        generation += 1;
    }
    rb.metadata.generation = Some(generation);

    d.scheduled = scheduler::needs_scheduling(rb, snapshot);
    let now = format_rfc3339(now_secs);
    let mut status = rb.status.take().unwrap_or_default();
    if d.scheduled {
        match snapshot.profile(&rb.spec.scheduler_name) {
            None => {
                let message = format!("no scheduler profile named {:?}", rb.spec.scheduler_name);
                set_scheduled(
                    &mut status,
                    false,
                    FailureKind::SchedulerError.reason(),
                    &message,
                    &now,
                    generation,
                );
                d.outcome = Some(Err(Failure {
                    kind: FailureKind::SchedulerError,
                    message,
                }));
            }
            Some(profile) => {
                let res = scheduler::schedule(
                    snapshot,
                    profile,
                    &rb.spec,
                    &status,
                    template.map(|t| &t.0),
                    trace,
                );
                if let Some(c) = res.clusters_to_write() {
                    rb.spec.clusters = c;
                    let placement = match &rb.spec.placement {
                        Some(p) => serde_json::to_string(p),
                        None => serde_json::to_string(&flotilla_api::policy::Placement::default()),
                    }
                    .unwrap_or_default();
                    rb.metadata
                        .annotations
                        .insert(labels::APPLIED_PLACEMENT.to_owned(), placement);
                    d.placed_by = profile.placed_by();
                    match &d.placed_by {
                        Some(v) => {
                            rb.metadata
                                .annotations
                                .insert(labels::PLACED_BY.to_owned(), v.clone());
                        }
                        None => {
                            rb.metadata.annotations.remove(labels::PLACED_BY);
                        }
                    }
                    d.clusters_written = true;
                }
                status.scheduler_observing_affinity_name = res.observed_affinity_name;
                match &res.outcome {
                    Ok(_) => {
                        set_scheduled(
                            &mut status,
                            true,
                            "Success",
                            SUCCESS_MESSAGE,
                            &now,
                            generation,
                        );
                        status.last_scheduled_time = Some(now.clone());
                    }
                    Err(f) => set_scheduled(
                        &mut status,
                        false,
                        f.kind.reason(),
                        &f.message,
                        &now,
                        generation,
                    ),
                }
                d.outcome = Some(res.outcome.map(|_| ()));
                d.ignored_faults = res.ignored_faults;
            }
        }
    }
    status.scheduler_observed_generation = generation;
    rb.status = Some(status);
    d
}

/// Render a scheduled binding's Works (overrides applied by the profile its `schedulerName` names,
/// or the first served profile): one per entry of `spec.clusters`, in that order, each cluster's
/// replicas revised through `interpreters`.
pub fn render(
    snapshot: &Snapshot,
    rb: &ResourceBinding,
    template: &Object,
    overrides: &OverridePolicies,
    interpreters: &crate::interpreter::Interpreters,
) -> Vec<Result<Work, RenderError>> {
    let Some(profile) = snapshot
        .profile(&rb.spec.scheduler_name)
        .or_else(|| snapshot.profiles.first())
    else {
        return Vec::new();
    };
    crate::render::render_works(rb, template, snapshot, overrides, profile, interpreters)
}

/// Set the `Scheduled` condition, keeping the transition time when the status did not flip.
pub fn set_scheduled(
    status: &mut flotilla_api::work::ResourceBindingStatus,
    ok: bool,
    reason: &str,
    message: &str,
    now: &str,
    generation: i64,
) {
    let cond = flotilla_api::meta::Condition {
        type_: "Scheduled".into(),
        status: if ok { "True" } else { "False" }.into(),
        observed_generation: Some(generation),
        last_transition_time: Some(now.to_owned()),
        reason: reason.into(),
        message: message.into(),
    };
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == "Scheduled")
    {
        Some(c) => {
            let keep = (c.status == cond.status)
                .then(|| c.last_transition_time.clone())
                .flatten();
            *c = cond;
            if keep.is_some() {
                c.last_transition_time = keep;
            }
        }
        None => status.conditions.push(cond),
    }
}
