//! The `wasm` resource-interpreter backend against small WAT guests: request encoding, reply
//! validation, faults, and plugin resolution.

use std::sync::Arc;
use std::time::Duration;

use flotilla_api::interpreter::{CustomizationRule, CustomizationTarget, WasmRule};
use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::PluginError;
use flotilla_core::interpreter::{Operation, ResourceInterpreter, RuleBackend};
use flotilla_wasm::{Host, Limits, PluginMap, WasmPlugin, WasmRuleBackend};
use serde_json::{Value, json};

/// The exports every guest needs, a bump allocator, and `body` as `flotilla_interpret_v1`.
fn guest(body: &str, data: &str) -> String {
    format!(
        r#"(module
  (import "flotilla:host/v1" "set_result" (func $set_result (param i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func $alloc (export "flotilla_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (local.set $have (i32.mul (memory.size) (i32.const 65536)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then (if (i32.lt_s (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (local.get $have)) (i32.const 16)) (i32.const 1))) (i32.const 0))
        (then (unreachable)))))
    (global.set $heap (i32.and (i32.add (local.get $end) (i32.const 7)) (i32.const -8)))
    (local.get $p))
  (func (export "flotilla_dealloc") (param i32 i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_interpret_v1") (param $p i32) (param $n i32) (param i32 i32) (result i32)
    {body})
  (data (i32.const 1024) "{data}")
)"#
    )
}

/// Every byte of `s` as a WAT string escape.
fn escaped(s: &str) -> String {
    s.bytes().map(|b| format!("\\{b:02x}")).collect()
}

/// A guest that replies `reply` (with `status`) whatever it is asked.
fn fixed(reply: &str, status: i32) -> String {
    guest(
        &format!(
            "(call $set_result (i32.const 1024) (i32.const {})) (i32.const {status})",
            reply.len()
        ),
        &escaped(reply),
    )
}

