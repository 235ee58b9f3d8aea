//! `relay_reads_see_acknowledged_writes`: what reads, lists and deletes through
//! the relay got (`[relay] reads_per_write`, `lists_per_write`,
//! `deletes_per_write`), judged against what the callers were told and where each
//! write ended up.
//!
//! A write the relay acknowledged (stored or spooled) before a read was sent, and
//! that ends in the bucket or still pending in the relay's spool, is an object a
//! reader must see: in the bucket, or served from the spool until it is delivered.
//! So:
//!
//! - a read's bytes are the named write's (or the object another writer put there
//!   first), never other bytes;
//! - a read of such a write is never 404 (a failure, such as a 503 passed through
//!   from the store during an outage, is allowed: the client retries);
//! - a list of the host's prefix holds every such write, names only writes a
//!   producer issued, and gives each name once, in order across its pages.
//!
//! Writes set aside (dead-lettered, quarantined) or destroyed by the disk are never
//! delivered, so a reader may not find them. A write a `DELETE` was sent for is
//! not required to be found by a read or list answered after it was sent; once a
//! `DELETE` was answered 2xx, no later read or list finds it, and it is neither in
//! the bucket nor pending in a spool at the end (a spooled object deleted never
//! lands). A `DELETE` answered 404 for a write that must be seen is wrong too.

use super::*;
use crate::recorder::{DeleteAnswer, ReadAnswer, RelayDelete, RelayList, RelayRead};

/// The deletes through the relay, per write.
#[derive(Debug, Default)]
pub(super) struct Deletes {
    /// When the first `DELETE` of each write was sent.
    sent_ms: BTreeMap<(u32, u64), u32>,
    /// When the first `DELETE` of each write answered 2xx was answered.
    deleted_ms: BTreeMap<(u32, u64), u32>,
}

impl Deletes {
    pub(super) fn of(run: &RunOutput) -> Self {
        let mut deletes = Deletes::default();
        for d in &run.recorder.relay_deletes {
            let sent = deletes
                .sent_ms
                .entry((d.host, d.seq))
                .or_insert(d.issued_ms);
            *sent = (*sent).min(d.issued_ms);
            if d.answer == DeleteAnswer::Deleted {
                let at = deletes
                    .deleted_ms
                    .entry((d.host, d.seq))
                    .or_insert(d.answered_ms);
                *at = (*at).min(d.answered_ms);
            }
        }
        deletes
    }

    /// Whether a `DELETE` of write `(host, seq)` was sent at or before `at_ms`.
    pub(super) fn sent_by(&self, host: u32, seq: u64, at_ms: u32) -> bool {
        self.sent_ms
            .get(&(host, seq))
            .is_some_and(|&sent| sent <= at_ms)
    }

    /// Whether a `DELETE` of write `(host, seq)` was sent at all.
    pub(super) fn sent(&self, host: u32, seq: u64) -> bool {
        self.sent_ms.contains_key(&(host, seq))
    }

    /// Whether a `DELETE` of write `(host, seq)` was answered 2xx before `at_ms`.
    fn deleted_before(&self, host: u32, seq: u64, at_ms: u32) -> bool {
        self.deleted_ms
            .get(&(host, seq))
            .is_some_and(|&done| done < at_ms)
    }
}

/// What the reads and lists through the relay got, for the report and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadTally {
    /// Reads answered.
    pub reads: u64,
    /// Of those, served from the relay's spool.
    pub from_spool: u64,
    /// Of those, 404.
    pub not_found: u64,
    /// Of those, failed otherwise (a 503, no connection).
    pub failed: u64,
    /// Lists answered, every page.
    pub lists: u64,
    /// Lists with a failed page.
    pub lists_failed: u64,
    /// Names listed, over every list.
    pub names_listed: u64,
    /// Deletes answered.
    pub deletes: u64,
    /// Of those, answered 2xx.
    pub deleted: u64,
    /// Of those, failed (a 503, no connection, no answer).
    pub deletes_failed: u64,
}

