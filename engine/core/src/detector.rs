//! The resource detector: which policy claims a template, and the ResourceBinding it produces
//! (Karmada `pkg/detector`); what the workload is made of comes from the interpreter chain.

use flotilla_api::Object;
use flotilla_api::labels;
use flotilla_api::meta::{ObjectMeta, ObjectReference, OwnerReference};
use flotilla_api::policy::PropagationPolicy;
use flotilla_api::work::{
    BINDING_API_VERSION, ReplicaRequirements, ResourceBinding, ResourceBindingSpec,
};
use serde_json::Value;

use crate::error::PluginError;
use crate::interpreter::{Interpreters, Operation};
use crate::selector::selectors_priority;

/// API groups the detector never propagates (Karmada's own and events).
pub const SKIPPED_GROUPS: &[&str] = &[
    "cluster.karmada.io",
    "policy.karmada.io",
    "work.karmada.io",
    "config.karmada.io",
    "networking.karmada.io",
    "autoscaling.karmada.io",
    "remedy.karmada.io",
    "apps.karmada.io",
    "events.k8s.io",
];

/// True when the detector ignores `template` entirely: reserved namespaces (`karmada-system`,
/// `karmada-cluster`, `karmada-es-*`, `kube-*`), Karmada's own groups, core Events, and templates
/// labelled `resourcetemplate.karmada.io/claimed-by`.
pub fn is_ignored(template: &Object) -> bool {
    let ns = template.namespace();
    if ns == "karmada-system"
        || ns == "karmada-cluster"
        || ns.starts_with(labels::EXECUTION_NAMESPACE_PREFIX)
        || ns.starts_with("kube-")
    {
        return true;
    }
    if SKIPPED_GROUPS.contains(&template.group())
        || (template.api_version() == "v1" && template.kind() == "Event")
    {
        return true;
    }
    template
        .labels()
        .get(labels::CLAIMED_BY)
        .is_some_and(|v| !v.is_empty())
}

/// Which kind of policy claimed a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyScope {
    /// A namespaced PropagationPolicy.
    Namespaced,
    /// A ClusterPropagationPolicy.
    Cluster,
}

/// The policy chosen for a template.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The policy.
    pub policy: &'a PropagationPolicy,
    /// Its scope.
    pub scope: PolicyScope,
    /// The policy it took the template over from (policy preemption), if any.
    pub preempted: Option<Claimant<'a>>,
}

/// A policy named by a template's claim annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimant<'a> {
    /// Its scope.
    pub scope: PolicyScope,
    /// Its namespace (empty for a ClusterPropagationPolicy).
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

impl Claimant<'_> {
    /// Karmada's wording in preemption events: `propagation policy(ns/name)` or
    /// `cluster propagation policy(name)`.
    pub fn describe(&self) -> String {
        match self.scope {
            PolicyScope::Namespaced => {
                format!("propagation policy({}/{})", self.namespace, self.name)
            }
            PolicyScope::Cluster => format!("cluster propagation policy({})", self.name),
        }
    }
}

impl Claim<'_> {
    /// The claiming policy as a [`Claimant`].
    pub fn claimant(&self) -> Claimant<'_> {
        Claimant {
            scope: self.scope,
            namespace: self.policy.metadata.namespace(),
            name: self.policy.metadata.name(),
        }
    }
}

/// The policy the template's claim annotations name (Karmada's `propagationpolicy.karmada.io/
/// namespace`+`name`, or `clusterpropagationpolicy.karmada.io/name`).
pub fn claimed_by(template: &Object) -> Option<Claimant<'_>> {
    let a = template.0.pointer("/metadata/annotations")?;
    let get = |k: &str| a.get(k).and_then(Value::as_str);
    match (get(labels::PP_NAMESPACE), get(labels::PP_NAME)) {
        (Some(ns), Some(name)) if !ns.is_empty() && !name.is_empty() => {
            return Some(Claimant {
                scope: PolicyScope::Namespaced,
                namespace: ns,
                name,
            });
        }
        _ => {}
    }
    get(labels::CPP_NAME)
        .filter(|n| !n.is_empty())
        .map(|name| Claimant {
            scope: PolicyScope::Cluster,
            namespace: "",
            name,
        })
}

