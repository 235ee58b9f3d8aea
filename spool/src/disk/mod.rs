//! The disk seam: the file-system operations the spool needs, and nothing else
//! (`remove_all` and `read_all` are batches whose default makes one call per file;
//! `write_and_rename` is two calls in one). A file is written whole
//! (`create_synced`), or as its bytes arrive (`append`, `write_at`, then
//! `sync_file`), so that an upload streamed into the spool holds one piece in memory,
//! not the object.
//!
//! Production uses [`StdDisk`] (`std::fs` on tokio's blocking pool, so an fsync never
//! stalls an async worker). A simulation supplies a disk that forgets what was not
//! synced when it "loses power". The durability contract every implementation must
//! keep, and the spool relies on:
//!
//! - after [`Disk::create_synced`] or [`Disk::sync_file`] returns, the file's
//!   *contents* survive power loss, but its directory entry does not until the
//!   directory is synced; `append` and `write_at` alone make nothing durable;
//! - after [`Disk::sync_dir`] returns, every create, rename and remove done in that
//!   directory before the call survives power loss;
//! - an error from either means nothing about what survived.
//!
//! `testing::conformance` (feature `testing`) holds a suite any implementation can
//! run.

mod contents;
mod names;

pub use contents::Contents;
pub use names::Names;

use std::fs::File;
use std::future::Future;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;

use bytes::Bytes;

/// A boxed future returned by [`Disk`] methods.
pub type DiskFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// A held exclusive lock on a spool directory; released when dropped.
pub struct DiskLock(#[allow(dead_code)] Box<dyn Send + Sync>);

impl DiskLock {
    /// Wraps whatever keeps the lock held (a file handle, a registry guard).
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Self(Box::new(guard))
    }
}

impl std::fmt::Debug for DiskLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DiskLock")
    }
}

/// What [`Disk::prepare`] does to a spool's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirPlan {
    /// The spool's directory, synced once its subdirectories exist.
    pub dir: PathBuf,
    /// Directories to create (with any missing parents), in order.
    pub create: Vec<PathBuf>,
    /// The lock to take.
    pub lock: PathBuf,
    /// Directories to list, in order, once the lock is held.
    pub list: Vec<PathBuf>,
}

/// What [`Disk::prepare`] leaves: the lock, held, and one listing per directory of
/// [`DirPlan::list`], in its order.
#[derive(Debug)]
pub struct Prepared {
    /// The spool's lock.
    pub lock: DiskLock,
    /// The names in each listed directory.
    pub listings: Vec<Names>,
}

/// A step of [`Disk::prepare`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrepareStep {
    /// Creating a directory (with its missing parents).
    CreateDirectory,
    /// Syncing the spool's directory.
    SyncDirectory,
    /// Taking the lock.
    Lock,
    /// Listing a directory.
    List,
    /// Handing the whole call to another thread.
    HandOff,
}

impl PrepareStep {
    /// What the step does, as an error message says it.
    pub fn as_str(self) -> &'static str {
        match self {
            PrepareStep::CreateDirectory => "create directory",
            PrepareStep::SyncDirectory => "sync directory",
            PrepareStep::Lock => "lock",
            PrepareStep::List => "list",
            PrepareStep::HandOff => "prepare",
        }
    }
}

/// The step of [`Disk::prepare`] that failed.
#[derive(Debug, thiserror::Error)]
#[error("{} {}: {source}", step.as_str(), path.display())]
pub struct PrepareError {
    /// What was being done.
    pub step: PrepareStep,
    /// The directory or lock file concerned.
    pub path: PathBuf,
    /// The underlying error.
    pub source: io::Error,
}

/// The future [`Disk::prepare`] returns.
pub type PrepareFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Prepared, PrepareError>> + Send + 'a>>;

/// Names the step of [`Disk::prepare`] an error came from.
fn failed<'p>(step: PrepareStep, path: &'p Path) -> impl FnOnce(io::Error) -> PrepareError + 'p {
    move |source| PrepareError {
        step,
        path: path.to_path_buf(),
        source,
    }
}

