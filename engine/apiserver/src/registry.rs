//! The resource registry: which group/version/resources the server serves, and how.

/// One served resource type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name (URL segment).
    pub plural: &'static str,
    /// Singular resource name.
    pub singular: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether `/status` is a subresource (the main resource then ignores `.status`).
    pub has_status: bool,
    /// Short names (`deploy`).
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Whether strategic merge patch applies (built-in Kubernetes kinds only).
    pub strategic: bool,
}

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group`, as used in error messages (`deployments.apps`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The key segment naming the group (`core` for the core group).
    pub fn group_key(&self) -> &'static str {
        if self.group.is_empty() {
            "core"
        } else {
            self.group
        }
    }
}

#[allow(clippy::too_many_arguments)]
const fn r(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
    has_status: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    strategic: bool,
) -> Resource {
    Resource {
        group,
        version,
        kind,
        plural,
        singular,
        namespaced,
        has_status,
        short_names,
        categories,
        strategic,
    }
}

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];
const KARMADA: &[&str] = &["karmada-io"];
const FLOTILLA: &[&str] = &["flotilla"];

/// Every resource the server serves, in discovery order.
pub static RESOURCES: &[Resource] = &[
    r(
        "",
        "v1",
        "Namespace",
        "namespaces",
        "namespace",
        false,
        true,
        &["ns"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        "configmap",
        true,
        false,
        &["cm"],
        NONE,
        true,
    ),
    r(
        "", "v1", "Secret", "secrets", "secret", true, false, NONE, NONE, true,
    ),
    r(
        "",
        "v1",
        "Service",
        "services",
        "service",
        true,
        true,
        &["svc"],
        ALL,
        true,
    ),
    r(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
        true,
        false,
        &["sa"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        true,
        true,
        &["pvc"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        "persistentvolume",
        false,
        true,
        &["pv"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "Pod",
        "pods",
        "pod",
        true,
        true,
        &["po"],
        ALL,
        true,
    ),
    r(
        "",
        "v1",
        "Node",
        "nodes",
        "node",
        false,
        true,
        &["no"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "Event",
        "events",
        "event",
        true,
        false,
        &["ev"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "Endpoints",
        "endpoints",
        "endpoints",
        true,
        false,
        &["ep"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "LimitRange",
        "limitranges",
        "limitrange",
        true,
        false,
        &["limits"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        "resourcequota",
        true,
        true,
        &["quota"],
        NONE,
        true,
    ),
    r(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        "replicationcontroller",
        true,
        true,
        &["rc"],
        ALL,
        true,
    ),
    r(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        "deployment",
        true,
        true,
        &["deploy"],
        ALL,
        true,
    ),
    r(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        "statefulset",
        true,
        true,
        &["sts"],
        ALL,
        true,
    ),
    r(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        "replicaset",
        true,
        true,
        &["rs"],
        ALL,
        true,
    ),
    r(
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        "daemonset",
        true,
        true,
        &["ds"],
        ALL,
        true,
    ),
    r(
        "apps",
        "v1",
        "ControllerRevision",
        "controllerrevisions",
        "controllerrevision",
        true,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "batch", "v1", "Job", "jobs", "job", true, true, NONE, ALL, true,
    ),
    r(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        "cronjob",
        true,
        true,
        &["cj"],
        ALL,
        true,
    ),
    r(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        true,
        true,
        &["hpa"],
        ALL,
        true,
    ),
    r(
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        "ingress",
        true,
        true,
        &["ing"],
        NONE,
        true,
    ),
    r(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        "networkpolicy",
        true,
        false,
        &["netpol"],
        NONE,
        true,
    ),
    r(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        true,
        true,
        &["pdb"],
        NONE,
        true,
    ),
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        "role",
        true,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        "rolebinding",
        true,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        "clusterrole",
        false,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
        false,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        "lease",
        true,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        "priorityclass",
        false,
        false,
        &["pc"],
        NONE,
        true,
    ),
    // Reviews: answered per request ([`crate::auth`]), never stored.
    r(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        false,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "authentication.k8s.io",
        "v1beta1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        false,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        false,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        false,
        false,
        NONE,
        NONE,
        true,
    ),
    r(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        "event",
        true,
        false,
        &["ev"],
        NONE,
        true,
    ),
    r(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        "storageclass",
        false,
        false,
        &["sc"],
        NONE,
        true,
    ),
    r(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        "customresourcedefinition",
        false,
        true,
        &["crd", "crds"],
        NONE,
        false,
    ),
    r(
        "policy.karmada.io",
        "v1alpha1",
        "PropagationPolicy",
        "propagationpolicies",
        "propagationpolicy",
        true,
        false,
        &["pp"],
        KARMADA,
        false,
    ),
    r(
        "policy.karmada.io",
        "v1alpha1",
        "ClusterPropagationPolicy",
        "clusterpropagationpolicies",
        "clusterpropagationpolicy",
        false,
        false,
        &["cpp"],
        KARMADA,
        false,
    ),
    r(
        "policy.karmada.io",
        "v1alpha1",
        "OverridePolicy",
        "overridepolicies",
        "overridepolicy",
        true,
        false,
        &["op"],
        KARMADA,
        false,
    ),
    r(
        "policy.karmada.io",
        "v1alpha1",
        "ClusterOverridePolicy",
        "clusteroverridepolicies",
        "clusteroverridepolicy",
        false,
        false,
        &["cop"],
        KARMADA,
        false,
    ),
    r(
        "work.karmada.io",
        "v1alpha2",
        "ResourceBinding",
        "resourcebindings",
        "resourcebinding",
        true,
        true,
        &["rb"],
        KARMADA,
        false,
    ),
    r(
        "work.karmada.io",
        "v1alpha2",
        "ClusterResourceBinding",
        "clusterresourcebindings",
        "clusterresourcebinding",
        false,
        true,
        &["crb"],
        KARMADA,
        false,
    ),
    r(
        "work.karmada.io",
        "v1alpha1",
        "Work",
        "works",
        "work",
        true,
        true,
        NONE,
        KARMADA,
        false,
    ),
    r(
        "cluster.karmada.io",
        "v1alpha1",
        "Cluster",
        "clusters",
        "cluster",
        false,
        true,
        NONE,
        KARMADA,
        false,
    ),
    r(
        "flotilla.dev",
        "v1alpha1",
        "SchedulerProfile",
        "schedulerprofiles",
        "schedulerprofile",
        false,
        true,
        NONE,
        FLOTILLA,
        false,
    ),
    r(
        "config.karmada.io",
        "v1alpha1",
        "ResourceInterpreterWebhookConfiguration",
        "resourceinterpreterwebhookconfigurations",
        "resourceinterpreterwebhookconfiguration",
        false,
        false,
        NONE,
        KARMADA,
        false,
    ),
    r(
        "flotilla.dev",
        "v1alpha1",
        "WasmPlugin",
        "wasmplugins",
        "wasmplugin",
        false,
        true,
        &["wp"],
        FLOTILLA,
        false,
    ),
    r(
        "config.karmada.io",
        "v1alpha1",
        "ResourceInterpreterCustomization",
        "resourceinterpretercustomizations",
        "resourceinterpretercustomization",
        false,
        false,
        &["ric"],
        KARMADA,
        false,
    ),
    // Served live by [`crate::metrics`], never stored.
    r(
        "metrics.k8s.io",
        "v1beta1",
        "PodMetrics",
        "pods",
        "pod",
        true,
        false,
        NONE,
        NONE,
        false,
    ),
    r(
        "metrics.k8s.io",
        "v1beta1",
        "NodeMetrics",
        "nodes",
        "node",
        false,
        false,
        NONE,
        NONE,
        false,
    ),
];

/// Resources registered at run time from CustomResourceDefinitions.
static DYNAMIC: std::sync::RwLock<Vec<&'static Resource>> = std::sync::RwLock::new(Vec::new());

/// Every served resource: the built-in table, then registered custom resources.
pub fn all() -> Vec<&'static Resource> {
    let mut out: Vec<&'static Resource> = RESOURCES.iter().collect();
    if let Ok(dynamic) = DYNAMIC.read() {
        out.extend(dynamic.iter().copied());
    }
    out
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

fn leak_list(v: Option<&serde_json::Value>) -> &'static [&'static str] {
    let items: Vec<&'static str> = v
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .map(leak)
        .collect();
    if items.is_empty() {
        &[]
    } else {
        Box::leak(items.into_boxed_slice())
    }
}

/// Whether `group` is a Kubernetes API group this server serves built in (`apps`, `batch`,
/// `apiextensions.k8s.io`, ... and the core group `""`), which no CustomResourceDefinition may
/// define. (Karmada's and Flotilla's groups may gain kinds from CRDs; their built-in resources
/// are kept.)
fn is_builtin_group(group: &str) -> bool {
    group.is_empty()
        || RESOURCES
            .iter()
            .any(|r| r.group == group && (r.strategic || r.group == "apiextensions.k8s.io"))
}

/// Register the served versions of a CustomResourceDefinition (idempotent per group/version/plural).
///
/// Registrations are process-wide (shared by every logical cluster) and are not withdrawn when
/// the CRD is deleted; each distinct resource leaks a few bytes once.
///
/// # Errors
/// A message naming the field when the CRD lacks `spec.group`, names or versions, when its group
/// is not a domain or is a built-in Kubernetes group ([`is_builtin_group`]), or when its name is
/// not `<plural>.<group>`.
pub fn register_crd(crd: &serde_json::Value) -> Result<(), String> {
    let spec = crd.get("spec").ok_or("spec: Required value")?;
    let group = spec
        .get("group")
        .and_then(serde_json::Value::as_str)
        .filter(|g| !g.is_empty())
        .ok_or("spec.group: Required value")?;
    if !group.contains('.') {
        return Err(format!(
            "spec.group: Invalid value: {group:?}: should be a domain with at least one dot"
        ));
    }
    if is_builtin_group(group) {
        return Err(format!(
            "spec.group: Invalid value: {group:?}: is a built-in API group served by this server"
        ));
    }
    let names = spec.get("names").ok_or("spec.names: Required value")?;
    let kind = names
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .ok_or("spec.names.kind: Required value")?;
    let plural = names
        .get("plural")
        .and_then(serde_json::Value::as_str)
        .ok_or("spec.names.plural: Required value")?;
    let name = crd
        .pointer("/metadata/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    if name != format!("{plural}.{group}") {
        return Err(format!(
            "metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"
        ));
    }
    let singular = names
        .get("singular")
        .and_then(serde_json::Value::as_str)
        .map_or_else(|| kind.to_lowercase(), str::to_owned);
    let namespaced = spec.get("scope").and_then(serde_json::Value::as_str) != Some("Cluster");
    let versions = spec
        .get("versions")
        .and_then(serde_json::Value::as_array)
        .ok_or("spec.versions: Required value")?;
    let mut dynamic = DYNAMIC.write().map_err(|_| "registry lock poisoned")?;
    for v in versions {
        let Some(version) = v.get("name").and_then(serde_json::Value::as_str) else {
            continue;
        };
        if v.get("served").and_then(serde_json::Value::as_bool) == Some(false) {
            continue;
        }
        crate::scale::register_crd_version(
            group,
            version,
            plural,
            v.pointer("/subresources/scale"),
        );
        crate::table::register_crd_version(
            group,
            version,
            plural,
            v.get("additionalPrinterColumns"),
        );
        let known = RESOURCES
            .iter()
            .chain(dynamic.iter().copied())
            .any(|r| r.group == group && r.version == version && r.plural == plural);
        if known {
            continue;
        }
        let has_status = v.pointer("/subresources/status").is_some();
        dynamic.push(Box::leak(Box::new(Resource {
            group: leak(group),
            version: leak(version),
            kind: leak(kind),
            plural: leak(plural),
            singular: leak(&singular),
            namespaced,
            has_status,
            short_names: leak_list(names.get("shortNames")),
            categories: leak_list(names.get("categories")),
            strategic: false,
        })));
    }
    Ok(())
}

/// Find a resource by group, version and plural.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    all()
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Find a resource by apiVersion and kind.
pub fn lookup_kind(api_version: &str, kind: &str) -> Option<&'static Resource> {
    all()
        .into_iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
}

/// The served groups, each with its versions, in discovery order.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for res in all().into_iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == res.group) {
            Some((_, versions)) => {
                if !versions.contains(&res.version) {
                    versions.push(res.version);
                }
            }
            None => out.push((res.group, vec![res.version])),
        }
    }
    // Highest priority first, as kube-apiserver orders them: GA, then beta, then alpha, newer
    // first within each (Karmada's work group prefers v1alpha2 over v1alpha1;
    // authentication.k8s.io prefers v1 over v1beta1).
    for (_, versions) in &mut out {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    out
}

/// How kube-apiserver ranks a version (`v2` > `v1` > `v1beta2` > `v1beta1` > `v1alpha1`).
fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let major = rest[..digits].parse().unwrap_or(0);
    let (stability, minor) = match &rest[digits..] {
        "" => (3, 0),
        s => match s.strip_prefix("beta").or_else(|| s.strip_prefix("alpha")) {
            Some(n) => (
                if s.starts_with("beta") { 2 } else { 1 },
                n.parse().unwrap_or(0),
            ),
            None => (0, 0),
        },
    };
    (stability, major, minor)
}

/// The resources of one group version.
pub fn resources_of(group: &str, version: &str) -> Vec<&'static Resource> {
    all()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
        .collect()
}
