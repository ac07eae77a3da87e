//! `flotilla plugin`: inspect a Wasm plugin, try it on inputs, start a new one from a template, or
//! push and pull it as an OCI artifact.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use flotilla_controller::oci;
use flotilla_core::framework::{FailurePolicy, Slot};
use flotilla_core::pipeline::{Options, Snapshot};
use flotilla_core::profile::{ExtensionPoint, PluginSpec, WasmSource};
use flotilla_core::scheduler::{Trace, schedule};
use flotilla_wasm::{Host, WasmFactory, WasmPlugin};

use super::input::Files;
use super::scaffold::{Lang, Point};

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
    /// Create a complete plugin project: sources, the vendored SDK, `build.sh`, a profile that
    /// adds the plugin to the default scheduler, a scenario it changes the plan of, and a README.
    New {
        /// Plugin name (also the directory created): lowercase letters, digits and '-'.
        name: String,
        /// Language of the template.
        #[arg(long, value_enum)]
        lang: Lang,
        /// The extension point the plugin implements.
        #[arg(long, value_enum, default_value = "filter")]
        point: Point,
        /// Parent directory.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Push a module to an OCI registry as a Wasm artifact (config
    /// application/vnd.wasm.config.v0+json, one layer application/wasm); print its digests.
    Push {
        /// The `.wasm` file (binary; a `.wat` file is compiled first).
        module: PathBuf,
        /// Where to: `registry/repository:tag`.
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull a Wasm module from an OCI registry (checked against its digests) into a file; print
    /// the digests.
    Pull {
        /// `registry/repository:tag` or `registry/repository@sha256:<hex>`.
        reference: String,
        /// The file written.
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        registry: RegistryArgs,
    },
}

/// How `push` and `pull` reach the registry.
#[derive(Debug, clap::Args)]
struct RegistryArgs {
    /// User name (with --password or --password-stdin); default: the entry for the registry in
    /// $DOCKER_CONFIG/config.json or ~/.docker/config.json, else anonymous.
    #[arg(long, short = 'u')]
    username: Option<String>,
    /// Password or token (visible to other users in the process list; prefer --password-stdin).
    #[arg(
        long,
        short = 'p',
        requires = "username",
        conflicts_with = "password_stdin"
    )]
    password: Option<String>,
    /// Read the password from standard input.
    #[arg(long, requires = "username")]
    password_stdin: bool,
    /// Plain HTTP to the registry (always used for a loopback registry).
    #[arg(long)]
    insecure: bool,
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
        Command::New {
            name,
            lang,
            point,
            dir,
        } => new(&name, lang, point, &dir),
        Command::Push {
            module,
            reference,
            registry,
        } => push(&module, &reference, &registry),
        Command::Pull {
            reference,
            output,
            registry,
        } => pull(&reference, &output, &registry),
    }
}

/// The registry options for `reference`: flags first, then the Docker config's entry.
fn registry_options(reference: &str, args: &RegistryArgs) -> anyhow::Result<oci::Options> {
    let parsed = oci::parse_reference(reference).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut opts = oci::Options::new(flotilla_controller::controller::plugins::MAX_MODULE_BYTES);
    opts.insecure = args.insecure;
    if let Some(username) = &args.username {
        let password = match (&args.password, args.password_stdin) {
            (Some(p), _) => p.clone(),
            (None, true) => {
                let mut p = String::new();
                std::io::stdin()
                    .read_line(&mut p)
                    .context("reading the password from standard input")?;
                p.trim_end_matches(['\r', '\n']).to_owned()
            }
            (None, false) => bail!("--username needs --password or --password-stdin"),
        };
        opts.credentials = Some(oci::Credentials {
            username: username.clone(),
            password,
        });
        return Ok(opts);
    }
    let config = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
        .map(|d| d.join("config.json"));
    if let Some(path) = config.filter(|p| p.is_file()) {
        let bytes =
            std::fs::read(&path).with_context(|| format!("{}: cannot read", path.display()))?;
        opts.credentials = oci::docker_credentials(&bytes, parsed.resolve_registry())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if opts.credentials.is_some() {
            tracing::debug!(config = %path.display(), "using registry credentials from the Docker config");
        }
    }
    Ok(opts)
}

