//! InterpretStatus: the status collected from a member copy (Karmada `native/reflectstatus.go`).

use flotilla_api::labels::TEMPLATE_GENERATION;
use flotilla_core::error::PluginError;
use serde_json::{Map, Value};

use super::{fail, gvk, int_at, str_at};

/// Copy the integer fields `fields` of `status` into `out`, in order, leaving zeros out (Go's
/// `omitempty`) except for the fields in `always` (those without `omitempty`).
fn ints_keeping(
    out: &mut Map<String, Value>,
    status: &Value,
    fields: &[&str],
    always: &[&str],
) -> Result<(), PluginError> {
    for f in fields {
        let v = int_at(status, &format!("/{f}"))
            .map_err(|_| fail(format!("status.{f}: expected an integer")))?
            .unwrap_or(0);
        if v != 0 || always.contains(f) {
            out.insert((*f).to_owned(), Value::from(v));
        }
    }
    Ok(())
}

/// [`ints_keeping`] with every field `omitempty`.
fn ints(out: &mut Map<String, Value>, status: &Value, fields: &[&str]) -> Result<(), PluginError> {
    ints_keeping(out, status, fields, &[])
}

/// Copy the fields `fields` of `status` into `out` when set (not null, not empty).
fn copied(out: &mut Map<String, Value>, status: &Value, fields: &[&str]) {
    for f in fields {
        match status.get(*f) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(Value::Object(m)) if m.is_empty() => {}
            Some(v) => {
                out.insert((*f).to_owned(), v.clone());
            }
        }
    }
}

/// `metadata.generation` and the `resourcetemplate.karmada.io/generation` annotation the
/// control plane stamped on the copy (Karmada's `FederatedGeneration`). A missing or malformed
/// annotation is an error, as in Karmada.
fn federated_generation(o: &Value, out: &mut Map<String, Value>) -> Result<(), PluginError> {
    let generation = int_at(o, "/metadata/generation")?.unwrap_or(0);
    let annotation = o
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(TEMPLATE_GENERATION))
        .and_then(Value::as_str)
        .unwrap_or("");
    let template_generation: i64 = annotation.parse().map_err(|_| {
        fail(format!(
            "{} {}/{}: annotation {TEMPLATE_GENERATION} is {annotation:?}, not an integer",
            str_at(o, "/kind"),
            str_at(o, "/metadata/namespace"),
            str_at(o, "/metadata/name"),
        ))
    })?;
    if generation != 0 {
        out.insert("generation".into(), Value::from(generation));
    }
    if template_generation != 0 {
        out.insert(
            "resourceTemplateGeneration".into(),
            Value::from(template_generation),
        );
    }
    Ok(())
}

fn object_or_none(out: Map<String, Value>) -> Option<Value> {
    (!out.is_empty()).then_some(Value::Object(out))
}

pub(super) fn reflect_status(o: &Value) -> Result<Option<Value>, PluginError> {
    let (api_version, kind) = gvk(o);
    let status = match o.get("status") {
        None | Some(Value::Null) => return Ok(None),
        Some(s @ Value::Object(_)) => s,
        Some(_) => return Err(fail("status: expected an object")),
    };
    let mut out = Map::new();
    match (api_version, kind) {
        ("apps/v1", "Deployment") => {
            federated_generation(o, &mut out)?;
            ints(
                &mut out,
                status,
                &[
                    "observedGeneration",
                    "replicas",
                    "updatedReplicas",
                    "readyReplicas",
                    "availableReplicas",
                    "unavailableReplicas",
                ],
            )?;
            Ok(object_or_none(out))
        }
        ("apps/v1", "ReplicaSet") => {
            federated_generation(o, &mut out)?;
            ints_keeping(
                &mut out,
                status,
                &[
                    "replicas",
                    "readyReplicas",
                    "availableReplicas",
                    "observedGeneration",
                ],
                &["replicas"],
            )?;
            Ok(object_or_none(out))
        }
        ("apps/v1", "DaemonSet") => {
            federated_generation(o, &mut out)?;
            ints_keeping(
                &mut out,
                status,
                &[
                    "currentNumberScheduled",
                    "numberMisscheduled",
                    "desiredNumberScheduled",
                    "numberReady",
                    "observedGeneration",
                    "updatedNumberScheduled",
                    "numberAvailable",
                    "numberUnavailable",
                ],
                &[
                    "currentNumberScheduled",
                    "numberMisscheduled",
                    "desiredNumberScheduled",
                    "numberReady",
                ],
            )?;
            Ok(Some(Value::Object(out)))
        }
        ("apps/v1", "StatefulSet") => {
            federated_generation(o, &mut out)?;
            ints_keeping(
                &mut out,
                status,
                &[
                    "replicas",
                    "readyReplicas",
                    "currentReplicas",
                    "updatedReplicas",
                    "availableReplicas",
                ],
                &["replicas", "availableReplicas"],
            )?;
            Ok(Some(Value::Object(out)))
        }
        ("v1", "Service") => {
            if str_at(o, "/spec/type") != "LoadBalancer" {
                return Ok(None);
            }
            // `loadBalancer` is not omitempty in Go: an empty one is still reported.
            let lb = status
                .get("loadBalancer")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            out.insert("loadBalancer".into(), lb);
            Ok(Some(Value::Object(out)))
        }
        ("batch/v1", "Job") => {
            copied(
                &mut out,
                status,
                &["conditions", "startTime", "completionTime"],
            );
            ints(&mut out, status, &["active", "succeeded", "failed"])?;
            Ok(Some(Value::Object(out)))
        }
        ("policy/v1", "PodDisruptionBudget") => {
            copied(&mut out, status, &["disruptedPods"]);
            let all = [
                "disruptionsAllowed",
                "currentHealthy",
                "desiredHealthy",
                "expectedPods",
            ];
            ints_keeping(&mut out, status, &all, &all)?;
            Ok(Some(Value::Object(out)))
        }
        ("autoscaling/v2", "HorizontalPodAutoscaler") => {
            ints_keeping(
                &mut out,
                status,
                &["currentReplicas", "desiredReplicas"],
                &["desiredReplicas"],
            )?;
            Ok(Some(Value::Object(out)))
        }
        // Ingress and every other kind: the whole status.
        _ => Ok(Some(status.clone())),
    }
}
