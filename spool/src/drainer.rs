//! The drainer: workers that deliver spooled entries once the store recovers.
//!
//! Each worker claims the oldest unclaimed entries (workers never share one), reads and
//! verifies them in full (a corrupt entry is never uploaded), and writes each, with its
//! attributes, create-if-absent until the store settles it:
//!
//! | store answer | action |
//! |---|---|
//! | success | remove the entry |
//! | already exists, proven ours (MD5, or the bytes read back) | an earlier try landed: remove the entry |
//! | already exists, proven different | dead-letter as a conflict (someone else used the name) |
//! | already exists, cannot be checked | dead-letter as "conflict: cannot verify", never removed |
//! | retryable failure (408, 429, 5xx, timeout, reset) | sleep a jittered backoff (cut short when the store takes a write elsewhere), try again |
//! | permanent failure (400, 403, ...) | dead-letter with the error, go on |
//! | entry fails verification, or cannot be read 5 times in a row | quarantine with the reason, go on |
//!
//! An entry withdrawn while a worker holds it ([`Spool::withdraw`]: its object is no
//! longer wanted, a `DELETE` through the relay) is removed before the worker's next
//! attempt instead of written, and a worker waiting out a backoff with it is woken.
//!
//! An entry that cannot leave `entries/` once settled is tried again after a pause,
//! never at once: a failed removal after delivery is held back by the remover (1 s,
//! doubling to 64 s: `spool/src/spool/claim.rs`), a failed move to `dead-letter/` or
//! `quarantine/` pauses the worker with its backoff. Each counts in
//! `spool_remove_errors_total`, which the `SpoolDrainLooping` alert watches.
//!
//! A worker reads ahead where writes are fast: it claims as many entries as its last
//! successful write's duration fits in [`READ_AHEAD_WAIT`], at most
//! [`READ_AHEAD_ENTRIES`] or [`READ_AHEAD_BYTES`] (always one, one after a failed
//! write, and no more than its share of the unclaimed entries, so every worker finds
//! work) and reads them in one disk call, because a hand-off to a blocking thread
//! costs more than reading a small entry. Against a store that takes tens of
//! milliseconds per write it reads one entry at a time: there the hand-off is
//! negligible, and an entry read ahead would only wait. A worker gives back the
//! entries it read ahead when it must wait (a retry's backoff, a read that failed) and
//! when a write has taken longer than [`READ_AHEAD_WAIT`], so a slow or failing
//! object holds up no other entry for longer than that while another worker could
//! take it.
//!
//! A write may take `put_timeout` plus its size over `min_bytes_per_second`, so a
//! large entry on a slow link is not retried forever. Backoff is per worker:
//! `uniform(0, min(cap, base * 2^failures))` with full jitter, drawn from a seeded
//! RNG, reset by any success. A write the store takes elsewhere (a direct upload,
//! another worker's entry) wakes one worker out of its retry's backoff, and each
//! success wakes the next, so a healed store is drained at once while a failing
//! one keeps its backoff (`spool/src/spool/store_took.rs`). Shutdown stops workers between entries: an upload in
//! flight finishes (or times out), a backoff sleep is cut short.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::time::Duration;

use bytes::Bytes;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::backoff::{Backoff, BackoffConfig};
use crate::entry::Header;
use crate::error::StoreError;
use crate::metrics::{DrainOutcome, WritePath};
use crate::remote::{Existing, PayloadFile, Remote, StreamError, staging_key};
use crate::spool::{Claim, ReadError, Spool};

/// Most entries a worker claims and reads in one disk call.
pub const READ_AHEAD_ENTRIES: usize = 16;
/// Most bytes of entry files a worker claims and reads in one disk call, unless the
/// oldest entry alone is larger: a worker holds at most this much (or one entry)
/// in memory.
pub const READ_AHEAD_BYTES: u64 = 1 << 20;
/// About the longest an entry read ahead waits for the writes before it on its
/// worker: a worker reads ahead as many entries as its last write's duration fits in
/// this, and gives back what it read ahead once a write has taken this long.
pub const READ_AHEAD_WAIT: Duration = Duration::from_millis(10);

/// How many entries to read ahead after a successful write that took `last_write`
/// (`None`: no write yet, or the last one failed).
fn read_ahead_entries(last_write: Option<Duration>) -> usize {
    let Some(last_write) = last_write else {
        return 1;
    };
    let fits = READ_AHEAD_WAIT
        .as_nanos()
        .checked_div(last_write.as_nanos())
        .unwrap_or(u128::MAX);
    usize::try_from(fits)
        .unwrap_or(usize::MAX)
        .clamp(1, READ_AHEAD_ENTRIES)
}

/// Settings for a [`Drainer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainerConfig {
    /// Concurrent workers, each on its own entry. Default 4. Drain throughput is
    /// about `workers / store write latency`; one worker keeps strict order.
    pub workers: usize,
    /// The least time one drain write may take before it counts as failed, whatever
    /// its size. Default 30 s.
    pub put_timeout: Duration,
    /// The slowest upload rate a drain write is allowed, in bytes per second: a
    /// write's timeout is `put_timeout + size / min_bytes_per_second`. Default 1 MiB/s
    /// (a 100 MiB entry gets 130 s). Must be at least 1.
    pub min_bytes_per_second: u64,
    /// Delay between retries of a failing entry. Default: 1 s base, 64 s cap, full
    /// jitter (the Node.js Cloud Storage client's delays, without its retry limit).
    pub backoff: BackoffConfig,
    /// Seed for the workers' jitter. `None` (the default) seeds from the operating
    /// system; a simulation sets it so runs repeat exactly.
    pub rng_seed: Option<u64>,
    /// An entry whose file is larger than this is not read whole: its payload
    /// streams from disk to the store in parts of `part_bytes`, written to a staging
    /// name and copied create-if-absent (`remote/streamed.rs`). Default 8 MiB.
    pub stream_min_bytes: u64,
    /// The part a streamed entry is sent in, and all a worker holds of it in
    /// memory. Default 8 MiB (Cloud Storage's XML multipart uploads need parts of at
    /// least 5 MiB, but for the last). At least 1.
    pub part_bytes: u64,
}

