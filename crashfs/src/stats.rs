//! What crashfs counts: what one power loss produced ([`PowerLoss`]) and the
//! totals over a mount's life ([`Stats`]), which the control interface's `stats`
//! and [`crate::Mount::stats`] report. Below both the mount and the FUSE layer,
//! which fill them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::CrashStates;

/// What one power loss produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PowerLoss {
    /// The states it left (the simulated disk's counts; `power_losses` is 1).
    pub crash_states: CrashStates,
    /// Files that came back empty under a name a rename gave them, although they
    /// held data (ext4 delayed allocation behind a persisted rename).
    pub zero_length_after_rename: u64,
    /// Blocks set back to their durable contents (zeros past the durable size) in
    /// files that kept their new size.
    pub blocks_reverted: u64,
    /// Handles open at the power loss; each fails with EIO from then on.
    pub stale_handles: u64,
}

/// Counts over the life of a mount.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Every crash state produced, summed over power losses.
    pub crash_states: CrashStates,
    /// See [`PowerLoss::zero_length_after_rename`].
    pub zero_length_after_rename: u64,
    /// See [`PowerLoss::blocks_reverted`].
    pub blocks_reverted: u64,
    /// See [`PowerLoss::stale_handles`].
    pub stale_handles: u64,
    /// Faults injected: operation kind -> errno name -> count.
    pub faults_injected: BTreeMap<String, BTreeMap<String, u64>>,
    /// Namespace operations not yet made durable by a directory sync, now.
    pub pending_namespace_ops: u64,
    /// Files whose data is not all durable, now.
    pub dirty_files: u64,
}

impl Stats {
    pub(crate) fn add(&mut self, p: &PowerLoss) {
        self.crash_states.add(&p.crash_states);
        self.zero_length_after_rename += p.zero_length_after_rename;
        self.blocks_reverted += p.blocks_reverted;
        self.stale_handles += p.stale_handles;
    }
}
