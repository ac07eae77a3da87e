//! Plugins as control-plane objects: `SchedulerProfile` and `WasmPlugin` (`flotilla.dev/v1alpha1`,
//! cluster-scoped) hot-loaded into the scheduler without a restart.
//!
//! A `SchedulerProfile` object has the spec of a profile file (see [`flotilla_core::profile`]);
//! its entries name `WasmPlugin` objects with `wasm: {plugin: NAME}`. On any change of either kind
//! the [`Registry`] resolves the modules (inline base64, or a file confined to the module directory
//! given with `--module-dir`; sha256-checked, stored content-addressed in a private directory),
//! rebuilds only the profiles whose inputs changed (compiling off the
//! scheduler's path), and swaps the whole profile set at once: a scheduling cycle takes one
//! snapshot, so it never mixes versions. A profile that fails to build keeps serving its previous
//! version; both kinds report what is loaded (digest) or why not in `status`.
//!
//! A swap publishes [`Topic::Profiles`], which re-checks every binding: Divided bindings already
//! scheduled keep their placement (a plugin change is not a scheduling trigger), while Duplicated
//! and non-workload bindings, which Karmada re-evaluates on every trigger, and bindings not yet
//! scheduled use the new set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use base64::Engine as _;
use flotilla_api::meta::ObjectMeta;
use flotilla_core::error::PluginError;
use flotilla_core::framework::{
    AssignInput, AssignPlugin, Assignment, FilterInput, FilterPlugin, OverrideInput, OverridePatch,
    OverridePlugin, Plugin, Profile, ScoreInput, ScorePlugin, SelectInput, SelectPlugin, Selection,
    Slot, Verdict, VictimInput, VictimPlugin,
};
use flotilla_core::profile::{
    self, Factories, ModuleFormat, PluginFactory, ProfileDocument, ProfileError, ProfileSpec,
    WasmPluginSpec,
};
use serde_json::Value;
use sha2::Digest as _;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::metrics::{Histogram, escape};
use crate::{Cached, Context, Topic};

/// API version of the plugin kinds.
pub const API_VERSION: &str = "flotilla.dev/v1alpha1";

/// The plugin backends and base profile the registry builds with.
#[derive(Clone)]
pub struct Backends {
    /// The default profile (`default-scheduler`), also the base of every profile object.
    pub base: Profile,
    /// The plugin backends (built-in, CEL, Wasm, ...), one factory each.
    pub factories: Factories,
    /// Where resolved modules are stored by digest (private: files 0600 in a 0700 directory);
    /// default: a fresh temporary directory, removed when the registry is dropped.
    pub module_dir: Option<PathBuf>,
    /// The only directory `spec.module.path` of `WasmPlugin` objects may name files in (relative
    /// paths, resolved without leaving it, symlinks included). `None`, the default, refuses
    /// `spec.module.path`: objects then carry their modules inline (`spec.module.base64`).
    pub module_source_dir: Option<PathBuf>,
    /// Compiles a module's bytes into the compiled-module cache ahead of use (blocking; `true`
    /// when it compiled, `false` when the module was cached or loaded already): with
    /// `module_source_dir`, the `.wasm` files put there are compiled as they appear, before a
    /// `WasmPlugin` names them ([`Registry::precompile_next`]), so loading one then takes a cache
    /// read instead of a compile. `None`, the default: nothing is compiled ahead.
    pub precompile: Option<Precompile>,
}

/// See [`Backends::precompile`].
pub type Precompile = Arc<dyn Fn(&[u8]) -> Result<bool, String> + Send + Sync>;

impl Default for Backends {
    fn default() -> Self {
        Backends {
            base: flotilla_plugins::default_profile(),
            factories: Factories::new([
                Arc::new(flotilla_plugins::BuiltinFactory) as Arc<dyn PluginFactory>
            ]),
            module_dir: None,
            module_source_dir: None,
            precompile: None,
        }
    }
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("base", &self.base.name)
            .field("factories", &self.factories)
            .field("module_dir", &self.module_dir)
            .field("module_source_dir", &self.module_source_dir)
            .field("precompile", &self.precompile.is_some())
            .finish()
    }
}

/// A plugin object as read from the API: name, generation and raw spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `spec` (null when absent).
    pub spec: Value,
}

/// What a [`Registry::sync`] found for one `WasmPlugin`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginStatus {
    /// The generation the status describes.
    pub generation: Option<i64>,
    /// `sha256:<hex>` of the module the current spec names, once resolved (`lastAttemptedDigest`).
    pub attempted_digest: Option<String>,
    /// `sha256:<hex>` of the module the served profiles run (`servingDigest`): after a failed
    /// load, the previous version's; `None` while no served profile uses the plugin.
    pub serving_digest: Option<String>,
    /// Module size in bytes.
    pub size: Option<u64>,
    /// For `spec.module.image`: `sha256:<hex>` of the image manifest the reference resolved to.
    pub image_digest: Option<String>,
    /// `profile/point[index]` of every entry naming it, from the profiles' specs (whether or not
    /// they load).
    pub used_by: Vec<String>,
    /// Why the current spec is not (fully) loaded.
    pub error: Option<String>,
    /// CamelCase reason of `error` (`NotWasm`, `DigestMismatch`, `LoadFailed`, ...).
    pub reason: Option<&'static str>,
    /// A preliminary report ([`Registry::prepare`]): the modules are resolved, not yet built.
    pub pending: bool,
}

/// A profile that now runs another version of a plugin ([`Report::switches`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// The `SchedulerProfile`.
    pub profile: String,
    /// The `WasmPlugin`.
    pub plugin: String,
    /// `sha256:<hex>` served before, if the profile ran the plugin before.
    pub from: Option<String>,
    /// `sha256:<hex>` served now.
    pub to: String,
}

/// What a [`Registry::sync`] found for one `SchedulerProfile`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileStatus {
    /// The generation the status describes.
    pub generation: Option<i64>,
    /// Why the current spec did not load (the previous version, if any, keeps serving).
    pub error: Option<String>,
    /// Whether an earlier version is serving instead of the current spec.
    pub serving_previous: bool,
}

/// The outcome of a [`Registry::sync`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// By `WasmPlugin` name.
    pub plugins: BTreeMap<String, PluginStatus>,
    /// By `SchedulerProfile` name.
    pub profiles: BTreeMap<String, ProfileStatus>,
    /// Whether the served profile set changed.
    pub changed: bool,
    /// Plugin versions that profiles switched to in this sync.
    pub switches: Vec<Switch>,
}

struct Built {
    fingerprint: String,
    profile: Profile,
    /// `WasmPlugin` name -> `sha256:<hex>` of the module this build runs.
    plugins: BTreeMap<String, String>,
}

struct Resolved {
    spec: WasmPluginSpec,
    path: String,
    digest: String,
    /// `sha256:<hex>` of the image manifest, for `spec.module.image`.
    image_digest: Option<String>,
}

/// A `WasmPlugin`'s pulled image ([`Registry::pull_images`]): what was pulled for which
/// `spec.module`.
struct ImageEntry {
    /// `spec.module` as JSON: a change re-pulls (and re-resolves a tag).
    key: String,
    result: Result<PulledImage, Unresolved>,
    /// Failed pulls of this `key` in a row.
    failures: u32,
    /// After a failure: no new attempt for this `key` before then.
    retry_at: Option<Instant>,
}

/// The wait before pulling again after `failures` failed pulls in a row: 5 s, doubling, at
/// most 5 minutes.
fn pull_backoff(failures: u32) -> std::time::Duration {
    let secs = 5u64.saturating_mul(1u64 << failures.saturating_sub(1).min(16));
    std::time::Duration::from_secs(secs.min(300))
}

