//! `flotilla up`: the embedded control plane (API server + durable store), the controllers and N
//! simulated member clusters, serving until stopped.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory for the store and the generated credentials [default: $XDG_DATA_HOME/flotilla or ~/.local/share/flotilla].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Port to listen on; 0 picks a free port (printed at startup).
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Where to write the kubeconfig [default: $XDG_CONFIG_HOME/flotilla/kubeconfig or ~/.config/flotilla/kubeconfig].
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Serve plain HTTP without authentication. Only allowed on a loopback address.
    #[arg(long)]
    pub insecure_loopback_anonymous: bool,
    /// More users, as kube-apiserver's static token file: one per line,
    /// `token,user,uid,"group1,group2"`. They authenticate with `Authorization: Bearer <token>`
    /// and may do what RBAC (Roles, ClusterRoles and their bindings) grants them; the generated
    /// admin token (group `system:masters`) keeps every permission.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "insecure_loopback_anonymous"
    )]
    pub token_auth_file: Option<PathBuf>,
    /// CA certificates (PEM) of client certificates, as kube-apiserver's `--client-ca-file`: a
    /// client certificate one of them signed authenticates the subject's common name as the user
    /// and its organizations as groups; RBAC decides what it may do. A certificate from another
    /// CA, expired, or without the client-auth usage is refused (401).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "insecure_loopback_anonymous"
    )]
    pub client_ca_file: Option<PathBuf>,
    /// Revisions kept in the watch log (older watches get 410 Gone and relist).
    #[arg(long, default_value_t = 100_000)]
    pub retain_revisions: u64,
    /// Simulated member clusters (member1..memberN), logical clusters of the embedded server.
    #[arg(long, default_value_t = 2)]
    pub members: usize,
    /// CPU each simulated member reports as allocatable.
    #[arg(long, default_value = "64")]
    pub member_cpu: String,
    /// Memory each simulated member reports as allocatable.
    #[arg(long, default_value = "256Gi")]
    pub member_memory: String,
    /// Pods each simulated member reports as allocatable.
    #[arg(long, default_value = "110")]
    pub member_pods: String,
    /// How long a simulated member takes to make a Deployment available, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub ready_delay_ms: u64,
    /// Serve the controllers' Prometheus metrics on this address (`GET /metrics`), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Serve the API and register the simulated members, but run no controllers (run them
    /// separately with `flotilla controllers --kubeconfig …`).
    #[arg(long)]
    pub no_controllers: bool,
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
    pub module_dir: Option<PathBuf>,
}

