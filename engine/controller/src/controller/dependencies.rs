//! Dependencies distributor (Karmada `pkg/dependenciesdistributor`): a ResourceBinding with
//! `spec.propagateDeps` takes the objects its template depends on (InterpretDependency: the
//! ConfigMaps, Secrets, ServiceAccounts, PVCs… its pod template references) to the same clusters.
//!
//! For each dependency of a scheduled *independent* binding, an *attached* ResourceBinding,
//! named as any binding of the object (`<name>-<kind>`) in the independent binding's namespace:
//! - `spec.requiredBy` lists a snapshot (namespace, name, clusters) of every binding that needs
//!   it; without a placement of its own it is never scheduled, and the binding controller renders
//!   its Works on the union of those clusters (Karmada's `mergeTargetClusters`);
//! - labelled `resourcebinding.karmada.io/depended-by-<hash of namespace/name>` with each
//!   requiring binding's permanent id, owned (controller reference) by the dependent object, with
//!   the binding controller's finalizer;
//! - `conflictResolution` is `Overwrite` when any requiring binding overwrites (else `Abort`), and
//!   `preserveResourcesOnDeletion` true when any requiring binding preserves.
//!
//! The independent binding records what it depends on in the `resourcebinding.karmada.io/
//! dependencies` annotation (JSON), which maps a change of a dependent object back to the
//! bindings that need it. A dependency that is no longer referenced, a binding that stops
//! propagating its dependencies or goes away, drops that binding from the attached binding's
//! `requiredBy` (and its label); with nobody left, the attached binding has no clusters and its
//! Works are removed. Label-selector dependencies resolve to every matching object.
//!
//! Karmada holds the independent binding with a finalizer until its attached bindings are
//! released; here the attached bindings release a requiring binding that no longer exists when
//! they are next reconciled (the deletion of a binding wakes the bindings it labelled).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use flotilla_api::interpreter::DependentObjectReference;
use flotilla_api::labels;
use flotilla_api::work::{ResourceBinding, TargetCluster};
use flotilla_core::interpreter::Operation;
use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::Store;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::objects::{namespaced_or_all, template_of};
use super::{Mapper, Targets};
use crate::recorder::{EventType, Regarding};
use crate::{Change, Context, Error, Topic, api_resource, typed};

/// Annotation on an independent binding: its dependencies (JSON `DependentObjectReference`s).
pub const DEPENDENCIES_ANNOTATION: &str = "resourcebinding.karmada.io/dependencies";
/// Prefix of the label an attached binding carries per binding that requires it.
pub const DEPENDED_BY_PREFIX: &str = "resourcebinding.karmada.io/depended-by-";

/// `BindingSnapshot`: a binding that requires an attached binding, and its clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingSnapshot {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<TargetCluster>,
}

/// The label key naming `namespace/name` as a requiring binding (Karmada's
/// `GenerateBindingReferenceKey`: the FNV-1a hash of the key, safely encoded).
pub fn depended_by_key(namespace: &str, name: &str) -> String {
    let key = if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    };
    let hash = flotilla_core::render::fnv1a32(key.as_bytes());
    format!(
        "{DEPENDED_BY_PREFIX}{}",
        flotilla_core::render::safe_encode(&hash.to_string())
    )
}

/// The snapshots of `rb.spec.requiredBy` (entries that do not decode are kept out).
pub fn required_by(rb: &ResourceBinding) -> Vec<BindingSnapshot> {
    rb.spec
        .required_by
        .iter()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect()
}

/// The target clusters of a binding with the clusters of the bindings that require it, each once,
/// in that order (Karmada's `mergeTargetClusters`).
pub fn merged_target_clusters(rb: &ResourceBinding) -> Vec<TargetCluster> {
    let mut out = rb.spec.clusters.clone();
    for s in required_by(rb) {
        for c in s.clusters {
            if !out.iter().any(|t| t.name == c.name) {
                out.push(c);
            }
        }
    }
    out
}

