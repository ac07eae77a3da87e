//! The built-in `StaticWeight` assigner as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust assigner.

use std::collections::HashMap;

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{ClusterAffinityTerm, Placement};
use flotilla_api::work::ResourceBindingSpec;
use flotilla_core::framework::{AssignInput, AssignMode, AssignPlugin, Assignment, BindingContext, ClusterDetail};
use flotilla_pdk::abi::{self, AssignReply, BindingRequest, InitRequest};
use flotilla_pdk::{Detail, Plugin};

/// The plugin.
pub struct StaticWeight;

impl Plugin for StaticWeight {
    type Cluster = Cluster;
    type Binding = BindingRequest<ResourceBindingSpec, Placement, ClusterAffinityTerm>;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(StaticWeight)
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
        Ok(match flotilla_plugins::assign::StaticWeight.assign(&input).map_err(|e| e.to_string())? {
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
