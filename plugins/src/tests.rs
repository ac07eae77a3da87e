//! The memoising built-ins decide as the plain ones: random-ish clusters and bindings, two
//! cluster-set generations, in turn and from several threads.

use std::collections::BTreeMap;
use std::sync::Arc;

use flotilla_api::cluster::{ApiEnablement, ApiResource, Cluster, ClusterSpec, ClusterStatus};
use flotilla_api::meta::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, ObjectReference, Taint, Toleration,
};
use flotilla_api::policy::{
    CelSelector, ClusterAffinity as Affinity, ClusterAffinityInline, ClusterAffinityTerm,
    ClusterPreferences, OverflowAffinity, Placement, ReplicaSchedulingStrategy,
    StaticClusterWeight,
};
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use flotilla_core::framework::{
    BindingContext, ClusterDetail, FilterInput, FilterPlugin, Profile, Slot,
};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::scheduler::schedule;

use crate::{assign, default_profile, filter};

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

const REGIONS: [&str; 4] = ["eu", "us", "ap", "sa"];
const ENVS: [&str; 3] = ["prod", "staging", "dev"];
const KINDS: [(&str, &str); 3] = [
    ("apps/v1", "Deployment"),
    ("batch/v1", "Job"),
    ("apps/v1", "StatefulSet"),
];
const TAINT_KEYS: [&str; 3] = ["gpu", "maintenance", "edge"];
const EFFECTS: [&str; 3] = ["NoSchedule", "NoExecute", "PreferNoSchedule"];

fn taint(rng: &mut Rng) -> Taint {
    Taint {
        key: TAINT_KEYS[rng.below(3)].into(),
        value: ["", "true"][rng.below(2)].into(),
        effect: EFFECTS[rng.below(3)].into(),
        ..Default::default()
    }
}

fn toleration(rng: &mut Rng) -> Toleration {
    let exists = rng.below(2) == 0;
    Toleration {
        key: TAINT_KEYS[rng.below(3)].into(),
        operator: if exists { "Exists" } else { "Equal" }.into(),
        value: if exists { "" } else { "true" }.into(),
        effect: ["", "NoSchedule", "NoExecute"][rng.below(3)].into(),
        ..Default::default()
    }
}

