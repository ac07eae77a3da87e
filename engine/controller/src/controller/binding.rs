//! Binding controller: a scheduled ResourceBinding gets one Work per target cluster (overrides
//! applied); orphaned Works are deleted; Work status is aggregated into the binding and the
//! template; a deleted template takes its binding (and so its Works) with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flotilla_api::Object;
use flotilla_api::labels;
use flotilla_api::work::{AggregatedStatusItem, ResourceBinding};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::objects::{namespaced_or_all, template_of};
use crate::recorder::EventType;
use crate::{Context, Error, api_resource, typed};

/// The field manager of the binding controller's writes.
pub const MANAGER: &str = "flotilla-binding-controller";

/// The binding's permanent-id label key and value.
fn binding_id(rb: &ResourceBinding) -> (&'static str, String) {
    let key = if rb.kind == "ResourceBinding" {
        labels::RB_PERMANENT_ID
    } else {
        labels::CRB_PERMANENT_ID
    };
    (
        key,
        rb.metadata.labels.get(key).cloned().unwrap_or_default(),
    )
}

/// The key the Work cache indexes Works by: their binding's permanent id.
pub fn work_binding_id(w: &DynamicObject) -> Option<String> {
    let l = w.metadata.labels.as_ref()?;
    l.get(labels::RB_PERMANENT_ID)
        .or_else(|| l.get(labels::CRB_PERMANENT_ID))
        .filter(|id| !id.is_empty())
        .cloned()
}

/// The Works of `rb`, from the cache (through its index by binding id).
pub fn works_of(ctx: &Context, rb: &ResourceBinding) -> Vec<Arc<DynamicObject>> {
    let (key, id) = binding_id(rb);
    if id.is_empty() {
        return Vec::new();
    }
    let Some(index) = &ctx.works.index else {
        return ctx
            .works
            .store
            .state()
            .into_iter()
            .filter(|w| w.metadata.labels.as_ref().and_then(|l| l.get(key)) == Some(&id))
            .collect();
    };
    let mut works: Vec<Arc<DynamicObject>> = index
        .get(&id)
        .into_iter()
        .filter_map(|(ns, name)| ctx.works.get(&ns, &name))
        .filter(|w| w.metadata.labels.as_ref().and_then(|l| l.get(key)) == Some(&id))
        .collect();
    works.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    works
}

/// Whether the cached Work already is what `body` (a rendered Work) would apply: same spec, and
/// every rendered label, annotation and finalizer present.
fn up_to_date(cached: &DynamicObject, body: &Value) -> bool {
    if cached.metadata.deletion_timestamp.is_some() || cached.data.get("spec") != body.get("spec") {
        return false;
    }
    let meta = body.get("metadata");
    let subset = |field: &str, have: Option<&BTreeMap<String, String>>| {
        meta.and_then(|m| m.get(field))
            .and_then(Value::as_object)
            .is_none_or(|want| {
                want.iter()
                    .all(|(k, v)| have.and_then(|h| h.get(k)).map(String::as_str) == v.as_str())
            })
    };
    let finalizers = meta
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .is_none_or(|want| {
            want.iter().all(|f| {
                cached
                    .metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|have| have.iter().any(|h| Some(h.as_str()) == f.as_str()))
            })
        });
    subset("labels", cached.metadata.labels.as_ref())
        && subset("annotations", cached.metadata.annotations.as_ref())
        && finalizers
}

