//! Managed folders, as Cloud Storage documents the JSON API's `managedFolders`
//! resource (issue 41): insert (only with uniform bucket-level access), get, list
//! in name order with pages, delete (409 over objects unless `allowNonEmpty`,
//! metageneration preconditions), their IAM policy, and a bucket that keeps them
//! is not empty.

mod common;

use std::time::Duration;

use common::{call, config, expect, manual_fake};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const FOLDERS: &str = "/storage/v1/b/bkt/managedFolders";

/// Turns uniform bucket-level access on for `bkt`.
async fn uniform(base: &str) {
    let body = json!({ "iamConfiguration": { "uniformBucketLevelAccess": { "enabled": true } } });
    let patched = call(base, Method::PATCH, "/storage/v1/b/bkt", body).await;
    expect(&patched, StatusCode::OK);
}

async fn insert(base: &str, name: &str) -> common::Raw {
    call(base, Method::POST, FOLDERS, json!({ "name": name })).await
}

async fn upload(base: &str, name: &str) {
    let path = format!("/upload/storage/v1/b/bkt/o?uploadType=media&name={name}");
    expect(
        &call(base, Method::POST, &path, Value::Null).await,
        StatusCode::OK,
    );
}

#[tokio::test]
async fn an_insert_answers_the_resource_and_a_get_finds_it_by_its_encoded_name() {
    let (_fake, clock, base) = manual_fake(config(true)).await;
    // Without uniform bucket-level access the service refuses managed folders.
    expect(&insert(&base, "a/b/").await, StatusCode::BAD_REQUEST);
    uniform(&base).await;
    clock.advance(Duration::from_secs(5));
    let made = expect(&insert(&base, "a/b/").await, StatusCode::OK);
    assert_eq!(made["kind"], "storage#managedFolder");
    assert_eq!(made["id"], "bkt/a/b/");
    assert_eq!(made["name"], "a/b/");
    assert_eq!(made["bucket"], "bkt");
    assert_eq!(made["metageneration"], "1");
    assert_eq!(made["createTime"], "2026-10-08T11:00:05.000Z");
    assert_eq!(made["updateTime"], made["createTime"]);
    let link = made["selfLink"].as_str().unwrap();
    assert!(
        link.ends_with("/storage/v1/b/bkt/managedFolders/a%2Fb%2F"),
        "{link}"
    );
    // A name without the trailing slash names the same folder (the docs' example
    // names are `example-dir`); an empty name is 400; a second insert is 409.
    expect(&insert(&base, "a/b").await, StatusCode::CONFLICT);
    expect(&insert(&base, "").await, StatusCode::BAD_REQUEST);
    let plain = expect(&insert(&base, "c").await, StatusCode::OK);
    assert_eq!(plain["name"], "c/");

    let got = call(
        &base,
        Method::GET,
        &format!("{FOLDERS}/a%2Fb%2F"),
        Value::Null,
    )
    .await;
    assert_eq!(expect(&got, StatusCode::OK), made);
    let missing = call(&base, Method::GET, &format!("{FOLDERS}/x%2F"), Value::Null).await;
    expect(&missing, StatusCode::NOT_FOUND);
    let elsewhere = "/storage/v1/b/nobucket/managedFolders";
    let no_bucket = call(&base, Method::POST, elsewhere, json!({ "name": "a/" })).await;
    expect(&no_bucket, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_list_pages_in_name_order_under_a_prefix() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    uniform(&base).await;
    for name in ["d/", "a/", "c/x/", "c/", "b/"] {
        expect(&insert(&base, name).await, StatusCode::OK);
    }
    let names = |page: &Value| -> Vec<String> {
        let items = page["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect()
    };
    let first = call(
        &base,
        Method::GET,
        &format!("{FOLDERS}?pageSize=2"),
        Value::Null,
    )
    .await;
    let first = expect(&first, StatusCode::OK);
    assert_eq!(names(&first), ["a/", "b/"]);
    let token = first["nextPageToken"].as_str().unwrap();
    let path = format!("{FOLDERS}?pageSize=2&pageToken={token}");
    let second = expect(
        &call(&base, Method::GET, &path, Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(names(&second), ["c/", "c/x/"]);
    let token = second["nextPageToken"].as_str().unwrap();
    let path = format!("{FOLDERS}?pageSize=2&pageToken={token}");
    let last = expect(
        &call(&base, Method::GET, &path, Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(names(&last), ["d/"]);
    assert!(last.get("nextPageToken").is_none(), "{last}");
    let path = format!("{FOLDERS}?prefix=c%2F");
    let under = expect(
        &call(&base, Method::GET, &path, Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(names(&under), ["c/", "c/x/"]);
    assert_eq!(under["kind"], "storage#managedFolders");
}

#[tokio::test]
async fn a_delete_keeps_a_folder_over_objects_unless_allowed_and_checks_metagenerations() {
    let (_fake, _clock, base) = manual_fake(config(true)).await;
    uniform(&base).await;
    expect(&insert(&base, "full/").await, StatusCode::OK);
    expect(&insert(&base, "empty/").await, StatusCode::OK);
    upload(&base, "full%2Fobj").await;
    let delete = |name: &str, query: &str| {
        let path = format!("{FOLDERS}/{name}?{query}");
        let base = base.clone();
        async move { call(&base, Method::DELETE, &path, Value::Null).await }
    };
    expect(&delete("full%2F", "").await, StatusCode::CONFLICT);
    expect(
        &delete("full%2F", "allowNonEmpty=true").await,
        StatusCode::NO_CONTENT,
    );
    // The objects under it stay.
    let obj = call(
        &base,
        Method::GET,
        "/storage/v1/b/bkt/o/full%2Fobj",
        Value::Null,
    )
    .await;
    expect(&obj, StatusCode::OK);
    expect(&delete("full%2F", "").await, StatusCode::NOT_FOUND);

    let stale = "ifMetagenerationMatch=2";
    expect(
        &delete("empty%2F", stale).await,
        StatusCode::PRECONDITION_FAILED,
    );
    let same = "ifMetagenerationNotMatch=1";
    expect(
        &delete("empty%2F", same).await,
        StatusCode::PRECONDITION_FAILED,
    );
    expect(
        &delete("empty%2F", "ifMetagenerationMatch=1").await,
        StatusCode::NO_CONTENT,
    );
    let get = call(
        &base,
        Method::GET,
        &format!("{FOLDERS}/empty%2F"),
        Value::Null,
    )
    .await;
    expect(&get, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_folders_iam_policy_is_kept_apart_from_the_buckets() {
    let (_fake, clock, base) = manual_fake(config(true)).await;
    uniform(&base).await;
    expect(&insert(&base, "p/").await, StatusCode::OK);
    let iam = format!("{FOLDERS}/p%2F/iam");
    let policy = expect(
        &call(&base, Method::GET, &iam, Value::Null).await,
        StatusCode::OK,
    );
    assert_eq!(policy["kind"], "storage#policy");
    assert_eq!(
        policy["resourceId"],
        "projects/_/buckets/bkt/managedFolders/p/"
    );
    clock.advance(Duration::from_secs(1));
    let binding = json!({ "role": "roles/storage.objectViewer", "members": ["allUsers"] });
    let set = json!({ "bindings": [binding], "etag": policy["etag"] });
    let set = expect(&call(&base, Method::PUT, &iam, set).await, StatusCode::OK);
    assert_eq!(set["bindings"], json!([binding]));
    assert_ne!(set["etag"], policy["etag"]);
    // A stale etag is 412; the folder's update time and metageneration moved.
    let stale = json!({ "bindings": [], "etag": policy["etag"] });
    let stale = call(&base, Method::PUT, &iam, stale).await;
    expect(&stale, StatusCode::PRECONDITION_FAILED);
    let got = call(&base, Method::GET, &format!("{FOLDERS}/p%2F"), Value::Null).await;
    let got = expect(&got, StatusCode::OK);
    assert_eq!(got["metageneration"], "2");
    assert_eq!(got["updateTime"], "2026-10-08T11:00:01.000Z");
    let bucket = call(&base, Method::GET, "/storage/v1/b/bkt/iam", Value::Null).await;
    let bucket = expect(&bucket, StatusCode::OK);
    assert_ne!(bucket["bindings"], json!([binding]));
    let none = format!("{FOLDERS}/q%2F/iam");
    expect(
        &call(&base, Method::GET, &none, Value::Null).await,
        StatusCode::NOT_FOUND,
    );
}

#[tokio::test]
async fn a_bucket_with_a_managed_folder_is_not_empty() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    uniform(&base).await;
    expect(&insert(&base, "kept/").await, StatusCode::OK);
    let bucket = "/storage/v1/b/bkt";
    expect(
        &call(&base, Method::DELETE, bucket, Value::Null).await,
        StatusCode::CONFLICT,
    );
    let folder = format!("{FOLDERS}/kept%2F");
    expect(
        &call(&base, Method::DELETE, &folder, Value::Null).await,
        StatusCode::NO_CONTENT,
    );
    expect(
        &call(&base, Method::DELETE, bucket, Value::Null).await,
        StatusCode::NO_CONTENT,
    );
    let ops = fake.stats().by_operation;
    assert_eq!(ops.get("storage.managedFolders.insert"), Some(&1));
    assert_eq!(ops.get("storage.managedFolders.delete"), Some(&1));
}
