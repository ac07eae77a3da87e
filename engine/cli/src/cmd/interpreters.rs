//! The resource interpreter chain of the CLI: the rule backends customizations compile with
//! (shared by `flotilla up`'s controllers, admission and the offline commands), and the chain
//! `plan`/`explain` build from the `ResourceInterpreterCustomization` documents in their input.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use flotilla_api::interpreter::{
    CONFIG_API_VERSION, CUSTOMIZATION_KIND, ResourceInterpreterCustomization,
};
use flotilla_core::interpreter::{Operation, RuleBackend, rule_for};
use flotilla_core::plan::Inventory;

/// The program backends of customization rules (`luaScript`, `cel`, `wasm`): one line each.
pub fn rule_backends() -> Vec<Arc<dyn RuleBackend>> {
    vec![
        Arc::new(flotilla_lua::LuaBackend::new()),
        Arc::new(flotilla_cel::CelRuleBackend::default()),
        Arc::new(super::wasm_interpreters::wasm_rule_backend()),
    ]
}

/// Whether `object` is a `ResourceInterpreterCustomization`.
pub fn is_customization(object: &serde_json::Value) -> bool {
    object.get("apiVersion").and_then(serde_json::Value::as_str) == Some(CONFIG_API_VERSION)
        && object.get("kind").and_then(serde_json::Value::as_str) == Some(CUSTOMIZATION_KIND)
}

/// The operations Karmada's validating webhook checks for conflicts, in its order
/// (`AllResourceInterpreterCustomizationRules`); InterpretDependency is left out: several
/// customizations may each add dependencies.
const EXCLUSIVE_OPERATIONS: [Operation; 7] = [
    Operation::Retain,
    Operation::InterpretReplica,
    Operation::InterpretComponent,
    Operation::ReviseReplica,
    Operation::InterpretStatus,
    Operation::AggregateStatus,
    Operation::InterpretHealth,
];

/// Karmada's validating webhook rule: two customizations may not customize the same operation of
/// the same target (InterpretDependency excepted). Returns `(operation, other customization)` of
/// the first clash of `ric` with any of `others` (objects of the same name are the same
/// customization).
pub fn clash<'a>(
    ric: &ResourceInterpreterCustomization,
    others: impl IntoIterator<Item = &'a ResourceInterpreterCustomization>,
) -> Option<(Operation, String)> {
    for other in others {
        if other.metadata.name() == ric.metadata.name() || other.spec.target != ric.spec.target {
            continue;
        }
        for op in EXCLUSIVE_OPERATIONS {
            if rule_for(&other.spec.customizations, op).1.is_some()
                && rule_for(&ric.spec.customizations, op).1.is_some()
            {
                return Some((op, other.metadata.name().to_owned()));
            }
        }
    }
    None
}

/// The name of Karmada's validating webhook for customizations.
pub const CUSTOMIZATION_WEBHOOK: &str = "resourceinterpretercustomization.karmada.io";

/// Admission of a `ResourceInterpreterCustomization` against the stored ones, as Karmada's
/// validating webhook: denied when another customization already customizes one of its
/// operations for the same target. Objects that do not parse are left to the schema checks.
///
/// # Errors
/// The denial (`403`), or a failure to read the stored customizations (`500`, as Karmada's
/// webhook answers `admission.Errored(http.StatusInternalServerError, err)`).
pub fn admit_against_stored(
    object: &serde_json::Value,
    resource: &flotilla_apiserver::registry::Resource,
    existing: &dyn flotilla_apiserver::admission::Existing,
) -> Result<(), flotilla_apiserver::AdmissionError> {
    use flotilla_apiserver::AdmissionError;
    let Ok(ric) = serde_json::from_value::<ResourceInterpreterCustomization>(object.clone()) else {
        return Ok(());
    };
    let stored = existing.list(resource).map_err(|e| {
        AdmissionError::errored(
            CUSTOMIZATION_WEBHOOK,
            500,
            format!("listing the ResourceInterpreterCustomizations failed: {e}"),
        )
    })?;
    let stored: Vec<ResourceInterpreterCustomization> = stored
        .iter()
        .filter_map(|o| serde_json::from_value((**o).clone()).ok())
        .collect();
    match clash(&ric, &stored) {
        Some((op, other)) => Err(AdmissionError::denied(
            CUSTOMIZATION_WEBHOOK,
            format!(
                "conflicting with InterpreterOperation({}) of existing ResourceInterpreterCustomization({other})",
                op.as_str()
            ),
        )),
        None => Ok(()),
    }
}

