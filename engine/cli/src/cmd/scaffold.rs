//! `flotilla plugin new`: a complete, self-contained plugin project for one language and one
//! extension point. The project builds with `./build.sh` outside this repository (the SDK is
//! vendored into it from the copy compiled into this binary), and ships a `SchedulerProfile`
//! that adds the plugin to the default scheduler, a scenario in which the plugin changes the
//! plan, and a README with the commands.
//!
//! Every generated plugin reads one cluster label (config `label`) and only acts on clusters
//! that carry it, so the plugin with no config never rejects every cluster: the scenario labels
//! one cluster `example.com/avoid` and another `example.com/preferred`.

use std::path::Path;

use anyhow::{Context, bail};

/// Template languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust with the (vendored) flotilla-pdk crate.
    Rust,
    /// Go ≥ 1.24 with the (vendored) Go SDK, a wasip1 reactor.
    Go,
    /// Freestanding C with the (vendored) C SDK header.
    C,
    /// AssemblyScript with the (vendored) AssemblyScript SDK.
    Assemblyscript,
    /// Zig on the raw ABI (there is no Zig SDK).
    Zig,
}

impl Lang {
    /// Every language.
    #[cfg(test)]
    pub const ALL: [Lang; 5] = [
        Lang::Rust,
        Lang::Go,
        Lang::C,
        Lang::Assemblyscript,
        Lang::Zig,
    ];

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Go => "go",
            Lang::C => "c",
            Lang::Assemblyscript => "assemblyscript",
            Lang::Zig => "zig",
        }
    }
}

/// Extension points a template implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Point {
    /// Filter: clusters labelled `example.com/avoid` do not fit.
    Filter,
    /// Score: clusters labelled `example.com/preferred` score 100, the others 0.
    Score,
    /// Select: keep only the clusters labelled `example.com/preferred`.
    Select,
    /// Assign: Divided replicas all on the clusters labelled `example.com/preferred`.
    Assign,
    /// Override: label each cluster's manifest `example.com/cluster: <cluster>`.
    Override,
    /// Resource interpreter: the replicas of a custom kind (`InterpretReplica`).
    Interpret,
}

impl Point {
    /// Every extension point a template exists for.
    #[cfg(test)]
    pub const ALL: [Point; 6] = [
        Point::Filter,
        Point::Score,
        Point::Select,
        Point::Assign,
        Point::Override,
        Point::Interpret,
    ];

