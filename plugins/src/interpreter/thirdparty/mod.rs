//! The third-party interpreters: what Karmada ships as
//! `pkg/resourceinterpreter/default/thirdparty` customizations for popular operators' kinds,
//! written natively against [`ResourceInterpreter`]. They answer after customizations and
//! webhooks and before the native defaults (Karmada's order), so a user's
//! `ResourceInterpreterCustomization` for one of these kinds wins operation by operation.
//!
//! Operations answered (semantics of Karmada v1.18.2's `componentResource` and
//! `replicaResource` rules for these kinds):
//!
//! | kind | InterpretComponent | InterpretReplica |
//! |---|---|---|
//! | flink.apache.org/v1beta1 FlinkDeployment | `jobmanager`, `taskmanager` | jobmanager + taskmanager |
//! | sparkoperator.k8s.io/v1beta2 SparkApplication | `driver`, `executor` | |
//! | batch.volcano.sh/v1alpha1 Job | one per task (`minAvailable`) | |
//! | kubeflow.org/v2beta1 MPIJob | one per `mpiReplicaSpecs` entry | |
//! | kubeflow.org/v1 TFJob | `ps`, `worker`, `chief`, `master`, `evaluator` | |
//! | kubeflow.org/v1 PyTorchJob | `master`, `worker` | |
//! | ray.io/v1 RayCluster | `ray-head`, one per worker group | |
//! | ray.io/v1 RayJob | as RayCluster, from `spec.rayClusterSpec` | |

mod flink;
mod jobs;
mod spark;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use flotilla_api::interpreter::Component;
use flotilla_api::meta::Quantity;
use flotilla_api::work::ReplicaRequirements;
use flotilla_core::error::PluginError;
use flotilla_core::interpreter::{Operation, Replicas, ResourceInterpreter};
use flotilla_core::quantity::{NANO_PER_UNIT, parse_nano};
use serde_json::{Map, Value};

/// The name the third-party interpreters report in errors and Events.
pub const NAME: &str = "thirdparty";

/// Components one object may declare (a Volcano Job's tasks, a Ray cluster's worker groups…):
/// more is a hostile object, refused instead of scheduled.
pub const MAX_COMPONENTS: usize = 256;

const FLINK: (&str, &str) = ("flink.apache.org/v1beta1", "FlinkDeployment");
const SPARK: (&str, &str) = ("sparkoperator.k8s.io/v1beta2", "SparkApplication");
const VOLCANO_JOB: (&str, &str) = ("batch.volcano.sh/v1alpha1", "Job");
const MPI_JOB: (&str, &str) = ("kubeflow.org/v2beta1", "MPIJob");
const TF_JOB: (&str, &str) = ("kubeflow.org/v1", "TFJob");
const PYTORCH_JOB: (&str, &str) = ("kubeflow.org/v1", "PyTorchJob");
const RAY_CLUSTER: (&str, &str) = ("ray.io/v1", "RayCluster");
const RAY_JOB: (&str, &str) = ("ray.io/v1", "RayJob");

/// The kinds each operation has a third-party handler for.
fn handles(op: Operation) -> &'static [(&'static str, &'static str)] {
    match op {
        Operation::InterpretComponent => &[
            FLINK,
            SPARK,
            VOLCANO_JOB,
            MPI_JOB,
            TF_JOB,
            PYTORCH_JOB,
            RAY_CLUSTER,
            RAY_JOB,
        ],
        Operation::InterpretReplica => &[FLINK],
        _ => &[],
    }
}

/// The third-party interpreters, as one link of the chain.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThirdParty;

/// The third-party interpreters, ready to sit between the webhooks and the native defaults.
pub fn thirdparty() -> Arc<dyn ResourceInterpreter> {
    Arc::new(ThirdParty)
}

fn gvk(object: &Value) -> (&str, &str) {
    (
        object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(""),
        object.get("kind").and_then(Value::as_str).unwrap_or(""),
    )
}

impl ResourceInterpreter for ThirdParty {
    fn name(&self) -> &str {
        NAME
    }

