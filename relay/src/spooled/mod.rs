//! Read-your-writes for objects still in the spool: an object the relay answered
//! `spooled` is served from its spool entry (its JSON resource, its bytes with one
//! `Range`) by a metadata or media `GET` through the relay, until the drainer has
//! delivered it; after that the `GET` passes through to the upstream, which has it.
//!
//! What it owns: [`SpooledObjects`], the names the relay acknowledged as spooled in
//! this run, each with the answer's record and its entry's sequence number. It
//! promises:
//!
//! - An object is served from the spool only while its entry is in the spool's
//!   index ([`Spool::entry_file`]: no listing of `entries/`, whose cost grows with
//!   the backlog); one delivered (or set aside) is forgotten at its next lookup, and
//!   the request passes through.
//! - The bytes stream from the entry in pieces of at most 1 MiB. An entry the
//!   drainer removes while it is read ends the answer early (the client's retry
//!   reads it from the upstream).
//! - Objects spooled by an earlier run on the same directory (before a crash, a
//!   power loss, a restart) are known too, learned in two steps (`recover.rs`):
//!   each entry's header (one read of a few KiB: name, size, crc32c, attributes)
//!   before the first read, list or delete that asks the table is answered, so a
//!   reader sees them as this run's own without a whole read of the backlog first;
//!   then each payload's MD5, in the background, or first by the request that
//!   needs it ([`SpooledObjects::digested`]). Uploads never wait for either: until
//!   the headers are read, a second upload of a name an earlier run spooled is
//!   written as usual, and the table then holds both entries (a read sees the
//!   newest, a `DELETE` takes both back; with other bytes, whichever copy reaches
//!   the bucket second is set aside as a conflict). An entry that cannot be read is
//!   logged and left to the drainer (its object is then 404 until delivered).
//!   Their generation and creation time are the entry's creation time: the first
//!   answer's are lost with the process.
//! - A `DELETE` is evaluated against a spooled object's generation and
//!   metageneration ([`Found::deleting`]). Lists show it (`listing.rs`, which
//!   walks the names a page covers with [`SpooledObjects::walk`], O(log n) each).
//! - At most the spool's `max_files` names are kept: past it, the one spooled first
//!   is forgotten (the drainer delivers in sequence order), in O(log n).
//! - Only a relay that passes reads through ([`crate::PassThrough`] on) keeps them.
//! - A second upload of a name still spooled is answered as the bucket will answer
//!   it once the first is delivered ([`Found::holds`]): 200 for the same bytes, 412
//!   for others; it is never written itself. Uploads of one name finish one at a
//!   time ([`SpooledObjects::finishing`]), so two that race both see the first.

mod deletes;
mod recover;
mod table;

pub(crate) use deletes::{Copy, PendingDeletes};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use fake_gcs::wire::{Api, Digests, ObjectRecord, Reply, header, resolve_range};
use http_body_util::BodyExt as _;
use spool::Spool;

use self::recover::PIECE_BYTES;
use self::table::{Acknowledged, Table};
use crate::answer::{OUTCOME_HEADER, OUTCOME_SPOOLED};
use crate::passthrough::{BoxError, ResponseBody, whole};

/// Objects acknowledged as spooled in this run, by name.
#[derive(Debug, Default)]
pub(crate) struct SpooledObjects {
    table: Mutex<Table>,
    /// The names whose uploads are finishing, each with its turn: held while an
    /// upload is checked against the spooled names and made safe.
    finishing: Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// An upload's turn to finish under its name; the next waits until it is dropped.
pub(crate) struct Finishing<'a> {
    objects: &'a SpooledObjects,
    name: String,
    turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        let mut finishing = (self.objects.finishing.lock()).unwrap_or_else(|e| e.into_inner());
        self.turn = None;
        // Only the table's own reference left: nobody holds or waits for this name.
        if finishing
            .get(&self.name)
            .is_some_and(|turn| Arc::strong_count(turn) == 1)
        {
            finishing.remove(&self.name);
        }
    }
}

/// What [`SpooledObjects::walk`] does after a name.
pub(crate) enum Walk {
    /// Go on with the next name.
    Next,
    /// Go on with the first name that does not start with this prefix.
    Past(String),
    /// Stop.
    Stop,
}

