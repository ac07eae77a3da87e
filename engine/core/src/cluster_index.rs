//! An index of a cluster set by name, label and field values, so that an affinity's verdict for
//! every cluster of the set is found with a few list lookups and bitwise operations instead of a
//! selector evaluation per cluster ([`ClusterIndex::matching`]). Built once per cluster-set
//! generation: the pipeline's snapshot keeps one for the native memoised `ClusterAffinity` filter
//! and `StaticWeight` assigner ([`crate::framework::ClusterSnapshot::index`]), and their Wasm
//! builds build one when a set is pushed. The verdicts are exactly [`PreparedAffinity::matches`]'s: a randomized test
//! checks them against it.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use flotilla_api::cluster::Cluster;
use flotilla_api::meta::{LabelSelector, NodeSelectorRequirement};

use crate::selector::{PreparedAffinity, field_selector_matches};

/// One bit per row of the indexed cluster set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    words: Vec<u64>,
    len: usize,
}

impl Rows {
    fn none(len: usize) -> Self {
        Rows {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    fn all(len: usize) -> Self {
        let mut r = Rows {
            words: vec![u64::MAX; len.div_ceil(64)],
            len,
        };
        r.trim();
        r
    }

    /// Clear the bits past `len` in the last word.
    fn trim(&mut self) {
        let extra = self.words.len() * 64 - self.len;
        if extra > 0
            && let Some(last) = self.words.last_mut()
        {
            *last &= u64::MAX >> extra;
        }
    }

    fn of(len: usize, rows: &[u32]) -> Self {
        let mut r = Rows::none(len);
        for &i in rows {
            r.set(i as usize);
        }
        r
    }

    fn set(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] |= 1 << (i % 64);
        }
    }

    fn clear(&mut self, i: usize) {
        if i < self.len {
            self.words[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Whether row `i` is set (rows past the set are not).
    pub fn contains(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    fn and(&mut self, other: &Rows) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }

    fn and_not(&mut self, other: &Rows) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
    }

    fn or(&mut self, other: &Rows) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    fn clear_all(&mut self) {
        self.words.fill(0);
    }

    fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The set rows, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    w * 64 + b
                })
            })
        })
    }
}

/// An affinity resolved against a [`ClusterIndex`]: the rows it matches.
#[derive(Debug, Clone)]
pub struct Matching {
    rows: Rows,
}

impl Matching {
    /// Does the affinity match the cluster at `row` of the indexed set?
    /// ([`PreparedAffinity::matches`] for that cluster.)
    pub fn matches(&self, row: usize) -> bool {
        self.rows.contains(row)
    }

    /// The matched rows, ascending.
    pub fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.rows.iter()
    }
}

/// A hash of names and label text a word at a time: lookups cost one hash and one comparison
/// rather than a tree search's many (names often share long prefixes, and a Wasm build's `memcmp`
/// is a byte loop). The keys are the cluster set's own names and labels; a lookup's text only
/// selects a bucket.
#[derive(Default)]
struct WordHasher(u64);

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn finish(&self) -> u64 {
        // Mixed down, so that the table's bucket bits depend on every word.
        let h = self.0;
        (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (h >> 32)
    }
}

type Map<V> = HashMap<String, V, BuildHasherDefault<WordHasher>>;

/// The rows carrying a label key, and by value.
#[derive(Debug, Default)]
struct Label {
    any: Vec<u32>,
    values: Map<Vec<u32>>,
}

/// The rows whose clusters carry the same values of what a field selector reads
/// (`spec.provider`, `spec.region`, `spec.zones`: [`field_selector_matches`]), and a cluster with
/// only those values set to evaluate a selector on once for all of them.
#[derive(Debug)]
struct FieldGroup {
    fields: Cluster,
    rows: Vec<u32>,
}

/// A cluster set indexed by name, by label and by field values (rows are positions in the indexed
/// slice). Memory is proportional to the clusters' names and labels, not to their product.
#[derive(Debug, Default)]
pub struct ClusterIndex {
    len: usize,
    names: Map<Vec<u32>>,
    labels: Map<Label>,
    fields: Vec<FieldGroup>,
}

