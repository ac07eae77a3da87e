//! Flotilla's embedded Kubernetes-compatible API server.
//!
//! `kubectl apply -f deployment.yaml -f propagationpolicy.yaml` works against the `flotilla`
//! binary itself: no etcd, no kube-apiserver. Start with [`start`] (what `flotilla up` runs) or,
//! in tests, build an [`ApiServer`] over a [`Store`] and plug [`ApiServer::router`] into
//! `kube::Client::new` with no socket at all.
//!
//! **Store.** [`Store`] is an MVCC revision log on redb (kine's design): one global revision
//! counter that is every object's `resourceVersion`, a log of changes that watches replay from,
//! and compaction with a retained window. Writes are group-committed and acknowledged only
//! after the commit is fsync'd.
//!
//! **API.** Objects of every kind are stored unstructured (JSON). The [`registry`] lists the
//! served kinds: the built-in kinds Karmada uses as templates and the Karmada groups. The
//! server implements discovery, OpenAPI v3 with every served kind's schema ([`openapi`]: what
//! `kubectl explain` reads and what `fieldValidation` checks unknown fields against), CRUD, list
//! with selectors and paging, watch (resume, bookmarks, in-stream 410), the status subresource,
//! JSON/merge/strategic merge patch and server-side apply with field managers and conflicts.
//! An optional [`Admission`] ([`admission`]) defaults and validates objects before they are
//! stored; rejections are `422 Invalid` with the offending fields.
//!
//! **Logical clusters.** A path prefix `/clusters/<name>/` selects a separate keyspace, so
//! simulated member clusters share one process and one store.
//!
//! **Security.** [`tls::Credentials`] generates a CA, a server certificate and a bearer token,
//! the administrator's (`system:masters`); a static token file ([`Config::token_auth_file`],
//! [`auth::TokenFile`]) adds users, whom RBAC over the stored Roles, ClusterRoles and bindings
//! restricts ([`authz`]: 403 Forbidden as kube-apiserver words it). Anonymous access is opt-in,
//! allows everything and is only ever served on loopback. Browser requests from other
//! origins are refused (403) and object bodies must be JSON, YAML or Kubernetes protobuf (415), so
//! a web page cannot write through a loopback server without a CORS preflight; bodies, patches
//! and stored objects are bounded in size and nesting as kube-apiserver bounds them.

pub mod admission;
pub mod apply;
pub mod auth;
pub mod authz;
pub mod bootstrap;
pub mod custom_metrics;
mod decode;
pub mod defaults;
pub mod discovery;
mod duration;
pub mod error;
pub mod events;
mod fs;
mod jsonpath;
mod limits;
pub mod metrics;
pub mod openapi;
mod protobuf;
pub mod proxy;
pub mod registry;
pub mod sa_token;
pub mod scale;
pub mod selector;
pub mod server;
pub mod smp;
pub mod store;
pub mod table;
mod time;
pub mod tls;
mod validation;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tower::ServiceExt as _;

pub use admission::{Admission, AdmissionError};
pub use error::ApiError;
pub use server::{ApiServer, ServerOptions, WatchStats};
pub use store::{Store, StoreError, StoreOptions, StoreStats};

/// A failure to start the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The store could not be opened.
    #[error("opening the store")]
    Store(#[from] StoreError),
    /// Credentials could not be loaded or generated.
    #[error("preparing TLS credentials")]
    Tls(#[from] tls::TlsError),
    /// The listener could not be bound.
    #[error("binding {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The static token file could not be read or is not valid (the message names the file
    /// and line, never a token).
    #[error("{0}")]
    TokenFile(String),
    /// The ServiceAccount token signing key could not be read or created.
    #[error("ServiceAccount signing key: {0}")]
    ServiceAccountKey(String),
    /// A client CA file was given without TLS.
    #[error("a client CA file needs TLS")]
    ClientCaWithoutTls,
    /// Anonymous access was requested on a non-loopback address.
    #[error("anonymous access is only allowed on a loopback address, not {addr}")]
    AnonymousNotLoopback {
        /// The address.
        addr: SocketAddr,
    },
}

/// How to start the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the store and credentials live.
    pub data_dir: PathBuf,
    /// The address to listen on (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Serve HTTPS with generated credentials and require the bearer token.
    pub tls: bool,
    /// Also accept requests without a token (loopback only).
    pub anonymous: bool,
    /// kube-apiserver's static token file (`token,user,uid,"group1,group2"`): more users, whom
    /// RBAC restricts ([`auth::TokenFile`], [`authz`]).
    pub token_auth_file: Option<PathBuf>,
    /// kube-apiserver's `--client-ca-file`: a client certificate signed by one of these CAs
    /// authenticates its subject's CN as the user and its O values as groups ([`tls::ClientCa`]).
    /// Needs `tls`.
    pub client_ca_file: Option<PathBuf>,
    /// Revisions kept in the log for watch resumption.
    pub retain_revisions: u64,
    /// How often compaction runs.
    pub compact_interval: Duration,
    /// How often watches get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// Defaults and validation run before objects are stored ([`admission`]); none by default.
    pub admission: Option<Arc<dyn Admission>>,
    /// The store's tunables, among them the watch window ([`store::WATCH_WINDOW`]).
    pub store: StoreOptions,
    /// How long a watch whose client stopped reading is kept once its queue is full
    /// ([`ServerOptions::watch_stall_timeout`]).
    pub watch_stall_timeout: Duration,
}

