//! Lowering of each overrider type to evanphx-style operations, computed against the current
//! object (Karmada `pkg/util/overridemanager/*`).

use flotilla_api::policy::{
    CommandArgsOverrider, FieldOverrider, ImageOverrider, LabelAnnotationOverrider,
};
use serde_json::{Map, Value};

use super::gofmt::{sprintf_s, to_json_raw_numbers};
use super::image::ImageRef;
use super::patch::{RawOp, apply_ops};
use super::yaml::{json_to_yaml, yaml_to_json};

/// A failure while building or applying one overrider: the JSON path concerned and why.
pub(crate) type Fail = (String, String);

const POD_SPEC_PREFIX: &str = "/spec";
const POD_TEMPLATE_PREFIX: &str = "/spec/template/spec";

fn workload_prefix(kind: &str) -> Option<&'static str> {
    match kind {
        "Pod" => Some(POD_SPEC_PREFIX),
        "ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet" | "Job" => {
            Some(POD_TEMPLATE_PREFIX)
        }
        _ => None,
    }
}

fn kind_of(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// `imageOverrider`: one `replace` per affected image path.
pub(crate) fn image_ops(obj: &Value, o: &ImageOverrider) -> Result<Vec<RawOp>, Fail> {
    let mut targets: Vec<(String, String)> = Vec::new();
    match &o.predicate {
        Some(pred) => {
            let image = obtain_image_value(obj, &pred.path).map_err(|e| {
                (
                    pred.path.clone(),
                    format!(
                        "failed to obtain imageValue with predicate path({}), error: {e}",
                        pred.path
                    ),
                )
            })?;
            targets.push((pred.path.clone(), image));
        }
        None => {
            let Some(prefix) = workload_prefix(kind_of(obj)) else {
                return Ok(Vec::new());
            };
            let containers_path = format!("{prefix}/containers");
            let containers = match obj.pointer(&containers_path) {
                None | Some(Value::Null) => return Ok(Vec::new()),
                Some(Value::Array(a)) => a,
                Some(_) => {
                    return Err((
                        containers_path,
                        format!(
                            "failed to convert {} from unstructured object",
                            kind_of(obj)
                        ),
                    ));
                }
            };
            for (i, c) in containers.iter().enumerate() {
                let path = format!("{containers_path}/{i}/image");
                let image = match c {
                    Value::Object(m) => match m.get("image") {
                        None | Some(Value::Null) => String::new(),
                        Some(Value::String(s)) => s.clone(),
                        Some(_) => {
                            return Err((
                                path,
                                format!(
                                    "failed to convert {} from unstructured object",
                                    kind_of(obj)
                                ),
                            ));
                        }
                    },
                    Value::Null => String::new(),
                    _ => {
                        return Err((
                            path,
                            format!(
                                "failed to convert {} from unstructured object",
                                kind_of(obj)
                            ),
                        ));
                    }
                };
                targets.push((path, image));
            }
        }
    }
    let mut ops = Vec::with_capacity(targets.len());
    for (path, image) in targets {
        if !path.starts_with('/') {
            return Err((path, "imagePath should be start with / character".into()));
        }
        let new_image = override_image(&image, o).map_err(|e| (path.clone(), e))?;
        ops.push(RawOp::new("replace", path, Value::String(new_image)));
    }
    Ok(ops)
}

/// Karmada's `obtainImageValue`: walks maps and (numeric-indexed) arrays, must end at a string.
fn obtain_image_value(obj: &Value, path: &str) -> Result<String, String> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut cur = obj.as_object().ok_or("object is not a map")?;
    let mut i = 0;
    while i + 1 < segs.len() {
        match cur.get(segs[i]) {
            Some(Value::Object(m)) => cur = m,
            Some(Value::Array(a)) => {
                let idx: i32 = segs[i + 1]
                    .parse()
                    .map_err(|_| format!("path({}) of rawObj's is not number", segs[i + 1]))?;
                let elem = usize::try_from(idx)
                    .ok()
                    .and_then(|u| a.get(u))
                    .ok_or_else(|| format!("index {idx} out of range for path({})", segs[i]))?;
                cur = elem
                    .as_object()
                    .ok_or_else(|| format!("element {idx} of path({}) is not a map", segs[i]))?;
                i += 1;
            }
            _ => {
                return Err(format!(
                    "path({}) of rawObj's type is not map[string]interface{{}} and []interface{{}}",
                    segs[i]
                ));
            }
        }
        i += 1;
    }
    let last = segs[segs.len() - 1];
    match cur.get(last) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(format!("failed to convert path({last}) to string")),
    }
}

