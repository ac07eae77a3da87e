//! `custom.metrics.k8s.io` (`v1beta2`, `v1beta1`) and `external.metrics.k8s.io/v1beta1`: the
//! metrics a FederatedHPA's `Pods`, `Object` and `External` sources read.
//!
//! - In a **member's logical cluster** (a simulated member) the values come from annotations:
//!   an object annotated [`SIMULATED_CUSTOM_METRICS`] (`{"<metric>": "<quantity>"}`) has those
//!   custom metrics (the pod simulator writes it on each pod from its Deployment's
//!   `flotilla.dev/simulated-pod-custom-metrics`), and each ConfigMap annotated
//!   [`SIMULATED_EXTERNAL_METRICS`] contributes one series per metric it names to the external
//!   metrics of its namespace, labelled with the ConfigMap's labels (what a metric selector
//!   matches).
//! - On the **control plane** (the root keyspace), as karmada-metrics-adapter does, every member
//!   that serves the group is asked through the cluster proxy (Pull members cannot be reached;
//!   members that fail or do not serve it are left out): discovery lists the union of the
//!   members' metrics; a metric of one named object is the sum of the members' values; a metric
//!   of the objects a selector picks adds up the values of objects of the same name; external
//!   series are listed from every member (the HPA adds them up).
//!
//! Only `get`; answers are bounded ([`crate::metrics::MAX_MEMBER_ANSWER`] per member,
//! [`crate::metrics::MAX_ITEMS`] items). Values are kept to milli-units, the precision the HPA
//! reads.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use flotilla_api::autoscaling::{SIMULATED_CUSTOM_METRICS, SIMULATED_EXTERNAL_METRICS};
use http_body_util::BodyExt as _;
use serde_json::{Map, Value, json};

use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::metrics::{MAX_ITEMS, MAX_MEMBER_ANSWER};
use crate::proxy::ProxyPath;
use crate::selector::LabelSelector;
use crate::server::ApiServer;

/// The custom metrics group.
pub const CUSTOM_GROUP: &str = "custom.metrics.k8s.io";
/// The external metrics group.
pub const EXTERNAL_GROUP: &str = "external.metrics.k8s.io";
/// The groups with their versions, preferred first. They answer `/apis/<group>` and
/// `/apis/<group>/<version>` but are not listed in `/apis`: client-go's discovery fails on a
/// group version without resources, which these are until some metric exists.
pub const GROUPS: [(&str, &[&str]); 2] = [
    (CUSTOM_GROUP, &["v1beta2", "v1beta1"]),
    (EXTERNAL_GROUP, &["v1beta1"]),
];
/// The window simulated values are reported over, in seconds.
const WINDOW_SECONDS: i64 = 15;

/// A parsed request of either group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MetricsRequest {
    /// `/apis/<group>`.
    Group(&'static str),
    /// `/apis/<group>/<version>`: which metrics there are.
    Resources(&'static str, &'static str),
    /// A custom metric of one object, or of every object a selector picks (`name` `*`).
    Custom {
        /// `v1beta2` or `v1beta1`.
        version: &'static str,
        /// The objects' namespace (`None`: cluster-scoped).
        namespace: Option<String>,
        /// `plural` or `plural.group` (`pods`, `deployments.apps`; `namespaces` for a
        /// namespace's own metrics).
        resource: String,
        /// The object's name, or `*`.
        name: String,
        /// The metric.
        metric: String,
    },
    /// The series of an external metric in a namespace.
    External {
        /// The namespace.
        namespace: String,
        /// The metric.
        metric: String,
    },
}

fn version_of(group: &str, v: &str) -> Option<&'static str> {
    GROUPS
        .iter()
        .find(|(g, _)| *g == group)
        .and_then(|(_, vs)| vs.iter().find(|x| **x == v).copied())
}

