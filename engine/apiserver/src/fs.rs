//! Files only their owner may read: the store, the credentials and kubeconfigs hold every
//! object, Secret and token the server has.

use std::io::{self, Write as _};
use std::path::Path;

/// Set `path`'s Unix permission bits (a no-op elsewhere).
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
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

/// Create `dir` (and missing parents) and make it `0700`, tightening it if it exists.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    set_mode(dir, 0o700)
}

/// Make the existing file `path` `0600`.
pub(crate) fn private_file(path: &Path) -> io::Result<()> {
    set_mode(path, 0o600)
}

/// Write `contents` to `path` readable by its owner only: a new file is created `0600`, an
/// existing one is made `0600` before anything is written into it (in place, so a symlinked
/// file stays linked).
pub(crate) fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.set_len(0)?;
    f.write_all(contents)?;
    f.sync_all()
}
