//! Kubernetes `Status` errors: every failed request answers with one.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed API request, rendered as a `meta/v1 Status` with the matching HTTP code.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// Optional `details` object.
    pub details: Option<Value>,
}

impl ApiError {
    /// A new error.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// Attach `details`.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound for `qualified "name"`.
    pub fn not_found(qualified: &str, name: &str) -> Self {
        let (kind, group) = qualified.split_once('.').unwrap_or((qualified, ""));
        Self::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
            .with_details(json!({"name": name, "group": group, "kind": kind}))
    }

    /// 409 AlreadyExists.
    pub fn already_exists(qualified: &str, name: &str) -> Self {
        let (kind, group) = qualified.split_once('.').unwrap_or((qualified, ""));
        Self::new(
            409,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
        .with_details(json!({"name": name, "group": group, "kind": kind}))
    }

    /// 409 Conflict for a stale resourceVersion.
    pub fn conflict(qualified: &str, name: &str) -> Self {
        let (kind, group) = qualified.split_once('.').unwrap_or((qualified, ""));
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": kind}))
    }

    /// 422 Invalid.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 415 UnsupportedMediaType for an object body.
    pub fn unsupported_media(ct: &str) -> Self {
        Self::unsupported_media_of(&["application/json", "application/yaml"], ct)
    }

    /// 415 UnsupportedMediaType, listing the `accepted` media types.
    pub fn unsupported_media_of(accepted: &[&str], ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {} (got {ct})",
                accepted.join(", ")
            ),
        )
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // `reason` is omitted when empty, as kube-apiserver does (a webhook's error has none).
        if self.reason.is_empty()
            && let Some(o) = status.as_object_mut()
        {
            o.remove("reason");
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        (
            code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}
