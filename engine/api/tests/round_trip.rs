//! Karmada YAML round-trips unchanged through the typed API: parse, serialize, compare as data.

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{OverridePolicy, PropagationPolicy};
use flotilla_api::work::{ResourceBinding, Work};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn round_trip<T: DeserializeOwned + Serialize>(file: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture");
    let original: Value = serde_yaml::from_str(&text).expect("yaml");
    let typed: T =
        serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
    let back = serde_json::to_value(&typed).expect("serialize");
    assert_eq!(back, original, "{file} changed on round trip");
}

#[test]
fn propagation_policy_with_every_field_round_trips() {
    round_trip::<PropagationPolicy>("propagationpolicy.yaml");
}

#[test]
fn cluster_override_policy_with_every_overrider_round_trips() {
    round_trip::<OverridePolicy>("overridepolicy.yaml");
}

#[test]
fn cluster_with_spec_and_status_round_trips() {
    round_trip::<Cluster>("cluster.yaml");
}

#[test]
fn resource_binding_with_status_round_trips() {
    round_trip::<ResourceBinding>("resourcebinding.yaml");
}

#[test]
fn work_round_trips() {
    round_trip::<Work>("work.yaml");
}

#[test]
fn unknown_fields_are_rejected() {
    let err = serde_json::from_value::<PropagationPolicy>(serde_json::json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "p"}, "spec": {"resourceSelectors": [], "placment": {}}
    }))
    .unwrap_err();
    assert!(
        err.to_string().contains("unknown field `placment`"),
        "{err}"
    );
}
