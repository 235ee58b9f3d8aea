//! The random decisions of a power loss, as pure functions of the caller's RNG: which
//! unsynced namespace operations survive ([`keep_in_order`]), what becomes of a file's
//! unsynced data ([`draw_fate`], [`mixed_bytes`]), and how much a failed directory
//! sync keeps ([`failed_sync_keeps`]).
//!
//! Each function draws from the RNG exactly as the simulated disk
//! (`sim/src/simdisk/fs.rs`) draws today, in the same order and with the same
//! distributions, so that the simulated disk can call them instead of its own copy
//! without changing a single result. Nothing here knows about inodes, paths or FUSE.

use std::collections::BTreeSet;

use rand::Rng;

/// What a power loss leaves of one file's data that was not made durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// None of it: the durable data comes back (size included).
    Lost,
    /// All of it: the live data survives whole.
    Kept,
    /// A file of length zero (ext4 delayed allocation: the size was never written).
    ZeroLength,
    /// The live size, with each block (`revert[i]` for block `i` of the live data)
    /// either the live block (`false`) or the durable one, zeros past the durable
    /// size (`true`): xfs unwritten extents, or old contents.
    Mixed {
        /// One entry per block of the live data, in order.
        revert: Vec<bool>,
    },
}

/// Draws the fate of one file whose live data (`live_bytes` long) is not all
/// durable: one draw of four outcomes, then for [`Fate::Mixed`] one fair coin per
/// block of `block_bytes` (the last block may be short).
pub fn draw_fate<R: Rng + ?Sized>(rng: &mut R, live_bytes: u64, block_bytes: u64) -> Fate {
    match rng.random_range(0..4u8) {
        0 => Fate::Lost,
        1 => Fate::Kept,
        2 => Fate::ZeroLength,
        _ => {
            let blocks = live_bytes.div_ceil(block_bytes.max(1));
            Fate::Mixed {
                revert: (0..blocks).map(|_| rng.random_bool(0.5)).collect(),
            }
        }
    }
}

/// The bytes a [`Fate::Mixed`] leaves: `live`, with every block marked in `revert`
/// replaced by the durable bytes at the same offsets (zeros past the end of
/// `durable`).
pub fn mixed_bytes(live: &[u8], durable: &[u8], block_bytes: usize, revert: &[bool]) -> Vec<u8> {
    let block = block_bytes.max(1);
    let mut data = live.to_vec();
    for (i, chunk) in data.chunks_mut(block).enumerate() {
        if revert.get(i).copied().unwrap_or(false) {
            let from = i * block;
            for (j, b) in chunk.iter_mut().enumerate() {
                *b = durable.get(from + j).copied().unwrap_or(0);
            }
        }
    }
    data
}

/// A power-loss seed whose draw keeps almost none of the operations not yet synced:
/// seeded as a power loss seeds its generator (`ChaCha8Rng::seed_from_u64`), its
/// first draw, [`keep_in_order`]'s keep probability, is below 0.1%. For a check that
/// nothing durable rests on an operation never synced.
pub fn seed_keeping_almost_nothing() -> u64 {
    use rand::SeedableRng as _;
    (0..)
        .find(|&seed| rand_chacha::ChaCha8Rng::seed_from_u64(seed).random::<f64>() < 0.001)
        .expect("some seed draws below 0.1%")
}

/// Decides which pending namespace operations survive a power loss. `ops` lists, in
/// issue order, the directories each operation touches (a rename touches two). One
/// draw gives a keep probability for this power loss; then each operation whose
/// directories have all kept every earlier operation is kept with that probability
/// (one draw), and an operation not kept cuts every directory it touches, so that
/// what survives is a prefix per directory and a rename survives whole or not at all.
/// Blocked operations take no draw.
pub fn keep_in_order<R, K, I>(rng: &mut R, ops: I) -> Vec<bool>
where
    R: Rng + ?Sized,
    K: Ord,
    I: IntoIterator,
    I::Item: IntoIterator<Item = K>,
{
    let keep_probability: f64 = rng.random();
    let mut cut: BTreeSet<K> = BTreeSet::new();
    ops.into_iter()
        .map(|dirs| {
            let dirs: Vec<K> = dirs.into_iter().collect();
            let blocked = dirs.iter().any(|d| cut.contains(d));
            let kept = !blocked && rng.random_bool(keep_probability);
            if !kept {
                cut.extend(dirs);
            }
            kept
        })
        .collect()
}

/// How many of the `pending` operations a failed directory sync makes durable (a
/// prefix, in journal order); the rest are dropped for good. One draw.
pub fn failed_sync_keeps<R: Rng + ?Sized>(rng: &mut R, pending: usize) -> usize {
    rng.random_range(0..=pending)
}

/// What power losses produced, over the life of a disk: the crash states a run
/// reached. The same fields, names and serialization as the simulated disk's report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CrashStates {
    /// Power losses.
    pub power_losses: u64,
    /// Namespace operations never synced that survived anyway.
    pub unsynced_ops_kept: u64,
    /// Namespace operations never synced that were lost.
    pub unsynced_ops_lost: u64,
    /// Renames that survived without a directory sync (a put persisted before it
    /// could be acknowledged).
    pub renames_kept_unsynced: u64,
    /// Directories where some, but not all, unsynced removals survived.
    pub removal_batches_split: u64,
    /// Files whose unsynced data was lost whole (the durable version came back).
    pub unsynced_data_lost: u64,
    /// Files that came back with zero length although they held data.
    pub zero_length_files: u64,
    /// Files that came back at their new size with some blocks zero-filled.
    pub zero_filled_files: u64,
    /// Files whose unsynced data survived whole.
    pub unsynced_data_kept: u64,
    /// Directories that vanished because their own entry was not durable.
    pub directories_lost: u64,
}