impl Default for DrainerConfig {
    fn default() -> Self {
        Self {
            workers: 4,
            put_timeout: Duration::from_secs(30),
            min_bytes_per_second: 1 << 20,
            backoff: BackoffConfig::default(),
            rng_seed: None,
            stream_min_bytes: 8 << 20,
            part_bytes: 8 << 20,
        }
    }
}

/// A [`DrainerConfig`] field out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("drainer config: {field} must be {expected}")]
pub struct DrainerConfigError {
    /// The field.
    pub field: &'static str,
    /// What it must be.
    pub expected: &'static str,
}

impl DrainerConfig {
    /// Refuses a configuration the workers cannot run, naming the field.
    pub fn validate(&self) -> Result<(), DrainerConfigError> {
        let invalid = |field, expected| Err(DrainerConfigError { field, expected });
        match self {
            DrainerConfig { workers: 0, .. } => invalid("workers", "at least 1"),
            DrainerConfig {
                min_bytes_per_second: 0,
                ..
            } => invalid("min_bytes_per_second", "at least 1"),
            DrainerConfig { part_bytes: 0, .. } => invalid("part_bytes", "at least 1"),
            _ => Ok(()),
        }
    }

    /// How long a drain write of `bytes` may take.
    pub fn write_timeout(&self, bytes: u64) -> Duration {
        let transfer = bytes as f64 / self.min_bytes_per_second.max(1) as f64;
        self.put_timeout + Duration::from_secs_f64(transfer)
    }
}

/// Running drainer workers. Dropping it without [`Drainer::shutdown`] aborts them
/// mid-entry, which is safe (a claimed entry stays on disk) but not graceful.
#[derive(Debug)]
pub struct Drainer {
    spool: Spool,
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
}

impl Drainer {
    /// Starts `config.workers` workers draining `spool` into `remote`.
    ///
    /// # Panics
    ///
    /// When `config` is refused by [`DrainerConfig::validate`] (a zero that would
    /// leave the spool undrained): validate it first where it comes from a user.
    pub fn start(spool: Spool, remote: Remote, config: DrainerConfig) -> Drainer {
        if let Err(e) = config.validate() {
            panic!("{e}");
        }
        let (stop, stopped) = watch::channel(false);
        let seed_rng = match config.rng_seed {
            Some(seed) => ChaCha8Rng::seed_from_u64(seed),
            None => ChaCha8Rng::from_os_rng(),
        };
        let workers = (0..config.workers)
            .map(|i| {
                let mut rng = seed_rng.clone();
                rng.set_stream(i as u64);
                let worker = Worker {
                    spool: spool.clone(),
                    remote: remote.clone(),
                    config,
                    rng,
                    stopped: stopped.clone(),
                    ahead: VecDeque::new(),
                    last_write: None,
                };
                tokio::spawn(worker.run())
            })
            .collect();
        Drainer {
            spool,
            stop,
            workers,
        }
    }

    /// Stops the workers between entries, waits for them, and for the removals of
    /// the entries they delivered. A worker that panicked panics here, with its
    /// panic's payload, once the others have stopped: a bug is not swallowed.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        let mut panicked = None;
        for worker in std::mem::take(&mut self.workers) {
            if let Err(e) = worker.await
                && e.is_panic()
            {
                panicked.get_or_insert(e.into_panic());
            }
        }
        self.spool.flush_removals().await;
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        for worker in &self.workers {
            worker.abort();
        }
    }
}

/// What to do with a claimed entry after one attempt.
enum Step {
    Done(DrainOutcome),
    Retry(StoreError),
    DeadLetter(String),
    /// Its payload could not be read from disk while it streamed: counts as a
    /// failed read of the entry.
    ReadFailed(String),
    /// Its payload read back is not what was written.
    Quarantine(String),
}

/// An entry's payload as a worker holds it.
enum Payload {
    /// Read whole, with its header: an entry up to `stream_min_bytes`.
    Whole(Bytes),
    /// Left on disk, streamed part by part: only its header was read.
    OnDisk,
}

/// A claimed entry and what reading it gave.
type ReadAhead = (Claim, Result<(Header, Payload), ReadError>);

struct Worker {
    spool: Spool,
    remote: Remote,
    config: DrainerConfig,
    rng: ChaCha8Rng,
    stopped: watch::Receiver<bool>,
    /// Entries claimed and read, oldest first, not yet worked on.
    ahead: VecDeque<ReadAhead>,
    /// How long the last write took, when it settled its entry; `None` before the
    /// first and after a failed one. Sizes the next read-ahead.
    last_write: Option<Duration>,
}

impl Worker {
    async fn run(mut self) {
        let mut backoff = Backoff::new(self.config.backoff);
        loop {
            let Some((claim, read)) = self.ahead.pop_front() else {
                let claims = tokio::select! {
                    biased;
                    _ = self.stopped.wait_for(|s| *s) => return,
                    claims = self.spool.claim_next_batch(
                        read_ahead_entries(self.last_write),
                        READ_AHEAD_BYTES,
                        self.config.workers,
                    ) => claims,
                };
                self.read_ahead(claims).await;
                continue;
            };
            // Between entries: what was read ahead goes back to the queue.
            if *self.stopped.borrow() {
                return;
            }
            if self.drain(claim, read, &mut backoff).await.is_break() {
                return;
            }
        }
    }

    /// Reads claimed entries in one disk call into `ahead`; an entry over
    /// `stream_min_bytes` (claimed alone, being over `READ_AHEAD_BYTES`) only its
    /// header.
    async fn read_ahead(&mut self, claims: Vec<Claim>) {
        debug_assert!(self.ahead.is_empty());
        if let [claim] = &claims[..]
            && claim.file_bytes() > self.config.stream_min_bytes
        {
            let header = self.spool.read_header(claim).await;
            let loaded = header.map(|h| (h, Payload::OnDisk));
            self.ahead.extend(claims.into_iter().zip([loaded]));
            return;
        }
        let reads = self.spool.read_batch(&claims).await;
        let loaded = reads
            .into_iter()
            .map(|r| r.map(|(h, p)| (h, Payload::Whole(p))));
        self.ahead.extend(claims.into_iter().zip(loaded));
    }

