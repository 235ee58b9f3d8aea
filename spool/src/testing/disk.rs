//! Disks for tests: [`FaultDisk`] is the real file system with failures injected on
//! command, a gate that holds directory syncs and counters; [`MemDisk`] is an
//! in-memory disk with no crash model, whose operations complete at once, so that
//! tests under paused tokio time stay deterministic.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::disk::{Contents, Disk, DiskFuture, DiskLock, Names, StdDisk};

/// Which disk operation a [`FaultDisk`] rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `create_synced`.
    Create,
    /// `rename`.
    Rename,
    /// `sync_dir`.
    SyncDir,
    /// `remove`.
    Remove,
    /// `append`.
    Append,
    /// `sync_file`.
    SyncFile,
    /// `read` (each read of `read_all` too).
    Read,
    /// `read_range`.
    ReadRange,
}

/// An injected failure: an error kind, or an OS error number (EMFILE, ...).
#[derive(Debug, Clone, Copy)]
enum Injected {
    Kind(std::io::ErrorKind),
    Os(i32),
}

/// The real disk, with injectable failures, a gate that holds directory syncs, and
/// counters.
#[derive(Default)]
pub struct FaultDisk {
    fail: Mutex<Vec<(Op, Injected)>>,
    /// Directory syncs done.
    pub syncs: AtomicU64,
    /// Renames done.
    pub renames: AtomicU64,
    /// Directory listings done (`list`, and each listing of `prepare`).
    pub lists: AtomicU64,
    /// `read_range` calls done.
    pub read_ranges: AtomicU64,
    /// While set, `sync_dir` waits until this many renames have happened.
    gate_until_renames: AtomicU64,
    renamed: tokio::sync::Notify,
}

impl FaultDisk {
    /// Makes the next `op` fail with `kind` (once).
    pub fn fail_next(&self, op: Op, kind: std::io::ErrorKind) {
        self.fail.lock().unwrap().push((op, Injected::Kind(kind)));
    }

    /// Makes the next `op` fail with the OS error `errno` (once), e.g. EMFILE.
    pub fn fail_next_os(&self, op: Op, errno: i32) {
        self.fail.lock().unwrap().push((op, Injected::Os(errno)));
    }

    /// Holds every directory sync until `n` renames have been done.
    pub fn hold_syncs_until_renames(&self, n: u64) {
        self.gate_until_renames.store(n, Ordering::SeqCst);
    }

    fn injected(&self, op: Op) -> std::io::Result<()> {
        let mut fail = self.fail.lock().unwrap();
        if let Some(at) = fail.iter().position(|(o, _)| *o == op) {
            return Err(match fail.remove(at).1 {
                Injected::Kind(kind) => {
                    std::io::Error::new(kind, format!("injected {op:?} failure"))
                }
                Injected::Os(errno) => std::io::Error::from_raw_os_error(errno),
            });
        }
        Ok(())
    }
}

impl Disk for FaultDisk {
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        StdDisk.create_dir_all(dir)
    }
    fn create_synced<'a>(&'a self, path: &'a Path, data: Contents) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            self.injected(Op::Create)?;
            StdDisk.create_synced(path, data).await
        })
    }
    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            self.injected(Op::Rename)?;
            StdDisk.rename(from, to).await?;
            self.renames.fetch_add(1, Ordering::SeqCst);
            self.renamed.notify_waiters();
            Ok(())
        })
    }
    fn sync_dir<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            loop {
                let notified = self.renamed.notified();
                if self.renames.load(Ordering::SeqCst)
                    >= self.gate_until_renames.load(Ordering::SeqCst)
                {
                    break;
                }
                notified.await;
            }
            self.injected(Op::SyncDir)?;
            self.syncs.fetch_add(1, Ordering::SeqCst);
            StdDisk.sync_dir(dir).await
        })
    }
    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Names> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        StdDisk.list(dir)
    }
    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>> {
        Box::pin(async move {
            self.injected(Op::Read)?;
            StdDisk.read(path).await
        })
    }
    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            self.injected(Op::Remove)?;
            StdDisk.remove(path).await
        })
    }
    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock> {
        StdDisk.lock(path)
    }
    fn append<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            self.injected(Op::Append)?;
            StdDisk.append(path, data).await
        })
    }
    fn write_at<'a>(&'a self, path: &'a Path, offset: u64, data: Bytes) -> DiskFuture<'a, ()> {
        StdDisk.write_at(path, offset, data)
    }
    fn sync_file<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(async move {
            self.injected(Op::SyncFile)?;
            StdDisk.sync_file(path).await
        })
    }
    fn read_range<'a>(&'a self, path: &'a Path, offset: u64, len: u64) -> DiskFuture<'a, Vec<u8>> {
        Box::pin(async move {
            self.read_ranges.fetch_add(1, Ordering::SeqCst);
            self.injected(Op::ReadRange)?;
            StdDisk.read_range(path, offset, len).await
        })
    }
}

/// An in-memory disk with no crash model: every operation completes at once, so tests
/// under paused tokio time stay deterministic.
#[derive(Default)]
pub struct MemDisk {
    files: Mutex<std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>>,
    dirs: Mutex<std::collections::BTreeSet<std::path::PathBuf>>,
    locks: Arc<Mutex<std::collections::BTreeSet<std::path::PathBuf>>>,
    /// Files whose every read fails with EIO (a bad sector).
    unreadable: Mutex<std::collections::BTreeSet<std::path::PathBuf>>,
    /// Files read so far, whatever the result.
    pub reads: std::sync::atomic::AtomicU64,
}

