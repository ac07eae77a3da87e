//! Leader election on a `coordination.k8s.io/v1` Lease, with the semantics of client-go's
//! `leaderelection` package, so that several replicas of the controllers can run against one API
//! server and only one of them acts at a time.
//!
//! - A candidate watches the one Lease (`fieldSelector=metadata.name=<name>`, from the
//!   `resourceVersion` of a list) and so sees every change of its record as it happens; a watch
//!   that fails or ends with `410 Gone` is started again from a fresh list, after a bounded
//!   backoff when it failed. While no watch is established the candidate reads the Lease every
//!   retry period instead. Either way it decides again just when the Lease it waits for would
//!   expire. It creates the Lease when there is none and takes it over when it is free (no holder,
//!   e.g. after a release) or expired. Every write is a create or an update carrying the
//!   `resourceVersion` of the record it decided on, so two candidates racing for the same Lease
//!   cannot both win, and a decision made on a record that has changed since fails: the loser gets
//!   `409 Conflict`, reads the Lease again and asks the watch to start again from a fresh list.
//! - Expiry is judged on the local monotonic clock, not on the holder's `renewTime`: a Lease is
//!   expired when its record has not changed for `leaseDurationSeconds` since this candidate first
//!   saw it in its current form. Clock skew between replicas therefore does not matter. With the
//!   watch, "first saw" is when the renewal's event arrived, so a candidate takes over a crashed
//!   leader's Lease one lease duration after the last renewal it was sent (15 s from a crash at
//!   most with the defaults, plus the event's and the takeover write's latency), instead of up to a
//!   retry period later as when it only reads the Lease every retry period.
//! - The leader renews every retry period (a read and an update). When no renewal has succeeded
//!   for the renew deadline (measured from when the last successful renewal was sent), or another
//!   holder is seen, it stops leading. With the renew deadline shorter than the lease duration, the
//!   old leader has stopped before any candidate can consider the Lease expired.
//! - On shutdown the leader releases the Lease as client-go's `ReleaseOnCancel` does: empty
//!   `holderIdentity`, `leaseDurationSeconds: 1`, so a candidate takes over as soon as it sees the
//!   release.
//!
//! [`decide`] is the pure decision (Lease record + time + identity → create/acquire/renew/wait);
//! [`Observed::apply`] the pure effect of one watch event on what a candidate has seen, and
//! [`wait_after`] how long a candidate waits before deciding again; [`Elector`] wraps them in
//! requests; [`spawn`] runs an elector in a task and publishes whether this process leads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use tokio::sync::{Notify, oneshot, watch};

/// Default namespace of the Lease.
pub const DEFAULT_NAMESPACE: &str = "flotilla-system";
/// Default name of the Lease.
pub const DEFAULT_NAME: &str = "flotilla-controllers";
/// client-go's default lease duration.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// client-go's default renew deadline.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// client-go's default retry period.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// A leader-election failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("lease request failed: {0}")]
    Kube(#[from] kube::Error),
    /// The configuration is inconsistent.
    #[error("invalid leader election settings: {0}")]
    Invalid(String),
    /// The election's thread or runtime could not be started.
    #[error("starting the leader election: {0}")]
    Start(std::io::Error),
}

/// Where the Lease lives, who we are, and the timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This candidate's identity, unique among the replicas.
    pub identity: String,
    /// How long a Lease stays valid without renewal (whole seconds; written as `leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

