//! Resource-interpreter customizations in CEL: the `cel` field of a
//! `ResourceInterpreterCustomization` rule (Flotilla's addition beside Karmada's `luaScript`).
//!
//! A rule's `cel` is a map from *output names* to CEL expressions. Each operation has its own
//! variables and outputs; a name the operation does not know, a missing required output, an
//! expression that does not parse (the error names the token and column), is ill-typed (an
//! unknown variable, or a result of the wrong type) or is too costly is refused when the
//! customization is compiled, so on admission.
//!
//! | rule (operation) | variables | outputs |
//! |---|---|---|
//! | `replicaResource` (InterpretReplica) | `object` | `replicas` (int, required); `requirements` (map: `nodeClaim`, `resourceRequest`, `namespace`, `priorityClassName`; optional) |
//! | `componentResource` (InterpretComponent) | `object` | `components` (list of `{name, replicas, replicaRequirements?}`) |
//! | `replicaRevision` (ReviseReplica) | `object`, `desiredReplicas` (int) | `patch` (map: a JSON merge patch applied to `object`) |
//! | `retention` (Retain) | `desiredObject`, `observedObject` | `patch` (map: a JSON merge patch applied to `desiredObject`) |
//! | `statusAggregation` (AggregateStatus) | `object`, `statusItems` (list of `{clusterName, status, applied, appliedMessage, health}`) | `status` (map: the template's new `status`) |
//! | `statusReflection` (InterpretStatus) | `observedObject` | `status` (map, or `null` for nothing to report) |
//! | `healthInterpretation` (InterpretHealth) | `observedObject` | `healthy` (bool) |
//! | `dependencyInterpretation` (InterpretDependency) | `object` | `dependencies` (list of `{apiVersion, kind, namespace?, name?, labelSelector?}`) |
//!
//! For example:
//!
//! ```yaml
//! replicaResource:
//!   cel:
//!     replicas: "object.spec.?replicas.orValue(1)"
//!     requirements: "{'resourceRequest': object.spec.template.spec.containers[0].resources.requests}"
//! replicaRevision:
//!   cel:
//!     patch: "{'spec': {'replicas': desiredReplicas}}"
//! healthInterpretation:
//!   cel:
//!     healthy: "observedObject.status.?readyReplicas.orValue(0) == observedObject.spec.replicas"
//! ```
//!
//! Why merge patches for ReviseReplica and Retain: the expression says only what changes (a CEL
//! expression cannot update a deep field of a map in place), and the host applies it
//! (RFC 7386: maps merge, `null` deletes a key, anything else replaces). The result must keep the
//! object's `apiVersion`, `kind`, `metadata.name` and `metadata.namespace`.
//!
//! Bounds are the [`Engine`]'s: the cost bound of every expression is checked at compile time and,
//! at the actual input sizes, before each evaluation; inputs are capped in size and depth; one
//! call (all of a rule's expressions) has [`Limits::deadline`](crate::Limits) of wall-clock time.
//! Every result is checked (types, `replicas` in `0..=2147483647`, required fields, no unknown
//! fields in components and dependencies) and a bad one is [`PluginError::InvalidOutput`].

use std::sync::Arc;
use std::time::Instant;

use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use flotilla_api::interpreter::{
    Component, CustomizationRule, CustomizationTarget, DependentObjectReference,
};
use flotilla_api::work::{AggregatedStatusItem, ReplicaRequirements};
use flotilla_core::PluginError;
use flotilla_core::expression::{ExpressionError, ExpressionErrorKind};
use flotilla_core::interpreter::{Operation, Replicas, ResourceInterpreter, RuleBackend};
use serde_json::{Map, Value};

use crate::check::Ty;
use crate::convert::Sizes;
use crate::engine::{Engine, Program};

/// Most components or dependencies a rule may return.
pub const MAX_ITEMS: usize = 10_000;

/// The `cel` rule backend. Cheap to share; compiled programs are cached by the [`Engine`].
#[derive(Debug, Clone)]
pub struct CelRuleBackend {
    engine: Arc<Engine>,
}

