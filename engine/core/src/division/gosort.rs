//! Go's `sort.Sort` (and `sort.Slice`, which runs the same algorithm), step for step.
//!
//! Go sorts with pattern-defeating quicksort (Go ≥ 1.19, `sort/zsortinterface.go`): insertion
//! sort up to 12 elements, Tukey's ninther or median-of-three pivots, a deterministic xorshift to
//! break patterns, heapsort after too many unbalanced partitions. It is not stable, but it is
//! deterministic: for the same input order and the same `less`, elements that compare equal always
//! end up in the same places. Karmada sorts its available-replica lists this way and then keeps a
//! prefix of them, so reproducing where Go puts ties is part of reproducing Karmada's placements.
//!
//! The functions below follow Go's one for one (same comparisons, same swaps, in the same order),
//! over a slice and a `less` closure instead of `sort.Interface`.

/// Sort `v` exactly as Go's `sort.Sort` sorts a `sort.Interface` over the same elements whose
/// `Less(i, j)` is `less(&v[i], &v[j])`: the same final order, ties included.
pub fn go_sort<T>(v: &mut [T], less: impl FnMut(&T, &T) -> bool) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    // `bits.Len(uint(n))`.
    let limit = usize::BITS - n.leading_zeros();
    Sorter { v, less }.pdqsort(0, n, limit);
}

/// `maxInsertion`: ranges up to this length are insertion-sorted.
const MAX_INSERTION: usize = 12;

/// Go's `sortedHint`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

/// Go's `xorshift` (seeded with the range length).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `nextPowerOfTwo`: `1 << bits.Len(length)`.
fn next_power_of_two(length: usize) -> u64 {
    1u64 << (usize::BITS - length.leading_zeros())
}

/// The slice and its `Less`, standing in for Go's `sort.Interface`.
struct Sorter<'a, T, F> {
    v: &'a mut [T],
    less: F,
}

