//! The spool: a bounded directory of entry files with an in-memory index.
//!
//! Promises:
//! - `put` returns `Ok` only when the entry is durable: data synced, renamed into
//!   place, and the directory synced. Concurrent puts share directory syncs (group
//!   commit, [`group_commit`]), so throughput grows with concurrency.
//! - Capacity is reserved synchronously, before the first await, so concurrent puts
//!   can never take the spool past `max_files` or `max_bytes`.
//! - The directory is listed once, at open ([`open`]). After that every operation is
//!   O(log n) in the index.
//! - An error on one file (creating, writing or syncing a put's temp file, renaming
//!   it, reading an entry) fails that one operation; the caller is told. Running out
//!   of space anywhere is a full spool (backpressure).
//! - An error from a directory sync stops every put (the kernel may have dropped
//!   what it held, and a retried fsync can lie), then the spool reopens itself in
//!   place from what is on disk, with backoff ([`recover`]). Every directory sync
//!   goes through one path ([`group_commit`]), so none can be ignored.
//! - The index forgets an entry only once its removal or move has succeeded.
//!
//! Where each part lives: the on-disk layout and entry verification in [`layout`],
//! opening in [`open`], puts and their reservations in [`put`], claims and removal
//! in [`claim`], dead-letter and quarantine moves in [`aside`], reopening in place
//! after a failed directory sync in [`recover`].

mod aside;
mod claim;
mod group_commit;
mod index;
pub mod layout;
mod open;
mod put;
mod recover;
mod stage;
mod store_took;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use aside::{Requeued, SetAside};
pub use claim::{Claim, ReadError};
pub use open::OpenReport;
pub use put::Receipt;
pub use stage::Staged;

use crate::clock::{Clock, SystemClock};
use crate::disk::{Disk, DiskLock, StdDisk};
use crate::error::OpenError;
use crate::metrics::Metrics;
use crate::stats::Stats;
use group_commit::DirSync;
use index::Index;

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
    /// many removals. A power loss can bring back the drained entries whose removal
    /// was not yet synced: fewer than this many since the last sync, plus the batch
    /// the remover was deleting and those queued for it; they are sent again and
    /// answered "already exists", costing one request each.
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
        let positive = [
            ("max_files", self.max_files),
            ("max_bytes", self.max_bytes),
            ("remove_sync_batch", u64::from(self.remove_sync_batch)),
        ];
        match positive.iter().find(|(_, value)| *value == 0) {
            Some((field, _)) => Err(OpenError::Config(format!("{field} must be at least 1"))),
            None => Ok(()),
        }
    }
}

/// One indexed entry: 32 bytes, 56 with its key in the index's B-tree (and its
/// place in its name's order, [`index`]).
#[derive(Debug, Clone, Copy)]
struct Meta {
    file_bytes: u64,
    created_unix_ms: u64,
    /// Its object name's key ([`crate::name::key`]).
    name_key: u64,
    naming: Naming,
    claimed: bool,
    /// In the store, its removal not yet done: still claimed, no longer in its
    /// name's order.
    delivered: bool,
    /// Consecutive failed reads; the entry is set aside at [`UNREADABLE_AFTER`].
    read_failures: u8,
    /// Its object is no longer wanted ([`Spool::withdraw`]): whoever holds it
    /// removes it instead of delivering it.
    withdrawn: bool,
}

/// How an entry's file is named (`layout`): by the version that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// `<seq>.entry`, before 2026-12.
    Legacy,
    /// `<seq>.<ms>.<bytes>.entry`, 2026-12 to 2026-12-06.
    Unkeyed,
    /// `<seq>.<ms>.<bytes>.<key>.entry`.
    Keyed,
}

impl Meta {
    /// An undelivered, unclaimed entry.
    fn new(file_bytes: u64, created_unix_ms: u64, name_key: u64, naming: Naming) -> Self {
        Meta {
            file_bytes,
            created_unix_ms,
            name_key,
            naming,
            claimed: false,
            delivered: false,
            read_failures: 0,
            withdrawn: false,
        }
    }

    fn file_name(&self, seq: u64) -> String {
        match self.naming {
            Naming::Legacy => layout::legacy_entry_file_name(seq),
            Naming::Unkeyed => {
                layout::unkeyed_entry_file_name(seq, self.created_unix_ms, self.file_bytes)
            }
            Naming::Keyed => {
                layout::entry_file_name(seq, self.created_unix_ms, self.file_bytes, self.name_key)
            }
        }
    }
}

/// Reads of one entry that may fail in a row (transient errors) before it is set
/// aside as unreadable: a bad sector must not stop the drain.
pub const UNREADABLE_AFTER: u8 = 5;

