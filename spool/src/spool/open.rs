//! Opening a spool: the only time its directory is listed.
//!
//! In order: create the directories, take the lock, list the three directories,
//! delete temp files of interrupted puts, read and verify every entry (32 reads in
//! flight), move entries that fail to `quarantine/` with the reason, sync
//! `entries/`, and continue the sequence after every number still on disk.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;

use super::aside::move_with_note;
use super::layout::{
    self, DEAD_LETTER_DIR, ENTRIES_DIR, ERROR_SUFFIX, LOCK_FILE, QUARANTINE_DIR, REASON_SUFFIX,
    TEMP_SUFFIX,
};
use super::{DirSync, Inner, Meta, Spool, SpoolConfig, State};
use crate::clock::Clock;
use crate::disk::{Disk, DiskLock};
use crate::error::OpenError;
use crate::metrics::Metrics;

/// How many entry files open reads at once.
const OPEN_READ_CONCURRENCY: usize = 32;

/// What [`Spool::open`] found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenReport {
    /// Valid entries indexed.
    pub entries: u64,
    /// Leftover temporary files (puts interrupted by a crash) deleted.
    pub temp_files_removed: u64,
    /// Files moved to quarantine, with the reason.
    pub quarantined: Vec<(String, String)>,
}

/// The spool's three directories.
struct Dirs {
    entries: PathBuf,
    quarantine: PathBuf,
    dead_letter: PathBuf,
}

/// The names found in the set-aside directories.
struct Listing {
    quarantine: Vec<String>,
    dead_letter: Vec<String>,
}

