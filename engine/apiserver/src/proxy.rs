//! Karmada's cluster proxy: `/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy/{path}`
//! serves `{path}` (with the request's query) from member cluster `{name}`, which is what
//! karmadactl's member-scope verbs (`get --operation-scope members`, `top`, `promote`) use as
//! each member's API server.
//!
//! As in Karmada's aggregated API server (`pkg/registry/cluster/storage/proxy.go`,
//! `pkg/util/proxy`):
//! - the Cluster must exist (`404 NotFound` otherwise);
//! - `{path}` is joined to the member's endpoint with its `.` and `..` segments resolved, so it
//!   cannot climb out of the endpoint's path;
//! - the request goes on with the member's credentials in place of the caller's (the caller's
//!   `Authorization` and `Impersonate-*` headers are dropped), and the member's answer streams
//!   back as it is: status, body, watch streams included.
//!
//! How a member is reached depends on its Cluster:
//! - a **simulated member** (`spec.apiEndpoint` is `/clusters/<logical>`, a logical cluster of
//!   this server, as `flotilla up` registers them) is served in process by that logical cluster:
//!   no network, no credentials;
//! - a **Push member** is reached over HTTPS (or plain HTTP when its endpoint says so) with the
//!   credentials of its Secret (`spec.secretRef`): Karmada's `token` + `caBundle` with
//!   `spec.apiEndpoint`, or a whole kubeconfig under key `kubeconfig` (inline data only: token or
//!   client certificate, CA data); `spec.insecureSkipTLSVerification` turns off server
//!   certificate checks. One connection per request (Karmada disables keep-alives too), a
//!   connect timeout of [`CONNECT_TIMEOUT`], a request body of at most 3 MiB
//!   ([`MAX_BODY`], the server's own limit);
//! - a **Pull member** cannot be reached: Karmada needs a tunnel (ANP) for those, which this
//!   server does not run, so the answer is `503 ServiceUnavailable` saying so.
//!
//! Errors name the Cluster and the Secret, never what the Secret holds. Connection upgrades
//! (`exec`, `attach`, `port-forward`) are not proxied.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

use crate::error::ApiError;
use crate::limits::{self, MAX_BODY};
use crate::server::ApiServer;

/// How long connecting to a member (TCP and TLS handshake) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a member may take to start answering (a watch answers at once).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// The methods the proxy passes on (Karmada's `proxyMethods`).
const METHODS: &[Method] = &[
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::HEAD,
    Method::OPTIONS,
];
/// Request headers that are the caller's own and never reach the member (besides the
/// hop-by-hop ones).
const CALLER_HEADERS: &[&str] = &["authorization", "cookie", "host", "origin"];
/// Hop-by-hop headers (RFC 9110 §7.6.1), dropped in both directions.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A parsed proxy request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProxyPath {
    /// The logical cluster holding the Cluster object (the root, or `/clusters/<logical>/`).
    pub logical: String,
    /// The Cluster's name.
    pub cluster: String,
    /// The member path: starts with `/`, dot segments resolved, still percent-encoded.
    pub path: String,
}

/// Whether `path` (a request path) is a cluster proxy request: `None` when it is not; the parsed
/// path, or the error to answer, when it is.
pub(crate) fn parse(path: &str, root: &str) -> Option<Result<ProxyPath, ApiError>> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (logical, rest) = match segs.as_slice() {
        ["clusters", logical, rest @ ..] => ((*logical).to_owned(), rest),
        rest => (root.to_owned(), rest),
    };
    let [
        "apis",
        "cluster.karmada.io",
        "v1alpha1",
        "clusters",
        name,
        "proxy",
        tail @ ..,
    ] = rest
    else {
        return None;
    };
    let cluster = crate::server::percent_decode(name);
    if !is_dns_label_path(&cluster) || (logical != root && !is_dns_label_path(&logical)) {
        return Some(Err(ApiError::bad_request(format!(
            "invalid cluster name {cluster:?}"
        ))));
    }
    Some(Ok(ProxyPath {
        logical,
        cluster,
        path: clean(tail),
    }))
}

