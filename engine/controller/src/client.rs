//! Clients for the control plane and the member clusters.
//!
//! [`Members`] is the live registry the execution controller and the cluster status controller
//! use: simulated members fixed at start (logical clusters of the embedded server) plus members
//! reached over the network, added, rebuilt and removed as their `Cluster` objects and Secrets
//! change (see [`crate::controller::status`]).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use flotilla_api::cluster::Cluster;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client on the embedded server's router, in process, for the logical cluster `cluster`
/// (`None`: the control plane itself), sending `token` as its bearer token when set.
pub fn in_process(router: axum::Router, cluster: Option<&str>, token: Option<&str>) -> Client {
    let prefix = cluster
        .map(|name| format!("/clusters/{name}"))
        .unwrap_or_default();
    let auth = token.and_then(|t| http::HeaderValue::from_str(&format!("Bearer {t}")).ok());
    let svc = tower::ServiceBuilder::new()
        .map_request(move |mut req: http::Request<kube::client::Body>| {
            if !prefix.is_empty() {
                let pq = req
                    .uri()
                    .path_and_query()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_else(|| "/".to_owned());
                if let Ok(uri) = format!("{prefix}{pq}").parse::<http::Uri>() {
                    *req.uri_mut() = uri;
                }
            }
            if let Some(a) = &auth {
                req.headers_mut()
                    .insert(http::header::AUTHORIZATION, a.clone());
            }
            req
        })
        .service(router);
    Client::new(svc, "default")
}

/// The bearer token of the first user in `kubeconfig` (what `flotilla up` writes).
pub fn token_from_kubeconfig(kubeconfig: &str) -> Option<String> {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).ok()?;
    let v = serde_json::to_value(&kc).ok()?;
    v.pointer("/users/0/user/token")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

/// Why a member cluster's client could not be built. Every message names the Cluster or the
/// Secret and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemberError {
    /// The Cluster has no `spec.secretRef`.
    #[error(
        "cluster {cluster}: spec.secretRef is not set, so there are no credentials for the member"
    )]
    NoSecretRef {
        /// The Cluster.
        cluster: String,
    },
    /// The Secret does not exist.
    #[error("Secret {secret} (spec.secretRef of cluster {cluster}) not found")]
    SecretNotFound {
        /// `namespace/name`.
        secret: String,
        /// The Cluster.
        cluster: String,
    },
    /// Reading the Secret failed.
    #[error("reading Secret {secret}: {source}")]
    SecretRead {
        /// `namespace/name`.
        secret: String,
        /// The request error.
        #[source]
        source: kube::Error,
    },
    /// The Secret lacks the keys a member needs.
    #[error(
        "Secret {secret} has neither a `kubeconfig` key nor a `token` key (with `caBundle`, or spec.insecureSkipTLSVerification)"
    )]
    NoCredentials {
        /// `namespace/name`.
        secret: String,
    },
    /// The Secret has a token but the Cluster has no endpoint.
    #[error(
        "cluster {cluster}: spec.apiEndpoint is required with the `token` credentials of Secret {secret}"
    )]
    NoEndpoint {
        /// The Cluster.
        cluster: String,
        /// `namespace/name`.
        secret: String,
    },
    /// A value is not what it should be.
    #[error("{what}: {message}")]
    Invalid {
        /// What is wrong (e.g. "key `kubeconfig` of Secret karmada-cluster/member1").
        what: String,
        /// Why.
        message: String,
    },
}

/// A kube client configuration for the member described by `kubeconfig` (YAML), using `context`
/// or its current context; `what` names the source in errors.
///
/// # Errors
/// [`MemberError::Invalid`] when the text is not a usable kubeconfig.
pub async fn config_from_kubeconfig(
    kubeconfig: &str,
    context: Option<&str>,
    what: &str,
) -> Result<kube::Config, MemberError> {
    let invalid = |e: &dyn std::fmt::Display| MemberError::Invalid {
        what: what.to_owned(),
        message: e.to_string(),
    };
    let kc = Kubeconfig::from_yaml(kubeconfig).map_err(|e| invalid(&e))?;
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .map_err(|e| invalid(&e))
}

