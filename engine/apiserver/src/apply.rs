//! Server-side apply, minimal viable semantics (research note §4.2 "Level 1").
//!
//! Each applier's owned fields are kept in `metadata.managedFields` in the real `FieldsV1`
//! format. Applying a configuration:
//! 1. computes the set of fields the configuration sets (keyed list items become `k:{..}`),
//! 2. reports a conflict for every field another manager owns with a different value
//!    (unless `force`, which transfers ownership),
//! 3. removes fields this manager applied before but no longer sets and nobody else owns,
//! 4. deep-merges the configuration into the live object.
//!
//! Non-apply writes do not record `Update` entries; only appliers own fields.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::smp::{self, ListStrategy};

/// A field path in `FieldsV1` segments (`f:spec`, `k:{"name":"a"}`, `v:"x"`, `.`).
pub type FieldPath = Vec<String>;

/// A set of owned leaf fields.
pub type FieldSet = BTreeSet<FieldPath>;

/// Metadata fields that nobody owns.
const UNOWNED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "selfLink",
];

/// The fields a configuration sets.
pub fn fields_of(kind: &str, strategic: bool, config: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    let mut names = Vec::new();
    let mut prefix = Vec::new();
    if let Value::Object(map) = config {
        for (k, v) in map {
            if k == "apiVersion" || k == "kind" {
                continue;
            }
            if k == "metadata" {
                if let Value::Object(meta) = v {
                    for (mk, mv) in meta {
                        if UNOWNED_META.contains(&mk.as_str()) {
                            continue;
                        }
                        names.extend(["metadata".to_owned(), mk.clone()]);
                        prefix.extend(["f:metadata".to_owned(), format!("f:{mk}")]);
                        walk(kind, strategic, mv, &mut names, &mut prefix, &mut set);
                        names.truncate(0);
                        prefix.truncate(0);
                    }
                }
                continue;
            }
            names.push(k.clone());
            prefix.push(format!("f:{k}"));
            walk(kind, strategic, v, &mut names, &mut prefix, &mut set);
            names.pop();
            prefix.pop();
        }
    }
    set
}

fn walk(
    kind: &str,
    strategic: bool,
    v: &Value,
    names: &mut Vec<String>,
    prefix: &mut FieldPath,
    set: &mut FieldSet,
) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                names.push(k.clone());
                prefix.push(format!("f:{k}"));
                walk(kind, strategic, child, names, prefix, set);
                names.pop();
                prefix.pop();
            }
        }
        Value::Array(items) if strategic && !items.is_empty() => {
            match smp::list_strategy(kind, names) {
                ListStrategy::MergeKey(key) if items.iter().all(|i| i.get(key).is_some()) => {
                    for item in items {
                        let mut k = Map::new();
                        if let Some(kv) = item.get(key) {
                            k.insert(key.to_owned(), kv.clone());
                        }
                        prefix.push(format!("k:{}", Value::Object(k)));
                        prefix.push(".".to_owned());
                        set.insert(prefix.clone());
                        prefix.pop();
                        walk(kind, strategic, item, names, prefix, set);
                        prefix.pop();
                    }
                }
                ListStrategy::MergePrimitive => {
                    for item in items {
                        prefix.push(format!("v:{item}"));
                        set.insert(prefix.clone());
                        prefix.pop();
                    }
                }
                _ => {
                    set.insert(prefix.clone());
                }
            }
        }
        _ => {
            set.insert(prefix.clone());
        }
    }
}

/// Render a field set as a `FieldsV1` tree.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for seg in path {
            let next = cur
                .entry(seg.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            match next {
                Value::Object(m) => cur = m,
                _ => break,
            }
        }
    }
    Value::Object(root)
}

