//! Warm instances: a `Store` with its instance, limits and reply buffers, kept across calls and
//! dropped on any fault. Every guest entry runs under an epoch deadline.

use std::time::{Duration, Instant};

use flotilla_abi::{export, status};
use flotilla_core::PluginError;
use wasmtime::{AsContext, AsContextMut, Caller, Memory, ResourceLimiter, Store, Trap, TypedFunc};

use crate::host::{Snapshot, TICK};

/// Instances created (plugin loads, pool growth, replacements after a fault) and cluster sets
/// pushed into instances (`flotilla_clusters_v1` calls): a push per instance and cluster-set
/// generation is the design, more means the generation changes more often than the clusters do.
pub(crate) static INSTANCES_CREATED: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);
pub(crate) static CLUSTER_SETS_PUSHED: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);
use crate::module::{Compiled, Tier};

/// Per-call limits of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (scheduling calls; instantiation and cluster pushes get ten
    /// times this, at least one second).
    pub timeout: Duration,
    /// Linear memory cap.
    pub memory_bytes: usize,
    /// Largest reply (`set_result` or `set_rows`) accepted.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_millis(100),
            memory_bytes: 64 << 20,
            max_output_bytes: 1 << 20,
        }
    }
}

impl Limits {
    /// Limits from a profile's `limits` (defaults for what is unset).
    ///
    /// # Errors
    /// A limit outside its documented range ([`PluginLimits::validate`]): values too large are
    /// refused, never saturated.
    ///
    /// [`PluginLimits::validate`]: flotilla_core::profile::PluginLimits::validate
    pub fn from_spec(
        spec: Option<&flotilla_core::profile::PluginLimits>,
    ) -> Result<Self, LimitsError> {
        let d = Limits::default();
        let Some(s) = spec else { return Ok(d) };
        if let Some(e) = s.validate("limits").into_iter().next() {
            return Err(LimitsError(e));
        }
        // In range, so none of these conversions can overflow; saturate anyway.
        let bytes = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(Limits {
            timeout: s.timeout_ms.map_or(d.timeout, Duration::from_millis),
            memory_bytes: s
                .memory_mib
                .map_or(d.memory_bytes, |m| bytes(m.saturating_mul(1 << 20))),
            max_output_bytes: s.max_output_bytes.map_or(d.max_output_bytes, bytes),
        })
    }

    /// Epoch ticks for `timeout`, capped so that no deadline arithmetic (here or in wasmtime,
    /// which adds it to the current epoch) can overflow, whatever a caller put in [`Limits`].
    fn ticks(timeout: Duration) -> u64 {
        let cap = Duration::from_millis(MAX_SETUP_MS);
        let micros = timeout.min(cap).as_micros() / TICK.as_micros().max(1);
        u64::try_from(micros)
            .unwrap_or(u64::MAX)
            .max(1)
            .saturating_add(1)
    }

    /// Deadline, in epoch ticks, of a scheduling call.
    pub(crate) fn call_ticks(&self) -> u64 {
        Self::ticks(self.timeout)
    }

    /// Deadline of setup work: instantiation, `init`, cluster pushes.
    pub(crate) fn setup_ticks(&self) -> u64 {
        Self::ticks(self.timeout.saturating_mul(10).max(Duration::from_secs(1)))
    }
}

/// The longest any deadline may be, milliseconds: ten times the largest `timeoutMs`.
const MAX_SETUP_MS: u64 = flotilla_core::profile::PluginLimits::MAX_TIMEOUT_MS * 10;

/// A plugin's `limits` are out of range; displays as `limits.timeoutMs: must be at most 10000`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LimitsError(pub flotilla_core::validate::FieldError);

/// Longest guest-provided text (error messages, reasons) the host keeps, bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `text` cut to at most [`MAX_MESSAGE_BYTES`] on a char boundary, an ellipsis marking the cut:
/// guest text reaches conditions, events and errors only through here.
pub fn bound_message(text: String) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    const ELLIPSIS: &str = "…";
    let mut end = MAX_MESSAGE_BYTES - ELLIPSIS.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text;
    out.truncate(end);
    out.push_str(ELLIPSIS);
    out
}

/// A fault raised by a host import; found again by type when the call fails.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HostFault {
    #[error("reply of {len} bytes exceeds the limit of {limit}")]
    OutputTooLarge { len: usize, limit: usize },
    #[error("guest passed a pointer outside its memory")]
    OutOfBounds,
    #[error("module has no exported memory")]
    NoMemory,
    #[error("guest called proc_exit({0})")]
    Exit(i32),
}