/// Whether `segs` (the path, logical cluster prefix removed) is a request of either group.
pub(crate) fn parse(segs: &[&str]) -> Option<MetricsRequest> {
    let d = crate::server::percent_decode;
    match segs {
        ["apis", CUSTOM_GROUP] => Some(MetricsRequest::Group(CUSTOM_GROUP)),
        ["apis", EXTERNAL_GROUP] => Some(MetricsRequest::Group(EXTERNAL_GROUP)),
        ["apis", g, v] => {
            let group = GROUPS.iter().find(|(x, _)| x == g)?.0;
            Some(MetricsRequest::Resources(group, version_of(group, v)?))
        }
        ["apis", CUSTOM_GROUP, v, rest @ ..] => {
            let version = version_of(CUSTOM_GROUP, v)?;
            let custom = |namespace: Option<&str>, resource: &str, name: &str, metric: &str| {
                MetricsRequest::Custom {
                    version,
                    namespace: namespace.map(d),
                    resource: d(resource),
                    name: d(name),
                    metric: d(metric),
                }
            };
            match rest {
                ["namespaces", ns, "metrics", metric] => {
                    Some(custom(None, "namespaces", ns, metric))
                }
                ["namespaces", ns, resource, name, metric] => {
                    Some(custom(Some(ns), resource, name, metric))
                }
                [resource, name, metric] => Some(custom(None, resource, name, metric)),
                _ => None,
            }
        }
        ["apis", EXTERNAL_GROUP, "v1beta1", "namespaces", ns, metric] => {
            Some(MetricsRequest::External {
                namespace: d(ns),
                metric: d(metric),
            })
        }
        _ => None,
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

/// A quantity in milli-units: decimal digits with an optional fraction and an SI or binary
/// suffix (`30`, `1.5`, `250m`, `2k`, `1Ki`, `1e3`); `None` for anything else or out of range.
pub fn milli(q: &str) -> Option<i128> {
    let q = q.trim();
    let (neg, q) = match q.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, q.strip_prefix('+').unwrap_or(q)),
    };
    let num_len = q
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let (num, suffix) = q.split_at(num_len);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || int.len() > 24 || frac.contains('.') {
        return None;
    }
    // Value in nano-units of the digits before the suffix.
    let mut nano: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    nano = nano.checked_mul(1_000_000_000)?;
    for (i, c) in frac.bytes().take(9).enumerate() {
        nano += i128::from(c - b'0') * 10i128.pow(8 - i as u32);
    }
    let scaled = match suffix {
        "n" => nano / 1_000_000_000,
        "u" => nano / 1_000_000,
        "m" => nano / 1_000,
        "" => nano,
        "k" => nano.checked_mul(1_000)?,
        "M" => nano.checked_mul(1_000_000)?,
        "G" => nano.checked_mul(1_000_000_000)?,
        "T" => nano.checked_mul(1_000_000_000_000)?,
        "Ki" => nano.checked_mul(1 << 10)?,
        "Mi" => nano.checked_mul(1 << 20)?,
        "Gi" => nano.checked_mul(1 << 30)?,
        "Ti" => nano.checked_mul(1 << 40)?,
        s => {
            let exp: i32 = s.strip_prefix(['e', 'E'])?.parse().ok()?;
            if !(-9..=18).contains(&exp) {
                return None;
            }
            if exp >= 0 {
                nano.checked_mul(10i128.pow(exp as u32))?
            } else {
                nano / 10i128.pow((-exp) as u32)
            }
        }
    };
    // `scaled` is the value in nano-units.
    let m = scaled / 1_000_000;
    Some(if neg { -m } else { m })
}

/// A milli-value as a canonical quantity (`30`, `1500m`).
pub fn quantity(m: i128) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}

