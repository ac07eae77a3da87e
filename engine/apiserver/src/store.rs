//! The durable MVCC store: current objects, an append-only revision log, and live watch fan-out.
//!
//! The design follows kine (k3s-io/kine `pkg/logstructured/sqllog`): every write appends one
//! entry to a revision log whose key *is* the global revision, which is also the object's
//! `resourceVersion`. The store keeps three redb tables:
//!
//! - `kv`: key → 8-byte big-endian mod revision followed by the object's JSON,
//! - `log`: revision → the event (kind, key, object, previous object),
//! - `meta`: the current and the compacted revision.
//!
//! All writes go through one writer thread that batches whatever requests are queued into a
//! single redb transaction (group commit), commits it with `Durability::Immediate` (fsync), and
//! only then answers each request and publishes the events. A write is therefore acknowledged
//! only once it is durable, and watchers never see an event that could be lost by a crash.
//!
//! **Watches** are served from a bounded in-memory window of the newest events (kube-apiserver's
//! watch cache, `staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go`), never by
//! replaying the log per watcher: a watcher is a cursor into the window, so a thousand watchers
//! from an old revision share one copy of each event. A watch from a revision older than the
//! window is [`StoreError::Expired`] (the API answers 410 and clients relist), and a watcher the
//! window moves past ends with [`WatchEnd::Lagged`]. On open, the window is filled from the
//! newest log entries, so watches resume across restarts.
//!
//! **I/O failures.** redb latches its first I/O error: every later operation of that handle fails
//! (`PreviousIo`) until the database is closed and reopened. The writer thread therefore reopens
//! the database after a failed commit, and keeps retrying while the reopen fails (a full disk),
//! so the store recovers without a restart once space is freed. A full disk is reported as
//! [`StoreError::StorageFull`].

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, mpsc};
use std::time::Duration;

use bytes::Bytes;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

const KV: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("kv");
const LOG: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
const META_REV: &str = "rev";
const META_COMPACTED: &str = "compacted";
/// The most requests folded into one transaction.
const MAX_BATCH: usize = 512;
/// Events kept in memory for watches (the watch cache): a watch may start from any revision
/// among the newest `WATCH_WINDOW`; older ones get 410 Expired and relist. Every watcher shares
/// these events, so memory does not grow with the number of watchers. (With ~200 watchers from
/// 100 simulated members, 4,096 made watchers fall out of the window during bursts in a
/// 40,000-Work run.)
pub const WATCH_WINDOW: usize = 16 * 1024;
/// The most memory the watch window holds, summed over its events (each keeps its object's and
/// the previous object's JSON and their labels, see [`Event`]): past it the oldest events are
/// dropped even if fewer than [`WATCH_WINDOW`] are kept.
pub const WATCH_WINDOW_BYTES: usize = 128 * 1024 * 1024;
/// Events a watcher examines per look at the window before it lets go of the lock.
const SCAN_CHUNK: usize = 1024;
/// The most log entries one compaction step removes (the default of
/// [`StoreOptions::compact_chunk`]). Compaction runs in steps folded into the writer's group
/// commits (or in a transaction of its own when no write is queued), so a large backlog never
/// holds writers up for longer than one step.
pub const COMPACT_CHUNK: u64 = 1024;
/// How often the writer retries reopening a database it had to close after an I/O failure.
const REOPEN_RETRY: Duration = Duration::from_secs(1);
/// redb's page cache. Its default (1 GiB) made the store's file resident as it grew; reads that
/// miss go to the OS page cache, and the hot objects live in the watch caches anyway.
const CACHE_BYTES: usize = 64 * 1024 * 1024;

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be opened, read or written.
    #[error("storage failure")]
    Storage(#[source] Box<redb::Error>),
    /// The disk (or the user's quota) is full; the write was not stored. Writes succeed again
    /// once space is freed.
    #[error("storage is full")]
    StorageFull,
    /// A stored record could not be decoded.
    #[error("corrupt record for key {key}")]
    Corrupt {
        /// The key whose record is corrupt.
        key: String,
        /// The decoding failure.
        #[source]
        source: serde_json::Error,
    },
    /// The write's precondition does not hold.
    #[error("precondition failed for key {key}")]
    Conflict {
        /// The key written.
        key: String,
        /// The key's current mod revision, if it exists.
        current: Option<u64>,
    },
    /// The requested revision has been compacted away.
    #[error("revision {requested} is compacted (oldest kept is {compacted})")]
    Compacted {
        /// The revision asked for.
        requested: u64,
        /// The compaction horizon.
        compacted: u64,
    },
    /// The requested revision is older than the watch window.
    #[error("revision {requested} is older than the watch window (oldest is {oldest})")]
    Expired {
        /// The revision asked for.
        requested: u64,
        /// The oldest revision a watch may start from.
        oldest: u64,
    },
    /// The requested revision is newer than the store's.
    #[error("revision {requested} is in the future (current is {current})")]
    FutureRevision {
        /// The revision asked for.
        requested: u64,
        /// The current revision.
        current: u64,
    },
    /// The writer thread is gone (the store is shutting down).
    #[error("the store is closed")]
    Closed,
}

impl<E: Into<redb::Error>> From<E> for StoreError {
    fn from(err: E) -> Self {
        let err = err.into();
        match &err {
            redb::Error::Io(io) if is_full(io) => StoreError::StorageFull,
            _ => StoreError::Storage(Box::new(err)),
        }
    }
}

/// Whether `err` says the disk or the quota is full.
fn is_full(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded
    )
}

impl StoreError {
    /// Whether the database handle is unusable after this error (redb latches I/O failures).
    fn needs_reopen(&self) -> bool {
        match self {
            StoreError::StorageFull => true,
            StoreError::Storage(err) => matches!(
                **err,
                redb::Error::Io(_) | redb::Error::PreviousIo | redb::Error::DatabaseClosed
            ),
            _ => false,
        }
    }

    /// The same failure, for the other requests of a failed batch.
    fn again(&self) -> StoreError {
        match self {
            StoreError::StorageFull => StoreError::StorageFull,
            other => StoreError::Storage(Box::new(redb::Error::Io(std::io::Error::other(
                other.to_string(),
            )))),
        }
    }
}

