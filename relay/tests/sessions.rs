//! Resumable sessions across restarts of the relay, as clients meet them.
//!
//! What broke (2026-12): session IDs were counters that restarted at `session-1`
//! on every boot and sessions lived only in memory, so after a restart one client's
//! status query and chunks landed in another client's new `session-1`, and the
//! completed object held both clients' bytes. These tests restart the relay on the
//! same spool directory between requests.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{BUCKET, encode, real_fake, stored};
use relay::{Relay, RelayConfig};
use spool::{Remote, Spool, SpoolConfig, SystemClock, Uploader, UploaderConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A relay on a loopback port over the spool in `dir`, writing to the fake at
/// `fake_base`; stopped (and its spool closed) by [`Running::stop`].
struct Running {
    base: String,
    http: reqwest::Client,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

async fn start(dir: &std::path::Path, fake_base: &str, config: RelayConfig) -> Running {
    start_with_clock(dir, fake_base, config, Arc::new(SystemClock)).await
}

async fn start_with_clock(
    dir: &std::path::Path,
    fake_base: &str,
    config: RelayConfig,
    clock: Arc<dyn spool::Clock>,
) -> Running {
    let store = spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(fake_base)).unwrap();
    let spool = Spool::open(dir, SpoolConfig::default()).await.unwrap();
    let uploader = Uploader::new(spool, Remote::new(store), UploaderConfig::default());
    let relay = Relay::new(config, uploader, clock).unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let server = tokio::spawn(relay::serve(
        relay,
        listener,
        shutdown,
        Duration::from_secs(5),
    ));
    Running {
        base,
        http: reqwest::Client::new(),
        stop,
        server,
    }
}

impl Running {
    /// Stops the relay and waits for it: its spool's lock is released.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.server.await.unwrap();
    }

    /// Opens a session for `name`: its URL, with the path and query of this relay
    /// (a client keeps the URL and sends it to whichever relay answers there).
    async fn open(&self, name: &str) -> String {
        let url = format!(
            "{}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name={}",
            self.base,
            encode(name)
        );
        let start = self.http.post(url).send().await.unwrap();
        assert_eq!(start.status(), 200, "{:?}", start.text().await);
        let location = start.headers()["location"].to_str().unwrap().to_string();
        location.strip_prefix(&self.base).unwrap().to_string()
    }

    async fn put(&self, session: &str, range: &str, body: &[u8]) -> reqwest::Response {
        let url = format!("{}{session}", self.base);
        let request = self.http.put(url).header("content-range", range);
        request.body(body.to_vec()).send().await.unwrap()
    }
}

fn config() -> RelayConfig {
    RelayConfig {
        max_sessions: 4,
        ..RelayConfig::new(BUCKET)
    }
}

/// Cloud Storage's chunk granularity: every chunk but the last is a multiple.
const K: usize = 256 * 1024;

