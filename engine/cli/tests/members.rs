//! `flotilla join` and `flotilla agent` against a running `flotilla up`: the member is a logical
//! cluster of that same server reached over its TLS endpoint (`<url>/clusters/<name>`), so it is
//! a real network member with its own credentials check.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

/// `flotilla up` on a free port with no simulated members, killed on drop.
struct Up {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`Up::start`] with more `flotilla up` arguments.
    fn start_with(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["up", "--port", "0", "--members", "0"])
            .args(args)
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
        let mut url = String::new();
        loop {
            assert!(Instant::now() < deadline, "flotilla up did not get ready");
            match lines.next() {
                Some(Ok(l)) if l.starts_with("ready in") => break,
                Some(Ok(l)) => {
                    if let Some(u) = l.strip_prefix("flotilla API server listening on ") {
                        u.trim().clone_into(&mut url);
                    }
                }
                _ => panic!("flotilla up exited before it was ready: {:?}", child.wait()),
            }
        }
        std::thread::spawn(move || lines.for_each(drop));
        assert!(url.starts_with("https://"), "{url}");
        Up { child, url, dir }
    }

    fn kubeconfig(&self) -> std::path::PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// A kubeconfig for logical cluster `name` of this server.
    fn member_kubeconfig(&self, name: &str) -> std::path::PathBuf {
        let text = std::fs::read_to_string(self.kubeconfig()).expect("kubeconfig");
        let member = text.replace(&self.url, &format!("{}/clusters/{name}", self.url));
        assert_ne!(member, text, "the server URL is in the kubeconfig");
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        std::fs::write(&path, member).expect("write member kubeconfig");
        path
    }
}

fn flotilla(args: &[&str], paths: &[(&str, &Path)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flotilla"));
    cmd.args(args);
    for (flag, p) in paths {
        cmd.arg(flag).arg(p);
    }
    cmd.output().expect("flotilla runs")
}

/// `flotilla <args>` that must succeed; its stdout.
fn succeeded(args: &[&str], paths: &[(&str, &Path)]) -> String {
    let out = flotilla(args, paths);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "flotilla {} failed: {stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The Clusters of the control plane `client` talks to.
fn clusters_api(client: &kube::Client) -> Api<DynamicObject> {
    api(
        client,
        "cluster.karmada.io",
        "v1alpha1",
        "Cluster",
        "clusters",
        None,
    )
}

async fn control(up: &Up) -> kube::Client {
    client_for(&up.kubeconfig(), true).await
}

/// A client for `kubeconfig`; `retry`: kube-rs's default retries of 429, 503 and 504 (with
/// backoff, for minutes).
async fn client_for(kubeconfig: &Path, retry: bool) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("config");
    config.default_retry = retry;
    kube::Client::try_from(config).expect("client")
}

fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let r = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &r),
        None => Api::all_with(client.clone(), &r),
    }
}

/// `GET <path>/<name>` on member `cluster` through Karmada's cluster proxy on the control plane.
async fn proxied(
    client: &kube::Client,
    cluster: &str,
    path: &str,
    name: &str,
) -> Result<Value, kube::Error> {
    let req = kube::core::Request::new(format!(
        "/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}/proxy{path}"
    ))
    .get(name, &kube::api::GetParams::default())
    .expect("request");
    let text = client.request_text(req).await?;
    Ok(serde_json::from_str(&text).expect("JSON"))
}

async fn ready_status(clusters: &Api<DynamicObject>, name: &str) -> Option<String> {
    let c = clusters.get_opt(name).await.ok()??;
    let cond = c
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|x| x["type"] == "Ready")?
        .clone();
    cond["status"].as_str().map(str::to_owned)
}

