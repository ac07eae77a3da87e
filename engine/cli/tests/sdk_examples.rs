//! The guest SDKs end to end: each example plugin under examples/plugins is built from source with
//! its own toolchain (Debian's rustc-web, Go wasip1, clang freestanding, AssemblyScript via npm), then
//! `flotilla plan -f <scenario> --profile <profile>` must change the plan as the example promises,
//! compared with the plan without the profile.
//!
//! Toolchains: Debian's rustc-web (`/usr/bin/cargo`, `/usr/bin/rustc` and the std source:
//! `apt-get install -y rustc-web cargo-web rust-web-src lld-22`), `go` (≥ 1.24), `clang` + `wasm-ld` (Debian: clang, lld), `node`/`npm` (the
//! AssemblyScript compiler comes from `npm ci`). Locally a missing toolchain skips that test with
//! a printed reason; with `CI` set (or, for the Rust guest, `FLOTILLA_REQUIRE_WASM_GUESTS`) it fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether `tool --version`-style probe runs; in CI a missing tool is a failure, locally a skip.
fn have(test: &str, probe: &[&str]) -> bool {
    let ok = Command::new(probe[0])
        .args(&probe[1..])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        assert!(
            !ci(),
            "{test}: toolchain `{}` is missing (CI must provide it)",
            probe.join(" ")
        );
        eprintln!("SKIPPED {test}: `{}` is not available", probe.join(" "));
    }
    ok
}

/// Whether a missing guest toolchain fails instead of skipping: with `CI` set, or
/// `FLOTILLA_REQUIRE_WASM_GUESTS` (which the test command, tests/run.sh, sets).
fn ci() -> bool {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    set("CI") || set("FLOTILLA_REQUIRE_WASM_GUESTS")
}

/// Debian's rustc-web toolchain (which can build std for wasm32), as guests.rs in engine/wasm
/// requires it: a skip locally, a failure with `CI` or `FLOTILLA_REQUIRE_WASM_GUESTS` set.
fn have_debian_rust(test: &str) -> bool {
    let ok = Path::new("/usr/bin/cargo").exists()
        && Path::new("/usr/bin/rustc").exists()
        && Path::new("/usr/lib/rustlib/src/rust/library").exists();
    if !ok {
        let required = ci();
        assert!(
            !required,
            "{test}: Debian rustc-web/cargo-web/rust-web-src are missing (CI must provide them)"
        );
        eprintln!(
            "SKIPPED {test}: Debian rustc-web toolchain not installed (apt-get install -y rustc-web cargo-web rust-web-src lld-22)"
        );
    }
    ok
}

fn check(what: &str, out: Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// A scratch directory for one example: the built module and a copy of its profile (whose relative
/// `wasm.path` then resolves to the module built here, not to anything in the source tree).
fn scratch(example: &str) -> PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flotilla-sdk-{example}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir scratch");
    std::fs::copy(
        root()
            .join("examples/plugins")
            .join(example)
            .join("profile.yaml"),
        dir.join("profile.yaml"),
    )
    .expect("copy profile");
    dir
}

fn plan(example: &str, profile: Option<&Path>, output: &str) -> String {
    plan_in(
        &root()
            .join("examples/plugins")
            .join(example)
            .join("scenario"),
        profile,
        output,
    )
}

