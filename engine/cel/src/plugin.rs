//! CEL plugins for profiles: a `SchedulerProfile` entry with a `cel:` source becomes a
//! [`CelFilter`], [`CelScore`] or [`CelOverride`], the same traits the built-ins implement.
//!
//! ```yaml
//! spec:
//!   filters:
//!   - name: gpu-only
//!     cel: {expression: "has(cluster.metadata.labels) && 'gpu' in cluster.metadata.labels"}
//!   scores:
//!   - name: prefer-eu
//!     weight: 2
//!     cel: {expression: "clusterLabels[?'region'].orValue('') == 'eu' ? 100 : 0"}
//!   overriders:
//!   - name: stamp-cluster
//!     cel: {patchType: ApplyConfiguration, applyConfiguration: {expression: "{'metadata': {'labels': {'cluster': clusterName}}}"}}
//! ```

use std::sync::Arc;

use flotilla_api::policy::CelMutation;
use flotilla_core::PluginError;
use flotilla_core::expression::{ExpressionEngine, ExpressionKind};
use flotilla_core::framework::{
    FilterInput, FilterPlugin, MAX_SCORE, MIN_SCORE, OverrideInput, OverridePatch, OverridePlugin,
    Plugin, ScoreInput, ScorePlugin, Verdict,
};
use flotilla_core::profile::{Backend, BuiltPlugin, ExtensionPoint, PluginFactory, PluginSpec};
use serde::Deserialize;
use serde_json::Value;

use crate::engine::Engine;

/// `cel:` of a filter or score entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExpressionSpec {
    expression: String,
    /// Filters: the reason reported for rejected clusters.
    #[serde(default)]
    reason: Option<String>,
}

/// Builds CEL plugins from profile entries with a `cel:` source; compiles at build time.
#[derive(Debug, Clone)]
pub struct CelFactory {
    engine: Arc<Engine>,
}

impl CelFactory {
    /// A factory whose plugins evaluate with `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        CelFactory { engine }
    }
}

impl PluginFactory for CelFactory {
    fn backend(&self) -> Backend {
        Backend::Cel
    }

    fn build(
        &self,
        point: ExtensionPoint,
        spec: &PluginSpec,
    ) -> Result<Option<BuiltPlugin>, String> {
        let Some(cel) = &spec.cel else {
            return Ok(None);
        };
        let engine = Arc::clone(&self.engine);
        let name = spec.name.clone();
        let parse = || {
            serde_json::from_value::<ExpressionSpec>(cel.clone()).map_err(|e| format!("cel: {e}"))
        };
        let check = |kind, src: &str| {
            engine
                .check(kind, src)
                .map_err(|e| format!("cel: invalid expression: {}", e.message))
        };
        Ok(Some(match point {
            ExtensionPoint::Filter => {
                let s = parse()?;
                check(ExpressionKind::ClusterSelector, &s.expression)?;
                let reason = s
                    .reason
                    .unwrap_or_else(|| format!("cluster(s) did not match the {name} expression"));
                BuiltPlugin::Filter(Arc::new(CelFilter {
                    name,
                    engine,
                    expression: s.expression,
                    reason,
                }))
            }
            ExtensionPoint::Score => {
                let s = parse()?;
                check(ExpressionKind::Score, &s.expression)?;
                // A constant score is checked here; any other is clamped (and logged) at run time.
                if let Ok(v) = s.expression.trim().parse::<f64>()
                    && !(MIN_SCORE as f64..=MAX_SCORE as f64).contains(&v)
                {
                    return Err(format!(
                        "cel.expression: score {v} is outside {MIN_SCORE}..{MAX_SCORE} (the profile's weight scales scores)"
                    ));
                }
                BuiltPlugin::Score(Arc::new(CelScore {
                    name,
                    engine,
                    expression: s.expression,
                    clamped: std::sync::atomic::AtomicBool::new(false),
                }))
            }
            ExtensionPoint::Override => {
                let m: CelMutation =
                    serde_json::from_value(cel.clone()).map_err(|e| format!("cel: {e}"))?;
                let (kind, source) = mutation(&m)?;
                check(kind, &source)?;
                BuiltPlugin::Override(Arc::new(CelOverride {
                    name,
                    engine,
                    kind,
                    expression: source,
                }))
            }
            other => {
                return Err(format!(
                    "CEL plugins implement filters, scores and overriders, not {other}"
                ));
            }
        }))
    }
}

