//! Server-side printing: `meta.k8s.io/v1 Table` responses for `kubectl get`.
//!
//! kubectl asks for `as=Table` and prints whatever columns the server defines; `-o wide` adds
//! the columns with `priority: 1`. Kinds without a column set here get Name and Age, which is
//! what the real server prints for CRDs without `additionalPrinterColumns`. A CRD version's
//! `additionalPrinterColumns` replace them: each JSON path is evaluated on the object
//! ([`jsonpath`]). Date columns hold the age (`3m2s`), as kube-apiserver renders them.

use std::collections::HashMap;
use std::sync::RwLock;

use serde_json::{Value, json};

use crate::duration;
use crate::jsonpath;
use crate::registry::Resource;

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
    json!(duration::age_cell(
        o.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
    ))
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
        "Work" => vec![
            NAME,
            c("Workload-Kind", "string", 0, |o| {
                s(o.pointer("/spec/workload/manifests/0/kind"))
            }),
            c("Applied", "string", 0, |o| condition(o, "Applied")),
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
        "WasmPlugin" => vec![
            NAME,
            c("Serving", "string", 0, |o| {
                s(o.pointer("/status/servingDigest"))
            }),
            c("Ready", "string", 0, |o| condition(o, "Loaded")),
            c("Used-By", "string", 0, |o| {
                let used = o.pointer("/status/usedBy").and_then(Value::as_array);
                json!(
                    used.map(|u| u
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(","))
                        .unwrap_or_default()
                )
            }),
            AGE,
        ],
        _ => vec![NAME, AGE],
    }
}

fn row(obj: &Value, cols: &[Column], include: Include) -> Value {
    let cells: Vec<Value> = cols.iter().map(|c| (c.cell)(obj)).collect();
    with_object(json!({"cells": cells}), obj, include)
}

/// A CRD version's printer column (`additionalPrinterColumns`).
#[derive(Debug, Clone)]
struct PrinterColumn {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i64,
    path: jsonpath::Path,
}

/// Printer columns of the CRD versions that declare them, by group, version and plural.
type ColumnsByResource = HashMap<(String, String, String), Vec<PrinterColumn>>;
static CRD_COLUMNS: RwLock<Option<ColumnsByResource>> = RwLock::new(None);

/// Record (or forget) the `additionalPrinterColumns` of one CRD version. Columns whose JSON
/// path does not parse are left out (the CRD validation of kube-apiserver refuses them).
pub(crate) fn register_crd_version(
    group: &str,
    version: &str,
    plural: &str,
    columns: Option<&Value>,
) {
    let cols: Vec<PrinterColumn> = columns
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let text = |f: &str| {
                c.get(f)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            Some(PrinterColumn {
                name: c.get("name")?.as_str()?.to_owned(),
                ty: text("type"),
                format: text("format"),
                description: text("description"),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path: jsonpath::Path::parse(c.get("jsonPath")?.as_str()?)?,
            })
        })
        .collect();
    let Ok(mut map) = CRD_COLUMNS.write() else {
        return;
    };
    let map = map.get_or_insert_with(HashMap::new);
    let key = (group.to_owned(), version.to_owned(), plural.to_owned());
    if cols.is_empty() {
        map.remove(&key);
    } else {
        map.insert(key, cols);
    }
}

fn crd_columns(res: &Resource) -> Option<Vec<PrinterColumn>> {
    CRD_COLUMNS
        .read()
        .ok()?
        .as_ref()?
        .get(&(
            res.group.to_owned(),
            res.version.to_owned(),
            res.plural.to_owned(),
        ))
        .cloned()
}

/// The cell of a printer column, as kube-apiserver's CRD table convertor makes it: the first
/// value the path finds, converted to the column's type; `null` (`<none>`) when none is found
/// or it does not convert.
fn printer_cell(col: &PrinterColumn, obj: &Value) -> Value {
    let Some(v) = col.path.first(obj) else {
        return Value::Null;
    };
    match col.ty.as_str() {
        "date" => match v.as_str() {
            Some(ts) => json!(duration::age_cell(Some(ts))),
            None => Value::Null,
        },
        "integer" => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        "number" => v.as_f64().map_or(Value::Null, |f| json!(f)),
        "boolean" => v.as_bool().map_or(Value::Null, |b| json!(b)),
        _ => match v {
            Value::String(x) => json!(x),
            other => json!(other.to_string()),
        },
    }
}

fn crd_table(
    cols: &[PrinterColumn],
    objects: &[&Value],
    list_meta: Value,
    include: Include,
) -> Value {
    let mut defs = vec![json!({"name": "Name", "type": "string", "format": "name",
        "description": "Name must be unique within a namespace.", "priority": 0})];
    defs.extend(cols.iter().map(|c| {
        json!({"name": c.name, "type": c.ty, "format": c.format,
               "description": c.description, "priority": c.priority})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![name(o)];
            cells.extend(cols.iter().map(|c| printer_cell(c, o)));
            with_object(json!({"cells": cells}), o, include)
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": defs, "rows": rows})
}

fn with_object(mut r: Value, obj: &Value, include: Include) -> Value {
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

/// A Table for `objects` of `res`; `list_meta` becomes the table's metadata.
pub fn table(res: &Resource, objects: &[&Value], list_meta: Value, include: Include) -> Value {
    if let Some(cols) = crd_columns(res) {
        return crd_table(&cols, objects, list_meta, include);
    }
    let cols = columns(res.kind);
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
