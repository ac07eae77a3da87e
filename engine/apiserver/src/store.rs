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
//! only then answers each request and broadcasts the events. A write is therefore acknowledged
//! only once it is durable, and watchers never see an event that could be lost by a crash.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use bytes::Bytes;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

const KV: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("kv");
const LOG: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");
const META_REV: &str = "rev";
const META_COMPACTED: &str = "compacted";
/// The most requests folded into one transaction.
const MAX_BATCH: usize = 512;
/// Live events buffered for watchers before a lagging one is cut off and must resume from the
/// log. The buffer keeps the newest events (each an object, its previous version and its JSON)
/// resident whether or not anyone still needs them; but a watcher that lags re-reads the log, and
/// with ~200 watchers (100 simulated members) 4,096 let a burst of lags stall the server for
/// ~50 s in a 40,000-Work run.
const FANOUT_CAPACITY: usize = 16 * 1024;
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
        StoreError::Storage(Box::new(err.into()))
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

/// One committed change.
#[derive(Debug)]
pub struct Event {
    /// The revision of the change.
    pub rev: u64,
    /// The key changed.
    pub key: String,
    /// The kind of change.
    pub kind: EventKind,
    /// The object after the change (for deletes: the last state, stamped with `rev`).
    pub object: Arc<Value>,
    /// `object` serialized as JSON, shared by every watcher.
    pub object_json: Bytes,
    /// The object before the change, if any.
    pub prev: Option<Arc<Value>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct LogRecord {
    k: String,
    t: EventKind,
    v: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<Value>,
}

/// Only the key of a log record.
#[derive(serde::Deserialize)]
struct LogKey {
    k: String,
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

struct Shared {
    db: Database,
    events: broadcast::Sender<Arc<Event>>,
    current: AtomicU64,
    compacted: AtomicU64,
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

fn encode_kv(rev: u64, json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + json.len());
    out.extend_from_slice(&rev.to_be_bytes());
    out.extend_from_slice(json);
    out
}

fn decode_kv(key: &str, raw: &[u8]) -> Result<(u64, Value), StoreError> {
    let (head, body) = raw.split_at(raw.len().min(8));
    let mut rev = [0u8; 8];
    rev[..head.len()].copy_from_slice(head);
    let value = serde_json::from_slice(body).map_err(|source| StoreError::Corrupt {
        key: key.to_owned(),
        source,
    })?;
    Ok((u64::from_be_bytes(rev), value))
}

impl Store {
    /// Open (or create) the store in `dir`, which is created if missing. The directory is made
    /// `0700` and the database file `0600`: they hold every object, Secrets included.
    ///
    /// # Errors
    /// Fails when the directory or database cannot be created or opened.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let io = |e| StoreError::Storage(Box::new(redb::Error::Io(e)));
        crate::fs::private_dir(dir).map_err(io)?;
        let file = dir.join("flotilla.redb");
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&file)?;
        crate::fs::private_file(&file).map_err(io)?;
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
        let (events, _) = broadcast::channel(FANOUT_CAPACITY);
        let shared = Arc::new(Shared {
            db,
            events,
            current: AtomicU64::new(current),
            compacted: AtomicU64::new(compacted),
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

    /// Write one key and wait until the write is durable.
    ///
    /// # Errors
    /// `Conflict` when `pre` does not hold, `Storage` when the commit fails.
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

    /// Drop log entries older than the newest `retain` revisions; returns the new horizon.
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
        let txn = self.inner.shared.db.begin_read()?;
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
        let txn = self.inner.shared.db.begin_read()?;
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

    /// Watch keys under `prefix` for changes after revision `after`.
    ///
    /// # Errors
    /// `Compacted` when `after` is older than the retained log, `FutureRevision` when it is newer
    /// than the store.
    pub fn watch(&self, prefix: &str, after: u64) -> Result<Watch, StoreError> {
        // Subscribe before reading the log so that no commit falls between the two.
        let rx = self.inner.shared.events.subscribe();
        let txn = self.inner.shared.db.begin_read()?;
        let meta = txn.open_table(META)?;
        let current = meta.get(META_REV)?.map(|v| v.value()).unwrap_or(0);
        let compacted = meta.get(META_COMPACTED)?.map(|v| v.value()).unwrap_or(0);
        if after < compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted,
            });
        }
        if after > current {
            return Err(StoreError::FutureRevision {
                requested: after,
                current,
            });
        }
        let log = txn.open_table(LOG)?;
        let mut backlog = VecDeque::new();
        for entry in log.range((after + 1)..)? {
            let (rev, raw) = entry?;
            let rev = rev.value();
            // The key first (serde skips the objects without building them): a watcher resuming
            // after a lag reads every kind's events since its revision, and most are not its own.
            // A record that no longer decodes is skipped, as lists skip objects.
            let record = serde_json::from_slice::<LogKey>(raw.value()).and_then(|key| {
                if key.k.starts_with(prefix) {
                    serde_json::from_slice::<LogRecord>(raw.value()).map(Some)
                } else {
                    Ok(None)
                }
            });
            let record = match record {
                Ok(Some(record)) => record,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(rev, %error, "skipping a logged change that cannot be decoded");
                    continue;
                }
            };
            let object_json = Bytes::from(serde_json::to_vec(&record.v).unwrap_or_default());
            backlog.push_back(Arc::new(Event {
                rev,
                key: record.k,
                kind: record.t,
                object: Arc::new(record.v),
                object_json,
                prev: record.p.map(Arc::new),
            }));
        }
        Ok(Watch {
            prefix: prefix.to_owned(),
            backlog,
            rx,
            progress: current,
        })
    }
}

