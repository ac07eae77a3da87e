//! Builds the Wasm builds of the built-ins (plugins/wasm) with Debian's rustc-web, once per test
//! binary. Without the toolchain the tests that need them are skipped, unless
//! `FLOTILLA_REQUIRE_WASM_GUESTS=1` (CI), where a missing toolchain fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Directory holding `flotilla_wasm_cluster_affinity.wasm` and `flotilla_wasm_static_weight.wasm`.
pub fn built() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(build).clone()
}

fn build() -> Option<PathBuf> {
    let required = std::env::var_os("FLOTILLA_REQUIRE_WASM_GUESTS").is_some();
    let have = Path::new("/usr/bin/cargo").exists()
        && Path::new("/usr/lib/rustlib/src/rust/library").exists();
    if !have {
        assert!(
            !required,
            "FLOTILLA_REQUIRE_WASM_GUESTS is set but rustc-web/cargo-web/rust-web-src are not installed"
        );
        eprintln!(
            "skipping: Debian rustc-web toolchain not installed (apt-get install -y rustc-web cargo-web rust-web-src lld-22)"
        );
        return None;
    }
    // The workspace's plugins/wasm, from whichever crate includes this file.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join("plugins/wasm"))
        .find(|d| d.join("build.sh").exists())
        .expect("plugins/wasm/build.sh above the crate");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wasm-guests");
    let out = Command::new(root.join("build.sh"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("run plugins/wasm/build.sh");
    assert!(
        out.status.success(),
        "building plugins/wasm failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(target.join("wasm32-unknown-unknown/release"))
}
