//! Probes that tell the truth (issue 52, finding 10): whether the relay takes
//! uploads is said, with its reasons, by `Relay::refusing_uploads` (what `/uploadz`
//! answers) and `spool_relay_refusing_uploads{reason}`, apart from readiness, which
//! stays the relay's serving (docs/relay.md, "Health and metrics").

mod common;

use std::sync::Arc;

use common::{BUCKET, Harness, Setup, real_fake};
use relay::RelayConfig;
use spool::testing::{FaultDisk, Op};

/// The metrics text of `relay` and its spool.
fn scrape(h: &Harness) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    h.spool.register_metrics(&mut registry);
    h.relay.register_metrics(&mut registry);
    spool::metrics::encode(&registry)
}

fn reasons(h: &Harness) -> Vec<&'static str> {
    h.relay
        .refusing_uploads()
        .iter()
        .map(|r| r.reason)
        .collect()
}

#[tokio::test]
async fn a_spool_disk_that_refuses_writes_is_said_until_a_write_is_durable_again() {
    // Found by review (52/10): a read-only spool disk made uploads 503 while
    // /readyz answered `ready`.
    let (fake, fake_base) = real_fake().await;
    common::fail_writes(&fake);
    let disk = Arc::new(FaultDisk::default());
    let setup = Setup {
        disk: Some(disk.clone()),
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    assert!(h.relay.refusing_uploads().is_empty());
    disk.fail_next_os(Op::Create, libc::EROFS);
    let refused = h.media("a", b"during the outage").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(reasons(&h), ["spool_disk"]);
    let message = &h.relay.refusing_uploads()[0].message;
    assert!(message.contains("Read-only file system"), "{message}");
    let text = scrape(&h);
    assert!(
        text.contains("spool_relay_refusing_uploads{reason=\"spool_disk\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("spool_relay_refusing_uploads{reason=\"spool_full_files\"} 0"),
        "{text}"
    );
    let spooled = h.media("b", b"the disk writes again").await;
    assert_eq!(spooled.status(), 200);
    assert!(h.relay.refusing_uploads().is_empty());
    fake.clear_faults();
    h.drained().await;
    h.stopped().await;
}

#[tokio::test]
async fn a_full_spool_and_a_missing_bucket_are_said_with_their_flags() {
    let (fake, fake_base) = real_fake().await;
    common::fail_writes(&fake);
    let setup = Setup {
        spool: spool::SpoolConfig {
            max_files: 1,
            ..spool::SpoolConfig::default()
        },
        ..Setup::default()
    };
    let h = Harness::in_front_of(&fake_base, setup).await;
    assert_eq!(h.media("a", b"fills it").await.status(), 200);
    assert_eq!(reasons(&h), ["spool_full_files"]);
    assert!(
        h.relay.refusing_uploads()[0]
            .message
            .contains("--max-files")
    );
    h.relay.bucket_checked(Some("no bucket".into()));
    assert_eq!(reasons(&h), ["spool_full_files", "bucket_missing"]);
    h.relay.bucket_checked(None);
    fake.clear_faults();
    h.drained().await;
    assert!(h.relay.refusing_uploads().is_empty());
    h.stopped().await;
}

#[tokio::test]
async fn the_upstreams_bucket_is_asked_for_with_the_relays_credentials() {
    let (_fake, fake_base) = real_fake().await;
    let config = RelayConfig {
        pass_through: relay::PassThrough::http(&fake_base, None).unwrap(),
        ..RelayConfig::new(BUCKET)
    };
    let pass = &config.pass_through;
    assert_eq!(pass.bucket_exists(BUCKET).await, Ok(true));
    assert_eq!(pass.bucket_exists("nosuch").await, Ok(false));
    let nowhere = relay::PassThrough::http("http://127.0.0.1:9", None).unwrap();
    assert!(nowhere.bucket_exists(BUCKET).await.is_err());
}