/// Tunables of the store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Events kept in memory for watches; see [`WATCH_WINDOW`].
    pub watch_window: usize,
    /// The most memory the watch window holds; see [`WATCH_WINDOW_BYTES`].
    pub watch_window_bytes: usize,
    /// The most log entries one compaction step removes; see [`COMPACT_CHUNK`].
    pub compact_chunk: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            watch_window: WATCH_WINDOW,
            watch_window_bytes: WATCH_WINDOW_BYTES,
            compact_chunk: COMPACT_CHUNK,
        }
    }
}

/// What a write expects of the key's current state (optimistic concurrency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// The key must not exist (create).
    Absent,
    /// The key must exist at exactly this mod revision.
    ModRev(u64),
    /// The key must exist, at any revision.
    Exists,
}

/// A write operation.
#[derive(Debug, Clone)]
pub enum Op {
    /// Store this object; the store sets `metadata.resourceVersion` to the new revision.
    Put(Value),
    /// Delete the key.
    Delete,
}

/// The kind of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventKind {
    /// The key was created.
    Added,
    /// The key was updated.
    Modified,
    /// The key was deleted; the event's object is the last state stamped with the deletion revision.
    Deleted,
}

/// One committed change, as the watch window keeps it: the objects as JSON (what most watchers
/// send as is) and their labels (what label selectors read), not decoded trees. A decoded object
/// takes about ten times its JSON in memory; with two of them per event the window's 16k events
/// held ~50 KB each (soak benchmark: 1 GiB resident for a hundred templates under churn).
#[derive(Debug)]
pub struct Event {
    /// The revision of the change.
    pub rev: u64,
    /// The key changed.
    pub key: String,
    /// The kind of change.
    pub kind: EventKind,
    /// The object after the change (for deletes: the last state, stamped with `rev`), as JSON,
    /// shared by every watcher.
    pub object_json: Bytes,
    /// The object's `metadata.labels`, when it has any.
    pub labels: Option<Value>,
    /// The object before the change, if any, as JSON.
    pub prev_json: Option<Bytes>,
    /// The previous object's `metadata.labels`, when it has any.
    pub prev_labels: Option<Value>,
    /// What the event keeps in memory, about (the window's budget; see [`Event::with_json`]).
    resident: usize,
}

/// An object's `metadata.labels`, when it has any.
fn labels_of(v: &Value) -> Option<Value> {
    v.pointer("/metadata/labels")
        .filter(|l| !l.is_null())
        .cloned()
}

impl Event {
    fn new(rev: u64, key: String, kind: EventKind, object: &Value, prev: Option<&Value>) -> Self {
        let json = |v: &Value| serde_json::to_vec(v).unwrap_or_default();
        Event::with_json(
            rev,
            key,
            kind,
            object,
            json(object),
            prev.map(|p| (p, json(p))),
        )
    }

    /// An event of `object` (serialized as `object_json`) and `prev` (with its JSON).
    fn with_json(
        rev: u64,
        key: String,
        kind: EventKind,
        object: &Value,
        object_json: Vec<u8>,
        prev: Option<(&Value, Vec<u8>)>,
    ) -> Self {
        let labels = labels_of(object);
        let prev_labels = prev.as_ref().and_then(|(p, _)| labels_of(p));
        let prev_json = prev.map(|(_, j)| Bytes::from(j));
        // The JSON, the labels (a decoded map, counted at 4× its text), the key and the event.
        let label_bytes = |l: &Option<Value>| l.as_ref().map_or(0, |v| v.to_string().len() * 4);
        let resident = object_json.len()
            + prev_json.as_ref().map_or(0, Bytes::len)
            + label_bytes(&labels)
            + label_bytes(&prev_labels)
            + key.len()
            + std::mem::size_of::<Event>();
        Event {
            rev,
            key,
            kind,
            object_json: Bytes::from(object_json),
            labels,
            prev_json,
            prev_labels,
            resident,
        }
    }

    /// The object, decoded from [`Event::object_json`] (for watchers that need more than its
    /// labels and its JSON: field selectors, tables, metadata-only answers).
    pub fn object(&self) -> Value {
        serde_json::from_slice(&self.object_json).unwrap_or(Value::Null)
    }

