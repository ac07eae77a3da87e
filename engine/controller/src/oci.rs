//! Wasm modules as OCI artifacts: pull (`WasmPlugin` `spec.module.image`, `flotilla plugin pull`)
//! and push (`flotilla plugin push`) through the `oci-client` crate.
//!
//! The layout is the Wasm OCI artifact convention that wkg and oras use: an OCI image manifest
//! whose config has media type [`WASM_CONFIG_MEDIA_TYPE`] and whose one layer, of media type
//! [`WASM_LAYER_MEDIA_TYPE`], is the module. Pulls are bounded (the layer's declared size is
//! checked before the download, and the download stops past the bound whatever the registry
//! sends) and verified (the layer's sha256 against its descriptor, the manifest's against a
//! digest-pinned reference).
//!
//! Registries are reached over HTTPS with the platform's roots; plain HTTP only for a loopback
//! registry (`localhost`, `127.0.0.0/8`, `[::1]`, as Docker treats them) or when asked for
//! (`insecure`).

use std::time::Duration;

use base64::Engine as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::{Value, json};
use sha2::Digest as _;

/// Media type of the config of a Wasm OCI artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Media type of the module layer of a Wasm OCI artifact.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Media type of an OCI image manifest.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// Why a pull or push failed: a CamelCase reason (for a `WasmPlugin`'s status) and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciError {
    /// `InvalidImage`, `ImageNotFound`, `ImageUnauthorized`, `ImageTooLarge`,
    /// `ImageMediaType`, `DigestMismatch`, `ImagePullFailed` or `ImagePushFailed`.
    pub reason: &'static str,
    /// What happened, naming the reference (never credentials).
    pub message: String,
}

impl OciError {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        OciError {
            reason,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for OciError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OciError {}

/// Registry credentials (HTTP basic, which the registry's token service also takes).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password or token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Credentials for the reference's registry; anonymous when `None`.
    pub credentials: Option<Credentials>,
    /// Plain HTTP even for a registry that is not on loopback.
    pub insecure: bool,
    /// Largest module pulled, bytes.
    pub max_bytes: u64,
    /// Budget of the whole pull or push.
    pub timeout: Duration,
}

impl Options {
    /// Anonymous, HTTPS (HTTP on loopback), `max_bytes` bound, two minutes.
    pub fn new(max_bytes: u64) -> Self {
        Options {
            credentials: None,
            insecure: false,
            max_bytes,
            timeout: Duration::from_secs(120),
        }
    }
}

/// A pulled module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The module's bytes (the layer).
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the image manifest the reference resolved to.
    pub manifest_digest: String,
    /// `sha256:<hex>` of the module layer.
    pub layer_digest: String,
    /// The reference pinned to the manifest digest (`registry/repository@sha256:...`).
    pub pinned: String,
}

/// A pushed module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `sha256:<hex>` of the image manifest.
    pub manifest_digest: String,
    /// `sha256:<hex>` of the module layer.
    pub layer_digest: String,
    /// The reference pinned to the manifest digest.
    pub pinned: String,
}

/// Parse an image reference (`registry/repository[:tag][@sha256:<hex>]`; no tag means `latest`).
///
/// # Errors
/// `InvalidImage` with the parser's reason.
pub fn parse_reference(image: &str) -> Result<Reference, OciError> {
    let shown = clip(image, 256);
    if image.trim() != image || image.is_empty() {
        return Err(OciError::new(
            "InvalidImage",
            format!("{shown:?} is not an image reference (registry/repository:tag or @sha256:...)"),
        ));
    }
    image
        .parse::<Reference>()
        .map_err(|e| OciError::new("InvalidImage", format!("{shown:?}: {e}")))
}

/// Whether `registry` (`host[:port]`) is on loopback: `localhost`, `127.0.0.0/8` or `[::1]`.
pub fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        registry.rsplit_once(':').map_or(registry, |(h, _)| h)
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether a reference names its manifest by digest (never re-resolved).
pub fn is_pinned(image: &str) -> bool {
    image.contains("@sha256:")
}

fn client(reference: &Reference, opts: &Options) -> Result<Client, OciError> {
    // reqwest is built without a crypto provider of its own: use ring, as kube does here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = reference.resolve_registry().to_owned();
    let protocol = if opts.insecure || is_loopback(&registry) {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    Client::try_from(ClientConfig {
        protocol,
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(30)),
        platform_resolver: None,
        ..ClientConfig::default()
    })
    .map_err(|e| OciError::new("ImagePullFailed", format!("OCI client: {e}")))
}

fn auth(opts: &Options) -> RegistryAuth {
    match &opts.credentials {
        Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
        None => RegistryAuth::Anonymous,
    }
}

