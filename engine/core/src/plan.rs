//! Offline planning: templates + policies + clusters (+ existing bindings) → ResourceBindings and
//! Works, through the same [`crate::pipeline`] the controllers run.

use std::collections::BTreeMap;
use std::sync::Arc;

use flotilla_api::Object;
use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{OverridePolicy, PropagationPolicy};
use flotilla_api::work::{ResourceBinding, Work};

use crate::detector;
use crate::framework::Profile;
use crate::manifest::Document;
use crate::overrides::OverridePolicies;
use crate::pipeline::{Clock, FailoverMemory, Snapshot, decide, render};
use crate::render::RenderError;
use crate::validate::{FieldError, default_propagation_policy, validate_propagation_policy};

/// Everything a plan reads.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Resource templates.
    pub templates: Vec<Object>,
    /// PropagationPolicies.
    pub propagation_policies: Vec<PropagationPolicy>,
    /// ClusterPropagationPolicies.
    pub cluster_propagation_policies: Vec<PropagationPolicy>,
    /// OverridePolicies and ClusterOverridePolicies.
    pub overrides: OverridePolicies,
    /// Member clusters.
    pub clusters: Vec<Cluster>,
    /// Existing bindings (the current assignment), by `namespace/name`.
    pub bindings: BTreeMap<String, ResourceBinding>,
    /// The resource interpreter chain (customizations, webhooks, native defaults) the detector
    /// and rendering consult; empty by default (no kind has replicas then).
    pub interpreters: crate::interpreter::Interpreters,
}

impl Inventory {
    /// Add parsed documents.
    pub fn extend(&mut self, docs: Vec<Document>) {
        for d in docs {
            match d {
                Document::Template(o) => self.templates.push(o),
                Document::Propagation(p) if p.kind == "ClusterPropagationPolicy" => {
                    self.cluster_propagation_policies.push(p)
                }
                Document::Propagation(p) => self.propagation_policies.push(p),
                Document::Override(o) if o.kind == "ClusterOverridePolicy" => {
                    self.overrides.cluster.push(o)
                }
                Document::Override(o) => self.overrides.namespaced.push(o),
                Document::Cluster(c) => self.clusters.push(*c),
                Document::Binding(b) => {
                    let key = format!("{}/{}", b.metadata.namespace(), b.metadata.name());
                    self.bindings.insert(key, *b);
                }
            }
        }
    }
}

/// A policy that failed admission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name}: {error}")]
pub struct PolicyError {
    /// Policy kind.
    pub kind: String,
    /// `namespace/name` or `name`.
    pub name: String,
    /// The invalid field.
    pub error: FieldError,
}

