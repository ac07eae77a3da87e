// AssemblyScript SDK for Flotilla plugins (plugin ABI v1, see sdk/ABI.md).
//
// A plugin registers handlers at top level and re-exports the ABI functions it implements:
//
//   import { onOverride, PatchOp, OverrideRequest } from "@flotilla/plugin-sdk/assembly";
//   export { flotilla_abi_version, flotilla_alloc, flotilla_dealloc, flotilla_init_v1,
//            flotilla_clusters_v1, flotilla_override_v1 } from "@flotilla/plugin-sdk/assembly";
//   onOverride((req: OverrideRequest): Array<PatchOp> => { ... });
//
// Build: asc assembly/index.ts -O3 --noAssert --runtime incremental --use abort= -o plugin.wasm
// (`--use abort=` removes the env.abort import, which the host refuses; a failed assertion or
// throw then traps, which the host reports as a plugin failure. Return errors with `fail(msg)`.)
import { Value, Kind, parse, Writer, quote } from "./json";
export { Value, Kind, parse, parseString, Writer, quote } from "./json";

@external("flotilla:host/v1", "log")
declare function hostLog(level: i32, ptr: usize, len: usize): void;
@external("flotilla:host/v1", "set_result")
declare function hostSetResult(ptr: usize, len: usize): void;
@external("flotilla:host/v1", "set_rows")
declare function hostSetRows(ptr: usize, len: usize): void;

export const ABI_VERSION: i32 = 1;
export const LOG_ERROR: i32 = 0;
export const LOG_WARN: i32 = 1;
export const LOG_INFO: i32 = 2;
export const LOG_DEBUG: i32 = 3;

// ---- host calls ------------------------------------------------------------------------------

/** Sends a log line to the host. */
export function log(level: i32, message: string): void {
  const b = String.UTF8.encode(message);
  hostLog(level, changetype<usize>(b), b.byteLength);
}

/** Passes the call's JSON reply. */
export function setResult(json: string): void {
  const b = String.UTF8.encode(json);
  hostSetResult(changetype<usize>(b), b.byteLength);
}

/** Passes the call's binary per-row reply. */
export function setRows(bytes: ArrayBuffer): void {
  hostSetRows(changetype<usize>(bytes), bytes.byteLength);
}

let failure: string | null = null;

/** Makes the current call fail with `message` (the export returns ERROR); return right after. */
export function fail(message: string): void { failure = message; }

function finish(): i32 {
  const f = failure;
  if (f !== null) {
    failure = null;
    setResult(f);
    return 1;
  }
  return 0;
}

