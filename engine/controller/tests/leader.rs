//! Leader election against the embedded API server, in process: candidates racing for one Lease,
//! with the number of leaders sampled every few milliseconds throughout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flotilla_apiserver::{ApiServer, ServerOptions, Store};
use flotilla_controller::client;
use flotilla_controller::leader::{self, Config, Leadership};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::Client;
use kube::api::{Api, PostParams};

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(250);

struct Env {
    client: Client,
    _server: Arc<ApiServer>,
    _dir: tempfile::TempDir,
}

async fn env() -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store opens");
    let server = ApiServer::new(store, ServerOptions::default());
    let client = client::in_process(server.router(), None, None);
    leader::ensure_namespace(&client, leader::DEFAULT_NAMESPACE)
        .await
        .expect("namespace");
    Env {
        client,
        _server: server,
        _dir: dir,
    }
}

fn cfg(identity: &str) -> Config {
    Config {
        lease_duration: LEASE,
        renew_deadline: RENEW,
        retry_period: RETRY,
        ..Config::new(identity)
    }
}

fn candidate(e: &Env, identity: &str) -> Leadership {
    let client = e.client.clone();
    leader::spawn(move || Ok(client), cfg(identity)).expect("valid settings")
}

async fn lease(e: &Env) -> LeaseSpec {
    let api: Api<Lease> = Api::namespaced(e.client.clone(), leader::DEFAULT_NAMESPACE);
    api.get(leader::DEFAULT_NAME)
        .await
        .expect("lease")
        .spec
        .expect("spec")
}

/// Candidates by name; `None` once stopped.
struct Field {
    names: Vec<&'static str>,
    all: Vec<Option<Leadership>>,
    samples: u64,
}