    /// The previous object, decoded, if any.
    pub fn prev(&self) -> Option<Value> {
        self.prev_json
            .as_ref()
            .map(|j| serde_json::from_slice(j).unwrap_or(Value::Null))
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct LogRecord {
    k: String,
    t: EventKind,
    v: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<Value>,
}

/// A committed write.
#[derive(Debug, Clone)]
pub struct Committed {
    /// The revision of the write.
    pub rev: u64,
    /// The object as stored (or, for a delete, the last state stamped with `rev`).
    pub object: Arc<Value>,
}

enum Request {
    Write {
        key: String,
        op: Op,
        pre: Precondition,
        reply: oneshot::Sender<Result<Committed, StoreError>>,
    },
    Compact {
        retain: u64,
        reply: oneshot::Sender<Result<u64, StoreError>>,
    },
    Shutdown,
}

/// A page of a list.
#[derive(Debug)]
pub struct Page {
    /// The objects, in key order.
    pub items: Vec<(String, Arc<Value>)>,
    /// The store revision the page was read at.
    pub rev: u64,
    /// The last key returned, when more keys follow.
    pub more_after: Option<String>,
}

/// The newest events, shared by every watcher (the watch cache).
#[derive(Debug)]
struct Window {
    /// Every event with a revision above `start` (and at most `latest`) is in `events`.
    start: u64,
    /// The newest revision the window accounts for.
    latest: u64,
    events: VecDeque<Arc<Event>>,
    /// The summed JSON size of `events`' objects.
    bytes: usize,
    capacity: usize,
    capacity_bytes: usize,
}

/// What a watcher finds in the window after its revision.
enum Step {
    /// The next matching event.
    Event(Arc<Event>),
    /// Nothing matching up to this revision, and more events follow.
    Skipped(u64),
    /// Nothing matching up to this revision, the newest.
    CaughtUp(u64),
    /// Events after the watcher's revision have been dropped from the window.
    Evicted,
}

impl Window {
    fn push(&mut self, ev: Arc<Event>) {
        self.latest = self.latest.max(ev.rev);
        self.bytes += ev.resident;
        self.events.push_back(ev);
        while self.events.len() > 1
            && (self.events.len() > self.capacity || self.bytes > self.capacity_bytes)
        {
            if let Some(old) = self.events.pop_front() {
                self.bytes -= old.resident;
                self.start = old.rev;
            }
        }
    }

    fn step(&self, prefix: &str, after: u64) -> Step {
        if after < self.start {
            return Step::Evicted;
        }
        let from = self.events.partition_point(|e| e.rev <= after);
        let mut seen = after;
        for ev in self.events.range(from..).take(SCAN_CHUNK) {
            if ev.key.starts_with(prefix) {
                return Step::Event(Arc::clone(ev));
            }
            seen = ev.rev;
        }
        if from + SCAN_CHUNK < self.events.len() {
            Step::Skipped(seen)
        } else {
            Step::CaughtUp(seen.max(after))
        }
    }
}

/// Opens the database file (again).
type Opener = Box<dyn Fn() -> Result<Database, StoreError> + Send + Sync>;

struct Shared {
    /// `None` while the handle is closed after an I/O failure and not yet reopened.
    db: RwLock<Option<Database>>,
    open_db: Opener,
    /// Whether the last failure to reopen was a full disk (what reads report meanwhile).
    full: AtomicBool,
    window: Arc<RwLock<Window>>,
    /// The newest revision in the window; watchers wait on it.
    published: watch::Sender<u64>,
    current: AtomicU64,
    compacted: AtomicU64,
    /// See [`StoreOptions::compact_chunk`].
    compact_chunk: u64,
    stats: Counters,
}

/// The writer's counters (see [`StoreStats`]).
#[derive(Debug, Default)]
struct Counters {
    commits: AtomicU64,
    writes: AtomicU64,
    compacted_entries: AtomicU64,
    compaction_steps: AtomicU64,
}

/// What the store's writer has done since it opened: for write amplification (commits and
/// revisions per unit of work) and compaction progress.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// Durable transactions committed with at least one write (group commits).
    pub commits: u64,
    /// Writes committed (one revision each).
    pub writes: u64,
    /// Revisions compacted (log entries removed).
    pub compacted_entries: u64,
    /// Compaction steps (each at most [`StoreOptions::compact_chunk`] revisions).
    pub compaction_steps: u64,
}

impl Shared {
    /// The error reads and writes get while the database is closed.
    fn down(&self) -> StoreError {
        if self.full.load(Ordering::Acquire) {
            StoreError::StorageFull
        } else {
            StoreError::Storage(Box::new(redb::Error::DatabaseClosed))
        }
    }

    /// Add committed events to the window and wake the watchers.
    fn publish(&self, events: Vec<Arc<Event>>, rev: u64) {
        {
            let mut w = self.window.write().unwrap_or_else(PoisonError::into_inner);
            for ev in events {
                w.push(ev);
            }
            w.latest = w.latest.max(rev);
        }
        self.published.send_replace(rev);
    }
}

/// The store. Cheap to clone; the database closes when the last clone is dropped.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    writer: mpsc::Sender<Request>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.writer.send(Request::Shutdown);
        if let Some(handle) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = handle.join();
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rev", &self.current_rev())
            .finish()
    }
}

/// Stamp `metadata.resourceVersion` on an object.
fn stamp(obj: &mut Value, rev: u64) {
    if let Some(map) = obj.as_object_mut() {
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
        }
    }
}

/// Bytes of the big-endian mod revision in front of each stored object's JSON.
const REV_BYTES: usize = 8;

fn encode_kv(rev: u64, json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(REV_BYTES + json.len());
    out.extend_from_slice(&rev.to_be_bytes());
    out.extend_from_slice(json);
    out
}

fn decode_kv(key: &str, raw: &[u8]) -> Result<(u64, Value), StoreError> {
    let (head, body) = raw.split_at(raw.len().min(REV_BYTES));
    let mut rev = [0u8; REV_BYTES];
    rev[..head.len()].copy_from_slice(head);
    let value = serde_json::from_slice(body).map_err(|source| StoreError::Corrupt {
        key: key.to_owned(),
        source,
    })?;
    Ok((u64::from_be_bytes(rev), value))
}

/// The current and compacted revisions recorded in `db`.
fn read_meta(db: &Database) -> Result<(u64, u64), StoreError> {
    let txn = db.begin_read()?;
    let meta = txn.open_table(META)?;
    let current = meta.get(META_REV)?.map(|v| v.value()).unwrap_or(0);
    let compacted = meta.get(META_COMPACTED)?.map(|v| v.value()).unwrap_or(0);
    Ok((current, compacted))
}

/// The logged events with revisions in `(after, upto]`. A record that no longer decodes is
/// skipped, as lists skip objects.
fn read_log(db: &Database, after: u64, upto: u64) -> Result<Vec<Arc<Event>>, StoreError> {
    let txn = db.begin_read()?;
    let log = txn.open_table(LOG)?;
    let mut events = Vec::new();
    if upto <= after {
        return Ok(events);
    }
    for entry in log.range((after + 1)..=upto)? {
        let (rev, raw) = entry?;
        let rev = rev.value();
        let record = match serde_json::from_slice::<LogRecord>(raw.value()) {
            Ok(record) => record,
            Err(error) => {
                tracing::warn!(rev, %error, "skipping a logged change that cannot be decoded");
                continue;
            }
        };
        events.push(Arc::new(Event::new(
            rev,
            record.k,
            record.t,
            &record.v,
            record.p.as_ref(),
        )));
    }
    Ok(events)
}

/// Open `file` with the store's settings.
fn open_file(file: &Path) -> Result<Database, StoreError> {
    Ok(Database::builder()
        .set_cache_size(CACHE_BYTES)
        .create(file)?)
}

/// A test-only seam: a redb backend over the store's file whose writes fail with
/// `ErrorKind::StorageFull` while `full` is set, as they do when the disk is full.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct DiskFullBackend {
    inner: redb::backends::FileBackend,
    full: Arc<AtomicBool>,
}

