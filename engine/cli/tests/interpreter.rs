//! End to end, in process: a custom workload kind (examples/interpreter: a `Widget` CRD) taught
//! to the control plane by a `ResourceInterpreterCustomization` in CEL, on the embedded API
//! server with two simulated members and every controller. Its replicas are divided Weighted
//! (each member's copy revised through ReviseReplica), the members' status is aggregated back
//! into the template, and a member copy the customization calls unhealthy fails over.

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

fn example(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/interpreter")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("example reads");
    serde_yaml::from_str(&text).expect("example parses")
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

async fn apply(client: &Client, obj: &Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .expect("name");
    api_for(client, obj)
        .patch(
            name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(obj),
        )
        .await
        .expect("apply");
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

fn widgets(c: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        c.clone(),
        "default",
        &api_resource("example.dev/v1", "Widget"),
    )
}

/// `spec.replicas` of the member's copy (`None` while it does not exist).
async fn member_replicas(c: &Client) -> Option<i64> {
    let w = widgets(c).get_opt("gadget").await.ok()??;
    w.data.pointer("/spec/replicas").and_then(Value::as_i64)
}

/// The member reports its copy's status (what a Widget controller there would do).
async fn report(c: &Client, ready: bool) {
    let Some(w) = widgets(c).get_opt("gadget").await.expect("get") else {
        panic!("no member copy to report on");
    };
    let replicas = w
        .data
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let status =
        json!({"status": {"ready": ready, "readyReplicas": if ready { replicas } else { 0 }}});
    widgets(c)
        .patch_status("gadget", &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("status");
}

async fn binding(control: &Client) -> Option<DynamicObject> {
    let rbs: Api<DynamicObject> = Api::namespaced_with(
        control.clone(),
        "default",
        &api_resource("work.karmada.io/v1alpha2", "ResourceBinding"),
    );
    rbs.get_opt("gadget-widget").await.ok().flatten()
}

fn split(rb: &DynamicObject) -> Vec<(String, i64)> {
    rb.data
        .pointer("/spec/clusters")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_owned(),
                        c["replicas"].as_i64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn health(rb: &DynamicObject, cluster: &str) -> String {
    rb.data
        .pointer("/status/aggregatedStatus")
        .and_then(Value::as_array)
        .and_then(|items| items.iter().find(|i| i["clusterName"] == cluster))
        .and_then(|i| i["health"].as_str())
        .unwrap_or("")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customized_crd_is_divided_aggregated_and_failed_over() {
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
    // The kind exists before the controllers watch it.
    apply(&control, &example("crd.yaml")).await;
    let mut settings = Settings {
        ready_delay: Duration::from_millis(100),
        // No resync within the test: member Widgets are watched from their first apply on, so
        // their status reaches the template through the watch alone.
        resync: Duration::from_secs(3600),
        rule_backends: RuleBackends(vec![Arc::new(flotilla_cel::CelRuleBackend::default())]),
        ..Settings::default()
    };
    settings
        .template_kinds
        .push(("example.dev/v1".into(), "Widget".into()));
    let running = flotilla_controller::start_embedded(
        server.router(),
        flotilla_controller::Embedded {
            members: 2,
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    let member: Vec<Client> = members::names(2)
        .iter()
        .map(|n| client::in_process(router.clone(), Some(n), None))
        .collect();

    apply(&control, &example("customization.yaml")).await;
    let ctx = running.context.clone();
    eventually("the customization in the chain", || async {
        let chain = ctx.interpreters.get();
        let r = chain.resolve_kind(
            "example.dev/v1",
            "Widget",
            flotilla_core::interpreter::Operation::InterpretReplica,
        )?;
        (r.name() == "widgets").then_some(())
    })
    .await;
    apply(&control, &example("propagationpolicy.yaml")).await;
    apply(&control, &example("widget.yaml")).await;

    // Divided Weighted 1:3, each copy revised to its share.
    eventually("member copies with 1 and 3 replicas", || async {
        let rb = binding(&control).await?;
        let want = vec![("member1".to_owned(), 1), ("member2".to_owned(), 3)];
        (rb.data.pointer("/spec/replicas")?.as_i64()? == 4
            && split(&rb) == want
            && member_replicas(&member[0]).await? == 1
            && member_replicas(&member[1]).await? == 3)
            .then_some(())
    })
    .await;

    // The members report; the template gets the sum, both copies are healthy.
    report(&member[0], true).await;
    report(&member[1], true).await;
    eventually("the aggregated template status", || async {
        let t = widgets(&control).get_opt("gadget").await.ok()??;
        let s = t.data.get("status")?;
        (s["readyReplicas"] == 4 && s["clusters"] == 2).then_some(())
    })
    .await;
    eventually("both copies healthy", || async {
        let rb = binding(&control).await?;
        (health(&rb, "member1") == "Healthy" && health(&rb, "member2") == "Healthy").then_some(())
    })
    .await;

    // Application failover, then member1's copy turns unhealthy by the customization's rule.
    // Karmada fails applications over only for policies that propagate dependencies.
    let mut pp = example("propagationpolicy.yaml");
    pp["spec"]["propagateDeps"] = json!(true);
    pp["spec"]["failover"] = json!({"application": {"decisionConditions": {"tolerationSeconds": 1}, "purgeMode": "Directly"}});
    apply(&control, &pp).await;
    eventually("the binding has the failover behaviour", || async {
        binding(&control)
            .await?
            .data
            .pointer("/spec/failover/application")
            .map(|_| ())
    })
    .await;
    report(&member[0], false).await;
    eventually("member1 unhealthy", || async {
        (health(&binding(&control).await?, "member1") == "Unhealthy").then_some(())
    })
    .await;
    eventually("all 4 replicas moved to member2", || async {
        let rb = binding(&control).await?;
        (split(&rb) == vec![("member2".to_owned(), 4)] && member_replicas(&member[1]).await? == 4)
            .then_some(())
    })
    .await;
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customization_change_reinterprets_the_templates_of_its_kind() {
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
    apply(&control, &example("crd.yaml")).await;
    let mut settings = Settings {
        ready_delay: Duration::from_millis(100),
        // Long: only a customization change may re-check the template in time.
        resync: Duration::from_secs(3600),
        rule_backends: RuleBackends(vec![Arc::new(flotilla_cel::CelRuleBackend::default())]),
        ..Settings::default()
    };
    settings
        .template_kinds
        .push(("example.dev/v1".into(), "Widget".into()));
    let running = flotilla_controller::start_embedded(
        server.router(),
        flotilla_controller::Embedded {
            members: 2,
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    let member: Vec<Client> = members::names(2)
        .iter()
        .map(|n| client::in_process(router.clone(), Some(n), None))
        .collect();

    // Before any customization a Widget is opaque: bound without replicas, copied whole.
    apply(&control, &example("propagationpolicy.yaml")).await;
    apply(&control, &example("widget.yaml")).await;
    eventually("an opaque Widget bound without replicas", || async {
        let rb = binding(&control).await?;
        (rb.data
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
            && member_replicas(&member[0]).await? == 4
            && member_replicas(&member[1]).await? == 4)
            .then_some(())
    })
    .await;

    // Created: the existing template is interpreted again and divided 1:3.
    let mut ric = example("customization.yaml");
    apply(&control, &ric).await;
    eventually(
        "the Widget divided after the customization's creation",
        || async {
            let rb = binding(&control).await?;
            (rb.data.pointer("/spec/replicas")?.as_i64()? == 4
                && split(&rb) == vec![("member1".to_owned(), 1), ("member2".to_owned(), 3)]
                && member_replicas(&member[0]).await? == 1
                && member_replicas(&member[1]).await? == 3)
                .then_some(())
        },
    )
    .await;

    // Updated: twice the replicas.
    ric["spec"]["customizations"]["replicaResource"]["cel"]["replicas"] =
        json!("object.spec.?replicas.orValue(1) * 2");
    apply(&control, &ric).await;
    eventually("the Widget re-divided after the update", || async {
        let rb = binding(&control).await?;
        (rb.data.pointer("/spec/replicas")?.as_i64()? == 8
            && split(&rb) == vec![("member1".to_owned(), 2), ("member2".to_owned(), 6)]
            && member_replicas(&member[1]).await? == 6)
            .then_some(())
    })
    .await;

    // Deleted: opaque again.
    Api::<DynamicObject>::all_with(
        control.clone(),
        &api_resource(
            "config.karmada.io/v1alpha1",
            "ResourceInterpreterCustomization",
        ),
    )
    .delete("widgets", &Default::default())
    .await
    .expect("delete the customization");
    eventually("the Widget opaque after the deletion", || async {
        let rb = binding(&control).await?;
        (rb.data
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
            && member_replicas(&member[0]).await? == 4
            && member_replicas(&member[1]).await? == 4)
            .then_some(())
    })
    .await;
    drop(running);
}

/// The embedded server with `Widget` templates, two simulated members and every controller.
async fn start(
    resync: Duration,
) -> (
    tempfile::TempDir,
    Client,
    flotilla_controller::Running,
    Vec<Client>,
) {
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
    apply(&control, &example("crd.yaml")).await;
    let mut settings = Settings {
        ready_delay: Duration::from_millis(100),
        resync,
        rule_backends: RuleBackends(vec![Arc::new(flotilla_cel::CelRuleBackend::default())]),
        ..Settings::default()
    };
    settings
        .template_kinds
        .push(("example.dev/v1".into(), "Widget".into()));
    let running = flotilla_controller::start_embedded(
        server.router(),
        flotilla_controller::Embedded {
            members: 2,
            settings,
            ..Default::default()
        },
    )
    .await
    .expect("controllers start");
    let member: Vec<Client> = members::names(2)
        .iter()
        .map(|n| client::in_process(router.clone(), Some(n), None))
        .collect();
    (dir, control, running, member)
}

/// The `reason: message` of the Events in `namespace` about Work `name`.
async fn work_events(c: &Client, namespace: &str, name: &str) -> Vec<String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(c.clone(), namespace, &api_resource("v1", "Event"));
    let Ok(list) = api.list(&Default::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter(|e| {
            e.data["involvedObject"]["kind"] == "Work" && e.data["involvedObject"]["name"] == name
        })
        .map(|e| {
            format!(
                "{} {}: {}",
                e.data["type"].as_str().unwrap_or(""),
                e.data["reason"].as_str().unwrap_or(""),
                e.data["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interpreter_faults_on_a_member_copy_are_warning_events_on_its_work() {
    let (_dir, control, running, _member) = start(Duration::from_millis(500)).await;
    // Rules that fail at run time on a Widget (`spec.size` is "large", not a number).
    let mut ric = example("customization.yaml");
    let rules = &mut ric["spec"]["customizations"];
    rules["statusReflection"]["cel"]["status"] = json!("{'size': int(observedObject.spec.size)}");
    rules["healthInterpretation"]["cel"]["healthy"] = json!("int(observedObject.spec.size) > 0");
    apply(&control, &ric).await;
    let ctx = running.context.clone();
    eventually("the customization in the chain", || async {
        let chain = ctx.interpreters.get();
        let r = chain.resolve_kind(
            "example.dev/v1",
            "Widget",
            flotilla_core::interpreter::Operation::InterpretHealth,
        )?;
        (r.name() == "widgets").then_some(())
    })
    .await;
    apply(&control, &example("propagationpolicy.yaml")).await;
    apply(&control, &example("widget.yaml")).await;
    let work = flotilla_core::render::work_name("Widget", "gadget", "default");
    let work = work.as_str();
    let (health_event, reflect) = eventually("both faults reported on member1's Work", || async {
        let events = work_events(&control, "karmada-es-member1", work).await;
        let find = |reason: &str| {
            events
                .iter()
                .find(|e| e.starts_with(&format!("Warning {reason}: ")))
                .cloned()
        };
        Some((find("InterpretHealthFailed")?, find("ReflectStatusFailed")?))
    })
    .await;
    assert!(
        health_event.contains("Interpret health of object(Widget/default/gadget) failed, err: ")
            && health_event.contains("widgets"),
        "{health_event}"
    );
    assert!(
        reflect.contains("Reflect status for object(Widget/default/gadget) failed, err: "),
        "{reflect}"
    );
    // The copy's health is Unknown, as Karmada's work status controller records a fault.
    eventually("member1's copy Unknown", || async {
        (health(&binding(&control).await?, "member1") == "Unknown").then_some(())
    })
    .await;
    drop(running);
}
