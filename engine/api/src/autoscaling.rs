//! `autoscaling.karmada.io/v1alpha1`: FederatedHPA and CronFederatedHPA. Mirrors
//! `pkg/apis/autoscaling/v1alpha1/{federatedhpa,cronfederatedhpa}_types.go`, whose specs and
//! status embed kube's `autoscaling/v2` shapes (`MetricSpec`, `HorizontalPodAutoscalerBehavior`,
//! `HorizontalPodAutoscalerStatus`), modelled here field for field.

use serde::{Deserialize, Serialize};

use crate::meta::{LabelSelector, ObjectMeta, Quantity};

/// The API group/version of every type in this module.
pub const API_VERSION: &str = "autoscaling.karmada.io/v1alpha1";
/// The group.
pub const GROUP: &str = "autoscaling.karmada.io";
/// `FederatedHPA`'s kind.
pub const FEDERATED_HPA: &str = "FederatedHPA";
/// `CronFederatedHPA`'s kind.
pub const CRON_FEDERATED_HPA: &str = "CronFederatedHPA";
/// The annotation karmada-metrics-adapter puts on each aggregated metrics object: the member
/// cluster it was read from.
pub const QUERY_FROM_CLUSTER: &str = "resource.karmada.io/query-from-cluster";

/// Annotation on a simulated member's Deployment (or its template on the control plane, which
/// propagates it): the CPU its pods use, in percent of their request (`"80"`). Simulated members
/// run pods, with metrics, only for Deployments that carry this or [`SIMULATED_MEMORY_UTILIZATION`].
pub const SIMULATED_CPU_UTILIZATION: &str = "flotilla.dev/simulated-cpu-utilization";
/// The same for memory (default 50 % when only CPU is given).
pub const SIMULATED_MEMORY_UTILIZATION: &str = "flotilla.dev/simulated-memory-utilization";
/// Annotation on a simulated pod: its containers' usage, `{"<container>": {"cpu": "400m",
/// "memory": "64Mi"}}`, which the API server serves as its `PodMetrics`.
pub const SIMULATED_USAGE: &str = "flotilla.dev/simulated-usage";
/// Annotation on an object in a simulated member: its custom metrics, `{"<metric>":
/// "<quantity>"}` (`{"http_requests_per_second": "30"}`), which the API server serves as
/// `custom.metrics.k8s.io` values of that object (the pod simulator writes it on each pod).
pub const SIMULATED_CUSTOM_METRICS: &str = "flotilla.dev/simulated-custom-metrics";
/// Annotation on a simulated member's Deployment (or its template on the control plane): the
/// custom metrics each of its simulated pods reports, in the shape of
/// [`SIMULATED_CUSTOM_METRICS`]. Deployments carrying it get simulated pods too.
pub const SIMULATED_POD_CUSTOM_METRICS: &str = "flotilla.dev/simulated-pod-custom-metrics";
/// Annotation on a ConfigMap in a simulated member: external metrics of its namespace,
/// `{"<metric>": "<quantity>"}`, one series per metric labelled with the ConfigMap's labels,
/// served as `external.metrics.k8s.io`.
pub const SIMULATED_EXTERNAL_METRICS: &str = "flotilla.dev/simulated-external-metrics";

/// `FederatedHPA`: kube's HorizontalPodAutoscaler over the pods of a resource template in every
/// member cluster it was propagated to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FederatedHPA {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: FederatedHPASpec,
    #[serde(default)]
    pub status: HorizontalPodAutoscalerStatus,
}

/// `FederatedHPASpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FederatedHPASpec {
    /// The resource template to scale (its scale subresource).
    pub scale_target_ref: CrossVersionObjectReference,
    /// The fewest replicas (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// The most replicas.
    pub max_replicas: i32,
    /// What to scale on (default: CPU at 80 % utilization).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricSpec>,
    /// How fast to scale in each direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

/// `autoscalingv2.CrossVersionObjectReference`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrossVersionObjectReference {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
}

