//! The request pipeline: path parsing, CRUD, patch, apply, delete and watch over the store.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::admission::{Admission, Operation};
use crate::apply::{self, ApplyRequest};
use crate::auth::{self, UserInfo};
use crate::authz::{self, Authorizer, RequestInfo};
use crate::decode::{self, FieldValidation};
use crate::defaults;
use crate::discovery;
use crate::error::ApiError;
use crate::events;
use crate::limits::{self, MAX_BODY};
use crate::openapi;
use crate::protobuf;
use crate::proxy;
use crate::registry::{self, Resource};
use crate::scale;
use crate::selector::{FieldSelector, LabelSelector};
use crate::smp;
use crate::store::{EventKind, Op, Precondition, Store, StoreError, WatchEnd};
use crate::table;
use crate::time::now_rfc3339;

#[path = "gc.rs"]
mod gc;

/// The root logical cluster's key segment.
pub(crate) const ROOT_CLUSTER: &str = "@";
/// Namespaces every logical cluster starts with.
const BOOTSTRAP_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];
/// The media types of object bodies (create, update, delete options). Anything else — the
/// `text/plain` and form encodings a browser may send cross-origin without asking — is 415.
const BODY_MEDIA_TYPES: &[&str] = &["application/json", "application/yaml"];
/// The media types of patches; strategic merge patch (last) only for built-in kinds.
const PATCH_MEDIA_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+json",
    "application/strategic-merge-patch+json",
];
/// Retries of a read-modify-write that lost a race with another writer.
const MAX_RETRIES: usize = 16;

/// Tunables of the API layer.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Bearer token required on every request (`None`: no token configured).
    pub token: Option<String>,
    /// Accept requests without a token.
    pub anonymous: bool,
    /// More users, each with its token (kube-apiserver's `--token-auth-file`); RBAC decides
    /// what they may do ([`crate::authz`]).
    pub token_file: auth::TokenFile,
    /// The CAs of client certificates (kube-apiserver's `--client-ca-file`): a certificate they
    /// sign authenticates its subject's CN, with its O values as groups ([`crate::tls::ClientCa`]).
    pub client_ca: Option<Arc<crate::tls::ClientCa>>,
    /// Signs and verifies ServiceAccount tokens ([`crate::sa_token`]); `None`: TokenRequest is
    /// not served and no ServiceAccount token authenticates.
    pub service_account_key: Option<Arc<crate::sa_token::SigningKey>>,
    /// How often watches with `allowWatchBookmarks=true` get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// Defaults and validation run before objects are stored ([`crate::admission`]); none by default.
    pub admission: Option<Arc<dyn Admission>>,
    /// How long a watch waits for its client to make room in a full queue
    /// ([`WATCH_BUFFER_EVENTS`], [`WATCH_BUFFER_BYTES`]) before it closes the watch.
    pub watch_stall_timeout: Duration,
}

/// The default [`ServerOptions::watch_stall_timeout`].
pub const WATCH_STALL_TIMEOUT: Duration = Duration::from_secs(5);

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            token: None,
            anonymous: true,
            token_file: auth::TokenFile::default(),
            client_ca: None,
            service_account_key: None,
            bookmark_interval: Duration::from_secs(30),
            admission: None,
            watch_stall_timeout: WATCH_STALL_TIMEOUT,
        }
    }
}

/// The API server state: the store plus per-logical-cluster bookkeeping.
#[derive(Debug)]
pub struct ApiServer {
    store: Store,
    options: ServerOptions,
    ready_clusters: Mutex<HashSet<String>>,
    watch_counters: Arc<WatchCounters>,
}

/// Where a request is going.
#[derive(Debug)]
struct Target {
    cluster: String,
    res: &'static Resource,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
    /// The caller, when RBAC restricts it (`None`: the admin, anonymous mode, or the server
    /// itself): its writes of RBAC objects are checked for escalation.
    restricted: Option<UserInfo>,
}

/// What admission reads of the stored objects: those of one logical cluster, listed on demand.
struct StoredObjects<'a> {
    store: &'a Store,
    cluster: &'a str,
}

impl crate::admission::Existing for StoredObjects<'_> {
    fn list(&self, resource: &Resource) -> Result<Vec<Arc<Value>>, String> {
        let prefix = format!(
            "/{}/{}/{}/",
            self.cluster,
            resource.group_key(),
            resource.plural
        );
        let page = self
            .store
            .list(&prefix, None, None)
            .map_err(|e| e.to_string())?;
        Ok(page.items.into_iter().map(|(_, o)| o).collect())
    }
}

/// Query parameters, percent-decoded.
#[derive(Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(q: Option<&str>) -> Self {
        let mut out = Vec::new();
        for pair in q.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            out.push((percent_decode(k), percent_decode(v)));
        }
        Query(out)
    }
    pub(crate) fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.as_str())
    }
    pub(crate) fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
}

/// A query-string component with `+` as a space and `%XX` escapes decoded (invalid escapes are
/// kept as written).
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A store failure as a `Status`: a full disk is 507 (the write was not stored and may be
/// retried once space is freed); anything else is 500. Neither names a path.
fn store_err(e: StoreError) -> ApiError {
    match e {
        StoreError::StorageFull => ApiError::new(
            507,
            "InsufficientStorage",
            "storage is full: the request was not stored; retry once space is freed",
        ),
        e => ApiError::internal(format!("storage error: {e}")),
    }
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str)
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("invariant: metadata was just set to an object"),
    }
}

/// Mark an object with finalizers as being deleted, as kube-apiserver does: `deletionTimestamp`
/// now, a zero grace period, and `generation` bumped when set (controllers that filter on
/// generation changes, such as Karmada's binding controller, see the deletion that way).
fn mark_deleting(m: &mut Map<String, Value>) {
    m.insert("deletionTimestamp".into(), json!(now_rfc3339()));
    m.insert("deletionGracePeriodSeconds".into(), json!(0));
    if let Some(g) = m
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|g| *g > 0)
    {
        m.insert("generation".into(), json!(g + 1));
    }
}

fn rv_of(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Go `omitempty` normalization of the fields clients compare (see research note §8.3).
fn normalize(obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    let m = meta_mut(obj);
    for f in [
        "finalizers",
        "ownerReferences",
        "labels",
        "annotations",
        "managedFields",
    ] {
        let empty = match m.get(f) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            m.remove(f);
        }
    }
    m.retain(|_, v| !v.is_null());
}

/// Whether `a` and `b` differ in spec-like content (everything but metadata, and status when the
/// kind has a status subresource): what bumps the generation. Compared in place, not on copies.
fn spec_differs(a: &Value, b: &Value, has_status: bool) -> bool {
    let skip = |k: &str| k == "metadata" || (has_status && k == "status");
    match (a.as_object(), b.as_object()) {
        (Some(x), Some(y)) => {
            let count = |m: &serde_json::Map<String, Value>| m.keys().filter(|k| !skip(k)).count();
            count(x) != count(y)
                || x.iter()
                    .filter(|(k, _)| !skip(k))
                    .any(|(k, v)| y.get(k) != Some(v))
        }
        _ => a != b,
    }
}

/// Whether `a` and `b` are the same object for the no-op rule: managedFields timestamps do not
/// count. Compared in place, not on copies.
fn same_for_noop(a: &Value, b: &Value) -> bool {
    fn eq_except<'a>(
        x: &'a serde_json::Map<String, Value>,
        y: &'a serde_json::Map<String, Value>,
        skip: &str,
        inner: impl Fn(&str, &Value, &Value) -> bool,
    ) -> bool {
        x.keys().filter(|k| *k != skip).count() == y.keys().filter(|k| *k != skip).count()
            && x.iter()
                .filter(|(k, _)| *k != skip)
                .all(|(k, v)| y.get(k).is_some_and(|w| inner(k, v, w)))
    }
    let (Some(x), Some(y)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    eq_except(x, y, "", |k, v, w| {
        if k != "metadata" {
            return v == w;
        }
        let (Some(mv), Some(mw)) = (v.as_object(), w.as_object()) else {
            return v == w;
        };
        eq_except(mv, mw, "", |k, v, w| {
            if k != "managedFields" {
                return v == w;
            }
            let (Some(ev), Some(ew)) = (v.as_array(), w.as_array()) else {
                return v == w;
            };
            ev.len() == ew.len()
                && ev
                    .iter()
                    .zip(ew)
                    .all(|(e, f)| match (e.as_object(), f.as_object()) {
                        (Some(e), Some(f)) => eq_except(e, f, "time", |_, v, w| v == w),
                        _ => e == f,
                    })
        })
    })
}

fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    bytes
        .iter()
        .take(n)
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
}

fn wants(headers: &HeaderMap, what: &str) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| {
            // Honour `as=` only when it is the first (preferred) media type.
            a.split(',')
                .next()
                .is_some_and(|first| first.contains(&format!("as={what}")))
        })
}

fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// Continue tokens: base64 of `{"rv": .., "start": key}`.
fn encode_continue(rv: u64, key: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(json!({"rv": rv, "start": key}).to_string())
}

fn decode_continue(token: &str) -> Result<String, ApiError> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| ApiError::bad_request("continue key is not valid"))?;
    let v: Value = serde_json::from_slice(&raw)
        .map_err(|_| ApiError::bad_request("continue key is not valid"))?;
    v.get("start")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ApiError::bad_request("continue key is not valid"))
}

impl ApiServer {
    /// A server over `store`.
    pub fn new(store: Store, options: ServerOptions) -> Arc<Self> {
        Arc::new(ApiServer {
            store,
            options,
            ready_clusters: Mutex::new(HashSet::new()),
            watch_counters: Arc::default(),
        })
    }

    /// Counters of the watches: how many are open, what they have queued, how many were closed
    /// because their client stopped reading.
    pub fn watch_stats(&self) -> WatchStats {
        let c = &self.watch_counters;
        WatchStats {
            open: c.open.load(Ordering::Acquire),
            queued_events: c.queued_events.load(Ordering::Acquire),
            queued_bytes: c.queued_bytes.load(Ordering::Acquire),
            closed_stalled: c.stalled.load(Ordering::Acquire),
        }
    }

    /// How many users the token file names ([`ServerOptions::token_file`]).
    pub fn token_file_users(&self) -> usize {
        self.options.token_file.len()
    }

    /// The underlying store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// An axum router serving the Kubernetes API (every path goes through one dispatcher).
    pub fn router(self: &Arc<Self>) -> axum::Router {
        let state = Arc::clone(self);
        axum::Router::new().fallback(move |req: Request<Body>| {
            let state = Arc::clone(&state);
            async move { state.dispatch(req).await }
        })
    }

