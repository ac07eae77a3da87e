//! What Karmada's webhooks do to FederatedHPA and CronFederatedHPA objects: the defaults of
//! `pkg/webhook/federatedhpa/mutating.go` (`lifted.SetDefaultsFederatedHPA`) and the checks of
//! `pkg/webhook/federatedhpa/validating.go` (`lifted.ValidateFederatedHPA`, from kube's
//! autoscaling validation) and `pkg/webhook/cronfederatedhpa/validating.go`; and the defaulted
//! `behavior` as the arithmetic of [`super`] reads it.

use flotilla_api::autoscaling::{
    CronFederatedHPASpec, CrossVersionObjectReference, FederatedHPASpec, HPAScalingPolicy,
    HPAScalingRules, HorizontalPodAutoscalerBehavior, MetricSpec, MetricTarget,
    ResourceMetricSource,
};
use flotilla_api::meta::Quantity;

use super::{
    Behavior, MAX_PERIOD_SECONDS, MAX_STABILIZATION_WINDOW_SECONDS, Policy, PolicyType, Rules,
    Select,
};
use crate::validate::FieldError;

/// The CPU utilization target a FederatedHPA without metrics gets (Karmada's
/// `DefaultCPUUtilization`).
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;
/// The most metrics one FederatedHPA may list (a bound of ours: each is a query per member).
pub const MAX_METRICS: usize = 32;
/// The most policies per direction (a bound of ours).
pub const MAX_POLICIES: usize = 32;
/// The most rules one CronFederatedHPA may have (a bound of ours).
pub const MAX_RULES: usize = 64;

fn err(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// Karmada's mutating webhook: `minReplicas` 1, CPU at 80 % when no metric is given, and each
/// direction of a given `behavior` completed with kube's defaults.
pub fn set_defaults(spec: &mut FederatedHPASpec) {
    spec.min_replicas.get_or_insert(1);
    if spec.metrics.is_empty() {
        spec.metrics.push(MetricSpec {
            type_: "Resource".into(),
            resource: Some(ResourceMetricSource {
                name: "cpu".into(),
                target: MetricTarget {
                    type_: "Utilization".into(),
                    average_utilization: Some(DEFAULT_CPU_UTILIZATION),
                    ..Default::default()
                },
            }),
            ..Default::default()
        });
    }
    if let Some(b) = &mut spec.behavior {
        b.scale_up = Some(complete(
            b.scale_up.take(),
            &Behavior::default_scale_up(),
            false,
        ));
        b.scale_down = Some(complete(
            b.scale_down.take(),
            &Behavior::default_scale_down(0),
            true,
        ));
    }
}

fn complete(given: Option<HPAScalingRules>, default: &Rules, down: bool) -> HPAScalingRules {
    let mut out = HPAScalingRules {
        // The scale-down window stays unset: the controller fills in its own default.
        stabilization_window_seconds: (!down).then_some(default.stabilization_window_seconds),
        select_policy: Some("Max".into()),
        policies: Some(
            default
                .policies
                .iter()
                .map(|p| HPAScalingPolicy {
                    type_: match p.kind {
                        PolicyType::Pods => "Pods".into(),
                        PolicyType::Percent => "Percent".into(),
                    },
                    value: p.value,
                    period_seconds: p.period_seconds,
                })
                .collect(),
        ),
    };
    if let Some(g) = given {
        if g.select_policy.is_some() {
            out.select_policy = g.select_policy;
        }
        if g.stabilization_window_seconds.is_some() {
            out.stabilization_window_seconds = g.stabilization_window_seconds;
        }
        if g.policies.is_some() {
            out.policies = g.policies;
        }
    }
    out
}

/// The behavior the arithmetic applies: `None` without `behavior`; otherwise both directions,
/// defaulted, the scale-down window being `downscale_window_seconds` when unset (Karmada's
/// `maybeInitScaleDownStabilizationWindow`). Unknown policy types are skipped (admission
/// refuses them).
pub fn behavior(
    given: Option<&HorizontalPodAutoscalerBehavior>,
    downscale_window_seconds: i32,
) -> Option<Behavior> {
    let given = given?;
    let rules = |r: Option<&HPAScalingRules>, default: Rules| -> Rules {
        let Some(r) = r else { return default };
        Rules {
            stabilization_window_seconds: r
                .stabilization_window_seconds
                .unwrap_or(default.stabilization_window_seconds),
            select: match r.select_policy.as_deref() {
                Some("Min") => Select::Min,
                Some("Disabled") => Select::Disabled,
                _ => Select::Max,
            },
            policies: match &r.policies {
                Some(ps) => ps
                    .iter()
                    .filter_map(|p| {
                        let kind = match p.type_.as_str() {
                            "Pods" => PolicyType::Pods,
                            "Percent" => PolicyType::Percent,
                            _ => return None,
                        };
                        Some(Policy {
                            kind,
                            value: p.value,
                            period_seconds: p.period_seconds,
                        })
                    })
                    .collect(),
                None => default.policies,
            },
        }
    };
    Some(Behavior {
        scale_up: rules(given.scale_up.as_ref(), Behavior::default_scale_up()),
        scale_down: rules(
            given.scale_down.as_ref(),
            Behavior::default_scale_down(downscale_window_seconds),
        ),
    })
}

/// kube's `IsValidPathSegmentName`: the name may not be `.` or `..` nor contain `/` or `%`.
fn path_segment(value: &str) -> Option<&'static str> {
    if value == "." || value == ".." {
        Some("may not be '.' or '..'")
    } else if value.contains('/') {
        Some("may not contain '/'")
    } else if value.contains('%') {
        Some("may not contain '%'")
    } else {
        None
    }
}

