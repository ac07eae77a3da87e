//! The scheduling queue (Karmada v1.19's `prioritySchedulingQueue`): which binding the scheduler
//! takes next. The live scheduler controller runs it against the wall clock; `flotilla plan`
//! runs it to report the order a batch would be scheduled in ([`schedule_order`]), so the two
//! agree by construction.
//!
//! Three parts, as Karmada's:
//! - **active**: bindings waiting to be scheduled, highest `spec.schedulePriority.priority`
//!   first, then the earliest pushed. No duplicates; a binding pushed while it is being
//!   scheduled is queued again once it is done (never scheduled twice at once).
//! - **backoff**: bindings whose scheduling failed with an error; each returns to active when its
//!   backoff (1 s, doubling per attempt, at most 10 s) has passed. [`SchedulingQueue::flush_backoff`]
//!   moves every completed one, in priority order.
//! - **unschedulable**: bindings no cluster fits; they return to active on any event about them
//!   (a push), or after 5 minutes ([`SchedulingQueue::flush_unschedulable`], in priority order).
//!
//! With priority-based scheduling off (the `PriorityBasedScheduling` feature gate), every
//! binding counts as priority 0: the active queue is first in, first out.
//!
//! Time is passed in (milliseconds on any monotonic scale), so the queue is deterministic and
//! testable; ties within one millisecond go by push order.

use std::collections::{BTreeSet, HashMap, HashSet};

/// Karmada's `DefaultBindingInitialBackoffDuration`.
pub const INITIAL_BACKOFF_MS: u64 = 1_000;
/// Karmada's `DefaultBindingMaxBackoffDuration`.
pub const MAX_BACKOFF_MS: u64 = 10_000;
/// Karmada's `DefaultBindingMaxInUnschedulableBindingsDuration`.
pub const MAX_IN_UNSCHEDULABLE_MS: u64 = 5 * 60 * 1_000;

/// One binding in the queue (Karmada's `QueuedBindingInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedBinding {
    /// `namespace/name` (`name` for a ClusterResourceBinding).
    pub key: String,
    /// `spec.schedulePriority.priority` (0 when unset or when priorities are off).
    pub priority: i32,
    /// When it was last pushed to active (ms), with the push sequence breaking ties.
    pub timestamp: (u64, u64),
    /// When it was first pushed (ms).
    pub initial: Option<u64>,
    /// Scheduling attempts so far (the backoff grows with them).
    pub attempts: u32,
}

impl QueuedBinding {
    /// A binding not yet attempted.
    pub fn new(key: impl Into<String>, priority: i32) -> Self {
        QueuedBinding {
            key: key.into(),
            priority,
            timestamp: (0, 0),
            initial: None,
            attempts: 0,
        }
    }

    /// Karmada's `Less`: higher priority first, then earlier timestamp.
    pub fn before(&self, other: &QueuedBinding) -> bool {
        self.order() < other.order()
    }

    fn order(&self) -> (std::cmp::Reverse<i32>, (u64, u64)) {
        (std::cmp::Reverse(self.priority), self.timestamp)
    }

    /// Karmada's `calculateBackoffDuration`: 0 before any attempt, then 1 s doubling per
    /// further attempt, at most 10 s.
    pub fn backoff_ms(&self) -> u64 {
        if self.attempts == 0 {
            return 0;
        }
        let mut d = INITIAL_BACKOFF_MS;
        for _ in 1..self.attempts {
            if d > MAX_BACKOFF_MS - d {
                return MAX_BACKOFF_MS;
            }
            d += d;
        }
        d
    }

    fn backoff_until(&self) -> u64 {
        self.timestamp.0.saturating_add(self.backoff_ms())
    }
}

type ActiveKey = (std::cmp::Reverse<i32>, (u64, u64), String);
type BackoffKey = (u64, std::cmp::Reverse<i32>, (u64, u64), String);

