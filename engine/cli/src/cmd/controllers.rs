//! `flotilla controllers`: the propagation controllers against an existing API server (a real
//! kube-apiserver with the Karmada CRDs, or another `flotilla up`), optionally leader-elected so
//! that several replicas can run and only one acts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use flotilla_controller::leader;
use kube::api::{Api, DynamicObject};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig of the API server to run against [default: $KUBECONFIG or ~/.kube/config with
    /// --context, else inferred: the in-cluster service account when running in a pod].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Only run the controllers while holding a coordination.k8s.io Lease.
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease (created when missing).
    #[arg(long, default_value = leader::DEFAULT_NAMESPACE, value_name = "NS")]
    pub leader_elect_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = leader::DEFAULT_NAME, value_name = "NAME")]
    pub leader_elect_name: String,
    /// This replica's identity in the Lease [default: <hostname>_<pid>].
    #[arg(long, value_name = "ID")]
    pub leader_elect_identity: Option<String>,
    /// How long a Lease stays valid without renewal, in seconds.
    #[arg(long, default_value_t = 15, value_name = "SECONDS")]
    pub leader_elect_lease_duration: u64,
    /// How long the leader keeps acting without a successful renewal, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub leader_elect_renew_deadline_ms: u64,
    /// How often candidates try to acquire and the leader renews, in milliseconds.
    #[arg(long, default_value_t = 2_000, value_name = "MS")]
    pub leader_elect_retry_period_ms: u64,
    /// Serve the controllers' Prometheus metrics on this address (`GET /metrics`); a standby
    /// answers with an empty exposition.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub cluster_status: super::agent::ClusterStatusArgs,
    /// How long a simulated member takes to make a Deployment available, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub ready_delay_ms: u64,
    /// Karmada feature gates, `Name=true|false,...`: `PriorityBasedScheduling` (default true),
    /// `PropagationPolicyPreemption` (default false), and Flotilla's `BindingPreemption`
    /// (default false: lower-priority bindings are evicted for one that fits nowhere), and
    /// `ResourceQuotaEstimate` (default false: members' ResourceQuotas cap the estimates).
    #[arg(long, value_name = "GATES", default_value = "")]
    pub feature_gates: String,
    /// The only directory WasmPlugin objects' `spec.module.path` may name files in (relative
    /// paths that stay inside it). Without it such paths are refused: objects carry their
    /// modules inline (`spec.module.base64`).
    #[arg(long, value_name = "DIR")]
    pub module_dir: Option<std::path::PathBuf>,
    /// Where resolved WasmPlugin modules are stored by digest [default: a private temporary
    /// directory, removed on shutdown].
    #[arg(long, value_name = "DIR")]
    pub module_store_dir: Option<std::path::PathBuf>,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let config = match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .context("loading the kubeconfig")?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .context("loading the kubeconfig")?,
        (None, None) => kube::Config::infer()
            .await
            .context("finding the API server (no --kubeconfig, no in-cluster service account)")?,
    };
    let client = kube::Client::try_from(config.clone()).context("building the API client")?;
    // `_scratch` lives until `run` returns: the temporary store goes with the process.
    let (store, _scratch) = match &args.module_store_dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let s = flotilla_controller::controller::plugins::ScratchDir::new()
                .context("creating a temporary directory for WasmPlugin modules")?;
            (s.path().to_path_buf(), Some(s))
        }
    };
    let mut settings = flotilla_controller::Settings {
        ready_delay: Duration::from_millis(args.ready_delay_ms),
        backends: super::profiles::backends(store, args.module_dir.clone()),
        rule_backends: flotilla_controller::controller::interpreters::RuleBackends(
            super::interpreters::rule_backends(),
        ),
        pipeline: flotilla_core::pipeline::Options {
            gates: super::plan::gates(&args.feature_gates)?,
            ..Default::default()
        },
        ..Default::default()
    };
    args.cluster_status.apply(&mut settings);
    let metrics = match args.metrics_addr {
        Some(addr) => {
            let l = std::net::TcpListener::bind(addr)
                .with_context(|| format!("binding the metrics address {addr}"))?;
            l.set_nonblocking(true).context("metrics listener")?;
            println!(
                "metrics: http://{}/metrics",
                l.local_addr().context("metrics address")?
            );
            Some(l)
        }
        None => None,
    };
    let mut shutdown = std::pin::pin!(wait_for_signal());

    if !args.leader_elect {
        loop {
            let term = Term::start(&client, &config, &settings, metrics.as_ref()).await?;
            println!("controllers running against {}", config.cluster_url);
            tokio::select! {
                () = &mut shutdown => {
                    term.stop().await;
                    return Ok(());
                }
                kind = new_template_kind(&client, &term.kinds) => {
                    restarting_for(&kind);
                    term.stop().await;
                }
            }
        }
    }

    let cfg = leader::Config {
        namespace: args.leader_elect_namespace,
        name: args.leader_elect_name,
        identity: args
            .leader_elect_identity
            .unwrap_or_else(leader::default_identity),
        lease_duration: Duration::from_secs(args.leader_elect_lease_duration),
        renew_deadline: Duration::from_millis(args.leader_elect_renew_deadline_ms),
        retry_period: Duration::from_millis(args.leader_elect_retry_period_ms),
    };
    cfg.validate()?;
    leader::ensure_namespace(&client, &cfg.namespace)
        .await
        .with_context(|| format!("ensuring namespace {}", cfg.namespace))?;
    println!(
        "candidate {} for lease {}/{} on {}",
        cfg.identity, cfg.namespace, cfg.name, config.cluster_url
    );
    let retry = cfg.retry_period;
    let identity = cfg.identity.clone();
    // The election gets a client (a connection pool) of its own, on its own thread, so renewals
    // never wait behind the controllers' requests.
    let lease_config = config.clone();
    let mut leadership = leader::spawn(
        move || kube::Client::try_from(lease_config).map_err(leader::Error::from),
        cfg,
    )?;
    let mut standby = None;
    'election: loop {
        if let (Some(l), None) = (&metrics, &standby) {
            standby = Some(serve_standby(l)?);
        }
        tokio::select! {
            () = leadership.wait_for(true) => {}
            () = &mut shutdown => break 'election,
        }
        if let Some(s) = standby.take() {
            s.abort();
            let _ = s.await;
        }
        tracing::info!(identity = %identity, "leading: starting the controllers");
        // Start, retrying while we lead (the API server may be briefly unavailable).
        let term = loop {
            let start = Term::start(&client, &config, &settings, metrics.as_ref());
            tokio::select! {
                t = start => match t {
                    Ok(t) => break t,
                    Err(e) => {
                        tracing::warn!(error = format!("{e:#}"), "starting the controllers failed; retrying");
                        tokio::time::sleep(retry).await;
                    }
                },
                () = leadership.wait_for(false) => {
                    tracing::warn!("lost leadership before the controllers started");
                    continue 'election;
                }
                () = &mut shutdown => break 'election,
            }
        };
        let mut term = term;
        loop {
            tokio::select! {
                () = leadership.wait_for(false) => {
                    term.stop().await;
                    tracing::warn!("lost leadership: controllers stopped; back to candidate");
                    continue 'election;
                }
                () = &mut shutdown => {
                    term.stop().await;
                    break 'election;
                }
                kind = new_template_kind(&client, &term.kinds) => {
                    restarting_for(&kind);
                    term.stop().await;
                }
            }
            // Restart while we lead, as at the start of the term.
            term = loop {
                let start = Term::start(&client, &config, &settings, metrics.as_ref());
                tokio::select! {
                    t = start => match t {
                        Ok(t) => break t,
                        Err(e) => {
                            tracing::warn!(error = format!("{e:#}"), "restarting the controllers failed; retrying");
                            tokio::time::sleep(retry).await;
                        }
                    },
                    () = leadership.wait_for(false) => {
                        tracing::warn!("lost leadership before the controllers restarted");
                        continue 'election;
                    }
                    () = &mut shutdown => break 'election,
                }
            };
        }
    }
    // The controllers are stopped; now give the Lease up so a standby takes over at once.
    leadership.release().await;
    tracing::info!("stopped");
    Ok(())
}