/// A kube client configuration from Karmada's credential shape: `endpoint` (a URL), a bearer
/// `token` and a PEM `ca_bundle` (or `insecure`).
///
/// # Errors
/// [`MemberError::Invalid`] when the endpoint or the CA bundle is not usable.
pub async fn config_from_token(
    endpoint: &str,
    token: &str,
    ca_bundle: Option<&[u8]>,
    insecure: bool,
    what: &str,
) -> Result<kube::Config, MemberError> {
    let mut cluster = serde_json::json!({"server": endpoint});
    if let Some(ca) = ca_bundle.filter(|c| !c.is_empty()) {
        cluster["certificate-authority-data"] = serde_json::Value::from(base64_encode(ca));
    }
    if insecure {
        cluster["insecure-skip-tls-verify"] = serde_json::Value::Bool(true);
    }
    let kc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "member", "cluster": cluster}],
        "users": [{"name": "member", "user": {"token": token}}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "member"}}],
        "current-context": "member",
    });
    let text = serde_json::to_string(&kc).map_err(|e| MemberError::Invalid {
        what: what.to_owned(),
        message: e.to_string(),
    })?;
    let config = config_from_kubeconfig(&text, None, what).await?;
    if ca_bundle.is_some_and(|c| !c.is_empty())
        && config.root_cert.as_ref().is_none_or(Vec::is_empty)
    {
        return Err(MemberError::Invalid {
            what: what.to_owned(),
            message: "`caBundle` holds no PEM certificate".into(),
        });
    }
    Ok(config)
}

/// Standard base64 with padding (for the kubeconfig's `certificate-authority-data`).
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A key of a Secret: `data` (already base64-decoded) or `stringData`.
pub fn secret_value(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|s| s.as_bytes().to_vec())
        })
}

/// The client configuration of push member `cluster` from its `secret` (`spec.secretRef`):
/// a whole `kubeconfig` key, or Karmada's `token` + `caBundle` with `spec.apiEndpoint`.
/// `spec.insecureSkipTLSVerification` applies to both.
///
/// # Errors
/// A [`MemberError`] naming the Secret and what is wrong with it.
pub async fn config_from_secret(
    cluster: &Cluster,
    secret: &Secret,
) -> Result<kube::Config, MemberError> {
    let secret_name = format!(
        "{}/{}",
        secret.metadata.namespace.as_deref().unwrap_or(""),
        secret.metadata.name.as_deref().unwrap_or("")
    );
    let insecure = cluster.spec.insecure_skip_tls_verification;
    let mut config = if let Some(kc) = secret_value(secret, "kubeconfig") {
        let what = format!("key `kubeconfig` of Secret {secret_name}");
        let text = String::from_utf8(kc).map_err(|_| MemberError::Invalid {
            what: what.clone(),
            message: "not UTF-8".into(),
        })?;
        config_from_kubeconfig(&text, None, &what).await?
    } else if let Some(token) = secret_value(secret, "token") {
        let what = format!("key `token` of Secret {secret_name}");
        let token = String::from_utf8(token).map_err(|_| MemberError::Invalid {
            what: what.clone(),
            message: "not UTF-8".into(),
        })?;
        let token = token.trim();
        if token.is_empty() {
            return Err(MemberError::Invalid {
                what,
                message: "empty".into(),
            });
        }
        if cluster.spec.api_endpoint.is_empty() {
            return Err(MemberError::NoEndpoint {
                cluster: cluster.name().to_owned(),
                secret: secret_name,
            });
        }
        let ca = secret_value(secret, "caBundle");
        if ca.as_deref().is_none_or(<[u8]>::is_empty) && !insecure {
            return Err(MemberError::Invalid {
                what: format!("Secret {secret_name}"),
                message: "key `caBundle` is missing and spec.insecureSkipTLSVerification is false"
                    .into(),
            });
        }
        let what = format!("cluster {} with Secret {secret_name}", cluster.name());
        config_from_token(
            &cluster.spec.api_endpoint,
            token,
            ca.as_deref(),
            insecure,
            &what,
        )
        .await?
    } else {
        return Err(MemberError::NoCredentials {
            secret: secret_name,
        });
    };
    if insecure {
        config.accept_invalid_certs = true;
    }
    Ok(config)
}

