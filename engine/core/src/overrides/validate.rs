//! Admission-time validation of (Cluster)OverridePolicies: the CRD schema's enums plus Karmada's
//! `ValidateOverrideSpec` (`pkg/util/validation/validation.go`), after the OverridePolicy
//! mutating webhook's defaulting.

use std::collections::BTreeMap;

use flotilla_api::policy::{ClusterAffinity, OverridePolicy, Overriders, SubPathPatch};

pub use crate::validate::FieldError;

fn is_cluster_scoped(policy: &OverridePolicy) -> bool {
    policy.kind == "ClusterOverridePolicy"
}

/// The OverridePolicy mutating webhook: resource selectors without a namespace get the
/// policy's namespace. ClusterOverridePolicies are left untouched.
pub fn set_defaults(policy: &mut OverridePolicy) {
    if is_cluster_scoped(policy) {
        return;
    }
    let ns = policy.metadata.namespace.clone().unwrap_or_default();
    for s in &mut policy.spec.resource_selectors {
        if s.namespace.is_empty() {
            s.namespace.clone_from(&ns);
        }
    }
}

struct Errs(Vec<FieldError>);

impl Errs {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }
}

fn enum_check(errs: &mut Errs, field: String, value: &str, allowed: &[&str]) {
    if !allowed.contains(&value) {
        let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
        errs.push(
            field,
            format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        );
    }
}

const OPS3: &[&str] = &["add", "remove", "replace"];

/// CRD-schema enums of one `Overriders` block.
fn schema(errs: &mut Errs, o: &Overriders, base: &str) {
    for (i, p) in o.plaintext.iter().enumerate() {
        enum_check(
            errs,
            format!("{base}.plaintext[{i}].operator"),
            &p.operator,
            OPS3,
        );
    }
    for (i, x) in o.image_overrider.iter().enumerate() {
        enum_check(
            errs,
            format!("{base}.imageOverrider[{i}].component"),
            &x.component,
            &["Registry", "Repository", "Tag"],
        );
        enum_check(
            errs,
            format!("{base}.imageOverrider[{i}].operator"),
            &x.operator,
            OPS3,
        );
    }
    for (name, list) in [
        ("commandOverrider", &o.command_overrider),
        ("argsOverrider", &o.args_overrider),
    ] {
        for (i, x) in list.iter().enumerate() {
            enum_check(
                errs,
                format!("{base}.{name}[{i}].operator"),
                &x.operator,
                &["add", "remove"],
            );
        }
    }
    for (name, list) in [
        ("labelsOverrider", &o.labels_overrider),
        ("annotationsOverrider", &o.annotations_overrider),
    ] {
        for (i, x) in list.iter().enumerate() {
            enum_check(
                errs,
                format!("{base}.{name}[{i}].operator"),
                &x.operator,
                OPS3,
            );
        }
    }
    for (i, f) in o.field_overrider.iter().enumerate() {
        for (kind, ops) in [("json", &f.json), ("yaml", &f.yaml)] {
            for (j, p) in ops.iter().enumerate() {
                enum_check(
                    errs,
                    format!("{base}.fieldOverrider[{i}].{kind}[{j}].operator"),
                    &p.operator,
                    OPS3,
                );
            }
        }
    }
}

/// `go-openapi/jsonpointer.New`: empty, or starting with `/`.
fn pointer_ok(p: &str) -> bool {
    p.is_empty() || p.starts_with('/')
}

const POINTER_MSG: &str = "JSON pointer must be empty or start with a \"/\"";

fn cluster_affinity(errs: &mut Errs, a: Option<&ClusterAffinity>, field: &str) {
    let Some(fs) = a.and_then(|a| a.field_selector.as_ref()) else {
        return;
    };
    for e in &fs.match_expressions {
        if !matches!(e.key.as_str(), "provider" | "region" | "zone") {
            errs.push(
                format!("{field}.fieldSelector"),
                format!(
                    "unsupported key {:?}, must be provider, region, or zone",
                    e.key
                ),
            );
            return;
        }
        if !matches!(e.operator.as_str(), "In" | "NotIn") {
            errs.push(
                format!("{field}.fieldSelector"),
                format!("unsupported operator {:?}, must be In or NotIn", e.operator),
            );
            return;
        }
    }
}

fn sub_paths(errs: &mut Errs, ops: &[SubPathPatch], field: &str) {
    for (i, p) in ops.iter().enumerate() {
        if !pointer_ok(&p.sub_path) {
            errs.push(
                format!("{field}[{i}].subPath"),
                format!("Invalid value: {:?}: {POINTER_MSG}", p.sub_path),
            );
        }
        match p.operator.as_str() {
            "add" | "replace" if p.value.is_none() => {
                errs.push(
                    format!("{field}[{i}].value"),
                    "value is required for add or replace operation",
                );
            }
            "remove" if p.value.is_some() => {
                errs.push(
                    format!("{field}[{i}].value"),
                    "value is not allowed for remove operation",
                );
            }
            _ => {}
        }
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && !b[0].is_ascii_uppercase()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && !b[b.len() - 1].is_ascii_uppercase()
                && b.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, anchored.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

const NAME_FMT_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `validation.IsQualifiedName`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [n] => *n,
        [prefix, n] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else if !is_dns1123_subdomain(prefix) {
                errs.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_string());
            }
            *n
        }
        _ => {
            errs.push(format!("a qualified name {NAME_FMT_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".into());
    }
    if !is_name_part(name) {
        errs.push(format!("name part {NAME_FMT_MSG}"));
    }
    errs
}

