//! Unit tests of the spool on the real file system, with injected faults.

use std::io;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::layout::{self, DEAD_LETTER_DIR, ENTRIES_DIR, QUARANTINE_DIR, temp_file_name};
use super::*;
use crate::entry;
use crate::error::{FullReason, PutError};
use crate::testing::{FaultDisk, ManualClock, Op};

const T0: u64 = 1_791_453_600_000; // 2026-10-08T10:00:00Z

struct Fixture {
    dir: tempfile::TempDir,
    disk: Arc<FaultDisk>,
    clock: Arc<ManualClock>,
}

impl Fixture {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            disk: Arc::new(FaultDisk::default()),
            clock: Arc::new(ManualClock::new(T0)),
        }
    }

    async fn open(&self, config: SpoolConfig) -> Result<(Spool, OpenReport), OpenError> {
        Spool::open_with(
            self.dir.path(),
            config,
            self.disk.clone(),
            self.clock.clone(),
            Metrics::default(),
        )
        .await
    }

    async fn spool(&self) -> Spool {
        self.open(SpoolConfig::default()).await.unwrap().0
    }

    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.path().join(ENTRIES_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }
}

fn payload(n: usize) -> Bytes {
    Bytes::from(vec![b'x'; n])
}

#[tokio::test]
async fn entries_survive_a_reopen_with_their_names_bytes_and_ages() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("a/1", Bytes::from_static(b"one")).await.unwrap();
    fx.clock.advance(Duration::from_secs(60));
    spool.put("a/2", Bytes::from_static(b"two!")).await.unwrap();
    let before = spool.stats();
    drop(spool);

    fx.clock.advance(Duration::from_secs(240));
    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.entries, 2);
    let after = spool.stats();
    assert_eq!((after.files, after.bytes), (before.files, before.bytes));
    assert_eq!(
        after.bytes,
        entry::file_bytes(3, 0, 3) + entry::file_bytes(3, 0, 4)
    );
    // The oldest entry was written 300 s ago by the clock, across the restart.
    assert_eq!(after.oldest_age, Duration::from_secs(300));

    let claim = spool.claim_oldest().unwrap();
    let (header, bytes) = spool.read(&claim).await.unwrap();
    assert_eq!((header.name.as_str(), &bytes[..]), ("a/1", &b"one"[..]));
}

#[tokio::test]
async fn a_failed_rename_fails_that_put_only() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    fx.disk.fail_next(Op::Rename, io::ErrorKind::Other);
    let err = spool.put("lost", payload(10)).await.unwrap_err();
    assert!(matches!(err, PutError::Io { .. }), "{err}");
    assert!(err.is_transient());
    assert!(fx.entries().is_empty(), "{:?}", fx.entries());
    assert_eq!(spool.stats().broken, None);
    spool.put("next", payload(10)).await.unwrap();
    assert_eq!(spool.stats().files, 1);
}

#[tokio::test]
async fn a_crash_between_write_and_rename_leaves_a_temp_file_that_open_deletes() {
    let fx = Fixture::new();
    drop(fx.spool().await);
    let tmp = fx.dir.path().join(ENTRIES_DIR).join(temp_file_name(1));
    std::fs::write(&tmp, b"half an entry").unwrap();
    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.temp_files_removed, 1);
    assert_eq!(spool.stats().files, 0);
    assert!(fx.entries().is_empty(), "{:?}", fx.entries());
}

#[tokio::test]
async fn a_failed_temp_file_write_fails_that_put_only() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    fx.disk.fail_next(Op::Create, io::ErrorKind::Other);
    let err = spool.put("lost", payload(10)).await.unwrap_err();
    assert!(matches!(err, PutError::Io { .. }), "{err}");
    assert!(fx.entries().is_empty(), "{:?}", fx.entries());
    spool.put("next", payload(10)).await.unwrap();
    assert_eq!(spool.stats().broken, None);
}

