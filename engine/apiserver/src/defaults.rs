//! Defaulting of the built-in workloads, as kube-apiserver defaults them when it decodes a
//! create or an update (`pkg/apis/apps/v1/defaults.go`, `pkg/apis/batch/v1/defaults.go`,
//! `pkg/apis/core/v1/defaults.go`): what a client reads back is what a real cluster stores, so
//! diffs, `kubectl apply` and copies on member clusters agree with kube-apiserver's.
//!
//! Only fields the client left unset (absent or `null`) are filled.

use serde_json::{Map, Value, json};

use crate::registry::Resource;

/// Set `obj[key]` to `value` when it is absent or null; returns the field.
fn default<'a>(obj: &'a mut Map<String, Value>, key: &str, value: Value) -> &'a mut Value {
    let slot = obj.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = value;
    }
    slot
}

/// The object at `obj[key]`, created (`{}`) when absent or null; `None` when it holds
/// something else (left for validation to refuse).
fn object<'a>(obj: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    default(obj, key, json!({})).as_object_mut()
}

/// The object at `obj[key]` when it already is one.
fn existing<'a>(obj: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    obj.get_mut(key).and_then(Value::as_object_mut)
}

fn each_object<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    obj.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Apply kube-apiserver's defaults to `obj`, a `res` being created or updated. Kinds without
/// defaults here are left alone.
pub fn apply(res: &Resource, obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    match (res.group, res.version, res.kind) {
        ("apps", "v1", "Deployment") => deployment(root),
        ("apps", "v1", "StatefulSet") => stateful_set(root),
        ("apps", "v1", "DaemonSet") => daemon_set(root),
        ("apps", "v1", "ReplicaSet") => replica_set(root),
        ("batch", "v1", "Job") => job(root),
        ("batch", "v1", "CronJob") => cron_job(root),
        ("scheduling.k8s.io", "v1", "PriorityClass") => {
            root.entry("preemptionPolicy")
                .or_insert_with(|| Value::from("PreemptLowerPriority"));
        }
        _ => {}
    }
}

fn template(spec: &mut Map<String, Value>) {
    if let Some(pod) = existing(spec, "template").and_then(|t| existing(t, "spec")) {
        pod_spec(pod);
    }
}