impl<T, F: FnMut(&T, &T) -> bool> Sorter<'_, T, F> {
    fn less(&mut self, i: usize, j: usize) -> bool {
        (self.less)(&self.v[i], &self.v[j])
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.v.swap(i, j);
    }

    /// `insertionSort` of `[a, b)`.
    fn insertion_sort(&mut self, a: usize, b: usize) {
        for i in a + 1..b {
            let mut j = i;
            while j > a && self.less(j, j - 1) {
                self.swap(j, j - 1);
                j -= 1;
            }
        }
    }

    /// `siftDown`: the heap property on `[lo, hi)` of the heap rooted at `first`.
    fn sift_down(&mut self, lo: usize, hi: usize, first: usize) {
        let mut root = lo;
        loop {
            let mut child = 2 * root + 1;
            if child >= hi {
                return;
            }
            if child + 1 < hi && self.less(first + child, first + child + 1) {
                child += 1;
            }
            if !self.less(first + root, first + child) {
                return;
            }
            self.swap(first + root, first + child);
            root = child;
        }
    }

    /// `heapSort` of `[a, b)`.
    fn heap_sort(&mut self, a: usize, b: usize) {
        let hi = b - a;
        for i in (0..=(hi - 1) / 2).rev() {
            self.sift_down(i, hi, a);
        }
        for i in (0..hi).rev() {
            self.swap(a, a + i);
            self.sift_down(0, i, a);
        }
    }

    /// `pdqsort` of `[a, b)`; `limit` bad pivots are allowed before falling back to heapsort.
    fn pdqsort(&mut self, mut a: usize, mut b: usize, mut limit: u32) {
        let mut was_balanced = true;
        let mut was_partitioned = true;
        loop {
            let length = b - a;
            if length <= MAX_INSERTION {
                self.insertion_sort(a, b);
                return;
            }
            if limit == 0 {
                self.heap_sort(a, b);
                return;
            }
            if !was_balanced {
                self.break_patterns(a, b);
                limit -= 1;
            }
            let (mut pivot, mut hint) = self.choose_pivot(a, b);
            if hint == Hint::Decreasing {
                self.reverse_range(a, b);
                pivot = (b - 1) - (pivot - a);
                hint = Hint::Increasing;
            }
            if was_balanced
                && was_partitioned
                && hint == Hint::Increasing
                && self.partial_insertion_sort(a, b)
            {
                return;
            }
            if a > 0 && !self.less(a - 1, pivot) {
                a = self.partition_equal(a, b, pivot);
                continue;
            }
            let (mid, already_partitioned) = self.partition(a, b, pivot);
            was_partitioned = already_partitioned;
            let (left, right) = (mid - a, b - mid);
            let threshold = length / 8;
            if left < right {
                was_balanced = left >= threshold;
                self.pdqsort(a, mid, limit);
                a = mid + 1;
            } else {
                was_balanced = right >= threshold;
                self.pdqsort(mid + 1, b, limit);
                b = mid;
            }
        }
    }

    /// `partition`: one quicksort partition of `[a, b)` around `v[pivot]`; returns the pivot's new
    /// position and whether the range was already partitioned.
    fn partition(&mut self, a: usize, b: usize, pivot: usize) -> (usize, bool) {
        self.swap(a, pivot);
        let (mut i, mut j) = (a + 1, b - 1);
        while i <= j && self.less(i, a) {
            i += 1;
        }
        while i <= j && !self.less(j, a) {
            j -= 1;
        }
        if i > j {
            self.swap(j, a);
            return (j, true);
        }
        self.swap(i, j);
        i += 1;
        j -= 1;
        loop {
            while i <= j && self.less(i, a) {
                i += 1;
            }
            while i <= j && !self.less(j, a) {
                j -= 1;
            }
            if i > j {
                break;
            }
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
        self.swap(j, a);
        (j, false)
    }

    /// `partitionEqual`: `[a, b)` (nothing below `v[pivot]`) into elements equal to the pivot,
    /// then greater ones; returns where the greater ones start.
    fn partition_equal(&mut self, a: usize, b: usize, pivot: usize) -> usize {
        self.swap(a, pivot);
        let (mut i, mut j) = (a + 1, b - 1);
        loop {
            while i <= j && !self.less(a, i) {
                i += 1;
            }
            while i <= j && self.less(a, j) {
                j -= 1;
            }
            if i > j {
                return i;
            }
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }

    /// `partialInsertionSort`: shift a few out-of-order pairs; true when `[a, b)` ends sorted.
    fn partial_insertion_sort(&mut self, a: usize, b: usize) -> bool {
        const MAX_STEPS: usize = 5;
        const SHORTEST_SHIFTING: usize = 50;
        let mut i = a + 1;
        for _ in 0..MAX_STEPS {
            while i < b && !self.less(i, i - 1) {
                i += 1;
            }
            if i == b {
                return true;
            }
            if b - a < SHORTEST_SHIFTING {
                return false;
            }
            self.swap(i, i - 1);
            // Go shifts the smaller one left down to index 1, not to `a + 1`.
            if i - a >= 2 {
                let mut j = i - 1;
                while j >= 1 && self.less(j, j - 1) {
                    self.swap(j, j - 1);
                    j -= 1;
                }
            }
            if b - i >= 2 {
                let mut j = i + 1;
                while j < b && self.less(j, j - 1) {
                    self.swap(j, j - 1);
                    j += 1;
                }
            }
        }
        false
    }

    /// `breakPatterns`: three xorshift-chosen swaps around the middle of `[a, b)` (Go skips this
    /// below 8 elements; it is only reached above [`MAX_INSERTION`]).
    fn break_patterns(&mut self, a: usize, b: usize) {
        let length = b - a;
        let mut random = XorShift(length as u64);
        let mask = next_power_of_two(length) - 1;
        let mid = a + (length / 4) * 2;
        for idx in mid - 1..=mid + 1 {
            // Below `2 * length`: the conversion is exact.
            let mut other = (random.next() & mask) as usize;
            if other >= length {
                other -= length;
            }
            self.swap(idx, a + other);
        }
    }

    /// `choosePivot`: the pivot of `[a, b)` (median of three, or Tukey's ninther from 50 elements)
    /// and what the comparisons suggest about the range's order. Go's static pivot below 8
    /// elements is never reached from [`Sorter::pdqsort`].
    fn choose_pivot(&mut self, a: usize, b: usize) -> (usize, Hint) {
        const SHORTEST_NINTHER: usize = 50;
        const MAX_SWAPS: u32 = 4 * 3;
        let l = b - a;
        let mut swaps = 0;
        let (mut i, mut j, mut k) = (a + l / 4, a + l / 4 * 2, a + l / 4 * 3);
        if l >= SHORTEST_NINTHER {
            i = self.median(i - 1, i, i + 1, &mut swaps);
            j = self.median(j - 1, j, j + 1, &mut swaps);
            k = self.median(k - 1, k, k + 1, &mut swaps);
        }
        j = self.median(i, j, k, &mut swaps);
        let hint = match swaps {
            0 => Hint::Increasing,
            MAX_SWAPS => Hint::Decreasing,
            _ => Hint::Unknown,
        };
        (j, hint)
    }

    /// `order2`: `(a, b)` ordered so that `v[first] <= v[second]`, counting a swap.
    fn order2(&mut self, a: usize, b: usize, swaps: &mut u32) -> (usize, usize) {
        if self.less(b, a) {
            *swaps += 1;
            (b, a)
        } else {
            (a, b)
        }
    }

    /// `median`: the index of the median of `v[a]`, `v[b]`, `v[c]`.
    fn median(&mut self, a: usize, b: usize, c: usize, swaps: &mut u32) -> usize {
        let (a, b) = self.order2(a, b, swaps);
        let (b, _) = self.order2(b, c, swaps);
        self.order2(a, b, swaps).1
    }

    /// `reverseRange` of `[a, b)`.
    fn reverse_range(&mut self, a: usize, b: usize) {
        let (mut i, mut j) = (a, b - 1);
        while i < j {
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::go_sort;

    /// The order (input positions) in which Go's `sort.Sort` leaves `keys` under
    /// `Less(i, j) = keys[i] > keys[j]` (Karmada's `TargetClustersList`).
    fn go_order(keys: &[i32]) -> Vec<usize> {
        let mut items: Vec<(i32, usize)> = keys.iter().copied().zip(0..).collect();
        go_sort(&mut items, |a, b| a.0 > b.0);
        items.into_iter().map(|(_, i)| i).collect()
    }

    // The expected orders below were printed by Go 1.26 for the same keys: `sort.Sort` over a
    // `sort.Interface`, and `sort.Slice`, which agree (and agreed with this port on 658 generated
    // inputs: random keys with many ties, sorted / reversed / organ-pipe / sawtooth patterns, and
    // adversarial inputs).

    #[test]
    fn insertion_sort_up_to_twelve_elements() {
        assert_eq!(go_order(&[]), Vec::<usize>::new());
        assert_eq!(go_order(&[2, 4, 1, 4]), [1, 3, 0, 2]);
        assert_eq!(go_order(&[1; 12]), (0..12).collect::<Vec<_>>());
    }

    #[test]
    fn ties_above_twelve_elements_land_where_go_puts_them() {
        // Median of three, partition, partitionEqual.
        assert_eq!(
            go_order(&[1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0]),
            [6, 10, 12, 3, 4, 9, 0, 8, 1, 5, 7, 11, 2, 13, 14]
        );
        assert_eq!(
            go_order(&[0, 0, 0, 0, 0, 1, 2, 0, 1, 2, 2, 1, 2, 0, 0, 0, 2]),
            [6, 16, 12, 10, 9, 8, 5, 11, 7, 0, 4, 3, 2, 13, 14, 15, 1]
        );
        // Tukey's ninther and breakPatterns (58 elements, two values).
        let keys = [
            0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1,
            1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0,
        ];
        let want = [
            28, 40, 55, 3, 4, 54, 50, 7, 49, 45, 10, 11, 42, 13, 41, 15, 16, 33, 30, 19, 39, 29,
            22, 23, 24, 37, 36, 27, 1, 35, 34, 31, 32, 38, 18, 0, 26, 25, 21, 20, 17, 14, 12, 43,
            44, 9, 46, 47, 48, 8, 6, 51, 52, 53, 5, 2, 56, 57,
        ];
        assert_eq!(go_order(&keys), want);
        // Sawtooth: 50 elements, 7 values.
        let keys: Vec<i32> = (0..50).map(|i| i % 7).collect();
        let want = [
            41, 48, 20, 27, 13, 34, 6, 5, 26, 47, 19, 40, 12, 33, 4, 32, 46, 11, 18, 25, 39, 24,
            45, 10, 38, 3, 17, 31, 37, 44, 30, 16, 9, 2, 23, 36, 22, 1, 29, 15, 8, 43, 42, 7, 14,
            28, 21, 0, 35, 49,
        ];
        assert_eq!(go_order(&keys), want);
    }

    #[test]
    fn reversed_and_organ_pipe_inputs() {
        // Ascending keys are a decreasing run for a descending sort: reverseRange, then sorted.
        let keys: Vec<i32> = (0..50).collect();
        assert_eq!(go_order(&keys), (0..50).rev().collect::<Vec<_>>());
        let keys: Vec<i32> = (0..50).map(|i| i.min(50 - i)).collect();
        let want = [
            25, 24, 26, 23, 27, 22, 28, 21, 29, 20, 30, 31, 19, 32, 18, 33, 17, 34, 16, 15, 35, 36,
            14, 37, 13, 12, 38, 11, 39, 10, 40, 41, 9, 42, 8, 43, 7, 6, 44, 45, 5, 4, 46, 3, 47, 2,
            48, 1, 49, 0,
        ];
        assert_eq!(go_order(&keys), want);
    }

    #[test]
    fn heapsort_fallback() {
        // An adversarial input whose partitions stay unbalanced until the heapsort fallback.
        let keys = [
            -15, -16, -44, -37, -42, -30, -43, -7, -40, -45, -32, 0, -38, -1, -35, -50, -36, -8,
            -47, -10, -12, -23, -14, -2, -11, -3, -6, -31, -39, -9, -41, -13, -46, -34, -48, -4,
            -29, -5, -27, -28, -25, -26, -33, -24, -21, -22, -19, -20, -17, -18,
        ];
        let want = [
            11, 13, 23, 25, 35, 37, 26, 7, 17, 29, 19, 24, 20, 31, 22, 0, 1, 48, 49, 46, 47, 44,
            45, 21, 43, 40, 41, 38, 39, 36, 5, 27, 10, 42, 33, 14, 16, 3, 12, 28, 8, 30, 4, 6, 2,
            9, 32, 18, 34, 15,
        ];
        assert_eq!(go_order(&keys), want);
    }

    /// Comparisons `go_sort` makes against McIlroy's adversary (values are fixed only when two
    /// undecided elements meet, so any difference in the comparison sequence shows in the count).
    /// `alternate`: decide the first / second undecided element in turn instead of the
    /// adversary's candidate rule (which defeats `partialInsertionSort`, reaching heapsort).
    fn adversary_comparisons(n: usize, alternate: bool) -> usize {
        let gas = n;
        let mut val = vec![gas; n];
        let (mut solid, mut candidate, mut meetings, mut count) = (0, 0, 0, 0);
        let mut items: Vec<usize> = (0..n).collect();
        go_sort(&mut items, |&x, &y| {
            count += 1;
            if val[x] == gas && val[y] == gas {
                meetings += 1;
                let first = if alternate {
                    meetings % 2 == 0
                } else {
                    x == candidate
                };
                if first {
                    val[x] = solid
                } else {
                    val[y] = solid
                }
                solid += 1;
            }
            if val[x] == gas {
                candidate = x;
            } else if val[y] == gas {
                candidate = y;
            }
            val[x] < val[y]
        });
        count
    }

    #[test]
    fn same_comparisons_as_go() {
        assert_eq!(adversary_comparisons(100, false), 941);
        assert_eq!(adversary_comparisons(1000, false), 7202);
        assert_eq!(adversary_comparisons(100, true), 1282);
        assert_eq!(adversary_comparisons(1000, true), 25896);
    }
}
