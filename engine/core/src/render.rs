//! Work rendering: a scheduled binding becomes one Work per target cluster in `karmada-es-<cluster>`,
//! with the per-cluster replica revision and overrides applied (Karmada `pkg/controllers/binding/common.go`).

use std::collections::BTreeMap;

use flotilla_api::Object;
use flotilla_api::labels;
use flotilla_api::meta::ObjectMeta;
use flotilla_api::work::{ResourceBinding, WORK_API_VERSION, Work, WorkSpec, WorkloadTemplate};
use serde_json::{Map, Value};

use crate::framework::{FailurePolicy, OverrideInput, Profile};
use crate::interpreter::{Interpreters, Operation};
use crate::overrides::OverridePolicies;

/// FNV-1a 32-bit hash (Karmada hashes names and UIDs with it).
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Kubernetes `rand.SafeEncodeString`: maps each byte onto a vowel-free alphabet.
pub fn safe_encode(s: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|c| ALPHABET[usize::from(c) % ALPHABET.len()] as char)
        .collect()
}

/// `GenerateWorkName(kind, name, namespace)`.
pub fn work_name(kind: &str, name: &str, namespace: &str) -> String {
    let n = name.replace(':', ".").to_lowercase();
    let key = if namespace.is_empty() {
        format!("{n}-{kind}")
    } else {
        format!("{namespace}-{n}-{kind}")
    }
    .to_lowercase();
    format!("{n}-{}", safe_encode(&fnv1a32(key.as_bytes()).to_string()))
}

/// `karmada-es-<cluster>`.
pub fn execution_namespace(cluster: &str) -> String {
    format!("{}{cluster}", labels::EXECUTION_NAMESPACE_PREFIX)
}

/// Why a Work could not be rendered for one cluster (the others still render).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster {cluster}: {message}")]
pub struct RenderError {
    /// The target cluster.
    pub cluster: String,
    /// What failed (an override, a replica revision).
    pub message: String,
}

/// Drop what must not travel to a member (`prune.RemoveIrrelevantFields`): server-set metadata,
/// `status`, Deployment revision annotations, Job auto-selector labels and ttl, Service cluster IPs.
pub fn prune(object: &mut Value) {
    let Some(o) = object.as_object_mut() else {
        return;
    };
    o.remove("status");
    let kind = o
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in [
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "resourceVersion",
            "selfLink",
            "uid",
            "ownerReferences",
            "finalizers",
        ] {
            meta.remove(f);
        }
        if kind == "Deployment"
            && let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut)
        {
            a.remove("deployment.kubernetes.io/revision");
        }
    }
    match kind.as_str() {
        "Job" => {
            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("ttlSecondsAfterFinished");
            }
        }
        "Service" => {
            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
                && spec.get("clusterIP").and_then(Value::as_str) != Some("None")
            {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
        }
        _ => {}
    }
}