fn labels(errs: &mut Errs, m: &BTreeMap<String, String>, field: &str) {
    for (k, v) in m {
        for msg in qualified_name_errors(k) {
            errs.push(field, format!("Invalid value: {k:?}: {msg}"));
        }
        if v.len() > 63 {
            errs.push(
                field,
                format!("Invalid value: {v:?}: must be no more than 63 characters"),
            );
        }
        if !v.is_empty() && !is_name_part(v) {
            errs.push(
                field,
                format!("Invalid value: {v:?}: a valid label {NAME_FMT_MSG}"),
            );
        }
    }
}

fn annotations(errs: &mut Errs, m: &BTreeMap<String, String>, field: &str) {
    for k in m.keys() {
        for msg in qualified_name_errors(&k.to_lowercase()) {
            errs.push(field, format!("Invalid value: {k:?}: {msg}"));
        }
    }
    let total: usize = m.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > 256 * 1024 {
        errs.push(
            field,
            format!("Too long: may not be more than {} bytes", 256 * 1024),
        );
    }
}

/// Validates an OverridePolicy or ClusterOverridePolicy (by `kind`) as Karmada's admission
/// would: CRD-schema enums (operators per overrider type, image component), then
/// `ValidateOverrideSpec` — legacy `targetCluster`/`overriders` vs `overrideRules`, label and
/// annotation keys/values, JSON pointer paths, fieldOverrider json-xor-yaml and sub-operation
/// values, cluster field selectors, and (OverridePolicy only) resource selector namespaces.
///
/// Resource selectors without a namespace are accepted for an OverridePolicy, since the mutating
/// webhook ([`set_defaults`]) fills them in before validation. Plaintext values are **not**
/// checked against their operator: Karmada does not either.
pub fn validate(policy: &OverridePolicy) -> Vec<FieldError> {
    let mut errs = Errs(Vec::new());
    let spec = &policy.spec;
    schema(&mut errs, &spec.overriders, "spec.overriders");
    for (i, r) in spec.override_rules.iter().enumerate() {
        schema(
            &mut errs,
            &r.overriders,
            &format!("spec.overrideRules[{i}].overriders"),
        );
    }
    cluster_affinity(
        &mut errs,
        spec.target_cluster.as_ref(),
        "spec.targetCluster",
    );
    let has_rules = !spec.override_rules.is_empty();
    if spec.target_cluster.is_some() && has_rules {
        errs.push(
            "spec.targetCluster",
            "overrideRules and targetCluster can't co-exist",
        );
    }
    let o = &spec.overriders;
    let legacy_nonempty = !(o.plaintext.is_empty()
        && o.image_overrider.is_empty()
        && o.command_overrider.is_empty()
        && o.args_overrider.is_empty()
        && o.labels_overrider.is_empty()
        && o.annotations_overrider.is_empty());
    if legacy_nonempty && has_rules {
        errs.push(
            "spec.overriders",
            "overrideRules and overriders can't co-exist",
        );
    }
    for (ri, rule) in spec.override_rules.iter().enumerate() {
        let base = format!("spec.overrideRules[{ri}]");
        let ov = &rule.overriders;
        for (i, a) in ov.annotations_overrider.iter().enumerate() {
            annotations(
                &mut errs,
                &a.value,
                &format!("{base}.overriders.annotationsOverrider[{i}].value"),
            );
        }
        for (i, l) in ov.labels_overrider.iter().enumerate() {
            labels(
                &mut errs,
                &l.value,
                &format!("{base}.overriders.labelsOverrider[{i}].value"),
            );
        }
        for (i, im) in ov.image_overrider.iter().enumerate() {
            if let Some(p) = im.predicate.as_ref().filter(|p| !pointer_ok(&p.path)) {
                {
                    errs.push(
                        format!("{base}.overriders.imageOverrider[{i}].predicate.path"),
                        format!("Invalid value: {:?}: {POINTER_MSG}", p.path),
                    );
                }
            }
        }
        for (i, f) in ov.field_overrider.iter().enumerate() {
            let fp = format!("{base}.overriders.fieldOverrider[{i}]");
            if !f.yaml.is_empty() && !f.json.is_empty() {
                errs.push(
                    fp.clone(),
                    "FieldOverrider has both YAML and JSON set. Only one is allowed",
                );
            }
            if f.yaml.is_empty() && f.json.is_empty() {
                errs.push(
                    fp.clone(),
                    "Required value: FieldOverrider must have either JSON or YAML set",
                );
            }
            if !pointer_ok(&f.field_path) {
                errs.push(
                    format!("{fp}.fieldPath"),
                    format!("Invalid value: {:?}: {POINTER_MSG}", f.field_path),
                );
            }
            sub_paths(&mut errs, &f.json, &format!("{fp}.json"));
            sub_paths(&mut errs, &f.yaml, &format!("{fp}.yaml"));
        }
        cluster_affinity(
            &mut errs,
            rule.target_cluster.as_ref(),
            &format!("{base}.targetCluster"),
        );
    }
    if !is_cluster_scoped(policy) {
        let ns = policy.metadata.namespace.as_deref().unwrap_or("");
        if !ns.is_empty() {
            for (i, s) in spec.resource_selectors.iter().enumerate() {
                if !s.namespace.is_empty() && s.namespace != ns {
                    errs.push(
                        format!("spec.resourceSelectors[{i}].namespace"),
                        format!(
                            "Invalid value: {:?}: namespace of resource selector must be the same as the namespace of the policy",
                            s.namespace
                        ),
                    );
                }
            }
        }
    }
    errs.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(v: serde_json::Value) -> OverridePolicy {
        serde_json::from_value(v).expect("policy")
    }

    fn fields(p: &OverridePolicy) -> Vec<String> {
        validate(p).into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn valid_policy_has_no_errors() {
        let p = policy(
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                "overrideRules": [{"targetCluster": {"fieldSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["a"]}]}},
                    "overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "remove", "value": 1}],
                        "labelsOverrider": [{"operator": "add", "value": {"example.com/a": "b"}}],
                        "fieldOverrider": [{"fieldPath": "/data/x", "yaml": [{"subPath": "/a", "operator": "add", "value": 1}]}]}}]}}),
        );
        // Karmada does not check plaintext values against the operator.
        assert_eq!(fields(&p), Vec::<String>::new());
    }

    #[test]
    fn every_rule() {
        let p = policy(
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"}],
                "targetCluster": {"clusterNames": ["m1"]},
                "overriders": {"plaintext": [{"path": "/a", "operator": "add", "value": 1}]},
                "overrideRules": [{"targetCluster": {"fieldSelector": {"matchExpressions": [{"key": "foo", "operator": "In"}]}},
                    "overriders": {"plaintext": [{"path": "/a", "operator": "move"}],
                        "imageOverrider": [{"predicate": {"path": "spec/x"}, "component": "Digest", "operator": "add"}],
                        "commandOverrider": [{"containerName": "c", "operator": "replace"}],
                        "labelsOverrider": [{"operator": "add", "value": {"bad key": "v"}}],
                        "annotationsOverrider": [{"operator": "add", "value": {"a/b/c": "v"}}],
                        "fieldOverrider": [
                            {"fieldPath": "data/x", "json": [{"subPath": "a", "operator": "add"}], "yaml": [{"subPath": "/a", "operator": "remove", "value": 1}]},
                            {"fieldPath": "/data/y"}]}}]}}),
        );
        let f = fields(&p);
        for want in [
            "spec.overrideRules[0].overriders.plaintext[0].operator",
            "spec.overrideRules[0].overriders.imageOverrider[0].component",
            "spec.overrideRules[0].overriders.commandOverrider[0].operator",
            "spec.targetCluster",
            "spec.overriders",
            "spec.overrideRules[0].overriders.annotationsOverrider[0].value",
            "spec.overrideRules[0].overriders.labelsOverrider[0].value",
            "spec.overrideRules[0].overriders.imageOverrider[0].predicate.path",
            "spec.overrideRules[0].overriders.fieldOverrider[0]",
            "spec.overrideRules[0].overriders.fieldOverrider[0].fieldPath",
            "spec.overrideRules[0].overriders.fieldOverrider[0].json[0].subPath",
            "spec.overrideRules[0].overriders.fieldOverrider[0].json[0].value",
            "spec.overrideRules[0].overriders.fieldOverrider[0].yaml[0].value",
            "spec.overrideRules[0].overriders.fieldOverrider[1]",
            "spec.overrideRules[0].targetCluster.fieldSelector",
            "spec.resourceSelectors[0].namespace",
        ] {
            assert!(f.iter().any(|x| x == want), "missing {want} in {f:?}");
        }
    }

    #[test]
    fn cluster_policy_skips_namespace_rule_and_defaults() {
        let mut p = policy(
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterOverridePolicy",
            "metadata": {"name": "p"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "x"}]}}),
        );
        assert!(validate(&p).is_empty());
        set_defaults(&mut p);
        assert_eq!(p.spec.resource_selectors[0].namespace, "x");
        let mut op = policy(
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}]}}),
        );
        assert!(validate(&op).is_empty());
        set_defaults(&mut op);
        assert_eq!(op.spec.resource_selectors[0].namespace, "ns");
    }
}
