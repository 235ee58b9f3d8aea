//! The relay in front of the fake on real loopback ports, driven over HTTP: each
//! kind of upload is answered as Cloud Storage answers it and lands in the fake
//! under its exact name with its bytes and attributes; while the fake fails writes
//! every upload is answered 200 `spooled` and delivered after recovery; a full
//! spool is 503 with `Retry-After`; what the spool cannot honour is refused.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::{BUCKET, Harness, Setup, body_json, fail_writes, outcome, real_fake, stored};
use fake_gcs::FaultPlan;
use fake_gcs::wire::{Digests, crc32c_base64, md5_base64};
use serde_json::{Value, json};
use spool::SpoolConfig;

/// `(crc32c, md5Hash)` as the JSON API shows them.
fn digests(data: &[u8]) -> (String, String) {
    let d = Digests::of(data);
    (crc32c_base64(d.crc32c), md5_base64(&d.md5))
}

/// Bytes that differ from byte to byte and from test to test.
fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn metadata(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    (pairs.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn a_media_upload_is_stored_and_answered_with_its_object_resource() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let name = "logs/2026-10-08/a b+c.txt";
    let response = h.media(name, b"hello").await;
    assert_eq!(response.status(), 200);
    assert_eq!(outcome(&response), "stored");
    let resource: Value = body_json(response).await;
    assert_eq!(resource["kind"], "storage#object");
    assert_eq!(resource["name"], name);
    assert_eq!(resource["bucket"], BUCKET);
    assert_eq!(resource["size"], "5");
    assert_eq!(resource["crc32c"], "mnG7TA==");
    assert_eq!(resource["md5Hash"], "XUFAKrxLKna5cZ2REBfFkg==");
    assert_eq!(resource["contentType"], "text/plain");
    let generation: i64 = resource["generation"].as_str().unwrap().parse().unwrap();
    assert!(generation > 0);
    assert_eq!(stored(&fake, name).as_deref(), Some(&b"hello"[..]));
    assert_eq!(
        fake.object(BUCKET, name).unwrap().content_type,
        "text/plain"
    );
    assert_eq!(h.relay.metrics().requests_total("media", 200), 1);
    h.stopped().await;
}

#[tokio::test]
async fn a_multipart_upload_carries_its_attributes_to_the_store() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let data = b"a,b\n1,2\n";
    let (crc32c, md5) = digests(data);
    let resource = json!({
        "name": "reports/q3.csv",
        "contentType": "text/csv",
        "cacheControl": "no-store",
        "contentDisposition": "attachment; filename=\"q3.csv\"",
        "contentLanguage": "fr",
        "metadata": { "owner": "sre", "run": "7" },
        "crc32c": crc32c,
    });
    let response = h.multipart(resource, data).await;
    assert_eq!(response.status(), 200);
    assert_eq!(outcome(&response), "stored");
    let answer: Value = body_json(response).await;
    assert_eq!(answer["name"], "reports/q3.csv");
    assert_eq!(
        (&answer["crc32c"], &answer["md5Hash"]),
        (&json!(crc32c), &json!(md5))
    );
    assert_eq!(answer["metadata"], json!({ "owner": "sre", "run": "7" }));
    assert_eq!(answer["cacheControl"], "no-store");

    let record = fake.object(BUCKET, "reports/q3.csv").unwrap();
    assert!(record.matches(data));
    assert_eq!(record.content_type, "text/csv");
    let attributes = record.attributes();
    assert_eq!(
        attributes.metadata,
        metadata(&[("owner", "sre"), ("run", "7")])
    );
    assert_eq!(attributes.cache_control.as_deref(), Some("no-store"));
    assert_eq!(
        attributes.content_disposition.as_deref(),
        Some("attachment; filename=\"q3.csv\"")
    );
    assert_eq!(attributes.content_language.as_deref(), Some("fr"));
    h.stopped().await;
}

