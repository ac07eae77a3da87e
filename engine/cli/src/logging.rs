//! The process-wide tracing subscriber: `RUST_LOG` filters, `--log-format` picks text or JSON.
//!
//! Logs go to standard error so `plan`/`explain` output on standard output stays machine-readable.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event (coloured on a terminal).
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Installs the subscriber. `default_directives` apply when `RUST_LOG` is unset or empty; an
/// invalid `RUST_LOG` is reported once and replaced by the defaults rather than silencing logs.
pub fn init(format: LogFormat, default_directives: &str) {
    let (filter, invalid) = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => match EnvFilter::try_new(&spec) {
            Ok(filter) => (filter, None),
            Err(err) => (EnvFilter::new(default_directives), Some(err.to_string())),
        },
        _ => (EnvFilter::new(default_directives), None),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
    };
    if installed.is_err() {
        // Only possible if something installed a global subscriber first; keep that one.
        return;
    }
    if let Some(err) = invalid {
        tracing::warn!(error = %err, "RUST_LOG is not a valid filter; using the defaults");
    }
}
