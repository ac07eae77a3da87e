//! The on-disk cache of compiled modules: written private, reused on the next load, and never
//! trusted when it is not a private regular file or does not load.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use flotilla_wasm::Host;

fn module() -> Vec<u8> {
    let wat =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/pass.wat"))
            .expect("fixture");
    wat::parse_str(wat).expect("wat")
}

/// The one compiled module in `dir` (beside it, Cranelift's incremental cache may be written).
fn only_file(dir: &Path) -> std::path::PathBuf {
    let files: Vec<_> = std::fs::read_dir(dir)
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

#[test]
fn compiled_modules_are_kept_private_reused_and_replaced_when_unusable() {
    let host = Host::global().expect("host");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("compiled");
    let wasm = module();

    // First load: compiled and written, directory 0700, file 0600, named by digest.
    let m = host.compile_cached(&wasm, Some(&dir)).expect("compile");
    let digest = m.digest.to_string();
    drop(m);
    let file = only_file(&dir);
    assert!(
        file.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&digest) && n.ends_with(".cwasm")),
        "{file:?}"
    );
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&file), 0o600);

    // Second load (nothing in memory any more): read back, not rewritten.
    let ino = std::fs::metadata(&file).expect("stat").ino();
    let m = host.compile_cached(&wasm, Some(&dir)).expect("load");
    assert_eq!(m.digest.to_string(), digest);
    drop(m);
    assert_eq!(
        std::fs::metadata(&file).expect("stat").ino(),
        ino,
        "rewritten"
    );

    // Garbage in the file: compiled again and replaced.
    std::fs::write(&file, b"not machine code").expect("corrupt");
    let m = host.compile_cached(&wasm, Some(&dir)).expect("recompile");
    drop(m);
    let replaced = std::fs::read(&file).expect("read");
    assert_ne!(replaced, b"not machine code");
    assert_eq!(mode(&file), 0o600);

    // A file others may write is not trusted: compiled again and replaced by a private one.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let ino = std::fs::metadata(&file).expect("stat").ino();
    let m = host.compile_cached(&wasm, Some(&dir)).expect("recompile");
    drop(m);
    let file = only_file(&dir);
    assert_ne!(std::fs::metadata(&file).expect("stat").ino(), ino);
    assert_eq!(mode(&file), 0o600);

    // A symlink in its place is not followed.
    let target = tmp.path().join("elsewhere.cwasm");
    std::fs::rename(&file, &target).expect("move");
    std::os::unix::fs::symlink(&target, &file).expect("symlink");
    let m = host.compile_cached(&wasm, Some(&dir)).expect("recompile");
    drop(m);
    assert!(
        !std::fs::symlink_metadata(&file)
            .expect("stat")
            .file_type()
            .is_symlink(),
        "the link was kept"
    );
}