#[derive(Clone)]
struct PulledImage {
    bytes: Arc<Vec<u8>>,
    manifest_digest: String,
}

/// Why a `WasmPlugin`'s module could not be resolved: a status reason and a message.
#[derive(Debug, Clone)]
struct Unresolved {
    reason: &'static str,
    message: String,
}

impl Unresolved {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Unresolved {
            reason,
            message: message.into(),
        }
    }
}

/// The first phase of a sync ([`Registry::prepare`]): modules resolved and stored, references
/// counted, nothing compiled. [`Registry::build`] finishes it.
pub struct Prepared {
    report: Report,
    resolved: BTreeMap<String, Result<Resolved, Unresolved>>,
    profiles: Vec<Object>,
}

impl Prepared {
    /// The preliminary report: digests, sizes, `usedBy` and resolution errors; every plugin
    /// `pending`.
    pub fn report(&self) -> &Report {
        &self.report
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

/// `profile/point[index]` of every entry of `profiles` naming a `WasmPlugin`, by plugin name.
fn references(profiles: &[Object]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for o in profiles {
        let Ok(mut spec) = serde_json::from_value::<ProfileSpec>(o.spec.clone()) else {
            continue;
        };
        for (point, list) in spec.lists_mut() {
            for (index, entry) in list.iter().enumerate() {
                if let Some(name) = entry.wasm.as_ref().and_then(|w| w.plugin.as_ref()) {
                    out.entry(name.clone())
                        .or_default()
                        .push(format!("{}/{point}[{index}]", o.name));
                }
            }
        }
        // Binding preemption's victim plugin uses its WasmPlugin as the lists' entries do.
        if let Some(name) = spec
            .preemption
            .as_ref()
            .and_then(|p| p.plugin.as_ref())
            .and_then(|e| e.wasm.as_ref())
            .and_then(|w| w.plugin.as_ref())
        {
            out.entry(name.clone())
                .or_default()
                .push(format!("{}/preemption.plugin", o.name));
        }
    }
    out
}

/// The served profiles, rebuilt from plugin objects and swapped as a whole.
pub struct Registry {
    current: RwLock<Arc<Vec<Profile>>>,
    built: Mutex<BTreeMap<String, Built>>,
    served: Mutex<Vec<(String, String)>>,
    backends: Backends,
    base: Profile,
    module_dir: PathBuf,
    /// The temporary store made when `backends.module_dir` is unset, removed on drop.
    _scratch: Option<ScratchDir>,
    metrics: Arc<PluginMetrics>,
    /// Pulled `spec.module.image`s by `WasmPlugin` name.
    images: Mutex<BTreeMap<String, ImageEntry>>,
    /// Module directory files handed to [`Backends::precompile`], with the modification time and
    /// size they had then.
    precompiled: Mutex<BTreeMap<PathBuf, (std::time::SystemTime, u64)>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field(
                "profiles",
                &self
                    .profiles()
                    .iter()
                    .map(|p| p.name.clone())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry serving `backends.base` until objects say otherwise.
    pub fn new(backends: Backends) -> Self {
        let metrics = Arc::new(PluginMetrics::default());
        let base = instrument(&backends.base, &metrics);
        let (module_dir, scratch) = match &backends.module_dir {
            Some(dir) => (dir.clone(), None),
            None => match ScratchDir::new() {
                Ok(s) => (s.path().to_path_buf(), Some(s)),
                // Storing then fails with the reason, per WasmPlugin.
                Err(_) => (
                    std::env::temp_dir().join("flotilla-modules-unavailable"),
                    None,
                ),
            },
        };
        Registry {
            current: RwLock::new(Arc::new(vec![base.clone()])),
            built: Mutex::new(BTreeMap::new()),
            served: Mutex::new(vec![(base.name.clone(), String::new())]),
            backends,
            base,
            module_dir,
            _scratch: scratch,
            metrics,
            images: Mutex::new(BTreeMap::new()),
            precompiled: Mutex::new(BTreeMap::new()),
        }
    }

    /// Whether module directory files are compiled ahead ([`Backends::precompile`]).
    pub fn precompiles(&self) -> bool {
        self.backends.precompile.is_some() && self.backends.module_source_dir.is_some()
    }

    /// Compile ahead one `.wasm` file of the module directory (its top level) that is new or
    /// changed since it was last handed to [`Backends::precompile`] and has not changed for
    /// [`PRECOMPILE_SETTLE`] (so not while it is being written); the most recently modified
    /// first. Bounded: regular files (not links) of at most [`MAX_MODULE_BYTES`], the first
    /// [`MAX_PRECOMPILE_SCAN`] directory entries, at most [`MAX_PRECOMPILE_FILES`] files
    /// remembered (files gone are forgotten; beyond, no new file is compiled ahead), one compile
    /// per call. Returns the file and whether it was compiled (`false`: cached, loaded, or not a
    /// module). Blocking.
    pub fn precompile_next(&self) -> Option<(PathBuf, bool)> {
        use std::io::Read as _;
        let (Some(root), Some(precompile)) = (
            self.backends.module_source_dir.as_deref(),
            self.backends.precompile.as_ref(),
        ) else {
            return None;
        };
        let now = std::time::SystemTime::now();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(root)
            .ok()?
            .flatten()
            .take(MAX_PRECOMPILE_SCAN)
        {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "wasm") {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let Ok(modified) = meta.modified() else {
                continue;
            };
            let settled = now
                .duration_since(modified)
                .is_ok_and(|age| age >= PRECOMPILE_SETTLE);
            if meta.is_file() && settled && meta.len() > 0 && meta.len() <= MAX_MODULE_BYTES {
                files.push((modified, meta.len(), path));
            }
        }
        let (modified, len, path) = {
            let mut done = self
                .precompiled
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            done.retain(|p, _| files.iter().any(|(.., f)| f == p));
            files.sort_by_key(|f| std::cmp::Reverse(f.0));
            let next = files
                .into_iter()
                .find(|(m, l, p)| done.get(p) != Some(&(*m, *l)))?;
            if done.len() >= MAX_PRECOMPILE_FILES && !done.contains_key(&next.2) {
                return None;
            }
            done.insert(next.2.clone(), (next.0, next.1));
            next
        };
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_MODULE_BYTES).read_to_end(&mut bytes));
        if read.is_err() || !bytes.starts_with(b"\0asm") {
            return Some((path, false));
        }
        let started = Instant::now();
        match precompile(&bytes) {
            Ok(compiled) => {
                if compiled {
                    tracing::info!(file = %path.display(), size = len, modified = ?modified, elapsed = ?started.elapsed(), "module file compiled ahead, before a WasmPlugin names it");
                }
                Some((path, compiled))
            }
            Err(e) => {
                tracing::debug!(file = %path.display(), error = %e, "module file not compiled ahead");
                Some((path, false))
            }
        }
    }

    /// The profile set in force: one consistent snapshot.
    pub fn profiles(&self) -> Arc<Vec<Profile>> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The profile named `name` in the current snapshot.
    pub fn find(&self, name: &str) -> Option<Profile> {
        self.profiles().iter().find(|p| p.name == name).cloned()
    }

    /// Per-plugin call latency and failures.
    pub fn metrics(&self) -> &PluginMetrics {
        &self.metrics
    }

    /// Rebuild from the current objects (blocking: reads files and compiles modules).
    pub fn sync(&self, wasm_plugins: &[Object], profiles: &[Object]) -> Report {
        self.build(self.prepare(wasm_plugins, profiles))
    }

    /// Phase one of [`Registry::sync`] (blocking, but compiles nothing): resolve and store every
    /// `WasmPlugin`'s module and find which profile entries name it, so a status can say what is
    /// being loaded, and where, before the compile finishes.
    pub fn prepare(&self, wasm_plugins: &[Object], profiles: &[Object]) -> Prepared {
        let mut report = Report::default();
        let mut resolved: BTreeMap<String, Result<Resolved, Unresolved>> = BTreeMap::new();
        let mut refs = references(profiles);
        let serving = self.serving_digests();
        for o in wasm_plugins {
            let r = self.resolve_module(&o.name, &o.spec);
            let status = report.plugins.entry(o.name.clone()).or_default();
            status.generation = o.generation;
            status.pending = true;
            status.used_by = refs.remove(&o.name).unwrap_or_default();
            status.serving_digest = serving.get(&o.name).cloned();
            match &r {
                Ok(m) => {
                    status.attempted_digest = Some(format!("sha256:{}", m.digest));
                    status.size = std::fs::metadata(&m.path).ok().map(|m| m.len());
                    status.image_digest.clone_from(&m.image_digest);
                }
                Err(e) => {
                    status.error = Some(e.message.clone());
                    status.reason = Some(e.reason);
                }
            }
            resolved.insert(o.name.clone(), r);
        }
        Prepared {
            report,
            resolved,
            profiles: profiles.to_vec(),
        }
    }

    /// `sha256:<hex>` of the module each `WasmPlugin` runs in the built profiles.
    fn serving_digests(&self) -> BTreeMap<String, String> {
        let built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = BTreeMap::new();
        for b in built.values() {
            for (plugin, digest) in &b.plugins {
                out.entry(plugin.clone()).or_insert_with(|| digest.clone());
            }
        }
        out
    }

    /// Phase two of [`Registry::sync`] (blocking: compiles modules): rebuild the profiles whose
    /// inputs changed and swap the set.
    pub fn build(&self, prepared: Prepared) -> Report {
        let Prepared {
            mut report,
            resolved,
            profiles,
        } = prepared;
        for st in report.plugins.values_mut() {
            st.pending = false;
        }
        publish_modules(&resolved);

        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let names: BTreeSet<&str> = profiles.iter().map(|o| o.name.as_str()).collect();
        built.retain(|name, _| names.contains(name.as_str()));
        for o in &profiles {
            let status = report.profiles.entry(o.name.clone()).or_default();
            status.generation = o.generation;
            let (doc, plugins) = match self.document(o, &resolved) {
                Ok(doc) => doc,
                Err(e) => {
                    let status = report.profiles.entry(o.name.clone()).or_default();
                    status.serving_previous = built.contains_key(&o.name);
                    status.error = Some(e);
                    continue;
                }
            };
            let fingerprint = serde_json::to_string(&doc).unwrap_or_default();
            if built
                .get(&o.name)
                .is_some_and(|b| b.fingerprint == fingerprint)
            {
                continue;
            }
            match profile::build_profile(&doc, &self.backends.base, &self.backends.factories) {
                Ok(p) => {
                    let previous = built.get(&o.name).map(|b| &b.plugins);
                    for (plugin, digest) in &plugins {
                        let from = previous.and_then(|m| m.get(plugin)).cloned();
                        if from.as_ref() != Some(digest) {
                            report.switches.push(Switch {
                                profile: o.name.clone(),
                                plugin: plugin.clone(),
                                from,
                                to: digest.clone(),
                            });
                        }
                    }
                    let mut p = instrument(&p, &self.metrics);
                    p.versions = plugins
                        .iter()
                        .map(|(n, d)| (n.clone(), d.clone()))
                        .collect();
                    built.insert(
                        o.name.clone(),
                        Built {
                            fingerprint,
                            profile: p,
                            plugins,
                        },
                    );
                }
                Err(e) => {
                    let mut message = e.to_string();
                    // The module path of the failing entry: a list entry the factory refused, or
                    // binding preemption's victim plugin when the error is about it (its errors
                    // name the module path they loaded, as a list entry's do).
                    let failing = match &e {
                        ProfileError::Invalid { point, index, .. } => doc
                            .spec
                            .list(*point)
                            .and_then(|l| l.get(*index))
                            .and_then(|s| s.wasm.as_ref())
                            .map(|w| w.path.clone()),
                        ProfileError::Document(m) => doc
                            .spec
                            .preemption
                            .as_ref()
                            .and_then(|p| p.plugin.as_ref())
                            .and_then(|s| s.wasm.as_ref())
                            .map(|w| w.path.clone())
                            .filter(|path| !path.is_empty() && m.contains(path.as_str())),
                        _ => None,
                    };
                    if let Some(path) = failing {
                        // Blame the WasmPlugin whose (content-addressed) module the failing entry loads.
                        for (wp, m) in &resolved {
                            if let Some(m) = m
                                .as_ref()
                                .ok()
                                .filter(|m| !path.is_empty() && m.path == path)
                            {
                                message = message.replace(&m.path, &format!("WasmPlugin {wp:?}"));
                                let ps = report.plugins.entry(wp.clone()).or_default();
                                if ps.error.is_none() {
                                    ps.reason = Some("LoadFailed");
                                    ps.error = Some(format!(
                                        "profile {}: {}",
                                        o.name,
                                        message
                                            .split_once(": ")
                                            .map_or(message.as_str(), |(_, rest)| rest)
                                    ));
                                }
                            }
                        }
                    }
                    let status = report.profiles.entry(o.name.clone()).or_default();
                    status.serving_previous = built.contains_key(&o.name);
                    status.error = Some(message);
                }
            }
        }
        let mut serving: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for b in built.values() {
            for (plugin, digest) in &b.plugins {
                serving.entry(plugin).or_default().push(digest);
            }
        }
        for (name, st) in &mut report.plugins {
            let digests = serving.get(name.as_str());
            // Prefer the attempted version when some profile runs it (another may still run an
            // older one after its own failure).
            st.serving_digest = digests.and_then(|ds| {
                ds.iter()
                    .find(|d| Some(**d) == st.attempted_digest.as_deref())
                    .or_else(|| ds.first())
                    .map(|d| (*d).to_owned())
            });
        }

        // The new set: the base unless an object replaces `default-scheduler`, then every built profile.
        let mut set: Vec<Profile> = Vec::new();
        let mut served: Vec<(String, String)> = Vec::new();
        if !built.contains_key(&self.base.name) {
            set.push(self.base.clone());
            served.push((self.base.name.clone(), String::new()));
        }
        for (name, b) in built.iter() {
            set.push(b.profile.clone());
            served.push((name.clone(), b.fingerprint.clone()));
        }
        let mut last = self
            .served
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *last != served {
            *self
                .current
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(set);
            *last = served;
            report.changed = true;
        }
        report
    }

    /// The profile document of object `o` with its `wasm.plugin` references resolved, and the
    /// digest (`sha256:<hex>`) of every `WasmPlugin` it loads.
    fn document(
        &self,
        o: &Object,
        resolved: &BTreeMap<String, Result<Resolved, Unresolved>>,
    ) -> Result<(ProfileDocument, BTreeMap<String, String>), String> {
        let mut plugins = BTreeMap::new();
        let spec = if o.spec.is_null() {
            Value::Object(serde_json::Map::new())
        } else {
            o.spec.clone()
        };
        let mut spec: ProfileSpec = serde_path_to_error::deserialize(spec)
            .map_err(|e| format!("spec.{}: {}", e.path(), e.inner()))?;
        // An entry naming a WasmPlugin becomes one loading that object's module; `at` is the
        // entry's field path for errors.
        let mut resolve =
            |entry: &mut flotilla_core::profile::PluginSpec, at: String| -> Result<(), String> {
                let Some(name) = entry.wasm.as_ref().and_then(|w| w.plugin.clone()) else {
                    return Ok(());
                };
                let m = match resolved.get(name.as_str()) {
                    None => return Err(format!("{at}: WasmPlugin {name:?} not found")),
                    Some(Err(e)) => {
                        return Err(format!(
                            "{at}: WasmPlugin {name:?} is not loadable: {}",
                            e.message
                        ));
                    }
                    Some(Ok(m)) => m,
                };
                plugins.insert(name.clone(), format!("sha256:{}", m.digest));
                if entry.wasm.as_ref().is_some_and(|w| !w.path.is_empty()) {
                    return Err(format!("{at}.wasm: set one of path and plugin, not both"));
                }
                *entry = m
                    .spec
                    .resolve(entry, &m.path, &m.digest)
                    .map_err(|e| format!("{at}: {e}"))?;
                Ok(())
            };
        for (point, list) in spec.lists_mut() {
            for (index, entry) in list.iter_mut().enumerate() {
                let at = format!("spec.{point}[{index}] ({})", entry.name);
                resolve(entry, at)?;
            }
        }
        // Binding preemption's victim plugin names its WasmPlugin the same way.
        if let Some(entry) = spec.preemption.as_mut().and_then(|p| p.plugin.as_mut()) {
            let at = format!("spec.preemption.plugin ({})", entry.name);
            resolve(entry, at)?;
        }
        let doc = ProfileDocument {
            api_version: profile::API_VERSION.to_owned(),
            kind: profile::KIND.to_owned(),
            metadata: ObjectMeta {
                name: Some(o.name.clone()),
                ..Default::default()
            },
            spec,
        };
        Ok((doc, plugins))
    }

    /// Pull the `spec.module.image` of every `WasmPlugin` naming one whose `spec.module` changed
    /// since its last successful pull (a tag is resolved again only then; a digest-pinned
    /// reference never changes), or whose last pull failed and whose backoff (5 s doubling to
    /// 5 minutes; a new `spec.module` starts afresh) has passed. `credentials` reads
    /// `spec.module.imagePullSecret` for a registry. Entries of other objects are dropped.
    pub async fn pull_images<F, Fut>(&self, wasm_plugins: &[Object], credentials: F)
    where
        F: Fn(String, String) -> Fut,
        Fut: std::future::Future<Output = Result<Option<crate::oci::Credentials>, String>>,
    {
        let mut wanted: Vec<(String, String, flotilla_core::profile::ModuleSource)> = Vec::new();
        for o in wasm_plugins {
            let Some(module) = o.spec.get("module") else {
                continue;
            };
            let Ok(source) =
                serde_json::from_value::<flotilla_core::profile::ModuleSource>(module.clone())
            else {
                continue;
            };
            if source.image.is_none() || source.sources().len() != 1 {
                continue;
            }
            wanted.push((o.name.clone(), module.to_string(), source));
        }
        {
            let mut images = self
                .images
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            images.retain(|name, _| wanted.iter().any(|(n, ..)| n == name));
        }
        for (name, key, source) in wanted {
            let previous_failures = {
                let images = self
                    .images
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match images.get(&name).filter(|e| e.key == key) {
                    Some(e) if e.result.is_ok() => continue,
                    Some(e) if e.retry_at.is_some_and(|at| Instant::now() < at) => continue,
                    Some(e) => e.failures,
                    None => 0,
                }
            };
            let image = source.image.clone().unwrap_or_default();
            let started = Instant::now();
            let result = self.pull_image(&image, &source, &credentials).await;
            match &result {
                Ok(p) => {
                    self.metrics.image_pulls.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(plugin = %name, image = %clip(&image, 256), digest = %p.manifest_digest, elapsed = ?started.elapsed(), "pulled WasmPlugin image");
                }
                Err(e) => {
                    self.metrics
                        .image_pull_failures
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(plugin = %name, image = %clip(&image, 256), reason = e.reason, error = %e.message, "pulling WasmPlugin image failed");
                }
            }
            let (failures, retry_at) = if result.is_ok() {
                (0, None)
            } else {
                let n = previous_failures.saturating_add(1);
                (n, Some(Instant::now() + pull_backoff(n)))
            };
            self.images
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(
                    name,
                    ImageEntry {
                        key,
                        result,
                        failures,
                        retry_at,
                    },
                );
        }
    }

    async fn pull_image<F, Fut>(
        &self,
        image: &str,
        source: &flotilla_core::profile::ModuleSource,
        credentials: &F,
    ) -> Result<PulledImage, Unresolved>
    where
        F: Fn(String, String) -> Fut,
        Fut: std::future::Future<Output = Result<Option<crate::oci::Credentials>, String>>,
    {
        let field = "spec.module.image";
        let reference = crate::oci::parse_reference(image)
            .map_err(|e| Unresolved::new("InvalidSpec", format!("{field}: {}", e.message)))?;
        let mut opts = crate::oci::Options::new(MAX_MODULE_BYTES);
        opts.insecure = source.insecure.unwrap_or(false);
        if let Some(secret) = &source.image_pull_secret {
            let registry = reference.resolve_registry().to_owned();
            opts.credentials = Some(
                credentials(secret.clone(), registry.clone())
                    .await
                    .map_err(|m| {
                        Unresolved::new(
                            "PullSecretInvalid",
                            format!("spec.module.imagePullSecret: {m}"),
                        )
                    })?
                    .ok_or_else(|| {
                        Unresolved::new(
                            "PullSecretInvalid",
                            format!(
                                "spec.module.imagePullSecret: Secret {:?} has no credentials for registry {}",
                                clip(secret, 253),
                                clip(&registry, 256)
                            ),
                        )
                    })?,
            );
        }
        let pulled = crate::oci::pull(image, &opts).await.map_err(|e| {
            let hint = if e.reason == "ImageUnauthorized" && opts.credentials.is_none() {
                "; name a kubernetes.io/dockerconfigjson Secret with spec.module.imagePullSecret"
            } else {
                ""
            };
            Unresolved::new(e.reason, format!("{field}: {}{hint}", e.message))
        })?;
        Ok(PulledImage {
            bytes: Arc::new(pulled.bytes),
            manifest_digest: pulled.manifest_digest,
        })
    }

    /// Read, check and store a `WasmPlugin` spec's module.
    fn resolve_module(&self, name: &str, spec: &Value) -> Result<Resolved, Unresolved> {
        let invalid = |m: String| Unresolved::new("InvalidSpec", m);
        let spec: WasmPluginSpec = serde_path_to_error::deserialize(spec.clone())
            .map_err(|e| invalid(format!("spec.{}: {}", e.path(), e.inner())))?;
        if let Some(limits) = &spec.limits
            && let Some(e) = limits.validate("spec.limits").into_iter().next()
        {
            return Err(invalid(e.to_string()));
        }
        let sources = spec.module.sources();
        if sources.len() > 1 {
            return Err(invalid(format!(
                "spec.module: set one of path, base64 and image, not {}",
                sources.join(" and ")
            )));
        }
        if spec.module.image.is_none()
            && (spec.module.image_pull_secret.is_some() || spec.module.insecure.is_some())
        {
            return Err(invalid(
                "spec.module: imagePullSecret and insecure go with image".into(),
            ));
        }
        let mut image_digest = None;
        let (bytes, field) = match (&spec.module.path, &spec.module.base64) {
            (None, None) if spec.module.image.is_some() => {
                let entry = self
                    .images
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(name)
                    .map(|e| e.result.clone());
                let pulled = match entry {
                    Some(r) => r?,
                    None => {
                        return Err(Unresolved::new(
                            "ImagePullFailed",
                            "spec.module.image: not pulled yet (images are pulled by the controllers' plugin loop)",
                        ));
                    }
                };
                image_digest = Some(pulled.manifest_digest.clone());
                (pulled.bytes.as_ref().clone(), "spec.module.image")
            }
            (Some(_), Some(_)) | (None, None) => {
                return Err(invalid(
                    "spec.module: one of path, base64 and image is required".into(),
                ));
            }
            (Some(path), None) => (
                read_confined(self.backends.module_source_dir.as_deref(), path)
                    .map_err(|m| Unresolved::new("ReadFailed", m))?,
                "spec.module.path",
            ),
            (None, Some(b64)) => {
                let compact: String = b64.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .map_err(|e| invalid(format!("spec.module.base64: {e}")))?;
                (bytes, "spec.module.base64")
            }
        };
        if bytes.is_empty() {
            return Err(invalid("spec.module: the module is empty".into()));
        }
        if !bytes.starts_with(b"\0asm") && spec.module.format != Some(ModuleFormat::Wat) {
            // Never quote the bytes: a file that is not a module may hold anything.
            return Err(Unresolved::new(
                "NotWasm",
                format!(
                    "{field}: not a Wasm module ({} bytes without the \\0asm header); for WebAssembly text set spec.module.format: wat",
                    bytes.len()
                ),
            ));
        }
        let digest = hex(&sha2::Sha256::digest(&bytes));
        if let Some(expected) = &spec.sha256 {
            let expected = expected.trim_start_matches("sha256:").to_ascii_lowercase();
            if expected != digest {
                return Err(Unresolved::new(
                    "DigestMismatch",
                    format!(
                        "spec.sha256: expected {}, the module's is {digest}",
                        clip(&expected, 80)
                    ),
                ));
            }
        }
        let path = store_module(&self.module_dir, &digest, &bytes).map_err(|e| {
            Unresolved::new(
                "StoreFailed",
                format!("storing the module in {}: {e}", self.module_dir.display()),
            )
        })?;
        Ok(Resolved {
            spec,
            path: path.display().to_string(),
            digest,
            image_digest,
        })
    }
}

/// A `WasmPlugin` as the last [`Registry::sync`] resolved it: the stored module and the spec.
#[derive(Debug, Clone)]
pub struct ResolvedModule {
    /// The stored module file (content-addressed).
    pub path: String,
    /// Its sha256, hex.
    pub digest: String,
    /// The object's spec (config, limits, failure policy).
    pub spec: WasmPluginSpec,
}

/// The `WasmPlugin`s of the last sync by name, each resolved or with why it is not loadable: for
/// what loads modules outside profiles (`wasm: {plugin: NAME}` resource-interpreter rules).
pub fn resolved_modules() -> &'static RwLock<BTreeMap<String, Result<ResolvedModule, String>>> {
    static MODULES: std::sync::OnceLock<RwLock<BTreeMap<String, Result<ResolvedModule, String>>>> =
        std::sync::OnceLock::new();
    MODULES.get_or_init(Default::default)
}

