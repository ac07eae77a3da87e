//! Hostile watchers: watches from old revisions, many watchers, and watchers that never read are
//! served from the store's bounded window with a bounded queue each — never by materialising the
//! revision log per watcher, and never by buffering without bound for a client that stopped
//! reading (kube-apiserver's watch cache and its closing of unresponsive watchers).

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tower::ServiceExt as _;

use flotilla_apiserver::server::{WATCH_BUFFER_BYTES, WATCH_BUFFER_EVENTS};
use flotilla_apiserver::store::{Op, Precondition};
use flotilla_apiserver::{ApiServer, ServerOptions, Store, StoreOptions};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

struct Server {
    api: std::sync::Arc<ApiServer>,
    router: axum::Router,
    _dir: tempfile::TempDir,
}

impl Server {
    fn new(store: StoreOptions, options: ServerOptions) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open_with(dir.path(), &store).expect("store opens");
        let api = ApiServer::new(store, options);
        let router = api.router();
        Server {
            api,
            router,
            _dir: dir,
        }
    }

    async fn get(&self, uri: &str) -> axum::response::Response {
        let req = Request::get(uri).body(Body::empty()).expect("request");
        self.router.clone().oneshot(req).await.expect("infallible")
    }

    /// Create a ConfigMap over HTTP; its resourceVersion.
    async fn create(&self, name: &str) -> u64 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        let req = Request::post(CMS)
            .header("content-type", "application/json")
            .body(Body::from(cm.to_string()))
            .expect("request");
        let resp = self.router.clone().oneshot(req).await.expect("infallible");
        assert_eq!(resp.status(), 201);
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        let obj: Value = serde_json::from_slice(&body).expect("json");
        obj["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("rv")
    }
}

/// Store `n` ConfigMaps straight into the store, concurrently (group-committed), each with
/// `size` bytes of data; the revision before the first.
async fn store_configmaps(store: &Store, prefix: &str, n: usize, size: usize) -> u64 {
    let before = store.current_rev();
    let writes = (0..n).map(|i| {
        let store = store.clone();
        let name = format!("{prefix}-{i:05}");
        async move {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}, "data": {"d": "x".repeat(size)}});
            store
                .write(
                    format!("/@/core/configmaps/default/{name}"),
                    Op::Put(cm),
                    Precondition::Absent,
                )
                .await
                .expect("write")
        }
    });
    futures::future::join_all(writes).await;
    before
}

/// The watch events of a finished watch body, one JSON value per line.
async fn events(resp: axum::response::Response) -> Vec<Value> {
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    body.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("each line is JSON"))
        .collect()
}

#[tokio::test]
async fn a_watch_from_a_revision_older_than_the_window_gets_410_expired() {
    let s = Server::new(
        StoreOptions {
            watch_window: 16,
            ..StoreOptions::default()
        },
        ServerOptions::default(),
    );
    let first = s.create("first").await;
    for i in 0..40 {
        s.create(&format!("cm-{i}")).await;
    }
    let resp = s
        .get(&format!("{CMS}?watch=true&resourceVersion={first}"))
        .await;
    assert_eq!(
        resp.status(),
        200,
        "410 arrives in the stream, as kube-apiserver sends it"
    );
    let evs = events(resp).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    let status = &evs[0];
    assert_eq!(status["type"], "ERROR");
    assert_eq!(status["object"]["kind"], "Status");
    assert_eq!(status["object"]["code"], 410);
    assert_eq!(status["object"]["reason"], "Expired");
    assert!(
        status["object"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(&format!("too old resource version: {first} ("))),
        "{status}"
    );
}

#[tokio::test]
async fn list_then_watch_send_initial_events_and_bookmarks_still_work_with_the_window() {
    let s = Server::new(
        StoreOptions {
            watch_window: 16,
            ..StoreOptions::default()
        },
        ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            ..ServerOptions::default()
        },
    );
    for i in 0..3 {
        s.create(&format!("cm-{i}")).await;
    }
    // resourceVersion=0 and unset: the current objects as ADDED.
    for rv in ["&resourceVersion=0", ""] {
        let evs = events(
            s.get(&format!("{CMS}?watch=true&timeoutSeconds=1{rv}"))
                .await,
        )
        .await;
        let added: Vec<&Value> = evs.iter().filter(|e| e["type"] == "ADDED").collect();
        assert_eq!(added.len(), 3, "{evs:?}");
    }
    // sendInitialEvents: ADDED, then the initial-events-end bookmark, then periodic bookmarks.
    let evs = events(
        s.get(&format!(
            "{CMS}?watch=true&timeoutSeconds=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
        ))
        .await,
    )
    .await;
    assert!(evs[..3].iter().all(|e| e["type"] == "ADDED"), "{evs:?}");
    assert_eq!(evs[3]["type"], "BOOKMARK");
    assert_eq!(
        evs[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert!(evs.len() > 4, "periodic bookmarks follow: {evs:?}");
    // A watch from a revision inside the window resumes with what followed it.
    let rv = s.create("later-a").await;
    s.create("later-b").await;
    let evs = events(
        s.get(&format!(
            "{CMS}?watch=true&timeoutSeconds=1&resourceVersion={rv}"
        ))
        .await,
    )
    .await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["object"]["metadata"]["name"], "later-b");
}

