//! Flotilla plugin development kit for Rust.
//!
//! Implement [`Plugin`] (only the extension points you need), then export it:
//!
//! ```no_run
//! use flotilla_pdk::{FilterOut, Plugin, abi::{BindingRequest, InitRequest}};
//!
//! #[derive(serde::Deserialize)]
//! struct Cluster { metadata: Meta }
//! #[derive(serde::Deserialize)]
//! struct Meta { #[serde(default)] labels: std::collections::BTreeMap<String, String> }
//!
//! struct GpuOnly;
//!
//! impl Plugin for GpuOnly {
//!     type Cluster = Cluster;
//!     type Binding = BindingRequest;
//!     fn new(_init: InitRequest) -> Result<Self, String> { Ok(GpuOnly) }
//!     fn filter(&mut self, _b: &BindingRequest, clusters: &[&Cluster], out: &mut FilterOut) -> Result<(), String> {
//!         for c in clusters {
//!             if c.metadata.labels.contains_key("example.com/gpu") { out.fit() } else { out.unfit("cluster has no GPU") }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! flotilla_pdk::export_plugin!(GpuOnly, name = "gpu-only", version = "0.1.0", points = [filter]);
//! ```
//!
//! Build with `cargo build --release --target wasm32-unknown-unknown` (crate type `cdylib`);
//! see `sdk/ABI.md` for the toolchain. The macro generates every export of ABI v1: the version
//! marker, the allocator, `init`, the cluster-set push and the listed extension points, plus the
//! `flotilla.plugin` metadata section (name, version, capabilities; `flotilla plugin inspect`
//! shows it). A module that writes its exports by hand can still emit the section with
//! [`plugin_metadata!`]. Clusters are parsed once per cluster-set generation into
//! `Plugin::Cluster` (parse only the fields you read: unknown fields are skipped), and each call
//! hands the plugin references into that set.

pub use flotilla_abi as abi;
pub use serde_json;

use flotilla_abi::{
    AssignReply, ClustersRequest, DetailRow, FilterReply, InitRequest, InterpretReply,
    InterpretRequest, OverrideReply, OverrideRequest, SelectReply,
};
use serde::de::DeserializeOwned;

/// A plugin. Implement the extension points listed in `export_plugin!`; the others keep their
/// default ("not implemented") bodies.
pub trait Plugin: Sized + 'static {
    /// How each cluster of the pushed set is parsed (Karmada `Cluster` JSON).
    type Cluster: DeserializeOwned;
    /// How the binding part of a call is parsed, e.g. [`abi::BindingRequest`] with typed fields.
    type Binding: DeserializeOwned;

    /// Create the plugin from its name and profile config.
    ///
    /// # Errors
    /// Bad config: the plugin fails to load.
    fn new(init: InitRequest) -> Result<Self, String>;

    /// Called once per pushed cluster set (cluster-set generation), with the set in row order,
    /// before any call that uses it. Plugins that memoise per cluster reset here and can key their
    /// memo by row with a [`RowIndex`]. Default: nothing.
    fn cluster_set(&mut self, _clusters: &[Self::Cluster]) {}

    /// Filter: push exactly one verdict per cluster, in order.
    ///
    /// # Errors
    /// A plugin failure (handled by the plugin's failure policy).
    fn filter(
        &mut self,
        _binding: &Self::Binding,
        _clusters: &[&Self::Cluster],
        _out: &mut FilterOut,
    ) -> Result<(), String> {
        Err("filter not implemented".into())
    }

    /// Filter by row: `rows` are indices into `set`, the pushed cluster set in row order (each
    /// checked to be in range), one verdict per row, in order. The default looks each row's
    /// cluster up and calls [`Plugin::filter`]; a plugin that memoises per row implements this
    /// instead and indexes its memo by the row itself.
    ///
    /// # Errors
    /// A plugin failure.
    fn filter_rows(
        &mut self,
        binding: &Self::Binding,
        rows: &[u32],
        set: &[Self::Cluster],
        out: &mut FilterOut,
    ) -> Result<(), String> {
        self.filter(binding, &clusters_at(rows, set), out)
    }

    /// Score: push exactly one score per cluster, in order.
    ///
    /// # Errors
    /// A plugin failure.
    fn score(
        &mut self,
        _binding: &Self::Binding,
        _clusters: &[&Self::Cluster],
        _out: &mut Vec<i64>,
    ) -> Result<(), String> {
        Err("score not implemented".into())
    }

    /// Select: choose rows (positions in `clusters`).
    ///
    /// # Errors
    /// A plugin failure.
    fn select(
        &mut self,
        _binding: &Self::Binding,
        _clusters: &[Detail<'_, Self::Cluster>],
    ) -> Result<SelectReply, String> {
        Err("select not implemented".into())
    }

    /// Assign replicas to rows (positions in `clusters`).
    ///
    /// # Errors
    /// A plugin failure.
    fn assign(
        &mut self,
        _binding: &Self::Binding,
        _clusters: &[Detail<'_, Self::Cluster>],
    ) -> Result<AssignReply, String> {
        Err("assign not implemented".into())
    }

    /// Assign by row: `rows` are the call's decoded detail rows, each `index` into `set` (the
    /// pushed cluster set in row order, checked to be in range); the reply names positions in
    /// `rows`. The default pairs each row with its cluster and calls [`Plugin::assign`]; an
    /// assigner that reads only rows (and memoises per row) implements this instead and builds
    /// no per-cluster list.
    ///
    /// # Errors
    /// A plugin failure.
    fn assign_rows(
        &mut self,
        binding: &Self::Binding,
        rows: &[DetailRow],
        set: &[Self::Cluster],
    ) -> Result<AssignReply, String> {
        let details: Vec<Detail<'_, Self::Cluster>> = rows
            .iter()
            .filter_map(|&row| {
                set.get(row.index as usize)
                    .map(|cluster| Detail { cluster, row })
            })
            .collect();
        self.assign(binding, &details)
    }

    /// Override: JSON patch for the manifest bound to one cluster.
    ///
    /// # Errors
    /// A plugin failure.
    fn override_manifest(
        &mut self,
        _request: OverrideRequest<serde_json::Value, Self::Cluster>,
    ) -> Result<OverrideReply, String> {
        Err("override not implemented".into())
    }

    /// Resource interpreter (`flotilla_interpret_v1`, sdk/ABI.md §10): answer
    /// `request.operation` with its reply member (e.g. `replicas` for `InterpretReplica`,
    /// `healthy` for `InterpretHealth`); the host refuses any other member.
    ///
    /// # Errors
    /// A plugin failure (for example an operation the plugin does not implement).
    fn interpret(&mut self, request: InterpretRequest) -> Result<InterpretReply, String> {
        Err(format!("{} not implemented", request.operation))
    }
}

/// A feasible cluster with what the scheduler computed for it (select and assign).
#[derive(Debug)]
pub struct Detail<'a, C> {
    /// The cluster.
    pub cluster: &'a C,
    /// The decoded row (index, overflow order, score, allocatable and available replicas).
    pub row: DetailRow,
}

