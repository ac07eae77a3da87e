//! `flotilla plugin new` end to end, as a plugin author follows the generated README: for every
//! language × extension point, scaffold a project in a temporary directory OUTSIDE this
//! repository, build it from scratch with its own `./build.sh`, run `flotilla plugin test` on its
//! fixture, then plan its scenario without and with its profile and check the plugin changed the
//! plan as the README says.
//!
//! The projects are built from scratch; only the toolchains' caches are shared (Cargo's target
//! directory for the Rust guests, so std for wasm32 is built once; Go's build cache; npm's cache).
//! Toolchains: Debian's rustc-web (or rustup with wasm32-unknown-unknown), Go ≥ 1.24, clang +
//! wasm-ld, node + npm, Zig (`zig`, or the PyPI package `ziglang`). Locally a missing toolchain
//! skips that language with a printed reason; with `CI` or `FLOTILLA_REQUIRE_WASM_GUESTS` set
//! (tests/run.sh sets the latter) it fails.
//!
//! [`walkthrough`] is the per-project sequence (scaffold → build → plugin test → plan); the live
//! part (WasmPlugin object → swap → placements) is covered by the controller tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Whether `lang`'s toolchain is here; in CI a missing one is a failure, locally a skip.
fn toolchain(lang: &str) -> bool {
    let ok = match lang {
        "rust" => {
            (Path::new("/usr/bin/cargo").exists()
                && Path::new("/usr/lib/rustlib/src/rust/library").exists())
                || Command::new("rustup")
                    .args(["target", "list", "--installed"])
                    .output()
                    .map(|o| {
                        text(&o.stdout)
                            .lines()
                            .any(|l| l == "wasm32-unknown-unknown")
                    })
                    .unwrap_or(false)
        }
        "go" => runs(&["go", "version"]),
        "c" => runs(&["clang", "--version"]) && runs(&["wasm-ld", "--version"]),
        "assemblyscript" => runs(&["node", "--version"]) && runs(&["npm", "--version"]),
        "zig" => runs(&["zig", "version"]) || runs(&["python3", "-m", "ziglang", "version"]),
        _ => unreachable!(),
    };
    if !ok {
        assert!(
            !ci(),
            "toolchain for {lang} is missing (CI must provide it; see tests/run.sh)"
        );
        eprintln!("SKIPPED {lang}: its toolchain is not installed");
    }
    ok
}

