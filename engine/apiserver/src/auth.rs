//! Who the caller is and what it may do: `SelfSubjectReview` (`kubectl auth whoami`),
//! `SelfSubjectAccessReview` (`kubectl auth can-i`) and `SelfSubjectRulesReview`
//! (`kubectl auth can-i --list`).
//!
//! The server knows two identities: the holder of its bearer token, an administrator
//! ([`ADMIN_USER`] in `system:masters`), and, when anonymous access is on, `system:anonymous`.
//! Both may do everything (there is no RBAC), so every access review is allowed; a request
//! with a wrong token never gets here (401 before routing).

use axum::http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::registry::Resource;

/// The user the bearer token authenticates as.
pub const ADMIN_USER: &str = "flotilla-admin";

/// The caller's user name and groups, from the request headers (which already passed
/// authentication: a bearer token here is the server's).
fn user_info(headers: &HeaderMap) -> Value {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "));
    if bearer {
        json!({"username": ADMIN_USER, "groups": ["system:masters", "system:authenticated"]})
    } else {
        json!({"username": "system:anonymous", "groups": ["system:unauthenticated"]})
    }
}

/// Whether `res` is one of the review resources answered here rather than stored.
pub fn is_review(res: &Resource) -> bool {
    matches!(
        (res.group, res.kind),
        ("authentication.k8s.io", "SelfSubjectReview")
            | (
                "authorization.k8s.io",
                "SelfSubjectAccessReview" | "SelfSubjectRulesReview"
            )
    )
}