/// What reading the entry files gave.
#[derive(Default)]
struct Found {
    index: BTreeMap<u64, Meta>,
    bytes: u64,
    to_quarantine: Vec<(String, String)>,
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> OpenError {
    let path = path.to_path_buf();
    move |source| OpenError::Io { op, path, source }
}

impl Spool {
    /// Opens the spool in `dir` through the given seams, and reports what open found.
    ///
    /// Open takes the lock, deletes temporary files left by interrupted puts, reads
    /// and verifies every entry (header, length, both checksums, name), moves any that
    /// fail to `quarantine/` with the reason, and builds the index. This is the only
    /// time the directory is listed.
    pub async fn open_with(
        dir: &Path,
        config: SpoolConfig,
        disk: Arc<dyn Disk>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
    ) -> Result<(Spool, OpenReport), OpenError> {
        config.validate()?;
        let dirs = create_dirs(&*disk, dir).await?;
        let lock = take_lock(&*disk, dir).await?;
        let (names, mut listing) = list(&*disk, &dirs).await?;
        let mut report = OpenReport {
            temp_files_removed: remove_temp_files(&*disk, &dirs, &names.temps).await?,
            ..OpenReport::default()
        };
        let found = read_entries(&disk, &dirs.entries, names.entries, names.strays).await;
        quarantine_all(&*disk, &dirs, &mut listing, &found.to_quarantine, &metrics).await?;
        // Always, not only after removing or moving something here: whatever the
        // previous process left undurable in this directory (a removed temp file, a
        // drained entry) is settled before this one reuses any of its names. The
        // simulated disk needs it too: it keeps synced data by path, so a removal
        // still pending from the last process would apply to a new file of that name.
        disk.sync_dir(&dirs.entries)
            .await
            .map_err(io_err("sync directory", &dirs.entries))?;
        report.entries = found.index.len() as u64;
        report.quarantined = found.to_quarantine;
        let state = State {
            next_seq: next_seq(&found.index, &listing),
            index: found.index,
            bytes: found.bytes,
            reserved_files: 0,
            reserved_bytes: 0,
            claimed: 0,
            broken: None,
            quarantined_files: layout::count_data_files(&listing.quarantine, REASON_SUFFIX),
            dead_letter_files: layout::count_data_files(&listing.dead_letter, ERROR_SUFFIX),
            unsynced_removes: 0,
        };
        let spool = Spool {
            inner: Arc::new(Inner {
                entries_dir: dirs.entries,
                quarantine_dir: dirs.quarantine,
                dead_letter_dir: dirs.dead_letter,
                config,
                disk,
                clock,
                metrics,
                state: Mutex::new(state),
                dir_sync: DirSync::default(),
                changed: tokio::sync::Notify::new(),
                #[cfg(feature = "mutations")]
                mutation: 0.into(),
                _lock: lock,
            }),
        };
        Ok((spool, report))
    }
}

async fn create_dirs(disk: &dyn Disk, dir: &Path) -> Result<Dirs, OpenError> {
    let dirs = Dirs {
        entries: dir.join(ENTRIES_DIR),
        quarantine: dir.join(QUARANTINE_DIR),
        dead_letter: dir.join(DEAD_LETTER_DIR),
    };
    for sub in [&dirs.entries, &dirs.quarantine, &dirs.dead_letter] {
        disk.create_dir_all(sub)
            .await
            .map_err(io_err("create directory", sub))?;
    }
    disk.sync_dir(dir)
        .await
        .map_err(io_err("sync directory", dir))?;
    Ok(dirs)
}

async fn take_lock(disk: &dyn Disk, dir: &Path) -> Result<DiskLock, OpenError> {
    let lock_path = dir.join(LOCK_FILE);
    disk.lock(&lock_path).await.map_err(|e| {
        if e.kind() == io::ErrorKind::WouldBlock {
            OpenError::Locked {
                dir: dir.to_path_buf(),
                message: e.to_string(),
            }
        } else {
            io_err("lock", &lock_path)(e)
        }
    })
}

/// Lists the three directories (`entries/` sorted by name, sorted by kind).
async fn list(disk: &dyn Disk, dirs: &Dirs) -> Result<(EntryNames, Listing), OpenError> {
    let quarantine = disk
        .list(&dirs.quarantine)
        .await
        .map_err(io_err("list", &dirs.quarantine))?;
    let dead_letter = disk
        .list(&dirs.dead_letter)
        .await
        .map_err(io_err("list", &dirs.dead_letter))?;
    let mut entries = disk
        .list(&dirs.entries)
        .await
        .map_err(io_err("list", &dirs.entries))?;
    entries.sort();
    let listing = Listing {
        quarantine,
        dead_letter,
    };
    Ok((sort_entry_names(entries), listing))
}

/// The names in `entries/`, by what they are.
#[derive(Default)]
struct EntryNames {
    /// Puts interrupted by a crash: deleted.
    temps: Vec<String>,
    /// Entry files: verified.
    entries: Vec<String>,
    /// Anything else: quarantined.
    strays: Vec<String>,
}

fn sort_entry_names(names: Vec<String>) -> EntryNames {
    let mut sorted = EntryNames::default();
    for name in names {
        if name.ends_with(TEMP_SUFFIX) {
            sorted.temps.push(name);
        } else if layout::parse_seq(&name).is_some() {
            sorted.entries.push(name);
        } else {
            sorted.strays.push(name);
        }
    }
    sorted
}

async fn remove_temp_files(
    disk: &dyn Disk,
    dirs: &Dirs,
    temps: &[String],
) -> Result<u64, OpenError> {
    for name in temps {
        let path = dirs.entries.join(name);
        disk.remove(&path).await.map_err(io_err("remove", &path))?;
    }
    Ok(temps.len() as u64)
}

/// Reads and verifies every entry file. A failed read or check is tried once more
/// before the entry is set aside: some devices return transient errors.
async fn read_entries(
    disk: &Arc<dyn Disk>,
    entries_dir: &Path,
    entry_names: Vec<String>,
    strays: Vec<String>,
) -> Found {
    let mut found = Found {
        to_quarantine: strays
            .into_iter()
            .map(|name| (name, "not a spool entry file name".to_string()))
            .collect(),
        ..Found::default()
    };
    let mut reads = futures::stream::iter(entry_names.into_iter().map(|name| {
        let disk = disk.clone();
        let path = entries_dir.join(&name);
        async move {
            let mut verdict = Err(String::new());
            for _ in 0..2 {
                verdict = match disk.read(&path).await {
                    Ok(data) => layout::verify(&name, Bytes::from(data))
                        .map(|(header, _)| header)
                        .map_err(|e| e.to_string()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return (name, None),
                    Err(e) => Err(format!("read failed: {e}")),
                };
                if verdict.is_ok() {
                    break;
                }
            }
            (name, Some(verdict))
        }
    }))
    .buffered(OPEN_READ_CONCURRENCY);
    while let Some((name, verdict)) = reads.next().await {
        match verdict {
            None => {}
            Some(Ok(header)) => {
                found.bytes += header.file_bytes();
                found.index.insert(
                    header.seq,
                    Meta {
                        file_bytes: header.file_bytes(),
                        created_unix_ms: header.created_unix_ms,
                        claimed: false,
                    },
                );
            }
            Some(Err(reason)) => found.to_quarantine.push((name, reason)),
        }
    }
    found
}

async fn quarantine_all(
    disk: &dyn Disk,
    dirs: &Dirs,
    listing: &mut Listing,
    to_quarantine: &[(String, String)],
    metrics: &Metrics,
) -> Result<(), OpenError> {
    for (name, reason) in to_quarantine {
        let target = layout::unique_name(&listing.quarantine, name);
        let from = dirs.entries.join(name);
        move_with_note(
            disk,
            &from,
            &dirs.quarantine,
            &target,
            REASON_SUFFIX,
            reason,
        )
        .await
        .map_err(io_err("quarantine", &from))?;
        tracing::warn!(file = %name, %reason, "quarantined spool entry");
        listing.quarantine.push(target);
        metrics.quarantined.inc();
    }
    Ok(())
}

/// Sequence numbers continue after every one still on disk, dead letters and
/// quarantined entries included, so a number is never reused while its file exists
/// anywhere in the directory.
fn next_seq(index: &BTreeMap<u64, Meta>, listing: &Listing) -> u64 {
    index
        .keys()
        .copied()
        .chain(
            listing
                .dead_letter
                .iter()
                .filter_map(|n| layout::parse_seq(n)),
        )
        .chain(
            listing
                .quarantine
                .iter()
                .filter_map(|n| layout::parse_seq(n)),
        )
        .max()
        .map_or(1, |max| max + 1)
}
