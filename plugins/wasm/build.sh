#!/usr/bin/env bash
# Build the Wasm plugins in this directory with Debian's rustc-web (Rust 1.96 + its std source):
#   apt-get install -y rustc-web cargo-web rust-web-src lld-22
# Output: $CARGO_TARGET_DIR (default ./target)/wasm32-unknown-unknown/release/*.wasm
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
exec /usr/bin/cargo build --release --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort "$@"
