//! `metrics.k8s.io/v1beta1`: `PodMetrics` and `NodeMetrics`, what `kubectl top` and the
//! FederatedHPA controller read.
//!
//! - In a **member's logical cluster** (a simulated member), the metrics are those of the pods
//!   the simulator runs: each pod annotated [`SIMULATED_USAGE`] (its containers' CPU and memory)
//!   has a `PodMetrics` of the same name, namespace and labels; pods without it have none, as
//!   pods the kubelet has not reported yet. A `NodeMetrics` is served for each stored Node,
//!   adding up the simulated pods bound to it (`spec.nodeName`).
//! - On the **control plane** (the root keyspace), as karmada-metrics-adapter does, each
//!   member's own `metrics.k8s.io` is queried (through the cluster proxy, so simulated and Push
//!   members alike; Pull members cannot be reached) and the items are merged, each annotated
//!   `resource.karmada.io/query-from-cluster: <member>`. A member that fails to answer is left
//!   out; a single object is the first member's that has it.
//!
//! Only `get` and `list` (no watch), with `labelSelector`; answers are bounded
//! ([`MAX_MEMBER_ANSWER`] per member, [`MAX_ITEMS`] items).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use flotilla_api::autoscaling::{QUERY_FROM_CLUSTER, SIMULATED_USAGE};
use http_body_util::BodyExt as _;
use serde_json::{Map, Value, json};

use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::proxy::ProxyPath;
use crate::registry::Resource;
use crate::selector::LabelSelector;
use crate::server::ApiServer;

/// The group.
pub const GROUP: &str = "metrics.k8s.io";
/// The version.
pub const VERSION: &str = "v1beta1";
/// The most bytes read from one member's answer.
pub const MAX_MEMBER_ANSWER: usize = 16 << 20;
/// The most items one answer carries (the rest are left out).
pub const MAX_ITEMS: usize = 50_000;
/// The window simulated samples are reported over (metrics-server's default resolution).
const WINDOW: &str = "15s";

/// Whether `res` is one of this group's read-only resources.
pub fn is_metrics(res: &Resource) -> bool {
    res.group == GROUP
}

/// A parsed `metrics.k8s.io` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetricsPath {
    /// `pods` or `nodes`.
    pub pods: bool,
    /// The namespace (pods only); `None` for every namespace.
    pub namespace: Option<String>,
    /// One object's name.
    pub name: Option<String>,
}

/// Whether `segs` (the path, logical cluster prefix removed) is a metrics request.
pub(crate) fn parse(segs: &[&str]) -> Option<MetricsPath> {
    let path = |pods, namespace: Option<&str>, name: Option<&str>| MetricsPath {
        pods,
        namespace: namespace.map(crate::server::percent_decode),
        name: name.map(crate::server::percent_decode),
    };
    match segs {
        ["apis", GROUP, VERSION, "pods"] => Some(path(true, None, None)),
        ["apis", GROUP, VERSION, "pods", name] => Some(path(true, None, Some(name))),
        ["apis", GROUP, VERSION, "namespaces", ns, "pods"] => Some(path(true, Some(ns), None)),
        ["apis", GROUP, VERSION, "namespaces", ns, "pods", name] => {
            Some(path(true, Some(ns), Some(name)))
        }
        ["apis", GROUP, VERSION, "nodes"] => Some(path(false, None, None)),
        ["apis", GROUP, VERSION, "nodes", name] => Some(path(false, None, Some(name))),
        _ => None,
    }
}

fn kind(pods: bool) -> &'static str {
    if pods { "PodMetrics" } else { "NodeMetrics" }
}

fn qualified(pods: bool) -> &'static str {
    if pods {
        "pods.metrics.k8s.io"
    } else {
        "nodes.metrics.k8s.io"
    }
}

fn json_response(v: &Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// The usage of one simulated pod: `(container, cpu, memory)` as quantities, from its
/// [`SIMULATED_USAGE`] annotation (`None` without one or when it does not parse).
fn simulated_usage(pod: &Value) -> Option<Vec<(String, String, String)>> {
    let text = pod
        .pointer("/metadata/annotations")?
        .get(SIMULATED_USAGE)?
        .as_str()?;
    let usage: Map<String, Value> = serde_json::from_str(text).ok()?;
    Some(
        usage
            .into_iter()
            .map(|(c, u)| {
                let q = |k: &str| u.get(k).and_then(Value::as_str).unwrap_or("0").to_owned();
                (c, q("cpu"), q("memory"))
            })
            .collect(),
    )
}

fn pod_metrics(pod: &Value, timestamp: &str) -> Option<Value> {
    let usage = simulated_usage(pod)?;
    let meta = pod.get("metadata")?;
    let containers: Vec<Value> = usage
        .into_iter()
        .map(|(name, cpu, memory)| json!({"name": name, "usage": {"cpu": cpu, "memory": memory}}))
        .collect();
    Some(json!({
        "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {
            "name": meta.get("name"), "namespace": meta.get("namespace"),
            "labels": meta.get("labels").cloned().unwrap_or_else(|| json!({})),
            "creationTimestamp": timestamp,
        },
        "timestamp": timestamp, "window": WINDOW, "containers": containers,
    }))
}