/// `bytes FROM-(TO-1)/*`: a chunk that is not the last.
fn range(from: usize, to: usize) -> String {
    format!("bytes {from}-{}/*", to - 1)
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[tokio::test]
async fn two_clients_resume_their_own_sessions_across_a_restart_and_never_mix() {
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (bytes(400_000, 1), bytes(300_000, 2));
    let relay = start(dir.path(), &fake_base, config()).await;
    let session_a = relay.open("a").await;
    let first = relay
        .put(&session_a, "bytes 0-262143/*", &a[..262_144])
        .await;
    assert_eq!(first.status(), 308);
    relay.stop().await;

    let relay = start(dir.path(), &fake_base, config()).await;
    // A new client opens a session on the restarted relay; it is not A's.
    let session_b = relay.open("b").await;
    assert_ne!(session_a, session_b);
    let status = relay.put(&session_a, "bytes */*", b"").await;
    assert_eq!(status.status(), 308, "A's session was forgotten");
    assert_eq!(status.headers()["range"], "bytes=0-262143");
    let b_status = relay.put(&session_b, "bytes */*", b"").await;
    assert_eq!(b_status.status(), 308);
    assert!(
        b_status.headers().get("range").is_none(),
        "B holds A's bytes"
    );

    let rest = format!("bytes 262144-{}/{}", a.len() - 1, a.len());
    assert_eq!(
        relay.put(&session_a, &rest, &a[262_144..]).await.status(),
        200
    );
    let all = format!("bytes 0-{}/{}", b.len() - 1, b.len());
    assert_eq!(relay.put(&session_b, &all, &b).await.status(), 200);
    assert_eq!(stored(&fake, "a").as_deref(), Some(&a[..]));
    assert_eq!(stored(&fake, "b").as_deref(), Some(&b[..]));

    // A retried final request, after another restart, gets the same answer.
    relay.stop().await;
    let relay = start(dir.path(), &fake_base, config()).await;
    let again = relay
        .put(&session_a, &format!("bytes */{}", a.len()), b"")
        .await;
    assert_eq!(again.status(), 200);
    relay.stop().await;
}

#[tokio::test]
async fn a_session_answers_only_its_own_unguessable_id_and_bucket() {
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(dir.path(), &fake_base, config()).await;
    let one = relay.open("x").await;
    let two = relay.open("y").await;
    let id = |session: &str| {
        let (_, id) = session.split_once("upload_id=").unwrap();
        id.to_string()
    };
    assert_eq!(id(&one).len(), 32, "an ID is 128 bits in hex: {one}");
    assert_ne!(id(&one), id(&two));
    assert!(!id(&one).starts_with("session-"));
    let elsewhere = one.replace(&format!("/b/{BUCKET}/"), "/b/other/");
    let response = relay.put(&elsewhere, "bytes */*", b"").await;
    assert_eq!(
        response.status(),
        404,
        "a session answered another bucket's URL"
    );
    let guessed = one.replace(&id(&one), "00000000000000000000000000000001");
    assert_eq!(relay.put(&guessed, "bytes */*", b"").await.status(), 404);
    relay.stop().await;
}

#[tokio::test]
async fn bytes_sent_again_are_compared_and_other_bytes_refused() {
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(dir.path(), &fake_base, config()).await;
    let data = bytes(3 * K + 1000, 3);
    let session = relay.open("r").await;
    let first = relay.put(&session, &range(0, 2 * K), &data[..2 * K]).await;
    assert_eq!(first.status(), 308);
    // The same bytes again, with new ones after them: the new ones count.
    let again = relay.put(&session, &range(K, 3 * K), &data[K..3 * K]).await;
    assert_eq!(again.status(), 308);
    assert_eq!(again.headers()["range"], format!("bytes=0-{}", 3 * K - 1));
    // Other bytes at an offset already received: refused, nothing counted.
    let mut other = data[2 * K..].to_vec();
    other[0] ^= 0xff;
    let total = data.len();
    let other_range = format!("bytes {}-{}/{total}", 2 * K, total - 1);
    let refused = relay.put(&session, &other_range, &other).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("differ"));
    let last = format!("bytes {}-{}/{total}", 3 * K, total - 1);
    let last = relay.put(&session, &last, &data[3 * K..]).await;
    assert_eq!(last.status(), 200);
    assert_eq!(stored(&fake, "r").as_deref(), Some(&data[..]));
    relay.stop().await;
}

#[tokio::test]
async fn a_full_session_table_refuses_new_sessions_and_keeps_those_in_progress() {
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let relay = start(dir.path(), &fake_base, config()).await;
    let mut open = Vec::new();
    for i in 0..4 {
        let session = relay.open(&format!("s/{i}")).await;
        assert_eq!(
            relay.put(&session, &range(0, K), &[i; K]).await.status(),
            308
        );
        open.push(session);
    }
    let url = format!(
        "{}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=one-more",
        relay.base
    );
    let refused = relay.http.post(url).send().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.text().await.unwrap().contains("--max-sessions"));
    for session in &open {
        let status = relay.put(session, "bytes */*", b"").await;
        assert_eq!(status.status(), 308, "a session in progress was evicted");
        assert_eq!(status.headers()["range"], format!("bytes=0-{}", K - 1));
    }
    relay.stop().await;
}

