//! The table of spooled objects: for each name, the entries the relay knows that
//! hold it, oldest first, each with the record its upload was answered with; and
//! the same entries by sequence number. Every change keeps the two the same
//! (checked in debug builds), so that a name's entries, its newest, and the entry
//! spooled first are each found in O(log n).
//!
//! A name has more than one entry when it was spooled again before the first was
//! delivered (an upload after a restart, before the earlier run's names were
//! learned): a read sees the newest, a `DELETE` takes every one back.

use std::collections::BTreeMap;

use fake_gcs::wire::ObjectRecord;

/// One entry the relay knows.
#[derive(Debug, Clone)]
pub(super) struct Acknowledged {
    pub(super) seq: u64,
    pub(super) record: ObjectRecord,
    /// Whether `record.md5` is the payload's: an entry an earlier run spooled is
    /// learned from its header first, its MD5 read later ([`super::recover`]).
    pub(super) digested: bool,
}

#[derive(Debug, Default)]
pub(super) struct Table {
    by_name: BTreeMap<String, Vec<Acknowledged>>,
    by_seq: BTreeMap<u64, String>,
    /// The entries whose MD5 is not read yet.
    undigested: std::collections::BTreeSet<u64>,
}

impl Table {
    /// Adds `acknowledged` among its name's entries, in sequence order.
    pub(super) fn insert(&mut self, acknowledged: Acknowledged) {
        let name = acknowledged.record.name.clone();
        if !acknowledged.digested {
            self.undigested.insert(acknowledged.seq);
        }
        let previous = self.by_seq.insert(acknowledged.seq, name.clone());
        debug_assert!(previous.is_none(), "entry {} known twice", acknowledged.seq);
        let entries = self.by_name.entry(name).or_default();
        let at = entries.partition_point(|known| known.seq < acknowledged.seq);
        entries.insert(at, acknowledged);
        self.check();
    }

    /// The newest entry of `name`: what a read sees.
    pub(super) fn newest(&self, name: &str) -> Option<&Acknowledged> {
        self.by_name.get(name)?.last()
    }

    /// Entry `seq`, if known.
    pub(super) fn get(&self, seq: u64) -> Option<&Acknowledged> {
        let name = self.by_seq.get(&seq)?;
        (self.by_name.get(name)?.iter()).find(|known| known.seq == seq)
    }

    /// Entry `seq`'s MD5, read from its payload.
    pub(super) fn digested(&mut self, seq: u64, md5: [u8; 16]) {
        let Some(name) = self.by_seq.get(&seq) else {
            return;
        };
        let entries = self.by_name.get_mut(name).expect("the indexes agree");
        if let Some(known) = entries.iter_mut().find(|known| known.seq == seq) {
            known.record.md5 = md5;
            known.digested = true;
            self.undigested.remove(&seq);
        }
    }

    /// Forgets entry `seq`.
    pub(super) fn forget(&mut self, seq: u64) {
        self.undigested.remove(&seq);
        if let Some(name) = self.by_seq.remove(&seq) {
            let entries = self.by_name.get_mut(&name).expect("the indexes agree");
            entries.retain(|known| known.seq != seq);
            if entries.is_empty() {
                self.by_name.remove(&name);
            }
        }
        self.check();
    }

    /// Forgets the entry spooled first: the drainer delivers in sequence order, so
    /// it is the likeliest to be gone.
    pub(super) fn forget_oldest(&mut self) {
        if let Some((&seq, _)) = self.by_seq.first_key_value() {
            self.forget(seq);
        }
    }

    /// Entries known.
    pub(super) fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.by_name.clear();
        self.by_seq.clear();
        self.undigested.clear();
    }

    /// The names from `start` on, each with its entries.
    pub(super) fn names_from(
        &self,
        start: std::ops::Bound<String>,
    ) -> impl Iterator<Item = (&String, &Vec<Acknowledged>)> {
        self.by_name
            .range::<String, _>((start, std::ops::Bound::Unbounded))
    }

    /// The oldest entry known that is not digested yet. O(log n) per entry
    /// skipped: the undigested are kept apart.
    pub(super) fn first_undigested(&self) -> Option<u64> {
        self.undigested.first().copied()
    }

    /// The two indexes hold the same entries (debug builds; O(1) but for a name's
    /// own entries, which are few).
    fn check(&self) {
        debug_assert!(
            self.by_name.len() <= self.by_seq.len(),
            "more names than entries"
        );
        debug_assert!(
            self.undigested.len() <= self.by_seq.len(),
            "undigested entries that are not known"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str, seq: u64) -> Acknowledged {
        let digests = fake_gcs::wire::Digests::of(name.as_bytes());
        Acknowledged {
            seq,
            record: ObjectRecord {
                name: name.into(),
                generation: seq as i64,
                size: name.len() as u64,
                crc32c: digests.crc32c,
                md5: digests.md5,
                created_unix_ms: seq,
                content_type: "text/plain".into(),
                attributes: None,
                component_count: None,
            },
            digested: true,
        }
    }

    /// What the table holds, by name: each name's sequence numbers.
    fn held(table: &Table) -> Vec<(String, Vec<u64>)> {
        (table.names_from(std::ops::Bound::Unbounded))
            .map(|(name, entries)| (name.clone(), entries.iter().map(|k| k.seq).collect()))
            .collect()
    }

    #[test]
    fn a_name_keeps_its_entries_in_order_and_reads_see_the_newest() {
        let mut table = Table::default();
        table.insert(known("a", 5));
        table.insert(known("b", 3));
        table.insert(known("a", 2));
        assert_eq!(table.newest("a").unwrap().seq, 5);
        assert_eq!(
            held(&table),
            [("a".into(), vec![2, 5]), ("b".into(), vec![3])]
        );
        table.forget_oldest();
        assert_eq!(held(&table), [("a".into(), vec![5]), ("b".into(), vec![3])]);
        table.forget(5);
        assert_eq!(held(&table), [("b".into(), vec![3])]);
        assert_eq!(table.len(), 1);
        table.forget(99);
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn a_digest_read_later_is_the_entrys_own() {
        let mut table = Table::default();
        let mut learned = known("a", 1);
        learned.digested = false;
        learned.record.md5 = [0; 16];
        table.insert(learned);
        table.insert(known("b", 2));
        assert_eq!(table.first_undigested(), Some(1));
        table.digested(1, [7; 16]);
        assert_eq!(table.first_undigested(), None);
        assert_eq!(table.get(1).unwrap().record.md5, [7; 16]);
    }
}