/// Whether `object` is a `WasmPlugin` (flotilla.dev/v1alpha1).
pub fn is_wasm_plugin(object: &serde_json::Value) -> bool {
    object.get("apiVersion").and_then(serde_json::Value::as_str)
        == Some(flotilla_core::profile::API_VERSION)
        && object.get("kind").and_then(serde_json::Value::as_str)
            == Some(flotilla_core::profile::WASM_PLUGIN_KIND)
}

/// Largest module an offline `WasmPlugin` may name (as the controllers allow).
const MAX_MODULE_BYTES: u64 = 64 << 20;

/// The interpreter plugins of offline `WasmPlugin` documents `(file, its directory, object)`: the
/// module from `spec.module.path` (relative to the file's directory) or `spec.module.base64`,
/// with the object's config and limits.
fn offline_plugins(
    docs: &[(String, std::path::PathBuf, serde_json::Value)],
) -> anyhow::Result<flotilla_wasm::PluginMap> {
    use base64::Engine as _;
    use std::io::Read as _;
    let map = flotilla_wasm::PluginMap::new();
    for (file, dir, o) in docs {
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let at = format!("{file}: WasmPlugin {name:?}");
        let spec: flotilla_core::profile::WasmPluginSpec =
            serde_path_to_error::deserialize(o.get("spec").cloned().unwrap_or_default())
                .map_err(|e| anyhow::anyhow!("{at}: spec.{}: {}", e.path(), e.inner()))?;
        let bytes = match (&spec.module.path, &spec.module.base64) {
            (Some(p), None) => {
                let path = dir.join(p);
                let f = std::fs::File::open(&path).with_context(|| {
                    format!("{at}: spec.module.path: cannot read {}", path.display())
                })?;
                let mut bytes = Vec::new();
                f.take(MAX_MODULE_BYTES + 1).read_to_end(&mut bytes)?;
                bytes
            }
            (None, Some(b)) => {
                if b.len() as u64 > MAX_MODULE_BYTES / 3 * 4 + 4 {
                    bail!("{at}: spec.module.base64: larger than {MAX_MODULE_BYTES} bytes");
                }
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|_| anyhow::anyhow!("{at}: spec.module.base64 is not base64"))?
            }
            _ => bail!("{at}: spec.module: set exactly one of path and base64"),
        };
        if bytes.len() as u64 > MAX_MODULE_BYTES {
            bail!("{at}: the module is larger than {MAX_MODULE_BYTES} bytes");
        }
        let plugin = flotilla_wasm::load_interpreter(
            &name,
            &bytes,
            spec.config.as_ref(),
            spec.limits.as_ref(),
        )
        .map_err(|e| {
            let hint = super::diagnose::hint(&e)
                .map(|h| format!("\n{h}"))
                .unwrap_or_default();
            anyhow::anyhow!("{at}: {e}{hint}")
        })?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{at}: the module does not export {} (not a resource interpreter)",
                flotilla_abi::export::INTERPRET
            )
        })?;
        map.insert(name, Ok(plugin));
    }
    Ok(map)
}

/// The rule backends of the offline commands (`plan`, `explain`, `validate`, `interpret`):
/// [`rule_backends`], with `wasm: {plugin: NAME}` rules served by the `WasmPlugin` documents of
/// the input (`(file, its directory, object)`) when it has any.
///
/// # Errors
/// A `WasmPlugin` whose module cannot be read or loaded, or is not a resource interpreter.
pub fn offline_rule_backends(
    wasm_plugins: &[(String, std::path::PathBuf, serde_json::Value)],
) -> anyhow::Result<Vec<Arc<dyn RuleBackend>>> {
    let mut backends = rule_backends();
    if !wasm_plugins.is_empty() {
        let map = Arc::new(offline_plugins(wasm_plugins)?);
        backends.retain(|b| b.field() != "wasm");
        backends.push(Arc::new(flotilla_wasm::WasmRuleBackend::new(map)));
    }
    Ok(backends)
}