impl CelRuleBackend {
    /// A backend evaluating with `engine` (its limits and program cache).
    pub fn new(engine: Arc<Engine>) -> Self {
        CelRuleBackend { engine }
    }
}

impl Default for CelRuleBackend {
    fn default() -> Self {
        CelRuleBackend::new(Arc::new(Engine::default()))
    }
}

/// The static type an output must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Int,
    Bool,
    Map,
    MapOrNull,
    List,
}

impl Want {
    fn accepts(self, ty: &Ty) -> bool {
        match (self, ty) {
            (_, Ty::Dyn) => true,
            (Want::Int, t) => matches!(t, Ty::Int | Ty::Uint),
            (Want::Bool, t) => *t == Ty::Bool,
            (Want::Map, t) => matches!(t, Ty::Map(..)),
            (Want::MapOrNull, t) => matches!(t, Ty::Map(..) | Ty::Null),
            (Want::List, t) => matches!(t, Ty::List(_)),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Want::Int => "int",
            Want::Bool => "bool",
            Want::Map => "a map",
            Want::MapOrNull => "a map or null",
            Want::List => "a list",
        }
    }
}

/// One output of an operation: its name, type and whether it is required.
type Output = (&'static str, Want, bool);

/// What an operation's expressions see and must produce.
struct Signature {
    variables: Vec<(&'static str, Ty)>,
    outputs: &'static [Output],
}

fn signature(op: Operation) -> Signature {
    let dyn_ = |n: &'static str| (n, Ty::Dyn);
    let (variables, outputs): (Vec<(&'static str, Ty)>, &'static [Output]) = match op {
        Operation::InterpretReplica => (
            vec![dyn_("object")],
            &[
                ("replicas", Want::Int, true),
                ("requirements", Want::MapOrNull, false),
            ],
        ),
        Operation::InterpretComponent => {
            (vec![dyn_("object")], &[("components", Want::List, true)])
        }
        Operation::ReviseReplica => (
            vec![dyn_("object"), ("desiredReplicas", Ty::Int)],
            &[("patch", Want::Map, true)],
        ),
        Operation::Retain => (
            vec![dyn_("desiredObject"), dyn_("observedObject")],
            &[("patch", Want::Map, true)],
        ),
        Operation::AggregateStatus => (
            vec![dyn_("object"), ("statusItems", Ty::List(Box::new(Ty::Dyn)))],
            &[("status", Want::Map, true)],
        ),
        Operation::InterpretStatus => (
            vec![dyn_("observedObject")],
            &[("status", Want::MapOrNull, true)],
        ),
        Operation::InterpretHealth => (
            vec![dyn_("observedObject")],
            &[("healthy", Want::Bool, true)],
        ),
        Operation::InterpretDependency => {
            (vec![dyn_("object")], &[("dependencies", Want::List, true)])
        }
    };
    Signature { variables, outputs }
}

fn list(names: impl Iterator<Item = &'static str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

impl RuleBackend for CelRuleBackend {
    fn field(&self) -> &'static str {
        "cel"
    }

    fn compile(
        &self,
        name: &str,
        target: &CustomizationTarget,
        op: Operation,
        rule: &CustomizationRule,
    ) -> Result<Arc<dyn ResourceInterpreter>, String> {
        let exprs = rule.cel.as_ref().ok_or("cel is not set")?;
        let sig = signature(op);
        for key in exprs.keys() {
            if !sig.outputs.iter().any(|(n, _, _)| n == key) {
                return Err(format!(
                    "cel: unknown expression {key:?}; {op} takes {}",
                    list(sig.outputs.iter().map(|o| o.0))
                ));
            }
        }
        let scope = format!("interpreter/{op}");
        let mut programs = Vec::with_capacity(sig.outputs.len());
        for &(output, want, required) in sig.outputs {
            let source = match exprs.get(output) {
                None if required => {
                    return Err(format!("cel.{output}: required for {op}"));
                }
                None => continue,
                Some(Value::String(s)) => s,
                Some(other) => {
                    return Err(format!(
                        "cel.{output}: must be a string holding a CEL expression, not {}",
                        json_kind(other)
                    ));
                }
            };
            let program = self
                .engine
                .compile_in(&scope, &sig.variables, source)
                .map_err(|e| {
                    let vars = list(sig.variables.iter().map(|v| v.0));
                    if e.kind == ExpressionErrorKind::Type && e.message.contains("undeclared") {
                        format!(
                            "cel.{output}: {} ({op} has the variables {vars})",
                            e.message
                        )
                    } else {
                        format!("cel.{output}: {}", e.message)
                    }
                })?;
            if !want.accepts(program.ty()) {
                return Err(format!(
                    "cel.{output}: type error: must evaluate to {}, but evaluates to {}",
                    want.name(),
                    format!("{:?}", program.ty()).to_lowercase()
                ));
            }
            programs.push((output, program));
        }
        Ok(Arc::new(CelRule {
            name: name.to_owned(),
            target: target.clone(),
            op,
            engine: Arc::clone(&self.engine),
            programs,
        }))
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// One compiled `cel` rule: the programs of one operation for one target kind.
struct CelRule {
    name: String,
    target: CustomizationTarget,
    op: Operation,
    engine: Arc<Engine>,
    programs: Vec<(&'static str, Arc<Program>)>,
}

/// The variables of one call, converted once for all of the rule's expressions.
struct Inputs {
    vars: Vec<(&'static str, Box<dyn Val + 'static>)>,
    sizes: Sizes,
}

impl VariableResolver for Inputs {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        self.vars
            .iter()
            .find(|(n, _)| *n == variable)
            .map(|(_, v)| CowVal::Borrowed(v.as_ref()))
    }
}

impl CelRule {
    fn fault(&self, output: &str, e: ExpressionError) -> PluginError {
        match e.kind {
            ExpressionErrorKind::Timeout => PluginError::Timeout {
                plugin: self.name.clone(),
            },
            _ => PluginError::failed(&self.name, format!("cel.{output}: {}", e.message)),
        }
    }

    fn invalid(&self, output: &str, message: impl std::fmt::Display) -> PluginError {
        PluginError::InvalidOutput {
            plugin: self.name.clone(),
            message: format!("cel.{output}: {message}"),
        }
    }

    /// Convert the inputs and evaluate every expression: `(output, value)` in declaration order.
    fn run(
        &self,
        inputs: &[(&'static str, &Value)],
    ) -> Result<Vec<(&'static str, Value)>, PluginError> {
        let start = Instant::now();
        let mut bound = Inputs {
            vars: Vec::with_capacity(inputs.len()),
            sizes: Sizes::default(),
        };
        for &(var, value) in inputs {
            let (v, sizes) = self
                .engine
                .convert_input(value)
                .map_err(|e| self.fault(var, e))?;
            bound.vars.push((var, v));
            bound.sizes = bound.sizes.max(sizes);
        }
        let deadline = self.engine.limits().deadline;
        let mut out = Vec::with_capacity(self.programs.len());
        for (output, program) in &self.programs {
            if start.elapsed() > deadline {
                return Err(PluginError::Timeout {
                    plugin: self.name.clone(),
                });
            }
            let v = self
                .engine
                .execute(program, &bound, bound.sizes)
                .map_err(|e| self.fault(output, e))?;
            out.push((*output, v));
        }
        Ok(out)
    }

    fn one(&self, inputs: &[(&'static str, &Value)]) -> Result<Value, PluginError> {
        self.run(inputs)?
            .pop()
            .map(|(_, v)| v)
            .ok_or_else(|| PluginError::failed(&self.name, "no expression"))
    }

    /// `base` with the merge patch `patch` applied, keeping the object's identity.
    fn merged(&self, base: &Value, patch: Value) -> Result<Value, PluginError> {
        if !patch.is_object() {
            return Err(self.invalid("patch", format!("{patch} is not a map")));
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
                return Err(self.invalid(
                    "patch",
                    format!(
                        "changes {} (the object's identity)",
                        &path[1..].replace('/', ".")
                    ),
                ));
            }
        }
        Ok(out)
    }
}

/// An integer in `0..=i32::MAX` (JSON numbers from CEL may be doubles with no fraction).
pub(crate) fn replicas(v: &Value) -> Result<i32, String> {
    let n = match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX)))
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            }),
        _ => None,
    };
    let n = n.ok_or_else(|| format!("{v} is not an integer"))?;
    i32::try_from(n)
        .ok()
        .filter(|r| *r >= 0)
        .ok_or_else(|| format!("{n} is outside 0..={}", i32::MAX))
}

/// A map with only the keys in `allowed`.
fn fields<'v>(
    v: &'v Value,
    allowed: &[&str],
    what: &str,
) -> Result<&'v Map<String, Value>, String> {
    let m = v
        .as_object()
        .ok_or_else(|| format!("{what}: {} is not a map", json_kind(v)))?;
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "{what}: unknown field {k:?} (fields: {})",
            allowed.join(", ")
        ));
    }
    Ok(m)
}

