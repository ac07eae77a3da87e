//! The `scale` subresource: an `autoscaling/v1 Scale` view of a workload's replica count.
//!
//! kube-apiserver serves `/scale` on Deployments, StatefulSets and ReplicaSets, and on custom
//! resources whose CRD version declares `subresources.scale`. Reading it answers a `Scale`
//! (`spec.replicas`, `status.replicas`, `status.selector` as a label-selector string); writing
//! it changes only the parent's replica count. The Scale carries the parent's `resourceVersion`,
//! so a write with a stale one is a 409 like any other update.

use std::collections::HashMap;
use std::sync::RwLock;

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::registry::Resource;

/// Where a resource keeps what its Scale shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `.spec.replicas`: the replica count a Scale write changes.
    pub spec_replicas: Vec<String>,
    /// `.status.replicas`.
    pub status_replicas: Vec<String>,
    /// `.status.selector` for CRDs: a label selector in string form. `None` for the built-in
    /// kinds, whose selector is rendered from `.spec.selector`, and for CRDs without one.
    pub label_selector: Option<Vec<String>>,
    /// Whether the selector is the structured `.spec.selector` of the built-in workloads.
    structured_selector: bool,
}

/// CRD versions that declared `subresources.scale`, by group, version and plural.
type PathsByResource = HashMap<(String, String, String), Paths>;
static CRD_SCALE: RwLock<Option<PathsByResource>> = RwLock::new(None);

/// Split a CRD JSON path (`.spec.replicas`) into field names; `None` unless it is a plain
/// dotted path, as the CRD validation requires for scale paths.
fn split_path(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix('.')?;
    let parts: Vec<String> = rest.split('.').map(str::to_owned).collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || p.contains(['[', ']', '*']))
    {
        return None;
    }
    Some(parts)
}

/// Record (or forget) the scale subresource of one CRD version, from its `subresources.scale`.
pub(crate) fn register_crd_version(
    group: &str,
    version: &str,
    plural: &str,
    scale: Option<&Value>,
) {
    let paths = scale.and_then(|s| {
        let spec = split_path(s.get("specReplicasPath")?.as_str()?)?;
        let status = split_path(s.get("statusReplicasPath")?.as_str()?)?;
        let selector = s
            .get("labelSelectorPath")
            .and_then(Value::as_str)
            .and_then(split_path);
        Some(Paths {
            spec_replicas: spec,
            status_replicas: status,
            label_selector: selector,
            structured_selector: false,
        })
    });
    let Ok(mut map) = CRD_SCALE.write() else {
        return;
    };
    let map = map.get_or_insert_with(HashMap::new);
    let key = (group.to_owned(), version.to_owned(), plural.to_owned());
    match paths {
        Some(p) => {
            map.insert(key, p);
        }
        None => {
            map.remove(&key);
        }
    }
}

/// The scale paths of `res`, if it serves `/scale`.
pub fn paths(res: &Resource) -> Option<Paths> {
    let builtin = |status: &str| Paths {
        spec_replicas: vec!["spec".into(), "replicas".into()],
        status_replicas: vec!["status".into(), status.into()],
        label_selector: None,
        structured_selector: true,
    };
    match (res.group, res.version, res.plural) {
        ("apps", "v1", "deployments" | "statefulsets" | "replicasets") => Some(builtin("replicas")),
        ("", "v1", "replicationcontrollers") => Some(builtin("replicas")),
        _ => CRD_SCALE
            .read()
            .ok()?
            .as_ref()?
            .get(&(
                res.group.to_owned(),
                res.version.to_owned(),
                res.plural.to_owned(),
            ))
            .cloned(),
    }
}

/// The discovery entry of `res`'s `/scale`, if it serves one (kubectl scale looks for it).
pub fn discovery_entry(res: &Resource) -> Option<Value> {
    paths(res)?;
    Some(json!({
        "name": format!("{}/scale", res.plural),
        "singularName": "",
        "namespaced": res.namespaced,
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
        "verbs": ["get", "patch", "update"],
    }))
}

fn at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.get(k))
}