/// Parse a `FieldsV1` tree into its leaf set.
pub fn from_fields_v1(tree: &Value) -> FieldSet {
    fn go(v: &Value, prefix: &mut FieldPath, set: &mut FieldSet) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    prefix.push(k.clone());
                    go(child, prefix, set);
                    prefix.pop();
                }
            }
            _ => {
                if !prefix.is_empty() {
                    set.insert(prefix.clone());
                }
            }
        }
    }
    let mut set = FieldSet::new();
    go(tree, &mut Vec::new(), &mut set);
    set
}

fn item_matches(item: &Value, seg: &str) -> bool {
    if let Some(k) = seg.strip_prefix("k:") {
        match serde_json::from_str::<Value>(k) {
            Ok(Value::Object(keys)) => keys.iter().all(|(kk, kv)| item.get(kk) == Some(kv)),
            _ => false,
        }
    } else if let Some(v) = seg.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
    } else {
        false
    }
}

/// The value at a field path.
pub fn get_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path {
        if seg == "." {
            continue;
        }
        cur = if let Some(f) = seg.strip_prefix("f:") {
            cur.get(f)?
        } else {
            cur.as_array()?.iter().find(|i| item_matches(i, seg))?
        };
    }
    Some(cur)
}

/// Remove the field at a path (a `.`-terminated or `v:` path removes the list item).
pub fn remove_at(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let (target, parents) = if last == "." {
        match parents.split_last() {
            Some((item, rest)) => (item, rest),
            None => return,
        }
    } else {
        (last, parents)
    };
    let mut cur = obj;
    for seg in parents {
        let next = if let Some(f) = seg.strip_prefix("f:") {
            cur.get_mut(f)
        } else if seg == "." {
            Some(cur)
        } else {
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|i| item_matches(i, seg)))
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = target.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(a) = cur.as_array_mut() {
        a.retain(|i| !item_matches(i, target));
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
pub struct Managed {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource (`status`) or empty.
    pub subresource: String,
    /// The original entry (time, apiVersion, ...).
    pub raw: Value,
    /// The owned fields.
    pub set: FieldSet,
}

/// Parse `metadata.managedFields`.
pub fn managed_of(obj: &Value) -> Vec<Managed> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| Managed {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    set: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                    raw: e.clone(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Inputs of one apply.
#[derive(Debug)]
pub struct ApplyRequest<'a> {
    /// Kind (for list strategies).
    pub kind: &'a str,
    /// Whether the kind is a built-in with strategic list semantics.
    pub strategic: bool,
    /// The applier.
    pub manager: &'a str,
    /// Take ownership on conflict.
    pub force: bool,
    /// `status` when applying the status subresource.
    pub subresource: &'a str,
    /// The object's apiVersion.
    pub api_version: &'a str,
    /// Now, for the entry's time.
    pub now: &'a str,
}

/// Apply `config` to `live` (the empty object on create-on-apply).
///
/// # Errors
/// A 409 Conflict listing `FieldManagerConflict` causes, unless `force`.
pub fn apply(req: &ApplyRequest<'_>, live: &Value, config: &Value) -> Result<Value, ApiError> {
    let new_set = fields_of(req.kind, req.strategic, config);
    let mut managed = managed_of(live);
    let mine = |m: &Managed| {
        m.manager == req.manager && m.operation == "Apply" && m.subresource == req.subresource
    };
    let mut causes = Vec::new();
    let mut taken: Vec<(usize, FieldPath)> = Vec::new();
    for (i, m) in managed.iter().enumerate() {
        if mine(m) {
            continue;
        }
        for p in new_set.intersection(&m.set) {
            if get_at(live, p) != get_at(config, p) {
                causes.push(json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with \"{}\"", m.manager),
                    "field": render_path(p),
                }));
                taken.push((i, p.clone()));
            }
        }
    }
    if !causes.is_empty() && !req.force {
        let n = causes.len();
        let msg = format!(
            "Apply failed with {n} conflict{}: {}",
            if n == 1 { "" } else { "s" },
            causes
                .iter()
                .filter_map(|c| c["message"]
                    .as_str()
                    .map(|m| format!("{m}: {}", c["field"].as_str().unwrap_or_default())))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Err(ApiError::new(409, "Conflict", msg).with_details(json!({"causes": causes})));
    }
    for (i, p) in taken {
        if let Some(m) = managed.get_mut(i) {
            m.set.remove(&p);
        }
    }
    // Fields this manager applied before and no longer does, and nobody else owns, go. The
    // live object and the configuration are copied only when something must be taken out of
    // them (merge_config builds the result from borrowed trees).
    let dropped: Vec<&FieldPath> = managed
        .iter()
        .find(|m| mine(m))
        .into_iter()
        .flat_map(|m| m.set.difference(&new_set))
        .filter(|p| !managed.iter().any(|m| !mine(m) && m.set.contains(*p)))
        .collect();
    let live = if dropped.is_empty() {
        Cow::Borrowed(live)
    } else {
        let mut pruned = live.clone();
        for p in dropped {
            remove_at(&mut pruned, p);
        }
        Cow::Owned(pruned)
    };
    let server_meta = |c: &Value| {
        c.get("metadata")
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key("managedFields") || m.contains_key("resourceVersion"))
    };
    let config = if server_meta(config) {
        let mut c = config.clone();
        if let Some(meta) = c.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
        }
        Cow::Owned(c)
    } else {
        Cow::Borrowed(config)
    };
    let mut result = smp::merge_config(req.kind, req.strategic, &live, &config)?;
    // Record the new ownership.
    managed.retain(|m| !mine(m));
    let mut entries: Vec<Value> = managed
        .into_iter()
        .filter(|m| !m.set.is_empty())
        .map(|m| {
            let mut raw = m.raw;
            raw["fieldsV1"] = to_fields_v1(&m.set);
            raw
        })
        .collect();
    if !new_set.is_empty() {
        let mut entry = json!({
            "manager": req.manager,
            "operation": "Apply",
            "apiVersion": req.api_version,
            "time": req.now,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&new_set),
        });
        if !req.subresource.is_empty() {
            entry["subresource"] = json!(req.subresource);
        }
        entries.push(entry);
    }
    if let Some(meta) = result.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
    Ok(result)
}

