//! Clients for the control plane and the member clusters.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::Client;

/// A client on the embedded server's router, in process, for the logical cluster `cluster`
/// (`None`: the control plane itself).
pub fn in_process(router: axum::Router, cluster: Option<&str>) -> Client {
    match cluster {
        None => Client::new(router, "default"),
        Some(name) => {
            let prefix = format!("/clusters/{name}");
            let svc = tower::ServiceBuilder::new()
                .map_request(move |mut req: http::Request<kube::client::Body>| {
                    let pq = req.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".to_owned());
                    if let Ok(uri) = format!("{prefix}{pq}").parse::<http::Uri>() {
                        *req.uri_mut() = uri;
                    }
                    req
                })
                .service(router);
            Client::new(svc, "default")
        }
    }
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
    pub fn simulated(router: &axum::Router, names: &[String]) -> Self {
        Self::new(names.iter().map(|n| (n.clone(), in_process(router.clone(), Some(n)))))
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
