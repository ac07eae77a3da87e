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