impl<C> Clone for Detail<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Detail<'_, C> {}

/// The clusters of `set` at `rows` (rows out of range are left out; the runtime checks them
/// before a plugin sees them).
fn clusters_at<'c, C>(rows: &[u32], set: &'c [C]) -> Vec<&'c C> {
    rows.iter().filter_map(|&r| set.get(r as usize)).collect()
}

/// Filter verdicts under construction: one byte per cluster, reasons deduplicated.
#[derive(Debug, Default)]
pub struct FilterOut {
    verdicts: Vec<u8>,
    reasons: Vec<String>,
    last: usize,
    /// Address and length of the `'static` reason behind `last`, when it was given as one.
    last_static: Option<(usize, usize)>,
}

impl FilterOut {
    /// The next cluster fits.
    #[inline]
    pub fn fit(&mut self) {
        self.verdicts.push(abi::FIT);
    }

    /// The next cluster does not fit, for `reason`.
    pub fn unfit(&mut self, reason: &str) {
        self.last_static = None;
        self.push_unfit(reason);
    }

    /// [`FilterOut::unfit`] for a reason that is a constant (`&'static str`): the same verdict, but
    /// a run of clusters rejected for the same constant costs no text comparison per cluster (a
    /// `'static` string at the same address is the same text).
    #[inline]
    pub fn unfit_static(&mut self, reason: &'static str) {
        let key = (reason.as_ptr() as usize, reason.len());
        if self.last_static == Some(key) {
            self.verdicts
                .push(u8::try_from(self.last + 1).unwrap_or(u8::MAX));
            return;
        }
        self.push_unfit(reason);
        self.last_static = Some(key);
    }

    /// One verdict per item of `fits`: fits, or does not fit for the constant `reason`. The same
    /// verdicts as [`FilterOut::fit`] and [`FilterOut::unfit_static`] one by one, in one pass
    /// with no branch per cluster (for verdicts read from a memo).
    pub fn extend(&mut self, fits: impl IntoIterator<Item = bool>, reason: &'static str) {
        let start = self.verdicts.len();
        // 1 for "does not fit" until the reason's number is known (it is 1 in a call that gave
        // no other reason before).
        self.verdicts
            .extend(fits.into_iter().map(|fit| u8::from(!fit)));
        if !self.verdicts[start..].contains(&1) {
            return;
        }
        self.unfit_static(reason);
        let code = self.verdicts.pop().unwrap_or(1);
        if code != 1 {
            for v in &mut self.verdicts[start..] {
                if *v == 1 {
                    *v = code;
                }
            }
        }
    }

    fn push_unfit(&mut self, reason: &str) {
        let k = if self.reasons.get(self.last).is_some_and(|r| r == reason) {
            self.last
        } else if let Some(k) = self.reasons.iter().position(|r| r == reason) {
            k
        } else {
            self.reasons.push(reason.to_owned());
            self.reasons.len() - 1
        };
        self.last = k;
        // More than 255 distinct reasons in one call: the rest share the last slot's text.
        self.verdicts.push(u8::try_from(k + 1).unwrap_or(u8::MAX));
    }

    /// Verdicts so far.
    pub fn len(&self) -> usize {
        self.verdicts.len()
    }

    /// No verdict yet.
    pub fn is_empty(&self) -> bool {
        self.verdicts.is_empty()
    }
}

/// Host imports. Off wasm32 they are stubs that record what they are given (for native tests).
pub mod host {
    #[cfg(target_arch = "wasm32")]
    #[link(wasm_import_module = "flotilla:host/v1")]
    unsafe extern "C" {
        #[link_name = "log"]
        fn host_log(level: i32, ptr: *const u8, len: usize);
        #[link_name = "set_result"]
        fn host_set_result(ptr: *const u8, len: usize);
        #[link_name = "set_rows"]
        fn host_set_rows(ptr: *const u8, len: usize);
    }

    #[cfg(not(target_arch = "wasm32"))]
    thread_local! {
        /// Native stand-in for the host: (result, rows, log lines) of the last call.
        pub static RECORDED: std::cell::RefCell<(Vec<u8>, Vec<u8>, Vec<String>)> = Default::default();
    }

