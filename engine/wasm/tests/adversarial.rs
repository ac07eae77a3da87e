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

fn load(file: &str, point: ExtensionPoint) -> Arc<flotilla_wasm::WasmPlugin> {
    let path = testdata(file);
    Arc::new(
        WasmFactory::new()
            .load(point, &spec(file, &path, FailurePolicy::Fail, 50), &path)
            .expect("load"),
    )
}

#[test]
fn limits_above_their_maximum_are_refused_at_load_instead_of_overflowing_or_hanging() {
    // `timeoutMs: 18446744073709551615` panicked with an overflow; `2^60` over a loop hung.
    use flotilla_core::profile::PluginLimits;
    let path = testdata("infinite_loop.wat");
    let cases = [
        (
            PluginLimits {
                timeout_ms: Some(u64::MAX),
                ..Default::default()
            },
            "limits.timeoutMs: must be at most 10000",
        ),
        (
            PluginLimits {
                timeout_ms: Some(1 << 60),
                ..Default::default()
            },
            "limits.timeoutMs: must be at most 10000",
        ),
        (
            PluginLimits {
                memory_mib: Some(u64::MAX),
                ..Default::default()
            },
            "limits.memoryMib: must be at most 1024",
        ),
        (
            PluginLimits {
                max_output_bytes: Some(u64::MAX),
                ..Default::default()
            },
            "limits.maxOutputBytes: must be at most 16777216",
        ),
        (
            PluginLimits {
                timeout_ms: Some(0),
                ..Default::default()
            },
            "limits.timeoutMs: must be at least 1",
        ),
    ];
    for (limits, want) in cases {
        let mut s = spec("infinite_loop.wat", &path, FailurePolicy::Ignore, 50);
        s.limits = Some(limits);
        let start = Instant::now();
        let e = WasmFactory::new()
            .load(ExtensionPoint::Filter, &s, &path)
            .expect_err("out-of-range limits must not load");
        assert!(matches!(e, LoadError::Limits(_)), "{e:?}");
        assert_eq!(e.to_string(), want);
        // Offline (`flotilla plan --profile`): the profile fails naming the entry and the field.
        let doc: ProfileDocument = serde_json::from_value(serde_json::json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile", "metadata": {"name": "limits"},
            "spec": {"filters": [s]}
        }))
        .expect("doc");
        let factories = flotilla_core::profile::Factories::new([
            Arc::new(WasmFactory::new()) as Arc<dyn flotilla_core::profile::PluginFactory>
        ]);
        let msg = build_profile(&doc, &flotilla_plugins::default_profile(), &factories)
            .expect_err("profile must not build")
            .to_string();
        assert!(msg.contains(want), "{msg}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn limits_built_by_hand_cannot_overflow_the_deadline_arithmetic() {
    let host = flotilla_wasm::Host::global().expect("host");
    let bytes = std::fs::read(testdata("pass.wat")).expect("pass.wat");
    let limits = flotilla_wasm::Limits {
        timeout: Duration::MAX,
        ..Default::default()
    };
    let plugin = flotilla_wasm::WasmPlugin::load(
        host,
        "pass",
        host.compile(&bytes).expect("compiles"),
        None,
        limits,
    )
    .expect("loads");
    let cl = clusters(&["a", "b"]);
    let refs: Vec<_> = cl.iter().collect();
    let (spec, _) = binding();
    let placement = spec.placement.clone().unwrap_or_default();
    let ctx = BindingContext::new(&spec, &placement, None);
    let mut out = Vec::new();
    plugin
        .filter(&FilterInput::new(&ctx, &refs), &mut out)
        .expect("a pass filter passes");
    assert_eq!(out.len(), 2);
}

/// A 2-replica Divided Deployment.
fn divided_binding() -> flotilla_api::work::ResourceBindingSpec {
    serde_json::from_value(serde_json::json!({
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web", "uid": "u1"},
        "replicas": 2,
        "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}}
    }))
    .expect("binding fixture")
}