#[cfg(test)]
impl DiskFullBackend {
    fn check(&self) -> std::io::Result<()> {
        if self.full.load(Ordering::Acquire) {
            Err(std::io::Error::from(ErrorKind::StorageFull))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
impl redb::StorageBackend for DiskFullBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.check()?;
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.check()?;
        self.inner.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.check()?;
        self.inner.write(offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        self.inner.close()
    }
    fn try_lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }
    fn lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.lock_range(start, end)
    }
    fn lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.lock_shared_range(start, end)
    }
    fn unlock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.unlock_range(start, end)
    }
    fn query_lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

impl Store {
    /// [`Store::open`] over a backend whose writes fail with "no space" while `full` is set.
    #[cfg(test)]
    pub(crate) fn open_with_disk_full_switch(
        dir: &Path,
        full: Arc<AtomicBool>,
    ) -> Result<Self, StoreError> {
        let file = Self::prepare(dir)?;
        let open = move || -> Result<Database, StoreError> {
            let handle = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&file)
                .map_err(|e| StoreError::Storage(Box::new(redb::Error::Io(e))))?;
            let inner = redb::backends::FileBackend::new(handle)?;
            let backend = DiskFullBackend {
                inner,
                full: Arc::clone(&full),
            };
            Ok(Database::builder()
                .set_cache_size(CACHE_BYTES)
                .create_with_backend(backend)?)
        };
        Self::start(Box::new(open), &StoreOptions::default())
    }

    /// Open (or create) the store in `dir`, which is created if missing. The directory is made
    /// `0700` and the database file `0600`: they hold every object, Secrets included.
    ///
    /// # Errors
    /// Fails when the directory or database cannot be created or opened.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(dir, &StoreOptions::default())
    }

    /// [`Store::open`] with these options.
    ///
    /// # Errors
    /// Fails when the directory or database cannot be created or opened.
    pub fn open_with(dir: &Path, options: &StoreOptions) -> Result<Self, StoreError> {
        let file = Self::prepare(dir)?;
        Self::start(Box::new(move || open_file(&file)), options)
    }

    /// Create `dir` and the database file, owner-only; the file's path.
    fn prepare(dir: &Path) -> Result<PathBuf, StoreError> {
        let io = |e| StoreError::Storage(Box::new(redb::Error::Io(e)));
        crate::fs::private_dir(dir).map_err(io)?;
        let file = dir.join("flotilla.redb");
        // redb takes an empty file as a new database; create it owner-only before redb opens it.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .map_err(io)?;
        crate::fs::private_file(&file).map_err(io)?;
        Ok(file)
    }

    fn start(open_db: Opener, options: &StoreOptions) -> Result<Self, StoreError> {
        let db = open_db()?;
        let txn = db.begin_write()?;
        let (current, compacted) = {
            txn.open_table(KV)?;
            txn.open_table(LOG)?;
            let meta = txn.open_table(META)?;
            let current = meta.get(META_REV)?.map(|v| v.value()).unwrap_or(0);
            let compacted = meta.get(META_COMPACTED)?.map(|v| v.value()).unwrap_or(0);
            (current, compacted)
        };
        txn.commit()?;
        // Fill the window from the newest log entries, so watches resume across restarts.
        let capacity = options.watch_window.max(1);
        let start = current.saturating_sub(capacity as u64).max(compacted);
        let mut window = Window {
            start,
            latest: current,
            events: VecDeque::new(),
            bytes: 0,
            capacity,
            capacity_bytes: options.watch_window_bytes,
        };
        for ev in read_log(&db, start, current)? {
            window.push(ev);
        }
        let (published, _) = watch::channel(current);
        let shared = Arc::new(Shared {
            db: RwLock::new(Some(db)),
            open_db,
            full: AtomicBool::new(false),
            window: Arc::new(RwLock::new(window)),
            published,
            current: AtomicU64::new(current),
            compacted: AtomicU64::new(compacted),
            compact_chunk: options.compact_chunk.max(1),
            stats: Counters::default(),
        });
        let (tx, rx) = mpsc::channel();
        let writer_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("flotilla-store-writer".into())
            .spawn(move || writer_loop(&writer_shared, &rx))
            .map_err(|e| StoreError::Storage(Box::new(redb::Error::Io(e))))?;
        Ok(Store {
            inner: Arc::new(Inner {
                shared,
                writer: tx,
                thread: std::sync::Mutex::new(Some(thread)),
            }),
        })
    }

    /// The newest committed revision.
    pub fn current_rev(&self) -> u64 {
        self.inner.shared.current.load(Ordering::Acquire)
    }

    /// The compaction horizon: watches from revisions below it get `Compacted`.
    pub fn compacted_rev(&self) -> u64 {
        self.inner.shared.compacted.load(Ordering::Acquire)
    }

    /// The writer's counters since the store opened.
    pub fn stats(&self) -> StoreStats {
        let c = &self.inner.shared.stats;
        StoreStats {
            commits: c.commits.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            compacted_entries: c.compacted_entries.load(Ordering::Relaxed),
            compaction_steps: c.compaction_steps.load(Ordering::Relaxed),
        }
    }

    /// Write one key and wait until the write is durable.
    ///
    /// # Errors
    /// `Conflict` when `pre` does not hold, `StorageFull` when the disk is full, `Storage` when
    /// the commit fails otherwise.
    pub async fn write(
        &self,
        key: String,
        op: Op,
        pre: Precondition,
    ) -> Result<Committed, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.inner
            .writer
            .send(Request::Write {
                key,
                op,
                pre,
                reply,
            })
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Drop log entries older than the newest `retain` revisions; returns the new horizon once
    /// reached. The writer removes them in steps of [`StoreOptions::compact_chunk`] between (or
    /// within) its group commits, so writes go on meanwhile.
    ///
    /// # Errors
    /// Fails when the commit fails.
    pub async fn compact(&self, retain: u64) -> Result<u64, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.inner
            .writer
            .send(Request::Compact { retain, reply })
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Read one key: its mod revision and object.
    ///
    /// # Errors
    /// Fails on storage or decoding errors.
    pub fn get(&self, key: &str) -> Result<Option<(u64, Value)>, StoreError> {
        let shared = &self.inner.shared;
        let db = read_handle(shared)?;
        let db = db.as_ref().ok_or_else(|| shared.down())?;
        let txn = db.begin_read()?;
        let kv = txn.open_table(KV)?;
        match kv.get(key)? {
            Some(raw) => Ok(Some(decode_kv(key, raw.value())?)),
            None => Ok(None),
        }
    }

    /// List keys under `prefix` (after `start_after`, at most `limit`), in one consistent snapshot.
    ///
    /// # Errors
    /// Fails on storage or decoding errors.
    pub fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Page, StoreError> {
        self.list_filtered(prefix, start_after, limit, None)
    }

    /// The objects under `prefix` whose stored JSON text contains `needle`, in one consistent
    /// snapshot; the others are skipped before they are decoded. For scans after one exact string
    /// that JSON writes as is (the garbage collector after an owner's uid), which would otherwise
    /// decode every object of every kind in a namespace for each delete.
    ///
    /// # Errors
    /// Fails on storage or decoding errors.
    pub fn list_containing(&self, prefix: &str, needle: &[u8]) -> Result<Page, StoreError> {
        self.list_filtered(
            prefix,
            None,
            None,
            Some(memchr::memmem::Finder::new(needle)),
        )
    }

    fn list_filtered(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: Option<usize>,
        needle: Option<memchr::memmem::Finder<'_>>,
    ) -> Result<Page, StoreError> {
        let shared = &self.inner.shared;
        let db = read_handle(shared)?;
        let db = db.as_ref().ok_or_else(|| shared.down())?;
        let txn = db.begin_read()?;
        let rev = txn
            .open_table(META)?
            .get(META_REV)?
            .map(|v| v.value())
            .unwrap_or(0);
        let kv = txn.open_table(KV)?;
        let mut items = Vec::new();
        let mut more_after = None;
        let range = match start_after {
            Some(after) => {
                kv.range::<&str>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded))?
            }
            None => kv.range::<&str>(prefix..)?,
        };
        for entry in range {
            let (k, v) = entry?;
            let key = k.value();
            if !key.starts_with(prefix) {
                break;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                more_after = items.last().map(|(k, _): &(String, Arc<Value>)| k.clone());
                break;
            }
            if needle.as_ref().is_some_and(|n| {
                n.find(&v.value()[REV_BYTES.min(v.value().len())..])
                    .is_none()
            }) {
                continue;
            }
            // One record that no longer decodes must not fail every list of its kind (and with
            // it the start-up of every controller that lists it).
            match decode_kv(key, v.value()) {
                Ok((_, value)) => items.push((key.to_owned(), Arc::new(value))),
                Err(error) => {
                    tracing::warn!(key, %error, "skipping a stored object that cannot be decoded")
                }
            }
        }
        Ok(Page {
            items,
            rev,
            more_after,
        })
    }

    /// Watch keys under `prefix` for changes after revision `after`. The watch reads the shared
    /// window lazily: it holds no events of its own.
    ///
    /// # Errors
    /// `Compacted` when `after` is older than the retained log, `Expired` when it is older than
    /// the watch window, `FutureRevision` when it is newer than the store.
    pub fn watch(&self, prefix: &str, after: u64) -> Result<Watch, StoreError> {
        let shared = &self.inner.shared;
        let compacted = shared.compacted.load(Ordering::Acquire);
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        let (start, latest) = {
            let w = shared.window.read().unwrap_or_else(PoisonError::into_inner);
            (w.start, w.latest)
        };
        if after < start {
            return Err(StoreError::Expired {
                requested: after,
                oldest: start,
            });
        }
        if after > latest {
            // A revision just committed (a list may have read it) is published a moment later;
            // the watch then skips what it already has.
            let current = shared.current.load(Ordering::Acquire);
            if after > current {
                return Err(StoreError::FutureRevision {
                    requested: after,
                    current,
                });
            }
        }
        Ok(Watch {
            prefix: prefix.to_owned(),
            window: Arc::clone(&shared.window),
            published: shared.published.subscribe(),
            progress: after,
        })
    }
}

