//! Spread constraints: Karmada's canonical cluster order, group scores and cluster selection
//! (`pkg/scheduler/core/spreadconstraint`: `group_clusters.go`, `select_clusters*.go`,
//! `select_groups.go`, `util.go`).
//!
//! * [`canonical_order`] sorts feasible clusters by overflow order ↑, score ↓, available
//!   replicas ↓, name ↑.
//! * [`select`] applies `SelectBestClusters`: all clusters when spread constraints are absent or
//!   ignored (static weights), else by region (with `selectGroups`' DFS) or by cluster (with the
//!   available-replica swap loop). Only `cluster` and `region` drive selection; `zone` and
//!   `provider` only act through the filter.

use std::cmp::Ordering;
use std::collections::HashMap;

use flotilla_api::policy::{
    Placement, SpreadConstraint, division_preference, scheduling_type, spread_field,
};
use flotilla_api::work::ResourceBindingSpec;

use crate::framework::{ClusterDetail, SelectInput, Selection};

/// `weightUnit`: group scores weigh replicas by 1000 so the average cluster score (0..100) only
/// breaks ties.
const WEIGHT_UNIT: i64 = 1000;

/// The canonical comparator: overflow order ascending, score descending, available replicas
/// descending, name ascending.
pub fn compare(a: &ClusterDetail<'_>, b: &ClusterDetail<'_>) -> Ordering {
    a.overflow_order
        .cmp(&b.overflow_order)
        .then_with(|| b.score.cmp(&a.score))
        .then_with(|| b.available_replicas.cmp(&a.available_replicas))
        .then_with(|| a.name().cmp(b.name()))
}

/// Sort `details` into Karmada's canonical cluster order (see [`compare`]).
pub fn canonical_order(details: &mut [ClusterDetail<'_>]) {
    details.sort_by(compare);
}

/// [`canonical_order`] for input already sorted by name: a stable sort on the other keys gives the
/// same order without comparing names (the scheduler's hot path).
pub fn canonical_order_presorted(details: &mut [ClusterDetail<'_>]) {
    details.sort_by(|a, b| {
        a.overflow_order
            .cmp(&b.overflow_order)
            .then_with(|| b.score.cmp(&a.score))
            .then_with(|| b.available_replicas.cmp(&a.available_replicas))
    });
}

/// `shouldIgnoreSpreadConstraint`: Divided + Weighted with no `weightPreference`, or with a
/// non-empty `staticWeightList` and no `dynamicWeight`. A present but empty `weightPreference`
/// does **not** ignore spread constraints.
pub fn spread_constraints_ignored(placement: &Placement) -> bool {
    let Some(rs) = placement.replica_scheduling.as_ref() else {
        return false;
    };
    placement.replica_scheduling_type() == scheduling_type::DIVIDED
        && rs.replica_division_preference.as_deref() == Some(division_preference::WEIGHTED)
        && rs
            .weight_preference
            .as_ref()
            .is_none_or(|w| !w.static_weight_list.is_empty() && w.dynamic_weight.is_empty())
}

/// `shouldIgnoreAvailableResource`: no `replicaScheduling`, or Duplicated.
fn availability_ignored(placement: &Placement) -> bool {
    placement.replica_scheduling.is_none()
        || placement.replica_scheduling_type() == scheduling_type::DUPLICATED
}

/// The last constraint for `field` (Karmada keys them by field in a map, so the last one wins).
fn constraint<'a>(placement: &'a Placement, field: &str) -> Option<&'a SpreadConstraint> {
    placement
        .spread_constraints
        .iter()
        .rev()
        .find(|c| c.spread_by_field == field)
}

/// Karmada's `SelectBestClusters` with `needReplicas = spec.replicas` (1 for a multi-component
/// workload placed whole, [`crate::component_sets::applicable`]). `input.clusters` must be in
/// canonical order; the result indexes into it.
pub fn select(input: &SelectInput<'_>) -> Selection {
    let placement = input.binding.placement;
    let spec = input.binding.spec;
    let all = || Selection::Selected((0..input.clusters.len()).collect());
    if placement.spread_constraints.is_empty() || spread_constraints_ignored(placement) {
        return all();
    }
    let need = if availability_ignored(placement) {
        None
    } else if crate::component_sets::applicable(spec) {
        // A multi-component workload is placed whole: one complete set is the unit.
        Some(1)
    } else {
        Some(i64::from(spec.replicas))
    };
    let cluster_sc = constraint(placement, spread_field::CLUSTER)
        .cloned()
        .unwrap_or_default();
    if let Some(region_sc) = constraint(placement, spread_field::REGION) {
        let regions = group_by_region(input.clusters, spec, placement, region_sc.min_groups);
        return match select_by_region(input.clusters, &regions, region_sc, &cluster_sc) {
            Ok(v) => Selection::Selected(v),
            Err(e) => Selection::Failed(e),
        };
    }
    if constraint(placement, spread_field::CLUSTER).is_some() {
        return match select_by_cluster(input.clusters, &cluster_sc, need) {
            Ok(v) => Selection::Selected(v),
            Err(e) => Selection::Failed(e),
        };
    }
    Selection::Failed("just support cluster and region spread constraint".to_owned())
}