/// Applies one image overrider to an image reference (`overrideImage`).
pub(crate) fn override_image(image: &str, o: &ImageOverrider) -> Result<String, String> {
    let mut c = ImageRef::parse(image)
        .map_err(|e| format!("failed to parse image value({image}), error: {e}"))?;
    match o.component.as_str() {
        "Registry" => match o.operator.as_str() {
            "add" => c.hostname.push_str(&o.value),
            "replace" => c.hostname = o.value.clone(),
            "remove" => c.hostname.clear(),
            _ => {}
        },
        "Repository" => match o.operator.as_str() {
            "add" => c.repository.push_str(&o.value),
            "replace" => c.repository = o.value.clone(),
            "remove" => c.repository.clear(),
            _ => {}
        },
        "Tag" => match o.operator.as_str() {
            "add" => {
                let v = format!("{}{}", c.tag_or_digest(), o.value);
                c.set_tag_or_digest(&v);
            }
            "replace" => c.set_tag_or_digest(&o.value),
            "remove" => c.remove_tag_or_digest(),
            _ => {}
        },
        other => return Err(format!("unsupported image component({other})")),
    }
    Ok(c.to_string())
}

/// `commandOverrider` / `argsOverrider` (`target` is `command` or `args`).
pub(crate) fn command_args_ops(
    obj: &Value,
    target: &str,
    o: &CommandArgsOverrider,
) -> Result<Vec<RawOp>, Fail> {
    let Some(prefix) = workload_prefix(kind_of(obj)) else {
        return Ok(Vec::new());
    };
    let containers_path = format!("{prefix}/containers");
    // unstructured.NestedSlice: walk maps; a non-map on the way or a non-slice at the end is an error.
    let mut cur = obj;
    for seg in containers_path.trim_start_matches('/').split('/') {
        match cur {
            Value::Object(m) => match m.get(seg) {
                Some(Value::Null) | None => return Ok(Vec::new()),
                Some(v) => cur = v,
            },
            _ => {
                return Err((
                    containers_path.clone(),
                    format!("failed to retrieves path({containers_path}) from rawObj"),
                ));
            }
        }
    }
    let Value::Array(containers) = cur else {
        return Err((
            containers_path.clone(),
            format!("failed to retrieves path({containers_path}) from rawObj"),
        ));
    };
    let mut ops = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        let path = format!("{containers_path}/{i}/{target}");
        let Value::Object(m) = c else {
            return Err((path, "container is not an object".into()));
        };
        if m.get("name").and_then(Value::as_str) != Some(o.container_name.as_str()) {
            continue;
        }
        match m.get(target) {
            None | Some(Value::Null) => {
                let v = new_command_args(Vec::new(), o);
                ops.push(RawOp::new("add", path, v));
            }
            Some(Value::Array(cur)) => {
                let cur: Vec<String> = cur.iter().map(sprintf_s).collect();
                ops.push(RawOp::new("replace", path, new_command_args(cur, o)));
            }
            Some(_) => return Err((path, format!("{target} is not a list"))),
        }
    }
    Ok(ops)
}

fn new_command_args(mut cur: Vec<String>, o: &CommandArgsOverrider) -> Value {
    match o.operator.as_str() {
        "add" => cur.extend(o.value.iter().cloned()),
        "remove" => cur.retain(|v| !o.value.contains(v)),
        _ => {}
    }
    Value::Array(cur.into_iter().map(Value::String).collect())
}

