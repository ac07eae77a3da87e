//! `WasmPlugin`: a module with its config and limits, implementing every extension-point trait
//! over a pool of warm instances.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use flotilla_abi::{
    AssignReply, BindingRequest, DetailRow, FilterReply, OverrideReply, SelectReply, VictimRow,
    VictimsReply, VictimsRequest, export,
};
use flotilla_api::cluster::Cluster;
use flotilla_api::work::{SpecMembers, TargetCluster};
use flotilla_core::PluginError;
use flotilla_core::division;
use flotilla_core::framework::{
    AssignInput, AssignMode, AssignPlugin, Assignment, BindingContext, ClusterDetail, FilterInput,
    FilterPlugin, OverrideInput, OverridePatch, OverridePlugin, Plugin, Reason, ScoreInput,
    ScorePlugin, SelectInput, SelectPlugin, Selection, Verdict, VictimInput, VictimPlugin,
};

use crate::host::{Host, Snapshot};
use crate::instance::{Fail, Limits, Reply, Warm, bound_message};
use crate::module::{Compiled, LoadError, Tier};

const FILTER: usize = 0;
const SCORE: usize = 1;
const SELECT: usize = 2;
const ASSIGN: usize = 3;
const OVERRIDE: usize = 4;

/// Warm instances kept per plugin (more may exist while calls run concurrently).
const MAX_IDLE: usize = 8;

/// The module the plugin runs now and its idle instances of it. Starts with the module the
/// plugin was loaded with; a baseline module is replaced by its optimized build once that is
/// ready, and the baseline instances retire (idle ones at once, busy ones when their call ends).
struct Pool {
    module: Arc<Compiled>,
    idle: Vec<Warm>,
}

impl Pool {
    /// Switch to the optimized build of a baseline module when it is ready.
    fn refresh(&mut self, plugin: &str) {
        if self.module.tier() != Tier::Baseline {
            return;
        }
        if let Some(optimized) = self.module.optimized() {
            tracing::debug!(plugin, digest = %optimized.digest, retired = self.idle.len(), "plugin switched to the optimized code");
            self.module = optimized;
            self.idle.clear();
        }
    }
}

/// A Wasm plugin: one module, one config, one set of limits. Implements all five extension-point
/// traits; a call to a point the module does not export is a plugin error (factories check first).
pub struct WasmPlugin {
    name: String,
    module: Arc<Compiled>,
    init: Vec<u8>,
    limits: Limits,
    host: &'static Host,
    pool: Mutex<Pool>,
    /// Log lines of the most recent call, when capturing (for `flotilla plugin test`).
    last_logs: Mutex<Option<Vec<(i32, String)>>>,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("name", &self.name)
            .field("module", &self.module)
            .finish_non_exhaustive()
    }
}

impl WasmPlugin {
    /// Build the plugin and instantiate it once (the ABI version check, `_initialize` and `init`
    /// run now, off the hot path); that instance becomes the first warm one.
    ///
    /// # Errors
    /// The first instantiation failed.
    pub fn load(
        host: &'static Host,
        name: impl Into<String>,
        module: Arc<Compiled>,
        config: Option<&serde_json::Value>,
        limits: Limits,
    ) -> Result<WasmPlugin, LoadError> {
        let name = name.into();
        let init = serde_json::to_vec(&flotilla_abi::InitRequest {
            name: name.clone(),
            config,
        })
        .map_err(|e| LoadError::Instantiate {
            message: e.to_string(),
        })?;
        let warm =
            Warm::new(&module, &limits, &init).map_err(|(f, hit)| LoadError::Instantiate {
                message: f.into_plugin_error(&name, hit).to_string(),
            })?;
        Ok(WasmPlugin {
            name,
            module: Arc::clone(&module),
            init,
            limits,
            host,
            pool: Mutex::new(Pool {
                module: Arc::clone(&module),
                idle: vec![warm],
            }),
            last_logs: Mutex::new(None),
        })
    }

    /// The module the plugin was loaded with (digest, metadata, exports).
    pub fn module(&self) -> &Arc<Compiled> {
        &self.module
    }

    /// The tier of the code the plugin runs now (the next call switches a baseline module to
    /// its optimized build if that became ready since).
    pub fn tier(&self) -> Tier {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.refresh(&self.name);
        pool.module.tier()
    }

    /// Keep the log lines of each call for [`WasmPlugin::take_logs`].
    pub fn capture_logs(&self) {
        *self.last_logs.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    }

