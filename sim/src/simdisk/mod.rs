//! The simulated disk: `spool::Disk` on the bench's own file system model ([`fs`]),
//! one per app host, kept outside the turmoil host so that it outlives crashes.
//!
//! ## The crash model
//!
//! What survives a power loss follows ext4 with `data=ordered` and delayed
//! allocation, made no kinder than the weakest file system the spool may run on
//! (sources: Pillai et al., "All File Systems Are Not Created Equal", OSDI 2014,
//! the table of persistence properties; Mohan et al., "Finding Crash-Consistency Bugs
//! with Bounded Black-Box Crash Testing" (CrashMonkey), OSDI 2018; the kernel's
//! Documentation/admin-guide/ext4.rst on `data=ordered` and `auto_da_alloc`; the
//! PostgreSQL "fsyncgate" thread, 2018; all summarized in `docs/crash-model.md`):
//!
//! - data made durable by `fdatasync` survives;
//! - unsynced data survives as one of: none of it, all of it, a zero-length file, or
//!   the new size with a random subset of blocks and zeros elsewhere (ext4 delayed
//!   allocation shows the first three; xfs unwritten extents the zeros);
//! - namespace operations (create, rename, unlink, mkdir) since a directory's last
//!   sync survive as a random prefix, in issue order, per directory; a rename is
//!   atomic (old name or new, never both or neither);
//! - syncing a directory makes its earlier operations durable, and those they depend
//!   on in other directories; syncing a file does not make its name durable (ext4
//!   happens to commit the journal on a file sync; the model does not rely on it);
//! - a failed sync keeps some of what it covered and drops the rest for good: later
//!   syncs succeed without writing it (Linux marks the failed pages clean).
//!
//! States it can produce: every prefix of each directory's unsynced operations
//! (independent across unrelated directories), a rename persisted before the
//! directory sync that would have acknowledged it, part of a batch of removals, a
//! renamed entry of length zero or with zeroed blocks, a directory lost with its
//! files. States it cannot: reordering within a directory (no journaling file
//! system does), a torn rename, corruption of data in flight (only at rest), partial
//! sector writes of synced data, or stale data from a previous file in a reused
//! block (ext4 `data=ordered` prevents it; `data=writeback` does not).
//!
//! ## Faults, and why the spool must survive each
//!
//! Each has its own probability (the scenario's `[disk]` table), drawn from the
//! host's seeded RNG during the fault window:
//!
//! - EIO on open, read, write, fsync, rename, unlink and readdir: a transient error
//!   must fail the one operation (one put, one read) it hit, not the spool;
//! - ENOSPC or EDQUOT on create, write and rename, and when the data would exceed
//!   `capacity`: a full disk is backpressure;
//! - a sticky read error (a bad sector): the entry is set aside, the rest drains;
//! - a bit flipped in synced data at rest: the checksum catches it, the entry is
//!   quarantined, never uploaded.
//!
//! Every operation can be the crash point ([`crash_point`]): [`SimDisk::crash_at`]
//! makes the disk lose power just before its k-th operation, or right after the n-th
//! operation of one kind (a rename, a write, a `mkdir`, ...), and every operation
//! first yields, so other tasks (other puts, the drainer) interleave with it as they
//! would with a real disk.

pub mod crash_point;
pub mod fs;
mod mutant;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use spool::disk::{Contents, Disk, DiskFuture, DiskLock, Names};

use crash_point::Schedule;
pub use crash_point::{CrashPoint, OpKind};
pub use fs::CrashStates;
use fs::Fs;
pub use mutant::DiskMutant;

/// Probabilities of each fault, per operation of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct FaultRates {
    /// EIO opening a file or creating a directory.
    pub eio_open: f64,
    /// EIO reading a file (this read only).
    pub eio_read: f64,
    /// EIO writing a file (part of the data may have been written).
    pub eio_write: f64,
    /// EIO from fsync/fdatasync of a file or a directory (what it covered may be
    /// partly lost, for good).
    pub eio_fsync: f64,
    /// EIO renaming (the rename may or may not have happened).
    pub eio_rename: f64,
    /// EIO unlinking (the removal may or may not have happened).
    pub eio_unlink: f64,
    /// EIO listing a directory.
    pub eio_readdir: f64,
    /// ENOSPC or EDQUOT creating a file.
    pub enospc_create: f64,
    /// ENOSPC or EDQUOT writing (part of the data may have been written).
    pub enospc_write: f64,
    /// ENOSPC or EDQUOT renaming (a directory needed a new block).
    pub enospc_rename: f64,
    /// A read finds a bad sector: this and every later read of the file fail.
    pub sticky_read: f64,
    /// A read finds one bit of the file's synced data flipped at rest.
    pub corrupt_at_rest: f64,
}

