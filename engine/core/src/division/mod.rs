//! Replica division: Karmada's assignment strategies (`pkg/scheduler/core/assignment.go`,
//! `division_algorithm.go`) over the clusters chosen by the select step.
//!
//! * [`strategy`] picks the strategy from the placement (`newAssignState`).
//! * [`duplicated`]: every cluster gets all replicas.
//! * [`static_weight`]: Webster over `staticWeightList` weights (max over matching rules).
//! * [`dynamic`]: `DynamicWeight` and `Aggregated`, Webster over available replicas, with
//!   Karmada's Fresh / Steady (scale up, scale down, unchanged) handling.
//!
//! Results may contain zero-replica entries; the framework drops them. The replica count to divide
//! is [`AssignInput::replicas`] (the binding's replicas, or one overflow tier's share).

use std::collections::{HashMap, HashSet};

use flotilla_api::policy::{Placement, division_preference, scheduling_type};
use flotilla_api::work::TargetCluster;

use crate::framework::{AssignInput, AssignMode, Assignment, ClusterDetail};

pub mod gosort;
pub mod webster;

pub use webster::dispense;

/// Karmada's replica assignment strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Every selected cluster runs all replicas.
    Duplicated,
    /// Divide by static weights (also the default for `Weighted` without a dynamic weight).
    StaticWeight,
    /// Divide in proportion to the clusters' available replicas.
    DynamicWeight,
    /// Divide over as few clusters as possible (proportionally over the minimal prefix).
    Aggregated,
}

impl Strategy {
    /// Every strategy with its name (as a Wasm assigner's metadata names it, sdk/ABI.md §1).
    pub const ALL: [(Strategy, &'static str); 4] = [
        (Strategy::Duplicated, "Duplicated"),
        (Strategy::StaticWeight, "StaticWeight"),
        (Strategy::DynamicWeight, "DynamicWeight"),
        (Strategy::Aggregated, "Aggregated"),
    ];

    /// The strategy named `name` ([`Strategy::ALL`]).
    pub fn named(name: &str) -> Option<Strategy> {
        Self::ALL.iter().find(|(_, n)| *n == name).map(|(s, _)| *s)
    }
}

/// The strategy Karmada uses for `placement` (`newAssignState`).
///
/// # Errors
/// Karmada's `unsupported replica scheduling strategy, ...` message for a Divided placement with
/// an empty or unknown division preference, or an unknown scheduling type.
pub fn strategy(placement: &Placement) -> Result<Strategy, String> {
    let ty = placement.replica_scheduling_type();
    let rs = placement.replica_scheduling.as_ref();
    let pref = rs
        .and_then(|r| r.replica_division_preference.as_deref())
        .unwrap_or("");
    match ty {
        scheduling_type::DUPLICATED => return Ok(Strategy::Duplicated),
        scheduling_type::DIVIDED => match pref {
            division_preference::AGGREGATED => return Ok(Strategy::Aggregated),
            division_preference::WEIGHTED => {
                let dynamic = rs
                    .and_then(|r| r.weight_preference.as_ref())
                    .is_some_and(|w| !w.dynamic_weight.is_empty());
                return Ok(if dynamic {
                    Strategy::DynamicWeight
                } else {
                    Strategy::StaticWeight
                });
            }
            _ => {}
        },
        _ => {}
    }
    Err(format!(
        "unsupported replica scheduling strategy, replicaSchedulingType: {ty}, replicaDivisionPreference: {pref}, \
         please try another scheduling strategy"
    ))
}

/// `assignByDuplicatedStrategy`: every selected cluster gets `input.replicas`, in selection order.
pub fn duplicated(input: &AssignInput<'_>) -> Assignment {
    Assignment::Assigned(
        input
            .clusters
            .iter()
            .map(|c| TargetCluster::new(c.name(), input.replicas))
            .collect(),
    )
}

/// `assignByStaticWeightStrategy`: each selected cluster's weight is the maximum weight of the
/// `staticWeightList` rules whose `targetCluster` matches it; clusters with weight 0 are left out;
/// when no cluster has a weight (or there is no `weightPreference`) every cluster weighs 1.
/// `input.replicas` are divided with Webster (tie seed: the resource UID), sorted by name; clusters
/// that get no replicas are left out (Karmada lists them with 0, and drops zero-replica targets
/// before they reach the binding, as the scheduler does here). The previous assignment is not used
/// (Karmada v1.16+).
pub fn static_weight(input: &AssignInput<'_>) -> Assignment {
    let rules = static_weight_rules(input);
    static_weight_with(input, |c| {
        rules.map_or(1, |rules| rule_weight(rules, c.cluster))
    })
}

/// The binding's `staticWeightList` (`None` without a `weightPreference`).
pub fn static_weight_rules<'a>(
    input: &AssignInput<'a>,
) -> Option<&'a [flotilla_api::policy::StaticClusterWeight]> {
    input
        .binding
        .placement
        .replica_scheduling
        .as_ref()
        .and_then(|r| r.weight_preference.as_ref())
        .map(|w| w.static_weight_list.as_slice())
}

