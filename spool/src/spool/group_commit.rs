//! Group commit for directory syncs: a sync started after an operation's change
//! covers it, so one fsync can serve every put that renamed while the previous one
//! ran. After a failed sync every later wait fails too, until the spool has reopened
//! itself ([`DirSync::reset`]): retrying an fsync can report success for changes the
//! kernel already dropped. A directory that could not be opened (out of file
//! descriptors) was not synced at all: that wait fails alone.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::disk::Disk;

/// Tickets name changes to one directory; [`DirSync::wait_durable`] returns once a
/// sync that started after the ticket's change has succeeded.
#[derive(Default)]
pub(crate) struct DirSync {
    issued: AtomicU64,
    synced: AtomicU64,
    failed: tokio::sync::Mutex<Option<Arc<str>>>,
}

impl DirSync {
    /// Call after a change to the directory; the ticket names that change.
    pub(crate) fn ticket(&self) -> u64 {
        self.issued.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Waits until the change named by `ticket` is durable, syncing `dir` if no sync
    /// that covers it has completed yet.
    pub(crate) async fn wait_durable(
        &self,
        disk: &dyn Disk,
        dir: &Path,
        ticket: u64,
    ) -> io::Result<()> {
        debug_assert!(
            ticket <= self.issued.load(Ordering::SeqCst),
            "unissued ticket"
        );
        if self.synced.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        let mut failed = self.failed.lock().await;
        if let Some(reason) = &*failed {
            return Err(io::Error::other(format!(
                "an earlier directory sync failed: {reason}"
            )));
        }
        if self.synced.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        // Every change with a ticket up to here happened before this sync starts.
        let upto = self.issued.load(Ordering::SeqCst);
        match disk.sync_dir(dir).await {
            Ok(()) => {
                self.synced.fetch_max(upto, Ordering::SeqCst);
                debug_assert!(
                    self.synced.load(Ordering::SeqCst) <= self.issued.load(Ordering::SeqCst),
                    "synced tickets beyond those issued"
                );
                Ok(())
            }
            // The directory could not be opened: no fsync ran, nothing was dropped,
            // and the next sync covers these changes.
            Err(e) if super::is_out_of_descriptors(&e) => Err(e),
            Err(e) => {
                *failed = Some(e.to_string().into());
                Err(e)
            }
        }
    }

    /// Forgets a failure, once the spool has reopened from what is on disk and no
    /// put that saw it is still waiting (a put renamed before the failure must never
    /// be acknowledged by a later sync).
    pub(crate) async fn reset(&self) {
        *self.failed.lock().await = None;
    }
}
