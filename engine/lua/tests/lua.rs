//! The Lua backend end to end: every operation through a customization of our own, the sandbox
//! and the table-conversion rules, and a property test that no input panics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_api::interpreter::{CustomizationRule, CustomizationTarget};
use flotilla_api::work::AggregatedStatusItem;
use flotilla_core::PluginError;
use flotilla_core::interpreter::{Operation, ResourceInterpreter, RuleBackend};
use flotilla_lua::{Limits, LuaBackend, LuaRule};
use serde_json::{Value, json};

fn target() -> CustomizationTarget {
    CustomizationTarget {
        api_version: "example.io/v1".into(),
        kind: "Web".into(),
    }
}

fn compile(op: Operation, script: &str) -> Result<Arc<dyn ResourceInterpreter>, String> {
    let rule = CustomizationRule {
        lua_script: Some(script.into()),
        ..Default::default()
    };
    LuaBackend::new().compile("web", &target(), op, &rule)
}

fn compile_err(op: Operation, script: &str) -> String {
    match compile(op, script) {
        Ok(_) => panic!("compiled"),
        Err(e) => e,
    }
}

fn rule(op: Operation, script: &str) -> Arc<dyn ResourceInterpreter> {
    compile(op, script).unwrap_or_else(|e| panic!("compile: {e}"))
}

fn web() -> Value {
    json!({
        "apiVersion": "example.io/v1",
        "kind": "Web",
        "metadata": {"name": "shop", "namespace": "prod", "annotations": {}, "labels": {"tier": 3}},
        "spec": {
            "replicas": 4,
            "paused": false,
            "selector": {},
            "ports": [],
            "template": {"spec": {
                "serviceAccountName": "shop-sa",
                "nodeSelector": {"disk": "ssd"},
                "containers": [{
                    "name": "app",
                    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}},
                    "envFrom": [{"configMapRef": {"name": "shop-config"}}],
                    "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "shop-secret", "key": "pw"}}}]
                }]
            }}
        },
        "status": {"readyReplicas": 4, "replicas": 4, "observedGeneration": 2}
    })
}

#[test]
fn interpret_replica_returns_replicas_and_kube_requirements() {
    let r = rule(
        Operation::InterpretReplica,
        r#"
        local kube = require("kube")
        function GetReplicas(obj)
          return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)
        end"#,
    );
    let out = r.get_replicas(&web()).unwrap();
    assert_eq!(out.replicas, 4);
    let req = serde_json::to_value(out.requirements.unwrap()).unwrap();
    assert_eq!(
        req,
        json!({"nodeClaim": {"nodeSelector": {"disk": "ssd"}},
               "resourceRequest": {"cpu": "250m", "memory": "512Mi"}})
    );
    // A number that is not integral truncates (Go's int32(float64)); nil requirements are none.
    let r = rule(
        Operation::InterpretReplica,
        "function GetReplicas(obj) return 2.9 end",
    );
    let out = r.get_replicas(&web()).unwrap();
    assert_eq!((out.replicas, out.requirements), (2, None));
    // Requirements quantities come back canonical.
    let r = rule(
        Operation::InterpretReplica,
        "function GetReplicas(obj) return 1, {resourceRequest = {cpu = '0.5', memory = '1024Mi'}, extra = 1} end",
    );
    let req = r.get_replicas(&web()).unwrap().requirements.unwrap();
    assert_eq!(
        serde_json::to_value(req).unwrap(),
        json!({"resourceRequest": {"cpu": "500m", "memory": "1Gi"}})
    );
    let r = rule(
        Operation::InterpretReplica,
        "function GetReplicas(obj) return 'x' end",
    );
    assert!(matches!(
        r.get_replicas(&web()),
        Err(PluginError::InvalidOutput { .. })
    ));
}

#[test]
fn interpret_component_builds_components() {
    let r = rule(
        Operation::InterpretComponent,
        r#"
        local kube = require("kube")
        function GetComponents(obj)
          return {
            {name = "web", replicas = obj.spec.replicas, replicaRequirements = kube.accuratePodRequirements(obj.spec.template)},
            {name = "sidecar", replicas = 1}
          }
        end"#,
    );
    let c = r.get_components(&web()).unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].name.as_str(), c[0].replicas), ("web", 4));
    assert!(c[0].replica_requirements.is_some());
    assert_eq!((c[1].name.as_str(), c[1].replicas), ("sidecar", 1));
    let none = rule(
        Operation::InterpretComponent,
        "function GetComponents(obj) return nil end",
    );
    assert!(none.get_components(&web()).unwrap().is_empty());
    let bad = rule(
        Operation::InterpretComponent,
        "function GetComponents(obj) return {{name = 'a', replicas = 1.5}} end",
    );
    assert!(bad.get_components(&web()).is_err());
}