/// Compile the customizations among `inv`'s documents and set `inv.interpreters` to the chain
/// (customizations by name, then the native defaults). `wasm: {plugin: NAME}` rules are served by
/// the `WasmPlugin` documents of the input (`(file, its directory, object)`) when it has any.
///
/// # Errors
/// A customization that does not parse, does not compile or clashes with another; a `WasmPlugin`
/// whose module cannot be read or loaded.
pub fn attach(
    inv: &mut Inventory,
    wasm_plugins: &[(String, std::path::PathBuf, serde_json::Value)],
) -> anyhow::Result<()> {
    let mut rics = Vec::new();
    for t in inv.templates.iter().filter(|t| is_customization(&t.0)) {
        let ric: ResourceInterpreterCustomization = serde_json::from_value(t.0.clone())
            .map_err(|e| anyhow::anyhow!("{CUSTOMIZATION_KIND} {}: {e}", t.name()))?;
        rics.push(ric);
    }
    for ric in &rics {
        if let Some((op, other)) = clash(ric, &rics) {
            bail!(
                "{CUSTOMIZATION_KIND} {}: spec.customizations.{}: {other} already customizes it for {} {}",
                ric.metadata.name(),
                rule_for(&ric.spec.customizations, op).0,
                ric.spec.target.api_version,
                ric.spec.target.kind
            );
        }
    }
    let backends = offline_rule_backends(wasm_plugins)?;
    let (compiled, failed) =
        flotilla_plugins::interpreter::compile_customizations(&rics, &backends);
    if let Some((name, e)) = failed.first() {
        bail!("{CUSTOMIZATION_KIND} {name}: {e}");
    }
    inv.interpreters = flotilla_plugins::interpreter::chain(compiled, Vec::new());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    struct Stored(Vec<Value>);

    impl flotilla_apiserver::admission::Existing for Stored {
        fn list(
            &self,
            _resource: &flotilla_apiserver::registry::Resource,
        ) -> Result<Vec<Arc<Value>>, String> {
            Ok(self.0.iter().cloned().map(Arc::new).collect())
        }
    }

    fn customizations() -> &'static flotilla_apiserver::registry::Resource {
        flotilla_apiserver::registry::lookup(
            "config.karmada.io",
            "v1alpha1",
            "resourceinterpretercustomizations",
        )
        .expect("resource")
    }

    fn ric(name: &str, kind: &str, rules: Value) -> Value {
        json!({"apiVersion": CONFIG_API_VERSION, "kind": CUSTOMIZATION_KIND, "metadata": {"name": name},
               "spec": {"target": {"apiVersion": "example.dev/v1", "kind": kind}, "customizations": rules}})
    }

    #[test]
    fn a_second_customization_of_the_same_operation_and_target_is_denied_as_karmada_does() {
        let res = customizations();
        let health = json!({"healthInterpretation": {"cel": {"healthy": "true"}}});
        let deps = json!({"dependencyInterpretation": {"luaScript": "function GetDependencies(o) return {} end"}});
        let stored = Stored(vec![
            ric("a", "Widget", health.clone()),
            ric("d", "Widget", deps.clone()),
        ]);
        let e = admit_against_stored(&ric("b", "Widget", health.clone()), res, &stored)
            .expect_err("duplicate");
        assert_eq!(
            e.to_api_error(res, "b").to_status()["message"],
            "admission webhook \"resourceinterpretercustomization.karmada.io\" denied the request: conflicting with InterpreterOperation(InterpretHealth) of existing ResourceInterpreterCustomization(a)"
        );
        assert_eq!(e.to_api_error(res, "b").code, 403);
        // The same object again (an update), another operation, another kind, or a second
        // dependency rule: allowed.
        for ok in [
            ric("a", "Widget", health.clone()),
            ric(
                "c",
                "Widget",
                json!({"statusReflection": {"cel": {"status": "{}"}}}),
            ),
            ric("g", "Gadget", health),
            ric("e", "Widget", deps),
        ] {
            assert!(admit_against_stored(&ok, res, &stored).is_ok(), "{ok}");
        }
    }

    struct Unreadable;

    impl flotilla_apiserver::admission::Existing for Unreadable {
        fn list(
            &self,
            _resource: &flotilla_apiserver::registry::Resource,
        ) -> Result<Vec<Arc<Value>>, String> {
            Err("the store is closed".into())
        }
    }

    #[test]
    fn unreadable_stored_customizations_fail_the_request_with_500_as_karmadas_webhook() {
        let res = customizations();
        let health = json!({"healthInterpretation": {"cel": {"healthy": "true"}}});
        let e = admit_against_stored(&ric("b", "Widget", health), res, &Unreadable)
            .expect_err("not decided");
        let api = e.to_api_error(res, "b");
        assert_eq!(api.code, 500);
        // kube-apiserver's Status for a webhook's `admission.Errored(500, err)`: no reason.
        assert_eq!(
            api.to_status(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "admission webhook \"resourceinterpretercustomization.karmada.io\" denied the request: listing the ResourceInterpreterCustomizations failed: the store is closed",
                "code": 500,
            })
        );
    }
}
