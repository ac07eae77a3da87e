//! The resource interpreter chain of the CLI: the rule backends customizations compile with
//! (shared by `flotilla up`'s controllers, admission and the offline commands), and the chain
//! `plan`/`explain` build from the `ResourceInterpreterCustomization` documents in their input.

use std::sync::Arc;

use anyhow::bail;
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

/// Karmada's validating webhook rule: two customizations may not customize the same operation of
/// the same target. Returns `(operation field, other customization)` of the first clash of `ric`
/// with any of `others` (objects of the same name are the same customization).
pub fn clash<'a>(
    ric: &ResourceInterpreterCustomization,
    others: impl IntoIterator<Item = &'a ResourceInterpreterCustomization>,
) -> Option<(&'static str, String)> {
    for other in others {
        if other.metadata.name() == ric.metadata.name() || other.spec.target != ric.spec.target {
            continue;
        }
        for op in Operation::ALL {
            let (field, mine) = rule_for(&ric.spec.customizations, op);
            if mine.is_some() && rule_for(&other.spec.customizations, op).1.is_some() {
                return Some((field, other.metadata.name().to_owned()));
            }
        }
    }
    None
}

/// Compile the customizations among `inv`'s documents and set `inv.interpreters` to the chain
/// (customizations by name, then the native defaults).
///
/// # Errors
/// A customization that does not parse, does not compile or clashes with another.
pub fn attach(inv: &mut Inventory) -> anyhow::Result<()> {
    let mut rics = Vec::new();
    for t in inv.templates.iter().filter(|t| is_customization(&t.0)) {
        let ric: ResourceInterpreterCustomization = serde_json::from_value(t.0.clone())
            .map_err(|e| anyhow::anyhow!("{CUSTOMIZATION_KIND} {}: {e}", t.name()))?;
        rics.push(ric);
    }
    for ric in &rics {
        if let Some((field, other)) = clash(ric, &rics) {
            bail!(
                "{CUSTOMIZATION_KIND} {}: spec.customizations.{field}: {other} already customizes it for {} {}",
                ric.metadata.name(),
                ric.spec.target.api_version,
                ric.spec.target.kind
            );
        }
    }
    let (compiled, failed) =
        flotilla_plugins::interpreter::compile_customizations(&rics, &rule_backends());
    if let Some((name, e)) = failed.first() {
        bail!("{CUSTOMIZATION_KIND} {name}: {e}");
    }
    inv.interpreters = flotilla_plugins::interpreter::chain(compiled, Vec::new());
    Ok(())
}
