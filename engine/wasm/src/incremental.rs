//! Cranelift's incremental compilation cache (wasmtime's `incremental-cache`): the compiled code
//! of each function, keyed by a hash of the function's IR (and the compiler's flags and version).
//! A new version of a module that shares most functions with one compiled before — the Go
//! runtime is most of a Go module — then recompiles only the functions that changed, and the
//! optimized compile of an update takes a fraction of a full one.
//!
//! Kept in memory, bounded ([`MAX_BYTES`], least recently used entries evicted first), and
//! persisted beside the compiled modules (`<cache>/incremental-<engine>.bin`, written after a
//! compile that added entries, read once per directory), so a restart keeps it. An entry is
//! machine code: the file gets the trust rules of the compiled-module cache (private directory,
//! a regular file of this user, mode 0600); a file that fails them, or does not parse, is not
//! used. Cranelift checks its version marker in every entry; one it cannot decode is compiled
//! again.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::{CacheStore, Engine};

/// Bytes (keys and values) kept at most, in memory and on disk: a 5.7 MB Go module takes about
/// 13 MB (engine/wasm/benches/compile.rs), so the functions of several such modules fit.
pub const MAX_BYTES: usize = 128 << 20;
/// Largest key accepted from the file (Cranelift's keys are 32-byte hashes).
const MAX_KEY: usize = 64;
/// File header: format and version of this layout.
const MAGIC: &[u8; 8] = b"FLINC\x00\x00\x01";

/// What the incremental cache did ([`crate::Host::incremental`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IncrementalStats {
    /// Functions whose compiled code was found (not compiled again).
    pub hits: u64,
    /// Functions looked up and not found (compiled, then inserted).
    pub misses: u64,
    /// Entries held now.
    pub entries: usize,
    /// Bytes held now.
    pub bytes: usize,
}

struct Entry {
    value: Arc<[u8]>,
    used: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Box<[u8]>, Entry>,
    bytes: usize,
    clock: u64,
    /// Where it is persisted: the last cache directory a compile named.
    dir: Option<PathBuf>,
    /// Directories whose file was read (each once; the last 64).
    read: Vec<PathBuf>,
    /// Entries added since the last write.
    dirty: bool,
}

/// The store handed to wasmtime ([`wasmtime::Config::enable_incremental_compilation`]).
pub(crate) struct Incremental {
    inner: Mutex<Inner>,
    hits: AtomicU64,
    misses: AtomicU64,
    writing: AtomicBool,
    max_bytes: usize,
}

