//! Shared by the controller tests: polling, a tiny versioned Wasm filter in WAT, encodings, and
//! the objects and lookups several tests build.

#![allow(dead_code)]

use base64::Engine as _;
use sha2::Digest as _;

/// A filter module that rejects one row of the cluster set (clusters are pushed sorted by name:
/// row 0 = member1, row 1 = member2) with a reason naming its version.
pub fn filter_module(version: u32, rejected_row: u32) -> String {
    let reasons = format!(r#"{{"reasons":["rejected by pick v{version}"]}}"#);
    format!(
        r#"(module
  (import "flotilla:host/v1" "set_result" (func $set_result (param i32 i32)))
  (import "flotilla:host/v1" "set_rows" (func $set_rows (param i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 0) "{reasons_esc}")
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.shr_u (global.get $heap) (i32.const 16)) (i32.const 1))))))
    (local.get $p))
  (func (export "flotilla_dealloc") (param $p i32) (param $n i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_filter_v1") (param i32 i32) (param $rows i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (i32.store8 (i32.add (i32.const 1024) (local.get $i))
        (i32.eq (i32.load (i32.add (local.get $rows) (i32.shl (local.get $i) (i32.const 2)))) (i32.const {rejected_row})))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $set_rows (i32.const 1024) (local.get $n))
    (call $set_result (i32.const 0) (i32.const {reasons_len}))
    (i32.const 0)))
"#,
        reasons_esc = reasons.replace('"', "\\\""),
        reasons_len = reasons.len(),
    )
}

pub fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

pub fn sha(s: &str) -> String {
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Poll `f` until it returns `Some`, or panic naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: std::time::Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A WasmPlugin `name` serving the WAT `module` inline, digest-pinned, `failurePolicy: Fail`.
pub fn wasm_plugin(name: &str, module: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": name},
        "spec": {"module": {"base64": b64(module), "format": "wat"}, "sha256": sha(module), "failurePolicy": "Fail"},
    })
}

/// The condition of `type_` in an object's status (null when absent).
pub fn condition(o: &serde_json::Value, type_: &str) -> serde_json::Value {
    o.pointer("/status/conditions")
        .and_then(serde_json::Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

/// The ResourceBindings of namespace `default`.
pub fn bindings(c: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::namespaced_with(
        c.clone(),
        "default",
        &flotilla_controller::api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    )
}

/// A Deployment `name` in `default` of `replicas` 1-CPU replicas.
pub fn cpu_deployment(name: &str, replicas: i32) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx",
                                                       "resources": {"requests": {"cpu": "1"}}}]}}},
    })
}
