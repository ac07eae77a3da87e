#!/usr/bin/env bash
# Build rust-shard-interpreter.wasm with Debian's rustc-web (Rust 1.96 + its std source):
#   apt-get install -y rustc-web cargo-web rust-web-src lld-22
# The module is copied to $OUT (default: this directory), where the customization expects it.
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
/usr/bin/cargo build --release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort "$@"
target="${CARGO_TARGET_DIR:-target}"
cp "$target/wasm32-unknown-unknown/release/rust_shard_interpreter.wasm" "${OUT:-.}/rust-shard-interpreter.wasm"
