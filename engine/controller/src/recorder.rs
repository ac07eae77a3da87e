//! Kubernetes Events for what the controllers decide (`kubectl events`, `kubectl describe`).
//!
//! Karmada's reasons and messages (`ScheduleBindingSucceed`, `SyncWorkFailed`, …) on the binding
//! and on its resource template. Like client-go's recorder, repeats of one event (same object,
//! type, reason and message) within [`SERIES_WINDOW`] update the existing Event's `count` and
//! `lastTimestamp` instead of creating another, each object gets a token bucket (burst
//! [`SPAM_BURST`], one more every [`SPAM_REFILL`]) so a hot loop cannot flood the store, and writes
//! are fire-and-forget with a bound on those in flight: recording never blocks or fails a
//! reconcile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Repeats within this window aggregate into one Event (client-go: 10 minutes).
pub const SERIES_WINDOW: Duration = Duration::from_secs(600);
/// Events an object may get at once before its bucket throttles it (client-go: 25).
pub const SPAM_BURST: u32 = 25;
/// One more event per object per this long once the burst is spent (client-go: 5 minutes).
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Event writes in flight at most; more are dropped (and counted) rather than queued.
pub const MAX_IN_FLIGHT: usize = 64;
/// Longest message kept (bytes; longer ones are cut at a character boundary with "…").
pub const MAX_MESSAGE: usize = 1024;
/// Objects and series remembered at most (oldest forgotten first).
const MAX_TRACKED: usize = 4096;

/// Normal or Warning, as `kubectl events --types` filters them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something went as intended.
    Normal,
    /// Something failed or needs attention.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The object an event is about (an `ObjectReference`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Regarding {
    /// `apiVersion` of the object.
    pub api_version: String,
    /// `kind` of the object.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects (their events go to `default`, as client-go's).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID, when known.
    pub uid: String,
}

impl Regarding {
    /// A (Cluster)ResourceBinding.
    pub fn binding(rb: &flotilla_api::work::ResourceBinding) -> Self {
        Regarding {
            api_version: rb.api_version.clone(),
            kind: rb.kind.clone(),
            namespace: rb.metadata.namespace().to_owned(),
            name: rb.metadata.name().to_owned(),
            uid: rb.metadata.uid.clone().unwrap_or_default(),
        }
    }

    /// The resource template a binding propagates.
    pub fn template_of(rb: &flotilla_api::work::ResourceBinding) -> Self {
        let r = &rb.spec.resource;
        Regarding {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }
}

/// What was written, for tests and metrics.
#[derive(Debug, Default)]
pub struct Counts {
    /// Events created.
    pub created: std::sync::atomic::AtomicU64,
    /// Repeats folded into an existing Event.
    pub aggregated: std::sync::atomic::AtomicU64,
    /// Events not written: throttled, too many in flight, or the write failed.
    pub dropped: std::sync::atomic::AtomicU64,
}

impl Counts {
    /// Prometheus text: `flotilla_events_total{result="created|aggregated|dropped"}`.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        use std::sync::atomic::Ordering::Relaxed;
        out.push_str("# HELP flotilla_events_total Kubernetes Events recorded, by result.\n");
        out.push_str("# TYPE flotilla_events_total counter\n");
        for (result, n) in [
            ("created", &self.created),
            ("aggregated", &self.aggregated),
            ("dropped", &self.dropped),
        ] {
            let _ = writeln!(
                out,
                "flotilla_events_total{{result=\"{result}\"}} {}",
                n.load(Relaxed)
            );
        }
    }
}

#[derive(Debug)]
struct Series {
    name: String,
    namespace: String,
    count: i32,
    first: Time,
    last: Instant,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

#[derive(Debug, Default)]
struct State {
    series: HashMap<(Regarding, EventType, &'static str, String), Series>,
    buckets: HashMap<Regarding, Bucket>,
}

/// Records Events for one component (`source.component`, `reportingComponent`).
#[derive(Clone)]
pub struct Recorder {
    client: Option<Client>,
    component: &'static str,
    instance: Arc<str>,
    state: Arc<Mutex<State>>,
    in_flight: Arc<tokio::sync::Semaphore>,
    counts: Arc<Counts>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("component", &self.component)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing through `client` as `component` (e.g. `flotilla-scheduler`).
    pub fn new(client: Client, component: &'static str) -> Self {
        Recorder {
            client: Some(client),
            component,
            instance: crate::leader::default_identity().into(),
            state: Arc::default(),
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
            counts: Arc::default(),
        }
    }

