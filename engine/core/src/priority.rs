//! Priority-based scheduling (Karmada v1.19): the feature gates, PriorityClasses, and the
//! resolution of a policy's `spec.schedulePriority` into its binding's
//! `spec.schedulePriority.priority` (Karmada's `BuildResourceBinding`).

use flotilla_api::Object;
use serde_json::{Value, json};

/// Karmada's feature gates this pipeline reads (`--feature-gates`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `PriorityBasedScheduling` (beta, on by default in Karmada v1.19): bindings get their
    /// policy's priority and the scheduler takes the highest priority first.
    pub priority_based_scheduling: bool,
    /// `PropagationPolicyPreemption` (alpha, off by default): a policy with
    /// `preemption: Always` takes templates over from lower-priority policies.
    pub policy_preemption: bool,
    /// `BindingPreemption` (Flotilla, alpha, off by default — Karmada has no binding preemption,
    /// so a default control plane schedules exactly as Karmada does): a binding that fits nowhere
    /// for lack of capacity evicts lower-priority bindings from one cluster
    /// ([`crate::preemption`]).
    pub binding_preemption: bool,
    /// `ResourceQuotaEstimate` (alpha, off by default): the members' ResourceQuotas cap the
    /// replica and component-set estimates, as Karmada's scheduler-estimator's
    /// `ResourceQuotaEstimator` does, and the interpreted `replicaRequirements` carry the
    /// template's namespace and the pod's `priorityClassName` (for PriorityClass-scoped quotas).
    /// Quotas come from each Cluster's `flotilla.dev/resource-quotas` annotation, which the
    /// cluster status controller and the agent keep when the gate is on.
    pub resource_quota_estimate: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            priority_based_scheduling: true,
            policy_preemption: false,
            binding_preemption: false,
            resource_quota_estimate: false,
        }
    }
}

/// The gate names, as Karmada spells them.
pub const GATE_NAMES: [&str; 4] = [
    "PriorityBasedScheduling",
    "PropagationPolicyPreemption",
    "BindingPreemption",
    "ResourceQuotaEstimate",
];

impl FeatureGates {
    /// Apply `spec`, Karmada's `--feature-gates` syntax: `Name=true,Other=false` (whitespace
    /// around entries allowed; at most 4 KiB).
    ///
    /// # Errors
    /// An unknown gate, a value other than `true`/`false`, or a malformed entry, by name.
    pub fn set(&mut self, spec: &str) -> Result<(), String> {
        if spec.len() > 4096 {
            return Err("--feature-gates: longer than 4096 bytes".into());
        }
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((name, value)) = entry.split_once('=') else {
                return Err(format!(
                    "--feature-gates: missing bool value for {:?}",
                    truncate(entry)
                ));
            };
            let (name, value) = (name.trim(), value.trim());
            let on = match value {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(format!(
                        "--feature-gates: invalid value of {name}: {:?}, err: must be true or false",
                        truncate(value)
                    ));
                }
            };
            match name {
                "PriorityBasedScheduling" => self.priority_based_scheduling = on,
                "PropagationPolicyPreemption" => self.policy_preemption = on,
                "BindingPreemption" => self.binding_preemption = on,
                "ResourceQuotaEstimate" => self.resource_quota_estimate = on,
                other => {
                    return Err(format!(
                        "--feature-gates: unrecognized feature gate: {} (known: {})",
                        truncate(other),
                        GATE_NAMES.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

/// What `preemptionPolicy` a PriorityClass gives its workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreemptionPolicy {
    /// May preempt lower-priority workloads (the Kubernetes default).
    #[default]
    PreemptLowerPriority,
    /// Never preempts; waits instead.
    Never,
}

impl PreemptionPolicy {
    /// As spelled in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptionPolicy::PreemptLowerPriority => "PreemptLowerPriority",
            PreemptionPolicy::Never => "Never",
        }
    }
}

/// A scheduling.k8s.io/v1 PriorityClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClass {
    /// Its name.
    pub name: String,
    /// `value`.
    pub value: i32,
    /// `preemptionPolicy` (default `PreemptLowerPriority`).
    pub preemption_policy: PreemptionPolicy,
    /// `globalDefault`.
    pub global_default: bool,
}

impl PriorityClass {
    /// Read a PriorityClass object; `None` when it is not one or its fields are malformed (the
    /// API server refuses such objects).
    pub fn from_object(o: &Value) -> Option<Self> {
        if o.get("apiVersion")?.as_str()? != "scheduling.k8s.io/v1"
            || o.get("kind")?.as_str()? != "PriorityClass"
        {
            return None;
        }
        let name = o.pointer("/metadata/name")?.as_str()?.to_owned();
        let value = match o.get("value") {
            None | Some(Value::Null) => 0,
            Some(v) => i32::try_from(v.as_i64()?).ok()?,
        };
        let preemption_policy = match o.get("preemptionPolicy").and_then(Value::as_str) {
            None | Some("PreemptLowerPriority") => PreemptionPolicy::PreemptLowerPriority,
            Some("Never") => PreemptionPolicy::Never,
            Some(_) => return None,
        };
        Some(PriorityClass {
            name,
            value,
            preemption_policy,
            global_default: o.get("globalDefault") == Some(&Value::Bool(true)),
        })
    }

