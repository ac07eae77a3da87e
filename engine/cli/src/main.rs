//! The `flotilla` binary: offline planning (`plan`, `explain`, `validate`) and the control plane (`up`).

mod cmd;
mod logging;

/// mimalloc instead of glibc's malloc: the control plane allocates and frees many small objects
/// across threads (decoded API objects, per-decision vectors), where glibc's consolidation and
/// chunk unlinking were ≈ 40 % of the samples of a live scheduling run; the scheduler's CPU per
/// decision fell by about a quarter (BENCHMARKS.md, live scheduling). The benchmarks that run the
/// control plane in process declare the same allocator, so they measure what ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Test, inspect or scaffold Wasm plugins; push and pull them through OCI registries.
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

/// Exit status when standard output is a closed pipe (`flotilla ... | head -1`): what a shell
/// reports for a process ended by SIGPIPE (128 + 13), without a panic message or an error line.
const BROKEN_PIPE_EXIT: i32 = 141;

/// Whether `err` (a command's error chain) comes from writing into a closed pipe.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `println!` panics when standard output is a closed pipe (Rust ignores SIGPIPE); end the
/// process quietly instead, as a command killed by SIGPIPE would be. Other panics keep the
/// default report.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        // std's wording: "failed printing to stdout: Broken pipe (os error 32)".
        if message.starts_with("failed printing to std")
            && (message.contains("Broken pipe") || message.contains("os error 32"))
        {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

fn main() -> std::process::ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    // Long-running commands report what they decide at info; offline commands only warn, so their
    // standard error stays quiet unless asked.
    let defaults = match cli.command {
        Command::Up(_) | Command::Join(_) | Command::Agent(_) | Command::Controllers(_) => "info",
        _ => "warn",
    };
    logging::init(cli.log_format, defaults);
    // The Wasm host's tiers and incremental cache on the controllers' `/metrics`.
    flotilla_controller::controller::metrics::register_source(flotilla_wasm::render_metrics);
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
        Err(err) if is_broken_pipe(&err) => std::process::ExitCode::from(BROKEN_PIPE_EXIT as u8),
        Err(err) => {
            tracing::debug!(error = format!("{err:#}"), "command failed");
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
