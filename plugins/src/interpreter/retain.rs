//! Retain: the member-side fields kept when a member copy is updated (Karmada `native/retain.go`
//! and the kubefed-derived `lifted/retain.go`).

use flotilla_core::error::PluginError;
use serde_json::{Map, Value};

use super::{fail, gvk, int_at, str_at};

/// The label asking to keep the member's `spec.replicas` (e.g. under a member-side HPA).
pub const RETAIN_REPLICAS_LABEL: &str = "resourcetemplate.karmada.io/retain-replicas";

pub(super) fn retain(desired: &Value, observed: &Value) -> Result<Value, PluginError> {
    let mut out = desired.clone();
    if !out.is_object() {
        return Err(fail("the desired object is not a JSON object"));
    }
    match gvk(desired) {
        ("apps/v1", "Deployment") => retain_workload_replicas(&mut out, observed)?,
        ("v1", "Pod") => retain_pod(&mut out, observed)?,
        ("v1", "Service") => retain_service(&mut out, observed)?,
        ("v1", "ServiceAccount") => {
            for field in ["secrets", "imagePullSecrets"] {
                retain_secret_refs(&mut out, observed, field)?;
            }
        }
        ("v1", "PersistentVolumeClaim") => {
            let name = str_at(observed, "/spec/volumeName");
            if !name.is_empty() {
                set(&mut out, &["spec", "volumeName"], Value::from(name))?;
            }
        }
        ("v1", "PersistentVolume") => {
            if let Some(claim) = observed.pointer("/spec/claimRef") {
                set(&mut out, &["spec", "claimRef"], claim.clone())?;
            }
        }
        ("batch/v1", "Job") => {
            for path in [
                &["spec", "selector", "matchLabels"][..],
                &["spec", "template", "metadata", "labels"][..],
            ] {
                if let Some(m) = string_map(observed, path)? {
                    set(&mut out, path, m)?;
                }
            }
        }
        ("v1", "Secret") => {
            if str_at(desired, "/type") == "kubernetes.io/service-account-token"
                && let Some(data) = string_map(observed, &["data"])?
            {
                set(&mut out, &["data"], data)?;
            }
        }
        (api_version, kind) => {
            return Err(fail(format!(
                "Retain is not implemented for {api_version} {kind}"
            )));
        }
    }
    Ok(out)
}

/// Set `value` at `path`, creating the objects on the way.
fn set(object: &mut Value, path: &[&str], value: Value) -> Result<(), PluginError> {
    let mut cur = object;
    for (i, key) in path.iter().enumerate() {
        let Some(o) = cur.as_object_mut() else {
            return Err(fail(format!("{}: expected an object", path[..i].join("."))));
        };
        if i == path.len() - 1 {
            o.insert((*key).to_owned(), value);
            return Ok(());
        }
        cur = o.entry(*key).or_insert_with(|| Value::Object(Map::new()));
    }
    Ok(())
}

/// The string map at `path` of `v` (`None` when absent); an error when it is not one.
fn string_map(v: &Value, path: &[&str]) -> Result<Option<Value>, PluginError> {
    let pointer = format!("/{}", path.join("/"));
    match v.pointer(&pointer) {
        None => Ok(None),
        Some(Value::Object(m)) if m.values().all(Value::is_string) => {
            Ok(Some(Value::Object(m.clone())))
        }
        Some(_) => Err(fail(format!(
            "{}: expected a map of strings",
            path.join(".")
        ))),
    }
}

fn retain_workload_replicas(out: &mut Value, observed: &Value) -> Result<(), PluginError> {
    if str_at(
        out,
        &format!("/metadata/labels/{}", escape(RETAIN_REPLICAS_LABEL)),
    ) != "true"
    {
        return Ok(());
    }
    let replicas = int_at(observed, "/spec/replicas")
        .ok()
        .flatten()
        .ok_or_else(|| {
            fail(format!(
                "failed to get spec.replicas from {} {}/{}",
                str_at(observed, "/kind"),
                str_at(observed, "/metadata/namespace"),
                str_at(observed, "/metadata/name")
            ))
        })?;
    set(out, &["spec", "replicas"], Value::from(replicas))
}

/// A JSON pointer token for `s` (`~` and `/` escaped).
fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn retain_pod(out: &mut Value, observed: &Value) -> Result<(), PluginError> {
    // Fields the member assigns: taken from the member as they are, absent included.
    let member_spec = observed.get("spec").and_then(Value::as_object);
    let Some(spec) = out
        .as_object_mut()
        .map(|o| o.entry("spec").or_insert_with(|| Value::Object(Map::new())))
        .and_then(Value::as_object_mut)
    else {
        return Err(fail("spec: expected an object"));
    };
    for field in ["nodeName", "serviceAccountName", "volumes"] {
        match member_spec.and_then(|s| s.get(field)) {
            Some(v) if !v.is_null() => {
                spec.insert(field.to_owned(), v.clone());
            }
            _ => {
                spec.remove(field);
            }
        }
    }
    for list in ["containers", "initContainers"] {
        let Some(desired) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        let members = member_spec
            .and_then(|s| s.get(list))
            .and_then(Value::as_array);
        for member in members.into_iter().flatten() {
            let name = member.get("name").and_then(Value::as_str);
            let Some(c) = desired
                .iter_mut()
                .find(|c| c.get("name").and_then(Value::as_str) == name)
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            match member.get("volumeMounts") {
                Some(m) if !m.is_null() => {
                    c.insert("volumeMounts".into(), m.clone());
                }
                _ => {
                    c.remove("volumeMounts");
                }
            }
        }
    }
    Ok(())
}

fn retain_service(out: &mut Value, observed: &Value) -> Result<(), PluginError> {
    if let Some(port) = int_at(observed, "/spec/healthCheckNodePort")?
        && port > 0
    {
        set(out, &["spec", "healthCheckNodePort"], Value::from(port))?;
    }
    let ip = str_at(observed, "/spec/clusterIP");
    if !ip.is_empty() {
        set(out, &["spec", "clusterIP"], Value::from(ip))?;
    }
    Ok(())
}

/// Merge a ServiceAccount's `secrets`/`imagePullSecrets`: the control plane's entries, then the
/// member's (such as generated token secrets) whose names it does not list.
fn retain_secret_refs(out: &mut Value, observed: &Value, field: &str) -> Result<(), PluginError> {
    let name_of = |v: &Value| -> Result<String, PluginError> {
        v.get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| fail(format!("{field}: an entry has no name")))
    };
    let mut merged: Vec<Value> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for v in out
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        names.insert(name_of(v)?);
        merged.push(v.clone());
    }
    for v in observed
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if names.insert(name_of(v)?) {
            merged.push(v.clone());
        }
    }
    let Some(o) = out.as_object_mut() else {
        return Ok(());
    };
    if merged.is_empty() {
        o.remove(field);
    } else {
        o.insert(field.to_owned(), Value::Array(merged));
    }
    Ok(())
}
