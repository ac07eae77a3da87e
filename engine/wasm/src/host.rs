//! The process-wide host: one wasmtime `Engine` (Cranelift, pooling allocator, epoch interruption)
//! with one ticker thread, the `Linker` with the host imports, the module cache keyed by sha256,
//! and the serialized cluster snapshot shared by every plugin.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use flotilla_api::cluster::Cluster;
use flotilla_core::framework::ClusterSnapshot;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Linker, PoolingAllocationConfig};

use crate::instance::State;
use crate::module::{Compiled, Digest, LoadError};

/// Epoch tick period: call deadlines are rounded up to it.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Largest linear memory any plugin may get (per-plugin caps are lower, via the limiter).
pub const MAX_MEMORY_BYTES: usize = 1 << 30;

/// Concurrent instances (warm and in use) across all plugins.
const POOL_SLOTS: u32 = 512;

/// The Wasm host. Get it with [`Host::global`].
pub struct Host {
    engine: Engine,
    pub(crate) linker: Linker<State>,
    modules: Mutex<HashMap<Digest, Weak<Compiled>>>,
    snapshots: Mutex<Vec<Arc<Snapshot>>>,
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
        static HOST: OnceLock<Result<Host, String>> = OnceLock::new();
        HOST.get_or_init(|| Host::create().map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|message| LoadError::Engine {
                message: message.clone(),
            })
    }

    fn create() -> wasmtime::Result<Host> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Not `compiler_inlining(Inlining::Yes)`: about 10 % faster guests in the cycle bench, but
        // 2.5x the compile time (a 500 KB guest 0.4 -> 1.0 s), and the compile is what a hot swap
        // waits for (target: in use within 1 s of the change; a 5.7 MB Go module takes 4-6 s on
        // 2 cores today, BENCHMARKS.md "Hot swap of a 5.7 MB Go plugin").
        // `FLOTILLA_WASM_PERFMAP=1`: write /tmp/perf-<pid>.map so `perf report` names guest functions.
        if std::env::var_os("FLOTILLA_WASM_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let mut pool = PoolingAllocationConfig::default();
        pool.total_core_instances(POOL_SLOTS)
            .total_memories(POOL_SLOTS)
            .total_tables(POOL_SLOTS)
            .max_memory_size(MAX_MEMORY_BYTES);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        crate::instance::define_host(&mut linker)?;
        crate::wasi::define(&mut linker)?;
        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("flotilla-wasm-epoch".into())
            .spawn(move || {
                while let Some(engine) = ticker.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(TICK);
                }
            })
            .map_err(wasmtime::Error::new)?;
        Ok(Host {
            engine,
            linker,
            modules: Mutex::new(HashMap::new()),
            snapshots: Mutex::new(Vec::new()),
        })
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
        if let Some(m) = self
            .modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&digest)
            .and_then(Weak::upgrade)
        {
            return Ok(m);
        }
        let compiled = Arc::new(Compiled::load(self, digest, bytes, cache)?);
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        modules.retain(|_, w| w.strong_count() > 0);
        modules.insert(digest, Arc::downgrade(&compiled));
        Ok(compiled)
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