/// Read `cluster`'s `spec.secretRef` Secret on the control plane and build the member's
/// client configuration from it.
///
/// # Errors
/// A [`MemberError`] naming the Secret and what is wrong.
pub async fn config_for_cluster(
    control: &Client,
    cluster: &Cluster,
) -> Result<(kube::Config, String), MemberError> {
    let Some(r) = &cluster.spec.secret_ref else {
        return Err(MemberError::NoSecretRef {
            cluster: cluster.name().to_owned(),
        });
    };
    let secret_name = format!("{}/{}", r.namespace, r.name);
    if r.namespace.is_empty() || r.name.is_empty() {
        return Err(MemberError::Invalid {
            what: format!("cluster {}: spec.secretRef", cluster.name()),
            message: "both namespace and name are required".into(),
        });
    }
    let secrets: kube::Api<Secret> = kube::Api::namespaced(control.clone(), &r.namespace);
    let secret = match secrets.get_opt(&r.name).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(MemberError::SecretNotFound {
                secret: secret_name,
                cluster: cluster.name().to_owned(),
            });
        }
        Err(source) => {
            return Err(MemberError::SecretRead {
                secret: secret_name,
                source,
            });
        }
    };
    // What the client depends on: rebuilt when any of it changes.
    let fingerprint = format!(
        "{secret_name}@{}|{}|{}",
        secret.metadata.resource_version.as_deref().unwrap_or(""),
        cluster.spec.api_endpoint,
        cluster.spec.insecure_skip_tls_verification
    );
    Ok((config_from_secret(cluster, &secret).await?, fingerprint))
}

/// A client for `config`.
///
/// # Errors
/// [`MemberError::Invalid`] when the client cannot be built (e.g. bad TLS material).
pub fn connect(config: &kube::Config) -> Result<Client, MemberError> {
    Client::try_from(config.clone()).map_err(|e| MemberError::Invalid {
        what: format!("client for {}", config.cluster_url),
        message: e.to_string(),
    })
}

/// A fresh client for `config` with every timeout set to `timeout`: probes use one per probe so
/// that a pooled connection to a stopped server cannot hide that the server is gone.
///
/// # Errors
/// [`MemberError::Invalid`] when the client cannot be built (e.g. bad TLS material).
pub fn probe_client(config: &kube::Config, timeout: Duration) -> Result<Client, MemberError> {
    let mut c = config.clone();
    c.connect_timeout = Some(timeout);
    c.read_timeout = Some(timeout);
    c.write_timeout = Some(timeout);
    Client::try_from(c).map_err(|e| MemberError::Invalid {
        what: format!("client for {}", config.cluster_url),
        message: e.to_string(),
    })
}

/// A member reached over the network.
#[derive(Clone)]
pub struct Remote {
    /// The client the execution controller uses.
    pub client: Client,
    /// Its configuration (probes build fresh clients from it).
    pub config: kube::Config,
    /// What the client was built from; a different fingerprint means rebuild.
    pub fingerprint: String,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.config.cluster_url.to_string())
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// A remote member from its configuration.
    ///
    /// # Errors
    /// [`MemberError::Invalid`] when the client cannot be built.
    pub fn new(config: kube::Config, fingerprint: String) -> Result<Self, MemberError> {
        let what = format!("client for {}", config.cluster_url);
        let client = Client::try_from(config.clone()).map_err(|e| MemberError::Invalid {
            what,
            message: e.to_string(),
        })?;
        Ok(Remote {
            client,
            config,
            fingerprint,
        })
    }
}

/// The most kinds watched in one member (each a list + watch on the member's API server);
/// beyond it a kind's changes are only seen on resync.
pub const MAX_WATCHED_KINDS: usize = 256;

