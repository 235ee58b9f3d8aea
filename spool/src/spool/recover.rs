//! Reopening in place after a failed directory sync. The kernel may have dropped
//! what that sync covered, and no retried fsync can be trusted to say, so the spool
//! stops taking puts ([`Spool::break_spool`]) and rebuilds its index from the
//! directory as it is now: the same scan as open (list, delete temp files, index,
//! quarantine strays), with a fresh group commit for each directory. It waits for
//! puts in flight to finish first (they all fail), keeps the claims drainer workers
//! hold, and tries at once, then with backoff (100 ms doubling to 60 s) until a scan
//! and a sync of `entries/` succeed: puts are refused only while it runs.
//! `spool_recoveries_total` counts the times it succeeded.

use std::sync::Weak;
use std::time::Duration;

use super::layout::{ERROR_SUFFIX, REASON_SUFFIX};
use super::open::{Dirs, Listings, index};
use super::{Inner, Spool};
use crate::spool::layout;

const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(60);

/// The recovery task: runs until the spool reopens or is dropped.
pub(super) async fn run(inner: Weak<Inner>) {
    let mut delay = Duration::ZERO;
    loop {
        tokio::time::sleep(delay).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let spool = Spool { inner };
        match spool.reopen_in_place().await {
            Ok(()) => return,
            Err(e) => {
                tracing::error!(error = %e, ?delay, "spool could not reopen itself; will retry");
                delay = (delay * 2).clamp(FIRST_DELAY, MAX_DELAY);
            }
        }
    }
}

impl Spool {
    async fn reopen_in_place(&self) -> Result<(), String> {
        self.wait_for_puts_in_flight().await;
        let inner = &*self.inner;
        let dirs = Dirs {
            entries: inner.entries.path.clone(),
            quarantine: inner.quarantine.path.clone(),
            dead_letter: inner.dead_letter.path.clone(),
        };
        let listings = (Listings::of(&*inner.disk, &dirs).await).map_err(|e| e.to_string())?;
        let found = index(&inner.disk, &dirs, listings, &inner.metrics)
            .await
            .map_err(|e| e.to_string())?;
        for dir in [&inner.entries, &inner.quarantine, &inner.dead_letter] {
            dir.sync.reset().await;
        }
        inner
            .disk
            .sync_dir(&inner.entries.path)
            .await
            .map_err(|e| format!("syncing {}: {e}", inner.entries.path.display()))?;
        let next_seq = found.next_seq();
        let mut state = self.state();
        let mut entries = found.index;
        // Entries claimed by drainer workers stay claimed (and delivered ones
        // delivered): their workers and the remover settle them.
        for (seq, meta) in state.index.claimed_entries() {
            entries.insert(seq, *meta);
        }
        state.index = state.index.rebuilt(entries);
        state.next_seq = state.next_seq.max(next_seq);
        state.quarantined_files = layout::count_data_files(&found.quarantine, REASON_SUFFIX);
        state.dead_letter_files = layout::count_data_files(&found.dead_letter, ERROR_SUFFIX);
        state.unsynced_removes = 0;
        state.broken = None;
        state.recovering = false;
        state.check(&inner.config);
        state.check_index();
        drop(state);
        inner.metrics.recoveries.inc();
        tracing::warn!("spool reopened itself after a failed directory sync");
        inner.changed.notify_waiters();
        Ok(())
    }

    async fn wait_for_puts_in_flight(&self) {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.state().reserved_files == 0 {
                return;
            }
            changed.await;
        }
    }
}
