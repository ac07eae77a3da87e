//! CEL end to end through the `flotilla` binary: the `examples/cel` plan, the documented validation
//! errors (invalid, ill-typed, too expensive) and a runaway expression that cannot stall a plan.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run flotilla")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn scenario(name: &str, files: &[(&str, String)]) -> PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flotilla-cel-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (f, t) in files {
        std::fs::write(dir.join(f), t).expect("write");
    }
    dir
}

fn example(file: &str) -> String {
    std::fs::read_to_string(root().join("examples/cel").join(file)).expect("example")
}

const NOW: &str = "2026-06-01T00:00:00Z";

#[test]
fn cel_example_plans_as_documented() {
    let o = run(&["plan", "-f", "examples/cel", "--now", NOW]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    let expected = "\
ResourceBinding default/web-deployment
  resource:  Deployment web
  replicas:  2
  scheduled: True (Success)
  eu-1                     replicas=2
  us-1                     replicas=2
  work karmada-es-eu-1/";
    assert!(table.starts_with(expected), "{table}");
    for line in [
        "image=registry.eu-west.example.com/nginx:1.27 (overridden)",
        "image=registry.us-east.example.com/nginx:1.27 (overridden)",
        "ResourceBinding default/worker-deployment",
        "  eu-1                     replicas=3",
        "image=registry.eu-west.example.com/worker:2.1.0 (overridden)",
    ] {
        assert!(table.contains(line), "missing {line:?} in\n{table}");
    }
    // eu-2 (2 CPUs) and ap-1 (region) are filtered out; the worker goes to the best-scored cluster.
    assert!(
        !table.contains("eu-2") && !table.contains("ap-1"),
        "{table}"
    );
    assert!(
        !table.contains("us-1                     replicas=3"),
        "{table}"
    );

    let o = run(&["plan", "-f", "examples/cel", "--now", NOW, "-o", "json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let list: Value = serde_json::from_slice(&o.stdout).expect("json");
    let works: Vec<&Value> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["kind"] == "Work")
        .collect();
    assert_eq!(works.len(), 3);
    let manifest = |ns: &str, name: &str| -> Value {
        works
            .iter()
            .find(|w| {
                w["metadata"]["namespace"] == ns
                    && w["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with(name))
            })
            .map(|w| w["spec"]["workload"]["manifests"][0].clone())
            .unwrap_or_else(|| panic!("no Work {ns}/{name}*"))
    };
    let web_us = manifest("karmada-es-us-1", "web-");
    assert_eq!(
        web_us["spec"]["replicas"], 3,
        "us-east gets one more replica (CEL merge patch)"
    );
    assert_eq!(
        web_us["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.us-east.example.com/nginx:1.27"
    );
    assert_eq!(
        web_us["metadata"]["annotations"]["example.com/region"],
        "us-east"
    );
    assert_eq!(web_us["metadata"]["labels"]["example.com/cluster"], "us-1");
    let web_eu = manifest("karmada-es-eu-1", "web-");
    assert_eq!(web_eu["spec"]["replicas"], 2);
    let worker = manifest("karmada-es-eu-1", "worker-");
    assert_eq!(worker["spec"]["replicas"], 3);
    // Provenance records the CEL overriders as written.
    let work = works
        .iter()
        .find(|w| w["metadata"]["namespace"] == "karmada-es-us-1")
        .expect("work");
    let applied = work["metadata"]["annotations"]["policy.karmada.io/applied-overrides"]
        .as_str()
        .expect("annotation");
    assert!(
        applied.contains("\"expression\"") && applied.contains("\"cel\""),
        "{applied}"
    );
}

#[test]
fn cel_example_validates() {
    let o = run(&["validate", "-f", "examples/cel"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with(
            "valid: 2 templates, 2 propagation policies, 1 override policies, 4 clusters"
        ),
        "{}",
        text(&o.stdout)
    );
}

fn policy_with_selector(expr: &str) -> String {
    example("propagationpolicies.yaml").replacen(
        "- cluster.spec.region in ['eu-west', 'us-east']",
        &format!("- {expr}"),
        1,
    )
}

#[test]
fn invalid_ill_typed_and_too_expensive_expressions_are_rejected_with_field_and_column() {
    let cases = [
        (
            "syntax",
            "\"cluster.spec.region ==\"",
            "PropagationPolicy default/web: spec.placement.clusterAffinity.celSelector.celExpressions[1]: invalid CEL expression: column ",
            "syntax error",
        ),
        (
            "type",
            "\"cluster.spec.region == 1 + 'a'\"",
            "PropagationPolicy default/web: spec.placement.clusterAffinity.celSelector.celExpressions[1]: invalid CEL expression: column 26: type error: found no matching overload for '_+_' applied to '(int, string)'",
            "",
        ),
        (
            "result",
            "\"cluster.spec.region + 'x'\"",
            "spec.placement.clusterAffinity.celSelector.celExpressions[1]: invalid CEL expression: type error: a cluster selector expression must evaluate to bool",
            "",
        ),
        (
            "cost",
            "\"object.spec.template.spec.containers.all(a, object.spec.template.spec.containers.all(b, a.name + b.name != ''))\"",
            "spec.placement.clusterAffinity.celSelector.celExpressions[1]: invalid CEL expression: estimated cost ",
            "exceeds the limit of 1000000",
        ),
    ];
    for (name, expr, want, also) in cases {
        let dir = scenario(
            name,
            &[
                ("clusters.yaml", example("clusters.yaml")),
                ("deployments.yaml", example("deployments.yaml")),
                ("policies.yaml", policy_with_selector(expr)),
            ],
        );
        let o = run(&["validate", "-f", dir.to_str().expect("path")]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{name}: accepted");
        assert!(err.contains(want), "{name}: {err}");
        assert!(err.contains(also), "{name}: {err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn override_expression_errors_name_the_overrider_field() {
    let bad = example("overridepolicy.yaml").replace(
        "expression: \"{'example.com/cluster': clusterName}\"",
        "expression: \"{'example.com/cluster': 1}\"",
    );
    let dir = scenario(
        "override",
        &[
            ("clusters.yaml", example("clusters.yaml")),
            ("op.yaml", bad),
        ],
    );
    let o = run(&["validate", "-f", dir.to_str().expect("path")]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("OverridePolicy default/per-region: spec.overrideRules[0].overriders.labelsOverrider[0].expression: invalid CEL expression: type error: a string map expression must evaluate to map(string, string)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn big_deployment(containers: usize) -> String {
    let mut s = String::from(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n",
    );
    for i in 0..containers {
        s.push_str(&format!("      - {{name: c{i}, image: app:1}}\n"));
    }
    s
}

#[test]
fn a_runaway_expression_cannot_stall_a_plan() {
    // Quadratic in the container count: fine for a typical object (it validates), ~10^7 iterations
    // for this one. The runtime bound refuses it before it starts: the plan fails the binding under
    // the default Fail policy, in well under a second, and schedules it under Ignore.
    let runaway = "\"object.spec.template.spec.containers.all(a, object.spec.template.spec.containers.all(b, true))\"";
    let files = [
        ("clusters.yaml", example("clusters.yaml")),
        ("deployment.yaml", big_deployment(3000)),
        ("policies.yaml", policy_with_selector(runaway).split("\n---\n").next().expect("web policy").to_owned()),
        (
            "profile.yaml",
            "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {name: lenient}\nspec:\n  filters:\n  - name: ClusterAffinity\n    failurePolicy: Ignore\n"
                .to_owned(),
        ),
    ];
    let dir = scenario("runaway", &files);
    let d = dir.to_str().expect("path");
    let o = run(&["validate", "-f", d]);
    assert!(
        o.status.success(),
        "the expression is fine for typical objects: {}",
        text(&o.stderr)
    );

    let start = Instant::now();
    let o = run(&["plan", "-f", d, "--now", NOW]);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("scheduled: False (SchedulerError)"), "{out}");
    assert!(out.contains("exceeds the runtime limit"), "{out}");

    // The same policy, run by a profile whose ClusterAffinity filter ignores faults.
    let pol = std::fs::read_to_string(dir.join("policies.yaml"))
        .expect("read")
        .replace("  placement:", "  schedulerName: lenient\n  placement:");
    std::fs::write(dir.join("policies.yaml"), pol).expect("write");
    let o = run(&[
        "plan",
        "-f",
        &format!("{d}/clusters.yaml"),
        "-f",
        &format!("{d}/deployment.yaml"),
        "-f",
        &format!("{d}/policies.yaml"),
        "--profile",
        &format!("{d}/profile.yaml"),
        "--now",
        NOW,
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("scheduled: True (Success)"), "{out}");
    assert!(
        out.contains("ignored fault: plugin ClusterAffinity"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn cel_profile_plugins_filter_score_and_override() {
    let profile = r#"apiVersion: flotilla.dev/v1alpha1
kind: SchedulerProfile
metadata: {name: cel-plugins}
spec:
  filters:
  - name: APIEnablement
  - name: not-ap
    cel: {expression: "cluster.spec.region != 'ap-south'", reason: "cluster(s) are in ap-south"}
  scores:
  - name: priority
    cel: {expression: "int(clusterLabels['example.com/priority'])"}
  overriders:
  - name: OverridePolicy
  - name: stamp
    cel: {patchType: ApplyConfiguration, applyConfiguration: {expression: "{'metadata': {'labels': {'stamped-by': clusterName}}}"}}
"#;
    let policy = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: worker, namespace: default}\nspec:\n  schedulerName: cel-plugins\n  resourceSelectors:\n  - {apiVersion: apps/v1, kind: Deployment, name: worker}\n  placement:\n    spreadConstraints: [{spreadByField: cluster, maxGroups: 1, minGroups: 1}]\n    replicaScheduling: {replicaSchedulingType: Duplicated}\n";
    let dir = scenario(
        "profile",
        &[
            ("clusters.yaml", example("clusters.yaml")),
            ("deployments.yaml", example("deployments.yaml")),
            ("policy.yaml", policy.to_owned()),
            ("profile.yaml", profile.to_owned()),
        ],
    );
    let d = dir.to_str().expect("path");
    let o = run(&[
        "plan",
        "-f",
        &format!("{d}/clusters.yaml"),
        "-f",
        &format!("{d}/deployments.yaml"),
        "-f",
        &format!("{d}/policy.yaml"),
        "--profile",
        &format!("{d}/profile.yaml"),
        "--now",
        NOW,
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let list: Value = serde_json::from_slice(&o.stdout).expect("json");
    let rb = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["kind"] == "ResourceBinding")
        .expect("rb");
    // ap-1 (priority 100) is filtered out; spreading over one cluster keeps the best remaining
    // score, eu-2 (90).
    assert_eq!(
        rb["spec"]["clusters"],
        serde_json::json!([{"name": "eu-2", "replicas": 3}]),
        "{rb}"
    );
    let work = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["kind"] == "Work")
        .expect("work");
    assert_eq!(
        work["spec"]["workload"]["manifests"][0]["metadata"]["labels"]["stamped-by"],
        "eu-2"
    );

    let bad = profile.replace(
        "cluster.spec.region != 'ap-south'",
        "cluster.spec.region + '-x'",
    );
    std::fs::write(dir.join("profile.yaml"), bad).expect("write");
    let o = run(&[
        "plan",
        "-f",
        &format!("{d}/clusters.yaml"),
        "--profile",
        &format!("{d}/profile.yaml"),
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("spec.filters[1] (not-ap): cel: invalid expression: type error: a cluster selector expression must evaluate to bool"), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(dir);
}
