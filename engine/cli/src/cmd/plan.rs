//! `flotilla plan`: ResourceBindings and Works from templates, policies and clusters, offline.

use std::path::PathBuf;

use flotilla_core::plan::{Plan, PlanOptions, plan};
use serde_json::{Value, json};

use super::input;

/// Output format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Output {
    /// Human summary per binding.
    Table,
    /// YAML documents.
    Yaml,
    /// A kubectl-style `List`.
    Json,
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: super::input::Files,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
    /// The time to plan at (RFC 3339); default: now. Affects timestamps and eviction deadlines.
    #[arg(long)]
    pub now: Option<String>,
    /// Do not evict clusters with untolerated NoExecute taints.
    #[arg(long)]
    pub no_taint_eviction: bool,
    /// Karmada feature gates, `Name=true|false,...`: `PriorityBasedScheduling` (default true),
    /// `PropagationPolicyPreemption` (default false), and Flotilla's `BindingPreemption`
    /// (default false: lower-priority bindings are evicted for one that fits nowhere), and
    /// `ResourceQuotaEstimate` (default false: members' ResourceQuotas cap the estimates).
    #[arg(long, value_name = "GATES", default_value = "")]
    pub feature_gates: String,
    /// SchedulerProfile files (built-in, Wasm and CEL plugins); bindings pick one by `schedulerName`.
    #[arg(long = "profile")]
    pub profiles: Vec<PathBuf>,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    let inv = args.input.load()?;
    let options = PlanOptions {
        now: input::now(args.now.as_deref())?,
        pipeline: flotilla_core::pipeline::Options {
            taint_eviction: !args.no_taint_eviction,
            gates: gates(&args.feature_gates)?,
            ..Default::default()
        },
    };
    check_quotas(&inv, options.pipeline.gates)?;
    let profiles = super::profiles::load(&args.profiles)?;
    let plan = plan(&inv, std::sync::Arc::new(profiles), options);
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&as_list(&plan))?),
        Output::Yaml => {
            for item in items(&plan) {
                print!("---\n{}", serde_yaml::to_string(&item)?);
            }
            if !plan.schedule_order.is_empty() {
                println!("# schedule order: {}", plan.schedule_order.join(", "));
            }
        }
        Output::Table => print!("{}", table(&plan)),
    }
    for f in &plan.faults {
        eprintln!("warning: {f}");
    }
    for b in &plan.bindings {
        for w in b.works.iter().filter_map(|w| w.as_ref().err()) {
            eprintln!(
                "warning: {}/{}: no Work for {w}",
                b.binding.metadata.namespace(),
                b.binding.metadata.name()
            );
        }
    }
    Ok(())
}

/// Under `ResourceQuotaEstimate`, every Cluster's quota annotation must read (the controllers
/// log a malformed one and estimate without it; an input file is refused).
pub fn check_quotas(
    inv: &flotilla_core::plan::Inventory,
    gates: flotilla_core::priority::FeatureGates,
) -> anyhow::Result<()> {
    if !gates.resource_quota_estimate {
        return Ok(());
    }
    for c in &inv.clusters {
        if let Err(e) = flotilla_core::component_sets::MemberQuotas::of(c) {
            anyhow::bail!("Cluster {}: {e}", c.name());
        }
    }
    Ok(())
}

/// The feature gates `spec` sets (Karmada's `--feature-gates` syntax) over the defaults.
///
/// # Errors
/// An unknown gate or a malformed entry.
pub fn gates(spec: &str) -> anyhow::Result<flotilla_core::priority::FeatureGates> {
    let mut g = flotilla_core::priority::FeatureGates::default();
    g.set(spec).map_err(anyhow::Error::msg)?;
    Ok(g)
}

/// Bindings, then their Works.
pub fn items(plan: &Plan) -> Vec<Value> {
    let mut out = Vec::new();
    for b in &plan.bindings {
        out.push(serde_json::to_value(&b.binding).unwrap_or(Value::Null));
    }
    for b in &plan.bindings {
        for w in b.works.iter().flatten() {
            out.push(serde_json::to_value(w).unwrap_or(Value::Null));
        }
    }
    out
}

/// `{"apiVersion":"v1","kind":"List","items":[...]}`.
pub fn as_list(plan: &Plan) -> Value {
    json!({
        "apiVersion": "v1", "kind": "List", "metadata": {}, "items": items(plan),
        "scheduleOrder": plan.schedule_order,
        "preemptions": plan.preemptions,
        "bindingPreemptions": plan.binding_preemptions,
    })
}

