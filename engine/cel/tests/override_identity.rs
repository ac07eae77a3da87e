//! A CEL override (JSON patch or apply configuration) cannot change the manifest's identity: the
//! override fails for that cluster, naming the field, as a plaintext overrider's would.

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::OverridePolicy;
use flotilla_cel::Engine;
use flotilla_core::overrides::{OverrideError, OverridePolicies, karmada_overrides_with};
use serde_json::{Value, json};

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
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

fn with_cel(cel: Value) -> OverridePolicies {
    let p: OverridePolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "rewrite", "namespace": "default"},
        "spec": {"overrideRules": [{"overriders": {"cel": [cel]}}]}
    }))
    .expect("policy");
    OverridePolicies {
        cluster: Vec::new(),
        namespaced: vec![p],
    }
}

#[test]
fn cel_overrides_cannot_turn_a_deployment_into_a_kube_system_secret() {
    let engine = Engine::default();
    for (cel, path, field) in [
        (
            json!({"patchType": "JSONPatch", "jsonPatch": {"expression":
                "[{'op': 'replace', 'path': '/kind', 'value': 'Secret'}]"}}),
            "/kind",
            "kind",
        ),
        (
            json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "{'metadata': {'namespace': 'kube-system'}}"}}),
            "/metadata/namespace",
            "metadata.namespace",
        ),
        (
            json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "{'apiVersion': 'v1', 'metadata': {'name': clusterName}}"}}),
            "/apiVersion",
            "apiVersion",
        ),
    ] {
        let e = karmada_overrides_with(&deployment(), &cluster(), &with_cel(cel), Some(&engine))
            .expect_err(field);
        let OverrideError::Overrider {
            overrider,
            path: at,
            message,
            ..
        } = &e
        else {
            panic!("not an overrider error: {e}");
        };
        assert_eq!((overrider.as_str(), at.as_str()), ("cel[0]", path), "{e}");
        assert!(message.contains(&format!("cannot change {field} ")), "{e}");
        assert!(!e.to_string().contains("kube-system") && !e.to_string().contains("Secret"));
    }
    // A CEL override of anything else still applies.
    let ok = with_cel(
        json!({"patchType": "ApplyConfiguration", "applyConfiguration": {
        "expression": "{'metadata': {'labels': {'cluster': clusterName}}}"}}),
    );
    assert!(karmada_overrides_with(&deployment(), &cluster(), &ok, Some(&engine)).is_ok());
}