/// The queue. Not thread-safe by itself: the controller keeps it under a lock.
#[derive(Debug)]
pub struct SchedulingQueue {
    priorities: bool,
    seq: u64,
    active: BTreeSet<ActiveKey>,
    infos: HashMap<String, QueuedBinding>,
    dirty: HashSet<String>,
    processing: HashMap<String, QueuedBinding>,
    backoff: BTreeSet<BackoffKey>,
    backoff_infos: HashMap<String, QueuedBinding>,
    unschedulable: HashMap<String, QueuedBinding>,
}

impl SchedulingQueue {
    /// An empty queue; `priorities` is the `PriorityBasedScheduling` feature gate.
    pub fn new(priorities: bool) -> Self {
        SchedulingQueue {
            priorities,
            seq: 0,
            active: BTreeSet::new(),
            infos: HashMap::new(),
            dirty: HashSet::new(),
            processing: HashMap::new(),
            backoff: BTreeSet::new(),
            backoff_infos: HashMap::new(),
            unschedulable: HashMap::new(),
        }
    }

    /// Whether bindings are ordered by priority.
    pub fn priorities(&self) -> bool {
        self.priorities
    }

    /// An event about binding `key` (added, updated, a cluster changed): to active, out of
    /// backoff and unschedulable, as a fresh attempt (Karmada's `Push`).
    pub fn push(&mut self, key: &str, priority: i32, now: u64) {
        let info = QueuedBinding::new(key, priority);
        self.move_to_active(info, now);
    }

    /// The next binding to schedule, if any; [`SchedulingQueue::done`] must follow.
    pub fn pop(&mut self) -> Option<QueuedBinding> {
        let first = self.active.pop_first()?;
        let mut info = self.infos.remove(&first.2)?;
        info.attempts = info.attempts.saturating_add(1);
        self.dirty.remove(&info.key);
        self.processing.insert(info.key.clone(), info.clone());
        Some(info)
    }

    /// Scheduling of `info` finished; a push that came meanwhile queues it again.
    pub fn done(&mut self, info: &QueuedBinding, now: u64) {
        let Some(mut info) = self.processing.remove(&info.key) else {
            return;
        };
        if self.dirty.contains(&info.key) {
            info.timestamp = self.stamp(now);
            self.insert_active(info);
        }
    }

    /// Scheduling of `info` succeeded: it leaves backoff (Karmada's `Forget`).
    pub fn forget(&mut self, info: &QueuedBinding) {
        self.remove_backoff(&info.key);
    }

    /// No cluster fits `info`: park it until an event about it or the leftover flush
    /// (Karmada's `PushUnschedulableIfNotPresent`).
    pub fn push_unschedulable(&mut self, info: QueuedBinding) {
        if self.backoff_infos.contains_key(&info.key) || self.dirty.contains(&info.key) {
            return;
        }
        self.unschedulable.insert(info.key.clone(), info);
    }

    /// Scheduling `info` failed with an error: retry after its backoff
    /// (Karmada's `PushBackoffIfNotPresent`).
    pub fn push_backoff(&mut self, info: QueuedBinding) {
        if self.unschedulable.contains_key(&info.key) || self.dirty.contains(&info.key) {
            return;
        }
        self.remove_backoff(&info.key);
        let k = (
            info.backoff_until(),
            std::cmp::Reverse(info.priority),
            info.timestamp,
            info.key.clone(),
        );
        self.backoff.insert(k);
        self.backoff_infos.insert(info.key.clone(), info);
    }

    /// Move every binding whose backoff completed by `now` to active, highest priority first
    /// (Karmada's `flushBackoffQCompleted`, run every second). Returns how many moved.
    pub fn flush_backoff(&mut self, now: u64) -> usize {
        let mut ready = Vec::new();
        while let Some(first) = self.backoff.first() {
            if first.0 > now {
                break;
            }
            let Some(k) = self.backoff.pop_first() else {
                break;
            };
            if let Some(info) = self.backoff_infos.remove(&k.3) {
                ready.push(info);
            }
        }
        self.move_all(ready, now)
    }

