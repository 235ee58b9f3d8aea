//! A delivered entry whose removal keeps failing (a read-only remount, EACCES on
//! `entries/`, an immutable file) has its removal tried again after a pause, 1 s
//! after the first failure in a row, doubling to 64 s, and is never sent again.
//! What broke first: the failed removal gave the entry back to the queue at once,
//! and the worker that delivered it had just reset its backoff, so the entry went
//! round PUT (412), read back, remove, fail, claim as fast as the store answered:
//! thousands of requests a second for one entry. Then (until 2026-12-06) it went
//! back to the queue after the pause and was sent again, answered 412 and proven
//! ours; sent again, an overwrite would land its older bytes over a newer write of
//! its name delivered meanwhile.

use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use spool::testing::{FaultDisk, FlakyStore, ManualClock, Mode, Op};
use spool::{Drainer, DrainerConfig, Metrics, Remote, Spool, SpoolConfig};

/// The remover's pause after a removal's first failure in a row, and its cap
/// (documented in `spool/src/spool/claim.rs`).
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(64);

/// A spool on a [`FaultDisk`] holding one entry whose next `failing` removals fail
/// with EACCES, drained by two workers into a healthy store that counts writes.
async fn one_entry_whose_removals_fail(
    dir: &std::path::Path,
    failing: u64,
) -> (Spool, Arc<FlakyStore>, Drainer) {
    let disk = Arc::new(FaultDisk::default());
    let (spool, _) = Spool::open_with(
        dir,
        SpoolConfig::default(),
        disk.clone(),
        Arc::new(ManualClock::new(1_791_453_600_000)),
        Metrics::default(),
    )
    .await
    .unwrap();
    spool
        .put("events/1.json", Bytes::from_static(b"{\"n\":1}"))
        .await
        .unwrap();
    for _ in 0..failing {
        disk.fail_next(Op::Remove, ErrorKind::PermissionDenied);
    }
    let store = FlakyStore::new(Mode::Healthy);
    let config = DrainerConfig {
        workers: 2,
        rng_seed: Some(7),
        ..DrainerConfig::default()
    };
    let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config);
    (spool, store, drainer)
}

#[tokio::test(start_paused = true)]
async fn a_removal_that_keeps_failing_is_retried_after_growing_pauses_not_in_a_tight_loop() {
    let dir = tempfile::tempdir().unwrap();
    // Far more than the pauses let through in ten minutes, and few enough that the
    // old tight loop ends (and the test with it).
    let (spool, store, drainer) = one_entry_whose_removals_fail(dir.path(), 2_000).await;

    let minutes = 10;
    tokio::time::sleep(Duration::from_secs(60 * minutes)).await;
    // Pauses of 1, 2, 4, ... 64 s, then 64 s each: 7 in the first 127 s, then one
    // every 64 s; each try is one removal, none a store write.
    let to_cap = (LONGEST_PAUSE.as_secs() / FIRST_PAUSE.as_secs()).ilog2() + 1;
    let at_most = 1 + u64::from(to_cap) + 60 * minutes / LONGEST_PAUSE.as_secs();
    let errors = spool.metrics().remove_errors_total();
    assert!(
        (3..=at_most).contains(&errors),
        "{errors} failed removals in {minutes} simulated minutes for one entry whose \
         removal keeps failing (expected 3 to {at_most}: retried, after pauses)"
    );
    assert_eq!(
        store.put_attempts.load(Ordering::SeqCst),
        1,
        "a delivered entry is never sent again"
    );
    assert_eq!(
        spool.stats().files,
        1,
        "the entry stays until it is removed"
    );
    drainer.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_entry_whose_removal_failed_goes_at_the_first_try_after_the_disk_heals() {
    let dir = tempfile::tempdir().unwrap();
    let started = tokio::time::Instant::now();
    let (spool, store, drainer) = one_entry_whose_removals_fail(dir.path(), 3).await;
    tokio::time::timeout(Duration::from_secs(600), spool.wait_until_empty())
        .await
        .expect("the entry is removed once removals succeed");
    // Three failures: pauses of 1, 2 and 4 s before the fourth removal.
    let waited = started.elapsed();
    let pauses = FIRST_PAUSE * (1 + 2 + 4);
    assert!(
        waited >= pauses && waited < pauses + FIRST_PAUSE,
        "removed after {waited:?}; the pauses add up to {pauses:?}"
    );
    assert_eq!(store.put_attempts.load(Ordering::SeqCst), 1);
    assert_eq!(spool.metrics().remove_errors_total(), 3);
    drainer.shutdown().await;
}
