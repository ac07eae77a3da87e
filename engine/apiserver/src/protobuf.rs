//! Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`) for the built-in kinds.
//!
//! client-go's typed clients (since v0.32) and so kubectl's imperative `create` write protobuf
//! and prefer it in `Accept`. Objects are still stored as JSON: a protobuf request body is turned
//! into the JSON kube-apiserver would have stored, and a JSON answer into protobuf when the client
//! prefers it and the kind has a protobuf form.
//!
//! **Wire format** (apimachinery `runtime/serializer/protobuf`): the 4-byte magic `k8s\0`, then
//! a `runtime.Unknown` message whose `typeMeta` names the kind and whose `raw` is the typed
//! message.
//!
//! **Conversion.** One generic walk over [`prost_reflect::DynamicMessage`] and the descriptor set
//! of the served API groups (`proto/k8s.fds`, see `proto/generate.sh`): protobuf field names are
//! the JSON names, so only a few types need their own JSON shape: meta/v1 `Time` and `MicroTime`
//! (RFC 3339 strings), resource `Quantity` and `IntOrString` (scalars), and
//! `RawExtension` and `FieldsV1` (embedded JSON). Go always writes non-pointer fields, so a
//! protobuf body carries every zero string, number and bool; JSON drops those that are
//! `omitempty`, and so does the decoder here except for the fields listed in
//! `proto/zero-fields.txt` (Go pointers such as `replicas`, and fields without `omitempty`).
//!
//! **Bounds.** Bodies are bounded by the caller (3 MiB); prost bounds message nesting (100), and
//! embedded JSON goes through serde_json's limit (128). Kinds without a protobuf form (custom
//! resources, Karmada's and Flotilla's kinds) answer JSON, and a protobuf body for them is 415,
//! as kube-apiserver does for custom resources.

use std::collections::HashSet;
use std::sync::LazyLock;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage,
};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::registry::Resource;

/// The protobuf media type.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// What every protobuf body starts with.
const MAGIC: &[u8; 4] = b"k8s\0";
/// `runtime.RawExtension`s may hold protobuf envelopes themselves; this many levels deep.
const MAX_ENVELOPES: usize = 4;

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";
const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
/// meta/v1 kinds served under every group version.
const META_KINDS: &[&str] = &[
    "Status",
    "WatchEvent",
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
];

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(&include_bytes!("../proto/k8s.fds")[..])
        .expect("invariant: the embedded descriptor set decodes (tested)")
});

static KEEP_ZERO: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../proto/zero-fields.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// The message of `kind` in `api_version`, when it has a protobuf form.
fn message_for(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    if kind.is_empty() || version.is_empty() || kind.contains('.') || version.contains('.') {
        return None;
    }
    let package = match group {
        "" => format!("k8s.io.api.core.{version}"),
        "meta.k8s.io" => META.to_owned(),
        // Only Kubernetes' own groups: `apps.example.com` must not find `apps`.
        g if !g.contains('.') || g.ends_with(".k8s.io") => {
            format!("k8s.io.api.{}.{version}", g.split('.').next().unwrap_or(g))
        }
        _ => return None,
    };
    POOL.get_message_by_name(&format!("{package}.{kind}"))
        .or_else(|| {
            META_KINDS
                .contains(&kind)
                .then(|| POOL.get_message_by_name(&format!("{META}.{kind}")))
                .flatten()
        })
        .filter(|m| {
            // A kind is a message with metadata, or a meta/v1 kind.
            m.get_field_by_name("metadata").is_some() || m.package_name() == META
        })
}

/// Whether objects of `res` have a protobuf form.
pub(crate) fn supports(res: &Resource) -> bool {
    message_for(&res.api_version(), res.kind).is_some()
}

/// Whether `media` (without parameters) is the protobuf media type.
pub(crate) fn is_protobuf(media: &str) -> bool {
    media == MEDIA_TYPE
}

fn bad_request(what: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "the body of the request could not be decoded: {what}"
    ))
}

/// A protobuf object body as the JSON body the rest of the pipeline reads; other bodies are
/// returned unchanged.
///
/// # Errors
/// 415 for a kind without a protobuf form, 400 for a body that does not decode.
pub(crate) fn request_body(
    res: &Resource,
    method: &Method,
    body: Bytes,
    content_type: String,
) -> Result<(Bytes, String), ApiError> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if !is_protobuf(&media) {
        return Ok((body, content_type));
    }
    // A delete's body is DeleteOptions, whatever the kind.
    if *method != Method::DELETE && !supports(res) {
        return Err(ApiError::unsupported_media_of(
            &["application/json", "application/yaml"],
            &content_type,
        ));
    }
    let value = decode(&body, 0)?;
    let json = serde_json::to_vec(&value).map_err(bad_request)?;
    Ok((Bytes::from(json), "application/json".to_owned()))
}

/// A protobuf request body of a kind with a protobuf form as its JSON, `apiVersion` and `kind`
/// included (the events.k8s.io view renames it before storing).
///
/// # Errors
/// 400 for a body that does not decode, 415 for a kind without a protobuf form.
pub(crate) fn decode_object(body: &[u8]) -> Result<Value, ApiError> {
    decode(body, 0)
}

