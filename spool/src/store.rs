//! The spool store: a bounded directory of entry files with an in-memory index.
//!
//! Directory layout:
//!
//! ```text
//! DIR/LOCK                      exclusive lock (holder's pid inside)
//! DIR/entries/<seq>.entry       pending objects, 20-digit zero-padded sequence numbers
//! DIR/entries/<seq>.tmp         a put in progress; deleted at open
//! DIR/quarantine/<file>         entries that failed verification, as found
//! DIR/quarantine/<file>.reason  why
//! DIR/dead-letter/<seq>.entry   entries the store refused for good
//! DIR/dead-letter/<seq>.error   the store's error
//! ```
//!
//! Promises:
//! - `put` returns `Ok` only when the entry is durable: data synced, renamed into
//!   place, and the directory synced. Concurrent puts share directory syncs (group
//!   commit), so throughput grows with concurrency.
//! - Capacity is reserved synchronously, before the first await, so concurrent puts
//!   can never take the spool past `max_files` or `max_bytes`.
//! - The directory is listed once, at open. After that every operation is O(log n)
//!   in the index.
//! - After an I/O error whose effect on disk is unknown (a failed fsync, write or
//!   rename) the spool stops accepting puts for good; reopening re-verifies the disk.
//!   Running out of space is not such an error: it is a full spool.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use crate::clock::{Clock, SystemClock};
use crate::disk::{Disk, DiskLock, StdDisk};
use crate::entry::{self, Corrupt, Header};
use crate::error::{FullReason, OpenError, PutError};
use crate::metrics::Metrics;
use crate::name;

/// Subdirectory holding pending entries.
pub const ENTRIES_DIR: &str = "entries";
/// Subdirectory holding entries that failed verification.
pub const QUARANTINE_DIR: &str = "quarantine";
/// Subdirectory holding entries the store refused for good.
pub const DEAD_LETTER_DIR: &str = "dead-letter";
/// The lock file.
pub const LOCK_FILE: &str = "LOCK";

const ENTRY_SUFFIX: &str = ".entry";
const TEMP_SUFFIX: &str = ".tmp";
/// How many entry files open reads at once.
const OPEN_READ_CONCURRENCY: usize = 32;

/// Bounds and tuning for a [`Spool`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolConfig {
    /// Most entries stored at once (including puts in progress). Default 100,000: at
    /// 50 writes/s, about 33 minutes of a total outage. Must be at least 1.
    pub max_files: u64,
    /// Most bytes stored at once, counting whole entry files (48-byte header, name and
    /// payload). Default 1 GiB. Must be at least 1.
    pub max_bytes: u64,
    /// Removals of drained entries are made durable with one directory sync per this
    /// many removals. A power loss can bring back at most this many drained entries;
    /// they are sent again and answered "already exists", costing one request each.
    /// Default 64. Set to 1 to sync after every removal.
    pub remove_sync_batch: u32,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        Self {
            max_files: 100_000,
            max_bytes: 1 << 30,
            remove_sync_batch: 64,
        }
    }
}

