//! `flotilla profile`: the scheduler profiles' documented defaults.

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Print the default profile (`default-scheduler`) as a SchedulerProfile document: the
    /// built-in plugins of every extension point, in the order they run.
    Default,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Default => print!("{}", super::profiles::default_document()),
    }
    Ok(())
}
