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
    /// The client CA bundle holds no usable CA certificate.
    #[error("client CA file {path}: {why}")]
    ClientCa {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// The CAs whose client certificates authenticate users (kube-apiserver's `--client-ca-file`).
///
/// As kube-apiserver (Go's `tls.RequestClientCert`), the TLS handshake asks for a client
/// certificate but neither requires nor verifies it; the chain is verified per connection at the
/// HTTP layer ([`ClientCa::verify`]), so a certificate from an unknown CA, an expired one or one
/// without the client-auth usage is answered with a 401 Status instead of a failed handshake. The
/// handshake still proves the client holds the certificate's key.
#[derive(Clone)]
pub struct ClientCa {
    verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    cas: usize,
}

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCa").field("cas", &self.cas).finish()
    }
}

/// Who a verified client certificate names, as kube-apiserver's x509 authenticator reads it:
/// the user is the subject's common name, the groups its organizations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertIdentity {
    /// The subject's CN.
    pub user: String,
    /// The subject's O values, in order.
    pub groups: Vec<String>,
    /// When the certificate expires (seconds since the epoch).
    pub not_after: i64,
}

/// Why a client certificate does not authenticate anyone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CertRejected(pub String);

impl ClientCa {
    /// Read a PEM bundle of CA certificates.
    ///
    /// # Errors
    /// The file cannot be read, holds no certificate, or one is not a usable trust anchor.
    pub fn load(path: &Path) -> Result<Self, TlsError> {
        let pem = std::fs::read_to_string(path).map_err(|source| TlsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_pem(&pem).map_err(|why| TlsError::ClientCa {
            path: path.display().to_string(),
            why,
        })
    }

    /// [`ClientCa::load`] of a bundle's text.
    ///
    /// # Errors
    /// The text holds no certificate or one is not a usable trust anchor.
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("not a PEM certificate bundle: {e:?}"))?;
        if certs.is_empty() {
            return Err("no CERTIFICATE block".into());
        }
        let mut roots = rustls::RootCertStore::empty();
        for (i, cert) in certs.iter().enumerate() {
            roots
                .add(cert.clone())
                .map_err(|e| format!("certificate {} is not a usable CA: {e}", i + 1))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| format!("{e}"))?;
        Ok(ClientCa {
            verifier,
            cas: certs.len(),
        })
    }

    /// Verify a client's chain (`chain[0]` its own certificate) against the CAs at `now`
    /// (seconds since the epoch), for client authentication, and read who it names. A
    /// certificate without a common name names nobody (kube-apiserver then tries the other
    /// authenticators): `Ok(None)`.
    ///
    /// # Errors
    /// The chain does not verify: unknown CA, expired or not yet valid, no client-auth usage,
    /// malformed.
    pub fn verify(
        &self,
        chain: &[CertificateDer<'_>],
        now: u64,
    ) -> Result<Option<CertIdentity>, CertRejected> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Ok(None);
        };
        self.verifier
            .verify_client_cert(
                leaf,
                intermediates,
                rustls::pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(now)),
            )
            .map_err(|e| CertRejected(format!("verifying certificate: {e}")))?;
        let (_, cert) = x509_parser::parse_x509_certificate(leaf)
            .map_err(|e| CertRejected(format!("parsing certificate: {e}")))?;
        let text = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| {
            attr.as_str().map(str::to_owned).map_err(|_| {
                CertRejected("a subject attribute is not a printable or UTF-8 string".into())
            })
        };
        let subject = cert.subject();
        let user = match subject.iter_common_name().next() {
            Some(cn) => text(cn)?,
            None => return Ok(None),
        };
        if user.is_empty() {
            return Ok(None);
        }
        let groups = subject
            .iter_organization()
            .map(text)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(CertIdentity {
            user,
            groups,
            not_after: cert.validity().not_after.timestamp(),
        }))
    }
}

/// The certificate chain a client presented on its connection, carried by each of the
/// connection's requests; its verification ([`ClientChain::identity`]) is done once per
/// connection, the expiry checked on every request.
#[derive(Debug)]
pub struct ClientChain {
    chain: Vec<CertificateDer<'static>>,
    verified: std::sync::OnceLock<Result<Option<CertIdentity>, CertRejected>>,
}

impl ClientChain {
    /// The chain presented (leaf first).
    pub fn new(chain: Vec<CertificateDer<'static>>) -> Self {
        ClientChain {
            chain,
            verified: std::sync::OnceLock::new(),
        }
    }

