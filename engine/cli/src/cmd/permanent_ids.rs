//! The permanent-id labels Karmada's mutating webhooks put on new objects: a random UUID under
//! `<kind>.karmada.io/permanent-id` on a created (Cluster)PropagationPolicy,
//! (Cluster)ResourceBinding and Work, unless the creator set one.
//!
//! Karmada's own components depend on them: karmada-scheduler only queues bindings carrying a
//! non-empty policy permanent-id, which karmada-controller-manager's detector copies from the
//! policy, so without them Karmada's control plane run against the embedded server never
//! schedules. Flotilla's controllers keep their own deterministic ids when they set one.

use flotilla_api::labels;
use flotilla_apiserver::admission::Operation;
use serde_json::{Map, Value};

/// The label `resource` (group, kind) gets on create, if any.
fn key(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("policy.karmada.io", "PropagationPolicy") => Some(labels::PP_PERMANENT_ID),
        ("policy.karmada.io", "ClusterPropagationPolicy") => Some(labels::CPP_PERMANENT_ID),
        ("work.karmada.io", "ResourceBinding") => Some(labels::RB_PERMANENT_ID),
        ("work.karmada.io", "ClusterResourceBinding") => Some(labels::CRB_PERMANENT_ID),
        ("work.karmada.io", "Work") => Some(labels::WORK_PERMANENT_ID),
        _ => None,
    }
}

/// On create, label `object` with a fresh permanent id when its kind has one and the label is
/// absent or empty. Updates never change it (as Karmada's webhooks, which only act on create).
pub(super) fn assign(op: Operation, group: &str, kind: &str, object: &mut Value) {
    if op != Operation::Create {
        return;
    }
    let Some(key) = key(group, kind) else { return };
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if labels.is_null() {
        *labels = Value::Object(Map::new());
    }
    let Some(labels) = labels.as_object_mut() else {
        return;
    };
    let set = labels
        .get(key)
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty());
    if !set {
        labels.insert(
            key.to_owned(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(obj: &Value, key: &str) -> Option<String> {
        obj.pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    #[test]
    fn created_policies_bindings_and_works_get_a_uuid() {
        for (group, kind, key) in [
            (
                "policy.karmada.io",
                "PropagationPolicy",
                labels::PP_PERMANENT_ID,
            ),
            (
                "policy.karmada.io",
                "ClusterPropagationPolicy",
                labels::CPP_PERMANENT_ID,
            ),
            (
                "work.karmada.io",
                "ResourceBinding",
                labels::RB_PERMANENT_ID,
            ),
            (
                "work.karmada.io",
                "ClusterResourceBinding",
                labels::CRB_PERMANENT_ID,
            ),
            ("work.karmada.io", "Work", labels::WORK_PERMANENT_ID),
        ] {
            let mut a = json!({"metadata": {"name": "x"}});
            let mut b = json!({"metadata": {"name": "x", "labels": null}});
            assign(Operation::Create, group, kind, &mut a);
            assign(Operation::Create, group, kind, &mut b);
            let (a, b) = (id(&a, key).expect(kind), id(&b, key).expect(kind));
            assert!(uuid::Uuid::parse_str(&a).is_ok(), "{kind}: {a}");
            assert_ne!(a, b, "{kind}: each object its own id");
        }
    }

    #[test]
    fn set_ids_updates_and_other_kinds_are_left_alone() {
        let key = labels::PP_PERMANENT_ID;
        let mut kept = json!({"metadata": {"labels": {key: "mine", "a": "b"}}});
        assign(
            Operation::Create,
            "policy.karmada.io",
            "PropagationPolicy",
            &mut kept,
        );
        assert_eq!(
            kept,
            json!({"metadata": {"labels": {key: "mine", "a": "b"}}})
        );
        let mut empty = json!({"metadata": {"labels": {key: ""}}});
        assign(
            Operation::Create,
            "policy.karmada.io",
            "PropagationPolicy",
            &mut empty,
        );
        assert!(id(&empty, key).is_some_and(|v| !v.is_empty()));
        let mut update = json!({"metadata": {}});
        assign(
            Operation::Update,
            "policy.karmada.io",
            "PropagationPolicy",
            &mut update,
        );
        assert_eq!(update, json!({"metadata": {}}));
        let mut other = json!({"metadata": {}});
        assign(Operation::Create, "apps", "Deployment", &mut other);
        assign(
            Operation::Create,
            "policy.karmada.io",
            "OverridePolicy",
            &mut other,
        );
        assert_eq!(other, json!({"metadata": {}}));
    }
}
