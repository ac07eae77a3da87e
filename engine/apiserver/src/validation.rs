//! The validation kube-apiserver does itself, before any admission: every object's metadata
//! (labels and annotations, as `ValidateObjectMeta`) and the replica counts of workloads. A
//! failure is `422 Invalid` with kube-apiserver's field paths and messages.
//!
//! **Ratcheting.** On an update, a field that is unchanged from the stored object is not checked:
//! an object stored before these checks existed stays writable (its finalizers removable).

use serde_json::Value;

use crate::admission::{AdmissionError, FieldError};
use crate::registry::Resource;

/// The most bytes of annotation keys and values on one object (`TotalAnnotationSizeLimitB`).
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        examples.join(" or ")
    )
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `[A-Za-z0-9]` at both ends, `[-A-Za-z0-9_.]` between.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// apimachinery's `IsDNS1123Subdomain`.
fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len_error(253));
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(ok)
            && b.last().is_some_and(ok)
            && b.iter().all(|c| ok(c) || *c == b'-')
    };
    if !s.split('.').all(label_ok) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// apimachinery's `IsQualifiedName`: label and annotation keys.
fn qualified_name_errors(key: &str) -> Vec<String> {
    let name_msg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    let examples = ["MyName", "my.name", "123-abc"];
    let parts: Vec<&str> = key.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(name_msg, QUALIFIED_NAME_FMT, &examples)
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(name_msg, QUALIFIED_NAME_FMT, &examples)
        ));
    }
    errs
}

/// apimachinery's `IsValidLabelValue`.
fn label_value_errors(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !v.is_empty() && !is_qualified_name_part(v) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// A `field.Invalid` error: `Invalid value: <value>: <detail>`.
fn invalid(field: &str, value: &Value, detail: &str) -> FieldError {
    FieldError {
        field: field.to_owned(),
        message: format!("Invalid value: {value}: {detail}"),
    }
}

/// The string map at `field` (`metadata.labels`, `metadata.annotations`), or the errors that it
/// is not one.
fn string_map<'a>(
    field: &str,
    v: &'a Value,
    errs: &mut Vec<FieldError>,
) -> Vec<(&'a str, &'a str)> {
    let Value::Object(m) = v else {
        errs.push(invalid(
            field,
            v,
            "must be a map of string keys to string values",
        ));
        return Vec::new();
    };
    let mut out = Vec::with_capacity(m.len());
    for (k, val) in m {
        match val {
            Value::String(s) => out.push((k.as_str(), s.as_str())),
            other => errs.push(invalid(&format!("{field}[{k}]"), other, "must be a string")),
        }
    }
    out
}

fn labels(v: &Value, errs: &mut Vec<FieldError>) {
    let field = "metadata.labels";
    for (k, val) in string_map(field, v, errs) {
        errs.extend(
            qualified_name_errors(k)
                .iter()
                .map(|m| invalid(field, &Value::from(k), m)),
        );
        errs.extend(
            label_value_errors(val)
                .iter()
                .map(|m| invalid(field, &Value::from(val), m)),
        );
    }
}

fn annotations(v: &Value, errs: &mut Vec<FieldError>) {
    let field = "metadata.annotations";
    let mut total = 0usize;
    for (k, val) in string_map(field, v, errs) {
        errs.extend(
            qualified_name_errors(&k.to_lowercase())
                .iter()
                .map(|m| invalid(field, &Value::from(k), m)),
        );
        total += k.len() + val.len();
    }
    if total > MAX_ANNOTATIONS_BYTES {
        errs.push(FieldError {
            field: field.to_owned(),
            message: format!("Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes"),
        });
    }
}

/// An `int32` count that must not be negative (`ValidateNonnegativeField`).
fn count(field: &str, v: &Value, errs: &mut Vec<FieldError>) {
    match v.as_i64() {
        _ if v.is_null() => {}
        Some(n) if n < 0 => errs.push(invalid(field, v, "must be greater than or equal to 0")),
        Some(n) if n > i64::from(i32::MAX) => errs.push(invalid(
            field,
            v,
            &format!("must be no more than {}", i32::MAX),
        )),
        Some(_) => {}
        None if v.as_u64().is_some() => errs.push(invalid(
            field,
            v,
            &format!("must be no more than {}", i32::MAX),
        )),
        None => errs.push(invalid(field, v, "must be a 32-bit integer")),
    }
}

/// The largest `value` of a user-defined PriorityClass (`HighestUserDefinablePriority`).
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// The built-in system PriorityClasses: name, value (`IsKnownSystemPriorityClass`).
const SYSTEM_PRIORITY_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

