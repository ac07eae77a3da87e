//! Who the caller is and what it may do: authentication (the generated admin token and the
//! static token file, [`TokenFile`]), `SelfSubjectReview` (`kubectl auth whoami`),
//! `SelfSubjectAccessReview` (`kubectl auth can-i`) and `SelfSubjectRulesReview`
//! (`kubectl auth can-i --list`), answered by the RBAC [`Authorizer`].
//!
//! The identities: the holder of the generated token, an administrator ([`ADMIN_USER`] in
//! `system:masters`); the users of a token file (kube-apiserver's `--token-auth-file`); and, when
//! anonymous access is on, `system:anonymous`. A request with a wrong token never gets here
//! (401 before routing).

use std::fmt;
use std::path::Path;

use axum::http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Value, json};

use crate::authz::{self, Authorizer, RequestInfo};
use crate::error::ApiError;
use crate::registry::Resource;

/// The user the generated bearer token authenticates as.
pub const ADMIN_USER: &str = "flotilla-admin";
/// The user of requests without credentials (anonymous access only).
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// User id (may be empty).
    pub uid: String,
    /// Groups, `system:authenticated` included for authenticated users.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The holder of the generated token.
    pub fn admin() -> Self {
        UserInfo {
            name: ADMIN_USER.to_owned(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    /// A request without credentials.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS_USER.to_owned(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    fn to_json(&self) -> Value {
        let mut out = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            out["uid"] = json!(self.uid);
        }
        out
    }
}

/// The users of a static token file, each with its token.
#[derive(Clone, Default)]
pub struct TokenFile {
    entries: Vec<(String, UserInfo)>,
}

impl fmt::Debug for TokenFile {
    // Never the tokens.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenFile")
            .field(
                "users",
                &self
                    .entries
                    .iter()
                    .map(|(_, u)| &u.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl TokenFile {
    /// Read kube-apiserver's static token file: one user per line,
    /// `token,user,uid[,"group1,group2"]` (CSV; blank lines skipped). Every user also gets the
    /// group `system:authenticated`.
    ///
    /// Stricter than kube-apiserver, which skips or warns: an empty token or user name, a
    /// duplicate token, fewer than 3 or more than 4 columns, a token with whitespace or control
    /// characters, and malformed quoting are errors. Errors name the file and line, never a
    /// token.
    ///
    /// # Errors
    /// The file cannot be read or is not valid.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading token file {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|(line, why)| format!("{}:{line}: {why}", path.display()))
    }

    /// [`TokenFile::load`] of a file's text; errors carry the 1-based line.
    ///
    /// # Errors
    /// The text is not a valid token file.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut entries: Vec<(String, UserInfo)> = Vec::new();
        let mut lines_of: Vec<usize> = Vec::new();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() {
                continue;
            }
            let fields = csv_fields(line).map_err(|e| (n, e.to_owned()))?;
            if fields.len() < 3 {
                return Err((
                    n,
                    format!(
                        "need at least 3 columns (token, user name, user uid), found {}",
                        fields.len()
                    ),
                ));
            }
            if fields.len() > 4 {
                return Err((
                    n,
                    format!(
                        "need at most 4 columns (token, user name, user uid, groups), found {}; quote the groups (\"g1,g2\")",
                        fields.len()
                    ),
                ));
            }
            let token = fields[0].clone();
            if token.is_empty() {
                return Err((n, "the token is empty".into()));
            }
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err((
                    n,
                    "the token has whitespace, control or non-ASCII characters".into(),
                ));
            }
            let name = fields[1].trim().to_owned();
            if name.is_empty() {
                return Err((n, "the user name is empty".into()));
            }
            if let Some(j) = entries
                .iter()
                .position(|(t, _)| crate::server::constant_time_eq(t.as_bytes(), token.as_bytes()))
            {
                return Err((n, format!("the token of line {} again", lines_of[j])));
            }
            let mut groups: Vec<String> = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            entries.push((
                token,
                UserInfo {
                    name,
                    uid: fields[2].trim().to_owned(),
                    groups,
                },
            ));
            lines_of.push(n);
        }
        Ok(TokenFile { entries })
    }

    /// How many users the file names.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file names no user.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The user whose token is `presented`. Every token is compared, in constant time each.
    pub fn authenticate(&self, presented: &str) -> Option<&UserInfo> {
        let mut found = None;
        for (token, user) in &self.entries {
            if crate::server::constant_time_eq(token.as_bytes(), presented.as_bytes()) {
                found = Some(user);
            }
        }
        found
    }
}

/// The fields of one CSV record (Go's `encoding/csv` with `TrimLeadingSpace`): comma-separated,
/// a field may be quoted with `"` and a quote inside doubled.
fn csv_fields(line: &str) -> Result<Vec<String>, &'static str> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("a quoted field is not closed"),
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    out.push(field);
                    return Ok(out);
                }
                Some(',') => out.push(field),
                Some(_) => return Err("unexpected text after a quoted field"),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        out.push(field);
                        return Ok(out);
                    }
                    Some(',') => {
                        out.push(field);
                        break;
                    }
                    Some('"') => return Err("a quote inside an unquoted field"),
                    Some(c) => field.push(c),
                }
            }
        }
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