fn registry_error(verb: &str, e: &oci::OciError, opts: &oci::Options) -> anyhow::Error {
    if e.reason == "ImageUnauthorized" && opts.credentials.is_none() {
        anyhow::anyhow!(
            "{verb}: {e}; pass --username with --password-stdin, or log in with docker login"
        )
    } else {
        anyhow::anyhow!("{verb}: {e}")
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn push(path: &Path, reference: &str, args: &RegistryArgs) -> anyhow::Result<()> {
    let opts = registry_options(reference, args)?;
    let meta =
        std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if meta.len() > opts.max_bytes {
        bail!("{}: larger than {} bytes", path.display(), opts.max_bytes);
    }
    let mut bytes =
        std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    if !bytes.starts_with(b"\0asm") {
        bytes = wat::parse_bytes(&bytes)
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: neither a Wasm module nor WebAssembly text: {e}",
                    path.display()
                )
            })?
            .into_owned();
    }
    super::diagnose::shape(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: not a Wasm module: {e}", path.display()))?;
    let pushed = runtime()?
        .block_on(oci::push(reference, &bytes, &opts))
        .map_err(|e| registry_error("push", &e, &opts))?;
    tracing::info!(reference, digest = %pushed.manifest_digest, "pushed plugin");
    println!("pushed:    {reference}");
    println!("digest:    {}", pushed.manifest_digest);
    println!("module:    {} ({} bytes)", pushed.layer_digest, bytes.len());
    println!("pinned:    {}", pushed.pinned);
    Ok(())
}

fn pull(reference: &str, output: &Path, args: &RegistryArgs) -> anyhow::Result<()> {
    use std::io::Write as _;
    let opts = registry_options(reference, args)?;
    let pulled = runtime()?
        .block_on(oci::pull(reference, &opts))
        .map_err(|e| registry_error("pull", &e, &opts))?;
    let dir = output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = output
        .file_name()
        .with_context(|| format!("{}: not a file name", output.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(&pulled.bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, output));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        bail!("{}: cannot write: {e}", output.display());
    }
    tracing::info!(reference, digest = %pulled.manifest_digest, "pulled plugin");
    println!("pulled:    {reference}");
    println!("digest:    {}", pulled.manifest_digest);
    println!(
        "module:    {} ({} bytes)",
        pulled.layer_digest,
        pulled.bytes.len()
    );
    println!("pinned:    {}", pulled.pinned);
    println!("written:   {}", output.display());
    Ok(())
}

const POINTS: [(ExtensionPoint, &str); 5] = [
    (ExtensionPoint::Filter, "filter"),
    (ExtensionPoint::Score, "score"),
    (ExtensionPoint::Select, "select"),
    (ExtensionPoint::Assign, "assign"),
    (ExtensionPoint::Override, "override"),
];

