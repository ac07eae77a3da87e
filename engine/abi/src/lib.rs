//! Flotilla's Wasm plugin ABI, version 1: the contract between the host (`flotilla-wasm`) and a
//! guest module, in one crate that builds for the host and for `wasm32` guests alike.
//!
//! Start with `sdk/ABI.md`, which explains the call sequence, the memory-ownership rules and every
//! message; this crate holds the names ([`export`], [`import`]), the status codes ([`status`]), the
//! fixed-size binary rows ([`DetailRow`]) and the JSON messages (serde types; with the `schema`
//! feature they also derive `schemars::JsonSchema`, from which `sdk/schema/*.json` are generated).
//!
//! The design in one paragraph: a plugin is a core Wasm module. The host pushes the cluster set into
//! the instance once per cluster-set *generation* ([`ClustersRequest`]) and keeps warm instances, so
//! a scheduling call carries only the binding (JSON) and a compact binary row per candidate cluster
//! (an index into the pushed set, plus scores and capacities for select/assign). One call per
//! (plugin, binding); the guest answers through one or two host imports (`set_result` for JSON,
//! `set_rows` for per-row binary answers: a verdict byte for filter, an `i64` score for score).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The ABI version this crate describes; `flotilla_abi_version()` must return it.
pub const ABI_VERSION: u32 = 1;

/// The only import module a plugin may use (besides `wasi_snapshot_preview1`, see `sdk/ABI.md`).
pub const HOST_MODULE: &str = "flotilla:host/v1";

/// Name of the optional custom section holding [`Metadata`] as JSON.
pub const CUSTOM_SECTION: &str = "flotilla.plugin";

/// The wasip1 import module, accepted with a deny-all context (clock and random only).
pub const WASI_MODULE: &str = "wasi_snapshot_preview1";

/// Guest export names. Extension-point exports carry the ABI version in their name.
pub mod export {
    /// `() -> i32`: returns [`crate::ABI_VERSION`]. Required.
    pub const ABI_VERSION: &str = "flotilla_abi_version";
    /// `(len: i32) -> i32`: a pointer to `len` writable bytes the host may fill. Required.
    pub const ALLOC: &str = "flotilla_alloc";
    /// `(ptr: i32, len: i32)`: frees a block from [`ALLOC`]. Required.
    pub const DEALLOC: &str = "flotilla_dealloc";
    /// `(json_ptr: i32, json_len: i32) -> i32`: [`crate::InitRequest`], once per instance. Optional.
    pub const INIT: &str = "flotilla_init_v1";
    /// `(json_ptr: i32, json_len: i32) -> i32`: [`crate::ClustersRequest`], once per generation. Required.
    pub const CLUSTERS: &str = "flotilla_clusters_v1";
    /// `(json_ptr, json_len, rows_ptr, rows_count) -> i32`: filter.
    pub const FILTER: &str = "flotilla_filter_v1";
    /// `(json_ptr, json_len, rows_ptr, rows_count) -> i32`: score.
    pub const SCORE: &str = "flotilla_score_v1";
    /// `(json_ptr, json_len, rows_ptr, rows_count) -> i32`: select.
    pub const SELECT: &str = "flotilla_select_v1";
    /// `(json_ptr, json_len, rows_ptr, rows_count) -> i32`: assign.
    pub const ASSIGN: &str = "flotilla_assign_v1";
    /// `(json_ptr, json_len, rows_ptr, rows_count) -> i32`: override (`rows_count` is 0).
    pub const OVERRIDE: &str = "flotilla_override_v1";
    /// `(json_ptr, json_len, rows_ptr, rows_count) -> i32`: resource interpreter
    /// ([`crate::InterpretRequest`], `rows_count` is 0). Not a profile extension point: a
    /// `ResourceInterpreterCustomization` rule names the module with `wasm: {plugin: NAME}`.
    pub const INTERPRET: &str = "flotilla_interpret_v1";
    /// `(json_ptr, json_len, rows_ptr, rows_count) -> i32`: binding preemption's victim choice
    /// ([`crate::VictimsRequest`], one [`crate::VictimRow`] per candidate). Not a profile
    /// extension point list: a profile names the module in `spec.preemption.plugin`.
    pub const VICTIMS: &str = "flotilla_victims_v1";
    /// wasip1 reactors' initializer, called once right after instantiation when exported.
    pub const WASI_INITIALIZE: &str = "_initialize";
    /// The guest's linear memory. Required.
    pub const MEMORY: &str = "memory";

    /// The extension-point exports, in profile order.
    pub const POINTS: [&str; 5] = [FILTER, SCORE, SELECT, ASSIGN, OVERRIDE];
}

