//! The resource interpreter extension point: how the engine learns a kind's replicas, components,
//! status, health and dependencies (Karmada `pkg/resourceinterpreter`).
//!
//! Every backend — the built-in native interpreters, `ResourceInterpreterCustomization` rules in
//! Lua, CEL or Wasm, interpreter webhooks — implements [`ResourceInterpreter`]. An
//! [`Interpreters`] chain resolves each call in Karmada's order: the first interpreter whose
//! [`ResourceInterpreter::hook_enabled`] says yes for the object's kind and the operation answers
//! (customizations, then webhooks, then third-party defaults, then the native defaults); when none
//! does, the operation's Karmada default applies (no replicas, object unchanged, whole `status`
//! reflected, no health verdict, no dependencies).
//!
//! A *fault* (script error, timeout, malformed reply) is `Err(PluginError)`; callers surface it on
//! the binding or Work (condition + Event) and never fall back silently to another interpreter.

use std::sync::Arc;

use flotilla_api::interpreter::{
    Component, CustomizationRule, CustomizationRules, CustomizationTarget,
    DependentObjectReference, ResourceInterpreterCustomization,
};
use flotilla_api::work::{AggregatedStatusItem, ReplicaRequirements};
use serde_json::Value;

use crate::error::PluginError;

/// Karmada's interpreter operations (`InterpreterOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// Replicas and per-replica requirements (`GetReplicas`).
    InterpretReplica,
    /// Components of a multi-template workload (`GetComponents`).
    InterpretComponent,
    /// Set the replicas a cluster receives (`ReviseReplica`).
    ReviseReplica,
    /// Keep member-side fields when updating a member copy (`Retain`).
    Retain,
    /// Fold member statuses into the template's status (`AggregateStatus`).
    AggregateStatus,
    /// The status to report from a member copy (`ReflectStatus`).
    InterpretStatus,
    /// Whether a member copy is healthy (`InterpretHealth`).
    InterpretHealth,
    /// Objects the workload depends on (`GetDependencies`).
    InterpretDependency,
}

impl Operation {
    /// Every operation, in Karmada's declaration order.
    pub const ALL: [Operation; 8] = [
        Operation::InterpretReplica,
        Operation::InterpretComponent,
        Operation::ReviseReplica,
        Operation::Retain,
        Operation::AggregateStatus,
        Operation::InterpretStatus,
        Operation::InterpretHealth,
        Operation::InterpretDependency,
    ];

    /// Karmada's name (`InterpretReplica`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::InterpretReplica => "InterpretReplica",
            Operation::InterpretComponent => "InterpretComponent",
            Operation::ReviseReplica => "ReviseReplica",
            Operation::Retain => "Retain",
            Operation::AggregateStatus => "AggregateStatus",
            Operation::InterpretStatus => "InterpretStatus",
            Operation::InterpretHealth => "InterpretHealth",
            Operation::InterpretDependency => "InterpretDependency",
        }
    }

    /// Parse a name case-insensitively (as `karmadactl interpret --operation` does).
    pub fn parse(s: &str) -> Option<Operation> {
        Operation::ALL
            .into_iter()
            .find(|op| op.as_str().eq_ignore_ascii_case(s))
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What InterpretReplica returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replicas {
    /// Desired replicas of the workload.
    pub replicas: i32,
    /// Requirements of one replica, when the kind has a pod template.
    pub requirements: Option<ReplicaRequirements>,
}

/// One interpreter backend. Methods other than [`name`](Self::name) and
/// [`hook_enabled`](Self::hook_enabled) are only called for operations the hook enables; the
/// defaults report the operation as unsupported.
pub trait ResourceInterpreter: Send + Sync + 'static {
    /// Name used in errors, Events and metrics (e.g. the customization's name).
    fn name(&self) -> &str;

    /// Whether this interpreter answers `op` for objects of `api_version`/`kind`.
    fn hook_enabled(&self, api_version: &str, kind: &str, op: Operation) -> bool;

    /// InterpretReplica.
    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        let _ = object;
        Err(self.unsupported(Operation::InterpretReplica))
    }

    /// InterpretComponent.
    fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        let _ = object;
        Err(self.unsupported(Operation::InterpretComponent))
    }

    /// ReviseReplica: `object` with its replicas set to `replicas`.
    fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        let _ = (object, replicas);
        Err(self.unsupported(Operation::ReviseReplica))
    }

    /// Retain: `desired` (what the control plane renders) with the member-side fields of
    /// `observed` (the copy in the member) kept.
    fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        let _ = (desired, observed);
        Err(self.unsupported(Operation::Retain))
    }

    /// AggregateStatus: `object` (the template) with its status folded from `items`.
    fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        let _ = (object, items);
        Err(self.unsupported(Operation::AggregateStatus))
    }

    /// InterpretStatus: the status to collect from a member copy (`None`: nothing to report).
    fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        let _ = observed;
        Err(self.unsupported(Operation::InterpretStatus))
    }

    /// InterpretHealth.
    fn interpret_health(&self, observed: &Value) -> Result<bool, PluginError> {
        let _ = observed;
        Err(self.unsupported(Operation::InterpretHealth))
    }

    /// InterpretDependency.
    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        let _ = object;
        Err(self.unsupported(Operation::InterpretDependency))
    }

    /// The error for an operation this interpreter was asked for but does not implement.
    fn unsupported(&self, op: Operation) -> PluginError {
        PluginError::failed(self.name(), format!("{op} is not implemented"))
    }
}