impl SpoolConfig {
    fn validate(&self) -> Result<(), OpenError> {
        if self.max_files == 0 {
            return Err(OpenError::Config("max_files must be at least 1".into()));
        }
        if self.max_bytes == 0 {
            return Err(OpenError::Config("max_bytes must be at least 1".into()));
        }
        if self.remove_sync_batch == 0 {
            return Err(OpenError::Config(
                "remove_sync_batch must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// What a successful [`Spool::put`] stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The entry's sequence number (its place in the drain order).
    pub seq: u64,
    /// Size of the entry file, as counted against `max_bytes`.
    pub file_bytes: u64,
}

/// A point-in-time view of a spool, for gauges and tests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    /// Entries stored (durable and indexed).
    pub files: u64,
    /// Bytes of entry files stored.
    pub bytes: u64,
    /// Entries being written by puts in progress.
    pub reserved_files: u64,
    /// Bytes reserved by puts in progress.
    pub reserved_bytes: u64,
    /// Entries a drainer worker is working on.
    pub claimed: u64,
    /// Creation time of the oldest stored entry, in ms since the Unix epoch.
    pub oldest_created_unix_ms: Option<u64>,
    /// Age of the oldest stored entry by the spool's clock; zero when empty.
    pub oldest_age: Duration,
    /// Files in `quarantine/` (not counting reason files).
    pub quarantined_files: u64,
    /// Files in `dead-letter/` (not counting error files).
    pub dead_letter_files: u64,
    /// Why the spool stopped accepting writes, if it did.
    pub broken: Option<String>,
    /// The configured bounds.
    pub max_files: u64,
    /// The configured bounds.
    pub max_bytes: u64,
}

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

#[derive(Debug, Clone, Copy)]
struct Meta {
    file_bytes: u64,
    created_unix_ms: u64,
    claimed: bool,
}

#[derive(Debug)]
struct State {
    index: BTreeMap<u64, Meta>,
    bytes: u64,
    reserved_files: u64,
    reserved_bytes: u64,
    claimed: u64,
    next_seq: u64,
    broken: Option<Arc<str>>,
    quarantined_files: u64,
    dead_letter_files: u64,
    unsynced_removes: u32,
}

/// A deliberate bug, for showing that the simulation catches it. Only with the
/// `mutations` feature.
#[cfg(feature = "mutations")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutation {
    /// Behave correctly.
    None = 0,
    /// Acknowledge a put before the directory sync: a power loss can then lose an
    /// acknowledged entry.
    AckBeforeDirSync = 1,
    /// The drainer removes an entry before its upload has succeeded.
    RemoveBeforeUpload = 2,
}

struct Inner {
    entries_dir: PathBuf,
    quarantine_dir: PathBuf,
    dead_letter_dir: PathBuf,
    config: SpoolConfig,
    disk: Arc<dyn Disk>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    state: Mutex<State>,
    dir_sync: DirSync,
    changed: tokio::sync::Notify,
    #[cfg(feature = "mutations")]
    mutation: std::sync::atomic::AtomicU8,
    _lock: DiskLock,
}

/// A bounded, crash-safe spool of pending objects in one directory.
///
/// Cheap to clone; clones share the directory, the index and the lock.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use spool::{Spool, SpoolConfig};
/// let spool = Spool::open("/var/spool/uploads", SpoolConfig::default()).await?;
/// spool.put("logs/2026-10-08/a.json", bytes::Bytes::from("{}")).await?;
/// assert_eq!(spool.stats().files, 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Spool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("entries_dir", &self.inner.entries_dir)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Spool {
    /// Opens (creating if needed) the spool in `dir` on the real file system.
    pub async fn open(dir: impl AsRef<Path>, config: SpoolConfig) -> Result<Spool, OpenError> {
        let (spool, _) = Self::open_with(
            dir.as_ref(),
            config,
            Arc::new(StdDisk),
            Arc::new(SystemClock),
            Metrics::default(),
        )
        .await?;
        Ok(spool)
    }

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
        let io_err = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| OpenError::Io { op, path, source }
        };
        let entries_dir = dir.join(ENTRIES_DIR);
        let quarantine_dir = dir.join(QUARANTINE_DIR);
        let dead_letter_dir = dir.join(DEAD_LETTER_DIR);
        for sub in [&entries_dir, &quarantine_dir, &dead_letter_dir] {
            disk.create_dir_all(sub)
                .await
                .map_err(io_err("create directory", sub))?;
        }
        disk.sync_dir(dir)
            .await
            .map_err(io_err("sync directory", dir))?;

        let lock_path = dir.join(LOCK_FILE);
        let lock = disk.lock(&lock_path).await.map_err(|e| {
            if e.kind() == io::ErrorKind::WouldBlock {
                OpenError::Locked {
                    dir: dir.to_path_buf(),
                    message: e.to_string(),
                }
            } else {
                OpenError::Io {
                    op: "lock",
                    path: lock_path.clone(),
                    source: e,
                }
            }
        })?;

        let mut quarantine_names = disk
            .list(&quarantine_dir)
            .await
            .map_err(io_err("list", &quarantine_dir))?;
        let dead_letter_names = disk
            .list(&dead_letter_dir)
            .await
            .map_err(io_err("list", &dead_letter_dir))?;
        let mut names = disk
            .list(&entries_dir)
            .await
            .map_err(io_err("list", &entries_dir))?;
        names.sort();