    /// The name used on the command line and in capabilities.
    pub fn as_str(self) -> &'static str {
        match self {
            Point::Filter => "filter",
            Point::Score => "score",
            Point::Select => "select",
            Point::Assign => "assign",
            Point::Override => "override",
            Point::Interpret => "interpret",
        }
    }

    /// The profile's list for the point.
    fn list(self) -> &'static str {
        match self {
            Point::Filter => "filters",
            Point::Score => "scores",
            Point::Select => "selects",
            Point::Assign => "assigners",
            Point::Override => "overriders",
            Point::Interpret => "interpreters",
        }
    }

    /// The label the plugin reads (its `config.label` default).
    pub fn label(self) -> &'static str {
        match self {
            Point::Filter => "example.com/avoid",
            Point::Override => "example.com/cluster",
            Point::Interpret => "example.com/replicas",
            _ => "example.com/preferred",
        }
    }

    /// What the plugin does, for the README.
    fn behaviour(self) -> &'static str {
        match self {
            Point::Filter => {
                "Clusters labelled `example.com/avoid` do not fit (reason: `cluster(s) had label example.com/avoid`); every other cluster does, so with no labelled cluster nothing changes."
            }
            Point::Score => {
                "Clusters labelled `example.com/preferred` score 100, the others 0 (scores are 0..100; the profile's `weight` multiplies them)."
            }
            Point::Select => {
                "Of the feasible clusters, keeps only those labelled `example.com/preferred` (all of them when none is)."
            }
            Point::Assign => {
                "For `Divided` bindings, puts every replica on the clusters labelled `example.com/preferred`, split evenly; it skips (the built-in assigners decide) for `Duplicated` bindings and when no selected cluster is labelled."
            }
            Point::Override => {
                "Adds the label `example.com/cluster: <cluster name>` to the manifest sent to each cluster (JSON Patch `add`; the manifest must have `metadata.labels`)."
            }
            Point::Interpret => {
                "A resource interpreter for the custom kind `Shard` (example.com/v1): `InterpretReplica` answers the object's label `example.com/replicas` when it holds a number, else `spec.replicas`, else 1. The ResourceInterpreterCustomization in `interpreter/` routes the kind's `replicaResource` to the `WasmPlugin` of this module."
            }
        }
    }

    /// The scenario policy's placement (after `clusterAffinity`), and what the plan shows.
    fn placement(self) -> (&'static str, &'static str) {
        match self {
            Point::Filter => (
                "    replicaScheduling:\n      replicaSchedulingType: Duplicated\n",
                "Duplicated to every cluster of the tier: without the plugin `east`, `edge` and `west` each get 6 replicas; with it `west` (labelled `example.com/avoid`) is filtered out.",
            ),
            Point::Score => (
                "    spreadConstraints:\n    - {spreadByField: cluster, maxGroups: 1, minGroups: 1}\n    replicaScheduling:\n      replicaSchedulingType: Duplicated\n",
                "One cluster only (a spread constraint), the best-ranked: without the plugin `east` (most room) wins; with it `edge` (labelled `example.com/preferred`, score 100) does.",
            ),
            Point::Select => (
                "    replicaScheduling:\n      replicaSchedulingType: Duplicated\n",
                "Duplicated to every cluster of the tier: without the plugin `east`, `edge` and `west` each get 6 replicas; with it only `edge` (labelled `example.com/preferred`) is selected.",
            ),
            Point::Assign => (
                "    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Aggregated\n",
                "6 replicas divided, aggregated: without the plugin they all go to `east` (most room); with it they all go to `edge` (labelled `example.com/preferred`).",
            ),
            Point::Override => (
                "    replicaScheduling:\n      replicaSchedulingType: Duplicated\n",
                "Duplicated to every cluster: with the plugin each cluster's manifest carries `example.com/cluster: <that cluster>` (see `-o yaml`); without it none does.",
            ),
            Point::Interpret => (
                "",
                "A Shard of 6 replicas, divided by available replicas: without the interpreter its replicas are unknown and each cluster gets the whole object; with it (`-f interpreter/`) the 6 replicas are divided.",
            ),
        }
    }
}

/// One generated file.
#[derive(Debug, Clone)]
pub struct File {
    /// Path relative to the project directory.
    pub path: String,
    /// Contents.
    pub contents: String,
    /// Written with the run bit (build scripts).
    pub executable: bool,
}

fn file(path: impl Into<String>, contents: impl Into<String>) -> File {
    File {
        path: path.into(),
        contents: contents.into(),
        executable: false,
    }
}

macro_rules! template {
    ($path:literal) => {
        include_str!(concat!("../../templates/plugin/", $path))
    };
}

macro_rules! sdk {
    ($path:literal) => {
        include_str!(concat!("../../../../", $path))
    };
}

/// Check a plugin name: it becomes a directory, a Cargo package, a Go module, an npm package and a
/// string in C and Zig sources, so only DNS-label names are accepted.
///
/// # Errors
/// The name is empty, longer than 63 bytes, or not lowercase letters, digits and `-` starting
/// with a letter and not ending with `-`.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        bail!(
            "plugin name {name:?}: use 1 to 63 lowercase letters, digits and '-', starting with a letter and not ending with '-' (it names the directory, the package and the plugin)"
        );
    }
    Ok(())
}

