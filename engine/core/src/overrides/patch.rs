//! An RFC 6902 applier with evanphx/json-patch v5 semantics (Karmada's), which also lowers each
//! operation to a canonical [`json_patch::PatchOperation`] that the `json-patch` crate applies
//! identically (array indices resolved, Go `Atoi` quirks and negative indices removed).

use json_patch::jsonptr::{self, PointerBuf};
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::Value;

/// One operation as Karmada builds it (`overrideOption`): op name, raw path, value.
#[derive(Debug, Clone)]
pub(crate) struct RawOp {
    pub op: String,
    pub path: String,
    pub value: Value,
}

impl RawOp {
    pub(crate) fn new(op: &str, path: impl Into<String>, value: Value) -> Self {
        RawOp {
            op: op.to_string(),
            path: path.into(),
            value,
        }
    }
}

/// Go's `strconv.Atoi`: optional sign, ASCII digits, no overflow.
fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// evanphx `decodePatchKey`: one left-to-right pass replacing `~1` then `~0`; other `~x` kept.
fn decode_key(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut chars = k.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.peek() {
                Some('1') => {
                    chars.next();
                    out.push('/');
                    continue;
                }
                Some('0') => {
                    chars.next();
                    out.push('~');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// Splits a path the way evanphx `findObject` does: `None` for the root (`""`), otherwise the
/// decoded parent tokens and the decoded final key. The first segment is always dropped, so a
/// path not starting with `/` silently loses its first segment (Go behaviour).
fn split_path(path: &str) -> Result<Option<(Vec<String>, String)>, String> {
    if path.is_empty() {
        return Ok(None);
    }
    let segs: Vec<&str> = path.split('/').collect();
    if segs.len() < 2 {
        return Err(format!("doc is missing path: {path:?}"));
    }
    let parents = segs[1..segs.len() - 1]
        .iter()
        .map(|s| decode_key(s))
        .collect();
    let key = decode_key(segs[segs.len() - 1]);
    Ok(Some((parents, key)))
}

/// Resolves an array index for get/set/remove (negative indices count from the end).
fn array_index(key: &str, len: usize) -> Result<usize, String> {
    let idx = atoi(key).ok_or_else(|| format!("invalid array index {key:?}"))?;
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let resolved = if idx < 0 { idx + len_i } else { idx };
    if resolved < 0 || resolved >= len_i {
        return Err(format!("Unable to access invalid index: {idx}"));
    }
    usize::try_from(resolved).map_err(|_| format!("Unable to access invalid index: {idx}"))
}

/// Walks the parent tokens, returning the container and the canonical tokens walked.
fn find_parent<'a>(
    doc: &'a mut Value,
    parents: &[String],
    path: &str,
) -> Result<(&'a mut Value, Vec<String>), String> {
    let mut cur = doc;
    let mut canon = Vec::with_capacity(parents.len() + 1);
    for part in parents {
        let next = match cur {
            Value::Object(m) => {
                canon.push(part.clone());
                m.get_mut(part.as_str())
            }
            Value::Array(a) => {
                let i = array_index(part, a.len())
                    .map_err(|_| format!("doc is missing path: {path:?}"))?;
                canon.push(i.to_string());
                a.get_mut(i)
            }
            _ => None,
        };
        match next {
            Some(v @ (Value::Object(_) | Value::Array(_))) => cur = v,
            _ => return Err(format!("doc is missing path: {path:?}")),
        }
    }
    Ok((cur, canon))
}

fn pointer(tokens: Vec<String>) -> PointerBuf {
    PointerBuf::from_tokens(tokens.into_iter().map(jsonptr::Token::new))
}

/// Applies `op` to `doc` with evanphx v5 semantics and returns the equivalent canonical
/// operation. On error `doc` is unchanged.
pub(crate) fn apply_op(doc: &mut Value, op: &RawOp) -> Result<PatchOperation, String> {
    let kind = op.op.as_str();
    if !matches!(kind, "add" | "remove" | "replace") {
        return Err(format!("Unexpected kind: {kind}"));
    }
    let Some((parents, key)) = split_path(&op.path)? else {
        // Root: add/replace swap the whole document (object or array only); remove targets the
        // key "" of the root object.
        return match kind {
            "add" | "replace" => {
                if !matches!(op.value, Value::Object(_) | Value::Array(_)) {
                    return Err(format!("{kind} operation value must be object or array"));
                }
                *doc = op.value.clone();
                let path = PointerBuf::root();
                Ok(if kind == "add" {
                    PatchOperation::Add(AddOperation {
                        path,
                        value: op.value.clone(),
                    })
                } else {
                    PatchOperation::Replace(ReplaceOperation {
                        path,
                        value: op.value.clone(),
                    })
                })
            }
            _ => remove_at(doc, &[], "", &op.path),
        };
    };
    match kind {
        "remove" => remove_at(doc, &parents, &key, &op.path),
        "add" => {
            let (parent, mut canon) = find_parent(doc, &parents, &op.path)
                .map_err(|e| format!("add operation does not apply: {e}"))?;
            match parent {
                Value::Object(m) => {
                    m.insert(key.clone(), op.value.clone());
                    canon.push(key);
                }
                Value::Array(a) => {
                    if key == "-" {
                        a.push(op.value.clone());
                        canon.push("-".to_string());
                    } else {
                        let idx = atoi(&key).ok_or_else(|| {
                            format!("value was not a proper array index: '{key}'")
                        })?;
                        let sz = i64::try_from(a.len() + 1).unwrap_or(i64::MAX);
                        let resolved = if idx < 0 { idx + sz } else { idx };
                        if idx >= sz || resolved < 0 {
                            return Err(format!("Unable to access invalid index: {idx}"));
                        }
                        let i = usize::try_from(resolved)
                            .map_err(|_| format!("Unable to access invalid index: {idx}"))?;
                        a.insert(i, op.value.clone());
                        canon.push(i.to_string());
                    }
                }
                _ => {
                    return Err(format!(
                        "add operation does not apply: doc is missing path: {:?}",
                        op.path
                    ));
                }
            }
            Ok(PatchOperation::Add(AddOperation {
                path: pointer(canon),
                value: op.value.clone(),
            }))
        }
        _ => {
            let missing = || {
                format!(
                    "replace operation does not apply: doc is missing key: {}",
                    op.path
                )
            };
            let (parent, mut canon) = find_parent(doc, &parents, &op.path)
                .map_err(|e| format!("replace operation does not apply: {e}"))?;
            match parent {
                Value::Object(m) => {
                    let slot = m.get_mut(key.as_str()).ok_or_else(missing)?;
                    *slot = op.value.clone();
                    canon.push(key);
                }
                Value::Array(a) => {
                    let i = array_index(&key, a.len()).map_err(|_| missing())?;
                    a[i] = op.value.clone();
                    canon.push(i.to_string());
                }
                _ => return Err(missing()),
            }
            Ok(PatchOperation::Replace(ReplaceOperation {
                path: pointer(canon),
                value: op.value.clone(),
            }))
        }
    }
}

fn remove_at(
    doc: &mut Value,
    parents: &[String],
    key: &str,
    path: &str,
) -> Result<PatchOperation, String> {
    let (parent, mut canon) = find_parent(doc, parents, path)
        .map_err(|e| format!("remove operation does not apply: {e}"))?;
    match parent {
        Value::Object(m) => {
            // Order-preserving removal (evanphx keeps key order).
            m.shift_remove(key)
                .ok_or_else(|| format!("unable to remove nonexistent key: {key}"))?;
            canon.push(key.to_string());
        }
        Value::Array(a) => {
            let i = array_index(key, a.len())
                .map_err(|e| format!("error in remove for path: '{path}': {e}"))?;
            a.remove(i);
            canon.push(i.to_string());
        }
        _ => {
            return Err(format!(
                "remove operation does not apply: doc is missing path: {path:?}"
            ));
        }
    }
    Ok(PatchOperation::Remove(RemoveOperation {
        path: pointer(canon),
    }))
}

/// Applies `ops` as one patch (all or nothing). Returns the canonical operations, or the index of
/// the failing operation with the reason.
pub(crate) fn apply_ops(
    doc: &mut Value,
    ops: &[RawOp],
) -> Result<Vec<PatchOperation>, (usize, String)> {
    let mut work = doc.clone();
    let mut out = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        out.push(apply_op(&mut work, op).map_err(|e| (i, e))?);
    }
    *doc = work;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, op: &str, path: &str, value: Value) -> Result<(Value, Value), String> {
        let original = doc.clone();
        let mut doc = doc;
        let canon = apply_op(&mut doc, &RawOp::new(op, path, value))?;
        let mut via_crate = original;
        json_patch::patch_unsafe(&mut via_crate, &[canon]).map_err(|e| e.to_string())?;
        assert_eq!(via_crate, doc, "canonical op must reproduce");
        Ok((doc, Value::Null))
    }

    #[test]
    fn negative_and_go_indices() {
        let (d, _) = run(json!({"a": [1, 2, 3]}), "remove", "/a/-1", Value::Null).expect("ok");
        assert_eq!(d, json!({"a": [1, 2]}));
        let (d, _) = run(json!({"a": [1, 2, 3]}), "add", "/a/-1", json!(9)).expect("ok");
        assert_eq!(d, json!({"a": [1, 2, 3, 9]}));
        let (d, _) = run(json!({"a": [1, 2, 3]}), "replace", "/a/+01", json!(9)).expect("ok");
        assert_eq!(d, json!({"a": [1, 9, 3]}));
        assert!(run(json!({"a": [1]}), "replace", "/a/1", json!(9)).is_err());
        assert!(run(json!({"a": [1]}), "add", "/a/3", json!(9)).is_err());
        assert!(run(json!({"a": [1]}), "remove", "/a/-", Value::Null).is_err());
    }

    #[test]
    fn objects() {
        assert!(run(json!({"a": {}}), "replace", "/a/b", json!(1)).is_err());
        assert!(run(json!({"a": {}}), "remove", "/a/b", Value::Null).is_err());
        assert!(run(json!({}), "add", "/a/b", json!(1)).is_err());
        let (d, _) = run(json!({"a/b": 1}), "replace", "/a~1b", json!(2)).expect("ok");
        assert_eq!(d, json!({"a/b": 2}));
        // Go drops the first segment of a path that does not start with '/'.
        let (d, _) = run(json!({"x": 1}), "replace", "spec/x", json!(2)).expect("ok");
        assert_eq!(d, json!({"x": 2}));
        assert!(run(json!({"x": 1}), "move", "/x", json!(2)).is_err());
    }
}