/// A host's disk: size, tearing, faults and when they apply.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskConfig {
    /// Bytes of file data the disk holds before writes fail with ENOSPC.
    pub capacity: Option<u64>,
    /// Granularity of what unsynced data survives a power loss.
    pub block_bytes: u64,
    /// Fault probabilities.
    pub faults: FaultRates,
    /// Faults apply from this simulated time...
    pub faults_from: Duration,
    /// ... until this one (to the end when `None`).
    pub faults_until: Option<Duration>,
}

impl Default for DiskConfig {
    fn default() -> Self {
        Self {
            capacity: None,
            block_bytes: 4096,
            faults: FaultRates::default(),
            faults_from: Duration::ZERO,
            faults_until: None,
        }
    }
}

/// What a disk did over a run: the crash states its power losses produced, the
/// faults it injected, and the files it damaged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskReport {
    /// Primitive operations done.
    pub operations: u64,
    /// What power losses left behind.
    pub crash_states: CrashStates,
    /// Faults injected, by kind.
    pub injected: BTreeMap<&'static str, u64>,
    /// Files the disk damaged.
    pub damage: Vec<Damage>,
}

/// Damage the disk did to a file, so that the checker can excuse what it caused.
#[derive(Debug, Clone, PartialEq)]
pub struct Damage {
    /// When, from t = 0.
    pub at: Duration,
    /// The file's path when it was damaged.
    pub path: PathBuf,
    /// `unreadable` (a sticky read error) or `corrupted` (a bit flipped at rest).
    pub kind: &'static str,
    /// The file's data just before.
    pub original: Bytes,
}

#[derive(Debug)]
struct DiskState {
    fs: Fs,
    rng: ChaCha8Rng,
    config: DiskConfig,
    /// Operations so far, the crash points to come, and the one reached (the host
    /// is then frozen until the world crashes it).
    schedule: Schedule,
    locks: BTreeSet<PathBuf>,
    mutant: Option<DiskMutant>,
    /// Renames a mutant has not done yet.
    deferred_renames: Vec<(PathBuf, PathBuf)>,
    damage: Vec<Damage>,
    crash_states: CrashStates,
    injected: BTreeMap<&'static str, u64>,
    /// Operations since the livelock check last read the clock, the simulated
    /// instant it read, and operations counted at that instant.
    livelock: Livelock,
}

/// Operations at one simulated instant that mean a livelock: far more than any
/// burst the spool makes (opening a spool is one listing, not one operation per
/// entry).
const LIVELOCK_OPS: u64 = 1_000_000;

/// Operations between two reads of the simulated clock by the livelock check: a
/// read looks the host up in turmoil's world, and a put is five operations.
const LIVELOCK_READ_EVERY: u64 = 4096;

/// The livelock check's count.
#[derive(Debug, Default)]
struct Livelock {
    /// Operations since the clock was last read.
    since_read: u64,
    /// The simulated instant last read.
    instant: Option<Duration>,
    /// Operations counted at `instant`, by whole reads.
    at_instant: u64,
}

/// `spool::Disk` on a simulated disk. Clones share the disk.
#[derive(Debug, Clone)]
pub struct SimDisk {
    state: Arc<Mutex<DiskState>>,
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("{what}: Input/output error (injected)"))
}

