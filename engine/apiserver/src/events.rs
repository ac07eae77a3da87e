//! `events.k8s.io/v1` Events as a view of the core/v1 Event storage, as kube-apiserver serves
//! them: one set of objects, two shapes.
//!
//! A request to `/apis/events.k8s.io/v1/…/events` is rewritten into the matching core/v1
//! request (path, field selector, body or patch renamed field by field), served by the core
//! handlers, and its answer (object, list, watch stream, error) renamed back. So an Event a
//! controller records through core/v1 lists through events.k8s.io/v1 with `regarding`, `note`
//! and `deprecatedCount`, and the other way round; resourceVersions, watches and conflicts are
//! those of the one storage.

use axum::body::Body;
use axum::http::{Request, Response, Uri, header};
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::limits::{self, MAX_BODY};

/// The group version of the view.
pub const API_VERSION: &str = "events.k8s.io/v1";

/// Field names: (events.k8s.io/v1, core/v1). The other fields are the same in both.
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
];

fn to_core_name(field: &str) -> &str {
    RENAMES
        .iter()
        .find(|(e, _)| *e == field)
        .map_or(field, |(_, c)| c)
}

fn to_events_name(field: &str) -> &str {
    RENAMES
        .iter()
        .find(|(_, c)| *c == field)
        .map_or(field, |(e, _)| e)
}

fn rename_keys(obj: &mut Map<String, Value>, rename: fn(&str) -> &str) {
    let old = std::mem::take(obj);
    for (k, v) in old {
        obj.insert(rename(&k).to_owned(), v);
    }
}

/// A core/v1 Event in the events.k8s.io/v1 shape (other objects, such as Tables and Status,
/// are left alone).
pub fn to_events(mut obj: Value) -> Value {
    let Some(m) = obj.as_object_mut() else {
        return obj;
    };
    match m.get("kind").and_then(Value::as_str) {
        Some("Event") => {
            rename_keys(m, to_events_name);
            m.insert("apiVersion".into(), Value::from(API_VERSION));
        }
        Some("EventList") => {
            m.insert("apiVersion".into(), Value::from(API_VERSION));
            if let Some(items) = m.get_mut("items").and_then(Value::as_array_mut) {
                for item in items {
                    *item = to_events(std::mem::take(item));
                }
            }
        }
        Some("Status") => {
            // Name the resource as kube-apiserver does (`events.events.k8s.io "x" not found`).
            if let Some(Value::String(msg)) = m.get_mut("message") {
                *msg = msg.replacen("events \"", "events.events.k8s.io \"", 1);
            }
            if let Some(d) = m.get_mut("details").and_then(Value::as_object_mut)
                && d.contains_key("kind")
            {
                d.insert("group".into(), Value::from("events.k8s.io"));
            }
        }
        _ => {}
    }
    obj
}

/// An events.k8s.io/v1 Event (or a patch of one) in the core/v1 shape.
pub fn to_core(mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut() {
        rename_keys(m, to_core_name);
        if m.get("apiVersion").and_then(Value::as_str) == Some(API_VERSION) {
            m.insert("apiVersion".into(), Value::from("v1"));
        }
    }
    obj
}

/// A JSON patch over the events.k8s.io/v1 shape, over the core/v1 shape instead.
fn json_patch_to_core(mut patch: Value) -> Value {
    for op in patch.as_array_mut().into_iter().flatten() {
        for key in ["path", "from"] {
            if let Some(Value::String(p)) = op.get_mut(key)
                && let Some(rest) = p.strip_prefix('/')
            {
                let (first, tail) = rest
                    .split_once('/')
                    .map_or((rest, None), |(f, t)| (f, Some(t)));
                let renamed = to_core_name(first);
                *p = match tail {
                    Some(t) => format!("/{renamed}/{t}"),
                    None => format!("/{renamed}"),
                };
            }
        }
        if op.get("path").and_then(Value::as_str) == Some("/apiVersion")
            && op.get("value").and_then(Value::as_str) == Some(API_VERSION)
        {
            op["value"] = Value::from("v1");
        }
    }
    patch
}

