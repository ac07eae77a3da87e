//! The README walkthrough through the machine's real kubectl, against the server `flotilla up`
//! runs (TLS + bearer token) with two simulated members and the controllers.
//! Skips, with a printed reason, only when no kubectl exists at all.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// `kubectl args…` against `dir/kubeconfig`.
fn run_kubectl(bin: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin)
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl runs")
}

/// `kubectl args…`, which must succeed: its stdout.
fn kubectl(bin: &Path, dir: &Path, args: &[&str]) -> String {
    let out = run_kubectl(bin, dir, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_the_nginx_example_then_get_rb_and_work_shows_the_split() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let started = Instant::now();
    let running = flotilla_apiserver::start(
        flotilla_apiserver::Config::new(dir.path().join("data")),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .expect("server starts");
    let settings = flotilla_controller::Settings {
        ready_delay: Duration::from_millis(100),
        ..Default::default()
    };
    let token = flotilla_controller::client::token_from_kubeconfig(&running.kubeconfig);
    assert!(token.is_some(), "the kubeconfig has a token");
    let opts = flotilla_controller::Embedded {
        members: 2,
        settings,
        token,
        ..Default::default()
    };
    let _controllers = flotilla_controller::start_embedded(running.server.router(), opts)
        .await
        .expect("controllers start");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "ready in {:?}",
        started.elapsed()
    );
    std::fs::write(dir.path().join("kubeconfig"), &running.kubeconfig).expect("kubeconfig");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx");
    let d = dir.path().to_owned();
    let b = bin.clone();
    let ex = examples.to_string_lossy().into_owned();
    let applied = tokio::task::spawn_blocking(move || kubectl(&b, &d, &["apply", "-f", &ex]))
        .await
        .expect("join");
    assert!(
        applied.contains("deployment.apps/nginx created"),
        "{applied}"
    );

    // Poll `kubectl get rb,work -A` until both Works exist and the binding shows the split.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (rb, works) = loop {
        let (d, b) = (dir.path().to_owned(), bin.clone());
        let (rb, works) = tokio::task::spawn_blocking(move || {
            let rb = kubectl(
                &b,
                &d,
                &[
                    "get",
                    "rb",
                    "nginx-deployment",
                    "-n",
                    "default",
                    "-o",
                    "jsonpath={.spec.clusters}",
                ],
            );
            let works = kubectl(&b, &d, &["get", "rb,work", "-A"]);
            (rb, works)
        })
        .await
        .expect("join");
        if works.contains("karmada-es-member1")
            && works.contains("karmada-es-member2")
            && rb.contains("member2")
        {
            break (rb, works);
        }
        assert!(
            Instant::now() < deadline,
            "no split in time:\n{rb}\n{works}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let clusters: serde_json::Value = serde_json::from_str(&rb).expect("json");
    assert_eq!(
        clusters,
        serde_json::json!([{"name": "member1", "replicas": 1}, {"name": "member2", "replicas": 1}]),
        "{works}"
    );
    assert!(works.contains("nginx-deployment"), "{works}");

    // The member deployments, through kubectl against the member's logical cluster.
    let member_kubeconfig = running
        .kubeconfig
        .replace(&running.url, &format!("{}/clusters/member2", running.url));
    let mdir = dir.path().join("member2");
    std::fs::create_dir_all(&mdir).expect("dir");
    std::fs::write(mdir.join("kubeconfig"), member_kubeconfig).expect("kubeconfig");
    // The Works exist; the execution controller applies them into the members right after.
    let image = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new(&bin)
                .arg("--kubeconfig")
                .arg(mdir.join("kubeconfig"))
                .args([
                    "get",
                    "deploy",
                    "nginx",
                    "-n",
                    "default",
                    "--ignore-not-found",
                    "-o",
                    "jsonpath={.spec.template.spec.containers[0].image}",
                ])
                .env_remove("KUBECONFIG")
                .output()
                .expect("kubectl runs");
            let image = String::from_utf8_lossy(&out.stdout).into_owned();
            if !image.is_empty() || Instant::now() > deadline {
                return image;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })
    .await
    .expect("join");
    if image.is_empty() {
        let d = dir.path().to_owned();
        let b = kubectl_on_path().expect("kubectl");
        let works = tokio::task::spawn_blocking(move || {
            let m = d.join("member2");
            format!("{}\n{}\n{}", kubectl(&b, &d, &["get", "work", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace} {.metadata.finalizers} {.status.conditions}{\"\\n\"}{end}"]), kubectl(&b, &m, &["get", "deploy", "-A"]), kubectl(&b, &m, &["get", "ns"]))
        }).await.expect("join");
        panic!(
            "no member copy; works' status: {works}; url {}; kubeconfig server lines: {:?}",
            running.url,
            running
                .kubeconfig
                .lines()
                .filter(|l| l.contains("server"))
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(image, "registry.member2.example/nginx:1.27");

    // Karmada's events, on the template and on the binding, as `kubectl events` and `describe`
    // show them (field selectors on involvedObject, the Events table).
    let bin = kubectl_on_path().expect("kubectl");
    let d = dir.path().to_owned();
    let (events, describe, rb_events) = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = kubectl(
                &bin,
                &d,
                &["events", "-n", "default", "--for", "deployment/nginx"],
            );
            let describe = kubectl(
                &bin,
                &d,
                &["describe", "deployment", "nginx", "-n", "default"],
            );
            let rb_events = kubectl(
                &bin,
                &d,
                &[
                    "get",
                    "events",
                    "-n",
                    "default",
                    "--field-selector",
                    "involvedObject.kind=ResourceBinding,involvedObject.name=nginx-deployment",
                    "-o",
                    "jsonpath={range .items[*]}{.reason} {.message}{\"\\n\"}{end}",
                ],
            );
            let all = [
                "ApplyPolicySucceed",
                "ScheduleBindingSucceed",
                "SyncWorkSucceed",
            ];
            if all
                .iter()
                .all(|r| events.contains(r) && describe.contains(r))
                || Instant::now() > deadline
            {
                return (events, describe, rb_events);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })
    .await
    .expect("join");
    for reason in [
        "ApplyPolicySucceed",
        "ScheduleBindingSucceed",
        "SyncWorkSucceed",
    ] {
        assert!(
            events.contains(reason),
            "kubectl events lacks {reason}:\n{events}"
        );
        assert!(
            describe.contains(reason),
            "describe lacks {reason}:\n{describe}"
        );
    }
    assert!(
        events.contains("Binding has been scheduled successfully. Result: {member1:1, member2:1}"),
        "{events}"
    );
    assert!(
        rb_events.contains("Sync work of ResourceBinding(default/nginx-deployment) successful."),
        "{rb_events}"
    );
    assert!(
        !rb_events.contains("ApplyPolicySucceed"),
        "only the template's: {rb_events}"
    );
    let _ = stop.send(());
}

mod common;

/// Plugins as objects through kubectl: a WasmPlugin + SchedulerProfile applied, a template placed
/// by the plugin, the WasmPlugin replaced (`kubectl replace`), the next template placed by the new
/// version, the first left where it was, and `kubectl get wasmplugin` showing the digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_replace_of_a_wasm_plugin_changes_the_next_placement() {
    let Some(bin) = kubectl_on_path() else {
        eprintln!("skipping: no kubectl on PATH");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(
        flotilla_apiserver::Config::new(dir.path().join("data")),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .expect("server starts");
    let backends = flotilla_controller::controller::plugins::Backends {
        base: flotilla_plugins::default_profile(),
        factories: flotilla_core::profile::Factories::new([
            std::sync::Arc::new(flotilla_plugins::BuiltinFactory)
                as std::sync::Arc<dyn flotilla_core::profile::PluginFactory>,
            std::sync::Arc::new(flotilla_wasm::WasmFactory::new()),
        ]),
        module_dir: Some(dir.path().join("modules")),
        module_source_dir: None,
        precompile: None,
    };
    let settings = flotilla_controller::Settings {
        ready_delay: Duration::from_millis(100),
        backends,
        ..Default::default()
    };
    let token = flotilla_controller::client::token_from_kubeconfig(&running.kubeconfig);
    let opts = flotilla_controller::Embedded {
        members: 2,
        settings,
        token,
        ..Default::default()
    };
    let _controllers = flotilla_controller::start_embedded(running.server.router(), opts)
        .await
        .expect("controllers start");
    std::fs::write(dir.path().join("kubeconfig"), &running.kubeconfig).expect("kubeconfig");

    let (v1, v2) = (common::filter_module(1, 1), common::filter_module(2, 0));
    let plugin = |m: &str| {
        format!(
            "apiVersion: flotilla.dev/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: pick}}\nspec:\n  module: {{base64: {}, format: wat}}\n  sha256: {}\n",
            common::b64(m),
            common::sha(m)
        )
    };
    let deployment = |name: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: default, labels: {{app: picked}}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n"
        )
    };
    let files = dir.path().join("objects");
    std::fs::create_dir_all(&files).expect("dir");
    std::fs::write(files.join("1-wasmplugin.yaml"), plugin(&v1)).expect("write");
    std::fs::write(
        files.join("2-profile.yaml"),
        "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {name: wasm-pick}\nspec:\n  filters:\n  - {name: APIEnablement}\n  - {name: TaintToleration}\n  - {name: pick, wasm: {plugin: pick}}\n",
    )
    .expect("write");
    std::fs::write(
        files.join("3-policy.yaml"),
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: picked, namespace: default}\nspec:\n  schedulerName: wasm-pick\n  resourceSelectors:\n  - {apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {app: picked}}}\n  placement:\n    clusterAffinity: {clusterNames: [member1, member2]}\n    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}\n",
    )
    .expect("write");
    let run = |args: Vec<String>| {
        let (b, d) = (bin.clone(), dir.path().to_owned());
        async move {
            tokio::task::spawn_blocking(move || {
                kubectl(&b, &d, &args.iter().map(String::as_str).collect::<Vec<_>>())
            })
            .await
            .expect("join")
        }
    };
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<String>>();
    let out = run(s(&["apply", "-f", &files.display().to_string()])).await;
    assert!(
        out.contains("wasmplugin.flotilla.dev/pick created")
            && out.contains("schedulerprofile.flotilla.dev/wasm-pick created"),
        "{out}"
    );

    async fn wait_for(what: &str, mut f: impl AsyncFnMut() -> Option<String>) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(v) = f().await {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let digest = move |want: String| async move {
        wait_for("the WasmPlugin's digest", async || {
            let d = run(s(&[
                "get",
                "wasmplugin",
                "pick",
                "-o",
                "jsonpath={.status.servingDigest} {.status.conditions[?(@.type==\"Loaded\")].status}",
            ]))
            .await;
            (d == format!("sha256:{want} True")).then_some(d)
        })
        .await
    };
    digest(common::sha(&v1)).await;
    let placed = move |name: &'static str| async move {
        wait_for("a placement", async || {
            let c = run(s(&[
                "get",
                "rb",
                &format!("{name}-deployment"),
                "-n",
                "default",
                "-o",
                "jsonpath={.spec.clusters[*].name}",
            ]))
            .await;
            (!c.is_empty()).then_some(c)
        })
        .await
    };
    std::fs::write(dir.path().join("a.yaml"), deployment("a")).expect("write");
    run(s(&[
        "apply",
        "-f",
        &dir.path().join("a.yaml").display().to_string(),
    ]))
    .await;
    assert_eq!(placed("a").await, "member1", "v1 rejects member2");

    std::fs::write(files.join("1-wasmplugin.yaml"), plugin(&v2)).expect("write");
    let out = run(s(&[
        "replace",
        "-f",
        &files.join("1-wasmplugin.yaml").display().to_string(),
    ]))
    .await;
    assert!(
        out.contains("wasmplugin.flotilla.dev/pick replaced"),
        "{out}"
    );
    digest(common::sha(&v2)).await;
    std::fs::write(dir.path().join("b.yaml"), deployment("b")).expect("write");
    run(s(&[
        "apply",
        "-f",
        &dir.path().join("b.yaml").display().to_string(),
    ]))
    .await;
    assert_eq!(placed("b").await, "member2", "v2 rejects member1");
    assert_eq!(
        placed("a").await,
        "member1",
        "the Divided binding placed before the swap stays"
    );
    // The binding records the plugin version that placed it.
    let by = run(s(&[
        "get",
        "rb",
        "b-deployment",
        "-n",
        "default",
        "-o",
        "jsonpath={.metadata.annotations.flotilla\\.dev/placed-by}",
    ]))
    .await;
    assert_eq!(by, format!("pick=sha256:{}", common::sha(&v2)));
    let table = run(s(&["get", "wasmplugins"])).await;
    let head: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        head,
        ["NAME", "SERVING", "READY", "USED-BY", "AGE"],
        "{table}"
    );
    let row = table.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("pick")
            && row.contains(&format!("sha256:{}", common::sha(&v2)))
            && row.contains("True")
            && row.contains("wasm-pick/filters[2]"),
        "{table}"
    );
    let _ = stop.send(());
}

