//! The drain's wake when the store heals: a write the store took (a direct upload,
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

use std::sync::atomic::{AtomicUsize, Ordering};

use super::Spool;

/// Drain workers waiting out a retry's backoff, and their wake.
#[derive(Debug, Default)]
pub(super) struct StoreTook {
    wake: tokio::sync::Notify,
    /// Workers in [`Spool::store_took_a_write_elsewhere`]: no notification is sent
    /// (and so none is stored for a later waiter) while there are none.
    retrying: AtomicUsize,
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
    /// retry's backoff, if any (see the module doc).
    pub(crate) fn store_took_a_write(&self) {
        let took = &self.inner.store_took;
        if took.retrying.load(Ordering::Relaxed) > 0 {
            took.wake.notify_one();
        }
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
