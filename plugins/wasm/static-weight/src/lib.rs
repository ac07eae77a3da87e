//! The built-in `StaticWeight` assigner as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust assigner.
//!
//! A call parses only what the assigner reads ([`Fields`]): the binding's `resource.uid` (Webster's
//! tie seed) and `replicas`, and the placement's `replicaScheduling`, which it keeps as text: that
//! text keys a memo (per cluster-set generation) of the parsed strategy and each cluster's static
//! weight (the `staticWeightList` rules it matches, every row's at once from an index of the
//! cluster set built when the set is pushed), so a binding whose strategy was seen before is not
//! parsed again and costs one memo lookup per cluster; the division itself runs every time.

use flotilla_api::meta::ObjectReference;
use flotilla_api::policy::{Placement, StaticClusterWeight};
use flotilla_api::work::ResourceBindingSpec;
use flotilla_core::cluster_index::ClusterIndex;
use flotilla_core::division::{self, Strategy};
use flotilla_core::selector::SelectorView;
use flotilla_core::framework::{AssignInput, AssignMode, BindingContext, ClusterDetail};
use flotilla_pdk::abi::{self, AssignReply, BindingRequest, InitRequest};
use flotilla_pdk::{Detail, KeyedMemo, Plugin, Raw};

/// Distinct `replicaScheduling` texts remembered per cluster set before the memo starts over.
const MEMO_LIMIT: usize = 512;

/// The binding fields the assigner reads, as a `ResourceBindingSpec` (the rest left at defaults;
/// unknown fields are skipped, not parsed).
#[derive(serde::Deserialize)]
#[serde(from = "SpecFields")]
pub struct Spec(ResourceBindingSpec);

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
        Spec(ResourceBindingSpec {
            resource: ObjectReference { uid: f.resource.uid, ..Default::default() },
            replicas: f.replicas,
            ..Default::default()
        })
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
    /// Per row: the cluster's static weight, or -1 when not yet computed.
    weights: Vec<i64>,
}

/// The plugin.
pub struct StaticWeight {
    memo: KeyedMemo<Entry>,
    /// The cluster set by name, label and field values: a rule list the memo has not seen gets
    /// every row's weight from it at once, as the native memoised assigner does.
    index: ClusterIndex,
}

impl Plugin for StaticWeight {
    /// Clusters are taken in as selectors read them (the rest of each object is skipped): a
    /// weight rule's `targetCluster` and the division's name order need no more.
    type Cluster = SelectorView;
    type Binding = Fields;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(StaticWeight { memo: KeyedMemo::new(MEMO_LIMIT), index: ClusterIndex::default() })
    }

    fn cluster_set(&mut self, clusters: &[SelectorView]) {
        self.index = ClusterIndex::new(clusters.iter().map(|v| &v.0));
        self.memo.clear();
    }

    fn assign(&mut self, b: &Self::Binding, clusters: &[Detail<'_, SelectorView>]) -> Result<AssignReply, String> {
        let text = b.placement.replica_scheduling.as_ref().map_or("", |r| r.get());
        let rows = self.index.len();
        let entry = self.memo.get_or_try_insert(text, || {
            let replica_scheduling =
                if text.is_empty() { None } else { Some(flotilla_pdk::serde_json::from_str(text).map_err(|e| format!("placement.replicaScheduling: {e}"))?) };
            Ok::<_, String>(Entry { placement: Placement { replica_scheduling, ..Default::default() }, weights: vec![-1; rows] })
        })?;
        let (spec, placement) = (&b.binding.0, &entry.placement);
        if division::strategy(placement).ok() != Some(Strategy::StaticWeight) {
            return Ok(AssignReply::Skip);
        }
        let ctx = BindingContext::new(spec, placement, None);
        let details: Vec<ClusterDetail<'_>> = clusters
            .iter()
            .map(|d| ClusterDetail {
                cluster: &d.cluster.0,
                score: d.row.score,
                allocatable_replicas: d.row.allocatable_replicas,
                available_replicas: d.row.available_replicas,
                overflow_order: d.row.overflow_order,
                // Rows index the pushed cluster set, which is sorted by name (sdk/ABI.md §4).
                row: d.row.index,
            })
            .collect();
        let mode = if b.mode == Some(abi::AssignMode::Fresh) { AssignMode::Fresh } else { AssignMode::Steady };
        let input = AssignInput::new(&ctx, &details, b.replicas.unwrap_or(spec.replicas), mode);
        let rules: Option<&[StaticClusterWeight]> = division::static_weight_rules(&input);
        let (weights, index) = (&mut entry.weights, &self.index);
        let weight = |c: &ClusterDetail<'_>| {
            let compute = || rules.map_or(1, |r| division::rule_weight(r, c.cluster));
            match weights.get(c.row as usize) {
                Some(&w) if w >= 0 => w,
                // Every row's weight at once, on the first row not known yet.
                Some(_) => {
                    *weights = rules.map_or_else(|| vec![1; weights.len()], |r| division::rule_weights(r, index));
                    weights.get(c.row as usize).copied().unwrap_or_else(compute)
                }
                None => compute(),
            }
        };
        // The same division as the native assigner's `static_weight_with`, answered by row
        // position (the reply format) rather than by name.
        let rows = division::static_weight_rows(&input, weight);
        Ok(AssignReply::Assigned(rows.into_iter().map(|(row, replicas)| (row as u32, replicas)).collect()))
    }
}

// Declared, so that the host does not call it for the bindings it would answer `skip`.
flotilla_pdk::export_plugin!(StaticWeight, name = "StaticWeight", version = "0.1.0", points = [assign], strategies = ["StaticWeight"]);
