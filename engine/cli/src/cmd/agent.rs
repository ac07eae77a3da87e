//! `flotilla agent`: run in (or next to) a member cluster to register it in Pull mode, report
//! its health and status, renew its Lease and apply its Works (karmada-agent's job).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig of the control plane (what `flotilla up` wrote).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    /// Context in the control plane's kubeconfig [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Kubeconfig of the member cluster this agent serves.
    #[arg(long, value_name = "FILE")]
    pub member_kubeconfig: PathBuf,
    /// Context in the member's kubeconfig [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub member_context: Option<String>,
    /// The member's cluster name (a DNS-1123 label, at most 48 characters).
    #[arg(long, value_name = "NAME")]
    pub cluster_name: String,
    #[command(flatten)]
    pub cluster_status: ClusterStatusArgs,
    /// Lease duration written into the cluster Lease, in seconds.
    #[arg(long, default_value_t = 40, value_name = "SECONDS")]
    pub cluster_lease_duration: u64,
    /// How often applied Works are re-checked even without a change (a safety net: the member's
    /// objects of every kind applied are watched, and their changes re-check their Works), as a
    /// duration (`90s`, `1m30s`, `500ms`, `1h`).
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = parse_duration)]
    pub resync_period: Duration,
    /// Feature gates, `Name=true|false,...`, as the control plane's: with
    /// `ResourceQuotaEstimate=true` the agent reports the member's ResourceQuotas for the
    /// scheduler's quota estimate.
    #[arg(long, value_name = "GATES", default_value = "")]
    pub feature_gates: String,
}

/// A Go-style duration of `h`, `m`, `s` and `ms` parts (`1h30m`, `45s`, `250ms`), more than zero.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?} (for example 30s, 1m30s, 500ms, 1h)");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        if digits == 0 {
            return Err(invalid());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit] {
            "h" => n.checked_mul(3600).map(Duration::from_secs),
            "m" => n.checked_mul(60).map(Duration::from_secs),
            "s" => Some(Duration::from_secs(n)),
            "ms" => Some(Duration::from_millis(n)),
            _ => None,
        }
        .ok_or_else(invalid)?;
        total = total.checked_add(part).ok_or_else(invalid)?;
        rest = &rest[unit..];
    }
    if total.is_zero() {
        return Err(format!("duration {text:?} must be more than zero"));
    }
    Ok(total)
}

/// A client for the control plane from its kubeconfig file.
pub async fn control_client(path: &Path, context: Option<&str>) -> anyhow::Result<kube::Client> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let what = format!("control plane kubeconfig {}", path.display());
    let config = flotilla_controller::client::config_from_kubeconfig(&text, context, &what).await?;
    Ok(flotilla_controller::client::connect(&config)?)
}

/// How members are probed and their health reported (Karmada's cluster status flags): the
/// Pull member by `flotilla agent`, the Push members by `flotilla controllers`.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterStatusArgs {
    /// How often a member is probed, its status reported and its Lease renewed, in seconds
    /// (Karmada's `--cluster-status-update-frequency`).
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub cluster_status_update_frequency: u64,
    /// How long a member must stay healthy before Ready turns True, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub cluster_success_threshold: u64,
    /// How long a member must stay unhealthy before Ready turns False (and the control plane
    /// taints its Cluster), in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub cluster_failure_threshold: u64,
}

impl ClusterStatusArgs {
    /// Set the member status timings of `settings` from the flags (a frequency of 0 is 1 s).
    pub fn apply(&self, settings: &mut flotilla_controller::Settings) {
        settings.cluster_status_update_frequency =
            Duration::from_secs(self.cluster_status_update_frequency.max(1));
        settings.cluster_success_threshold = Duration::from_secs(self.cluster_success_threshold);
        settings.cluster_failure_threshold = Duration::from_secs(self.cluster_failure_threshold);
    }
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let control = control_client(&args.kubeconfig, args.context.as_deref()).await?;
        let text = std::fs::read_to_string(&args.member_kubeconfig).with_context(|| format!("reading member kubeconfig {}", args.member_kubeconfig.display()))?;
        let what = format!("member kubeconfig {}", args.member_kubeconfig.display());
        let member = flotilla_controller::client::config_from_kubeconfig(&text, args.member_context.as_deref(), &what).await?;
        let mut settings = flotilla_controller::Settings {
            cluster_monitor_grace_period: Duration::from_secs(args.cluster_lease_duration.max(1)),
            resync: args.resync_period,
            // The control plane's customizations are compiled with the same backends as there.
            rule_backends: flotilla_controller::controller::interpreters::RuleBackends(super::interpreters::rule_backends()),
            pipeline: flotilla_core::pipeline::Options {
                gates: super::plan::gates(&args.feature_gates)?,
                ..Default::default()
            },
            ..Default::default()
        };
        args.cluster_status.apply(&mut settings);
        let agent = flotilla_controller::agent::Agent { control, member, cluster_name: args.cluster_name.clone(), settings };
        println!("agent for cluster {} (Pull) starting", args.cluster_name);
        tokio::select! {
            res = flotilla_controller::agent::run(agent) => res.with_context(|| format!("agent for cluster {}", args.cluster_name)),
            () = wait_for_signal() => Ok(()),
        }
    })
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_go_style_and_positive() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in [
            "",
            "5",
            "s",
            "1x",
            "-1s",
            "1.5s",
            "0s",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
