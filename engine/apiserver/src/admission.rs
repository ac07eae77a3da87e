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
//! Checks that depend on other objects (Karmada's webhooks list them through their client) read
//! them through [`Existing`]: a read-only view of the stored objects of the logical cluster
//! being written, listed on demand (nothing is read unless a check asks). Such a check may
//! deny the request outright ([`AdmissionError::denied`]), which becomes a `403 Forbidden`
//! `admission webhook "<name>" denied the request: <message>`, as kube-apiserver reports a
//! validating webhook's denial; a check that cannot be made (the stored objects cannot be read)
//! fails the request with the webhook's own error code ([`AdmissionError::errored`], controller-
//! runtime's `admission.Errored`), e.g. `500` with the same message and no reason.
//!
//! **Ratcheting.** An update whose spec (everything but metadata and status) is unchanged from the
//! stored object is not rejected even when admission fails: the invalid content was accepted
//! earlier (or by an older version), and controllers must still be able to edit metadata, such as
//! removing finalizers. Its defaults are not applied either.

use std::sync::Arc;

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

/// Why an object was refused: one or more invalid fields, or a webhook's denial.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct AdmissionError {
    /// The invalid fields, in the order found.
    pub causes: Vec<FieldError>,
    /// A denial of the whole request: `(webhook name, message)`.
    pub denial: Option<(String, String)>,
    /// The HTTP code of a denial: `403` ([`AdmissionError::denied`]) or the code of a webhook
    /// that could not decide ([`AdmissionError::errored`]).
    pub denial_code: u16,
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
            denial: None,
            denial_code: 403,
        }
    }

    /// A rejection of several fields (at least one should be given).
    pub fn new(causes: Vec<FieldError>) -> Self {
        AdmissionError {
            causes,
            denial: None,
            denial_code: 403,
        }
    }

    /// The request denied by validating webhook `webhook` with `message` (controller-runtime's
    /// `admission.Denied`): `403 Forbidden`.
    pub fn denied(webhook: impl Into<String>, message: impl Into<String>) -> Self {
        AdmissionError {
            causes: Vec::new(),
            denial: Some((webhook.into(), message.into())),
            denial_code: 403,
        }
    }

    /// The request failed by validating webhook `webhook`, which could not decide, with HTTP
    /// `code` and `message` (controller-runtime's `admission.Errored`, as Karmada's webhooks
    /// answer `500` when listing the objects a check needs fails). kube-apiserver reports it as a
    /// `Status` with that code, `admission webhook "<name>" denied the request: <message>` and no
    /// reason (the webhook's result carries none).
    pub fn errored(webhook: impl Into<String>, code: u16, message: impl Into<String>) -> Self {
        AdmissionError {
            causes: Vec::new(),
            denial: Some((webhook.into(), message.into())),
            denial_code: code,
        }
    }

    fn render(&self) -> String {
        match &self.denial {
            Some((webhook, message)) => {
                format!("admission webhook \"{webhook}\" denied the request: {message}")
            }
            None => render_causes(&self.causes),
        }
    }

    /// The `403 Forbidden` error of a denial (a webhook's error: its code, no reason), else the
    /// `422 Invalid` API error for object `name` of `res`, in Kubernetes' shape
    /// (`Kind.group "name" is invalid: field: message`, `details.causes[{reason, field, message}]`).
    pub fn to_api_error(&self, res: &Resource, name: &str) -> ApiError {
        if self.denial.is_some() {
            if self.denial_code == 403 {
                return ApiError::new(403, "Forbidden", self.to_string());
            }
            // kube-apiserver keeps a rejection at 400 or above.
            return ApiError::new(self.denial_code.max(400), "", self.to_string());
        }
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

    /// [`Admission::admit`] with a view of the stored objects, for checks that depend on other
    /// objects; by default the view is not used.
    ///
    /// # Errors
    /// The object is invalid, or the request is denied; nothing is stored.
    fn admit_with(
        &self,
        op: Operation,
        resource: &Resource,
        object: &mut Value,
        old: Option<&Value>,
        existing: &dyn Existing,
    ) -> Result<(), AdmissionError> {
        let _ = existing;
        self.admit(op, resource, object, old)
    }
}

/// A read-only view of the stored objects of the logical cluster a write goes to.
pub trait Existing {
    /// Every stored object of `resource` (of every namespace when it is namespaced).
    ///
    /// # Errors
    /// A storage failure, as a message.
    fn list(&self, resource: &Resource) -> Result<Vec<Arc<Value>>, String>;
}

/// No stored objects (admission outside a server, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct Nothing;

impl Existing for Nothing {
    fn list(&self, _resource: &Resource) -> Result<Vec<Arc<Value>>, String> {
        Ok(Vec::new())
    }
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

    #[test]
    fn denial_renders_as_a_webhooks_forbidden_status() {
        let res = crate::registry::lookup(
            "config.karmada.io",
            "v1alpha1",
            "resourceinterpretercustomizations",
        )
        .unwrap();
        let status = AdmissionError::denied("w.karmada.io", "conflicting")
            .to_api_error(res, "x")
            .to_status();
        assert_eq!(status["code"], 403);
        assert_eq!(status["reason"], "Forbidden");
        assert_eq!(
            status["message"],
            "admission webhook \"w.karmada.io\" denied the request: conflicting"
        );
    }

    #[test]
    fn a_webhook_error_renders_as_kube_apiserver_reports_it() {
        let res = crate::registry::lookup(
            "config.karmada.io",
            "v1alpha1",
            "resourceinterpretercustomizations",
        )
        .unwrap();
        let e = AdmissionError::errored("w.karmada.io", 500, "listing failed");
        let api = e.to_api_error(res, "x");
        assert_eq!(api.code, 500);
        assert_eq!(
            api.to_status(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "admission webhook \"w.karmada.io\" denied the request: listing failed",
                "code": 500,
            })
        );
    }
}
