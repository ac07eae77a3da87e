//! Binding controller: a scheduled ResourceBinding gets one Work per target cluster (overrides
//! applied); orphaned Works are deleted; Work status is aggregated into the binding and the
//! template; a deleted template takes its binding (and so its Works) with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flotilla_api::Object;
use flotilla_api::labels;
use flotilla_api::meta::Condition;
use flotilla_api::work::{AggregatedStatusItem, ResourceBinding, ResourceBindingSpec};
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

/// Whether `o` (a binding) has no target clusters yet and is not going away: there is nothing to
/// render for it until the scheduler writes its clusters.
pub fn unscheduled(o: &DynamicObject) -> bool {
    o.metadata.deletion_timestamp.is_none()
        && o.data
            .pointer("/spec/clusters")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
}

/// What the binding controller last made of each binding's `FullyApplied` condition (its status
/// and reason, hashed): a binding change carrying anything else was written by someone else
/// (the scheduler rewriting the condition list from an older copy), and the controller's own
/// writes are not news to it.
#[derive(Debug, Default)]
pub struct FullyAppliedSeen(std::sync::Mutex<std::collections::HashMap<(String, String), u64>>);

impl FullyAppliedSeen {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String), u64>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Record the condition the controller left on `rb` (`None`: it has none).
    pub(crate) fn record(&self, rb: &ResourceBinding, conditions: &[Condition]) {
        let condition = conditions
            .iter()
            .find(|c| c.type_ == fully_applied::TYPE)
            .map(|c| (c.status.as_str(), c.reason.as_str()));
        let key = (
            rb.metadata.namespace().to_owned(),
            rb.metadata.name().to_owned(),
        );
        self.lock().insert(key, super::hash_of(condition));
    }

    /// Whether `o`'s `FullyApplied` condition is not what the controller last left on it (a
    /// binding it has not reconciled yet is not stale: its first reconcile is due anyway).
    pub fn stale(&self, o: &DynamicObject) -> bool {
        let condition = o
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(fully_applied::TYPE))
            })
            .map(|c| {
                let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
                (text("status"), text("reason"))
            });
        self.lock()
            .get(&crate::object_key(o))
            .is_some_and(|&left| left != super::hash_of(condition))
    }

    /// Forget a deleted binding.
    pub fn forget(&self, o: &DynamicObject) {
        self.lock().remove(&crate::object_key(o));
    }
}

/// Work writes (applies and deletes) of the binding controller in flight at once, over all its
/// workers. Each is a durable write: one after another, a binding over 100 clusters waited for
/// 100 store commits before its last Work existed, where concurrent writes share group commits.
/// Shared by the workers, so that a burst of large bindings stays well within a
/// kube-apiserver's default of 200 mutating requests in flight.
pub const WORK_WRITES_IN_FLIGHT: usize = 64;

