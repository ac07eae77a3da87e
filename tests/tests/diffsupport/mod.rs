//! Differential testing support: run the same scenario through flotilla's scheduler core and
//! through Karmada's own scheduler (the Go oracle in `tests/karmada-diff`), compare, shrink.

#![allow(dead_code)]

pub mod scenarios;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use flotilla_api::cluster::Cluster;
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::scheduler;
use serde_json::Value;
use std::sync::Arc;

/// One engine's answer for a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `Ok` for success, otherwise the condition reason (`NoClusterFit`, `Unschedulable`, `SchedulerError`).
    pub kind: String,
    /// On success: (cluster, replicas) sorted by name.
    pub clusters: Vec<(String, i64)>,
    pub message: String,
    pub observed_affinity: String,
}

impl Outcome {
    /// The contract compared: success vs failure kind, placement as a set, observed affinity.
    pub fn agrees(&self, other: &Outcome) -> bool {
        self.kind == other.kind
            && self.clusters == other.clusters
            && self.observed_affinity == other.observed_affinity
    }

    pub fn short(&self) -> String {
        if self.kind == "Ok" {
            let cs: Vec<String> = self
                .clusters
                .iter()
                .map(|(n, r)| format!("{n}:{r}"))
                .collect();
            format!(
                "Ok {{{}}} observed={:?}",
                cs.join(", "),
                self.observed_affinity
            )
        } else {
            format!(
                "{} {:?} observed={:?}",
                self.kind, self.message, self.observed_affinity
            )
        }
    }
}

/// Parse a scenario into flotilla's API types.
pub fn parse(
    scenario: &Value,
) -> Result<(ResourceBindingSpec, ResourceBindingStatus, Vec<Cluster>), String> {
    let spec =
        serde_json::from_value(scenario["spec"].clone()).map_err(|e| format!("spec: {e}"))?;
    let status =
        serde_json::from_value(scenario["status"].clone()).map_err(|e| format!("status: {e}"))?;
    let clusters = serde_json::from_value(scenario["clusters"].clone())
        .map_err(|e| format!("clusters: {e}"))?;
    Ok((spec, status, clusters))
}

/// Schedule a scenario with flotilla's default profile.
pub fn flotilla(scenario: &Value) -> Outcome {
    let (spec, status, mut clusters) = parse(scenario)
        .unwrap_or_else(|e| panic!("scenario does not parse in flotilla: {e}\n{scenario}"));
    // Clusters as flotilla's admission stores them (Karmada's API server does the same).
    clusters
        .iter_mut()
        .for_each(flotilla_core::validate::default_cluster);
    let profile = flotilla_plugins::default_profile();
    let snapshot = Snapshot::new(clusters, Arc::default(), Options::default());
    let res = scheduler::schedule(&snapshot, &profile, &spec, &status, None, None);
    match res.outcome {
        Ok(t) => {
            let mut cs: Vec<(String, i64)> = t
                .into_iter()
                .map(|t| (t.name, i64::from(t.replicas)))
                .collect();
            cs.sort();
            Outcome {
                kind: "Ok".into(),
                clusters: cs,
                message: String::new(),
                observed_affinity: res.observed_affinity_name,
            }
        }
        Err(f) => Outcome {
            kind: f.kind.reason().into(),
            clusters: Vec::new(),
            message: f.message,
            observed_affinity: res.observed_affinity_name,
        },
    }
}

/// Karmada's answer, or why the scenario is not one Karmada would schedule.
pub enum Oracle {
    Outcome(Outcome),
    Invalid(String),
}

/// The Go oracle process (`karmada-diff run`), one JSON line in, one JSON line out.
pub struct Karmada {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub version: String,
}

