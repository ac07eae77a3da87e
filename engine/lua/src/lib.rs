//! Karmada's Lua resource-interpreter customizations (`luaScript` rules of a
//! `ResourceInterpreterCustomization`), run the way Karmada's `luavm` runs them, in a sandbox.
//!
//! [`LuaBackend`] is the [`RuleBackend`] for the `lua` field: [`RuleBackend::compile`] parses the
//! script (syntax errors name the rule's `luaScript` field and the line), runs its top level once
//! and checks that it defines the function the operation calls (`GetReplicas`, `GetComponents`,
//! `ReviseReplica`, `Retain`, `AggregateStatus`, `ReflectStatus`, `InterpretHealth`,
//! `GetDependencies`). The interpreter it returns calls that function with Karmada's arguments
//! and converts the results as Karmada does ([`convert`] has the rules for tables and numbers).
//!
//! Every call gets a fresh Lua state ([`sandbox`]): nothing a script does survives the call.
//! A call that runs past its deadline (Karmada's: one second) fails with
//! [`PluginError::Timeout`], one that allocates past its memory cap or returns more than the output
//! budget with [`PluginError::ResourceExhausted`], a script error with [`PluginError::Failed`]
//! carrying Lua's message and line, a result of the wrong shape with
//! [`PluginError::InvalidOutput`].
//!
//! # Lua compatibility
//!
//! Karmada runs these scripts on gopher-lua (v1.1.1, a Lua 5.1 written in Go); Flotilla runs them
//! on the reference Lua 5.1. Where the two differ in what a script can see, Flotilla follows
//! gopher-lua: the library set and its restrictions, `tostring` of numbers ([`sandbox`]), how
//! values cross the boundary ([`convert`]), the `kube` module.
//!
//! One difference is left: **the order in which `pairs` and `next` visit a table's keys.**
//! gopher-lua visits the positive integer keys below 2^26 in ascending order, then every other key
//! in the order it was first stored (a key set to nil and stored again keeps its place). Lua 5.1
//! visits its array part, then its hash part in slot order, which follows the keys' hashes. A
//! script whose result depends on that order gets another result here: for example one that
//! fills a table keyed by names it computes and then appends its values to a list while walking
//! it (Karmada's own MPIJob status aggregation builds `status.conditions` this way, so its
//! condition order differs when several members report conditions of different types).
//!
//! It is not emulated, because it cannot be faithfully without changing Lua's C code:
//!
//! - Tables Flotilla makes (the arguments, the `kube` results) have no order to match: Karmada
//!   builds argument tables by ranging over Go maps, whose order Go randomises on every call, so
//!   a script that depends on `pairs` order over its arguments is not deterministic in Karmada
//!   either. Tracking their insertion order in [`convert`] would reproduce one random order.
//! - Tables the script makes are where gopher-lua's order is deterministic, and Lua 5.1 gives no
//!   way to observe their stores. A replacement `pairs`/`next` in the sandbox would need each
//!   table's insertion order; `{}` makes a table without a metatable (Lua 5.1 has no default
//!   metatable for tables), stores into it (assignments, constructors, `table.insert`) call no
//!   hook, and debug hooks see lines and instruction counts, not stores. Recording the order
//!   would take a patched VM (the table's `next` in `ltable.c`) or rewriting the script's source
//!   so that every constructor attaches a `__newindex` recorder, which still loses the order of
//!   the keys written inside the constructor itself, turns each first store of a key into a Lua
//!   call, and runs a program other than the one the user wrote.
//!
//! Results are unaffected where order cannot show: objects come out with sorted keys, arrays in
//! index order, and Karmada sorts components and dependencies itself. A script that builds a
//! list from `pairs` should sort it to give the same answer everywhere.

mod convert;
mod kube;
mod quantity;
mod sandbox;

use std::sync::Arc;

use flotilla_api::interpreter::{
    Component, CustomizationRule, CustomizationTarget, DependentObjectReference,
};
use flotilla_api::work::{AggregatedStatusItem, ReplicaRequirements};
use flotilla_core::PluginError;
use flotilla_core::interpreter::{Operation, Replicas, ResourceInterpreter, RuleBackend};
use mlua::{Lua, MultiValue, Value as LuaValue};
use serde_json::{Map, Value};