/// Run `requests` concurrently within [`Context::work_writes`], every one to its end; the first
/// error, if any. (A `Vec`, not an iterator: a reconcile future holding iterator closures
/// across this await is not `Send` for every lifetime the controller asks.)
async fn all_of<F>(ctx: &Context, requests: Vec<F>) -> Result<(), Error>
where
    F: std::future::Future<Output = Result<(), Error>>,
{
    use futures::StreamExt;
    let mut results = futures::stream::iter(requests.into_iter().map(|request| async {
        // The semaphore is never closed: a permit always comes.
        let _permit = ctx.work_writes.acquire().await;
        request.await
    }))
    .buffer_unordered(WORK_WRITES_IN_FLIGHT);
    let mut first = None;
    while let Some(r) = results.next().await {
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Delete those of `works` not already going away, concurrently ([`all_of`]).
async fn delete_works(ctx: &Context, works: &[Arc<DynamicObject>]) -> Result<(), Error> {
    let deletes = works
        .iter()
        .filter(|w| w.metadata.deletion_timestamp.is_none())
        .map(|w| delete_work(ctx, w))
        .collect();
    all_of(ctx, deletes).await
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
        delete_works(&ctx, &works).await?;
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
    let purging: Vec<Arc<DynamicObject>> = works
        .iter()
        .filter(|w| purged.contains(w.metadata.namespace.as_deref().unwrap_or("")))
        .cloned()
        .collect();
    delete_works(&ctx, &purging).await?;
    if !purging.is_empty() {
        return Ok(Action::requeue(std::time::Duration::from_millis(200)));
    }
    let rendered = flotilla_core::pipeline::render(
        &snapshot,
        &rb,
        &template,
        &policies,
        &ctx.interpreters.get(),
    );
    let mut desired = BTreeSet::new();
    let mut failures = Vec::new();
    let mut writes = Vec::new();
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
                    writes.push((ns.clone(), name.clone(), body));
                }
                desired.insert((ns, name));
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    // A Work was created or changed: worth an event (unchanged resyncs are not).
    let synced = !writes.is_empty();
    all_of(
        &ctx,
        writes
            .into_iter()
            .map(|(ns, name, body)| {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(ctx.client.clone(), &ns, &ctx.works.resource);
                async move {
                    api.patch(
                        &name,
                        &PatchParams::apply(MANAGER).force(),
                        &Patch::Apply(body),
                    )
                    .await?;
                    Ok(())
                }
            })
            .collect(),
    )
    .await?;
    // Orphans go, except the copies eviction tasks keep until the new placement is healthy.
    let retained: BTreeSet<String> = flotilla_core::failover::retained_by_eviction(&rb)
        .into_iter()
        .map(flotilla_core::render::execution_namespace)
        .collect();
    let orphans: Vec<Arc<DynamicObject>> = works
        .iter()
        .filter(|w| {
            let key = crate::object_key(w);
            !desired.contains(&key) && !retained.contains(&key.0)
        })
        .cloned()
        .collect();
    delete_works(&ctx, &orphans).await?;

    // Aggregate Work status into the binding, then into the template. As Karmada's
    // `assembleWorkStatus`, every Work of the binding that is not going away counts, including
    // the copies graceful eviction keeps (orphans deleted above are left out).
    let mut items: Vec<AggregatedStatusItem> = works
        .iter()
        .filter(|w| {
            let key = crate::object_key(w);
            w.metadata.deletion_timestamp.is_none()
                && (desired.contains(&key) || retained.contains(&key.0))
        })
        .map(|w| aggregated_item(w))
        .collect();
    // The Works this reconcile created count as not applied yet, as they will be reported:
    // their creation is not news to the mapper (`controller::binding_mapper`).
    let cached: BTreeSet<(&str, &str)> = works
        .iter()
        .map(|w| {
            (
                w.metadata.namespace.as_deref().unwrap_or(""),
                w.metadata.name.as_deref().unwrap_or(""),
            )
        })
        .collect();
    items.extend(
        desired
            .iter()
            .filter(|(ns, name)| !cached.contains(&(ns.as_str(), name.as_str())))
            .map(|(ns, _)| not_yet_applied(ns)),
    );
    items.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
    write_binding_status(&ctx.fully_applied, &rb_api, &rb, &items).await?;
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

/// The cluster of the execution namespace `ns`.
fn cluster_of(ns: &str) -> String {
    ns.strip_prefix(labels::EXECUTION_NAMESPACE_PREFIX)
        .unwrap_or(ns)
        .to_owned()
}

/// The entry of a Work in execution namespace `ns` that reports no status yet: what
/// [`aggregated_item`] makes of it.
fn not_yet_applied(ns: &str) -> AggregatedStatusItem {
    AggregatedStatusItem {
        cluster_name: cluster_of(ns),
        status: None,
        applied: false,
        applied_message: String::new(),
        health: "Unknown".to_owned(),
    }
}

/// One cluster's entry of `status.aggregatedStatus`, from its Work.
pub fn aggregated_item(w: &DynamicObject) -> AggregatedStatusItem {
    let cluster = cluster_of(w.metadata.namespace.as_deref().unwrap_or(""));
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
    // A Work that is not applied reports no status and an unknown health, as Karmada's: its
    // manifest statuses may be left over from an earlier apply.
    let manifest = status
        .filter(|_| applied)
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

/// Karmada's `FullyApplied` binding condition (`pkg/util/helper/workstatus.go`).
pub mod fully_applied {
    /// The condition type.
    pub const TYPE: &str = "FullyApplied";
    /// Reason when every target cluster's Work is applied.
    pub const SUCCESS: &str = "FullyAppliedSuccess";
    /// Reason otherwise.
    pub const FAILED: &str = "FullyAppliedFailed";
    /// Message of [`SUCCESS`].
    pub const SUCCESS_MSG: &str = "All works have been successfully applied";
    /// Message of [`FAILED`].
    pub const FAILED_MSG: &str =
        "Failed to apply all works, see status.aggregatedStatus for details";
}

/// The clusters a binding has Works in (Karmada's `ObtainBindingSpecExistingClusters`): its
/// target clusters, those of the bindings that require it, and the clusters of eviction tasks
/// that keep their copy (not `Directly`).
pub fn existing_clusters(spec: &ResourceBindingSpec) -> BTreeSet<&str> {
    let mut names: BTreeSet<&str> = spec.clusters.iter().map(|c| c.name.as_str()).collect();
    for required in &spec.required_by {
        let clusters = required.get("clusters").and_then(Value::as_array);
        for c in clusters.into_iter().flatten() {
            if let Some(n) = c.get("name").and_then(Value::as_str) {
                names.insert(n);
            }
        }
    }
    use flotilla_core::failover::purge_mode;
    for t in &spec.graceful_eviction_tasks {
        if purge_mode::canonical(t.purge_mode.as_deref()) != purge_mode::DIRECTLY {
            names.insert(&t.from_cluster);
        }
    }
    names
}

/// Whether every Work is applied (Karmada's `worksFullyApplied`): there are targets, one status
/// item per target, each applied and for a target.
pub fn works_fully_applied(items: &[AggregatedStatusItem], targets: &BTreeSet<&str>) -> bool {
    !targets.is_empty()
        && targets.len() == items.len()
        && items
            .iter()
            .all(|i| i.applied && targets.contains(i.cluster_name.as_str()))
}

/// The `FullyApplied` condition `items` support (no transition time yet).
pub fn fully_applied_condition(
    spec: &ResourceBindingSpec,
    items: &[AggregatedStatusItem],
) -> Condition {
    let (status, reason, message) = if works_fully_applied(items, &existing_clusters(spec)) {
        ("True", fully_applied::SUCCESS, fully_applied::SUCCESS_MSG)
    } else {
        ("False", fully_applied::FAILED, fully_applied::FAILED_MSG)
    };
    Condition {
        type_: fully_applied::TYPE.to_owned(),
        status: status.to_owned(),
        observed_generation: None,
        last_transition_time: None,
        reason: reason.to_owned(),
        message: message.to_owned(),
    }
}

/// Put `new` into `conditions` as apimachinery's `meta.SetStatusCondition` does: the transition
/// time moves only when the status changes. Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: &str) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            new.last_transition_time
                .get_or_insert_with(|| now.to_owned());
            conditions.push(new);
            true
        }
        Some(old) => {
            let before = old.clone();
            if old.status != new.status {
                old.status = new.status;
                old.last_transition_time =
                    Some(new.last_transition_time.unwrap_or_else(|| now.to_owned()));
            }
            old.reason = new.reason;
            old.message = new.message;
            old.observed_generation = new.observed_generation;
            *old != before
        }
    }
}