    /// Log lines of the most recent call (when capturing).
    pub fn take_logs(&self) -> Vec<(i32, String)> {
        self.last_logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Run `f` on a warm instance; a fault drops the instance (the next call gets a fresh one).
    fn with_instance<R>(
        &self,
        f: impl FnOnce(&mut Warm) -> Result<R, Fail>,
    ) -> Result<R, PluginError> {
        // An idle instance, or else the module to instantiate.
        let next = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.refresh(&self.name);
            pool.idle.pop().ok_or_else(|| Arc::clone(&pool.module))
        };
        let mut warm = match next {
            Ok(w) => w,
            Err(module) => Warm::new(&module, &self.limits, &self.init)
                .map_err(|(f, hit)| f.into_plugin_error(&self.name, hit))?,
        };
        let tier = warm.tier();
        let result = f(&mut warm);
        if let Some(logs) = self
            .last_logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            *logs = warm.take_logs();
        }
        match result {
            Ok(r) => {
                let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
                // An instance of code the plugin no longer runs (baseline, now optimized) retires.
                if pool.idle.len() < MAX_IDLE && pool.module.tier() == tier {
                    pool.idle.push(warm);
                }
                Ok(r)
            }
            Err(fail) => Err(fail.into_plugin_error(&self.name, warm.memory_hit())),
        }
    }

    /// The snapshot the clusters come from, and their indices in it (each cluster with its row if
    /// known, see [`Snapshot::indices`]). Without a snapshot in the context, or for clusters not in
    /// it, an ad-hoc set of exactly these clusters, sorted by name as every pushed set is (pushed
    /// per call).
    fn rows<'c>(
        &self,
        binding: &BindingContext<'_>,
        clusters: impl Iterator<Item = (&'c Cluster, u32)> + Clone,
    ) -> (Arc<Snapshot>, Vec<u32>) {
        let mut idx = Vec::with_capacity(clusters.size_hint().0);
        if let Some(s) = &binding.snapshot {
            let snap = self.host.snapshot(s);
            if snap.indices(clusters.clone(), &mut idx) {
                return (snap, idx);
            }
            idx.clear();
        }
        let mut list: Vec<&Cluster> = clusters.clone().map(|(c, _)| c).collect();
        list.sort_by(|a, b| a.name().cmp(b.name()));
        let snap = Snapshot::build(0, list.iter().copied());
        // Every cluster is in `list`, so each is found.
        snap.indices(clusters.map(|(c, _)| (c, ClusterDetail::NO_ROW)), &mut idx);
        (Arc::new(snap), idx)
    }

    /// The call's request JSON. The binding part is encoded once per scheduling attempt and
    /// shared by the attempt's Wasm plugins (`BindingContext::encodings`); an assign call appends
    /// its `replicas` and `mode` to a copy.
    fn binding_json<'a>(
        binding: &BindingContext<'a>,
        members: SpecMembers,
        replicas: Option<i32>,
        mode: Option<flotilla_abi::AssignMode>,
    ) -> Cow<'a, [u8]> {
        let encode = |replicas, mode| {
            // The placement goes once, beside the spec (sdk/ABI.md §5), and of the spec only the
            // members the module reads (all, unless it declared them).
            let spec = binding.spec.without_placement_only(members);
            let req = BindingRequest {
                binding: spec,
                placement: binding.placement,
                affinity_term: binding.affinity_term,
                replicas,
                mode,
            };
            // Typical bindings serialize to one or two KiB: start there instead of growing from empty.
            let mut json = Vec::with_capacity(2048);
            match serde_json::to_writer(&mut json, &req) {
                Ok(()) => json,
                Err(_) => Vec::new(),
            }
        };
        let Some(shared) = binding.encodings else {
            return Cow::Owned(encode(replicas, mode));
        };
        let base = shared.json(binding, members, || encode(None, None));
        if replicas.is_none() && mode.is_none() {
            return base;
        }
        // `{…}` with at least the `binding` member: the assign members go before the brace.
        let Some((b'}', members)) = base.split_last() else {
            return Cow::Owned(encode(replicas, mode));
        };
        let mut json = Vec::with_capacity(base.len() + 32);
        json.extend_from_slice(members);
        if let Some(r) = replicas {
            json.extend_from_slice(format!(",\"replicas\":{r}").as_bytes());
        }
        if let Some(m) = mode {
            json.extend_from_slice(b",\"mode\":");
            if serde_json::to_writer(&mut json, &m).is_err() {
                return Cow::Owned(encode(replicas, Some(m)));
            }
        }
        json.push(b'}');
        Cow::Owned(json)
    }

    fn call_rows(
        &self,
        point: usize,
        snap: &Snapshot,
        json: &[u8],
        rows: &[u8],
        count: usize,
    ) -> Result<Reply, PluginError> {
        self.with_instance(|w| {
            w.ensure_clusters(snap, &self.limits)?;
            w.call(point, json, rows, count, &self.limits)
        })
    }

    fn detail_rows(
        &self,
        binding: &BindingContext<'_>,
        clusters: &[ClusterDetail<'_>],
    ) -> (Arc<Snapshot>, Vec<u8>) {
        let (snap, idx) = self.rows(binding, clusters.iter().map(|d| (d.cluster, d.row)));
        let mut rows = Vec::with_capacity(clusters.len() * DetailRow::SIZE);
        for (d, &i) in clusters.iter().zip(&idx) {
            let row = DetailRow {
                index: i,
                overflow_order: d.overflow_order,
                score: d.score,
                allocatable_replicas: d.allocatable_replicas,
                available_replicas: d.available_replicas,
            };
            rows.extend_from_slice(&row.to_bytes());
        }
        (snap, rows)
    }

    /// One `flotilla_interpret_v1` call with `json` (an `InterpretRequest`), on a warm instance.
    pub(crate) fn call_interpret(&self, json: &[u8]) -> Result<Reply, PluginError> {
        self.with_instance(|w| w.call_interpret(json, &self.limits))
    }

    fn invalid(&self, message: impl Into<String>) -> PluginError {
        PluginError::InvalidOutput {
            plugin: self.name.clone(),
            message: bound_message(message.into()),
        }
    }
}

