//! Setting entries aside: `dead-letter/` for entries the store refused for good (with
//! the store's error beside them), `quarantine/` for entries that failed verification
//! or could not be read (with the reason). Sequence numbers continue past every
//! set-aside one, so an entry keeps its file name. If the move fails the entry stays
//! indexed and its claim is released.

use std::io;
use std::path::Path;

use bytes::Bytes;

use super::layout::{self, ERROR_SUFFIX, REASON_SUFFIX};
use super::{Claim, Spool, SpoolDir};
use crate::disk::{Contents, Disk};

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
        .create_synced(&note_path, Contents::from(format!("{note}\n").into_bytes()))
        .await
    {
        tracing::warn!(file = %note_path.display(), error = %e, %note, "cannot write the note beside a set-aside entry");
    }
    Ok(())
}

/// Which set-aside directory [`Spool::requeue`] takes entries back from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetAside {
    /// `dead-letter/`: entries the store refused for good (fix the cause first).
    DeadLetter,
    /// `quarantine/`: entries that failed verification or could not be read. Only
    /// those that now verify are taken back.
    Quarantine,
}

/// What [`Spool::requeue`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requeued {
    /// Entries back in the queue: (file name, sequence number).
    pub moved: Vec<(String, u64)>,
    /// Files left where they are, with the reason.
    pub refused: Vec<(String, String)>,
}

impl Spool {
    /// Moves set-aside entries back into the queue at their old place in the drain
    /// order, durably: every one named in `seqs` (all when `None`) that verifies in
    /// full and fits the spool's bounds. The others stay, with the reason. The
    /// notes beside moved entries are removed.
    pub async fn requeue(&self, from: SetAside, seqs: Option<&[u64]>) -> io::Result<Requeued> {
        let inner = &*self.inner;
        let (dir, note_suffix) = match from {
            SetAside::DeadLetter => (&inner.dead_letter, ERROR_SUFFIX),
            SetAside::Quarantine => (&inner.quarantine, REASON_SUFFIX),
        };
        let mut files = inner.disk.list(&dir.path).await?.to_vec();
        files.retain(|f| !f.ends_with(note_suffix));
        files.sort();
        let mut done = Requeued::default();
        for file in files {
            let seq = layout::parse_seq(&file);
            if seqs.is_some_and(|wanted| seq.is_none_or(|s| !wanted.contains(&s))) {
                continue;
            }
            match self.requeue_one(dir, &file, note_suffix).await {
                Ok(seq) => done.moved.push((file, seq)),
                Err(reason) => done.refused.push((file, reason)),
            }
        }
        if !done.moved.is_empty() {
            self.sync_dir(&inner.entries).await?;
            self.sync_dir(dir).await?;
            inner.changed.notify_waiters();
        }
        Ok(done)
    }

    async fn requeue_one(
        &self,
        from: &SpoolDir,
        file: &str,
        note_suffix: &str,
    ) -> Result<u64, String> {
        let inner = &*self.inner;
        let path = from.path.join(file);
        let data = inner
            .disk
            .read(&path)
            .await
            .map_err(|e| format!("cannot read: {e}"))?;
        let (header, _) = layout::verify(file, Bytes::from(data))
            .map_err(|e| format!("fails verification: {e}"))?;
        let listed = layout::parse_entry_name(file).expect("verified entry names parse");
        let file_bytes = header.file_bytes();
        {
            let state = self.state();
            let config = &inner.config;
            if state.index.contains(header.seq) {
                return Err(format!("entry {} is already queued", header.seq));
            }
            if state.index.len() as u64 + state.reserved_files >= config.max_files
                || state.index.bytes() + state.reserved_bytes + file_bytes > config.max_bytes
            {
                return Err("the spool is full".into());
            }
        }
        inner
            .disk
            .rename(&path, &inner.entries.path.join(file))
            .await
            .map_err(|e| format!("cannot move it back: {e}"))?;
        let _ = inner
            .disk
            .remove(&from.path.join(format!("{file}{note_suffix}")))
            .await;
        let mut state = self.state();
        let naming = match listed.listed {
            None => super::Naming::Legacy,
            Some(layout::Listed { name_key: None, .. }) => super::Naming::Unkeyed,
            Some(_) => super::Naming::Keyed,
        };
        let name_key = crate::name::key(&header.name);
        let meta = super::Meta::new(file_bytes, header.created_unix_ms, name_key, naming);
        state.index.insert(header.seq, meta);
        if std::ptr::eq(from, &inner.dead_letter) {
            state.dead_letter_files -= 1;
        } else {
            state.quarantined_files -= 1;
        }
        state.check(&inner.config);
        Ok(header.seq)
    }
}
