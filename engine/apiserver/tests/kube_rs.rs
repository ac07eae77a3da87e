//! kube-rs against the server: in-process through `kube::Client::new(router)` and over TLS.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};

fn in_process() -> (Client, Arc<ApiServer>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(
        store,
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    (Client::new(server.router(), "default"), server, dir)
}

fn cm(name: &str, data: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_owned(), data.to_owned())])),
        ..Default::default()
    }
}

async fn next_event(
    stream: &mut (
             impl futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin
         ),
) -> watcher::Event<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("event in time")
        .expect("no error")
        .expect("stream open")
}

#[tokio::test]
async fn watcher_lists_then_follows_creates_updates_and_deletes_in_process() {
    let (client, _server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("create a");
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::Init
    ));
    match next_event(&mut stream).await {
        watcher::Event::InitApply(o) => assert_eq!(o.name_any(), "a"),
        other => panic!("expected InitApply(a), got {other:?}"),
    }
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::InitDone
    ));
    api.create(&PostParams::default(), &cm("b", "1"))
        .await
        .expect("create b");
    match next_event(&mut stream).await {
        watcher::Event::Apply(o) => assert_eq!(o.name_any(), "b"),
        other => panic!("expected Apply(b), got {other:?}"),
    }
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"k": "2"}})),
    )
    .await
    .expect("patch b");
    match next_event(&mut stream).await {
        watcher::Event::Apply(o) => assert_eq!(o.data.expect("data")["k"], "2"),
        other => panic!("expected Apply(b'), got {other:?}"),
    }
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    match next_event(&mut stream).await {
        watcher::Event::Delete(o) => assert_eq!(o.name_any(), "a"),
        other => panic!("expected Delete(a), got {other:?}"),
    }
}

