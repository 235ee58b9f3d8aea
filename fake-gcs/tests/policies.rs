//! What Cloud Storage enforces and computes, as the fake does it (issue 41): holds
//! and retention policies that refuse deletes and overwrites, a bucket's
//! `defaultEventBasedHold`, `retentionExpirationTime`; object retention; legacy
//! ACLs refused in a bucket with uniform bucket-level access.

mod common;

use std::time::Duration;

use common::{Raw, Read as _, call, config, expect, manual_fake, send, upload_described};
use http::{Method, StatusCode};
use object_store::ObjectStoreExt as _;
use serde_json::{Value, json};

/// A media upload of `data` as `bucket/name`.
async fn upload(base: &str, bucket: &str, name: &str, data: &'static str) -> Raw {
    let path = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}");
    send(base, Method::POST, &path, &[], data).await
}

fn message(response: &Raw) -> String {
    response.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn holds_refuse_deletes_and_overwrites_until_released() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    // A bucket whose new objects are held until an event releases them.
    let made = call(
        &base,
        Method::POST,
        "/storage/v1/b?project=p",
        json!({ "name": "held", "defaultEventBasedHold": true }),
    )
    .await;
    assert_eq!(expect(&made, StatusCode::OK)["defaultEventBasedHold"], true);
    let written = upload(&base, "held", "e", "event").await;
    assert_eq!(expect(&written, StatusCode::OK)["eventBasedHold"], true);
    let got = call(&base, Method::GET, "/storage/v1/b/held/o/e", Value::Null).await;
    assert_eq!(expect(&got, StatusCode::OK)["eventBasedHold"], true);
    let event = "Object 'held/e' is under active Event-Based hold and cannot be deleted, \
                 overwritten or archived until hold is removed.";
    let refused = call(&base, Method::DELETE, "/storage/v1/b/held/o/e", Value::Null).await;
    expect(&refused, StatusCode::FORBIDDEN);
    assert_eq!(message(&refused), event);
    let overwrite = upload(&base, "held", "e", "other").await;
    assert_eq!(overwrite.status(), StatusCode::FORBIDDEN);
    assert_eq!(message(&overwrite), event);
    let xml = send(&base, Method::DELETE, "/held/e", &[], "").await;
    assert_eq!(xml.status(), StatusCode::FORBIDDEN);
    let released = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/held/o/e",
        json!({ "eventBasedHold": false }),
    )
    .await;
    assert_eq!(expect(&released, StatusCode::OK)["eventBasedHold"], false);
    let deleted = call(&base, Method::DELETE, "/storage/v1/b/held/o/e", Value::Null).await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);

    // A temporary hold, set by a patch, in a bucket without defaults.
    let plain = upload(&base, "bkt", "t", "temporary").await;
    assert_eq!(expect(&plain, StatusCode::OK).get("eventBasedHold"), None);
    let held = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/bkt/o/t",
        json!({ "temporaryHold": true }),
    )
    .await;
    expect(&held, StatusCode::OK);
    let refused = call(&base, Method::DELETE, "/storage/v1/b/bkt/o/t", Value::Null).await;
    expect(&refused, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&refused),
        "Object 'bkt/t' is under active Temporary hold and cannot be deleted, \
         overwritten or archived until hold is removed."
    );
    let xml_put = send(&base, Method::PUT, "/bkt/t", &[], "again").await;
    assert_eq!(xml_put.status(), StatusCode::FORBIDDEN);
    let kept = send(&base, Method::GET, "/bkt/t", &[], "").await;
    assert_eq!(kept.text(), "temporary");
    call(
        &base,
        Method::PATCH,
        "/storage/v1/b/bkt/o/t",
        json!({ "temporaryHold": false }),
    )
    .await;
    let deleted = call(&base, Method::DELETE, "/storage/v1/b/bkt/o/t", Value::Null).await;
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_retention_policy_sets_an_expiration_and_refuses_early_deletes() {
    let (_fake, clock, base) = manual_fake(config(true)).await;
    let made = call(
        &base,
        Method::POST,
        "/storage/v1/b?project=p",
        json!({ "name": "kept", "retentionPolicy": { "retentionPeriod": "60" } }),
    )
    .await;
    expect(&made, StatusCode::OK);
    let written = expect(
        &upload(&base, "kept", "r", "retained").await,
        StatusCode::OK,
    );
    assert_eq!(written["timeCreated"], "2026-10-08T11:00:00.000Z");
    assert_eq!(
        written["retentionExpirationTime"],
        "2026-10-08T11:01:00.000Z"
    );
    let listed = call(&base, Method::GET, "/storage/v1/b/kept/o", Value::Null).await;
    assert_eq!(
        expect(&listed, StatusCode::OK)["items"][0]["retentionExpirationTime"],
        "2026-10-08T11:01:00.000Z"
    );
    clock.advance(Duration::from_secs(59));
    let refused = call(&base, Method::DELETE, "/storage/v1/b/kept/o/r", Value::Null).await;
    expect(&refused, StatusCode::FORBIDDEN);
    assert!(
        message(&refused).contains("Object 'kept/r' is subject to bucket's retention policy"),
        "{}",
        refused.text()
    );
    let overwrite = upload(&base, "kept", "r", "other").await;
    assert_eq!(overwrite.status(), StatusCode::FORBIDDEN);
    clock.advance(Duration::from_secs(1));
    let deleted = call(&base, Method::DELETE, "/storage/v1/b/kept/o/r", Value::Null).await;
    expect(&deleted, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn releasing_an_event_based_hold_starts_the_retention_period_and_updates_keep_it() {
    let (_fake, clock, base) = manual_fake(config(true)).await;
    let made = call(
        &base,
        Method::POST,
        "/storage/v1/b?project=p",
        json!({
            "name": "both",
            "defaultEventBasedHold": true,
            "retentionPolicy": { "retentionPeriod": "60" },
        }),
    )
    .await;
    expect(&made, StatusCode::OK);
    let written = expect(&upload(&base, "both", "o", "data").await, StatusCode::OK);
    assert_eq!(written["eventBasedHold"], true);
    // The hold is released ten minutes later: the retention period starts then.
    clock.advance(Duration::from_secs(600));
    let released = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/both/o/o",
        json!({ "eventBasedHold": false, "retentionExpirationTime": "2000-01-01T00:00:00Z" }),
    )
    .await;
    let released = expect(&released, StatusCode::OK);
    assert_eq!(
        released["retentionExpirationTime"],
        "2026-10-08T11:11:00.000Z"
    );
    // An update replaces what a client may set, not what the service computed.
    let updated = call(
        &base,
        Method::PUT,
        "/storage/v1/b/both/o/o",
        json!({ "contentType": "text/plain" }),
    )
    .await;
    let updated = expect(&updated, StatusCode::OK);
    assert_eq!(
        updated["retentionExpirationTime"],
        "2026-10-08T11:11:00.000Z"
    );
    clock.advance(Duration::from_secs(59));
    let refused = call(&base, Method::DELETE, "/storage/v1/b/both/o/o", Value::Null).await;
    expect(&refused, StatusCode::FORBIDDEN);
    clock.advance(Duration::from_secs(1));
    let deleted = call(&base, Method::DELETE, "/storage/v1/b/both/o/o", Value::Null).await;
    expect(&deleted, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_held_object_is_not_replaced_by_an_xml_multipart_upload_or_copy() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    expect(&upload(&base, "bkt", "t", "held").await, StatusCode::OK);
    expect(&upload(&base, "bkt", "src", "source").await, StatusCode::OK);
    let hold = json!({ "temporaryHold": true });
    expect(
        &call(&base, Method::PATCH, "/storage/v1/b/bkt/o/t", hold).await,
        StatusCode::OK,
    );
    // object_store's put_multipart: XML multipart upload, parts, completion.
    let store = common::gcs_store(&base);
    let path = object_store::path::Path::parse("t").unwrap();
    let mut multipart = store.put_multipart(&path).await.unwrap();
    multipart
        .put_part(object_store::PutPayload::from_static(b"other"))
        .await
        .unwrap();
    let refused = multipart.complete().await;
    assert!(refused.is_err(), "{refused:?}");
    let copy = send(
        &base,
        Method::PUT,
        "/bkt/t",
        &[("x-goog-copy-source", "bkt/src")],
        "",
    )
    .await;
    assert_eq!(copy.status(), StatusCode::FORBIDDEN, "{}", copy.text());
    let kept = fake.object_bytes("bkt", "t").unwrap();
    assert_eq!(&kept[..], b"held");
}

/// `bucket/name`'s retention set by a patch (with `query`), answered.
async fn set_retention(base: &str, bucket: &str, name: &str, query: &str, retention: Value) -> Raw {
    let path = format!("/storage/v1/b/{bucket}/o/{name}{query}");
    call(
        base,
        Method::PATCH,
        &path,
        json!({ "retention": retention }),
    )
    .await
}

#[tokio::test]
async fn object_retention_is_kept_enforced_and_shortened_only_with_the_override() {
    let (_fake, clock, base) = manual_fake(config(true)).await;
    let path = "/storage/v1/b?project=p&enableObjectRetention=true";
    let made = call(&base, Method::POST, path, json!({ "name": "ret" })).await;
    let made = expect(&made, StatusCode::OK);
    assert_eq!(made["objectRetention"], json!({ "mode": "Enabled" }));
    // In a bucket without object retention, an object's retention is 400.
    let until = |minutes: u64| {
        format!(
            "2026-10-08T{:02}:{:02}:00.000Z",
            11 + minutes / 60,
            minutes % 60
        )
    };
    let retention =
        |mode: &str, minutes| json!({ "mode": mode, "retainUntilTime": until(minutes) });
    let plain = upload_described(
        &base,
        "bkt",
        "",
        json!({"name": "r", "retention": retention("Unlocked", 10)}),
    );
    expect(&plain.await, StatusCode::BAD_REQUEST);
    expect(&upload(&base, "bkt", "p", "x").await, StatusCode::OK);
    let patched = set_retention(&base, "bkt", "p", "", retention("Unlocked", 10)).await;
    expect(&patched, StatusCode::BAD_REQUEST);
    // Kept as given and answered; a delete or an overwrite before it is 403.
    let resource = json!({ "name": "r", "retention": retention("Unlocked", 10) });
    let written = upload_described(&base, "ret", "", resource).await;
    assert_eq!(
        expect(&written, StatusCode::OK)["retention"],
        retention("Unlocked", 10)
    );
    let got = call(&base, Method::GET, "/storage/v1/b/ret/o/r", Value::Null).await;
    assert_eq!(
        expect(&got, StatusCode::OK)["retention"],
        retention("Unlocked", 10)
    );
    let refused = call(&base, Method::DELETE, "/storage/v1/b/ret/o/r", Value::Null).await;
    expect(&refused, StatusCode::FORBIDDEN);
    assert!(
        message(&refused).contains("object retention"),
        "{}",
        refused.text()
    );
    expect(
        &upload(&base, "ret", "r", "other").await,
        StatusCode::FORBIDDEN,
    );
    // Unlocked: lengthened freely, shortened only with overrideUnlockedRetention.
    let longer = set_retention(&base, "ret", "r", "", retention("Unlocked", 30)).await;
    expect(&longer, StatusCode::OK);
    let shorter = set_retention(&base, "ret", "r", "", retention("Unlocked", 5)).await;
    expect(&shorter, StatusCode::FORBIDDEN);
    let query = "?overrideUnlockedRetention=true";
    let shorter = set_retention(&base, "ret", "r", query, retention("Unlocked", 5)).await;
    assert_eq!(
        expect(&shorter, StatusCode::OK)["retention"],
        retention("Unlocked", 5)
    );
    // Locked: lengthened only, even with the override; the delete waits for it.
    let locked = set_retention(&base, "ret", "r", "", retention("Locked", 20)).await;
    expect(&locked, StatusCode::OK);
    let shorter = set_retention(&base, "ret", "r", query, retention("Locked", 15)).await;
    expect(&shorter, StatusCode::FORBIDDEN);
    let removed = set_retention(&base, "ret", "r", query, Value::Null).await;
    expect(&removed, StatusCode::FORBIDDEN);
    clock.advance(Duration::from_secs(19 * 60));
    let early = call(&base, Method::DELETE, "/storage/v1/b/ret/o/r", Value::Null).await;
    expect(&early, StatusCode::FORBIDDEN);
    clock.advance(Duration::from_secs(60));
    let deleted = call(&base, Method::DELETE, "/storage/v1/b/ret/o/r", Value::Null).await;
    expect(&deleted, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn acl_calls_are_refused_once_uniform_bucket_level_access_is_on() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let made = call(
        &base,
        Method::POST,
        "/storage/v1/b?project=p",
        json!({ "name": "acls" }),
    )
    .await;
    expect(&made, StatusCode::OK);
    expect(&upload(&base, "acls", "o", "data").await, StatusCode::OK);
    let paths = [
        "/storage/v1/b/acls/acl",
        "/storage/v1/b/acls/defaultObjectAcl",
        "/storage/v1/b/acls/o/o/acl",
    ];
    for path in paths {
        expect(
            &call(&base, Method::GET, path, Value::Null).await,
            StatusCode::OK,
        );
    }
    let uniform =
        json!({ "iamConfiguration": { "uniformBucketLevelAccess": { "enabled": true } } });
    let patched = call(&base, Method::PATCH, "/storage/v1/b/acls", uniform).await;
    expect(&patched, StatusCode::OK);
    for path in paths {
        let refused = call(&base, Method::GET, path, Value::Null).await;
        expect(&refused, StatusCode::BAD_REQUEST);
        assert!(
            message(&refused).contains("uniform bucket-level access is enabled"),
            "{path}: {}",
            refused.text()
        );
    }
    let entry = json!({ "entity": "allUsers", "role": "READER" });
    let insert = call(&base, Method::POST, "/storage/v1/b/acls/o/o/acl", entry).await;
    expect(&insert, StatusCode::BAD_REQUEST);
}