impl Karmada {
    pub fn start(bin: &Path) -> Result<Self, String> {
        let version = Command::new(bin)
            .arg("version")
            .output()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
        let mut child = Command::new(bin)
            .arg("run")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Karmada {
            child,
            stdin,
            stdout,
            version,
        })
    }

    pub fn schedule(&mut self, scenario: &Value) -> Oracle {
        let mut line = serde_json::to_string(scenario).expect("scenario serializes");
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .expect("write to karmada-diff");
        self.stdin.flush().expect("flush karmada-diff");
        let mut out = String::new();
        let n = self
            .stdout
            .read_line(&mut out)
            .expect("read from karmada-diff");
        assert!(n > 0, "karmada-diff exited early");
        let v: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("karmada-diff output {out:?}: {e}"));
        if let Some(msg) = v.get("invalid").and_then(Value::as_str) {
            return Oracle::Invalid(msg.to_owned());
        }
        let observed_affinity = v["observedAffinity"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(f) = v.get("failure") {
            return Oracle::Outcome(Outcome {
                kind: f["reason"].as_str().unwrap_or_default().to_owned(),
                clusters: Vec::new(),
                message: f["message"].as_str().unwrap_or_default().to_owned(),
                observed_affinity,
            });
        }
        let mut clusters: Vec<(String, i64)> = v["clusters"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| {
                        (
                            t["name"].as_str().unwrap_or_default().to_owned(),
                            t["replicas"].as_i64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        clusters.sort();
        Oracle::Outcome(Outcome {
            kind: "Ok".into(),
            clusters,
            message: String::new(),
            observed_affinity,
        })
    }
}

impl Drop for Karmada {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Go harness's source directory.
pub fn harness_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("karmada-diff")
}

/// Locate or build the oracle binary: `KARMADA_DIFF_BIN` if set (CI builds it once in `.ci/run`),
/// otherwise `go build` it into cargo's per-target tmp dir (needs Go and the module proxy or a
/// warm module cache).
pub fn oracle_binary() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("KARMADA_DIFF_BIN") {
        let bin = PathBuf::from(bin);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!("KARMADA_DIFF_BIN={} is not a file", bin.display()))
        };
    }
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("karmada-diff");
    let status = Command::new("go")
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(harness_dir())
        .status()
        .map_err(|e| format!("cannot run `go` ({e}); install Go ≥ 1.25 or set KARMADA_DIFF_BIN"))?;
    if !status.success() {
        return Err(format!(
            "`go build` in {} failed ({status})",
            harness_dir().display()
        ));
    }
    Ok(out)
}

/// A disagreement, shrunk.
pub struct Disagreement {
    pub index: u64,
    /// The documented cause, when there is one.
    pub explained: Option<&'static str>,
    pub class: String,
    pub original: Value,
    pub minimized: Value,
    pub flotilla: Outcome,
    pub karmada: Outcome,
}

/// A short description of the placement's features, for grouping disagreements.
pub fn features(s: &Value) -> String {
    let p = &s["spec"]["placement"];
    let rs = &p["replicaScheduling"];
    let mode = if rs.is_null() {
        "nil-rs".to_owned()
    } else if rs["replicaSchedulingType"] == "Duplicated" {
        "Duplicated".to_owned()
    } else if rs["replicaDivisionPreference"] == "Aggregated" {
        "Aggregated".to_owned()
    } else if rs["weightPreference"]["dynamicWeight"].is_string() {
        "DynamicWeight".to_owned()
    } else {
        "StaticWeight".to_owned()
    };
    let mut f = vec![mode];
    if p["spreadConstraints"].is_array() {
        let fields: Vec<String> = p["spreadConstraints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                c["spreadByField"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| "label".into())
            })
            .collect();
        f.push(format!("spread[{}]", fields.join(",")));
    }
    if p["clusterAffinities"].is_array() {
        f.push("affinities".into());
    }
    if s["spec"]["rescheduleTriggeredAt"].is_string() {
        f.push("reschedule".into());
    }
    f.join(" ")
}

pub fn class_of(s: &Value, fl: &Outcome, ka: &Outcome) -> String {
    let what = if fl.kind != ka.kind {
        format!("flotilla {} / karmada {}", fl.kind, ka.kind)
    } else if fl.observed_affinity != ka.observed_affinity {
        "observed affinity".to_owned()
    } else {
        "placement".to_owned()
    };
    format!("{what} [{}]", features(s))
}