// ------------------------------------------------------------------------------------- by cluster

/// `selectBestClustersByCluster`; `need == None` ignores available replicas.
fn select_by_cluster(
    clusters: &[ClusterDetail<'_>],
    sc: &SpreadConstraint,
    need: Option<i64>,
) -> Result<Vec<usize>, String> {
    let n = clusters.len();
    if i64::try_from(n).unwrap_or(i64::MAX) < i64::from(sc.min_groups) {
        return Err(
            "the number of feasible clusters is less than spreadConstraint.MinGroups".to_owned(),
        );
    }
    let k = n.min(usize::try_from(sc.max_groups).unwrap_or(0));
    let Some(need) = need else {
        return Ok((0..k).collect());
    };
    let mut chosen: Vec<usize> = (0..k).collect();
    let mut rest: Vec<usize> = (k..n).collect();
    let avail = |i: usize| clusters[i].available_replicas;
    let enough = |set: &[usize]| set.iter().fold(0i64, |s, &i| s.wrapping_add(avail(i))) >= need;
    let mut pos = k;
    while pos > 0 && !enough(&chosen) {
        pos -= 1;
        // The strictly largest available count above chosen[pos]; ties keep the earliest.
        let mut best: Option<usize> = None;
        let mut max = avail(chosen[pos]);
        for (j, &r) in rest.iter().enumerate() {
            if avail(r) > max {
                max = avail(r);
                best = Some(j);
            }
        }
        if let Some(j) = best {
            std::mem::swap(&mut chosen[pos], &mut rest[j]);
        }
    }
    if chosen.is_empty() || !enough(&chosen) {
        return Err(format!("no enough resource when selecting {k} clusters"));
    }
    Ok(chosen)
}

// -------------------------------------------------------------------------------------- by region

/// One region group: its clusters (indices, canonical order) and its group score.
#[derive(Debug, Clone)]
struct Region<'a> {
    name: &'a str,
    members: Vec<usize>,
    score: i64,
}

/// Region groups in first-appearance order, with `calcGroupScore` scores.
fn group_by_region<'a>(
    clusters: &[ClusterDetail<'a>],
    spec: &ResourceBindingSpec,
    placement: &Placement,
    min_groups: i32,
) -> Vec<Region<'a>> {
    let mut index: HashMap<&'a str, usize> = HashMap::new();
    let mut regions: Vec<Region<'a>> = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        let region = c.cluster.spec.region.as_str();
        if region.is_empty() {
            continue;
        }
        let at = *index.entry(region).or_insert_with(|| {
            regions.push(Region {
                name: region,
                members: Vec::new(),
                score: 0,
            });
            regions.len() - 1
        });
        regions[at].members.push(i);
    }
    for r in &mut regions {
        r.score = group_score(clusters, &r.members, spec, placement, min_groups);
    }
    regions
}