    /// The PriorityClasses among `objects`.
    pub fn all_of<'a>(objects: impl IntoIterator<Item = &'a Object>) -> Vec<PriorityClass> {
        objects
            .into_iter()
            .filter_map(|o| PriorityClass::from_object(&o.0))
            .collect()
    }
}

/// Why a policy's `schedulePriority` could not be resolved (Karmada's detector errors; the
/// binding is not written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PriorityError(pub String);

/// The annotation carrying the resolved PriorityClass's `preemptionPolicy` on a binding
/// (Karmada's binding `spec.schedulePriority` has the priority only). Written only for `Never`;
/// absent means `PreemptLowerPriority`, the Kubernetes default. Binding preemption reads it
/// ([`preemption_policy_of`]).
pub const PREEMPTION_POLICY_ANNOTATION: &str = "scheduling.flotilla.dev/preemption-policy";

/// The preemption policy a binding carries ([`PREEMPTION_POLICY_ANNOTATION`]): `Never` only when
/// the annotation says so.
pub fn preemption_policy_of(rb: &flotilla_api::work::ResourceBinding) -> PreemptionPolicy {
    match rb
        .metadata
        .annotations
        .get(PREEMPTION_POLICY_ANNOTATION)
        .map(String::as_str)
    {
        Some("Never") => PreemptionPolicy::Never,
        _ => PreemptionPolicy::PreemptLowerPriority,
    }
}

/// A policy's `spec.schedulePriority` resolved against `classes`: the binding's
/// `spec.schedulePriority` (`{"priority": value}`, `{}` for 0 as Karmada serializes it) and the
/// class's preemption policy; `None` when the policy has none.
///
/// # Errors
/// Karmada's: a source other than `KubePriorityClass`, or no PriorityClass of that name.
pub fn resolve(
    schedule_priority: Option<&Value>,
    classes: &[PriorityClass],
) -> Result<Option<(Value, PreemptionPolicy)>, PriorityError> {
    let Some(sp) = schedule_priority.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let source = sp
        .get("priorityClassSource")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = sp
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    match source {
        "KubePriorityClass" => {}
        "PodPriorityClass" | "FederatedPriorityClass" => {
            return Err(PriorityError(format!(
                "priority class source is {source}, but {source} is not supported yet"
            )));
        }
        _ => return Err(PriorityError("unsupported priority class source".into())),
    }
    let Some(pc) = classes.iter().find(|c| c.name == name) else {
        return Err(PriorityError(format!(
            "priorityclasses.scheduling.k8s.io {:?} not found",
            truncate(name)
        )));
    };
    let value = if pc.value == 0 {
        json!({})
    } else {
        json!({"priority": pc.value})
    };
    Ok(Some((value, pc.preemption_policy)))
}

