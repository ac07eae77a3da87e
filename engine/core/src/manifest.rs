//! Reading input documents (multi-document YAML or JSON, `kind: List` flattened) into typed
//! objects, with errors that name the source, the document and the field.

use flotilla_api::Object;
use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{OverridePolicy, PropagationPolicy};
use flotilla_api::value_seed::{Checked, KeyCheck};
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

/// Deepest flow-collection nesting accepted in an input file (the API server's bound on request
/// bodies).
pub const MAX_FLOW_DEPTH: usize = 100;

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

/// Longest key name quoted in an error; longer ones are cut (keys are the only input text that
/// errors quote).
const MAX_QUOTED_KEY: usize = 64;

/// `key` as quoted in an error: cut after [`MAX_QUOTED_KEY`] characters.
fn quoted_key(key: &str) -> String {
    match key.char_indices().nth(MAX_QUOTED_KEY) {
        Some((cut, _)) => format!("{}…", &key[..cut]),
        None => key.to_owned(),
    }
}

/// The keys of a manifest, checked strictly, as kubectl's strict decoding does: a mapping with a
/// duplicate key, or with a YAML merge key (`<<`), is an error naming the key (the parser adds
/// the path of the mapping, the line and the column).
struct Strict;

impl KeyCheck for Strict {
    fn key(&mut self, key: &str, seen: &serde_json::Map<String, Value>) -> Result<(), String> {
        if key == "<<" {
            return Err(
                "YAML merge keys (<<) are not supported (as in kubectl); write the keys out".into(),
            );
        }
        if seen.contains_key(key) {
            return Err(format!("duplicate key {}", quoted_key(key)));
        }
        Ok(())
    }
}