#[tokio::test]
async fn a_resumable_upload_in_two_chunks_is_stored_once_complete_and_answers_retries() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let data = payload(300_000, 1);
    let (crc32c, _) = digests(&data);
    let location = h.start_resumable("big/r.ndjson").await;
    let first = h
        .http
        .put(&location)
        .header("content-range", "bytes 0-262143/*")
        .body(data[..262_144].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 308);
    assert_eq!(first.headers()["range"], "bytes=0-262143");
    assert_eq!(
        fake.object_count(BUCKET),
        0,
        "nothing is written before the end"
    );
    let last = format!("bytes 262144-299999/{}", data.len());
    let second = h.http.put(&location).header("content-range", last);
    let second = second.body(data[262_144..].to_vec()).send().await.unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(outcome(&second), "stored");
    let answer: Value = body_json(second).await;
    assert_eq!(answer["size"], "300000");
    assert_eq!(answer["crc32c"], json!(crc32c));
    assert_eq!(answer["contentType"], "application/x-ndjson");
    assert_eq!(stored(&fake, "big/r.ndjson").as_deref(), Some(&data[..]));

    // A status query after completion (a client retrying its last request) gets
    // the same answer.
    let status = h
        .http
        .put(&location)
        .header("content-range", "bytes */300000");
    let status = status.send().await.unwrap();
    assert_eq!(status.status(), 200);
    let again: Value = body_json(status).await;
    assert_eq!(again, answer);
    h.stopped().await;
}

#[tokio::test]
async fn an_xml_put_is_answered_with_cloud_storages_headers_and_object_store_accepts_it() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let put = h
        .xml_put("x/y z.txt", b"hello")
        .header("content-type", "text/plain")
        .header("x-goog-meta-owner", "sre")
        .header("x-goog-if-generation-match", "0");
    let response = put.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(outcome(&response), "stored");
    let headers = response.headers();
    assert_eq!(headers["etag"], "\"5d41402abc4b2a76b9719d911017c592\"");
    assert_eq!(
        headers["x-goog-hash"],
        "crc32c=mnG7TA==,md5=XUFAKrxLKna5cZ2REBfFkg=="
    );
    let record = fake.object(BUCKET, "x/y z.txt").unwrap();
    assert!(record.matches(b"hello"));
    assert_eq!(record.attributes().metadata, metadata(&[("owner", "sre")]));

    // object_store's own GCS client, pointed at the relay, writes through it.
    let url = format!("gs://{BUCKET}");
    let through = spool::connect::store_from_url(&url, Some(&h.base)).unwrap();
    let path = object_store::path::Path::from("via/object_store.bin");
    let options = object_store::PutOptions {
        mode: object_store::PutMode::Create,
        ..Default::default()
    };
    let bytes = Bytes::from_static(b"from object_store");
    through
        .put_opts(&path, bytes.into(), options)
        .await
        .unwrap();
    let delivered = stored(&fake, "via/object_store.bin");
    assert_eq!(delivered.as_deref(), Some(&b"from object_store"[..]));
    h.stopped().await;
}

#[tokio::test]
async fn while_the_store_fails_writes_every_upload_is_spooled_then_delivered_exactly() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    fail_writes(&fake);
    let big = payload(300_000, 2);
    let media = h.media("outage/media.txt", b"media bytes").await;
    let resource = json!({
        "name": "outage/multipart.csv",
        "contentType": "text/csv",
        "metadata": { "k": "v" },
    });
    let multipart = h.multipart(resource, b"a,b\n").await;
    let resumable = h.resumable("outage/resumable.bin", &big, 262_144).await;
    let xml = h.xml_put("outage/xml.bin", b"xml").send().await.unwrap();
    for (what, response) in [media, multipart, resumable, xml].into_iter().enumerate() {
        assert_eq!(response.status(), 200, "upload {what}");
        assert_eq!(outcome(&response), "spooled", "upload {what}");
    }
    assert_eq!(fake.object_count(BUCKET), 0);
    assert_eq!(h.spool.stats().files, 4);

    fake.clear_faults();
    h.drained().await;
    let expected: [(&str, &[u8]); 4] = [
        ("outage/media.txt", b"media bytes"),
        ("outage/multipart.csv", b"a,b\n"),
        ("outage/resumable.bin", &big),
        ("outage/xml.bin", b"xml"),
    ];
    for (name, data) in expected {
        assert_eq!(stored(&fake, name).as_deref(), Some(data), "{name}");
    }
    assert_eq!(fake.object_count(BUCKET), 4);
    let csv = fake.object(BUCKET, "outage/multipart.csv").unwrap();
    assert_eq!(csv.content_type, "text/csv");
    assert_eq!(csv.attributes().metadata, metadata(&[("k", "v")]));
    let stats = h.spool.stats();
    assert_eq!((stats.dead_letter_files, stats.quarantined_files), (0, 0));
    h.stopped().await;
}

