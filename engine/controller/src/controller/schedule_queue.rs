//! The scheduler's loop: bindings wait in [`flotilla_core::queue::SchedulingQueue`] (Karmada
//! v1.19's priority queue: active ordered by `spec.schedulePriority.priority` then time, backoff,
//! unschedulable) and workers take them from its head into [`scheduler::run`].
//!
//! Changes arrive as for every controller (the bus, mapped by [`super::scheduler_mapper`]); each
//! named binding is pushed with the priority its cached object carries. A failed attempt goes to
//! backoff (1 s doubling to 10 s), an unschedulable one waits for the next event about it or the
//! 5-minute leftover flush; both come back in priority order. Failover deadlines and the resync
//! interval requeue a binding at their time. With the `PriorityBasedScheduling` gate off the
//! queue is first in, first out.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flotilla_core::queue::{QueuedBinding, SchedulingQueue, binding_priority};
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;

use super::{CONCURRENCY, Targets, own, scheduler, scheduler_mapper, scheduling_changes};
use crate::{Context, Topic};

/// How often the backoff queue is flushed (Karmada: every second).
const BACKOFF_FLUSH: Duration = Duration::from_secs(1);
/// How often the unschedulable leftovers are flushed (Karmada: every 30 seconds).
const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(30);

/// Requeues at a time: `(due ms, key)`, and each key's earliest due time.
type Later = (BTreeSet<(u64, String)>, HashMap<String, u64>);

/// The queue, its wake-ups and the requeues due later, shared by the feeder, the workers and the
/// flusher.
struct Shared {
    queue: Mutex<SchedulingQueue>,
    later: Mutex<Later>,
    work: tokio::sync::Notify,
    timers: tokio::sync::Notify,
    epoch: Instant,
}

impl Shared {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SchedulingQueue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn requeue_after(&self, key: &str, after: Duration) {
        let due = self
            .now()
            .saturating_add(u64::try_from(after.as_millis()).unwrap_or(u64::MAX));
        let mut l = self
            .later
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (set, by_key) = &mut *l;
        match by_key.get(key) {
            Some(&at) if at <= due => return,
            Some(&at) => {
                set.remove(&(at, key.to_owned()));
            }
            None => {}
        }
        by_key.insert(key.to_owned(), due);
        set.insert((due, key.to_owned()));
        drop(l);
        self.timers.notify_one();
    }

    /// Take the requeues due by `now`; the next due time after them.
    fn due(&self, now: u64) -> (Vec<String>, Option<u64>) {
        let mut l = self
            .later
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (set, by_key) = &mut *l;
        let mut out = Vec::new();
        while let Some((at, _)) = set.first() {
            if *at > now {
                break;
            }
            if let Some((_, key)) = set.pop_first() {
                by_key.remove(&key);
                out.push(key);
            }
        }
        (out, set.first().map(|(at, _)| *at))
    }
}

/// Publish the queue's sizes as `flotilla_scheduler_pending_bindings`.
fn record(ctx: &Context, q: &SchedulingQueue) {
    ctx.metrics
        .set_pending([q.active_len(), q.backoff_len(), q.unschedulable_len()]);
}