/// Answer a request to a review resource (`POST` only, like kube-apiserver: 201 with the
/// review and its status).
pub fn review(
    res: &Resource,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(StatusCode, Value), ApiError> {
    if *method != Method::POST {
        return Err(ApiError::method_not_allowed());
    }
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/vnd.kubernetes.protobuf"));
    let sent: Value = if protobuf {
        json!({"spec": protobuf_spec(body)})
    } else {
        serde_json::from_slice(body).unwrap_or(json!({}))
    };
    let spec = sent.get("spec").cloned().unwrap_or(json!({}));
    let api_version = res.api_version();
    let mut out = json!({
        "kind": res.kind,
        "apiVersion": api_version,
        "metadata": {"creationTimestamp": null},
    });
    match res.kind {
        "SelfSubjectReview" => {
            out["status"] = json!({"userInfo": user_info(headers)});
        }
        "SelfSubjectAccessReview" => {
            let resource = spec.get("resourceAttributes").is_some_and(|v| !v.is_null());
            let non_resource = spec
                .get("nonResourceAttributes")
                .is_some_and(|v| !v.is_null());
            if resource == non_resource {
                let detail =
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified";
                let field = "spec.resourceAttributes";
                return Err(ApiError::invalid(format!(
                    "{}.{} \"\" is invalid: {field}: Invalid value: \"null\": {detail}",
                    res.kind, res.group
                ))
                .with_details(json!({"group": res.group, "kind": res.kind,
                    "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}]})));
            }
            out["spec"] = spec;
            out["status"] = json!({"allowed": true, "reason": "flotilla grants its authenticated users every permission"});
        }
        _ => {
            out["spec"] = spec;
            out["status"] = json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            });
        }
    }
    Ok((StatusCode::CREATED, out))
}

/// The length-delimited fields of one protobuf message, by field number; other wire types are
/// skipped. `None` when the bytes are not a well-formed message.
fn pb_fields(mut buf: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    fn varint(buf: &mut &[u8]) -> Option<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = buf.split_first()?;
            *buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(out);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        match key & 7 {
            0 => {
                varint(&mut buf)?;
            }
            1 => buf = buf.get(8..)?,
            5 => buf = buf.get(4..)?,
            2 => {
                let len = usize::try_from(varint(&mut buf)?).ok()?;
                let (field, rest) = (buf.get(..len)?, buf.get(len..)?);
                out.push((key >> 3, field));
                buf = rest;
            }
            _ => return None,
        }
    }
    Some(out)
}

/// The `spec` of a protobuf `SelfSubjectAccessReview` (client-go's typed clients send
/// protobuf): `k8s\0`, a `runtime.Unknown` whose `raw` is the review. Fields it cannot read
/// are left out, which the attribute check then refuses.
fn protobuf_spec(body: &[u8]) -> Value {
    let field = |msg: &[u8], n: u64| -> Option<Vec<u8>> {
        pb_fields(msg)?
            .into_iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.to_vec())
    };
    let strings = |msg: &[u8], names: &[&str]| -> Value {
        let mut out = serde_json::Map::new();
        for (n, v) in pb_fields(msg).unwrap_or_default() {
            let name = usize::try_from(n)
                .ok()
                .and_then(|i| names.get(i.wrapping_sub(1)));
            if let (Some(name), Ok(text)) = (name, std::str::from_utf8(v)) {
                out.insert((*name).to_owned(), json!(text));
            }
        }
        Value::Object(out)
    };
    let Some(unknown) = body.strip_prefix(b"k8s\0") else {
        return json!({});
    };
    let Some(spec) = field(unknown, 2).and_then(|raw| field(&raw, 2)) else {
        return json!({});
    };
    let mut out = json!({});
    if let Some(ra) = field(&spec, 1) {
        let names = [
            "namespace",
            "verb",
            "group",
            "version",
            "resource",
            "subresource",
            "name",
        ];
        out["resourceAttributes"] = strings(&ra, &names);
    }
    if let Some(nra) = field(&spec, 2) {
        out["nonResourceAttributes"] = strings(&nra, &["path", "verb"]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn post(group: &str, version: &str, plural: &str, token: bool, body: Value) -> Value {
        let res = registry::lookup(group, version, plural).expect("served");
        assert!(is_review(res));
        let mut headers = HeaderMap::new();
        if token {
            headers.insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        }
        let (code, out) =
            review(res, &Method::POST, &headers, body.to_string().as_bytes()).expect("answered");
        assert_eq!(code, StatusCode::CREATED);
        out
    }

    #[test]
    fn whoami_names_the_token_holder_or_anonymous() {
        for version in ["v1", "v1beta1"] {
            let out = post(
                "authentication.k8s.io",
                version,
                "selfsubjectreviews",
                true,
                json!({}),
            );
            assert_eq!(
                out["apiVersion"],
                format!("authentication.k8s.io/{version}")
            );
            assert_eq!(out["status"]["userInfo"]["username"], ADMIN_USER);
            assert_eq!(
                out["status"]["userInfo"]["groups"],
                json!(["system:masters", "system:authenticated"])
            );
        }
        let anon = post(
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            false,
            json!({}),
        );
        assert_eq!(anon["status"]["userInfo"]["username"], "system:anonymous");
    }

    #[test]
    fn protobuf_access_reviews_are_read() {
        fn field(n: u8, payload: &[u8]) -> Vec<u8> {
            let mut out = vec![(n << 3) | 2, u8::try_from(payload.len()).unwrap()];
            out.extend_from_slice(payload);
            out
        }
        // ResourceAttributes{verb=2: "create", group=3: "apps", resource=5: "deployments"}
        let mut ra = field(2, b"create");
        ra.extend(field(3, b"apps"));
        ra.extend(field(5, b"deployments"));
        let spec = field(1, &ra);
        let review = field(2, &spec);
        // runtime.Unknown{typeMeta=1, raw=2}
        let mut unknown = field(1, &field(2, b"SelfSubjectAccessReview"));
        unknown.extend(field(2, &review));
        let mut body = b"k8s\0".to_vec();
        body.extend(unknown);
        assert_eq!(
            protobuf_spec(&body),
            json!({"resourceAttributes": {"verb": "create", "group": "apps", "resource": "deployments"}})
        );
        assert_eq!(protobuf_spec(b"k8s\0\xff"), json!({}));
        assert_eq!(protobuf_spec(b"{}"), json!({}));
    }

    #[test]
    fn access_reviews_echo_the_spec_and_need_exactly_one_attribute_set() {
        let spec = json!({"resourceAttributes": {"verb": "create", "resource": "deployments", "group": "apps"}});
        let out = post(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            true,
            json!({"spec": spec}),
        );
        assert_eq!(out["spec"], spec);
        assert_eq!(out["status"]["allowed"], true);
        let res =
            registry::lookup("authorization.k8s.io", "v1", "selfsubjectaccessreviews").unwrap();
        let err = review(res, &Method::POST, &HeaderMap::new(), b"{\"spec\":{}}").unwrap_err();
        assert_eq!(err.code, 422);
        let err = review(res, &Method::GET, &HeaderMap::new(), b"").unwrap_err();
        assert_eq!(err.code, 405);
    }
}
