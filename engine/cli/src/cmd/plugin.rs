//! `flotilla plugin`: inspect a Wasm plugin, try it on inputs, or start a new one from a template.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use flotilla_core::framework::{FailurePolicy, Slot};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::profile::{ExtensionPoint, PluginSpec, WasmSource};
use flotilla_core::scheduler::{Trace, schedule};
use flotilla_wasm::{Host, WasmFactory, WasmPlugin};

use super::input::Files;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Show a module's digest, ABI metadata, extension points, imports and exports.
    Inspect {
        /// The `.wasm` (or `.wat`) file.
        module: PathBuf,
    },
    /// Load a module and schedule the inputs' bindings with it in the default profile (at every
    /// extension point it exports); print the results, faults and the plugin's log lines.
    Test {
        /// The `.wasm` (or `.wat`) file.
        module: PathBuf,
        /// Plugin config (JSON).
        #[arg(long)]
        config: Option<String>,
        /// Templates, policies and Clusters to plan with.
        #[command(flatten)]
        files: Files,
    },
    /// Create a plugin project from a template.
    New {
        /// Plugin name (also the directory created).
        name: String,
        /// Language of the template.
        #[arg(long, value_enum)]
        lang: Lang,
        /// Parent directory.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
}

/// Template languages.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Lang {
    /// Rust with the flotilla-pdk crate.
    Rust,
    /// Go ≥ 1.24, wasip1 reactor.
    Go,
    /// C (clang, freestanding).
    C,
    /// AssemblyScript.
    Assemblyscript,
}

/// Run.
pub fn main(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Inspect { module } => inspect(&module),
        Command::Test {
            module,
            config,
            files,
        } => test(&module, config.as_deref(), &files),
        Command::New { name, lang, dir } => new(&name, lang, &dir),
    }
}

const POINTS: [(ExtensionPoint, &str); 5] = [
    (ExtensionPoint::Filter, "filter"),
    (ExtensionPoint::Score, "score"),
    (ExtensionPoint::Select, "select"),
    (ExtensionPoint::Assign, "assign"),
    (ExtensionPoint::Override, "override"),
];

fn inspect(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let module = Host::global()?
        .compile(&bytes)
        .with_context(|| path.display().to_string())?;
    println!("module:    {}", path.display());
    println!("sha256:    {}", module.digest);
    println!("size:      {} bytes", module.size);
    match &module.metadata {
        Some(m) => {
            println!("abi:       v{}", m.abi);
            println!("name:      {}", m.name);
            println!("version:   {}", m.version);
            println!("declares:  {}", m.capabilities.join(", "));
        }
        None => println!(
            "abi:       v{} (no flotilla.plugin section)",
            flotilla_abi::ABI_VERSION
        ),
    }
    let points: Vec<&str> = POINTS
        .iter()
        .filter(|(p, _)| module.exports_point(flotilla_wasm::export_for(*p)))
        .map(|(_, n)| *n)
        .collect();
    println!("points:    {}", points.join(", "));
    println!("init:      {}", if module.has_init { "yes" } else { "no" });
    println!(
        "wasi:      {}",
        if module.wasi {
            "wasip1, deny-all (clock, random)"
        } else {
            "no"
        }
    );
    println!(
        "imports:   {}",
        if module.imports.is_empty() {
            "(none)".to_owned()
        } else {
            module.imports.join(", ")
        }
    );
    println!("exports:   {}", module.exports.join(", "));
    Ok(())
}