#[tokio::test]
async fn a_full_spool_is_503_with_retry_after_until_the_drain_makes_room() {
    let (fake, fake_base) = real_fake().await;
    let setup = Setup {
        spool: SpoolConfig {
            max_files: 1,
            ..SpoolConfig::default()
        },
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    fail_writes(&fake);
    let first = h.media("full/1", b"one").await;
    assert_eq!((first.status().as_u16(), outcome(&first)), (200, "spooled"));
    let refused = h.media("full/2", b"two").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = body_json(refused).await;
    assert_eq!(body["error"]["code"], 503);
    assert!(body["error"]["message"].as_str().unwrap().contains("full"));

    fake.clear_faults();
    h.drained().await;
    let retried = h.media("full/2", b"two").await;
    assert_eq!(
        (retried.status().as_u16(), outcome(&retried)),
        (200, "stored")
    );
    assert_eq!(stored(&fake, "full/1").as_deref(), Some(&b"one"[..]));
    assert_eq!(stored(&fake, "full/2").as_deref(), Some(&b"two"[..]));
    h.stopped().await;
}

#[tokio::test]
async fn a_resumable_session_refused_for_a_full_spool_keeps_its_bytes_for_the_retry() {
    let (fake, fake_base) = real_fake().await;
    let setup = Setup {
        spool: SpoolConfig {
            max_files: 1,
            ..SpoolConfig::default()
        },
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    fail_writes(&fake);
    assert_eq!(
        outcome(&h.media("fills/the-spool", b"one").await),
        "spooled"
    );
    // A first chunk of 256 KiB (every chunk but the last is a multiple), then the
    // last 1,000 bytes.
    const K: usize = 256 * 1024;
    let data = payload(K + 1000, 4);
    let location = h.start_resumable("resumed/r.bin").await;
    let first = h
        .http
        .put(&location)
        .header("content-range", format!("bytes 0-{}/*", K - 1));
    let first = first.body(data[..K].to_vec()).send().await.unwrap();
    assert_eq!(first.status(), 308);
    let last = || {
        let range = format!("bytes {K}-{}/{}", data.len() - 1, data.len());
        let put = h.http.put(&location).header("content-range", range);
        put.body(data[K..].to_vec()).send()
    };
    let refused = last().await.unwrap();
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));

    fake.clear_faults();
    h.drained().await;
    let status = h.http.put(&location).header("content-range", "bytes */*");
    let status = status.send().await.unwrap();
    assert_eq!(status.status(), 308, "the session kept its bytes");
    assert_eq!(
        status.headers()["range"],
        format!("bytes=0-{}", data.len() - 1).as_str()
    );
    let retried = last().await.unwrap();
    assert_eq!(
        (retried.status().as_u16(), outcome(&retried)),
        (200, "stored")
    );
    assert_eq!(stored(&fake, "resumed/r.bin").as_deref(), Some(&data[..]));
    h.stopped().await;
}

