//! The disk seam: the eight file-system operations the spool needs, and nothing else.
//!
//! Production uses [`StdDisk`] (`std::fs` on tokio's blocking pool, so an fsync never
//! stalls an async worker). A simulation supplies a disk that forgets what was not
//! synced when it "loses power". The durability contract every implementation must
//! keep, and the spool relies on:
//!
//! - after [`Disk::create_synced`] returns, the file's *contents* survive power loss,
//!   but its directory entry does not until the directory is synced;
//! - after [`Disk::sync_dir`] returns, every create, rename and remove done in that
//!   directory before the call survives power loss;
//! - an error from either means nothing about what survived.
//!
//! [`conformance`] holds a test suite that any implementation can run.

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

/// The file-system operations the spool performs.
pub trait Disk: Send + Sync + 'static {
    /// Creates `dir` and any missing parents. Not durable until the parent is synced.
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()>;
    /// Creates `path`, which must not exist, writes all of `data` and syncs the file's
    /// data. On error the file may exist, partially written.
    fn create_synced<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()>;
    /// Makes every earlier change to the entries of `dir` durable (fsync on the
    /// directory).
    fn sync_dir<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()>;
    /// The names of the regular files in `dir` (not subdirectories), in no particular
    /// order. Names that are not UTF-8 are left out.
    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Vec<String>>;
    /// The whole contents of `path`.
    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>>;
    /// Removes the file `path`. Not durable until the directory is synced.
    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()>;
    /// Takes an exclusive lock named by `path` without waiting. Fails with
    /// [`io::ErrorKind::WouldBlock`] when another holder has it; the error message then
    /// says who, when it can tell.
    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock>;
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
        Box::pin(blocking(move || std::fs::create_dir_all(dir)))
    }

    fn create_synced<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || {
            let mut file = File::options().write(true).create_new(true).open(&path)?;
            file.write_all(&data)?;
            file.sync_data()
        }))
    }

    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        Box::pin(blocking(move || std::fs::rename(from, to)))
    }

    fn sync_dir<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        let dir = dir.to_path_buf();
        Box::pin(blocking(move || File::open(dir)?.sync_all()))
    }

    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Vec<String>> {
        let dir = dir.to_path_buf();
        Box::pin(blocking(move || {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(dir)? {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    continue;
                }
                if let Ok(name) = entry.file_name().into_string() {
                    names.push(name);
                }
            }
            Ok(names)
        }))
    }

    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || std::fs::read(path)))
    }

    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || std::fs::remove_file(path)))
    }

    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock> {
        let path = path.to_path_buf();
        Box::pin(blocking(move || lock_file(&path).map(DiskLock::new)))
    }
}

/// Takes an advisory exclusive lock (`flock`) on `path`, creating it, and records this
/// process's id in it so that a refused opener can say who holds it.
fn lock_file(path: &PathBuf) -> io::Result<File> {
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            writeln!(file, "{}", std::process::id())?;
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

/// A suite of checks that every [`Disk`] implementation must pass, run against
/// [`StdDisk`] here and against the simulated disk in `sim`. Each function panics
/// with a message naming the broken rule.
pub mod conformance {
    use super::*;

    /// Runs every check in a fresh, empty directory `root` that `disk` can write to.
    pub async fn run_all(disk: &dyn Disk, root: &Path) {
        create_list_read_remove(disk, &root.join("basic")).await;
        create_refuses_an_existing_file(disk, &root.join("exclusive")).await;
        rename_replaces_the_target(disk, &root.join("rename")).await;
        errors_name_missing_files(disk, &root.join("missing")).await;
        second_lock_is_refused_until_the_first_is_dropped(disk, &root.join("lock")).await;
    }

    async fn fresh(disk: &dyn Disk, dir: &Path) {
        disk.create_dir_all(dir).await.expect("create_dir_all");
        disk.sync_dir(dir)
            .await
            .expect("sync_dir on a new directory");
    }

    /// Files written can be listed and read back; removed files disappear; directories
    /// are not listed.
    pub async fn create_list_read_remove(disk: &dyn Disk, dir: &Path) {
        fresh(disk, dir).await;
        disk.create_dir_all(&dir.join("sub")).await.unwrap();
        disk.create_synced(&dir.join("a"), Bytes::from_static(b"alpha"))
            .await
            .unwrap();
        disk.create_synced(&dir.join("b"), Bytes::new())
            .await
            .unwrap();
        disk.sync_dir(dir).await.unwrap();
        let mut names = disk.list(dir).await.unwrap();
        names.sort();
        assert_eq!(names, ["a", "b"], "list must show files and only files");
        assert_eq!(disk.read(&dir.join("a")).await.unwrap(), b"alpha");
        assert_eq!(disk.read(&dir.join("b")).await.unwrap(), b"");
        disk.remove(&dir.join("a")).await.unwrap();
        disk.sync_dir(dir).await.unwrap();
        assert_eq!(
            disk.list(dir).await.unwrap(),
            ["b"],
            "removed file still listed"
        );
    }

    /// `create_synced` never overwrites: the spool relies on it to never clobber an
    /// entry.
    pub async fn create_refuses_an_existing_file(disk: &dyn Disk, dir: &Path) {
        fresh(disk, dir).await;
        let path = dir.join("x");
        disk.create_synced(&path, Bytes::from_static(b"first"))
            .await
            .unwrap();
        let err = disk
            .create_synced(&path, Bytes::from_static(b"second"))
            .await
            .expect_err("create_synced overwrote an existing file");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
        assert_eq!(disk.read(&path).await.unwrap(), b"first");
    }

    /// Rename moves contents and replaces an existing target.
    pub async fn rename_replaces_the_target(disk: &dyn Disk, dir: &Path) {
        fresh(disk, dir).await;
        disk.create_synced(&dir.join("from"), Bytes::from_static(b"new"))
            .await
            .unwrap();
        disk.create_synced(&dir.join("to"), Bytes::from_static(b"old"))
            .await
            .unwrap();
        disk.rename(&dir.join("from"), &dir.join("to"))
            .await
            .unwrap();
        disk.sync_dir(dir).await.unwrap();
        assert_eq!(disk.list(dir).await.unwrap(), ["to"]);
        assert_eq!(disk.read(&dir.join("to")).await.unwrap(), b"new");
    }

    /// Operations on missing files fail with `NotFound`.
    pub async fn errors_name_missing_files(disk: &dyn Disk, dir: &Path) {
        fresh(disk, dir).await;
        let missing = dir.join("missing");
        for (op, err) in [
            ("read", disk.read(&missing).await.map(drop).unwrap_err()),
            ("remove", disk.remove(&missing).await.unwrap_err()),
            (
                "rename",
                disk.rename(&missing, &dir.join("y")).await.unwrap_err(),
            ),
            ("list", disk.list(&missing).await.map(drop).unwrap_err()),
        ] {
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{op}: {err}");
        }
    }

    /// A second lock on the same path is refused while the first is held.
    pub async fn second_lock_is_refused_until_the_first_is_dropped(disk: &dyn Disk, dir: &Path) {
        fresh(disk, dir).await;
        let path = dir.join("LOCK");
        let first = disk.lock(&path).await.expect("first lock");
        let err = disk.lock(&path).await.expect_err("second lock was granted");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
        drop(first);
        disk.lock(&path).await.expect("lock after release");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn std_disk_passes_the_conformance_suite() {
        let root = tempfile::tempdir().unwrap();
        conformance::run_all(&StdDisk, root.path()).await;
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