/// The watches of one member's objects: the kinds watched and their tasks (aborted on drop).
#[derive(Default)]
struct Watched {
    kinds: BTreeSet<(String, String)>,
    tasks: tokio::task::JoinSet<()>,
}

/// The member clusters the controllers can reach, by cluster name: the fixed (simulated)
/// members given at construction, and remote members that come and go at run time.
#[derive(Clone, Default)]
pub struct Members {
    fixed: Arc<BTreeMap<String, Client>>,
    remote: Arc<RwLock<BTreeMap<String, Remote>>>,
    /// Watches of member objects by member, started by [`Members::watch`] with the member's
    /// client of the time and dropped when that client is replaced or removed.
    watched: Arc<Mutex<BTreeMap<String, Watched>>>,
    /// Namespaces known to exist in each member ([`Members::namespace_known`]), forgotten with
    /// the member's client.
    namespaces: Arc<Mutex<BTreeMap<String, HashSet<String>>>>,
}

/// Namespaces remembered per member before the memory starts over.
const MAX_KNOWN_NAMESPACES: usize = 4096;

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Members {
    /// Fixed members from `(name, client)` pairs.
    pub fn new(clients: impl IntoIterator<Item = (String, Client)>) -> Self {
        Members {
            fixed: Arc::new(clients.into_iter().collect()),
            remote: Arc::default(),
            watched: Arc::default(),
            namespaces: Arc::default(),
        }
    }

    /// Simulated members `names` as logical clusters of the embedded server behind `router`.
    pub fn simulated(router: &axum::Router, names: &[String], token: Option<&str>) -> Self {
        Self::new(
            names
                .iter()
                .map(|n| (n.clone(), in_process(router.clone(), Some(n), token))),
        )
    }

    /// The client of member `name`, fixed or remote.
    pub fn get(&self, name: &str) -> Option<Client> {
        if let Some(c) = self.fixed.get(name) {
            return Some(c.clone());
        }
        self.remote.read().ok()?.get(name).map(|r| r.client.clone())
    }

    /// Whether `name` is a fixed (simulated) member.
    pub fn is_fixed(&self, name: &str) -> bool {
        self.fixed.contains_key(name)
    }

    /// The fixed (simulated) members; remote members are not included (see [`Members::remote`]).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Client)> {
        self.fixed.iter()
    }

    /// Remote member `name`.
    pub fn remote(&self, name: &str) -> Option<Remote> {
        self.remote.read().ok()?.get(name).cloned()
    }

    /// The names of the remote members.
    pub fn remote_names(&self) -> Vec<String> {
        self.remote
            .read()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Add or replace remote member `name`. Its object watches (made with the client replaced)
    /// stop; the execution controller starts them again with the new client.
    pub fn insert_remote(&self, name: &str, remote: Remote) {
        if let Ok(mut m) = self.remote.write() {
            m.insert(name.to_owned(), remote);
        }
        self.unwatch(name);
    }

    /// Remove remote member `name` and stop its object watches; whether it was there.
    pub fn remove_remote(&self, name: &str) -> bool {
        let removed = self
            .remote
            .write()
            .map(|mut m| m.remove(name).is_some())
            .unwrap_or(false);
        self.unwatch(name);
        removed
    }

    /// Watch the objects of `resource` in member `name` (once per member and kind), publishing
    /// their changes as [`crate::Topic::Member`] on `events` — the objects of the first list
    /// too, since the execution controller starts a kind's watch after it applied the first
    /// object of it. This is how a member copy's status reaches its Work without waiting for a
    /// resync, whatever its kind (Karmada's work status controller registers an informer per
    /// member and resource the same way). Returns whether the kind is watched.
    pub fn watch(
        &self,
        name: &str,
        resource: &kube::api::ApiResource,
        events: &crate::Bus,
    ) -> bool {
        let Ok(mut watched) = self.watched.lock() else {
            return false;
        };
        let key = (resource.api_version.clone(), resource.kind.clone());
        let count = match watched.get(name) {
            Some(e) if e.kinds.contains(&key) => return true,
            Some(e) => e.kinds.len(),
            None => 0,
        };
        if count >= MAX_WATCHED_KINDS {
            tracing::warn!(cluster = %name, api_version = %key.0, kind = %key.1, "too many kinds watched in the member ({MAX_WATCHED_KINDS}); this kind's status is collected on resync only");
            return false;
        }
        let Some(client) = self.get(name) else {
            return false;
        };
        let entry = watched.entry(name.to_owned()).or_default();
        crate::publish_member_changes(&client, resource, events, &mut entry.tasks);
        tracing::debug!(cluster = %name, api_version = %key.0, kind = %key.1, "watching the member's objects of a kind");
        entry.kinds.insert(key);
        true
    }

    /// The kinds watched in member `name`, as `(apiVersion, kind)`.
    pub fn watched(&self, name: &str) -> Vec<(String, String)> {
        self.watched
            .lock()
            .ok()
            .and_then(|w| w.get(name).map(|e| e.kinds.iter().cloned().collect()))
            .unwrap_or_default()
    }

    /// Stop the object watches of member `name` and forget what is known of it.
    fn unwatch(&self, name: &str) {
        let stopped = self.watched.lock().ok().and_then(|mut w| w.remove(name));
        // Dropped outside the lock: dropping the task set aborts its tasks.
        drop(stopped);
        if let Ok(mut known) = self.namespaces.lock() {
            known.remove(name);
        }
    }

    /// Whether namespace `namespace` of member `name` was seen or made by this process (so the
    /// execution controller need not read it before each apply into it).
    pub fn namespace_known(&self, name: &str, namespace: &str) -> bool {
        self.namespaces
            .lock()
            .is_ok_and(|k| k.get(name).is_some_and(|n| n.contains(namespace)))
    }

    /// Remember that namespace `namespace` of member `name` exists.
    pub fn namespace_exists(&self, name: &str, namespace: &str) {
        if let Ok(mut known) = self.namespaces.lock() {
            let set = known.entry(name.to_owned()).or_default();
            if set.len() >= MAX_KNOWN_NAMESPACES {
                set.clear();
            }
            set.insert(namespace.to_owned());
        }
    }

    /// Forget namespace `namespace` of member `name` (an apply into it found it gone).
    pub fn namespace_gone(&self, name: &str, namespace: &str) {
        if let Ok(mut known) = self.namespaces.lock()
            && let Some(set) = known.get_mut(name)
        {
            set.remove(namespace);
        }
    }

    /// Every member's name, fixed then remote.
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = self.fixed.keys().cloned().collect();
        out.extend(self.remote_names());
        out
    }
}