fn clusters(rng: &mut Rng, n: usize) -> Vec<Cluster> {
    (0..n)
        .map(|i| {
            let region = REGIONS[rng.below(REGIONS.len())];
            let labels = BTreeMap::from([
                ("region".to_owned(), region.to_owned()),
                ("env".to_owned(), ENVS[rng.below(ENVS.len())].to_owned()),
            ]);
            Cluster {
                metadata: ObjectMeta {
                    name: Some(format!("m{i:03}")),
                    labels,
                    ..Default::default()
                },
                spec: ClusterSpec {
                    region: region.into(),
                    taints: (0..rng.below(3)).map(|_| taint(rng)).collect(),
                    ..Default::default()
                },
                status: Some(ClusterStatus {
                    api_enablements: KINDS[..1 + rng.below(KINDS.len())]
                        .iter()
                        .map(|(gv, kind)| ApiEnablement {
                            group_version: (*gv).into(),
                            resources: vec![ApiResource {
                                name: kind.to_lowercase() + "s",
                                kind: (*kind).into(),
                            }],
                        })
                        .collect(),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect()
}

fn selector(rng: &mut Rng) -> Affinity {
    let mut a = Affinity::default();
    match rng.below(4) {
        0 => {
            a.label_selector = Some(LabelSelector {
                match_labels: BTreeMap::from([("env".to_owned(), ENVS[rng.below(3)].to_owned())]),
                ..Default::default()
            })
        }
        1 => {
            let values = vec![
                REGIONS[rng.below(4)].to_owned(),
                REGIONS[rng.below(4)].to_owned(),
            ];
            let operator = if rng.below(2) == 0 { "In" } else { "NotIn" }.to_owned();
            let expr = LabelSelectorRequirement {
                key: "region".into(),
                operator,
                values,
            };
            a.label_selector = Some(LabelSelector {
                match_expressions: vec![expr],
                ..Default::default()
            });
        }
        2 => {
            a.cluster_names = (0..1 + rng.below(20))
                .map(|_| format!("m{:03}", rng.below(60)))
                .collect()
        }
        _ => {
            a.exclude = (0..1 + rng.below(10))
                .map(|_| format!("m{:03}", rng.below(60)))
                .collect()
        }
    }
    a
}

fn inline(a: Affinity) -> ClusterAffinityInline {
    ClusterAffinityInline {
        label_selector: a.label_selector,
        field_selector: a.field_selector,
        cluster_names: a.cluster_names,
        exclude: a.exclude,
        cel_selector: a.cel_selector,
    }
}

/// Affinities, ordered-affinity terms and weight lists for bindings to share (memo keys repeat,
/// with and without a workload).
struct Pool {
    affinities: Vec<Affinity>,
    terms: Vec<Vec<ClusterAffinityTerm>>,
    weights: Vec<Vec<StaticClusterWeight>>,
}

impl Pool {
    fn new(rng: &mut Rng) -> Self {
        let term = |rng: &mut Rng, t: usize| ClusterAffinityTerm {
            affinity_name: format!("group-{t}"),
            affinity: inline(selector(rng)),
            overflow_affinities: (rng.below(2) == 0).then(|| {
                vec![OverflowAffinity {
                    affinity_name: "overflow".into(),
                    affinity: inline(selector(rng)),
                }]
            }),
        };
        Pool {
            affinities: (0..8).map(|_| selector(rng)).collect(),
            terms: (0..6)
                .map(|_| (0..1 + rng.below(3)).map(|t| term(rng, t)).collect())
                .collect(),
            weights: (0..6)
                .map(|_| {
                    (0..rng.below(4))
                        .map(|_| StaticClusterWeight {
                            target_cluster: selector(rng),
                            weight: rng.below(5) as i64,
                        })
                        .collect()
                })
                .collect(),
        }
    }

    /// A binding with an affinity (placement, ordered terms with overflow tiers, or none), and
    /// static weights, a celSelector, or another strategy.
    fn binding(&self, rng: &mut Rng, i: usize) -> (ResourceBindingSpec, ResourceBindingStatus) {
        let mut placement = Placement::default();
        match rng.below(4) {
            0 => {
                placement.cluster_affinity =
                    Some(self.affinities[rng.below(self.affinities.len())].clone())
            }
            1 | 2 => placement.cluster_affinities = self.terms[rng.below(self.terms.len())].clone(),
            _ => {}
        }
        if rng.below(10) == 0 {
            let cel = CelSelector {
                cel_expressions: vec!["cluster.spec.region == 'eu'".into()],
            };
            placement
                .cluster_affinity
                .get_or_insert_with(Default::default)
                .cel_selector = Some(cel);
        }
        let weighted = rng.below(3) != 0;
        placement.replica_scheduling = Some(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Divided".into()),
            replica_division_preference: Some(
                if weighted { "Weighted" } else { "Aggregated" }.into(),
            ),
            weight_preference: weighted.then(|| ClusterPreferences {
                static_weight_list: self.weights[rng.below(self.weights.len())].clone(),
                ..Default::default()
            }),
        });
        placement.cluster_tolerations = (0..rng.below(3)).map(|_| toleration(rng)).collect();
        let (api_version, kind) = KINDS[rng.below(KINDS.len())];
        // Sometimes already scheduled somewhere (filters keep current targets).
        let clusters = (0..[0, 0, 3, 25][rng.below(4)])
            .map(|_| TargetCluster::new(format!("m{:03}", rng.below(60)), 1 + rng.below(5) as i32))
            .collect();
        let spec = ResourceBindingSpec {
            clusters,
            resource: ObjectReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: format!("app-{i}"),
                uid: format!("uid-{i}"),
                ..Default::default()
            },
            // Replicas make a workload (overflow tiers apply); none, not.
            replicas: [0, 1, 7, 40][rng.below(4)],
            placement: Some(placement),
            ..Default::default()
        };
        (spec, ResourceBindingStatus::default())
    }
}

/// The default profile without the memo.
fn plain_profile() -> Profile {
    let mut p = default_profile();
    for s in &mut p.filters {
        match s.plugin.name() {
            filter::CLUSTER_AFFINITY => *s = Slot::new(Arc::new(filter::ClusterAffinity) as Arc<_>),
            filter::API_ENABLEMENT => *s = Slot::new(Arc::new(filter::ApiEnablement) as Arc<_>),
            filter::TAINT_TOLERATION => *s = Slot::new(Arc::new(filter::TaintToleration) as Arc<_>),
            _ => {}
        }
    }
    for s in &mut p.assigners {
        if s.plugin.name() == assign::STATIC_WEIGHT {
            *s = Slot::new(Arc::new(assign::StaticWeight) as Arc<_>);
        }
    }
    p
}

fn snapshot(clusters: Vec<Cluster>) -> Snapshot {
    Snapshot::new(clusters, Arc::default(), Options::default())
}

#[test]
fn memo_schedules_as_without_it_across_generations() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let first = snapshot(clusters(&mut rng, 60));
    // Other labels, and fewer clusters: rows shift.
    let second = snapshot(clusters(&mut rng, 45));
    let pool = Pool::new(&mut rng);
    let bindings: Vec<_> = (0..300).map(|i| pool.binding(&mut rng, i)).collect();
    let (memo, plain) = (default_profile(), plain_profile());
    // Each snapshot twice (misses, then hits), and the first again after the second (an older
    // generation, answered without the memo).
    for set in [&first, &first, &second, &second, &first] {
        for (spec, status) in &bindings {
            assert_eq!(
                schedule(set, &memo, spec, status, None, None),
                schedule(set, &plain, spec, status, None, None),
                "{spec:?}"
            );
        }
    }
}

#[test]
fn memo_schedules_as_without_it_from_several_threads() {
    let mut rng = Rng(42);
    let set = snapshot(clusters(&mut rng, 80));
    let pool = Pool::new(&mut rng);
    let bindings: Vec<_> = (0..200).map(|i| pool.binding(&mut rng, i)).collect();
    let plain = plain_profile();
    let expected: Vec<_> = bindings
        .iter()
        .map(|(s, st)| schedule(&set, &plain, s, st, None, None))
        .collect();
    let memo = default_profile();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (set, memo, bindings, expected) = (&set, &memo, &bindings, &expected);
            scope.spawn(move || {
                for k in 0..bindings.len() {
                    let i = (k * 7 + t * 50) % bindings.len();
                    let (spec, status) = &bindings[i];
                    assert_eq!(schedule(set, memo, spec, status, None, None), expected[i]);
                }
            });
        }
    });
}