impl std::fmt::Debug for Incremental {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incremental")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Incremental {
    pub(crate) fn new(max_bytes: usize) -> Self {
        Incremental {
            inner: Mutex::new(Inner::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            writing: AtomicBool::new(false),
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn stats(&self) -> IncrementalStats {
        let inner = self.lock();
        IncrementalStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: inner.map.len(),
            bytes: inner.bytes,
        }
    }

    /// Drop every entry (the attached directory stays, its file is not read again).
    pub(crate) fn forget(&self) {
        let mut inner = self.lock();
        inner.map.clear();
        inner.bytes = 0;
    }

    /// Persist to `dir` from now on, first taking in what a previous process left there.
    pub(crate) fn attach(&self, engine: &Engine, dir: &Path) {
        let file = file(engine, dir);
        {
            let mut inner = self.lock();
            if inner.dir.as_deref() == Some(dir) {
                return;
            }
            inner.dir = Some(dir.to_path_buf());
            if inner.read.iter().any(|d| d == dir) {
                return;
            }
            if inner.read.len() >= 64 {
                inner.read.remove(0);
            }
            inner.read.push(dir.to_path_buf());
        }
        let Some(entries) = read(dir, &file, self.max_bytes) else {
            return;
        };
        let n = entries.len();
        let mut inner = self.lock();
        for (k, v) in entries {
            inner.put(k, v.into(), self.max_bytes);
        }
        tracing::debug!(file = %file.display(), entries = n, "incremental compilation cache read");
    }

    /// Write the entries to the attached directory in a background thread, when some were added
    /// since the last write and no write is running (a failure only costs a restart the reuse).
    pub(crate) fn persist(self: &Arc<Self>, engine: &Engine) {
        let Some(dir) = ({
            let inner = self.lock();
            inner.dir.clone().filter(|_| inner.dirty)
        }) else {
            return;
        };
        if self.writing.swap(true, Ordering::AcqRel) {
            return;
        }
        let file = file(engine, &dir);
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("flotilla-wasm-incremental".into())
            .spawn(move || {
                let snapshot: Vec<Held> = {
                    let mut inner = this.lock();
                    inner.dirty = false;
                    inner
                        .map
                        .iter()
                        .map(|(k, e)| (k.clone(), Arc::clone(&e.value)))
                        .collect()
                };
                if let Err(e) = write(&dir, &file, &snapshot) {
                    this.lock().dirty = true;
                    tracing::warn!(file = %file.display(), error = %e, "cannot keep the incremental compilation cache; a restart compiles every function again");
                }
                this.writing.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.writing.store(false, Ordering::Release);
        }
    }
}

impl Inner {
    fn put(&mut self, key: Box<[u8]>, value: Arc<[u8]>, max_bytes: usize) {
        let key_len = key.len();
        let size = key_len + value.len();
        if size > max_bytes / 4 {
            return;
        }
        self.clock += 1;
        let used = self.clock;
        self.bytes += size;
        if let Some(old) = self.map.insert(key, Entry { value, used }) {
            self.bytes -= key_len + old.value.len();
        }
        self.evict_if_over(max_bytes);
    }

    /// Evict the least recently used entries down to 3/4 of `max_bytes` when over it (in a batch:
    /// one sort per many inserts).
    fn evict_if_over(&mut self, max_bytes: usize) {
        if self.bytes <= max_bytes {
            return;
        }
        let mut by_use: Vec<(u64, Box<[u8]>)> =
            self.map.iter().map(|(k, e)| (e.used, k.clone())).collect();
        by_use.sort_unstable_by_key(|(used, _)| *used);
        for (_, k) in by_use {
            if self.bytes <= max_bytes / 4 * 3 {
                break;
            }
            if let Some(e) = self.map.remove(&k) {
                self.bytes -= k.len() + e.value.len();
            }
        }
    }
}

impl CacheStore for Incremental {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        match inner.map.get_mut(key) {
            Some(e) => {
                e.used = now;
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(Cow::Owned(e.value.to_vec()))
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        if key.len() > MAX_KEY {
            return false;
        }
        let mut inner = self.lock();
        inner.put(key.into(), value.into(), self.max_bytes);
        inner.dirty = true;
        true
    }
}

/// The cache file of `engine` in `dir`: named by the engine's compatibility hash, as the
/// compiled modules are.
fn file(engine: &Engine, dir: &Path) -> PathBuf {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    dir.join(format!("incremental-{:016x}.bin", h.finish()))
}

/// The entries of `file`, if it is trusted (see [`crate::cache`]) and well formed, at most
/// `max_bytes` of them.
fn read(dir: &Path, file: &Path, max_bytes: usize) -> Option<Parsed> {
    if !file.exists()
        || crate::cache::private_dir(dir).is_err()
        || !crate::cache::trusted(dir, file)
    {
        return None;
    }
    let parsed = std::fs::File::open(file).and_then(|f| {
        let mut data = Vec::new();
        f.take((max_bytes + max_bytes / 8) as u64 + 1)
            .read_to_end(&mut data)?;
        parse(&data, max_bytes).ok_or_else(|| std::io::Error::other("malformed"))
    });
    match parsed {
        Ok(entries) => Some(entries),
        Err(e) => {
            tracing::info!(file = %file.display(), error = %e, "incremental compilation cache unusable; starting empty");
            None
        }
    }
}

/// An entry as written: key and value.
type Held = (Box<[u8]>, Arc<[u8]>);

/// The entries of a file.
type Parsed = Vec<(Box<[u8]>, Vec<u8>)>;

/// `MAGIC`, then per entry a little-endian u32 key length, the key, a u32 value length, the
/// value. `None` when malformed or when the entries exceed `max_bytes`.
fn parse(data: &[u8], max_bytes: usize) -> Option<Parsed> {
    let mut rest = data.strip_prefix(MAGIC.as_slice())?;
    let mut out = Vec::new();
    let mut total = 0usize;
    let take = |rest: &mut &[u8], max: usize| -> Option<Vec<u8>> {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if len > max || len > tail.len() {
            return None;
        }
        let (v, tail) = tail.split_at(len);
        *rest = tail;
        Some(v.to_vec())
    };
    while !rest.is_empty() {
        let key = take(&mut rest, MAX_KEY)?;
        let value = take(&mut rest, max_bytes)?;
        total = total.checked_add(key.len() + value.len())?;
        if total > max_bytes {
            return None;
        }
        out.push((key.into_boxed_slice(), value));
    }
    Some(out)
}

fn write(dir: &Path, file: &Path, entries: &[Held]) -> std::io::Result<()> {
    crate::cache::private_dir(dir)?;
    let mut data = Vec::with_capacity(
        MAGIC.len()
            + entries
                .iter()
                .map(|(k, v)| 8 + k.len() + v.len())
                .sum::<usize>(),
    );
    data.extend_from_slice(MAGIC);
    for (k, v) in entries {
        for part in [&k[..], &v[..]] {
            let len = u32::try_from(part.len()).map_err(std::io::Error::other)?;
            data.extend_from_slice(&len.to_le_bytes());
            data.extend_from_slice(part);
        }
    }
    let tmp = file.with_extension(format!("{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let _ = std::fs::remove_file(&tmp);
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(&data)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, file)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_least_recently_used_first() {
        let store = Incremental::new(1000);
        for i in 0..8u8 {
            assert!(store.insert(&[i; 32], vec![i; 68]));
        }
        assert_eq!(store.stats().bytes, 800);
        // Use entry 0, so entry 1 is the least recently used.
        assert!(store.get(&[0; 32]).is_some());
        for i in 8..11u8 {
            store.insert(&[i; 32], vec![i; 68]);
        }
        // Over 1000 bytes: down to at most 750, oldest first, the used entry kept.
        let s = store.stats();
        assert!(s.bytes <= 750, "{s:?}");
        assert!(store.get(&[0; 32]).is_some());
        assert!(store.get(&[1; 32]).is_none());
        assert!(store.get(&[10; 32]).is_some());
        // Too large a key or value is refused.
        assert!(!store.insert(&[0; 65], vec![0; 1]));
        store.insert(&[99; 32], vec![0; 400]);
        assert!(store.get(&[99; 32]).is_none());
    }

    #[test]
    fn file_round_trip_and_hostile_files() {
        let entries: Vec<Held> = vec![
            (vec![1u8; 32].into(), vec![7u8; 10].into()),
            (vec![2u8; 32].into(), Vec::new().into()),
        ];
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("c");
        let f = dir.join("incremental-0.bin");
        write(&dir, &f, &entries).expect("write");
        let back = read(&dir, &f, 1000).expect("read");
        assert_eq!(back.len(), 2);
        assert_eq!(&*back[0].0, &[1u8; 32]);
        assert_eq!(back[0].1, vec![7u8; 10]);
        // Beyond the bound, truncated, oversized lengths, another header: refused whole.
        assert!(read(&dir, &f, 50).is_none());
        let data = std::fs::read(&f).expect("read");
        assert!(parse(&data[..data.len() - 1], 1000).is_none());
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&huge, 1000).is_none());
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&32u32.to_le_bytes());
        huge.extend_from_slice(&[0; 32]);
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&huge, 1000).is_none());
        assert!(parse(b"FLINC\x00\x00\x02", 1000).is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            // Readable by others: not trusted.
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
            assert!(read(&dir, &f, 1000).is_none());
        }
    }
}
