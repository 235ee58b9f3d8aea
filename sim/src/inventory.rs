//! The final inventory: what each host's disk still holds once the run is over,
//! taken the hard way. Every host loses power first (the crash model decides what
//! of its last moments survives), then its spool is opened again on that disk (as a
//! restart would, through the same `Disk`, outside the simulation and with the
//! disk's faults off), and every file in `entries/`, `dead-letter/` and
//! `quarantine/` is read straight from the disk and decoded in full. The checker
//! compares each entry's name, length and crc32c with the ledger: nothing the system
//! says about itself is taken on trust.

use std::path::Path;
use std::sync::Arc;

use spool::layout::{DEAD_LETTER_DIR, ENTRIES_DIR, ERROR_SUFFIX, QUARANTINE_DIR, REASON_SUFFIX};
use spool::{Metrics, Spool, SpoolConfig, Stats};

use crate::hosts::control::SPOOL_DIR;
use crate::simdisk::SimDisk;

/// One entry file, decoded in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The object name in its header.
    pub name: String,
    /// Payload length.
    pub size: u64,
    /// crc32c of the payload, as read (not as the header says).
    pub crc32c: u32,
}

/// What a host's spool held when the run ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    /// Entries still pending in `entries/`.
    pub pending: Vec<Entry>,
    /// Entries in `dead-letter/`.
    pub dead_letter: Vec<Entry>,
    /// Entries in `quarantine/` that still decode.
    pub quarantine: Vec<Entry>,
    /// Files that do not decode (where and why): a torn or damaged entry.
    pub unreadable: Vec<String>,
    /// The reopened spool's stats.
    pub stats: Stats,
    /// The reopen failed: why (the files were still read).
    pub open_error: Option<String>,
}

/// Cuts the power of `disk`, reopens the spool on it and reads everything there.
/// Runs on its own runtime, outside turmoil.
pub fn take(disk: &SimDisk, config: &SpoolConfig, now_unix_ms: u64) -> Inventory {
    disk.power_loss();
    disk.stop_faults();
    let runtime = paused_runtime();
    let read =
        async { tokio::time::timeout(REOPEN_LIMIT, read_all(disk, config, now_unix_ms)).await };
    runtime.block_on(read).unwrap_or_else(|_| Inventory {
        open_error: Some(format!(
            "the final inventory did not finish within {REOPEN_LIMIT:?} (paused time): a reopen waiting for something that never comes"
        )),
        ..Inventory::default()
    })
}

/// A runtime of its own, outside turmoil, whose time moves only when every task
/// waits.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}

/// How long, in the inventory's paused time, reading a disk may take: far more than
/// any reopen's backoff; a hang becomes a failed run that says so, not a run that
/// never ends.
const REOPEN_LIMIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

struct FixedClock(u64);

impl spool::Clock for FixedClock {
    fn now_unix_ms(&self) -> u64 {
        self.0
    }
}

async fn read_all(disk: &SimDisk, config: &SpoolConfig, now_unix_ms: u64) -> Inventory {
    let root = Path::new(SPOOL_DIR);
    let mut inventory = Inventory::default();
    let opened = Spool::open_with(
        root,
        config.clone(),
        Arc::new(disk.clone()),
        Arc::new(FixedClock(now_unix_ms)),
        Metrics::default(),
    )
    .await;
    match opened {
        Ok((spool, _)) => {
            inventory.stats = spool.stats();
            drop(spool);
        }
        Err(e) => inventory.open_error = Some(e.to_string()),
    }
    for (sub, into) in [
        (ENTRIES_DIR, &mut inventory.pending),
        (DEAD_LETTER_DIR, &mut inventory.dead_letter),
        (QUARANTINE_DIR, &mut inventory.quarantine),
    ] {
        let unreadable = &mut inventory.unreadable;
        disk.visit_files_with_contents(&root.join(sub), |file, read| {
            if file.ends_with(REASON_SUFFIX) || file.ends_with(ERROR_SUFFIX) {
                return;
            }
            // Joined one file at a time: a backlog's entries are never copied at once.
            match read.map(|contents| spool::entry::decode(contents.to_bytes())) {
                Ok(Ok((header, payload))) => into.push(Entry {
                    name: header.name,
                    size: payload.len() as u64,
                    crc32c: crc32c::crc32c(&payload),
                }),
                Ok(Err(e)) => unreadable.push(format!("{sub}/{file}: {e}")),
                Err(e) => unreadable.push(format!("{sub}/{file}: {e}")),
            }
        });
    }
    inventory
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::simdisk::DiskConfig;

    /// A disk with one entry written through the spool (its operations counted in
    /// `SimDisk::ops`).
    fn disk_with_one_entry(config: &SpoolConfig) -> SimDisk {
        let disk = SimDisk::new(DiskConfig::default(), 7);
        paused_runtime().block_on(async {
            let (spool, _) = Spool::open_with(
                Path::new(SPOOL_DIR),
                config.clone(),
                Arc::new(disk.clone()),
                Arc::new(FixedClock(1_000)),
                Metrics::default(),
            )
            .await
            .unwrap();
            spool
                .put("a/b", Bytes::from_static(b"payload"))
                .await
                .unwrap();
        });
        disk
    }

    /// An `after_disk_ops` crash the run never reached must not fire while the
    /// inventory reopens the spool: that froze the reopen for good (found by the
    /// 10,000-case property run, which hung in `take`).
    #[test]
    fn a_crash_point_the_run_never_reached_does_not_stop_the_inventory() {
        let config = SpoolConfig::default();
        let disk = disk_with_one_entry(&config);
        disk.crash_at_ops(vec![disk.ops() + 3]);
        let inventory = take(&disk, &config, 2_000);
        assert_eq!(inventory.open_error, None);
        assert_eq!(inventory.stats.files, 1);
        assert_eq!(inventory.pending.len(), 1, "{inventory:?}");
        assert_eq!(inventory.pending[0].name, "a/b");
    }
}
