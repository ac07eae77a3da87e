//! The resource interpreter's API (Karmada `config.karmada.io/v1alpha1`): the
//! `ResourceInterpreterCustomization` object users write, and the values the interpreter
//! operations exchange (components, dependencies).
//!
//! Each customization rule carries exactly one program: Karmada's `luaScript`, or — Flotilla's
//! additions — `cel` (named CEL expressions) or `wasm` (a `WasmPlugin` implementing the operation).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::{LabelSelector, ObjectMeta};
use crate::work::ReplicaRequirements;

/// API group and version of the interpreter objects.
pub const CONFIG_API_VERSION: &str = "config.karmada.io/v1alpha1";
/// Kind of [`ResourceInterpreterCustomization`].
pub const CUSTOMIZATION_KIND: &str = "ResourceInterpreterCustomization";

/// `ResourceInterpreterCustomization` (cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceInterpreterCustomization {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: ResourceInterpreterCustomizationSpec,
}

/// `ResourceInterpreterCustomizationSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceInterpreterCustomizationSpec {
    pub target: CustomizationTarget,
    #[serde(default)]
    pub customizations: CustomizationRules,
}

/// `CustomizationTarget`: the kind a customization applies to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomizationTarget {
    pub api_version: String,
    pub kind: String,
}

/// `CustomizationRules`: one optional rule per operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomizationRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<CustomizationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_resource: Option<CustomizationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_resource: Option<CustomizationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_revision: Option<CustomizationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reflection: Option<CustomizationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_aggregation: Option<CustomizationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_interpretation: Option<CustomizationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency_interpretation: Option<CustomizationRule>,
}

/// One rule: exactly one of `luaScript`, `cel`, `wasm` (checked on admission).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomizationRule {
    /// Karmada's Lua program (gopher-lua semantics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lua_script: Option<String>,
    /// Named CEL expressions (per operation; e.g. `replicas: object.spec.replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<serde_json::Map<String, Value>>,
    /// A `WasmPlugin` implementing the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm: Option<WasmRule>,
}

/// A rule served by a `WasmPlugin` object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasmRule {
    /// Name of the `WasmPlugin`.
    pub plugin: String,
}

/// `Component` (work.karmada.io/v1alpha2): one pod template of a multi-template workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    pub name: String,
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<ReplicaRequirements>,
}

/// `DependentObjectReference`: an object a workload depends on (InterpretDependency).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DependentObjectReference {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}
