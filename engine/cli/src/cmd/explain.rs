//! `flotilla explain`: per cluster, each filter plugin's verdict, each score, and the assignment.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use flotilla_core::framework::Verdict;
use flotilla_core::pipeline::{Clock, FailoverMemory, Options, Snapshot, decide};
use flotilla_core::scheduler::Trace;

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
    /// Feature gates, `Name=true|false,...`, as for `flotilla plan`.
    #[arg(long, value_name = "GATES", default_value = "")]
    pub feature_gates: String,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let inv = args.input.load()?;
    let parts: Vec<&str> = args.resource.split('/').collect();
    let (kind, ns, name) = match parts.as_slice() {
        [k, n] => (*k, "", *n),
        [k, ns, n] => (*k, *ns, *n),
        _ => bail!(
            "--resource: expected KIND/NAMESPACE/NAME or KIND/NAME, got {:?}",
            args.resource
        ),
    };
    let template = inv
        .templates
        .iter()
        .find(|t| t.kind().eq_ignore_ascii_case(kind) && t.namespace() == ns && t.name() == name)
        .with_context(|| format!("--resource: no template {kind} {ns}/{name} in the input"))?;
    let gates = super::plan::gates(&args.feature_gates)?;
    super::plan::check_quotas(&inv, gates)?;
    let (mut rb, claim) = flotilla_core::plan::binding_for_with(&inv, template, gates)
        .with_context(|| format!("no propagation policy matches {kind} {ns}/{name}"))?
        .with_context(|| format!("interpreting {kind} {ns}/{name}"))?;
    let key = format!("{}/{}", rb.metadata.namespace(), rb.metadata.name());
    let now = input::now(args.now.as_deref())?;
    let profiles = super::profiles::load(&args.profiles)?;
    let snapshot = Snapshot::new(
        inv.clusters.clone(),
        std::sync::Arc::new(profiles),
        Options {
            gates,
            ..Options::default()
        },
    );
    let profile = snapshot
        .profile(&rb.spec.scheduler_name)
        .with_context(|| format!("no scheduler profile named {:?}", rb.spec.scheduler_name))?
        .name
        .clone();
    // The decision `flotilla plan` and the scheduler controller make, with its trace.
    let mut trace = Trace::default();
    let mut memory = FailoverMemory::default();
    let decision = decide(
        &snapshot,
        &mut rb,
        Some(template),
        Clock::at_secs(now),
        &mut memory,
        Some(&mut trace),
    );
    let evicted: Vec<&String> = decision
        .taint_evicted
        .iter()
        .chain(&decision.app_evicted)
        .collect();

    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} {} claimed by {} {}",
        rb.kind,
        key,
        claim.policy.kind,
        claim.policy.metadata.name()
    );
    let _ = writeln!(s, "replicas: {}  profile: {profile}", rb.spec.replicas);
    // A multi-component workload placed whole is estimated in complete component sets: the
    // "allocatable" column below counts sets, not replicas.
    let sets = flotilla_core::component_sets::applicable(&rb.spec);
    if sets {
        let parts: Vec<String> = rb
            .spec
            .components
            .iter()
            .map(|c| format!("{}×{}", c["name"].as_str().unwrap_or(""), c["replicas"]))
            .collect();
        let _ = writeln!(
            s,
            "components: {} (placed whole; allocatable = complete sets per cluster)",
            parts.join(", ")
        );
    }
    // What the profile document changes in the default profile (a plain list replaces built-ins).
    for doc in super::profiles::documents(&args.profiles)?
        .iter()
        .filter(|d| d.metadata.name() == profile)
    {
        for line in super::profiles::describe(doc) {
            let _ = writeln!(s, "  {line}");
        }
    }
    if !evicted.is_empty() {
        let _ = writeln!(
            s,
            "evicted: {}",
            evicted
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
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
                    Verdict::Fit => {
                        let _ = writeln!(s, "    {plugin:<18} fit");
                    }
                    Verdict::Unschedulable(r) => {
                        let _ = writeln!(s, "    {plugin:<18} unschedulable: {r}");
                    }
                }
            }
        }
        let _ = writeln!(s, "\nSCORES (feasible clusters, canonical order)");
        for (name, total, alloc, avail, overflow) in &a.ordered {
            let per: Vec<String> = a
                .scores
                .get(name)
                .into_iter()
                .flatten()
                .map(|(p, v)| format!("{p}={v}"))
                .collect();
            let _ = writeln!(
                s,
                "  {name:<20} total={total:<4} {}={alloc} available={avail} overflowOrder={overflow}  {}",
                if sets { "sets" } else { "allocatable" },
                per.join(" ")
            );
        }
        let _ = writeln!(
            s,
            "\nSELECTED: {}",
            if a.selected.is_empty() {
                "<none>".into()
            } else {
                a.selected.join(", ")
            }
        );
        match &a.outcome {
            Some(Ok(t)) => {
                let list: Vec<String> = t
                    .iter()
                    .map(|t| format!("{}={}", t.name, t.replicas))
                    .collect();
                let _ = writeln!(s, "ASSIGNED: {}", list.join(", "));
            }
            Some(Err(f)) => {
                let _ = writeln!(s, "FAILED ({}): {}", f.kind.reason(), f.message);
            }
            None => {}
        }
    }
    let result = match &decision.outcome {
        None => "not rescheduled: Karmada keeps the current assignment (no placement, replica or cluster change)".to_owned(),
        Some(Ok(())) => rb.spec.clusters.iter().map(|t| format!("{}={}", t.name, t.replicas)).collect::<Vec<_>>().join(", "),
        Some(Err(f)) => format!("{} — {}", f.kind.reason(), f.message),
    };
    let _ = writeln!(s, "\nRESULT: {result}");
    print!("{s}");
    Ok(())
}
