//! `flotilla validate`: parse and admit inputs without scheduling; with `--profile`, also build
//! each `SchedulerProfile` (loading its plugins) and warn about profiles that would silently
//! not apply.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: super::input::Files,
    /// SchedulerProfile files: each is built (its Wasm modules loaded, its CEL compiled), and a
    /// warning names every profile no policy of the input uses.
    #[arg(long = "profile")]
    pub profiles: Vec<PathBuf>,
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
    if args.profiles.is_empty() {
        return Ok(());
    }
    // Built exactly as plan and explain build them.
    super::profiles::load(&args.profiles)?;
    let used: BTreeSet<String> = inv
        .propagation_policies
        .iter()
        .chain(&inv.cluster_propagation_policies)
        .map(|p| {
            p.spec
                .scheduler_name
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| flotilla_api::labels::DEFAULT_SCHEDULER.to_owned())
        })
        .chain(inv.bindings.values().map(|b| b.spec.scheduler_name.clone()))
        .collect();
    for doc in super::profiles::documents(&args.profiles)? {
        let name = doc.metadata.name();
        println!("profile {name}: valid");
        for line in super::profiles::describe(&doc) {
            println!("  {line}");
        }
        if !used.contains(name) {
            let hint = if name == flotilla_api::labels::DEFAULT_SCHEDULER {
                "every policy names another spec.schedulerName".to_owned()
            } else {
                format!(
                    "policies without spec.schedulerName use default-scheduler; set spec.schedulerName: {name} in a policy, or name the profile default-scheduler"
                )
            };
            eprintln!("warning: profile {name} is not used by any policy of the input: {hint}");
        }
    }
    Ok(())
}
