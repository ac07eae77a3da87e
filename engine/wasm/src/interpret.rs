//! Resource-interpreter customizations in Wasm: the `wasm: {plugin: NAME}` field of a
//! `ResourceInterpreterCustomization` rule, served by a module exporting `flotilla_interpret_v1`
//! (`sdk/ABI.md` §10).
//!
//! [`WasmRuleBackend`] compiles a rule by resolving the named `WasmPlugin` through a
//! [`PluginResolver`] given at construction: offline (`flotilla interpret`) a [`PluginMap`] filled
//! from the input files; in the control plane a resolver over the `WasmPlugin` objects the plugin
//! registry last loaded (the CLI's `wasm_interpreters`). The plugin is resolved again on every
//! call, so a new version of the module serves the next call without recompiling the
//! customization.
//!
//! A call crosses the boundary once: an [`InterpretRequest`] (JSON) in, an [`InterpretReply`] out
//! through `set_result`. Calls run on the plugin's warm instances under its limits (deadline,
//! memory, output size) exactly as scheduling calls do, and every reply is checked against its
//! request: only the operation's member, `replicas` in `0..=2147483647`, components with unique
//! non-empty names, dependencies with `apiVersion`, `kind` and a `name` or `labelSelector`, merge
//! patches that keep the object's identity. Anything else is [`PluginError::InvalidOutput`].

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use flotilla_abi::{InterpretReply, InterpretRequest, export};
use flotilla_api::interpreter::{
    Component, CustomizationRule, CustomizationTarget, DependentObjectReference,
};
use flotilla_api::work::{AggregatedStatusItem, ReplicaRequirements};
use flotilla_core::PluginError;
use flotilla_core::framework::Plugin;
use flotilla_core::interpreter::{Operation, Replicas, ResourceInterpreter, RuleBackend};
use serde_json::Value;

use crate::instance::{Reply, bound_message};
use crate::plugin::WasmPlugin;

/// Most components or dependencies a reply may carry.
pub const MAX_ITEMS: usize = 10_000;

/// Finds the loaded `WasmPlugin` a rule names.
pub trait PluginResolver: Send + Sync + 'static {
    /// The plugin called `name`.
    ///
    /// # Errors
    /// Why there is none to call (not found, not loadable), for the customization's status.
    fn resolve(&self, name: &str) -> Result<Arc<WasmPlugin>, String>;
}

/// A swappable map of loaded plugins by name: the resolver of both the CLI (filled once from the
/// input files) and the controllers (replaced whole on every `WasmPlugin` change).
#[derive(Default)]
pub struct PluginMap {
    plugins: RwLock<BTreeMap<String, Result<Arc<WasmPlugin>, String>>>,
}

impl std::fmt::Debug for PluginMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl PluginMap {
    /// An empty map.
    pub fn new() -> Self {
        PluginMap::default()
    }

    /// Add or replace `name` (an `Err` records why the object is not loadable).
    pub fn insert(&self, name: impl Into<String>, plugin: Result<Arc<WasmPlugin>, String>) {
        self.plugins
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.into(), plugin);
    }

    /// Replace the whole map at once.
    pub fn replace(&self, plugins: BTreeMap<String, Result<Arc<WasmPlugin>, String>>) {
        *self
            .plugins
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = plugins;
    }

    /// The entry for `name`, as last inserted.
    pub fn get(&self, name: &str) -> Option<Result<Arc<WasmPlugin>, String>> {
        self.plugins
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// The names in the map.
    pub fn names(&self) -> Vec<String> {
        self.plugins
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }
}

/// Load `bytes` as the interpreter plugin `name` with its `config` and `limits`: `Ok(None)` when
/// the module does not export `flotilla_interpret_v1` (a scheduling-only plugin).
///
/// # Errors
/// Limits out of range, compile, link or first instantiation.
pub fn load_interpreter(
    name: &str,
    bytes: &[u8],
    config: Option<&Value>,
    limits: Option<&flotilla_core::profile::PluginLimits>,
) -> Result<Option<Arc<WasmPlugin>>, String> {
    let limits = crate::Limits::from_spec(limits).map_err(|e| e.to_string())?;
    let host = crate::Host::global().map_err(|e| e.to_string())?;
    let module = host.compile(bytes).map_err(|e| e.to_string())?;
    if !module.has_interpret {
        return Ok(None);
    }
    WasmPlugin::load(host, name, module, config, limits)
        .map(|p| Some(Arc::new(p)))
        .map_err(|e| e.to_string())
}

