//! Setting entries aside: `dead-letter/` for entries the store refused for good (with
//! the store's error beside them), `quarantine/` for entries that failed verification
//! or could not be read (with the reason). Sequence numbers continue past every
//! set-aside one, so an entry keeps its file name. If the move fails the entry stays
//! indexed and its claim is released.

use std::io;
use std::path::Path;

use bytes::Bytes;

use super::layout::{ERROR_SUFFIX, REASON_SUFFIX};
use super::{Claim, Spool, SpoolDir};
use crate::disk::Disk;

/// Where a settled entry that was not delivered goes.
#[derive(Debug, Clone, Copy)]
enum Aside {
    DeadLetter,
    Quarantine,
}

impl Aside {
    fn as_str(self) -> &'static str {
        match self {
            Aside::DeadLetter => "dead-lettered",
            Aside::Quarantine => "quarantined",
        }
    }
}

impl Spool {
    /// Moves a claimed entry to `dead-letter/`, with the store's error beside it.
    pub async fn dead_letter(&self, claim: Claim, error: &str) -> io::Result<()> {
        self.set_aside(claim, Aside::DeadLetter, error).await
    }

    /// Moves a claimed entry that failed verification or reading to `quarantine/`.
    pub async fn quarantine(&self, claim: Claim, reason: &str) -> io::Result<()> {
        self.set_aside(claim, Aside::Quarantine, reason).await
    }

    async fn set_aside(&self, mut claim: Claim, aside: Aside, note: &str) -> io::Result<()> {
        let inner = &*self.inner;
        let (to, note_suffix) = match aside {
            Aside::DeadLetter => (&inner.dead_letter, ERROR_SUFFIX),
            Aside::Quarantine => (&inner.quarantine, REASON_SUFFIX),
        };
        let file = claim.file_name().to_owned();
        let from = inner.entries.path.join(&file);
        move_with_note(&*inner.disk, &from, &to.path, &file, note_suffix, note).await?;
        {
            let mut state = self.state();
            self.forget(&mut state, &mut claim);
            match aside {
                Aside::DeadLetter => state.dead_letter_files += 1,
                Aside::Quarantine => state.quarantined_files += 1,
            }
        }
        inner.changed.notify_waiters();
        match aside {
            Aside::DeadLetter => inner.metrics.dead_lettered.inc(),
            Aside::Quarantine => inner.metrics.quarantined.inc(),
        };
        tracing::warn!(seq = claim.seq(), %note, "{} spool entry", aside.as_str());
        self.sync_set_aside(to).await
    }

    /// Makes a move durable: the target directory (which holds the rename and the
    /// note), then `entries/`.
    async fn sync_set_aside(&self, to: &SpoolDir) -> io::Result<()> {
        self.sync_dir(to).await?;
        self.sync_dir(&self.inner.entries).await
    }
}

/// Moves `from` into `to_dir` as `target`, then writes `<target><note_suffix>`
/// holding `note`. The caller makes both durable.
///
/// The move comes first and the note is best effort: a rename needs no data blocks,
/// so a corrupt entry can usually be set aside on a full disk (the note then says
/// nothing, and the log says why).
pub(super) async fn move_with_note(
    disk: &dyn Disk,
    from: &Path,
    to_dir: &Path,
    target: &str,
    note_suffix: &str,
    note: &str,
) -> io::Result<()> {
    disk.rename(from, &to_dir.join(target)).await?;
    let note_path = to_dir.join(format!("{target}{note_suffix}"));
    let _ = disk.remove(&note_path).await;
    if let Err(e) = disk
        .create_synced(&note_path, Bytes::from(format!("{note}\n")))
        .await
    {
        tracing::warn!(file = %note_path.display(), error = %e, %note, "cannot write the note beside a set-aside entry");
    }
    Ok(())
}
