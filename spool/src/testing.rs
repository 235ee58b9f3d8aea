//! Test doubles for the seams: a disk that fails or pauses on command, and an object
//! store that can be broken and healed. Unit tests only.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::disk::{Disk, DiskFuture, DiskLock, StdDisk};

/// Which disk operation a [`FaultDisk`] rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Rename,
    SyncDir,
    Remove,
}

/// The real disk, with injectable failures, a gate that holds directory syncs, and
/// counters.
#[derive(Default)]
pub struct FaultDisk {
    fail: Mutex<Vec<(Op, std::io::ErrorKind)>>,
    pub syncs: AtomicU64,
    pub renames: AtomicU64,
    /// While set, `sync_dir` waits until this many renames have happened.
    gate_until_renames: AtomicU64,
    renamed: tokio::sync::Notify,
}

impl FaultDisk {
    /// Makes the next `op` fail with `kind` (once).
    pub fn fail_next(&self, op: Op, kind: std::io::ErrorKind) {
        self.fail.lock().unwrap().push((op, kind));
    }

    /// Holds every directory sync until `n` renames have been done.
    pub fn hold_syncs_until_renames(&self, n: u64) {
        self.gate_until_renames.store(n, Ordering::SeqCst);
    }

    fn injected(&self, op: Op) -> std::io::Result<()> {
        let mut fail = self.fail.lock().unwrap();
        if let Some(at) = fail.iter().position(|(o, _)| *o == op) {
            let (_, kind) = fail.remove(at);
            return Err(std::io::Error::new(
                kind,
                format!("injected {op:?} failure"),
            ));
        }
        Ok(())
    }
}

impl Disk for FaultDisk {
    fn create_dir_all<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, ()> {
        StdDisk.create_dir_all(dir)
    }
    fn create_synced<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
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
    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Vec<String>> {
        StdDisk.list(dir)
    }
    fn read<'a>(&'a self, path: &'a Path) -> DiskFuture<'a, Vec<u8>> {
        StdDisk.read(path)
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
}

/// How a [`FlakyStore`] answers writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Like the in-memory store.
    Healthy,
    /// Every write fails with a connection error (retryable).
    Down,
    /// Every write is refused with 403 (not retryable).
    Forbidden,
    /// Writes land, then the client sees a connection error (commit-then-fail).
    CommitThenFail,
    /// Writes never answer.
    Hang,
}

/// An in-memory object store that can be broken and healed, counting write attempts.
#[derive(Debug)]
pub struct FlakyStore {
    pub inner: InMemory,
    mode: Mutex<Mode>,
    /// Names whose writes are refused with 403 whatever the mode (poison objects).
    poison_prefix: Mutex<Option<String>>,
    pub put_attempts: AtomicU64,
}

impl FlakyStore {
    pub fn new(mode: Mode) -> Arc<Self> {
        Arc::new(Self {
            inner: InMemory::new(),
            mode: Mutex::new(mode),
            poison_prefix: Mutex::new(None),
            put_attempts: AtomicU64::new(0),
        })
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    pub fn poison(&self, prefix: &str) {
        *self.poison_prefix.lock().unwrap() = Some(prefix.into());
    }

    /// Names and bytes of every stored object, in name order.
    pub async fn contents(&self) -> Vec<(String, Bytes)> {
        use futures::TryStreamExt;
        use object_store::ObjectStoreExt;
        let metas: Vec<ObjectMeta> = self.inner.list(None).try_collect().await.unwrap();
        let mut out = Vec::new();
        for meta in metas {
            let bytes = self
                .inner
                .get(&meta.location)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            out.push((meta.location.to_string(), bytes));
        }
        out.sort();
        out
    }
}

fn connection_refused() -> object_store::Error {
    object_store::Error::Generic {
        store: "flaky",
        source: Box::new(HttpError::new(
            HttpErrorKind::Connect,
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        )),
    }
}

impl std::fmt::Display for FlakyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FlakyStore")
    }
}

#[async_trait]
impl ObjectStore for FlakyStore {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.put_attempts.fetch_add(1, Ordering::SeqCst);
        let poisoned = self
            .poison_prefix
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|p| location.as_ref().starts_with(p));
        let forbidden = || object_store::Error::PermissionDenied {
            path: location.to_string(),
            source: "forbidden".into(),
        };
        if poisoned {
            return Err(forbidden());
        }
        let mode = *self.mode.lock().unwrap();
        match mode {
            Mode::Healthy => self.inner.put_opts(location, payload, opts).await,
            Mode::Down => Err(connection_refused()),
            Mode::Forbidden => Err(forbidden()),
            Mode::CommitThenFail => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(connection_refused())
            }
            Mode::Hang => std::future::pending().await,
        }
    }
    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// An in-memory disk with no crash model: every operation completes at once, so tests
/// under paused tokio time stay deterministic.
#[derive(Default)]
pub struct MemDisk {
    files: Mutex<std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>>,
    dirs: Mutex<std::collections::BTreeSet<std::path::PathBuf>>,
    locks: Arc<Mutex<std::collections::BTreeSet<std::path::PathBuf>>>,
}

impl MemDisk {
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
    fn create_synced<'a>(&'a self, path: &'a Path, data: Bytes) -> DiskFuture<'a, ()> {
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
    fn list<'a>(&'a self, dir: &'a Path) -> DiskFuture<'a, Vec<String>> {
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
}

/// A spool on a [`MemDisk`] with a manual clock, and the disk for inspection.
pub async fn mem_spool(config: crate::SpoolConfig) -> (crate::Spool, Arc<MemDisk>) {
    let disk = Arc::new(MemDisk::default());
    let (spool, _) = crate::Spool::open_with(
        Path::new("/spool"),
        config,
        disk.clone(),
        Arc::new(crate::clock::ManualClock::new(1_791_453_600_000)),
        crate::Metrics::default(),
    )
    .await
    .unwrap();
    (spool, disk)
}

#[tokio::test]
async fn mem_disk_passes_the_conformance_suite() {
    crate::disk::conformance::run_all(&MemDisk::default(), Path::new("/root")).await;
}