/// The file-system operations the spool performs.
pub trait Disk: Send + Sync + 'static {
    /// Creates `dir` and any missing parents, and makes each directory it creates
    /// durable (syncs the parent it was created in): a spool's directory must not
    /// vanish at a power loss with the entries in it.
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()>;
    /// Creates `path`, which must not exist, writes all of `data` and syncs the file's
    /// data. On error the file may exist, partially written.
    fn create_synced<'a>(&'a self, path: &'a Path, data: Contents) -> DiskFuture<'a, ()>;
    /// [`Disk::create_synced`] of `tmp`, then [`Disk::rename`] of `tmp` to `path`, as
    /// one call (one hand-off to a blocking thread for a put). On error either name
    /// may exist.
    fn write_and_rename<'a>(
        &'a self,
        tmp: &'a Path,
        path: &'a Path,
        data: Contents,
    ) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            self.create_synced(tmp, data).await?;
            self.rename(tmp, path).await
        })
    }
    /// Removes every file in `paths`, in any order, as one call; one result per
    /// path, in the order of `paths`. Not durable until the directories are synced.
    fn remove_all<'a>(&'a self, paths: &'a [PathBuf]) -> DiskFuture<'a, Vec<io::Result<()>>> {
        Box::pin(async move {
            let mut results = Vec::with_capacity(paths.len());
            for path in paths {
                results.push(self.remove(path).await);
            }
            Ok(results)
        })
    }
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()>;
    /// Makes every earlier change to the entries of `dir` durable (fsync on the
    /// directory).
    fn sync_dir<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()>;
    /// The names of the regular files in `dir` (not subdirectories), in no particular
    /// order. Names that are not UTF-8 are apart ([`Names::not_utf8`]).
    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Names>;
    /// The whole contents of `path`.
    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>>;
    /// The whole contents of every file in `paths`, as one call; one result per
    /// path, in the order of `paths`. An error for the whole call says nothing about
    /// any one file (it is never taken to mean a file is missing).
    fn read_all<'a>(&'a self, paths: &'a [PathBuf]) -> DiskFuture<'a, Vec<io::Result<Vec<u8>>>> {
        Box::pin(async move {
            let mut results = Vec::with_capacity(paths.len());
            for path in paths {
                results.push(self.read(path).await);
            }
            Ok(results)
        })
    }
    /// Removes the file `path`. Not durable until the directory is synced.
    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()>;
    /// Takes an exclusive lock named by `path` without waiting. Fails with
    /// [`io::ErrorKind::WouldBlock`] when another holder has it; the error message then
    /// says who, when it can tell.
    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock>;

    /// A spool directory made ready to open, as one call (for a real disk, one
    /// hand-off to a blocking thread instead of one per step): creates each of
    /// `plan.create` as [`Disk::create_dir_all`] does, syncs `plan.dir`, takes the
    /// lock `plan.lock` as [`Disk::lock`] does, then lists each of `plan.list`, in
    /// that order. Stops at the first step that fails and names it.
    fn prepare<'a>(&'a self, plan: &'a DirPlan) -> PrepareFuture<'a> {
        Box::pin(async move {
            for dir in &plan.create {
                (self.create_dir_all(dir).await)
                    .map_err(failed(PrepareStep::CreateDirectory, dir))?;
            }
            (self.sync_dir(&plan.dir).await)
                .map_err(failed(PrepareStep::SyncDirectory, &plan.dir))?;
            let lock =
                (self.lock(&plan.lock).await).map_err(failed(PrepareStep::Lock, &plan.lock))?;
            let mut listings = Vec::with_capacity(plan.list.len());
            for dir in &plan.list {
                listings.push(
                    self.list(dir)
                        .await
                        .map_err(failed(PrepareStep::List, dir))?,
                );
            }
            Ok(Prepared { lock, listings })
        })
    }

    /// Appends `data` to the file `path`, creating it when it is missing. Makes nothing
    /// durable ([`Disk::sync_file`] does). On error some of `data` may have been
    /// written.
    ///
    /// The four calls for files written as their bytes arrive (`append`, `write_at`,
    /// `sync_file`, `read_range`) have defaults that refuse, so that a `Disk` written
    /// before they existed still compiles; every disk in this workspace implements
    /// them, and the spool needs them only for streamed puts.
    fn append<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
        let _ = data;
        Box::pin(std::future::ready(Err(unsupported("append", path))))
    }
    /// Overwrites `data.len()` bytes of the file `path` at `offset`, all of which lie
    /// within its current length (an entry's header, written once its payload is
    /// in). Makes nothing durable.
    fn write_at<'a>(&'a self, path: &'a Path, offset: u64, data: Bytes) -> DiskFuture<'a, ()> {
        let _ = (offset, data);
        Box::pin(std::future::ready(Err(unsupported("write_at", path))))
    }
    /// Makes the data and size of the file `path` durable (fdatasync); not its
    /// directory entry. After an error nothing is known of what survives, and a later
    /// `sync_file` proves nothing either (the kernel may have dropped the pages).
    fn sync_file<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(std::future::ready(Err(unsupported("sync_file", path))))
    }
    /// At most `len` bytes of the file `path` from `offset` (fewer where the file
    /// ends; none past its end).
    fn read_range<'a>(&'a self, path: &'a Path, offset: u64, len: u64) -> DiskFuture<'a, Vec<u8>> {
        let _ = (offset, len);
        Box::pin(std::future::ready(Err(unsupported("read_range", path))))
    }
}

