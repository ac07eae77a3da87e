//! Output into a closed pipe (`flotilla plugin inspect x | head -1` once `head` has quit) ends
//! the command quietly, as SIGPIPE ends other tools: exit status 141, no panic message, no
//! error line.

use std::path::Path;
use std::process::{Command, Stdio};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run `flotilla args` with standard output a pipe whose reading end is already closed.
fn into_closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run flotilla");
    (out.status.code(), text(&out.stderr))
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let module = tmp.path().join("m.wasm");
    std::fs::write(
        &module,
        wat::parse_str(
            r#"(module
  (import "flotilla:host/v1" "set_rows" (func $set_rows (param i32 i32)))
  (memory (export "memory") 2)
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_alloc") (param i32) (result i32) (i32.const 65536))
  (func (export "flotilla_dealloc") (param i32 i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_filter_v1") (param i32 i32 i32 i32) (result i32)
    (call $set_rows (i32.const 1024) (local.get 3))
    (i32.const 0)))"#,
        )
        .expect("wat"),
    )
    .expect("write module");
    let module = module.display().to_string();
    for args in [
        vec!["plugin", "inspect", module.as_str()],
        vec!["plan", "-R", "-f", "examples/nginx"],
        vec!["plan", "-R", "-f", "examples/nginx", "-o", "yaml"],
        vec!["profile", "default"],
    ] {
        let (code, stderr) = into_closed_pipe(&args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
        assert_eq!(code, Some(141), "{args:?}: {stderr}");
    }
    // The same commands into an open pipe still succeed.
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["plugin", "inspect", &module])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("sha256:"),
        "{}",
        text(&out.stdout)
    );
}
