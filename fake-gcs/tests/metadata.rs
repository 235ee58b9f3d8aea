//! The JSON API's metadata calls on a real port: buckets created, changed (with
//! their metageneration and its preconditions) and deleted; ACLs, IAM policies and
//! notifications; HMAC keys and the service account; objects patched, updated,
//! copied and rewritten; and JSON API paths the fake does not serve answered with
//! a JSON 404, never taken as XML objects.

mod common;

use common::{Read as _, call, config, expect, manual_fake, send};
use fake_gcs::FakeGcsConfig;
use http::{Method, StatusCode};
use serde_json::{Value, json};

#[tokio::test]
async fn a_bucket_is_made_changed_by_metageneration_and_deleted_only_when_empty() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let made = call(
        &base,
        Method::POST,
        "/storage/v1/b?project=p",
        json!({ "name": "made", "labels": { "a": "1" } }),
    )
    .await;
    let made = expect(&made, StatusCode::OK);
    assert_eq!(
        (
            made["metageneration"].as_str(),
            made["labels"]["a"].as_str()
        ),
        (Some("1"), Some("1"))
    );
    assert_eq!(made["acl"][0]["entity"], "project-owners-0");
    let again = call(
        &base,
        Method::POST,
        "/storage/v1/b",
        json!({ "name": "made" }),
    )
    .await;
    expect(&again, StatusCode::CONFLICT);
    let bad = call(
        &base,
        Method::POST,
        "/storage/v1/b",
        json!({ "name": "Not_OK!" }),
    )
    .await;
    assert!(
        expect(&bad, StatusCode::BAD_REQUEST)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid bucket name")
    );

    let stale = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/made?ifMetagenerationMatch=2",
        json!({ "labels": { "b": "2" } }),
    )
    .await;
    expect(&stale, StatusCode::PRECONDITION_FAILED);
    let patched = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/made?ifMetagenerationMatch=1",
        json!({ "labels": { "b": "2" } }),
    )
    .await;
    let patched = expect(&patched, StatusCode::OK);
    assert_eq!(patched["metageneration"], "2");
    assert_eq!(patched["labels"], json!({ "a": "1", "b": "2" }));
    let updated = call(
        &base,
        Method::PUT,
        "/storage/v1/b/made",
        json!({ "storageClass": "NEARLINE" }),
    )
    .await;
    let updated = expect(&updated, StatusCode::OK);
    assert_eq!(
        (updated["metageneration"].as_str(), updated.get("labels")),
        (Some("3"), None)
    );
    assert_eq!(updated["storageClass"], "NEARLINE");
    let not_three = call(
        &base,
        Method::GET,
        "/storage/v1/b/made?ifMetagenerationNotMatch=3",
        Value::Null,
    )
    .await;
    expect(&not_three, StatusCode::PRECONDITION_FAILED);

    expect(
        &send(&base, Method::PUT, "/made/x", &[], "x").await,
        StatusCode::OK,
    );
    let full = call(&base, Method::DELETE, "/storage/v1/b/made", Value::Null).await;
    expect(&full, StatusCode::CONFLICT);
    expect(
        &send(&base, Method::DELETE, "/made/x", &[], "").await,
        StatusCode::NO_CONTENT,
    );
    expect(
        &call(&base, Method::DELETE, "/storage/v1/b/made", Value::Null).await,
        StatusCode::NO_CONTENT,
    );
    expect(
        &call(&base, Method::GET, "/storage/v1/b/made", Value::Null).await,
        StatusCode::NOT_FOUND,
    );
}

#[tokio::test]
async fn a_deleted_bucket_is_not_made_again_on_first_use() {
    let auto = FakeGcsConfig {
        buckets: vec![],
        auto_create_buckets: true,
        ..config(true)
    };
    let (_fake, _clock, base) = manual_fake(auto).await;
    expect(
        &call(&base, Method::GET, "/storage/v1/b/used", Value::Null).await,
        StatusCode::OK,
    );
    expect(
        &call(&base, Method::DELETE, "/storage/v1/b/used", Value::Null).await,
        StatusCode::NO_CONTENT,
    );
    expect(
        &call(&base, Method::GET, "/storage/v1/b/used", Value::Null).await,
        StatusCode::NOT_FOUND,
    );
    expect(
        &send(&base, Method::PUT, "/used/x", &[], "x").await,
        StatusCode::NOT_FOUND,
    );
    let made = call(
        &base,
        Method::POST,
        "/storage/v1/b",
        json!({ "name": "used" }),
    )
    .await;
    expect(&made, StatusCode::OK);
    expect(
        &send(&base, Method::PUT, "/used/x", &[], "x").await,
        StatusCode::OK,
    );
}

