//! `flotilla plan` with priorities: schedulePriority resolved from PriorityClasses, the schedule
//! order, the feature gates, and policy preemption offline (examples/priority).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run flotilla")
}

fn plan(extra: &[&str], files: &[&str]) -> Value {
    let mut args = vec!["plan", "-o", "json", "--now", "2026-06-01T00:00:00Z"];
    for f in files {
        args.extend(["-f", f]);
    }
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(
        o.status.success(),
        "plan failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("plan prints JSON")
}

const EXAMPLE: [&str; 4] = [
    "examples/priority/priorityclasses.yaml",
    "examples/priority/policies.yaml",
    "examples/priority/deployments.yaml",
    "examples/nginx/offline/clusters.yaml",
];

fn priority_of(list: &Value, name: &str) -> Option<i64> {
    list["items"]
        .as_array()?
        .iter()
        .find(|i| i["kind"] == "ResourceBinding" && i["metadata"]["name"] == name)?
        .pointer("/spec/schedulePriority/priority")?
        .as_i64()
}

#[test]
fn bindings_carry_their_class_priority_and_the_order_puts_the_highest_first() {
    let list = plan(&[], &EXAMPLE);
    // Unclaimed templates: the name-selecting policy has the higher explicit priority.
    assert_eq!(priority_of(&list, "checkout-deployment"), Some(100_000));
    assert_eq!(priority_of(&list, "analytics-deployment"), Some(100));
    assert_eq!(
        list["scheduleOrder"],
        serde_json::json!([
            "default/checkout-deployment",
            "default/analytics-deployment"
        ])
    );
    let off = plan(
        &["--feature-gates", "PriorityBasedScheduling=false"],
        &EXAMPLE,
    );
    assert_eq!(priority_of(&off, "checkout-deployment"), None);
    assert_eq!(
        off["scheduleOrder"],
        serde_json::json!([
            "default/analytics-deployment",
            "default/checkout-deployment"
        ]),
        "template order when all are equal"
    );
}

#[test]
fn a_claimed_template_moves_only_to_a_preempting_policy_with_the_gate_on() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-priority-plan");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    // The checkout Deployment as the live detector left it: claimed by batch-all.
    let text = std::fs::read_to_string(root().join("examples/priority/deployments.yaml"))
        .expect("example");
    let claimed = text.replace(
        "  name: checkout\n  namespace: default\n",
        "  name: checkout\n  namespace: default\n  annotations:\n    propagationpolicy.karmada.io/namespace: default\n    propagationpolicy.karmada.io/name: batch-all\n",
    );
    assert_ne!(claimed, text);
    let file = dir.join("deployments.yaml");
    std::fs::write(&file, claimed).expect("write");
    let f = file.to_str().expect("utf-8 path");
    let files = [EXAMPLE[0], EXAMPLE[1], f, EXAMPLE[3]];
    let sticky = plan(&[], &files);
    assert_eq!(
        priority_of(&sticky, "checkout-deployment"),
        Some(100),
        "sticky"
    );
    assert_eq!(sticky["preemptions"], serde_json::json!([]));
    let taken = plan(
        &["--feature-gates", "PropagationPolicyPreemption=true"],
        &files,
    );
    assert_eq!(priority_of(&taken, "checkout-deployment"), Some(100_000));
    assert_eq!(
        taken["preemptions"],
        serde_json::json!([
            "Deployment default/checkout: propagation policy(default/checkout) preempted propagation policy(default/batch-all)"
        ])
    );
    let bad = run(&["plan", "-f", EXAMPLE[1], "--feature-gates", "Nope=true"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unrecognized feature gate: Nope"));
}

fn binding<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|i| i["kind"] == "ResourceBinding" && i["metadata"]["name"] == name)
        })
        .unwrap_or_else(|| panic!("no binding {name}"))
}

/// `list` evicted `victim` (priority 10, 2 replicas) from member1 for payments (priority 1000),
/// which landed there with its 2 replicas.
fn assert_payments_preempted(list: &Value, victim: &str) {
    assert_eq!(
        list["bindingPreemptions"],
        serde_json::json!([{
            "preemptor": "default/payments-deployment",
            "priority": 1000,
            "cluster": "member1",
            "victims": [{"kind": "ResourceBinding", "namespace": "default",
                         "name": victim, "priority": 10, "replicas": 2}],
        }])
    );
    assert_eq!(
        binding(list, "payments-deployment")["spec"]["clusters"],
        serde_json::json!([{"name": "member1", "replicas": 2}])
    );
}

/// Nobody was evicted in `list` and payments waits, Unschedulable.
fn assert_payments_waits(list: &Value) {
    assert_eq!(list["bindingPreemptions"], serde_json::json!([]));
    assert_eq!(
        scheduled(binding(list, "payments-deployment")),
        ("False".into(), "Unschedulable".into())
    );
}