/// Starts `n` puts of `size`-byte payloads at once; returns their results.
async fn put_concurrently(spool: &Spool, n: usize, size: usize) -> Vec<Result<Receipt, PutError>> {
    let puts = (0..n).map(|i| {
        let spool = spool.clone();
        tokio::spawn(async move { spool.put(&format!("o/{i}"), payload(size)).await })
    });
    futures::future::join_all(puts)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

#[tokio::test]
async fn concurrent_puts_never_exceed_max_files() {
    let fx = Fixture::new();
    let config = SpoolConfig {
        max_files: 10,
        ..SpoolConfig::default()
    };
    let (spool, _) = fx.open(config).await.unwrap();
    let results = put_concurrently(&spool, 100, 100).await;
    let stored = results.iter().filter(|r| r.is_ok()).count();
    let full = results
        .iter()
        .filter(|r| matches!(r, Err(PutError::Full(FullReason::Files { max_files: 10 }))))
        .count();
    assert_eq!((stored, full), (10, 90));
    assert_eq!(spool.stats().files, 10);
    assert_eq!(fx.entries().len(), 10);
}

#[tokio::test]
async fn concurrent_puts_never_exceed_max_bytes() {
    let fx = Fixture::new();
    let one = entry::file_bytes(3, 0, 1000);
    let config = SpoolConfig {
        max_bytes: one * 5 + one / 2,
        ..SpoolConfig::default()
    };
    let (spool, _) = fx.open(config.clone()).await.unwrap();
    let results = put_concurrently(&spool, 40, 1000).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 5);
    assert!(spool.stats().bytes <= config.max_bytes);
    assert!(results.iter().all(|r| match r {
        Ok(_) => true,
        Err(e) => matches!(e, PutError::Full(FullReason::Bytes { .. })),
    }));
}

#[tokio::test]
async fn an_entry_that_can_never_fit_is_refused_as_too_large() {
    let fx = Fixture::new();
    let config = SpoolConfig {
        max_bytes: 1000,
        ..SpoolConfig::default()
    };
    let (spool, _) = fx.open(config).await.unwrap();
    let err = spool.put("big", payload(1000)).await.unwrap_err();
    assert!(
        matches!(
            err,
            PutError::TooLarge {
                entry_bytes: 1051,
                max_bytes: 1000
            }
        ),
        "{err}"
    );
    assert!(!err.is_transient());
}

#[tokio::test]
async fn names_cloud_storage_would_refuse_are_refused_before_any_write() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    for bad in ["", ".", "a\nb"] {
        let err = spool.put(bad, payload(1)).await.unwrap_err();
        assert!(matches!(err, PutError::InvalidName(_)), "{bad:?}: {err}");
    }
    assert!(fx.entries().is_empty());
}

#[tokio::test]
async fn a_corrupt_entry_is_indexed_at_open_and_quarantined_when_read_never_handed_out() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("bad", payload(10)).await.unwrap();
    spool.put("good", payload(10)).await.unwrap();
    drop(spool);
    let file = fx.entries()[0].clone();
    let path = fx.dir.path().join(ENTRIES_DIR).join(&file);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    std::fs::write(fx.dir.path().join(ENTRIES_DIR).join("stray.txt"), b"?").unwrap();

    // Open lists and does not read payloads: the stray is set aside, the corrupt
    // entry is indexed from its name.
    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.entries, 2);
    assert_eq!(report.quarantined.len(), 1, "{:?}", report.quarantined);
    assert!(report.quarantined[0].1.contains("not a spool entry"));

    // The read that would upload it fails verification instead.
    let claim = spool.claim_oldest().unwrap();
    let err = spool.read(&claim).await.unwrap_err();
    assert!(err.is_final(), "{err}");
    assert!(err.to_string().contains("payload checksum"), "{err}");
    spool.quarantine(claim, &err.to_string()).await.unwrap();
    let stats = spool.stats();
    assert_eq!((stats.files, stats.quarantined_files), (1, 2));
    assert_eq!(spool.metrics().quarantined_total(), 2);
    let reason = std::fs::read_to_string(
        fx.dir
            .path()
            .join(QUARANTINE_DIR)
            .join(format!("{file}.reason")),
    )
    .unwrap();
    assert!(reason.contains("checksum"), "{reason}");
    // New entries never reuse the quarantined entry's sequence number.
    assert_eq!(spool.put("next", payload(1)).await.unwrap().seq, 3);
}

#[tokio::test]
async fn a_stray_file_is_quarantined_even_when_its_note_cannot_be_written() {
    let fx = Fixture::new();
    drop(fx.spool().await);
    std::fs::write(fx.dir.path().join(ENTRIES_DIR).join("stray"), b"?").unwrap();
    // The disk is full: the note cannot be written, the move still happens.
    fx.disk.fail_next(Op::Create, io::ErrorKind::StorageFull);
    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(spool.stats().quarantined_files, 1);
    assert!(fx.dir.path().join(QUARANTINE_DIR).join("stray").exists());
}

