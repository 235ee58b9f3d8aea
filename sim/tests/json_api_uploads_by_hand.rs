//! Requests built by hand on a real port: the JSON API's multipart (chunked),
//! media and resumable uploads, object resources, listing, errors, and the XML API's
//! error bodies, as real clients see them.

mod common;

use bytes::Bytes;
use common::{BUCKET, Raw, config, real_fake, send_real};
use fake_gcs::FaultPlan;
use fake_gcs::wire::{Digests, crc32c_base64, md5_base64};
use http::{Method, StatusCode};

const B: &str = "fake-boundary-7f3a";

fn multipart(metadata: &serde_json::Value, media: &[u8]) -> Vec<Bytes> {
    // Several chunks, as a streaming client sends them.
    vec![
        Bytes::from(format!(
            "--{B}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{metadata}\r\n"
        )),
        Bytes::from(format!("--{B}\r\nContent-Type: text/plain\r\n\r\n")),
        Bytes::copy_from_slice(&media[..media.len() / 2]),
        Bytes::copy_from_slice(&media[media.len() / 2..]),
        Bytes::from(format!("\r\n--{B}--\r\n")),
    ]
}

async fn upload_multipart(
    base: &str,
    query: &str,
    metadata: serde_json::Value,
    media: &[u8],
) -> Raw {
    let content_type = format!("multipart/related; boundary={B}");
    send_real(
        base,
        Method::POST,
        &format!("/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart{query}"),
        &[("content-type", &content_type)],
        multipart(&metadata, media),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_chunked_multipart_upload_returns_the_object_resource_then_412() {
    let (fake, base) = real_fake(config(true, FaultPlan::none())).await;
    let metadata = serde_json::json!({ "name": "m/hello.txt", "crc32c": "mnG7TA==" });
    let raw = upload_multipart(&base, "&ifGenerationMatch=0", metadata.clone(), b"hello").await;
    assert_eq!(raw.status, StatusCode::OK, "{}", raw.text());
    let object = raw.json();
    assert_eq!(object["kind"], "storage#object");
    assert_eq!(object["name"], "m/hello.txt");
    assert_eq!(object["bucket"], BUCKET);
    assert_eq!(object["size"], "5");
    assert_eq!(object["crc32c"], "mnG7TA==");
    assert_eq!(object["md5Hash"], "XUFAKrxLKna5cZ2REBfFkg==");
    assert_eq!(object["contentType"], "text/plain");
    assert_eq!(object["metageneration"], "1");
    let generation: i64 = object["generation"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        generation,
        fake.object(BUCKET, "m/hello.txt").unwrap().generation
    );
    assert!(object["timeCreated"].as_str().unwrap().ends_with('Z'));
    assert!(object["mediaLink"].as_str().unwrap().starts_with(&format!(
        "{base}/download/storage/v1/b/{BUCKET}/o/m%2Fhello.txt"
    )));

    let again = upload_multipart(&base, "&ifGenerationMatch=0", metadata, b"hello").await;
    assert_eq!(again.status, StatusCode::PRECONDITION_FAILED);
    let error = again.json();
    assert_eq!(error["error"]["code"], 412);
    assert_eq!(
        error["error"]["message"],
        "At least one of the pre-conditions you specified did not hold."
    );
    assert_eq!(error["error"]["errors"][0]["reason"], "conditionNotMet");
    assert_eq!(error["error"]["errors"][0]["domain"], "global");
    assert_eq!(fake.object_bytes(BUCKET, "m/hello.txt").unwrap(), "hello");
}

#[tokio::test]
async fn declared_digests_that_do_not_match_are_refused_with_400() {
    let (fake, base) = real_fake(config(true, FaultPlan::none())).await;
    let metadata = serde_json::json!({ "name": "bad-crc", "crc32c": "AAAAAA==" });
    let raw = upload_multipart(&base, "", metadata, b"hello").await;
    assert_eq!(raw.status, StatusCode::BAD_REQUEST);
    assert!(
        raw.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("CRC32C"),
        "{}",
        raw.text()
    );

    let media = |hash: &'static str| {
        let base = base.clone();
        async move {
            send_real(
                &base,
                Method::POST,
                &format!("/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=media%2Fx"),
                &[
                    ("x-goog-hash", hash),
                    ("content-type", "application/octet-stream"),
                ],
                vec![Bytes::from_static(b"hello")],
            )
            .await
            .unwrap()
        }
    };
    let wrong = media("crc32c=mnG7TA==,md5=AAAAAAAAAAAAAAAAAAAAAA==").await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST, "{}", wrong.text());
    assert!(wrong.text().contains("MD5"), "{}", wrong.text());
    assert_eq!(fake.object_count(BUCKET), 0);
    let right = media("crc32c=mnG7TA==,md5=XUFAKrxLKna5cZ2REBfFkg==").await;
    assert_eq!(right.status, StatusCode::OK, "{}", right.text());
    assert_eq!(right.json()["name"], "media/x");

    let xml = send_real(
        &base,
        Method::PUT,
        &format!("/{BUCKET}/xml%2Fx"),
        &[("x-goog-hash", "crc32c=AAAAAA==")],
        vec![Bytes::from_static(b"hello")],
    )
    .await
    .unwrap();
    assert_eq!(xml.status, StatusCode::BAD_REQUEST);
    assert!(
        xml.text().contains("<Code>BadDigest</Code>"),
        "{}",
        xml.text()
    );
    assert_eq!(fake.object_count(BUCKET), 1);
}

