//! `flush_removals` returns only once every removal handed to the remover is done:
//! `Drainer::shutdown` and `wait_until_empty` rely on it, so that a stopped service
//! leaves no delivered entry behind to send again. A test that kills two mutants
//! cargo-mutants found surviving (docs/mutants.md).

use bytes::Bytes;
use spool::{Spool, SpoolConfig};

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