    /// Move the bindings unschedulable for longer than 5 minutes by `now` to active, highest
    /// priority first (Karmada's `flushUnschedulableBindingsLeftover`, run every 30 seconds).
    pub fn flush_unschedulable(&mut self, now: u64) -> usize {
        let keys: Vec<String> = self
            .unschedulable
            .values()
            .filter(|i| now.saturating_sub(i.timestamp.0) > MAX_IN_UNSCHEDULABLE_MS)
            .map(|i| i.key.clone())
            .collect();
        let ready = keys
            .iter()
            .filter_map(|k| self.unschedulable.remove(k))
            .collect();
        self.move_all(ready, now)
    }

    /// Forget `key` entirely (the binding was deleted).
    pub fn remove(&mut self, key: &str) {
        if let Some(info) = self.infos.remove(key) {
            self.active
                .remove(&(std::cmp::Reverse(info.priority), info.timestamp, info.key));
        }
        self.dirty.remove(key);
        self.remove_backoff(key);
        self.unschedulable.remove(key);
    }

    /// Bindings waiting in active.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Bindings in backoff.
    pub fn backoff_len(&self) -> usize {
        self.backoff.len()
    }

    /// Unschedulable bindings.
    pub fn unschedulable_len(&self) -> usize {
        self.unschedulable.len()
    }

    /// Bindings being scheduled.
    pub fn processing_len(&self) -> usize {
        self.processing.len()
    }

    fn move_all(&mut self, mut ready: Vec<QueuedBinding>, now: u64) -> usize {
        ready.sort_by_key(QueuedBinding::order);
        let n = ready.len();
        for info in ready {
            self.move_to_active(info, now);
        }
        n
    }

    fn move_to_active(&mut self, mut info: QueuedBinding, now: u64) {
        if !self.priorities {
            info.priority = 0;
        }
        self.remove_backoff(&info.key);
        self.unschedulable.remove(&info.key);
        if self.dirty.contains(&info.key) {
            return;
        }
        info.timestamp = self.stamp(now);
        info.initial.get_or_insert(now);
        self.dirty.insert(info.key.clone());
        if self.processing.contains_key(&info.key) {
            return;
        }
        self.insert_active(info);
    }

    fn insert_active(&mut self, info: QueuedBinding) {
        self.active.insert((
            std::cmp::Reverse(info.priority),
            info.timestamp,
            info.key.clone(),
        ));
        self.infos.insert(info.key.clone(), info);
    }

    fn remove_backoff(&mut self, key: &str) {
        if let Some(info) = self.backoff_infos.remove(key) {
            self.backoff.remove(&(
                info.backoff_until(),
                std::cmp::Reverse(info.priority),
                info.timestamp,
                info.key,
            ));
        }
    }

    fn stamp(&mut self, now: u64) -> (u64, u64) {
        self.seq += 1;
        (now, self.seq)
    }
}

/// The order a batch of bindings pushed at once would be scheduled in: `(key, priority)` in push
/// order in, keys out in pop order.
pub fn schedule_order<'a>(
    bindings: impl IntoIterator<Item = (&'a str, i32)>,
    priorities: bool,
) -> Vec<String> {
    let mut q = SchedulingQueue::new(priorities);
    for (key, priority) in bindings {
        q.push(key, priority, 0);
    }
    let mut out = Vec::with_capacity(q.active_len());
    while let Some(info) = q.pop() {
        q.done(&info, 0);
        q.forget(&info);
        out.push(info.key);
    }
    out
}