/// The kubectl release 1.`minor`: `kubectl.1.<minor>` on PATH, else beside the `kubectl` on
/// PATH once symlinks are resolved (where the google-cloud-cli package keeps its versioned
/// binaries).
fn kubectl_release(minor: u32) -> Option<PathBuf> {
    let name = format!("kubectl.1.{minor}");
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
        .or_else(|| {
            let resolved = std::fs::canonicalize(kubectl_on_path()?).ok()?;
            Some(resolved.parent()?.join(&name)).filter(|p| p.is_file())
        })
}

/// `kubectl args…` against `dir/kubeconfig`: its exit status and output (stdout + stderr).
fn kubectl_status(bin: &Path, dir: &Path, args: &[&str]) -> (bool, String) {
    let out = run_kubectl(bin, dir, args);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every Cluster's name, generation, labels and spec, as kubectl shows them.
fn clusters_seen(bin: &Path, dir: &Path) -> serde_json::Value {
    let list: serde_json::Value =
        serde_json::from_str(&kubectl(bin, dir, &["get", "clusters", "-o", "json"])).expect("json");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c["metadata"]["name"],
                "generation": c["metadata"]["generation"],
                "labels": c["metadata"]["labels"],
                "spec": c["spec"],
            })
        })
        .collect()
}

