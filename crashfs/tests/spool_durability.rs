//! The project's spool (`StdDisk`) on crashfs, in the cases cargo-mutants found no
//! test for (docs/mutants.md): a failed write, and entries set aside or requeued
//! across a power loss.

#![cfg(feature = "fuse")]

mod common;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use crashfs::faults::{Errno, OpKind};
use spool::{Contents, Disk, SetAside, Spool, SpoolConfig, StdDisk};

/// The entry files (`*.entry`) in `dir`.
fn entry_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".entry"))
        .collect();
    names.sort();
    names
}

/// A write that fails (ENOSPC) fails `create_synced` with its error; only EINTR is
/// retried. The fault is cleared after 10 s, so that a writer that retried it
/// forever ends and this test fails instead of hanging.
#[test]
fn a_failed_write_fails_create_synced_with_its_error() {
    let Some(fx) = Fixture::new("a_failed_write_fails_create_synced_with_its_error", 31) else {
        return;
    };
    let path = fx.path("entry");
    let runtime = runtime();
    fx.mount
        .set_fault(OpKind::Write, Errno::ENOSPC, 1.0)
        .unwrap();
    let result = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(10),
            StdDisk.create_synced(&path, Contents::from(vec![7u8; 4096])),
        )
        .await
    });
    fx.mount.clear_faults();
    let err = result
        .expect("create_synced still retrying a failed write after 10 s")
        .expect_err("create_synced succeeded while every write failed");
    assert_eq!(err.raw_os_error(), Some(Errno::ENOSPC.code()), "{err}");
}

/// Once `dead_letter` or `quarantine` has returned, the move is durable: a power
/// loss leaves the entry set aside, not back in `entries/` to be sent again.
#[test]
fn an_entry_set_aside_stays_aside_across_a_power_loss() {
    let Some(fx) = Fixture::new("an_entry_set_aside_stays_aside_across_a_power_loss", 32) else {
        return;
    };
    let dir = fx.path("spool");
    runtime().block_on(async {
        let spool = Spool::open(&dir, SpoolConfig::default()).await.unwrap();
        spool.put("dead", Bytes::from_static(b"one")).await.unwrap();
        spool
            .put("corrupt", Bytes::from_static(b"two"))
            .await
            .unwrap();
        let claim = spool.claim_next().await;
        spool.dead_letter(claim, "403 forever").await.unwrap();
        let claim = spool.claim_next().await;
        spool
            .quarantine(claim, "failed verification")
            .await
            .unwrap();
    });
    fx.mount
        .power_loss_with_seed(crashfs::model::seed_keeping_almost_nothing())
        .unwrap();
    assert_eq!(entry_files(&dir.join("entries")), Vec::<String>::new());
    assert_eq!(entry_files(&dir.join("dead-letter")).len(), 1);
    assert_eq!(entry_files(&dir.join("quarantine")).len(), 1);
}

/// `requeue` takes back exactly the entries it is given, and once it has returned
/// the move is durable.
#[test]
fn a_requeue_moves_only_the_entries_named_and_durably() {
    let Some(fx) = Fixture::new("a_requeue_moves_only_the_entries_named_and_durably", 33) else {
        return;
    };
    let dir = fx.path("spool");
    runtime().block_on(async {
        let spool = Spool::open(&dir, SpoolConfig::default()).await.unwrap();
        spool
            .put("first", Bytes::from_static(b"one"))
            .await
            .unwrap();
        spool
            .put("second", Bytes::from_static(b"two"))
            .await
            .unwrap();
        let first = spool.claim_next().await;
        let wanted = first.seq();
        spool.dead_letter(first, "403").await.unwrap();
        let second = spool.claim_next().await;
        spool.dead_letter(second, "403").await.unwrap();
        let done = spool
            .requeue(SetAside::DeadLetter, Some(&[wanted]))
            .await
            .unwrap();
        let moved: Vec<u64> = done.moved.iter().map(|(_, seq)| *seq).collect();
        assert_eq!(moved, [wanted], "{done:?}");
    });
    fx.mount
        .power_loss_with_seed(crashfs::model::seed_keeping_almost_nothing())
        .unwrap();
    assert_eq!(entry_files(&dir.join("entries")).len(), 1);
    assert_eq!(entry_files(&dir.join("dead-letter")).len(), 1);
}
