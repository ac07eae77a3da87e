//! Admission on `flotilla up`'s API server through the machine's real kubectl: invalid policies
//! are refused with exit 1 and a message naming the field (and, for CEL, the column); valid ones
//! are stored with Karmada's defaults applied. Skips, with a printed reason, only when no kubectl
//! exists at all.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// `flotilla up` on a free port with no simulated members, killed on drop.
struct Up {
    child: Child,
    dir: tempfile::TempDir,
}

impl Up {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["up", "--port", "0", "--members", "0"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("flotilla up starts");
        let stdout = child.stdout.take().expect("stdout");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut lines = BufReader::new(stdout).lines();
        loop {
            assert!(Instant::now() < deadline, "flotilla up did not get ready");
            match lines.next() {
                Some(Ok(l)) if l.starts_with("ready in") => break,
                Some(Ok(_)) => {}
                _ => panic!("flotilla up exited before it was ready: {:?}", child.wait()),
            }
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Up { child, dir }
    }

    fn kubectl(&self, bin: &Path, args: &[&str]) -> Output {
        Command::new(bin)
            .arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs")
    }

    fn ok(&self, bin: &Path, args: &[&str]) -> String {
        let out = self.kubectl(bin, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// Apply `yaml`, expect exit 1, return stderr.
    fn refused(&self, bin: &Path, name: &str, yaml: &str, extra: &[&str]) -> String {
        let file = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, yaml).expect("write manifest");
        let file = file.display().to_string();
        let mut args = vec!["apply", "-f", file.as_str()];
        args.extend_from_slice(extra);
        let out = self.kubectl(bin, &args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name} must be refused:\nstdout: {}\nstderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        stderr
    }

    fn apply(&self, bin: &Path, name: &str, yaml: &str) -> String {
        let file = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, yaml).expect("write manifest");
        self.ok(bin, &["apply", "-f", &file.display().to_string()])
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn policy(name: &str, placement: &str) -> String {
    format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: {name}\nspec:\n  resourceSelectors:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n  placement:\n{placement}"
    )
}

#[test]
fn flotilla_up_refuses_invalid_policies_and_defaults_valid_ones() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let up = Up::start();
    let k = bin.as_path();

    // A CEL expression that does not compile: the field and the column.
    let bad_cel = policy(
        "bad-cel",
        "    clusterAffinity:\n      celSelector:\n        celExpressions:\n        - \"cluster.metadata.name == 'a' &&\"\n",
    );
    let err = up.refused(k, "bad-cel", &bad_cel, &[]);
    assert!(
        err.contains(r#"The PropagationPolicy "bad-cel" is invalid: spec.placement.clusterAffinity.celSelector.celExpressions[0]: invalid CEL expression"#),
        "{err}"
    );
    assert!(err.contains("column"), "{err}");

    // Karmada's validation: a duplicated affinity name, a zero weight.
    let dup = policy(
        "dup",
        "    clusterAffinities:\n    - affinityName: primary\n      clusterNames: [member1]\n    - affinityName: primary\n      clusterNames: [member2]\n",
    );
    let err = up.refused(k, "dup", &dup, &[]);
    assert!(err.contains(r#"The PropagationPolicy "dup" is invalid: spec.placement.clusterAffinities[1].affinityName: duplicate affinity name "primary""#), "{err}");
    let zero = policy(
        "zero",
        "    replicaScheduling:\n      replicaSchedulingType: Divided\n      weightPreference:\n        staticWeightList:\n        - targetCluster: {clusterNames: [member1]}\n          weight: 0\n",
    );
    let err = up.refused(k, "zero", &zero, &["--server-side"]);
    assert!(err.contains("spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight: weight must be >= 1"), "{err}");
    // A schema error names the field too.
    let typo = policy(
        "typo",
        "    clusterAffinity:\n      clusterNames: member1\n",
    );
    let err = up.refused(k, "typo", &typo, &[]);
    assert!(err.contains(r#"The PropagationPolicy "typo" is invalid: spec.placement.clusterAffinity.clusterNames: invalid type"#), "{err}");
    // Dry-run goes through admission too.
    let err = up.refused(k, "dup-dry", &dup, &["--dry-run=server"]);
    assert!(
        err.contains("spec.placement.clusterAffinities[1].affinityName"),
        "{err}"
    );
    let listed = up.ok(k, &["get", "pp", "-o", "name"]);
    assert!(
        listed.trim().is_empty(),
        "nothing refused was stored: {listed}"
    );

    // A valid policy is stored with the defaults of Karmada's webhook and CRD.
    let good = policy(
        "good",
        "    clusterAffinity:\n      clusterNames: [member1, member2]\n      celSelector:\n        celExpressions: [\"clusterName != 'member3'\"]\n    replicaScheduling: {}\n    spreadConstraints:\n    - maxGroups: 2\n",
    );
    let out = up.apply(k, "good", &good);
    assert!(
        out.contains("propagationpolicy.policy.karmada.io/good created"),
        "{out}"
    );
    let stored: serde_json::Value =
        serde_json::from_str(&up.ok(k, &["get", "pp", "good", "-o", "json"])).expect("json");
    let spec = &stored["spec"];
    assert_eq!(
        spec["placement"]["replicaScheduling"],
        serde_json::json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}),
        "{spec}"
    );
    assert_eq!(
        spec["placement"]["spreadConstraints"][0],
        serde_json::json!({"spreadByField": "cluster", "maxGroups": 2, "minGroups": 1}),
        "{spec}"
    );
    assert_eq!(spec["conflictResolution"], "Abort", "{spec}");
    assert_eq!(spec["preemption"], "Never", "{spec}");
    assert_eq!(spec["schedulerName"], "default-scheduler", "{spec}");
    assert_eq!(
        spec["resourceSelectors"][0]["namespace"], "default",
        "{spec}"
    );
    // Re-applying the same file leaves the spec as stored (defaults are stable), and an invalid
    // edit is refused.
    let out = up.apply(k, "good", &good);
    assert!(
        out.contains("propagationpolicy.policy.karmada.io/good"),
        "{out}"
    );
    let again: serde_json::Value =
        serde_json::from_str(&up.ok(k, &["get", "pp", "good", "-o", "json"])).expect("json");
    assert_eq!(again["spec"], stored["spec"]);
    assert_eq!(
        again["metadata"]["generation"],
        stored["metadata"]["generation"]
    );
    let err = up
        .kubectl(
            k,
            &[
                "patch",
                "pp",
                "good",
                "--type=merge",
                "-p",
                r#"{"spec":{"preemption":"Sometimes"}}"#,
            ],
        )
        .stderr;
    assert!(
        String::from_utf8_lossy(&err).contains("spec.preemption: unsupported value \"Sometimes\""),
        "{}",
        String::from_utf8_lossy(&err)
    );

    // flotilla.dev kinds: a WasmPlugin with two module sources, a profile naming no such built-in.
    let wasm = "apiVersion: flotilla.dev/v1alpha1\nkind: WasmPlugin\nmetadata:\n  name: gpu\nspec:\n  module: {path: /plugins/gpu.wasm, base64: AGFzbQEAAAA=}\n";
    let err = up.refused(k, "wasm", wasm, &[]);
    assert!(
        err.contains(
            r#"The WasmPlugin "gpu" is invalid: spec.module: set one of path, base64 and image, not path and base64"#
        ),
        "{err}"
    );
    let profile = "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata:\n  name: p\nspec:\n  scores:\n  - name: NoSuchScore\n";
    let err = up.refused(k, "profile", profile, &[]);
    assert!(err.contains(r#"The SchedulerProfile "p" is invalid: spec.scores[0].name: unknown plugin "NoSuchScore""#), "{err}");
    let profile = "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata:\n  name: p\nspec:\n  scores:\n  - name: ClusterLocality\n  - name: gpu\n    wasm: {plugin: gpu}\n";
    up.apply(k, "profile-ok", profile);
    // Binding preemption's victim plugin: a Wasm entry, never beside the CEL rules.
    let profile = "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata:\n  name: v\nspec:\n  preemption:\n    victimScore: '1'\n    plugin: {name: oldest-first, cel: {}}\n";
    let err = up.refused(k, "victims", profile, &[]);
    assert!(
        err.contains(
            "spec.preemption: set victimFilter/victimScore (CEL) or plugin (Wasm), not both"
        ),
        "{err}"
    );
    assert!(
        err.contains("spec.preemption.plugin.wasm: a victim plugin is a Wasm module"),
        "{err}"
    );
    let profile = "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata:\n  name: v\nspec:\n  preemption:\n    plugin: {name: oldest-first, wasm: {plugin: gpu}}\n";
    up.apply(k, "victims-ok", profile);
}
