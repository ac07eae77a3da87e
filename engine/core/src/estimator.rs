//! Available-replica estimation: Karmada's `general-estimator` (`pkg/estimator/client/general.go`)
//! merged as `calAvailableReplicas` (`pkg/scheduler/core/util.go`) does.
//!
//! Per cluster, the general estimator reads `status.resourceSummary`:
//! * no summary → 0;
//! * `allowedPods = allocatable.pods − allocated.pods − allocating.pods`, ≤ 0 → 0;
//! * no `replicaRequirements` → `allowedPods`;
//! * with `allocatableModelings` (gate `CustomizedClusterResourceModeling`, on by default): one
//!   virtual node per modelled node, with the grade's `min` vector and 110 pods, packed first-fit
//!   with 1-pod replicas → `min(allowedPods, packed)`; on a model error, fall through;
//! * summary path: per requested resource, `⌊(allocatable − allocated − allocating) / request⌋`
//!   (CPU in milli-units, everything else in whole units rounded up), minimum over resources and
//!   `allowedPods`.
//!
//! The result is truncated to `int32` as Go does, `-1` is ignored, and anything still at
//! `MaxInt32` becomes `spec.replicas`. A workload with `replicas == 0` and no components skips
//! estimation and gets `MaxInt32` everywhere.
//!
//! A multi-component workload scheduled to exactly one cluster
//! ([`crate::component_sets::applicable`]) is estimated in complete component sets instead
//! ([`crate::component_sets::max_sets`], Karmada's `MaxAvailableComponentSets`); other component
//! workloads have no replica requirements here and get `allowedPods`, as in Karmada.
//!
//! Unparseable quantities count as 0 (never a panic); Kubernetes' API validation makes them
//! impossible on real objects.

use flotilla_api::cluster::{Cluster, ResourceModel, ResourceSummary};
use flotilla_api::meta::{Quantity, QuantityRepr, ResourceList};
use flotilla_api::work::ResourceBindingSpec;

use crate::quantity::{NANO_PER_UNIT, nano_to_milli, nano_to_value, parse_nano};

/// `math.MaxInt32`, the "no estimate" boundary.
pub const MAX_INT32: i64 = i32::MAX as i64;

/// Kubernetes' default pod capacity per node, used for resource-model virtual nodes.
pub(crate) const MAX_PODS_PER_NODE: i64 = 110;

const CPU: &str = "cpu";
const MEMORY: &str = "memory";
const PODS: &str = "pods";
const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

const GIB: i128 = 1 << 30;

/// Karmada's default resource models (`SetDefaultClusterResourceModels`), applied by Karmada to
/// every cluster created without `spec.resourceModels`: `(grade, min cpu milli, min memory bytes)`.
pub(crate) const DEFAULT_MODELS: [(u32, i128, i128); 9] = [
    (0, 0, 0),
    (1, 1_000, 4 * GIB),
    (2, 2_000, 16 * GIB),
    (3, 4_000, 32 * GIB),
    (4, 8_000, 64 * GIB),
    (5, 16_000, 128 * GIB),
    (6, 32_000, 256 * GIB),
    (7, 64_000, 512 * GIB),
    (8, 128_000, 1024 * GIB),
];

/// How a requested resource is measured by Karmada's `util.Resource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// CPU, in milli-units.
    Cpu,
    /// Memory, ephemeral storage and scalar (extended, hugepages, attachable volumes) resources,
    /// in whole units.
    Units,
    /// Anything else (including `pods`): ignored by the model simulator.
    Ignored,
}

/// One requested resource, parsed once per binding.
#[derive(Debug)]
struct Request<'a> {
    name: &'a str,
    /// `Quantity.Value()` of the request (the summary path's "> 0" guard).
    value: i128,
    /// The request in the unit the comparison uses (milli for CPU, whole units otherwise).
    amount: i128,
    kind: Kind,
}

/// Karmada's `IsScalarResourceName` (extended, hugepages, attachable volumes, prefixed native).
fn is_scalar_resource(name: &str) -> bool {
    name.contains('/') || name.starts_with("hugepages-") || name.starts_with("attachable-volumes-")
}

fn kind_of(name: &str) -> Kind {
    match name {
        CPU => Kind::Cpu,
        MEMORY | EPHEMERAL_STORAGE => Kind::Units,
        PODS => Kind::Ignored,
        n if is_scalar_resource(n) => Kind::Units,
        _ => Kind::Ignored,
    }
}

