//! End-to-end tests of the `flotilla` binary: the seed example, bad inputs, scale and failover
//! from an existing binding, explain, validate and profiles.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_flotilla"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> Output {
    bin()
        .current_dir(root())
        .args(args)
        .output()
        .expect("run flotilla")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory with the given files.
fn scenario(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flotilla-cli-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (f, text) in files {
        std::fs::write(dir.join(f), text).expect("write");
    }
    dir
}

fn example(file: &str) -> String {
    std::fs::read_to_string(root().join("examples/nginx").join(file)).expect("example")
}

fn plan_json(args: &[&str]) -> Value {
    let mut all = vec!["plan", "-o", "json", "--now", "2026-06-01T00:00:00Z"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert!(o.status.success(), "plan failed: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("plan prints JSON")
}

fn items<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["kind"] == kind)
        .collect()
}

fn placement(rb: &Value) -> Vec<(String, i64)> {
    rb["spec"]["clusters"]
        .as_array()
        .map(|a| {
            a.iter()
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

fn work_for<'a>(list: &'a Value, cluster: &str) -> &'a Value {
    items(list, "Work")
        .into_iter()
        .find(|w| w["metadata"]["namespace"] == format!("karmada-es-{cluster}"))
        .expect("work for cluster")
}

#[test]
fn seed_example_divides_one_to_one_and_overrides_member2_image() {
    let list = plan_json(&["-R", "-f", "examples/nginx"]);
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["kind"], "List");
    let rbs = items(&list, "ResourceBinding");
    assert_eq!(rbs.len(), 1);
    assert_eq!(
        placement(rbs[0]),
        vec![("member1".into(), 1), ("member2".into(), 1)]
    );
    let cond = &rbs[0]["status"]["conditions"][0];
    assert_eq!(
        (
            cond["type"].as_str(),
            cond["status"].as_str(),
            cond["reason"].as_str()
        ),
        (Some("Scheduled"), Some("True"), Some("Success"))
    );

    let w1 = work_for(&list, "member1");
    let w2 = work_for(&list, "member2");
    let m1 = &w1["spec"]["workload"]["manifests"][0];
    let m2 = &w2["spec"]["workload"]["manifests"][0];
    assert_eq!(
        m1["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        m2["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.member2.example/nginx:1.27"
    );
    assert_eq!(m1["spec"]["replicas"], 1);
    assert_eq!(m2["spec"]["replicas"], 1);
    assert_eq!(w1["metadata"]["name"], "nginx-687f7fb96f");
    let applied: Value = serde_json::from_str(
        w2["metadata"]["annotations"]["policy.karmada.io/applied-overrides"]
            .as_str()
            .expect("annotation"),
    )
    .expect("json");
    assert_eq!(applied[0]["policyName"], "nginx-registry");
    assert!(
        w1["metadata"]["annotations"]
            .get("policy.karmada.io/applied-overrides")
            .is_none()
    );
    assert_eq!(m2["metadata"]["labels"]["karmada.io/managed"], "true");
    assert_eq!(
        m2["metadata"]["annotations"]["resourcebinding.karmada.io/name"],
        "nginx-deployment"
    );
}

#[test]
fn table_and_yaml_outputs_describe_the_same_plan() {
    let o = run(&["plan", "-R", "-f", "examples/nginx"]);
    assert!(o.status.success());
    let t = stdout(&o);
    assert!(
        t.contains("ResourceBinding default/nginx-deployment"),
        "{t}"
    );
    assert!(
        t.contains("member1                  replicas=1")
            && t.contains("member2                  replicas=1"),
        "{t}"
    );
    assert!(
        t.contains("image=registry.member2.example/nginx:1.27 (overridden)"),
        "{t}"
    );
    let o = run(&["plan", "-R", "-f", "examples/nginx", "-o", "yaml"]);
    assert!(o.status.success());
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&stdout(&o))
        .map(|d| serde::Deserialize::deserialize(d).expect("yaml doc"))
        .collect();
    assert_eq!(docs.len(), 3, "one binding and two works");
}

