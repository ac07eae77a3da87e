//! Clients for the control plane and the member clusters.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Client;

/// A client on the embedded server's router, in process, for the logical cluster `cluster`
/// (`None`: the control plane itself), sending `token` as its bearer token when set.
pub fn in_process(router: axum::Router, cluster: Option<&str>, token: Option<&str>) -> Client {
    let prefix = cluster.map(|name| format!("/clusters/{name}")).unwrap_or_default();
    let auth = token.and_then(|t| http::HeaderValue::from_str(&format!("Bearer {t}")).ok());
    let svc = tower::ServiceBuilder::new()
        .map_request(move |mut req: http::Request<kube::client::Body>| {
            if !prefix.is_empty() {
                let pq = req.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".to_owned());
                if let Ok(uri) = format!("{prefix}{pq}").parse::<http::Uri>() {
                    *req.uri_mut() = uri;
                }
            }
            if let Some(a) = &auth {
                req.headers_mut().insert(http::header::AUTHORIZATION, a.clone());
            }
            req
        })
        .service(router);
    Client::new(svc, "default")
}

/// The bearer token of the first user in `kubeconfig` (what `flotilla_apiserver::start` writes).
pub fn token_from_kubeconfig(kubeconfig: &str) -> Option<String> {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).ok()?;
    let v = serde_json::to_value(&kc).ok()?;
    v.pointer("/users/0/user/token").and_then(serde_json::Value::as_str).map(str::to_owned)
}

/// The member clusters the execution controller can reach, by name.
#[derive(Clone, Default)]
pub struct Members {
    clients: Arc<BTreeMap<String, Client>>,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.clients.keys()).finish()
    }
}

impl Members {
    /// Members from `(name, client)` pairs.
    pub fn new(clients: impl IntoIterator<Item = (String, Client)>) -> Self {
        Members { clients: Arc::new(clients.into_iter().collect()) }
    }

    /// Simulated members `names` as logical clusters of the embedded server behind `router`.
    pub fn simulated(router: &axum::Router, names: &[String], token: Option<&str>) -> Self {
        Self::new(names.iter().map(|n| (n.clone(), in_process(router.clone(), Some(n), token))))
    }

    /// The client of member `name`.
    pub fn get(&self, name: &str) -> Option<&Client> {
        self.clients.get(name)
    }

    /// Every member.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Client)> {
        self.clients.iter()
    }
}