pub(crate) fn nano(q: &Quantity) -> i128 {
    match &q.0 {
        QuantityRepr::String(s) => parse_nano(s).unwrap_or(0),
        QuantityRepr::Int(i) => i128::from(*i) * NANO_PER_UNIT,
    }
}

fn nano_of(list: &ResourceList, name: &str) -> Option<i128> {
    list.get(name).map(nano)
}

/// Estimate, per cluster (same order), how many replicas of `spec` it can still take, exactly as
/// Karmada's `calAvailableReplicas` with only the general estimator registered.
pub fn available_replicas(clusters: &[&Cluster], spec: &ResourceBindingSpec) -> Vec<i64> {
    if spec.replicas == 0 && spec.components.is_empty() {
        return vec![MAX_INT32; clusters.len()];
    }
    if crate::component_sets::applicable(spec) {
        let set = crate::component_sets::ComponentSet::parse(&spec.components);
        return clusters
            .iter()
            .map(|c| merge_estimate(crate::component_sets::max_sets(c, &set), spec))
            .collect();
    }
    let requests = parse_requests(spec);
    clusters
        .iter()
        .map(|c| {
            let estimate = general_estimate(c, requests.as_deref(), &[]);
            // The estimator returns int32 (Go truncation); -1 means "no opinion".
            let mut v = MAX_INT32;
            if estimate != -1 && i64::from(estimate) < v {
                v = i64::from(estimate);
            }
            if v == MAX_INT32 {
                i64::from(spec.replicas)
            } else {
                v
            }
        })
        .collect()
}

/// A cluster's resource summary parsed once per cluster revision, so that estimating a binding
/// over many clusters does not re-parse quantity strings (the scheduler's hot path).
#[derive(Debug, Clone, Default)]
pub struct Capacity {
    parsed: Option<ParsedSummary>,
    /// Pods a "what if" snapshot frees on the cluster (binding preemption).
    freed: Vec<FreedPods>,
    /// The member's ResourceQuotas, when the `ResourceQuotaEstimate` gate is on
    /// ([`Capacity::with_quotas`]).
    quotas: Option<std::sync::Arc<crate::component_sets::MemberQuotas>>,
    /// Why the member's quota annotation could not be read (the estimate then ignores quotas).
    quota_error: Option<String>,
}

/// `count` pods that each requested `requests` (nano-units), freed on a cluster by a "what if"
/// snapshot of binding preemption ([`crate::pipeline::Snapshot::with_freed`]).
///
/// The resource summary already gives their requests back; resource models cannot, since they
/// count nodes by grade and do not say which nodes the pods ran on. So with resource models each
/// freed pod counts as one more virtual node holding exactly what that pod requested (and, as
/// every modelled node, 110 pods): the room it surely leaves on whatever node it ran on, added
/// to the model's nodes as they are. It never counts the same room twice nor credits room that
/// is not there; it undercounts when freed pods shared a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreedPods {
    /// Per resource (not `pods`), what one pod requested, in nano-units.
    pub requests: Vec<(String, i128)>,
    /// How many such pods.
    pub count: i128,
}

#[derive(Debug, Clone)]
struct ParsedSummary {
    allowed_pods: i128,
    has_modelings: bool,
    /// Per allocatable resource: allocatable − allocated − allocating, in nano-units.
    available: Vec<(String, i128)>,
}

impl Capacity {
    /// Parse `cluster`'s `status.resourceSummary`.
    pub fn of(cluster: &Cluster) -> Self {
        let parsed = cluster
            .status
            .as_ref()
            .and_then(|s| s.resource_summary.as_ref())
            .map(|s| ParsedSummary {
                allowed_pods: allowed_pods(s),
                has_modelings: !s.allocatable_modelings.is_empty(),
                available: s
                    .allocatable
                    .iter()
                    .map(|(name, q)| {
                        let avail = nano(q)
                            - nano_of(&s.allocated, name).unwrap_or(0)
                            - nano_of(&s.allocating, name).unwrap_or(0);
                        (name.clone(), avail)
                    })
                    .collect(),
            });
        Capacity {
            parsed,
            freed: Vec::new(),
            quotas: None,
            quota_error: None,
        }
    }