use crate::convert::{ConvertError, EmptyFields, Encoder, to_lua};
pub use crate::sandbox::Limits;
use crate::sandbox::{Fault, RunError, with_state};

/// The `lua` rule backend.
#[derive(Debug, Clone, Default)]
pub struct LuaBackend {
    limits: Limits,
}

impl LuaBackend {
    /// A backend with Karmada's one-second deadline and the default memory and output caps.
    pub fn new() -> Self {
        LuaBackend::default()
    }

    /// A backend with the given limits.
    pub fn with_limits(limits: Limits) -> Self {
        LuaBackend { limits }
    }
}

/// The Lua function Karmada calls for `op`.
pub fn function_name(op: Operation) -> &'static str {
    match op {
        Operation::InterpretReplica => "GetReplicas",
        Operation::InterpretComponent => "GetComponents",
        Operation::ReviseReplica => "ReviseReplica",
        Operation::Retain => "Retain",
        Operation::AggregateStatus => "AggregateStatus",
        Operation::InterpretStatus => "ReflectStatus",
        Operation::InterpretHealth => "InterpretHealth",
        Operation::InterpretDependency => "GetDependencies",
    }
}

/// The rule field of `op` in `spec.customizations`.
fn rule_field(op: Operation) -> &'static str {
    match op {
        Operation::InterpretReplica => "replicaResource",
        Operation::InterpretComponent => "componentResource",
        Operation::ReviseReplica => "replicaRevision",
        Operation::Retain => "retention",
        Operation::AggregateStatus => "statusAggregation",
        Operation::InterpretStatus => "statusReflection",
        Operation::InterpretHealth => "healthInterpretation",
        Operation::InterpretDependency => "dependencyInterpretation",
    }
}

/// Longest script accepted.
pub const MAX_SCRIPT_BYTES: usize = 1 << 20;

impl RuleBackend for LuaBackend {
    fn field(&self) -> &'static str {
        "lua"
    }

    fn compile(
        &self,
        name: &str,
        _target: &CustomizationTarget,
        op: Operation,
        rule: &CustomizationRule,
    ) -> Result<Arc<dyn ResourceInterpreter>, String> {
        let script = rule.lua_script.as_deref().unwrap_or_default();
        let rule = LuaRule::new(name, op, script, self.limits)?;
        Ok(Arc::new(rule))
    }
}

/// One compiled `luaScript` rule.
#[derive(Debug)]
pub struct LuaRule {
    name: String,
    op: Operation,
    chunk: String,
    script: Arc<str>,
    limits: Limits,
}

impl LuaRule {
    /// Check `script` for `op` (syntax, then that its top level runs and defines the function)
    /// and keep it.
    ///
    /// # Errors
    /// The Lua message naming `spec.customizations.<rule>.luaScript` and the line, or that the
    /// function is missing.
    pub fn new(name: &str, op: Operation, script: &str, limits: Limits) -> Result<Self, String> {
        let chunk = format!("spec.customizations.{}.luaScript", rule_field(op));
        if script.trim().is_empty() {
            return Err(format!("{chunk}: empty script"));
        }
        if script.len() > MAX_SCRIPT_BYTES {
            return Err(format!(
                "{chunk}: script is longer than {MAX_SCRIPT_BYTES} bytes"
            ));
        }
        let rule = LuaRule {
            name: name.to_owned(),
            op,
            chunk,
            script: script.into(),
            limits,
        };
        with_state(&limits, |lua| rule.load(lua).map(|_| ())).map_err(|f| match f {
            Fault::Script(m) => m,
            Fault::Timeout => format!("{}: top level ran past its deadline", rule.chunk),
            Fault::Memory | Fault::TooLarge => {
                format!("{}: top level exceeded the memory limit", rule.chunk)
            }
            Fault::Invalid(m) => m,
        })?;
        Ok(rule)
    }

    /// The operation this rule answers.
    pub fn operation(&self) -> Operation {
        self.op
    }

    /// Run the script's top level in `lua` and return the operation's function.
    fn load(&self, lua: &Lua) -> Result<mlua::Function, RunError> {
        lua.load(&*self.script)
            .set_name(format!("={}", self.chunk))
            .exec()?;
        let f = function_name(self.op);
        match lua.globals().get::<LuaValue>(f)? {
            LuaValue::Function(func) => Ok(func),
            LuaValue::Nil => {
                Err(Fault::Script(format!("{}: not found function {f}", self.chunk)).into())
            }
            other => Err(Fault::Script(format!(
                "{}: {f} is not a function: {}",
                self.chunk,
                other.type_name()
            ))
            .into()),
        }
    }