impl SimDisk {
    /// An empty disk, its randomness from `seed`.
    pub fn new(config: DiskConfig, seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(DiskState {
                fs: Fs::new(config.block_bytes as usize),
                rng: ChaCha8Rng::seed_from_u64(seed),
                config,
                schedule: Schedule::default(),
                locks: BTreeSet::new(),
                mutant: None,
                deferred_renames: Vec::new(),
                damage: Vec::new(),
                crash_states: CrashStates::default(),
                injected: BTreeMap::new(),
                livelock: Livelock::default(),
            })),
        }
    }

    fn lock_state(&self) -> MutexGuard<'_, DiskState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Loses power just before each of these operation counts (1-based, over the
    /// disk's life), instead of the crash points set before.
    pub fn crash_at_ops(&self, points: Vec<u64>) {
        let points: Vec<CrashPoint> = points.into_iter().map(CrashPoint::BeforeOp).collect();
        self.crash_at(&points);
    }

    /// Loses power at each of these points, instead of the crash points set before.
    pub fn crash_at(&self, points: &[CrashPoint]) {
        self.lock_state().schedule.set(points);
    }

    /// Plants a deliberate bug (see [`DiskMutant`]).
    pub fn set_mutant(&self, mutant: Option<DiskMutant>) {
        self.lock_state().mutant = mutant;
    }

    /// The crash point reached, once one is: the host must be crashed now.
    pub fn tripped(&self) -> Option<CrashPoint> {
        self.lock_state().schedule.tripped
    }

    /// Primitive operations so far.
    pub fn ops(&self) -> u64 {
        self.lock_state().schedule.ops
    }

    /// Power loss: what was not durable is decided by the crash model; locks are
    /// released (the process died with it).
    pub fn power_loss(&self) {
        let mut s = self.lock_state();
        let s = &mut *s;
        let states = s.fs.power_loss(&mut s.rng);
        s.crash_states.add(&states);
        s.locks.clear();
        s.deferred_renames.clear();
        s.schedule.tripped = None;
    }

    /// The crash states power losses produced so far.
    pub fn crash_states(&self) -> CrashStates {
        self.lock_state().crash_states
    }

    /// Faults injected so far, by kind.
    pub fn injected(&self) -> BTreeMap<&'static str, u64> {
        self.lock_state().injected.clone()
    }

    /// Files the disk damaged.
    pub fn damage(&self) -> Vec<Damage> {
        self.lock_state().damage.clone()
    }

    /// The files in `dir` and their sizes, as the disk has them now: the checker's
    /// view, not an operation of the spool's (no fault, no crash point).
    pub fn file_sizes(&self, dir: &Path) -> Vec<(String, u64)> {
        self.lock_state().fs.sizes(dir)
    }

    /// What the disk did over the run.
    pub fn report(&self) -> DiskReport {
        let s = self.lock_state();
        DiskReport {
            operations: s.schedule.ops,
            crash_states: s.crash_states,
            injected: s.injected.clone(),
            damage: s.damage.clone(),
        }
    }

    /// The files in `dir`, as the disk has them: the checker's view (no fault, no
    /// lie, no crash point).
    pub fn files(&self, dir: &Path) -> Vec<String> {
        self.lock_state().fs.list(dir).unwrap_or_default()
    }

    /// Calls `visit` with each file in `dir` and its contents as the disk has them
    /// (EIO on a bad sector), sorted by name, in one pass under one lock: the
    /// checker's view of a directory that may hold a whole backlog, handed over
    /// one file at a time (the contents share the disk's buffers) rather than
    /// collected first. Nothing if `dir` does not exist. `visit` must not use
    /// this disk (its lock is held).
    pub fn visit_files_with_contents(
        &self,
        dir: &Path,
        mut visit: impl FnMut(&str, io::Result<Contents>),
    ) {
        let s = self.lock_state();
        let Ok(files) = s.fs.files_in(dir) else {
            return;
        };
        for (name, ino) in files {
            visit(name, s.fs.read(ino));
        }
    }

    /// Turns faults off for good (for the final inventory): the injected errors,
    /// and the crash points the run did not reach, which would otherwise freeze the
    /// inventory's reopen at its k-th operation with no one left to crash the host.
    pub fn stop_faults(&self) {
        let mut s = self.lock_state();
        s.config.faults = FaultRates::default();
        s.schedule.clear();
    }

    /// One primitive operation of `kind`: yields first, so that other tasks
    /// interleave; stops here for good when power is lost before it; otherwise runs
    /// `f` with the state, and counts it (power may go right after it).
    async fn step<T>(
        &self,
        kind: OpKind,
        f: impl FnOnce(&mut DiskState) -> io::Result<T>,
    ) -> io::Result<T> {
        let_others_run().await;
        let frozen = {
            let mut s = self.lock_state();
            s.check_for_livelock();
            s.schedule.before_op()
        };
        if frozen {
            return std::future::pending().await;
        }
        let mut s = self.lock_state();
        let result = f(&mut s);
        s.schedule.after_op(kind);
        result
    }
}

