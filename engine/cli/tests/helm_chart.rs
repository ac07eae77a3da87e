//! The Helm chart (deploy/helm/flotilla) against a real kube-apiserver: `helm template` output is
//! applied server-side (first with `--dry-run=server`, then for real) to kube-apiserver + etcd
//! with the CRDs of deploy/crds, and the chart's ServiceAccount is checked with
//! SubjectAccessReviews (`kubectl auth can-i --as`): it may do what the controllers do and not
//! what they never do (create Secrets, delete resource templates, write RBAC), and a Pull
//! agent's identity (`flotilla join --mode pull`) may touch its own cluster only. Then
//! `flotilla controllers` runs with a token of the chart's ServiceAccount: it propagates to two
//! Push members, fails one over when it goes away (taints, eviction task, new placement,
//! Events), reports a customization whose target kind the chart does not grant and watches
//! that kind once the chart's `templateResources` grants it, all without a Forbidden in its log.
//!
//! Binaries: helm from `$HELM_BIN` or `target/helm` (tests/run.sh builds it from tests/helm),
//! etcd and kube-apiserver from `$FLOTILLA_REAL_APISERVER_BIN` or `target/real-apiserver/bin`,
//! kubectl from `$KUBECTL` or `PATH`. Without them the test skips with a printed reason, unless
//! `FLOTILLA_REQUIRE_HELM=1` (set by `tests/run.sh`), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn need<T>(what: Option<T>, reason: &str) -> Option<T> {
    if what.is_none() {
        let required =
            std::env::var("FLOTILLA_REQUIRE_HELM").is_ok_and(|v| !v.is_empty() && v != "0");
        assert!(!required, "FLOTILLA_REQUIRE_HELM is set but {reason}");
        eprintln!("skipping: {reason}");
    }
    what
}

fn file_from(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map_or(default, PathBuf::from)
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

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn ok(cmd: &mut Command) -> String {
    run(cmd).unwrap_or_else(|e| panic!("{e}"))
}

/// kube-apiserver #N started by `tests/real-apiserver.sh start`, stopped on drop.
struct RealApiserver {
    base: PathBuf,
    n: u16,
}

impl Drop for RealApiserver {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("tests/real-apiserver.sh"))
            .args(["stop", &self.n.to_string()])
            .env("BASE", &self.base)
            .status();
    }
}

