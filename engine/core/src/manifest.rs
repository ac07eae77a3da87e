//! Reading input documents (multi-document YAML or JSON, `kind: List` flattened) into typed
//! objects, with errors that name the source, the document and the field.

use flotilla_api::Object;
use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{OverridePolicy, PropagationPolicy};
use flotilla_api::work::ResourceBinding;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One typed input document.
// Documents are parsed once and consumed right away; boxing the policies would only add indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Document {
    /// Any other Kubernetes object: a resource template.
    Template(Object),
    /// PropagationPolicy or ClusterPropagationPolicy (see `kind`).
    Propagation(PropagationPolicy),
    /// OverridePolicy or ClusterOverridePolicy (see `kind`).
    Override(OverridePolicy),
    /// A member cluster.
    Cluster(Box<Cluster>),
    /// An existing ResourceBinding or ClusterResourceBinding (the current assignment).
    Binding(Box<ResourceBinding>),
}

/// Why an input document was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: document {index}{what}: {message}")]
pub struct InputError {
    /// File name (or `-`).
    pub source_name: String,
    /// 1-based document index within the source.
    pub index: usize,
    /// ` (Kind namespace/name)` when known.
    pub what: String,
    /// The problem, with the field path when there is one.
    pub message: String,
}

fn describe(v: &Value) -> String {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (kind, ns, name) = (s("/kind"), s("/metadata/namespace"), s("/metadata/name"));
    match (kind.is_empty(), ns.is_empty()) {
        (true, _) => String::new(),
        (false, true) => format!(" ({kind} {name})"),
        (false, false) => format!(" ({kind} {ns}/{name})"),
    }
}

fn typed<T: DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.into_inner().to_string()
        } else {
            format!("{path}: {}", e.into_inner())
        }
    })
}

/// Parse `text` (YAML stream or JSON) from `source_name` into documents.
///
/// # Errors
/// The first invalid document: YAML syntax (with line and column), a missing `apiVersion`/`kind`, or a
/// field that does not fit the Karmada schema (with its path).
pub fn parse_documents(source_name: &str, text: &str) -> Result<Vec<Document>, InputError> {
    let mut out = Vec::new();
    for (index, de) in (1..).zip(serde_yaml::Deserializer::from_str(text)) {
        let fail = |what: String, message: String| InputError {
            source_name: source_name.to_owned(),
            index,
            what,
            message,
        };
        let value: Value = match serde::Deserialize::deserialize(de) {
            Ok(v) => v,
            Err(e) => return Err(fail(String::new(), format!("invalid YAML: {e}"))),
        };
        if value.is_null() {
            continue; // empty document (`---` at the end)
        }
        let items = if value
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"))
        {
            match value.get("items") {
                Some(Value::Array(items)) => items.clone(),
                _ => vec![value],
            }
        } else {
            vec![value]
        };
        for v in items {
            out.push(document(v).map_err(|(what, message)| fail(what, message))?);
        }
    }
    Ok(out)
}

fn document(v: Value) -> Result<Document, (String, String)> {
    let what = describe(&v);
    if !v.is_object() {
        return Err((
            what,
            "expected a Kubernetes object (a mapping with apiVersion and kind)".into(),
        ));
    }
    let api_version = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let kind = v
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if api_version.is_empty() {
        return Err((what, "apiVersion: missing or not a string".into()));
    }
    if kind.is_empty() {
        return Err((what, "kind: missing or not a string".into()));
    }
    if v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err((what, "metadata.name: missing".into()));
    }
    let w = what.clone();
    let res = match (api_version.as_str(), kind.as_str()) {
        ("policy.karmada.io/v1alpha1", "PropagationPolicy" | "ClusterPropagationPolicy") => {
            typed(v).map(Document::Propagation)
        }
        ("policy.karmada.io/v1alpha1", "OverridePolicy" | "ClusterOverridePolicy") => {
            typed(v).map(Document::Override)
        }
        ("cluster.karmada.io/v1alpha1", "Cluster") => {
            typed(v).map(|c| Document::Cluster(Box::new(c)))
        }
        ("work.karmada.io/v1alpha2", "ResourceBinding" | "ClusterResourceBinding") => {
            typed(v).map(|b| Document::Binding(Box::new(b)))
        }
        (a, k)
            if a.starts_with("policy.karmada.io/")
                || a.starts_with("cluster.karmada.io/")
                || a.starts_with("work.karmada.io/") =>
        {
            Err(format!("unsupported Karmada kind {k:?} in {a:?}"))
        }
        _ => {
            if v.get("metadata").is_some_and(|m| !m.is_object()) {
                Err("metadata: must be a mapping".into())
            } else {
                Ok(Document::Template(Object(v)))
            }
        }
    };
    res.map_err(|m| (w, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_yaml_names_source_document_and_line() {
        let e = parse_documents(
            "x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [unclosed\n",
        )
        .unwrap_err();
        assert_eq!(e.index, 2);
        assert!(
            e.to_string()
                .starts_with("x.yaml: document 2: invalid YAML:"),
            "{e}"
        );
        assert!(e.message.contains("line"), "{e}");
    }

    #[test]
    fn unknown_policy_field_is_reported_with_its_path() {
        let e = parse_documents(
            "p.yaml",
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, namespace: d}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]\n  placement: {replicaScheduling: {replicaSchedulingTyp: Divided}}\n",
        )
        .unwrap_err();
        assert_eq!(e.what, " (PropagationPolicy d/p)");
        assert!(e.message.starts_with("spec.placement.replicaScheduling.replicaSchedulingTyp: unknown field `replicaSchedulingTyp`"), "{}", e.message);
    }

    #[test]
    fn lists_are_flattened_and_kinds_dispatched() {
        let docs = parse_documents(
            "l.json",
            r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"cluster.karmada.io/v1alpha1","kind":"Cluster","metadata":{"name":"m1"},"spec":{"syncMode":"Push"}}]}"#,
        )
        .unwrap();
        assert!(matches!(docs[0], Document::Template(_)));
        assert!(matches!(docs[1], Document::Cluster(_)));
    }
}