/// The invariant, and the tally behind it; `None` when the scenario reads nothing
/// through a relay.
pub(super) fn relay_reads_see_acknowledged_writes(
    run: &RunOutput,
    found: &Found,
    others: &OtherWriters,
    deletes: &Deletes,
) -> Option<(Invariant, ReadTally)> {
    if !run.scenario.relay?.reads_through() {
        return None;
    }
    let judge = Judge {
        run,
        found,
        others,
        deletes,
        shape: Shape::of(&run.scenario),
    };
    let mut tally = ReadTally::default();
    let mut wrong = Vec::new();
    for read in &run.recorder.relay_reads {
        judge.read(read, &mut tally, &mut wrong);
    }
    for list in &run.recorder.relay_lists {
        judge.list(list, &mut tally, &mut wrong);
    }
    for delete in &run.recorder.relay_deletes {
        judge.delete(delete, &mut tally, &mut wrong);
    }
    let invariant = Invariant {
        name: "relay_reads_see_acknowledged_writes",
        statement: "Every read through the relay gets the named write's bytes, and every read or list sent after the relay acknowledged a write that ends in the bucket (or still in its spool) finds it: from the bucket, or from the spool until delivered; an object deleted through the relay is found by no later read or list and is gone at the end, from the bucket and the spool",
        status: Status::failed_if(!wrong.is_empty(), || {
            let count = wrong.len();
            wrong.truncate(10);
            format!(
                "{count} reads or lists went wrong (e.g. {})",
                wrong.join("; ")
            )
        }),
    };
    Some((invariant, tally))
}

struct Judge<'a> {
    run: &'a RunOutput,
    found: &'a Found,
    others: &'a OtherWriters,
    deletes: &'a Deletes,
    shape: Shape,
}

