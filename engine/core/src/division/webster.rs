//! Webster (Sainte-Laguë) seat allocation, as Karmada's `helper.AllocateWebsterSeats` and
//! `helper.Dispenser` (`pkg/util/helper/webstermethod.go`, `binding.go`).
//!
//! Each seat goes to the party with the highest priority `votes / (2·seats + 1)`, compared exactly
//! by cross-multiplication in `i128`. Ties go to the party with fewer seats, then by name:
//! ascending, unless the binding UID is non-empty and its FNV-1a-32 hash is odd (descending).
//!
//! **Cost.** Handing out seats one at a time costs a heap operation per seat, and a Deployment may
//! ask for 2,147,483,647 replicas. [`seat`] instead finds a priority threshold by binary search
//! (about 127 exact integer steps, each `O(parties)`), gives every party at once the seats it wins
//! above the threshold (exactly the seats the one-at-a-time order hands out first), and hands out
//! the last seats (fewer than the parties) one at a time in the exact priority order. One
//! allocation is `O(parties · (127 + log parties))`, independent of the seat count.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

use flotilla_api::work::TargetCluster;

/// FNV-1a, 32 bits (Go's `hash/fnv.New32a`).
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// True when ties between equally-seated parties go to the lexicographically *larger* name
/// (Karmada's `tieBreakerByUID`: non-empty UID with an odd FNV-1a-32 hash).
pub fn names_descending(uid: &str) -> bool {
    !uid.is_empty() && fnv1a32(uid.as_bytes()) & 1 == 1
}

/// A party of the allocation, known by `name`: a cluster name, or any key that orders as the
/// names do ([`dispense_by`]).
#[derive(Debug, Clone)]
struct Party<K> {
    name: K,
    votes: i64,
    seats: i32,
    descending: bool,
    /// Position in name order ([`dispense_by`]; not compared).
    rank: usize,
}

impl<K> Party<K> {
    /// `votes / (2·seats + 1)` as a fraction with a positive denominator.
    fn priority(&self) -> (i128, i128) {
        let den = 2 * i128::from(self.seats) + 1; // odd, never zero
        if den < 0 {
            (-i128::from(self.votes), -den)
        } else {
            (i128::from(self.votes), den)
        }
    }

    /// [`Party::priority`] in `i64` when votes and denominator are both below 2^31 in magnitude
    /// (the usual case: weights and replica counts are small).
    fn small_priority(&self) -> Option<(i64, i64)> {
        const LIMIT: i64 = 1 << 31;
        let den = 2 * i64::from(self.seats) + 1;
        (-LIMIT < self.votes && self.votes < LIMIT && den > 0 && den < LIMIT)
            .then_some((self.votes, den))
    }
}

impl<K: Ord> PartialEq for Party<K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<K: Ord> Eq for Party<K> {}
impl<K: Ord> PartialOrd for Party<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K: Ord> Ord for Party<K> {
    /// `Greater` = wins the next seat.
    fn cmp(&self, other: &Self) -> Ordering {
        let by_priority = match (self.small_priority(), other.small_priority()) {
            // Both factors below 2^31: the products fit in i64 (no 128-bit multiply, which is a
            // library call on 32-bit targets such as Wasm).
            (Some((na, da)), Some((nb, db))) => (na * db).cmp(&(nb * da)),
            _ => {
                let (na, da) = self.priority();
                let (nb, db) = other.priority();
                // |votes| < 2^63 and den < 2^33, so the products fit in i128.
                (na * db).cmp(&(nb * da))
            }
        };
        by_priority
            .then_with(|| other.seats.cmp(&self.seats))
            .then_with(|| {
                let by_name = other.name.cmp(&self.name);
                if self.descending {
                    by_name.reverse()
                } else {
                    by_name
                }
            })
    }
}

