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
//! - After an I/O error whose effect on disk is unknown (a failed fsync, write or
//!   rename) the spool stops accepting puts for good; reopening re-verifies the disk.
//!   Running out of space is not such an error: it is a full spool.
//!
//! Where each part lives: the on-disk layout and entry verification in [`layout`],
//! opening in [`open`], puts and their reservations in [`put`], claims and removal
//! in [`claim`], dead-letter and quarantine moves in [`aside`].

mod aside;
mod claim;
mod group_commit;
pub mod layout;
mod open;
mod put;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use claim::{Claim, ReadError};
pub use open::OpenReport;
pub use put::Receipt;

use crate::clock::{Clock, SystemClock};
use crate::disk::{Disk, DiskLock, StdDisk};
use crate::error::OpenError;
use crate::metrics::Metrics;
use crate::stats::Stats;
use group_commit::DirSync;

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

/// One indexed entry.
#[derive(Debug, Clone, Copy)]
struct Meta {
    file_bytes: u64,
    created_unix_ms: u64,
    claimed: bool,
}

/// Everything behind the spool's one mutex. Never held across an await.
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

impl State {
    /// The spool's own invariants, checked after every change in debug builds.
    fn check(&self, config: &SpoolConfig) {
        if cfg!(debug_assertions) {
            let held = self.index.len() as u64;
            debug_assert!(
                held + self.reserved_files <= config.max_files,
                "held {held} + reserved {} files over max_files {}",
                self.reserved_files,
                config.max_files
            );
            debug_assert!(
                self.bytes + self.reserved_bytes <= config.max_bytes,
                "held {} + reserved {} bytes over max_bytes {}",
                self.bytes,
                self.reserved_bytes,
                config.max_bytes
            );
            debug_assert!(
                self.claimed <= held,
                "{} claims on {held} entries",
                self.claimed
            );
            debug_assert!(
                self.index
                    .keys()
                    .next_back()
                    .is_none_or(|&max| max < self.next_seq),
                "an indexed sequence number at or past next_seq {}",
                self.next_seq
            );
        }
    }
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

    /// Turns on a deliberate bug (see [`Mutation`]).
    #[cfg(feature = "mutations")]
    pub fn set_mutation(&self, mutation: Mutation) {
        self.inner
            .mutation
            .store(mutation as u8, std::sync::atomic::Ordering::SeqCst);
    }

    #[cfg(feature = "mutations")]
    pub(crate) fn mutation_is(&self, mutation: Mutation) -> bool {
        self.inner
            .mutation
            .load(std::sync::atomic::Ordering::SeqCst)
            == mutation as u8
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
}

/// ENOSPC or EDQUOT: a full disk is backpressure, not a broken spool.
fn is_out_of_space(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}
