//! Admission for PropagationPolicies: the defaults Karmada's mutating webhook applies and the checks
//! its validating webhook makes (`pkg/webhook/propagationpolicy`, `pkg/util/validation`).

use std::collections::BTreeSet;

use flotilla_api::policy::{
    Placement, PropagationPolicy, division_preference, scheduling_type, spread_field,
};

/// One invalid field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn err(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Apply Karmada's defaults: selector namespace (PropagationPolicy only), `replicaSchedulingType:
/// Divided` when the strategy is present, `Weighted` preference for Divided, spread constraints
/// (`spreadByField: cluster`, `minGroups: 1`), application failover `gracePeriodSeconds: 600`, and the
/// CRD defaults (`schedulerName`, `conflictResolution`, `preemption`).
pub fn default_propagation_policy(policy: &mut PropagationPolicy) {
    let namespaced = policy.kind == "PropagationPolicy";
    let ns = policy.metadata.namespace().to_owned();
    let spec = &mut policy.spec;
    if namespaced {
        for s in &mut spec.resource_selectors {
            if s.namespace.is_empty() {
                s.namespace = ns.clone();
            }
        }
    }
    if let Some(p) = spec.placement.as_mut() {
        default_placement(p);
    }
    if let Some(app) = spec.failover.as_mut().and_then(|f| f.application.as_mut())
        && app.purge_mode.as_deref().unwrap_or("Gracefully") == "Gracefully"
        && app.grace_period_seconds.is_none()
    {
        app.grace_period_seconds = Some(600);
    }
    spec.scheduler_name
        .get_or_insert_with(|| flotilla_api::labels::DEFAULT_SCHEDULER.to_owned());
    spec.conflict_resolution
        .get_or_insert_with(|| "Abort".to_owned());
    spec.preemption.get_or_insert_with(|| "Never".to_owned());
}

/// The placement part of [`default_propagation_policy`].
pub fn default_placement(p: &mut Placement) {
    if let Some(rs) = p.replica_scheduling.as_mut() {
        let ty = rs
            .replica_scheduling_type
            .get_or_insert_with(|| scheduling_type::DIVIDED.to_owned());
        if ty == scheduling_type::DIVIDED
            && rs
                .replica_division_preference
                .as_deref()
                .unwrap_or("")
                .is_empty()
        {
            rs.replica_division_preference = Some(division_preference::WEIGHTED.to_owned());
        }
    }
    for sc in &mut p.spread_constraints {
        if sc.spread_by_field.is_empty() && sc.spread_by_label.is_empty() {
            sc.spread_by_field = spread_field::CLUSTER.to_owned();
        }
        if sc.min_groups == 0 {
            sc.min_groups = 1;
        }
    }
}

/// What Karmada's API server does to a Cluster when storing it (`pkg/registry/cluster/strategy.go`,
/// canonicalize): the deprecated single `spec.zone` moves into `spec.zones` when `zones` is empty.
/// Zone spread constraints and zone field selectors read only `zones`.
pub fn default_cluster(cluster: &mut flotilla_api::cluster::Cluster) {
    let spec = &mut cluster.spec;
    if spec.zones.is_empty() && !spec.zone.is_empty() {
        spec.zones = vec![std::mem::take(&mut spec.zone)];
    }
}