    /// What was read ahead for `claim`, or, when that read failed, a read of the
    /// entry alone, which is the one that counts: some devices return transient
    /// errors, and a burst of them over a batch must count once, against the entry
    /// being worked on, not five times against every entry read with it.
    async fn read_again_if_failed(
        &self,
        claim: &Claim,
        read: Result<(Header, Payload), ReadError>,
    ) -> Result<(Header, Payload), ReadError> {
        match read {
            Err(ReadError::Corrupt(_) | ReadError::Io { .. })
                if claim.file_bytes() > self.config.stream_min_bytes =>
            {
                let header = self.spool.read_header(claim).await;
                header.map(|h| (h, Payload::OnDisk))
            }
            Err(ReadError::Corrupt(_) | ReadError::Io { .. }) => {
                let read = self.spool.read(claim).await;
                read.map(|(h, p)| (h, Payload::Whole(p)))
            }
            other => other,
        }
    }

    /// Works on one entry until it is settled or given back; `Break` when asked to
    /// stop.
    async fn drain(
        &mut self,
        claim: Claim,
        read: Result<(Header, Payload), ReadError>,
        backoff: &mut Backoff,
    ) -> ControlFlow<()> {
        let (header, payload) = match self.read_again_if_failed(&claim, read).await {
            Ok(entry) => entry,
            Err(ReadError::Gone(_)) => {
                self.spool.forget_gone(claim);
                return ControlFlow::Continue(());
            }
            Err(e) if e.is_final() => {
                if let Err(io) = self.spool.quarantine(claim, &e.to_string()).await {
                    // It stays, and comes back after a pause: no tight loop on a
                    // disk that refuses the move.
                    tracing::error!(error = %io, "cannot quarantine an entry");
                    self.spool.metrics().remove_errors.inc();
                    let delay = backoff.next_delay(&mut self.rng);
                    return self.pause(delay).await;
                }
                return ControlFlow::Continue(());
            }
            Err(e) => {
                // Given back: another read, by this worker or another, after a pause.
                tracing::warn!(error = %e, "cannot read spool entry; will retry");
                drop(claim);
                let delay = backoff.next_delay(&mut self.rng);
                return self.pause(delay).await;
            }
        };
        loop {
            if self.spool.is_withdrawn(claim.seq()) {
                // Its object is no longer wanted (a DELETE through the relay).
                tracing::info!(seq = header.seq, name = %header.name, "removing a withdrawn entry instead of delivering it");
                self.spool.remove_in_background(claim);
                return ControlFlow::Continue(());
            }
            let (step, took) = self
                .attempt_giving_back_when_slow(&claim, &header, &payload)
                .await;
            self.last_write = match step {
                Step::Retry(_) | Step::ReadFailed(_) => None,
                Step::Done(_) | Step::DeadLetter(_) | Step::Quarantine(_) => Some(took),
            };
            let settled = match step {
                Step::Done(how) => {
                    backoff.reset();
                    // The store heals: the next worker in its backoff tries now.
                    self.spool.store_took_a_write();
                    self.spool.metrics().drained(how);
                    // Off the worker's path: the remover deletes in batches.
                    self.spool.remove_in_background(claim);
                    Ok(())
                }
                Step::DeadLetter(error) => self.spool.dead_letter(claim, &error).await,
                Step::Quarantine(reason) => self.spool.quarantine(claim, &reason).await,
                Step::ReadFailed(error) => {
                    let failures = self.spool.count_read_failure(claim.seq());
                    if failures >= crate::spool::UNREADABLE_AFTER {
                        let reason = format!("unreadable {failures} times in a row: {error}");
                        self.spool.quarantine(claim, &reason).await
                    } else {
                        tracing::warn!(%error, "cannot read a spooled entry's payload; will retry");
                        drop(claim);
                        let delay = backoff.next_delay(&mut self.rng);
                        return self.pause(delay).await;
                    }
                }
                Step::Retry(e) => {
                    self.spool.metrics().drain_retries.inc();
                    self.spool.store_failed_a_write(&e);
                    let delay = backoff.next_delay(&mut self.rng);
                    tracing::debug!(error = %e, ?delay, name = %header.name, "drain write failed; will retry");
                    let spool = self.spool.clone();
                    let seq = claim.seq();
                    let woken = async {
                        tokio::select! {
                            () = spool.withdrawn(seq) => {}
                            () = spool.store_took_a_write_elsewhere() => {}
                        }
                    };
                    self.pause_until(delay, woken).await?;
                    continue;
                }
            };
            return match settled {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    // The entry stays in the spool and comes back to a worker later.
                    tracing::error!(error = %e, seq = header.seq, "cannot settle a drained entry");
                    self.spool.metrics().remove_errors.inc();
                    let delay = backoff.next_delay(&mut self.rng);
                    self.pause(delay).await
                }
            };
        }
    }

    /// Gives back the entries read ahead, then sleeps for `delay` unless asked to
    /// stop first (`Break`).
    async fn pause(&mut self, delay: Duration) -> ControlFlow<()> {
        self.pause_until(delay, std::future::pending()).await
    }

    /// As [`Self::pause`], cut short when `wake` finishes first (the entry the
    /// worker retries was withdrawn).
    async fn pause_until(
        &mut self,
        delay: Duration,
        wake: impl std::future::Future<Output = ()>,
    ) -> ControlFlow<()> {
        // Other workers deliver them meanwhile; dropped claims return to the queue.
        self.ahead.clear();
        tokio::select! {
            biased;
            _ = self.stopped.wait_for(|s| *s) => ControlFlow::Break(()),
            () = wake => ControlFlow::Continue(()),
            _ = tokio::time::sleep(delay) => ControlFlow::Continue(()),
        }
    }

    /// One attempt at an entry, and how long it took. Once it has taken
    /// [`READ_AHEAD_WAIT`], the entries read ahead go back to the queue, for workers
    /// that are idle meanwhile.
    async fn attempt_giving_back_when_slow(
        &mut self,
        claim: &Claim,
        header: &Header,
        payload: &Payload,
    ) -> (Step, Duration) {
        let started = Instant::now();
        let writing = async {
            match payload {
                Payload::Whole(payload) => {
                    attempt(&self.spool, &self.remote, &self.config, header, payload).await
                }
                Payload::OnDisk => {
                    attempt_streamed(&self.spool, &self.remote, &self.config, claim, header).await
                }
            }
        };
        tokio::pin!(writing);
        let step = if self.ahead.is_empty() {
            writing.await
        } else {
            tokio::select! {
                biased;
                step = &mut writing => step,
                () = tokio::time::sleep(READ_AHEAD_WAIT) => {
                    self.ahead.clear();
                    writing.await
                }
            }
        };
        (step, started.elapsed())
    }
}

