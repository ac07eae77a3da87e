//! Server-side printing: `meta.k8s.io/v1 Table` responses for `kubectl get`.
//!
//! kubectl asks for `as=Table` and prints whatever columns the server defines; `-o wide` adds
//! the columns with `priority: 1`. Kinds without a column set here get Name and Age, which is
//! what the real server prints for CRDs without `additionalPrinterColumns`.

use serde_json::{Value, json};

/// How much of each object to embed in a row (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl Include {
    /// Parse the query parameter.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

struct Column {
    name: &'static str,
    ty: &'static str,
    priority: u8,
    cell: fn(&Value) -> Value,
}

fn s(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(x)) => json!(x),
        Some(Value::Null) | None => json!("<none>"),
        Some(other) => json!(other.to_string()),
    }
}

fn int(v: Option<&Value>) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(0)
}

fn name(o: &Value) -> Value {
    s(o.pointer("/metadata/name"))
}

fn age(o: &Value) -> Value {
    s(o.pointer("/metadata/creationTimestamp"))
}

fn condition(o: &Value, ty: &str) -> Value {
    let found = o
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
                .and_then(|c| c.get("status").cloned())
        });
    found.map_or(json!("Unknown"), |v| s(Some(&v)))
}

fn containers(o: &Value, field: &str) -> Value {
    let names: Vec<String> = o
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get(field).and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    json!(names.join(","))
}

fn selector(o: &Value) -> Value {
    let labels = o
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object);
    let parts: Vec<String> = labels
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    json!(if parts.is_empty() {
        "<none>".to_owned()
    } else {
        parts.join(",")
    })
}

fn ports(o: &Value) -> Value {
    let parts: Vec<String> = o
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        int(p.get("port")),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    json!(if parts.is_empty() {
        "<none>".to_owned()
    } else {
        parts.join(",")
    })
}

const NAME: Column = Column {
    name: "Name",
    ty: "string",
    priority: 0,
    cell: name,
};
const AGE: Column = Column {
    name: "Age",
    ty: "date",
    priority: 0,
    cell: age,
};

fn columns(kind: &str) -> Vec<Column> {
    let c = |name, ty, priority, cell| Column {
        name,
        ty,
        priority,
        cell,
    };
    match kind {
        "Deployment" | "StatefulSet" | "ReplicaSet" => vec![
            NAME,
            c("Ready", "string", 0, |o| {
                json!(format!(
                    "{}/{}",
                    int(o.pointer("/status/readyReplicas")),
                    int(o.pointer("/spec/replicas"))
                ))
            }),
            c("Up-to-date", "integer", 0, |o| {
                json!(int(o.pointer("/status/updatedReplicas")))
            }),
            c("Available", "integer", 0, |o| {
                json!(int(o.pointer("/status/availableReplicas")))
            }),
            AGE,
            c("Containers", "string", 1, |o| containers(o, "name")),
            c("Images", "string", 1, |o| containers(o, "image")),
            c("Selector", "string", 1, selector),
        ],
        "Namespace" => vec![
            NAME,
            c("Status", "string", 0, |o| s(o.pointer("/status/phase"))),
            AGE,
        ],
        "ConfigMap" => vec![
            NAME,
            c("Data", "integer", 0, |o| {
                json!(
                    o.get("data")
                        .and_then(Value::as_object)
                        .map_or(0, |m| m.len())
                )
            }),
            AGE,
        ],
        "Secret" => vec![
            NAME,
            c("Type", "string", 0, |o| s(o.get("type"))),
            c("Data", "integer", 0, |o| {
                json!(
                    o.get("data")
                        .and_then(Value::as_object)
                        .map_or(0, |m| m.len())
                )
            }),
            AGE,
        ],
        "Service" => vec![
            NAME,
            c("Type", "string", 0, |o| s(o.pointer("/spec/type"))),
            c("Cluster-IP", "string", 0, |o| {
                s(o.pointer("/spec/clusterIP"))
            }),
            c("Port(s)", "string", 0, ports),
            AGE,
            c("Selector", "string", 1, |o| {
                let m = o.pointer("/spec/selector").and_then(Value::as_object);
                json!(
                    m.map(|m| m
                        .iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(","))
                        .unwrap_or_default()
                )
            }),
        ],
        "Cluster" => vec![
            NAME,
            c("Version", "string", 0, |o| {
                s(o.pointer("/status/kubernetesVersion"))
            }),
            c("Mode", "string", 0, |o| s(o.pointer("/spec/syncMode"))),
            c("Ready", "string", 0, |o| condition(o, "Ready")),
            AGE,
        ],
        "ResourceBinding" | "ClusterResourceBinding" => vec![
            NAME,
            c("Scheduled", "string", 0, |o| condition(o, "Scheduled")),
            c("FullyApplied", "string", 0, |o| {
                condition(o, "FullyApplied")
            }),
            AGE,
        ],
        "PropagationPolicy" | "ClusterPropagationPolicy" => vec![
            NAME,
            c("Conflict-Resolution", "string", 0, |o| {
                s(o.pointer("/spec/conflictResolution"))
            }),
            c("Priority", "integer", 0, |o| {
                json!(int(o.pointer("/spec/priority")))
            }),
            AGE,
        ],
        _ => vec![NAME, AGE],
    }
}

fn row(obj: &Value, cols: &[Column], include: Include) -> Value {
    let cells: Vec<Value> = cols.iter().map(|c| (c.cell)(obj)).collect();
    let mut r = json!({"cells": cells});
    match include {
        Include::None => {}
        Include::Metadata => {
            r["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))});
        }
        Include::Object => r["object"] = obj.clone(),
    }
    r
}

/// A Table for `objects` of `kind`; `list_meta` becomes the table's metadata.
pub fn table(kind: &str, objects: &[&Value], list_meta: Value, include: Include) -> Value {
    let cols = columns(kind);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": c.ty, "format": if c.name == "Name" { "name" } else { "" },
                   "description": "", "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objects.iter().map(|o| row(o, &cols, include)).collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": defs, "rows": rows})
}
