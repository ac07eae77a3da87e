//! Karmada's override engine (ClusterOverridePolicy then OverridePolicy), lowered to JSON patch.
//!
//! [`karmada_overrides`] reproduces `pkg/util/overridemanager` for one (object, cluster): which
//! policies apply and in what order, and what every overrider does to the object, expressed as
//! RFC 6902 operations that [`apply`] replays. [`applied_annotations`] renders the provenance
//! annotations Karmada writes on the propagated manifest, and [`validate`] mirrors the admission
//! webhook's `ValidateOverrideSpec` plus the CRD schema's enums.

mod gofmt;
pub mod image;
mod overriders;
mod patch;
mod validate;
mod yaml;

use crate::expression::{BoundObject, ExpressionEngine, ExpressionKind};

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{OverridePolicy, Overriders, RuleWithCluster};
use serde_json::{Map, Value};

use crate::framework::{AppliedOverride, OverridePatch, OverrideScope};
pub use image::{ImageParseError, ImageRef};
pub use validate::{FieldError, set_defaults, validate};

/// Annotation recording the applied ClusterOverridePolicies.
pub const APPLIED_CLUSTER_OVERRIDES_ANNOTATION: &str =
    "policy.karmada.io/applied-cluster-overrides";
/// Annotation recording the applied OverridePolicies.
pub const APPLIED_OVERRIDES_ANNOTATION: &str = "policy.karmada.io/applied-overrides";

/// The override policies known to the engine.
#[derive(Debug, Clone, Default)]
pub struct OverridePolicies {
    /// ClusterOverridePolicies (applied first).
    pub cluster: Vec<OverridePolicy>,
    /// OverridePolicies, any namespace (only those in the resource's namespace apply).
    pub namespaced: Vec<OverridePolicy>,
}

/// Why overrides could not be computed or applied. Karmada fails the Work for that cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OverrideError {
    /// One overrider of one rule failed.
    #[error("{kind} {policy:?} rule {rule}: {overrider} at path {path:?}: {message}")]
    Overrider {
        /// `ClusterOverridePolicy` or `OverridePolicy`.
        kind: &'static str,
        /// Policy namespace (empty for cluster-scoped policies).
        namespace: String,
        /// Policy name.
        policy: String,
        /// Index of the rule in `overrideRules` (0 for the legacy `targetCluster`/`overriders`).
        rule: usize,
        /// The overrider, e.g. `plaintext[1]` or `imageOverrider[0]`.
        overrider: String,
        /// The JSON path concerned.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The overridden manifest has another `apiVersion`, `kind`, `metadata.namespace` or
    /// `metadata.name` than the input (Karmada's overriders cannot change a manifest's identity).
    /// Only the field is named, never its values.
    #[error("the override changes {field}, which overrides must leave as it is")]
    Identity {
        /// `apiVersion`, `kind`, `metadata.namespace` or `metadata.name`.
        field: &'static str,
    },
    /// A patch operation could not be applied by [`apply`].
    #[error("patch operation {index} ({op} {path:?}) failed: {message}")]
    Patch {
        /// Index of the operation in the patch.
        index: usize,
        /// The operation name.
        op: &'static str,
        /// The operation's path.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// The fields that identify a manifest, which no override may change (Karmada's overriders cannot:
/// its Work keeps the template's identity), with their JSON pointers.
const IDENTITY: [(&str, &str); 4] = [
    ("apiVersion", "/apiVersion"),
    ("kind", "/kind"),
    ("metadata.namespace", "/metadata/namespace"),
    ("metadata.name", "/metadata/name"),
];

/// The first identity field (name and pointer) whose value differs between `before` and `after`
/// (a missing field differs from a present one).
fn identity_change(before: &Value, after: &Value) -> Option<(&'static str, &'static str)> {
    IDENTITY
        .into_iter()
        .find(|(_, pointer)| before.pointer(pointer) != after.pointer(pointer))
}

/// The identity fields of a manifest, kept to compare after an overrider ran (cheaper than a copy
/// of the manifest).
struct Identity([Option<Value>; 4]);

impl Identity {
    fn of(v: &Value) -> Self {
        Identity(IDENTITY.map(|(_, pointer)| v.pointer(pointer).cloned()))
    }

    /// The first identity field (name and pointer) that differs in `after`.
    fn changed_in(&self, after: &Value) -> Option<(&'static str, &'static str)> {
        IDENTITY
            .into_iter()
            .zip(&self.0)
            .find(|((_, pointer), was)| after.pointer(pointer) != was.as_ref())
            .map(|(field, _)| field)
    }
}

/// The message of an overrider that changed an identity field (the field, never the values).
fn identity_message(field: &str) -> String {
    format!(
        "overriders cannot change {field} (apiVersion, kind, metadata.namespace and metadata.name \
         stay as in the resource template)"
    )
}

fn scope_kind(scope: OverrideScope) -> &'static str {
    match scope {
        OverrideScope::Cluster => "ClusterOverridePolicy",
        OverrideScope::Namespaced => "OverridePolicy",
    }
}

/// Selects the policies (by resource selectors) and rules (by target cluster) that apply, in
/// A matching rule: its policy, the rule's index in it, and the rule as it applies to the cluster.
type MatchedRule<'a> = (&'a OverridePolicy, usize, RuleWithCluster);
/// A rule that failed to evaluate: its policy, its index, and why.
type RuleError<'a> = (&'a OverridePolicy, usize, String);