/// Two entry files with one sequence number can only be made by hand (a copy, a
/// restore over a live spool): open keeps one, sets the other aside with the reason,
/// and the totals agree with the index.
#[cfg(unix)]
#[tokio::test]
async fn a_file_whose_name_is_not_utf8_is_quarantined_with_a_reason_and_reported() {
    // Before: such a file was left out of the listing, so it was neither drained
    // nor quarantined nor reported, and stayed in entries/ for good.
    use std::os::unix::ffi::OsStrExt as _;
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("kept", payload(3)).await.unwrap();
    drop(spool);
    let name = std::ffi::OsStr::from_bytes(b"00000000000000000009.\xff.entry");
    std::fs::write(fx.dir.path().join(ENTRIES_DIR).join(name), b"?").unwrap();
    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.quarantined.len(), 1, "{:?}", report.quarantined);
    let (shown, reason) = &report.quarantined[0];
    assert_eq!(shown, "00000000000000000009.\u{fffd}.entry");
    assert!(reason.contains("not UTF-8"), "{reason}");
    assert_eq!(fx.entries().len(), 1, "{:?}", fx.entries());
    let quarantine = fx.dir.path().join(QUARANTINE_DIR);
    let note = std::fs::read_to_string(quarantine.join(format!("{shown}.reason"))).unwrap();
    assert!(note.contains("not UTF-8"), "{note}");
    assert_eq!(spool.stats().quarantined_files, 1);
    assert_eq!(spool.stats().files, 1);
}

#[tokio::test]
async fn two_entry_files_with_one_sequence_number_keep_one_and_quarantine_the_other() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("a", payload(10)).await.unwrap();
    spool.put("b", payload(20)).await.unwrap();
    drop(spool);
    let entries = fx.dir.path().join(ENTRIES_DIR);
    let first = fx.entries()[0].clone();
    let header = layout::parse_entry_name(&first).unwrap().listed.unwrap();
    let copy = layout::entry_file_name(
        1,
        header.created_unix_ms + 1,
        header.file_bytes,
        header.name_key.unwrap(),
    );
    std::fs::copy(entries.join(&first), entries.join(&copy)).unwrap();

    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.entries, 2, "{report:?}");
    assert_eq!(
        report.quarantined,
        vec![(
            copy.clone(),
            "another entry file has the same sequence number".to_string()
        )]
    );
    let stats = spool.stats();
    assert_eq!((stats.files, stats.quarantined_files), (2, 1));
    assert!(fx.dir.path().join(QUARANTINE_DIR).join(&copy).exists());
    assert_eq!(spool.put("c", payload(1)).await.unwrap().seq, 3);
}

#[tokio::test]
async fn a_spool_written_before_the_format_change_opens_and_reads() {
    let fx = Fixture::new();
    copy_dir(
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/v1-spool"
        )),
        fx.dir.path(),
    );
    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.entries, 2, "{report:?}");
    assert!(report.quarantined.is_empty(), "{report:?}");
    let stats = spool.stats();
    assert_eq!(stats.dead_letter_files, 1);
    let claim = spool.claim_oldest().unwrap();
    let (header, bytes) = spool.read(&claim).await.unwrap();
    assert_eq!(header.name, "logs/2026-10-08/a.json");
    assert_eq!(&bytes[..], b"{\"outage\":true}");
    spool.remove(claim).await.unwrap();
    let claim = spool.claim_oldest().unwrap();
    let (header, bytes) = spool.read(&claim).await.unwrap();
    assert_eq!(
        (header.name.as_str(), bytes.len()),
        ("ünï/cødé ☃ 100%.txt", 5000)
    );
    // Numbers continue after the dead letter and the entries.
    assert_eq!(spool.put("new", payload(1)).await.unwrap().seq, 4);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn the_lock_refuses_a_second_opener() {
    let fx = Fixture::new();
    let _first = fx.spool().await;
    let err = fx.open(SpoolConfig::default()).await.unwrap_err();
    assert!(matches!(err, OpenError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("in use"), "{err}");
}

#[tokio::test]
async fn a_full_disk_is_backpressure_not_a_broken_spool() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    fx.disk.fail_next(Op::Create, io::ErrorKind::StorageFull);
    let err = spool.put("a", payload(10)).await.unwrap_err();
    assert!(matches!(err, PutError::Full(FullReason::Disk)), "{err}");
    assert!(err.is_transient());
    assert!(
        fx.entries().is_empty(),
        "the partial file was not cleaned up"
    );
    spool.put("a", payload(10)).await.unwrap();
    assert_eq!(spool.stats().broken, None);
}