#[test]
fn an_assigner_placing_more_replicas_than_requested_is_a_fault_under_its_failure_policy() {
    let greedy = load("greedy_assign.wat", ExtensionPoint::Assign);
    let cl = clusters(&["a", "b"]);
    let spec = divided_binding();
    let status = Default::default();
    for policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let mut profile = flotilla_plugins::default_profile();
        profile.assigners.insert(
            0,
            flotilla_core::framework::Slot::new(
                greedy.clone() as Arc<dyn flotilla_core::framework::AssignPlugin>
            )
            .with_failure_policy(policy),
        );
        let r = schedule(
            &Snapshot::new(cl.to_vec(), Arc::default(), Options::default()),
            &profile,
            &spec,
            &status,
            None,
            None,
        );
        match policy {
            FailurePolicy::Fail => {
                let f = r.outcome.expect_err("the greedy reply is refused");
                assert_eq!(f.kind, FailureKind::SchedulerError);
                assert!(
                    f.message.contains("returned invalid output"),
                    "{}",
                    f.message
                );
                assert!(f.message.contains("each row takes 0..=2"), "{}", f.message);
            }
            FailurePolicy::Ignore => {
                let t = r
                    .outcome
                    .expect("the built-in assigners place the replicas");
                assert_eq!(t.iter().map(|t| t.replicas).sum::<i32>(), 2, "{t:?}");
                assert_eq!(r.ignored_faults.len(), 1, "{:?}", r.ignored_faults);
            }
        }
    }
}

