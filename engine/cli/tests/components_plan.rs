//! `flotilla plan` with multi-component workloads (examples/components): a StreamJob (Flink-like)
//! and a TrainJob (PyTorchJob-like), interpreted by CEL `componentResource` rules, land whole in
//! the one cluster that fits every component, and fail over whole when that cluster is tainted.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn plan(files: &[&Path]) -> Value {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"));
    cmd.current_dir(root())
        .args(["plan", "-o", "json", "--now", "2026-06-01T00:00:00Z"]);
    for f in files {
        cmd.arg("-f").arg(f);
    }
    let o = cmd.output().expect("run flotilla");
    assert!(
        o.status.success(),
        "plan failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("plan prints JSON")
}

fn example(file: &str) -> PathBuf {
    root().join("examples/components").join(file)
}

fn docs(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).expect("example reads");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("example parses"))
        .collect()
}

fn bindings(list: &Value) -> Vec<&Value> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["kind"] == "ResourceBinding")
        .collect()
}

fn binding<'a>(list: &'a Value, name: &str) -> &'a Value {
    bindings(list)
        .into_iter()
        .find(|b| b["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no binding {name}"))
}

fn work_clusters(list: &Value, template: &str) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| {
            i["kind"] == "Work"
                && i.pointer("/spec/workload/manifests/0/metadata/name") == Some(&json!(template))
        })
        .map(|w| w["metadata"]["namespace"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn write_docs(path: &Path, docs: &[Value]) {
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}\n", serde_json::to_string(d).expect("json")))
        .collect();
    std::fs::write(path, text).expect("write");
}

const FILES: [&str; 5] = [
    "crds.yaml",
    "customizations.yaml",
    "propagationpolicy.yaml",
    "jobs.yaml",
    "clusters.yaml",
];

#[test]
fn components_land_whole_in_the_one_cluster_that_fits_and_fail_over_whole() {
    let files: Vec<PathBuf> = FILES.iter().map(|f| example(f)).collect();
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let list = plan(&refs);

    let stream = binding(&list, "clickstream-streamjob");
    assert_eq!(
        stream["spec"]["components"],
        json!([
            {"name": "jobmanager", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "2", "memory": "4Gi"}}},
            {"name": "taskmanager", "replicas": 4, "replicaRequirements": {"resourceRequest": {"cpu": "4", "memory": "8Gi"}}}
        ])
    );
    assert!(stream["spec"].get("replicas").is_none(), "{stream}");
    // member1 is nearly full, member3 lacks the memory for a whole set: member2 only.
    assert_eq!(
        stream["spec"]["clusters"],
        json!([{"name": "member2", "components": [{"name": "jobmanager", "replicas": 1}, {"name": "taskmanager", "replicas": 4}]}])
    );
    let train = binding(&list, "resnet-trainjob");
    assert_eq!(
        train["spec"]["clusters"],
        json!([{"name": "member2", "components": [{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 3}]}])
    );
    // The whole template goes to member2's execution namespace, nowhere else.
    assert_eq!(work_clusters(&list, "clickstream"), ["karmada-es-member2"]);
    assert_eq!(work_clusters(&list, "resnet"), ["karmada-es-member2"]);

    // member2 goes NoExecute-tainted; member3 gets memory and GPUs. The previous bindings come
    // back as input: both workloads are evicted from member2 and rescheduled whole to member3.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut clusters = docs(&example("clusters.yaml"));
    for c in &mut clusters {
        match c["metadata"]["name"].as_str() {
            Some("member2") => {
                c["spec"]["taints"] = json!([{"key": "maintenance", "effect": "NoExecute", "timeAdded": "2026-05-31T00:00:00Z"}]);
            }
            Some("member3") => {
                c["status"]["resourceSummary"]["allocatable"] =
                    json!({"cpu": "128", "memory": "512Gi", "pods": "220", "nvidia.com/gpu": "4"});
            }
            _ => {}
        }
    }
    let clusters_file = dir.path().join("clusters.yaml");
    write_docs(&clusters_file, &clusters);
    let previous: Vec<Value> = bindings(&list).into_iter().cloned().collect();
    let bindings_file = dir.path().join("bindings.yaml");
    write_docs(&bindings_file, &previous);
    let mut refs: Vec<&Path> = files[..4].iter().map(PathBuf::as_path).collect();
    refs.push(&clusters_file);
    refs.push(&bindings_file);
    let after = plan(&refs);
    for (name, template, comps) in [
        (
            "clickstream-streamjob",
            "clickstream",
            json!([{"name": "jobmanager", "replicas": 1}, {"name": "taskmanager", "replicas": 4}]),
        ),
        (
            "resnet-trainjob",
            "resnet",
            json!([{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 3}]),
        ),
    ] {
        let b = binding(&after, name);
        assert_eq!(
            b["spec"]["clusters"],
            json!([{"name": "member3", "components": comps}]),
            "{name}: {b}"
        );
        let tasks = b["spec"]["gracefulEvictionTasks"]
            .as_array()
            .expect("eviction task");
        assert!(
            tasks.iter().any(|t| t["fromCluster"] == "member2"),
            "{name}: {tasks:?}"
        );
        assert!(work_clusters(&after, template).contains(&"karmada-es-member3".to_owned()));
    }

    // Without the exactly-one-cluster constraint Karmada does not place components whole: the
    // workload goes everywhere, like a non-workload.
    let mut pp = docs(&example("propagationpolicy.yaml"));
    pp[0]["spec"]["placement"]
        .as_object_mut()
        .expect("placement")
        .remove("spreadConstraints");
    let pp_file = dir.path().join("pp.yaml");
    write_docs(&pp_file, &pp);
    let refs: Vec<&Path> = vec![&files[0], &files[1], &pp_file, &files[3], &files[4]];
    let spread = plan(&refs);
    let mut names: Vec<&str> = binding(&spread, "clickstream-streamjob")["spec"]["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or(""))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["member1", "member2", "member3"]);
}

