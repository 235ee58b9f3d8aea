//! Which writes wrote each name. Without overwrites a name is one write's, and an
//! object or entry under it is that write's; with overwrites (`workload.overwrites`)
//! a name is written by its first write and every later write that takes it again,
//! and an object or entry under it is the write whose bytes (size and crc32c) it
//! holds. Payloads are drawn per write, so two writes' bytes differ but by chance.

use std::collections::BTreeMap;

use crate::ledger::{Ledger, Told, Write};
use crate::workload::Shape;

/// The writes of every name written more than once, by (host, first write).
pub(super) struct Names {
    /// Every write of each name written more than once, oldest first.
    groups: BTreeMap<(u32, u64), Vec<u64>>,
}

impl Names {
    /// The names of `ledger`'s writes, as `shape` draws them.
    pub(super) fn of(shape: &Shape, ledger: &Ledger) -> Self {
        let mut groups: BTreeMap<(u32, u64), Vec<u64>> = BTreeMap::new();
        if shape.overwrites > 0.0 {
            for (host, h) in ledger.hosts().iter().enumerate() {
                let host = host as u32;
                for seq in 0..h.writes.len() as u64 {
                    let first = shape.first_of_name(host, seq);
                    groups.entry((host, first)).or_default().push(seq);
                }
            }
            groups.retain(|_, seqs| seqs.len() > 1);
        }
        Self { groups }
    }

    /// Every write of the name first written by `(host, first)`, oldest first.
    pub(super) fn writes(&self, host: u32, first: u64) -> impl Iterator<Item = u64> + '_ {
        let group = self.groups.get(&(host, first));
        let once = group.is_none().then_some(first);
        group.into_iter().flatten().copied().chain(once)
    }

    /// The write of the name first written by `(host, first)` whose bytes have
    /// `size` and `crc32c`: the latest such; the first write when none has them
    /// (the caller then finds the bytes wrong).
    pub(super) fn holding(
        &self,
        ledger: &Ledger,
        host: u32,
        first: u64,
        size: u64,
        crc32c: u32,
    ) -> u64 {
        let Some(seqs) = self.groups.get(&(host, first)) else {
            return first;
        };
        seqs.iter()
            .rev()
            .copied()
            .find(|&seq| {
                ledger
                    .get(host, seq)
                    .is_some_and(|w| (u64::from(w.size), w.crc32c) == (size, crc32c))
            })
            .unwrap_or(first)
    }
}

/// Whether write `a` must have landed after `b`: `a` began after `b`'s caller was
/// answered (or its process died with it), so no order of the two that the callers
/// saw puts `b` last.
pub(super) fn began_after(a: &Write, b: &Write) -> bool {
    b.told != Told::InFlight && a.issued_ms > b.told_ms
}