/// A binding's `spec.schedulePriority.priority` (0 when unset or not an int32).
pub fn binding_priority(schedule_priority: Option<&serde_json::Value>) -> i32 {
    schedule_priority
        .and_then(|p| p.get("priority"))
        .and_then(serde_json::Value::as_i64)
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_priority_first_then_earlier() {
        let order = schedule_order(
            [
                ("a", 0),
                ("b", 10),
                ("c", 0),
                ("d", 10),
                ("e", -5),
                ("f", 100),
            ],
            true,
        );
        assert_eq!(order, ["f", "b", "d", "a", "c", "e"]);
        let fifo = schedule_order([("a", 0), ("b", 10), ("c", 0), ("f", 100)], false);
        assert_eq!(
            fifo,
            ["a", "b", "c", "f"],
            "priorities off: first in, first out"
        );
    }

    #[test]
    fn no_duplicates_and_a_push_while_processing_requeues_once() {
        let mut q = SchedulingQueue::new(true);
        q.push("a", 1, 0);
        q.push("a", 1, 1);
        assert_eq!(q.active_len(), 1);
        let a = q.pop().unwrap();
        assert_eq!(a.attempts, 1);
        q.push("a", 1, 2);
        q.push("a", 1, 3);
        assert_eq!(q.active_len(), 0, "not while it is being scheduled");
        q.done(&a, 4);
        assert_eq!(q.active_len(), 1);
        let again = q.pop().unwrap();
        assert_eq!((again.attempts, again.timestamp.0), (2, 4));
        q.done(&again, 5);
        assert!(q.pop().is_none());
    }

    #[test]
    fn backoff_doubles_to_ten_seconds_and_flushes_in_priority_order() {
        let mut b = QueuedBinding::new("x", 0);
        assert_eq!(b.backoff_ms(), 0);
        let waits: Vec<u64> = (1..=6)
            .map(|n| {
                b.attempts = n;
                b.backoff_ms()
            })
            .collect();
        assert_eq!(waits, [1000, 2000, 4000, 8000, 10000, 10000]);

        let mut q = SchedulingQueue::new(true);
        q.push("low", 1, 0);
        q.push("high", 9, 100);
        let first = q.pop().unwrap();
        let second = q.pop().unwrap();
        assert_eq!((first.key.as_str(), second.key.as_str()), ("high", "low"));
        q.done(&first, 200);
        q.done(&second, 200);
        q.push_backoff(second);
        q.push_backoff(first);
        assert_eq!(q.flush_backoff(999), 0, "low's backoff ends at 1000");
        assert_eq!(q.flush_backoff(1100), 2);
        assert_eq!(
            q.pop().unwrap().key,
            "high",
            "the batch goes in by priority"
        );
    }

    #[test]
    fn unschedulable_waits_for_an_event_or_five_minutes() {
        let mut q = SchedulingQueue::new(true);
        q.push("u", 0, 0);
        q.push("v", 5, 0);
        let v = q.pop().unwrap();
        let u = q.pop().unwrap();
        q.done(&v, 10);
        q.done(&u, 10);
        q.push_unschedulable(u);
        q.push_unschedulable(v);
        assert_eq!(q.unschedulable_len(), 2);
        assert_eq!(q.flush_unschedulable(MAX_IN_UNSCHEDULABLE_MS), 0);
        q.push("u", 0, 20);
        assert_eq!((q.unschedulable_len(), q.active_len()), (1, 1), "an event");
        assert_eq!(q.pop().unwrap().key, "u");
        assert_eq!(q.flush_unschedulable(MAX_IN_UNSCHEDULABLE_MS + 1), 1);
        assert_eq!(q.pop().unwrap().key, "v");
    }

    #[test]
    fn a_binding_in_backoff_is_not_parked_and_removal_forgets_it() {
        let mut q = SchedulingQueue::new(true);
        q.push("a", 0, 0);
        let a = q.pop().unwrap();
        q.done(&a, 0);
        q.push_backoff(a.clone());
        q.push_unschedulable(a);
        assert_eq!((q.backoff_len(), q.unschedulable_len()), (1, 0));
        q.remove("a");
        assert_eq!(q.backoff_len(), 0);
        q.push("b", 0, 0);
        q.remove("b");
        assert!(q.pop().is_none());
    }

    #[test]
    fn priority_reads_the_binding_field() {
        let v = serde_json::json!({"priority": 7});
        assert_eq!(binding_priority(Some(&v)), 7);
        assert_eq!(binding_priority(None), 0);
        let big = serde_json::json!({"priority": 1u64 << 40});
        assert_eq!(binding_priority(Some(&big)), 0);
    }
}
