//! Admission: the extension point where defaults are applied and objects validated before they are
//! stored (what Kubernetes does with mutating and validating webhooks).
//!
//! The server calls the registered [`Admission`] (see [`crate::ServerOptions::admission`]) on every
//! write of an object's main resource: create, update, every kind of patch (JSON, merge,
//! strategic merge, server-side apply, including create-on-apply), dry-run or not. Writes through
//! the `status` subresource are not admitted. A rejection becomes a `422 Invalid` `Status` with
//! one `details.causes` entry per field, which `kubectl` prints as
//! `The PropagationPolicy "x" is invalid: spec.placement...: ...`.
//!
//! **Ratcheting.** An update whose spec (everything but metadata and status) is unchanged from the
//! stored object is not rejected even when admission fails: the invalid content was accepted
//! earlier (or by an older version), and controllers must still be able to edit metadata, such as
//! removing finalizers. Its defaults are not applied either.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::Resource;

/// The write being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object (POST, or server-side apply of an absent object).
    Create,
    /// A change to a stored object (PUT or PATCH).
    Update,
}

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, e.g. `spec.placement.clusterAffinities[1].affinityName`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why an object was refused: one or more invalid fields.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_causes(&self.causes))]
pub struct AdmissionError {
    /// The invalid fields, in the order found.
    pub causes: Vec<FieldError>,
}

fn render_causes(causes: &[FieldError]) -> String {
    let all: Vec<String> = causes.iter().map(ToString::to_string).collect();
    match all.len() {
        0 => "invalid object".to_owned(),
        1 => all.join(""),
        _ => format!("[{}]", all.join(", ")),
    }
}

impl AdmissionError {
    /// A rejection of one field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        AdmissionError {
            causes: vec![FieldError {
                field: field.into(),
                message: message.into(),
            }],
        }
    }

    /// A rejection of several fields (at least one should be given).
    pub fn new(causes: Vec<FieldError>) -> Self {
        AdmissionError { causes }
    }

    /// The `422 Invalid` API error for object `name` of `res`, in Kubernetes' shape
    /// (`Kind.group "name" is invalid: field: message`, `details.causes[{reason, field, message}]`).
    pub fn to_api_error(&self, res: &Resource, name: &str) -> ApiError {
        let qualified_kind = if res.group.is_empty() {
            res.kind.to_owned()
        } else {
            format!("{}.{}", res.kind, res.group)
        };
        let causes: Vec<Value> = self
            .causes
            .iter()
            .map(|c| json!({"reason": "FieldValueInvalid", "field": c.field, "message": c.message}))
            .collect();
        ApiError::invalid(format!("{qualified_kind} \"{name}\" is invalid: {self}")).with_details(
            json!({"name": name, "group": res.group, "kind": res.kind, "causes": causes}),
        )
    }
}

/// Defaults and validation run on every admitted write (see the module docs).
///
/// Implementations must be pure functions of their inputs (they may run several times for one
/// request when a write is retried after losing a race) and cheap enough to run inline.
pub trait Admission: Send + Sync + std::fmt::Debug {
    /// Admit `object` (the complete object about to be stored, server-set metadata included) for
    /// `resource`; `old` is the stored object on [`Operation::Update`]. Apply defaults by mutating
    /// `object`; objects of kinds the implementation does not know pass unchanged.
    ///
    /// # Errors
    /// The object is invalid; nothing is stored.
    fn admit(
        &self,
        op: Operation,
        resource: &Resource,
        object: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), AdmissionError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejection_renders_as_kubernetes_invalid_status() {
        let res = crate::registry::lookup("policy.karmada.io", "v1alpha1", "propagationpolicies")
            .unwrap();
        let e = AdmissionError::field(
            "spec.placement.clusterAffinities[1].affinityName",
            "duplicate affinity name \"a\"",
        );
        let status = e.to_api_error(res, "x").to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(
            status["message"],
            "PropagationPolicy.policy.karmada.io \"x\" is invalid: spec.placement.clusterAffinities[1].affinityName: duplicate affinity name \"a\""
        );
        assert_eq!(status["details"]["kind"], "PropagationPolicy");
        assert_eq!(
            status["details"]["causes"][0]["field"],
            "spec.placement.clusterAffinities[1].affinityName"
        );
        let two = AdmissionError::new(vec![
            FieldError {
                field: "a".into(),
                message: "x".into(),
            },
            FieldError {
                field: "b".into(),
                message: "y".into(),
            },
        ]);
        assert_eq!(two.to_string(), "[a: x, b: y]");
    }
}