    fn hook_enabled(&self, api_version: &str, kind: &str, op: Operation) -> bool {
        handles(op)
            .iter()
            .any(|(a, k)| *a == api_version && *k == kind)
    }

    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        match gvk(object) {
            FLINK => flink::replicas(object),
            (a, k) => Err(fail(format!(
                "InterpretReplica is not implemented for {a} {k}"
            ))),
        }
    }

    fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        let components = match gvk(object) {
            FLINK => flink::components(object)?,
            SPARK => spark::components(object)?,
            VOLCANO_JOB => jobs::volcano(object)?,
            MPI_JOB => jobs::mpi(object)?,
            TF_JOB => jobs::replica_specs(
                object,
                "/spec/tfReplicaSpecs",
                &[
                    ("PS", "ps"),
                    ("Worker", "worker"),
                    ("Chief", "chief"),
                    ("Master", "master"),
                    ("Evaluator", "evaluator"),
                ],
            )?,
            PYTORCH_JOB => jobs::replica_specs(
                object,
                "/spec/pytorchReplicaSpecs",
                &[("Master", "master"), ("Worker", "worker")],
            )?,
            RAY_CLUSTER => jobs::ray(object.get("spec"))?,
            RAY_JOB => jobs::ray(object.pointer("/spec/rayClusterSpec"))?,
            (a, k) => {
                return Err(fail(format!(
                    "InterpretComponent is not implemented for {a} {k}"
                )));
            }
        };
        if components.len() > MAX_COMPONENTS {
            return Err(fail(format!(
                "{} components, more than the {MAX_COMPONENTS} a workload may have",
                components.len()
            )));
        }
        Ok(components)
    }
}

pub(crate) fn fail(message: impl Into<String>) -> PluginError {
    PluginError::failed(NAME, message)
}

/// `field` as the interpreters' errors name it (`spec.jobManager.replicas`).
fn field(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

/// What Lua's `tonumber` makes of a field the customizations read with `to_num`: absent, null or
/// `""` is `None` (the caller's default), a number is itself, a string is parsed as a decimal
/// number; anything else (or an unparsable string) is `None` as well.
fn lua_number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

/// A count as the customizations hand it to Karmada's `int32` field: whole, not negative, in range.
fn count(value: f64, what: &str) -> Result<i32, PluginError> {
    if value.fract() != 0.0 || !(0.0..=f64::from(i32::MAX)).contains(&value) {
        return Err(fail(format!(
            "{what}: expected a non-negative whole number of replicas, got {value}"
        )));
    }
    // Whole and within 0..=i32::MAX, checked above.
    #[allow(clippy::cast_possible_truncation)]
    Ok(value as i32)
}

/// `to_num(field, default)` as a replica count.
fn count_at(object: &Value, pointer: &str, default: i32) -> Result<i32, PluginError> {
    match lua_number(object.pointer(pointer)) {
        None => Ok(default),
        Some(f) => count(f, &field(pointer)),
    }
}

/// Karmada's `GenerateReplicaRequirements` for a pod template (`kube.accuratePodRequirements`):
/// `None` when the template asks for nothing.
fn template_requirements(template: &Value) -> Option<ReplicaRequirements> {
    template.get("spec").and_then(super::replica_requirements)
}

/// The quantity a rule put into `resourceRequest` (a JSON string or number), in
/// `Quantity.String()`'s canonical form, as Karmada's decoder leaves it.
fn quantity(v: &Value, what: &str) -> Result<Quantity, PluginError> {
    let text = match v {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(fail(format!("{what}: expected a quantity, got {other}")));
        }
    };
    let canonical = canonical(&text).map_err(|e| fail(format!("{what}: {e}")))?;
    Ok(Quantity::from(canonical.as_str()))
}

