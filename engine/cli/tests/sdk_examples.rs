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

fn ci() -> bool {
    std::env::var("CI")
        .map(|v| !v.is_empty() && v != "false" && v != "0")
        .unwrap_or(false)
}

/// Debian's rustc-web toolchain (which can build std for wasm32), as guests.rs in engine/wasm
/// requires it: a skip locally, a failure with `CI` or `FLOTILLA_REQUIRE_WASM_GUESTS` set.
fn have_debian_rust(test: &str) -> bool {
    let ok = Path::new("/usr/bin/cargo").exists()
        && Path::new("/usr/bin/rustc").exists()
        && Path::new("/usr/lib/rustlib/src/rust/library").exists();
    if !ok {
        let required = ci() || std::env::var_os("FLOTILLA_REQUIRE_WASM_GUESTS").is_some();
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