/// Everything behind the spool's one mutex. Never held across an await.
#[derive(Debug)]
struct State {
    index: Index,
    reserved_files: u64,
    reserved_bytes: u64,
    next_seq: u64,
    broken: Option<Arc<str>>,
    /// A recovery task is running (set with `broken`, cleared when it succeeds).
    recovering: bool,
    /// The disk refused the last put that failed on it (out of space, read-only,
    /// an I/O error), cleared by the next durable put: what a readiness check says.
    disk_refused: Option<Arc<str>>,
    quarantined_files: u64,
    dead_letter_files: u64,
    unsynced_removes: u32,
    /// Delivered entries waiting for the remover: (sequence, file name).
    removals: Vec<(u64, String)>,
    /// Entries the remover is deleting now.
    removing: Vec<u64>,
    /// Calls of [`State::check`] since the index was last walked (debug builds).
    changes_since_index_check: u64,
}

/// Changes between two whole-index passes of [`State::check`] at least: below this
/// many entries the pass is cheap enough to run more often than once per entry.
const INDEX_CHECK_MIN_CHANGES: u64 = 1024;

impl State {
    /// The spool's own invariants, checked after every change in debug builds.
    ///
    /// Each call costs O(1): the running totals are checked against each other and
    /// the bounds. The index itself is walked (its byte and claim totals summed)
    /// once per `max(index.len(), INDEX_CHECK_MIN_CHANGES)` changes, so the walk
    /// costs O(1) per change amortized: a debug build keeps its assertions without
    /// turning a put into a pass over a backlog of millions. Open and recovery,
    /// which rebuild the index, walk it at once ([`State::check_index`]).
    fn check(&mut self, config: &SpoolConfig) {
        if cfg!(debug_assertions) {
            self.check_totals(config);
            self.changes_since_index_check += 1;
            let due = (self.index.len() as u64).max(INDEX_CHECK_MIN_CHANGES);
            if self.changes_since_index_check >= due {
                self.check_index();
            }
        }
    }

    /// The O(1) part of [`State::check`]: the totals against the bounds and each other.
    fn check_totals(&self, config: &SpoolConfig) {
        // Open may find more than the caps allow (they were lowered); puts then
        // reserve nothing until the drain has made room.
        let held = self.index.len() as u64;
        debug_assert!(
            self.reserved_files == 0 || held + self.reserved_files <= config.max_files,
            "held {held} + reserved {} files over max_files {}",
            self.reserved_files,
            config.max_files
        );
        debug_assert!(
            self.reserved_bytes == 0
                || self.index.bytes() + self.reserved_bytes <= config.max_bytes,
            "held {} + reserved {} bytes over max_bytes {}",
            self.index.bytes(),
            self.reserved_bytes,
            config.max_bytes
        );
        debug_assert!(
            self.index.claimed() <= held,
            "{} claims on {held} entries",
            self.index.claimed()
        );
        debug_assert!(
            self.index.last_seq().is_none_or(|max| max < self.next_seq),
            "an indexed sequence number at or past next_seq {}",
            self.next_seq
        );
    }

    /// The O(n) part of [`State::check`]: the running totals and the names' order
    /// against the entries ([`Index::check`]).
    fn check_index(&mut self) {
        if cfg!(debug_assertions) {
            self.index.check();
            self.changes_since_index_check = 0;
        }
    }
}

/// One of the spool's three directories, and the group commit of its syncs.
struct SpoolDir {
    path: PathBuf,
    sync: DirSync,
}

impl SpoolDir {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            sync: DirSync::default(),
        }
    }
}