fn scheduled(rb: &Value) -> (String, String) {
    let c = rb["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Scheduled"))
        .expect("Scheduled condition");
    (
        c["status"].as_str().unwrap_or("").to_owned(),
        c["reason"].as_str().unwrap_or("").to_owned(),
    )
}

#[test]
fn binding_preemption_evicts_the_expected_victim_and_never_for_never() {
    let files = ["examples/priority/preemption"];
    let gate = ["--feature-gates", "BindingPreemption=true"];
    let list = plan(&gate, &files);
    // payments (1000) fits nowhere: on member1 the newest of the two batch bindings (10) is
    // enough (one victim, the lowest priority); member2 would need ledger (500).
    assert_payments_preempted(&list, "batch-b-deployment");
    let payments = binding(&list, "payments-deployment");
    assert_eq!(scheduled(payments), ("True".into(), "Success".into()));
    // The victim lost member1 (kept off it by its eviction task) and fits nowhere else.
    let victim = binding(&list, "batch-b-deployment");
    assert_eq!(victim["spec"].get("clusters"), None);
    let task = &victim["spec"]["gracefulEvictionTasks"][0];
    assert_eq!(task["fromCluster"], "member1");
    assert_eq!(task["reason"], "Preempted");
    assert_eq!(task["purgeMode"], "Directly");
    assert_eq!(
        task["message"],
        "Preempted by default/payments-deployment (priority 1000) on cluster member1"
    );
    assert_eq!(scheduled(victim), ("False".into(), "Unschedulable".into()));
    // Untouched: the older batch binding and ledger.
    assert_eq!(
        binding(&list, "batch-a-deployment")["spec"]["clusters"],
        serde_json::json!([{"name": "member1", "replicas": 2}])
    );
    assert_eq!(
        binding(&list, "ledger-deployment")["spec"]["clusters"],
        serde_json::json!([{"name": "member2", "replicas": 4}])
    );
    // reports has the same priority but preemptionPolicy: Never: it waits.
    let reports = binding(&list, "reports-deployment");
    assert_eq!(
        reports["metadata"]["annotations"]["scheduling.flotilla.dev/preemption-policy"],
        "Never"
    );
    assert_eq!(scheduled(reports), ("False".into(), "Unschedulable".into()));
    // Works follow: payments renders on member1, the victim nowhere.
    let works: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "Work")
        .filter_map(|w| w["metadata"]["name"].as_str())
        .collect();
    assert!(
        works.iter().any(|w| w.starts_with("payments-")),
        "{works:?}"
    );
    assert!(
        !works.iter().any(|w| w.starts_with("batch-b-")),
        "{works:?}"
    );

    // The table says the same.
    let o = run(&[
        "plan",
        "-f",
        files[0],
        "--now",
        "2026-06-01T00:00:00Z",
        gate[0],
        gate[1],
    ]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains(
            "binding preemption: default/payments-deployment (priority 1000) evicted from member1:\n  default/batch-b-deployment (priority 10, 2 replica(s))\n"
        ),
        "{table}"
    );

    // Gate off (the default): nobody is evicted and payments waits.
    let off = plan(&[], &files);
    assert_payments_waits(&off);
    assert_eq!(
        binding(&off, "batch-b-deployment")["spec"]["clusters"],
        serde_json::json!([{"name": "member1", "replicas": 2}])
    );

    // payments with the Never class: nobody is evicted either.
    let dir = edited_preemption_example("flotilla-binding-preemption-never", |f, text| {
        if f != "policies.yaml" {
            return text;
        }
        let waits = text.replace(
            "priorityClassName: critical}",
            "priorityClassName: critical-waits}",
        );
        assert_ne!(waits, text);
        waits
    });
    let never = plan(&gate, &[dir.to_str().expect("utf-8 path")]);
    assert_payments_waits(&never);
}