fn plan_in(scenario: &Path, profile: Option<&Path>, output: &str) -> String {
    let example = scenario.display();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flotilla"));
    cmd.current_dir(root())
        .args(["plan", "-f"])
        .arg(scenario)
        .args(["-o", output, "--now", "2025-01-01T00:00:00Z"]);
    if let Some(p) = profile {
        cmd.arg("--profile").arg(p);
    }
    let out = cmd.output().expect("run flotilla");
    assert!(
        out.status.success(),
        "flotilla plan {example} (profile {profile:?}):\n{}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `cluster replicas=N` lines of the table output, in order.
fn placements(table: &str) -> Vec<String> {
    table
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("replicas=") && !l.starts_with("work"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// `flotilla plugin inspect` must show the module's flotilla.plugin metadata.
fn assert_metadata(wasm: &Path, name: &str, version: &str, declares: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["plugin", "inspect"])
        .arg(wasm)
        .output()
        .expect("run flotilla");
    assert!(
        out.status.success(),
        "flotilla plugin inspect {}:\n{}",
        wasm.display(),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    let field = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
            .unwrap_or_else(|| panic!("no {key} in\n{stdout}"))
    };
    assert_eq!(field("abi:"), "v1", "{stdout}");
    assert_eq!(field("name:"), name, "{stdout}");
    assert_eq!(field("version:"), version, "{stdout}");
    assert_eq!(field("declares:"), declares, "{stdout}");
}

fn size(path: &Path) -> u64 {
    let n = std::fs::metadata(path).expect("built module").len();
    eprintln!("built {} ({n} bytes)", path.display());
    n
}

#[test]
fn go_gpu_scorer_moves_the_workload_to_the_cluster_with_most_gpus() {
    let name = "go_gpu_scorer_moves_the_workload_to_the_cluster_with_most_gpus";
    if !have(name, &["go", "version"]) {
        return;
    }
    let dir = scratch("go-gpu-scorer");
    let wasm = dir.join("go-gpu-scorer.wasm");
    check(
        "go build",
        Command::new("go")
            .current_dir(root().join("examples/plugins/go-gpu-scorer"))
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("GOTOOLCHAIN", "local")
            .args([
                "build",
                "-buildmode=c-shared",
                "-trimpath",
                "-buildvcs=false",
                "-o",
            ])
            .arg(&wasm)
            .arg(".")
            .output()
            .expect("run go"),
    );
    // Go's linker cannot emit custom sections: the SDK's command appends flotilla.plugin.
    check(
        "flotilla-metadata",
        Command::new("go")
            .current_dir(root().join("examples/plugins/go-gpu-scorer"))
            .env("GOTOOLCHAIN", "local")
            .args([
                "run",
                "flotilla.dev/sdk/go/cmd/flotilla-metadata",
                "-name",
                "go-gpu-scorer",
                "-version",
                "0.1.0",
            ])
            .arg(&wasm)
            .output()
            .expect("run go"),
    );
    assert!(size(&wasm) > 0);
    assert_metadata(&wasm, "go-gpu-scorer", "0.1.0", "score, wasi");

    let without = placements(&plan("go-gpu-scorer", None, "table"));
    assert_eq!(
        without,
        ["cpu-large replicas=2"],
        "most available replicas wins without GPU scores"
    );
    let with = placements(&plan(
        "go-gpu-scorer",
        Some(&dir.join("profile.yaml")),
        "table",
    ));
    assert_eq!(with, ["gpu-a100 replicas=2"], "8 free GPUs beat 2 and 0");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn c_label_filter_keeps_only_labelled_clusters() {
    let name = "c_label_filter_keeps_only_labelled_clusters";
    if !have(name, &["clang", "--version"]) || !have(name, &["wasm-ld", "--version"]) {
        return;
    }
    let dir = scratch("c-label-filter");
    let wasm = dir.join("c-label-filter.wasm");
    check(
        "clang",
        Command::new("clang")
            .current_dir(root().join("examples/plugins/c-label-filter"))
            .args([
                "--target=wasm32-unknown-unknown",
                "-O2",
                "-nostdlib",
                "-Wl,--no-entry",
                "-Wl,--export-dynamic",
                "-Wall",
                "-Werror",
            ])
            .arg("-I")
            .arg(root().join("sdk/c"))
            .arg("-o")
            .arg(&wasm)
            .arg("plugin.c")
            .output()
            .expect("run clang"),
    );
    assert!(size(&wasm) < 64 * 1024, "the C SDK stays small");
    assert_metadata(&wasm, "c-label-filter", "0.1.0", "filter");

    let without = placements(&plan("c-label-filter", None, "table"));
    assert_eq!(
        without,
        [
            "member1 replicas=3",
            "member2 replicas=3",
            "member3 replicas=3"
        ]
    );
    let profile = dir.join("profile.yaml");
    let with = placements(&plan("c-label-filter", Some(&profile), "table"));
    assert_eq!(
        with,
        ["member1 replicas=3", "member3 replicas=3"],
        "member2 is labelled dedicated=web"
    );

    // No cluster has the label value: unschedulable, with the plugin's reason Karmada-style.
    let yaml = std::fs::read_to_string(&profile)
        .expect("profile")
        .replace("value: ml", "value: gpu");
    std::fs::write(&profile, yaml).expect("write profile");
    let out = plan("c-label-filter", Some(&profile), "yaml");
    assert!(
        out.contains("0/3 clusters are available: 3 cluster(s) did not have label dedicated=gpu."),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn assemblyscript_image_override_rewrites_docker_hub_images() {
    let name = "assemblyscript_image_override_rewrites_docker_hub_images";
    if !have(name, &["node", "--version"]) || !have(name, &["npm", "--version"]) {
        return;
    }
    let src = root().join("examples/plugins/assemblyscript-image-override");
    let dir = scratch("assemblyscript-image-override");
    let wasm = dir.join("assemblyscript-image-override.wasm");
    if !src.join("node_modules/assemblyscript/bin/asc.js").exists()
        || !src.join("node_modules/@flotilla/plugin-sdk").exists()
    {
        check(
            "npm ci",
            Command::new("npm")
                .current_dir(&src)
                .args(["ci", "--no-audit", "--no-fund"])
                .output()
                .expect("run npm"),
        );
    }
    check(
        "asc",
        Command::new("node")
            .current_dir(&src)
            .args([
                "node_modules/assemblyscript/bin/asc.js",
                "assembly/index.ts",
                "-O3",
                "--noAssert",
                "--runtime",
                "incremental",
                "--use",
                "abort=",
            ])
            .args(["--transform", "@flotilla/plugin-sdk/metadata.js", "-o"])
            .arg(&wasm)
            .output()
            .expect("run asc"),
    );
    assert!(size(&wasm) > 0);
    assert_metadata(&wasm, "assemblyscript-image-override", "0.1.0", "override");

    let without = plan("assemblyscript-image-override", None, "yaml");
    assert_eq!(without.matches("image: nginx:1.27").count(), 2, "{without}");
    let with = plan(
        "assemblyscript-image-override",
        Some(&dir.join("profile.yaml")),
        "yaml",
    );
    assert_eq!(
        with.matches("image: registry.mirror.example/library/nginx:1.27")
            .count(),
        2,
        "{with}"
    );
    assert!(!with.contains("image: nginx:1.27"), "{with}");
    assert_eq!(
        with.matches("image: quay.io/prometheus/nginx-exporter:v1.4")
            .count(),
        2,
        "other registries stay: {with}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rust_cost_assigner_fills_the_cheapest_clusters_first() {
    let name = "rust_cost_assigner_fills_the_cheapest_clusters_first";
    if !have_debian_rust(name) {
        return;
    }
    let src = root().join("examples/plugins/rust-cost-assigner");
    let dir = scratch("rust-cost-assigner");
    let wasm = dir.join("rust-cost-assigner.wasm");
    // Its own target directory, kept between runs (building std for wasm32 takes minutes).
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-cost-assigner");
    check(
        "rust-cost-assigner/build.sh",
        Command::new(src.join("build.sh"))
            .env("CARGO_TARGET_DIR", &target)
            .env("OUT", &dir)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .expect("run build.sh"),
    );
    assert!(size(&wasm) > 0);
    assert_metadata(&wasm, "rust-cost-assigner", "0.1.0", "assign, log");

    // Divided by available replicas (4, 14, 10, 30): the built-in DynamicWeight split.
    let without = placements(&plan("rust-cost-assigner", None, "table"));
    assert_eq!(
        without,
        [
            "bare-metal replicas=1",
            "cloud-east replicas=3",
            "cloud-west replicas=2",
            "edge replicas=6"
        ]
    );
    // Cheapest first: bare-metal (0.010) is filled, then cloud-east (0.030, ties with cloud-west
    // and wins on name).
    let profile = dir.join("profile.yaml");
    let with = placements(&plan("rust-cost-assigner", Some(&profile), "table"));
    assert_eq!(with, ["bare-metal replicas=4", "cloud-east replicas=8"]);

    // 30 replicas: every priced cluster full, the rest on the unpriced edge cluster.
    let scenario = dir.join("scenario-30");
    std::fs::create_dir_all(&scenario).expect("mkdir");
    std::fs::copy(
        src.join("scenario/clusters.yaml"),
        scenario.join("clusters.yaml"),
    )
    .expect("copy clusters");
    let workload = std::fs::read_to_string(src.join("scenario/workload.yaml")).expect("workload");
    assert!(workload.contains("replicas: 12"));
    std::fs::write(
        scenario.join("workload.yaml"),
        workload.replace("replicas: 12", "replicas: 30"),
    )
    .expect("write workload");
    let with = placements(&plan_in(&scenario, Some(&profile), "table"));
    assert_eq!(
        with,
        [
            "bare-metal replicas=4",
            "cloud-east replicas=14",
            "cloud-west replicas=10",
            "edge replicas=2"
        ]
    );

    // Unpriced clusters excluded: 2 replicas have nowhere to go.
    let yaml = std::fs::read_to_string(&profile)
        .expect("profile")
        .replace("unpriced: last", "unpriced: exclude");
    std::fs::write(&profile, yaml).expect("write profile");
    let out = plan_in(&scenario, Some(&profile), "yaml");
    assert!(
        out.contains(
            "failed to assign replicas: 2 of 30 replica(s) do not fit on the clusters with a price"
        ),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn go_sdk_unit_tests_pass_natively() {
    let name = "go_sdk_unit_tests_pass_natively";
    if !have(name, &["go", "version"]) {
        return;
    }
    // Host GOOS/GOARCH: the SDK's wasm-only parts (imports, exports, memory) sit behind build tags.
    check(
        "go test ./... in sdk/go",
        Command::new("go")
            .current_dir(root().join("sdk/go"))
            .env("GOTOOLCHAIN", "local")
            .env_remove("GOOS")
            .env_remove("GOARCH")
            .args(["test", "-count=1", "./..."])
            .output()
            .expect("run go"),
    );
}

/// A `Shard` (example.com/v1) with `replicas`, a two-container template and a status.
fn shard(replicas: i64, ready: i64) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "Shard",
        "metadata": {"name": "s1", "namespace": "db", "generation": 2},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "db", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
            {"name": "sidecar", "resources": {"requests": {"cpu": "1"}}}
        ]}}},
        "status": {"observedGeneration": 2, "replicas": replicas, "readyReplicas": ready}
    })
}

/// Load the interpreter example `wasm` as WasmPlugin `name` and compile `ops` of a customization
/// naming it, through the host's `wasm` rule backend (as the controllers do).
fn shard_interpreter(
    wasm: &Path,
    name: &str,
    ops: &[flotilla_core::interpreter::Operation],
) -> flotilla_core::interpreter::Customization {
    let bytes = std::fs::read(wasm).expect("read module");
    let plugin = flotilla_wasm::load_interpreter(name, &bytes, None, None)
        .expect("load")
        .expect("the module exports flotilla_interpret_v1");
    let map = std::sync::Arc::new(flotilla_wasm::PluginMap::new());
    map.insert(name, Ok(plugin));
    let mut rules = serde_json::Map::new();
    for op in ops {
        let (field, _) = flotilla_core::interpreter::rule_for(&Default::default(), *op);
        rules.insert(field.into(), serde_json::json!({"wasm": {"plugin": name}}));
    }
    let ric: flotilla_api::interpreter::ResourceInterpreterCustomization =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": "shards"},
            "spec": {"target": {"apiVersion": "example.com/v1", "kind": "Shard"}, "customizations": rules}
        }))
        .expect("customization");
    let backend = flotilla_wasm::WasmRuleBackend::new(map);
    flotilla_core::interpreter::Customization::compile(&ric, &[&backend]).expect("compile")
}

