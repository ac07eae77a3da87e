//! Selector matching shared by policies, affinities and overrides (Karmada `pkg/util/selector.go`).

use std::collections::BTreeMap;

use flotilla_api::cluster::Cluster;
use flotilla_api::meta::{LabelSelector, NodeSelectorRequirement};
use flotilla_api::policy::{ClusterAffinity, ClusterAffinityInline, ResourceSelector};
use serde_json::Value;

/// Implicit priority of a resource selector match (Karmada `ImplicitPriority`).
pub mod priority {
    /// The selector does not match.
    pub const MISMATCH: u8 = 0;
    /// Matched by apiVersion/kind only.
    pub const MATCH_ALL: u8 = 1;
    /// Matched by label selector.
    pub const LABEL_SELECTOR: u8 = 2;
    /// Matched by name.
    pub const NAME: u8 = 3;
}

/// Standard Kubernetes label-selector semantics. An invalid selector (unknown operator, `In` with no
/// values) matches nothing, as in Karmada.
pub fn label_selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    for (k, v) in &selector.match_labels {
        if labels.get(k) != Some(v) {
            return false;
        }
    }
    for req in &selector.match_expressions {
        let value = labels.get(&req.key);
        let ok = match req.operator.as_str() {
            "In" => !req.values.is_empty() && value.is_some_and(|v| req.values.contains(v)),
            "NotIn" => !req.values.is_empty() && value.is_none_or(|v| !req.values.contains(v)),
            "Exists" => req.values.is_empty() && value.is_some(),
            "DoesNotExist" => req.values.is_empty() && value.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// `ClusterMatches`: exclude, label selector, field selector and cluster names, ANDed.
pub fn cluster_matches(cluster: &Cluster, affinity: &ClusterAffinity) -> bool {
    matches_parts(
        cluster,
        &affinity.exclude,
        affinity.label_selector.as_ref(),
        affinity
            .field_selector
            .as_ref()
            .map(|f| f.match_expressions.as_slice()),
        &affinity.cluster_names,
    )
}

/// [`cluster_matches`] for the inline affinity of a `clusterAffinities` term or overflow tier.
pub fn cluster_matches_inline(cluster: &Cluster, affinity: &ClusterAffinityInline) -> bool {
    matches_parts(
        cluster,
        &affinity.exclude,
        affinity.label_selector.as_ref(),
        affinity
            .field_selector
            .as_ref()
            .map(|f| f.match_expressions.as_slice()),
        &affinity.cluster_names,
    )
}

fn matches_parts(
    cluster: &Cluster,
    exclude: &[String],
    labels: Option<&LabelSelector>,
    fields: Option<&[NodeSelectorRequirement]>,
    names: &[String],
) -> bool {
    let name = cluster.name();
    if exclude.iter().any(|e| e == name) {
        return false;
    }
    if let Some(sel) = labels
        && !label_selector_matches(sel, cluster.labels())
    {
        return false;
    }
    if let Some(exprs) = fields
        && !field_selector_matches(cluster, exprs)
    {
        return false;
    }
    names.is_empty() || names.iter().any(|n| n == name)
}

/// Karmada's cluster field selector: `zone` against `spec.zones`, `provider`/`region` as a
/// node-selector requirement set over `{provider, region}` (absent when empty).
pub fn field_selector_matches(cluster: &Cluster, exprs: &[NodeSelectorRequirement]) -> bool {
    let spec = &cluster.spec;
    for req in exprs {
        if req.key == "zone" {
            let zones = &spec.zones;
            let ok = match req.operator.as_str() {
                "In" => !zones.is_empty() && zones.iter().any(|z| req.values.contains(z)),
                "NotIn" => !zones.iter().any(|z| req.values.contains(z)),
                "Exists" => !zones.is_empty(),
                "DoesNotExist" => zones.is_empty(),
                _ => false,
            };
            if !ok {
                return false;
            }
            continue;
        }
        let value = match req.key.as_str() {
            "provider" if !spec.provider.is_empty() => Some(spec.provider.as_str()),
            "region" if !spec.region.is_empty() => Some(spec.region.as_str()),
            "" => return false,
            _ => None,
        };
        let ok = match req.operator.as_str() {
            "In" => value.is_some_and(|v| req.values.iter().any(|x| x == v)),
            "NotIn" => value.is_none_or(|v| !req.values.iter().any(|x| x == v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            "Gt" | "Lt" => {
                let (Some(v), [bound]) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    req.values.as_slice(),
                ) else {
                    return false;
                };
                let Ok(bound) = bound.parse::<i64>() else {
                    return false;
                };
                if req.operator == "Gt" {
                    v > bound
                } else {
                    v < bound
                }
            }
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// `ResourceSelectorPriority`: how specifically `sel` matches the unstructured `object`.
pub fn resource_selector_priority(object: &Value, sel: &ResourceSelector) -> u8 {
    // Direct field reads: the detector runs this for every (template, policy) pair, and
    // `Value::pointer` allocates per path segment.
    let top = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or("");
    let metadata = object.get("metadata");
    let meta = |k: &str| {
        metadata
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if top("apiVersion") != sel.api_version || top("kind") != sel.kind {
        return priority::MISMATCH;
    }
    if !sel.namespace.is_empty() && meta("namespace") != sel.namespace {
        return priority::MISMATCH;
    }
    if !sel.name.is_empty() {
        return if meta("name") == sel.name {
            priority::NAME
        } else {
            priority::MISMATCH
        };
    }
    match &sel.label_selector {
        None => priority::MATCH_ALL,
        Some(ls) => {
            let labels: BTreeMap<String, String> = metadata
                .and_then(|m| m.get("labels"))
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default();
            if label_selector_matches(ls, &labels) {
                priority::LABEL_SELECTOR
            } else {
                priority::MISMATCH
            }
        }
    }
}

/// The highest priority over a selector list (0 when none match).
pub fn selectors_priority(object: &Value, selectors: &[ResourceSelector]) -> u8 {
    selectors
        .iter()
        .map(|s| resource_selector_priority(object, s))
        .max()
        .unwrap_or(priority::MISMATCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::meta::LabelSelectorRequirement;
    use flotilla_api::policy::FieldSelector;

    fn cluster(name: &str, labels: &[(&str, &str)], region: &str, zones: &[&str]) -> Cluster {
        let mut c = Cluster::default();
        c.metadata.name = Some(name.into());
        c.metadata.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        c.spec.region = region.into();
        c.spec.zones = zones.iter().map(|z| z.to_string()).collect();
        c
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn not_in_matches_when_label_absent_and_in_requires_presence() {
        let labels = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let sel = |r| LabelSelector {
            match_expressions: vec![r],
            ..Default::default()
        };
        assert!(label_selector_matches(
            &sel(req("tier", "NotIn", &["a"])),
            &labels
        ));
        assert!(!label_selector_matches(
            &sel(req("tier", "In", &["a"])),
            &labels
        ));
        assert!(label_selector_matches(
            &sel(req("env", "In", &["prod", "dev"])),
            &labels
        ));
        assert!(!label_selector_matches(
            &sel(req("env", "Bogus", &[])),
            &labels
        ));
        assert!(label_selector_matches(&LabelSelector::default(), &labels));
    }

    #[test]
    fn cluster_affinity_ands_exclude_names_labels_and_fields() {
        let c = cluster("member1", &[("env", "prod")], "us-east", &["z1"]);
        let mut a = ClusterAffinity {
            cluster_names: vec!["member1".into(), "member2".into()],
            ..Default::default()
        };
        assert!(cluster_matches(&c, &a));
        a.exclude = vec!["member1".into()];
        assert!(!cluster_matches(&c, &a));
        a.exclude.clear();
        a.field_selector = Some(FieldSelector {
            match_expressions: vec![NodeSelectorRequirement {
                key: "region".into(),
                operator: "In".into(),
                values: vec!["us-west".into()],
            }],
        });
        assert!(!cluster_matches(&c, &a));
        a.field_selector = Some(FieldSelector {
            match_expressions: vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: "NotIn".into(),
                values: vec!["z2".into()],
            }],
        });
        assert!(cluster_matches(&c, &a));
    }

    #[test]
    fn zone_not_in_passes_for_cluster_without_zones_but_in_fails() {
        let c = cluster("m", &[], "", &[]);
        let e = |op: &str| {
            vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: op.into(),
                values: vec!["z".into()],
            }]
        };
        assert!(field_selector_matches(&c, &e("NotIn")));
        assert!(!field_selector_matches(&c, &e("In")));
        // region NotIn matches when region is empty (key absent from the label set).
        let r = vec![NodeSelectorRequirement {
            key: "region".into(),
            operator: "NotIn".into(),
            values: vec!["x".into()],
        }];
        assert!(field_selector_matches(&c, &r));
    }

    #[test]
    fn resource_selector_priorities_follow_karmada() {
        let obj = serde_json::json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"nginx","namespace":"default","labels":{"app":"nginx"}}});
        let mut s = ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            ..Default::default()
        };
        assert_eq!(resource_selector_priority(&obj, &s), priority::MATCH_ALL);
        s.label_selector = Some(LabelSelector {
            match_labels: BTreeMap::from([("app".into(), "nginx".into())]),
            ..Default::default()
        });
        assert_eq!(
            resource_selector_priority(&obj, &s),
            priority::LABEL_SELECTOR
        );
        s.name = "nginx".into();
        assert_eq!(resource_selector_priority(&obj, &s), priority::NAME);
        s.name = "other".into();
        assert_eq!(
            resource_selector_priority(&obj, &s),
            priority::MISMATCH,
            "name set ignores labels"
        );
        s.name.clear();
        s.namespace = "kube-system".into();
        assert_eq!(resource_selector_priority(&obj, &s), priority::MISMATCH);
        s.namespace.clear();
        s.api_version = "apps/v1beta1".into();
        assert_eq!(resource_selector_priority(&obj, &s), priority::MISMATCH);
    }
}