fn table(plan: &Plan) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for b in &plan.bindings {
        let rb = &b.binding;
        let cond = rb
            .status
            .as_ref()
            .and_then(|st| st.conditions.iter().find(|c| c.type_ == "Scheduled"));
        let ns = rb.metadata.namespace();
        let name = if ns.is_empty() {
            rb.metadata.name().to_owned()
        } else {
            format!("{ns}/{}", rb.metadata.name())
        };
        let _ = writeln!(s, "{} {name}", rb.kind);
        let _ = writeln!(
            s,
            "  resource:  {} {}",
            rb.spec.resource.kind, rb.spec.resource.name
        );
        let _ = writeln!(s, "  replicas:  {}", rb.spec.replicas);
        if let Some(c) = cond {
            let _ = writeln!(
                s,
                "  scheduled: {} ({}){}",
                c.status,
                c.reason,
                if c.status == "True" {
                    String::new()
                } else {
                    format!(": {}", c.message)
                }
            );
        }
        if !b.evicted.is_empty() {
            let _ = writeln!(s, "  evicted:   {}", b.evicted.join(", "));
        }
        if rb.spec.clusters.is_empty() {
            let _ = writeln!(s, "  clusters:  <none>");
        }
        for t in &rb.spec.clusters {
            if t.components.is_empty() {
                let _ = writeln!(s, "  {:<24} replicas={}", t.name, t.replicas);
            } else {
                // A multi-component workload placed whole: one set of every component.
                let parts: Vec<String> = t
                    .components
                    .iter()
                    .map(|c| format!("{}×{}", c["name"].as_str().unwrap_or(""), c["replicas"]))
                    .collect();
                let _ = writeln!(s, "  {:<24} components={}", t.name, parts.join(","));
            }
        }
        for w in &b.works {
            match w {
                Ok(w) => {
                    let image = w
                        .spec
                        .workload
                        .manifests
                        .first()
                        .and_then(images)
                        .unwrap_or_default();
                    let overrides = w
                        .metadata
                        .annotations
                        .keys()
                        .filter(|k| k.contains("applied-"))
                        .count();
                    let _ = writeln!(
                        s,
                        "  work {}/{}{}{}",
                        w.metadata.namespace(),
                        w.metadata.name(),
                        if image.is_empty() {
                            String::new()
                        } else {
                            format!(" image={image}")
                        },
                        if overrides > 0 { " (overridden)" } else { "" }
                    );
                }
                Err(e) => {
                    let _ = writeln!(s, "  work error: {e}");
                }
            }
        }
        for f in &b.ignored_faults {
            let _ = writeln!(s, "  ignored fault: {f}");
        }
    }
    for u in &plan.unmatched {
        let _ = writeln!(s, "{u}: no propagation policy matches");
    }
    for p in &plan.preemptions {
        let _ = writeln!(s, "preemption: {p}");
    }
    for p in &plan.binding_preemptions {
        let _ = writeln!(
            s,
            "binding preemption: {} (priority {}) evicted from {}:",
            p.preemptor, p.priority, p.cluster
        );
        for v in &p.victims {
            let _ = writeln!(
                s,
                "  {} (priority {}, {} replica(s))",
                v.key(),
                v.priority,
                v.replicas
            );
        }
        for f in &p.ignored_faults {
            let _ = writeln!(s, "  ignored fault: {f}");
        }
    }
    if plan.schedule_order.len() > 1 {
        let _ = writeln!(
            s,
            "schedule order (highest priority first, then queue order):"
        );
        let priority: std::collections::HashMap<String, i32> = plan
            .bindings
            .iter()
            .map(|b| {
                let ns = b.binding.metadata.namespace();
                let key = if ns.is_empty() {
                    b.binding.metadata.name().to_owned()
                } else {
                    format!("{ns}/{}", b.binding.metadata.name())
                };
                let p = flotilla_core::queue::binding_priority(
                    b.binding.spec.schedule_priority.as_ref(),
                );
                (key, p)
            })
            .collect();
        for (i, k) in plan.schedule_order.iter().enumerate() {
            let _ = writeln!(
                s,
                "  {:>4}. {k} (priority {})",
                i + 1,
                priority.get(k).copied().unwrap_or(0)
            );
        }
    }
    s
}

fn images(manifest: &Value) -> Option<String> {
    let containers = manifest
        .pointer("/spec/template/spec/containers")
        .or_else(|| manifest.pointer("/spec/containers"))?;
    let imgs: Vec<&str> = containers
        .as_array()?
        .iter()
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .collect();
    Some(imgs.join(","))
}