    /// The same recorder writing as another component (shares throttling and counts).
    pub fn for_component(&self, component: &'static str) -> Self {
        Recorder {
            component,
            ..self.clone()
        }
    }

    /// What has been written so far.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Record one event about `regarding`. Never blocks and never fails: the write happens in the
    /// background (on the current Tokio runtime), and errors are logged at debug level.
    pub fn publish(
        &self,
        regarding: &Regarding,
        type_: EventType,
        reason: &'static str,
        message: &str,
    ) {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(client) = self.client.clone() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let message = truncate(message, MAX_MESSAGE);
        let now = Instant::now();
        let key = (regarding.clone(), type_, reason, message.clone());
        let write = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !state.take_token(regarding, now) {
                self.counts.dropped.fetch_add(1, Relaxed);
                tracing::debug!(object = %regarding.name, reason, "event throttled");
                return;
            }
            state.forget_old(now);
            match state.series.get_mut(&key) {
                Some(s) if now.duration_since(s.last) < SERIES_WINDOW => {
                    s.count = s.count.saturating_add(1);
                    s.last = now;
                    Write::Repeat {
                        namespace: s.namespace.clone(),
                        name: s.name.clone(),
                        count: s.count,
                        first: s.first.clone(),
                    }
                }
                _ => {
                    let namespace = if regarding.namespace.is_empty() {
                        "default".to_owned()
                    } else {
                        regarding.namespace.clone()
                    };
                    let name = event_name(&regarding.name);
                    let first = Time(k8s_openapi::jiff::Timestamp::now());
                    state.series.insert(
                        key,
                        Series {
                            name: name.clone(),
                            namespace: namespace.clone(),
                            count: 1,
                            first: first.clone(),
                            last: now,
                        },
                    );
                    Write::New {
                        namespace,
                        name,
                        first,
                    }
                }
            }
        };
        let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
            self.counts.dropped.fetch_add(1, Relaxed);
            tracing::debug!(object = %regarding.name, reason, "too many event writes in flight; dropped");
            return;
        };
        let event = self.event(regarding, type_, reason, message);
        let counts = Arc::clone(&self.counts);
        runtime.spawn(async move {
            let result = write.send(client, event).await;
            drop(permit);
            match result {
                Ok(true) => counts.created.fetch_add(1, Relaxed),
                Ok(false) => counts.aggregated.fetch_add(1, Relaxed),
                Err(e) => {
                    tracing::debug!(error = %e, "writing an event failed");
                    counts.dropped.fetch_add(1, Relaxed)
                }
            };
        });
    }

    /// Record the same event on a binding and on its resource template, as Karmada does.
    pub fn publish_binding(
        &self,
        rb: &flotilla_api::work::ResourceBinding,
        type_: EventType,
        reason: &'static str,
        message: &str,
    ) {
        self.publish(&Regarding::binding(rb), type_, reason, message);
        self.publish(&Regarding::template_of(rb), type_, reason, message);
    }

    fn event(
        &self,
        regarding: &Regarding,
        type_: EventType,
        reason: &str,
        message: String,
    ) -> Event {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Event {
            involved_object: ObjectReference {
                api_version: opt(&regarding.api_version),
                kind: opt(&regarding.kind),
                namespace: opt(&regarding.namespace),
                name: opt(&regarding.name),
                uid: opt(&regarding.uid),
                ..ObjectReference::default()
            },
            reason: Some(reason.to_owned()),
            message: Some(message),
            type_: Some(type_.as_str().to_owned()),
            source: Some(EventSource {
                component: Some(self.component.to_owned()),
                host: None,
            }),
            reporting_component: Some(self.component.to_owned()),
            reporting_instance: Some(self.instance.to_string()),
            ..Event::default()
        }
    }
}

enum Write {
    New {
        namespace: String,
        name: String,
        first: Time,
    },
    Repeat {
        namespace: String,
        name: String,
        count: i32,
        first: Time,
    },
}