struct Inner {
    entries: SpoolDir,
    quarantine: SpoolDir,
    dead_letter: SpoolDir,
    config: SpoolConfig,
    disk: Arc<dyn Disk>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    state: Mutex<State>,
    changed: tokio::sync::Notify,
    /// Wakes whoever waits for an entry to be withdrawn ([`Spool::withdrawn`]):
    /// apart from `changed`, so that a drainer's worker in its backoff is not
    /// woken by every put.
    withdrawals: tokio::sync::Notify,
    /// Wakes a drain worker out of its backoff when the store takes a write.
    store_took: store_took::StoreTook,
    /// Wakes the remover task ([`claim::run_remover`]).
    removals_wake: Arc<tokio::sync::Notify>,
    _lock: DiskLock,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Lets the remover see that the spool is gone.
        self.removals_wake.notify_one();
    }
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
            .field("entries_dir", &self.inner.entries.path)
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

    /// The configuration the spool was opened with.
    pub fn config(&self) -> &SpoolConfig {
        &self.inner.config
    }

    /// The spool's directory (holding `entries/`, `quarantine/`, `dead-letter/`),
    /// for neighbours that keep files beside it (the relay's resumable sessions).
    pub fn dir(&self) -> &Path {
        self.inner
            .entries
            .path
            .parent()
            .expect("entries/ is inside the spool's directory")
    }

    /// The disk the spool writes through, for neighbours that keep files beside it:
    /// they then live on the same file system, under the same crash model.
    pub fn disk(&self) -> &Arc<dyn Disk> {
        &self.inner.disk
    }

    /// The wall clock the spool reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// The counters and histograms shared by this spool's uploader and drainer.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Registers the spool's metrics (gauges read at scrape time, counters and
    /// histograms) in `registry`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        let spool = self.clone();
        self.inner.metrics.register(registry, move || spool.stats());
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A point-in-time view of the spool.
    pub fn stats(&self) -> Stats {
        let now = self.inner.clock.now_unix_ms();
        let state = self.state();
        let oldest = state.index.oldest().map(|m| m.created_unix_ms);
        Stats {
            files: state.index.len() as u64,
            bytes: state.index.bytes(),
            reserved_files: state.reserved_files,
            reserved_bytes: state.reserved_bytes,
            claimed: state.index.claimed(),
            oldest_created_unix_ms: oldest,
            oldest_age: oldest
                .map(|t| Duration::from_millis(now.saturating_sub(t)))
                .unwrap_or_default(),
            quarantined_files: state.quarantined_files,
            dead_letter_files: state.dead_letter_files,
            broken: state.broken.as_deref().map(str::to_owned),
            disk_refused: state.disk_refused.as_deref().map(str::to_owned),
            max_files: self.inner.config.max_files,
            max_bytes: self.inner.config.max_bytes,
        }
    }

    /// True when no entry is stored or being written.
    pub fn is_empty(&self) -> bool {
        let state = self.state();
        state.index.is_empty() && state.reserved_files == 0
    }

    /// True while the spool may still write the object `name` to the store: an
    /// entry of it waits, is being delivered, or was delivered and its removal is not
    /// yet durable (a power loss would bring it back and it would be sent again). A
    /// write of `name` made now must then be spooled behind it, not written past it
    /// ([`Uploader`](crate::Uploader) does): the store would otherwise see the
    /// older write last.
    pub fn holds_name(&self, name: &str) -> bool {
        self.state().index.holds_name(crate::name::key(name))
    }
}

impl Spool {
    /// Waits until every change made to `dir` so far is durable. A failure stops
    /// puts and starts the recovery: this is the one path every directory sync takes.
    async fn sync_dir(&self, dir: &SpoolDir) -> std::io::Result<()> {
        let ticket = dir.sync.ticket();
        self.sync_dir_upto(dir, ticket).await
    }

    /// Waits until the change named by `ticket` in `dir` is durable; see
    /// [`Spool::sync_dir`].
    async fn sync_dir_upto(&self, dir: &SpoolDir, ticket: u64) -> std::io::Result<()> {
        let result = dir
            .sync
            .wait_durable(&*self.inner.disk, &dir.path, ticket)
            .await;
        match &result {
            Err(e) if is_out_of_descriptors(e) => {
                tracing::warn!(error = %e, dir = %dir.path.display(),
                    "cannot open a spool directory to sync it: out of file descriptors");
            }
            Err(e) => {
                self.break_spool(format!("syncing directory {}: {e}", dir.path.display()));
            }
            Ok(()) => {}
        }
        result
    }

    /// Marks the spool broken (first reason wins), starts the recovery if it is not
    /// running, and returns the error for the caller.
    fn break_spool(&self, reason: String) -> crate::error::PutError {
        let mut state = self.state();
        let reason = state
            .broken
            .get_or_insert_with(|| {
                tracing::error!(%reason, "spool stopped accepting writes; it will reopen itself");
                reason.into()
            })
            .clone();
        if !state.recovering {
            state.recovering = true;
            tokio::spawn(recover::run(Arc::downgrade(&self.inner)));
        }
        crate::error::PutError::Broken { reason }
    }
}

/// EMFILE or ENFILE: the process (or the system) is out of file descriptors. Such an
/// error says nothing of the disk or of the entry: the file or directory could not
/// be opened, so nothing was read, written or synced. It must neither break the
/// spool (a directory that could not be opened was not synced, and no fsync failed)
/// nor count against an entry's reads (`torture faults --only fds`, docs/faults.md).
pub(crate) fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// ENOSPC or EDQUOT: a full disk is backpressure, not a broken spool.
fn is_out_of_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}