#[tokio::test(start_paused = true)]
async fn a_failed_directory_sync_stops_puts_until_the_spool_has_reopened_itself() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("before", payload(10)).await.unwrap();
    fx.disk.fail_next(Op::SyncDir, io::ErrorKind::Other);
    let err = spool.put("a", payload(10)).await.unwrap_err();
    assert!(matches!(err, PutError::Broken { .. }), "{err}");
    assert!(err.is_transient(), "{err}");
    // The disk is healthy again, but an fsync is never retried: puts are refused
    // and nothing is handed to the drainer until the spool has reopened.
    let again = spool.put("b", payload(10)).await.unwrap_err();
    assert!(again.to_string().contains("syncing directory"), "{again}");
    assert!(spool.stats().broken.is_some());
    assert!(spool.claim_oldest().is_none());

    tokio::time::sleep(Duration::from_secs(2)).await;
    let stats = spool.stats();
    assert_eq!(stats.broken, None);
    assert_eq!(spool.metrics().recoveries_total(), 1);
    // Reopened from the directory: the put whose sync failed was renamed into
    // place and is indexed (its caller was told it failed; delivering it is safe).
    assert_eq!(stats.files, 2);
    assert_eq!(fx.entries().len(), 2);
    spool.put("b", payload(10)).await.unwrap();
    assert_eq!(spool.stats().files, 3);
}

/// Out of file descriptors (EMFILE), `entries/` could not be opened to sync it: the
/// spool reported itself broken and reopened (`torture faults --only fds`), as if an
/// fsync had failed and dropped what it covered. No fsync ran: the put fails alone.
#[tokio::test(start_paused = true)]
async fn a_directory_that_cannot_be_opened_for_want_of_descriptors_does_not_break_the_spool() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    fx.disk.fail_next_os(Op::SyncDir, libc::EMFILE);
    let err = spool.put("a", payload(10)).await.unwrap_err();
    assert!(matches!(err, PutError::Io { .. }), "{err}");
    assert!(err.is_transient(), "{err}");
    assert_eq!(spool.stats().broken, None);
    // Complete on disk, not acknowledged: indexed, so that it drains.
    assert_eq!(spool.stats().files, 1);
    spool.put("b", payload(10)).await.unwrap();
    assert_eq!((spool.stats().files, fx.entries().len()), (2, 2));
    assert_eq!(spool.metrics().recoveries_total(), 0);
}

/// Out of file descriptors, an entry could not be opened to read it: each such read
/// counted against the entry, and five in a row quarantined a healthy entry
/// (`torture faults --only fds`: an acknowledged upload set aside, never delivered).
#[tokio::test]
async fn reads_that_fail_for_want_of_descriptors_never_quarantine_an_entry() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("a", payload(10)).await.unwrap();
    for _ in 0..2 * UNREADABLE_AFTER {
        let claim = spool.claim_oldest().unwrap();
        fx.disk.fail_next_os(Op::Read, libc::EMFILE);
        let err = spool.read(&claim).await.unwrap_err();
        assert!(err.out_of_descriptors(), "{err}");
        assert!(!err.is_final(), "{err}");
    }
    let claim = spool.claim_oldest().unwrap();
    let (header, data) = spool.read(&claim).await.unwrap();
    assert_eq!((header.name.as_str(), data.len()), ("a", 10));
    // An I/O error of the entry's own still counts.
    drop(claim);
    for n in 1..=UNREADABLE_AFTER {
        let claim = spool.claim_oldest().unwrap();
        fx.disk.fail_next(Op::Read, io::ErrorKind::Other);
        let err = spool.read(&claim).await.unwrap_err();
        assert_eq!(err.is_final(), n == UNREADABLE_AFTER, "{err}");
    }
}

