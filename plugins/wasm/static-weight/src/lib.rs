//! The built-in `StaticWeight` assigner as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust assigner.
//!
//! Each cluster's static weight (the `staticWeightList` rules it matches) is memoised per
//! cluster-set generation and distinct rule list; the division itself runs every time.

use std::collections::HashMap;

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{ClusterAffinityTerm, Placement};
use flotilla_api::work::ResourceBindingSpec;
use flotilla_core::division::{self, Strategy};
use flotilla_core::framework::{AssignInput, AssignMode, Assignment, BindingContext, ClusterDetail};
use flotilla_pdk::abi::{self, AssignReply, BindingRequest, InitRequest};
use flotilla_pdk::{Detail, Plugin, RowIndex};

/// Distinct rule lists remembered per cluster set before the memo starts over.
const MEMO_LIMIT: usize = 512;

/// The plugin.
#[derive(Default)]
pub struct StaticWeight {
    rows: RowIndex,
    /// Per rule list, per row: the weight, or -1 when not yet computed.
    memo: HashMap<String, Vec<i64>>,
}

impl Plugin for StaticWeight {
    type Cluster = Cluster;
    type Binding = BindingRequest<ResourceBindingSpec, Placement, ClusterAffinityTerm>;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(StaticWeight::default())
    }

    fn cluster_set(&mut self, clusters: &[Cluster]) {
        self.rows = RowIndex::new(clusters);
        self.memo.clear();
    }

    fn assign(&mut self, b: &Self::Binding, clusters: &[Detail<'_, Cluster>]) -> Result<AssignReply, String> {
        let ctx = BindingContext::new(&b.binding, &b.placement, b.affinity_term.as_ref());
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
        let input = AssignInput::new(&ctx, &details, b.replicas.unwrap_or(b.binding.replicas), mode);
        if division::strategy(&b.placement).ok() != Some(Strategy::StaticWeight) {
            return Ok(AssignReply::Skip);
        }
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
        Ok(match division::static_weight_with(&input, weight) {
            Assignment::Skip => AssignReply::Skip,
            Assignment::Unschedulable(message) => AssignReply::Unschedulable(message),
            Assignment::Assigned(targets) => {
                let rows: HashMap<&str, u32> = details.iter().enumerate().map(|(i, d)| (d.name(), i as u32)).collect();
                let mut out = Vec::with_capacity(targets.len());
                for t in targets {
                    let row = rows.get(t.name.as_str()).ok_or_else(|| format!("assigned unknown cluster {}", t.name))?;
                    out.push((*row, t.replicas));
                }
                AssignReply::Assigned(out)
            }
        })
    }
}

flotilla_pdk::export_plugin!(StaticWeight, name = "StaticWeight", version = "0.1.0", points = [assign]);
