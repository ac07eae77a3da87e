//! Expression hook: lets the core evaluate expressions written in policies (CEL, from the
//! `flotilla-cel` crate) without depending on any expression language.
//!
//! Policies may carry expressions in Flotilla's extension fields: `celSelector.celExpressions` in a
//! cluster affinity, `placement.celScores`, `expression` in plaintext/labels/annotations
//! overriders, and the `cel` overrider. The core finds them ([`propagation_sites`],
//! [`override_sites`]) and hands them to an [`ExpressionEngine`], which the host registers on the
//! [`Profile`](crate::framework::Profile) (for scheduling and overrides) and passes to
//! [`plan::admit_with`](crate::plan::admit_with) (for validation: every expression is compiled
//! there). Without an engine, expressions are not compiled at admission and evaluating one is a
//! plugin fault.
//!
//! An engine converts the object once per [`bind`](ExpressionEngine::bind) and evaluates any number
//! of expressions against it, one cluster at a time: the built-in plugins bind once per binding
//! (filters, scores) or once per object revision (overrides), never once per cluster.

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{
    CelSelector, ClusterAffinity, ClusterAffinityInline, OverridePolicy, Overriders,
    PropagationPolicy, RuleWithCluster, cel_patch_type,
};
use serde_json::Value;

use crate::validate::FieldError;

/// What an expression must produce, which decides how it is type-checked and interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExpressionKind {
    /// `celSelector.celExpressions[]`: a `bool`; `true` keeps the cluster.
    ClusterSelector,
    /// `placement.celScores[].expression`: an `int` or `double`, clamped to 0..=100.
    Score,
    /// `plaintext[].expression`: any value, the operation's `value`.
    Value,
    /// `labelsOverrider[].expression` / `annotationsOverrider[].expression`: a `map(string, string)`.
    StringMap,
    /// `cel[].jsonPatch.expression`: a list of RFC 6902 operations.
    JsonPatch,
    /// `cel[].applyConfiguration.expression`: a map, applied as an RFC 7386 merge patch.
    MergePatch,
}

impl std::fmt::Display for ExpressionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExpressionKind::ClusterSelector => "cluster selector",
            ExpressionKind::Score => "score",
            ExpressionKind::Value => "value",
            ExpressionKind::StringMap => "string map",
            ExpressionKind::JsonPatch => "JSON patch",
            ExpressionKind::MergePatch => "merge patch",
        })
    }
}

/// Why an expression was rejected or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExpressionErrorKind {
    /// Does not parse.
    Syntax,
    /// Parses, but is ill-typed (unknown function or variable, wrong argument or result type).
    Type,
    /// Its estimated cost is over the static limit (rejected when written).
    Cost,
    /// Failed while evaluating (no such key, division by zero, bad result shape).
    Runtime,
    /// Refused or stopped by a runtime bound (input size, estimated cost for this input, deadline).
    Limit,
    /// Stopped by the evaluation deadline.
    Timeout,
}

/// An expression's compile or evaluation error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExpressionError {
    /// The class of failure.
    pub kind: ExpressionErrorKind,
    /// Human-readable, lowercase, including the column for compile errors (`column 7: ...`).
    pub message: String,
    /// 1-based column in the expression text, for compile errors.
    pub column: Option<usize>,
}

impl ExpressionError {
    /// An error of `kind` with `message` and no position.
    pub fn new(kind: ExpressionErrorKind, message: impl Into<String>) -> Self {
        ExpressionError {
            kind,
            message: message.into(),
            column: None,
        }
    }

    /// The plugin fault this error is when it happens while `plugin` evaluates.
    pub fn into_plugin_error(self, plugin: &str) -> crate::PluginError {
        match self.kind {
            ExpressionErrorKind::Timeout => crate::PluginError::Timeout {
                plugin: plugin.to_owned(),
            },
            _ => crate::PluginError::failed(plugin, format!("expression: {}", self.message)),
        }
    }
}

/// An expression language. Implemented by `flotilla-cel`; the core only calls it.
pub trait ExpressionEngine: Send + Sync {
    /// The language's name, for messages (`CEL`).
    fn language(&self) -> &str;

    /// Compile `source` for `kind`: syntax, types and static cost.
    ///
    /// # Errors
    /// The first problem, with its column.
    fn check(&self, kind: ExpressionKind, source: &str) -> Result<(), ExpressionError>;

    /// Convert `object` (the template or the manifest being overridden; `None` binds `null`) once,
    /// for any number of evaluations.
    ///
    /// # Errors
    /// The object exceeds the engine's input bounds.
    fn bind(&self, object: Option<&Value>) -> Result<Box<dyn BoundObject + '_>, ExpressionError>;
}