/// Build mistakes in `bytes`, printed as `problem:` lines; an error when it is not a module.
fn problems(path: &Path, bytes: &[u8]) -> anyhow::Result<Vec<String>> {
    let shape =
        super::diagnose::shape(bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let problems = super::diagnose::problems(&shape);
    for p in &problems {
        println!("problem:   {p}");
    }
    Ok(problems)
}

fn inspect(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let problems = problems(path, &bytes)?;
    let module = match Host::global()?.compile(&bytes) {
        Ok(m) => m,
        Err(e) if !problems.is_empty() => bail!(
            "{}: {e}; {} build problem(s) above",
            path.display(),
            problems.len()
        ),
        Err(e) => bail!("{}: {e}", path.display()),
    };
    println!("module:    {}", path.display());
    println!("sha256:    {}", module.digest);
    println!("size:      {} bytes", module.size);
    match &module.metadata {
        Some(m) => {
            println!("abi:       v{}", m.abi);
            println!("name:      {}", m.name);
            println!("version:   {}", m.version);
            println!("declares:  {}", m.capabilities.join(", "));
            if !m.strategies.is_empty() {
                // An assigner called only for these (sdk/ABI.md §1).
                println!("strategies: {}", m.strategies.join(", "));
            }
            if !m.binding_fields.is_empty() {
                // Each call's binding carries only these members (sdk/ABI.md §1).
                println!("binding:   {}", m.binding_fields.join(", "));
            }
        }
        None => println!(
            "abi:       v{} (no flotilla.plugin section)",
            flotilla_abi::ABI_VERSION
        ),
    }
    let mut points: Vec<&str> = POINTS
        .iter()
        .filter(|(p, _)| module.exports_point(flotilla_wasm::export_for(*p)))
        .map(|(_, n)| *n)
        .collect();
    if module.has_interpret {
        points.push("interpret");
    }
    if module.has_victims {
        points.push("victims");
    }
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
    if !problems.is_empty() {
        bail!(
            "{}: {} build problem(s): see the problem: lines",
            path.display(),
            problems.len()
        );
    }
    // Loading runs the module (its ABI version answer, init with no config): what only shows then.
    if let Some((point, _)) = POINTS
        .iter()
        .find(|(p, _)| module.exports_point(flotilla_wasm::export_for(*p)))
    {
        let spec = PluginSpec {
            name: "inspect".into(),
            ..Default::default()
        };
        if let Err(e) = WasmFactory::new().load(*point, &spec, path) {
            let e = e.to_string();
            if let Some(h) = super::diagnose::hint(&e) {
                bail!("{}: loading: {e}\n{h}", path.display());
            }
            println!("load:      {e} (with no config)");
        } else {
            println!("load:      ok (with no config)");
        }
    }
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
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let problems = problems(path, &bytes)?;
    if !problems.is_empty() {
        bail!(
            "{}: {} build problem(s): see the problem: lines",
            path.display(),
            problems.len()
        );
    }
    let mut profile = flotilla_plugins::default_profile();
    let mut plugins: Vec<Arc<WasmPlugin>> = Vec::new();
    let mut overrider: Option<Arc<WasmPlugin>> = None;
    for (point, label) in POINTS {
        let plugin = match factory.load(point, &spec, path) {
            Ok(p) => Arc::new(p),
            Err(flotilla_wasm::LoadError::MissingExport { .. }) => continue,
            Err(e) => {
                let e = e.to_string();
                match super::diagnose::hint(&e) {
                    Some(h) => bail!("{}: {e}\n{h}", path.display()),
                    None => bail!("{}: {e}", path.display()),
                }
            }
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
                overrider = Some(Arc::clone(&plugin));
                profile.overriders.push(Slot::new(Arc::clone(&plugin) as _))
            }
        }
        plugins.push(plugin);
    }
    if plugins.is_empty() {
        return test_interpreter(path, &name, &bytes, spec.config.as_ref(), &inv);
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
        let template = inv.templates.iter().find(|t| {
            let r = &binding.spec.resource;
            t.api_version() == r.api_version
                && t.kind() == r.kind
                && t.namespace() == r.namespace
                && t.name() == r.name
        });
        // Scheduled afresh, as `flotilla plan` schedules a new binding: the clusters the
        // default profile chose above must not steer the plugin's result.
        let mut spec = binding.spec.clone();
        spec.clusters.clear();
        let status = flotilla_api::work::ResourceBindingStatus::default();
        let start = Instant::now();
        let mut trace = Trace::default();
        let r = schedule(
            &snapshot,
            &profile,
            &spec,
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
                // An overrider's patch for the manifest each chosen cluster gets.
                if let (Some(o), Some(template)) = (&overrider, template) {
                    for target in r.outcome.iter().flatten() {
                        let Some(cluster) = inv.clusters.iter().find(|c| c.name() == target.name)
                        else {
                            continue;
                        };
                        let input = flotilla_core::framework::OverrideInput::new(
                            &template.0,
                            cluster,
                            &inv.overrides,
                        );
                        match flotilla_core::framework::OverridePlugin::override_manifest(
                            o.as_ref(),
                            &input,
                        ) {
                            Ok(p) => println!(
                                "  override {name} {}: {}",
                                target.name,
                                serde_json::to_string(&p.patch).unwrap_or_default()
                            ),
                            Err(e) => println!("  override {name} {}: {e}", target.name),
                        }
                    }
                }
            }
            Err(f) => {
                println!("{id}: {} {} ({took:?})", f.kind.reason(), f.message);
                if let Some(h) = super::diagnose::hint(&f.message) {
                    println!("  {h}");
                }
            }
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

fn new(name: &str, lang: Lang, point: Point, parent: &Path) -> anyhow::Result<()> {
    let files = super::scaffold::project(name, lang, point)?;
    let dir = parent.join(name);
    super::scaffold::write(&dir, &files)?;
    for f in &files {
        println!("created {}", dir.join(&f.path).display());
    }
    println!(
        "next: cd {} && ./build.sh && flotilla plugin test {name}.wasm -f scenario/ && flotilla plan -f scenario/ --profile profile.yaml (see README.md)",
        dir.display()
    );
    Ok(())
}

/// `plugin test` of a resource interpreter: `InterpretReplica` on every object of the inputs,
/// through a customization routing the object's kind to the module (as `plan` runs it).
fn test_interpreter(
    path: &Path,
    name: &str,
    bytes: &[u8],
    config: Option<&serde_json::Value>,
    inv: &flotilla_core::plan::Inventory,
) -> anyhow::Result<()> {
    use flotilla_core::interpreter::{Customization, ResourceInterpreter as _};
    let plugin = flotilla_wasm::load_interpreter(name, bytes, config, None)
        .map_err(|e| {
            let hint = super::diagnose::hint(&e)
                .map(|h| format!("\n{h}"))
                .unwrap_or_default();
            anyhow::anyhow!("{}: {e}{hint}", path.display())
        })?
        .with_context(|| format!("{}: exports no extension point", path.display()))?;
    println!("loaded interpreter {name} (InterpretReplica; other operations: flotilla interpret)");
    let map = Arc::new(flotilla_wasm::PluginMap::new());
    map.insert(name, Ok(plugin));
    let backend = flotilla_wasm::WasmRuleBackend::new(map);
    for t in inv
        .templates
        .iter()
        .filter(|t| !super::interpreters::is_customization(&t.0))
        .filter(|t| t.kind() != "CustomResourceDefinition")
    {
        let ric: flotilla_api::interpreter::ResourceInterpreterCustomization =
            serde_json::from_value(serde_json::json!({
                "apiVersion": flotilla_api::interpreter::CONFIG_API_VERSION,
                "kind": flotilla_api::interpreter::CUSTOMIZATION_KIND,
                "metadata": {"name": "plugin-test"},
                "spec": {
                    "target": {"apiVersion": t.api_version(), "kind": t.kind()},
                    "customizations": {"replicaResource": {"wasm": {"plugin": name}}}
                }
            }))?;
        let c = Customization::compile(&ric, &[&backend])
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let id = format!("{} {}/{}", t.kind(), t.namespace(), t.name());
        let start = Instant::now();
        match c.get_replicas(&t.0) {
            Ok(r) => println!(
                "{id}: InterpretReplica replicas={} in {:?}",
                r.replicas,
                start.elapsed()
            ),
            Err(e) => {
                let e = e.to_string();
                println!("{id}: InterpretReplica failed: {e}");
                if let Some(h) = super::diagnose::hint(&e) {
                    println!("  {h}");
                }
            }
        }
    }
    Ok(())
}
