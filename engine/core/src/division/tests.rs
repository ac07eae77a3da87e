//! Division strategy tests; cases ported from Karmada's `assignment_test.go` and
//! `division_algorithm_test.go` (inputs and expected numbers).

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{
    ClusterAffinity, ClusterPreferences, Placement, ReplicaSchedulingStrategy, StaticClusterWeight,
};
use flotilla_api::work::{ResourceBindingSpec, TargetCluster};

use super::*;
use crate::framework::BindingContext;

const EVEN_UID: &str = "4858ca61-3ff8-4095-8267-f3d059d8074c";
const ODD_UID: &str = "d43fdeeb-d750-4e2b-bee3-64eb94534f4c";

fn cluster(name: &str) -> Cluster {
    let mut c = Cluster::default();
    c.metadata.name = Some(name.to_owned());
    c
}

fn clusters(names: &[&str]) -> Vec<Cluster> {
    names.iter().map(|n| cluster(n)).collect()
}

fn details<'a>(cs: &'a [Cluster], allocatable: &[i64]) -> Vec<ClusterDetail<'a>> {
    cs.iter()
        .zip(allocatable)
        .map(|(c, &a)| ClusterDetail {
            cluster: c,
            score: 0,
            allocatable_replicas: a,
            available_replicas: a,
            overflow_order: 0,
            row: ClusterDetail::NO_ROW,
        })
        .collect()
}

fn tc(v: &[(&str, i32)]) -> Vec<TargetCluster> {
    v.iter().map(|&(n, r)| TargetCluster::new(n, r)).collect()
}

fn rs(ty: &str, pref: Option<&str>, wp: Option<ClusterPreferences>) -> Placement {
    Placement {
        replica_scheduling: Some(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some(ty.to_owned()),
            replica_division_preference: pref.map(str::to_owned),
            weight_preference: wp,
        }),
        ..Placement::default()
    }
}

fn weighted(rules: &[(&[&str], i64)]) -> Placement {
    let list = rules
        .iter()
        .map(|(names, w)| StaticClusterWeight {
            target_cluster: ClusterAffinity {
                cluster_names: names.iter().map(|s| (*s).to_owned()).collect(),
                ..ClusterAffinity::default()
            },
            weight: *w,
        })
        .collect();
    rs(
        "Divided",
        Some("Weighted"),
        Some(ClusterPreferences {
            static_weight_list: list,
            dynamic_weight: String::new(),
        }),
    )
}

fn dynamic_weight() -> Placement {
    rs(
        "Divided",
        Some("Weighted"),
        Some(ClusterPreferences {
            static_weight_list: Vec::new(),
            dynamic_weight: "AvailableReplicas".into(),
        }),
    )
}

fn aggregated_placement() -> Placement {
    rs("Divided", Some("Aggregated"), None)
}

fn spec(replicas: i32, prior: &[(&str, i32)], uid: &str) -> ResourceBindingSpec {
    let mut s = ResourceBindingSpec {
        replicas,
        clusters: tc(prior),
        ..ResourceBindingSpec::default()
    };
    s.resource.uid = uid.to_owned();
    s
}