impl std::fmt::Debug for dyn ExpressionEngine + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExpressionEngine({})", self.language())
    }
}

/// An object converted by an [`ExpressionEngine`], ready to evaluate expressions against clusters.
pub trait BoundObject {
    /// Evaluate `source` (compiled and cached by the engine) for `cluster`. The result is already
    /// checked against `kind` (a bool for selectors, a number for scores, ...).
    ///
    /// # Errors
    /// A compile error, a runtime error or a runtime bound.
    fn evaluate(
        &self,
        kind: ExpressionKind,
        source: &str,
        cluster: &Cluster,
    ) -> Result<Value, ExpressionError>;
}

/// Whether `cluster` satisfies every expression of `selector` (`true` when it has none).
///
/// # Errors
/// The first failing expression's error.
pub fn selector_matches(
    bound: &dyn BoundObject,
    selector: Option<&CelSelector>,
    cluster: &Cluster,
) -> Result<bool, ExpressionError> {
    for e in selector.iter().flat_map(|s| s.cel_expressions.iter()) {
        if bound.evaluate(ExpressionKind::ClusterSelector, e, cluster)? != Value::Bool(true) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether an affinity has CEL expressions.
pub fn has_cel(selector: Option<&CelSelector>) -> bool {
    selector.is_some_and(|s| !s.cel_expressions.is_empty())
}

/// One expression in a policy: where it is, what it must produce, its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site<'a> {
    /// JSON path of the field, e.g. `spec.placement.celScores[0].expression`.
    pub field: String,
    /// What the expression must produce.
    pub kind: ExpressionKind,
    /// The expression text.
    pub source: &'a str,
}

fn selector_sites<'a>(sel: Option<&'a CelSelector>, field: &str, out: &mut Vec<Site<'a>>) {
    for (i, e) in sel
        .iter()
        .flat_map(|s| s.cel_expressions.iter())
        .enumerate()
    {
        out.push(Site {
            field: format!("{field}.celSelector.celExpressions[{i}]"),
            kind: ExpressionKind::ClusterSelector,
            source: e,
        });
    }
}

fn unsupported(sel: Option<&CelSelector>, field: &str, errors: &mut Vec<FieldError>) {
    if has_cel(sel) {
        errors.push(FieldError {
            field: format!("{field}.celSelector"),
            message: "Forbidden: celSelector is only supported in placement.clusterAffinity, placement.clusterAffinities[] without overflowAffinities, and overrideRules[].targetCluster".into(),
        });
    }
}

/// Every expression of a (Cluster)PropagationPolicy, and the structural errors of its extension
/// fields (weights, unsupported places).
pub fn propagation_sites(policy: &PropagationPolicy) -> (Vec<Site<'_>>, Vec<FieldError>) {
    let mut sites = Vec::new();
    let mut errors = Vec::new();
    let Some(p) = &policy.spec.placement else {
        return (sites, errors);
    };
    let base = "spec.placement";
    if let Some(a) = &p.cluster_affinity {
        selector_sites(
            a.cel_selector.as_ref(),
            &format!("{base}.clusterAffinity"),
            &mut sites,
        );
    }
    for (i, t) in p.cluster_affinities.iter().enumerate() {
        let field = format!("{base}.clusterAffinities[{i}]");
        let overflow = t
            .overflow_affinities
            .as_ref()
            .is_some_and(|o| !o.is_empty());
        if overflow {
            unsupported(t.affinity.cel_selector.as_ref(), &field, &mut errors);
        } else {
            selector_sites(t.affinity.cel_selector.as_ref(), &field, &mut sites);
        }
        for (j, o) in t.overflow_affinities.iter().flatten().enumerate() {
            unsupported(
                o.affinity.cel_selector.as_ref(),
                &format!("{field}.overflowAffinities[{j}]"),
                &mut errors,
            );
        }
    }
    if let Some(w) = p
        .replica_scheduling
        .as_ref()
        .and_then(|r| r.weight_preference.as_ref())
    {
        for (i, s) in w.static_weight_list.iter().enumerate() {
            unsupported(
                s.target_cluster.cel_selector.as_ref(),
                &format!(
                    "{base}.replicaScheduling.weightPreference.staticWeightList[{i}].targetCluster"
                ),
                &mut errors,
            );
        }
    }
    for (i, s) in p.cel_scores.iter().enumerate() {
        if s.weight < 1 {
            errors.push(FieldError {
                field: format!("{base}.celScores[{i}].weight"),
                message: format!("Invalid value: {}: must be at least 1", s.weight),
            });
        }
        sites.push(Site {
            field: format!("{base}.celScores[{i}].expression"),
            kind: ExpressionKind::Score,
            source: &s.expression,
        });
    }
    (sites, errors)
}