/// Karmada's order: implicit priority ascending (MatchAll < LabelSelector < Name; no selectors =
/// MatchAll), then name ascending, stable; rules in declaration order.
fn matching_rules<'a>(
    object: &Value,
    cluster: &Cluster,
    policies: &[&'a OverridePolicy],
    exprs: &mut Expressions<'_>,
) -> Result<Vec<MatchedRule<'a>>, RuleError<'a>> {
    let mut matched: Vec<(u8, &'a OverridePolicy)> = policies
        .iter()
        .filter_map(|p| {
            let sels = &p.spec.resource_selectors;
            if sels.is_empty() {
                return Some((1, *p));
            }
            let prio = sels
                .iter()
                .map(|s| crate::selector::resource_selector_priority(object, s))
                .max()
                .unwrap_or(0);
            (prio > 0).then_some((prio, *p))
        })
        .collect();
    matched.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| a.1.metadata.name().cmp(b.1.metadata.name()))
    });
    let mut out = Vec::new();
    for (_, p) in matched {
        let legacy;
        let rules: &[RuleWithCluster] = if p.spec.override_rules.is_empty() {
            legacy = [RuleWithCluster {
                target_cluster: p.spec.target_cluster.clone(),
                overriders: p.spec.overriders.clone(),
            }];
            &legacy
        } else {
            &p.spec.override_rules
        };
        for (i, rule) in rules.iter().enumerate() {
            let applies = match &rule.target_cluster {
                None => true,
                Some(aff) => {
                    crate::selector::cluster_matches(cluster, aff)
                        && exprs
                            .selector_matches(object, aff, cluster)
                            .map_err(|e| (p, i, e))?
                }
            };
            if applies {
                out.push((p, i, rule.clone()));
            }
        }
    }
    Ok(out)
}

/// Lazily binds the object being overridden to the expression engine: once per object revision
/// (a commit that changes the object drops the binding), only when a policy has expressions.
struct Expressions<'e> {
    engine: Option<&'e dyn ExpressionEngine>,
    bound: Option<Box<dyn BoundObject + 'e>>,
}

impl<'e> Expressions<'e> {
    fn eval(
        &mut self,
        work: &Value,
        kind: ExpressionKind,
        source: &str,
        cluster: &Cluster,
    ) -> Result<Value, String> {
        let engine = self
            .engine
            .ok_or("the policy uses expressions but no expression engine is registered (the CEL backend is missing)")?;
        if self.bound.is_none() {
            self.bound = Some(engine.bind(Some(work)).map_err(|e| e.message)?);
        }
        match &self.bound {
            Some(b) => b
                .evaluate(kind, source, cluster)
                .map_err(|e| format!("expression {source:?}: {}", e.message)),
            None => Err("invariant: bound above".into()),
        }
    }