/// Built-in Kubernetes kinds a selector may name, by apiVersion (templates in the input add theirs).
pub const KNOWN_KINDS: &[(&str, &[&str])] = &[
    (
        "v1",
        &[
            "ConfigMap",
            "Secret",
            "Service",
            "ServiceAccount",
            "Namespace",
            "PersistentVolumeClaim",
            "PersistentVolume",
            "Pod",
            "Endpoints",
            "LimitRange",
            "ResourceQuota",
        ],
    ),
    (
        "apps/v1",
        &["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"],
    ),
    ("batch/v1", &["Job", "CronJob"]),
    (
        "networking.k8s.io/v1",
        &["Ingress", "IngressClass", "NetworkPolicy"],
    ),
    (
        "rbac.authorization.k8s.io/v1",
        &["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    ),
    ("autoscaling/v2", &["HorizontalPodAutoscaler"]),
    ("policy/v1", &["PodDisruptionBudget"]),
    ("storage.k8s.io/v1", &["StorageClass"]),
    ("apiextensions.k8s.io/v1", &["CustomResourceDefinition"]),
    ("scheduling.k8s.io/v1", &["PriorityClass"]),
];

fn known_kind(inv: &Inventory, api_version: &str, kind: &str) -> bool {
    KNOWN_KINDS
        .iter()
        .any(|(a, ks)| *a == api_version && ks.contains(&kind))
        || inv
            .templates
            .iter()
            .any(|t| t.api_version() == api_version && t.kind() == kind)
}

/// Default and validate every policy (Karmada's webhooks) and check that selectors name known
/// kinds. Policies are defaulted in place. Expressions are not compiled: see [`admit_with`].
pub fn admit(inv: &mut Inventory) -> Vec<PolicyError> {
    admit_with(inv, None)
}

/// [`admit`], and compile every expression of Flotilla's extension fields with `engine`
/// (syntax, types, static cost); errors name the policy, the field and the column.
pub fn admit_with(
    inv: &mut Inventory,
    engine: Option<&dyn crate::expression::ExpressionEngine>,
) -> Vec<PolicyError> {
    let mut errors = Vec::new();
    for p in inv
        .propagation_policies
        .iter_mut()
        .chain(inv.cluster_propagation_policies.iter_mut())
    {
        default_propagation_policy(p);
    }
    for o in inv
        .overrides
        .cluster
        .iter_mut()
        .chain(inv.overrides.namespaced.iter_mut())
    {
        crate::overrides::set_defaults(o);
    }
    inv.clusters
        .iter_mut()
        .for_each(crate::validate::default_cluster);
    let check_kinds = |inv: &Inventory,
                       kind: &str,
                       name: String,
                       sels: &[flotilla_api::policy::ResourceSelector],
                       field: &str,
                       out: &mut Vec<PolicyError>| {
        for (i, s) in sels.iter().enumerate() {
            if !s.api_version.is_empty()
                && !s.kind.is_empty()
                && !known_kind(inv, &s.api_version, &s.kind)
            {
                let mut hint: Vec<&str> = KNOWN_KINDS
                    .iter()
                    .filter(|(a, _)| *a == s.api_version)
                    .flat_map(|(_, k)| k.iter().copied())
                    .collect();
                hint.extend(
                    inv.templates
                        .iter()
                        .filter(|t| t.api_version() == s.api_version)
                        .map(Object::kind),
                );
                hint.sort_unstable();
                hint.dedup();
                let known = if hint.is_empty() {
                    format!("no known kinds in {:?}", s.api_version)
                } else {
                    format!("known kinds in {:?}: {}", s.api_version, hint.join(", "))
                };
                out.push(PolicyError {
                    kind: kind.to_owned(),
                    name: name.clone(),
                    error: FieldError {
                        field: format!("{field}[{i}].kind"),
                        message: format!("unknown kind {:?} ({known})", s.kind),
                    },
                });
            }
        }
    };
    for p in inv
        .propagation_policies
        .iter()
        .chain(inv.cluster_propagation_policies.iter())
    {
        let name = qualified(p.metadata.namespace(), p.metadata.name());
        for e in validate_propagation_policy(p) {
            errors.push(PolicyError {
                kind: p.kind.clone(),
                name: name.clone(),
                error: e,
            });
        }
        check_kinds(
            inv,
            &p.kind,
            name.clone(),
            &p.spec.resource_selectors,
            "spec.resourceSelectors",
            &mut errors,
        );
        let (sites, structural) = crate::expression::propagation_sites(p);
        expression_errors(&p.kind, &name, sites, structural, engine, &mut errors);
    }
    let ops: Vec<&OverridePolicy> = inv
        .overrides
        .cluster
        .iter()
        .chain(inv.overrides.namespaced.iter())
        .collect();
    for o in ops {
        let name = qualified(o.metadata.namespace(), o.metadata.name());
        for e in crate::overrides::validate(o) {
            errors.push(PolicyError {
                kind: o.kind.clone(),
                name: name.clone(),
                error: e,
            });
        }
        check_kinds(
            inv,
            &o.kind,
            name.clone(),
            &o.spec.resource_selectors,
            "spec.resourceSelectors",
            &mut errors,
        );
        let (sites, structural) = crate::expression::override_sites(o);
        expression_errors(&o.kind, &name, sites, structural, engine, &mut errors);
    }
    errors
}

fn expression_errors(
    kind: &str,
    name: &str,
    sites: Vec<crate::expression::Site<'_>>,
    structural: Vec<FieldError>,
    engine: Option<&dyn crate::expression::ExpressionEngine>,
    out: &mut Vec<PolicyError>,
) {
    let mut push = |error: FieldError| {
        out.push(PolicyError {
            kind: kind.to_owned(),
            name: name.to_owned(),
            error,
        })
    };
    structural.into_iter().for_each(&mut push);
    let Some(engine) = engine else { return };
    for site in sites {
        if let Err(e) = engine.check(site.kind, site.source) {
            push(FieldError {
                field: site.field,
                message: format!("invalid {} expression: {}", engine.language(), e.message),
            });
        }
    }
}

fn qualified(ns: &str, name: &str) -> String {
    if ns.is_empty() {
        name.to_owned()
    } else {
        format!("{ns}/{name}")
    }
}

/// Plan options.
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// "Now", epoch seconds (timestamps, eviction deadlines).
    pub now: i64,
    /// The pipeline's options (taint eviction, empty workload propagation).
    pub pipeline: crate::pipeline::Options,
}

/// One planned binding and its Works.
#[derive(Debug, Clone)]
pub struct PlannedBinding {
    /// The binding after detection, failover and scheduling.
    pub binding: ResourceBinding,
    /// Whether the scheduler ran (Karmada skips unchanged Divided bindings).
    pub scheduled: bool,
    /// Clusters evicted (taint manager, application failover) in this plan.
    pub evicted: Vec<String>,
    /// Faults of `Ignore` plugins.
    pub ignored_faults: Vec<String>,
    /// Works, or why a cluster's Work could not be rendered.
    pub works: Vec<Result<Work, RenderError>>,
}

/// The plan.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Bindings in template order (kind, namespace, name).
    pub bindings: Vec<PlannedBinding>,
    /// Templates no policy matched, as `Kind namespace/name`.
    pub unmatched: Vec<String>,
    /// Templates whose interpretation failed, as `Kind namespace/name: error` (no binding).
    pub faults: Vec<String>,
    /// The order the scheduler would take these bindings in, pushed at once in template order
    /// ([`crate::queue::schedule_order`]): `namespace/name` keys.
    pub schedule_order: Vec<String>,
    /// Policy preemptions: `Kind namespace/name: <policy> preempted <policy>`.
    pub preemptions: Vec<String>,
    /// Binding preemptions (gate `BindingPreemption`), in the order the scheduler took the
    /// preemptors ([`crate::preemption`]).
    pub binding_preemptions: Vec<crate::preemption::Preemption>,
}