#[tokio::test]
async fn acls_iam_notifications_and_the_retention_lock_are_kept_per_bucket() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let added = call(
        &base,
        Method::POST,
        "/storage/v1/b/bkt/acl",
        json!({ "entity": "allUsers", "role": "reader" }),
    )
    .await;
    assert_eq!(expect(&added, StatusCode::OK)["role"], "READER");
    let patched = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/bkt/acl/allUsers",
        json!({ "role": "WRITER" }),
    )
    .await;
    assert_eq!(expect(&patched, StatusCode::OK)["role"], "WRITER");
    let list = expect(
        &call(&base, Method::GET, "/storage/v1/b/bkt/acl", Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(list["items"].as_array().unwrap().len(), 4);
    expect(
        &call(
            &base,
            Method::DELETE,
            "/storage/v1/b/bkt/acl/allUsers",
            Value::Null,
        )
        .await,
        StatusCode::NO_CONTENT,
    );
    expect(
        &call(
            &base,
            Method::GET,
            "/storage/v1/b/bkt/acl/allUsers",
            Value::Null,
        )
        .await,
        StatusCode::NOT_FOUND,
    );
    let bucket = expect(
        &call(&base, Method::GET, "/storage/v1/b/bkt", Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(bucket["metageneration"], "4", "three ACL changes");
    let defaults = call(
        &base,
        Method::GET,
        "/storage/v1/b/bkt/defaultObjectAcl",
        Value::Null,
    )
    .await;
    assert_eq!(
        expect(&defaults, StatusCode::OK)["kind"],
        "storage#objectAccessControls"
    );

    let policy = expect(
        &call(&base, Method::GET, "/storage/v1/b/bkt/iam", Value::Null).await,
        StatusCode::OK,
    );
    let bindings = json!([{ "role": "roles/storage.objectViewer", "members": ["allUsers"] }]);
    let stale = call(
        &base,
        Method::PUT,
        "/storage/v1/b/bkt/iam",
        json!({ "bindings": bindings, "etag": "CAk=" }),
    )
    .await;
    expect(&stale, StatusCode::PRECONDITION_FAILED);
    let set = call(
        &base,
        Method::PUT,
        "/storage/v1/b/bkt/iam",
        json!({ "bindings": bindings, "etag": policy["etag"] }),
    )
    .await;
    let set = expect(&set, StatusCode::OK);
    assert_eq!(set["bindings"], bindings);
    assert_ne!(set["etag"], policy["etag"]);
    let tested = call(
        &base,
        Method::GET,
        "/storage/v1/b/bkt/iam/testPermissions?permissions=a.b&permissions=c.d",
        Value::Null,
    )
    .await;
    assert_eq!(
        expect(&tested, StatusCode::OK)["permissions"],
        json!(["a.b", "c.d"])
    );

    expect(
        &call(
            &base,
            Method::POST,
            "/storage/v1/b/bkt/notificationConfigs",
            json!({}),
        )
        .await,
        StatusCode::BAD_REQUEST,
    );
    let topic = "//pubsub.googleapis.com/projects/p/topics/t";
    let made = call(
        &base,
        Method::POST,
        "/storage/v1/b/bkt/notificationConfigs",
        json!({ "topic": topic }),
    )
    .await;
    let id = expect(&made, StatusCode::OK)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let one = format!("/storage/v1/b/bkt/notificationConfigs/{id}");
    assert_eq!(
        expect(
            &call(&base, Method::GET, &one, Value::Null).await,
            StatusCode::OK
        )["topic"],
        topic
    );
    expect(
        &call(&base, Method::DELETE, &one, Value::Null).await,
        StatusCode::NO_CONTENT,
    );
    expect(
        &call(&base, Method::GET, &one, Value::Null).await,
        StatusCode::NOT_FOUND,
    );

    let lock = "/storage/v1/b/bkt/lockRetentionPolicy";
    expect(
        &call(&base, Method::POST, lock, Value::Null).await,
        StatusCode::BAD_REQUEST,
    );
    let retained = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/bkt",
        json!({ "retentionPolicy": { "retentionPeriod": 60 } }),
    )
    .await;
    let mg = expect(&retained, StatusCode::OK)["metageneration"]
        .as_str()
        .unwrap()
        .to_string();
    let locked = call(
        &base,
        Method::POST,
        &format!("{lock}?ifMetagenerationMatch={mg}"),
        Value::Null,
    )
    .await;
    assert_eq!(
        expect(&locked, StatusCode::OK)["retentionPolicy"]["isLocked"],
        true
    );
    let unlock = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/bkt",
        json!({ "retentionPolicy": null }),
    )
    .await;
    expect(&unlock, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn hmac_keys_live_are_deactivated_and_deleted_and_the_service_account_answers() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    let keys = "/storage/v1/projects/p/hmacKeys";
    expect(
        &call(&base, Method::POST, keys, Value::Null).await,
        StatusCode::BAD_REQUEST,
    );
    let made = call(
        &base,
        Method::POST,
        &format!("{keys}?serviceAccountEmail=sa%40p.iam"),
        Value::Null,
    )
    .await;
    let made = expect(&made, StatusCode::OK);
    assert!(made["secret"].as_str().is_some_and(|s| !s.is_empty()));
    let id = made["metadata"]["accessId"].as_str().unwrap().to_string();
    let key = format!("{keys}/{id}");
    assert_eq!(
        expect(
            &call(&base, Method::GET, &key, Value::Null).await,
            StatusCode::OK
        )["state"],
        "ACTIVE"
    );
    expect(
        &call(&base, Method::DELETE, &key, Value::Null).await,
        StatusCode::BAD_REQUEST,
    );
    let stale = call(
        &base,
        Method::PUT,
        &key,
        json!({ "state": "INACTIVE", "etag": "CAk=" }),
    )
    .await;
    expect(&stale, StatusCode::PRECONDITION_FAILED);
    let etag = made["metadata"]["etag"].clone();
    let inactive = call(
        &base,
        Method::PUT,
        &key,
        json!({ "state": "INACTIVE", "etag": etag }),
    )
    .await;
    assert_eq!(expect(&inactive, StatusCode::OK)["state"], "INACTIVE");
    expect(
        &call(&base, Method::DELETE, &key, Value::Null).await,
        StatusCode::NO_CONTENT,
    );
    let listed = expect(
        &call(&base, Method::GET, keys, Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(listed["items"], json!([]));
    let deleted = call(
        &base,
        Method::GET,
        &format!("{keys}?showDeletedKeys=true"),
        Value::Null,
    )
    .await;
    assert_eq!(
        expect(&deleted, StatusCode::OK)["items"][0]["state"],
        "DELETED"
    );
    // A deleted key's update is 404, as storage-testbench answers (it forgets
    // deleted keys): the Python client's conformance teardown, which sets
    // INACTIVE and deletes, passes on NotFound.
    let path = format!("{keys}/{id}");
    let update = call(&base, Method::PUT, &path, json!({ "state": "INACTIVE" })).await;
    expect(&update, StatusCode::NOT_FOUND);
    let other = call(
        &base,
        Method::GET,
        &format!("/storage/v1/projects/q/hmacKeys/{id}"),
        Value::Null,
    )
    .await;
    expect(&other, StatusCode::NOT_FOUND);
    let account = call(
        &base,
        Method::GET,
        "/storage/v1/projects/p/serviceAccount",
        Value::Null,
    )
    .await;
    let email = expect(&account, StatusCode::OK)["email_address"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        email.ends_with("@gs-project-accounts.iam.gserviceaccount.com"),
        "{email}"
    );
}

#[tokio::test]
async fn objects_are_patched_updated_copied_and_rewritten_under_their_preconditions() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let put = send(
        &base,
        Method::PUT,
        "/bkt/a",
        &[("content-type", "text/plain"), ("x-goog-meta-k", "v")],
        "hello",
    )
    .await;
    expect(&put, StatusCode::OK);
    let stale = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/bkt/o/a?ifMetagenerationMatch=2",
        json!({}),
    )
    .await;
    expect(&stale, StatusCode::PRECONDITION_FAILED);
    let body = json!({ "metadata": { "k": null, "j": "w" }, "cacheControl": "no-store", "temporaryHold": true });
    let patched = call(
        &base,
        Method::PATCH,
        "/storage/v1/b/bkt/o/a?ifMetagenerationMatch=1",
        body,
    )
    .await;
    let patched = expect(&patched, StatusCode::OK);
    assert_eq!(patched["metageneration"], "2");
    assert_eq!(
        (
            patched["metadata"].clone(),
            patched["temporaryHold"].clone()
        ),
        (json!({ "j": "w" }), json!(true))
    );
    assert_eq!(
        (patched["contentType"].as_str(), patched["size"].as_str()),
        (Some("text/plain"), Some("5"))
    );
    let xml = send(&base, Method::GET, "/bkt/a", &[], "").await;
    assert_eq!(
        (xml.header("x-goog-meta-j"), xml.header("cache-control")),
        (Some("w"), Some("no-store"))
    );
    assert_eq!(xml.header("x-goog-metageneration"), Some("2"));
    assert_eq!(xml.text(), "hello");
    let listed = expect(
        &call(&base, Method::GET, "/storage/v1/b/bkt/o", Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(listed["items"][0]["metageneration"], "2");

    let updated = call(
        &base,
        Method::PUT,
        "/storage/v1/b/bkt/o/a",
        json!({ "contentLanguage": "en" }),
    )
    .await;
    let updated = expect(&updated, StatusCode::OK);
    assert_eq!(
        (updated["metageneration"].as_str(), updated.get("metadata")),
        (Some("3"), None)
    );
    assert_eq!(updated["contentType"], "application/octet-stream");

    let generation = updated["generation"].as_str().unwrap().to_string();
    let wrong_source = "/storage/v1/b/bkt/o/a/copyTo/b/bkt/o/b?ifSourceGenerationMatch=1";
    expect(
        &call(&base, Method::POST, wrong_source, Value::Null).await,
        StatusCode::PRECONDITION_FAILED,
    );
    let copy = format!(
        "/storage/v1/b/bkt/o/a/copyTo/b/bkt/o/b?ifSourceGenerationMatch={generation}&ifGenerationMatch=0"
    );
    let copied = expect(
        &call(&base, Method::POST, &copy, Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(
        (copied["name"].as_str(), copied["metageneration"].as_str()),
        (Some("b"), Some("1"))
    );
    assert_eq!(copied["contentLanguage"], "en");
    expect(
        &call(&base, Method::POST, &copy, Value::Null).await,
        StatusCode::PRECONDITION_FAILED,
    );
    assert_eq!(
        fake.object_bytes("bkt", "b").as_deref(),
        Some(&b"hello"[..])
    );

    let rewrite = "/storage/v1/b/bkt/o/b/rewriteTo/b/bkt/o/c";
    let rewritten = call(
        &base,
        Method::POST,
        rewrite,
        json!({ "storageClass": "nearline", "metadata": { "r": "1" } }),
    )
    .await;
    let rewritten = expect(&rewritten, StatusCode::OK);
    assert_eq!(
        (
            rewritten["done"].as_bool(),
            rewritten["objectSize"].as_str()
        ),
        (Some(true), Some("5"))
    );
    assert_eq!(rewritten["resource"]["storageClass"], "NEARLINE");
    assert_eq!(rewritten["resource"]["metadata"], json!({ "r": "1" }));
    let missing = call(
        &base,
        Method::POST,
        "/storage/v1/b/bkt/o/nothing/copyTo/b/bkt/o/d",
        Value::Null,
    )
    .await;
    expect(&missing, StatusCode::NOT_FOUND);

    let object_acl = call(
        &base,
        Method::POST,
        "/storage/v1/b/bkt/o/c/acl",
        json!({ "entity": "allUsers", "role": "READER" }),
    )
    .await;
    assert_eq!(
        expect(&object_acl, StatusCode::OK)["kind"],
        "storage#objectAccessControl"
    );
    let full = expect(
        &call(
            &base,
            Method::GET,
            "/storage/v1/b/bkt/o/c?projection=full",
            Value::Null,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(full["metageneration"], "2");
    assert!(
        full["acl"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["entity"] == "allUsers")
    );
}

#[tokio::test]
async fn json_api_paths_it_does_not_serve_are_json_404s_never_xml_objects() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    for (method, path) in [
        (Method::PUT, "/storage/v1/projects/p/buckets/x"),
        (Method::GET, "/storage/v1/projects/p/anything"),
        (Method::POST, "/storage/v1/b/bkt/o/a/restore"),
        (Method::GET, "/storage/v1/b/bkt/anywhere"),
        (Method::PATCH, "/storage/v1/b/bkt/notificationConfigs/1"),
        (Method::PUT, "/upload/storage/v1/projects/p"),
    ] {
        let answer = call(&base, method.clone(), path, json!({})).await;
        let body = expect(&answer, StatusCode::NOT_FOUND);
        let message = body["error"]["message"].as_str().unwrap();
        assert_eq!(
            message,
            format!("Not Found: the fake serves no {method} {path}")
        );
    }
    assert!(fake.objects("storage").is_empty() && fake.objects("upload").is_empty());
    assert_eq!(fake.stats().objects_committed, 0);
}
