use std::sync::Arc;

use flotilla_api::interpreter::Component;
use flotilla_core::error::PluginError;
use flotilla_core::interpreter::{Interpreters, Operation, Replicas, ResourceInterpreter};
use serde_json::{Value, json};

use super::super::chain;
use super::{canonical, count};

fn components(object: &Value) -> Value {
    let c = chain(Vec::new(), Vec::new());
    assert_eq!(
        c.resolve(object, Operation::InterpretComponent)
            .map(|i| i.name()),
        Some(super::NAME)
    );
    serde_json::to_value(c.get_components(object).expect("components")).expect("json")
}

fn error(object: &Value) -> String {
    chain(Vec::new(), Vec::new())
        .get_components(object)
        .expect_err("a fault")
        .to_string()
}

fn pod(cpu: &str, memory: &str) -> Value {
    json!({"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}})
}

#[test]
fn pytorchjob_components_are_master_then_worker_with_their_template_requests() {
    let mut job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bert", "namespace": "ml"},
        "spec": {"pytorchReplicaSpecs": {
            "Worker": {"replicas": "3", "template": {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [{"name": "w", "resources": {"limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 2}}}]}}},
            "Master": {"template": pod("1500m", "2Gi")}}}});
    assert_eq!(
        components(&job),
        json!([
            {"name": "master", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "1500m", "memory": "2Gi"}}},
            {"name": "worker", "replicas": 3, "replicaRequirements": {
                "nodeClaim": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
                "resourceRequest": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}}}
        ])
    );
    // A spec without a template still counts; replicas that are no count are a fault.
    job["spec"]["pytorchReplicaSpecs"] = json!({"Worker": {"replicas": 2}});
    assert_eq!(components(&job), json!([{"name": "worker", "replicas": 2}]));
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(2.5);
    assert!(error(&job).contains("spec.pytorchReplicaSpecs.Worker.replicas"));
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(-1);
    assert!(error(&job).contains("non-negative"));
}

#[test]
fn tfjob_components_follow_karmadas_replica_type_order() {
    let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "t"},
        "spec": {"tfReplicaSpecs": {
            "Evaluator": {"replicas": 1, "template": pod("1", "1Gi")},
            "Worker": {"replicas": 4, "template": pod("2", "4Gi")},
            "PS": {"replicas": 2, "template": pod("500m", "512Mi")}}}});
    let names: Vec<Value> = components(&job)
        .as_array()
        .expect("list")
        .iter()
        .map(|c| json!([c["name"], c["replicas"]]))
        .collect();
    assert_eq!(
        names,
        [
            json!(["ps", 2]),
            json!(["worker", 4]),
            json!(["evaluator", 1])
        ]
    );
}

#[test]
fn mpijob_worker_defaults_to_no_replicas_and_specs_without_template_are_skipped() {
    let job = json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m"},
        "spec": {"mpiReplicaSpecs": {
            "Worker": {"template": pod("8", "32Gi")},
            "Launcher": {"template": pod("250m", "128Mi")},
            "Sidecar": {"replicas": 3}}}});
    assert_eq!(
        components(&job),
        json!([
            {"name": "Launcher", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "250m", "memory": "128Mi"}}},
            {"name": "Worker", "replicas": 0, "replicaRequirements": {"resourceRequest": {"cpu": "8", "memory": "32Gi"}}}
        ])
    );
}

#[test]
fn volcano_tasks_are_gangs_of_min_available_named_by_index_when_unnamed() {
    let mut job = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v"},
        "spec": {"tasks": [
            {"name": "ps", "replicas": 2, "template": pod("1", "1Gi")},
            {"replicas": 8, "minAvailable": 6, "template": {"spec": {"nodeSelector": {"pool": "gpu"}, "containers": []}}}]}});
    assert_eq!(
        components(&job),
        json!([
            {"name": "ps", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "task-1", "replicas": 6, "replicaRequirements": {"nodeClaim": {"nodeSelector": {"pool": "gpu"}}}}
        ])
    );
    job["spec"]["tasks"][0]
        .as_object_mut()
        .expect("task")
        .remove("template");
    assert!(error(&job).contains("spec.tasks[0].template"));
    job["spec"]["tasks"] = json!({"not": "a list"});
    assert!(error(&job).contains("spec.tasks: expected a list"));
    // batch/v1 Job stays with the native interpreter: replicas, no components.
    let batch = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": pod("1", "1Gi")}});
    let c = chain(Vec::new(), Vec::new());
    assert!(c.resolve(&batch, Operation::InterpretComponent).is_none());
}

