//! Karmada's override engine (ClusterOverridePolicy then OverridePolicy), lowered to JSON patch.

use flotilla_api::policy::OverridePolicy;

/// The override policies known to the engine.
#[derive(Debug, Clone, Default)]
pub struct OverridePolicies {
    /// ClusterOverridePolicies (applied first).
    pub cluster: Vec<OverridePolicy>,
    /// OverridePolicies, any namespace (only those in the resource's namespace apply).
    pub namespaced: Vec<OverridePolicy>,
}
