//! Claims: a drainer worker's exclusive right to one entry, oldest first. A claim is
//! settled by removing the entry (delivered) or setting it aside ([`super::aside`]);
//! dropping it unsettled gives the entry back to the queue. The index forgets an
//! entry only once its removal or move has succeeded.
//!
//! Removals of delivered entries are made durable in batches: one directory sync per
//! `remove_sync_batch` removals, and when the spool empties. A power loss can bring
//! back up to that many delivered entries; the drainer sends them again and the
//! store answers "already exists". A removal that must not come back (an object
//! deleted through the relay) is made durable at once with [`Spool::sync_removals`].
//!
//! A removal that fails (EIO, EROFS, EACCES) leaves the entry indexed, delivered and
//! claimed, and the remover tries it again after a pause: [`REMOVAL_RETRY_FIRST`]
//! (1 s) after the first failure in a row, doubling to [`REMOVAL_RETRY_MAX`] (64 s).
//! The entry is never sent again: a later write of its name may have been delivered
//! since, and an overwrite sent again would land the older bytes over it. (Before
//! 2026-12-06 it went back to the queue and was sent again, answered "already
//! exists" and proven ours.)
//!
//! Which entries a claim takes: the oldest the index says are claimable
//! ([`super::index`]), the first undelivered entry of each name, so that one name's
//! entries reach the store one at a time, in order.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::layout::{self, VerifyError};
use super::{Meta, Spool, State, UNREADABLE_AFTER};

use crate::entry::Header;

/// How long the remover waits before it tries again to remove a delivered entry
/// whose removal failed, after the first failure in a row; it doubles with each
/// further failure of the same entry, up to [`REMOVAL_RETRY_MAX`].
pub const REMOVAL_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest the remover waits between tries to remove a delivered entry whose
/// removals keep failing.
pub const REMOVAL_RETRY_MAX: Duration = Duration::from_secs(64);

/// The pause after the `failures`-th failed removal in a row of one entry.
fn removal_retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (REMOVAL_RETRY_FIRST * 2u32.pow(doublings)).min(REMOVAL_RETRY_MAX)
}

/// Why a claimed entry could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file is gone (a removal whose error hid its success): nothing to upload;
    /// settle the claim with [`Spool::forget_gone`].
    #[error("entry file {0} is gone")]
    Gone(PathBuf),
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
        /// Failed reads of this entry in a row, this one included when it came from
        /// [`Spool::read`] ([`Spool::read_batch`] does not count).
        failures: u8,
    },
}