/// A live watch: first the backlog from the log, then live events, all in revision order.
#[derive(Debug)]
pub struct Watch {
    prefix: String,
    backlog: VecDeque<Arc<Event>>,
    rx: broadcast::Receiver<Arc<Event>>,
    progress: u64,
}

/// Why a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// The watcher fell too far behind; it must resume from its last revision.
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
        if let Some(ev) = self.backlog.pop_front() {
            self.progress = self.progress.max(ev.rev);
            return Ok(ev);
        }
        loop {
            match self.rx.recv().await {
                Ok(ev) => {
                    if ev.rev <= self.progress {
                        continue;
                    }
                    self.progress = ev.rev;
                    if ev.key.starts_with(&self.prefix) {
                        return Ok(ev);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => return Err(WatchEnd::Lagged),
                Err(broadcast::error::RecvError::Closed) => return Err(WatchEnd::Closed),
            }
        }
    }
}

fn writer_loop(shared: &Shared, rx: &mpsc::Receiver<Request>) {
    let mut shutdown = false;
    while !shutdown {
        let Ok(first) = rx.recv() else { break };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
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
                    let _ = reply.send(compact(shared, retain));
                }
                Request::Shutdown => shutdown = true,
            }
        }
        if writes.is_empty() {
            continue;
        }
        match commit_batch(shared, &mut writes) {
            Ok(results) => {
                let mut events = Vec::new();
                for ((_, _, _, reply), result) in writes.into_iter().zip(results) {
                    match result {
                        Ok((committed, event)) => {
                            events.push(event);
                            let _ = reply.send(Ok(committed));
                        }
                        Err(err) => {
                            let _ = reply.send(Err(err));
                        }
                    }
                }
                for ev in events {
                    // No receivers is fine: nobody is watching.
                    let _ = shared.events.send(ev);
                }
            }
            Err(err) => {
                let msg = err.to_string();
                for (_, _, _, reply) in writes {
                    let _ = reply.send(Err(StoreError::Storage(Box::new(redb::Error::Io(
                        std::io::Error::other(msg.clone()),
                    )))));
                }
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

#[allow(clippy::type_complexity)]
fn commit_batch(
    shared: &Shared,
    writes: &mut [WriteItem],
) -> Result<Vec<Result<(Committed, Arc<Event>), StoreError>>, StoreError> {
    let txn = shared.db.begin_write()?;
    let mut results = Vec::with_capacity(writes.len());
    let mut rev = shared.current.load(Ordering::Acquire);
    {
        let mut kv = txn.open_table(KV)?;
        let mut log = txn.open_table(LOG)?;
        let mut meta = txn.open_table(META)?;
        for (key, op, pre, _) in writes.iter_mut() {
            let current = match kv.get(key.as_str())? {
                Some(raw) => Some(decode_kv(key, raw.value())?),
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
            let object = Arc::new(record.v);
            let event = Arc::new(Event {
                rev,
                key: key.clone(),
                kind,
                object: Arc::clone(&object),
                object_json: Bytes::from(json),
                prev: record.p.map(Arc::new),
            });
            results.push(Ok((Committed { rev, object }, event)));
        }
        meta.insert(META_REV, rev)?;
    }
    txn.commit()?;
    shared.current.store(rev, Ordering::Release);
    Ok(results)
}

fn compact(shared: &Shared, retain: u64) -> Result<u64, StoreError> {
    let current = shared.current.load(Ordering::Acquire);
    let target = current.saturating_sub(retain);
    let old = shared.compacted.load(Ordering::Acquire);
    if target <= old {
        return Ok(old);
    }
    let txn = shared.db.begin_write()?;
    {
        let mut log = txn.open_table(LOG)?;
        log.retain_in(..target, |_, _| false)?;
        let mut meta = txn.open_table(META)?;
        meta.insert(META_COMPACTED, target)?;
    }
    txn.commit()?;
    shared.compacted.store(target, Ordering::Release);
    Ok(target)
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
}
