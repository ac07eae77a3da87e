//! An index of a cluster set by name and label, so that an affinity's verdict for every cluster
//! of the set is found with a few list lookups and bitwise operations instead of a label-selector
//! evaluation per cluster ([`ClusterIndex::matching`]). Built once per cluster-set generation by
//! the memoised `ClusterAffinity` filter and by its Wasm build. The verdicts are exactly
//! [`PreparedAffinity::matches`]'s: a randomized test checks them against it.

use std::collections::BTreeMap;

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

/// An affinity resolved against a [`ClusterIndex`].
#[derive(Debug, Clone)]
pub struct Matching<'a> {
    rows: Rows,
    fields: Option<&'a [NodeSelectorRequirement]>,
}

impl Matching<'_> {
    /// Does the affinity match `cluster`, found at `row` of the indexed set?
    /// ([`PreparedAffinity::matches`] for that cluster.)
    pub fn matches(&self, row: usize, cluster: &Cluster) -> bool {
        self.rows.contains(row)
            && self
                .fields
                .is_none_or(|f| field_selector_matches(cluster, f))
    }
}

/// The rows carrying a label key, and by value.
#[derive(Debug, Default)]
struct Label {
    any: Vec<u32>,
    values: BTreeMap<String, Vec<u32>>,
}

/// A cluster set indexed by name and by label (rows are positions in the indexed slice).
/// Memory is proportional to the clusters' names and labels, not to their product.
#[derive(Debug, Default)]
pub struct ClusterIndex {
    len: usize,
    names: BTreeMap<String, Vec<u32>>,
    labels: BTreeMap<String, Label>,
}

impl ClusterIndex {
    /// Index `clusters` (any order; rows are their positions).
    pub fn new(clusters: &[Cluster]) -> Self {
        let mut index = ClusterIndex {
            len: clusters.len(),
            ..Default::default()
        };
        for (row, c) in clusters.iter().enumerate() {
            let row = u32::try_from(row).unwrap_or(u32::MAX);
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

    /// What `affinity` matches in the indexed set: names, labels and exclusions resolved to rows
    /// here; a field selector, if any, is checked per cluster by [`Matching::matches`].
    pub fn matching<'a>(&self, affinity: &PreparedAffinity<'a>) -> Matching<'a> {
        let mut rows = Rows::all(self.len);
        if let Some(sel) = affinity.labels() {
            self.and_labels(&mut rows, sel);
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
        Matching {
            rows,
            fields: affinity.fields(),
        }
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
            let field_selector = (next(4) == 0).then(|| FieldSelector {
                match_expressions: vec![NodeSelectorRequirement {
                    key: "provider".into(),
                    operator: ["In", "NotIn"][next(2)].into(),
                    values: vec!["aws".into()],
                }],
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
            for (i, c) in clusters.iter().enumerate() {
                verdicts[usize::from(prepared.matches(c))] += 1;
                assert_eq!(
                    matching.matches(i, c),
                    prepared.matches(c),
                    "round {round}, row {i} ({c:?}) under {a:?}"
                );
            }
            assert!(!matching.rows.contains(n), "no row past the set");
            assert!(matching.rows.iter().all(|r| r < n));
        }
        // Both verdicts come up often enough for the comparison to mean something.
        assert!(verdicts[0] > 1000 && verdicts[1] > 1000, "{verdicts:?}");
    }
}
