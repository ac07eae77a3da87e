//! Interpreter webhooks (`ResourceInterpreterWebhookConfiguration`, config.karmada.io/v1alpha1),
//! as Karmada's `pkg/resourceinterpreter/customized/webhook`.
//!
//! Each webhook of each configuration is one [`ResourceInterpreter`] whose hook follows its
//! rules (operations, API groups, versions and kinds, each possibly `*`). A call POSTs a
//! `ResourceInterpreterContext` request (uid, kind, name, namespace, operation, object,
//! observedObject, replicas, aggregatedStatus) and checks the response as Karmada does: the
//! response must be present and carry the request's uid; an unsuccessful one must say why
//! (`status`); each operation's field must be there (`replicas`, `rawStatus`, `healthy`…); a
//! patch (Retain, ReviseReplica, AggregateStatus) must be a `JSONPatch`.
//!
//! Failures are Karmada's: there is no failure policy (the configuration has no such field) —
//! an unreachable webhook, a timeout, an HTTP error, an oversized or malformed reply all fail the
//! operation, and the caller reports it; nothing falls back to another interpreter.
//!
//! Transport: HTTPS verified with the webhook's `caBundle` (the system roots without one), or
//! plain HTTP for `http://` URLs (Karmada only admits `https://` URLs; the embedded server's
//! admission does the same, so plain HTTP only reaches here from tests or objects written around
//! admission). A `service` reference is called at `https://NAME.NAMESPACE.svc:PORT/PATH`, as
//! Kubernetes' default service resolver does (without a cluster DNS that name does not resolve:
//! the embedded control plane is meant for `url` webhooks). One connection per call, bounded by
//! the webhook's `timeoutSeconds` (10 by default) from connect to the last byte, and a reply of
//! at most [`MAX_RESPONSE_BYTES`].
//!
//! The interpreter trait is synchronous; a call from a task on the multi-thread runtime runs
//! under `block_in_place` (the worker hands its other tasks off), and from anywhere else on a
//! scoped thread with its own small runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use flotilla_api::interpreter::{
    Component, DependentObjectReference, GroupVersionKind, INTERPRETER_CONTEXT_VERSION,
    ResourceInterpreterContext, ResourceInterpreterRequest, ResourceInterpreterResponse,
    ResourceInterpreterWebhook, ResourceInterpreterWebhookConfiguration, RuleWithOperations,
    WEBHOOK_CONFIGURATION_KIND,
};
use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::PluginError;
use flotilla_core::interpreter::{Operation, Replicas, ResourceInterpreter};
use serde_json::Value;

/// The largest webhook reply read (bigger ones fail the call).
pub const MAX_RESPONSE_BYTES: usize = 3 << 20;

/// The longest `caBundle` accepted.
const MAX_CA_BUNDLE_BYTES: usize = 1 << 20;

/// Where and how a webhook is called.
#[derive(Debug, Clone)]
struct Endpoint {
    https: bool,
    host: String,
    port: u16,
    /// Path and query, starting with `/`.
    path: String,
}

/// Parse an `http(s)://host[:port][/path]` URL (no user info, no fragment).
fn parse_url(url: &str) -> Result<Endpoint, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("invalid url: {e}"))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err("url: the scheme must be https".into()),
    };
    let authority = uri.authority().ok_or("url: a host is required")?;
    if authority.as_str().contains('@') {
        return Err("url: user information is not permitted".into());
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err("url: a host is required".into());
    }
    let path = uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str);
    Ok(Endpoint {
        https,
        host: host.to_owned(),
        port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
        path: if path.is_empty() { "/" } else { path }.to_owned(),
    })
}

/// One interpreter webhook, ready to call.
pub struct Webhook {
    /// `configuration/webhook`, Karmada's webhook UID (the first matching one by UID answers).
    uid: String,
    rules: Vec<RuleWithOperations>,
    timeout: Duration,
    /// The endpoint and TLS settings, or why the webhook cannot be called (every call fails
    /// with it, as Karmada's client construction error does).
    target: Result<(Endpoint, Option<Arc<rustls::ClientConfig>>), String>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("uid", &self.uid)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The TLS client settings verifying with `ca_bundle` (base64 of PEM, as Kubernetes' `[]byte`
/// serializes), or the system roots without one.
fn tls_config(ca_bundle: Option<&str>) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle.filter(|b| !b.is_empty()) {
        Some(b64) => {
            if b64.len() > MAX_CA_BUNDLE_BYTES {
                return Err("caBundle is too large".into());
            }
            let pem = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| format!("caBundle is not base64: {e}"))?;
            for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("caBundle: invalid certificate: {e}"))?;
            }
            if roots.is_empty() {
                return Err("caBundle holds no PEM certificate".into());
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A fresh request uid (unique per process and call; the reply must echo it).
fn new_uid() -> String {
    use sha2::Digest as _;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let digest = sha2::Sha256::digest(format!("{}/{now}/{n}", std::process::id()));
    let h: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Whether `items` has `*` or exactly `want`.
fn exact_or_wildcard(want: &str, items: &[String]) -> bool {
    items.iter().any(|i| i == "*" || i == want)
}

/// Run `fut` to completion from synchronous code (see the module documentation).
fn block_on<F>(fut: F) -> Result<F::Output, String>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    if let Ok(handle) = Handle::try_current()
        && handle.runtime_flavor() == RuntimeFlavor::MultiThread
    {
        return Ok(tokio::task::block_in_place(|| handle.block_on(fut)));
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|rt| rt.block_on(fut))
                .map_err(|e| format!("starting a runtime: {e}"))
        })
        .join()
        .unwrap_or_else(|_| Err("the webhook call panicked".into()))
    })
}