async fn eventually_ready(clusters: &Api<DynamicObject>, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while ready_status(clusters, name).await.as_deref() != Some("True") {
        assert!(
            Instant::now() < deadline,
            "cluster {name} never became Ready: {:?}",
            clusters.get_opt(name).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_registers_a_push_cluster_with_a_karmada_secret_and_agent_a_pull_cluster() {
    let up = Up::start();
    let member = up.member_kubeconfig("edge");
    let out = flotilla(
        &["join", "edge"],
        &[
            ("--kubeconfig", &up.kubeconfig()),
            ("--member-kubeconfig", &member),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "join failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("cluster edge joined (Push)") && stdout.contains("karmada-cluster/edge"),
        "{stdout}"
    );

    let client = control(&up).await;
    let clusters = clusters_api(&client);
    let c = clusters.get("edge").await.expect("Cluster edge");
    assert_eq!(c.data["spec"]["syncMode"], json!("Push"));
    assert_eq!(
        c.data["spec"]["secretRef"],
        json!({"namespace": "karmada-cluster", "name": "edge"})
    );
    assert_eq!(
        c.data["spec"]["apiEndpoint"],
        json!(format!("{}/clusters/edge", up.url))
    );
    let secret = api(
        &client,
        "",
        "v1",
        "Secret",
        "secrets",
        Some("karmada-cluster"),
    )
    .get("edge")
    .await
    .expect("Secret");
    let mut keys: Vec<&String> = secret.data["data"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    keys.sort();
    assert_eq!(keys, ["caBundle", "token"], "Karmada's Secret shape");
    // The control plane builds a client from that Secret and probes the member.
    eventually_ready(&clusters, "edge").await;
    let c = clusters.get("edge").await.expect("Cluster edge");
    assert!(
        c.data
            .pointer("/status/kubernetesVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with('v')),
        "{:?}",
        c.data["status"]
    );

    // Karmada's cluster proxy reaches the member at its endpoint, over TLS with the Secret's
    // token and CA: what is read through it is the member's own.
    let member_client = client_for(&member, true).await;
    // The proxy's 503 for a Pull cluster is final: no retries.
    let proxy_client = client_for(&up.kubeconfig(), false).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "only-in-edge", "namespace": "default"}});
    api(
        &member_client,
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        Some("default"),
    )
    .create(
        &kube::api::PostParams::default(),
        &serde_json::from_value(cm).expect("ConfigMap"),
    )
    .await
    .expect("create in the member");
    let got = proxied(
        &proxy_client,
        "edge",
        "/api/v1/namespaces/default/configmaps",
        "only-in-edge",
    )
    .await
    .expect("the member's ConfigMap through the proxy");
    assert_eq!(got["metadata"]["name"], json!("only-in-edge"));
    match proxied(&proxy_client, "edge", "/api/v1/namespaces", "absent").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404, "{s:?}"),
        other => panic!("expected the member's 404: {other:?}"),
    }

    // Joining again, or under a bad name, is refused with a clear message.
    let again = flotilla(
        &["join", "edge"],
        &[
            ("--kubeconfig", &up.kubeconfig()),
            ("--member-kubeconfig", &member),
        ],
    );
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("cluster edge: already exists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let bad = flotilla(
        &["join", "Edge_1"],
        &[
            ("--kubeconfig", &up.kubeconfig()),
            ("--member-kubeconfig", &member),
        ],
    );
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("DNS-1123"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );

    // `flotilla agent` registers a Pull cluster and reports it Ready.
    let pulled = up.member_kubeconfig("pulled");
    let mut agent = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args([
            "agent",
            "--cluster-name",
            "pulled",
            "--cluster-status-update-frequency",
            "1",
        ])
        .arg("--kubeconfig")
        .arg(up.kubeconfig())
        .arg("--member-kubeconfig")
        .arg(&pulled)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("flotilla agent starts");
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let c = clusters.get_opt("pulled").await.ok().flatten();
        if c.as_ref()
            .is_some_and(|c| c.data["spec"]["syncMode"] == json!("Pull"))
            && ready_status(&clusters, "pulled").await.as_deref() == Some("True")
        {
            break;
        }
        assert!(
            agent.try_wait().expect("agent status").is_none(),
            "the agent exited early"
        );
        assert!(
            Instant::now() < deadline,
            "the agent never registered a Ready Pull cluster: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let leases = api(
        &client,
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        Some("karmada-cluster"),
    );
    // A Pull cluster is not reachable from the control plane: the proxy says so.
    match proxied(&proxy_client, "pulled", "/api/v1/namespaces", "default").await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (503, "ServiceUnavailable"));
            assert!(s.message.contains("Pull mode"), "{}", s.message);
        }
        other => panic!("expected 503 for a Pull cluster: {other:?}"),
    }
    let lease = leases.get("pulled").await.expect("the agent's Lease");
    assert_eq!(
        lease.data["spec"]["holderIdentity"],
        json!("flotilla-agent")
    );
    let _ = agent.kill();
    let _ = agent.wait();
}

