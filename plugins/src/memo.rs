//! Per-snapshot-generation memo of the built-ins whose answer for a cluster depends only on a few
//! placement fields (the memo key) and the cluster: `ClusterAffinity`'s verdict per affinity,
//! `StaticWeight`'s weight per rule list. The Wasm builds of both keep the same memo.
//!
//! One slot per distinct key, one cell per snapshot row. The lock is held only to find or insert a
//! slot; cells are atomics filled on first use (racing fills store the same value), so bindings
//! scheduled concurrently read and fill them without locking.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use flotilla_api::cluster::Cluster;
use flotilla_core::framework::{ClusterSnapshot, FilterInput};

/// Most distinct keys kept per generation; inserting one more starts over with an empty memo.
pub(crate) const MAX_KEYS: usize = 512;

/// One memoised value per snapshot row.
pub(crate) trait Cell: Send + Sync {
    /// The value.
    type Value: Copy;
    /// A cell holding no value yet.
    fn empty() -> Self;
    /// The value, once stored.
    fn load(&self) -> Option<Self::Value>;
    /// Store `value`.
    fn store(&self, value: Self::Value);
}

/// A yes/no answer (0: none yet).
impl Cell for AtomicU8 {
    type Value = bool;
    fn empty() -> Self {
        AtomicU8::new(0)
    }
    fn load(&self) -> Option<bool> {
        match self.load(Ordering::Relaxed) {
            0 => None,
            v => Some(v == 2),
        }
    }
    fn store(&self, value: bool) {
        self.store(1 + u8::from(value), Ordering::Relaxed);
    }
}

/// A number (`i64::MIN`: none yet; a computed `i64::MIN` is recomputed on every use).
impl Cell for AtomicI64 {
    type Value = i64;
    fn empty() -> Self {
        AtomicI64::new(i64::MIN)
    }
    fn load(&self) -> Option<i64> {
        Some(self.load(Ordering::Relaxed)).filter(|&v| v != i64::MIN)
    }
    fn store(&self, value: i64) {
        self.store(value, Ordering::Relaxed);
    }
}

/// The values for one key: one cell per row of the snapshot it was made for.
pub(crate) struct Slot<K, C> {
    key: K,
    cells: Box<[C]>,
}

impl<K, C: Cell> Slot<K, C> {
    /// The value for `cluster`, found at `row` of `clusters` (the snapshot's) and computed by
    /// `compute` the first time. Computed without the memo when `row` does not hold `cluster`.
    pub(crate) fn get(
        &self,
        clusters: &[Cluster],
        row: u32,
        cluster: &Cluster,
        compute: impl FnOnce() -> C::Value,
    ) -> C::Value {
        let row = row as usize;
        match self.cells.get(row) {
            Some(cell) if clusters.get(row).is_some_and(|c| std::ptr::eq(c, cluster)) => {
                cell.load().unwrap_or_else(|| {
                    let value = compute();
                    cell.store(value);
                    value
                })
            }
            _ => compute(),
        }
    }
}

/// Slots of one snapshot generation, found by the key's hash.
struct Generation<K, C> {
    generation: u64,
    keys: usize,
    slots: HashMap<u64, Vec<Arc<Slot<K, C>>>>,
}

/// The memo: the slots of the newest snapshot generation seen. A binding of an older generation
/// (in flight while the cluster set changed) is answered without it, so concurrent bindings of
/// two generations do not make it start over back and forth.
pub(crate) struct RowMemo<K, C> {
    current: RwLock<Generation<K, C>>,
}

impl<K, C> Default for RowMemo<K, C> {
    fn default() -> Self {
        RowMemo {
            current: RwLock::new(Generation {
                generation: 0,
                keys: 0,
                slots: HashMap::new(),
            }),
        }
    }
}

impl<K, C> std::fmt::Debug for RowMemo<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowMemo").finish_non_exhaustive()
    }
}

impl<K, C: Cell> RowMemo<K, C> {
    /// The slot for the key hashing to `hash` and satisfying `is_key` in `snapshot`'s generation,
    /// made with the key `make` returns on a miss. `None` for generation 0 (an ad-hoc set) and for
    /// generations older than the memo's.
    pub(crate) fn slot(
        &self,
        snapshot: &ClusterSnapshot<'_>,
        hash: u64,
        is_key: impl Fn(&K) -> bool,
        make: impl FnOnce() -> K,
    ) -> Option<Arc<Slot<K, C>>> {
        let generation = snapshot.generation;
        if generation == 0 {
            return None;
        }
        let find = |g: &Generation<K, C>| {
            g.slots
                .get(&hash)
                .and_then(|s| s.iter().find(|s| is_key(&s.key)))
                .cloned()
        };
        {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            match generation.cmp(&current.generation) {
                std::cmp::Ordering::Less => return None,
                std::cmp::Ordering::Equal => {
                    if let Some(slot) = find(&current) {
                        return Some(slot);
                    }
                }
                std::cmp::Ordering::Greater => {}
            }
        }
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if generation > current.generation {
            *current = Generation {
                generation,
                keys: 0,
                slots: HashMap::new(),
            };
        }
        if generation != current.generation {
            return None;
        }
        if let Some(slot) = find(&current) {
            return Some(slot);
        }
        if current.keys >= MAX_KEYS {
            current.slots.clear();
            current.keys = 0;
        }
        let slot = Arc::new(Slot {
            key: make(),
            cells: snapshot.clusters.iter().map(|_| C::empty()).collect(),
        });
        current
            .slots
            .entry(hash)
            .or_default()
            .push(Arc::clone(&slot));
        current.keys += 1;
        Some(slot)
    }
}