/// kube's `ValidateCrossVersionObjectReference`.
pub fn validate_reference(r: &CrossVersionObjectReference, f: &str, errs: &mut Vec<FieldError>) {
    for (name, value) in [("kind", &r.kind), ("name", &r.name)] {
        if value.is_empty() {
            errs.push(err(format!("{f}.{name}"), "Required value"));
        } else if let Some(msg) = path_segment(value) {
            errs.push(err(
                format!("{f}.{name}"),
                format!("Invalid value: {value:?}: {msg}"),
            ));
        }
    }
}

fn positive_quantity(q: &Quantity) -> bool {
    crate::quantity::parse_nano(&q.as_text()).is_ok_and(|n| n > 0)
}

fn validate_target(t: &MetricTarget, f: &str, errs: &mut Vec<FieldError>) {
    if t.type_.is_empty() {
        errs.push(err(
            format!("{f}.type"),
            "Required value: must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&t.type_.as_str()) {
        errs.push(err(
            format!("{f}.type"),
            format!(
                "Invalid value: {:?}: must be either Utilization, Value, or AverageValue",
                t.type_
            ),
        ));
    }
    for (name, q) in [("value", &t.value), ("averageValue", &t.average_value)] {
        if let Some(q) = q
            && !positive_quantity(q)
        {
            errs.push(err(
                format!("{f}.{name}"),
                format!("Invalid value: {:?}: must be positive", q.as_text()),
            ));
        }
    }
    if let Some(u) = t.average_utilization
        && u < 1
    {
        errs.push(err(
            format!("{f}.averageUtilization"),
            format!("Invalid value: {u}: must be greater than 0"),
        ));
    }
}

fn validate_metric_name(name: &str, f: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(err(
            format!("{f}.name"),
            "Required value: must specify a metric name",
        ));
    } else if let Some(msg) = path_segment(name) {
        errs.push(err(
            format!("{f}.name"),
            format!("Invalid value: {name:?}: {msg}"),
        ));
    }
}

fn validate_resource_target(t: &MetricTarget, f: &str, errs: &mut Vec<FieldError>) {
    validate_target(t, &format!("{f}.target"), errs);
    if t.average_utilization.is_none() && t.average_value.is_none() {
        errs.push(err(
            format!("{f}.target.averageUtilization"),
            "Required value: must set either a target raw value or a target utilization",
        ));
    }
    if t.average_utilization.is_some() && t.average_value.is_some() {
        errs.push(err(
            format!("{f}.target.averageValue"),
            "Forbidden: may not set both a target raw value and a target utilization",
        ));
    }
}

/// kube's `validateMetricSpec`: `Object`, `Pods`, `Resource`, `ContainerResource` and
/// `External`. Karmada's webhook refuses `External` (karmada-metrics-adapter serves no external
/// metrics); this control plane serves `external.metrics.k8s.io` aggregated from the members,
/// so it admits them with kube's rules.
fn validate_metric(m: &MetricSpec, f: &str, errs: &mut Vec<FieldError>) {
    const TYPES: &str = "\"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"";
    if m.type_.is_empty() {
        errs.push(err(
            format!("{f}.type"),
            "Required value: must specify a metric source type",
        ));
    }
    let mut present = Vec::new();
    if let Some(o) = &m.object {
        present.push("object");
        if present.len() == 1 {
            let g = format!("{f}.object");
            validate_reference(&o.described_object, &format!("{g}.describedObject"), errs);
            validate_metric_name(&o.metric.name, &format!("{g}.metric"), errs);
            validate_target(&o.target, &format!("{g}.target"), errs);
            if o.target.value.is_none() && o.target.average_value.is_none() {
                errs.push(err(
                    format!("{g}.target.averageValue"),
                    "Required value: must set either a target value or averageValue",
                ));
            }
        }
    }
    if let Some(p) = &m.pods {
        present.push("pods");
        if present.len() == 1 {
            let g = format!("{f}.pods");
            validate_metric_name(&p.metric.name, &format!("{g}.metric"), errs);
            validate_target(&p.target, &format!("{g}.target"), errs);
            if p.target.average_value.is_none() {
                errs.push(err(
                    format!("{g}.target.averageValue"),
                    "Required value: must specify a positive target averageValue",
                ));
            }
        }
    }
    if let Some(r) = &m.resource {
        present.push("resource");
        if present.len() == 1 {
            let g = format!("{f}.resource");
            if r.name.is_empty() {
                errs.push(err(
                    format!("{g}.name"),
                    "Required value: must specify a resource name",
                ));
            }
            validate_resource_target(&r.target, &g, errs);
        }
    }
    if let Some(c) = &m.container_resource {
        present.push("containerResource");
        if present.len() == 1 {
            let g = format!("{f}.containerResource");
            if c.name.is_empty() {
                errs.push(err(
                    format!("{g}.name"),
                    "Required value: must specify a resource name",
                ));
            }
            if c.container.is_empty() {
                errs.push(err(
                    format!("{g}.container"),
                    "Required value: must specify a container",
                ));
            } else if !is_dns1123_label(&c.container) {
                errs.push(err(
                    format!("{g}.container"),
                    format!(
                        "Invalid value: {:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                        c.container
                    ),
                ));
            }
            validate_resource_target(&c.target, &g, errs);
        }
    }
    if let Some(x) = &m.external {
        present.push("external");
        if present.len() == 1 {
            let g = format!("{f}.external");
            validate_metric_name(&x.metric.name, &format!("{g}.metric"), errs);
            validate_target(&x.target, &format!("{g}.target"), errs);
            match (&x.target.value, &x.target.average_value) {
                (None, None) => errs.push(err(
                    format!("{g}.target.averageValue"),
                    "Required value: must set either a target value for metric or a per-pod target",
                )),
                (Some(_), Some(_)) => errs.push(err(
                    format!("{g}.target.value"),
                    "Invalid value: may not set both a target value for metric and a per-pod target",
                )),
                _ => {}
            }
        }
    }
    let expected = match m.type_.as_str() {
        "Object" => Some("object"),
        "Pods" => Some("pods"),
        "Resource" => Some("resource"),
        "ContainerResource" => Some("containerResource"),
        "External" => Some("external"),
        _ => None,
    };
    match expected {
        Some(e) if !present.contains(&e) => errs.push(err(
            format!("{f}.{e}"),
            "Required value: must populate information for the given metric source",
        )),
        Some(_) => {}
        None => errs.push(err(
            format!("{f}.type"),
            format!(
                "Unsupported value: {:?}: supported values: {TYPES}",
                m.type_
            ),
        )),
    }
    if present.len() != 1 {
        for p in present.iter().filter(|p| Some(**p) != expected) {
            errs.push(err(
                format!("{f}.{p}"),
                "Forbidden: must populate the given metric source only",
            ));
        }
    }
}

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn validate_rules(r: &HPAScalingRules, f: &str, errs: &mut Vec<FieldError>) {
    if let Some(w) = r.stabilization_window_seconds {
        if w < 0 {
            errs.push(err(
                format!("{f}.stabilizationWindowSeconds"),
                format!("Invalid value: {w}: must be greater than or equal to zero"),
            ));
        } else if w > MAX_STABILIZATION_WINDOW_SECONDS {
            errs.push(err(
                format!("{f}.stabilizationWindowSeconds"),
                format!(
                    "Invalid value: {w}: must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"
                ),
            ));
        }
    }
    if let Some(s) = &r.select_policy
        && !["Disabled", "Max", "Min"].contains(&s.as_str())
    {
        errs.push(err(
            format!("{f}.selectPolicy"),
            format!("Unsupported value: {s:?}: supported values: \"Disabled\", \"Max\", \"Min\""),
        ));
    }
    let policies = r.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        errs.push(err(
            format!("{f}.policies"),
            "Required value: must specify at least one Policy",
        ));
    }
    if policies.len() > MAX_POLICIES {
        errs.push(err(
            format!("{f}.policies"),
            format!(
                "Too many: {}: must have at most {MAX_POLICIES} items",
                policies.len()
            ),
        ));
        return;
    }
    for (i, p) in policies.iter().enumerate() {
        let g = format!("{f}.policies[{i}]");
        if p.type_ != "Pods" && p.type_ != "Percent" {
            errs.push(err(
                format!("{g}.type"),
                format!(
                    "Unsupported value: {:?}: supported values: \"Percent\", \"Pods\"",
                    p.type_
                ),
            ));
        }
        if p.value <= 0 {
            errs.push(err(
                format!("{g}.value"),
                format!("Invalid value: {}: must be greater than zero", p.value),
            ));
        }
        if p.period_seconds <= 0 {
            errs.push(err(
                format!("{g}.periodSeconds"),
                format!(
                    "Invalid value: {}: must be greater than zero",
                    p.period_seconds
                ),
            ));
        } else if p.period_seconds > MAX_PERIOD_SECONDS {
            errs.push(err(
                format!("{g}.periodSeconds"),
                format!(
                    "Invalid value: {}: must be less than or equal to {MAX_PERIOD_SECONDS}",
                    p.period_seconds
                ),
            ));
        }
    }
}