/// Each cluster with its snapshot row as a hint, when the input has one per cluster.
fn with_hints<'c>(
    clusters: &'c [&'c Cluster],
    rows: Option<&'c [u32]>,
) -> impl Iterator<Item = (&'c Cluster, u32)> + Clone {
    let rows = rows.filter(|r| r.len() == clusters.len()).unwrap_or(&[]);
    clusters
        .iter()
        .enumerate()
        .map(move |(i, &c)| (c, rows.get(i).copied().unwrap_or(ClusterDetail::NO_ROW)))
}

/// Filter/score request rows: each index as a little-endian `u32`.
fn index_rows(idx: &[u32]) -> Vec<u8> {
    let mut rows = Vec::with_capacity(idx.len() * flotilla_abi::INDEX_ROW_SIZE);
    for i in idx {
        rows.extend_from_slice(&i.to_le_bytes());
    }
    rows
}

impl Plugin for WasmPlugin {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Reasons are interned (bounded) so that a reason shared by a thousand clusters is one
/// allocation for the process, not one per cluster and call.
fn intern(reason: &str) -> Reason {
    const MAX_ENTRIES: usize = 4096;
    const MAX_LEN: usize = 512;
    static TABLE: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    if reason.len() > MAX_LEN {
        return Cow::Owned(reason.to_owned());
    }
    let mut table = TABLE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(s) = table.get(reason) {
        return Cow::Borrowed(*s);
    }
    if table.len() >= MAX_ENTRIES {
        return Cow::Owned(reason.to_owned());
    }
    let s: &'static str = Box::leak(reason.to_owned().into_boxed_str());
    table.insert(s);
    Cow::Borrowed(s)
}

impl FilterPlugin for WasmPlugin {
    fn filter(&self, input: &FilterInput<'_>, out: &mut Vec<Verdict>) -> Result<(), PluginError> {
        let n = input.clusters.len();
        let (snap, idx) = self.rows(input.binding, with_hints(input.clusters, input.rows));
        let rows = index_rows(&idx);
        let json = Self::binding_json(input.binding, self.module.binding_members, None, None);
        let reply = self.call_rows(FILTER, &snap, &json, &rows, n)?;
        decode::filter(n, &reply, out).map_err(|m| self.invalid(m))
    }
}

impl ScorePlugin for WasmPlugin {
    fn score(&self, input: &ScoreInput<'_>, out: &mut Vec<i64>) -> Result<(), PluginError> {
        let n = input.clusters.len();
        let (snap, idx) = self.rows(input.binding, with_hints(input.clusters, input.rows));
        let rows = index_rows(&idx);
        let json = Self::binding_json(input.binding, self.module.binding_members, None, None);
        let reply = self.call_rows(SCORE, &snap, &json, &rows, n)?;
        decode::score(n, &reply, out).map_err(|m| self.invalid(m))
    }
}

impl SelectPlugin for WasmPlugin {
    fn select(&self, input: &SelectInput<'_>) -> Result<Selection, PluginError> {
        let (snap, rows) = self.detail_rows(input.binding, input.clusters);
        let json = Self::binding_json(input.binding, self.module.binding_members, None, None);
        let reply = self.call_rows(SELECT, &snap, &json, &rows, input.clusters.len())?;
        decode::select(input.clusters.len(), &reply).map_err(|m| self.invalid(m))
    }
}

impl AssignPlugin for WasmPlugin {
    fn assign(&self, input: &AssignInput<'_>) -> Result<Assignment, PluginError> {
        // Not a strategy the plugin declared: its answer would be `skip`, given without a call.
        if let Some(declared) = &self.module.strategies
            && !division::strategy(input.binding.placement).is_ok_and(|s| declared.contains(&s))
        {
            return Ok(Assignment::Skip);
        }
        let (snap, rows) = self.detail_rows(input.binding, input.clusters);
        let mode = match input.mode {
            AssignMode::Steady => flotilla_abi::AssignMode::Steady,
            AssignMode::Fresh => flotilla_abi::AssignMode::Fresh,
        };
        let json = Self::binding_json(
            input.binding,
            self.module.binding_members,
            Some(input.replicas),
            Some(mode),
        );
        let reply = self.call_rows(ASSIGN, &snap, &json, &rows, input.clusters.len())?;
        let names: Vec<&str> = input.clusters.iter().map(|d| d.name()).collect();
        let request = decode::AssignRequest {
            replicas: input.replicas,
            divided: input.binding.placement.replica_scheduling_type()
                == flotilla_api::policy::scheduling_type::DIVIDED,
        };
        decode::assign(&names, request, &reply).map_err(|m| self.invalid(m))
    }
}

impl OverridePlugin for WasmPlugin {
    fn override_manifest(&self, input: &OverrideInput<'_>) -> Result<OverridePatch, PluginError> {
        let req = flotilla_abi::OverrideRequest {
            object: input.object,
            cluster: input.cluster,
        };
        let json =
            serde_json::to_vec(&req).map_err(|e| PluginError::failed(&self.name, e.to_string()))?;
        let reply = self.with_instance(|w| w.call_json(OVERRIDE, &json, &self.limits))?;
        decode::override_patch(input.object, &reply).map_err(|m| self.invalid(m))
    }
}

impl VictimPlugin for WasmPlugin {
    fn choose(&self, input: &VictimInput<'_>) -> Result<Vec<usize>, PluginError> {
        let n = input.candidates.len();
        let req = VictimsRequest {
            preemptor: input.preemptor,
            cluster: input.cluster,
            candidates: input.candidates.iter().map(|c| c.binding).collect(),
        };
        let json =
            serde_json::to_vec(&req).map_err(|e| PluginError::failed(&self.name, e.to_string()))?;
        let mut rows = Vec::with_capacity(n * VictimRow::SIZE);
        for c in input.candidates {
            let row = VictimRow {
                priority: c.priority,
                replicas: c.replicas,
                created: c.created,
            };
            rows.extend_from_slice(&row.to_bytes());
        }
        let reply = self.with_instance(|w| w.call_victims(&json, &rows, n, &self.limits))?;
        decode::victims(n, &reply).map_err(|m| self.invalid(m))
    }
}

/// Reply decoding: pure functions over what the guest passed (the ABI boundary's host side; fuzzed
/// by `tests/fuzz.rs`). Errors are invalid-output messages.
pub(crate) mod decode {
    use super::*;