    /// Log a line (levels in [`crate::abi::log_level`]).
    pub fn log(level: i32, message: &str) {
        #[cfg(target_arch = "wasm32")]
        // SAFETY: the pointer and length describe a live string; the host copies it.
        unsafe {
            host_log(level, message.as_ptr(), message.len())
        }
        #[cfg(not(target_arch = "wasm32"))]
        RECORDED.with_borrow_mut(|r| r.2.push(format!("{level}: {message}")));
    }

    /// Pass the call's JSON reply (or error message).
    pub fn set_result(bytes: &[u8]) {
        #[cfg(target_arch = "wasm32")]
        // SAFETY: as for `log`.
        unsafe {
            host_set_result(bytes.as_ptr(), bytes.len())
        }
        #[cfg(not(target_arch = "wasm32"))]
        RECORDED.with_borrow_mut(|r| r.0 = bytes.to_vec());
    }

    /// Pass the call's per-row binary reply.
    pub fn set_rows(bytes: &[u8]) {
        #[cfg(target_arch = "wasm32")]
        // SAFETY: as for `log`.
        unsafe {
            host_set_rows(bytes.as_ptr(), bytes.len())
        }
        #[cfg(not(target_arch = "wasm32"))]
        RECORDED.with_borrow_mut(|r| r.1 = bytes.to_vec());
    }
}

/// The runtime behind the generated exports. Not part of the stable API.
#[doc(hidden)]
pub mod rt {
    use super::*;
    use flotilla_abi::status;

    /// Block allocation for the host ([`flotilla_abi::export::ALLOC`]).
    pub fn alloc(len: usize) -> *mut u8 {
        match std::alloc::Layout::from_size_align(len.max(1), 8) {
            // SAFETY: the layout has a non-zero size.
            Ok(layout) => unsafe { std::alloc::alloc(layout) },
            Err(_) => std::ptr::null_mut(),
        }
    }

    /// Free a block from [`alloc`].
    ///
    /// # Safety
    /// `ptr` and `len` come from one [`alloc`] call.
    pub unsafe fn dealloc(ptr: *mut u8, len: usize) {
        if let Ok(layout) = std::alloc::Layout::from_size_align(len.max(1), 8) {
            // SAFETY: per the contract.
            unsafe { std::alloc::dealloc(ptr, layout) }
        }
    }

    /// View host-written input.
    ///
    /// # Safety
    /// The host wrote `len` bytes at `ptr` for this call.
    pub unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
        if len == 0 {
            return &[];
        }
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    fn fail(message: &str) -> i32 {
        host::set_result(message.as_bytes());
        status::ERROR
    }

    /// Every row index below `n` (the pushed set's size); else the error names the first one out
    /// of range.
    fn in_range(mut rows: impl Iterator<Item = u32>, n: usize) -> Result<(), String> {
        match rows.find(|&i| i as usize >= n) {
            Some(i) => Err(format!("row refers to cluster {i} of {n}")),
            None => Ok(()),
        }
    }

    fn parse<T: DeserializeOwned>(json: &[u8], what: &str) -> Result<T, String> {
        serde_json::from_slice(json).map_err(|e| format!("cannot parse {what}: {e}"))
    }

    /// Plugin state inside the instance: the plugin, the pushed cluster set, and the row buffers
    /// filter, score and assign calls reuse.
    pub struct Runtime<P: Plugin> {
        plugin: Option<P>,
        clusters: Vec<P::Cluster>,
        rows: Vec<u32>,
        detail_rows: Vec<DetailRow>,
    }

    impl<P: Plugin> Default for Runtime<P> {
        fn default() -> Self {
            Runtime {
                plugin: None,
                clusters: Vec::new(),
                rows: Vec::new(),
                detail_rows: Vec::new(),
            }
        }
    }

    impl<P: Plugin> Runtime<P> {
        fn plugin(&mut self) -> Result<&mut P, String> {
            self.plugin
                .as_mut()
                .ok_or_else(|| "plugin not initialized".to_owned())
        }

        fn run(&mut self, f: impl FnOnce(&mut Self) -> Result<(), String>) -> i32 {
            match f(self) {
                Ok(()) => status::OK,
                Err(e) => fail(&e),
            }
        }

        /// `flotilla_init_v1`.
        pub fn init(&mut self, json: &[u8]) -> i32 {
            std::panic::set_hook(Box::new(|info| {
                host::log(abi::log_level::ERROR, &info.to_string())
            }));
            self.run(|rt| {
                rt.plugin = Some(P::new(parse(json, "init request")?)?);
                Ok(())
            })
        }

        /// `flotilla_clusters_v1`.
        pub fn clusters(&mut self, json: &[u8]) -> i32 {
            self.run(|rt| {
                let req: ClustersRequest<P::Cluster> = parse(json, "cluster set")?;
                rt.clusters = req.clusters;
                if let Some(p) = rt.plugin.as_mut() {
                    p.cluster_set(&rt.clusters);
                }
                Ok(())
            })
        }

