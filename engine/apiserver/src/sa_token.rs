//! ServiceAccount tokens: the `serviceaccounts/token` subresource (TokenRequest, what
//! `kubectl create token` calls) and the authentication of the tokens it issues.
//!
//! Tokens are JWTs with kube-apiserver's claims (`iss`, `sub`
//! `system:serviceaccount:<ns>:<name>`, `aud`, `exp`, `iat`, `nbf`, `jti`, and `kubernetes.io`
//! with the namespace and the ServiceAccount's name and uid). Unlike kube-apiserver's RS256 they
//! are signed HS256 with a key only this server holds (`pki/sa.key`): nobody else verifies them
//! (there is no OIDC discovery). A token stops authenticating when it expires, and when its
//! ServiceAccount is deleted or replaced by another of the same name (the uid is checked on every
//! request), as kube-apiserver's bound tokens do.
//!
//! The caller authenticates as `system:serviceaccount:<ns>:<name>` in the groups
//! `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`; RBAC
//! decides what it may do.

use std::path::Path;

use base64::Engine as _;
use ring::hmac;
use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::error::ApiError;

/// The issuer and default audience (kube-apiserver's default `--service-account-issuer`).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Default lifetime of a requested token (kube-apiserver's).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// Shortest lifetime a TokenRequest may ask for (kube-apiserver's).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Longest lifetime a TokenRequest may ask for (kube-apiserver's `2^32` seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// Longest token accepted for verification (a JWT we issue is well under 1 KiB).
const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// At most this many audiences per TokenRequest.
const MAX_AUDIENCES: usize = 32;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The server's signing key for ServiceAccount tokens.
pub struct SigningKey {
    key: hmac::Key,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

impl SigningKey {
    /// A key from raw bytes (at least 32).
    ///
    /// # Errors
    /// Shorter keys.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 32 {
            return Err("a ServiceAccount signing key needs at least 32 bytes".into());
        }
        Ok(SigningKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
        })
    }

    /// Load `sa.key` from `dir` (base64), generating a random one (owner-only) when missing.
    ///
    /// # Errors
    /// I/O errors, or a key file that does not decode.
    pub fn load_or_create(dir: &Path) -> Result<Self, String> {
        let path = dir.join("sa.key");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|_| format!("{}: not a base64 key", path.display()))?;
                Self::from_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
                    .map_err(|_| "no system randomness for the ServiceAccount key".to_owned())?;
                let text = base64::engine::general_purpose::STANDARD.encode(bytes);
                let tmp = path.with_extension("tmp");
                crate::fs::write_private(&tmp, text.as_bytes())
                    .and_then(|()| std::fs::rename(&tmp, &path))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Self::from_bytes(&bytes)
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let header = B64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = B64.encode(claims.to_string());
        let signing_input = format!("{header}.{payload}");
        let tag = hmac::sign(&self.key, signing_input.as_bytes());
        format!("{signing_input}.{}", B64.encode(tag.as_ref()))
    }

    /// The claims of `token` when it is one of ours, correctly signed and within its lifetime at
    /// `now` (seconds since the epoch) for the API audience; `None` otherwise (the caller answers
    /// 401 without saying why, as kube-apiserver does).
    fn verify(&self, token: &str, now: i64) -> Option<Claims> {
        if token.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let mut parts = token.split('.');
        let (header, payload, signature) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let signature = B64.decode(signature).ok()?;
        let signed = &token[..header.len() + 1 + payload.len()];
        hmac::verify(&self.key, signed.as_bytes(), &signature).ok()?;
        let header: Value = serde_json::from_slice(&B64.decode(header).ok()?).ok()?;
        if header.get("alg").and_then(Value::as_str) != Some("HS256") {
            return None;
        }
        let claims: Value = serde_json::from_slice(&B64.decode(payload).ok()?).ok()?;
        let int = |k: &str| claims.get(k).and_then(Value::as_i64);
        let audience_ok = claims
            .get("aud")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(ISSUER)));
        if claims.get("iss").and_then(Value::as_str) != Some(ISSUER)
            || !audience_ok
            || int("exp")? <= now
            || int("nbf").unwrap_or(0) > now + 60
        {
            return None;
        }
        let k8s = claims.get("kubernetes.io")?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        Some(Claims {
            namespace: text(k8s.get("namespace"))?,
            name: text(k8s.pointer("/serviceaccount/name"))?,
            uid: text(k8s.pointer("/serviceaccount/uid"))?,
        })
    }
}

