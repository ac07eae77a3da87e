#!/usr/bin/env bash
# The test command: checks (and, where it can, installs) what the test suite needs, then runs
# `cargo test --workspace`. Extra arguments go to cargo test.
#
# Needs, besides Rust:
# - Go >= 1.25: tests/karmada-diff, the Karmada oracle the differential tests compare with,
#   tests/karmadactl (Karmada's CLI, for engine/controller/tests/karmadactl.rs; about 3.5 minutes
#   on 2 cores the first time, seconds after), tests/karmada-components (Karmada's
#   karmada-controller-manager and karmada-scheduler, for engine/cli/tests/karmada_components.rs;
#   ~45 s on 2 cores once Karmada's packages are in the Go build cache), and the Go SDK example
#   (sdk/go), and tests/oci-registry (the CNCF distribution registry, for engine/cli/tests/plugin_oci.rs).
# - clang + wasm-ld: the C SDK example (sdk/c).
# - node + npm: the AssemblyScript SDK example (sdk/assemblyscript).
# - Zig (`zig`, or PyPI's ziglang, installed here with pip): `flotilla plugin new --lang zig`.
# - Debian's rustc-web (+ cargo-web, rust-web-src, lld-22): builds the Wasm built-ins (plugins/wasm)
#   with build-std, since rustup cannot add wasm targets here.
# - kubectl (1.27 … 1.33): the kubectl tests skip without it.
# - openssl: the real kube-apiserver tests (engine/cli/tests/real_engine.rs) make their
#   certificates with it; tests/real-apiserver.sh builds etcd and kube-apiserver with Go (>= 1.26
#   for kube-apiserver 1.36) into target/real-apiserver once (a few minutes) and reuses them after.
# As root on Debian, missing apt packages are installed; anything else missing is named and the
# script stops. FLOTILLA_TEST_NO_INSTALL=1 only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
apt_packages=()
command -v go >/dev/null 2>&1 || missing+=("go (>= 1.25; Debian: golang-go, or the Go toolchain)")
command -v clang >/dev/null 2>&1 && command -v wasm-ld >/dev/null 2>&1 || apt_packages+=(clang lld)
command -v npm >/dev/null 2>&1 || missing+=("node and npm")
command -v openssl >/dev/null 2>&1 || apt_packages+=(openssl)
if [ ! -x /usr/bin/cargo ] || [ ! -d /usr/lib/rustlib/src/rust/library ]; then
  apt_packages+=(rustc-web cargo-web rust-web-src lld-22)
fi
if [ ${#apt_packages[@]} -gt 0 ]; then
  if [ "${FLOTILLA_TEST_NO_INSTALL:-}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${apt_packages[*]} (apt)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
  else
    missing+=("apt packages: ${apt_packages[*]}")
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  printf 'tests/run.sh: missing prerequisites:\n' >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi
command -v kubectl >/dev/null 2>&1 || echo "warning: kubectl not found; the kubectl tests will skip" >&2
# Zig (PyPI's ziglang): `flotilla plugin new --lang zig` projects (engine/cli/tests/plugin_new.rs).
if ! command -v zig >/dev/null 2>&1 && ! python3 -m ziglang version >/dev/null 2>&1; then
  if [ "${FLOTILLA_TEST_NO_INSTALL:-}" != 1 ] && command -v pip >/dev/null 2>&1; then
    echo "installing ziglang (pip)" >&2
    pip install -q ziglang==0.17.0 >&2
  else
    echo "tests/run.sh: missing prerequisite: zig (pip install ziglang==0.17.0)" >&2
    exit 1
  fi
fi

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# The Karmada oracle (Karmada's scheduler as a Go module dependency).
mkdir -p target
(cd tests/karmada-diff && go build -buildvcs=false -o ../../target/karmada-diff .)
export KARMADA_DIFF_BIN="$PWD/target/karmada-diff"
# Karmada's CLI from Karmada's Go module; the karmadactl test fails without it.
(cd tests/karmadactl && go build -buildvcs=false -o ../../target/karmadactl .)
export KARMADACTL_BIN="$PWD/target/karmadactl"
export FLOTILLA_REQUIRE_KARMADACTL=1
# Karmada's own control plane, run against `flotilla up --no-controllers` (the drop-in test).
(cd tests/karmada-components &&
  go build -buildvcs=false -o ../../target/karmada-controller-manager github.com/karmada-io/karmada/cmd/controller-manager &&
  go build -buildvcs=false -o ../../target/karmada-scheduler github.com/karmada-io/karmada/cmd/scheduler)
export KARMADA_CONTROLLER_MANAGER_BIN="$PWD/target/karmada-controller-manager"
export KARMADA_SCHEDULER_BIN="$PWD/target/karmada-scheduler"
export FLOTILLA_REQUIRE_KARMADA_COMPONENTS=1
# Helm from its Go module, for the chart test (engine/cli/tests/helm_chart.rs); ~4.5 min on 2
# cores the first time, seconds after.
(cd tests/helm && go build -buildvcs=false -o ../../target/helm helm.sh/helm/v4/cmd/helm)
export HELM_BIN="$PWD/target/helm"
export FLOTILLA_REQUIRE_HELM=1
# The CNCF distribution registry from its Go module, for WasmPlugin images and `flotilla plugin
# push|pull` (engine/cli/tests/plugin_oci.rs); ~1 min on 2 cores the first time, seconds after.
(cd tests/oci-registry && go build -buildvcs=false -o ../../target/oci-registry .)
export FLOTILLA_OCI_REGISTRY_BIN="$PWD/target/oci-registry"
export FLOTILLA_REQUIRE_OCI_REGISTRY=1
# A real etcd + kube-apiserver, built once and reused; the real-engine suite fails without them.
BASE="$PWD/target/real-apiserver" bash tests/real-apiserver.sh build
export FLOTILLA_REAL_APISERVER_BIN="$PWD/target/real-apiserver/bin"
export FLOTILLA_REQUIRE_REAL_APISERVER=1
# Missing guest toolchains fail the Wasm and SDK tests instead of skipping them.
export FLOTILLA_REQUIRE_WASM_GUESTS=1

cargo test --workspace "$@"