/// Whether Karmada's status controller would aggregate into `rb`: it has been scheduled
/// (`status.lastScheduledTime`, or target clusters written by hand).
fn is_scheduled(rb: &ResourceBinding) -> bool {
    !rb.spec.clusters.is_empty()
        || rb
            .status
            .as_ref()
            .is_some_and(|s| s.last_scheduled_time.is_some())
}

/// Write `items` as the binding's `status.aggregatedStatus` and, once it is scheduled, its
/// `FullyApplied` condition. The conditions are written under the binding's resourceVersion
/// (the scheduler writes `Scheduled` into the same list): a conflict re-reads the binding and
/// tries again, as Karmada's `RetryOnConflict`.
async fn write_binding_status(
    seen: &FullyAppliedSeen,
    api: &Api<DynamicObject>,
    rb: &ResourceBinding,
    items: &[AggregatedStatusItem],
) -> Result<(), Error> {
    let now = flotilla_core::time::format_rfc3339(crate::clock::now_epoch());
    let mut live: Option<ResourceBinding> = None;
    for attempt in 0..3 {
        let current = live.as_ref().unwrap_or(rb);
        let status = current.status.clone().unwrap_or_default();
        let mut conditions = status.conditions.clone();
        let conditions_changed = is_scheduled(current)
            && set_condition(
                &mut conditions,
                fully_applied_condition(&current.spec, items),
                &now,
            );
        // Before the write: its echo may come before the response does.
        seen.record(current, &conditions);
        if status.aggregated_status == items && !conditions_changed {
            return Ok(());
        }
        let mut patch = json!({"status": {"aggregatedStatus": items}});
        if conditions_changed {
            patch["metadata"] = json!({"resourceVersion": current.metadata.resource_version});
            patch["status"]["conditions"] = json!(conditions);
        }
        match api
            .patch_status(
                rb.metadata.name(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 2 => {
                match api.get_opt(rb.metadata.name()).await? {
                    Some(o) => live = Some(typed(&o)?),
                    None => return Ok(()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

pub use flotilla_plugins::interpreter::{deployment_conditions, max_unavailable};

/// A JSON merge patch turning `old` into `new`: changed values replaced, removed keys nulled,
/// objects compared key by key (RFC 7386).
fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = serde_json::Map::new();
            for (k, v) in n {
                match o.get(k) {
                    Some(ov) if ov == v => {}
                    Some(ov) if ov.is_object() && v.is_object() => {
                        patch.insert(k.clone(), merge_diff(ov, v));
                    }
                    _ => {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

/// Fold the members' status into the template through the interpreter chain's AggregateStatus
/// (Karmada's `updateResourceStatus`): only kinds whose hook is enabled, and only when the
/// status changes. A fault is reported on the template and fails the reconcile.
async fn aggregate_into_template(
    ctx: &Context,
    template: &Object,
    resource: &kube::api::ApiResource,
    items: &[AggregatedStatusItem],
) -> Result<(), Error> {
    let interpreters = ctx.interpreters.get();
    if interpreters
        .resolve(
            &template.0,
            flotilla_core::interpreter::Operation::AggregateStatus,
        )
        .is_none()
    {
        return Ok(());
    }
    let aggregated = match interpreters.aggregate_status(&template.0, items) {
        Ok(a) => a,
        Err(e) => {
            let regarding = crate::recorder::Regarding {
                api_version: template.api_version().to_owned(),
                kind: template.kind().to_owned(),
                namespace: template.namespace().to_owned(),
                name: template.name().to_owned(),
                uid: template.uid().to_owned(),
            };
            ctx.recorder.publish(
                &regarding,
                EventType::Warning,
                "AggregateStatusFailed",
                &e.to_string(),
            );
            return Err(Error::Apply(format!(
                "aggregating the status of {} {}/{}: {e}",
                template.kind(),
                template.namespace(),
                template.name()
            )));
        }
    };
    let empty = Value::Object(serde_json::Map::new());
    let old = template.0.get("status").unwrap_or(&empty);
    let new = aggregated.get("status").unwrap_or(&empty);
    if old == new {
        return Ok(());
    }
    let api = namespaced_or_all(ctx, template.namespace(), resource);
    api.patch_status(
        template.name(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": merge_diff(old, new)})),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::work::{GracefulEvictionTask, TargetCluster};
    use flotilla_plugins::interpreter::{Summary, merge_conditions};

    fn item(cluster: &str, applied: bool, status: Option<Value>) -> AggregatedStatusItem {
        AggregatedStatusItem {
            cluster_name: cluster.to_owned(),
            status,
            applied,
            ..Default::default()
        }
    }

    fn spec(clusters: &[&str]) -> ResourceBindingSpec {
        ResourceBindingSpec {
            clusters: clusters.iter().map(|c| TargetCluster::new(*c, 1)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn fully_applied_needs_an_applied_work_in_every_target_cluster() {
        let s = spec(&["m1", "m2"]);
        let both = [item("m1", true, None), item("m2", true, None)];
        let c = fully_applied_condition(&s, &both);
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("FullyApplied", "True", "FullyAppliedSuccess")
        );
        assert_eq!(c.message, "All works have been successfully applied");
        for items in [
            vec![item("m1", true, None)],
            vec![item("m1", true, None), item("m2", false, None)],
            vec![item("m1", true, None), item("m3", true, None)],
        ] {
            let c = fully_applied_condition(&s, &items);
            assert_eq!(
                (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
                (
                    "False",
                    "FullyAppliedFailed",
                    "Failed to apply all works, see status.aggregatedStatus for details"
                ),
                "{items:?}"
            );
        }
        assert_eq!(
            fully_applied_condition(&spec(&[]), &[]).status,
            "False",
            "not scheduled"
        );
    }

    #[test]
    fn kept_eviction_copies_are_targets_and_directly_purged_ones_are_not() {
        let mut s = spec(&["m2"]);
        let task = |from: &str, mode: &str| GracefulEvictionTask {
            from_cluster: from.to_owned(),
            purge_mode: Some(mode.to_owned()),
            reason: "ApplicationFailure".into(),
            producer: "p".into(),
            ..Default::default()
        };
        s.graceful_eviction_tasks = vec![task("m1", "Gracefully"), task("m3", "Directly")];
        s.required_by =
            vec![json!({"namespace": "default", "name": "x", "clusters": [{"name": "m4"}]})];
        assert_eq!(
            existing_clusters(&s).into_iter().collect::<Vec<_>>(),
            ["m1", "m2", "m4"]
        );
    }

    #[test]
    fn set_condition_moves_the_transition_time_only_when_the_status_changes() {
        let s = spec(&["m1"]);
        let mut conds = Vec::new();
        assert!(set_condition(
            &mut conds,
            fully_applied_condition(&s, &[]),
            "t1"
        ));
        assert!(!set_condition(
            &mut conds,
            fully_applied_condition(&s, &[]),
            "t2"
        ));
        assert_eq!(conds[0].last_transition_time.as_deref(), Some("t1"));
        let applied = [item("m1", true, None)];
        assert!(set_condition(
            &mut conds,
            fully_applied_condition(&s, &applied),
            "t3"
        ));
        assert_eq!(conds.len(), 1);
        assert_eq!(
            (
                conds[0].status.as_str(),
                conds[0].last_transition_time.as_deref()
            ),
            ("True", Some("t3"))
        );
    }

    #[test]
    fn max_unavailable_follows_the_deployment_controller() {
        let d = |replicas: i64, strategy: Value| json!({"spec": {"replicas": replicas, "strategy": strategy}});
        assert_eq!(
            max_unavailable(&d(2, Value::Null)),
            0,
            "25% of 2, rounded down"
        );
        assert_eq!(max_unavailable(&d(4, Value::Null)), 1);
        assert_eq!(max_unavailable(&d(10, Value::Null)), 2);
        assert_eq!(max_unavailable(&d(10, json!({"type": "Recreate"}))), 0);
        assert_eq!(
            max_unavailable(&d(
                3,
                json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})
            )),
            1,
            "a rollout must be able to step"
        );
        assert_eq!(
            max_unavailable(&d(3, json!({"rollingUpdate": {"maxUnavailable": 5}}))),
            3,
            "at most the desired count"
        );
        assert_eq!(max_unavailable(&d(0, Value::Null)), 0);
        assert_eq!(
            max_unavailable(&json!({"spec": {}})),
            0,
            "1 replica by default"
        );
    }

    fn member(available: i64, progressing: Option<(&str, &str)>) -> Value {
        let mut s = json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": available, "availableReplicas": available});
        if let Some((status, reason)) = progressing {
            s["conditions"] = json!([{"type": "Progressing", "status": status, "reason": reason, "message": "m"}]);
        }
        s
    }

    fn summary(c: &[Summary; 2]) -> [(&str, &str, &str); 2] {
        [
            (c[0].0, c[0].1, c[0].2.as_str()),
            (c[1].0, c[1].1, c[1].2.as_str()),
        ]
    }

    #[test]
    fn deployment_conditions_summarise_the_members() {
        let template = json!({"spec": {"replicas": 2}});
        let targets: BTreeSet<&str> = ["m1", "m2"].into();
        assert_eq!(
            deployment_conditions(&template, &targets, &[item("m1", true, None)]),
            None,
            "no member reports status"
        );
        let done = Some(("True", "NewReplicaSetAvailable"));
        let one = [item("m1", true, Some(member(1, done)))];
        assert_eq!(
            summary(&deployment_conditions(&template, &targets, &one).expect("some")),
            [
                ("Available", "False", "MinimumReplicasUnavailable"),
                ("Progressing", "True", "ReplicaSetUpdated"),
            ],
            "one of two members reported"
        );
        let both = [
            item("m1", true, Some(member(1, done))),
            item("m2", true, Some(member(1, None))),
        ];
        assert_eq!(
            summary(&deployment_conditions(&template, &targets, &both).expect("some")),
            [
                ("Available", "True", "MinimumReplicasAvailable"),
                ("Progressing", "True", "NewReplicaSetAvailable"),
            ]
        );
        let stalled = [
            item("m1", true, Some(member(1, done))),
            item(
                "m2",
                true,
                Some(member(0, Some(("False", "ProgressDeadlineExceeded")))),
            ),
        ];
        let c = deployment_conditions(&template, &targets, &stalled).expect("some");
        assert_eq!(
            summary(&c),
            [
                ("Available", "False", "MinimumReplicasUnavailable"),
                ("Progressing", "False", "ProgressDeadlineExceeded"),
            ]
        );
        assert_eq!(c[1].3, "member cluster m2: m");
        let rolling = json!({"spec": {"replicas": 4}});
        let three = [
            item("m1", true, Some(member(2, done))),
            item(
                "m2",
                true,
                Some(member(1, Some(("True", "ReplicaSetUpdated")))),
            ),
        ];
        assert_eq!(
            summary(&deployment_conditions(&rolling, &targets, &three).expect("some")),
            [
                ("Available", "True", "MinimumReplicasAvailable"),
                ("Progressing", "True", "ReplicaSetUpdated"),
            ],
            "3 of 4 available is enough with maxUnavailable 1"
        );
    }

    #[test]
    fn merged_conditions_keep_their_times_until_something_changes() {
        let template = json!({"spec": {"replicas": 1}});
        let targets: BTreeSet<&str> = ["m1"].into();
        let ready = [item(
            "m1",
            true,
            Some(member(1, Some(("True", "NewReplicaSetAvailable")))),
        )];
        let wanted = deployment_conditions(&template, &targets, &ready).expect("some");
        let first = merge_conditions(None, &wanted, "t1");
        let again = merge_conditions(Some(&first), &wanted, "t2");
        assert_eq!(first, again, "an unchanged summary is not rewritten");
        let broken = [item(
            "m1",
            true,
            Some(member(0, Some(("True", "ReplicaSetUpdated")))),
        )];
        let wanted = deployment_conditions(&template, &targets, &broken).expect("some");
        let changed = merge_conditions(Some(&again), &wanted, "t3");
        assert_eq!(changed[0]["status"], "False");
        assert_eq!(changed[0]["lastTransitionTime"], "t3");
        assert_eq!(
            (
                &changed[1]["reason"],
                &changed[1]["lastTransitionTime"],
                &changed[1]["lastUpdateTime"]
            ),
            (&json!("ReplicaSetUpdated"), &json!("t1"), &json!("t3")),
            "still True: the transition time stays"
        );
    }
}
