//! End to end, live, in process: the multi-component kinds of examples/components (a Flink-like
//! `StreamJob` and a PyTorchJob-like `TrainJob`, interpreted by CEL `componentResource` rules) on
//! the embedded API server with three simulated members and every controller. Both land whole in
//! the one member that fits all their components (the member copies exist there only), and fail
//! over whole when that member is tainted NoExecute.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::controller::interpreters::RuleBackends;
use flotilla_controller::{Settings, api_resource, client, members};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn example(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/components")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("example reads");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("example parses"))
        .collect()
}

fn api_for(client: &Client, obj: &Value) -> Api<DynamicObject> {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let res = api_resource(&s("/apiVersion"), &s("/kind"));
    let ns = s("/metadata/namespace");
    if ns.is_empty() {
        Api::all_with(client.clone(), &res)
    } else {
        Api::namespaced_with(client.clone(), &ns, &res)
    }
}

async fn apply_all(client: &Client, file: &str) {
    for obj in example(file) {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .expect("name")
            .to_owned();
        api_for(client, &obj)
            .patch(
                &name,
                &PatchParams::apply("kubectl").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("apply");
    }
}

async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn clusters_api(c: &Client) -> Api<DynamicObject> {
    Api::all_with(
        c.clone(),
        &api_resource("cluster.karmada.io/v1alpha1", "Cluster"),
    )
}

/// What a member's status reports as free (the simulated members keep a hand-written status).
async fn set_summary(control: &Client, name: &str, allocatable: Value, allocated: Value) {
    clusters_api(control)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"resourceSummary": {
                "allocatable": allocatable, "allocated": allocated}}})),
        )
        .await
        .expect("cluster status");
}

async fn targets(control: &Client, name: &str) -> Option<Value> {
    let rbs: Api<DynamicObject> = Api::namespaced_with(
        control.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    );
    let rb = rbs.get_opt(name).await.ok()??;
    rb.data.pointer("/spec/clusters").cloned()
}

async fn has_copy(member: &Client, kind: &str, name: &str) -> bool {
    let api: Api<DynamicObject> = Api::namespaced_with(
        member.clone(),
        "default",
        &api_resource("example.dev/v1", kind),
    );
    matches!(api.get_opt(name).await, Ok(Some(_)))
}

fn whole(cluster: &str, components: &[(&str, i64)]) -> Value {
    let c: Vec<Value> = components
        .iter()
        .map(|(n, r)| json!({"name": n, "replicas": r}))
        .collect();
    json!([{"name": cluster, "components": c}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_workloads_land_whole_in_the_member_that_fits_and_fail_over_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ApiServer::new(
        Store::open(dir.path()).expect("store opens"),
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    let router = server.router();
    let control = client::in_process(router.clone(), None, None);
    apply_all(&control, "crds.yaml").await;
    let mut settings = Settings {
        ready_delay: Duration::from_millis(100),
        resync: Duration::from_millis(500),
        rule_backends: RuleBackends(vec![Arc::new(flotilla_cel::CelRuleBackend::default())]),
        ..Settings::default()
    };
    for kind in ["StreamJob", "TrainJob"] {
        settings
            .template_kinds
            .push(("example.dev/v1".into(), kind.into()));
    }
    let running = flotilla_controller::start_embedded(
        server.router(),
        flotilla_controller::Embedded {
            members: 3,
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    let member: Vec<Client> = members::names(3)
        .iter()
        .map(|n| client::in_process(router.clone(), Some(n), None))
        .collect();

    // member1 nearly full; member2 roomy with GPUs; member3 roomy but without GPUs and with too
    // little memory for a whole StreamJob (36Gi).
    set_summary(
        &control,
        "member1",
        json!({"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}),
        json!({"cpu": "60", "memory": "240Gi", "pods": "90", "nvidia.com/gpu": "8"}),
    )
    .await;
    set_summary(
        &control,
        "member2",
        json!({"cpu": "128", "memory": "512Gi", "pods": "220", "nvidia.com/gpu": "8"}),
        json!({"cpu": "10", "memory": "20Gi", "pods": "10"}),
    )
    .await;
    set_summary(
        &control,
        "member3",
        json!({"cpu": "128", "memory": "32Gi", "pods": "220"}),
        json!({}),
    )
    .await;

    apply_all(&control, "customizations.yaml").await;
    let ctx = running.context.clone();
    eventually("both customizations in the chain", || async {
        let chain = ctx.interpreters.get();
        for kind in ["StreamJob", "TrainJob"] {
            chain.resolve_kind(
                "example.dev/v1",
                kind,
                flotilla_core::interpreter::Operation::InterpretComponent,
            )?;
        }
        Some(())
    })
    .await;
    apply_all(&control, "propagationpolicy.yaml").await;
    apply_all(&control, "jobs.yaml").await;

    let stream = whole("member2", &[("jobmanager", 1), ("taskmanager", 4)]);
    let train = whole("member2", &[("master", 1), ("worker", 3)]);
    eventually("both jobs whole on member2", || async {
        (targets(&control, "clickstream-streamjob").await? == stream
            && targets(&control, "resnet-trainjob").await? == train
            && has_copy(&member[1], "StreamJob", "clickstream").await
            && has_copy(&member[1], "TrainJob", "resnet").await)
            .then_some(())
    })
    .await;
    for m in [&member[0], &member[2]] {
        assert!(!has_copy(m, "StreamJob", "clickstream").await);
        assert!(!has_copy(m, "TrainJob", "resnet").await);
    }

    // member3 grows (memory and GPUs), then member2 is tainted NoExecute: both fail over whole.
    set_summary(
        &control,
        "member3",
        json!({"cpu": "128", "memory": "512Gi", "pods": "220", "nvidia.com/gpu": "4"}),
        json!({}),
    )
    .await;
    clusters_api(&control)
        .patch(
            "member2",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}}),
            ),
        )
        .await
        .expect("taint");
    let stream = whole("member3", &[("jobmanager", 1), ("taskmanager", 4)]);
    let train = whole("member3", &[("master", 1), ("worker", 3)]);
    eventually("both jobs whole on member3", || async {
        (targets(&control, "clickstream-streamjob").await? == stream
            && targets(&control, "resnet-trainjob").await? == train
            && has_copy(&member[2], "StreamJob", "clickstream").await
            && has_copy(&member[2], "TrainJob", "resnet").await)
            .then_some(())
    })
    .await;
    assert!(!has_copy(&member[0], "StreamJob", "clickstream").await);
    drop(running);
}
