//! The embedded server as a drop-in karmada-apiserver: Karmada's own karmada-scheduler and
//! karmada-controller-manager (v1.18.2, built from Karmada's Go module by `tests/run.sh` from
//! `tests/karmada-components`) run against `flotilla up --no-controllers`, whose simulated
//! members are registered as Push Clusters the way `karmadactl join` registers them (a Secret
//! with `token` + `caBundle`, `spec.apiEndpoint` and `spec.secretRef`). The nginx example is
//! applied with kubectl; Karmada's scheduler must schedule the binding, Karmada's controllers
//! must create the Works and the member copies, member2's with the OverridePolicy's registry;
//! a scale re-divides, and deleting the template removes binding, Works and copies.
//!
//! Nothing of Flotilla's controllers runs: every decision here is Karmada's. What Karmada needed
//! from the server besides the API: the permanent-id labels of Karmada's mutating webhooks
//! (karmada-scheduler ignores a binding without one), a generation bump when an object with
//! finalizers is marked deleted (Karmada's binding controller filters on generation changes) and
//! owner-reference garbage collection (a binding goes with its template).
//!
//! The binaries: `$KARMADA_CONTROLLER_MANAGER_BIN` and `$KARMADA_SCHEDULER_BIN`, else
//! `target/karmada-controller-manager` and `target/karmada-scheduler`; kubectl from `$KUBECTL` or
//! `PATH`. Without them the test skips with a printed reason, unless
//! `FLOTILLA_REQUIRE_KARMADA_COMPONENTS=1` (set by `tests/run.sh`), where it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::Proc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn required() -> bool {
    std::env::var("FLOTILLA_REQUIRE_KARMADA_COMPONENTS").is_ok_and(|v| !v.is_empty() && v != "0")
}

fn need<T>(what: Option<T>, reason: &str) -> Option<T> {
    if what.is_none() {
        assert!(
            !required(),
            "FLOTILLA_REQUIRE_KARMADA_COMPONENTS is set but {reason}"
        );
        eprintln!("skipping: {reason}");
    }
    what
}

/// `$var`, else `target/<name>`, if it is a file.
fn binary(var: &str, name: &str) -> Option<PathBuf> {
    let path =
        std::env::var_os(var).map_or_else(|| root().join("target").join(name), PathBuf::from);
    need(
        path.is_file().then_some(path.clone()),
        &format!(
            "no {name} at {} (tests/run.sh builds it from tests/karmada-components)",
            path.display()
        ),
    )
}

fn kubectl() -> Option<PathBuf> {
    let found = match std::env::var_os("KUBECTL") {
        Some(k) => Some(PathBuf::from(k)).filter(|k| k.is_file()),
        None => std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("kubectl"))
                .find(|k| k.is_file())
        }),
    };
    need(found, "no kubectl ($KUBECTL or on PATH)")
}