fn home_subdir(xdg: &str, fallback: &str) -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(xdg).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir).join("flotilla"));
    }
    let home =
        std::env::var_os("HOME").context("HOME is not set; pass --data-dir and --kubeconfig")?;
    Ok(PathBuf::from(home).join(fallback).join("flotilla"))
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let data_dir = match args.data_dir {
        Some(d) => d,
        None => home_subdir("XDG_DATA_HOME", ".local/share")?,
    };
    let kubeconfig_path = match args.kubeconfig {
        Some(p) => p,
        None => home_subdir("XDG_CONFIG_HOME", ".config")?.join("kubeconfig"),
    };
    let addr = SocketAddr::new(args.bind, args.port);
    if args.insecure_loopback_anonymous && !addr.ip().is_loopback() {
        anyhow::bail!(
            "--insecure-loopback-anonymous is only allowed with a loopback --bind address, not {}",
            addr.ip()
        );
    }
    let mut config = flotilla_apiserver::Config::new(&data_dir);
    config.addr = addr;
    config.tls = !args.insecure_loopback_anonymous;
    config.anonymous = args.insecure_loopback_anonymous;
    let token_auth_file = args.token_auth_file;
    config.token_auth_file.clone_from(&token_auth_file);
    let client_ca_file = args.client_ca_file;
    config.client_ca_file.clone_from(&client_ca_file);
    config.retain_revisions = args.retain_revisions;
    config.admission = Some(super::admission::admission());
    let capacity = flotilla_controller::members::Capacity {
        cpu: args.member_cpu,
        memory: args.member_memory,
        pods: args.member_pods,
    };
    let settings = flotilla_controller::Settings {
        ready_delay: std::time::Duration::from_millis(args.ready_delay_ms),
        backends: super::profiles::backends(data_dir.join("modules"), args.module_dir.clone()),
        rule_backends: flotilla_controller::controller::interpreters::RuleBackends(
            super::interpreters::rule_backends(),
        ),
        pipeline: flotilla_core::pipeline::Options {
            gates: super::plan::gates(&args.feature_gates)?,
            ..Default::default()
        },
        ..Default::default()
    };
    let members = args.members;
    let metrics_addr = args.metrics_addr;
    let no_controllers = args.no_controllers;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let running = flotilla_apiserver::start(config, async move {
            let _ = stop_rx.await;
        })
        .await
        .with_context(|| format!("starting the API server (data dir {})", data_dir.display()))?;
        if let Some(parent) = kubeconfig_path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        write_private(&kubeconfig_path, &running.kubeconfig)
            .with_context(|| format!("writing kubeconfig {}", kubeconfig_path.display()))?;
        let token = flotilla_controller::client::token_from_kubeconfig(&running.kubeconfig);
        let embedded = flotilla_controller::Embedded {
            members,
            capacity,
            settings,
            token,
        };
        let controllers = if no_controllers {
            let names = flotilla_controller::members::names(members);
            flotilla_controller::members::register_all(
                &running.server.router(),
                &names,
                embedded.token.as_deref(),
                &embedded.capacity,
            )
            .await
            .context("registering the simulated members")?;
            None
        } else {
            Some(
                flotilla_controller::start_embedded(running.server.router(), embedded)
                    .await
                    .context("starting the controllers and simulated members")?,
            )
        };
        println!("flotilla API server listening on {}", running.url);
        if let Some(file) = &token_auth_file {
            println!(
                "token file {}: {} users, authorized by RBAC",
                file.display(),
                running.server.token_file_users()
            );
        }
        if let Some(file) = &client_ca_file {
            println!(
                "client certificates signed by the CAs of {} authenticate users",
                file.display()
            );
        }
        if members > 0 {
            println!(
                "simulated members: {}",
                flotilla_controller::members::names(members).join(", ")
            );
        }
        if let (Some(addr), Some(controllers)) = (metrics_addr, &controllers) {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding the metrics address {addr}"))?;
            let bound = listener.local_addr().context("metrics address")?;
            flotilla_controller::controller::serve_metrics(listener, controllers.context.clone());
            println!("metrics: http://{bound}/metrics");
        }
        // The stop signals are handled before readiness is announced: a script that stops the
        // server as soon as it reads "ready in" gets the graceful shutdown, not the default
        // action of SIGTERM; the log event comes first for the same reason.
        let stop = shutdown_signal();
        tracing::info!(
            url = %running.url,
            members,
            ready_ms = started.elapsed().as_millis() as u64,
            "control plane ready"
        );
        println!("kubeconfig: {}", kubeconfig_path.display());
        println!("data dir: {}", data_dir.display());
        println!(
            "ready in {} ms; try: KUBECONFIG={} kubectl get ns",
            started.elapsed().as_millis(),
            kubeconfig_path.display()
        );
        stop.await;
        tracing::info!("signal received: stopping the controllers and the API server");
        drop(controllers);
        let _ = stop_tx.send(());
        let _ = running.task.await;
        Ok(())
    })
}

fn write_private(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(contents.as_bytes())
}

/// SIGINT or SIGTERM. The handlers are installed when this is called (not when the future is
/// first polled), so a signal sent any time after the call is seen.
fn shutdown_signal() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            return Box::pin(async move {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            });
        }
    }
    Box::pin(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