/// Returns `Pending` once, having woken its own task: the task goes to the back of
/// its host's run queue, so every task ready now runs before the operation does,
/// and no simulated time passes. Not `tokio::task::yield_now`, which defers the
/// wake to the runtime's next park: a turn of the time driver (two clock reads
/// and a look at the timer wheel) per disk operation, about 3% of a replay's CPU
/// when a window of failed writes spools every one of them.
fn let_others_run() -> impl std::future::Future<Output = ()> {
    let mut woken = false;
    std::future::poll_fn(move |cx| {
        if woken {
            return std::task::Poll::Ready(());
        }
        woken = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
}

impl DiskState {
    /// Panics when the host does disk operations without simulated time passing:
    /// a loop that never waits would otherwise hang the run at this instant. The
    /// clock is read every [`LIVELOCK_READ_EVERY`] operations, so a livelock is
    /// found within that many operations past [`LIVELOCK_OPS`].
    fn check_for_livelock(&mut self) {
        let count = &mut self.livelock;
        count.since_read += 1;
        if count.since_read < LIVELOCK_READ_EVERY {
            return;
        }
        let now = turmoil::sim_elapsed();
        if now == count.instant {
            count.at_instant += count.since_read;
        } else {
            count.instant = now;
            count.at_instant = 0;
        }
        count.since_read = 0;
        assert!(
            count.at_instant < LIVELOCK_OPS,
            "livelock: {LIVELOCK_OPS} disk operations at simulated time {now:?} without time passing (a retry loop that never waits?)"
        );
    }

    fn faults_active(&self) -> bool {
        let Some(now) = turmoil::sim_elapsed() else {
            return false;
        };
        now >= self.config.faults_from && self.config.faults_until.is_none_or(|u| now < u)
    }

    /// Draws whether a fault of probability `p` happens now, counting it.
    fn fault(&mut self, label: &'static str, p: f64) -> bool {
        if p <= 0.0 || !self.faults_active() {
            return false;
        }
        let hit = self.rng.random_bool(p.min(1.0));
        if hit {
            *self.injected.entry(label).or_default() += 1;
        }
        hit
    }

    fn no_space(&mut self, what: &Path) -> io::Error {
        let kind = if self.rng.random_bool(0.5) {
            io::ErrorKind::StorageFull
        } else {
            io::ErrorKind::QuotaExceeded
        };
        io::Error::new(kind, format!("{}: No space left on device", what.display()))
    }

    fn would_overflow(&self, extra: u64) -> bool {
        self.config
            .capacity
            .is_some_and(|c| self.fs.used_bytes() + extra > c)
    }

    fn record_damage(&mut self, path: &Path, ino: fs::Ino, kind: &'static str) {
        let original = self.fs.peek(ino).to_bytes();
        self.damage.push(Damage {
            at: turmoil::sim_elapsed().unwrap_or_default(),
            path: path.to_path_buf(),
            kind,
            original,
        });
    }
}

struct HeldLock {
    disk: SimDisk,
    path: PathBuf,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        self.disk.lock_state().locks.remove(&self.path);
    }
}

impl SimDisk {
    async fn write_file(&self, path: &Path, data: Contents) -> io::Result<()> {
        let ino = self
            .step(OpKind::Create, |s| {
                if s.fault("enospc_create", s.config.faults.enospc_create) {
                    return Err(s.no_space(path));
                }
                if s.fault("eio_open", s.config.faults.eio_open) {
                    return Err(eio(&path.display().to_string()));
                }
                s.fs.create(path)
            })
            .await?;
        self.step(OpKind::Write, |s| {
            let len = data.len();
            let torn = |s: &mut DiskState| s.rng.random_range(0..=len);
            let short_write = s.mutant == Some(DiskMutant::ShortWriteIgnored) && len > 1;
            if short_write {
                s.fs.fill(ino, data.prefix(len / 2));
                return Ok(());
            }
            if s.would_overflow(len as u64) {
                let room = s
                    .config
                    .capacity
                    .unwrap_or(0)
                    .saturating_sub(s.fs.used_bytes());
                s.fs.fill(ino, data.prefix((room as usize).min(len)));
                return Err(s.no_space(path));
            }
            if s.fault("enospc_write", s.config.faults.enospc_write) {
                let at = torn(s);
                s.fs.fill(ino, data.prefix(at));
                return Err(s.no_space(path));
            }
            if s.fault("eio_write", s.config.faults.eio_write) {
                let at = torn(s);
                s.fs.fill(ino, data.prefix(at));
                return Err(eio(&path.display().to_string()));
            }
            s.fs.fill(ino, data);
            Ok(())
        })
        .await?;
        self.step(OpKind::SyncFile, |s| {
            if s.mutant == Some(DiskMutant::DataNotSynced) {
                return Ok(());
            }
            let fail = s.fault("eio_fsync", s.config.faults.eio_fsync);
            s.fs.sync_file(ino, fail);
            if fail {
                return Err(eio(&format!("fdatasync {}", path.display())));
            }
            Ok(())
        })
        .await
    }
}

impl SimDisk {
    /// The inode at `path`, created (a step of its own) when it does not exist.
    async fn open_for_append(&self, path: &Path) -> io::Result<fs::Ino> {
        let found = self.lock_state().fs.lookup(path);
        if let Ok(ino) = found {
            return Ok(ino);
        }
        self.step(OpKind::Create, |s| {
            if s.fault("enospc_create", s.config.faults.enospc_create) {
                return Err(s.no_space(path));
            }
            if s.fault("eio_open", s.config.faults.eio_open) {
                return Err(eio(&path.display().to_string()));
            }
            s.fs.create(path)
        })
        .await
    }
}

impl Disk for SimDisk {
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            let mut missing: Vec<&Path> = dir
                .ancestors()
                .take_while(|d| !self.lock_state().fs.dir_exists(d))
                .collect();
            missing.reverse();
            for d in missing {
                self.step(OpKind::Mkdir, |s| {
                    if s.fault("eio_open", s.config.faults.eio_open) {
                        return Err(eio(&d.display().to_string()));
                    }
                    s.fs.mkdir(d)
                })
                .await?;
                // The contract: a directory created here is durable in its parent.
                let parent = d.parent().unwrap_or(Path::new("/"));
                self.sync_dir(parent).await?;
            }
            Ok(())
        })
    }

    fn create_synced<'a>(&'a self, path: &'a Path, data: Contents) -> DiskFuture<'a, ()> {
        Box::pin(self.write_file(path, data))
    }

    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(self.step(OpKind::Rename, move |s| {
            s.fs.lookup(from)?;
            if s.fault("enospc_rename", s.config.faults.enospc_rename) {
                return Err(s.no_space(to));
            }
            if s.fault("eio_rename", s.config.faults.eio_rename) {
                if s.rng.random_bool(0.5) {
                    s.fs.rename(from, to)?;
                }
                return Err(eio(&format!("rename {}", from.display())));
            }
            if s.mutant == Some(DiskMutant::RenameNotAwaited) {
                s.deferred_renames
                    .push((from.to_path_buf(), to.to_path_buf()));
                return Ok(());
            }
            s.fs.rename(from, to)
        }))
    }

    fn sync_dir<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(self.step(OpKind::SyncDir, move |s| {
            let result = match s.mutant {
                Some(DiskMutant::DirSyncSkipped) => Ok(()),
                _ => {
                    let fail = s.fault("eio_fsync", s.config.faults.eio_fsync);
                    if fail {
                        let s = &mut *s;
                        s.fs.sync_dir(dir, Some(&mut s.rng))?;
                        if s.mutant == Some(DiskMutant::DirSyncErrorHidden) {
                            Ok(())
                        } else {
                            Err(eio(&format!("fsync {}", dir.display())))
                        }
                    } else {
                        s.fs.sync_dir(dir, None)
                    }
                }
            };
            for (from, to) in std::mem::take(&mut s.deferred_renames) {
                let _ = s.fs.rename(&from, &to);
            }
            result
        }))
    }

    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Names> {
        Box::pin(self.step(OpKind::Readdir, move |s| {
            if s.fault("eio_readdir", s.config.faults.eio_readdir) {
                return Err(eio(&format!("readdir {}", dir.display())));
            }
            let drops = s.mutant == Some(DiskMutant::ListingDropsEntries);
            let kept = |n: &&str| !drops || n.split('.').nth(1).is_none_or(|ms| !ms.ends_with('7'));
            // Counted first, so the listing of a whole backlog is two allocations.
            let (count, bytes) =
                s.fs.names(dir)?
                    .filter(kept)
                    .fold((0, 0), |(count, bytes), n| (count + 1, bytes + n.len()));
            let mut names = Names::with_capacity(count, bytes);
            s.fs.names(dir)?.filter(kept).for_each(|n| names.push(n));
            Ok(names)
        }))
    }

    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>> {
        Box::pin(async move {
            let ino = self
                .step(OpKind::Open, |s| {
                    if s.fault("eio_open", s.config.faults.eio_open) {
                        return Err(eio(&path.display().to_string()));
                    }
                    s.fs.lookup(path)
                })
                .await?;
            self.step(OpKind::Read, |s| {
                if s.fault("sticky_read", s.config.faults.sticky_read) {
                    s.record_damage(path, ino, "unreadable");
                    s.fs.make_unreadable(ino);
                }
                if s.fault("corrupt_at_rest", s.config.faults.corrupt_at_rest) {
                    s.record_damage(path, ino, "corrupted");
                    let s = &mut *s;
                    s.fs.corrupt_at_rest(ino, &mut s.rng);
                }
                if s.fault("eio_read", s.config.faults.eio_read) {
                    return Err(eio(&path.display().to_string()));
                }
                s.fs.read(ino).map(|contents| contents.to_vec())
            })
            .await
        })
    }

    /// An append is a create when the file is missing (a step of its own, as for
    /// `create_synced`), then a write: each a crash point, with the faults of both.
    fn append<'a>(&'a self, path: &'a Path, data: bytes::Bytes) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            let ino = self.open_for_append(path).await?;
            self.step(OpKind::Write, |s| {
                let len = data.len();
                if s.would_overflow(len as u64)
                    || s.fault("enospc_write", s.config.faults.enospc_write)
                {
                    return Err(s.no_space(path));
                }
                if s.fault("eio_write", s.config.faults.eio_write) {
                    let at = s.rng.random_range(0..=len);
                    s.fs.append(ino, data.slice(..at));
                    return Err(eio(&path.display().to_string()));
                }
                s.fs.append(ino, data);
                Ok(())
            })
            .await
        })
    }

    fn write_at<'a>(
        &'a self,
        path: &'a Path,
        offset: u64,
        data: bytes::Bytes,
    ) -> DiskFuture<'a, ()> {
        Box::pin(self.step(OpKind::Write, move |s| {
            let ino = s.fs.lookup(path)?;
            if s.fault("eio_write", s.config.faults.eio_write) {
                return Err(eio(&path.display().to_string()));
            }
            let offset = usize::try_from(offset).unwrap_or(usize::MAX);
            s.fs.write_at(ino, offset, &data)
        }))
    }

    fn sync_file<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(self.step(OpKind::SyncFile, move |s| {
            let ino = s.fs.lookup(path)?;
            if s.mutant == Some(DiskMutant::DataNotSynced) {
                return Ok(());
            }
            let fail = s.fault("eio_fsync", s.config.faults.eio_fsync);
            s.fs.sync_file(ino, fail);
            if fail {
                return Err(eio(&format!("fdatasync {}", path.display())));
            }
            Ok(())
        }))
    }

    fn read_range<'a>(&'a self, path: &'a Path, offset: u64, len: u64) -> DiskFuture<'a, Vec<u8>> {
        Box::pin(async move {
            let data = self.read(path).await?;
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(data.len());
            let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
            Ok(data[start..end.min(data.len())].to_vec())
        })
    }

    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(self.step(OpKind::Unlink, move |s| {
            s.fs.lookup(path)?;
            if s.fault("eio_unlink", s.config.faults.eio_unlink) {
                if s.rng.random_bool(0.5) {
                    s.fs.unlink(path)?;
                }
                return Err(eio(&format!("unlink {}", path.display())));
            }
            s.fs.unlink(path)
        }))
    }

    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock> {
        Box::pin(async move {
            self.step(OpKind::Lock, |s| {
                if s.locks.insert(path.to_path_buf()) {
                    Ok(())
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!(
                            "{} is locked by another process on this host",
                            path.display()
                        ),
                    ))
                }
            })
            .await?;
            Ok(DiskLock::new(HeldLock {
                disk: self.clone(),
                path: path.to_path_buf(),
            }))
        })
    }
}
