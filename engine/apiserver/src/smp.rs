//! Strategic merge patch for built-in kinds (apimachinery `pkg/util/strategicpatch`).
//!
//! Table-driven: the list-merge strategy of a field is looked up by its name and context
//! (the `patchStrategy`/`patchMergeKey` tags of `k8s.io/api` types). Supports the directives
//! kubectl's three-way patches use: `$patch` (replace/delete/merge), `$retainKeys`,
//! `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch replaces the whole list (no `patchStrategy`).
    Replace,
    /// Union of primitive values (`metadata.finalizers`).
    MergePrimitive,
    /// Merge elements by this key field.
    MergeKey(&'static str),
}

/// The merge strategy of the list at `path` (field names from the object root) in `kind`.
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    let Some(last) = path.last().map(String::as_str) else {
        return ListStrategy::Replace;
    };
    let parent = path
        .len()
        .checked_sub(2)
        .and_then(|i| path.get(i))
        .map(String::as_str);
    match last {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "imagePullSecrets"
        | "volumes"
        | "resourceClaims"
        | "schedulingGates"
        | "env"
        | "resourceClaimStatuses" => ListStrategy::MergeKey("name"),
        "secrets" if kind == "ServiceAccount" => ListStrategy::MergeKey("name"),
        "ports" if kind == "Service" && path.len() == 2 => ListStrategy::MergeKey("port"),
        "ports" if parent != Some("spec") || path.len() > 2 => {
            ListStrategy::MergeKey("containerPort")
        }
        "volumeMounts" => ListStrategy::MergeKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeKey("devicePath"),
        "conditions" => ListStrategy::MergeKey("type"),
        "addresses" if kind == "Node" => ListStrategy::MergeKey("type"),
        "ownerReferences" if parent == Some("metadata") => ListStrategy::MergeKey("uid"),
        "finalizers" if parent == Some("metadata") => ListStrategy::MergePrimitive,
        "podCIDRs" if kind == "Node" => ListStrategy::MergePrimitive,
        "hostAliases" | "podIPs" | "hostIPs" => ListStrategy::MergeKey("ip"),
        "topologySpreadConstraints" => ListStrategy::MergeKey("topologyKey"),
        _ => ListStrategy::Replace,
    }
}

/// Apply a strategic merge patch to `original`.
///
/// # Errors
/// A 400/422 for malformed patches (non-object patch, missing merge key, bad directive).
pub fn apply(kind: &str, original: &Value, patch: &Value) -> Result<Value, ApiError> {
    let (Value::Object(orig), Value::Object(p)) = (original, patch) else {
        return Err(ApiError::bad_request(
            "strategic merge patch must be a JSON object",
        ));
    };
    let mut path = Vec::new();
    match merge_map(kind, &mut path, orig, p, Mode::Strategic)? {
        Some(m) => Ok(Value::Object(m)),
        None => Ok(Value::Object(Map::new())),
    }
}

/// Deep-merge `config` into `live` (maps merge, keyed lists merge by key, other lists replace);
/// used by server-side apply. For non-strategic kinds every list is atomic.
pub fn merge_config(
    kind: &str,
    strategic: bool,
    live: &Value,
    config: &Value,
) -> Result<Value, ApiError> {
    let (Value::Object(l), Value::Object(c)) = (live, config) else {
        return Ok(config.clone());
    };
    let mode = if strategic {
        Mode::Strategic
    } else {
        Mode::Atomic
    };
    let mut path = Vec::new();
    Ok(Value::Object(
        merge_map(kind, &mut path, l, c, mode)?.unwrap_or_default(),
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Strategic,
    Atomic,
}

fn strategy(kind: &str, path: &[String], mode: Mode) -> ListStrategy {
    match mode {
        Mode::Strategic => list_strategy(kind, path),
        Mode::Atomic => ListStrategy::Replace,
    }
}

/// Merge a patch map into an original map; `None` means "delete this map".
fn merge_map(
    kind: &str,
    path: &mut Vec<String>,
    orig: &Map<String, Value>,
    patch: &Map<String, Value>,
    mode: Mode,
) -> Result<Option<Map<String, Value>>, ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(None),
        Some("replace") => {
            let empty = Map::new();
            let mut stripped = patch.clone();
            stripped.remove("$patch");
            return merge_map(kind, path, &empty, &stripped, mode);
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other}"
            )));
        }
    }
    let mut out = orig.clone();
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    for (key, pv) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            if let Value::Array(order) = pv {
                orders.push((field.to_owned(), order.clone()));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (out.get_mut(field), pv) {
                list.retain(|v| !del.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        path.push(key.clone());
        let merged = match (orig.get(key), pv) {
            (_, Value::Null) => None,
            (Some(Value::Object(o)), Value::Object(p)) => {
                merge_map(kind, path, o, p, mode)?.map(Value::Object)
            }
            (None | Some(Value::Null), Value::Object(p)) => {
                merge_map(kind, path, &Map::new(), p, mode)?.map(Value::Object)
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                Some(Value::Array(merge_list(kind, path, o, p, mode)?))
            }
            (_, Value::Array(p)) => Some(Value::Array(merge_list(kind, path, &[], p, mode)?)),
            (_, other) => Some(other.clone()),
        };
        path.pop();
        match merged {
            Some(v) => {
                out.insert(key.clone(), v);
            }
            None => {
                out.remove(key);
            }
        }
    }
    for (field, order) in orders {
        path.push(field.clone());
        let strat = strategy(kind, path, mode);
        path.pop();
        if let Some(Value::Array(list)) = out.get_mut(&field) {
            reorder(list, &order, strat);
        }
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(Some(out))
}

fn key_of<'a>(item: &'a Value, key: &str) -> Option<&'a Value> {
    item.as_object().and_then(|m| m.get(key))
}