        fn details<'c>(
            set: &'c [P::Cluster],
            rows: &[u8],
            count: usize,
        ) -> Result<Vec<Detail<'c, P::Cluster>>, String> {
            let mut out = Vec::with_capacity(count);
            for c in rows.chunks_exact(DetailRow::SIZE).take(count) {
                let mut b = [0u8; DetailRow::SIZE];
                b.copy_from_slice(c);
                let row = DetailRow::from_bytes(&b);
                let cluster = set.get(row.index as usize).ok_or_else(|| {
                    format!("row refers to cluster {} of {}", row.index, set.len())
                })?;
                out.push(Detail { cluster, row });
            }
            Ok(out)
        }

        /// The request's detail rows, decoded into the reused buffer, each `index` checked to be
        /// in range of the pushed set.
        fn decode_detail_rows(&mut self, rows: &[u8], count: usize) -> Result<(), String> {
            self.detail_rows.clear();
            self.detail_rows.extend(
                rows.chunks_exact(DetailRow::SIZE)
                    .take(count)
                    .filter_map(|c| c.try_into().ok())
                    .map(DetailRow::from_bytes),
            );
            in_range(
                self.detail_rows.iter().map(|r| r.index),
                self.clusters.len(),
            )
        }

        /// The request's rows as indices into the pushed set, each checked to be in range.
        fn row_indices(&mut self, rows: &[u8], count: usize) -> Result<(), String> {
            self.rows.clear();
            self.rows.extend(
                rows.chunks_exact(abi::INDEX_ROW_SIZE)
                    .take(count)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            in_range(self.rows.iter().copied(), self.clusters.len())
        }

        /// `flotilla_filter_v1`.
        pub fn filter(&mut self, json: &[u8], rows: &[u8], count: usize) -> i32 {
            let binding: P::Binding = match parse(json, "binding") {
                Ok(b) => b,
                Err(e) => return fail(&e),
            };
            if let Err(e) = self.row_indices(rows, count) {
                return fail(&e);
            }
            let mut out = FilterOut {
                verdicts: Vec::with_capacity(count),
                ..Default::default()
            };
            let Some(plugin) = self.plugin.as_mut() else {
                return fail("plugin not initialized");
            };
            if let Err(e) = plugin.filter_rows(&binding, &self.rows, &self.clusters, &mut out) {
                return fail(&e);
            }
            if !out.reasons.is_empty() {
                let reply = FilterReply {
                    reasons: out.reasons,
                };
                host::set_result(&serde_json::to_vec(&reply).unwrap_or_default());
            }
            host::set_rows(&out.verdicts);
            status::OK
        }

        /// `flotilla_score_v1`.
        pub fn score(&mut self, json: &[u8], rows: &[u8], count: usize) -> i32 {
            let binding: P::Binding = match parse(json, "binding") {
                Ok(b) => b,
                Err(e) => return fail(&e),
            };
            if let Err(e) = self.row_indices(rows, count) {
                return fail(&e);
            }
            let clusters = super::clusters_at(&self.rows, &self.clusters);
            let mut out = Vec::with_capacity(count);
            let Some(plugin) = self.plugin.as_mut() else {
                return fail("plugin not initialized");
            };
            if let Err(e) = plugin.score(&binding, &clusters, &mut out) {
                return fail(&e);
            }
            let bytes: Vec<u8> = out.iter().flat_map(|s| s.to_le_bytes()).collect();
            host::set_rows(&bytes);
            status::OK
        }

        /// `flotilla_select_v1`.
        pub fn select(&mut self, json: &[u8], rows: &[u8], count: usize) -> i32 {
            let binding: P::Binding = match parse(json, "binding") {
                Ok(b) => b,
                Err(e) => return fail(&e),
            };
            let Some(mut plugin) = self.plugin.take() else {
                return fail("plugin not initialized");
            };
            let result = Self::details(&self.clusters, rows, count)
                .and_then(|d| plugin.select(&binding, &d));
            self.plugin = Some(plugin);
            match result {
                Ok(reply) => {
                    host::set_result(&serde_json::to_vec(&reply).unwrap_or_default());
                    status::OK
                }
                Err(e) => fail(&e),
            }
        }

        /// `flotilla_assign_v1`.
        pub fn assign(&mut self, json: &[u8], rows: &[u8], count: usize) -> i32 {
            let binding: P::Binding = match parse(json, "binding") {
                Ok(b) => b,
                Err(e) => return fail(&e),
            };
            if let Err(e) = self.decode_detail_rows(rows, count) {
                return fail(&e);
            }
            let Some(plugin) = self.plugin.as_mut() else {
                return fail("plugin not initialized");
            };
            match plugin.assign_rows(&binding, &self.detail_rows, &self.clusters) {
                // The binary form (sdk/ABI.md §8): no JSON to write here or to parse in the host.
                Ok(AssignReply::Assigned(pairs)) => {
                    let mut bytes = Vec::with_capacity(pairs.len() * abi::ASSIGN_ROW_SIZE);
                    for (row, replicas) in pairs {
                        bytes.extend_from_slice(&row.to_le_bytes());
                        bytes.extend_from_slice(&replicas.to_le_bytes());
                    }
                    host::set_rows(&bytes);
                    status::OK
                }
                Ok(reply) => {
                    host::set_result(&serde_json::to_vec(&reply).unwrap_or_default());
                    status::OK
                }
                Err(e) => fail(&e),
            }
        }

        /// `flotilla_override_v1`.
        pub fn override_manifest(&mut self, json: &[u8]) -> i32 {
            self.run(|rt| {
                let req = parse(json, "override request")?;
                let reply = rt.plugin()?.override_manifest(req)?;
                host::set_result(&serde_json::to_vec(&reply).map_err(|e| e.to_string())?);
                Ok(())
            })
        }

        /// `flotilla_interpret_v1`.
        pub fn interpret(&mut self, json: &[u8]) -> i32 {
            self.run(|rt| {
                let req = parse(json, "interpret request")?;
                let reply = rt.plugin()?.interpret(req)?;
                host::set_result(&serde_json::to_vec(&reply).map_err(|e| e.to_string())?);
                Ok(())
            })
        }
    }

    /// Metadata JSON bytes as a fixed-size array (for the custom section).
    pub const fn metadata<const N: usize>(s: &str) -> [u8; N] {
        let b = s.as_bytes();
        let mut out = [0u8; N];
        let mut i = 0;
        while i < N {
            out[i] = b[i];
            i += 1;
        }
        out
    }
}