/** Escapes a key for use in a JSON Pointer (RFC 6901). */
export function pointerEscape(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

// ---- memory ----------------------------------------------------------------------------------

export function flotilla_abi_version(): i32 { return ABI_VERSION; }
export function flotilla_alloc(len: usize): usize { return heap.alloc(len); }
export function flotilla_dealloc(ptr: usize, len: usize): void { heap.free(ptr); }

// ---- init and the cluster set ----------------------------------------------------------------

let pluginName = "";
let initHandler: ((name: string, config: Value) => void) | null = null;
let clustersHandler: ((generation: u64, clusters: Array<Value>) => void) | null = null;
let currentGeneration: u64 = 0;
let currentClusters: Array<Value> = [];

/** Registers the config handler (called once per instance; `fail` rejects the config). */
export function onInit(fn: (name: string, config: Value) => void): void { initHandler = fn; }
/** Registers a hook run after each cluster-set push (precompute per-cluster data here). */
export function onClusters(fn: (generation: u64, clusters: Array<Value>) => void): void { clustersHandler = fn; }
/** The plugin's name in the profile. */
export function name(): string { return pluginName; }
/** The cluster set held (Karmada Cluster objects, sorted by name); rows index into it. */
export function clusters(): Array<Value> { return currentClusters; }
export function generation(): u64 { return currentGeneration; }

/** A cluster's metadata.name. */
export function clusterName(c: Value): string {
  const m = c.get("metadata");
  return m !== null ? m.getString("name") : "";
}
/** A cluster's label `key`, or null when absent. */
export function clusterLabel(c: Value, key: string): string | null {
  const l = c.path(["metadata", "labels"]);
  if (l === null) return null;
  const v = l.get(key);
  return v !== null && v.kind == Kind.String ? v.str : null;
}

export function flotilla_init_v1(ptr: usize, len: usize): i32 {
  const req = parse(ptr, len);
  pluginName = req.getString("name");
  let config = req.get("config");
  if (config === null) config = new Value();
  const h = initHandler;
  if (h !== null) h(pluginName, config);
  return finish();
}

export function flotilla_clusters_v1(ptr: usize, len: usize): i32 {
  const req = parse(ptr, len);
  const g = req.get("generation");
  const cs = req.get("clusters");
  currentGeneration = g !== null ? <u64>g.num : 0;
  currentClusters = cs !== null ? cs.items : [];
  const h = clustersHandler;
  if (h !== null) h(currentGeneration, currentClusters);
  return finish();
}

function indexRows(rows: usize, n: usize): Array<Value> {
  const out = new Array<Value>(<i32>n);
  for (let i: usize = 0; i < n; i++) {
    const idx = load<u32>(rows + 4 * i);
    if (<i32>idx >= currentClusters.length) { fail("row refers to cluster " + idx.toString() + " outside the set"); return []; }
    out[<i32>i] = currentClusters[idx];
  }
  return out;
}

/** A select/assign row. */
export class DetailRow {
  cluster: Value = new Value();
  index: u32 = 0;
  overflowOrder: u32 = 0; // 0 primary affinity, i+1 i-th overflow tier, 1000 none
  score: i64 = 0;
  allocatableReplicas: i64 = 0;
  availableReplicas: i64 = 0;
}

function detailRows(rows: usize, n: usize): Array<DetailRow> {
  const out = new Array<DetailRow>(<i32>n);
  for (let i: usize = 0; i < n; i++) {
    const p = rows + 32 * i;
    const r = new DetailRow();
    r.index = load<u32>(p);
    if (<i32>r.index >= currentClusters.length) { fail("row refers to a cluster outside the set"); return []; }
    r.cluster = currentClusters[r.index];
    r.overflowOrder = load<u32>(p, 4);
    r.score = load<i64>(p, 8);
    r.allocatableReplicas = load<i64>(p, 16);
    r.availableReplicas = load<i64>(p, 24);
    out[<i32>i] = r;
  }
  return out;
}

// ---- extension points ------------------------------------------------------------------------
// Each handler gets the BindingRequest JSON ({binding, placement, affinityTerm?, replicas?, mode?}).

let filterHandler: ((req: Value, clusters: Array<Value>) => Array<string>) | null = null;
/** Filter: return one reason per cluster, "" for fit. */
export function onFilter(fn: (req: Value, clusters: Array<Value>) => Array<string>): void { filterHandler = fn; }

export function flotilla_filter_v1(ptr: usize, len: usize, rows: usize, n: usize): i32 {
  const h = filterHandler;
  if (h === null) { fail("no filter handler registered"); return finish(); }
  const req = parse(ptr, len);
  const cs = indexRows(rows, n);
  if (failure !== null) return finish();
  const reasons = h(req, cs);
  if (failure !== null) return finish();
  const verdicts = new ArrayBuffer(<i32>n);
  const distinct: Array<string> = [];
  for (let i = 0; i < <i32>n && i < reasons.length; i++) {
    if (reasons[i].length == 0) continue;
    let k = distinct.indexOf(reasons[i]);
    if (k < 0) { k = distinct.length; distinct.push(reasons[i]); }
    store<u8>(changetype<usize>(verdicts) + i, <u8>min(k + 1, 255));
  }
  setRows(verdicts);
  if (distinct.length > 0) {
    const w = new Writer().raw("{\"reasons\":[");
    for (let i = 0; i < distinct.length; i++) { if (i) w.raw(","); w.string(distinct[i]); }
    setResult(w.raw("]}").toString());
  }
  return finish();
}

let scoreHandler: ((req: Value, clusters: Array<Value>) => Array<i64>) | null = null;
/** Score: one score per cluster (0..100; the profile's weight multiplies it). */
export function onScore(fn: (req: Value, clusters: Array<Value>) => Array<i64>): void { scoreHandler = fn; }

export function flotilla_score_v1(ptr: usize, len: usize, rows: usize, n: usize): i32 {
  const h = scoreHandler;
  if (h === null) { fail("no score handler registered"); return finish(); }
  const req = parse(ptr, len);
  const cs = indexRows(rows, n);
  if (failure !== null) return finish();
  const scores = h(req, cs);
  if (failure !== null) return finish();
  if (scores.length != <i32>n) { fail("scorer returned a wrong number of scores"); return finish(); }
  const out = new ArrayBuffer(<i32>n * 8);
  for (let i = 0; i < <i32>n; i++) store<i64>(changetype<usize>(out) + 8 * i, scores[i]);
  setRows(out);
  return finish();
}

/** Select reply: row positions, or a failure message. */
export class SelectResult {
  constructor(public selected: Array<i32> = [], public failed: string = "") {}
}
let selectHandler: ((req: Value, rows: Array<DetailRow>) => SelectResult) | null = null;
/** Select: rows in Karmada's canonical order; return the positions to keep, in order. */
export function onSelect(fn: (req: Value, rows: Array<DetailRow>) => SelectResult): void { selectHandler = fn; }

export function flotilla_select_v1(ptr: usize, len: usize, rows: usize, n: usize): i32 {
  const h = selectHandler;
  if (h === null) { fail("no select handler registered"); return finish(); }
  const req = parse(ptr, len);
  const rs = detailRows(rows, n);
  if (failure !== null) return finish();
  const r = h(req, rs);
  if (failure !== null) return finish();
  if (r.failed.length > 0) setResult("{\"failed\":" + quote(r.failed) + "}");
  else setResult("{\"selected\":[" + r.selected.join(",") + "]}");
  return finish();
}

/** Assign reply: build with AssignResult.assigned / skip / unschedulable. */
export class AssignResult {
  rows: Array<i32> = [];
  replicas: Array<i32> = [];
  isSkip: bool = false;
  reason: string = "";
  /** Replicas per row position (parallel arrays). */
  static assigned(rows: Array<i32>, replicas: Array<i32>): AssignResult {
    const r = new AssignResult();
    r.rows = rows;
    r.replicas = replicas;
    return r;
  }
  static skip(): AssignResult { const r = new AssignResult(); r.isSkip = true; return r; }
  static unschedulable(reason: string): AssignResult { const r = new AssignResult(); r.reason = reason; return r; }
}
let assignHandler: ((req: Value, rows: Array<DetailRow>) => AssignResult) | null = null;
/** Assign: divide req.replicas over the selected rows (req.mode is "Steady" or "Fresh"). */
export function onAssign(fn: (req: Value, rows: Array<DetailRow>) => AssignResult): void { assignHandler = fn; }

export function flotilla_assign_v1(ptr: usize, len: usize, rows: usize, n: usize): i32 {
  const h = assignHandler;
  if (h === null) { fail("no assign handler registered"); return finish(); }
  const req = parse(ptr, len);
  const rs = detailRows(rows, n);
  if (failure !== null) return finish();
  const r = h(req, rs);
  if (failure !== null) return finish();
  if (r.isSkip) setResult("\"skip\"");
  else if (r.reason.length > 0) setResult("{\"unschedulable\":" + quote(r.reason) + "}");
  else {
    const w = new Writer().raw("{\"assigned\":[");
    for (let i = 0; i < r.rows.length; i++) {
      if (i) w.raw(",");
      w.raw("[" + r.rows[i].toString() + "," + r.replicas[i].toString() + "]");
    }
    setResult(w.raw("]}").toString());
  }
  return finish();
}

/** One RFC 6902 operation. */
export class PatchOp {
  constructor(public op: string, public path: string, public value: Value | null = null, public from: string = "") {}
  static replace(path: string, value: Value): PatchOp { return new PatchOp("replace", path, value); }
  static add(path: string, value: Value): PatchOp { return new PatchOp("add", path, value); }
  static remove(path: string): PatchOp { return new PatchOp("remove", path); }
}
/** A JSON string value. */
export function stringValue(s: string): Value {
  const v = new Value();
  v.kind = Kind.String;
  v.str = s;
  return v;
}

/** Override request: the manifest for one cluster and that cluster. */
export class OverrideRequest {
  constructor(public object: Value, public cluster: Value) {}
}
let overrideHandler: ((req: OverrideRequest) => Array<PatchOp>) | null = null;
/** Override: return the patch for req.object on req.cluster (empty: unchanged). */
export function onOverride(fn: (req: OverrideRequest) => Array<PatchOp>): void { overrideHandler = fn; }

export function flotilla_override_v1(ptr: usize, len: usize, rows: usize, n: usize): i32 {
  const h = overrideHandler;
  if (h === null) { fail("no override handler registered"); return finish(); }
  const req = parse(ptr, len);
  let object = req.get("object");
  let cluster = req.get("cluster");
  if (object === null) object = new Value();
  if (cluster === null) cluster = new Value();
  const ops = h(new OverrideRequest(object, cluster));
  if (failure !== null) return finish();
  const w = new Writer().raw("{\"patch\":[");
  for (let i = 0; i < ops.length; i++) {
    const o = ops[i];
    if (i) w.raw(",");
    w.raw("{\"op\":").string(o.op).raw(",\"path\":").string(o.path);
    const v = o.value;
    if (v !== null) w.raw(",\"value\":").value(v);
    if (o.from.length > 0) w.raw(",\"from\":").string(o.from);
    w.raw("}");
  }
  setResult(w.raw("]}").toString());
  return finish();
}

/** Resource-interpreter request (sdk/ABI.md §10): the operation and only its inputs. */
export class InterpretRequest {
  constructor(
    /** Karmada's operation name: InterpretReplica, ReviseReplica, InterpretHealth, ... */
    public operation: string,
    /** The template (Retain: the desired object); null when the operation takes none. */
    public object: Value | null,
    /** The member's copy; null when the operation takes none. */
    public observedObject: Value | null,
    /** ReviseReplica: the replicas the member gets (-1 otherwise). */
    public desiredReplicas: i64,
    /** AggregateStatus: the members' AggregatedStatusItems. */
    public statusItems: Array<Value>,
  ) {}
}
let interpretHandler: ((req: InterpretRequest) => string) | null = null;
/**
 * Resource interpreter (flotilla_interpret_v1): return the reply JSON for req.operation, with its
 * member only (e.g. `{"replicas":3}`, `{"healthy":true}`; build it with Writer), or call fail().
 */
export function onInterpret(fn: (req: InterpretRequest) => string): void { interpretHandler = fn; }

export function flotilla_interpret_v1(ptr: usize, len: usize, rows: usize, n: usize): i32 {
  const h = interpretHandler;
  if (h === null) { fail("no interpret handler registered"); return finish(); }
  const req = parse(ptr, len);
  const desired = req.get("desiredReplicas");
  const items = req.get("statusItems");
  const reply = h(new InterpretRequest(
    req.getString("operation"),
    req.get("object"),
    req.get("observedObject"),
    desired !== null && desired.kind == Kind.Number ? <i64>desired.num : -1,
    items !== null && items.kind == Kind.Array ? items.items : [],
  ));
  if (failure !== null) return finish();
  setResult(reply);
  return finish();
}
