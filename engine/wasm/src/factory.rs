//! `WasmFactory`: builds Wasm plugins from profile specs (`wasm: {path, sha256}`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flotilla_core::framework::VictimPlugin;
use flotilla_core::profile::{Backend, BuiltPlugin, ExtensionPoint, PluginFactory, PluginSpec};

use crate::host::Host;
use crate::instance::Limits;
use crate::module::{Compiled, LoadError, sha256};
use crate::plugin::{WasmPlugin, export_for};

/// The Wasm backend of profiles.
#[derive(Debug, Default, Clone)]
pub struct WasmFactory {
    cache_dir: Option<PathBuf>,
    tiered: bool,
}

impl WasmFactory {
    /// A factory on the process-wide [`Host`], compiling every module it loads (optimized,
    /// before it serves).
    pub fn new() -> Self {
        WasmFactory {
            cache_dir: None,
            tiered: false,
        }
    }

    /// A factory that keeps compiled modules in `dir` (made private, 0700; files 0600), by module
    /// digest and engine configuration, so a restart loads them instead of compiling again (see
    /// [`Host::compile_cached`]). Tiered: a module not in `dir` serves at once from the
    /// baseline compiler's code until its optimized code is ready ([`Host::compile_tiered`]).
    pub fn with_cache_dir(dir: PathBuf) -> Self {
        WasmFactory {
            cache_dir: Some(dir),
            tiered: true,
        }
    }

    /// Whether a module not in the cache directory serves from baseline code first (the default
    /// of [`WasmFactory::with_cache_dir`]) or only once compiled optimized. Without a cache
    /// directory modules are always compiled optimized.
    #[must_use]
    pub fn tiered(mut self, tiered: bool) -> Self {
        self.tiered = tiered;
        self
    }

    /// Compile `bytes` into the cache directory ahead of use ([`Host::precompile`]): `false`
    /// without a cache directory, or when the module is cached or loaded already.
    ///
    /// # Errors
    /// As [`Host::precompile`].
    pub fn precompile(&self, bytes: &[u8]) -> Result<bool, LoadError> {
        match self.cache_dir.as_deref() {
            Some(dir) => Host::global()?.precompile(bytes, dir),
            None => Ok(false),
        }
    }

    /// Load the plugin `spec` describes for `point`.
    ///
    /// # Errors
    /// Reading, digest, compile, link, a missing export for `point`, or the first instantiation.
    pub fn load(
        &self,
        point: ExtensionPoint,
        spec: &PluginSpec,
        path: &Path,
    ) -> Result<WasmPlugin, LoadError> {
        let export = export_for(point);
        self.load_checked(spec, path, |module| {
            if module.exports_point(export) {
                Ok(())
            } else {
                Err(LoadError::MissingExport {
                    name: export.into(),
                    what: "the extension point the profile uses it for",
                })
            }
        })
    }

    /// Load the victim plugin `spec` describes (binding preemption's `spec.preemption.plugin`):
    /// the same steps as [`WasmFactory::load`], for a module exporting `flotilla_victims_v1`.
    ///
    /// # Errors
    /// Reading, digest, compile, link, a missing `flotilla_victims_v1`, or the first
    /// instantiation.
    pub fn load_victims(&self, spec: &PluginSpec, path: &Path) -> Result<WasmPlugin, LoadError> {
        self.load_checked(spec, path, |module| {
            if module.has_victims {
                Ok(())
            } else {
                Err(LoadError::MissingExport {
                    name: flotilla_abi::export::VICTIMS.into(),
                    what: "binding preemption's victim choice, which the profile uses it for",
                })
            }
        })
    }

    /// The steps every load shares: limits, read `path`, check the digest `spec` pins, compile
    /// (tiered or through the cache directory), `exports` (the caller's check that the module
    /// exports what it is loaded for, before any instantiation), then the first instantiation;
    /// logs where the time went.
    fn load_checked(
        &self,
        spec: &PluginSpec,
        path: &Path,
        exports: impl FnOnce(&Compiled) -> Result<(), LoadError>,
    ) -> Result<WasmPlugin, LoadError> {
        let started = std::time::Instant::now();
        let limits = Limits::from_spec(spec.limits.as_ref())?;
        let host = Host::global()?;
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let digest = sha256(&bytes);
        if let Some(expected) = spec.wasm.as_ref().and_then(|w| w.sha256.as_deref()) {
            let expected = expected.trim_start_matches("sha256:").to_ascii_lowercase();
            if expected != digest.to_string() {
                return Err(LoadError::DigestMismatch {
                    expected,
                    actual: digest.to_string(),
                });
            }
        }
        let read = started.elapsed();
        let module = match self.cache_dir.as_deref() {
            Some(dir) if self.tiered => host.compile_tiered(&bytes, dir)?,
            dir => host.compile_cached(&bytes, dir)?,
        };
        let compiled = started.elapsed();
        exports(&module)?;
        let tier = module.tier();
        let plugin = WasmPlugin::load(host, &spec.name, module, spec.config.as_ref(), limits)?;
        tracing::debug!(
            plugin = %spec.name,
            %digest,
            tier = tier.as_str(),
            read = ?read,
            compile = ?compiled.saturating_sub(read),
            instantiate = ?started.elapsed().saturating_sub(compiled),
            "wasm plugin loaded"
        );
        Ok(plugin)
    }
}

impl PluginFactory for WasmFactory {
    fn backend(&self) -> Backend {
        Backend::Wasm
    }

    fn build(
        &self,
        point: ExtensionPoint,
        spec: &PluginSpec,
    ) -> Result<Option<BuiltPlugin>, String> {
        let Some(path) = module_path(spec)? else {
            return Ok(None);
        };
        let plugin = Arc::new(
            self.load(point, spec, &path)
                .map_err(|e| format!("{}: {e}", path.display()))?,
        );
        Ok(Some(BuiltPlugin::for_point(point, plugin)))
    }

    fn build_victims(&self, spec: &PluginSpec) -> Result<Option<Arc<dyn VictimPlugin>>, String> {
        let Some(path) = module_path(spec)? else {
            return Ok(None);
        };
        let plugin = self
            .load_victims(spec, &path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Some(Arc::new(plugin)))
    }
}

/// The module file a `wasm:` entry names (`None` without `wasm`).
///
/// # Errors
/// Neither or both of `path` and `plugin`, or a `plugin` (only the control plane resolves those).
fn module_path(spec: &PluginSpec) -> Result<Option<PathBuf>, String> {
    let Some(source) = &spec.wasm else {
        return Ok(None);
    };
    match (source.path.is_empty(), &source.plugin) {
        (false, Some(_)) => return Err("wasm: set one of `path` and `plugin`, not both".into()),
        (true, Some(name)) => {
            return Err(format!(
                "wasm.plugin {name:?} names a WasmPlugin object, which only the control plane resolves (offline, use wasm.path)"
            ));
        }
        (true, None) => {
            return Err(
                "wasm: `path` (a .wasm file) or `plugin` (a WasmPlugin object) is required".into(),
            );
        }
        (false, None) => {}
    }
    Ok(Some(PathBuf::from(&source.path)))
}