/// Per snapshot generation, one value per row, made on first use and kept for the generation:
/// what depends on the cluster alone, not on a memo key (e.g. the reason texts of its taints).
pub(crate) struct PerRow<T> {
    current: RwLock<(u64, Arc<[OnceLock<T>]>)>,
}

impl<T> Default for PerRow<T> {
    fn default() -> Self {
        PerRow {
            current: RwLock::new((0, Arc::new([]))),
        }
    }
}

impl<T> std::fmt::Debug for PerRow<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerRow").finish_non_exhaustive()
    }
}

impl<T> PerRow<T> {
    /// The cells of `snapshot`'s generation, one per row. `None` for generation 0 (an ad-hoc set)
    /// and for generations older than the current one.
    pub(crate) fn cells(&self, snapshot: &ClusterSnapshot<'_>) -> Option<Arc<[OnceLock<T>]>> {
        let generation = snapshot.generation;
        if generation == 0 {
            return None;
        }
        {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            if current.0 == generation {
                return Some(Arc::clone(&current.1));
            }
            if current.0 > generation {
                return None;
            }
        }
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.0 < generation {
            *current = (
                generation,
                snapshot.clusters.iter().map(|_| OnceLock::new()).collect(),
            );
        }
        (current.0 == generation).then(|| Arc::clone(&current.1))
    }
}

/// A filter call's memo: the snapshot, the input's rows (one per cluster) and the key's slot.
pub(crate) type FilterMemo<'i, K, C> = (ClusterSnapshot<'i>, &'i [u32], Arc<Slot<K, C>>);

impl<K, C: Cell> RowMemo<K, C> {
    /// A filter call's memo: the snapshot, the input's rows and the slot of the key `hash` writes
    /// (see [`RowMemo::slot`]), when the binding has a snapshot and the input a row for each of
    /// its clusters; `None` otherwise (the filter then computes without the memo).
    pub(crate) fn filter_slot<'i>(
        &self,
        input: &FilterInput<'i>,
        hash: impl FnOnce(&mut KeyHash),
        is_key: impl Fn(&K) -> bool,
        make: impl FnOnce() -> K,
    ) -> Option<FilterMemo<'i, K, C>> {
        let (Some(snapshot), Some(rows)) = (input.binding.snapshot, input.rows) else {
            return None;
        };
        if rows.len() != input.clusters.len() {
            return None;
        }
        let mut h = KeyHash::default();
        hash(&mut h);
        let slot = self.slot(&snapshot, h.finish(), is_key, make)?;
        Some((snapshot, rows, slot))
    }
}

/// A memo key's hash, from its JSON (equal keys write equal JSON; slots compare the keys
/// themselves, so the hash only has to agree for equal keys).
#[derive(Default)]
pub(crate) struct KeyHash(DefaultHasher);

impl KeyHash {
    /// The hash of everything written.
    pub(crate) fn finish(&self) -> u64 {
        self.0.finish()
    }
}

impl std::io::Write for KeyHash {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo_keys(memo: &RowMemo<u64, AtomicU8>) -> (u64, usize) {
        let current = memo.current.read().expect("lock");
        (current.generation, current.keys)
    }

    #[test]
    fn keys_are_capped_and_generations_only_move_forward() {
        let clusters = [Cluster::default(), Cluster::default()];
        let index = std::sync::OnceLock::new();
        let snapshot = |generation| ClusterSnapshot {
            generation,
            clusters: &clusters,
            index: &index,
        };
        let memo = RowMemo::<u64, AtomicU8>::default();
        let slot =
            |generation, key: u64| memo.slot(&snapshot(generation), key, |k| *k == key, || key);
        for key in 0..MAX_KEYS as u64 {
            assert!(slot(5, key).is_some());
        }
        assert_eq!(memo_keys(&memo), (5, MAX_KEYS));
        // Found, not added.
        assert!(Arc::ptr_eq(
            &slot(5, 3).expect("slot"),
            &slot(5, 3).expect("slot")
        ));
        assert_eq!(memo_keys(&memo), (5, MAX_KEYS));
        // One more key: start over.
        assert!(slot(5, u64::MAX).is_some());
        assert_eq!(memo_keys(&memo), (5, 1));
        // An older generation and an ad-hoc set (0) go without; a newer one starts over.
        assert!(slot(4, 1).is_none() && slot(0, 1).is_none());
        assert_eq!(memo_keys(&memo), (5, 1));
        let newer = slot(6, 1).expect("slot");
        assert_eq!(memo_keys(&memo), (6, 1));
        // Cells: filled once, per row; a row not holding the cluster is computed every time.
        assert!(newer.get(&clusters, 1, &clusters[1], || true));
        assert!(newer.get(&clusters, 1, &clusters[1], || false));
        assert!(!newer.get(&clusters, 0, &clusters[1], || false));
        assert!(!newer.get(&clusters, 9, &clusters[1], || false));
    }
}