/// The files of a project `name` in `lang` implementing `point`.
///
/// # Errors
/// A bad name ([`check_name`]).
pub fn project(name: &str, lang: Lang, point: Point) -> anyhow::Result<Vec<File>> {
    check_name(name)?;
    let fill = |s: &str| {
        s.replace("__NAME__", name)
            .replace("__POINT__", point.as_str())
            .replace("__LABEL__", point.label())
            .replace("__CAPABILITY__", point.as_str())
    };
    let mut files = Vec::new();
    let (build, build_doc) = match lang {
        Lang::Rust => {
            let crate_name = name.replace('-', "_");
            let body = match point {
                Point::Filter => template!("rust/filter.rs"),
                Point::Score => template!("rust/score.rs"),
                Point::Select => template!("rust/select.rs"),
                Point::Assign => template!("rust/assign.rs"),
                Point::Override => template!("rust/override.rs"),
                Point::Interpret => template!("rust/interpret.rs"),
            };
            files.push(file(
                "src/lib.rs",
                fill(&format!("{}{body}", template!("rust/head.rs"))),
            ));
            files.push(file("Cargo.toml", fill(RUST_CARGO)));
            files.push(file("vendor/flotilla-pdk/Cargo.toml", RUST_PDK_CARGO));
            files.push(file(
                "vendor/flotilla-pdk/src/lib.rs",
                sdk!("sdk/rust/src/lib.rs"),
            ));
            files.push(file("vendor/flotilla-abi/Cargo.toml", RUST_ABI_CARGO));
            files.push(file(
                "vendor/flotilla-abi/src/lib.rs",
                sdk!("engine/abi/src/lib.rs"),
            ));
            files.push(file(".gitignore", "/target\n*.wasm\n"));
            (fill(RUST_BUILD).replace("__CRATE__", &crate_name), RUST_DOC)
        }
        Lang::Go => {
            let (body, imports) = match point {
                Point::Filter => (
                    template!("go/filter.go"),
                    "\t\"flotilla.dev/sdk/go/filter\"\n",
                ),
                Point::Score => (
                    template!("go/score.go"),
                    "\t\"flotilla.dev/sdk/go/score\"\n",
                ),
                Point::Select => (
                    template!("go/select.go"),
                    "\t\"flotilla.dev/sdk/go/selection\"\n",
                ),
                Point::Assign => (
                    template!("go/assign.go"),
                    "\t\"flotilla.dev/sdk/go/assign\"\n",
                ),
                Point::Override => (
                    template!("go/override.go"),
                    "\t\"strings\"\n\n\t\"flotilla.dev/sdk/go/override\"\n",
                ),
                Point::Interpret => (
                    template!("go/interpret.go"),
                    "\t\"strconv\"\n\n\t\"flotilla.dev/sdk/go/interpret\"\n",
                ),
            };
            let main =
                fill(&format!("{}{body}", template!("go/head.go"))).replace("__IMPORTS__", imports);
            files.push(file("main.go", main));
            files.push(file(
                "go.mod",
                format!(
                    "module example.com/{name}\n\ngo 1.24\n\nrequire flotilla.dev/sdk/go v0.0.0\n\n// The SDK is vendored in flotilla-sdk/ (written by `flotilla plugin new`).\nreplace flotilla.dev/sdk/go => ./flotilla-sdk\n"
                ),
            ));
            for (path, contents) in GO_SDK {
                files.push(file(format!("flotilla-sdk/{path}"), *contents));
            }
            files.push(file(".gitignore", "*.wasm\n"));
            (fill(GO_BUILD), GO_DOC)
        }
        Lang::C => {
            let body = match point {
                Point::Filter => template!("c/filter.c"),
                Point::Score => template!("c/score.c"),
                Point::Select => template!("c/select.c"),
                Point::Assign => template!("c/assign.c"),
                Point::Override => template!("c/override.c"),
                Point::Interpret => template!("c/interpret.c"),
            };
            files.push(file(
                "plugin.c",
                fill(&format!("{}{body}", template!("c/head.c"))),
            ));
            files.push(file("flotilla.h", sdk!("sdk/c/flotilla.h")));
            files.push(file(".gitignore", "*.wasm\n"));
            (fill(C_BUILD), C_DOC)
        }
        Lang::Assemblyscript => {
            let (body, imports, export) = match point {
                Point::Filter => (
                    template!("assemblyscript/filter.ts"),
                    "onFilter",
                    "flotilla_filter_v1",
                ),
                Point::Score => (
                    template!("assemblyscript/score.ts"),
                    "onScore",
                    "flotilla_score_v1",
                ),
                Point::Select => (
                    template!("assemblyscript/select.ts"),
                    "onSelect, SelectResult, DetailRow",
                    "flotilla_select_v1",
                ),
                Point::Assign => (
                    template!("assemblyscript/assign.ts"),
                    "onAssign, AssignResult, DetailRow",
                    "flotilla_assign_v1",
                ),
                Point::Interpret => (
                    template!("assemblyscript/interpret.ts"),
                    "onInterpret, InterpretRequest",
                    "flotilla_interpret_v1",
                ),
                Point::Override => (
                    template!("assemblyscript/override.ts"),
                    "onOverride, OverrideRequest, PatchOp, stringValue, pointerEscape, clusterName",
                    "flotilla_override_v1",
                ),
            };
            let index = fill(&format!("{}{body}", template!("assemblyscript/head.ts")))
                .replace("__IMPORTS__", imports)
                .replace("__EXPORT__", export);
            files.push(file("assembly/index.ts", index));
            files.push(file(
                "assembly/tsconfig.json",
                "{\n  \"extends\": \"assemblyscript/std/assembly.json\",\n  \"include\": [\"./**/*.ts\"]\n}\n",
            ));
            files.push(file("package.json", fill(AS_PACKAGE)));
            files.push(file("flotilla-sdk/package.json", AS_SDK_PACKAGE));
            files.push(file(
                "flotilla-sdk/assembly/index.ts",
                sdk!("sdk/assemblyscript/assembly/index.ts"),
            ));
            files.push(file(
                "flotilla-sdk/assembly/json.ts",
                sdk!("sdk/assemblyscript/assembly/json.ts"),
            ));
            files.push(file(
                "flotilla-sdk/metadata.js",
                sdk!("sdk/assemblyscript/metadata.js"),
            ));
            files.push(file(".gitignore", "node_modules/\n*.wasm\n"));
            (fill(AS_BUILD), AS_DOC)
        }
        Lang::Zig => {
            let body = match point {
                Point::Filter => template!("zig/filter.zig"),
                Point::Score => template!("zig/score.zig"),
                Point::Select => template!("zig/select.zig"),
                Point::Assign => template!("zig/assign.zig"),
                Point::Override => template!("zig/override.zig"),
                Point::Interpret => template!("zig/interpret.zig"),
            };
            files.push(file(
                "src/main.zig",
                fill(&format!("{}{body}", template!("zig/head.zig"))),
            ));
            files.push(file(".gitignore", "*.wasm\n.zig-cache/\n"));
            (fill(ZIG_BUILD), ZIG_DOC)
        }
    };
    files.push(File {
        path: "build.sh".into(),
        contents: build,
        executable: true,
    });
    let (placement, expect) = point.placement();
    files.push(file(
        "scenario/clusters.yaml",
        template!("common/clusters.yaml"),
    ));
    if point == Point::Interpret {
        files.push(file("scenario/shard.yaml", template!("common/shard.yaml")));
        files.push(file(
            "interpreter/customization.yaml",
            fill(template!("common/customization.yaml")),
        ));
        files.push(file(
            "interpreter/wasmplugin.yaml",
            fill(template!("common/wasmplugin.yaml")),
        ));
    } else {
        files.push(file(
            "scenario/workload.yaml",
            template!("common/workload.yaml")
                .replace("__PLACEMENT__\n", placement)
                .replace("__POLICY_COMMENT__", &policy_comment(point)),
        ));
        files.push(file(
            "profile.yaml",
            fill(PROFILE).replace("__LIST__", point.list()),
        ));
    }
    let readme = if point == Point::Interpret {
        README_INTERPRET
    } else {
        README
    };
    files.push(file(
        "README.md",
        fill(readme)
            .replace("__LANG__", lang.as_str())
            .replace("__BUILD_DOC__", build_doc)
            .replace("__BEHAVIOUR__", point.behaviour())
            .replace("__EXPECT__", expect)
            .replace("__LIST__", point.list())
            .replace("__ORDER__", order(point)),
    ));
    Ok(files)
}