/// The `apiVersion` and `kind` of an object (empty strings when absent).
fn gvk(object: &Value) -> (&str, &str) {
    let s = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    (s("apiVersion"), s("kind"))
}

/// An ordered interpreter chain: the first interpreter whose hook is enabled answers.
///
/// Cheap to clone (shared `Arc`s); controllers keep one per generation of the customizations and
/// swap it whole when they change.
#[derive(Clone, Default)]
pub struct Interpreters {
    chain: Vec<Arc<dyn ResourceInterpreter>>,
}

impl std::fmt::Debug for Interpreters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.chain.iter().map(|i| i.name()))
            .finish()
    }
}

impl Interpreters {
    /// A chain consulted in the given order (customizations and webhooks first, native defaults
    /// last).
    pub fn new(chain: Vec<Arc<dyn ResourceInterpreter>>) -> Self {
        Interpreters { chain }
    }

    /// The interpreters, in resolution order.
    pub fn chain(&self) -> &[Arc<dyn ResourceInterpreter>] {
        &self.chain
    }

    /// The interpreter that answers `op` for `object`'s kind, if any.
    pub fn resolve(&self, object: &Value, op: Operation) -> Option<&dyn ResourceInterpreter> {
        let (api_version, kind) = gvk(object);
        self.resolve_kind(api_version, kind, op)
    }

    /// The interpreter that answers `op` for `api_version`/`kind`, if any.
    pub fn resolve_kind(
        &self,
        api_version: &str,
        kind: &str,
        op: Operation,
    ) -> Option<&dyn ResourceInterpreter> {
        self.chain
            .iter()
            .find(|i| i.hook_enabled(api_version, kind, op))
            .map(AsRef::as_ref)
    }

    /// InterpretReplica; kinds nobody interprets have no replicas.
    pub fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        match self.resolve(object, Operation::InterpretReplica) {
            Some(i) => i.get_replicas(object),
            None => Ok(Replicas::default()),
        }
    }

    /// InterpretComponent; kinds nobody interprets have no components.
    pub fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        match self.resolve(object, Operation::InterpretComponent) {
            Some(i) => i.get_components(object),
            None => Ok(Vec::new()),
        }
    }

    /// ReviseReplica; kinds nobody interprets are returned unchanged.
    pub fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        match self.resolve(object, Operation::ReviseReplica) {
            Some(i) => i.revise_replica(object, replicas),
            None => Ok(object.clone()),
        }
    }

    /// Retain; kinds nobody interprets keep nothing from the member.
    pub fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        match self.resolve(desired, Operation::Retain) {
            Some(i) => i.retain(desired, observed),
            None => Ok(desired.clone()),
        }
    }

    /// AggregateStatus; kinds nobody interprets are returned unchanged.
    pub fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        match self.resolve(object, Operation::AggregateStatus) {
            Some(i) => i.aggregate_status(object, items),
            None => Ok(object.clone()),
        }
    }

    /// InterpretStatus; kinds nobody interprets reflect their whole `status`.
    pub fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        match self.resolve(observed, Operation::InterpretStatus) {
            Some(i) => i.reflect_status(observed),
            None => Ok(observed.get("status").cloned()),
        }
    }

    /// InterpretHealth; `None` when nobody interprets the kind (Karmada's work status
    /// controller then reports the object `Healthy`; application failover skips such kinds).
    pub fn interpret_health(&self, observed: &Value) -> Result<Option<bool>, PluginError> {
        match self.resolve(observed, Operation::InterpretHealth) {
            Some(i) => i.interpret_health(observed).map(Some),
            None => Ok(None),
        }
    }

    /// InterpretDependency; kinds nobody interprets have no dependencies.
    pub fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        match self.resolve(object, Operation::InterpretDependency) {
            Some(i) => i.get_dependencies(object),
            None => Ok(Vec::new()),
        }
    }
}