#[tokio::test]
async fn no_op_writes_keep_the_resource_version_and_status_writes_keep_generation() {
    let (client, _server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = api
        .create(&PostParams::default(), &cm("same", "1"))
        .await
        .expect("create");
    let replaced = api
        .replace("same", &PostParams::default(), &created)
        .await
        .expect("replace");
    assert_eq!(created.resource_version(), replaced.resource_version());
    let patched = api
        .patch(
            "same",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"k": "1"}})),
        )
        .await
        .expect("patch");
    assert_eq!(created.resource_version(), patched.resource_version());
    // Stale resourceVersion on replace is a 409 Conflict.
    api.patch(
        "same",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"k": "2"}})),
    )
    .await
    .expect("patch");
    let err = api
        .replace("same", &PostParams::default(), &created)
        .await
        .expect_err("stale replace fails");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.is_conflict()),
        "{err:?}"
    );
    let err = api
        .create(&PostParams::default(), &cm("same", "1"))
        .await
        .expect_err("duplicate create fails");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.is_already_exists()),
        "{err:?}"
    );
    let err = api.get("missing").await.expect_err("missing");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.is_not_found()),
        "{err:?}"
    );

    use k8s_openapi::api::apps::v1::Deployment;
    let deploys: Api<Deployment> = Api::default_namespaced(client);
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    })).expect("deployment");
    let d = deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create deployment");
    assert_eq!(d.metadata.generation, Some(1));
    let s = deploys
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"replicas": 1}})),
        )
        .await
        .expect("status");
    assert_eq!(s.metadata.generation, Some(1));
    assert_eq!(s.status.and_then(|st| st.replicas), Some(1));
    let spec = deploys
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 3}, "status": {"replicas": 9}})),
        )
        .await
        .expect("spec");
    assert_eq!(spec.metadata.generation, Some(2));
    assert_eq!(
        spec.status.and_then(|st| st.replicas),
        Some(1),
        "the main resource ignores status"
    );
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct ReconcileError(#[from] kube::Error);

#[tokio::test]
async fn controller_with_finalizer_reconciles_and_cleans_up_in_process() {
    let (client, _server, _dir) = in_process();
    controller_with_finalizer(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_with_finalizer_reconciles_and_cleans_up_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(
        flotilla_apiserver::Config::new(dir.path().join("data")),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .expect("starts");
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&running.kubeconfig).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    controller_with_finalizer(Client::try_from(cfg).expect("client")).await;
    let _ = stop.send(());
}

async fn controller_with_finalizer(client: Client) {
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let controller_api = api.clone();
    let handle = tokio::spawn(async move {
        Controller::new(controller_api.clone(), watcher::Config::default())
            .run(
                move |obj: Arc<ConfigMap>, api: Arc<Api<ConfigMap>>| async move {
                    finalizer(&api, "flotilla.test/cleanup", obj, |ev| async {
                        match ev {
                            Finalizer::Apply(o) => {
                                let patch = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": o.name_any(), "labels": {"reconciled": "true"}}});
                                api.patch(&o.name_any(), &PatchParams::apply("test-controller").force(), &Patch::Apply(patch)).await?;
                                Ok::<_, ReconcileError>(Action::await_change())
                            }
                            Finalizer::Cleanup(_) => Ok(Action::await_change()),
                        }
                    })
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))
                },
                |_obj, _err, _ctx| Action::requeue(Duration::from_millis(100)),
                Arc::new(api_for_ctx(&client)),
            )
            .for_each(|_| async {})
            .await;
    });
    api.create(&PostParams::default(), &cm("ctl", "1"))
        .await
        .expect("create");
    let reconciled = wait_for(&api, "ctl", |o| {
        o.as_ref().is_some_and(|o| {
            o.labels().get("reconciled").is_some_and(|v| v == "true")
                && o.finalizers().iter().any(|f| f == "flotilla.test/cleanup")
        })
    })
    .await;
    assert!(reconciled, "controller added its finalizer and label");
    api.delete("ctl", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = wait_for(&api, "ctl", |o| o.is_none()).await;
    assert!(gone, "the finalizer was removed and the object deleted");
    handle.abort();
}

fn api_for_ctx(client: &Client) -> Api<ConfigMap> {
    Api::default_namespaced(client.clone())
}

async fn wait_for(
    api: &Api<ConfigMap>,
    name: &str,
    pred: impl Fn(&Option<ConfigMap>) -> bool,
) -> bool {
    for _ in 0..100 {
        let cur = api.get_opt(name).await.expect("get");
        if pred(&cur) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn watch_from_a_compacted_revision_gets_an_in_stream_410() {
    let (client, server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let first = api
        .create(&PostParams::default(), &cm("c1", "1"))
        .await
        .expect("create");
    for i in 0..5 {
        api.patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"k": i.to_string()}})),
        )
        .await
        .expect("patch");
    }
    server.store().compact(1).await.expect("compact");
    let mut events = api
        .watch(
            &WatchParams::default(),
            &first.resource_version().expect("rv"),
        )
        .await
        .expect("watch starts")
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("in time")
        .expect("an event")
        .expect("decodes");
    match ev {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected ERROR 410, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version_and_gets_bookmarks() {
    let (client, _server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let a = api
        .create(&PostParams::default(), &cm("r1", "1"))
        .await
        .expect("create");
    api.create(&PostParams::default(), &cm("r2", "1"))
        .await
        .expect("create");
    let mut events = api
        .watch(&WatchParams::default(), &a.resource_version().expect("rv"))
        .await
        .expect("watch")
        .boxed();
    match events.next().await.expect("event").expect("ok") {
        WatchEvent::Added(o) => {
            assert_eq!(o.name_any(), "r2", "only changes after the RV are replayed")
        }
        other => panic!("expected ADDED r2, got {other:?}"),
    }
    let bookmark = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("bookmark in time")
        .expect("event")
        .expect("ok");
    assert!(matches!(bookmark, WatchEvent::Bookmark(_)), "{bookmark:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_client_works_over_tls_with_the_generated_kubeconfig_and_logical_clusters_are_isolated()
 {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = flotilla_apiserver::Config::new(dir.path().join("data"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(config, async move {
        let _ = stopped.await;
    })
    .await
    .expect("starts");
    assert!(running.url.starts_with("https://127.0.0.1:"));
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&running.kubeconfig).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    let client = Client::try_from(cfg.clone()).expect("client");
    let root: Api<ConfigMap> = Api::default_namespaced(client.clone());
    root.create(&PostParams::default(), &cm("shared-name", "root"))
        .await
        .expect("create over TLS");

    let mut member_cfg = cfg.clone();
    member_cfg.cluster_url = format!("{}/clusters/member1", running.url)
        .parse()
        .expect("url");
    let member: Api<ConfigMap> =
        Api::default_namespaced(Client::try_from(member_cfg).expect("member client"));
    assert!(
        member.get_opt("shared-name").await.expect("get").is_none(),
        "member1 has its own keyspace"
    );
    member
        .create(&PostParams::default(), &cm("shared-name", "member"))
        .await
        .expect("create in member1");
    assert_eq!(
        root.get("shared-name")
            .await
            .expect("get")
            .data
            .expect("data")["k"],
        "root"
    );

    // A watcher over TLS sees a change.
    let mut stream = watcher(root.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("in time")
        .expect("ok")
        .expect("item");
    assert_eq!(first.name_any(), "shared-name");
    root.create(&PostParams::default(), &cm("later", "1"))
        .await
        .expect("create");
    let next = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("in time")
        .expect("ok")
        .expect("item");
    assert_eq!(next.name_any(), "later");

    // Without the token: 401.
    let mut anon = cfg;
    anon.auth_info = Default::default();
    let anon: Api<ConfigMap> = Api::default_namespaced(Client::try_from(anon).expect("client"));
    let err = anon
        .list(&Default::default())
        .await
        .expect_err("unauthenticated");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 401),
        "{err:?}"
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn custom_resource_definitions_become_established_and_serve_their_kind() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    use kube::runtime::wait::{await_condition, conditions};

    let (client, _server, _dir) = in_process();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "schedulerplugins.flotilla.dev"},
        "spec": {"group": "flotilla.dev", "scope": "Namespaced",
                 "names": {"kind": "SchedulerPlugin", "plural": "schedulerplugins", "singular": "schedulerplugin", "shortNames": ["sp"]},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(
            crds,
            "schedulerplugins.flotilla.dev",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("in time")
    .expect("established");

    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let (ar, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk(
            "flotilla.dev",
            "v1alpha1",
            "SchedulerPlugin",
        ))
        .expect("discovered");
    assert_eq!(ar.plural, "schedulerplugins");
    assert!(
        caps.subresources.iter().any(|(s, _)| s.plural == "status"),
        "status subresource advertised"
    );

    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "flotilla.dev",
            "v1alpha1",
            "SchedulerPlugin",
        )),
    );
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerPlugin", "metadata": {"name": "spread"}, "spec": {"weight": 3},
        "status": {"phase": "created"}
    }))
    .expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create custom object");
    let got = api.get("spread").await.expect("get custom object");
    assert_eq!(got.data["spec"]["weight"], 3);
    // With the status subresource, as kube-apiserver: the main resource drops `.status` (create,
    // merge patch, server-side apply) and `/status` changes nothing but `.status`.
    assert_eq!(got.data.get("status"), None, "status dropped on create");
    let patched = api
        .patch(
            "spread",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"weight": 4}, "status": {"phase": "main"}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.data["spec"]["weight"], 4);
    assert_eq!(patched.data.get("status"), None, "status dropped on patch");
    let applied = api
        .patch(
            "spread",
            &PatchParams::apply("conformance").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerPlugin",
                "metadata": {"name": "spread"}, "spec": {"weight": 4}, "status": {"phase": "applied"}
            })),
        )
        .await
        .expect("apply");
    assert_eq!(applied.data.get("status"), None, "status dropped on apply");
    let status = api
        .patch_status(
            "spread",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"weight": 9}, "status": {"phase": "reported"}}),
            ),
        )
        .await
        .expect("status patch");
    assert_eq!(status.data["status"]["phase"], "reported");
    assert_eq!(status.data["spec"]["weight"], 4, "spec kept on /status");
    let again = api
        .patch(
            "spread",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"phase": "main"}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(
        again.data["status"]["phase"], "reported",
        "status kept on patch"
    );
    assert_eq!(
        api.list(&Default::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_and_the_end_bookmark() {
    let (client, _server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &cm("s1", "1"))
        .await
        .expect("create");
    let mut stream = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::Init
    ));
    match next_event(&mut stream).await {
        watcher::Event::InitApply(o) => assert_eq!(o.name_any(), "s1"),
        other => panic!("expected InitApply(s1), got {other:?}"),
    }
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::InitDone
    ));
    api.create(&PostParams::default(), &cm("s2", "1"))
        .await
        .expect("create");
    match next_event(&mut stream).await {
        watcher::Event::Apply(o) => assert_eq!(o.name_any(), "s2"),
        other => panic!("expected Apply(s2), got {other:?}"),
    }
}