/// `labelsOverrider` / `annotationsOverrider` (`field` is `labels` or `annotations`). May first
/// create the map (as a separate op set, applied to `obj` in place by the caller's sequencing).
pub(crate) fn label_annotation_ops(
    obj: &Value,
    field: &str,
    o: &LabelAnnotationOverrider,
) -> Vec<RawOp> {
    let mut ops = Vec::new();
    let string_map = |obj: &Value| -> Option<Map<String, Value>> {
        let m = obj.get("metadata")?.get(field)?.as_object()?;
        m.values().all(Value::is_string).then(|| m.clone())
    };
    let existing = string_map(obj);
    let mut created = false;
    for (key, value) in &o.value {
        match o.operator.as_str() {
            "remove" | "replace" if !existing.as_ref().is_some_and(|m| m.contains_key(key)) => {
                continue;
            }
            "add" if existing.is_none() && !created => {
                // SetNestedStringMap(obj, {}, "metadata", field): fails (key skipped) when
                // metadata is not a map.
                match obj.get("metadata") {
                    None => ops.push(RawOp::new(
                        "add",
                        "/metadata",
                        serde_json::json!({ field: {} }),
                    )),
                    Some(Value::Object(_)) => {
                        ops.push(RawOp::new(
                            "add",
                            format!("/metadata/{field}"),
                            Value::Object(Map::new()),
                        ));
                    }
                    Some(_) => continue,
                }
                created = true;
            }
            _ => {}
        }
        let escaped = key.replace('/', "~1");
        ops.push(RawOp::new(
            &o.operator,
            format!("/metadata/{field}/{escaped}"),
            Value::String(value.clone()),
        ));
    }
    ops
}

/// `fieldOverrider`: the replacement string for `fieldPath`, as one op.
pub(crate) fn field_ops(obj: &Value, o: &FieldOverrider) -> Result<Vec<RawOp>, Fail> {
    let fp = &o.field_path;
    let fail = |m: String| (fp.clone(), m);
    if !fp.is_empty() && !fp.starts_with('/') {
        return Err(fail(
            "JSON pointer must be empty or start with a \"/\"".into(),
        ));
    }
    // go-openapi jsonpointer Get: tokens unescaped (~1 → /, ~0 → ~), arrays by decimal index.
    let current = if fp.is_empty() {
        obj
    } else {
        let mut cur = obj;
        for raw in fp[1..].split('/') {
            let tok = raw.replace("~1", "/").replace("~0", "~");
            cur = match cur {
                Value::Object(m) => m
                    .get(&tok)
                    .ok_or_else(|| fail(format!("object has no key {tok:?}")))?,
                Value::Array(a) => tok
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get(i))
                    .ok_or_else(|| fail(format!("index out of bounds or invalid: {tok:?}")))?,
                _ => return Err(fail(format!("invalid token reference {tok:?}"))),
            };
        }
        cur
    };
    let Value::String(data) = current else {
        return Err(fail(format!(
            "Get object's value by overrider's path({fp}) is not string"
        )));
    };
    let new_text = if !o.yaml.is_empty() {
        let mut doc =
            yaml_to_json(data).map_err(|e| fail(format!("failed to convert yaml to json: {e}")))?;
        let ops = sub_ops(&o.yaml);
        apply_ops(&mut doc, &ops)
            .map_err(|(i, e)| (format!("{fp}#yaml[{i}]{}", o.yaml[i].sub_path), e))?;
        json_to_yaml(&doc)
    } else if !o.json.is_empty() {
        if data.is_empty() {
            String::new()
        } else {
            let mut doc: Value = serde_json::from_str(data)
                .map_err(|e| fail(format!("invalid JSON document at {fp}: {e}")))?;
            let ops = sub_ops(&o.json);
            apply_ops(&mut doc, &ops)
                .map_err(|(i, e)| (format!("{fp}#json[{i}]{}", o.json[i].sub_path), e))?;
            to_json_raw_numbers(&doc)
        }
    } else {
        String::new()
    };
    // pointer.Set on a path that resolved: a plain replace (the root "" cannot hold a string).
    if fp.is_empty() {
        return Err(fail("cannot set the whole object to a string".into()));
    }
    Ok(vec![RawOp::new(
        "replace",
        fp.clone(),
        Value::String(new_text),
    )])
}

fn sub_ops(ops: &[flotilla_api::policy::SubPathPatch]) -> Vec<RawOp> {
    ops.iter()
        .map(|p| {
            RawOp::new(
                &p.operator,
                p.sub_path.clone(),
                p.value.clone().unwrap_or(Value::Null),
            )
        })
        .collect()
}