fn check(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn flotilla(dir: &Path, args: &[&str]) -> String {
    check(
        &format!("flotilla {}", args.join(" ")),
        Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .current_dir(dir)
            .args(args)
            .output()
            .expect("run flotilla"),
    )
}

/// `cluster replicas=N` lines of `flotilla plan -o table`, in order.
fn placements(table: &str) -> Vec<String> {
    table
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("replicas=") && !l.starts_with("work"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

const NOW: &str = "2025-01-01T00:00:00Z";

/// A directory outside the repository (the system temporary directory), removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(lang: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("flotilla-plugin-new-{lang}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let repo = repo.canonicalize().expect("repo");
        assert!(
            !dir.starts_with(&repo),
            "{} is inside the repository",
            dir.display()
        );
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the plan shows without and with the profile, per point (the same in every language: the
/// README of each project states it).
fn expected(point: &str) -> (Vec<&'static str>, Vec<&'static str>) {
    let all = vec!["east replicas=6", "west replicas=6", "edge replicas=6"];
    match point {
        "filter" => (all, vec!["east replicas=6", "edge replicas=6"]),
        "score" | "assign" => (vec!["east replicas=6"], vec!["edge replicas=6"]),
        "select" => (all, vec!["edge replicas=6"]),
        "override" => (all.clone(), all),
        // Without the interpreter a Shard's replicas are unknown (0, the whole object to each
        // cluster); with it its 6 are divided by available replicas.
        "interpret" => (
            vec!["east replicas=0", "edge replicas=0", "west replicas=0"],
            vec!["east replicas=3", "edge replicas=1", "west replicas=2"],
        ),
        _ => unreachable!(),
    }
}

/// Scaffold `lang`/`point` under `parent`, build it with its `build.sh`, and follow its README:
/// `plugin inspect`, `plugin test` on the fixture, `plan` without and with `profile.yaml`.
/// Returns the project directory (the live test can take the module and profile from there).
pub fn walkthrough(parent: &Path, lang: &str, point: &str, env: &[(&str, &Path)]) -> PathBuf {
    let name = format!("my-{lang}-{point}");
    flotilla(
        parent,
        &["plugin", "new", "--lang", lang, "--point", point, &name],
    );
    let dir = parent.join(&name);
    let mut build = Command::new(dir.join("build.sh"));
    build
        .current_dir(&dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("GOTOOLCHAIN", "local")
        .env("npm_config_prefer_offline", "true")
        .env("ZIG_GLOBAL_CACHE_DIR", parent.join(".zig-cache"));
    for (k, v) in env {
        build.env(k, v);
    }
    let started = std::time::Instant::now();
    check(
        &format!("{lang}/{point}: ./build.sh"),
        build.output().expect("run build.sh"),
    );
    let wasm = format!("{name}.wasm");
    eprintln!(
        "{lang}/{point}: built {} bytes in {:?}",
        std::fs::metadata(dir.join(&wasm)).expect("module").len(),
        started.elapsed()
    );

    let inspect = flotilla(&dir, &["plugin", "inspect", &wasm]);
    assert!(
        inspect
            .lines()
            .any(|l| l.starts_with("points:") && l.contains(point)),
        "{lang}/{point}: {inspect}"
    );
    assert!(!inspect.contains("problem:"), "{lang}/{point}: {inspect}");

    let (without, with) = expected(point);
    let test = flotilla(&dir, &["plugin", "test", &wasm, "-f", "scenario/"]);
    if point == "interpret" {
        assert!(
            test.contains("Shard default/db: InterpretReplica replicas=6"),
            "{lang}/{point}: plugin test:\n{test}"
        );
        let plain = flotilla(
            &dir,
            &["plan", "-f", "scenario/", "-o", "table", "--now", NOW],
        );
        let interpreted = flotilla(
            &dir,
            &[
                "plan",
                "-f",
                "scenario/",
                "-f",
                "interpreter/",
                "-o",
                "table",
                "--now",
                NOW,
            ],
        );
        assert_eq!(
            placements(&plain),
            without,
            "{lang}/{point}: without the interpreter"
        );
        assert_eq!(
            placements(&interpreted),
            with,
            "{lang}/{point}: with the interpreter"
        );
        return dir;
    }
    let scheduled = with
        .iter()
        .map(|p| p.replace(" replicas=", ":"))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        test.contains(&format!("default/web-deployment: scheduled [{scheduled}]")),
        "{lang}/{point}: plugin test:\n{test}"
    );

    let plain = flotilla(
        &dir,
        &["plan", "-f", "scenario/", "-o", "table", "--now", NOW],
    );
    let profiled = flotilla(
        &dir,
        &[
            "plan",
            "-f",
            "scenario/",
            "--profile",
            "profile.yaml",
            "-o",
            "table",
            "--now",
            NOW,
        ],
    );
    assert_eq!(
        placements(&plain),
        without,
        "{lang}/{point}: without the profile"
    );
    assert_eq!(
        placements(&profiled),
        with,
        "{lang}/{point}: with the profile"
    );
    if point == "override" {
        for c in ["east", "west", "edge"] {
            assert!(
                test.contains(&format!(
                    "override {name} {c}: [{{\"op\":\"add\",\"path\":\"/metadata/labels/example.com~1cluster\",\"value\":\"{c}\"}}]"
                )),
                "{lang}/{point}: plugin test shows the patch per cluster:\n{test}"
            );
        }
        let yaml = |profile: bool| {
            let mut args = vec!["plan", "-f", "scenario/", "-o", "yaml", "--now", NOW];
            if profile {
                args.extend(["--profile", "profile.yaml"]);
            }
            flotilla(&dir, &args)
        };
        assert!(!yaml(false).contains("example.com/cluster:"));
        let out = yaml(true);
        for c in ["east", "west", "edge"] {
            assert_eq!(
                out.matches(&format!("example.com/cluster: {c}\n")).count(),
                1,
                "{lang}/{point}: the manifest for {c} is labelled with its cluster:\n{out}"
            );
        }
    } else {
        assert_ne!(placements(&plain), placements(&profiled));
    }
    // The project names nothing of this repository.
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    assert!(!cargo.contains("../"), "{cargo}");
    dir
}

fn every_point(lang: &str, env: &[(&str, &Path)]) {
    if !toolchain(lang) {
        return;
    }
    let scratch = Scratch::new(lang);
    for point in [
        "filter",
        "score",
        "select",
        "assign",
        "override",
        "interpret",
    ] {
        walkthrough(&scratch.0, lang, point, env);
    }
}

#[test]
fn c_every_point_builds_outside_the_repository_and_changes_the_plan() {
    every_point("c", &[]);
}

#[test]
fn go_every_point_builds_outside_the_repository_and_changes_the_plan() {
    every_point("go", &[]);
}

#[test]
fn assemblyscript_every_point_builds_outside_the_repository_and_changes_the_plan() {
    every_point("assemblyscript", &[]);
}

#[test]
fn zig_every_point_builds_outside_the_repository_and_changes_the_plan() {
    every_point("zig", &[]);
}

#[test]
fn rust_every_point_builds_outside_the_repository_and_changes_the_plan() {
    // Cargo's target directory is shared between the five projects (and kept between runs), so
    // std for wasm32 and the dependencies are compiled once; each project's crate is its own.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-new-rust");
    every_point("rust", &[("CARGO_TARGET_DIR", &target)]);
}

#[test]
fn plugin_new_refuses_bad_names_and_existing_directories() {
    let scratch = Scratch::new("names");
    for bad in ["Bad", "a/b", "../x", "x y", "-x"] {
        let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .current_dir(&scratch.0)
            .args(["plugin", "new", "--lang", "c", "--", bad])
            .output()
            .expect("run");
        assert!(!out.status.success(), "{bad}");
        assert!(
            text(&out.stderr).contains("plugin name"),
            "{}",
            text(&out.stderr)
        );
    }
    flotilla(&scratch.0, &["plugin", "new", "--lang", "c", "x"]);
    let out = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .current_dir(&scratch.0)
        .args(["plugin", "new", "--lang", "go", "x"])
        .output()
        .expect("run");
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );
    // build.sh has the run bit; the default point is filter.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(scratch.0.join("x/build.sh"))
        .expect("build.sh")
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    let profile = std::fs::read_to_string(scratch.0.join("x/profile.yaml")).expect("profile");
    assert!(profile.contains("filters:\n    add:"), "{profile}");
}
