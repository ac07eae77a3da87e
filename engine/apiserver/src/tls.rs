//! Credentials for `flotilla up`: a generated CA, a server certificate signed by it, a bearer
//! token, and the kubeconfig that ties them together. Persisted in the data directory so a
//! restart keeps existing kubeconfigs valid.

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A credential failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// Reading or writing a credential file failed.
    #[error("credential file {path}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Generating a key or certificate failed.
    #[error("certificate generation failed")]
    Generate(#[source] rcgen::Error),
    /// A stored PEM could not be parsed.
    #[error("invalid PEM in {path}")]
    Pem {
        /// The file.
        path: String,
    },
    /// rustls rejected the configuration.
    #[error("TLS configuration rejected")]
    Config(#[source] rustls::Error),
}

/// The server's credentials.
#[derive(Clone)]
pub struct Credentials {
    /// CA certificate (PEM), for clients' `certificate-authority-data`.
    pub ca_pem: String,
    /// Server certificate (PEM).
    pub cert_pem: String,
    /// Server private key (PEM).
    pub key_pem: String,
    /// The bearer token clients must present.
    pub token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("ca_pem", &"<pem>")
            .field("token", &"<redacted>")
            .finish()
    }
}

fn read(path: &Path) -> Result<Option<String>, TlsError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TlsError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Replace `path` with `contents`, owner-only (`0600`), atomically: a crash leaves the old file or
/// the new one, never a torn credential.
fn write_private(path: &Path, contents: &str) -> Result<(), TlsError> {
    let io = |source| TlsError::Io {
        path: path.display().to_string(),
        source,
    };
    let tmp = path.with_extension("tmp");
    crate::fs::write_private(&tmp, contents.as_bytes()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Write `kubeconfig` (which holds the bearer token) to `path`, readable by its owner only: a new
/// file is created `0600` (its directory `0700` when missing), and an existing file is made `0600`
/// before the token is written into it.
///
/// # Errors
/// Fails when the directory or the file cannot be created or written.
pub fn write_kubeconfig(path: &Path, kubeconfig: &str) -> Result<(), TlsError> {
    let io = |p: &Path, source| TlsError::Io {
        path: p.display().to_string(),
        source,
    };
    if let Some(parent) = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
    {
        crate::fs::private_dir(parent).map_err(|e| io(parent, e))?;
    }
    crate::fs::write_private(path, kubeconfig.as_bytes()).map_err(|e| io(path, e))
}

/// A random URL-safe token (256 bits).
pub fn random_token() -> String {
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Credentials {
    /// Load the credentials from `dir`, generating whatever is missing.
    ///
    /// # Errors
    /// Fails on I/O or certificate generation errors.
    pub fn load_or_create(dir: &Path) -> Result<Self, TlsError> {
        crate::fs::private_dir(dir).map_err(|source| TlsError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        let (ca_p, cert_p, key_p, tok_p) = (
            dir.join("ca.crt"),
            dir.join("server.crt"),
            dir.join("server.key"),
            dir.join("token"),
        );
        if let (Some(ca_pem), Some(cert_pem), Some(key_pem), Some(token)) =
            (read(&ca_p)?, read(&cert_p)?, read(&key_p)?, read(&tok_p)?)
        {
            return Ok(Credentials {
                ca_pem,
                cert_pem,
                key_pem,
                token: token.trim().to_owned(),
            });
        }
        let creds = Self::generate()?;
        write_private(&ca_p, &creds.ca_pem)?;
        write_private(&cert_p, &creds.cert_pem)?;
        write_private(&key_p, &creds.key_pem)?;
        write_private(&tok_p, &creds.token)?;
        Ok(creds)
    }

    /// Fresh credentials: a CA, a server certificate for the loopback names, and a token.
    ///
    /// # Errors
    /// Fails when key or certificate generation fails.
    pub fn generate() -> Result<Self, TlsError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
        };
        let ca_key = KeyPair::generate().map_err(TlsError::Generate)?;
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).map_err(TlsError::Generate)?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "flotilla-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(TlsError::Generate)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().map_err(TlsError::Generate)?;
        let mut params = CertificateParams::new(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ])
        .map_err(TlsError::Generate)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "flotilla-apiserver");
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(TlsError::Generate)?;
        Ok(Credentials {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            token: random_token(),
        })
    }

    /// A rustls server configuration (HTTP/1.1 only, as kube-rs speaks).
    ///
    /// # Errors
    /// Fails on malformed PEM or a key rustls rejects.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|_| TlsError::Pem {
                    path: "server.crt".into(),
                })?;
        let key =
            PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|_| TlsError::Pem {
                path: "server.key".into(),
            })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(TlsError::Config)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A kubeconfig (YAML) for `server`, trusting `ca_pem` when given and presenting `token` when given.
pub fn kubeconfig(server: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut cluster = format!("    server: {server}\n");
    if let Some(ca) = ca_pem {
        cluster.push_str(&format!("    certificate-authority-data: {}\n", b64(ca)));
    }
    let user = match token {
        Some(t) => format!("    token: {t}\n"),
        None => "    {}\n".to_owned(),
    };
    let user = if token.is_some() {
        format!("  user:\n{user}")
    } else {
        "  user: {}\n".to_owned()
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: flotilla\n  cluster:\n{cluster}users:\n- name: flotilla\n{user}contexts:\n- name: flotilla\n  context:\n    cluster: flotilla\n    user: flotilla\n    namespace: default\ncurrent-context: flotilla\npreferences: {{}}\n"
    )
}