/// A program backend for customization rules (`lua`, `cel`, `wasm`): compiles the rule of one
/// operation into an interpreter that answers that operation for the customization's target.
pub trait RuleBackend: Send + Sync + 'static {
    /// The rule field this backend serves: `"lua"` (`luaScript`), `"cel"` or `"wasm"`.
    fn field(&self) -> &'static str;

    /// Compile `rule`'s program for `op`. `name` is the customization's name (for errors).
    ///
    /// # Errors
    /// A message naming what is wrong (for Lua: the script's line), shown on admission and in
    /// the customization's status.
    fn compile(
        &self,
        name: &str,
        target: &CustomizationTarget,
        op: Operation,
        rule: &CustomizationRule,
    ) -> Result<Arc<dyn ResourceInterpreter>, String>;
}

/// Which program field of a rule is set, as the name of the backend that serves it.
///
/// # Errors
/// None or more than one of `luaScript`, `cel`, `wasm` is set.
pub fn rule_field(rule: &CustomizationRule) -> Result<&'static str, String> {
    let set: Vec<&'static str> = [
        ("lua", rule.lua_script.is_some()),
        ("cel", rule.cel.is_some()),
        ("wasm", rule.wasm.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, on)| on.then_some(f))
    .collect();
    match set.as_slice() {
        [one] => Ok(one),
        [] => Err("one of luaScript, cel, wasm is required".into()),
        _ => Err("only one of luaScript, cel, wasm may be set".into()),
    }
}

/// The rule of `rules` for `op` and its field name in `spec.customizations`.
pub fn rule_for(
    rules: &CustomizationRules,
    op: Operation,
) -> (&'static str, Option<&CustomizationRule>) {
    match op {
        Operation::InterpretReplica => ("replicaResource", rules.replica_resource.as_ref()),
        Operation::InterpretComponent => ("componentResource", rules.component_resource.as_ref()),
        Operation::ReviseReplica => ("replicaRevision", rules.replica_revision.as_ref()),
        Operation::Retain => ("retention", rules.retention.as_ref()),
        Operation::AggregateStatus => ("statusAggregation", rules.status_aggregation.as_ref()),
        Operation::InterpretStatus => ("statusReflection", rules.status_reflection.as_ref()),
        Operation::InterpretHealth => {
            ("healthInterpretation", rules.health_interpretation.as_ref())
        }
        Operation::InterpretDependency => (
            "dependencyInterpretation",
            rules.dependency_interpretation.as_ref(),
        ),
    }
}

/// A compiled `ResourceInterpreterCustomization`: one interpreter per operation it customizes,
/// each from the backend its rule names; answers only for its target kind.
pub struct Customization {
    name: String,
    target: CustomizationTarget,
    ops: std::collections::BTreeMap<Operation, Arc<dyn ResourceInterpreter>>,
}

impl std::fmt::Debug for Customization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Customization")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("operations", &self.ops.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Customization {
    /// Compile every rule of `ric` with the backend its field names.
    ///
    /// # Errors
    /// `spec.customizations.<rule>: <message>` for the first rule that does not compile or names
    /// a backend not in `backends`.
    pub fn compile(
        ric: &ResourceInterpreterCustomization,
        backends: &[&dyn RuleBackend],
    ) -> Result<Customization, String> {
        let target = &ric.spec.target;
        if target.api_version.is_empty() || target.kind.is_empty() {
            return Err("spec.target: apiVersion and kind are required".into());
        }
        let name = ric.metadata.name.as_deref().unwrap_or_default();
        let mut ops = std::collections::BTreeMap::new();
        for op in Operation::ALL {
            let (field, Some(rule)) = rule_for(&ric.spec.customizations, op) else {
                continue;
            };
            let at = |m: String| format!("spec.customizations.{field}: {m}");
            let backend_field = rule_field(rule).map_err(at)?;
            let backend = backends
                .iter()
                .find(|b| b.field() == backend_field)
                .ok_or_else(|| at(format!("{backend_field} rules are not supported here")))?;
            ops.insert(op, backend.compile(name, target, op, rule).map_err(at)?);
        }
        Ok(Customization {
            name: name.to_owned(),
            target: target.clone(),
            ops,
        })
    }

    /// The kind this customization applies to.
    pub fn target(&self) -> &CustomizationTarget {
        &self.target
    }

    /// The operations it customizes.
    pub fn operations(&self) -> impl Iterator<Item = Operation> + '_ {
        self.ops.keys().copied()
    }

    fn op(&self, op: Operation) -> Result<&dyn ResourceInterpreter, PluginError> {
        self.ops
            .get(&op)
            .map(AsRef::as_ref)
            .ok_or_else(|| self.unsupported(op))
    }
}

