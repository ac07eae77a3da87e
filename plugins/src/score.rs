//! In-tree score plugins.

use flotilla_core::PluginError;
use flotilla_core::expression::{ExpressionError, ExpressionKind};
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
        let b = input.binding;
        out.extend(input.clusters.iter().map(|c| {
            if b.targets(c.name()) {
                MAX_SCORE
            } else {
                MIN_SCORE
            }
        }));
        Ok(())
    }
}

/// Karmada's ClusterAffinity score: always 0 (kept for profile parity), unless the placement has
/// Flotilla's `celScores`: then the weighted mean of their values (each clamped to 0..=100).
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterAffinity;

impl Plugin for ClusterAffinity {
    fn name(&self) -> &str {
        CLUSTER_AFFINITY
    }
}

impl ScorePlugin for ClusterAffinity {
    fn score(&self, input: &ScoreInput<'_>, out: &mut Vec<i64>) -> Result<(), PluginError> {
        let b = input.binding;
        let scores = &b.placement.cel_scores;
        if scores.is_empty() {
            out.extend(std::iter::repeat_n(MIN_SCORE, input.clusters.len()));
            return Ok(());
        }
        let fault = |e: ExpressionError| e.into_plugin_error(CLUSTER_AFFINITY);
        let engine = b.expressions.ok_or_else(|| {
            PluginError::failed(
                CLUSTER_AFFINITY,
                "celScores need an expression engine (the CEL backend) in the profile",
            )
        })?;
        let bound = engine.bind(b.object).map_err(fault)?;
        let total: f64 = scores.iter().map(|s| s.weight.max(1) as f64).sum();
        for c in input.clusters {
            let mut sum = 0.0;
            for s in scores {
                let v = bound
                    .evaluate(ExpressionKind::Score, &s.expression, c)
                    .map_err(fault)?;
                let v = v
                    .as_f64()
                    .unwrap_or(0.0)
                    .clamp(MIN_SCORE as f64, MAX_SCORE as f64);
                sum += v * s.weight.max(1) as f64;
            }
            out.push((sum / total).round() as i64);
        }
        Ok(())
    }
}
