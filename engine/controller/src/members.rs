//! Simulated members: logical clusters of the embedded server registered as `Cluster` objects.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::{Error, api_resource};

/// Capacity a simulated member reports in `status.resourceSummary.allocatable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// CPU, a quantity (`64`).
    pub cpu: String,
    /// Memory, a quantity (`256Gi`).
    pub memory: String,
    /// Pods.
    pub pods: String,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity {
            cpu: "64".into(),
            memory: "256Gi".into(),
            pods: "110".into(),
        }
    }
}

/// The names of `n` simulated members: `member1..memberN`.
pub fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("member{i}")).collect()
}

/// Register (or refresh) simulated member `name` on the control plane: the `Cluster` object,
/// its Ready status and its execution namespace.
///
/// # Errors
/// Fails when a request fails.
pub async fn register(
    control: &Client,
    member: &Client,
    name: &str,
    endpoint: &str,
    capacity: &Capacity,
) -> Result<(), Error> {
    let pp = PatchParams::apply("flotilla-members").force();
    let clusters: Api<DynamicObject> = Api::all_with(
        control.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    );
    let obj = json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": {"flotilla.dev/simulated": "true"}},
        "spec": {"syncMode": "Push", "apiEndpoint": endpoint},
    });
    clusters.patch(name, &pp, &Patch::Apply(obj)).await?;
    let now = flotilla_core::time::format_rfc3339(now_epoch());
    let status = json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "status": {
            "kubernetesVersion": "v1.33.0",
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "ClusterReady",
                "message": "cluster is healthy and ready to accept workloads", "lastTransitionTime": now,
            }],
            "apiEnablements": crate::controller::status::api_enablements(member).await?,
            "resourceSummary": {
                "allocatable": {"cpu": capacity.cpu, "memory": capacity.memory, "pods": capacity.pods},
                "allocated": {"cpu": "0", "memory": "0", "pods": "0"},
            },
        },
    });
    clusters
        .patch_status(name, &pp, &Patch::Apply(status))
        .await?;
    let namespaces: Api<DynamicObject> =
        Api::all_with(control.clone(), &api_resource("v1", "Namespace"));
    let es = flotilla_core::render::execution_namespace(name);
    namespaces
        .patch(
            &es,
            &pp,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": es}}),
            ),
        )
        .await?;
    Ok(())
}

/// Register simulated members `names`, served by `router` under `/clusters/<name>`.
///
/// # Errors
/// Fails when a request fails.
pub async fn register_all(
    router: &axum::Router,
    names: &[String],
    token: Option<&str>,
    capacity: &Capacity,
) -> Result<(), Error> {
    let control = crate::client::in_process(router.clone(), None, token);
    for n in names {
        let member = crate::client::in_process(router.clone(), Some(n), token);
        register(&control, &member, n, &format!("/clusters/{n}"), capacity).await?;
    }
    Ok(())
}

pub use crate::clock::{now_epoch, now_epoch_millis};

/// What [`join`] registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The member's API endpoint (`spec.apiEndpoint`).
    pub endpoint: String,
    /// The Secret holding the credentials, `namespace/name`.
    pub secret: String,
    /// The Secret's shape: `token` (Karmada's `token` + `caBundle`) or `kubeconfig`.
    pub shape: &'static str,
}