impl ReadError {
    /// True for a read that failed because the process is out of file descriptors
    /// (EMFILE, ENFILE): not counted against the entry.
    pub fn out_of_descriptors(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if super::is_out_of_descriptors(source))
    }

    /// True when the entry should be set aside rather than tried again: it fails
    /// verification, or `UNREADABLE_AFTER` (5) reads in a row failed.
    pub fn is_final(&self) -> bool {
        match self {
            ReadError::Corrupt(_) | ReadError::Gone(_) => true,
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
    file_bytes: u64,
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

    /// The size of the entry's file (header, name, attributes and payload), in
    /// bytes.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
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
        self.claim_oldest_batch(1, 0, 1).pop()
    }

    /// Claims the oldest claimable entries, in order: at most `max_entries`, at most
    /// `max_bytes` of entry files (but always one, whatever its size), and at most
    /// the claimable entries' share among `claimants` (but always one), so that
    /// `claimants` workers claiming in turn all find work. An entry is claimable
    /// when it is unclaimed and no older entry of its object name is still to be
    /// delivered. Empty when nothing is left to claim or the spool is reopening
    /// itself.
    pub fn claim_oldest_batch(
        &self,
        max_entries: usize,
        max_bytes: u64,
        claimants: usize,
    ) -> Vec<Claim> {
        let mut state = self.state();
        if state.broken.is_some() {
            return Vec::new();
        }
        let claimable = state.index.claimable_len();
        let share = claimable / claimants.max(1) as u64;
        let max_entries = (max_entries as u64).min(share).max(1) as usize;
        let mut taken = Vec::with_capacity(max_entries.min(claimable as usize));
        let mut bytes = 0;
        // Claimed entries are skipped: up to READ_AHEAD_ENTRIES per drainer worker,
        // and those waiting for the remover.
        for (seq, meta) in state.index.claimable() {
            if taken.len() == max_entries
                || (!taken.is_empty() && bytes + meta.file_bytes > max_bytes)
            {
                break;
            }
            bytes += meta.file_bytes;
            taken.push(seq);
        }
        let claims = (taken.into_iter())
            .filter_map(|seq| Some(self.claimed(seq, state.index.claim(seq)?)))
            .collect();
        state.check(&self.inner.config);
        claims
    }

    /// Claims entry `seq` itself, out of order (to take back an entry whose
    /// object is no longer wanted: settle it with [`Spool::remove`]). `None` when
    /// it is not in the spool, someone else holds it (a drainer delivering it), or
    /// the spool is reopening itself.
    pub fn claim_entry(&self, seq: u64) -> Option<Claim> {
        let mut state = self.state();
        if state.broken.is_some() {
            return None;
        }
        let claim = self.claimed(seq, state.index.claim(seq)?);
        state.check(&self.inner.config);
        Some(claim)
    }

    /// Withdraws entry `seq`, which someone holds (a drainer delivering it, or
    /// retrying it during an outage): its object is no longer wanted (a `DELETE`
    /// through the relay), so the holder removes it at its next attempt instead of
    /// writing it, and a worker waiting out a backoff with it is woken. An attempt
    /// already under way may still land: the caller deletes the object in the store
    /// too. `false` when the entry is not in the spool or nobody holds it (take it
    /// with [`Spool::claim_entry`] instead).
    pub fn withdraw(&self, seq: u64) -> bool {
        let mut state = self.state();
        let Some(meta) = state.index.get_mut(seq).filter(|meta| meta.claimed) else {
            return false;
        };
        meta.withdrawn = true;
        drop(state);
        self.inner.withdrawals.notify_waiters();
        true
    }

    /// Whether entry `seq` is in the spool and withdrawn ([`Spool::withdraw`]).
    pub fn is_withdrawn(&self, seq: u64) -> bool {
        self.state()
            .index
            .get(seq)
            .is_some_and(|meta| meta.withdrawn)
    }

    /// Waits until entry `seq` is withdrawn ([`Spool::withdraw`]); never returns
    /// otherwise.
    pub async fn withdrawn(&self, seq: u64) {
        loop {
            let withdrawal = self.inner.withdrawals.notified();
            tokio::pin!(withdrawal);
            withdrawal.as_mut().enable();
            if self.is_withdrawn(seq) {
                return;
            }
            withdrawal.await;
        }
    }

    /// The claim of entry `seq`, which the index has just marked claimed.
    fn claimed(&self, seq: u64, meta: &Meta) -> Claim {
        debug_assert!(meta.claimed);
        Claim {
            spool: self.clone(),
            seq,
            created_unix_ms: meta.created_unix_ms,
            file_bytes: meta.file_bytes,
            file: meta.file_name(seq),
            settled: false,
        }
    }

    /// Waits until an entry can be claimed, then claims the oldest.
    pub async fn claim_next(&self) -> Claim {
        let mut claims = self.claim_next_batch(1, 0, 1).await;
        debug_assert_eq!(claims.len(), 1);
        claims.pop().expect("a batch holds at least one claim")
    }

    /// Waits until an entry can be claimed, then claims a batch as
    /// [`Spool::claim_oldest_batch`] does: never empty.
    pub async fn claim_next_batch(
        &self,
        max_entries: usize,
        max_bytes: u64,
        claimants: usize,
    ) -> Vec<Claim> {
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let claims = self.claim_oldest_batch(max_entries, max_bytes, claimants);
            if !claims.is_empty() {
                return claims;
            }
            notified.await;
        }
    }

    /// Reads and verifies a claimed entry (format, checksums, that the header is the
    /// one its file name says, a valid object name). Counts failed reads in a row.
    pub async fn read(&self, claim: &Claim) -> Result<(Header, Bytes), ReadError> {
        let mut reads = self.read_batch(std::slice::from_ref(claim)).await;
        debug_assert_eq!(reads.len(), 1);
        match reads.pop().expect("one read per claim") {
            // The file could not be opened for want of descriptors: the entry is
            // not at fault, so the read is not counted against it.
            Err(e @ ReadError::Io { .. }) if e.out_of_descriptors() => Err(e),
            Err(ReadError::Io { path, source, .. }) => Err(ReadError::Io {
                path,
                source,
                failures: self.count_read_failure(claim.seq),
            }),
            other => other,
        }
    }

    /// Reads and verifies claimed entries as [`Spool::read`] does, in one disk call;
    /// one result per claim, in order. A failed read is not counted: read that entry
    /// alone with [`Spool::read`] before acting on the error, so that a burst of
    /// device errors over a batch counts against the entry being worked on only,
    /// not against every entry read with it.
    pub async fn read_batch(&self, claims: &[Claim]) -> Vec<Result<(Header, Bytes), ReadError>> {
        let paths: Vec<PathBuf> = claims
            .iter()
            .map(|claim| self.inner.entries.path.join(&claim.file))
            .collect();
        let reads = match self.inner.disk.read_all(&paths).await {
            Ok(reads) => reads,
            // Never `NotFound` for each file: that would forget entries still on disk.
            Err(e) => paths
                .iter()
                .map(|_| Err(io::Error::other(format!("reading a batch failed: {e}"))))
                .collect(),
        };
        debug_assert_eq!(reads.len(), claims.len(), "one read per claim");
        claims
            .iter()
            .zip(paths)
            .zip(reads)
            .map(|((claim, path), read)| self.verify_read(claim, path, read))
            .collect()
    }

    /// Verifies what a read of `claim`'s file gave. A good read resets the entry's
    /// count of failed reads; a failed one reports the count without adding to it.
    fn verify_read(
        &self,
        claim: &Claim,
        path: PathBuf,
        read: io::Result<Vec<u8>>,
    ) -> Result<(Header, Bytes), ReadError> {
        let mut state = self.state();
        let meta = state.index.get_mut(claim.seq);
        match read {
            Ok(data) => {
                if let Some(meta) = meta {
                    meta.read_failures = 0;
                }
                drop(state);
                Ok(layout::verify(&claim.file, Bytes::from(data))?)
            }
            Err(source) if source.kind() == io::ErrorKind::NotFound => Err(ReadError::Gone(path)),
            Err(source) => Err(ReadError::Io {
                path,
                source,
                failures: meta.map_or(UNREADABLE_AFTER, |m| m.read_failures),
            }),
        }
    }

    /// The file of entry `seq` and its size in bytes, while the spool's index holds
    /// it (claimed or not); `None` once it is removed or set aside. From the index
    /// alone, without touching the disk: a reader of one entry (the relay serving an
    /// object still in the spool) must not pay for a listing of the whole backlog.
    pub fn entry_file(&self, seq: u64) -> Option<(PathBuf, u64)> {
        let state = self.state();
        let meta = state.index.get(seq)?;
        let path = self.inner.entries.path.join(meta.file_name(seq));
        Some((path, meta.file_bytes))
    }

    /// The sequence numbers of every entry in the spool's index (claimed or not),
    /// oldest first. From the index alone, as [`Spool::entry_file`].
    pub fn entry_seqs(&self) -> Vec<u64> {
        self.state().index.seqs()
    }

    /// Where a claimed entry's file is.
    pub fn entry_path(&self, claim: &Claim) -> PathBuf {
        self.inner.entries.path.join(&claim.file)
    }

    /// Reads and verifies the header of a claimed entry (its format, its checksum,
    /// that it is the one its file name says, a valid object name), not its
    /// payload: for an entry too large to hold, whose payload streams from its file
    /// (checked against the header's crc32c as it does). Counts failed reads in a
    /// row, as [`Spool::read`] does.
    pub async fn read_header(&self, claim: &Claim) -> Result<Header, ReadError> {
        let path = self.entry_path(claim);
        let longest = crate::entry::head_bytes(
            crate::name::MAX_NAME_BYTES,
            crate::entry::MAX_ATTRIBUTE_BYTES,
        );
        let read = self.inner.disk.read_range(&path, 0, longest as u64).await;
        match read {
            Ok(head) => {
                if let Some(meta) = self.state().index.get_mut(claim.seq) {
                    meta.read_failures = 0;
                }
                Ok(layout::verify_header(&claim.file, &head)?)
            }
            Err(source) if source.kind() == io::ErrorKind::NotFound => Err(ReadError::Gone(path)),
            Err(source) => Err(ReadError::Io {
                path,
                source,
                failures: self.count_read_failure(claim.seq),
            }),
        }
    }

    /// Counts one more failed read of entry `seq` in a row; returns the count.
    pub(crate) fn count_read_failure(&self, seq: u64) -> u8 {
        let mut state = self.state();
        state.index.get_mut(seq).map_or(UNREADABLE_AFTER, |m| {
            m.read_failures = m.read_failures.saturating_add(1);
            m.read_failures
        })
    }

    /// Deletes a claimed entry whose object is safely in the store, and returns once
    /// it is removed. If the removal fails the entry stays indexed and the claim is
    /// released. See [`Spool::remove_in_background`] for the drainer's way.
    pub async fn remove(&self, claim: Claim) -> io::Result<()> {
        let seq = claim.seq;
        self.remove_in_background(claim);
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.state();
                let queued = state.removals.iter().any(|(s, _)| *s == seq);
                if !queued && !state.removing.contains(&seq) {
                    return match state.index.get(seq) {
                        None => Ok(()),
                        Some(_) => Err(io::Error::other(format!(
                            "removing entry {seq} failed; it stays in the spool"
                        ))),
                    };
                }
            }
            changed.await;
        }
    }

    /// Hands a claimed entry whose object is safely in the store to the remover,
    /// which deletes queued entries in one call per batch and syncs `entries/` every
    /// `remove_sync_batch` removals: the drainer's worker goes on at once, and so
    /// may the next entry of its object name. The entry stays indexed (delivered,
    /// claimed) until its removal succeeded; a failed removal is tried again after
    /// a pause, and the entry is never sent again.
    pub fn remove_in_background(&self, mut claim: Claim) {
        claim.settled = true;
        let mut state = self.state();
        debug_assert!(
            state.index.get(claim.seq).is_some_and(|m| m.claimed),
            "removal of an unclaimed entry {}",
            claim.seq
        );
        let next_of_name = state.index.delivered(claim.seq);
        state
            .removals
            .push((claim.seq, std::mem::take(&mut claim.file)));
        state.check(&self.inner.config);
        drop(state);
        if next_of_name {
            // The next entry of the name can be claimed: wake a waiting worker.
            self.inner.changed.notify_waiters();
        }
        self.inner.removals_wake.notify_one();
    }

    /// Makes every removal done so far durable: syncs `entries/` now, instead of
    /// at the remover's next batch (`remove_sync_batch`). For a removal that must
    /// survive a power loss: an object deleted through the relay must not come
    /// back after one and land. A failed sync stops the spool as any failed
    /// directory sync does, and is returned.
    pub async fn sync_removals(&self) -> io::Result<()> {
        let upto = self.state().index.removals_made();
        self.sync_dir(&self.inner.entries).await?;
        self.state().index.removals_synced(upto);
        Ok(())
    }

    /// Waits until every removal handed to the remover is done.
    pub async fn flush_removals(&self) {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.state();
                if state.removals.is_empty() && state.removing.is_empty() {
                    return;
                }
            }
            changed.await;
        }
    }

    /// Waits until the spool holds no entry: each one delivered (and its removal
    /// done), dead-lettered or quarantined. Returns at once when it is empty; waits
    /// forever while the store keeps failing (put a timeout around it).
    pub async fn wait_until_empty(&self) {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.is_empty() {
                self.flush_removals().await;
                if self.is_empty() {
                    return;
                }
                continue;
            }
            changed.await;
        }
    }

    /// Removes one batch from the queue: one disk call, then the index, then a
    /// directory sync when one is due. Returns the entries whose removal failed: they
    /// stay indexed and claimed, for the remover to give back after a pause.
    async fn remove_batch(&self, batch: &[(u64, String)]) -> Vec<u64> {
        let inner = &*self.inner;
        let paths: Vec<PathBuf> = batch
            .iter()
            .map(|(_, f)| inner.entries.path.join(f))
            .collect();
        let results = match inner.disk.remove_all(&paths).await {
            Ok(results) => results,
            Err(e) => batch
                .iter()
                .map(|_| Err(io::Error::new(e.kind(), e.to_string())))
                .collect(),
        };
        let mut failed = Vec::new();
        let sync_now = {
            let mut state = self.state();
            let mut removed = 0;
            for ((seq, file), result) in batch.iter().zip(results) {
                match result {
                    // NotFound: a removal whose error hid its success.
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => removed += 1,
                    Err(e) => {
                        inner.metrics.remove_errors.inc();
                        tracing::error!(error = %e, %file, "cannot remove a drained entry; its removal will be tried again after a pause");
                        failed.push(*seq);
                        continue;
                    }
                }
                state.index.remove(*seq);
            }
            state.unsynced_removes += removed;
            let due = state.unsynced_removes >= inner.config.remove_sync_batch
                || (state.index.is_empty() && state.unsynced_removes > 0);
            if due {
                state.unsynced_removes = 0;
            }
            state.check(&inner.config);
            due.then(|| state.index.removals_made())
        };
        if let Some(upto) = sync_now
            && self.sync_dir(&inner.entries).await.is_ok()
        {
            self.state().index.removals_synced(upto);
        }
        // Last, and with no await after it: whoever waits for these removals may
        // drop the spool at once, and the remover must not be holding it then.
        self.state()
            .removing
            .retain(|seq| !batch.iter().any(|(s, _)| s == seq));
        inner.changed.notify_waiters();
        failed
    }

    /// Settles a claim whose file is gone ([`ReadError::Gone`]): the index forgets
    /// it. The file was removed by a removal whose error hid its success, or lost:
    /// either way nothing is left to upload.
    pub fn forget_gone(&self, mut claim: Claim) {
        let mut state = self.state();
        tracing::warn!(seq = claim.seq, file = %claim.file, "spool entry file is gone; forgetting it");
        self.forget(&mut state, &mut claim);
        drop(state);
        self.inner.changed.notify_waiters();
    }

    /// Drops a settled claim's entry from the index.
    pub(super) fn forget(&self, state: &mut State, claim: &mut Claim) {
        if let Some(meta) = state.index.remove(claim.seq) {
            debug_assert!(meta.claimed, "settled an unclaimed entry {}", claim.seq);
        }
        claim.settled = true;
        state.check(&self.inner.config);
    }

    fn release(&self, seq: u64) {
        let mut state = self.state();
        self.unclaim(&mut state, seq);
        state.check(&self.inner.config);
        drop(state);
        self.inner.changed.notify_waiters();
    }

    fn unclaim(&self, state: &mut State, seq: u64) {
        state.index.unclaim(seq);
    }

    /// Queues the removal of delivered entry `seq` again, after a failed one.
    fn retry_removal(&self, seq: u64) {
        let mut state = self.state();
        let Some(meta) = state.index.get(seq) else {
            return;
        };
        debug_assert!(meta.delivered, "removal retried of undelivered entry {seq}");
        let file = meta.file_name(seq);
        state.removals.push((seq, file));
    }
}