    /// This capacity with `cluster`'s ResourceQuotas ([`flotilla_api::labels::RESOURCE_QUOTAS`])
    /// capping the estimates, as Karmada's scheduler-estimator does under the
    /// `ResourceQuotaEstimate` gate. A malformed annotation is recorded
    /// ([`Capacity::quota_error`]) and quotas are then not applied.
    #[must_use]
    pub fn with_quotas(mut self, cluster: &Cluster) -> Self {
        match crate::component_sets::MemberQuotas::of(cluster) {
            Ok(q) => self.quotas = q.map(std::sync::Arc::new),
            Err(e) => self.quota_error = Some(e),
        }
        self
    }

    /// Why the cluster's quota annotation was not applied, if it was not.
    pub fn quota_error(&self) -> Option<&str> {
        self.quota_error.as_deref()
    }

    /// [`Capacity::of`] with `freed` pods' room counted by the resource-model path.
    pub fn with_freed(cluster: &Cluster, freed: Vec<FreedPods>) -> Self {
        Capacity {
            freed,
            ..Capacity::of(cluster)
        }
    }

    /// The freed pods of a "what if" snapshot (empty otherwise).
    pub fn freed(&self) -> &[FreedPods] {
        &self.freed
    }
}

/// [`available_replicas`] with capacities parsed ahead of time ([`Capacity::of`]), same results.
pub fn available_replicas_with(
    clusters: &[(&Cluster, &Capacity)],
    spec: &ResourceBindingSpec,
) -> Vec<i64> {
    if spec.replicas == 0 && spec.components.is_empty() {
        return vec![MAX_INT32; clusters.len()];
    }
    if crate::component_sets::applicable(spec) {
        let set = crate::component_sets::ComponentSet::parse(&spec.components);
        return clusters
            .iter()
            .map(|(c, cap)| {
                let mut sets = crate::component_sets::max_sets_with(c, &set, &cap.freed);
                if let Some(q) = &cap.quotas {
                    // The scheduler-estimator's answer joins the general one: the smaller wins.
                    sets = sets.min(q.sets(&spec.resource.namespace, &spec.components));
                }
                merge_estimate(sets, spec)
            })
            .collect();
    }
    let requests = parse_requests(spec);
    // `replicaRequirements.namespace` (the detector fills it with the template's under the gate).
    let quota_namespace = spec
        .replica_requirements
        .as_ref()
        .map(|rr| rr.namespace.as_str())
        .filter(|ns| !ns.is_empty())
        .unwrap_or(&spec.resource.namespace);
    let quota_requirements = clusters
        .iter()
        .any(|(_, cap)| cap.quotas.is_some())
        .then(|| {
            spec.replica_requirements
                .as_ref()
                .and_then(|rr| serde_json::to_value(rr).ok())
        })
        .flatten();
    clusters
        .iter()
        .map(|(c, cap)| {
            let estimate = match &cap.parsed {
                None => 0,
                Some(p) if p.has_modelings => general_estimate(c, requests.as_deref(), &cap.freed),
                Some(p) => cached_estimate(p, requests.as_deref()),
            };
            let mut v = if estimate != -1 && i64::from(estimate) < MAX_INT32 {
                i64::from(estimate)
            } else {
                MAX_INT32
            };
            if let Some(q) = &cap.quotas {
                // The scheduler-estimator's answer joins the general one: the smaller wins.
                v = v.min(i64::from(
                    q.replicas(quota_namespace, quota_requirements.as_ref()),
                ));
            }
            if v == MAX_INT32 {
                i64::from(spec.replicas)
            } else {
                v
            }
        })
        .collect()
}

/// `calAvailableReplicas`' merge of one estimate: `-1` is ignored, and a cluster still at
/// `MaxInt32` gets `spec.replicas`.
fn merge_estimate(estimate: i32, spec: &ResourceBindingSpec) -> i64 {
    if estimate != -1 && i64::from(estimate) < MAX_INT32 {
        i64::from(estimate)
    } else {
        i64::from(spec.replicas)
    }
}

fn parse_requests(spec: &ResourceBindingSpec) -> Option<Vec<Request<'_>>> {
    spec.replica_requirements.as_ref().map(|rr| {
        rr.resource_request
            .iter()
            .map(|(name, q)| {
                let n = nano(q);
                let kind = kind_of(name);
                let amount = if kind == Kind::Cpu {
                    nano_to_milli(n)
                } else {
                    nano_to_value(n)
                };
                Request {
                    name,
                    value: nano_to_value(n),
                    amount,
                    kind,
                }
            })
            .collect()
    })
}