/// Emit the optional `flotilla.plugin` custom section (sdk/ABI.md §1): the metadata JSON
/// `{"abi":1,"name":…,"version":…,"capabilities":[…]}` that `flotilla plugin inspect` prints and
/// the host checks at load (a module declaring another ABI is refused).
///
/// [`export_plugin!`] calls it for you; use it directly only in a module whose exports you write
/// by hand. Capabilities are the extension points (`filter`, `score`, `select`, `assign`,
/// `override`) and imports (`log`, `wasi`) the module uses; `version` defaults to the crate's
/// `CARGO_PKG_VERSION`.
///
/// ```
/// flotilla_pdk::plugin_metadata!(name = "gpu-score", version = "0.3.0", capabilities = ["score", "log"]);
/// ```
#[macro_export]
macro_rules! plugin_metadata {
    (name = $name:literal, capabilities = [$($cap:literal),* $(,)?] $(,)?) => {
        $crate::plugin_metadata!(name = $name, version = env!("CARGO_PKG_VERSION"), capabilities = [$($cap),*]);
    };
    (name = $name:literal, version = $version:expr, capabilities = [$($cap:literal),* $(,)?] $(,)?) => {
        const _: () = {
            const META: &str = $crate::__metadata_json!($name, $version, [$($cap),*]);
            #[used]
            #[unsafe(link_section = "flotilla.plugin")]
            static FLOTILLA_PLUGIN_METADATA: [u8; META.len()] = $crate::rt::metadata::<{ META.len() }>(META);
        };
    };
}

/// The metadata JSON as a string literal (used by [`plugin_metadata!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __metadata_json {
    ($name:literal, $version:expr, []) => {
        concat!("{\"abi\":1,\"name\":\"", $name, "\",\"version\":\"", $version, "\",\"capabilities\":[]}")
    };
    ($name:literal, $version:expr, [$first:literal $(, $cap:literal)*]) => {
        concat!(
            "{\"abi\":1,\"name\":\"", $name, "\",\"version\":\"", $version, "\",\"capabilities\":[\"", $first, "\""
            $(, ",\"", $cap, "\"")* , "]}"
        )
    };
}

/// The capability name of an extension point of [`export_plugin!`] (used by the macro).
#[doc(hidden)]
#[macro_export]
macro_rules! __capability {
    (filter) => {
        "filter"
    };
    (score) => {
        "score"
    };
    (select) => {
        "select"
    };
    (assign) => {
        "assign"
    };
    (override_manifest) => {
        "override"
    };
    (interpret) => {
        "interpret"
    };
}