impl Config {
    /// The defaults (client-go's timings, the `flotilla-system/flotilla-controllers` Lease) for `identity`.
    pub fn new(identity: impl Into<String>) -> Self {
        Config {
            namespace: DEFAULT_NAMESPACE.to_owned(),
            name: DEFAULT_NAME.to_owned(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Check the settings as client-go does: a non-empty identity, and
    /// lease duration > renew deadline > retry period > 0, the lease duration in whole seconds.
    ///
    /// # Errors
    /// Names the first violated rule.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |m: String| Err(Error::Invalid(m));
        if self.identity.is_empty() {
            return bad("the identity is empty".into());
        }
        if self.namespace.is_empty() || self.name.is_empty() {
            return bad("the Lease namespace and name must be set".into());
        }
        if self.lease_duration.subsec_nanos() != 0
            || self.lease_duration.as_secs() == 0
            || i32::try_from(self.lease_duration.as_secs()).is_err()
        {
            return bad(format!(
                "the lease duration must be a positive whole number of seconds, not {:?}",
                self.lease_duration
            ));
        }
        if self.retry_period.is_zero() {
            return bad("the retry period must be positive".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return bad(format!(
                "the lease duration ({:?}) must be longer than the renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline <= self.retry_period {
            return bad(format!(
                "the renew deadline ({:?}) must be longer than the retry period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::new(default_identity())
    }
}

/// `<hostname>_<pid>`: unique per process on a host, and hosts (pods) have distinct names.
pub fn default_identity() -> String {
    format!("{}_{}", hostname(), std::process::id())
}

fn hostname() -> String {
    let from_env = std::env::var("HOSTNAME").ok();
    let from_files = || {
        ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .iter()
            .find_map(|p| {
                std::fs::read_to_string(p)
                    .ok()
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
            })
    };
    from_env
        .filter(|s| !s.is_empty())
        .or_else(from_files)
        .unwrap_or_else(|| "localhost".to_owned())
}

/// What a candidate does next, given the Lease it read.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// There is no Lease: create it, held by us.
    Create(LeaseSpec),
    /// The Lease is free or expired: update it (with the `resourceVersion` read) to be held by us.
    Acquire(LeaseSpec),
    /// We hold the Lease: update its `renewTime`.
    Renew(LeaseSpec),
    /// Another candidate holds a valid Lease.
    Wait {
        /// The holder.
        holder: String,
        /// How long until the Lease expires unless it changes.
        remaining: Duration,
    },
}

/// Decide what candidate `cfg.identity` does with the Lease record `current` (`None`: no Lease).
///
/// `observed_at` is the local instant at which `current` was first seen in its present form (see
/// [`Observed`]), `now` the local instant now, and `wall` the wall-clock time written as
/// `acquireTime`/`renewTime`. A Lease held by someone else is valid until `observed_at` plus its
/// `leaseDurationSeconds`; an empty holder means free. `leaseTransitions` goes up by one whenever
/// the holder changes; `acquireTime` is kept across renewals.
pub fn decide(
    current: Option<&LeaseSpec>,
    observed_at: Instant,
    now: Instant,
    wall: Timestamp,
    cfg: &Config,
) -> Decision {
    let stamp = MicroTime(wall);
    let Some(old) = current else {
        return Decision::Create(LeaseSpec {
            holder_identity: Some(cfg.identity.clone()),
            lease_duration_seconds: Some(cfg.lease_seconds()),
            acquire_time: Some(stamp.clone()),
            renew_time: Some(stamp),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        });
    };
    let holder = old.holder_identity.as_deref().unwrap_or("");
    if holder == cfg.identity {
        let mut spec = old.clone();
        spec.lease_duration_seconds = Some(cfg.lease_seconds());
        spec.renew_time = Some(stamp.clone());
        spec.acquire_time = Some(old.acquire_time.clone().unwrap_or(stamp));
        spec.lease_transitions = Some(old.lease_transitions.unwrap_or(0));
        return Decision::Renew(spec);
    }
    if !holder.is_empty() {
        let secs = old.lease_duration_seconds.map_or(cfg.lease_duration, |s| {
            Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0))
        });
        let expires = observed_at + secs;
        if expires > now {
            return Decision::Wait {
                holder: holder.to_owned(),
                remaining: expires - now,
            };
        }
    }
    let mut spec = old.clone();
    spec.holder_identity = Some(cfg.identity.clone());
    spec.lease_duration_seconds = Some(cfg.lease_seconds());
    spec.acquire_time = Some(stamp.clone());
    spec.renew_time = Some(stamp);
    spec.lease_transitions = Some(old.lease_transitions.unwrap_or(0).saturating_add(1));
    Decision::Acquire(spec)
}

/// The record of a released Lease (client-go's `ReleaseOnCancel`): no holder, a one-second
/// duration, the transition count kept.
pub fn released(current: &LeaseSpec, wall: Timestamp) -> LeaseSpec {
    let stamp = MicroTime(wall);
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(stamp.clone()),
        renew_time: Some(stamp),
        lease_transitions: current.lease_transitions,
        ..current.clone()
    }
}

/// The Lease as this candidate last saw it, when it first saw its record in that form, and
/// whether a watch keeps that up to date.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    record: Option<LeaseSpec>,
    at: Option<Instant>,
    /// The object last seen: its `resourceVersion` guards a write decided on it.
    lease: Option<Lease>,
    watching: bool,
}

/// The record of `lease`: a Lease without a spec is one without a holder (free).
fn record_of(lease: Option<&Lease>) -> Option<LeaseSpec> {
    lease.map(|l| l.spec.clone().unwrap_or_default())
}

/// What a watch on the Lease does after an event (see [`Observed::apply`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchStep {
    /// Go on watching from this `resourceVersion`.
    Resume(String),
    /// Start again from a fresh list: at once after `410 Gone` (the `resourceVersion` is too old),
    /// after a backoff on any other failure.
    Relist {
        /// Whether to back off first.
        backoff: bool,
    },
}

impl Observed {
    /// Note that `lease` (`None`: no Lease) was seen at `now`; returns when its record was first
    /// seen in this form. The object is kept whatever the record, for its `resourceVersion`.
    pub fn see(&mut self, lease: Option<&Lease>, now: Instant) -> Instant {
        let record = record_of(lease);
        self.lease = lease.cloned();
        match self.at {
            Some(at) if self.record == record => at,
            _ => {
                self.record = record;
                self.at = Some(now);
                now
            }
        }
    }

    /// The holder of the last record seen.
    pub fn holder(&self) -> Option<&str> {
        self.record
            .as_ref()
            .and_then(|r| r.holder_identity.as_deref())
            .filter(|h| !h.is_empty())
    }

    /// The last record seen (`None`: no Lease, or nothing seen yet).
    pub fn record(&self) -> Option<&LeaseSpec> {
        self.record.as_ref()
    }

    /// When the last record was first seen in its present form (`None`: nothing seen yet).
    pub fn since(&self) -> Option<Instant> {
        self.at
    }

    /// Whether a watch is established, so that every change of the Lease is seen as it happens.
    pub fn watching(&self) -> bool {
        self.watching
    }

    /// Apply one event of a watch on the Lease `name`, received at `now`; returns whether what
    /// was seen changed (another record, or a deletion) and what the watch does next. Events for
    /// other objects (a server ignoring the field selector) change nothing.
    pub fn apply(
        &mut self,
        event: WatchEvent<Lease>,
        name: &str,
        now: Instant,
    ) -> (bool, WatchStep) {
        let (lease, deleted) = match event {
            WatchEvent::Added(l) | WatchEvent::Modified(l) => (l, false),
            WatchEvent::Deleted(l) => (l, true),
            WatchEvent::Bookmark(b) => {
                let rv = b.metadata.resource_version;
                let step = if rv.is_empty() {
                    WatchStep::Relist { backoff: true }
                } else {
                    WatchStep::Resume(rv)
                };
                return (false, step);
            }
            WatchEvent::Error(status) => {
                return (
                    false,
                    WatchStep::Relist {
                        backoff: status.code != 410,
                    },
                );
            }
        };
        let Some(rv) = lease
            .metadata
            .resource_version
            .clone()
            .filter(|v| !v.is_empty())
        else {
            return (false, WatchStep::Relist { backoff: true });
        };
        if lease.metadata.name.as_deref() != Some(name) {
            return (false, WatchStep::Resume(rv));
        }
        let before = self.at;
        let seen = self.see((!deleted).then_some(&lease), now);
        (before != Some(seen), WatchStep::Resume(rv))
    }
}

/// How long a candidate waits after `attempt` before deciding again: until the Lease it waits for
/// would expire, and no longer than `retry` when no watch tells it of changes (it then reads the
/// Lease again). After a write that lost a race it reads again at once when the write was decided
/// on a watched record (which may have been stale), else after `retry`.
pub fn wait_after(
    attempt: &Attempt,
    watching: bool,
    from_watch: bool,
    retry: Duration,
) -> Duration {
    match attempt {
        Attempt::HeldBy { remaining, .. } => {
            let expiry = *remaining + Duration::from_millis(1);
            if watching { expiry } else { expiry.min(retry) }
        }
        Attempt::Conflict if from_watch => Duration::ZERO,
        Attempt::Leading | Attempt::Conflict => retry,
    }
}

/// The pause before the watch is started again after `failures` consecutive failures: 200 ms,
/// doubling, at most `cap`.
pub fn watch_backoff(failures: u32, cap: Duration) -> Duration {
    Duration::from_millis(200)
        .saturating_mul(1 << failures.min(16))
        .min(cap)
}

/// The result of one acquire-or-renew attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// We hold the Lease (created, acquired or renewed).
    Leading,
    /// Another candidate holds a valid Lease.
    HeldBy {
        /// The holder.
        holder: String,
        /// How long until it expires unless renewed.
        remaining: Duration,
    },
    /// Our write lost a race (409); try again.
    Conflict,
}

/// The server-side timeout of one watch request; the watch is started again after it.
const WATCH_TIMEOUT_SECS: u32 = 60;
/// A watch that has delivered nothing (not even its end) for this long past its timeout is
/// considered stalled and started again.
const WATCH_STALL_MARGIN: Duration = Duration::from_secs(15);

/// Aborts a task when dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A candidate for one Lease.
#[derive(Debug)]
pub struct Elector {
    api: Api<Lease>,
    cfg: Config,
    /// What was seen, written by the watch task (notifying) and by this elector's own reads and
    /// writes (silently: they do not need to wake it).
    shared: Arc<watch::Sender<Observed>>,
    changes: watch::Receiver<Observed>,
    /// Asks the watch to start again from a fresh list.
    resync: Arc<Notify>,
    watcher: Option<AbortOnDrop>,
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

impl Elector {
    /// A candidate with `cfg` on `client`.
    ///
    /// # Errors
    /// Fails when `cfg` does not [validate](Config::validate).
    pub fn new(client: Client, cfg: Config) -> Result<Self, Error> {
        cfg.validate()?;
        let (tx, rx) = watch::channel(Observed::default());
        Ok(Elector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            shared: Arc::new(tx),
            changes: rx,
            resync: Arc::new(Notify::new()),
            watcher: None,
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The holder of the Lease as last seen.
    pub fn observed_holder(&self) -> Option<String> {
        self.shared.borrow().holder().map(str::to_owned)
    }

    /// Note `lease` as seen now, without waking the elector; returns the observation.
    fn see(&self, lease: Option<&Lease>) -> Observed {
        let now = Instant::now();
        let mut out = Observed::default();
        self.shared.send_if_modified(|o| {
            o.see(lease, now);
            out = o.clone();
            false
        });
        out
    }

    /// Decide on `observed` (as seen at its time) and write: create, or update with the
    /// `resourceVersion` of the object decided on.
    async fn decide_and_write(&self, observed: &Observed) -> Result<Attempt, Error> {
        let now = Instant::now();
        let seen = observed.since().unwrap_or(now);
        let (spec, create) = match decide(observed.record(), seen, now, Timestamp::now(), &self.cfg)
        {
            Decision::Wait { holder, remaining } => {
                return Ok(Attempt::HeldBy { holder, remaining });
            }
            Decision::Create(spec) => (spec, true),
            Decision::Acquire(spec) | Decision::Renew(spec) => (spec, false),
        };
        let result = if create {
            let obj = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            self.api.create(&PostParams::default(), &obj).await
        } else {
            // Update with the resourceVersion read: optimistic concurrency, never a blind overwrite.
            let mut obj = observed.lease.clone().unwrap_or_default();
            obj.spec = Some(spec);
            self.api
                .replace(&self.cfg.name, &PostParams::default(), &obj)
                .await
        };
        match result {
            Ok(written) => {
                self.see(Some(&written));
                Ok(Attempt::Leading)
            }
            Err(e) if status_code(&e) == Some(409) => Ok(Attempt::Conflict),
            Err(e) => Err(e.into()),
        }
    }

    /// Read the Lease, decide, and write: one step of client-go's `tryAcquireOrRenew`.
    ///
    /// # Errors
    /// Fails when a request fails other than by losing a race.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, Error> {
        let lease = self.api.get_opt(&self.cfg.name).await?;
        let observed = self.see(lease.as_ref());
        self.decide_and_write(&observed).await
    }

    /// A leader's renewal: first optimistically, an update of the Lease last seen (our own last
    /// write, or its watch event) without reading it again — one request instead of two, as
    /// client-go's leader fast path does; on a conflict or any other failure, the read + write of
    /// [`Elector::try_acquire_or_renew`].
    ///
    /// # Errors
    /// Fails when the read + write fails other than by losing a race.
    pub async fn renew(&mut self) -> Result<Attempt, Error> {
        let observed = self.changes.borrow().clone();
        if observed.holder() == Some(self.cfg.identity.as_str()) && observed.lease.is_some() {
            match self.decide_and_write(&observed).await {
                Ok(Attempt::Leading) => return Ok(Attempt::Leading),
                Ok(other) => {
                    tracing::debug!(?other, "optimistic renewal failed; reading the lease")
                }
                Err(e) => {
                    tracing::debug!(error = %e, "optimistic renewal failed; reading the lease")
                }
            }
        }
        self.try_acquire_or_renew().await
    }

    /// Release the Lease if we hold it. Returns whether it was released.
    ///
    /// # Errors
    /// Fails when a request fails.
    pub async fn release(&mut self) -> Result<bool, Error> {
        let Some(mut lease) = self.api.get_opt(&self.cfg.name).await? else {
            return Ok(false);
        };
        let Some(spec) = lease.spec.as_ref() else {
            return Ok(false);
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(false);
        }
        lease.spec = Some(released(spec, Timestamp::now()));
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.see(Some(&written));
                Ok(true)
            }
            Err(e) if status_code(&e) == Some(409) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Start the watch on the Lease unless it runs.
    fn start_watch(&mut self) {
        if self.watcher.as_ref().is_some_and(|w| !w.0.is_finished()) {
            return;
        }
        let task = tokio::spawn(watch_lease(
            self.api.clone(),
            self.cfg.clone(),
            self.shared.clone(),
            self.resync.clone(),
        ));
        self.watcher = Some(AbortOnDrop(task));
    }

    /// Until we hold the Lease: decide on every change the watch reports and when the Lease we wait
    /// for would expire, reading the Lease every retry period while no watch is established.
    /// Returns when the successful write was sent.
    pub async fn acquire(&mut self) -> Instant {
        self.start_watch();
        let mut read = true;
        let mut waiting_for: Option<String> = None;
        loop {
            let observed = self.changes.borrow_and_update().clone();
            let from_watch = observed.watching() && !read;
            let sent = Instant::now();
            let attempt = if from_watch {
                tokio::time::timeout(self.cfg.renew_deadline, self.decide_and_write(&observed))
                    .await
            } else {
                tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew()).await
            };
            read = false;
            let wait = match attempt {
                Ok(Ok(Attempt::Leading)) => {
                    tracing::info!(lease = %self.cfg.name, identity = %self.cfg.identity, "acquired the lease");
                    return sent;
                }
                Ok(Ok(attempt)) => {
                    match &attempt {
                        Attempt::HeldBy { holder, remaining } => {
                            if waiting_for.as_deref() != Some(holder) {
                                tracing::info!(%holder, ?remaining, identity = %self.cfg.identity, "the lease is held; waiting");
                                waiting_for = Some(holder.clone());
                            }
                            tracing::debug!(%holder, ?remaining, from_watch, "the lease is held");
                        }
                        Attempt::Conflict => {
                            tracing::debug!(
                                from_watch,
                                "lost a race for the lease; reading it again"
                            );
                            read = true;
                            if from_watch {
                                // The watched record was stale: the watch may be stuck.
                                self.resync.notify_one();
                            }
                        }
                        Attempt::Leading => {}
                    }
                    let watching = self.changes.borrow().watching();
                    wait_after(&attempt, watching, from_watch, self.cfg.retry_period)
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "acquiring the lease failed; retrying");
                    read = true;
                    self.cfg.retry_period
                }
                Err(_) => {
                    tracing::warn!("acquiring the lease timed out; retrying");
                    read = true;
                    self.cfg.retry_period
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        // The sender lives in `self`; this cannot happen, but never spin.
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        }
    }

    /// Renew every retry period while leading, starting from a successful write sent at `last`.
    /// Returns when leadership is lost: another holder is seen, or no renewal succeeded within the
    /// renew deadline. Never returns later than the renew deadline after the last success was sent.
    pub async fn renew_until_lost(&mut self, mut last: Instant) -> Lost {
        loop {
            let deadline = last + self.cfg.renew_deadline;
            tokio::time::sleep_until(
                std::cmp::min(Instant::now() + self.cfg.retry_period, deadline).into(),
            )
            .await;
            if Instant::now() >= deadline {
                return Lost::Deadline;
            }
            let sent = Instant::now();
            match tokio::time::timeout_at(deadline.into(), self.renew()).await {
                Ok(Ok(Attempt::Leading)) => last = sent,
                Ok(Ok(Attempt::HeldBy { holder, .. })) => return Lost::Taken(holder),
                Ok(Ok(Attempt::Conflict)) => tracing::debug!("renewal lost a race; retrying"),
                Ok(Err(e)) => tracing::warn!(error = %e, "renewing the lease failed; retrying"),
                Err(_) => return Lost::Deadline,
            }
        }
    }
}

/// Keep `shared` up to date with the Lease `cfg.name`: list it, watch it from the list's
/// `resourceVersion`, and start again from a fresh list when the watch fails (after a bounded
/// backoff), ends with `410 Gone`, stalls, or `resync` is notified. `watching` is set while a watch
/// is established.
async fn watch_lease(
    api: Api<Lease>,
    cfg: Config,
    shared: Arc<watch::Sender<Observed>>,
    resync: Arc<Notify>,
) {
    use futures::StreamExt as _;
    let selector = format!("metadata.name={}", cfg.name);
    let params = WatchParams::default()
        .fields(&selector)
        .timeout(WATCH_TIMEOUT_SECS);
    let stall = Duration::from_secs(u64::from(WATCH_TIMEOUT_SECS)) + WATCH_STALL_MARGIN;
    let set_watching =
        |on: bool| shared.send_if_modified(|o| std::mem::replace(&mut o.watching, on) != on);
    let mut failures: u32 = 0;
    loop {
        let backoff = 'session: {
            let list = match api.list(&ListParams::default().fields(&selector)).await {
                Ok(list) => list,
                Err(e) => {
                    tracing::warn!(error = %e, lease = %cfg.name, "listing the lease failed; reading it every retry period meanwhile");
                    break 'session true;
                }
            };
            let now = Instant::now();
            let lease = list
                .items
                .iter()
                .find(|l| l.metadata.name.as_deref() == Some(cfg.name.as_str()));
            shared.send_if_modified(|o| {
                let before = o.since();
                Some(o.see(lease, now)) != before
            });
            let Some(mut rv) = list.metadata.resource_version.filter(|v| !v.is_empty()) else {
                tracing::warn!(lease = %cfg.name, "the lease list has no resourceVersion; not watching");
                break 'session true;
            };
            loop {
                let stream = match api.watch(&params, &rv).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, lease = %cfg.name, "watching the lease failed; reading it every retry period meanwhile");
                        break 'session true;
                    }
                };
                if set_watching(true) {
                    tracing::info!(lease = %cfg.name, identity = %cfg.identity, "watching the lease");
                }
                let mut stream = std::pin::pin!(stream);
                loop {
                    let next = tokio::select! {
                        next = tokio::time::timeout(stall, stream.next()) => next,
                        () = resync.notified() => {
                            tracing::debug!(lease = %cfg.name, "reading the lease again: a write decided on the watched record lost a race");
                            break 'session false;
                        }
                    };
                    let event = match next {
                        Err(_) => {
                            tracing::warn!(lease = %cfg.name, "the lease watch stalled; starting it again");
                            break 'session false;
                        }
                        // The server ended the watch (its timeout): resume from where it was.
                        Ok(None) => break,
                        Ok(Some(Err(e))) => {
                            tracing::warn!(error = %e, lease = %cfg.name, "the lease watch failed; starting it again");
                            break 'session true;
                        }
                        Ok(Some(Ok(event))) => event,
                    };
                    let now = Instant::now();
                    let mut step = WatchStep::Relist { backoff: true };
                    shared.send_if_modified(|o| {
                        let (changed, s) = o.apply(event, &cfg.name, now);
                        step = s;
                        changed
                    });
                    match step {
                        WatchStep::Resume(v) => {
                            rv = v;
                            failures = 0;
                        }
                        WatchStep::Relist { backoff } => {
                            tracing::debug!(lease = %cfg.name, backoff, "the lease watch ended with an error event; listing again");
                            break 'session backoff;
                        }
                    }
                }
            }
        };
        set_watching(false);
        if backoff {
            tokio::time::sleep(watch_backoff(failures, cfg.lease_duration)).await;
            failures = failures.saturating_add(1);
        }
    }
}