/// `calcGroupScore` for a group of clusters (indices in canonical order).
fn group_score(
    clusters: &[ClusterDetail<'_>],
    members: &[usize],
    spec: &ResourceBindingSpec,
    placement: &Placement,
    min_groups: i32,
) -> i64 {
    let replicas = i64::from(spec.replicas);
    if placement.replica_scheduling_type() == scheduling_type::DUPLICATED {
        let (mut valid, mut sum) = (0i64, 0i64);
        for &i in members {
            if clusters[i].available_replicas >= replicas {
                valid += 1;
                sum = sum.wrapping_add(clusters[i].score);
            }
        }
        if valid == 0 {
            return 0;
        }
        return (valid * WEIGHT_UNIT).wrapping_add(sum / valid);
    }
    // Go: int64(math.Ceil(float64(replicas) / float64(minGroups))); ±Inf and NaN convert to
    // MinInt64 on amd64.
    let target = if min_groups == 0 {
        i64::MIN
    } else {
        #[allow(clippy::cast_possible_truncation)]
        let t = (replicas as f64 / f64::from(min_groups)).ceil() as i64;
        t
    };
    let cluster_min = i64::from(
        constraint(placement, spread_field::CLUSTER)
            .map_or(0, |c| c.min_groups)
            .max(min_groups),
    );
    let (mut sum_avail, mut sum_score, mut valid) = (0i64, 0i64, 0i64);
    for &i in members {
        sum_avail = sum_avail.wrapping_add(clusters[i].available_replicas);
        sum_score = sum_score.wrapping_add(clusters[i].score);
        valid += 1;
        if valid >= cluster_min && sum_avail >= target {
            break;
        }
    }
    if sum_avail < target {
        let len = i64::try_from(members.len()).unwrap_or(i64::MAX).max(1);
        return sum_avail
            .wrapping_mul(WEIGHT_UNIT)
            .wrapping_add(sum_score / len);
    }
    target
        .wrapping_mul(WEIGHT_UNIT)
        .wrapping_add(sum_score / valid.max(1))
}

/// `selectBestClustersByRegion`.
fn select_by_region(
    clusters: &[ClusterDetail<'_>],
    regions: &[Region<'_>],
    region_sc: &SpreadConstraint,
    cluster_sc: &SpreadConstraint,
) -> Result<Vec<usize>, String> {
    if i64::try_from(regions.len()).unwrap_or(i64::MAX) < i64::from(region_sc.min_groups) {
        return Err(
            "the number of feasible region is less than spreadConstraint.MinGroups".to_owned(),
        );
    }
    let groups: Vec<Group<'_>> = regions
        .iter()
        .map(|r| Group {
            name: r.name,
            value: i64::try_from(r.members.len()).unwrap_or(i64::MAX),
            weight: r.score,
        })
        .collect();
    let chosen = select_groups(
        &groups,
        region_sc.min_groups,
        region_sc.max_groups,
        cluster_sc.min_groups,
    );
    if chosen.is_empty() {
        return Err(
            "the number of clusters is less than the cluster spreadConstraint.MinGroups".to_owned(),
        );
    }
    let mut selected: Vec<usize> = Vec::new();
    let mut candidates: Vec<usize> = Vec::new();
    for g in chosen {
        let members = &regions[g].members;
        if let Some((&first, others)) = members.split_first() {
            selected.push(first);
            candidates.extend_from_slice(others);
        }
    }
    let total = i64::try_from(selected.len() + candidates.len()).unwrap_or(i64::MAX);
    let need = total.min(i64::from(cluster_sc.max_groups));
    let rest = need - i64::try_from(selected.len()).unwrap_or(i64::MAX);
    if rest > 0 {
        candidates.sort_by(|&a, &b| compare(&clusters[a], &clusters[b]));
        selected.extend(
            candidates
                .into_iter()
                .take(usize::try_from(rest).unwrap_or(0)),
        );
    }
    Ok(selected)
}

/// A group for `selectGroups`: `value` = number of clusters, `weight` = group score.
#[derive(Debug, Clone, Copy)]
struct Group<'a> {
    name: &'a str,
    value: i64,
    weight: i64,
}

/// A feasible DFS path: discovery id, groups (indices into the sorted groups) ordered by weight
/// desc then name asc, and its totals.
#[derive(Debug)]
struct Path {
    id: usize,
    groups: Vec<usize>,
    weight: i64,
    value: i64,
}

/// `selectGroups`: the chosen groups (indices into `groups`), best first; empty when infeasible.
fn select_groups(groups: &[Group<'_>], min: i32, max: i32, target: i32) -> Vec<usize> {
    if groups.is_empty() {
        return Vec::new();
    }
    // Sort by value asc, weight desc, name asc (indices into `groups`).
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by(|&a, &b| {
        let (ga, gb) = (&groups[a], &groups[b]);
        ga.value
            .cmp(&gb.value)
            .then_with(|| gb.weight.cmp(&ga.weight))
            .then_with(|| ga.name.cmp(gb.name))
    });
    let mut dfs = Dfs {
        groups,
        order: &order,
        min: i64::from(min),
        max: i64::from(max),
        target: i64::from(target),
        path: Vec::new(),
        paths: Vec::new(),
    };
    dfs.run(0, 0);
    let mut paths = dfs.paths;
    if paths.len() > 1 {
        paths.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then_with(|| b.value.cmp(&a.value))
                .then_with(|| a.id.cmp(&b.id))
        });
    }
    let mut iter = paths.into_iter();
    let Some(mut best) = iter.next() else {
        return Vec::new();
    };
    for p in iter {
        // A strict prefix (by name) of the current best replaces it.
        if p.groups.len() < best.groups.len()
            && p.groups
                .iter()
                .zip(&best.groups)
                .all(|(&a, &b)| groups[a].name == groups[b].name)
        {
            best = p;
        }
    }
    best.groups
}

struct Dfs<'g, 'a> {
    groups: &'g [Group<'a>],
    order: &'g [usize],
    min: i64,
    max: i64,
    target: i64,
    path: Vec<usize>,
    paths: Vec<Path>,
}