/// POST `body` to `endpoint`; the reply's body (2xx only), at most [`MAX_RESPONSE_BYTES`].
async fn post(
    endpoint: &Endpoint,
    tls: Option<&Arc<rustls::ClientConfig>>,
    body: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let tcp = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .map_err(|e| format!("connecting to {}:{}: {e}", endpoint.host, endpoint.port))?;
    let _ = tcp.set_nodelay(true);
    let host_header =
        if (endpoint.https && endpoint.port == 443) || (!endpoint.https && endpoint.port == 80) {
            endpoint.host.clone()
        } else {
            format!("{}:{}", endpoint.host, endpoint.port)
        };
    let request = http::Request::post(endpoint.path.as_str())
        .header(http::header::HOST, host_header)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::CONNECTION, "close")
        .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
        .map_err(|e| format!("building the request: {e}"))?;
    if endpoint.https {
        let config = tls.ok_or("no TLS settings")?;
        let name = rustls_pki_types::ServerName::try_from(endpoint.host.clone())
            .map_err(|e| format!("invalid server name {:?}: {e}", endpoint.host))?;
        let stream = tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with {}: {e}", endpoint.host))?;
        exchange(hyper_util::rt::TokioIo::new(stream), request).await
    } else {
        exchange(hyper_util::rt::TokioIo::new(tcp), request).await
    }
}

/// One HTTP/1.1 request on `io`, driving the connection until the reply is read.
async fn exchange<I>(
    io: I,
    request: http::Request<http_body_util::Full<hyper::body::Bytes>>,
) -> Result<Vec<u8>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    use http_body_util::BodyExt as _;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    let reply = async move {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("sending the request: {e}"))?;
        let status = response.status();
        let limited = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    format!("the response is larger than {MAX_RESPONSE_BYTES} bytes")
                } else {
                    format!("reading the response: {e}")
                }
            })?
            .to_bytes();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).into_owned();
            return Err(format!("the server responded {status}: {text}"));
        }
        Ok(bytes.to_vec())
    };
    let mut reply = std::pin::pin!(reply);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = &mut reply => r,
        c = &mut conn => match c {
            // The connection is done: the reply is complete or failed.
            Ok(()) => reply.await,
            Err(e) => Err(format!("connection: {e}")),
        },
    }
}

/// What one call is about.
struct Call<'a> {
    op: Operation,
    object: &'a Value,
    observed: Option<&'a Value>,
    replicas: i32,
    items: &'a [AggregatedStatusItem],
}

impl Webhook {
    /// The interpreter of `hook` of the configuration named `configuration`. A webhook that
    /// cannot be called (bad URL, bad `caBundle`, no known context version) is still returned:
    /// its calls fail with the reason.
    pub fn new(configuration: &str, hook: &ResourceInterpreterWebhook) -> Webhook {
        let timeout = hook
            .timeout_seconds
            .unwrap_or(ResourceInterpreterWebhook::DEFAULT_TIMEOUT_SECONDS)
            .clamp(1, 30);
        let target = Self::target(hook);
        Webhook {
            uid: format!("{configuration}/{}", hook.name),
            rules: hook.rules.clone(),
            timeout: Duration::from_secs(u64::try_from(timeout).unwrap_or(10)),
            target,
        }
    }

    fn target(
        hook: &ResourceInterpreterWebhook,
    ) -> Result<(Endpoint, Option<Arc<rustls::ClientConfig>>), String> {
        if !hook
            .interpreter_context_versions
            .iter()
            .any(|v| v == INTERPRETER_CONTEXT_VERSION)
        {
            return Err(
                "webhook does not accept known ResourceInterpreterContext versions (v1alpha1)"
                    .into(),
            );
        }
        let cc = &hook.client_config;
        let endpoint = match (&cc.url, &cc.service) {
            (Some(url), None) => parse_url(url)?,
            (None, Some(svc)) => {
                let port = u16::try_from(svc.port.unwrap_or(443))
                    .map_err(|_| "service port out of range".to_owned())?;
                let path = svc.path.as_deref().unwrap_or("/");
                Endpoint {
                    https: true,
                    host: format!("{}.{}.svc", svc.name, svc.namespace),
                    port,
                    path: if path.starts_with('/') {
                        path.to_owned()
                    } else {
                        format!("/{path}")
                    },
                }
            }
            _ => return Err("clientConfig: exactly one of url or service is required".into()),
        };
        let tls = if endpoint.https {
            Some(tls_config(cc.ca_bundle.as_deref())?)
        } else {
            None
        };
        Ok((endpoint, tls))
    }

