//! Flotilla's built-in plugins: Karmada's default scheduler behaviour, written against the same
//! extension-point traits ([`flotilla_core::framework`]) that Wasm and CEL plugins implement.
//!
//! [`default_profile`] assembles them in Karmada's order as the `default-scheduler` profile.
//! [`registry`] maps plugin names to constructors, so profiles written as data can refer to them.

pub mod assign;
pub mod filter;
pub mod overrider;
pub mod score;
pub mod select;

use std::sync::Arc;

use flotilla_core::framework::{Profile, Slot};

/// The `default-scheduler` profile: every in-tree Karmada plugin, in Karmada's order.
pub fn default_profile() -> Profile {
    Profile {
        name: flotilla_api::labels::DEFAULT_SCHEDULER.to_owned(),
        filters: vec![
            Slot::new(Arc::new(filter::ApiEnablement) as Arc<_>),
            Slot::new(Arc::new(filter::TaintToleration) as Arc<_>),
            Slot::new(Arc::new(filter::ClusterAffinity) as Arc<_>),
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
            Slot::new(Arc::new(assign::StaticWeight) as Arc<_>),
            Slot::new(Arc::new(assign::DynamicWeight) as Arc<_>),
            Slot::new(Arc::new(assign::Aggregated) as Arc<_>),
        ],
        overriders: vec![Slot::new(Arc::new(overrider::OverridePolicy) as Arc<_>)],
    }
}

/// Names of the built-in plugins per extension point, for profile validation and `--help` texts.
pub mod registry {
    /// Filter plugin names.
    pub const FILTERS: &[&str] = &[
        super::filter::API_ENABLEMENT,
        super::filter::TAINT_TOLERATION,
        super::filter::CLUSTER_AFFINITY,
        super::filter::SPREAD_CONSTRAINT,
        super::filter::CLUSTER_EVICTION,
    ];
    /// Score plugin names.
    pub const SCORES: &[&str] = &[super::score::CLUSTER_LOCALITY, super::score::CLUSTER_AFFINITY];
    /// Select plugin names.
    pub const SELECTS: &[&str] = &[super::select::SPREAD_CONSTRAINT];
    /// Assign plugin names.
    pub const ASSIGNERS: &[&str] =
        &[super::assign::DUPLICATED, super::assign::STATIC_WEIGHT, super::assign::DYNAMIC_WEIGHT, super::assign::AGGREGATED];
}