/// Assert `res` is kube-apiserver's 403 for `user`, with `message`.
fn assert_forbidden<T: std::fmt::Debug>(res: Result<T, kube::Error>, message: &str) {
    match res {
        Err(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str(), s.is_failure()),
                (403, "Forbidden", true),
                "{s:?}"
            );
            assert_eq!(s.message, message);
        }
        other => panic!("expected 403 ({message}): {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_agent_runs_with_scoped_credentials_that_reach_only_its_own_cluster() {
    let up = Up::start();
    let creds = up.dir.path().join("agent.kubeconfig");
    let stdout = succeeded(
        &["join", "scoped", "--mode", "pull"],
        &[
            ("--kubeconfig", &up.kubeconfig()),
            ("--agent-kubeconfig", &creds),
        ],
    );
    assert!(
        stdout.contains("ServiceAccount karmada-cluster/karmada-agent-scoped")
            && stdout.contains("Role/karmada-es-scoped/system:karmada:scoped:agent-work"),
        "{stdout}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&creds)
            .expect("kubeconfig")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the agent kubeconfig holds a token");
    }
    let text = std::fs::read_to_string(&creds).expect("agent kubeconfig");
    let admin_token = std::fs::read_to_string(up.kubeconfig()).expect("admin kubeconfig");
    assert!(
        !text.contains("system:masters")
            && admin_token
                .lines()
                .filter_map(|l| l.trim().strip_prefix("token:"))
                .all(|t| !text.contains(t.trim())),
        "the agent kubeconfig must not carry the admin token"
    );

    // Another Pull cluster, with a Work of its own.
    let admin = control(&up).await;
    let clusters = clusters_api(&admin);
    let pp = kube::api::PostParams::default();
    let obj = |v: Value| -> DynamicObject { serde_json::from_value(v).expect("object") };
    clusters
        .create(&pp, &obj(json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "other"}, "spec": {"syncMode": "Pull"}})))
        .await
        .expect("Cluster other");
    api(&admin, "", "v1", "Namespace", "namespaces", None)
        .create(&pp, &obj(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-es-other"}})))
        .await
        .expect("namespace karmada-es-other");
    let work = |name: &str, ns: &str| {
        obj(json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}},
            ]}},
        }))
    };
    let works_of = |ns: &str| {
        api(
            &admin,
            "work.karmada.io",
            "v1alpha1",
            "Work",
            "works",
            Some(ns),
        )
    };
    works_of("karmada-es-other")
        .create(&pp, &work("theirs", "karmada-es-other"))
        .await
        .expect("Work of other");

    // The agent runs with the scoped credentials only.
    let member = up.member_kubeconfig("scoped");
    let mut agent = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args([
            "agent",
            "--cluster-name",
            "scoped",
            "--cluster-status-update-frequency",
            "1",
        ])
        .arg("--kubeconfig")
        .arg(&creds)
        .arg("--member-kubeconfig")
        .arg(&member)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("flotilla agent starts");
    works_of("karmada-es-scoped")
        .create(&pp, &work("mine", "karmada-es-scoped"))
        .await
        .expect("Work of scoped");
    let member_client = client_for(&member, true).await;
    let cms = api(
        &member_client,
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        Some("default"),
    );
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let ready = ready_status(&clusters, "scoped").await;
        let applied = works_of("karmada-es-scoped")
            .get("mine")
            .await
            .ok()
            .and_then(|w| {
                w.data
                    .pointer("/status/conditions")?
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "Applied")
                    .map(|c| c["status"].clone())
            });
        if ready.as_deref() == Some("True")
            && applied == Some(json!("True"))
            && cms.get_opt("mine").await.ok().flatten().is_some()
        {
            break;
        }
        assert!(
            agent.try_wait().expect("agent status").is_none(),
            "the agent exited early"
        );
        assert!(
            Instant::now() < deadline,
            "the scoped agent never got Ready and applied its Work: Ready {ready:?}, Applied {applied:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let lease = api(
        &admin,
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        Some("karmada-cluster"),
    )
    .get("scoped")
    .await
    .expect("the agent's Lease");
    assert_eq!(
        lease.data["spec"]["holderIdentity"],
        json!("flotilla-agent")
    );
    assert!(
        cms.get_opt("theirs").await.expect("member read").is_none(),
        "another cluster's Work reached this member"
    );

    // The same credentials, used directly: their own cluster's objects yes, another's no.
    let scoped = client_for(&creds, false).await;
    let user = "system:serviceaccount:karmada-cluster:karmada-agent-scoped";
    let scoped_works = |ns: &str| {
        api(
            &scoped,
            "work.karmada.io",
            "v1alpha1",
            "Work",
            "works",
            Some(ns),
        )
    };
    let own = scoped_works("karmada-es-scoped")
        .list(&kube::api::ListParams::default())
        .await
        .expect("its own Works");
    assert_eq!(own.items.len(), 1);
    assert_forbidden(
        scoped_works("karmada-es-other")
            .list(&kube::api::ListParams::default())
            .await,
        &format!(
            "works.work.karmada.io is forbidden: User \"{user}\" cannot list resource \"works\" in API group \"work.karmada.io\" in the namespace \"karmada-es-other\""
        ),
    );
    assert_forbidden(
        scoped_works("karmada-es-other").get("theirs").await,
        &format!(
            "works.work.karmada.io \"theirs\" is forbidden: User \"{user}\" cannot get resource \"works\" in API group \"work.karmada.io\" in the namespace \"karmada-es-other\""
        ),
    );
    assert_forbidden(
        api(
            &scoped,
            "work.karmada.io",
            "v1alpha1",
            "Work",
            "works",
            None,
        )
        .list(&kube::api::ListParams::default())
        .await,
        &format!(
            "works.work.karmada.io is forbidden: User \"{user}\" cannot list resource \"works\" in API group \"work.karmada.io\" at the cluster scope"
        ),
    );
    let scoped_clusters = clusters_api(&scoped);
    scoped_clusters
        .get("scoped")
        .await
        .expect("its own Cluster");
    let taint = Patch::Merge(json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}));
    assert_forbidden(
        scoped_clusters
            .patch("other", &PatchParams::default(), &taint)
            .await,
        &format!(
            "clusters.cluster.karmada.io \"other\" is forbidden: User \"{user}\" cannot patch resource \"clusters\" in API group \"cluster.karmada.io\" at the cluster scope"
        ),
    );
    assert_forbidden(
        scoped_clusters
            .patch_status(
                "other",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"kubernetesVersion": "v0"}})),
            )
            .await,
        &format!(
            "clusters.cluster.karmada.io \"other\" is forbidden: User \"{user}\" cannot patch resource \"clusters/status\" in API group \"cluster.karmada.io\" at the cluster scope"
        ),
    );
    assert_forbidden(
        scoped_clusters.delete("scoped", &Default::default()).await,
        &format!(
            "clusters.cluster.karmada.io \"scoped\" is forbidden: User \"{user}\" cannot delete resource \"clusters\" in API group \"cluster.karmada.io\" at the cluster scope"
        ),
    );
    assert_forbidden(
        api(
            &scoped,
            "",
            "v1",
            "Secret",
            "secrets",
            Some("karmada-cluster"),
        )
        .list(&kube::api::ListParams::default())
        .await,
        &format!(
            "secrets is forbidden: User \"{user}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"karmada-cluster\""
        ),
    );
    assert_forbidden(
        api(
            &scoped,
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            Some("karmada-cluster"),
        )
        .patch("other", &PatchParams::apply("x").force(), &Patch::Apply(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "other"}})))
        .await,
        &format!("leases.coordination.k8s.io \"other\" is forbidden: User \"{user}\" cannot patch resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"karmada-cluster\""),
    );
    let _ = agent.kill();
    let _ = agent.wait();
}