fn requirements(v: Value) -> Result<Option<ReplicaRequirements>, String> {
    if v.is_null() {
        return Ok(None);
    }
    fields(
        &v,
        &[
            "nodeClaim",
            "resourceRequest",
            "namespace",
            "priorityClassName",
        ],
        "requirements",
    )?;
    serde_json::from_value(v)
        .map(Some)
        .map_err(|e| e.to_string())
}

fn items(v: &Value) -> Result<&Vec<Value>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("{} is not a list", json_kind(v)))?;
    if items.len() > MAX_ITEMS {
        return Err(format!("{} items, more than {MAX_ITEMS}", items.len()));
    }
    Ok(items)
}

/// A components result: maps of `name` (non-empty, unique), `replicas` (in range) and optional
/// `replicaRequirements`.
pub(crate) fn components(v: &Value) -> Result<Vec<Component>, String> {
    let mut out: Vec<Component> = Vec::new();
    for (i, c) in items(v)?.iter().enumerate() {
        let at = format!("[{i}]");
        let m = fields(c, &["name", "replicas", "replicaRequirements"], &at)?;
        let name = match m.get("name") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(format!("{at}.name: a non-empty string is required")),
        };
        if out.iter().any(|o| o.name == name) {
            return Err(format!("{at}.name: {name:?} appears twice"));
        }
        let replicas = replicas(m.get("replicas").unwrap_or(&Value::Null))
            .map_err(|e| format!("{at}.replicas: {e}"))?;
        let replica_requirements =
            requirements(m.get("replicaRequirements").cloned().unwrap_or(Value::Null))
                .map_err(|e| format!("{at}.replicaRequirements: {e}"))?;
        out.push(Component {
            name,
            replicas,
            replica_requirements,
        });
    }
    Ok(out)
}

