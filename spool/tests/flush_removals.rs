//! Removals of delivered entries: `flush_removals` returns only once every removal
//! handed to the remover is done (`Drainer::shutdown` and `wait_until_empty` rely on
//! it, so that a stopped service leaves no delivered entry behind to send again), and
//! an entry whose file is already gone counts as removed, or is forgotten when a
//! read finds it gone. Tests that kill mutants cargo-mutants found surviving
//! (docs/mutants.md).

use bytes::Bytes;
use spool::{ReadError, Spool, SpoolConfig};

#[tokio::test]
async fn flush_removals_returns_once_the_delivered_entries_are_gone_from_disk() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("spool");
    let spool = Spool::open(&dir, SpoolConfig::default()).await.unwrap();
    for i in 0..3 {
        spool
            .put(&format!("object-{i}"), Bytes::from_static(b"payload"))
            .await
            .unwrap();
    }
    for _ in 0..3 {
        let claim = spool.claim_next().await;
        spool.remove_in_background(claim);
    }
    spool.flush_removals().await;
    let left: Vec<_> = std::fs::read_dir(dir.join("entries"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "entries still on disk: {left:?}");
    assert!(spool.is_empty());
}

/// A removal that finds the file gone (an earlier removal whose error hid its
/// success) has removed it: the entry is forgotten, not held back to be sent again
/// forever.
#[tokio::test]
async fn removing_an_entry_whose_file_is_already_gone_succeeds() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("spool");
    let spool = Spool::open(&dir, SpoolConfig::default()).await.unwrap();
    spool
        .put("object", Bytes::from_static(b"payload"))
        .await
        .unwrap();
    let claim = spool.claim_next().await;
    std::fs::remove_file(dir.join("entries").join(claim.file_name())).unwrap();
    spool.remove(claim).await.unwrap();
    assert!(spool.is_empty());
}

/// A claim whose file a read finds gone is forgotten by `forget_gone`: the spool is
/// empty, not claiming and reading the missing file again forever.
#[tokio::test]
async fn forget_gone_forgets_an_entry_whose_file_is_gone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("spool");
    let spool = Spool::open(&dir, SpoolConfig::default()).await.unwrap();
    spool
        .put("object", Bytes::from_static(b"payload"))
        .await
        .unwrap();
    let claim = spool.claim_next().await;
    std::fs::remove_file(dir.join("entries").join(claim.file_name())).unwrap();
    let err = spool.read(&claim).await.unwrap_err();
    assert!(matches!(err, ReadError::Gone(_)), "{err}");
    spool.forget_gone(claim);
    assert!(spool.is_empty());
    assert_eq!(spool.stats().files, 0);
}