/// Host import names (module [`crate::HOST_MODULE`]).
pub mod import {
    /// `(level: i32, ptr: i32, len: i32)`: a UTF-8 log line (levels in [`crate::log_level`]).
    pub const LOG: &str = "log";
    /// `(ptr: i32, len: i32)`: the call's JSON reply (or, with status [`crate::status::ERROR`], an
    /// error message). The host copies the bytes before returning.
    pub const SET_RESULT: &str = "set_result";
    /// `(ptr: i32, len: i32)`: the call's per-row binary reply (filter: one byte per row; score: one
    /// little-endian `i64` per row). The host copies the bytes before returning.
    pub const SET_ROWS: &str = "set_rows";
    /// All of them.
    pub const ALL: [&str; 3] = [LOG, SET_RESULT, SET_ROWS];
}

/// Return codes of the `flotilla_*_v1` exports. Any other value is an ABI violation.
pub mod status {
    /// Success: the reply was passed through `set_result` / `set_rows`.
    pub const OK: i32 = 0;
    /// The plugin failed; `set_result` holds a UTF-8 message.
    pub const ERROR: i32 = 1;
}

/// Levels of the `log` import.
pub mod log_level {
    /// Errors.
    pub const ERROR: i32 = 0;
    /// Warnings.
    pub const WARN: i32 = 1;
    /// Information.
    pub const INFO: i32 = 2;
    /// Debugging detail.
    pub const DEBUG: i32 = 3;
}

/// Filter reply rows: one byte per request row. `FIT` (0) passes; `k >= 1` rejects the cluster with
/// `FilterReply::reasons[k - 1]`.
pub const FIT: u8 = 0;

/// Size of a filter/score request row: the cluster's little-endian `u32` index in the pushed set.
pub const INDEX_ROW_SIZE: usize = 4;
/// Size of a score reply row: a little-endian `i64`.
pub const SCORE_ROW_SIZE: usize = 8;
/// Size of an assign reply row (the binary form of [`AssignReply::Assigned`]): a little-endian
/// `u32` row position, then the replicas as a little-endian `i32`.
pub const ASSIGN_ROW_SIZE: usize = 8;

/// Size of a victims reply row (the binary form of [`VictimsReply::victims`]): a candidate's
/// position as a little-endian `u32`.
pub const VICTIM_POSITION_SIZE: usize = 4;

/// A victims request row: one candidate, in the order of [`VictimsRequest::candidates`]. 16
/// bytes, little-endian, in this field order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VictimRow {
    /// The candidate's `spec.schedulePriority.priority`.
    pub priority: i32,
    /// Its replicas on the cluster being freed.
    pub replicas: i32,
    /// Its `creationTimestamp`, epoch seconds (`i64::MIN` when it has none).
    pub created: i64,
}

impl VictimRow {
    /// Encoded size.
    pub const SIZE: usize = 16;

    /// Encode.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.priority.to_le_bytes());
        b[4..8].copy_from_slice(&self.replicas.to_le_bytes());
        b[8..16].copy_from_slice(&self.created.to_le_bytes());
        b
    }

    /// Decode.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let mut created = [0u8; 8];
        created.copy_from_slice(&b[8..16]);
        VictimRow {
            priority: i32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            replicas: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            created: i64::from_le_bytes(created),
        }
    }
}

/// A select/assign request row: a feasible cluster with what the scheduler computed for it
/// (Karmada's `ClusterDetailInfo`). 32 bytes, little-endian, in this field order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DetailRow {
    /// Index of the cluster in the pushed set.
    pub index: u32,
    /// 0 for a primary-affinity cluster, `i + 1` for the i-th overflow tier, 1000 for none.
    pub overflow_order: u32,
    /// Sum of weighted scores.
    pub score: i64,
    /// Replicas the cluster can still take.
    pub allocatable_replicas: i64,
    /// `allocatable_replicas` plus the replicas currently assigned to the cluster.
    pub available_replicas: i64,
}

impl DetailRow {
    /// Encoded size.
    pub const SIZE: usize = 32;

    /// Encode.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.index.to_le_bytes());
        b[4..8].copy_from_slice(&self.overflow_order.to_le_bytes());
        b[8..16].copy_from_slice(&self.score.to_le_bytes());
        b[16..24].copy_from_slice(&self.allocatable_replicas.to_le_bytes());
        b[24..32].copy_from_slice(&self.available_replicas.to_le_bytes());
        b
    }

    /// Decode.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let i64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            i64::from_le_bytes(x)
        };
        DetailRow {
            index: u32_at(0),
            overflow_order: u32_at(4),
            score: i64_at(8),
            allocatable_replicas: i64_at(16),
            available_replicas: i64_at(24),
        }
    }
}