#[tokio::test]
async fn a_resumable_upload_takes_chunks_and_answers_its_retries() {
    let (fake, base) = real_fake(config(true, FaultPlan::none())).await;
    let start = send_real(
        &base,
        Method::POST,
        &format!("/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&ifGenerationMatch=0"),
        &[
            ("content-type", "application/json; charset=UTF-8"),
            ("x-upload-content-type", "text/plain"),
        ],
        vec![Bytes::from_static(br#"{"name": "r/hello world.txt"}"#)],
    )
    .await
    .unwrap();
    assert_eq!(start.status, StatusCode::OK, "{}", start.text());
    let location = start.header("location").unwrap().to_string();
    let path = location.strip_prefix(&base).unwrap().to_string();
    let put = |range: &'static str, body: &'static [u8]| {
        let (base, path) = (base.clone(), path.clone());
        async move {
            send_real(
                &base,
                Method::PUT,
                &path,
                &[("content-range", range)],
                vec![Bytes::from_static(body)],
            )
            .await
            .unwrap()
        }
    };

    let first = put("bytes 0-5/*", b"hello ").await;
    assert_eq!(first.status.as_u16(), 308, "{}", first.text());
    assert_eq!(first.header("range"), Some("bytes=0-5"));
    let status = put("bytes */*", b"").await;
    assert_eq!(
        (status.status.as_u16(), status.header("range")),
        (308, Some("bytes=0-5"))
    );
    // A resent chunk overlapping what arrived is trimmed, not duplicated.
    let overlap = put("bytes 3-5/*", b"lo ").await;
    assert_eq!(overlap.header("range"), Some("bytes=0-5"));
    assert!(fake.object(BUCKET, "r/hello world.txt").is_none());

    let last = put("bytes 6-10/11", b"world").await;
    assert_eq!(last.status, StatusCode::OK, "{}", last.text());
    let object = last.json();
    let digests = Digests::of(b"hello world");
    assert_eq!(object["size"], "11");
    assert_eq!(object["crc32c"], crc32c_base64(digests.crc32c));
    assert_eq!(object["md5Hash"], md5_base64(&digests.md5));
    assert_eq!(object["contentType"], "text/plain");
    assert_eq!(
        fake.object_bytes(BUCKET, "r/hello world.txt").unwrap(),
        "hello world"
    );

    // The client retries the final request (its answer was lost): same object.
    let retry = put("bytes */11", b"").await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.json()["generation"], object["generation"]);
    assert_eq!(fake.stats().objects_committed, 1);

    // The Node client's single-request form: `bytes 0-*/*`, the body ends the object.
    let stream = send_real(
        &base,
        Method::POST,
        &format!("/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=r%2Fstream"),
        &[],
        vec![],
    )
    .await
    .unwrap();
    let stream_path = stream
        .header("location")
        .unwrap()
        .strip_prefix(&base)
        .unwrap()
        .to_string();
    let whole = send_real(
        &base,
        Method::PUT,
        &stream_path,
        &[("content-range", "bytes 0-*/*")],
        vec![Bytes::from_static(b"hel"), Bytes::from_static(b"lo")],
    )
    .await
    .unwrap();
    assert_eq!(whole.status, StatusCode::OK, "{}", whole.text());
    assert_eq!(whole.json()["crc32c"], "mnG7TA==");

    // A second session for the same name with ifGenerationMatch=0 is refused at once.
    let second = send_real(
        &base,
        Method::POST,
        &format!(
            "/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&ifGenerationMatch=0&name=r%2Fhello%20world.txt"
        ),
        &[],
        vec![],
    )
    .await
    .unwrap();
    assert_eq!(second.status, StatusCode::PRECONDITION_FAILED);
}

#[tokio::test]
async fn objects_read_back_as_metadata_media_ranges_and_pages() {
    let (_fake, base) = real_fake(config(true, FaultPlan::none())).await;
    for name in ["p/a", "p/b", "p/c", "p/d/1", "p/d/2", "q"] {
        let raw = send_real(
            &base,
            Method::POST,
            &format!("/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={name}"),
            &[],
            vec![Bytes::from(format!("data of {name}"))],
        )
        .await
        .unwrap();
        assert_eq!(raw.status, StatusCode::OK);
    }
    let get = |path: String, headers: &'static [(&'static str, &'static str)]| {
        let base = base.clone();
        async move {
            send_real(&base, Method::GET, &path, headers, vec![])
                .await
                .unwrap()
        }
    };

    let meta = get(format!("/storage/v1/b/{BUCKET}/o/p%2Fa"), &[]).await;
    assert_eq!(meta.json()["size"], "11");
    let media = get(format!("/storage/v1/b/{BUCKET}/o/p%2Fa?alt=media"), &[]).await;
    assert_eq!(media.body, "data of p/a");
    let digests = Digests::of(b"data of p/a");
    assert_eq!(
        media.header("x-goog-hash"),
        Some(
            format!(
                "crc32c={},md5={}",
                crc32c_base64(digests.crc32c),
                md5_base64(&digests.md5)
            )
            .as_str()
        )
    );
    assert!(media.header("x-goog-generation").is_some());
    let download = get(
        format!("/download/storage/v1/b/{BUCKET}/o/p%2Fa?alt=media"),
        &[("range", "bytes=5-")],
    )
    .await;
    assert_eq!(download.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(download.body, "of p/a");
    assert_eq!(download.header("content-range"), Some("bytes 5-10/11"));

    // Pages of two under p/, folding p/d/ into a prefix.
    let mut names = Vec::new();
    let mut prefixes = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut path = format!("/storage/v1/b/{BUCKET}/o?prefix=p%2F&delimiter=%2F&maxResults=2");
        if let Some(t) = &token {
            path.push_str(&format!("&pageToken={t}"));
        }
        let page = get(path, &[]).await.json();
        pages += 1;
        for item in page["items"].as_array().into_iter().flatten() {
            names.push(item["name"].as_str().unwrap().to_string());
        }
        for p in page["prefixes"].as_array().into_iter().flatten() {
            prefixes.push(p.as_str().unwrap().to_string());
        }
        match page["nextPageToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(names, ["p/a", "p/b", "p/c"]);
    assert_eq!(prefixes, ["p/d/"]);
    assert_eq!(pages, 2);

    let delete = send_real(
        &base,
        Method::DELETE,
        &format!("/storage/v1/b/{BUCKET}/o/q"),
        &[],
        vec![],
    )
    .await
    .unwrap();
    assert_eq!(delete.status, StatusCode::NO_CONTENT);
    let gone = get(format!("/storage/v1/b/{BUCKET}/o/q"), &[]).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        gone.json()["error"]["message"],
        format!("No such object: {BUCKET}/q")
    );
}

#[tokio::test]
async fn unknown_routes_buckets_and_objects_get_404_with_proper_bodies() {
    let (_fake, base) = real_fake(config(false, FaultPlan::none())).await;
    let get = |path: &'static str| {
        let base = base.clone();
        async move {
            send_real(&base, Method::GET, path, &[], vec![])
                .await
                .unwrap()
        }
    };
    let bucket = get("/storage/v1/b/bkt").await;
    assert_eq!(bucket.status, StatusCode::OK);
    assert_eq!(bucket.json()["kind"], "storage#bucket");
    let no_bucket = get("/storage/v1/b/nope/o").await;
    assert_eq!(no_bucket.status, StatusCode::NOT_FOUND);
    assert_eq!(no_bucket.json()["error"]["code"], 404);
    let route = get("/storage/v2/whatever").await;
    assert_eq!(route.status, StatusCode::NOT_FOUND);
    assert!(route.text().contains("<Code>NoSuchKey</Code>") || route.text().contains("<Error>"));
    let json_route = send_real(&base, Method::PATCH, "/storage/v1/b/bkt/o/x", &[], vec![])
        .await
        .unwrap();
    assert_eq!(json_route.status, StatusCode::NOT_FOUND);
    assert_eq!(json_route.json()["error"]["code"], 404);
    let xml = get("/bkt/missing").await;
    assert_eq!(xml.status, StatusCode::NOT_FOUND);
    assert!(
        xml.text().contains("<Code>NoSuchKey</Code>"),
        "{}",
        xml.text()
    );
}