    /// Karmada's webhook UID: `configuration/webhook`.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    fn fail(&self, message: impl std::fmt::Display) -> PluginError {
        PluginError::failed(&self.uid, message.to_string())
    }

    fn invalid(&self, message: impl std::fmt::Display) -> PluginError {
        PluginError::InvalidOutput {
            plugin: self.uid.clone(),
            message: format!("received invalid webhook response: {message}"),
        }
    }

    /// POST the request of `call` and check the reply as Karmada does.
    fn call(&self, call: &Call<'_>) -> Result<ResourceInterpreterResponse, PluginError> {
        let (endpoint, tls) = self.target.as_ref().map_err(|e| self.fail(e))?;
        let object = call.object;
        let (api_version, kind) = (
            object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or(""),
            object.get("kind").and_then(Value::as_str).unwrap_or(""),
        );
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let meta = |f: &str| {
            object
                .pointer(&format!("/metadata/{f}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let uid = new_uid();
        let context = ResourceInterpreterContext {
            api_version: flotilla_api::interpreter::CONFIG_API_VERSION.to_owned(),
            kind: "ResourceInterpreterContext".to_owned(),
            request: Some(ResourceInterpreterRequest {
                uid: uid.clone(),
                kind: GroupVersionKind {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    kind: kind.to_owned(),
                },
                name: meta("name"),
                namespace: meta("namespace"),
                operation: call.op.as_str().to_owned(),
                object: object.clone(),
                observed_object: call.observed.cloned(),
                replicas: Some(call.replicas),
                aggregated_status: call.items.to_vec(),
            }),
            response: None,
        };
        let body = serde_json::to_vec(&context).map_err(|e| self.fail(e))?;
        let timeout = self.timeout;
        let reply = block_on(async move {
            tokio::time::timeout(timeout, post(endpoint, tls.as_ref(), body)).await
        })
        .map_err(|e| self.fail(format!("failed to call webhook: {e}")))?;
        let bytes = match reply {
            Err(_) => {
                return Err(PluginError::Timeout {
                    plugin: self.uid.clone(),
                });
            }
            Ok(r) => r.map_err(|e| self.fail(format!("failed to call webhook: {e}")))?,
        };
        let reply: ResourceInterpreterContext =
            serde_json::from_slice(&bytes).map_err(|e| self.invalid(e))?;
        let response = reply
            .response
            .ok_or_else(|| self.invalid("webhook response was absent"))?;
        if response.uid != uid {
            return Err(self.invalid(format!(
                "expected response.uid {uid:?}, got {:?}",
                response.uid
            )));
        }
        if !response.successful {
            let status = response.status.as_ref().ok_or_else(|| {
                self.invalid("webhook require response.status when response.successful is false")
            })?;
            return Err(self.fail(format!(
                "webhook call failed, get status code: {}, msg: {}",
                status.code, status.message
            )));
        }
        self.verify(call.op, &response)?;
        Ok(response)
    }

    /// The checks of Karmada's `verifyResourceInterpreterContext` for a successful reply.
    fn verify(
        &self,
        op: Operation,
        response: &ResourceInterpreterResponse,
    ) -> Result<(), PluginError> {
        match op {
            Operation::InterpretReplica if response.replicas.is_none() => {
                Err(self.invalid("webhook returned nil response.replicas"))
            }
            Operation::InterpretStatus if response.raw_status.is_none() => {
                Err(self.invalid("webhook returned nill response.rawStatus"))
            }
            Operation::InterpretHealth if response.healthy.is_none() => {
                Err(self.invalid("webhook returned nil response.healthy"))
            }
            Operation::InterpretDependency => {
                for (i, d) in response.dependencies.iter().flatten().enumerate() {
                    if d.api_version.is_empty() {
                        return Err(self.invalid(format!(
                            "dependencies[{i}].apiVersion: missing required apiVersion"
                        )));
                    }
                    if d.kind.is_empty() {
                        return Err(
                            self.invalid(format!("dependencies[{i}].kind: missing required kind"))
                        );
                    }
                    if d.name.is_empty() && d.label_selector.is_none() {
                        return Err(self.invalid(format!(
                            "dependencies[{i}]: dependency can not leave name and labelSelector all empty"
                        )));
                    }
                }
                Ok(())
            }
            Operation::Retain | Operation::ReviseReplica | Operation::AggregateStatus => {
                let patch = response.patch.as_deref().unwrap_or("");
                match (patch.is_empty(), response.patch_type.as_deref()) {
                    (true, None) => Ok(()),
                    (_, None) => Err(self.invalid("webhook returned nil response.patchType")),
                    (true, Some(_)) => Err(self.invalid("webhook returned empty response.patch")),
                    (false, Some("JSONPatch")) => Ok(()),
                    (false, Some(t)) => Err(self.invalid(format!(
                        "webhook returned invalid response.patchType of {t:?}"
                    ))),
                }
            }
            _ => Ok(()),
        }
    }

    /// `object` with the reply's JSON patch applied (unchanged without one).
    fn patched(
        &self,
        object: &Value,
        response: &ResourceInterpreterResponse,
    ) -> Result<Value, PluginError> {
        let Some(b64) = response.patch.as_deref().filter(|p| !p.is_empty()) else {
            return Ok(object.clone());
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| self.invalid(format!("response.patch is not base64: {e}")))?;
        let patch: json_patch::Patch = serde_json::from_slice(&raw)
            .map_err(|e| self.invalid(format!("response.patch: {e}")))?;
        let mut out = object.clone();
        json_patch::patch(&mut out, &patch)
            .map_err(|e| self.fail(format!("applying the webhook's patch: {e}")))?;
        Ok(out)
    }

    fn simple(
        &self,
        op: Operation,
        object: &Value,
    ) -> Result<ResourceInterpreterResponse, PluginError> {
        self.call(&Call {
            op,
            object,
            observed: None,
            replicas: 0,
            items: &[],
        })
    }
}

impl ResourceInterpreter for Webhook {
    fn name(&self) -> &str {
        &self.uid
    }

    fn hook_enabled(&self, api_version: &str, kind: &str, op: Operation) -> bool {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.rules.iter().any(|r| {
            r.operations.iter().any(|o| o == "*" || o == op.as_str())
                && exact_or_wildcard(group, &r.api_groups)
                && exact_or_wildcard(version, &r.api_versions)
                && exact_or_wildcard(kind, &r.kinds)
        })
    }

    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        let r = self.simple(Operation::InterpretReplica, object)?;
        Ok(Replicas {
            replicas: r.replicas.unwrap_or_default(),
            requirements: r.replica_requirements,
        })
    }

    fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        Ok(self
            .simple(Operation::InterpretComponent, object)?
            .components
            .unwrap_or_default())
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        let replicas = i32::try_from(replicas)
            .map_err(|_| self.fail(format!("{replicas} replicas do not fit an int32")))?;
        let r = self.call(&Call {
            op: Operation::ReviseReplica,
            object,
            observed: None,
            replicas,
            items: &[],
        })?;
        self.patched(object, &r)
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        let r = self.call(&Call {
            op: Operation::Retain,
            object: desired,
            observed: Some(observed),
            replicas: 0,
            items: &[],
        })?;
        self.patched(desired, &r)
    }

    fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        let r = self.call(&Call {
            op: Operation::AggregateStatus,
            object,
            observed: None,
            replicas: 0,
            items,
        })?;
        self.patched(object, &r)
    }

    fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        let r = self.simple(Operation::InterpretStatus, observed)?;
        Ok(r.raw_status.filter(|s| !s.is_null()))
    }

    fn interpret_health(&self, observed: &Value) -> Result<bool, PluginError> {
        Ok(self
            .simple(Operation::InterpretHealth, observed)?
            .healthy
            .unwrap_or_default())
    }

    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        Ok(self
            .simple(Operation::InterpretDependency, object)?
            .dependencies
            .unwrap_or_default())
    }
}