/// Map an `oci-client` error to a reason and a message about `image`.
fn classify(
    image: &str,
    e: &oci_client::errors::OciDistributionError,
    fallback: &'static str,
    anonymous: bool,
) -> OciError {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode};
    let hint = if anonymous {
        " (anonymous; it wants credentials)"
    } else {
        " (wrong credentials, or no access to this repository)"
    };
    let text = e.to_string();
    match e {
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => OciError::new(
            "ImageUnauthorized",
            format!("{image}: the registry refused access{hint}"),
        ),
        E::RegistryError { envelope, .. }
            if envelope
                .errors
                .iter()
                .any(|x| matches!(x.code, OciErrorCode::Unauthorized | OciErrorCode::Denied)) =>
        {
            OciError::new(
                "ImageUnauthorized",
                format!("{image}: the registry refused access{hint}"),
            )
        }
        E::ImageManifestNotFoundError(_) => {
            OciError::new("ImageNotFound", format!("{image}: no such image"))
        }
        E::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|x| {
                matches!(
                    x.code,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::BlobUnknown
                )
            }) =>
        {
            OciError::new("ImageNotFound", format!("{image}: no such image"))
        }
        E::ServerError {
            code: 401 | 403, ..
        } => OciError::new(
            "ImageUnauthorized",
            format!("{image}: the registry refused access{hint}"),
        ),
        E::ServerError { code: 404, .. } => {
            OciError::new("ImageNotFound", format!("{image}: no such image"))
        }
        E::DigestError(_) => OciError::new(
            "DigestMismatch",
            format!(
                "{image}: content does not match its digest: {}",
                clip(&text, 300)
            ),
        ),
        E::RequestError(r) => {
            // reqwest's chain names the cause (connection refused, TLS, timeout).
            let mut msg = r.to_string();
            let mut src = std::error::Error::source(r);
            while let Some(s) = src {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                src = s.source();
            }
            OciError::new(fallback, format!("{image}: {}", clip(&msg, 400)))
        }
        _ => OciError::new(fallback, format!("{image}: {}", clip(&text, 400))),
    }
}

/// Resolve `image` to its manifest, check it is a Wasm artifact, and download the module.
///
/// # Errors
/// See [`OciError::reason`].
pub async fn pull(image: &str, opts: &Options) -> Result<Pulled, OciError> {
    let reference = parse_reference(image)?;
    let shown = clip(image, 256);
    match tokio::time::timeout(opts.timeout, pull_inner(&reference, &shown, opts)).await {
        Ok(r) => r,
        Err(_) => Err(OciError::new(
            "ImagePullFailed",
            format!("{shown}: timed out after {:?}", opts.timeout),
        )),
    }
}

async fn pull_inner(
    reference: &Reference,
    shown: &str,
    opts: &Options,
) -> Result<Pulled, OciError> {
    let client = client(reference, opts)?;
    let auth = auth(opts);
    let anonymous = opts.credentials.is_none();
    let (raw, manifest_digest) = fetch_manifest(&client, reference, shown, &auth, opts).await?;
    let computed = format!("sha256:{}", hex(&sha2::Sha256::digest(&raw)));
    if let Some(pinned) = reference.digest()
        && !pinned.eq_ignore_ascii_case(&computed)
    {
        return Err(OciError::new(
            "DigestMismatch",
            format!("{shown}: the registry sent a manifest whose digest is {computed}"),
        ));
    }
    let manifest_digest = if manifest_digest.starts_with("sha256:") {
        manifest_digest
    } else {
        computed
    };
    // An image index (multi-platform): its Wasm entry's manifest, fetched by digest.
    let raw = match index_entry(shown, &raw)? {
        None => raw,
        Some((digest, size)) => {
            let by_digest = Reference::with_digest(
                reference.registry().to_owned(),
                reference.repository().to_owned(),
                digest.clone(),
            );
            let (entry, _) = fetch_manifest(&client, &by_digest, shown, &auth, opts).await?;
            let got = format!("sha256:{}", hex(&sha2::Sha256::digest(&entry)));
            if !got.eq_ignore_ascii_case(&digest) || entry.len() as u64 != size {
                return Err(OciError::new(
                    "DigestMismatch",
                    format!(
                        "{shown}: the index's Wasm manifest ({} bytes, {got}) does not match its descriptor ({size} bytes, {})",
                        entry.len(),
                        clip(&digest, 80)
                    ),
                ));
            }
            tracing::debug!(image = %shown, index = %manifest_digest, manifest = %digest, "image index resolved to its Wasm manifest");
            entry
        }
    };
    let manifest: OciImageManifest = serde_json::from_slice(&raw).map_err(|e| {
        OciError::new(
            "ImageMediaType",
            format!(
                "{shown}: not an OCI image manifest: {}",
                clip(&e.to_string(), 200)
            ),
        )
    })?;
    let layer = wasm_layer(shown, &manifest)?;
    let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
    if size > opts.max_bytes {
        return Err(OciError::new(
            "ImageTooLarge",
            format!(
                "{shown}: the module layer is {size} bytes, more than the {} allowed",
                opts.max_bytes
            ),
        ));
    }
    let mut stream = client
        .pull_blob_stream(reference, &layer)
        .await
        .map_err(|e| classify(shown, &e, "ImagePullFailed", anonymous))?;
    let mut bytes: Vec<u8> = Vec::with_capacity(usize::try_from(size.min(1 << 20)).unwrap_or(0));
    let mut hasher = sha2::Sha256::new();
    use futures::StreamExt as _;
    while let Some(chunk) = stream.stream.next().await {
        let chunk = chunk.map_err(|e| {
            OciError::new(
                "ImagePullFailed",
                format!("{shown}: reading the module layer: {e}"),
            )
        })?;
        if (bytes.len() + chunk.len()) as u64 > opts.max_bytes.min(size) {
            return Err(OciError::new(
                "ImageTooLarge",
                format!(
                    "{shown}: the registry sent more than the layer's declared {size} bytes (limit {})",
                    opts.max_bytes
                ),
            ));
        }
        hasher.update(&chunk);
        bytes.extend_from_slice(&chunk);
    }
    let layer_digest = format!("sha256:{}", hex(&hasher.finalize()));
    if !layer_digest.eq_ignore_ascii_case(&layer.digest) || bytes.len() as u64 != size {
        return Err(OciError::new(
            "DigestMismatch",
            format!(
                "{shown}: the module layer's content ({} bytes, {layer_digest}) does not match its descriptor ({size} bytes, {})",
                bytes.len(),
                clip(&layer.digest, 80)
            ),
        ));
    }
    let pinned = format!(
        "{}/{}@{manifest_digest}",
        reference.registry(),
        reference.repository()
    );
    tracing::debug!(image = %shown, %manifest_digest, %layer_digest, size, "pulled Wasm module");
    Ok(Pulled {
        bytes,
        manifest_digest,
        layer_digest,
        pinned,
    })
}