impl ResourceInterpreter for Customization {
    fn name(&self) -> &str {
        &self.name
    }
    fn hook_enabled(&self, api_version: &str, kind: &str, op: Operation) -> bool {
        self.target.api_version == api_version
            && self.target.kind == kind
            && self.ops.contains_key(&op)
    }
    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        self.op(Operation::InterpretReplica)?.get_replicas(object)
    }
    fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        self.op(Operation::InterpretComponent)?
            .get_components(object)
    }
    fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        self.op(Operation::ReviseReplica)?
            .revise_replica(object, replicas)
    }
    fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        self.op(Operation::Retain)?.retain(desired, observed)
    }
    fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        self.op(Operation::AggregateStatus)?
            .aggregate_status(object, items)
    }
    fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        self.op(Operation::InterpretStatus)?
            .reflect_status(observed)
    }
    fn interpret_health(&self, observed: &Value) -> Result<bool, PluginError> {
        self.op(Operation::InterpretHealth)?
            .interpret_health(observed)
    }
    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        self.op(Operation::InterpretDependency)?
            .get_dependencies(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(&'static str, i32);
    impl ResourceInterpreter for Fixed {
        fn name(&self) -> &str {
            self.0
        }
        fn hook_enabled(&self, _: &str, kind: &str, op: Operation) -> bool {
            kind == "Thing" && op == Operation::InterpretReplica
        }
        fn get_replicas(&self, _: &Value) -> Result<Replicas, PluginError> {
            Ok(Replicas {
                replicas: self.1,
                requirements: None,
            })
        }
    }

    #[test]
    fn first_enabled_interpreter_answers_and_defaults_apply_otherwise() {
        let chain = Interpreters::new(vec![
            Arc::new(Fixed("custom", 7)),
            Arc::new(Fixed("native", 1)),
        ]);
        let thing = serde_json::json!({"apiVersion": "x/v1", "kind": "Thing", "status": {"a": 1}});
        assert_eq!(chain.get_replicas(&thing).unwrap().replicas, 7);
        assert_eq!(
            chain
                .resolve(&thing, Operation::InterpretReplica)
                .unwrap()
                .name(),
            "custom"
        );
        let other = serde_json::json!({"apiVersion": "x/v1", "kind": "Other", "status": {"a": 1}});
        assert_eq!(chain.get_replicas(&other).unwrap(), Replicas::default());
        assert_eq!(
            chain.reflect_status(&other).unwrap(),
            Some(serde_json::json!({"a": 1}))
        );
        assert_eq!(chain.interpret_health(&other).unwrap(), None);
        assert_eq!(chain.retain(&other, &thing).unwrap(), other);
        assert!(chain.get_dependencies(&other).unwrap().is_empty());
    }

    struct Const;
    impl RuleBackend for Const {
        fn field(&self) -> &'static str {
            "cel"
        }
        fn compile(
            &self,
            _: &str,
            _: &CustomizationTarget,
            op: Operation,
            _: &CustomizationRule,
        ) -> Result<Arc<dyn ResourceInterpreter>, String> {
            assert_eq!(op, Operation::InterpretReplica);
            Ok(Arc::new(Fixed("rule", 4)))
        }
    }

    #[test]
    fn customization_dispatches_per_operation_and_names_bad_rules() {
        let mut ric: ResourceInterpreterCustomization = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "things"},
            "spec": {"target": {"apiVersion": "x/v1", "kind": "Thing"},
                     "customizations": {"replicaResource": {"cel": {"replicas": "1"}}}}
        }))
        .unwrap();
        let c = Customization::compile(&ric, &[&Const]).unwrap();
        assert!(c.hook_enabled("x/v1", "Thing", Operation::InterpretReplica));
        assert!(!c.hook_enabled("x/v1", "Thing", Operation::Retain));
        assert!(!c.hook_enabled("x/v2", "Thing", Operation::InterpretReplica));
        assert_eq!(c.get_replicas(&Value::Null).unwrap().replicas, 4);
        ric.spec.customizations.retention = Some(CustomizationRule {
            lua_script: Some("x".into()),
            ..Default::default()
        });
        assert_eq!(
            Customization::compile(&ric, &[&Const]).unwrap_err(),
            "spec.customizations.retention: lua rules are not supported here"
        );
        ric.spec.customizations.retention = Some(CustomizationRule::default());
        assert_eq!(
            Customization::compile(&ric, &[&Const]).unwrap_err(),
            "spec.customizations.retention: one of luaScript, cel, wasm is required"
        );
    }

    #[test]
    fn operation_names_parse_case_insensitively() {
        for op in Operation::ALL {
            assert_eq!(Operation::parse(&op.as_str().to_lowercase()), Some(op));
        }
        assert_eq!(
            Operation::parse("interpretstatus"),
            Some(Operation::InterpretStatus)
        );
        assert_eq!(Operation::parse("nope"), None);
    }
}
