//! Shared by the CLI's integration tests that run `flotilla up` as a child process.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `flotilla up --port 0 <args>` with its data and kubeconfig in `dir`; returns once it prints
/// that it is ready, with the kubeconfig it wrote. Its log goes to stderr (`quiet`: nowhere).
pub fn up(dir: &Path, args: &[&str], quiet: bool) -> (Proc, PathBuf) {
    let kubeconfig = dir.join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["up", "--port", "0"])
        .args(args)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(if quiet {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .spawn()
        .expect("start flotilla up");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("ready in") {
                let _ = tx.send(());
            }
        }
    });
    let proc = Proc(child);
    rx.recv_timeout(Duration::from_secs(90))
        .expect("flotilla up became ready");
    (proc, kubeconfig)
}

/// A PropagationPolicy `name` in `default` placing Deployments labelled `<label>=true` on
/// `member_names`, Duplicated.
pub fn duplicated_policy(
    name: &str,
    label: &str,
    member_names: &[&str],
) -> kube::api::DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                "labelSelector": {"matchLabels": {label: "true"}}}],
            "placement": {
                "clusterAffinity": {"clusterNames": member_names},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
        },
    }))
    .expect("policy")
}

/// A one-replica Deployment `name` in `default` labelled `<label>=true`.
pub fn labelled_deployment(name: &str, label: &str) -> kube::api::DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {label: "true"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }))
    .expect("deployment")
}

/// Apply → copy latency, the same way on every control plane: a Duplicated PropagationPolicy
/// `bulk` selects Deployments labelled `bulk=true` for `member_names`; `n` such Deployments are
/// created one after another, and each sample is the time from its create returning to its copy
/// existing in every member (polled every 20 ms). The Deployments and the policy are deleted
/// afterwards.
pub async fn apply_to_copies(
    control: &kube::Client,
    members: &[kube::Client],
    member_names: &[&str],
    n: usize,
) -> Vec<Duration> {
    use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
    let api = |c: &kube::Client, api_version: &str, kind: &str| -> Api<DynamicObject> {
        Api::namespaced_with(
            c.clone(),
            "default",
            &flotilla_controller::api_resource(api_version, kind),
        )
    };
    let policies = api(control, "policy.karmada.io/v1alpha1", "PropagationPolicy");
    let policy = duplicated_policy("bulk", "bulk", member_names);
    policies
        .create(&PostParams::default(), &policy)
        .await
        .expect("create policy bulk");
    let templates = api(control, "apps/v1", "Deployment");
    let copies: Vec<Api<DynamicObject>> = members
        .iter()
        .map(|m| api(m, "apps/v1", "Deployment"))
        .collect();
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("bulk-{i}");
        let d = labelled_deployment(&name, "bulk");
        templates
            .create(&PostParams::default(), &d)
            .await
            .expect("create a bulk Deployment");
        let created = std::time::Instant::now();
        loop {
            let mut all = true;
            for c in &copies {
                if !matches!(c.get_opt(&name).await, Ok(Some(_))) {
                    all = false;
                    break;
                }
            }
            if all {
                break;
            }
            assert!(
                created.elapsed() < Duration::from_secs(60),
                "{name} reached no member copy in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        samples.push(created.elapsed());
    }
    for i in 0..n {
        let _ = templates
            .delete(&format!("bulk-{i}"), &DeleteParams::default())
            .await;
    }
    let _ = policies.delete("bulk", &DeleteParams::default()).await;
    samples
}

/// `p50 / p90 / p99 / max` of `samples`.
pub fn percentiles(samples: &[Duration]) -> String {
    let mut s: Vec<Duration> = samples.to_vec();
    s.sort();
    let at = |q: f64| {
        let i = ((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1;
        format!("{:.0?}", s[i])
    };
    format!(
        "p50 {} / p90 {} / p99 {} / max {} ({} samples)",
        at(0.50),
        at(0.90),
        at(0.99),
        at(1.0),
        s.len()
    )
}
