//! `moveTo`, as Cloud Storage documents `objects.move` (issue 41): a rename within
//! the bucket, in one step, with the source's and the destination's preconditions;
//! the destination is a new generation with the source's bytes and metadata, the
//! source is gone.

mod common;

use common::{Read as _, call, config, expect, manual_fake, send};
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// An XML `PUT` of `data` as `bkt/name` with a content type and metadata; its
/// generation.
async fn put(base: &str, name: &str, data: &'static str) -> i64 {
    let headers = [("content-type", "text/plain"), ("x-goog-meta-k", "v")];
    let put = send(base, Method::PUT, &format!("/bkt/{name}"), &headers, data).await;
    assert_eq!(put.status(), StatusCode::OK, "{}", put.text());
    put.header("x-goog-generation").unwrap().parse().unwrap()
}

async fn move_to(base: &str, source: &str, name: &str, query: &str) -> common::Raw {
    let path = format!("/storage/v1/b/bkt/o/{source}/moveTo/o/{name}?{query}");
    call(base, Method::POST, &path, Value::Null).await
}

async fn read(base: &str, name: &str) -> (StatusCode, String) {
    let got = send(base, Method::GET, &format!("/bkt/{name}"), &[], "").await;
    (got.status(), got.text())
}

#[tokio::test]
async fn a_move_renames_with_a_new_generation_and_the_same_bytes_and_metadata() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let source = put(&base, "a%2Fsrc", "moved bytes").await;
    let moved = move_to(&base, "a%2Fsrc", "b%2Fdst", "").await;
    let moved = expect(&moved, StatusCode::OK);
    assert_eq!(moved["name"], "b/dst");
    let generation: i64 = moved["generation"].as_str().unwrap().parse().unwrap();
    assert!(generation > source, "{generation} after {source}");
    assert_eq!(moved["metageneration"], "1");
    assert_eq!(moved["contentType"], "text/plain");
    assert_eq!(moved["metadata"], json!({ "k": "v" }));
    assert_eq!(read(&base, "a/src").await.0, StatusCode::NOT_FOUND);
    assert_eq!(
        read(&base, "b/dst").await,
        (StatusCode::OK, "moved bytes".into())
    );
    let stats = fake.stats();
    assert_eq!(stats.by_operation.get("storage.objects.move"), Some(&1));

    // Moving onto the same name, from a missing object, or with GET is refused.
    expect(
        &move_to(&base, "b%2Fdst", "b%2Fdst", "").await,
        StatusCode::BAD_REQUEST,
    );
    expect(
        &move_to(&base, "gone", "x", "").await,
        StatusCode::NOT_FOUND,
    );
    let get = call(
        &base,
        Method::GET,
        "/storage/v1/b/bkt/o/b%2Fdst/moveTo/o/x",
        Value::Null,
    )
    .await;
    expect(&get, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_move_checks_the_source_and_destination_preconditions_at_once() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let source = put(&base, "s", "source").await;
    let existing = put(&base, "d", "destination").await;
    for query in [
        format!("ifSourceGenerationMatch={}", source + 1),
        format!("ifSourceGenerationNotMatch={source}"),
        "ifGenerationMatch=0".to_string(),
        format!("ifGenerationNotMatch={existing}"),
        "ifSourceMetagenerationMatch=2".to_string(),
    ] {
        let refused = move_to(&base, "s", "d", &query).await;
        expect(&refused, StatusCode::PRECONDITION_FAILED);
        assert_eq!(
            read(&base, "s").await,
            (StatusCode::OK, "source".into()),
            "{query}"
        );
        assert_eq!(read(&base, "d").await.1, "destination", "{query}");
    }
    let query = format!("ifSourceGenerationMatch={source}&ifGenerationMatch={existing}");
    expect(&move_to(&base, "s", "d", &query).await, StatusCode::OK);
    assert_eq!(read(&base, "d").await.1, "source");
    assert_eq!(read(&base, "s").await.0, StatusCode::NOT_FOUND);

    // A held source is neither moved nor deleted.
    put(&base, "held", "held").await;
    let hold = json!({ "temporaryHold": true });
    call(&base, Method::PATCH, "/storage/v1/b/bkt/o/held", hold).await;
    expect(
        &move_to(&base, "held", "free", "").await,
        StatusCode::FORBIDDEN,
    );
    assert_eq!(read(&base, "held").await.1, "held");
    assert_eq!(read(&base, "free").await.0, StatusCode::NOT_FOUND);
}