/// `flotilla up` in process: the API server and the controllers with two simulated members,
/// with a kubeconfig in `dir`.
async fn up(
    dir: &Path,
) -> (
    tokio::sync::oneshot::Sender<()>,
    flotilla_apiserver::Running,
    flotilla_controller::Running,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(
        flotilla_apiserver::Config::new(dir.join("data")),
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .expect("server starts");
    let opts = flotilla_controller::Embedded {
        members: 2,
        settings: flotilla_controller::Settings {
            ready_delay: Duration::from_millis(100),
            ..Default::default()
        },
        token: flotilla_controller::client::token_from_kubeconfig(&running.kubeconfig),
        ..Default::default()
    };
    let controllers = flotilla_controller::start_embedded(running.server.router(), opts)
        .await
        .expect("controllers start");
    std::fs::write(dir.join("kubeconfig"), &running.kubeconfig).expect("kubeconfig");
    (stop, running, controllers)
}

/// The README walkthrough's `kubectl apply -f examples/nginx/`, then `kubectl wait` for the
/// binding's `FullyApplied` and the Deployment's `Available`, with kubectl 1.`minor`. Applying
/// the walkthrough leaves every Cluster as `flotilla up` made it.
async fn walkthrough_waits(minor: u32) {
    let Some(bin) = kubectl_release(minor) else {
        eprintln!("skipping: no kubectl 1.{minor}");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (stop, running, _controllers) = up(dir.path()).await;
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx");
    let d = dir.path().to_owned();
    let (before, applied, fully_applied, available, after, conditions) =
        tokio::task::spawn_blocking(move || {
            let before = clusters_seen(&bin, &d);
            let applied = kubectl(&bin, &d, &["apply", "-f", &examples.to_string_lossy()]);
            let wait = |what: &str, timeout: &str| {
                kubectl_status(
                    &bin,
                    &d,
                    &[
                        "wait",
                        &format!("--for=condition={what}"),
                        "-n",
                        "default",
                        &format!("--timeout={timeout}"),
                        if what == "FullyApplied" {
                            "rb/nginx-deployment"
                        } else {
                            "deploy/nginx"
                        },
                    ],
                )
            };
            let fully_applied = wait("FullyApplied", "30s");
            let available = wait("Available", "60s");
            let after = clusters_seen(&bin, &d);
            let conditions = |d: &Path| {
                kubectl(
                    &bin,
                    d,
                    &[
                        "get",
                        "rb/nginx-deployment",
                        "deploy/nginx",
                        "-n",
                        "default",
                        "-o",
                        "jsonpath={range .items[*]}{.kind}{range .status.conditions[*]} {.type}={.status}/{.reason}/{.message}@{.lastTransitionTime}{end}{\"\\n\"}{end}",
                    ],
                )
            };
            let first = conditions(&d);
            // Several simulator, execution and binding rounds later: nothing flapped.
            std::thread::sleep(Duration::from_millis(1500));
            (before, applied, fully_applied, available, after, (first, conditions(&d)))
        })
        .await
        .expect("join");
    assert!(
        applied.contains("deployment.apps/nginx created"),
        "{applied}"
    );
    assert!(
        !applied.contains("cluster"),
        "the walkthrough applies no Cluster: {applied}"
    );
    assert_eq!(
        before.as_array().map(Vec::len),
        Some(2),
        "two simulated members: {before}"
    );
    assert_eq!(before, after, "applying the walkthrough changed a Cluster");
    assert!(
        fully_applied.0,
        "kubectl 1.{minor} wait FullyApplied: {}",
        fully_applied.1
    );
    assert!(
        fully_applied.1.contains("condition met"),
        "{}",
        fully_applied.1
    );
    assert!(
        available.0,
        "kubectl 1.{minor} wait Available: {}",
        available.1
    );
    let (first, later) = conditions;
    assert!(
        first.contains(
            "FullyApplied=True/FullyAppliedSuccess/All works have been successfully applied@"
        ),
        "{first}"
    );
    assert!(
        first.contains("Available=True/MinimumReplicasAvailable/")
            && first.contains("Progressing=True/NewReplicaSetAvailable/"),
        "{first}"
    );
    assert_eq!(
        first, later,
        "conditions changed without a change of the members"
    );
    let _ = stop.send(());
    let _ = running.task.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_waits_for_fully_applied_and_available_after_the_walkthrough() {
    walkthrough_waits(33).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_waits_for_fully_applied_and_available_after_the_walkthrough() {
    walkthrough_waits(27).await;
}

/// A member whose copy stops being available turns the template's `Available` False (and back
/// when it recovers), which `kubectl wait --for=condition=Available=false` sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_member_copy_makes_the_template_unavailable_until_it_recovers() {
    let Some(bin) = kubectl_release(33) else {
        eprintln!("skipping: no kubectl 1.33");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (stop, running, _controllers) = up(dir.path()).await;
    let member = dir.path().join("member1");
    std::fs::create_dir_all(&member).expect("dir");
    std::fs::write(
        member.join("kubeconfig"),
        running
            .kubeconfig
            .replace(&running.url, &format!("{}/clusters/member1", running.url)),
    )
    .expect("kubeconfig");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx");
    let d = dir.path().to_owned();
    let steps = tokio::task::spawn_blocking(move || {
        kubectl(&bin, &d, &["apply", "-f", &examples.to_string_lossy()]);
        let wait = |for_: &str| {
            kubectl_status(
                &bin,
                &d,
                &["wait", for_, "-n", "default", "--timeout=30s", "deploy/nginx"],
            )
        };
        let mut steps = vec![wait("--for=condition=Available")];
        // The member copy exists once the template is available.
        let annotate = |value: &str| {
            kubectl(
                &bin,
                &member,
                &[
                    "annotate",
                    "--overwrite",
                    "-n",
                    "default",
                    "deploy/nginx",
                    &format!("flotilla.dev/simulate-unavailable={value}"),
                ],
            )
        };
        annotate("true");
        steps.push(wait("--for=condition=Available=false"));
        steps.push(kubectl_status(
            &bin,
            &d,
            &[
                "get",
                "deploy/nginx",
                "-n",
                "default",
                "-o",
                "jsonpath={.status.availableReplicas} {.status.conditions[?(@.type==\"Available\")].reason}",
            ],
        ));
        annotate("false");
        steps.push(wait("--for=condition=Available"));
        steps
    })
    .await
    .expect("join");
    for (i, (ok, out)) in steps.iter().enumerate() {
        assert!(ok, "step {i}: {out}");
    }
    assert_eq!(
        steps[2].1, "1 MinimumReplicasUnavailable",
        "one of two replicas is available"
    );
    let _ = stop.send(());
    let _ = running.task.await;
}