/// Why leadership ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// No renewal succeeded within the renew deadline.
    Deadline,
    /// Another candidate holds the Lease.
    Taken(String),
}

/// A running elector: whether this process leads, and how to stop it.
///
/// The election runs on a thread of its own with its own single-threaded runtime and its own
/// client (see [`spawn`]), so renewals are not queued behind the controllers' work: on a host
/// whose cores the controllers (or anything else) keep busy, renewals sharing their runtime and
/// connection pool took over the 10 s renew deadline and the leader lost the Lease mid-storm.
/// Dropping it aborts the election without releasing (like a crash); call
/// [`Leadership::release`] to step down cleanly.
#[derive(Debug)]
pub struct Leadership {
    state: watch::Receiver<bool>,
    /// Asks the election to stop and release.
    stop: Option<oneshot::Sender<()>>,
    /// Dropped: the election stops at once without releasing.
    abort: Option<oneshot::Sender<()>>,
    /// Sent (or dropped) when the election's thread is done.
    done: Option<oneshot::Receiver<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Run an election for `cfg` on a thread of its own, with the client `connect` makes there (it is
/// called inside that thread's runtime, so a client built from a `kube::Config` keeps its
/// connections and tasks off the caller's runtime).
///
/// # Errors
/// Fails when `cfg` does not [validate](Config::validate), the thread or its runtime cannot be
/// started, or `connect` fails.
pub fn spawn<F>(connect: F, cfg: Config) -> Result<Leadership, Error>
where
    F: FnOnce() -> Result<Client, Error> + Send + 'static,
{
    cfg.validate()?;
    let (tx, rx) = watch::channel(false);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (abort_tx, abort_rx) = oneshot::channel::<()>();
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let (started_tx, started_rx) = std::sync::mpsc::sync_channel::<Result<(), Error>>(1);
    let thread = std::thread::Builder::new()
        .name("leader-election".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = started_tx.send(Err(Error::Start(e)));
                    return;
                }
            };
            rt.block_on(async move {
                let elector = match connect().and_then(|client| Elector::new(client, cfg)) {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                };
                let _ = started_tx.send(Ok(()));
                tokio::select! {
                    () = elect(elector, &tx, stop_rx) => {}
                    _ = abort_rx => {}
                }
                let _ = tx.send(false);
            });
            // Dropping the runtime stops the Lease watch.
            drop(rt);
            let _ = done_tx.send(());
        })
        .map_err(Error::Start)?;
    match started_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(Error::Start(std::io::Error::other(
                "the leader-election thread ended before it started",
            )));
        }
    }
    Ok(Leadership {
        state: rx,
        stop: Some(stop_tx),
        abort: Some(abort_tx),
        done: Some(done_rx),
        thread: Some(thread),
    })
}