/// The examples' Widget CRD, customization and Widget.
fn interpreter_example(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/interpreter")
        .join(file);
    serde_yaml::from_str(&std::fs::read_to_string(&path).expect("example reads"))
        .expect("example parses")
}

/// Entry 0 of a Work's `status.manifestStatuses`: `(status, health)`.
fn manifest_status(work: &DynamicObject) -> Option<(Value, String)> {
    let entry = work.data.pointer("/status/manifestStatuses/0")?;
    Some((
        entry.get("status").cloned().unwrap_or(Value::Null),
        entry["health"].as_str().unwrap_or("").to_owned(),
    ))
}

/// Pull member `crafted` joined to `up` (its agent's scoped kubeconfig written, the agent not
/// started), with the Widget CRD on the member only — the control plane sees Widgets inside
/// Works. Returns the agent's kubeconfig, the member's kubeconfig, an admin client of the
/// control plane and a client of the member.
async fn crafted_pull_member_with_widgets(
    up: &Up,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    kube::Client,
    kube::Client,
) {
    let creds = up.dir.path().join("agent.kubeconfig");
    succeeded(
        &["join", "crafted", "--mode", "pull"],
        &[
            ("--kubeconfig", &up.kubeconfig()),
            ("--agent-kubeconfig", &creds),
        ],
    );
    let admin = control(up).await;
    let member = up.member_kubeconfig("crafted");
    let member_client = client_for(&member, true).await;
    let crd: DynamicObject =
        serde_json::from_value(interpreter_example("crd.yaml")).expect("object");
    api(
        &member_client,
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        None,
    )
    .create(&kube::api::PostParams::default(), &crd)
    .await
    .expect("Widget CRD on the member");
    (creds, member, admin, member_client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_agent_applies_the_control_planes_interpreter_customizations() {
    let up = Up::start();
    let (creds, member, admin, member_client) = crafted_pull_member_with_widgets(&up).await;
    let pp = kube::api::PostParams::default();
    let obj = |v: Value| -> DynamicObject { serde_json::from_value(v).expect("object") };

    // Status and health of a Widget as only this customization tells them (Lua keeps the
    // member's `spec.size` when the Work is applied again).
    let mut ric = interpreter_example("customization.yaml");
    let rules = &mut ric["spec"]["customizations"];
    rules["statusReflection"]["cel"]["status"] = json!(
        "{'reflectedBy': 'widgets-v1', 'ready': observedObject.?status.?ready.orValue(false)}"
    );
    rules["retention"] = json!({"luaScript": "function Retain(desiredObj, observedObj)\n  desiredObj.spec.size = observedObj.spec.size\n  return desiredObj\nend"});
    let rics = api(
        &admin,
        "config.karmada.io",
        "v1alpha1",
        "ResourceInterpreterCustomization",
        "resourceinterpretercustomizations",
        None,
    );
    rics.create(&pp, &obj(ric.clone()))
        .await
        .expect("customization");

    let mut agent = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args([
            "agent",
            "--cluster-name",
            "crafted",
            "--cluster-status-update-frequency",
            "1",
        ])
        .arg("--kubeconfig")
        .arg(&creds)
        .arg("--member-kubeconfig")
        .arg(&member)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("flotilla agent starts");
    let works = api(
        &admin,
        "work.karmada.io",
        "v1alpha1",
        "Work",
        "works",
        Some("karmada-es-crafted"),
    );
    let work = |replicas: i64| {
        let mut widget = interpreter_example("widget.yaml");
        widget["spec"]["replicas"] = json!(replicas);
        // What the binding controller writes on every manifest it renders (as Karmada's
        // CreateOrUpdateWork does): the member copy's changes are mapped back to its Work by
        // these, and only through them (a member object without them is not managed, as in
        // Karmada's work status controller) — so the status below comes back through the
        // agent's watch of the kind, not through a resync.
        widget["metadata"]["annotations"] = json!({
            "work.karmada.io/namespace": "karmada-es-crafted",
            "work.karmada.io/name": "gadget",
        });
        json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "gadget", "namespace": "karmada-es-crafted"},
            "spec": {"workload": {"manifests": [widget]}},
        })
    };
    works
        .create(&pp, &obj(work(4)))
        .await
        .expect("Work of crafted");
    let widgets = api(
        &member_client,
        "example.dev",
        "v1",
        "Widget",
        "widgets",
        Some("default"),
    );
    let mut agent_alive = || {
        assert!(
            agent.try_wait().expect("agent status").is_none(),
            "the agent exited early"
        );
    };
    let reported = |want: Value, health: &'static str| {
        let works = works.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(40);
            loop {
                let got = works
                    .get("gadget")
                    .await
                    .ok()
                    .as_ref()
                    .and_then(manifest_status);
                if got.as_ref() == Some(&(want.clone(), health.to_owned())) {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "the Work never reported {want} / {health}: {got:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    reported(
        json!({"reflectedBy": "widgets-v1", "ready": false}),
        "Unhealthy",
    )
    .await;
    agent_alive();

    // The member's own controller reports the copy ready and resizes it.
    widgets
        .patch_status(
            "gadget",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true, "readyReplicas": 4}})),
        )
        .await
        .expect("member status");
    widgets
        .patch(
            "gadget",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": "small"}})),
        )
        .await
        .expect("member resize");
    reported(
        json!({"reflectedBy": "widgets-v1", "ready": true}),
        "Healthy",
    )
    .await;

    // A new version of the Work is applied over the member's copy, which keeps its size.
    works
        .patch("gadget", &PatchParams::default(), &Patch::Merge(work(6)))
        .await
        .expect("Work update");
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let copy = widgets.get("gadget").await.expect("member copy");
        if copy.data["spec"]["replicas"] == json!(6) {
            assert_eq!(
                copy.data["spec"]["size"],
                json!("small"),
                "Retain keeps the member's size"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Work update never reached the member: {copy:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A changed customization is picked up by the running agent.
    let mut v2 = rics.get("widgets").await.expect("customization");
    v2.data["spec"]["customizations"]["statusReflection"]["cel"]["status"] =
        json!("{'reflectedBy': 'widgets-v2'}");
    v2.data["spec"]["customizations"]["healthInterpretation"]["cel"]["healthy"] = json!("false");
    rics.replace("widgets", &pp, &v2)
        .await
        .expect("customization update");
    reported(json!({"reflectedBy": "widgets-v2"}), "Unhealthy").await;
    // And a deleted one too: back to the built-in interpretation of a kind nobody interprets
    // (its whole status; Healthy, as Karmada's work status controller treats it).
    rics.delete("widgets", &Default::default())
        .await
        .expect("customization delete");
    reported(json!({"ready": true, "readyReplicas": 4}), "Healthy").await;
    agent_alive();
    let _ = agent.kill();
    let _ = agent.wait();
}

/// A resource interpreter module (WAT, which `spec.module.base64` may hold) answering
/// `{"healthy": false}` to every request.
fn unhealthy_interpreter() -> String {
    let reply = r#"{"healthy":false}"#;
    format!(
        r#"(module
  (import "flotilla:host/v1" "set_result" (func $set_result (param i32 i32)))
  (memory (export "memory") 2)
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "flotilla_dealloc") (param i32 i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_interpret_v1") (param i32 i32 i32 i32) (result i32)
    (call $set_result (i32.const 1024) (i32.const {})) (i32.const 0))
  (data (i32.const 1024) "{}"))"#,
        reply.len(),
        reply.replace('"', "\\\"")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_agent_reports_the_wasm_rules_it_does_not_run_once_and_applies_the_others() {
    use base64::Engine as _;
    let up = Up::start();
    let (creds, member, admin, _) = crafted_pull_member_with_widgets(&up).await;
    let pp = kube::api::PostParams::default();
    let obj = |v: Value| -> DynamicObject { serde_json::from_value(v).expect("object") };

    // The control plane serves the WasmPlugin; the customization routes health (member side) and
    // replicas (control plane side) to it, and reflects status with CEL.
    api(
        &admin,
        "flotilla.dev",
        "v1alpha1",
        "WasmPlugin",
        "wasmplugins",
        None,
    )
    .create(
        &pp,
        &obj(json!({
            "apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": "unhealthy"},
            "spec": {"module": {"format": "wat", "base64": base64::engine::general_purpose::STANDARD.encode(unhealthy_interpreter())}},
        })),
    )
    .await
    .expect("WasmPlugin");
    let mut ric = interpreter_example("customization.yaml");
    let rules = &mut ric["spec"]["customizations"];
    rules["statusReflection"]["cel"]["status"] = json!("{'reflectedBy': 'cel'}");
    rules["healthInterpretation"] = json!({"wasm": {"plugin": "unhealthy"}});
    rules["replicaResource"] = json!({"wasm": {"plugin": "unhealthy"}});
    let rics = api(
        &admin,
        "config.karmada.io",
        "v1alpha1",
        "ResourceInterpreterCustomization",
        "resourceinterpretercustomizations",
        None,
    );
    // Admitted once the control plane has loaded the plugin.
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = rics.create(&pp, &obj(ric.clone())).await {
        assert!(Instant::now() < deadline, "customization refused: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let mut agent = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args([
            "agent",
            "--cluster-name",
            "crafted",
            "--cluster-status-update-frequency",
            "1",
            "--resync-period",
            "300ms",
        ])
        .arg("--kubeconfig")
        .arg(&creds)
        .arg("--member-kubeconfig")
        .arg(&member)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flotilla agent starts");
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let stderr = agent.stderr.take().expect("stderr");
    let lines = std::sync::Arc::clone(&log);
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("agent: {l}");
            lines.lock().expect("log").push(l);
        }
    });
    let works = api(
        &admin,
        "work.karmada.io",
        "v1alpha1",
        "Work",
        "works",
        Some("karmada-es-crafted"),
    );
    works
        .create(
            &pp,
            &obj(json!({
                "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
                "metadata": {"name": "gadget", "namespace": "karmada-es-crafted"},
                "spec": {"workload": {"manifests": [interpreter_example("widget.yaml")]}},
            })),
        )
        .await
        .expect("Work of crafted");
    // The CEL rule of the same customization applies; health falls back to the built-in
    // interpretation (Healthy), not to the plugin's answer.
    let want = (json!({"reflectedBy": "cel"}), "Healthy".to_owned());
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let got = works
            .get("gadget")
            .await
            .ok()
            .as_ref()
            .and_then(manifest_status);
        if got.as_ref() == Some(&want) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Work never reported {want:?}: {got:?}"
        );
        assert!(
            agent.try_wait().expect("agent").is_none(),
            "the agent exited"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Reported once, naming the member-side rule only, however many resyncs pass.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Event")),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let event = loop {
        let found: Vec<DynamicObject> = events
            .list(&Default::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.data["reason"] == "WasmRulesNotServed")
            .collect();
        if !found.is_empty() {
            assert_eq!(found.len(), 1, "{found:?}");
            break found[0].clone();
        }
        assert!(Instant::now() < deadline, "no WasmRulesNotServed Event");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(event.data["type"], "Warning");
    assert_eq!(
        event.data["involvedObject"]["kind"],
        "ResourceInterpreterCustomization"
    );
    assert_eq!(event.data["involvedObject"]["name"], "widgets");
    assert_eq!(event.data["count"].as_i64().unwrap_or(1), 1, "{event:?}");
    let message = event.data["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.customizations.{healthInterpretation}")
            && message.contains("pull agent of cluster crafted")
            && message.contains("does not load WasmPlugins"),
        "{message}"
    );
    let warned = log
        .lock()
        .expect("log")
        .iter()
        .filter(|l| l.contains("wasm rules the pull agent does not run"))
        .count();
    assert_eq!(warned, 1, "reported once");
    assert!(
        !log.lock()
            .expect("log")
            .iter()
            .any(|l| l.contains("not found")),
        "no WasmPlugin lookup on the agent"
    );
    let _ = agent.kill();
    let _ = agent.wait();
}

