//! The built-in `StaticWeight` assigner as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust assigner.
//!
//! Each cluster's static weight (the `staticWeightList` rules it matches) is memoised per
//! cluster-set generation and distinct rule list; the division itself runs every time.
//!
//! A call parses only what the assigner reads ([`Fields`]): the placement's `replicaScheduling`
//! and the binding's `resource.uid` (Webster's tie seed) and `replicas`. Parsing the whole binding
//! (whose placement comes twice) was this plugin's largest cost per call after the memo.

use std::collections::HashMap;

use flotilla_api::cluster::Cluster;
use flotilla_api::meta::ObjectReference;
use flotilla_api::policy::{Placement, ReplicaSchedulingStrategy};
use flotilla_api::work::ResourceBindingSpec;
use flotilla_core::division::{self, Strategy};
use flotilla_core::framework::{AssignInput, AssignMode, BindingContext, ClusterDetail};
use flotilla_pdk::abi::{self, AssignReply, BindingRequest, InitRequest};
use flotilla_pdk::{Detail, Plugin, RowIndex};

/// Distinct rule lists remembered per cluster set before the memo starts over.
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

/// The placement fields the assigner reads (`replicaScheduling`), as a `Placement`.
#[derive(serde::Deserialize)]
#[serde(from = "PlacementFields")]
pub struct PlacementOf(Placement);

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlacementFields {
    #[serde(default)]
    replica_scheduling: Option<ReplicaSchedulingStrategy>,
}

impl From<PlacementFields> for PlacementOf {
    fn from(f: PlacementFields) -> Self {
        PlacementOf(Placement { replica_scheduling: f.replica_scheduling, ..Default::default() })
    }
}

/// What a call parses: the affinity term is not read by a static-weight division.
pub type Fields = BindingRequest<Spec, PlacementOf, serde::de::IgnoredAny>;

/// The plugin.
#[derive(Default)]
pub struct StaticWeight {
    rows: RowIndex,
    /// Per rule list, per row: the weight, or -1 when not yet computed.
    memo: HashMap<String, Vec<i64>>,
}

impl Plugin for StaticWeight {
    type Cluster = Cluster;
    type Binding = Fields;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(StaticWeight::default())
    }

    fn cluster_set(&mut self, clusters: &[Cluster]) {
        self.rows = RowIndex::new(clusters);
        self.memo.clear();
    }

    fn assign(&mut self, b: &Self::Binding, clusters: &[Detail<'_, Cluster>]) -> Result<AssignReply, String> {
        let (spec, placement) = (&b.binding.0, &b.placement.0);
        if division::strategy(placement).ok() != Some(Strategy::StaticWeight) {
            return Ok(AssignReply::Skip);
        }
        let ctx = BindingContext::new(spec, placement, None);
        let details: Vec<ClusterDetail<'_>> = clusters
            .iter()
            .map(|d| ClusterDetail {
                cluster: d.cluster,
                score: d.row.score,
                allocatable_replicas: d.row.allocatable_replicas,
                available_replicas: d.row.available_replicas,
                overflow_order: d.row.overflow_order,
            })
            .collect();
        let mode = if b.mode == Some(abi::AssignMode::Fresh) { AssignMode::Fresh } else { AssignMode::Steady };
        let input = AssignInput::new(&ctx, &details, b.replicas.unwrap_or(spec.replicas), mode);
        let rules = division::static_weight_rules(&input);
        let key = flotilla_pdk::serde_json::to_string(&rules).map_err(|e| e.to_string())?;
        if self.memo.len() >= MEMO_LIMIT && !self.memo.contains_key(&key) {
            self.memo.clear();
        }
        let row_index = self.rows;
        let memo = self.memo.entry(key).or_insert_with(|| vec![-1; row_index.len()]);
        let weight = |c: &ClusterDetail<'_>| {
            let compute = || rules.map_or(1, |r| division::rule_weight(r, c.cluster));
            match row_index.row(c.cluster) {
                Some(i) => {
                    if memo[i] < 0 {
                        memo[i] = compute();
                    }
                    memo[i]
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

flotilla_pdk::export_plugin!(StaticWeight, name = "StaticWeight", version = "0.1.0", points = [assign]);
