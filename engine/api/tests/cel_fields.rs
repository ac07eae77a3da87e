//! Flotilla's CEL extension fields round-trip like Karmada's own, and are absent from the
//! serialized form of policies that do not use them.

use flotilla_api::policy::{OverridePolicy, PropagationPolicy, cel_patch_type};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn round_trip<T: DeserializeOwned + Serialize>(file: &str) -> T {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture");
    let original: Value = serde_yaml::from_str(&text).expect("yaml");
    let typed: T =
        serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(
        serde_json::to_value(&typed).expect("serialize"),
        original,
        "{file} changed on round trip"
    );
    typed
}

#[test]
fn propagation_policy_with_cel_selector_and_scores_round_trips() {
    let p: PropagationPolicy = round_trip("propagationpolicy-cel.yaml");
    let placement = p.spec.placement.expect("placement");
    let sel = placement
        .cluster_affinity
        .and_then(|a| a.cel_selector)
        .expect("celSelector");
    assert_eq!(sel.cel_expressions.len(), 2);
    assert_eq!(placement.cel_scores[0].weight, 1, "weight defaults to 1");
    assert_eq!(placement.cel_scores[1].weight, 3);
    assert!(
        placement.cluster_affinities[0]
            .affinity
            .cel_selector
            .is_some()
    );
}

#[test]
fn override_policy_with_cel_overriders_round_trips() {
    let p: OverridePolicy = round_trip("overridepolicy-cel.yaml");
    let o = &p.spec.override_rules[0].overriders;
    assert!(o.plaintext[0].expression.is_some() && o.plaintext[0].value.is_none());
    assert!(o.labels_overrider[0].expression.is_some());
    assert_eq!(o.cel[0].patch_type, cel_patch_type::JSON_PATCH);
    assert_eq!(o.cel[0].expression().map(|(f, _)| f), Some("jsonPatch"));
    assert_eq!(
        o.cel[1].expression().map(|(f, _)| f),
        Some("applyConfiguration")
    );
}

#[test]
fn karmada_policies_serialize_without_extension_fields() {
    for file in ["propagationpolicy.yaml", "overridepolicy.yaml"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(file);
        let v: Value =
            serde_yaml::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("yaml");
        let back = if file.starts_with("propagation") {
            serde_json::to_string(&serde_json::from_value::<PropagationPolicy>(v).expect("typed"))
                .expect("json")
        } else {
            serde_json::to_string(&serde_json::from_value::<OverridePolicy>(v).expect("typed"))
                .expect("json")
        };
        for field in ["celSelector", "celScores", "\"cel\"", "expression"] {
            assert!(!back.contains(field), "{file}: {field} appeared");
        }
    }
}

#[test]
fn misspelled_extension_fields_are_rejected() {
    let err = serde_json::from_value::<PropagationPolicy>(serde_json::json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "p"},
        "spec": {"resourceSelectors": [], "placement": {"clusterAffinity": {"celSelector": {"celExpression": ["true"]}}}}
    }))
    .unwrap_err();
    assert!(
        err.to_string().contains("unknown field `celExpression`"),
        "{err}"
    );
}