/// The interpreters of every webhook of `configurations`, ordered by Karmada's webhook UID
/// (`configuration/webhook`): the first whose rules match answers.
pub fn webhooks(
    configurations: &[ResourceInterpreterWebhookConfiguration],
) -> Vec<Arc<dyn ResourceInterpreter>> {
    let mut hooks: Vec<Webhook> = configurations
        .iter()
        .flat_map(|c| {
            let name = c.metadata.name.as_deref().unwrap_or("");
            c.webhooks.iter().map(move |h| Webhook::new(name, h))
        })
        .collect();
    hooks.sort_by(|a, b| a.uid.cmp(&b.uid));
    hooks
        .into_iter()
        .map(|h| Arc::new(h) as Arc<dyn ResourceInterpreter>)
        .collect()
}

/// The `ResourceInterpreterWebhookConfiguration` resource.
pub fn resource() -> kube::api::ApiResource {
    crate::api_resource(
        flotilla_api::interpreter::CONFIG_API_VERSION,
        WEBHOOK_CONFIGURATION_KIND,
    )
}

/// Watch the webhook configurations and hand their interpreters to the chain
/// (`ctx.interpreters`) on every change.
pub fn spawn(ctx: &Arc<crate::Context>, tasks: &mut tokio::task::JoinSet<()>) {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, reflector, watcher};
    let ctx = Arc::clone(ctx);
    let resource = resource();
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(ctx.client.clone(), &resource);
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(crate::cached_as(&resource)),
    );
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut last: Option<Vec<(Option<String>, Vec<ResourceInterpreterWebhook>)>> = None;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "interpreter webhook configurations: watch error; retrying");
                    continue;
                }
            }
            let mut configs: Vec<ResourceInterpreterWebhookConfiguration> = store
                .state()
                .iter()
                .filter_map(|o| match crate::typed(o) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        tracing::warn!(error = %e, "skipping an undecodable interpreter webhook configuration");
                        None
                    }
                })
                .collect();
            configs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            // Only the webhooks matter, not metadata churn.
            let seen: Vec<(Option<String>, Vec<ResourceInterpreterWebhook>)> = configs
                .iter()
                .map(|c| (c.metadata.name.clone(), c.webhooks.clone()))
                .collect();
            if last.as_ref() == Some(&seen) {
                continue;
            }
            let hooks = webhooks(&configs);
            tracing::info!(webhooks = hooks.len(), "interpreter webhooks loaded");
            ctx.interpreters.set_webhooks(hooks);
            last = Some(seen);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::interpreter::{ServiceReference, WebhookClientConfig};
    use serde_json::json;
    use std::sync::Mutex;

    /// What the test server answers to one request: status, body, delay.
    type Reply = (u16, Vec<u8>, Duration);
    type Answer = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

    /// A webhook server on 127.0.0.1 (TLS when `tls` is given), on its own runtime; the
    /// requests it saw are kept.
    struct Server {
        port: u16,
        seen: Arc<Mutex<Vec<Value>>>,
        rt: tokio::runtime::Runtime,
    }

    fn server(tls: Option<Arc<rustls::ServerConfig>>, answer: Answer) -> Server {
        use http_body_util::BodyExt as _;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&seen);
        rt.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (answer, kept, tls) = (Arc::clone(&answer), Arc::clone(&kept), tls.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let (answer, kept) = (Arc::clone(&answer), Arc::clone(&kept));
                            async move {
                                let body = req.into_body().collect().await?.to_bytes();
                                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                                kept.lock().expect("lock").push(v.clone());
                                let (status, body, delay) = answer(&v);
                                tokio::time::sleep(delay).await;
                                Ok::<_, hyper::Error>(
                                    http::Response::builder()
                                        .status(status)
                                        .body(http_body_util::Full::new(hyper::body::Bytes::from(
                                            body,
                                        )))
                                        .expect("response"),
                                )
                            }
                        },
                    );
                    let builder = hyper::server::conn::http1::Builder::new();
                    match tls {
                        Some(config) => {
                            if let Ok(s) = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await
                            {
                                let _ = builder
                                    .serve_connection(hyper_util::rt::TokioIo::new(s), service)
                                    .await;
                            }
                        }
                        None => {
                            let _ = builder
                                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                                .await;
                        }
                    }
                });
            }
        });
        Server { port, seen, rt }
    }

    /// A self-signed certificate for `localhost`: the server's TLS settings and the CA bundle
    /// (base64 PEM) that trusts it.
    fn certificate() -> (Arc<rustls::ServerConfig>, String) {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        let key = rustls_pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .expect("server config");
        let bundle = base64::engine::general_purpose::STANDARD.encode(ck.cert.pem());
        (Arc::new(config), bundle)
    }

    fn hook(url: String, ca_bundle: Option<String>, timeout: Option<i32>) -> Webhook {
        Webhook::new(
            "examples",
            &ResourceInterpreterWebhook {
                name: "workloads.example.com".into(),
                client_config: WebhookClientConfig {
                    url: Some(url),
                    service: None,
                    ca_bundle,
                },
                rules: vec![RuleWithOperations {
                    operations: vec!["*".into()],
                    api_groups: vec!["example.com".into()],
                    api_versions: vec!["*".into()],
                    kinds: vec!["Workload".into()],
                }],
                timeout_seconds: timeout,
                interpreter_context_versions: vec!["v1alpha1".into()],
            },
        )
    }

    fn b64(v: &Value) -> String {
        base64::engine::general_purpose::STANDARD.encode(v.to_string())
    }

    /// Answers every operation for `Workload`s, as a webhook author would.
    fn workload_answer(request: &Value) -> Reply {
        let r = &request["request"];
        let object = &r["object"];
        let mut response = json!({"uid": r["uid"], "successful": true});
        match r["operation"].as_str().unwrap_or("") {
            "InterpretReplica" => {
                response["replicas"] = object["spec"]["size"].clone();
                response["replicaRequirements"] = json!({"resourceRequest": {"cpu": "250m"}});
            }
            "InterpretComponent" => {
                response["components"] =
                    json!([{"name": "main", "replicas": object["spec"]["size"]}]);
            }
            "ReviseReplica" => {
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(b64(
                    &json!([{"op": "replace", "path": "/spec/size", "value": r["replicas"]}])
                ));
            }
            "Retain" => {
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(b64(
                    &json!([{"op": "add", "path": "/spec/paused", "value": r["observedObject"]["spec"]["paused"]}])
                ));
            }
            "AggregateStatus" => {
                let ready: i64 = r["aggregatedStatus"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i["status"]["ready"].as_i64())
                    .sum();
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(b64(
                    &json!([{"op": "add", "path": "/status", "value": {"ready": ready}}])
                ));
            }
            "InterpretStatus" => {
                response["rawStatus"] = json!({"ready": object["status"]["ready"]})
            }
            "InterpretHealth" => {
                response["healthy"] = json!(object["status"]["ready"] == object["spec"]["size"]);
            }
            "InterpretDependency" => {
                response["dependencies"] = json!([
                    {"apiVersion": "v1", "kind": "ConfigMap", "namespace": object["metadata"]["namespace"], "name": object["spec"]["config"]},
                    {"apiVersion": "v1", "kind": "Secret", "namespace": object["metadata"]["namespace"], "labelSelector": {"matchLabels": {"app": "w"}}}
                ]);
            }
            _ => {
                response = json!({"uid": r["uid"], "successful": false, "status": {"code": 400, "message": "unknown operation"}})
            }
        }
        let body = json!({"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterContext", "response": response});
        (200, body.to_string().into_bytes(), Duration::ZERO)
    }

    fn workload() -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Workload",
               "metadata": {"name": "w1", "namespace": "apps"},
               "spec": {"size": 3, "config": "w1-config"}, "status": {"ready": 3}})
    }

    fn every_operation(h: &Webhook, seen: &Mutex<Vec<Value>>) {
        let w = workload();
        let r = h.get_replicas(&w).expect("replicas");
        assert_eq!(r.replicas, 3);
        let req = serde_json::to_value(r.requirements.expect("requirements")).expect("json");
        assert_eq!(req["resourceRequest"]["cpu"], "250m");
        let last = seen
            .lock()
            .expect("lock")
            .last()
            .cloned()
            .expect("a request");
        let req = &last["request"];
        assert_eq!(last["kind"], "ResourceInterpreterContext");
        assert_eq!(last["apiVersion"], "config.karmada.io/v1alpha1");
        assert_eq!(
            req["kind"],
            json!({"group": "example.com", "version": "v1", "kind": "Workload"})
        );
        assert_eq!(
            (req["name"].as_str(), req["namespace"].as_str()),
            (Some("w1"), Some("apps"))
        );
        assert_eq!(req["operation"], "InterpretReplica");
        assert_eq!(req["object"], w);
        assert_eq!(req["uid"].as_str().map(str::len), Some(36));

        let c = h.get_components(&w).expect("components");
        assert_eq!((c[0].name.as_str(), c[0].replicas), ("main", 3));

        let revised = h.revise_replica(&w, 7).expect("revised");
        assert_eq!(revised["spec"]["size"], 7);
        assert_eq!(
            seen.lock().expect("lock").last().expect("req")["request"]["replicas"],
            7
        );

        let mut observed = w.clone();
        observed["spec"]["paused"] = json!(true);
        let retained = h.retain(&w, &observed).expect("retained");
        assert_eq!(retained["spec"]["paused"], true);
        assert_eq!(
            seen.lock().expect("lock").last().expect("req")["request"]["observedObject"],
            observed
        );

        let items: Vec<AggregatedStatusItem> = ["m1", "m2"]
            .iter()
            .map(|c| AggregatedStatusItem {
                cluster_name: (*c).into(),
                status: Some(json!({"ready": 2})),
                applied: true,
                ..Default::default()
            })
            .collect();
        let aggregated = h.aggregate_status(&w, &items).expect("aggregated");
        assert_eq!(aggregated["status"], json!({"ready": 4}));
        assert_eq!(
            seen.lock().expect("lock").last().expect("req")["request"]["aggregatedStatus"][1]["clusterName"],
            "m2"
        );

        assert_eq!(
            h.reflect_status(&w).expect("status"),
            Some(json!({"ready": 3}))
        );
        assert!(h.interpret_health(&w).expect("health"));
        let mut unready = w.clone();
        unready["status"]["ready"] = json!(1);
        assert!(!h.interpret_health(&unready).expect("health"));

        let deps = h.get_dependencies(&w).expect("deps");
        assert_eq!(deps.len(), 2);
        assert_eq!(
            (deps[0].kind.as_str(), deps[0].name.as_str()),
            ("ConfigMap", "w1-config")
        );
        assert!(deps[1].label_selector.is_some());
    }

    #[test]
    fn every_operation_over_https_with_the_ca_bundle() {
        let (tls, bundle) = certificate();
        let s = server(Some(tls), Arc::new(workload_answer));
        let h = hook(
            format!("https://localhost:{}/interpret", s.port),
            Some(bundle),
            None,
        );
        every_operation(&h, &s.seen);
        drop(s.rt);
    }

    #[test]
    fn every_operation_over_http_and_from_a_runtime_worker() {
        let s = server(None, Arc::new(workload_answer));
        let h = Arc::new(hook(format!("http://127.0.0.1:{}/", s.port), None, None));
        every_operation(&h, &s.seen);
        // From a task of the multi-thread runtime (block_in_place), and from a current-thread
        // runtime (a scoped thread of its own).
        let h2 = Arc::clone(&h);
        let got =
            s.rt.block_on(async move {
                tokio::spawn(async move { h2.get_replicas(&workload()) }).await
            })
            .expect("joined")
            .expect("replicas");
        assert_eq!(got.replicas, 3);
        let local = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let got = local
            .block_on(async { h.get_replicas(&workload()) })
            .expect("replicas");
        assert_eq!(got.replicas, 3);
    }

    #[test]
    fn an_untrusted_certificate_fails_the_call() {
        let (tls, _) = certificate();
        let (_, other) = certificate();
        let s = server(Some(tls), Arc::new(workload_answer));
        let h = hook(format!("https://localhost:{}/", s.port), Some(other), None);
        let e = h
            .get_replicas(&workload())
            .expect_err("untrusted")
            .to_string();
        assert!(e.contains("TLS handshake"), "{e}");
        assert!(s.seen.lock().expect("lock").is_empty());
    }

    #[test]
    fn a_slow_webhook_times_out_after_its_timeout_seconds() {
        let s = server(
            None,
            Arc::new(|v: &Value| {
                let (status, body, _) = workload_answer(v);
                (status, body, Duration::from_secs(5))
            }),
        );
        let h = hook(format!("http://127.0.0.1:{}/", s.port), None, Some(1));
        let started = std::time::Instant::now();
        let e = h.get_replicas(&workload()).expect_err("timeout");
        assert!(matches!(e, PluginError::Timeout { .. }), "{e}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }

    #[test]
    fn replies_are_checked_as_karmada_checks_them() {
        let case = |answer: Answer| {
            let s = server(None, answer);
            let h = hook(format!("http://127.0.0.1:{}/", s.port), None, None);
            h.get_replicas(&workload())
                .expect_err("rejected")
                .to_string()
        };
        let reply = |response: fn(&Value) -> Value| -> Answer {
            Arc::new(move |v: &Value| {
                let body = json!({"response": response(&v["request"]["uid"])});
                (200, body.to_string().into_bytes(), Duration::ZERO)
            })
        };
        let e = case(reply(
            |_| json!({"uid": "not-mine", "successful": true, "replicas": 1}),
        ));
        assert!(e.contains("expected response.uid"), "{e}");
        let e = case(reply(|uid| json!({"uid": uid, "successful": true})));
        assert!(e.contains("nil response.replicas"), "{e}");
        let e = case(reply(
            |uid| json!({"uid": uid, "successful": false, "status": {"code": 503, "message": "busy"}}),
        ));
        assert!(e.contains("status code: 503, msg: busy"), "{e}");
        let e = case(reply(|uid| json!({"uid": uid, "successful": false})));
        assert!(e.contains("require response.status"), "{e}");
        let e = case(Arc::new(|_: &Value| (200, b"{}".to_vec(), Duration::ZERO)));
        assert!(e.contains("response was absent"), "{e}");
        let e = case(Arc::new(|_: &Value| {
            (500, b"boom".to_vec(), Duration::ZERO)
        }));
        assert!(e.contains("500") && e.contains("boom"), "{e}");
        let e = case(Arc::new(|_: &Value| {
            (200, b"not json".to_vec(), Duration::ZERO)
        }));
        assert!(e.contains("invalid webhook response"), "{e}");
        let huge = vec![b' '; MAX_RESPONSE_BYTES + 1];
        let e = case(Arc::new(move |_: &Value| {
            (200, huge.clone(), Duration::ZERO)
        }));
        assert!(e.contains("larger than"), "{e}");
    }

    #[test]
    fn patches_must_be_json_patches() {
        let s = server(
            None,
            Arc::new(|v: &Value| {
                let uid = &v["request"]["uid"];
                let body = json!({"response": {"uid": uid, "successful": true, "patchType": "MergePatch", "patch": b64(&json!({"a": 1}))}});
                (200, body.to_string().into_bytes(), Duration::ZERO)
            }),
        );
        let h = hook(format!("http://127.0.0.1:{}/", s.port), None, None);
        let e = h
            .revise_replica(&workload(), 2)
            .expect_err("rejected")
            .to_string();
        assert!(e.contains("invalid response.patchType"), "{e}");
    }

    #[test]
    fn an_unreachable_webhook_fails_the_call() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let h = hook(format!("http://127.0.0.1:{port}/"), None, None);
        let e = h
            .interpret_health(&workload())
            .expect_err("unreachable")
            .to_string();
        assert!(
            e.contains("failed to call webhook") && e.contains("connecting"),
            "{e}"
        );
    }

    #[test]
    fn rules_select_kinds_and_operations_and_the_first_uid_answers() {
        let h = hook("https://localhost/".into(), None, None);
        assert!(h.hook_enabled("example.com/v1", "Workload", Operation::Retain));
        assert!(h.hook_enabled("example.com/v2", "Workload", Operation::InterpretHealth));
        assert!(!h.hook_enabled("example.com/v1", "Other", Operation::Retain));
        assert!(!h.hook_enabled("apps/v1", "Workload", Operation::Retain));
        let config =
            |name: &str, hooks: Vec<(&str, &str)>| ResourceInterpreterWebhookConfiguration {
                metadata: flotilla_api::meta::ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                webhooks: hooks
                    .into_iter()
                    .map(|(n, op)| ResourceInterpreterWebhook {
                        name: n.into(),
                        client_config: WebhookClientConfig {
                            service: Some(ServiceReference {
                                namespace: "ns".into(),
                                name: "svc".into(),
                                path: Some("interpret".into()),
                                port: None,
                            }),
                            ..Default::default()
                        },
                        rules: vec![RuleWithOperations {
                            operations: vec![op.into()],
                            api_groups: vec!["".into()],
                            api_versions: vec!["v1".into()],
                            kinds: vec!["*".into()],
                        }],
                        interpreter_context_versions: vec!["v1alpha1".into()],
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
        let chain = flotilla_core::interpreter::Interpreters::new(webhooks(&[
            config("b", vec![("a.hooks.io", "InterpretHealth")]),
            config(
                "a",
                vec![("z.hooks.io", "*"), ("b.hooks.io", "InterpretHealth")],
            ),
        ]));
        let names: Vec<&str> = chain.chain().iter().map(|i| i.name()).collect();
        assert_eq!(names, ["a/b.hooks.io", "a/z.hooks.io", "b/a.hooks.io"]);
        let pick = |op| {
            chain
                .resolve_kind("v1", "Pod", op)
                .map(|i| i.name().to_owned())
        };
        assert_eq!(
            pick(Operation::InterpretHealth).as_deref(),
            Some("a/b.hooks.io")
        );
        assert_eq!(pick(Operation::Retain).as_deref(), Some("a/z.hooks.io"));
        assert_eq!(
            pick(Operation::Retain),
            chain
                .resolve_kind("v1", "Service", Operation::Retain)
                .map(|i| i.name().to_owned())
        );
        assert!(
            chain
                .resolve_kind("apps/v1", "Deployment", Operation::Retain)
                .is_none()
        );
    }

    #[test]
    fn services_resolve_to_their_cluster_name_and_bad_settings_fail_each_call() {
        let h = Webhook::new(
            "c",
            &ResourceInterpreterWebhook {
                name: "h".into(),
                client_config: WebhookClientConfig {
                    service: Some(ServiceReference {
                        namespace: "ns".into(),
                        name: "svc".into(),
                        path: Some("interpret".into()),
                        port: Some(8443),
                    }),
                    ..Default::default()
                },
                interpreter_context_versions: vec!["v1alpha1".into()],
                ..Default::default()
            },
        );
        let (endpoint, tls) = h.target.as_ref().expect("target");
        assert_eq!(
            (
                endpoint.https,
                endpoint.host.as_str(),
                endpoint.port,
                endpoint.path.as_str()
            ),
            (true, "svc.ns.svc", 8443, "/interpret")
        );
        assert!(tls.is_some());
        let bad = |cc: WebhookClientConfig, versions: Vec<String>| {
            let h = Webhook::new(
                "c",
                &ResourceInterpreterWebhook {
                    name: "h".into(),
                    client_config: cc,
                    interpreter_context_versions: versions,
                    ..Default::default()
                },
            );
            h.get_replicas(&workload()).expect_err("fails").to_string()
        };
        let url = |u: &str, ca: Option<&str>| WebhookClientConfig {
            url: Some(u.into()),
            ca_bundle: ca.map(str::to_owned),
            ..Default::default()
        };
        let v1 = || vec!["v1alpha1".to_owned()];
        assert!(
            bad(url("https://x/", None), vec!["v2".into()])
                .contains("ResourceInterpreterContext versions")
        );
        assert!(bad(url("ftp://x/", None), v1()).contains("scheme"));
        assert!(bad(url("https://x/", Some("%%%")), v1()).contains("not base64"));
        let junk = base64::engine::general_purpose::STANDARD.encode("no pem here");
        assert!(bad(url("https://x/", Some(&junk)), v1()).contains("no PEM certificate"));
        assert!(
            bad(WebhookClientConfig::default(), v1()).contains("exactly one of url or service")
        );
    }
}