/// Disagreements with a documented cause (tests/karmada-diff/DIFFERENCES.md): `Some(tag)` when
/// the disagreement is explained. Each check is as narrow as possible, and counterfactual where it
/// can be (re-run flotilla on the input with the cause removed and require agreement).
///
/// There are none at present: every class found so far is fixed (D1–D3) or not compared (D4), so
/// every disagreement fails the run.
pub fn explain(_s: &Value, _fl: &Outcome, _ka: &Outcome) -> Option<&'static str> {
    None
}

/// Evaluate one scenario on both engines: `None` when Karmada rejects it as invalid.
pub fn both(karmada: &mut Karmada, s: &Value) -> Result<(Outcome, Outcome), String> {
    match karmada.schedule(s) {
        Oracle::Invalid(msg) => Err(msg),
        Oracle::Outcome(ka) => Ok((flotilla(s), ka)),
    }
}

/// Greedy shrinking: apply simplifications while the scenario stays valid and still disagrees.
pub fn shrink(karmada: &mut Karmada, s: &Value, budget: usize) -> Value {
    let mut cur = s.clone();
    let mut evals = 0;
    'outer: loop {
        for cand in candidates(&cur) {
            if evals >= budget {
                break 'outer;
            }
            evals += 1;
            if let Ok((fl, ka)) = both(karmada, &cand)
                && !fl.agrees(&ka)
            {
                cur = cand;
                continue 'outer;
            }
        }
        break;
    }
    cur
}

fn remove_at(v: &mut Value, ptr: &str, i: usize) -> bool {
    match v.pointer_mut(ptr).and_then(Value::as_array_mut) {
        Some(a) if i < a.len() => {
            a.remove(i);
            // An empty list stays a list where the schema requires one (`clusters`).
            if a.is_empty() && ptr != "/clusters" {
                remove_key(v, ptr);
            }
            true
        }
        _ => false,
    }
}

fn remove_key(v: &mut Value, ptr: &str) -> bool {
    let (parent, key) = match ptr.rsplit_once('/') {
        Some(x) => x,
        None => return false,
    };
    v.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .is_some_and(|o| o.remove(key).is_some())
}

fn len_at(v: &Value, ptr: &str) -> usize {
    v.pointer(ptr).and_then(Value::as_array).map_or(0, Vec::len)
}