/// Karmada's `ValidateFederatedHPA` on the spec (after [`set_defaults`]).
pub fn validate_federated_hpa(spec: &FederatedHPASpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(min) = spec.min_replicas
        && min < 1
    {
        errs.push(err(
            "spec.minReplicas",
            format!("Invalid value: {min}: must be greater than or equal to 1"),
        ));
    }
    if spec.max_replicas < 1 {
        errs.push(err(
            "spec.maxReplicas",
            format!(
                "Invalid value: {}: must be greater than 0",
                spec.max_replicas
            ),
        ));
    }
    if let Some(min) = spec.min_replicas
        && spec.max_replicas < min
    {
        errs.push(err(
            "spec.maxReplicas",
            format!(
                "Invalid value: {}: must be greater than or equal to `minReplicas`",
                spec.max_replicas
            ),
        ));
    }
    validate_reference(&spec.scale_target_ref, "spec.scaleTargetRef", &mut errs);
    if spec.metrics.len() > MAX_METRICS {
        errs.push(err(
            "spec.metrics",
            format!(
                "Too many: {}: must have at most {MAX_METRICS} items",
                spec.metrics.len()
            ),
        ));
    } else {
        for (i, m) in spec.metrics.iter().enumerate() {
            validate_metric(m, &format!("spec.metrics[{i}]"), &mut errs);
        }
    }
    if let Some(b) = &spec.behavior {
        if let Some(r) = &b.scale_up {
            validate_rules(r, "spec.behavior.scaleUp", &mut errs);
        }
        if let Some(r) = &b.scale_down {
            validate_rules(r, "spec.behavior.scaleDown", &mut errs);
        }
    }
    errs
}

