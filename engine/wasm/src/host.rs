//! The process-wide host: one wasmtime `Engine` (Cranelift, pooling allocator, epoch interruption)
//! with one ticker thread, the `Linker` with the host imports, the module cache keyed by sha256,
//! and the serialized cluster snapshot shared by every plugin.
//!
//! Tiering ([`Host::compile_tiered`]): a second engine with wasmtime's baseline compiler (Winch),
//! configured like the first (epoch interruption, the same host imports, its own bounded pool of
//! instance slots), compiles a module that is not in the compiled cache several times faster
//! than Cranelift; it serves until Cranelift, in the background, has compiled the module and
//! written it to the cache, then plugins switch to the optimized code at their next call. The
//! optimized engine keeps Cranelift's incremental cache (`crate::incremental`): a new version of
//! a module whose functions it compiled before gets its optimized code in a fraction of a full
//! compile.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use flotilla_api::cluster::Cluster;
use flotilla_core::framework::ClusterSnapshot;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, Linker, Module, PoolingAllocationConfig, Strategy,
};

use crate::incremental::{Incremental, IncrementalStats};
use crate::instance::State;
use crate::module::{Compiled, Digest, LoadError, OptimizedSlot, Source, Tier};

/// Epoch tick period: call deadlines are rounded up to it.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Largest linear memory any plugin may get (per-plugin caps are lower, via the limiter).
pub const MAX_MEMORY_BYTES: usize = 1 << 30;

/// Concurrent instances (warm and in use) across all plugins.
const POOL_SLOTS: u32 = 512;

/// Concurrent instances of baseline-compiled modules (a second pool of the baseline engine,
/// bounded on its own: such modules serve only until their optimized code is ready).
pub const BASELINE_POOL_SLOTS: u32 = 128;

/// Modules whose optimized compile may be queued at once; beyond, a new module is compiled
/// optimized right away (no baseline tier), so a burst of versions cannot queue unbounded work.
const MAX_PENDING_OPTIMIZATIONS: usize = 4;

static HOST: OnceLock<Result<Host, String>> = OnceLock::new();

/// The Wasm host. Get it with [`Host::global`].
pub struct Host {
    engine: Engine,
    pub(crate) linker: Linker<State>,
    /// The baseline (Winch) engine and its linker; `None` when it could not be created.
    baseline: Option<(Engine, Linker<State>)>,
    modules: Mutex<HashMap<Digest, Weak<Compiled>>>,
    snapshots: Mutex<Vec<Arc<Snapshot>>>,
    tiering: TieringCounters,
    /// One optimized compile at a time (each is parallel already).
    optimizer: Mutex<()>,
    /// Cranelift's per-function cache (the optimized engine's).
    incremental: Arc<Incremental>,
    /// Modules [`Host::compile_tiered`] is compiling now: [`Host::precompile`] leaves them be.
    compiling: Mutex<Vec<Digest>>,
}

#[derive(Default)]
struct TieringCounters {
    baseline_compiles: AtomicU64,
    precompiled: AtomicU64,
    baseline_unsupported: AtomicU64,
    optimized: AtomicU64,
    optimize_failures: AtomicU64,
    pending: AtomicUsize,
}

/// What the tiered compiler did ([`Host::tiering`]), for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TieringStats {
    /// Modules compiled with the baseline compiler to serve at once.
    pub baseline_compiles: u64,
    /// Modules compiled ahead into a cache ([`Host::precompile`]).
    pub precompiled: u64,
    /// Modules the baseline compiler could not compile (compiled optimized only).
    pub baseline_unsupported: u64,
    /// Baseline modules whose optimized code became ready.
    pub optimized: u64,
    /// Baseline modules whose optimized compile failed (they keep the baseline code).
    pub optimize_failures: u64,
    /// Loaded modules served by baseline code now (their optimized code not ready yet).
    pub serving_baseline: usize,
    /// Optimized compiles queued or running.
    pub pending: usize,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