/// Memory limiter that remembers whether it refused anything.
pub(crate) struct Limiter {
    cap: usize,
    pub(crate) hit: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > 100_000 {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }
}

/// Store data.
pub(crate) struct State {
    pub(crate) limiter: Limiter,
    max_output: usize,
    result: Option<Vec<u8>>,
    rows: Option<Vec<u8>>,
    pub(crate) logs: Vec<(i32, String)>,
    pub(crate) started: Instant,
    random: u64,
}

/// Log lines kept per call.
const MAX_LOG_LINES: usize = 64;
/// Bytes kept per log line.
const MAX_LOG_LINE: usize = 1024;

impl State {
    fn new(limits: &Limits) -> Self {
        State {
            limiter: Limiter {
                cap: limits.memory_bytes,
                hit: false,
            },
            max_output: limits.max_output_bytes,
            result: None,
            rows: None,
            logs: Vec::new(),
            started: Instant::now(),
            random: 0,
        }
    }

    pub(crate) fn log(&mut self, level: i32, bytes: &[u8]) {
        if self.logs.len() < MAX_LOG_LINES {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_LOG_LINE)]);
            self.logs.push((level, text.trim_end().to_owned()));
        }
    }

    pub(crate) fn next_random(&mut self) -> u64 {
        self.random = self.random.wrapping_add(1);
        crate::wasi::random_u64(self.random)
    }
}

/// The guest's memory, with bounds-checked access (the guest is untrusted: check, don't index).
#[derive(Clone, Copy)]
pub(crate) struct GuestMemory(Memory);

pub(crate) fn guest_memory(caller: &mut Caller<'_, State>) -> Result<GuestMemory, HostFault> {
    caller
        .get_export(export::MEMORY)
        .and_then(|e| e.into_memory())
        .map(GuestMemory)
        .ok_or(HostFault::NoMemory)
}

impl GuestMemory {
    /// Copy `len` bytes at `ptr`.
    pub(crate) fn read(
        &self,
        store: impl AsContext,
        ptr: i32,
        len: i32,
    ) -> Result<Vec<u8>, HostFault> {
        let len = usize::try_from(len).map_err(|_| HostFault::OutOfBounds)?;
        let start = ptr as u32 as usize;
        let end = start.checked_add(len).ok_or(HostFault::OutOfBounds)?;
        self.0
            .data(&store)
            .get(start..end)
            .map(<[u8]>::to_vec)
            .ok_or(HostFault::OutOfBounds)
    }

    /// Write `bytes` at `ptr`.
    pub(crate) fn write_at(
        &self,
        store: impl AsContextMut,
        ptr: i32,
        bytes: &[u8],
    ) -> Result<(), HostFault> {
        self.0
            .write(store, ptr as u32 as usize, bytes)
            .map_err(|_| HostFault::OutOfBounds)
    }
}

/// Define the `flotilla:host/v1` imports.
pub(crate) fn define_host(linker: &mut wasmtime::Linker<State>) -> wasmtime::Result<()> {
    use flotilla_abi::{HOST_MODULE as M, import};
    linker.func_wrap(
        M,
        import::LOG,
        |mut c: Caller<'_, State>, level: i32, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let len = len.min(MAX_LOG_LINE as i32);
            let bytes = guest_memory(&mut c)?.read(&c, ptr, len)?;
            c.data_mut().log(level, &bytes);
            Ok(())
        },
    )?;
    linker.func_wrap(
        M,
        import::SET_RESULT,
        |mut c: Caller<'_, State>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let bytes = read_reply(&mut c, ptr, len)?;
            c.data_mut().result = Some(bytes);
            Ok(())
        },
    )?;
    linker.func_wrap(
        M,
        import::SET_ROWS,
        |mut c: Caller<'_, State>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let bytes = read_reply(&mut c, ptr, len)?;
            c.data_mut().rows = Some(bytes);
            Ok(())
        },
    )?;
    Ok(())
}

fn read_reply(c: &mut Caller<'_, State>, ptr: i32, len: i32) -> Result<Vec<u8>, HostFault> {
    let limit = c.data().max_output;
    let n = usize::try_from(len).map_err(|_| HostFault::OutOfBounds)?;
    if n > limit {
        return Err(HostFault::OutputTooLarge { len: n, limit });
    }
    guest_memory(c)?.read(&*c, ptr, len)
}