impl Dfs<'_, '_> {
    fn len(&self) -> i64 {
        i64::try_from(self.path.len()).unwrap_or(i64::MAX)
    }

    fn run(&mut self, sum: i64, begin: usize) {
        if sum >= self.target && self.len() >= self.min && self.len() <= self.max {
            let mut groups = self.path.clone();
            let g = self.groups;
            groups.sort_by(|&a, &b| {
                g[b].weight
                    .cmp(&g[a].weight)
                    .then_with(|| g[a].name.cmp(g[b].name))
            });
            let weight = groups
                .iter()
                .fold(0i64, |s, &i| s.wrapping_add(g[i].weight));
            let value = groups.iter().fold(0i64, |s, &i| s.wrapping_add(g[i].value));
            self.paths.push(Path {
                id: self.paths.len() + 1,
                groups,
                weight,
                value,
            });
            return;
        }
        if self.len() >= self.max {
            return;
        }
        let n = self.order.len();
        let all_needed = i64::try_from(n).unwrap_or(i64::MAX) == self.min;
        let mut sum = sum;
        for pos in begin..n {
            let gi = self.order[pos];
            sum = sum.wrapping_add(self.groups[gi].value);
            self.path.push(gi);
            self.run(sum, pos + 1);
            // Karmada stops backtracking when every group is needed for the minimum.
            if all_needed {
                break;
            }
            sum = sum.wrapping_sub(self.groups[gi].value);
            self.path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use flotilla_api::cluster::Cluster;
    use flotilla_api::policy::{
        ClusterAffinity, ClusterPreferences, ReplicaSchedulingStrategy, StaticClusterWeight,
    };

    use super::*;
    use crate::framework::BindingContext;

    fn cluster(name: &str, region: &str) -> Cluster {
        let mut c = Cluster::default();
        c.metadata.name = Some(name.to_owned());
        c.spec.region = region.to_owned();
        c
    }

    fn detail(c: &Cluster, score: i64, avail: i64) -> ClusterDetail<'_> {
        ClusterDetail {
            cluster: c,
            score,
            allocatable_replicas: avail,
            available_replicas: avail,
            overflow_order: 0,
            row: ClusterDetail::NO_ROW,
        }
    }

    fn sc(field: &str, min: i32, max: i32) -> SpreadConstraint {
        SpreadConstraint {
            spread_by_field: field.to_owned(),
            min_groups: min,
            max_groups: max,
            ..SpreadConstraint::default()
        }
    }

    fn divided(
        pref: Option<&str>,
        wp: Option<ClusterPreferences>,
    ) -> Option<ReplicaSchedulingStrategy> {
        Some(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Divided".into()),
            replica_division_preference: pref.map(str::to_owned),
            weight_preference: wp,
        })
    }

    fn duplicated() -> Option<ReplicaSchedulingStrategy> {
        Some(ReplicaSchedulingStrategy {
            replica_scheduling_type: Some("Duplicated".into()),
            ..Default::default()
        })
    }