/// Writes an entry in its mode and says what to do next (see the module's table).
async fn attempt(
    spool: &Spool,
    remote: &Remote,
    config: &DrainerConfig,
    header: &Header,
    payload: &Bytes,
) -> Step {
    let metrics = spool.metrics();
    let timeout = config.write_timeout(payload.len() as u64);
    let started = Instant::now();
    let result = match remote.path(&header.name) {
        Ok(path) => {
            let attributes = &header.attributes;
            (remote.put_at(&path, payload.clone(), attributes, header.mode, timeout)).await
        }
        Err(e) => Err(StoreError::InvalidName(e)),
    };
    metrics
        .drain_write_seconds
        .observe(started.elapsed().as_secs_f64());
    let error = match result {
        Ok(()) => return Step::Done(DrainOutcome::Uploaded),
        Err(e) => e,
    };
    if !matches!(error, StoreError::AlreadyExists { .. }) {
        metrics.store_error(WritePath::Drain, error.kind_label());
        return match error.is_retryable() {
            true => Step::Retry(error),
            false => Step::DeadLetter(error.to_string()),
        };
    }
    let existing = remote.check_existing(&header.name, payload, timeout).await;
    settle_existing(metrics, error, existing.map_err(StreamError::Store))
}

/// Streams an entry over `stream_min_bytes` from its file to the store, in its
/// mode (`remote/streamed.rs`), and says what to do next, as [`attempt`].
async fn attempt_streamed(
    spool: &Spool,
    remote: &Remote,
    config: &DrainerConfig,
    claim: &Claim,
    header: &Header,
) -> Step {
    let metrics = spool.metrics();
    let path = spool.entry_path(claim);
    let file = PayloadFile {
        disk: &**spool.disk(),
        path: &path,
        offset: header.file_bytes() - header.payload_len,
        len: header.payload_len,
        crc32c: header.payload_crc32c,
    };
    let timeout = config.write_timeout(header.payload_len);
    let tag = format!(
        "{}-{}-{:08x}",
        header.seq, header.created_unix_ms, header.payload_crc32c
    );
    let key = staging_key(&header.name, &tag);
    let started = Instant::now();
    let part_bytes = config.part_bytes;
    let put = remote.put_streamed(
        &header.name,
        &key,
        file,
        &header.attributes,
        header.mode,
        part_bytes,
    );
    let result = match tokio::time::timeout(timeout, put).await {
        Ok(result) => result,
        Err(_) => Err(StreamError::Store(StoreError::Timeout(timeout))),
    };
    metrics
        .drain_write_seconds
        .observe(started.elapsed().as_secs_f64());
    let error = match result {
        Ok(()) => return Step::Done(DrainOutcome::Uploaded),
        Err(StreamError::Store(e)) => e,
        Err(e @ StreamError::Read { .. }) => return Step::ReadFailed(e.to_string()),
        Err(e @ StreamError::Damaged { .. }) => return Step::Quarantine(e.to_string()),
    };
    if !matches!(error, StoreError::AlreadyExists { .. }) {
        metrics.store_error(WritePath::Drain, error.kind_label());
        return match error.is_retryable() {
            true => Step::Retry(error),
            false => Step::DeadLetter(error.to_string()),
        };
    }
    let existing = remote.check_existing_streamed(&header.name, file, part_bytes, timeout);
    settle_existing(metrics, error, existing.await)
}

