//! In-tree score plugins.

use flotilla_core::PluginError;
use flotilla_core::framework::{MAX_SCORE, MIN_SCORE, Plugin, ScoreInput, ScorePlugin};

/// Name of [`ClusterLocality`].
pub const CLUSTER_LOCALITY: &str = "ClusterLocality";
/// Name of [`ClusterAffinity`].
pub const CLUSTER_AFFINITY: &str = "ClusterAffinity";

/// Prefers clusters the binding is already scheduled to (100), so rescheduling is stable.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterLocality;

impl Plugin for ClusterLocality {
    fn name(&self) -> &str {
        CLUSTER_LOCALITY
    }
}

impl ScorePlugin for ClusterLocality {
    fn score(&self, input: &ScoreInput<'_>, out: &mut Vec<i64>) -> Result<(), PluginError> {
        let spec = input.binding.spec;
        out.extend(input.clusters.iter().map(|c| if spec.targets(c.name()) { MAX_SCORE } else { MIN_SCORE }));
        Ok(())
    }
}

/// Karmada's ClusterAffinity score: always 0 (kept for profile parity).
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterAffinity;

impl Plugin for ClusterAffinity {
    fn name(&self) -> &str {
        CLUSTER_AFFINITY
    }
}

impl ScorePlugin for ClusterAffinity {
    fn score(&self, input: &ScoreInput<'_>, out: &mut Vec<i64>) -> Result<(), PluginError> {
        out.extend(std::iter::repeat_n(MIN_SCORE, input.clusters.len()));
        Ok(())
    }
}