#[test]
fn memo_ignores_rows_that_do_not_hold_the_cluster() {
    let mut rng = Rng(7);
    let set = snapshot(clusters(&mut rng, 30));
    let all: Vec<&Cluster> = set.clusters().iter().collect();
    let placement = Placement {
        cluster_affinity: Some(Affinity {
            cluster_names: vec!["m003".into(), "m004".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let spec = ResourceBindingSpec::default();
    let ctx = BindingContext::new(&spec, &placement, None).with_snapshot(set.plugin_view());
    let memo = filter::MemoisedClusterAffinity::default();
    let verdicts = |plugin: &dyn FilterPlugin, rows: &[u32]| {
        let mut out = Vec::new();
        plugin
            .filter(&FilterInput::new(&ctx, &all).with_rows(rows), &mut out)
            .expect("filter");
        out
    };
    let right: Vec<u32> = (0..30).collect();
    let expected = verdicts(&filter::ClusterAffinity, &right);
    // Fill the memo through wrong rows (shifted by one, unknown, out of range): the cells of rows
    // that do not hold the cluster must stay unfilled.
    let shifted: Vec<u32> = (1..=30).collect();
    let unknown = vec![ClusterDetail::NO_ROW; 30];
    for rows in [&shifted, &unknown, &right, &right] {
        assert_eq!(verdicts(&memo, rows), expected);
    }
    // The same for the taint filter, whose reasons are also kept per row.
    let expected = verdicts(&filter::TaintToleration, &right);
    assert!(
        expected
            .iter()
            .any(|v| *v != flotilla_core::framework::Verdict::Fit),
        "no tainted cluster"
    );
    let memo = filter::MemoisedTaintToleration::default();
    for rows in [&shifted, &unknown, &right, &right, &shifted] {
        assert_eq!(verdicts(&memo, rows), expected);
    }
}

/// A select plugin that answers with positions it was not given (or one twice).
struct BadSelect {
    repeat: bool,
}

impl flotilla_core::framework::Plugin for BadSelect {
    fn name(&self) -> &str {
        "bad-select"
    }
}

impl flotilla_core::framework::SelectPlugin for BadSelect {
    fn select(
        &self,
        input: &flotilla_core::framework::SelectInput<'_>,
    ) -> Result<flotilla_core::framework::Selection, flotilla_core::PluginError> {
        let n = input.clusters.len();
        Ok(flotilla_core::framework::Selection::Selected(
            if self.repeat { vec![0, 0] } else { vec![n + 7] },
        ))
    }
}

#[test]
fn invalid_select_replies_follow_the_plugins_failure_policy() {
    use flotilla_core::framework::FailurePolicy;
    let mut rng = Rng(7);
    let set = snapshot(clusters(&mut rng, 20));
    let pool = Pool::new(&mut rng);
    let bindings: Vec<_> = (0..60).map(|i| pool.binding(&mut rng, i)).collect();
    let reference = default_profile();
    for repeat in [false, true] {
        let with = |policy| {
            let mut p = default_profile();
            p.selects.push(
                Slot::new(Arc::new(BadSelect { repeat }) as Arc<_>).with_failure_policy(policy),
            );
            p
        };
        let (fail, ignore) = (with(FailurePolicy::Fail), with(FailurePolicy::Ignore));
        let mut faulted = 0;
        for (spec, status) in &bindings {
            let expected = schedule(&set, &reference, spec, status, None, None).outcome;
            // Ignore: as if the plugin were not there (its fault recorded).
            let ignored = schedule(&set, &ignore, spec, status, None, None);
            assert_eq!(ignored.outcome, expected, "{spec:?}");
            // Fail: a scheduler error naming the plugin, whenever it was asked.
            if let Err(f) = schedule(&set, &fail, spec, status, None, None).outcome
                && expected.is_ok()
            {
                let faults = &ignored.ignored_faults;
                assert!(!faults.is_empty(), "{spec:?}");
                assert!(
                    faults.iter().all(|f| f.contains("bad-select")),
                    "{faults:?}"
                );
                assert!(f.message.contains("bad-select"), "{}", f.message);
                let why = if repeat {
                    "more than once"
                } else {
                    "out of range"
                };
                assert!(f.message.contains(why), "{}", f.message);
                faulted += 1;
            }
        }
        assert!(faulted > 0, "the plugin was never asked");
    }
}