/// Decode one `k8s\0` envelope into the object's JSON, `apiVersion` and `kind` included.
fn decode(body: &[u8], depth: usize) -> Result<Value, ApiError> {
    let Some(rest) = body.strip_prefix(MAGIC) else {
        return Err(bad_request(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
        ));
    };
    let unknown_desc = POOL
        .get_message_by_name(UNKNOWN)
        .ok_or_else(|| ApiError::internal("the protobuf schema lacks runtime.Unknown"))?;
    let unknown = DynamicMessage::decode(unknown_desc, rest).map_err(bad_request)?;
    let text = |m: &DynamicMessage, f: &str| -> String {
        m.get_field_by_name(f)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let type_meta = unknown
        .get_field_by_name("typeMeta")
        .and_then(|v| v.as_message().cloned());
    let (api_version, kind) = type_meta
        .map(|t| (text(&t, "apiVersion"), text(&t, "kind")))
        .unwrap_or_default();
    let encoding = text(&unknown, "contentEncoding");
    let inner_type = text(&unknown, "contentType");
    if !encoding.is_empty() || !(inner_type.is_empty() || is_protobuf(&inner_type)) {
        return Err(ApiError::unsupported_media_of(
            &[MEDIA_TYPE],
            &format!("{inner_type} ({encoding})"),
        ));
    }
    if kind.is_empty() {
        return Err(bad_request("Object 'Kind' is missing in the protobuf body"));
    }
    let Some(desc) = message_for(&api_version, &kind) else {
        return Err(ApiError::unsupported_media_of(
            &["application/json", "application/yaml"],
            &format!("{MEDIA_TYPE} ({kind} in {api_version})"),
        ));
    };
    let raw = unknown
        .get_field_by_name("raw")
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default();
    let msg = DynamicMessage::decode(desc, raw).map_err(bad_request)?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), Value::String(api_version));
    obj.insert("kind".into(), Value::String(kind));
    if let Value::Object(fields) = to_json(&msg, depth)? {
        obj.extend(fields);
    }
    Ok(Value::Object(obj))
}

