//! `flotilla interpret`: karmadactl's flags, `-o json`, `--check`, and errors that exit non-zero.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn scenario(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flotilla-interpret-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (f, text) in files {
        std::fs::write(dir.join(f), text).expect("write");
    }
    dir
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .current_dir(dir)
        .arg("interpret")
        .args(args)
        .output()
        .expect("run flotilla")
}

const RIC: &str = r#"
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata: {name: web}
spec:
  target: {apiVersion: example.io/v1, kind: Web}
  customizations:
    replicaResource:
      luaScript: |
        function GetReplicas(obj)
          return obj.spec.replicas, nil
        end
    statusAggregation:
      luaScript: |
        function AggregateStatus(obj, items)
          local ready = 0
          if items ~= nil then
            for i = 1, #items do ready = ready + items[i].status.ready end
          end
          obj.status = {ready = ready, seen = items ~= nil}
          return obj
        end
    healthInterpretation:
      luaScript: |
        function InterpretHealth(obj)
          return obj.status.ready > obj.missing.field
        end
"#;

const WEB: &str = r#"
apiVersion: example.io/v1
kind: Web
metadata:
  name: shop
  annotations: {count: 3}
spec: {replicas: 5}
status: {ready: 1}
"#;

const STATUS: &str = "clusterName: a\nstatus: {ready: 2}\napplied: true\nextra: ignored\n---\nclusterName: b\nstatus: {ready: 3}\n";

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

#[test]
fn runs_rules_with_karmadactl_flags() {
    let dir = scenario(
        "run",
        &[
            ("ric.yaml", RIC),
            ("web.yaml", WEB),
            ("status.yaml", STATUS),
            ("empty.yaml", ""),
        ],
    );
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "interpretreplica",
            "--observed-file",
            "web.yaml",
            "-o",
            "json",
        ],
    );
    assert_eq!(
        json(&o),
        serde_json::json!({"replica": 5, "requires": null})
    );
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "AggregateStatus",
            "--desired-file",
            "web.yaml",
            "--status-file",
            "status.yaml",
            "-o",
            "json",
        ],
    );
    assert_eq!(
        json(&o)["aggregatedStatus"]["status"],
        serde_json::json!({"ready": 5, "seen": true})
    );
    // No status file: the script sees nil; an empty one: an empty list.
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "AggregateStatus",
            "--desired-file",
            "web.yaml",
            "-o",
            "json",
        ],
    );
    assert_eq!(
        json(&o)["aggregatedStatus"]["status"]["seen"],
        serde_json::json!(false)
    );
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "AggregateStatus",
            "--desired-file",
            "web.yaml",
            "--status-file",
            "empty.yaml",
            "-o",
            "json",
        ],
    );
    assert_eq!(
        json(&o)["aggregatedStatus"]["status"]["seen"],
        serde_json::json!(true)
    );
    // karmadactl's default output.
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "InterpretReplica",
            "--observed-file",
            "web.yaml",
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("---\n# [1/2] replica:\n5\n---\n# [2/2] requires:\nnull\n"),
        "{text}"
    );
}

#[test]
fn errors_exit_non_zero_with_the_script_message() {
    let dir = scenario("errors", &[("ric.yaml", RIC), ("web.yaml", WEB)]);
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "InterpretHealth",
            "--observed-file",
            "web.yaml",
        ],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Execute InterpretHealth error"), "{err}");
    assert!(
        err.contains("spec.customizations.healthInterpretation.luaScript:2:"),
        "{err}"
    );
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "Retain",
            "--observed-file",
            "web.yaml",
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("desired-file options are not set"));
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "nope",
            "--observed-file",
            "web.yaml",
        ],
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("operation nope is not supported"));
    let o = run(
        &dir,
        &[
            "-f",
            "ric.yaml",
            "--operation",
            "InterpretDependency",
            "--observed-file",
            "web.yaml",
        ],
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("rule is not enabled"));
}

#[test]
fn check_reports_each_rule() {
    let broken = RIC.replace("return obj.spec.replicas, nil", "return obj.spec.replicas,");
    let dir = scenario("check", &[("ok.yaml", RIC), ("broken.yaml", &broken)]);
    let o = run(&dir, &["-f", "ok.yaml", "--check"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("TARGET: example.io/v1 Web"), "{out}");
    assert!(
        out.contains("InterpretReplica:") && out.contains("PASS") && out.contains("UNSET"),
        "{out}"
    );
    let o = run(&dir, &["-f", "broken.yaml", "--check"]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("ERROR: spec.customizations.replicaResource.luaScript:3:"),
        "{out}"
    );
}