/// A cluster's static weight: the maximum weight of the rules whose `targetCluster` matches it.
pub fn rule_weight(
    rules: &[flotilla_api::policy::StaticClusterWeight],
    cluster: &flotilla_api::cluster::Cluster,
) -> i64 {
    rules
        .iter()
        .filter(|r| crate::selector::cluster_matches(cluster, &r.target_cluster))
        .fold(0i64, |w, r| w.max(r.weight))
}

/// [`rule_weight`] for every row of the set `index` indexes: each rule's `targetCluster` resolved
/// against the index once instead of matched per cluster.
pub fn rule_weights(
    rules: &[flotilla_api::policy::StaticClusterWeight],
    index: &crate::cluster_index::ClusterIndex,
) -> Vec<i64> {
    let mut weights = vec![0i64; index.len()];
    for r in rules {
        let m = index.matching(&crate::selector::PreparedAffinity::new(&r.target_cluster));
        for row in m.rows() {
            if let Some(w) = weights.get_mut(row) {
                *w = (*w).max(r.weight);
            }
        }
    }
    weights
}

/// [`static_weight`] with each cluster's weight from `weight` (plugins that memoise
/// [`rule_weight`] per cluster set use this): weight-0 clusters are left out, all clusters weigh 1
/// when none has a weight, then Webster. The division is [`static_weight_rows`], named.
pub fn static_weight_with(
    input: &AssignInput<'_>,
    weight: impl FnMut(&crate::framework::ClusterDetail<'_>) -> i64,
) -> Assignment {
    let rows = static_weight_rows(input, weight);
    Assignment::Assigned(
        rows.into_iter()
            .map(|(i, n)| TargetCluster::new(input.clusters[i].name(), n))
            .collect(),
    )
}

/// The static-weight division by position in `input.clusters` ([`webster::dispense_rows`]):
/// `(position, replicas)` pairs sorted by cluster name, for the clusters given at least one
/// replica. Assigners that reply with rows (the Wasm build of `StaticWeight`) use it directly;
/// [`static_weight_with`] names the positions, so both backends run the same division.
///
/// When every cluster has its [`ClusterDetail::row`] in the name-sorted snapshot, parties are
/// ordered by row instead of by name (the same order, an integer comparison instead of a string
/// one: the candidates arrive in score order, so ordering them is most of the division's cost).
pub fn static_weight_rows(
    input: &AssignInput<'_>,
    mut weight: impl FnMut(&ClusterDetail<'_>) -> i64,
) -> Vec<(usize, i32)> {
    let uid = &input.binding.spec.resource.uid;
    if input
        .clusters
        .iter()
        .all(|c| c.row != ClusterDetail::NO_ROW)
    {
        let weights: Vec<(u32, i64)> = input.clusters.iter().map(|c| (c.row, weight(c))).collect();
        static_weight_of_rows(input.replicas, &weights, uid)
    } else {
        let weights: Vec<(&str, i64)> = input
            .clusters
            .iter()
            .map(|c| (c.name(), weight(c)))
            .collect();
        static_weight_by(input.replicas, &weights, uid, false)
    }
}

/// The static-weight division of `replicas` over the candidates `weights`, each known by its row
/// in a name-sorted cluster set with its static weight: `(position in weights, replicas)` for the
/// candidates given at least one replica, in row (name) order. [`static_weight_rows`] divides
/// with it, and so can an assigner that has rows and weights but no [`AssignInput`] (the Wasm
/// build of `StaticWeight`). `uid` is the binding's `spec.resource.uid` (Webster's tie seed).
pub fn static_weight_of_rows(
    replicas: i32,
    weights: &[(u32, i64)],
    uid: &str,
) -> Vec<(usize, i32)> {
    // One pass: whether a row repeats (a bit per row, up to the largest), whether any weight is
    // negative, and the (wrapping) sum of the weights.
    let limit = 4 * weights.len() + 4096;
    let mut seen: Vec<u64> = Vec::new();
    let (mut distinct, mut negative, mut sum) = (true, false, 0i64);
    for &(row, w) in weights {
        let row = row as usize;
        if row >= limit {
            distinct = false;
        } else if distinct {
            if seen.len() <= row / 64 {
                seen.resize(row / 64 + 1, 0);
            }
            let bit = 1u64 << (row % 64);
            distinct = seen[row / 64] & bit == 0;
            seen[row / 64] |= bit;
        }
        negative |= w < 0;
        sum = sum.wrapping_add(w);
    }
    if !distinct || negative {
        return static_weight_by(replicas, weights, uid, distinct);
    }
    if sum == 0 {
        // Go sums the weights with wrap-around: a sum of 0 (no weights, or a wrap) makes every
        // cluster weigh 1.
        let ones: Vec<(u32, i64)> = weights.iter().map(|&(row, _)| (row, 1)).collect();
        return webster::dispense_winners_by(replicas, &ones, uid);
    }
    // Zero weights are parties that never win a seat while another has votes: the division
    // over every row answers the same as over the weighted rows, by position in `weights`.
    webster::dispense_winners_by(replicas, weights, uid)
}

/// The static-weight division over parties known by a key that orders as their names: weight-0
/// parties are left out, every party weighs 1 when none has a weight, then Webster; `distinct`:
/// no two parties have the same key, so only the contenders for a seat are ordered
/// ([`webster::dispense_winners_by`]).
fn static_weight_by<K: Ord + Copy>(
    replicas: i32,
    weights: &[(K, i64)],
    uid: &str,
    distinct: bool,
) -> Vec<(usize, i32)> {
    let mut votes: Vec<(K, i64)> = Vec::with_capacity(weights.len());
    let mut positions: Vec<usize> = Vec::with_capacity(weights.len());
    for (i, &(key, w)) in weights.iter().enumerate() {
        if w > 0 {
            votes.push((key, w));
            positions.push(i);
        }
    }
    // Go sums the int64 weights with wrap-around: a sum of 0 (no weights, or a wrap) makes every
    // party weigh 1.
    if votes.iter().fold(0i64, |s, &(_, w)| s.wrapping_add(w)) == 0 {
        votes.clear();
        positions.clear();
        votes.extend(weights.iter().map(|&(key, _)| (key, 1)));
        positions.extend(0..weights.len());
    }
    // Parties that win no seat are not targets (the scheduler drops zero-replica targets): left
    // out here, so that no backend names them or sends them across the Wasm boundary.
    let mut rows = if distinct {
        webster::dispense_winners_by(replicas, &votes, uid)
    } else {
        let mut all = webster::dispense_by(replicas, &votes, uid);
        all.retain(|r| r.1 > 0);
        all
    };
    for r in &mut rows {
        r.0 = positions[r.0];
    }
    rows
}

/// Go's `int32(x)` for values that are `int32` in Karmada (saturating here; equal in range).
fn to_i32(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

/// Sum of replicas with Go's `int32` wrap-around (`util.GetSumOfReplicas`).
fn sum_i32(list: &[(&str, i32)]) -> i32 {
    list.iter().fold(0i32, |s, &(_, r)| s.wrapping_add(r))
}

/// `assignByDynamicStrategy` for `DynamicWeight` (`aggregated == false`) and `Aggregated`.
///
/// * `scheduled` = the binding's current `spec.clusters` entries whose cluster is selected.
/// * Fresh: divide all replicas with votes `allocatable + scheduled`, ignoring the prior result.
/// * Steady, scale down: divide all replicas with the scheduled replicas as votes.
/// * Steady, scale up (and first schedule): divide the missing replicas with votes
///   `allocatable`, then add them to `scheduled`.
/// * Steady, unchanged: `scheduled`.
///
/// Votes are sorted by replicas descending with Go's `sort.Sort` ([`gosort::go_sort`]), from
/// Karmada's initial order: `scheduled` when scaling down, else the selected clusters in selection
/// order. If they sum below the replicas to place, the result is Karmada's
/// `Clusters available replicas <N> are not enough to schedule.`, prefixed as Karmada wraps it
/// (`failed to scale up: ` / `failed to scale down: ` / `failed to do fresh scale: `).
/// `Aggregated` first moves previously used clusters to the front and keeps the shortest prefix
/// that can hold the replicas.
pub fn dynamic(input: &AssignInput<'_>, aggregated: bool) -> Assignment {
    let spec = input.binding.spec;
    let replicas = input.replicas;
    let candidates: HashSet<&str> = input.clusters.iter().map(ClusterDetail::name).collect();
    let scheduled: Vec<(&str, i32)> = spec
        .clusters
        .iter()
        .filter(|t| candidates.contains(t.name.as_str()))
        .map(|t| (t.name.as_str(), t.replicas))
        .collect();
    let assigned = sum_i32(&scheduled);
    let allocatable = || -> Vec<(&str, i32)> {
        input
            .clusters
            .iter()
            .map(|c| (c.name(), to_i32(c.allocatable_replicas)))
            .collect()
    };

    let (context, target, mut available, prior) = if input.mode == AssignMode::Fresh {
        let mut available = allocatable();
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(available.len());
        for (i, a) in available.iter().enumerate() {
            index.entry(a.0).or_insert(i);
        }
        for &(name, r) in &scheduled {
            if let Some(&i) = index.get(name) {
                available[i].1 = available[i].1.wrapping_add(r);
            }
        }
        ("failed to do fresh scale", replicas, available, Vec::new())
    } else if assigned > replicas {
        (
            "failed to scale down",
            replicas,
            scheduled.clone(),
            Vec::new(),
        )
    } else if assigned < replicas {
        (
            "failed to scale up",
            replicas.wrapping_sub(assigned),
            allocatable(),
            scheduled,
        )
    } else {
        return Assignment::Assigned(
            scheduled
                .iter()
                .map(|&(n, r)| TargetCluster::new(n, r))
                .collect(),
        );
    };
    // Karmada: `sort.Sort(TargetClustersList(...))`, which is not stable: ties land where Go's
    // pdqsort puts them, and `Aggregated` keeps a prefix of this order.
    gosort::go_sort(&mut available, |a, b| a.1 > b.1);

    let total = sum_i32(&available);
    if total < target {
        return Assignment::Unschedulable(format!(
            "{context}: Clusters available replicas {total} are not enough to schedule."
        ));
    }
    if aggregated {
        let used: HashSet<&str> = prior.iter().filter(|p| p.1 > 0).map(|p| p.0).collect();
        if !used.is_empty() {
            let (mut front, back): (Vec<_>, Vec<_>) =
                available.into_iter().partition(|a| used.contains(a.0));
            front.extend(back);
            available = front;
        }
        let mut sum = 0i32;
        if let Some(end) = available.iter().position(|a| {
            sum = sum.wrapping_add(a.1);
            sum >= target
        }) {
            available.truncate(end + 1);
        }
    }
    let votes: Vec<(&str, i64)> = available.iter().map(|&(n, r)| (n, i64::from(r))).collect();
    let fresh = dispense(target, &votes, &[], &spec.resource.uid);
    Assignment::Assigned(merge(&prior, fresh))
}

/// `util.MergeTargetClusters`: add `old` replicas to matching `new` entries, then append the
/// old-only clusters (in `old` order; Karmada's order there is map order, i.e. unspecified).
fn merge(old: &[(&str, i32)], mut new: Vec<TargetCluster>) -> Vec<TargetCluster> {
    if old.is_empty() {
        return new;
    }
    if new.is_empty() {
        return old.iter().map(|&(n, r)| TargetCluster::new(n, r)).collect();
    }
    // Go builds a map: a later duplicate of a name overrides an earlier one.
    let mut pending: HashMap<&str, i32> = old.iter().copied().collect();
    for t in &mut new {
        if let Some(r) = pending.remove(t.name.as_str()) {
            t.replicas = t.replicas.wrapping_add(r);
        }
    }
    for &(n, _) in old {
        if let Some(r) = pending.remove(n) {
            new.push(TargetCluster::new(n, r));
        }
    }
    new
}

#[cfg(test)]
mod tests;