/// Largest image manifest read, bytes (containerd's bound): a manifest is a few hundred bytes,
/// and the registry is not trusted to keep it small.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// Media type of an OCI image index.
pub const OCI_INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";

/// Manifest media types a pull accepts: image manifests, and indexes holding one.
const MANIFEST_MEDIA_TYPES: [&str; 4] = [
    OCI_MANIFEST_MEDIA_TYPE,
    "application/vnd.docker.distribution.manifest.v2+json",
    OCI_INDEX_MEDIA_TYPE,
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// When `raw` is an image index: the digest and size of its Wasm entry, the first image
/// manifest whose platform architecture is `wasm` or whose `artifactType` is the Wasm config
/// media type. `None` for anything else (parsed as an image manifest next).
///
/// # Errors
/// `ImageMediaType` for an index without a Wasm entry (its platforms listed) or a malformed
/// one; `ImageTooLarge` for an entry declared past [`MAX_MANIFEST_BYTES`].
fn index_entry(shown: &str, raw: &[u8]) -> Result<Option<(String, u64)>, OciError> {
    let Ok(doc) = serde_json::from_slice::<Value>(raw) else {
        return Ok(None);
    };
    let media_type = doc.get("mediaType").and_then(Value::as_str);
    let is_index = matches!(
        media_type,
        Some(OCI_INDEX_MEDIA_TYPE | "application/vnd.docker.distribution.manifest.list.v2+json")
    ) || (media_type.is_none()
        && doc.get("manifests").is_some()
        && doc.get("layers").is_none());
    if !is_index {
        return Ok(None);
    }
    let bad = |what: &str| OciError::new("ImageMediaType", format!("{shown}: image index: {what}"));
    let entries = doc
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `manifests` list"))?;
    let text = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let wasm = entries.iter().find(|e| {
        let image = matches!(
            e.get("mediaType").and_then(Value::as_str),
            Some(OCI_MANIFEST_MEDIA_TYPE | "application/vnd.docker.distribution.manifest.v2+json")
        );
        image
            && (text(e, "/platform/architecture") == "wasm"
                || text(e, "/artifactType") == WASM_CONFIG_MEDIA_TYPE)
    });
    let Some(entry) = wasm else {
        let platforms: Vec<String> = entries
            .iter()
            .take(8)
            .map(|e| {
                clip(
                    &format!(
                        "{}/{}",
                        text(e, "/platform/os"),
                        text(e, "/platform/architecture")
                    ),
                    60,
                )
            })
            .collect();
        return Err(bad(&format!(
            "no Wasm entry (an image manifest for architecture `wasm`, or of artifactType {WASM_CONFIG_MEDIA_TYPE}); entries: {}",
            if platforms.is_empty() {
                "none".to_owned()
            } else {
                platforms.join(", ")
            }
        )));
    };
    let digest = text(entry, "/digest");
    if !digest.starts_with("sha256:")
        || digest.len() != 71
        || !digest[7..].bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(bad(&format!(
            "the Wasm entry's digest {:?} is not sha256:<64 hex>",
            clip(&digest, 80)
        )));
    }
    let size = entry
        .get("size")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("the Wasm entry has no size"))?;
    if size > MAX_MANIFEST_BYTES as u64 {
        return Err(manifest_too_large(shown, size));
    }
    Ok(Some((digest, size)))
}

