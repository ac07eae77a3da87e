//! Module directory files are compiled into the compiled-module cache as they appear, before a
//! `WasmPlugin` names them (`Backends::precompile`, as the CLI wires it): once a file has been
//! unchanged for a second it is compiled, once; loading it from a `WasmPlugin` then needs no
//! compile.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use flotilla_controller::controller::plugins::{Backends, Object, Precompile, Registry};
use serde_json::json;

/// pass.wat (a filter) with a global of its own: a module no other test compiled.
fn module() -> Vec<u8> {
    let wat = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../wasm/testdata/pass.wat"),
    )
    .expect("fixture");
    let end = wat.rfind(')').expect("module end");
    let n = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as i64;
    wat::parse_str(format!(
        "{}\n  (global i64 (i64.const {n}))\n)",
        &wat[..end]
    ))
    .expect("wat")
}

fn age(path: &Path, secs: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open")
        .set_modified(SystemTime::now() - Duration::from_secs(secs))
        .expect("mtime");
}

#[test]
fn a_module_file_is_compiled_ahead_once_settled_and_then_loads_without_a_compile() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let source = tmp.path().join("modules");
    let store = tmp.path().join("store");
    std::fs::create_dir_all(&source).expect("dir");
    let wasm = Arc::new(flotilla_wasm::WasmFactory::with_cache_dir(
        store.join("compiled"),
    ));
    let precompile: Precompile = {
        let wasm = Arc::clone(&wasm);
        Arc::new(move |bytes: &[u8]| wasm.precompile(bytes).map_err(|e| e.to_string()))
    };
    let registry = Registry::new(Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            wasm as Arc<dyn flotilla_core::profile::PluginFactory>,
        ]),
        module_dir: Some(store.clone()),
        module_source_dir: Some(source.clone()),
        precompile: Some(precompile),
    });
    assert!(registry.precompiles());

    let file = source.join("pass.wasm");
    std::fs::write(&file, module()).expect("write");
    std::fs::write(source.join("notes.txt"), "not a module").expect("write");
    std::fs::write(source.join("empty.wasm"), "").expect("write");
    // Still being written, as far as anyone can tell: not yet.
    assert_eq!(registry.precompile_next(), None);

    age(&file, 5);
    let host = flotilla_wasm::Host::global().expect("host");
    let before = host.tiering();
    assert_eq!(registry.precompile_next(), Some((file.clone(), true)));
    assert_eq!(host.tiering().precompiled, before.precompiled + 1);
    // Once per file version.
    assert_eq!(registry.precompile_next(), None);

    // A WasmPlugin naming it loads the compiled code: neither compiler runs.
    let before = host.tiering();
    let report = registry.sync(
        &[Object {
            name: "pass".into(),
            generation: Some(1),
            spec: json!({"module": {"path": "pass.wasm"}, "failurePolicy": "Fail"}),
        }],
        &[Object {
            name: "p".into(),
            generation: Some(1),
            spec: json!({"filters": [{"name": "pass", "wasm": {"plugin": "pass"}}]}),
        }],
    );
    assert_eq!(report.profiles["p"].error, None, "{report:?}");
    assert!(report.changed);
    let after = host.tiering();
    assert_eq!(after.baseline_compiles, before.baseline_compiles);
    assert_eq!(after.precompiled, before.precompiled);

    // A changed file is compiled again; a module loaded already is not compiled twice.
    std::fs::write(&file, module()).expect("write");
    age(&file, 3);
    assert_eq!(registry.precompile_next(), Some((file.clone(), true)));
    let loaded = std::fs::read(store.join(format!(
        "{}.wasm",
        report.plugins["pass"]
            .attempted_digest
            .as_deref()
            .and_then(|d| d.strip_prefix("sha256:"))
            .expect("digest")
    )))
    .expect("stored module");
    std::fs::write(&file, loaded).expect("write");
    age(&file, 2);
    assert_eq!(registry.precompile_next(), Some((file, false)));
}