/// The remover task: deletes what [`Spool::remove_in_background`] queued, a batch
/// per disk call, until the spool is dropped. Entries whose removal failed are held
/// back (delivered, claimed) and their removal tried again after
/// [`removal_retry_delay`].
pub(super) async fn run_remover(
    inner: std::sync::Weak<super::Inner>,
    wake: std::sync::Arc<tokio::sync::Notify>,
) {
    let mut held_back = HeldBack::default();
    loop {
        let woken = wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let spool = Spool { inner };
        for seq in held_back.due(Instant::now()) {
            spool.retry_removal(seq);
        }
        let batch = {
            let mut state = spool.state();
            let batch = std::mem::take(&mut state.removals);
            state.removing.extend(batch.iter().map(|(seq, _)| *seq));
            batch
        };
        if batch.is_empty() {
            drop(spool);
            match held_back.next_due() {
                Some(at) => tokio::select! {
                    () = &mut woken => {}
                    () = tokio::time::sleep_until(at) => {}
                },
                None => woken.await,
            }
        } else {
            let failed = spool.remove_batch(&batch).await;
            held_back.settled(&batch, &failed, Instant::now());
        }
    }
}

/// Entries whose removal failed, each with its failures in a row and when its
/// removal is tried again. Bounded by the entries the drainer has delivered and could not
/// remove; an entry is forgotten once its removal succeeds.
#[derive(Default)]
struct HeldBack {
    /// Failed removals in a row, by sequence number.
    failures: BTreeMap<u64, u32>,
    /// (when its removal is tried again, sequence number).
    until: Vec<(Instant, u64)>,
}