/// Run `f` on an input built from the pieces.
fn run(
    spec: &ResourceBindingSpec,
    placement: &Placement,
    ds: &[ClusterDetail<'_>],
    mode: AssignMode,
    f: impl Fn(&AssignInput<'_>) -> Assignment,
) -> Assignment {
    let binding = BindingContext::new(spec, placement, None);
    let input = AssignInput {
        binding: &binding,
        clusters: ds,
        replicas: spec.replicas,
        mode,
    };
    f(&input)
}

fn assigned(a: Assignment) -> Vec<TargetCluster> {
    match a {
        Assignment::Assigned(v) => v,
        other => panic!("expected an assignment, got {other:?}"),
    }
}

fn sorted(mut v: Vec<TargetCluster>) -> Vec<TargetCluster> {
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

fn nonzero(v: Vec<TargetCluster>) -> Vec<TargetCluster> {
    sorted(v.into_iter().filter(|t| t.replicas > 0).collect())
}

const M123: [&str; 3] = ["member1", "member2", "member3"];

/// [`static_weight`] (Webster by position, then named), checked against Webster by name over the
/// same votes ([`dispense`], Karmada's `Dispenser` shape) without its zero-seat parties.
fn static_weight_checked(input: &AssignInput<'_>) -> Assignment {
    let got = static_weight(input);
    let rules = static_weight_rules(input);
    let mut votes: Vec<(&str, i64)> = input
        .clusters
        .iter()
        .map(|c| (c.name(), rules.map_or(1, |r| rule_weight(r, c.cluster))))
        .filter(|&(_, w)| w > 0)
        .collect();
    if votes.iter().fold(0i64, |s, &(_, w)| s.wrapping_add(w)) == 0 {
        votes.extend(input.clusters.iter().map(|c| (c.name(), 1)));
    }
    let seated = dispense(
        input.replicas,
        &votes,
        &[],
        &input.binding.spec.resource.uid,
    )
    .into_iter()
    .filter(|t| t.replicas > 0)
    .collect();
    assert_eq!(got, Assignment::Assigned(seated));
    got
}

// ---------------------------------------------------------------- strategy choice

#[test]
fn strategy_table() {
    assert_eq!(strategy(&Placement::default()), Ok(Strategy::Duplicated));
    assert_eq!(
        strategy(&rs("Duplicated", None, None)),
        Ok(Strategy::Duplicated)
    );
    assert_eq!(strategy(&aggregated_placement()), Ok(Strategy::Aggregated));
    assert_eq!(strategy(&dynamic_weight()), Ok(Strategy::DynamicWeight));
    assert_eq!(
        strategy(&rs("Divided", Some("Weighted"), None)),
        Ok(Strategy::StaticWeight)
    );
    assert_eq!(
        strategy(&weighted(&[(&["a"], 1)])),
        Ok(Strategy::StaticWeight)
    );
    assert_eq!(
        strategy(&rs("Divided", None, None)),
        Err("unsupported replica scheduling strategy, replicaSchedulingType: Divided, replicaDivisionPreference: , \
             please try another scheduling strategy"
            .to_owned())
    );
    assert_eq!(
        strategy(&rs("Bogus", Some("Weighted"), None)),
        Err("unsupported replica scheduling strategy, replicaSchedulingType: Bogus, replicaDivisionPreference: Weighted, \
             please try another scheduling strategy"
            .to_owned())
    );
}

// ---------------------------------------------------------------- duplicated

#[test]
fn duplicated_gives_every_cluster_all_replicas_in_order() {
    let cs = clusters(&["member2", "member1"]);
    let ds = details(&cs, &[1, 1]);
    let s = spec(3, &[], "");
    let got = assigned(run(
        &s,
        &rs("Duplicated", None, None),
        &ds,
        AssignMode::Steady,
        duplicated,
    ));
    assert_eq!(got, tc(&[("member2", 3), ("member1", 3)]));
}

// ---------------------------------------------------------------- static weight

#[test]
fn static_weight_karmada_cases() {
    let cs = clusters(&M123);
    let ds = details(&cs, &[0, 0, 0]);
    let p321 = weighted(&[(&["member1"], 3), (&["member2"], 2), (&["member3"], 1)]);
    let st = |replicas, p: &Placement| {
        assigned(run(
            &spec(replicas, &[], ""),
            p,
            &ds,
            AssignMode::Steady,
            static_weight_checked,
        ))
    };
    assert_eq!(
        st(12, &p321),
        tc(&[("member1", 6), ("member2", 4), ("member3", 2)])
    );
    assert_eq!(
        st(13, &p321),
        tc(&[("member1", 7), ("member2", 4), ("member3", 2)])
    );
    assert_eq!(
        st(14, &p321),
        tc(&[("member1", 7), ("member2", 5), ("member3", 2)])
    );
    // Default weight (no weightPreference).
    assert_eq!(
        st(12, &rs("Divided", Some("Weighted"), None)),
        tc(&[("member1", 4), ("member2", 4), ("member3", 4)])
    );

    let cs2 = clusters(&["member1", "member2"]);
    let ds2 = details(&cs2, &[0, 0]);
    let st2 = |replicas, p: &Placement| {
        assigned(run(
            &spec(replicas, &[], ""),
            p,
            &ds2,
            AssignMode::Steady,
            static_weight_checked,
        ))
    };
    // replica 0 → every weighted cluster with 0 in Karmada's dispenser, which the scheduler
    // drops: no targets.
    assert_eq!(
        st2(0, &weighted(&[(&["member1"], 1), (&["member2"], 1)])),
        tc(&[])
    );
    // A selected cluster without weight is ignored.
    assert_eq!(
        st2(2, &weighted(&[(&["member1"], 1)])),
        tc(&[("member1", 2)])
    );
    // Max over matching rules.
    assert_eq!(
        st2(
            3,
            &weighted(&[(&["member1"], 1), (&["member2"], 1), (&["member1"], 2)])
        ),
        tc(&[("member1", 2), ("member2", 1)])
    );
}

#[test]
fn static_weight_zero_and_all_zero() {
    let cs = clusters(&M123);
    let ds = details(&cs, &[0, 0, 0]);
    let st = |p: &Placement| {
        assigned(run(
            &spec(6, &[], ""),
            p,
            &ds,
            AssignMode::Steady,
            static_weight_checked,
        ))
    };
    // Weight 0 drops the cluster.
    assert_eq!(
        st(&weighted(&[
            (&["member1"], 2),
            (&["member2"], 0),
            (&["member3"], 1)
        ])),
        tc(&[("member1", 4), ("member3", 2)])
    );
    // Nothing matches → equal weights.
    assert_eq!(
        st(&weighted(&[(&["other"], 5)])),
        tc(&[("member1", 2), ("member2", 2), ("member3", 2)])
    );
    // All rules weight 0 → equal weights.
    assert_eq!(
        st(&weighted(&[(&["member1", "member2"], 0)])),
        tc(&[("member1", 2), ("member2", 2), ("member3", 2)])
    );
    // Present but empty list → equal weights.
    assert_eq!(
        st(&weighted(&[])),
        tc(&[("member1", 2), ("member2", 2), ("member3", 2)])
    );
}

#[test]
fn static_weight_ignores_prior_and_uses_uid_ties() {
    let cs = clusters(&["A", "B"]);
    let ds = details(&cs, &[0, 0]);
    let p = weighted(&[(&["A", "B"], 1)]);
    let st = |uid| {
        assigned(run(
            &spec(5, &[("A", 5)], uid),
            &p,
            &ds,
            AssignMode::Steady,
            static_weight_checked,
        ))
    };
    assert_eq!(st(""), tc(&[("A", 3), ("B", 2)]));
    assert_eq!(st(EVEN_UID), tc(&[("A", 3), ("B", 2)]));
    assert_eq!(st(ODD_UID), tc(&[("A", 2), ("B", 3)]));
}

// ---------------------------------------------------------------- dynamic: divide step

#[test]
fn dynamic_divide_karmada_cases() {
    let cs = clusters(&M123);
    let dw = dynamic_weight();
    let dy = |alloc: &[i64], p: &Placement, agg: bool| {
        let ds = details(&cs, alloc);
        nonzero(assigned(run(
            &spec(12, &[], ""),
            p,
            &ds,
            AssignMode::Steady,
            |i| dynamic(i, agg),
        )))
    };
    assert_eq!(
        dy(&[18, 12, 6], &dw, false),
        tc(&[("member1", 6), ("member2", 4), ("member3", 2)])
    );
    assert_eq!(
        dy(&[20, 12, 6], &dw, false),
        tc(&[("member1", 6), ("member2", 4), ("member3", 2)])
    );
    assert_eq!(
        dy(&[6, 12, 6], &dw, false),
        tc(&[("member1", 3), ("member2", 6), ("member3", 3)])
    );
    let ag = aggregated_placement();
    assert_eq!(dy(&[6, 12, 6], &ag, true), tc(&[("member2", 12)]));
    assert_eq!(
        dy(&[6, 6, 6], &ag, true),
        tc(&[("member1", 6), ("member2", 6)])
    );
}

// ---------------------------------------------------------------- dynamic: scale

#[test]
fn dynamic_scale_karmada_cases() {
    let dw = dynamic_weight();
    let ag = aggregated_placement();
    let go = |names: &[&str],
              alloc: &[i64],
              replicas,
              prior: &[(&str, i32)],
              p: &Placement,
              agg: bool| {
        let cs = clusters(names);
        let ds = details(&cs, alloc);
        run(
            &spec(replicas, prior, ""),
            p,
            &ds,
            AssignMode::Steady,
            |i| dynamic(i, agg),
        )
    };
    let prior3 = [("member1", 2), ("member2", 4), ("member3", 6)];
    // 12 → 6, dynamic 1:1:1: scale down proportionally to the previous replicas.
    assert_eq!(
        nonzero(assigned(go(&M123, &[1, 1, 1], 6, &prior3, &dw, false))),
        tc(&[("member1", 1), ("member2", 2), ("member3", 3)])
    );
    // 12 → 24, dynamic 10:10:10.
    assert_eq!(
        nonzero(assigned(go(&M123, &[10, 10, 10], 24, &prior3, &dw, false))),
        tc(&[("member1", 6), ("member2", 8), ("member3", 10)])
    );
    // 12 → 24, dynamic 1:1:1: not enough.
    assert_eq!(
        go(&M123, &[1, 1, 1], 24, &prior3, &dw, false),
        Assignment::Unschedulable(
            "failed to scale up: Clusters available replicas 3 are not enough to schedule.".into()
        )
    );
    let prior2 = [("member1", 4), ("member2", 8)];
    // 12 → 6, aggregated 1:1:1.
    assert_eq!(
        nonzero(assigned(go(&M123, &[1, 1, 1], 6, &prior2, &ag, true))),
        tc(&[("member2", 6)])
    );
    // 12 → 8, aggregated 100:100.
    assert_eq!(
        nonzero(assigned(go(
            &["member1", "member2"],
            &[100, 100],
            8,
            &prior2,
            &ag,
            true
        ))),
        tc(&[("member2", 8)])
    );
    // 12 → 24, aggregated 4:6:8.
    assert_eq!(
        nonzero(assigned(go(&M123, &[4, 6, 8], 24, &prior2, &ag, true))),
        tc(&[("member1", 7), ("member2", 12), ("member3", 5)])
    );
    // 12 → 24, aggregated 6:6:20.
    assert_eq!(
        nonzero(assigned(go(&M123, &[6, 6, 20], 24, &prior2, &ag, true))),
        tc(&[("member1", 10), ("member2", 14)])
    );
    // 12 → 24, aggregated 1:1:1: not enough.
    assert_eq!(
        go(&M123, &[1, 1, 1], 24, &prior2, &ag, true),
        Assignment::Unschedulable(
            "failed to scale up: Clusters available replicas 3 are not enough to schedule.".into()
        )
    );
    // member2 disappeared, member4 appeared: its 8 replicas are re-placed as scale-up.
    assert_eq!(
        nonzero(assigned(go(
            &["member1", "member3", "member4"],
            &[4, 8, 12],
            24,
            &prior2,
            &ag,
            true
        ))),
        tc(&[("member1", 7), ("member3", 7), ("member4", 10)])
    );
}

#[test]
fn dynamic_scale_up_karmada_cases() {
    let dw = dynamic_weight();
    let ag = aggregated_placement();
    let go = |names: &[&str], alloc: &[i64], prior: &[(&str, i32)], p: &Placement, agg: bool| {
        let cs = clusters(names);
        let ds = details(&cs, alloc);
        run(&spec(12, prior, ""), p, &ds, AssignMode::Steady, |i| {
            dynamic(i, agg)
        })
    };
    assert_eq!(
        nonzero(assigned(go(&M123, &[6, 8, 10], &[], &dw, false))),
        tc(&[("member1", 3), ("member2", 4), ("member3", 5)])
    );
    assert_eq!(
        nonzero(assigned(go(&M123, &[8, 8, 10], &[], &dw, false))),
        tc(&[("member1", 4), ("member2", 4), ("member3", 4)])
    );
    assert_eq!(
        go(&M123, &[3, 3, 3], &[], &dw, false),
        Assignment::Unschedulable(
            "failed to scale up: Clusters available replicas 9 are not enough to schedule.".into()
        )
    );
    assert_eq!(
        nonzero(assigned(go(&M123, &[6, 8, 10], &[], &ag, true))),
        tc(&[("member2", 5), ("member3", 7)])
    );
    assert_eq!(
        nonzero(assigned(go(&M123, &[12, 8, 10], &[], &ag, true))),
        tc(&[("member1", 12)])
    );
    assert!(matches!(
        go(&M123, &[3, 3, 3], &[], &ag, true),
        Assignment::Unschedulable(_)
    ));
    assert_eq!(
        nonzero(assigned(go(
            &["member1", "member2"],
            &[3, 3],
            &[("member1", 6), ("member3", 6)],
            &dw,
            false
        ))),
        tc(&[("member1", 9), ("member2", 3)])
    );
}

#[test]
fn aggregated_minimal_prefix_is_proportional() {
    // available [m3:10, m2:8], target 12 → 7:5 (not 10:2).
    let cs = clusters(&["m2", "m3"]);
    let ds = details(&cs, &[8, 10]);
    let got = assigned(run(
        &spec(12, &[], ""),
        &aggregated_placement(),
        &ds,
        AssignMode::Steady,
        |i| dynamic(i, true),
    ));
    assert_eq!(nonzero(got), tc(&[("m2", 5), ("m3", 7)]));
}

#[test]
fn aggregated_prefers_previously_used_clusters() {
    // member3 has the most room, but member1 is in use: the prefix starts with member1.
    let cs = clusters(&M123);
    let ds = details(&cs, &[5, 6, 20]);
    let got = assigned(run(
        &spec(6, &[("member1", 2)], ""),
        &aggregated_placement(),
        &ds,
        AssignMode::Steady,
        |i| dynamic(i, true),
    ));
    // target 4, prefix [member1:5] → all 4 to member1, merged with its 2.
    assert_eq!(nonzero(got), tc(&[("member1", 6)]));
}

#[test]
fn dynamic_steady_equal_returns_scheduled_and_drops_non_candidates() {
    let cs = clusters(&["member1", "member2"]);
    let ds = details(&cs, &[0, 0]);
    let got = assigned(run(
        &spec(5, &[("member2", 3), ("gone", 7), ("member1", 2)], ""),
        &dynamic_weight(),
        &ds,
        AssignMode::Steady,
        |i| dynamic(i, false),
    ));
    assert_eq!(got, tc(&[("member2", 3), ("member1", 2)]));
}

#[test]
fn dynamic_fresh_ignores_prior_distribution() {
    // Fresh: votes are allocatable + scheduled = 4+8 : 8+0.
    let cs = clusters(&["member1", "member2"]);
    let ds = details(&cs, &[4, 8]);
    let s = spec(10, &[("member1", 8)], "");
    let got = nonzero(assigned(run(
        &s,
        &dynamic_weight(),
        &ds,
        AssignMode::Fresh,
        |i| dynamic(i, false),
    )));
    // Votes 12 : 8 over 10 seats → 6 : 4.
    assert_eq!(got, tc(&[("member1", 6), ("member2", 4)]));
    // Steady with the same input is a scale up of 2 on top of the prior.
    let steady = nonzero(assigned(run(
        &s,
        &dynamic_weight(),
        &ds,
        AssignMode::Steady,
        |i| dynamic(i, false),
    )));
    assert_eq!(steady, tc(&[("member1", 9), ("member2", 1)]));
    // Fresh not-enough message.
    let s = spec(30, &[("member1", 8)], "");
    assert_eq!(
        run(&s, &dynamic_weight(), &ds, AssignMode::Fresh, |i| dynamic(
            i, false
        )),
        Assignment::Unschedulable(
            "failed to do fresh scale: Clusters available replicas 20 are not enough to schedule."
                .into()
        )
    );
}

#[test]
fn dynamic_scale_down_to_zero_is_empty_after_zero_removal() {
    let cs = clusters(&["member1", "member2"]);
    let ds = details(&cs, &[5, 5]);
    let got = assigned(run(
        &spec(0, &[("member1", 2), ("member2", 1)], ""),
        &dynamic_weight(),
        &ds,
        AssignMode::Steady,
        |i| dynamic(i, false),
    ));
    assert!(nonzero(got).is_empty());
}

#[test]
fn dynamic_scale_up_and_down_are_stable() {
    // Scaling up never removes replicas from a cluster; scaling down never adds.
    let names: Vec<String> = (0..20).map(|i| format!("c{i:02}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let cs = clusters(&name_refs);
    let alloc: Vec<i64> = (0..20).map(|i| 50 + (i * 7) % 13).collect();
    let ds = details(&cs, &alloc);
    let p = dynamic_weight();
    let mut prior: Vec<TargetCluster> = Vec::new();
    for replicas in [7, 19, 40, 41, 100, 250] {
        let prior_refs: Vec<(&str, i32)> = prior
            .iter()
            .map(|t| (t.name.as_str(), t.replicas))
            .collect();
        let got = nonzero(assigned(run(
            &spec(replicas, &prior_refs, ODD_UID),
            &p,
            &ds,
            AssignMode::Steady,
            |i| dynamic(i, false),
        )));
        assert_eq!(got.iter().map(|t| t.replicas).sum::<i32>(), replicas);
        for old in &prior {
            let new = got
                .iter()
                .find(|t| t.name == old.name)
                .map_or(0, |t| t.replicas);
            assert!(
                new >= old.replicas,
                "{} went from {} to {new} when scaling up to {replicas}",
                old.name,
                old.replicas
            );
        }
        prior = got;
    }
    for replicas in [200, 120, 33, 5] {
        let prior_refs: Vec<(&str, i32)> = prior
            .iter()
            .map(|t| (t.name.as_str(), t.replicas))
            .collect();
        let got = nonzero(assigned(run(
            &spec(replicas, &prior_refs, ODD_UID),
            &p,
            &ds,
            AssignMode::Steady,
            |i| dynamic(i, false),
        )));
        assert_eq!(got.iter().map(|t| t.replicas).sum::<i32>(), replicas);
        for new in &got {
            let old = prior
                .iter()
                .find(|t| t.name == new.name)
                .map_or(0, |t| t.replicas);
            assert!(new.replicas <= old, "{} grew when scaling down", new.name);
        }
        prior = got;
    }
}

#[test]
fn merge_adds_and_appends_prior_only() {
    let merged = merge(&[("b", 2), ("z", 4), ("b", 3)], tc(&[("a", 1), ("b", 1)]));
    assert_eq!(merged, tc(&[("a", 1), ("b", 4), ("z", 4)]));
    assert_eq!(merge(&[("x", 1)], Vec::new()), tc(&[("x", 1)]));
    assert_eq!(merge(&[], tc(&[("x", 1)])), tc(&[("x", 1)]));
}

/// [`static_weight_of_rows`] (one pass, contenders only) against Webster by name over the positive
/// weights ([`dispense`]), on random candidate lists: ties, zero and negative weights, repeated
/// rows, and weights whose sum wraps to 0.
#[test]
fn static_weight_of_rows_is_webster_over_the_weighted_rows() {
    let mut x: u64 = 0x005e_ed0f_5747_1c5e;
    let mut next = move |m: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let names: Vec<String> = (0..400).map(|r| format!("c{r:04}")).collect();
    for case in 0..600 {
        let len = next(120) as usize;
        let weights: Vec<(u32, i64)> = (0..len)
            .map(|_| {
                let row = if case % 7 == 0 { next(40) } else { next(400) } as u32;
                let w = match case % 5 {
                    0 => next(5) as i64,
                    1 => [0, 1, 2, 3, 4][next(5) as usize],
                    2 => next(3) as i64 - 1,
                    3 => i64::MAX - next(2) as i64,
                    _ => 1 + next(1000) as i64,
                };
                (row, w)
            })
            .collect();
        // Distinct rows for most cases (a snapshot's candidates), repeats for every seventh.
        let weights: Vec<(u32, i64)> = if case % 7 == 0 {
            weights
        } else {
            let mut seen = std::collections::HashSet::new();
            weights.into_iter().filter(|w| seen.insert(w.0)).collect()
        };
        for replicas in [0, 1, 2, 3, 7, 40, 119, 1000] {
            for uid in [
                "",
                "d43fdeeb-d750-4e2b-bee3-64eb94534f4c",
                "4858ca61-3ff8-4095-8267-f3d059d8074c",
            ] {
                let mut votes: Vec<(&str, i64)> = weights
                    .iter()
                    .filter(|w| w.1 > 0)
                    .map(|&(r, w)| (names[r as usize].as_str(), w))
                    .collect();
                if votes.iter().fold(0i64, |s, &(_, w)| s.wrapping_add(w)) == 0 {
                    votes = weights
                        .iter()
                        .map(|&(r, _)| (names[r as usize].as_str(), 1))
                        .collect();
                }
                let want: Vec<TargetCluster> = dispense(replicas, &votes, &[], uid)
                    .into_iter()
                    .filter(|t| t.replicas > 0)
                    .collect();
                let got: Vec<TargetCluster> = static_weight_of_rows(replicas, &weights, uid)
                    .into_iter()
                    .map(|(i, n)| TargetCluster::new(&names[weights[i].0 as usize], n))
                    .collect();
                assert_eq!(got, want, "case {case}: {weights:?} {replicas} {uid}");
            }
        }
    }
}