    fn names(ds: &[ClusterDetail<'_>], sel: &Selection) -> Vec<String> {
        match sel {
            Selection::Selected(v) => v.iter().map(|&i| ds[i].name().to_owned()).collect(),
            Selection::Failed(e) => panic!("selection failed: {e}"),
        }
    }

    fn run(ds: &[ClusterDetail<'_>], placement: &Placement, replicas: i32) -> Selection {
        let spec = ResourceBindingSpec {
            replicas,
            ..ResourceBindingSpec::default()
        };
        let binding = BindingContext::new(&spec, placement, None);
        select(&SelectInput {
            binding: &binding,
            clusters: ds,
        })
    }

    // ------------------------------------------------------------------ canonical order

    #[test]
    fn canonical_order_sorts_by_all_keys() {
        let cs: Vec<Cluster> = ["b", "a", "c", "d", "e"]
            .iter()
            .map(|n| cluster(n, ""))
            .collect();
        let mut ds = vec![
            detail(&cs[0], 10, 5),
            detail(&cs[1], 10, 5),
            detail(&cs[2], 10, 9),
            detail(&cs[3], 50, 1),
            detail(&cs[4], 90, 100),
        ];
        ds[4].overflow_order = 1;
        canonical_order(&mut ds);
        let order: Vec<&str> = ds.iter().map(ClusterDetail::name).collect();
        assert_eq!(order, ["d", "c", "a", "b", "e"]);
    }

    // ------------------------------------------------------------------ ignore rules

    #[test]
    fn ignore_rules() {
        let static_list = ClusterPreferences {
            static_weight_list: vec![StaticClusterWeight {
                target_cluster: ClusterAffinity {
                    cluster_names: vec!["member1".into()],
                    ..Default::default()
                },
                weight: 2,
            }],
            dynamic_weight: String::new(),
        };
        let p = |rs| Placement {
            replica_scheduling: rs,
            ..Placement::default()
        };
        assert!(spread_constraints_ignored(&p(divided(
            Some("Weighted"),
            None
        ))));
        assert!(spread_constraints_ignored(&p(divided(
            Some("Weighted"),
            Some(static_list)
        ))));
        // Pitfall: a present but empty weightPreference does not ignore spread constraints.
        assert!(!spread_constraints_ignored(&p(divided(
            Some("Weighted"),
            Some(ClusterPreferences::default())
        ))));
        let dynamic = ClusterPreferences {
            dynamic_weight: "AvailableReplicas".into(),
            ..Default::default()
        };
        assert!(!spread_constraints_ignored(&p(divided(
            Some("Weighted"),
            Some(dynamic)
        ))));
        assert!(!spread_constraints_ignored(&p(divided(
            Some("Aggregated"),
            None
        ))));
        assert!(!spread_constraints_ignored(&p(duplicated())));
        assert!(!spread_constraints_ignored(&p(None)));
    }

    // ------------------------------------------------------------------ SelectBestClusters

    /// Karmada's `generateClusterInfo`, already in canonical order.
    fn karmada_clusters() -> Vec<Cluster> {
        vec![
            cluster("member4", "R2"),
            cluster("member2", "R1"),
            cluster("member3", "R1"),
            cluster("member1", "R1"),
        ]
    }

    fn karmada_details(cs: &[Cluster]) -> Vec<ClusterDetail<'_>> {
        vec![
            detail(&cs[0], 60, 50),
            detail(&cs[1], 40, 60),
            detail(&cs[2], 30, 80),
            detail(&cs[3], 20, 40),
        ]
    }

    #[test]
    fn select_best_clusters_karmada_cases() {
        let cs = karmada_clusters();
        let ds = karmada_details(&cs);
        let by_cluster = |rs| Placement {
            spread_constraints: vec![sc("cluster", 1, 2)],
            replica_scheduling: rs,
            ..Placement::default()
        };
        // By score, availability ignored (no replicaScheduling).
        assert_eq!(
            names(&ds, &run(&ds, &by_cluster(None), 100)),
            ["member4", "member2"]
        );
        // Duplicated ignores availability.
        assert_eq!(
            names(&ds, &run(&ds, &by_cluster(duplicated()), 120)),
            ["member4", "member2"]
        );
        // Static weight ignores spread constraints: every cluster.
        let wp = ClusterPreferences {
            static_weight_list: vec![StaticClusterWeight {
                target_cluster: ClusterAffinity {
                    cluster_names: vec!["member1".into()],
                    ..Default::default()
                },
                weight: 2,
            }],
            dynamic_weight: String::new(),
        };
        assert_eq!(
            names(
                &ds,
                &run(&ds, &by_cluster(divided(Some("Weighted"), Some(wp))), 120)
            ),
            ["member4", "member2", "member3", "member1"]
        );
        // Divided: swap member2 for member3 to reach 120.
        assert_eq!(
            names(&ds, &run(&ds, &by_cluster(divided(None, None)), 120)),
            ["member4", "member3"]
        );
        // Not enough.
        assert_eq!(
            run(&ds, &by_cluster(divided(None, None)), 200),
            Selection::Failed("no enough resource when selecting 2 clusters".into())
        );
        // More than the feasible clusters.
        let p = Placement {
            spread_constraints: vec![sc("cluster", 7, 7)],
            ..Placement::default()
        };
        assert_eq!(
            run(&ds, &p, 30),
            Selection::Failed(
                "the number of feasible clusters is less than spreadConstraint.MinGroups".into()
            )
        );
    }

    #[test]
    fn by_cluster_details() {
        let cs: Vec<Cluster> = (1..=3)
            .map(|i| cluster(&format!("member{i}"), ""))
            .collect();
        // The doc example: scores 60/50/40, available 40/30/60, need 80 → member1 + member3.
        let ds = vec![
            detail(&cs[0], 60, 40),
            detail(&cs[1], 50, 30),
            detail(&cs[2], 40, 60),
        ];
        let p = |max| Placement {
            spread_constraints: vec![sc("cluster", 1, max)],
            replica_scheduling: divided(Some("Aggregated"), None),
            ..Placement::default()
        };
        assert_eq!(names(&ds, &run(&ds, &p(2), 80)), ["member1", "member3"]);
        // maxGroups unset (0) selects nothing: an error when availability counts...
        assert_eq!(
            run(&ds, &p(0), 1),
            Selection::Failed("no enough resource when selecting 0 clusters".into())
        );
        // ...and an empty selection when it does not.
        let dup = Placement {
            spread_constraints: vec![sc("cluster", 1, 0)],
            ..Placement::default()
        };
        assert_eq!(run(&ds, &dup, 1), Selection::Selected(vec![]));
        // No cluster/region constraint.
        let zone = Placement {
            spread_constraints: vec![sc("zone", 1, 2)],
            replica_scheduling: divided(Some("Aggregated"), None),
            ..Placement::default()
        };
        assert_eq!(
            run(&ds, &zone, 1),
            Selection::Failed("just support cluster and region spread constraint".into())
        );
        // No constraints: everything in canonical order.
        assert_eq!(
            run(&ds, &Placement::default(), 1),
            Selection::Selected(vec![0, 1, 2])
        );
    }

    // ------------------------------------------------------------------ group scores

    #[test]
    fn group_scores_match_karmada_examples() {
        let cs: Vec<Cluster> = (0..5).map(|i| cluster(&format!("m{i}"), "R")).collect();
        let mk = |scores: &[i64], avail: &[i64]| -> Vec<ClusterDetail<'_>> {
            scores
                .iter()
                .zip(avail)
                .enumerate()
                .map(|(i, (&s, &a))| detail(&cs[i], s, a))
                .collect()
        };
        let members = |ds: &[ClusterDetail<'_>]| -> Vec<usize> { (0..ds.len()).collect() };
        let spec = |r| ResourceBindingSpec {
            replicas: r,
            ..ResourceBindingSpec::default()
        };
        let div = Placement {
            spread_constraints: vec![sc("cluster", 1, 0), sc("region", 2, 2)],
            replica_scheduling: divided(Some("Aggregated"), None),
            ..Placement::default()
        };
        let g1 = mk(&[100; 5], &[10, 10, 10, 10, 5]);
        let g2 = mk(&[0; 4], &[40, 30, 10, 10]);
        assert_eq!(group_score(&g1, &members(&g1), &spec(100), &div, 2), 45_100);
        assert_eq!(group_score(&g2, &members(&g2), &spec(100), &div, 2), 50_000);
        let g1 = mk(&[100; 5], &[40, 40, 10, 10, 5]);
        let g2 = mk(&[0; 4], &[100, 100, 10, 10]);
        assert_eq!(group_score(&g1, &members(&g1), &spec(100), &div, 2), 50_100);
        assert_eq!(group_score(&g2, &members(&g2), &spec(100), &div, 2), 50_000);

        let dup = Placement {
            replica_scheduling: duplicated(),
            ..Placement::default()
        };
        let g1 = mk(&[100; 5], &[60, 70, 40, 30, 10]);
        let g2 = mk(&[0; 4], &[60; 4]);
        assert_eq!(group_score(&g1, &members(&g1), &spec(50), &dup, 1), 2_100);
        assert_eq!(group_score(&g2, &members(&g2), &spec(50), &dup, 1), 4_000);
        let g3 = mk(&[50, 50], &[5, 5]);
        assert_eq!(group_score(&g3, &members(&g3), &spec(10), &dup, 1), 0);
        assert_eq!(group_score(&g3, &[], &spec(10), &dup, 1), 0);
    }

    // ------------------------------------------------------------------ selectGroups

    fn groups(v: &[(&'static str, i64, i64)]) -> Vec<Group<'static>> {
        v.iter()
            .map(|&(name, value, weight)| Group {
                name,
                value,
                weight,
            })
            .collect()
    }

    fn pick(v: &[(&'static str, i64, i64)], min: i32, max: i32, target: i32) -> Vec<&'static str> {
        let g = groups(v);
        select_groups(&g, min, max, target)
            .into_iter()
            .map(|i| g[i].name)
            .collect()
    }

    #[test]
    fn select_groups_karmada_cases() {
        assert!(pick(&[], 2, 3, 1).is_empty());
        assert!(pick(&[("R1", 1, 80)], 2, 3, 1).is_empty());
        assert!(pick(&[("R1", 1, 80), ("R2", 2, 30)], 2, 3, 4).is_empty());
        assert_eq!(pick(&[("R1", 1, 80)], 1, 3, 1), ["R1"]);
        assert_eq!(
            pick(
                &[
                    ("R1", 1, 80),
                    ("R3", 1, 80),
                    ("R2", 1, 60),
                    ("R5", 2, 60),
                    ("R4", 5, 50),
                    ("R6", 3, 50)
                ],
                1,
                3,
                10
            ),
            ["R5", "R4", "R6"]
        );
        assert_eq!(
            pick(
                &[
                    ("R1", 1, 80),
                    ("R2", 4, 40),
                    ("R3", 1, 30),
                    ("R4", 3, 30),
                    ("R5", 3, 20),
                    ("R6", 5, 10)
                ],
                2,
                6,
                5
            ),
            ["R1", "R2"]
        );
        assert_eq!(
            pick(
                &[
                    ("R1", 1, 60),
                    ("R2", 1, 50),
                    ("R3", 1, 40),
                    ("R4", 3, 30),
                    ("R5", 3, 20),
                    ("R6", 3, 10)
                ],
                1,
                3,
                6
            ),
            ["R1", "R4", "R5"]
        );
        assert_eq!(
            pick(
                &[("R1", 1, 60), ("R2", 2, 50), ("R3", 3, 40), ("R4", 4, 30)],
                1,
                2,
                5
            ),
            ["R1", "R4"]
        );
        assert_eq!(
            pick(
                &[("R4", 1, 60), ("R3", 3, 50), ("R1", 3, 40), ("R2", 4, 30)],
                1,
                2,
                5
            ),
            ["R3", "R1"]
        );
    }

    #[test]
    fn select_groups_quirks() {
        // Every group needed for the minimum: only the first child is explored at each level.
        assert_eq!(pick(&[("A", 1, 10), ("B", 1, 20)], 2, 2, 2), ["B", "A"]);
        // maxGroups 0 records the empty path when the target is 0, which selects nothing.
        assert!(pick(&[("A", 1, 10)], 0, 0, 0).is_empty());
    }

    // ------------------------------------------------------------------ by region

    /// (region, region score, [(cluster, score, available)]).
    type RegionCase = (&'static str, i64, &'static [(&'static str, i64, i64)]);

    /// Build canonical details and regions with the given (explicit) region scores.
    fn by_region_case(
        regions: &[RegionCase],
        region_sc: SpreadConstraint,
        cluster_sc: SpreadConstraint,
    ) -> Result<Vec<String>, String> {
        let cs: Vec<Cluster> = regions
            .iter()
            .flat_map(|(r, _, ms)| ms.iter().map(move |(n, _, _)| cluster(n, r)))
            .collect();
        let stats: Vec<(i64, i64)> = regions
            .iter()
            .flat_map(|(_, _, ms)| ms.iter().map(|&(_, s, a)| (s, a)))
            .collect();
        let mut ds: Vec<ClusterDetail<'_>> = cs
            .iter()
            .zip(&stats)
            .map(|(c, &(s, a))| detail(c, s, a))
            .collect();
        canonical_order(&mut ds);
        let rs: Vec<Region<'_>> = regions
            .iter()
            .map(|&(name, score, _)| Region {
                name,
                members: (0..ds.len())
                    .filter(|&i| ds[i].cluster.spec.region == name)
                    .collect(),
                score,
            })
            .collect();
        select_by_region(&ds, &rs, &region_sc, &cluster_sc)
            .map(|v| v.iter().map(|&i| ds[i].name().to_owned()).collect())
    }

    #[test]
    fn by_region_karmada_cases() {
        let two: &[RegionCase] = &[
            ("R1", 100, &[("member1", 100, 40), ("member2", 80, 40)]),
            (
                "R2",
                80,
                &[
                    ("member3", 80, 40),
                    ("member4", 80, 40),
                    ("member5", 60, 40),
                ],
            ),
        ];
        assert_eq!(
            by_region_case(two, sc("region", 1, 1), sc("cluster", 2, 2)),
            Ok(vec!["member1".into(), "member2".into()])
        );
        assert_eq!(
            by_region_case(two, sc("region", 1, 1), sc("cluster", 3, 3)),
            Ok(vec!["member3".into(), "member4".into(), "member5".into()])
        );
        assert_eq!(
            by_region_case(two, sc("region", 3, 3), sc("cluster", 3, 3)),
            Err("the number of feasible region is less than spreadConstraint.MinGroups".into())
        );
        let two_b: &[RegionCase] = &[
            ("R1", 100, &[("member1", 100, 40), ("member2", 80, 60)]),
            (
                "R2",
                80,
                &[
                    ("member3", 80, 40),
                    ("member4", 80, 40),
                    ("member5", 60, 40),
                ],
            ),
        ];
        assert_eq!(
            by_region_case(two_b, sc("region", 1, 1), sc("cluster", 4, 4)),
            Err(
                "the number of clusters is less than the cluster spreadConstraint.MinGroups".into()
            )
        );
        let one: &[RegionCase] = &[("R1", 100, &[("member1", 100, 40), ("member2", 80, 20)])];
        assert!(by_region_case(one, sc("region", 1, 1), sc("cluster", 3, 4)).is_err());

        let four: &[RegionCase] = &[
            ("R1", 90, &[("member1", 90, 40)]),
            (
                "R2",
                70,
                &[
                    ("member2", 70, 40),
                    ("member3", 60, 40),
                    ("member4", 30, 40),
                ],
            ),
            ("R3", 80, &[("member5", 80, 40), ("member6", 50, 60)]),
            (
                "R4",
                50,
                &[
                    ("member7", 50, 50),
                    ("member8", 40, 50),
                    ("member9", 10, 50),
                    ("member10", 0, 50),
                ],
            ),
        ];
        assert_eq!(
            by_region_case(four, sc("region", 2, 2), sc("cluster", 4, 5)),
            Ok(["member1", "member2", "member3", "member4"]
                .map(String::from)
                .to_vec())
        );
        let five: &[RegionCase] = &[
            ("R1", 70, &[("member1", 70, 40)]),
            (
                "R2",
                40,
                &[
                    ("member2", 40, 40),
                    ("member3", 40, 40),
                    ("member4", 40, 40),
                ],
            ),
            ("R3", 60, &[("member5", 60, 40), ("member6", 50, 60)]),
            ("R4", 70, &[("member7", 70, 100)]),
            ("R5", 50, &[("member8", 50, 50)]),
        ];
        assert_eq!(
            by_region_case(five, sc("region", 1, 3), sc("cluster", 6, 8)),
            Ok([
                "member1", "member5", "member2", "member6", "member3", "member4"
            ]
            .map(String::from)
            .to_vec())
        );
    }

    #[test]
    fn by_region_end_to_end_computes_scores() {
        // Two regions; Duplicated: R1 has two clusters ≥ 10 replicas (2000+avg), R2 one (1000+avg).
        let cs = [
            cluster("a", "R1"),
            cluster("b", "R2"),
            cluster("c", "R1"),
            cluster("d", ""),
        ];
        let mut ds = vec![
            detail(&cs[0], 90, 20),
            detail(&cs[1], 100, 50),
            detail(&cs[2], 10, 30),
            detail(&cs[3], 100, 99),
        ];
        canonical_order(&mut ds);
        let p = Placement {
            spread_constraints: vec![sc("cluster", 1, 5), sc("region", 1, 1)],
            replica_scheduling: duplicated(),
            ..Placement::default()
        };
        // Region choice: R1 (score 2050) over R2 (1100); both clusters of R1 selected, `d`
        // (no region) never.
        assert_eq!(names(&ds, &run(&ds, &p, 10)), ["a", "c"]);
        // Nobody can hold 10000: both scores are 0, and the larger region wins the tie.
        assert_eq!(names(&ds, &run(&ds, &p, 10_000)), ["a", "c"]);
        // Divided: R1 scores 50·1000 + 50, R2 50·1000 + 100; R2 is chosen although its 50
        // available replicas cannot hold 1000 (the region path never checks capacity).
        let p = Placement {
            spread_constraints: vec![sc("cluster", 1, 5), sc("region", 1, 1)],
            replica_scheduling: divided(Some("Aggregated"), None),
            ..Placement::default()
        };
        assert_eq!(names(&ds, &run(&ds, &p, 1000)), ["b"]);
    }
}