#[tokio::test]
async fn concurrent_puts_share_directory_syncs() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    let syncs_at_open = fx.disk.syncs.load(Ordering::SeqCst);
    // The first sync waits until all 32 puts have renamed their files, so it covers
    // the first and the second covers the rest: 2 syncs for 32 puts.
    fx.disk.hold_syncs_until_renames(32);
    for r in put_concurrently(&spool, 32, 10).await {
        r.unwrap();
    }
    assert_eq!(fx.disk.syncs.load(Ordering::SeqCst) - syncs_at_open, 2);
}

#[tokio::test]
async fn a_put_whose_caller_gives_up_still_completes() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    fx.disk.hold_syncs_until_renames(2);
    let abandoned = {
        let spool = spool.clone();
        tokio::spawn(async move { spool.put("abandoned", payload(10)).await })
    };
    // Let it reach the held directory sync, then abandon it.
    while fx.disk.renames.load(Ordering::SeqCst) < 1 {
        tokio::task::yield_now().await;
    }
    abandoned.abort();
    spool.put("second", payload(10)).await.unwrap();
    assert_eq!(spool.stats().files, 2);
    assert_eq!(spool.stats().reserved_files, 0);
}

#[tokio::test]
async fn claims_are_oldest_first_disjoint_and_returned_when_dropped() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    for i in 0..3 {
        spool.put(&format!("o/{i}"), payload(1)).await.unwrap();
    }
    let first = spool.claim_oldest().unwrap();
    let second = spool.claim_oldest().unwrap();
    assert_eq!((first.seq(), second.seq()), (1, 2));
    assert_eq!(spool.stats().claimed, 2);
    drop(first);
    assert_eq!(spool.claim_oldest().unwrap().seq(), 1);
    spool.remove(second).await.unwrap();
    let stats = spool.stats();
    assert_eq!((stats.files, stats.claimed), (2, 0));
    let seqs: Vec<u64> = fx
        .entries()
        .iter()
        .filter_map(|f| layout::parse_seq(f))
        .collect();
    assert_eq!(seqs, [1, 3]);
}

#[tokio::test]
async fn batch_claims_keep_to_their_count_bytes_and_share_and_read_in_order() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    for i in 1..=10 {
        spool
            .put(&format!("o/{i:02}"), payload(1000))
            .await
            .unwrap();
    }
    let file_bytes = spool.stats().bytes / 10;
    let seqs = |claims: &[Claim]| claims.iter().map(Claim::seq).collect::<Vec<_>>();

    let first = spool.claim_oldest_batch(4, u64::MAX, 1);
    assert_eq!(seqs(&first), [1, 2, 3, 4], "at most max_entries");
    let by_bytes = spool.claim_oldest_batch(16, 2 * file_bytes + 1, 1);
    assert_eq!(seqs(&by_bytes), [5, 6], "at most max_bytes");
    let one = spool.claim_oldest_batch(16, 0, 1);
    assert_eq!(seqs(&one), [7], "always one, whatever its size");
    let share = spool.claim_oldest_batch(16, u64::MAX, 2);
    assert_eq!(seqs(&share), [8], "3 unclaimed among 2 claimants: 1 each");
    assert_eq!(spool.stats().claimed, 8);

    drop(first);
    std::fs::remove_file(
        fx.dir
            .path()
            .join(ENTRIES_DIR)
            .join(by_bytes[1].file_name()),
    )
    .unwrap();
    let rest = spool.claim_oldest_batch(16, u64::MAX, 1);
    assert_eq!(
        seqs(&rest),
        [1, 2, 3, 4, 9, 10],
        "oldest first, claimed ones skipped"
    );
    assert!(spool.claim_oldest_batch(16, u64::MAX, 1).is_empty());

    let reads = spool.read_batch(&rest).await;
    let names: Vec<String> = reads.into_iter().map(|read| read.unwrap().0.name).collect();
    assert_eq!(names, ["o/01", "o/02", "o/03", "o/04", "o/09", "o/10"]);
    let reads = spool.read_batch(&by_bytes).await;
    assert_eq!(reads[0].as_ref().unwrap().1, payload(1000));
    assert!(
        matches!(reads[1], Err(ReadError::Gone(_))),
        "a missing file is gone at its own place: {:?}",
        reads[1]
    );
}

