//! Admission checks of `ResourceInterpreterWebhookConfiguration` (config.karmada.io/v1alpha1),
//! as Karmada's validating webhook (`pkg/webhook/configuration`): webhook names are fully
//! qualified domain names and unique; each rule names operations (or `*` alone), API groups,
//! versions and kinds (each non-empty, `*` alone); `timeoutSeconds` is 1..=30; the client config
//! is exactly one of an `https` URL (no user info, query or fragment) and a service reference;
//! `interpreterContextVersions` includes `v1alpha1`.

use flotilla_api::interpreter::{
    INTERPRETER_CONTEXT_VERSION, ResourceInterpreterWebhook,
    ResourceInterpreterWebhookConfiguration, RuleWithOperations, ServiceReference,
};

use crate::interpreter::Operation;
use crate::validate::FieldError;

fn err(field: String, message: impl Into<String>) -> FieldError {
    FieldError {
        field,
        message: message.into(),
    }
}

/// Every problem of `config`, each naming its field (`webhooks[0].rules[1].kinds`).
pub fn validate(config: &ResourceInterpreterWebhookConfiguration) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, hook) in config.webhooks.iter().enumerate() {
        let at = format!("webhooks[{i}]");
        validate_webhook(hook, &at, &mut out);
        if !names.insert(hook.name.as_str()) {
            out.push(err(
                format!("{at}.name"),
                format!("Duplicate value: {:?}", hook.name),
            ));
        }
    }
    out
}

/// A DNS-1123 label: lowercase alphanumerics and '-', starting and ending alphanumeric, ≤ 63.
fn dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1035 label: a DNS-1123 label starting with a letter.
fn dns1035_label(s: &str) -> bool {
    dns1123_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// apimachinery's `IsFullyQualifiedDomainName`: at least two labels, ≤ 253 characters.
fn fully_qualified(name: &str) -> Result<(), String> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err("Required value".into());
    }
    if name.len() > 253 {
        return Err(format!(
            "Invalid value: {name:?}: must be no more than 253 characters"
        ));
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() < 2 {
        return Err(format!(
            "Invalid value: {name:?}: should be a domain with at least two segments separated by dots"
        ));
    }
    if !labels.iter().all(|l| dns1123_label(l)) {
        return Err(format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        ));
    }
    Ok(())
}

fn validate_webhook(hook: &ResourceInterpreterWebhook, at: &str, out: &mut Vec<FieldError>) {
    if let Err(m) = fully_qualified(&hook.name) {
        out.push(err(format!("{at}.name"), m));
    }
    for (j, rule) in hook.rules.iter().enumerate() {
        validate_rule(rule, &format!("{at}.rules[{j}]"), out);
    }
    if let Some(t) = hook.timeout_seconds
        && !(1..=30).contains(&t)
    {
        out.push(err(
            format!("{at}.timeoutSeconds"),
            format!("Invalid value: {t}: the timeout value must be between 1 and 30 seconds"),
        ));
    }
    let cc = &hook.client_config;
    let cc_at = format!("{at}.clientConfig");
    match (&cc.url, &cc.service) {
        (Some(url), None) => {
            if let Err(m) = validate_url(url) {
                out.push(err(format!("{cc_at}.url"), m));
            }
        }
        (None, Some(svc)) => validate_service(svc, &format!("{cc_at}.service"), out),
        _ => out.push(err(
            cc_at.clone(),
            "Required value: exactly one of url or service is required",
        )),
    }
    if let Some(b) = cc.ca_bundle.as_deref()
        && !is_base64(b)
    {
        out.push(err(
            format!("{cc_at}.caBundle"),
            "Invalid value: not base64",
        ));
    }
    validate_versions(
        &hook.interpreter_context_versions,
        &format!("{at}.interpreterContextVersions"),
        out,
    );
}

/// Kubernetes' `ValidateWebhookURL` with HTTPS forced.
fn validate_url(url: &str) -> Result<(), String> {
    let invalid = |m: &str| Err(format!("Invalid value: {url:?}: {m}"));
    let Some(rest) = url.strip_prefix("https://") else {
        return invalid("'https' is the only allowed URL scheme");
    };
    if url.contains('#') {
        return invalid("fragments are not permitted in the URL");
    }
    if url.contains('?') {
        return invalid("query parameters are not permitted in the URL");
    }
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return invalid("user information is not permitted in the URL");
    }
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if !h.ends_with(']') || authority.starts_with('[') => {
            if !port.is_empty() && port.parse::<u16>().is_err() {
                return invalid("invalid port");
            }
            h
        }
        _ => authority,
    };
    if host.is_empty() || host == "[]" {
        return invalid("host must be specified");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return invalid("must not contain whitespace");
    }
    Ok(())
}