/// A message as kube-apiserver's JSON ([`Value::Null`] for a zero `Time`).
fn to_json(msg: &DynamicMessage, depth: usize) -> Result<Value, ApiError> {
    let desc = msg.descriptor();
    let field = |name: &str| msg.get_field_by_name(name);
    let string = |name: &str| {
        field(name)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let int = |name: &str| {
        field(name)
            .and_then(|v| v.as_i64().or_else(|| v.as_i32().map(i64::from)))
            .unwrap_or(0)
    };
    let embedded = |name: &str| -> Result<Value, ApiError> {
        let raw = field(name)
            .and_then(|v| v.as_bytes().cloned())
            .unwrap_or_default();
        if raw.is_empty() {
            Ok(Value::Null)
        } else if raw.starts_with(MAGIC) && depth < MAX_ENVELOPES {
            decode(&raw, depth + 1)
        } else {
            serde_json::from_slice(&raw).map_err(bad_request)
        }
    };
    match desc.full_name() {
        TIME | MICRO_TIME => {
            let (secs, nanos) = (int("seconds"), int("nanos"));
            if secs == 0 && nanos == 0 {
                return Ok(Value::Null);
            }
            let micro = desc.full_name() == MICRO_TIME;
            return format_time(secs, nanos, micro).map(Value::String);
        }
        QUANTITY => return Ok(Value::String(string("string"))),
        INT_OR_STRING => {
            return Ok(if int("type") == 1 {
                Value::String(string("strVal"))
            } else {
                json!(int("intVal"))
            });
        }
        RAW_EXTENSION => return embedded("raw"),
        FIELDS_V1 => return embedded("Raw"),
        _ => {}
    }
    let mut out = Map::new();
    for (fd, value) in msg.fields() {
        let json = if fd.is_map() {
            let Some(map) = value.as_map() else { continue };
            let value_kind = fd.kind();
            let value_kind = value_kind
                .as_message()
                .map(|entry| entry.map_entry_value_field().kind());
            let mut m = Map::new();
            for (k, v) in map {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    other => map_key_string(other),
                };
                if let Some(kind) = &value_kind {
                    m.insert(key, scalar_or_message(kind, v, depth)?);
                }
            }
            Value::Object(m)
        } else if fd.is_list() {
            let Some(items) = value.as_list() else {
                continue;
            };
            let kind = fd.kind();
            Value::Array(
                items
                    .iter()
                    .map(|v| scalar_or_message(&kind, v, depth))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            let json = scalar_or_message(&fd.kind(), value, depth)?;
            let zero = match &json {
                Value::String(s) => s.is_empty() && !matches!(fd.kind(), Kind::Message(_)),
                Value::Bool(b) => !b,
                Value::Number(n) => n.as_f64() == Some(0.0),
                _ => false,
            };
            if zero && !KEEP_ZERO.contains(format!("{}.{}", desc.full_name(), fd.name()).as_str()) {
                continue;
            }
            json
        };
        if !json.is_null() {
            out.insert(fd.name().to_owned(), json);
        }
    }
    Ok(Value::Object(out))
}

fn map_key_string(k: &MapKey) -> String {
    match k {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

fn scalar_or_message(
    kind: &Kind,
    v: &prost_reflect::Value,
    depth: usize,
) -> Result<Value, ApiError> {
    use prost_reflect::Value as P;
    Ok(match v {
        P::Bool(b) => Value::Bool(*b),
        P::I32(n) | P::EnumNumber(n) => json!(n),
        P::I64(n) => json!(n),
        P::U32(n) => json!(n),
        P::U64(n) => json!(n),
        P::F32(n) => serde_json::Number::from_f64(f64::from(*n)).map_or(Value::Null, Value::Number),
        P::F64(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
        P::String(s) => Value::String(s.clone()),
        P::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        P::Message(m) => to_json(m, depth)?,
        P::List(_) | P::Map(_) => {
            return Err(bad_request(format!(
                "unexpected nested collection for {kind:?}"
            )));
        }
    })
}

/// Go's `metav1.Time` (seconds) and `metav1.MicroTime` (microseconds) JSON forms.
fn format_time(secs: i64, nanos: i64, micro: bool) -> Result<String, ApiError> {
    let nanos = i32::try_from(nanos).map_err(bad_request)?;
    let ts = jiff::Timestamp::new(secs, if micro { nanos } else { 0 }).map_err(bad_request)?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S.%6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(ts.strftime(format).to_string())
}

fn parse_time(s: &str) -> Option<(i64, i32)> {
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some((ts.as_second(), ts.subsec_nanosecond()))
}

/// How a request wants its answer: from `Accept`, as kube-apiserver negotiates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Negotiated {
    /// JSON (or whatever the handler wrote: tables, metadata, text).
    AsIs,
    /// Protobuf when the kind has a protobuf form, JSON otherwise.
    Protobuf,
    /// Protobuf only: a kind without a protobuf form is 406.
    ProtobufOnly,
}

impl Negotiated {
    /// Read `Accept`: entries are taken by `q` (highest first, then in order); the first one
    /// the server can produce decides.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Self {
        let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Negotiated::AsIs;
        };
        let mut entries: Vec<(f32, bool, &str)> = Vec::new();
        let mut json_ok = false;
        for entry in accept.split(',').take(64) {
            let mut parts = entry.split(';');
            let media = parts.next().unwrap_or_default().trim();
            let mut q = 1.0_f32;
            let mut has_as = false;
            for p in parts {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                match k.trim() {
                    "q" => q = v.trim().parse().unwrap_or(0.0),
                    "as" => has_as = true,
                    _ => {}
                }
            }
            if q <= 0.0 {
                continue;
            }
            if matches!(
                media,
                "application/json" | "application/yaml" | "application/*" | "*/*"
            ) {
                json_ok = true;
            }
            entries.push((q, has_as, media));
        }
        // A stable sort keeps the client's order among equal q.
        entries.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, has_as, media) in entries {
            if media.eq_ignore_ascii_case(MEDIA_TYPE) && !has_as {
                return if json_ok {
                    Negotiated::Protobuf
                } else {
                    Negotiated::ProtobufOnly
                };
            }
            if media.starts_with("application/json")
                || media.starts_with("application/yaml")
                || media == "*/*"
                || media == "application/*"
                || has_as
            {
                return Negotiated::AsIs;
            }
        }
        Negotiated::AsIs
    }

    /// Re-encode a complete JSON answer as protobuf when negotiated and possible.
    pub(crate) async fn apply(self, resp: Response) -> Response {
        if self == Negotiated::AsIs {
            return resp;
        }
        let is_json = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/json"));
        if !is_json {
            return resp;
        }
        let (mut parts, body) = resp.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return ApiError::internal("reading the response").into_response();
        };
        let encoded = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| encode(&v));
        match encoded {
            Some(pb) => {
                parts
                    .headers
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
                parts.headers.remove(header::CONTENT_LENGTH);
                Response::from_parts(parts, Body::from(pb))
            }
            None if self == Negotiated::ProtobufOnly && parts.status.is_success() => ApiError::new(
                406,
                "NotAcceptable",
                "only the following media types are accepted: application/json, application/yaml",
            )
            .into_response(),
            None => Response::from_parts(parts, Body::from(bytes)),
        }
    }
}

impl Negotiated {
    /// A watch answer as protobuf frames (each a 4-byte big-endian length, then a `WatchEvent`
    /// whose `object` holds a `k8s\0` envelope) when negotiated and the watched kind (from
    /// `path`) has a protobuf form; JSON lines otherwise. Failures (complete `Status` answers)
    /// go through [`Negotiated::apply`].
    pub(crate) async fn frame_watch(self, resp: Response, path: &str) -> Response {
        if !resp.status().is_success() {
            return self.apply(resp).await;
        }
        let is_json = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/json"));
        if self == Negotiated::AsIs || !is_json || !watched(path).is_some_and(supports) {
            return resp;
        }
        let (mut parts, body) = resp.into_parts();
        let mut pending: Vec<u8> = Vec::new();
        // Events are JSON lines; a chunk may hold part of one, or several.
        let frames = futures_util::StreamExt::map(body.into_data_stream(), move |chunk| {
            chunk.map(|bytes| {
                pending.extend_from_slice(&bytes);
                let mut out = Vec::new();
                while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    out.extend_from_slice(&watch_frame(&line[..end]));
                }
                Bytes::from(out)
            })
        });
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/vnd.kubernetes.protobuf;stream=watch"),
        );
        Response::from_parts(parts, Body::from_stream(frames))
    }
}