fn assert_rejected(name: &str, files: &[(&str, &str)], needles: &[&str]) {
    let dir = scenario(name, files);
    let o = run(&["plan", "-f", dir.to_str().expect("utf8")]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{name}: expected exit 1, stdout: {}",
        stdout(&o)
    );
    let err = stderr(&o);
    for n in needles {
        assert!(err.contains(n), "{name}: {n:?} not in error output:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn broken_yaml_names_file_document_and_line() {
    assert_rejected(
        "broken-yaml",
        &[(
            "bad.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: [oops\n",
        )],
        &["bad.yaml: document 2", "invalid YAML", "line"],
    );
}

#[test]
fn unknown_kind_in_a_selector_is_rejected() {
    let pp = example("propagationpolicy.yaml").replace("kind: Deployment", "kind: Deploymnet");
    assert_rejected(
        "unknown-kind",
        &[
            ("pp.yaml", &pp),
            ("d.yaml", &example("deployment.yaml")),
            ("c.yaml", &example("offline/clusters.yaml")),
        ],
        &[
            "PropagationPolicy default/nginx-propagation",
            "spec.resourceSelectors[0].kind",
            "unknown kind \"Deploymnet\"",
            "Deployment",
        ],
    );
}

#[test]
fn weight_below_one_is_rejected() {
    let pp = example("propagationpolicy.yaml").replacen("weight: 1", "weight: 0", 1);
    assert_rejected(
        "weight-zero",
        &[
            ("pp.yaml", &pp),
            ("c.yaml", &example("offline/clusters.yaml")),
        ],
        &[
            "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight",
            "weight must be >= 1, got 0",
        ],
    );
}

#[test]
fn conflicting_affinity_fields_are_rejected() {
    let pp = example("propagationpolicy.yaml").replace(
        "    clusterAffinity:\n      clusterNames: [member1, member2]\n",
        "    clusterAffinity:\n      clusterNames: [member1, member2]\n    clusterAffinities:\n    - affinityName: primary\n      clusterNames: [member1]\n",
    );
    assert_rejected(
        "conflicting-affinity",
        &[
            ("pp.yaml", &pp),
            ("c.yaml", &example("offline/clusters.yaml")),
        ],
        &[
            "spec.placement.clusterAffinities",
            "cannot co-exist with clusterAffinity",
        ],
    );
}

#[test]
fn unknown_field_is_rejected_with_its_path() {
    let pp = example("propagationpolicy.yaml")
        .replace("replicaDivisionPreference", "replicaDivisionPrefrence");
    assert_rejected(
        "unknown-field",
        &[("pp.yaml", &pp)],
        &[
            "pp.yaml: document 1 (PropagationPolicy default/nginx-propagation)",
            "spec.placement.replicaScheduling.replicaDivisionPrefrence",
            "unknown field",
        ],
    );
}

#[test]
fn missing_file_is_a_clear_error() {
    let o = run(&["plan", "-f", "does/not/exist.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("does/not/exist.yaml: cannot read"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unschedulable_binding_is_not_an_error() {
    let clusters = example("offline/clusters.yaml")
        .replace(
            "  syncMode: Push\n",
            "  syncMode: Push\n  taints: [{key: maintenance, effect: NoSchedule}]\n",
        )
        .replace(
            "  syncMode: Pull\n",
            "  syncMode: Pull\n  taints: [{key: maintenance, effect: NoSchedule}]\n",
        );
    let dir = scenario(
        "unschedulable",
        &[
            ("d.yaml", &example("deployment.yaml")),
            ("pp.yaml", &example("propagationpolicy.yaml")),
            ("c.yaml", &clusters),
        ],
    );
    let list = plan_json(&["-f", dir.to_str().expect("utf8")]);
    let rb = items(&list, "ResourceBinding")[0];
    let cond = &rb["status"]["conditions"][0];
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "NoClusterFit");
    assert_eq!(
        cond["message"],
        "0/2 clusters are available: 2 cluster(s) had untolerated taint {maintenance:NoSchedule}."
    );
    assert!(placement(rb).is_empty());
    assert!(items(&list, "Work").is_empty());
}

/// Plan once, then feed the binding back with a changed template or cluster.
fn replan(name: &str, deployment: &str, clusters: &str, policy: &str, previous: &Value) -> Value {
    let rb = serde_yaml::to_string(items(previous, "ResourceBinding")[0]).expect("yaml");
    let dir = scenario(
        name,
        &[
            ("d.yaml", deployment),
            ("pp.yaml", policy),
            ("c.yaml", clusters),
            ("rb.yaml", &rb),
        ],
    );
    plan_json(&["-f", dir.to_str().expect("utf8")])
}

#[test]
fn dynamic_weight_scale_up_and_down_keep_previous_assignments() {
    let policy = example("propagationpolicy.yaml").replace(
        "      weightPreference:\n        staticWeightList:\n        - targetCluster:\n            clusterNames: [member1]\n          weight: 1\n        - targetCluster:\n            clusterNames: [member2]\n          weight: 1\n",
        "      weightPreference:\n        dynamicWeight: AvailableReplicas\n",
    );
    let d = |n: i32| example("deployment.yaml").replace("replicas: 2", &format!("replicas: {n}"));
    let dir = scenario(
        "dyn-first",
        &[
            ("d.yaml", &d(4)),
            ("pp.yaml", &policy),
            ("c.yaml", &example("offline/clusters.yaml")),
        ],
    );
    let first = plan_json(&["-f", dir.to_str().expect("utf8")]);
    let p1 = placement(items(&first, "ResourceBinding")[0]);
    assert_eq!(p1.iter().map(|c| c.1).sum::<i64>(), 4);
    let up = replan(
        "dyn-up",
        &d(10),
        &example("offline/clusters.yaml"),
        &policy,
        &first,
    );
    let p2 = placement(items(&up, "ResourceBinding")[0]);
    assert_eq!(p2.iter().map(|c| c.1).sum::<i64>(), 10);
    for (c, r) in &p1 {
        let after = p2.iter().find(|x| &x.0 == c).map_or(0, |x| x.1);
        assert!(
            after >= *r,
            "scale up took replicas from {c}: {p1:?} -> {p2:?}"
        );
    }
    let down = replan(
        "dyn-down",
        &d(3),
        &example("offline/clusters.yaml"),
        &policy,
        &up,
    );
    let p3 = placement(items(&down, "ResourceBinding")[0]);
    assert_eq!(p3.iter().map(|c| c.1).sum::<i64>(), 3);
    for (c, r) in &p3 {
        let before = p2.iter().find(|x| &x.0 == c).map_or(0, |x| x.1);
        assert!(
            *r <= before,
            "scale down added replicas to {c}: {p2:?} -> {p3:?}"
        );
    }
    // Unchanged replicas: nothing to reschedule, the previous result stays.
    let same = replan(
        "dyn-same",
        &d(3),
        &example("offline/clusters.yaml"),
        &policy,
        &down,
    );
    assert_eq!(placement(items(&same, "ResourceBinding")[0]), p3);
}

#[test]
fn untolerated_no_execute_taint_fails_replicas_over_and_records_the_eviction() {
    let first = plan_json(&["-R", "-f", "examples/nginx"]);
    let clusters = example("offline/clusters.yaml").replace(
        "  syncMode: Push\n",
        "  syncMode: Push\n  taints: [{key: cluster.karmada.io/not-ready, effect: NoExecute, timeAdded: \"2026-05-31T23:00:00Z\"}]\n",
    );
    let after = replan(
        "failover",
        &example("deployment.yaml"),
        &clusters,
        &example("propagationpolicy.yaml"),
        &first,
    );
    let rb = items(&after, "ResourceBinding")[0];
    assert_eq!(placement(rb), vec![("member2".into(), 2)]);
    let task = &rb["spec"]["gracefulEvictionTasks"][0];
    assert_eq!(task["fromCluster"], "member1");
    assert_eq!(task["reason"], "TaintUntolerated");
    assert_eq!(task["producer"], "TaintManager");
    assert_eq!(task["replicas"], 1);
    let works: Vec<_> = items(&after, "Work")
        .iter()
        .map(|w| w["metadata"]["namespace"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(works, vec!["karmada-es-member2"]);

    // Tolerated for 10 minutes from when the taint was added (an hour ago): evicted; for 2 hours: kept.
    for (secs, evicted) in [(600, true), (7200, false)] {
        let pp = example("propagationpolicy.yaml").replace(
            "    replicaScheduling:",
            &format!("    clusterTolerations:\n    - {{key: cluster.karmada.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: {secs}}}\n    replicaScheduling:"),
        );
        let first = {
            let dir = scenario(
                &format!("tol-first-{secs}"),
                &[
                    ("d.yaml", &example("deployment.yaml")),
                    ("pp.yaml", &pp),
                    ("c.yaml", &example("offline/clusters.yaml")),
                ],
            );
            plan_json(&["-f", dir.to_str().expect("utf8")])
        };
        let after = replan(
            &format!("tol-{secs}"),
            &example("deployment.yaml"),
            &clusters,
            &pp,
            &first,
        );
        let rb = items(&after, "ResourceBinding")[0];
        assert_eq!(
            rb["spec"].get("gracefulEvictionTasks").is_some(),
            evicted,
            "tolerationSeconds {secs}: {rb}"
        );
    }
}

#[test]
fn explain_shows_every_filter_verdict_and_the_assignment() {
    let clusters = example("offline/clusters.yaml").replace(
        "  syncMode: Pull\n",
        "  syncMode: Pull\n  taints: [{key: maintenance, value: \"true\", effect: NoSchedule}]\n",
    );
    let dir = scenario(
        "explain",
        &[
            ("d.yaml", &example("deployment.yaml")),
            ("pp.yaml", &example("propagationpolicy.yaml")),
            ("c.yaml", &clusters),
        ],
    );
    let o = run(&[
        "explain",
        "-f",
        dir.to_str().expect("utf8"),
        "--resource",
        "Deployment/default/nginx",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("TaintToleration    unschedulable: cluster(s) had untolerated taint {maintenance=true:NoSchedule}"), "{s}");
    assert!(s.contains("APIEnablement      fit"), "{s}");
    assert!(s.contains("RESULT: member1=2"), "{s}");
    let o = run(&[
        "explain",
        "-R",
        "-f",
        "examples/nginx",
        "--resource",
        "Deployment/default/missing",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no template Deployment default/missing"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn validate_accepts_the_example_and_rejects_bad_policies() {
    let o = run(&["validate", "-R", "-f", "examples/nginx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "valid: 1 templates, 1 propagation policies, 1 override policies, 2 clusters"
        ),
        "{}",
        stdout(&o)
    );
    let op = example("overridepolicy.yaml").replace("component: Registry", "component: Registery");
    let dir = scenario("validate-bad", &[("op.yaml", &op)]);
    let o = run(&["validate", "-f", dir.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("OverridePolicy default/nginx-registry"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn profiles_change_the_plugin_set_and_bad_profiles_are_rejected() {
    // A profile without TaintToleration schedules onto a tainted cluster.
    let clusters = example("offline/clusters.yaml").replace(
        "  syncMode: Pull\n",
        "  syncMode: Pull\n  taints: [{key: maintenance, effect: NoSchedule}]\n",
    );
    let profile = "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {name: default-scheduler}\nspec:\n  filters:\n  - name: APIEnablement\n  - name: ClusterAffinity\n";
    let dir = scenario(
        "profile",
        &[
            ("d.yaml", &example("deployment.yaml")),
            ("pp.yaml", &example("propagationpolicy.yaml")),
            ("c.yaml", &clusters),
        ],
    );
    let pf = dir.join("profile.yaml.txt");
    std::fs::write(&pf, profile).expect("write");
    let list = plan_json(&[
        "-f",
        dir.to_str().expect("utf8"),
        "--profile",
        pf.to_str().expect("utf8"),
    ]);
    assert_eq!(
        placement(items(&list, "ResourceBinding")[0]),
        vec![("member1".into(), 1), ("member2".into(), 1)]
    );
    let without = plan_json(&["-f", dir.to_str().expect("utf8")]);
    assert_eq!(
        placement(items(&without, "ResourceBinding")[0]),
        vec![("member1".into(), 2)]
    );

    std::fs::write(
        &pf,
        profile.replace("name: ClusterAffinity", "name: ClusterAfinity"),
    )
    .expect("write");
    let o = run(&[
        "plan",
        "-f",
        dir.to_str().expect("utf8"),
        "--profile",
        pf.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("spec.filters[1]: unknown plugin \"ClusterAfinity\""),
        "{}",
        stderr(&o)
    );

    // Profile files are read as every input is: a duplicate key is an error, not the last value.
    std::fs::write(
        &pf,
        profile.replace(
            "kind: SchedulerProfile\n",
            "kind: SchedulerProfile\nkind: Other\n",
        ),
    )
    .expect("write");
    let o = run(&[
        "plan",
        "-f",
        dir.to_str().expect("utf8"),
        "--profile",
        pf.to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("profile.yaml.txt: document 1: invalid YAML")
            && stderr(&o).contains("duplicate key kind"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn up_refuses_a_bad_token_file_naming_file_and_line_but_not_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "s3cret-token,alice,1001\ns3cret-token-2,,1002\n").expect("write");
    let (data, kubeconfig) = (dir.path().join("data"), dir.path().join("kubeconfig"));
    let out = run(&[
        "up",
        "--port",
        "0",
        "--data-dir",
        data.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--token-auth-file",
        tokens.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("tokens.csv:2: the user name is empty"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    // Tokens are never sent over plain HTTP.
    let out = run(&[
        "up",
        "--insecure-loopback-anonymous",
        "--token-auth-file",
        tokens.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}
