//! In-tree select plugin: Karmada's spread-constraint cluster selection.

use flotilla_core::PluginError;
use flotilla_core::framework::{Plugin, SelectInput, SelectPlugin, Selection};

/// Name of [`SpreadConstraint`].
pub const SPREAD_CONSTRAINT: &str = "SpreadConstraint";

/// Selects clusters per `placement.spreadConstraints` (by cluster or by region), or all feasible
/// clusters when there are none.
#[derive(Debug, Default, Clone, Copy)]
pub struct SpreadConstraint;

impl Plugin for SpreadConstraint {
    fn name(&self) -> &str {
        SPREAD_CONSTRAINT
    }
}

impl SelectPlugin for SpreadConstraint {
    fn select(&self, input: &SelectInput<'_>) -> Result<Selection, PluginError> {
        Ok(flotilla_core::spread::select(input))
    }
}