impl PluginResolver for PluginMap {
    fn resolve(&self, name: &str) -> Result<Arc<WasmPlugin>, String> {
        match self.get(name) {
            Some(Ok(p)) => Ok(p),
            Some(Err(e)) => Err(format!("WasmPlugin {name:?} is not loadable: {e}")),
            None => Err(format!("WasmPlugin {name:?} not found")),
        }
    }
}

impl<R: PluginResolver> PluginResolver for Arc<R> {
    fn resolve(&self, name: &str) -> Result<Arc<WasmPlugin>, String> {
        (**self).resolve(name)
    }
}

/// The `wasm` rule backend.
#[derive(Clone)]
pub struct WasmRuleBackend {
    resolver: Arc<dyn PluginResolver>,
}

impl std::fmt::Debug for WasmRuleBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuleBackend").finish_non_exhaustive()
    }
}

impl WasmRuleBackend {
    /// A backend resolving `wasm.plugin` names through `resolver`.
    pub fn new(resolver: Arc<dyn PluginResolver>) -> Self {
        WasmRuleBackend { resolver }
    }
}

impl RuleBackend for WasmRuleBackend {
    fn field(&self) -> &'static str {
        "wasm"
    }

    fn compile(
        &self,
        name: &str,
        target: &CustomizationTarget,
        op: Operation,
        rule: &CustomizationRule,
    ) -> Result<Arc<dyn ResourceInterpreter>, String> {
        let plugin = &rule.wasm.as_ref().ok_or("wasm is not set")?.plugin;
        if plugin.is_empty() {
            return Err("wasm.plugin: the name of a WasmPlugin is required".into());
        }
        let loaded = self
            .resolver
            .resolve(plugin)
            .map_err(|e| format!("wasm.plugin: {e}"))?;
        if !loaded.module().has_interpret {
            return Err(format!(
                "wasm.plugin: WasmPlugin {plugin:?} does not export {}",
                export::INTERPRET
            ));
        }
        Ok(Arc::new(WasmRule {
            name: name.to_owned(),
            target: target.clone(),
            op,
            plugin: plugin.clone(),
            resolver: Arc::clone(&self.resolver),
        }))
    }
}

/// One compiled `wasm` rule.
struct WasmRule {
    name: String,
    target: CustomizationTarget,
    op: Operation,
    plugin: String,
    resolver: Arc<dyn PluginResolver>,
}

/// The reply's members, for the "only the operation's member" check.
fn members(r: &InterpretReply) -> Vec<&'static str> {
    [
        ("replicas", r.replicas.is_some()),
        ("replicaRequirements", r.replica_requirements.is_some()),
        ("components", r.components.is_some()),
        ("patch", r.patch.is_some()),
        ("status", r.status.is_some()),
        ("healthy", r.healthy.is_some()),
        ("dependencies", r.dependencies.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, set)| set.then_some(n))
    .collect()
}

/// What `op` replies with: (members allowed, member required).
fn reply_members(op: Operation) -> (&'static [&'static str], Option<&'static str>) {
    match op {
        Operation::InterpretReplica => (&["replicas", "replicaRequirements"], Some("replicas")),
        Operation::InterpretComponent => (&["components"], Some("components")),
        Operation::ReviseReplica | Operation::Retain => (&["patch"], Some("patch")),
        Operation::AggregateStatus => (&["status"], Some("status")),
        Operation::InterpretStatus => (&["status"], None),
        Operation::InterpretHealth => (&["healthy"], Some("healthy")),
        Operation::InterpretDependency => (&["dependencies"], Some("dependencies")),
    }
}

