//! Claims: a drainer worker's exclusive right to one entry, oldest first. A claim is
//! settled by removing the entry (delivered) or setting it aside ([`super::aside`]);
//! dropping it unsettled gives the entry back to the queue.
//!
//! Removals of delivered entries are made durable in batches: one directory sync per
//! `remove_sync_batch` removals, and when the spool empties. A power loss can bring
//! back up to that many delivered entries; the drainer sends them again and the
//! store answers "already exists".

use std::io;
use std::path::PathBuf;

use bytes::Bytes;

use super::layout::{self, VerifyError, entry_file_name};
use super::{Spool, State};
use crate::entry::Header;

/// Why a claimed entry could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file is not the intact entry its name says: quarantine it.
    #[error("entry failed verification: {0}")]
    Corrupt(#[from] VerifyError),
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

impl Spool {
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
        state.check(&self.inner.config);
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

    /// Reads and verifies a claimed entry (the checks open makes: format, checksums,
    /// sequence number, object name).
    pub async fn read(&self, claim: &Claim) -> Result<(Header, Bytes), ReadError> {
        let file = entry_file_name(claim.seq);
        let path = self.inner.entries_dir.join(&file);
        let data = self
            .inner
            .disk
            .read(&path)
            .await
            .map_err(|source| ReadError::Io { path, source })?;
        Ok(layout::verify(&file, Bytes::from(data))?)
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

    /// Drops a settled claim's entry from the index.
    pub(super) fn forget(&self, state: &mut State, claim: &mut Claim) {
        if let Some(meta) = state.index.remove(&claim.seq) {
            debug_assert!(meta.claimed, "settled an unclaimed entry {}", claim.seq);
            state.bytes -= meta.file_bytes;
            state.claimed -= 1;
        }
        claim.settled = true;
        state.check(&self.inner.config);
    }

    fn release(&self, seq: u64) {
        let mut state = self.state();
        if let Some(meta) = state.index.get_mut(&seq) {
            meta.claimed = false;
            state.claimed -= 1;
        }
        state.check(&self.inner.config);
        drop(state);
        self.inner.changed.notify_waiters();
    }
}