/// A spooled object found: its record, and where its bytes are.
pub(crate) struct Found {
    record: ObjectRecord,
    seq: u64,
    /// Whether `record.md5` is known ([`SpooledObjects::digested`] reads it).
    digested: bool,
    entry: PathBuf,
    /// Where the payload starts in the entry file.
    offset: u64,
}

/// An object a walk visits: the newest entry of its name.
pub(crate) struct Visited<'a> {
    pub(crate) record: &'a ObjectRecord,
    pub(crate) seq: u64,
    /// Whether `record.md5` is known; [`SpooledObjects::digest`] reads it.
    pub(crate) digested: bool,
}

impl SpooledObjects {
    /// Waits for the turn of an upload named `name` to finish: one at a time per
    /// name, so that a second upload sees the first one spooled.
    pub(crate) async fn finishing(&self, name: &str) -> Finishing<'_> {
        let turn = {
            let mut finishing = self.finishing.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(finishing.entry(name.to_owned()).or_default())
        };
        let turn = turn.lock_owned().await;
        Finishing {
            objects: self,
            name: name.to_owned(),
            turn: Some(turn),
        }
    }

    /// How many names have an upload finishing or waiting to (for tests).
    #[cfg(test)]
    pub(crate) fn finishing_names(&self) -> usize {
        self.finishing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers that `record` was answered `spooled` as entry `seq`.
    pub(crate) fn acknowledged(&self, spool: &Spool, record: &ObjectRecord, seq: u64) {
        let mut table = self.table();
        if table.len() as u64 >= spool.config().max_files {
            table.forget_oldest();
        }
        let record = record.clone();
        let digested = true;
        table.insert(Acknowledged {
            seq,
            record,
            digested,
        });
    }

    /// The spooled object `name` (its newest entry), if the relay acknowledged it
    /// and its entry is still in the spool. Its MD5 may not be known yet
    /// ([`SpooledObjects::digested`]).
    pub(crate) fn find(&self, spool: &Spool, name: &str) -> Option<Found> {
        loop {
            let known = self.table().newest(name)?.clone();
            let found = spool.entry_file(known.seq).and_then(|(entry, bytes)| {
                let offset = bytes.checked_sub(known.record.size)?;
                Some(Found {
                    record: known.record.clone(),
                    seq: known.seq,
                    digested: known.digested,
                    entry,
                    offset,
                })
            });
            match found {
                Some(found) => return Some(found),
                // Delivered or set aside: an older entry of the name may remain.
                None => self.table().forget(known.seq),
            }
        }
    }

    /// `found` with its MD5, read from its entry when it is not known yet (an
    /// earlier run's entry); `None` when the entry is gone or cannot be read
    /// (logged: the object is then not served from the spool).
    pub(crate) async fn digested(&self, spool: &Spool, mut found: Found) -> Option<Found> {
        if found.digested {
            return Some(found);
        }
        found.record.md5 = self.digest(spool, found.seq).await?;
        found.digested = true;
        Some(found)
    }

    /// Entry `seq`'s MD5: known, or read from its payload (and kept).
    pub(crate) async fn digest(&self, spool: &Spool, seq: u64) -> Option<[u8; 16]> {
        let known = self.table().get(seq)?.clone();
        if known.digested {
            return Some(known.record.md5);
        }
        let (size, crc32c) = (known.record.size, known.record.crc32c);
        match recover::digest(spool, seq, size, crc32c).await {
            Ok(Some(md5)) => {
                self.table().digested(seq, md5);
                Some(md5)
            }
            Ok(None) => {
                self.table().forget(seq);
                None
            }
            Err(e) => {
                tracing::warn!(
                    seq,
                    error = %e,
                    "a spooled entry's payload could not be read back: its object is not \
                     served from the spool; the drainer checks it before delivering it"
                );
                self.table().forget(seq);
                None
            }
        }
    }

    /// What each entry the relay knows of `name` holds: the copies a `DELETE` of it
    /// may leave upstream (an upload's first try, or a delivery attempt, that
    /// landed while its answer was lost).
    pub(crate) fn copies(&self, name: &str) -> Vec<Copy> {
        let table = self.table();
        let entries = table.names_from(std::ops::Bound::Included(name.to_string()));
        (entries.take_while(|(known, _)| *known == name))
            .flat_map(|(_, entries)| entries.iter())
            .map(|known| Copy {
                size: known.record.size,
                crc32c: known.record.crc32c,
            })
            .collect()
    }

    /// Whether any object may still be spooled: none is known, or the spool holds
    /// no entry (then every name known is forgotten at once). O(log n).
    pub(crate) fn any(&self, spool: &Spool) -> bool {
        let mut table = self.table();
        if !table.is_empty() && spool.stats().files == 0 {
            table.clear();
        }
        !table.is_empty()
    }

    /// Visits the objects still spooled in name order from `from` (inclusive),
    /// each with its record, as `visit` directs: the next name, the first name past
    /// a prefix, or stop. Names whose entries have left the spool are skipped and
    /// forgotten. O(log n) per name visited and per prefix skipped; the table is
    /// locked meanwhile (no await).
    pub(crate) fn walk(
        &self,
        spool: &Spool,
        from: &str,
        mut visit: impl FnMut(Visited<'_>) -> Walk,
    ) {
        use std::ops::Bound;
        let mut table = self.table();
        let mut gone = Vec::new();
        let mut start = Bound::Included(from.to_string());
        'walking: loop {
            for (name, entries) in table.names_from(start.clone()) {
                // The newest entry still in the spool is the name's object.
                let mut newest = None;
                for known in entries.iter().rev() {
                    match spool.entry_file(known.seq) {
                        Some(_) => {
                            newest = Some(known);
                            break;
                        }
                        None => gone.push(known.seq),
                    }
                }
                let Some(known) = newest else {
                    continue;
                };
                let visited = Visited {
                    record: &known.record,
                    seq: known.seq,
                    digested: known.digested,
                };
                match visit(visited) {
                    Walk::Next => {}
                    Walk::Stop => break 'walking,
                    Walk::Past(prefix) => {
                        start = match crate::listing::successor(&prefix) {
                            Some(next) => Bound::Included(next),
                            None => Bound::Excluded(name.clone()),
                        };
                        continue 'walking;
                    }
                }
            }
            break;
        }
        for seq in gone {
            table.forget(seq);
        }
    }
}