/// The dependencies recorded on an independent binding.
fn recorded(o: &DynamicObject) -> Vec<DependentObjectReference> {
    o.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEPENDENCIES_ANNOTATION))
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

fn labels_of(o: &DynamicObject) -> BTreeMap<String, String> {
    o.metadata.labels.clone().unwrap_or_default()
}

/// Whether `dep` names `object` (of `api_version`/`kind` in `namespace` with `labels`), as
/// Karmada's `matchesWithBindingDependencies`.
fn dependency_matches(
    dep: &DependentObjectReference,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    object_labels: &BTreeMap<String, String>,
) -> bool {
    if dep.api_version != api_version || dep.kind != kind || dep.namespace != namespace {
        return false;
    }
    if !dep.name.is_empty() {
        return dep.name == name;
    }
    dep.label_selector
        .as_ref()
        .is_some_and(|s| flotilla_core::selector::label_selector_matches(s, object_labels))
}

/// What a change means for the distributor (besides its own bindings' spec changes): a deleted
/// binding wakes the bindings it labelled; a changed resource template wakes the bindings whose
/// recorded dependencies match it, and those its attached binding names.
fn mapper(bindings: Store<DynamicObject>) -> Mapper {
    Box::new(move |c: &Change| {
        let Some(o) = &c.object else {
            return if matches!(c.topic, Topic::Template | Topic::Binding) {
                Targets::All
            } else {
                Targets::Nothing
            };
        };
        let ns = o.metadata.namespace.clone().unwrap_or_default();
        let name = o.metadata.name.clone().unwrap_or_default();
        match c.topic {
            Topic::Binding if c.deleted => {
                let key = depended_by_key(&ns, &name);
                let found: Vec<(String, String)> = bindings
                    .state()
                    .iter()
                    .filter(|b| {
                        b.metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.contains_key(&key))
                    })
                    .map(|b| crate::object_key(b))
                    .collect();
                if found.is_empty() {
                    Targets::Nothing
                } else {
                    Targets::Objects(found)
                }
            }
            Topic::Template => {
                let Some(t) = &o.types else {
                    return Targets::Nothing;
                };
                let object_labels = labels_of(o);
                let attached = flotilla_core::detector::binding_name(&t.kind, &name);
                let mut found = Vec::new();
                for b in bindings.state() {
                    if b.metadata.namespace.as_deref().unwrap_or("") != ns {
                        continue;
                    }
                    if b.metadata.name.as_deref() == Some(attached.as_str())
                        && let Ok(rb) = typed::<ResourceBinding>(&b)
                    {
                        found.extend(required_by(&rb).into_iter().map(|s| (s.namespace, s.name)));
                    }
                    if recorded(&b).iter().any(|d| {
                        dependency_matches(d, &t.api_version, &t.kind, &ns, &name, &object_labels)
                    }) {
                        found.push(crate::object_key(&b));
                    }
                }
                if found.is_empty() {
                    Targets::Nothing
                } else {
                    Targets::Objects(found)
                }
            }
            _ => Targets::Nothing,
        }
    })
}

/// Start the distributor over the cached ResourceBindings.
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    let cached = &ctx.bindings;
    let events = ctx.events.subscribe_with(
        super::own(
            cached,
            Topic::Binding,
            super::spec_changes,
            |_| false,
            mapper(cached.store.clone()),
        ),
        true,
    );
    let ctx = Arc::clone(ctx);
    let (store, resource) = (cached.store.clone(), cached.resource.clone());
    let failures: Arc<Mutex<HashMap<(String, String), u32>>> = Arc::default();
    tasks.spawn(async move {
        let controller =
            Controller::for_stream_with(futures::stream::pending(), store.clone(), resource.clone())
                .with_config(Config::default().concurrency(super::CONCURRENCY));
        let trigger = super::mapped_triggers(events, store, resource);
        let ok = Arc::clone(&failures);
        controller
            .reconcile_on(trigger)
            .run(
                move |obj, ctx: Arc<Context>| {
                    let ok = Arc::clone(&ok);
                    async move {
                        let key = crate::object_key(&obj);
                        let res = reconcile(obj, ctx).await;
                        if res.is_ok() {
                            ok.lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .remove(&key);
                        }
                        res
                    }
                },
                move |obj, err, _ctx| {
                    let key = crate::object_key(&obj);
                    let mut f = failures
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let n = f.entry(key.clone()).or_insert(0);
                    *n = n.saturating_add(1);
                    let delay = super::Backoff::delay(*n);
                    tracing::warn!(controller = "dependencies-distributor", namespace = %key.0, name = %key.1, error = %err, retry_in = ?delay, "reconcile failed");
                    Action::requeue(delay)
                },
                ctx,
            )
            .for_each(|_| futures::future::ready(()))
            .await;
    });
}