impl Config {
    /// Defaults: TLS on loopback, random port, 100k revisions retained.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Config {
            data_dir: data_dir.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: true,
            anonymous: false,
            token_auth_file: None,
            client_ca_file: None,
            retain_revisions: 100_000,
            compact_interval: Duration::from_secs(60),
            bookmark_interval: Duration::from_secs(30),
            admission: None,
            store: StoreOptions::default(),
            watch_stall_timeout: server::WATCH_STALL_TIMEOUT,
        }
    }
}

/// A started server.
#[derive(Debug)]
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// `https://..` or `http://..`.
    pub url: String,
    /// A kubeconfig for this server.
    pub kubeconfig: String,
    /// The server state.
    pub server: Arc<ApiServer>,
    /// The serving task; it ends when the shutdown future passed to [`start`] resolves.
    pub task: tokio::task::JoinHandle<()>,
}

/// Open the store, bind, and serve until `shutdown` resolves.
///
/// # Errors
/// Fails when the store, the credentials or the listener cannot be set up.
pub async fn start(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Running, StartError> {
    if config.anonymous && !config.addr.ip().is_loopback() {
        return Err(StartError::AnonymousNotLoopback { addr: config.addr });
    }
    let token_file = match &config.token_auth_file {
        Some(path) => auth::TokenFile::load(path).map_err(StartError::TokenFile)?,
        None => auth::TokenFile::default(),
    };
    if config.client_ca_file.is_some() && !config.tls {
        return Err(StartError::ClientCaWithoutTls);
    }
    let client_ca = match &config.client_ca_file {
        Some(path) => Some(Arc::new(tls::ClientCa::load(path)?)),
        None => None,
    };
    // Owner-only, as the store and credentials inside are.
    fs::private_dir(&config.data_dir)
        .map_err(|e| StoreError::Storage(Box::new(redb::Error::Io(e))))?;
    let store = Store::open_with(&config.data_dir.join("store"), &config.store)?;
    let policy = bootstrap::reconcile(&store, server::ROOT_CLUSTER).await?;
    tracing::info!(
        created = policy.created.len(),
        updated = policy.updated.len(),
        skipped = ?policy.skipped,
        "bootstrap RBAC policy reconciled"
    );
    let creds = if config.tls {
        Some(tls::Credentials::load_or_create(
            &config.data_dir.join("pki"),
        )?)
    } else {
        None
    };
    // ServiceAccount tokens only where requests carry credentials over TLS.
    let service_account_key = if creds.is_some() {
        Some(Arc::new(
            sa_token::SigningKey::load_or_create(&config.data_dir.join("pki"))
                .map_err(StartError::ServiceAccountKey)?,
        ))
    } else {
        None
    };
    let options = ServerOptions {
        token: creds.as_ref().map(|c| c.token.clone()),
        anonymous: config.anonymous || creds.is_none(),
        token_file,
        client_ca: client_ca.clone(),
        service_account_key,
        bookmark_interval: config.bookmark_interval,
        admission: config.admission.clone(),
        watch_stall_timeout: config.watch_stall_timeout,
    };
    let server = ApiServer::new(store.clone(), options);
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|source| StartError::Bind {
            addr: config.addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: config.addr,
        source,
    })?;
    let host = if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    let url = format!(
        "{}://{host}:{}",
        if creds.is_some() { "https" } else { "http" },
        addr.port()
    );
    let kubeconfig = tls::kubeconfig(
        &url,
        creds.as_ref().map(|c| c.ca_pem.as_str()),
        creds.as_ref().map(|c| c.token.as_str()),
    );
    let router = server.router();
    let tls_config = match &creds {
        Some(c) => Some(c.server_config(client_ca.as_deref())?),
        None => None,
    };
    let retain = config.retain_revisions;
    let interval = config.compact_interval;
    let compactor = tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tick.tick().await;
            let _ = store.compact(retain).await;
        }
    });
    let task = tokio::spawn(async move {
        serve(listener, router, tls_config, shutdown).await;
        compactor.abort();
    });
    Ok(Running {
        addr,
        url,
        kubeconfig,
        server,
        task,
    })
}

/// Serve `router` on `listener` (TLS when `tls` is set) until `shutdown` resolves.
///
/// Each connection's requests carry a [`server::ConnectionCloser`], through which a watch whose
/// client stopped reading closes the connection (and frees its buffers), and, when the client
/// presented a certificate, its [`tls::ClientChain`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let closer = server::ConnectionCloser::default();
        let request_closer = closer.clone();
        let router = router.clone();
        let with_extensions = move |chain: Option<Arc<tls::ClientChain>>| {
            router.map_request(move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(request_closer.clone());
                if let Some(chain) = &chain {
                    req.extensions_mut().insert(Arc::clone(chain));
                }
                req
            })
        };
        tokio::spawn(async move {
            let http = hyper::server::conn::http1::Builder::new();
            match acceptor {
                Some(acceptor) => {
                    let Ok(tls_stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let chain = tls_stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .filter(|c| !c.is_empty())
                        .map(|c| Arc::new(tls::ClientChain::new(c.to_vec())));
                    let service =
                        hyper_util::service::TowerToHyperService::new(with_extensions(chain));
                    let io = hyper_util::rt::TokioIo::new(tls_stream);
                    tokio::select! {
                        _ = http.serve_connection(io, service) => {}
                        () = closer.closed() => {}
                    }
                }
                None => {
                    let service =
                        hyper_util::service::TowerToHyperService::new(with_extensions(None));
                    let io = hyper_util::rt::TokioIo::new(stream);
                    tokio::select! {
                        _ = http.serve_connection(io, service) => {}
                        () = closer.closed() => {}
                    }
                }
            }
        });
    }
}