    /// Call the function with `args`, take `nret` results and convert them with `then`.
    fn call<T>(
        &self,
        args: impl FnOnce(&Lua) -> Result<Vec<LuaValue>, RunError>,
        nret: usize,
        then: impl FnOnce(&mut Output, Vec<LuaValue>) -> Result<T, RunError>,
    ) -> Result<T, PluginError> {
        with_state(&self.limits, |lua| {
            let f = self.load(lua)?;
            let args = args(lua)?;
            // Truncate to `nret` results in Lua: a script returning thousands of values would
            // otherwise need a host reference for each.
            let truncate: mlua::Function =
                lua.load(TRUNCATE).set_name("=karmada").call((f, nret))?;
            let rets: MultiValue = truncate.call(MultiValue::from_vec(args))?;
            let mut rets: Vec<LuaValue> = rets.into_vec();
            rets.resize(nret, LuaValue::Nil);
            let mut out = Output {
                encoder: Encoder::new(self.limits.output_bytes),
            };
            then(&mut out, rets)
        })
        .map_err(|f| self.error(f))
    }

    fn error(&self, f: Fault) -> PluginError {
        let plugin = self.name.clone();
        match f {
            Fault::Timeout => PluginError::Timeout { plugin },
            Fault::Memory | Fault::TooLarge => PluginError::ResourceExhausted { plugin },
            Fault::Script(m) => PluginError::Failed { plugin, message: m },
            Fault::Invalid(m) => PluginError::InvalidOutput { plugin, message: m },
        }
    }

    fn arg(lua: &Lua, v: &Value) -> Result<LuaValue, RunError> {
        to_lua(lua, v).map_err(|e| match e {
            ConvertError::Lua(e) => RunError::Lua(e),
            other => Fault::Invalid(format!("input: {other}")).into(),
        })
    }
}

impl LuaRule {
    /// AggregateStatus with Karmada's distinction between no list (`nil` in Lua: no member has
    /// reported) and an empty one (an empty table), which `karmadactl interpret` makes with a
    /// `--status-file` holding no items.
    ///
    /// # Errors
    /// As [`ResourceInterpreter::aggregate_status`].
    pub fn aggregate_status_items(
        &self,
        object: &Value,
        items: Option<&[AggregatedStatusItem]>,
    ) -> Result<Value, PluginError> {
        self.call(
            |lua| {
                let items = match items {
                    None => LuaValue::Nil,
                    Some(items) => {
                        let v = serde_json::to_value(items)
                            .map_err(|e| invalid(format!("status items: {e}")))?;
                        LuaRule::arg(lua, &v)?
                    }
                };
                Ok(vec![LuaRule::arg(lua, object)?, items])
            },
            1,
            |out, rets| unstructured(out.table(&rets[0], "requires", true, &[])?),
        )
    }
}

/// Calls the function with the arguments and keeps its first one or two results.
const TRUNCATE: &str = r#"
local f, n = ...
if n == 2 then
  return function(...) local a, b = f(...) return a, b end
end
return function(...) local a = f(...) return a end
"#;

/// Converts results within the output budget.
struct Output {
    encoder: Encoder,
}

impl Output {
    /// A table result as JSON, empty tables fixed against `references`.
    fn table(
        &mut self,
        v: &LuaValue,
        what: &str,
        is_struct: bool,
        references: &[&Value],
    ) -> Result<Value, RunError> {
        if !matches!(v, LuaValue::Table(_)) {
            return Err(Fault::Invalid(format!(
                "expect the returned {what} type is table but got {}",
                v.type_name()
            ))
            .into());
        }
        let encoded = self.encoder.encode(v).map_err(|e| match e {
            ConvertError::TooLarge { .. } => Fault::TooLarge,
            ConvertError::Lua(e) => Fault::from(e),
            other => Fault::Invalid(other.to_string()),
        })?;
        Ok(EmptyFields::of(references).fix(encoded, is_struct))
    }
}