/// [`general_estimate`] over a parsed summary without resource models.
fn cached_estimate(p: &ParsedSummary, requests: Option<&[Request<'_>]>) -> i32 {
    let maximum = p.allowed_pods;
    if maximum <= 0 {
        return 0;
    }
    let Some(requests) = requests else {
        return truncate_i32(maximum);
    };
    let fit_max = summary_fit(requests, |name| {
        p.available.iter().find(|(n, _)| n == name).map(|&(_, a)| a)
    });
    truncate_i32(maximum.min(fit_max))
}

/// `GeneralEstimator.maxAvailableReplicas` for one cluster, truncated to `int32` like Go, with
/// `freed` pods counted as extra model nodes ([`FreedPods`]; empty outside preemption).
fn general_estimate(
    cluster: &Cluster,
    requests: Option<&[Request<'_>]>,
    freed: &[FreedPods],
) -> i32 {
    let Some(summary) = cluster
        .status
        .as_ref()
        .and_then(|s| s.resource_summary.as_ref())
    else {
        return 0;
    };
    let mut maximum = allowed_pods(summary);
    if maximum <= 0 {
        return 0;
    }
    let Some(requests) = requests else {
        return truncate_i32(maximum);
    };
    let modelled = if summary.allocatable_modelings.is_empty() {
        None
    } else {
        model_estimate(cluster, summary, requests).map(|n| {
            let extra: i128 = freed
                .iter()
                .map(|f| {
                    let fit = per_node(requests, |name, kind| {
                        f.requests
                            .iter()
                            .find(|(n, _)| n == name)
                            .map_or(0, |&(_, v)| {
                                if kind == Kind::Cpu {
                                    nano_to_milli(v)
                                } else {
                                    nano_to_value(v)
                                }
                            })
                    });
                    f.count.max(0).saturating_mul(fit)
                })
                .fold(0i128, i128::saturating_add);
            n.saturating_add(extra).min(i128::from(MAX_INT32))
        })
    };
    if let Some(num) = modelled {
        return truncate_i32(maximum.min(num));
    }
    maximum = maximum.min(summary_estimate(summary, requests));
    truncate_i32(maximum)
}

/// Go's `int32(x)` for an `int64` (two's-complement truncation).
pub(crate) fn truncate_i32(v: i128) -> i32 {
    // Truncation is the documented intent: Karmada converts with `int32(...)`.
    #[allow(clippy::cast_possible_truncation)]
    let t = v as i32;
    t
}

pub(crate) fn allowed_pods(s: &ResourceSummary) -> i128 {
    let pods = |l: &ResourceList| nano_of(l, PODS).map_or(0, nano_to_value);
    let allowed = pods(&s.allocatable) - pods(&s.allocated) - pods(&s.allocating);
    allowed.max(0)
}

/// `getMaximumReplicasBasedOnClusterSummary`.
fn summary_estimate(s: &ResourceSummary, requests: &[Request<'_>]) -> i128 {
    summary_fit(requests, |name| {
        let allocatable = nano_of(&s.allocatable, name)?;
        Some(
            allocatable
                - nano_of(&s.allocated, name).unwrap_or(0)
                - nano_of(&s.allocating, name).unwrap_or(0),
        )
    })
}

/// The summary rule over an "available nano-units of resource `name`" lookup (`None`: the resource
/// is not allocatable there): the minimum over requested resources of `⌊available / request⌋`.
fn summary_fit(requests: &[Request<'_>], available: impl Fn(&str) -> Option<i128>) -> i128 {
    let mut maximum = i128::from(i64::MAX);
    for r in requests {
        if r.value <= 0 {
            continue;
        }
        let Some(avail) = available(r.name) else {
            return 0;
        };
        if nano_to_value(avail) <= 0 {
            return 0;
        }
        let (avail, req) = if r.name == CPU {
            (nano_to_milli(avail), r.amount)
        } else {
            (nano_to_value(avail), r.value)
        };
        if req <= 0 {
            continue;
        }
        let fit = match (i64::try_from(avail), i64::try_from(req)) {
            (Ok(a), Ok(r)) => i128::from(a / r),
            _ => avail / req,
        };
        maximum = maximum.min(fit);
    }
    maximum
}

/// The capacity of one resource-model virtual node for `name`, in `Kind` units.
fn model_capacity(model: &ResourceModel, name: &str, kind: Kind, lowest: bool) -> i128 {
    if lowest {
        // Karmada standardizes models on create: the lowest grade's minimums act as zero.
        return 0;
    }
    model
        .ranges
        .iter()
        .rev()
        .find(|r| r.name == name)
        .map_or(0, |r| {
            let n = nano(&r.min);
            if kind == Kind::Cpu {
                nano_to_milli(n)
            } else {
                nano_to_value(n)
            }
        })
}

/// How many 1-pod replicas fit on one virtual node (`Resource.MaxDivided`).
fn per_node(requests: &[Request<'_>], capacity: impl Fn(&str, Kind) -> i128) -> i128 {
    let mut res = i128::from(MAX_PODS_PER_NODE);
    for r in requests {
        if r.kind == Kind::Ignored || r.amount <= 0 {
            continue;
        }
        res = res.min(capacity(r.name, r.kind).max(0) / r.amount);
    }
    res
}

/// `getMaximumReplicasBasedOnResourceModels`; `None` when Karmada's model path errors.
fn model_estimate(
    cluster: &Cluster,
    s: &ResourceSummary,
    requests: &[Request<'_>],
) -> Option<i128> {
    if s.allocatable_modelings.iter().any(|a| a.count < 0) {
        return None;
    }
    let count_of = |grade: u32| -> i128 {
        s.allocatable_modelings
            .iter()
            .filter(|a| a.grade == grade)
            .map(|a| i128::from(a.count))
            .sum()
    };
    let mut total: i128 = 0;
    let models = &cluster.spec.resource_models;
    if models.is_empty() {
        for &(grade, cpu, mem) in &DEFAULT_MODELS {
            let count = count_of(grade);
            if count == 0 {
                continue;
            }
            let fit = per_node(requests, |name, _| match name {
                CPU => cpu,
                MEMORY => mem,
                _ => 0,
            });
            total += count * fit;
        }
    } else {
        let lowest = models.iter().map(|m| m.grade).min().unwrap_or(0);
        for (i, model) in models.iter().enumerate() {
            // Grades are a map in Karmada: the last model of a grade wins.
            if models[i + 1..].iter().any(|m| m.grade == model.grade) {
                continue;
            }
            let count = count_of(model.grade);
            if count == 0 {
                continue;
            }
            let is_lowest = model.grade == lowest;
            let fit = per_node(requests, |name, kind| {
                model_capacity(model, name, kind, is_lowest)
            });
            total += count * fit;
        }
    }
    Some(total.min(i128::from(MAX_INT32)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cluster(spec: Value, summary: Option<Value>) -> Cluster {
        let mut c = json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": "m1"}, "spec": spec});
        if let Some(s) = summary {
            c["status"] = json!({"resourceSummary": s});
        }
        serde_json::from_value(c).expect("cluster")
    }

    fn spec(replicas: i32, request: Option<Value>) -> ResourceBindingSpec {
        let mut s = json!({"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "replicas": replicas});
        if let Some(r) = request {
            s["replicaRequirements"] = json!({"resourceRequest": r});
        }
        serde_json::from_value(s).expect("spec")
    }

    /// Every estimate goes through both the direct and the pre-parsed [`Capacity`] path, which
    /// must agree.
    fn one(c: &Cluster, s: &ResourceBindingSpec) -> i64 {
        let direct = available_replicas(&[c], s)[0];
        let cap = Capacity::of(c);
        assert_eq!(
            available_replicas_with(&[(c, &cap)], s)[0],
            direct,
            "cached capacity path disagrees"
        );
        direct
    }

    fn three_grades(ranges: &[(&str, [&str; 3])]) -> Value {
        let models: Vec<Value> = (0..3)
            .map(|g| {
                let r: Vec<Value> = ranges
                    .iter()
                    .map(|(n, mins)| json!({"name": n, "min": mins[g], "max": "1000"}))
                    .collect();
                json!({"grade": g, "ranges": r})
            })
            .collect();
        json!({"resourceModels": models})
    }

    #[test]
    fn non_workload_short_path_is_max_int32() {
        let c = cluster(json!({}), None);
        assert_eq!(
            available_replicas(&[&c, &c], &spec(0, None)),
            vec![MAX_INT32, MAX_INT32]
        );
    }

    #[test]
    fn nil_summary_is_zero_and_no_requirements_is_allowed_pods() {
        let c = cluster(json!({}), None);
        assert_eq!(one(&c, &spec(3, None)), 0);
        // Karmada general_test "nil replica requirements": 10 pods allocatable → 10.
        let c = cluster(json!({}), Some(json!({"allocatable": {"pods": "10"}})));
        assert_eq!(one(&c, &spec(3, None)), 10);
        // "no allowed pods": 10 − 10 → 0.
        let c = cluster(
            json!({}),
            Some(json!({"allocatable": {"pods": "10"}, "allocated": {"pods": "10"}})),
        );
        assert_eq!(one(&c, &spec(3, None)), 0);
        // Over-allocation clamps to 0.
        let c = cluster(
            json!({}),
            Some(json!({"allocatable": {"pods": 10}, "allocating": {"pods": 30}})),
        );
        assert_eq!(one(&c, &spec(3, None)), 0);
    }

    #[test]
    fn summary_path_matches_karmada_basic_case() {
        // general_test "basic resource estimation": 3 CPU / 6Gi left, 500m / 1Gi each → 6.
        let c = cluster(
            json!({}),
            Some(
                json!({"allocatable": {"pods": "100", "cpu": "4", "memory": "8Gi"},
                        "allocated": {"pods": "20", "cpu": "1", "memory": "2Gi"}}),
            ),
        );
        assert_eq!(
            one(&c, &spec(2, Some(json!({"cpu": "500m", "memory": "1Gi"})))),
            6
        );
        // "insufficient memory": 0.5Gi left for 1Gi → 0.
        let c = cluster(
            json!({}),
            Some(
                json!({"allocatable": {"pods": "100", "cpu": "4", "memory": "2Gi"},
                        "allocated": {"cpu": "1", "memory": "1.5Gi"}}),
            ),
        );
        assert_eq!(
            one(&c, &spec(2, Some(json!({"cpu": "500m", "memory": "1Gi"})))),
            0
        );
    }

    #[test]
    fn summary_path_details() {
        let c = cluster(
            json!({}),
            Some(
                json!({"allocatable": {"pods": "7", "cpu": "2500m", "nvidia.com/gpu": "4"},
                        "allocating": {"cpu": "100m"}}),
            ),
        );
        // CPU compared in milli: 2400m / 300m = 8, capped by 7 pods.
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "300m"})))), 7);
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "700m"})))), 3);
        // Other resources in whole units with the request rounded up: 4 / ceil(1.5) = 2.
        assert_eq!(one(&c, &spec(1, Some(json!({"nvidia.com/gpu": "1.5"})))), 2);
        // A requested resource the cluster lacks → 0.
        assert_eq!(one(&c, &spec(1, Some(json!({"memory": "1Gi"})))), 0);
        // Zero requests are skipped → allowed pods.
        assert_eq!(one(&c, &spec(1, Some(json!({"memory": "0"})))), 7);
        // Unparseable capacity counts as 0.
        let bad = cluster(
            json!({}),
            Some(json!({"allocatable": {"pods": "7", "cpu": "lots"}})),
        );
        assert_eq!(one(&bad, &spec(1, Some(json!({"cpu": "1"})))), 0);
    }

    #[test]
    fn max_int32_falls_back_to_spec_replicas() {
        let c = cluster(
            json!({}),
            Some(json!({"allocatable": {"pods": "3000000000"}})),
        );
        // int32(3e9) wraps negative in Go; the merge keeps the negative number.
        assert_eq!(one(&c, &spec(5, None)), i64::from(3_000_000_000u32 as i32));
        let c = cluster(
            json!({}),
            Some(json!({"allocatable": {"pods": "2147483647"}})),
        );
        assert_eq!(one(&c, &spec(5, None)), 5);
    }

    #[test]
    fn resource_models_match_karmada_cases() {
        let models = three_grades(&[("cpu", ["0", "1", "2"])]);
        let modelings =
            json!([{"grade": 0, "count": 1}, {"grade": 1, "count": 1}, {"grade": 2, "count": 1}]);
        let c = cluster(
            models.clone(),
            Some(json!({"allocatable": {"pods": "100"}, "allocatableModelings": modelings})),
        );
        // "Partially compliant grades": 1.5 CPU fits once on the 2-CPU node.
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "1.5"})))), 1);
        // "No compliant grades".
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "3"})))), 0);
        // 500m: 0 + 2 + 4.
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "500m"})))), 6);

        let models = three_grades(&[("cpu", ["0", "1", "2"]), ("memory", ["0", "1Gi", "2Gi"])]);
        let c = cluster(
            models,
            Some(json!({"allocatable": {"pods": "100"}, "allocatableModelings": modelings})),
        );
        // "Multi resource request".
        assert_eq!(
            one(&c, &spec(1, Some(json!({"cpu": "1", "memory": "1.5Gi"})))),
            1
        );
        // "request exceeds highest grade".
        assert_eq!(
            one(&c, &spec(1, Some(json!({"cpu": "1", "memory": "2.5Gi"})))),
            0
        );
    }

    #[test]
    fn resource_model_result_is_not_bounded_by_summary_resources() {
        // general_test "WithResourceModels" baseline: 3 grade-1 nodes × 2 = 6, although the
        // summary only lists 3 CPU.
        let c = cluster(
            json!({"resourceModels": [
                {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "1"}]},
                {"grade": 1, "ranges": [{"name": "cpu", "min": "1", "max": "2"}]}]}),
            Some(json!({"allocatable": {"pods": "100", "cpu": "3"},
                        "allocatableModelings": [{"grade": 0, "count": 0}, {"grade": 1, "count": 3}]})),
        );
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "500m"})))), 6);
        // Bounded by allowed pods.
        let mut c2 = c.clone();
        if let Some(s) = c2.status.as_mut().and_then(|s| s.resource_summary.as_mut()) {
            s.allocatable.insert("pods".into(), "4".into());
        }
        assert_eq!(one(&c2, &spec(1, Some(json!({"cpu": "500m"})))), 4);
    }

    #[test]
    fn resource_models_pod_cap_and_lowest_grade_zeroed() {
        // 110 pods per virtual node; a request with no modelled resource fits 110 per node.
        let c = cluster(
            json!({"resourceModels": [
                {"grade": 0, "ranges": [{"name": "cpu", "min": "8", "max": "16"}]},
                {"grade": 1, "ranges": [{"name": "cpu", "min": "16", "max": "32"}]}]}),
            Some(json!({"allocatable": {"pods": "1000"},
                        "allocatableModelings": [{"grade": 0, "count": 2}, {"grade": 1, "count": 1}]})),
        );
        assert_eq!(one(&c, &spec(1, Some(json!({"foo": "1"})))), 330);
        // Karmada standardizes the lowest grade's min to 0, so only the grade-1 node counts.
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "1"})))), 16);
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "100m"})))), 110);
    }

    #[test]
    fn default_models_apply_without_resource_models() {
        let c = cluster(
            json!({}),
            Some(
                json!({"allocatable": {"pods": "1000", "cpu": "1000", "memory": "1000Gi"},
                        "allocatableModelings": [{"grade": 0, "count": 5}, {"grade": 2, "count": 2}, {"grade": 3, "count": 1}]}),
            ),
        );
        // grade 2: 2 CPU / 16Gi → 2 per node; grade 3: 4 CPU / 32Gi → 4; grade 0 → 0.
        assert_eq!(
            one(&c, &spec(1, Some(json!({"cpu": "1", "memory": "1Gi"})))),
            2 * 2 + 4
        );
        // Memory-bound: 16Gi / 10Gi = 1, 32Gi / 10Gi = 3.
        assert_eq!(
            one(&c, &spec(1, Some(json!({"cpu": "100m", "memory": "10Gi"})))),
            2 + 3
        );
    }

    #[test]
    fn model_error_falls_back_to_summary() {
        let c = cluster(
            json!({}),
            Some(json!({"allocatable": {"pods": "100", "cpu": "4"},
                        "allocatableModelings": [{"grade": 1, "count": -1}]})),
        );
        assert_eq!(one(&c, &spec(1, Some(json!({"cpu": "1"})))), 4);
    }

    #[test]
    fn many_clusters_keep_order() {
        let a = cluster(json!({}), Some(json!({"allocatable": {"pods": "3"}})));
        let b = cluster(json!({}), None);
        let c = cluster(json!({}), Some(json!({"allocatable": {"pods": "9"}})));
        assert_eq!(
            available_replicas(&[&a, &b, &c], &spec(2, None)),
            vec![3, 0, 9]
        );
    }

    #[test]
    fn member_quotas_cap_replicas_and_component_sets_only_with_them_attached() {
        let mut c = cluster(
            json!({}),
            Some(json!({"allocatable": {"pods": "110", "cpu": "16", "memory": "64Gi"}})),
        );
        c.metadata.annotations.insert(
            flotilla_api::labels::RESOURCE_QUOTAS.into(),
            json!([{"namespace": "ns", "name": "q",
                    "status": {"hard": {"requests.cpu": "3"}, "used": {"requests.cpu": "500m"}}}])
            .to_string(),
        );
        let spec: ResourceBindingSpec = serde_json::from_value(json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ns", "name": "d"},
            "replicas": 10,
            "replicaRequirements": {"resourceRequest": {"cpu": "1"}}}))
        .expect("spec");
        let plain = Capacity::of(&c);
        let quoted = Capacity::of(&c).with_quotas(&c);
        assert_eq!(available_replicas_with(&[(&c, &plain)], &spec), vec![16]);
        // 2.5 CPU of quota left: 2 replicas.
        assert_eq!(available_replicas_with(&[(&c, &quoted)], &spec), vec![2]);
        let elsewhere = ResourceBindingSpec {
            resource: flotilla_api::meta::ObjectReference {
                namespace: "other".into(),
                ..spec.resource.clone()
            },
            ..spec.clone()
        };
        assert_eq!(
            available_replicas_with(&[(&c, &quoted)], &elsewhere),
            vec![16]
        );
        // A whole Flink-like set needs 3 CPU: none fits in the quota's 2.5, five on the nodes.
        let sets: ResourceBindingSpec = serde_json::from_value(json!({
            "resource": {"apiVersion": "example.dev/v1", "kind": "Flink", "namespace": "ns", "name": "f"},
            "components": [
                {"name": "jm", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "1"}}},
                {"name": "tm", "replicas": 2, "replicaRequirements": {"resourceRequest": {"cpu": "1"}}}],
            "placement": {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}]}}))
        .expect("spec");
        assert_eq!(available_replicas_with(&[(&c, &plain)], &sets), vec![5]);
        assert_eq!(available_replicas_with(&[(&c, &quoted)], &sets), vec![0]);
        // A malformed annotation is reported, and the quotas are then not applied.
        c.metadata
            .annotations
            .insert(flotilla_api::labels::RESOURCE_QUOTAS.into(), "{".into());
        let broken = Capacity::of(&c).with_quotas(&c);
        assert!(
            broken
                .quota_error()
                .is_some_and(|e| e.contains("not a list"))
        );
        assert_eq!(available_replicas_with(&[(&c, &broken)], &spec), vec![16]);
    }
}