impl Write {
    /// Sends the event; `Ok(true)` when a new Event was created.
    async fn send(self, client: Client, mut event: Event) -> Result<bool, kube::Error> {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        match self {
            Write::Repeat {
                namespace,
                name,
                count,
                first,
            } => {
                let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
                let patch = json!({"count": count, "lastTimestamp": now});
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    Ok(_) => Ok(false),
                    // Deleted meanwhile (TTL, a user): start it again under the same name.
                    Err(kube::Error::Api(s)) if s.is_not_found() => {
                        event.metadata = ObjectMeta {
                            name: Some(name),
                            namespace: Some(namespace.clone()),
                            ..ObjectMeta::default()
                        };
                        event.count = Some(count);
                        event.first_timestamp = Some(first);
                        event.last_timestamp = Some(now);
                        api.create(&PostParams::default(), &event).await?;
                        Ok(true)
                    }
                    Err(e) => Err(e),
                }
            }
            Write::New {
                namespace,
                name,
                first,
            } => {
                let api: Api<Event> = Api::namespaced(client, &namespace);
                event.metadata = ObjectMeta {
                    name: Some(name),
                    namespace: Some(namespace),
                    ..ObjectMeta::default()
                };
                event.count = Some(1);
                event.first_timestamp = Some(first);
                event.last_timestamp = Some(now);
                api.create(&PostParams::default(), &event).await?;
                Ok(true)
            }
        }
    }
}

impl State {
    fn take_token(&mut self, regarding: &Regarding, now: Instant) -> bool {
        if self.buckets.len() >= MAX_TRACKED && !self.buckets.contains_key(regarding) {
            // Full buckets are the same as no bucket: forget those.
            let full = f64::from(SPAM_BURST);
            self.buckets.retain(|_, b| refilled(b, now) < full);
            if self.buckets.len() >= MAX_TRACKED {
                self.buckets.clear();
            }
        }
        let b = self.buckets.entry(regarding.clone()).or_insert(Bucket {
            tokens: f64::from(SPAM_BURST),
            at: now,
        });
        b.tokens = refilled(b, now);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn forget_old(&mut self, now: Instant) {
        if self.series.len() >= MAX_TRACKED {
            self.series
                .retain(|_, s| now.duration_since(s.last) < SERIES_WINDOW);
            if self.series.len() >= MAX_TRACKED {
                self.series.clear();
            }
        }
    }
}

fn refilled(b: &Bucket, now: Instant) -> f64 {
    let gained = now.duration_since(b.at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
    (b.tokens + gained).min(f64::from(SPAM_BURST))
}

/// client-go's naming: `<object name>.<hex nanoseconds>`, unique per process by a counter.
fn event_name(object: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    // Strictly increasing even when the clock does not move between two events.
    let mut prev = LAST.load(Ordering::Relaxed);
    let stamp = loop {
        let next = nanos.max(prev + 1);
        match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(p) => prev = p,
        }
    };
    // Object names are at most 253 characters; keep room for the suffix.
    let base: String = object.chars().take(236).collect();
    format!("{base}.{stamp:x}")
}

/// `message` cut to at most `max` bytes at a character boundary, marked with "…".
pub fn truncate(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_owned();
    }
    let ellipsis = "…";
    let mut end = max.saturating_sub(ellipsis.len());
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str) -> Regarding {
        Regarding {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: name.into(),
            uid: String::new(),
        }
    }

    #[test]
    fn a_burst_of_events_about_one_object_is_throttled_then_refills() {
        let mut s = State::default();
        let t0 = Instant::now();
        let taken = (0..100).filter(|_| s.take_token(&obj("a"), t0)).count();
        assert_eq!(taken, SPAM_BURST as usize);
        assert!(
            s.take_token(&obj("b"), t0),
            "other objects have their own bucket"
        );
        assert!(!s.take_token(&obj("a"), t0 + SPAM_REFILL / 2));
        assert!(s.take_token(&obj("a"), t0 + SPAM_REFILL + SPAM_REFILL / 2));
    }

    #[test]
    fn tracked_objects_stay_bounded() {
        let mut s = State::default();
        let t0 = Instant::now();
        for i in 0..(3 * MAX_TRACKED) {
            s.take_token(&obj(&format!("o{i}")), t0);
        }
        assert!(s.buckets.len() <= MAX_TRACKED);
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(2000);
        let cut = truncate(&long, MAX_MESSAGE);
        assert!(cut.len() <= MAX_MESSAGE, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert_eq!(truncate("short", MAX_MESSAGE), "short");
    }

    #[test]
    fn event_names_are_unique_and_valid_for_long_object_names() {
        let a = event_name(&"x".repeat(253));
        let b = event_name(&"x".repeat(253));
        assert_ne!(a, b);
        assert!(a.len() <= 253, "{}", a.len());
    }
}
