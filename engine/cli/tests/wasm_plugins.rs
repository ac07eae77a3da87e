//! Wasm plugins through the `flotilla` binary: the built-ins' Wasm builds (plugins/wasm) plan the
//! seed example exactly as the native profile does; adversarial modules fail or are skipped as
//! their failure policy says; a module with an unknown import is refused with the import named;
//! `flotilla plugin inspect|test|new`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../wasm/tests/common/guests.rs"]
mod guests;

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

fn testdata(f: &str) -> String {
    root()
        .join("engine/wasm/testdata")
        .join(f)
        .display()
        .to_string()
}

fn profile(name: &str, body: &str) -> PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flotilla-wasm-cli-{name}"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("profile.yaml");
    std::fs::write(&path, format!("apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {{name: default-scheduler}}\nspec:\n{body}")).expect("write");
    path
}

#[test]
fn wasm_builtins_plan_the_seed_example_like_the_native_ones() {
    let Some(dir) = guests::built() else { return };
    let p = profile(
        "parity",
        &format!(
            "  filters:\n  - {{name: APIEnablement}}\n  - {{name: TaintToleration}}\n  - {{name: ClusterAffinity, wasm: {{path: {}}}}}\n  - {{name: SpreadConstraint}}\n  - {{name: ClusterEviction}}\n  assigners:\n  - {{name: Duplicated}}\n  - {{name: StaticWeight, wasm: {{path: {}}}}}\n  - {{name: DynamicWeight}}\n  - {{name: Aggregated}}\n",
            dir.join("flotilla_wasm_cluster_affinity.wasm").display(),
            dir.join("flotilla_wasm_static_weight.wasm").display()
        ),
    );
    let args = [
        "plan",
        "-R",
        "-f",
        "examples/nginx",
        "-o",
        "yaml",
        "--now",
        "2025-01-01T00:00:00Z",
    ];
    let native = run(&args);
    assert!(native.status.success(), "{}", text(&native.stderr));
    let mut with = args.to_vec();
    with.extend(["--profile", p.to_str().expect("utf-8 path")]);
    let wasm = run(&with);
    assert!(wasm.status.success(), "{}", text(&wasm.stderr));
    assert_eq!(text(&native.stdout), text(&wasm.stdout));
    assert!(
        text(&wasm.stdout).contains("replicas: 1"),
        "{}",
        text(&wasm.stdout)
    );
}

#[test]
fn faulting_plugin_fails_or_is_skipped_per_failure_policy() {
    for (policy, ok) in [("Fail", false), ("Ignore", true)] {
        let p = profile(
            &format!("trap-{policy}"),
            &format!(
                "  filters:\n  - {{name: trapper, failurePolicy: {policy}, wasm: {{path: {}}}}}\n",
                testdata("trap.wat")
            ),
        );
        let out = run(&[
            "plan",
            "-R",
            "-f",
            "examples/nginx",
            "--profile",
            p.to_str().expect("path"),
            "-o",
            "yaml",
            "--now",
            "2025-01-01T00:00:00Z",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let y = text(&out.stdout);
        assert_eq!(
            y.contains("plugin trapper failed: wasm"),
            !ok,
            "{policy}: {y}"
        );
        assert_eq!(y.contains("reason: SchedulerError"), !ok, "{policy}: {y}");
    }
}

#[test]
fn unknown_import_is_refused_naming_the_import() {
    let p = profile(
        "unknown-import",
        &format!(
            "  filters:\n  - {{name: bad, failurePolicy: Ignore, wasm: {{path: {}}}}}\n",
            testdata("unknown_import.wat")
        ),
    );
    let out = run(&[
        "plan",
        "-R",
        "-f",
        "examples/nginx",
        "--profile",
        p.to_str().expect("path"),
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("imports env.abort, which the host does not provide"),
        "{err}"
    );
    assert!(err.contains("spec.filters[0] (bad)"), "{err}");
}

#[test]
fn plugin_inspect_test_and_new() {
    let out = run(&["plugin", "inspect", &testdata("pass.wat")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("points:    filter")
            && s.contains("sha256:")
            && s.contains("flotilla:host/v1.set_rows"),
        "{s}"
    );

    let out = run(&[
        "plugin",
        "test",
        &testdata("pass.wat"),
        "-R",
        "-f",
        "examples/nginx",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(
        s.contains("loaded filter plugin pass") && s.contains("scheduled [member1:1, member2:1]"),
        "{s}"
    );

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-plugin-new");
    let _ = std::fs::remove_dir_all(&dir);
    for lang in ["rust", "go", "c", "assemblyscript"] {
        let out = run(&[
            "plugin",
            "new",
            &format!("p-{lang}"),
            "--lang",
            lang,
            "--dir",
            dir.to_str().expect("path"),
        ]);
        assert!(out.status.success(), "{lang}: {}", text(&out.stderr));
    }
    assert!(dir.join("p-rust/src/lib.rs").exists() && dir.join("p-go/main.go").exists());
    assert!(
        dir.join("p-c/plugin.c").exists()
            && dir.join("p-assemblyscript/assembly/index.ts").exists()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