    fn selector_matches(
        &mut self,
        work: &Value,
        a: &flotilla_api::policy::ClusterAffinity,
        cluster: &Cluster,
    ) -> Result<bool, String> {
        for e in a.cel_selector.iter().flat_map(|s| s.cel_expressions.iter()) {
            if self.eval(work, ExpressionKind::ClusterSelector, e, cluster)? != Value::Bool(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn changed(&mut self) {
        self.bound = None;
    }
}

/// Computes the overrides Karmada would apply to `object` for `cluster`: every matching
/// ClusterOverridePolicy, then (namespaced objects only) every matching OverridePolicy of the
/// object's namespace.
///
/// The returned `patch`, applied in order to `object` (see [`apply`]), yields the overridden
/// object; `applied` has one entry per applying rule, in application order.
///
/// # Errors
/// The first overrider that fails (unparsable image, `fieldPath` not a string, replace of a
/// missing path, …), identified by policy, rule, overrider and path.
#[allow(clippy::result_large_err)] // errors carry the full identity of the failing overrider
pub fn karmada_overrides(
    object: &Value,
    cluster: &Cluster,
    policies: &OverridePolicies,
) -> Result<OverridePatch, OverrideError> {
    karmada_overrides_with(object, cluster, policies, None)
}

/// [`karmada_overrides`] for policies that may use Flotilla's expression fields (`expression` in
/// plaintext/labels/annotations overriders, the `cel` overrider, `celSelector` in target
/// clusters), evaluated by `engine`. Expression-bearing overriders see the object as the earlier
/// overriders left it; `cel` mutations apply after every Karmada overrider of their rule.
///
/// # Errors
/// As [`karmada_overrides`]; an expression's failure (or a missing engine) is an overrider error.
#[allow(clippy::result_large_err)]
pub fn karmada_overrides_with(
    object: &Value,
    cluster: &Cluster,
    policies: &OverridePolicies,
    engine: Option<&dyn ExpressionEngine>,
) -> Result<OverridePatch, OverrideError> {
    let mut work = object.clone();
    let mut out = OverridePatch::default();
    let mut exprs = Expressions {
        engine,
        bound: None,
    };
    let cops: Vec<&OverridePolicy> = policies.cluster.iter().collect();
    run_pass(
        &mut work,
        cluster,
        &cops,
        OverrideScope::Cluster,
        &mut out,
        &mut exprs,
    )?;
    // Karmada reads the namespace after the ClusterOverridePolicy pass.
    let namespace = work
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !namespace.is_empty() {
        let ops: Vec<&OverridePolicy> = policies
            .namespaced
            .iter()
            .filter(|p| p.metadata.namespace.as_deref().unwrap_or("") == namespace.as_str())
            .collect();
        run_pass(
            &mut work,
            cluster,
            &ops,
            OverrideScope::Namespaced,
            &mut out,
            &mut exprs,
        )?;
    }
    Ok(out)
}

#[allow(clippy::result_large_err)]
fn run_pass(
    work: &mut Value,
    cluster: &Cluster,
    policies: &[&OverridePolicy],
    scope: OverrideScope,
    out: &mut OverridePatch,
    exprs: &mut Expressions<'_>,
) -> Result<(), OverrideError> {
    // Selection uses the object as it stands when the pass starts (Karmada evaluates selectors
    // per pass against the object being overridden).
    let rules =
        matching_rules(work, cluster, policies, exprs).map_err(|(policy, rule, message)| {
            OverrideError::Overrider {
                kind: scope_kind(scope),
                namespace: policy.metadata.namespace.clone().unwrap_or_default(),
                policy: policy.metadata.name().to_string(),
                rule,
                overrider: "targetCluster".into(),
                path: String::new(),
                message,
            }
        })?;
    for (policy, rule_index, rule) in rules {
        let err = |overrider: String, path: String, message: String| OverrideError::Overrider {
            kind: scope_kind(scope),
            namespace: policy.metadata.namespace.clone().unwrap_or_default(),
            policy: policy.metadata.name().to_string(),
            rule: rule_index,
            overrider,
            path,
            message,
        };
        apply_overriders(work, &rule.overriders, &mut out.patch, cluster, exprs)
            .map_err(|(overrider, (path, message))| err(overrider, path, message))?;
        out.applied.push((
            scope,
            AppliedOverride {
                policy_name: policy.metadata.name().to_string(),
                overriders: overriders_json(&rule.overriders),
            },
        ));
    }
    Ok(())
}

type EntryFail = (String, overriders::Fail);

/// Applies one entry's ops to `work` and appends the canonical ops.
fn commit(
    work: &mut Value,
    ops: &[patch::RawOp],
    out: &mut Vec<json_patch::PatchOperation>,
    name: &str,
    exprs: &mut Expressions<'_>,
) -> Result<(), EntryFail> {
    let before = (!ops.is_empty()).then(|| Identity::of(work));
    let canon = patch::apply_ops(work, ops)
        .map_err(|(i, e)| (name.to_string(), (ops[i].path.clone(), e)))?;
    if let Some(before) = before {
        guard_identity(&before, work, name)?;
    }
    if !canon.is_empty() {
        exprs.changed();
    }
    out.extend(canon);
    Ok(())
}

/// Fails the overrider `name` when it changed an identity field of the manifest.
fn guard_identity(before: &Identity, after: &Value, name: &str) -> Result<(), EntryFail> {
    match before.changed_in(after) {
        Some((field, pointer)) => Err((
            name.to_string(),
            (pointer.to_string(), identity_message(field)),
        )),
        None => Ok(()),
    }
}

/// `applyPolicyOverriders`: image → command → args → labels → annotations → field → plaintext.
fn apply_overriders(
    work: &mut Value,
    o: &Overriders,
    out: &mut Vec<json_patch::PatchOperation>,
    cluster: &Cluster,
    exprs: &mut Expressions<'_>,
) -> Result<(), EntryFail> {
    for (i, x) in o.image_overrider.iter().enumerate() {
        let name = format!("imageOverrider[{i}]");
        let ops = overriders::image_ops(work, x).map_err(|f| (name.clone(), f))?;
        commit(work, &ops, out, &name, exprs)?;
    }
    for (target, list, field) in [
        ("command", &o.command_overrider, "commandOverrider"),
        ("args", &o.args_overrider, "argsOverrider"),
    ] {
        for (i, x) in list.iter().enumerate() {
            let name = format!("{field}[{i}]");
            let ops =
                overriders::command_args_ops(work, target, x).map_err(|f| (name.clone(), f))?;
            commit(work, &ops, out, &name, exprs)?;
        }
    }
    for (target, list, field) in [
        ("labels", &o.labels_overrider, "labelsOverrider"),
        (
            "annotations",
            &o.annotations_overrider,
            "annotationsOverrider",
        ),
    ] {
        for (i, x) in list.iter().enumerate() {
            let name = format!("{field}[{i}]");
            let computed;
            let x = match &x.expression {
                None => x,
                Some(e) => {
                    let v = exprs
                        .eval(work, ExpressionKind::StringMap, e, cluster)
                        .map_err(|m| (name.clone(), (format!("/metadata/{target}"), m)))?;
                    let value = serde_json::from_value(v).map_err(|m| {
                        (
                            name.clone(),
                            (
                                format!("/metadata/{target}"),
                                format!("expression result: {m}"),
                            ),
                        )
                    })?;
                    computed = flotilla_api::policy::LabelAnnotationOverrider {
                        operator: x.operator.clone(),
                        value,
                        expression: None,
                    };
                    &computed
                }
            };
            let ops = overriders::label_annotation_ops(work, target, x);
            // The map creation happens on the object directly in Karmada; the key ops then form
            // one patch. Both are committed in order here.
            let (create, keys): (Vec<_>, Vec<_>) = ops.into_iter().partition(|op| {
                op.op == "add"
                    && (op.path == "/metadata" || op.path == format!("/metadata/{target}"))
            });
            commit(work, &create, out, &name, exprs)?;
            commit(work, &keys, out, &name, exprs)?;
        }
    }
    for (i, x) in o.field_overrider.iter().enumerate() {
        let name = format!("fieldOverrider[{i}]");
        let ops = overriders::field_ops(work, x).map_err(|f| (name.clone(), f))?;
        commit(work, &ops, out, &name, exprs)?;
    }
    // Plaintext operations form one patch (Karmada); expressions among them all see the object
    // as it was before the plaintext overriders.
    let mut ops: Vec<patch::RawOp> = Vec::with_capacity(o.plaintext.len());
    for (i, p) in o.plaintext.iter().enumerate() {
        let value = match &p.expression {
            None => p.value.clone().unwrap_or(Value::Null),
            Some(e) => exprs
                .eval(work, ExpressionKind::Value, e, cluster)
                .map_err(|m| (format!("plaintext[{i}]"), (p.path.clone(), m)))?,
        };
        ops.push(patch::RawOp::new(&p.operator, p.path.clone(), value));
    }
    let before = (!ops.is_empty()).then(|| Identity::of(work));
    let canon = patch::apply_ops(work, &ops)
        .map_err(|(i, e)| (format!("plaintext[{i}]"), (ops[i].path.clone(), e)))?;
    if let Some(before) = before
        && let Some((field, pointer)) = before.changed_in(work)
    {
        // Name the first operation at, above or below the field (Karmada applies plaintext
        // operations as one patch).
        let related = |p: &str| {
            p == pointer
                || pointer.starts_with(&format!("{p}/"))
                || p.starts_with(&format!("{pointer}/"))
                || p.is_empty()
        };
        let name = ops
            .iter()
            .position(|op| related(&op.path))
            .map_or_else(|| "plaintext".to_string(), |i| format!("plaintext[{i}]"));
        return Err((name, (pointer.to_string(), identity_message(field))));
    }
    if !canon.is_empty() {
        exprs.changed();
    }
    out.extend(canon);
    for (i, m) in o.cel.iter().enumerate() {
        let name = format!("cel[{i}]");
        let fail = |message: String| (name.clone(), (String::new(), message));
        let Some((_, source)) = m.expression() else {
            return Err(fail(format!(
                "patchType {:?} without its expression",
                m.patch_type
            )));
        };
        let kind = if m.patch_type == flotilla_api::policy::cel_patch_type::JSON_PATCH {
            ExpressionKind::JsonPatch
        } else {
            ExpressionKind::MergePatch
        };
        let result = exprs.eval(work, kind, source, cluster).map_err(fail)?;
        let ops = match kind {
            ExpressionKind::JsonPatch => {
                serde_json::from_value::<json_patch::Patch>(result)
                    .map_err(|e| fail(format!("expression result is not a JSON patch: {e}")))?
                    .0
            }
            _ => merge_patch_ops(work, &result),
        };
        let mut next = work.clone();
        json_patch::patch(&mut next, &ops)
            .map_err(|e| (name.clone(), (e.path.to_string(), e.kind.to_string())))?;
        guard_identity(&Identity::of(work), &next, &name)?;
        *work = next;
        exprs.changed();
        out.extend(ops);
    }
    Ok(())
}

/// RFC 7386 merge patch lowered to JSON patch operations against `target`: `null` removes a key,
/// objects merge recursively, anything else replaces.
pub fn merge_patch_ops(target: &Value, patch: &Value) -> Vec<json_patch::PatchOperation> {
    fn strip_nulls(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), strip_nulls(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    fn walk(
        target: &Value,
        patch: &Value,
        path: &mut Vec<String>,
        out: &mut Vec<json_patch::PatchOperation>,
    ) {
        let pointer = |p: &[String]| {
            json_patch::jsonptr::PointerBuf::from_tokens(
                p.iter().map(json_patch::jsonptr::Token::new),
            )
        };
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    path.push(k.clone());
                    match (t.get(k), v) {
                        (None, Value::Null) => {}
                        (Some(_), Value::Null) => {
                            out.push(json_patch::PatchOperation::Remove(
                                json_patch::RemoveOperation {
                                    path: pointer(path),
                                },
                            ));
                        }
                        (Some(child @ Value::Object(_)), Value::Object(_)) => {
                            walk(child, v, path, out)
                        }
                        _ => out.push(json_patch::PatchOperation::Add(json_patch::AddOperation {
                            path: pointer(path),
                            value: strip_nulls(v),
                        })),
                    }
                    path.pop();
                }
            }
            _ => out.push(json_patch::PatchOperation::Replace(
                json_patch::ReplaceOperation {
                    path: pointer(path),
                    value: strip_nulls(patch),
                },
            )),
        }
    }
    let mut out = Vec::new();
    walk(target, patch, &mut Vec::new(), &mut out);
    out
}

/// The rule's overriders as Karmada serialises `policyv1alpha1.Overriders` (Go field names and
/// order, `value: null` kept where Go always emits it, raw values with sorted keys).
fn overriders_json(o: &Overriders) -> Value {
    let mut m = Map::new();
    let sub_ops = |ops: &[flotilla_api::policy::SubPathPatch]| -> Value {
        Value::Array(
            ops.iter()
                .map(|p| {
                    let mut e = Map::new();
                    e.insert("subPath".into(), Value::String(p.sub_path.clone()));
                    e.insert("operator".into(), Value::String(p.operator.clone()));
                    e.insert(
                        "value".into(),
                        p.value.as_ref().map(gofmt::sorted).unwrap_or(Value::Null),
                    );
                    Value::Object(e)
                })
                .collect(),
        )
    };
    if !o.plaintext.is_empty() {
        let v = o
            .plaintext
            .iter()
            .map(|p| {
                let mut e = Map::new();
                e.insert("path".into(), Value::String(p.path.clone()));
                e.insert("operator".into(), Value::String(p.operator.clone()));
                e.insert(
                    "value".into(),
                    p.value.as_ref().map(gofmt::sorted).unwrap_or(Value::Null),
                );
                Value::Object(e)
            })
            .collect();
        m.insert("plaintext".into(), Value::Array(v));
    }
    if !o.image_overrider.is_empty() {
        let v = o
            .image_overrider
            .iter()
            .map(|x| {
                let mut e = Map::new();
                if let Some(p) = &x.predicate {
                    e.insert("predicate".into(), serde_json::json!({ "path": p.path }));
                }
                e.insert("component".into(), Value::String(x.component.clone()));
                e.insert("operator".into(), Value::String(x.operator.clone()));
                if !x.value.is_empty() {
                    e.insert("value".into(), Value::String(x.value.clone()));
                }
                Value::Object(e)
            })
            .collect();
        m.insert("imageOverrider".into(), Value::Array(v));
    }
    for (key, list) in [
        ("commandOverrider", &o.command_overrider),
        ("argsOverrider", &o.args_overrider),
    ] {
        if list.is_empty() {
            continue;
        }
        let v = list
            .iter()
            .map(|x| {
                let mut e = Map::new();
                e.insert(
                    "containerName".into(),
                    Value::String(x.container_name.clone()),
                );
                e.insert("operator".into(), Value::String(x.operator.clone()));
                if !x.value.is_empty() {
                    e.insert(
                        "value".into(),
                        Value::Array(x.value.iter().cloned().map(Value::String).collect()),
                    );
                }
                Value::Object(e)
            })
            .collect();
        m.insert(key.into(), Value::Array(v));
    }
    for (key, list) in [
        ("labelsOverrider", &o.labels_overrider),
        ("annotationsOverrider", &o.annotations_overrider),
    ] {
        if list.is_empty() {
            continue;
        }
        let v = list
            .iter()
            .map(|x| {
                let mut e = Map::new();
                e.insert("operator".into(), Value::String(x.operator.clone()));
                let vals: Map<String, Value> = x
                    .value
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                e.insert("value".into(), Value::Object(vals));
                Value::Object(e)
            })
            .collect();
        m.insert(key.into(), Value::Array(v));
    }
    if !o.field_overrider.is_empty() {
        let v = o
            .field_overrider
            .iter()
            .map(|x| {
                let mut e = Map::new();
                e.insert("fieldPath".into(), Value::String(x.field_path.clone()));
                if !x.json.is_empty() {
                    e.insert("json".into(), sub_ops(&x.json));
                }
                if !x.yaml.is_empty() {
                    e.insert("yaml".into(), sub_ops(&x.yaml));
                }
                Value::Object(e)
            })
            .collect();
        m.insert("fieldOverrider".into(), Value::Array(v));
    }
    // Flotilla extensions, recorded only when used: Karmada policies serialise unchanged.
    if o.plaintext.iter().any(|p| p.expression.is_some())
        && let Some(Value::Array(items)) = m.get_mut("plaintext")
    {
        for (item, p) in items.iter_mut().zip(&o.plaintext) {
            if let (Value::Object(e), Some(x)) = (item, &p.expression) {
                e.insert("expression".into(), Value::String(x.clone()));
            }
        }
    }
    for (key, list) in [
        ("labelsOverrider", &o.labels_overrider),
        ("annotationsOverrider", &o.annotations_overrider),
    ] {
        if let Some(Value::Array(items)) = m.get_mut(key) {
            for (item, l) in items.iter_mut().zip(list.iter()) {
                if let (Value::Object(e), Some(x)) = (item, &l.expression) {
                    e.insert("expression".into(), Value::String(x.clone()));
                }
            }
        }
    }
    if !o.cel.is_empty() {
        m.insert(
            "cel".into(),
            serde_json::to_value(&o.cel).unwrap_or(Value::Null),
        );
    }
    Value::Object(m)
}

/// Applies `patch.patch` to a copy of `object` with the `json-patch` crate. Every override plugin's
/// patch (the built-in Karmada overriders, Wasm overriders) is applied here, so this is also where
/// a patch that changes the manifest's identity is refused, whatever computed it.
///
/// # Errors
/// An operation's path does not resolve (never the case for a patch returned by
/// [`karmada_overrides`] for the same object), or the result has another `apiVersion`, `kind`,
/// `metadata.namespace` or `metadata.name` than `object` ([`OverrideError::Identity`]).
#[allow(clippy::result_large_err)]
pub fn apply(object: &Value, patch: &OverridePatch) -> Result<Value, OverrideError> {
    let mut doc = object.clone();
    for (index, op) in patch.patch.iter().enumerate() {
        json_patch::patch_unsafe(&mut doc, std::slice::from_ref(op)).map_err(|e| {
            let (name, path) = match op {
                json_patch::PatchOperation::Add(o) => ("add", o.path.to_string()),
                json_patch::PatchOperation::Remove(o) => ("remove", o.path.to_string()),
                json_patch::PatchOperation::Replace(o) => ("replace", o.path.to_string()),
                json_patch::PatchOperation::Move(o) => ("move", o.path.to_string()),
                json_patch::PatchOperation::Copy(o) => ("copy", o.path.to_string()),
                json_patch::PatchOperation::Test(o) => ("test", o.path.to_string()),
            };
            OverrideError::Patch {
                index,
                op: name,
                path,
                message: e.kind.to_string(),
            }
        })?;
    }
    if let Some((field, _)) = identity_change(object, &doc) {
        return Err(OverrideError::Identity { field });
    }
    Ok(doc)
}

/// The provenance annotations Karmada records: `policy.karmada.io/applied-cluster-overrides`
/// (ClusterOverridePolicies) then `policy.karmada.io/applied-overrides` (OverridePolicies), each
/// a compact JSON array `[{"policyName":…,"overriders":…}]` sorted by policy name, encoded like
/// Go's `encoding/json`. A scope with no applied entry yields no annotation.
pub fn applied_annotations(applied: &[(OverrideScope, AppliedOverride)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (scope, key) in [
        (OverrideScope::Cluster, APPLIED_CLUSTER_OVERRIDES_ANNOTATION),
        (OverrideScope::Namespaced, APPLIED_OVERRIDES_ANNOTATION),
    ] {
        let mut items: Vec<&AppliedOverride> = applied
            .iter()
            .filter(|(s, _)| *s == scope)
            .map(|(_, a)| a)
            .collect();
        if items.is_empty() {
            continue;
        }
        // Go's sort.Slice is insertion sort (stable) for up to 12 items.
        items.sort_by(|a, b| a.policy_name.cmp(&b.policy_name));
        let arr = Value::Array(
            items
                .into_iter()
                .map(|a| {
                    let mut e = Map::new();
                    e.insert("policyName".into(), Value::String(a.policy_name.clone()));
                    e.insert("overriders".into(), a.overriders.clone());
                    Value::Object(e)
                })
                .collect(),
        );
        out.push((key.to_string(), gofmt::to_json(&arr)));
    }
    out
}
