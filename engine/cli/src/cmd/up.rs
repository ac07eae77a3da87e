//! `flotilla up`: the embedded control plane. Owned by the apiserver work (issue 6).

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run.
pub fn main(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
