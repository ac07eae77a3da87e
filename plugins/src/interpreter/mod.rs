//! The native resource interpreters: Karmada's default interpreter
//! (`pkg/resourceinterpreter/default/native`) for the built-in kinds, written against
//! [`ResourceInterpreter`] exactly as a third-party interpreter is.
//!
//! [`native`] is the interpreter; [`chain`] puts customizations and webhooks in front of it in
//! Karmada's resolution order. Kinds and operations answered:
//!
//! | operation | kinds |
//! |---|---|
//! | InterpretReplica | Deployment, ReplicaSet, StatefulSet, Job, Pod |
//! | ReviseReplica | Deployment, ReplicaSet, StatefulSet, Job |
//! | Retain | Deployment, Pod, Service, ServiceAccount, PersistentVolumeClaim, PersistentVolume, Job, Secret |
//! | AggregateStatus | Deployment, ReplicaSet, StatefulSet, DaemonSet, Service, Ingress, Job, CronJob, Pod, PersistentVolume, PersistentVolumeClaim, PodDisruptionBudget, HorizontalPodAutoscaler |
//! | InterpretStatus | every kind (dedicated reflection for Deployment, ReplicaSet, StatefulSet, DaemonSet, Service, Ingress, Job, PodDisruptionBudget, HorizontalPodAutoscaler; the whole `status` otherwise) |
//! | InterpretHealth | Deployment, StatefulSet, ReplicaSet, DaemonSet, Service, Ingress, PersistentVolumeClaim, Pod, PodDisruptionBudget |
//! | InterpretDependency | Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, Pod, Ingress, ServiceImport |
//!
//! InterpretComponent has no native implementation (as in Karmada). The [`thirdparty`]
//! interpreters (Karmada's third-party customizations, answered natively) sit between the webhooks
//! and these defaults:
//!
//! | operation | kinds |
//! |---|---|
//! | InterpretComponent | FlinkDeployment, SparkApplication, Volcano Job, MPIJob, TFJob, PyTorchJob, RayCluster, RayJob |
//! | InterpretReplica | FlinkDeployment |

mod aggregate;
mod dependencies;
mod health;
mod reflect;
mod replica;
mod retain;
#[cfg(test)]
mod tests;
pub mod thirdparty;

use std::sync::Arc;

use flotilla_api::interpreter::{DependentObjectReference, ResourceInterpreterCustomization};
use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::error::PluginError;
use flotilla_core::interpreter::{
    Customization, Interpreters, Operation, Replicas, ResourceInterpreter, RuleBackend,
};
use serde_json::Value;

pub use aggregate::{Summary, deployment_conditions, max_unavailable, merge_conditions};
pub use replica::replica_requirements;

/// The name the native interpreter reports in errors and Events.
pub const NAME: &str = "native";

const APPS: &str = "apps/v1";
const BATCH: &str = "batch/v1";
const CORE: &str = "v1";
const NETWORKING: &str = "networking.k8s.io/v1";
const POLICY: &str = "policy/v1";
const AUTOSCALING: &str = "autoscaling/v2";
const MCS: &str = "multicluster.x-k8s.io/v1alpha1";

/// The kinds each operation has a native handler for (Karmada's `getAllDefault*Interpreter`).
fn handles(op: Operation) -> &'static [(&'static str, &'static str)] {
    match op {
        Operation::InterpretReplica => &[
            (APPS, "Deployment"),
            (APPS, "ReplicaSet"),
            (APPS, "StatefulSet"),
            (BATCH, "Job"),
            (CORE, "Pod"),
        ],
        Operation::ReviseReplica => &[
            (APPS, "Deployment"),
            (APPS, "ReplicaSet"),
            (APPS, "StatefulSet"),
            (BATCH, "Job"),
        ],
        Operation::Retain => &[
            (APPS, "Deployment"),
            (CORE, "Pod"),
            (CORE, "Service"),
            (CORE, "ServiceAccount"),
            (CORE, "PersistentVolumeClaim"),
            (CORE, "PersistentVolume"),
            (BATCH, "Job"),
            (CORE, "Secret"),
        ],
        Operation::AggregateStatus => &[
            (APPS, "Deployment"),
            (APPS, "ReplicaSet"),
            (CORE, "Service"),
            (NETWORKING, "Ingress"),
            (BATCH, "Job"),
            (BATCH, "CronJob"),
            (APPS, "DaemonSet"),
            (APPS, "StatefulSet"),
            (CORE, "Pod"),
            (CORE, "PersistentVolume"),
            (CORE, "PersistentVolumeClaim"),
            (POLICY, "PodDisruptionBudget"),
            (AUTOSCALING, "HorizontalPodAutoscaler"),
        ],
        Operation::InterpretHealth => &[
            (APPS, "Deployment"),
            (APPS, "StatefulSet"),
            (APPS, "ReplicaSet"),
            (APPS, "DaemonSet"),
            (CORE, "Service"),
            (NETWORKING, "Ingress"),
            (CORE, "PersistentVolumeClaim"),
            (CORE, "Pod"),
            (POLICY, "PodDisruptionBudget"),
        ],
        Operation::InterpretDependency => &[
            (APPS, "Deployment"),
            (APPS, "ReplicaSet"),
            (BATCH, "Job"),
            (BATCH, "CronJob"),
            (CORE, "Pod"),
            (APPS, "DaemonSet"),
            (APPS, "StatefulSet"),
            (NETWORKING, "Ingress"),
            (MCS, "ServiceImport"),
        ],
        // Every kind reflects (see `hook_enabled`); InterpretComponent is not implemented.
        Operation::InterpretStatus | Operation::InterpretComponent => &[],
    }
}