fn policy_comment(point: Point) -> String {
    format!(
        "No spec.schedulerName: the policy uses the `default-scheduler` profile, which profile.yaml extends with the {} plugin.",
        point.as_str()
    )
}

fn order(point: Point) -> &'static str {
    match point {
        Point::Assign => {
            "An added assigner is asked before the built-in ones (Duplicated, StaticWeight, DynamicWeight, Aggregated), which handle whatever it skips."
        }
        _ => "Added plugins run after the built-ins of the point.",
    }
}

/// Write `files` into a new directory `dir` (which must not exist).
///
/// # Errors
/// `dir` exists, or a file cannot be written.
pub fn write(dir: &Path, files: &[File]) -> anyhow::Result<()> {
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    for f in files {
        let path = dir.join(&f.path);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).with_context(|| format!("cannot create {}", p.display()))?;
        }
        std::fs::write(&path, &f.contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if f.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
    }
    Ok(())
}

const PROFILE: &str = r#"# The default scheduler (the profile of every policy without spec.schedulerName) with
# __NAME__ added to its __LIST__. `add:` keeps the built-in __LIST__ and adds this one; a plain
# list (`__LIST__: [...]`) would REPLACE them, so name every built-in you keep
# (`flotilla profile default` prints them). A profile with another name applies only to policies
# whose spec.schedulerName names it.
apiVersion: flotilla.dev/v1alpha1
kind: SchedulerProfile
metadata: {name: default-scheduler}
spec:
  __LIST__:
    add:
    - name: __NAME__
      wasm: {path: __NAME__.wasm}   # relative to this file
      failurePolicy: Fail
      # config: {label: __LABEL__}