#[tokio::test]
async fn a_digest_only_fake_serves_metadata_but_says_why_it_cannot_download() {
    let (_fake, base) = real_fake(config(false, FaultPlan::none())).await;
    let put = send_real(
        &base,
        Method::PUT,
        "/bkt/d",
        &[("x-goog-if-generation-match", "0")],
        vec![Bytes::from_static(b"x")],
    )
    .await
    .unwrap();
    assert_eq!(put.status, StatusCode::OK);
    assert!(put.header("etag").unwrap().starts_with('"'));
    let again = send_real(
        &base,
        Method::PUT,
        "/bkt/d",
        &[("x-goog-if-generation-match", "0")],
        vec![Bytes::from_static(b"x")],
    )
    .await
    .unwrap();
    assert_eq!(again.status, StatusCode::PRECONDITION_FAILED);
    assert!(
        again.text().contains("<Code>PreconditionFailed</Code>"),
        "{}",
        again.text()
    );
    let head = send_real(&base, Method::HEAD, "/bkt/d", &[], vec![])
        .await
        .unwrap();
    assert_eq!(
        (head.status, head.header("content-length")),
        (StatusCode::OK, Some("1"))
    );
    let media = send_real(
        &base,
        Method::GET,
        "/storage/v1/b/bkt/o/d?alt=media",
        &[],
        vec![],
    )
    .await
    .unwrap();
    assert_eq!(media.status, StatusCode::NOT_IMPLEMENTED);
    assert!(media.text().contains("keep-bytes"), "{}", media.text());
}