/// A dependencies result: `apiVersion` and `kind` required, and `name` or `labelSelector`.
pub(crate) fn dependencies(v: &Value) -> Result<Vec<DependentObjectReference>, String> {
    let mut out = Vec::new();
    for (i, d) in items(v)?.iter().enumerate() {
        let at = format!("[{i}]");
        fields(
            d,
            &["apiVersion", "kind", "namespace", "name", "labelSelector"],
            &at,
        )?;
        let dep: DependentObjectReference =
            serde_json::from_value(d.clone()).map_err(|e| format!("{at}: {e}"))?;
        if dep.api_version.is_empty() || dep.kind.is_empty() {
            return Err(format!("{at}: apiVersion and kind are required"));
        }
        if dep.name.is_empty() && dep.label_selector.is_none() {
            return Err(format!("{at}: name or labelSelector is required"));
        }
        out.push(dep);
    }
    Ok(out)
}

impl ResourceInterpreter for CelRule {
    fn name(&self) -> &str {
        &self.name
    }

    fn hook_enabled(&self, api_version: &str, kind: &str, op: Operation) -> bool {
        op == self.op && self.target.api_version == api_version && self.target.kind == kind
    }

    fn get_replicas(&self, object: &Value) -> Result<Replicas, PluginError> {
        let mut out = Replicas::default();
        for (output, v) in self.run(&[("object", object)])? {
            match output {
                "replicas" => out.replicas = replicas(&v).map_err(|e| self.invalid(output, e))?,
                _ => out.requirements = requirements(v).map_err(|e| self.invalid(output, e))?,
            }
        }
        Ok(out)
    }