/// `AllocateWebsterSeats` with the UID tie-breaker: give `new_seats` seats one at a time.
/// Parties are the union of `votes` and `initial` (a later duplicate of a name overrides an
/// earlier one, as Go map writes do). Returns every party sorted by name; empty when there are
/// no parties.
pub fn allocate(
    new_seats: i32,
    votes: &[(&str, i64)],
    initial: &[(&str, i32)],
    uid: &str,
) -> Vec<TargetCluster> {
    let descending = names_descending(uid);
    let mut parties: BTreeMap<&str, (i64, i32)> = BTreeMap::new();
    for &(name, seats) in initial {
        parties.insert(name, (0, seats));
    }
    for &(name, v) in votes {
        parties.entry(name).or_insert((0, 0)).0 = v;
    }
    if parties.is_empty() {
        return Vec::new();
    }
    let parties: Vec<Party<&str>> = parties
        .iter()
        .map(|(&name, &(votes, seats))| Party {
            name,
            votes,
            seats,
            descending,
            rank: 0,
        })
        .collect();
    let mut out: Vec<TargetCluster> = seat(parties, new_seats)
        .into_iter()
        .map(|p| TargetCluster::new(p.name, p.seats))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Give `new_seats` seats to `parties`, with the result of handing them out one at a time to the
/// party with the highest priority ([`seat_one_by_one`]), in `O(parties · log)` steps.
///
/// The one-at-a-time order is a merge of each party's offers (its priority at seats `s`, `s+1`,
/// …) when each party's offers only fall, which holds for every party from its initial seats on
/// when no party starts with negative seats and none can pass `i32::MAX` (callers start from 0);
/// otherwise, reachable only through [`allocate`] with such an initial assignment, the seats are
/// handed out one at a time.
fn seat<K: Ord>(mut parties: Vec<Party<K>>, new_seats: i32) -> Vec<Party<K>> {
    let n = new_seats.max(0);
    if n == 0 || parties.is_empty() {
        return parties;
    }
    if let Some(cut) = contender_cut(&parties, n) {
        // Only parties with at least the `n`-th largest votes can win a seat: the one-at-a-time
        // steps run over them alone (a few replicas over many clusters: the usual division).
        let (contenders, mut rest): (Vec<_>, Vec<_>) =
            parties.into_iter().partition(|p| p.votes >= cut);
        let mut seated = seat_contenders(contenders, n, cut);
        seated.append(&mut rest);
        return seated;
    }
    if parties
        .iter()
        .any(|p| p.seats < 0 || p.seats.checked_add(n).is_none())
    {
        return seat_one_by_one(parties.into(), n).into_vec();
    }
    let bulk = if parties.iter().any(|p| p.votes > 0) {
        bulk_positive(&parties, n)
    } else if parties.iter().any(|p| p.votes == 0) {
        bulk_zero(&parties, n)
    } else {
        bulk_negative(&parties, n)
    };
    let mut given: i64 = 0;
    for (p, b) in parties.iter_mut().zip(&bulk) {
        // Every bulk share is at most `n`, and `seats + n` fits (checked above).
        p.seats += *b;
        given += i64::from(*b);
    }
    let rest = i32::try_from(i64::from(n) - given).unwrap_or(0);
    seat_one_by_one(parties.into(), rest).into_vec()
}

/// [`seat`] for the contenders of [`contender_cut`] alone (every party without seats, votes at
/// least `cut`, at least `n` of them).
fn seat_contenders<K: Ord>(mut contenders: Vec<Party<K>>, n: i32, cut: i64) -> Vec<Party<K>> {
    let top = contenders.iter().map(|p| p.votes).max().unwrap_or(0);
    if cut.checked_mul(3).is_none_or(|c| top <= c) {
        // No contender's second seat (priority `votes / 3 ≤ cut`) outranks another's first
        // (`≥ cut`; at equal priority the party with fewer seats wins): the `n` seats go one each
        // to the `n` contenders that rank highest at no seats, which is a selection.
        let k = usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(contenders.len());
        if k > 0 {
            contenders.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        }
        for p in contenders.iter_mut().take(k) {
            p.seats = 1;
        }
        contenders
    } else {
        seat_one_by_one(contenders.into(), n).into_vec()
    }
}

/// When every party starts without seats and at least `n` parties have positive votes: the `n`-th
/// largest votes `V`. A party with fewer votes never wins one of the `n` seats: before each of them
/// is handed out, fewer than `n` seats are taken, so one of the `n` parties with votes `≥ V` still
/// has none and its priority (its votes, `≥ V`) is strictly above the other's best (its votes).
fn contender_cut<K>(parties: &[Party<K>], n: i32) -> Option<i64> {
    let n = usize::try_from(n).ok().filter(|&n| n >= 1)?;
    if parties.iter().any(|p| p.seats != 0) {
        return None;
    }
    let votes: Vec<i64> = parties
        .iter()
        .filter(|p| p.votes > 0)
        .map(|p| p.votes)
        .collect();
    nth_largest(votes, n)
}

/// The `n`-th largest of `votes` (`n ≥ 1`), `None` when there are fewer than `n`.
fn nth_largest(mut votes: Vec<i64>, n: usize) -> Option<i64> {
    let i = n.checked_sub(1).filter(|&i| i < votes.len())?;
    Some(*votes.select_nth_unstable_by(i, |a, b| b.cmp(a)).1)
}

/// Bulk shares when some party has positive votes (only those win seats: a positive priority
/// beats the others' zero or negative ones). With the threshold `t = A / 2^64`, a party wins
/// every offer above `t`: `K = #{odd d ≥ 1 : d·A < votes·2^64}` offers from 0 seats, so
/// `max(0, K − seats)` from its initial seats. Any `A` whose total is at most `n` gives the same
/// result (the offers above a threshold are the first ones the one-at-a-time order hands out, and
/// [`seat`] hands out the rest one at a time); the smaller the leftover, the fewer one-at-a-time
/// steps. The threshold comes from [`estimate_threshold`] (floating point, at most 128 `O(parties)`
/// steps, a dozen or so unless ties make the total jump past `n`), checked exactly; when that check fails or leaves more than one seat per party over,
/// the smallest `A` whose total is at most `n` is found by exact binary search (about 127 steps of
/// `O(parties)` 128-bit divisions, each a library call on 32-bit targets such as Wasm). The seats
/// left over at the smallest `A` are offers in `(t − 2^-64, t]`, at most one per party (one
/// party's consecutive offers differ by more than `2^-63` below `i32::MAX` seats).
fn bulk_positive<K>(parties: &[Party<K>], n: i32) -> Vec<i32> {
    let total = |a: u128| offers_above(parties, a);
    let want = u128::from(n.unsigned_abs());
    let top = parties.iter().map(|p| p.votes).max().unwrap_or(0);
    // At A = max votes · 2^64 no offer is above the threshold; at A = 0 every one is.
    let (mut lo, mut hi) = (0u128, u128::from(top.unsigned_abs()) << 64);
    // Seats the one-at-a-time steps may hand out after the bulk (the exact search leaves fewer).
    let slack = parties.iter().filter(|p| p.votes > 0).count() as u128;
    // No more seats than parties: all of them one at a time (the top votes' threshold, where no
    // offer is above, leaves them all over).
    if want <= slack {
        // Every share at the top votes' threshold is 0 (`share_above`): no division needed.
        return vec![0; parties.len()];
    }
    let mut settled = false;
    if let Some(a) = estimate_threshold(parties, n, top) {
        let a = a.clamp(1, hi);
        let got = total(a);
        if got <= want {
            hi = a;
            settled = want - got <= slack;
        } else {
            lo = a;
        }
    }
    while !settled && hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if total(mid) <= want {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // Each share is at most the total, which is at most `n`.
    parties
        .iter()
        .map(|p| i32::try_from(share_above(p, hi)).unwrap_or(0))
        .collect()
}

/// The seats one party wins above the threshold `A / 2^64` (`A ≥ 1`) beyond those it holds; none
/// without positive votes.
fn share_above<K>(p: &Party<K>, a: u128) -> u128 {
    if p.votes <= 0 {
        return 0;
    }
    let m = u128::from(p.votes.unsigned_abs()) << 64; // votes < 2^63: fits
    let offers = ((m - 1) / a).div_ceil(2);
    offers.saturating_sub(u128::from(p.seats.unsigned_abs()))
}

/// [`share_above`] summed over the parties.
fn offers_above<K>(parties: &[Party<K>], a: u128) -> u128 {
    parties
        .iter()
        .map(|p| share_above(p, a))
        .fold(0u128, u128::saturating_add)
}

/// A threshold `A` (as in [`bulk_positive`]) whose total is at most `n` and usually exactly `n`,
/// found in floating point: the total at `t` is `Σ max(0, ⌈(votes/t − 1)/2⌉ − seats)`, a step
/// function falling with `t` (and still monotone when computed with rounding), so it is bisected
/// geometrically between a `t` where the top party alone wins more than `n` offers and the top
/// votes (where no offer is above), stopping as soon as a total of exactly `n` is seen. `None`
/// when floating point cannot bracket it; callers check the result exactly either way.
fn estimate_threshold<K>(parties: &[Party<K>], n: i32, top: i64) -> Option<u128> {
    let want = f64::from(n);
    let count = |t: f64| -> f64 {
        let inv = 1.0 / t;
        parties
            .iter()
            .filter(|p| p.votes > 0)
            .map(|p| {
                // ⌈y⌉ for y ≥ 0 without `f64::ceil` (a library call on x86-64 without SSE4.1):
                // truncation, plus one when something was cut off. Offers below 0 count as 0.
                let y = ((p.votes as f64 * inv - 1.0) / 2.0).max(0.0);
                let floor = y as i64;
                let ceil = floor + i64::from((floor as f64) < y);
                (ceil - i64::from(p.seats)).max(0) as f64
            })
            .sum()
    };
    let top_seats = parties
        .iter()
        .filter(|p| p.votes == top)
        .map(|p| p.seats)
        .max()
        .unwrap_or(0);
    let top = top as f64;
    // The top party alone has `⌈want + seats + 1/2⌉ − seats > want` offers above `lo`.
    let (mut lo, mut hi) = (top / (2.0 * (want + f64::from(top_seats)) + 2.0), top);
    if !(lo > 0.0 && count(lo) > want) {
        return None;
    }
    for _ in 0..128 {
        let mid = (lo * hi).sqrt();
        if !(mid > lo && mid < hi) {
            break;
        }
        let got = count(mid);
        if got <= want {
            hi = mid;
            if got == want {
                break;
            }
        } else {
            lo = mid;
        }
    }
    // Rounding in `votes / t` can put an offer within a few ulps of `hi` on either side: the
    // threshold goes a relative 2^-40 above `hi` (past any such offer, whose exact count can then
    // only be lower), times 2^64, rounded up.
    let a = (hi * (1.0 + f64::powi(2.0, -40)) * 18_446_744_073_709_551_616.0).ceil();
    (a.is_finite() && a >= 1.0).then_some(a as u128)
}

/// Bulk shares when no party has positive votes but some have none: every zero-vote party has
/// priority 0 and the one with fewer seats wins, so they fill up level by level. The highest level
/// `L` whose fill `Σ max(0, L − seats)` is at most `n` is found by binary search; the seats left
/// over are fewer than the zero-vote parties.
fn bulk_zero<K>(parties: &[Party<K>], n: i32) -> Vec<i32> {
    let fill = |level: i64| -> i64 {
        parties
            .iter()
            .filter(|p| p.votes == 0)
            .map(|p| (level - i64::from(p.seats)).max(0))
            .sum()
    };
    let low = parties
        .iter()
        .filter(|p| p.votes == 0)
        .map(|p| i64::from(p.seats))
        .min()
        .unwrap_or(0);
    // fill(lo) = 0 ≤ n < fill(hi).
    let (mut lo, mut hi) = (low, low + i64::from(n) + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fill(mid) <= i64::from(n) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    parties
        .iter()
        .map(|p| {
            if p.votes == 0 {
                i32::try_from((lo - i64::from(p.seats)).max(0)).unwrap_or(0)
            } else {
                0
            }
        })
        .collect()
}

/// Bulk shares when every party has negative votes: the first winner's priority only rises with
/// its seats (`votes / (2·seats + 1)` approaches 0 from below) while the others' stay put, so it
/// wins every seat.
fn bulk_negative<K: Ord>(parties: &[Party<K>], n: i32) -> Vec<i32> {
    let winner = parties
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.cmp(b.1))
        .map_or(usize::MAX, |(i, _)| i);
    (0..parties.len())
        .map(|i| if i == winner { n } else { 0 })
        .collect()
}

/// Give `new_seats` seats one at a time to the party with the highest priority (Karmada's loop).
/// The reference [`seat`] must agree with; used as is only where [`seat`]'s shortcut does not hold.
fn seat_one_by_one<K: Ord>(mut heap: BinaryHeap<Party<K>>, new_seats: i32) -> BinaryHeap<Party<K>> {
    for _ in 0..new_seats.max(0) {
        let Some(mut top) = heap.peek_mut() else {
            break;
        };
        top.seats = top.seats.wrapping_add(1);
    }
    heap
}

/// [`dispense`] without an initial assignment, answering by position instead of by name:
/// `(i, seats)` for every party, sorted by name, where `i` is the position in `votes` of the
/// party's (last) entry. Empty when the weights sum to 0. Callers that know their parties by
/// position (a Wasm assigner answers with rows) need no name lookups and no `TargetCluster`s.
pub fn dispense_rows(new_seats: i32, votes: &[(&str, i64)], uid: &str) -> Vec<(usize, i32)> {
    dispense_by(new_seats, votes, uid)
}

/// [`dispense_rows`] with parties known by any key that orders as their names do (equal keys for
/// equal names): e.g. a cluster's position in a cluster set sorted by name, which compares as one
/// integer instead of a string.
pub fn dispense_by<K: Ord + Copy>(
    new_seats: i32,
    votes: &[(K, i64)],
    uid: &str,
) -> Vec<(usize, i32)> {
    if votes.iter().fold(0i64, |acc, &(_, v)| acc.wrapping_add(v)) == 0 {
        return Vec::new();
    }
    let descending = names_descending(uid);
    // Parties in name order, each name once with its last entry: (key, position) pairs are all
    // distinct, so sorting them puts equal names in input order, with no indirection per
    // comparison; inputs already in name order are recognised in one pass.
    let mut order: Vec<(K, usize)> = votes.iter().enumerate().map(|(i, v)| (v.0, i)).collect();
    order.sort_unstable();
    let mut out: Vec<(usize, i32)> = Vec::with_capacity(order.len());
    for (k, &(key, i)) in order.iter().enumerate() {
        if order.get(k + 1).is_none_or(|next| next.0 != key) {
            out.push((i, 0));
        }
    }
    seat_positions(votes, &mut out, new_seats, descending, None);
    out
}

/// Seat `new_seats` among the parties of `votes` at `out`'s positions (in name order, without
/// seats), writing each one's seats beside its position: [`seat`], or [`seat_contenders`] when
/// they are the contenders of the cut `contenders_of`.
fn seat_positions<K: Ord + Copy>(
    votes: &[(K, i64)],
    out: &mut [(usize, i32)],
    new_seats: i32,
    descending: bool,
    contenders_of: Option<i64>,
) {
    let parties: Vec<Party<K>> = out
        .iter()
        .enumerate()
        .map(|(rank, &(i, _))| Party {
            name: votes[i].0,
            votes: votes[i].1,
            seats: 0,
            descending,
            rank,
        })
        .collect();
    let seated = match contenders_of {
        Some(cut) => seat_contenders(parties, new_seats, cut),
        None => seat(parties, new_seats),
    };
    for p in seated {
        out[p.rank].1 = p.seats;
    }
}

/// [`dispense_by`] for parties whose keys are all distinct, answering only the parties that win
/// at least one seat, sorted by key. Only parties with positive votes can win (when any has),
/// and when at least `new_seats` of them do, only those with at least the `new_seats`-th largest
/// votes ([`contender_cut`]): they alone are put in name order and seated, so a division of a
/// few replicas over many clusters sorts the few contenders, not every cluster. Without positive
/// votes it is [`dispense_by`] without the parties that win nothing.
///
/// With a repeated key the answer is unspecified (callers check; [`dispense_by`] takes the last
/// entry of each key).
pub fn dispense_winners_by<K: Ord + Copy>(
    new_seats: i32,
    votes: &[(K, i64)],
    uid: &str,
) -> Vec<(usize, i32)> {
    // One pass: the (wrapping, as Go's) sum and the positive votes.
    let mut top: Vec<i64> = Vec::with_capacity(votes.len());
    let mut sum = 0i64;
    for &(_, v) in votes {
        sum = sum.wrapping_add(v);
        if v > 0 {
            top.push(v);
        }
    }
    let n = usize::try_from(new_seats).unwrap_or(0);
    if n == 0 || top.is_empty() || sum == 0 {
        let mut all = dispense_by(new_seats, votes, uid);
        all.retain(|r| r.1 > 0);
        return all;
    }
    // While some party has positive votes, its priority stays above every other's (zero or
    // negative): the others never win a seat. With at least `n` such parties, only those at the
    // `n`-th largest votes or above can ([`contender_cut`]); with fewer, every one of them can.
    let cut = nth_largest(top, n);
    let mut order: Vec<(K, usize)> = votes
        .iter()
        .enumerate()
        .filter(|(_, v)| v.1 >= cut.unwrap_or(1))
        .map(|(i, v)| (v.0, i))
        .collect();
    order.sort_unstable();
    let mut out: Vec<(usize, i32)> = order.iter().map(|&(_, i)| (i, 0)).collect();
    seat_positions(votes, &mut out, new_seats, names_descending(uid), cut);
    out.retain(|r| r.1 > 0);
    out
}

/// Karmada's `Dispenser` (`NewDispenser(new_seats, initial, uid).AllocateByWeight(votes)`):
/// * with `new_seats == 0` and a non-empty `initial`, `initial` is returned unchanged;
/// * when the weights sum to 0, `initial` is returned unchanged;
/// * otherwise [`allocate`]: every party (votes ∪ initial) with its final seats, sorted by name.
///
/// `uid` is the binding's `spec.resource.uid`, the tie-breaker seed.
pub fn dispense(
    new_seats: i32,
    votes: &[(&str, i64)],
    initial: &[(&str, i32)],
    uid: &str,
) -> Vec<TargetCluster> {
    let unchanged = || {
        initial
            .iter()
            .map(|&(n, s)| TargetCluster::new(n, s))
            .collect()
    };
    if new_seats == 0 && !initial.is_empty() {
        return unchanged();
    }
    // Go sums int64 weights with wrap-around.
    let sum = votes.iter().fold(0i64, |acc, &(_, v)| acc.wrapping_add(v));
    if sum == 0 {
        return unchanged();
    }
    allocate(new_seats, votes, initial, uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVEN_UID: &str = "4858ca61-3ff8-4095-8267-f3d059d8074c";
    const ODD_UID: &str = "d43fdeeb-d750-4e2b-bee3-64eb94534f4c";

    fn tc(v: &[(&str, i32)]) -> Vec<TargetCluster> {
        v.iter().map(|&(n, r)| TargetCluster::new(n, r)).collect()
    }

    #[test]
    fn fnv_and_uid_parity() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
        assert!(names_descending(ODD_UID));
        assert!(!names_descending(EVEN_UID));
        assert!(!names_descending(""));
    }

    #[test]
    fn wikipedia_example_round_by_round() {
        let votes = [
            ("PartyA", 100_000),
            ("PartyB", 80_000),
            ("PartyC", 30_000),
            ("PartyD", 20_000),
        ];
        let expected = [
            [1, 0, 0, 0],
            [1, 1, 0, 0],
            [2, 1, 0, 0],
            [2, 1, 1, 0],
            [2, 2, 1, 0],
            [2, 2, 1, 1],
            [3, 2, 1, 1],
            [3, 3, 1, 1],
        ];
        for (round, want) in expected.iter().enumerate() {
            let seats = i32::try_from(round + 1).unwrap();
            let got = allocate(seats, &votes, &[], "");
            let got: Vec<i32> = got.iter().map(|t| t.replicas).collect();
            assert_eq!(&got, want, "round {}", round + 1);
        }
        let ex = allocate(
            4,
            &[("Alpha", 1200), ("Beta", 900), ("Gamma", 400)],
            &[],
            "",
        );
        assert_eq!(ex, tc(&[("Alpha", 2), ("Beta", 1), ("Gamma", 1)]));
    }

    #[test]
    fn allocate_edge_cases_from_karmada() {
        assert!(allocate(1, &[], &[], "").is_empty());
        assert_eq!(
            allocate(0, &[("PartyA", 100), ("PartyB", 200)], &[], ""),
            tc(&[("PartyA", 0), ("PartyB", 0)])
        );
        // Tie broken by fewer seats.
        assert_eq!(
            allocate(
                1,
                &[("PartyA", 3), ("PartyB", 1)],
                &[("PartyA", 1), ("PartyB", 0)],
                ""
            ),
            tc(&[("PartyA", 1), ("PartyB", 1)])
        );
        // Tie broken by name (ascending by default).
        assert_eq!(
            allocate(1, &[("PartyA", 1), ("PartyB", 1)], &[], ""),
            tc(&[("PartyA", 1), ("PartyB", 0)])
        );
        // New parties join; an initial-only party has 0 votes.
        assert_eq!(
            allocate(
                2,
                &[("NewParty1", 1), ("NewParty2", 1)],
                &[("OldParty", 0)],
                ""
            ),
            tc(&[("NewParty1", 1), ("NewParty2", 1), ("OldParty", 0)])
        );
        assert_eq!(
            allocate(
                2,
                &[("OldParty", 1), ("NewParty", 1)],
                &[("OldParty", 1)],
                ""
            ),
            tc(&[("NewParty", 2), ("OldParty", 1)])
        );
        assert_eq!(
            allocate(2, &[("PartyA", 100)], &[("PartyB", 3)], ""),
            tc(&[("PartyA", 2), ("PartyB", 3)])
        );
    }

    #[test]
    fn dispenser_cases_from_karmada() {
        let w = [("A", 1), ("B", 2), ("C", 3)];
        let init = [("A", 1), ("B", 2), ("C", 3)];
        assert_eq!(
            dispense(6, &w, &init, ""),
            tc(&[("A", 2), ("B", 4), ("C", 6)])
        );
        assert_eq!(
            dispense(3, &w, &init, ""),
            tc(&[("A", 2), ("B", 3), ("C", 4)])
        );
        assert_eq!(
            dispense(2, &w, &init, ""),
            tc(&[("A", 1), ("B", 3), ("C", 4)])
        );
        let ha = [("A", 2), ("B", 1)];
        assert_eq!(dispense(1, &ha, &[], ""), tc(&[("A", 1), ("B", 0)]));
        assert_eq!(dispense(2, &ha, &[], ""), tc(&[("A", 1), ("B", 1)]));
        assert_eq!(dispense(3, &ha, &[], ""), tc(&[("A", 2), ("B", 1)]));
        let w = [("A", 170), ("B", 110), ("C", 60)];
        assert_eq!(
            dispense(5, &w, &[], ""),
            tc(&[("A", 2), ("B", 2), ("C", 1)])
        );
        assert_eq!(
            dispense(6, &w, &[], ""),
            tc(&[("A", 3), ("B", 2), ("C", 1)])
        );
        // UID parity decides the name order of a tie.
        assert_eq!(
            dispense(5, &[("A", 1), ("B", 1)], &[], ODD_UID),
            tc(&[("A", 2), ("B", 3)])
        );
        assert_eq!(
            dispense(5, &[("A", 1), ("B", 1)], &[], EVEN_UID),
            tc(&[("A", 3), ("B", 2)])
        );
        assert_eq!(
            dispense(5, &[("A", 1), ("B", 1)], &[], ""),
            tc(&[("A", 3), ("B", 2)])
        );
    }

    #[test]
    fn spread_by_target_clusters_cases() {
        assert!(dispense(10, &[], &[], "").is_empty());
        assert_eq!(
            dispense(10, &[("member1", 5)], &[], ""),
            tc(&[("member1", 10)])
        );
        let eq = [("member1", 5), ("member2", 5), ("member3", 5)];
        assert_eq!(
            dispense(12, &eq, &[], ""),
            tc(&[("member1", 4), ("member2", 4), ("member3", 4)])
        );
        assert_eq!(
            dispense(10, &eq, &[], ""),
            tc(&[("member1", 4), ("member2", 3), ("member3", 3)])
        );
        assert_eq!(
            dispense(10, &eq, &[], ODD_UID),
            tc(&[("member1", 3), ("member2", 3), ("member3", 4)])
        );
        let w = [("member1", 1), ("member2", 2), ("member3", 3)];
        assert_eq!(
            dispense(13, &w, &[], ""),
            tc(&[("member1", 2), ("member2", 4), ("member3", 7)])
        );
    }

    #[test]
    fn dispenser_guards() {
        // Nothing to add and a prior result: done, prior unchanged (and in its own order).
        assert_eq!(
            dispense(0, &[("a", 1)], &[("b", 2), ("a", 1)], ""),
            tc(&[("b", 2), ("a", 1)])
        );
        // Zero weights: prior unchanged.
        assert_eq!(
            dispense(5, &[("a", 0), ("b", 0)], &[], ""),
            Vec::<TargetCluster>::new()
        );
        assert_eq!(dispense(5, &[("a", 0)], &[("x", 1)], ""), tc(&[("x", 1)]));
        // Zero seats without prior: every weighted party with 0.
        assert_eq!(
            dispense(0, &[("m1", 1), ("m2", 1)], &[], ""),
            tc(&[("m1", 0), ("m2", 0)])
        );
        // Negative seats behave as zero seats (Go's loop does not run).
        assert_eq!(dispense(-3, &[("m1", 1)], &[], ""), tc(&[("m1", 0)]));
    }

    #[test]
    fn exact_priority_compare_and_zero_votes() {
        // 0-vote party only wins when all priorities are 0.
        assert_eq!(
            dispense(3, &[("a", 0), ("b", 1)], &[], ""),
            tc(&[("a", 0), ("b", 3)])
        );
        // Huge votes do not overflow.
        let got = dispense(4, &[("a", i64::MAX), ("b", i64::MAX - 1)], &[], "");
        assert_eq!(got, tc(&[("a", 2), ("b", 2)]));
        assert_eq!(
            dispense(4, &[("a", i64::MIN), ("b", 1)], &[], ""),
            tc(&[("a", 0), ("b", 4)])
        );
        // Votes on both sides of the i64 fast path's limit compare exactly.
        let big = 1i64 << 31;
        assert_eq!(
            dispense(3, &[("a", big), ("b", big - 1)], &[], ""),
            tc(&[("a", 2), ("b", 1)])
        );
        assert_eq!(
            dispense(3, &[("a", big - 1), ("b", big)], &[], ""),
            tc(&[("a", 1), ("b", 2)])
        );
        assert_eq!(
            dispense(2, &[("a", 3 * big), ("b", big - 1)], &[], ""),
            tc(&[("a", 2), ("b", 0)])
        );
    }

    #[test]
    fn dispense_rows_is_dispense_by_position() {
        let names: Vec<String> = (0..300)
            .map(|i| format!("m{:03}", (i * 7919) % 300))
            .collect();
        let cases: Vec<Vec<(&str, i64)>> = vec![
            vec![],
            vec![("a", 0), ("b", 0)],
            vec![("a", 1), ("b", 1)],
            vec![("b", 3), ("a", 1), ("b", 5), ("c", 0)],
            vec![("x", i64::MAX), ("y", i64::MAX - 1), ("z", 1 << 40)],
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), (i as i64 % 5) * (i as i64 % 3)))
                .collect(),
            // Repeated names: the last entry of each counts.
            (0..200)
                .map(|i: usize| {
                    (
                        ["q", "b", "x", "a", "m", "b2", "a0"][(i * 3) % 7],
                        (i as i64 * 13) % 6,
                    )
                })
                .collect(),
            names
                .iter()
                .take(40)
                .chain(names.iter().take(40))
                .enumerate()
                .map(|(i, n)| (n.as_str(), i as i64 % 7))
                .collect(),
        ];
        for votes in &cases {
            for seats in [-1, 0, 1, 7, 100, 1000] {
                for uid in ["", ODD_UID, EVEN_UID] {
                    let by_name = dispense(seats, votes, &[], uid);
                    let by_row: Vec<TargetCluster> = dispense_rows(seats, votes, uid)
                        .into_iter()
                        .map(|(i, s)| TargetCluster::new(votes[i].0, s))
                        .collect();
                    assert_eq!(by_row, by_name, "{votes:?} {seats} {uid}");
                    // Keyed by rank in name order instead of by name: the same division.
                    let mut sorted: Vec<&str> = votes.iter().map(|v| v.0).collect();
                    sorted.sort_unstable();
                    sorted.dedup();
                    let ranked: Vec<(u32, i64)> = votes
                        .iter()
                        .map(|&(n, v)| (sorted.binary_search(&n).unwrap() as u32, v))
                        .collect();
                    assert_eq!(
                        dispense_by(seats, &ranked, uid),
                        dispense_rows(seats, votes, uid),
                        "{votes:?} {seats} {uid}"
                    );
                }
            }
        }
        assert_eq!(
            dispense_rows(3, &[("b", 3), ("a", 1), ("b", 5)], ""),
            vec![(1, 1), (2, 2)]
        );
    }

    #[test]
    fn winners_are_the_division_without_empty_parties() {
        // Distinct keys in shuffled order, with ties, zeros, negatives and large weights.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |m: u64| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 33) % m
        };
        for case in 0..400 {
            let len = next(60) as usize;
            let mut keys: Vec<u32> = (0..len as u32).map(|k| k * 3 + 1).collect();
            for i in (1..keys.len()).rev() {
                keys.swap(i, next(i as u64 + 1) as usize);
            }
            let votes: Vec<(u32, i64)> = keys
                .iter()
                .map(|&k| {
                    let v = match case % 4 {
                        0 => next(5) as i64,
                        1 => next(5) as i64 - 1,
                        2 => 1 + next(3) as i64 * (1 << 40),
                        _ => [1, 2, 3, 4][next(4) as usize],
                    };
                    (k, v)
                })
                .collect();
            for seats in [-1, 0, 1, 2, 5, 17, 59, 60, 200] {
                for uid in ["", ODD_UID, EVEN_UID] {
                    let mut all = dispense_by(seats, &votes, uid);
                    all.retain(|r| r.1 > 0);
                    assert_eq!(
                        dispense_winners_by(seats, &votes, uid),
                        all,
                        "{votes:?} {seats} {uid}"
                    );
                }
            }
        }
    }

    #[test]
    fn monotone_and_fast_for_many_parties() {
        let names: Vec<String> = (0..1000).map(|i| format!("c{i:04}")).collect();
        let votes: Vec<(&str, i64)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), (i as i64 % 17) + 1))
            .collect();
        let mut prev = dispense(5000, &votes, &[], ODD_UID);
        assert_eq!(
            prev.iter().map(|t| i64::from(t.replicas)).sum::<i64>(),
            5000
        );
        let next = dispense(5001, &votes, &[], ODD_UID);
        for (a, b) in prev.iter().zip(&next) {
            assert!(b.replicas >= a.replicas, "{} shrank", a.name);
        }
        prev = next;
        assert_eq!(prev.len(), 1000);
    }

    use fastrand::Rng;

    /// The seats of `parties` after `n` more, by rank, from [`seat`] and from the one-at-a-time
    /// reference.
    fn both(parties: &[Party<u32>], n: i32) -> (Vec<i32>, Vec<i32>) {
        let by_rank = |v: Vec<Party<u32>>| {
            let mut out = vec![0; v.len()];
            for p in v {
                out[p.rank] = p.seats;
            }
            out
        };
        (
            by_rank(seat(parties.to_vec(), n)),
            by_rank(seat_one_by_one(parties.iter().cloned().collect(), n).into_vec()),
        )
    }

    #[test]
    fn bulk_seating_equals_seat_by_seat_on_thousands_of_random_cases_with_ties() {
        let mut rng = Rng::with_seed(0x5eed_0ff1_0711_1a00);
        let big = [
            i64::MAX,
            i64::MAX - 1,
            1 << 40,
            (1 << 31) - 1,
            1 << 31,
            3 << 31,
        ];
        let mut cases = 0;
        let mut shortcut = 0;
        for _ in 0..6_000 {
            let parties_n = 1 + rng.u64(..8) as usize;
            // Small vote ranges make equal priorities (ties on votes and on seats) common.
            let style = rng.u64(..6);
            let descending = rng.u64(..2) == 1;
            let parties: Vec<Party<u32>> = (0..parties_n)
                .map(|rank| Party {
                    // Names with repeats in value are impossible (ranks are distinct), but the
                    // order between names is random: ascending or descending.
                    name: rank as u32,
                    votes: match style {
                        0 => rng.u64(..4) as i64,
                        1 => rng.u64(..7) as i64 - 3,
                        2 => -(rng.u64(..4) as i64),
                        3 => big[rng.usize(..big.len())],
                        4 => 0,
                        _ => 1 + rng.u64(..1_000) as i64,
                    },
                    seats: if rng.u64(..2) == 0 {
                        0
                    } else {
                        rng.u64(..6) as i32
                    },
                    descending,
                    rank,
                })
                .collect();
            let n = rng.u64(..80) as i32 - 2;
            let (fast, reference) = both(&parties, n);
            assert_eq!(fast, reference, "{parties:?} + {n}");
            cases += 1;
            if parties.iter().any(|p| p.votes > 0) && n > parties_n as i32 {
                shortcut += 1;
            }
        }
        assert_eq!(cases, 6_000);
        assert!(
            shortcut > 1_000,
            "{shortcut} cases used the threshold search"
        );
    }

    #[test]
    fn fewer_seats_than_voters_go_to_the_contenders_exactly_as_seat_by_seat() {
        // Many parties without seats, few seats: `seat` runs over the contenders only
        // (`contender_cut`). Small vote ranges make ties at the cut common.
        let mut rng = Rng::with_seed(0xc0a7_e4de_5eed_0002);
        let (mut cut_used, mut selected) = (0, 0);
        for _ in 0..3_000 {
            let parties_n = 1 + rng.usize(..300);
            let range = [2, 5, 40, 1_000][rng.usize(..4)];
            let descending = rng.bool();
            let parties: Vec<Party<u32>> = (0..parties_n)
                .map(|rank| Party {
                    name: rank as u32,
                    votes: rng.i64(-1..range),
                    seats: 0,
                    descending,
                    rank,
                })
                .collect();
            let positive = parties.iter().filter(|p| p.votes > 0).count() as i32;
            let n = rng.i32(1..=positive.max(1) + 2);
            let (fast, reference) = both(&parties, n);
            assert_eq!(
                fast, reference,
                "{parties_n} parties, votes < {range}, {n} seats"
            );
            if let Some(cut) = contender_cut(&parties, n) {
                if parties.iter().any(|p| p.votes < cut) {
                    cut_used += 1;
                }
                // Every contender within 3× of the cut: one seat each, by selection.
                if parties.iter().all(|p| p.votes <= 3 * cut) {
                    selected += 1;
                }
            }
        }
        assert!(cut_used > 1_000, "{cut_used} cases left parties out");
        assert!(selected > 500, "{selected} cases seated by selection");
    }

    #[test]
    fn the_floating_point_threshold_is_exact_where_it_settles_and_settles_almost_always() {
        let mut rng = Rng::with_seed(0x7e55_e1a7_e000_0001);
        let (mut settled, mut cases) = (0, 0);
        for _ in 0..3_000 {
            let parties_n = 1 + rng.usize(..60);
            let style = rng.u64(..4);
            let descending = rng.bool();
            let parties: Vec<Party<u32>> = (0..parties_n)
                .map(|rank| Party {
                    name: rank as u32,
                    votes: match style {
                        0 => rng.i64(1..8),
                        1 => rng.i64(0..1_000),
                        2 => rng.i64(1..i64::MAX),
                        _ => [1, 7, 1 << 40, i64::MAX][rng.usize(..4)],
                    },
                    seats: if rng.bool() { 0 } else { rng.i32(0..50) },
                    descending,
                    rank,
                })
                .collect();
            if parties.iter().all(|p| p.votes <= 0) {
                continue;
            }
            let n = match rng.u64(..3) {
                0 => rng.i32(1..100),
                1 => rng.i32(1..100_000),
                _ => rng.i32(1..=i32::MAX - 50),
            };
            cases += 1;
            let top = parties.iter().map(|p| p.votes).max().unwrap();
            if let Some(a) = estimate_threshold(&parties, n, top) {
                let got = offers_above(&parties, a.max(1));
                let slack = parties.iter().filter(|p| p.votes > 0).count() as u128;
                if got <= n as u128 && n as u128 - got <= slack {
                    settled += 1;
                }
            }
            // Whatever the estimate, the seats are the one-at-a-time ones (small counts only:
            // the reference hands out seats one by one).
            if n < 5_000 {
                let (fast, reference) = both(&parties, n);
                assert_eq!(fast, reference, "{parties:?} + {n}");
            }
        }
        assert!(
            settled * 100 >= cases * 99,
            "{settled} of {cases} settled by the estimate"
        );
    }

    #[test]
    fn bulk_seating_equals_seat_by_seat_for_irregular_initial_seats() {
        // Negative initial seats and seats near i32::MAX take the one-at-a-time path.
        let party = |rank: usize, votes: i64, seats: i32| Party {
            name: rank as u32,
            votes,
            seats,
            descending: false,
            rank,
        };
        for parties in [
            vec![party(0, 5, -3), party(1, 2, 0)],
            vec![party(0, -5, -2), party(1, -1, 1)],
            vec![party(0, 1, i32::MAX - 2), party(1, 1, 0)],
        ] {
            for n in [0, 1, 5, 9] {
                let (fast, reference) = both(&parties, n);
                assert_eq!(fast, reference, "{parties:?} + {n}");
            }
        }
    }

    #[test]
    fn the_largest_replica_count_over_a_thousand_clusters_divides_in_well_under_a_second() {
        let names: Vec<String> = (0..1000).map(|i| format!("member-{i:04}")).collect();
        let started = std::time::Instant::now();
        for (uid, weight) in [
            (EVEN_UID, (|i: i64| i % 7 + 1) as fn(i64) -> i64),
            (ODD_UID, |_| 1),
            ("", |i| i * 2_147_483 + 1),
        ] {
            let votes: Vec<(&str, i64)> = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), weight(i as i64)))
                .collect();
            let got = dispense(i32::MAX, &votes, &[], uid);
            let sum: i64 = got.iter().map(|t| i64::from(t.replicas)).sum();
            assert_eq!(sum, i64::from(i32::MAX));
            let rows = dispense_rows(i32::MAX, &votes, uid);
            assert_eq!(rows.len(), 1000);
            // Webster stays within one seat of the exact quota here.
            let total: i64 = votes.iter().map(|v| v.1).sum();
            for (t, v) in got.iter().zip(&votes) {
                let quota = i128::from(v.1) * i128::from(i32::MAX) / i128::from(total);
                assert!((i128::from(t.replicas) - quota).abs() <= 1, "{}", t.name);
            }
        }
        let elapsed = started.elapsed();
        assert!(elapsed.as_millis() < 500, "{elapsed:?}");
    }
}
