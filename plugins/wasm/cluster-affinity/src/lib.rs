//! The built-in `ClusterAffinity` filter as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust plugin.

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{ClusterAffinityTerm, Placement};
use flotilla_api::work::ResourceBindingSpec;
use flotilla_core::framework::{BindingContext, FilterInput, FilterPlugin, Verdict};
use flotilla_pdk::abi::{BindingRequest, InitRequest};
use flotilla_pdk::{FilterOut, Plugin};

/// The plugin.
pub struct ClusterAffinity;

impl Plugin for ClusterAffinity {
    type Cluster = Cluster;
    type Binding = BindingRequest<ResourceBindingSpec, Placement, ClusterAffinityTerm>;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(ClusterAffinity)
    }

    fn filter(&mut self, b: &Self::Binding, clusters: &[&Cluster], out: &mut FilterOut) -> Result<(), String> {
        let ctx = BindingContext::new(&b.binding, &b.placement, b.affinity_term.as_ref());
        let mut verdicts = Vec::with_capacity(clusters.len());
        flotilla_plugins::filter::ClusterAffinity
            .filter(&FilterInput::new(&ctx, clusters), &mut verdicts)
            .map_err(|e| e.to_string())?;
        for v in verdicts {
            match v {
                Verdict::Fit => out.fit(),
                Verdict::Unschedulable(reason) => out.unfit(&reason),
            }
        }
        Ok(())
    }
}

flotilla_pdk::export_plugin!(ClusterAffinity, name = "ClusterAffinity", version = "0.1.0", points = [filter]);
