//! The `flotilla` binary: offline planning (`plan`, `explain`, `validate`) and the control plane (`up`).

mod cmd;
mod logging;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "flotilla",
    version,
    about = "Karmada-compatible multi-cluster control plane with pluggable policy"
)]
struct Cli {
    /// Log line format on standard error (the level comes from `RUST_LOG`, e.g. `RUST_LOG=debug`).
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compute ResourceBindings and Works from templates, policies and clusters, offline.
    Plan(cmd::plan::Args),
    /// Show, per cluster, each plugin's verdict and score and the final assignment for one resource.
    Explain(cmd::explain::Args),
    /// Validate policies and clusters without scheduling.
    Validate(cmd::validate::Args),
    /// Check a ResourceInterpreterCustomization or run one of its rules locally (karmadactl interpret).
    Interpret(cmd::interpret::Args),
    /// Test, inspect or scaffold Wasm plugins.
    Plugin(cmd::plugin::Args),
    /// Scheduler profiles: print the default one.
    Profile(cmd::profile::Args),
    /// Run the embedded control plane (API server + store) and write a kubeconfig.
    Up(cmd::up::Args),
    /// Register a member cluster in Push mode (its credentials in a Secret), like karmadactl join.
    Join(cmd::join::Args),
    /// Run in a member cluster: register it in Pull mode, report its status and apply its Works.
    Agent(cmd::agent::Args),
    /// Run the controllers against an existing API server, optionally leader-elected.
    Controllers(cmd::controllers::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Long-running commands report what they decide at info; offline commands only warn, so their
    // standard error stays quiet unless asked.
    let defaults = match cli.command {
        Command::Up(_) | Command::Join(_) | Command::Agent(_) | Command::Controllers(_) => "info",
        _ => "warn",
    };
    logging::init(cli.log_format, defaults);
    let result = match cli.command {
        Command::Plan(args) => cmd::plan::main(args),
        Command::Explain(args) => cmd::explain::main(args),
        Command::Validate(args) => cmd::validate::main(args),
        Command::Interpret(args) => cmd::interpret::main(args),
        Command::Up(args) => cmd::up::main(args),
        Command::Join(args) => cmd::join::main(args),
        Command::Agent(args) => cmd::agent::main(args),
        Command::Controllers(args) => cmd::controllers::main(args),
        Command::Plugin(args) => cmd::plugin::main(args),
        Command::Profile(args) => cmd::profile::main(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            tracing::debug!(error = format!("{err:#}"), "command failed");
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
