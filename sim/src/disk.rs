//! The simulated disk: `spool::Disk` over turmoil's per-host file system
//! (`unstable-fs`), so that a power-loss crash drops exactly what was not synced.
//!
//! Faults it injects, through the scenario's `[disk]` table and turmoil's `FsConfig`,
//! and why the spool must survive each:
//! - power loss (`Sim::crash`): unsynced writes, creates, renames and removes vanish.
//!   The spool acknowledges a put only after data and directory are synced.
//! - capacity (ENOSPC): the disk fills. A full disk must be backpressure, not a crash.
//! - I/O errors (EIO) on reads and writes: a put that hits one stops the spool (the
//!   kernel may have dropped pages); a drain read that hits one is retried.
//! - silent corruption on reads: entries carry checksums; a corrupt read is
//!   quarantined, never uploaded.
//! - torn writes (`block_size`): a crash keeps a prefix of an unsynced write.
//! - early write-back (`sync_probability`): unsynced data may survive a crash.
//!
//! Operations run synchronously in simulated time (turmoil's sync shim), which keeps
//! them deterministic. turmoil reports some errors as `ErrorKind::Other` with the
//! errno text; they are mapped back to the kinds `std::fs` would give.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use spool::disk::{Disk, DiskFuture, DiskLock};
use turmoil::fs::shim::std::fs;

/// `spool::Disk` on the current turmoil host's file system.
#[derive(Debug, Clone, Default)]
pub struct SimDisk {
    /// Locks held on this host. Shared by every boot of the host; a crash drops the
    /// holder's tasks, and with them the guard.
    locks: Arc<Mutex<BTreeSet<PathBuf>>>,
}

impl SimDisk {
    /// A disk whose locks are shared with every other `SimDisk` cloned from it.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Maps turmoil's errno-text errors to the `io::ErrorKind` the real call would give.
fn kind_fixed(e: io::Error) -> io::Error {
    if e.kind() != io::ErrorKind::Other {
        return e;
    }
    let text = e.to_string();
    let kind = if text.contains("No space left on device") {
        io::ErrorKind::StorageFull
    } else if text.contains("No such file or directory") {
        io::ErrorKind::NotFound
    } else if text.contains("File exists") {
        io::ErrorKind::AlreadyExists
    } else {
        return e;
    };
    io::Error::new(kind, text)
}

fn ready<T: Send + 'static>(result: io::Result<T>) -> DiskFuture<'static, T> {
    Box::pin(std::future::ready(result.map_err(kind_fixed)))
}

struct HeldLock {
    locks: Arc<Mutex<BTreeSet<PathBuf>>>,
    path: PathBuf,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        self.locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.path);
    }
}

impl Disk for SimDisk {
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        ready(fs::create_dir_all(dir))
    }

    fn create_synced<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
        let result = (|| {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)?;
            file.write_all(&data)?;
            file.sync_data()
        })();
        ready(result)
    }

    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()> {
        ready(fs::rename(from, to))
    }

    fn sync_dir<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        ready(fs::sync_dir(dir))
    }

    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Vec<String>> {
        let result = (|| {
            let mut names = Vec::new();
            for entry in fs::read_dir(dir)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    continue;
                }
                if let Ok(name) = entry.file_name().into_string() {
                    names.push(name);
                }
            }
            Ok(names)
        })();
        ready(result)
    }

    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>> {
        ready(fs::read(path))
    }

    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        ready(fs::remove_file(path))
    }

    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        let result = if locks.insert(path.to_path_buf()) {
            Ok(DiskLock::new(HeldLock {
                locks: self.locks.clone(),
                path: path.to_path_buf(),
            }))
        } else {
            Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another spool on this host", path.display()),
            ))
        };
        ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sim() -> turmoil::Sim<'static> {
        turmoil::Builder::new()
            .epoch(std::time::UNIX_EPOCH + Duration::from_secs(1_791_453_600))
            .rng_seed(1)
            .build()
    }

    #[test]
    fn sim_disk_passes_the_disk_conformance_suite() {
        let mut sim = sim();
        sim.client("host", async {
            spool::testing::conformance::run_all(&SimDisk::new(), Path::new("/conformance")).await;
            Ok(())
        });
        sim.run().unwrap();
    }

    #[test]
    fn a_power_loss_keeps_synced_entries_and_drops_the_rest() {
        let mut sim = sim();
        let disk = SimDisk::new();
        let phase = Arc::new(Mutex::new(0));
        let (d, p) = (disk.clone(), phase.clone());
        sim.host("app", move || {
            let (disk, phase) = (d.clone(), p.clone());
            async move {
                let dir = Path::new("/d");
                if *phase.lock().unwrap() == 0 {
                    disk.create_dir_all(dir).await?;
                    fs::sync_dir("/")?;
                    disk.sync_dir(dir).await?;
                    disk.create_synced(&dir.join("durable"), Bytes::from_static(b"1"))
                        .await?;
                    disk.sync_dir(dir).await?;
                    disk.create_synced(&dir.join("unsynced-entry"), Bytes::from_static(b"2"))
                        .await?;
                    *phase.lock().unwrap() = 1;
                } else {
                    let names = disk.list(dir).await?;
                    assert_eq!(names, ["durable"]);
                    *phase.lock().unwrap() = 2;
                }
                std::future::pending::<()>().await;
                Ok(())
            }
        });
        for _ in 0..3 {
            sim.step().unwrap();
        }
        assert_eq!(*phase.lock().unwrap(), 1);
        sim.crash("app");
        sim.bounce("app");
        for _ in 0..3 {
            sim.step().unwrap();
        }
        assert_eq!(*phase.lock().unwrap(), 2);
    }

    #[test]
    fn a_removal_left_pending_by_the_last_process_does_not_empty_a_new_entry() {
        use spool::metrics::Metrics;
        use spool::testing::ManualClock;
        use spool::{Spool, SpoolConfig};

        let mut sim = sim();
        sim.client("host", async {
            let disk = Arc::new(SimDisk::new());
            let dir = Path::new("/spool");
            let open = || {
                Spool::open_with(
                    dir,
                    SpoolConfig::default(),
                    disk.clone(),
                    Arc::new(ManualClock::new(0)),
                    Metrics::default(),
                )
            };
            // The last process failed a put of entry 1 after creating its temp file,
            // removed the file and stopped without a directory sync; the page cache
            // (and the pending removal) survived it.
            drop(open().await?);
            let tmp = dir.join("entries/00000000000000000001.tmp");
            disk.create_synced(&tmp, Bytes::from_static(b"torn"))
                .await?;
            disk.remove(&tmp).await?;

            let (spool, _) = open().await?;
            let receipt = spool.put("a", Bytes::from_static(b"payload")).await?;
            assert_eq!(receipt.seq, 1, "the number is reused: no file holds it");
            let claim = spool.claim_oldest().expect("the entry");
            let (_, payload) = spool.read(&claim).await?;
            assert_eq!(payload, Bytes::from_static(b"payload"));
            Ok(())
        });
        sim.run().unwrap();
    }

    #[test]
    fn a_full_disk_reports_storage_full() {
        let mut builder = turmoil::Builder::new();
        builder.rng_seed(1);
        builder.fs().capacity(10);
        let mut sim = builder.build();
        sim.client("host", async {
            let disk = SimDisk::new();
            disk.create_dir_all(Path::new("/d")).await?;
            let err = disk
                .create_synced(Path::new("/d/big"), Bytes::from_static(&[0; 100]))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
            Ok(())
        });
        sim.run().unwrap();
    }
}