/// `/` + `segs` with empty and `.` segments dropped and each `..` removing the segment before it
/// (never above the root), as Go's `path.Join` under the endpoint does. A segment that decodes
/// to `.` or `..` counts as one.
fn clean(segs: &[&str]) -> String {
    let mut out: Vec<&str> = Vec::new();
    for s in segs {
        match crate::server::percent_decode(s).as_str() {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            _ => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

/// A DNS-1123 subdomain (what Cluster names and logical cluster names are).
fn is_dns_label_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// The logical cluster a simulated member's `spec.apiEndpoint` names: `/clusters/<name>`.
pub(crate) fn logical_endpoint(endpoint: &str) -> Option<&str> {
    let name = endpoint.strip_prefix("/clusters/")?.trim_end_matches('/');
    is_dns_label_path(name).then_some(name)
}

fn unavailable(message: impl Into<String>) -> ApiError {
    ApiError::new(503, "ServiceUnavailable", message)
}

impl ApiServer {
    /// Serve a cluster proxy request (authentication has already passed).
    pub(crate) async fn proxy(&self, p: ProxyPath, req: Request<Body>) -> Response {
        match self.proxy_inner(p, req).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        }
    }

    async fn proxy_inner(&self, p: ProxyPath, req: Request<Body>) -> Result<Response, ApiError> {
        if !METHODS.contains(req.method()) {
            return Err(ApiError::method_not_allowed());
        }
        let cluster = self
            .store()
            .get(&format!(
                "/{}/cluster.karmada.io/clusters/{}",
                p.logical, p.cluster
            ))
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map(|(_, obj)| obj)
            .ok_or_else(|| ApiError::not_found("clusters.cluster.karmada.io", &p.cluster))?;
        let spec = &cluster["spec"];
        let text = |k: &str| spec.get(k).and_then(Value::as_str).unwrap_or("");
        if text("syncMode") == "Pull" {
            return Err(unavailable(format!(
                "cluster {:?} is in Pull mode and not reachable from the control plane: proxying to Pull clusters needs a tunnel, which this control plane does not run",
                p.cluster
            )));
        }
        let endpoint = text("apiEndpoint");
        if let Some(logical) = logical_endpoint(endpoint) {
            return Ok(self.proxy_local(logical, &p.path, req).await);
        }
        if is_upgrade(req.headers()) {
            return Err(ApiError::bad_request(
                "connection upgrades (exec, attach, port-forward) are not supported by the cluster proxy",
            ));
        }
        let target = self.member_target(&p, spec)?;
        forward(target, &p.path, req).await
    }

    /// A simulated member: the same server's logical cluster `logical`, in process.
    async fn proxy_local(&self, logical: &str, path: &str, req: Request<Body>) -> Response {
        let (mut parts, body) = req.into_parts();
        let pq = match parts.uri.query() {
            Some(q) => format!("/clusters/{logical}{path}?{q}"),
            None => format!("/clusters/{logical}{path}"),
        };
        match pq.parse::<Uri>() {
            Ok(uri) => parts.uri = uri,
            Err(_) => return ApiError::bad_request("invalid proxy path").into_response(),
        }
        let req = Request::from_parts(parts, body);
        // The proxied request is authorized too, as a request to the member itself.
        if let Err(e) = self.authorize(&req) {
            return e.into_response();
        }
        self.serve(req).await
    }

    /// Where and how to reach Push member `p.cluster`: from its `spec` and its Secret.
    fn member_target(&self, p: &ProxyPath, spec: &Value) -> Result<Target, ApiError> {
        let name = &p.cluster;
        let insecure = spec
            .get("insecureSkipTLSVerification")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let endpoint = spec
            .get("apiEndpoint")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(secret_ref) = spec.get("secretRef").filter(|v| v.is_object()) else {
            return Err(unavailable(format!(
                "cluster {name:?} has no spec.secretRef, so the control plane has no credentials to reach it"
            )));
        };
        let ns = secret_ref
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let sname = secret_ref.get("name").and_then(Value::as_str).unwrap_or("");
        let secret_name = format!("{ns}/{sname}");
        if !is_dns_label_path(ns) || !is_dns_label_path(sname) {
            return Err(unavailable(format!(
                "cluster {name:?}: spec.secretRef needs a valid namespace and name"
            )));
        }
        let secret = self
            .store()
            .get(&format!("/{}/core/secrets/{ns}/{sname}", p.logical))
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map(|(_, obj)| obj)
            .ok_or_else(|| {
                unavailable(format!(
                    "Secret {secret_name} (spec.secretRef of cluster {name:?}) not found"
                ))
            })?;
        let creds = Credentials::from_secret(&secret, &secret_name, endpoint, insecure)
            .map_err(unavailable)?;
        Target::new(creds, name).map_err(unavailable)
    }
}

/// Whether the request asks for a connection upgrade.
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        || headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

/// A Push member's credentials, as read from its Secret (and Cluster).
struct Credentials {
    /// The member's URL.
    server: String,
    /// Bearer token.
    token: Option<String>,
    /// PEM CA bundle to trust.
    ca: Option<Vec<u8>>,
    /// PEM client certificate and key.
    client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// Skip server certificate verification.
    insecure: bool,
    /// The name to verify the server certificate against, when not the host's.
    tls_server_name: Option<String>,
}

impl Credentials {
    /// From Secret `secret` (`namespace/name` in `secret_name`): key `kubeconfig`, else `token`
    /// (+ `caBundle`) with the Cluster's `endpoint`. Messages never quote the Secret's values.
    fn from_secret(
        secret: &Value,
        secret_name: &str,
        endpoint: &str,
        insecure: bool,
    ) -> Result<Self, String> {
        let value = |key: &str| -> Result<Option<Vec<u8>>, String> {
            if let Some(v) = secret
                .pointer(&format!("/data/{key}"))
                .and_then(Value::as_str)
            {
                return base64::engine::general_purpose::STANDARD
                    .decode(v.trim())
                    .map(Some)
                    .map_err(|_| format!("key `{key}` of Secret {secret_name} is not base64"));
            }
            Ok(secret
                .pointer(&format!("/stringData/{key}"))
                .and_then(Value::as_str)
                .map(|s| s.as_bytes().to_vec()))
        };
        let utf8 = |key: &str, b: Vec<u8>| {
            String::from_utf8(b)
                .map_err(|_| format!("key `{key}` of Secret {secret_name} is not UTF-8"))
        };
        if let Some(kc) = value("kubeconfig")? {
            let what = format!("key `kubeconfig` of Secret {secret_name}");
            let mut c = Self::from_kubeconfig(&utf8("kubeconfig", kc)?, &what)?;
            c.insecure |= insecure;
            if c.server.is_empty() {
                c.server = endpoint.to_owned();
            }
            return Ok(c);
        }
        let Some(token) = value("token")? else {
            return Err(format!(
                "Secret {secret_name} has neither a `kubeconfig` key nor a `token` key (with `caBundle`, or spec.insecureSkipTLSVerification)"
            ));
        };
        let token = utf8("token", token)?.trim().to_owned();
        if token.is_empty() {
            return Err(format!("key `token` of Secret {secret_name} is empty"));
        }
        let ca = value("caBundle")?.filter(|c| !c.is_empty());
        if ca.is_none() && !insecure {
            return Err(format!(
                "Secret {secret_name}: key `caBundle` is missing and spec.insecureSkipTLSVerification is false"
            ));
        }
        Ok(Credentials {
            server: endpoint.to_owned(),
            token: Some(token),
            ca,
            client_cert: None,
            insecure,
            tls_server_name: None,
        })
    }

    /// From a kubeconfig's current context: inline data only (the control plane reads no files
    /// and runs no credential plugins for a member).
    fn from_kubeconfig(text: &str, what: &str) -> Result<Self, String> {
        // The parser's own message may quote the text, so it is not passed on.
        let v: Value =
            serde_yaml::from_str(text).map_err(|_| format!("{what} is not a valid kubeconfig"))?;
        let find = |list: &str, name: &str| -> Value {
            v.get(list)
                .and_then(Value::as_array)
                .and_then(|l| {
                    l.iter()
                        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
                })
                .cloned()
                .unwrap_or(Value::Null)
        };
        let s = |x: &Value, p: &str| -> String {
            x.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let ctx_name = s(&v, "/current-context");
        let ctx = if ctx_name.is_empty() {
            v.pointer("/contexts/0").cloned().unwrap_or(Value::Null)
        } else {
            find("contexts", &ctx_name)
        };
        let cluster = find("clusters", &s(&ctx, "/context/cluster"));
        let user = find("users", &s(&ctx, "/context/user"));
        if cluster.is_null() {
            return Err(format!("{what}: the current context names no cluster"));
        }
        for (x, key) in [
            (&cluster, "/cluster/certificate-authority"),
            (&user, "/user/client-certificate"),
            (&user, "/user/client-key"),
            (&user, "/user/tokenFile"),
        ] {
            if !s(x, key).is_empty() {
                return Err(format!(
                    "{what} refers to a file ({}), which the control plane does not read; use inline data",
                    key.rsplit('/').next().unwrap_or(key)
                ));
            }
        }
        if user.pointer("/user/exec").is_some_and(|e| !e.is_null())
            || user
                .pointer("/user/auth-provider")
                .is_some_and(|e| !e.is_null())
        {
            return Err(format!(
                "{what} uses a credential plugin (exec or auth-provider), which the cluster proxy does not run"
            ));
        }
        let b64 = |x: &Value, key: &str| -> Result<Option<Vec<u8>>, String> {
            let raw = s(x, key);
            if raw.is_empty() {
                return Ok(None);
            }
            base64::engine::general_purpose::STANDARD
                .decode(raw.trim())
                .map(Some)
                .map_err(|_| {
                    format!(
                        "{what}: {} is not base64",
                        key.rsplit('/').next().unwrap_or(key)
                    )
                })
        };
        let client_cert = match (
            b64(&user, "/user/client-certificate-data")?,
            b64(&user, "/user/client-key-data")?,
        ) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => {
                return Err(format!(
                    "{what}: client-certificate-data and client-key-data go together"
                ));
            }
        };
        let token = Some(s(&user, "/user/token")).filter(|t| !t.trim().is_empty());
        let tls_server_name =
            Some(s(&cluster, "/cluster/tls-server-name")).filter(|t| !t.is_empty());
        Ok(Credentials {
            server: s(&cluster, "/cluster/server"),
            token,
            ca: b64(&cluster, "/cluster/certificate-authority-data")?,
            client_cert,
            insecure: cluster
                .pointer("/cluster/insecure-skip-tls-verify")
                .and_then(Value::as_bool)
                == Some(true),
            tls_server_name,
        })
    }
}

/// A resolved member: its address, the path its endpoint puts first, the TLS setup and the
/// `Authorization` to send.
struct Target {
    host: String,
    port: u16,
    /// `host[:port]`, for the `Host` header.
    authority: String,
    base_path: String,
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    authorization: Option<HeaderValue>,
}

impl Target {
    fn new(c: Credentials, cluster: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("cluster {cluster:?}: spec.apiEndpoint {why}");
        if c.server.is_empty() {
            return Err(bad("is empty"));
        }
        let uri: Uri = c.server.parse().map_err(|_| bad("is not a URL"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(bad("is not an http(s) URL")),
        };
        let authority = uri.authority().ok_or_else(|| bad("has no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let base_path = uri.path().trim_end_matches('/').to_owned();
        let authorization = match &c.token {
            Some(t) => Some(
                HeaderValue::from_str(&format!("Bearer {}", t.trim())).map_err(|_| {
                    format!("cluster {cluster:?}: the token is not a valid header value")
                })?,
            ),
            None => None,
        };
        let tls = if https {
            let name = c.tls_server_name.clone().unwrap_or_else(|| host.clone());
            let server_name = ServerName::try_from(name)
                .map_err(|_| bad("names a host that is not a valid TLS server name"))?;
            Some((tls_config(&c, cluster)?, server_name))
        } else {
            None
        };
        Ok(Target {
            host,
            port,
            authority: authority.as_str().to_owned(),
            base_path,
            tls,
            authorization,
        })
    }
}

/// The TLS client configuration for `c`: its CA bundle (or no checks when insecure) and its
/// client certificate.
fn tls_config(c: &Credentials, cluster: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if c.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = &c.ca {
            for cert in CertificateDer::pem_slice_iter(ca).flatten() {
                let _ = roots.add(cert);
            }
        }
        if roots.is_empty() {
            return Err(format!(
                "cluster {cluster:?}: the CA bundle of its Secret holds no usable PEM certificate"
            ));
        }
        builder.with_root_certificates(roots)
    };
    let mut config = match &c.client_cert {
        Some((cert, key)) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<_, _>>()
                .map_err(|_| {
                    format!("cluster {cluster:?}: the client certificate of its Secret is not PEM")
                })?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| {
                format!(
                    "cluster {cluster:?}: the client key of its Secret is not a PEM private key"
                )
            })?;
            builder.with_client_auth_cert(certs, key).map_err(|_| {
                format!(
                    "cluster {cluster:?}: the client certificate and key of its Secret do not match"
                )
            })?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `spec.insecureSkipTLSVerification`: any server certificate is accepted (signatures are still
/// checked, so the handshake itself is sound).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The I/O of one member connection, TLS or not.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// Connect to the member (TCP, then TLS when its endpoint is https).
async fn connect(t: &Target) -> Result<Box<dyn Io>, String> {
    let tcp = tokio::net::TcpStream::connect((t.host.as_str(), t.port))
        .await
        .map_err(|e| format!("dial tcp {}: {e}", t.authority))?;
    let _ = tcp.set_nodelay(true);
    match &t.tls {
        None => Ok(Box::new(tcp)),
        Some((config, name)) => {
            let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
                .connect(name.clone(), tcp)
                .await
                .map_err(|e| format!("tls handshake with {}: {e}", t.authority))?;
            Ok(Box::new(tls))
        }
    }
}

/// Send `req` to member `t` at `path` and stream its answer back.
async fn forward(t: Target, path: &str, req: Request<Body>) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| limits::too_large(MAX_BODY))?;
    let pq = match parts.uri.query() {
        Some(q) => format!("{}{path}?{q}", t.base_path),
        None => format!("{}{path}", t.base_path),
    };
    let mut out = Request::builder()
        .method(parts.method.clone())
        .uri(pq)
        .body(Full::new(body))
        .map_err(|_| ApiError::bad_request("invalid proxy path"))?;
    let headers = out.headers_mut();
    for (k, v) in &parts.headers {
        if !drop_request_header(k) {
            headers.append(k.clone(), v.clone());
        }
    }
    if let Ok(host) = HeaderValue::from_str(&t.authority) {
        headers.insert(header::HOST, host);
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    if let Some(a) = &t.authorization {
        headers.insert(header::AUTHORIZATION, a.clone());
    }
    let reach = |why: String| unavailable(format!("error trying to reach service: {why}"));
    let io = tokio::time::timeout(CONNECT_TIMEOUT, connect(&t))
        .await
        .map_err(|_| {
            reach(format!(
                "connecting to {} timed out after {}s",
                t.authority,
                CONNECT_TIMEOUT.as_secs()
            ))
        })?
        .map_err(reach)?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| reach(e.to_string()))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let resp = tokio::time::timeout(RESPONSE_TIMEOUT, sender.send_request(out))
        .await
        .map_err(|_| {
            reach(format!(
                "{} did not answer within {}s",
                t.authority,
                RESPONSE_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| reach(e.to_string()))?;
    let (mut rparts, rbody) = resp.into_parts();
    strip_hop_by_hop(&mut rparts.headers);
    Ok(Response::from_parts(
        rparts,
        Body::new(rbody.map_err(axum::Error::new)),
    ))
}

/// Whether request header `k` stays behind: hop-by-hop, the caller's credentials and identity
/// (`Authorization`, `Impersonate-*`: the member sees the member credentials only).
fn drop_request_header(k: &HeaderName) -> bool {
    let k = k.as_str();
    HOP_BY_HOP.contains(&k) || CALLER_HEADERS.contains(&k) || k.starts_with("impersonate-")
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Headers the `Connection` header names are hop-by-hop too.
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for h in HOP_BY_HOP
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str))
    {
        headers.remove(h);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn proxy_paths_parse_with_and_without_a_logical_cluster_prefix() {
        let p = parse(
            "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/apis/apps/v1/deployments",
            "@",
        )
        .expect("a proxy path")
        .expect("valid");
        assert_eq!(
            p,
            ProxyPath {
                logical: "@".into(),
                cluster: "member1".into(),
                path: "/apis/apps/v1/deployments".into()
            }
        );
        let p = parse(
            "/clusters/tenant/apis/cluster.karmada.io/v1alpha1/clusters/m/proxy",
            "@",
        )
        .expect("a proxy path")
        .expect("valid");
        assert_eq!((p.logical.as_str(), p.path.as_str()), ("tenant", "/"));
        assert!(parse("/apis/cluster.karmada.io/v1alpha1/clusters/m", "@").is_none());
        assert!(parse("/apis/cluster.karmada.io/v1alpha1/clusters/m/status", "@").is_none());
        assert!(parse("/api/v1/namespaces", "@").is_none());
        let bad = parse(
            "/apis/cluster.karmada.io/v1alpha1/clusters/M_1/proxy/api",
            "@",
        )
        .expect("a proxy path")
        .expect_err("invalid name");
        assert_eq!(bad.code, 400);
    }

    #[test]
    fn dot_segments_cannot_climb_out_of_the_member_path() {
        assert_eq!(clean(&["..", "..", "api", "v1"]), "/api/v1");
        assert_eq!(clean(&["api", ".", "v1", "..", "v2"]), "/api/v2");
        assert_eq!(clean(&["%2e%2E", "%2E", "api"]), "/api");
        assert_eq!(clean(&[]), "/");
        // Encoded slashes stay encoded: one segment.
        assert_eq!(clean(&["a%2Fb"]), "/a%2Fb");
    }

    #[test]
    fn simulated_members_are_recognised_by_their_logical_endpoint() {
        assert_eq!(logical_endpoint("/clusters/member1"), Some("member1"));
        assert_eq!(logical_endpoint("/clusters/member1/"), Some("member1"));
        assert_eq!(logical_endpoint("https://10.0.0.1:6443"), None);
        assert_eq!(logical_endpoint("/clusters/a/b"), None);
        assert_eq!(logical_endpoint("/clusters/"), None);
    }

    fn secret(data: &[(&str, &str)]) -> Value {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let data: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(b64(v))))
            .collect();
        json!({"metadata": {"namespace": "karmada-cluster", "name": "m"}, "data": data})
    }

    #[test]
    fn credential_errors_name_the_secret_and_never_quote_it() {
        const SECRET: &str = "s3cr3t-value-that-must-not-leak";
        let cases = [
            secret(&[("kubeconfig", &format!("clusters: [{SECRET}"))]),
            secret(&[("token", SECRET)]),
            secret(&[("other", SECRET)]),
            json!({"data": {"token": format!("!!{SECRET}")}}),
            secret(&[(
                "kubeconfig",
                &format!(
                    "clusters: [{{name: c, cluster: {{server: 'https://h', certificate-authority-data: '{SECRET}'}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\nusers: [{{name: u, user: {{token: {SECRET}}}}}]"
                ),
            )]),
        ];
        for s in cases {
            let err =
                match Credentials::from_secret(&s, "karmada-cluster/m", "https://h:6443", false)
                    .and_then(|c| Target::new(c, "m").map(|_| ()))
                {
                    Ok(()) => panic!("{s} should be refused"),
                    Err(e) => e,
                };
            assert!(!err.contains(SECRET), "{err}");
            assert!(
                err.contains("karmada-cluster/m") || err.contains("\"m\""),
                "{err}"
            );
            assert_eq!(unavailable(err).code, 503);
        }
    }

    #[test]
    fn token_credentials_use_the_cluster_endpoint_and_kubeconfig_ones_their_server() {
        let c = Credentials::from_secret(
            &secret(&[("token", " tok \n")]),
            "ns/n",
            "https://10.1.2.3:6443/base/",
            true,
        )
        .expect("token credentials");
        let t = Target::new(c, "m").expect("target");
        assert_eq!((t.host.as_str(), t.port), ("10.1.2.3", 6443));
        assert_eq!(t.base_path, "/base");
        assert_eq!(
            t.authorization,
            Some(HeaderValue::from_static("Bearer tok"))
        );
        let kc = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://[::1]:8080', insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: abc}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        let c = Credentials::from_secret(&secret(&[("kubeconfig", kc)]), "ns/n", "", false)
            .expect("kubeconfig credentials");
        assert!(c.insecure);
        let t = Target::new(c, "m").expect("target");
        assert_eq!((t.host.as_str(), t.port), ("::1", 8080));
        assert!(t.tls.is_none());
        let file = "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: /etc/ca.pem}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        let err = Credentials::from_secret(&secret(&[("kubeconfig", file)]), "ns/n", "", false)
            .err()
            .expect("file references are refused");
        assert!(err.contains("certificate-authority"), "{err}");
    }

    #[test]
    fn kubeconfig_client_certificates_are_used_and_a_mismatched_key_is_refused() {
        let a = crate::tls::Credentials::generate().expect("credentials");
        let b = crate::tls::Credentials::generate().expect("credentials");
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let kubeconfig = |key: &str| {
            format!(
                "clusters: [{{name: c, cluster: {{server: 'https://localhost:6443', certificate-authority-data: {}}}}}]\nusers: [{{name: u, user: {{client-certificate-data: {}, client-key-data: {}}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n",
                b64(&a.ca_pem),
                b64(&a.cert_pem),
                b64(key)
            )
        };
        let c = Credentials::from_secret(
            &secret(&[("kubeconfig", &kubeconfig(&a.key_pem))]),
            "ns/n",
            "",
            false,
        )
        .expect("credentials");
        assert!(c.client_cert.is_some() && c.token.is_none());
        let t = Target::new(c, "m").expect("a client certificate configuration");
        assert!(t.authorization.is_none());
        let (config, name) = t.tls.expect("https");
        assert!(config.client_auth_cert_resolver.has_certs());
        assert_eq!(name, ServerName::try_from("localhost").expect("name"));
        let c = Credentials::from_secret(
            &secret(&[("kubeconfig", &kubeconfig(&b.key_pem))]),
            "ns/n",
            "",
            false,
        )
        .expect("credentials");
        let err = Target::new(c, "m")
            .err()
            .expect("a mismatched key is refused");
        assert!(err.contains("do not match"), "{err}");
        assert!(!err.contains("PRIVATE KEY"), "{err}");
    }

    #[test]
    fn the_callers_credentials_and_hop_by_hop_headers_stay_behind() {
        for h in [
            "authorization",
            "impersonate-user",
            "impersonate-group",
            "connection",
            "upgrade",
            "host",
        ] {
            assert!(drop_request_header(&HeaderName::from_static(h)), "{h}");
        }
        for h in ["accept", "content-type", "user-agent"] {
            assert!(!drop_request_header(&HeaderName::from_static(h)), "{h}");
        }
    }
}