/// What a verified token says about its ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid when the token was issued.
    pub uid: String,
}

/// Whether `token` has a JWT's shape (three dot-separated parts), so a static or generated
/// token is never mistaken for one.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

/// The user a verified token authenticates as, when its ServiceAccount still exists with the
/// uid the token names (`service_account` looks it up: namespace, name → the stored object).
pub fn authenticate(
    key: &SigningKey,
    token: &str,
    now: i64,
    service_account: impl FnOnce(&str, &str) -> Option<Value>,
) -> Option<UserInfo> {
    let claims = key.verify(token, now)?;
    let stored = service_account(&claims.namespace, &claims.name)?;
    if stored.pointer("/metadata/uid").and_then(Value::as_str) != Some(claims.uid.as_str()) {
        return None;
    }
    Some(UserInfo {
        name: format!("system:serviceaccount:{}:{}", claims.namespace, claims.name),
        uid: claims.uid,
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", claims.namespace),
            "system:authenticated".into(),
        ],
    })
}

/// Answer a TokenRequest for `service_account` (the stored object) issued at `now`: the
/// TokenRequest with `status.token` and `status.expirationTimestamp`.
///
/// # Errors
/// 400 (kube-apiserver's messages) for a body that is not a TokenRequest, a lifetime out of
/// range, too many audiences, or a `boundObjectRef` (not supported here: tokens are bound to
/// their ServiceAccount only).
pub fn issue(
    key: &SigningKey,
    request: &Value,
    service_account: &Value,
    now: i64,
) -> Result<Value, ApiError> {
    let bad = |m: &str| ApiError::bad_request(m.to_owned());
    let kind = request.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = request
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !kind.is_empty() && (kind != "TokenRequest" || api_version != "authentication.k8s.io/v1") {
        return Err(bad(
            "the body of a token request must be an authentication.k8s.io/v1 TokenRequest",
        ));
    }
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    if spec.get("boundObjectRef").is_some_and(|v| !v.is_null()) {
        return Err(bad(
            "spec.boundObjectRef: Unsupported value: tokens here are bound to their ServiceAccount only",
        ));
    }
    let expiration = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| bad("spec.expirationSeconds: Invalid value: must be an integer"))?,
    };
    if expiration < MIN_EXPIRATION_SECONDS {
        return Err(bad(
            "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        return Err(bad(
            "spec.expirationSeconds: Invalid value: may not specify a duration larger than 2^32 seconds",
        ));
    }
    let audiences: Vec<String> = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("spec.audiences: Invalid value: must be strings"))?,
        _ => vec![ISSUER.to_owned()],
    };
    if audiences.len() > MAX_AUDIENCES {
        return Err(bad("spec.audiences: Too many: at most 32 audiences"));
    }
    let meta = |p: &str| {
        service_account
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (namespace, name, uid) = (
        meta("/metadata/namespace"),
        meta("/metadata/name"),
        meta("/metadata/uid"),
    );
    let exp = now.saturating_add(expiration);
    let token = key.sign(&json!({
        "aud": audiences,
        "exp": exp,
        "iat": now,
        "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        "nbf": now,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
    }));
    let stamp = |secs: i64| crate::time::format_rfc3339(u64::try_from(secs).unwrap_or(0));
    Ok(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(now)},
        "spec": {"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": null},
        "status": {"token": token, "expirationTimestamp": stamp(exp)},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32]).unwrap()
    }

    fn sa(uid: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "agent", "namespace": "karmada-cluster", "uid": uid}})
    }

    fn token(req: Value, now: i64) -> String {
        let out = issue(&key(), &req, &sa("u1"), now).unwrap();
        out["status"]["token"].as_str().unwrap().to_owned()
    }

    #[test]
    fn issued_tokens_authenticate_as_the_service_account_until_they_expire() {
        let t = token(json!({"spec": {"expirationSeconds": 600}}), 1_000);
        assert!(looks_like_jwt(&t));
        let user = authenticate(&key(), &t, 1_100, |ns, n| {
            assert_eq!((ns, n), ("karmada-cluster", "agent"));
            Some(sa("u1"))
        })
        .unwrap();
        assert_eq!(user.name, "system:serviceaccount:karmada-cluster:agent");
        assert_eq!(user.uid, "u1");
        assert!(
            user.groups
                .contains(&"system:serviceaccounts:karmada-cluster".to_owned())
        );
        // Expired, replaced ServiceAccount, deleted ServiceAccount.
        assert!(authenticate(&key(), &t, 1_600, |_, _| Some(sa("u1"))).is_none());
        assert!(authenticate(&key(), &t, 1_100, |_, _| Some(sa("u2"))).is_none());
        assert!(authenticate(&key(), &t, 1_100, |_, _| None).is_none());
        // Another key, a flipped byte, other audiences only.
        let other = SigningKey::from_bytes(&[8u8; 32]).unwrap();
        assert!(authenticate(&other, &t, 1_100, |_, _| Some(sa("u1"))).is_none());
        let mut bytes = t.clone().into_bytes();
        let mid = bytes.len() / 2;
        bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert!(authenticate(&key(), &tampered, 1_100, |_, _| Some(sa("u1"))).is_none());
        let vault = token(json!({"spec": {"audiences": ["vault"]}}), 1_000);
        assert!(authenticate(&key(), &vault, 1_100, |_, _| Some(sa("u1"))).is_none());
    }

    #[test]
    fn token_requests_are_checked_like_kube_apiserver_checks_them() {
        let out = issue(&key(), &json!({}), &sa("u1"), 0).unwrap();
        assert_eq!(out["spec"]["expirationSeconds"], 3600);
        assert_eq!(out["status"]["expirationTimestamp"], "1970-01-01T01:00:00Z");
        assert_eq!(out["spec"]["audiences"], json!([ISSUER]));
        for (spec, msg) in [
            (json!({"expirationSeconds": 599}), "less than 10 minutes"),
            (
                json!({"expirationSeconds": (1i64 << 32) + 1}),
                "larger than 2^32",
            ),
            (
                json!({"boundObjectRef": {"kind": "Pod", "name": "p"}}),
                "boundObjectRef",
            ),
            (json!({"audiences": [1]}), "spec.audiences"),
        ] {
            let e = issue(&key(), &json!({"spec": spec}), &sa("u1"), 0).unwrap_err();
            assert_eq!(e.code, 400);
            assert!(e.message.contains(msg), "{}", e.message);
        }
        let e = issue(
            &key(),
            &json!({"apiVersion": "v1", "kind": "Secret"}),
            &sa("u1"),
            0,
        )
        .unwrap_err();
        assert_eq!(e.code, 400);
    }

    #[test]
    fn garbage_never_verifies_and_never_panics() {
        let k = key();
        for t in [
            "",
            ".",
            "..",
            "a.b.c",
            "a.b.c.d",
            &"x".repeat(20_000),
            "e30.e30.",
            "e30.e30.AAAA",
        ] {
            assert!(k.verify(t, 0).is_none(), "{t}");
        }
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2_000 {
            let len = rng.usize(0..200);
            let s: String = (0..len)
                .map(|_| *rng.choice(b"ab.c-_=+/eyJ0".iter()).unwrap() as char)
                .collect();
            assert!(k.verify(&s, 0).is_none());
        }
    }
}