/// The manifest `reference` names, at most [`MAX_MANIFEST_BYTES`] (refused by `Content-Length`
/// before the body is read, and cut off past the bound whatever the registry sends), with the
/// registry's `Docker-Content-Digest` (or the body's sha256). `oci-client` reads a manifest
/// whole, so the request is made here, with the token `oci-client` obtained for the pull. Behind
/// a proxy (`HTTPS_PROXY`, ...) it goes through the proxy with the HTTP client `oci-client`
/// uses (reqwest, which reads the proxy settings as `oci-client` does), bounded the same way.
async fn fetch_manifest(
    client: &Client,
    reference: &Reference,
    shown: &str,
    auth: &RegistryAuth,
    opts: &Options,
) -> Result<(Vec<u8>, String), OciError> {
    let anonymous = opts.credentials.is_none();
    let registry = reference.resolve_registry().to_owned();
    let https = !(opts.insecure || is_loopback(&registry));
    let token = client
        .auth(reference, auth, oci_client::RegistryOperation::Pull)
        .await
        .map_err(|e| classify(shown, &e, "ImagePullFailed", anonymous))?;
    let authorization = match (token, &opts.credentials) {
        (Some(token), _) => Some(format!("Bearer {token}")),
        (None, Some(c)) => Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", c.username, c.password))
        )),
        (None, None) => None,
    };
    let path = format!(
        "/v2/{}/manifests/{}",
        reference.repository(),
        reference
            .digest()
            .unwrap_or_else(|| reference.tag().unwrap_or("latest"))
    );
    let failed = |what: String| OciError::new("ImagePullFailed", format!("{shown}: {what}"));
    if proxied(&registry, https) {
        tracing::debug!(image = %shown, "a proxy is configured: the manifest is requested through it");
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| failed(format!("HTTP client: {e}")))?;
        let scheme = if https { "https" } else { "http" };
        let url = format!("{scheme}://{registry}{path}");
        let (status, digest, body) =
            manifest_through(&http, &url, authorization.as_deref(), shown).await?;
        return manifest_reply(shown, anonymous, status, digest, body);
    }
    let (host, port) =
        split_host_port(&registry, if https { 443 } else { 80 }).ok_or_else(|| {
            failed(format!(
                "registry {:?} is not host[:port]",
                clip(&registry, 100)
            ))
        })?;
    let mut request = http::Request::get(path.as_str())
        .header(http::header::HOST, registry.as_str())
        .header(http::header::ACCEPT, MANIFEST_MEDIA_TYPES.join(", "))
        .header(http::header::USER_AGENT, "flotilla")
        .header(http::header::CONNECTION, "close");
    if let Some(a) = &authorization {
        request = request.header(http::header::AUTHORIZATION, a);
    }
    let request = request
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .map_err(|e| failed(format!("building the manifest request: {e}")))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| failed(format!("connecting to {registry}: {e}")))?;
    let reply = if https {
        let roots = {
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            roots
        };
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls_pki_types::ServerName::try_from(host.clone())
            .map_err(|e| failed(format!("invalid server name {host:?}: {e}")))?;
        let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| failed(format!("TLS handshake with {registry}: {e}")))?;
        manifest_exchange(hyper_util::rt::TokioIo::new(stream), request, shown).await
    } else {
        manifest_exchange(hyper_util::rt::TokioIo::new(tcp), request, shown).await
    }?;
    let (status, digest, body) = reply;
    manifest_reply(shown, anonymous, status, digest, body)
}

/// A manifest answer as the pull takes it: the body and its digest, or why not (by status).
fn manifest_reply(
    shown: &str,
    anonymous: bool,
    status: http::StatusCode,
    digest: Option<String>,
    body: Vec<u8>,
) -> Result<(Vec<u8>, String), OciError> {
    match status.as_u16() {
        200..=299 => {}
        401 | 403 => {
            let hint = if anonymous {
                " (anonymous; it wants credentials)"
            } else {
                " (wrong credentials, or no access to this repository)"
            };
            return Err(OciError::new(
                "ImageUnauthorized",
                format!("{shown}: the registry refused access{hint}"),
            ));
        }
        404 => {
            return Err(OciError::new(
                "ImageNotFound",
                format!("{shown}: no such image"),
            ));
        }
        _ => {
            let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            return Err(OciError::new(
                "ImagePullFailed",
                format!(
                    "{shown}: the registry answered {status} for the manifest: {}",
                    clip(&text, 200)
                ),
            ));
        }
    }
    let computed = format!("sha256:{}", hex(&sha2::Sha256::digest(&body)));
    Ok((body, digest.unwrap_or(computed)))
}

/// One manifest GET of `url` with `http` (through the proxy it is configured with): status,
/// `Docker-Content-Digest`, and the body, bounded as [`manifest_exchange`] bounds it.
async fn manifest_through(
    http: &reqwest::Client,
    url: &str,
    authorization: Option<&str>,
    shown: &str,
) -> Result<(http::StatusCode, Option<String>, Vec<u8>), OciError> {
    let failed = |what: String| OciError::new("ImagePullFailed", format!("{shown}: {what}"));
    let mut request = http
        .get(url)
        .header(http::header::ACCEPT, MANIFEST_MEDIA_TYPES.join(", "))
        .header(http::header::USER_AGENT, "flotilla");
    if let Some(a) = authorization {
        request = request.header(http::header::AUTHORIZATION, a);
    }
    let mut response = request
        .send()
        .await
        .map_err(|e| failed(format!("requesting the manifest: {e}")))?;
    let status = response.status();
    let digest = response
        .headers()
        .get("docker-content-digest")
        .and_then(|v| v.to_str().ok())
        .filter(|d| d.len() <= 200)
        .map(str::to_owned);
    if let Some(len) = response
        .content_length()
        .filter(|len| *len > MAX_MANIFEST_BYTES as u64)
    {
        return Err(manifest_too_large(shown, len));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(format!("reading the manifest: {e}")))?
    {
        if body.len() + chunk.len() > MAX_MANIFEST_BYTES {
            return Err(OciError::new(
                "ImageTooLarge",
                format!(
                    "{shown}: the registry sent a manifest of more than {MAX_MANIFEST_BYTES} bytes"
                ),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((status, digest, body))
}

/// One manifest GET on `io`: status, `Docker-Content-Digest`, and the body (bounded).
async fn manifest_exchange<I>(
    io: I,
    request: http::Request<http_body_util::Empty<hyper::body::Bytes>>,
    shown: &str,
) -> Result<(http::StatusCode, Option<String>, Vec<u8>), OciError>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    use http_body_util::BodyExt as _;
    let failed = |what: String| OciError::new("ImagePullFailed", format!("{shown}: {what}"));
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| failed(format!("HTTP handshake: {e}")))?;
    let reply = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| failed(format!("requesting the manifest: {e}")))?;
        let status = response.status();
        let digest = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| d.len() <= 200)
            .map(str::to_owned);
        let declared = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(len) = declared.filter(|len| *len > MAX_MANIFEST_BYTES as u64) {
            return Err(manifest_too_large(shown, len));
        }
        let body = http_body_util::Limited::new(response.into_body(), MAX_MANIFEST_BYTES)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    OciError::new(
                        "ImageTooLarge",
                        format!(
                            "{shown}: the registry sent a manifest of more than {MAX_MANIFEST_BYTES} bytes"
                        ),
                    )
                } else {
                    failed(format!("reading the manifest: {e}"))
                }
            })?
            .to_bytes();
        Ok((status, digest, body.to_vec()))
    };
    let mut reply = std::pin::pin!(reply);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = &mut reply => r,
        c = &mut conn => match c {
            Ok(()) => reply.await,
            Err(e) => Err(failed(format!("connection: {e}"))),
        },
    }
}