/// Run the whole pipeline over `inv` with `profiles` (looked up by `spec.schedulerName`).
pub fn plan(inv: &Inventory, profiles: Arc<Vec<Profile>>, options: PlanOptions) -> Plan {
    let snapshot = Snapshot::new(inv.clusters.clone(), profiles, options.pipeline);
    plan_in(inv, &snapshot, options.now)
}

/// [`plan`] against a prepared snapshot of `inv`'s clusters, at `now` (epoch seconds): every
/// template through [`crate::pipeline::decide`] and [`crate::pipeline::render`], as the
/// controllers run them.
pub fn plan_in(inv: &Inventory, snapshot: &Snapshot, now: i64) -> Plan {
    let mut out = Plan::default();
    let mut templates: Vec<&Object> = inv
        .templates
        .iter()
        .filter(|t| !detector::is_ignored(t))
        .collect();
    templates.sort_by(|a, b| {
        (a.kind(), a.namespace(), a.name()).cmp(&(b.kind(), b.namespace(), b.name()))
    });
    let gates = snapshot.options().gates;
    // Per planned binding: its template, its state before the decision and the outcome (binding
    // preemption decides again from there).
    let mut decided: Vec<(&Object, ResourceBinding, crate::pipeline::Decision)> = Vec::new();
    for t in templates {
        let (mut rb, claim) = match binding_for_with(inv, t, gates) {
            Some(Ok(b)) => b,
            Some(Err(e)) => {
                out.faults.push(format!(
                    "{} {}: {e}",
                    t.kind(),
                    qualified(t.namespace(), t.name())
                ));
                continue;
            }
            None => {
                out.unmatched.push(format!(
                    "{} {}",
                    t.kind(),
                    qualified(t.namespace(), t.name())
                ));
                continue;
            }
        };
        if let Some(from) = claim.preempted {
            out.preemptions.push(format!(
                "{} {}: {} preempted {}",
                t.kind(),
                qualified(t.namespace(), t.name()),
                claim.claimant().describe(),
                from.describe()
            ));
        }
        let mut memory = FailoverMemory::default();
        let before = rb.clone();
        let d = decide(
            snapshot,
            &mut rb,
            Some(t),
            Clock::at_secs(now),
            &mut memory,
            None,
        );
        let works = render(snapshot, &rb, t, &inv.overrides, &inv.interpreters);
        let mut evicted = d.taint_evicted.clone();
        evicted.extend(d.app_evicted.clone());
        out.bindings.push(PlannedBinding {
            binding: rb,
            scheduled: d.scheduled,
            evicted,
            ignored_faults: d.ignored_faults.clone(),
            works,
        });
        decided.push((t, before, d));
    }
    let keys: Vec<(String, i32)> = out
        .bindings
        .iter()
        .map(|b| {
            (
                qualified(b.binding.metadata.namespace(), b.binding.metadata.name()),
                crate::queue::binding_priority(b.binding.spec.schedule_priority.as_ref()),
            )
        })
        .collect();
    out.schedule_order = crate::queue::schedule_order(
        keys.iter().map(|(k, p)| (k.as_str(), *p)),
        gates.priority_based_scheduling,
    );
    if gates.binding_preemption {
        preempt_in_order(inv, snapshot, now, &mut out, &mut decided);
    }
    out
}