/// Bytes in which no stretch repeats another (a 64-bit xorshift's output), so that
/// bytes out of place cannot pass for the right ones.
fn unrepeating_bytes(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends the head of a chunk request and `sent` bytes of its body, waits until the
/// relay has written the first piece of it to the session's partial chunk file,
/// then breaks the connection: a client whose connection dropped mid-chunk.
async fn break_off_a_chunk(
    relay: &Running,
    dir: &std::path::Path,
    session: &str,
    range: &str,
    body: &[u8],
    sent: usize,
) {
    use tokio::io::AsyncWriteExt as _;
    let addr = relay.base.strip_prefix("http://").unwrap();
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT {session} HTTP/1.1\r\nhost: {addr}\r\ncontent-range: {range}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(&body[..sent]).await.unwrap();
    let sessions = dir.join("sessions");
    let partial_written = || {
        std::fs::read_dir(&sessions).unwrap().flatten().any(|e| {
            e.file_name().to_string_lossy().ends_with(".partial")
                && e.metadata().is_ok_and(|m| m.len() > 0)
        })
    };
    // Waits for the relay's write, not for a length of time: bounded only so that a
    // relay that never writes fails the test instead of hanging it.
    for _ in 0..2_000 {
        if partial_written() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        partial_written(),
        "the relay wrote none of the body before the break"
    );
    drop(socket);
}

#[tokio::test]
async fn a_chunk_sent_again_after_its_connection_broke_is_stored_alone() {
    // A body of more than one piece (1 MiB) broken off after its first piece was
    // written; the client sends the chunk again from the offset the session holds,
    // as the official clients do after a status query.
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let data = unrepeating_bytes(3 << 20);
    let relay = start(dir.path(), &fake_base, config()).await;
    let session = relay.open("broken/chunk").await;
    let first = format!("bytes 0-{}/*", (2 << 20) - 1);
    break_off_a_chunk(
        &relay,
        dir.path(),
        &session,
        &first,
        &data[..2 << 20],
        3 << 19,
    )
    .await;
    // The relay may not have seen the break yet: the session is then still held
    // (503, retried as the clients retry it).
    let mut status = relay.put(&session, "bytes */*", b"").await;
    for _ in 0..2_000 {
        if status.status() != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        status = relay.put(&session, "bytes */*", b"").await;
    }
    assert_eq!(status.status(), 308);
    assert!(
        status.headers().get("range").is_none(),
        "bytes never counted were counted"
    );

    let again = relay.put(&session, &first, &data[..2 << 20]).await;
    let status = again.status();
    assert_eq!(status, 308, "{:?}", again.text().await);
    // Across a restart too: the chunk on disk holds what its name says.
    relay.stop().await;
    let relay = start(dir.path(), &fake_base, config()).await;
    let status = relay.put(&session, "bytes */*", b"").await;
    assert_eq!(
        status.headers()["range"],
        format!("bytes=0-{}", (2 << 20) - 1)
    );
    let last = format!("bytes {}-{}/{}", 2 << 20, data.len() - 1, data.len());
    let done = relay.put(&session, &last, &data[2 << 20..]).await;
    assert_eq!(done.status(), 200, "{:?}", done.text().await);
    assert_eq!(stored(&fake, "broken/chunk").as_deref(), Some(&data[..]));
    relay.stop().await;
}

#[tokio::test]
async fn an_empty_last_chunk_named_by_an_empty_range_completes_the_upload() {
    // The Node client ends an upload whose size is a multiple of its chunk size
    // with an empty chunk whose range ends before it starts: `bytes N-(N-1)/N`.
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let data = bytes(K, 5);
    let relay = start(dir.path(), &fake_base, config()).await;
    let session = relay.open("empty/last").await;
    let all = relay.put(&session, &range(0, K), &data).await;
    assert_eq!(all.status(), 308);
    let last = format!("bytes {K}-{}/{K}", K - 1);
    let last = relay.put(&session, &last, b"").await;
    assert_eq!(last.status(), 200, "{:?}", last.text().await);
    assert_eq!(stored(&fake, "empty/last").as_deref(), Some(&data[..]));
    relay.stop().await;
}

/// The names of the session files in `dir`'s spool.
fn session_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn expired_sessions_are_removed_and_never_keep_a_new_one_out() {
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(spool::testing::ManualClock::new(1_800_000_000_000));
    let config = RelayConfig {
        max_sessions: 2,
        session_ttl: Duration::from_secs(24 * 3600),
        ..RelayConfig::new(BUCKET)
    };
    let relay = start_with_clock(dir.path(), &fake_base, config, clock.clone()).await;
    let abandoned = relay.open("abandoned").await;
    assert_eq!(
        relay.put(&abandoned, &range(0, K), &[1; K]).await.status(),
        308
    );
    let done = relay.open("done").await;
    assert_eq!(
        relay.put(&done, "bytes 0-9/10", &[2; 10]).await.status(),
        200
    );
    let id = |session: &str| session.split_once("upload_id=").unwrap().1.to_string();

    // A retried final request within the hour a completed session is kept: 200.
    clock.advance(Duration::from_secs(30 * 60));
    assert_eq!(relay.put(&done, "bytes */10", b"").await.status(), 200);
    // Past it: gone, from memory and from disk once a session opens.
    clock.advance(Duration::from_secs(60 * 60));
    assert_eq!(relay.put(&done, "bytes */10", b"").await.status(), 404);
    let third = relay.open("third").await;
    let files = session_files(dir.path());
    assert!(
        !files.iter().any(|f| f.starts_with(&id(&done))),
        "a completed session's files outlived it: {files:?}"
    );
    assert!(files.iter().any(|f| f.starts_with(&id(&abandoned))));

    // Two open sessions fill the table; once the abandoned one expires, it no
    // longer keeps a new one out.
    let url = format!(
        "{}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=fourth",
        relay.base
    );
    assert_eq!(relay.http.post(&url).send().await.unwrap().status(), 503);
    clock.advance(Duration::from_secs(24 * 3600));
    assert_eq!(relay.http.post(&url).send().await.unwrap().status(), 200);
    assert_eq!(relay.put(&abandoned, "bytes */*", b"").await.status(), 404);
    let files = session_files(dir.path());
    assert!(
        !files.iter().any(|f| f.starts_with(&id(&abandoned))),
        "an expired session's files outlived it: {files:?}"
    );
    let _ = third;
    relay.stop().await;
}
