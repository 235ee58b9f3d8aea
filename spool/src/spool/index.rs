//! The spool's index: every entry on disk, by sequence number, and the order in
//! which the drainer may take them.
//!
//! Promises:
//! - One name's entries are claimable one at a time, oldest first: an entry is
//!   [`Index::claimable`] only when no older entry of its name is still to be
//!   delivered (pending or claimed). A delivered entry ([`Index::delivered`]) lets
//!   the next of its name go at once, before its own file is removed.
//! - [`Index::holds_name`] is true while the spool may still write a name: an entry
//!   of it is indexed, or a delivered one's removal is not yet durable (a power loss
//!   would bring it back, and the drainer would send it again). A write of that name
//!   must then be spooled behind it, not sent past it.
//! - Every change is O(log n); nothing here touches the disk.
//!
//! Names are known by their key ([`crate::name::key`]): two names with one key are
//! ordered as one, which costs order, never correctness.

use std::collections::{BTreeMap, BTreeSet};

use super::Meta;

/// The entries and their drain order; see the module doc.
///
/// An unclaimed entry is in `entries` when it is the oldest undelivered entry of its
/// name, and in `waiting` otherwise; a claimed one (delivered or not) is in
/// `entries`. So a claim walks `entries` as it did before names had an order,
/// skipping only the claimed, and a name rewritten a million times during an outage
/// costs a claim nothing: its later entries wait apart. Memory per entry: its
/// `Meta` in one map and 16 bytes in `by_name`.
#[derive(Debug, Default)]
pub(super) struct Index {
    entries: BTreeMap<u64, Meta>,
    waiting: BTreeMap<u64, Meta>,
    /// (name key, sequence) of every entry not yet delivered: each name's order.
    by_name: BTreeSet<(u64, u64)>,
    /// Delivered entries still indexed (their removal not done), by name key.
    delivered: BTreeMap<u64, u32>,
    /// Removed delivered entries whose removal is not yet durable: by name key, the
    /// number ([`Index::removals_made`]) of the latest such removal.
    removed_unsynced: BTreeMap<u64, u64>,
    /// Removals of delivered entries so far.
    removals_made: u64,
    /// Claimed entries (delivered ones included); all in `entries`.
    claimed: u64,
    /// Bytes of every indexed entry's file.
    bytes: u64,
}

impl Index {
    /// An index of `entries` (unclaimed, or claimed and delivered as their flags
    /// say), with the names' order rebuilt from them. `by_name` is built in one go
    /// from a sorted list (full B-tree leaves), and only the entries that wait for
    /// an older one of their name leave the map they came in.
    pub(super) fn new(mut entries: BTreeMap<u64, Meta>) -> Self {
        let mut names = Vec::with_capacity(entries.len());
        let (mut bytes, mut claimed) = (0, 0);
        for (&seq, meta) in &entries {
            bytes += meta.file_bytes;
            claimed += u64::from(meta.claimed);
            if !meta.delivered {
                names.push((meta.name_key, seq));
            }
        }
        names.sort_unstable();
        let mut waiting = BTreeMap::new();
        for pair in names.windows(2) {
            let ((key, _), (next_key, seq)) = (pair[0], pair[1]);
            if key == next_key && !entries[&seq].claimed {
                let meta = entries.remove(&seq).expect("listed from the entries");
                waiting.insert(seq, meta);
            }
        }
        let mut delivered = BTreeMap::new();
        for meta in entries.values().filter(|m| m.delivered) {
            *delivered.entry(meta.name_key).or_default() += 1;
        }
        Index {
            entries,
            waiting,
            by_name: BTreeSet::from_iter(names),
            delivered,
            claimed,
            bytes,
            ..Index::default()
        }
    }

