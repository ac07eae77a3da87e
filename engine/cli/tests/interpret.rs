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

/// Whether clang and wasm-ld are here to build the C interpreter of `flotilla plugin new`; in CI
/// a missing toolchain is a failure, locally a skip.
fn have_c_toolchain(test: &str) -> bool {
    let runs = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let ok = runs("clang") && runs("wasm-ld");
    if !ok {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(
            !ci,
            "{test}: clang and wasm-ld are missing (CI must provide them)"
        );
        eprintln!("SKIPPED {test}: clang and wasm-ld are not available");
    }
    ok
}

#[test]
fn wasm_rules_are_served_by_the_wasm_plugins_among_the_inputs() {
    let test = "wasm_rules_are_served_by_the_wasm_plugins_among_the_inputs";
    if !have_c_toolchain(test) {
        return;
    }
    // The C resource interpreter of `flotilla plugin new`, built with its own build.sh: replicas
    // from the label `example.com/replicas` when it holds a number, else `spec.replicas`.
    let dir = scenario("wasm", &[]);
    let new = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .current_dir(&dir)
        .args(["plugin", "new", "--lang", "c", "--point", "interpret", "i"])
        .output()
        .expect("plugin new");
    assert!(
        new.status.success(),
        "{}",
        String::from_utf8_lossy(&new.stderr)
    );
    let project = dir.join("i");
    let build = Command::new(project.join("build.sh"))
        .current_dir(&project)
        .output()
        .expect("build.sh");
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let shard = "apiVersion: example.com/v1\nkind: Shard\nmetadata:\n  name: db\n  namespace: default\n  labels: {example.com/replicas: \"4\"}\nspec: {replicas: 6}\n";
    std::fs::write(project.join("shard.yaml"), shard).expect("write");

    // interpreter/ holds the customization (`replicaResource: {wasm: {plugin: i}}`) and the
    // WasmPlugin `i` (`spec.module.path: ../i.wasm`, relative to its file), as `plan` reads them.
    let replica = |args: &[&str]| {
        let mut all = vec![
            "--operation",
            "InterpretReplica",
            "--observed-file",
            "shard.yaml",
            "-o",
            "json",
        ];
        all.extend_from_slice(args);
        run(&project, &all)
    };
    assert_eq!(
        json(&replica(&["-f", "interpreter/"])),
        serde_json::json!({"replica": 4, "requires": null})
    );
    // The same from separate files, and the config of the WasmPlugin object applies.
    let plugin =
        std::fs::read_to_string(project.join("interpreter/wasmplugin.yaml")).expect("read");
    std::fs::write(
        project.join("interpreter/wasmplugin.yaml"),
        plugin.replace(
            "# config: {label: example.com/replicas}",
            "config: {label: example.com/other}",
        ),
    )
    .expect("write");
    assert_eq!(
        json(&replica(&[
            "-f",
            "interpreter/customization.yaml",
            "-f",
            "interpreter/wasmplugin.yaml"
        ]))["replica"],
        6,
        "no example.com/other label: spec.replicas"
    );
    let o = run(&project, &["-f", "interpreter/", "--check"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("InterpretReplica:     PASS"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // Without the WasmPlugin the rule cannot run, and the plugin is named.
    let o = replica(&["-f", "interpreter/customization.yaml"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("WasmPlugin \"i\" not found"), "{err}");
    // A module that is not there is named with its file, as in `plan`.
    std::fs::remove_file(project.join("i.wasm")).expect("rm");
    let o = replica(&["-f", "interpreter/"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("WasmPlugin \"i\": spec.module.path: cannot read") && err.contains("i.wasm"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