#[cfg(test)]
mod perf {
    use super::*;
    use serde_json::json;

    /// Timing probe: `cargo test --release -p flotilla-core --lib estimator::perf -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing probe, run in release"]
    fn thousand_clusters() {
        let clusters: Vec<Cluster> = (0..1000)
            .map(|i| {
                serde_json::from_value(
                    json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                    "metadata": {"name": format!("m{i}")},
                    "status": {"resourceSummary": {
                        "allocatable": {"pods": "110", "cpu": "64", "memory": "256Gi"},
                        "allocated": {"pods": "40", "cpu": "20500m", "memory": "100Gi"},
                        "allocating": {"pods": "1", "cpu": "250m", "memory": "1Gi"}}}}),
                )
                .expect("cluster")
            })
            .collect();
        let refs: Vec<&Cluster> = clusters.iter().collect();
        let spec: ResourceBindingSpec = serde_json::from_value(json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "replicas": 10,
            "replicaRequirements": {"resourceRequest": {"cpu": "500m", "memory": "512Mi"}}}))
        .expect("spec");
        let start = std::time::Instant::now();
        let rounds = 200;
        let mut total = 0i64;
        for _ in 0..rounds {
            total += available_replicas(&refs, &spec).iter().sum::<i64>();
        }
        eprintln!(
            "available_replicas(1000 clusters): {:?} per call ({total})",
            start.elapsed() / rounds
        );
        let start = std::time::Instant::now();
        let mut acc = 0i128;
        for _ in 0..rounds {
            for q in [
                "110", "20500m", "256Gi", "40", "1", "250m", "100Gi", "1Gi", "64",
            ]
            .iter()
            .cycle()
            .take(9000)
            {
                acc += parse_nano(std::hint::black_box(q)).unwrap_or(0);
            }
        }
        eprintln!("9000 parses: {:?} ({acc})", start.elapsed() / rounds);
    }
}