impl SpooledObjects {
    /// Takes `name` back out of the spool (a `DELETE` of it): its entry is claimed
    /// and removed (unlinked, `entries/` synced before this returns), so it is
    /// never delivered, even after a power loss.
    /// [`TakenBack::Withdrawn`] when a drainer holds the entry: the caller waits
    /// until it has left the spool.
    /// A name with several entries is taken back one entry at a time, the newest
    /// first: the caller asks again until [`TakenBack::NotSpooled`].
    pub(crate) async fn take_back(&self, spool: &Spool, name: &str) -> TakenBack {
        let Some(seq) = self.seq_of(name) else {
            return TakenBack::NotSpooled;
        };
        let Some(claim) = spool.claim_entry(seq) else {
            return match self.find(spool, name) {
                Some(_) if spool.withdraw(seq) => TakenBack::Withdrawn,
                Some(_) => TakenBack::Delivering,
                None => TakenBack::NotSpooled,
            };
        };
        // Durable before the answer: after a power loss it must not come back.
        match spool.remove(claim).await {
            Ok(()) => {
                self.forget(seq);
                match spool.sync_removals().await {
                    Ok(()) => TakenBack::Removed,
                    Err(e) => TakenBack::Failed(e),
                }
            }
            Err(e) => TakenBack::Failed(e),
        }
    }

    fn seq_of(&self, name: &str) -> Option<u64> {
        self.table().newest(name).map(|known| known.seq)
    }

    fn forget(&self, seq: u64) {
        self.table().forget(seq);
    }
}