/// Simplifications of a scenario, most aggressive first.
fn candidates(s: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut push = |f: &dyn Fn(&mut Value) -> bool| {
        let mut c = s.clone();
        if f(&mut c) && c != *s {
            out.push(c);
        }
    };
    // Drop clusters (halves first, then one at a time).
    let n = len_at(s, "/clusters");
    if n > 2 {
        push(&|c| {
            let a = c["clusters"].as_array_mut().unwrap();
            a.truncate(n / 2);
            true
        });
        push(&|c| {
            let a = c["clusters"].as_array_mut().unwrap();
            a.drain(..n / 2);
            true
        });
    }
    for i in 0..n {
        push(&|c| remove_at(c, "/clusters", i));
    }
    // Previous assignment.
    push(&|c| remove_key(c, "/spec/clusters"));
    for i in 0..len_at(s, "/spec/clusters") {
        push(&|c| remove_at(c, "/spec/clusters", i));
        for f in [0.5, -1.0] {
            push(&|c| shrink_int(c, &format!("/spec/clusters/{i}/replicas"), f, 1));
        }
    }
    // Replicas.
    for f in [0.5, -1.0] {
        push(&|c| shrink_int(c, "/spec/replicas", f, 1));
    }
    for key in [
        "/spec/replicaRequirements",
        "/spec/gracefulEvictionTasks",
        "/spec/rescheduleTriggeredAt",
        "/status/lastScheduledTime",
        "/status/schedulerObservingAffinityName",
        "/spec/resource/uid",
    ] {
        push(&|c| remove_key(c, key));
    }
    // Placement parts.
    for key in [
        "clusterTolerations",
        "spreadConstraints",
        "clusterAffinity",
        "clusterAffinities",
    ] {
        let ptr = format!("/spec/placement/{key}");
        push(&|c| remove_key(c, &ptr));
        for i in 0..len_at(s, &ptr) {
            push(&|c| remove_at(c, &ptr, i));
        }
    }
    for t in 0..len_at(s, "/spec/placement/clusterAffinities") {
        let ptr = format!("/spec/placement/clusterAffinities/{t}/overflowAffinities");
        push(&|c| remove_key(c, &ptr));
        for i in 0..len_at(s, &ptr) {
            push(&|c| remove_at(c, &ptr, i));
        }
        for key in ["labelSelector", "fieldSelector", "clusterNames", "exclude"] {
            push(&|c| remove_key(c, &format!("/spec/placement/clusterAffinities/{t}/{key}")));
        }
    }
    for key in ["labelSelector", "fieldSelector", "clusterNames", "exclude"] {
        push(&|c| remove_key(c, &format!("/spec/placement/clusterAffinity/{key}")));
    }
    let swl = "/spec/placement/replicaScheduling/weightPreference/staticWeightList";
    for i in 0..len_at(s, swl) {
        push(&|c| remove_at(c, swl, i));
    }
    // Cluster details.
    for i in 0..n {
        for key in [
            "metadata/labels",
            "spec/taints",
            "spec/zones",
            "spec/zone",
            "spec/provider",
            "spec/region",
            "status/conditions",
            "status/resourceSummary/allocated",
            "status/resourceSummary/allocating",
            "status/resourceSummary/allocatable/cpu",
            "status/resourceSummary/allocatable/memory",
            "metadata/deletionTimestamp",
        ] {
            push(&|c| remove_key(c, &format!("/clusters/{i}/{key}")));
        }
        for f in [0.5, -1.0] {
            push(&|c| {
                shrink_str_int(
                    c,
                    &format!("/clusters/{i}/status/resourceSummary/allocatable/pods"),
                    f,
                )
            });
        }
    }
    out
}

fn shrink_int(c: &mut Value, ptr: &str, factor: f64, min: i64) -> bool {
    let Some(v) = c.pointer_mut(ptr) else {
        return false;
    };
    let Some(x) = v.as_i64() else { return false };
    let y = if factor < 0.0 {
        x - 1
    } else {
        (x as f64 * factor) as i64
    };
    if y < min || y == x {
        return false;
    }
    *v = Value::from(y);
    true
}

fn shrink_str_int(c: &mut Value, ptr: &str, factor: f64) -> bool {
    let Some(v) = c.pointer_mut(ptr) else {
        return false;
    };
    let Some(x) = v.as_str().and_then(|s| s.parse::<i64>().ok()) else {
        return false;
    };
    let y = if factor < 0.0 {
        x - 1
    } else {
        (x as f64 * factor) as i64
    };
    if y < 0 || y == x {
        return false;
    }
    *v = Value::from(y.to_string());
    true
}

/// Summary of a differential run.
pub struct Report {
    pub total: usize,
    pub agreed: usize,
    pub invalid: Vec<(u64, String)>,
    pub disagreements: Vec<Disagreement>,
    pub message_mismatches: usize,
    /// Up to 5 (index, flotilla message, karmada message) of agreeing outcomes with different messages.
    pub message_examples: Vec<(u64, String, String)>,
    /// Outcome histogram: (placement features' mode, outcome kind) → count.
    pub histogram: std::collections::BTreeMap<(String, String), usize>,
}

impl Report {
    pub fn unexplained(&self) -> usize {
        self.disagreements
            .iter()
            .filter(|d| d.explained.is_none())
            .count()
    }

    pub fn agreement(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        self.agreed as f64 * 100.0 / self.total as f64
    }
}

