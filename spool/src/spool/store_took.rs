//! What the spool sees of the store's health: the drain's wake when the store heals,
//! and the log lines an outage is run from. A write the store took (a direct upload,
//! a drained entry) wakes one drain worker out of a retry's backoff to try again at
//! once, and each success of a woken worker wakes the next.
//!
//! Promises:
//! - Once the store takes writes again, the backlog starts leaving within a few
//!   writes' time, not after the workers' backoff (up to `cap`, 64 s by default):
//!   `spool_oldest_age_seconds` and the alerts on it fall with the outage.
//! - A store that still fails keeps its backoff: one success wakes one attempt,
//!   which, failing, sleeps its next (longer) backoff and wakes no one. A partial
//!   outage that takes one write in five costs about one extra attempt per success,
//!   not a herd.
//! - An outage shows in the log without a line per request: a warning when the store
//!   starts failing writes (its first error), one a minute while it goes on (how
//!   many failed and how many it took, what the spool holds), and a line when it
//!   takes writes again ([`RECOVERED_AFTER`] in a row: a store failing most writes
//!   is still failing); while a backlog drains, a line a minute with its progress.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::Spool;
use crate::error::StoreError;

/// Writes taken in a row that end an outage in the log.
pub const RECOVERED_AFTER: u32 = 8;

/// Least time between two lines of one kind (an outage going on, a drain's
/// progress).
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Drain workers waiting out a retry's backoff, and their wake; the store's health
/// as logged.
#[derive(Debug, Default)]
pub(super) struct StoreTook {
    wake: tokio::sync::Notify,
    /// Workers in [`Spool::store_took_a_write_elsewhere`]: no notification is sent
    /// (and so none is stored for a later waiter) while there are none.
    retrying: AtomicUsize,
    health: Mutex<Health>,
}

/// The store's health as the log tells it.
#[derive(Debug, Default)]
struct Health {
    /// Since when the store fails writes, while it does.
    failing_since: Option<Instant>,
    /// Writes failed and taken since then.
    failed: u64,
    taken: u64,
    /// Writes taken since the last failure.
    taken_in_a_row: u32,
    /// When the last outage or progress line was written.
    outage_logged: Option<Instant>,
    progress_logged: Option<Instant>,
    /// Writes taken since the last progress line.
    taken_since_progress: u64,
}

/// Counts one worker out of [`StoreTook::retrying`] however its wait ends.
struct Retrying<'a>(&'a AtomicUsize);

impl Drop for Retrying<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Spool {
    /// The store has just taken a write: wakes one drain worker waiting out a
    /// retry's backoff, if any, and logs a recovery or the drain's progress (see
    /// the module doc).
    pub(crate) fn store_took_a_write(&self) {
        let took = &self.inner.store_took;
        if took.retrying.load(Ordering::Relaxed) > 0 {
            took.wake.notify_one();
        }
        let now = Instant::now();
        let mut health = took.health.lock().expect("health lock poisoned");
        health.taken_since_progress += 1;
        if let Some(since) = health.failing_since {
            health.taken += 1;
            health.taken_in_a_row += 1;
            if health.taken_in_a_row < RECOVERED_AFTER {
                return;
            }
            let (failed, stats) = (health.failed, self.stats());
            *health = Health {
                progress_logged: Some(now),
                ..Health::default()
            };
            drop(health);
            tracing::info!(
                failed_for = %crate::format::duration(now - since),
                failed,
                files = stats.files,
                bytes = stats.bytes,
                "the store takes writes again; the spool drains what it holds"
            );
            return;
        }
        let due = health
            .progress_logged
            .is_none_or(|at| now - at >= LOG_EVERY);
        if !due {
            return;
        }
        let since = health.progress_logged.replace(now);
        let delivered = std::mem::take(&mut health.taken_since_progress);
        drop(health);
        let stats = self.stats();
        if let Some(since) = since
            && stats.files > 0
        {
            let seconds = (now - since).as_secs_f64();
            let rate = delivered as f64 / seconds;
            let left = (rate > 0.0).then(|| Duration::from_secs_f64(stats.files as f64 / rate));
            tracing::info!(
                taken = delivered,
                per_second = format!("{rate:.1}"),
                files = stats.files,
                bytes = stats.bytes,
                about_left = %left.map_or("unknown".into(), crate::format::duration),
                "draining: the store took writes since the last line; the spool holds the rest"
            );
        }
    }

    /// The store has just failed a write with `error`, which will be retried (or
    /// its object spooled): logs the outage's start, then a line a minute.
    pub(crate) fn store_failed_a_write(&self, error: &StoreError) {
        let now = Instant::now();
        let mut health = self
            .inner
            .store_took
            .health
            .lock()
            .expect("health lock poisoned");
        health.taken_in_a_row = 0;
        let Some(since) = health.failing_since else {
            health.failing_since = Some(now);
            health.failed = 1;
            health.outage_logged = Some(now);
            drop(health);
            tracing::warn!(
                %error,
                "the store is failing writes: uploads it fails are spooled, and the drain retries with backoff"
            );
            return;
        };
        health.failed += 1;
        if health.outage_logged.is_some_and(|at| now - at < LOG_EVERY) {
            return;
        }
        health.outage_logged = Some(now);
        let (failed, taken) = (health.failed, health.taken);
        drop(health);
        let stats = self.stats();
        tracing::warn!(
            failing_for = %crate::format::duration(now - since),
            failed,
            taken,
            files = stats.files,
            bytes = stats.bytes,
            oldest = %crate::format::duration(stats.oldest_age),
            last_error = %error,
            "the store is still failing writes; the spool holds what it failed"
        );
    }

    /// Completes when the store takes a write elsewhere
    /// ([`Spool::store_took_a_write`]); a drain worker waits on it beside its
    /// retry's backoff.
    pub(crate) async fn store_took_a_write_elsewhere(&self) {
        let took = &self.inner.store_took;
        let woken = took.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        took.retrying.fetch_add(1, Ordering::Relaxed);
        let _retrying = Retrying(&took.retrying);
        woken.await;
    }
}