    fn parse<T: serde::de::DeserializeOwned>(
        reply: Option<&[u8]>,
        what: &str,
    ) -> Result<T, String> {
        let bytes = reply.ok_or_else(|| format!("no {what} reply (set_result was not called)"))?;
        serde_json::from_slice(bytes).map_err(|e| format!("{what} reply: {e}"))
    }

    pub(crate) fn filter(n: usize, reply: &Reply, out: &mut Vec<Verdict>) -> Result<(), String> {
        let verdicts = reply
            .rows
            .as_deref()
            .ok_or("no filter verdicts (set_rows was not called)")?;
        if verdicts.len() != n {
            return Err(format!(
                "returned {} verdicts for {n} clusters",
                verdicts.len()
            ));
        }
        let reasons: Vec<Reason> = if verdicts.iter().any(|&v| v != flotilla_abi::FIT) {
            let r: FilterReply = parse(reply.result.as_deref(), "filter")?;
            // Verdict bytes reach at most 255 reasons; each is bounded before it is kept.
            r.reasons
                .into_iter()
                .take(usize::from(u8::MAX))
                .map(|s| intern(&bound_message(s)))
                .collect()
        } else {
            Vec::new()
        };
        out.reserve(n);
        for &v in verdicts {
            if v == flotilla_abi::FIT {
                out.push(Verdict::Fit);
            } else {
                let r = reasons
                    .get(usize::from(v) - 1)
                    .ok_or_else(|| format!("verdict {v} has no reason"))?;
                out.push(Verdict::Unschedulable(r.clone()));
            }
        }
        Ok(())
    }

    pub(crate) fn score(n: usize, reply: &Reply, out: &mut Vec<i64>) -> Result<(), String> {
        let scores = reply
            .rows
            .as_deref()
            .ok_or("no scores (set_rows was not called)")?;
        if scores.len() != n * flotilla_abi::SCORE_ROW_SIZE {
            return Err(format!(
                "returned {} score bytes for {n} clusters",
                scores.len()
            ));
        }
        let start = out.len();
        for (i, c) in scores.chunks_exact(8).enumerate() {
            let score = i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            if !(MIN_SCORE..=MAX_SCORE).contains(&score) {
                out.truncate(start);
                return Err(format!(
                    "score {score} for row {i} is outside {MIN_SCORE}..={MAX_SCORE}"
                ));
            }
            out.push(score);
        }
        Ok(())
    }

