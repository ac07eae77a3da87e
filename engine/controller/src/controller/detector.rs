//! Detector: a resource template claimed by a (Cluster)PropagationPolicy gets its ResourceBinding.

use std::sync::Arc;

use flotilla_api::Object;
use flotilla_api::labels;
use flotilla_core::detector::{self, PolicyScope};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::objects::namespaced_or_all;
use crate::recorder::{EventType, Regarding};
use crate::{Context, Error, api_resource};

/// The field manager of the detector's writes.
pub const MANAGER: &str = "flotilla-detector";

/// Reconcile one template.
///
/// # Errors
/// Fails when a write fails.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let template = Object(serde_json::to_value(&*obj).map_err(|source| Error::Decode {
        what: "template".into(),
        source,
    })?);
    if detector::is_ignored(&template) || obj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let policies = ctx.propagation_policies();
    let (pps, cpps) = (&policies.0, &policies.1);
    let Some(claim) = detector::claim(&template, pps, cpps) else {
        // Unclaimed: an existing binding stays until the binding controller sees its template go.
        return Ok(Action::await_change());
    };
    let scope = claim.scope;
    let policy = claim.policy.clone();
    // The workload's replicas, requirements and components come from the interpreter chain; a
    // fault is reported on the template (Karmada's GetReplicasFailed/GetComponentsFailed) and no
    // binding is written from it.
    let interpreters = ctx.interpreters.get();
    let rb = match detector::build_binding(&template, claim, &interpreters) {
        Ok(rb) => rb,
        Err(e) => {
            let components = interpreters
                .resolve(
                    &template.0,
                    flotilla_core::interpreter::Operation::InterpretComponent,
                )
                .is_some();
            let reason = if components {
                "GetComponentsFailed"
            } else {
                "GetReplicasFailed"
            };
            let regarding = Regarding {
                api_version: template.api_version().to_owned(),
                kind: template.kind().to_owned(),
                namespace: template.namespace().to_owned(),
                name: template.name().to_owned(),
                uid: obj.metadata.uid.clone().unwrap_or_default(),
            };
            ctx.recorder
                .publish(&regarding, EventType::Warning, reason, &e.to_string());
            tracing::warn!(kind = template.kind(), namespace = template.namespace(), name = template.name(), error = %e, "interpreting the template failed");
            return Err(Error::Apply(format!(
                "interpreting {} {}/{}: {e}",
                template.kind(),
                template.namespace(),
                template.name()
            )));
        }
    };

    // Claim the template (Karmada's policy labels and annotations).
    let (id_key, id) = match scope {
        PolicyScope::Namespaced => (
            labels::PP_PERMANENT_ID,
            rb.metadata
                .labels
                .get(labels::PP_PERMANENT_ID)
                .cloned()
                .unwrap_or_default(),
        ),
        PolicyScope::Cluster => (
            labels::CPP_PERMANENT_ID,
            rb.metadata
                .labels
                .get(labels::CPP_PERMANENT_ID)
                .cloned()
                .unwrap_or_default(),
        ),
    };
    let mut annotations = serde_json::Map::new();
    if scope == PolicyScope::Namespaced {
        annotations.insert(
            labels::PP_NAMESPACE.into(),
            Value::from(policy.metadata.namespace()),
        );
        annotations.insert(labels::PP_NAME.into(), Value::from(policy.metadata.name()));
    } else {
        annotations.insert(labels::CPP_NAME.into(), Value::from(policy.metadata.name()));
    }
    let current = template.labels();
    let current_ann = template.annotations();
    let claimed = current.get(id_key) == Some(&id)
        && annotations
            .iter()
            .all(|(k, v)| current_ann.get(k).map(String::as_str) == v.as_str());
    if !claimed {
        let api: Api<DynamicObject> = namespaced_or_all(
            &ctx,
            template.namespace(),
            &api_resource(template.api_version(), template.kind()),
        );
        let patch = json!({"metadata": {"labels": {id_key: id}, "annotations": annotations}});
        api.patch(
            template.name(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
        // Karmada's event when a policy (newly) claims a template.
        let message = match scope {
            PolicyScope::Namespaced => format!(
                "Apply policy({}/{}) succeed",
                policy.metadata.namespace(),
                policy.metadata.name()
            ),
            PolicyScope::Cluster => {
                format!("Apply cluster policy({}) succeed", policy.metadata.name())
            }
        };
        let regarding = Regarding {
            api_version: template.api_version().to_owned(),
            kind: template.kind().to_owned(),
            namespace: template.namespace().to_owned(),
            name: template.name().to_owned(),
            uid: obj.metadata.uid.clone().unwrap_or_default(),
        };
        ctx.recorder.publish(
            &regarding,
            EventType::Normal,
            "ApplyPolicySucceed",
            &message,
        );
    }

    // The binding: everything but `spec.clusters` (the scheduler's) and status.
    let mut body = serde_json::to_value(&rb).map_err(|source| Error::Decode {
        what: "binding".into(),
        source,
    })?;
    if let Some(spec) = body.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("clusters");
    }
    if let Some(m) = body.as_object_mut() {
        m.remove("status");
    }
    let rb_res = api_resource(&rb.api_version, &rb.kind);
    let api: Api<DynamicObject> = namespaced_or_all(&ctx, rb.metadata.namespace(), &rb_res);
    api.patch(
        rb.metadata.name(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(Action::requeue(ctx.settings.resync))
}