    async fn dispatch(self: Arc<Self>, mut req: Request<Body>) -> Response {
        let user = match check_origin(req.headers(), req.uri()).and_then(|()| {
            self.authenticate(
                req.headers(),
                req.extensions().get::<Arc<crate::tls::ClientChain>>(),
            )
        }) {
            Ok(user) => user,
            Err(e) => return e.into_response(),
        };
        let user = match self.authorizer().impersonate(user, req.headers()) {
            Ok(user) => user,
            Err(e) => return e.into_response(),
        };
        req.extensions_mut().insert(user);
        if let Err(e) = self.authorize(&req) {
            return e.into_response();
        }
        if let Some(p) = proxy::parse(req.uri().path(), ROOT_CLUSTER) {
            return match p {
                Ok(p) => self.proxy(p, req).await,
                Err(e) => e.into_response(),
            };
        }
        self.serve(req).await
    }

    /// Serve an authenticated request (not a cluster proxy request): route it, and encode the
    /// answer as the client negotiated.
    pub(crate) async fn serve(&self, req: Request<Body>) -> Response {
        // Answers in protobuf when preferred; watch events as length-prefixed frames.
        let negotiated = protobuf::Negotiated::from_headers(req.headers());
        let watch = Query::parse(req.uri().query()).flag("watch");
        let path = req.uri().path().to_owned();
        let resp = match self.route(req).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        };
        if watch {
            negotiated.frame_watch(resp, &path).await
        } else {
            negotiated.apply(resp).await
        }
    }

    /// Who sent the request, as kube-apiserver's authenticators in turn: a client certificate
    /// the client CA signed (user = CN, groups = O), the holder of the generated token, a user
    /// of the token file, a ServiceAccount token, or (anonymous access only, and only without
    /// credentials) `system:anonymous`. Credentials that all fail are kube-apiserver's 401,
    /// a rejected certificate too unless a token authenticates.
    fn authenticate(
        &self,
        headers: &HeaderMap,
        chain: Option<&Arc<crate::tls::ClientChain>>,
    ) -> Result<UserInfo, ApiError> {
        let unauthorized = || ApiError::new(401, "Unauthorized", "Unauthorized");
        let mut cert_rejected = false;
        if let (Some(chain), Some(ca)) = (chain, &self.options.client_ca) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            match chain.identity(ca, now) {
                Ok(Some(id)) => {
                    let mut groups = id.groups;
                    if !groups.iter().any(|g| g == "system:authenticated") {
                        groups.push("system:authenticated".into());
                    }
                    return Ok(UserInfo {
                        name: id.user,
                        uid: String::new(),
                        groups,
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "client certificate rejected");
                    cert_rejected = true;
                }
            }
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(presented) = presented else {
            return if self.options.anonymous && !cert_rejected {
                Ok(UserInfo::anonymous())
            } else {
                Err(unauthorized())
            };
        };
        // Both checked whatever the first answers: the time taken does not tell which matched.
        let admin = self
            .options
            .token
            .as_ref()
            .is_some_and(|t| constant_time_eq(presented.as_bytes(), t.as_bytes()));
        let listed = self.options.token_file.authenticate(presented);
        match (admin, listed) {
            (true, _) => Ok(UserInfo::admin()),
            (false, Some(user)) => Ok(user.clone()),
            (false, None) => self
                .service_account_user(presented)
                .ok_or_else(unauthorized),
        }
    }

    /// The ServiceAccount a token issued by this server's TokenRequest authenticates, if it is one
    /// and still valid ([`crate::sa_token::authenticate`]).
    fn service_account_user(&self, token: &str) -> Option<UserInfo> {
        let key = self.options.service_account_key.as_deref()?;
        if !crate::sa_token::looks_like_jwt(token) {
            return None;
        }
        let now = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_secs(),
        )
        .ok()?;
        crate::sa_token::authenticate(key, token, now, |ns, name| {
            let res = registry::lookup_kind("v1", "ServiceAccount")?;
            let key = format!(
                "/{ROOT_CLUSTER}/{}/{}/{ns}/{name}",
                res.group_key(),
                res.plural
            );
            self.store.get(&key).ok().flatten().map(|(_, obj)| obj)
        })
    }

    /// The RBAC authorizer over this server's store.
    pub(crate) fn authorizer(&self) -> Authorizer<'_> {
        Authorizer::new(&self.store, self.options.anonymous)
    }

    /// Authorize `req` for the user authentication put in its extensions (none: anonymous):
    /// kube-apiserver's 403 when RBAC does not allow it. Attributes as [`RequestInfo::parse`].
    pub(crate) fn authorize(&self, req: &Request<Body>) -> Result<(), ApiError> {
        let anonymous = UserInfo::anonymous();
        let user = req.extensions().get::<UserInfo>().unwrap_or(&anonymous);
        let authorizer = self.authorizer();
        if authorizer.unrestricted(user) {
            return Ok(());
        }
        let info = RequestInfo::parse(req.method(), req.uri().path(), req.uri().query());
        if authorizer.authorize(user, &info)?.allowed {
            Ok(())
        } else {
            Err(authz::forbidden(&user.name, &info))
        }
    }

    async fn route(&self, req: Request<Body>) -> Result<Response, ApiError> {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_owned();
        let query = Query::parse(parts.uri.query());
        let mut segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let mut cluster = ROOT_CLUSTER.to_owned();
        if segs.first() == Some(&"clusters") && segs.len() >= 2 {
            let name = segs[1];
            if !is_dns_subdomain(name) {
                return Err(ApiError::bad_request(format!(
                    "invalid logical cluster name {name:?}"
                )));
            }
            cluster = name.to_owned();
            segs.drain(..2);
        }
        // Only callers outside RBAC (the admin) bring a logical cluster into being; others get
        // 404 for one that does not exist yet, so they cannot make the server write keyspaces.
        if cluster != ROOT_CLUSTER {
            let anonymous = UserInfo::anonymous();
            let user = parts.extensions.get::<UserInfo>().unwrap_or(&anonymous);
            if !self.authorizer().unrestricted(user) && !self.cluster_exists(&cluster)? {
                return Err(ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ));
            }
        }
        self.ensure_cluster(&cluster).await?;
        if events::is_view(&segs) {
            // events.k8s.io/v1 is a view of the core/v1 Events ([`crate::events`]).
            let prefix = if cluster == ROOT_CLUSTER {
                String::new()
            } else {
                format!("/clusters/{cluster}")
            };
            let watch = query.flag("watch");
            let core =
                events::core_request(Request::from_parts(parts, body), &prefix, &segs).await?;
            let resp = match Box::pin(self.route(core)).await {
                Ok(resp) => resp,
                Err(e) => e.into_response(),
            };
            return Ok(events::events_response(resp, watch).await);
        }
        if let Some(m) = crate::custom_metrics::parse(&segs) {
            // custom.metrics.k8s.io and external.metrics.k8s.io are served, not stored.
            let user = parts.extensions.get::<UserInfo>();
            let root = cluster == ROOT_CLUSTER;
            return self
                .custom_metrics(&cluster, root, m, &parts.method, &query, user)
                .await;
        }
        if let Some(m) = crate::metrics::parse(&segs) {
            // metrics.k8s.io is served, not stored ([`crate::metrics`]).
            let user = parts.extensions.get::<UserInfo>();
            let root = cluster == ROOT_CLUSTER;
            return self
                .metrics(&cluster, root, m, &parts.method, &query, user)
                .await;
        }
        let get = parts.method == Method::GET;
        match segs.as_slice() {
            ["version"] if get => return Ok(json_response(StatusCode::OK, &discovery::version())),
            ["healthz" | "livez" | "readyz", ..] if get => {
                return Ok(
                    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], "ok").into_response(),
                );
            }
            ["api"] if get => {
                return Ok(json_response(StatusCode::OK, &discovery::core_versions()));
            }
            ["apis"] if get => return Ok(json_response(StatusCode::OK, &discovery::group_list())),
            ["api", v] if get => {
                return discovery::resource_list("", v)
                    .map(|d| json_response(StatusCode::OK, &d))
                    .ok_or_else(|| {
                        ApiError::new(
                            404,
                            "NotFound",
                            "the server could not find the requested resource",
                        )
                    });
            }
            ["apis", g] if get => {
                return discovery::group(g)
                    .map(|d| json_response(StatusCode::OK, &d))
                    .ok_or_else(|| {
                        ApiError::new(
                            404,
                            "NotFound",
                            "the server could not find the requested resource",
                        )
                    });
            }
            ["apis", g, v] if get => {
                return discovery::resource_list(g, v)
                    .map(|d| json_response(StatusCode::OK, &d))
                    .ok_or_else(|| {
                        ApiError::new(
                            404,
                            "NotFound",
                            "the server could not find the requested resource",
                        )
                    });
            }
            ["openapi", "v2"] if get => {
                return Ok((
                    StatusCode::OK,
                    [(
                        header::CONTENT_TYPE,
                        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                    )],
                    discovery::openapi_v2_protobuf(),
                )
                    .into_response());
            }
            ["openapi", "v3"] if get => {
                let crds = self.crds(&cluster)?;
                let crds: Vec<&Value> = crds.iter().map(|c| &**c).collect();
                return Ok(json_response(StatusCode::OK, &openapi::index(&crds)));
            }
            ["openapi", "v3", rest @ ..] if get => {
                let crds = self.crds(&cluster)?;
                let crds: Vec<&Value> = crds.iter().map(|c| &**c).collect();
                let gv = rest.join("/");
                let doc = openapi::document(&gv, &crds).ok_or_else(|| {
                    ApiError::new(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    )
                })?;
                let mut resp = json_response(StatusCode::OK, &doc);
                // As kube-apiserver: a URL carrying the current hash never changes, so
                // kubectl's disk cache keeps it; any other request revalidates.
                let current = openapi::hash(&gv, &crds).unwrap_or_default();
                let cache = if query.get("hash") == Some(current.as_str()) {
                    "public, immutable, max-age=31536000"
                } else {
                    "no-cache, private"
                };
                let h = resp.headers_mut();
                h.insert(
                    header::CACHE_CONTROL,
                    header::HeaderValue::from_static(cache),
                );
                if let Ok(etag) = header::HeaderValue::from_str(&format!("\"{current}\"")) {
                    h.insert(header::ETAG, etag);
                }
                return Ok(resp);
            }
            _ => {}
        }
        let mut target = parse_target(&cluster, &segs)?;
        if let Some(user) = parts.extensions.get::<UserInfo>()
            && !self.authorizer().unrestricted(user)
        {
            target.restricted = Some(user.clone());
        }
        let body = axum::body::to_bytes(body, MAX_BODY)
            .await
            .map_err(|_| limits::too_large(MAX_BODY))?;
        if auth::is_review(target.res) {
            let anonymous = UserInfo::anonymous();
            let user = parts.extensions.get::<UserInfo>().unwrap_or(&anonymous);
            let (code, review) = auth::review(
                target.res,
                &parts.method,
                &parts.headers,
                &body,
                user,
                &self.authorizer(),
            )?;
            return Ok(json_response(code, &review));
        }
        // Like kube-apiserver, a body without a Content-Type is JSON.
        let ct = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_owned();
        let writes_object = parts.method == Method::POST
            || parts.method == Method::PUT
            || (parts.method == Method::DELETE && !body.is_empty());
        // Protobuf object bodies (client-go's typed clients) go on as JSON.
        let (body, ct) = if writes_object {
            protobuf::request_body(target.res, &parts.method, body, ct)?
        } else {
            (body, ct)
        };
        if writes_object && !BODY_MEDIA_TYPES.contains(&media_type(&ct).as_str()) {
            return Err(ApiError::unsupported_media_of(BODY_MEDIA_TYPES, &ct));
        }
        let headers = parts.headers;
        let mut warnings = Vec::new();
        if target.sub.as_deref() == Some("token") && target.res.kind == "ServiceAccount" {
            return self.token_request(&target, &parts.method, &body, &ct);
        }
        if target.sub.as_deref() == Some("scale") {
            let result = self
                .scale(&target, &parts.method, &query, &body, &ct, &mut warnings)
                .await;
            return Ok(with_warnings(result, &warnings));
        }
        let result = match (parts.method, &target.name) {
            (Method::GET, None) if query.flag("watch") => {
                self.watch(&target, &query, &headers, &parts.extensions)
                    .await
            }
            (Method::GET, None) => self.list(&target, &query, &headers),
            (Method::GET, Some(name)) if query.flag("watch") => {
                // Legacy single-object watch: a watch with a name field selector.
                let mut q = query;
                q.0.push(("fieldSelector".into(), format!("metadata.name={name}")));
                let t = Target {
                    name: None,
                    ..target
                };
                self.watch(&t, &q, &headers, &parts.extensions).await
            }
            (Method::GET, Some(_)) => self.get(&target, &headers),
            (Method::POST, None) => {
                self.create(&target, &query, &body, &headers, &mut warnings)
                    .await
            }
            (Method::PUT, Some(_)) => {
                self.update(&target, &query, &body, &headers, &mut warnings)
                    .await
            }
            (Method::PATCH, Some(_)) => {
                self.patch(&target, &query, &body, &ct, &headers, &mut warnings)
                    .await
            }
            (Method::DELETE, Some(_)) => self.delete(&target, &query, &body, &headers).await,
            (Method::DELETE, None) => self.delete_collection(&target, &query).await,
            _ => Err(ApiError::method_not_allowed()),
        };
        Ok(with_warnings(result, &warnings))
    }

    /// Whether logical cluster `cluster` was brought into being ([`Self::ensure_cluster`]).
    fn cluster_exists(&self, cluster: &str) -> Result<bool, ApiError> {
        if self
            .ready_clusters
            .lock()
            .is_ok_and(|s| s.contains(cluster))
        {
            return Ok(true);
        }
        let key = format!("/{cluster}/core/namespaces/{}", BOOTSTRAP_NAMESPACES[0]);
        Ok(self.store.get(&key).map_err(store_err)?.is_some())
    }

    async fn ensure_cluster(&self, cluster: &str) -> Result<(), ApiError> {
        if self
            .ready_clusters
            .lock()
            .map(|s| s.contains(cluster))
            .unwrap_or(false)
        {
            return Ok(());
        }
        for ns in BOOTSTRAP_NAMESPACES {
            let key = format!("/{cluster}/core/namespaces/{ns}");
            if self.store.get(&key).map_err(store_err)?.is_some() {
                continue;
            }
            let obj = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now_rfc3339(),
                             "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            });
            match self
                .store
                .write(key, Op::Put(obj), Precondition::Absent)
                .await
            {
                Ok(_) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(store_err(e)),
            }
        }
        for crd in self.crds(cluster)? {
            let _ = registry::register_crd(&crd);
        }
        if let Ok(mut s) = self.ready_clusters.lock() {
            s.insert(cluster.to_owned());
        }
        Ok(())
    }

    fn key(t: &Target, name: &str) -> String {
        match &t.namespace {
            Some(ns) if t.res.namespaced => format!(
                "/{}/{}/{}/{ns}/{name}",
                t.cluster,
                t.res.group_key(),
                t.res.plural
            ),
            _ => format!(
                "/{}/{}/{}/{name}",
                t.cluster,
                t.res.group_key(),
                t.res.plural
            ),
        }
    }

    fn prefix(t: &Target) -> String {
        match &t.namespace {
            Some(ns) if t.res.namespaced => format!(
                "/{}/{}/{}/{ns}/",
                t.cluster,
                t.res.group_key(),
                t.res.plural
            ),
            _ => format!("/{}/{}/{}/", t.cluster, t.res.group_key(), t.res.plural),
        }
    }

    fn load(&self, t: &Target, name: &str) -> Result<Value, ApiError> {
        match self.store.get(&Self::key(t, name)).map_err(store_err)? {
            Some((_, obj)) => Ok(obj),
            None => Err(ApiError::not_found(&t.res.qualified(), name)),
        }
    }

    /// What a request gets back of `obj`: the object itself (borrowed, not copied) or its
    /// metadata only.
    fn render<'a>(obj: &'a Value, headers: &HeaderMap) -> std::borrow::Cow<'a, Value> {
        if wants(headers, "PartialObjectMetadata") {
            std::borrow::Cow::Owned(partial_metadata(obj))
        } else {
            std::borrow::Cow::Borrowed(obj)
        }
    }

    /// The Priority admission plugin: at most one PriorityClass has `globalDefault: true`
    /// (checked when `obj` becomes the default).
    fn one_global_default(
        &self,
        t: &Target,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let is_default = |o: &Value| o.get("globalDefault") == Some(&Value::Bool(true));
        if !is_default(obj) || old.is_some_and(is_default) {
            return Ok(());
        }
        let name = meta_str(obj, "name").unwrap_or_default();
        let page = self
            .store
            .list(&Self::prefix(t), None, None)
            .map_err(store_err)?;
        if let Some(other) = page
            .items
            .iter()
            .find(|(_, o)| is_default(o) && meta_str(o, "name") != Some(name))
        {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} \"{name}\" is forbidden: PriorityClass {} is already marked as default. Only one default can exist",
                    t.res.qualified(),
                    meta_str(&other.1, "name").unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    /// kube-apiserver's own validation ([`crate::validation`]) of `obj` about to be stored.
    fn validate(&self, t: &Target, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        crate::validation::validate(t.res, obj, old)
            .map_err(|e| e.to_api_error(t.res, meta_str(obj, "name").unwrap_or_default()))?;
        if (t.res.group, t.res.kind) == ("scheduling.k8s.io", "PriorityClass") {
            self.one_global_default(t, obj, old)?;
        }
        if t.res.group == "rbac.authorization.k8s.io" {
            rbac_checks(t, obj, old)?;
            // RBAC objects of a simulated member grant nothing ([`crate::authz`]).
            if let Some(user) = &t.restricted
                && t.cluster == ROOT_CLUSTER
            {
                self.authorizer().check_escalation(
                    user,
                    t.res.plural,
                    obj,
                    t.namespace.as_deref().unwrap_or(""),
                )?;
            }
        }
        Ok(())
    }

    /// Run the registered admission on `obj` (the main resource only; status writes are not admitted).
    fn admit(
        &self,
        t: &Target,
        op: Operation,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let Some(admission) = &self.options.admission else {
            return Ok(());
        };
        let existing = StoredObjects {
            store: &self.store,
            cluster: &t.cluster,
        };
        admission
            .admit_with(op, t.res, obj, old, &existing)
            .map_err(|e| e.to_api_error(t.res, meta_str(obj, "name").unwrap_or_default()))
    }

    fn get(&self, t: &Target, headers: &HeaderMap) -> Result<Response, ApiError> {
        check_sub(t)?;
        let name = t.name.as_deref().unwrap_or_default();
        let obj = self.load(t, name)?;
        if wants(headers, "Table") {
            let meta =
                json!({"resourceVersion": meta_str(&obj, "resourceVersion").unwrap_or_default()});
            return Ok(json_response(
                StatusCode::OK,
                &table::table(t.res, &[&obj], meta, table::Include::parse(None)),
            ));
        }
        Ok(json_response(StatusCode::OK, &Self::render(&obj, headers)))
    }

    fn list(&self, t: &Target, q: &Query, headers: &HeaderMap) -> Result<Response, ApiError> {
        let as_table = wants(headers, "Table");
        let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or_default())?;
        let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or_default())?;
        let limit = q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let start = match q.get("continue").filter(|c| !c.is_empty()) {
            Some(c) => Some(decode_continue(c)?),
            None => None,
        };
        let prefix = Self::prefix(t);
        let page = self
            .store
            .list(&prefix, start.as_deref(), limit)
            .map_err(store_err)?;
        if as_table {
            let mut list_meta = json!({"resourceVersion": page.rev.to_string()});
            if let Some(after) = &page.more_after {
                list_meta["continue"] = json!(encode_continue(page.rev, after));
            }
            let objs: Vec<&Value> = page
                .items
                .iter()
                .map(|(_, o)| &**o)
                .filter(|o| labels.matches(o) && fields.matches(o))
                .collect();
            let include = table::Include::parse(q.get("includeObject"));
            return Ok(json_response(
                StatusCode::OK,
                &table::table(t.res, &objs, list_meta, include),
            ));
        }
        let partial = wants(headers, "PartialObjectMetadataList");
        let items: Vec<Value> = page
            .items
            .iter()
            .filter(|(_, o)| labels.matches(o) && fields.matches(o))
            .map(|(_, o)| {
                if partial {
                    partial_metadata(o)
                } else {
                    (**o).clone()
                }
            })
            .collect();
        let mut list_meta = json!({"resourceVersion": page.rev.to_string()});
        if let Some(after) = &page.more_after {
            list_meta["continue"] = json!(encode_continue(page.rev, after));
        }
        let (kind, api_version) = if partial {
            (
                "PartialObjectMetadataList".to_owned(),
                "meta.k8s.io/v1".to_owned(),
            )
        } else {
            (format!("{}List", t.res.kind), t.res.api_version())
        };
        Ok(json_response(
            StatusCode::OK,
            &json!({"kind": kind, "apiVersion": api_version, "metadata": list_meta, "items": items}),
        ))
    }

    /// The logical cluster's CustomResourceDefinitions.
    fn crds(&self, cluster: &str) -> Result<Vec<Arc<Value>>, ApiError> {
        let page = self
            .store
            .list(
                &format!("/{cluster}/apiextensions.k8s.io/customresourcedefinitions/"),
                None,
                None,
            )
            .map_err(store_err)?;
        Ok(page.items.into_iter().map(|(_, crd)| crd).collect())
    }

    /// The fields of `obj` the schema of the target's kind does not declare (for custom
    /// resources, the schema of their stored CRD).
    fn unknown_fields(&self, t: &Target, obj: &Value) -> openapi::Unknown {
        let crd = if openapi::needs_crd(t.res) {
            let key = format!(
                "/{}/apiextensions.k8s.io/customresourcedefinitions/{}",
                t.cluster,
                t.res.qualified()
            );
            self.store.get(&key).ok().flatten().map(|(_, crd)| crd)
        } else {
            None
        };
        openapi::unknown_fields(t.res, obj, crd.as_ref())
    }

    /// Decode an object body (JSON, else YAML) and apply `fieldValidation` to its duplicate and
    /// unknown fields (`options` names the options kind in errors: `CreateOptions`,
    /// `UpdateOptions`).
    fn decode_body(
        &self,
        t: &Target,
        q: &Query,
        options: &str,
        body: &Bytes,
        warnings: &mut Vec<String>,
    ) -> Result<Value, ApiError> {
        let validation = FieldValidation::parse(q.get("fieldValidation"), options)?;
        if body.is_empty() {
            return Err(ApiError::bad_request("the request body is empty"));
        }
        let decoded = match decode::json(body) {
            Ok(d) => d,
            Err(json_err) => {
                yaml_prescan(body)?;
                decode::yaml(body).map_err(|_| {
                    ApiError::bad_request(format!(
                        "the body of the request could not be decoded: {json_err}"
                    ))
                })?
            }
        };
        limits::check_body_depth(&decoded.value)?;
        let kind = t.res.kind;
        let version = t.res.version;
        let context = format!("{kind} in version {version:?} cannot be handled as a {kind}: ");
        let mut decoded = decoded;
        decoded.unknown = self.unknown_fields(t, &decoded.value);
        validation.check(&decoded, &context, warnings)?;
        Ok(decoded.value)
    }

    /// Check kind/apiVersion/namespace of a body against the request target, filling gaps.
    fn check_body(t: &Target, obj: &mut Value) -> Result<(), ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        let api_version = t.res.api_version();
        match obj.get("apiVersion").and_then(Value::as_str) {
            Some(av) if av != api_version => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({api_version})"
                )));
            }
            _ => obj["apiVersion"] = json!(api_version),
        }
        match obj.get("kind").and_then(Value::as_str) {
            Some(k) if k != t.res.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    t.res.kind
                )));
            }
            _ => obj["kind"] = json!(t.res.kind),
        }
        let m = meta_mut(obj);
        if t.res.namespaced {
            let url_ns = t.namespace.clone().unwrap_or_default();
            match m.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != url_ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(url_ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        Ok(())
    }

    async fn namespace_exists(&self, t: &Target) -> Result<(), ApiError> {
        if !t.res.namespaced {
            return Ok(());
        }
        let ns = t.namespace.as_deref().unwrap_or_default();
        let key = format!("/{}/core/namespaces/{ns}", t.cluster);
        match self.store.get(&key).map_err(store_err)? {
            Some((_, obj)) if obj.pointer("/metadata/deletionTimestamp").is_some() => {
                Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "unable to create new content in namespace {ns} because it is being terminated"
                    ),
                ))
            }
            Some(_) => Ok(()),
            None => Err(ApiError::not_found("namespaces", ns)),
        }
    }

    fn validate_name(t: &Target, name: &str) -> Result<(), ApiError> {
        if !is_dns_subdomain(name) {
            return Err(ApiError::invalid(format!(
                "{} \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                t.res.kind
            ))
            .with_details(json!({"name": name, "kind": t.res.kind, "causes": [{"reason": "FieldValueInvalid", "field": "metadata.name", "message": "Invalid value"}]})));
        }
        Ok(())
    }

    /// Server-set fields on create.
    fn prepare_create(t: &Target, obj: &mut Value) -> Result<(), ApiError> {
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::invalid(
                "metadata.deletionTimestamp: may not be set on create",
            ));
        }
        if t.res.has_status
            && t.res.kind != "Namespace"
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        if t.res.kind == "CustomResourceDefinition" && t.res.group == "apiextensions.k8s.io" {
            registry::register_crd(obj).map_err(|m| {
                ApiError::invalid(format!("CustomResourceDefinition is invalid: {m}"))
            })?;
            let now = now_rfc3339();
            let cond = |ty: &str, reason: &str| json!({"type": ty, "status": "True", "reason": reason, "message": "", "lastTransitionTime": now});
            obj["status"] = json!({
                "acceptedNames": obj.pointer("/spec/names").cloned().unwrap_or(json!({})),
                "conditions": [cond("NamesAccepted", "NoConflicts"), cond("Established", "InitialNamesAccepted")],
                "storedVersions": obj.pointer("/spec/versions").and_then(Value::as_array).map(|vs| {
                    vs.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>()
                }).unwrap_or_default(),
            });
        }
        if t.res.kind == "Namespace" {
            let name = meta_str(obj, "name").unwrap_or_default().to_owned();
            obj["status"] = json!({"phase": "Active"});
            let labels = meta_mut(obj).entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        let m = meta_mut(obj);
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(now_rfc3339()));
        m.insert("generation".into(), json!(1));
        m.remove("resourceVersion");
        m.remove("selfLink");
        m.remove("deletionGracePeriodSeconds");
        defaults::apply(t.res, obj);
        normalize(obj);
        Ok(())
    }

    async fn create(
        &self,
        t: &Target,
        q: &Query,
        body: &Bytes,
        headers: &HeaderMap,
        warnings: &mut Vec<String>,
    ) -> Result<Response, ApiError> {
        if t.sub.is_some() {
            return Err(ApiError::method_not_allowed());
        }
        if t.res.namespaced && t.namespace.is_none() {
            return Err(ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
        let mut obj = self.decode_body(t, q, "CreateOptions", body, warnings)?;
        Self::check_body(t, &mut obj)?;
        self.namespace_exists(t).await?;
        let generate = meta_str(&obj, "generateName").map(str::to_owned);
        let explicit = meta_str(&obj, "name")
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        Self::prepare_create(t, &mut obj)?;
        let dry_run = q.get("dryRun") == Some("All");
        for attempt in 0..8 {
            let name = match (&explicit, &generate) {
                (Some(n), _) => n.clone(),
                (None, Some(g)) => format!("{g}{}", random_suffix(5)),
                (None, None) => {
                    return Err(ApiError::invalid(
                        "metadata.name: Required value: name or generateName is required",
                    ));
                }
            };
            Self::validate_name(t, &name)?;
            meta_mut(&mut obj).insert("name".into(), json!(name));
            if attempt == 0 {
                self.admit(t, Operation::Create, &mut obj, None)?;
                normalize(&mut obj);
                self.validate(t, &obj, None)?;
                limits::check_object(&obj)?;
            }
            if dry_run {
                if self
                    .store
                    .get(&Self::key(t, &name))
                    .map_err(store_err)?
                    .is_some()
                {
                    return Err(ApiError::already_exists(&t.res.qualified(), &name));
                }
                return Ok(json_response(
                    StatusCode::CREATED,
                    &Self::render(&obj, headers),
                ));
            }
            match self
                .store
                .write(
                    Self::key(t, &name),
                    Op::Put(obj.clone()),
                    Precondition::Absent,
                )
                .await
            {
                Ok(c) => {
                    return Ok(json_response(
                        StatusCode::CREATED,
                        &Self::render(&c.object, headers),
                    ));
                }
                Err(StoreError::Conflict { .. }) if explicit.is_none() => continue,
                Err(StoreError::Conflict { .. }) => {
                    return Err(ApiError::already_exists(&t.res.qualified(), &name));
                }
                Err(e) => return Err(store_err(e)),
            }
        }
        Err(ApiError::new(
            504,
            "Timeout",
            "could not generate a unique name",
        ))
    }

    /// Merge a proposed object into the stored one following the update rules, then write it.
    /// Returns the stored object (unchanged on a no-op).
    async fn commit_update(
        &self,
        t: &Target,
        old: &Value,
        mut new: Value,
        dry_run: bool,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let name = t.name.as_deref().unwrap_or_default();
        let status_sub = t.sub.as_deref() == Some("status");
        if status_sub {
            // Only .status changes through the status subresource.
            let mut merged = old.clone();
            match new.get("status") {
                Some(s) => merged["status"] = s.clone(),
                None => {
                    if let Some(m) = merged.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if let Some(mf) = new.pointer("/metadata/managedFields") {
                meta_mut(&mut merged).insert("managedFields".into(), mf.clone());
            }
            new = merged;
        } else if t.res.has_status {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        // Immutable and server-owned metadata.
        let no_meta = serde_json::Map::new();
        let old_meta = meta(old).unwrap_or(&no_meta);
        {
            let m = meta_mut(&mut new);
            for f in [
                "uid",
                "creationTimestamp",
                "name",
                "namespace",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old_meta.get(f) {
                    Some(v) => m.insert(f.into(), v.clone()),
                    None => m.remove(f),
                };
            }
            m.insert(
                "resourceVersion".into(),
                old_meta
                    .get("resourceVersion")
                    .cloned()
                    .unwrap_or(Value::Null),
            );
            if !m.contains_key("managedFields")
                && let Some(mf) = old_meta.get("managedFields")
            {
                m.insert("managedFields".into(), mf.clone());
            }
        }
        if t.res.kind == "Namespace" {
            new["status"] = old
                .get("status")
                .cloned()
                .unwrap_or(json!({"phase": "Active"}));
        }
        if !status_sub {
            defaults::apply(t.res, &mut new);
        }
        normalize(&mut new);
        if !status_sub && self.options.admission.is_some() {
            let proposed = new.clone();
            if let Err(e) = self.admit(t, Operation::Update, &mut new, Some(old)) {
                // Ratcheting: an unchanged spec that no longer passes admission stays writable.
                if spec_differs(old, &proposed, t.res.has_status) {
                    return Err(e);
                }
                new = proposed;
            }
            normalize(&mut new);
        }
        if !status_sub {
            self.validate(t, &new, Some(old))?;
        }
        if spec_differs(old, &new, t.res.has_status) {
            if t.res.kind == "CustomResourceDefinition" && t.res.group == "apiextensions.k8s.io" {
                registry::register_crd(&new).map_err(|m| {
                    ApiError::invalid(format!("CustomResourceDefinition is invalid: {m}"))
                })?;
            }
            let g = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let terminating = old_meta.contains_key("deletionTimestamp");
        let fins = |o: &Value| -> Vec<Value> {
            o.pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        if terminating {
            let before = fins(old);
            if fins(&new).iter().any(|f| !before.contains(f)) {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "{} \"{name}\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
                        t.res.kind
                    ),
                ));
            }
        }
        if same_for_noop(&new, old) {
            return Ok((Arc::new(old.clone()), false));
        }
        limits::check_object(&new)?;
        if dry_run {
            return Ok((Arc::new(new), true));
        }
        let key = Self::key(t, name);
        let pre = Precondition::ModRev(rv_of(old));
        let removed = terminating && fins(&new).is_empty();
        let op = if removed { Op::Delete } else { Op::Put(new) };
        match self.store.write(key, op, pre).await {
            Ok(c) if removed => {
                // The last finalizer gone: the object leaves the store, its dependents follow.
                self.collect_dependents(&t.cluster, &c.object, false)
                    .await?;
                Ok((c.object, true))
            }
            Ok(c) => Ok((c.object, true)),
            Err(StoreError::Conflict { .. }) => Err(ApiError::conflict(&t.res.qualified(), name)),
            Err(e) => Err(store_err(e)),
        }
    }

    async fn update(
        &self,
        t: &Target,
        q: &Query,
        body: &Bytes,
        headers: &HeaderMap,
        warnings: &mut Vec<String>,
    ) -> Result<Response, ApiError> {
        check_sub(t)?;
        let name = t.name.clone().unwrap_or_default();
        let mut obj = self.decode_body(t, q, "UpdateOptions", body, warnings)?;
        Self::check_body(t, &mut obj)?;
        match meta_str(&obj, "name") {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                meta_mut(&mut obj).insert("name".into(), json!(name));
            }
        }
        let wanted_rv = meta_str(&obj, "resourceVersion")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let dry_run = q.get("dryRun") == Some("All");
        for _ in 0..MAX_RETRIES {
            let old = self.load(t, &name)?;
            if let Some(rv) = &wanted_rv
                && meta_str(&old, "resourceVersion") != Some(rv.as_str())
            {
                return Err(ApiError::conflict(&t.res.qualified(), &name));
            }
            match self.commit_update(t, &old, obj.clone(), dry_run).await {
                Ok((stored, _)) => {
                    return Ok(json_response(
                        StatusCode::OK,
                        &Self::render(&stored, headers),
                    ));
                }
                Err(e) if e.reason == "Conflict" && wanted_rv.is_none() => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::conflict(&t.res.qualified(), &name))
    }

    async fn patch(
        &self,
        t: &Target,
        q: &Query,
        body: &Bytes,
        ct: &str,
        headers: &HeaderMap,
        warnings: &mut Vec<String>,
    ) -> Result<Response, ApiError> {
        check_sub(t)?;
        let name = t.name.clone().unwrap_or_default();
        let media = media_type(ct);
        let dry_run = q.get("dryRun") == Some("All");
        let accepted: &[&str] = if t.res.strategic {
            PATCH_MEDIA_TYPES
        } else {
            &PATCH_MEDIA_TYPES[..PATCH_MEDIA_TYPES.len() - 1]
        };
        if !accepted.contains(&media.as_str()) {
            return Err(ApiError::unsupported_media_of(accepted, ct));
        }
        let validation = FieldValidation::parse(q.get("fieldValidation"), "PatchOptions")?;
        let decoded = match media.as_str() {
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                match decode::json(body) {
                    Ok(d) => d,
                    Err(_) => {
                        yaml_prescan(body)?;
                        decode::yaml(body).map_err(|e| {
                            ApiError::bad_request(format!("error decoding YAML: {e}"))
                        })?
                    }
                }
            }
            _ => decode::json(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        };
        limits::check_body_depth(&decoded.value)?;
        validation.check(&decoded, "", warnings)?;
        let patch_doc = decoded.value;
        let is_apply = media.starts_with("application/apply-patch");
        let manager = q.get("fieldManager").unwrap_or_default().to_owned();
        if is_apply && manager.is_empty() {
            return Err(ApiError::invalid(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let force = q.flag("force");
        let mut unknown_checked = false;
        for _ in 0..MAX_RETRIES {
            let old = match self.load(t, &name) {
                Ok(o) => Some(o),
                Err(e) if is_apply && e.code == 404 && t.sub.is_none() => None,
                Err(e) => return Err(e),
            };
            let Some(old) = old else {
                // Create-on-apply.
                let mut cfg = patch_doc.clone();
                Self::check_body(t, &mut cfg)?;
                if !unknown_checked {
                    unknown_checked = true;
                    validation.check_unknown(&self.unknown_fields(t, &cfg), "", warnings)?;
                }
                if meta_str(&cfg, "name").is_some_and(|n| n != name) {
                    return Err(ApiError::bad_request(
                        "the name of the object does not match the name on the URL",
                    ));
                }
                meta_mut(&mut cfg).insert("name".into(), json!(name));
                self.namespace_exists(t).await?;
                let now = now_rfc3339();
                let api_version = t.res.api_version();
                let req = ApplyRequest {
                    kind: t.res.kind,
                    strategic: t.res.strategic,
                    manager: &manager,
                    force,
                    subresource: "",
                    api_version: &api_version,
                    now: &now,
                };
                let base = json!({"apiVersion": api_version, "kind": t.res.kind, "metadata": {"name": name}});
                let mut obj = apply::apply(&req, &base, &cfg)?;
                Self::check_body(t, &mut obj)?;
                Self::prepare_create(t, &mut obj)?;
                self.admit(t, Operation::Create, &mut obj, None)?;
                normalize(&mut obj);
                self.validate(t, &obj, None)?;
                limits::check_object(&obj)?;
                if dry_run {
                    return Ok(json_response(
                        StatusCode::CREATED,
                        &Self::render(&obj, headers),
                    ));
                }
                match self
                    .store
                    .write(Self::key(t, &name), Op::Put(obj), Precondition::Absent)
                    .await
                {
                    Ok(c) => {
                        return Ok(json_response(
                            StatusCode::CREATED,
                            &Self::render(&c.object, headers),
                        ));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(store_err(e)),
                }
            };
            let mut new = match media.as_str() {
                "application/json-patch+json" => json_patch_k8s(&old, &patch_doc)?,
                "application/merge-patch+json" => {
                    let mut v = old.clone();
                    json_patch::merge(&mut v, &patch_doc);
                    v
                }
                "application/strategic-merge-patch+json" => {
                    smp::apply(t.res.kind, &old, &patch_doc)?
                }
                _ => {
                    let mut cfg = patch_doc.clone();
                    Self::check_body(t, &mut cfg)?;
                    let now = now_rfc3339();
                    let api_version = t.res.api_version();
                    let sub = t.sub.clone().unwrap_or_default();
                    let req = ApplyRequest {
                        kind: t.res.kind,
                        strategic: t.res.strategic,
                        manager: &manager,
                        force,
                        subresource: &sub,
                        api_version: &api_version,
                        now: &now,
                    };
                    let mut applied = apply::apply(&req, &old, &cfg)?;
                    // A resourceVersion in the configuration is a precondition, as it is for
                    // kube-apiserver (checked below like any patch's).
                    if let Some(rv) = meta_str(&cfg, "resourceVersion").filter(|rv| !rv.is_empty())
                    {
                        meta_mut(&mut applied).insert("resourceVersion".into(), json!(rv));
                    }
                    applied
                }
            };
            Self::check_body(t, &mut new)?;
            // Unknown fields of the patched object, as kube-apiserver finds them decoding it;
            // ones the stored object already had (written with fieldValidation=Ignore) are not
            // the patch's.
            if !unknown_checked {
                unknown_checked = true;
                let mut unknown = self.unknown_fields(t, &new);
                if !unknown.paths.is_empty() {
                    let before = self.unknown_fields(t, &old);
                    unknown.paths.retain(|p| !before.paths.contains(p));
                }
                validation.check_unknown(&unknown, "", warnings)?;
            }
            // A patch that sets resourceVersion is a precondition.
            if let Some(rv) = meta_str(&new, "resourceVersion")
                && !rv.is_empty()
                && meta_str(&old, "resourceVersion") != Some(rv)
            {
                return Err(ApiError::conflict(&t.res.qualified(), &name));
            }
            match self.commit_update(t, &old, new, dry_run).await {
                Ok((stored, _)) => {
                    return Ok(json_response(
                        StatusCode::OK,
                        &Self::render(&stored, headers),
                    ));
                }
                Err(e)
                    if e.reason == "Conflict"
                        && e.details.as_ref().and_then(|d| d.get("causes")).is_none() =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::conflict(&t.res.qualified(), &name))
    }

    /// The `serviceaccounts/token` subresource: POST a TokenRequest, get it back with a token
    /// ([`crate::sa_token`]); 404 when this server issues none.
    fn token_request(
        &self,
        t: &Target,
        method: &Method,
        body: &Bytes,
        ct: &str,
    ) -> Result<Response, ApiError> {
        let key = self.options.service_account_key.as_deref().ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        })?;
        if *method != Method::POST {
            return Err(ApiError::method_not_allowed());
        }
        if !media_type(ct).starts_with("application/json") && media_type(ct) != "application/yaml" {
            return Err(ApiError::unsupported_media_of(
                &[
                    "application/json",
                    "application/yaml",
                    "application/vnd.kubernetes.protobuf",
                ],
                ct,
            ));
        }
        let name = t.name.clone().ok_or_else(ApiError::method_not_allowed)?;
        let request = decode::json(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding TokenRequest: {e}")))?;
        limits::check_body_depth(&request.value)?;
        let service_account = self.load(t, &name)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let out = crate::sa_token::issue(key, &request.value, &service_account, now)?;
        Ok(json_response(StatusCode::CREATED, &out))
    }

    /// The `scale` subresource ([`crate::scale`]): GET reads the parent's replica count, PUT and
    /// PATCH (of the Scale, not of the parent) change it; a Scale carrying a stale
    /// `resourceVersion` is a 409 Conflict.
    async fn scale(
        &self,
        t: &Target,
        method: &Method,
        q: &Query,
        body: &Bytes,
        ct: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Response, ApiError> {
        let not_found = || {
            ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        };
        let paths = scale::paths(t.res).ok_or_else(not_found)?;
        let name = t.name.clone().ok_or_else(not_found)?;
        if *method == Method::GET {
            let obj = self.load(t, &name)?;
            return Ok(json_response(
                StatusCode::OK,
                &scale::to_scale(&paths, &obj),
            ));
        }
        let media = media_type(ct);
        const SCALE_PATCHES: &[&str] = &[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ];
        let doc = match *method {
            Method::PUT => {
                let validation = FieldValidation::parse(q.get("fieldValidation"), "UpdateOptions")?;
                let decoded = decode::json(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding Scale: {e}")))?;
                limits::check_body_depth(&decoded.value)?;
                validation.check(&decoded, "", warnings)?;
                decoded.value
            }
            Method::PATCH if SCALE_PATCHES.contains(&media.as_str()) => {
                let decoded = decode::json(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                limits::check_body_depth(&decoded.value)?;
                decoded.value
            }
            Method::PATCH => return Err(ApiError::unsupported_media_of(SCALE_PATCHES, ct)),
            _ => return Err(ApiError::method_not_allowed()),
        };
        // A resourceVersion the client sent is a precondition; without one, lost races retry.
        let precondition = match *method {
            Method::PUT => doc.pointer("/metadata/resourceVersion"),
            _ if media == "application/json-patch+json" => None,
            _ => doc.pointer("/metadata/resourceVersion"),
        }
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty());
        let dry_run = q.get("dryRun") == Some("All");
        for _ in 0..MAX_RETRIES {
            let old = self.load(t, &name)?;
            let current = scale::to_scale(&paths, &old);
            let wanted = match media.as_str() {
                _ if *method == Method::PUT => doc.clone(),
                "application/json-patch+json" => json_patch_k8s(&current, &doc)?,
                _ => {
                    let mut v = current.clone();
                    json_patch::merge(&mut v, &doc);
                    v
                }
            };
            let replicas = scale::check(&wanted, &name)?;
            if let Some(rv) = wanted
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                && !rv.is_empty()
                && meta_str(&old, "resourceVersion") != Some(rv)
            {
                return Err(ApiError::conflict(&t.res.qualified(), &name));
            }
            let new = scale::with_replicas(&paths, &old, replicas);
            match self.commit_update(t, &old, new, dry_run).await {
                Ok((stored, _)) => {
                    return Ok(json_response(
                        StatusCode::OK,
                        &scale::to_scale(&paths, &stored),
                    ));
                }
                Err(e) if e.reason == "Conflict" && !precondition => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::conflict(&t.res.qualified(), &name))
    }

    async fn delete(
        &self,
        t: &Target,
        q: &Query,
        body: &Bytes,
        headers: &HeaderMap,
    ) -> Result<Response, ApiError> {
        if t.sub.is_some() {
            return Err(ApiError::method_not_allowed());
        }
        let name = t.name.clone().unwrap_or_default();
        let opts: Value = if body.is_empty() {
            json!({})
        } else {
            serde_json::from_slice(body).unwrap_or(json!({}))
        };
        let dry_run = q.get("dryRun") == Some("All")
            || opts
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|v| v == "All"));
        for _ in 0..MAX_RETRIES {
            let old = self.load(t, &name)?;
            if let Some(pre) = opts.get("preconditions") {
                let uid_ok = pre
                    .get("uid")
                    .and_then(Value::as_str)
                    .is_none_or(|u| meta_str(&old, "uid") == Some(u));
                let rv_ok = pre
                    .get("resourceVersion")
                    .and_then(Value::as_str)
                    .is_none_or(|r| meta_str(&old, "resourceVersion") == Some(r));
                if !uid_ok || !rv_ok {
                    return Err(ApiError::new(
                        409,
                        "Conflict",
                        format!(
                            "Operation cannot be fulfilled on {} \"{name}\": Precondition failed",
                            t.res.qualified()
                        ),
                    ));
                }
            }
            if dry_run {
                return Ok(json_response(StatusCode::OK, &Self::render(&old, headers)));
            }
            let has_finalizers = old
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            let key = Self::key(t, &name);
            let pre = Precondition::ModRev(rv_of(&old));
            if has_finalizers {
                if old.pointer("/metadata/deletionTimestamp").is_some() {
                    return Ok(json_response(StatusCode::OK, &Self::render(&old, headers)));
                }
                let mut new = old.clone();
                mark_deleting(meta_mut(&mut new));
                match self.store.write(key, Op::Put(new), pre).await {
                    Ok(c) => {
                        return Ok(json_response(
                            StatusCode::OK,
                            &Self::render(&c.object, headers),
                        ));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(store_err(e)),
                }
            }
            match self.store.write(key, Op::Delete, pre).await {
                Ok(c) => {
                    if t.res.kind == "Namespace" && t.res.group.is_empty() {
                        self.purge_namespace(&t.cluster, &name).await?;
                    }
                    self.collect_dependents(&t.cluster, &c.object, gc::orphans(&opts))
                        .await?;
                    return Ok(json_response(
                        StatusCode::OK,
                        &Self::render(&c.object, headers),
                    ));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(store_err(e)),
            }
        }
        Err(ApiError::conflict(&t.res.qualified(), &name))
    }

    /// The namespace controller's job, done inline: delete everything in a deleted namespace.
    async fn purge_namespace(&self, cluster: &str, ns: &str) -> Result<(), ApiError> {
        for res in registry::all().into_iter().filter(|r| r.namespaced) {
            let t = Target {
                cluster: cluster.to_owned(),
                res,
                namespace: Some(ns.to_owned()),
                name: None,
                sub: None,
                restricted: None,
            };
            let page = self
                .store
                .list(&Self::prefix(&t), None, None)
                .map_err(store_err)?;
            for (key, obj) in page.items {
                let op = if obj.pointer("/metadata/finalizers").is_some() {
                    let mut new = (*obj).clone();
                    mark_deleting(meta_mut(&mut new));
                    Op::Put(new)
                } else {
                    Op::Delete
                };
                match self
                    .store
                    .write(key, op, Precondition::ModRev(rv_of(&obj)))
                    .await
                {
                    Ok(_) | Err(StoreError::Conflict { .. }) => {}
                    Err(e) => return Err(store_err(e)),
                }
            }
        }
        Ok(())
    }

    async fn delete_collection(&self, t: &Target, q: &Query) -> Result<Response, ApiError> {
        let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or_default())?;
        let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or_default())?;
        let page = self
            .store
            .list(&Self::prefix(t), None, None)
            .map_err(store_err)?;
        let mut deleted = Vec::new();
        for (_, obj) in page
            .items
            .iter()
            .filter(|(_, o)| labels.matches(o) && fields.matches(o))
        {
            let name = meta_str(obj, "name").unwrap_or_default().to_owned();
            let ns = meta_str(obj, "namespace").map(str::to_owned);
            let one = Target {
                cluster: t.cluster.clone(),
                res: t.res,
                namespace: ns,
                name: Some(name),
                sub: None,
                restricted: t.restricted.clone(),
            };
            if let Ok(resp) = Box::pin(self.delete(&one, q, &Bytes::new(), &HeaderMap::new())).await
            {
                let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap_or_default();
                if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                    deleted.push(v);
                }
            }
        }
        Ok(json_response(
            StatusCode::OK,
            &json!({"kind": format!("{}List", t.res.kind), "apiVersion": t.res.api_version(),
                    "metadata": {"resourceVersion": self.store.current_rev().to_string()}, "items": deleted}),
        ))
    }

    async fn watch(
        &self,
        t: &Target,
        q: &Query,
        headers: &HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> Result<Response, ApiError> {
        let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or_default())?;
        let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or_default())?;
        let rv_param = q.get("resourceVersion").unwrap_or_default();
        let send_initial = q.flag("sendInitialEvents");
        let bookmarks = q.flag("allowWatchBookmarks");
        if send_initial && !bookmarks {
            return Err(ApiError::invalid(
                "sendInitialEvents requires allowWatchBookmarks=true",
            ));
        }
        let timeout = q
            .get("timeoutSeconds")
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(1800);
        let from: Option<u64> = match rv_param {
            "" | "0" => None,
            s => Some(
                s.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))?,
            ),
        };
        let prefix = Self::prefix(t);
        let partial = wants(headers, "PartialObjectMetadata");
        let (sink, body) = watch_channel(
            Arc::clone(&self.watch_counters),
            self.options.watch_stall_timeout,
        );
        let closer = extensions.get::<ConnectionCloser>().cloned();
        let res = t.res;
        let interval = self.options.bookmark_interval;
        let store = self.store.clone();
        let as_table = wants(headers, "Table");
        let line = move |kind: &str, obj: &Value, json: Option<&Bytes>| -> Bytes {
            let mut out = Vec::with_capacity(64 + json.map_or(256, Bytes::len));
            out.extend_from_slice(b"{\"type\":\"");
            out.extend_from_slice(kind.as_bytes());
            out.extend_from_slice(b"\",\"object\":");
            match (partial, json) {
                _ if as_table => {
                    let meta = json!({"resourceVersion": meta_str(obj, "resourceVersion").unwrap_or_default()});
                    let t = table::table(res, &[obj], meta, table::Include::Metadata);
                    out.extend_from_slice(&serde_json::to_vec(&t).unwrap_or_default());
                }
                (false, Some(j)) => out.extend_from_slice(j),
                (true, _) => out.extend_from_slice(
                    &serde_json::to_vec(&partial_metadata(obj)).unwrap_or_default(),
                ),
                (false, None) => {
                    out.extend_from_slice(&serde_json::to_vec(obj).unwrap_or_default())
                }
            }
            out.extend_from_slice(b"}\n");
            Bytes::from(out)
        };
        let bookmark = move |rv: u64, initial_end: bool| -> Bytes {
            let mut m = json!({"resourceVersion": rv.to_string()});
            if initial_end {
                m["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            let ev = json!({"type": "BOOKMARK", "object": {"kind": res.kind, "apiVersion": res.api_version(), "metadata": m}});
            let mut v = serde_json::to_vec(&ev).unwrap_or_default();
            v.push(b'\n');
            Bytes::from(v)
        };
        let expired = |msg: String| -> Bytes {
            let ev = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": msg, "reason": "Expired", "code": 410}});
            let mut v = serde_json::to_vec(&ev).unwrap_or_default();
            v.push(b'\n');
            Bytes::from(v)
        };
        // Initial state, when asked for (RV unset/0, or sendInitialEvents): one snapshot, whose
        // events are rendered one at a time as the client takes them.
        let (initial, start_rev) = if from.is_none() || send_initial {
            let page = store.list(&prefix, None, None).map_err(store_err)?;
            let rev = page.rev;
            (Some(page), rev)
        } else {
            (None, from.unwrap_or(0))
        };
        let watch = store.watch(&prefix, start_rev);
        tokio::spawn(async move {
            let ended = async {
                if let Some(page) = initial {
                    for (_, obj) in page
                        .items
                        .iter()
                        .filter(|(_, o)| labels.matches(o) && fields.matches(o))
                    {
                        sink.send(line("ADDED", obj, None)).await?;
                    }
                    if send_initial {
                        sink.send(bookmark(page.rev, true)).await?;
                    }
                }
                let mut watch = match watch {
                    Ok(w) => w,
                    Err(e) => {
                        let message = match e {
                            StoreError::Expired { requested, oldest } => {
                                format!("too old resource version: {requested} ({oldest})")
                            }
                            e => format!("too old resource version: {start_rev} ({e})"),
                        };
                        sink.send(expired(message)).await?;
                        return Ok(());
                    }
                };
                let deadline = tokio::time::sleep(Duration::from_secs(timeout));
                tokio::pin!(deadline);
                let mut ticker = tokio::time::interval(interval);
                ticker.tick().await;
                loop {
                    tokio::select! {
                        () = &mut deadline => return Ok(()),
                        _ = ticker.tick(), if bookmarks => {
                            sink.send(bookmark(watch.progress(), false)).await?;
                        }
                        ev = watch.next() => {
                            let ev = match ev {
                                Ok(ev) => ev,
                                // Fell out of the window, or the store closed: the client
                                // re-watches from its last revision (or relists on 410).
                                Err(WatchEnd::Lagged | WatchEnd::Closed) => return Ok(()),
                            };
                            // Labels are kept with the event; other fields need the object.
                            let by_fields = !fields.is_empty();
                            let now_in = labels.matches_labels(ev.labels.as_ref())
                                && (!by_fields || fields.matches(&ev.object()));
                            let kind = match ev.kind {
                                EventKind::Added if now_in => Some("ADDED"),
                                EventKind::Deleted if now_in => Some("DELETED"),
                                EventKind::Modified => {
                                    let was_in = ev.prev_json.is_some()
                                        && labels.matches_labels(ev.prev_labels.as_ref())
                                        && (!by_fields || ev.prev().is_some_and(|p| fields.matches(&p)));
                                    match (was_in, now_in) {
                                        (true, true) => Some("MODIFIED"),
                                        (false, true) => Some("ADDED"),
                                        (true, false) => Some("DELETED"),
                                        (false, false) => None,
                                    }
                                }
                                _ => None,
                            };
                            if let Some(kind) = kind {
                                let decoded = (as_table || partial).then(|| ev.object());
                                let obj = decoded.as_ref().unwrap_or(&Value::Null);
                                sink.send(line(kind, obj, Some(&ev.object_json))).await?;
                            }
                        }
                        () = sink.closed() => return Ok(()),
                    }
                }
            };
            let ended: Result<(), SinkEnd> = ended.await;
            if let Err(SinkEnd::Stalled) = ended {
                // kube-apiserver closes a watcher that cannot keep up; the client re-watches.
                tracing::info!(
                    resource = res.plural,
                    "closing a watch whose client stopped reading"
                );
                sink.stall();
                if let Some(closer) = closer {
                    closer.close();
                }
            }
        });
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-cache, private")
            .body(Body::from_stream(body))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()))
    }
}

/// Events one watcher may have queued for its client (kube-apiserver's cacheWatcher buffers a
/// bounded number too). When the queue stays full for [`ServerOptions::watch_stall_timeout`],
/// the watch is closed.
pub const WATCH_BUFFER_EVENTS: usize = 100;
/// Bytes one watcher may have queued for its client. An event larger than this is queued alone.
pub const WATCH_BUFFER_BYTES: usize = 1024 * 1024;

/// Counters of the open watches, for metrics and tests.
#[derive(Debug, Default)]
struct WatchCounters {
    open: AtomicUsize,
    queued_events: AtomicUsize,
    queued_bytes: AtomicUsize,
    stalled: AtomicU64,
}

/// A snapshot of the watch counters ([`ApiServer::watch_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchStats {
    /// Watches being served.
    pub open: usize,
    /// Events queued for clients, over all watches.
    pub queued_events: usize,
    /// Bytes queued for clients, over all watches.
    pub queued_bytes: usize,
    /// Watches closed since start because their client stopped reading.
    pub closed_stalled: u64,
}

/// Lets a handler close the connection its request came on (set by [`crate::serve`]): a watch
/// whose client stopped reading would otherwise keep its connection, and hyper's buffers, open.
#[derive(Debug, Clone, Default)]
pub struct ConnectionCloser(Arc<tokio::sync::Notify>);

impl ConnectionCloser {
    /// Ask the connection to close.
    pub fn close(&self) {
        self.0.notify_one();
    }

    /// Resolves once [`ConnectionCloser::close`] has been called.
    pub async fn closed(&self) {
        self.0.notified().await;
    }
}

/// Why a watch could not queue an event.
#[derive(Debug)]
enum SinkEnd {
    /// The client went away.
    Gone,
    /// The queue stayed full: the client stopped reading.
    Stalled,
}

/// What a watch and its response body share: the queue's byte budget and the stall flag.
#[derive(Debug)]
struct Queue {
    bytes: tokio::sync::Semaphore,
    stalled: AtomicBool,
    counters: Arc<WatchCounters>,
}

impl Queue {
    fn permits(len: usize) -> u32 {
        u32::try_from(len.clamp(1, WATCH_BUFFER_BYTES)).unwrap_or(u32::MAX)
    }

    /// An event left the queue.
    fn taken(&self, len: usize) {
        self.bytes.add_permits(Self::permits(len) as usize);
        self.counters.queued_events.fetch_sub(1, Ordering::AcqRel);
        self.counters.queued_bytes.fetch_sub(len, Ordering::AcqRel);
    }
}

/// The watch's end of its bounded queue.
struct Sink {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    queue: Arc<Queue>,
    stall_timeout: Duration,
}

impl Sink {
    /// Queue `chunk`, waiting at most the stall timeout for room.
    async fn send(&self, chunk: Bytes) -> Result<(), SinkEnd> {
        let room = async {
            let permits = self
                .queue
                .bytes
                .acquire_many(Queue::permits(chunk.len()))
                .await
                .map_err(|_| SinkEnd::Gone)?;
            let slot = self.tx.reserve().await.map_err(|_| SinkEnd::Gone)?;
            Ok((permits, slot))
        };
        let (permits, slot) = tokio::time::timeout(self.stall_timeout, room)
            .await
            .map_err(|_| SinkEnd::Stalled)??;
        permits.forget();
        let counters = &self.queue.counters;
        counters.queued_events.fetch_add(1, Ordering::AcqRel);
        counters
            .queued_bytes
            .fetch_add(chunk.len(), Ordering::AcqRel);
        slot.send(chunk);
        Ok(())
    }

    /// Resolves when the client has gone.
    async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Mark the watch as closed for a stalled client: its body ends with an error.
    fn stall(&self) {
        self.queue.stalled.store(true, Ordering::Release);
        self.queue.counters.stalled.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.queue.counters.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The response body of a watch: the client's end of the queue.
struct WatchBody {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    queue: Arc<Queue>,
    done: bool,
}

impl futures_util::Stream for WatchBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if self.done {
            return std::task::Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            std::task::Poll::Ready(Some(chunk)) => {
                self.queue.taken(chunk.len());
                std::task::Poll::Ready(Some(Ok(chunk)))
            }
            std::task::Poll::Ready(None) => {
                self.done = true;
                if self.queue.stalled.load(Ordering::Acquire) {
                    // An error, not a clean end: hyper drops the connection, and the client
                    // sees a broken stream and re-watches.
                    std::task::Poll::Ready(Some(Err(std::io::Error::other(
                        "watch closed: the client stopped reading",
                    ))))
                } else {
                    std::task::Poll::Ready(None)
                }
            }
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl Drop for WatchBody {
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(chunk) = self.rx.try_recv() {
            self.queue.taken(chunk.len());
        }
    }
}

/// A watch's bounded queue: at most [`WATCH_BUFFER_EVENTS`] events and [`WATCH_BUFFER_BYTES`].
fn watch_channel(counters: Arc<WatchCounters>, stall_timeout: Duration) -> (Sink, WatchBody) {
    let (tx, rx) = tokio::sync::mpsc::channel(WATCH_BUFFER_EVENTS);
    counters.open.fetch_add(1, Ordering::AcqRel);
    let queue = Arc::new(Queue {
        bytes: tokio::sync::Semaphore::new(WATCH_BUFFER_BYTES),
        stalled: AtomicBool::new(false),
        counters,
    });
    (
        Sink {
            tx,
            queue: Arc::clone(&queue),
            stall_timeout,
        },
        WatchBody {
            rx,
            queue,
            done: false,
        },
    )
}

/// The response (or error), with a `Warning: 299 - "…"` header per warning, as kube-apiserver
/// sends them (the text quoted and escaped).
fn with_warnings(result: Result<Response, ApiError>, warnings: &[String]) -> Response {
    let mut resp = result.unwrap_or_else(IntoResponse::into_response);
    for w in warnings {
        if let Ok(v) = header::HeaderValue::from_str(&format!("299 - {w:?}")) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn check_sub(t: &Target) -> Result<(), ApiError> {
    match t.sub.as_deref() {
        None => Ok(()),
        Some("status") if t.res.has_status => Ok(()),
        Some(_) => Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

/// A `Content-Type` without its parameters, lower-cased.
fn media_type(ct: &str) -> String {
    ct.split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Refuse browser requests from other origins (CSRF, and reading through a victim's browser): an
/// `Origin` other than the server's own (the `Host` it was reached at), or a `Sec-Fetch-Site`
/// other than `same-origin` or `none` (typed by the user). Other clients send neither header;
/// this server serves no pages, so no legitimate browser request comes from elsewhere.
fn check_origin(headers: &HeaderMap, uri: &axum::http::Uri) -> Result<(), ApiError> {
    let refuse = |what: String| {
        Err(ApiError::new(
            403,
            "Forbidden",
            format!("forbidden: cross-origin requests are not allowed ({what})"),
        ))
    };
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.to_str(), Ok("same-origin" | "none"))
    {
        return refuse(format!(
            "Sec-Fetch-Site: {}",
            String::from_utf8_lossy(site.as_bytes())
        ));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    let origin_host = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("https://")
            .or_else(|| o.strip_prefix("http://"))
    });
    match (origin_host, host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) => Ok(()),
        _ => refuse(format!(
            "Origin: {}",
            String::from_utf8_lossy(origin.as_bytes())
        )),
    }
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// kube-apiserver's validation of RBAC objects that authorization relies on: a binding's
/// `roleRef` cannot change (re-pointing a binding would silently change what its subjects may
/// do), and a RoleBinding or ClusterRoleBinding names a Role or ClusterRole it may refer to.
fn rbac_checks(t: &Target, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    if !matches!(t.res.plural, "rolebindings" | "clusterrolebindings") {
        return Ok(());
    }
    let name = meta_str(obj, "name").unwrap_or_default();
    let invalid = |field: &str, value: &Value, detail: &str| {
        let value = value.to_string();
        ApiError::invalid(format!(
            "{}.{} {name:?} is invalid: {field}: Invalid value: {value}: {detail}",
            t.res.kind, t.res.group
        ))
        .with_details(json!({"name": name, "group": t.res.group, "kind": t.res.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": format!("Invalid value: {value}: {detail}"), "field": field}]}))
    };
    let role_ref = &obj["roleRef"];
    if let Some(old) = old
        && old["roleRef"] != *role_ref
    {
        return Err(invalid("roleRef", role_ref, "cannot change roleRef"));
    }
    let kinds: &[&str] = if t.res.plural == "rolebindings" {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !role_ref["kind"]
        .as_str()
        .is_some_and(|k| kinds.contains(&k))
    {
        return Err(invalid(
            "roleRef.kind",
            &role_ref["kind"],
            &format!("supported values: {}", kinds.join(", ")),
        ));
    }
    if role_ref["name"].as_str().is_none_or(str::is_empty) {
        return Err(invalid(
            "roleRef.name",
            &role_ref["name"],
            "name is required",
        ));
    }
    Ok(())
}

/// Where the request for path segments `segs` (without a logical-cluster prefix) goes: read by
/// [`RequestInfo`], as authorization reads it, so the two cannot disagree.
fn parse_target(cluster: &str, segs: &[&str]) -> Result<Target, ApiError> {
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let info = RequestInfo::from_segments(&Method::GET, segs, None);
    if !info.resource_request || info.parts > 3 {
        return Err(not_found());
    }
    let res = registry::lookup(&info.group, &info.version, &info.resource).ok_or_else(not_found)?;
    if !res.namespaced && info.scoped {
        return Err(not_found());
    }
    let some = |s: String| (!s.is_empty()).then_some(s);
    Ok(Target {
        cluster: cluster.to_owned(),
        res,
        namespace: if info.scoped {
            some(info.namespace)
        } else {
            None
        },
        name: some(info.name),
        sub: some(info.subresource),
        restricted: None,
    })
}

/// Refuse a YAML body whose flow collections may nest deeper than [`limits::MAX_BODY_DEPTH`]
/// before the (quadratic in that nesting) YAML parser sees it.
fn yaml_prescan(body: &[u8]) -> Result<(), ApiError> {
    match limits::yaml_flow_too_deep(body, limits::MAX_BODY_DEPTH) {
        Some(line) => Err(ApiError::bad_request(format!(
            "the body of the request could not be decoded: yaml: line {line}: flow collections nest deeper than {} levels",
            limits::MAX_BODY_DEPTH
        ))),
        None => Ok(()),
    }
}

/// JSON patch with the Kubernetes (evanphx/json-patch) quirk: `test` of a missing path against
/// `null` succeeds when the parent exists. The kube-rs finalizer helper depends on it.
///
/// Bounded as kube-apiserver bounds it: at most [`limits::MAX_JSON_PATCH_OPS`] operations (413)
/// and [`limits::MAX_JSON_PATCH_COPY`] bytes added by `copy` (422), so a patch cannot double the
/// document operation after operation. The nesting the operations can create is tracked too (an
/// upper bound from each operation's path and value), so a result too deep to store, or to drop
/// without overflowing the stack, is refused before it is built.
fn json_patch_k8s(doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    use json_patch::PatchOperation;
    use serde::Deserialize as _;
    let Value::Array(ops) = patch else {
        return Err(ApiError::bad_request(
            "json patch must be an array of operations",
        ));
    };
    if ops.len() > limits::MAX_JSON_PATCH_OPS {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "The allowed maximum operations in a JSON patch is {}, got {}",
                limits::MAX_JSON_PATCH_OPS,
                ops.len()
            ),
        ));
    }
    let ops = json_patch::Patch::deserialize(patch)
        .map_err(|e| ApiError::bad_request(format!("invalid json patch: {e}")))?;
    let rejected = |detail: String| {
        ApiError::invalid(format!(
            "the server rejected our request due to an error in our request: {detail}"
        ))
    };
    let tokens = |p: &str| p.matches('/').count();
    let mut out = doc.clone();
    let mut depth = limits::measure(&out, usize::MAX).1;
    let mut copied = 0usize;
    for (i, op) in ops.iter().enumerate() {
        match op {
            PatchOperation::Test(t) if t.value.is_null() => {
                // Absent or null passes, whatever the value of the ops before this one made it.
                let path = t.path.as_str();
                match out.pointer(path) {
                    None | Some(Value::Null) => continue,
                    Some(_) => return Err(rejected(format!("testing value {path} failed"))),
                }
            }
            PatchOperation::Add(json_patch::AddOperation { path, value })
            | PatchOperation::Replace(json_patch::ReplaceOperation { path, value }) => {
                depth = depth.max(tokens(path.as_str()) + limits::measure(value, usize::MAX).1);
            }
            PatchOperation::Copy(c) => {
                if let Some(source) = out.pointer(c.from.as_str()) {
                    let (size, d) = limits::measure(source, limits::MAX_JSON_PATCH_COPY - copied);
                    copied = copied.saturating_add(size);
                    if copied > limits::MAX_JSON_PATCH_COPY {
                        return Err(rejected(format!(
                            "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {}",
                            limits::MAX_JSON_PATCH_COPY
                        )));
                    }
                    depth = depth.max(tokens(c.path.as_str()) + d);
                }
            }
            PatchOperation::Move(m) => {
                // The moved value is at most as deep as the document below `from`.
                depth = depth
                    .max(tokens(m.path.as_str()) + depth.saturating_sub(tokens(m.from.as_str())));
            }
            PatchOperation::Remove(_) | PatchOperation::Test(_) => {}
        }
        if depth > limits::MAX_OBJECT_DEPTH {
            return Err(rejected(format!(
                "operation {i} would nest the object deeper than {} levels",
                limits::MAX_OBJECT_DEPTH
            )));
        }
        json_patch::patch_unsafe(&mut out, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            rejected(e.to_string())
        })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_moves_with_spec_like_content_only() {
        let a = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"r": 1}, "status": {"s": 1}});
        let relabelled = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "labels": {"x": "2"}}, "spec": {"r": 1}, "status": {"s": 2}});
        assert!(
            !spec_differs(&a, &relabelled, true),
            "metadata and status do not count"
        );
        assert!(
            spec_differs(&a, &relabelled, false),
            "status counts without a status subresource"
        );
        let respec = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"r": 2}, "status": {"s": 1}});
        assert!(spec_differs(&a, &respec, true));
        let extra = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"r": 1}, "data": {}, "status": {"s": 1}});
        assert!(spec_differs(&a, &extra, true), "an added top-level field");
        assert!(spec_differs(&extra, &a, true), "a removed top-level field");
    }

    #[test]
    fn the_noop_rule_ignores_managed_fields_times_only() {
        let mf = |time: &str, op: &str| json!([{"manager": "m", "operation": op, "time": time, "fieldsV1": {"f:spec": {}}}]);
        let obj = |time: &str, op: &str, r: i64| json!({"metadata": {"name": "a", "managedFields": mf(time, op)}, "spec": {"r": r}});
        assert!(same_for_noop(
            &obj("2026-01-01T00:00:00Z", "Apply", 1),
            &obj("2026-01-02T00:00:00Z", "Apply", 1)
        ));
        assert!(!same_for_noop(
            &obj("2026-01-01T00:00:00Z", "Apply", 1),
            &obj("2026-01-01T00:00:00Z", "Update", 1)
        ));
        assert!(!same_for_noop(
            &obj("2026-01-01T00:00:00Z", "Apply", 1),
            &obj("2026-01-01T00:00:00Z", "Apply", 2)
        ));
        let without = json!({"metadata": {"name": "a"}, "spec": {"r": 1}});
        assert!(!same_for_noop(
            &obj("2026-01-01T00:00:00Z", "Apply", 1),
            &without
        ));
        assert!(!same_for_noop(
            &without,
            &obj("2026-01-01T00:00:00Z", "Apply", 1)
        ));
    }

    #[test]
    fn json_patch_test_of_missing_path_against_null_succeeds() {
        let doc = json!({"metadata":{"name":"a"}});
        let patch = json!([{"op":"test","path":"/metadata/finalizers","value":null},
                           {"op":"add","path":"/metadata/finalizers","value":["x"]}]);
        let out = json_patch_k8s(&doc, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["x"]));
    }

    #[test]
    fn paths_parse_into_namespaced_cluster_scoped_and_subresource_targets() {
        let t = parse_target(
            "@",
            &[
                "apis",
                "apps",
                "v1",
                "namespaces",
                "d",
                "deployments",
                "w",
                "status",
            ],
        )
        .unwrap();
        assert_eq!(
            (t.namespace.as_deref(), t.name.as_deref(), t.sub.as_deref()),
            (Some("d"), Some("w"), Some("status"))
        );
        let t = parse_target("@", &["api", "v1", "namespaces", "d", "status"]).unwrap();
        assert_eq!(
            (t.res.plural, t.name.as_deref(), t.sub.as_deref()),
            ("namespaces", Some("d"), Some("status"))
        );
        let t = parse_target("@", &["api", "v1", "namespaces", "d"]).unwrap();
        assert_eq!((t.res.plural, t.name.as_deref()), ("namespaces", Some("d")));
        assert!(
            parse_target(
                "@",
                &[
                    "apis",
                    "cluster.karmada.io",
                    "v1alpha1",
                    "namespaces",
                    "x",
                    "clusters"
                ]
            )
            .is_err()
        );
    }

    #[test]
    fn percent_decoding_handles_selectors() {
        assert_eq!(
            percent_decode("app%3Dweb%2Ctier+in+%28a%29"),
            "app=web,tier in (a)"
        );
    }

    /// Send one request through `router`: status, headers and JSON body.
    async fn send(
        router: &axum::Router,
        method: &str,
        uri: &str,
        body: &str,
    ) -> (u16, HeaderMap, Value) {
        use tower::ServiceExt as _;
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            code,
            headers,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn a_full_disk_is_507_storage_is_full_and_writes_recover_once_space_is_freed() {
        let dir = tempfile::tempdir().unwrap();
        let full = Arc::new(AtomicBool::new(false));
        let store = Store::open_with_disk_full_switch(dir.path(), Arc::clone(&full)).unwrap();
        let router = ApiServer::new(store, ServerOptions::default()).router();
        let cms = "/api/v1/namespaces/default/configmaps";
        let cm = |name: &str| json!({"metadata": {"name": name}, "data": {"k": "v"}}).to_string();
        assert_eq!(send(&router, "POST", cms, &cm("before")).await.0, 201);

        full.store(true, Ordering::Release);
        for name in ["refused-1", "refused-2"] {
            let (code, _, status) = send(&router, "POST", cms, &cm(name)).await;
            assert_eq!(code, 507, "{status}");
            assert_eq!(status["kind"], "Status");
            assert_eq!(status["status"], "Failure");
            assert_eq!(status["code"], 507);
            assert_eq!(status["reason"], "InsufficientStorage");
            let message = status["message"].as_str().unwrap();
            assert!(message.starts_with("storage is full"), "{message}");
            let dir_name = dir.path().to_string_lossy();
            assert!(!message.contains(&*dir_name) && !message.contains("redb"));
        }

        // Space is freed: no restart, the next write succeeds and nothing acknowledged is lost.
        full.store(false, Ordering::Release);
        assert_eq!(send(&router, "POST", cms, &cm("after")).await.0, 201);
        let (code, _, list) = send(&router, "GET", cms, "").await;
        assert_eq!(code, 200);
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        assert_eq!(names, ["after", "before"]);
    }
}