    fn get_components(&self, object: &Value) -> Result<Vec<Component>, PluginError> {
        let v = self.one(&[("object", object)])?;
        components(&v).map_err(|e| self.invalid("components", e))
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Result<Value, PluginError> {
        let desired = Value::from(replicas);
        let patch = self.one(&[("object", object), ("desiredReplicas", &desired)])?;
        self.merged(object, patch)
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Result<Value, PluginError> {
        let patch = self.one(&[("desiredObject", desired), ("observedObject", observed)])?;
        self.merged(desired, patch)
    }

    fn aggregate_status(
        &self,
        object: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Value, PluginError> {
        let items = serde_json::to_value(items)
            .map_err(|e| PluginError::failed(&self.name, e.to_string()))?;
        let status = self.one(&[("object", object), ("statusItems", &items)])?;
        if !status.is_object() {
            return Err(self.invalid("status", format!("{} is not a map", json_kind(&status))));
        }
        let mut out = object.clone();
        match out.as_object_mut() {
            Some(m) => {
                m.insert("status".into(), status);
            }
            None => return Err(PluginError::failed(&self.name, "the object is not a map")),
        }
        Ok(out)
    }

    fn reflect_status(&self, observed: &Value) -> Result<Option<Value>, PluginError> {
        match self.one(&[("observedObject", observed)])? {
            Value::Null => Ok(None),
            v @ Value::Object(_) => Ok(Some(v)),
            v => Err(self.invalid("status", format!("{} is not a map or null", json_kind(&v)))),
        }
    }

    fn interpret_health(&self, observed: &Value) -> Result<bool, PluginError> {
        match self.one(&[("observedObject", observed)])? {
            Value::Bool(b) => Ok(b),
            v => Err(self.invalid("healthy", format!("{} is not a bool", json_kind(&v)))),
        }
    }

    fn get_dependencies(
        &self,
        object: &Value,
    ) -> Result<Vec<DependentObjectReference>, PluginError> {
        let v = self.one(&[("object", object)])?;
        dependencies(&v).map_err(|e| self.invalid("dependencies", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target() -> CustomizationTarget {
        CustomizationTarget {
            api_version: "example.com/v1".into(),
            kind: "Shard".into(),
        }
    }

    fn compile(op: Operation, cel: Value) -> Result<Arc<dyn ResourceInterpreter>, String> {
        let rule = CustomizationRule {
            cel: cel.as_object().cloned(),
            ..Default::default()
        };
        CelRuleBackend::default().compile("shards", &target(), op, &rule)
    }

    fn ok(op: Operation, cel: Value) -> Arc<dyn ResourceInterpreter> {
        compile(op, cel).unwrap_or_else(|e| panic!("{e}"))
    }

    fn shard() -> Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "Shard",
            "metadata": {"name": "s1", "namespace": "db"},
            "spec": {"replicas": 4, "paused": false,
                     "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}},
                     "configRef": "s1-config", "secretRef": "s1-secret"},
            "status": {"readyReplicas": 3, "replicas": 4}
        })
    }

    #[test]
    fn replica_resource_gives_replicas_and_requirements() {
        let i = ok(
            Operation::InterpretReplica,
            json!({
                "replicas": "object.spec.replicas",
                "requirements": "{'resourceRequest': object.spec.template.spec.containers[0].resources.requests, 'namespace': object.metadata.namespace}"
            }),
        );
        assert!(i.hook_enabled("example.com/v1", "Shard", Operation::InterpretReplica));
        assert!(!i.hook_enabled("example.com/v1", "Shard", Operation::InterpretHealth));
        assert!(!i.hook_enabled("example.com/v1", "Other", Operation::InterpretReplica));
        let r = i.get_replicas(&shard()).unwrap();
        assert_eq!(r.replicas, 4);
        let req = r.requirements.unwrap();
        assert_eq!(req.namespace, "db");
        assert_eq!(
            serde_json::to_value(&req.resource_request).unwrap(),
            json!({"cpu": "500m", "memory": "1Gi"})
        );
        // Without `requirements`, none; a missing field defaults through optionals.
        let i = ok(
            Operation::InterpretReplica,
            json!({"replicas": "object.spec.?missing.orValue(1)"}),
        );
        assert_eq!(
            i.get_replicas(&shard()).unwrap(),
            Replicas {
                replicas: 1,
                requirements: None
            }
        );
    }

    #[test]
    fn replicas_out_of_range_or_of_the_wrong_type_are_invalid_output() {
        for (expr, want) in [
            ("-1", "-1 is outside 0..=2147483647"),
            ("2147483648", "2147483648 is outside 0..=2147483647"),
            ("object.metadata.name", "\"s1\" is not an integer"),
            ("dyn(2.5)", "2.5 is not an integer"),
        ] {
            let i = ok(Operation::InterpretReplica, json!({"replicas": expr}));
            let e = i.get_replicas(&shard()).unwrap_err();
            assert!(
                matches!(e, PluginError::InvalidOutput { .. }),
                "{expr}: {e}"
            );
            assert_eq!(
                e.to_string(),
                format!("plugin shards returned invalid output: cel.replicas: {want}"),
                "{expr}"
            );
        }
        assert_eq!(
            ok(Operation::InterpretReplica, json!({"replicas": "dyn(2.0)"}))
                .get_replicas(&shard())
                .unwrap()
                .replicas,
            2
        );
        let i = ok(
            Operation::InterpretReplica,
            json!({"replicas": "1", "requirements": "{'cpu': '1'}"}),
        );
        let e = i.get_replicas(&shard()).unwrap_err().to_string();
        assert!(
            e.contains("cel.requirements: requirements: unknown field \"cpu\""),
            "{e}"
        );
    }

    #[test]
    fn component_resource_lists_components() {
        let i = ok(
            Operation::InterpretComponent,
            json!({"components": "[{'name': 'leader', 'replicas': 1}, {'name': 'worker', 'replicas': object.spec.replicas, 'replicaRequirements': {'resourceRequest': {'cpu': '2'}}}]"}),
        );
        let c = i.get_components(&shard()).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].name.as_str(), c[0].replicas), ("leader", 1));
        assert_eq!((c[1].name.as_str(), c[1].replicas), ("worker", 4));
        assert!(c[1].replica_requirements.is_some());
        for (expr, want) in [
            (
                "[{'name': 'a', 'replicas': 1}, {'name': 'a', 'replicas': 2}]",
                "[1].name: \"a\" appears twice",
            ),
            (
                "[{'name': '', 'replicas': 1}]",
                "[0].name: a non-empty string is required",
            ),
            (
                "[{'name': 'a', 'replicas': -3}]",
                "[0].replicas: -3 is outside",
            ),
            (
                "[{'name': 'a', 'replicas': 1, 'image': 'x'}]",
                "[0]: unknown field \"image\"",
            ),
            ("dyn(object.spec)", "a map is not a list"),
        ] {
            let i = ok(Operation::InterpretComponent, json!({"components": expr}));
            let e = i.get_components(&shard()).unwrap_err();
            assert!(
                matches!(e, PluginError::InvalidOutput { .. }),
                "{expr}: {e}"
            );
            assert!(e.to_string().contains(want), "{expr}: {e}");
        }
    }