impl CrashStates {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &CrashStates) {
        self.power_losses += other.power_losses;
        self.unsynced_ops_kept += other.unsynced_ops_kept;
        self.unsynced_ops_lost += other.unsynced_ops_lost;
        self.renames_kept_unsynced += other.renames_kept_unsynced;
        self.removal_batches_split += other.removal_batches_split;
        self.unsynced_data_lost += other.unsynced_data_lost;
        self.zero_length_files += other.zero_length_files;
        self.zero_filled_files += other.zero_filled_files;
        self.unsynced_data_kept += other.unsynced_data_kept;
        self.directories_lost += other.directories_lost;
    }

    /// Counts one file's fate.
    pub fn count_fate(&mut self, fate: &Fate) {
        match fate {
            Fate::Lost => self.unsynced_data_lost += 1,
            Fate::Kept => self.unsynced_data_kept += 1,
            Fate::ZeroLength => self.zero_length_files += 1,
            Fate::Mixed { .. } => self.zero_filled_files += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// The simulated disk's own code for a journal, as it stands in
    /// `sim/src/simdisk/fs.rs` (`settle_journal`), reduced to its draws.
    fn simdisk_keep(rng: &mut ChaCha8Rng, ops: &[Vec<u32>]) -> Vec<bool> {
        let keep_probability: f64 = rng.random();
        let mut cut = BTreeSet::new();
        let mut kept_all = Vec::new();
        for op in ops {
            let blocked = op.iter().any(|d| cut.contains(d));
            let kept = !blocked && rng.random_bool(keep_probability);
            if !kept {
                cut.extend(op.iter().copied());
            }
            kept_all.push(kept);
        }
        kept_all
    }

    /// The simulated disk's own code for a file (`settle_data`), reduced to its
    /// draws and its result.
    fn simdisk_fate(rng: &mut ChaCha8Rng, live: &[u8], durable: &[u8], block: usize) -> Vec<u8> {
        match rng.random_range(0..4u8) {
            0 => durable.to_vec(),
            1 => live.to_vec(),
            2 => Vec::new(),
            _ => {
                let mut data = live.to_vec();
                for (i, chunk) in data.chunks_mut(block).enumerate() {
                    if rng.random_bool(0.5) {
                        let from = i * block;
                        for (j, b) in chunk.iter_mut().enumerate() {
                            *b = durable.get(from + j).copied().unwrap_or(0);
                        }
                    }
                }
                data
            }
        }
    }

    #[test]
    fn journal_decisions_draw_exactly_as_the_simulated_disk_does() {
        let ops: Vec<Vec<u32>> = vec![vec![1], vec![2, 1], vec![2], vec![3], vec![1], vec![3, 4]];
        for seed in 0..500 {
            let (mut a, mut b) = (
                ChaCha8Rng::seed_from_u64(seed),
                ChaCha8Rng::seed_from_u64(seed),
            );
            assert_eq!(
                keep_in_order(&mut a, ops.clone()),
                simdisk_keep(&mut b, &ops)
            );
            assert_eq!(
                a.random::<u64>(),
                b.random::<u64>(),
                "seed {seed}: streams diverged"
            );
        }
    }

    #[test]
    fn file_fates_draw_exactly_as_the_simulated_disk_does() {
        let durable = b"0123456789".to_vec();
        let live = b"abcdefghijklmnopq".to_vec();
        for seed in 0..500 {
            let (mut a, mut b) = (
                ChaCha8Rng::seed_from_u64(seed),
                ChaCha8Rng::seed_from_u64(seed),
            );
            let ours = match draw_fate(&mut a, live.len() as u64, 4) {
                Fate::Lost => durable.clone(),
                Fate::Kept => live.clone(),
                Fate::ZeroLength => Vec::new(),
                Fate::Mixed { revert } => mixed_bytes(&live, &durable, 4, &revert),
            };
            assert_eq!(
                ours,
                simdisk_fate(&mut b, &live, &durable, 4),
                "seed {seed}"
            );
            assert_eq!(
                a.random::<u64>(),
                b.random::<u64>(),
                "seed {seed}: streams diverged"
            );
        }
    }

    #[test]
    fn a_lost_operation_blocks_every_later_one_in_its_directories() {
        let mut seen_partial = false;
        for seed in 0..200 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let kept = keep_in_order(&mut rng, [vec![1], vec![1, 2], vec![2], vec![1]]);
            if !kept[0] {
                // Directory 1 is cut, the rename cuts directory 2 with it.
                assert_eq!(kept, [false; 4], "seed {seed}");
            }
            if !kept[1] {
                assert!(!kept[2] && !kept[3], "seed {seed}: {kept:?}");
            }
            seen_partial |= kept[0] && !kept[3];
        }
        assert!(seen_partial);
    }
}