fn publish_modules(resolved: &BTreeMap<String, Result<Resolved, Unresolved>>) {
    let next = resolved
        .iter()
        .map(|(name, r)| {
            let m = r
                .as_ref()
                .map_err(|e| e.message.clone())
                .map(|m| ResolvedModule {
                    path: m.path.clone(),
                    digest: m.digest.clone(),
                    spec: m.spec.clone(),
                });
            (name.clone(), m)
        })
        .collect();
    *resolved_modules()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = next;
}

/// Largest module read from the module directory (inline modules are bounded by the API
/// server's request size).
pub const MAX_MODULE_BYTES: u64 = 64 << 20;

/// How long a module directory file must be unchanged before it is compiled ahead.
pub const PRECOMPILE_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);
/// How often the module directory is looked at for files to compile ahead.
pub const PRECOMPILE_POLL: std::time::Duration = std::time::Duration::from_secs(1);
/// Directory entries looked at per look.
pub const MAX_PRECOMPILE_SCAN: usize = 4096;
/// Module directory files remembered as compiled ahead.
pub const MAX_PRECOMPILE_FILES: usize = 256;

/// `text` cut to `max` bytes on a char boundary (for echoing user-given values).
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Read `path` (a `spec.module.path`) inside `root`: refused without a root, and unless `path`
/// is relative, names a regular file, and resolves (symlinks followed) inside `root`. Errors
/// name the field and never anything read.
fn read_confined(root: Option<&std::path::Path>, path: &str) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::path::Component;
    let field = "spec.module.path";
    let shown = clip(path, 256);
    let Some(root) = root else {
        return Err(format!(
            "{field}: modules are not read from the control plane's files unless it is started with --module-dir; inline the module with spec.module.base64"
        ));
    };
    let rel = std::path::Path::new(path);
    if path.is_empty()
        || !rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "{field}: {shown:?} must be a relative path inside the module directory, without \"..\""
        ));
    }
    let missing = || format!("{field}: {shown:?}: no such module file in the module directory");
    let root = root.canonicalize().map_err(|_| {
        format!("{field}: the module directory given with --module-dir is not accessible")
    })?;
    let file = root.join(rel).canonicalize().map_err(|_| missing())?;
    if !file.starts_with(&root) {
        return Err(format!(
            "{field}: {shown:?} resolves outside the module directory"
        ));
    }
    let f = std::fs::File::open(&file).map_err(|_| missing())?;
    let meta = f.metadata().map_err(|_| missing())?;
    if !meta.is_file() {
        return Err(missing());
    }
    if meta.len() > MAX_MODULE_BYTES {
        return Err(format!(
            "{field}: {shown:?} is larger than {MAX_MODULE_BYTES} bytes"
        ));
    }
    let mut bytes = Vec::new();
    f.take(MAX_MODULE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{field}: {shown:?}: cannot read: {}", e.kind()))?;
    if bytes.len() as u64 > MAX_MODULE_BYTES {
        return Err(format!(
            "{field}: {shown:?} is larger than {MAX_MODULE_BYTES} bytes"
        ));
    }
    Ok(bytes)
}