    /// A victims reply, JSON or binary (exactly one): candidate positions in range, each at most
    /// once (so never more than `n` of them).
    pub(crate) fn victims(n: usize, reply: &Reply) -> Result<Vec<usize>, String> {
        let positions: Vec<u32> = match (reply.result.as_deref(), reply.rows.as_deref()) {
            (Some(_), Some(_)) => {
                return Err("victims reply passed both set_result and set_rows".into());
            }
            (None, None) => {
                return Err("no victims reply (neither set_result nor set_rows was called)".into());
            }
            (Some(json), None) => {
                serde_json::from_slice::<VictimsReply>(json)
                    .map_err(|e| format!("victims reply: {e}"))?
                    .victims
            }
            (None, Some(bin)) => {
                if bin.len() % flotilla_abi::VICTIM_POSITION_SIZE != 0 {
                    return Err(format!(
                        "victims reply of {} bytes is not a whole number of {}-byte positions",
                        bin.len(),
                        flotilla_abi::VICTIM_POSITION_SIZE
                    ));
                }
                bin.chunks_exact(flotilla_abi::VICTIM_POSITION_SIZE)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            }
        };
        if positions.len() > n {
            return Err(format!(
                "chose {} victims among {n} candidates",
                positions.len()
            ));
        }
        let mut seen = vec![false; n];
        let mut out = Vec::with_capacity(positions.len());
        for p in positions {
            let i = p as usize;
            match seen.get_mut(i) {
                None => return Err(format!("chose candidate {p} of {n}")),
                Some(true) => return Err(format!("chose candidate {p} twice")),
                Some(s) => *s = true,
            }
            out.push(i);
        }
        Ok(out)
    }

    /// A select reply: row positions in range, each at most once.
    pub(crate) fn select(n: usize, reply: &Reply) -> Result<Selection, String> {
        Ok(
            match parse::<SelectReply>(reply.result.as_deref(), "select")? {
                SelectReply::Selected(rows) => {
                    let mut seen = vec![false; n];
                    let mut out = Vec::with_capacity(rows.len().min(n));
                    for r in rows {
                        let i = r as usize;
                        match seen.get_mut(i) {
                            None => return Err(format!("selected row {r} of {n}")),
                            Some(true) => return Err(format!("selected row {r} twice")),
                            Some(s) => *s = true,
                        }
                        out.push(i);
                    }
                    Selection::Selected(out)
                }
                SelectReply::Failed(msg) => Selection::Failed(bound_message(msg)),
            },
        )
    }

    /// What an assign call asked for, to check the reply against.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct AssignRequest {
        /// Replicas to place.
        pub(crate) replicas: i32,
        /// `Divided` placement: the replies' replicas must add up to `replicas` (Karmada's
        /// dividers all place exactly the requested replicas or fail). Otherwise (`Duplicated`)
        /// each cluster gets at most `replicas`.
        pub(crate) divided: bool,
    }

    /// An assign reply: rows in range and each at most once, replicas in `0..=replicas`, and for
    /// a divided placement a sum of exactly `replicas`. Rows given 0 replicas are left out of the
    /// assignment (the scheduler keeps no zero-replica target).
    pub(crate) fn assign(
        names: &[&str],
        request: AssignRequest,
        reply: &Reply,
    ) -> Result<Assignment, String> {
        let pairs: Vec<(u32, i32)> = match (&reply.result, &reply.rows) {
            (Some(_), Some(_)) => {
                return Err("assign reply: both set_result and set_rows were called".into());
            }
            // Binary `assigned` pairs (sdk/ABI.md §8).
            (None, Some(rows)) => {
                if rows.len() % flotilla_abi::ASSIGN_ROW_SIZE != 0 {
                    return Err(format!(
                        "assign reply: {} bytes of rows, not a multiple of 8",
                        rows.len()
                    ));
                }
                rows.chunks_exact(flotilla_abi::ASSIGN_ROW_SIZE)
                    .map(|c| {
                        (
                            u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                            i32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                        )
                    })
                    .collect()
            }
            _ => match parse::<AssignReply>(reply.result.as_deref(), "assign")? {
                AssignReply::Skip => return Ok(Assignment::Skip),
                AssignReply::Unschedulable(msg) => {
                    return Ok(Assignment::Unschedulable(bound_message(msg)));
                }
                AssignReply::Assigned(pairs) => pairs,
            },
        };
        let want = request.replicas;
        let mut seen = vec![false; names.len()];
        let mut sum = 0i64;
        let mut out = Vec::with_capacity(pairs.len().min(names.len()));
        for (row, replicas) in pairs {
            let name = names
                .get(row as usize)
                .copied()
                .ok_or_else(|| format!("assigned row {row} of {}", names.len()))?;
            match seen.get_mut(row as usize) {
                Some(true) => return Err(format!("assigned row {row} twice")),
                Some(s) => *s = true,
                None => return Err(format!("assigned row {row} of {}", names.len())),
            }
            if !(0..=want.max(0)).contains(&replicas) {
                return Err(format!(
                    "assigned {replicas} replicas to row {row}; each row takes 0..={want}"
                ));
            }
            sum += i64::from(replicas);
            // A zero-replica target is checked but not named: the scheduler drops it.
            if replicas > 0 {
                out.push(TargetCluster::new(name, replicas));
            }
        }
        if request.divided && sum != i64::from(want) {
            return Err(format!(
                "assigned {sum} replicas in all, the request was for {want}"
            ));
        }
        Ok(Assignment::Assigned(out))
    }