fn mutation(m: &CelMutation) -> Result<(ExpressionKind, String), String> {
    let kind = match m.patch_type.as_str() {
        flotilla_api::policy::cel_patch_type::JSON_PATCH => ExpressionKind::JsonPatch,
        flotilla_api::policy::cel_patch_type::APPLY_CONFIGURATION => ExpressionKind::MergePatch,
        other => {
            return Err(format!(
                "cel.patchType: unsupported value {other:?} (JSONPatch or ApplyConfiguration)"
            ));
        }
    };
    let (_, source) = m
        .expression()
        .ok_or_else(|| format!("cel: patchType {:?} needs its expression", m.patch_type))?;
    Ok((kind, source.to_owned()))
}

/// A filter whose verdict is a CEL expression over `cluster` and `object`.
#[derive(Debug)]
pub struct CelFilter {
    name: String,
    engine: Arc<Engine>,
    expression: String,
    reason: String,
}

impl Plugin for CelFilter {
    fn name(&self) -> &str {
        &self.name
    }
}

impl FilterPlugin for CelFilter {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let fault = |e: flotilla_core::expression::ExpressionError| e.into_plugin_error(&self.name);
        let bound = self.engine.bind(input.binding.object).map_err(fault)?;
        for c in input.clusters {
            let v = bound
                .evaluate(ExpressionKind::ClusterSelector, &self.expression, c)
                .map_err(fault)?;
            out.push(if v == Value::Bool(true) {
                Verdict::Fit
            } else {
                Verdict::unschedulable(self.reason.clone())
            });
        }
        Ok(())
    }
}

/// A score plugin whose score is a CEL expression (clamped to 0..=100; the first clamp of each
/// plugin is logged).
#[derive(Debug)]
pub struct CelScore {
    name: String,
    engine: Arc<Engine>,
    expression: String,
    clamped: std::sync::atomic::AtomicBool,
}

impl Plugin for CelScore {
    fn name(&self) -> &str {
        &self.name
    }
}

impl ScorePlugin for CelScore {
    fn score(&self, input: &ScoreInput<'_>, out: &mut Vec<i64>) -> Result<(), PluginError> {
        let fault = |e: flotilla_core::expression::ExpressionError| e.into_plugin_error(&self.name);
        let bound = self.engine.bind(input.binding.object).map_err(fault)?;
        for c in input.clusters {
            let v = bound
                .evaluate(ExpressionKind::Score, &self.expression, c)
                .map_err(fault)?;
            let raw = v.as_f64().unwrap_or(0.0);
            let score = raw.clamp(MIN_SCORE as f64, MAX_SCORE as f64);
            if score != raw
                && !self
                    .clamped
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    plugin = %self.name,
                    cluster = %c.metadata.name(),
                    score = raw,
                    "CEL score outside {MIN_SCORE}..{MAX_SCORE}, clamped (logged once per plugin)"
                );
            }
            out.push(score.round() as i64);
        }
        Ok(())
    }
}

/// An overrider whose patch is a CEL mutation (MutatingAdmissionPolicy shape).
#[derive(Debug)]
pub struct CelOverride {
    name: String,
    engine: Arc<Engine>,
    kind: ExpressionKind,
    expression: String,
}

impl Plugin for CelOverride {
    fn name(&self) -> &str {
        &self.name
    }
}

impl OverridePlugin for CelOverride {
    fn override_manifest(&self, input: &OverrideInput<'_>) -> Result<OverridePatch, PluginError> {
        let fault = |e: flotilla_core::expression::ExpressionError| e.into_plugin_error(&self.name);
        let bound = self.engine.bind(Some(input.object)).map_err(fault)?;
        let result = bound
            .evaluate(self.kind, &self.expression, input.cluster)
            .map_err(fault)?;
        let patch = match self.kind {
            ExpressionKind::JsonPatch => {
                serde_json::from_value::<json_patch::Patch>(result)
                    .map_err(|e| PluginError::InvalidOutput {
                        plugin: self.name.clone(),
                        message: format!("not a JSON patch: {e}"),
                    })?
                    .0
            }
            _ => flotilla_core::overrides::merge_patch_ops(input.object, &result),
        };
        Ok(OverridePatch {
            patch,
            applied: Vec::new(),
        })
    }
}