/// `autoscalingv2.MetricSpec`: one of the sources, named by `type`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricSpec {
    /// `Object`, `Pods`, `Resource`, `ContainerResource` or `External`.
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodsMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_resource: Option<ContainerResourceMetricSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalMetricSource>,
}

/// `autoscalingv2.ObjectMetricSource`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectMetricSource {
    pub described_object: CrossVersionObjectReference,
    pub target: MetricTarget,
    pub metric: MetricIdentifier,
}

/// `autoscalingv2.PodsMetricSource`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodsMetricSource {
    pub metric: MetricIdentifier,
    pub target: MetricTarget,
}

/// `autoscalingv2.ResourceMetricSource`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceMetricSource {
    pub name: String,
    pub target: MetricTarget,
}

/// `autoscalingv2.ContainerResourceMetricSource`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerResourceMetricSource {
    pub name: String,
    pub target: MetricTarget,
    pub container: String,
}

/// `autoscalingv2.ExternalMetricSource`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalMetricSource {
    pub metric: MetricIdentifier,
    pub target: MetricTarget,
}

/// `autoscalingv2.MetricIdentifier`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricIdentifier {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// `autoscalingv2.MetricTarget`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricTarget {
    /// `Utilization`, `Value` or `AverageValue`.
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Quantity"))]
    pub value: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Quantity"))]
    pub average_value: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_utilization: Option<i32>,
}

/// `autoscalingv2.HorizontalPodAutoscalerBehavior`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HorizontalPodAutoscalerBehavior {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<HPAScalingRules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<HPAScalingRules>,
}

/// `autoscalingv2.HPAScalingRules`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HPAScalingRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stabilization_window_seconds: Option<i32>,
    /// `Max`, `Min` or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<HPAScalingPolicy>>,
}

/// `autoscalingv2.HPAScalingPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HPAScalingPolicy {
    /// `Pods` or `Percent`.
    #[serde(rename = "type")]
    pub type_: String,
    pub value: i32,
    pub period_seconds: i32,
}

/// `autoscalingv2.HorizontalPodAutoscalerStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub current_replicas: i32,
    #[serde(default)]
    pub desired_replicas: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_metrics: Vec<MetricStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<HorizontalPodAutoscalerCondition>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if takes a reference
fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `autoscalingv2.MetricStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricStatus {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<PodsMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_resource: Option<ContainerResourceMetricStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalMetricStatus>,
}

/// `autoscalingv2.ObjectMetricStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetricStatus {
    pub metric: MetricIdentifier,
    pub current: MetricValueStatus,
    pub described_object: CrossVersionObjectReference,
}

/// `autoscalingv2.PodsMetricStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PodsMetricStatus {
    pub metric: MetricIdentifier,
    pub current: MetricValueStatus,
}

/// `autoscalingv2.ResourceMetricStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceMetricStatus {
    pub name: String,
    pub current: MetricValueStatus,
}

/// `autoscalingv2.ContainerResourceMetricStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContainerResourceMetricStatus {
    pub name: String,
    pub current: MetricValueStatus,
    pub container: String,
}

/// `autoscalingv2.ExternalMetricStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExternalMetricStatus {
    pub metric: MetricIdentifier,
    pub current: MetricValueStatus,
}

/// `autoscalingv2.MetricValueStatus`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MetricValueStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Quantity"))]
    pub value: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Quantity"))]
    pub average_value: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_utilization: Option<i32>,
}

/// `autoscalingv2.HorizontalPodAutoscalerCondition`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerCondition {
    /// `AbleToScale`, `ScalingActive` or `ScalingLimited`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `CronFederatedHPA`: scale a workload, or move a FederatedHPA's bounds, on cron schedules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CronFederatedHPA {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: CronFederatedHPASpec,
    #[serde(default)]
    pub status: CronFederatedHPAStatus,
}