/// The `{"<metric>": "<quantity>"}` map of annotation `key` on `obj`, values in milli-units
/// (entries that do not parse are left out; an annotation that does not parse is none).
fn annotated(obj: &Value, key: &str) -> BTreeMap<String, i128> {
    let Some(text) = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
    else {
        return BTreeMap::new();
    };
    let Ok(map) = serde_json::from_str::<Map<String, Value>>(text) else {
        return BTreeMap::new();
    };
    map.into_iter()
        .filter_map(|(k, v)| {
            let m = match &v {
                Value::String(s) => milli(s)?,
                Value::Number(n) => milli(&n.to_string())?,
                _ => return None,
            };
            Some((k, m))
        })
        .collect()
}

/// One v1beta2 `MetricValue`.
fn metric_value(
    described: Value,
    metric: &str,
    selector: Option<&str>,
    now: &str,
    value: i128,
) -> Value {
    let mut id = json!({"name": metric});
    if let Some(s) = selector.filter(|s| !s.is_empty()) {
        id["selector"] = label_selector_json(s);
    }
    json!({
        "describedObject": described,
        "metric": id,
        "timestamp": now,
        "windowSeconds": WINDOW_SECONDS,
        "value": quantity(value),
    })
}

/// A `metricLabelSelector` query string as a `LabelSelector` object (equality terms as
/// `matchLabels`, the rest as `matchExpressions`).
fn label_selector_json(s: &str) -> Value {
    let mut match_labels = Map::new();
    let mut exprs = Vec::new();
    for term in split_terms(s) {
        let term = term.trim();
        if let Some((k, v)) = term.split_once("!=") {
            exprs.push(json!({"key": k.trim(), "operator": "NotIn", "values": [v.trim()]}));
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            match_labels.insert(k.trim().to_owned(), json!(v.trim()));
        } else if let Some(k) = term.strip_prefix('!') {
            exprs.push(json!({"key": k.trim(), "operator": "DoesNotExist"}));
        } else if let Some((k, rest)) = term.split_once(" notin ") {
            exprs.push(json!({"key": k.trim(), "operator": "NotIn", "values": set_values(rest)}));
        } else if let Some((k, rest)) = term.split_once(" in ") {
            exprs.push(json!({"key": k.trim(), "operator": "In", "values": set_values(rest)}));
        } else if !term.is_empty() {
            exprs.push(json!({"key": term, "operator": "Exists"}));
        }
    }
    let mut out = json!({});
    if !match_labels.is_empty() {
        out["matchLabels"] = Value::Object(match_labels);
    }
    if !exprs.is_empty() {
        out["matchExpressions"] = Value::Array(exprs);
    }
    out
}