impl HeldBack {
    /// Records what removing `batch` did: `failed` are held back, the rest forgotten.
    fn settled(&mut self, batch: &[(u64, String)], failed: &[u64], now: Instant) {
        for (seq, _) in batch {
            if !failed.contains(seq) {
                self.failures.remove(seq);
            }
        }
        for &seq in failed {
            let failures = self.failures.entry(seq).or_insert(0);
            *failures = failures.saturating_add(1);
            self.until.push((now + removal_retry_delay(*failures), seq));
        }
    }

    /// The entries whose pause is over at `now`; they are no longer held.
    fn due(&mut self, now: Instant) -> Vec<u64> {
        let (due, waiting) = std::mem::take(&mut self.until)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.until = waiting;
        due.into_iter().map(|(_, seq)| seq).collect()
    }

    /// When the next held entry's removal is tried again, if any is held.
    fn next_due(&self) -> Option<Instant> {
        self.until.iter().map(|(at, _)| *at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_from_the_first_to_the_longest() {
        let secs = |n| removal_retry_delay(n).as_secs();
        assert_eq!([1, 2, 3, 7, 8, 100].map(secs), [1, 2, 4, 64, 64, 64]);
        assert_eq!(removal_retry_delay(0), REMOVAL_RETRY_FIRST);
    }
}
