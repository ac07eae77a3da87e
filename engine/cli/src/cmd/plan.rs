//! `flotilla plan`.

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run.
pub fn main(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
