//! Leader election on a `coordination.k8s.io/v1` Lease, with the semantics of client-go's
//! `leaderelection` package, so that several replicas of the controllers can run against one API
//! server and only one of them acts at a time.
//!
//! - A candidate reads the Lease every retry period, and again just when the Lease it waits for
//!   would expire. It creates the Lease when there is none and takes it over when it is free (no
//!   holder, e.g. after a release) or expired. Every write is a create or an update carrying the
//!   `resourceVersion` it read, so two candidates racing for the same Lease cannot both win: the
//!   loser gets `409 Conflict`.
//! - Expiry is judged on the local monotonic clock, not on the holder's `renewTime`: a Lease is
//!   expired when its record has not changed for `leaseDurationSeconds` since this candidate first
//!   saw it in its current form. Clock skew between replicas therefore does not matter.
//! - The leader renews every retry period. When no renewal has succeeded for the renew deadline
//!   (measured from when the last successful renewal was sent), or another holder is seen, it stops
//!   leading. With the renew deadline shorter than the lease duration, the old leader has stopped
//!   before any candidate can consider the Lease expired.
//! - On shutdown the leader releases the Lease as client-go's `ReleaseOnCancel` does: empty
//!   `holderIdentity`, `leaseDurationSeconds: 1`, so a candidate takes over at its next retry.
//!
//! [`decide`] is the pure decision (Lease record + time + identity → create/acquire/renew/wait);
//! [`Elector`] wraps it in requests; [`spawn`] runs an elector in a task and publishes whether this
//! process leads.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::{oneshot, watch};

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

/// The last Lease record seen and when it was first seen in that form.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    record: Option<LeaseSpec>,
    at: Option<Instant>,
}

impl Observed {
    /// Note that `record` was read at `now`; returns when this record was first seen.
    pub fn see(&mut self, record: Option<&LeaseSpec>, now: Instant) -> Instant {
        match self.at {
            Some(at) if self.record.as_ref() == record => at,
            _ => {
                self.record = record.cloned();
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

/// A candidate for one Lease.
#[derive(Debug)]
pub struct Elector {
    api: Api<Lease>,
    cfg: Config,
    observed: Observed,
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
        Ok(Elector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
            observed: Observed::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The holder of the Lease as last read.
    pub fn observed_holder(&self) -> Option<&str> {
        self.observed.holder()
    }

    /// Read the Lease, decide, and write: one step of client-go's `tryAcquireOrRenew`.
    ///
    /// # Errors
    /// Fails when a request fails other than by losing a race.
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, Error> {
        let lease = self.api.get_opt(&self.cfg.name).await?;
        let now = Instant::now();
        let record = lease.as_ref().and_then(|l| l.spec.as_ref());
        let seen = self.observed.see(record, now);
        let (spec, create) = match decide(record, seen, now, Timestamp::now(), &self.cfg) {
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
            let mut obj = lease.unwrap_or_default();
            obj.spec = Some(spec);
            self.api
                .replace(&self.cfg.name, &PostParams::default(), &obj)
                .await
        };
        match result {
            Ok(written) => {
                self.observed.see(written.spec.as_ref(), Instant::now());
                Ok(Attempt::Leading)
            }
            Err(e) if status_code(&e) == Some(409) => Ok(Attempt::Conflict),
            Err(e) => Err(e.into()),
        }
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
                self.observed.see(written.spec.as_ref(), Instant::now());
                Ok(true)
            }
            Err(e) if status_code(&e) == Some(409) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Retry every retry period (or right when the held Lease would expire, if sooner) until we
    /// hold the Lease; returns when the successful write was sent.
    pub async fn acquire(&mut self) -> Instant {
        loop {
            let mut wait = self.cfg.retry_period;
            let sent = Instant::now();
            match tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(Attempt::Leading)) => {
                    tracing::info!(lease = %self.cfg.name, identity = %self.cfg.identity, "acquired the lease");
                    return sent;
                }
                Ok(Ok(Attempt::HeldBy { holder, remaining })) => {
                    tracing::debug!(%holder, ?remaining, "the lease is held");
                    wait = wait.min(remaining + Duration::from_millis(1));
                }
                Ok(Ok(Attempt::Conflict)) => tracing::debug!("lost a race for the lease"),
                Ok(Err(e)) => tracing::warn!(error = %e, "acquiring the lease failed; retrying"),
                Err(_) => tracing::warn!("acquiring the lease timed out; retrying"),
            }
            tokio::time::sleep(wait).await;
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
            match tokio::time::timeout_at(deadline.into(), self.try_acquire_or_renew()).await {
                Ok(Ok(Attempt::Leading)) => last = sent,
                Ok(Ok(Attempt::HeldBy { holder, .. })) => return Lost::Taken(holder),
                Ok(Ok(Attempt::Conflict)) => tracing::debug!("renewal lost a race; retrying"),
                Ok(Err(e)) => tracing::warn!(error = %e, "renewing the lease failed; retrying"),
                Err(_) => return Lost::Deadline,
            }
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
/// Dropping it aborts the election without releasing (like a crash); call [`Leadership::release`]
/// to step down cleanly.
#[derive(Debug)]
pub struct Leadership {
    state: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Run an election for `cfg` on `client` in a task.
///
/// # Errors
/// Fails when `cfg` does not [validate](Config::validate).
pub fn spawn(client: Client, cfg: Config) -> Result<Leadership, Error> {
    let mut elector = Elector::new(client, cfg)?;
    let (tx, rx) = watch::channel(false);
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        loop {
            let last = tokio::select! {
                last = elector.acquire() => last,
                _ = &mut stop_rx => break,
            };
            let _ = tx.send(true);
            tokio::select! {
                lost = elector.renew_until_lost(last) => {
                    let _ = tx.send(false);
                    tracing::warn!(?lost, identity = %elector.cfg.identity, "lost the lease");
                }
                _ = &mut stop_rx => break,
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
    });
    Ok(Leadership {
        state: rx,
        stop: Some(stop_tx),
        task: Some(task),
    })
}

impl Leadership {
    /// Whether this process leads now.
    pub fn is_leader(&self) -> bool {
        *self.state.borrow() && self.task.as_ref().is_some_and(|t| !t.is_finished())
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
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stop the election at once without releasing, as a crash would.
    pub fn abort(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
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

    #[test]
    fn observation_time_restarts_only_when_the_record_changes() {
        let t0 = Instant::now();
        let mut o = Observed::default();
        let a = held("b", 0, wall(1_780_000_000, 0), wall(1_780_000_000, 0));
        assert_eq!(o.see(Some(&a), t0), t0);
        assert_eq!(
            o.see(Some(&a), t0 + Duration::from_secs(5)),
            t0,
            "unchanged record keeps its first sighting"
        );
        let renewed = held("b", 0, wall(1_780_000_000, 0), wall(1_780_000_002, 0));
        assert_eq!(
            o.see(Some(&renewed), t0 + Duration::from_secs(6)),
            t0 + Duration::from_secs(6)
        );
        assert_eq!(o.holder(), Some("b"));
        assert_eq!(
            o.see(None, t0 + Duration::from_secs(7)),
            t0 + Duration::from_secs(7)
        );
        assert_eq!(o.holder(), None);
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