/// `.spec.replicas`-style rendering of a field path.
fn render_path(p: &[String]) -> String {
    let mut out = String::new();
    for seg in p {
        if let Some(f) = seg.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if seg != "." {
            out.push('[');
            out.push_str(seg.get(2..).unwrap_or_default());
            out.push(']');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(manager: &'a str, force: bool) -> ApplyRequest<'a> {
        ApplyRequest {
            kind: "Deployment",
            strategic: true,
            manager,
            force,
            subresource: "",
            api_version: "apps/v1",
            now: "t",
        }
    }

    #[test]
    fn second_manager_changing_an_owned_field_conflicts_unless_forced() {
        let a = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w"},"spec":{"replicas":1}});
        let live = apply(&req("a", false), &json!({"metadata":{"name":"w"}}), &a).unwrap();
        let b = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"w"},"spec":{"replicas":2}});
        let err = apply(&req("b", false), &live, &b).unwrap_err();
        assert_eq!(err.code, 409);
        let forced = apply(&req("b", true), &live, &b).unwrap();
        assert_eq!(forced["spec"]["replicas"], 2);
        let owners = managed_of(&forced);
        assert_eq!(owners.len(), 1, "ownership moved to b: {owners:?}");
    }

    #[test]
    fn fields_dropped_from_the_config_are_removed() {
        let cfg1 = json!({"metadata":{"name":"w","labels":{"a":"1","b":"2"}},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"x"},{"name":"d","image":"y"}]}}}});
        let live = apply(&req("a", false), &json!({"metadata":{"name":"w"}}), &cfg1).unwrap();
        let cfg2 = json!({"metadata":{"name":"w","labels":{"a":"1"}},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"x"}]}}}});
        let out = apply(&req("a", false), &live, &cfg2).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"a":"1"}));
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}
