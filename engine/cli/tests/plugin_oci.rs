//! Wasm plugins as OCI artifacts against a real registry: the CNCF distribution registry, built
//! from its Go module (tests/oci-registry) and run on loopback, once open and once behind
//! htpasswd. `flotilla plugin push` and `pull` round-trip a module; a running `flotilla up`
//! loads a `WasmPlugin` with `spec.module.image` (status `Loaded` with the image's digest) and
//! the plugin moves new placements; a registry wanting credentials fails without a pull secret,
//! naming it, and loads once the Secret is there; an artifact of the wrong media type or too
//! large is refused with a clear reason. Skips only when Go is missing (and the registry was not
//! built before); `FLOTILLA_REQUIRE_OCI_REGISTRY=1` (tests/run.sh) makes that a failure.
//!
//! Also without the registry: a `WasmPlugin` that fails to load emits a `LoadFailed` Event.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The registry binary: `FLOTILLA_OCI_REGISTRY_BIN`, else target/oci-registry (built here with
/// Go when missing). `None` (skip) when it cannot be had and the run does not require it.
fn registry_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FLOTILLA_OCI_REGISTRY_BIN") {
        return Some(PathBuf::from(p));
    }
    let bin = workspace().join("target/oci-registry");
    let required = std::env::var("FLOTILLA_REQUIRE_OCI_REGISTRY").is_ok_and(|v| v == "1");
    let has_go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if has_go {
        // Cheap when nothing changed (Go's build cache).
        let out = Command::new("go")
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&bin)
            .arg(".")
            .current_dir(workspace().join("tests/oci-registry"))
            .output()
            .expect("go build runs");
        assert!(
            out.status.success(),
            "building tests/oci-registry failed:\n{}",
            text(&out.stderr)
        );
        return Some(bin);
    }
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        !required,
        "Go is missing: cannot build the OCI registry (tests/oci-registry)"
    );
    eprintln!("SKIPPED: Go is not installed, so the CNCF distribution registry cannot be built");
    None
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A registry on loopback; `htpasswd` puts it behind basic auth.
fn registry(bin: &Path, dir: &Path, name: &str, htpasswd: Option<&Path>) -> (common::Proc, String) {
    let port = free_port();
    let root = dir.join(name);
    std::fs::create_dir_all(&root).expect("mkdir");
    let auth = htpasswd
        .map(|p| {
            format!(
                "auth:\n  htpasswd:\n    realm: flotilla-test\n    path: {}\n",
                p.display()
            )
        })
        .unwrap_or_default();
    let config = root.join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n{auth}",
            root.join("data").display()
        ),
    )
    .expect("write config");
    let child = Command::new(bin)
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the registry");
    let proc = common::Proc(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the registry never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    (proc, format!("127.0.0.1:{port}"))
}

