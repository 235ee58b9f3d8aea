//! One name's entries reach the store one at a time, in the order they were made
//! safe, whatever the number of drainer workers, their retries and a reopen of the
//! spool; streamed (large) overwrites too. Before 2026-12-06 every worker took the
//! oldest unclaimed entry, so two entries of one name were written at once, and a
//! retried older one landed over the newer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::{Attributes, ObjectStoreExt as _};
use spool::testing::{FlakyStore, Mode};
use spool::{Drainer, DrainerConfig, Remote, Spool, SpoolConfig, WriteMode};

fn drainer(spool: &Spool, store: &Arc<FlakyStore>, workers: usize) -> Drainer {
    let config = DrainerConfig {
        workers,
        rng_seed: Some(3),
        ..DrainerConfig::default()
    };
    Drainer::start(spool.clone(), Remote::new(store.clone()), config)
}

async fn overwrite(spool: &Spool, name: &str, bytes: &'static [u8]) {
    let none = &Attributes::new();
    let put = spool.put_with_mode(name, Bytes::from_static(bytes), none, WriteMode::Overwrite);
    put.await.unwrap();
}

async fn stored(store: &FlakyStore, name: &str) -> Bytes {
    let got = store.inner.get(&name.into()).await.unwrap();
    got.bytes().await.unwrap()
}

/// Four workers, three entries of one name and one of another, a store that lets
/// writes through one at a time: only one write of the name is ever in flight.
#[tokio::test(start_paused = true)]
async fn four_workers_send_one_names_entries_one_at_a_time_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    for bytes in [&b"v1"[..], b"v2", b"v3"] {
        overwrite(&spool, "latest.json", bytes).await;
    }
    overwrite(&spool, "other.json", b"o").await;
    // Reopened: the order comes back from the entries' file names.
    drop(spool);
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    let store = FlakyStore::new(Mode::Gated);
    let drainer = drainer(&spool, &store, 4);
    for delivered in 0..3 {
        // The first of the name and (before it lands) the other name's only entry.
        store.wait_for_attempts(delivered + 2).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            store.put_attempts.load(std::sync::atomic::Ordering::SeqCst),
            delivered + 2,
            "after {delivered} delivered, a second write of latest.json was sent at once"
        );
        store.let_through(1);
        store.wait_for_puts(delivered + 1).await;
    }
    store.let_through(1);
    tokio::time::timeout(Duration::from_secs(60), spool.wait_until_empty())
        .await
        .unwrap();
    drainer.shutdown().await;
    assert_eq!(stored(&store, "latest.json").await, "v3");
    assert_eq!(stored(&store, "other.json").await, "o");
}

/// The first entry of a name fails (retryably) while the store takes everything
/// else: the second waits for it rather than landing first and being overwritten.
#[tokio::test(start_paused = true)]
async fn a_retried_older_entry_never_lands_over_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    overwrite(&spool, "k/latest", b"old").await;
    overwrite(&spool, "k/latest", b"new").await;
    let store = FlakyStore::new(Mode::Healthy);
    store.fail_retryably("k/");
    let drainer = drainer(&spool, &store, 4);
    store.wait_for_attempts(3).await;
    assert!(
        store.inner.head(&"k/latest".into()).await.is_err(),
        "the newer entry was written while the older was being retried"
    );
    store.fail_retryably("nothing/");
    tokio::time::timeout(Duration::from_secs(600), spool.wait_until_empty())
        .await
        .unwrap();
    drainer.shutdown().await;
    assert_eq!(stored(&store, "k/latest").await, "new");
}

/// An overwrite too large to hold is streamed to its name, and replaces what is
/// there (a create-if-absent one would be refused as another writer's).
#[tokio::test(start_paused = true)]
async fn a_streamed_overwrite_replaces_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    let big = Bytes::from(vec![7u8; 3 << 20]);
    let none = &Attributes::new();
    let put = spool.put_with_mode("big.bin", big.clone(), none, WriteMode::Overwrite);
    put.await.unwrap();
    let store = FlakyStore::new(Mode::Healthy);
    store
        .inner
        .put(&"big.bin".into(), "before".into())
        .await
        .unwrap();
    let config = DrainerConfig {
        stream_min_bytes: 1 << 20,
        part_bytes: 1 << 20,
        rng_seed: Some(3),
        ..DrainerConfig::default()
    };
    let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config);
    tokio::time::timeout(Duration::from_secs(600), spool.wait_until_empty())
        .await
        .unwrap();
    drainer.shutdown().await;
    assert_eq!(stored(&store, "big.bin").await, big);
    assert_eq!(spool.stats().dead_letter_files, 0);
}