/// Why a guest call did not produce a usable reply (before it becomes a [`PluginError`]).
#[derive(Debug)]
pub(crate) enum Fail {
    /// A trap, a host fault or an instantiation failure.
    Wasm(wasmtime::Error),
    /// An ABI violation or malformed reply.
    Invalid(String),
    /// The guest reported an error (status 1).
    Guest(String),
}

impl From<wasmtime::Error> for Fail {
    fn from(e: wasmtime::Error) -> Self {
        Fail::Wasm(e)
    }
}

impl From<HostFault> for Fail {
    fn from(e: HostFault) -> Self {
        Fail::Wasm(wasmtime::Error::new(e))
    }
}

impl Fail {
    /// Classify by type, never by text: epoch interrupts are timeouts, a refused memory growth or
    /// an oversized reply is resource exhaustion, bad pointers and bad replies are invalid output.
    pub(crate) fn into_plugin_error(self, plugin: &str, memory_hit: bool) -> PluginError {
        let plugin = plugin.to_owned();
        match self {
            Fail::Invalid(message) => PluginError::InvalidOutput {
                plugin,
                message: bound_message(message),
            },
            Fail::Guest(message) => PluginError::Failed {
                plugin,
                message: bound_message(message),
            },
            Fail::Wasm(err) => {
                if let Some(trap) = err.downcast_ref::<Trap>() {
                    match trap {
                        Trap::Interrupt | Trap::OutOfFuel => {
                            return PluginError::Timeout { plugin };
                        }
                        Trap::StackOverflow | Trap::AllocationTooLarge => {
                            return PluginError::ResourceExhausted { plugin };
                        }
                        _ => {}
                    }
                }
                if let Some(fault) = err.downcast_ref::<HostFault>() {
                    return match fault {
                        HostFault::OutputTooLarge { .. } => {
                            PluginError::ResourceExhausted { plugin }
                        }
                        HostFault::OutOfBounds | HostFault::NoMemory => {
                            PluginError::InvalidOutput {
                                plugin,
                                message: fault.to_string(),
                            }
                        }
                        HostFault::Exit(_) => PluginError::Failed {
                            plugin,
                            message: fault.to_string(),
                        },
                    };
                }
                if memory_hit {
                    return PluginError::ResourceExhausted { plugin };
                }
                PluginError::Failed {
                    plugin,
                    message: bound_message(format!("wasm: {err:#}")),
                }
            }
        }
    }
}

type PointFn = TypedFunc<(i32, i32, i32, i32), i32>;

/// A ready instance: store, instance and typed exports, its reusable request buffer, and which
/// cluster generation it holds.
pub(crate) struct Warm {
    store: Store<State>,
    memory: GuestMemory,
    alloc: TypedFunc<i32, i32>,
    dealloc: TypedFunc<(i32, i32), ()>,
    clusters: TypedFunc<(i32, i32), i32>,
    points: [Option<PointFn>; 5],
    /// `flotilla_interpret_v1`, when exported.
    interpret: Option<PointFn>,
    /// `flotilla_victims_v1`, when exported.
    victims: Option<PointFn>,
    scratch: Option<(i32, usize)>,
    generation: Option<u64>,
    /// The tier of the module's code.
    tier: Tier,
}

/// A guest's answer: status plus what it passed to `set_result` / `set_rows`.
pub(crate) struct Reply {
    pub(crate) result: Option<Vec<u8>>,
    pub(crate) rows: Option<Vec<u8>>,
}

impl Warm {
    /// Instantiate, run `_initialize`, check the ABI version and run `init`.
    pub(crate) fn new(
        module: &Compiled,
        limits: &Limits,
        init: &[u8],
    ) -> Result<Warm, (Fail, bool)> {
        INSTANCES_CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut store = Store::new(module.pre.module().engine(), State::new(limits));
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(limits.setup_ticks());
        let (mut warm, init_fn) = match Self::link(store, module) {
            Ok(w) => w,
            Err((f, hit)) => return Err((f, hit)),
        };
        if let Some(init_fn) = init_fn {
            let r = (|| {
                let ptr = warm.write_temp(init)?;
                let status = init_fn.call(&mut warm.store, (ptr, init.len() as i32))?;
                warm.dealloc
                    .call(&mut warm.store, (ptr, init.len() as i32))?;
                warm.check_status(status)
            })();
            if let Err(f) = r {
                return Err((f, warm.memory_hit()));
            }
        }
        Ok(warm)
    }

