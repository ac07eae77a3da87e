//! Compiled modules on disk: `Module::serialize` once, `Module::deserialize_file` on later loads
//! (a restart, another profile), keyed by the module's digest and the engine's compatibility hash.
//!
//! Loading machine code from a file is only as safe as the file: the directory is made 0700 and
//! a file is used only when it is a regular file of this user with mode 0600 (what this module
//! writes). wasmtime itself refuses a file built by another version or configuration; such a
//! file, or one that fails to load for any reason, is compiled again and replaced.

use std::hash::{Hash as _, Hasher as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use wasmtime::{Engine, Module};

use crate::module::Digest;

/// The cache file of module `digest` for `engine`.
pub(crate) fn path(engine: &Engine, dir: &Path, digest: Digest) -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    dir.join(format!("{digest}-{:016x}.cwasm", h.finish()))
}

/// Make `dir` private (0700), creating it: succeeds only for its owner (or root), so it is then
/// this user's.
fn private_dir(dir: &Path) -> std::io::Result<()> {
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
fn trusted(dir: &Path, path: &Path) -> bool {
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

/// The module of `wasm` (digest `digest`): from `dir` when a usable file is there, else compiled
/// and stored there.
pub(crate) fn load_or_compile(
    engine: &Engine,
    dir: &Path,
    digest: Digest,
    wasm: &[u8],
) -> wasmtime::Result<Module> {
    let file = path(engine, dir, digest);
    let private = private_dir(dir);
    if private.is_ok() && trusted(dir, &file) {
        // SAFETY: the file is a regular file of this user, unreadable and unwritable by others,
        // in a directory this process keeps private; wasmtime checks that it was built by this
        // version with this engine configuration.
        #[allow(unsafe_code)]
        match unsafe { Module::deserialize_file(engine, &file) } {
            Ok(m) => return Ok(m),
            Err(e) => {
                tracing::info!(file = %file.display(), error = %e, "compiled module unusable; compiling again");
            }
        }
    }
    let module = Module::new(engine, wasm)?;
    if let Err(e) = private.and_then(|()| store(&file, &module)) {
        tracing::warn!(file = %file.display(), error = %e, "cannot keep the compiled module; the next start compiles it again");
    }
    Ok(module)
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