/// Karmada's default interpreter for the built-in kinds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Native;

/// The native interpreter, ready to be the last link of a chain.
pub fn native() -> Arc<dyn ResourceInterpreter> {
    Arc::new(Native)
}

/// The default chain, in Karmada's order: `customizations` (already sorted by name), then
/// `webhooks` (interpreter webhooks, in their configuration order), then the third-party
/// interpreters, then the native defaults.
pub fn chain(
    customizations: impl IntoIterator<Item = Arc<dyn ResourceInterpreter>>,
    webhooks: impl IntoIterator<Item = Arc<dyn ResourceInterpreter>>,
) -> Interpreters {
    Interpreters::new(
        customizations
            .into_iter()
            .chain(webhooks)
            .chain([thirdparty::thirdparty(), native()])
            .collect(),
    )
}

/// Compiled customizations, and `(name, error)` of those that failed.
pub type Compiled = (Vec<Arc<dyn ResourceInterpreter>>, Vec<(String, String)>);

/// Compile `rics` with `backends`, sorted by name as Karmada's configuration manager does.
/// Returns the compiled customizations and, per customization that failed, its name and error.
pub fn compile_customizations<'a>(
    rics: impl IntoIterator<Item = &'a ResourceInterpreterCustomization>,
    backends: &[Arc<dyn RuleBackend>],
) -> Compiled {
    let backends: Vec<&dyn RuleBackend> = backends.iter().map(AsRef::as_ref).collect();
    let mut rics: Vec<&ResourceInterpreterCustomization> = rics.into_iter().collect();
    rics.sort_by(|a, b| a.metadata.name().cmp(b.metadata.name()));
    let mut compiled: Vec<Arc<dyn ResourceInterpreter>> = Vec::new();
    let mut failed = Vec::new();
    for ric in rics {
        match Customization::compile(ric, &backends) {
            Ok(c) => compiled.push(Arc::new(c)),
            Err(e) => failed.push((ric.metadata.name().to_owned(), e)),
        }
    }
    (compiled, failed)
}

/// A native handler's failure, named after the interpreter.
pub(crate) fn fail(message: impl Into<String>) -> PluginError {
    PluginError::failed(NAME, message)
}

/// The integer at JSON pointer `p`: `None` when absent or null, an error when it is not an
/// integer (Karmada's typed conversion rejects such an object).
pub(crate) fn int_at(v: &Value, p: &str) -> Result<Option<i64>, PluginError> {
    match v.pointer(p) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x.as_i64().map(Some).ok_or_else(|| {
            fail(format!(
                "{}: expected an integer, got {x}",
                p.trim_start_matches('/').replace('/', ".")
            ))
        }),
    }
}

/// The string at JSON pointer `p` ("" when absent, null or not a string).
pub(crate) fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// The array at JSON pointer `p` (empty when absent or not an array).
pub(crate) fn array_at<'a>(v: &'a Value, p: &str) -> &'a [Value] {
    v.pointer(p)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

fn gvk(object: &Value) -> (&str, &str) {
    (str_at(object, "/apiVersion"), str_at(object, "/kind"))
}

impl ResourceInterpreter for Native {
    fn name(&self) -> &str {
        NAME
    }

    fn hook_enabled(&self, api_version: &str, kind: &str, op: Operation) -> bool {
        op == Operation::InterpretStatus
            || handles(op)
                .iter()
                .any(|(a, k)| *a == api_version && *k == kind)
    }

    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        replica::get_replicas(object)
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        replica::revise_replica(object, replicas)
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        retain::retain(desired, observed)
    }

    fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        aggregate::aggregate_status(object, items)
    }

    fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        reflect::reflect_status(observed)
    }

    fn interpret_health(&self, observed: &Value) -> Result<bool, PluginError> {
        health::interpret_health(observed)
    }

    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        let deps = dependencies::get_dependencies(object)?;
        dependencies::verify(&deps)?;
        Ok(deps)
    }
}
