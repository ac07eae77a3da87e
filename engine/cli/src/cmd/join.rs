//! `flotilla join`: register a member cluster in Push mode, as `karmadactl join` does — its
//! credentials go into a Secret in `karmada-cluster` and a `Cluster` object refers to it; the
//! control plane's cluster status controller then probes it and the execution controller
//! applies Works to it.

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
    /// Kubeconfig of the member cluster.
    #[arg(long, value_name = "FILE")]
    pub member_kubeconfig: PathBuf,
    /// Context in the member's kubeconfig [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub member_context: Option<String>,
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
        let member = std::fs::read_to_string(&args.member_kubeconfig).with_context(|| {
            format!(
                "reading member kubeconfig {}",
                args.member_kubeconfig.display()
            )
        })?;
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
