//! Composite objects: compose over the JSON API (bytes, component counts,
//! preconditions, Cloud Storage's non-MD5 ETags and hashes), and objects placed with
//! `FakeGcs::insert_object` from outside any runtime, read back by `object_store`.

mod common;

use std::num::NonZeroU32;
use std::sync::Arc;

use bytes::Bytes;
use common::{BUCKET, ManualClock, Raw, Read as _, config, gcs_store, manual_fake, send, serve};
use fake_gcs::wire::{Digests, ObjectAttributes, crc32c_base64};
use fake_gcs::{FakeGcs, ObjectRecord};
use http::{Method, StatusCode};
use object_store::ObjectStoreExt as _;
use object_store::path::Path;
use serde_json::json;

const JSON: (&str, &str) = ("content-type", "application/json");

fn compose_body(sources: &[&str]) -> String {
    let sources: Vec<_> = sources.iter().map(|name| json!({ "name": name })).collect();
    json!({
        "sourceObjects": sources,
        "destination": { "contentType": "text/plain", "metadata": { "k": "v" } },
    })
    .to_string()
}

/// `POST /storage/v1/b/bkt/o/{destination}/compose?{query}` of `sources`, with a
/// destination resource of `text/plain` and metadata `k: v`.
async fn compose(base: &str, destination: &str, query: &str, sources: &[&str]) -> Raw {
    let path = format!("/storage/v1/b/bkt/o/{destination}/compose?{query}");
    send(base, Method::POST, &path, &[JSON], compose_body(sources)).await
}

async fn put(base: &str, name: &str, body: &'static [u8]) {
    let put = send(base, Method::PUT, &format!("/bkt/{name}"), &[], body).await;
    assert_eq!(put.status(), StatusCode::OK, "{}", put.text());
}

/// Whether `etag` (quoted) is the form of an MD5: 32 hex digits.
fn looks_like_md5(etag: &str) -> bool {
    let bare = etag.trim_matches('"');
    bare.len() == 32 && bare.bytes().all(|b| b.is_ascii_hexdigit())
}

#[tokio::test]
async fn compose_concatenates_and_describes_a_composite_object() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    put(&base, "a", b"hello ").await;
    put(&base, "b", b"world").await;
    let composed = compose(&base, "ab", "", &["a", "b"]).await;
    assert_eq!(composed.status(), StatusCode::OK, "{}", composed.text());
    let resource = composed.json();
    assert_eq!(resource["componentCount"], 2);
    assert_eq!(resource.get("md5Hash"), None);
    assert_eq!(
        resource["crc32c"],
        crc32c_base64(crc32c::crc32c(b"hello world"))
    );
    assert_eq!(resource["size"], "11");
    assert_eq!(resource["metadata"]["k"], "v");

    // Composing a composite counts its components.
    let again = compose(&base, "aba", "", &["ab", "a"]).await;
    assert_eq!(again.json()["componentCount"], 3);

    let get = send(&base, Method::GET, "/bkt/ab", &[], "").await;
    assert_eq!(&get.body()[..], b"hello world");
    let etag = get.header("etag").unwrap();
    assert!(!looks_like_md5(etag), "{etag}");
    assert!(etag.starts_with("\"-"), "{etag}");
    let crc = crc32c_base64(crc32c::crc32c(b"hello world"));
    assert_eq!(
        get.header("x-goog-hash"),
        Some(format!("crc32c={crc}").as_str())
    );
    assert_eq!(get.header("x-goog-component-count"), Some("2"));
    assert_eq!(get.header("content-type"), Some("text/plain"));
    assert!(looks_like_md5(
        send(&base, Method::GET, "/bkt/a", &[], "")
            .await
            .header("etag")
            .unwrap()
    ));

    let record = fake.object(BUCKET, "ab").unwrap();
    assert_eq!(record.component_count, NonZeroU32::new(2));
    assert!(record.matches(b"hello world"));
    assert_eq!(fake.stats().objects_committed, 4);
}

#[tokio::test]
async fn a_listing_shows_each_object_s_own_etag() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    put(&base, "l/a", b"one").await;
    let composed = compose(&base, "l/b", "", &["l/a"]).await;
    assert_eq!(composed.status(), StatusCode::OK, "{}", composed.text());
    let store = gcs_store(&base);
    let prefix = Path::parse("l").unwrap();
    let listed = store.list_with_delimiter(Some(&prefix)).await.unwrap();
    let etags: Vec<_> = listed
        .objects
        .iter()
        .map(|o| o.e_tag.clone().unwrap())
        .collect();
    let head = send(&base, Method::HEAD, "/bkt/l/b", &[], "").await;
    assert_eq!(etags[1], head.header("etag").unwrap());
    assert!(
        looks_like_md5(&etags[0]) && !looks_like_md5(&etags[1]),
        "{etags:?}"
    );
}