impl Judge<'_> {
    /// Whether write `(host, seq)` was acknowledged at or before `at_ms`, ends
    /// where a reader must find it (the bucket, or pending in a spool), and no
    /// `DELETE` of it was sent by `until_ms` (when the read or list was answered).
    fn must_be_seen(&self, host: u32, seq: u64, at_ms: u32, until_ms: u32) -> bool {
        !self.deletes.sent_by(host, seq, until_ms) && self.must_be_kept(host, seq, at_ms)
    }

    /// Whether write `(host, seq)` was acknowledged at or before `at_ms` and ends
    /// where a reader must find it (the bucket, or pending in a spool).
    fn must_be_kept(&self, host: u32, seq: u64, at_ms: u32) -> bool {
        let Some(w) = self.run.ledger.get(host, seq) else {
            return false;
        };
        let flags = self.found.0[host as usize][seq as usize];
        let ends_readable = flags & (IN_BUCKET | PENDING) != 0 && flags & OTHER_WRITERS == 0;
        w.told.acknowledged() && w.told_ms <= at_ms && !w.poison && ends_readable
    }

    fn read(&self, read: &RelayRead, tally: &mut ReadTally, wrong: &mut Vec<String>) {
        let Some(w) = self.run.ledger.get(read.host, read.seq) else {
            wrong.push(format!(
                "a read of write {} of host {} that was never issued",
                read.seq, read.host
            ));
            return;
        };
        let name = self.shape.name(read.host, read.seq, w.poison);
        let at = f64::from(read.issued_ms) / 1000.0;
        tally.reads += 1;
        match read.answer {
            ReadAnswer::Bytes {
                len,
                crc32c,
                from_spool,
            } => {
                tally.from_spool += u64::from(from_spool);
                let own = (u64::from(w.size), w.crc32c);
                let other = self.others.get(&(read.host, read.seq));
                if (len, crc32c) != own && other != Some(&(len, crc32c)) {
                    wrong.push(format!(
                        "{name}: read at {at:.3} s got {len} bytes that are not the write's {}",
                        w.size
                    ));
                }
                if (self.deletes).deleted_before(read.host, read.seq, read.issued_ms) {
                    wrong.push(format!(
                        "{name}: read at {at:.3} s got its bytes after its DELETE was answered"
                    ));
                }
            }
            ReadAnswer::NotFound => {
                tally.not_found += 1;
                if self.must_be_seen(read.host, read.seq, read.issued_ms, read.answered_ms) {
                    wrong.push(format!(
                        "{name}: read at {at:.3} s was 404, after the relay told its caller {} at {:.3} s",
                        w.told.as_str(),
                        f64::from(w.told_ms) / 1000.0
                    ));
                }
            }
            ReadAnswer::Failed => tally.failed += 1,
        }
    }

    fn list(&self, list: &RelayList, tally: &mut ReadTally, wrong: &mut Vec<String>) {
        tally.lists += 1;
        let Some(names) = &list.names else {
            tally.lists_failed += 1;
            return;
        };
        tally.names_listed += names.len() as u64;
        let at = f64::from(list.issued_ms) / 1000.0;
        if let Some(pair) = names.windows(2).find(|pair| pair[0] >= pair[1]) {
            wrong.push(format!(
                "the list of {}/ at {at:.3} s gave {:?} before {:?}",
                list.prefix, pair[0], pair[1]
            ));
        }
        let mut listed = std::collections::BTreeSet::new();
        for name in names {
            match write_named(&self.shape, name) {
                Some((host, seq, _))
                    if host == list.host && self.run.ledger.get(host, seq).is_some() =>
                {
                    if self.deletes.deleted_before(host, seq, list.issued_ms) {
                        wrong.push(format!(
                            "the list of {}/ at {at:.3} s gave {name:?} after its DELETE was answered",
                            list.prefix
                        ));
                    }
                    listed.insert(seq);
                }
                _ => wrong.push(format!(
                    "the list of {}/ at {at:.3} s gave {name:?}, which no write of host {} is named",
                    list.prefix, list.host
                )),
            }
        }
        let writes = self.run.ledger.hosts()[list.host as usize].writes.len() as u64;
        let missing = (0..writes)
            .filter(|&seq| !listed.contains(&seq))
            .find(|&seq| self.must_be_seen(list.host, seq, list.issued_ms, list.answered_ms));
        if let Some(seq) = missing {
            let w = self
                .run
                .ledger
                .get(list.host, seq)
                .expect("seq is within the ledger");
            wrong.push(format!(
                "the list of {}/ at {at:.3} s left out {}, told {} at {:.3} s",
                list.prefix,
                self.shape.name(list.host, seq, w.poison),
                w.told.as_str(),
                f64::from(w.told_ms) / 1000.0
            ));
        }
    }

    fn delete(&self, delete: &RelayDelete, tally: &mut ReadTally, wrong: &mut Vec<String>) {
        let (host, seq) = (delete.host, delete.seq);
        let Some(w) = self.run.ledger.get(host, seq) else {
            wrong.push(format!(
                "a DELETE of write {seq} of host {host} that was never issued"
            ));
            return;
        };
        let name = self.shape.name(host, seq, w.poison);
        let at = f64::from(delete.issued_ms) / 1000.0;
        tally.deletes += 1;
        match delete.answer {
            DeleteAnswer::Deleted => {
                tally.deleted += 1;
                let flags = self.found.0[host as usize][seq as usize];
                if flags & (IN_BUCKET | PENDING) != 0 {
                    let place = if flags & IN_BUCKET != 0 {
                        "in the bucket"
                    } else {
                        "in a spool"
                    };
                    wrong.push(format!(
                        "{name}: its DELETE at {at:.3} s was answered, yet it is {place} at the end"
                    ));
                }
            }
            DeleteAnswer::NotFound => {
                let earlier = (self.deletes.sent_ms.get(&(host, seq)))
                    .is_some_and(|&first| first < delete.issued_ms);
                if !earlier && self.must_be_kept(host, seq, delete.issued_ms) {
                    wrong.push(format!(
                        "{name}: its DELETE at {at:.3} s was 404, after the relay told its caller {}",
                        w.told.as_str()
                    ));
                }
            }
            DeleteAnswer::Failed => tally.deletes_failed += 1,
        }
    }
}
