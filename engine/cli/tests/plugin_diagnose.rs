//! `flotilla plugin inspect` and `plugin test` name the usual build mistakes and their fixes, on
//! real broken modules: Go built without `-buildmode=c-shared` and AssemblyScript built without
//! `--use abort=` (each built here when its toolchain is present; CI has both), and hand-written
//! modules of the same shapes, with missing exports, a wrong ABI version, or no module at all.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ci() -> bool {
    std::env::var("CI")
        .map(|v| !v.is_empty() && v != "false" && v != "0")
        .unwrap_or(false)
}

fn flotilla(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run flotilla")
}

/// Both `inspect` and `test` refuse `module` (exit 1) and say `want` (stdout and stderr).
fn refused(dir: &Path, module: &str, want: &[&str]) -> String {
    let mut all = String::new();
    for args in [
        vec!["plugin", "inspect", module],
        vec!["plugin", "test", module, "-f", "scenario/"],
    ] {
        let out = flotilla(dir, &args);
        let both = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "{args:?} accepted it:\n{both}");
        assert!(!both.contains("panicked"), "{both}");
        for w in want {
            assert!(both.contains(w), "{args:?}: no {w:?} in:\n{both}");
        }
        all.push_str(&both);
    }
    all
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "flotilla-plugin-diagnose-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        Scratch(dir)
    }

    /// A generated project (its scenario is the `plugin test` fixture).
    fn project(&self, lang: &str, name: &str) -> PathBuf {
        let out = flotilla(
            &self.0,
            &["plugin", "new", "--lang", lang, "--point", "score", name],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A module exporting everything ABI v1 needs, as WAT; `extra` goes inside the module.
fn wat(abi: i32, extra: &str) -> String {
    format!(
        r#"(module {extra}
  (memory (export "memory") 1)
  (func (export "flotilla_abi_version") (result i32) i32.const {abi})
  (func (export "flotilla_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "flotilla_dealloc") (param i32 i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) i32.const 0)
  (func (export "flotilla_score_v1") (param i32 i32 i32 i32) (result i32) i32.const 0))"#
    )
}

#[test]
fn hand_written_modules_with_the_usual_mistakes_are_explained() {
    let s = Scratch::new("wat");
    let dir = s.project("c", "p");
    let write = |name: &str, body: &str| std::fs::write(dir.join(name), body).expect("write");

    // Go's shape without c-shared: a WASI command whose exports trap until _start has run.
    write(
        "go-command.wat",
        &wat(1, r#"(import "wasi_snapshot_preview1" "proc_exit" (func (param i32))) (func (export "_start"))"#)
            .replace("i32.const 1)", "unreachable)"),
    );
    refused(
        &dir,
        "go-command.wat",
        &["exports _start, not _initialize", "-buildmode=c-shared"],
    );

    // AssemblyScript's shape without the abort shim.
    write(
        "as-abort.wat",
        &wat(
            1,
            r#"(import "env" "abort" (func (param i32 i32 i32 i32)))"#,
        ),
    );
    refused(&dir, "as-abort.wat", &["imports env.abort", "--use abort="]);

    // Another import the host does not provide: named, bounded, with the rule.
    write(
        "libc.wat",
        &wat(
            1,
            r#"(import "env" "malloc" (func (param i32) (result i32)))"#,
        ),
    );
    refused(
        &dir,
        "libc.wat",
        &["imports env.malloc, which the host does not provide"],
    );

    // Missing exports: every one named.
    write(
        "no-exports.wat",
        r#"(module (memory (export "memory") 1) (func (export "flotilla_score_v1") (param i32 i32 i32 i32) (result i32) i32.const 0))"#,
    );
    refused(
        &dir,
        "no-exports.wat",
        &[
            "does not export flotilla_abi_version, flotilla_alloc, flotilla_dealloc, flotilla_clusters_v1",
            "export_plugin!",
        ],
    );
    write(
        "no-point.wat",
        &wat(1, "").replace("flotilla_score_v1", "score"),
    );
    refused(
        &dir,
        "no-point.wat",
        &["exports no extension point", "call its Handle"],
    );

    // Wrong ABI version: answered by flotilla_abi_version, or declared in the metadata section.
    write("abi2.wat", &wat(2, ""));
    refused(
        &dir,
        "abi2.wat",
        &[
            "flotilla_abi_version returned 2",
            "rebuild with the current SDK",
        ],
    );
    write(
        "meta2.wat",
        &wat(
            1,
            r#"(@custom "flotilla.plugin" "{\"abi\":2,\"name\":\"x\",\"version\":\"1\",\"capabilities\":[]}")"#,
        ),
    );
    refused(
        &dir,
        "meta2.wat",
        &["plugin ABI v2", "rebuild with the current SDK"],
    );

    // Not a module at all: said so, without quoting the bytes.
    write("notes.wasm", "PK\u{3}\u{4} my secret notes");
    let out = refused(&dir, "notes.wasm", &["not a Wasm module (20 bytes)"]);
    assert!(!out.contains("secret"), "{out}");

    // The complete module passes inspect.
    write("ok.wat", &wat(1, ""));
    let out = flotilla(&dir, &["plugin", "inspect", "ok.wat"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stdout).contains("problem:"));
}

#[test]
fn go_built_without_c_shared_is_explained() {
    let have = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(!ci(), "go is missing (CI must provide it)");
        eprintln!("SKIPPED: go is not installed");
        return;
    }
    let s = Scratch::new("go");
    let dir = s.project("go", "g");
    // The mistake: the build without -buildmode=c-shared.
    let out = Command::new("go")
        .current_dir(&dir)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .env("GOTOOLCHAIN", "local")
        .args(["build", "-trimpath", "-buildvcs=false", "-o", "g.wasm", "."])
        .output()
        .expect("go build");
    assert!(out.status.success(), "{}", text(&out.stderr));
    refused(
        &dir,
        "g.wasm",
        &[
            "exports _start, not _initialize",
            "runtime.notInitialized",
            "go build -buildmode=c-shared",
        ],
    );
    // The profile says so too when plan loads it.
    let out = flotilla(
        &dir,
        &["plan", "-f", "scenario/", "--profile", "profile.yaml"],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "plan accepted it");
    assert!(err.contains("-buildmode=c-shared"), "{err}");
}

#[test]
fn assemblyscript_built_without_the_abort_shim_is_explained() {
    let have = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(!ci(), "npm is missing (CI must provide it)");
        eprintln!("SKIPPED: npm is not installed");
        return;
    }
    let s = Scratch::new("as");
    let dir = s.project("assemblyscript", "a");
    let out = Command::new("npm")
        .current_dir(&dir)
        .env("npm_config_prefer_offline", "true")
        .args(["install", "--no-audit", "--no-fund"])
        .output()
        .expect("npm install");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The mistake: asc without --use abort=.
    let out = Command::new("node")
        .current_dir(&dir)
        .args([
            "node_modules/assemblyscript/bin/asc.js",
            "assembly/index.ts",
            "-O3",
            "-o",
            "a.wasm",
        ])
        .output()
        .expect("asc");
    assert!(out.status.success(), "{}", text(&out.stderr));
    refused(&dir, "a.wasm", &["imports env.abort", "--use abort="]);
}

#[test]
fn offline_wasm_plugins_for_interpreters_are_checked() {
    let s = Scratch::new("offline");
    let out = flotilla(
        &s.0,
        &["plugin", "new", "--lang", "c", "--point", "interpret", "i"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dir = s.0.join("i");
    let plan = |what: &str| {
        let out = flotilla(&dir, &["plan", "-f", "scenario/", "-f", "interpreter/"]);
        assert!(!out.status.success(), "{what}: accepted");
        text(&out.stderr)
    };
    // Not built yet: the module file is named.
    let e = plan("missing");
    assert!(
        e.contains("WasmPlugin \"i\": spec.module.path: cannot read") && e.contains("i.wasm"),
        "{e}"
    );
    let plugin = dir.join("interpreter/wasmplugin.yaml");
    let yaml = std::fs::read_to_string(&plugin).expect("wasmplugin");
    std::fs::write(
        &plugin,
        yaml.replace("{path: ../i.wasm}", "{base64: '!!not base64!!'}"),
    )
    .expect("write");
    let e = plan("base64");
    assert!(e.contains("spec.module.base64 is not base64"), "{e}");
    // A scheduling plugin is not an interpreter.
    std::fs::write(dir.join("score.wat"), wat(1, "")).expect("write");
    std::fs::write(&plugin, yaml.replace("../i.wasm", "../score.wat")).expect("write");
    let e = plan("not an interpreter");
    assert!(
        e.contains("does not export flotilla_interpret_v1 (not a resource interpreter)"),
        "{e}"
    );
}
