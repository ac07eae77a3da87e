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
    let (raw, manifest_digest) = client
        .pull_manifest_raw(
            reference,
            &auth,
            &[
                OCI_MANIFEST_MEDIA_TYPE,
                "application/vnd.docker.distribution.manifest.v2+json",
            ],
        )
        .await
        .map_err(|e| classify(shown, &e, "ImagePullFailed", anonymous))?;
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