/// Run `count` scenarios of run `seed` through both engines; shrink up to `shrink_max` disagreements.
pub fn run(karmada: &mut Karmada, seed: u64, count: u64, shrink_max: usize) -> Report {
    let mut rep = Report {
        total: 0,
        agreed: 0,
        invalid: Vec::new(),
        disagreements: Vec::new(),
        message_mismatches: 0,
        message_examples: Vec::new(),
        histogram: Default::default(),
    };
    let mut shrunk = 0;
    for index in 0..count {
        let s = scenarios::scenario(
            seed,
            index,
            scenarios::Shape {
                clusters: None,
                models: true,
            },
        );
        match both(karmada, &s) {
            Err(msg) => rep.invalid.push((index, msg)),
            Ok((fl, ka)) => {
                rep.total += 1;
                let mode = features(&s)
                    .split(' ')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                *rep.histogram.entry((mode, ka.kind.clone())).or_default() += 1;
                if fl.agrees(&ka) {
                    rep.agreed += 1;
                    if fl.message != ka.message {
                        rep.message_mismatches += 1;
                        if rep.message_examples.len() < 5 {
                            rep.message_examples.push((
                                index,
                                fl.message.clone(),
                                ka.message.clone(),
                            ));
                        }
                    }
                } else {
                    let explained = explain(&s, &fl, &ka);
                    let class = match explained {
                        Some(tag) => format!("explained: {tag}"),
                        None => class_of(&s, &fl, &ka),
                    };
                    let minimized = if explained.is_none() && shrunk < shrink_max {
                        shrunk += 1;
                        shrink(karmada, &s, 3000)
                    } else {
                        s.clone()
                    };
                    let (mf, mk) =
                        both(karmada, &minimized).expect("minimized scenario stays valid");
                    rep.disagreements.push(Disagreement {
                        index,
                        explained,
                        class,
                        original: s,
                        minimized,
                        flotilla: mf,
                        karmada: mk,
                    });
                }
            }
        }
    }
    rep
}

/// A human-readable report; disagreements grouped by class with one minimized example each.
pub fn render(rep: &Report, seed: u64, version: &str) -> String {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "differential vs {version}: seed {seed}: {}/{} agree ({:.3} %), {} disagreements ({} unexplained), {} invalid, {} agreeing outcomes with different messages",
        rep.agreed,
        rep.total,
        rep.agreement(),
        rep.disagreements.len(),
        rep.unexplained(),
        rep.invalid.len(),
        rep.message_mismatches
    );
    let mut modes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for ((mode, kind), n) in &rep.histogram {
        modes
            .entry(mode.as_str())
            .or_default()
            .push(format!("{kind} {n}"));
    }
    for (mode, kinds) in &modes {
        let _ = writeln!(s, "   karmada outcomes, {mode}: {}", kinds.join(", "));
    }
    for (i, f, k) in &rep.message_examples {
        let _ = writeln!(
            s,
            "   message differs (scenario {i}): flotilla {f:?} / karmada {k:?}"
        );
    }
    let mut classes: BTreeMap<&str, Vec<&Disagreement>> = BTreeMap::new();
    for d in &rep.disagreements {
        classes.entry(d.class.as_str()).or_default().push(d);
    }
    for (class, ds) in &classes {
        let ex = ds
            .iter()
            .min_by_key(|d| serde_json::to_string(&d.minimized).map_or(usize::MAX, |t| t.len()))
            .unwrap();
        let idx: Vec<String> = ds.iter().take(10).map(|d| d.index.to_string()).collect();
        let _ = writeln!(
            s,
            "\n== {} × {class} (scenarios {}{})",
            ds.len(),
            idx.join(", "),
            if ds.len() > 10 { ", …" } else { "" }
        );
        let _ = writeln!(s, "   flotilla: {}", ex.flotilla.short());
        let _ = writeln!(s, "   karmada:  {}", ex.karmada.short());
        let _ = writeln!(
            s,
            "   minimized scenario {}: {}",
            ex.index,
            serde_json::to_string(&ex.minimized).unwrap_or_default()
        );
    }
    for (i, msg) in rep.invalid.iter().take(5) {
        let _ = writeln!(s, "\ninvalid scenario {i}: {msg}");
    }
    s
}