/// Set `rb`'s `spec.schedulePriority` from its policy's, when the `PriorityBasedScheduling` gate
/// is on (Karmada resolves it for ResourceBindings only: a ClusterResourceBinding keeps none).
///
/// # Errors
/// See [`resolve`].
pub fn apply(
    rb: &mut flotilla_api::work::ResourceBinding,
    policy_schedule_priority: Option<&Value>,
    classes: &[PriorityClass],
    gates: FeatureGates,
) -> Result<(), PriorityError> {
    if !gates.priority_based_scheduling || rb.kind == "ClusterResourceBinding" {
        return Ok(());
    }
    if let Some((value, policy)) = resolve(policy_schedule_priority, classes)? {
        rb.spec.schedule_priority = Some(value);
        if policy == PreemptionPolicy::Never {
            rb.metadata.annotations.insert(
                PREEMPTION_POLICY_ANNOTATION.to_owned(),
                policy.as_str().to_owned(),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pc(name: &str, value: i64, policy: Option<&str>) -> Value {
        let mut v = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value});
        if let Some(p) = policy {
            v["preemptionPolicy"] = json!(p);
        }
        v
    }

    #[test]
    fn gates_default_as_karmada_and_parse_its_syntax() {
        let mut g = FeatureGates::default();
        assert!(g.priority_based_scheduling && !g.policy_preemption && !g.binding_preemption);
        g.set("PriorityBasedScheduling=false, PropagationPolicyPreemption=true")
            .unwrap();
        assert!(!g.priority_based_scheduling && g.policy_preemption);
        g.set("BindingPreemption=true").unwrap();
        assert!(g.binding_preemption);
        assert!(g.set("Nope=true").unwrap_err().contains("unrecognized"));
        assert!(g.set("PriorityBasedScheduling=yes").is_err());
        assert!(g.set("PriorityBasedScheduling").is_err());
        assert!(g.set(&"x".repeat(5000)).is_err());
    }

    #[test]
    fn resolves_kube_priority_classes_and_refuses_the_rest() {
        let classes: Vec<PriorityClass> = [
            pc("high", 1000, None),
            pc("zero", 0, Some("Never")),
            pc("bad", 1 << 40, None),
        ]
        .iter()
        .filter_map(PriorityClass::from_object)
        .collect();
        assert_eq!(classes.len(), 2, "an out-of-range value is not a class");
        let sp =
            |src: &str, name: &str| json!({"priorityClassSource": src, "priorityClassName": name});
        assert_eq!(
            resolve(Some(&sp("KubePriorityClass", "high")), &classes).unwrap(),
            Some((
                json!({"priority": 1000}),
                PreemptionPolicy::PreemptLowerPriority
            ))
        );
        assert_eq!(
            resolve(Some(&sp("KubePriorityClass", "zero")), &classes).unwrap(),
            Some((json!({}), PreemptionPolicy::Never))
        );
        assert_eq!(resolve(None, &classes).unwrap(), None);
        assert_eq!(
            resolve(Some(&sp("KubePriorityClass", "gone")), &classes)
                .unwrap_err()
                .0,
            "priorityclasses.scheduling.k8s.io \"gone\" not found"
        );
        assert!(
            resolve(Some(&sp("PodPriorityClass", "high")), &classes)
                .unwrap_err()
                .0
                .contains("not supported yet")
        );
        assert_eq!(
            resolve(Some(&sp("Other", "high")), &classes).unwrap_err().0,
            "unsupported priority class source"
        );
    }

    #[test]
    fn only_with_the_gate_and_only_for_resource_bindings() {
        let classes = vec![PriorityClass::from_object(&pc("high", 7, Some("Never"))).unwrap()];
        let sp = json!({"priorityClassSource": "KubePriorityClass", "priorityClassName": "high"});
        let mut rb = flotilla_api::work::ResourceBinding {
            kind: "ResourceBinding".into(),
            ..Default::default()
        };
        let off = FeatureGates {
            priority_based_scheduling: false,
            ..Default::default()
        };
        apply(&mut rb, Some(&sp), &classes, off).unwrap();
        assert_eq!(rb.spec.schedule_priority, None);
        apply(&mut rb, Some(&sp), &classes, FeatureGates::default()).unwrap();
        assert_eq!(rb.spec.schedule_priority, Some(json!({"priority": 7})));
        assert_eq!(
            rb.metadata.annotations[PREEMPTION_POLICY_ANNOTATION],
            "Never"
        );
        let mut crb = flotilla_api::work::ResourceBinding {
            kind: "ClusterResourceBinding".into(),
            ..Default::default()
        };
        apply(&mut crb, Some(&sp), &classes, FeatureGates::default()).unwrap();
        assert_eq!(crb.spec.schedule_priority, None);
    }
}
