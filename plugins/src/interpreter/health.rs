//! InterpretHealth (Karmada `native/healthy.go`).

use flotilla_core::error::PluginError;
use serde_json::Value;

use super::{array_at, fail, gvk, int_at, str_at};

/// An integer field, 0 when absent (Go's zero value).
fn n(v: &Value, p: &str) -> Result<i64, PluginError> {
    Ok(int_at(v, p)?.unwrap_or(0))
}

/// Whether some load-balancer ingress has an IP or a host name.
fn has_ingress_address(v: &Value) -> bool {
    array_at(v, "/status/loadBalancer/ingress")
        .iter()
        .any(|i| !str_at(i, "/ip").is_empty() || !str_at(i, "/hostname").is_empty())
}

pub(super) fn interpret_health(o: &Value) -> Result<bool, PluginError> {
    let observed_current = || -> Result<bool, PluginError> {
        Ok(n(o, "/status/observedGeneration")? == n(o, "/metadata/generation")?)
    };
    match gvk(o) {
        ("apps/v1", "Deployment" | "StatefulSet") => {
            if !observed_current()? {
                return Ok(false);
            }
            let updated = n(o, "/status/updatedReplicas")?;
            if let Some(want) = int_at(o, "/spec/replicas")?
                && updated < want
            {
                return Ok(false);
            }
            Ok(n(o, "/status/availableReplicas")? >= updated)
        }
        ("apps/v1", "ReplicaSet") => {
            if !observed_current()? {
                return Ok(false);
            }
            match int_at(o, "/spec/replicas")? {
                Some(want) => Ok(n(o, "/status/availableReplicas")? >= want),
                None => Ok(true),
            }
        }
        ("apps/v1", "DaemonSet") => {
            if !observed_current()? {
                return Ok(false);
            }
            let updated = n(o, "/status/updatedNumberScheduled")?;
            if updated < n(o, "/status/desiredNumberScheduled")? {
                return Ok(false);
            }
            Ok(n(o, "/status/numberAvailable")? >= updated)
        }
        ("v1", "Service") => {
            Ok(str_at(o, "/spec/type") != "LoadBalancer" || has_ingress_address(o))
        }
        ("networking.k8s.io/v1", "Ingress") => Ok(has_ingress_address(o)),
        ("v1", "PersistentVolumeClaim") => Ok(str_at(o, "/status/phase") == "Bound"),
        ("v1", "Pod") => {
            let phase = str_at(o, "/status/phase");
            if phase == "Succeeded" {
                return Ok(true);
            }
            let ready = array_at(o, "/status/conditions")
                .iter()
                .find(|c| str_at(c, "/type") == "Ready")
                .is_some_and(|c| str_at(c, "/status") == "True");
            Ok(phase == "Running" && ready)
        }
        ("policy/v1", "PodDisruptionBudget") => {
            Ok(n(o, "/status/currentHealthy")? >= n(o, "/status/desiredHealthy")?)
        }
        (api_version, kind) => Err(fail(format!(
            "InterpretHealth is not implemented for {api_version} {kind}"
        ))),
    }
}