/// Decode a reply and check it has exactly the members `op` may reply with.
pub(crate) fn decode(op: Operation, reply: &Reply) -> Result<InterpretReply, String> {
    if reply.rows.is_some() {
        return Err("interpret reply: set_rows was called (only set_result is used)".into());
    }
    let bytes = reply
        .result
        .as_deref()
        .ok_or("no interpret reply (set_result was not called)")?;
    let r: InterpretReply =
        serde_json::from_slice(bytes).map_err(|e| format!("interpret reply: {e}"))?;
    let (allowed, required) = reply_members(op);
    let got = members(&r);
    if let Some(extra) = got.iter().find(|m| !allowed.contains(m)) {
        return Err(format!(
            "interpret reply: {extra} is not a reply to {op} (it takes {})",
            allowed.join(", ")
        ));
    }
    if let Some(req) = required
        && !got.contains(&req)
    {
        return Err(format!("interpret reply: {op} requires {req}"));
    }
    Ok(r)
}

/// `n` as replicas: `0..=i32::MAX`.
fn replicas(n: i64, what: &str) -> Result<i32, String> {
    i32::try_from(n)
        .ok()
        .filter(|r| *r >= 0)
        .ok_or_else(|| format!("{what}: {n} is outside 0..={}", i32::MAX))
}

fn requirements(v: Option<Value>, what: &str) -> Result<Option<ReplicaRequirements>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| format!("{what}: {e}")),
    }
}

fn bounded(items: &[Value], what: &str) -> Result<(), String> {
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "{what}: {} items, more than {MAX_ITEMS}",
            items.len()
        ));
    }
    Ok(())
}

/// Components: unique non-empty names, replicas in range, only Karmada's fields.
pub(crate) fn components(items: Vec<Value>) -> Result<Vec<Component>, String> {
    bounded(&items, "components")?;
    let mut out: Vec<Component> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("components[{i}]");
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct Raw {
            name: String,
            replicas: i64,
            #[serde(default)]
            replica_requirements: Option<Value>,
        }
        let raw: Raw = serde_json::from_value(item).map_err(|e| format!("{at}: {e}"))?;
        if raw.name.is_empty() {
            return Err(format!("{at}.name: must not be empty"));
        }
        if out.iter().any(|c| c.name == raw.name) {
            return Err(format!("{at}.name: {:?} appears twice", raw.name));
        }
        out.push(Component {
            replicas: replicas(raw.replicas, &format!("{at}.replicas"))?,
            replica_requirements: requirements(
                raw.replica_requirements,
                &format!("{at}.replicaRequirements"),
            )?,
            name: raw.name,
        });
    }
    Ok(out)
}

/// Dependencies: `apiVersion`, `kind`, and `name` or `labelSelector`.
pub(crate) fn dependencies(items: Vec<Value>) -> Result<Vec<DependentObjectReference>, String> {
    bounded(&items, "dependencies")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let at = format!("dependencies[{i}]");
        if let Some(k) = item.as_object().and_then(|m| {
            m.keys().find(|k| {
                !["apiVersion", "kind", "namespace", "name", "labelSelector"].contains(&k.as_str())
            })
        }) {
            return Err(format!("{at}: unknown field {k:?}"));
        }
        let d: DependentObjectReference =
            serde_json::from_value(item).map_err(|e| format!("{at}: {e}"))?;
        if d.api_version.is_empty() || d.kind.is_empty() {
            return Err(format!("{at}: apiVersion and kind are required"));
        }
        if d.name.is_empty() && d.label_selector.is_none() {
            return Err(format!("{at}: name or labelSelector is required"));
        }
        out.push(d);
    }
    Ok(out)
}

/// `base` with the merge patch applied; the object's identity may not change.
pub(crate) fn merged(base: &Value, patch: Option<Value>) -> Result<Value, String> {
    let patch = patch.unwrap_or(Value::Null);
    if !patch.is_object() {
        return Err(format!("patch: {patch} is not an object"));
    }
    let mut out = base.clone();
    json_patch::merge(&mut out, &patch);
    for path in [
        "/apiVersion",
        "/kind",
        "/metadata/name",
        "/metadata/namespace",
    ] {
        if base.pointer(path) != out.pointer(path) {
            return Err(format!(
                "patch: changes {} (the object's identity)",
                path[1..].replace('/', ".")
            ));
        }
    }
    Ok(out)
}