/// A live watch: a cursor into the store's window of recent events, in revision order.
#[derive(Debug)]
pub struct Watch {
    prefix: String,
    window: Arc<RwLock<Window>>,
    published: watch::Receiver<u64>,
    progress: u64,
}

/// Why a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// The watcher fell out of the window; it must resume from its last revision (or relist).
    Lagged,
    /// The store shut down.
    Closed,
}

impl Watch {
    /// The revision up to which every matching event has been delivered (for bookmarks).
    pub fn progress(&self) -> u64 {
        self.progress
    }

    /// The next matching event.
    ///
    /// # Errors
    /// Returns why the watch ended.
    pub async fn next(&mut self) -> Result<Arc<Event>, WatchEnd> {
        loop {
            // Mark the newest publication seen before looking, so none can slip in between.
            self.published.borrow_and_update();
            let step = {
                let w = self.window.read().unwrap_or_else(PoisonError::into_inner);
                w.step(&self.prefix, self.progress)
            };
            match step {
                Step::Event(ev) => {
                    self.progress = ev.rev;
                    return Ok(ev);
                }
                Step::Skipped(seen) => {
                    self.progress = seen;
                    continue;
                }
                Step::CaughtUp(seen) => self.progress = seen,
                Step::Evicted => return Err(WatchEnd::Lagged),
            }
            if self.published.changed().await.is_err() {
                return Err(WatchEnd::Closed);
            }
        }
    }
}

/// The database handle for a read. When it is closed (after an I/O failure), the reader tries
/// to reopen it (unless another thread is at it), so reads recover as soon as the disk does.
fn read_handle(shared: &Shared) -> Result<RwLockReadGuard<'_, Option<Database>>, StoreError> {
    let guard = shared.db.read().unwrap_or_else(PoisonError::into_inner);
    if guard.is_some() {
        return Ok(guard);
    }
    drop(guard);
    if let Ok(slot) = shared.db.try_write() {
        let _ = open_closed(shared, slot);
    }
    let guard = shared.db.read().unwrap_or_else(PoisonError::into_inner);
    match *guard {
        Some(_) => Ok(guard),
        None => Err(shared.down()),
    }
}

/// Close the database handle and open it again (redb needs this after an I/O failure).
fn reopen(shared: &Shared) -> Result<(), StoreError> {
    let mut slot = shared.db.write().unwrap_or_else(PoisonError::into_inner);
    // Drop the old handle first: it holds the file's lock.
    *slot = None;
    open_closed(shared, slot)
}