fn test(path: &Path, config: Option<&str>, files: &Files) -> anyhow::Result<()> {
    let config = config
        .map(serde_json::from_str)
        .transpose()
        .context("--config is not JSON")?;
    let inv = files.load()?;
    let factory = WasmFactory::new();
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plugin".into());
    let spec = PluginSpec {
        name: name.clone(),
        wasm: Some(WasmSource {
            path: path.display().to_string(),
            sha256: None,
            plugin: None,
        }),
        config,
        failure_policy: FailurePolicy::Fail,
        ..Default::default()
    };
    let mut profile = flotilla_plugins::default_profile();
    let mut plugins: Vec<Arc<WasmPlugin>> = Vec::new();
    for (point, label) in POINTS {
        let plugin = match factory.load(point, &spec, path) {
            Ok(p) => Arc::new(p),
            Err(flotilla_wasm::LoadError::MissingExport { .. }) => continue,
            Err(e) => bail!("{}: {e}", path.display()),
        };
        plugin.capture_logs();
        println!("loaded {label} plugin {name}");
        match point {
            ExtensionPoint::Filter => profile.filters.push(Slot::new(Arc::clone(&plugin) as _)),
            ExtensionPoint::Score => profile.scores.push(Slot::new(Arc::clone(&plugin) as _)),
            ExtensionPoint::Select => profile.selects = vec![Slot::new(Arc::clone(&plugin) as _)],
            ExtensionPoint::Assign => profile
                .assigners
                .insert(0, Slot::new(Arc::clone(&plugin) as _)),
            ExtensionPoint::Override => {
                profile.overriders.push(Slot::new(Arc::clone(&plugin) as _))
            }
        }
        plugins.push(plugin);
    }
    if plugins.is_empty() {
        bail!("{}: exports no extension point", path.display());
    }
    // Bindings as `flotilla plan` derives them from the inputs (scheduled with the default profile).
    let options = Options {
        taint_eviction: false,
        ..Options::default()
    };
    let snapshot = Snapshot::new(
        inv.clusters.clone(),
        Arc::new(vec![flotilla_plugins::default_profile()]),
        options,
    );
    let planned = flotilla_core::plan::plan_in(&inv, &snapshot, super::input::now(None)?);
    for b in &planned.bindings {
        let binding = &b.binding;
        let status = binding.status.clone().unwrap_or_default();
        let template = inv.templates.iter().find(|t| {
            let r = &binding.spec.resource;
            t.api_version() == r.api_version
                && t.kind() == r.kind
                && t.namespace() == r.namespace
                && t.name() == r.name
        });
        let start = Instant::now();
        let mut trace = Trace::default();
        let r = schedule(
            &snapshot,
            &profile,
            &binding.spec,
            &status,
            template.map(|t| &t.0),
            Some(&mut trace),
        );
        let took = start.elapsed();
        let id = format!(
            "{}/{}",
            binding.metadata.namespace(),
            binding.metadata.name()
        );
        match &r.outcome {
            Ok(t) => {
                let t: Vec<String> = t
                    .iter()
                    .map(|t| format!("{}:{}", t.name, t.replicas))
                    .collect();
                println!("{id}: scheduled [{}] in {took:?}", t.join(", "));
            }
            Err(f) => println!("{id}: {} {} ({took:?})", f.kind.reason(), f.message),
        }
        for a in &trace.attempts {
            for (cluster, verdicts) in &a.filters {
                for (plugin, v) in verdicts.iter().filter(|(p, _)| p == &name) {
                    println!("  filter {plugin} {cluster}: {v:?}");
                }
            }
            for (cluster, scores) in &a.scores {
                for (plugin, s) in scores.iter().filter(|(p, _)| p == &name) {
                    println!("  score {plugin} {cluster}: {s}");
                }
            }
        }
        for p in &plugins {
            for (level, line) in p.take_logs() {
                println!("  log[{level}] {line}");
            }
        }
    }
    Ok(())
}