/// A field selector over the events.k8s.io/v1 shape (`regarding.name=x,reportingController=y`),
/// over the core/v1 shape.
pub fn field_selector_to_core(selector: &str) -> String {
    selector
        .split(',')
        .map(|term| {
            let op_at = term.find(['=', '!']).unwrap_or(term.len());
            let (key, rest) = term.split_at(op_at);
            let key = key.trim();
            let (first, tail) = key
                .split_once('.')
                .map_or((key, None), |(f, t)| (f, Some(t)));
            match tail {
                Some(t) => format!("{}.{t}{rest}", to_core_name(first)),
                None => format!("{}{rest}", to_core_name(first)),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `segs` (after any logical-cluster prefix) address events.k8s.io/v1 Events.
pub fn is_view(segs: &[&str]) -> bool {
    matches!(
        segs,
        ["apis", "events.k8s.io", "v1", "events", ..]
            | ["apis", "events.k8s.io", "v1", "namespaces", _, "events", ..]
    )
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The core/v1 request for an events.k8s.io/v1 request: `prefix` is the logical-cluster prefix
/// of the original path (`/clusters/x` or empty), `segs` its segments after it.
///
/// # Errors
/// 415 for a body that is neither JSON, YAML nor protobuf, 400 for one that does not decode,
/// 413 for one over the size limit.
pub async fn core_request(
    req: Request<Body>,
    prefix: &str,
    segs: &[&str],
) -> Result<Request<Body>, ApiError> {
    let (mut parts, body) = req.into_parts();
    let rest = &segs[3..];
    let mut path = format!("{prefix}/api/v1/{}", rest.join("/"));
    if let Some(q) = parts.uri.query() {
        let query: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some(("fieldSelector", v)) => format!(
                    "fieldSelector={}",
                    percent_encode(&field_selector_to_core(&crate::server::percent_decode(v)))
                ),
                _ => pair.to_owned(),
            })
            .collect();
        path = format!("{path}?{}", query.join("&"));
    }
    parts.uri = path
        .parse::<Uri>()
        .map_err(|e| ApiError::bad_request(format!("invalid path: {e}")))?;
    let body = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| limits::too_large(MAX_BODY))?;
    if body.is_empty() {
        return Ok(Request::from_parts(parts, Body::empty()));
    }
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let converted = match ct.as_str() {
        "application/json"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json"
        | "application/apply-patch+json" => {
            let v: Value = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("error decoding body: {e}")))?;
            to_core(v)
        }
        "application/json-patch+json" => {
            let v: Value = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch_to_core(v)
        }
        // client-go's event recorder writes protobuf at its default config.
        m if crate::protobuf::is_protobuf(m) => to_core(crate::protobuf::decode_object(&body)?),
        "application/yaml" | "application/apply-patch+yaml" => {
            let v: Value = serde_yaml::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            to_core(v)
        }
        _ => {
            return Err(ApiError::unsupported_media_of(
                &["application/json", "application/yaml"],
                &ct,
            ));
        }
    };
    // The renamed body is JSON whatever it was sent as (YAML is a superset).
    let ct = if crate::protobuf::is_protobuf(&ct) {
        "application/json".to_owned()
    } else if ct.contains("yaml") {
        ct.replace("yaml", "json")
    } else {
        ct
    };
    parts.headers.insert(
        header::CONTENT_TYPE,
        ct.parse()
            .map_err(|_| ApiError::bad_request("invalid Content-Type"))?,
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    let bytes = serde_json::to_vec(&converted).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn convert_line(line: &[u8]) -> Vec<u8> {
    let Ok(mut ev) = serde_json::from_slice::<Value>(line) else {
        return line.to_vec();
    };
    if let Some(obj) = ev.get_mut("object") {
        let converted = to_events(std::mem::take(obj));
        *obj = match converted {
            // A bookmark carries only the kind and apiVersion of the watched resource.
            Value::Object(mut m) if m.get("kind").and_then(Value::as_str) == Some("Event") => {
                m.insert("apiVersion".into(), Value::from(API_VERSION));
                Value::Object(m)
            }
            other => other,
        };
    }
    let mut out = serde_json::to_vec(&ev).unwrap_or_else(|_| line.to_vec());
    out.push(b'\n');
    out
}

/// The answer to the core/v1 request, in the events.k8s.io/v1 shape. A watch stays a stream:
/// each line is renamed as it passes.
pub async fn events_response(resp: Response<Body>, watch: bool) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if !is_json {
        return Response::from_parts(parts, body);
    }
    if watch && parts.status.is_success() {
        let stream = body
            .into_data_stream()
            .scan(Vec::<u8>::new(), |pending, chunk| {
                let out = match chunk {
                    Ok(bytes) => {
                        pending.extend_from_slice(&bytes);
                        let mut out = Vec::new();
                        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                            let line: Vec<u8> = pending.drain(..=end).collect();
                            out.extend(convert_line(&line[..end]));
                        }
                        Ok(Bytes::from(out))
                    }
                    Err(e) => Err(e),
                };
                futures_util::future::ready(Some(out))
            });
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => {
            let out = serde_json::to_vec(&to_events(v)).unwrap_or_else(|_| bytes.to_vec());
            Response::from_parts(parts, Body::from(out))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_two_shapes_convert_both_ways() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Deployment", "name": "web"},
            "reason": "Scaled", "message": "scaled to 3", "type": "Normal",
            "count": 2, "firstTimestamp": "2025-01-01T00:00:00Z", "lastTimestamp": "2025-01-01T00:01:00Z",
            "source": {"component": "flotilla"}, "reportingComponent": "flotilla", "reportingInstance": "i",
            "eventTime": null, "action": "Scale",
        });
        let events = to_events(core.clone());
        assert_eq!(events["apiVersion"], API_VERSION);
        assert_eq!(events["regarding"], core["involvedObject"]);
        assert_eq!(events["note"], "scaled to 3");
        assert_eq!(events["deprecatedCount"], 2);
        assert_eq!(events["deprecatedFirstTimestamp"], core["firstTimestamp"]);
        assert_eq!(events["deprecatedLastTimestamp"], core["lastTimestamp"]);
        assert_eq!(events["deprecatedSource"], core["source"]);
        assert_eq!(events["reportingController"], "flotilla");
        assert_eq!(events["reportingInstance"], "i");
        assert!(events.get("message").is_none() && events.get("involvedObject").is_none());
        assert_eq!(to_core(events), core);
    }

    #[test]
    fn selectors_and_json_patches_are_renamed() {
        assert_eq!(
            field_selector_to_core("regarding.name=web,reportingController!=x,type==Normal"),
            "involvedObject.name=web,reportingComponent!=x,type==Normal"
        );
        assert_eq!(field_selector_to_core("note=hi"), "message=hi");
        let patch = json!([{"op": "replace", "path": "/note", "value": "n"},
                           {"op": "copy", "from": "/regarding/name", "path": "/related/name"}]);
        assert_eq!(
            json_patch_to_core(patch),
            json!([{"op": "replace", "path": "/message", "value": "n"},
                   {"op": "copy", "from": "/involvedObject/name", "path": "/related/name"}])
        );
        assert_eq!(crate::server::percent_decode("a%3Db%2Cc"), "a=b,c");
        assert_eq!(
            crate::server::percent_decode(&percent_encode("regarding.name=a b")),
            "regarding.name=a b"
        );
    }

    #[test]
    fn watch_lines_and_errors_are_renamed() {
        let line = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"Event","message":"m"}}"#;
        let out: Value = serde_json::from_slice(&convert_line(line)).unwrap();
        assert_eq!(out["object"]["note"], "m");
        assert_eq!(out["object"]["apiVersion"], API_VERSION);
        let status = json!({"kind": "Status", "message": "events \"x\" not found",
                            "details": {"name": "x", "kind": "events", "group": ""}});
        let out = to_events(status);
        assert_eq!(out["message"], "events.events.k8s.io \"x\" not found");
        assert_eq!(out["details"]["group"], "events.k8s.io");
    }
}
