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
