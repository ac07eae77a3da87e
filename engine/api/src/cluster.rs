//! `cluster.karmada.io/v1alpha1` Cluster. Mirrors `pkg/apis/cluster/v1alpha1/types.go`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::{Condition, ObjectMeta, ResourceList, Taint};

/// The API group/version of [`Cluster`].
pub const API_VERSION: &str = "cluster.karmada.io/v1alpha1";

/// Well-known cluster taint keys.
pub mod taint_key {
    /// Added (NoSchedule) when the Ready condition is False.
    pub const NOT_READY: &str = "cluster.karmada.io/not-ready";
    /// Added (NoSchedule) when the Ready condition is Unknown.
    pub const UNREACHABLE: &str = "cluster.karmada.io/unreachable";
    /// Added by `karmadactl cordon`.
    pub const UNSCHEDULABLE: &str = "cluster.karmada.io/unschedulable";
}

/// A member cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClusterSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterStatus>,
}

impl Cluster {
    /// The cluster's name.
    pub fn name(&self) -> &str {
        self.metadata.name()
    }

    /// The cluster's labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.metadata.labels
    }

    /// True when the cluster is being deleted.
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

/// `ClusterSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sync_mode: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonator_secret_ref: Option<LocalSecretReference>,
    #[serde(
        rename = "insecureSkipTLSVerification",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verification: bool,
    #[serde(rename = "proxyURL", default, skip_serializing_if = "String::is_empty")]
    pub proxy_url: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub proxy_header: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub region: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub zone: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_models: Vec<ResourceModel>,
}

/// `LocalSecretReference`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalSecretReference {
    pub namespace: String,
    pub name: String,
}

/// `ResourceModel`: one grade of the customized resource model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceModel {
    pub grade: u32,
    #[serde(default)]
    pub ranges: Vec<ResourceModelRange>,
}

/// `ResourceModelRange`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceModelRange {
    pub name: String,
    pub min: crate::meta::Quantity,
    pub max: crate::meta::Quantity,
}

/// `ClusterStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_enablements: Vec<ApiEnablement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_summary: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_summary: Option<ResourceSummary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remedy_actions: Vec<String>,
}

/// `APIEnablement`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiEnablement {
    pub group_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResource>,
}

/// `APIResource`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiResource {
    pub name: String,
    pub kind: String,
}

/// `ResourceSummary`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSummary {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: ResourceList,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocating: ResourceList,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated: ResourceList,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocatable_modelings: Vec<AllocatableModeling>,
}

/// `AllocatableModeling`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllocatableModeling {
    pub grade: u32,
    pub count: i64,
}