/// A filter plugin (ABI v1) rejecting the cluster at row `rejected` of the snapshot (rows are
/// the clusters sorted by name).
fn filter_module(rejected: u32) -> Vec<u8> {
    let reasons = r#"{"reasons":["rejected by the OCI plugin"]}"#;
    wat::parse_str(format!(
        r#"(module
  (import "flotilla:host/v1" "set_result" (func $set_result (param i32 i32)))
  (import "flotilla:host/v1" "set_rows" (func $set_rows (param i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 0) "{reasons_esc}")
  (func (export "flotilla_abi_version") (result i32) (i32.const 1))
  (func (export "flotilla_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.add (i32.shr_u (global.get $heap) (i32.const 16)) (i32.const 1))))))
    (local.get $p))
  (func (export "flotilla_dealloc") (param $p i32) (param $n i32))
  (func (export "flotilla_clusters_v1") (param i32 i32) (result i32) (i32.const 0))
  (func (export "flotilla_filter_v1") (param i32 i32) (param $rows i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (i32.store8 (i32.add (i32.const 1024) (local.get $i))
        (i32.eq (i32.load (i32.add (local.get $rows) (i32.shl (local.get $i) (i32.const 2)))) (i32.const {rejected})))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $set_rows (i32.const 1024) (local.get $n))
    (call $set_result (i32.const 0) (i32.const {reasons_len}))
    (i32.const 0)))
"#,
        reasons_esc = reasons.replace('"', "\\\""),
        reasons_len = reasons.len(),
    ))
    .expect("filter module")
}

fn flotilla(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .env(
            "DOCKER_CONFIG",
            std::env::temp_dir().join("flotilla-no-docker-config"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flotilla");
    {
        use std::io::Write as _;
        let mut input = child.stdin.take().expect("stdin");
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).expect("write stdin");
        }
    }
    child.wait_with_output().expect("flotilla exits")
}

fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = flotilla(args, stdin);
    assert!(
        out.status.success(),
        "flotilla {args:?} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The value of a `key:   value` line of `flotilla plugin push|pull`.
fn field(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.trim().split(' ').next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| panic!("no {key}: line in\n{out}"))
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

fn api(c: &kube::Client, api_version: &str, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let r = flotilla_controller::api_resource(api_version, kind);
    match ns {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &r),
        None => Api::all_with(c.clone(), &r),
    }
}

async fn create(c: &kube::Client, ns: Option<&str>, obj: Value) {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion").to_owned();
    let kind = obj["kind"].as_str().expect("kind").to_owned();
    let o: DynamicObject = serde_json::from_value(obj).expect("object");
    api(c, &api_version, &kind, ns)
        .create(&PostParams::default(), &o)
        .await
        .unwrap_or_else(|e| panic!("create {kind}: {e}"));
}

fn wasm_plugin(name: &str, module: Value) -> Value {
    json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": name}, "spec": {"module": module}})
}

/// The condition `type_` of WasmPlugin `name`'s status once `done` holds for it.
async fn wait_plugin(
    c: &kube::Client,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let plugins = api(c, "flotilla.dev/v1alpha1", "WasmPlugin", None);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let o = plugins.get(name).await.expect("get WasmPlugin");
        let status = o.data.get("status").cloned().unwrap_or(Value::Null);
        if done(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "WasmPlugin {name}: never {what}; status {status:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn failed_with(status: &Value, reason: &str) -> bool {
    condition(status, "LoadFailed").is_some_and(|c| c["status"] == "True" && c["reason"] == reason)
}

/// Create Deployment `name` (labelled `oci=true`) and return the cluster its binding names.
async fn placed(c: &kube::Client, name: &str) -> String {
    let d = common::labelled_deployment(name, "oci");
    api(c, "apps/v1", "Deployment", Some("default"))
        .create(&PostParams::default(), &d)
        .await
        .expect("create Deployment");
    let rbs = api(
        c,
        "work.karmada.io/v1alpha2",
        "ResourceBinding",
        Some("default"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(rb) = rbs.get(&format!("{name}-deployment")).await {
            let clusters: Vec<String> = rb.data["spec"]["clusters"]
                .as_array()
                .map(|cs| {
                    cs.iter()
                        .filter_map(|c| c["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if !clusters.is_empty() {
                return clusters.join(",");
            }
        }
        assert!(Instant::now() < deadline, "{name} was never placed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `LoadFailed` Events regarding WasmPlugin `name` (core/v1 Events, any namespace).
async fn load_failed_events(c: &kube::Client, name: &str) -> Vec<String> {
    let events = api(c, "v1", "Event", None)
        .list(&ListParams::default())
        .await
        .expect("list Events");
    events
        .items
        .iter()
        .filter(|e| {
            e.data["reason"] == "LoadFailed"
                && e.data["involvedObject"]["kind"] == "WasmPlugin"
                && e.data["involvedObject"]["name"] == name
                && e.data["type"] == "Warning"
        })
        .map(|e| e.data["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn wasm_plugins_come_from_a_real_oci_registry() {
    let Some(bin) = registry_bin() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let htpasswd = dir.join("htpasswd");
    let line = Command::new(&bin)
        .args(["htpasswd", "alice", "s3cret-pw"])
        .output()
        .expect("htpasswd");
    assert!(line.status.success(), "{}", text(&line.stderr));
    std::fs::write(&htpasswd, &line.stdout).expect("write htpasswd");
    let (_open_proc, open) = registry(&bin, dir, "open", None);
    let (_auth_proc, authed) = registry(&bin, dir, "authed", Some(&htpasswd));

    // Push and pull round trip: one module per cluster row it rejects.
    let mut pushed = Vec::new();
    for row in 0..2u32 {
        let file = dir.join(format!("reject{row}.wasm"));
        let module = filter_module(row);
        std::fs::write(&file, &module).expect("write module");
        let reference = format!("{open}/plugins/reject{row}:v1");
        let out = ok(
            &["plugin", "push", &file.display().to_string(), &reference],
            None,
        );
        let digest = field(&out, "digest");
        assert!(digest.starts_with("sha256:") && digest.len() == 71, "{out}");
        let module_digest = field(&out, "module");
        assert!(
            module_digest.starts_with("sha256:") && module_digest != digest,
            "{out}"
        );
        let copy = dir.join(format!("pulled{row}.wasm"));
        let out = ok(
            &[
                "plugin",
                "pull",
                &reference,
                "-o",
                &copy.display().to_string(),
            ],
            None,
        );
        assert_eq!(field(&out, "digest"), digest, "{out}");
        assert_eq!(field(&out, "module"), module_digest, "{out}");
        assert_eq!(std::fs::read(&copy).expect("pulled"), module);
        // By digest too.
        let pinned = field(&out, "pinned");
        assert_eq!(pinned, format!("{open}/plugins/reject{row}@{digest}"));
        ok(
            &["plugin", "pull", &pinned, "-o", &copy.display().to_string()],
            None,
        );
        pushed.push((reference, digest, module_digest));
    }
    // A module that is not Wasm is not pushed.
    let junk = dir.join("junk.wasm");
    std::fs::write(&junk, b"not a module").expect("write");
    let out = flotilla(
        &[
            "plugin",
            "push",
            &junk.display().to_string(),
            &format!("{open}/plugins/junk:v1"),
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("neither a Wasm module nor WebAssembly text"),
        "{}",
        text(&out.stderr)
    );

    // The registry behind htpasswd: anonymous push is refused, with the way out named.
    let file0 = dir.join("reject0.wasm").display().to_string();
    let private = format!("{authed}/private/reject:v1");
    let out = flotilla(&["plugin", "push", &file0, &private], None);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("refused access") && err.contains("--password-stdin"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let out = ok(
        &[
            "plugin",
            "push",
            &file0,
            &private,
            "-u",
            "alice",
            "--password-stdin",
        ],
        Some("s3cret-pw\n"),
    );
    let private_digest = field(&out, "digest");
    // Credentials from a Docker config.
    let docker = dir.join("docker");
    std::fs::create_dir_all(&docker).expect("mkdir");
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret-pw");
    std::fs::write(
        docker.join("config.json"),
        json!({"auths": {authed.clone(): {"auth": auth}}}).to_string(),
    )
    .expect("docker config");
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["plugin", "pull", &private, "-o"])
        .arg(dir.join("private.wasm"))
        .env("DOCKER_CONFIG", &docker)
        .output()
        .expect("pull");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(field(&text(&out.stdout), "digest"), private_digest);

    // Hostile artifacts: a layer that is not application/wasm, and a module over the bound.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let opts = flotilla_controller::oci::Options::new(u64::MAX);
    let module = filter_module(0);
    rt.block_on(flotilla_controller::oci::push_artifact(
        &format!("{open}/plugins/tarball:v1"),
        &module,
        "application/vnd.oci.image.layer.v1.tar+gzip",
        b"{}",
        "application/vnd.oci.image.config.v1+json",
        &opts,
    ))
    .expect("push the wrong media type");
    // What `oras push REF module.wasm:application/wasm` makes (an empty config) pulls too.
    let oras = format!("{open}/plugins/oras:v1");
    let pushed_oras = rt
        .block_on(flotilla_controller::oci::push_artifact(
            &oras,
            &module,
            "application/wasm",
            b"{}",
            "application/vnd.oci.empty.v1+json",
            &opts,
        ))
        .expect("push an oras-style artifact");
    let out = ok(
        &[
            "plugin",
            "pull",
            &oras,
            "-o",
            &dir.join("oras.wasm").display().to_string(),
        ],
        None,
    );
    assert_eq!(field(&out, "digest"), pushed_oras.manifest_digest, "{out}");
    assert_eq!(std::fs::read(dir.join("oras.wasm")).expect("read"), module);
    // The wrong media type is refused by the CLI too.
    let out = flotilla(
        &[
            "plugin",
            "pull",
            &format!("{open}/plugins/tarball:v1"),
            "-o",
            &dir.join("tarball.wasm").display().to_string(),
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not a Wasm artifact"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("tarball.wasm").exists());
    let mut huge = module.clone();
    // A custom section pads it past the 64 MiB bound (still a valid module).
    let pad = (64usize << 20) + 1;
    huge.push(0);
    let mut size = Vec::new();
    leb128(&mut size, (pad + 2) as u64);
    huge.extend_from_slice(&size);
    huge.extend_from_slice(&[1, b'x']);
    huge.resize(huge.len() + pad, 0);
    rt.block_on(flotilla_controller::oci::push(
        &format!("{open}/plugins/huge:v1"),
        &huge,
        &opts,
    ))
    .expect("push the huge module");
    drop(huge);

    // The control plane.
    let metrics = format!("127.0.0.1:{}", free_port());
    let (_up, kubeconfig) = common::up(dir, &["--members", "2", "--metrics-addr", &metrics], true);
    rt.block_on(async {
        let c = client(&kubeconfig).await;
        create(
            &c,
            Some("default"),
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                "metadata": {"name": "oci", "namespace": "default"},
                "spec": {
                    "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                        "labelSelector": {"matchLabels": {"oci": "true"}}}],
                    "placement": {
                        "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
                        "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
                    },
                }}),
        )
        .await;
        let baseline = placed(&c, "baseline").await;
        let (row, other) = match baseline.as_str() {
            "member1" => (0, "member2"),
            "member2" => (1, "member1"),
            b => panic!("placed on {b}"),
        };
        let (reference, digest, module_digest) = &pushed[row];
        create(&c, None, wasm_plugin("reject", json!({"image": reference}))).await;
        create(
            &c,
            None,
            json!({"apiVersion": "flotilla.dev/v1alpha1", "kind": "SchedulerProfile",
                "metadata": {"name": "default-scheduler"},
                "spec": {"filters": {"add": [{"name": "reject", "wasm": {"plugin": "reject"}}]}}}),
        )
        .await;
        let status = wait_plugin(&c, "reject", "Loaded", |s| {
            condition(s, "Loaded").is_some_and(|c| c["status"] == "True" && c["reason"] == "Loaded")
        })
        .await;
        assert_eq!(status["imageDigest"], json!(digest), "{status:#}");
        assert_eq!(status["servingDigest"], json!(module_digest), "{status:#}");
        // New placements avoid the rejected member.
        let deadline = Instant::now() + Duration::from_secs(60);
        for i in 0.. {
            if placed(&c, &format!("after-{i}")).await == other {
                break;
            }
            assert!(Instant::now() < deadline, "placements never moved to {other}");
        }
        assert_eq!(placed(&c, "after-check").await, other);

        // The private registry: no pull secret named.
        create(&c, None, wasm_plugin("anon", json!({"image": private}))).await;
        let status = wait_plugin(&c, "anon", "ImageUnauthorized", |s| {
            failed_with(s, "ImageUnauthorized")
        })
        .await;
        let message = condition(&status, "LoadFailed").expect("LoadFailed")["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("refused access") && message.contains("spec.module.imagePullSecret"),
            "{message}"
        );
        // A pull secret that does not exist yet.
        create(
            &c,
            None,
            wasm_plugin(
                "private",
                json!({"image": private, "imagePullSecret": "regcred"}),
            ),
        )
        .await;
        let status = wait_plugin(&c, "private", "PullSecretInvalid", |s| {
            failed_with(s, "PullSecretInvalid")
        })
        .await;
        let message = condition(&status, "LoadFailed").expect("LoadFailed")["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("Secret flotilla-system/regcred not found"),
            "{message}"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while load_failed_events(&c, "private").await.is_empty() {
            assert!(Instant::now() < deadline, "no LoadFailed Event for private");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The right Secret: loads on the next retry.
        let namespaces = api(&c, "v1", "Namespace", None);
        if namespaces.get_opt("flotilla-system").await.expect("get ns").is_none() {
            create(
                &c,
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flotilla-system"}}),
            )
            .await;
        }
        let config = json!({"auths": {authed.clone(): {"username": "alice", "password": "s3cret-pw"}}});
        create(
            &c,
            Some("flotilla-system"),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
                "metadata": {"name": "regcred", "namespace": "flotilla-system"},
                "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config.to_string())}}),
        )
        .await;
        let status = wait_plugin(&c, "private", "resolved", |s| {
            condition(s, "LoadFailed").is_some_and(|c| c["status"] == "False")
        })
        .await;
        assert_eq!(status["imageDigest"], json!(private_digest), "{status:#}");

        // Hostile artifacts.
        create(
            &c,
            None,
            wasm_plugin("tarball", json!({"image": format!("{open}/plugins/tarball:v1")})),
        )
        .await;
        let status = wait_plugin(&c, "tarball", "ImageMediaType", |s| {
            failed_with(s, "ImageMediaType")
        })
        .await;
        let message = condition(&status, "LoadFailed").expect("LoadFailed")["message"].to_string();
        assert!(
            message.contains("no layer of media type application/wasm")
                && message.contains("tar+gzip"),
            "{message}"
        );
        create(
            &c,
            None,
            wasm_plugin("huge", json!({"image": format!("{open}/plugins/huge:v1")})),
        )
        .await;
        let status = wait_plugin(&c, "huge", "ImageTooLarge", |s| failed_with(s, "ImageTooLarge")).await;
        let message = condition(&status, "LoadFailed").expect("LoadFailed")["message"].to_string();
        assert!(message.contains("more than the 67108864 allowed"), "{message}");
        // The plugin in use kept serving through all of it.
        assert_eq!(placed(&c, "still").await, other);
        // Pulls are counted by result.
        let text = scrape(&metrics);
        let count = |result: &str| -> u64 {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(&format!(
                        "flotilla_plugin_image_pulls_total{{result=\"{result}\"}} "
                    ))
                })
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {result} pull count in\n{text}"))
        };
        assert!(count("success") >= 2, "{text}");
        assert!(count("failure") >= 4, "{text}");
    });
}

/// `GET /metrics` of `addr` (HTTP/1.0, the body).
fn scrape(addr: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to metrics");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .expect("request");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("response");
    out.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or(out)
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[test]
fn a_wasm_plugin_that_fails_to_load_emits_a_load_failed_event() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (_up, kubeconfig) = common::up(tmp.path(), &["--members", "1"], true);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let c = client(&kubeconfig).await;
        // Without --module-dir a path cannot be read: a load failure the controllers report.
        create(
            &c,
            None,
            wasm_plugin("unreadable", json!({"path": "gpu.wasm"})),
        )
        .await;
        let status = wait_plugin(&c, "unreadable", "ReadFailed", |s| {
            failed_with(s, "ReadFailed")
        })
        .await;
        let message = condition(&status, "LoadFailed").expect("LoadFailed")["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = load_failed_events(&c, "unreadable").await;
            if let Some(e) = events.first() {
                assert_eq!(e, &message, "the Event says what the status says");
                assert!(e.contains("--module-dir"), "{e}");
                break;
            }
            assert!(Instant::now() < deadline, "no LoadFailed Event");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}