impl Field {
    fn leaders(&mut self) -> Vec<&'static str> {
        self.samples += 1;
        let leaders: Vec<&'static str> = self
            .names
            .iter()
            .zip(&self.all)
            .filter(|(_, l)| l.as_ref().is_some_and(Leadership::is_leader))
            .map(|(n, _)| *n)
            .collect();
        assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
        leaders
    }

    /// Sample every 2 ms until `want` leads alone (or, with `None`, anyone leads); panics after `timeout`.
    async fn until_leader(
        &mut self,
        want: Option<&str>,
        timeout: Duration,
    ) -> (&'static str, Duration) {
        let started = Instant::now();
        loop {
            if let Some(l) = self.leaders().first().copied()
                && want.is_none_or(|w| w == l)
            {
                return (l, started.elapsed());
            }
            assert!(
                started.elapsed() < timeout,
                "no leader {want:?} within {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Sample for `d`, asserting the leader stays `who`.
    async fn steady(&mut self, who: &str, d: Duration) {
        let started = Instant::now();
        while started.elapsed() < d {
            assert_eq!(
                self.leaders(),
                vec![who],
                "leadership moved while the leader was healthy"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    fn take(&mut self, name: &str) -> Leadership {
        let i = self
            .names
            .iter()
            .position(|n| *n == name)
            .expect("known candidate");
        self.all[i].take().expect("running candidate")
    }

    fn put(&mut self, name: &'static str, l: Leadership) {
        self.names.push(name);
        self.all.push(Some(l));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_through_a_crash_and_a_graceful_release() {
    let e = env().await;
    let mut f = Field {
        names: Vec::new(),
        all: Vec::new(),
        samples: 0,
    };
    f.put("a", candidate(&e, "a"));
    f.put("b", candidate(&e, "b"));

    let (first, _) = f.until_leader(None, Duration::from_secs(5)).await;
    // Several renewals: the leader keeps it, the other keeps waiting.
    f.steady(first, LEASE + RETRY * 2).await;
    let rec = lease(&e).await;
    assert_eq!(rec.holder_identity.as_deref(), Some(first));
    assert_eq!(rec.lease_transitions, Some(0));
    assert_eq!(rec.lease_duration_seconds, Some(3));
    assert!(
        rec.renew_time > rec.acquire_time,
        "renewals move renewTime, not acquireTime"
    );
    let json = serde_json::to_value(&rec).expect("json");
    let renew = json["renewTime"].as_str().expect("renewTime");
    assert!(
        renew.len() == "2026-01-01T00:00:00.000000Z".len() && renew.ends_with('Z'),
        "MicroTime format: {renew}"
    );

    // Crash: abort the leader without releasing. The other takes over once the Lease has not
    // changed for its duration, seen at its retry ticks.
    let second = if first == "a" { "b" } else { "a" };
    let first_acquired = rec.acquire_time.clone();
    f.take(first).abort();
    let (_, crash_handover) = f
        .until_leader(Some(second), LEASE + RETRY * 2 + Duration::from_secs(1))
        .await;
    eprintln!("handover after a crash: {crash_handover:?} (lease {LEASE:?}, retry {RETRY:?})");
    assert!(
        crash_handover + RETRY + Duration::from_millis(100) >= LEASE,
        "taken over before the lease could expire: {crash_handover:?}"
    );
    let rec = lease(&e).await;
    assert_eq!(rec.holder_identity.as_deref(), Some(second));
    assert_eq!(rec.lease_transitions, Some(1));
    assert!(
        rec.acquire_time > first_acquired,
        "a takeover sets acquireTime"
    );

    // The crashed replica comes back under a new identity and waits.
    f.put("c", candidate(&e, "c"));
    f.steady(second, RETRY * 4).await;

    // Graceful release: the waiting candidate takes over at its next retry.
    let leaving = f.take(second);
    let released_at = Instant::now();
    leaving.release().await;
    f.until_leader(Some("c"), RETRY * 2 + Duration::from_millis(500))
        .await;
    let release_handover = released_at.elapsed();
    eprintln!("handover after a release: {release_handover:?} (retry {RETRY:?})");
    let rec = lease(&e).await;
    assert_eq!(rec.holder_identity.as_deref(), Some("c"));
    assert_eq!(rec.lease_transitions, Some(2));
    assert_eq!(rec.lease_duration_seconds, Some(3));
    f.steady("c", RETRY * 3).await;
    eprintln!("{} samples, never two leaders", f.samples);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_is_taken_stops_leading_at_its_next_renewal() {
    let e = env().await;
    let a = candidate(&e, "a");
    let mut f = Field {
        names: Vec::new(),
        all: Vec::new(),
        samples: 0,
    };
    f.put("a", a);
    f.until_leader(Some("a"), Duration::from_secs(5)).await;

    // Someone else writes the Lease (with the current resourceVersion).
    let api: Api<Lease> = Api::namespaced(e.client.clone(), leader::DEFAULT_NAMESPACE);
    let mut l = api.get(leader::DEFAULT_NAME).await.expect("lease");
    l.spec.as_mut().expect("spec").holder_identity = Some("intruder".into());
    api.replace(leader::DEFAULT_NAME, &PostParams::default(), &l)
        .await
        .expect("replace");
    let started = Instant::now();
    while f.leaders() == vec!["a"] {
        assert!(
            started.elapsed() < RETRY * 3,
            "still leading after the lease was taken"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // And it does not take the Lease back while the intruder's record is fresh.
    tokio::time::sleep(RETRY * 3).await;
    assert!(f.leaders().is_empty());
    assert_eq!(lease(&e).await.holder_identity.as_deref(), Some("intruder"));
    // Releasing a Lease we do not hold leaves it alone.
    f.take("a").release().await;
    assert_eq!(lease(&e).await.holder_identity.as_deref(), Some("intruder"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_candidates_starting_together_elect_exactly_one() {
    let e = env().await;
    let mut f = Field {
        names: Vec::new(),
        all: Vec::new(),
        samples: 0,
    };
    for n in ["p", "q", "r", "s"] {
        f.put(n, candidate(&e, n));
    }
    let (leader, _) = f.until_leader(None, Duration::from_secs(5)).await;
    f.steady(leader, RETRY * 6).await;
    let rec = lease(&e).await;
    assert_eq!(rec.holder_identity.as_deref(), Some(leader));
    assert_eq!(rec.lease_transitions, Some(0));
}