/// kubectl with `args`; `Ok(stdout)` or `Err(stderr)`.
fn kubectl_run(
    kubectl: &Path,
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String, String> {
    let mut child = Command::new(kubectl)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(input) = stdin {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("kubectl output");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn kubectl_ok(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    kubectl_run(kubectl, kubeconfig, args, None)
        .unwrap_or_else(|e| panic!("kubectl {args:?} failed: {e}"))
}

/// The object kubectl returns as JSON, `None` when it does not exist (or the call fails).
fn get_json(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> Option<Value> {
    let mut a = vec!["get", "-o", "json", "--ignore-not-found"];
    a.extend_from_slice(args);
    let out = kubectl_run(kubectl, kubeconfig, &a, None).ok()?;
    serde_json::from_str(&out).ok()
}

fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> (T, Duration) {
    let started = Instant::now();
    loop {
        if let Some(v) = f() {
            return (v, started.elapsed());
        }
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Server URL, CA data (base64) and token of the kubeconfig `flotilla up` wrote.
fn credentials(kubeconfig: &Path) -> (String, String, String) {
    let kc: Value = serde_yaml::from_str(&std::fs::read_to_string(kubeconfig).expect("kubeconfig"))
        .expect("kubeconfig yaml");
    let s = |p: &str| {
        kc.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("kubeconfig has {p}"))
            .to_owned()
    };
    (
        s("/clusters/0/cluster/server"),
        s("/clusters/0/cluster/certificate-authority-data"),
        s("/users/0/user/token"),
    )
}

/// A Karmada component with `args`, its output in `<dir>/<name>.log`.
fn component(dir: &Path, bin: &Path, name: &str, args: &[&str]) -> Proc {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
    Proc(
        Command::new(bin)
            .args(args)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}")),
    )
}

/// The nginx copy in `member` as `(replicas, image)`.
fn member_copy(
    kubectl: &Path,
    kubeconfig: &Path,
    server: &str,
    member: &str,
) -> Option<(i64, String)> {
    let url = format!("{server}/clusters/{member}");
    let d = get_json(
        kubectl,
        kubeconfig,
        &["--server", &url, "deployment", "nginx", "-n", "default"],
    )?;
    Some((
        d.pointer("/spec/replicas")?.as_i64()?,
        d.pointer("/spec/template/spec/containers/0/image")?
            .as_str()?
            .to_owned(),
    ))
}

/// The nginx binding's `spec.clusters` as `(name, replicas)`, sorted.
fn placement(kubectl: &Path, kubeconfig: &Path) -> Option<Vec<(String, i64)>> {
    let rb = get_json(
        kubectl,
        kubeconfig,
        &[
            "resourcebindings.work.karmada.io",
            "nginx-deployment",
            "-n",
            "default",
        ],
    )?;
    let mut out: Vec<(String, i64)> = rb
        .pointer("/spec/clusters")?
        .as_array()?
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["replicas"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    Some(out)
}

/// Whether kubectl answers that the object does not exist (a failing kubectl is not "gone").
fn gone(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> bool {
    let mut a = vec!["get", "-o", "name", "--ignore-not-found"];
    a.extend_from_slice(args);
    kubectl_run(kubectl, kubeconfig, &a, None).is_ok_and(|out| out.trim().is_empty())
}

fn works(kubectl: &Path, kubeconfig: &Path, member: &str) -> usize {
    let ns = format!("karmada-es-{member}");
    // No --ignore-not-found: with it kubectl prints nothing for an empty list.
    kubectl_run(
        kubectl,
        kubeconfig,
        &["get", "-o", "json", "works.work.karmada.io", "-n", &ns],
        None,
    )
    .ok()
    .and_then(|out| serde_json::from_str::<Value>(&out).ok())
    .and_then(|l| l["items"].as_array().map(Vec::len))
    .unwrap_or(usize::MAX)
}

#[test]
fn karmadas_scheduler_and_controller_manager_propagate_the_nginx_example_through_the_embedded_server()
 {
    let Some(cm) = binary(
        "KARMADA_CONTROLLER_MANAGER_BIN",
        "karmada-controller-manager",
    ) else {
        return;
    };
    let Some(scheduler) = binary("KARMADA_SCHEDULER_BIN", "karmada-scheduler") else {
        return;
    };
    let Some(kubectl) = kubectl() else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-karmada-components");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let (_server, kc) = common::up(&dir, &["--members", "2", "--no-controllers"], true);
    let (server, ca, token) = credentials(&kc);

    // The simulated members as Push Clusters Karmada can reach: what `karmadactl join` writes.
    kubectl_ok(&kubectl, &kc, &["create", "namespace", "karmada-cluster"]);
    for m in ["member1", "member2"] {
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &token);
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": m, "namespace": "karmada-cluster"},
            "data": {"token": b64, "caBundle": ca}});
        kubectl_run(
            &kubectl,
            &kc,
            &["apply", "-f", "-"],
            Some(&secret.to_string()),
        )
        .unwrap_or_else(|e| panic!("Secret {m}: {e}"));
        let patch = json!({"spec": {"apiEndpoint": format!("{server}/clusters/{m}"),
            "secretRef": {"namespace": "karmada-cluster", "name": m}}});
        kubectl_ok(
            &kubectl,
            &kc,
            &[
                "patch",
                "cluster",
                m,
                "--type",
                "merge",
                "-p",
                &patch.to_string(),
            ],
        );
    }

    let kubeconfig = format!("--kubeconfig={}", kc.display());
    let common_flags = [
        kubeconfig.as_str(),
        "--leader-elect=false",
        "--metrics-bind-address=127.0.0.1:0",
        "--health-probe-bind-address=127.0.0.1:0",
    ];
    let started = Instant::now();
    let mut args = common_flags.to_vec();
    args.push("--enable-scheduler-estimator=false");
    let _scheduler = component(&dir, &scheduler, "karmada-scheduler", &args);
    let mut args = common_flags.to_vec();
    // The controllers the propagation path needs; the others watch kinds (multi-cluster
    // services, quotas, remedies…) the embedded server does not serve.
    args.extend([
        "--controllers=cluster,clusterStatus,binding,bindingStatus,execution,workStatus,namespace",
        "--cluster-status-update-frequency=2s",
    ]);
    let _cm = component(&dir, &cm, "karmada-controller-manager", &args);

    // Karmada's cluster status controller reaches both members through the endpoint and Secret.
    eventually(
        "both Clusters Ready by Karmada's status controller",
        Duration::from_secs(60),
        || {
            ["member1", "member2"]
                .iter()
                .all(|m| {
                    get_json(&kubectl, &kc, &["clusters.cluster.karmada.io", m]).is_some_and(|c| {
                        // Flotilla registers v1.33.0; Karmada writes the member's /version.
                        c.pointer("/status/kubernetesVersion")
                            .and_then(Value::as_str)
                            .is_some_and(|v| v.contains("flotilla"))
                            && c.pointer("/status/conditions")
                                .and_then(Value::as_array)
                                .is_some_and(|cs| {
                                    cs.iter()
                                        .any(|x| x["type"] == "Ready" && x["status"] == "True")
                                })
                    })
                })
                .then_some(())
        },
    );

    let nginx = root().join("examples/nginx");
    kubectl_ok(
        &kubectl,
        &kc,
        &["apply", "-f", &nginx.display().to_string()],
    );
    let applied = Instant::now();
    let want = vec![("member1".to_owned(), 1), ("member2".to_owned(), 1)];
    let (_, took) = eventually(
        "Karmada's scheduler placing 1/1",
        Duration::from_secs(60),
        || placement(&kubectl, &kc).filter(|p| *p == want),
    );
    eprintln!("karmada-scheduler scheduled the binding {took:?} after kubectl apply");
    let rb = get_json(
        &kubectl,
        &kc,
        &[
            "resourcebindings.work.karmada.io",
            "nginx-deployment",
            "-n",
            "default",
        ],
    )
    .expect("the binding");
    let condition = rb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Scheduled").cloned());
    assert_eq!(
        condition.as_ref().map(|c| (&c["status"], &c["message"])),
        Some((
            &json!("True"),
            &json!("Binding has been scheduled successfully.")
        )),
        "Karmada's scheduler wrote the Scheduled condition: {rb:#}"
    );
    for m in ["member1", "member2"] {
        eventually(&format!("{m}'s Work"), Duration::from_secs(30), || {
            (works(&kubectl, &kc, m) == 1).then_some(())
        });
    }
    let (_, took) = eventually(
        "both member copies, member2's overridden",
        Duration::from_secs(60),
        || {
            let a = member_copy(&kubectl, &kc, &server, "member1")?;
            let b = member_copy(&kubectl, &kc, &server, "member2")?;
            (a == (1, "nginx:1.27".to_owned())
                && b == (1, "registry.member2.example/nginx:1.27".to_owned()))
                .then_some(())
        },
    );
    eprintln!(
        "karmada-controller-manager created both copies {took:?} after the binding ({:?} after kubectl apply)",
        applied.elapsed()
    );

    kubectl_ok(
        &kubectl,
        &kc,
        &["scale", "deployment/nginx", "-n", "default", "--replicas=4"],
    );
    let (_, took) = eventually("copies at 2/2", Duration::from_secs(60), || {
        let a = member_copy(&kubectl, &kc, &server, "member1")?;
        let b = member_copy(&kubectl, &kc, &server, "member2")?;
        (a.0 == 2 && b == (2, "registry.member2.example/nginx:1.27".to_owned())).then_some(())
    });
    eprintln!("kubectl scale to 4 reached both members in {took:?}");

    // The binding goes with its template (owner reference), the Works with the binding
    // (Karmada's finalizer), the copies with the Works.
    kubectl_ok(
        &kubectl,
        &kc,
        &["delete", "deployment/nginx", "-n", "default"],
    );
    let (_, took) = eventually(
        "binding, Works and copies gone",
        Duration::from_secs(60),
        || {
            let copy_gone = |m: &str| {
                let url = format!("{server}/clusters/{m}");
                gone(
                    &kubectl,
                    &kc,
                    &["--server", &url, "deployment", "nginx", "-n", "default"],
                )
            };
            (gone(
                &kubectl,
                &kc,
                &[
                    "resourcebindings.work.karmada.io",
                    "nginx-deployment",
                    "-n",
                    "default",
                ],
            ) && works(&kubectl, &kc, "member1") == 0
                && works(&kubectl, &kc, "member2") == 0
                && copy_gone("member1")
                && copy_gone("member2"))
            .then_some(())
        },
    );
    eprintln!("template deletion cleaned up binding, Works and member copies in {took:?}");
    eprintln!(
        "Karmada's control plane on the embedded server: {:?} in all",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