fn binding_api(ctx: &Context, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), namespace, &ctx.bindings.resource)
}

/// Reconcile one ResourceBinding: release requiring bindings that are gone (as an attached
/// binding), then distribute or release its own dependencies (as an independent one).
///
/// # Errors
/// Fails when a request fails, the interpreter fails, or an attached binding belongs to another
/// object (it is retried once that binding is gone).
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let rb: ResourceBinding = typed(&obj)?;
    if rb.kind != "ResourceBinding" {
        return Ok(Action::await_change());
    }
    if !rb.spec.required_by.is_empty() {
        release_gone(&ctx, &rb).await?;
    }
    let ns = rb.metadata.namespace().to_owned();
    let name = rb.metadata.name().to_owned();
    if rb.metadata.deletion_timestamp.is_some() || !rb.spec.propagate_deps {
        let attached = attached_to(&ctx, &ns, &name);
        for a in &attached {
            detach(&ctx, a, &ns, &name).await?;
        }
        return Ok(Action::await_change());
    }
    // Not scheduled yet: nothing to follow.
    if rb.spec.clusters.is_empty() {
        return Ok(Action::await_change());
    }
    let Some(template) = template_of(&ctx, &rb).await? else {
        return Ok(Action::await_change());
    };
    let template = serde_json::to_value(&*template).map_err(|source| Error::Decode {
        what: "template".into(),
        source,
    })?;
    let chain = ctx.interpreters.get();
    if chain
        .resolve(&template, Operation::InterpretDependency)
        .is_none()
    {
        return Ok(Action::await_change());
    }
    let regarding = Regarding {
        api_version: rb.spec.resource.api_version.clone(),
        kind: rb.spec.resource.kind.clone(),
        namespace: rb.spec.resource.namespace.clone(),
        name: rb.spec.resource.name.clone(),
        uid: rb.spec.resource.uid.clone(),
    };
    // The interpreter may call out (a webhook): off the async workers.
    let interpreted =
        tokio::task::spawn_blocking(move || chain.get_dependencies(&template)).await?;
    let dependencies = match interpreted {
        Ok(d) => d,
        Err(e) => {
            let message = e.to_string();
            ctx.recorder.publish(
                &regarding,
                EventType::Warning,
                "GetDependenciesFailed",
                &message,
            );
            return Err(Error::Apply(format!(
                "interpreting dependencies: {message}"
            )));
        }
    };
    let result = sync(&ctx, &rb, &dependencies).await;
    match &result {
        Ok(()) => ctx.recorder.publish_binding(
            &rb,
            EventType::Normal,
            "SyncScheduleResultToDependenciesSucceed",
            "Sync schedule results to dependencies succeed.",
        ),
        Err(e) => ctx.recorder.publish_binding(
            &rb,
            EventType::Warning,
            "SyncScheduleResultToDependenciesFailed",
            &e.to_string(),
        ),
    }
    result?;
    Ok(Action::requeue(ctx.settings.resync))
}