/// The served resource a request path names (`/api/v1/...`, `/apis/g/v/...`, behind an optional
/// `/clusters/<name>`).
fn watched(path: &str) -> Option<&'static Resource> {
    let mut segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.first() == Some(&"clusters") && segs.len() >= 2 {
        segs.drain(..2);
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let plural = match rest {
        ["namespaces", _, plural, ..] => *plural,
        [plural, ..] => *plural,
        [] => return None,
    };
    crate::registry::lookup(group, version, plural)
}

/// One watch event (a JSON line) as a length-prefixed protobuf `WatchEvent`; an event that does
/// not encode becomes an `ERROR` event carrying an InternalError `Status`.
fn watch_frame(line: &[u8]) -> Vec<u8> {
    let event = serde_json::from_slice::<Value>(line).ok();
    let encoded = event.as_ref().and_then(|ev| {
        let envelope = encode(ev.get("object")?)?;
        watch_event(ev.get("type")?.as_str()?, envelope)
    });
    let message = encoded.unwrap_or_else(|| {
        let status = ApiError::internal("a watch event could not be encoded as protobuf");
        encode(&status.to_status())
            .and_then(|envelope| watch_event("ERROR", envelope))
            .unwrap_or_default()
    });
    let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(4 + message.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&message);
    out
}

fn watch_event(kind: &str, envelope: Vec<u8>) -> Option<Vec<u8>> {
    use prost_reflect::Value as P;
    let desc = POOL.get_message_by_name(&format!("{META}.WatchEvent"))?;
    let raw_desc = POOL.get_message_by_name(RAW_EXTENSION)?;
    let mut raw = DynamicMessage::new(raw_desc);
    set(&mut raw, "raw", P::Bytes(envelope.into()));
    let mut event = DynamicMessage::new(desc);
    set(&mut event, "type", P::String(kind.to_owned()));
    set(&mut event, "object", P::Message(raw));
    Some(event.encode_to_vec())
}

/// An object (with `apiVersion` and `kind`) as a `k8s\0` envelope, if its kind has a protobuf
/// form.
pub(crate) fn encode(obj: &Value) -> Option<Vec<u8>> {
    let api_version = obj.get("apiVersion")?.as_str()?;
    let kind = obj.get("kind")?.as_str()?;
    let desc = message_for(api_version, kind)?;
    let mut raw = Vec::new();
    write_message(&desc, obj, &mut raw)?;
    let unknown_desc = POOL.get_message_by_name(UNKNOWN)?;
    let type_meta_desc = unknown_desc.get_field_by_name("typeMeta")?.kind();
    let mut type_meta = DynamicMessage::new(type_meta_desc.as_message()?.clone());
    set(
        &mut type_meta,
        "apiVersion",
        prost_reflect::Value::String(api_version.to_owned()),
    );
    set(
        &mut type_meta,
        "kind",
        prost_reflect::Value::String(kind.to_owned()),
    );
    let mut unknown = DynamicMessage::new(unknown_desc);
    set(
        &mut unknown,
        "typeMeta",
        prost_reflect::Value::Message(type_meta),
    );
    set(&mut unknown, "raw", prost_reflect::Value::Bytes(raw.into()));
    set(
        &mut unknown,
        "contentEncoding",
        prost_reflect::Value::String(String::new()),
    );
    set(
        &mut unknown,
        "contentType",
        prost_reflect::Value::String(String::new()),
    );
    let mut out = Vec::with_capacity(MAGIC.len() + unknown.encoded_len());
    out.extend_from_slice(MAGIC);
    unknown.encode(&mut out).ok()?;
    Some(out)
}

/// A JSON object written as `desc` straight to protobuf bytes (no intermediate message: nested
/// lengths are known once a child is written). Fields the schema does not know, and values of
/// the wrong JSON type, are left out (stored objects were validated as JSON, not against this
/// schema); `None` only when a special type's value does not parse.
fn write_message(desc: &MessageDescriptor, v: &Value, out: &mut Vec<u8>) -> Option<()> {
    use prost::encoding::{bytes, int32, int64, string};
    match desc.full_name() {
        TIME | MICRO_TIME => {
            let (secs, nanos) = parse_time(v.as_str()?)?;
            let nanos = if desc.full_name() == MICRO_TIME {
                nanos / 1000 * 1000
            } else {
                0
            };
            int64::encode(1, &secs, out);
            int32::encode(2, &nanos, out);
        }
        QUANTITY => match v {
            Value::String(s) => string::encode(1, s, out),
            Value::Number(n) => string::encode(1, &n.to_string(), out),
            _ => return None,
        },
        INT_OR_STRING => match v {
            Value::String(s) => {
                int64::encode(1, &1, out);
                string::encode(3, s, out);
            }
            Value::Number(n) => {
                let n = i32::try_from(n.as_i64()?).ok()?;
                int64::encode(1, &0, out);
                int32::encode(2, &n, out);
            }
            _ => return None,
        },
        RAW_EXTENSION | FIELDS_V1 => bytes::encode(1, &serde_json::to_vec(v).ok()?, out),
        _ => {
            for (k, val) in v.as_object()? {
                let Some(fd) = desc.get_field_by_name(k) else {
                    continue;
                };
                if val.is_null() {
                    continue;
                }
                let kind = fd.kind();
                let tag = fd.number();
                if fd.is_map() {
                    let (Some(entry), Some(obj)) = (kind.as_message(), val.as_object()) else {
                        continue;
                    };
                    let value_kind = entry.map_entry_value_field().kind();
                    let mut pair = Vec::new();
                    for (key, item) in obj {
                        pair.clear();
                        string::encode(1, key, &mut pair);
                        if write_field(2, &value_kind, item, &mut pair) {
                            bytes::encode(tag, &pair, out);
                        }
                    }
                } else if fd.is_list() {
                    for item in val.as_array().into_iter().flatten() {
                        write_field(tag, &kind, item, out);
                    }
                } else {
                    write_field(tag, &kind, val, out);
                }
            }
        }
    }
    Some(())
}