"#;

const README: &str = r#"# __NAME__

A Flotilla __POINT__ plugin in __LANG__, generated by
`flotilla plugin new --lang __LANG__ --point __POINT__ __NAME__`.

__BEHAVIOUR__

Config (optional, in the profile entry or the WasmPlugin object): `{"label": "__LABEL__"}`.

## Build

```sh
./build.sh            # writes __NAME__.wasm next to this file
```

__BUILD_DOC__

## Try it

```sh
flotilla plugin inspect __NAME__.wasm                  # exports, imports, ABI metadata; flags build mistakes
flotilla plugin test __NAME__.wasm -f scenario/        # the plugin on the scenario, with its verdicts and log lines
flotilla plan -f scenario/                             # the plan without the plugin
flotilla plan -f scenario/ --profile profile.yaml      # ... and with it
flotilla validate -f scenario/ --profile profile.yaml  # the profile builds, and some policy uses it
```

The scenario (`scenario/`) has three clusters: `east` (most room), `west` (labelled
`example.com/avoid`) and `edge` (labelled `example.com/preferred`), and a Deployment of 6 replicas.
__EXPECT__

## The profile

`profile.yaml` extends the `default-scheduler` profile: `__LIST__: {add: [...]}` keeps the
built-in __LIST__ and adds this plugin. __ORDER__ A plain list (`__LIST__: [...]`) replaces the
built-ins instead (`flotilla explain` says so); `flotilla profile default` prints the default
profile. A profile with another name applies only to policies whose `spec.schedulerName` names it
(`flotilla validate --profile` warns when no policy does).

## Load it into a running control plane

```sh
kubectl create -f - <<EOF
apiVersion: flotilla.dev/v1alpha1
kind: WasmPlugin
metadata: {name: __NAME__}
spec:
  module: {base64: $(base64 -w0 __NAME__.wasm)}
EOF
```

or, for a module over about 2 MB (Go's are 3 MB or more; base64 would exceed the API server's
3 MiB request limit), copy it into the control plane's module directory (`flotilla up
--module-dir DIR`) and use `spec.module: {path: __NAME__.wasm}`. Then point a profile entry at
it with `wasm: {plugin: __NAME__}` instead of `wasm: {path: ...}`.
Updating the object (a rebuilt module) swaps the plugin live: new placements use the new module;
a module that fails to load leaves the previous one serving.
"#;

const README_INTERPRET: &str = r#"# __NAME__

A Flotilla resource interpreter in __LANG__, generated by
`flotilla plugin new --lang __LANG__ --point interpret __NAME__`.

__BEHAVIOUR__

Config (optional, in the WasmPlugin object): `{"label": "__LABEL__"}`.

## Build

```sh
./build.sh            # writes __NAME__.wasm next to this file
```

__BUILD_DOC__

## Try it

```sh
flotilla plugin inspect __NAME__.wasm                     # exports, imports, metadata; flags build mistakes
flotilla plugin test __NAME__.wasm -f scenario/           # InterpretReplica on every object of the scenario
flotilla plan -f scenario/                                # the plan without the interpreter
flotilla plan -f scenario/ -f interpreter/                # ... and with it
```

__EXPECT__

`interpreter/` holds what a control plane holds: the ResourceInterpreterCustomization routing the
Shard kind's `replicaResource` to the plugin, and the `WasmPlugin` with the module (offline,
`spec.module.path` is relative to that file).

## Load it into a running control plane

```sh
kubectl create -f - <<EOF
apiVersion: flotilla.dev/v1alpha1
kind: WasmPlugin
metadata: {name: __NAME__}
spec:
  module: {base64: $(base64 -w0 __NAME__.wasm)}