#[tokio::test]
async fn preconditions_other_than_create_if_absent_are_refused_with_400() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let refused = [
        "uploadType=media&name=p&ifGenerationMatch=5",
        "uploadType=media&name=p&ifMetagenerationMatch=1",
        "uploadType=media&name=p&ifGenerationNotMatch=0",
        "uploadType=resumable&name=p&ifGenerationMatch=2",
    ];
    for query in refused {
        let response = h.upload(BUCKET, query).body("{}").send().await.unwrap();
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = body_json(response).await;
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("cannot honour"), "{query}: {message}");
    }
    let xml = h
        .xml_put("p", b"x")
        .header("x-goog-if-generation-match", "3");
    let xml = xml.send().await.unwrap();
    assert_eq!(xml.status(), 400);
    assert!(xml.text().await.unwrap().starts_with("<?xml"));
    assert_eq!(fake.stats().requests, 0, "nothing reached the store");
    assert!(h.spool.is_empty());

    let allowed = h.upload(BUCKET, "uploadType=media&name=p&ifGenerationMatch=0");
    assert_eq!(allowed.body("x").send().await.unwrap().status(), 200);
    h.stopped().await;
}

#[tokio::test]
async fn permanent_refusals_are_passed_through_and_nothing_is_spooled() {
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let poison = FaultPlan::from_toml("[[refuse]]\nprefix = \"poison/\"\nstatus = 403\n");
    fake.add_faults(poison.unwrap()).unwrap();

    let other_bucket = h.upload("other", "uploadType=media&name=a").body("x");
    let other_bucket = other_bucket.send().await.unwrap();
    assert_eq!(other_bucket.status(), 404);
    let text = other_bucket.text().await.unwrap();
    assert!(
        text.contains("The specified bucket does not exist."),
        "{text}"
    );

    assert_eq!(h.media("poison/a", b"x").await.status(), 403);
    assert_eq!(h.media("a//b", b"x").await.status(), 400, "an invalid name");

    assert_eq!(h.media("taken", b"one").await.status(), 200);
    let conflict = h.media("taken", b"two").await;
    assert_eq!(conflict.status(), 412);
    let body: Value = body_json(conflict).await;
    assert_eq!(body["error"]["errors"][0]["reason"], "conditionNotMet");
    let same = h.media("taken", b"one").await;
    assert_eq!((same.status().as_u16(), outcome(&same)), (200, "stored"));
    assert_eq!(stored(&fake, "taken").as_deref(), Some(&b"one"[..]));

    let bad_digest = h.upload(BUCKET, "uploadType=media&name=digest");
    let bad_digest = bad_digest
        .header("x-goog-hash", "crc32c=AAAAAA==")
        .body("x");
    assert_eq!(bad_digest.send().await.unwrap().status(), 400);
    assert!(fake.object(BUCKET, "digest").is_none());

    let too_large = h.media("large", &payload((1 << 20) + 65 * 1024, 3)).await;
    assert_eq!(too_large.status(), 413);
    assert!(h.spool.is_empty(), "a refusal is never spooled");
    h.stopped().await;
}

