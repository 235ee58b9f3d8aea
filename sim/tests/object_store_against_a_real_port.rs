//! The production client path on a real loopback port: `object_store`'s own reqwest
//! client (built by `spool::connect`, as a user builds it) and the spool's `Remote`.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{BUCKET, config, gcs_store_http, real_fake};
use fake_gcs::FaultPlan;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use spool::remote::Existing;
use spool::{Remote, StoreError};

fn create() -> PutOptions {
    PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    }
}

#[tokio::test]
async fn object_store_creates_refuses_a_second_create_reads_heads_and_lists() {
    let (fake, base) = real_fake(config(true, FaultPlan::none())).await;
    let store = gcs_store_http(&base, BUCKET).unwrap();
    let path = Path::from("spool/a b.bin");

    let put = store
        .put_opts(&path, PutPayload::from_static(b"hello"), create())
        .await
        .unwrap();
    assert_eq!(
        put.e_tag.as_deref(),
        Some("\"5d41402abc4b2a76b9719d911017c592\"")
    );
    let record = fake
        .object(BUCKET, "spool/a b.bin")
        .expect("stored under the decoded name");
    assert_eq!(put.version, Some(record.generation.to_string()));

    let again = store
        .put_opts(&path, PutPayload::from_static(b"other"), create())
        .await
        .unwrap_err();
    assert!(
        matches!(again, object_store::Error::AlreadyExists { .. }),
        "{again}"
    );
    assert_eq!(fake.stats().precondition_failures, 1);

    let got = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(got, Bytes::from_static(b"hello"));
    let range = store.get_range(&path, 1..4).await.unwrap();
    assert_eq!(range, Bytes::from_static(b"ell"));

    let meta = store.head(&path).await.unwrap();
    assert_eq!(meta.size, 5);
    assert_eq!(
        meta.e_tag.as_deref(),
        Some("\"5d41402abc4b2a76b9719d911017c592\"")
    );
    assert_eq!(meta.version, Some(record.generation.to_string()));
    assert_eq!(
        meta.last_modified.timestamp_millis() / 1000,
        (record.created_unix_ms / 1000) as i64
    );

    store
        .put(&Path::from("spool/c.bin"), PutPayload::from_static(b"c"))
        .await
        .unwrap();
    store
        .put(&Path::from("other/x"), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    let listed: Vec<_> = store
        .list(Some(&Path::from("spool")))
        .map_ok(|m| (m.location.to_string(), m.size))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        listed,
        [
            ("spool/a b.bin".to_string(), 5),
            ("spool/c.bin".to_string(), 1)
        ]
    );
    let top = store.list_with_delimiter(None).await.unwrap();
    let prefixes: Vec<_> = top.common_prefixes.iter().map(|p| p.to_string()).collect();
    assert_eq!(prefixes, ["other", "spool"]);

    store.delete(&Path::from("other/x")).await.unwrap();
    let missing = store.head(&Path::from("other/x")).await.unwrap_err();
    assert!(
        matches!(missing, object_store::Error::NotFound { .. }),
        "{missing}"
    );
    assert_eq!(fake.object_count(BUCKET), 2);
}

#[tokio::test]
async fn the_spools_remote_writes_once_and_recognises_its_own_object() {
    let (fake, base) = real_fake(config(false, FaultPlan::none())).await;
    let remote = Remote::new(gcs_store_http(&base, BUCKET).unwrap());
    let t = Duration::from_secs(10);
    let payload = Bytes::from_static(b"{\"event\":1}");

    remote
        .put_if_absent(
            "events/1.json",
            payload.clone(),
            &object_store::Attributes::new(),
            t,
        )
        .await
        .unwrap();
    let again = remote
        .put_if_absent(
            "events/1.json",
            payload.clone(),
            &object_store::Attributes::new(),
            t,
        )
        .await
        .unwrap_err();
    assert!(matches!(again, StoreError::AlreadyExists { .. }), "{again}");
    assert_eq!(
        remote
            .check_existing("events/1.json", &payload, t)
            .await
            .unwrap(),
        Existing::Matches
    );
    assert!(matches!(
        remote
            .check_existing("events/1.json", b"{\"event\":2}", t)
            .await
            .unwrap(),
        Existing::Differs(_)
    ));
    assert_eq!(
        remote
            .check_existing("events/2.json", &payload, t)
            .await
            .unwrap(),
        Existing::Missing
    );
    // Digests only: the record matches the bytes although they were not kept.
    let record = fake.object(BUCKET, "events/1.json").unwrap();
    assert!(record.matches(&payload));
    assert_eq!(fake.object_bytes(BUCKET, "events/1.json"), None);
    assert_eq!(record.content_type, "application/octet-stream");
    // The end of a run takes the records out rather than copying them.
    let taken = fake.take_objects(BUCKET);
    assert_eq!(taken.len(), 1);
    assert_eq!(taken.get("events/1.json").as_ref(), Some(&record));
    assert_eq!(taken.records().collect::<Vec<_>>(), [record]);
    assert_eq!(taken.get("events/2.json"), None);
    assert_eq!(fake.object_count(BUCKET), 0);
}

#[tokio::test]
async fn injected_statuses_reach_object_store_and_the_spool_classifies_them() {
    let faults = common::plan(
        r#"
        [[fault]]
        mix = { "503" = 1.0 }
        "#,
    );
    let (fake, base) = real_fake(config(false, faults)).await;
    let store = gcs_store_http(&base, BUCKET).unwrap();
    let err = store
        .put_opts(&Path::from("a"), PutPayload::from_static(b"a"), create())
        .await
        .unwrap_err();
    match spool::remote::classify(err) {
        StoreError::Unavailable { status, .. } => assert_eq!(status, Some(503)),
        other => panic!("{other}"),
    }
    // Reads are not in an `ops = "writes"` window.
    let missing = store.head(&Path::from("a")).await.unwrap_err();
    assert!(
        matches!(missing, object_store::Error::NotFound { .. }),
        "{missing}"
    );
    assert_eq!(fake.object_count(BUCKET), 0);
    assert_eq!(fake.stats().by_fault.get("503"), Some(&1));
}

#[tokio::test]
async fn a_reset_is_a_transport_error_without_a_status() {
    let faults = common::plan("[[fault]]\nmix = { reset = 1.0 }\n");
    let (fake, base) = real_fake(config(false, faults)).await;
    let remote = Remote::new(gcs_store_http(&base, BUCKET).unwrap());
    let err = remote
        .put_if_absent(
            "a",
            Bytes::from_static(b"a"),
            &object_store::Attributes::new(),
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Unavailable { status: None, .. }),
        "{err}"
    );
    let stats = fake.stats();
    assert_eq!((stats.dropped, stats.by_fault.get("reset")), (1, Some(&1)));
}