/// Parse `text` (YAML stream or JSON) from `source_name` into documents.
///
/// Decoding is strict, as kubectl's: a mapping with a duplicate key is refused (not "last one
/// wins"), and so is a YAML merge key (`<<`), which Kubernetes' YAML decoding does not apply
/// either; the error names the key path and the line and column, and quotes no other input.
///
/// # Errors
/// The first invalid document: YAML syntax (with line and column), a duplicate or merge key, a
/// missing `apiVersion`/`kind`, or a field that does not fit the Karmada schema (with its path).
pub fn parse_documents(source_name: &str, text: &str) -> Result<Vec<Document>, InputError> {
    let mut out = Vec::new();
    for (index, value) in parse_values(source_name, text)? {
        let fail = |what: String, message: String| InputError {
            source_name: source_name.to_owned(),
            index,
            what,
            message,
        };
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

/// The non-empty documents of a YAML (or JSON) stream as values, with their 1-based index, read
/// as every Flotilla input file is: flow nesting bounded before parsing, duplicate and merge keys
/// refused (kubectl's strict decoding).
///
/// # Errors
/// The first document that does not parse, with its index, line and column.
pub fn parse_values(source_name: &str, text: &str) -> Result<Vec<(usize, Value)>, InputError> {
    // libyaml's cost is quadratic in flow nesting: refuse `[[[…` before it parses.
    if let Some(line) = flotilla_api::yaml_scan::flow_too_deep(text.as_bytes(), MAX_FLOW_DEPTH) {
        let index = 1 + text
            .lines()
            .take(line.saturating_sub(1))
            .filter(|l| l.starts_with("---"))
            .count();
        return Err(InputError {
            source_name: source_name.to_owned(),
            index,
            what: String::new(),
            message: format!(
                "line {line}: flow collections ([ or {{) nest deeper than {MAX_FLOW_DEPTH} levels"
            ),
        });
    }
    let mut out = Vec::new();
    for (index, de) in (1..).zip(serde_yaml::Deserializer::from_str(text)) {
        let fail = |what: String, message: String| InputError {
            source_name: source_name.to_owned(),
            index,
            what,
            message,
        };
        let value: Value = match serde::de::DeserializeSeed::deserialize(Checked(&mut Strict), de) {
            Ok(v) => v,
            Err(e) => return Err(fail(String::new(), format!("invalid YAML: {e}"))),
        };
        if !value.is_null() {
            out.push((index, value)); // null: an empty document (`---` at the end)
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
            } else if let Some(e) = template_counts_error(&api_version, &kind, &v) {
                Err(e)
            } else {
                Ok(Document::Template(Object(v)))
            }
        }
    };
    res.map_err(|m| (w, m))
}

/// The replica counts the engine reads from a workload template, checked as kube-apiserver
/// decodes and validates them: absent or null (the API server's default applies), or an integer
/// from 0 to 2^31−1. Anything else would otherwise be planned as some other count silently.
fn template_counts_error(api_version: &str, kind: &str, v: &Value) -> Option<String> {
    let fields: &[&str] = match (api_version, kind) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") => &["replicas"],
        ("batch/v1", "Job") => &["parallelism", "completions"],
        _ => return None,
    };
    let spec = v.get("spec")?;
    if !spec.is_object() {
        return Some("spec: must be a mapping".into());
    }
    fields.iter().find_map(|f| match spec.get(*f) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) if i < 0 => Some(format!("spec.{f}: must be greater than or equal to 0")),
            Some(i) if i32::try_from(i).is_ok() => None,
            _ if n.is_f64() => Some(format!("spec.{f}: must be an integer")),
            _ => Some(format!(
                "spec.{f}: must be at most 2147483647 (a 32-bit integer)"
            )),
        },
        Some(_) => Some(format!("spec.{f}: must be an integer")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_nesting_past_the_bound_is_refused_before_parsing_with_its_line() {
        let deep = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\n---\nx: {}1{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let started = std::time::Instant::now();
        let e = parse_documents("deep.yaml", &deep).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(e.index, 2);
        assert!(e.message.starts_with("line 5: flow collections"), "{e}");
        let ok = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\nx: {}1{}\n",
            "[".repeat(50),
            "]".repeat(50)
        );
        assert!(parse_documents("ok.yaml", &ok).is_ok());
    }

    #[test]
    fn workload_replica_counts_are_validated_as_kube_apiserver_decodes_them() {
        let doc = |replicas: &str| {
            parse_documents(
                "d.yaml",
                &format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d}}\nspec: {{replicas: {replicas}}}\n"
                ),
            )
        };
        for ok in ["0", "1", "2147483647", "null"] {
            assert!(doc(ok).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("-1", "greater than or equal to 0"),
            ("2147483648", "at most 2147483647"),
            ("9223372036854775808", "at most 2147483647"),
            ("3.7", "must be an integer"),
            ("\"5\"", "must be an integer"),
            ("true", "must be an integer"),
            ("[2]", "must be an integer"),
        ] {
            let e = doc(bad).unwrap_err();
            assert!(e.to_string().starts_with("d.yaml: document 1"), "{e}");
            assert!(e.message.contains(says), "{bad}: {e}");
        }
        let job = parse_documents(
            "j.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 2, completions: -3}\n",
        )
        .unwrap_err();
        assert!(job.message.starts_with("spec.completions:"), "{job}");
    }

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

    #[test]
    fn duplicate_keys_are_refused_with_key_path_line_and_column() {
        let top = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nkind: Secret\n";
        let e = parse_documents("dup.yaml", top).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("dup.yaml: document 1: invalid YAML: duplicate key kind"),
            "{e}"
        );
        assert!(e.message.contains("line 4 column"), "{e}");
        assert!(
            !e.message.contains("Secret") && !e.message.contains("ConfigMap"),
            "{e}"
        );

        let nested = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: web\n    app: db\ndata: {}\n";
        let e = parse_documents("dup.yaml", nested).unwrap_err();
        assert!(
            e.message
                .contains("metadata.labels: duplicate key app at line 7 column 5"),
            "{e}"
        );
        assert!(
            !e.message.contains("web") && !e.message.contains("db"),
            "{e}"
        );

        // In a list item, in JSON, and in the second document of a stream.
        let e = parse_documents(
            "dup.json",
            r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"}}]}"#,
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("items[0].metadata: duplicate key name at line 1"),
            "{e}"
        );
        let stream = format!(
            "{}---\n{top}",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
        );
        assert_eq!(parse_documents("s.yaml", &stream).unwrap_err().index, 2);
    }

    #[test]
    fn merge_keys_are_refused_not_ignored() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    <<: {app: web}\n";
        let e = parse_documents("merge.yaml", text).unwrap_err();
        assert!(
            e.message
                .contains("metadata.labels: YAML merge keys (<<) are not supported"),
            "{e}"
        );
        assert!(e.message.contains("line 6 column"), "{e}");
        let anchored = "base: &b {x: 1}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  <<: *b\n";
        let e = parse_documents("merge.yaml", anchored).unwrap_err();
        assert!(e.message.contains("data: YAML merge keys"), "{e}");
    }

    #[test]
    fn distinct_keys_and_long_key_names_are_read_as_before() {
        let docs = parse_documents(
            "ok.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {a: '1', b: '2'}}\ndata: {k: [1, 2.5, null, true]}\n",
        )
        .unwrap();
        let Document::Template(o) = &docs[0] else {
            panic!("template");
        };
        assert_eq!(o.0["data"]["k"], serde_json::json!([1, 2.5, null, true]));
        let long = "k".repeat(10_000);
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{{long}: 1, {long}: 2}}\n"
        );
        let e = parse_documents("long.yaml", &text).unwrap_err();
        assert!(e.message.len() < 300, "{}", e.message.len());
    }
}