fn rules(policy: &OverridePolicy) -> Vec<(String, Option<&ClusterAffinity>, &Overriders)> {
    if policy.spec.override_rules.is_empty() {
        return vec![(
            "spec".to_owned(),
            policy.spec.target_cluster.as_ref(),
            &policy.spec.overriders,
        )];
    }
    policy
        .spec
        .override_rules
        .iter()
        .enumerate()
        .map(
            |(
                i,
                RuleWithCluster {
                    target_cluster,
                    overriders,
                },
            )| {
                (
                    format!("spec.overrideRules[{i}]"),
                    target_cluster.as_ref(),
                    overriders,
                )
            },
        )
        .collect()
}

/// Every expression of a (Cluster)OverridePolicy, and the structural errors of its extension
/// fields (`value` and `expression` together, unknown `patchType`, missing expression).
pub fn override_sites(policy: &OverridePolicy) -> (Vec<Site<'_>>, Vec<FieldError>) {
    let mut sites = Vec::new();
    let mut errors = Vec::new();
    let mut err = |field: String, message: &str| {
        errors.push(FieldError {
            field,
            message: message.to_owned(),
        })
    };
    for (base, target, o) in rules(policy) {
        if let Some(a) = target {
            selector_sites(
                a.cel_selector.as_ref(),
                &format!("{base}.targetCluster"),
                &mut sites,
            );
        }
        for (i, p) in o.plaintext.iter().enumerate() {
            let field = format!("{base}.overriders.plaintext[{i}]");
            if let Some(e) = &p.expression {
                if p.value.is_some() {
                    err(
                        format!("{field}.expression"),
                        "Forbidden: value and expression are mutually exclusive",
                    );
                }
                if p.operator == "remove" {
                    err(
                        format!("{field}.expression"),
                        "Forbidden: expression is not allowed for remove operation",
                    );
                }
                sites.push(Site {
                    field: format!("{field}.expression"),
                    kind: ExpressionKind::Value,
                    source: e,
                });
            }
        }
        for (list, name) in [
            (&o.labels_overrider, "labelsOverrider"),
            (&o.annotations_overrider, "annotationsOverrider"),
        ] {
            for (i, l) in list.iter().enumerate() {
                let field = format!("{base}.overriders.{name}[{i}]");
                if let Some(e) = &l.expression {
                    if !l.value.is_empty() {
                        err(
                            format!("{field}.expression"),
                            "Forbidden: value and expression are mutually exclusive",
                        );
                    }
                    sites.push(Site {
                        field: format!("{field}.expression"),
                        kind: ExpressionKind::StringMap,
                        source: e,
                    });
                }
            }
        }
        for (i, m) in o.cel.iter().enumerate() {
            let field = format!("{base}.overriders.cel[{i}]");
            let (kind, own, other, own_name, other_name) = match m.patch_type.as_str() {
                cel_patch_type::JSON_PATCH => (
                    ExpressionKind::JsonPatch,
                    &m.json_patch,
                    &m.apply_configuration,
                    "jsonPatch",
                    "applyConfiguration",
                ),
                cel_patch_type::APPLY_CONFIGURATION => (
                    ExpressionKind::MergePatch,
                    &m.apply_configuration,
                    &m.json_patch,
                    "applyConfiguration",
                    "jsonPatch",
                ),
                other => {
                    err(
                        format!("{field}.patchType"),
                        &format!(
                            "Unsupported value: {other:?}: supported values: \"ApplyConfiguration\", \"JSONPatch\""
                        ),
                    );
                    continue;
                }
            };
            if other.is_some() {
                err(
                    format!("{field}.{other_name}"),
                    &format!("Forbidden: not allowed with patchType {:?}", m.patch_type),
                );
            }
            match own {
                Some(e) => sites.push(Site {
                    field: format!("{field}.{own_name}.expression"),
                    kind,
                    source: &e.expression,
                }),
                None => err(
                    format!("{field}.{own_name}"),
                    &format!("Required value: required with patchType {:?}", m.patch_type),
                ),
            }
        }
    }
    (sites, errors)
}

/// [`selector_matches`] for the inline affinity of a `clusterAffinities` term.
///
/// # Errors
/// The first failing expression's error.
pub fn inline_selector_matches(
    bound: &dyn BoundObject,
    affinity: &ClusterAffinityInline,
    cluster: &Cluster,
) -> Result<bool, ExpressionError> {
    selector_matches(bound, affinity.cel_selector.as_ref(), cluster)
}