fn manifest_too_large(shown: &str, len: u64) -> OciError {
    OciError::new(
        "ImageTooLarge",
        format!(
            "{shown}: the image manifest is {len} bytes, more than the {MAX_MANIFEST_BYTES} allowed"
        ),
    )
}

/// `host[:port]` (`[v6]:port` too) as host and port, `default` without one.
fn split_host_port(registry: &str, default: u16) -> Option<(String, u16)> {
    if let Some(rest) = registry.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default,
            None => return None,
        };
        return Some((host.to_owned(), port));
    }
    match registry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host.to_owned(), port.parse().ok()?)),
        Some(_) => None,
        None => Some((registry.to_owned(), default)),
    }
}

/// Whether the environment configures a proxy that `oci-client` (reqwest) would use for
/// `registry`, and `NO_PROXY` does not exempt it.
fn proxied(registry: &str, https: bool) -> bool {
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
    };
    let proxy = if https {
        var(&["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"])
    } else {
        var(&["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
    };
    if proxy.is_none() {
        return false;
    }
    let host = split_host_port(registry, 0).map_or_else(|| registry.to_owned(), |(h, _)| h);
    let exempt = var(&["NO_PROXY", "no_proxy"]).is_some_and(|list| {
        list.split(',').map(str::trim).any(|entry| {
            let entry = entry.trim_start_matches('.');
            entry == "*"
                || (!entry.is_empty()
                    && (host.eq_ignore_ascii_case(entry)
                        || host
                            .to_ascii_lowercase()
                            .ends_with(&format!(".{}", entry.to_ascii_lowercase()))))
        })
    });
    !exempt
}

/// The module layer of a Wasm artifact: the one layer of media type `application/wasm`.
fn wasm_layer(shown: &str, manifest: &OciImageManifest) -> Result<OciDescriptor, OciError> {
    let wasm: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER_MEDIA_TYPE)
        .collect();
    match wasm.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let found: Vec<String> = manifest
                .layers
                .iter()
                .take(8)
                .map(|l| clip(&l.media_type, 100))
                .collect();
            Err(OciError::new(
                "ImageMediaType",
                format!(
                    "{shown}: not a Wasm artifact: no layer of media type {WASM_LAYER_MEDIA_TYPE} (config {}, layers {})",
                    clip(&manifest.config.media_type, 100),
                    if found.is_empty() {
                        "none".to_owned()
                    } else {
                        found.join(", ")
                    }
                ),
            ))
        }
        more => Err(OciError::new(
            "ImageMediaType",
            format!(
                "{shown}: {} layers of media type {WASM_LAYER_MEDIA_TYPE}; a Wasm artifact has one",
                more.len()
            ),
        )),
    }
}

/// Push `module` as a Wasm artifact (config [`WASM_CONFIG_MEDIA_TYPE`], one layer
/// [`WASM_LAYER_MEDIA_TYPE`]) to `image`.
///
/// # Errors
/// `InvalidImage`, `ImageUnauthorized` or `ImagePushFailed`.
pub async fn push(image: &str, module: &[u8], opts: &Options) -> Result<Pushed, OciError> {
    let layer_digest = format!("sha256:{}", hex(&sha2::Sha256::digest(module)));
    let config = serde_json::to_vec(&json!({
        "architecture": "wasm",
        "os": "wasip1",
        "layerDigests": [layer_digest],
    }))
    .unwrap_or_default();
    push_artifact(
        image,
        module,
        WASM_LAYER_MEDIA_TYPE,
        &config,
        WASM_CONFIG_MEDIA_TYPE,
        opts,
    )
    .await
}

/// Push one blob as an artifact with the given layer and config media types (used by
/// [`push`]; other media types make artifacts that are not Wasm modules).
///
/// # Errors
/// `InvalidImage`, `ImageUnauthorized` or `ImagePushFailed`.
pub async fn push_artifact(
    image: &str,
    layer: &[u8],
    layer_media_type: &str,
    config: &[u8],
    config_media_type: &str,
    opts: &Options,
) -> Result<Pushed, OciError> {
    let reference = parse_reference(image)?;
    let shown = clip(image, 256);
    let work = async {
        let client = client(&reference, opts)?;
        let anonymous = opts.credentials.is_none();
        let fail = |e: oci_client::errors::OciDistributionError| {
            classify(&shown, &e, "ImagePushFailed", anonymous)
        };
        client
            .store_auth_if_needed(reference.resolve_registry(), &auth(opts))
            .await;
        let layer_digest = format!("sha256:{}", hex(&sha2::Sha256::digest(layer)));
        let config_digest = format!("sha256:{}", hex(&sha2::Sha256::digest(config)));
        client
            .push_blob(&reference, layer.to_vec(), &layer_digest)
            .await
            .map_err(fail)?;
        client
            .push_blob(&reference, config.to_vec(), &config_digest)
            .await
            .map_err(fail)?;
        let manifest: Value = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": config_media_type, "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": layer_media_type, "digest": layer_digest, "size": layer.len()}],
        });
        let body = serde_json::to_vec(&manifest).unwrap_or_default();
        let manifest_digest = format!("sha256:{}", hex(&sha2::Sha256::digest(&body)));
        client
            .push_manifest_raw(
                &reference,
                body,
                http::HeaderValue::from_static(OCI_MANIFEST_MEDIA_TYPE),
            )
            .await
            .map_err(fail)?;
        let pinned = format!(
            "{}/{}@{manifest_digest}",
            reference.registry(),
            reference.repository()
        );
        tracing::debug!(image = %shown, %manifest_digest, %layer_digest, "pushed artifact");
        Ok(Pushed {
            manifest_digest,
            layer_digest,
            pinned,
        })
    };
    match tokio::time::timeout(opts.timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(OciError::new(
            "ImagePushFailed",
            format!("{shown}: timed out after {:?}", opts.timeout),
        )),
    }
}