/// What every interpreter example promises: replicas from `spec.replicas`, healthy when all
/// replicas are ready in the observed generation.
fn assert_replicas_and_health(c: &flotilla_core::interpreter::Customization) {
    use flotilla_core::interpreter::ResourceInterpreter;
    assert_eq!(c.get_replicas(&shard(5, 0)).expect("replicas").replicas, 5);
    let mut no_replicas = shard(0, 0);
    no_replicas["spec"]
        .as_object_mut()
        .unwrap()
        .remove("replicas");
    assert_eq!(c.get_replicas(&no_replicas).expect("default").replicas, 1);
    assert!(c.interpret_health(&shard(3, 3)).expect("health"));
    assert!(!c.interpret_health(&shard(3, 2)).expect("health"));
    let mut stale = shard(3, 3);
    stale["metadata"]["generation"] = serde_json::json!(3);
    assert!(!c.interpret_health(&stale).expect("health"));
}

#[test]
fn rust_shard_interpreter_answers_through_the_host() {
    use flotilla_core::interpreter::{Operation, ResourceInterpreter};
    let name = "rust_shard_interpreter_answers_through_the_host";
    if !have_debian_rust(name) {
        return;
    }
    let src = root().join("examples/plugins/rust-shard-interpreter");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-sdk-rust-shard");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let wasm = dir.join("rust-shard-interpreter.wasm");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-shard-interpreter");
    check(
        "rust-shard-interpreter/build.sh",
        Command::new(src.join("build.sh"))
            .env("CARGO_TARGET_DIR", &target)
            .env("OUT", &dir)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .output()
            .expect("run build.sh"),
    );
    assert_metadata(&wasm, "rust-shard-interpreter", "0.1.0", "interpret, log");
    let c = shard_interpreter(
        &wasm,
        "rust-shard",
        &[
            Operation::InterpretReplica,
            Operation::ReviseReplica,
            Operation::AggregateStatus,
            Operation::InterpretHealth,
        ],
    );
    assert_replicas_and_health(&c);
    let r = c.get_replicas(&shard(5, 0)).expect("replicas");
    let req = serde_json::to_value(r.requirements.expect("requirements")).expect("json");
    assert_eq!(
        req["resourceRequest"],
        serde_json::json!({"cpu": "1250m", "memory": "1073741824"})
    );
    let revised = c.revise_replica(&shard(5, 0), 2).expect("revise");
    assert_eq!(revised["spec"]["replicas"], 2);
    assert_eq!(revised["spec"]["template"], shard(5, 0)["spec"]["template"]);
    let items: Vec<flotilla_api::work::AggregatedStatusItem> = (1..=3)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "clusterName": format!("m{i}"), "applied": true,
                "status": {"replicas": i, "readyReplicas": i - 1}
            }))
            .expect("item")
        })
        .collect();
    let aggregated = c.aggregate_status(&shard(6, 0), &items).expect("aggregate");
    assert_eq!(
        aggregated["status"],
        serde_json::json!({"replicas": 6, "readyReplicas": 3})
    );
    // Operations the rule does not route to the plugin are not answered by this customization.
    assert!(!c.hook_enabled("example.com/v1", "Shard", Operation::Retain));
}