/// The garbage collector among many objects of the owner's namespace: deleting an owner deletes
/// the dependent it alone owns, keeps (without the reference) one with another owner, orphans
/// with `propagationPolicy: Orphan`, and leaves the unrelated objects — including one whose data
/// merely mentions the owner's uid — alone.
#[tokio::test]
async fn deleting_an_owner_collects_its_dependents_among_many_objects() {
    let (client, _server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let pp = PostParams::default();
    for i in 0..200 {
        api.create(&pp, &cm(&format!("other-{i}"), "x"))
            .await
            .expect("create");
    }
    let mut owners = Vec::new();
    for name in ["first", "second"] {
        let o = api.create(&pp, &cm(name, "owner")).await.expect("owner");
        owners.push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: name.into(),
                uid: o.uid().expect("uid"),
                ..Default::default()
            },
        );
    }
    let (first, second) = (owners[0].clone(), owners[1].clone());
    let dependent = |name: &str, refs: Vec<_>| {
        let mut c = cm(name, "dependent");
        c.metadata.owner_references = Some(refs);
        c
    };
    api.create(&pp, &dependent("only-first", vec![first.clone()]))
        .await
        .expect("create");
    api.create(&pp, &dependent("both", vec![first.clone(), second.clone()]))
        .await
        .expect("create");
    api.create(&pp, &cm("mentions", &first.uid))
        .await
        .expect("create");

    api.delete("first", &DeleteParams::default())
        .await
        .expect("delete owner");
    assert!(api.get_opt("only-first").await.expect("get").is_none());
    let both = api.get("both").await.expect("kept: another owner is left");
    assert_eq!(
        both.owner_references()
            .iter()
            .map(|r| r.uid.as_str())
            .collect::<Vec<_>>(),
        [second.uid.as_str()]
    );
    assert!(api.get_opt("mentions").await.expect("get").is_some());

    api.delete("second", &DeleteParams::orphan())
        .await
        .expect("delete owner, orphaning");
    let orphan = api.get("both").await.expect("orphaned, not deleted");
    assert!(orphan.owner_references().is_empty());
    assert_eq!(
        api.list(&Default::default())
            .await
            .expect("list")
            .items
            .len(),
        202,
        "200 others + both + mentions"
    );
}