/// The credentials for `registry` (`host[:port]`) in a Docker config (`~/.docker/config.json`,
/// or a `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`): the `auths` entry whose
/// key names that host (with or without a scheme and path), from its `auth` (base64
/// `user:password`) or `username`/`password`. `Ok(None)` when no entry matches.
///
/// # Errors
/// The document is not JSON, or the matching entry is malformed.
pub fn docker_credentials(config: &[u8], registry: &str) -> Result<Option<Credentials>, String> {
    let doc: Value = serde_json::from_slice(config)
        .map_err(|e| format!("not a Docker config (JSON with \"auths\"): {e}"))?;
    let Some(auths) = doc.get("auths").and_then(Value::as_object) else {
        return Err("not a Docker config: no \"auths\" object".to_owned());
    };
    let want = normalize_host(registry);
    let docker_hub = matches!(
        want.as_str(),
        "docker.io" | "index.docker.io" | "registry-1.docker.io"
    );
    for (key, entry) in auths {
        let host = normalize_host(key);
        let matches = host == want
            || (docker_hub
                && matches!(
                    host.as_str(),
                    "docker.io" | "index.docker.io" | "registry-1.docker.io"
                ));
        if !matches {
            continue;
        }
        let shown = clip(key, 100);
        if let Some(a) = entry
            .get("auth")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
        {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(a.trim())
                .map_err(|_| format!("auths[{shown:?}].auth is not base64"))?;
            let text = String::from_utf8(decoded)
                .map_err(|_| format!("auths[{shown:?}].auth is not UTF-8"))?;
            let Some((user, pass)) = text.split_once(':') else {
                return Err(format!(
                    "auths[{shown:?}].auth is not base64 of \"user:password\""
                ));
            };
            return Ok(Some(Credentials {
                username: user.to_owned(),
                password: pass.to_owned(),
            }));
        }
        let user = entry.get("username").and_then(Value::as_str);
        let pass = entry.get("password").and_then(Value::as_str);
        if let (Some(u), Some(p)) = (user, pass) {
            return Ok(Some(Credentials {
                username: u.to_owned(),
                password: p.to_owned(),
            }));
        }
        if let Some(t) = entry.get("identitytoken").and_then(Value::as_str) {
            return Ok(Some(Credentials {
                username: "<token>".to_owned(),
                password: t.to_owned(),
            }));
        }
        return Err(format!(
            "auths[{shown:?}] has neither \"auth\" nor \"username\" and \"password\""
        ));
    }
    Ok(None)
}

/// `https://Host:5000/v1/` → `host:5000`.
fn normalize_host(key: &str) -> String {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or_default().to_ascii_lowercase()
}