/// Whether `s` is standard base64 (what a JSON `[]byte` holds).
fn is_base64(s: &str) -> bool {
    let s = s.trim();
    let body = s.trim_end_matches('=');
    s.len().is_multiple_of(4)
        && s.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// Kubernetes' `ValidateWebhookService` (the port defaults to 443).
fn validate_service(svc: &ServiceReference, at: &str, out: &mut Vec<FieldError>) {
    if svc.name.is_empty() {
        out.push(err(
            format!("{at}.name"),
            "Required value: service name is required",
        ));
    }
    if svc.namespace.is_empty() {
        out.push(err(
            format!("{at}.namespace"),
            "Required value: service namespace is required",
        ));
    }
    let port = svc.port.unwrap_or(443);
    if !(1..=65535).contains(&port) {
        out.push(err(
            format!("{at}.port"),
            format!(
                "Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"
            ),
        ));
    }
    if let Some(path) = svc.path.as_deref() {
        if !path.starts_with('/') {
            out.push(err(
                format!("{at}.path"),
                format!("Invalid value: {path:?}: must start with a '/'"),
            ));
        } else if path.contains("//") || path.split('/').any(|s| s == "." || s == "..") {
            out.push(err(
                format!("{at}.path"),
                format!("Invalid value: {path:?}: must not contain empty, '.' or '..' segments"),
            ));
        }
    }
}

/// `*` alone, or none of the items is `*`.
fn wildcard_alone(items: &[String]) -> bool {
    items.len() <= 1 || !items.iter().any(|i| i == "*")
}

fn validate_rule(rule: &RuleWithOperations, at: &str, out: &mut Vec<FieldError>) {
    if rule.operations.is_empty() {
        out.push(err(format!("{at}.operations"), "Required value"));
    }
    if !wildcard_alone(&rule.operations) {
        out.push(err(
            format!("{at}.operations"),
            "Invalid value: if '*' is present, must not specify other operations",
        ));
    }
    for (k, op) in rule.operations.iter().enumerate() {
        if op != "*" && Operation::ALL.iter().all(|o| o.as_str() != op) {
            let mut supported: Vec<&str> = Operation::ALL.iter().map(|o| o.as_str()).collect();
            supported.push("*");
            supported.sort_unstable();
            out.push(err(
                format!("{at}.operations[{k}]"),
                format!(
                    "Unsupported value: {op:?}: supported values: {}",
                    supported
                        .iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    for (field, items, what, non_empty) in [
        ("apiGroups", &rule.api_groups, "API groups", false),
        ("apiVersions", &rule.api_versions, "API versions", true),
        ("kinds", &rule.kinds, "kinds", true),
    ] {
        if items.is_empty() {
            out.push(err(format!("{at}.{field}"), "Required value"));
        }
        if !wildcard_alone(items) {
            out.push(err(
                format!("{at}.{field}"),
                format!("Invalid value: if '*' is present, must not specify other {what}"),
            ));
        }
        if non_empty {
            for (k, item) in items.iter().enumerate() {
                if item.is_empty() {
                    out.push(err(format!("{at}.{field}[{k}]"), "Required value"));
                }
            }
        }
    }
}

fn validate_versions(versions: &[String], at: &str, out: &mut Vec<FieldError>) {
    if versions.is_empty() {
        out.push(err(
            at.to_owned(),
            format!("Required value: must specify one of {INTERPRETER_CONTEXT_VERSION}"),
        ));
        return;
    }
    let mut seen = std::collections::BTreeSet::new();
    for (k, v) in versions.iter().enumerate() {
        if !seen.insert(v.as_str()) {
            out.push(err(
                format!("{at}[{k}]"),
                format!("Invalid value: {v:?}: duplicate version"),
            ));
            continue;
        }
        if !dns1035_label(v) {
            out.push(err(
                format!("{at}[{k}]"),
                format!("Invalid value: {v:?}: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character"),
            ));
        }
    }
    if !versions.iter().any(|v| v == INTERPRETER_CONTEXT_VERSION) {
        out.push(err(
            at.to_owned(),
            format!("Invalid value: {versions:?}: must include at least one of {INTERPRETER_CONTEXT_VERSION}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(hooks: serde_json::Value) -> ResourceInterpreterWebhookConfiguration {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "webhooks": hooks}))
            .expect("typed")
    }

    fn good() -> serde_json::Value {
        json!({
            "name": "workloads.example.com",
            "clientConfig": {"url": "https://hooks.example.com:8443/interpret", "caBundle": "AAAA"},
            "rules": [{"operations": ["InterpretReplica", "Retain"], "apiGroups": ["example.com"], "apiVersions": ["*"], "kinds": ["Workload"]}],
            "timeoutSeconds": 5,
            "interpreterContextVersions": ["v1alpha1"]
        })
    }

    fn fields(v: serde_json::Value) -> Vec<String> {
        validate(&config(json!([v])))
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn a_well_formed_configuration_passes() {
        assert!(fields(good()).is_empty());
        let mut svc = good();
        svc["clientConfig"] =
            json!({"service": {"namespace": "ns", "name": "hooks", "path": "/interpret"}});
        svc["rules"] = json!([{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "kinds": ["*"]}]);
        assert!(fields(svc).is_empty());
    }

    #[test]
    fn every_check_names_its_field() {
        let with = |pointer: &str, v: serde_json::Value| {
            let mut h = good();
            *h.pointer_mut(pointer).expect("field") = v;
            fields(h).join("\n")
        };
        assert!(with("/name", json!("nodots")).contains("webhooks[0].name: Invalid value"));
        assert!(
            with("/timeoutSeconds", json!(31))
                .contains("webhooks[0].timeoutSeconds: Invalid value: 31")
        );
        assert!(with("/timeoutSeconds", json!(0)).contains("between 1 and 30"));
        assert!(
            with("/clientConfig", json!({})).contains("webhooks[0].clientConfig: Required value")
        );
        assert!(
            with("/clientConfig/url", json!("http://x.example.com/"))
                .contains("'https' is the only allowed")
        );
        assert!(
            with("/clientConfig/url", json!("https://u@x.example.com/"))
                .contains("user information")
        );
        assert!(
            with("/clientConfig/url", json!("https://x.example.com/?a=1"))
                .contains("query parameters")
        );
        assert!(with("/clientConfig/caBundle", json!("%%")).contains("caBundle: Invalid value"));
        assert!(
            with(
                "/clientConfig",
                json!({"service": {"namespace": "", "name": "s", "path": "x"}})
            )
            .contains("clientConfig.service.namespace: Required value")
        );
        assert!(
            with(
                "/clientConfig",
                json!({"service": {"namespace": "n", "name": "s", "path": "x"}})
            )
            .contains("clientConfig.service.path: Invalid value")
        );
        assert!(
            with(
                "/clientConfig",
                json!({"service": {"namespace": "n", "name": "s", "port": 70000}})
            )
            .contains("clientConfig.service.port")
        );
        assert!(
            with("/rules/0/operations", json!([])).contains("rules[0].operations: Required value")
        );
        assert!(
            with("/rules/0/operations", json!(["*", "Retain"]))
                .contains("if '*' is present, must not specify other operations")
        );
        assert!(
            with("/rules/0/operations", json!(["Prune"]))
                .contains("rules[0].operations[0]: Unsupported value: \"Prune\"")
        );
        assert!(
            with("/rules/0/apiGroups", json!([])).contains("rules[0].apiGroups: Required value")
        );
        assert!(with("/rules/0/apiVersions", json!(["*", "v1"])).contains("other API versions"));
        assert!(with("/rules/0/kinds", json!([""])).contains("rules[0].kinds[0]: Required value"));
        assert!(
            with("/interpreterContextVersions", json!([]))
                .contains("interpreterContextVersions: Required value")
        );
        assert!(
            with("/interpreterContextVersions", json!(["v1beta1"]))
                .contains("must include at least one of v1alpha1")
        );
        assert!(
            with(
                "/interpreterContextVersions",
                json!(["v1alpha1", "v1alpha1"])
            )
            .contains("duplicate version")
        );
        let dup = validate(&config(json!([good(), good()])));
        assert_eq!(dup.len(), 1);
        assert_eq!(dup[0].field, "webhooks[1].name");
    }
}