fn merge_into(object: &mut Value, section: &str, key: &str, value: &str) {
    let Some(meta) = object.as_object_mut().map(|o| {
        o.entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()))
    }) else {
        return;
    };
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let m = meta
        .entry(section)
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    if let Some(m) = m.as_object_mut() {
        m.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// Where a binding's Works go: its target clusters, then those of the bindings that require it
/// (`spec.requiredBy`: the dependencies distributor's attached bindings), each once (Karmada's
/// `mergeTargetClusters`).
pub fn target_clusters(
    spec: &flotilla_api::work::ResourceBindingSpec,
) -> Vec<flotilla_api::work::TargetCluster> {
    let mut out = spec.clusters.clone();
    for snapshot in &spec.required_by {
        let clusters = snapshot.get("clusters").and_then(Value::as_array);
        for c in clusters.into_iter().flatten() {
            if let Ok(t) = serde_json::from_value::<flotilla_api::work::TargetCluster>(c.clone())
                && !out.iter().any(|o| o.name == t.name)
            {
                out.push(t);
            }
        }
    }
    out
}

/// Render the Works of a scheduled binding: one per entry of `spec.clusters` (then of the
/// clusters of the bindings that require it, [`target_clusters`]), in that order.
/// A workload's copy gets the cluster's replicas through ReviseReplica when `interpreters`
/// revise its kind (as Karmada's `ensureWork`). Clusters missing from `snapshot`, whose replica
/// revision or overrides fail yield a [`RenderError`] instead.
pub fn render_works(
    binding: &ResourceBinding,
    template: &Object,
    snapshot: &crate::pipeline::Snapshot,
    policies: &OverridePolicies,
    profile: &Profile,
    interpreters: &Interpreters,
) -> Vec<Result<Work, RenderError>> {
    let spec = &binding.spec;
    let namespaced = binding.kind == "ResourceBinding";
    let binding_id_key = if namespaced {
        labels::RB_PERMANENT_ID
    } else {
        labels::CRB_PERMANENT_ID
    };
    let binding_id = binding
        .metadata
        .labels
        .get(binding_id_key)
        .cloned()
        .unwrap_or_default();
    let completions = job_completions(binding, template);

    target_clusters(spec)
        .iter()
        .map(|target| {
            let err = |message: String| RenderError {
                cluster: target.name.clone(),
                message,
            };
            let cluster = snapshot
                .cluster(&target.name)
                .ok_or_else(|| err("cluster not found".into()))?;
            let mut object = template.0.clone();
            if spec.is_workload()
                && interpreters
                    .resolve(&object, Operation::ReviseReplica)
                    .is_some()
            {
                object = interpreters
                    .revise_replica(&object, i64::from(target.replicas))
                    .map_err(|e| err(format!("revising replicas: {e}")))?;
            }
            if let Some(c) = completions
                .as_ref()
                .and_then(|m| m.get(target.name.as_str()))
                && let Some(s) = object.get_mut("spec").and_then(Value::as_object_mut)
            {
                s.insert("completions".into(), Value::from(*c));
            }

            // Overrides last: they have the final word.
            let mut applied = Vec::new();
            for slot in &profile.overriders {
                let input = OverrideInput::new(&object, cluster, policies)
                    .with_expressions(profile.expressions.as_deref());
                match slot.plugin.override_manifest(&input) {
                    Ok(p) => {
                        object =
                            crate::overrides::apply(&object, &p).map_err(|e| err(e.to_string()))?;
                        applied.extend(p.applied);
                    }
                    // An ignored overrider fault leaves the manifest as the earlier overriders made it.
                    Err(_) if slot.failure_policy == FailurePolicy::Ignore => {}
                    Err(e) => return Err(err(e.to_string())),
                }
            }

            let name = work_name(template.kind(), template.name(), template.namespace());
            let ns = execution_namespace(&target.name);
            let mut work_labels = BTreeMap::from([(binding_id_key.to_owned(), binding_id.clone())]);
            merge_into(&mut object, "labels", binding_id_key, &binding_id);
            let mut annotations = BTreeMap::new();
            if template.generation() > 0 {
                merge_into(
                    &mut object,
                    "annotations",
                    labels::TEMPLATE_GENERATION,
                    &template.generation().to_string(),
                );
            }
            if namespaced {
                for (k, v) in [
                    (labels::RB_NAMESPACE, binding.metadata.namespace()),
                    (labels::RB_NAME, binding.metadata.name()),
                ] {
                    merge_into(&mut object, "annotations", k, v);
                    annotations.insert(k.to_owned(), v.to_owned());
                }
            } else {
                merge_into(
                    &mut object,
                    "annotations",
                    labels::CRB_NAME,
                    binding.metadata.name(),
                );
                annotations.insert(
                    labels::CRB_NAME.to_owned(),
                    binding.metadata.name().to_owned(),
                );
            }
            // Conflict resolution: the template's annotation wins over the binding's policy.
            let conflict = template
                .annotations()
                .get(labels::CONFLICT_RESOLUTION)
                .cloned()
                .unwrap_or_else(|| {
                    if spec.conflict_resolution == "Overwrite" {
                        "overwrite"
                    } else {
                        "abort"
                    }
                    .to_owned()
                });
            annotations.insert(labels::CONFLICT_RESOLUTION.to_owned(), conflict.clone());
            for (k, v) in crate::overrides::applied_annotations(&applied) {
                annotations.insert(k, v);
            }

            merge_into(&mut object, "labels", labels::MANAGED, "true");
            merge_into(
                &mut object,
                "annotations",
                labels::TEMPLATE_UID,
                template.uid(),
            );
            merge_into(&mut object, "annotations", labels::WORK_NAME, &name);
            merge_into(&mut object, "annotations", labels::WORK_NAMESPACE, &ns);
            merge_into(
                &mut object,
                "annotations",
                labels::CONFLICT_RESOLUTION,
                &conflict,
            );
            prune(&mut object);
            let work_id = crate::detector::permanent_id(&format!("work/{ns}/{name}"));
            merge_into(&mut object, "labels", labels::WORK_PERMANENT_ID, &work_id);
            work_labels.insert(labels::WORK_PERMANENT_ID.to_owned(), work_id);

            let suspend = spec.suspension.as_ref().and_then(|s| {
                if s.dispatching == Some(true) {
                    Some(true)
                } else {
                    s.dispatching_on_clusters
                        .as_ref()
                        .filter(|d| d.cluster_names.contains(&target.name))
                        .map(|_| true)
                }
            });
            Ok(Work {
                api_version: WORK_API_VERSION.into(),
                kind: "Work".into(),
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(ns),
                    labels: work_labels,
                    annotations,
                    finalizers: vec![labels::EXECUTION_FINALIZER.to_owned()],
                    ..Default::default()
                },
                spec: WorkSpec {
                    workload: WorkloadTemplate {
                        manifests: vec![object],
                    },
                    suspend_dispatching: suspend,
                    preserve_resources_on_deletion: spec
                        .preserve_resources_on_deletion
                        .filter(|p| *p),
                },
                status: None,
            })
        })
        .collect()
}