impl Host {
    /// The process-wide host, created (with its epoch ticker thread) on first use.
    ///
    /// # Errors
    /// The engine could not be created (e.g. the pooling allocator could not reserve memory).
    pub fn global() -> Result<&'static Host, LoadError> {
        HOST.get_or_init(|| Host::create().map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|message| LoadError::Engine {
                message: message.clone(),
            })
    }

    /// The process-wide host if it was created (no engine is created here).
    pub fn existing() -> Option<&'static Host> {
        HOST.get().and_then(|h| h.as_ref().ok())
    }

    fn create() -> wasmtime::Result<Host> {
        let incremental = Arc::new(Incremental::new(crate::incremental::MAX_BYTES));
        let engine = Self::new_engine(
            Strategy::Cranelift,
            POOL_SLOTS,
            Some(Arc::clone(&incremental)),
        )?;
        let mut linker = Linker::new(&engine);
        crate::instance::define_host(&mut linker)?;
        crate::wasi::define(&mut linker)?;
        let baseline = match Self::new_engine(Strategy::Winch, BASELINE_POOL_SLOTS, None).and_then(
            |e| {
                let mut linker = Linker::new(&e);
                crate::instance::define_host(&mut linker)?;
                crate::wasi::define(&mut linker)?;
                Ok((e, linker))
            },
        ) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::info!(error = %format!("{e:#}"), "no baseline compiler; every module is compiled optimized before it serves");
                None
            }
        };
        let ticker = (engine.weak(), baseline.as_ref().map(|(e, _)| e.weak()));
        std::thread::Builder::new()
            .name("flotilla-wasm-epoch".into())
            .spawn(move || {
                while let Some(engine) = ticker.0.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    if let Some(b) = ticker.1.as_ref().and_then(wasmtime::EngineWeak::upgrade) {
                        b.increment_epoch();
                    }
                    std::thread::sleep(TICK);
                }
            })
            .map_err(wasmtime::Error::new)?;
        Ok(Host {
            engine,
            linker,
            baseline,
            modules: Mutex::new(HashMap::new()),
            snapshots: Mutex::new(Vec::new()),
            tiering: TieringCounters::default(),
            optimizer: Mutex::new(()),
            incremental,
            compiling: Mutex::new(Vec::new()),
        })
    }

    /// An engine compiling with `strategy`: epoch interruption, a pooling allocator of `slots`
    /// instances (each memory at most [`MAX_MEMORY_BYTES`]), Cranelift's incremental cache in
    /// `incremental` when given.
    fn new_engine(
        strategy: Strategy,
        slots: u32,
        incremental: Option<Arc<Incremental>>,
    ) -> wasmtime::Result<Engine> {
        let mut config = Config::new();
        config.strategy(strategy);
        if let Some(store) = incremental {
            config.enable_incremental_compilation(store)?;
        }
        config.epoch_interruption(true);
        // Not `compiler_inlining(Inlining::Yes)` (Cranelift only): about 10 % faster guests in the
        // cycle bench, but 2.5x the compile time (a 500 KB guest 0.4 -> 1.0 s). A hot swap waits
        // for the baseline compile or an incremental one, but a full one decides how long a new
        // module runs the slower baseline code and takes the CPU meanwhile (a 5.7 MB Go module:
        // 3-6 s on 2 busy cores, BENCHMARKS.md "Hot swap of a 5.7 MB Go plugin").
        // `FLOTILLA_WASM_PERFMAP=1`: write /tmp/perf-<pid>.map so `perf report` names guest functions.
        if std::env::var_os("FLOTILLA_WASM_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let mut pool = PoolingAllocationConfig::default();
        pool.total_core_instances(slots)
            .total_memories(slots)
            .total_tables(slots)
            .max_memory_size(MAX_MEMORY_BYTES);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        Engine::new(&config)
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compile and validate a module (`.wasm` bytes or WAT text), once per sha256: a module
    /// already loaded by any plugin is shared.
    ///
    /// # Errors
    /// Compilation, an unknown import, a missing export or bad metadata.
    pub fn compile(&self, bytes: &[u8]) -> Result<Arc<Compiled>, LoadError> {
        self.compile_cached(bytes, None)
    }

    /// [`Host::compile`], keeping the machine code in `cache` when given: a module compiled
    /// before (same digest, same engine configuration and wasmtime version) is loaded from
    /// `<cache>/<digest>-<engine>.cwasm` instead of compiled. The directory must be private: it
    /// is created 0700 and a file is used only when it is a regular file, 0600, owned by this
    /// process's user; an unusable or incompatible file is compiled again and replaced. Cache
    /// write failures only cost the next start a compile.
    ///
    /// # Errors
    /// As [`Host::compile`].
    pub fn compile_cached(
        &self,
        bytes: &[u8],
        cache: Option<&std::path::Path>,
    ) -> Result<Arc<Compiled>, LoadError> {
        let digest = crate::module::sha256(bytes);
        // A module loaded tiered is shared once its optimized code is ready; before, this
        // compiles it optimized itself.
        if let Some(m) = self.loaded(digest).filter(|m| m.tier() == Tier::Optimized) {
            return Ok(m);
        }
        let compiled = Compiled::load(self, digest, bytes, cache)?;
        Ok(self.remember(compiled))
    }

    /// [`Host::compile_cached`], tiered: a module whose optimized code is in `cache` is loaded
    /// from there; one that is not is compiled with the baseline compiler (Winch) and served
    /// at once ([`Tier::Baseline`]) while Cranelift compiles it in the background and writes it
    /// to `cache`; plugins then switch to the optimized code at their next call
    /// ([`Compiled::optimized`]) and the baseline code is dropped with its last instance. A
    /// module the baseline compiler cannot compile (a Wasm feature it lacks), or any module
    /// while [`MAX_PENDING_OPTIMIZATIONS`] are queued, is compiled optimized before it serves.
    ///
    /// # Errors
    /// As [`Host::compile`].
    pub fn compile_tiered(
        &'static self,
        bytes: &[u8],
        cache: &Path,
    ) -> Result<Arc<Compiled>, LoadError> {
        let digest = crate::module::sha256(bytes);
        if let Some(m) = self.loaded(digest) {
            return Ok(m);
        }
        let source = Source::parse(bytes)?;
        let compile_error = |_| LoadError::Compile { size: bytes.len() };
        let _compiling = Compiling::start(self, digest);
        if let Some(module) = crate::cache::load(&self.engine, cache, digest) {
            let compiled =
                Compiled::link(&self.linker, digest, &source, module, Tier::Optimized, None)?;
            return Ok(self.remember(compiled));
        }
        // Not `optimized at once` for a module most of whose functions are in the incremental
        // cache: measured on the 5.7 MB Go plugin, that compile (0.7-0.9 s live) is not faster
        // than the baseline one (0.5-0.7 s), and the background compile after it is the
        // incremental one (BENCHMARKS.md "Hot swap of a 5.7 MB Go plugin").
        if let Some(compiled) = self.compile_baseline(digest, &source, cache)? {
            return Ok(compiled);
        }
        let module = self
            .compile_optimized_into(cache, digest, &source.wasm)
            .map_err(compile_error)?;
        let compiled =
            Compiled::link(&self.linker, digest, &source, module, Tier::Optimized, None)?;
        Ok(self.remember(compiled))
    }

    /// Compile `bytes` optimized into `cache` ahead of use (a module file that no plugin loads
    /// yet), so a later [`Host::compile_tiered`] loads it from there. Returns `false` without
    /// compiling when the module is loaded or its optimized code is in `cache` already. Runs
    /// after (and blocks) any optimized compile in the background: one at a time.
    ///
    /// # Errors
    /// Not a module, bad metadata, or Cranelift rejected it.
    pub fn precompile(&self, bytes: &[u8], cache: &Path) -> Result<bool, LoadError> {
        let digest = crate::module::sha256(bytes);
        let done = || {
            self.loaded(digest).is_some()
                || crate::cache::path(&self.engine, cache, digest).exists()
                || self
                    .compiling
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&digest)
        };
        if done() {
            return Ok(false);
        }
        let source = Source::parse(bytes)?;
        let _lane = self.optimizer.lock().unwrap_or_else(|e| e.into_inner());
        if done() {
            return Ok(false);
        }
        let started = Instant::now();
        self.compile_optimized_into(cache, digest, &source.wasm)
            .map_err(|_| LoadError::Compile { size: bytes.len() })?;
        self.tiering.precompiled.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%digest, size = source.wasm.len(), elapsed = ?started.elapsed(), "module compiled ahead into the cache");
        Ok(true)
    }

    /// `bytes` compiled by the compiler of `tier` only: a baseline module here never switches to
    /// optimized code, and is not shared with other loads. For comparing the tiers (tests,
    /// benchmarks); plugins get their modules from [`Host::compile_tiered`] or
    /// [`Host::compile_cached`].
    ///
    /// # Errors
    /// As [`Host::compile`]; [`LoadError::Engine`] when there is no baseline compiler.
    pub fn compile_with(&self, bytes: &[u8], tier: Tier) -> Result<Arc<Compiled>, LoadError> {
        let (engine, linker) = match tier {
            Tier::Optimized => (&self.engine, &self.linker),
            Tier::Baseline => match &self.baseline {
                Some((e, l)) => (e, l),
                None => {
                    return Err(LoadError::Engine {
                        message: "no baseline compiler".into(),
                    });
                }
            },
        };
        let digest = crate::module::sha256(bytes);
        let source = Source::parse(bytes)?;
        let module = match tier {
            Tier::Optimized => self.compile_optimized(&source.wasm),
            Tier::Baseline => Module::new(engine, &source.wasm),
        }
        .map_err(|_| LoadError::Compile { size: bytes.len() })?;
        Ok(Arc::new(Compiled::link(
            linker, digest, &source, module, tier, None,
        )?))
    }

    /// The loaded module of `digest`, if any plugin still holds it: its optimized build when
    /// that is ready.
    fn loaded(&self, digest: Digest) -> Option<Arc<Compiled>> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        let m = modules.get(&digest).and_then(Weak::upgrade)?;
        match m.optimized() {
            Some(opt) => {
                modules.insert(digest, Arc::downgrade(&opt));
                Some(opt)
            }
            None => Some(m),
        }
    }

    fn remember(&self, compiled: Compiled) -> Arc<Compiled> {
        let compiled = Arc::new(compiled);
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        modules.retain(|_, w| w.strong_count() > 0);
        modules.insert(compiled.digest, Arc::downgrade(&compiled));
        compiled
    }

    /// Compile `source` with the baseline compiler and queue its optimized compile; `None` when
    /// there is no baseline compiler, too many optimized compiles are queued, or the baseline
    /// compiler cannot compile the module.
    fn compile_baseline(
        &'static self,
        digest: Digest,
        source: &Source<'_>,
        cache: &Path,
    ) -> Result<Option<Arc<Compiled>>, LoadError> {
        let Some((engine, linker)) = &self.baseline else {
            return Ok(None);
        };
        let pending = &self.tiering.pending;
        if pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_PENDING_OPTIMIZATIONS).then_some(n + 1)
            })
            .is_err()
        {
            tracing::debug!(%digest, "optimized compiles queued at the bound; compiling optimized now");
            return Ok(None);
        }
        // Released by the optimizer thread, or here when there is none.
        struct Pending(&'static AtomicUsize);
        impl Drop for Pending {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let pending = Pending(pending);
        let started = Instant::now();
        let module = match Module::new(engine, &source.wasm) {
            Ok(m) => m,
            Err(e) => {
                self.tiering
                    .baseline_unsupported
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%digest, error = %format!("{e:#}"), "the baseline compiler cannot compile this module; compiling optimized only");
                return Ok(None);
            }
        };
        let slot: Arc<OptimizedSlot> = Arc::new(OnceLock::new());
        let compiled = Compiled::link(
            linker,
            digest,
            source,
            module,
            Tier::Baseline,
            Some(Arc::clone(&slot)),
        )?;
        let compiled = self.remember(compiled);
        self.tiering
            .baseline_compiles
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(%digest, size = source.wasm.len(), elapsed = ?started.elapsed(), "module compiled by the baseline compiler; serving it while the optimized code is compiled");
        let job = Optimize {
            slot: Arc::downgrade(&slot),
            digest,
            source: Source {
                wasm: std::borrow::Cow::Owned(source.wasm.to_vec()),
                metadata: source.metadata.clone(),
                strategies: source.strategies.clone(),
                binding_members: source.binding_members,
            },
            cache: cache.to_path_buf(),
        };
        let spawned = std::thread::Builder::new()
            .name("flotilla-wasm-optimize".into())
            .spawn(move || {
                let _pending = pending;
                self.optimize(job);
            });
        if let Err(e) = spawned {
            // The pending count was released with the closure. The baseline code keeps serving.
            self.tiering
                .optimize_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%digest, error = %e, "cannot start the optimized compile; the baseline code keeps serving");
        }
        Ok(Some(compiled))
    }

    /// Compile `job` with Cranelift into the cache and publish it to the baseline module's users.
    fn optimize(&self, job: Optimize) {
        let _lane = self.optimizer.lock().unwrap_or_else(|e| e.into_inner());
        if job.slot.strong_count() == 0 {
            tracing::debug!(digest = %job.digest, "baseline module dropped before its optimized compile; skipped");
            return;
        }
        let started = Instant::now();
        let result = self
            .compile_optimized_into(&job.cache, job.digest, &job.source.wasm)
            .map_err(|_| LoadError::Compile {
                size: job.source.wasm.len(),
            })
            .and_then(|module| {
                Compiled::link(
                    &self.linker,
                    job.digest,
                    &job.source,
                    module,
                    Tier::Optimized,
                    None,
                )
            });
        match result {
            Ok(compiled) => {
                let compiled = Arc::new(compiled);
                self.tiering.optimized.fetch_add(1, Ordering::Relaxed);
                tracing::info!(digest = %job.digest, elapsed = ?started.elapsed(), "optimized code ready; plugins switch to it at their next call");
                if let Some(slot) = job.slot.upgrade() {
                    let _ = slot.set(Arc::clone(&compiled));
                    let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
                    modules.insert(job.digest, Arc::downgrade(&compiled));
                }
            }
            Err(e) => {
                self.tiering
                    .optimize_failures
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(digest = %job.digest, error = %e, "optimized compile failed; the baseline code keeps serving");
            }
        }
    }

    /// Compile `wasm` (digest `digest`) with Cranelift and store it in `cache`; its functions are
    /// looked up in, and added to, the incremental cache persisted in `cache`.
    pub(crate) fn compile_optimized_into(
        &self,
        cache: &Path,
        digest: Digest,
        wasm: &[u8],
    ) -> wasmtime::Result<Module> {
        self.incremental.attach(&self.engine, cache);
        let module = crate::cache::compile_and_store(&self.engine, cache, digest, wasm);
        self.incremental.persist(&self.engine);
        module
    }

    /// Compile `wasm` with Cranelift (no compiled-module cache; the incremental cache in
    /// memory).
    pub(crate) fn compile_optimized(&self, wasm: &[u8]) -> wasmtime::Result<Module> {
        Module::new(&self.engine, wasm)
    }

    /// What Cranelift's incremental cache did so far: functions found compiled (`hits`) and
    /// compiled anew (`misses`), and what it holds.
    pub fn incremental(&self) -> IncrementalStats {
        self.incremental.stats()
    }

    /// Empty the incremental cache in memory (not its file), as in a process that never compiled
    /// anything: for benchmarks of a first compile.
    pub fn forget_incremental(&self) {
        self.incremental.forget();
    }

    /// What the tiered compiler did so far ([`Host::compile_tiered`]).
    pub fn tiering(&self) -> TieringStats {
        let serving_baseline = self
            .modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter_map(Weak::upgrade)
            .filter(|m| m.tier() == Tier::Baseline && m.optimized().is_none())
            .count();
        let c = &self.tiering;
        TieringStats {
            baseline_compiles: c.baseline_compiles.load(Ordering::Relaxed),
            precompiled: c.precompiled.load(Ordering::Relaxed),
            baseline_unsupported: c.baseline_unsupported.load(Ordering::Relaxed),
            optimized: c.optimized.load(Ordering::Relaxed),
            optimize_failures: c.optimize_failures.load(Ordering::Relaxed),
            serving_baseline,
            pending: c.pending.load(Ordering::Acquire),
        }
    }

    /// The serialized cluster set for `snapshot`, built once per generation and shared.
    pub(crate) fn snapshot(&self, snapshot: &ClusterSnapshot<'_>) -> Arc<Snapshot> {
        let mut cache = self.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = cache.iter().find(|s| s.generation == snapshot.generation) {
            return Arc::clone(s);
        }
        let s = Arc::new(Snapshot::build(snapshot.generation, snapshot.clusters));
        cache.insert(0, Arc::clone(&s));
        cache.truncate(2);
        s
    }
}

