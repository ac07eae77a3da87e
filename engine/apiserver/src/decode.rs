//! Request body decoding that notices duplicate fields, and the `fieldValidation` directive that
//! reports them and unknown fields ([`crate::openapi::unknown_fields`]).
//!
//! serde_json and serde_yaml both decode `{"a":1,"a":2}` into a map holding only the last value.
//! kube-apiserver's decoder (sigs.k8s.io/json, `UnmarshalStrict`) also keeps the last value but
//! reports each repeated field with its path, and the request's `fieldValidation` decides what
//! happens: `Strict` refuses the request (400), `Warn` (the default when the parameter is absent)
//! answers with a `Warning` header per field, and `Ignore` says nothing
//! (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go`, `fieldValidation`).
//!
//! The decoder here builds the same [`Value`] serde_json would ([`flotilla_api::value_seed`]),
//! while recording the path of every key it has already seen in the same map.

use flotilla_api::value_seed::{Checked, KeyCheck};
use serde::de::{self, DeserializeSeed};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::openapi::Unknown;

/// The most duplicate fields reported for one body (the rest are counted).
const MAX_REPORTED: usize = 16;
/// The longest field path reported; longer ones are cut.
const MAX_PATH: usize = 256;

/// What to do with fields the server would drop: kube-apiserver's `fieldValidation` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    /// Accept silently.
    Ignore,
    /// Accept, with a `Warning` header per field (the default).
    Warn,
    /// Refuse the request with 400 BadRequest.
    Strict,
}

impl FieldValidation {
    /// Parse the query parameter; `options` names the options kind in the error
    /// (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
    ///
    /// # Errors
    /// 422 Invalid for any value but `Ignore`, `Warn`, `Strict` or none, as kube-apiserver.
    pub(crate) fn parse(param: Option<&str>, options: &str) -> Result<Self, ApiError> {
        match param {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::invalid(format!(
                "{options}.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: {:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                truncate(other)
            ))),
        }
    }

    /// Apply the directive to the duplicate and unknown fields of a decoded body: push warnings,
    /// or refuse. `context` prefixes the strict error (kube-apiserver's "X in version Y cannot be
    /// handled as a X: " for objects; empty for patches).
    ///
    /// # Errors
    /// 400 BadRequest `strict decoding error: unknown field "…", duplicate field "…"` under
    /// `Strict`.
    pub(crate) fn check(
        self,
        decoded: &Decoded,
        context: &str,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        let mut messages = unknown_messages(&decoded.unknown);
        messages.extend(
            decoded
                .duplicates
                .iter()
                .map(|path| format!("duplicate field {path:?}")),
        );
        if decoded.unreported > 0 {
            messages.push(format!("and {} more duplicate fields", decoded.unreported));
        }
        self.report(messages, context, warnings)
    }

    /// Apply the directive to the unknown fields of an object (a patched object's, found after
    /// the patch applied), as [`FieldValidation::check`].
    ///
    /// # Errors
    /// 400 BadRequest `strict decoding error: unknown field "…"` under `Strict`.
    pub(crate) fn check_unknown(
        self,
        unknown: &Unknown,
        context: &str,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        self.report(unknown_messages(unknown), context, warnings)
    }

    fn report(
        self,
        messages: Vec<String>,
        context: &str,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        if messages.is_empty() {
            return Ok(());
        }
        match self {
            FieldValidation::Ignore => Ok(()),
            FieldValidation::Warn => {
                warnings.extend(messages);
                Ok(())
            }
            FieldValidation::Strict => Err(ApiError::bad_request(format!(
                "{context}strict decoding error: {}",
                messages.join(", ")
            ))),
        }
    }
}

fn unknown_messages(unknown: &Unknown) -> Vec<String> {
    let mut messages: Vec<String> = unknown
        .paths
        .iter()
        .map(|path| format!("unknown field {path:?}"))
        .collect();
    if unknown.unreported > 0 {
        messages.push(format!("and {} more unknown fields", unknown.unreported));
    }
    messages
}

/// A decoded body and its duplicate fields.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// The body; a repeated key keeps its last value.
    pub(crate) value: Value,
    /// Paths of repeated keys, like `metadata.labels.app` or `spec.containers[0].name`.
    pub(crate) duplicates: Vec<String>,
    /// Duplicates found beyond [`MAX_REPORTED`].
    pub(crate) unreported: usize,
    /// Fields the kind's schema does not declare ([`crate::openapi::unknown_fields`]), filled
    /// in by the caller that knows the kind.
    pub(crate) unknown: Unknown,
}

/// Decode JSON, noting duplicate fields.
///
/// # Errors
/// serde_json's error (syntax, or nesting deeper than its limit of 128).
pub(crate) fn json(body: &[u8]) -> Result<Decoded, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let decoded = decode(&mut de)?;
    de.end()?;
    Ok(decoded)
}

/// Decode a YAML document, noting duplicate fields.
///
/// # Errors
/// serde_yaml's error.
pub(crate) fn yaml(body: &[u8]) -> Result<Decoded, serde_yaml::Error> {
    decode(serde_yaml::Deserializer::from_slice(body))
}