#[test]
fn a_wasm_victim_plugin_changes_which_binding_is_evicted() {
    // The same batch as above through a default-scheduler profile whose victim plugin takes
    // the candidates in reverse order: on member1 batch-a (older) goes before batch-b, so
    // batch-a is evicted instead; member2 still loses on the victims' priority (ledger, 500).
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-wasm-victims");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let module = root().join("engine/wasm/testdata/victims_reverse.wat");
    let profile = dir.join("profile.yaml");
    let write = |policy: &str, file: &Path| {
        std::fs::write(
            &profile,
            format!(
                "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {{name: default-scheduler}}\nspec:\n  preemption:\n    plugin: {{name: oldest-first, failurePolicy: {policy}, wasm: {{path: {}}}}}\n",
                file.display()
            ),
        )
        .expect("write profile");
    };
    write("Fail", &module);
    let p = profile.to_str().expect("utf-8 path");
    let files = ["examples/priority/preemption"];
    let args = ["--feature-gates", "BindingPreemption=true", "--profile", p];
    let list = plan(&args, &files);
    assert_payments_preempted(&list, "batch-a-deployment");
    assert_eq!(
        binding(&list, "batch-a-deployment")["spec"].get("clusters"),
        None
    );
    assert_eq!(
        binding(&list, "batch-b-deployment")["spec"]["clusters"],
        serde_json::json!([{"name": "member1", "replicas": 2}])
    );

    // A hostile plugin (it names a candidate that does not exist) under Fail: the preemption
    // is abandoned with the fault, nobody is evicted and payments waits.
    write(
        "Fail",
        &root().join("engine/wasm/testdata/victims_out_of_range.wat"),
    );
    let mut all = vec![
        "plan",
        "-o",
        "json",
        "--now",
        "2026-06-01T00:00:00Z",
        "-f",
        files[0],
    ];
    all.extend_from_slice(&args);
    let o = run(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let warnings = String::from_utf8_lossy(&o.stderr);
    assert!(
        warnings.contains("warning: ResourceBinding default/payments-deployment: preemption: victim plugin: plugin oldest-first returned invalid output: chose candidate 4096 of 2"),
        "{warnings}"
    );
    let list: Value = serde_json::from_slice(&o.stdout).expect("plan prints JSON");
    assert_payments_waits(&list);
    // Under Ignore the built-in choice stands (batch-b, the newest) and the fault is kept.
    write(
        "Ignore",
        &root().join("engine/wasm/testdata/victims_out_of_range.wat"),
    );
    let list = plan(&args, &files);
    let p = &list["bindingPreemptions"][0];
    assert_eq!(p["victims"][0]["name"], "batch-b-deployment");
    assert!(
        p["ignoredFaults"][0]
            .as_str()
            .is_some_and(|f| f.contains("chose candidate 4096 of")),
        "{p}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Copy of the binding-preemption example into `name` with `edit(file, text)` applied.
fn edited_preemption_example(name: &str, edit: impl Fn(&str, String) -> String) -> PathBuf {
    let src = root().join("examples/priority/preemption");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for f in [
        "clusters.yaml",
        "priorityclasses.yaml",
        "deployments.yaml",
        "bindings.yaml",
        "policies.yaml",
    ] {
        let text = std::fs::read_to_string(src.join(f)).expect("read example");
        std::fs::write(dir.join(f), edit(f, text)).expect("write");
    }
    dir
}

#[test]
fn binding_preemption_counts_the_room_freed_pods_leave_under_resource_models() {
    // The members report Karmada's default resource models, as Karmada's cluster status
    // controller does: each one node with no CPU left (grade 0). The model path alone would
    // find room for nothing, however much the summary frees; each freed 1-CPU pod is room
    // for one 1-CPU replica wherever it ran.
    let modelled = |f: &str, text: String| {
        if f == "clusters.yaml" {
            let out = text.replace(
                "allocated: {cpu: \"4\", memory: \"0\", pods: \"4\"}",
                "allocated: {cpu: \"4\", memory: \"0\", pods: \"4\"}\n    allocatableModelings: [{grade: 0, count: 1}, {grade: 1, count: 0}]",
            );
            assert_eq!(out.matches("allocatableModelings").count(), 2);
            out
        } else {
            text
        }
    };
    let gate = ["--feature-gates", "BindingPreemption=true"];
    let dir = edited_preemption_example("flotilla-binding-preemption-models", modelled);
    let list = plan(&gate, &[dir.to_str().expect("utf-8 path")]);
    assert_payments_preempted(&list, "batch-b-deployment");

    // One 2-CPU replica instead: the summary would free 2 CPUs with batch-b alone, but the
    // freed pods are 1-CPU holes that may sit on different nodes, and the model has no node
    // with 2 CPUs free: nobody is evicted for room that may not be there.
    let big = |f: &str, text: String| {
        let text = modelled(f, text);
        if f == "deployments.yaml" {
            let marker = "metadata: {name: payments, namespace: default}\nspec:\n  replicas: 2";
            assert!(text.contains(marker), "payments in the example");
            let out = text
                .replace(
                    marker,
                    "metadata: {name: payments, namespace: default}\nspec:\n  replicas: 1",
                )
                .replace(
                    "{name: payments, image: \"nginx:1.27\", resources: {requests: {cpu: \"1\"}}}",
                    "{name: payments, image: \"nginx:1.27\", resources: {requests: {cpu: \"2\"}}}",
                );
            assert_eq!(out.matches("cpu: \"2\"").count(), 1);
            out
        } else {
            text
        }
    };
    let dir = edited_preemption_example("flotilla-binding-preemption-models-big", big);
    let list = plan(&gate, &[dir.to_str().expect("utf-8 path")]);
    assert_payments_waits(&list);
    assert_eq!(
        binding(&list, "batch-b-deployment")["spec"]["clusters"],
        serde_json::json!([{"name": "member1", "replicas": 2}])
    );
}