#[tokio::test]
async fn reads_are_not_passed_through_but_the_bucket_is_described() {
    let (_fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let get = |path: &str| h.http.get(format!("{}{path}", h.base)).send();
    let json_read = get("/storage/v1/b/bkt/o/a?alt=media").await.unwrap();
    assert_eq!(json_read.status(), 501);
    let message = json_read.text().await.unwrap();
    assert!(
        message.contains("does not pass storage.objects.get through"),
        "{message}"
    );
    let list = get("/storage/v1/b/bkt/o?prefix=a").await.unwrap();
    assert_eq!(list.status(), 501);
    let xml_read = get("/bkt/a").await.unwrap();
    assert_eq!(xml_read.status(), 501);
    assert!(
        xml_read
            .text()
            .await
            .unwrap()
            .contains("<Code>NotImplemented</Code>")
    );

    let bucket = get("/storage/v1/b/bkt").await.unwrap();
    assert_eq!(bucket.status(), 200);
    let resource: Value = body_json(bucket).await;
    assert_eq!(
        (&resource["kind"], &resource["name"]),
        (&json!("storage#bucket"), &json!("bkt"))
    );
    assert_eq!(get("/nothing/here/at/all?x").await.unwrap().status(), 501);
    let unknown = h.http.patch(format!("{}/storage/v1/b/bkt/o/a", h.base));
    let unknown = unknown.send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(
        unknown
            .text()
            .await
            .unwrap()
            .contains("the relay serves no PATCH")
    );
    h.stopped().await;
}

#[tokio::test]
async fn a_connection_over_any_byte_stream_is_served_and_shut_down_gracefully() {
    // What a simulator does: its own stream, not a TCP socket, through the same
    // connection code the accept loop uses.
    use http_body_util::Full;
    use hyper_util::rt::TokioIo;
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let connections = relay::Connections::new(h.relay.clone());
    let (client, server) = tokio::io::duplex(64 * 1024);
    connections.serve_connection(server).await;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(client))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = http::Request::put(format!("/{BUCKET}/over/a-duplex"))
        .header("host", "relay")
        .header("x-goog-if-generation-match", "0")
        .body(Full::new(Bytes::from_static(b"piped")))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[relay::OUTCOME_HEADER], "stored");
    assert_eq!(connections.count(), 1);
    assert!(
        connections
            .shutdown(std::time::Duration::from_secs(5))
            .await
    );
    assert_eq!(
        stored(&fake, "over/a-duplex").as_deref(),
        Some(&b"piped"[..])
    );
    assert_eq!(h.relay.metrics().requests_total("xml_put", 200), 1);
}

/// A multipart upload body as gsutil (apitools) frames it: bare `\n` line breaks,
/// a boundary of `=` and digits quoted with `'` in the content type.
fn gsutil_multipart(name: &str, data: &[u8]) -> (String, Vec<u8>) {
    let boundary = "===============8417325719423846017==";
    let mut body = format!(
        "--{boundary}\ncontent-type: application/json\nMIME-Version: 1.0\n\n\
         {{\"name\": \"{name}\"}}\n--{boundary}\ncontent-type: application/octet-stream\n\
         MIME-Version: 1.0\nContent-Transfer-Encoding: binary\n\n"
    )
    .into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\n--{boundary}--").as_bytes());
    (format!("multipart/related; boundary='{boundary}'"), body)
}

#[tokio::test]
async fn gsutils_multipart_framing_keeps_every_byte_of_the_object() {
    // Found by review (issue 53): a file whose last byte is `\r`, sent by gsutil
    // (bare `\n` line breaks), was stored one byte short with a 200, by the fake
    // and by the relay. The bucket is the oracle: each payload, written straight to
    // the fake and through the relay (healthy, and spooled during an outage), is
    // stored exactly as sent.
    let (fake, fake_base) = real_fake().await;
    let h = Harness::in_front_of(&fake_base, Setup::default()).await;
    let payloads: [&[u8]; 6] = [
        b"ends in CR\r",
        b"ends in CRLF\r\n",
        b"ends in dashes --",
        b"\r",
        b"ends in the boundary's prefix\n--===============8417",
        b"",
    ];
    let http = reqwest::Client::new();
    for (outage, via) in [(false, "direct"), (false, "relay"), (true, "relay")] {
        if outage {
            fail_writes(&fake);
        }
        for (n, data) in payloads.iter().enumerate() {
            let name = format!("gsutil/{via}-{outage}/{n}");
            let (content_type, body) = gsutil_multipart(&name, data);
            let base = if via == "direct" { &fake_base } else { &h.base };
            let url = format!("{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart");
            let answer = (http.post(url).header("content-type", content_type))
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 200, "{name}");
            let resource = body_json(answer).await;
            let (crc32c, md5) = digests(data);
            assert_eq!(
                (&resource["crc32c"], &resource["md5Hash"]),
                (&json!(crc32c), &json!(md5)),
                "{name}"
            );
        }
        if outage {
            fake.clear_faults();
            h.drained().await;
        }
        for (n, data) in payloads.iter().enumerate() {
            let name = format!("gsutil/{via}-{outage}/{n}");
            assert_eq!(stored(&fake, &name).as_deref(), Some(*data), "{name}");
        }
    }
    h.stopped().await;
}