#[tokio::test]
async fn removals_are_synced_once_per_batch_and_when_the_spool_empties() {
    let fx = Fixture::new();
    let config = SpoolConfig {
        remove_sync_batch: 3,
        ..SpoolConfig::default()
    };
    let (spool, _) = fx.open(config).await.unwrap();
    for i in 0..7 {
        spool.put(&format!("o/{i}"), payload(1)).await.unwrap();
    }
    let before = fx.disk.syncs.load(Ordering::SeqCst);
    let mut syncs = Vec::new();
    while let Some(claim) = spool.claim_oldest() {
        spool.remove(claim).await.unwrap();
        syncs.push(fx.disk.syncs.load(Ordering::SeqCst) - before);
    }
    // Synced after the 3rd and 6th removal, and after the 7th emptied the spool.
    assert_eq!(syncs, [0, 0, 1, 1, 1, 2, 3]);
}

#[tokio::test]
async fn dead_letters_keep_the_bytes_and_the_error_and_survive_reopen() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("poison", payload(5)).await.unwrap();
    let claim = spool.claim_oldest().unwrap();
    spool
        .dead_letter(claim, "HTTP 403: forbidden")
        .await
        .unwrap();
    assert_eq!(spool.stats().files, 0);
    assert_eq!(spool.metrics().dead_lettered_total(), 1);
    let dl = fx.dir.path().join(DEAD_LETTER_DIR);
    let file = std::fs::read_dir(&dl)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|f| layout::parse_seq(f) == Some(1))
        .unwrap();
    let (header, bytes) =
        entry::decode(Bytes::from(std::fs::read(dl.join(&file)).unwrap())).unwrap();
    assert_eq!((header.name.as_str(), bytes.len()), ("poison", 5));
    let error = std::fs::read_to_string(dl.join(format!("{file}.error")));
    assert!(error.unwrap().contains("403"));
    drop(spool);

    let spool = fx.spool().await;
    assert_eq!(spool.stats().dead_letter_files, 1);
    // Sequence numbers continue after the dead letter's.
    assert_eq!(spool.put("next", payload(1)).await.unwrap().seq, 2);
}

#[tokio::test]
async fn claim_next_wakes_up_when_an_entry_arrives() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    let waiter = {
        let spool = spool.clone();
        tokio::spawn(async move { spool.claim_next().await.seq() })
    };
    tokio::task::yield_now().await;
    spool.put("x", payload(1)).await.unwrap();
    assert_eq!(waiter.await.unwrap(), 1);
}