/// Join member `name` in Push mode, as `karmadactl join` does: its credentials from
/// `member_kubeconfig` (the `context`, or the current one) go into Secret
/// `karmada-cluster/<name>` (Karmada's `token` + `caBundle` when the kubeconfig's user has a
/// bearer token and its cluster inline CA data, else the whole kubeconfig under `kubeconfig`),
/// and a `Cluster` with `syncMode: Push` and `secretRef` is created. The member must answer
/// `/version` first.
///
/// # Errors
/// Fails when the name is invalid, the Cluster already exists, the kubeconfig is unusable,
/// the member does not answer, or a request to the control plane fails.
pub async fn join(
    control: &Client,
    name: &str,
    member_kubeconfig: &str,
    context: Option<&str>,
) -> Result<Joined, Error> {
    use crate::client::MemberError;
    crate::client::validate_cluster_name(name)?;
    let what = format!("member kubeconfig of cluster {name}");
    let config = crate::client::config_from_kubeconfig(member_kubeconfig, context, &what).await?;
    let endpoint = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let probe = crate::client::probe_client(&config, std::time::Duration::from_secs(10))?;
    match tokio::time::timeout(
        std::time::Duration::from_secs(10),
        probe.apiserver_version(),
    )
    .await
    {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return Err(MemberError::Invalid {
                what: format!("member cluster {name} at {endpoint}"),
                message: format!("not reachable: {e}"),
            }
            .into());
        }
        Err(_) => {
            return Err(MemberError::Invalid {
                what: format!("member cluster {name} at {endpoint}"),
                message: "not reachable: timed out".into(),
            }
            .into());
        }
    }
    let clusters: Api<DynamicObject> = Api::all_with(
        control.clone(),
        &api_resource(flotilla_api::cluster::API_VERSION, "Cluster"),
    );
    if clusters.get_opt(name).await?.is_some() {
        return Err(MemberError::Invalid {
            what: format!("cluster {name}"),
            message: "already exists on the control plane".into(),
        }
        .into());
    }

    // The selected context's cluster and user, as JSON.
    let kc = kube::config::Kubeconfig::from_yaml(member_kubeconfig).map_err(|e| {
        MemberError::Invalid {
            what: what.clone(),
            message: e.to_string(),
        }
    })?;
    let v = serde_json::to_value(&kc).map_err(|e| MemberError::Invalid {
        what: what.clone(),
        message: e.to_string(),
    })?;
    let ctx_name = context
        .map(str::to_owned)
        .or_else(|| {
            v.get("current-context")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let find = |list: &str, key: &str, wanted: &str| -> Option<Value> {
        v.get(list)?
            .as_array()?
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(wanted))
            .and_then(|e| e.get(key))
            .cloned()
    };
    let ctx = find("contexts", "context", &ctx_name).unwrap_or(Value::Null);
    let s = |x: &Value, p: &str| {
        x.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let cluster = find("clusters", "cluster", &s(&ctx, "/cluster")).unwrap_or(Value::Null);
    let user = find("users", "user", &s(&ctx, "/user")).unwrap_or(Value::Null);
    let insecure = cluster
        .get("insecure-skip-tls-verify")
        .and_then(Value::as_bool)
        == Some(true);
    let token = s(&user, "/token");
    let ca_data = s(&cluster, "/certificate-authority-data");
    let (data, shape) = if !token.is_empty() && (!ca_data.is_empty() || insecure) {
        let mut d = json!({"token": crate::client::base64_encode(token.as_bytes())});
        if !ca_data.is_empty() {
            d["caBundle"] = Value::from(ca_data);
        }
        (d, "token")
    } else {
        (
            json!({"kubeconfig": crate::client::base64_encode(member_kubeconfig.as_bytes())}),
            "kubeconfig",
        )
    };

    let pp = PatchParams::apply("flotilla-join").force();
    let ns = crate::controller::status::CLUSTER_NAMESPACE;
    crate::controller::status::ensure_namespace(control, ns).await?;
    let secrets: Api<DynamicObject> =
        Api::namespaced_with(control.clone(), ns, &api_resource("v1", "Secret"));
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "type": "Opaque", "data": data});
    secrets.patch(name, &pp, &Patch::Apply(secret)).await?;
    let mut spec = json!({"syncMode": "Push", "apiEndpoint": endpoint, "secretRef": {"namespace": ns, "name": name}});
    if insecure {
        spec["insecureSkipTLSVerification"] = Value::Bool(true);
    }
    let obj = json!({"apiVersion": flotilla_api::cluster::API_VERSION, "kind": "Cluster", "metadata": {"name": name}, "spec": spec});
    clusters.patch(name, &pp, &Patch::Apply(obj)).await?;
    let es = flotilla_core::render::execution_namespace(name);
    crate::controller::status::ensure_namespace(control, &es).await?;
    Ok(Joined {
        endpoint,
        secret: format!("{ns}/{name}"),
        shape,
    })
}

/// The ServiceAccount a Pull agent for cluster `name` runs as (in `karmada-cluster`).
pub fn agent_service_account(name: &str) -> String {
    format!("karmada-agent-{name}")
}

