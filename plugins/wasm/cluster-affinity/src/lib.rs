//! The built-in `ClusterAffinity` filter as a Wasm plugin: the same code (flotilla-plugins) behind
//! the plugin ABI, for backend parity tests and as the reference Rust plugin.
//!
//! A call parses only what the filter reads ([`Fields`]): what makes the binding a workload
//! (`replicas`, `replicaRequirements`, `components`), and, kept as text, the placement's
//! `clusterAffinity` and the affinity term. That text and the workload flag key a memo (per
//! cluster-set generation) of the parsed affinity and each cluster's verdict, so a binding whose
//! affinity was seen before is not parsed again and costs one lookup per row; a new one resolves
//! against an index of the cluster set (by name and label, built when the set is pushed) for every
//! row at once, as the native memoised filter does. Affinities with CEL
//! selectors are parsed once too, but evaluated every time. The rest of the binding is skipped.

use flotilla_api::cluster::Cluster;
use flotilla_api::policy::{ClusterAffinity as Affinity, ClusterAffinityTerm, Placement};
use flotilla_api::work::{ReplicaRequirements, ResourceBindingSpec};
use serde::de::IgnoredAny;
use flotilla_core::cluster_index::ClusterIndex;
use flotilla_core::expression;
use flotilla_core::selector::SelectorView;
use flotilla_core::framework::{BindingContext, FilterInput, FilterPlugin, Verdict};
use flotilla_plugins::filter::AffinityMatcher;
use flotilla_pdk::abi::{BindingRequest, InitRequest};
use flotilla_pdk::{FilterOut, KeyedMemo, Plugin, Raw};

/// The native filter's reason for a mismatch (plans must be identical).
const MISMATCH: &str = "cluster(s) did not match the placement cluster affinity constraint";
/// Distinct affinities remembered per cluster set before the memo starts over.
const MEMO_LIMIT: usize = 512;

/// The binding fields the filter reads, as a `ResourceBindingSpec`: only whether it is a workload
/// (`ResourceBindingSpec::is_workload`) matters, so contents are not kept.
#[derive(serde::Deserialize)]
#[serde(from = "SpecFields")]
pub struct Spec(ResourceBindingSpec);

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecFields {
    #[serde(default)]
    replicas: i32,
    #[serde(default)]
    replica_requirements: Option<IgnoredAny>,
    #[serde(default)]
    components: Vec<IgnoredAny>,
}

impl From<SpecFields> for Spec {
    fn from(f: SpecFields) -> Self {
        Spec(ResourceBindingSpec {
            replicas: f.replicas,
            replica_requirements: f.replica_requirements.map(|_| ReplicaRequirements::default()),
            components: vec![flotilla_pdk::serde_json::Value::Null; f.components.len()],
            ..Default::default()
        })
    }
}

/// The placement's `clusterAffinity`, unparsed (absent: `None`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementText {
    #[serde(default)]
    cluster_affinity: Option<Raw>,
}

/// What a call parses.
pub type Fields = BindingRequest<Spec, PlacementText, Raw>;

/// What the memo keeps per affinity text and workload flag.
struct Entry {
    /// The placement with only `clusterAffinity` set.
    placement: Placement,
    term: Option<ClusterAffinityTerm>,
    /// Whether the affinity has CEL selectors (evaluated on every call, not memoised).
    cel: bool,
    /// Per row: 1 fits, 2 does not (0: not evaluated yet, before the first call).
    verdicts: Vec<u8>,
}

/// The plugin.
pub struct ClusterAffinity {
    /// Rows in the pushed cluster set.
    rows: usize,
    memo: KeyedMemo<Entry>,
    /// The memo key of the current call (kept to reuse its allocation).
    key: String,
    /// The cluster set by name and label: an affinity the memo has not seen resolves against it
    /// for every row at once.
    index: ClusterIndex,
}

fn parse<T: serde::de::DeserializeOwned>(raw: Option<&Raw>, what: &str) -> Result<Option<T>, String> {
    raw.map(|r| flotilla_pdk::serde_json::from_str(r.get()).map_err(|e| format!("{what}: {e}"))).transpose()
}

impl Plugin for ClusterAffinity {
    /// Clusters are taken in as selectors read them (the rest of each object is skipped).
    type Cluster = SelectorView;
    type Binding = Fields;

    fn new(_init: InitRequest) -> Result<Self, String> {
        Ok(ClusterAffinity { rows: 0, memo: KeyedMemo::new(MEMO_LIMIT), key: String::new(), index: ClusterIndex::default() })
    }

    fn cluster_set(&mut self, clusters: &[SelectorView]) {
        self.rows = clusters.len();
        self.index = ClusterIndex::new(clusters.iter().map(|v| &v.0));
        self.memo.clear();
    }

    /// By row (the host's rows index the pushed set, in range): the memo is indexed by the row
    /// itself, with no cluster lookup per row.
    fn filter_rows(&mut self, b: &Self::Binding, rows: &[u32], set: &[SelectorView], out: &mut FilterOut) -> Result<(), String> {
        let spec = &b.binding.0;
        // JSON text has no raw NUL, so the parts cannot run into each other.
        self.key.clear();
        self.key.push_str(b.placement.cluster_affinity.as_ref().map_or("", |r| r.get()));
        self.key.push('\0');
        self.key.push_str(b.affinity_term.as_ref().map_or("", |r| r.get()));
        self.key.push_str(if spec.is_workload() { "\0w" } else { "\0" });
        let len = self.rows;
        let entry = self.memo.get_or_try_insert(&self.key, || {
            let affinity: Option<Affinity> = parse(b.placement.cluster_affinity.as_ref(), "placement.clusterAffinity")?;
            let term: Option<ClusterAffinityTerm> = parse(b.affinity_term.as_ref(), "affinityTerm")?;
            let cel = expression::has_cel(flotilla_plugins::filter::affinity_cel(affinity.as_ref(), term.as_ref()));
            Ok::<_, String>(Entry { placement: Placement { cluster_affinity: affinity, ..Default::default() }, term, cel, verdicts: vec![0; len] })
        })?;
        let ctx = BindingContext::new(spec, &entry.placement, entry.term.as_ref());
        if entry.cel {
            let mut verdicts = Vec::with_capacity(rows.len());
            let plain: Vec<&Cluster> = rows.iter().filter_map(|&r| set.get(r as usize)).map(|v| &v.0).collect();
            flotilla_plugins::filter::ClusterAffinity.filter(&FilterInput::new(&ctx, &plain), &mut verdicts).map_err(|e| e.to_string())?;
            for v in verdicts {
                match v {
                    Verdict::Fit => out.fit(),
                    Verdict::Unschedulable(reason) => out.unfit(&reason),
                }
            }
            return Ok(());
        }
        let memo = &mut entry.verdicts;
        // A new entry resolves against the cluster set's index for every row at once; then each
        // row's verdict is one lookup.
        if memo.first() == Some(&0) {
            let indexed = AffinityMatcher::new(&ctx).indexed(&self.index);
            for (i, v) in memo.iter_mut().enumerate() {
                *v = if indexed.matches(i) { 1 } else { 2 };
            }
        }
        out.extend(rows.iter().map(|&r| memo.get(r as usize) == Some(&1)), MISMATCH);
        Ok(())
    }
}

flotilla_pdk::export_plugin!(ClusterAffinity, name = "ClusterAffinity", version = "0.1.0", points = [filter], binding = ["replicas", "replicaRequirements", "components"]);