/// Store `bytes` as `<digest>.wasm` in `dir`: the directory is made private (0700), the file is
/// written 0600 under a temporary name and renamed into place.
fn store_module(dir: &std::path::Path, digest: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir)?;
    set_mode(dir, 0o700)?;
    let path = dir.join(format!("{digest}.wasm"));
    if path.exists() {
        set_mode(&path, 0o600)?;
        return Ok(path);
    }
    let tmp = dir.join(format!("{digest}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut f| {
        set_mode(&tmp, 0o600)?;
        f.write_all(bytes)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, &path)) {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn set_mode(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// A private (0700) temporary directory for resolved modules, removed with its contents on drop.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Create `flotilla-modules-<pid>-<n>` in the temporary directory; an existing directory of
    /// that name is never reused.
    ///
    /// # Errors
    /// The directory could not be created.
    pub fn new() -> std::io::Result<ScratchDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if NEXT.load(Ordering::Relaxed) == 0 {
            remove_stale_scratch_dirs(&std::env::temp_dir());
        }
        let mut last = None;
        for _ in 0..16 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!(
                "flotilla-modules-{}-{n}-{nanos:x}",
                std::process::id()
            ));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&dir) {
                Ok(()) => return Ok(ScratchDir(dir)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no directory name left")))
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

/// Remove the scratch directories of processes that no longer run (a killed process cannot
/// drop its [`ScratchDir`]). Linux only: a process is alive while `/proc/<pid>` exists; a
/// directory whose pid has been reused by a live process is left alone.
fn remove_stale_scratch_dirs(tmp: &std::path::Path) {
    if !cfg!(target_os = "linux") || !std::path::Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten().take(10_000) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("flotilla-modules-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

// ------------------------------------------------------------------------------------------------
// Per-plugin metrics: every slot of a served profile is wrapped in a timing decorator.

/// Latency and failures of one plugin at one extension point.
#[derive(Debug, Default)]
pub struct PluginStat {
    /// Call latency.
    pub latency: Histogram,
    /// Calls that returned a fault.
    pub failures: AtomicU64,
}

/// Per-plugin call metrics, keyed by `(extension point, plugin name)`.
#[derive(Debug, Default)]
pub struct PluginMetrics {
    stats: Mutex<BTreeMap<(&'static str, String), Arc<PluginStat>>>,
    /// `spec.module.image` pulls that succeeded.
    pub image_pulls: AtomicU64,
    /// `spec.module.image` pulls that failed.
    pub image_pull_failures: AtomicU64,
}

impl PluginMetrics {
    fn stat(&self, point: &'static str, name: &str) -> Arc<PluginStat> {
        let mut m = self
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(m.entry((point, name.to_owned())).or_default())
    }

    /// `(calls, failures)` of plugin `name` at `point` (`filter`, `score`, `select`, `assign`, `override`,
    /// or `victims` for binding preemption's victim plugin).
    pub fn calls(&self, point: &str, name: &str) -> (u64, u64) {
        self.read(point, name, |s| {
            (s.latency.count(), s.failures.load(Ordering::Relaxed))
        })
    }

    /// `(calls, total microseconds)` of plugin `name` at `point` (as [`PluginMetrics::calls`]).
    pub fn latency(&self, point: &str, name: &str) -> (u64, u64) {
        self.read(point, name, |s| (s.latency.count(), s.latency.micros()))
    }

    /// `what` of the statistics of plugin `name` at `point` (`(0, 0)` before its first call).
    fn read(
        &self,
        point: &str,
        name: &str,
        what: impl Fn(&PluginStat) -> (u64, u64),
    ) -> (u64, u64) {
        let m = self
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        m.iter()
            .find(|((p, n), _)| *p == point && n == name)
            .map_or((0, 0), |(_, s)| what(s))
    }

    /// Prometheus text: `flotilla_plugin_duration_seconds` and `flotilla_plugin_failures_total`.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let m = self
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        out.push_str("# HELP flotilla_plugin_duration_seconds Plugin call latency (one call per plugin and binding).\n# TYPE flotilla_plugin_duration_seconds histogram\n");
        for ((point, name), s) in m.iter() {
            s.latency.render(
                "flotilla_plugin_duration_seconds",
                &format!("extension_point=\"{point}\",plugin=\"{}\"", escape(name)),
                out,
            );
        }
        let _ = writeln!(
            out,
            "# HELP flotilla_plugin_image_pulls_total WasmPlugin spec.module.image pulls, by result.\n# TYPE flotilla_plugin_image_pulls_total counter\nflotilla_plugin_image_pulls_total{{result=\"success\"}} {}\nflotilla_plugin_image_pulls_total{{result=\"failure\"}} {}",
            self.image_pulls.load(Ordering::Relaxed),
            self.image_pull_failures.load(Ordering::Relaxed)
        );
        out.push_str("# HELP flotilla_plugin_failures_total Plugin calls that faulted (before the failure policy).\n# TYPE flotilla_plugin_failures_total counter\n");
        for ((point, name), s) in m.iter() {
            let _ = writeln!(
                out,
                "flotilla_plugin_failures_total{{extension_point=\"{point}\",plugin=\"{}\"}} {}",
                escape(name),
                s.failures.load(Ordering::Relaxed)
            );
        }
    }
}

struct Observed<P: ?Sized> {
    inner: Arc<P>,
    stat: Arc<PluginStat>,
}

impl<P: ?Sized> Observed<P> {
    fn time<T>(&self, f: impl FnOnce() -> Result<T, PluginError>) -> Result<T, PluginError> {
        let start = Instant::now();
        let r = f();
        self.stat.latency.observe(start.elapsed());
        if r.is_err() {
            self.stat.failures.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

macro_rules! observed_plugin {
    ($($trait:ident),*) => {$(
        impl Plugin for Observed<dyn $trait> {
            fn name(&self) -> &str {
                self.inner.name()
            }
        }
    )*};
}
observed_plugin!(
    FilterPlugin,
    ScorePlugin,
    SelectPlugin,
    AssignPlugin,
    OverridePlugin,
    VictimPlugin
);

impl FilterPlugin for Observed<dyn FilterPlugin> {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        self.time(|| self.inner.filter(input, out))
    }
}

impl ScorePlugin for Observed<dyn ScorePlugin> {
    fn score(&self, input: &ScoreInput<'_>, out: &mut Vec<i64>) -> Result<(), PluginError> {
        self.time(|| self.inner.score(input, out))
    }

    fn normalize(&self, scores: &mut [i64]) -> Result<(), PluginError> {
        self.inner.normalize(scores)
    }
}

impl SelectPlugin for Observed<dyn SelectPlugin> {
    fn select(&self, input: &SelectInput<'_>) -> Result<Selection, PluginError> {
        self.time(|| self.inner.select(input))
    }
}

impl AssignPlugin for Observed<dyn AssignPlugin> {
    fn assign(&self, input: &AssignInput<'_>) -> Result<Assignment, PluginError> {
        self.time(|| self.inner.assign(input))
    }
}

impl OverridePlugin for Observed<dyn OverridePlugin> {
    fn override_manifest(&self, input: &OverrideInput<'_>) -> Result<OverridePatch, PluginError> {
        self.time(|| self.inner.override_manifest(input))
    }
}

impl VictimPlugin for Observed<dyn VictimPlugin> {
    fn choose(&self, input: &VictimInput<'_>) -> Result<Vec<usize>, PluginError> {
        self.time(|| self.inner.choose(input))
    }
}

/// `profile` with every plugin wrapped so its calls are timed into `metrics` (binding
/// preemption's victim plugin as extension point `victims`).
fn instrument(profile: &Profile, metrics: &PluginMetrics) -> Profile {
    macro_rules! wrap {
        ($field:ident, $trait:ident, $point:literal) => {
            profile
                .$field
                .iter()
                .map(|s| Slot {
                    plugin: Arc::new(Observed::<dyn $trait> {
                        inner: Arc::clone(&s.plugin),
                        stat: metrics.stat($point, s.plugin.name()),
                    }) as Arc<dyn $trait>,
                    ..s.clone()
                })
                .collect()
        };
    }
    let mut out = profile.clone();
    out.filters = wrap!(filters, FilterPlugin, "filter");
    out.scores = wrap!(scores, ScorePlugin, "score");
    out.selects = wrap!(selects, SelectPlugin, "select");
    out.assigners = wrap!(assigners, AssignPlugin, "assign");
    out.overriders = wrap!(overriders, OverridePlugin, "override");
    out.victims = profile.victims.as_ref().map(|s| Slot {
        plugin: Arc::new(Observed::<dyn VictimPlugin> {
            inner: Arc::clone(&s.plugin),
            stat: metrics.stat("victims", s.plugin.name()),
        }) as Arc<dyn VictimPlugin>,
        ..s.clone()
    });
    out
}

// ------------------------------------------------------------------------------------------------
// The controller loop.

fn objects(cached: &Cached) -> Vec<Object> {
    let mut out: Vec<Object> = cached
        .store
        .state()
        .iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .map(|o| Object {
            name: o.metadata.name.clone().unwrap_or_default(),
            generation: o.metadata.generation,
            spec: o.data.get("spec").cloned().unwrap_or(Value::Null),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Sync the registry at start, on every `SchedulerProfile`/`WasmPlugin` change and every
/// `settings.plugin_resync` (module files may change on disk); write both kinds' status; publish
/// [`Topic::Profiles`] when the served set changed. With [`Backends::precompile`], look at the
/// module directory every [`PRECOMPILE_POLL`] for a file to compile ahead.
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    if ctx.plugins.precompiles() {
        let ctx = Arc::clone(ctx);
        tasks.spawn(async move {
            loop {
                tokio::time::sleep(PRECOMPILE_POLL).await;
                let c = Arc::clone(&ctx);
                let _ = tokio::task::spawn_blocking(move || c.plugins.precompile_next()).await;
            }
        });
    }
    let ctx = Arc::clone(ctx);
    let rx = ctx.events.subscribe(super::all_on(&[Topic::Plugin]));
    tasks.spawn(async move {
        // The objects of the last sync whose statuses were all written: a change event that
        // leaves them as they are (this loop's own status writes) needs no sync.
        let mut last: Option<(Vec<Object>, Vec<Object>)> = None;
        let mut timer = true;
        loop {
            let wasm = objects(&ctx.wasm_plugins);
            let profiles = objects(&ctx.scheduler_profiles);
            let unchanged = last
                .as_ref()
                .is_some_and(|(w, p)| *w == wasm && *p == profiles);
            if !timer && unchanged {
                timer = tokio::select! {
                    _ = rx.next() => false,
                    () = tokio::time::sleep(ctx.settings.plugin_resync) => true,
                };
                continue;
            }
            let synced = (wasm.clone(), profiles.clone());
            let started = Instant::now();
            ctx.plugins
                .pull_images(&wasm, |secret, registry| pull_secret(&ctx, secret, registry))
                .await;
            let pulled = started.elapsed();
            // Resolve first and say what is being loaded (digest, usedBy) while compiling, which
            // can take seconds for a large module; the served set is untouched meanwhile. The
            // status write runs beside the compile, not before it.
            let c = Arc::clone(&ctx);
            let mut written = true;
            let (report, prepared_at, built_at) = match tokio::task::spawn_blocking(move || c.plugins.prepare(&wasm, &profiles)).await {
                Ok(prepared) => {
                    let prepared_at = started.elapsed();
                    let preliminary = prepared.report().clone();
                    let c = Arc::clone(&ctx);
                    let build = tokio::task::spawn_blocking(move || c.plugins.build(prepared));
                    if let Err(e) = write_statuses(&ctx, &preliminary).await {
                        written = false;
                        tracing::warn!(error = %e, "writing plugin status failed; retrying");
                    }
                    let report = build.await;
                    (report, prepared_at, started.elapsed())
                }
                Err(e) => (Err(e), started.elapsed(), started.elapsed()),
            };
            let report = report.unwrap_or_else(|e| {
                tracing::error!(error = %e, "plugin registry sync failed");
                written = false;
                Report::default()
            });
            if report.changed {
                tracing::info!(elapsed = ?started.elapsed(), profiles = ?ctx.plugins.profiles().iter().map(|p| p.name.clone()).collect::<Vec<_>>(), "scheduler profiles swapped");
                ctx.events.send(crate::Change::any(Topic::Profiles));
            }
            for sw in &report.switches {
                announce_switch(&ctx, sw);
            }
            if let Err(e) = write_statuses(&ctx, &report).await {
                written = false;
                tracing::warn!(error = %e, "writing plugin status failed; retrying");
            }
            tracing::debug!(
                pull = ?pulled,
                prepare = ?prepared_at.saturating_sub(pulled),
                build = ?built_at.saturating_sub(prepared_at),
                status = ?started.elapsed().saturating_sub(built_at),
                changed = report.changed,
                "plugin registry synced"
            );
            last = written.then_some(synced);
            // A burst of changes is taken at once: one sync.
            timer = tokio::select! {
                _ = rx.next() => false,
                () = tokio::time::sleep(ctx.settings.plugin_resync) => true,
            };
        }
    });
}

/// The credentials for `registry` in the `kubernetes.io/dockerconfigjson` Secret `name` of the
/// controllers' namespace: `WasmPlugin`s are
/// cluster-scoped, so their pull secrets live beside the controllers, where only their
/// administrators put them (`settings.plugin_pull_secret_namespace`).
async fn pull_secret(
    ctx: &Context,
    name: String,
    registry: String,
) -> Result<Option<crate::oci::Credentials>, String> {
    use k8s_openapi::api::core::v1::Secret;
    let ns = &ctx.settings.plugin_pull_secret_namespace;
    let shown = format!("{ns}/{}", clip(&name, 253));
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let secret = match api.get_opt(&name).await {
        Ok(Some(s)) => s,
        Ok(None) => return Err(format!("Secret {shown} not found")),
        Err(e) => return Err(format!("reading Secret {shown}: {e}")),
    };
    let type_ = secret.type_.as_deref().unwrap_or("Opaque");
    if type_ != "kubernetes.io/dockerconfigjson" {
        return Err(format!(
            "Secret {shown} is of type {:?}, not kubernetes.io/dockerconfigjson",
            clip(type_, 100)
        ));
    }
    let Some(config) = secret
        .data
        .as_ref()
        .and_then(|d| d.get(".dockerconfigjson"))
    else {
        return Err(format!("Secret {shown} has no .dockerconfigjson key"));
    };
    crate::oci::docker_credentials(&config.0, &registry)
        .map_err(|e| format!("Secret {shown}: .dockerconfigjson: {e}"))
}

fn regarding(cached: &Cached, kind: &str, name: &str) -> crate::recorder::Regarding {
    crate::recorder::Regarding {
        api_version: API_VERSION.to_owned(),
        kind: kind.to_owned(),
        namespace: String::new(),
        name: name.to_owned(),
        uid: cached
            .get("", name)
            .and_then(|o| o.metadata.uid.clone())
            .unwrap_or_default(),
    }
}

/// `sha256:0123456789ab`: a digest short enough for a message.
fn short(digest: &str) -> &str {
    digest.get(..19).unwrap_or(digest)
}

/// A profile now runs another version of a plugin: an Event on both objects and a log line.
fn announce_switch(ctx: &Context, sw: &Switch) {
    let message = match &sw.from {
        Some(from) => format!(
            "profile {} switched WasmPlugin {} from {} to {}; new placements use it",
            sw.profile,
            sw.plugin,
            short(from),
            short(&sw.to)
        ),
        None => format!(
            "profile {} loaded WasmPlugin {} {}",
            sw.profile,
            sw.plugin,
            short(&sw.to)
        ),
    };
    tracing::info!(profile = %sw.profile, plugin = %sw.plugin, from = ?sw.from, to = %sw.to, "plugin version switched");
    let type_ = crate::recorder::EventType::Normal;
    ctx.recorder.publish(
        &regarding(&ctx.scheduler_profiles, "SchedulerProfile", &sw.profile),
        type_,
        "PluginVersionSwitched",
        &message,
    );
    ctx.recorder.publish(
        &regarding(&ctx.wasm_plugins, "WasmPlugin", &sw.plugin),
        type_,
        "PluginVersionSwitched",
        &message,
    );
}

fn condition(
    existing: Option<&Value>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) -> Value {
    let prev = existing
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        });
    let since = prev
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| {
            json!(flotilla_core::time::format_rfc3339(
                crate::clock::now_epoch()
            ))
        });
    json!({"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since, "observedGeneration": generation})
}

/// A `WasmPlugin`'s `status`: both digests, `usedBy`, and the `Loaded` and `LoadFailed`
/// conditions. `None` when a preliminary report has nothing new to say.
pub fn plugin_status(existing: Option<&Value>, st: &PluginStatus) -> Option<Value> {
    let attempted = st.attempted_digest.as_deref();
    let serving = st.serving_digest.as_deref();
    if st.pending
        && st.error.is_none()
        && existing
            .and_then(|e| e.get("lastAttemptedDigest"))
            .and_then(Value::as_str)
            == attempted
        && existing
            .and_then(|e| e.get("observedGeneration"))
            .and_then(Value::as_i64)
            == st.generation
    {
        // Nothing new was attempted: the last complete status stands.
        return None;
    }
    let keeps = serving
        .filter(|s| Some(*s) != attempted)
        .map(|s| format!("; {s} keeps serving"))
        .unwrap_or_default();
    let used = st.used_by.join(", ");
    let (loaded, failed) = match (&st.error, st.used_by.is_empty()) {
        (Some(e), _) => {
            let reason = st.reason.unwrap_or("LoadFailed");
            (
                ("False", reason, format!("{e}{keeps}")),
                ("True", reason, format!("{e}{keeps}")),
            )
        }
        (None, true) => {
            let m = "module resolved; no SchedulerProfile uses it".to_owned();
            (("True", "Resolved", m.clone()), ("False", "Resolved", m))
        }
        (None, false) if serving.is_some() && serving == attempted => {
            let m = format!("serving in {used}");
            (("True", "Loaded", m.clone()), ("False", "Loaded", m))
        }
        (None, false) if st.pending => {
            let m = format!(
                "loading {} for {used}{keeps}",
                attempted.unwrap_or("the module")
            );
            (("Unknown", "Loading", m.clone()), ("False", "Loading", m))
        }
        (None, false) => {
            let m =
                format!("no profile using it is served (see the SchedulerProfiles {used}){keeps}");
            (
                ("False", "ProfileNotServed", m.clone()),
                ("False", "ProfileNotServed", m),
            )
        }
    };
    let mut status = json!({
        "observedGeneration": st.generation,
        "servingDigest": serving,
        "lastAttemptedDigest": attempted,
        "size": st.size,
        "usedBy": st.used_by,
        "conditions": [
            condition(existing, "Loaded", loaded.0, loaded.1, &loaded.2, st.generation),
            condition(existing, "LoadFailed", failed.0, failed.1, &failed.2, st.generation),
        ],
    });
    if let Some(d) = &st.image_digest {
        status["imageDigest"] = json!(d);
    } else if existing.is_some_and(|e| e.get("imageDigest").is_some()) {
        // Removed by the merge patch.
        status["imageDigest"] = Value::Null;
    }
    Some(status)
}

async fn write_statuses(ctx: &Context, report: &Report) -> Result<(), kube::Error> {
    for (name, st) in &report.plugins {
        let Some(obj) = ctx.wasm_plugins.get("", name) else {
            continue;
        };
        let existing = obj.data.get("status");
        let Some(status) = plugin_status(existing, st) else {
            continue;
        };
        if let Some(e) = &st.error {
            let before = existing
                .and_then(|s| s.get("conditions"))
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "LoadFailed"))
                .map(|c| (c["status"].clone(), c["message"].clone()));
            let now = status["conditions"][1].clone();
            if before != Some((now["status"].clone(), now["message"].clone())) {
                tracing::warn!(plugin = %name, error = %e, "WasmPlugin not loaded");
                ctx.recorder.publish(
                    &regarding(&ctx.wasm_plugins, "WasmPlugin", name),
                    crate::recorder::EventType::Warning,
                    "LoadFailed",
                    e,
                );
            }
        }
        patch_status(ctx, &ctx.wasm_plugins, name, existing, status).await?;
    }
    for (name, st) in &report.profiles {
        let Some(obj) = ctx.scheduler_profiles.get("", name) else {
            continue;
        };
        let existing = obj.data.get("status");
        let (ok, reason, message) = match &st.error {
            Some(e) if st.serving_previous => (
                "False",
                "Invalid",
                format!("{e}; the previous version keeps serving"),
            ),
            Some(e) => ("False", "Invalid", e.clone()),
            None => ("True", "Loaded", "profile loaded".to_owned()),
        };
        let status = json!({
            "observedGeneration": st.generation,
            "conditions": [condition(existing, "Ready", ok, reason, &message, st.generation)],
        });
        patch_status(ctx, &ctx.scheduler_profiles, name, existing, status).await?;
    }
    Ok(())
}

async fn patch_status(
    ctx: &Context,
    cached: &Cached,
    name: &str,
    existing: Option<&Value>,
    status: Value,
) -> Result<(), kube::Error> {
    if existing == Some(&status) {
        return Ok(());
    }
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &cached.resource);
    match api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_backoff_doubles_from_five_seconds_to_five_minutes() {
        let secs: Vec<u64> = (1..=9).map(|n| pull_backoff(n).as_secs()).collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(pull_backoff(u32::MAX).as_secs(), 300);
    }

    #[tokio::test]
    async fn failed_pulls_back_off_and_a_new_spec_retries_at_once() {
        // Nothing listens on port 1 of loopback: every pull fails at once (connection refused).
        let registry = Registry::new(Backends::default());
        let plugin = |tag: &str| Object {
            name: "p".into(),
            generation: Some(1),
            spec: json!({"module": {"image": format!("127.0.0.1:1/org/p:{tag}"), "imagePullSecret": "s"}}),
        };
        let asked = Arc::new(AtomicU64::new(0));
        let creds = |_secret: String, registry: String| {
            let asked = Arc::clone(&asked);
            async move {
                asked.fetch_add(1, Ordering::Relaxed);
                assert_eq!(registry, "127.0.0.1:1");
                Ok(Some(crate::oci::Credentials {
                    username: "u".into(),
                    password: "p".into(),
                }))
            }
        };
        registry.pull_images(&[plugin("v1")], creds).await;
        let failures = || registry.metrics.image_pull_failures.load(Ordering::Relaxed);
        assert_eq!(failures(), 1);
        // Within the backoff: not tried again.
        registry.pull_images(&[plugin("v1")], creds).await;
        assert_eq!((failures(), asked.load(Ordering::Relaxed)), (1, 1));
        let Err(r) = registry.resolve_module("p", &plugin("v1").spec) else {
            panic!("resolved without a pull");
        };
        assert_eq!(r.reason, "ImagePullFailed", "{}", r.message);
        assert!(
            r.message
                .starts_with("spec.module.image: 127.0.0.1:1/org/p:v1"),
            "{}",
            r.message
        );
        // A changed spec.module: tried at once.
        registry.pull_images(&[plugin("v2")], creds).await;
        assert_eq!(failures(), 2);
        // The object gone: its entry too.
        registry.pull_images(&[], creds).await;
        assert!(registry.images.lock().unwrap().is_empty());
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn scratch_dirs_of_dead_processes_are_removed_and_live_ones_kept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Beyond any pid_max: never a live process.
        let dead = tmp.path().join("flotilla-modules-999999999-0-1f");
        let mine = tmp
            .path()
            .join(format!("flotilla-modules-{}-0-2f", std::process::id()));
        let other = tmp.path().join("flotilla-modules-notapid");
        for d in [&dead, &mine, &other] {
            std::fs::create_dir(d).expect("mkdir");
        }
        std::fs::write(dead.join("module.wasm"), b"\0asm").expect("write");
        remove_stale_scratch_dirs(tmp.path());
        assert!(!dead.exists(), "a dead process's directory stays");
        assert!(mine.exists() && other.exists());
    }
}
