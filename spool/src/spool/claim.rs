//! Claims: a drainer worker's exclusive right to one entry, oldest first. A claim is
//! settled by removing the entry (delivered) or setting it aside ([`super::aside`]);
//! dropping it unsettled gives the entry back to the queue. The index forgets an
//! entry only once its removal or move has succeeded.
//!
//! Removals of delivered entries are made durable in batches: one directory sync per
//! `remove_sync_batch` removals, and when the spool empties. A power loss can bring
//! back up to that many delivered entries; the drainer sends them again and the
//! store answers "already exists".

use std::io;
use std::path::PathBuf;

use bytes::Bytes;

use super::layout::{self, VerifyError};
use super::{Spool, State, UNREADABLE_AFTER};
use crate::entry::Header;

/// Why a claimed entry could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file is not the intact entry its name says: quarantine it.
    #[error("entry failed verification: {0}")]
    Corrupt(#[from] VerifyError),
    /// The file could not be read this time.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The entry file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
        /// Failed reads of this entry in a row, this one included.
        failures: u8,
    },
}

impl ReadError {
    /// True when the entry should be set aside rather than tried again: it fails
    /// verification, or [`UNREADABLE_AFTER`] reads in a row failed.
    pub fn is_final(&self) -> bool {
        match self {
            ReadError::Corrupt(_) => true,
            ReadError::Io { failures, .. } => *failures >= UNREADABLE_AFTER,
        }
    }
}

/// Exclusive right to work on one stored entry. Dropping it unsettled gives the entry
/// back to the queue.
pub struct Claim {
    spool: Spool,
    seq: u64,
    created_unix_ms: u64,
    file: String,
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

    /// The entry's file name in `entries/`.
    pub fn file_name(&self) -> &str {
        &self.file
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
    /// Claims the oldest entry no one else has claimed, if any, unless the spool is
    /// reopening itself. The claim is released when dropped unless it is settled by
    /// [`Spool::remove`], [`Spool::dead_letter`] or [`Spool::quarantine`].
    pub fn claim_oldest(&self) -> Option<Claim> {
        let mut state = self.state();
        if state.broken.is_some() {
            return None;
        }
        // At most one claim per drainer worker exists, so this skips a handful.
        let (&seq, meta) = state.index.iter_mut().find(|(_, m)| !m.claimed)?;
        meta.claimed = true;
        let (created_unix_ms, file) = (meta.created_unix_ms, meta.file_name(seq));
        state.claimed += 1;
        state.check(&self.inner.config);
        Some(Claim {
            spool: self.clone(),
            seq,
            created_unix_ms,
            file,
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

    /// Reads and verifies a claimed entry (format, checksums, that the header is the
    /// one its file name says, a valid object name). Counts failed reads in a row.
    pub async fn read(&self, claim: &Claim) -> Result<(Header, Bytes), ReadError> {
        let path = self.inner.entries.path.join(&claim.file);
        let read = self.inner.disk.read(&path).await;
        let mut state = self.state();
        let meta = state.index.get_mut(&claim.seq);
        match read {
            Ok(data) => {
                if let Some(meta) = meta {
                    meta.read_failures = 0;
                }
                drop(state);
                Ok(layout::verify(&claim.file, Bytes::from(data))?)
            }
            Err(source) => {
                let failures = meta.map_or(UNREADABLE_AFTER, |m| {
                    m.read_failures = m.read_failures.saturating_add(1);
                    m.read_failures
                });
                Err(ReadError::Io {
                    path,
                    source,
                    failures,
                })
            }
        }
    }

    /// Deletes a claimed entry whose object is safely in the store. If the removal
    /// fails the entry stays indexed and the claim is released.
    pub async fn remove(&self, mut claim: Claim) -> io::Result<()> {
        let inner = &*self.inner;
        let path = inner.entries.path.join(&claim.file);
        match inner.disk.remove(&path).await {
            Ok(()) => {}
            // Already gone (a removal whose error hid its success): forget it.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
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
        if sync_now {
            self.sync_dir(&inner.entries).await?;
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
        if let Some(meta) = state.index.get_mut(&seq)
            && meta.claimed
        {
            meta.claimed = false;
            state.claimed -= 1;
        }
        state.check(&self.inner.config);
        drop(state);
        self.inner.changed.notify_waiters();
    }
}