/// What a 412 comes to, once the object there was compared with ours.
fn settle_existing(
    metrics: &crate::metrics::Metrics,
    error: StoreError,
    existing: Result<Existing, StreamError>,
) -> Step {
    let conflict = |detail: String| {
        let conflict = StoreError::Conflict { detail };
        metrics.store_error(WritePath::Drain, conflict.kind_label());
        Step::DeadLetter(conflict.to_string())
    };
    match existing {
        // An earlier try landed: delivered, and no store error (the 412 is ours).
        Ok(Existing::Matches) => Step::Done(DrainOutcome::AlreadyPresent),
        // Deleted since the 412: the next create will succeed.
        Ok(Existing::Missing) => {
            metrics.store_error(WritePath::Drain, error.kind_label());
            Step::Retry(error)
        }
        Ok(Existing::Differs(detail)) => conflict(detail),
        Ok(Existing::Unverifiable(detail)) => conflict(format!("cannot verify: {detail}")),
        Err(StreamError::Store(e)) if e.is_retryable() => Step::Retry(e),
        Err(e @ StreamError::Read { .. }) => Step::ReadFailed(e.to_string()),
        Err(e @ StreamError::Damaged { .. }) => Step::Quarantine(e.to_string()),
        Err(e) => conflict(format!("cannot verify: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::Ordering;

    use bytes::Bytes;

    use super::*;
    use crate::SpoolConfig;
    use crate::backoff::Jitter;
    use crate::disk::Disk;
    use crate::metrics::DrainOutcome as D;
    use crate::testing::{FlakyStore, Mode, mem_spool};

    fn config(workers: usize) -> DrainerConfig {
        DrainerConfig {
            workers,
            put_timeout: Duration::from_secs(5),
            min_bytes_per_second: 1 << 20,
            backoff: BackoffConfig {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(4),
                jitter: Jitter::None,
            },
            rng_seed: Some(7),
            ..DrainerConfig::default()
        }
    }

    /// Drains with entries over 1 KiB streamed in parts of 256 bytes.
    fn streaming(workers: usize) -> DrainerConfig {
        DrainerConfig {
            stream_min_bytes: 1024,
            part_bytes: 256,
            ..config(workers)
        }
    }

    fn large(n: u8) -> Bytes {
        (0..5_000u32)
            .map(|i| (i as u8).wrapping_mul(7) ^ n)
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_entry_streams_to_the_store_and_leaves_no_staging_object() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        let mut attributes = object_store::Attributes::new();
        attributes.insert(object_store::Attribute::ContentType, "text/csv".into());
        spool
            .put_with("big/a", large(1), &attributes)
            .await
            .unwrap();
        spool.put("small", Bytes::from_static(b"s")).await.unwrap();
        let store = FlakyStore::new(Mode::Healthy);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), streaming(2));
        until_empty(&spool).await;
        drainer.shutdown().await;
        let contents = store.contents().await;
        let names: Vec<&str> = contents.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["big/a", "small"], "a staging object was left");
        assert!(contents[0].1 == large(1));
        let path = object_store::path::Path::parse("big/a").unwrap();
        let read = object_store::ObjectStoreExt::get(&*store.inner, &path)
            .await
            .unwrap();
        let content_type = read.attributes.get(&object_store::Attribute::ContentType);
        assert_eq!(content_type.unwrap().as_ref(), "text/csv");
        // The small entry's put and the large one's copy from its staging name.
        assert_eq!(store.puts(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_entry_already_there_is_settled_by_its_bytes() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        spool.put("same", large(2)).await.unwrap();
        spool.put("other", large(3)).await.unwrap();
        let store = FlakyStore::new(Mode::Healthy);
        let put = |name: &str, bytes: Bytes| {
            let path = object_store::path::Path::parse(name).unwrap();
            let store = store.inner.clone();
            async move {
                object_store::ObjectStoreExt::put(&*store, &path, bytes.into())
                    .await
                    .unwrap()
            }
        };
        put("same", large(2)).await;
        put("other", large(4)).await;
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), streaming(1));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(spool.metrics().drained_total(D::AlreadyPresent), 1);
        assert_eq!(
            spool.stats().dead_letter_files,
            1,
            "other bytes: a conflict"
        );
        let contents = store.contents().await;
        assert_eq!(
            contents.len(),
            2,
            "a staging object was left: {:?}",
            contents.iter().map(|c| &c.0).collect::<Vec<_>>()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_entry_damaged_on_disk_is_quarantined_and_never_lands() {
        let (spool, disk) = mem_spool(SpoolConfig::default()).await;
        spool.put("damaged", large(5)).await.unwrap();
        let entries = &spool.dir().join(crate::layout::ENTRIES_DIR);
        let listed = disk.list(entries).await.unwrap();
        disk.corrupt(&entries.join(listed.get(0).unwrap()), |data| {
            let last = data.len() - 1;
            data[last] ^= 0xff;
        });
        let store = FlakyStore::new(Mode::Healthy);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), streaming(1));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(spool.stats().quarantined_files, 1);
        assert!(store.contents().await.is_empty(), "damaged bytes landed");
    }

    async fn fill(spool: &Spool, names: &[&str]) {
        for name in names {
            spool
                .put(name, Bytes::from(format!("bytes of {name}")))
                .await
                .unwrap();
        }
    }

    /// Fills `spool` with `count` entries named `o/00`, `o/01`, ...
    async fn fill_numbered(spool: &Spool, count: usize) {
        let names: Vec<String> = (0..count).map(|i| format!("o/{i:02}")).collect();
        fill(spool, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
    }

    async fn until_empty(spool: &Spool) {
        while spool.stats().files > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A store whose every write panics: a bug in a worker's path.
    #[derive(Debug)]
    struct Panics;

    #[async_trait::async_trait]
    impl crate::hooked::PutHook for Panics {
        async fn put(
            &self,
            _inner: &std::sync::Arc<dyn object_store::ObjectStore>,
            _location: &object_store::path::Path,
            _payload: object_store::PutPayload,
            _opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            panic!("a write that panics");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_that_panicked_panics_at_shutdown() {
        // What was seen: shutdown awaited each worker with `let _ =`, so a worker's
        // panic vanished and the drain silently stopped.
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 1).await;
        let inner = std::sync::Arc::new(object_store::memory::InMemory::new());
        let store = crate::hooked::HookedStore::wrap(inner, Panics);
        let drainer = Drainer::start(spool.clone(), Remote::new(store), config(2));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let shutdown = tokio::spawn(drainer.shutdown());
        let panicked = shutdown.await.unwrap_err();
        assert!(panicked.is_panic());
        let payload = panicked.into_panic();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"a write that panics"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_backlog_drains_once_the_store_recovers() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 20).await;
        let store = FlakyStore::new(Mode::Down);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(4));

        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(spool.stats().files, 20, "drained while the store was down");
        assert!(spool.metrics().drain_retries_total() > 4);

        store.set_mode(Mode::Healthy);
        until_empty(&spool).await;
        drainer.shutdown().await;
        let contents = store.contents().await;
        assert_eq!(contents.len(), 20);
        for (name, bytes) in contents {
            assert_eq!(bytes, Bytes::from(format!("bytes of {name}")));
        }
        assert_eq!(spool.metrics().drained_total(D::Uploaded), 20);
    }

    /// Four workers whose every retry waits 600 s.
    fn waiting_long(workers: usize) -> DrainerConfig {
        DrainerConfig {
            backoff: BackoffConfig {
                base: Duration::from_secs(600),
                cap: Duration::from_secs(600),
                jitter: Jitter::None,
            },
            ..config(workers)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_direct_upload_the_healed_store_takes_wakes_the_drain_out_of_its_backoff() {
        // What was seen (issue 57): workers slept out their backoff after the store
        // healed; the first entry left 14.2 s after healing. Here every worker
        // waits 600 s between tries: before the wake, nothing left for 600 s.
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 20).await;
        let store = FlakyStore::new(Mode::Down);
        let remote = Remote::new(store.clone());
        let drainer = Drainer::start(spool.clone(), remote.clone(), waiting_long(4));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            spool.metrics().drain_retries_total(),
            4,
            "each worker tried once"
        );

        store.set_mode(Mode::Healthy);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(spool.stats().files, 20, "a worker woke without a cause");
        let uploader =
            crate::Uploader::new(spool.clone(), remote, crate::UploaderConfig::default());
        let outcome = uploader.upload("fresh", Bytes::from("new")).await.unwrap();
        assert_eq!(outcome, crate::Outcome::Stored);
        tokio::time::sleep(Duration::from_secs(2)).await;
        spool.flush_removals().await;
        assert_eq!(spool.stats().files, 0, "the backlog waited out the backoff");
        assert_eq!(spool.metrics().drained_total(D::Uploaded), 20);
        drainer.shutdown().await;
    }

    /// Log lines written while it lives, as text.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        fn lines_with(&self, text: &str) -> usize {
            let log = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            log.lines().filter(|l| l.contains(text)).count()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_logged_when_it_starts_once_a_minute_while_it_lasts_and_when_it_ends() {
        // Issue 57: a 20-minute outage with 152 drain retries logged nothing at
        // info; a line per failure would drown the log.
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        let _logging = tracing::subscriber::set_default(subscriber);
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 40).await;
        let store = FlakyStore::new(Mode::Down);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(4));
        tokio::time::sleep(Duration::from_secs(150)).await;
        assert!(spool.metrics().drain_retries_total() > 100);
        assert_eq!(captured.lines_with("the store is failing writes"), 1);
        assert_eq!(captured.lines_with("still failing writes"), 2);
        assert_eq!(captured.lines_with("takes writes again"), 0);
        store.set_mode(Mode::Healthy);
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(captured.lines_with("takes writes again"), 1);
        assert_eq!(captured.lines_with("the store is failing writes"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_while_the_store_still_fails_wakes_one_attempt_not_every_worker() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 20).await;
        let store = FlakyStore::new(Mode::Down);
        let drainer = Drainer::start(spool.clone(), Remote::new(store), waiting_long(4));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(spool.metrics().drain_retries_total(), 4);
        // Writes the store took elsewhere while it fails the drain's: each wakes
        // one worker, whose failed try sends it back to its backoff, waking no one.
        for woken in 1..=3 {
            spool.store_took_a_write();
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(spool.metrics().drain_retries_total(), 4 + woken);
        }
        // With no worker waiting, nothing is kept for later.
        drainer.shutdown().await;
        spool.store_took_a_write();
        let drainer = Drainer::start(
            spool.clone(),
            Remote::new(FlakyStore::new(Mode::Down)),
            waiting_long(1),
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(spool.metrics().drain_retries_total(), 7 + 1);
        drainer.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_withdrawn_entry_a_worker_holds_is_removed_and_never_delivered() {
        // During an outage a worker holds the entry it retries: withdrawing it (a
        // DELETE through the relay) wakes the worker from its backoff, which removes
        // the entry; it never reaches the store, even once the store is back.
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 3).await;
        let store = FlakyStore::new(Mode::Down);
        let slow_retries = DrainerConfig {
            backoff: BackoffConfig {
                base: Duration::from_secs(600),
                cap: Duration::from_secs(600),
                jitter: Jitter::None,
            },
            ..config(1)
        };
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), slow_retries);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let held = spool.entry_seqs()[0];
        assert!(
            spool.claim_entry(held).is_none(),
            "the worker holds the oldest entry"
        );
        assert!(
            !spool.withdraw(spool.entry_seqs()[1]),
            "nobody holds the second"
        );
        assert!(spool.withdraw(held));
        assert!(spool.is_withdrawn(held));
        // Well within the worker's 600 s backoff.
        tokio::time::sleep(Duration::from_secs(1)).await;
        spool.flush_removals().await;
        assert!(
            spool.entry_file(held).is_none(),
            "the withdrawn entry is still spooled"
        );
        assert_eq!(spool.stats().files, 2);

        store.set_mode(Mode::Healthy);
        tokio::time::sleep(Duration::from_secs(1200)).await;
        until_empty(&spool).await;
        drainer.shutdown().await;
        let delivered: Vec<String> = (store.contents().await.into_iter())
            .map(|(name, _)| name)
            .collect();
        assert_eq!(delivered, ["o/01", "o/02"]);
        assert_eq!(spool.metrics().drained_total(D::Uploaded), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_the_store_keeps_refusing_holds_up_no_other_entry() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 14).await;
        let store = FlakyStore::new(Mode::Healthy);
        // After one write each, the workers read ahead their shares: the failing
        // entry in the middle of a batch, with later ones behind it.
        store.fail_retryably("o/04");
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(2));

        // Long enough for many backoffs (cap 4 s), and nothing else fails.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let stats = spool.stats();
        assert_eq!(
            stats.files, 1,
            "entries read ahead with the failing one waited behind it"
        );
        assert_eq!(store.contents().await.len(), 13);
        assert!(spool.metrics().drain_retries_total() > 5);
        drainer.shutdown().await;
        assert_eq!(spool.stats().files, 1, "the refused entry stays spooled");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_write_holds_up_what_was_read_ahead_only_briefly() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 12).await;
        let store = FlakyStore::new(Mode::Healthy);
        // A slow success in the middle of a worker's read-ahead; the other worker
        // finishes its own share long before it lands.
        // (3 s: within the 5 s write timeout of `config`.)
        store.slow("o/03", Duration::from_secs(3));
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(2));

        tokio::time::sleep(Duration::from_secs(1)).await;
        let landed: Vec<String> = store.contents().await.into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            landed.len(),
            11,
            "entries waited behind a slow write: {landed:?}"
        );
        assert!(!landed.contains(&"o/03".to_string()));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(store.contents().await.len(), 12);
    }

    #[tokio::test(start_paused = true)]
    async fn workers_whose_writes_are_slow_read_one_entry_at_a_time() {
        let (spool, disk) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 20).await;
        let store = FlakyStore::new(Mode::Healthy);
        // Every write takes 50 ms, longer than an entry read ahead should wait.
        store.slow("o/", Duration::from_millis(50));
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(2));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(store.contents().await.len(), 20);
        // Batches read ahead and given back after the wait would read entries again.
        assert_eq!(disk.reads.load(Ordering::SeqCst), 20, "entries read again");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_gives_back_what_was_read_ahead() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 9).await;
        let store = FlakyStore::new(Mode::Gated);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        // The first write, alone, lands at once; then the worker reads the other 8
        // ahead.
        store.let_through(1);
        store.wait_for_attempts(2).await;
        assert_eq!(spool.stats().claimed, 8, "one worker reads all 8 ahead");
        store.let_through(1);
        let asked = tokio::time::Instant::now();
        drainer.shutdown().await;
        // Had the worker not stopped between entries, its next write would have
        // waited at the gate until its timeout.
        assert_eq!(asked.elapsed(), Duration::ZERO, "shutdown waited");
        assert_eq!(store.put_attempts.load(Ordering::SeqCst), 2);
        let stats = spool.stats();
        assert_eq!((stats.files, stats.claimed), (7, 0), "{stats:?}");
        assert_eq!(store.contents().await.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn one_worker_delivers_in_order_across_retries() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 10).await;
        let store = FlakyStore::new(Mode::Down);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        // Retries, each giving back what was read ahead, then one write at a time.
        tokio::time::sleep(Duration::from_secs(10)).await;
        store.set_mode(Mode::Gated);
        for landed in 1..=10 {
            store.let_through(1);
            store.wait_for_puts(landed).await;
            let names: Vec<String> = store.contents().await.into_iter().map(|(n, _)| n).collect();
            let oldest: Vec<String> = (0..landed).map(|i| format!("o/{i:02}")).collect();
            assert_eq!(names, oldest, "delivered out of order");
        }
        drainer.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_read_errors_counts_against_one_entry_not_the_batch() {
        let (spool, disk) = mem_spool(SpoolConfig::default()).await;
        fill_numbered(&spool, 17).await;
        let entries = Path::new("/spool/entries");
        let mut files = disk.list(entries).await.unwrap().to_vec();
        files.sort();
        // The oldest is read and written alone; the worker then reads the other 16
        // ahead in one batch, every one of them failing.
        let files = files.split_off(1);
        for file in &files {
            disk.make_unreadable(&entries.join(file));
        }
        let store = FlakyStore::new(Mode::Healthy);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        // The oldest entry fails its fifth read and is set aside; then the device
        // recovers.
        // Reads at 0, 1, 3, 7 and 11 s (no jitter, 1 s base, 4 s cap).
        for _ in 0..600 {
            if spool.stats().quarantined_files > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(spool.stats().quarantined_files > 0, "never set aside");
        for file in &files {
            disk.make_readable(&entries.join(file));
        }
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(spool.stats().quarantined_files, 1);
        assert_eq!(store.contents().await.len(), 16);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_back_off_exponentially_up_to_the_cap() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill(&spool, &["a"]).await;
        let store = FlakyStore::new(Mode::Down);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        // No jitter, base 1 s, cap 4 s: attempts at 0, 1, 3, 7, 11, 15 s.
        tokio::time::sleep(Duration::from_millis(15_500)).await;
        assert_eq!(store.put_attempts.load(Ordering::SeqCst), 6);
        drainer.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_412_on_retry_removes_the_entry_without_writing_twice() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        // The write lands but the caller sees a failure (commit-then-fail), so the
        // uploader spools an object the store already has.
        let store = FlakyStore::new(Mode::CommitThenFail);
        let uploader = crate::Uploader::new(
            spool.clone(),
            Remote::new(store.clone()),
            crate::UploaderConfig::default(),
        );
        let outcome = uploader
            .upload("a", Bytes::from("bytes of a"))
            .await
            .unwrap();
        assert!(matches!(outcome, crate::Outcome::Spooled { .. }));
        store.set_mode(Mode::Healthy);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(spool.metrics().drained_total(D::AlreadyPresent), 1);
        assert_eq!(store.contents().await.len(), 1);
        assert_eq!(spool.stats().dead_letter_files, 0);
        // The 412 proven ours is a delivery, not a store error (issue 57).
        let errors = |kind| spool.metrics().store_errors_total(WritePath::Drain, kind);
        assert_eq!(errors("already_exists"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_existing_object_with_other_contents_is_a_conflict_not_a_success() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        let store = FlakyStore::new(Mode::Healthy);
        use object_store::ObjectStoreExt;
        store
            .inner
            .put(&"a".into(), Bytes::from("someone else").into())
            .await
            .unwrap();
        fill(&spool, &["a"]).await;
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(spool.metrics().dead_lettered_total(), 1);
        assert_eq!(spool.metrics().drained_total(D::AlreadyPresent), 0);
        let errors = |kind| spool.metrics().store_errors_total(WritePath::Drain, kind);
        assert_eq!((errors("conflict"), errors("already_exists")), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_poison_entry_is_dead_lettered_and_draining_goes_on() {
        let (spool, disk) = mem_spool(SpoolConfig::default()).await;
        fill(&spool, &["ok/1", "poison/1", "ok/2"]).await;
        let store = FlakyStore::new(Mode::Healthy);
        store.poison("poison/");
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        until_empty(&spool).await;
        drainer.shutdown().await;
        let names: Vec<String> = store.contents().await.into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["ok/1", "ok/2"]);
        assert_eq!(spool.metrics().dead_lettered_total(), 1);
        let dead = Path::new("/spool/dead-letter");
        let names = disk.list(dead).await.unwrap().to_vec();
        let error_file = names.iter().find(|n| n.ends_with(".error")).unwrap();
        let error = String::from_utf8(disk.read(&dead.join(error_file)).await.unwrap()).unwrap();
        assert!(error.contains("refused"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_corrupted_after_open_is_quarantined_and_draining_goes_on() {
        let (spool, disk) = mem_spool(SpoolConfig::default()).await;
        fill(&spool, &["a", "b"]).await;
        let entries = Path::new("/spool/entries");
        let listed = disk.list(entries).await.unwrap();
        let first = listed.iter().min().unwrap();
        disk.corrupt(&entries.join(first), |bytes| {
            *bytes.last_mut().unwrap() ^= 1;
        });
        let store = FlakyStore::new(Mode::Healthy);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(2));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(store.contents().await.len(), 1);
        assert_eq!(spool.stats().quarantined_files, 1);
        assert_eq!(spool.metrics().quarantined_total(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_entry_that_cannot_be_read_is_set_aside_and_the_rest_drains() {
        let (spool, disk) = mem_spool(SpoolConfig::default()).await;
        fill(&spool, &["bad-sector", "b", "c"]).await;
        let entries = Path::new("/spool/entries");
        let listed = disk.list(entries).await.unwrap();
        let first = listed.iter().min().unwrap();
        disk.make_unreadable(&entries.join(first));
        let store = FlakyStore::new(Mode::Healthy);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(4));
        until_empty(&spool).await;
        drainer.shutdown().await;
        let names: Vec<String> = store.contents().await.into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["b", "c"]);
        assert_eq!(spool.stats().quarantined_files, 1);
        let quarantine = Path::new("/spool/quarantine");
        let notes = disk.list(quarantine).await.unwrap().to_vec();
        let note = notes.iter().find(|n| n.ends_with(".reason")).unwrap();
        let reason = String::from_utf8(disk.read(&quarantine.join(note)).await.unwrap()).unwrap();
        assert!(reason.contains("cannot read"), "{reason}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_same_size_object_with_other_bytes_is_a_conflict_never_a_delivery() {
        // The store's ETag is not an MD5 (as for Cloud Storage's composite objects):
        // only reading the bytes back can tell.
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        let store = FlakyStore::new(Mode::Healthy);
        use object_store::ObjectStoreExt;
        store
            .inner
            .put(&"a".into(), Bytes::from("bytes of z").into())
            .await
            .unwrap();
        fill(&spool, &["a"]).await;
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        until_empty(&spool).await;
        drainer.shutdown().await;
        assert_eq!(spool.metrics().dead_lettered_total(), 1);
        assert_eq!(spool.metrics().drained_total(D::AlreadyPresent), 0);
        assert_eq!(store.contents().await[0].1, Bytes::from("bytes of z"));
    }

    #[tokio::test(start_paused = true)]
    async fn attributes_survive_a_spooled_write() {
        use object_store::{Attribute, Attributes, ObjectStoreExt};
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, "application/json".into());
        attributes.insert(Attribute::ContentEncoding, "gzip".into());
        attributes.insert(Attribute::CacheControl, "no-store".into());
        attributes.insert(Attribute::ContentDisposition, "attachment".into());
        attributes.insert(Attribute::Metadata("team".into()), "sre".into());
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        let store = FlakyStore::new(Mode::Healthy);
        let uploader = crate::Uploader::new(
            spool.clone(),
            Remote::new(store.clone()),
            crate::UploaderConfig::default(),
        );
        let bytes = Bytes::from_static(b"{}");
        let direct = uploader
            .upload_with("direct", bytes.clone(), &attributes)
            .await;
        assert_eq!(direct.unwrap(), crate::Outcome::Stored);
        store.set_mode(Mode::Down);
        let spooled = uploader.upload_with("spooled", bytes, &attributes).await;
        assert!(matches!(spooled.unwrap(), crate::Outcome::Spooled { .. }));
        store.set_mode(Mode::Healthy);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(1));
        until_empty(&spool).await;
        drainer.shutdown().await;
        let direct = store.inner.get(&"direct".into()).await.unwrap().attributes;
        let drained = store.inner.get(&"spooled".into()).await.unwrap().attributes;
        assert_eq!(direct, attributes);
        assert_eq!(drained, direct);
    }

    #[test]
    fn the_drain_timeout_grows_with_the_entry() {
        let config = DrainerConfig::default();
        assert_eq!(config.write_timeout(0), Duration::from_secs(30));
        assert_eq!(config.write_timeout(100 << 20), Duration::from_secs(130));
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_between_entries_and_leaves_the_rest_on_disk() {
        let (spool, _) = mem_spool(SpoolConfig::default()).await;
        fill(&spool, &["a", "b"]).await;
        let store = FlakyStore::new(Mode::Down);
        let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), config(2));
        tokio::time::sleep(Duration::from_secs(2)).await;
        let started = tokio::time::Instant::now();
        drainer.shutdown().await;
        // A backoff sleep is cut short: shutdown does not wait out the delay.
        assert!(started.elapsed() < Duration::from_millis(10));
        let stats = spool.stats();
        assert_eq!((stats.files, stats.claimed), (2, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_seed_gives_the_same_retry_schedule() {
        async fn attempts_by_second(seed: u64) -> Vec<u64> {
            let (spool, _) = mem_spool(SpoolConfig::default()).await;
            fill(&spool, &["a", "b", "c"]).await;
            let store = FlakyStore::new(Mode::Down);
            let mut cfg = config(3);
            cfg.backoff.jitter = Jitter::Full;
            cfg.rng_seed = Some(seed);
            let drainer = Drainer::start(spool.clone(), Remote::new(store.clone()), cfg);
            let mut seen = Vec::new();
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                seen.push(store.put_attempts.load(Ordering::SeqCst));
            }
            drainer.shutdown().await;
            seen
        }
        assert_eq!(attempts_by_second(1).await, attempts_by_second(1).await);
    }
}