/// The error of a streaming call on a disk that does not implement it.
fn unsupported(call: &str, path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("this disk does not implement {call} ({})", path.display()),
    )
}

/// The real file system, through `std::fs` on tokio's blocking thread pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdDisk;

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("disk task failed: {e}")))?
}

impl Disk for StdDisk {
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        let dir = dir.to_path_buf();
        Box::pin(blocking(move || create_dir_all_durably(&dir)))
    }

    fn create_synced<'a>(&'a self, path: &'a Path, data: Contents) -> DiskFuture<'a, ()> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || write_synced(&path, &data)))
    }

    fn write_and_rename<'a>(
        &'a self,
        tmp: &'a Path,
        path: &'a Path,
        data: Contents,
    ) -> DiskFuture<'a, ()> {
        let (tmp, path) = (tmp.to_path_buf(), path.to_path_buf());
        Box::pin(blocking(move || {
            write_synced(&tmp, &data)?;
            std::fs::rename(&tmp, &path)
        }))
    }

    /// A large batch is split over up to [`REMOVE_THREADS`] blocking threads: an
    /// `unlink` mostly waits (for the file system's journal), and several waits
    /// overlap. Measured in docs/benchmarks-log.md (the drain over HTTP).
    fn remove_all<'a>(&'a self, paths: &'a [PathBuf]) -> DiskFuture<'a, Vec<io::Result<()>>> {
        let chunk = paths.len().div_ceil(REMOVE_THREADS).max(REMOVE_CHUNK_MIN);
        let removals = paths.chunks(chunk.max(1)).map(|chunk| {
            let chunk = chunk.to_vec();
            blocking(move || Ok(chunk.iter().map(std::fs::remove_file).collect::<Vec<_>>()))
        });
        Box::pin(async move {
            let mut results = Vec::with_capacity(paths.len());
            for chunk in futures::future::join_all(removals).await {
                results.extend(chunk?);
            }
            debug_assert_eq!(results.len(), paths.len());
            Ok(results)
        })
    }

    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        Box::pin(blocking(move || std::fs::rename(from, to)))
    }

    fn sync_dir<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        let dir = dir.to_path_buf();
        Box::pin(blocking(move || File::open(dir)?.sync_all()))
    }

    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Names> {
        let dir = dir.to_path_buf();
        Box::pin(blocking(move || Names::of_dir(&dir)))
    }

    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || read_noatime(&path)))
    }

    /// One blocking thread reads the whole batch: a hand-off to the blocking pool
    /// costs more than reading a small entry from the page cache, and the drainer
    /// bounds a batch's size. Measured in docs/benchmarks-log.md (the drain over HTTP).
    fn read_all<'a>(&'a self, paths: &'a [PathBuf]) -> DiskFuture<'a, Vec<io::Result<Vec<u8>>>> {
        let paths = paths.to_vec();
        Box::pin(blocking(move || {
            Ok(paths.iter().map(|path| read_noatime(path)).collect())
        }))
    }

    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || std::fs::remove_file(path)))
    }

    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || lock_file(&path).map(DiskLock::new)))
    }

    /// Every step on one blocking thread: open's fixed cost was about one hand-off
    /// per step (docs/benchmarks-log.md, issue 42).
    fn prepare<'a>(&'a self, plan: &'a DirPlan) -> PrepareFuture<'a> {
        let owned = plan.clone();
        Box::pin(async move {
            let prepared = blocking(move || Ok(prepare_now(&owned))).await;
            prepared.map_err(failed(PrepareStep::HandOff, &plan.dir))?
        })
    }

    fn append<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || {
            let mut file = File::options().append(true).create(true).open(path)?;
            file.write_all(&data)
        }))
    }

    fn write_at<'a>(&'a self, path: &'a Path, offset: u64, data: Bytes) -> DiskFuture<'a, ()> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || {
            use std::os::unix::fs::FileExt;
            let file = File::options().write(true).open(path)?;
            let len = file.metadata()?.len();
            let end = offset.checked_add(data.len() as u64);
            if end.is_none_or(|end| end > len) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "write_at past the end of the file",
                ));
            }
            file.write_all_at(&data, offset)
        }))
    }

    fn sync_file<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        let path = path.to_path_buf();
        // fdatasync needs a descriptor open for writing on some systems.
        Box::pin(blocking(move || {
            File::options().write(true).open(path)?.sync_data()
        }))
    }

    fn read_range<'a>(&'a self, path: &'a Path, offset: u64, len: u64) -> DiskFuture<'a, Vec<u8>> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || {
            use std::io::{Read, Seek, SeekFrom};
            let mut file = File::open(path)?;
            file.seek(SeekFrom::Start(offset))?;
            let mut data = Vec::new();
            file.take(len).read_to_end(&mut data)?;
            Ok(data)
        }))
    }
}

