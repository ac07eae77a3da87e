//! InterpretReplica and ReviseReplica (Karmada `native/replica.go`, `native/revisereplica.go`).

use std::collections::BTreeMap;

use flotilla_api::meta::Quantity;
use flotilla_api::work::ReplicaRequirements;
use flotilla_core::error::PluginError;
use flotilla_core::interpreter::Replicas;
use serde_json::{Map, Value};

use super::{fail, gvk, int_at};

/// Replicas and per-replica requirements. Deployment, ReplicaSet, StatefulSet: `spec.replicas`;
/// Job: `spec.parallelism` capped by `spec.completions`; Pod: 1. An unset count follows the API
/// server's default (1), since templates read offline have not been through its defaulting.
pub(super) fn get_replicas(object: &Value) -> Result<Replicas, PluginError> {
    let count = |p: &str| -> Result<i32, PluginError> {
        Ok(int_at(object, p)?.map_or(1, |i| i32::try_from(i).unwrap_or(i32::MAX)))
    };
    let (replicas, pod_spec) = match gvk(object) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") => (
            count("/spec/replicas")?,
            object.pointer("/spec/template/spec"),
        ),
        ("batch/v1", "Job") => {
            let parallelism = count("/spec/parallelism")?;
            let completions = int_at(object, "/spec/completions")?
                .map_or(parallelism, |i| i32::try_from(i).unwrap_or(i32::MAX));
            (
                parallelism.min(completions),
                object.pointer("/spec/template/spec"),
            )
        }
        ("v1", "Pod") => (1, object.pointer("/spec")),
        (api_version, kind) => {
            return Err(fail(format!(
                "InterpretReplica is not implemented for {api_version} {kind}"
            )));
        }
    };
    Ok(Replicas {
        replicas,
        requirements: pod_spec.and_then(replica_requirements),
    })
}

/// ReviseReplica: Deployment, ReplicaSet, StatefulSet `spec.replicas`; Job `spec.parallelism`.
/// A field holding something other than an integer is an error, as Karmada's `ApplyReplica`.
pub(super) fn revise_replica(object: &Value, replicas: i64) -> Result<Value, PluginError> {
    let field = match gvk(object) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") => "replicas",
        ("batch/v1", "Job") => "parallelism",
        (api_version, kind) => {
            return Err(fail(format!(
                "ReviseReplica is not implemented for {api_version} {kind}"
            )));
        }
    };
    int_at(object, &format!("/spec/{field}"))?;
    let mut revised = object.clone();
    let Some(o) = revised.as_object_mut() else {
        return Err(fail("the object is not a JSON object"));
    };
    let spec = o.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    let Some(spec) = spec.as_object_mut() else {
        return Err(fail("spec: expected an object"));
    };
    spec.insert(field.into(), Value::from(replicas));
    Ok(revised)
}

/// Karmada's `GenerateReplicaRequirements` for a pod spec: the node claim (node selector, required
/// node affinity, tolerations) and the resource request of one replica (`AddPodTemplateRequest`:
/// the sum of the containers' requests, limits standing in for missing requests, at least each
/// init container's, plus the pod overhead). `None` when both are empty. Namespace and priority
/// class stay empty: Karmada fills them only under the alpha `ResourceQuotaEstimate` gate.
pub fn replica_requirements(pod: &Value) -> Option<ReplicaRequirements> {
    let mut node_claim = Map::new();
    if let Some(ns) = pod
        .get("nodeSelector")
        .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
    {
        node_claim.insert("nodeSelector".into(), ns.clone());
    }
    if let Some(req) =
        pod.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution")
    {
        node_claim.insert("hardNodeAffinity".into(), req.clone());
    }
    if let Some(t) = pod
        .get("tolerations")
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
    {
        node_claim.insert("tolerations".into(), t.clone());
    }

    let mut total: BTreeMap<String, i128> = BTreeMap::new();
    let requests = |c: &Value| -> BTreeMap<String, i128> {
        let mut r: BTreeMap<String, i128> = BTreeMap::new();
        for src in ["limits", "requests"] {
            if let Some(m) = c
                .pointer(&format!("/resources/{src}"))
                .and_then(Value::as_object)
            {
                for (k, q) in m {
                    if let Some(milli) = quantity_milli(q) {
                        r.insert(k.clone(), milli);
                    }
                }
            }
        }
        r
    };
    for c in pod
        .get("containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (k, m) in requests(c) {
            let e = total.entry(k).or_default();
            *e = e.saturating_add(m);
        }
    }
    for c in pod
        .get("initContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (k, m) in requests(c) {
            let e = total.entry(k).or_default();
            *e = (*e).max(m);
        }
    }
    if let Some(m) = pod.get("overhead").and_then(Value::as_object) {
        for (k, q) in m {
            if let Some(milli) = quantity_milli(q) {
                let e = total.entry(k.clone()).or_default();
                *e = e.saturating_add(milli);
            }
        }
    }
    let resource_request: BTreeMap<String, Quantity> = total
        .into_iter()
        .filter(|(_, m)| *m > 0)
        .map(|(k, m)| {
            let q = format_canonical(&k, m);
            (k, Quantity::from(q.as_str()))
        })
        .collect();
    if node_claim.is_empty() && resource_request.is_empty() {
        return None;
    }
    Some(ReplicaRequirements {
        node_claim: (!node_claim.is_empty()).then(|| Value::Object(node_claim)),
        resource_request,
        ..Default::default()
    })
}

/// Format a milli-value the way `Resource.ResourceList()` does: CPU as a DecimalSI milli quantity,
/// memory, ephemeral storage and hugepages as BinarySI, everything else as DecimalSI integers.
fn format_canonical(resource: &str, milli: i128) -> String {
    if resource == "cpu" {
        return if milli % 1000 == 0 {
            format_decimal(milli / 1000)
        } else {
            format!("{milli}m")
        };
    }
    let value = milli.saturating_add(999).div_euclid(1000);
    if resource == "memory" || resource == "ephemeral-storage" || resource.starts_with("hugepages-")
    {
        let mut v = value;
        for suffix in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"] {
            if v % 1024 != 0 || v == 0 || suffix == "Ei" {
                return format!("{v}{suffix}");
            }
            v /= 1024;
        }
        return value.to_string();
    }
    format_decimal(value)
}

fn format_decimal(value: i128) -> String {
    let mut v = value;
    for suffix in ["", "k", "M", "G", "T", "P", "E"] {
        if v % 1000 != 0 || v == 0 || suffix == "E" {
            return format!("{v}{suffix}");
        }
        v /= 1000;
    }
    value.to_string()
}

fn quantity_milli(q: &Value) -> Option<i128> {
    let text = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    flotilla_core::quantity::parse_milli(&text).ok()
}