#[test]
fn revise_replica_restores_empty_objects_and_keeps_empty_lists() {
    let r = rule(
        Operation::ReviseReplica,
        "function ReviseReplica(obj, n) obj.spec.replicas = n; obj.spec.added = {} return obj end",
    );
    let out = r.revise_replica(&web(), 7).unwrap();
    assert_eq!(out["spec"]["replicas"], json!(7));
    // `{}` in the input comes back `{}`, `[]` stays `[]`, the new empty table is pruned.
    assert_eq!(out["spec"]["selector"], json!({}));
    assert_eq!(out["metadata"]["annotations"], json!({}));
    assert_eq!(out["spec"]["ports"], json!([]));
    assert!(out["spec"].get("added").is_none());
    // Numbers stay integers, and unusual metadata (a numeric label) passes through.
    assert_eq!(out["metadata"]["labels"]["tier"], json!(3));
    assert_eq!(out["spec"]["paused"], json!(false));
}

#[test]
fn retain_keeps_observed_fields_with_both_objects_as_references() {
    let r = rule(
        Operation::Retain,
        "function Retain(desired, observed) desired.spec.paused = observed.spec.paused; desired.status = observed.status return desired end",
    );
    let mut observed = web();
    observed["spec"]["paused"] = json!(true);
    observed["status"] = json!({"conditions": []});
    let mut desired = web();
    desired.as_object_mut().unwrap().remove("status");
    let out = r.retain(&desired, &observed).unwrap();
    assert_eq!(out["spec"]["paused"], json!(true));
    assert_eq!(out["status"], json!({"conditions": []}));
    // A result without a kind is refused, as Unstructured refuses it.
    let r = rule(Operation::Retain, "function Retain(d, o) return {} end");
    assert!(matches!(
        r.retain(&desired, &observed),
        Err(PluginError::InvalidOutput { .. })
    ));
}

fn item(cluster: &str, ready: i64) -> AggregatedStatusItem {
    AggregatedStatusItem {
        cluster_name: cluster.into(),
        status: Some(json!({"readyReplicas": ready, "replicas": 2})),
        applied: true,
        health: "Healthy".into(),
        ..Default::default()
    }
}

#[test]
fn aggregate_status_sums_members_and_sees_nil_without_items() {
    let r = rule(
        Operation::AggregateStatus,
        r#"
        function AggregateStatus(obj, items)
          if items == nil then obj.status = {none = true} return obj end
          local ready, clusters = 0, {}
          for i = 1, #items do
            ready = ready + items[i].status.readyReplicas
            table.insert(clusters, items[i].clusterName .. "=" .. tostring(items[i].applied))
          end
          obj.status = {readyReplicas = ready, clusters = clusters, empty = {}}
          return obj
        end"#,
    );
    let out = r
        .aggregate_status(&web(), &[item("a", 1), item("b", 2)])
        .unwrap();
    // No references for AggregateStatus: the empty table is pruned.
    assert_eq!(
        out["status"],
        json!({"readyReplicas": 3, "clusters": ["a=true", "b=true"]})
    );
    assert_eq!(
        r.aggregate_status(&web(), &[]).unwrap()["status"],
        json!({"none": true})
    );
}

#[test]
fn reflect_status_and_health() {
    let r = rule(
        Operation::InterpretStatus,
        "function ReflectStatus(obj) return {ready = obj.status.readyReplicas} end",
    );
    assert_eq!(r.reflect_status(&web()).unwrap(), Some(json!({"ready": 4})));
    let empty = rule(
        Operation::InterpretStatus,
        "function ReflectStatus(obj) return {} end",
    );
    assert_eq!(empty.reflect_status(&web()).unwrap(), Some(json!({})));
    let h = rule(
        Operation::InterpretHealth,
        "function InterpretHealth(obj) return obj.status.readyReplicas == obj.spec.replicas end",
    );
    assert!(h.interpret_health(&web()).unwrap());
    let mut sick = web();
    sick["status"]["readyReplicas"] = json!(1);
    assert!(!h.interpret_health(&sick).unwrap());
    let bad = rule(
        Operation::InterpretHealth,
        "function InterpretHealth(obj) return 1 end",
    );
    assert!(bad.interpret_health(&web()).is_err());
}