fn deployment(root: &mut Map<String, Value>) {
    let Some(spec) = existing(root, "spec") else {
        return;
    };
    default(spec, "replicas", json!(1));
    if let Some(strategy) = object(spec, "strategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = object(strategy, "rollingUpdate")
        {
            default(ru, "maxUnavailable", json!("25%"));
            default(ru, "maxSurge", json!("25%"));
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    template(spec);
}

fn stateful_set(root: &mut Map<String, Value>) {
    let Some(spec) = existing(root, "spec") else {
        return;
    };
    default(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(strategy) = object(spec, "updateStrategy") {
        // rollingUpdate is created only along with a defaulted type; a client's explicit
        // RollingUpdate without it keeps it unset.
        if strategy.get("type").is_none_or(Value::is_null) {
            strategy.insert("type".into(), json!("RollingUpdate"));
            object(strategy, "rollingUpdate");
        }
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = existing(strategy, "rollingUpdate")
        {
            default(ru, "partition", json!(0));
        }
    }
    if let Some(policy) = object(spec, "persistentVolumeClaimRetentionPolicy") {
        default(policy, "whenDeleted", json!("Retain"));
        default(policy, "whenScaled", json!("Retain"));
    }
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
    for pvc in each_object(spec, "volumeClaimTemplates") {
        if let Some(pvc_spec) = existing(pvc, "spec") {
            default(pvc_spec, "volumeMode", json!("Filesystem"));
        }
        if let Some(status) = object(pvc, "status") {
            default(status, "phase", json!("Pending"));
        }
    }
    template(spec);
}

fn daemon_set(root: &mut Map<String, Value>) {
    let Some(spec) = existing(root, "spec") else {
        return;
    };
    if let Some(strategy) = object(spec, "updateStrategy") {
        default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = object(strategy, "rollingUpdate")
        {
            default(ru, "maxUnavailable", json!(1));
            default(ru, "maxSurge", json!(0));
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
    template(spec);
}

fn replica_set(root: &mut Map<String, Value>) {
    let Some(spec) = existing(root, "spec") else {
        return;
    };
    default(spec, "replicas", json!(1));
    template(spec);
}

fn job(root: &mut Map<String, Value>) {
    let Some(spec) = existing(root, "spec") else {
        return;
    };
    job_spec(spec);
    // A Job without labels takes its pod template's.
    let template_labels = spec
        .get("template")
        .and_then(|t| t.pointer("/metadata/labels"))
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = template_labels
        && let Some(meta) = object(root, "metadata")
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), labels);
    }
}

fn job_spec(spec: &mut Map<String, Value>) {
    let unset = |spec: &Map<String, Value>, k: &str| spec.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default(spec, "parallelism", json!(1));
    let per_index = !unset(spec, "backoffLimitPerIndex");
    default(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    default(spec, "completionMode", json!("NonIndexed"));
    default(spec, "suspend", json!(false));
    let replacement = if unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default(spec, "podReplacementPolicy", json!(replacement));
    template(spec);
}

fn cron_job(root: &mut Map<String, Value>) {
    let Some(spec) = existing(root, "spec") else {
        return;
    };
    default(spec, "concurrencyPolicy", json!("Allow"));
    default(spec, "suspend", json!(false));
    default(spec, "successfulJobsHistoryLimit", json!(3));
    default(spec, "failedJobsHistoryLimit", json!(1));
    // The job template's spec gets no Job defaults (the Jobs made from it do), only its pod
    // template's.
    if let Some(job) = existing(spec, "jobTemplate").and_then(|t| existing(t, "spec")) {
        template(job);
    }
}

/// `SetDefaults_PodSpec` and what it reaches: containers, ports, probes, env, volumes.
pub fn pod_spec(pod: &mut Map<String, Value>) {
    default(pod, "dnsPolicy", json!("ClusterFirst"));
    default(pod, "restartPolicy", json!("Always"));
    default(pod, "terminationGracePeriodSeconds", json!(30));
    default(pod, "securityContext", json!({}));
    default(pod, "schedulerName", json!("default-scheduler"));
    for key in ["initContainers", "containers"] {
        for c in each_object(pod, key) {
            container(c);
        }
    }
    for v in each_object(pod, "volumes") {
        volume(v);
    }
}

/// The pull policy kube-apiserver picks for `image`: `Always` when its tag is `latest` or it
/// has neither tag nor digest, `IfNotPresent` otherwise.
pub fn image_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

fn container(c: &mut Map<String, Value>) {
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    if c.get("imagePullPolicy").is_none_or(Value::is_null) {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        let policy = image_pull_policy(image);
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    for p in each_object(c, "ports") {
        default(p, "protocol", json!("TCP"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = existing(c, probe) {
            default(p, "timeoutSeconds", json!(1));
            default(p, "periodSeconds", json!(10));
            default(p, "successThreshold", json!(1));
            default(p, "failureThreshold", json!(3));
            if let Some(get) = existing(p, "httpGet") {
                default(get, "path", json!("/"));
                default(get, "scheme", json!("HTTP"));
            }
        }
    }
    for e in each_object(c, "env") {
        if let Some(field) = existing(e, "valueFrom").and_then(|f| existing(f, "fieldRef")) {
            default(field, "apiVersion", json!("v1"));
        }
    }
}

fn volume(v: &mut Map<String, Value>) {
    const SOURCES: &[&str] = &[
        "hostPath",
        "emptyDir",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "gitRepo",
        "secret",
        "nfs",
        "iscsi",
        "glusterfs",
        "persistentVolumeClaim",
        "rbd",
        "flexVolume",
        "cinder",
        "cephfs",
        "flocker",
        "downwardAPI",
        "fc",
        "azureFile",
        "configMap",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "projected",
        "portworxVolume",
        "scaleIO",
        "storageos",
        "csi",
        "ephemeral",
        "image",
    ];
    if !SOURCES
        .iter()
        .any(|s| v.get(*s).is_some_and(|x| !x.is_null()))
    {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = existing(v, source) {
            default(s, "defaultMode", json!(420));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn defaulted(group: &str, plural: &str, obj: Value) -> Value {
        let version = "v1";
        let res = registry::lookup(group, version, plural).expect("served");
        let mut obj = obj;
        apply(res, &mut obj);
        obj
    }

    fn pod_template() -> Value {
        json!({"metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [
            {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "registry.example:5000/team/app:1.2"},
            {"name": "c", "image": "nginx:latest"},
            {"name": "d", "image": "nginx@sha256:0123"},
            {"name": "e", "image": "nginx:1.27", "imagePullPolicy": "Never"},
        ]}})
    }

    /// (kind plural, group, object, JSON pointer, value kube-apiserver stores). Values from
    /// kube-apiserver's defaults.go files.
    #[test]
    fn workloads_get_kube_apiserver_defaults() {
        let deploy = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"template": pod_template()}}),
        );
        let explicit = defaulted(
            "apps",
            "statefulsets",
            json!({"spec": {"updateStrategy": {"type": "RollingUpdate"}}}),
        );
        assert_eq!(
            explicit["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate"})
        );
        let sts = defaulted(
            "apps",
            "statefulsets",
            json!({"spec": {"template": pod_template(),
                            "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {}}]}}),
        );
        let ds = defaulted(
            "apps",
            "daemonsets",
            json!({"spec": {"template": pod_template()}}),
        );
        let rs = defaulted(
            "apps",
            "replicasets",
            json!({"spec": {"template": pod_template()}}),
        );
        let job = defaulted(
            "batch",
            "jobs",
            json!({"spec": {"template": pod_template()}}),
        );
        let cj = defaulted(
            "batch",
            "cronjobs",
            json!({"spec": {"schedule": "* * * * *",
                            "jobTemplate": {"spec": {"parallelism": 2, "template": pod_template()}}}}),
        );
        let cases: &[(&Value, &str, Value)] = &[
            (&deploy, "/spec/replicas", json!(1)),
            (&deploy, "/spec/strategy/type", json!("RollingUpdate")),
            (
                &deploy,
                "/spec/strategy/rollingUpdate",
                json!({"maxUnavailable": "25%", "maxSurge": "25%"}),
            ),
            (&deploy, "/spec/revisionHistoryLimit", json!(10)),
            (&deploy, "/spec/progressDeadlineSeconds", json!(600)),
            (&sts, "/spec/replicas", json!(1)),
            (&sts, "/spec/podManagementPolicy", json!("OrderedReady")),
            (
                &sts,
                "/spec/updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            ),
            (
                &sts,
                "/spec/persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            ),
            (&sts, "/spec/revisionHistoryLimit", json!(10)),
            (
                &sts,
                "/spec/volumeClaimTemplates/0/spec/volumeMode",
                json!("Filesystem"),
            ),
            (
                &ds,
                "/spec/updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            ),
            (&ds, "/spec/revisionHistoryLimit", json!(10)),
            (&rs, "/spec/replicas", json!(1)),
            (&job, "/spec/completions", json!(1)),
            (&job, "/spec/parallelism", json!(1)),
            (&job, "/spec/backoffLimit", json!(6)),
            (&job, "/spec/completionMode", json!("NonIndexed")),
            (&job, "/spec/suspend", json!(false)),
            (
                &job,
                "/spec/podReplacementPolicy",
                json!("TerminatingOrFailed"),
            ),
            (&cj, "/spec/concurrencyPolicy", json!("Allow")),
            (&cj, "/spec/suspend", json!(false)),
            (&cj, "/spec/successfulJobsHistoryLimit", json!(3)),
            (&cj, "/spec/failedJobsHistoryLimit", json!(1)),
            (&cj, "/spec/jobTemplate/spec/parallelism", json!(2)),
            (&job, "/metadata/labels", json!({"app": "a"})),
        ];
        for (obj, pointer, want) in cases {
            assert_eq!(obj.pointer(pointer), Some(want), "{pointer} in {obj}");
        }
        for unset in ["completions", "backoffLimit", "suspend"] {
            assert!(
                cj["spec"]["jobTemplate"]["spec"].get(unset).is_none(),
                "a job template gets no Job defaults: {unset}"
            );
        }
        for obj in [&deploy, &sts, &ds, &rs, &job] {
            pod_defaults_hold(obj.pointer("/spec/template/spec").unwrap());
        }
        pod_defaults_hold(cj.pointer("/spec/jobTemplate/spec/template/spec").unwrap());
    }

    fn pod_defaults_hold(pod: &Value) {
        let want = [
            ("/restartPolicy", json!("Always")),
            ("/dnsPolicy", json!("ClusterFirst")),
            ("/schedulerName", json!("default-scheduler")),
            ("/terminationGracePeriodSeconds", json!(30)),
            ("/securityContext", json!({})),
            (
                "/containers/0/terminationMessagePath",
                json!("/dev/termination-log"),
            ),
            ("/containers/0/terminationMessagePolicy", json!("File")),
            ("/containers/0/imagePullPolicy", json!("Always")),
            ("/containers/0/ports/0/protocol", json!("TCP")),
            ("/containers/1/imagePullPolicy", json!("IfNotPresent")),
            ("/containers/2/imagePullPolicy", json!("Always")),
            ("/containers/3/imagePullPolicy", json!("IfNotPresent")),
            ("/containers/4/imagePullPolicy", json!("Never")),
        ];
        for (pointer, value) in want {
            assert_eq!(pod.pointer(pointer), Some(&value), "{pointer} in {pod}");
        }
    }

    #[test]
    fn set_values_and_other_strategies_are_kept() {
        let deploy = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"},
                            "template": {"spec": {"restartPolicy": "Always", "dnsPolicy": "Default",
                                                  "containers": [{"name": "a", "image": "x",
                                                      "ports": [{"containerPort": 53, "protocol": "UDP"}],
                                                      "readinessProbe": {"httpGet": {"port": 80}}}],
                                                  "volumes": [{"name": "v"}, {"name": "c", "configMap": {"name": "c"}}]}}}}),
        );
        assert_eq!(deploy["spec"]["replicas"], 0);
        assert_eq!(deploy["spec"]["strategy"], json!({"type": "Recreate"}));
        let pod = &deploy["spec"]["template"]["spec"];
        assert_eq!(pod["dnsPolicy"], "Default");
        assert_eq!(pod["containers"][0]["ports"][0]["protocol"], "UDP");
        assert_eq!(
            pod["containers"][0]["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                   "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(pod["volumes"][1]["configMap"]["defaultMode"], 420);
        assert!(pod["volumes"][1].get("emptyDir").is_none());

        let mut cm = json!({"data": {"a": "b"}});
        apply(registry::lookup("", "v1", "configmaps").unwrap(), &mut cm);
        assert_eq!(
            cm,
            json!({"data": {"a": "b"}}),
            "no defaults for other kinds"
        );
    }
}
