//! The one path to the sessions' directory ([`SessionDisk`]), through the spool's
//! [`Disk`]. It promises what the spool's own directory syncs promise:
//!
//! - The first failed sync (of a chunk file, of the directory, or of a file created
//!   synced) latches: every later durable step fails ([`SessionError::Stopped`])
//!   until [`SessionDisk::recover`] has listed the directory and synced it again.
//!   After a failed fsync the kernel may have dropped what it could not write, and a
//!   later fsync can succeed without it (PostgreSQL's "fsyncgate", 2018); a request
//!   that synced after another's failure must not count bytes on that success.
//! - A durable step that began before a failure fails too, even if its own call
//!   succeeded (each step remembers the latch's epoch).
//! - Removals are best effort and say so ([`SessionDisk::remove_best_effort`]):
//!   whatever a failed removal leaves is dropped at the next load, and every failure
//!   is logged with its path.
//!
//! A full disk (ENOSPC, EDQUOT) while creating or appending fails the request and
//! does not latch: nothing was acknowledged on it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use spool::Disk;
use spool::disk::Names;

use super::SessionError;

/// The sessions' directory on the spool's disk; see the module doc.
pub(crate) struct SessionDisk {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    latch: Mutex<Latch>,
}

#[derive(Debug, Default)]
struct Latch {
    /// Why durable steps are refused, since the last failure.
    reason: Option<String>,
    /// Failures so far: a step that began in an earlier epoch does not count.
    epoch: u64,
}

impl SessionDisk {
    pub(crate) fn new(disk: Arc<dyn Disk>, dir: PathBuf) -> Self {
        Self {
            disk,
            dir,
            latch: Mutex::new(Latch::default()),
        }
    }

    fn latch(&self) -> MutexGuard<'_, Latch> {
        self.latch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The path of file `name`.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Why durable steps are refused now, if they are, and the failure's epoch.
    pub(crate) fn stopped(&self) -> Option<(String, u64)> {
        let latch = self.latch();
        Some((latch.reason.clone()?, latch.epoch))
    }

    /// The epoch a durable step starts in, or why it may not start.
    fn begin(&self) -> Result<u64, SessionError> {
        let latch = self.latch();
        match &latch.reason {
            Some(reason) => Err(SessionError::Stopped {
                reason: reason.clone(),
            }),
            None => Ok(latch.epoch),
        }
    }