    #[allow(clippy::type_complexity)]
    fn link(
        mut store: Store<State>,
        module: &Compiled,
    ) -> Result<(Warm, Option<TypedFunc<(i32, i32), i32>>), (Fail, bool)> {
        let r = (|| -> Result<_, Fail> {
            let instance = module.pre.instantiate(&mut store)?;
            let memory = instance
                .get_memory(&mut store, export::MEMORY)
                .map(GuestMemory)
                .ok_or_else(|| Fail::Invalid("module has no exported memory".into()))?;
            if module.has_initialize {
                instance
                    .get_typed_func::<(), ()>(&mut store, export::WASI_INITIALIZE)?
                    .call(&mut store, ())?;
            }
            let version = instance
                .get_typed_func::<(), i32>(&mut store, export::ABI_VERSION)?
                .call(&mut store, ())?;
            if version != flotilla_abi::ABI_VERSION as i32 {
                return Err(Fail::Invalid(format!(
                    "{} returned {version}, host speaks ABI v{}",
                    export::ABI_VERSION,
                    flotilla_abi::ABI_VERSION
                )));
            }
            let mut points: [Option<PointFn>; 5] = Default::default();
            for (slot, name) in points.iter_mut().zip(export::POINTS) {
                if instance.get_export(&mut store, name).is_some() {
                    *slot = Some(instance.get_typed_func(&mut store, name)?);
                }
            }
            let interpret = if module.has_interpret {
                Some(instance.get_typed_func(&mut store, export::INTERPRET)?)
            } else {
                None
            };
            let victims = if module.has_victims {
                Some(instance.get_typed_func(&mut store, export::VICTIMS)?)
            } else {
                None
            };
            let init_fn = if module.has_init {
                Some(instance.get_typed_func(&mut store, export::INIT)?)
            } else {
                None
            };
            Ok((
                memory,
                instance.get_typed_func(&mut store, export::ALLOC)?,
                instance.get_typed_func(&mut store, export::DEALLOC)?,
                instance.get_typed_func(&mut store, export::CLUSTERS)?,
                points,
                interpret,
                victims,
                init_fn,
            ))
        })();
        match r {
            Ok((memory, alloc, dealloc, clusters, points, interpret, victims, init_fn)) => Ok((
                Warm {
                    store,
                    memory,
                    alloc,
                    dealloc,
                    clusters,
                    points,
                    interpret,
                    victims,
                    scratch: None,
                    generation: None,
                    tier: module.tier(),
                },
                init_fn,
            )),
            Err(f) => {
                let hit = store.data().limiter.hit;
                Err((f, hit))
            }
        }
    }

    /// The tier of the code this instance runs.
    pub(crate) fn tier(&self) -> Tier {
        self.tier
    }

    /// Did the memory limiter refuse a growth since the instance was created?
    pub(crate) fn memory_hit(&self) -> bool {
        self.store.data().limiter.hit
    }

    /// Log lines of the last call.
    pub(crate) fn take_logs(&mut self) -> Vec<(i32, String)> {
        std::mem::take(&mut self.store.data_mut().logs)
    }

    fn write_temp(&mut self, bytes: &[u8]) -> Result<i32, Fail> {
        let len =
            i32::try_from(bytes.len()).map_err(|_| Fail::Invalid("input exceeds 2 GiB".into()))?;
        let ptr = self.alloc.call(&mut self.store, len)?;
        self.memory
            .write_at(&mut self.store, ptr, bytes)
            .map_err(|_| {
                Fail::Invalid(format!(
                    "{} returned an out-of-bounds pointer",
                    export::ALLOC
                ))
            })?;
        Ok(ptr)
    }

    fn check_status(&mut self, status: i32) -> Result<(), Fail> {
        match status {
            status::OK => Ok(()),
            status::ERROR => {
                let msg = self.store.data_mut().result.take().unwrap_or_default();
                let msg = bound_message(
                    String::from_utf8_lossy(&msg[..msg.len().min(MAX_MESSAGE_BYTES * 4)])
                        .into_owned(),
                );
                Err(Fail::Guest(if msg.is_empty() {
                    "plugin reported an error".into()
                } else {
                    msg
                }))
            }
            other => Err(Fail::Invalid(format!("unknown status {other}"))),
        }
    }