/// One leadership term: the controllers (and the metrics endpoint) while they run.
struct Term {
    running: flotilla_controller::Running,
    metrics: Option<tokio::task::JoinHandle<()>>,
    /// The template kinds its detector watches.
    kinds: Vec<(String, String)>,
}

impl Term {
    async fn start(
        client: &kube::Client,
        config: &kube::Config,
        settings: &flotilla_controller::Settings,
        metrics: Option<&std::net::TcpListener>,
    ) -> anyhow::Result<Self> {
        let members = members(client, config).await?;
        let names: Vec<&String> = members.iter().map(|(n, _)| n).collect();
        println!(
            "members: {}",
            if names.is_empty() {
                "(none)".to_owned()
            } else {
                names
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        let mut settings = settings.clone();
        settings.template_kinds = template_kinds(client, &settings.template_kinds).await;
        let kinds = settings.template_kinds.clone();
        let running = flotilla_controller::start(client.clone(), members, settings)
            .await
            .context("starting the controllers")?;
        let metrics = match metrics {
            Some(l) => {
                let l =
                    tokio::net::TcpListener::from_std(l.try_clone().context("metrics listener")?)
                        .context("metrics listener")?;
                Some(flotilla_controller::controller::serve_metrics(
                    l,
                    running.context.clone(),
                ))
            }
            None => None,
        };
        Ok(Term {
            running,
            metrics,
            kinds,
        })
    }

    /// Abort every controller task and wait until they are gone.
    async fn stop(mut self) {
        if let Some(m) = self.metrics.take() {
            m.abort();
            let _ = m.await;
        }
        self.running.tasks.shutdown().await;
    }
}

/// How often the customizations are checked for a target kind the detector does not watch.
const TEMPLATE_KIND_POLL: Duration = Duration::from_secs(10);

/// The template kinds to watch: `base` plus the target of every
/// ResourceInterpreterCustomization that the server serves. Karmada's detector watches every
/// served kind; here a kind becomes a template kind through a customization that teaches the
/// controllers how to read it (its replicas, status, health). Targets not served (their CRD not
/// yet installed) are left out until they are.
async fn template_kinds(client: &kube::Client, base: &[(String, String)]) -> Vec<(String, String)> {
    use flotilla_api::interpreter::{CONFIG_API_VERSION, CUSTOMIZATION_KIND};
    let mut out = base.to_vec();
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client.clone(),
        &flotilla_controller::api_resource(CONFIG_API_VERSION, CUSTOMIZATION_KIND),
    );
    let list = match api.list(&kube::api::ListParams::default()).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "listing ResourceInterpreterCustomizations for template kinds failed");
            return out;
        }
    };
    for ric in list.items {
        let target = &ric.data["spec"]["target"];
        let (Some(api_version), Some(kind)) =
            (target["apiVersion"].as_str(), target["kind"].as_str())
        else {
            continue;
        };
        let key = (api_version.to_owned(), kind.to_owned());
        if out.contains(&key) {
            continue;
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((resource, _)) => {
                let customization = ric.metadata.name.as_deref().unwrap_or_default();
                // A kind the controllers may not list would never finish its cache's first
                // list (and so stall every controller): it is reported and left out until
                // the access is granted (re-checked with the customizations).
                if let Some(denied) = list_denied(client, &resource).await {
                    report_denied(client, &ric, &key, &resource, &denied);
                    continue;
                }
                denied_reported().remove(&key);
                tracing::info!(
                    api_version,
                    kind,
                    customization,
                    "template kind from a ResourceInterpreterCustomization"
                );
                out.push(key);
            }
            Err(e) => tracing::debug!(
                api_version,
                kind,
                error = %e,
                "a customization's target is not served; not watched yet"
            ),
        }
    }
    out
}