#[test]
fn dependencies_come_from_kube_and_are_sorted_and_checked() {
    let r = rule(
        Operation::InterpretDependency,
        r#"
        local kube = require("kube")
        function GetDependencies(obj)
          local deps = kube.getPodDependencies(obj.spec.template, obj.metadata.namespace) or {}
          table.insert(deps, {apiVersion = "v1", kind = "ConfigMap", namespace = "prod", name = "shop-config"})
          return deps
        end"#,
    );
    let deps = r.get_dependencies(&web()).unwrap();
    let names: Vec<String> = deps
        .iter()
        .map(|d| format!("{}/{}/{}", d.kind, d.namespace, d.name))
        .collect();
    assert_eq!(
        names,
        [
            "ConfigMap/prod/shop-config",
            "Secret/prod/shop-secret",
            "ServiceAccount/prod/shop-sa"
        ]
    );
    let bad = rule(
        Operation::InterpretDependency,
        "function GetDependencies(obj) return {{apiVersion = 'v1', kind = 'Secret'}} end",
    );
    let Err(PluginError::InvalidOutput { message, .. }) = bad.get_dependencies(&web()) else {
        panic!("accepted a dependency without name or selector");
    };
    assert!(message.contains("name and labelSelector"), "{message}");
}

#[test]
fn kube_quantities_format_as_kubernetes_does() {
    let r = rule(
        Operation::InterpretStatus,
        r#"
        local kube = require("kube")
        function ReflectStatus(obj)
          return {
            a = kube.resourceAdd("1Gi", "512Mi"),
            b = kube.resourceAdd("100m", "0.4", nil),
            c = kube.resourceAdd(),
            d = kube.getResourceQuantity("1500m"),
            e = tostring(kube.getResourceQuantity("2Ki")),
          }
        end"#,
    );
    assert_eq!(
        r.reflect_status(&web()).unwrap(),
        Some(json!({"a": "1536Mi", "b": "500m", "c": "0", "d": 1.5, "e": "2048"}))
    );
    let bad = rule(
        Operation::InterpretStatus,
        "local kube = require('kube') function ReflectStatus(obj) return {kube.resourceAdd(5)} end",
    );
    let Err(PluginError::Failed { message, .. }) = bad.reflect_status(&web()) else {
        panic!("number accepted");
    };
    assert!(
        message.contains("bad argument #1 to resourceAdd"),
        "{message}"
    );
}

#[test]
fn compile_names_the_script_and_line_and_requires_the_function() {
    let e = compile_err(
        Operation::InterpretReplica,
        "function GetReplicas(obj)\n  return obj.\nend",
    );
    assert!(
        e.starts_with("spec.customizations.replicaResource.luaScript:3:"),
        "{e}"
    );
    assert!(!e.contains("return obj."), "the script is echoed: {e}");
    let e = compile_err(Operation::InterpretHealth, "function Other() end");
    assert!(e.contains("not found function InterpretHealth"), "{e}");
    let e = compile_err(Operation::Retain, "Retain = 3");
    assert!(e.contains("Retain is not a function"), "{e}");
    assert!(compile(Operation::Retain, "  ").is_err());
}

#[test]
fn runtime_errors_carry_the_message_and_line() {
    let r = rule(
        Operation::InterpretHealth,
        "function InterpretHealth(obj)\n  return obj.missing.field\nend",
    );
    let Err(PluginError::Failed { plugin, message }) = r.interpret_health(&web()) else {
        panic!("no error");
    };
    assert_eq!(plugin, "web");
    assert!(
        message.starts_with("spec.customizations.healthInterpretation.luaScript:2:"),
        "{message}"
    );
    assert!(!message.contains("stack traceback"), "{message}");
    let r = rule(
        Operation::InterpretHealth,
        "function InterpretHealth(obj) error('custom failure') end",
    );
    let Err(PluginError::Failed { message, .. }) = r.interpret_health(&web()) else {
        panic!("no error");
    };
    assert!(message.ends_with("custom failure"), "{message}");
}

fn limited() -> Limits {
    Limits {
        timeout: Duration::from_millis(200),
        memory_bytes: 16 << 20,
        output_bytes: 1 << 20,
    }
}

fn health(script: &str) -> Result<bool, PluginError> {
    LuaRule::new("web", Operation::InterpretHealth, script, limited())
        .unwrap_or_else(|e| panic!("compile: {e}"))
        .interpret_health(&web())
}

