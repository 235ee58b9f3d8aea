//! Object versioning, as Cloud Storage documents it (issue 41): in a bucket with
//! `versioning.enabled`, a replaced or deleted live object stays as a noncurrent
//! version (its generation, a `timeDeleted`), read, listed, copied, composed and
//! deleted by generation; a bucket with versions left is not empty. Without
//! versioning a replaced object is gone.

mod common;

use std::time::Duration;

use common::{Raw, Read as _, call, config, expect, manual_fake, send};
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// Creates bucket `name`, with versioning on when `versioning`.
async fn bucket(base: &str, name: &str, versioning: bool) {
    let body = json!({ "name": name, "versioning": { "enabled": versioning } });
    let made = call(base, Method::POST, "/storage/v1/b?project=p", body).await;
    expect(&made, StatusCode::OK);
}

/// A media upload of `data` as `bucket/name`; its generation.
async fn upload(base: &str, bucket: &str, name: &str, data: &'static str) -> String {
    let path = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}");
    let written = send(base, Method::POST, &path, &[], data).await;
    let resource = expect(&written, StatusCode::OK);
    resource["generation"].as_str().unwrap().to_string()
}

async fn get(base: &str, path: &str) -> Raw {
    call(base, Method::GET, path, Value::Null).await
}

/// Every item of `GET /storage/v1/b/{bucket}/o?{query}`, following page tokens,
/// as `name#generation`; and how many pages it took.
async fn list_all(base: &str, bucket: &str, query: &str) -> (Vec<String>, usize) {
    let (mut items, mut pages, mut token) = (Vec::new(), 0, None::<String>);
    loop {
        let page_token = token.map(|t| format!("&pageToken={t}")).unwrap_or_default();
        let path = format!("/storage/v1/b/{bucket}/o?{query}{page_token}");
        let page = expect(&get(base, &path).await, StatusCode::OK);
        pages += 1;
        for item in page["items"].as_array().into_iter().flatten() {
            items.push(format!(
                "{}#{}",
                item["name"].as_str().unwrap(),
                item["generation"].as_str().unwrap()
            ));
        }
        match page["nextPageToken"].as_str() {
            Some(next) => token = Some(next.to_string()),
            None => return (items, pages),
        }
    }
}

#[tokio::test]
async fn a_replaced_or_deleted_object_stays_as_a_noncurrent_version() {
    let (_fake, clock, base) = manual_fake(config(true)).await;
    bucket(&base, "ver", true).await;
    let first = upload(&base, "ver", "o", "one").await;
    clock.advance(Duration::from_secs(1));
    let second = upload(&base, "ver", "o", "two").await;
    assert!(second > first);

    let old = get(&base, &format!("/storage/v1/b/ver/o/o?generation={first}")).await;
    let old = expect(&old, StatusCode::OK);
    assert_eq!(old["generation"], first.as_str());
    assert_eq!(old["timeDeleted"], "2026-10-08T11:00:01.000Z");
    let bytes = get(
        &base,
        &format!("/storage/v1/b/ver/o/o?generation={first}&alt=media"),
    )
    .await;
    assert_eq!(
        (bytes.status(), bytes.text()),
        (StatusCode::OK, "one".into())
    );
    let xml = send(
        &base,
        Method::GET,
        &format!("/ver/o?generation={first}"),
        &[],
        "",
    )
    .await;
    assert_eq!(xml.text(), "one");
    let live = expect(&get(&base, "/storage/v1/b/ver/o/o").await, StatusCode::OK);
    assert_eq!(
        (&live["generation"], live.get("timeDeleted")),
        (&json!(second), None)
    );
    let absent = get(&base, "/storage/v1/b/ver/o/o?generation=12345").await;
    expect(&absent, StatusCode::NOT_FOUND);

    let versions = list_all(&base, "ver", "versions=true").await.0;
    assert_eq!(versions, [format!("o#{first}"), format!("o#{second}")]);
    assert_eq!(list_all(&base, "ver", "").await.0, [format!("o#{second}")]);

    // A delete that names no generation makes the live version noncurrent.
    clock.advance(Duration::from_secs(1));
    let deleted = call(&base, Method::DELETE, "/storage/v1/b/ver/o/o", Value::Null).await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    expect(
        &get(&base, "/storage/v1/b/ver/o/o").await,
        StatusCode::NOT_FOUND,
    );
    let kept = get(&base, &format!("/storage/v1/b/ver/o/o?generation={second}")).await;
    assert_eq!(
        expect(&kept, StatusCode::OK)["timeDeleted"],
        "2026-10-08T11:00:02.000Z"
    );
    let listed = get(&base, "/storage/v1/b/ver/o?versions=true").await;
    let listed = expect(&listed, StatusCode::OK);
    let deleted_at: Vec<_> = (listed["items"].as_array().unwrap().iter())
        .map(|i| i["timeDeleted"].as_str().unwrap())
        .collect();
    assert_eq!(
        deleted_at,
        ["2026-10-08T11:00:01.000Z", "2026-10-08T11:00:02.000Z"]
    );
    assert_eq!(list_all(&base, "ver", "").await.0, Vec::<String>::new());

    // A noncurrent version's ACL and metadata change by its generation.
    let acl = format!("/storage/v1/b/ver/o/o/acl?generation={second}");
    let listed = expect(&get(&base, &acl).await, StatusCode::OK);
    assert_eq!(listed["kind"], "storage#objectAccessControls");
    let patch = format!("/storage/v1/b/ver/o/o?generation={second}");
    let patched = call(
        &base,
        Method::PATCH,
        &patch,
        json!({ "metadata": { "k": "v" } }),
    )
    .await;
    let patched = expect(&patched, StatusCode::OK);
    assert_eq!(
        (&patched["metadata"]["k"], &patched["metageneration"]),
        (&json!("v"), &json!("2"))
    );
    assert_eq!(patched["timeDeleted"], "2026-10-08T11:00:02.000Z");
}