/// `greedy_assign.wat` with a `flotilla.plugin` section declaring `strategies`, written to `dir`.
fn greedy_declaring(dir: &std::path::Path, strategies: &str) -> std::path::PathBuf {
    let wat = std::fs::read_to_string(testdata("greedy_assign.wat")).expect("greedy_assign.wat");
    let body = wat.trim_end().strip_suffix(')').expect("a module");
    let meta = format!(r#"{{"abi":1,"name":"greedy","strategies":{strategies}}}"#);
    let path = dir.join("greedy.wat");
    std::fs::write(
        &path,
        format!(
            "{body}  (@custom \"flotilla.plugin\" \"{}\")\n)\n",
            meta.replace('"', "\\\"")
        ),
    )
    .expect("write");
    path
}

#[test]
fn an_assigner_is_not_called_for_strategies_it_did_not_declare_and_unknown_names_do_not_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cl = clusters(&["a", "b"]);
    // `Divided` + `Weighted` without a dynamic weight: Karmada's static-weight division.
    let rb = divided_binding();
    let status = Default::default();
    let load = |strategies: &str| {
        let path = greedy_declaring(tmp.path(), strategies);
        WasmFactory::new().load(
            ExtensionPoint::Assign,
            &spec("greedy", &path, FailurePolicy::Fail, 50),
            &path,
        )
    };
    let run = |strategies: &str| {
        let greedy = load(strategies).expect("load");
        let mut profile = flotilla_plugins::default_profile();
        profile.assigners.insert(
            0,
            flotilla_core::framework::Slot::new(
                Arc::new(greedy) as Arc<dyn flotilla_core::framework::AssignPlugin>
            ),
        );
        let set = Snapshot::new(cl.to_vec(), Arc::default(), Options::default());
        schedule(&set, &profile, &rb, &status, None, None).outcome
    };
    // Declared for another strategy: never called, the built-in static weight places the binding.
    let placed = run(r#"["DynamicWeight","Aggregated"]"#).expect("the built-ins place it");
    assert_eq!(
        placed.iter().map(|t| t.replicas).sum::<i32>(),
        2,
        "{placed:?}"
    );
    // Declared for this strategy (or nothing declared): called, and its greedy reply refused.
    for strategies in [r#"["StaticWeight"]"#, "[]"] {
        let f = run(strategies).expect_err("the greedy reply is refused");
        assert!(
            f.message.contains("each row takes 0..=2"),
            "{strategies}: {}",
            f.message
        );
    }
    // A name the host does not know refuses the module, naming it.
    let err = load(r#"["Weighted"]"#).expect_err("must not load");
    assert!(
        matches!(&err, LoadError::Metadata { message } if message.contains("unknown strategy \"Weighted\"")),
        "{err}"
    );
}

#[test]
fn a_selection_out_of_range_or_repeated_is_a_fault_under_its_failure_policy() {
    let bad = load("bad_select.wat", ExtensionPoint::Select);
    let cl = clusters(&["a", "b"]);
    let (spec, status) = binding();
    for policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let mut profile = flotilla_plugins::default_profile();
        profile.selects.insert(
            0,
            flotilla_core::framework::Slot::new(
                bad.clone() as Arc<dyn flotilla_core::framework::SelectPlugin>
            )
            .with_failure_policy(policy),
        );
        let r = schedule(
            &Snapshot::new(cl.to_vec(), Arc::default(), Options::default()),
            &profile,
            &spec,
            &status,
            None,
            None,
        );
        match policy {
            FailurePolicy::Fail => {
                let f = r.outcome.expect_err("the selection is refused");
                assert_eq!(f.kind, FailureKind::SchedulerError);
                assert!(f.message.contains("selected row 0 twice"), "{}", f.message);
            }
            FailurePolicy::Ignore => {
                let t = r.outcome.expect("Ignore skips the select plugin");
                assert_eq!(
                    t.iter()
                        .map(|t| (t.name.as_str(), t.replicas))
                        .collect::<Vec<_>>(),
                    [("a", 3), ("b", 3)]
                );
                assert_eq!(r.ignored_faults.len(), 1, "{:?}", r.ignored_faults);
            }
        }
    }
}

#[test]
fn a_128_kib_error_message_is_cut_to_a_bounded_length() {
    check("long_error.wat", |e| {
        matches!(e, PluginError::Failed { message, .. }
            if message.len() <= flotilla_wasm::MAX_MESSAGE_BYTES && message.starts_with("AAAA") && message.ends_with('…'))
    });
}

#[test]
fn a_doubling_override_is_refused_before_the_manifest_grows() {
    let plugin = load("doubling_override.wat", ExtensionPoint::Override);
    let object = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "template": {"data": "x".repeat(4096)}}});
    let cl = clusters(&["a"]);
    let policies = flotilla_core::overrides::OverridePolicies::default();
    let start = Instant::now();
    let e = flotilla_core::framework::OverridePlugin::override_manifest(
        &*plugin,
        &flotilla_core::framework::OverrideInput::new(&object, &cl[0], &policies),
    )
    .expect_err("the doubling patch is refused");
    assert!(
        matches!(&e, PluginError::InvalidOutput { message, .. } if message.contains("would exceed") || message.contains("copies would add")),
        "{e:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn binding_members_a_module_declares_are_checked_at_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let load = |fields: &str| {
        // `strategies` left empty; the metadata's `bindingFields` follows it.
        let path = greedy_declaring(tmp.path(), &format!(r#"[],"bindingFields":{fields}"#));
        WasmFactory::new().load(
            ExtensionPoint::Assign,
            &spec("greedy", &path, FailurePolicy::Fail, 50),
            &path,
        )
    };
    for fields in [r#"["replicas","clusters"]"#, "[]"] {
        load(fields).unwrap_or_else(|e| panic!("{fields}: {e}"));
    }
    // `placement` is sent beside the spec, not a member a module can list; unknown names refuse.
    for (fields, name) in [
        (r#"["replicas","placement"]"#, "placement"),
        (r#"["Replicas"]"#, "Replicas"),
    ] {
        let err = load(fields).expect_err("must not load");
        assert!(
            matches!(&err, LoadError::Metadata { message }
                if message.contains(&format!("bindingFields: unknown binding member \"{name}\""))),
            "{err}"
        );
    }
}