/// `CronFederatedHPASpec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronFederatedHPASpec {
    /// A workload (its scale subresource) or a FederatedHPA (its min/max replicas).
    pub scale_target_ref: CrossVersionObjectReference,
    pub rules: Vec<CronFederatedHPARule>,
}

/// `CronFederatedHPARule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronFederatedHPARule {
    /// The rule's name, unique in the object (1 to 32 characters).
    pub name: String,
    /// A standard five-field cron expression.
    pub schedule: String,
    /// The workload's replicas (workload targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_replicas: Option<i32>,
    /// The FederatedHPA's minReplicas (FederatedHPA targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_min_replicas: Option<i32>,
    /// The FederatedHPA's maxReplicas (FederatedHPA targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_max_replicas: Option<i32>,
    /// Skip the rule's runs (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The IANA time zone of the schedule (default: the controller's, UTC here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Successful runs kept in the status (default 3, 1 to 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_history_limit: Option<i32>,
    /// Failed runs kept in the status (default 3, 0 to 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_history_limit: Option<i32>,
}

impl CronFederatedHPARule {
    /// The successful runs to keep (Karmada's `GetCronFederatedHPASuccessHistoryLimits`).
    pub fn successful_history_limit(&self) -> usize {
        usize::try_from(self.successful_history_limit.unwrap_or(3).clamp(1, 32)).unwrap_or(3)
    }

    /// The failed runs to keep (Karmada's `GetCronFederatedHPAFailedHistoryLimits`).
    pub fn failed_history_limit(&self) -> usize {
        usize::try_from(self.failed_history_limit.unwrap_or(3).clamp(0, 32)).unwrap_or(3)
    }

    /// Whether the rule is suspended.
    pub fn suspended(&self) -> bool {
        self.suspend == Some(true)
    }
}

/// `CronFederatedHPAStatus`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CronFederatedHPAStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub execution_histories: Vec<ExecutionHistory>,
}

/// `ExecutionHistory`: one rule's runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExecutionHistory {
    pub rule_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_execution_time: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub successful_executions: Vec<SuccessfulExecution>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_executions: Vec<FailedExecution>,
}

/// `SuccessfulExecution`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SuccessfulExecution {
    pub schedule_time: Option<String>,
    pub execution_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_max_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_min_replicas: Option<i32>,
}

/// `FailedExecution`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FailedExecution {
    pub schedule_time: Option<String>,
    pub execution_time: Option<String>,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_federated_hpa_round_trips_with_every_source_and_behavior() {
        let yaml = r#"
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  - type: Pods
    pods: {metric: {name: qps}, target: {type: AverageValue, averageValue: 100m}}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 10
      selectPolicy: Max
      policies: [{type: Pods, value: 1, periodSeconds: 15}]
status:
  currentReplicas: 2
  desiredReplicas: 3
  conditions: [{type: AbleToScale, status: "True", reason: SucceededRescale}]
"#;
        let v: serde_json::Value = serde_yaml::from_str(yaml).expect("yaml");
        let f: FederatedHPA = serde_json::from_value(v.clone()).expect("typed");
        assert_eq!(f.spec.max_replicas, 10);
        assert_eq!(
            f.spec.metrics[1]
                .pods
                .as_ref()
                .and_then(|p| p.target.average_value.as_ref())
                .map(|q| q.as_text().into_owned()),
            Some("100m".to_owned())
        );
        assert_eq!(serde_json::to_value(&f).expect("json"), v);
    }

    #[test]
    fn cron_rule_history_limits_default_and_clamp() {
        let r = CronFederatedHPARule::default();
        assert_eq!(
            (r.successful_history_limit(), r.failed_history_limit()),
            (3, 3)
        );
        let r = CronFederatedHPARule {
            successful_history_limit: Some(0),
            failed_history_limit: Some(99),
            ..Default::default()
        };
        assert_eq!(
            (r.successful_history_limit(), r.failed_history_limit()),
            (1, 32)
        );
    }
}
