//! Overrides cannot change a manifest's identity (`apiVersion`, `kind`, `metadata.namespace`,
//! `metadata.name`), as Karmada's overriders cannot: turning a Deployment's Work into a Secret in
//! `kube-system` is an override error for that cluster, naming the field and never the values.

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::OverridePolicy;
use flotilla_core::framework::OverridePatch;
use flotilla_core::overrides::{OverrideError, OverridePolicies, apply, karmada_overrides};
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 1}
    })
}

fn cluster() -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "member1"}
    }))
    .expect("cluster")
}

fn policy(kind: &str, namespace: Option<&str>, plaintext: Value) -> OverridePolicy {
    let mut metadata = json!({"name": "rewrite"});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": metadata,
        "spec": {"overrideRules": [{"overriders": {"plaintext": plaintext}}]}
    }))
    .expect("policy")
}

fn namespaced(plaintext: Value) -> OverridePolicies {
    OverridePolicies {
        cluster: Vec::new(),
        namespaced: vec![policy("OverridePolicy", Some("default"), plaintext)],
    }
}

/// The field, the pointer and the overrider named by the error, and its text.
fn refusal(e: &OverrideError) -> (String, String, String) {
    match e {
        OverrideError::Overrider {
            overrider,
            path,
            message,
            ..
        } => (overrider.clone(), path.clone(), message.clone()),
        other => panic!("not an overrider error: {other}"),
    }
}

#[test]
fn plaintext_overriders_cannot_change_kind_namespace_name_or_api_version() {
    for (path, value, field) in [
        ("/kind", json!("Secret"), "kind"),
        (
            "/metadata/namespace",
            json!("kube-system"),
            "metadata.namespace",
        ),
        ("/metadata/name", json!("stolen-token"), "metadata.name"),
        ("/apiVersion", json!("v1"), "apiVersion"),
    ] {
        let policies = namespaced(json!([
            {"path": "/spec/replicas", "operator": "replace", "value": 3},
            {"path": path, "operator": "replace", "value": value}
        ]));
        let e = karmada_overrides(&deployment(), &cluster(), &policies).expect_err(path);
        let (overrider, pointer, message) = refusal(&e);
        assert_eq!(overrider, "plaintext[1]", "{e}");
        assert_eq!(pointer, path, "{e}");
        assert!(message.contains(&format!("cannot change {field} ")), "{e}");
        let text = e.to_string();
        assert!(text.contains("OverridePolicy \"rewrite\" rule 0"), "{text}");
        let shown = value.as_str().expect("string value");
        assert!(!text.contains(shown), "the new value is echoed: {text}");
    }
}

#[test]
fn removing_or_replacing_metadata_wholesale_is_a_change_too() {
    for (ops, pointer) in [
        (
            json!([{"path": "/metadata/namespace", "operator": "remove"}]),
            "/metadata/namespace",
        ),
        (
            json!([{"path": "/metadata", "operator": "replace", "value": {"name": "web"}}]),
            "/metadata/namespace",
        ),
    ] {
        let e =
            karmada_overrides(&deployment(), &cluster(), &namespaced(ops)).expect_err("refused");
        let (overrider, path, _) = refusal(&e);
        assert_eq!(
            (overrider.as_str(), path.as_str()),
            ("plaintext[0]", pointer)
        );
    }
}

#[test]
fn a_cluster_override_cannot_move_the_manifest_into_another_namespace() {
    // Karmada picks OverridePolicies by the namespace after the ClusterOverridePolicy pass: a
    // moved manifest would also pick up kube-system's policies.
    let policies = OverridePolicies {
        cluster: vec![policy(
            "ClusterOverridePolicy",
            None,
            json!([{"path": "/metadata/namespace", "operator": "replace", "value": "kube-system"}]),
        )],
        namespaced: vec![policy(
            "OverridePolicy",
            Some("kube-system"),
            json!([{"path": "/kind", "operator": "replace", "value": "Secret"}]),
        )],
    };
    let e = karmada_overrides(&deployment(), &cluster(), &policies).expect_err("refused");
    assert!(
        e.to_string()
            .starts_with("ClusterOverridePolicy \"rewrite\" rule 0"),
        "{e}"
    );
}

#[test]
fn overrides_of_other_metadata_still_apply() {
    let policies = namespaced(json!([
        {"path": "/metadata/labels", "operator": "replace", "value": {"tier": "gold"}},
        {"path": "/metadata/annotations", "operator": "add", "value": {"a": "b"}}
    ]));
    let patch = karmada_overrides(&deployment(), &cluster(), &policies).expect("allowed");
    let out = apply(&deployment(), &patch).expect("applies");
    assert_eq!(out["metadata"]["labels"], json!({"tier": "gold"}));
    assert_eq!(out["kind"], "Deployment");
}

#[test]
fn a_patch_from_any_override_plugin_cannot_change_the_identity_when_applied() {
    // What a Wasm override plugin returns goes through `apply` as well.
    for (op, field) in [
        (
            json!({"op": "replace", "path": "/kind", "value": "Secret"}),
            "kind",
        ),
        (
            json!({"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}),
            "metadata.namespace",
        ),
        (
            json!({"op": "add", "path": "/metadata/name", "value": "other"}),
            "metadata.name",
        ),
        (json!({"op": "remove", "path": "/apiVersion"}), "apiVersion"),
    ] {
        let patch = OverridePatch {
            patch: serde_json::from_value::<json_patch::Patch>(json!([op]))
                .expect("patch")
                .0,
            applied: Vec::new(),
        };
        let e = apply(&deployment(), &patch).expect_err(field);
        assert_eq!(e, OverrideError::Identity { field }, "{e}");
        assert!(!e.to_string().contains("Secret") && !e.to_string().contains("kube-system"));
    }
}