/// Karmada's CronFederatedHPA webhook: a FederatedHPA target (`autoscaling.karmada.io/v1alpha1`
/// must be kind `FederatedHPA`) needs min and/or max per rule, any other target
/// `targetReplicas`; rule names are unique, schedules are five-field cron, time zones exist.
pub fn validate_cron_federated_hpa(spec: &CronFederatedHPASpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let target = &spec.scale_target_ref;
    let mut scale_fhpa = false;
    if target.api_version.as_deref() == Some(flotilla_api::autoscaling::API_VERSION) {
        if target.kind != flotilla_api::autoscaling::FEDERATED_HPA {
            errs.push(err(
                "spec.scaleTargetRef.kind",
                format!(
                    "Invalid value: {:?}: invalid scaleTargetRef kind: {}, only support FederatedHPA",
                    target.kind, target.kind
                ),
            ));
            return errs;
        }
        scale_fhpa = true;
    }
    validate_reference(target, "spec.scaleTargetRef", &mut errs);
    if spec.rules.len() > MAX_RULES {
        errs.push(err(
            "spec.rules",
            format!(
                "Too many: {}: must have at most {MAX_RULES} items",
                spec.rules.len()
            ),
        ));
        return errs;
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, rule) in spec.rules.iter().enumerate() {
        let f = format!("spec.rules[{i}]");
        if !names.insert(rule.name.as_str()) {
            errs.push(err(
                format!("{f}.name"),
                format!("Duplicate value: {:?}", rule.name),
            ));
        }
        if let Err(e) = super::cron::Schedule::parse(&rule.schedule, None) {
            errs.push(err(
                format!("{f}.schedule"),
                format!(
                    "Invalid value: {:?}: invalid cron format: {e}",
                    rule.schedule
                ),
            ));
        }
        if let Some(tz) = &rule.time_zone
            && let Err(e) = super::cron::time_zone(tz)
        {
            errs.push(err(
                format!("{f}.timeZone"),
                format!("Invalid value: {tz:?}: {e}"),
            ));
        }
        if scale_fhpa {
            if rule.target_min_replicas.is_none() && rule.target_max_replicas.is_none() {
                errs.push(err(
                    format!("{f}.targetMaxReplicas"),
                    "Invalid value: \"\": targetMinReplicas and targetMaxReplicas cannot be nil at the same time if you want to scale FederatedHPA",
                ));
            }
            let min = rule.target_min_replicas.unwrap_or(1);
            let max = rule.target_max_replicas.unwrap_or(i32::MAX);
            if min <= 0 {
                errs.push(err(
                    format!("{f}.targetMinReplicas"),
                    "Invalid value: \"\": targetMinReplicas should be larger than 0",
                ));
            }
            if max <= 0 {
                errs.push(err(
                    format!("{f}.targetMaxReplicas"),
                    "Invalid value: \"\": targetMaxReplicas should be larger than 0",
                ));
            }
            if min > max {
                errs.push(err(
                    format!("{f}.targetMinReplicas"),
                    "Invalid value: \"\": targetMaxReplicas should be larger than or equal to targetMinReplicas",
                ));
            }
        } else {
            if rule.target_replicas.is_none() {
                errs.push(err(
                    format!("{f}.targetReplicas"),
                    format!(
                        "Invalid value: \"\": targetReplicas cannot be nil if you want to scale {}",
                        target.kind
                    ),
                ));
            }
            if rule.target_replicas.unwrap_or(0) < 0 {
                errs.push(err(
                    format!("{f}.targetReplicas"),
                    "Invalid value: \"\": targetReplicas should be larger than or equal to 0",
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::autoscaling::CronFederatedHPARule;

    fn spec(yaml: &str) -> FederatedHPASpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    fn fields(errs: &[FieldError]) -> Vec<&str> {
        errs.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn defaults_fill_min_replicas_cpu_and_both_directions() {
        let mut s = spec(
            "{scaleTargetRef: {kind: Deployment, name: web}, maxReplicas: 5, behavior: {scaleDown: {policies: [{type: Pods, value: 1, periodSeconds: 30}]}}}",
        );
        set_defaults(&mut s);
        assert_eq!(s.min_replicas, Some(1));
        assert_eq!(s.metrics.len(), 1);
        assert_eq!(
            s.metrics[0]
                .resource
                .as_ref()
                .and_then(|r| r.target.average_utilization),
            Some(80)
        );
        let b = s.behavior.as_ref().expect("behavior");
        let up = b.scale_up.as_ref().expect("up");
        assert_eq!(up.stabilization_window_seconds, Some(0));
        assert_eq!(up.policies.as_ref().map(Vec::len), Some(2));
        let down = b.scale_down.as_ref().expect("down");
        assert_eq!(
            down.stabilization_window_seconds, None,
            "left to the controller"
        );
        assert_eq!(down.policies.as_ref().map(|p| p[0].value), Some(1));
        let arithmetic = behavior(s.behavior.as_ref(), 300).expect("behavior");
        assert_eq!(arithmetic.scale_down.stabilization_window_seconds, 300);
        assert_eq!(arithmetic.scale_down.policies[0].period_seconds, 30);
        assert!(validate_federated_hpa(&s).is_empty());
        assert_eq!(behavior(None, 300), None);
    }

    #[test]
    fn federated_hpa_validation_names_each_field() {
        let s = spec(
            r#"{scaleTargetRef: {kind: "", name: "a/b"}, minReplicas: 0, maxReplicas: 0,
                metrics: [
                  {type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50, averageValue: 1}}},
                  {type: Pods, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}},
                  {type: External, external: {metric: {name: q}, target: {type: Value}}},
                  {type: Object, object: {describedObject: {kind: Service, name: s}, metric: {name: m}, target: {type: Bogus}}}
                ],
                behavior: {scaleUp: {selectPolicy: Fast, stabilizationWindowSeconds: 4000, policies: [{type: Pods, value: 0, periodSeconds: 1801}]},
                           scaleDown: {policies: []}}}"#,
        );
        let errs = validate_federated_hpa(&s);
        let f = fields(&errs);
        for want in [
            "spec.minReplicas",
            "spec.maxReplicas",
            "spec.scaleTargetRef.kind",
            "spec.scaleTargetRef.name",
            "spec.metrics[0].resource.target.averageValue",
            "spec.metrics[1].pods",
            "spec.metrics[2].external.target.averageValue",
            "spec.metrics[3].object.target.type",
            "spec.metrics[3].object.target.averageValue",
            "spec.behavior.scaleUp.selectPolicy",
            "spec.behavior.scaleUp.stabilizationWindowSeconds",
            "spec.behavior.scaleUp.policies[0].value",
            "spec.behavior.scaleUp.policies[0].periodSeconds",
            "spec.behavior.scaleDown.policies",
        ] {
            assert!(f.contains(&want), "{want} missing from {errs:?}");
        }
        let s =
            spec("{scaleTargetRef: {kind: Deployment, name: web}, minReplicas: 5, maxReplicas: 3}");
        let errs = validate_federated_hpa(&s);
        assert_eq!(fields(&errs), vec!["spec.maxReplicas"]);
        assert!(errs[0].message.contains("minReplicas"), "{errs:?}");
    }

    fn cron(target: (&str, &str), rules: Vec<CronFederatedHPARule>) -> CronFederatedHPASpec {
        CronFederatedHPASpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some(target.0.into()),
                kind: target.1.into(),
                name: "web".into(),
            },
            rules,
        }
    }

    fn rule(name: &str, schedule: &str) -> CronFederatedHPARule {
        CronFederatedHPARule {
            name: name.into(),
            schedule: schedule.into(),
            ..Default::default()
        }
    }

    #[test]
    fn cron_validation_checks_schedules_zones_and_targets() {
        let ok = cron(
            ("apps/v1", "Deployment"),
            vec![CronFederatedHPARule {
                target_replicas: Some(3),
                time_zone: Some("Asia/Shanghai".into()),
                ..rule("up", "30 8 * * 1-5")
            }],
        );
        assert!(validate_cron_federated_hpa(&ok).is_empty());
        let bad = cron(
            ("apps/v1", "Deployment"),
            vec![
                CronFederatedHPARule {
                    time_zone: Some("Mars/Olympus".into()),
                    target_replicas: Some(-1),
                    ..rule("a", "61 * * * *")
                },
                rule("a", "* * * *"),
            ],
        );
        let errs = validate_cron_federated_hpa(&bad);
        let f = fields(&errs);
        for want in [
            "spec.rules[0].schedule",
            "spec.rules[0].timeZone",
            "spec.rules[0].targetReplicas",
            "spec.rules[1].name",
            "spec.rules[1].schedule",
            "spec.rules[1].targetReplicas",
        ] {
            assert!(f.contains(&want), "{want} missing from {errs:?}");
        }
        let fhpa = cron(
            ("autoscaling.karmada.io/v1alpha1", "FederatedHPA"),
            vec![
                rule("none", "0 * * * *"),
                CronFederatedHPARule {
                    target_min_replicas: Some(5),
                    target_max_replicas: Some(2),
                    ..rule("inverted", "0 * * * *")
                },
            ],
        );
        let f = validate_cron_federated_hpa(&fhpa);
        assert_eq!(
            fields(&f),
            vec![
                "spec.rules[0].targetMaxReplicas",
                "spec.rules[1].targetMinReplicas"
            ]
        );
        let wrong_kind = cron(
            ("autoscaling.karmada.io/v1alpha1", "CronFederatedHPA"),
            vec![],
        );
        assert_eq!(
            fields(&validate_cron_federated_hpa(&wrong_kind)),
            vec!["spec.scaleTargetRef.kind"]
        );
    }
}
