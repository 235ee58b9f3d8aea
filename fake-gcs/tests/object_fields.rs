//! Object fields as Cloud Storage keeps them (issue 41): `customTime` from an
//! upload's resource, no content type for a compose that gives none, the Cloud
//! KMS key an object is encrypted with.

mod common;

use common::{Read as _, call, config, expect, manual_fake, send, upload_described};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const BOUNDARY: &str = "b0undary";

#[tokio::test]
async fn a_multipart_upload_keeps_its_custom_time() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let resource = r#"{"name":"timed","customTime":"2026-01-02T03:04:05.000Z"}"#;
    let body = format!(
        "--{BOUNDARY}\r\ncontent-type: application/json\r\n\r\n{resource}\r\n\
         --{BOUNDARY}\r\ncontent-type: text/plain\r\n\r\nhello\r\n--{BOUNDARY}--\r\n"
    );
    let content_type = format!("multipart/related; boundary={BOUNDARY}");
    let path = "/upload/storage/v1/b/bkt/o?uploadType=multipart";
    let uploaded = send(
        &base,
        Method::POST,
        path,
        &[("content-type", &content_type)],
        body,
    )
    .await;
    let uploaded = expect(&uploaded, StatusCode::OK);
    assert_eq!(uploaded["customTime"], "2026-01-02T03:04:05.000Z");
    let got = call(&base, Method::GET, "/storage/v1/b/bkt/o/timed", Value::Null).await;
    assert_eq!(
        expect(&got, StatusCode::OK)["customTime"],
        "2026-01-02T03:04:05.000Z"
    );
    // A patch changes it; a compose's destination resource gives one too.
    let patch = json!({ "customTime": "2026-02-02T00:00:00.000Z" });
    let patched = call(&base, Method::PATCH, "/storage/v1/b/bkt/o/timed", patch).await;
    assert_eq!(
        expect(&patched, StatusCode::OK)["customTime"],
        "2026-02-02T00:00:00.000Z"
    );
}

#[tokio::test]
async fn a_compose_without_a_content_type_leaves_it_unset() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    for name in ["a", "b"] {
        let put = send(
            &base,
            Method::PUT,
            &format!("/bkt/{name}"),
            &[("content-type", "text/plain")],
            "x",
        )
        .await;
        assert_eq!(put.status(), StatusCode::OK);
    }
    let request = json!({ "sourceObjects": [{ "name": "a" }, { "name": "b" }] });
    let path = "/storage/v1/b/bkt/o/ab/compose";
    let composed = expect(
        &call(&base, Method::POST, path, request).await,
        StatusCode::OK,
    );
    assert_eq!(composed.get("contentType"), None, "{composed}");
    let got = call(&base, Method::GET, "/storage/v1/b/bkt/o/ab", Value::Null).await;
    assert_eq!(expect(&got, StatusCode::OK).get("contentType"), None);
    let typed = json!({
        "sourceObjects": [{ "name": "a" }],
        "destination": { "contentType": "text/csv" },
    });
    let path = "/storage/v1/b/bkt/o/typed/compose";
    let composed = expect(
        &call(&base, Method::POST, path, typed).await,
        StatusCode::OK,
    );
    assert_eq!(composed["contentType"], "text/csv");
    let read = send(&base, Method::GET, "/bkt/ab", &[], "").await;
    assert_eq!(
        read.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(read.text(), "xx");
}

const KEY: &str = "projects/p/locations/us/keyRings/r/cryptoKeys/k";

#[tokio::test]
async fn an_object_answers_the_kms_key_it_was_written_with_or_the_buckets_default() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let version = format!("{KEY}/cryptoKeyVersions/1");
    // The key as a query parameter, then as a resource field.
    let query = format!("&kmsKeyName={KEY}");
    let by_query = upload_described(&base, "bkt", &query, json!({"name": "q"})).await;
    assert_eq!(expect(&by_query, StatusCode::OK)["kmsKeyName"], *version);
    let by_field =
        upload_described(&base, "bkt", "", json!({"name": "f", "kmsKeyName": KEY})).await;
    assert_eq!(expect(&by_field, StatusCode::OK)["kmsKeyName"], *version);
    let got = call(&base, Method::GET, "/storage/v1/b/bkt/o/f", Value::Null).await;
    assert_eq!(expect(&got, StatusCode::OK)["kmsKeyName"], *version);
    // A metadata update (all fields replaced) keeps it: the service set it.
    let update = json!({ "contentType": "text/csv" });
    let updated = call(&base, Method::PUT, "/storage/v1/b/bkt/o/f", update).await;
    assert_eq!(expect(&updated, StatusCode::OK)["kmsKeyName"], *version);
    // A copy or rewrite takes the destination's key as destinationKmsKeyName.
    for verb in ["copyTo", "rewriteTo"] {
        let path =
            format!("/storage/v1/b/bkt/o/f/{verb}/b/bkt/o/{verb}?destinationKmsKeyName={KEY}");
        let copied = call(&base, Method::POST, &path, json!({})).await;
        let copied = expect(&copied, StatusCode::OK);
        let copied = copied.get("resource").unwrap_or(&copied);
        assert_eq!(copied["kmsKeyName"], *version, "{verb}");
    }
    // The XML API names it in a header.
    let header = [("x-goog-encryption-kms-key-name", KEY)];
    let put = send(&base, Method::PUT, "/bkt/xml", &header, "x").await;
    assert_eq!(put.status(), StatusCode::OK);
    let got = call(&base, Method::GET, "/storage/v1/b/bkt/o/xml", Value::Null).await;
    assert_eq!(expect(&got, StatusCode::OK)["kmsKeyName"], *version);
    // Without either, none; with the bucket's default key, that one.
    let plain = upload_described(&base, "bkt", "", json!({"name": "p"})).await;
    assert_eq!(expect(&plain, StatusCode::OK).get("kmsKeyName"), None);
    let default = json!({ "encryption": { "defaultKmsKeyName": KEY } });
    let patched = call(&base, Method::PATCH, "/storage/v1/b/bkt", default).await;
    expect(&patched, StatusCode::OK);
    let put = send(&base, Method::PUT, "/bkt/x", &[], "x").await;
    assert_eq!(put.status(), StatusCode::OK);
    let got = call(&base, Method::GET, "/storage/v1/b/bkt/o/x", Value::Null).await;
    assert_eq!(expect(&got, StatusCode::OK)["kmsKeyName"], *version);
}