#[tokio::test]
async fn many_watchers_from_an_old_revision_each_queue_a_bounded_number_of_events() {
    const WATCHERS: usize = 50;
    const EVENTS: usize = 1000;
    let s = Server::new(
        StoreOptions::default(),
        ServerOptions {
            watch_stall_timeout: Duration::from_secs(60),
            ..ServerOptions::default()
        },
    );
    let old = store_configmaps(s.api.store(), "cm", EVENTS, 200).await;

    // 50 watchers from the old revision, none reading.
    let mut bodies = Vec::new();
    for _ in 0..WATCHERS {
        let resp = s
            .get(&format!("{CMS}?watch=true&resourceVersion={old}"))
            .await;
        assert_eq!(resp.status(), 200);
        bodies.push(resp.into_body());
    }
    // Each fills its queue to the bound and stops there: nobody holds the other ~900 events.
    let full = WATCHERS * WATCH_BUFFER_EVENTS;
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.api.watch_stats().queued_events < full {
        assert!(Instant::now() < deadline, "{:?}", s.api.watch_stats());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = s.api.watch_stats();
    assert_eq!(stats.open, WATCHERS);
    assert_eq!(stats.queued_events, full, "{stats:?}");
    assert!(
        stats.queued_bytes <= WATCHERS * WATCH_BUFFER_BYTES,
        "{stats:?}"
    );
    assert!(
        stats.queued_events < WATCHERS * EVENTS / 5,
        "the watchers did not each take the log: {stats:?}"
    );

    // A watcher that reads gets every event, in order.
    let mut body = bodies.pop().expect("a watcher");
    let mut buf = Vec::new();
    let mut seen = 0;
    let mut last_rv = old;
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen < EVENTS {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = tokio::time::timeout(left, body.frame())
            .await
            .expect("events keep coming")
            .expect("a frame")
            .expect("no error");
        buf.extend_from_slice(&frame.into_data().expect("data"));
        while let Some(at) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=at).collect();
            let ev: Value = serde_json::from_slice(&line).expect("json line");
            assert_eq!(ev["type"], "ADDED");
            let rv: u64 = ev["object"]["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|r| r.parse().ok())
                .expect("rv");
            assert!(rv > last_rv, "events in revision order");
            last_rv = rv;
            seen += 1;
        }
    }

    // Dropping the bodies ends the watches and frees their queues.
    drop(body);
    drop(bodies);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stats = s.api.watch_stats();
        if stats.open == 0 && stats.queued_events == 0 && stats.queued_bytes == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{stats:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Open a watch over a raw socket with a tiny receive buffer, and never read it.
async fn stalled_watch(addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut stream = socket.connect(addr).await.expect("connect");
    let req = format!("GET {CMS}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(req.as_bytes()).await.expect("send");
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_that_never_read_are_closed_and_the_server_keeps_serving() {
    const STALLED: usize = 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = flotilla_apiserver::Config::new(dir.path().join("data"));
    config.tls = false;
    config.anonymous = true;
    config.watch_stall_timeout = Duration::from_millis(300);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = flotilla_apiserver::start(config, async move {
        let _ = stopped.await;
    })
    .await
    .expect("server starts");
    let addr = running.addr;

    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        stalled.push(stalled_watch(addr).await);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while running.server.watch_stats().open < STALLED {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            running.server.watch_stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ~6 MB of events: more than each watcher's queue, hyper's buffer and the socket buffers.
    store_configmaps(running.server.store(), "big", 60, 100 * 1024).await;

    // Every stalled watcher is closed...
    let deadline = Instant::now() + Duration::from_secs(20);
    while running.server.watch_stats().closed_stalled < STALLED as u64 {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            running.server.watch_stats()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ...the server answers others promptly...
    let started = Instant::now();
    let mut other = tokio::net::TcpStream::connect(addr).await.expect("connect");
    other
        .write_all(
            format!("GET /version HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), other.read_to_end(&mut answer))
        .await
        .expect("answered within 2 s")
        .expect("read");
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    eprintln!(
        "GET /version with {STALLED} stalled watchers took {:?}",
        started.elapsed()
    );
    // ...and each stalled connection is closed: reading it reaches its end (or a reset).
    for mut conn in stalled {
        let mut sink = vec![0u8; 64 * 1024];
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match conn.read(&mut sink).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "a stalled watch connection stayed open");
    }
    let stats = running.server.watch_stats();
    assert_eq!(stats.open, 0, "{stats:?}");
    let _ = stop.send(());
    let _ = running.task.await;
}