/// Pick the policy for `template` as Karmada's detector does, without policy preemption
/// ([`claim_with`] with the `PropagationPolicyPreemption` gate off).
pub fn claim<'a>(
    template: &Object,
    pps: &'a [PropagationPolicy],
    cpps: &'a [PropagationPolicy],
) -> Option<Claim<'a>> {
    claim_with(template, pps, cpps, false)
}

/// Pick the policy for `template`, as Karmada's detector does:
///
/// - A template already claimed by a policy that still exists and still selects it stays with
///   that policy: a claim is sticky, a new better-matching policy does not take it.
/// - Unless `preemption` (the `PropagationPolicyPreemption` gate) is on and a policy with
///   `preemption: Always` selects it: a PropagationPolicy takes it from any
///   ClusterPropagationPolicy, and from a PropagationPolicy of lower explicit priority; a
///   ClusterPropagationPolicy takes it from a ClusterPropagationPolicy of lower explicit
///   priority (never from a PropagationPolicy). Among several, the best by the rule below.
/// - Otherwise (unclaimed, or its policy gone or no longer selecting it): PropagationPolicies
///   in its namespace first, then ClusterPropagationPolicies; within each, highest explicit
///   priority, then highest implicit priority (name 3 > label selector 2 > match-all 1), then
///   the lexicographically smallest name.
pub fn claim_with<'a>(
    template: &Object,
    pps: &'a [PropagationPolicy],
    cpps: &'a [PropagationPolicy],
    preemption: bool,
) -> Option<Claim<'a>> {
    let ns = template.namespace();
    let in_ns = || {
        pps.iter()
            .filter(move |p| p.metadata.namespace() == ns && !ns.is_empty())
    };
    let selects = |p: &PropagationPolicy| {
        p.metadata.deletion_timestamp.is_none()
            && selectors_priority(&template.0, &p.spec.resource_selectors) > 0
    };
    let preempting = |p: &&PropagationPolicy| {
        preemption && p.spec.preemption.as_deref() == Some("Always") && selects(p)
    };
    if let Some(c) = claimed_by(template) {
        let current = match c.scope {
            PolicyScope::Namespaced => in_ns().find(|p| p.metadata.name() == c.name),
            PolicyScope::Cluster => cpps.iter().find(|p| p.metadata.name() == c.name),
        }
        .filter(|p| selects(p));
        if let Some(current) = current {
            let floor = current.spec.explicit_priority();
            let taker = match c.scope {
                PolicyScope::Namespaced => best(
                    template,
                    in_ns()
                        .filter(preempting)
                        .filter(|p| p.spec.explicit_priority() > floor),
                )
                .map(|p| (p, PolicyScope::Namespaced)),
                PolicyScope::Cluster => best(template, in_ns().filter(preempting))
                    .map(|p| (p, PolicyScope::Namespaced))
                    .or_else(|| {
                        best(
                            template,
                            cpps.iter()
                                .filter(preempting)
                                .filter(|p| p.spec.explicit_priority() > floor),
                        )
                        .map(|p| (p, PolicyScope::Cluster))
                    }),
            };
            let (policy, scope, preempted) = match taker {
                Some((p, s)) if !std::ptr::eq(p, current) => (
                    p,
                    s,
                    Some(Claimant {
                        scope: c.scope,
                        namespace: current.metadata.namespace(),
                        name: current.metadata.name(),
                    }),
                ),
                _ => (current, c.scope, None),
            };
            return Some(Claim {
                policy,
                scope,
                preempted,
            });
        }
    }
    if let Some(p) = best(template, in_ns()) {
        return Some(Claim {
            policy: p,
            scope: PolicyScope::Namespaced,
            preempted: None,
        });
    }
    best(template, cpps.iter()).map(|p| Claim {
        policy: p,
        scope: PolicyScope::Cluster,
        preempted: None,
    })
}

fn best<'a>(
    template: &Object,
    policies: impl Iterator<Item = &'a PropagationPolicy>,
) -> Option<&'a PropagationPolicy> {
    let mut best: Option<(&PropagationPolicy, i32, u8)> = None;
    for p in policies {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let implicit = selectors_priority(&template.0, &p.spec.resource_selectors);
        if implicit == 0 {
            continue;
        }
        let explicit = p.spec.explicit_priority();
        let better = match best {
            None => true,
            Some((b, be, bi)) => {
                (explicit, implicit) > (be, bi)
                    || ((explicit, implicit) == (be, bi) && p.metadata.name() < b.metadata.name())
            }
        };
        if better {
            best = Some((p, explicit, implicit));
        }
    }
    best.map(|(p, _, _)| p)
}