/// A guest that replies `{"status": <the request>}`.
fn echo() -> String {
    guest(
        r#"(local $out i32)
    (local.set $out (call $alloc (i32.add (local.get $n) (i32.const 11))))
    (memory.copy (local.get $out) (i32.const 1024) (i32.const 10))
    (memory.copy (i32.add (local.get $out) (i32.const 10)) (local.get $p) (local.get $n))
    (i32.store8 (i32.add (i32.add (local.get $out) (i32.const 10)) (local.get $n)) (i32.const 125))
    (call $set_result (local.get $out) (i32.add (local.get $n) (i32.const 11)))
    (i32.const 0)"#,
        &escaped(r#"{"status":"#),
    )
}

fn load(name: &str, wat: &str) -> Arc<WasmPlugin> {
    let host = Host::global().expect("host");
    let module = host.compile(wat.as_bytes()).expect("compile");
    let limits = Limits {
        timeout: Duration::from_millis(50),
        memory_bytes: 16 << 20,
        max_output_bytes: 1 << 20,
    };
    Arc::new(WasmPlugin::load(host, name, module, None, limits).expect("load"))
}

fn target() -> CustomizationTarget {
    CustomizationTarget {
        api_version: "example.com/v1".into(),
        kind: "Shard".into(),
    }
}

fn rule(plugin: &str) -> CustomizationRule {
    CustomizationRule {
        wasm: Some(WasmRule {
            plugin: plugin.into(),
        }),
        ..Default::default()
    }
}

/// Compile `op` against a map holding `wat` as WasmPlugin `p`.
fn interpreter(op: Operation, wat: &str) -> Arc<dyn ResourceInterpreter> {
    let map = Arc::new(PluginMap::new());
    map.insert("p", Ok(load("p", wat)));
    WasmRuleBackend::new(map)
        .compile("shards", &target(), op, &rule("p"))
        .expect("compile")
}

fn shard() -> Value {
    json!({
        "apiVersion": "example.com/v1", "kind": "Shard",
        "metadata": {"name": "s1", "namespace": "db"},
        "spec": {"replicas": 4},
        "status": {"readyReplicas": 3}
    })
}

#[test]
fn requests_carry_the_operation_and_only_its_inputs() {
    let i = interpreter(Operation::InterpretStatus, &echo());
    assert!(i.hook_enabled("example.com/v1", "Shard", Operation::InterpretStatus));
    assert!(!i.hook_enabled("example.com/v1", "Shard", Operation::InterpretHealth));
    let got = i.reflect_status(&shard()).unwrap().unwrap();
    assert_eq!(
        got,
        json!({"operation": "InterpretStatus", "observedObject": shard()})
    );
    let i = interpreter(Operation::AggregateStatus, &echo());
    let items = [AggregatedStatusItem {
        cluster_name: "m1".into(),
        status: Some(json!({"readyReplicas": 2})),
        applied: true,
        health: "Healthy".into(),
        ..Default::default()
    }];
    let out = i.aggregate_status(&shard(), &items).unwrap();
    assert_eq!(
        out["status"],
        json!({"operation": "AggregateStatus", "object": shard(),
               "statusItems": [{"clusterName": "m1", "status": {"readyReplicas": 2}, "applied": true, "health": "Healthy"}]})
    );
    assert_eq!(out["spec"], shard()["spec"]);
}

#[test]
fn every_operation_decodes_its_reply() {
    let r = interpreter(
        Operation::InterpretReplica,
        &fixed(
            r#"{"replicas":4,"replicaRequirements":{"resourceRequest":{"cpu":"500m"}}}"#,
            0,
        ),
    )
    .get_replicas(&shard())
    .unwrap();
    assert_eq!(r.replicas, 4);
    assert!(r.requirements.unwrap().resource_request.contains_key("cpu"));
    let c = interpreter(
        Operation::InterpretComponent,
        &fixed(
            r#"{"components":[{"name":"a","replicas":1},{"name":"b","replicas":2}]}"#,
            0,
        ),
    )
    .get_components(&shard())
    .unwrap();
    assert_eq!(c.iter().map(|c| c.replicas).sum::<i32>(), 3);
    let revised = interpreter(
        Operation::ReviseReplica,
        &fixed(r#"{"patch":{"spec":{"replicas":9}}}"#, 0),
    )
    .revise_replica(&shard(), 9)
    .unwrap();
    assert_eq!(revised["spec"]["replicas"], 9);
    assert_eq!(revised["status"], shard()["status"]);
    let retained = interpreter(
        Operation::Retain,
        &fixed(r#"{"patch":{"spec":{"paused":true}}}"#, 0),
    )
    .retain(&shard(), &shard())
    .unwrap();
    assert_eq!(retained["spec"], json!({"replicas": 4, "paused": true}));
    let none = interpreter(Operation::InterpretStatus, &fixed(r#"{"status":null}"#, 0));
    assert_eq!(none.reflect_status(&shard()).unwrap(), None);
    let none = interpreter(Operation::InterpretStatus, &fixed("{}", 0));
    assert_eq!(none.reflect_status(&shard()).unwrap(), None);
    let h = interpreter(Operation::InterpretHealth, &fixed(r#"{"healthy":true}"#, 0));
    assert!(h.interpret_health(&shard()).unwrap());
    let d = interpreter(
        Operation::InterpretDependency,
        &fixed(
            r#"{"dependencies":[{"apiVersion":"v1","kind":"ConfigMap","namespace":"db","name":"cfg"}]}"#,
            0,
        ),
    )
    .get_dependencies(&shard())
    .unwrap();
    assert_eq!(
        (d[0].kind.as_str(), d[0].name.as_str()),
        ("ConfigMap", "cfg")
    );
}

#[test]
fn replies_the_request_cannot_have_are_invalid_output() {
    for (op, reply, want) in [
        (
            Operation::InterpretReplica,
            r#"{"replicas":-1}"#,
            "replicas: -1 is outside 0..=2147483647",
        ),
        (
            Operation::InterpretReplica,
            r#"{"replicas":2147483648}"#,
            "is outside 0..=2147483647",
        ),
        (
            Operation::InterpretReplica,
            r#"{"replicas":1.5}"#,
            "interpret reply: invalid type",
        ),
        (
            Operation::InterpretReplica,
            r#"{"healthy":true}"#,
            "healthy is not a reply to InterpretReplica",
        ),
        (
            Operation::InterpretReplica,
            r#"{}"#,
            "InterpretReplica requires replicas",
        ),
        (
            Operation::InterpretReplica,
            r#"{"replicas":1,"extra":1}"#,
            "unknown field `extra`",
        ),
        (
            Operation::InterpretReplica,
            r#"{"replicas":1,"replicaRequirements":{"cpu":"1"}}"#,
            "replicaRequirements: unknown field `cpu`",
        ),
        (
            Operation::InterpretComponent,
            r#"{"components":[{"name":"a","replicas":1},{"name":"a","replicas":1}]}"#,
            "components[1].name: \"a\" appears twice",
        ),
        (
            Operation::InterpretComponent,
            r#"{"components":[{"name":"","replicas":1}]}"#,
            "components[0].name: must not be empty",
        ),
        (
            Operation::ReviseReplica,
            r#"{"patch":{"metadata":{"namespace":"other"}}}"#,
            "patch: changes metadata.namespace",
        ),
        (
            Operation::ReviseReplica,
            r#"{"patch":[]}"#,
            "patch: [] is not an object",
        ),
        (
            Operation::Retain,
            r#"{"patch":{"kind":null}}"#,
            "patch: changes kind",
        ),
        (
            Operation::AggregateStatus,
            r#"{"status":3}"#,
            "status: 3 is not an object",
        ),
        (
            Operation::InterpretStatus,
            r#"{"status":"up"}"#,
            "status: \"up\" is not an object or null",
        ),
        (
            Operation::InterpretHealth,
            r#"{"healthy":"yes"}"#,
            "interpret reply: invalid type",
        ),
        (
            Operation::InterpretDependency,
            r#"{"dependencies":[{"apiVersion":"v1","kind":"Secret"}]}"#,
            "name or labelSelector is required",
        ),
        (
            Operation::InterpretDependency,
            r#"{"dependencies":[{"apiVersion":"v1","kind":"Secret","name":"s","uid":"x"}]}"#,
            "unknown field \"uid\"",
        ),
        (
            Operation::InterpretHealth,
            "not json",
            "interpret reply: expected",
        ),
    ] {
        let i = interpreter(op, &fixed(reply, 0));
        let e = match op {
            Operation::InterpretReplica => i.get_replicas(&shard()).map(|_| ()),
            Operation::InterpretComponent => i.get_components(&shard()).map(|_| ()),
            Operation::ReviseReplica => i.revise_replica(&shard(), 1).map(|_| ()),
            Operation::Retain => i.retain(&shard(), &shard()).map(|_| ()),
            Operation::AggregateStatus => i.aggregate_status(&shard(), &[]).map(|_| ()),
            Operation::InterpretStatus => i.reflect_status(&shard()).map(|_| ()),
            Operation::InterpretHealth => i.interpret_health(&shard()).map(|_| ()),
            Operation::InterpretDependency => i.get_dependencies(&shard()).map(|_| ()),
        }
        .unwrap_err();
        assert!(
            matches!(e, PluginError::InvalidOutput { .. }),
            "{reply}: {e}"
        );
        assert!(e.to_string().contains(want), "{reply}: {e}");
    }
}

#[test]
fn guest_errors_and_runaway_guests_are_faults() {
    let i = interpreter(Operation::InterpretHealth, &fixed("no status for you", 1));
    let e = i.interpret_health(&shard()).unwrap_err();
    assert_eq!(e.to_string(), "plugin p failed: no status for you");
    let i = interpreter(
        Operation::InterpretHealth,
        &guest("(loop $l (br $l)) (i32.const 0)", ""),
    );
    let e = i.interpret_health(&shard()).unwrap_err();
    assert!(matches!(e, PluginError::Timeout { .. }), "{e}");
    let i = interpreter(
        Operation::InterpretHealth,
        &guest(
            "(drop (call $alloc (i32.const 100000000))) (i32.const 0)",
            "",
        ),
    );
    let e = i.interpret_health(&shard()).unwrap_err();
    assert!(matches!(e, PluginError::ResourceExhausted { .. }), "{e}");
    // A fault drops the instance; the next call gets a fresh one and still answers.
    let i = interpreter(
        Operation::InterpretHealth,
        &fixed(r#"{"healthy":false}"#, 0),
    );
    assert!(!i.interpret_health(&shard()).unwrap());
}

#[test]
fn rules_name_a_loadable_plugin_that_exports_the_interpreter() {
    let map = Arc::new(PluginMap::new());
    let backend = WasmRuleBackend::new(map.clone());
    let compile = |name: &str| {
        backend
            .compile("shards", &target(), Operation::InterpretHealth, &rule(name))
            .err()
            .unwrap_or_default()
    };
    assert_eq!(compile("p"), "wasm.plugin: WasmPlugin \"p\" not found");
    map.insert("broken", Err("spec.module: the module is empty".into()));
    assert_eq!(
        compile("broken"),
        "wasm.plugin: WasmPlugin \"broken\" is not loadable: spec.module: the module is empty"
    );
    let filter_only = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/pass.wat"),
    )
    .unwrap();
    map.insert("filter", Ok(load("filter", &filter_only)));
    assert_eq!(
        compile("filter"),
        "wasm.plugin: WasmPlugin \"filter\" does not export flotilla_interpret_v1"
    );
    assert_eq!(
        compile(""),
        "wasm.plugin: the name of a WasmPlugin is required"
    );
    // Resolution happens per call: a replaced plugin serves the next call.
    map.insert("p", Ok(load("p", &fixed(r#"{"healthy":true}"#, 0))));
    let i = backend
        .compile("shards", &target(), Operation::InterpretHealth, &rule("p"))
        .unwrap();
    assert!(i.interpret_health(&shard()).unwrap());
    map.insert("p", Ok(load("p", &fixed(r#"{"healthy":false}"#, 0))));
    assert!(!i.interpret_health(&shard()).unwrap());
    map.replace(Default::default());
    let e = i.interpret_health(&shard()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "plugin shards failed: WasmPlugin \"p\" not found"
    );
}

#[test]
fn interpreter_only_modules_load() {
    let host = Host::global().unwrap();
    let m = host.compile(fixed("{}", 0).as_bytes()).unwrap();
    assert!(m.has_interpret);
    assert!(m.points.iter().all(|p| !p));
}