#[tokio::test]
async fn compose_honours_preconditions_and_names_what_is_missing() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    put(&base, "a", b"one").await;
    put(&base, "dest", b"old").await;
    let refused = compose(&base, "dest", "ifGenerationMatch=0", &["a"]).await;
    assert_eq!(refused.status(), StatusCode::PRECONDITION_FAILED);
    assert_eq!(
        refused.json()["error"]["errors"][0]["reason"],
        "conditionNotMet"
    );
    assert_eq!(&fake.object_bytes(BUCKET, "dest").unwrap()[..], b"old");
    assert_eq!(fake.stats().precondition_failures, 1);

    let missing = compose(&base, "dest", "", &["a", "nope"]).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert!(missing.text().contains("bkt/nope"), "{}", missing.text());

    let live = fake.object(BUCKET, "dest").unwrap().generation;
    let matching = compose(&base, "dest", &format!("ifGenerationMatch={live}"), &["a"]).await;
    assert_eq!(matching.status(), StatusCode::OK, "{}", matching.text());
    assert_eq!(&fake.object_bytes(BUCKET, "dest").unwrap()[..], b"one");

    let stale = json!({ "sourceObjects": [{ "name": "a", "objectPreconditions": { "ifGenerationMatch": 1 } }] });
    let stale = send(
        &base,
        Method::POST,
        "/storage/v1/b/bkt/o/dest/compose",
        &[JSON],
        stale.to_string(),
    )
    .await;
    assert_eq!(stale.status(), StatusCode::PRECONDITION_FAILED);
}

#[tokio::test]
async fn compose_without_kept_bytes_is_501_and_names_why() {
    let (fake, _clock, base) = manual_fake(config(false)).await;
    put(&base, "a", b"one").await;
    let composed = compose(&base, "d", "", &["a"]).await;
    assert_eq!(composed.status(), StatusCode::NOT_IMPLEMENTED);
    assert!(
        composed.text().contains("--drop-bytes"),
        "{}",
        composed.text()
    );
    assert!(fake.object(BUCKET, "d").is_none());
}

/// A fake that keeps no bytes for requests, with two objects placed before any
/// runtime exists: `pre/plain` and the composite `pre/composite`.
fn fake_with_placed_objects() -> (FakeGcs, ObjectRecord, ObjectRecord) {
    let fake = FakeGcs::new(config(false), Arc::new(ManualClock::default())).unwrap();
    let none = ObjectAttributes::default();
    let plain = fake.insert_object(
        BUCKET,
        "pre/plain",
        Bytes::from_static(b"before"),
        None,
        none,
        false,
    );
    let attributes = ObjectAttributes {
        cache_control: Some("no-cache".into()),
        ..Default::default()
    };
    let bytes = Bytes::from_static(b"parts");
    let composite = fake.insert_object(
        BUCKET,
        "pre/composite",
        bytes,
        Some("text/plain"),
        attributes,
        true,
    );
    (fake, plain, composite)
}

#[test]
fn inserted_objects_are_placed_outside_any_runtime_without_a_request() {
    let (fake, plain, composite) = fake_with_placed_objects();
    assert!(composite.generation > plain.generation);
    assert!(composite.is_composite() && !plain.is_composite());
    assert_eq!(
        composite.attributes().cache_control.as_deref(),
        Some("no-cache")
    );
    assert_eq!(composite.content_type, "text/plain");
    assert_eq!(fake.object(BUCKET, "pre/composite"), Some(composite));
    assert_eq!(
        &fake.object_bytes(BUCKET, "pre/plain").unwrap()[..],
        b"before"
    );
    let stats = fake.stats();
    assert_eq!(
        (
            stats.objects_inserted,
            stats.objects_committed,
            stats.requests
        ),
        (2, 0, 0)
    );
    // A bucket that does not exist yet is made.
    let elsewhere = fake.insert_object(
        "other",
        "x",
        Bytes::new(),
        None,
        ObjectAttributes::default(),
        false,
    );
    assert_eq!(fake.objects("other"), [elsewhere]);
}

#[test]
fn inserted_objects_keep_their_bytes_for_a_client_to_read() {
    let (fake, plain, _composite) = fake_with_placed_objects();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let base = serve(&fake).await;
        let store = gcs_store(&base);
        let got = store.get(&Path::parse("pre/plain").unwrap()).await.unwrap();
        let md5_etag = format!("\"{}\"", plain.md5_hex());
        assert_eq!(got.meta.e_tag, Some(md5_etag));
        assert_eq!(&got.bytes().await.unwrap()[..], b"before");
        let got = store
            .get(&Path::parse("pre/composite").unwrap())
            .await
            .unwrap();
        let etag = got.meta.e_tag.clone().unwrap();
        assert!(!looks_like_md5(&etag), "{etag}");
        assert_eq!(&got.bytes().await.unwrap()[..], b"parts");
        // An object written by a request keeps no bytes here.
        put(&base, "written", b"x").await;
        let read = send(&base, Method::GET, "/bkt/written", &[], "").await;
        assert_eq!(read.status(), StatusCode::NOT_IMPLEMENTED);
        // The inserted objects can be composed.
        let composed = compose(&base, "both", "", &["pre/plain", "pre/composite"]).await;
        assert_eq!(composed.status(), StatusCode::OK, "{}", composed.text());
        let both = fake.object_bytes(BUCKET, "both").unwrap();
        assert_eq!(&both[..], b"beforeparts");
        let crc = crc32c_base64(Digests::of(b"beforeparts").crc32c);
        assert_eq!(composed.json()["crc32c"], crc);
    });
}
