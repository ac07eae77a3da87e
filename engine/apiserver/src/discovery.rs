//! Legacy discovery documents and the OpenAPI v2 stub (OpenAPI v3 is [`crate::openapi`]).

use serde_json::{Value, json};

use crate::registry::{self, Resource};

/// The Kubernetes version the server reports.
pub const KUBE_VERSION: (&str, &str) = ("1", "33");

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": KUBE_VERSION.0,
        "minor": KUBE_VERSION.1,
        "gitVersion": format!("v{}.{}.0-flotilla", KUBE_VERSION.0, KUBE_VERSION.1),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub fn group_list() -> Value {
    // `custom.metrics.k8s.io` and `external.metrics.k8s.io` are served ([`crate::custom_metrics`])
    // but not listed: client-go's discovery fails on a group version without resources, which
    // they are until some metric exists.
    let groups: Vec<Value> = registry::groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub fn group(name: &str) -> Option<Value> {
    registry::groups()
        .iter()
        .find(|(g, _)| *g == name)
        .map(|(g, vs)| {
            let mut doc = group_doc(g, vs);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

fn verbs(r: &Resource) -> Value {
    if crate::auth::is_review(r) {
        return json!(["create"]);
    }
    if crate::metrics::is_metrics(r) {
        return json!(["get", "list"]);
    }
    json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ])
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in registry::resources_of(group, version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs(r),
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        if r.has_status {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        resources.extend(crate::scale::discovery_entry(r));
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited protobuf field.
fn pb_field(tag: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 6);
    pb_varint(&mut out, (u64::from(tag) << 3) | 2);
    pb_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// `/openapi/v2` as the gnostic `openapi.v2.Document` protobuf (the only encoding kubectl ≤ 1.27
/// accepts): one PATCH operation per resource carrying the GVK vendor extension and the
/// `fieldValidation` query parameter, so kubectl delegates validation to the server.
pub fn openapi_v2_protobuf() -> Vec<u8> {
    let mut paths = Vec::new();
    for r in registry::all() {
        let base = format!("/{}", gv_path(r.group, r.version));
        let path = if r.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{base}/{}/{{name}}", r.plural)
        };
        // QueryParameterSubSchema{in=2, name=4, type=6}
        let mut q = pb_field(2, b"query");
        q.extend(pb_field(4, b"fieldValidation"));
        q.extend(pb_field(6, b"string"));
        // ParametersItem{parameter=1: Parameter{non_body_parameter=2: NonBodyParameter{query=3}}}
        let param = pb_field(1, &pb_field(2, &pb_field(3, &q)));
        let gvk_yaml = format!(
            "group: \"{}\"\nkind: {}\nversion: {}\n",
            r.group, r.kind, r.version
        );
        // NamedAny{name=1, value=2: Any{yaml=2}}
        let mut ext = pb_field(1, b"x-kubernetes-group-version-kind");
        ext.extend(pb_field(2, &pb_field(2, gvk_yaml.as_bytes())));
        // Operation{parameters=8, vendor_extension=13}
        let mut op = pb_field(8, &param);
        op.extend(pb_field(13, &ext));
        // PathItem{put=3, patch=8}
        let mut item = pb_field(3, &op);
        item.extend(pb_field(8, &op));
        // NamedPathItem{name=1, value=2}
        let mut named = pb_field(1, path.as_bytes());
        named.extend(pb_field(2, &item));
        // Paths{path=2}
        paths.extend(pb_field(2, &named));
    }
    let mut info = pb_field(1, b"Kubernetes");
    info.extend(pb_field(
        2,
        format!("v{}.{}.0", KUBE_VERSION.0, KUBE_VERSION.1).as_bytes(),
    ));
    let mut doc = pb_field(1, b"2.0");
    doc.extend(pb_field(2, &info));
    doc.extend(pb_field(8, &paths));
    doc
}