/// `text` parsed as a Kubernetes quantity and printed canonically (`1500m`, `3Gi`, `2k`, `5e3`).
/// Negative quantities are refused: no workload requests them.
fn canonical(text: &str) -> Result<String, String> {
    let shown: String = text.chars().take(64).collect();
    let nano = parse_nano(text).map_err(|e| format!("cannot parse {shown:?}: {e}"))?;
    if nano < 0 {
        return Err(format!("{shown:?} is negative"));
    }
    let suffix =
        text.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '+' || c == '-');
    let exponent_form = suffix.len() > 1 && suffix.starts_with(['e', 'E']);
    Ok(if suffix.ends_with('i') {
        binary(nano)
    } else {
        decimal(nano, !exponent_form)
    })
}

/// A non-negative nano-value in BinarySI (`2Gi`), falling back to DecimalSI for values that are
/// fractional or under 1Ki, as `Quantity.String()` does.
fn binary(nano: i128) -> String {
    if nano == 0 {
        return "0".into();
    }
    if nano % NANO_PER_UNIT != 0 || nano < 1024 * NANO_PER_UNIT {
        return decimal(nano, true);
    }
    let mut v = nano / NANO_PER_UNIT;
    let mut suffix = "";
    for s in ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"] {
        if v % 1024 != 0 {
            break;
        }
        v /= 1024;
        suffix = s;
    }
    format!("{v}{suffix}")
}

/// A non-negative nano-value in DecimalSI (`si`: `1500m`, `2k`) or DecimalExponent (`15e2`).
fn decimal(nano: i128, si: bool) -> String {
    if nano == 0 {
        return "0".into();
    }
    let (mut mantissa, mut exponent) = (nano, -9i32);
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exponent += 1;
    }
    let pad = exponent.rem_euclid(3);
    for _ in 0..pad {
        mantissa = mantissa.saturating_mul(10);
    }
    exponent -= pad;
    let suffix = match exponent {
        -9 => Some("n"),
        -6 => Some("u"),
        -3 => Some("m"),
        0 => Some(""),
        3 => Some("k"),
        6 => Some("M"),
        9 => Some("G"),
        12 => Some("T"),
        15 => Some("P"),
        18 => Some("E"),
        _ => None,
    };
    match suffix {
        Some(s) if si => format!("{mantissa}{s}"),
        _ if exponent == 0 => mantissa.to_string(),
        _ => format!("{mantissa}e{exponent}"),
    }
}

/// The node claim and priority class the Flink and Spark rules copy from a pod spec
/// (`apply_pod_template`): `nodeSelector`, `tolerations` and, where `affinity` is true, the
/// required node affinity; the claim is set when any of them is.
fn apply_pod_spec(
    pod: Option<&Value>,
    affinity: bool,
    requires: &mut ReplicaRequirements,
    at: &str,
) -> Result<(), PluginError> {
    let Some(pod) = pod.filter(|p| !p.is_null()) else {
        return Ok(());
    };
    let Value::Object(pod) = pod else {
        return Err(fail(format!("{at}: expected an object")));
    };
    let mut claim = Map::new();
    let mut any = false;
    let mut keep = |key: &str, value: Option<&Value>| {
        let Some(v) = value.filter(|v| !v.is_null()) else {
            return;
        };
        any = true;
        // Go's `omitempty` drops an empty selector or toleration list.
        let empty = match v {
            Value::Object(m) => m.is_empty() && key != "hardNodeAffinity",
            Value::Array(a) => a.is_empty(),
            _ => false,
        };
        if !empty {
            claim.insert(key.to_owned(), v.clone());
        }
    };
    keep("nodeSelector", pod.get("nodeSelector"));
    keep("tolerations", pod.get("tolerations"));
    if affinity {
        keep(
            "hardNodeAffinity",
            pod.get("affinity")
                .and_then(|a| a.get("nodeAffinity"))
                .and_then(|a| a.get("requiredDuringSchedulingIgnoredDuringExecution")),
        );
    }
    if any {
        requires.node_claim = Some(Value::Object(claim));
    }
    match pod.get("priorityClassName") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => requires.priority_class_name.clone_from(s),
        Some(other) => {
            return Err(fail(format!(
                "{at}.priorityClassName: expected a string, got {other}"
            )));
        }
    }
    Ok(())
}
