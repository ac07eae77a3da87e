//! Well-known label and annotation keys (Karmada `well_known_constants.go`).

/// Label on templates and bindings: the claiming PropagationPolicy's permanent id.
pub const PP_PERMANENT_ID: &str = "propagationpolicy.karmada.io/permanent-id";
/// Annotation: claiming PropagationPolicy's namespace.
pub const PP_NAMESPACE: &str = "propagationpolicy.karmada.io/namespace";
/// Annotation: claiming PropagationPolicy's name.
pub const PP_NAME: &str = "propagationpolicy.karmada.io/name";
/// Label: the claiming ClusterPropagationPolicy's permanent id.
pub const CPP_PERMANENT_ID: &str = "clusterpropagationpolicy.karmada.io/permanent-id";
/// Annotation: claiming ClusterPropagationPolicy's name.
pub const CPP_NAME: &str = "clusterpropagationpolicy.karmada.io/name";
/// Label: a ResourceBinding's permanent id (on the binding, its Works and manifests).
pub const RB_PERMANENT_ID: &str = "resourcebinding.karmada.io/permanent-id";
/// Label: a ClusterResourceBinding's permanent id.
pub const CRB_PERMANENT_ID: &str = "clusterresourcebinding.karmada.io/permanent-id";
/// Annotation on Works/manifests: owning ResourceBinding namespace.
pub const RB_NAMESPACE: &str = "resourcebinding.karmada.io/namespace";
/// Annotation on Works/manifests: owning ResourceBinding name.
pub const RB_NAME: &str = "resourcebinding.karmada.io/name";
/// Annotation on Works/manifests: owning ClusterResourceBinding name.
pub const CRB_NAME: &str = "clusterresourcebinding.karmada.io/name";
/// Label on Works (and manifests): the Work's permanent id.
pub const WORK_PERMANENT_ID: &str = "work.karmada.io/permanent-id";
/// Annotation on manifests: the Work's name.
pub const WORK_NAME: &str = "work.karmada.io/name";
/// Annotation on manifests: the Work's namespace.
pub const WORK_NAMESPACE: &str = "work.karmada.io/namespace";
/// Label on manifests: managed by Karmada.
pub const MANAGED: &str = "karmada.io/managed";
/// Annotation on manifests: template UID.
pub const TEMPLATE_UID: &str = "resourcetemplate.karmada.io/uid";
/// Annotation on manifests: template generation.
pub const TEMPLATE_GENERATION: &str = "resourcetemplate.karmada.io/generation";
/// Annotation on manifests: sorted, comma-joined template label keys.
pub const MANAGED_LABELS: &str = "resourcetemplate.karmada.io/managed-labels";
/// Annotation on manifests: sorted, comma-joined template annotation keys.
pub const MANAGED_ANNOTATIONS: &str = "resourcetemplate.karmada.io/managed-annotations";
/// Annotation: conflict resolution (`overwrite`/`abort`).
pub const CONFLICT_RESOLUTION: &str = "work.karmada.io/conflict-resolution";
/// Annotation on Works/manifests: applied OverridePolicies.
pub const APPLIED_OVERRIDES: &str = "policy.karmada.io/applied-overrides";
/// Annotation on Works/manifests: applied ClusterOverridePolicies.
pub const APPLIED_CLUSTER_OVERRIDES: &str = "policy.karmada.io/applied-cluster-overrides";
/// Annotation on bindings: the placement the scheduler last scheduled against (JSON).
pub const APPLIED_PLACEMENT: &str = "policy.karmada.io/applied-placement";
/// Annotation on a binding: the loaded plugins (e.g. `WasmPlugin`s) of the profile that last
/// wrote its placement, as `name=sha256:<hex>` joined by commas. Flotilla's; absent when only
/// built-in plugins placed it.
pub const PLACED_BY: &str = "flotilla.dev/placed-by";
/// Annotation on a Cluster: the member's ResourceQuotas as the scheduler's quota estimate reads
/// them (gate `ResourceQuotaEstimate`), a JSON array of `{namespace, name, spec: {scopes,
/// scopeSelector}, status: {hard, used}}`. Written by the cluster status controller (Push) and
/// the agent (Pull) when the gate is on; Flotilla's, since Karmada's estimator reads the member
/// directly and `Cluster.status` has no field for it.
pub const RESOURCE_QUOTAS: &str = "flotilla.dev/resource-quotas";
/// Label on templates: keep member replicas (HPA in member).
pub const RETAIN_REPLICAS: &str = "resourcetemplate.karmada.io/retain-replicas";
/// Label on templates: claimed by another controller, the detector ignores it.
pub const CLAIMED_BY: &str = "resourcetemplate.karmada.io/claimed-by";

/// Finalizer on ResourceBindings.
pub const BINDING_FINALIZER: &str = "karmada.io/binding-controller";
/// Finalizer on ClusterResourceBindings.
pub const CLUSTER_BINDING_FINALIZER: &str = "karmada.io/cluster-resource-binding-controller";
/// Finalizer on Works.
pub const EXECUTION_FINALIZER: &str = "karmada.io/execution-controller";

/// Prefix of the per-cluster execution namespace (`karmada-es-<cluster>`).
pub const EXECUTION_NAMESPACE_PREFIX: &str = "karmada-es-";
/// The default scheduler name.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";
