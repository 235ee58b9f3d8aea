//! A power loss on the real backing directory: every handle is dropped (the
//! processes that held them died with the power), the model decides what survives
//! (namespace first, then each file's data in inode order, as the simulated disk
//! draws), the surviving files are restored in place, and the backing directory is
//! rebuilt to the surviving tree.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use rand_chacha::ChaCha8Rng;

use super::state::State;
use crate::model::{CrashStates, Fate, Ino, Kind, draw_fate};
use crate::stats::PowerLoss;

impl State {
    /// Loses power, with the decisions drawn from `rng`.
    pub(crate) fn power_loss(&mut self, rng: &mut ChaCha8Rng) -> io::Result<PowerLoss> {
        let mut report = PowerLoss {
            stale_handles: self.forget_handles(),
            ..PowerLoss::default()
        };
        let old: BTreeMap<Ino, PathBuf> = self
            .ns
            .inodes()
            .into_iter()
            .map(|(ino, _)| (ino, self.location(ino)))
            .collect();
        let mut states = CrashStates {
            power_losses: 1,
            ..CrashStates::default()
        };
        self.ns.power_loss(rng, &mut states);
        self.ns.take_freed();
        let survivors: Vec<Ino> = self
            .ns
            .inodes()
            .into_iter()
            .filter(|(_, kind)| *kind == Kind::File)
            .map(|(ino, _)| ino)
            .collect();
        for ino in &survivors {
            let path = old
                .get(ino)
                .ok_or_else(|| io::Error::other("surviving inode without a location"))?;
            self.settle_file(*ino, path, rng, &mut states, &mut report)?;
        }
        self.files.retain(|ino, _| survivors.contains(ino));
        self.backing.rebuild(&self.ns, &old)?;
        report.crash_states = states;
        self.stats.add(&report);
        Ok(report)
    }

    /// Restores one surviving file at `path` to what its fate leaves.
    fn settle_file(
        &mut self,
        ino: Ino,
        path: &PathBuf,
        rng: &mut ChaCha8Rng,
        states: &mut CrashStates,
        report: &mut PowerLoss,
    ) -> io::Result<()> {
        let live_bytes = fs::metadata(path)?.len();
        let block_bytes = self.block_bytes;
        let renamed = self.ns.renamed(ino);
        let Some(data) = self.files.get_mut(&ino) else {
            return Ok(());
        };
        if !data.is_dirty(live_bytes) {
            data.settle(live_bytes);
            return Ok(());
        }
        let fate = if data.writeback_lost() {
            Fate::Lost
        } else {
            draw_fate(rng, live_bytes, block_bytes)
        };
        states.count_fate(&fate);
        let restore = data.restore(&fate, live_bytes);
        if restore.len_bytes == 0 && live_bytes > 0 && renamed {
            report.zero_length_after_rename += 1;
        }
        if matches!(fate, Fate::Mixed { .. }) {
            report.blocks_reverted += restore.writes.len() as u64;
        }
        let file = fs::OpenOptions::new().write(true).open(path)?;
        file.set_len(restore.len_bytes)?;
        for (offset, bytes) in &restore.writes {
            file.write_all_at(bytes, *offset)?;
        }
        data.settle(restore.len_bytes);
        Ok(())
    }
}
