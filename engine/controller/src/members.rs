//! Simulated members: logical clusters of the embedded server registered as `Cluster` objects.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::{Error, api_resource};

/// Capacity a simulated member reports in `status.resourceSummary.allocatable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// CPU, a quantity (`64`).
    pub cpu: String,
    /// Memory, a quantity (`256Gi`).
    pub memory: String,
    /// Pods.
    pub pods: String,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity { cpu: "64".into(), memory: "256Gi".into(), pods: "110".into() }
    }
}

/// The names of `n` simulated members: `member1..memberN`.
pub fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("member{i}")).collect()
}

/// `status.apiEnablements` of a simulated member: every built-in kind the embedded server serves.
pub fn api_enablements() -> Value {
    let mut by_gv: std::collections::BTreeMap<String, Vec<Value>> = std::collections::BTreeMap::new();
    for r in flotilla_apiserver::registry::all() {
        if r.group.ends_with("karmada.io") {
            continue;
        }
        by_gv.entry(r.api_version()).or_default().push(json!({"name": r.plural, "kind": r.kind}));
    }
    Value::Array(by_gv.into_iter().map(|(gv, resources)| json!({"groupVersion": gv, "resources": resources})).collect())
}

/// Register (or refresh) simulated member `name` on the control plane: the `Cluster` object,
/// its Ready status and its execution namespace.
///
/// # Errors
/// Fails when a request fails.
pub async fn register(control: &Client, name: &str, endpoint: &str, capacity: &Capacity) -> Result<(), Error> {
    let pp = PatchParams::apply("flotilla-members").force();
    let clusters: Api<DynamicObject> = Api::all_with(control.clone(), &api_resource("cluster.karmada.io/v1alpha1", "Cluster"));
    let obj = json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": {"flotilla.dev/simulated": "true"}},
        "spec": {"syncMode": "Push", "apiEndpoint": endpoint},
    });
    clusters.patch(name, &pp, &Patch::Apply(obj)).await?;
    let now = flotilla_core::time::format_rfc3339(now_epoch());
    let status = json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "status": {
            "kubernetesVersion": "v1.33.0",
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "ClusterReady",
                "message": "cluster is healthy and ready to accept workloads", "lastTransitionTime": now,
            }],
            "apiEnablements": api_enablements(),
            "resourceSummary": {
                "allocatable": {"cpu": capacity.cpu, "memory": capacity.memory, "pods": capacity.pods},
                "allocated": {"cpu": "0", "memory": "0", "pods": "0"},
            },
        },
    });
    clusters.patch_status(name, &pp, &Patch::Apply(status)).await?;
    let namespaces: Api<DynamicObject> = Api::all_with(control.clone(), &api_resource("v1", "Namespace"));
    let es = flotilla_core::render::execution_namespace(name);
    namespaces.patch(&es, &pp, &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": es}}))).await?;
    Ok(())
}

/// Seconds since the epoch.
pub fn now_epoch() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)).unwrap_or(0)
}
