//! Fixtures shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flotilla_api::cluster::Cluster;
use flotilla_api::work::{ResourceBindingSpec, ResourceBindingStatus};
use flotilla_core::framework::{FailurePolicy, FilterPlugin, Profile, Slot};
use flotilla_core::profile::{ExtensionPoint, PluginSpec, WasmSource};
use flotilla_wasm::{WasmFactory, WasmPlugin};

pub fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

pub fn clusters(names: &[&str]) -> Vec<Cluster> {
    names
        .iter()
        .map(|n| {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": n, "labels": {"name": n}},
                "spec": {"syncMode": "Push", "region": "eu"},
                "status": {"apiEnablements": [{"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]}]}
            }))
            .expect("cluster fixture")
        })
        .collect()
}

/// A Deployment with 3 replicas, Duplicated.
pub fn binding() -> (ResourceBindingSpec, ResourceBindingStatus) {
    let spec = serde_json::from_value(serde_json::json!({
        "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web", "uid": "u1"},
        "replicas": 3,
        "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}
    }))
    .expect("binding fixture");
    (spec, ResourceBindingStatus::default())
}

pub fn spec(name: &str, path: &Path, policy: FailurePolicy, timeout_ms: u64) -> PluginSpec {
    PluginSpec {
        name: name.into(),
        failure_policy: policy,
        wasm: Some(WasmSource {
            path: path.display().to_string(),
            sha256: None,
            plugin: None,
        }),
        limits: Some(flotilla_core::profile::PluginLimits {
            timeout_ms: Some(timeout_ms),
            memory_mib: Some(16),
            max_output_bytes: None,
        }),
        ..Default::default()
    }
}

pub fn filter(file: &str, policy: FailurePolicy) -> Arc<WasmPlugin> {
    let path = testdata(file);
    Arc::new(
        WasmFactory::new()
            .load(
                ExtensionPoint::Filter,
                &spec(file, &path, policy, 50),
                &path,
            )
            .expect("load"),
    )
}

/// The default profile with `plugin` as its only filter.
pub fn profile_with_filter(plugin: Arc<dyn FilterPlugin>, policy: FailurePolicy) -> Profile {
    let mut p = flotilla_plugins::default_profile();
    p.filters = vec![Slot::new(plugin).with_failure_policy(policy)];
    p
}