/// Acquire, lead until the Lease is lost, and again, until `stop` is sent; then release the Lease if
/// held. A dropped `stop` (the [`Leadership`] dropped or aborted) ends it without releasing.
async fn elect(mut elector: Elector, tx: &watch::Sender<bool>, mut stop: oneshot::Receiver<()>) {
    loop {
        // A dropped `stop` sender is the `Leadership` dropped or aborted: end without releasing.
        let last = tokio::select! {
            last = elector.acquire() => last,
            r = &mut stop => if r.is_ok() { break } else { return },
        };
        let _ = tx.send(true);
        tokio::select! {
            lost = elector.renew_until_lost(last) => {
                let _ = tx.send(false);
                tracing::warn!(?lost, identity = %elector.cfg.identity, "lost the lease");
            }
            r = &mut stop => if r.is_ok() { break } else { return },
        }
    }
    let _ = tx.send(false);
    // Release even when stopped mid-acquire: a create or update may have succeeded unseen.
    match tokio::time::timeout(elector.cfg.renew_deadline, elector.release()).await {
        Ok(Ok(true)) => tracing::info!(identity = %elector.cfg.identity, "released the lease"),
        Ok(Ok(false)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "releasing the lease failed"),
        Err(_) => tracing::warn!("releasing the lease timed out"),
    }
}