/// Binding preemption over a plan: every binding left Unschedulable, in schedule order, through
/// [`crate::preemption::decide_preempting`] against the others as planned so far; victims are
/// evicted and decided again (back through the queue) on the snapshot the preemption left, which
/// the next preemption starts from.
fn preempt_in_order(
    inv: &Inventory,
    snapshot: &Snapshot,
    now: i64,
    out: &mut Plan,
    decided: &mut [(&Object, ResourceBinding, crate::pipeline::Decision)],
) {
    use crate::preemption::{decide_preempting, evict_victim};
    let mut snap = snapshot.clone();
    let index: BTreeMap<String, usize> = out
        .bindings
        .iter()
        .enumerate()
        .map(|(i, b)| {
            (
                qualified(b.binding.metadata.namespace(), b.binding.metadata.name()),
                i,
            )
        })
        .collect();
    let clock = Clock::at_secs(now);
    for key in out.schedule_order.clone() {
        let Some(&i) = index.get(&key) else { continue };
        let result = {
            let others: Vec<&ResourceBinding> = out
                .bindings
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, b)| &b.binding)
                .collect();
            let (t, before, d) = &decided[i];
            decide_preempting(
                &snap,
                before,
                &out.bindings[i].binding,
                d,
                Some(*t),
                clock,
                &FailoverMemory::default(),
                &others,
            )
        };
        let p = match result {
            Ok(Some(p)) => p,
            Ok(None) => continue,
            Err(e) => {
                out.faults.push(format!(
                    "{} {key}: preemption: {e}",
                    out.bindings[i].binding.kind
                ));
                continue;
            }
        };
        snap = p.snapshot;
        let t = decided[i].0;
        out.bindings[i].works = render(&snap, &p.binding, t, &inv.overrides, &inv.interpreters);
        out.bindings[i].binding = p.binding;
        out.bindings[i].scheduled = p.decision.scheduled;
        out.bindings[i].ignored_faults = p.decision.ignored_faults.clone();
        decided[i].2 = p.decision;
        for v in &p.preemption.victims {
            let Some(&j) = index.get(&v.key()) else {
                continue;
            };
            let (vt, _, _) = decided[j];
            let victim = &mut out.bindings[j].binding;
            evict_victim(victim, &p.preemption, now);
            victim.metadata.generation = Some(victim.metadata.generation.unwrap_or(1) + 1);
            let again = victim.clone();
            let d = decide(
                &snap,
                victim,
                Some(vt),
                clock,
                &mut FailoverMemory::default(),
                None,
            );
            out.bindings[j].works = render(&snap, victim, vt, &inv.overrides, &inv.interpreters);
            out.bindings[j].scheduled = d.scheduled;
            out.bindings[j].evicted.push(p.preemption.cluster.clone());
            decided[j].1 = again;
            decided[j].2 = d;
        }
        out.binding_preemptions.push(p.preemption);
    }
}