/// Export `$ty` (a [`Plugin`]) as an ABI v1 module implementing `points` (any of `filter`,
/// `score`, `select`, `assign`, `override_manifest`, `interpret`), with the `flotilla.plugin` metadata section
/// ([`plugin_metadata!`]; capabilities: the points plus `log`). `version` is optional (default: the
/// crate's `CARGO_PKG_VERSION`). An assigner may add `strategies = ["StaticWeight", ...]`: the
/// division strategies it handles, so that the host answers `skip` for the others without a call
/// (sdk/ABI.md §1). Any plugin may then add `binding = ["replicas", ...]`: the members of the
/// binding spec its `Binding` type reads, so that the host sends only those (a binding's
/// `clusters` may list hundreds of targets the plugin would otherwise skip); list every member
/// the plugin reads, since the others arrive absent.
#[macro_export]
macro_rules! export_plugin {
    ($ty:ty, name = $name:literal, points = [$($point:ident),+ $(,)?] $(, strategies = [$first:literal $(, $strategy:literal)* $(,)?])? $(, binding = [$bfirst:literal $(, $bfield:literal)* $(,)?])? $(,)?) => {
        $crate::export_plugin!($ty, name = $name, version = env!("CARGO_PKG_VERSION"), points = [$($point),+] $(, strategies = [$first $(, $strategy)*])? $(, binding = [$bfirst $(, $bfield)*])?);
    };
    ($ty:ty, name = $name:literal, version = $version:expr, points = [$($point:ident),+ $(,)?] $(, strategies = [$first:literal $(, $strategy:literal)* $(,)?])? $(, binding = [$bfirst:literal $(, $bfield:literal)* $(,)?])? $(,)?) => {
        const _: () = {
            ::std::thread_local! {
                static RUNTIME: ::std::cell::RefCell<$crate::rt::Runtime<$ty>> = ::std::cell::RefCell::new(::std::default::Default::default());
            }

            const META: &str = concat!(
                "{\"abi\":1,\"name\":\"", $name, "\",\"version\":\"", $version, "\",\"capabilities\":[",
                $( "\"", $crate::__capability!($point), "\",", )+ "\"log\"]",
                $( ",\"strategies\":[\"", $first, "\"" $(, ",\"", $strategy, "\"")*, "]", )?
                $( ",\"bindingFields\":[\"", $bfirst, "\"" $(, ",\"", $bfield, "\"")*, "]", )?
                "}"
            );
            #[used]
            #[unsafe(link_section = "flotilla.plugin")]
            static METADATA: [u8; META.len()] = $crate::rt::metadata::<{ META.len() }>(META);

            #[unsafe(no_mangle)]
            pub extern "C" fn flotilla_abi_version() -> i32 {
                $crate::abi::ABI_VERSION as i32
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn flotilla_alloc(len: usize) -> *mut u8 {
                $crate::rt::alloc(len)
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn flotilla_dealloc(ptr: *mut u8, len: usize) {
                // SAFETY: the host frees only what it allocated, with the same length.
                unsafe { $crate::rt::dealloc(ptr, len) }
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn flotilla_init_v1(ptr: *const u8, len: usize) -> i32 {
                // SAFETY: the host wrote the request there for this call.
                let json = unsafe { $crate::rt::bytes(ptr, len) };
                RUNTIME.with_borrow_mut(|rt| rt.init(json))
            }

            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn flotilla_clusters_v1(ptr: *const u8, len: usize) -> i32 {
                // SAFETY: as above.
                let json = unsafe { $crate::rt::bytes(ptr, len) };
                RUNTIME.with_borrow_mut(|rt| rt.clusters(json))
            }

            $( $crate::__export_point!($point, RUNTIME); )+
        };
    };
}

/// One extension-point export (used by [`export_plugin!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_point {
    (filter, $rt:ident) => { $crate::__export_point!(@rows flotilla_filter_v1, filter, $rt); };
    (score, $rt:ident) => { $crate::__export_point!(@rows flotilla_score_v1, score, $rt); };
    (select, $rt:ident) => { $crate::__export_point!(@details flotilla_select_v1, select, $rt, $crate::abi::DetailRow::SIZE); };
    (assign, $rt:ident) => { $crate::__export_point!(@details flotilla_assign_v1, assign, $rt, $crate::abi::DetailRow::SIZE); };
    (interpret, $rt:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn flotilla_interpret_v1(ptr: *const u8, len: usize, _rows: *const u8, _count: usize) -> i32 {
            // SAFETY: as above.
            let json = unsafe { $crate::rt::bytes(ptr, len) };
            $rt.with_borrow_mut(|rt| rt.interpret(json))
        }
    };
    (override_manifest, $rt:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn flotilla_override_v1(ptr: *const u8, len: usize, _rows: *const u8, _count: usize) -> i32 {
            // SAFETY: as above.
            let json = unsafe { $crate::rt::bytes(ptr, len) };
            $rt.with_borrow_mut(|rt| rt.override_manifest(json))
        }
    };
    (@rows $export:ident, $method:ident, $rt:ident) => {
        $crate::__export_point!(@details $export, $method, $rt, $crate::abi::INDEX_ROW_SIZE);
    };
    (@details $export:ident, $method:ident, $rt:ident, $size:expr) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $export(ptr: *const u8, len: usize, rows: *const u8, count: usize) -> i32 {
            // SAFETY: the host wrote `len` JSON bytes and `count` rows of `$size` bytes.
            let (json, rows) = unsafe { ($crate::rt::bytes(ptr, len), $crate::rt::bytes(rows, count * $size)) };
            $rt.with_borrow_mut(|rt| rt.$method(json, rows, count))
        }
    };
}

#[cfg(test)]
mod tests {
    use flotilla_abi::Metadata;

    #[test]
    fn keyed_memo_makes_each_entry_once_and_starts_over_when_full() {
        let mut memo = crate::KeyedMemo::new(2);
        let mut made = Vec::new();
        for key in ["a", "b", "a", "b", "c", "a"] {
            let v = memo.get_or_try_insert(key, || {
                made.push(key);
                Ok::<_, ()>(key.len())
            });
            assert_eq!(*v.unwrap(), 1);
        }
        // "c" found the memo full and cleared it, so "a" was made again.
        assert_eq!(made, ["a", "b", "c", "a"]);
        assert_eq!(memo.len(), 2);
        assert_eq!(memo.get_or_try_insert("bad", || Err("no")), Err("no"));
        assert_eq!(memo.len(), 2, "a failed make inserts nothing");
        // Raw JSON text as the key, parsed only when missing.
        let raw: crate::Raw = serde_json::from_str(r#"{"x": [1, 2]}"#).unwrap();
        let v = memo.get_or_try_insert(raw.get(), || {
            serde_json::from_str::<serde_json::Value>(raw.get())
                .map(|v| v["x"][1].as_u64().unwrap() as usize)
        });
        assert_eq!(*v.unwrap(), 2);
    }

    #[test]
    fn word_hasher_tells_keys_apart_by_every_byte_and_length() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h = |s: &str| BuildHasherDefault::<crate::WordHasher>::default().hash_one(s);
        let keys = [
            "",
            "a",
            "a\0",
            "abcdefgh",
            "abcdefgi",
            "abcdefgh\0",
            "abcdefghabcdefgh",
            "bbcdefghabcdefgh",
        ];
        let hashes: std::collections::HashSet<u64> = keys.iter().map(|k| h(k)).collect();
        assert_eq!(hashes.len(), keys.len());
    }

    plugin_metadata!(name = "doc-example", capabilities = ["filter"]);

    #[test]
    fn metadata_json_is_valid_and_complete() {
        let m: Metadata = serde_json::from_str(crate::__metadata_json!(
            "gpu-score",
            "0.3.0",
            ["score", "log"]
        ))
        .unwrap();
        assert_eq!(
            (m.abi, m.name.as_str(), m.version.as_str()),
            (1, "gpu-score", "0.3.0")
        );
        assert_eq!(m.capabilities, ["score", "log"]);
        let m: Metadata =
            serde_json::from_str(crate::__metadata_json!("x", env!("CARGO_PKG_VERSION"), []))
                .unwrap();
        assert_eq!(m.version, env!("CARGO_PKG_VERSION"));
        assert!(m.capabilities.is_empty());
    }

    #[test]
    fn filter_out_numbers_reasons_by_text_whichever_way_they_come() {
        const A: &str = "cluster(s) did not match the placement cluster affinity constraint";
        let mut out = crate::FilterOut::default();
        let b = String::from("taint");
        out.unfit_static(A);
        out.unfit_static(A);
        out.fit();
        out.unfit(&b);
        out.unfit_static(A);
        out.unfit(A);
        out.unfit(&String::from(A));
        out.unfit_static(A);
        out.unfit(&b);
        out.unfit_static("taint");
        assert_eq!(out.verdicts, [1, 1, 0, 2, 1, 1, 1, 1, 2, 2]);
        assert_eq!(out.reasons, [A, "taint"]);
    }

    #[test]
    fn filter_out_extend_gives_the_verdicts_one_by_one_would() {
        const A: &str = "cluster(s) did not match the placement cluster affinity constraint";
        let fits = [true, false, false, true, false];
        let one_by_one = |before: Option<&str>| {
            let mut out = crate::FilterOut::default();
            if let Some(b) = before {
                out.unfit(b);
            }
            for fit in fits {
                if fit { out.fit() } else { out.unfit_static(A) }
            }
            out
        };
        for before in [None, Some("taint"), Some(A)] {
            let mut out = crate::FilterOut::default();
            if let Some(b) = before {
                out.unfit(b);
            }
            out.extend(fits, A);
            let want = one_by_one(before);
            assert_eq!(
                (&out.verdicts, &out.reasons),
                (&want.verdicts, &want.reasons),
                "after {before:?}"
            );
        }
        let mut all_fit = crate::FilterOut::default();
        all_fit.extend([true, true], A);
        assert_eq!(all_fit.verdicts, [0, 0]);
        assert!(
            all_fit.reasons.is_empty(),
            "no reason when every cluster fits"
        );
    }

    #[test]
    fn row_index_finds_exactly_the_set_elements() {
        fn check<C: Default + Clone>() {
            let set = vec![C::default(); 37];
            let rows = crate::RowIndex::new(&set);
            for (i, c) in set.iter().enumerate() {
                assert_eq!(rows.row(c), Some(i));
            }
            let other = C::default();
            assert_eq!(rows.row(&other), None);
            let base = set.as_ptr() as usize;
            let size = std::mem::size_of::<C>();
            for off in 0..(set.len() + 2) * size {
                let want = (off % size == 0 && off / size < set.len()).then(|| off / size);
                assert_eq!(rows.row_at(base + off), want, "offset {off} of size {size}");
            }
            assert_eq!(rows.row_at(base.wrapping_sub(size)), None);
        }
        check::<u8>();
        check::<u32>();
        check::<[u8; 3]>();
        check::<[u8; 24]>();
        check::<[u64; 5]>();
        check::<(u32, [u8; 9])>();
    }

    #[test]
    fn extension_points_map_to_the_documented_capability_names() {
        let names = [
            crate::__capability!(filter),
            crate::__capability!(score),
            crate::__capability!(select),
            crate::__capability!(assign),
            crate::__capability!(override_manifest),
        ];
        assert_eq!(names, ["filter", "score", "select", "assign", "override"]);
    }
}

/// Word-at-a-time `memcmp`/`bcmp` for Wasm guests. The Rust std for wasm32 links
/// compiler-builtins' byte-by-byte loops, and every string comparison (label lookups in a
/// `BTreeMap`, selector values, cluster names) goes through them: at 1,000 clusters they were a
/// fifth of a whole scheduling cycle with the Wasm built-ins. Equal words are skipped as they are
/// loaded (Wasm is little-endian); only the first differing word is byte-swapped, so that comparing
/// it as a big-endian number keeps the lexicographic result. `bcmp` (equality only) never swaps.
#[cfg(any(target_arch = "wasm32", test))]
mod mem {
    #[inline(always)]
    unsafe fn word(p: *const u8) -> u64 {
        // SAFETY: the caller guarantees 8 readable bytes at `p`.
        unsafe { core::ptr::read_unaligned(p.cast::<u64>()) }
    }

    /// Index of the first 8-byte block that differs (`n` rounded down to 8 when none does).
    #[inline(always)]
    unsafe fn first_diff_word(a: *const u8, b: *const u8, n: usize) -> usize {
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: i + 8 <= n.
            if unsafe { word(a.add(i)) != word(b.add(i)) } {
                return i;
            }
            i += 8;
        }
        i
    }

    /// # Safety
    /// `a` and `b` point to at least `n` readable bytes.
    #[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
    pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: forwarded.
        let mut i = unsafe { first_diff_word(a, b, n) };
        if i < n && n >= 8 {
            // The first differing word, or the last 8 bytes: they overlap bytes already found
            // equal, which does not change the order.
            let at = i.min(n - 8);
            // SAFETY: at + 8 <= n.
            let (x, y) = unsafe { (word(a.add(at)).swap_bytes(), word(b.add(at)).swap_bytes()) };
            return match x.cmp(&y) {
                core::cmp::Ordering::Less => -1,
                core::cmp::Ordering::Equal => 0,
                core::cmp::Ordering::Greater => 1,
            };
        }
        while i < n {
            // SAFETY: i < n.
            let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
            if x != y {
                return i32::from(x) - i32::from(y);
            }
            i += 1;
        }
        0
    }

    /// # Safety
    /// As [`memcmp`].
    #[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: forwarded.
        let mut i = unsafe { first_diff_word(a, b, n) };
        if i < n && n >= 8 {
            // SAFETY: as in `memcmp`.
            return i32::from(unsafe { word(a.add(i.min(n - 8))) != word(b.add(i.min(n - 8))) });
        }
        while i < n {
            // SAFETY: i < n.
            if unsafe { *a.add(i) != *b.add(i) } {
                return 1;
            }
            i += 1;
        }
        0
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn orders_like_slices() {
            let words = [
                "",
                "a",
                "b",
                "ab",
                "member-0001",
                "member-0002",
                "member-0010",
                "member-00010",
                "region",
                "regions",
                "eu-west",
                "eu-west\u{0}",
                "\u{ff}abcdefgh",
                "abcdefgh\u{ff}",
                "abcdefghabcdefgh",
                "abcdefghabcdefgi",
                "abcdefgiabcdefgh",
                "zzzzzzzzzzzzzzzzz",
                "zzzzzzzzzzzzzzzzy",
            ];
            for a in words {
                for b in words {
                    let n = a.len().min(b.len());
                    let (x, y) = (&a.as_bytes()[..n], &b.as_bytes()[..n]);
                    // SAFETY: both have n bytes.
                    let (c, e) = unsafe {
                        (
                            super::memcmp(x.as_ptr(), y.as_ptr(), n),
                            super::bcmp(x.as_ptr(), y.as_ptr(), n),
                        )
                    };
                    assert_eq!(c.signum(), x.cmp(y) as i32, "memcmp({a:?}, {b:?}, {n})");
                    assert_eq!(e != 0, x != y, "bcmp({a:?}, {b:?}, {n})");
                }
            }
        }
    }
}