/// Record, release the orphans, then create or update the attached bindings.
async fn sync(
    ctx: &Context,
    rb: &ResourceBinding,
    dependencies: &[DependentObjectReference],
) -> Result<(), Error> {
    let ns = rb.metadata.namespace();
    let name = rb.metadata.name();
    // Record the dependencies (Karmada's JSON of the list).
    let text = serde_json::to_string(dependencies).map_err(|source| Error::Decode {
        what: "dependencies".into(),
        source,
    })?;
    if rb.metadata.annotations.get(DEPENDENCIES_ANNOTATION) != Some(&text) {
        binding_api(ctx, ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {DEPENDENCIES_ANNOTATION: text}}}),
                ),
            )
            .await?;
    }
    // Resolve each dependency to its objects.
    let mut wanted: Vec<Arc<DynamicObject>> = Vec::new();
    for dep in dependencies {
        wanted.extend(resolve(ctx, dep).await?);
    }
    // Release the attached bindings no dependency names any more.
    for a in attached_to(ctx, ns, name) {
        let r = &a.spec.resource;
        let still = wanted.iter().any(|o| {
            o.types
                .as_ref()
                .is_some_and(|t| t.api_version == r.api_version && t.kind == r.kind)
                && o.metadata.namespace.as_deref().unwrap_or("") == r.namespace
                && o.metadata.name.as_deref() == Some(r.name.as_str())
        });
        if !still {
            detach(ctx, &a, ns, name).await?;
        }
    }
    let mut errors = Vec::new();
    for o in &wanted {
        if let Err(e) = attach(ctx, rb, o).await {
            errors.push(e.to_string());
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Apply(errors.join("; ")))
    }
}

/// The objects `dep` names: the named one if it exists, or every object its selector matches.
async fn resolve(
    ctx: &Context,
    dep: &DependentObjectReference,
) -> Result<Vec<Arc<DynamicObject>>, Error> {
    let resource = api_resource(&dep.api_version, &dep.kind);
    let typed_as = crate::cached_as(&resource);
    let cache = ctx
        .templates
        .get(&(dep.api_version.clone(), dep.kind.clone()));
    let api = || namespaced_or_all(ctx, &dep.namespace, &resource);
    if !dep.name.is_empty() {
        if let Some(o) = cache.and_then(|c| c.get(&dep.namespace, &dep.name)) {
            return Ok(vec![o]);
        }
        return Ok(match api().get_opt(&dep.name).await {
            Ok(Some(mut o)) => {
                let mut typed_as = typed_as;
                typed_as(&mut o);
                vec![Arc::new(o)]
            }
            Ok(None) => Vec::new(),
            Err(kube::Error::Api(s)) if s.is_not_found() => Vec::new(),
            Err(e) => return Err(e.into()),
        });
    }
    let Some(selector) = &dep.label_selector else {
        return Err(Error::Apply(
            "the name and labelSelector of a dependency cannot both be empty".into(),
        ));
    };
    let matches = |o: &DynamicObject| {
        o.metadata.namespace.as_deref().unwrap_or("") == dep.namespace
            && flotilla_core::selector::label_selector_matches(selector, &labels_of(o))
    };
    if let Some(c) = cache {
        return Ok(c.store.state().into_iter().filter(|o| matches(o)).collect());
    }
    let list = api().list(&ListParams::default()).await?;
    let mut typed_as = typed_as;
    Ok(list
        .items
        .into_iter()
        .map(|mut o| {
            typed_as(&mut o);
            o
        })
        .filter(|o| matches(o))
        .map(Arc::new)
        .collect())
}

/// The bindings in `namespace` attached to `namespace/name` (labelled by it).
fn attached_to(ctx: &Context, namespace: &str, name: &str) -> Vec<ResourceBinding> {
    let key = depended_by_key(namespace, name);
    ctx.bindings
        .store
        .state()
        .iter()
        .filter(|b| {
            b.metadata.namespace.as_deref().unwrap_or("") == namespace
                && b.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(&key))
        })
        .filter_map(|b| typed(b).ok())
        .collect()
}

