//! The XML API's multipart uploads and copies through the real `object_store` GCS
//! client: `put_multipart_opts` (attributes, parts, completion, abort) and
//! `copy_if_not_exists` (a copy only if the destination is absent), which a
//! streamed drain uses to write an object of any size create-if-absent.

mod common;

use bytes::Bytes;
use common::{config, gcs_store, manual_fake};
use object_store::path::Path;
use object_store::{
    Attribute, Attributes, ObjectStore as _, ObjectStoreExt as _, PutMultipartOptions, PutPayload,
};

fn bytes(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[tokio::test]
async fn a_multipart_upload_is_its_parts_concatenated_with_its_attributes() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let store = gcs_store(&base);
    let path = Path::parse("big/a b.bin").unwrap();
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::ContentType, "text/csv".into());
    attributes.insert(Attribute::Metadata("k".into()), "v".into());
    let options = PutMultipartOptions {
        attributes,
        ..Default::default()
    };
    let mut upload = store.put_multipart_opts(&path, options).await.unwrap();
    let parts = [bytes(5 << 20, 1), bytes(5 << 20, 2), bytes(1000, 3)];
    for part in &parts {
        upload
            .put_part(PutPayload::from(part.clone()))
            .await
            .unwrap();
    }
    upload.complete().await.unwrap();
    let read = store.get(&path).await.unwrap();
    let meta = read.meta.clone();
    let attributes = read.attributes.clone();
    let got = read.bytes().await.unwrap();
    assert!(got == parts.concat(), "the object is not its parts");
    assert_eq!(meta.size, got.len() as u64);
    assert_eq!(
        attributes.get(&Attribute::ContentType).unwrap().as_ref(),
        "text/csv"
    );
    assert_eq!(
        attributes
            .get(&Attribute::Metadata("k".into()))
            .unwrap()
            .as_ref(),
        "v"
    );
    let etag = meta.e_tag.unwrap();
    assert!(
        etag.trim_matches('"').starts_with('-'),
        "not a composite's ETag: {etag}"
    );
    assert_eq!(fake.object_count("bkt"), 1);
}

#[tokio::test]
async fn an_aborted_upload_leaves_no_object() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let store = gcs_store(&base);
    let path = Path::parse("aborted").unwrap();
    let mut upload = store.put_multipart(&path).await.unwrap();
    upload
        .put_part(PutPayload::from(bytes(10, 1)))
        .await
        .unwrap();
    upload.abort().await.unwrap();
    assert_eq!(fake.object_count("bkt"), 0);
}

#[tokio::test]
async fn a_copy_if_not_exists_copies_once_and_then_is_refused() {
    let (fake, _clock, base) = manual_fake(config(true)).await;
    let store = gcs_store(&base);
    let (from, to) = (
        Path::parse("staging/x").unwrap(),
        Path::parse("dest/é x").unwrap(),
    );
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::ContentType, "text/plain".into());
    let options = object_store::PutOptions {
        attributes,
        ..Default::default()
    };
    store
        .put_opts(&from, PutPayload::from_static(b"copied"), options)
        .await
        .unwrap();
    store.copy_if_not_exists(&from, &to).await.unwrap();
    let read = store.get(&to).await.unwrap();
    assert_eq!(
        read.attributes
            .get(&Attribute::ContentType)
            .unwrap()
            .as_ref(),
        "text/plain"
    );
    assert_eq!(&read.bytes().await.unwrap()[..], b"copied");
    let again = store.copy_if_not_exists(&from, &to).await.unwrap_err();
    assert!(
        matches!(again, object_store::Error::AlreadyExists { .. }),
        "{again}"
    );
    assert_eq!(fake.object_count("bkt"), 2);
}
