//! The offline CLI's hostile-input suite: ~1,000 crafted and mutated inputs, and the plugin
//! host's adversarial Wasm modules at their extension points, through `flotilla validate` and
//! `flotilla plan` as separate processes, each under a deadline and a memory limit. Every run must end with exit 0 or 1 (never a panic, an abort, a signal or
//! a hang); inputs known to be invalid must be rejected (exit 1) naming the file; a marker value
//! planted in every input must never appear in an error.
//!
//! `FLOTILLA_HOSTILE_REPORT=1` prints the tally (what BENCHMARKS.md/SECURITY.md quote).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Per-run wall-clock deadline.
const DEADLINE: Duration = Duration::from_secs(20);
/// Address-space limit per run (KiB, `ulimit -v`): an input that needs more aborts and fails.
const ADDRESS_SPACE_KIB: u64 = 2 * 1024 * 1024;
/// Planted in every input, outside the fields the engine reads: errors must not echo it.
const MARKER: &str = "s3cr3t-M4RK3R";

const CLUSTERS: &str = r#"apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member1, labels: {region: eu}}
spec: {syncMode: Push, region: eu}
status:
  conditions: [{type: Ready, status: "True", reason: ClusterReady, message: ok}]
  apiEnablements: [{groupVersion: apps/v1, resources: [{name: deployments, kind: Deployment}]}]
  resourceSummary: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata: {name: member2, labels: {region: us}}
spec: {syncMode: Push, region: us}
status:
  conditions: [{type: Ready, status: "True", reason: ClusterReady, message: ok}]
  apiEnablements: [{groupVersion: apps/v1, resources: [{name: deployments, kind: Deployment}]}]
  resourceSummary: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
"#;

fn deployment(replicas: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  annotations: {{note: {MARKER}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: nginx}}]}}
"#
    )
}

fn policy(placement: &str) -> String {
    format!(
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: web, namespace: default, annotations: {{note: {MARKER}}}}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]
  placement:
{placement}
"#
    )
}

const WEIGHTED: &str = "    clusterAffinity: {clusterNames: [member1, member2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - {targetCluster: {clusterNames: [member1]}, weight: 1}
        - {targetCluster: {clusterNames: [member2]}, weight: 3}";

/// What a case must do.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// Exit 1 with an error naming the file.
    Reject,
    /// Exit 0.
    Accept,
    /// Exit 0 or 1 (random mutations).
    Either,
}

