//! `flotilla validate`: parse and admit inputs without scheduling.

use std::path::PathBuf;

use super::input;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or directories to validate.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Recurse into directories.
    #[arg(short = 'R', long)]
    pub recursive: bool,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let inv = input::load(&args.files, args.recursive)?;
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