#[test]
fn c_shard_interpreter_answers_through_the_host() {
    use flotilla_core::interpreter::Operation;
    let name = "c_shard_interpreter_answers_through_the_host";
    if !have(name, &["clang", "--version"]) || !have(name, &["wasm-ld", "--version"]) {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-sdk-c-shard");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let wasm = dir.join("c-shard-interpreter.wasm");
    check(
        "clang",
        Command::new("clang")
            .current_dir(root().join("examples/plugins/c-shard-interpreter"))
            .args([
                "--target=wasm32-unknown-unknown",
                "-O2",
                "-nostdlib",
                "-Wl,--no-entry",
                "-Wl,--export-dynamic",
                "-Wall",
                "-Werror",
            ])
            .arg("-I")
            .arg(root().join("sdk/c"))
            .arg("-o")
            .arg(&wasm)
            .arg("plugin.c")
            .output()
            .expect("run clang"),
    );
    assert_metadata(&wasm, "c-shard-interpreter", "0.1.0", "interpret");
    let c = shard_interpreter(
        &wasm,
        "c-shard",
        &[Operation::InterpretReplica, Operation::InterpretHealth],
    );
    assert_replicas_and_health(&c);
}

#[test]
fn go_shard_interpreter_answers_through_the_host() {
    use flotilla_core::interpreter::Operation;
    let name = "go_shard_interpreter_answers_through_the_host";
    if !have(name, &["go", "version"]) {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-sdk-go-shard");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let wasm = dir.join("go-shard-interpreter.wasm");
    check(
        "go build",
        Command::new("go")
            .current_dir(root().join("examples/plugins/go-shard-interpreter"))
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("GOTOOLCHAIN", "local")
            .args([
                "build",
                "-buildmode=c-shared",
                "-trimpath",
                "-buildvcs=false",
                "-o",
            ])
            .arg(&wasm)
            .arg(".")
            .output()
            .expect("run go"),
    );
    let c = shard_interpreter(
        &wasm,
        "go-shard",
        &[Operation::InterpretReplica, Operation::InterpretHealth],
    );
    assert_replicas_and_health(&c);
}

#[test]
fn assemblyscript_shard_interpreter_answers_through_the_host() {
    use flotilla_core::interpreter::Operation;
    let name = "assemblyscript_shard_interpreter_answers_through_the_host";
    if !have(name, &["node", "--version"]) || !have(name, &["npm", "--version"]) {
        return;
    }
    let src = root().join("examples/plugins/assemblyscript-shard-interpreter");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("flotilla-sdk-as-shard");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let wasm = dir.join("assemblyscript-shard-interpreter.wasm");
    if !src.join("node_modules/assemblyscript/bin/asc.js").exists()
        || !src.join("node_modules/@flotilla/plugin-sdk").exists()
    {
        check(
            "npm ci",
            Command::new("npm")
                .current_dir(&src)
                .args(["ci", "--no-audit", "--no-fund"])
                .output()
                .expect("run npm"),
        );
    }
    check(
        "asc",
        Command::new("node")
            .current_dir(&src)
            .args([
                "node_modules/assemblyscript/bin/asc.js",
                "assembly/index.ts",
                "-O3",
                "--noAssert",
                "--runtime",
                "incremental",
                "--use",
                "abort=",
            ])
            .args(["--transform", "@flotilla/plugin-sdk/metadata.js", "-o"])
            .arg(&wasm)
            .output()
            .expect("run asc"),
    );
    let c = shard_interpreter(
        &wasm,
        "as-shard",
        &[Operation::InterpretReplica, Operation::InterpretHealth],
    );
    assert_replicas_and_health(&c);
}