struct Case {
    name: String,
    files: Vec<(&'static str, String)>,
    expect: Expect,
    /// A SchedulerProfile for `plan --profile` (hostile Wasm plugins); only `plan` runs then.
    profile: Option<String>,
}

fn case(name: impl Into<String>, expect: Expect, files: Vec<(&'static str, String)>) -> Case {
    Case {
        name: name.into(),
        files,
        expect,
        profile: None,
    }
}

fn with_policy(name: String, expect: Expect, replicas: &str, placement: &str) -> Case {
    case(
        name,
        expect,
        vec![
            ("clusters.yaml", CLUSTERS.to_owned()),
            ("app.yaml", deployment(replicas)),
            ("policy.yaml", policy(placement)),
        ],
    )
}

fn cel_selector(expr: &str) -> String {
    format!(
        "    clusterAffinity:\n      celSelector:\n        celExpressions:\n        - {}",
        serde_json::to_string(expr).expect("json string")
    )
}

use fastrand::Rng;

fn crafted() -> Vec<Case> {
    let mut cases = Vec::new();
    // CEL bombs: chains that used to overflow the parser's stack, and nesting past the bound.
    for n in [50, 100, 400, 2_000, 10_000] {
        let plus = vec!["1"; n].join("+");
        let member = format!("cluster{}", ".a".repeat(n));
        let ins = format!("{}1", "1 in ".repeat(n));
        let parens = format!("{}true{}", "(".repeat(n), ")".repeat(n));
        let neg = format!("{}1 == 1", "!".repeat(n));
        for (kind, expr) in [
            ("plus", plus),
            ("member", member),
            ("in", ins),
            ("parens", parens),
            ("not", neg),
        ] {
            // Short chains may be valid expressions; long ones are past every bound.
            let expect = if n >= 400 {
                Expect::Reject
            } else {
                Expect::Either
            };
            cases.push(with_policy(
                format!("cel-{kind}-{n}"),
                expect,
                "2",
                &cel_selector(&expr),
            ));
        }
    }
    cases.push(with_policy(
        "cel-huge-string".into(),
        Expect::Reject,
        "2",
        &cel_selector(&format!("'{}' == 'a'", "x".repeat(200_000))),
    ));
    // Replica counts: out of range or not integers are errors; the largest int32 plans quickly.
    for bad in [
        "9223372036854775808",
        "9223372036854775807",
        "2147483648",
        "-1",
        "-5",
        "\"5\"",
        "3.7",
        "true",
        "[2]",
        "{a: 1}",
    ] {
        cases.push(with_policy(
            format!("replicas-{bad}"),
            Expect::Reject,
            bad,
            WEIGHTED,
        ));
    }
    for good in ["2147483647", "0", "1", "1000000", "null"] {
        cases.push(with_policy(
            format!("replicas-{good}"),
            Expect::Accept,
            good,
            WEIGHTED,
        ));
    }
    // Weights below 1 or not integers (Karmada's weights are int64: 2^31 is valid).
    for w in ["0", "-1", "\"1\""] {
        let placement = WEIGHTED.replace("weight: 3", &format!("weight: {w}"));
        cases.push(with_policy(
            format!("weight-{w}"),
            Expect::Reject,
            "2",
            &placement,
        ));
    }
    // YAML: duplicate keys (top level and nested), merge keys, deep nesting, alias bombs.
    let dup_top = deployment("2").replace("kind: Deployment\n", "kind: Deployment\nkind: Secret\n");
    let dup_nested = deployment("2").replace("  replicas: 2\n", "  replicas: 2\n  replicas: 9\n");
    let merge = format!(
        "{}  template2: &t {{a: 1}}\n  other:\n    <<: *t\n",
        deployment("2")
    );
    for (name, text) in [
        ("yaml-dup-top", dup_top),
        ("yaml-dup-nested", dup_nested),
        ("yaml-merge-key", merge),
    ] {
        cases.push(case(
            name,
            Expect::Reject,
            vec![
                ("clusters.yaml", CLUSTERS.to_owned()),
                ("app.yaml", text),
                ("policy.yaml", policy(WEIGHTED)),
            ],
        ));
    }
    for depth in [200, 5_000, 100_000] {
        let flow = format!("x: {}1{}\n", "[".repeat(depth), "]".repeat(depth));
        let block: String = (0..depth.min(5_000))
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        cases.push(case(
            format!("yaml-flow-depth-{depth}"),
            Expect::Reject,
            vec![("deep.yaml", flow)],
        ));
        cases.push(case(
            format!("yaml-block-depth-{depth}"),
            Expect::Reject,
            vec![("deep.yaml", block)],
        ));
        let json = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        cases.push(case(
            format!("json-depth-{depth}"),
            Expect::Reject,
            vec![("deep.json", json)],
        ));
    }
    let mut laughs =
        String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for (i, prev) in ('b'..='j').zip('a'..='i') {
        laughs.push_str(&format!(
            "{i}: &{i} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
    }
    cases.push(case(
        "yaml-alias-bomb",
        Expect::Reject,
        vec![("bomb.yaml", laughs)],
    ));
    // Not YAML at all, or not text.
    cases.push(case(
        "binary",
        Expect::Reject,
        vec![(
            "bin.yaml",
            String::from_utf8_lossy(&[0, 159, 146, 150, 255, 0, 1]).into_owned(),
        )],
    ));
    cases.push(case(
        "huge-scalar",
        Expect::Either,
        vec![("big.yaml", format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: default}}\ndata: {{k: {}}}\n", "x".repeat(8 * 1024 * 1024)))],
    ));
    cases
}

/// The adversarial Wasm modules of the plugin host's tests, each at its extension point under
/// both failure policies, through `flotilla plan --profile` on a weighted Deployment.
fn hostile_plugins() -> Vec<Case> {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wasm/testdata");
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&testdata).expect("wasm testdata") {
        let path = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let point = ["filter", "select", "assign", "override"]
            .into_iter()
            .find(|p| text.contains(&format!("\"flotilla_{p}_v1\"")));
        let Some(point) = point else { continue };
        let field = match point {
            "filter" => "filters",
            "select" => "selects",
            "assign" => "assigners",
            _ => "overriders",
        };
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("module");
        for policy in ["Fail", "Ignore"] {
            let profile = format!(
                "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {{name: \
                 default-scheduler}}\nspec:\n  {field}:\n  - {{name: hostile, failurePolicy: \
                 {policy}, wasm: {{path: {}}}}}\n",
                serde_json::to_string(&path.display().to_string()).expect("json")
            );
            let mut c = with_policy(
                format!("wasm-{stem}-{policy}"),
                Expect::Either,
                "5",
                WEIGHTED,
            );
            c.profile = Some(profile);
            cases.push(c);
        }
    }
    assert!(cases.len() >= 20, "{} plugin cases", cases.len());
    cases
}

/// Random byte-level mutations of the valid scenario (insert, delete, flip, duplicate a line).
fn mutated(count: usize) -> Vec<Case> {
    let base = [
        ("clusters.yaml", CLUSTERS.to_owned()),
        ("app.yaml", deployment("4")),
        ("policy.yaml", policy(WEIGHTED)),
    ];
    let alphabet = b"{}[]:-,&*!|>'\"#%@` \n\t0123456789abcxyz.<=+()?";
    let mut rng = Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    (0..count)
        .map(|i| {
            let target = rng.usize(..base.len());
            let mut files: Vec<(&'static str, String)> = base.to_vec();
            let mut bytes = files[target].1.clone().into_bytes();
            for _ in 0..1 + rng.usize(..4) {
                let at = rng.usize(..bytes.len().max(1));
                match rng.usize(..4) {
                    0 => bytes.insert(at, alphabet[rng.usize(..alphabet.len())]),
                    1 if !bytes.is_empty() => {
                        bytes.remove(at.min(bytes.len() - 1));
                    }
                    2 if !bytes.is_empty() => {
                        let at = at.min(bytes.len() - 1);
                        bytes[at] = alphabet[rng.usize(..alphabet.len())];
                    }
                    _ => {
                        let text = String::from_utf8_lossy(&bytes).into_owned();
                        let lines: Vec<&str> = text.lines().collect();
                        let l = rng.usize(..lines.len().max(1));
                        let mut out: Vec<&str> = lines.clone();
                        if let Some(line) = lines.get(l) {
                            out.insert(l, line);
                        }
                        bytes = out.join("\n").into_bytes();
                    }
                }
            }
            files[target].1 = String::from_utf8_lossy(&bytes).into_owned();
            case(format!("mutation-{i}"), Expect::Either, files)
        })
        .collect()
}

#[derive(Debug)]
struct Outcome {
    code: Option<i32>,
    elapsed: Duration,
    stderr: String,
    peak_kib: u64,
}

/// Runs `flotilla <cmd> -f dir [--profile p]` under the limits, sampling the peak resident set
/// (VmHWM). With a profile (Wasm plugins) the limit is on the data segment rather than on the
/// address space, which wasmtime reserves generously and never touches.
fn run(cmd: &str, dir: &Path, profile: Option<&Path>) -> Outcome {
    let started = Instant::now();
    let limit = if profile.is_some() { "-d" } else { "-v" };
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!(
            "ulimit {limit} {ADDRESS_SPACE_KIB}; exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_flotilla"))
        .args([cmd, "-f"])
        .arg(dir);
    if let Some(p) = profile {
        command.arg("--profile").arg(p);
    }
    let mut child = command
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flotilla");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_path)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Outcome {
        code: status.and_then(|s| s.code()),
        elapsed: started.elapsed(),
        stderr: reader.join().unwrap_or_default(),
        peak_kib,
    }
}

/// The case's input directory, and its profile file (outside the directory `-f` reads).
fn materialise(root: &Path, c: &Case) -> (PathBuf, Option<PathBuf>) {
    let dir = root.join(&c.name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (f, text) in &c.files {
        std::fs::write(dir.join(f), text).expect("write");
    }
    let profile = c.profile.as_ref().map(|text| {
        let p = root.join(format!("{}.profile", c.name));
        std::fs::write(&p, text).expect("write profile");
        p
    });
    (dir, profile)
}

#[test]
fn a_thousand_hostile_inputs_end_in_exit_0_or_1_within_the_deadline_and_never_echo_the_input() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let mut cases = crafted();
    cases.extend(hostile_plugins());
    let crafted_count = cases.len();
    // Plugin cases run `plan` only; the rest run `validate` and `plan`.
    cases.extend(mutated(480));
    let cases = Mutex::new(cases.into_iter().enumerate().collect::<Vec<_>>());
    let failures = Mutex::new(Vec::<String>::new());
    let stats = Mutex::new((0usize, Duration::ZERO, 0u64, String::new()));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let Some((_, c)) = cases.lock().expect("lock").pop() else {
                        return;
                    };
                    let (dir, profile) = materialise(root.path(), &c);
                    let commands: &[&str] = if profile.is_some() {
                        &["plan"]
                    } else {
                        &["validate", "plan"]
                    };
                    for &cmd in commands {
                        let o = run(cmd, &dir, profile.as_deref());
                        let mut problems = Vec::new();
                        match o.code {
                            None => problems.push(format!(
                                "no exit code (signal or past the {DEADLINE:?} deadline)"
                            )),
                            Some(0 | 1) => {}
                            Some(code) => problems.push(format!("exit {code}")),
                        }
                        if o.stderr.contains("panicked") || o.stderr.contains("overflowed") {
                            problems.push("panic".into());
                        }
                        if o.stderr.contains(MARKER) {
                            problems.push("the error echoes input contents".into());
                        }
                        match c.expect {
                            Expect::Reject if o.code != Some(1) => {
                                problems.push("accepted an invalid input".into());
                            }
                            Expect::Reject
                                if !c.files.iter().any(|(f, _)| o.stderr.contains(f)) =>
                            {
                                problems.push("the error does not name the file".into());
                            }
                            Expect::Accept if o.code != Some(0) => {
                                problems.push("rejected a valid input".into());
                            }
                            _ => {}
                        }
                        {
                            let mut st = stats.lock().expect("lock");
                            st.0 += 1;
                            if o.elapsed > st.1 {
                                st.1 = o.elapsed;
                            }
                            if o.peak_kib > st.2 {
                                st.2 = o.peak_kib;
                                st.3 = format!("{} {cmd}", c.name);
                            }
                        }
                        if !problems.is_empty() {
                            let first = o.stderr.lines().next().unwrap_or("").to_owned();
                            failures.lock().expect("lock").push(format!(
                                "{} ({cmd}): {}; took {:?}; stderr: {}",
                                c.name,
                                problems.join(", "),
                                o.elapsed,
                                first.chars().take(300).collect::<String>()
                            ));
                        }
                    }
                }
            });
        }
    });
    let (runs, slowest, peak_kib, peak_case) = stats.into_inner().expect("stats");
    if std::env::var_os("FLOTILLA_HOSTILE_REPORT").is_some() {
        eprintln!(
            "hostile CLI suite: {runs} runs ({crafted_count} crafted cases + mutations, validate \
             and plan each), slowest {slowest:?}, peak RSS observed {} MiB ({peak_case})",
            peak_kib / 1024
        );
    }
    assert!(runs >= 1_000, "{runs} runs");
    let failures = failures.into_inner().expect("failures");
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