/// A part of a call's JSON kept as text instead of parsed, e.g. a placement field a plugin
/// memoises on: take it as a `Raw` field of [`Plugin::Binding`], look its text up in a
/// [`KeyedMemo`], and parse it (`serde_json::from_str(raw.get())`) only on a miss. Skipping the
/// text costs about what skipping an unread field does.
pub type Raw = Box<serde_json::value::RawValue>;

/// A memo keyed by text (typically [`Raw`] JSON), with at most `limit` entries (it starts over
/// when full). Lookups by `&str` allocate nothing; keys hash eight bytes at a time (the standard
/// hasher is several times slower on long keys in Wasm). Reset it in [`Plugin::cluster_set`] when
/// entries hold per-cluster results.
#[derive(Debug)]
pub struct KeyedMemo<V> {
    map: std::collections::HashMap<Box<str>, V, std::hash::BuildHasherDefault<WordHasher>>,
    limit: usize,
}

impl<V> KeyedMemo<V> {
    /// An empty memo of at most `limit` entries (at least 1).
    pub fn new(limit: usize) -> Self {
        KeyedMemo {
            map: Default::default(),
            limit: limit.max(1),
        }
    }

    /// Forget every entry.
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the memo is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The entry for `key`, made by `make` when absent (an error inserts nothing).
    ///
    /// # Errors
    /// `make`'s.
    pub fn get_or_try_insert<E>(
        &mut self,
        key: &str,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<&mut V, E> {
        // Two lookups on a miss keep a hit free of allocation (`entry` needs an owned key).
        if !self.map.contains_key(key) {
            let value = make()?;
            if self.map.len() >= self.limit {
                self.map.clear();
            }
            self.map.insert(key.into(), value);
        }
        Ok(self.map.get_mut(key).expect("present: inserted above"))
    }
}

/// Hashes eight bytes per multiply ([`KeyedMemo`]'s keys; not for untrusted collision resistance,
/// which a plugin's own memo does not need).
#[derive(Debug, Default, Clone, Copy)]
pub struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // A multiply mixes upwards only: bring the well-mixed high bits down to the low ones,
        // which pick the bucket.
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.0 =
            (self.0.rotate_left(5) ^ u64::from_le_bytes(tail) ^ bytes.len() as u64).wrapping_mul(K);
    }
}