impl SpooledObjects {
    /// Learns the objects of entries `seqs` (spooled by earlier runs on this
    /// directory) from their headers, one read each ([`recover::head`]), their MD5
    /// not read yet ([`SpooledObjects::digest_all`]). A name this run has spooled
    /// since keeps both: reads see the newest, a `DELETE` takes both back. Returns
    /// how many it learned.
    pub(crate) async fn recover(&self, spool: &Spool, seqs: &[u64]) -> usize {
        use futures::StreamExt as _;
        let mut learned = 0;
        // Several reads at once: a cold disk answers small random reads far faster
        // in parallel than one after another (100,000 entries of 1 KiB: 15 s one at
        // a time; BENCHMARKS.md).
        let heads = futures::stream::iter(seqs.iter().copied())
            .map(|seq| async move { (seq, recover::head(spool, seq).await) })
            .buffered(recover::HEADS_AT_ONCE);
        tokio::pin!(heads);
        while let Some((seq, head)) = heads.next().await {
            let record = match head {
                Ok(Some(record)) => record,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(
                        seq,
                        error = %e,
                        "a spooled entry's header could not be read back: its object is not \
                         visible through the relay until the drainer delivers it"
                    );
                    continue;
                }
            };
            let mut table = self.table();
            if table.len() as u64 >= spool.config().max_files {
                break;
            }
            if table.get(seq).is_none() {
                let digested = false;
                table.insert(Acknowledged {
                    seq,
                    record,
                    digested,
                });
                learned += 1;
            }
        }
        learned
    }

    /// Reads the MD5 of the oldest entry learned from its header alone (one a
    /// request needed first is read already); `None` when there is none left.
    pub(crate) async fn digest_next(&self, spool: &Spool) -> Option<()> {
        let seq = self.table().first_undigested()?;
        let _ = self.digest(spool, seq).await;
        Some(())
    }
}

/// What [`SpooledObjects::take_back`] did.
#[derive(Debug)]
pub(crate) enum TakenBack {
    /// The entry is removed: it will never be delivered.
    Removed,
    /// The relay holds no such entry (never spooled, or delivered).
    NotSpooled,
    /// A drainer holds the entry (delivering it, or retrying during an outage):
    /// it is withdrawn ([`Spool::withdraw`]), and the drainer removes it at its
    /// next attempt, or has it land if an attempt was under way.
    Withdrawn,
    /// The entry could not be claimed nor withdrawn now (the spool is reopening,
    /// or its holder just let it go): ask again.
    Delivering,
    /// The entry could not be removed; it stays in the spool.
    Failed(std::io::Error),
}

/// Which object a `DELETE` of a spooled name is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deleting {
    /// The spooled object, its conditions holding: it is taken back.
    Spooled,
    /// Another generation than the spooled object's (`generation=`): the request
    /// passes through, and the spooled object stays.
    OtherGeneration,
}

impl Found {
    /// What a `DELETE` with `query` and `headers` does to this spooled object, as
    /// the bucket will judge it once the object is delivered: its generation (the
    /// relay's) and metageneration (1) against `generation=`, `ifGenerationMatch`
    /// (or `x-goog-if-generation-match`), `ifGenerationNotMatch`,
    /// `ifMetagenerationMatch` (or `x-goog-if-metageneration-match`) and
    /// `ifMetagenerationNotMatch`; 412 when a condition does not hold, 400 when one
    /// is not an integer.
    pub(crate) fn deleting(
        &self,
        query: &fake_gcs::wire::Query,
        headers: &http::HeaderMap,
    ) -> Result<Deleting, fake_gcs::wire::Rejection> {
        use fake_gcs::wire::{Conditions, Rejection};
        let integer = |name: &str, value: &str| {
            value.trim().parse::<i64>().map_err(|_| {
                Rejection::invalid(format!(
                    "Invalid argument: {name}={value:?} is not an integer."
                ))
            })
        };
        if let Some(generation) = query.get("generation")
            && integer("generation", generation)? != self.record.generation
        {
            return Ok(Deleting::OtherGeneration);
        }
        let mut conditions = Conditions::parse(query, "if")?;
        for (field, name) in [
            (
                &mut conditions.if_generation_match,
                "x-goog-if-generation-match",
            ),
            (
                &mut conditions.if_metageneration_match,
                "x-goog-if-metageneration-match",
            ),
        ] {
            if field.is_none()
                && let Some(value) = header(headers, name)
            {
                *field = Some(integer(name, value)?);
            }
        }
        match conditions.hold(Some((self.record.generation, 1))) {
            true => Ok(Deleting::Spooled),
            false => Err(Rejection::PreconditionFailed),
        }
    }