/// Default lifetime of a Pull agent's token: one year, as `karmadactl register`'s agent
/// certificate (`--cert-expiration-seconds`).
pub const AGENT_TOKEN_SECONDS: i64 = 365 * 24 * 3600;

/// What [`prepare_pull`] created for a Pull agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullCredentials {
    /// The agent's ServiceAccount, `namespace/name`.
    pub service_account: String,
    /// A token for that ServiceAccount (TokenRequest).
    pub token: String,
    /// When the token expires (RFC 3339), as the TokenRequest answered.
    pub expires: String,
    /// The RBAC objects granting the agent its access, `Kind/[namespace/]name` as
    /// `karmadactl register` lists them.
    pub objects: Vec<String>,
}

/// The RBAC a Pull agent for cluster `name` needs on the control plane, as
/// `(kind, namespace, name, rules)`: Karmada's agent ClusterRole and work Role
/// (`system:karmada:<name>:agent`, `system:karmada:<name>:agent-work`), narrowed to what
/// `flotilla agent` calls — its own `Cluster` (and its status) by name, the Works of
/// `karmada-es-<name>` only, its own Lease in `karmada-cluster` by name, namespaces `get`,
/// Events, and reading the interpreter customizations it applies on the member side.
pub fn agent_rbac(name: &str) -> Vec<(&'static str, String, String, Value)> {
    let es = flotilla_core::render::execution_namespace(name);
    let lease_ns = crate::controller::status::CLUSTER_NAMESPACE;
    vec![
        (
            "ClusterRole",
            String::new(),
            format!("system:karmada:{name}:agent"),
            json!([
                {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"], "resourceNames": [name], "verbs": ["get", "patch", "update"]},
                {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters/status"], "resourceNames": [name], "verbs": ["get", "patch", "update"]},
                {"apiGroups": ["config.karmada.io"], "resources": ["resourceinterpreterwebhookconfigurations", "resourceinterpretercustomizations"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
                {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
            ]),
        ),
        (
            "Role",
            es,
            format!("system:karmada:{name}:agent-work"),
            json!([
                {"apiGroups": ["work.karmada.io"], "resources": ["works"], "verbs": ["get", "list", "watch", "patch", "update"]},
                {"apiGroups": ["work.karmada.io"], "resources": ["works/status"], "verbs": ["get", "patch", "update"]},
            ]),
        ),
        (
            "Role",
            lease_ns.to_owned(),
            format!("system:karmada:{name}:agent-lease"),
            json!([
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [name], "verbs": ["get", "patch", "update"]},
            ]),
        ),
    ]
}

/// Prepare the control plane for a Pull agent of cluster `name`, as `karmadactl register`
/// does with its bootstrap token, but with a ServiceAccount instead of a CSR-signed
/// certificate: the namespaces `karmada-cluster` and `karmada-es-<name>`, ServiceAccount
/// `karmada-cluster/karmada-agent-<name>`, the roles of [`agent_rbac`] and their bindings to it,
/// and a token for it valid `expiration_seconds`. Running it again refreshes the objects and
/// issues a new token. Deleting the ServiceAccount revokes every token issued for it.
///
/// # Errors
/// Fails when the name is invalid, the Cluster exists in Push mode, or a request fails.
pub async fn prepare_pull(
    control: &Client,
    name: &str,
    expiration_seconds: i64,
) -> Result<PullCredentials, Error> {
    use crate::client::MemberError;
    crate::client::validate_cluster_name(name)?;
    let clusters: Api<DynamicObject> = Api::all_with(
        control.clone(),
        &api_resource(flotilla_api::cluster::API_VERSION, "Cluster"),
    );
    if let Some(existing) = clusters.get_opt(name).await? {
        let mode = existing
            .data
            .pointer("/spec/syncMode")
            .and_then(Value::as_str)
            .unwrap_or("");
        if mode != "Pull" {
            return Err(MemberError::Invalid {
                what: format!("cluster {name}"),
                message: format!(
                    "already registered with syncMode {mode:?}; unjoin it (delete the Cluster) first"
                ),
            }
            .into());
        }
    }
    let ns = crate::controller::status::CLUSTER_NAMESPACE;
    let es = flotilla_core::render::execution_namespace(name);
    for n in [ns, es.as_str()] {
        crate::controller::status::ensure_namespace(control, n).await?;
    }
    let pp = PatchParams::apply("flotilla-join").force();
    let sa_name = agent_service_account(name);
    let sas: Api<DynamicObject> =
        Api::namespaced_with(control.clone(), ns, &api_resource("v1", "ServiceAccount"));
    sas.patch(
        &sa_name,
        &pp,
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa_name, "namespace": ns}})),
    )
    .await?;
    let rbac = "rbac.authorization.k8s.io/v1";
    let subject = json!([{"kind": "ServiceAccount", "name": sa_name, "namespace": ns}]);
    let mut objects = Vec::new();
    for (kind, namespace, role, rules) in agent_rbac(name) {
        let binding_kind = if kind == "ClusterRole" {
            "ClusterRoleBinding"
        } else {
            "RoleBinding"
        };
        let (roles, bindings): (Api<DynamicObject>, Api<DynamicObject>) = if namespace.is_empty() {
            (
                Api::all_with(control.clone(), &api_resource(rbac, kind)),
                Api::all_with(control.clone(), &api_resource(rbac, binding_kind)),
            )
        } else {
            (
                Api::namespaced_with(control.clone(), &namespace, &api_resource(rbac, kind)),
                Api::namespaced_with(
                    control.clone(),
                    &namespace,
                    &api_resource(rbac, binding_kind),
                ),
            )
        };
        let mut meta = json!({"name": role});
        if !namespace.is_empty() {
            meta["namespace"] = Value::from(namespace.clone());
        }
        roles
            .patch(
                &role,
                &pp,
                &Patch::Apply(
                    json!({"apiVersion": rbac, "kind": kind, "metadata": meta, "rules": rules}),
                ),
            )
            .await?;
        bindings
            .patch(
                &role,
                &pp,
                &Patch::Apply(json!({
                    "apiVersion": rbac, "kind": binding_kind, "metadata": meta,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                    "subjects": subject,
                })),
            )
            .await?;
        let at = if namespace.is_empty() {
            String::new()
        } else {
            format!("{namespace}/")
        };
        objects.push(format!("{kind}/{at}{role}"));
        objects.push(format!("{binding_kind}/{at}{role}"));
    }
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_seconds},
    });
    let answer: Value = sas
        .create_subresource(
            "token",
            &sa_name,
            &kube::api::PostParams::default(),
            &request,
        )
        .await?;
    let token = answer
        .pointer("/status/token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| MemberError::Invalid {
            what: format!("TokenRequest for ServiceAccount {ns}/{sa_name}"),
            message: "the answer has no status.token".into(),
        })?
        .to_owned();
    let expires = answer
        .pointer("/status/expirationTimestamp")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    Ok(PullCredentials {
        service_account: format!("{ns}/{sa_name}"),
        token,
        expires,
        objects,
    })
}

