//! In-tree override plugin: Karmada's OverridePolicy / ClusterOverridePolicy engine.

use flotilla_core::PluginError;
use flotilla_core::framework::{OverrideInput, OverridePatch, OverridePlugin, Plugin};

/// Name of [`OverridePolicy`].
pub const OVERRIDE_POLICY: &str = "OverridePolicy";

/// Applies ClusterOverridePolicies then OverridePolicies, exactly as Karmada orders them.
#[derive(Debug, Default, Clone, Copy)]
pub struct OverridePolicy;

impl Plugin for OverridePolicy {
    fn name(&self) -> &str {
        OVERRIDE_POLICY
    }
}

impl OverridePlugin for OverridePolicy {
    fn override_manifest(&self, input: &OverrideInput<'_>) -> Result<OverridePatch, PluginError> {
        flotilla_core::overrides::karmada_overrides_with(
            input.object,
            input.cluster,
            input.policies,
            input.expressions,
        )
        .map_err(|e| PluginError::failed(OVERRIDE_POLICY, e.to_string()))
    }
}