/// Open the database into the closed `slot` (a no-op if it is open). Events a failed commit made
/// durable after all are published, so watchers never miss a revision.
fn open_closed(
    shared: &Shared,
    mut slot: RwLockWriteGuard<'_, Option<Database>>,
) -> Result<(), StoreError> {
    if slot.is_some() {
        return Ok(());
    }
    let db = match (shared.open_db)() {
        Ok(db) => db,
        Err(err) => {
            shared
                .full
                .store(matches!(err, StoreError::StorageFull), Ordering::Release);
            return Err(err);
        }
    };
    let (rev, compacted) = read_meta(&db)?;
    let current = shared.current.load(Ordering::Acquire);
    if rev > current {
        let events = read_log(&db, current, rev)?;
        shared.current.store(rev, Ordering::Release);
        shared.publish(events, rev);
    }
    shared.compacted.fetch_max(compacted, Ordering::AcqRel);
    shared.full.store(false, Ordering::Release);
    *slot = Some(db);
    tracing::info!("the store reopened its database after an I/O failure");
    Ok(())
}

/// Whether the database handle is open.
fn is_open(shared: &Shared) -> bool {
    shared
        .db
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .is_some()
}

/// A compaction in progress: the horizon it works towards, in steps, and who waits for it.
struct Compaction {
    target: u64,
    waiting: Vec<oneshot::Sender<Result<u64, StoreError>>>,
}