        let mut report = OpenReport::default();
        let mut index = BTreeMap::new();
        let mut bytes = 0u64;
        let mut to_quarantine = Vec::new();
        let mut entry_names = Vec::new();
        for name in names {
            if name.ends_with(TEMP_SUFFIX) {
                let path = entries_dir.join(&name);
                disk.remove(&path).await.map_err(io_err("remove", &path))?;
                report.temp_files_removed += 1;
            } else if parse_seq(&name).is_some() {
                entry_names.push(name);
            } else {
                to_quarantine.push((name, "not a spool entry file name".to_string()));
            }
        }
        let mut reads = futures::stream::iter(entry_names.into_iter().map(|name| {
            let disk = disk.clone();
            let path = entries_dir.join(&name);
            async move {
                // A failed read or check is tried once more before the entry is set
                // aside: some devices return transient errors.
                let mut verdict = Err(String::new());
                for _ in 0..2 {
                    verdict = match disk.read(&path).await {
                        Ok(data) => verify(&name, Bytes::from(data)).map_err(|e| e.to_string()),
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
                    bytes += header.file_bytes();
                    index.insert(
                        header.seq,
                        Meta {
                            file_bytes: header.file_bytes(),
                            created_unix_ms: header.created_unix_ms,
                            claimed: false,
                        },
                    );
                }
                Some(Err(reason)) => to_quarantine.push((name, reason)),
            }
        }
        drop(reads);

        for (name, reason) in &to_quarantine {
            let target = unique_name(&quarantine_names, name);
            move_with_note(
                &*disk,
                &entries_dir.join(name),
                &quarantine_dir,
                &target,
                "reason",
                reason,
            )
            .await
            .map_err(io_err("quarantine", &entries_dir.join(name)))?;
            tracing::warn!(file = %name, %reason, "quarantined spool entry");
            quarantine_names.push(target);
            metrics.quarantined.inc();
        }
        // Always, not only after removing or moving something here: whatever the
        // previous process left undurable in this directory (a removed temp file, a
        // drained entry) is settled before this one reuses any of its names. The
        // simulated disk needs it too: it keeps synced data by path, so a removal
        // still pending from the last process would apply to a new file of that name.
        disk.sync_dir(&entries_dir)
            .await
            .map_err(io_err("sync directory", &entries_dir))?;
        report.quarantined = to_quarantine;
        report.entries = index.len() as u64;

        // Sequence numbers continue after every one still on disk, dead letters and
        // quarantined entries included, so a number is never reused while its file
        // exists anywhere in the directory.
        let next_seq = index
            .keys()
            .copied()
            .chain(dead_letter_names.iter().filter_map(|n| parse_seq(n)))
            .chain(quarantine_names.iter().filter_map(|n| parse_seq(n)))
            .max()
            .map_or(1, |max| max + 1);

        let state = State {
            index,
            bytes,
            reserved_files: 0,
            reserved_bytes: 0,
            claimed: 0,
            next_seq,
            broken: None,
            quarantined_files: count_data_files(&quarantine_names, ".reason"),
            dead_letter_files: count_data_files(&dead_letter_names, ".error"),
            unsynced_removes: 0,
        };
        let spool = Spool {
            inner: Arc::new(Inner {
                entries_dir,
                quarantine_dir,
                dead_letter_dir,
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

    /// Turns on a deliberate bug (see [`Mutation`]).
    #[cfg(feature = "mutations")]
    pub fn set_mutation(&self, mutation: Mutation) {
        self.inner.mutation.store(mutation as u8, Ordering::SeqCst);
    }

    #[cfg(feature = "mutations")]
    pub(crate) fn mutation_is(&self, mutation: Mutation) -> bool {
        self.inner.mutation.load(Ordering::SeqCst) == mutation as u8
    }

    /// The configuration the spool was opened with.
    pub fn config(&self) -> &SpoolConfig {
        &self.inner.config
    }

    /// The counters and histograms shared by this spool's uploader and drainer.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Registers the spool's metrics (gauges read at scrape time, counters and
    /// histograms) in `registry`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.inner.metrics.register(registry);
        registry.register_collector(Box::new(crate::metrics::SpoolGauges::new(self.clone())));
    }

    /// Stores `payload` under the object name `name` and returns once it is durable.
    ///
    /// Refuses, without storing anything, a name Cloud Storage would reject, an entry
    /// larger than `max_bytes`, and any entry while the spool is full or broken. The
    /// write runs to completion even if the returned future is dropped, so the index
    /// never disagrees with the directory.
    pub async fn put(&self, name: &str, payload: Bytes) -> Result<Receipt, PutError> {
        name::check(name)?;
        let file_bytes = entry::file_bytes(name.len(), payload.len() as u64);
        let reservation = self.reserve(file_bytes)?;
        let spool = self.clone();
        let name = name.to_owned();
        tokio::spawn(async move { spool.write_entry(reservation, name, payload).await })
            .await
            .unwrap_or_else(|e| {
                Err(PutError::Broken {
                    reason: format!("put task failed: {e}").into(),
                })
            })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reserve(&self, file_bytes: u64) -> Result<Reservation, PutError> {
        let config = &self.inner.config;
        if file_bytes > config.max_bytes {
            return Err(PutError::TooLarge {
                entry_bytes: file_bytes,
                max_bytes: config.max_bytes,
            });
        }
        let mut state = self.state();
        if let Some(reason) = &state.broken {
            return Err(PutError::Broken {
                reason: reason.clone(),
            });
        }
        if state.index.len() as u64 + state.reserved_files >= config.max_files {
            return Err(PutError::Full(FullReason::Files {
                max_files: config.max_files,
            }));
        }
        if state.bytes + state.reserved_bytes + file_bytes > config.max_bytes {
            return Err(PutError::Full(FullReason::Bytes {
                max_bytes: config.max_bytes,
            }));
        }
        state.reserved_files += 1;
        state.reserved_bytes += file_bytes;
        let seq = state.next_seq;
        state.next_seq += 1;
        Ok(Reservation {
            spool: self.clone(),
            seq,
            file_bytes,
            held: true,
        })
    }

    async fn write_entry(
        &self,
        mut reservation: Reservation,
        name: String,
        payload: Bytes,
    ) -> Result<Receipt, PutError> {
        let inner = &*self.inner;
        let seq = reservation.seq;
        let created_unix_ms = inner.clock.now_unix_ms();
        let data = entry::encode(seq, created_unix_ms, &name, &payload);
        let tmp = inner.entries_dir.join(temp_file_name(seq));
        let path = inner.entries_dir.join(entry_file_name(seq));

        if let Err(e) = inner.disk.create_synced(&tmp, data).await {
            // Best effort: open deletes leftovers anyway.
            let _ = inner.disk.remove(&tmp).await;
            return Err(if is_out_of_space(&e) {
                PutError::Full(FullReason::Disk)
            } else {
                self.break_spool(format!("writing {}: {e}", tmp.display()))
            });
        }
        if let Err(e) = inner.disk.rename(&tmp, &path).await {
            return Err(self.break_spool(format!("renaming {}: {e}", tmp.display())));
        }
        let ticket = inner.dir_sync.ticket();
        #[cfg(feature = "mutations")]
        let skip_sync = self.mutation_is(Mutation::AckBeforeDirSync);
        #[cfg(not(feature = "mutations"))]
        let skip_sync = false;
        if !skip_sync
            && let Err(e) = inner
                .dir_sync
                .wait_durable(&*inner.disk, &inner.entries_dir, ticket)
                .await
        {
            return Err(self.break_spool(format!(
                "syncing directory {}: {e}",
                inner.entries_dir.display()
            )));
        }

        let mut state = self.state();
        reservation.held = false;
        state.reserved_files -= 1;
        state.reserved_bytes -= reservation.file_bytes;
        state.index.insert(
            seq,
            Meta {
                file_bytes: reservation.file_bytes,
                created_unix_ms,
                claimed: false,
            },
        );
        state.bytes += reservation.file_bytes;
        drop(state);
        inner.changed.notify_waiters();
        Ok(Receipt {
            seq,
            file_bytes: reservation.file_bytes,
        })
    }

    /// Marks the spool broken (first reason wins) and returns the error for the caller.
    fn break_spool(&self, reason: String) -> PutError {
        let mut state = self.state();
        let reason = state
            .broken
            .get_or_insert_with(|| {
                tracing::error!(%reason, "spool stopped accepting writes");
                reason.into()
            })
            .clone();
        PutError::Broken { reason }
    }

    /// A point-in-time view of the spool.
    pub fn stats(&self) -> Stats {
        let now = self.inner.clock.now_unix_ms();
        let state = self.state();
        let oldest = state.index.values().next().map(|m| m.created_unix_ms);
        Stats {
            files: state.index.len() as u64,
            bytes: state.bytes,
            reserved_files: state.reserved_files,
            reserved_bytes: state.reserved_bytes,
            claimed: state.claimed,
            oldest_created_unix_ms: oldest,
            oldest_age: oldest
                .map(|t| Duration::from_millis(now.saturating_sub(t)))
                .unwrap_or_default(),
            quarantined_files: state.quarantined_files,
            dead_letter_files: state.dead_letter_files,
            broken: state.broken.as_deref().map(str::to_owned),
            max_files: self.inner.config.max_files,
            max_bytes: self.inner.config.max_bytes,
        }
    }

    /// True when no entry is stored or being written.
    pub fn is_empty(&self) -> bool {
        let state = self.state();
        state.index.is_empty() && state.reserved_files == 0
    }

    /// Claims the oldest entry no one else has claimed, if any. The claim is released
    /// when dropped unless it is settled by [`Spool::remove`],
    /// [`Spool::dead_letter`] or [`Spool::quarantine`].
    pub fn claim_oldest(&self) -> Option<Claim> {
        let mut state = self.state();
        // At most one claim per drainer worker exists, so this skips a handful.
        let (&seq, meta) = state.index.iter_mut().find(|(_, m)| !m.claimed)?;
        meta.claimed = true;
        let created_unix_ms = meta.created_unix_ms;
        state.claimed += 1;
        Some(Claim {
            spool: self.clone(),
            seq,
            created_unix_ms,
            settled: false,
        })
    }

    /// Waits until an entry can be claimed, then claims the oldest.
    pub async fn claim_next(&self) -> Claim {
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(claim) = self.claim_oldest() {
                return claim;
            }
            notified.await;
        }
    }

    /// Reads and verifies a claimed entry.
    pub async fn read(&self, claim: &Claim) -> Result<(Header, Bytes), ReadError> {
        let path = self.inner.entries_dir.join(entry_file_name(claim.seq));
        let data = self
            .inner
            .disk
            .read(&path)
            .await
            .map_err(|source| ReadError::Io {
                path: path.clone(),
                source,
            })?;
        let (header, payload) = entry::decode(Bytes::from(data))?;
        if header.seq != claim.seq {
            return Err(ReadError::SeqMismatch {
                expected: claim.seq,
                found: header.seq,
            });
        }
        Ok((header, payload))
    }

    /// Deletes a claimed entry whose object is safely in the store.
    pub async fn remove(&self, mut claim: Claim) -> io::Result<()> {
        let inner = &*self.inner;
        let path = inner.entries_dir.join(entry_file_name(claim.seq));
        let removed = inner.disk.remove(&path).await;
        let sync_now = {
            let mut state = self.state();
            self.forget(&mut state, &mut claim);
            state.unsynced_removes += 1;
            let due =
                state.unsynced_removes >= inner.config.remove_sync_batch || state.index.is_empty();
            if due {
                state.unsynced_removes = 0;
            }
            due
        };
        inner.changed.notify_waiters();
        removed?;
        if sync_now {
            let ticket = inner.dir_sync.ticket();
            inner
                .dir_sync
                .wait_durable(&*inner.disk, &inner.entries_dir, ticket)
                .await?;
        }
        Ok(())
    }

    /// Moves a claimed entry to `dead-letter/`, with the store's error beside it.
    pub async fn dead_letter(&self, claim: Claim, error: &str) -> io::Result<()> {
        self.set_aside(claim, Aside::DeadLetter, error).await
    }

    /// Moves a claimed entry that failed verification to `quarantine/`.
    pub async fn quarantine(&self, claim: Claim, reason: &str) -> io::Result<()> {
        self.set_aside(claim, Aside::Quarantine, reason).await
    }

    async fn set_aside(&self, mut claim: Claim, aside: Aside, note: &str) -> io::Result<()> {
        let inner = &*self.inner;
        // Sequence numbers continue past every set-aside one, so this name is free.
        let file = entry_file_name(claim.seq);
        let (dir, note_ext) = match aside {
            Aside::DeadLetter => (&inner.dead_letter_dir, "error"),
            Aside::Quarantine => (&inner.quarantine_dir, "reason"),
        };
        let from = inner.entries_dir.join(&file);
        let moved = move_with_note(&*inner.disk, &from, dir, &file, note_ext, note).await;
        {
            let mut state = self.state();
            self.forget(&mut state, &mut claim);
            match (&moved, aside) {
                (Err(_), _) => {}
                (Ok(()), Aside::DeadLetter) => state.dead_letter_files += 1,
                (Ok(()), Aside::Quarantine) => state.quarantined_files += 1,
            }
        }
        inner.changed.notify_waiters();
        moved?;
        match aside {
            Aside::DeadLetter => inner.metrics.dead_lettered.inc(),
            Aside::Quarantine => inner.metrics.quarantined.inc(),
        };
        tracing::warn!(seq = claim.seq, %note, "{} spool entry", aside.as_str());
        inner.disk.sync_dir(&inner.entries_dir).await
    }

    fn forget(&self, state: &mut State, claim: &mut Claim) {
        if let Some(meta) = state.index.remove(&claim.seq) {
            state.bytes -= meta.file_bytes;
            state.claimed -= 1;
        }
        claim.settled = true;
    }

    fn release(&self, seq: u64) {
        let mut state = self.state();
        if let Some(meta) = state.index.get_mut(&seq) {
            meta.claimed = false;
            state.claimed -= 1;
        }
        drop(state);
        self.inner.changed.notify_waiters();
    }
}

/// Where a settled entry that was not delivered goes.
#[derive(Debug, Clone, Copy)]
enum Aside {
    DeadLetter,
    Quarantine,
}

impl Aside {
    fn as_str(self) -> &'static str {
        match self {
            Aside::DeadLetter => "dead-lettered",
            Aside::Quarantine => "quarantined",
        }
    }
}

/// Why a claimed entry could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file failed verification: quarantine it.
    #[error("entry failed verification: {0}")]
    Corrupt(#[from] Corrupt),
    /// The file holds another entry than its name says: quarantine it.
    #[error("entry file for sequence {expected} holds entry {found}")]
    SeqMismatch {
        /// The sequence number in the file name.
        expected: u64,
        /// The one in the header.
        found: u64,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The entry file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// Exclusive right to work on one stored entry. Dropping it unsettled gives the entry
/// back to the queue.
pub struct Claim {
    spool: Spool,
    seq: u64,
    created_unix_ms: u64,
    settled: bool,
}

impl Claim {
    /// The entry's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// When the entry was written, in ms since the Unix epoch.
    pub fn created_unix_ms(&self) -> u64 {
        self.created_unix_ms
    }
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim").field("seq", &self.seq).finish()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.settled {
            self.spool.release(self.seq);
        }
    }
}

/// Capacity held by a put in progress; given back if the put does not complete.
struct Reservation {
    spool: Spool,
    seq: u64,
    file_bytes: u64,
    held: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.held {
            let mut state = self.spool.state();
            state.reserved_files -= 1;
            state.reserved_bytes -= self.file_bytes;
        }
    }
}

/// Group commit for directory syncs: a sync started after an operation's rename
/// covers it, so one fsync can serve every put that renamed while the previous one
/// ran. After a failed sync every later wait fails too: retrying an fsync can report
/// success for entries the kernel already dropped.
#[derive(Default)]
struct DirSync {
    issued: AtomicU64,
    synced: AtomicU64,
    lock: tokio::sync::Mutex<Option<Arc<str>>>,
}

impl DirSync {
    /// Call after a change to the directory; the ticket names that change.
    fn ticket(&self) -> u64 {
        self.issued.fetch_add(1, Ordering::SeqCst) + 1
    }

    async fn wait_durable(&self, disk: &dyn Disk, dir: &Path, ticket: u64) -> io::Result<()> {
        if self.synced.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        let mut failed = self.lock.lock().await;
        if let Some(reason) = &*failed {
            return Err(io::Error::other(format!(
                "an earlier directory sync failed: {reason}"
            )));
        }
        if self.synced.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        // Every change with a ticket up to here happened before this sync starts.
        let upto = self.issued.load(Ordering::SeqCst);
        match disk.sync_dir(dir).await {
            Ok(()) => {
                self.synced.fetch_max(upto, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => {
                *failed = Some(e.to_string().into());
                Err(e)
            }
        }
    }
}

fn verify(file_name: &str, data: Bytes) -> Result<Header, VerifyError> {
    let (header, _) = entry::decode(data)?;
    if parse_seq(file_name) != Some(header.seq) {
        return Err(VerifyError::SeqMismatch { seq: header.seq });
    }
    name::check(&header.name).map_err(VerifyError::Name)?;
    Ok(header)
}

#[derive(Debug, thiserror::Error)]
enum VerifyError {
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
    #[error("file name does not match the sequence number {seq} in its header")]
    SeqMismatch { seq: u64 },
    #[error("stored object name is invalid: {0}")]
    Name(name::InvalidName),
}

/// `00000000000000000042.entry`
pub fn entry_file_name(seq: u64) -> String {
    format!("{seq:020}{ENTRY_SUFFIX}")
}

fn temp_file_name(seq: u64) -> String {
    format!("{seq:020}{TEMP_SUFFIX}")
}

/// The sequence number in an entry file name, if it is one.
pub fn parse_seq(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_suffix(ENTRY_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn count_data_files(names: &[String], note_suffix: &str) -> u64 {
    names.iter().filter(|n| !n.ends_with(note_suffix)).count() as u64
}

/// `name`, or `name.1`, `name.2`, ... whichever (with its note) is not taken yet.
fn unique_name(existing: &[String], name: &str) -> String {
    let taken = |candidate: &str| existing.iter().any(|e| e == candidate);
    if !taken(name) {
        return name.to_string();
    }
    (1..)
        .map(|n| format!("{name}.{n}"))
        .find(|c| !taken(c))
        .expect("an unused name exists")
}

/// Moves `from` into `to_dir` as `target`, writes `target.<note_ext>` holding `note`,
/// and makes both durable in `to_dir`. The caller syncs the source directory.
///
/// The move comes first and the note is best effort: a rename needs no free space,
/// so a corrupt entry can be set aside even on a full disk (the note then says
/// nothing, and the log says why).
async fn move_with_note(
    disk: &dyn Disk,
    from: &Path,
    to_dir: &Path,
    target: &str,
    note_ext: &str,
    note: &str,
) -> io::Result<()> {
    disk.rename(from, &to_dir.join(target)).await?;
    let note_path = to_dir.join(format!("{target}.{note_ext}"));
    let _ = disk.remove(&note_path).await;
    if let Err(e) = disk
        .create_synced(&note_path, Bytes::from(format!("{note}\n")))
        .await
    {
        tracing::warn!(file = %note_path.display(), error = %e, %note, "cannot write the note beside a set-aside entry");
    }
    disk.sync_dir(to_dir).await
}

/// ENOSPC or EDQUOT: a full disk is backpressure, not a broken spool.
fn is_out_of_space(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::testing::{FaultDisk, Op};

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
            entry::file_bytes(3, 3) + entry::file_bytes(3, 4)
        );
        // The oldest entry was written 300 s ago by the clock, across the restart.
        assert_eq!(after.oldest_age, Duration::from_secs(300));

        let claim = spool.claim_oldest().unwrap();
        let (header, bytes) = spool.read(&claim).await.unwrap();
        assert_eq!((header.name.as_str(), &bytes[..]), ("a/1", &b"one"[..]));
    }

    #[tokio::test]
    async fn a_crash_between_write_and_rename_leaves_no_entry() {
        let fx = Fixture::new();
        let spool = fx.spool().await;
        fx.disk.fail_next(Op::Rename, io::ErrorKind::Other);
        let err = spool.put("lost", payload(10)).await.unwrap_err();
        assert!(matches!(err, PutError::Broken { .. }), "{err}");
        // The synced temp file is still there, as after a crash at that point.
        assert_eq!(fx.entries(), [temp_file_name(1)]);
        drop(spool);

        let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
        assert_eq!(report.temp_files_removed, 1);
        assert_eq!(spool.stats().files, 0);
        assert!(fx.entries().is_empty(), "{:?}", fx.entries());
    }

    /// Starts `n` puts of `size`-byte payloads at once; returns their results.
    async fn put_concurrently(
        spool: &Spool,
        n: usize,
        size: usize,
    ) -> Vec<Result<Receipt, PutError>> {
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
        let one = entry::file_bytes(3, 1000);
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
    async fn a_corrupt_entry_is_quarantined_at_open_with_its_reason() {
        let fx = Fixture::new();
        let spool = fx.spool().await;
        spool.put("good", payload(10)).await.unwrap();
        let bad = spool.put("bad", payload(10)).await.unwrap();
        drop(spool);
        let path = fx
            .dir
            .path()
            .join(ENTRIES_DIR)
            .join(entry_file_name(bad.seq));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        std::fs::write(fx.dir.path().join(ENTRIES_DIR).join("stray.txt"), b"?").unwrap();

        let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
        assert_eq!(report.entries, 1);
        let reasons: Vec<&str> = report.quarantined.iter().map(|(_, r)| r.as_str()).collect();
        assert_eq!(report.quarantined.len(), 2, "{reasons:?}");
        assert!(
            reasons.iter().any(|r| r.contains("payload checksum")),
            "{reasons:?}"
        );
        assert!(
            reasons.iter().any(|r| r.contains("not a spool entry")),
            "{reasons:?}"
        );
        let stats = spool.stats();
        assert_eq!((stats.files, stats.quarantined_files), (1, 2));
        assert_eq!(spool.metrics().quarantined_total(), 2);
        let reason = std::fs::read_to_string(
            fx.dir
                .path()
                .join(QUARANTINE_DIR)
                .join(format!("{}.reason", entry_file_name(bad.seq))),
        )
        .unwrap();
        assert!(reason.contains("checksum"), "{reason}");
        // New entries never reuse the quarantined entry's sequence number.
        assert!(spool.put("next", payload(1)).await.unwrap().seq > bad.seq);
    }

    #[tokio::test]
    async fn a_corrupt_entry_is_quarantined_even_when_its_note_cannot_be_written() {
        let fx = Fixture::new();
        let spool = fx.spool().await;
        let bad = spool.put("bad", payload(10)).await.unwrap();
        drop(spool);
        let path = fx
            .dir
            .path()
            .join(ENTRIES_DIR)
            .join(entry_file_name(bad.seq));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[0] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        // The disk is full: the note cannot be written, the move still happens.
        fx.disk.fail_next(Op::Create, io::ErrorKind::StorageFull);
        let (spool, report) = fx.open(SpoolConfig::default()).await.unwrap();
        assert_eq!(report.quarantined.len(), 1);
        assert_eq!(spool.stats().files, 0);
        assert!(
            fx.dir
                .path()
                .join(QUARANTINE_DIR)
                .join(entry_file_name(bad.seq))
                .exists()
        );
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

    #[tokio::test]
    async fn a_failed_directory_sync_stops_the_spool_until_it_is_reopened() {
        let fx = Fixture::new();
        let spool = fx.spool().await;
        fx.disk.fail_next(Op::SyncDir, io::ErrorKind::Other);
        let err = spool.put("a", payload(10)).await.unwrap_err();
        assert!(matches!(err, PutError::Broken { .. }), "{err}");
        // The disk is healthy again, but an fsync is never retried.
        let again = spool.put("b", payload(10)).await.unwrap_err();
        assert!(again.to_string().contains("syncing directory"), "{again}");
        assert!(spool.stats().broken.is_some());
        drop(spool);
        let spool = fx.spool().await;
        spool.put("b", payload(10)).await.unwrap();
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
        assert_eq!(fx.entries(), [entry_file_name(1), entry_file_name(3)]);
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
        let (header, bytes) = entry::decode(Bytes::from(
            std::fs::read(dl.join(entry_file_name(1))).unwrap(),
        ))
        .unwrap();
        assert_eq!((header.name.as_str(), bytes.len()), ("poison", 5));
        let error = std::fs::read_to_string(dl.join(format!("{}.error", entry_file_name(1))));
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

    #[test]
    fn entry_file_names_round_trip_and_reject_lookalikes() {
        assert_eq!(parse_seq(&entry_file_name(42)), Some(42));
        assert_eq!(parse_seq(&entry_file_name(u64::MAX)), Some(u64::MAX));
        for bad in [
            "42.entry",
            "0000000000000000004x.entry",
            "00000000000000000042.tmp",
        ] {
            assert_eq!(parse_seq(bad), None, "{bad}");
        }
        assert_eq!(unique_name(&["a".into(), "a.1".into()], "a"), "a.2");
    }
}
