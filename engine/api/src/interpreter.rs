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

/// Kind of [`ResourceInterpreterWebhookConfiguration`].
pub const WEBHOOK_CONFIGURATION_KIND: &str = "ResourceInterpreterWebhookConfiguration";
/// The only `ResourceInterpreterContext` version (`interpreterContextVersions`).
pub const INTERPRETER_CONTEXT_VERSION: &str = "v1alpha1";

/// `ResourceInterpreterWebhookConfiguration` (cluster-scoped): interpreter webhooks and the kinds
/// and operations each answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceInterpreterWebhookConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Karmada requires the field but accepts an empty list.
    #[serde(default)]
    pub webhooks: Vec<ResourceInterpreterWebhook>,
}

/// `ResourceInterpreterWebhook`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceInterpreterWebhook {
    pub name: String,
    pub client_config: WebhookClientConfig,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleWithOperations>,
    /// 1..=30; 10 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    #[serde(default)]
    pub interpreter_context_versions: Vec<String>,
}

impl ResourceInterpreterWebhook {
    /// The timeout when `timeoutSeconds` is unset (Karmada's documented default).
    pub const DEFAULT_TIMEOUT_SECONDS: i32 = 10;
}

/// `admissionregistration/v1.WebhookClientConfig`: exactly one of `url` and `service`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookClientConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// PEM CA certificates (base64 in JSON, as Kubernetes' `[]byte`) that verify the webhook's
    /// serving certificate; the system roots when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

/// `admissionregistration/v1.ServiceReference`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceReference {
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// 443 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// `RuleWithOperations`: operations (or `*`) on kinds matched by group, version and kind (each
/// may be `*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleWithOperations {
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub api_versions: Vec<String>,
    #[serde(default)]
    pub kinds: Vec<String>,
}

/// `ResourceInterpreterContext`: what an interpreter webhook is POSTed (`request`) and answers
/// (`response`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterContext {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ResourceInterpreterRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ResourceInterpreterResponse>,
}

/// `metav1.GroupVersionKind`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

/// `ResourceInterpreterRequest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterRequest {
    pub uid: String,
    pub kind: GroupVersionKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub operation: String,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub object: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_object: Option<Value>,
    /// The desired replicas (ReviseReplica); Karmada always sends it (0 for other operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_status: Vec<crate::work::AggregatedStatusItem>,
}

/// `RequestStatus`: why a webhook call failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `ResourceInterpreterResponse`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterResponse {
    pub uid: String,
    #[serde(default)]
    pub successful: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RequestStatus>,
    /// A JSON patch, base64 (Kubernetes' `[]byte`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// `JSONPatch`, the only type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<ReplicaRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Component>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<DependentObjectReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_status: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}