    #[test]
    fn replica_revision_merges_its_patch() {
        let i = ok(
            Operation::ReviseReplica,
            json!({"patch": "{'spec': {'replicas': desiredReplicas}}"}),
        );
        let out = i.revise_replica(&shard(), 7).unwrap();
        let mut want = shard();
        want["spec"]["replicas"] = json!(7);
        assert_eq!(out, want);
        // A patch may not change which object this is.
        let i = ok(
            Operation::ReviseReplica,
            json!({"patch": "{'metadata': {'name': 'other'}}"}),
        );
        let e = i.revise_replica(&shard(), 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "plugin shards returned invalid output: cel.patch: changes metadata.name (the object's identity)"
        );
    }

    #[test]
    fn retention_keeps_member_fields() {
        let i = ok(
            Operation::Retain,
            json!({"patch": "{'spec': {'paused': observedObject.spec.paused}, 'metadata': {'annotations': null}}"}),
        );
        let mut desired = shard();
        desired["metadata"]["annotations"] = json!({"a": "b"});
        let mut observed = shard();
        observed["spec"]["paused"] = json!(true);
        let out = i.retain(&desired, &observed).unwrap();
        assert_eq!(out["spec"]["paused"], json!(true));
        assert_eq!(out["spec"]["replicas"], json!(4));
        assert_eq!(out["metadata"].get("annotations"), None);
    }

