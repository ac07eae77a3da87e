//! The live end of the plugin walkthrough (sdk/README.md, steps 7 and 8) for every language:
//! `flotilla plugin new --point score` built from scratch outside the repository, loaded into a
//! running `flotilla up` as a `WasmPlugin` added to the default profile, new Deployments placed by
//! it, then the object updated to a rebuilt module (its source changed to favour another label)
//! and new Deployments placed by the new version, without a restart. Only placements are observed
//! (no status fields), through the machine's kubectl; it skips, with a printed reason, when
//! kubectl or a toolchain is missing (with `CI` or `FLOTILLA_REQUIRE_WASM_GUESTS` set a missing
//! guest toolchain fails, as in plugin_new.rs).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether a missing guest toolchain fails instead of skipping: with `CI` set, or
/// `FLOTILLA_REQUIRE_WASM_GUESTS` (which the test command, tests/run.sh, sets).
fn ci() -> bool {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    set("CI") || set("FLOTILLA_REQUIRE_WASM_GUESTS")
}

fn runs(probe: &[&str]) -> bool {
    Command::new(probe[0])
        .args(&probe[1..])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn toolchain(lang: &str) -> bool {
    let ok = match lang {
        "rust" => {
            Path::new("/usr/bin/cargo").exists()
                && Path::new("/usr/lib/rustlib/src/rust/library").exists()
        }
        "go" => runs(&["go", "version"]),
        "c" => runs(&["clang", "--version"]) && runs(&["wasm-ld", "--version"]),
        "assemblyscript" => runs(&["npm", "--version"]),
        "zig" => runs(&["zig", "version"]) || runs(&["python3", "-m", "ziglang", "version"]),
        _ => unreachable!(),
    };
    if !ok {
        assert!(
            !ci(),
            "toolchain for {lang} is missing (CI must provide it)"
        );
        eprintln!("SKIPPED {lang}: its toolchain is not installed");
    }
    ok
}

fn check(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

struct Kubectl {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        check(&format!("kubectl {args:?}"), self.run(args))
    }

    fn apply(&self, dir: &Path, name: &str, yaml: &str) {
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(&file, yaml).expect("write manifest");
        self.ok(&["apply", "-f", &file.display().to_string()]);
    }

    /// Create Deployment `name` and wait for its binding's cluster (the policy keeps one).
    fn placed(&self, dir: &Path, name: &str) -> String {
        self.apply(
            dir,
            name,
            &format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: default, labels: {{live: \"true\"}}}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: c, image: nginx}}]}}\n"
            ),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.run(&[
                "get",
                "rb",
                "-n",
                "default",
                &format!("{name}-deployment"),
                "-o",
                "jsonpath={.spec.clusters[*].name}",
            ]);
            let clusters = text(&out.stdout).trim().to_owned();
            if out.status.success() && !clusters.is_empty() {
                return clusters;
            }
            assert!(Instant::now() < deadline, "{name} was never placed");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// New Deployments `prefix-N` until one is placed on `want` (the change has taken effect);
    /// then one more must be too. Returns how long the change took to show.
    fn until_placed_on(&self, dir: &Path, prefix: &str, want: &str) -> Duration {
        let start = Instant::now();
        for i in 0.. {
            let got = self.placed(dir, &format!("{prefix}-{i}"));
            if got == want {
                let took = start.elapsed();
                assert_eq!(self.placed(dir, &format!("{prefix}-check")), want);
                return took;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{prefix}: still placed on {got}, not {want}, after {:?}",
                start.elapsed()
            );
        }
        unreachable!()
    }
}

#[test]
fn every_language_goes_live_and_an_update_changes_the_next_placements() {
    if !runs(&["kubectl", "version", "--client"]) {
        eprintln!("SKIPPED: no kubectl");
        return;
    }
    let scratch = std::env::temp_dir().join(format!("flotilla-plugin-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("mkdir");
    let langs: Vec<&str> = ["c", "go", "assemblyscript", "zig", "rust"]
        .into_iter()
        .filter(|l| toolchain(l))
        .collect();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-new-rust");
    let mut modules = Vec::new();
    for lang in &langs {
        let name = format!("live-{lang}");
        check(
            "plugin new",
            Command::new(env!("CARGO_BIN_EXE_flotilla"))
                .current_dir(&scratch)
                .args(["plugin", "new", "--lang", lang, "--point", "score", &name])
                .output()
                .expect("run"),
        );
        let dir = scratch.join(&name);
        // Version 1 as generated; version 2 with the source changed to favour the clusters
        // labelled example.com/other (the update a plugin author ships).
        std::fs::create_dir_all(scratch.join("modules")).expect("mkdir");
        for version in ["v1", "v2"] {
            if version == "v2" {
                let source = dir.join(match *lang {
                    "rust" => "src/lib.rs",
                    "go" => "main.go",
                    "c" => "plugin.c",
                    "assemblyscript" => "assembly/index.ts",
                    _ => "src/main.zig",
                });
                let text = std::fs::read_to_string(&source).expect("source");
                assert!(text.contains("\"example.com/preferred\""), "{lang}: {text}");
                std::fs::write(
                    &source,
                    text.replace("\"example.com/preferred\"", "\"example.com/other\""),
                )
                .expect("edit source");
            }
            check(
                &format!("{lang}: build.sh ({version})"),
                Command::new(dir.join("build.sh"))
                    .env_remove("RUSTFLAGS")
                    .env("CARGO_TARGET_DIR", &target)
                    .env("GOTOOLCHAIN", "local")
                    .env("npm_config_prefer_offline", "true")
                    .env("ZIG_GLOBAL_CACHE_DIR", scratch.join(".zig-cache"))
                    .output()
                    .expect("build"),
            );
            // Modules go in the control plane's module directory: a Go module (3.3 MB) is
            // larger in base64 than the API server's 3 MiB request limit.
            std::fs::copy(
                dir.join(format!("{name}.wasm")),
                scratch
                    .join("modules")
                    .join(format!("{name}-{version}.wasm")),
            )
            .expect("copy module");
        }
        modules.push(name);
    }
    let module_dir = scratch.join("modules").display().to_string();

    let (_up, kubeconfig) = common::up(
        &scratch,
        &["--members", "2", "--module-dir", &module_dir],
        true,
    );
    let k = Kubectl {
        kubeconfig,
        cache: scratch.join("kube-cache"),
    };
    let files = scratch.join("objects");
    std::fs::create_dir_all(&files).expect("mkdir");
    k.apply(
        &files,
        "policy",
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: live, namespace: default}\nspec:\n  resourceSelectors:\n  - {apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {live: \"true\"}}}\n  placement:\n    spreadConstraints:\n    - {spreadByField: cluster, maxGroups: 1, minGroups: 1}\n    replicaScheduling: {replicaSchedulingType: Duplicated}\n",
    );
    // Where the default profile puts a Deployment; the plugin must move it to the other member.
    let baseline = k.placed(&files, "baseline");
    let other = if baseline == "member1" {
        "member2"
    } else {
        "member1"
    };
    k.ok(&["label", "cluster", other, "example.com/preferred=true"]);
    k.ok(&["label", "cluster", &baseline, "example.com/other=true"]);

    for name in &modules {
        let plugin = |version: &str| {
            format!(
                "apiVersion: flotilla.dev/v1alpha1\nkind: WasmPlugin\nmetadata: {{name: {name}}}\nspec:\n  module: {{path: {name}-{version}.wasm}}\n"
            )
        };
        k.apply(&files, &format!("{name}-plugin"), &plugin("v1"));
        k.apply(
            &files,
            &format!("{name}-profile"),
            &format!(
                "apiVersion: flotilla.dev/v1alpha1\nkind: SchedulerProfile\nmetadata: {{name: default-scheduler}}\nspec:\n  scores:\n    add:\n    - name: {name}\n      wasm: {{plugin: {name}}}\n"
            ),
        );
        let live = k.until_placed_on(&files, &format!("{name}-a"), other);
        // The update: version 2 of the module, which favours the baseline cluster's label.
        k.apply(&files, &format!("{name}-plugin"), &plugin("v2"));
        let swapped = k.until_placed_on(&files, &format!("{name}-b"), &baseline);
        eprintln!(
            "{name}: placing on {other} {live:?} after apply; on {baseline} {swapped:?} after the update"
        );
        k.ok(&["delete", "wasmplugin", name, "--wait=false"]);
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