#[test]
fn ray_head_and_worker_groups_in_a_cluster_and_a_job() {
    let cluster = json!({"headGroupSpec": {"template": pod("2", "8Gi")},
        "workerGroupSpecs": [
            {"groupName": "gpu", "replicas": 4, "template": pod("8", "32Gi")},
            {"replicas": 2},
            {"groupName": "", "template": pod("1", "1Gi")}]});
    let want = json!([
        {"name": "ray-head", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "2", "memory": "8Gi"}}},
        {"name": "gpu", "replicas": 4, "replicaRequirements": {"resourceRequest": {"cpu": "8", "memory": "32Gi"}}},
        {"name": "worker-2", "replicas": 2},
        {"name": "worker-3", "replicas": 0, "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "1Gi"}}}
    ]);
    let rc = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"}, "spec": cluster});
    assert_eq!(components(&rc), want);
    let rj = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
        "spec": {"entrypoint": "python x.py", "rayClusterSpec": cluster}});
    assert_eq!(components(&rj), want);
    let no_cluster = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"}, "spec": {"clusterSelector": {"a": "b"}}});
    assert_eq!(components(&no_cluster), json!([]));
    let mut bad = rc.clone();
    bad["spec"]["workerGroupSpecs"][0]["replicas"] = json!("4");
    assert!(error(&bad).contains("workerGroupSpecs[0].replicas"));
}

fn flink() -> Value {
    json!({"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "metadata": {"name": "f", "namespace": "stream"},
        "spec": {"flinkConfiguration": {"taskmanager.numberOfTaskSlots": "4"}, "job": {"parallelism": 10},
            "jobManager": {"resource": {"cpu": 0.5, "memory": "2048m"}},
            "taskManager": {"resource": {"cpu": 2, "memory": "4Gi"}},
            "podTemplate": {"spec": {"nodeSelector": {"disk": "ssd"}, "priorityClassName": "batch",
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}}}})
}

#[test]
fn flink_components_count_taskmanagers_from_parallelism_and_slots() {
    let mut f = flink();
    // ⌈10 / 4⌉ = 3 TaskManagers; memory keeps its value and loses its suffix, as Karmada's
    // getResourceQuantity leaves it; the Flink rule takes no affinity.
    let claim = json!({"nodeSelector": {"disk": "ssd"}});
    assert_eq!(
        components(&f),
        json!([
            {"name": "jobmanager", "replicas": 1, "replicaRequirements": {"nodeClaim": claim, "priorityClassName": "batch",
                "resourceRequest": {"cpu": "500m", "memory": "2048m"}}},
            {"name": "taskmanager", "replicas": 3, "replicaRequirements": {"nodeClaim": claim, "priorityClassName": "batch",
                "resourceRequest": {"cpu": "2", "memory": "4294967296"}}}
        ])
    );
    f["spec"]["taskManager"]["replicas"] = json!(5);
    f["spec"]["jobManager"]["replicas"] = json!("2");
    let c = components(&f);
    assert_eq!(
        (&c[0]["replicas"], &c[1]["replicas"]),
        (&json!(2), &json!(5))
    );
    // Zero slots: one TaskManager instead of a division by zero.
    let mut f = flink();
    f["spec"]["flinkConfiguration"]["taskmanager.numberOfTaskSlots"] = json!("0");
    assert_eq!(components(&f)[1]["replicas"], json!(1));
    f["spec"]["jobManager"]["resource"]["memory"] = json!(2048);
    assert!(error(&f).contains("spec.jobManager.resource.memory"));
}

#[test]
fn flink_replicas_add_both_managers_with_the_larger_request() {
    let c = chain(Vec::new(), Vec::new());
    let f = flink();
    assert_eq!(
        c.resolve(&f, Operation::InterpretReplica).map(|i| i.name()),
        Some(super::NAME)
    );
    let Replicas {
        replicas,
        requirements,
    } = c.get_replicas(&f).expect("replicas");
    assert_eq!(replicas, 4);
    assert_eq!(
        serde_json::to_value(requirements).expect("json"),
        json!({"nodeClaim": {"nodeSelector": {"disk": "ssd"}}, "namespace": "stream", "priorityClassName": "batch",
            "resourceRequest": {"cpu": "2", "memory": "4Gi"}})
    );
}