/// `ValidatePriorityClass` / `ValidatePriorityClassUpdate`: `value` an int32, at most
/// [`HIGHEST_USER_DEFINABLE_PRIORITY`] unless it is a known system class (the `system-` prefix is
/// reserved), `globalDefault` a boolean, `preemptionPolicy` `PreemptLowerPriority` or `Never`;
/// on an update `value` and `preemptionPolicy` may not change.
fn priority_class(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let value = obj.get("value").unwrap_or(&Value::Null);
    let n = match value {
        Value::Null => Some(0),
        v => match v.as_i64() {
            Some(n) if i32::try_from(n).is_ok() => Some(n),
            _ => {
                errs.push(invalid("value", v, "must be a 32-bit integer"));
                None
            }
        },
    };
    let global_default = match obj.get("globalDefault") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            errs.push(invalid("globalDefault", v, "must be a boolean"));
            false
        }
    };
    if let Some(n) = n {
        if name.starts_with("system-") {
            let known = SYSTEM_PRIORITY_CLASSES.iter().find(|(s, _)| *s == name);
            let why = match known {
                None => Some(format!("{name:?} is not a known system priority class")),
                Some((_, v)) if *v != n => {
                    Some(format!("value of {name} PriorityClass must be {v}"))
                }
                Some(_) if global_default => Some(format!(
                    "globalDefault of {name} PriorityClass must be false"
                )),
                Some(_) => None,
            };
            if let Some(why) = why {
                errs.push(FieldError {
                    field: "metadata.name".into(),
                    message: format!(
                        "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: {why}"
                    ),
                });
            }
        } else if n > HIGHEST_USER_DEFINABLE_PRIORITY {
            errs.push(FieldError {
                field: "value".into(),
                message: format!(
                    "Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
                ),
            });
        }
    }
    match obj.get("preemptionPolicy") {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) if p == "PreemptLowerPriority" || p == "Never" => {}
        Some(v) => errs.push(FieldError {
            field: "preemptionPolicy".into(),
            message: format!(
                "Unsupported value: {v}: supported values: \"Never\", \"PreemptLowerPriority\""
            ),
        }),
    }
    if let Some(old) = old {
        if obj.get("value") != old.get("value") {
            errs.push(FieldError {
                field: "value".into(),
                message: "Forbidden: may not be changed in an update.".into(),
            });
        }
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy") {
            errs.push(invalid(
                "preemptionPolicy",
                obj.get("preemptionPolicy").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
}

/// The replica counts of a kind: `(JSON pointer, field path)`.
fn counts(res: &Resource) -> &'static [(&'static str, &'static str)] {
    match (res.group, res.kind) {
        ("apps", "Deployment" | "StatefulSet" | "ReplicaSet") | ("", "ReplicationController") => {
            &[("/spec/replicas", "spec.replicas")]
        }
        ("batch", "Job") => &[
            ("/spec/parallelism", "spec.parallelism"),
            ("/spec/completions", "spec.completions"),
        ],
        _ => &[],
    }
}

/// Validate `obj` of `res` about to be stored (`old`: the stored object, on an update).
///
/// # Errors
/// The invalid fields.
pub(crate) fn validate(
    res: &Resource,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), AdmissionError> {
    // Checked when set and, on an update, changed.
    let changed = |ptr: &str| {
        obj.pointer(ptr)
            .filter(|v| old.is_none_or(|o| o.pointer(ptr) != Some(*v)))
    };
    let mut errs = Vec::new();
    if let Some(v) = changed("/metadata/labels") {
        labels(v, &mut errs);
    }
    if let Some(v) = changed("/metadata/annotations") {
        annotations(v, &mut errs);
    }
    for (ptr, field) in counts(res) {
        if let Some(v) = changed(ptr) {
            count(field, v, &mut errs);
        }
    }
    if (res.group, res.kind) == ("scheduling.k8s.io", "PriorityClass") {
        priority_class(obj, old, &mut errs);
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(AdmissionError::new(errs))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> &'static Resource {
        crate::registry::lookup("apps", "v1", "deployments").unwrap()
    }

    fn messages(obj: Value) -> Vec<String> {
        validate(deployment(), &obj, None)
            .err()
            .map(|e| e.causes.iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    }

    fn pc_messages(obj: Value, old: Option<Value>) -> Vec<String> {
        let res = crate::registry::lookup("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
        validate(res, &obj, old.as_ref())
            .err()
            .map(|e| e.causes.iter().map(ToString::to_string).collect())
            .unwrap_or_default()
    }

    #[test]
    fn priority_classes_follow_kube_apiserver() {
        let pc = |name: &str, value: Value| json!({"metadata": {"name": name}, "value": value, "preemptionPolicy": "PreemptLowerPriority"});
        assert!(pc_messages(pc("high", json!(1000)), None).is_empty());
        assert!(pc_messages(pc("system-cluster-critical", json!(2_000_000_000)), None).is_empty());
        assert_eq!(
            pc_messages(pc("high", json!(1_000_000_001)), None),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
        assert_eq!(
            pc_messages(pc("high", json!("1")), None),
            ["value: Invalid value: \"1\": must be a 32-bit integer"]
        );
        assert_eq!(pc_messages(pc("high", json!(1u64 << 40)), None).len(), 1);
        assert!(
            pc_messages(pc("system-mine", json!(1)), None)[0].starts_with(
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved"
            )
        );
        let mut never = pc("high", json!(5));
        never["preemptionPolicy"] = json!("Sometimes");
        assert_eq!(
            pc_messages(never, None),
            [
                "preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"Never\", \"PreemptLowerPriority\""
            ]
        );
        let msgs = pc_messages(pc("high", json!(5)), Some(pc("high", json!(4))));
        assert_eq!(msgs, ["value: Forbidden: may not be changed in an update."]);
        let mut gd = pc("high", json!(5));
        gd["globalDefault"] = json!("yes");
        assert_eq!(
            pc_messages(gd, None),
            ["globalDefault: Invalid value: \"yes\": must be a boolean"]
        );
    }

    #[test]
    fn label_keys_and_values_follow_apimachinery() {
        assert!(messages(json!({"metadata": {"labels": {"app": "web", "example.com/tier": "", "a_b.c-d": "A_1.b-2"}}})).is_empty());
        assert_eq!(
            messages(json!({"metadata": {"labels": {"a": 5}}})),
            ["metadata.labels[a]: Invalid value: 5: must be a string"]
        );
        assert_eq!(
            messages(json!({"metadata": {"labels": ["a"]}})),
            [
                "metadata.labels: Invalid value: [\"a\"]: must be a map of string keys to string values"
            ]
        );
        assert_eq!(
            messages(json!({"metadata": {"labels": {"a": "-x"}}})),
            [
                "metadata.labels: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        assert_eq!(
            messages(json!({"metadata": {"labels": {"a": "x".repeat(64)}}})),
            [format!(
                "metadata.labels: Invalid value: \"{}\": must be no more than 63 characters",
                "x".repeat(64)
            )]
        );
        assert_eq!(
            messages(json!({"metadata": {"labels": {"Example.com/a": "x"}}})),
            [
                "metadata.labels: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert_eq!(
            messages(json!({"metadata": {"labels": {"a/b/c": "x", "/b": "x"}}})).len(),
            2
        );
        assert_eq!(
            messages(json!({"metadata": {"labels": {"": "x"}}})).len(),
            2,
            "empty, and not matching"
        );
    }

    #[test]
    fn annotations_need_qualified_keys_and_fit_256_kib() {
        assert!(
            messages(json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{ anything }", "A": "x"}}}))
                .is_empty()
        );
        assert_eq!(
            messages(json!({"metadata": {"annotations": {"a b": "x", "n": 1}}})).len(),
            2
        );
        let big = "x".repeat(200 * 1024);
        assert_eq!(
            messages(json!({"metadata": {"annotations": {"a": big, "b": big}}})),
            ["metadata.annotations: Too long: must have at most 262144 bytes"]
        );
    }

    #[test]
    fn replica_counts_are_non_negative_int32() {
        assert!(messages(json!({"spec": {"replicas": 3}})).is_empty());
        assert!(messages(json!({"spec": {"replicas": null}})).is_empty());
        assert_eq!(
            messages(json!({"spec": {"replicas": -5}})),
            ["spec.replicas: Invalid value: -5: must be greater than or equal to 0"]
        );
        assert_eq!(
            messages(json!({"spec": {"replicas": 9_223_372_036_854_775_808u64}})),
            ["spec.replicas: Invalid value: 9223372036854775808: must be no more than 2147483647"]
        );
        assert_eq!(
            messages(json!({"spec": {"replicas": "3"}})),
            ["spec.replicas: Invalid value: \"3\": must be a 32-bit integer"]
        );
        assert_eq!(
            messages(json!({"spec": {"replicas": 1.5}})),
            ["spec.replicas: Invalid value: 1.5: must be a 32-bit integer"]
        );
        let job = crate::registry::lookup("batch", "v1", "jobs").unwrap();
        assert_eq!(
            validate(
                job,
                &json!({"spec": {"parallelism": -1, "completions": -1}}),
                None
            )
            .unwrap_err()
            .causes
            .len(),
            2
        );
        let cm = crate::registry::lookup("", "v1", "configmaps").unwrap();
        assert!(
            validate(cm, &json!({"spec": {"replicas": -1}}), None).is_ok(),
            "not a workload"
        );
    }

    #[test]
    fn unchanged_invalid_fields_ratchet_on_update() {
        let old = json!({"metadata": {"labels": {"a": 5}}, "spec": {"replicas": -5}});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!([]);
        assert!(validate(deployment(), &new, Some(&old)).is_ok());
        new["spec"]["replicas"] = json!(-6);
        assert_eq!(
            validate(deployment(), &new, Some(&old))
                .unwrap_err()
                .causes
                .len(),
            1
        );
    }
}