/// Contents of the optional `flotilla.plugin` custom section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The ABI version the module was built for; the host refuses any other.
    pub abi: u32,
    /// Plugin name.
    #[serde(default)]
    pub name: String,
    /// Plugin version (free text, e.g. semver).
    #[serde(default)]
    pub version: String,
    /// Extension points and imports the plugin uses (`filter`, `score`, `select`, `assign`,
    /// `override`, `log`, `wasi`), informational.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Assign plugins: the replica division strategies the plugin handles (`Duplicated`,
    /// `StaticWeight`, `DynamicWeight`, `Aggregated`, as Karmada derives them from the
    /// placement). For a binding with another strategy, or with none Karmada supports, the host
    /// answers `skip` without calling the plugin. Empty: the plugin is called for every binding.
    /// Another name refuses the module at load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strategies: Vec<String>,
    /// The members of the binding spec the plugin reads (`resource`, `replicas`,
    /// `replicaRequirements`, `clusters`, …: any member of a `ResourceBindingSpec` but
    /// `placement`). The host then sends only those in each call's `binding`, so that a plugin
    /// does not receive, and skip, what it never reads (a binding's `clusters` may list hundreds
    /// of targets). `placement` and `affinityTerm` are always sent. Empty: every member. Another
    /// name refuses the module at load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binding_fields: Vec<String>,
}

/// `flotilla_init_v1` input: once per instance, before anything else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "InitRequest"))]
pub struct InitRequest<C = Value> {
    /// The plugin's name in the profile.
    pub name: String,
    /// The profile's `config` for the plugin (`null` when absent).
    #[serde(default)]
    pub config: Option<C>,
}

/// `flotilla_clusters_v1` input: the cluster set the following calls index into. Pushed once per
/// generation and instance; the guest keeps it (parsed) until the next push.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "ClustersRequest"))]
pub struct ClustersRequest<C = Value> {
    /// Identity of the set; the same generation always means the same clusters.
    pub generation: u64,
    /// Karmada `Cluster` objects (`cluster.karmada.io/v1alpha1`), sorted by name. Rows refer to
    /// them by index.
    pub clusters: Vec<C>,
}

/// Karmada's assignment mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum AssignMode {
    /// Keep previous assignments where possible.
    Steady,
    /// Re-divide from scratch (manual reschedule).
    Fresh,
}

/// The JSON part of a filter/score/select/assign call: the binding, as every extension point
/// sees it. Rows carry the clusters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "BindingRequest"))]
pub struct BindingRequest<S = Value, P = Value, T = Value> {
    /// Karmada `ResourceBindingSpec` (`work.karmada.io/v1alpha2`), without its `placement`: the
    /// host sends that once, as `placement`.
    pub binding: S,
    /// The binding's placement (`{}` when it has none).
    pub placement: P,
    /// The `clusterAffinities` term being tried, if the placement uses ordered affinity groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_term: Option<T>,
    /// Assign only: replicas to place on the rows' clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Assign only: steady or fresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<AssignMode>,
}

/// Filter reply JSON (`set_result`), needed only when a row was rejected.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FilterReply {
    /// Distinct rejection reasons; verdict byte `k >= 1` means `reasons[k - 1]`.
    #[serde(default)]
    pub reasons: Vec<String>,
}

/// Select reply JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum SelectReply {
    /// Row positions (not cluster indices), in the order the assign step should see them.
    Selected(Vec<u32>),
    /// No acceptable selection; the message is the reason.
    Failed(String),
}

/// Assign reply JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum AssignReply {
    /// `[rowPosition, replicas]` pairs; zero-replica pairs may be omitted.
    Assigned(Vec<(u32, i32)>),
    /// Not this plugin's strategy: ask the next assigner.
    Skip,
    /// The replicas cannot be placed; the message is the reason.
    Unschedulable(String),
}

/// Override call JSON: the manifest destined for one cluster, and that cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "OverrideRequest"))]
pub struct OverrideRequest<O = Value, C = Value> {
    /// The manifest after earlier overriders.
    pub object: O,
    /// The target Karmada `Cluster`.
    pub cluster: C,
}

/// Override reply JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OverrideReply {
    /// RFC 6902 JSON Patch operations, applied in order to the object.
    #[serde(default)]
    pub patch: Vec<Value>,
}