    #[test]
    fn status_aggregation_folds_member_statuses() {
        let i = ok(
            Operation::AggregateStatus,
            json!({"status": "{'readyReplicas': statusItems.map(i, i.?status.?readyReplicas.orValue(0)).sum(), 'clusters': statusItems.size()}"}),
        );
        let items: Vec<AggregatedStatusItem> = (0..3)
            .map(|n| AggregatedStatusItem {
                cluster_name: format!("m{n}"),
                status: (n > 0).then(|| json!({"readyReplicas": n})),
                applied: true,
                ..Default::default()
            })
            .collect();
        let out = i.aggregate_status(&shard(), &items).unwrap();
        assert_eq!(out["status"], json!({"readyReplicas": 3, "clusters": 3}));
        assert_eq!(out["spec"], shard()["spec"]);
        let i = ok(Operation::AggregateStatus, json!({"status": "dyn(1)"}));
        let e = i
            .aggregate_status(&shard(), &items)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cel.status: a number is not a map"), "{e}");
    }

    #[test]
    fn status_reflection_and_health() {
        let i = ok(
            Operation::InterpretStatus,
            json!({"status": "has(observedObject.status) ? {'readyReplicas': observedObject.status.readyReplicas} : null"}),
        );
        assert_eq!(
            i.reflect_status(&shard()).unwrap(),
            Some(json!({"readyReplicas": 3}))
        );
        assert_eq!(i.reflect_status(&json!({"spec": {}})).unwrap(), None);
        let i = ok(
            Operation::InterpretHealth,
            json!({"healthy": "observedObject.status.readyReplicas == observedObject.spec.replicas"}),
        );
        assert!(!i.interpret_health(&shard()).unwrap());
        let mut healthy = shard();
        healthy["status"]["readyReplicas"] = json!(4);
        assert!(i.interpret_health(&healthy).unwrap());
        let i = ok(
            Operation::InterpretHealth,
            json!({"healthy": "observedObject.status"}),
        );
        let e = i.interpret_health(&shard()).unwrap_err();
        assert!(matches!(e, PluginError::InvalidOutput { .. }), "{e}");
    }