/// The next watch event as `(type, name)`, or `None` when nothing comes within `wait`.
async fn next_change(
    events: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
    wait: Duration,
) -> Option<(&'static str, String)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let ev = tokio::time::timeout_at(deadline, events.next())
            .await
            .ok()??;
        return Some(match ev.expect("ok") {
            WatchEvent::Added(o) => ("ADDED", o.name_any()),
            WatchEvent::Modified(o) => ("MODIFIED", o.name_any()),
            WatchEvent::Deleted(o) => ("DELETED", o.name_any()),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        });
    }
}

#[tokio::test]
async fn selector_watches_see_objects_enter_and_leave_the_selection() {
    // The watch window keeps each change's labels and JSON, not decoded objects: label
    // selectors read the kept labels of the object and of its previous state, field selectors
    // decode them; both must still see an object leave (DELETED) and come back (ADDED).
    let (client, _server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let start = api
        .create(&PostParams::default(), &cm("zero", "0"))
        .await
        .expect("create")
        .resource_version()
        .expect("rv");
    let mut by_label = api
        .watch(&WatchParams::default().labels("tier=gold"), &start)
        .await
        .expect("watch")
        .boxed();
    let mut by_field = api
        .watch(&WatchParams::default().fields("metadata.name=b"), &start)
        .await
        .expect("watch")
        .boxed();
    let label =
        |tier: &str| Patch::Merge(serde_json::json!({"metadata": {"labels": {"tier": tier}}}));
    let pp = PatchParams::default();
    let mut a = cm("a", "1");
    a.metadata.labels = Some(BTreeMap::from([("tier".to_owned(), "gold".to_owned())]));
    api.create(&PostParams::default(), &a)
        .await
        .expect("create a");
    api.create(&PostParams::default(), &cm("b", "1"))
        .await
        .expect("create b");
    api.patch("a", &pp, &label("silver"))
        .await
        .expect("relabel");
    api.patch("b", &pp, &label("gold")).await.expect("relabel");
    api.patch("a", &pp, &label("gold")).await.expect("relabel");
    api.patch(
        "a",
        &pp,
        &Patch::Merge(serde_json::json!({"data": {"k": "2"}})),
    )
    .await
    .expect("edit");
    api.delete("b", &DeleteParams::default())
        .await
        .expect("delete");
    let wait = Duration::from_secs(5);
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(next_change(&mut by_label, wait).await.expect("label event"));
    }
    assert_eq!(
        seen,
        [
            ("ADDED", "a".to_owned()),
            ("DELETED", "a".to_owned()),
            ("ADDED", "b".to_owned()),
            ("ADDED", "a".to_owned()),
            ("MODIFIED", "a".to_owned()),
            ("DELETED", "b".to_owned()),
        ]
    );
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(next_change(&mut by_field, wait).await.expect("field event"));
    }
    assert_eq!(
        seen,
        [
            ("ADDED", "b".to_owned()),
            ("MODIFIED", "b".to_owned()),
            ("DELETED", "b".to_owned()),
        ]
    );
    assert_eq!(
        next_change(&mut by_label, Duration::from_millis(300)).await,
        None,
        "nothing else matches"
    );
}