    /// An override reply: operations that parse, applied within [`crate::patch`]'s bounds.
    pub(crate) fn override_patch(
        object: &serde_json::Value,
        reply: &Reply,
    ) -> Result<OverridePatch, String> {
        let r: OverrideReply = parse(reply.result.as_deref(), "override")?;
        if r.patch.len() > crate::patch::MAX_PATCH_OPS {
            return Err(format!(
                "override reply: {}",
                crate::patch::PatchBoundError::TooManyOps {
                    count: r.patch.len()
                }
            ));
        }
        let patch = r
            .patch
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<Vec<json_patch::PatchOperation>, _>>()
            .map_err(|e| format!("override reply: patch: {e}"))?;
        crate::patch::check(object, &patch).map_err(|e| format!("override reply: {e}"))?;
        Ok(OverridePatch {
            patch,
            applied: Vec::new(),
        })
    }
}

/// Lowest score a plugin may give (Karmada's `MinClusterScore`).
pub const MIN_SCORE: i64 = 0;
/// Highest score a plugin may give (Karmada's `MaxClusterScore`).
pub const MAX_SCORE: i64 = 100;

/// What [`fuzz_decode`] accepted, for checking against the request.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub enum FuzzDecoded {
    /// Filter: `None` fits, `Some(reason)` rejects, one per row.
    Filter(Vec<Option<String>>),
    /// Score: one per row.
    Score(Vec<i64>),
    /// Select.
    Select(Selection),
    /// Assign: rows and replicas (for `Assigned`), as (row, replicas).
    Assign(Assignment),
    /// Override: the operations.
    Override(Vec<json_patch::PatchOperation>),
}

/// The request side of [`fuzz_decode`].
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FuzzRequest<'a> {
    /// Extension point, an index into [`export::POINTS`].
    pub point: usize,
    /// Rows of the call.
    pub rows: usize,
    /// Assign: replicas requested.
    pub replicas: i32,
    /// Assign: a divided placement.
    pub divided: bool,
    /// Override: the manifest.
    pub object: &'a serde_json::Value,
}

/// Decode and validate a guest reply as the host does after a call. For fuzzing the ABI boundary;
/// never panics. Assign rows are named `c0`, `c1`, ...
///
/// # Errors
/// The invalid-output message.
#[doc(hidden)]
pub fn fuzz_decode(
    request: FuzzRequest<'_>,
    result: Option<&[u8]>,
    rows: Option<&[u8]>,
) -> Result<FuzzDecoded, String> {
    let reply = Reply {
        result: result.map(<[u8]>::to_vec),
        rows: rows.map(<[u8]>::to_vec),
    };
    let n = request.rows;
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    match request.point {
        FILTER => {
            let mut out = Vec::new();
            decode::filter(n, &reply, &mut out)?;
            Ok(FuzzDecoded::Filter(
                out.into_iter()
                    .map(|v| match v {
                        Verdict::Fit => None,
                        Verdict::Unschedulable(r) => Some(r.into_owned()),
                    })
                    .collect(),
            ))
        }
        SCORE => {
            let mut out = Vec::new();
            decode::score(n, &reply, &mut out)?;
            Ok(FuzzDecoded::Score(out))
        }
        SELECT => decode::select(n, &reply).map(FuzzDecoded::Select),
        ASSIGN => {
            let req = decode::AssignRequest {
                replicas: request.replicas,
                divided: request.divided,
            };
            decode::assign(&names, req, &reply).map(FuzzDecoded::Assign)
        }
        _ => decode::override_patch(request.object, &reply).map(|p| FuzzDecoded::Override(p.patch)),
    }
}

/// Decode and validate a guest's `flotilla_victims_v1` reply for `candidates` candidates as the
/// host does after the call: the chosen candidate positions, in the plugin's order. For fuzzing
/// the ABI boundary; never panics.
///
/// # Errors
/// The invalid-output message.
#[doc(hidden)]
pub fn fuzz_decode_victims(
    candidates: usize,
    result: Option<&[u8]>,
    rows: Option<&[u8]>,
) -> Result<Vec<usize>, String> {
    let reply = Reply {
        result: result.map(<[u8]>::to_vec),
        rows: rows.map(<[u8]>::to_vec),
    };
    decode::victims(candidates, &reply)
}

