//! `flotilla explain`: per cluster, each filter plugin's verdict, each score, and the assignment.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use flotilla_core::framework::Verdict;
use flotilla_core::scheduler::{Trace, schedule};
use flotilla_core::{detector, failover};

use super::input;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: super::input::Files,
    /// The template: `KIND/NAMESPACE/NAME`, or `KIND/NAME` when cluster-scoped.
    #[arg(long)]
    pub resource: String,
    /// The time to plan at (RFC 3339); default: now.
    #[arg(long)]
    pub now: Option<String>,
    /// SchedulerProfile files; the binding's `schedulerName` picks one.
    #[arg(long = "profile")]
    pub profiles: Vec<PathBuf>,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let inv = args.input.load()?;
    let parts: Vec<&str> = args.resource.split('/').collect();
    let (kind, ns, name) = match parts.as_slice() {
        [k, n] => (*k, "", *n),
        [k, ns, n] => (*k, *ns, *n),
        _ => bail!("--resource: expected KIND/NAMESPACE/NAME or KIND/NAME, got {:?}", args.resource),
    };
    let template = inv
        .templates
        .iter()
        .find(|t| t.kind().eq_ignore_ascii_case(kind) && t.namespace() == ns && t.name() == name)
        .with_context(|| format!("--resource: no template {kind} {ns}/{name} in the input"))?;
    let claim = detector::claim(template, &inv.propagation_policies, &inv.cluster_propagation_policies)
        .with_context(|| format!("no propagation policy matches {kind} {ns}/{name}"))?;
    let mut rb = detector::build_binding(template, claim);
    let key = format!("{}/{}", rb.metadata.namespace(), rb.metadata.name());
    if let Some(prev) = inv.bindings.get(&key) {
        rb.spec.clusters = prev.spec.clusters.clone();
        rb.spec.graceful_eviction_tasks = prev.spec.graceful_eviction_tasks.clone();
        rb.status = prev.status.clone();
        rb.metadata.annotations.extend(prev.metadata.annotations.clone());
    }
    let now = input::now(args.now.as_deref())?;
    let (evicted, _) = failover::evict_tainted(&mut rb, &inv.clusters, now);
    let profiles = super::profiles::load(&args.profiles)?;
    let profile = profiles
        .iter()
        .find(|p| p.name == rb.spec.scheduler_name)
        .with_context(|| format!("no scheduler profile named {:?}", rb.spec.scheduler_name))?;
    let mut trace = Trace::default();
    let status = rb.status.clone().unwrap_or_default();
    let result = schedule(profile, &rb.spec, &status, &inv.clusters, Default::default(), Some(&mut trace));

    let mut s = String::new();
    let _ = writeln!(s, "{} {} claimed by {} {}", rb.kind, key, claim.policy.kind, claim.policy.metadata.name());
    let _ = writeln!(s, "replicas: {}  profile: {}", rb.spec.replicas, profile.name);
    if !evicted.is_empty() {
        let _ = writeln!(s, "evicted (NoExecute taints): {}", evicted.join(", "));
    }
    for a in &trace.attempts {
        if let Some(n) = &a.affinity_name {
            let _ = writeln!(s, "\naffinity group {n:?}:");
        }
        let _ = writeln!(s, "\nFILTERS");
        for (cluster, verdicts) in &a.filters {
            let _ = writeln!(s, "  {cluster}");
            for (plugin, v) in verdicts {
                match v {
                    Verdict::Fit => { let _ = writeln!(s, "    {plugin:<18} fit"); }
                    Verdict::Unschedulable(r) => { let _ = writeln!(s, "    {plugin:<18} unschedulable: {r}"); }
                }
            }
        }
        let _ = writeln!(s, "\nSCORES (feasible clusters, canonical order)");
        for (name, total, alloc, avail, overflow) in &a.ordered {
            let per: Vec<String> = a.scores.get(name).into_iter().flatten().map(|(p, v)| format!("{p}={v}")).collect();
            let _ = writeln!(s, "  {name:<20} total={total:<4} allocatable={alloc} available={avail} overflowOrder={overflow}  {}", per.join(" "));
        }
        let _ = writeln!(s, "\nSELECTED: {}", if a.selected.is_empty() { "<none>".into() } else { a.selected.join(", ") });
        match &a.outcome {
            Some(Ok(t)) => {
                let list: Vec<String> = t.iter().map(|t| format!("{}={}", t.name, t.replicas)).collect();
                let _ = writeln!(s, "ASSIGNED: {}", list.join(", "));
            }
            Some(Err(f)) => { let _ = writeln!(s, "FAILED ({}): {}", f.kind.reason(), f.message); }
            None => {}
        }
    }
    let _ = writeln!(s, "\nRESULT: {}", match &result.outcome {
        Ok(t) => t.iter().map(|t| format!("{}={}", t.name, t.replicas)).collect::<Vec<_>>().join(", "),
        Err(f) => format!("{} — {}", f.kind.reason(), f.message),
    });
    print!("{s}");
    Ok(())
}