/// Write one field (tag and value); `false`, with nothing written, when `v` does not fit `kind`.
fn write_field(tag: u32, kind: &Kind, v: &Value, out: &mut Vec<u8>) -> bool {
    use prost::encoding::{
        bool as pbool, bytes, double, float, int32, int64, string, uint32, uint64,
    };
    let int = || {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
    };
    let written = match kind {
        Kind::Bool => v.as_bool().map(|b| pbool::encode(tag, &b, out)),
        Kind::Int32 | Kind::Enum(_) => int()
            .and_then(|n| i32::try_from(n).ok())
            .map(|n| int32::encode(tag, &n, out)),
        Kind::Int64 => int().map(|n| int64::encode(tag, &n, out)),
        Kind::Uint32 => int()
            .and_then(|n| u32::try_from(n).ok())
            .map(|n| uint32::encode(tag, &n, out)),
        Kind::Uint64 => int()
            .and_then(|n| u64::try_from(n).ok())
            .map(|n| uint64::encode(tag, &n, out)),
        Kind::Float => v.as_f64().map(|f| float::encode(tag, &(f as f32), out)),
        Kind::Double => v.as_f64().map(|f| double::encode(tag, &f, out)),
        Kind::String => v.as_str().map(|s| string::encode(tag, &s.to_owned(), out)),
        Kind::Bytes => v
            .as_str()
            .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
            .map(|b| bytes::encode(tag, &b, out)),
        Kind::Message(m) => {
            let mut inner = Vec::new();
            write_message(m, v, &mut inner).map(|()| bytes::encode(tag, &inner, out))
        }
        // Not in the Kubernetes schema (sint/fixed encodings).
        _ => None,
    };
    written.is_some()
}

