//! Interpreter controller: `ResourceInterpreterCustomization` objects (config.karmada.io,
//! cluster-scoped) are compiled with the injected rule backends and the chain every other
//! controller consults is swapped whole: customizations sorted by name (as Karmada's
//! configuration manager), then interpreter webhooks, then the native defaults.
//!
//! A swap caused by a customization's creation, update or deletion publishes
//! [`Topic::InterpreterChain`] with that customization: the detector interprets the templates of
//! its target kind again and the binding controller re-renders and re-aggregates.
//!
//! A customization that does not compile keeps its previous compiled version (if any) and is
//! reported (log and a Warning Event on the object).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use flotilla_api::interpreter::ResourceInterpreterCustomization;
use flotilla_api::interpreter::{CONFIG_API_VERSION, CUSTOMIZATION_KIND};
use flotilla_core::interpreter::{Customization, Interpreters, ResourceInterpreter, RuleBackend};

use crate::recorder::{EventType, Regarding};
use crate::{Context, Topic};

/// The rule program backends (`luaScript`, `cel`, `wasm`) customizations compile with; the CLI
/// injects them (this crate does not depend on the backends).
#[derive(Clone, Default)]
pub struct RuleBackends(pub Vec<Arc<dyn RuleBackend>>);

impl std::fmt::Debug for RuleBackends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|b| b.field()))
            .finish()
    }
}

/// A compiled customization and the spec it was compiled from.
type Compiled = (serde_json::Value, Arc<dyn ResourceInterpreter>);

/// The chain in force and the interpreter webhooks that go into it.
pub struct Slot {
    chain: RwLock<Interpreters>,
    /// Interpreter webhooks (`ResourceInterpreterWebhookConfiguration`), in configuration order:
    /// set by the webhook controller with [`Slot::set_webhooks`].
    webhooks: RwLock<Vec<Arc<dyn ResourceInterpreter>>>,
    /// Compiled customizations by name, with the spec they were compiled from.
    compiled: RwLock<BTreeMap<String, Compiled>>,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            chain: RwLock::new(flotilla_plugins::interpreter::chain(Vec::new(), Vec::new())),
            webhooks: RwLock::default(),
            compiled: RwLock::default(),
        }
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Slot").field(&self.get()).finish()
    }
}