/// `flotilla_interpret_v1` input: one resource-interpreter operation (Karmada's
/// `InterpreterOperation`) and the inputs it takes; the other members are absent.
///
/// | `operation` | members |
/// |---|---|
/// | `InterpretReplica`, `InterpretComponent`, `InterpretDependency` | `object` |
/// | `ReviseReplica` | `object`, `desiredReplicas` |
/// | `Retain` | `object` (the desired object), `observedObject` (the member's copy) |
/// | `AggregateStatus` | `object`, `statusItems` |
/// | `InterpretStatus`, `InterpretHealth` | `observedObject` |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "InterpretRequest"))]
pub struct InterpretRequest<O = Value, I = Value> {
    /// The operation, by Karmada's name (`InterpretReplica`, `ReviseReplica`, ...).
    pub operation: String,
    /// The resource template (for `Retain`: the desired object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<O>,
    /// The object as it is in a member cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_object: Option<O>,
    /// `ReviseReplica`: the replicas the member cluster gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<i64>,
    /// `AggregateStatus`: Karmada `AggregatedStatusItem`s (`clusterName`, `status`, `applied`,
    /// `appliedMessage`, `health`), one per member cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_items: Option<Vec<I>>,
}

/// `flotilla_interpret_v1` reply (`set_result`): the member of the request's operation, and no
/// other.
///
/// | `operation` | reply |
/// |---|---|
/// | `InterpretReplica` | `replicas` (required, `0..=2147483647`), `replicaRequirements` (optional) |
/// | `InterpretComponent` | `components`: `[{name, replicas, replicaRequirements?}]` |
/// | `ReviseReplica` | `patch`: a JSON merge patch (RFC 7386) applied to `object` |
/// | `Retain` | `patch`: a JSON merge patch applied to `object` (the desired object) |
/// | `AggregateStatus` | `status`: the template's new `status` (an object) |
/// | `InterpretStatus` | `status`: the status to report (an object), or `null`/absent for none |
/// | `InterpretHealth` | `healthy` (required) |
/// | `InterpretDependency` | `dependencies`: `[{apiVersion, kind, namespace?, name?, labelSelector?}]` |
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterpretReply {
    /// `InterpretReplica`: the workload's replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// `InterpretReplica`: Karmada `ReplicaRequirements` of one replica (`nodeClaim`,
    /// `resourceRequest`, `namespace`, `priorityClassName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<Value>,
    /// `InterpretComponent`: Karmada `Component`s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Value>>,
    /// `ReviseReplica`, `Retain`: a JSON merge patch for `object`; it may not change
    /// `apiVersion`, `kind`, `metadata.name` or `metadata.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
    /// `AggregateStatus`, `InterpretStatus`: a status object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// `InterpretHealth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// `InterpretDependency`: Karmada `DependentObjectReference`s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<Value>>,
}

/// `flotilla_victims_v1` input: binding preemption found no room for `preemptor` and asks which
/// of the bindings on `cluster` may be evicted for it. Candidates come in the built-in order
/// (lowest priority, then most replicas there, then newest, then name), each with a lower
/// priority than the preemptor; rows repeat what the host already computed for each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", schemars(rename = "VictimsRequest"))]
pub struct VictimsRequest<B = Value, C = Value> {
    /// The Karmada `ResourceBinding` (or `ClusterResourceBinding`) that fits nowhere.
    pub preemptor: B,
    /// The Karmada `Cluster` being freed.
    pub cluster: C,
    /// The bindings that could lose the cluster, whole.
    pub candidates: Vec<B>,
}

/// `flotilla_victims_v1` reply (`set_result`), or its binary form (`set_rows`: one
/// little-endian `u32` position per victim), never both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VictimsReply {
    /// Positions in `candidates` that may be evicted, each at most once, in the order to take
    /// them within a priority (lower priorities still go first); the others are spared.
    pub victims: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_row_round_trips() {
        let r = DetailRow {
            index: 7,
            overflow_order: 1000,
            score: -3,
            allocatable_replicas: 1 << 40,
            available_replicas: 5,
        };
        assert_eq!(DetailRow::from_bytes(&r.to_bytes()), r);
        let v = VictimRow {
            priority: -5,
            replicas: 3,
            created: i64::MIN,
        };
        assert_eq!(VictimRow::from_bytes(&v.to_bytes()), v);
    }

    #[test]
    fn replies_have_the_documented_shape() {
        assert_eq!(
            serde_json::to_string(&AssignReply::Skip).unwrap(),
            r#""skip""#
        );
        assert_eq!(
            serde_json::to_string(&AssignReply::Assigned(vec![(0, 3)])).unwrap(),
            r#"{"assigned":[[0,3]]}"#
        );
        assert_eq!(
            serde_json::to_string(&SelectReply::Selected(vec![2, 0])).unwrap(),
            r#"{"selected":[2,0]}"#
        );
        assert_eq!(
            serde_json::from_str::<AssignReply>(r#"{"unschedulable":"no"}"#).unwrap(),
            AssignReply::Unschedulable("no".into())
        );
    }
}
