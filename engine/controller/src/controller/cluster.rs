//! Cluster controller: taints follow the `Ready` condition, as Karmada's cluster controller does
//! with failover enabled (`not-ready` when False, `unreachable` when Unknown or missing; each as
//! NoSchedule and NoExecute, `timeAdded` kept while the taint stays).

use std::sync::Arc;

use flotilla_api::cluster::{Cluster, taint_key};
use flotilla_api::meta::{Taint, effect};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use crate::{Context, Error, typed};

/// The condition-driven taints `cluster` should carry, keeping the other taints and the
/// `timeAdded` of those it already has.
pub fn desired_taints(cluster: &Cluster, now: &str) -> Vec<Taint> {
    let ready = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    let key = match ready {
        Some("True") => None,
        Some("False") => Some(taint_key::NOT_READY),
        _ => Some(taint_key::UNREACHABLE),
    };
    let managed = |t: &Taint| {
        (t.key == taint_key::NOT_READY || t.key == taint_key::UNREACHABLE)
            && (t.effect == effect::NO_SCHEDULE || t.effect == effect::NO_EXECUTE)
    };
    let mut out: Vec<Taint> = cluster
        .spec
        .taints
        .iter()
        .filter(|t| !managed(t) || Some(t.key.as_str()) == key)
        .cloned()
        .collect();
    if let Some(key) = key {
        for eff in [effect::NO_SCHEDULE, effect::NO_EXECUTE] {
            if !out.iter().any(|t| t.key == key && t.effect == eff) {
                out.push(Taint {
                    key: key.to_owned(),
                    value: String::new(),
                    effect: eff.to_owned(),
                    time_added: Some(now.to_owned()),
                });
            }
        }
    }
    out
}

/// Reconcile one Cluster.
///
/// # Errors
/// Fails when the write fails.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let cluster: Cluster = typed(&obj)?;
    let now = flotilla_core::time::format_rfc3339(crate::clock::now_epoch());
    let taints = desired_taints(&cluster, &now);
    if taints != cluster.spec.taints {
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ctx.clusters.resource);
        let patch = json!({"metadata": {"resourceVersion": cluster.metadata.resource_version}, "spec": {"taints": taints}});
        api.patch(
            cluster.name(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    }
    Ok(Action::requeue(ctx.settings.resync))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::cluster::ClusterStatus;
    use flotilla_api::meta::Condition;

    fn cluster(ready: Option<&str>, taints: Vec<Taint>) -> Cluster {
        let mut c = Cluster::default();
        c.spec.taints = taints;
        c.status = Some(ClusterStatus {
            conditions: ready
                .map(|s| Condition {
                    type_: "Ready".into(),
                    status: s.into(),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        });
        c
    }

    fn taint(key: &str, eff: &str, at: &str) -> Taint {
        Taint {
            key: key.into(),
            value: String::new(),
            effect: eff.into(),
            time_added: Some(at.into()),
        }
    }

    #[test]
    fn taints_follow_the_ready_condition_and_keep_their_time_added() {
        let t0 = "2026-01-01T00:00:00Z";
        let t1 = "2026-01-01T00:01:00Z";
        assert!(desired_taints(&cluster(Some("True"), vec![]), t0).is_empty());
        let unknown = desired_taints(&cluster(Some("Unknown"), vec![]), t0);
        assert_eq!(
            unknown,
            vec![
                taint(taint_key::UNREACHABLE, effect::NO_SCHEDULE, t0),
                taint(taint_key::UNREACHABLE, effect::NO_EXECUTE, t0)
            ]
        );
        assert_eq!(
            desired_taints(&cluster(None, vec![]), t0),
            unknown,
            "no Ready condition counts as Unknown"
        );
        // Still unknown a minute later: unchanged, timeAdded kept.
        assert_eq!(
            desired_taints(&cluster(Some("Unknown"), unknown.clone()), t1),
            unknown
        );
        // Unknown -> False swaps the key; user taints survive; True clears ours.
        let user = taint("dedicated", effect::NO_SCHEDULE, t0);
        let mut with_user = unknown.clone();
        with_user.push(user.clone());
        let not_ready = desired_taints(&cluster(Some("False"), with_user.clone()), t1);
        assert_eq!(
            not_ready,
            vec![
                user.clone(),
                taint(taint_key::NOT_READY, effect::NO_SCHEDULE, t1),
                taint(taint_key::NOT_READY, effect::NO_EXECUTE, t1)
            ]
        );
        assert_eq!(
            desired_taints(&cluster(Some("True"), not_ready), t1),
            vec![user]
        );
    }
}