/// An `*unstructured.Unstructured` result: an object with a kind.
fn unstructured(v: Value) -> Result<Value, RunError> {
    match &v {
        Value::Object(m)
            if m.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| !k.is_empty()) =>
        {
            Ok(v)
        }
        Value::Object(_) => {
            Err(Fault::Invalid("Object 'Kind' is missing in the result".into()).into())
        }
        _ => Err(Fault::Invalid(
            "json unmarshal obj failed: cannot unmarshal array into an object".into(),
        )
        .into()),
    }
}

fn invalid(m: impl Into<String>) -> RunError {
    Fault::Invalid(m.into()).into()
}

/// Keep the fields Go's decoder would read into a struct with `fields`.
fn known_fields(v: &Value, fields: &[&str], what: &str) -> Result<Map<String, Value>, RunError> {
    let Value::Object(m) = v else {
        return Err(invalid(format!(
            "json unmarshal obj failed: cannot unmarshal {} into Go value of type {what}",
            json_kind(v)
        )));
    };
    Ok(m.iter()
        .filter(|(k, v)| fields.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `workv1alpha2.ReplicaRequirements` from a converted table; quantities in canonical form.
fn requirements(v: &Value) -> Result<ReplicaRequirements, RunError> {
    let mut m = known_fields(
        v,
        &[
            "nodeClaim",
            "resourceRequest",
            "namespace",
            "priorityClassName",
        ],
        "ReplicaRequirements",
    )?;
    if let Some(claim) = m.get_mut("nodeClaim") {
        let c = known_fields(
            claim,
            &["hardNodeAffinity", "nodeSelector", "tolerations"],
            "NodeClaim",
        )?;
        *claim = Value::Object(c);
    }
    if let Some(rr) = m.get_mut("resourceRequest") {
        let Value::Object(list) = rr else {
            return Err(invalid("resourceRequest: expected a map of quantities"));
        };
        for (k, q) in list.iter_mut() {
            let text = match q {
                Value::String(s) => s.trim().to_owned(),
                Value::Number(n) => n.to_string(),
                _ => return Err(invalid(format!("resourceRequest.{k}: expected a quantity"))),
            };
            let parsed = quantity::Quantity::parse(&text)
                .map_err(|e| invalid(format!("resourceRequest.{k}: {e}")))?;
            *q = Value::String(parsed.canonical());
        }
    }
    serde_json::from_value(Value::Object(m))
        .map_err(|e| invalid(format!("json unmarshal obj failed: {e}")))
}

/// A JSON number as Go decodes it into an `int32` field.
fn int32(v: &Value, field: &str) -> Result<i32, RunError> {
    v.as_i64()
        .and_then(|i| i32::try_from(i).ok())
        .ok_or_else(|| {
            invalid(format!(
                "cannot unmarshal {v} into Go struct field {field} of type int32"
            ))
        })
}

fn components(v: &Value) -> Result<Vec<Component>, RunError> {
    let Value::Array(items) = v else {
        return Err(invalid(
            "failed to convert lua table for components: json unmarshal obj failed: cannot unmarshal object into Go value of type []v1alpha2.Component",
        ));
    };
    items
        .iter()
        .map(|c| {
            let m = known_fields(c, &["name", "replicas", "replicaRequirements"], "Component")?;
            Ok(Component {
                name: match m.get("name") {
                    None => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(o) => {
                        return Err(invalid(format!(
                            "Component.name: cannot unmarshal {} into string",
                            json_kind(o)
                        )));
                    }
                },
                replicas: m
                    .get("replicas")
                    .map(|r| int32(r, "Component.replicas"))
                    .transpose()?
                    .unwrap_or(0),
                replica_requirements: m.get("replicaRequirements").map(requirements).transpose()?,
            })
        })
        .collect()
}

fn dependencies(v: &Value) -> Result<Vec<DependentObjectReference>, RunError> {
    let Value::Array(items) = v else {
        return Err(invalid(
            "json unmarshal obj failed: cannot unmarshal object into Go value of type []v1alpha1.DependentObjectReference",
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, d) in items.iter().enumerate() {
        let mut m = known_fields(
            d,
            &["apiVersion", "kind", "namespace", "name", "labelSelector"],
            "DependentObjectReference",
        )?;
        if let Some(sel) = m.get_mut("labelSelector") {
            let mut s = known_fields(sel, &["matchLabels", "matchExpressions"], "LabelSelector")?;
            if let Some(Value::Array(exprs)) = s.get_mut("matchExpressions") {
                for e in exprs.iter_mut() {
                    *e = Value::Object(known_fields(
                        e,
                        &["key", "operator", "values"],
                        "LabelSelectorRequirement",
                    )?);
                }
            }
            *sel = Value::Object(s);
        }
        let dep: DependentObjectReference = serde_json::from_value(Value::Object(m))
            .map_err(|e| invalid(format!("json unmarshal obj failed: {e}")))?;
        // validation.VerifyDependencies
        let at = format!("dependencies[{i}]");
        if dep.api_version.is_empty() {
            return Err(invalid(format!(
                "{at}.apiVersion: Invalid value: \"\": missing required apiVersion"
            )));
        }
        if dep.kind.is_empty() {
            return Err(invalid(format!(
                "{at}.kind: Invalid value: \"\": missing required kind"
            )));
        }
        if dep.name.is_empty() && dep.label_selector.is_none() {
            return Err(invalid(format!(
                "{at}: dependency can not leave name and labelSelector all empty"
            )));
        }
        out.push(dep);
    }
    // ConfigurableInterpreter.GetDependencies: a set, sorted.
    out.sort_by(|a, b| {
        (&a.api_version, &a.kind, &a.namespace, &a.name).cmp(&(
            &b.api_version,
            &b.kind,
            &b.namespace,
            &b.name,
        ))
    });
    out.dedup();
    Ok(out)
}

impl ResourceInterpreter for LuaRule {
    fn name(&self) -> &str {
        &self.name
    }

    fn hook_enabled(&self, _api_version: &str, _kind: &str, op: Operation) -> bool {
        op == self.op
    }

    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        self.call(
            |lua| Ok(vec![LuaRule::arg(lua, object)?]),
            2,
            |out, rets| {
                let replicas = match &rets[0] {
                    // Go's int32(float64): truncation.
                    #[allow(clippy::cast_possible_truncation)]
                    LuaValue::Number(n) => *n as i32,
                    #[allow(clippy::cast_possible_truncation)]
                    LuaValue::Integer(i) => *i as i32,
                    other => {
                        return Err(invalid(format!(
                            "result type {} is not number",
                            other.type_name()
                        )));
                    }
                };
                let requirements = match &rets[1] {
                    LuaValue::Nil => None,
                    v => Some(requirements(&out.table(v, "requires", true, &[])?)?),
                };
                Ok(Replicas {
                    replicas,
                    requirements,
                })
            },
        )
    }

    fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        self.call(
            |lua| Ok(vec![LuaRule::arg(lua, object)?]),
            1,
            |out, rets| match &rets[0] {
                LuaValue::Nil => Ok(Vec::new()),
                v => components(&out.table(v, "components", false, &[])?),
            },
        )
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        self.call(
            |lua| {
                #[allow(clippy::cast_precision_loss)]
                let n = LuaValue::Number(replicas as f64);
                Ok(vec![LuaRule::arg(lua, object)?, n])
            },
            1,
            |out, rets| unstructured(out.table(&rets[0], "requires", true, &[object])?),
        )
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        self.call(
            |lua| {
                Ok(vec![
                    LuaRule::arg(lua, desired)?,
                    LuaRule::arg(lua, observed)?,
                ])
            },
            1,
            |out, rets| {
                unstructured(out.table(&rets[0], "requires", true, &[desired, observed])?)
            },
        )
    }

    fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        // The controllers read the items back from the binding, where an empty list is omitted:
        // the script sees nil, as in Karmada.
        self.aggregate_status_items(object, (!items.is_empty()).then_some(items))
    }

    fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        self.call(
            |lua| Ok(vec![LuaRule::arg(lua, observed)?]),
            1,
            |out, rets| Ok(Some(out.table(&rets[0], "replica", true, &[])?)),
        )
    }

    fn interpret_health(&self, observed: &Value) -> Result<bool, PluginError> {
        self.call(
            |lua| Ok(vec![LuaRule::arg(lua, observed)?]),
            1,
            |_, rets| match &rets[0] {
                LuaValue::Boolean(b) => Ok(*b),
                other => Err(invalid(format!(
                    "result type {} is not bool",
                    other.type_name()
                ))),
            },
        )
    }

    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        self.call(
            |lua| Ok(vec![LuaRule::arg(lua, object)?]),
            1,
            |out, rets| dependencies(&out.table(&rets[0], "requires", false, &[])?),
        )
    }
}