/// A quantity of the forms the simulator writes (an integer with an optional SI or binary
/// suffix), in nano-units; `None` for anything else.
fn nano(q: &str) -> Option<i128> {
    let digits = q.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 30 {
        return None;
    }
    let n: i128 = q[..digits].parse().ok()?;
    let scale: i128 = match &q[digits..] {
        "n" => 1,
        "u" => 1_000,
        "m" => 1_000_000,
        "" => 1_000_000_000,
        "k" => 1_000_000_000_000,
        "M" => 1_000_000_000_000_000,
        "G" => 1_000_000_000_000_000_000,
        "Ki" => 1_000_000_000 << 10,
        "Mi" => 1_000_000_000 << 20,
        "Gi" => 1_000_000_000 << 30,
        "Ti" => 1_000_000_000 << 40,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// Add up quantities: CPU in milli-units, memory in bytes.
fn sum(quantities: &[String], cpu: bool) -> String {
    let total: i128 = quantities
        .iter()
        .filter_map(|q| nano(q))
        .fold(0i128, i128::saturating_add);
    if cpu {
        format!("{}m", total / 1_000_000)
    } else {
        (total / 1_000_000_000).to_string()
    }
}

impl ApiServer {
    /// Serve a `metrics.k8s.io` request in logical cluster `cluster` (`root` is the control
    /// plane's keyspace).
    pub(crate) async fn metrics(
        &self,
        cluster: &str,
        root: bool,
        m: MetricsPath,
        method: &Method,
        query: &crate::server::Query,
        user: Option<&UserInfo>,
    ) -> Result<Response, ApiError> {
        if method != Method::GET {
            return Err(ApiError::method_not_allowed());
        }
        if query.flag("watch") {
            return Err(ApiError::method_not_allowed());
        }
        let selector = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))?;
        let items = if root {
            self.aggregated(&m, query, user).await?
        } else {
            self.simulated(cluster, &m)?
        };
        let mut items: Vec<Value> = items
            .into_iter()
            .filter(|i| selector.matches(i))
            .take(MAX_ITEMS)
            .collect();
        match &m.name {
            Some(name) => {
                let found = items.iter().position(|i| {
                    i.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                });
                match found {
                    Some(i) => Ok(json_response(&items.swap_remove(i))),
                    None => Err(ApiError::not_found(qualified(m.pods), name)),
                }
            }
            None => Ok(json_response(&json!({
                "kind": format!("{}List", kind(m.pods)),
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {},
                "items": items,
            }))),
        }
    }

    /// The metrics of a simulated member's pods (and nodes).
    fn simulated(&self, cluster: &str, m: &MetricsPath) -> Result<Vec<Value>, ApiError> {
        let store_err = |e: crate::store::StoreError| ApiError::internal(e.to_string());
        let now = crate::time::now_rfc3339();
        let pod_prefix = match &m.namespace {
            Some(ns) => format!("/{cluster}/core/pods/{ns}/"),
            None => format!("/{cluster}/core/pods/"),
        };
        let pods = self
            .store()
            .list(&pod_prefix, None, Some(MAX_ITEMS))
            .map_err(store_err)?
            .items;
        if m.pods {
            return Ok(pods
                .iter()
                .filter(|(_, p)| {
                    m.name.is_none()
                        || p.pointer("/metadata/name").and_then(Value::as_str) == m.name.as_deref()
                })
                .filter_map(|(_, p)| pod_metrics(p, &now))
                .collect());
        }
        let nodes = self
            .store()
            .list(&format!("/{cluster}/core/nodes/"), None, Some(MAX_ITEMS))
            .map_err(store_err)?
            .items;
        Ok(nodes
            .iter()
            .filter_map(|(_, n)| {
                let meta = n.get("metadata")?;
                let name = meta.get("name")?.as_str()?;
                let (mut cpu, mut memory) = (Vec::new(), Vec::new());
                for (_, p) in &pods {
                    if p.pointer("/spec/nodeName").and_then(Value::as_str) != Some(name) {
                        continue;
                    }
                    for (_, c, mem) in simulated_usage(p).unwrap_or_default() {
                        cpu.push(c);
                        memory.push(mem);
                    }
                }
                Some(json!({
                    "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {"name": name, "labels": meta.get("labels").cloned().unwrap_or_else(|| json!({})), "creationTimestamp": now},
                    "timestamp": now, "window": WINDOW,
                    "usage": {"cpu": sum(&cpu, true), "memory": sum(&memory, false)},
                }))
            })
            .collect())
    }

    /// Every member's metrics, merged, as karmada-metrics-adapter serves them.
    async fn aggregated(
        &self,
        m: &MetricsPath,
        query: &crate::server::Query,
        user: Option<&UserInfo>,
    ) -> Result<Vec<Value>, ApiError> {
        let root = crate::server::ROOT_CLUSTER;
        let clusters = self
            .store()
            .list(&format!("/{root}/cluster.karmada.io/clusters/"), None, None)
            .map_err(|e| ApiError::internal(e.to_string()))?
            .items;
        let mut path = format!("/apis/{GROUP}/{VERSION}/");
        if let Some(ns) = &m.namespace {
            path.push_str(&format!("namespaces/{ns}/"));
        }
        path.push_str(if m.pods { "pods" } else { "nodes" });
        // The selector is applied here, on the merged items; the name too (a member that does
        // not have it answers 404, which is no error here).
        if let Some(sel) = query.get("labelSelector") {
            path.push_str("?labelSelector=");
            path.push_str(&percent_encode(sel));
        }
        let mut out = Vec::new();
        for (_, c) in clusters {
            let Some(name) = c.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            if c.pointer("/spec/syncMode").and_then(Value::as_str) == Some("Pull") {
                continue;
            }
            let (p, q) = path.split_once('?').unwrap_or((path.as_str(), ""));
            let mut req = Request::builder().method(Method::GET);
            req = req.uri(if q.is_empty() {
                format!("/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy{p}")
            } else {
                format!("/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy{p}?{q}")
            });
            let Ok(mut req) = req
                .header(header::ACCEPT, "application/json")
                .body(Body::empty())
            else {
                continue;
            };
            if let Some(u) = user {
                req.extensions_mut().insert(u.clone());
            }
            let target = ProxyPath {
                logical: root.to_owned(),
                cluster: name.to_owned(),
                path: p.to_owned(),
            };
            let resp = Box::pin(self.proxy(target, req)).await;
            if !resp.status().is_success() {
                continue;
            }
            let Ok(body) = http_body_util::Limited::new(resp.into_body(), MAX_MEMBER_ANSWER)
                .collect()
                .await
            else {
                continue;
            };
            let Ok(list) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
                continue;
            };
            let Some(items) = list.get("items").and_then(Value::as_array) else {
                continue;
            };
            for item in items {
                if out.len() >= MAX_ITEMS {
                    break;
                }
                let mut item = item.clone();
                if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
                    if let Some(a) = annotations.as_object_mut() {
                        a.insert(QUERY_FROM_CLUSTER.to_owned(), json!(name));
                    }
                }
                out.push(item);
            }
        }
        Ok(out)
    }
}

pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_for_pods_and_nodes() {
        assert_eq!(
            parse(&[
                "apis",
                "metrics.k8s.io",
                "v1beta1",
                "namespaces",
                "web",
                "pods"
            ]),
            Some(MetricsPath {
                pods: true,
                namespace: Some("web".into()),
                name: None
            })
        );
        assert_eq!(
            parse(&["apis", "metrics.k8s.io", "v1beta1", "nodes", "n1"]),
            Some(MetricsPath {
                pods: false,
                namespace: None,
                name: Some("n1".into())
            })
        );
        assert_eq!(parse(&["apis", "metrics.k8s.io", "v1beta1"]), None);
        assert_eq!(parse(&["apis", "apps", "v1", "deployments"]), None);
    }

    #[test]
    fn simulated_usage_becomes_pod_metrics_and_bad_annotations_none() {
        let pod = json!({"metadata": {"name": "p", "namespace": "d", "labels": {"app": "w"},
            "annotations": {SIMULATED_USAGE: r#"{"c":{"cpu":"400m","memory":"64Mi"}}"#}}});
        let m = pod_metrics(&pod, "2026-01-01T00:00:00Z").expect("metrics");
        assert_eq!(m["containers"][0]["usage"]["cpu"], "400m");
        assert_eq!(m["metadata"]["labels"]["app"], "w");
        let bad = json!({"metadata": {"name": "p", "annotations": {SIMULATED_USAGE: "{"}}});
        assert_eq!(pod_metrics(&bad, "t"), None);
        assert_eq!(pod_metrics(&json!({"metadata": {"name": "p"}}), "t"), None);
        assert_eq!(sum(&["400m".into(), "1".into()], true), "1400m");
        assert_eq!(sum(&["64Mi".into(), "1Ki".into()], false), "67109888");
        assert_eq!(
            percent_encode("app=web,x in (a)"),
            "app%3Dweb%2Cx%20in%20%28a%29"
        );
    }
}
