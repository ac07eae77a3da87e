//! kube-apiserver's list responses leave `apiVersion` and `kind` off the items of built-in kinds
//! (and watch events carry them). The controllers' caches type every object by the resource it
//! was listed or watched from, so a template listed at start-up is a Deployment, not a kind-less
//! object the detector would skip and the binding controller would render as an empty kind.

use std::time::Duration;

use axum::extract::Request;
use axum::response::IntoResponse;
use flotilla_controller::{Bus, Topic, api_resource, cache};
use serde_json::json;

/// Answers the list of Deployments as kube-apiserver does (items without apiVersion/kind, with
/// managedFields), and keeps every watch open without events.
async fn fake_kube_apiserver(req: Request) -> axum::response::Response {
    let query = req.uri().query().unwrap_or_default().to_owned();
    if req.uri().path() != "/apis/apps/v1/deployments" {
        return (http::StatusCode::NOT_FOUND, "{}").into_response();
    }
    if query.contains("watch=true") || query.contains("watch=1") {
        let body = axum::body::Body::from_stream(futures::stream::pending::<
            Result<axum::body::Bytes, std::io::Error>,
        >());
        return ([(http::header::CONTENT_TYPE, "application/json")], body).into_response();
    }
    let list = json!({
        "kind": "DeploymentList",
        "apiVersion": "apps/v1",
        "metadata": {"resourceVersion": "7"},
        "items": [{
            "metadata": {
                "name": "nginx",
                "namespace": "default",
                "uid": "u-1",
                "resourceVersion": "7",
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            },
            "spec": {"replicas": 2}
        }]
    });
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        list.to_string(),
    )
        .into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_built_in_items_are_typed_by_the_resource_they_were_listed_from() {
    let router = axum::Router::new().fallback(fake_kube_apiserver);
    let client = flotilla_controller::client::in_process(router, None, None);
    let mut tasks = tokio::task::JoinSet::new();
    let bus = Bus::default();
    let cached = cache(
        &client,
        api_resource("apps/v1", "Deployment"),
        Topic::Template,
        &bus,
        &mut tasks,
    );
    tokio::time::timeout(Duration::from_secs(10), cached.store.wait_until_ready())
        .await
        .expect("listed in time")
        .expect("cache ready");
    let state = cached.store.state();
    assert_eq!(state.len(), 1);
    let o = &state[0];
    let types = o.types.as_ref().expect("typed");
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("apps/v1", "Deployment")
    );
    assert!(o.metadata.managed_fields.is_none());
    // What the detector and the binding controller read: the template's own apiVersion/kind.
    let value = serde_json::to_value(&**o).expect("serialises");
    assert_eq!(value["apiVersion"], "apps/v1");
    assert_eq!(value["kind"], "Deployment");
    tasks.abort_all();
}