#[tokio::test]
async fn invalid_configuration_is_refused_with_the_field_name() {
    let fx = Fixture::new();
    let err = fx
        .open(SpoolConfig {
            max_files: 0,
            ..SpoolConfig::default()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("max_files"), "{err}");
}

/// The debug-build check walks the index once per `max(len, 1024)` changes rather
/// than after every change (a put into a backlog of 1.8M entries summed them all),
/// yet a running total that drifted from the index is still caught.
#[test]
#[should_panic(expected = "bytes disagree with the index")]
fn a_drifted_byte_total_is_caught_by_the_sampled_index_walk() {
    let meta = Meta::new(10, T0, crate::name::key("a"), super::Naming::Keyed);
    let mut state = State {
        index: super::Index::new(std::collections::BTreeMap::from([(1, meta)])),
        reserved_files: 0,
        reserved_bytes: 0,
        next_seq: 2,
        broken: None,
        recovering: false,
        disk_refused: None,
        quarantined_files: 0,
        dead_letter_files: 0,
        unsynced_removes: 0,
        removals: Vec::new(),
        removing: Vec::new(),
        changes_since_index_check: 0,
    };
    // The entry's size drifts from the index's running total.
    state.index.get_mut(1).unwrap().file_bytes = 11;
    let config = SpoolConfig::default();
    for _ in 0..INDEX_CHECK_MIN_CHANGES - 1 {
        state.check(&config);
    }
    assert_eq!(
        state.changes_since_index_check,
        INDEX_CHECK_MIN_CHANGES - 1,
        "the index was walked before its turn"
    );
    state.check(&config);
}

/// A put was acknowledged for names Cloud Storage allows but the client cannot
/// write exactly (object_store's `Path` refuses or rewrites them): the drain could
/// never deliver them. Every entry point applies the one rule now.
#[tokio::test]
async fn names_the_drain_cannot_deliver_are_refused_at_put() {
    let (spool, _disk) = crate::testing::mem_spool(SpoolConfig::default()).await;
    for name in [
        "a\u{1}b",
        "tab\there",
        "nul\0",
        "a/./b",
        "a/../b",
        "./a",
        "a//b",
        "a/",
        "/a",
    ] {
        let refused = spool.put(name, Bytes::from_static(b"x")).await;
        assert!(
            matches!(refused, Err(PutError::InvalidName(_))),
            "{name:?} was not refused: {refused:?}"
        );
        let staged = spool.stage(name, &object_store::Attributes::new()).await;
        assert!(
            matches!(staged, Err(PutError::InvalidName(_))),
            "{name:?} was staged"
        );
    }
    assert!(spool.is_empty());
}

/// A payload streamed in pieces becomes the entry a put of the whole would have made:
/// same name, attributes, bytes and size on disk, verified by the drain's reader,
/// surviving a reopen.
#[tokio::test]
async fn a_staged_entry_commits_to_the_entry_a_put_would_make() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    let mut attributes = object_store::Attributes::new();
    attributes.insert(object_store::Attribute::ContentType, "text/csv".into());
    let mut staged = spool.stage("s/1", &attributes).await.unwrap();
    let whole: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    for piece in whole.chunks(70_000) {
        staged.append(Bytes::copy_from_slice(piece)).await.unwrap();
    }
    assert_eq!(staged.payload_len(), whole.len() as u64);
    assert!(staged.read_payload().await.unwrap() == whole);
    assert_eq!(spool.stats().files, 0, "indexed before its commit");
    let receipt = staged.commit().await.unwrap();
    assert_eq!(
        receipt.file_bytes,
        entry::file_bytes(
            3,
            entry::encode_attributes(&attributes).unwrap().len(),
            300_000
        )
    );
    drop(spool);

    let (spool, _) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(spool.stats().bytes, receipt.file_bytes);
    let claim = spool.claim_oldest().unwrap();
    let (header, bytes) = spool.read(&claim).await.unwrap();
    assert_eq!(header.name, "s/1");
    assert_eq!(header.attributes, attributes);
    assert!(bytes == whole, "the payload read back differs");
}

/// A stream that would take the spool past `max_bytes` is refused at the piece that
/// would, and a staged entry dropped without a commit leaves neither its file nor
/// its reservation behind.
#[tokio::test]
async fn a_staged_entry_is_bounded_by_max_bytes_and_cleaned_up_when_dropped() {
    let fx = Fixture::new();
    let config = SpoolConfig {
        max_bytes: 10_000,
        ..SpoolConfig::default()
    };
    let (spool, _) = fx.open(config).await.unwrap();
    let mut staged = spool
        .stage("big", &object_store::Attributes::new())
        .await
        .unwrap();
    staged.append(payload(6_000)).await.unwrap();
    let refused = staged.append(payload(6_000)).await.unwrap_err();
    assert!(matches!(refused, PutError::TooLarge { .. }), "{refused}");
    assert_eq!(staged.payload_len(), 6_000, "the refused piece was counted");
    assert_eq!(spool.stats().reserved_bytes, entry::file_bytes(3, 0, 6_000));
    staged.discard().await;
    assert_eq!(
        spool.stats().reserved_bytes,
        0,
        "room kept after the discard"
    );
    assert_eq!(spool.stats().reserved_files, 0);
    assert!(fx.entries().is_empty(), "left behind: {:?}", fx.entries());
    spool.put("fits", payload(9_000)).await.unwrap();

    // Dropped instead: the room comes back at once (the file goes in a task).
    let mut dropped = spool
        .stage("dropped", &object_store::Attributes::new())
        .await
        .unwrap();
    dropped.append(payload(500)).await.unwrap();
    assert_eq!(spool.stats().reserved_files, 1);
    drop(dropped);
    assert_eq!(spool.stats().reserved_files, 0, "room kept after the drop");
    assert_eq!(spool.stats().reserved_bytes, 0);
}

/// An append that failed leaves the file's contents unknown: the entry cannot be
/// committed, and the spool goes on.
#[tokio::test]
async fn a_staged_entry_whose_append_failed_cannot_be_committed() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    let mut staged = spool
        .stage("s", &object_store::Attributes::new())
        .await
        .unwrap();
    staged.append(payload(10)).await.unwrap();
    fx.disk.fail_next(Op::Append, io::ErrorKind::Other);
    assert!(matches!(
        staged.append(payload(10)).await,
        Err(PutError::Io { .. })
    ));
    assert!(matches!(staged.commit().await, Err(PutError::Io { .. })));
    assert_eq!(spool.stats().files, 0);
    assert_eq!(spool.stats().broken, None);
    spool.put("next", payload(10)).await.unwrap();
}