/// The binding the detector makes of `template` (with the policy that claims it), continuing the
/// binding of the same name in `inv`: its assignment, eviction tasks, status, uid, labels and
/// annotations carry over, and its generation moves on when the detector changed the spec.
/// `None` when no policy claims the template; an error when its interpretation failed.
pub fn binding_for<'a>(
    inv: &'a Inventory,
    template: &Object,
) -> Option<Result<(ResourceBinding, detector::Claim<'a>), crate::error::PluginError>> {
    binding_for_with(inv, template, crate::priority::FeatureGates::default())
}

/// [`binding_for`] under `gates`: policy preemption decides the claim
/// ([`detector::claim_with`]), and the policy's `schedulePriority` is resolved against the
/// inventory's PriorityClasses ([`crate::priority::apply`]); a resolution failure is an error
/// as an interpreter fault is (no binding).
pub fn binding_for_with<'a>(
    inv: &'a Inventory,
    template: &Object,
    gates: crate::priority::FeatureGates,
) -> Option<Result<(ResourceBinding, detector::Claim<'a>), crate::error::PluginError>> {
    let claim = detector::claim_with(
        template,
        &inv.propagation_policies,
        &inv.cluster_propagation_policies,
        gates.policy_preemption,
    )?;
    let mut rb = match detector::build_binding(template, claim, &inv.interpreters, gates) {
        Ok(rb) => rb,
        Err(e) => return Some(Err(e)),
    };
    let classes = crate::priority::PriorityClass::all_of(&inv.templates);
    if let Err(e) = crate::priority::apply(
        &mut rb,
        claim.policy.spec.schedule_priority.as_ref(),
        &classes,
        gates,
    ) {
        return Some(Err(crate::error::PluginError::failed(
            "schedulePriority",
            e.0,
        )));
    }
    let key = format!("{}/{}", rb.metadata.namespace(), rb.metadata.name());
    let mut generation = 1;
    if let Some(prev) = inv.bindings.get(&key) {
        rb.spec.clusters = prev.spec.clusters.clone();
        rb.spec.graceful_eviction_tasks = prev.spec.graceful_eviction_tasks.clone();
        rb.spec.reschedule_triggered_at = prev.spec.reschedule_triggered_at.clone();
        rb.status = prev.status.clone();
        rb.metadata.uid = prev.metadata.uid.clone();
        if prev.metadata.creation_timestamp.is_some() {
            // Binding preemption takes the newest victims first.
            rb.metadata.creation_timestamp = prev.metadata.creation_timestamp.clone();
        }
        for (k, v) in &prev.metadata.annotations {
            rb.metadata
                .annotations
                .entry(k.clone())
                .or_insert_with(|| v.clone());
        }
        for (k, v) in &prev.metadata.labels {
            rb.metadata
                .labels
                .entry(k.clone())
                .or_insert_with(|| v.clone());
        }
        let prev_gen = prev.metadata.generation.unwrap_or(1);
        generation = if prev.spec == rb.spec {
            prev_gen
        } else {
            prev_gen + 1
        };
    }
    rb.metadata.generation = Some(generation);
    Some(Ok((rb, claim)))
}