#[tokio::test]
async fn a_listing_of_versions_pages_by_name_then_generation() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    bucket(&base, "ver", true).await;
    let mut expected = Vec::new();
    for (name, data) in [
        ("b", "1"),
        ("a", "1"),
        ("b", "2"),
        ("a", "2"),
        ("a", "3"),
        ("c/d", "1"),
    ] {
        expected.push((name, upload(&base, "ver", name, data).await));
    }
    call(
        &base,
        Method::DELETE,
        "/storage/v1/b/ver/o/c%2Fd",
        Value::Null,
    )
    .await;
    expected.sort();
    let expected: Vec<_> = expected.iter().map(|(n, g)| format!("{n}#{g}")).collect();
    for max in 1..=7 {
        let (items, pages) =
            list_all(&base, "ver", &format!("versions=true&maxResults={max}")).await;
        assert_eq!(items, expected, "maxResults={max}");
        assert_eq!(
            pages,
            expected.len().div_ceil(max).max(1),
            "maxResults={max}"
        );
    }
    // Offsets and prefixes select names; every version of a name selected is listed.
    let (offset, _) = list_all(&base, "ver", "versions=true&startOffset=b&maxResults=1").await;
    assert_eq!(offset, expected[3..]);
    let (prefixed, _) = list_all(&base, "ver", "versions=true&prefix=c/").await;
    assert_eq!(prefixed, expected[5..]);
    let folded = get(&base, "/storage/v1/b/ver/o?versions=true&delimiter=/").await;
    assert_eq!(expect(&folded, StatusCode::OK)["prefixes"], json!(["c/"]));
    let refused = get(&base, "/storage/v1/b/ver/o?versions=maybe").await;
    expect(&refused, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_delete_by_generation_deletes_that_version_and_a_bucket_needs_none_left() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    bucket(&base, "ver", true).await;
    let one = upload(&base, "ver", "o", "one").await;
    let two = upload(&base, "ver", "o", "two").await;
    let three = upload(&base, "ver", "o", "three").await;
    let delete = |g: &str| format!("/storage/v1/b/ver/o/o?generation={g}");
    let gone = call(&base, Method::DELETE, &delete(&two), Value::Null).await;
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    let versions = list_all(&base, "ver", "versions=true").await.0;
    assert_eq!(versions, [format!("o#{one}"), format!("o#{three}")]);
    let again = call(&base, Method::DELETE, &delete(&two), Value::Null).await;
    expect(&again, StatusCode::NOT_FOUND);
    let stale = format!("{}&ifGenerationMatch={three}", delete(&one));
    let stale = call(&base, Method::DELETE, &stale, Value::Null).await;
    expect(&stale, StatusCode::PRECONDITION_FAILED);

    // Naming the live generation deletes it for good: no noncurrent version is left.
    let live = call(&base, Method::DELETE, &delete(&three), Value::Null).await;
    assert_eq!(live.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        list_all(&base, "ver", "versions=true").await.0,
        [format!("o#{one}")]
    );

    let full = call(&base, Method::DELETE, "/storage/v1/b/ver", Value::Null).await;
    expect(&full, StatusCode::CONFLICT);
    call(&base, Method::DELETE, &delete(&one), Value::Null).await;
    let empty = call(&base, Method::DELETE, "/storage/v1/b/ver", Value::Null).await;
    assert_eq!(empty.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn without_versioning_a_replaced_object_is_gone() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    bucket(&base, "plain", false).await;
    let first = upload(&base, "plain", "o", "one").await;
    let second = upload(&base, "plain", "o", "two").await;
    let old = get(
        &base,
        &format!("/storage/v1/b/plain/o/o?generation={first}"),
    )
    .await;
    expect(&old, StatusCode::NOT_FOUND);
    let versions = list_all(&base, "plain", "versions=true").await.0;
    assert_eq!(versions, [format!("o#{second}")]);
    call(
        &base,
        Method::DELETE,
        "/storage/v1/b/plain/o/o",
        Value::Null,
    )
    .await;
    assert_eq!(
        list_all(&base, "plain", "versions=true").await.0,
        Vec::<String>::new()
    );

    // Versions kept while versioning was on stay when it is turned off.
    let on = json!({ "versioning": { "enabled": true } });
    expect(
        &call(&base, Method::PATCH, "/storage/v1/b/plain", on).await,
        StatusCode::OK,
    );
    let kept = upload(&base, "plain", "k", "kept").await;
    upload(&base, "plain", "k", "live").await;
    let off = json!({ "versioning": { "enabled": false } });
    expect(
        &call(&base, Method::PATCH, "/storage/v1/b/plain", off).await,
        StatusCode::OK,
    );
    let latest = upload(&base, "plain", "k", "latest").await;
    let versions = list_all(&base, "plain", "versions=true").await.0;
    assert_eq!(versions, [format!("k#{kept}"), format!("k#{latest}")]);
}

#[tokio::test]
async fn a_noncurrent_version_is_a_source_of_copies_rewrites_and_composes() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    bucket(&base, "ver", true).await;
    let first = upload(&base, "ver", "o", "one").await;
    upload(&base, "ver", "o", "two").await;
    for (verb, copy) in [("copyTo", "c"), ("rewriteTo", "r")] {
        let path = format!("/storage/v1/b/ver/o/o/{verb}/b/ver/o/{copy}?sourceGeneration={first}");
        expect(
            &call(&base, Method::POST, &path, Value::Null).await,
            StatusCode::OK,
        );
        let read = send(&base, Method::GET, &format!("/ver/{copy}"), &[], "").await;
        assert_eq!(read.text(), "one", "{verb}");
    }
    let source = [
        ("x-goog-copy-source", "ver/o"),
        ("x-goog-copy-source-generation", first.as_str()),
    ];
    let xml = send(&base, Method::PUT, "/ver/x", &source, "").await;
    assert_eq!(xml.status(), StatusCode::OK, "{}", xml.text());
    assert_eq!(
        send(&base, Method::GET, "/ver/x", &[], "").await.text(),
        "one"
    );
    let missing = "/storage/v1/b/ver/o/o/copyTo/b/ver/o/m?sourceGeneration=7";
    expect(
        &call(&base, Method::POST, missing, Value::Null).await,
        StatusCode::NOT_FOUND,
    );
    let compose = json!({ "sourceObjects": [
        { "name": "o", "generation": first },
        { "name": "o" },
    ] });
    let composed = call(
        &base,
        Method::POST,
        "/storage/v1/b/ver/o/both/compose",
        compose,
    )
    .await;
    expect(&composed, StatusCode::OK);
    let read = send(&base, Method::GET, "/ver/both", &[], "").await;
    assert_eq!(read.text(), "onetwo");
}