#[test]
fn the_chart_applies_server_side_to_a_real_kube_apiserver_with_least_privilege_rbac() {
    let helm = file_from("HELM_BIN", root().join("target/helm"));
    let Some(helm) = need(
        helm.is_file().then_some(helm.clone()),
        &format!(
            "no helm at {} (tests/run.sh builds it from tests/helm)",
            helm.display()
        ),
    ) else {
        return;
    };
    let bin = file_from(
        "FLOTILLA_REAL_APISERVER_BIN",
        root().join("target/real-apiserver/bin"),
    );
    let Some(bin) = need(
        ["etcd", "kube-apiserver"]
            .iter()
            .all(|b| bin.join(b).is_file())
            .then_some(bin.clone()),
        &format!("no etcd and kube-apiserver in {}", bin.display()),
    ) else {
        return;
    };
    let Some(kubectl) = kubectl() else { return };

    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-helm-chart");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("mkdir");
    std::os::unix::fs::symlink(&bin, base.join("bin")).expect("symlink the binaries");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // #9: etcd on 23880-23882, away from the scripts' examples (#0-#3).
    let server = RealApiserver {
        base: base.clone(),
        n: 9,
    };
    ok(Command::new("bash")
        .arg(root().join("tests/real-apiserver.sh"))
        .args(["start", "9", &port.to_string()])
        .env("BASE", &base));
    let kc = base.join("run9/kubeconfig");
    let k = |args: &[&str]| {
        let mut c = Command::new(&kubectl);
        c.args(args).arg("--kubeconfig").arg(&kc);
        c
    };

    let crds = root().join("deploy/crds").display().to_string();
    ok(&mut k(&["apply", "--server-side", "-f", &crds]));
    ok(&mut k(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd",
        "--all",
    ]));
    ok(&mut k(&["create", "namespace", "flotilla-system"]));
    // By default the chart creates karmada-cluster; a server dry run cannot create a namespace
    // and then a Role in it, so here it exists first (as after `flotilla join`).
    let chart = root().join("deploy/helm/flotilla").display().to_string();
    let defaults = ok(Command::new(&helm).args(["template", "flotilla", &chart]));
    assert!(
        defaults.contains("kind: Namespace\nmetadata:\n  name: karmada-cluster"),
        "the chart creates karmada-cluster by default:\n{defaults}"
    );
    ok(&mut k(&["create", "namespace", "karmada-cluster"]));

    let rendered = ok(Command::new(&helm).args([
        "template",
        "flotilla",
        &chart,
        "--namespace",
        "flotilla-system",
        "--set",
        "moduleConfigMap=flotilla-modules,clusterNamespace.create=false",
        "--set-json",
        r#"profiles={"spread":{"scores":[{"name":"ClusterLocality"}]}}"#,
    ]));
    let manifest = base.join("rendered.yaml");
    std::fs::write(&manifest, &rendered).expect("write the rendered chart");
    let manifest = manifest.display().to_string();
    for kind in [
        "kind: Deployment",
        "kind: ClusterRole",
        "kind: ServiceAccount",
        "kind: SchedulerProfile",
    ] {
        assert!(rendered.contains(kind), "{kind} rendered:\n{rendered}");
    }
    assert!(
        !rendered.contains(r#"resources: ["*"]"#) || !rendered.contains(r#"verbs: ["*"]"#),
        "no wildcard verbs on wildcard resources"
    );
    for want in [
        "path: /healthz",
        "path: /readyz",
        "--module-store-dir=/var/lib/flotilla/modules",
        "--module-dir=/etc/flotilla/modules",
        "readOnlyRootFilesystem: true",
        "--leader-elect-lease-duration=15",
    ] {
        assert!(rendered.contains(want), "{want} in:\n{rendered}");
    }

    // Server-side: the dry run validates every object against the server's schemas (including
    // the CRDs' for the SchedulerProfile), then the real apply.
    ok(&mut k(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        &manifest,
    ]));
    ok(&mut k(&["apply", "--server-side", "-f", &manifest]));
    let deployment = ok(&mut k(&[
        "get",
        "deployment",
        "flotilla",
        "-n",
        "flotilla-system",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].livenessProbe.httpGet.path} {.spec.template.spec.volumes[0].emptyDir.sizeLimit}",
    ]));
    assert_eq!(deployment.trim(), "/healthz 256Mi");

    // The ServiceAccount's permissions, as kube-apiserver's RBAC authorizer answers them. A
    // resource `plural.group/sub` is checked on its subresource `sub` (`--subresource`);
    // `plural.group/sub@name` on the object `name` only.
    let can_as = |who: &str, verb: &str, resource: &str, ns: Option<&str>| -> bool {
        let (resource, name) = resource.split_once('@').unwrap_or((resource, ""));
        let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
        let target = if name.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}/{name}")
        };
        let mut c = k(&["auth", "can-i", verb, &target, "--as", who]);
        if !sub.is_empty() {
            c.arg(format!("--subresource={sub}"));
        }
        match ns {
            Some(ns) => c.args(["-n", ns]),
            None => c.arg("--all-namespaces"),
        };
        let out = c.output().expect("kubectl auth can-i");
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    let sa = "system:serviceaccount:flotilla-system:flotilla";
    let can = |verb: &str, resource: &str, ns: Option<&str>| can_as(sa, verb, resource, ns);
    for (verb, resource, ns) in [
        ("watch", "deployments.apps", None),
        ("patch", "deployments.apps", None),
        ("patch", "deployments.apps/status", None),
        ("get", "deployments.apps/scale", None),
        ("patch", "deployments.apps/scale", None),
        ("patch", "statefulsets.apps/scale", None),
        ("list", "propagationpolicies.policy.karmada.io", None),
        ("create", "resourcebindings.work.karmada.io", None),
        ("delete", "works.work.karmada.io", None),
        ("patch", "clusters.cluster.karmada.io/status", None),
        ("get", "secrets", Some("karmada-cluster")),
        ("create", "namespaces", None),
        ("create", "events", Some("default")),
        (
            "update",
            "leases.coordination.k8s.io",
            Some("flotilla-system"),
        ),
        (
            "patch",
            "leases.coordination.k8s.io",
            Some("karmada-cluster"),
        ),
        (
            "get",
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
        ),
        // Cluster failover: taints on the Cluster, eviction tasks and the new placement on the
        // binding (spec and status), Events about both.
        ("patch", "clusters.cluster.karmada.io", None),
        ("patch", "resourcebindings.work.karmada.io", None),
        ("patch", "resourcebindings.work.karmada.io/status", None),
        ("patch", "clusterresourcebindings.work.karmada.io", None),
        ("patch", "events", Some("default")),
        // FederatedHPA and CronFederatedHPA: read, status written, templates scaled through
        // /scale, a FederatedHPA's bounds patched by a CronFederatedHPA rule.
        ("watch", "federatedhpas.autoscaling.karmada.io", None),
        ("patch", "federatedhpas.autoscaling.karmada.io/status", None),
        ("patch", "federatedhpas.autoscaling.karmada.io", None),
        ("list", "cronfederatedhpas.autoscaling.karmada.io", None),
        (
            "update",
            "cronfederatedhpas.autoscaling.karmada.io/status",
            None,
        ),
        // A Pull member, as the control plane sees it: Works in its execution namespace (the
        // agent applies them), its Lease read by the monitor, its Ready condition written
        // when the Lease runs out.
        (
            "create",
            "works.work.karmada.io",
            Some("karmada-es-member3"),
        ),
        ("watch", "works.work.karmada.io", Some("karmada-es-member3")),
        (
            "list",
            "leases.coordination.k8s.io",
            Some("karmada-cluster"),
        ),
        ("update", "clusters.cluster.karmada.io/status", None),
        // Dependencies (propagateDeps) and the customizations that add template kinds.
        ("list", "serviceaccounts", None),
        ("get", "persistentvolumeclaims", None),
        ("patch", "persistentvolumeclaims/status", None),
        (
            "watch",
            "resourceinterpretercustomizations.config.karmada.io",
            None,
        ),
        ("list", "priorityclasses.scheduling.k8s.io", None),
    ] {
        assert!(
            can(verb, resource, ns),
            "the controllers need {verb} {resource}"
        );
    }
    for (verb, resource, ns) in [
        ("create", "secrets", Some("karmada-cluster")),
        ("delete", "deployments.apps", None),
        ("create", "deployments.apps", None),
        ("delete", "namespaces", None),
        ("patch", "namespaces", None),
        (
            "create",
            "clusterrolebindings.rbac.authorization.k8s.io",
            None,
        ),
        ("update", "leases.coordination.k8s.io", Some("default")),
        ("delete", "propagationpolicies.policy.karmada.io", None),
        ("delete", "clusters.cluster.karmada.io", None),
        ("create", "clusters.cluster.karmada.io", None),
        ("create", "federatedhpas.autoscaling.karmada.io", None),
        ("delete", "federatedhpas.autoscaling.karmada.io", None),
        ("patch", "cronfederatedhpas.autoscaling.karmada.io", None),
        (
            "create",
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
        ),
        ("patch", "serviceaccounts", None),
        ("create", "serviceaccounts/token", Some("karmada-cluster")),
        // Not granted: the customization below targets Jobs.
        ("list", "jobs.batch", None),
    ] {
        assert!(
            !can(verb, resource, ns),
            "the controllers never {verb} {resource}; the chart must not grant it"
        );
    }

    // Two Push members (member1, member2: `flotilla up` servers joined like karmadactl join)
    // and a Pull member (member3, joined for its agent; no agent runs here).
    let (_member1, member1_kc) = common::up(
        &base.join("member1"),
        &["--members", "0", "--no-controllers"],
        true,
    );
    let (member2, member2_kc) = common::up(
        &base.join("member2"),
        &["--members", "0", "--no-controllers"],
        true,
    );
    for (name, member_kc) in [("member1", &member1_kc), ("member2", &member2_kc)] {
        ok(Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["join", name, "--kubeconfig"])
            .arg(&kc)
            .arg("--member-kubeconfig")
            .arg(member_kc));
    }
    ok(Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["join", "member3", "--mode", "pull", "--kubeconfig"])
        .arg(&kc)
        .arg("--agent-kubeconfig")
        .arg(base.join("agent-kubeconfig")));
    // The Pull agent's own identity: its Works, its Cluster's status, its Lease; nobody
    // else's.
    let agent = "system:serviceaccount:karmada-cluster:karmada-agent-member3";
    for (verb, resource, ns) in [
        ("watch", "works.work.karmada.io", Some("karmada-es-member3")),
        (
            "patch",
            "works.work.karmada.io/status",
            Some("karmada-es-member3"),
        ),
        ("patch", "clusters.cluster.karmada.io/status@member3", None),
        ("get", "clusters.cluster.karmada.io@member3", None),
        (
            "update",
            "leases.coordination.k8s.io@member3",
            Some("karmada-cluster"),
        ),
        ("create", "events", Some("default")),
        (
            "list",
            "resourceinterpretercustomizations.config.karmada.io",
            None,
        ),
    ] {
        assert!(
            can_as(agent, verb, resource, ns),
            "member3's agent needs {verb} {resource} in {ns:?}"
        );
    }
    for (verb, resource, ns) in [
        (
            "patch",
            "works.work.karmada.io/status",
            Some("karmada-es-member1"),
        ),
        (
            "create",
            "works.work.karmada.io",
            Some("karmada-es-member3"),
        ),
        ("patch", "clusters.cluster.karmada.io/status@member1", None),
        (
            "update",
            "leases.coordination.k8s.io@member1",
            Some("karmada-cluster"),
        ),
        ("get", "secrets", Some("karmada-cluster")),
    ] {
        assert!(
            !can_as(agent, verb, resource, ns),
            "member3's agent must not {verb} {resource} in {ns:?}"
        );
    }

    // A customization whose target kind the chart does not grant (Jobs; templateResources
    // would): the controllers say so (log and Warning Event) and run without it, instead of
    // waiting forever for a cache that may not list or restarting every 10 s.
    let ric = base.join("job-customization.yaml");
    std::fs::write(
        &ric,
        "apiVersion: config.karmada.io/v1alpha1\n\
         kind: ResourceInterpreterCustomization\n\
         metadata:\n  name: jobs\n\
         spec:\n  target:\n    apiVersion: batch/v1\n    kind: Job\n\
         \x20 customizations:\n    replicaResource:\n      luaScript: |\n\
         \x20       function GetReplicas(obj)\n\
         \x20         return obj.spec.parallelism, {}\n\
         \x20       end\n",
    )
    .expect("write the customization");
    ok(&mut k(&["apply", "-f", &ric.display().to_string()]));

    // The RBAC suffices: `flotilla controllers` with a token of the chart's ServiceAccount
    // propagates the nginx example (with its override) to both Push members, fails member2
    // over when it goes away, and kube-apiserver denies it nothing on the way.
    let token = ok(&mut k(&[
        "create",
        "token",
        "flotilla",
        "-n",
        "flotilla-system",
        "--duration=1h",
    ]));
    let admin: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&kc).expect("kubeconfig")).expect("yaml");
    let mut sa_kc = admin.clone();
    sa_kc["users"] = serde_json::json!([{"name": "flotilla", "user": {"token": token.trim()}}]);
    sa_kc["contexts"][0]["context"]["user"] = serde_json::json!("flotilla");
    let sa_kc_path = base.join("sa-kubeconfig");
    std::fs::write(&sa_kc_path, serde_yaml::to_string(&sa_kc).expect("yaml")).expect("write");
    let log_path = base.join("controllers.log");
    let log = std::fs::File::create(&log_path).expect("log");
    let controllers_started = std::time::Instant::now();
    let _controllers = common::Proc(
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args([
                "controllers",
                "--leader-elect",
                "--leader-elect-namespace=flotilla-system",
                "--leader-elect-identity=chart-sa",
                // Failover within seconds: members probed every 3 s (a probe may take as
                // long), not ready after 2 s of failed probes.
                "--cluster-status-update-frequency=3",
                "--cluster-failure-threshold=2",
                "--kubeconfig",
            ])
            .arg(&sa_kc_path)
            .env(
                "RUST_LOG",
                "info,flotilla_controller::controller::status=debug",
            )
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("flotilla controllers"),
    );
    let controllers_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let wait = |what: &str, timeout: u64, check: &mut dyn FnMut() -> bool| {
        let started = std::time::Instant::now();
        while !check() {
            if started.elapsed() > std::time::Duration::from_secs(timeout) {
                let clusters = run(&mut k(&[
                    "get",
                    "clusters,resourcebindings",
                    "-A",
                    "-o",
                    "yaml",
                ]))
                .unwrap_or_else(|e| e);
                panic!(
                    "{what}: not within {timeout} s with the chart's RBAC; controllers log:\n{}\n\n{clusters}",
                    controllers_log()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        eprintln!(
            "with the chart's ServiceAccount: {what} after {:?}",
            started.elapsed()
        );
    };
    let get = |kubeconfig: &Path, args: &[&str]| -> String {
        let out = Command::new(&kubectl)
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .output()
            .expect("kubectl");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let copy = "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}";
    let copy_of = |member_kc: &Path| {
        get(
            member_kc,
            &["get", "deployment", "nginx", "-n", "default", "-o", copy],
        )
    };
    // Both members Ready and untainted first: a binding placed while one is still tainted
    // unreachable (no status yet) goes wholly to the other and stays there, as Karmada's does.
    wait("member1 and member2 Ready, without taints", 60, &mut || {
        ["member1", "member2"].iter().all(|m| {
            get(
                &kc,
                &[
                    "get",
                    "cluster",
                    m,
                    "-o",
                    r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}"#,
                ],
            )
            .trim_end_matches("[]")
                == "True/"
        })
    });
    let nginx = root().join("examples/nginx").display().to_string();
    ok(&mut k(&["apply", "-f", &nginx]));
    wait("nginx copies 1/1 in member1/member2", 90, &mut || {
        copy_of(&member1_kc) == "1 nginx:1.27"
            && copy_of(&member2_kc) == "1 registry.member2.example/nginx:1.27"
    });

    // member2 goes away: not ready after the failure threshold, tainted NoExecute by the
    // controllers, its replica evicted (an eviction task on the binding) and placed on member1.
    drop(member2);
    let mut eviction_tasks = String::new();
    wait(
        "member2 tainted NoExecute and its replica moved to member1",
        60,
        &mut || {
            let tasks = get(
                &kc,
                &[
                    "get",
                    "resourcebinding",
                    "nginx-deployment",
                    "-n",
                    "default",
                    "-o",
                    "jsonpath={.spec.gracefulEvictionTasks}",
                ],
            );
            if !tasks.is_empty() {
                eviction_tasks = tasks;
            }
            get(
                &kc,
                &[
                    "get",
                    "cluster",
                    "member2",
                    "-o",
                    r#"jsonpath={.spec.taints[?(@.effect=="NoExecute")].key}"#,
                ],
            ) == "cluster.karmada.io/not-ready"
                && get(
                    &kc,
                    &[
                        "get",
                        "resourcebinding",
                        "nginx-deployment",
                        "-n",
                        "default",
                        "-o",
                        "jsonpath={.spec.clusters}",
                    ],
                ) == r#"[{"name":"member1","replicas":2}]"#
                && copy_of(&member1_kc) == "2 nginx:1.27"
        },
    );
    if eviction_tasks.is_empty() {
        eprintln!("the eviction task was gone before a poll saw it");
    } else {
        eprintln!("eviction tasks seen on the binding: {eviction_tasks}");
    }
    wait("the rescheduling Event on the binding", 30, &mut || {
        get(
            &kc,
            &[
                "get",
                "events",
                "-n",
                "default",
                "--field-selector",
                "reason=ScheduleBindingSucceed",
                "-o",
                "jsonpath={.items[*].message}",
            ],
        )
        .contains("Result: {member1:2}")
    });
    wait(
        "the Warning Event on the Job customization",
        30,
        &mut || {
            get(
                &kc,
                &[
                    "get",
                    "events",
                    "-n",
                    "default",
                    "--field-selector",
                    "reason=TemplateKindForbidden,involvedObject.name=jobs",
                    "-o",
                    "jsonpath={.items[*].message}",
                ],
            )
            .contains("may not list jobs")
        },
    );
    // At least one more round of the customizations' 10 s re-check, and of the Leases.
    if let Some(rest) =
        std::time::Duration::from_secs(13).checked_sub(controllers_started.elapsed())
    {
        std::thread::sleep(rest);
    }
    let log = controllers_log();
    assert!(
        log.contains("member registered cluster=member1"),
        "the controllers ran:\n{log}"
    );
    assert!(
        log.contains("evicting from clusters with untolerated NoExecute taints"),
        "the failover was the controllers' taint eviction:\n{log}"
    );
    // The Job customization: reported once, not watched, no restart loop.
    let refusal = "ResourceInterpreterCustomization jobs targets batch/v1 Job";
    assert_eq!(
        log.matches(refusal).count(),
        1,
        "the Job customization is reported once:\n{log}"
    );
    assert!(
        !log.contains("restarting the controllers to watch it"),
        "no restart for a kind the controllers may not list:\n{log}"
    );
    let denied: Vec<&str> = log
        .lines()
        .filter(|l| !l.contains(refusal))
        .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
        .collect();
    assert!(
        denied.is_empty(),
        "kube-apiserver denied the chart's ServiceAccount something:\n{}\n\nlog:\n{log}",
        denied.join("\n")
    );

    // The chart's templateResources grant Jobs: the controllers pick the customization's
    // target up at their next re-check (10 s) and watch it, still denied nothing.
    let granted = ok(Command::new(&helm).args([
        "template",
        "flotilla",
        &chart,
        "--namespace",
        "flotilla-system",
        "--set",
        "moduleConfigMap=flotilla-modules,clusterNamespace.create=false",
        "--set-json",
        r#"profiles={"spread":{"scores":[{"name":"ClusterLocality"}]}}"#,
        "--set-json",
        r#"templateResources=[{"apiGroup":"batch","resource":"jobs"}]"#,
    ]));
    let granted_manifest = base.join("rendered-jobs.yaml");
    std::fs::write(&granted_manifest, &granted).expect("write the rendered chart");
    ok(&mut k(&[
        "apply",
        "--server-side",
        "-f",
        &granted_manifest.display().to_string(),
    ]));
    assert!(can("watch", "jobs.batch", None) && can("patch", "jobs.batch/status", None));
    wait(
        "the Job customization's target watched once granted",
        30,
        &mut || {
            let log = controllers_log();
            log.contains("restarting the controllers to watch it")
            && log.contains(r#"template kind from a ResourceInterpreterCustomization api_version="batch/v1" kind="Job""#)
        },
    );
    std::thread::sleep(std::time::Duration::from_secs(1));
    let log = controllers_log();
    let denied: Vec<&str> = log
        .lines()
        .filter(|l| !l.contains(refusal))
        .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
        .collect();
    assert!(
        denied.is_empty(),
        "denied after the restart:\n{}\n\nlog:\n{log}",
        denied.join("\n")
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&base);
}