/// Job completions divided over the target clusters (Divided Jobs with `spec.completions`): Webster
/// with votes = assigned replicas and the Job's UID as tie-breaker.
fn job_completions(binding: &ResourceBinding, template: &Object) -> Option<BTreeMap<String, i32>> {
    let spec = &binding.spec;
    if template.kind() != "Job" || spec.replicas <= 0 {
        return None;
    }
    let divided = spec.placement.as_ref().is_some_and(|p| {
        p.replica_scheduling_type() == flotilla_api::policy::scheduling_type::DIVIDED
    });
    let completions = template
        .0
        .pointer("/spec/completions")
        .and_then(Value::as_i64)?;
    if !divided {
        return None;
    }
    let votes: Vec<(&str, i64)> = spec
        .clusters
        .iter()
        .map(|t| (t.name.as_str(), i64::from(t.replicas)))
        .collect();
    let seats = i32::try_from(completions).unwrap_or(i32::MAX);
    let out = crate::division::webster::dispense(seats, &votes, &[], template.uid());
    Some(out.into_iter().map(|t| (t.name, t.replicas)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_names_match_karmada() {
        // Karmada's own examples: GenerateWorkName("Deployment", "nginx", "default").
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
        assert_eq!(
            work_name("Deployment", "nginx", "default"),
            format!(
                "nginx-{}",
                safe_encode(&fnv1a32(b"default-nginx-deployment").to_string())
            )
        );
        assert_eq!(execution_namespace("member1"), "karmada-es-member1");
    }

    #[test]
    fn fnv1a32_matches_reference_vectors() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }
}
