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
    let gates = ctx.settings.pipeline.gates;
    let Some(claim) = detector::claim_with(&template, pps, cpps, gates.policy_preemption) else {
        // Unclaimed: an existing binding stays until the binding controller sees its template go.
        return Ok(Action::await_change());
    };
    let scope = claim.scope;
    let policy = claim.policy.clone();
    let preempted = claim.preempted.map(|p| p.describe());
    let regarding = Regarding {
        api_version: template.api_version().to_owned(),
        kind: template.kind().to_owned(),
        namespace: template.namespace().to_owned(),
        name: template.name().to_owned(),
        uid: obj.metadata.uid.clone().unwrap_or_default(),
    };
    // The workload's replicas, requirements and components come from the interpreter chain; a
    // fault is reported on the template (Karmada's GetReplicasFailed/GetComponentsFailed) and no
    // binding is written from it.
    let interpreters = ctx.interpreters.get();
    let mut rb = match detector::build_binding(&template, claim, &interpreters, gates) {
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

    // The policy's schedulePriority, resolved from its PriorityClass (Karmada's detector).
    if gates.priority_based_scheduling
        && let Some(sp) = policy.spec.schedule_priority.as_ref()
    {
        let classes = priority_class(&ctx, sp).await?;
        if let Err(e) = flotilla_core::priority::apply(&mut rb, Some(sp), &classes, gates) {
            ctx.recorder
                .publish(&regarding, EventType::Warning, "ApplyPolicyFailed", &e.0);
            tracing::warn!(kind = template.kind(), namespace = template.namespace(), name = template.name(), error = %e, "resolving the policy's schedulePriority failed");
            return Err(Error::Apply(format!(
                "schedulePriority of {} {}/{}: {e}",
                template.kind(),
                template.namespace(),
                template.name()
            )));
        }
    }

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
        // Taken over from another kind of policy: its claim goes (Karmada's Cleanup*ClaimMetadata).
        let mut labels_patch = serde_json::Map::new();
        match scope {
            PolicyScope::Namespaced => {
                labels_patch.insert(labels::CPP_PERMANENT_ID.into(), Value::Null);
                annotations.insert(labels::CPP_NAME.into(), Value::Null);
            }
            PolicyScope::Cluster => {
                labels_patch.insert(labels::PP_PERMANENT_ID.into(), Value::Null);
                annotations.insert(labels::PP_NAMESPACE.into(), Value::Null);
                annotations.insert(labels::PP_NAME.into(), Value::Null);
            }
        }
        labels_patch.insert(id_key.into(), Value::from(id));
        let patch = json!({"metadata": {"labels": labels_patch, "annotations": annotations}});
        let claimed = api
            .patch(
                template.name(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
        // The binding refers to the template as claimed: what the claim's own change would
        // write into it on the next reconcile (a second binding generation, and a second
        // rendering of its Works) is written now.
        if let Some(rv) = claimed.metadata.resource_version {
            rb.spec.resource.resource_version = rv;
        }
        if let Some(from) = &preempted {
            // Karmada's PreemptPolicySucceed, worded as its detector words it.
            let by = match scope {
                PolicyScope::Namespaced => format!(
                    "Propagation policy({}/{})",
                    policy.metadata.namespace(),
                    policy.metadata.name()
                ),
                PolicyScope::Cluster => {
                    format!("Cluster propagation policy({})", policy.metadata.name())
                }
            };
            let message = format!("{by} preempted {from} successfully");
            tracing::info!(kind = template.kind(), namespace = template.namespace(), name = template.name(), %message, "policy preemption");
            ctx.recorder.publish(
                &regarding,
                EventType::Normal,
                "PreemptPolicySucceed",
                &message,
            );
        }
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

/// The PriorityClass `schedule_priority` names, read from the API server as Karmada's detector
/// does (`GetPriorityClassByName`); empty when it does not exist (resolution then fails with
/// Karmada's not-found message).
async fn priority_class(
    ctx: &Context,
    schedule_priority: &Value,
) -> Result<Vec<flotilla_core::priority::PriorityClass>, Error> {
    let Some(name) = schedule_priority
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && n.len() <= 253)
    else {
        return Ok(Vec::new());
    };
    let api: Api<DynamicObject> = Api::all_with(
        ctx.client.clone(),
        &api_resource("scheduling.k8s.io/v1", "PriorityClass"),
    );
    let Some(pc) = api.get_opt(name).await? else {
        return Ok(Vec::new());
    };
    let v = serde_json::to_value(&pc).map_err(|source| Error::Decode {
        what: "PriorityClass".into(),
        source,
    })?;
    Ok(flotilla_core::priority::PriorityClass::from_object(&v)
        .into_iter()
        .collect())
}
