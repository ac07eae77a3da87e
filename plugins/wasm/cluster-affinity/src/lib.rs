//! The built-in `ClusterAffinity` filter as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust plugin.
//!
//! Verdicts are memoised per cluster-set generation and distinct affinity (what the filter reads:
//! the placement's `clusterAffinity`, the current affinity term, whether the binding is a
//! workload), so a binding whose affinity was already evaluated against this cluster set costs one
//! lookup per row. Affinities with CEL selectors are evaluated every time.
//!
//! A call parses only what the filter reads ([`Fields`]): the placement's `clusterAffinity`, the
//! affinity term, and what makes the binding a workload (`replicas`, `replicaRequirements`,
//! `components`). The rest of the binding is skipped unparsed.

use std::collections::HashMap;

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{ClusterAffinity as Affinity, ClusterAffinityTerm, Placement};
use flotilla_api::work::{ReplicaRequirements, ResourceBindingSpec};
use serde::de::IgnoredAny;
use flotilla_core::expression;
use flotilla_core::framework::{BindingContext, FilterInput, FilterPlugin, Verdict};
use flotilla_pdk::abi::{BindingRequest, InitRequest};
use flotilla_pdk::{FilterOut, Plugin, RowIndex};

/// The native filter's reason for a mismatch (plans must be identical).
const MISMATCH: &str = "cluster(s) did not match the placement cluster affinity constraint";
/// Distinct affinities remembered per cluster set before the memo starts over.
const MEMO_LIMIT: usize = 512;

/// The binding fields the filter reads, as a `ResourceBindingSpec`: only whether it is a workload
/// (`ResourceBindingSpec::is_workload`) matters, so contents are not kept.
#[derive(serde::Deserialize)]
#[serde(from = "SpecFields")]
pub struct Spec(ResourceBindingSpec);

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecFields {
    #[serde(default)]
    replicas: i32,
    #[serde(default)]
    replica_requirements: Option<IgnoredAny>,
    #[serde(default)]
    components: Vec<IgnoredAny>,
}

impl From<SpecFields> for Spec {
    fn from(f: SpecFields) -> Self {
        Spec(ResourceBindingSpec {
            replicas: f.replicas,
            replica_requirements: f.replica_requirements.map(|_| ReplicaRequirements::default()),
            components: vec![flotilla_pdk::serde_json::Value::Null; f.components.len()],
            ..Default::default()
        })
    }
}

/// The placement fields the filter reads (`clusterAffinity`), as a `Placement`.
#[derive(serde::Deserialize)]
#[serde(from = "PlacementFields")]
pub struct PlacementOf(Placement);

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlacementFields {
    #[serde(default)]
    cluster_affinity: Option<Affinity>,
}

impl From<PlacementFields> for PlacementOf {
    fn from(f: PlacementFields) -> Self {
        PlacementOf(Placement { cluster_affinity: f.cluster_affinity, ..Default::default() })
    }
}

/// What a call parses.
pub type Fields = BindingRequest<Spec, PlacementOf, ClusterAffinityTerm>;

/// The plugin.
#[derive(Default)]
pub struct ClusterAffinity {
    rows: RowIndex,
    /// Per affinity key, per row: 0 not yet evaluated, 1 fits, 2 does not.
    memo: HashMap<String, Vec<u8>>,
}

impl Plugin for ClusterAffinity {
    type Cluster = Cluster;
    type Binding = Fields;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(ClusterAffinity::default())
    }

    fn cluster_set(&mut self, clusters: &[Cluster]) {
        self.rows = RowIndex::new(clusters);
        self.memo.clear();
    }

    fn filter(&mut self, b: &Self::Binding, clusters: &[&Cluster], out: &mut FilterOut) -> Result<(), String> {
        let placement = &b.placement.0;
        let ctx = BindingContext::new(&b.binding.0, placement, b.affinity_term.as_ref());
        let cel = match (&placement.cluster_affinity, &b.affinity_term) {
            (Some(a), _) => a.cel_selector.as_ref(),
            (None, Some(t)) => t.affinity.cel_selector.as_ref(),
            (None, None) => None,
        };
        if expression::has_cel(cel) {
            let mut verdicts = Vec::with_capacity(clusters.len());
            flotilla_plugins::filter::ClusterAffinity.filter(&FilterInput::new(&ctx, clusters), &mut verdicts).map_err(|e| e.to_string())?;
            for v in verdicts {
                match v {
                    Verdict::Fit => out.fit(),
                    Verdict::Unschedulable(reason) => out.unfit(&reason),
                }
            }
            return Ok(());
        }
        let key = flotilla_pdk::serde_json::to_string(&(&placement.cluster_affinity, &b.affinity_term, ctx.is_workload()))
            .map_err(|e| e.to_string())?;
        if self.memo.len() >= MEMO_LIMIT && !self.memo.contains_key(&key) {
            self.memo.clear();
        }
        let rows = self.rows;
        let memo = self.memo.entry(key).or_insert_with(|| vec![0; rows.len()]);
        for c in clusters {
            let fit = match rows.row(*c) {
                Some(i) => {
                    if memo[i] == 0 {
                        memo[i] = if flotilla_plugins::filter::affinity_matches(&ctx, c) { 1 } else { 2 };
                    }
                    memo[i] == 1
                }
                None => flotilla_plugins::filter::affinity_matches(&ctx, c),
            };
            if fit { out.fit() } else { out.unfit_static(MISMATCH) }
        }
        Ok(())
    }
}

flotilla_pdk::export_plugin!(ClusterAffinity, name = "ClusterAffinity", version = "0.1.0", points = [filter]);
