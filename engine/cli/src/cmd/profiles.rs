//! Scheduler profiles for the offline commands: the built-in `default-scheduler` plus any
//! `SchedulerProfile` documents given with `--profile`.

use std::path::PathBuf;

use anyhow::Context;
use flotilla_core::framework::Profile;
use flotilla_core::profile::{Factories, PluginFactory, ProfileDocument, build_profile};

/// The plugin backends this binary links, one per [`flotilla_core::profile::Backend`]. Backends
/// register here.
pub fn factories() -> Factories {
    Factories::new([
        std::sync::Arc::new(flotilla_plugins::BuiltinFactory) as std::sync::Arc<dyn PluginFactory>,
        std::sync::Arc::new(flotilla_cel::CelFactory::new(cel())),
        std::sync::Arc::new(flotilla_wasm::WasmFactory::new()),
    ])
}

/// The default profile with the process's CEL engine for policies' expressions.
pub fn base() -> Profile {
    let mut base = flotilla_plugins::default_profile();
    base.expressions = Some(cel());
    base
}

/// What the controllers build profiles from (`SchedulerProfile`/`WasmPlugin` objects): every
/// backend, the default profile, `store` for resolved modules, and `source`, the only directory
/// `WasmPlugin` objects may name module files in (`--module-dir`; none refuses such paths).
pub fn backends(
    store: PathBuf,
    source: Option<PathBuf>,
) -> flotilla_controller::controller::plugins::Backends {
    // Compiled modules are kept beside the stored ones, so a restart does not compile again;
    // module directory files are compiled into the same cache as they appear.
    let wasm = std::sync::Arc::new(flotilla_wasm::WasmFactory::with_cache_dir(
        store.join("compiled"),
    ));
    let factories = Factories::new([
        std::sync::Arc::new(flotilla_plugins::BuiltinFactory) as std::sync::Arc<dyn PluginFactory>,
        std::sync::Arc::new(flotilla_cel::CelFactory::new(cel())),
        std::sync::Arc::clone(&wasm) as std::sync::Arc<dyn PluginFactory>,
    ]);
    let precompile: flotilla_controller::controller::plugins::Precompile =
        std::sync::Arc::new(move |bytes: &[u8]| wasm.precompile(bytes).map_err(|e| e.to_string()));
    flotilla_controller::controller::plugins::Backends {
        base: base(),
        factories,
        module_dir: Some(store),
        module_source_dir: source,
        precompile: Some(precompile),
    }
}

/// The default profile, then one per `--profile` document (a document named `default-scheduler`
/// replaces the built-in one).
pub fn load(paths: &[PathBuf]) -> anyhow::Result<Vec<Profile>> {
    let base = base();
    let factories = factories();
    let mut profiles = vec![base.clone()];
    for path in paths {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
        // Read as every input file is: bounded nesting, no duplicate or merge keys.
        let values = flotilla_core::manifest::parse_values(&path.display().to_string(), &text)?;
        for (index, value) in values {
            let i = index - 1;
            let mut doc: ProfileDocument =
                serde_path_to_error::deserialize(value).map_err(|e| {
                    anyhow::anyhow!(
                        "{}: document {}: {}: {}",
                        path.display(),
                        i + 1,
                        e.path(),
                        e.inner()
                    )
                })?;
            doc.resolve_wasm_paths(&dir);
            let profile = build_profile(&doc, &base, &factories).map_err(|e| {
                let hint = super::diagnose::hint(&e.to_string())
                    .map(|h| format!("\n{h}"))
                    .unwrap_or_default();
                anyhow::anyhow!("{}: document {}: {e}{hint}", path.display(), i + 1)
            })?;
            profiles.retain(|p| p.name != profile.name);
            profiles.push(profile);
        }
    }
    Ok(profiles)
}

/// The process's CEL engine: evaluates CEL in policies and `cel:` profile plugins, and compiles
/// every expression at admission. One instance, so its program and cluster caches are shared.
pub fn cel() -> std::sync::Arc<flotilla_cel::Engine> {
    static ENGINE: std::sync::OnceLock<std::sync::Arc<flotilla_cel::Engine>> =
        std::sync::OnceLock::new();
    std::sync::Arc::clone(
        ENGINE.get_or_init(|| std::sync::Arc::new(flotilla_cel::Engine::default())),
    )
}

/// The `SchedulerProfile` documents of `paths` as written (parsed as [`load`] parses them).
///
/// # Errors
/// A file that cannot be read or parsed.
pub fn documents(paths: &[PathBuf]) -> anyhow::Result<Vec<ProfileDocument>> {
    let mut out = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        for (index, value) in
            flotilla_core::manifest::parse_values(&path.display().to_string(), &text)?
        {
            let doc: ProfileDocument = serde_path_to_error::deserialize(value).map_err(|e| {
                anyhow::anyhow!(
                    "{}: document {index}: {}: {}",
                    path.display(),
                    e.path(),
                    e.inner()
                )
            })?;
            out.push(doc);
        }
    }
    Ok(out)
}

/// How `doc` changes the default profile, one line per extension point it lists: whether the
/// list replaces the built-ins of the point (and which it drops) or extends them.
pub fn describe(doc: &ProfileDocument) -> Vec<String> {
    use flotilla_core::profile::{ExtensionPoint, PointList};
    let mut out = Vec::new();
    for point in ExtensionPoint::ALL {
        let Some(list) = doc.spec.point(point) else {
            continue;
        };
        let names: Vec<&str> = list.plugins().iter().map(|p| p.name.as_str()).collect();
        let builtins = flotilla_plugins::registry::names(point);
        match list {
            PointList::Extend(_) => out.push(format!(
                "spec.{point}: extends the built-ins ({}) with [{}]",
                builtins.join(", "),
                names.join(", ")
            )),
            PointList::Replace(_) => {
                let dropped: Vec<&str> = builtins
                    .iter()
                    .copied()
                    .filter(|b| !names.contains(b))
                    .collect();
                let dropped = if dropped.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; drops {} (use {point}: {{add: [...]}} to keep them)",
                        dropped.join(", ")
                    )
                };
                out.push(format!(
                    "spec.{point}: replaces the built-ins with [{}]{dropped}",
                    names.join(", ")
                ));
            }
        }
    }
    out
}

/// The default profile (`default-scheduler`) as a `SchedulerProfile` document: every extension
/// point's built-in plugins in the order they run. Loading it with `--profile` changes nothing.
pub fn default_document() -> String {
    use flotilla_core::profile::ExtensionPoint;
    let mut s = String::from(
        "# The default profile: the built-in plugins per extension point, in the order they run.\n\
         # Every policy without spec.schedulerName uses it. A SchedulerProfile named\n\
         # default-scheduler changes it: a plain list replaces a point's built-ins (name each one you\n\
         # keep), `{add: [...]}` keeps them and adds plugins (after them; assigners before them).\n\
         # Filters reject clusters, scores (0..100, times weight) rank them, selects pick among the\n\
         # feasible ones, assigners (asked in order until one does not skip) divide replicas, and\n\
         # overriders patch each cluster's manifest.\n",
    );
    s.push_str(&format!(
        "apiVersion: {}\nkind: {}\nmetadata:\n  name: {}\nspec:\n",
        flotilla_core::profile::API_VERSION,
        flotilla_core::profile::KIND,
        flotilla_api::labels::DEFAULT_SCHEDULER
    ));
    for point in ExtensionPoint::ALL {
        s.push_str(&format!("  {point}:\n"));
        for name in flotilla_plugins::registry::names(point) {
            s.push_str(&format!("  - name: {name}\n"));
        }
    }
    s
}