fn decode<'de, D: de::Deserializer<'de>>(de: D) -> Result<Decoded, D::Error> {
    let mut state = State::default();
    let value = Checked(&mut state).deserialize(de)?;
    Ok(Decoded {
        value,
        duplicates: state.duplicates,
        unreported: state.unreported,
        unknown: Unknown::default(),
    })
}

fn truncate(s: &str) -> &str {
    if s.len() <= MAX_PATH {
        return s;
    }
    let mut end = MAX_PATH;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// One step of a field path.
enum Segment {
    Key(String),
    Index(usize),
}

/// Where the decoder is, and the repeated keys found so far.
#[derive(Default)]
struct State {
    path: Vec<Segment>,
    duplicates: Vec<String>,
    unreported: usize,
}

impl State {
    fn record(&mut self, key: &str) {
        if self.duplicates.len() >= MAX_REPORTED {
            self.unreported += 1;
            return;
        }
        let mut out = String::new();
        for seg in &self.path {
            match seg {
                Segment::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
            }
            if out.len() > MAX_PATH {
                break;
            }
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
        self.duplicates.push(truncate(&out).to_owned());
    }
}

impl KeyCheck for State {
    fn key(&mut self, key: &str, seen: &Map<String, Value>) -> Result<(), String> {
        if seen.contains_key(key) {
            self.record(key);
        }
        Ok(())
    }

    fn enter_key(&mut self, key: &str) {
        self.path.push(Segment::Key(key.to_owned()));
    }

    fn enter_index(&mut self, index: usize) {
        self.path.push(Segment::Index(index));
    }

    fn leave(&mut self) {
        self.path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_duplicates_are_found_with_their_paths_and_the_last_value_wins() {
        let d = json(br#"{"a":1,"a":2,"s":{"l":[{"n":"x","n":"y"}]}}"#).unwrap();
        assert_eq!(d.value, json!({"a":2,"s":{"l":[{"n":"y"}]}}));
        assert_eq!(d.duplicates, ["a", "s.l[0].n"]);
    }

    #[test]
    fn yaml_duplicates_are_found_too() {
        let d = yaml(b"metadata:\n  name: a\n  name: b\ndata:\n  k: v\n").unwrap();
        assert_eq!(d.value, json!({"metadata":{"name":"b"},"data":{"k":"v"}}));
        assert_eq!(d.duplicates, ["metadata.name"]);
    }

    #[test]
    fn bodies_without_duplicates_decode_as_serde_json_does() {
        let src = br#"{"a":[1,-2,3.5,null,true,"s",{}],"b":{"c":{"d":[]}}}"#;
        let d = json(src).unwrap();
        assert_eq!(d.value, serde_json::from_slice::<Value>(src).unwrap());
        assert!(d.duplicates.is_empty());
    }

    #[test]
    fn trailing_garbage_and_deep_nesting_are_errors_not_panics() {
        assert!(json(b"{} x").is_err());
        // serde_json stops at 128 levels; serde_yaml at 128 too (the server pre-scans YAML for
        // deeper flow nesting before it gets here, as libyaml is slow on it).
        let deep = "[".repeat(1000);
        assert!(json(deep.as_bytes()).is_err());
        assert!(yaml(deep.as_bytes()).is_err());
    }

    #[test]
    fn reports_are_bounded() {
        let body = format!("{{{}}}", vec![r#""k":1"#; 1000].join(","));
        let d = json(body.as_bytes()).unwrap();
        assert_eq!(d.duplicates.len(), MAX_REPORTED);
        assert_eq!(d.unreported, 999 - MAX_REPORTED);
    }

    #[test]
    fn unknown_fields_are_reported_with_duplicates_as_kube_apiserver_words_them() {
        let mut d = json(br#"{"data":{"a":1,"a":2}}"#).unwrap();
        d.unknown = Unknown {
            paths: vec!["spec.x".into(), "spec.l[0].y".into()],
            unreported: 3,
        };
        let err = FieldValidation::Strict
            .check(
                &d,
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: ",
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: \
             unknown field \"spec.x\", unknown field \"spec.l[0].y\", and 3 more unknown fields, \
             duplicate field \"data.a\""
        );
        let mut warnings = Vec::new();
        FieldValidation::Warn.check(&d, "", &mut warnings).unwrap();
        assert_eq!(warnings[0], "unknown field \"spec.x\"");
        assert_eq!(warnings.len(), 4);
        let mut warnings = Vec::new();
        FieldValidation::Ignore
            .check(&d, "", &mut warnings)
            .unwrap();
        FieldValidation::Ignore
            .check_unknown(&d.unknown, "", &mut warnings)
            .unwrap();
        assert!(warnings.is_empty());
        let err = FieldValidation::Strict
            .check_unknown(&d.unknown, "", &mut warnings)
            .unwrap_err();
        assert!(
            err.message
                .starts_with("strict decoding error: unknown field \"spec.x\"")
        );
    }

    #[test]
    fn field_validation_defaults_to_warn_and_refuses_unknown_directives() {
        assert_eq!(
            FieldValidation::parse(None, "CreateOptions").unwrap(),
            FieldValidation::Warn
        );
        assert_eq!(
            FieldValidation::parse(Some("Strict"), "CreateOptions").unwrap(),
            FieldValidation::Strict
        );
        let err = FieldValidation::parse(Some("strict"), "PatchOptions").unwrap_err();
        assert_eq!(err.code, 422);
    }
}
