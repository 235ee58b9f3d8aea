//! The findings of an adversarial review of the relay (2026-12, issue 38), each
//! reproduced as the reviewer did, through a relay on a real port in front of the
//! fake. Each test opens with what was seen before the fix.

mod common;

use std::sync::Arc;

use common::{BUCKET, Harness, Setup, real_fake, stored};
use relay::RelayConfig;

/// Cloud Storage's chunk granularity.
const K: usize = 256 * 1024;

fn session_files(h: &Harness) -> Vec<(String, u64)> {
    let dir = h.spool.dir().join("sessions");
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let len = e.metadata().unwrap().len();
            (e.file_name().to_string_lossy().into_owned(), len)
        })
        .collect();
    files.sort();
    files
}

fn relay_config(max_session_bytes: u64) -> RelayConfig {
    RelayConfig {
        max_object_bytes: Some(8 << 20),
        max_sessions: 4,
        max_session_bytes,
        ..RelayConfig::new(BUCKET)
    }
}

async fn put(h: &Harness, session: &str, range: &str, body: Vec<u8>) -> reqwest::Response {
    let request = h.http.put(session).header("content-range", range);
    request.body(body).send().await.unwrap()
}

#[tokio::test]
async fn h2_a_body_longer_than_its_range_leaves_nothing_on_disk() {
    // Before: a 4 MiB body with `Content-Range: bytes 0-0/*` (400), then DELETE,
    // five times, left 20 MiB of `.partial` files with --max-session-bytes 6MiB.
    let (_fake, fake_base) = real_fake().await;
    let setup = Setup {
        relay: Some(relay_config(6 << 20)),
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    for range in ["bytes 0-0/*", "bytes 0-262143/*"] {
        for _ in 0..5 {
            let session = h.start_resumable("h2").await;
            let refused = put(&h, &session, range, vec![7; 4 << 20]).await;
            assert_eq!(refused.status(), 400, "{range}");
            let cancelled = h.http.delete(&session).send().await.unwrap();
            assert_eq!(cancelled.status(), 499);
        }
        let held: u64 = session_files(&h).iter().map(|(_, len)| len).sum();
        assert_eq!(held, 0, "{range}: {:?}", session_files(&h));
    }
    // The sessions' room is whole: a 4 MiB upload in 256 KiB chunks goes through.
    let data: Vec<u8> = (0..4 << 20).map(|i| (i % 251) as u8).collect();
    let session = h.start_resumable("h2/after").await;
    let first = format!("bytes 0-{}/*", 2 * K - 1);
    let first = put(&h, &session, &first, data[..2 * K].to_vec()).await;
    assert_eq!(first.status(), 308);
    let last = format!("bytes {}-{}/{}", 2 * K, data.len() - 1, data.len());
    let done = put(&h, &session, &last, data[2 * K..].to_vec()).await;
    assert_eq!(done.status(), 200, "{:?}", done.text().await);
    h.stopped().await;
}

#[tokio::test]
async fn h3_an_object_past_the_limit_is_refused_at_once_and_its_session_forgotten() {
    // Before: a 413 kept the session and its chunks counted for 7 days, so five
    // oversized uploads blocked every resumable chunk for a week.
    let (_fake, fake_base) = real_fake().await;
    let setup = Setup {
        relay: Some(relay_config(3 * K as u64)),
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    let session = h.start_resumable("h3").await;
    assert_eq!(
        put(&h, &session, "bytes 0-262143/*", vec![1; K])
            .await
            .status(),
        308
    );
    let past = format!("bytes {K}-{}/{}", (9 << 20) - 1, 9 << 20);
    let refused = put(&h, &session, &past, vec![1; 8 << 20]).await;
    assert_eq!(refused.status(), 413);
    let status = put(&h, &session, "bytes */*", Vec::new()).await;
    assert_eq!(status.status(), 404, "the session outlived its 413");
    assert!(session_files(&h).is_empty(), "{:?}", session_files(&h));
    // Its bytes no longer count: a new session may hold the whole room.
    let session = h.start_resumable("h3/next").await;
    let range = format!("bytes 0-{}/*", 3 * K - 1);
    assert_eq!(
        put(&h, &session, &range, vec![2; 3 * K]).await.status(),
        308
    );
    // A declared size past the limit is refused when the session opens.
    let url = format!(
        "{}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=h3-declared",
        h.base
    );
    let open = h
        .http
        .post(url)
        .header("x-upload-content-length", (9u64 << 20).to_string());
    assert_eq!(open.send().await.unwrap().status(), 413);
    h.stopped().await;
}

#[tokio::test]
async fn m1_an_io_error_at_completion_keeps_the_session_for_the_retry() {
    // Before: an I/O error reading the session's chunks at completion forgot the
    // session but answered 503 "retry"; the retry got 404.
    let (fake, fake_base) = real_fake().await;
    let disk = Arc::new(spool::testing::FaultDisk::default());
    let setup = Setup {
        disk: Some(disk.clone()),
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    let data: Vec<u8> = (0..K + 10).map(|i| (i % 13) as u8).collect();
    let session = h.start_resumable("m1").await;
    assert_eq!(
        put(&h, &session, "bytes 0-262143/*", data[..K].to_vec())
            .await
            .status(),
        308
    );
    disk.fail_next(spool::testing::Op::ReadRange, std::io::ErrorKind::Other);
    let last = format!("bytes {K}-{}/{}", data.len() - 1, data.len());
    let failed = put(&h, &session, &last, data[K..].to_vec()).await;
    assert_eq!(failed.status(), 503);
    let retried = put(&h, &session, &last, data[K..].to_vec()).await;
    assert_eq!(retried.status(), 200, "{:?}", retried.text().await);
    h.drained().await;
    assert_eq!(stored(&fake, "m1").as_deref(), Some(&data[..]));
    h.stopped().await;
}

#[tokio::test]
async fn m2_options_the_relay_cannot_carry_are_refused_by_name() {
    // Before: customer-supplied keys, KMS keys, ACLs, holds, retention and XML
    // copies were dropped silently: 200, and the object was written without them
    // (a copy became an empty object).
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let csek = h
        .upload(BUCKET, "uploadType=media&name=m2-csek")
        .header("x-goog-encryption-algorithm", "AES256")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(csek.status(), 400);
    assert!(
        csek.text()
            .await
            .unwrap()
            .contains("x-goog-encryption-algorithm")
    );
    let kms = h
        .upload(BUCKET, "uploadType=media&name=m2-kms&kmsKeyName=k")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(kms.status(), 400);
    let held = h.multipart(
        serde_json::json!({"name": "m2-hold", "temporaryHold": true}),
        b"x",
    );
    let held = held.await;
    assert_eq!(held.status(), 400);
    assert!(held.text().await.unwrap().contains("temporaryHold"));
    let copy = h
        .xml_put("m2-copy", b"")
        .header("x-goog-copy-source", "bkt/other");
    let copy = copy.send().await.unwrap();
    assert_eq!(copy.status(), 400);
    let acl = h
        .xml_put("m2-acl", b"x")
        .header("x-goog-acl", "public-read");
    assert_eq!(acl.send().await.unwrap().status(), 400);
    for name in ["m2-csek", "m2-kms", "m2-hold", "m2-copy", "m2-acl"] {
        assert_eq!(stored(&fake, name), None, "{name} was written");
    }
    h.stopped().await;
}

#[tokio::test]
async fn m4_completed_sessions_keep_only_their_answer_and_at_most_max_sessions() {
    // Before: every completed session kept its whole opening for an hour, in memory
    // and on disk, and reloaded it at a restart, without a bound.
    let (_fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    for i in 0..7 {
        let session = h.start_resumable(&format!("m4/{i}")).await;
        let done = put(&h, &session, "bytes 0-2/3", vec![i; 3]).await;
        assert_eq!(done.status(), 200);
    }
    let files = session_files(&h);
    assert!(
        files.iter().all(|(name, _)| name.ends_with(".done")),
        "{files:?}"
    );
    assert_eq!(files.len(), 4, "max_sessions answers kept: {files:?}");
    h.stopped().await;
}

#[tokio::test]
async fn m5_a_chunk_that_is_not_a_multiple_of_256_kib_is_refused_unless_last() {
    // Before: 300 one-byte chunks made 301 files and 1.2 MiB on disk while 300 bytes
    // were counted, and completion was quadratic in the chunk count.
    let (_fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let session = h.start_resumable("m5").await;
    let one = put(&h, &session, "bytes 0-0/*", vec![1]).await;
    assert_eq!(one.status(), 400);
    assert!(one.text().await.unwrap().contains("multiple of 262144"));
    let unranged = h.http.put(&session).header("content-range", "bytes 0-*/*");
    let last = unranged.body(vec![1; 10]).send().await.unwrap();
    assert_eq!(last.status(), 200, "a last chunk of any size is taken");
    h.stopped().await;
}

#[tokio::test]
async fn l2_a_session_never_completes_into_another_upstream() {
    // Before: a session opened for one upstream completed into whatever upstream
    // the next run on the same directory had.
    let (_fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let run = |upstream: &str| {
        let config = RelayConfig {
            upstream: upstream.to_string(),
            ..RelayConfig::new(BUCKET)
        };
        common::relay_on(dir.path(), &fake_base, config)
    };
    let relay = run("gs://bkt at http://one").await;
    let session = relay.start_resumable("l2").await;
    let chunk = relay
        .http
        .put(&session)
        .header("content-range", "bytes 0-262143/*");
    assert_eq!(chunk.body(vec![1; K]).send().await.unwrap().status(), 308);
    relay.stopped().await;
    let moved = |session: &str, relay: &Harness| {
        let old_base = session.split("/upload/").next().unwrap().to_string();
        session.replace(&old_base, &relay.base)
    };
    // The same upstream after a restart: the session is there.
    let relay = run("gs://bkt at http://one").await;
    let session = moved(&session, &relay);
    let status = relay
        .http
        .put(&session)
        .header("content-range", "bytes */*");
    assert_eq!(status.send().await.unwrap().status(), 308);
    relay.stopped().await;
    // Another upstream: it is not.
    let relay = run("gs://bkt at http://two").await;
    let session = moved(&session, &relay);
    let status = relay
        .http
        .put(&session)
        .header("content-range", "bytes */*");
    assert_eq!(status.send().await.unwrap().status(), 404);
    relay.stopped().await;
}

fn big_config() -> Setup {
    Setup {
        relay: Some(RelayConfig {
            max_object_bytes: Some(24 << 20),
            ..RelayConfig::new(BUCKET)
        }),
        ..Setup::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m8_an_object_over_8_mib_is_written_create_if_absent_and_a_taken_name_is_412() {
    // Before: objects over 8 MiB were spooled without any create-if-absent check,
    // so a name that held other bytes was answered 200 spooled and dead-lettered
    // later, where docs/relay.md promises 412. Now they stream to a staging name
    // through the fake's XML multipart upload and are copied create-if-absent.
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, big_config()).await;
    let data: Vec<u8> = (0..20 << 20).map(|i: u32| (i % 253) as u8).collect();
    let first = h.media("m8/big.bin", &data).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["x-spool-outcome"], "stored");
    assert!(stored(&fake, "m8/big.bin").as_deref() == Some(&data[..]));
    let same = h.media("m8/big.bin", &data).await;
    assert_eq!(
        (same.status().as_u16(), &same.headers()["x-spool-outcome"]),
        (200, &"stored".parse().unwrap())
    );
    let mut other = data.clone();
    other[0] ^= 1;
    let taken = h.media("m8/big.bin", &other).await;
    assert_eq!(taken.status(), 412);
    assert_eq!(fake.object_count(BUCKET), 1, "a staging object was left");
    h.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_object_spooled_during_an_outage_streams_out_when_the_store_heals() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, big_config()).await;
    common::fail_writes(&fake);
    let data: Vec<u8> = (0..20 << 20).map(|i: u32| (i % 251) as u8).collect();
    let spooled = h.media("outage/big.bin", &data).await;
    assert_eq!(spooled.status(), 200);
    assert_eq!(spooled.headers()["x-spool-outcome"], "spooled");
    fake.clear_faults();
    h.drained().await;
    assert!(stored(&fake, "outage/big.bin").as_deref() == Some(&data[..]));
    assert_eq!(fake.object_count(BUCKET), 1, "a staging object was left");
    h.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn m6_a_stalled_upload_does_not_take_the_spools_room_from_others_while_the_store_is_healthy()
{
    // Before: the bytes of uploads still arriving were reserved against the spool's
    // max_bytes even when they went straight to the bucket, so one stalled 3.5 MiB
    // upload made another client's 1 MiB upload 503 "spool is full".
    use tokio::io::AsyncWriteExt as _;
    let (fake, fake_base) = real_fake().await;
    let setup = Setup {
        spool: spool::SpoolConfig {
            max_bytes: 4 << 20,
            ..spool::SpoolConfig::default()
        },
        relay: Some(RelayConfig::new(BUCKET)),
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    let addr = h.base.strip_prefix("http://").unwrap().to_string();
    let mut stalled = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=stalled HTTP/1.1\r\n\
         host: {addr}\r\ncontent-length: {}\r\n\r\n",
        4 << 20
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    stalled.write_all(&vec![1u8; 3584 << 10]).await.unwrap();
    // The relay has read the stalled body's pieces (it never finishes).
    let read = async {
        while h.relay.metrics().received_bytes_total() < 3 << 20 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(common::PATIENCE, read).await.unwrap();
    let other = h.media("other", &vec![2u8; 1 << 20]).await;
    assert_eq!(other.status(), 200, "{:?}", other.text().await);
    assert_eq!(stored(&fake, "other").map(|b| b.len()), Some(1 << 20));
    drop(stalled);
    h.stopped().await;
}
