//! `spec.module.path` of `WasmPlugin` objects is confined to the module directory the controllers
//! were started with (`--module-dir`), none by default: an object can no longer make the control
//! plane read, copy, hash or quote any file of its host. Stored modules are private (0600 files in
//! a 0700 directory), and the temporary store goes away with the registry.

use std::path::Path;
use std::sync::Arc;

use flotilla_controller::controller::plugins::{Backends, Object, Registry, Report, ScratchDir};
use serde_json::{Value, json};

mod common;
use common::{b64, filter_module};

/// What a secret file on the control plane's host starts with.
const SECRET: &str = "root:$6$very-secret-hash:19000:0:99999:7:::";

fn backends(store: &Path, source: Option<&Path>) -> Backends {
    Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            Arc::new(flotilla_plugins::BuiltinFactory)
                as Arc<dyn flotilla_core::profile::PluginFactory>,
            Arc::new(flotilla_wasm::WasmFactory::new()),
        ]),
        module_dir: Some(store.to_path_buf()),
        module_source_dir: source.map(Path::to_path_buf),
        precompile: None,
    }
}

fn sync(registry: &Registry, module: Value, limits: Option<Value>) -> Report {
    let mut spec = json!({"module": module});
    if let Some(l) = limits {
        spec["limits"] = l;
    }
    let plugin = Object {
        name: "p".into(),
        generation: Some(1),
        spec,
    };
    let profile = Object {
        name: "prof".into(),
        generation: Some(1),
        spec: json!({"filters": [{"name": "p", "wasm": {"plugin": "p"}}]}),
    };
    registry.sync(&[plugin], &[profile])
}

/// The plugin's error, after checking that nothing of the secret file leaked into the report.
fn refused(report: &Report) -> String {
    let st = &report.plugins["p"];
    let all = format!("{report:?}");
    assert!(
        !all.contains("very-secret"),
        "the report quotes the file: {all}"
    );
    assert_eq!(st.attempted_digest, None, "{st:?}");
    assert_eq!(st.size, None, "{st:?}");
    st.error.clone().expect("refused")
}

fn stored_files(store: &Path) -> usize {
    std::fs::read_dir(store).map_or(0, |d| d.count())
}

#[test]
fn without_a_module_directory_object_paths_are_refused_and_nothing_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, format!("{SECRET}\n")).expect("secret");
    let store = dir.path().join("store");
    let registry = Registry::new(backends(&store, None));
    let e = refused(&sync(
        &registry,
        json!({"path": secret.display().to_string()}),
        None,
    ));
    assert!(
        e.contains("spec.module.path") && e.contains("--module-dir"),
        "{e}"
    );
    assert_eq!(stored_files(&store), 0);
}

#[test]
fn with_a_module_directory_only_relative_paths_inside_it_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, format!("{SECRET}\n")).expect("secret");
    let modules = dir.path().join("modules");
    std::fs::create_dir(&modules).expect("modules dir");
    std::fs::write(modules.join("pick.wat"), filter_module(1, 1)).expect("module");
    let store = dir.path().join("store");
    let registry = Registry::new(backends(&store, Some(&modules)));

    let mut escapes = vec![
        secret.display().to_string(),
        "../shadow".to_owned(),
        "./../shadow".to_owned(),
    ];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&secret, modules.join("link.wasm")).expect("symlink");
        std::os::unix::fs::symlink(dir.path(), modules.join("up")).expect("symlink");
        escapes.push("link.wasm".to_owned());
        escapes.push("up/shadow".to_owned());
    }
    for path in escapes {
        let e = refused(&sync(&registry, json!({"path": path}), None));
        assert!(e.starts_with("spec.module.path: "), "{path}: {e}");
    }
    assert_eq!(stored_files(&store), 0);

    let report = sync(
        &registry,
        json!({"path": "pick.wat", "format": "wat"}),
        None,
    );
    let st = &report.plugins["p"];
    assert_eq!(st.error, None, "{report:?}");
    assert!(st.attempted_digest.is_some(), "{st:?}");
    assert_eq!(report.profiles["prof"].error, None, "{report:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&store), 0o700);
        let files: Vec<_> = std::fs::read_dir(&store)
            .expect("store")
            .map(|e| e.expect("entry").path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(mode(&files[0]), 0o600);
    }
}

#[test]
fn a_file_that_is_not_a_module_is_reported_by_size_never_by_content() {
    let dir = tempfile::tempdir().expect("tempdir");
    let modules = dir.path().join("modules");
    std::fs::create_dir(&modules).expect("modules dir");
    std::fs::write(modules.join("shadow"), format!("{SECRET}\n")).expect("secret");
    let registry = Registry::new(backends(&dir.path().join("store"), Some(&modules)));
    let report = sync(&registry, json!({"path": "shadow"}), None);
    let all = format!("{report:?}");
    assert!(
        !all.contains("very-secret"),
        "the report quotes the file: {all}"
    );
    let e = report.profiles["prof"]
        .error
        .clone()
        .expect("the profile fails");
    assert!(
        e.contains(&format!(
            "spec.module.path: not a Wasm module ({} bytes without the \\0asm header)",
            SECRET.len() + 1
        )),
        "{e}"
    );
    // The same holds for an inline module.
    let report = sync(&registry, json!({"base64": b64(SECRET)}), None);
    let all = format!("{report:?}");
    assert!(
        !all.contains("very-secret"),
        "the report quotes the module: {all}"
    );
}

#[test]
fn out_of_range_limits_of_a_wasm_plugin_object_are_refused_with_the_field_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = Registry::new(backends(&dir.path().join("store"), None));
    let module = json!({"base64": b64(&filter_module(1, 1)), "format": "wat"});
    for (limits, want) in [
        (
            json!({"timeoutMs": u64::MAX}),
            "spec.limits.timeoutMs: must be at most 10000",
        ),
        (
            json!({"timeoutMs": 1u64 << 60}),
            "spec.limits.timeoutMs: must be at most 10000",
        ),
        (
            json!({"memoryMib": 1u64 << 50}),
            "spec.limits.memoryMib: must be at most 1024",
        ),
    ] {
        let report = sync(&registry, module.clone(), Some(limits));
        assert_eq!(
            report.plugins["p"].error.as_deref(),
            Some(want),
            "{report:?}"
        );
    }
    // In range, the same object loads.
    let report = sync(&registry, module, Some(json!({"timeoutMs": 10000})));
    assert_eq!(report.plugins["p"].error, None, "{report:?}");
    assert_eq!(report.profiles["prof"].error, None, "{report:?}");
}

#[test]
fn the_temporary_module_store_is_private_and_removed_when_dropped() {
    let scratch = ScratchDir::new().expect("scratch dir");
    let path = scratch.path().to_path_buf();
    assert!(path.is_dir());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
    std::fs::write(path.join("x.wasm"), b"x").expect("write");
    drop(scratch);
    assert!(!path.exists(), "{} was left behind", path.display());
}