/// A label selector (`matchLabels`, `matchExpressions`) as kube's `LabelSelectorAsSelector`
/// prints it: requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`.
pub fn selector_string(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for e in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("Exists") => key.to_owned(),
            Some("DoesNotExist") => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key.to_owned(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// The `autoscaling/v1 Scale` of `parent`.
pub fn to_scale(paths: &Paths, parent: &Value) -> Value {
    let meta = parent.get("metadata").cloned().unwrap_or(json!({}));
    let mut scale_meta = Map::new();
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(f) {
            scale_meta.insert(f.into(), v.clone());
        }
    }
    let int = |p: &[String]| at(parent, p).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": int(&paths.status_replicas)});
    let selector = if paths.structured_selector {
        parent
            .pointer("/spec/selector")
            .map(selector_string)
            .filter(|s| !s.is_empty())
    } else {
        paths
            .label_selector
            .as_deref()
            .and_then(|p| at(parent, p))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if let Some(s) = selector {
        status["selector"] = json!(s);
    }
    let mut spec = json!({});
    // A custom resource without the field has no desired count yet; kube leaves it out too.
    if let Some(r) = at(parent, &paths.spec_replicas).and_then(Value::as_i64) {
        spec["replicas"] = json!(r);
    } else if paths.structured_selector {
        spec["replicas"] = json!(0);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": spec,
        "status": status,
    })
}

/// Check a Scale written by a client against the parent it targets (`name`, `namespace`).
///
/// # Errors
/// 400 when it is not an `autoscaling/v1 Scale` or names another object, 422 when
/// `spec.replicas` is missing, not an integer or negative.
pub fn check(scale: &Value, name: &str) -> Result<i64, ApiError> {
    if !scale.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    match scale.get("apiVersion").and_then(Value::as_str) {
        None | Some("autoscaling/v1") => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version (autoscaling/v1)"
            )));
        }
    }
    match scale.get("kind").and_then(Value::as_str) {
        None | Some("Scale") => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind (Scale)"
            )));
        }
    }
    if let Some(n) = scale.pointer("/metadata/name").and_then(Value::as_str)
        && !n.is_empty()
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let invalid = |detail: String| {
        ApiError::invalid(format!(
            "Scale.autoscaling \"{name}\" is invalid: spec.replicas: {detail}"
        ))
        .with_details(json!({"name": name, "group": "autoscaling", "kind": "Scale",
            "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": "spec.replicas"}]}))
    };
    let replicas = scale.pointer("/spec/replicas");
    match replicas {
        None | Some(Value::Null) => Ok(0),
        Some(v) => match v.as_i64() {
            Some(r) if r < 0 => Err(invalid(format!(
                "Invalid value: {r}: must be greater than or equal to 0"
            ))),
            Some(r) if r > i64::from(i32::MAX) => Err(invalid(format!(
                "Invalid value: {r}: must be less than or equal to {}",
                i32::MAX
            ))),
            Some(r) => Ok(r),
            None => Err(invalid(format!("Invalid value: {v}: must be an integer"))),
        },
    }
}

/// `parent` with its replica count set to `replicas` (intermediate objects created).
pub fn with_replicas(paths: &Paths, parent: &Value, replicas: i64) -> Value {
    let mut out = parent.clone();
    let Some((last, parents)) = paths.spec_replicas.split_last() else {
        return out;
    };
    let mut cur = &mut out;
    for k in parents {
        if !cur.get(k).is_some_and(Value::is_object) {
            cur[k.as_str()] = json!({});
        }
        cur = &mut cur[k.as_str()];
    }
    cur[last.as_str()] = json!(replicas);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_as_kube_prints_them() {
        let sel = json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["web", "cache"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "old", "operator": "DoesNotExist"},
            ],
        });
        assert_eq!(
            selector_string(&sel),
            "a=1,b=2,env notin (prod),gpu,!old,tier in (cache,web)"
        );
        assert_eq!(selector_string(&json!({})), "");
    }

    #[test]
    fn a_deployment_scale_shows_spec_status_and_selector() {
        let res = crate::registry::lookup("apps", "v1", "deployments").unwrap();
        let p = paths(res).unwrap();
        let d = json!({"metadata": {"name": "web", "namespace": "d", "resourceVersion": "7", "labels": {"x": "y"}},
                       "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
                       "status": {"replicas": 2}});
        let s = to_scale(&p, &d);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=web"}));
        assert_eq!(s["metadata"]["resourceVersion"], "7");
        assert!(s["metadata"].get("labels").is_none());
        let scaled = with_replicas(&p, &d, 5);
        assert_eq!(scaled["spec"]["replicas"], 5);
        assert_eq!(scaled["status"], d["status"]);
    }

    #[test]
    fn crd_scale_paths_are_registered_and_create_missing_parents() {
        register_crd_version(
            "scale.test.dev",
            "v1",
            "things",
            Some(
                &json!({"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.count",
                         "labelSelectorPath": ".status.sel"}),
            ),
        );
        let res = Resource {
            group: "scale.test.dev",
            version: "v1",
            kind: "Thing",
            plural: "things",
            singular: "thing",
            namespaced: true,
            has_status: true,
            short_names: &[],
            categories: &[],
            strategic: false,
        };
        let p = paths(&res).unwrap();
        let obj = json!({"metadata": {"name": "t"}, "status": {"count": 4, "sel": "a=b"}});
        let s = to_scale(&p, &obj);
        assert!(s["spec"].get("replicas").is_none());
        assert_eq!(s["status"], json!({"replicas": 4, "selector": "a=b"}));
        assert_eq!(with_replicas(&p, &obj, 2)["spec"]["size"], 2);
        register_crd_version("scale.test.dev", "v1", "things", None);
        assert!(paths(&res).is_none());
    }

    #[test]
    fn negative_replicas_and_foreign_kinds_are_refused() {
        assert_eq!(check(&json!({"spec": {"replicas": 3}}), "a").unwrap(), 3);
        assert_eq!(
            check(&json!({"spec": {"replicas": -1}}), "a")
                .unwrap_err()
                .code,
            422
        );
        assert_eq!(
            check(&json!({"kind": "Deployment", "spec": {}}), "a")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            check(&json!({"metadata": {"name": "b"}}), "a")
                .unwrap_err()
                .code,
            400
        );
    }
}