/// Validate a (defaulted) PropagationPolicy or ClusterPropagationPolicy.
pub fn validate_propagation_policy(policy: &PropagationPolicy) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &policy.spec;
    let namespaced = policy.kind == "PropagationPolicy";
    if policy.metadata.name().is_empty() {
        errs.push(err("metadata.name", "name is required"));
    }
    if spec.resource_selectors.is_empty() {
        errs.push(err(
            "spec.resourceSelectors",
            "at least one resource selector is required",
        ));
    }
    for (i, s) in spec.resource_selectors.iter().enumerate() {
        let f = format!("spec.resourceSelectors[{i}]");
        if s.api_version.is_empty() {
            errs.push(err(format!("{f}.apiVersion"), "apiVersion is required"));
        }
        if s.kind.is_empty() {
            errs.push(err(format!("{f}.kind"), "kind is required"));
        }
        if namespaced && !s.namespace.is_empty() && s.namespace != policy.metadata.namespace() {
            errs.push(err(
                format!("{f}.namespace"),
                format!(
                    "must be the policy's namespace {:?}, got {:?}",
                    policy.metadata.namespace(),
                    s.namespace
                ),
            ));
        }
        if spec.preemption.as_deref() == Some("Always") && s.name.is_empty() {
            errs.push(err(
                format!("{f}.name"),
                "preemption Always requires every resource selector to have a name",
            ));
        }
    }
    if let Some(p) = &spec.preemption
        && p != "Always"
        && p != "Never"
    {
        errs.push(err(
            "spec.preemption",
            format!("unsupported value {p:?}: must be Always or Never"),
        ));
    }
    if let Some(c) = &spec.conflict_resolution
        && c != "Abort"
        && c != "Overwrite"
    {
        errs.push(err(
            "spec.conflictResolution",
            format!("unsupported value {c:?}: must be Abort or Overwrite"),
        ));
    }
    if let Some(a) = &spec.activation_preference
        && !a.is_empty()
        && a != "Lazy"
    {
        errs.push(err(
            "spec.activationPreference",
            format!("unsupported value {a:?}: must be Lazy"),
        ));
    }
    if let Some(s) = &spec.suspension
        && s.dispatching == Some(true)
        && s.dispatching_on_clusters.is_some()
    {
        errs.push(err(
            "spec.suspension",
            "dispatching and dispatchingOnClusters cannot both be set",
        ));
    }
    if let Some(f) = &spec.failover {
        if let Some(app) = &f.application {
            if !spec.propagate_deps.unwrap_or(false) {
                errs.push(err(
                    "spec.propagateDeps",
                    "application failover requires propagateDeps: true",
                ));
            }
            if app
                .decision_conditions
                .toleration_seconds
                .is_some_and(|t| t < 0)
            {
                errs.push(err(
                    "spec.failover.application.decisionConditions.tolerationSeconds",
                    "must be >= 0",
                ));
            }
            let mode = app.purge_mode.as_deref().unwrap_or("Gracefully");
            if !["Directly", "Gracefully", "Never"].contains(&mode) {
                errs.push(err(
                    "spec.failover.application.purgeMode",
                    format!("unsupported value {mode:?}: must be Directly, Gracefully or Never"),
                ));
            }
            if app.grace_period_seconds.is_some() && mode != "Gracefully" {
                errs.push(err(
                    "spec.failover.application.gracePeriodSeconds",
                    "only allowed when purgeMode is Gracefully",
                ));
            }
            if app.grace_period_seconds.is_some_and(|g| g <= 0) {
                errs.push(err(
                    "spec.failover.application.gracePeriodSeconds",
                    "must be > 0",
                ));
            }
        }
        if let Some(mode) = f.cluster.as_ref().and_then(|c| c.purge_mode.as_deref())
            && !["Directly", "Gracefully"].contains(&mode)
        {
            errs.push(err(
                "spec.failover.cluster.purgeMode",
                format!("unsupported value {mode:?}: must be Directly or Gracefully"),
            ));
        }
    }
    if let Some(p) = &spec.placement {
        validate_placement(p, "spec.placement", &mut errs);
    }
    errs
}

fn validate_affinity_fields(
    a: &flotilla_api::policy::ClusterAffinity,
    f: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(fs) = &a.field_selector {
        for (i, e) in fs.match_expressions.iter().enumerate() {
            let ef = format!("{f}.fieldSelector.matchExpressions[{i}]");
            if !["provider", "region", "zone"].contains(&e.key.as_str()) {
                errs.push(err(
                    format!("{ef}.key"),
                    format!(
                        "unsupported key {:?}: must be provider, region or zone",
                        e.key
                    ),
                ));
            }
            if e.operator != "In" && e.operator != "NotIn" {
                errs.push(err(
                    format!("{ef}.operator"),
                    format!("unsupported operator {:?}: must be In or NotIn", e.operator),
                ));
            }
        }
    }
    if let Some(ls) = &a.label_selector {
        for (i, e) in ls.match_expressions.iter().enumerate() {
            let ef = format!("{f}.labelSelector.matchExpressions[{i}]");
            match e.operator.as_str() {
                "In" | "NotIn" if e.values.is_empty() => {
                    errs.push(err(
                        format!("{ef}.values"),
                        "must be specified when operator is In or NotIn",
                    ));
                }
                "Exists" | "DoesNotExist" if !e.values.is_empty() => {
                    errs.push(err(
                        format!("{ef}.values"),
                        "may not be specified when operator is Exists or DoesNotExist",
                    ));
                }
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                op => errs.push(err(
                    format!("{ef}.operator"),
                    format!("unsupported operator {op:?}"),
                )),
            }
        }
    }
}

