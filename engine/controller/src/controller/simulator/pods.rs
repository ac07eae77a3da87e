//! Simulated pods with simulated load, so autoscaling can be tried on simulated members.
//!
//! A member Deployment annotated [`SIMULATED_CPU_UTILIZATION`] and/or
//! [`SIMULATED_MEMORY_UTILIZATION`] (percent of the containers' requests; set them on the
//! template on the control plane and they propagate) gets `spec.replicas` Pods named
//! `<deployment>-sim-<n>`: the template's labels and containers, `Running` and `Ready`, and
//! annotated [`SIMULATED_USAGE`] with each container's usage, which the API server serves as
//! their `PodMetrics` (`kubectl top pods`). A container without a request uses the percentage of
//! one CPU (and of 64 MiB of memory). A Deployment annotated [`SIMULATED_POD_CUSTOM_METRICS`]
//! (`{"http_requests_per_second": "30"}`) gets pods too, each annotated
//! [`SIMULATED_CUSTOM_METRICS`] with that text, which the API server serves as the pods'
//! `custom.metrics.k8s.io` values. Changing an annotation or the replicas updates the pods;
//! removing all three annotations deletes them. Deployments without any get no pods (a member
//! of thousands of Deployments stays cheap). At most [`MAX_PODS`] pods per Deployment.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use flotilla_api::autoscaling::{
    SIMULATED_CPU_UTILIZATION, SIMULATED_CUSTOM_METRICS, SIMULATED_MEMORY_UTILIZATION,
    SIMULATED_POD_CUSTOM_METRICS, SIMULATED_USAGE,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use crate::Error;

/// The label tying a simulated pod to its Deployment.
pub const POD_OF: &str = "flotilla.dev/simulated-pod-of";
/// The most pods simulated for one Deployment.
pub const MAX_PODS: i32 = 1000;
/// Memory usage is a percentage of this when a container requests none (bytes).
const DEFAULT_MEMORY: i128 = 64 << 20;
/// CPU usage is a percentage of this when a container requests none (millicores).
const DEFAULT_CPU: i128 = 1000;
/// Memory utilization when only CPU is given, and the reverse.
const DEFAULT_UTILIZATION: i128 = 50;

/// Deployments (`namespace/name`) of one member that have simulated pods.
#[derive(Debug, Default)]
pub struct Simulated(Mutex<HashSet<String>>);

fn utilization(d: &Deployment, key: &str) -> Option<i128> {
    d.annotations()
        .get(key)
        .and_then(|v| v.trim().trim_end_matches('%').parse::<i128>().ok())
        .map(|v| v.clamp(0, 100_000))
}

/// Each container's usage `{"<name>": {"cpu": "<m>m", "memory": "<bytes>"}}` at the given
/// utilizations (percent).
fn usage(d: &Deployment, cpu: i128, memory: i128) -> Value {
    let mut out = serde_json::Map::new();
    let containers = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    for c in containers {
        let request = |r: &str| {
            c.resources
                .as_ref()
                .and_then(|res| res.requests.as_ref())
                .and_then(|req| req.get(r))
                .and_then(|q| flotilla_core::quantity::parse_nano(&q.0).ok())
        };
        let cpu_m = request("cpu").map_or(DEFAULT_CPU, |n| n / 1_000_000) * cpu / 100;
        let mem_b = request("memory").map_or(DEFAULT_MEMORY, |n| n / 1_000_000_000) * memory / 100;
        out.insert(
            c.name.clone(),
            json!({"cpu": format!("{cpu_m}m"), "memory": mem_b.to_string()}),
        );
    }
    Value::Object(out)
}

fn pod_name(deployment: &str, i: i32) -> String {
    let base: String = deployment.chars().take(200).collect();
    format!("{base}-sim-{i}")
}

/// The per-pod custom metrics a Deployment asks for (its annotation's text, when it is a JSON
/// object; anything else is ignored with a log line).
fn custom_metrics(d: &Deployment) -> Option<String> {
    let text = d.annotations().get(SIMULATED_POD_CUSTOM_METRICS)?;
    match serde_json::from_str::<serde_json::Map<String, Value>>(text) {
        Ok(_) => Some(text.clone()),
        Err(e) => {
            tracing::warn!(deployment = %d.name_any(), error = %e,
                "{SIMULATED_POD_CUSTOM_METRICS} is not a JSON object; no custom metrics simulated");
            None
        }
    }
}

fn pod(d: &Deployment, name: &str, usage: &str, custom: Option<&str>) -> Value {
    let template = d.spec.as_ref().map(|s| &s.template);
    let mut labels: BTreeMap<String, String> = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(POD_OF.to_owned(), d.name_any());
    let containers: Vec<Value> = template
        .and_then(|t| t.spec.as_ref())
        .map(|s| {
            s.containers
                .iter()
                .map(|c| json!({"name": c.name, "image": c.image, "resources": c.resources}))
                .collect()
        })
        .unwrap_or_default();
    let mut annotations = json!({SIMULATED_USAGE: usage});
    if let Some(c) = custom {
        annotations[SIMULATED_CUSTOM_METRICS] = json!(c);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": d.namespace(), "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": d.name_any(),
                                 "uid": d.uid().unwrap_or_default(), "controller": true}],
        },
        "spec": {"containers": containers},
    })
}