/// Why listing `resource` is refused (403), if it is.
async fn list_denied(client: &kube::Client, resource: &kube::api::ApiResource) -> Option<String> {
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client.clone(), resource);
    match api
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 403 => Some(s.message),
        _ => None,
    }
}

/// Customization targets reported as not permitted, so the 10 s re-check does not report them
/// again while nothing changes.
fn denied_reported() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<(String, String)>>
{
    static REPORTED: std::sync::Mutex<std::collections::BTreeSet<(String, String)>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    REPORTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Log an error and record a Warning Event on the customization: the controllers may not list
/// its target kind, so templates of that kind are not propagated.
fn report_denied(
    client: &kube::Client,
    ric: &kube::api::DynamicObject,
    (api_version, kind): &(String, String),
    resource: &kube::api::ApiResource,
    denied: &str,
) {
    if !denied_reported().insert((api_version.clone(), kind.clone())) {
        return;
    }
    let customization = ric.metadata.name.clone().unwrap_or_default();
    let group = if resource.group.is_empty() {
        "\"\"".to_owned()
    } else {
        resource.group.clone()
    };
    let message = format!(
        "ResourceInterpreterCustomization {customization} targets {api_version} {kind}, but the \
         controllers may not list {plural} (apiGroup {group}): its templates are not watched or \
         propagated until get, list, watch, update and patch on it are granted (Helm chart: \
         templateResources); the API server said: {denied}",
        plural = resource.plural,
    );
    tracing::error!(api_version, kind, customization, "{message}");
    let regarding = flotilla_controller::recorder::Regarding {
        api_version: flotilla_api::interpreter::CONFIG_API_VERSION.to_owned(),
        kind: flotilla_api::interpreter::CUSTOMIZATION_KIND.to_owned(),
        namespace: String::new(),
        name: customization,
        uid: ric.metadata.uid.clone().unwrap_or_default(),
    };
    flotilla_controller::recorder::Recorder::new(client.clone(), "flotilla-controller-manager")
        .publish(
            &regarding,
            flotilla_controller::recorder::EventType::Warning,
            "TemplateKindForbidden",
            &message,
        );
}

/// Resolves with the first customization target, served by the server, that `watched` lacks;
/// checked every [`TEMPLATE_KIND_POLL`].
async fn new_template_kind(
    client: &kube::Client,
    watched: &[(String, String)],
) -> (String, String) {
    loop {
        tokio::time::sleep(TEMPLATE_KIND_POLL).await;
        if let Some(kind) = template_kinds(client, watched)
            .await
            .into_iter()
            .find(|k| !watched.contains(k))
        {
            return kind;
        }
    }
}

fn restarting_for((api_version, kind): &(String, String)) {
    tracing::info!(
        api_version,
        kind,
        "a ResourceInterpreterCustomization targets a kind not watched: restarting the controllers to watch it"
    );
}

/// Answer `/metrics` on a standby replica (no controllers, so no samples) rather than leave
/// scrapes hanging in the listen backlog; `/healthz` and `/readyz` get the same 200, so a
/// standby passes the chart's probes.
fn serve_standby(listener: &std::net::TcpListener) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener =
        tokio::net::TcpListener::from_std(listener.try_clone().context("metrics listener")?)
            .context("metrics listener")?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // One read of the request head is enough to answer; the body is the same for any path.
                if tokio::time::timeout(Duration::from_secs(5), stream.readable())
                    .await
                    .is_err()
                {
                    return;
                }
                let _ = stream.try_read(&mut buf);
                let body = "# standby: this replica does not hold the leader-election Lease\n";
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                if stream.writable().await.is_ok() {
                    let _ = stream.try_write(response.as_bytes());
                }
            });
        }
    }))
}

/// The member clusters reachable through the control plane: `Cluster`s whose `spec.apiEndpoint`
/// is a path on the same server (`/clusters/<name>`, the simulated members of `flotilla up`).
async fn members(
    client: &kube::Client,
    config: &kube::Config,
) -> anyhow::Result<flotilla_controller::Members> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &flotilla_controller::api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    );
    let clusters = api
        .list(&Default::default())
        .await
        .context("listing Clusters")?;
    let base = config.cluster_url.to_string();
    let base = base.trim_end_matches('/');
    let mut out = Vec::new();
    for c in clusters {
        let name = c.metadata.name.clone().unwrap_or_default();
        let endpoint = c
            .data
            .pointer("/spec/apiEndpoint")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        if !endpoint.starts_with('/') {
            // Not a logical cluster of this server: a remote member, reached (if at all) through
            // its own credentials rather than this kubeconfig.
            continue;
        }
        let mut member = config.clone();
        member.cluster_url = format!("{base}{endpoint}")
            .parse()
            .with_context(|| format!("cluster {name}: endpoint {endpoint}"))?;
        out.push((
            name,
            kube::Client::try_from(member).context("building a member client")?,
        ));
    }
    Ok(flotilla_controller::Members::new(out))
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
