//! Adversarial modules (testdata/*.wat) through the real scheduler, under both failure policies:
//! `Fail` makes the binding's attempt fail with the fault (SchedulerError), `Ignore` skips the
//! plugin and records the fault. Load-time rejections (missing exports, unknown imports) fail the
//! profile whatever the policy. The host stays healthy throughout.

mod common;

use std::time::{Duration, Instant};

use common::*;
use flotilla_core::PluginError;
use flotilla_core::framework::{BindingContext, FailurePolicy, FilterInput, FilterPlugin};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::profile::{ExtensionPoint, ProfileDocument, build_profile};
use flotilla_core::scheduler::{FailureKind, schedule};
use flotilla_wasm::{LoadError, WasmFactory};
use std::sync::Arc;

fn direct_error(file: &str) -> PluginError {
    let plugin = filter(file, FailurePolicy::Fail);
    let cl = clusters(&["a", "b"]);
    let refs: Vec<_> = cl.iter().collect();
    let (spec, _) = binding();
    let placement = spec.placement.clone().unwrap_or_default();
    let ctx = BindingContext::new(&spec, &placement, None);
    let mut out = Vec::new();
    plugin
        .filter(&FilterInput::new(&ctx, &refs), &mut out)
        .expect_err("adversarial module must fault")
}

/// Schedules through the real scheduler with `file` as the only filter, under both policies.
fn check(file: &str, expect: fn(&PluginError) -> bool) {
    let err = direct_error(file);
    assert!(expect(&err), "{file}: unexpected error variant {err:?}");
    let cl = clusters(&["a", "b"]);
    let (spec, status) = binding();
    for policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let profile = profile_with_filter(filter(file, policy), policy);
        let start = Instant::now();
        let r = schedule(
            &Snapshot::new(cl.to_vec(), Arc::default(), Options::default()),
            &profile,
            &spec,
            &status,
            None,
            None,
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{file}: took {:?}",
            start.elapsed()
        );
        match policy {
            FailurePolicy::Fail => {
                let f = r.outcome.expect_err("Fail policy fails the binding");
                assert_eq!(f.kind, FailureKind::SchedulerError, "{file}");
                assert_eq!(f.message, err.to_string(), "{file}");
                assert!(r.ignored_faults.is_empty());
            }
            FailurePolicy::Ignore => {
                let t = r.outcome.expect("Ignore policy skips the plugin");
                assert_eq!(
                    t.iter()
                        .map(|t| (t.name.as_str(), t.replicas))
                        .collect::<Vec<_>>(),
                    [("a", 3), ("b", 3)],
                    "{file}"
                );
                assert_eq!(r.ignored_faults, [err.to_string()], "{file}");
            }
        }
    }
}

#[test]
fn infinite_loop_times_out() {
    check("infinite_loop.wat", |e| {
        matches!(e, PluginError::Timeout { .. })
    });
}

#[test]
fn memory_bomb_exhausts_resources() {
    check("memory_bomb.wat", |e| {
        matches!(e, PluginError::ResourceExhausted { .. })
    });
}

#[test]
fn trap_is_a_failure() {
    check(
        "trap.wat",
        |e| matches!(e, PluginError::Failed { message, .. } if message.contains("unreachable")),
    );
}

#[test]
fn bad_json_is_invalid_output() {
    check("bad_json.wat", |e| {
        matches!(e, PluginError::InvalidOutput { .. })
    });
}

#[test]
fn huge_output_exhausts_resources() {
    check("huge_output.wat", |e| {
        matches!(e, PluginError::ResourceExhausted { .. })
    });
}

#[test]
fn out_of_bounds_reply_is_invalid_output() {
    check("out_of_bounds.wat", |e| {
        matches!(e, PluginError::InvalidOutput { .. })
    });
}

fn load_error(file: &str) -> LoadError {
    let path = testdata(file);
    WasmFactory::new()
        .load(
            ExtensionPoint::Filter,
            &spec(file, &path, FailurePolicy::Fail, 50),
            &path,
        )
        .expect_err("must not load")
}

fn profile_error(file: &str, policy: FailurePolicy) -> String {
    let doc: ProfileDocument = serde_json::from_value(serde_json::json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "adversarial"},
        "spec": {"filters": [spec(file, &testdata(file), policy, 50)]}
    }))
    .expect("doc");
    let factories = flotilla_core::profile::Factories::new([
        std::sync::Arc::new(flotilla_plugins::BuiltinFactory)
            as std::sync::Arc<dyn flotilla_core::profile::PluginFactory>,
        std::sync::Arc::new(WasmFactory::new()),
    ]);
    build_profile(&doc, &flotilla_plugins::default_profile(), &factories)
        .expect_err("profile must not build")
        .to_string()
}

#[test]
fn missing_exports_are_rejected_at_load() {
    assert!(
        matches!(load_error("missing_exports.wat"), LoadError::MissingExport { ref name, .. } if name == "flotilla_alloc")
    );
    for policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let msg = profile_error("missing_exports.wat", policy);
        assert!(msg.contains("does not export flotilla_alloc"), "{msg}");
    }
}

#[test]
fn unknown_import_is_rejected_at_load_with_its_name() {
    assert!(
        matches!(load_error("unknown_import.wat"), LoadError::UnknownImport { ref module, ref name } if module == "env" && name == "abort")
    );
    for policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let msg = profile_error("unknown_import.wat", policy);
        assert!(
            msg.contains("imports env.abort, which the host does not provide"),
            "{msg}"
        );
    }
}

#[test]
fn plugin_recovers_after_a_fault() {
    // A plugin whose instance faulted gets a fresh one: the pass filter keeps working around
    // faults of others, and the host has not been disturbed.
    let pass = filter("pass.wat", FailurePolicy::Fail);
    let _ = direct_error("trap.wat");
    let _ = direct_error("infinite_loop.wat");
    let cl = clusters(&["a", "b", "c"]);
    let (spec, status) = binding();
    let profile = profile_with_filter(pass, FailurePolicy::Fail);
    for _ in 0..3 {
        let r = schedule(
            &Snapshot::new(cl.to_vec(), Arc::default(), Options::default()),
            &profile,
            &spec,
            &status,
            None,
            None,
        );
        assert_eq!(r.outcome.expect("pass filter").len(), 3);
    }
}