    /// Push `snapshot` unless this instance already holds its generation.
    pub(crate) fn ensure_clusters(
        &mut self,
        snapshot: &Snapshot,
        limits: &Limits,
    ) -> Result<(), Fail> {
        if snapshot.generation != 0 && self.generation == Some(snapshot.generation) {
            return Ok(());
        }
        self.generation = None;
        CLUSTER_SETS_PUSHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.store.set_epoch_deadline(limits.setup_ticks());
        let ptr = self.write_temp(&snapshot.json)?;
        let len = snapshot.json.len() as i32;
        let status = self.clusters.call(&mut self.store, (ptr, len))?;
        self.dealloc.call(&mut self.store, (ptr, len))?;
        self.check_status(status)?;
        if snapshot.generation != 0 {
            self.generation = Some(snapshot.generation);
        }
        Ok(())
    }

    /// One extension-point call: the binding JSON and the rows go into the reusable request
    /// buffer (rows 8-byte aligned after the JSON), then one guest entry.
    pub(crate) fn call(
        &mut self,
        point: usize,
        json: &[u8],
        rows: &[u8],
        count: usize,
        limits: &Limits,
    ) -> Result<Reply, Fail> {
        let func = self.points[point].clone().ok_or_else(|| {
            Fail::Invalid(format!("module does not export {}", export::POINTS[point]))
        })?;
        self.call_fn(&func, json, rows, count, limits)
    }

    /// A resource-interpreter call (`flotilla_interpret_v1`): JSON only, as override.
    pub(crate) fn call_interpret(&mut self, json: &[u8], limits: &Limits) -> Result<Reply, Fail> {
        let func = self.interpret.clone().ok_or_else(|| {
            Fail::Invalid(format!("module does not export {}", export::INTERPRET))
        })?;
        self.call_fn(&func, json, &[], 0, limits)
    }

    /// A victim-choice call (`flotilla_victims_v1`): a `VictimsRequest` and one `VictimRow` per
    /// candidate; no cluster push (the cluster is in the JSON).
    pub(crate) fn call_victims(
        &mut self,
        json: &[u8],
        rows: &[u8],
        count: usize,
        limits: &Limits,
    ) -> Result<Reply, Fail> {
        let func = self
            .victims
            .clone()
            .ok_or_else(|| Fail::Invalid(format!("module does not export {}", export::VICTIMS)))?;
        self.call_fn(&func, json, rows, count, limits)
    }

    fn call_fn(
        &mut self,
        func: &PointFn,
        json: &[u8],
        rows: &[u8],
        count: usize,
        limits: &Limits,
    ) -> Result<Reply, Fail> {
        let rows_off = json.len().next_multiple_of(8);
        let need = rows_off + rows.len();
        let ptr = match self.scratch {
            Some((ptr, cap)) if cap >= need => ptr,
            old => {
                if let Some((p, c)) = old {
                    self.scratch = None;
                    self.dealloc.call(&mut self.store, (p, c as i32))?;
                }
                let cap = need.next_power_of_two().max(4096);
                let cap32 = i32::try_from(cap)
                    .map_err(|_| Fail::Invalid("request exceeds 2 GiB".into()))?;
                self.store.set_epoch_deadline(limits.setup_ticks());
                let p = self.alloc.call(&mut self.store, cap32)?;
                self.scratch = Some((p, cap));
                p
            }
        };
        let oob = |_| {
            Fail::Invalid(format!(
                "{} returned an out-of-bounds pointer",
                export::ALLOC
            ))
        };
        self.memory
            .write_at(&mut self.store, ptr, json)
            .map_err(oob)?;
        let rows_ptr = ptr.wrapping_add(rows_off as i32);
        self.memory
            .write_at(&mut self.store, rows_ptr, rows)
            .map_err(oob)?;
        let state = self.store.data_mut();
        state.result = None;
        state.rows = None;
        state.logs.clear();
        self.store.set_epoch_deadline(limits.call_ticks());
        let status = func.call(
            &mut self.store,
            (ptr, json.len() as i32, rows_ptr, count as i32),
        )?;
        self.check_status(status)?;
        let state = self.store.data_mut();
        Ok(Reply {
            result: state.result.take(),
            rows: state.rows.take(),
        })
    }

    /// Override call: JSON only, no cluster push.
    pub(crate) fn call_json(
        &mut self,
        point: usize,
        json: &[u8],
        limits: &Limits,
    ) -> Result<Reply, Fail> {
        self.call(point, json, &[], 0, limits)
    }
}
