//! __NAME__: a Flotilla __POINT__ plugin in Rust, on the vendored Rust SDK (vendor/flotilla-pdk).
//! What it does and how to build, test and load it: README.md.

use std::collections::BTreeMap;

use flotilla_pdk::Plugin;
use flotilla_pdk::abi::{BindingRequest, InitRequest};

/// The label this plugin looks at unless the profile's `config.label` names another.
pub const DEFAULT_LABEL: &str = "__LABEL__";

/// The fields of a Karmada `Cluster` this plugin reads (everything else is skipped when parsing).
#[derive(Debug, serde::Deserialize)]
pub struct Cluster {
    /// Metadata.
    pub metadata: Meta,
}

/// Cluster metadata.
#[derive(Debug, serde::Deserialize)]
pub struct Meta {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Cluster {
    /// Whether the cluster carries `label` (any value).
    pub fn has(&self, label: &str) -> bool {
        self.metadata.labels.contains_key(label)
    }
}

/// The plugin: its config.
pub struct Template {
    label: String,
}

/// `config.label` (optional, a non-empty string).
fn label(init: &InitRequest) -> Result<String, String> {
    match init.config.as_ref().map(|c| &c["label"]) {
        None | Some(serde_json::Value::Null) => Ok(DEFAULT_LABEL.to_owned()),
        Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => Err("config: \"label\" must be a non-empty string".into()),
    }
}