/// A cluster of our own for the PyTorchJob test, serving kubeflow.org/v1 PyTorchJobs, with
/// `allocatable` and `allocated` resource summaries.
fn pytorch_cluster(name: &str, allocatable: Value, allocated: Value) -> Value {
    json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Push", "apiEndpoint": format!("https://{name}.example:6443")},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady", "message": "ready",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "apiEnablements": [{"groupVersion": "kubeflow.org/v1", "resources": [{"name": "pytorchjobs", "kind": "PyTorchJob"}]}],
            "resourceSummary": {"allocatable": allocatable, "allocated": allocated}
        }
    })
}

#[test]
fn a_pytorchjob_without_customization_gets_built_in_components_and_lands_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pytorchjobs.kubeflow.org"},
        "spec": {"group": "kubeflow.org", "scope": "Namespaced",
            "names": {"kind": "PyTorchJob", "listKind": "PyTorchJobList", "plural": "pytorchjobs", "singular": "pytorchjob"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let container = |cpu: &str, memory: &str, gpus: Option<u32>| {
        let mut limits = json!({"cpu": cpu, "memory": memory});
        if let Some(g) = gpus {
            limits["nvidia.com/gpu"] = json!(g);
        }
        json!({"spec": {"containers": [{"name": "pytorch", "image": "trainer:1", "resources": {"limits": limits}}]}})
    };
    // One set: 1 × (2 CPU, 8Gi) + 3 × (8 CPU, 32Gi, 1 GPU) = 26 CPU, 104Gi, 3 GPUs.
    let job = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "bert", "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": container("2", "8Gi", None)},
            "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": container("8", "32Gi", Some(1))}
        }}
    });
    let pp = json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "training", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
            "placement": {"spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}],
                "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}}
    });
    // big: no GPUs; busy: GPUs but only 2 free; fits: room for the whole set.
    let clusters = [
        pytorch_cluster(
            "big",
            json!({"cpu": "256", "memory": "1Ti", "pods": "220"}),
            json!({}),
        ),
        pytorch_cluster(
            "busy",
            json!({"cpu": "128", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}),
            json!({"cpu": "8", "memory": "16Gi", "pods": "6", "nvidia.com/gpu": "6"}),
        ),
        pytorch_cluster(
            "fits",
            json!({"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"}),
            json!({"cpu": "30", "memory": "100Gi", "pods": "20"}),
        ),
    ];
    let file = dir.path().join("training.yaml");
    let mut all = vec![crd, pp, job];
    all.extend(clusters);
    write_docs(&file, &all);

    let list = plan(&[&file]);
    let b = binding(&list, "bert-pytorchjob");
    assert_eq!(
        b["spec"]["components"],
        json!([
            {"name": "master", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "2", "memory": "8Gi"}}},
            {"name": "worker", "replicas": 3, "replicaRequirements": {"resourceRequest": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}}}
        ]),
        "{b}"
    );
    assert_eq!(
        b["spec"]["clusters"],
        json!([{"name": "fits", "components": [{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 3}]}]),
        "{b}"
    );
    assert_eq!(work_clusters(&list, "bert"), ["karmada-es-fits"]);

    // A user's customization for the kind wins over the built-in: one component of 4 replicas of
    // 8 CPUs and a GPU, which only `fits` (4 GPUs free) can hold.
    let ric = json!({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "pytorchjobs"},
        "spec": {"target": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"},
            "customizations": {"componentResource": {"luaScript":
                "function GetComponents(obj)\n  return {{name = 'all', replicas = 4, replicaRequirements = {resourceRequest = {cpu = '8', ['nvidia.com/gpu'] = '1'}}}}\nend\n"}}}
    });
    let ric_file = dir.path().join("ric.yaml");
    write_docs(&ric_file, &[ric]);
    let list = plan(&[&file, &ric_file]);
    let b = binding(&list, "bert-pytorchjob");
    assert_eq!(
        b["spec"]["components"],
        json!([{"name": "all", "replicas": 4, "replicaRequirements": {"resourceRequest": {"cpu": "8", "nvidia.com/gpu": "1"}}}]),
        "{b}"
    );
    let placed: Vec<&Value> = b["spec"]["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(placed, [&json!("fits")], "{b}");
    // One component: the target stays bare, as in Karmada, whose AssignReplicas records a
    // target's components only for more than one (`len(spec.Components) > 1`,
    // pkg/scheduler/core/common.go); without replicas or replica requirements (the
    // customization has no replicaResource) nothing divides replicas either.
    assert_eq!(b["spec"]["clusters"], json!([{"name": "fits"}]), "{b}");
}
