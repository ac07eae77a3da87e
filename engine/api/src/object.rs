//! An unstructured Kubernetes object (any kind), used for resource templates and manifests.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An unstructured object: the raw JSON plus cheap accessors for the fields the engine reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Object(pub Value);

impl Object {
    fn str_at(&self, pointer: &str) -> &str {
        self.0
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `apiVersion`, e.g. `apps/v1`.
    pub fn api_version(&self) -> &str {
        self.str_at("/apiVersion")
    }

    /// `kind`, e.g. `Deployment`.
    pub fn kind(&self) -> &str {
        self.str_at("/kind")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.str_at("/metadata/name")
    }

    /// `metadata.namespace`, `""` when cluster-scoped or unset.
    pub fn namespace(&self) -> &str {
        self.str_at("/metadata/namespace")
    }

    /// `metadata.uid`, `""` when unset.
    pub fn uid(&self) -> &str {
        self.str_at("/metadata/uid")
    }

    /// `metadata.resourceVersion`, `""` when unset.
    pub fn resource_version(&self) -> &str {
        self.str_at("/metadata/resourceVersion")
    }

    /// `metadata.generation`, 0 when unset.
    pub fn generation(&self) -> i64 {
        self.0
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    /// `metadata.labels` as a sorted map (non-string values are skipped).
    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.0.pointer("/metadata/labels"))
    }

    /// `metadata.annotations` as a sorted map.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        string_map(self.0.pointer("/metadata/annotations"))
    }

    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        match self.api_version().split_once('/') {
            Some((g, _)) => g,
            None => "",
        }
    }
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}