fn new(name: &str, lang: Lang, parent: &Path) -> anyhow::Result<()> {
    let dir = parent.join(name);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let files: Vec<(&str, String)> = match lang {
        Lang::Rust => vec![
            (
                "Cargo.toml",
                format!(
                    "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\n# The SDK lives in the Flotilla repository (sdk/rust); point this at your checkout.\nflotilla-pdk = {{ path = \"../flotilla/sdk/rust\" }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\n[profile.release]\nopt-level = 3\nlto = true\npanic = \"abort\"\n\n[workspace]\n"
                ),
            ),
            ("src/lib.rs", RUST_TEMPLATE.replace("NAME", name)),
            (
                "build.sh",
                "#!/bin/sh\n# Debian: apt-get install -y rustc-web cargo-web rust-web-src lld-22\nRUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 exec /usr/bin/cargo build --release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort\n".into(),
            ),
        ],
        Lang::C => vec![
            ("plugin.c", C_TEMPLATE.replace("NAME", name)),
            ("build.sh", format!("#!/bin/sh\nexec clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic -o {name}.wasm plugin.c\n")),
        ],
        Lang::Go => vec![
            ("go.mod", format!("module {name}\n\ngo 1.24\n")),
            ("main.go", GO_TEMPLATE.replace("NAME", name)),
            ("build.sh", format!("#!/bin/sh\nGOOS=wasip1 GOARCH=wasm exec go build -buildmode=c-shared -o {name}.wasm .\n")),
        ],
        Lang::Assemblyscript => vec![
            (
                "package.json",
                format!(
                    "{{\n  \"name\": \"{name}\",\n  \"version\": \"0.1.0\",\n  \"scripts\": {{ \"build\": \"asc assembly/index.ts -O3 --runtime stub --noAssert --use abort= -o {name}.wasm\" }},\n  \"devDependencies\": {{ \"assemblyscript\": \"^0.28.0\" }}\n}}\n"
                ),
            ),
            ("assembly/index.ts", AS_TEMPLATE.replace("NAME", name)),
        ],
    };
    for (rel, contents) in &files {
        let path = dir.join(rel);
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).with_context(|| format!("cannot create {}", p.display()))?;
        }
        std::fs::write(&path, contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("created {}", path.display());
    }
    println!(
        "next: build it (build.sh / npm run build), then `flotilla plugin inspect` and `flotilla plugin test`; the ABI is in sdk/ABI.md"
    );
    Ok(())
}

const RUST_TEMPLATE: &str = r#"//! NAME: a Flotilla filter plugin (ABI v1, see sdk/ABI.md).

use std::collections::BTreeMap;

use flotilla_pdk::abi::{BindingRequest, InitRequest};
use flotilla_pdk::{FilterOut, Plugin};

/// Only the cluster fields this plugin reads; everything else is skipped when parsing.
#[derive(serde::Deserialize)]
pub struct Cluster {
    metadata: Meta,
}

#[derive(serde::Deserialize)]
struct Meta {
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

pub struct Filter {
    label: String,
}

impl Plugin for Filter {
    type Cluster = Cluster;
    type Binding = BindingRequest;

    fn new(init: InitRequest) -> Result<Self, String> {
        let label = init.config.as_ref().and_then(|c| c["label"].as_str()).unwrap_or("example.com/enabled").to_owned();
        Ok(Filter { label })
    }