fn key_of(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn object_ref(ctx: &Context, key: &str) -> ObjectRef<DynamicObject> {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    let r = ObjectRef::new_with(name, ctx.bindings.resource.clone());
    if ns.is_empty() { r } else { r.within(ns) }
}

/// Push `keys` (in this order) with their cached priorities; bindings gone from the cache leave
/// the queue.
fn push_keys(ctx: &Context, shared: &Shared, keys: Vec<String>) {
    let now = shared.now();
    let mut q = shared.lock();
    for key in keys {
        match ctx.bindings.store.get(&object_ref(ctx, &key)) {
            Some(o) => q.push(&key, priority_of(&o), now),
            None => q.remove(&key),
        }
    }
    record(ctx, &q);
    drop(q);
    shared.work.notify_waiters();
}

/// The binding's `spec.schedulePriority.priority`.
pub fn priority_of(o: &DynamicObject) -> i32 {
    binding_priority(o.data.pointer("/spec/schedulePriority"))
}

/// Every cached binding, oldest first (then by namespace and name), as an initial list pushes
/// them.
fn all_keys(ctx: &Context) -> Vec<String> {
    let mut all: Vec<(Option<String>, String, String)> = ctx
        .bindings
        .store
        .state()
        .iter()
        .map(|o| {
            (
                o.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.to_string()),
                o.metadata.namespace.clone().unwrap_or_default(),
                o.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    all.sort();
    all.into_iter()
        .map(|(_, ns, name)| key_of(&ns, &name))
        .collect()
}

/// Spawn the scheduler: its feeder, [`CONCURRENCY`] workers and the flusher.
pub fn spawn(ctx: &Arc<Context>, tasks: &mut tokio::task::JoinSet<()>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(SchedulingQueue::new(
            ctx.settings.pipeline.gates.priority_based_scheduling,
        )),
        later: Mutex::new((BTreeSet::new(), HashMap::new())),
        work: tokio::sync::Notify::new(),
        timers: tokio::sync::Notify::new(),
        epoch: Instant::now(),
    });
    // Subscribed before anything runs, so no change made from now on is missed.
    let events = ctx.events.subscribe_with(
        own(
            &ctx.bindings,
            Topic::Binding,
            scheduling_changes,
            |_| false,
            scheduler_mapper(),
        ),
        true,
    );
    {
        let (ctx, shared) = (ctx.clone(), shared.clone());
        tasks.spawn(async move {
            loop {
                let keys = match events.next().await {
                    Targets::Nothing => continue,
                    Targets::All => all_keys(&ctx),
                    Targets::Objects(mut objects) | Targets::Soon(mut objects) => {
                        objects.sort();
                        objects
                            .into_iter()
                            .map(|(ns, name)| key_of(&ns, &name))
                            .collect()
                    }
                };
                push_keys(&ctx, &shared, keys);
            }
        });
    }
    for _ in 0..CONCURRENCY {
        let (ctx, shared) = (ctx.clone(), shared.clone());
        tasks.spawn(async move {
            loop {
                let notified = shared.work.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let next = shared.lock().pop();
                match next {
                    Some(info) => attempt(&ctx, &shared, info).await,
                    None => notified.await,
                }
            }
        });
    }
    {
        let (ctx, shared) = (ctx.clone(), shared.clone());
        tasks.spawn(async move {
            let mut last_unschedulable = shared.now();
            loop {
                let now = shared.now();
                let (due, next) = shared.due(now);
                let moved = {
                    let mut q = shared.lock();
                    let mut moved = q.flush_backoff(now);
                    if now.saturating_sub(last_unschedulable)
                        >= UNSCHEDULABLE_FLUSH.as_millis() as u64
                    {
                        moved += q.flush_unschedulable(now);
                        last_unschedulable = now;
                    }
                    record(&ctx, &q);
                    moved
                };
                if !due.is_empty() {
                    push_keys(&ctx, &shared, due);
                } else if moved > 0 {
                    shared.work.notify_waiters();
                }
                let tick = now.saturating_add(BACKOFF_FLUSH.as_millis() as u64);
                let wake = next.map_or(tick, |n| n.min(tick));
                let sleep = Duration::from_millis(wake.saturating_sub(shared.now()));
                tokio::select! {
                    () = tokio::time::sleep(sleep) => {}
                    () = shared.timers.notified() => {}
                }
            }
        });
    }
}

/// One scheduling attempt of `info`, then where it goes next (Karmada's `handleErr`, then `Done`).
async fn attempt(ctx: &Arc<Context>, shared: &Shared, info: QueuedBinding) {
    let obj = ctx.bindings.store.get(&object_ref(ctx, &info.key));
    let Some(obj) = obj else {
        let mut q = shared.lock();
        q.forget(&info);
        q.done(&info, shared.now());
        return;
    };
    let (namespace, name) = (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    );
    let started = Instant::now();
    let span = tracing::debug_span!("reconcile", controller = "scheduler", namespace = %namespace, name = %name, priority = info.priority, attempts = info.attempts);
    let res = tracing::Instrument::instrument(scheduler::run(obj, ctx.clone()), span).await;
    ctx.metrics
        .record(super::Id::Scheduler, started.elapsed(), res.is_ok());
    let now = shared.now();
    match res {
        Ok(v) => {
            ctx.backoff
                .succeeded(super::Id::Scheduler, &namespace, &name);
            shared.requeue_after(&info.key, v.requeue);
            let mut q = shared.lock();
            if v.unschedulable {
                q.push_unschedulable(info.clone());
            } else {
                q.forget(&info);
            }
            q.done(&info, now);
            record(ctx, &q);
        }
        Err(err) => {
            tracing::warn!(controller = "scheduler", namespace, name, error = %err, attempts = info.attempts, "scheduling attempt failed; backing off");
            let mut q = shared.lock();
            q.push_backoff(info.clone());
            q.done(&info, now);
            record(ctx, &q);
        }
    }
    shared.work.notify_waiters();
}