/// [`Disk::prepare`] on the real file system, on the calling thread.
fn prepare_now(plan: &DirPlan) -> Result<Prepared, PrepareError> {
    for dir in &plan.create {
        create_dir_all_durably(dir).map_err(failed(PrepareStep::CreateDirectory, dir))?;
    }
    (File::open(&plan.dir).and_then(|d| d.sync_all()))
        .map_err(failed(PrepareStep::SyncDirectory, &plan.dir))?;
    let lock = lock_file(&plan.lock).map_err(failed(PrepareStep::Lock, &plan.lock))?;
    let listings = (plan.list.iter())
        .map(|dir| Names::of_dir(dir).map_err(failed(PrepareStep::List, dir)))
        .collect::<Result<_, _>>()?;
    Ok(Prepared {
        lock: DiskLock::new(lock),
        listings,
    })
}

/// Creates `dir` and any missing parents, each made durable in its parent (the
/// parent synced after the create): what [`Disk::create_dir_all`] promises, for
/// callers outside the seam too (`connect`'s `file://` stores).
pub(crate) fn create_dir_all_durably(dir: &Path) -> io::Result<()> {
    for created in missing_ancestors(dir) {
        match std::fs::create_dir(created) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        let parent = created
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// The directories `dir` needs created, outermost first: it and its ancestors that
/// do not exist. A relative path's last ancestor is "", which is not one.
fn missing_ancestors(dir: &Path) -> Vec<&Path> {
    let mut missing: Vec<&Path> = (dir.ancestors())
        .filter(|d| !d.as_os_str().is_empty())
        .take_while(|d| !d.exists())
        .collect();
    missing.reverse();
    missing
}

/// Most blocking threads one [`Disk::remove_all`] uses at once.
const REMOVE_THREADS: usize = 4;
/// Fewest removals worth a blocking thread of their own.
const REMOVE_CHUNK_MIN: usize = 8;

/// Reads all of `path` without updating its access time where the platform allows:
/// a fresh entry's first read would otherwise dirty its inode, a journal write that
/// can wait behind another process's fsync. Files the process does not own (where
/// Linux refuses `O_NOATIME`) are read the ordinary way.
fn read_noatime(path: &Path) -> io::Result<Vec<u8>> {
    #[cfg(target_os = "linux")]
    {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        match File::options()
            .read(true)
            .custom_flags(libc::O_NOATIME)
            .open(path)
        {
            Ok(mut file) => {
                let mut data = Vec::with_capacity(file.metadata().map_or(0, |m| m.len() as usize));
                file.read_to_end(&mut data)?;
                return Ok(data);
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
            Err(e) => return Err(e),
        }
    }
    std::fs::read(path)
}

fn write_synced(path: &Path, data: &Contents) -> io::Result<()> {
    let mut file = File::options().write(true).create_new(true).open(path)?;
    write_all_vectored(&mut file, data.pieces())?;
    file.sync_data()
}

/// Writes every byte of `pieces`, in order, with as few `writev` calls as the file
/// takes (`Write::write_all_vectored` is not stable yet).
fn write_all_vectored(file: &mut impl Write, pieces: [&[u8]; 2]) -> io::Result<()> {
    let mut slices = pieces.map(io::IoSlice::new);
    let mut slices = &mut slices[..];
    io::IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Takes an advisory exclusive lock (`flock`) on `path`, creating it, and records this
/// process's id in it so that a refused opener can say who holds it.
///
/// The lock is held through a descriptor open for reading only (`flock` does not
/// care): the kernel refuses `mount -o remount,ro` of a file system while a file on
/// it is open for writing, so a held `LOCK` open for writing kept an operator from
/// remounting the spool's disk read-only while the service ran (`torture faults
/// --only readonly`, docs/faults.md). The file is created, and the id written,
/// through descriptors closed at once.
fn lock_file(path: &PathBuf) -> io::Result<File> {
    drop(
        File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?,
    );
    let file = File::open(path)?;
    match file.try_lock() {
        Ok(()) => {
            let mut id = File::options().write(true).truncate(true).open(path)?;
            writeln!(id, "{}", std::process::id())?;
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(path).unwrap_or_default();
            let holder = holder.trim();
            let who = if holder.is_empty() {
                "another process".to_string()
            } else {
                format!("process {holder}")
            };
            Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by {who}", path.display()),
            ))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A running relay kept `mount -o remount,ro` of its spool's file system from
    /// succeeding ("mount point is busy"): `LOCK` stayed open for writing.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_lock_is_held_through_a_descriptor_not_open_for_writing() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("LOCK");
        let lock = StdDisk.lock(&path).await.unwrap();
        let held: Vec<String> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|fd| {
                let fd = fd.ok()?;
                (std::fs::read_link(fd.path()).ok()? == path)
                    .then(|| fd.file_name().to_string_lossy().into_owned())
            })
            .collect();
        assert_eq!(held.len(), 1, "LOCK is open once while held: {held:?}");
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", held[0])).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        assert_eq!(
            flags & 0o3,
            0,
            "LOCK is held open for writing (flags {flags:o})"
        );
        let id = std::fs::read_to_string(&path).unwrap();
        assert_eq!(id.trim(), std::process::id().to_string());
        let refused = StdDisk.lock(&path).await.unwrap_err();
        assert!(
            refused.to_string().contains("is locked by process"),
            "{refused}"
        );
        drop(lock);
    }

    #[tokio::test]
    async fn std_disk_passes_the_conformance_suite() {
        let root = tempfile::tempdir().unwrap();
        crate::testing::conformance::run_all(&StdDisk, root.path()).await;
    }

    /// Takes at most `max` bytes a call, as a write to a nearly full disk may.
    struct Trickle {
        written: Vec<u8>,
        max: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.max);
            self.written.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn short_vectored_writes_are_resumed_until_every_piece_is_written() {
        for (head, body) in [
            (&b"header"[..], &b"payload"[..]),
            (b"", b"payload"),
            (b"header", b""),
        ] {
            for max in 1..=14 {
                let mut file = Trickle {
                    written: Vec::new(),
                    max,
                };
                write_all_vectored(&mut file, [head, body]).unwrap();
                assert_eq!(file.written, [head, body].concat(), "{max} bytes a call");
            }
        }
        let mut full = Trickle {
            written: Vec::new(),
            max: 0,
        };
        let err = write_all_vectored(&mut full, [b"a", b"b"]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
    }

    /// A relative path's last ancestor is "", which `create_dir` refuses: a relative
    /// spool directory that did not exist yet could not be opened.
    #[test]
    fn a_relative_directory_needs_its_own_components_created_not_the_empty_path() {
        let dir = Path::new("no-such-directory-here/spool");
        assert_eq!(
            missing_ancestors(dir),
            [Path::new("no-such-directory-here"), dir]
        );
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b");
        assert_eq!(
            missing_ancestors(&deep),
            [root.path().join("a"), deep.clone()]
        );
    }

    #[tokio::test]
    async fn std_disk_lock_names_the_holder() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("LOCK");
        let _held = StdDisk.lock(&path).await.unwrap();
        let err = StdDisk.lock(&path).await.unwrap_err();
        assert!(
            err.to_string().contains(&std::process::id().to_string()),
            "error does not name the holder: {err}"
        );
    }
}