    fn filter(&mut self, _binding: &BindingRequest, clusters: &[&Cluster], out: &mut FilterOut) -> Result<(), String> {
        for c in clusters {
            if c.metadata.labels.contains_key(&self.label) { out.fit() } else { out.unfit("cluster(s) did not have the required label") }
        }
        Ok(())
    }
}

flotilla_pdk::export_plugin!(Filter, name = "NAME", version = "0.1.0", points = [filter]);
"#;

const C_TEMPLATE: &str = r#"// NAME: a Flotilla filter plugin in freestanding C (ABI v1, see sdk/ABI.md).
// Every cluster fits; replace the loop body with your decision.
#include <stdint.h>

#define IMPORT(name) __attribute__((import_module("flotilla:host/v1"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("set_result") void set_result(const void *ptr, uint32_t len);
IMPORT("set_rows") void set_rows(const void *ptr, uint32_t len);

extern unsigned char __heap_base;
static uintptr_t heap = (uintptr_t)&__heap_base;

EXPORT("flotilla_abi_version") int32_t abi_version(void) { return 1; }

// Bump allocator: grows memory on demand; blocks are never reused.
EXPORT("flotilla_alloc") void *alloc(uint32_t len) {
    uintptr_t p = (heap + 7) & ~(uintptr_t)7, end = p + len;
    uintptr_t have = __builtin_wasm_memory_size(0) * 65536;
    if (end > have && __builtin_wasm_memory_grow(0, (end - have + 65535) / 65536) < 0) return 0;
    heap = end;
    return (void *)p;
}
EXPORT("flotilla_dealloc") void dealloc(void *ptr, uint32_t len) { (void)ptr; (void)len; }

// The cluster set (JSON, sorted by name); rows refer to it by index. Parse what you need here.
EXPORT("flotilla_clusters_v1") int32_t clusters(const char *json, uint32_t len) { (void)json; (void)len; return 0; }

static unsigned char verdicts[65536];

EXPORT("flotilla_filter_v1") int32_t filter(const char *json, uint32_t len, const uint32_t *rows, uint32_t n) {
    (void)json; (void)len; (void)rows;
    if (n > sizeof verdicts) return 2;
    for (uint32_t i = 0; i < n; i++) verdicts[i] = 0; // 0 = fit, k = reasons[k-1]
    set_rows(verdicts, n);
    return 0;
}
"#;

const GO_TEMPLATE: &str = r#"// NAME: a Flotilla score plugin in Go (GOOS=wasip1 -buildmode=c-shared; ABI v1, see sdk/ABI.md).
package main

import (
	"encoding/binary"
	"unsafe"
)

//go:wasmimport flotilla:host/v1 set_rows
func setRows(ptr unsafe.Pointer, n uint32)

var keep = map[uintptr][]byte{}

//go:wasmexport flotilla_abi_version
func abiVersion() int32 { return 1 }

//go:wasmexport flotilla_alloc
func alloc(n uint32) unsafe.Pointer {
	b := make([]byte, n)
	p := unsafe.Pointer(unsafe.SliceData(b))
	keep[uintptr(p)] = b
	return p
}

//go:wasmexport flotilla_dealloc
func dealloc(p unsafe.Pointer, n uint32) { delete(keep, uintptr(p)) }

//go:wasmexport flotilla_clusters_v1
func clusters(p unsafe.Pointer, n uint32) int32 { return 0 }

//go:wasmexport flotilla_score_v1
func score(json unsafe.Pointer, jsonLen uint32, rows unsafe.Pointer, n uint32) int32 {
	out := make([]byte, 8*n)
	for i := uint32(0); i < n; i++ {
		binary.LittleEndian.PutUint64(out[8*i:], 50) // one i64 score per row
	}
	setRows(unsafe.Pointer(unsafe.SliceData(out)), uint32(len(out)))
	return 0
}

func main() {}
"#;

const AS_TEMPLATE: &str = r#"// NAME: a Flotilla filter plugin in AssemblyScript (ABI v1, see sdk/ABI.md).
@external("flotilla:host/v1", "set_rows")
declare function setRows(ptr: usize, len: u32): void;

export function flotilla_abi_version(): i32 { return 1; }

export function flotilla_alloc(len: u32): usize { return heap.alloc(len); }

export function flotilla_dealloc(ptr: usize, len: u32): void { heap.free(ptr); }

export function flotilla_clusters_v1(ptr: usize, len: u32): i32 { return 0; }

export function flotilla_filter_v1(json: usize, jsonLen: u32, rows: usize, n: u32): i32 {
  const out = heap.alloc(n);
  memory.fill(out, 0, n); // 0 = fit for every row
  setRows(out, n);
  heap.free(out);
  return 0;
}
"#;
