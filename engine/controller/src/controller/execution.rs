//! Execution controller: a Work's manifests are server-side applied into its member cluster; the
//! Work reports `Applied` and the members' status (`manifestStatuses`); a deleted Work removes
//! its manifests from the member unless `preserveResourcesOnDeletion`.
//!
//! The control plane runs it for Push clusters; a Pull cluster's Works are left to the
//! `flotilla agent` in that member, which runs the same [`reconcile_work`] for its own
//! execution namespace only.

use std::sync::Arc;
use std::time::Duration;

use flotilla_api::labels;
use flotilla_core::interpreter::{Interpreters, Operation};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use crate::{Context, Error, Members, api_resource};

/// The field manager of writes into members.
pub const MANAGER: &str = "flotilla-execution-controller";

/// The string at JSON pointer `p` of `manifest` ("" when absent or not a string).
fn text_at(manifest: &Value, p: &str) -> String {
    manifest
        .pointer(p)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn member_api(client: &kube::Client, manifest: &Value) -> (Api<DynamicObject>, String) {
    let s = |p: &str| text_at(manifest, p);
    let res = api_resource(&s("/apiVersion"), &s("/kind"));
    let ns = s("/metadata/namespace");
    let api = if ns.is_empty() {
        Api::all_with(client.clone(), &res)
    } else {
        Api::namespaced_with(client.clone(), &ns, &res)
    };
    (api, s("/metadata/name"))
}

/// What the execution controller needs: where Works live and how to reach the members.
#[derive(Clone)]
pub struct Executor {
    /// The control plane (Works and their status).
    pub control: kube::Client,
    /// The Work resource.
    pub works: kube::api::ApiResource,
    /// The members Works are applied to.
    pub members: Members,
    /// Requeue interval of applied Works.
    pub resync: Duration,
    /// Retry interval while a Work's member has no client yet.
    pub retry: Duration,
    /// The resource interpreter chain (Retain before updates, status reflection, health).
    pub interpreters: Interpreters,
    /// Where interpreter faults are reported, as Events on the Work (Karmada's work status
    /// controller's `ReflectStatusFailed` and `InterpretHealthFailed`).
    pub recorder: crate::recorder::Recorder,
    /// Where the watches of applied kinds in the members ([`Members::watch`]) publish their
    /// objects' changes, which re-check the Works that applied them.
    pub events: crate::Bus,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

/// Reconcile one Work on the control plane (Works of Pull clusters are left to their agent).
///
/// # Errors
/// Fails when a request to the control plane or the member fails.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = obj.metadata.namespace.as_deref().unwrap_or_default();
    // Simulated members are served in process whatever their Cluster object says.
    if let Some(cluster) = ns.strip_prefix(labels::EXECUTION_NAMESPACE_PREFIX)
        && !ctx.members.is_fixed(cluster)
        && ctx.clusters.get("", cluster).is_some_and(|c| {
            c.data.pointer("/spec/syncMode").and_then(Value::as_str) == Some("Pull")
        })
    {
        return Ok(Action::await_change());
    }
    let executor = Executor {
        control: ctx.client.clone(),
        works: ctx.works.resource.clone(),
        members: ctx.members.clone(),
        resync: ctx.settings.resync,
        retry: ctx
            .settings
            .cluster_status_update_frequency
            .min(ctx.settings.resync),
        interpreters: ctx.interpreters.get(),
        recorder: ctx.recorder.clone(),
        events: ctx.events.clone(),
    };
    reconcile_work(&obj, &executor).await
}

/// Reconcile one Work with `ex`.
///
/// # Errors
/// Fails when a request to the control plane or the member fails.
pub async fn reconcile_work(obj: &DynamicObject, ex: &Executor) -> Result<Action, Error> {
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    let Some(cluster) = ns.strip_prefix(labels::EXECUTION_NAMESPACE_PREFIX) else {
        return Ok(Action::await_change());
    };
    let works: Api<DynamicObject> = Api::namespaced_with(ex.control.clone(), &ns, &ex.works);
    let finalizers = obj.metadata.finalizers.clone().unwrap_or_default();
    let has_finalizer = finalizers.iter().any(|f| f == labels::EXECUTION_FINALIZER);
    let manifests: Vec<Value> = obj
        .data
        .pointer("/spec/workload/manifests")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let member = ex.members.get(cluster);

    if obj.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        let preserve = obj
            .data
            .pointer("/spec/preserveResourcesOnDeletion")
            .and_then(Value::as_bool)
            == Some(true);
        if let (Some(client), false) = (&member, preserve) {
            for m in &manifests {
                let (api, n) = member_api(client, m);
                match api.delete(&n, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let rest: Vec<&String> = finalizers
            .iter()
            .filter(|f| *f != labels::EXECUTION_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": obj.metadata.resource_version}});
        match works
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(Action::await_change());
    }

    if !has_finalizer {
        let mut all = finalizers.clone();
        all.push(labels::EXECUTION_FINALIZER.to_owned());
        let patch = json!({"metadata": {"finalizers": all, "resourceVersion": obj.metadata.resource_version}});
        works
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        // The update comes back as a watch event.
        return Ok(Action::await_change());
    }
    if obj
        .data
        .pointer("/spec/suspendDispatching")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Ok(Action::await_change());
    }

    let Some(client) = &member else {
        write_status(
            &works,
            &name,
            obj,
            Err(format!("no client for member cluster {cluster:?}")),
            Vec::new(),
        )
        .await?;
        return Ok(Action::requeue(ex.retry));
    };
    let pp = PatchParams::apply(MANAGER).force();
    let mut manifest_statuses = Vec::new();
    let mut failure = None;
    for (ordinal, m) in manifests.iter().enumerate() {
        let (api, n) = member_api(client, m);
        let mns = m
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        // Read (and made) once per member and namespace, not before every apply: an apply that
        // finds the namespace gone forgets it, and the retry makes it again.
        if let Some(mns) = mns
            && !ex.members.namespace_known(cluster, mns)
        {
            let nss: Api<DynamicObject> =
                Api::all_with(client.clone(), &api_resource("v1", "Namespace"));
            if nss.get_opt(mns).await?.is_none() {
                nss.patch(
                    mns,
                    &pp,
                    &Patch::Apply(
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": mns}}),
                    ),
                )
                .await?;
            }
            ex.members.namespace_exists(cluster, mns);
        }
        // An existing member copy keeps what the member owns (Karmada's Retain before update),
        // read and written at one resourceVersion: a member change in between is retained on
        // the next try, never overwritten.
        let mut attempts = 0;
        let outcome = loop {
            let desired = match retained(&api, &n, m, &ex.interpreters).await {
                Ok(d) => d,
                Err(e) => break Err(e),
            };
            match api.patch(&n, &pp, &Patch::Apply(&desired)).await {
                Err(kube::Error::Api(s)) if s.code == 409 && attempts < 3 => attempts += 1,
                r => {
                    if let (Err(kube::Error::Api(s)), Some(mns)) = (&r, mns)
                        && s.code == 404
                    {
                        ex.members.namespace_gone(cluster, mns);
                    }
                    break r.map_err(|e| {
                        format!(
                            "applying {} {n}: {e}",
                            m.get("kind").and_then(Value::as_str).unwrap_or("")
                        )
                    });
                }
            }
        };
        match outcome {
            Ok(applied) => {
                // The copy's later changes (its status) re-check this Work, whatever its kind.
                ex.members.watch(
                    cluster,
                    &api_resource(&text_at(m, "/apiVersion"), &text_at(m, "/kind")),
                    &ex.events,
                );
                manifest_statuses.push(manifest_status(ordinal, m, &applied, obj, ex));
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let result = match &failure {
        Some(f) => Err(f.clone()),
        None => Ok(()),
    };
    write_status(&works, &name, obj, result, manifest_statuses).await?;
    match failure {
        Some(f) => Err(Error::Apply(f)),
        None => Ok(Action::requeue(ex.resync)),
    }
}

/// `manifest` with the member-side fields of the existing member copy retained, when the
/// interpreter chain retains anything for its kind and the copy exists.
async fn retained(
    api: &Api<DynamicObject>,
    name: &str,
    manifest: &Value,
    interpreters: &Interpreters,
) -> Result<Value, String> {
    if interpreters.resolve(manifest, Operation::Retain).is_none() {
        return Ok(manifest.clone());
    }
    let kind = manifest.get("kind").and_then(Value::as_str).unwrap_or("");
    let observed = match api.get_opt(name).await {
        Ok(Some(o)) => o,
        Ok(None) => return Ok(manifest.clone()),
        Err(e) => return Err(format!("reading {kind} {name}: {e}")),
    };
    let version = observed.metadata.resource_version.clone();
    let observed = serde_json::to_value(&observed).map_err(|e| format!("{kind} {name}: {e}"))?;
    let mut desired = interpreters
        .retain(manifest, &observed)
        .map_err(|e| format!("retaining {kind} {name}: {e}"))?;
    // Retained from this version of the copy: applied only over it (409 otherwise).
    if let (Some(v), Some(meta)) = (
        version,
        desired.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        meta.insert("resourceVersion".into(), Value::from(v));
    }
    Ok(desired)
}

/// A `manifestStatuses` entry for the applied member object: its status as the interpreter chain
/// reflects it, and its health (Karmada's work status controller: a kind nobody interprets is
/// `Healthy`, an interpreter fault `Unknown`).
fn manifest_status(
    ordinal: usize,
    manifest: &Value,
    applied: &DynamicObject,
    work: &DynamicObject,
    ex: &Executor,
) -> Value {
    use crate::recorder::{EventType, Regarding};
    let interpreters = &ex.interpreters;
    let regarding = Regarding {
        api_version: "work.karmada.io/v1alpha1".into(),
        kind: "Work".into(),
        namespace: work.metadata.namespace.clone().unwrap_or_default(),
        name: work.metadata.name.clone().unwrap_or_default(),
        uid: work.metadata.uid.clone().unwrap_or_default(),
    };
    let object = format!(
        "{}/{}/{}",
        text_at(manifest, "/kind"),
        text_at(manifest, "/metadata/namespace"),
        text_at(manifest, "/metadata/name")
    );
    let s = |p: &str| text_at(manifest, p);
    let api_version = s("/apiVersion");
    let (group, version) = api_version
        .split_once('/')
        .map(|(g, v)| (g.to_owned(), v.to_owned()))
        .unwrap_or((String::new(), api_version.clone()));
    let mut observed = serde_json::to_value(applied).unwrap_or(Value::Null);
    // The applied object is typed by its manifest (a member may leave them off).
    if let Some(o) = observed.as_object_mut() {
        o.insert("apiVersion".into(), Value::from(api_version.clone()));
        o.insert("kind".into(), Value::from(s("/kind")));
    }
    let status = match interpreters.reflect_status(&observed) {
        Ok(st) => st.unwrap_or(Value::Null),
        Err(e) => {
            tracing::warn!(kind = %s("/kind"), name = %s("/metadata/name"), error = %e, "reflecting the member status failed");
            ex.recorder.publish(
                &regarding,
                EventType::Warning,
                "ReflectStatusFailed",
                &format!("Reflect status for object({object}) failed, err: {e}."),
            );
            Value::Null
        }
    };
    let health = match interpreters.interpret_health(&observed) {
        Ok(None) | Ok(Some(true)) => "Healthy",
        Ok(Some(false)) => "Unhealthy",
        Err(e) => {
            tracing::warn!(kind = %s("/kind"), name = %s("/metadata/name"), error = %e, "interpreting the member health failed");
            ex.recorder.publish(
                &regarding,
                EventType::Warning,
                "InterpretHealthFailed",
                &format!("Interpret health of object({object}) failed, err: {e}."),
            );
            "Unknown"
        }
    };
    json!({
        "identifier": {"ordinal": ordinal, "group": group, "version": version, "kind": s("/kind"), "namespace": s("/metadata/namespace"), "name": s("/metadata/name")},
        "status": status,
        "health": health,
    })
}

async fn write_status(
    works: &Api<DynamicObject>,
    name: &str,
    obj: &DynamicObject,
    result: Result<(), String>,
    manifest_statuses: Vec<Value>,
) -> Result<(), Error> {
    let (status, reason, message) = match &result {
        Ok(()) => (
            "True",
            "AppliedSuccessful",
            "Manifest has been successfully applied".to_owned(),
        ),
        Err(m) => ("False", "AppliedFailed", m.clone()),
    };
    let current = obj.data.get("status");
    let old_cond = current
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Applied"))
        });
    let same_cond = old_cond.is_some_and(|c| {
        c.get("status").and_then(Value::as_str) == Some(status)
            && c.get("reason").and_then(Value::as_str) == Some(reason)
            && c.get("message").and_then(Value::as_str) == Some(message.as_str())
    });
    let old_manifests = current
        .and_then(|s| s.get("manifestStatuses"))
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let manifests = Value::Array(manifest_statuses);
    if same_cond && (old_manifests == manifests || result.is_err()) {
        return Ok(());
    }
    let time = match old_cond {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => {
            c.get("lastTransitionTime").cloned().unwrap_or(Value::Null)
        }
        _ => Value::from(flotilla_core::time::format_rfc3339(
            crate::clock::now_epoch(),
        )),
    };
    let mut s = json!({"conditions": [{"type": "Applied", "status": status, "reason": reason, "message": message, "lastTransitionTime": time}]});
    if result.is_ok() {
        s["manifestStatuses"] = manifests;
    }
    works
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": s})),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Work applying a ConfigMap into namespace `team-a` of member `m1`.
    fn work() -> Value {
        json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "w1", "namespace": "karmada-es-m1",
                         "finalizers": [labels::EXECUTION_FINALIZER]},
            "spec": {"workload": {"manifests": [{
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "copy", "namespace": "team-a"},
                "data": {"k": "v"},
            }]}},
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_namespace_is_read_once_and_made_again_when_it_goes() {
        let (_dir, server, members) = crate::client::simulated_for_test(&["m1"]);
        let control = crate::client::in_process(server.router(), None, None);
        let pp = PatchParams::apply("test");
        let nss: Api<DynamicObject> =
            Api::all_with(control.clone(), &api_resource("v1", "Namespace"));
        nss.patch(
            "karmada-es-m1",
            &pp,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-es-m1"}})),
        )
        .await
        .expect("execution namespace");
        let works_resource = api_resource("work.karmada.io/v1alpha1", "Work");
        let works: Api<DynamicObject> =
            Api::namespaced_with(control.clone(), "karmada-es-m1", &works_resource);
        let ex = Executor {
            control: control.clone(),
            works: works_resource,
            members: members.clone(),
            resync: Duration::from_secs(3600),
            retry: Duration::from_secs(1),
            interpreters: flotilla_plugins::interpreter::chain(Vec::new(), Vec::new()),
            recorder: crate::recorder::Recorder::new(control.clone(), MANAGER),
            events: crate::Bus::default(),
        };
        let reconcile = || async {
            let w = works
                .patch("w1", &pp, &Patch::Apply(work()))
                .await
                .expect("work");
            reconcile_work(&w, &ex).await
        };
        let member = members.get("m1").expect("m1");
        let member_nss: Api<DynamicObject> =
            Api::all_with(member.clone(), &api_resource("v1", "Namespace"));
        let copies: Api<DynamicObject> =
            Api::namespaced_with(member, "team-a", &api_resource("v1", "ConfigMap"));

        assert!(!members.namespace_known("m1", "team-a"));
        reconcile().await.expect("applied");
        assert!(
            member_nss.get_opt("team-a").await.expect("read").is_some(),
            "made"
        );
        assert!(copies.get_opt("copy").await.expect("read").is_some());
        assert!(members.namespace_known("m1", "team-a"), "and remembered");

        // Gone behind the controller's back: the apply fails, the namespace is forgotten, and
        // the retry makes it again.
        member_nss
            .delete("team-a", &DeleteParams::default())
            .await
            .expect("namespace deleted");
        for _ in 0..250 {
            if member_nss.get_opt("team-a").await.expect("read").is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            member_nss.get_opt("team-a").await.expect("read").is_none(),
            "deleted within 5 s"
        );
        assert!(reconcile().await.is_err(), "the namespace is gone");
        assert!(!members.namespace_known("m1", "team-a"));
        reconcile().await.expect("applied again");
        assert!(copies.get_opt("copy").await.expect("read").is_some());
        assert!(members.namespace_known("m1", "team-a"));
    }
}