/// How a tool frames an upload (issue 53, item 2).
#[derive(Debug, Clone, Copy)]
enum Framing {
    Media,
    Multipart,
    XmlPut,
    Resumable,
}

/// Writes `data` as `name` to `base` (the fake or the relay) in `framing`, with
/// `ifGenerationMatch=0` when `create_only`, no precondition otherwise: the status.
async fn write(
    http: &reqwest::Client,
    base: &str,
    framing: Framing,
    name: &str,
    data: &[u8],
    create_only: bool,
) -> u16 {
    let encoded = common::encode(name);
    let condition = if create_only {
        "&ifGenerationMatch=0"
    } else {
        ""
    };
    let upload = format!("{base}/upload/storage/v1/b/{BUCKET}/o");
    let request = match framing {
        Framing::Media => http
            .post(format!(
                "{upload}?uploadType=media&name={encoded}{condition}"
            ))
            .body(data.to_vec()),
        Framing::Multipart => http
            .post(format!("{upload}?uploadType=multipart{condition}"))
            .header("content-type", "multipart/related; boundary=b0undary")
            .body(common::multipart_body(&json!({ "name": name }), data)),
        Framing::XmlPut => {
            let put = http.put(format!("{base}/{BUCKET}/{encoded}"));
            let put = if create_only {
                put.header("x-goog-if-generation-match", "0")
            } else {
                put
            };
            put.body(data.to_vec())
        }
        Framing::Resumable => {
            let start = http
                .post(format!(
                    "{upload}?uploadType=resumable&name={encoded}{condition}"
                ))
                .send()
                .await
                .unwrap();
            // The bucket checks a precondition when the session opens, too.
            if start.status() != 200 {
                return start.status().as_u16();
            }
            let location = start.headers()["location"].to_str().unwrap().to_owned();
            http.put(location).body(data.to_vec())
        }
    };
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_write_without_a_precondition_overwrites_as_the_bucket_does() {
    // Found by review (issue 53): every write through the relay was
    // create-if-absent, so `rclone sync` of an edited file ended in 412 where the
    // bucket answers `Copied (replaced existing)`. The bucket is the oracle: the same
    // sequence of writes, straight to the fake and through the relay (healthy, and
    // spooled during an outage), gets the same statuses and leaves the same bytes.
    let (fake, fake_base) = real_fake().await;
    let h = common::passing_through(&fake_base).await;
    let http = reqwest::Client::new();
    let framings = [
        Framing::Media,
        Framing::Multipart,
        Framing::XmlPut,
        Framing::Resumable,
    ];
    // (bytes, create only, the bucket's status)
    let steps: [(&[u8], bool, u16); 4] = [
        (b"v1", false, 200),
        (b"v2, edited", false, 200),
        (b"v3, create only", true, 412),
        (b"v4", false, 200),
    ];
    for (outage, via) in [(false, "direct"), (false, "relay"), (true, "relay")] {
        if outage {
            fail_writes(&fake);
        }
        let base = if via == "direct" { &fake_base } else { &h.base };
        for framing in framings {
            let name = format!("edited/{via}-{outage}/{framing:?}");
            for (n, &(data, create_only, bucket_status)) in steps.iter().enumerate() {
                // While spooled, the relay cannot know the bucket has the name; the
                // create-only write is answered as the spool will apply it: 412
                // once the name is spooled with other bytes.
                let status = write(&http, base, framing, &name, data, create_only).await;
                assert_eq!(status, bucket_status, "{name}, step {n}");
            }
        }
        if outage {
            fake.clear_faults();
            h.drained().await;
        }
        for framing in framings {
            let name = format!("edited/{via}-{outage}/{framing:?}");
            assert_eq!(stored(&fake, &name).as_deref(), Some(&b"v4"[..]), "{name}");
        }
    }
    assert_eq!(h.spool.stats().dead_letter_files, 0, "nothing set aside");
    h.stopped().await;
}