fn running_status() -> Value {
    let now = flotilla_core::time::format_rfc3339(crate::clock::now_epoch());
    json!({"status": {
        "phase": "Running", "startTime": now,
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
        ],
    }})
}

impl Simulated {
    fn remember(&self, key: &str, has: bool) -> bool {
        let mut s = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if has {
            s.insert(key.to_owned())
        } else {
            s.remove(key)
        }
    }

    /// Bring the simulated pods of `d` (in the member `client` reaches) in line with its
    /// replicas and load annotations.
    ///
    /// # Errors
    /// A request to the member fails.
    pub async fn sync(&self, client: &Client, d: &Deployment) -> Result<(), Error> {
        let ns = d.namespace().unwrap_or_default();
        let key = format!("{ns}/{}", d.name_any());
        let cpu = utilization(d, SIMULATED_CPU_UTILIZATION);
        let memory = utilization(d, SIMULATED_MEMORY_UTILIZATION);
        let deleting = d.metadata.deletion_timestamp.is_some();
        let custom = custom_metrics(d);
        let wanted = !deleting && (cpu.is_some() || memory.is_some() || custom.is_some());
        let had = self.0.lock().map(|s| s.contains(&key)).unwrap_or(false);
        if !wanted && !had {
            return Ok(());
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let existing = api
            .list(&ListParams::default().labels(&format!("{POD_OF}={}", d.name_any())))
            .await?;
        let replicas = if wanted {
            d.spec
                .as_ref()
                .and_then(|s| s.replicas)
                .unwrap_or(1)
                .clamp(0, MAX_PODS)
        } else {
            0
        };
        let usage = usage(
            d,
            cpu.unwrap_or(DEFAULT_UTILIZATION),
            memory.unwrap_or(DEFAULT_UTILIZATION),
        )
        .to_string();
        let mut present = HashSet::new();
        for p in existing.items {
            let name = p.name_any();
            let keep = (0..replicas).any(|i| pod_name(&d.name_any(), i) == name);
            if !keep {
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
                continue;
            }
            present.insert(name.clone());
            if p.annotations().get(SIMULATED_USAGE) != Some(&usage)
                || p.annotations().get(SIMULATED_CUSTOM_METRICS) != custom.as_ref()
            {
                let patch = json!({"metadata": {"annotations": {
                    SIMULATED_USAGE: usage, SIMULATED_CUSTOM_METRICS: custom,
                }}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
            }
        }
        for i in 0..replicas {
            let name = pod_name(&d.name_any(), i);
            if present.contains(&name) {
                continue;
            }
            let body: Pod = serde_json::from_value(pod(d, &name, &usage, custom.as_deref()))
                .map_err(|source| Error::Decode {
                    what: format!("simulated pod {name}"),
                    source,
                })?;
            match api.create(&PostParams::default(), &body).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(running_status()),
            )
            .await?;
        }
        self.remember(&key, wanted);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(annotations: Value, requests: Value) -> Deployment {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": requests}}]}}},
        }))
        .expect("deployment")
    }

    #[test]
    fn usage_is_the_annotated_share_of_each_request() {
        let d = deployment(
            json!({SIMULATED_CPU_UTILIZATION: "80"}),
            json!({"cpu": "500m", "memory": "128Mi"}),
        );
        let cpu = utilization(&d, SIMULATED_CPU_UTILIZATION).expect("cpu");
        let u = usage(&d, cpu, DEFAULT_UTILIZATION);
        assert_eq!(u["c"]["cpu"], "400m");
        assert_eq!(u["c"]["memory"], (64 << 20).to_string());
        let none = deployment(json!({SIMULATED_CPU_UTILIZATION: "25%"}), json!({}));
        let u = usage(&none, 25, 100);
        assert_eq!(
            u["c"]["cpu"], "250m",
            "a quarter of one CPU without a request"
        );
        assert_eq!(u["c"]["memory"], (64 << 20).to_string());
        let garbage = deployment(json!({SIMULATED_CPU_UTILIZATION: "lots"}), json!({}));
        assert_eq!(utilization(&garbage, SIMULATED_CPU_UTILIZATION), None);
        let p = pod(&d, &pod_name("web", 1), "{}", None);
        assert!(
            p["metadata"]["annotations"]
                .get(SIMULATED_CUSTOM_METRICS)
                .is_none()
        );
        assert_eq!(p["metadata"]["labels"]["app"], "web");
        assert_eq!(p["metadata"]["labels"][POD_OF], "web");
        assert_eq!(p["metadata"]["name"], "web-sim-1");
    }

    #[test]
    fn per_pod_custom_metrics_are_copied_when_they_are_an_object() {
        let d = deployment(
            json!({SIMULATED_POD_CUSTOM_METRICS: r#"{"rps": "30"}"#}),
            json!({}),
        );
        let c = custom_metrics(&d);
        assert_eq!(c.as_deref(), Some(r#"{"rps": "30"}"#));
        let p = pod(&d, "web-sim-0", "{}", c.as_deref());
        assert_eq!(
            p["metadata"]["annotations"][SIMULATED_CUSTOM_METRICS],
            r#"{"rps": "30"}"#
        );
        for bad in ["30", "[1]", "{"] {
            let d = deployment(json!({SIMULATED_POD_CUSTOM_METRICS: bad}), json!({}));
            assert_eq!(custom_metrics(&d), None, "{bad}");
        }
    }
}