/// Wait until `check` holds for `what`, reading it every 200 ms for up to 60 s.
async fn eventually<F: Fn(&DynamicObject) -> bool>(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    check: F,
) -> DynamicObject {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = api.get_opt(name).await.ok().flatten();
        if let Some(o) = got.as_ref().filter(|o| check(o)) {
            return o.clone();
        }
        assert!(Instant::now() < deadline, "{what} never held: {got:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `spec.clusters` of binding `name` in a `flotilla plan -o json` list.
fn planned_clusters(plan: &Value, name: &str) -> Value {
    plan["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|i| i["kind"] == "ResourceBinding" && i["metadata"]["name"] == name)
        })
        .map(|b| b["spec"]["clusters"].clone())
        .unwrap_or_else(|| panic!("no binding {name} in {plan}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_resource_quotas_cap_the_estimate_live_and_in_plan_alike() {
    let gate = ["--feature-gates", "ResourceQuotaEstimate=true"];
    let up = Up::start_with(&gate);
    let client = control(&up).await;
    let pp = kube::api::PostParams::default();
    let obj = |v: Value| -> DynamicObject { serde_json::from_value(v).expect("object") };
    // Two Push members with one 8-CPU node each; qa's namespace `default` has a quota whose
    // requests.cpu is used up (its status as the member's quota controller would write it).
    for name in ["qa", "qb"] {
        let member = up.member_kubeconfig(name);
        let m = client_for(&member, true).await;
        let nodes = api(&m, "", "v1", "Node", "nodes", None);
        nodes
            .create(
                &pp,
                &obj(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})),
            )
            .await
            .expect("node");
        nodes
            .patch_status(
                "n1",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                    "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}})),
            )
            .await
            .expect("node status");
        if name == "qa" {
            let quotas = api(
                &m,
                "",
                "v1",
                "ResourceQuota",
                "resourcequotas",
                Some("default"),
            );
            quotas
                .create(
                    &pp,
                    &obj(json!({"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": {"name": "compute", "namespace": "default"},
                        "spec": {"hard": {"requests.cpu": "4"}}})),
                )
                .await
                .expect("quota");
            quotas
                .patch_status(
                    "compute",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"hard": {"requests.cpu": "4"},
                                                    "used": {"requests.cpu": "4"}}})),
                )
                .await
                .expect("quota status");
        }
        succeeded(
            &["join", name],
            &[
                ("--kubeconfig", &up.kubeconfig()),
                ("--member-kubeconfig", &member),
            ],
        );
    }
    let clusters = clusters_api(&client);
    let annotation = |o: &DynamicObject| {
        o.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("flotilla.dev/resource-quotas"))
            .cloned()
    };
    for name in ["qa", "qb"] {
        eventually_ready(&clusters, name).await;
    }
    let qa = eventually(&clusters, "qa", "qa's quotas reported", |o| {
        annotation(o).is_some_and(|a| a.contains("\"compute\""))
            && o.data
                .pointer("/status/resourceSummary/allocatable/cpu")
                .is_some()
    })
    .await;
    let reported: Value = serde_json::from_str(&annotation(&qa).unwrap_or_default()).expect("JSON");
    assert_eq!(
        reported,
        json!([{"namespace": "default", "name": "compute", "spec": {},
                "status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "4"}}}])
    );
    eventually(&clusters, "qb", "qb's (absent) quotas reported", |o| {
        annotation(o).as_deref() == Some("[]")
            && o.data
                .pointer("/status/resourceSummary/allocatable/cpu")
                .is_some()
    })
    .await;

    // Six 1-CPU replicas divided by what each member can take: qa's quota leaves it none.
    let policy = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "quota", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["qa", "qb"]},
                    "replicaScheduling": {"replicaSchedulingType": "Divided",
                        "replicaDivisionPreference": "Weighted",
                        "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}}});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"priorityClassName": "batch",
                             "containers": [{"name": "web", "image": "nginx",
                                "resources": {"requests": {"cpu": "1"}}}]}}}});
    for (group, version, kind, plural, o) in [
        (
            "policy.karmada.io",
            "v1alpha1",
            "PropagationPolicy",
            "propagationpolicies",
            &policy,
        ),
        ("apps", "v1", "Deployment", "deployments", &deployment),
    ] {
        api(&client, group, version, kind, plural, Some("default"))
            .create(&pp, &obj(o.clone()))
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
    let bindings = api(
        &client,
        "work.karmada.io",
        "v1alpha2",
        "ResourceBinding",
        "resourcebindings",
        Some("default"),
    );
    let rb = eventually(
        &bindings,
        "web-deployment",
        "the binding is scheduled",
        |o| {
            o.data
                .pointer("/spec/clusters")
                .is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty()))
        },
    )
    .await;
    assert_eq!(
        rb.data["spec"]["clusters"],
        json!([{"name": "qb", "replicas": 6}])
    );
    // Under the gate the requirements carry the namespace and the pod's priority class.
    assert_eq!(
        rb.data["spec"]["replicaRequirements"],
        json!({"resourceRequest": {"cpu": "1"}, "namespace": "default", "priorityClassName": "batch"})
    );

    // `flotilla plan` on the same Clusters (as read back from the control plane) decides the same;
    // without the gate it ignores the quota and divides by node capacity.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    for (i, v) in [
        serde_json::to_value(clusters.get("qa").await.expect("qa")).expect("json"),
        serde_json::to_value(clusters.get("qb").await.expect("qb")).expect("json"),
        policy,
        deployment,
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("{i}.json"));
        std::fs::write(&path, v.to_string()).expect("write");
        files.push(path);
    }
    let plan_files: Vec<(&str, &Path)> = files.iter().map(|f| ("-f", f.as_path())).collect();
    let plan = |extra: &[&str]| -> Value {
        let args = [&["plan", "-o", "json"], extra].concat();
        serde_json::from_str(&succeeded(&args, &plan_files)).expect("plan JSON")
    };
    assert_eq!(
        planned_clusters(&plan(&gate), "web-deployment"),
        rb.data["spec"]["clusters"]
    );
    assert_eq!(
        planned_clusters(&plan(&[]), "web-deployment"),
        json!([{"name": "qa", "replicas": 3}, {"name": "qb", "replicas": 3}])
    );
    // A hand-edited annotation that does not read is refused by name, without its text.
    let mut qa: Value =
        serde_json::from_slice(&std::fs::read(&files[0]).expect("read")).expect("json");
    qa["metadata"]["annotations"]["flotilla.dev/resource-quotas"] =
        json!("[{\"status\": \"hunter2\"}]");
    std::fs::write(&files[0], qa.to_string()).expect("write");
    let out = flotilla(&[&["plan", "-o", "json"][..], &gate].concat(), &plan_files);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Cluster qa: metadata.annotations[flotilla.dev/resource-quotas]")
            && !err.contains("hunter2"),
        "{err}"
    );
}
