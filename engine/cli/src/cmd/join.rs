//! `flotilla join`: register a member cluster in Push mode, as `karmadactl join` does — its
//! credentials go into a Secret in `karmada-cluster` and a `Cluster` object refers to it; the
//! control plane's cluster status controller then probes it and the execution controller
//! applies Works to it.
//!
//! `--mode pull` prepares a Pull member instead, as `karmadactl register` does on the control
//! plane's side: a ServiceAccount for the member's `flotilla agent`, RBAC scoped to its own
//! Cluster, Works and Lease, and a kubeconfig with a token for it (`--agent-kubeconfig`). The
//! agent registers the Cluster itself when it starts.

use std::path::PathBuf;

use anyhow::Context as _;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The member's cluster name (a DNS-1123 label, at most 48 characters).
    pub name: String,
    /// Kubeconfig of the control plane (what `flotilla up` wrote).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    /// Context in the control plane's kubeconfig [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Push (the control plane reaches the member with the credentials of
    /// `--member-kubeconfig`) or Pull (the member's agent reaches the control plane with the
    /// scoped credentials written to `--agent-kubeconfig`).
    #[arg(long, value_enum, default_value_t = Mode::Push)]
    pub mode: Mode,
    /// Kubeconfig of the member cluster (Push mode).
    #[arg(long, value_name = "FILE", required_if_eq("mode", "push"))]
    pub member_kubeconfig: Option<PathBuf>,
    /// Where to write the agent's kubeconfig for the control plane (Pull mode; owner-only).
    #[arg(long, value_name = "FILE", required_if_eq("mode", "pull"))]
    pub agent_kubeconfig: Option<PathBuf>,
    /// Lifetime of the agent's token in seconds (Pull mode) [default: one year].
    #[arg(long, value_name = "SECONDS", default_value_t = flotilla_controller::members::AGENT_TOKEN_SECONDS)]
    pub token_expiration_seconds: i64,
    /// Context in the member's kubeconfig [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub member_context: Option<String>,
}

/// How the member is joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// The control plane pushes Works to the member.
    Push,
    /// The member's agent pulls its Works.
    Pull,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let control =
            super::agent::control_client(&args.kubeconfig, args.context.as_deref()).await?;
        if args.mode == Mode::Pull {
            return pull(&control, &args).await;
        }
        let path = args
            .member_kubeconfig
            .as_deref()
            .context("--member-kubeconfig is required in Push mode")?;
        let member = std::fs::read_to_string(path)
            .with_context(|| format!("reading member kubeconfig {}", path.display()))?;
        let joined = flotilla_controller::members::join(
            &control,
            &args.name,
            &member,
            args.member_context.as_deref(),
        )
        .await
        .with_context(|| format!("joining cluster {}", args.name))?;
        println!(
            "cluster {} joined (Push) at {}; credentials in Secret {} ({} shape)",
            args.name, joined.endpoint, joined.secret, joined.shape
        );
        Ok(())
    })
}

async fn pull(control: &kube::Client, args: &Args) -> anyhow::Result<()> {
    let out = args
        .agent_kubeconfig
        .as_deref()
        .context("--agent-kubeconfig is required in Pull mode")?;
    let text = std::fs::read_to_string(&args.kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", args.kubeconfig.display()))?;
    let creds = flotilla_controller::members::prepare_pull(
        control,
        &args.name,
        args.token_expiration_seconds,
    )
    .await
    .with_context(|| format!("preparing Pull cluster {}", args.name))?;
    let kubeconfig = flotilla_controller::members::agent_kubeconfig(
        &text,
        args.context.as_deref(),
        &args.name,
        &creds.token,
    )?;
    write_private(out, &kubeconfig)
        .with_context(|| format!("writing agent kubeconfig {}", out.display()))?;
    println!(
        "cluster {} prepared (Pull): ServiceAccount {} with {}; token valid until {}",
        args.name,
        creds.service_account,
        creds.objects.join(", "),
        creds.expires
    );
    println!(
        "agent kubeconfig written to {}; run: flotilla agent --cluster-name {} --kubeconfig {} --member-kubeconfig <member kubeconfig>",
        out.display(),
        args.name,
        out.display()
    );
    Ok(())
}

/// Write `text` to `path`, readable by the owner only (it holds a token).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut f = options.open(path)?;
    f.write_all(text.as_bytes())
}
