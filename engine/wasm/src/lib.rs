//! Flotilla's Wasm plugin host: runs sandboxed plugins for every extension point (filter, score,
//! select, assign, override) behind the same traits the built-ins implement.
//!
//! Where to start: [`WasmFactory`] turns a profile's `wasm: {path, sha256}` plugin spec into a
//! [`WasmPlugin`]; `sdk/ABI.md` specifies what a module must export (ABI v1, names and messages in
//! the `flotilla-abi` crate). Hot reload is the control plane's: the controllers rebuild profiles
//! from `WasmPlugin` objects and swap the whole set (`flotilla_controller::controller::plugins`).
//!
//! Concepts:
//! - **[`Host`]**: one process-wide wasmtime `Engine` (Cranelift, pooling allocator, epoch
//!   interruption driven by one ticker thread) and `Linker` with the host imports
//!   (`flotilla:host/v1`: `log`, `set_result`, `set_rows`) and a deny-all `wasi_snapshot_preview1`
//!   (clock and random only) for wasip1 reactors such as Go's `-buildmode=c-shared`.
//! - **Tiers** ([`Tier`]): with a compiled cache (the control plane's), a module not in it is
//!   compiled first by wasmtime's baseline compiler (Winch, a second engine with the same limits)
//!   and served at once, while Cranelift compiles it in the background; plugins switch to the
//!   optimized code at their next call once it is ready ([`Host::compile_tiered`]). Cranelift
//!   keeps an incremental cache (per function, persisted beside the compiled modules): a new
//!   version of a module mostly made of functions it compiled before is optimized quickly.
//! - **[`Compiled`]**: a module compiled once per sha256, its imports checked (anything unknown is
//!   rejected at load, with the import named), its exports checked, linked into an `InstancePre`.
//! - **[`WasmPlugin`]**: a module + config + [`Limits`], with a pool of warm instances. The cluster
//!   set is pushed into an instance once per cluster-set generation and kept there; each call then
//!   carries the binding (JSON) and one compact binary row per cluster, and crosses the boundary
//!   once. A call runs under an epoch deadline and a memory cap; every trap, timeout, memory
//!   exhaustion or malformed reply becomes a `PluginError` (classified by type) and the faulted
//!   instance is dropped. The host never panics on guest behaviour.

mod cache;
mod factory;
mod host;
mod incremental;
mod instance;
pub mod interpret;
mod module;
pub mod patch;
mod plugin;
mod wasi;

pub use factory::WasmFactory;
pub use host::{
    BASELINE_POOL_SLOTS, Host, MAX_MEMORY_BYTES, TieringStats, instance_counts, render_metrics,
};
pub use incremental::IncrementalStats;
pub use instance::{Limits, LimitsError, MAX_MESSAGE_BYTES, bound_message};
pub use interpret::{PluginMap, PluginResolver, WasmRuleBackend, load_interpreter};
pub use module::{Compiled, Digest, LoadError, Tier, custom_section, sha256};
pub use plugin::{
    FuzzDecoded, FuzzRequest, MAX_SCORE, MIN_SCORE, WasmPlugin, export_for, fuzz_decode,
    fuzz_decode_victims,
};