    /// An index of `entries` (as [`Index::new`]) that keeps what this one knows of
    /// removals not yet durable: a spool reopening itself in place after a failed
    /// directory sync cannot know which of them the disk kept.
    pub(super) fn rebuilt(&self, entries: BTreeMap<u64, Meta>) -> Self {
        Index {
            removed_unsynced: self.removed_unsynced.clone(),
            removals_made: self.removals_made,
            ..Index::new(entries)
        }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len() + self.waiting.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.waiting.is_empty()
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(super) fn claimed(&self) -> u64 {
        self.claimed
    }

    pub(super) fn get(&self, seq: u64) -> Option<&Meta> {
        self.entries.get(&seq).or_else(|| self.waiting.get(&seq))
    }

    /// The entry's counters (`read_failures`, `withdrawn`). Its claim, delivery and
    /// name are changed through the index's own calls, which keep the order.
    pub(super) fn get_mut(&mut self, seq: u64) -> Option<&mut Meta> {
        match self.entries.get_mut(&seq) {
            Some(meta) => Some(meta),
            None => self.waiting.get_mut(&seq),
        }
    }

    pub(super) fn contains(&self, seq: u64) -> bool {
        self.entries.contains_key(&seq) || self.waiting.contains_key(&seq)
    }

    /// Every sequence number, oldest first.
    pub(super) fn seqs(&self) -> Vec<u64> {
        let mut seqs: Vec<u64> = (self.entries.keys().chain(self.waiting.keys()))
            .copied()
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// The claimed entries (a waiting entry is never claimed).
    pub(super) fn claimed_entries(&self) -> impl Iterator<Item = (u64, &Meta)> {
        (self.entries.iter())
            .filter(|(_, meta)| meta.claimed)
            .map(|(&seq, meta)| (seq, meta))
    }

    pub(super) fn last_seq(&self) -> Option<u64> {
        let last = |map: &BTreeMap<u64, Meta>| map.last_key_value().map(|(&seq, _)| seq);
        last(&self.entries).max(last(&self.waiting))
    }

    pub(super) fn oldest(&self) -> Option<&Meta> {
        let first = |map: &BTreeMap<u64, Meta>| map.first_key_value().map(|(&seq, _)| seq);
        let seq = match (first(&self.entries), first(&self.waiting)) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        self.get(seq)
    }

    /// The entries a claim may take now, oldest first.
    pub(super) fn claimable(&self) -> impl Iterator<Item = (u64, &Meta)> {
        (self.entries.iter())
            .filter(|(_, meta)| !meta.claimed)
            .map(|(&seq, meta)| (seq, meta))
    }

    /// How many entries a claim may take now.
    pub(super) fn claimable_len(&self) -> u64 {
        self.entries.len() as u64 - self.claimed
    }

    /// Whether the spool may still write the name whose key is `name_key`; see the
    /// module doc.
    pub(super) fn holds_name(&self, name_key: u64) -> bool {
        self.first_of_name(name_key).is_some()
            || self.delivered.contains_key(&name_key)
            || self.removed_unsynced.contains_key(&name_key)
    }

    /// Adds an unclaimed entry: a new put (the newest of its name), or one moved
    /// back from a set-aside directory (in its old place in its name's order).
    pub(super) fn insert(&mut self, seq: u64, meta: Meta) {
        debug_assert!(
            !meta.claimed && !meta.delivered,
            "inserted entry {seq} in use"
        );
        debug_assert!(!self.contains(seq), "sequence {seq} indexed twice");
        self.bytes += meta.file_bytes;
        let first = self.first_of_name(meta.name_key);
        self.by_name.insert((meta.name_key, seq));
        match first {
            None => {
                self.entries.insert(seq, meta);
            }
            Some(first) if seq < first => {
                // Older than the name's first (a requeued entry): that one waits
                // now, unless a worker has it already.
                self.entries.insert(seq, meta);
                self.wait(first);
            }
            Some(_) => {
                self.waiting.insert(seq, meta);
            }
        }
    }

    /// Marks entry `seq` claimed, if it is indexed and unclaimed. Out of order
    /// (the entry taken back by its seq, not by the drainer) it may not be first
    /// of its name: the next of its name still waits for it.
    pub(super) fn claim(&mut self, seq: u64) -> Option<&Meta> {
        if let Some(meta) = self.waiting.remove(&seq) {
            self.entries.insert(seq, meta);
        }
        let meta = self.entries.get_mut(&seq).filter(|meta| !meta.claimed)?;
        meta.claimed = true;
        self.claimed += 1;
        Some(meta)
    }

    /// Gives a claimed, undelivered entry back to the queue.
    pub(super) fn unclaim(&mut self, seq: u64) {
        let Some(meta) = self.entries.get_mut(&seq).filter(|meta| meta.claimed) else {
            return;
        };
        debug_assert!(!meta.delivered, "a delivered entry {seq} given back");
        meta.claimed = false;
        let key = meta.name_key;
        self.claimed -= 1;
        if self.first_of_name(key) != Some(seq) {
            self.wait(seq);
        }
    }

    /// Entry `seq` (claimed) is in the store: the next of its name may go, and the
    /// name stays held until the entry's removal is durable. True when that made
    /// another entry claimable.
    pub(super) fn delivered(&mut self, seq: u64) -> bool {
        let Some(meta) = self.entries.get_mut(&seq) else {
            return false;
        };
        debug_assert!(meta.claimed, "delivered an unclaimed entry {seq}");
        if meta.delivered {
            return false;
        }
        meta.delivered = true;
        let key = meta.name_key;
        *self.delivered.entry(key).or_default() += 1;
        self.leave_order(key, seq)
    }

    /// Forgets entry `seq`: its file is removed or moved out of `entries/`.
    pub(super) fn remove(&mut self, seq: u64) -> Option<Meta> {
        let meta = match self.entries.remove(&seq) {
            Some(meta) => meta,
            None => self.waiting.remove(&seq)?,
        };
        self.bytes -= meta.file_bytes;
        self.claimed -= u64::from(meta.claimed);
        if meta.delivered {
            decrement(&mut self.delivered, meta.name_key);
            self.removals_made += 1;
            self.removed_unsynced
                .insert(meta.name_key, self.removals_made);
        } else {
            self.leave_order(meta.name_key, seq);
        }
        Some(meta)
    }

    /// How many delivered entries have been removed so far: read before a sync of
    /// `entries/` starts, and given to [`Index::removals_synced`] once it succeeded.
    pub(super) fn removals_made(&self) -> u64 {
        self.removals_made
    }

    /// The removals up to number `upto` ([`Index::removals_made`]) are durable.
    pub(super) fn removals_synced(&mut self, upto: u64) {
        self.removed_unsynced.retain(|_, latest| *latest > upto);
    }

    /// Takes `seq` out of its name's order and lets the next of the name be
    /// claimed: true when there is one to claim.
    fn leave_order(&mut self, key: u64, seq: u64) -> bool {
        let was_first = self.first_of_name(key) == Some(seq);
        self.by_name.remove(&(key, seq));
        if !was_first {
            return false;
        }
        let Some(next) = self.first_of_name(key) else {
            return false;
        };
        match self.waiting.remove(&next) {
            Some(meta) => {
                self.entries.insert(next, meta);
                true
            }
            // Claimed already (taken back out of order).
            None => false,
        }
    }

    /// Moves unclaimed entry `seq` from `entries` to `waiting`.
    fn wait(&mut self, seq: u64) {
        if let Some(meta) = self.entries.get(&seq)
            && !meta.claimed
        {
            let meta = self.entries.remove(&seq).expect("just found");
            self.waiting.insert(seq, meta);
        }
    }

    /// The oldest undelivered entry of the name `key`.
    fn first_of_name(&self, key: u64) -> Option<u64> {
        (self.by_name.range((key, 0)..=(key, u64::MAX)))
            .next()
            .map(|&(_, seq)| seq)
    }

    /// The index's own invariants, over every entry (debug builds; O(n log n)).
    pub(super) fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let all = || self.entries.iter().chain(self.waiting.iter());
        let (bytes, claimed) = all().fold((0u64, 0u64), |(b, c), (_, m)| {
            (b + m.file_bytes, c + u64::from(m.claimed))
        });
        debug_assert_eq!(self.bytes, bytes, "bytes disagree with the index");
        debug_assert_eq!(self.claimed, claimed, "claims disagree with the index");
        let undelivered = all().filter(|(_, m)| !m.delivered).count();
        debug_assert_eq!(self.by_name.len(), undelivered, "names disagree");
        for &(key, seq) in &self.by_name {
            debug_assert_eq!(self.get(seq).map(|m| m.name_key), Some(key));
        }
        for (&seq, meta) in &self.waiting {
            debug_assert!(!meta.claimed, "waiting entry {seq} claimed");
            debug_assert_ne!(
                self.first_of_name(meta.name_key),
                Some(seq),
                "first {seq} waits"
            );
        }
        for (&seq, meta) in &self.entries {
            debug_assert!(!self.waiting.contains_key(&seq), "{seq} in both maps");
            debug_assert!(
                meta.claimed || self.first_of_name(meta.name_key) == Some(seq),
                "entry {seq} claimable but not first of its name"
            );
        }
    }
}

/// One fewer under `key`; the key goes at zero.
fn decrement(counts: &mut BTreeMap<u64, u32>, key: u64) {
    if let Some(count) = counts.get_mut(&key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name_key: u64) -> Meta {
        Meta {
            file_bytes: 10,
            created_unix_ms: 0,
            name_key,
            naming: super::super::Naming::Keyed,
            claimed: false,
            delivered: false,
            read_failures: 0,
            withdrawn: false,
        }
    }

    fn claimable(index: &Index) -> Vec<u64> {
        index.claimable().map(|(seq, _)| seq).collect()
    }

    #[test]
    fn one_names_entries_are_claimable_one_at_a_time_oldest_first() {
        let mut index = Index::default();
        for (seq, key) in [(1, 7), (2, 8), (3, 7), (4, 7)] {
            index.insert(seq, meta(key));
        }
        index.check();
        assert_eq!(claimable(&index), [1, 2]);
        index.claim(1);
        assert_eq!(claimable(&index), [2]);
        // Given back, it is first again; delivered, the next of its name goes.
        index.unclaim(1);
        assert_eq!(claimable(&index), [1, 2]);
        index.claim(1);
        index.delivered(1);
        index.check();
        assert_eq!(claimable(&index), [2, 3]);
        assert!(index.holds_name(7));
        index.claim(3);
        index.delivered(3);
        assert_eq!(claimable(&index), [2, 4]);
        index.remove(1);
        index.remove(3);
        index.check();
        index.claim(4);
        index.delivered(4);
        index.remove(4);
        // Removed but not durably: the name is still held, until a sync that
        // started after the removal succeeds.
        assert!(index.holds_name(7));
        index.removals_synced(index.removals_made() - 1);
        assert!(index.holds_name(7));
        index.removals_synced(index.removals_made());
        assert!(!index.holds_name(7));
        assert!(index.holds_name(8));
        index.check();
    }

    #[test]
    fn an_entry_taken_out_of_order_still_holds_the_next_of_its_name() {
        let mut index = Index::default();
        for (seq, key) in [(1, 7), (2, 7)] {
            index.insert(seq, meta(key));
        }
        // The second claimed by its seq (a take-back): the first is still first.
        assert!(index.claim(2).is_some());
        assert_eq!(claimable(&index), [1]);
        index.remove(2);
        assert_eq!(claimable(&index), [1]);
        // The first taken out of order while nothing else waits.
        index.claim(1);
        index.remove(1);
        assert!(claimable(&index).is_empty());
        assert!(
            !index.holds_name(7),
            "an undelivered entry removed releases it"
        );
        index.check();
    }

    #[test]
    fn a_requeued_older_entry_goes_before_the_first_of_its_name() {
        let mut index = Index::default();
        index.insert(5, meta(7));
        index.insert(2, meta(7));
        index.check();
        assert_eq!(claimable(&index), [2]);
    }

    #[test]
    fn rebuilt_from_entries_it_keeps_claims_and_deliveries() {
        let mut entries = BTreeMap::new();
        let mut delivered = meta(7);
        (delivered.claimed, delivered.delivered) = (true, true);
        entries.insert(1, delivered);
        entries.insert(2, meta(7));
        let mut claimed = meta(8);
        claimed.claimed = true;
        entries.insert(3, claimed);
        entries.insert(4, meta(8));
        let index = Index::new(entries);
        index.check();
        assert_eq!(claimable(&index), [2]);
        assert_eq!((index.claimed(), index.bytes()), (2, 40));
    }
}