fn merge_list(
    kind: &str,
    path: &mut Vec<String>,
    orig: &[Value],
    patch: &[Value],
    mode: Mode,
) -> Result<Vec<Value>, ApiError> {
    let strat = strategy(kind, path, mode);
    let replace_all = patch
        .iter()
        .any(|v| key_of(v, "$patch").and_then(Value::as_str) == Some("replace"));
    let (base, strat): (&[Value], ListStrategy) = if replace_all {
        (&[], strat)
    } else {
        (orig, strat)
    };
    let patch: Vec<&Value> = patch
        .iter()
        .filter(|v| key_of(v, "$patch").and_then(Value::as_str) != Some("replace"))
        .collect();
    match strat {
        ListStrategy::Replace => {
            let mut out = Vec::with_capacity(patch.len());
            for item in patch {
                out.push(clean(kind, path, item, mode)?);
            }
            Ok(out)
        }
        ListStrategy::MergePrimitive => {
            let mut out = base.to_vec();
            for item in patch {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            Ok(out)
        }
        ListStrategy::MergeKey(key) => {
            let mut out = base.to_vec();
            for item in patch.iter().copied() {
                let Value::Object(pm) = item else {
                    // Not a keyed element: fall back to replacing the list.
                    let mut all = Vec::new();
                    for item in &patch {
                        all.push(clean(kind, path, item, mode)?);
                    }
                    return Ok(all);
                };
                let Some(k) = pm.get(key) else {
                    return Err(ApiError::bad_request(format!(
                        "map: {pm:?} does not contain declared merge key: {key}"
                    )));
                };
                let pos = out.iter().position(|o| key_of(o, key) == Some(k));
                if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(i) = pos {
                        out.remove(i);
                    }
                    continue;
                }
                match pos {
                    Some(i) => {
                        let merged = match &out[i] {
                            Value::Object(om) => merge_map(kind, path, om, pm, mode)?,
                            _ => merge_map(kind, path, &Map::new(), pm, mode)?,
                        };
                        match merged {
                            Some(m) => out[i] = Value::Object(m),
                            None => {
                                out.remove(i);
                            }
                        }
                    }
                    None => {
                        if let Some(m) = merge_map(kind, path, &Map::new(), pm, mode)? {
                            out.push(Value::Object(m));
                        }
                    }
                }
            }
            Ok(out)
        }
    }
}

/// A patch value with its directives resolved against nothing.
fn clean(kind: &str, path: &mut Vec<String>, v: &Value, mode: Mode) -> Result<Value, ApiError> {
    Ok(match v {
        Value::Object(m) => {
            Value::Object(merge_map(kind, path, &Map::new(), m, mode)?.unwrap_or_default())
        }
        Value::Array(a) => Value::Array(merge_list(kind, path, &[], a, mode)?),
        other => other.clone(),
    })
}

fn reorder(list: &mut Vec<Value>, order: &[Value], strat: ListStrategy) {
    let rank = |item: &Value| -> Option<usize> {
        order.iter().position(|o| match strat {
            ListStrategy::MergeKey(k) => key_of(o, k).is_some() && key_of(o, k) == key_of(item, k),
            _ => o == item,
        })
    };
    let mut ranked: Vec<(Option<usize>, usize, Value)> = list
        .drain(..)
        .enumerate()
        .map(|(i, v)| (rank(&v), i, v))
        .collect();
    // Ordered items first, in the given order; the rest keep their relative order after them.
    ranked.sort_by_key(|(r, i, _)| (r.is_none(), r.unwrap_or(0), *i));
    list.extend(ranked.into_iter().map(|(_, _, v)| v));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_env_by_name() {
        let orig = json!({"spec":{"template":{"spec":{"containers":[
            {"name":"a","image":"a:1","env":[{"name":"X","value":"1"}]},
            {"name":"b","image":"b:1"}]}}}});
        let patch = json!({"spec":{"template":{"spec":{"containers":[
            {"name":"a","image":"a:2","env":[{"name":"Y","value":"2"}]}]}}}});
        let out = apply("Deployment", &orig, &patch).unwrap();
        let cs = &out["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[0]["image"], "a:2");
        assert_eq!(cs[0]["env"].as_array().unwrap().len(), 2);
        assert_eq!(cs[1]["name"], "b");
    }

    #[test]
    fn delete_directive_removes_keyed_element_and_null_removes_field() {
        let orig = json!({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"ports":[{"port":80},{"port":443}]}});
        let patch = json!({"metadata":{"labels":{"a":null}},"spec":{"ports":[{"port":80,"$patch":"delete"}]}});
        let out = apply("Service", &orig, &patch).unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b":"2"}));
        assert_eq!(out["spec"]["ports"], json!([{"port":443}]));
    }

    #[test]
    fn set_element_order_and_retain_keys_are_honoured() {
        let orig = json!({"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}},
            "template":{"spec":{"containers":[{"name":"a"},{"name":"b"}]}}}});
        let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":null},
            "template":{"spec":{"$setElementOrder/containers":[{"name":"b"},{"name":"a"}]}}}});
        let out = apply("Deployment", &orig, &patch).unwrap();
        assert_eq!(out["spec"]["strategy"], json!({"type":"Recreate"}));
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name":"b"},{"name":"a"}])
        );
    }

    #[test]
    fn finalizers_union_and_delete_from_primitive_list() {
        let orig = json!({"metadata":{"finalizers":["a","b"]}});
        let out = apply(
            "ConfigMap",
            &orig,
            &json!({"metadata":{"finalizers":["c"],"$deleteFromPrimitiveList/finalizers":["a"]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
    }
}