impl MemDisk {
    /// Makes every read of `path` fail with EIO from now on.
    pub fn make_unreadable(&self, path: &Path) {
        self.unreadable.lock().unwrap().insert(path.to_path_buf());
    }

    /// Makes reads of `path` succeed again (the bad sector was remapped).
    pub fn make_readable(&self, path: &Path) {
        self.unreadable.lock().unwrap().remove(path);
    }

    /// Overwrites a file's contents in place (to simulate corruption).
    pub fn corrupt(&self, path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
        f(self
            .files
            .lock()
            .unwrap()
            .get_mut(path)
            .expect("no such file"));
    }

    fn not_found(path: &Path) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} not found", path.display()),
        )
    }
}

struct MemLock(
    Arc<Mutex<std::collections::BTreeSet<std::path::PathBuf>>>,
    std::path::PathBuf,
);

impl Drop for MemLock {
    fn drop(&mut self) {
        self.0.lock().unwrap().remove(&self.1);
    }
}

impl Disk for MemDisk {
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        let mut dirs = self.dirs.lock().unwrap();
        for d in dir.ancestors() {
            dirs.insert(d.to_path_buf());
        }
        Box::pin(std::future::ready(Ok(())))
    }
    fn create_synced<'a>(&'a self, path: &'a Path, data: Contents) -> DiskFuture<'a, ()> {
        let mut files = self.files.lock().unwrap();
        let result = if files.contains_key(path) {
            Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
        } else {
            files.insert(path.to_path_buf(), data.to_vec());
            Ok(())
        };
        Box::pin(std::future::ready(result))
    }
    fn rename<'a>(&'a self, from: &'a Path, to: &'a Path) -> DiskFuture<'a, ()> {
        let mut files = self.files.lock().unwrap();
        let result = match files.remove(from) {
            Some(data) => {
                files.insert(to.to_path_buf(), data);
                Ok(())
            }
            None => Err(Self::not_found(from)),
        };
        Box::pin(std::future::ready(result))
    }
    fn sync_dir<'a>(&'a self, _dir: &'a Path) -> DiskFuture<'a, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Names> {
        let result = if self.dirs.lock().unwrap().contains(dir) {
            Ok(self
                .files
                .lock()
                .unwrap()
                .keys()
                .filter(|p| p.parent() == Some(dir))
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect())
        } else {
            Err(Self::not_found(dir))
        };
        Box::pin(std::future::ready(result))
    }
    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.unreadable.lock().unwrap().contains(path) {
            return Box::pin(std::future::ready(Err(std::io::Error::other(
                "Input/output error (bad sector)",
            ))));
        }
        let result = self
            .files
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .ok_or_else(|| Self::not_found(path));
        Box::pin(std::future::ready(result))
    }
    fn remove<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        let result = self
            .files
            .lock()
            .unwrap()
            .remove(path)
            .map(drop)
            .ok_or_else(|| Self::not_found(path));
        Box::pin(std::future::ready(result))
    }
    fn lock<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, DiskLock> {
        let result = if self.locks.lock().unwrap().insert(path.to_path_buf()) {
            Ok(DiskLock::new(MemLock(
                self.locks.clone(),
                path.to_path_buf(),
            )))
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "locked",
            ))
        };
        Box::pin(std::future::ready(result))
    }
    fn append<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
        let mut files = self.files.lock().unwrap();
        files
            .entry(path.to_path_buf())
            .or_default()
            .extend_from_slice(&data);
        Box::pin(std::future::ready(Ok(())))
    }
    fn write_at<'a>(&'a self, path: &'a Path, offset: u64, data: Bytes) -> DiskFuture<'a, ()> {
        let mut files = self.files.lock().unwrap();
        let result = match files.get_mut(path) {
            None => Err(Self::not_found(path)),
            Some(file) => match usize::try_from(offset)
                .ok()
                .and_then(|at| Some(at..at.checked_add(data.len())?))
                .filter(|range| range.end <= file.len())
            {
                Some(range) => {
                    file[range].copy_from_slice(&data);
                    Ok(())
                }
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "write_at past the end of the file",
                )),
            },
        };
        Box::pin(std::future::ready(result))
    }
    fn sync_file<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, ()> {
        let result = match self.files.lock().unwrap().contains_key(path) {
            true => Ok(()),
            false => Err(Self::not_found(path)),
        };
        Box::pin(std::future::ready(result))
    }
    fn read_range<'a>(&'a self, path: &'a Path, offset: u64, len: u64) -> DiskFuture<'a, Vec<u8>> {
        let result = self
            .files
            .lock()
            .unwrap()
            .get(path)
            .map(|file| {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(file.len());
                let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
                file[start..end.min(file.len())].to_vec()
            })
            .ok_or_else(|| Self::not_found(path));
        Box::pin(std::future::ready(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn mem_disk_passes_the_conformance_suite() {
        crate::testing::conformance::run_all(&MemDisk::default(), Path::new("/root")).await;
    }
}
