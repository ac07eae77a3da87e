//! Admission for `autoscaling.karmada.io/v1alpha1`, as Karmada's webhooks:
//!
//! | kind | defaults | checks |
//! |---|---|---|
//! | FederatedHPA | `minReplicas` 1, CPU at 80 % without metrics, `behavior` directions completed | min ≤ max, the target reference, each metric's source and target, the policies |
//! | CronFederatedHPA | — | unique rule names, five-field cron schedules, known time zones, replicas for the target's kind |
//!
//! The defaults and checks are `flotilla_core::autoscaling::spec`'s; errors name the field.

use flotilla_api::autoscaling::{CronFederatedHPASpec, FederatedHPASpec};
use flotilla_apiserver::admission::{AdmissionError, FieldError};
use flotilla_core::autoscaling::spec;
use serde_json::Value;

fn typed_spec<T: serde::de::DeserializeOwned>(object: &Value) -> Result<T, AdmissionError> {
    let Some(s) = object.get("spec") else {
        return Err(AdmissionError::field("spec", "Required value"));
    };
    serde_path_to_error::deserialize(s.clone()).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "spec".to_owned()
        } else {
            format!("spec.{path}")
        };
        AdmissionError::field(field, e.into_inner().to_string())
    })
}

fn result(errors: Vec<flotilla_core::validate::FieldError>) -> Result<(), AdmissionError> {
    if errors.is_empty() {
        return Ok(());
    }
    Err(AdmissionError::new(
        errors
            .into_iter()
            .map(|e| FieldError {
                field: e.field,
                message: e.message,
            })
            .collect(),
    ))
}

/// Default and validate a FederatedHPA (Karmada's mutating then validating webhook).
pub fn federated_hpa(object: &mut Value) -> Result<(), AdmissionError> {
    let mut s: FederatedHPASpec = typed_spec(object)?;
    spec::set_defaults(&mut s);
    result(spec::validate_federated_hpa(&s))?;
    object["spec"] = serde_json::to_value(&s).map_err(|e| {
        AdmissionError::field("spec", format!("cannot encode the defaulted spec: {e}"))
    })?;
    Ok(())
}

/// Validate a CronFederatedHPA (Karmada's validating webhook).
pub fn cron_federated_hpa(object: &Value) -> Result<(), AdmissionError> {
    let s: CronFederatedHPASpec = typed_spec(object)?;
    result(spec::validate_cron_federated_hpa(&s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn federated_hpas_are_defaulted_and_checked() {
        let mut o = json!({"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 4}});
        federated_hpa(&mut o).expect("admitted");
        assert_eq!(o["spec"]["minReplicas"], 1);
        assert_eq!(
            o["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        let mut bad = o.clone();
        bad["spec"]["minReplicas"] = json!(9);
        let e = federated_hpa(&mut bad).expect_err("min > max");
        assert_eq!(e.causes[0].field, "spec.maxReplicas");
        let mut typo = o;
        typo["spec"]["maxReplica"] = json!(3);
        let e = federated_hpa(&mut typo).expect_err("unknown field");
        assert!(e.causes[0].message.contains("maxReplica"), "{e:?}");
    }

    #[test]
    fn cron_federated_hpas_are_checked() {
        let o = json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "rules": [{"name": "r", "schedule": "0 25 * * *", "targetReplicas": 2, "timeZone": "Nowhere/City"}]}});
        let e = cron_federated_hpa(&o).expect_err("bad hour and zone");
        let fields: Vec<&str> = e.causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["spec.rules[0].schedule", "spec.rules[0].timeZone"]
        );
    }
}