/// The export implementing `point` (for messages).
pub fn export_for(point: flotilla_core::profile::ExtensionPoint) -> &'static str {
    use flotilla_core::profile::ExtensionPoint as P;
    match point {
        P::Filter => export::FILTER,
        P::Score => export::SCORE,
        P::Select => export::SELECT,
        P::Assign => export::ASSIGN,
        P::Override => export::OVERRIDE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(result: Option<&str>, rows: Option<&[u8]>) -> Reply {
        Reply {
            result: result.map(|s| s.as_bytes().to_vec()),
            rows: rows.map(<[u8]>::to_vec),
        }
    }

    fn pairs(p: &[(u32, i32)]) -> Vec<u8> {
        p.iter()
            .flat_map(|&(r, n)| r.to_le_bytes().into_iter().chain(n.to_le_bytes()))
            .collect()
    }

    #[test]
    fn shared_binding_json_is_the_per_call_encoding() {
        use flotilla_api::policy::{ClusterAffinityTerm, Placement};
        use flotilla_api::work::ResourceBindingSpec;
        use flotilla_core::framework::SharedEncodings;
        let spec: ResourceBindingSpec = serde_json::from_value(serde_json::json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1"},
            "replicas": 5,
            "clusters": [{"name": "m1", "replicas": 2}]
        }))
        .unwrap();
        let placement: Placement = serde_json::from_value(serde_json::json!({
            "clusterAffinity": {"clusterNames": ["m1", "m2"]},
            "replicaScheduling": {"replicaSchedulingType": "Divided"}
        }))
        .unwrap();
        let term = ClusterAffinityTerm {
            affinity_name: "a".into(),
            ..Default::default()
        };
        for t in [None, Some(&term)] {
            let alone = BindingContext::new(&spec, &placement, t);
            let encodings = SharedEncodings::default();
            let shared = alone.with_encodings(Some(&encodings));
            for (replicas, mode) in [
                (None, None),
                (Some(3), Some(flotilla_abi::AssignMode::Fresh)),
                (Some(0), Some(flotilla_abi::AssignMode::Steady)),
            ] {
                let want = WasmPlugin::binding_json(&alone, SpecMembers::ALL, replicas, mode);
                assert_eq!(
                    WasmPlugin::binding_json(&shared, SpecMembers::ALL, replicas, mode),
                    want,
                    "{replicas:?} {mode:?}"
                );
                let v: serde_json::Value = serde_json::from_slice(&want).unwrap();
                assert_eq!(
                    v.get("replicas").and_then(serde_json::Value::as_i64),
                    replicas.map(i64::from)
                );
                // The placement goes once, beside the spec.
                assert_eq!(v["binding"].get("placement"), None);
                assert_eq!(v["binding"]["replicas"], 5);
                assert_eq!(v["placement"]["clusterAffinity"]["clusterNames"][1], "m2");
                // A module that declared the members it reads gets only those, through the
                // shared encodings too, and the placement still.
                let only = SpecMembers::named(&["replicas", "resource"]).unwrap();
                let declared = WasmPlugin::binding_json(&shared, only, replicas, mode);
                assert_eq!(
                    declared,
                    WasmPlugin::binding_json(&alone, only, replicas, mode)
                );
                let d: serde_json::Value = serde_json::from_slice(&declared).unwrap();
                assert_eq!(
                    d["binding"],
                    serde_json::json!({"resource": v["binding"]["resource"], "replicas": 5})
                );
                assert_eq!(d["placement"], v["placement"]);
                assert_eq!(d.get("replicas"), v.get("replicas"));
            }
        }
    }

    const DIVIDED_2: decode::AssignRequest = decode::AssignRequest {
        replicas: 2,
        divided: true,
    };

    #[test]
    fn assign_replies_in_json_and_in_binary_decode_alike() {
        let names = ["a", "b", "c"];
        // Row 0's zero replicas are checked (in range, once) but leave no target.
        let want = Assignment::Assigned(vec![TargetCluster::new("c", 2)]);
        let json = decode::assign(
            &names,
            DIVIDED_2,
            &reply(Some(r#"{"assigned":[[2,2],[0,0]]}"#), None),
        )
        .unwrap();
        let binary = decode::assign(
            &names,
            DIVIDED_2,
            &reply(None, Some(&pairs(&[(2, 2), (0, 0)]))),
        )
        .unwrap();
        assert_eq!(json, want);
        assert_eq!(binary, want);
        let none = decode::AssignRequest {
            replicas: 0,
            divided: true,
        };
        assert_eq!(
            decode::assign(&names, none, &reply(None, Some(&[]))).unwrap(),
            Assignment::Assigned(Vec::new())
        );
    }

    #[test]
    fn bad_binary_assign_replies_are_invalid_output() {
        let names = ["a", "b"];
        let err = |r: Reply| decode::assign(&names, DIVIDED_2, &r).unwrap_err();
        assert_eq!(
            err(reply(None, Some(&pairs(&[(2, 1)])))),
            "assigned row 2 of 2"
        );
        assert!(
            err(reply(None, Some(&[0; 7]))).contains("not a multiple of 8"),
            "{}",
            err(reply(None, Some(&[0; 7])))
        );
        assert!(
            err(reply(Some(r#""skip""#), Some(&pairs(&[(0, 1)]))))
                .contains("both set_result and set_rows")
        );
        assert!(err(reply(None, None)).contains("set_result was not called"));
    }

    #[test]
    fn assignments_the_request_cannot_have_are_invalid_output() {
        let names = ["a", "b"];
        let duplicated = decode::AssignRequest {
            replicas: 2,
            divided: false,
        };
        for (request, p, want) in [
            (
                DIVIDED_2,
                &[(0, i32::MAX), (1, i32::MAX)][..],
                "each row takes 0..=2",
            ),
            (duplicated, &[(0, i32::MAX)][..], "each row takes 0..=2"),
            (DIVIDED_2, &[(0, -1), (1, 3)][..], "each row takes 0..=2"),
            (DIVIDED_2, &[(0, 1), (0, 1)][..], "assigned row 0 twice"),
            (
                DIVIDED_2,
                &[(0, 1)][..],
                "assigned 1 replicas in all, the request was for 2",
            ),
        ] {
            let e = decode::assign(&names, request, &reply(None, Some(&pairs(p)))).unwrap_err();
            assert!(e.contains(want), "{p:?}: {e}");
        }
        // Duplicated: every cluster may take all the replicas.
        assert!(
            decode::assign(
                &names,
                duplicated,
                &reply(None, Some(&pairs(&[(0, 2), (1, 2)])))
            )
            .is_ok()
        );
    }

    #[test]
    fn victim_choices_out_of_range_repeated_or_in_both_forms_are_invalid_output() {
        let json = |t: &str| decode::victims(3, &reply(Some(t), None));
        assert_eq!(json(r#"{"victims":[2,0]}"#), Ok(vec![2, 0]));
        assert_eq!(json(r#"{"victims":[]}"#), Ok(vec![]));
        let bin: Vec<u8> = [1u32, 2].iter().flat_map(|p| p.to_le_bytes()).collect();
        assert_eq!(decode::victims(3, &reply(None, Some(&bin))), Ok(vec![1, 2]));
        for (bad, why) in [
            (json(r#"{"victims":[3]}"#), "chose candidate 3 of 3"),
            (json(r#"{"victims":[1,1]}"#), "chose candidate 1 twice"),
            (json(r#"{"victims":[0,1,2,0]}"#), "chose 4 victims among 3"),
            (json(r#"{"victims":[-1]}"#), "victims reply:"),
            (json(r#"{"victims":[0],"also":1}"#), "unknown field"),
            (json("not json"), "victims reply:"),
            (
                decode::victims(3, &reply(None, Some(&[0, 0, 0]))),
                "not a whole number",
            ),
            (
                decode::victims(3, &reply(Some(r#"{"victims":[]}"#), Some(&[]))),
                "both",
            ),
            (decode::victims(3, &reply(None, None)), "no victims reply"),
        ] {
            let e = bad.expect_err(why);
            assert!(e.contains(why), "{e} should say {why}");
        }
    }

    #[test]
    fn selections_out_of_range_or_repeated_are_invalid_output() {
        let sel = |json: &str| decode::select(3, &reply(Some(json), None));
        assert_eq!(
            sel(r#"{"selected":[2,0]}"#),
            Ok(Selection::Selected(vec![2, 0]))
        );
        assert_eq!(
            sel(r#"{"selected":[3]}"#).unwrap_err(),
            "selected row 3 of 3"
        );
        assert_eq!(
            sel(r#"{"selected":[1,1]}"#).unwrap_err(),
            "selected row 1 twice"
        );
    }

    #[test]
    fn scores_outside_karmadas_range_are_invalid_output() {
        let rows = |s: &[i64]| s.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut out = Vec::new();
        decode::score(2, &reply(None, Some(&rows(&[0, 100]))), &mut out).unwrap();
        assert_eq!(out, [0, 100]);
        for bad in [[-1, 0], [0, 101], [i64::MIN, i64::MAX]] {
            let mut out = Vec::new();
            let e = decode::score(2, &reply(None, Some(&rows(&bad))), &mut out).unwrap_err();
            assert!(e.contains("outside 0..=100"), "{e}");
            assert!(out.is_empty());
        }
    }

    #[test]
    fn guest_messages_are_cut_to_a_bounded_length() {
        let long = "é".repeat(64 << 10);
        let sel = decode::select(1, &reply(Some(&format!(r#"{{"failed":"{long}"}}"#)), None));
        let Ok(Selection::Failed(m)) = sel else {
            panic!("{sel:?}")
        };
        assert!(
            m.len() <= crate::MAX_MESSAGE_BYTES && m.ends_with('…'),
            "{}",
            m.len()
        );
        let a = decode::assign(
            &["a"],
            DIVIDED_2,
            &reply(Some(&format!(r#"{{"unschedulable":"{long}"}}"#)), None),
        );
        let Ok(Assignment::Unschedulable(m)) = a else {
            panic!("{a:?}")
        };
        assert!(m.len() <= crate::MAX_MESSAGE_BYTES, "{}", m.len());
        let mut out = Vec::new();
        decode::filter(
            1,
            &reply(Some(&format!(r#"{{"reasons":["{long}"]}}"#)), Some(&[1])),
            &mut out,
        )
        .unwrap();
        let Verdict::Unschedulable(r) = &out[0] else {
            panic!("{out:?}")
        };
        assert!(r.len() <= crate::MAX_MESSAGE_BYTES, "{}", r.len());
    }
}