/// The row of a cluster reference in the current cluster set, for plugins that memoise per
/// cluster-set generation: record it in [`Plugin::cluster_set`], then `row(c)` maps each
/// `&Cluster` a call receives to its row.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowIndex {
    base: usize,
    len: usize,
    size: usize,
    /// `size = odd << shift`; `inverse * odd == 1` (mod 2^usize::BITS): a row is found with a
    /// multiplication instead of a division (a hardware divide per cluster and call adds up).
    shift: u32,
    inverse: usize,
}

impl RowIndex {
    /// The index of `set`.
    pub fn new<C>(set: &[C]) -> Self {
        let size = std::mem::size_of::<C>().max(1);
        let shift = size.trailing_zeros();
        let odd = size >> shift;
        // Newton's iteration doubles the correct low bits of an odd number's inverse each step
        // (an odd number is its own inverse mod 8): 3 -> 6 -> 12 -> 24 -> 48 -> 96 bits.
        let mut inverse = odd;
        for _ in 0..5 {
            inverse = inverse.wrapping_mul(2usize.wrapping_sub(odd.wrapping_mul(inverse)));
        }
        RowIndex {
            base: set.as_ptr() as usize,
            len: set.len(),
            size,
            shift,
            inverse,
        }
    }

    /// Rows in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The row of `c`, `None` when it is not an element of the indexed set.
    #[inline]
    pub fn row<C>(&self, c: &C) -> Option<usize> {
        self.row_at(c as *const C as usize)
    }

    #[inline]
    fn row_at(&self, addr: usize) -> Option<usize> {
        let off = addr.checked_sub(self.base)?;
        // Exact for multiples of `size`; for anything else `row * size` cannot equal `off` with
        // `row < len` (the set's `len * size` bytes fit in the address space).
        let row = (off >> self.shift).wrapping_mul(self.inverse);
        (row < self.len && row * self.size == off).then_some(row)
    }
}
