//! The built-in `StaticWeight` assigner as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust assigner.
//!
//! A call parses only what the assigner reads ([`Fields`]): the binding's `resource.uid` (Webster's
//! tie seed) and `replicas`, and the placement's `replicaScheduling`, which it keeps as text: that
//! text keys a memo (per cluster-set generation) of the parsed strategy and each cluster's static
//! weight (the `staticWeightList` rules it matches, every row's at once from an index of the
//! cluster set built when the set is pushed), so a binding whose strategy was seen before is not
//! parsed again and costs one memo lookup per cluster; the division itself runs every time. It
//! takes the call's rows as they are ([`Plugin::assign_rows`]): no per-cluster list is built.

use flotilla_api::policy::{Placement, StaticClusterWeight};
use flotilla_core::cluster_index::ClusterIndex;
use flotilla_core::division::{self, Strategy};
use flotilla_core::selector::SelectorView;
use flotilla_pdk::abi::{AssignReply, BindingRequest, DetailRow, InitRequest};
use flotilla_pdk::{KeyedMemo, Plugin, Raw};

/// Distinct `replicaScheduling` texts remembered per cluster set before the memo starts over.
const MEMO_LIMIT: usize = 512;

/// The binding fields the assigner reads: `resource.uid` (Webster's tie seed) and `replicas`
/// (unknown fields are skipped, not parsed).
#[derive(serde::Deserialize)]
#[serde(from = "SpecFields")]
pub struct Spec {
    uid: String,
    replicas: i32,
}

#[derive(serde::Deserialize)]
struct SpecFields {
    #[serde(default)]
    resource: ResourceFields,
    #[serde(default)]
    replicas: i32,
}

#[derive(Default, serde::Deserialize)]
struct ResourceFields {
    #[serde(default)]
    uid: String,
}

impl From<SpecFields> for Spec {
    fn from(f: SpecFields) -> Self {
        Spec { uid: f.resource.uid, replicas: f.replicas }
    }
}

/// The placement's `replicaScheduling`, unparsed (absent: `None`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementText {
    #[serde(default)]
    replica_scheduling: Option<Raw>,
}

/// What a call parses: the affinity term is not read by a static-weight division.
pub type Fields = BindingRequest<Spec, PlacementText, serde::de::IgnoredAny>;

/// What the memo keeps per `replicaScheduling` text.
struct Entry {
    /// The placement with only `replicaScheduling` set.
    placement: Placement,
    /// Per row of the pushed set: the cluster's static weight (empty until first used).
    weights: Vec<i64>,
}

/// The plugin.
pub struct StaticWeight {
    memo: KeyedMemo<Entry>,
    /// The cluster set by name, label and field values: a rule list the memo has not seen gets
    /// every row's weight from it at once, as the native memoised assigner does.
    index: ClusterIndex,
    /// Each call's `(row, weight)` list, reused.
    votes: Vec<(u32, i64)>,
}

impl Plugin for StaticWeight {
    /// Clusters are taken in as selectors read them (the rest of each object is skipped): a
    /// weight rule's `targetCluster` and the division's name order need no more.
    type Cluster = SelectorView;
    type Binding = Fields;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(StaticWeight { memo: KeyedMemo::new(MEMO_LIMIT), index: ClusterIndex::default(), votes: Vec::new() })
    }

    fn cluster_set(&mut self, clusters: &[SelectorView]) {
        self.index = ClusterIndex::new(clusters.iter().map(|v| &v.0));
        self.memo.clear();
    }

    fn assign_rows(&mut self, b: &Self::Binding, rows: &[DetailRow], _set: &[SelectorView]) -> Result<AssignReply, String> {
        let text = b.placement.replica_scheduling.as_ref().map_or("", |r| r.get());
        let set_len = self.index.len();
        let entry = self.memo.get_or_try_insert(text, || {
            let replica_scheduling =
                if text.is_empty() { None } else { Some(flotilla_pdk::serde_json::from_str(text).map_err(|e| format!("placement.replicaScheduling: {e}"))?) };
            Ok::<_, String>(Entry { placement: Placement { replica_scheduling, ..Default::default() }, weights: Vec::new() })
        })?;
        if division::strategy(&entry.placement).ok() != Some(Strategy::StaticWeight) {
            return Ok(AssignReply::Skip);
        }
        // Every row's weight at once, the first time this rule list is used with this set.
        if entry.weights.len() != set_len {
            let rules: Option<&[StaticClusterWeight]> =
                entry.placement.replica_scheduling.as_ref().and_then(|r| r.weight_preference.as_ref()).map(|w| w.static_weight_list.as_slice());
            entry.weights = rules.map_or_else(|| vec![1; set_len], |r| division::rule_weights(r, &self.index));
        }
        // Rows index the pushed cluster set, which is sorted by name (sdk/ABI.md §4), and the
        // runtime checked each is in range.
        self.votes.clear();
        self.votes.extend(rows.iter().map(|r| (r.index, entry.weights.get(r.index as usize).copied().unwrap_or(0))));
        let replicas = b.replicas.unwrap_or(b.binding.replicas);
        // The same division as the native assigner's (`static_weight_rows`), by row position.
        let assigned = division::static_weight_of_rows(replicas, &self.votes, &b.binding.uid);
        Ok(AssignReply::Assigned(assigned.into_iter().map(|(i, replicas)| (i as u32, replicas)).collect()))
    }
}

// Declared, so that the host does not call it for the bindings it would answer `skip`.
flotilla_pdk::export_plugin!(StaticWeight, name = "StaticWeight", version = "0.1.0", points = [assign], strategies = ["StaticWeight"], binding = ["resource", "replicas"]);
