//! Golden cases.
//!
//! * `tests/golden/schedule/*.yaml`: each case gives a binding (spec and status) and clusters, and
//!   expects either the per-cluster verdicts of one filter plugin, the scores of one score plugin,
//!   or the default profile's full result.
//! * `tests/golden/failover/*.yaml`: each case gives a binding spec, clusters and a time, and
//!   expects the taint manager's decision then (the evicted clusters and when the next decision is
//!   due).
//!
//! `FLOTILLA_BLESS=1` rewrites the `expect` blocks from actual output (review the diff before
//! committing).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::Placement;
use flotilla_api::work::{ResourceBinding, ResourceBindingSpec, ResourceBindingStatus};
use flotilla_core::failover;
use flotilla_core::framework::{BindingContext, FilterInput, ScoreInput, Verdict};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::scheduler;
use flotilla_core::time::{format_rfc3339, parse_rfc3339};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Case<I> {
    name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    description: String,
    /// Run only this plugin (a filter or score plugin of the default profile; schedule cases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    plugin: Option<String>,
    input: I,
    expect: Value,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Input {
    binding: ResourceBindingSpec,
    #[serde(default)]
    status: ResourceBindingStatus,
    clusters: Vec<Cluster>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FailoverInput {
    /// The binding's spec (`placement.clusterTolerations` stand in for the applied placement).
    binding: ResourceBindingSpec,
    clusters: Vec<Cluster>,
    /// When the taint manager decides (RFC 3339).
    now: String,
}

fn run(case: &Case<Input>) -> Value {
    let profile = flotilla_plugins::default_profile();
    let spec = &case.input.binding;
    let empty = Placement::default();
    let placement = spec.placement.as_ref().unwrap_or(&empty);
    let term = placement
        .cluster_affinities
        .iter()
        .find(|t| t.affinity_name == case.input.status.scheduler_observing_affinity_name)
        .or(placement.cluster_affinities.first());
    let ctx = BindingContext::new(spec, placement, term);
    let clusters: Vec<&Cluster> = case.input.clusters.iter().collect();
    match case.plugin.as_deref() {
        Some(plugin) => {
            // `score:Name` picks the score plugin when a filter has the same name.
            let (point, name) = plugin.split_once(':').unwrap_or(("", plugin));
            let filter = profile
                .filters
                .iter()
                .find(|s| s.plugin.name() == name && point != "score");
            if let Some(slot) = filter {
                let mut out = Vec::new();
                slot.plugin
                    .filter(&FilterInput::new(&ctx, &clusters), &mut out)
                    .expect("built-in filters do not fault");
                let verdicts: BTreeMap<&str, String> = clusters
                    .iter()
                    .zip(out)
                    .map(|(c, v)| {
                        (
                            c.name(),
                            match v {
                                Verdict::Fit => "fit".to_owned(),
                                Verdict::Unschedulable(r) => r.into_owned(),
                            },
                        )
                    })
                    .collect();
                return serde_json::json!({ "verdicts": verdicts });
            }
            let slot = profile
                .scores
                .iter()
                .find(|s| s.plugin.name() == name)
                .unwrap_or_else(|| panic!("no plugin {name}"));
            let mut out = Vec::new();
            slot.plugin
                .score(&ScoreInput::new(&ctx, &clusters), &mut out)
                .expect("built-in scores do not fault");
            let scores: BTreeMap<&str, i64> = clusters.iter().map(|c| c.name()).zip(out).collect();
            serde_json::json!({ "scores": scores })
        }
        None => {
            let snapshot = Snapshot::new(
                case.input.clusters.clone(),
                Arc::default(),
                Options::default(),
            );
            let res =
                scheduler::schedule(&snapshot, &profile, spec, &case.input.status, None, None);
            let mut v = match &res.outcome {
                Ok(t) => {
                    let mut t = t.clone();
                    t.sort_by(|a, b| a.name.cmp(&b.name)); // merge order is not part of the contract
                    serde_json::json!({ "clusters": t.iter().map(|t| (t.name.clone(), t.replicas)).collect::<BTreeMap<_, _>>() })
                }
                Err(f) => {
                    serde_json::json!({ "failure": { "reason": f.kind.reason(), "message": f.message } })
                }
            };
            if !placement.cluster_affinities.is_empty() {
                v["observedAffinity"] = Value::String(res.observed_affinity_name.clone());
            }
            v
        }
    }
}

/// `failover::evict_tainted` at `input.now`: `evicted` and, when one is due, `nextDue`.
fn run_failover(case: &Case<FailoverInput>) -> Value {
    let mut rb = ResourceBinding {
        spec: case.input.binding.clone(),
        ..Default::default()
    };
    let now = parse_rfc3339(&case.input.now)
        .unwrap_or_else(|| panic!("now: {:?} is not RFC 3339", case.input.now));
    let (evicted, next) = failover::evict_tainted(&mut rb, &case.input.clusters, now);
    let mut v = serde_json::json!({ "evicted": evicted });
    if let Some(next) = next {
        v["nextDue"] = Value::String(format_rfc3339(next));
    }
    v
}

/// Run every case in `tests/golden/<dir>` (at least `min` of them) through `run`, or rewrite the
/// expectations with `FLOTILLA_BLESS`.
fn golden_cases<I: DeserializeOwned + Serialize>(
    dir: &str,
    min: usize,
    run: impl Fn(&Case<I>) -> Value,
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(dir);
    let bless = std::env::var_os("FLOTILLA_BLESS").is_some();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    let mut failures = Vec::new();
    let mut count = 0;
    for path in entries
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        count += 1;
        let text = std::fs::read_to_string(path).expect("read case");
        let mut case: Case<I> =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let got = run(&case);
        if bless {
            if got != case.expect {
                case.expect = got;
                std::fs::write(path, serde_yaml::to_string(&case).expect("yaml")).expect("write");
            }
        } else if got != case.expect {
            failures.push(format!(
                "{} ({}):\n  expected {}\n  got      {}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                case.name,
                serde_json::to_string(&case.expect).unwrap_or_default(),
                serde_json::to_string(&got).unwrap_or_default()
            ));
        }
    }
    assert!(count >= min, "expected golden cases in {}", dir.display());
    assert!(
        failures.is_empty(),
        "{} golden case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn golden_schedule_cases() {
    golden_cases("schedule", 10, run);
}

#[test]
fn golden_failover_cases() {
    golden_cases("failover", 3, run_failover);
}