/// The Wasm host's metrics as Prometheus text appended to `out` (zeros before the host exists):
/// modules compiled anew by tier outcome, modules served by baseline code now, and Cranelift's
/// incremental cache (functions found and compiled, bytes held). For a binary's `/metrics`.
pub fn render_metrics(out: &mut String) {
    use std::fmt::Write as _;
    let host = Host::existing();
    let t = host.map(Host::tiering).unwrap_or_default();
    let i = host.map(Host::incremental).unwrap_or_default();
    let _ = write!(
        out,
        "# HELP flotilla_wasm_tier_compiles_total Wasm modules compiled anew, by outcome: baseline (served at once by Winch code), optimized (baseline code replaced by Cranelift's), baseline_unsupported (compiled optimized only), optimize_failed (baseline code kept), ahead (a module directory file compiled before a plugin named it).
# TYPE flotilla_wasm_tier_compiles_total counter
flotilla_wasm_tier_compiles_total{{outcome=\"baseline\"}} {}
flotilla_wasm_tier_compiles_total{{outcome=\"optimized\"}} {}
flotilla_wasm_tier_compiles_total{{outcome=\"baseline_unsupported\"}} {}
flotilla_wasm_tier_compiles_total{{outcome=\"optimize_failed\"}} {}
flotilla_wasm_tier_compiles_total{{outcome=\"ahead\"}} {}
# HELP flotilla_wasm_modules_serving_baseline Loaded Wasm modules served by baseline (Winch) code while their optimized (Cranelift) code compiles.
# TYPE flotilla_wasm_modules_serving_baseline gauge
flotilla_wasm_modules_serving_baseline {}
# HELP flotilla_wasm_incremental_functions_total Functions Cranelift looked up in its incremental cache, by result (hit: reused, miss: compiled).
# TYPE flotilla_wasm_incremental_functions_total counter
flotilla_wasm_incremental_functions_total{{result=\"hit\"}} {}
flotilla_wasm_incremental_functions_total{{result=\"miss\"}} {}
# HELP flotilla_wasm_incremental_cache_bytes Bytes of compiled functions held by Cranelift's incremental cache.
# TYPE flotilla_wasm_incremental_cache_bytes gauge
flotilla_wasm_incremental_cache_bytes {}
# HELP flotilla_wasm_instances_created_total Wasm instances created (plugin loads, concurrent calls, replacements after a fault).
# TYPE flotilla_wasm_instances_created_total counter
flotilla_wasm_instances_created_total {}
# HELP flotilla_wasm_cluster_sets_pushed_total Cluster sets pushed into instances: one per instance and cluster-set generation.
# TYPE flotilla_wasm_cluster_sets_pushed_total counter
flotilla_wasm_cluster_sets_pushed_total {}
",
        t.baseline_compiles,
        t.optimized,
        t.baseline_unsupported,
        t.optimize_failures,
        t.precompiled,
        t.serving_baseline,
        i.hits,
        i.misses,
        i.bytes,
        crate::instance::INSTANCES_CREATED.load(std::sync::atomic::Ordering::Relaxed),
        crate::instance::CLUSTER_SETS_PUSHED.load(std::sync::atomic::Ordering::Relaxed),
    );
}

/// `(instances created, cluster sets pushed)` in this process so far (the counters of
/// [`render_metrics`]).
pub fn instance_counts() -> (u64, u64) {
    (
        crate::instance::INSTANCES_CREATED.load(std::sync::atomic::Ordering::Relaxed),
        crate::instance::CLUSTER_SETS_PUSHED.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// A module in [`Host::compile_tiered`]'s hands, for as long as this lives.
struct Compiling<'h> {
    host: &'h Host,
    digest: Digest,
}

impl<'h> Compiling<'h> {
    fn start(host: &'h Host, digest: Digest) -> Self {
        host.compiling
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(digest);
        Compiling { host, digest }
    }
}

impl Drop for Compiling<'_> {
    fn drop(&mut self) {
        let mut compiling = self
            .host
            .compiling
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(i) = compiling.iter().position(|d| *d == self.digest) {
            compiling.swap_remove(i);
        }
    }
}

/// A queued optimized compile.
struct Optimize {
    slot: Weak<OptimizedSlot>,
    digest: Digest,
    source: Source<'static>,
    cache: PathBuf,
}

/// Hashes pointers: they are already well distributed once the alignment bits are shifted out.
#[derive(Default)]
pub(crate) struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A cluster set serialized for guests ([`flotilla_abi::ClustersRequest`]), with the map from
/// cluster (by reference identity) to its index.
pub(crate) struct Snapshot {
    pub(crate) generation: u64,
    pub(crate) json: Vec<u8>,
    ptrs: Vec<usize>,
    index: HashMap<usize, u32, BuildHasherDefault<PtrHasher>>,
}

fn addr(c: &Cluster) -> usize {
    std::ptr::from_ref(c) as usize
}

impl Snapshot {
    /// Serialize `clusters` as generation `generation` (0: an ad-hoc set, pushed on every call).
    pub(crate) fn build<'c>(
        generation: u64,
        clusters: impl IntoIterator<Item = &'c Cluster>,
    ) -> Snapshot {
        let clusters: Vec<&Cluster> = clusters.into_iter().collect();
        let req = flotilla_abi::ClustersRequest {
            generation,
            clusters,
        };
        let json = serde_json::to_vec(&req).unwrap_or_default();
        let ptrs: Vec<usize> = req.clusters.iter().map(|c| addr(c)).collect();
        let index = ptrs
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, i as u32))
            .collect();
        Snapshot {
            generation,
            json,
            ptrs,
            index,
        }
    }

    /// Each cluster's index, or `false` when one is not in the set. Each cluster comes with a
    /// hint, its row if the caller knows it ([`ClusterDetail::row`], checked here), else
    /// [`ClusterDetail::NO_ROW`]. A cluster shortly after the previous one in set order (the usual
    /// case for filters and scores: inputs keep set order, with the clusters an earlier step
    /// dropped left out) is found without hashing too.
    ///
    /// [`ClusterDetail::row`]: flotilla_core::framework::ClusterDetail::row
    /// [`ClusterDetail::NO_ROW`]: flotilla_core::framework::ClusterDetail::NO_ROW
    pub(crate) fn indices<'c>(
        &self,
        clusters: impl Iterator<Item = (&'c Cluster, u32)>,
        out: &mut Vec<u32>,
    ) -> bool {
        /// How far ahead of the previous cluster to look before hashing.
        const NEAR: usize = 8;
        let mut cursor = 0usize;
        for (c, hint) in clusters {
            let p = addr(c);
            if self.ptrs.get(hint as usize) == Some(&p) {
                out.push(hint);
                cursor = hint as usize + 1;
                continue;
            }
            let near = self
                .ptrs
                .get(cursor..)
                .and_then(|rest| rest.iter().take(NEAR).position(|&q| q == p));
            let i = match near {
                Some(k) => (cursor + k) as u32,
                None => match self.index.get(&p) {
                    Some(&i) => i,
                    None => return false,
                },
            };
            out.push(i);
            cursor = i as usize + 1;
        }
        true
    }
}