/// The effective `conflictResolution` and `preserveResourcesOnDeletion` of the bindings
/// `snapshots` name: `Overwrite` if any overwrites, else `Abort`; preserved if any preserves.
/// Returns also whether they disagree. `extra` stands for a requiring binding not yet written.
fn effective_policies(
    ctx: &Context,
    snapshots: &[BindingSnapshot],
    extra: Option<&ResourceBinding>,
) -> Result<(String, bool, Vec<&'static str>), Error> {
    let mut overwrite = (false, false);
    let mut preserve = (false, false);
    let mut visit = |rb: &ResourceBinding| {
        if rb.spec.conflict_resolution == "Overwrite" {
            overwrite.0 = true;
        } else {
            overwrite.1 = true;
        }
        if rb.spec.preserve_resources_on_deletion == Some(true) {
            preserve.0 = true;
        } else {
            preserve.1 = true;
        }
    };
    for s in snapshots {
        if extra
            .is_some_and(|e| e.metadata.namespace() == s.namespace && e.metadata.name() == s.name)
        {
            continue;
        }
        let o = ctx.bindings.get(&s.namespace, &s.name).ok_or_else(|| {
            Error::Apply(format!(
                "resourcebindings {:?} not found (required by an attached binding)",
                format!("{}/{}", s.namespace, s.name)
            ))
        })?;
        visit(&typed(&o)?);
    }
    if let Some(e) = extra {
        visit(e);
    }
    let mut conflicts = Vec::new();
    if overwrite.0 && overwrite.1 {
        conflicts.push("ConflictResolution conflicted (Overwrite vs Abort)");
    }
    if preserve.0 && preserve.1 {
        conflicts.push("PreserveResourcesOnDeletion conflicted (true vs false)");
    }
    let cr = if overwrite.0 { "Overwrite" } else { "Abort" };
    Ok((cr.to_owned(), preserve.0, conflicts))
}

/// Merge `new` into `existing` as Karmada's `mergeBindingSnapshot`: a snapshot of the same
/// binding gets the new clusters, others are appended.
fn merge_snapshots(
    mut existing: Vec<BindingSnapshot>,
    new: BindingSnapshot,
) -> Vec<BindingSnapshot> {
    let mut found = false;
    for s in &mut existing {
        if s.namespace == new.namespace && s.name == new.name {
            s.clusters.clone_from(&new.clusters);
            found = true;
        }
    }
    if !found {
        existing.push(new);
    }
    existing
}

