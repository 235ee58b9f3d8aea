//! Object attributes stored and returned: through `object_store`'s real GCS client
//! (XML `PUT` headers in, `GET`/`HEAD` headers out) and through the JSON API
//! (multipart resource in, object resource and XML headers out).

mod common;

use bytes::Bytes;
use common::{BUCKET, Read as _, config, gcs_store, manual_fake, send};
use fake_gcs::wire::ObjectAttributes;
use http::{Method, StatusCode};
use object_store::path::Path;
use object_store::{Attribute, Attributes, GetOptions, ObjectStoreExt as _, PutMode, PutOptions};

fn every_attribute() -> Attributes {
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::ContentType, "text/csv".into());
    attributes.insert(Attribute::ContentEncoding, "gzip".into());
    attributes.insert(Attribute::CacheControl, "no-store".into());
    attributes.insert(
        Attribute::ContentDisposition,
        "attachment; filename=\"a.csv\"".into(),
    );
    attributes.insert(Attribute::ContentLanguage, "fr".into());
    attributes.insert(Attribute::Metadata("owner".into()), "spool".into());
    attributes.insert(Attribute::Metadata("run-id".into()), "7".into());
    attributes
}

#[tokio::test]
async fn object_store_gets_back_the_attributes_it_put() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let store = gcs_store(&base);
    let path = Path::parse("attrs/every").unwrap();
    let options = PutOptions {
        mode: PutMode::Create,
        attributes: every_attribute(),
        ..PutOptions::default()
    };
    let payload = Bytes::from_static(b"a,b\n1,2\n");
    store
        .put_opts(&path, payload.clone().into(), options)
        .await
        .unwrap();

    let got = store.get(&path).await.unwrap();
    assert_eq!(got.attributes, every_attribute());
    assert_eq!(got.bytes().await.unwrap(), payload);
    let head = GetOptions {
        head: true,
        ..GetOptions::default()
    };
    let headed = store.get_opts(&path, head).await.unwrap();
    assert_eq!(headed.attributes, every_attribute());

    let record = fake.object(BUCKET, "attrs/every").unwrap();
    assert_eq!(record.content_type, "text/csv");
    let attributes = record.attributes();
    assert_eq!(attributes.content_encoding.as_deref(), Some("gzip"));
    assert_eq!(attributes.metadata["run-id"], "7");
}

#[tokio::test]
async fn an_object_without_attributes_has_none_on_the_wire() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let store = gcs_store(&base);
    let path = Path::parse("attrs/none").unwrap();
    store
        .put(&path, Bytes::from_static(b"x").into())
        .await
        .unwrap();
    let got = store.get(&path).await.unwrap();
    let mut default_type = Attributes::new();
    default_type.insert(Attribute::ContentType, "application/octet-stream".into());
    assert_eq!(got.attributes, default_type);
    assert_eq!(fake.object(BUCKET, "attrs/none").unwrap().attributes, None);
    let resource = send(
        &base,
        Method::GET,
        "/storage/v1/b/bkt/o/attrs%2Fnone",
        &[],
        "",
    )
    .await;
    let resource = resource.json();
    for field in [
        "metadata",
        "contentEncoding",
        "cacheControl",
        "componentCount",
    ] {
        assert_eq!(resource.get(field), None, "{field}");
    }
}

const BOUNDARY: &str = "b0undary";

fn multipart(resource: &str, media: &str) -> String {
    format!(
        "--{BOUNDARY}\r\ncontent-type: application/json\r\n\r\n{resource}\r\n\
         --{BOUNDARY}\r\ncontent-type: text/plain\r\n\r\n{media}\r\n--{BOUNDARY}--\r\n"
    )
}

#[tokio::test]
async fn a_json_upload_s_attributes_show_in_the_resource_and_the_xml_headers() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let resource = r#"{"name":"j/one","contentLanguage":"de","contentDisposition":"inline","cacheControl":"max-age=60","metadata":{"k":"v"}}"#;
    let content_type = format!("multipart/related; boundary={BOUNDARY}");
    let uploaded = send(
        &base,
        Method::POST,
        "/upload/storage/v1/b/bkt/o?uploadType=multipart&contentEncoding=identity",
        &[("content-type", &content_type)],
        multipart(resource, "hello"),
    )
    .await;
    assert_eq!(uploaded.status(), StatusCode::OK, "{}", uploaded.text());
    let resource = uploaded.json();
    assert_eq!(resource["contentLanguage"], "de");
    assert_eq!(resource["contentEncoding"], "identity");
    assert_eq!(resource["metadata"]["k"], "v");
    assert_eq!(resource["contentType"], "text/plain");

    let get = send(&base, Method::GET, "/bkt/j/one", &[], "").await;
    assert_eq!(get.status(), StatusCode::OK);
    assert_eq!(get.header("content-language"), Some("de"));
    assert_eq!(get.header("content-disposition"), Some("inline"));
    assert_eq!(get.header("cache-control"), Some("max-age=60"));
    assert_eq!(get.header("x-goog-meta-k"), Some("v"));
    assert_eq!(
        get.header("x-goog-stored-content-encoding"),
        Some("identity")
    );
    assert_eq!(&get.body()[..], b"hello");

    let expected = ObjectAttributes {
        content_encoding: Some("identity".into()),
        cache_control: Some("max-age=60".into()),
        content_disposition: Some("inline".into()),
        content_language: Some("de".into()),
        metadata: [("k".to_string(), "v".to_string())].into(),
        custom_time: None,
    };
    assert_eq!(
        fake.object(BUCKET, "j/one").unwrap().attributes(),
        &expected
    );
}