    /// Who the chain names, verified against `ca` at `now` (seconds since the epoch).
    ///
    /// # Errors
    /// As [`ClientCa::verify`], and when the certificate expired since the connection's first
    /// request.
    pub fn identity(&self, ca: &ClientCa, now: u64) -> Result<Option<CertIdentity>, CertRejected> {
        let verified = self.verified.get_or_init(|| ca.verify(&self.chain, now));
        match verified {
            Ok(Some(id)) if i64::try_from(now).unwrap_or(i64::MAX) > id.not_after => Err(
                CertRejected("verifying certificate: the certificate expired".into()),
            ),
            other => other.clone(),
        }
    }
}

/// The handshake side of [`ClientCa`]: asks for a certificate (hinting the CAs), checks that the
/// client holds its key, and leaves the chain to the HTTP layer.
#[derive(Debug)]
struct RequestClientCert {
    inner: Arc<dyn rustls::server::danger::ClientCertVerifier>,
}

impl rustls::server::danger::ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
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

    /// A rustls server configuration (HTTP/1.1 only, as kube-rs speaks); with `client_ca`, it
    /// asks clients for a certificate ([`ClientCa`]).
    ///
    /// # Errors
    /// Fails on malformed PEM or a key rustls rejects.
    pub fn server_config(
        &self,
        client_ca: Option<&ClientCa>,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
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
        let builder = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = match client_ca {
            Some(ca) => builder.with_client_cert_verifier(Arc::new(RequestClientCert {
                inner: Arc::clone(&ca.verifier),
            })),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
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

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };

    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn client(
        ca: &Ca,
        cn: Option<&str>,
        org: Option<&str>,
        edit: impl FnOnce(&mut CertificateParams),
    ) -> Vec<CertificateDer<'static>> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        if let Some(org) = org {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        edit(&mut params);
        let cert = params.signed_by(&key, &ca.issuer).unwrap();
        vec![cert.der().clone()]
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn client_certificates_name_their_cn_and_organizations_when_the_ca_signed_them() {
        let a = ca("client-ca-a");
        let b = ca("client-ca-b");
        let trust = ClientCa::from_pem(&a.pem).unwrap();
        let alice = client(&a, Some("alice"), Some("devs"), |_| {});
        let id = trust.verify(&alice, now()).unwrap().unwrap();
        assert_eq!(id.user, "alice");
        assert_eq!(id.groups, ["devs"]);
        assert!(id.not_after > i64::try_from(now()).unwrap());

        // Another CA, expired, not yet valid, server-only usage: rejected, with the reason.
        let other = client(&b, Some("mallory"), None, |_| {});
        let err = trust.verify(&other, now()).unwrap_err();
        assert!(err.0.to_lowercase().contains("issuer"), "{err}");
        let expired = client(&a, Some("old"), None, |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        });
        let err = trust.verify(&expired, now()).unwrap_err();
        assert!(err.0.contains("expired"), "{err}");
        let early = client(&a, Some("early"), None, |p| {
            p.not_before = rcgen::date_time_ymd(3000, 1, 1);
            p.not_after = rcgen::date_time_ymd(3001, 1, 1);
        });
        assert!(trust.verify(&early, now()).is_err());
        let server_only = client(&a, Some("srv"), None, |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        });
        assert!(trust.verify(&server_only, now()).is_err());
        // Garbage and a CA's own self-signed certificate.
        let garbage = vec![CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x01])];
        assert!(trust.verify(&garbage, now()).is_err());

        // No CN (or an empty one) names nobody; no chain either.
        let anonymous = client(&a, None, Some("devs"), |_| {});
        assert_eq!(trust.verify(&anonymous, now()).unwrap(), None);
        assert_eq!(trust.verify(&[], now()).unwrap(), None);

        // Both CAs of a bundle are trusted.
        let both = ClientCa::from_pem(&format!("{}{}", a.pem, b.pem)).unwrap();
        assert_eq!(both.verify(&other, now()).unwrap().unwrap().user, "mallory");
    }

    #[test]
    fn a_connection_verifies_once_and_expires_with_its_certificate() {
        let a = ca("client-ca-a");
        let trust = ClientCa::from_pem(&a.pem).unwrap();
        let chain = ClientChain::new(client(&a, Some("alice"), None, |_| {}));
        let id = chain.identity(&trust, now()).unwrap().unwrap();
        let later = u64::try_from(id.not_after).unwrap() + 1;
        let err = chain.identity(&trust, later).unwrap_err();
        assert!(err.0.contains("expired"), "{err}");
        assert!(chain.identity(&trust, now()).is_ok());
    }

    #[test]
    fn client_ca_bundles_must_hold_ca_certificates() {
        assert!(
            ClientCa::from_pem("")
                .unwrap_err()
                .contains("no CERTIFICATE")
        );
        assert!(ClientCa::from_pem("not pem at all").is_err());
        let bad = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(ClientCa::from_pem(bad).is_err());
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.crt");
        assert!(matches!(ClientCa::load(&missing), Err(TlsError::Io { .. })));
    }
}