impl Slot {
    /// The chain in force (cheap: shared interpreters).
    pub fn get(&self) -> Interpreters {
        self.chain
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replace the interpreter webhooks and rebuild the chain.
    pub fn set_webhooks(&self, webhooks: Vec<Arc<dyn ResourceInterpreter>>) {
        *self
            .webhooks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = webhooks;
        self.rebuild();
    }

    fn rebuild(&self) {
        let customizations: Vec<Arc<dyn ResourceInterpreter>> = self
            .compiled
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(|(_, c)| Arc::clone(c))
            .collect();
        let webhooks = self
            .webhooks
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        *self
            .chain
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            flotilla_plugins::interpreter::chain(customizations, webhooks);
    }

    /// Bring the compiled customizations in line with `rics`: new or changed ones are compiled
    /// (a failure keeps the previous version), deleted ones dropped. Returns the failures as
    /// `(customization, error)`, and whether the chain changed.
    pub fn sync(
        &self,
        rics: &[ResourceInterpreterCustomization],
        backends: &[Arc<dyn RuleBackend>],
    ) -> (Vec<(ResourceInterpreterCustomization, String)>, bool) {
        let refs: Vec<&dyn RuleBackend> = backends.iter().map(AsRef::as_ref).collect();
        let mut failures = Vec::new();
        let mut changed = false;
        {
            let mut compiled = self
                .compiled
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let before = compiled.len();
            compiled.retain(|name, _| rics.iter().any(|r| r.metadata.name() == name));
            changed |= compiled.len() != before;
            for ric in rics {
                let name = ric.metadata.name().to_owned();
                let spec = serde_json::to_value(&ric.spec).unwrap_or_default();
                if compiled.get(&name).is_some_and(|(s, _)| *s == spec) {
                    continue;
                }
                match Customization::compile(ric, &refs) {
                    Ok(c) => {
                        compiled.insert(name, (spec, Arc::new(c)));
                        changed = true;
                    }
                    Err(e) => failures.push((ric.clone(), e)),
                }
            }
        }
        if changed {
            self.rebuild();
        }
        (failures, changed)
    }
}

/// The [`Topic::InterpreterChain`] changes between two sets of customizations: one per
/// customization created, deleted or whose spec changed (and its old version too when its
/// target moved), so the templates of each concerned kind are interpreted again.
fn chain_changes(
    before: &BTreeMap<String, Arc<kube::api::DynamicObject>>,
    after: &BTreeMap<String, Arc<kube::api::DynamicObject>>,
) -> Vec<crate::Change> {
    let spec = |o: &kube::api::DynamicObject| o.data.get("spec").cloned();
    let target = |o: &kube::api::DynamicObject| o.data.pointer("/spec/target").cloned();
    let change = |o: &Arc<kube::api::DynamicObject>, deleted: bool| crate::Change {
        topic: Topic::InterpreterChain,
        object: Some(Arc::clone(o)),
        deleted,
    };
    let mut out = Vec::new();
    for (name, o) in after {
        match before.get(name) {
            Some(old) if spec(old) == spec(o) => {}
            Some(old) => {
                if target(old) != target(o) {
                    out.push(change(old, true));
                }
                out.push(change(o, false));
            }
            None => out.push(change(o, false)),
        }
    }
    for (name, o) in before {
        if !after.contains_key(name) {
            out.push(change(o, true));
        }
    }
    out
}

/// Watch the customizations and keep `ctx.interpreters` in line with them.
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    let ctx = Arc::clone(ctx);
    let rx = ctx.events.subscribe(super::all_on(&[Topic::Interpreter]));
    tasks.spawn(async move {
        // The same failure is reported once per spec, not on every pass.
        let mut reported: BTreeMap<String, String> = BTreeMap::new();
        // The customizations as last seen, to tell which target kinds a swap concerns.
        let mut last: BTreeMap<String, Arc<kube::api::DynamicObject>> = BTreeMap::new();
        loop {
            let objects = ctx.customizations.store.state();
            let rics: Vec<ResourceInterpreterCustomization> = objects
                .iter()
                .filter_map(|o| {
                    let v = serde_json::to_value(&**o).ok()?;
                    match serde_json::from_value(v) {
                        Ok(r) => Some(r),
                        Err(e) => {
                            tracing::warn!(name = o.metadata.name.as_deref().unwrap_or(""), error = %e, "malformed ResourceInterpreterCustomization ignored");
                            None
                        }
                    }
                })
                .collect();
            let (failures, changed) = ctx.interpreters.sync(&rics, &ctx.settings.rule_backends.0);
            if changed {
                tracing::info!(chain = ?ctx.interpreters.get(), "resource interpreter chain swapped");
            }
            let now: BTreeMap<String, Arc<kube::api::DynamicObject>> = objects
                .into_iter()
                .map(|o| (o.metadata.name.clone().unwrap_or_default(), o))
                .collect();
            if changed {
                for change in chain_changes(&last, &now) {
                    ctx.events.send(change);
                }
            }
            last = now;
            reported.retain(|name, _| failures.iter().any(|(r, _)| r.metadata.name() == name));
            for (ric, error) in failures {
                let name = ric.metadata.name().to_owned();
                if reported.get(&name) == Some(&error) {
                    continue;
                }
                tracing::warn!(customization = %name, %error, "ResourceInterpreterCustomization does not compile; keeping its previous version");
                let regarding = Regarding {
                    api_version: CONFIG_API_VERSION.into(),
                    kind: CUSTOMIZATION_KIND.into(),
                    namespace: String::new(),
                    name: name.clone(),
                    uid: ric.metadata.uid.clone().unwrap_or_default(),
                };
                ctx.recorder
                    .publish(&regarding, EventType::Warning, "CompileFailed", &error);
                reported.insert(name, error);
            }
            rx.next().await;
        }
    });
}
