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
    let store = spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(fake_base)).unwrap();
    let spool = Spool::open(dir, SpoolConfig::default()).await.unwrap();
    let uploader = Uploader::new(spool, Remote::new(store), UploaderConfig::default());
    let relay = Relay::new(config, uploader, Arc::new(SystemClock));
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
    let data = bytes(1000, 3);
    let session = relay.open("r").await;
    assert_eq!(
        relay
            .put(&session, "bytes 0-599/*", &data[..600])
            .await
            .status(),
        308
    );
    // The same bytes again, with new ones after them: the new ones count.
    let again = relay
        .put(&session, "bytes 500-799/*", &data[500..800])
        .await;
    assert_eq!(again.status(), 308);
    assert_eq!(again.headers()["range"], "bytes=0-799");
    // Other bytes at an offset already received: refused, nothing counted.
    let mut other = data[700..1000].to_vec();
    other[0] ^= 0xff;
    let refused = relay.put(&session, "bytes 700-999/1000", &other).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("differ"));
    let last = relay
        .put(&session, "bytes 800-999/1000", &data[800..])
        .await;
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
            relay.put(&session, "bytes 0-9/*", &[i; 10]).await.status(),
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
        assert_eq!(status.headers()["range"], "bytes=0-9");
    }
    relay.stop().await;
}