/// Answer a request of `user` to a review resource (`POST` only, like kube-apiserver: 201 with
/// the review and its status), access and rules reviews from `authorizer`.
pub fn review(
    res: &Resource,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
    user: &UserInfo,
    authorizer: &Authorizer<'_>,
) -> Result<(StatusCode, Value), ApiError> {
    if *method != Method::POST {
        return Err(ApiError::method_not_allowed());
    }
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/vnd.kubernetes.protobuf"));
    let sent: Value = if protobuf {
        json!({"spec": protobuf_spec(res.kind, body)})
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
            out["status"] = json!({"userInfo": user.to_json()});
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
            let attributes = RequestInfo::from_review(&spec).unwrap_or_default();
            let decision = authorizer.authorize(user, &attributes)?;
            out["spec"] = spec;
            out["status"] = json!({"allowed": decision.allowed});
            if !decision.reason.is_empty() {
                out["status"]["reason"] = json!(decision.reason);
            }
        }
        _ => {
            let namespace = spec["namespace"].as_str().unwrap_or("").to_owned();
            out["spec"] = spec;
            out["status"] = authz::rules_status(&authorizer.rules(user, &namespace)?);
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

/// The `spec` of a protobuf `SelfSubjectAccessReview` or `SelfSubjectRulesReview` (`kind`;
/// client-go's typed clients send protobuf): `k8s\0`, a `runtime.Unknown` whose `raw` is the
/// review. Fields it cannot read are left out, which the attribute check then refuses.
fn protobuf_spec(kind: &str, body: &[u8]) -> Value {
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
    if kind == "SelfSubjectRulesReview" {
        // SelfSubjectRulesReviewSpec{namespace=1}
        if let Some(ns) = field(&spec, 1).and_then(|ns| String::from_utf8(ns).ok()) {
            out["namespace"] = json!(ns);
        }
        return out;
    }
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
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let user = if token {
            UserInfo::admin()
        } else {
            UserInfo::anonymous()
        };
        let (code, out) = review(
            res,
            &Method::POST,
            &HeaderMap::new(),
            body.to_string().as_bytes(),
            &user,
            &Authorizer::new(&store, true),
        )
        .expect("answered");
        assert_eq!(code, StatusCode::CREATED);
        out
    }

    #[test]
    fn whoami_names_the_caller() {
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
    fn token_files_are_read_as_kube_apiserver_reads_them_but_strictly() {
        let file = TokenFile::parse(
            "\u{feff}t1,alice,1001,\"team-a, qa\"\r\n\n  t2, bob ,,\nt3,\"carol \"\"c\"\"\",3\n",
        )
        .unwrap();
        assert_eq!(file.len(), 3);
        let alice = file.authenticate("t1").unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "1001");
        assert_eq!(alice.groups, ["team-a", "qa", "system:authenticated"]);
        let bob = file.authenticate("t2").unwrap();
        assert_eq!((bob.name.as_str(), bob.uid.as_str()), ("bob", ""));
        assert_eq!(bob.groups, ["system:authenticated"]);
        assert_eq!(file.authenticate("t3").unwrap().name, "carol \"c\"");
        assert!(file.authenticate("t").is_none());
        assert!(file.authenticate("t10").is_none());
        assert!(!format!("{file:?}").contains("t1"));

        for (text, line, why) in [
            ("t1,alice\n", 1, "at least 3 columns"),
            ("t1,alice,1,g,extra\n", 1, "at most 4 columns"),
            ("\n,alice,1\n", 2, "token is empty"),
            ("t1,,1\n", 1, "user name is empty"),
            ("t1,a,1\nt2,b,2\nt1,c,3\n", 3, "the token of line 1 again"),
            ("t 1,a,1\n", 1, "whitespace"),
            ("t1,a,1,\"g\n", 1, "not closed"),
            ("t1,a,1,\"g\"x\n", 1, "after a quoted field"),
            ("t1,a\"b,1\n", 1, "quote inside"),
        ] {
            let (n, msg) = TokenFile::parse(text).unwrap_err();
            assert_eq!(n, line, "{text:?}");
            assert!(msg.contains(why), "{text:?}: {msg}");
            assert!(!msg.contains("t1"), "a token in the error: {msg}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.csv");
        std::fs::write(&path, "secret-token,alice\n").unwrap();
        let err = TokenFile::load(&path).unwrap_err();
        assert!(
            err.contains("tokens.csv:1: need at least 3 columns"),
            "{err}"
        );
        assert!(!err.contains("secret-token"), "{err}");
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
            protobuf_spec("SelfSubjectAccessReview", &body),
            json!({"resourceAttributes": {"verb": "create", "group": "apps", "resource": "deployments"}})
        );
        assert_eq!(
            protobuf_spec("SelfSubjectAccessReview", b"k8s\0\xff"),
            json!({})
        );
        assert_eq!(protobuf_spec("SelfSubjectAccessReview", b"{}"), json!({}));
        // SelfSubjectRulesReview{spec=2: {namespace=1: "team-a"}}
        let review = field(2, &field(1, b"team-a"));
        let mut unknown = field(1, &field(2, b"SelfSubjectRulesReview"));
        unknown.extend(field(2, &review));
        let mut body = b"k8s\0".to_vec();
        body.extend(unknown);
        assert_eq!(
            protobuf_spec("SelfSubjectRulesReview", &body),
            json!({"namespace": "team-a"})
        );
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
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let authorizer = Authorizer::new(&store, false);
        let user = UserInfo::admin();
        let headers = HeaderMap::new();
        let err = review(
            res,
            &Method::POST,
            &headers,
            b"{\"spec\":{}}",
            &user,
            &authorizer,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        let err = review(res, &Method::GET, &headers, b"", &user, &authorizer).unwrap_err();
        assert_eq!(err.code, 405);
    }
}
