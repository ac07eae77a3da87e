//! Hot reload: a [`Registry`] holds the plugin set in force (e.g. the scheduler profiles) as one
//! immutable snapshot. A watcher thread polls the files the last build read; when one changes, it
//! rebuilds the whole set off the hot path (compile, link, first instantiation) and swaps it in
//! atomically. A scheduling cycle pins one snapshot ([`Registry::current`]) and so never mixes
//! versions; a failed rebuild keeps the previous set and is reported by [`Registry::last_error`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use flotilla_core::framework::Profile;
use flotilla_core::profile::{PluginFactory, ProfileDocument, build_profile};

use crate::module::{Digest, sha256};

/// One built plugin set and its version (1 for the first load, +1 per successful reload).
#[derive(Debug)]
pub struct Loaded<T> {
    /// The set.
    pub value: T,
    /// Its version.
    pub version: u64,
}

type Build<T> = dyn Fn(&mut Vec<PathBuf>) -> Result<T, String> + Send + Sync;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    digest: Option<Digest>,
}

fn stamp(path: &Path, with_digest: bool) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    let digest = if with_digest { std::fs::read(path).ok().map(|b| sha256(&b)) } else { None };
    Some(Stamp { len: meta.len(), modified: meta.modified().ok(), digest })
}

struct Inner<T> {
    build: Box<Build<T>>,
    current: ArcSwap<Loaded<T>>,
    files: Mutex<Vec<(PathBuf, Option<Stamp>)>>,
    last_error: Mutex<Option<String>>,
    stop: AtomicBool,
    version: AtomicU64,
}

/// A hot-reloadable plugin set. See the module docs.
pub struct Registry<T: Send + Sync + 'static> {
    inner: Arc<Inner<T>>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

impl<T: Send + Sync + 'static> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("version", &self.inner.version.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> Registry<T> {
    /// Build the first set with `build`, which pushes every file it reads onto its argument.
    ///
    /// # Errors
    /// The first build failed.
    pub fn load(build: impl Fn(&mut Vec<PathBuf>) -> Result<T, String> + Send + Sync + 'static) -> Result<Self, String> {
        let mut read = Vec::new();
        let value = build(&mut read)?;
        let files = read.into_iter().map(|p| (stamp(&p, true), p)).map(|(s, p)| (p, s)).collect();
        Ok(Registry {
            inner: Arc::new(Inner {
                build: Box::new(build),
                current: ArcSwap::from_pointee(Loaded { value, version: 1 }),
                files: Mutex::new(files),
                last_error: Mutex::new(None),
                stop: AtomicBool::new(false),
                version: AtomicU64::new(1),
            }),
            watcher: Mutex::new(None),
        })
    }

    /// The set in force. Pin it for a whole scheduling cycle.
    pub fn current(&self) -> Arc<Loaded<T>> {
        self.inner.current.load_full()
    }

    /// Why the most recent reload failed (cleared by a successful one).
    pub fn last_error(&self) -> Option<String> {
        self.inner.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Check the watched files now; rebuild and swap if one changed. `Ok(true)` when swapped.
    ///
    /// # Errors
    /// The rebuild failed (the previous set stays in force).
    pub fn reload_if_changed(&self) -> Result<bool, String> {
        self.inner.poll()
    }

    /// Poll the watched files every `interval` on a background thread (stopped on drop).
    pub fn watch(&self, interval: Duration) {
        let weak: Weak<Inner<T>> = Arc::downgrade(&self.inner);
        let handle = std::thread::Builder::new().name("flotilla-wasm-reload".into()).spawn(move || {
            loop {
                std::thread::sleep(interval);
                let Some(inner) = weak.upgrade() else { return };
                if inner.stop.load(Ordering::Relaxed) {
                    return;
                }
                // Errors are kept in `last_error`; the previous set stays in force.
                let _ = inner.poll();
            }
        });
        if let Ok(h) = handle {
            *self.watcher.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        }
    }
}

impl<T> Inner<T> {
    fn poll(&self) -> Result<bool, String> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let changed = files.iter_mut().any(|(path, old)| {
            let cheap = stamp(path, false);
            let same_meta = match (&cheap, old.as_ref()) {
                (Some(n), Some(o)) => n.len == o.len && n.modified == o.modified,
                (None, None) => true,
                _ => false,
            };
            if same_meta {
                return false;
            }
            let now = stamp(path, true);
            let content_changed = now.as_ref().map(|s| s.digest) != old.as_ref().map(|s| s.digest);
            *old = now;
            content_changed
        });
        if !changed {
            return Ok(false);
        }
        let mut read = Vec::new();
        match (self.build)(&mut read) {
            Ok(value) => {
                let version = self.version.fetch_add(1, Ordering::Relaxed) + 1;
                self.current.store(Arc::new(Loaded { value, version }));
                *files = read.into_iter().map(|p| (stamp(&p, true), p)).map(|(s, p)| (p, s)).collect();
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
                Ok(true)
            }
            Err(e) => {
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
                Err(e)
            }
        }
    }
}

impl<T: Send + Sync + 'static> Drop for Registry<T> {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Relaxed);
    }
}

/// Build the profiles in a `SchedulerProfile` file (YAML, several documents allowed) on top of
/// `base`, resolving relative `wasm.path`s against the file's directory; pushes the files read.
/// The building block of a profile [`Registry`]:
/// `Registry::load(move |read| profiles_from_file(&path, &base, &factories, read))`.
///
/// # Errors
/// Unreadable file, invalid document, or a plugin that does not build (message names the file).
pub fn profiles_from_file(
    path: &Path,
    base: &Profile,
    factories: &[&dyn PluginFactory],
    read: &mut Vec<PathBuf>,
) -> Result<Vec<Profile>, String> {
    read.push(path.to_path_buf());
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut out = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value: serde_json::Value = serde::Deserialize::deserialize(de)
            .map_err(|e| format!("{}: document {}: {e}", path.display(), i + 1))?;
        if value.is_null() {
            continue;
        }
        let mut doc: ProfileDocument =
            serde_json::from_value(value).map_err(|e| format!("{}: document {}: {e}", path.display(), i + 1))?;
        read.extend(doc.resolve_wasm_paths(&dir));
        out.push(build_profile(&doc, base, factories).map_err(|e| format!("{}: document {}: {e}", path.display(), i + 1))?);
    }
    Ok(out)
}