/// Set a field by name; a name or type the schema does not have is ignored (never a panic).
fn set(msg: &mut DynamicMessage, name: &str, value: prost_reflect::Value) {
    let _ = msg.try_set_field_by_name(name, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt as _;

    use crate::{ApiServer, ServerOptions, Store};

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "default", "labels": {"app": "web"},
                "creationTimestamp": "2025-01-31T12:00:00Z",
                "managedFields": [{"manager": "m", "operation": "Apply", "apiVersion": "apps/v1",
                    "time": "2025-01-31T12:00:01Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "nginx", "image": "nginx",
                        "ports": [{"containerPort": 80}],
                        "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
                        "env": [{"name": "A", "value": "1"}, {"name": "EMPTY"}]
                    }]}
                }
            }
        })
    }

    fn lease() -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": "default"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                     "acquireTime": "2025-01-31T12:00:00.123456Z",
                     "renewTime": "2025-01-31T12:00:05.000000Z"}
        })
    }

    #[test]
    fn the_embedded_schema_has_every_built_in_kind_with_a_protobuf_form() {
        for (av, kind) in [
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("v1", "Namespace"),
            ("v1", "Service"),
            ("v1", "Pod"),
            ("v1", "Event"),
            ("v1", "ServiceAccount"),
            ("v1", "ConfigMapList"),
            ("v1", "Status"),
            ("apps/v1", "Deployment"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "DaemonSet"),
            ("apps/v1", "ReplicaSet"),
            ("apps/v1", "DeploymentList"),
            ("apps/v1", "DeleteOptions"),
            ("coordination.k8s.io/v1", "Lease"),
            ("batch/v1", "Job"),
            ("meta.k8s.io/v1", "WatchEvent"),
            ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ] {
            assert!(message_for(av, kind).is_some(), "{av} {kind}");
        }
        for (av, kind) in [
            ("policy.karmada.io/v1alpha1", "PropagationPolicy"),
            ("apps.example.com/v1", "Deployment"),
            ("v1", "ObjectMeta"),
            ("v1", ""),
        ] {
            assert!(message_for(av, kind).is_none(), "{av} {kind}");
        }
        assert!(KEEP_ZERO.contains("k8s.io.api.apps.v1.DeploymentSpec.replicas"));
    }

    #[test]
    fn objects_survive_json_to_protobuf_and_back() {
        for obj in [deployment(), lease()] {
            let pb = encode(&obj).expect("encodes");
            assert!(pb.starts_with(MAGIC));
            assert_eq!(decode(&pb, 0).unwrap(), obj);
        }
    }

    #[test]
    fn go_zero_values_are_dropped_unless_json_keeps_them() {
        // What Go writes for an almost empty Deployment: every non-pointer field, zero or not.
        let mut obj = deployment();
        obj["spec"]["minReadySeconds"] = json!(0);
        obj["spec"]["paused"] = json!(false);
        obj["metadata"]["generateName"] = json!("");
        obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("");
        let back = decode(&encode(&obj).unwrap(), 0).unwrap();
        assert_eq!(back, deployment());
        assert_eq!(back["spec"]["replicas"], 0, "a pointer's zero is kept");
        // `value` is `omitempty` in Go: an empty one is not written in JSON either.
        let mut empty = deployment();
        empty["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] = json!("");
        assert_eq!(decode(&encode(&empty).unwrap(), 0).unwrap(), deployment());
        // Map values are data: empty ones stay.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"empty": ""}});
        assert_eq!(decode(&encode(&cm).unwrap(), 0).unwrap(), cm);
    }

    #[test]
    fn negotiation_follows_accept_and_q_values() {
        let n = |accept: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            Negotiated::from_headers(&h)
        };
        use Negotiated::*;
        assert_eq!(n(&format!("{MEDIA_TYPE}, application/json")), Protobuf);
        assert_eq!(n(&format!("application/json, {MEDIA_TYPE}")), AsIs);
        assert_eq!(
            n(&format!("application/json;q=0.5, {MEDIA_TYPE};q=0.9")),
            Protobuf
        );
        assert_eq!(n(&format!("{MEDIA_TYPE};q=0, */*")), AsIs);
        assert_eq!(n(MEDIA_TYPE), ProtobufOnly);
        assert_eq!(n(&format!("{MEDIA_TYPE}, */*")), Protobuf);
        assert_eq!(
            n(&format!(
                "{MEDIA_TYPE};as=Table;v=v1;g=meta.k8s.io, application/json"
            )),
            AsIs
        );
        assert_eq!(n("*/*"), AsIs);
        assert_eq!(Negotiated::from_headers(&HeaderMap::new()), AsIs);
    }

    #[test]
    fn watch_events_become_length_prefixed_watch_event_frames() {
        let line = serde_json::to_vec(&json!({"type": "ADDED", "object": lease()})).unwrap();
        let frame = watch_frame(&line);
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        let desc = POOL
            .get_message_by_name(&format!("{META}.WatchEvent"))
            .unwrap();
        let event = DynamicMessage::decode(desc, &frame[4..]).unwrap();
        assert_eq!(
            event.get_field_by_name("type").unwrap().as_str(),
            Some("ADDED")
        );
        let object = event.get_field_by_name("object").unwrap();
        let raw = object
            .as_message()
            .unwrap()
            .get_field_by_name("raw")
            .unwrap();
        assert_eq!(decode(raw.as_bytes().unwrap(), 0).unwrap(), lease());
        // Not an event at all: an ERROR frame, not a panic.
        let error = watch_frame(b"{");
        let event = DynamicMessage::decode(
            POOL.get_message_by_name(&format!("{META}.WatchEvent"))
                .unwrap(),
            &error[4..],
        )
        .unwrap();
        assert_eq!(
            event.get_field_by_name("type").unwrap().as_str(),
            Some("ERROR")
        );

        assert_eq!(
            watched("/api/v1/namespaces/default/configmaps")
                .unwrap()
                .kind,
            "ConfigMap"
        );
        assert_eq!(
            watched("/clusters/m1/apis/apps/v1/deployments")
                .unwrap()
                .kind,
            "Deployment"
        );
        assert_eq!(watched("/api/v1/namespaces").unwrap().kind, "Namespace");
        assert!(watched("/version").is_none());
    }

    use fastrand::Rng;

    fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
        let mut b = seed.to_vec();
        for _ in 0..=rng.usize(..4) {
            match rng.usize(..6) {
                0 if !b.is_empty() => {
                    let i = rng.usize(..b.len());
                    b[i] ^= 1 << rng.usize(..8);
                }
                1 if !b.is_empty() => {
                    let i = rng.usize(..b.len());
                    b[i] = rng.u64(..) as u8;
                }
                2 => b.truncate(rng.usize(..b.len() + 1)),
                3 => {
                    let i = rng.usize(..b.len() + 1);
                    let junk: Vec<u8> = (0..rng.usize(..16)).map(|_| rng.u64(..) as u8).collect();
                    b.splice(i..i, junk);
                }
                4 if !b.is_empty() => {
                    // A length or tag byte turned huge: a varint continuation run.
                    let i = rng.usize(..b.len());
                    let run = rng.usize(..10) + 1;
                    b.splice(i..i, std::iter::repeat_n(0xff, run));
                }
                _ => {
                    let i = rng.usize(..b.len() + 1);
                    let j = (i + rng.usize(..32)).min(b.len());
                    let copy = b[i..j].to_vec();
                    b.splice(i..i, copy);
                }
            }
        }
        b
    }

    /// Protobuf nested `depth` levels through field 1 (length-delimited), as in
    /// `ObjectMeta.ownerReferences` or any message field.
    fn nested(depth: usize) -> Vec<u8> {
        let mut inner: Vec<u8> = Vec::new();
        for _ in 0..depth {
            let mut outer = vec![0x0a];
            prost::encoding::encode_varint(inner.len() as u64, &mut outer);
            outer.extend_from_slice(&inner);
            inner = outer;
        }
        inner
    }

    #[tokio::test]
    async fn mutated_protobuf_bodies_are_400_or_415_statuses_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        let router =
            ApiServer::new(Store::open(dir.path()).unwrap(), ServerOptions::default()).router();
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"k": "v"},
            "binaryData": {"b": "AAE="}});
        let seeds = [
            (
                "/apis/apps/v1/namespaces/default/deployments",
                encode(&deployment()).unwrap(),
            ),
            ("/api/v1/namespaces/default/configmaps", {
                cm["metadata"]["name"] = json!("seed");
                encode(&cm).unwrap()
            }),
            (
                "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                encode(&lease()).unwrap(),
            ),
        ];
        let mut rng = Rng::with_seed(0x5eed_f107_111a);
        let mut counts = std::collections::BTreeMap::<u16, usize>::new();
        // Direct decodes are cheap: many of them; through HTTP, fewer.
        for i in 0..6000 {
            let (path, seed) = &seeds[i % seeds.len()];
            let body = mutate(&mut rng, seed);
            if i % 5 == 0 {
                let req = Request::builder()
                    .method("POST")
                    .uri(*path)
                    .header(header::CONTENT_TYPE, MEDIA_TYPE)
                    .header(header::ACCEPT, format!("{MEDIA_TYPE}, application/json"))
                    .body(Body::from(body))
                    .unwrap();
                let resp = router.clone().oneshot(req).await.unwrap();
                let code = resp.status().as_u16();
                *counts.entry(code).or_default() += 1;
                let pb = resp
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .is_some_and(|v| v == MEDIA_TYPE);
                let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap();
                let answer = if pb {
                    decode(&bytes, 0).expect("our own protobuf answers decode")
                } else {
                    serde_json::from_slice(&bytes).expect("JSON answer")
                };
                assert!(
                    matches!(code, 201 | 400 | 409 | 415 | 422),
                    "{code}: {answer}"
                );
                if code >= 400 {
                    assert_eq!(answer["kind"], "Status", "{answer}");
                    assert_eq!(answer["code"], code, "{answer}");
                }
            } else if let Err(e) = decode(&body, 0) {
                *counts.entry(e.code).or_default() += 1;
                assert!(matches!(e.code, 400 | 415), "{e}");
            } else {
                *counts.entry(200).or_default() += 1;
            }
        }
        let refused =
            counts.get(&400).copied().unwrap_or(0) + counts.get(&415).copied().unwrap_or(0);
        assert!(refused >= 1000, "{counts:?}");

        // Nesting past prost's recursion limit, and bodies that are not protobuf at all.
        let deep = {
            let mut raw_unknown = vec![0x12];
            let raw = nested(10_000);
            prost::encoding::encode_varint(raw.len() as u64, &mut raw_unknown);
            raw_unknown.extend_from_slice(&raw);
            let mut body = MAGIC.to_vec();
            // typeMeta {apiVersion: "v1", kind: "ConfigMap"}
            body.extend_from_slice(&[0x0a, 0x0f, 0x0a, 0x02, b'v', b'1', 0x12, 0x09]);
            body.extend_from_slice(b"ConfigMap");
            body.extend_from_slice(&raw_unknown);
            body
        };
        for body in [
            deep,
            nested(10_000),
            b"{}".to_vec(),
            Vec::new(),
            MAGIC.to_vec(),
        ] {
            let req = Request::builder()
                .method("POST")
                .uri("/api/v1/namespaces/default/configmaps")
                .header(header::CONTENT_TYPE, MEDIA_TYPE)
                .body(Body::from(body))
                .unwrap();
            let resp = router.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        }
    }

    /// Protobuf vs JSON: a Deployment create (dry run, so the disk is not measured) and a list
    /// of 1,000 Deployments. `cargo test --release -p flotilla-apiserver --lib
    /// protobuf_vs_json_cost -- --ignored --nocapture`.
    #[tokio::test]
    #[ignore = "a measurement; run with --release"]
    async fn protobuf_vs_json_cost() {
        use std::time::Instant;
        let dir = tempfile::tempdir().unwrap();
        let router =
            ApiServer::new(Store::open(dir.path()).unwrap(), ServerOptions::default()).router();
        let deploys = "/apis/apps/v1/namespaces/default/deployments";
        let both = format!("{MEDIA_TYPE}, application/json");
        let send = |method: &str, uri: String, ct: &str, accept: &str, body: Vec<u8>| {
            let req = Request::builder()
                .method(method)
                .uri(uri)
                .header(header::CONTENT_TYPE, ct)
                .header(header::ACCEPT, accept)
                .body(Body::from(body))
                .unwrap();
            let router = router.clone();
            async move {
                let resp = router.oneshot(req).await.unwrap();
                let code = resp.status().as_u16();
                let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap();
                (code, bytes.len())
            }
        };
        let mut obj = deployment();
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("managedFields");
            m.remove("creationTimestamp");
        }
        let json_body = serde_json::to_vec(&obj).unwrap();
        let pb_body = encode(&obj).unwrap();
        const CREATES: u32 = 2000;
        for (label, ct, accept, body) in [
            ("json", "application/json", "application/json", &json_body),
            ("protobuf", MEDIA_TYPE, both.as_str(), &pb_body),
        ] {
            let uri = format!("{deploys}?dryRun=All");
            let start = Instant::now();
            let mut size = 0;
            for _ in 0..CREATES {
                let (code, len) = send("POST", uri.clone(), ct, accept, body.clone()).await;
                assert_eq!(code, 201);
                size = len;
            }
            let each = start.elapsed() / CREATES;
            println!(
                "create Deployment (dry run), {label}: {each:?} per request, request {} B, answer {size} B",
                body.len()
            );
        }
        for i in 0..1000 {
            obj["metadata"]["name"] = json!(format!("web-{i}"));
            let (code, _) = send(
                "POST",
                deploys.to_owned(),
                "application/json",
                "application/json",
                serde_json::to_vec(&obj).unwrap(),
            )
            .await;
            assert_eq!(code, 201);
        }
        const LISTS: u32 = 20;
        for (label, accept) in [("json", "application/json"), ("protobuf", both.as_str())] {
            let start = Instant::now();
            let mut size = 0;
            for _ in 0..LISTS {
                let (code, len) = send("GET", deploys.to_owned(), "", accept, Vec::new()).await;
                assert_eq!(code, 200);
                size = len;
            }
            let each = start.elapsed() / LISTS;
            println!("list 1,000 Deployments, {label}: {each:?} per request, answer {size} B");
        }
    }

    /// The worst body for memory: 3 MiB of 2-byte list items (a Pod's `supplementalGroups`).
    /// Prints the time to refuse or accept it and the process's peak resident memory before and
    /// after. `cargo test --release -p flotilla-apiserver --lib protobuf_worst_case_memory --
    /// --ignored --nocapture` (alone: the peak is the process's).
    #[test]
    #[ignore = "a measurement; run alone with --release"]
    fn protobuf_worst_case_memory() {
        use std::time::Instant;
        let peak = || {
            std::fs::read_to_string("/proc/self/status")
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_owned()))
                .unwrap_or_default()
        };
        let number = |message: &str, field: &str| {
            let m = POOL.get_message_by_name(message).unwrap();
            m.get_field_by_name(field).unwrap().number()
        };
        let wrap = |field: u32, inner: &[u8]| {
            let mut out = Vec::new();
            prost::encoding::encode_key(
                field,
                prost::encoding::WireType::LengthDelimited,
                &mut out,
            );
            prost::encoding::encode_varint(inner.len() as u64, &mut out);
            out.extend_from_slice(inner);
            out
        };
        let groups = number(
            "k8s.io.api.core.v1.PodSecurityContext",
            "supplementalGroups",
        );
        let mut key = Vec::new();
        prost::encoding::encode_key(groups, prost::encoding::WireType::Varint, &mut key);
        let items = (3 * 1024 * 1024 - 200) / (key.len() + 1);
        let mut security = Vec::with_capacity(items * (key.len() + 1));
        for _ in 0..items {
            security.extend_from_slice(&key);
            security.push(1);
        }
        let spec = wrap(
            number("k8s.io.api.core.v1.PodSpec", "securityContext"),
            &security,
        );
        let pod = wrap(number("k8s.io.api.core.v1.Pod", "spec"), &spec);
        let mut unknown = wrap(
            1,
            &wrap(1, b"v1")
                .into_iter()
                .chain(wrap(2, b"Pod"))
                .collect::<Vec<_>>(),
        );
        unknown.extend_from_slice(&wrap(2, &pod));
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&unknown);
        drop((security, spec, pod, unknown));
        println!(
            "body: {} B, {items} list items; peak RSS before: {}",
            body.len(),
            peak()
        );
        let start = Instant::now();
        let json = decode(&body, 0).map(|v| serde_json::to_vec(&v).unwrap().len());
        println!(
            "decoded to {:?} B of JSON in {:?}; peak RSS after: {}",
            json.as_ref().ok(),
            start.elapsed(),
            peak()
        );
    }

    #[tokio::test]
    async fn kinds_without_a_protobuf_form_answer_json_and_refuse_protobuf_bodies() {
        let dir = tempfile::tempdir().unwrap();
        let router =
            ApiServer::new(Store::open(dir.path()).unwrap(), ServerOptions::default()).router();
        let pp = "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies";
        let req = Request::builder()
            .method("POST")
            .uri(pp)
            .header(header::CONTENT_TYPE, MEDIA_TYPE)
            .body(Body::from(encode(&lease()).unwrap()))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

        let req = Request::builder()
            .uri(pp)
            .header(header::ACCEPT, format!("{MEDIA_TYPE}, application/json"))
            .body(Body::empty())
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");

        let req = Request::builder()
            .uri(pp)
            .header(header::ACCEPT, MEDIA_TYPE)
            .body(Body::empty())
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_ACCEPTABLE);

        // A built-in kind: protobuf in, protobuf out, JSON at rest.
        let req = Request::builder()
            .method("POST")
            .uri("/apis/apps/v1/namespaces/default/deployments")
            .header(header::CONTENT_TYPE, MEDIA_TYPE)
            .header(header::ACCEPT, format!("{MEDIA_TYPE}, application/json"))
            .body(Body::from(encode(&deployment()).unwrap()))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], MEDIA_TYPE);
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let created = decode(&bytes, 0).unwrap();
        assert_eq!(created["spec"]["replicas"], 0);
        assert!(created["metadata"]["uid"].is_string());
        let req = Request::builder()
            .uri("/apis/apps/v1/namespaces/default/deployments/web")
            .body(Body::empty())
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let stored: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(stored["spec"], created["spec"]);
    }
}