/// `GenerateBindingName`: `lower(name with ':' → '.') + "-" + lower(kind)`.
pub fn binding_name(kind: &str, name: &str) -> String {
    format!("{}-{}", name.replace(':', "."), kind).to_lowercase()
}

/// A deterministic permanent id (UUID v4 layout) for objects whose webhook-assigned id is absent
/// offline: derived from `seed` so repeated plans agree.
pub fn permanent_id(seed: &str) -> String {
    let a = crate::render::fnv1a32(seed.as_bytes());
    let b = crate::render::fnv1a32(format!("{seed}/1").as_bytes());
    let c = crate::render::fnv1a32(format!("{seed}/2").as_bytes());
    let d = crate::render::fnv1a32(format!("{seed}/3").as_bytes());
    format!(
        "{a:08x}-{:04x}-4{:03x}-{:04x}-{:04x}{d:08x}",
        b >> 16,
        b & 0x0fff,
        (c >> 16) & 0x3fff | 0x8000,
        c & 0xffff
    )
}

/// What a template's workload is made of, from the interpreter chain (Karmada's
/// `BuildResourceBinding` → `applyReplicaInterpretation`): the components when the kind's
/// InterpretComponent hook is enabled, otherwise its replicas and replica requirements when
/// InterpretReplica is; nothing for other kinds.
///
/// # Errors
/// The interpreter's fault (the detector reports it instead of writing a wrong binding).
pub fn interpret_workload(
    template: &Object,
    interpreters: &Interpreters,
) -> Result<(i32, Option<ReplicaRequirements>, Vec<Value>), PluginError> {
    let v = &template.0;
    if interpreters
        .resolve(v, Operation::InterpretComponent)
        .is_some()
    {
        let components = interpreters
            .get_components(v)?
            .into_iter()
            .map(|c| {
                serde_json::to_value(c).map_err(|e| {
                    PluginError::failed("InterpretComponent", format!("component: {e}"))
                })
            })
            .collect::<Result<Vec<Value>, PluginError>>()?;
        return Ok((0, None, components));
    }
    if interpreters
        .resolve(v, Operation::InterpretReplica)
        .is_some()
    {
        let r = interpreters.get_replicas(v)?;
        return Ok((r.replicas, r.requirements, Vec::new()));
    }
    Ok((0, None, Vec::new()))
}

/// What the `ResourceQuotaEstimate` gate adds to interpreted `replicaRequirements`: the
/// template's namespace when the interpreter left it empty (Karmada's detector), and the pod's
/// `priorityClassName` for the kinds whose built-in interpreter reads a pod template (Karmada's
/// `GenerateReplicaRequirements`). A customization sets `priorityClassName` in its own answer.
fn quota_requirements(template: &Object, rr: &mut ReplicaRequirements) {
    if rr.namespace.is_empty() {
        template.namespace().clone_into(&mut rr.namespace);
    }
    if !rr.priority_class_name.is_empty() {
        return;
    }
    let pod = match (template.api_version(), template.kind()) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet") | ("batch/v1", "Job") => {
            template.0.pointer("/spec/template/spec")
        }
        ("v1", "Pod") => template.0.get("spec"),
        _ => None,
    };
    if let Some(class) = pod
        .and_then(|p| p.get("priorityClassName"))
        .and_then(Value::as_str)
    {
        class.clone_into(&mut rr.priority_class_name);
    }
}

