//! The storage-testbench's instructions on resumable sessions, on a real port:
//! `-after-MK` counts the bytes the session received in all (never firing on the
//! request that opens it), keeps the bytes up to M KiB and acts once; the client
//! then learns from a status query where to resume. `return-broken-stream-final-
//! chunk-after-NB` stores the object and breaks its answer. Instructions on other
//! operations answer the JSON API's metadata calls too.

mod common;

use common::{Raw, Read as _, config, manual_fake, send};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const K: usize = 1024;

async fn retry_test(base: &str, op: &str, instructions: &[&str]) -> String {
    let body = json!({ "instructions": { op: instructions } }).to_string();
    let created = send(
        base,
        Method::POST,
        "/retry_test",
        &[("content-type", "application/json")],
        body,
    )
    .await;
    assert_eq!(created.status(), StatusCode::OK, "{}", created.text());
    created.json()["id"].as_str().unwrap().to_string()
}

async fn completed(base: &str, id: &str) -> Value {
    send(base, Method::GET, &format!("/retry_test/{id}"), &[], "")
        .await
        .json()["completed"]
        .clone()
}

/// Opens a session for `bkt/name` with the test's header; its path.
async fn open(base: &str, id: &str, name: &str) -> String {
    let path = format!("/upload/storage/v1/b/bkt/o?uploadType=resumable&name={name}");
    let started = send(base, Method::POST, &path, &[("x-retry-test-id", id)], "").await;
    assert_eq!(started.status(), StatusCode::OK, "{}", started.text());
    let location = started.header("location").unwrap();
    location[location.find("/upload/").unwrap()..].to_string()
}

async fn chunk(base: &str, session: &str, id: &str, range: &str, body: &[u8]) -> Raw {
    let headers = [("x-retry-test-id", id), ("content-range", range)];
    send(base, Method::PUT, session, &headers, body.to_vec()).await
}

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

#[tokio::test]
async fn after_mk_fires_once_the_session_holds_m_kib_and_keeps_them() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let id = retry_test(&base, "storage.objects.insert", &["return-503-after-256K"]).await;
    let session = open(&base, &id, "o").await;
    assert_eq!(
        completed(&base, &id).await,
        false,
        "the request opening the session leaves it"
    );
    let data = bytes(600 * K);
    let first = chunk(&base, &session, &id, "bytes 0-131071/*", &data[..128 * K]).await;
    assert_eq!(first.status().as_u16(), 308, "below 256 KiB nothing fires");
    let crossing = chunk(
        &base,
        &session,
        &id,
        "bytes 131072-524287/*",
        &data[128 * K..512 * K],
    )
    .await;
    assert_eq!(crossing.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        crossing.text().contains("keeps the bytes up to"),
        "{}",
        crossing.text()
    );
    assert_eq!(completed(&base, &id).await, true);
    let query = chunk(&base, &session, &id, "bytes */*", b"").await;
    assert_eq!(query.status().as_u16(), 308);
    assert_eq!(query.header("range"), Some("bytes=0-262143"));
    let rest = format!("bytes 262144-{}/{}", data.len() - 1, data.len());
    let done = chunk(&base, &session, &id, &rest, &data[256 * K..]).await;
    assert_eq!(done.status(), StatusCode::OK, "{}", done.text());
    assert_eq!(fake.object_bytes("bkt", "o").as_deref(), Some(&data[..]));
    assert_eq!(fake.stats().by_fault["return-503-after-256K"], 1);
}

#[tokio::test]
async fn a_chunk_ending_at_m_kib_is_kept_whole_and_a_broken_stream_drops_the_answer() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let id = retry_test(
        &base,
        "storage.objects.insert",
        &[
            "return-503-after-128K",
            "return-408",
            "return-broken-stream-after-192K",
        ],
    )
    .await;
    let session = open(&base, &id, "o").await;
    let data = bytes(256 * K);
    let whole = chunk(&base, &session, &id, "bytes 0-131071/*", &data[..128 * K]).await;
    assert_eq!(whole.status(), StatusCode::SERVICE_UNAVAILABLE);
    let asked = chunk(&base, &session, &id, "bytes */*", b"").await;
    assert_eq!(
        asked.status(),
        StatusCode::REQUEST_TIMEOUT,
        "the next instruction, at once"
    );
    let query = chunk(&base, &session, &id, "bytes */*", b"").await;
    assert_eq!(query.header("range"), Some("bytes=0-131071"));
    let headers = [
        ("x-retry-test-id", id.as_str()),
        ("content-range", "bytes 131072-262143/262144"),
    ];
    let broken = common::try_send(
        &base,
        Method::PUT,
        &session,
        &headers,
        data[128 * K..].to_vec(),
    )
    .await;
    assert!(broken.is_err(), "the connection should drop: {broken:?}");
    let query = chunk(&base, &session, &id, "bytes */*", b"").await;
    assert_eq!(query.header("range"), Some("bytes=0-196607"));
    let done = chunk(
        &base,
        &session,
        &id,
        "bytes 196608-262143/262144",
        &data[192 * K..],
    )
    .await;
    assert_eq!(done.status(), StatusCode::OK, "{}", done.text());
    assert_eq!(fake.object_bytes("bkt", "o").as_deref(), Some(&data[..]));
    assert_eq!(completed(&base, &id).await, true);
}