async fn delete_work(ctx: &Context, w: &DynamicObject) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        w.metadata.namespace.as_deref().unwrap_or(""),
        &ctx.works.resource,
    );
    match api
        .delete(
            w.metadata.name.as_deref().unwrap_or(""),
            &DeleteParams::default(),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Reconcile one binding.
///
/// # Errors
/// Fails when a request fails or a Work cannot be rendered.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let rb: ResourceBinding = typed(&obj)?;
    let rb_api = namespaced_or_all(
        &ctx,
        rb.metadata.namespace(),
        &api_resource(&rb.api_version, &rb.kind),
    );
    let finalizer = if rb.kind == "ResourceBinding" {
        labels::BINDING_FINALIZER
    } else {
        labels::CLUSTER_BINDING_FINALIZER
    };

    if rb.metadata.deletion_timestamp.is_some() {
        let works = works_of(&ctx, &rb);
        for w in &works {
            if w.metadata.deletion_timestamp.is_none() {
                delete_work(&ctx, w).await?;
            }
        }
        if works.is_empty() && rb.metadata.finalizers.iter().any(|f| f == finalizer) {
            let rest: Vec<&String> = rb
                .metadata
                .finalizers
                .iter()
                .filter(|f| *f != finalizer)
                .collect();
            let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": rb.metadata.resource_version}});
            match rb_api
                .patch(
                    rb.metadata.name(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        return Ok(Action::await_change());
    }

    // The template: from the cache, confirmed live before concluding it is gone.
    let template = template_of(&ctx, &rb).await?;
    let template = match template {
        Some(t) => t,
        _ => {
            tracing::info!(
                binding = rb.metadata.name(),
                "template gone; deleting its binding"
            );
            match rb_api
                .delete(rb.metadata.name(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::await_change());
        }
    };
    let template = Object(
        serde_json::to_value(&*template).map_err(|source| Error::Decode {
            what: "template".into(),
            source,
        })?,
    );

    // Render and apply the Works.
    let snapshot = ctx.snapshot();
    let policies = ctx.overrides();
    // A `Directly` eviction removes the old copy before any new Work is created.
    let works = works_of(&ctx, &rb);
    let purged: BTreeSet<String> = flotilla_core::failover::purged_directly(&rb)
        .into_iter()
        .map(flotilla_core::render::execution_namespace)
        .collect();
    let mut waiting = false;
    for w in works
        .iter()
        .filter(|w| purged.contains(w.metadata.namespace.as_deref().unwrap_or("")))
    {
        waiting = true;
        if w.metadata.deletion_timestamp.is_none() {
            delete_work(&ctx, w).await?;
        }
    }
    if waiting {
        return Ok(Action::requeue(std::time::Duration::from_millis(200)));
    }
    let rendered = flotilla_core::pipeline::render(&snapshot, &rb, &template, &policies);
    let mut desired = BTreeSet::new();
    let mut failures = Vec::new();
    // A Work was created or changed: worth an event (unchanged resyncs are not).
    let mut synced = false;
    for r in rendered {
        match r {
            Ok(work) => {
                let ns = work.metadata.namespace().to_owned();
                let name = work.metadata.name().to_owned();
                let mut body = serde_json::to_value(&work).map_err(|source| Error::Decode {
                    what: "work".into(),
                    source,
                })?;
                if let Some(m) = body.as_object_mut() {
                    m.remove("status");
                }
                // Unchanged Works are not re-applied: no request, no new revision, no watch event.
                if !ctx
                    .works
                    .get(&ns, &name)
                    .is_some_and(|cached| up_to_date(&cached, &body))
                {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(ctx.client.clone(), &ns, &ctx.works.resource);
                    api.patch(
                        &name,
                        &PatchParams::apply(MANAGER).force(),
                        &Patch::Apply(body),
                    )
                    .await?;
                    synced = true;
                }
                desired.insert((ns, name));
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    // Orphans go, except the copies eviction tasks keep until the new placement is healthy.
    let retained: BTreeSet<String> = flotilla_core::failover::retained_by_eviction(&rb)
        .into_iter()
        .map(flotilla_core::render::execution_namespace)
        .collect();
    for w in &works {
        let key = (
            w.metadata.namespace.clone().unwrap_or_default(),
            w.metadata.name.clone().unwrap_or_default(),
        );
        if !desired.contains(&key)
            && !retained.contains(&key.0)
            && w.metadata.deletion_timestamp.is_none()
        {
            delete_work(&ctx, w).await?;
        }
    }

    // Aggregate Work status into the binding, then into the template.
    let mut items: Vec<AggregatedStatusItem> = works
        .iter()
        .filter(|w| {
            desired.contains(&(
                w.metadata.namespace.clone().unwrap_or_default(),
                w.metadata.name.clone().unwrap_or_default(),
            ))
        })
        .map(|w| aggregated_item(w))
        .collect();
    items.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
    let current = rb
        .status
        .as_ref()
        .map(|s| s.aggregated_status.clone())
        .unwrap_or_default();
    if items != current {
        let patch = json!({"status": {"aggregatedStatus": items}});
        rb_api
            .patch_status(
                rb.metadata.name(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
    }
    aggregate_into_template(
        &ctx,
        &template,
        &api_resource(&rb.spec.resource.api_version, &rb.spec.resource.kind),
        &items,
    )
    .await?;

    if !failures.is_empty() {
        let message = failures.join("; ");
        ctx.recorder
            .publish_binding(&rb, EventType::Warning, "SyncWorkFailed", &message);
        return Err(Error::Render(message));
    }
    if synced {
        // Karmada's messages.
        let message = if rb.metadata.namespace().is_empty() {
            format!(
                "Sync work of {}({}) successful.",
                rb.kind,
                rb.metadata.name()
            )
        } else {
            format!(
                "Sync work of {}({}/{}) successful.",
                rb.kind,
                rb.metadata.namespace(),
                rb.metadata.name()
            )
        };
        ctx.recorder
            .publish_binding(&rb, EventType::Normal, "SyncWorkSucceed", &message);
    }
    Ok(Action::requeue(ctx.settings.resync))
}

/// One cluster's entry of `status.aggregatedStatus`, from its Work.
pub fn aggregated_item(w: &DynamicObject) -> AggregatedStatusItem {
    let ns = w.metadata.namespace.as_deref().unwrap_or("");
    let cluster = ns
        .strip_prefix(labels::EXECUTION_NAMESPACE_PREFIX)
        .unwrap_or(ns)
        .to_owned();
    let status = w.data.get("status");
    let applied_cond = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Applied"))
        });
    let applied = applied_cond
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True");
    let applied_message = if applied {
        String::new()
    } else {
        applied_cond
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let manifest = status
        .and_then(|s| s.get("manifestStatuses"))
        .and_then(Value::as_array)
        .and_then(|m| m.first());
    AggregatedStatusItem {
        cluster_name: cluster,
        status: manifest
            .and_then(|m| m.get("status"))
            .cloned()
            .filter(|s| !s.is_null()),
        applied,
        applied_message,
        health: manifest
            .and_then(|m| m.get("health"))
            .and_then(Value::as_str)
            .unwrap_or("Unknown")
            .to_owned(),
    }
}

/// The fields Karmada's default interpreter sums for workloads.
const SUMMED: &[&str] = &[
    "replicas",
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "unavailableReplicas",
    "currentReplicas",
];

/// Write the summed member status into the template (Deployment, StatefulSet, ReplicaSet).
async fn aggregate_into_template(
    ctx: &Context,
    template: &Object,
    resource: &kube::api::ApiResource,
    items: &[AggregatedStatusItem],
) -> Result<(), Error> {
    if template.api_version() != "apps/v1"
        || !matches!(template.kind(), "Deployment" | "StatefulSet" | "ReplicaSet")
    {
        return Ok(());
    }
    let mut sums: BTreeMap<&str, i64> = BTreeMap::new();
    for item in items {
        let Some(s) = &item.status else { continue };
        for f in SUMMED {
            if let Some(v) = s.get(*f).and_then(Value::as_i64) {
                *sums.entry(*f).or_default() += v;
            }
        }
    }
    let mut status = serde_json::Map::new();
    for (k, v) in &sums {
        status.insert((*k).to_owned(), Value::from(*v));
    }
    if template.generation() > 0 {
        status.insert(
            "observedGeneration".into(),
            Value::from(template.generation()),
        );
    }
    let current = template.0.get("status").and_then(Value::as_object);
    let unchanged = current.is_some_and(|c| {
        status.iter().all(|(k, v)| c.get(k) == Some(v))
            && SUMMED
                .iter()
                .all(|f| c.get(*f).is_none() || status.contains_key(*f))
    });
    if unchanged || (status.len() <= 1 && current.is_none()) {
        return Ok(());
    }
    // Fields no member reports any more are cleared.
    for f in SUMMED {
        if !status.contains_key(*f) && current.is_some_and(|c| c.contains_key(*f)) {
            status.insert((*f).to_owned(), Value::Null);
        }
    }
    let api = namespaced_or_all(ctx, template.namespace(), resource);
    api.patch_status(
        template.name(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(())
}