#[test]
fn sandbox_stops_loops_bombs_and_recursion() {
    let start = Instant::now();
    assert!(matches!(
        health("function InterpretHealth(o) while true do end end"),
        Err(PluginError::Timeout { .. })
    ));
    // pcall cannot swallow the deadline.
    assert!(matches!(
        health(
            "function InterpretHealth(o) while true do pcall(function() while true do end end) end end"
        ),
        Err(PluginError::Timeout { .. })
    ));
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(matches!(
        health(
            "function InterpretHealth(o) local t = {} for i = 1, 1e9 do t[i] = {i, i, i} end end"
        ),
        Err(PluginError::ResourceExhausted { .. })
    ));
    assert!(matches!(
        health("function InterpretHealth(o) local s = 'x' while true do s = s .. s end end"),
        Err(PluginError::ResourceExhausted { .. } | PluginError::Failed { .. })
    ));
    let Err(PluginError::Failed { message, .. }) =
        health("function InterpretHealth(o) return string.rep('x', 1e9) end")
    else {
        panic!("string.rep ran");
    };
    assert!(message.contains("string.rep is not supported"), "{message}");
    let Err(PluginError::Failed { message, .. }) = health(
        "local function f(n) return 1 + f(n + 1) end function InterpretHealth(o) return f(1) end",
    ) else {
        panic!("recursion ran");
    };
    assert!(message.contains("stack overflow"), "{message}");
    for f in [
        "loadstring('x=1')",
        "os.execute('true')",
        "io.open('/etc/passwd')",
        "setfenv(1, {})",
    ] {
        let script = format!("function InterpretHealth(o) local r = {f} return true end");
        assert!(
            matches!(health(&script), Err(PluginError::Failed { .. })),
            "{f} ran"
        );
    }
    // A result larger than the output budget.
    let big = LuaRule::new(
        "web",
        Operation::InterpretStatus,
        "function ReflectStatus(o) local t = {} for i = 1, 20000 do t[i] = ('%099d'):format(i) end return {t = t} end",
        limited(),
    )
    .unwrap();
    assert!(matches!(
        big.reflect_status(&web()),
        Err(PluginError::ResourceExhausted { .. })
    ));
}

#[test]
fn no_state_survives_a_call() {
    let r = rule(
        Operation::InterpretHealth,
        "counter = counter or 0\nfunction InterpretHealth(o) counter = counter + 1; string.lower = nil; return counter == 1 end",
    );
    assert!(r.interpret_health(&web()).unwrap());
    assert!(r.interpret_health(&web()).unwrap());
}

#[test]
fn no_input_or_script_panics() {
    // Random objects through a script that walks them, and random scripts assembled from Lua
    // fragments: every outcome is Ok or a PluginError, never a panic or a hang.
    let mut rng = fastrand::Rng::with_seed(18);
    fn random_value(rng: &mut fastrand::Rng, depth: u32) -> Value {
        match rng.u8(0..if depth > 4 { 4 } else { 6 }) {
            0 => Value::Null,
            1 => json!(rng.bool()),
            2 => json!(rng.f64() * 1e6 - 5e5),
            3 => json!("s".repeat(rng.usize(0..5))),
            4 => Value::Array(
                (0..rng.usize(0..4))
                    .map(|_| random_value(rng, depth + 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..rng.usize(0..4))
                    .map(|i| (format!("k{i}"), random_value(rng, depth + 1)))
                    .collect(),
            ),
        }
    }
    let walker = rule(
        Operation::InterpretStatus,
        r#"
        local function walk(v, depth)
          if type(v) ~= "table" or depth > 8 then return v end
          local out = {}
          for k, x in pairs(v) do out[k] = walk(x, depth + 1) end
          return out
        end
        function ReflectStatus(obj) return walk(obj, 0) end"#,
    );
    for _ in 0..300 {
        let mut v = random_value(&mut rng, 0);
        if rng.bool() {
            v = json!({"kind": "Web", "spec": v});
        }
        let _ = walker.reflect_status(&v);
    }
    let fragments = [
        "return obj",
        "return {}",
        "return nil",
        "return 1",
        "return {1, x = 2}",
        "return {[3] = 1}",
        "return {f = print}",
        "error('x')",
        "return obj.spec",
        "return {n = 0/0}",
        "local t = {} t.t = t return t",
        "return require('kube').resourceAdd('x')",
        "return require('kube').accuratePodRequirements({spec = {containers = {{resources = {requests = {cpu = 'bad'}}}}}})",
        "return require('kube').getPodDependencies(obj, nil)",
        "return tostring(obj)",
        "return string.format('%d', 'x')",
        "return {kind = 'Web', a = {b = {}}}",
    ];
    for _ in 0..200 {
        let body = fragments[rng.usize(0..fragments.len())];
        for op in Operation::ALL {
            let name = flotilla_lua::function_name(op);
            let script = format!("function {name}(obj, a) {body} end");
            let Ok(r) = LuaRule::new("fuzz", op, &script, limited()) else {
                continue;
            };
            let obj = web();
            let _ = match op {
                Operation::InterpretReplica => r.get_replicas(&obj).map(|_| ()),
                Operation::InterpretComponent => r.get_components(&obj).map(|_| ()),
                Operation::ReviseReplica => r.revise_replica(&obj, 3).map(|_| ()),
                Operation::Retain => r.retain(&obj, &obj).map(|_| ()),
                Operation::AggregateStatus => r.aggregate_status(&obj, &[item("a", 1)]).map(|_| ()),
                Operation::InterpretStatus => r.reflect_status(&obj).map(|_| ()),
                Operation::InterpretHealth => r.interpret_health(&obj).map(|_| ()),
                Operation::InterpretDependency => r.get_dependencies(&obj).map(|_| ()),
            };
        }
    }
}