fn writer_loop(shared: &Shared, rx: &mpsc::Receiver<Request>) {
    let mut shutdown = false;
    let mut compaction: Option<Compaction> = None;
    while !shutdown {
        let first = if !is_open(shared) {
            match rx.recv_timeout(REOPEN_RETRY) {
                Ok(req) => Some(req),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let slot = shared.db.write().unwrap_or_else(PoisonError::into_inner);
                    let _ = open_closed(shared, slot);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else if compaction.is_some() {
            // Compacting: take what is queued, but do not wait for it.
            match rx.try_recv() {
                Ok(req) => Some(req),
                Err(mpsc::TryRecvError::Empty) => None,
                Err(mpsc::TryRecvError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(req) => Some(req),
                Err(_) => break,
            }
        };
        let mut batch: Vec<Request> = first.into_iter().collect();
        while !batch.is_empty() && batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
        if !is_open(shared) && !batch.iter().all(|r| matches!(r, Request::Shutdown)) {
            let slot = shared.db.write().unwrap_or_else(PoisonError::into_inner);
            let _ = open_closed(shared, slot);
        }
        let mut writes = Vec::new();
        for req in batch {
            match req {
                Request::Write {
                    key,
                    op,
                    pre,
                    reply,
                } => writes.push((key, op, pre, reply)),
                Request::Compact { retain, reply } => {
                    let target = shared
                        .current
                        .load(Ordering::Acquire)
                        .saturating_sub(retain);
                    let c = compaction.get_or_insert_with(|| Compaction {
                        target: 0,
                        waiting: Vec::new(),
                    });
                    c.target = c.target.max(target);
                    c.waiting.push(reply);
                }
                Request::Shutdown => shutdown = true,
            }
        }
        let compact_to = compaction
            .as_ref()
            .map(|c| c.target)
            .filter(|t| *t > shared.compacted.load(Ordering::Acquire));
        if !writes.is_empty() || compact_to.is_some() {
            match commit_batch(shared, &mut writes, compact_to) {
                Ok((results, rev)) => {
                    let events: Vec<Arc<Event>> = results
                        .iter()
                        .filter_map(|r| r.as_ref().ok().map(|(_, ev)| Arc::clone(ev)))
                        .collect();
                    if !events.is_empty() {
                        shared.publish(events, rev);
                    }
                    for ((_, _, _, reply), result) in writes.into_iter().zip(results) {
                        let _ = reply.send(result.map(|(committed, _)| committed));
                    }
                }
                Err(err) => {
                    if err.needs_reopen() && is_open(shared) {
                        tracing::warn!(error = %err, "a commit failed; reopening the database");
                        let _ = reopen(shared);
                    }
                    for (_, _, _, reply) in writes {
                        let _ = reply.send(Err(err.again()));
                    }
                    if compact_to.is_some()
                        && let Some(c) = compaction.take()
                    {
                        for reply in c.waiting {
                            let _ = reply.send(Err(err.again()));
                        }
                    }
                }
            }
        }
        let compacted = shared.compacted.load(Ordering::Acquire);
        if compaction.as_ref().is_some_and(|c| c.target <= compacted)
            && let Some(c) = compaction.take()
        {
            for reply in c.waiting {
                let _ = reply.send(Ok(compacted));
            }
        }
    }
}

type WriteItem = (
    String,
    Op,
    Precondition,
    oneshot::Sender<Result<Committed, StoreError>>,
);

type BatchResults = (Vec<Result<(Committed, Arc<Event>), StoreError>>, u64);

/// Commit `writes` in one durable transaction, with one compaction step towards `compact_to`
/// (at most [`StoreOptions::compact_chunk`] log entries) when a compaction is in progress.
fn commit_batch(
    shared: &Shared,
    writes: &mut [WriteItem],
    compact_to: Option<u64>,
) -> Result<BatchResults, StoreError> {
    let db = shared.db.read().unwrap_or_else(PoisonError::into_inner);
    let db = db.as_ref().ok_or_else(|| shared.down())?;
    let txn = db.begin_write()?;
    let mut results = Vec::with_capacity(writes.len());
    let before = shared.current.load(Ordering::Acquire);
    let mut rev = before;
    let mut compacted = None;
    {
        let mut kv = txn.open_table(KV)?;
        let mut log = txn.open_table(LOG)?;
        let mut meta = txn.open_table(META)?;
        for (key, op, pre, _) in writes.iter_mut() {
            // The current object, decoded, and its stored JSON (the event's previous object).
            let mut prev_json: Option<Vec<u8>> = None;
            let current = match kv.get(key.as_str())? {
                Some(raw) => {
                    let raw = raw.value();
                    prev_json = Some(raw.get(REV_BYTES..).unwrap_or_default().to_vec());
                    Some(decode_kv(key, raw)?)
                }
                None => None,
            };
            let ok = match (pre, &current) {
                (Precondition::Absent, None) => true,
                (Precondition::Absent, Some(_)) => false,
                (Precondition::Exists, cur) => cur.is_some(),
                (Precondition::ModRev(want), Some((have, _))) => *want == *have,
                (Precondition::ModRev(_), None) => false,
            };
            if !ok || (matches!(op, Op::Delete) && current.is_none()) {
                results.push(Err(StoreError::Conflict {
                    key: key.clone(),
                    current: current.map(|(r, _)| r),
                }));
                continue;
            }
            rev += 1;
            let prev = current.map(|(_, v)| v);
            let (kind, mut object) = match op {
                Op::Put(value) => {
                    let kind = if prev.is_some() {
                        EventKind::Modified
                    } else {
                        EventKind::Added
                    };
                    (kind, std::mem::take(value))
                }
                Op::Delete => (EventKind::Deleted, prev.clone().unwrap_or(Value::Null)),
            };
            stamp(&mut object, rev);
            let json = serde_json::to_vec(&object).map_err(|source| StoreError::Corrupt {
                key: key.clone(),
                source,
            })?;
            match kind {
                EventKind::Deleted => {
                    kv.remove(key.as_str())?;
                }
                _ => {
                    kv.insert(key.as_str(), encode_kv(rev, &json).as_slice())?;
                }
            }
            let record = LogRecord {
                k: key.clone(),
                t: kind,
                v: object,
                p: prev,
            };
            let raw = serde_json::to_vec(&record).map_err(|source| StoreError::Corrupt {
                key: key.clone(),
                source,
            })?;
            log.insert(rev, raw.as_slice())?;
            let prev = record.p.as_ref().zip(prev_json);
            let event = Arc::new(Event::with_json(
                rev,
                key.clone(),
                kind,
                &record.v,
                json,
                prev,
            ));
            let object = Arc::new(record.v);
            results.push(Ok((Committed { rev, object }, event)));
        }
        if rev > before {
            meta.insert(META_REV, rev)?;
        }
        if let Some(target) = compact_to {
            let old = shared.compacted.load(Ordering::Acquire);
            let upto = target.min(old.saturating_add(shared.compact_chunk));
            if upto > old {
                log.retain_in(..upto, |_, _| false)?;
                meta.insert(META_COMPACTED, upto)?;
                compacted = Some((upto, upto - old));
            }
        }
    }
    txn.commit()?;
    shared.current.store(rev, Ordering::Release);
    let stats = &shared.stats;
    if rev > before {
        stats.commits.fetch_add(1, Ordering::Relaxed);
        stats.writes.fetch_add(rev - before, Ordering::Relaxed);
    }
    if let Some((upto, removed)) = compacted {
        shared.compacted.store(upto, Ordering::Release);
        stats.compaction_steps.fetch_add(1, Ordering::Relaxed);
        stats
            .compacted_entries
            .fetch_add(removed, Ordering::Relaxed);
    }
    Ok((results, rev))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn writes_get_increasing_revisions_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = store
            .write(
                "/a".into(),
                Op::Put(json!({"metadata":{}})),
                Precondition::Absent,
            )
            .await
            .unwrap();
        let b = store
            .write(
                "/b".into(),
                Op::Put(json!({"metadata":{}})),
                Precondition::Absent,
            )
            .await
            .unwrap();
        assert!(b.rev > a.rev);
        assert_eq!(
            a.object["metadata"]["resourceVersion"],
            json!(a.rev.to_string())
        );
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.current_rev(), b.rev);
        assert!(store.get("/a").unwrap().is_some());
    }

    #[tokio::test]
    async fn a_containing_list_returns_exactly_the_objects_whose_text_holds_the_needle() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let owner = "0b6f3d0e-1c1a-4c55-9d3e-6f1f7a1b2c3d";
        for (key, obj) in [
            (
                "/r/ns/a",
                json!({"metadata": {"ownerReferences": [{"uid": owner}]}}),
            ),
            (
                "/r/ns/b",
                json!({"metadata": {"ownerReferences": [{"uid": "other"}]}}),
            ),
            (
                "/r/ns/c",
                json!({"spec": {"note": format!("mentions {owner}")}}),
            ),
            (
                "/r/other/d",
                json!({"metadata": {"ownerReferences": [{"uid": owner}]}}),
            ),
        ] {
            store
                .write(key.into(), Op::Put(obj), Precondition::Absent)
                .await
                .unwrap();
        }
        let keys = |p: Page| p.items.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        // A superset of the owned objects (the caller checks the references), within the prefix.
        assert_eq!(
            keys(store.list_containing("/r/ns/", owner.as_bytes()).unwrap()),
            ["/r/ns/a", "/r/ns/c"]
        );
        assert_eq!(keys(store.list("/r/ns/", None, None).unwrap()).len(), 3);
        assert!(keys(store.list_containing("/r/ns/", b"absent").unwrap()).is_empty());
    }

    #[tokio::test]
    async fn stale_mod_revision_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = store
            .write("/a".into(), Op::Put(json!({})), Precondition::Absent)
            .await
            .unwrap();
        store
            .write(
                "/a".into(),
                Op::Put(json!({"x":1})),
                Precondition::ModRev(a.rev),
            )
            .await
            .unwrap();
        let err = store
            .write(
                "/a".into(),
                Op::Put(json!({"x":2})),
                Precondition::ModRev(a.rev),
            )
            .await;
        assert!(matches!(err, Err(StoreError::Conflict { .. })));
    }

    #[tokio::test]
    async fn watch_replays_the_log_then_follows_live_writes_and_compaction_expires_old_revisions() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let first = store
            .write("/p/a".into(), Op::Put(json!({})), Precondition::Absent)
            .await
            .unwrap();
        store
            .write("/q/b".into(), Op::Put(json!({})), Precondition::Absent)
            .await
            .unwrap();
        store
            .write("/p/a".into(), Op::Delete, Precondition::Exists)
            .await
            .unwrap();
        let mut w = store.watch("/p/", 0).unwrap();
        assert_eq!(w.next().await.unwrap().kind, EventKind::Added);
        assert_eq!(w.next().await.unwrap().kind, EventKind::Deleted);
        store
            .write("/p/c".into(), Op::Put(json!({})), Precondition::Absent)
            .await
            .unwrap();
        let live = w.next().await.unwrap();
        assert_eq!(live.key, "/p/c");
        store.compact(1).await.unwrap();
        assert!(matches!(
            store.watch("/p/", first.rev),
            Err(StoreError::Compacted { .. })
        ));
    }

    #[tokio::test]
    async fn compaction_goes_in_bounded_steps_while_writes_go_on_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            compact_chunk: 4,
            ..StoreOptions::default()
        };
        let store = Store::open_with(dir.path(), &options).unwrap();
        for i in 0..50 {
            put(&store, &format!("/k/{i}")).await.unwrap();
        }
        let before = store.stats();
        assert_eq!((before.commits, before.writes), (50, 50));
        let compacting = {
            let store = store.clone();
            tokio::spawn(async move { store.compact(5).await })
        };
        // Writes queued meanwhile are committed between (or with) the steps.
        for i in 50..60 {
            put(&store, &format!("/k/{i}")).await.unwrap();
        }
        // The horizon is the newest revision when the writer took the request, less 5.
        let horizon = compacting.await.unwrap().unwrap();
        assert!((45..=55).contains(&horizon), "{horizon}");
        let after = store.stats();
        assert_eq!(after.compacted_entries, horizon);
        assert!(
            after.compaction_steps >= horizon.div_ceil(4),
            "{horizon} revisions in steps of at most 4: {after:?}"
        );
        assert_eq!(after.writes, 60);
        assert!(matches!(
            store.watch("/k/", horizon - 1),
            Err(StoreError::Compacted { compacted, .. }) if compacted == horizon
        ));
        let w = store.watch("/k/", horizon);
        assert!(w.is_ok());
        // Nothing left to do: answered at once with the horizon reached.
        assert_eq!(store.compact(100).await.unwrap(), horizon);
        drop(w);
        drop(store);
        let store = Store::open_with(dir.path(), &options).unwrap();
        assert_eq!((store.current_rev(), store.compacted_rev()), (60, horizon));
    }

    async fn put(store: &Store, key: &str) -> Result<Committed, StoreError> {
        store
            .write(key.into(), Op::Put(json!({"v": key})), Precondition::Absent)
            .await
    }

    #[tokio::test]
    async fn a_full_disk_fails_writes_as_storage_full_and_freeing_space_recovers_without_restart() {
        let dir = tempfile::tempdir().unwrap();
        let full = Arc::new(AtomicBool::new(false));
        let store = Store::open_with_disk_full_switch(dir.path(), Arc::clone(&full)).unwrap();
        let before = put(&store, "/k/acked-before").await.unwrap();

        full.store(true, Ordering::Release);
        for i in 0..3 {
            let err = put(&store, &format!("/k/refused-{i}")).await.unwrap_err();
            assert!(matches!(err, StoreError::StorageFull), "{err:?}");
            assert_eq!(err.to_string(), "storage is full");
        }

        // Space is freed: the very next write succeeds, on the same store (no restart).
        full.store(false, Ordering::Release);
        let after = put(&store, "/k/acked-after").await.unwrap();
        assert_eq!(after.rev, before.rev + 1, "refused writes took no revision");
        assert!(store.get("/k/acked-before").unwrap().is_some());
        assert!(store.get("/k/acked-after").unwrap().is_some());
        for i in 0..3 {
            assert!(store.get(&format!("/k/refused-{i}")).unwrap().is_none());
        }
        let mut w = store.watch("/k/", before.rev).unwrap();
        assert_eq!(w.next().await.unwrap().key, "/k/acked-after");

        // And what was acknowledged is durable: it survives a reopen.
        drop(w);
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.current_rev(), after.rev);
        assert_eq!(store.list("/k/", None, None).unwrap().items.len(), 2);
    }

    #[tokio::test]
    async fn reads_recover_on_their_own_after_space_is_freed() {
        let dir = tempfile::tempdir().unwrap();
        let full = Arc::new(AtomicBool::new(false));
        let store = Store::open_with_disk_full_switch(dir.path(), Arc::clone(&full)).unwrap();
        put(&store, "/k/a").await.unwrap();
        full.store(true, Ordering::Release);
        assert!(matches!(
            put(&store, "/k/b").await,
            Err(StoreError::StorageFull)
        ));
        full.store(false, Ordering::Release);
        // No write comes; the writer's periodic reopen brings reads back.
        let deadline = std::time::Instant::now() + REOPEN_RETRY * 5;
        loop {
            if let Ok(Some(_)) = store.get("/k/a") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "reads never recovered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn a_watch_from_before_the_window_is_expired_and_one_inside_it_replays() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            watch_window: 8,
            ..StoreOptions::default()
        };
        let store = Store::open_with(dir.path(), &options).unwrap();
        let mut revs = Vec::new();
        for i in 0..20 {
            revs.push(put(&store, &format!("/p/{i:02}")).await.unwrap().rev);
        }
        let err = store.watch("/p/", revs[0]).unwrap_err();
        assert!(
            matches!(err, StoreError::Expired { requested, oldest } if requested == revs[0] && oldest == revs[11]),
            "{err:?} {revs:?}"
        );
        let mut w = store.watch("/p/", revs[11]).unwrap();
        for rev in &revs[12..] {
            assert_eq!(w.next().await.unwrap().rev, *rev);
        }
        // The window survives a restart: it is refilled from the log.
        drop(w);
        drop(store);
        let store = Store::open_with(dir.path(), &options).unwrap();
        assert!(matches!(
            store.watch("/p/", revs[10]),
            Err(StoreError::Expired { .. })
        ));
        let mut w = store.watch("/p/", revs[18]).unwrap();
        assert_eq!(w.next().await.unwrap().rev, revs[19]);
    }

    #[tokio::test]
    async fn a_watcher_the_window_moves_past_ends_lagged() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            watch_window: 4,
            ..StoreOptions::default()
        };
        let store = Store::open_with(dir.path(), &options).unwrap();
        let mut w = store.watch("/p/", store.current_rev()).unwrap();
        for i in 0..10 {
            put(&store, &format!("/p/{i}")).await.unwrap();
        }
        assert_eq!(w.next().await.unwrap_err(), WatchEnd::Lagged);
    }
}