/// After a failed directory sync every later wait on that directory fails, even one
/// whose own fsync would now succeed, until the spool has reopened (`reset`): the
/// kernel may have dropped the changes the failed fsync covered, and a retry
/// reports success for them. Kills a cargo-mutants survivor (docs/mutants.md): the
/// descriptor guard forced true, which forgot every failure.
#[tokio::test]
async fn a_failed_directory_sync_fails_every_later_wait_until_reset() {
    let root = tempfile::tempdir().unwrap();
    let disk = FaultDisk::default();
    let sync = group_commit::DirSync::default();
    let first = sync.ticket();
    disk.fail_next(Op::SyncDir, io::ErrorKind::Other);
    assert!(sync.wait_durable(&disk, root.path(), first).await.is_err());
    let later = sync.ticket();
    assert!(
        sync.wait_durable(&disk, root.path(), later).await.is_err(),
        "a wait after a failed sync succeeded"
    );
    sync.reset().await;
    sync.wait_durable(&disk, root.path(), later).await.unwrap();
}

#[tokio::test]
async fn an_entry_claimed_by_its_number_is_skipped_by_the_drain_order_and_removed_for_good() {
    let fx = Fixture::new();
    let spool = fx.spool().await;
    spool.put("a/1", Bytes::from_static(b"one")).await.unwrap();
    let second = spool.put("a/2", Bytes::from_static(b"two")).await.unwrap();
    spool
        .put("a/3", Bytes::from_static(b"three"))
        .await
        .unwrap();

    let taken = spool.claim_entry(second.seq).unwrap();
    assert!(spool.claim_entry(second.seq).is_none(), "claimed once");
    let first = spool.claim_oldest().unwrap();
    assert!(
        spool.claim_entry(first.seq()).is_none(),
        "a drainer's claim is refused"
    );
    let third = spool.claim_oldest().unwrap();
    assert!(third.seq() > second.seq, "the claimed entry is skipped");
    drop((first, third));

    let (file, file_bytes) = spool
        .entry_file(second.seq)
        .expect("claimed, still indexed");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), file_bytes);
    spool.remove(taken).await.unwrap();
    assert!(spool.claim_entry(second.seq).is_none(), "gone");
    assert_eq!(
        spool.entry_file(second.seq),
        None,
        "a removed entry has no file"
    );
    assert_eq!(fx.entries().len(), 2);
    drop(spool);
    let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
    assert_eq!(report.entries, 2);
    // Claims are held until the loop ends: a dropped claim is given back and would be
    // claimed again.
    let mut claims = Vec::new();
    let mut names = Vec::new();
    while let Some(claim) = spool.claim_oldest() {
        names.push(spool.read(&claim).await.unwrap().0.name);
        claims.push(claim);
    }
    assert_eq!(names, ["a/1", "a/3"]);
}

#[tokio::test]
async fn a_disk_that_refuses_a_put_is_told_until_a_put_is_durable_again() {
    // Found by review (52/10): a read-only spool disk made every spooled upload
    // fail while the relay's readiness said all was well; the spool now says what
    // its disk last refused.
    let fx = Fixture::new();
    let spool = fx.spool().await;
    assert_eq!(spool.stats().disk_refused, None);
    fx.disk.fail_next_os(Op::Create, libc::EROFS);
    let refused = spool.put("a", payload(3)).await.unwrap_err();
    assert!(matches!(refused, PutError::Io { .. }), "{refused:?}");
    let told = spool.stats().disk_refused.expect("the refusal is told");
    assert!(told.contains("Read-only file system"), "{told}");
    fx.disk.fail_next_os(Op::Create, libc::ENOSPC);
    let full = spool.put("b", payload(3)).await.unwrap_err();
    assert!(matches!(full, PutError::Full(FullReason::Disk)), "{full:?}");
    let told = spool.stats().disk_refused.expect("still told");
    assert!(told.contains("No space left"), "{told}");
    spool.put("c", payload(3)).await.unwrap();
    assert_eq!(spool.stats().disk_refused, None);
}