fn spark(kind: &str) -> Value {
    json!({"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "metadata": {"name": "s"},
        "spec": {"type": kind,
            "driver": {"cores": 1, "memory": "512m", "tolerations": [{"key": "spark", "operator": "Exists"}]},
            "executor": {"instances": 2, "cores": 2, "memory": "4g", "gpu": {"name": "nvidia.com/gpu", "quantity": 1},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["spark"]}]}]}}}},
            "dynamicAllocation": {"enabled": true, "initialExecutors": 3, "minExecutors": 1}}})
}

#[test]
fn spark_driver_and_executors_request_memory_plus_overhead() {
    // Scala: overhead max(10 %, 384Mi): driver 512Mi + 384Mi, executor 4g + 409.6Mi.
    let s = components(&spark("Scala"));
    assert_eq!(
        s[0],
        json!({"name": "driver", "replicas": 1, "replicaRequirements": {
            "nodeClaim": {"tolerations": [{"key": "spark", "operator": "Exists"}]},
            "resourceRequest": {"cpu": "1", "memory": "896Mi"}}})
    );
    assert_eq!(
        s[1]["replicas"],
        json!(3),
        "initialExecutors raise the count"
    );
    assert_eq!(
        s[1]["replicaRequirements"]["resourceRequest"],
        json!({"cpu": "2", "memory": "4724464025600m", "nvidia.com/gpu": "1"})
    );
    assert!(s[1]["replicaRequirements"]["nodeClaim"]["hardNodeAffinity"].is_object());
    // Python: 40 %; an explicit overhead replaces the computed one.
    let mut p = spark("Python");
    p["spec"]["executor"]["memoryOverhead"] = json!("1g");
    let s = components(&p);
    assert_eq!(
        s[0]["replicaRequirements"]["resourceRequest"]["memory"],
        json!("896Mi")
    );
    assert_eq!(
        s[1]["replicaRequirements"]["resourceRequest"]["memory"],
        json!("5Gi")
    );
    p["spec"]["driver"]["memory"] = json!("512Mi");
    assert!(error(&p).contains("spec.driver.memory"));
    p["spec"].as_object_mut().expect("spec").remove("type");
    assert!(error(&p).contains("spec.type"));
}

#[test]
fn a_users_customization_wins_and_other_kinds_are_not_ours() {
    struct Mine;
    impl ResourceInterpreter for Mine {
        fn name(&self) -> &str {
            "mine"
        }
        fn hook_enabled(&self, _: &str, kind: &str, op: Operation) -> bool {
            kind == "PyTorchJob" && op == Operation::InterpretComponent
        }
        fn get_components(&self, _: &Value) -> Result<Vec<Component>, PluginError> {
            Ok(vec![Component {
                name: "all".into(),
                replicas: 9,
                replica_requirements: None,
            }])
        }
    }
    let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}}});
    let c: Interpreters = chain(
        vec![Arc::new(Mine) as Arc<dyn ResourceInterpreter>],
        Vec::new(),
    );
    assert_eq!(c.get_components(&job).expect("components")[0].name, "all");
    // Another version of the kind is not Karmada's customization target.
    let v2 =
        json!({"apiVersion": "kubeflow.org/v2", "kind": "PyTorchJob", "metadata": {"name": "p"}});
    assert!(
        chain(Vec::new(), Vec::new())
            .resolve(&v2, Operation::InterpretComponent)
            .is_none()
    );
}

#[test]
fn quantities_print_canonically_and_hostile_values_are_refused() {
    for (text, want) in [
        ("1", "1"),
        ("0.5", "500m"),
        ("1.0", "1"),
        ("2048m", "2048m"),
        ("1408.000000Mi", "1408Mi"),
        ("1433.600000Mi", "1503238553600m"),
        ("1536Mi", "1536Mi"),
        ("1024", "1024"),
        ("512", "512"),
        ("1e3", "1e3"),
        ("2000", "2k"),
        ("0", "0"),
    ] {
        assert_eq!(canonical(text).expect(text), want, "{text}");
    }
    assert!(canonical("-1").is_err());
    assert!(canonical("lots").is_err());
    assert!(count(f64::NAN, "x").is_err());
    assert!(count(3e9, "x").is_err());
    assert_eq!(count(7.0, "x").expect("count"), 7);

    let many: Vec<Value> = (0..=super::MAX_COMPONENTS)
        .map(|i| json!({"name": format!("t{i}"), "template": pod("1", "1Gi")}))
        .collect();
    let job = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v"}, "spec": {"tasks": many}});
    assert!(error(&job).contains("more than"));
}