/// Build the ResourceBinding (namespaced template) or ClusterResourceBinding (cluster-scoped
/// template) for `template` claimed by `claim`, as Karmada's `BuildResourceBinding` does, with
/// the workload's replicas, requirements and components from `interpreters`.
/// `spec.clusters` is left empty: it belongs to the scheduler.
///
/// # Errors
/// An interpreter fault ([`interpret_workload`]).
pub fn build_binding(
    template: &Object,
    claim: Claim<'_>,
    interpreters: &Interpreters,
    gates: crate::priority::FeatureGates,
) -> Result<ResourceBinding, PluginError> {
    let policy = claim.policy;
    let namespaced = !template.namespace().is_empty();
    let mut meta = ObjectMeta {
        name: Some(binding_name(template.kind(), template.name())),
        namespace: namespaced.then(|| template.namespace().to_owned()),
        ..Default::default()
    };
    match claim.scope {
        PolicyScope::Namespaced => {
            let id = policy
                .metadata
                .labels
                .get(labels::PP_PERMANENT_ID)
                .cloned()
                .unwrap_or_else(|| {
                    permanent_id(&format!(
                        "pp/{}/{}",
                        policy.metadata.namespace(),
                        policy.metadata.name()
                    ))
                });
            meta.labels.insert(labels::PP_PERMANENT_ID.into(), id);
            meta.annotations.insert(
                labels::PP_NAMESPACE.into(),
                policy.metadata.namespace().into(),
            );
            meta.annotations
                .insert(labels::PP_NAME.into(), policy.metadata.name().into());
        }
        PolicyScope::Cluster => {
            let id = policy
                .metadata
                .labels
                .get(labels::CPP_PERMANENT_ID)
                .cloned()
                .unwrap_or_else(|| permanent_id(&format!("cpp/{}", policy.metadata.name())));
            meta.labels.insert(labels::CPP_PERMANENT_ID.into(), id);
            meta.annotations
                .insert(labels::CPP_NAME.into(), policy.metadata.name().into());
        }
    }
    let binding_key = format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    );
    let rb_id_label = if namespaced {
        labels::RB_PERMANENT_ID
    } else {
        labels::CRB_PERMANENT_ID
    };
    meta.labels.insert(
        rb_id_label.into(),
        permanent_id(&format!("rb/{binding_key}")),
    );
    meta.finalizers.push(
        if namespaced {
            labels::BINDING_FINALIZER
        } else {
            labels::CLUSTER_BINDING_FINALIZER
        }
        .to_owned(),
    );
    meta.owner_references.push(OwnerReference {
        api_version: template.api_version().into(),
        kind: template.kind().into(),
        name: template.name().into(),
        uid: template.uid().into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    });

    let (replicas, mut replica_requirements, components) =
        interpret_workload(template, interpreters)?;
    if gates.resource_quota_estimate
        && let Some(rr) = replica_requirements.as_mut()
    {
        quota_requirements(template, rr);
    }
    let ps = &policy.spec;
    let spec = ResourceBindingSpec {
        resource: ObjectReference {
            api_version: template.api_version().into(),
            kind: template.kind().into(),
            namespace: template.namespace().into(),
            name: template.name().into(),
            uid: template.uid().into(),
            resource_version: template.resource_version().into(),
        },
        propagate_deps: ps.propagate_deps.unwrap_or(false),
        replica_requirements,
        replicas,
        components,
        placement: ps.placement.clone(),
        scheduler_name: ps
            .scheduler_name
            .clone()
            .unwrap_or_else(|| labels::DEFAULT_SCHEDULER.to_owned()),
        failover: ps.failover.clone(),
        conflict_resolution: ps
            .conflict_resolution
            .clone()
            .unwrap_or_else(|| "Abort".to_owned()),
        suspension: ps.suspension.clone(),
        preserve_resources_on_deletion: ps.preserve_resources_on_deletion,
        ..Default::default()
    };
    Ok(ResourceBinding {
        api_version: BINDING_API_VERSION.into(),
        kind: if namespaced {
            "ResourceBinding"
        } else {
            "ClusterResourceBinding"
        }
        .into(),
        metadata: meta,
        spec,
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::policy::{PropagationSpec, ResourceSelector};
    use serde_json::json;

    fn pp(ns: &str, name: &str, priority: Option<i32>, sel: ResourceSelector) -> PropagationPolicy {
        PropagationPolicy {
            api_version: "policy.karmada.io/v1alpha1".into(),
            kind: "PropagationPolicy".into(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: PropagationSpec {
                resource_selectors: vec![sel],
                priority,
                ..Default::default()
            },
        }
    }

    fn deploy() -> Object {
        Object(
            json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx","namespace":"default","labels":{"app":"nginx"}},
            "spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"c","image":"nginx","resources":{"requests":{"cpu":"250m","memory":"64Mi"}}},{"name":"d","image":"x","resources":{"limits":{"cpu":"1"}}}]}}}}),
        )
    }

    fn sel(name: &str, labels: bool) -> ResourceSelector {
        ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
            label_selector: labels.then(|| flotilla_api::meta::LabelSelector {
                match_labels: std::collections::BTreeMap::from([("app".into(), "nginx".into())]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn explicit_priority_beats_implicit_and_name_breaks_ties() {
        let t = deploy();
        let pps = vec![
            pp("default", "b-all", None, sel("", false)),
            pp("default", "a-all", None, sel("", false)),
        ];
        assert_eq!(
            claim(&t, &pps, &[]).unwrap().policy.metadata.name(),
            "a-all"
        );
        let pps = vec![
            pp("default", "all", None, sel("", false)),
            pp("default", "named", None, sel("nginx", false)),
        ];
        assert_eq!(
            claim(&t, &pps, &[]).unwrap().policy.metadata.name(),
            "named"
        );
        let pps = vec![
            pp("default", "labels", Some(5), sel("", true)),
            pp("default", "named", None, sel("nginx", false)),
        ];
        assert_eq!(
            claim(&t, &pps, &[]).unwrap().policy.metadata.name(),
            "labels"
        );
    }

    #[test]
    fn namespaced_policy_beats_any_cluster_policy_and_other_namespaces_do_not_match() {
        let t = deploy();
        let pps = vec![pp("other", "named", Some(100), sel("nginx", false))];
        let cpps = vec![pp("", "cpp", Some(100), sel("nginx", false))];
        let c = claim(&t, &pps, &cpps).unwrap();
        assert_eq!(
            (c.policy.metadata.name(), c.scope),
            ("cpp", PolicyScope::Cluster)
        );
        let pps = vec![pp("default", "low", Some(-5), sel("", false))];
        assert_eq!(
            claim(&t, &pps, &cpps).unwrap().scope,
            PolicyScope::Namespaced
        );
    }

    fn claimed(mut t: Object, ns: &str, name: &str) -> Object {
        let a = t.0["metadata"]
            .as_object_mut()
            .unwrap()
            .entry("annotations")
            .or_insert_with(|| json!({}));
        if ns.is_empty() {
            a[labels::CPP_NAME] = json!(name);
        } else {
            a[labels::PP_NAMESPACE] = json!(ns);
            a[labels::PP_NAME] = json!(name);
        }
        t
    }

    fn always(mut p: PropagationPolicy) -> PropagationPolicy {
        p.spec.preemption = Some("Always".into());
        p
    }

    #[test]
    fn a_claim_is_sticky_without_preemption() {
        let t = claimed(deploy(), "default", "low");
        let pps = vec![
            pp("default", "low", Some(1), sel("nginx", false)),
            always(pp("default", "high", Some(9), sel("nginx", false))),
        ];
        let c = claim(&t, &pps, &[]).unwrap();
        assert_eq!(c.policy.metadata.name(), "low", "the gate is off");
        assert!(c.preempted.is_none());
        let c = claim_with(&t, &pps, &[], true).unwrap();
        assert_eq!(c.policy.metadata.name(), "high");
        assert_eq!(
            c.preempted.unwrap().describe(),
            "propagation policy(default/low)"
        );
        // Without `preemption: Always`, or without a higher priority, nothing moves.
        let pps = vec![
            pp("default", "low", Some(1), sel("nginx", false)),
            pp("default", "high", Some(9), sel("nginx", false)),
            always(pp("default", "same", Some(1), sel("nginx", false))),
        ];
        assert_eq!(
            claim_with(&t, &pps, &[], true)
                .unwrap()
                .policy
                .metadata
                .name(),
            "low"
        );
        // The claimed policy gone: a fresh choice.
        let pps = vec![pp("default", "other", None, sel("", false))];
        let c = claim_with(&t, &pps, &[], true).unwrap();
        assert_eq!((c.policy.metadata.name(), c.preempted), ("other", None));
    }

    #[test]
    fn cluster_policies_yield_to_any_preempting_pp_and_to_higher_cpps_only() {
        let t = claimed(deploy(), "", "cpp-low");
        let cpps = vec![
            pp("", "cpp-low", Some(5), sel("nginx", false)),
            always(pp("", "cpp-high", Some(6), sel("nginx", false))),
        ];
        let pps = vec![always(pp("default", "pp", Some(-100), sel("nginx", false)))];
        let c = claim_with(&t, &pps, &cpps, true).unwrap();
        assert_eq!(
            (c.policy.metadata.name(), c.scope),
            ("pp", PolicyScope::Namespaced),
            "a PP preempts a CPP regardless of priority"
        );
        assert_eq!(
            c.preempted.unwrap().describe(),
            "cluster propagation policy(cpp-low)"
        );
        let c = claim_with(&t, &[], &cpps, true).unwrap();
        assert_eq!(c.policy.metadata.name(), "cpp-high");
        // A CPP never takes a template from a PP.
        let t = claimed(deploy(), "default", "pp-plain");
        let pps = vec![pp("default", "pp-plain", None, sel("nginx", false))];
        let cpps = vec![always(pp("", "cpp-top", Some(1000), sel("nginx", false)))];
        assert_eq!(
            claim_with(&t, &pps, &cpps, true)
                .unwrap()
                .policy
                .metadata
                .name(),
            "pp-plain"
        );
    }

    /// A stand-in interpreter: 3 replicas for Deployments, a fault for StatefulSets.
    struct Stub;
    impl crate::interpreter::ResourceInterpreter for Stub {
        fn name(&self) -> &str {
            "stub"
        }
        fn hook_enabled(&self, _: &str, kind: &str, op: Operation) -> bool {
            op == Operation::InterpretReplica && (kind == "Deployment" || kind == "StatefulSet")
        }
        fn get_replicas(
            &self,
            object: &Value,
        ) -> Result<crate::interpreter::Replicas, PluginError> {
            if object["kind"] == "StatefulSet" {
                return Err(PluginError::failed("stub", "broken"));
            }
            Ok(crate::interpreter::Replicas {
                replicas: 3,
                requirements: Some(ReplicaRequirements {
                    priority_class_name: "high".into(),
                    ..Default::default()
                }),
            })
        }
    }

    fn stub() -> Interpreters {
        Interpreters::new(vec![std::sync::Arc::new(Stub)])
    }

    #[test]
    fn binding_carries_claim_labels_owner_and_interpreted_replicas() {
        let t = deploy();
        let pps = vec![pp(
            "default",
            "nginx-propagation",
            None,
            sel("nginx", false),
        )];
        let rb = build_binding(
            &t,
            claim(&t, &pps, &[]).unwrap(),
            &stub(),
            crate::priority::FeatureGates::default(),
        )
        .unwrap();
        assert_eq!(rb.metadata.name(), "nginx-deployment");
        assert_eq!(rb.kind, "ResourceBinding");
        assert_eq!(rb.spec.replicas, 3);
        assert_eq!(
            rb.metadata.annotations[labels::PP_NAME],
            "nginx-propagation"
        );
        assert!(rb.metadata.labels.contains_key(labels::PP_PERMANENT_ID));
        let req = rb.spec.replica_requirements.unwrap();
        assert_eq!(req.priority_class_name, "high");
        assert_eq!(rb.spec.scheduler_name, "default-scheduler");
    }

    #[test]
    fn uninterpreted_kinds_have_no_replicas_and_faults_are_errors() {
        let cm = Object(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}));
        assert_eq!(
            interpret_workload(&cm, &stub()).unwrap(),
            (0, None, Vec::new())
        );
        let sts =
            Object(json!({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"s"}}));
        assert!(interpret_workload(&sts, &stub()).is_err());
        assert_eq!(binding_name("Deployment", "a:b"), "a.b-deployment");
    }

    #[test]
    fn reserved_namespaces_and_karmada_groups_are_ignored() {
        assert!(is_ignored(&Object(
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"kube-system"}})
        )));
        assert!(is_ignored(&Object(
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"karmada-es-member1"}})
        )));
        assert!(is_ignored(&Object(
            json!({"apiVersion":"work.karmada.io/v1alpha1","kind":"Work","metadata":{"name":"w"}})
        )));
        assert!(!is_ignored(&deploy()));
    }
}
