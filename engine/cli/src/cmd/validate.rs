//! `flotilla validate`: parse and admit inputs without scheduling.

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: super::input::Files,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let inv = args.input.load()?;
    println!(
        "valid: {} templates, {} propagation policies, {} override policies, {} clusters, {} bindings",
        inv.templates.len(),
        inv.propagation_policies.len() + inv.cluster_propagation_policies.len(),
        inv.overrides.cluster.len() + inv.overrides.namespaced.len(),
        inv.clusters.len(),
        inv.bindings.len()
    );
    Ok(())
}