    #[test]
    fn dependency_interpretation_lists_references() {
        let i = ok(
            Operation::InterpretDependency,
            json!({"dependencies": "[{'apiVersion': 'v1', 'kind': 'ConfigMap', 'namespace': object.metadata.namespace, 'name': object.spec.configRef}, {'apiVersion': 'v1', 'kind': 'Secret', 'namespace': object.metadata.namespace, 'labelSelector': {'matchLabels': {'app': object.metadata.name}}}]"}),
        );
        let d = i.get_dependencies(&shard()).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            (
                d[0].kind.as_str(),
                d[0].name.as_str(),
                d[0].namespace.as_str()
            ),
            ("ConfigMap", "s1-config", "db")
        );
        assert_eq!(
            d[1].label_selector
                .as_ref()
                .unwrap()
                .match_labels
                .get("app")
                .map(String::as_str),
            Some("s1")
        );
        for (expr, want) in [
            (
                "[{'apiVersion': 'v1', 'kind': 'Secret'}]",
                "name or labelSelector is required",
            ),
            (
                "[{'kind': 'Secret', 'name': 'x'}]",
                "missing field `apiVersion`",
            ),
            (
                "[{'apiVersion': 'v1', 'kind': 'Secret', 'name': 'x', 'uid': 'u'}]",
                "unknown field \"uid\"",
            ),
        ] {
            let i = ok(
                Operation::InterpretDependency,
                json!({"dependencies": expr}),
            );
            let e = i.get_dependencies(&shard()).unwrap_err();
            assert!(
                matches!(e, PluginError::InvalidOutput { .. }),
                "{expr}: {e}"
            );
            assert!(e.to_string().contains(want), "{expr}: {e}");
        }
    }

    #[test]
    fn bad_rules_are_refused_at_compile_time() {
        let err = |op, cel| compile(op, cel).err().unwrap_or_else(|| panic!("compiled"));
        assert_eq!(
            err(Operation::InterpretReplica, json!({"replica": "1"})),
            "cel: unknown expression \"replica\"; InterpretReplica takes replicas, requirements"
        );
        assert_eq!(
            err(Operation::InterpretReplica, json!({"requirements": "{}"})),
            "cel.replicas: required for InterpretReplica"
        );
        assert_eq!(
            err(Operation::InterpretHealth, json!({"healthy": true})),
            "cel.healthy: must be a string holding a CEL expression, not a bool"
        );
        // Variables are per operation: health sees the observed object only.
        let e = err(
            Operation::InterpretHealth,
            json!({"healthy": "object.status.ready"}),
        );
        assert!(
            e.starts_with("cel.healthy: column 1: type error: undeclared reference to 'object'"),
            "{e}"
        );
        assert!(
            e.ends_with("(InterpretHealth has the variables observedObject)"),
            "{e}"
        );
        let e = err(Operation::InterpretReplica, json!({"replicas": "'three'"}));
        assert_eq!(
            e,
            "cel.replicas: type error: must evaluate to int, but evaluates to string"
        );
        let e = err(Operation::InterpretHealth, json!({"healthy": "1 + 1"}));
        assert!(e.contains("must evaluate to bool"), "{e}");
        let e = err(
            Operation::InterpretReplica,
            json!({"replicas": "object.spec.replicas +"}),
        );
        assert!(
            e.starts_with("cel.replicas: column 23: syntax error"),
            "{e}"
        );
        assert!(e.contains("mismatched input '<EOF>'"), "{e}");
        let e = err(
            Operation::InterpretReplica,
            json!({"replicas": "object.spec.(replicas"}),
        );
        assert!(
            e.starts_with("cel.replicas: column 13: syntax error"),
            "{e}"
        );
        assert!(e.contains("'.('"), "{e}");
        let e = err(
            Operation::ReviseReplica,
            json!({"patch": "desiredReplicas"}),
        );
        assert!(e.contains("must evaluate to a map"), "{e}");
        let e = err(
            Operation::InterpretDependency,
            json!({"dependencies": "object.spec.x.map(a, object.spec.y.map(b, object.spec.z.map(c, object.spec.w.map(d, d))))"}),
        );
        assert!(e.contains("estimated cost"), "{e}");
        assert_eq!(
            CelRuleBackend::default()
                .compile(
                    "shards",
                    &target(),
                    Operation::InterpretHealth,
                    &CustomizationRule::default()
                )
                .err()
                .unwrap(),
            "cel is not set"
        );
    }

    #[test]
    fn runtime_errors_and_bounds_are_faults() {
        let i = ok(
            Operation::InterpretReplica,
            json!({"replicas": "object.spec.nope"}),
        );
        let e = i.get_replicas(&shard()).unwrap_err();
        assert!(matches!(e, PluginError::Failed { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("plugin shards failed: cel.replicas: "),
            "{e}"
        );
        // Inputs past the engine's bounds are refused before evaluation.
        let mut deep = json!(1);
        for _ in 0..100 {
            deep = json!({"a": deep});
        }
        let e = i.get_replicas(&deep).unwrap_err().to_string();
        assert!(e.contains("nests deeper"), "{e}");
        // The same expression text compiles separately per operation's variables.
        let r = ok(
            Operation::InterpretReplica,
            json!({"replicas": "object.spec.replicas"}),
        );
        assert!(
            compile(
                Operation::InterpretHealth,
                json!({"healthy": "object.spec.replicas == 1"})
            )
            .is_err()
        );
        assert_eq!(r.get_replicas(&shard()).unwrap().replicas, 4);
    }
}