fn set_values(s: &str) -> Vec<String> {
    s.trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

/// Split a selector on the commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The v1beta2 value list as `version` writes it (v1beta1: `metricName` and `selector` at the
/// top of each item).
fn versioned(items: Vec<Value>, version: &str) -> Value {
    let items: Vec<Value> = if version == "v1beta1" {
        items
            .into_iter()
            .map(|mut i| {
                let id = i
                    .as_object_mut()
                    .and_then(|o| o.remove("metric"))
                    .unwrap_or_default();
                i["metricName"] = id.get("name").cloned().unwrap_or_default();
                if let Some(s) = id.get("selector") {
                    i["selector"] = s.clone();
                }
                i
            })
            .collect()
    } else {
        items
    };
    json!({
        "kind": "MetricValueList",
        "apiVersion": format!("{CUSTOM_GROUP}/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// A v1beta1 item as v1beta2.
fn to_v1beta2(mut item: Value) -> Value {
    if item.get("metric").is_none() {
        let mut id = json!({"name": item.get("metricName").cloned().unwrap_or_default()});
        if let Some(s) = item.get("selector") {
            id["selector"] = s.clone();
        }
        if let Some(o) = item.as_object_mut() {
            o.remove("metricName");
            o.remove("selector");
            o.insert("metric".into(), id);
        }
    }
    item
}

fn not_found_metric(metric: &str, resource: &str, name: Option<&str>) -> ApiError {
    let message = match name {
        Some(n) => format!("the server could not find the metric {metric} for {resource} {n}"),
        None => format!("the server could not find the metric {metric} for {resource}"),
    };
    ApiError::new(404, "NotFound", message)
}

/// `plural` or `plural.group` as (plural, group); a group not served still parses.
fn split_resource(resource: &str) -> (&str, &str) {
    resource.split_once('.').unwrap_or((resource, ""))
}

impl ApiServer {
    /// Serve a `custom.metrics.k8s.io` or `external.metrics.k8s.io` request in logical cluster
    /// `cluster` (`root`: the control plane, which aggregates the members).
    pub(crate) async fn custom_metrics(
        &self,
        cluster: &str,
        root: bool,
        r: MetricsRequest,
        method: &Method,
        query: &crate::server::Query,
        user: Option<&UserInfo>,
    ) -> Result<Response, ApiError> {
        if method != Method::GET || query.flag("watch") {
            return Err(ApiError::method_not_allowed());
        }
        match r {
            MetricsRequest::Group(g) => {
                let (_, versions) = GROUPS
                    .iter()
                    .find(|(x, _)| *x == g)
                    .copied()
                    .unwrap_or((g, &[] as &[&str]));
                let vs: Vec<Value> = versions
                    .iter()
                    .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                    .collect();
                Ok(json_response(&json!({
                    "kind": "APIGroup", "apiVersion": "v1", "name": g,
                    "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
                })))
            }
            MetricsRequest::Resources(g, v) => {
                let resources = if root {
                    self.aggregated_resources(g, user).await
                } else {
                    self.simulated_resources(cluster, g)?
                };
                Ok(json_response(&json!({
                    "kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": format!("{g}/{v}"), "resources": resources,
                })))
            }
            MetricsRequest::Custom {
                version,
                namespace,
                resource,
                name,
                metric,
            } => {
                let selector = query.get("labelSelector").unwrap_or("");
                let metric_selector = query.get("metricLabelSelector").unwrap_or("");
                let objects = LabelSelector::parse(selector)?;
                let metric_sel = LabelSelector::parse(metric_selector)?;
                let items = if root {
                    self.aggregated_custom(
                        namespace.as_deref(),
                        &resource,
                        &name,
                        &metric,
                        (selector, metric_selector),
                        user,
                    )
                    .await
                } else {
                    self.simulated_custom(
                        cluster,
                        namespace.as_deref(),
                        &resource,
                        &name,
                        &metric,
                        (&objects, &metric_sel, metric_selector),
                    )?
                };
                if items.is_empty() {
                    let named = (name != "*").then_some(name.as_str());
                    return Err(not_found_metric(&metric, &resource, named));
                }
                Ok(json_response(&versioned(items, version)))
            }
            MetricsRequest::External { namespace, metric } => {
                let selector = query.get("labelSelector").unwrap_or("");
                let sel = LabelSelector::parse(selector)?;
                let items = if root {
                    self.aggregated_external(&namespace, &metric, selector, user)
                        .await
                } else {
                    self.simulated_external(cluster, &namespace, &metric, &sel)?
                };
                Ok(json_response(&json!({
                    "kind": "ExternalMetricValueList",
                    "apiVersion": format!("{EXTERNAL_GROUP}/v1beta1"),
                    "metadata": {},
                    "items": items,
                })))
            }
        }
    }

    fn list_prefix(&self, prefix: &str) -> Result<Vec<std::sync::Arc<Value>>, ApiError> {
        Ok(self
            .store()
            .list(prefix, None, Some(MAX_ITEMS))
            .map_err(|e| ApiError::internal(e.to_string()))?
            .items
            .into_iter()
            .map(|(_, v)| v)
            .collect())
    }

    /// The store prefix of `resource` (`plural[.group]`) in `namespace`, and whether it is
    /// namespaced; `None` for a resource this server does not know.
    fn resource_prefix(
        cluster: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Option<(String, &'static crate::registry::Resource)> {
        let (plural, group) = split_resource(resource);
        let res = crate::registry::all()
            .into_iter()
            .find(|r| r.plural == plural && r.group == group)?;
        let prefix = match namespace {
            Some(ns) if res.namespaced => {
                format!("/{cluster}/{}/{}/{ns}/", res.group_key(), res.plural)
            }
            _ => format!("/{cluster}/{}/{}/", res.group_key(), res.plural),
        };
        Some((prefix, res))
    }

    /// Which custom (`<resource>/<metric>`) or external (`<metric>`) metrics the simulated
    /// objects of a member have.
    fn simulated_resources(&self, cluster: &str, group: &str) -> Result<Vec<Value>, ApiError> {
        let mut names: BTreeMap<String, bool> = BTreeMap::new();
        if group == EXTERNAL_GROUP {
            for cm in self.list_prefix(&format!("/{cluster}/core/configmaps/"))? {
                for metric in annotated(&cm, SIMULATED_EXTERNAL_METRICS).into_keys() {
                    names.insert(metric, true);
                }
            }
            return Ok(names
                .into_keys()
                .map(|n| json!({"name": n, "singularName": "", "namespaced": true, "kind": "ExternalMetricValueList", "verbs": ["get"]}))
                .collect());
        }
        // The kinds the simulator annotates, and any other namespaced kind asked for by name.
        for res in crate::registry::all() {
            if crate::metrics::is_metrics(res) || res.group == CUSTOM_GROUP {
                continue;
            }
            if !matches!(
                (res.group, res.plural),
                ("", "pods" | "services" | "configmaps" | "namespaces")
                    | ("apps", "deployments" | "statefulsets" | "replicasets")
                    | ("networking.k8s.io", "ingresses")
            ) {
                continue;
            }
            let prefix = format!("/{cluster}/{}/{}/", res.group_key(), res.plural);
            for obj in self.list_prefix(&prefix)? {
                for metric in annotated(&obj, SIMULATED_CUSTOM_METRICS).into_keys() {
                    let qualified = if res.group.is_empty() {
                        res.plural.to_owned()
                    } else {
                        format!("{}.{}", res.plural, res.group)
                    };
                    names.insert(format!("{qualified}/{metric}"), res.namespaced);
                }
            }
        }
        Ok(names
            .into_iter()
            .map(|(n, namespaced)| json!({"name": n, "singularName": "", "namespaced": namespaced, "kind": "MetricValueList", "verbs": ["get"]}))
            .collect())
    }

    /// A simulated member's values of custom metric `metric` for `name` (or `*`, the objects
    /// `selector` picks) of `resource` in `namespace`.
    fn simulated_custom(
        &self,
        cluster: &str,
        namespace: Option<&str>,
        resource: &str,
        name: &str,
        metric: &str,
        (objects, metric_selector, metric_text): (&LabelSelector, &LabelSelector, &str),
    ) -> Result<Vec<Value>, ApiError> {
        // Simulated series have no labels: a metric selector requiring one matches nothing.
        if !metric_selector.matches(&json!({"metadata": {"labels": {}}})) {
            return Ok(Vec::new());
        }
        let (namespace, resource) = if resource == "namespaces" {
            // `/namespaces/<ns>/metrics/<metric>` is the namespace object's own metric.
            (None, "namespaces")
        } else {
            (namespace, resource)
        };
        let Some((prefix, res)) = Self::resource_prefix(cluster, resource, namespace) else {
            return Ok(Vec::new());
        };
        let now = crate::time::now_rfc3339();
        let mut out = Vec::new();
        for obj in self.list_prefix(&prefix)? {
            let obj_name = obj.pointer("/metadata/name").and_then(Value::as_str);
            if name == "*" {
                if !objects.matches(&obj) {
                    continue;
                }
            } else if obj_name != Some(name) {
                continue;
            }
            let Some(value) = annotated(&obj, SIMULATED_CUSTOM_METRICS)
                .get(metric)
                .copied()
            else {
                continue;
            };
            let mut described = json!({
                "kind": res.kind, "name": obj_name, "apiVersion": res.api_version(),
            });
            if res.namespaced {
                described["namespace"] = obj
                    .pointer("/metadata/namespace")
                    .cloned()
                    .unwrap_or_default();
            }
            out.push(metric_value(
                described,
                metric,
                Some(metric_text),
                &now,
                value,
            ));
            if out.len() >= MAX_ITEMS {
                break;
            }
        }
        Ok(out)
    }

    /// A simulated member's series of external metric `metric` in `namespace`.
    fn simulated_external(
        &self,
        cluster: &str,
        namespace: &str,
        metric: &str,
        selector: &LabelSelector,
    ) -> Result<Vec<Value>, ApiError> {
        let now = crate::time::now_rfc3339();
        let mut out = Vec::new();
        for cm in self.list_prefix(&format!("/{cluster}/core/configmaps/{namespace}/"))? {
            let Some(value) = annotated(&cm, SIMULATED_EXTERNAL_METRICS)
                .get(metric)
                .copied()
            else {
                continue;
            };
            if !selector.matches(&cm) {
                continue;
            }
            out.push(json!({
                "metricName": metric,
                "metricLabels": cm.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
                "timestamp": now,
                "windowSeconds": WINDOW_SECONDS,
                "value": quantity(value),
            }));
        }
        Ok(out)
    }

    /// GET `path_and_query` on every member that can be reached through the cluster proxy:
    /// `(member, answer)` for each that answered 2xx with JSON.
    async fn ask_members(
        &self,
        path_and_query: &str,
        user: Option<&UserInfo>,
    ) -> Vec<(String, Value)> {
        let root = crate::server::ROOT_CLUSTER;
        let Ok(clusters) = self.list_prefix(&format!("/{root}/cluster.karmada.io/clusters/"))
        else {
            return Vec::new();
        };
        let path = path_and_query
            .split_once('?')
            .map_or(path_and_query, |(p, _)| p);
        let mut out = Vec::new();
        for c in clusters {
            let Some(name) = c.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            if c.pointer("/spec/syncMode").and_then(Value::as_str) == Some("Pull") {
                continue;
            }
            let Ok(mut req) = Request::builder()
                .method(Method::GET)
                .uri(format!(
                    "/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy{path_and_query}"
                ))
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
                path: path.to_owned(),
            };
            let resp = Box::pin(self.proxy(target, req)).await;
            if !resp.status().is_success() {
                tracing::debug!(cluster = %name, status = %resp.status(), path, "member metrics unavailable");
                continue;
            }
            let Ok(body) = http_body_util::Limited::new(resp.into_body(), MAX_MEMBER_ANSWER)
                .collect()
                .await
            else {
                continue;
            };
            if let Ok(v) = serde_json::from_slice::<Value>(&body.to_bytes()) {
                out.push((name.to_owned(), v));
            }
        }
        out
    }

    /// The union of the members' metric lists.
    async fn aggregated_resources(&self, group: &str, user: Option<&UserInfo>) -> Vec<Value> {
        let version = if group == CUSTOM_GROUP {
            "v1beta2"
        } else {
            "v1beta1"
        };
        let mut seen = BTreeMap::new();
        for (_, list) in self
            .ask_members(&format!("/apis/{group}/{version}"), user)
            .await
        {
            for r in list
                .get("resources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(n) = r.get("name").and_then(Value::as_str)
                    && seen.len() < MAX_ITEMS
                {
                    seen.entry(n.to_owned()).or_insert_with(|| r.clone());
                }
            }
        }
        seen.into_values().collect()
    }

    /// A custom metric from every member, added up as karmada-metrics-adapter does: one named
    /// object's values summed; a selector's objects summed by name.
    async fn aggregated_custom(
        &self,
        namespace: Option<&str>,
        resource: &str,
        name: &str,
        metric: &str,
        (selector, metric_selector): (&str, &str),
        user: Option<&UserInfo>,
    ) -> Vec<Value> {
        let enc = crate::metrics::percent_encode;
        let tail = if resource == "namespaces" {
            format!("namespaces/{}/metrics/{}", enc(name), enc(metric))
        } else {
            match namespace {
                Some(ns) => format!(
                    "namespaces/{}/{}/{}/{}",
                    enc(ns),
                    enc(resource),
                    enc(name),
                    enc(metric)
                ),
                None => format!("{}/{}/{}", enc(resource), enc(name), enc(metric)),
            }
        };
        let mut query = Vec::new();
        if !selector.is_empty() {
            query.push(format!("labelSelector={}", enc(selector)));
        }
        if !metric_selector.is_empty() {
            query.push(format!("metricLabelSelector={}", enc(metric_selector)));
        }
        let q = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        // Each member's preferred version: v1beta2, else v1beta1.
        let mut answers = self
            .ask_members(&format!("/apis/{CUSTOM_GROUP}/v1beta2/{tail}{q}"), user)
            .await;
        let answered: Vec<String> = answers.iter().map(|(m, _)| m.clone()).collect();
        for (member, v) in self
            .ask_members(&format!("/apis/{CUSTOM_GROUP}/v1beta1/{tail}{q}"), user)
            .await
        {
            if !answered.contains(&member) {
                answers.push((member, v));
            }
        }
        let mut by_name: BTreeMap<String, (Value, i128)> = BTreeMap::new();
        for (_, list) in answers {
            for item in list
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let item = to_v1beta2(item.clone());
                let Some(value) = item.get("value").and_then(Value::as_str).and_then(milli) else {
                    continue;
                };
                let key = if name == "*" {
                    item.pointer("/describedObject/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                } else {
                    String::new()
                };
                if by_name.len() >= MAX_ITEMS && !by_name.contains_key(&key) {
                    continue;
                }
                let entry = by_name.entry(key).or_insert((item, 0));
                entry.1 = entry.1.saturating_add(value);
            }
        }
        by_name
            .into_values()
            .map(|(mut item, total)| {
                item["value"] = json!(quantity(total));
                item
            })
            .collect()
    }

    /// An external metric's series from every member.
    async fn aggregated_external(
        &self,
        namespace: &str,
        metric: &str,
        selector: &str,
        user: Option<&UserInfo>,
    ) -> Vec<Value> {
        let enc = crate::metrics::percent_encode;
        let mut path = format!(
            "/apis/{EXTERNAL_GROUP}/v1beta1/namespaces/{}/{}",
            enc(namespace),
            enc(metric)
        );
        if !selector.is_empty() {
            path.push_str(&format!("?labelSelector={}", enc(selector)));
        }
        let mut out = Vec::new();
        for (_, list) in self.ask_members(&path, user).await {
            for item in list
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if out.len() < MAX_ITEMS {
                    out.push(item.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_for_both_groups() {
        assert_eq!(
            parse(&["apis", CUSTOM_GROUP]),
            Some(MetricsRequest::Group(CUSTOM_GROUP))
        );
        assert_eq!(
            parse(&["apis", CUSTOM_GROUP, "v1beta1"]),
            Some(MetricsRequest::Resources(CUSTOM_GROUP, "v1beta1"))
        );
        assert_eq!(parse(&["apis", CUSTOM_GROUP, "v2"]), None);
        assert_eq!(
            parse(&[
                "apis",
                CUSTOM_GROUP,
                "v1beta2",
                "namespaces",
                "web",
                "pods",
                "*",
                "rps"
            ]),
            Some(MetricsRequest::Custom {
                version: "v1beta2",
                namespace: Some("web".into()),
                resource: "pods".into(),
                name: "*".into(),
                metric: "rps".into(),
            })
        );
        assert_eq!(
            parse(&[
                "apis",
                CUSTOM_GROUP,
                "v1beta2",
                "namespaces",
                "web",
                "metrics",
                "q"
            ]),
            Some(MetricsRequest::Custom {
                version: "v1beta2",
                namespace: None,
                resource: "namespaces".into(),
                name: "web".into(),
                metric: "q".into(),
            })
        );
        assert_eq!(
            parse(&["apis", CUSTOM_GROUP, "v1beta2", "nodes", "n1", "load"]),
            Some(MetricsRequest::Custom {
                version: "v1beta2",
                namespace: None,
                resource: "nodes".into(),
                name: "n1".into(),
                metric: "load".into(),
            })
        );
        assert_eq!(
            parse(&[
                "apis",
                EXTERNAL_GROUP,
                "v1beta1",
                "namespaces",
                "web",
                "queue"
            ]),
            Some(MetricsRequest::External {
                namespace: "web".into(),
                metric: "queue".into()
            })
        );
        assert_eq!(parse(&["apis", EXTERNAL_GROUP, "v1beta1", "queue"]), None);
        assert_eq!(parse(&["apis", "metrics.k8s.io", "v1beta1"]), None);
    }

    #[test]
    fn quantities_read_to_milli_units() {
        assert_eq!(milli("30"), Some(30_000));
        assert_eq!(milli("1.5"), Some(1_500));
        assert_eq!(milli("250m"), Some(250));
        assert_eq!(milli("2k"), Some(2_000_000));
        assert_eq!(milli("1Ki"), Some(1_024_000));
        assert_eq!(milli("1e3"), Some(1_000_000));
        assert_eq!(milli("500u"), Some(0));
        assert_eq!(milli("-2"), Some(-2_000));
        assert_eq!(milli("abc"), None);
        assert_eq!(milli("1.2.3"), None);
        assert_eq!(milli("3Q"), None);
        assert_eq!(milli(""), None);
        assert_eq!(milli("99999999999999999999999999999999"), None);
        assert_eq!(quantity(30_000), "30");
        assert_eq!(quantity(1_500), "1500m");
    }

    #[test]
    fn annotations_become_values_and_versions_rename_fields() {
        let pod = json!({"metadata": {"name": "p", "annotations": {
            SIMULATED_CUSTOM_METRICS: r#"{"rps": "30", "lat": 1.5, "bad": "x", "obj": {}}"#}}});
        let m = annotated(&pod, SIMULATED_CUSTOM_METRICS);
        assert_eq!(m.get("rps"), Some(&30_000));
        assert_eq!(m.get("lat"), Some(&1_500));
        assert_eq!(m.len(), 2);
        let garbage = json!({"metadata": {"annotations": {SIMULATED_CUSTOM_METRICS: "{"}}});
        assert!(annotated(&garbage, SIMULATED_CUSTOM_METRICS).is_empty());
        let item = metric_value(
            json!({"kind": "Pod", "name": "p"}),
            "rps",
            Some("a=b,c in (d,e)"),
            "t",
            30_000,
        );
        assert_eq!(item["metric"]["selector"]["matchLabels"]["a"], "b");
        assert_eq!(
            item["metric"]["selector"]["matchExpressions"][0]["values"],
            json!(["d", "e"])
        );
        let v1 = versioned(vec![item.clone()], "v1beta1");
        assert_eq!(v1["items"][0]["metricName"], "rps");
        assert!(v1["items"][0].get("metric").is_none());
        assert_eq!(to_v1beta2(v1["items"][0].clone()), item);
        assert_eq!(
            versioned(vec![item], "v1beta2")["apiVersion"],
            "custom.metrics.k8s.io/v1beta2"
        );
    }
}
