//! A connection's time is bounded: a client that stops sending a request body midway
//! is cut after `--body-timeout` (60 s) without a byte, however long the request
//! has taken so far, and leaves nothing behind (no entry, no temporary file, no
//! write upstream); a body shorter than its `Content-Length` is refused, also
//! leaving nothing. Served over in-memory streams under paused time, so the minute
//! costs nothing.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{entry_files, exchange, relay_without_server};
use relay::{Connections, DEFAULT_BODY_TIMEOUT};
use spool::testing::{FlakyStore, Mode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// The head of a media upload of `name` whose body is `length` bytes.
fn media_head(name: &str, length: usize) -> String {
    format!(
        "POST /upload/storage/v1/b/bkt/o?uploadType=media&ifGenerationMatch=0&name={name} \
         HTTP/1.1\r\nHost: 127.0.0.1:4443\r\nContent-Type: text/plain\r\n\
         Content-Length: {length}\r\n\r\n"
    )
}

/// Waits until `entries/` is empty: a body cut short leaves its temporary file to a
/// removal the relay starts when the upload fails; it must not stay.
async fn no_half_entry(dir: &std::path::Path) {
    for _ in 0..10_000 {
        if entry_files(dir).is_empty() {
            return;
        }
        // Paused time: this only lets the removal (on a blocking thread) finish.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("a half entry stays: {:?}", entry_files(dir));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_sending_its_body_midway_is_cut_after_the_body_timeout() {
    let store = FlakyStore::new(Mode::Healthy);
    let (relay, spool, dir) = relay_without_server(store.clone()).await;
    let connections = Connections::new(relay);
    let mut request = media_head("half", 100).into_bytes();
    request.extend_from_slice(b"0123456789");

    let started = Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(600),
        exchange(&connections, &request, false),
    )
    .await
    .expect("the relay cuts a connection whose body stopped midway");
    let waited = started.elapsed();
    assert!(
        waited >= DEFAULT_BODY_TIMEOUT && waited < DEFAULT_BODY_TIMEOUT + Duration::from_secs(1),
        "cut after {waited:?}"
    );
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    assert_eq!(store.put_attempts.load(Ordering::SeqCst), 0);
    assert_eq!(spool.stats().files, 0);
    no_half_entry(dir.path()).await;
}

#[tokio::test(start_paused = true)]
async fn a_slow_body_that_keeps_coming_is_not_cut() {
    let store = FlakyStore::new(Mode::Healthy);
    let (relay, _spool, _dir) = relay_without_server(store.clone()).await;
    let connections = Connections::new(relay);
    let (mut client, server) = tokio::io::duplex(1 << 16);
    connections.serve_connection(server).await;
    client
        .write_all(media_head("slow", 3).as_bytes())
        .await
        .unwrap();
    // A byte every 50 s: 150 s in all, more than the limit, never 60 s idle.
    for byte in [b"a", b"b", b"c"] {
        tokio::time::sleep(Duration::from_secs(50)).await;
        client.write_all(byte).await.unwrap();
    }
    let mut head = [0u8; 12];
    client.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    assert_eq!(store.puts(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_body_shorter_than_its_content_length_is_refused_and_leaves_nothing() {
    let store = FlakyStore::new(Mode::Healthy);
    let (relay, spool, dir) = relay_without_server(store.clone()).await;
    let connections = Connections::new(relay);
    let mut request = media_head("short", 100).into_bytes();
    request.extend_from_slice(b"only ten b");
    // The client says 100 bytes, sends 10 and closes its side.
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        exchange(&connections, &request, true),
    )
    .await
    .expect("a body cut short is answered at once");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("could not be read"), "{answer}");
    assert_eq!(store.put_attempts.load(Ordering::SeqCst), 0);
    assert_eq!(spool.stats().files, 0);
    no_half_entry(dir.path()).await;
}