/// `text` cut to `max` bytes on a char boundary.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// Read a request's head from `sock`; its first line, and whether the head was complete
    /// (false: the peer closed or failed first, the line is what came).
    async fn request_line(sock: &mut tokio::net::TcpStream) -> (String, bool) {
        let mut req = Vec::new();
        let mut buf = [0u8; 1024];
        let mut complete = true;
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    complete = false;
                    break;
                }
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
        let line = String::from_utf8_lossy(&req)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        (line, complete)
    }

    /// A registry on loopback that answers `/v2/` with 200 and any manifest request with
    /// `head` then `body_len` bytes of `{` (chunked when `head` says so); returns its address and
    /// how many body bytes it managed to send.
    async fn lying_registry(
        head: &'static str,
        body_len: usize,
    ) -> (String, tokio::task::JoinHandle<usize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let task = tokio::spawn(async move {
            let mut sent = 0;
            for _ in 0..4 {
                let Ok((mut sock, _)) = listener.accept().await else {
                    break;
                };
                let (line, _) = request_line(&mut sock).await;
                if !line.contains("/manifests/") {
                    let _ = sock
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                        )
                        .await;
                    continue;
                }
                if sock.write_all(head.as_bytes()).await.is_err() {
                    break;
                }
                let chunked = head.contains("chunked");
                let block = vec![b'{'; 64 << 10];
                while sent < body_len {
                    let r = if chunked {
                        let mut frame = format!("{:x}\r\n", block.len()).into_bytes();
                        frame.extend_from_slice(&block);
                        frame.extend_from_slice(b"\r\n");
                        sock.write_all(&frame).await
                    } else {
                        sock.write_all(&block).await
                    };
                    if r.is_err() {
                        break;
                    }
                    sent += block.len();
                }
                break;
            }
            sent
        });
        (addr, task)
    }

    #[tokio::test]
    async fn through_a_proxy_the_manifest_is_bounded_too() {
        // The fake answers as a proxy would relay the registry: a declared length past the
        // bound, then (chunked) a body past it.
        for (head, message) in [
            (
                "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.manifest.v1+json\r\ncontent-length: 5000000\r\n\r\n",
                "manifest is 5000000 bytes, more than the 4194304 allowed",
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.manifest.v1+json\r\ntransfer-encoding: chunked\r\n\r\n",
                "sent a manifest of more than 4194304 bytes",
            ),
        ] {
            let (proxy, server) = lying_registry(head, 64 << 20).await;
            let http = reqwest::Client::builder()
                .proxy(reqwest::Proxy::http(format!("http://{proxy}")).expect("proxy"))
                .build()
                .expect("client");
            let e = manifest_through(
                &http,
                "http://registry.invalid/v2/big/manifests/v1",
                None,
                "registry.invalid/big:v1",
            )
            .await
            .expect_err("refused");
            assert_eq!(e.reason, "ImageTooLarge", "{e}");
            assert!(e.message.contains(message), "{e}");
            let sent = server.await.expect("server");
            assert!(sent < 16 << 20, "read {sent} bytes");
        }
    }

    #[tokio::test]
    async fn a_manifest_declared_larger_than_the_bound_is_refused_before_its_body_is_read() {
        let (addr, server) = lying_registry(
            "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.manifest.v1+json\r\ncontent-length: 5000000\r\n\r\n",
            5_000_000,
        )
        .await;
        let mut opts = Options::new(64 << 20);
        opts.timeout = Duration::from_secs(20);
        let e = pull(&format!("{addr}/big:v1"), &opts)
            .await
            .expect_err("refused");
        assert_eq!(e.reason, "ImageTooLarge", "{e}");
        assert!(
            e.message
                .contains("manifest is 5000000 bytes, more than the 4194304 allowed"),
            "{e}"
        );
        server.abort();
    }

    #[tokio::test]
    async fn a_manifest_streamed_past_the_bound_is_cut_off() {
        let (addr, server) = lying_registry(
            "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.manifest.v1+json\r\ntransfer-encoding: chunked\r\n\r\n",
            64 << 20,
        )
        .await;
        let mut opts = Options::new(64 << 20);
        opts.timeout = Duration::from_secs(20);
        let e = pull(&format!("{addr}/endless:v1"), &opts)
            .await
            .expect_err("refused");
        assert_eq!(e.reason, "ImageTooLarge", "{e}");
        assert!(e.message.contains("more than 4194304 bytes"), "{e}");
        // The client hung up soon after the bound: the registry could not send its 64 MiB.
        let sent = server.await.expect("server");
        assert!(sent < 32 << 20, "the registry sent {sent} bytes");
    }

    /// Paths and the bodies served for them.
    type Routes = Vec<(String, Vec<u8>)>;

    /// A registry on loopback serving `routes` (path -> body) with 200, `/v2/` with 200, and
    /// anything else with 404.
    async fn static_registry(routes: Routes) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let routes = routes.clone();
                tokio::spawn(async move {
                    let (line, complete) = request_line(&mut sock).await;
                    if !complete {
                        return;
                    }
                    let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
                    let (status, body) = match routes.iter().find(|(p, _)| *p == path) {
                        Some((_, b)) => ("200 OK", b.clone()),
                        None if path == "/v2/" => ("200 OK", b"{}".to_vec()),
                        None => ("404 Not Found", b"{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"unknown\"}]}".to_vec()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(&body).await;
                });
            }
        });
        addr
    }

    fn sha(bytes: &[u8]) -> String {
        format!("sha256:{}", hex(&sha2::Sha256::digest(bytes)))
    }

    /// An index of a Linux image and (when `with_wasm`) a Wasm artifact, with the routes serving
    /// it under `repo:v1`; returns the routes, the index digest and the module.
    fn index_routes(with_wasm: bool) -> (Routes, String, Vec<u8>) {
        let module = b"\0asm\x01\0\0\0 a module".to_vec();
        let config = b"{}".to_vec();
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": sha(&config), "size": config.len()},
            "layers": [{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": sha(&module), "size": module.len()}],
        }))
        .expect("json");
        let mut entries = vec![
            json!({"mediaType": OCI_MANIFEST_MEDIA_TYPE, "digest": sha(b"linux"), "size": 5,
            "platform": {"os": "linux", "architecture": "amd64"}}),
        ];
        if with_wasm {
            entries.push(json!({"mediaType": OCI_MANIFEST_MEDIA_TYPE, "digest": sha(&manifest), "size": manifest.len(),
                "platform": {"os": "wasip1", "architecture": "wasm"}}));
        }
        let index = serde_json::to_vec(&json!({
            "schemaVersion": 2, "mediaType": OCI_INDEX_MEDIA_TYPE, "manifests": entries,
        }))
        .expect("json");
        let routes = vec![
            ("/v2/repo/manifests/v1".to_owned(), index.clone()),
            (format!("/v2/repo/manifests/{}", sha(&index)), index.clone()),
            (format!("/v2/repo/manifests/{}", sha(&manifest)), manifest),
            (format!("/v2/repo/blobs/{}", sha(&module)), module.clone()),
        ];
        (routes, sha(&index), module)
    }

    #[tokio::test]
    async fn an_image_index_resolves_to_its_wasm_artifact() {
        let (routes, index_digest, module) = index_routes(true);
        let addr = static_registry(routes).await;
        let mut opts = Options::new(64 << 20);
        opts.timeout = Duration::from_secs(20);
        let pulled = pull(&format!("{addr}/repo:v1"), &opts).await.expect("pull");
        assert_eq!(pulled.bytes, module);
        assert_eq!(pulled.manifest_digest, index_digest);
        assert_eq!(pulled.pinned, format!("{addr}/repo@{index_digest}"));
        // Pinned to the index: the same artifact.
        let again = pull(&pulled.pinned, &opts).await.expect("pull pinned");
        assert_eq!(again.bytes, module);
    }

    #[tokio::test]
    async fn an_image_index_without_a_wasm_entry_is_refused_naming_its_platforms() {
        let (routes, _, _) = index_routes(false);
        let addr = static_registry(routes).await;
        let mut opts = Options::new(64 << 20);
        opts.timeout = Duration::from_secs(20);
        let e = pull(&format!("{addr}/repo:v1"), &opts)
            .await
            .expect_err("refused");
        assert_eq!(e.reason, "ImageMediaType", "{e}");
        assert!(
            e.message.contains("no Wasm entry") && e.message.contains("linux/amd64"),
            "{e}"
        );
    }

    #[test]
    fn registry_hosts_and_ports_are_split() {
        assert_eq!(
            split_host_port("r.example", 443),
            Some(("r.example".into(), 443))
        );
        assert_eq!(
            split_host_port("r.example:5000", 443),
            Some(("r.example".into(), 5000))
        );
        assert_eq!(
            split_host_port("[::1]:5000", 443),
            Some(("::1".into(), 5000))
        );
        assert_eq!(split_host_port("[::1]", 80), Some(("::1".into(), 80)));
        assert_eq!(split_host_port("r.example:x", 443), None);
        assert_eq!(split_host_port("[::1]x", 443), None);
    }

    #[test]
    fn loopback_registries_are_recognised() {
        for r in [
            "localhost:5000",
            "LOCALHOST",
            "127.0.0.1:5000",
            "127.1.2.3",
            "[::1]:5000",
        ] {
            assert!(is_loopback(r), "{r}");
        }
        for r in [
            "registry.example:5000",
            "10.0.0.1:5000",
            "[fe80::1]:80",
            "localhost.example",
        ] {
            assert!(!is_loopback(r), "{r}");
        }
    }

    #[test]
    fn docker_config_credentials_match_the_registry_host() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret:x");
        let cfg = json!({"auths": {
            "https://registry.example:5000/v1/": {"auth": auth},
            "other.example": {"username": "bob", "password": "pw"},
            "broken.example": {"auth": "!!!"},
            "https://index.docker.io/v1/": {"username": "hub", "password": "h"},
        }})
        .to_string();
        let c = docker_credentials(cfg.as_bytes(), "Registry.example:5000")
            .expect("ok")
            .expect("found");
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("alice", "s3cret:x")
        );
        let c = docker_credentials(cfg.as_bytes(), "other.example")
            .expect("ok")
            .expect("found");
        assert_eq!(c.username, "bob");
        let c = docker_credentials(cfg.as_bytes(), "docker.io")
            .expect("ok")
            .expect("found");
        assert_eq!(c.username, "hub");
        assert_eq!(
            docker_credentials(cfg.as_bytes(), "registry.example:5001").expect("ok"),
            None
        );
        let e = docker_credentials(cfg.as_bytes(), "broken.example").expect_err("bad");
        assert!(e.contains("not base64"), "{e}");
        let alice = Credentials {
            username: "alice".into(),
            password: "s3cret".into(),
        };
        assert!(!format!("{alice:?}").contains("s3cret"));
        assert!(docker_credentials(b"[]", "x").is_err());
        assert!(docker_credentials(b"not json", "x").is_err());
    }

    #[test]
    fn references_are_parsed_and_refused_clearly() {
        let r = parse_reference("127.0.0.1:5000/org/plugin:v1").expect("ok");
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "org/plugin");
        assert_eq!(r.tag(), Some("v1"));
        for bad in ["", " x", "UPPER/Case:tag", "a/b@sha256:zz"] {
            let e = parse_reference(bad).expect_err(bad);
            assert_eq!(e.reason, "InvalidImage", "{bad}");
        }
        assert!(is_pinned(&format!("r/x@sha256:{}", "a".repeat(64))));
        assert!(!is_pinned("r/x:sha256"));
    }

    #[test]
    fn a_manifest_without_one_wasm_layer_is_refused() {
        let desc = |m: &str| OciDescriptor {
            media_type: m.to_owned(),
            digest: format!("sha256:{}", "0".repeat(64)),
            size: 1,
            ..Default::default()
        };
        let mut m = OciImageManifest {
            config: desc(WASM_CONFIG_MEDIA_TYPE),
            layers: vec![desc("application/octet-stream")],
            ..Default::default()
        };
        let e = wasm_layer("r/x:1", &m).expect_err("no wasm layer");
        assert_eq!(e.reason, "ImageMediaType");
        assert!(
            e.message.contains("application/octet-stream"),
            "{}",
            e.message
        );
        m.layers = vec![desc(WASM_LAYER_MEDIA_TYPE), desc(WASM_LAYER_MEDIA_TYPE)];
        assert_eq!(
            wasm_layer("r/x:1", &m).expect_err("two").reason,
            "ImageMediaType"
        );
        m.layers = vec![desc(WASM_LAYER_MEDIA_TYPE)];
        assert!(wasm_layer("r/x:1", &m).is_ok());
    }
}
