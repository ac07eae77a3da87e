//! Compiled modules on disk: `Module::serialize` once, `Module::deserialize_file` on later loads
//! (a restart, another profile), keyed by the module's digest and the engine's compatibility hash.
//!
//! Loading machine code from a file is only as safe as the file: the directory is made 0700 and
//! a file is used only when it is a regular file of this user with mode 0600 (what this module
//! writes). wasmtime itself refuses a file built by another version or configuration; such a
//! file, or one that fails to load for any reason, is compiled again and replaced.
//!
//! The directory is bounded: a load marks its file used (mtime), and every store evicts the
//! least recently used files beyond [`MAX_FILES`] files or [`MAX_BYTES`] bytes (never the file
//! just stored), with temporary files a crashed writer left behind for an hour.

use std::hash::{Hash as _, Hasher as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use wasmtime::{Engine, Module};

use crate::module::Digest;

/// Compiled modules kept at most (a module is a few times its Wasm size compiled).
pub const MAX_FILES: usize = 256;
/// Bytes of compiled modules kept at most.
pub const MAX_BYTES: u64 = 2 << 30;
/// Age past which a writer's temporary file is taken as abandoned.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// The cache file of module `digest` for `engine`.
pub(crate) fn path(engine: &Engine, dir: &Path, digest: Digest) -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    dir.join(format!("{digest}-{:016x}.cwasm", h.finish()))
}

/// Make `dir` private (0700), creating it: succeeds only for its owner (or root), so it is then
/// this user's.
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Is `path` a file this process may trust: a regular file (not a link) of the owner of the
/// private `dir`, neither readable nor writable by anyone else?
pub(crate) fn trusted(dir: &Path, path: &Path) -> bool {
    let (Ok(d), Ok(meta)) = (std::fs::metadata(dir), std::fs::symlink_metadata(path)) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        meta.uid() == d.uid() && meta.mode() & 0o077 == 0 && d.mode() & 0o077 == 0
    }
    #[cfg(not(unix))]
    {
        let _ = d;
        true
    }
}

/// The module of digest `digest` from `dir`, when a usable file is there.
pub(crate) fn load(engine: &Engine, dir: &Path, digest: Digest) -> Option<Module> {
    let file = path(engine, dir, digest);
    if private_dir(dir).is_err() || !trusted(dir, &file) {
        return None;
    }
    // SAFETY: the file is a regular file of this user, unreadable and unwritable by others,
    // in a directory this process keeps private; wasmtime checks that it was built by this
    // version with this engine configuration.
    #[allow(unsafe_code)]
    match unsafe { Module::deserialize_file(engine, &file) } {
        Ok(m) => {
            touch(&file);
            Some(m)
        }
        Err(e) => {
            tracing::info!(file = %file.display(), error = %e, "compiled module unusable; compiling again");
            None
        }
    }
}

/// Compile `wasm` (digest `digest`) and store the machine code in `dir` (failing to store only
/// costs the next start a compile).
pub(crate) fn compile_and_store(
    engine: &Engine,
    dir: &Path,
    digest: Digest,
    wasm: &[u8],
) -> wasmtime::Result<Module> {
    let file = path(engine, dir, digest);
    let module = Module::new(engine, wasm)?;
    match private_dir(dir).and_then(|()| store(&file, &module)) {
        Ok(()) => {
            let removed = evict(dir, &file, MAX_FILES, MAX_BYTES);
            if removed > 0 {
                tracing::info!(dir = %dir.display(), removed, "evicted least recently used compiled modules");
            }
        }
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot keep the compiled module; the next start compiles it again");
        }
    }
    Ok(module)
}

/// Mark `file` used now (its mtime), for [`evict`].
fn touch(file: &Path) {
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
}

/// Remove the least recently used (oldest mtime) `.cwasm` files of `dir` until at most
/// `max_files` files and `max_bytes` bytes remain, never `keep`; and temporary files older than
/// an hour. Only regular files are considered (links are left alone). Returns how many files
/// were removed.
pub(crate) fn evict(dir: &Path, keep: &Path, max_files: usize, max_bytes: u64) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = Vec::new();
    for entry in entries.flatten().take(100_000) {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        if name.ends_with(".tmp") {
            let old = now
                .duration_since(modified)
                .is_ok_and(|age| age > STALE_TMP);
            if old && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
            continue;
        }
        if !name.ends_with(".cwasm") || path == keep {
            continue;
        }
        files.push((modified, meta.len(), path));
    }
    // Newest first; keep is always kept and counted.
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    let mut count = 1usize;
    let mut bytes = std::fs::metadata(keep).map_or(0, |m| m.len());
    for (_, len, path) in files {
        if count < max_files && bytes.saturating_add(len) <= max_bytes {
            count += 1;
            bytes = bytes.saturating_add(len);
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

fn store(file: &Path, module: &Module) -> std::io::Result<()> {
    let bytes = module.serialize().map_err(std::io::Error::other)?;
    let tmp = file.with_extension(format!("{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let _ = std::fs::remove_file(&tmp);
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(&bytes)?;
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
    use std::time::{Duration, SystemTime};

    fn file(dir: &Path, name: &str, len: usize, age_secs: u64) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, vec![0u8; len]).expect("write");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .expect("open");
        f.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
            .expect("mtime");
        p
    }

    #[test]
    fn eviction_keeps_the_most_recently_used_within_both_bounds() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let d = tmp.path();
        let keep = file(d, "k-0.cwasm", 10, 500); // just stored, though its mtime is old
        let a = file(d, "a-0.cwasm", 10, 10);
        let b = file(d, "b-0.cwasm", 10, 20);
        let c = file(d, "c-0.cwasm", 10, 30);
        let e = file(d, "e-0.cwasm", 10, 40);
        let other = file(d, "notes.txt", 10, 1000);
        let fresh_tmp = file(d, "f-0.cwasm.123.tmp", 10, 5);
        let stale_tmp = file(d, "g-0.cwasm.456.tmp", 10, 7200);
        // At most 3 files: keep, then the two most recently used.
        assert_eq!(evict(d, &keep, 3, u64::MAX), 3);
        for p in [&keep, &a, &b, &other, &fresh_tmp] {
            assert!(p.exists(), "{} removed", p.display());
        }
        for p in [&c, &e, &stale_tmp] {
            assert!(!p.exists(), "{} kept", p.display());
        }
        // At most 25 bytes: keep (10) and the newest (10); b would make 30.
        assert_eq!(evict(d, &keep, 100, 25), 1);
        assert!(keep.exists() && a.exists() && !b.exists());
        // Using a file makes it the most recent.
        let old = file(d, "o-0.cwasm", 10, 100);
        touch(&old);
        assert_eq!(evict(d, &keep, 2, u64::MAX), 1);
        assert!(old.exists() && !a.exists());
    }

    #[test]
    #[cfg(unix)]
    fn eviction_leaves_links_and_directories_alone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let d = tmp.path();
        let outside = tempfile::tempdir().expect("tempdir");
        let target = file(outside.path(), "t.cwasm", 10, 100);
        std::os::unix::fs::symlink(&target, d.join("l-0.cwasm")).expect("symlink");
        std::fs::create_dir(d.join("x-0.cwasm")).expect("mkdir");
        let keep = file(d, "k-0.cwasm", 10, 1);
        assert_eq!(evict(d, &keep, 1, 1), 0);
        assert!(target.exists() && d.join("x-0.cwasm").is_dir());
    }
}
