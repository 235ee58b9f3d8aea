//! Every character Cloud Storage allows in a name, through the production path a
//! user has: the `Uploader` and the `Drainer` over `object_store`'s own GCS client
//! (reqwest), against the fake on a real loopback port. Each object lands under its
//! exact name, directly and after a spooled write, or is refused before anything
//! is sent with an error that names it.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{BUCKET, config, gcs_store_http, real_fake};
use fake_gcs::FaultPlan;
use object_store::{Attribute, Attributes};
use spool::name::InvalidName;
use spool::{Drainer, DrainerConfig, Outcome, Remote, Spool, SpoolConfig, UploadError, Uploader};

/// One name per special character, and names built of several, up to the limit.
fn hard_names() -> Vec<String> {
    let specials = [
        "%", "%25", "%2F", "#", "?", "*", "[", "]", "{", "}", "^", "|", "<", ">", "\"", "~", "`",
        "\\", "+", "&", "=", ";", ":", "@", "$", ",", "'", "!", "(", ")", " ", "\u{a0}", "é", "ü",
        "ß", "Ω", "☃", "中", "𝄞",
    ];
    let mut names: Vec<String> = specials.iter().map(|c| format!("c/x{c}y")).collect();
    names.extend(
        [
            "logs/100%.json",
            "ünï/cødé ☃",
            "q?x=1&y=2#frag",
            "a b/ c /d",
            "trailing space ",
            "..x/.y/z..",
        ]
        .map(String::from),
    );
    // With the test's `spooled/` before it, 1,024 bytes exactly: Cloud Storage's
    // limit, reached with 4-byte characters.
    const LONG: usize = 1024 - "spooled/".len();
    let mut long = String::from("long/");
    while long.len() + 4 <= LONG {
        long.push('𝄞');
    }
    while long.len() < LONG {
        long.push('a');
    }
    names.push(long);
    names
}

async fn open_spool(dir: &std::path::Path) -> Spool {
    Spool::open(dir, SpoolConfig::default()).await.unwrap()
}

#[tokio::test]
async fn hard_names_land_exactly_through_the_uploader_and_the_drainer() {
    let (fake, base) = real_fake(config(true, FaultPlan::none())).await;
    let store = gcs_store_http(&base, BUCKET).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spool = open_spool(dir.path()).await;
    let uploader = Uploader::new(
        spool.clone(),
        Remote::new(store.clone()),
        Default::default(),
    );

    for name in hard_names() {
        let direct = format!("direct/{name}");
        let outcome = uploader.upload(&direct, Bytes::from(direct.clone())).await;
        assert!(
            matches!(outcome, Ok(Outcome::Stored)),
            "{direct:?}: {outcome:?}"
        );
        let spooled = format!("spooled/{name}");
        spool
            .put_with(&spooled, Bytes::from(spooled.clone()), &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{spooled:?}: {e}"));
    }
    let attributes = every_attribute();
    let outcome = uploader
        .upload_with("direct/attributes", Bytes::from_static(b"a"), &attributes)
        .await;
    assert!(matches!(outcome, Ok(Outcome::Stored)), "{outcome:?}");
    spool
        .put_with("spooled/attributes", Bytes::from_static(b"a"), &attributes)
        .await
        .unwrap();
    let drainer = Drainer::start(spool.clone(), Remote::new(store), DrainerConfig::default());
    tokio::time::timeout(Duration::from_secs(60), spool.wait_until_empty())
        .await
        .unwrap_or_else(|_| panic!("the drain did not finish: {:?}", spool.stats()));
    drainer.shutdown().await;

    for name in hard_names() {
        for prefix in ["direct/", "spooled/"] {
            let exact = format!("{prefix}{name}");
            let bytes = fake.object_bytes(BUCKET, &exact);
            assert_eq!(
                bytes.as_deref(),
                Some(exact.as_bytes()),
                "{exact:?} is not in the bucket under its exact name"
            );
        }
    }
    let direct = fake.object(BUCKET, "direct/attributes").unwrap();
    let spooled = fake.object(BUCKET, "spooled/attributes").unwrap();
    assert_eq!(direct.content_type, "text/csv; charset=utf-8");
    assert_eq!(direct.attributes().metadata["owner"], "sre");
    assert_eq!(
        direct.attributes().cache_control.as_deref(),
        Some("no-store")
    );
    assert_eq!(
        (&spooled.content_type, spooled.attributes()),
        (&direct.content_type, direct.attributes()),
        "a spooled-then-drained object differs from the same object written directly"
    );
    assert_eq!(fake.object_count(BUCKET), 2 * hard_names().len() + 2);
}

fn every_attribute() -> Attributes {
    let mut attributes = Attributes::new();
    for (key, value) in [
        (Attribute::ContentType, "text/csv; charset=utf-8"),
        (Attribute::ContentEncoding, "identity"),
        (Attribute::CacheControl, "no-store"),
        (
            Attribute::ContentDisposition,
            "attachment; filename=\"r.csv\"",
        ),
        (Attribute::ContentLanguage, "fr"),
        (Attribute::Metadata("owner".into()), "sre"),
        (Attribute::Metadata("run".into()), "42"),
    ] {
        attributes.insert(key, value.into());
    }
    attributes
}

#[tokio::test]
async fn names_and_attributes_the_client_or_the_store_cannot_take_are_refused_before_sending() {
    let (fake, base) = real_fake(config(true, FaultPlan::none())).await;
    let store = gcs_store_http(&base, BUCKET).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spool = open_spool(dir.path()).await;
    let uploader = Uploader::new(spool.clone(), Remote::new(store), Default::default());
    let too_long = "a".repeat(1025);
    let refused = [
        "a//b",
        "/lead",
        "trail/",
        "./x",
        "a/../b",
        "line\nbreak",
        "cr\rx",
        ".",
        "..",
        &too_long,
        "",
    ];
    for name in refused {
        let err = uploader
            .upload(name, Bytes::from_static(b"x"))
            .await
            .expect_err(name);
        let UploadError::InvalidName(invalid) = &err else {
            panic!("{name:?}: not refused as a name: {err}");
        };
        let message = err.to_string();
        match invalid {
            InvalidName::Empty | InvalidName::TooLong { .. } => {}
            _ => assert!(
                message.contains(&format!("{name:?}")),
                "{message} does not name {name:?}"
            ),
        }
    }
    let mut unsendable = Attributes::new();
    unsendable.insert(Attribute::Metadata("owner".into()), "sre ☃".into());
    let err = uploader
        .upload_with("fine/name", Bytes::from_static(b"x"), &unsendable)
        .await
        .unwrap_err();
    assert!(
        matches!(err, UploadError::InvalidAttributes(_)) && err.to_string().contains("owner"),
        "{err}"
    );
    assert_eq!(
        fake.stats().requests,
        0,
        "a refused write reached the store"
    );
    assert!(spool.is_empty());
}