/// Create or update the attached binding of `object` for `parent`.
async fn attach(
    ctx: &Context,
    parent: &ResourceBinding,
    object: &DynamicObject,
) -> Result<(), Error> {
    let Some(t) = &object.types else {
        return Ok(());
    };
    let ns = parent.metadata.namespace();
    let object_name = object.metadata.name.as_deref().unwrap_or("");
    let name = flotilla_core::detector::binding_name(&t.kind, object_name);
    let label = depended_by_key(ns, parent.metadata.name());
    let parent_id = parent
        .metadata
        .labels
        .get(labels::RB_PERMANENT_ID)
        .cloned()
        .unwrap_or_default();
    let snapshot = BindingSnapshot {
        namespace: ns.to_owned(),
        name: parent.metadata.name().to_owned(),
        clusters: parent.spec.clusters.clone(),
    };
    let uid = object.metadata.uid.clone().unwrap_or_default();
    let resource = json!({
        "apiVersion": t.api_version, "kind": t.kind,
        "namespace": object.metadata.namespace.as_deref().unwrap_or(""), "name": object_name,
        "uid": uid, "resourceVersion": object.metadata.resource_version.as_deref().unwrap_or(""),
    });
    let api = binding_api(ctx, ns);
    let existing = match ctx.bindings.get(ns, &name) {
        Some(b) => Some(b),
        None => api.get_opt(&name).await?.map(Arc::new),
    };
    let Some(existing) = existing else {
        let (cr, preserve, _) = effective_policies(ctx, &[], Some(parent))?;
        let body: DynamicObject = serde_json::from_value(json!({
            "apiVersion": flotilla_api::work::BINDING_API_VERSION, "kind": "ResourceBinding",
            "metadata": {
                "name": name, "namespace": ns,
                "labels": {
                    label: parent_id,
                    labels::RB_PERMANENT_ID: flotilla_core::detector::permanent_id(&format!("rb/{ns}/{name}")),
                },
                "finalizers": [labels::BINDING_FINALIZER],
                "ownerReferences": [{"apiVersion": t.api_version, "kind": t.kind, "name": object_name,
                                     "uid": uid, "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {"resource": resource, "requiredBy": [snapshot],
                     "conflictResolution": cr, "preserveResourcesOnDeletion": preserve},
        }))
        .map_err(|source| Error::Decode {
            what: "attached binding".into(),
            source,
        })?;
        api.create(&PostParams::default(), &body).await?;
        tracing::info!(binding = %format!("{ns}/{name}"), "created an attached binding");
        return Ok(());
    };
    let current: ResourceBinding = typed(&existing)?;
    let owner = existing
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|r| r.controller == Some(true)));
    if let Some(o) = owner
        && !uid.is_empty()
        && o.uid != uid
    {
        return Err(Error::Apply(format!(
            "failed to update resourceBinding({ns}/{name}) due to different owner reference UID, will try again later after binding is garbage collected"
        )));
    }
    let merged = merge_snapshots(required_by(&current), snapshot);
    let mut spec = serde_json::Map::new();
    if current.spec.placement.is_none() {
        let (cr, preserve, conflicts) = effective_policies(ctx, &merged, Some(parent))?;
        if !conflicts.is_empty() {
            ctx.recorder.publish_binding(
                &current,
                EventType::Warning,
                "DependencyPolicyConflict",
                &format!(
                    "Dependency policy conflict detected: {}.",
                    conflicts.join("; ")
                ),
            );
        }
        if current.spec.conflict_resolution != cr {
            spec.insert("conflictResolution".into(), json!(cr));
        }
        if current.spec.preserve_resources_on_deletion != Some(preserve) {
            spec.insert("preserveResourcesOnDeletion".into(), json!(preserve));
        }
    }
    if merged != required_by(&current) {
        spec.insert("requiredBy".into(), json!(merged));
    }
    if serde_json::to_value(&current.spec.resource).ok().as_ref() != Some(&resource) {
        spec.insert("resource".into(), resource);
    }
    let labelled = current.metadata.labels.get(&label) == Some(&parent_id);
    if spec.is_empty() && labelled {
        return Ok(());
    }
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version, "labels": {label: parent_id}},
        "spec": spec,
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Drop `parent_ns/parent_name` from `attached`: its label and its snapshot; the policies of the
/// bindings left (nothing when none is left).
async fn detach(
    ctx: &Context,
    attached: &ResourceBinding,
    parent_ns: &str,
    parent_name: &str,
) -> Result<(), Error> {
    let label = depended_by_key(parent_ns, parent_name);
    let before = required_by(attached);
    let left: Vec<BindingSnapshot> = before
        .iter()
        .filter(|s| !(s.namespace == parent_ns && s.name == parent_name))
        .cloned()
        .collect();
    if left.len() == before.len() && !attached.metadata.labels.contains_key(&label) {
        return Ok(());
    }
    let mut spec = serde_json::Map::new();
    spec.insert(
        "requiredBy".into(),
        if left.is_empty() {
            Value::Null
        } else {
            json!(left)
        },
    );
    if attached.spec.placement.is_none() {
        if left.is_empty() {
            spec.insert("conflictResolution".into(), Value::Null);
            spec.insert("preserveResourcesOnDeletion".into(), Value::Null);
        } else {
            let (cr, preserve, _) = effective_policies(ctx, &left, None)?;
            spec.insert("conflictResolution".into(), json!(cr));
            spec.insert("preserveResourcesOnDeletion".into(), json!(preserve));
        }
    }
    let patch = json!({
        "metadata": {"resourceVersion": attached.metadata.resource_version, "labels": {label: null}},
        "spec": spec,
    });
    match binding_api(ctx, attached.metadata.namespace())
        .patch(
            attached.metadata.name(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(
        binding = %format!("{}/{}", attached.metadata.namespace(), attached.metadata.name()),
        released_by = %format!("{parent_ns}/{parent_name}"),
        "a binding no longer requires this attached binding"
    );
    Ok(())
}

/// Release, from attached binding `rb`, the requiring bindings that no longer exist.
async fn release_gone(ctx: &Context, rb: &ResourceBinding) -> Result<(), Error> {
    for s in required_by(rb) {
        if ctx.bindings.get(&s.namespace, &s.name).is_some() {
            continue;
        }
        // The cache may lag: confirm before releasing.
        if binding_api(ctx, &s.namespace)
            .get_opt(&s.name)
            .await?
            .is_some()
        {
            continue;
        }
        let live = match binding_api(ctx, rb.metadata.namespace())
            .get_opt(rb.metadata.name())
            .await?
        {
            Some(o) => typed::<ResourceBinding>(&o)?,
            None => return Ok(()),
        };
        detach(ctx, &live, &s.namespace, &s.name).await?;
        return Box::pin(release_gone(ctx, &live)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_depended_by_label_hashes_the_binding_key_as_karmada() {
        // FNV-1a of "prod/web-deployment", as a decimal string, safely encoded.
        let hash = flotilla_core::render::fnv1a32(b"prod/web-deployment").to_string();
        assert_eq!(
            depended_by_key("prod", "web-deployment"),
            format!(
                "{DEPENDED_BY_PREFIX}{}",
                flotilla_core::render::safe_encode(&hash)
            )
        );
        assert_ne!(
            depended_by_key("prod", "web-deployment"),
            depended_by_key("dev", "web-deployment")
        );
        assert!(depended_by_key("a", "b").len() <= DEPENDED_BY_PREFIX.len() + 10);
    }

    #[test]
    fn snapshots_merge_by_binding_and_clusters_union_in_order() {
        let s = |name: &str, clusters: &[&str]| BindingSnapshot {
            namespace: "ns".into(),
            name: name.into(),
            clusters: clusters.iter().map(|c| TargetCluster::new(*c, 0)).collect(),
        };
        let merged = merge_snapshots(vec![s("a", &["m1"]), s("b", &["m2"])], s("a", &["m3"]));
        assert_eq!(merged, vec![s("a", &["m3"]), s("b", &["m2"])]);
        let merged = merge_snapshots(merged, s("c", &["m1"]));
        assert_eq!(merged.len(), 3);
        let mut rb = ResourceBinding::default();
        rb.spec.clusters = vec![TargetCluster::new("m2", 1)];
        rb.spec.required_by = merged
            .iter()
            .map(|s| serde_json::to_value(s).expect("json"))
            .collect();
        let names: Vec<String> = merged_target_clusters(&rb)
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["m2", "m3", "m1"]);
    }

    #[test]
    fn dependencies_match_by_name_or_selector_in_their_namespace() {
        let by_name = DependentObjectReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "cfg".into(),
            label_selector: None,
        };
        let none = BTreeMap::new();
        assert!(dependency_matches(
            &by_name,
            "v1",
            "ConfigMap",
            "ns",
            "cfg",
            &none
        ));
        assert!(!dependency_matches(
            &by_name,
            "v1",
            "ConfigMap",
            "ns",
            "other",
            &none
        ));
        assert!(!dependency_matches(
            &by_name, "v1", "Secret", "ns", "cfg", &none
        ));
        assert!(!dependency_matches(
            &by_name,
            "v1",
            "ConfigMap",
            "ns2",
            "cfg",
            &none
        ));
        let by_labels = DependentObjectReference {
            name: String::new(),
            label_selector: Some(flotilla_api::meta::LabelSelector {
                match_labels: BTreeMap::from([("app".into(), "web".into())]),
                ..Default::default()
            }),
            ..by_name
        };
        let web = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
        assert!(dependency_matches(
            &by_labels,
            "v1",
            "ConfigMap",
            "ns",
            "any",
            &web
        ));
        assert!(!dependency_matches(
            &by_labels,
            "v1",
            "ConfigMap",
            "ns",
            "any",
            &none
        ));
    }
}