    /// A durable step's result: its own failure latches; a failure of another step
    /// since `epoch` fails it too.
    fn end<T>(
        &self,
        epoch: u64,
        path: &Path,
        result: std::io::Result<T>,
        latches: bool,
    ) -> Result<T, SessionError> {
        let mut latch = self.latch();
        match result {
            Err(source) => {
                if latches && latch.reason.is_none() {
                    latch.reason = Some(format!("{}: {source}", path.display()));
                    latch.epoch += 1;
                    tracing::error!(
                        target: "spool_relay",
                        path = %path.display(),
                        error = %source,
                        "resumable sessions: a sync failed; session writes stop until the \
                         directory is listed and synced again"
                    );
                }
                Err(SessionError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
            Ok(_) if latch.epoch != epoch || latch.reason.is_some() => Err(SessionError::Stopped {
                reason: latch
                    .reason
                    .clone()
                    .unwrap_or_else(|| "a sync failed".into()),
            }),
            Ok(value) => Ok(value),
        }
    }

    /// Creates `name` with `data`, synced, and syncs the directory.
    pub(crate) async fn create_synced(
        &self,
        name: &str,
        data: Vec<u8>,
    ) -> Result<(), SessionError> {
        let path = self.path(name);
        let epoch = self.begin()?;
        let created = self.disk.create_synced(&path, data.into()).await;
        let full = created.as_ref().is_err_and(is_full);
        self.end(epoch, &path, created, !full)?;
        self.sync_dir(epoch).await
    }

    /// Makes the partial chunk file `partial` durable as `chunk`: synced, renamed,
    /// and the directory synced. On failure, also the name the bytes are under now
    /// (the partial file's, or the chunk's once renamed), for the caller to count
    /// and remove.
    pub(crate) async fn commit(
        &self,
        partial: &str,
        chunk: &str,
    ) -> Result<(), (SessionError, String)> {
        let (from, to) = (self.path(partial), self.path(chunk));
        let at_partial = |e| (e, partial.to_string());
        let epoch = self.begin().map_err(at_partial)?;
        let synced = self.disk.sync_file(&from).await;
        self.end(epoch, &from, synced, true).map_err(at_partial)?;
        let renamed = self.disk.rename(&from, &to).await;
        self.end(epoch, &to, renamed, false).map_err(at_partial)?;
        self.sync_dir(epoch)
            .await
            .map_err(|e| (e, chunk.to_string()))
    }

    /// Syncs the directory after removals, unless durable steps are stopped (a
    /// removal that is lost only brings back a file the next load drops, or a
    /// session that expires).
    pub(crate) async fn sync_after_removals(&self) {
        if let Ok(epoch) = self.begin() {
            let _best_effort = self.sync_dir(epoch).await;
        }
    }

    async fn sync_dir(&self, epoch: u64) -> Result<(), SessionError> {
        let synced = self.disk.sync_dir(&self.dir).await;
        self.end(epoch, &self.dir, synced, true)
    }

    /// Appends `piece` to `name` (not durable until [`SessionDisk::commit`]).
    pub(crate) async fn append(&self, name: &str, piece: Bytes) -> Result<(), SessionError> {
        let path = self.path(name);
        self.disk
            .append(&path, piece)
            .await
            .map_err(|source| SessionError::Io { path, source })
    }

    /// `len` bytes of `name` from `offset` (fewer at its end).
    pub(crate) async fn read_range(
        &self,
        name: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, SessionError> {
        let path = self.path(name);
        let read = self.disk.read_range(&path, offset, len).await;
        read.map_err(|source| SessionError::Io { path, source })
    }

    /// The whole of `name`.
    pub(crate) async fn read(&self, name: &str) -> Result<Vec<u8>, SessionError> {
        let path = self.path(name);
        let read = self.disk.read(&path).await;
        read.map_err(|source| SessionError::Io { path, source })
    }

    /// Creates the directory and lists it.
    pub(crate) async fn list(&self) -> Result<Names, SessionError> {
        let io = |source| SessionError::Io {
            path: self.dir.clone(),
            source,
        };
        self.disk.create_dir_all(&self.dir).await.map_err(io)?;
        self.disk.list(&self.dir).await.map_err(io)
    }

    /// Removes `names`, best effort: a file a failed removal leaves is not counted
    /// by anything and is dropped at the next load (so no failure here loses an
    /// acknowledged byte); each failure is logged with its path and `why` the files
    /// were being removed. Returns whether every removal succeeded (a file already
    /// gone counts as removed).
    pub(crate) async fn remove_best_effort(&self, names: &[String], why: &str) -> bool {
        if names.is_empty() {
            return true;
        }
        let paths: Vec<PathBuf> = names.iter().map(|n| self.path(n)).collect();
        let results = match self.disk.remove_all(&paths).await {
            Ok(results) => results,
            Err(e) => {
                let kind = e.kind();
                tracing::warn!(
                    target: "spool_relay",
                    dir = %self.dir.display(),
                    files = names.len(),
                    error = %e,
                    "resumable sessions: could not remove files ({why}); the next load drops them"
                );
                (0..names.len())
                    .map(|_| Err(std::io::Error::from(kind)))
                    .collect()
            }
        };
        let mut all = true;
        for (path, result) in paths.iter().zip(results) {
            if let Err(e) = result
                && e.kind() != std::io::ErrorKind::NotFound
            {
                all = false;
                tracing::warn!(
                    target: "spool_relay",
                    path = %path.display(),
                    error = %e,
                    "resumable sessions: could not remove a file ({why}); the next load drops it"
                );
            }
        }
        all
    }

    /// After a failure: lists the directory and syncs it, and on success takes
    /// durable steps again. Returns the names found, for the table to keep only
    /// the chunks still there.
    pub(crate) async fn recover(&self) -> Result<Names, SessionError> {
        let names = self.list().await?;
        let synced = self.disk.sync_dir(&self.dir).await;
        if let Err(source) = synced {
            return Err(SessionError::Io {
                path: self.dir.clone(),
                source,
            });
        }
        let mut latch = self.latch();
        if let Some(reason) = latch.reason.take() {
            tracing::info!(
                target: "spool_relay",
                after = %reason,
                "resumable sessions: the directory synced again; session writes resume"
            );
        }
        Ok(names)
    }
}

fn is_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}
