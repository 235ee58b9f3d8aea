//! JSON resources a client sends: the object resource of a resumable upload's first
//! request and of a multipart upload's first part (`Upload::resumable`,
//! `Upload::multipart_head`, `ObjectAttributes::from_resource`), and the compose
//! request (`Compose::parse`).
//!
//! Input: one byte of options (whether the query names the object, whether
//! `X-Upload-Content-Type` or the media part's `Content-Type` is given, whether an
//! `ifGenerationMatch` is sent), then the JSON body. Asserts:
//!
//! - No panic, whatever the body.
//! - What the API promises of a parsed upload: the query's `name` wins over the
//!   resource's, the name is never empty, the resource's `contentType` wins over
//!   the header, the attributes are `from_resource`'s, and the declared digests are
//!   the resource's `crc32c` and `md5Hash`; the resumable and multipart paths agree.
//! - Attributes round-trip through a JSON resource (`add_to_resource`, then
//!   `from_resource`).
//! - A parsed compose request has 1 to 32 sources, each named as in the body, in
//!   order, with the destination's content type and attributes.

#![no_main]

use bytes::Bytes;
use fake_gcs::wire::{
    Compose, DEFAULT_CONTENT_TYPE, MAX_COMPOSE_SOURCES, MultipartHead, ObjectAttributes, Part,
    Query, RequestHead, Upload,
};
use http::HeaderMap;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&options, body)) = data.split_first() else {
        return;
    };
    let query_name = options & 1 != 0;
    let header_type = options & 2 != 0;
    let precondition = options & 4 != 0;
    let mut query = String::from("uploadType=resumable");
    if query_name {
        query.push_str("&name=from%2Fquery");
    }
    if precondition {
        query.push_str("&ifGenerationMatch=0");
    }
    let query = Query::parse(Some(&query));
    let mut headers = HeaderMap::new();
    if header_type {
        headers.insert("x-upload-content-type", "text/x-header".parse().unwrap());
    }
    let head = RequestHead {
        query: &query,
        headers: &headers,
    };
    let resource: Option<Value> = serde_json::from_slice(body).ok();

    // Attributes round-trip through a resource.
    if let Some(resource) = &resource {
        let attributes = ObjectAttributes::from_resource(resource);
        let mut map = serde_json::Map::new();
        attributes.add_to_resource(&mut map);
        assert_eq!(
            ObjectAttributes::from_resource(&Value::Object(map)),
            attributes
        );
    }

    // The resumable upload's first request.
    let resumable = Upload::resumable("bkt", head, body);
    match (&resumable, &resource) {
        (Ok(upload), _) if body.is_empty() => {
            assert!(query_name);
            assert_eq!(upload.name, "from/query");
        }
        (Ok(upload), Some(resource)) => check_upload(
            upload,
            resource,
            query_name,
            header_type.then_some("text/x-header"),
        ),
        (Ok(upload), None) => panic!("{upload:?} parsed from a body that is not JSON"),
        (Err(_), _) => {}
    }

    // The same resource as a multipart upload's first part.
    let media_type = header_type.then_some("text/x-media");
    let parts = MultipartHead {
        resource: Part {
            headers: vec![("content-type".into(), "application/json".into())],
            body: Bytes::copy_from_slice(body),
        },
        media: Part {
            headers: media_type
                .map(|t| vec![("content-type".to_string(), t.to_string())])
                .unwrap_or_default(),
            body: Bytes::new(),
        },
    };
    let multipart = Upload::multipart_head("bkt", head, &parts);
    if let Ok(upload) = &multipart {
        let resource = resource
            .as_ref()
            .expect("a multipart resource that is not JSON");
        check_upload(upload, resource, query_name, media_type);
        if let Ok(resumable) = &resumable
            && !body.is_empty()
        {
            assert_eq!(upload.name, resumable.name);
            assert_eq!(upload.attributes, resumable.attributes);
            assert_eq!(upload.declared, resumable.declared);
        }
    }
    if let (Err(_), Some(Value::Object(_))) = (&multipart, &resource) {
        // A JSON object is refused only for a missing name.
        assert!(!query_name);
    }

    // The compose request.
    if let Ok(compose) = Compose::parse("bkt", "dest", head, body) {
        let resource = resource.expect("a compose request that is not JSON");
        let Some(Value::Array(sources)) = resource.get("sourceObjects") else {
            panic!("a compose request without sourceObjects: {compose:?}");
        };
        assert!((1..=MAX_COMPOSE_SOURCES).contains(&compose.sources.len()));
        assert_eq!(compose.sources.len(), sources.len());
        for (parsed, given) in compose.sources.iter().zip(sources) {
            assert!(!parsed.name.is_empty());
            assert_eq!(Some(parsed.name.as_str()), given["name"].as_str());
        }
        let destination = resource.get("destination").unwrap_or(&Value::Null);
        let given_type = destination.get("contentType").and_then(Value::as_str);
        // None given: the composite has no content type, as in Cloud Storage.
        assert_eq!(&compose.content_type[..], given_type.unwrap_or(""));
        assert_eq!(
            compose.attributes,
            ObjectAttributes::from_resource(destination)
        );
        assert_eq!(compose.destination, "dest");
    }
});

/// What the JSON API promises of an upload parsed from `resource`.
fn check_upload(upload: &Upload, resource: &Value, query_name: bool, fallback: Option<&str>) {
    assert!(!upload.name.is_empty());
    match query_name {
        true => assert_eq!(upload.name, "from/query"),
        false => assert_eq!(Some(upload.name.as_str()), resource["name"].as_str()),
    }
    let given = resource.get("contentType").and_then(Value::as_str);
    let expected = given.or(fallback).unwrap_or(DEFAULT_CONTENT_TYPE);
    assert_eq!(&upload.content_type[..], expected);
    assert_eq!(upload.attributes, ObjectAttributes::from_resource(resource));
    let digest = |k: &str| resource.get(k).and_then(Value::as_str).map(str::to_string);
    assert_eq!(upload.declared.crc32c, digest("crc32c"));
    assert_eq!(upload.declared.md5, digest("md5Hash"));
    assert!(upload.data.is_empty());
}