impl ClusterIndex {
    /// Index `clusters` (any order; rows are their positions).
    pub fn new<'c>(clusters: impl IntoIterator<Item = &'c Cluster>) -> Self {
        let mut index = ClusterIndex::default();
        let mut groups: BTreeMap<(&str, &str, &[String]), usize> = BTreeMap::new();
        for (row, c) in clusters.into_iter().enumerate() {
            index.len = row + 1;
            let row = u32::try_from(row).unwrap_or(u32::MAX);
            let spec = &c.spec;
            let key = (
                spec.provider.as_str(),
                spec.region.as_str(),
                spec.zones.as_slice(),
            );
            let g = *groups.entry(key).or_insert_with(|| {
                let mut fields = Cluster::default();
                fields.spec.provider.clone_from(&spec.provider);
                fields.spec.region.clone_from(&spec.region);
                fields.spec.zones.clone_from(&spec.zones);
                index.fields.push(FieldGroup {
                    fields,
                    rows: Vec::new(),
                });
                index.fields.len() - 1
            });
            index.fields[g].rows.push(row);
            index
                .names
                .entry(c.name().to_owned())
                .or_default()
                .push(row);
            for (k, v) in c.labels() {
                let label = index.labels.entry(k.clone()).or_default();
                label.any.push(row);
                label.values.entry(v.clone()).or_default().push(row);
            }
        }
        index
    }

    /// Rows in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What `affinity` matches in the indexed set: names, labels, field values and exclusions
    /// resolved to rows (a field selector is evaluated once per group of clusters with the same
    /// field values).
    pub fn matching(&self, affinity: &PreparedAffinity<'_>) -> Matching {
        let mut rows = Rows::all(self.len);
        if let Some(sel) = affinity.labels() {
            self.and_labels(&mut rows, sel);
        }
        if let Some(fields) = affinity.fields() {
            self.and_fields(&mut rows, fields);
        }
        let rows_of = |n: &String| self.names.get(n.as_str()).map_or(&[][..], Vec::as_slice);
        if !affinity.cluster_names().is_empty() {
            let mut named = Rows::none(self.len);
            for &r in affinity.cluster_names().iter().flat_map(rows_of) {
                named.set(r as usize);
            }
            rows.and(&named);
        }
        for &r in affinity.exclude().iter().flat_map(rows_of) {
            rows.clear(r as usize);
        }
        Matching { rows }
    }

    /// `rows &=` the rows whose field values `exprs` matches ([`field_selector_matches`]).
    fn and_fields(&self, rows: &mut Rows, exprs: &[NodeSelectorRequirement]) {
        let mut matched = Rows::none(self.len);
        for g in self
            .fields
            .iter()
            .filter(|g| field_selector_matches(&g.fields, exprs))
        {
            for &r in &g.rows {
                matched.set(r as usize);
            }
        }
        rows.and(&matched);
    }

    /// `rows &=` the rows `sel` matches ([`crate::selector::label_selector_matches`]).
    fn and_labels(&self, rows: &mut Rows, sel: &LabelSelector) {
        let none: &[u32] = &[];
        let any = |k: &str| self.labels.get(k).map_or(none, |l| l.any.as_slice());
        let valued = |k: &str, v: &str| {
            self.labels
                .get(k)
                .and_then(|l| l.values.get(v))
                .map_or(none, Vec::as_slice)
        };
        for (k, v) in &sel.match_labels {
            rows.and(&Rows::of(self.len, valued(k, v)));
        }
        for req in &sel.match_expressions {
            if rows.is_empty() {
                return;
            }
            let in_values = || {
                let mut r = Rows::none(self.len);
                for v in &req.values {
                    r.or(&Rows::of(self.len, valued(&req.key, v)));
                }
                r
            };
            match req.operator.as_str() {
                "In" if !req.values.is_empty() => rows.and(&in_values()),
                "NotIn" if !req.values.is_empty() => rows.and_not(&in_values()),
                "Exists" if req.values.is_empty() => rows.and(&Rows::of(self.len, any(&req.key))),
                "DoesNotExist" if req.values.is_empty() => {
                    rows.and_not(&Rows::of(self.len, any(&req.key)));
                }
                _ => rows.clear_all(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::meta::LabelSelectorRequirement;
    use flotilla_api::policy::{ClusterAffinity, FieldSelector};

    use crate::selector::SelectorView;

    #[test]
    fn index_verdicts_are_the_per_cluster_verdicts() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        };
        let keys = ["env", "tier", "zone", "gpu", ""];
        let values = ["a", "b", "c", "", "prod"];
        let ops = ["In", "NotIn", "Exists", "DoesNotExist", "Bogus", ""];
        let mut verdicts = [0usize; 2];
        for round in 0..300 {
            // Sets of 0..150 clusters, some names repeated, labels from a small pool.
            let n = next(150);
            let clusters: Vec<Cluster> = (0..n)
                .map(|i| {
                    let mut c = Cluster::default();
                    c.metadata.name = Some(format!("m{}", next(n + 5)));
                    for _ in 0..next(4) {
                        c.metadata.labels.insert(
                            keys[next(keys.len())].into(),
                            values[next(values.len())].into(),
                        );
                    }
                    c.spec.provider = ["", "aws", "gcp"][i % 3].into();
                    // Fields a selector does not read, skipped by `SelectorView`.
                    c.spec.zone = "z1".into();
                    c.metadata.annotations.insert("note".into(), "x".into());
                    c.spec.region = ["", "eu", "us", "10"][next(4)].into();
                    c.spec.zones = (0..next(3))
                        .map(|_| ["z1", "z2", ""][next(3)].into())
                        .collect();
                    c
                })
                .collect();
            let mut pick_names = |k: usize| -> Vec<String> {
                (0..next(k)).map(|_| format!("m{}", next(n + 8))).collect()
            };
            let cluster_names = pick_names(if round % 2 == 0 { 6 } else { 60 });
            let exclude = pick_names(if round % 3 == 0 { 3 } else { 30 });
            let label_selector = (next(4) != 0).then(|| LabelSelector {
                match_labels: (0..next(3))
                    .map(|_| {
                        (
                            keys[next(keys.len())].into(),
                            values[next(values.len())].into(),
                        )
                    })
                    .collect(),
                match_expressions: (0..next(4))
                    .map(|_| LabelSelectorRequirement {
                        key: keys[next(keys.len())].into(),
                        operator: ops[next(ops.len())].into(),
                        values: (0..next(3))
                            .map(|_| values[next(values.len())].into())
                            .collect(),
                    })
                    .collect(),
            });
            let field_ops = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"];
            let field_values = ["aws", "eu", "z1", "z2", "", "5", "20"];
            let field_selector = (next(3) == 0).then(|| FieldSelector {
                match_expressions: (0..next(3) + 1)
                    .map(|_| NodeSelectorRequirement {
                        key: ["provider", "region", "zone", "", "other"][next(5)].into(),
                        operator: field_ops[next(field_ops.len())].into(),
                        values: (0..next(3))
                            .map(|_| field_values[next(field_values.len())].into())
                            .collect(),
                    })
                    .collect(),
            });
            let a = ClusterAffinity {
                cluster_names,
                exclude,
                label_selector,
                field_selector,
                ..Default::default()
            };
            let index = ClusterIndex::new(&clusters);
            let prepared = PreparedAffinity::new(&a);
            let matching = index.matching(&prepared);
            // The same clusters as a selector-only reader takes them in from JSON.
            let views: Vec<SelectorView> = clusters
                .iter()
                .map(|c| serde_json::from_value(serde_json::to_value(c).unwrap()).unwrap())
                .collect();
            let from_views = ClusterIndex::new(views.iter().map(|v| &v.0)).matching(&prepared);
            for (i, c) in clusters.iter().enumerate() {
                verdicts[usize::from(prepared.matches(c))] += 1;
                assert_eq!(
                    matching.matches(i),
                    prepared.matches(c),
                    "round {round}, row {i} ({c:?}) under {a:?}"
                );
                assert_eq!(prepared.matches(&views[i].0), prepared.matches(c));
                assert_eq!(from_views.matches(i), matching.matches(i));
            }
            assert!(!matching.rows.contains(n), "no row past the set");
            assert!(matching.rows.iter().all(|r| r < n));
        }
        // Both verdicts come up often enough for the comparison to mean something.
        assert!(verdicts[0] > 1000 && verdicts[1] > 1000, "{verdicts:?}");
    }
}