/// Validate a placement; `f` is the field path prefix.
pub fn validate_placement(p: &Placement, f: &str, errs: &mut Vec<FieldError>) {
    if p.cluster_affinity.is_some() && !p.cluster_affinities.is_empty() {
        errs.push(err(
            format!("{f}.clusterAffinities"),
            "clusterAffinities cannot co-exist with clusterAffinity",
        ));
    }
    if let Some(a) = &p.cluster_affinity {
        validate_affinity_fields(a, &format!("{f}.clusterAffinity"), errs);
    }
    let overflow_allowed = p.replica_scheduling.as_ref().is_some_and(|rs| {
        rs.replica_scheduling_type.as_deref() == Some(scheduling_type::DIVIDED)
            && (rs.replica_division_preference.as_deref() == Some(division_preference::AGGREGATED)
                || rs
                    .weight_preference
                    .as_ref()
                    .is_some_and(|w| !w.dynamic_weight.is_empty()))
    });
    let mut names = BTreeSet::new();
    for (i, t) in p.cluster_affinities.iter().enumerate() {
        let tf = format!("{f}.clusterAffinities[{i}]");
        let n = t.affinity_name.len();
        if n == 0 || n > 32 {
            errs.push(err(
                format!("{tf}.affinityName"),
                "must be 1 to 32 characters",
            ));
        }
        if !names.insert(t.affinity_name.as_str()) {
            errs.push(err(
                format!("{tf}.affinityName"),
                format!("duplicate affinity name {:?}", t.affinity_name),
            ));
        }
        validate_affinity_fields(&t.affinity.clone().into(), &tf, errs);
        if let Some(over) = &t.overflow_affinities {
            if !overflow_allowed {
                errs.push(err(
                    format!("{tf}.overflowAffinities"),
                    "only allowed with dynamic weight or Aggregated division",
                ));
            }
            let mut seen = BTreeSet::from([t.affinity_name.as_str()]);
            for (j, o) in over.iter().enumerate() {
                if !seen.insert(o.affinity_name.as_str()) {
                    errs.push(err(
                        format!("{tf}.overflowAffinities[{j}].affinityName"),
                        format!("duplicate affinity name {:?}", o.affinity_name),
                    ));
                }
            }
        }
    }
    for (i, t) in p.cluster_tolerations.iter().enumerate() {
        if !["", "Exists", "Equal"].contains(&t.operator.as_str()) {
            errs.push(err(
                format!("{f}.clusterTolerations[{i}].operator"),
                format!(
                    "unsupported operator {:?}: must be Exists or Equal",
                    t.operator
                ),
            ));
        }
        if t.operator == "Exists" && !t.value.is_empty() {
            errs.push(err(
                format!("{f}.clusterTolerations[{i}].value"),
                "must be empty when operator is Exists",
            ));
        }
        if !["", "NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str()) {
            errs.push(err(
                format!("{f}.clusterTolerations[{i}].effect"),
                format!("unsupported effect {:?}", t.effect),
            ));
        }
    }
    let mut fields = BTreeSet::new();
    let mut has_field = false;
    for (i, sc) in p.spread_constraints.iter().enumerate() {
        let sf = format!("{f}.spreadConstraints[{i}]");
        if !sc.spread_by_field.is_empty() && !sc.spread_by_label.is_empty() {
            errs.push(err(
                sf.clone(),
                "spreadByField and spreadByLabel cannot both be set",
            ));
        }
        if !sc.spread_by_field.is_empty() {
            has_field = true;
            if ![
                spread_field::CLUSTER,
                spread_field::REGION,
                spread_field::ZONE,
                spread_field::PROVIDER,
            ]
            .contains(&sc.spread_by_field.as_str())
            {
                errs.push(err(
                    format!("{sf}.spreadByField"),
                    format!(
                        "unsupported value {:?}: must be cluster, region, zone or provider",
                        sc.spread_by_field
                    ),
                ));
            }
            if !fields.insert(sc.spread_by_field.as_str()) {
                errs.push(err(
                    format!("{sf}.spreadByField"),
                    format!("duplicate spread field {:?}", sc.spread_by_field),
                ));
            }
        }
        if sc.min_groups < 0 || sc.max_groups < 0 {
            errs.push(err(sf.clone(), "minGroups and maxGroups must be >= 0"));
        }
        if sc.max_groups > 0 && sc.max_groups < sc.min_groups {
            errs.push(err(
                format!("{sf}.maxGroups"),
                "maxGroups must be >= minGroups",
            ));
        }
    }
    if has_field && !fields.contains(spread_field::CLUSTER) {
        errs.push(err(
            format!("{f}.spreadConstraints"),
            "a spreadByField constraint requires a cluster spread constraint as well",
        ));
    }
    if let Some(rs) = &p.replica_scheduling {
        let rf = format!("{f}.replicaScheduling");
        if let Some(t) = &rs.replica_scheduling_type
            && t != scheduling_type::DIVIDED
            && t != scheduling_type::DUPLICATED
        {
            errs.push(err(
                format!("{rf}.replicaSchedulingType"),
                format!("unsupported value {t:?}: must be Duplicated or Divided"),
            ));
        }
        if let Some(d) = &rs.replica_division_preference
            && !d.is_empty()
            && d != division_preference::AGGREGATED
            && d != division_preference::WEIGHTED
        {
            errs.push(err(
                format!("{rf}.replicaDivisionPreference"),
                format!("unsupported value {d:?}: must be Aggregated or Weighted"),
            ));
        }
        if let Some(w) = &rs.weight_preference {
            if !w.dynamic_weight.is_empty() && w.dynamic_weight != "AvailableReplicas" {
                errs.push(err(
                    format!("{rf}.weightPreference.dynamicWeight"),
                    format!(
                        "unsupported value {:?}: must be AvailableReplicas",
                        w.dynamic_weight
                    ),
                ));
            }
            for (i, sw) in w.static_weight_list.iter().enumerate() {
                if sw.weight < 1 {
                    errs.push(err(
                        format!("{rf}.weightPreference.staticWeightList[{i}].weight"),
                        format!("weight must be >= 1, got {}", sw.weight),
                    ));
                }
                validate_affinity_fields(
                    &sw.target_cluster,
                    &format!("{rf}.weightPreference.staticWeightList[{i}].targetCluster"),
                    errs,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> PropagationPolicy {
        let mut p: PropagationPolicy = serde_yaml::from_str(yaml).expect("test yaml");
        default_propagation_policy(&mut p);
        p
    }

    #[test]
    fn legacy_zone_moves_into_zones_only_when_zones_is_empty() {
        let mut c = flotilla_api::cluster::Cluster::default();
        c.spec.zone = "z1".into();
        default_cluster(&mut c);
        assert_eq!(
            (c.spec.zone.as_str(), c.spec.zones.clone()),
            ("", vec!["z1".to_string()])
        );
        c.spec.zone = "z9".into();
        default_cluster(&mut c);
        assert_eq!(
            (c.spec.zone.as_str(), c.spec.zones.clone()),
            ("z9", vec!["z1".to_string()])
        );
    }

    #[test]
    fn defaults_match_karmada_webhook() {
        let p = policy(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, namespace: ns}\nspec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  placement:\n    replicaScheduling: {}\n    spreadConstraints: [{maxGroups: 2}]\n",
        );
        assert_eq!(p.spec.resource_selectors[0].namespace, "ns");
        let pl = p.spec.placement.as_ref().unwrap();
        let rs = pl.replica_scheduling.as_ref().unwrap();
        assert_eq!(rs.replica_scheduling_type.as_deref(), Some("Divided"));
        assert_eq!(rs.replica_division_preference.as_deref(), Some("Weighted"));
        assert_eq!(
            (
                pl.spread_constraints[0].spread_by_field.as_str(),
                pl.spread_constraints[0].min_groups
            ),
            ("cluster", 1)
        );
        assert!(validate_propagation_policy(&p).is_empty());
    }

    #[test]
    fn rejects_weight_below_one_conflicting_affinities_and_spread_without_cluster() {
        let p = policy(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, namespace: ns}\nspec:\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n  placement:\n    clusterAffinity: {clusterNames: [a]}\n    clusterAffinities: [{affinityName: x}]\n    spreadConstraints: [{spreadByField: region, minGroups: 2, maxGroups: 1}]\n    replicaScheduling:\n      weightPreference:\n        staticWeightList: [{targetCluster: {clusterNames: [a]}, weight: 0}]\n",
        );
        let fields: Vec<String> = validate_propagation_policy(&p)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert!(
            fields.contains(&"spec.placement.clusterAffinities".to_string()),
            "{fields:?}"
        );
        assert!(
            fields.contains(
                &"spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight"
                    .to_string()
            )
        );
        assert!(fields.contains(&"spec.placement.spreadConstraints".to_string()));
        assert!(fields.contains(&"spec.placement.spreadConstraints[0].maxGroups".to_string()));
    }
}
