//! Requests a relay must refuse, or answer without leaking, as users met them in
//! 2026-12: `name=%FF` stored as U+FFFD and answered 200 (Cloud Storage answers
//! 400); a `Content-Range` near `u64::MAX` overflowing; error bodies carrying the
//! spool's local paths; a body buffered whole before routing, even for a route that
//! takes none.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{BUCKET, real_fake};
use relay::{Relay, RelayConfig};
use spool::testing::{FaultDisk, ManualClock, Op};
use spool::{Metrics, Remote, Spool, SpoolConfig, Uploader, UploaderConfig};
use tokio::net::TcpListener;

/// A relay over a spool on `disk` in `dir`, in front of the fake at `fake_base`.
async fn relay_on(dir: &std::path::Path, disk: Arc<FaultDisk>, fake_base: &str) -> String {
    let store = spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(fake_base)).unwrap();
    let clock = Arc::new(ManualClock::new(1_791_453_600_000));
    let (spool, _) = Spool::open_with(
        dir,
        SpoolConfig::default(),
        disk,
        clock.clone(),
        Metrics::default(),
    )
    .await
    .unwrap();
    let uploader = Uploader::new(spool, Remote::new(store), UploaderConfig::default());
    let relay = Relay::new(RelayConfig::new(BUCKET), uploader, clock).unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let never = std::future::pending::<()>();
    tokio::spawn(relay::serve(relay, listener, never, Duration::from_secs(1)));
    base
}

#[tokio::test]
async fn a_name_that_is_not_utf8_is_refused_not_stored_as_u_fffd() {
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let base = relay_on(dir.path(), Arc::new(FaultDisk::default()), &fake_base).await;
    let url = format!("{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=%FF");
    let response = reqwest::Client::new()
        .post(url)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("not UTF-8"));
    assert_eq!(fake.object_count(BUCKET), 0);
}

#[tokio::test]
async fn a_content_range_near_u64_max_is_refused_with_400() {
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let base = relay_on(dir.path(), Arc::new(FaultDisk::default()), &fake_base).await;
    let http = reqwest::Client::new();
    let start = format!("{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=r");
    let start = http.post(start).send().await.unwrap();
    let location = start.headers()["location"].to_str().unwrap().to_string();
    let range = format!("bytes 0-{}/*", u64::MAX);
    let response = http
        .put(&location)
        .header("content-range", range)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
}

#[tokio::test]
async fn an_io_error_on_the_spool_is_503_without_the_spools_paths() {
    // The store fails the write, so the upload (held in memory) must be spooled,
    // and the spool's write of it fails.
    let (fake, fake_base) = real_fake().await;
    common::fail_writes(&fake);
    let dir = tempfile::tempdir().unwrap();
    let disk = Arc::new(FaultDisk::default());
    let base = relay_on(dir.path(), disk.clone(), &fake_base).await;
    disk.fail_next(Op::Create, std::io::ErrorKind::Other);
    let url = format!("{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=p");
    let response = reqwest::Client::new()
        .post(url)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let body = response.text().await.unwrap();
    let spool_dir = dir.path().to_str().unwrap();
    assert!(
        !body.contains(spool_dir),
        "the answer names the spool's files: {body}"
    );
    assert!(body.contains("retry"), "{body}");
}

/// A full disk (ENOSPC) under the session files answered the resumable start and
/// its chunks 503 without `Retry-After` (`torture faults --only full`,
/// docs/faults.md), unlike every other 503 of the relay.
#[tokio::test]
async fn a_session_the_spools_disk_cannot_store_is_503_with_retry_after() {
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let disk = Arc::new(FaultDisk::default());
    let base = relay_on(dir.path(), disk.clone(), &fake_base).await;
    let http = reqwest::Client::new();
    let start = format!("{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=s");
    disk.fail_next(Op::Create, std::io::ErrorKind::StorageFull);
    let refused = http.post(&start).send().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let opened = http.post(&start).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    let location = opened.headers()["location"].to_str().unwrap().to_string();
    disk.fail_next(Op::SyncFile, std::io::ErrorKind::StorageFull);
    let chunk = http
        .put(&location)
        .header("content-range", "bytes 0-262143/*")
        .body(vec![7u8; 262_144])
        .send()
        .await
        .unwrap();
    assert_eq!(chunk.status(), 503);
    assert_eq!(chunk.headers()["retry-after"], "1");
}

#[tokio::test]
async fn a_route_that_takes_no_body_answers_without_reading_one() {
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let base = relay_on(dir.path(), Arc::new(FaultDisk::default()), &fake_base).await;
    // A body far over any limit the relay has, on a route it does not serve: the
    // answer comes at once, with the connection closed.
    let endless = futures::stream::repeat_with(|| Ok::<_, std::io::Error>(vec![0u8; 65_536]));
    let body = reqwest::Body::wrap_stream(endless);
    let url = format!("{base}/storage/v1/b/{BUCKET}/o/x?alt=media");
    let response = reqwest::Client::new()
        .get(url)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 501);
    assert_eq!(response.headers()["connection"], "close");
}

#[tokio::test]
async fn a_body_declared_over_the_limit_is_refused_before_it_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let base = relay_on(dir.path(), Arc::new(FaultDisk::default()), &fake_base).await;
    let addr = base.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "PUT /{BUCKET}/huge HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\n\r\n",
        u64::MAX / 2
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0; 512];
    let n = stream.read(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

#[tokio::test]
async fn a_refusal_passed_through_keeps_its_status_but_not_the_upstreams_url() {
    let mut faults = fake_gcs::FaultPlan::none();
    faults.refusals.push(fake_gcs::Refusal {
        prefix: "secret/".into(),
        status: 403,
    });
    let config = fake_gcs::FakeGcsConfig {
        buckets: vec![BUCKET.to_string()],
        faults,
        ..fake_gcs::FakeGcsConfig::default()
    };
    let fake = fake_gcs::FakeGcs::new(config, Arc::new(fake_gcs::TokioClock::start())).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fake.serve_tcp(listener));
    let dir = tempfile::tempdir().unwrap();
    let base = relay_on(dir.path(), Arc::new(FaultDisk::default()), &fake_base).await;
    let url = format!("{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=secret/x");
    let response = reqwest::Client::new()
        .post(url)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let body = response.text().await.unwrap();
    assert!(
        !body.contains(&fake_base),
        "the answer names the upstream: {body}"
    );
    assert!(body.contains("HTTP 403"), "{body}");
}