/// For tests: an embedded server over a store in a temp dir (kept alive by the returned
/// directory) and `names` as simulated members of it.
#[cfg(test)]
pub(crate) fn simulated_for_test(
    names: &[&str],
) -> (
    tempfile::TempDir,
    Arc<flotilla_apiserver::ApiServer>,
    Members,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = flotilla_apiserver::ApiServer::new(
        flotilla_apiserver::Store::open(dir.path()).expect("store opens"),
        flotilla_apiserver::ServerOptions::default(),
    );
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let members = Members::simulated(&server.router(), &names, None);
    (dir, server, members)
}

/// Check that `name` can name a Cluster: a DNS-1123 label of at most 48 characters.
///
/// # Errors
/// [`MemberError::Invalid`] naming what is wrong.
pub fn validate_cluster_name(name: &str) -> Result<(), MemberError> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(MemberError::Invalid {
            what: format!("cluster name {name:?}"),
            message: "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending with an alphanumeric) of at most 48 characters".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_watched_kind_reports_member_objects_from_its_first_list_until_the_member_goes() {
        use crate::controller::{Targets, work_of_member};
        use flotilla_api::labels;
        use kube::api::{Api, DynamicObject, Patch, PatchParams};
        use serde_json::json;

        let (_dir, _server, members) = simulated_for_test(&["m1"]);
        let resource = crate::api_resource("v1", "ConfigMap");
        let cms: Api<DynamicObject> =
            Api::namespaced_with(members.get("m1").expect("m1"), "default", &resource);
        let pp = PatchParams::apply("test");
        let cm = |data: &str| {
            Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "copy", "annotations": {
                    labels::WORK_NAMESPACE: "karmada-es-m1", labels::WORK_NAME: "w1"}},
                "data": {"k": data}}))
        };
        let events = crate::Bus::default();
        let changes = events.subscribe(Box::new(work_of_member));
        let work = Targets::Objects(vec![("karmada-es-m1".into(), "w1".into())]);
        let next = || tokio::time::timeout(Duration::from_secs(10), changes.next());

        // Applied before the watch starts: the first list reports it.
        cms.patch("copy", &pp, &cm("1")).await.expect("apply");
        assert!(members.watch("m1", &resource, &events));
        assert!(members.watch("m1", &resource, &events), "watched once");
        assert_eq!(
            members.watched("m1"),
            vec![("v1".to_owned(), "ConfigMap".to_owned())]
        );
        assert_eq!(next().await.expect("the listed copy"), work);
        cms.patch("copy", &pp, &cm("2")).await.expect("apply");
        assert_eq!(next().await.expect("the changed copy"), work);
        // An unknown member has nothing to watch with.
        assert!(!members.watch("m2", &resource, &events));

        // The member's client goes: so does the watch.
        members.remove_remote("m1");
        assert!(members.watched("m1").is_empty());
        cms.patch("copy", &pp, &cm("3")).await.expect("apply");
        assert!(
            tokio::time::timeout(Duration::from_millis(500), changes.next())
                .await
                .is_err(),
            "no change reported once unwatched"
        );
    }

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
    }

    fn cluster(endpoint: &str, insecure: bool) -> Cluster {
        let mut c = Cluster::default();
        c.metadata.name = Some("edge".into());
        c.spec.sync_mode = "Push".into();
        c.spec.api_endpoint = endpoint.into();
        c.spec.insecure_skip_tls_verification = insecure;
        c
    }

    fn secret(data: &[(&str, &str)]) -> Secret {
        let mut s = Secret::default();
        s.metadata.namespace = Some("karmada-cluster".into());
        s.metadata.name = Some("edge".into());
        s.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        );
        s
    }

    #[tokio::test]
    async fn karmada_token_secrets_build_a_config_and_bad_ones_name_the_secret() {
        let ok = config_from_secret(
            &cluster("https://10.0.0.1:6443", true),
            &secret(&[("token", "abc\n")]),
        )
        .await
        .expect("config");
        assert_eq!(ok.cluster_url.to_string(), "https://10.0.0.1:6443/");
        assert!(ok.accept_invalid_certs);

        let e = config_from_secret(&cluster("", true), &secret(&[("token", "abc")]))
            .await
            .expect_err("no endpoint");
        assert!(
            e.to_string().contains("spec.apiEndpoint")
                && e.to_string().contains("karmada-cluster/edge"),
            "{e}"
        );
        let e = config_from_secret(
            &cluster("https://10.0.0.1:6443", false),
            &secret(&[("token", "abc")]),
        )
        .await
        .expect_err("no CA");
        assert!(
            e.to_string().contains("caBundle") && e.to_string().contains("karmada-cluster/edge"),
            "{e}"
        );
        let e = config_from_secret(
            &cluster("https://10.0.0.1:6443", false),
            &secret(&[("other", "x")]),
        )
        .await
        .expect_err("no keys");
        assert!(
            e.to_string()
                .contains("Secret karmada-cluster/edge has neither"),
            "{e}"
        );
        let e = config_from_secret(
            &cluster("", false),
            &secret(&[("kubeconfig", "clusters: [")]),
        )
        .await
        .expect_err("bad kubeconfig");
        assert!(
            e.to_string()
                .contains("key `kubeconfig` of Secret karmada-cluster/edge"),
            "{e}"
        );
        let e = config_from_secret(
            &cluster("https://h:1", false),
            &secret(&[("token", "t"), ("caBundle", "not a pem")]),
        )
        .await
        .expect_err("bad CA");
        assert!(e.to_string().contains("karmada-cluster/edge"), "{e}");
    }
}