#[tokio::test]
async fn the_final_chunk_instruction_stores_the_object_and_breaks_its_answer() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let op = "storage.objects.insert";
    let id = retry_test(&base, op, &["return-broken-stream-final-chunk-after-10B"]).await;
    // Not on a request outside a session: it stays queued, as in the testbench.
    let media = "/upload/storage/v1/b/bkt/o?uploadType=media&name=m";
    let plain = send(
        &base,
        Method::POST,
        media,
        &[("x-retry-test-id", id.as_str())],
        "m",
    )
    .await;
    assert_eq!(plain.status(), StatusCode::OK);
    let session = open(&base, &id, "o").await;
    let data = bytes(64 * K);
    let middle = chunk(&base, &session, &id, "bytes 0-32767/*", &data[..32 * K]).await;
    assert_eq!(middle.status().as_u16(), 308);
    assert_eq!(completed(&base, &id).await, false);
    let headers = [
        ("x-retry-test-id", id.as_str()),
        ("content-range", "bytes 32768-65535/65536"),
    ];
    let last = common::try_send(
        &base,
        Method::PUT,
        &session,
        &headers,
        data[32 * K..].to_vec(),
    )
    .await;
    assert!(last.is_err(), "the answer should break: {last:?}");
    assert_eq!(fake.object_bytes("bkt", "o").as_deref(), Some(&data[..]));
    let query = chunk(&base, &session, &id, "bytes */65536", b"").await;
    assert_eq!(query.status(), StatusCode::OK);
    assert_eq!(query.json()["size"], "65536");
    assert_eq!(completed(&base, &id).await, true);
}

#[tokio::test]
async fn a_stall_after_mk_holds_the_answer_of_the_request_that_reaches_it() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let id = retry_test(&base, "storage.objects.insert", &["stall-for-1s-after-64K"]).await;
    let session = open(&base, &id, "o").await;
    let data = bytes(128 * K);
    let started = tokio::time::Instant::now();
    let done = chunk(&base, &session, &id, "bytes 0-131071/131072", &data).await;
    assert_eq!(done.status(), StatusCode::OK, "{}", done.text());
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    assert_eq!(fake.object_bytes("bkt", "o").as_deref(), Some(&data[..]));
    assert_eq!(completed(&base, &id).await, true);
}

#[tokio::test]
async fn instructions_apply_to_the_metadata_calls_by_their_names() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let id = retry_test(
        &base,
        "storage.buckets.patch",
        &["return-503", "return-400"],
    )
    .await;
    let with_id = [
        ("x-retry-test-id", id.as_str()),
        ("content-type", "application/json"),
    ];
    let patch = || {
        send(
            &base,
            Method::PATCH,
            "/storage/v1/b/bkt",
            &with_id,
            r#"{"labels":{"a":"1"}}"#,
        )
    };
    assert_eq!(patch().await.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(patch().await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(completed(&base, &id).await, true);
    let patched = patch().await;
    assert_eq!(
        patched.json()["metageneration"],
        "2",
        "only the third patch landed"
    );
    let keys = retry_test(
        &base,
        "storage.hmacKey.create",
        &["return-reset-connection"],
    )
    .await;
    let create = "/storage/v1/projects/p/hmacKeys?serviceAccountEmail=sa";
    let reset = common::try_send(
        &base,
        Method::POST,
        create,
        &[("x-retry-test-id", keys.as_str())],
        "",
    )
    .await;
    assert!(reset.is_err(), "{reset:?}");
    assert_eq!(completed(&base, &keys).await, true);
}