/// A kubeconfig for the control plane with `token` as its user: the cluster entry (server and
/// CA) of `control_kubeconfig`'s `context` (or current context), named `karmada-apiserver`
/// as `karmadactl register` names it, and user `name`.
///
/// # Errors
/// [`crate::client::MemberError::Invalid`] when the kubeconfig has no such context or cluster.
pub fn agent_kubeconfig(
    control_kubeconfig: &str,
    context: Option<&str>,
    name: &str,
    token: &str,
) -> Result<String, crate::client::MemberError> {
    use crate::client::MemberError;
    let invalid = |message: String| MemberError::Invalid {
        what: "control plane kubeconfig".into(),
        message,
    };
    let kc = kube::config::Kubeconfig::from_yaml(control_kubeconfig)
        .map_err(|e| invalid(e.to_string()))?;
    let ctx_name = context
        .map(str::to_owned)
        .or_else(|| kc.current_context.clone())
        .ok_or_else(|| invalid("no current context".into()))?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| invalid(format!("no context {ctx_name:?}")))?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| invalid(format!("no cluster {:?}", ctx.cluster)))?;
    let cluster = serde_json::to_value(cluster).map_err(|e| invalid(e.to_string()))?;
    let user = format!("karmada-agent-{name}");
    let out = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "karmada-apiserver", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "karmada-apiserver", "user": user}}],
        "current-context": user,
    });
    serde_yaml::to_string(&out).map_err(|e| invalid(e.to_string()))
}
