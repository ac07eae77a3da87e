//! Flotilla's built-in plugins: Karmada's default scheduler behaviour, written against the same
//! extension-point traits ([`flotilla_core::framework`]) that Wasm and CEL plugins implement.
//!
//! [`default_profile`] assembles them in Karmada's order as the `default-scheduler` profile.
//! [`registry`] maps plugin names to constructors, so profiles written as data can refer to them.

pub mod assign;
pub mod filter;
pub mod interpreter;
mod memo;
pub mod overrider;
pub mod score;
pub mod select;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use flotilla_core::framework::{Profile, Slot};
use flotilla_core::profile::{Backend, BuiltPlugin, ExtensionPoint, PluginFactory, PluginSpec};

/// The `default-scheduler` profile: every in-tree Karmada plugin, in Karmada's order.
pub fn default_profile() -> Profile {
    Profile {
        name: flotilla_api::labels::DEFAULT_SCHEDULER.to_owned(),
        filters: vec![
            Slot::new(Arc::new(filter::MemoisedApiEnablement::default()) as Arc<_>),
            Slot::new(Arc::new(filter::MemoisedTaintToleration::default()) as Arc<_>),
            Slot::new(Arc::new(filter::MemoisedClusterAffinity::default()) as Arc<_>),
            Slot::new(Arc::new(filter::SpreadConstraint) as Arc<_>),
            Slot::new(Arc::new(filter::ClusterEviction) as Arc<_>),
        ],
        scores: vec![
            Slot::new(Arc::new(score::ClusterLocality) as Arc<_>),
            Slot::new(Arc::new(score::ClusterAffinity) as Arc<_>),
        ],
        selects: vec![Slot::new(Arc::new(select::SpreadConstraint) as Arc<_>)],
        assigners: vec![
            Slot::new(Arc::new(assign::Duplicated) as Arc<_>),
            Slot::new(Arc::new(assign::MemoisedStaticWeight::default()) as Arc<_>),
            Slot::new(Arc::new(assign::DynamicWeight) as Arc<_>),
            Slot::new(Arc::new(assign::Aggregated) as Arc<_>),
        ],
        overriders: vec![Slot::new(Arc::new(overrider::OverridePolicy) as Arc<_>)],
        expressions: None,
        versions: Vec::new(),
        preemption: flotilla_core::preemption::VictimRules::default(),
        victims: None,
    }
}

/// Names of the built-in plugins per extension point, for profile validation and `--help` texts.
pub mod registry {
    use flotilla_core::profile::ExtensionPoint;

    /// The built-in plugin names of `point`.
    pub fn names(point: ExtensionPoint) -> &'static [&'static str] {
        match point {
            ExtensionPoint::Filter => FILTERS,
            ExtensionPoint::Score => SCORES,
            ExtensionPoint::Select => SELECTS,
            ExtensionPoint::Assign => ASSIGNERS,
            ExtensionPoint::Override => OVERRIDERS,
        }
    }

    /// Filter plugin names.
    pub const FILTERS: &[&str] = &[
        super::filter::API_ENABLEMENT,
        super::filter::TAINT_TOLERATION,
        super::filter::CLUSTER_AFFINITY,
        super::filter::SPREAD_CONSTRAINT,
        super::filter::CLUSTER_EVICTION,
    ];
    /// Score plugin names.
    pub const SCORES: &[&str] = &[
        super::score::CLUSTER_LOCALITY,
        super::score::CLUSTER_AFFINITY,
    ];
    /// Select plugin names.
    pub const SELECTS: &[&str] = &[super::select::SPREAD_CONSTRAINT];
    /// Override plugin names.
    pub const OVERRIDERS: &[&str] = &[super::overrider::OVERRIDE_POLICY];
    /// Assign plugin names.
    pub const ASSIGNERS: &[&str] = &[
        super::assign::DUPLICATED,
        super::assign::STATIC_WEIGHT,
        super::assign::DYNAMIC_WEIGHT,
        super::assign::AGGREGATED,
    ];
}

/// Builds the built-in plugins by name ([`Backend::Builtin`]), for profiles written as data.
#[derive(Debug, Default, Clone, Copy)]
pub struct BuiltinFactory;

impl PluginFactory for BuiltinFactory {
    fn backend(&self) -> Backend {
        Backend::Builtin
    }

    fn build(
        &self,
        point: ExtensionPoint,
        spec: &PluginSpec,
    ) -> Result<Option<BuiltPlugin>, String> {
        if spec.config.is_some() {
            return Err("built-in plugins take no config".into());
        }
        let name = spec.name.as_str();
        Ok(match point {
            ExtensionPoint::Filter => match name {
                filter::API_ENABLEMENT => Some(BuiltPlugin::Filter(Arc::new(
                    filter::MemoisedApiEnablement::default(),
                ))),
                filter::TAINT_TOLERATION => Some(BuiltPlugin::Filter(Arc::new(
                    filter::MemoisedTaintToleration::default(),
                ))),
                filter::CLUSTER_AFFINITY => Some(BuiltPlugin::Filter(Arc::new(
                    filter::MemoisedClusterAffinity::default(),
                ))),
                filter::SPREAD_CONSTRAINT => {
                    Some(BuiltPlugin::Filter(Arc::new(filter::SpreadConstraint)))
                }
                filter::CLUSTER_EVICTION => {
                    Some(BuiltPlugin::Filter(Arc::new(filter::ClusterEviction)))
                }
                _ => None,
            },
            ExtensionPoint::Score => match name {
                score::CLUSTER_LOCALITY => {
                    Some(BuiltPlugin::Score(Arc::new(score::ClusterLocality)))
                }
                score::CLUSTER_AFFINITY => {
                    Some(BuiltPlugin::Score(Arc::new(score::ClusterAffinity)))
                }
                _ => None,
            },
            ExtensionPoint::Select => match name {
                select::SPREAD_CONSTRAINT => {
                    Some(BuiltPlugin::Select(Arc::new(select::SpreadConstraint)))
                }
                _ => None,
            },
            ExtensionPoint::Assign => match name {
                assign::DUPLICATED => Some(BuiltPlugin::Assign(Arc::new(assign::Duplicated))),
                assign::STATIC_WEIGHT => Some(BuiltPlugin::Assign(Arc::new(
                    assign::MemoisedStaticWeight::default(),
                ))),
                assign::DYNAMIC_WEIGHT => {
                    Some(BuiltPlugin::Assign(Arc::new(assign::DynamicWeight)))
                }
                assign::AGGREGATED => Some(BuiltPlugin::Assign(Arc::new(assign::Aggregated))),
                _ => None,
            },
            ExtensionPoint::Override => match name {
                overrider::OVERRIDE_POLICY => {
                    Some(BuiltPlugin::Override(Arc::new(overrider::OverridePolicy)))
                }
                _ => None,
            },
        })
    }
}
