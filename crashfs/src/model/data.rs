//! One file's data: what is durable, kept as the difference from the live data (which
//! lives elsewhere, in the backing file), so that a file costs nothing beyond its
//! live copy while it is synced.
//!
//! - The durable data is `durable_bytes` long; a block (`block_bytes`, 4096 by default)
//!   whose live bytes may differ from the durable ones holds a pre-image: the durable
//!   bytes of that block, taken from the live file just before its first change
//!   (copy on first write). Blocks without a pre-image hold the same bytes live and
//!   durable (below `durable_bytes`).
//! - fsync/fdatasync makes durable the blocks changed since the last sync and the
//!   size; a failed sync drops them for good (Linux marks the pages clean): their
//!   pre-images stay, a later sync succeeds without them, and a power loss brings
//!   the durable data back (no draw), as the simulated disk does.
//! - At a power loss [`FileData::restore`] turns a [`Fate`] into the writes that take
//!   the live file to what survives.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::fate::Fate;

/// Reads `len` bytes of the live file at `offset` (fewer at its end).
pub type ReadLive<'a> = dyn FnMut(u64, usize) -> io::Result<Vec<u8>> + 'a;

/// How to take a live file to what survives: set its length, then write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The surviving length in bytes.
    pub len_bytes: u64,
    /// (offset, bytes) to write after setting the length, in offset order.
    pub writes: Vec<(u64, Vec<u8>)>,
}

/// The durable state of one file, relative to its live data.
#[derive(Debug, Clone)]
pub struct FileData {
    block_bytes: u64,
    durable_bytes: u64,
    /// Block index to the durable bytes of that block (possibly short: zeros after).
    preimages: BTreeMap<u64, Vec<u8>>,
    /// Blocks changed since the last sync.
    pending: BTreeSet<u64>,
    /// The size changed since the last sync.
    size_pending: bool,
    /// A sync failed since the last power loss.
    writeback_lost: bool,
}

impl FileData {
    /// A file whose `len_bytes` of live data are all durable.
    pub fn durable(len_bytes: u64, block_bytes: u64) -> Self {
        Self {
            block_bytes: block_bytes.max(1),
            durable_bytes: len_bytes,
            preimages: BTreeMap::new(),
            pending: BTreeSet::new(),
            size_pending: false,
            writeback_lost: false,
        }
    }

    /// The durable length in bytes.
    pub fn durable_bytes(&self) -> u64 {
        self.durable_bytes
    }

    /// Whether the live data (`live_bytes` long) may differ from the durable data.
    pub fn is_dirty(&self, live_bytes: u64) -> bool {
        !self.preimages.is_empty() || self.durable_bytes != live_bytes
    }

    /// Whether a sync of this file failed since the last power loss.
    pub fn writeback_lost(&self) -> bool {
        self.writeback_lost
    }

    /// Takes the pre-image of `block` unless it has one; marks it changed.
    fn capture(&mut self, block: u64, read: &mut ReadLive<'_>) -> io::Result<()> {
        if !self.preimages.contains_key(&block) {
            let start = block * self.block_bytes;
            let bytes = if start < self.durable_bytes {
                let len = (self.durable_bytes - start).min(self.block_bytes);
                read(start, len as usize)?
            } else {
                Vec::new()
            };
            self.preimages.insert(block, bytes);
        }
        self.pending.insert(block);
        Ok(())
    }

    /// To be called before `len` bytes are written at `offset` to the live file,
    /// which is `live_bytes` long.
    pub fn before_write(
        &mut self,
        offset: u64,
        len: usize,
        live_bytes: u64,
        read: &mut ReadLive<'_>,
    ) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let end = offset + len as u64;
        for block in offset / self.block_bytes..=(end - 1) / self.block_bytes {
            self.capture(block, read)?;
        }
        if end > live_bytes {
            self.size_pending = true;
        }
        Ok(())
    }

    /// To be called before the live file, `live_bytes` long, is truncated or
    /// extended to `new_bytes`.
    pub fn before_set_len(
        &mut self,
        new_bytes: u64,
        live_bytes: u64,
        read: &mut ReadLive<'_>,
    ) -> io::Result<()> {
        if new_bytes == live_bytes {
            return Ok(());
        }
        let (low, high) = (new_bytes.min(live_bytes), new_bytes.max(live_bytes));
        // Only bytes below the durable size have durable contents to keep; past it,
        // the durable data reads as zeros whatever the live file holds.
        let high = high.min(self.durable_bytes);
        if low < high {
            for block in low / self.block_bytes..=(high - 1) / self.block_bytes {
                self.capture(block, read)?;
            }
        }
        self.size_pending = true;
        Ok(())
    }

    /// A successful fsync/fdatasync: what changed since the last sync is durable.
    pub fn synced(&mut self, live_bytes: u64) {
        for block in std::mem::take(&mut self.pending) {
            self.preimages.remove(&block);
        }
        if self.size_pending {
            self.durable_bytes = live_bytes;
            self.size_pending = false;
        }
    }

    /// A failed fsync/fdatasync: what changed since the last sync is dropped for
    /// good; no later sync writes it.
    pub fn sync_failed(&mut self) {
        self.pending.clear();
        self.size_pending = false;
        self.writeback_lost = true;
    }

    /// The durable bytes of `block` within `[start, end)` of the file, or `None`
    /// when they are the live bytes there. Without a failed sync, a block with no
    /// pre-image holds the durable bytes below the durable size and zeros past it
    /// (only a write puts data there, and a write takes a pre-image); after a failed
    /// sync a power loss takes [`Fate::Lost`], which needs the same only below the
    /// durable size.
    fn durable_block(&self, block: u64, end: u64) -> Option<Vec<u8>> {
        let start = block * self.block_bytes;
        let len = end.saturating_sub(start).min(self.block_bytes) as usize;
        let pre = self.preimages.get(&block)?;
        let keep = pre
            .len()
            .min(self.durable_bytes.saturating_sub(start) as usize);
        let mut bytes = pre[..keep.min(len)].to_vec();
        bytes.resize(len, 0);
        Some(bytes)
    }

    /// The writes that take the live file (`live_bytes` long) to what `fate` leaves.
    pub fn restore(&self, fate: &Fate, live_bytes: u64) -> Restore {
        match fate {
            Fate::Kept => Restore {
                len_bytes: live_bytes,
                writes: Vec::new(),
            },
            Fate::ZeroLength => Restore {
                len_bytes: 0,
                writes: Vec::new(),
            },
            Fate::Lost => Restore {
                len_bytes: self.durable_bytes,
                writes: self
                    .preimages
                    .keys()
                    .filter(|b| **b * self.block_bytes < self.durable_bytes)
                    .filter_map(|b| {
                        let bytes = self.durable_block(*b, self.durable_bytes)?;
                        Some((b * self.block_bytes, bytes))
                    })
                    .collect(),
            },
            Fate::Mixed { revert } => Restore {
                len_bytes: live_bytes,
                writes: revert
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| **r)
                    .filter_map(|(b, _)| {
                        let b = b as u64;
                        let bytes = self.durable_block(b, live_bytes)?;
                        Some((b * self.block_bytes, bytes))
                    })
                    .collect(),
            },
        }
    }

    /// After a power loss: the live data (`live_bytes` long, restored) is durable.
    pub fn settle(&mut self, live_bytes: u64) {
        *self = Self::durable(live_bytes, self.block_bytes);
    }
}