impl Leadership {
    /// Whether this process leads now.
    pub fn is_leader(&self) -> bool {
        *self.state.borrow() && self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Wait until this process leads (`true`) or does not (`false`). Waiting to lead never returns
    /// once the election has stopped.
    pub async fn wait_for(&mut self, leading: bool) {
        if self.state.wait_for(|v| *v == leading).await.is_err() && leading {
            std::future::pending::<()>().await;
        }
    }

    /// Step down: stop the election and release the Lease if held. Stop the work that needs
    /// leadership first.
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
    }

    /// Stop the election at once without releasing, as a crash would.
    pub fn abort(mut self) {
        self.abort.take();
    }
}

/// Create namespace `name` unless it exists (ignoring a lack of permission to create it, since the
/// Lease write will then say what is wrong).
///
/// # Errors
/// Fails when a request fails otherwise.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<(), Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(status_code(&e), Some(409 | 403)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(identity: &str) -> Config {
        Config::new(identity)
    }

    fn wall(secs: i64, micros: i32) -> Timestamp {
        Timestamp::new(secs, micros * 1000).expect("valid timestamp")
    }

    fn held(holder: &str, transitions: i32, acquired: Timestamp, renewed: Timestamp) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn no_lease_is_created_held_by_us_with_zero_transitions() {
        let t = Instant::now();
        let w = wall(1_780_000_000, 123_456);
        let Decision::Create(spec) = decide(None, t, t, w, &cfg("a")) else {
            panic!("expected Create")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(0));
        assert_eq!(spec.acquire_time, Some(MicroTime(w)));
        assert_eq!(spec.renew_time, Some(MicroTime(w)));
    }

    #[test]
    fn a_held_lease_is_respected_until_it_has_not_changed_for_its_duration() {
        let t0 = Instant::now();
        let old = wall(1_780_000_000, 0);
        let lease = held("b", 3, old, old);
        // Seen at t0: valid for 15 s from then, whatever the wall clock says.
        let d = decide(
            Some(&lease),
            t0,
            t0 + Duration::from_secs(14),
            wall(1_790_000_000, 0),
            &cfg("a"),
        );
        assert_eq!(
            d,
            Decision::Wait {
                holder: "b".into(),
                remaining: Duration::from_secs(1)
            }
        );
        assert!(matches!(
            decide(Some(&lease), t0, t0, old, &cfg("a")),
            Decision::Wait { .. }
        ));
    }

    #[test]
    fn an_expired_lease_is_taken_over_with_one_more_transition() {
        let t0 = Instant::now();
        let acquired = wall(1_780_000_000, 0);
        let lease = held("b", 3, acquired, wall(1_780_000_100, 0));
        let now = wall(1_780_000_200, 654_321);
        let Decision::Acquire(spec) = decide(
            Some(&lease),
            t0,
            t0 + Duration::from_secs(15),
            now,
            &cfg("a"),
        ) else {
            panic!("expected Acquire")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(spec.acquire_time, Some(MicroTime(now)));
        assert_eq!(spec.renew_time, Some(MicroTime(now)));
        assert_eq!(spec.lease_duration_seconds, Some(15));
    }

    #[test]
    fn the_holders_own_lease_is_renewed_keeping_acquire_time_and_transitions() {
        let t0 = Instant::now();
        let acquired = wall(1_780_000_000, 0);
        let lease = held("a", 2, acquired, wall(1_780_000_010, 0));
        let now = wall(1_780_000_012, 500);
        // Even long after it was seen: our own Lease is renewed, not re-acquired.
        let Decision::Renew(spec) = decide(
            Some(&lease),
            t0,
            t0 + Duration::from_secs(60),
            now,
            &cfg("a"),
        ) else {
            panic!("expected Renew")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(2));
        assert_eq!(spec.acquire_time, Some(MicroTime(acquired)));
        assert_eq!(spec.renew_time, Some(MicroTime(now)));
    }

    #[test]
    fn a_released_lease_is_free_at_once_and_taking_it_is_a_transition() {
        let t0 = Instant::now();
        let lease = held("b", 5, wall(1_780_000_000, 0), wall(1_780_000_010, 0));
        let rel = released(&lease, wall(1_780_000_011, 0));
        assert_eq!(rel.holder_identity.as_deref(), Some(""));
        assert_eq!(rel.lease_duration_seconds, Some(1));
        assert_eq!(rel.lease_transitions, Some(5));
        assert_eq!(rel.renew_time, Some(MicroTime(wall(1_780_000_011, 0))));
        let Decision::Acquire(spec) = decide(Some(&rel), t0, t0, wall(1_780_000_012, 0), &cfg("a"))
        else {
            panic!("expected Acquire")
        };
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_transitions, Some(6));
        // A lease without a holder at all is free as well.
        let empty = LeaseSpec::default();
        let Decision::Acquire(spec) =
            decide(Some(&empty), t0, t0, wall(1_780_000_012, 0), &cfg("a"))
        else {
            panic!("expected Acquire")
        };
        assert_eq!(spec.lease_transitions, Some(1));
    }

    #[test]
    fn the_records_own_duration_decides_validity() {
        let t0 = Instant::now();
        let mut lease = held("b", 0, wall(1_780_000_000, 0), wall(1_780_000_000, 0));
        lease.lease_duration_seconds = Some(3);
        assert!(matches!(
            decide(
                Some(&lease),
                t0,
                t0 + Duration::from_secs(2),
                wall(1_780_000_002, 0),
                &cfg("a")
            ),
            Decision::Wait { .. }
        ));
        assert!(matches!(
            decide(
                Some(&lease),
                t0,
                t0 + Duration::from_secs(3),
                wall(1_780_000_003, 0),
                &cfg("a")
            ),
            Decision::Acquire(_)
        ));
    }

    fn object(name: &str, rv: &str, spec: LeaseSpec) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(DEFAULT_NAMESPACE.into()),
                resource_version: Some(rv.into()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        }
    }

    #[test]
    fn observation_time_restarts_only_when_the_record_changes() {
        let t0 = Instant::now();
        let mut o = Observed::default();
        let a = held("b", 0, wall(1_780_000_000, 0), wall(1_780_000_000, 0));
        assert_eq!(o.see(Some(&object(DEFAULT_NAME, "1", a.clone())), t0), t0);
        assert_eq!(
            o.see(
                Some(&object(DEFAULT_NAME, "2", a)),
                t0 + Duration::from_secs(5)
            ),
            t0,
            "unchanged record keeps its first sighting"
        );
        assert_eq!(
            o.lease
                .as_ref()
                .and_then(|l| l.metadata.resource_version.as_deref()),
            Some("2"),
            "the latest object is kept for its resourceVersion"
        );
        let renewed = held("b", 0, wall(1_780_000_000, 0), wall(1_780_000_002, 0));
        assert_eq!(
            o.see(
                Some(&object(DEFAULT_NAME, "3", renewed)),
                t0 + Duration::from_secs(6)
            ),
            t0 + Duration::from_secs(6)
        );
        assert_eq!(o.holder(), Some("b"));
        assert_eq!(
            o.see(None, t0 + Duration::from_secs(7)),
            t0 + Duration::from_secs(7)
        );
        assert_eq!(o.holder(), None);
        assert_eq!(o.record(), None);
        // A Lease without a spec is a free one, not a missing one (which would be created).
        let bare = Lease {
            metadata: ObjectMeta {
                name: Some(DEFAULT_NAME.into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        o.see(Some(&bare), t0 + Duration::from_secs(8));
        assert!(matches!(
            decide(
                o.record(),
                t0 + Duration::from_secs(8),
                t0 + Duration::from_secs(8),
                wall(1_780_000_010, 0),
                &cfg("a")
            ),
            Decision::Acquire(_)
        ));
    }

    #[test]
    fn a_watched_renewal_restarts_the_countdown_when_its_event_arrives() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut o = Observed::default();
        let first = held("b", 0, wall(1_780_000_000, 0), wall(1_780_000_000, 0));
        let (changed, step) = o.apply(
            WatchEvent::Added(object(DEFAULT_NAME, "10", first.clone())),
            DEFAULT_NAME,
            at(0),
        );
        assert!(changed);
        assert_eq!(step, WatchStep::Resume("10".into()));
        // The renewal's event at 2 s: the 15 s start from there, whatever its renewTime says
        // (here one far in the past: the holder's clock is skewed).
        let renewed = held("b", 0, wall(1_780_000_000, 0), wall(1_700_000_000, 0));
        let (changed, step) = o.apply(
            WatchEvent::Modified(object(DEFAULT_NAME, "11", renewed.clone())),
            DEFAULT_NAME,
            at(2_000),
        );
        assert!(changed);
        assert_eq!(step, WatchStep::Resume("11".into()));
        assert_eq!(o.since(), Some(at(2_000)));
        // A change outside the record (metadata only) does not restart it, but its
        // resourceVersion is the one a write must carry.
        let (changed, step) = o.apply(
            WatchEvent::Modified(object(DEFAULT_NAME, "12", renewed)),
            DEFAULT_NAME,
            at(3_000),
        );
        assert!(!changed);
        assert_eq!(step, WatchStep::Resume("12".into()));
        assert_eq!(o.since(), Some(at(2_000)));
        let w = wall(1_780_000_100, 0);
        assert_eq!(
            decide(o.record(), at(2_000), at(16_999), w, &cfg("a")),
            Decision::Wait {
                holder: "b".into(),
                remaining: Duration::from_millis(1)
            }
        );
        let Decision::Acquire(spec) = decide(o.record(), at(2_000), at(17_000), w, &cfg("a"))
        else {
            panic!("expected Acquire 15 s after the renewal was seen")
        };
        assert_eq!(spec.lease_transitions, Some(1));
        assert_eq!(
            o.lease
                .as_ref()
                .and_then(|l| l.metadata.resource_version.as_deref()),
            Some("12")
        );
    }

    #[test]
    fn watch_events_steer_the_watch() {
        let t0 = Instant::now();
        let mut o = Observed::default();
        let spec = held("b", 0, wall(1_780_000_000, 0), wall(1_780_000_000, 0));
        o.apply(
            WatchEvent::Added(object(DEFAULT_NAME, "5", spec.clone())),
            DEFAULT_NAME,
            t0,
        );
        let later = t0 + Duration::from_secs(1);
        let bookmark: kube::core::watch::Bookmark = serde_json::from_value(serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"resourceVersion": "9"}
        }))
        .expect("a bookmark");
        assert_eq!(
            o.apply(WatchEvent::Bookmark(bookmark), DEFAULT_NAME, later),
            (false, WatchStep::Resume("9".into()))
        );
        let status = |code: u16| {
            let mut s = kube::core::Status::failure("watch failed", "Expired");
            s.code = code;
            WatchEvent::Error(Box::new(s))
        };
        assert_eq!(
            o.apply(status(410), DEFAULT_NAME, later),
            (false, WatchStep::Relist { backoff: false }),
            "410 Gone: list again at once"
        );
        assert_eq!(
            o.apply(status(500), DEFAULT_NAME, later),
            (false, WatchStep::Relist { backoff: true })
        );
        // Another object (a server ignoring the field selector) changes nothing.
        let other = held("z", 0, wall(1_780_000_000, 0), wall(1_780_000_001, 0));
        assert_eq!(
            o.apply(
                WatchEvent::Modified(object("other", "11", other.clone())),
                DEFAULT_NAME,
                later
            ),
            (false, WatchStep::Resume("11".into()))
        );
        assert_eq!(o.holder(), Some("b"));
        assert_eq!(o.since(), Some(t0));
        // An object without a resourceVersion cannot be resumed from.
        let mut bad = object(DEFAULT_NAME, "", other);
        bad.metadata.resource_version = None;
        assert_eq!(
            o.apply(WatchEvent::Modified(bad), DEFAULT_NAME, later),
            (false, WatchStep::Relist { backoff: true })
        );
        assert_eq!(o.since(), Some(t0));
        // Deleted: nothing held, so the candidate creates the Lease.
        assert_eq!(
            o.apply(
                WatchEvent::Deleted(object(DEFAULT_NAME, "12", spec)),
                DEFAULT_NAME,
                later
            ),
            (true, WatchStep::Resume("12".into()))
        );
        assert!(matches!(
            decide(o.record(), later, later, wall(1_780_000_002, 0), &cfg("a")),
            Decision::Create(_)
        ));
    }

    #[test]
    fn waits_follow_the_watch_and_fall_back_to_the_retry_period() {
        let retry = DEFAULT_RETRY_PERIOD;
        let held = |s: u64| Attempt::HeldBy {
            holder: "b".into(),
            remaining: Duration::from_secs(s),
        };
        // Watching: sleep until the expiry (a change wakes the candidate earlier).
        assert_eq!(
            wait_after(&held(14), true, true, retry),
            Duration::from_millis(14_001)
        );
        // Not watching: read again every retry period, or at the expiry if sooner.
        assert_eq!(wait_after(&held(14), false, false, retry), retry);
        assert_eq!(
            wait_after(&held(1), false, false, retry),
            Duration::from_millis(1_001)
        );
        // A write decided on a watched record lost a race: read at once; after a read, back off.
        assert_eq!(
            wait_after(&Attempt::Conflict, true, true, retry),
            Duration::ZERO
        );
        assert_eq!(wait_after(&Attempt::Conflict, true, false, retry), retry);
        assert_eq!(
            watch_backoff(0, Duration::from_secs(15)),
            Duration::from_millis(200)
        );
        assert_eq!(
            watch_backoff(3, Duration::from_secs(15)),
            Duration::from_millis(1_600)
        );
        assert_eq!(
            watch_backoff(7, Duration::from_secs(15)),
            Duration::from_secs(15)
        );
        assert_eq!(
            watch_backoff(u32::MAX, Duration::from_secs(15)),
            Duration::from_secs(15)
        );
    }

    /// A leader renewing every `period` from `t0` is killed at `kill`; each renewal reaches the
    /// candidate `lag` after it, through the watch, or, without one, only on the candidate's reads
    /// (every retry period from `phase`, and at the expiry it waits for). Returns when the
    /// candidate decides to take over, driving [`Observed`], [`decide`] and [`wait_after`] as
    /// [`Elector::acquire`] does.
    fn simulated_takeover(
        kill: Duration,
        period: Duration,
        lag: Duration,
        watching: bool,
        phase: Duration,
    ) -> Duration {
        let t0 = Instant::now();
        let c = cfg("a");
        let renewals: Vec<Duration> = (0u32..)
            .map(|k| period * k)
            .take_while(|r| *r < kill)
            .collect();
        let record = |k: usize| {
            let micros = i64::try_from(renewals[k].as_micros()).expect("small");
            let stamp = Timestamp::from_microsecond(1_780_000_000_000_000 + micros).expect("valid");
            object(
                DEFAULT_NAME,
                &(k + 1).to_string(),
                held("b", 0, wall(1_780_000_000, 0), stamp),
            )
        };
        let mut o = Observed::default();
        let mut applied = 0;
        let mut now = if watching { lag } else { phase };
        loop {
            if watching {
                while applied < renewals.len() && renewals[applied] + lag <= now {
                    o.apply(
                        WatchEvent::Modified(record(applied)),
                        DEFAULT_NAME,
                        t0 + renewals[applied] + lag,
                    );
                    applied += 1;
                }
            } else if let Some(k) = renewals.iter().rposition(|r| *r <= now) {
                o.see(Some(&record(k)), t0 + now);
            }
            let since = o.since().expect("seen");
            let attempt = match decide(o.record(), since, t0 + now, wall(1_780_000_000, 0), &c) {
                Decision::Acquire(_) => return now,
                Decision::Wait { holder, remaining } => Attempt::HeldBy { holder, remaining },
                other => panic!("unexpected {other:?}"),
            };
            let mut next = now + wait_after(&attempt, watching, watching, c.retry_period);
            if watching && let Some(k) = renewals.get(applied) {
                next = next.min(*k + lag);
            }
            now = next;
        }
    }

    #[test]
    fn with_the_watch_a_crashed_leader_is_replaced_within_the_lease_duration() {
        let period = DEFAULT_RETRY_PERIOD;
        let lag = Duration::from_millis(5);
        let mut polled_max = Duration::ZERO;
        // Kills at every 50 ms of a renewal period, after a few renewals.
        for step in 0..40u32 {
            let kill = Duration::from_secs(20) + Duration::from_millis(50) * step + lag;
            let last_renewal =
                period * u32::try_from(kill.as_millis() / period.as_millis()).expect("small");
            let took = simulated_takeover(kill, period, lag, true, Duration::ZERO) - kill;
            // One lease duration after the last renewal's event (+ the 1 ms past the expiry).
            assert_eq!(
                took + kill,
                last_renewal + lag + DEFAULT_LEASE_DURATION + Duration::from_millis(1),
                "kill at {kill:?}"
            );
            assert!(
                took <= DEFAULT_LEASE_DURATION + Duration::from_millis(1),
                "kill at {kill:?}: {took:?}"
            );
            for phase_ms in [0, 500, 1_000, 1_500, 1_990] {
                let phase = Duration::from_millis(phase_ms);
                let polled = simulated_takeover(kill, period, lag, false, phase) - kill;
                polled_max = polled_max.max(polled);
            }
        }
        // Reading every retry period instead sees renewals up to a period late: up to ~17 s.
        assert!(
            polled_max > DEFAULT_LEASE_DURATION + Duration::from_secs(1),
            "polling's worst case: {polled_max:?}"
        );
    }

    #[test]
    fn times_serialize_as_rfc3339_with_microseconds() {
        let spec = released(&LeaseSpec::default(), wall(1_780_000_000, 42));
        let v = serde_json::to_value(&spec).expect("serializes");
        assert_eq!(v["renewTime"], "2026-05-28T20:26:40.000042Z");
        assert_eq!(v["holderIdentity"], "");
        assert_eq!(v["leaseDurationSeconds"], 1);
    }

    #[test]
    fn settings_are_checked_like_client_go() {
        assert!(Config::new("a").validate().is_ok());
        assert!(Config::new("").validate().is_err());
        let mut c = Config::new("a");
        c.renew_deadline = c.lease_duration;
        assert!(c.validate().is_err());
        let mut c = Config::new("a");
        c.retry_period = c.renew_deadline;
        assert!(c.validate().is_err());
        let mut c = Config::new("a");
        c.lease_duration = Duration::from_millis(15_500);
        assert!(c.validate().is_err());
        assert!(default_identity().ends_with(&format!("_{}", std::process::id())));
    }
}