    /// Whether the spooled object's bytes are `size` bytes with these digests: a
    /// second upload of its name with them is the bucket's 200, with others its 412.
    pub(crate) fn holds(&self, size: u64, digests: &Digests) -> bool {
        let record = &self.record;
        record.size == size && record.crc32c == digests.crc32c && record.md5 == digests.md5
    }

    /// The answer to an upload of the same bytes: the spooled object's own, as the
    /// first upload was answered (its generation, its time), marked `spooled`.
    pub(crate) fn uploaded(&self, api: Api, base: &str, bucket: &str) -> Reply {
        crate::answer::written(api, base, bucket, &self.record)
            .header(OUTCOME_HEADER, OUTCOME_SPOOLED)
    }

    /// The JSON resource of the object, marked `x-spool-outcome: spooled`.
    pub(crate) fn resource(&self, base: &str, bucket: &str) -> Reply {
        Reply::json(200, &crate::answer::resource(base, bucket, &self.record))
            .header(OUTCOME_HEADER, OUTCOME_SPOOLED)
    }

    /// The object's bytes (or the one range `headers` ask for), streamed from the
    /// entry; the reply carries the headers, the body is the stream.
    pub(crate) fn media(
        self,
        spool: &Spool,
        api: Api,
        headers: &http::HeaderMap,
    ) -> http::Response<ResponseBody> {
        let size = self.record.size;
        let mut reply = Reply::new(200)
            .object_headers(&self.record, self.record.etag(api))
            .attribute_headers(&self.record)
            .header("accept-ranges", "bytes")
            .header(OUTCOME_HEADER, OUTCOME_SPOOLED);
        let (mut first, mut end) = (0, size);
        if let Some(asked) = header(headers, "range") {
            let Some((from, last)) = resolve_range(asked, size) else {
                let refused = Reply::new(416).header("content-range", format!("bytes */{size}"));
                return refused.into_response(whole(Bytes::new()));
            };
            reply.status = 206;
            reply = reply.header("content-range", format!("bytes {from}-{last}/{size}"));
            (first, end) = (from, last + 1);
        }
        reply.head_len = Some(end - first);
        let pieces = Pieces {
            spool: spool.clone(),
            entry: self.entry,
            next: self.offset + first,
            end: self.offset + end,
        };
        reply.into_response(pieces.body())
    }
}

/// The rest of an entry's payload to send, read a piece at a time.
struct Pieces {
    spool: Spool,
    entry: PathBuf,
    next: u64,
    end: u64,
}

impl Pieces {
    fn body(self) -> ResponseBody {
        let stream = futures::stream::try_unfold(self, |mut at| async move {
            if at.next >= at.end {
                return Ok(None);
            }
            let len = (at.end - at.next).min(PIECE_BYTES);
            let disk = at.spool.disk();
            let piece = disk.read_range(&at.entry, at.next, len).await?;
            if piece.is_empty() {
                let gone = std::io::Error::other("the spool entry ended early");
                return Err(gone);
            }
            at.next += piece.len() as u64;
            Ok(Some((hyper::body::Frame::data(Bytes::from(piece)), at)))
        });
        let stream = futures::TryStreamExt::map_err(stream, |e| Box::new(e) as BoxError);
        http_body_util::StreamBody::new(stream).boxed_unsync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn uploads_of_one_name_finish_one_at_a_time_and_the_table_forgets_the_name() {
        let objects = SpooledObjects::default();
        let first = objects.finishing("a").await;
        let other = objects.finishing("b").await;
        let second = objects.finishing("a");
        tokio::pin!(second);
        assert!(
            futures::poll!(second.as_mut()).is_pending(),
            "the second waits for the first"
        );
        drop(other);
        assert_eq!(objects.finishing_names(), 1, "b forgotten, a waited for");
        drop(first);
        let second = second.await;
        assert_eq!(objects.finishing_names(), 1);
        drop(second);
        assert_eq!(objects.finishing_names(), 0);
    }
}