impl WasmRule {
    /// Encode the request, call the plugin, decode and check the reply's members.
    fn call(
        &self,
        request: &InterpretRequest<&Value, &AggregatedStatusItem>,
    ) -> Result<(InterpretReply, Arc<WasmPlugin>), PluginError> {
        let plugin = self
            .resolver
            .resolve(&self.plugin)
            .map_err(|e| PluginError::failed(&self.name, bound_message(e)))?;
        let json = serde_json::to_vec(request)
            .map_err(|e| PluginError::failed(plugin.name(), e.to_string()))?;
        let reply = plugin.call_interpret(&json)?;
        let r = decode(self.op, &reply).map_err(|m| invalid(&plugin, m))?;
        Ok((r, plugin))
    }

    fn request<'a>(
        &self,
        object: Option<&'a Value>,
    ) -> InterpretRequest<&'a Value, &'a AggregatedStatusItem> {
        InterpretRequest {
            operation: self.op.as_str().to_owned(),
            object,
            observed_object: None,
            desired_replicas: None,
            status_items: None,
        }
    }
}

fn invalid(plugin: &WasmPlugin, message: String) -> PluginError {
    PluginError::InvalidOutput {
        plugin: plugin.name().to_owned(),
        message: bound_message(message),
    }
}

impl ResourceInterpreter for WasmRule {
    fn name(&self) -> &str {
        &self.name
    }

    fn hook_enabled(&self, api_version: &str, kind: &str, op: Operation) -> bool {
        op == self.op && self.target.api_version == api_version && self.target.kind == kind
    }

    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        let (r, p) = self.call(&self.request(Some(object)))?;
        let check = || -> Result<Replicas, String> {
            Ok(Replicas {
                replicas: replicas(r.replicas.unwrap_or_default(), "replicas")?,
                requirements: requirements(r.replica_requirements, "replicaRequirements")?,
            })
        };
        check().map_err(|m| invalid(&p, m))
    }

    fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        let (r, p) = self.call(&self.request(Some(object)))?;
        components(r.components.unwrap_or_default()).map_err(|m| invalid(&p, m))
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        let mut req = self.request(Some(object));
        req.desired_replicas = Some(replicas);
        let (r, p) = self.call(&req)?;
        merged(object, r.patch).map_err(|m| invalid(&p, m))
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        let mut req = self.request(Some(desired));
        req.observed_object = Some(observed);
        let (r, p) = self.call(&req)?;
        merged(desired, r.patch).map_err(|m| invalid(&p, m))
    }

    fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        let mut req = self.request(Some(object));
        req.status_items = Some(items.iter().collect());
        let (r, p) = self.call(&req)?;
        let status = match r.status {
            Some(s @ Value::Object(_)) => s,
            other => {
                return Err(invalid(
                    &p,
                    format!("status: {} is not an object", other.unwrap_or_default()),
                ));
            }
        };
        let mut out = object.clone();
        match out.as_object_mut() {
            Some(m) => {
                m.insert("status".into(), status);
                Ok(out)
            }
            None => Err(PluginError::failed(&self.name, "the object is not a map")),
        }
    }

    fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        let mut req = self.request(None);
        req.observed_object = Some(observed);
        let (r, p) = self.call(&req)?;
        match r.status {
            None | Some(Value::Null) => Ok(None),
            Some(s @ Value::Object(_)) => Ok(Some(s)),
            Some(other) => Err(invalid(
                &p,
                format!("status: {other} is not an object or null"),
            )),
        }
    }

    fn interpret_health(&self, observed: &Value) -> Result<bool, PluginError> {
        let mut req = self.request(None);
        req.observed_object = Some(observed);
        let (r, _) = self.call(&req)?;
        // `decode` checked that `healthy` is present.
        Ok(r.healthy.unwrap_or_default())
    }

    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        let (r, p) = self.call(&self.request(Some(object)))?;
        dependencies(r.dependencies.unwrap_or_default()).map_err(|m| invalid(&p, m))
    }
}