EOF
kubectl apply -f interpreter/customization.yaml
```

(A module over about 2 MB, as Go's are, exceeds the API server's 3 MiB request limit in base64:
copy it into the control plane's module directory, `flotilla up --module-dir DIR`, and use
`spec.module: {path: __NAME__.wasm}`.)

Updating the object (a rebuilt module) swaps the interpreter live; a module that fails to load
leaves the previous one serving.
"#;

const RUST_CARGO: &str = r#"# __NAME__: a Flotilla __POINT__ plugin. Its own workspace; the SDK is vendored in vendor/.
[workspace]

[package]
name = "__NAME__"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
# cdylib: the Wasm module; rlib: `cargo test` runs unit tests natively.
crate-type = ["cdylib", "rlib"]

[dependencies]
flotilla-pdk = { path = "vendor/flotilla-pdk" }
serde = { version = "1", features = ["derive"] }
serde_json = "1"

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = true
"#;

const RUST_PDK_CARGO: &str = r#"# The Flotilla Rust SDK, vendored by `flotilla plugin new` (ABI v1).
[package]
name = "flotilla-pdk"
version = "0.1.0"
edition = "2024"
license = "Apache-2.0"
publish = false

[dependencies]
flotilla-abi = { path = "../flotilla-abi" }
serde = { version = "1", features = ["derive"] }
serde_json = { version = "1", features = ["raw_value"] }
"#;

const RUST_ABI_CARGO: &str = r#"# The Flotilla plugin ABI v1 types, vendored by `flotilla plugin new`.
[package]
name = "flotilla-abi"
version = "0.1.0"
edition = "2024"
license = "Apache-2.0"
publish = false

[dependencies]
serde = { version = "1", default-features = false, features = ["derive", "std"] }
serde_json = { version = "1", default-features = false, features = ["std"] }
schemars = { version = "1", optional = true }

[features]
schema = ["dep:schemars"]
"#;

const RUST_BUILD: &str = r#"#!/bin/sh
# Builds __NAME__.wasm (wasm32-unknown-unknown). Either toolchain works:
# - rustup: `rustup target add wasm32-unknown-unknown`;
# - Debian's rustc-web, which builds std for wasm32 itself:
#   apt-get install -y rustc-web cargo-web rust-web-src lld-22
set -eu
cd "$(dirname "$0")"
target="${CARGO_TARGET_DIR:-target}"
if command -v rustup >/dev/null 2>&1 && rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  cargo build --release --target wasm32-unknown-unknown "$@"
elif [ -x /usr/bin/cargo ] && [ -d /usr/lib/rustlib/src/rust/library ]; then
  RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 /usr/bin/cargo build --release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort "$@"
else
  echo "build.sh: no Rust toolchain for wasm32-unknown-unknown: run 'rustup target add wasm32-unknown-unknown' or install Debian's rustc-web cargo-web rust-web-src lld-22" >&2
  exit 1
fi
cp "$target/wasm32-unknown-unknown/release/__CRATE__.wasm" __NAME__.wasm
echo "built __NAME__.wasm"
"#;

const RUST_DOC: &str = "Rust: `rustup target add wasm32-unknown-unknown`, or Debian's `rustc-web cargo-web rust-web-src lld-22` (build.sh picks whichever is there). The SDK (`flotilla-pdk` and `flotilla-abi`) is vendored in `vendor/`; `cargo test` runs unit tests natively.";

const GO_BUILD: &str = r#"#!/bin/sh
# Builds __NAME__.wasm with Go >= 1.24 as a wasip1 *reactor*: -buildmode=c-shared is required.
# Without it Go builds a command module whose runtime is never initialised, and every call traps
# ("runtime.notInitialized ... unreachable"); `flotilla plugin inspect` flags such a module.
set -eu
cd "$(dirname "$0")"
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -o __NAME__.wasm .
# Go's linker cannot write custom sections: add the optional flotilla.plugin metadata.
go run flotilla.dev/sdk/go/cmd/flotilla-metadata -name __NAME__ -version 0.1.0 __NAME__.wasm
echo "built __NAME__.wasm"
"#;

const GO_DOC: &str = "Go 1.24 or newer. The Go SDK (module `flotilla.dev/sdk/go`) is vendored in `flotilla-sdk/` through a `replace` in go.mod; it has no dependencies, so no network is needed.";

const C_BUILD: &str = r#"#!/bin/sh
# Builds __NAME__.wasm with clang and wasm-ld (Debian: apt-get install -y clang lld), freestanding.
set -eu
cd "$(dirname "$0")"
clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic -Wall -Werror -I. -o __NAME__.wasm plugin.c
echo "built __NAME__.wasm"
"#;

const C_DOC: &str = "clang with the wasm32 target and wasm-ld (Debian: `clang lld`). No libc: the SDK header `flotilla.h` (vendored here) brings an allocator, a JSON reader and writer and the memory functions clang may call.";

const AS_BUILD: &str = r#"#!/bin/sh
# Builds __NAME__.wasm with AssemblyScript (node and npm; the compiler comes from npm install).
# `--use abort=` is required: without it the module imports env.abort, which the host refuses.
set -eu
cd "$(dirname "$0")"
[ -f node_modules/assemblyscript/bin/asc.js ] || npm install --no-audit --no-fund
node node_modules/assemblyscript/bin/asc.js assembly/index.ts -O3 --noAssert --runtime incremental \
  --use abort= --transform @flotilla/plugin-sdk/metadata.js -o __NAME__.wasm
echo "built __NAME__.wasm"
"#;

const AS_DOC: &str = "node and npm (the first build runs `npm install` for the AssemblyScript compiler). The SDK (`@flotilla/plugin-sdk`) is vendored in `flotilla-sdk/` and referenced as `file:./flotilla-sdk`.";

const AS_PACKAGE: &str = r#"{
  "name": "__NAME__",
  "version": "0.1.0",
  "private": true,
  "description": "Flotilla __POINT__ plugin in AssemblyScript",
  "type": "module",
  "scripts": {
    "build": "./build.sh"
  },
  "devDependencies": {
    "@flotilla/plugin-sdk": "file:./flotilla-sdk",
    "assemblyscript": "0.28.20"
  }
}
"#;

const AS_SDK_PACKAGE: &str = r#"{
  "name": "@flotilla/plugin-sdk",
  "version": "0.1.0",
  "description": "AssemblyScript SDK for Flotilla plugins (plugin ABI v1), vendored by flotilla plugin new",
  "license": "Apache-2.0",
  "type": "module",
  "main": "assembly/index.ts",
  "types": "assembly/index.ts"
}
"#;

const ZIG_BUILD: &str = r#"#!/bin/sh
# Builds __NAME__.wasm with Zig (tested with 0.17; `zig` on PATH, or `pip install ziglang`).
set -eu
cd "$(dirname "$0")"
if command -v zig >/dev/null 2>&1; then
  zig build-exe src/main.zig -target wasm32-freestanding -fno-entry -rdynamic -O ReleaseSmall -femit-bin=__NAME__.wasm
elif python3 -m ziglang version >/dev/null 2>&1; then
  python3 -m ziglang build-exe src/main.zig -target wasm32-freestanding -fno-entry -rdynamic -O ReleaseSmall -femit-bin=__NAME__.wasm
else
  echo "build.sh: zig not found: install Zig (0.17) or 'pip install ziglang'" >&2
  exit 1
fi
echo "built __NAME__.wasm"
"#;

const ZIG_DOC: &str = "Zig 0.17 (`zig` on PATH, or the PyPI package `ziglang`). There is no Zig SDK: `src/main.zig` implements the few ABI exports itself (version, allocator, init, cluster set, the extension point) and parses JSON with `std.json`. Zig cannot emit the optional `flotilla.plugin` metadata section, so `flotilla plugin inspect` shows none.";

/// The Go SDK's sources (tests left out), vendored into Go projects.
const GO_SDK: &[(&str, &str)] = &[
    ("go.mod", sdk!("sdk/go/go.mod")),
    ("flotilla.go", sdk!("sdk/go/flotilla.go")),
    ("native.go", sdk!("sdk/go/native.go")),
    ("wasm.go", sdk!("sdk/go/wasm.go")),
    ("filter/filter.go", sdk!("sdk/go/filter/filter.go")),
    (
        "filter/filter_wasm.go",
        sdk!("sdk/go/filter/filter_wasm.go"),
    ),
    ("score/score.go", sdk!("sdk/go/score/score.go")),
    ("score/score_wasm.go", sdk!("sdk/go/score/score_wasm.go")),
    (
        "selection/selection.go",
        sdk!("sdk/go/selection/selection.go"),
    ),
    (
        "selection/selection_wasm.go",
        sdk!("sdk/go/selection/selection_wasm.go"),
    ),
    ("assign/assign.go", sdk!("sdk/go/assign/assign.go")),
    (
        "assign/assign_wasm.go",
        sdk!("sdk/go/assign/assign_wasm.go"),
    ),
    ("override/override.go", sdk!("sdk/go/override/override.go")),
    (
        "override/override_wasm.go",
        sdk!("sdk/go/override/override_wasm.go"),
    ),
    (
        "interpret/interpret.go",
        sdk!("sdk/go/interpret/interpret.go"),
    ),
    (
        "interpret/interpret_wasm.go",
        sdk!("sdk/go/interpret/interpret_wasm.go"),
    ),
    ("metadata/metadata.go", sdk!("sdk/go/metadata/metadata.go")),
    (
        "cmd/flotilla-metadata/main.go",
        sdk!("sdk/go/cmd/flotilla-metadata/main.go"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_break_a_package_or_a_source_are_refused() {
        for bad in [
            "",
            "A",
            "1x",
            "x-",
            "x_y",
            "x\"y",
            "x/y",
            "x y",
            &"x".repeat(64),
        ] {
            assert!(project(bad, Lang::C, Point::Filter).is_err(), "{bad:?}");
        }
        assert!(project("my-filter2", Lang::C, Point::Filter).is_ok());
    }

    #[test]
    fn every_project_is_complete_and_has_no_placeholder_or_repository_path_left() {
        for lang in Lang::ALL {
            for point in Point::ALL {
                let files = project("p", lang, point).expect("project");
                let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
                let wants: &[&str] = if point == Point::Interpret {
                    &[
                        "build.sh",
                        "README.md",
                        "scenario/clusters.yaml",
                        "scenario/shard.yaml",
                        "interpreter/customization.yaml",
                        "interpreter/wasmplugin.yaml",
                    ]
                } else {
                    &[
                        "build.sh",
                        "profile.yaml",
                        "README.md",
                        "scenario/clusters.yaml",
                        "scenario/workload.yaml",
                    ]
                };
                for want in wants {
                    assert!(names.contains(want), "{lang:?} {point:?}: {names:?}");
                }
                let vendored = |p: &str| {
                    p.starts_with("vendor/") || p.starts_with("flotilla-sdk/") || p == "flotilla.h"
                };
                for f in files.iter().filter(|f| !vendored(&f.path)) {
                    for placeholder in [
                        "__NAME__",
                        "__POINT__",
                        "__LABEL__",
                        "__LIST__",
                        "__IMPORTS__",
                        "__EXPORT__",
                        "__CRATE__",
                        "__PLACEMENT__",
                        "__CAPABILITY__",
                        "__ORDER__",
                        "__EXPECT__",
                        "__BEHAVIOUR__",
                        "__LANG__",
                        "__BUILD_DOC__",
                        "__POLICY_COMMENT__",
                    ] {
                        assert!(
                            !f.contents.contains(placeholder),
                            "{lang:?} {point:?} {}: {placeholder} left",
                            f.path
                        );
                    }
                    assert!(
                        !f.contents.contains("../../") && !f.contents.contains("../flotilla"),
                        "{lang:?} {point:?} {}: a path outside the project",
                        f.path
                    );
                }
                assert!(files.iter().any(|f| f.path == "build.sh" && f.executable));
                // Go and AssemblyScript go through their SDKs, not the raw ABI.
                let source = |p: &str| {
                    files
                        .iter()
                        .find(|f| f.path == p)
                        .map(|f| f.contents.as_str())
                };
                match lang {
                    Lang::Go => {
                        let main = source("main.go").expect("main.go");
                        assert!(main.contains("flotilla \"flotilla.dev/sdk/go\""), "{main}");
                        assert!(!main.contains("go:wasmexport"), "{main}");
                    }
                    Lang::Assemblyscript => {
                        let index = source("assembly/index.ts").expect("index.ts");
                        assert!(
                            index.contains("from \"@flotilla/plugin-sdk/assembly\""),
                            "{index}"
                        );
                        assert!(!index.contains("@external"), "{index}");
                    }
                    _ => {}
                }
            }
        }
    }
}
