//! `wasm: {plugin: NAME}` resource-interpreter rules in the control plane: the plugins they name
//! are the `WasmPlugin` objects the plugin registry last resolved
//! ([`flotilla_controller::controller::plugins::resolved_modules`]), loaded here on first use
//! and again whenever an object's module digest changes (a changed object serves the next call).

use std::sync::Arc;

use flotilla_controller::controller::plugins::resolved_modules;
use flotilla_wasm::{PluginMap, PluginResolver, WasmPlugin, WasmRuleBackend};

/// Resolves names through the registry's `WasmPlugin`s, caching loaded plugins by digest.
#[derive(Debug, Default)]
pub struct LiveWasmPlugins {
    loaded: PluginMap,
}

impl PluginResolver for LiveWasmPlugins {
    fn resolve(&self, name: &str) -> Result<Arc<WasmPlugin>, String> {
        let module = resolved_modules()
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
            .ok_or_else(|| format!("WasmPlugin {name:?} not found"))?
            .map_err(|e| format!("WasmPlugin {name:?} is not loadable: {e}"))?;
        if let Some(Ok(p)) = self.loaded.get(name)
            && p.module().digest.to_string() == module.digest
        {
            return Ok(p);
        }
        let bytes = std::fs::read(&module.path)
            .map_err(|e| format!("WasmPlugin {name:?}: reading its stored module: {e}"))?;
        let plugin = flotilla_wasm::load_interpreter(
            name,
            &bytes,
            module.spec.config.as_ref(),
            module.spec.limits.as_ref(),
        )
        .map_err(|e| format!("WasmPlugin {name:?} is not loadable: {e}"))?
        .ok_or_else(|| {
            format!(
                "WasmPlugin {name:?} does not export {}",
                flotilla_abi::export::INTERPRET
            )
        })?;
        self.loaded.insert(name, Ok(Arc::clone(&plugin)));
        Ok(plugin)
    }
}

/// The `wasm` rule backend on the control plane's `WasmPlugin`s.
pub fn wasm_rule_backend() -> WasmRuleBackend {
    WasmRuleBackend::new(Arc::new(LiveWasmPlugins::default()))
}