#[tokio::test]
async fn an_applied_resource_version_is_a_precondition() {
    let (client, _server, _dir) = in_process();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let pp = PatchParams::apply("test-applier").force();
    let first = api
        .patch(
            "locked",
            &pp,
            &Patch::Apply(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "locked"}, "data": {"k": "1"},
            })),
        )
        .await
        .expect("created by apply");
    let seen = first.resource_version().expect("a resourceVersion");
    // Someone else changes the object after it was read.
    api.patch(
        "locked",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"other": "x"}})),
    )
    .await
    .expect("other writer");
    let stale = api
        .patch(
            "locked",
            &pp,
            &Patch::Apply(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "locked", "resourceVersion": seen}, "data": {"k": "2"},
            })),
        )
        .await;
    match stale {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("a stale applied resourceVersion must conflict: {other:?}"),
    }
    assert_eq!(
        api.get("locked").await.expect("get").data.expect("data")["k"],
        "1"
    );
    // At the current version the apply goes through.
    let current = api.get("locked").await.expect("get");
    let applied = api
        .patch(
            "locked",
            &pp,
            &Patch::Apply(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "locked", "resourceVersion": current.resource_version()},
                "data": {"k": "2"},
            })),
        )
        .await
        .expect("apply at the current version");
    assert_ne!(applied.resource_version(), current.resource_version());
    assert_eq!(applied.data.expect("data")["k"], "2");
}
