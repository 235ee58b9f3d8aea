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
//!   power loss, a restart) are known too: their entries are read once
//!   ([`SpooledObjects::recover`]: each header for the name and attributes, the
//!   payload for its MD5, 1 MiB at a time) before the first read, list or delete
//!   that asks the table is answered, so a reader sees them as this run's own.
//!   Uploads never wait for that: until it is done, a second upload of a name an
//!   earlier run spooled is written as usual (and, with other bytes, whichever
//!   copy reaches the bucket second is set aside as a conflict). An entry that
//!   cannot be read is logged and left to the drainer (its object is then 404
//!   until delivered). Their generation and creation time are the entry's
//!   creation time: the first answer's are lost with the process.
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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use fake_gcs::wire::{
    Api, DEFAULT_CONTENT_TYPE, Digests, Hashing, ObjectRecord, Reply, header, resolve_range,
};
use http_body_util::BodyExt as _;
use spool::Spool;

use crate::answer::{OUTCOME_HEADER, OUTCOME_SPOOLED};
use crate::passthrough::{BoxError, ResponseBody, whole};

/// The most a piece of a spooled object's bytes read at once.
const PIECE_BYTES: u64 = 1 << 20;

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

#[derive(Debug, Clone)]
struct Acknowledged {
    seq: u64,
    record: ObjectRecord,
}

/// The names known, and the same by entry: every change keeps the two the same
/// (checked in debug builds), so that the oldest is found in O(log n).
#[derive(Debug, Default)]
struct Table {
    by_name: BTreeMap<String, Acknowledged>,
    by_seq: BTreeMap<u64, String>,
}

impl Table {
    fn insert(&mut self, acknowledged: Acknowledged) {
        let name = acknowledged.record.name.clone();
        self.by_seq.insert(acknowledged.seq, name.clone());
        if let Some(replaced) = self.by_name.insert(name, acknowledged) {
            self.by_seq.remove(&replaced.seq);
        }
        self.check();
    }

    /// Forgets `name` if it is still entry `seq`'s.
    fn forget(&mut self, name: &str, seq: u64) {
        if self.by_name.get(name).is_some_and(|now| now.seq == seq) {
            self.by_name.remove(name);
            self.by_seq.remove(&seq);
        }
        self.check();
    }

    /// Forgets the name spooled first: the drainer delivers in sequence order, so
    /// it is the likeliest to be gone.
    fn forget_oldest(&mut self) {
        if let Some((seq, name)) = self.by_seq.pop_first() {
            self.by_name.remove(&name);
            debug_assert!(seq < u64::MAX);
        }
        self.check();
    }

    fn clear(&mut self) {
        self.by_name.clear();
        self.by_seq.clear();
    }

    fn check(&self) {
        debug_assert_eq!(
            self.by_name.len(),
            self.by_seq.len(),
            "the two indexes differ"
        );
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
    entry: PathBuf,
    /// Where the payload starts in the entry file.
    offset: u64,
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
        if table.by_name.len() as u64 >= spool.config().max_files {
            table.forget_oldest();
        }
        let record = record.clone();
        table.insert(Acknowledged { seq, record });
    }

    /// The spooled object `name`, if the relay acknowledged it and its entry is
    /// still in the spool.
    pub(crate) fn find(&self, spool: &Spool, name: &str) -> Option<Found> {
        let known = self.table().by_name.get(name)?.clone();
        let found = spool.entry_file(known.seq).and_then(|(entry, bytes)| {
            let offset = bytes.checked_sub(known.record.size)?;
            Some(Found {
                record: known.record.clone(),
                entry,
                offset,
            })
        });
        if found.is_none() {
            self.table().forget(name, known.seq);
        }
        found
    }

    /// Whether any object may still be spooled: none is known, or the spool holds
    /// no entry (then every name known is forgotten at once). O(log n).
    pub(crate) fn any(&self, spool: &Spool) -> bool {
        let mut table = self.table();
        if !table.by_name.is_empty() && spool.stats().files == 0 {
            table.clear();
        }
        !table.by_name.is_empty()
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
        mut visit: impl FnMut(&ObjectRecord) -> Walk,
    ) {
        use std::ops::Bound;
        let mut table = self.table();
        let mut gone = Vec::new();
        let mut start = Bound::Included(from.to_string());
        'walking: loop {
            let range = table
                .by_name
                .range::<String, _>((start.clone(), Bound::Unbounded));
            for (name, known) in range {
                if spool.entry_file(known.seq).is_none() {
                    gone.push((name.clone(), known.seq));
                    continue;
                }
                match visit(&known.record) {
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
        for (name, seq) in gone {
            table.forget(&name, seq);
        }
    }
}

impl SpooledObjects {
    /// Takes `name` back out of the spool (a `DELETE` of it): its entry is claimed
    /// and removed (unlinked, `entries/` synced before this returns), so it is
    /// never delivered, even after a power loss.
    /// [`TakenBack::Withdrawn`] when a drainer holds the entry: the caller waits
    /// until it has left the spool.
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
                self.forget(name, seq);
                match spool.sync_removals().await {
                    Ok(()) => TakenBack::Removed,
                    Err(e) => TakenBack::Failed(e),
                }
            }
            Err(e) => TakenBack::Failed(e),
        }
    }

    fn seq_of(&self, name: &str) -> Option<u64> {
        self.table().by_name.get(name).map(|known| known.seq)
    }

    fn forget(&self, name: &str, seq: u64) {
        self.table().forget(name, seq);
    }
}

impl SpooledObjects {
    /// Learns the objects of entries `seqs` (spooled by earlier runs on this
    /// directory), reading each entry once; a name this run has spooled since
    /// keeps this run's record. Returns how many it learned.
    pub(crate) async fn recover(&self, spool: &Spool, seqs: &[u64]) -> usize {
        let mut learned = 0;
        for &seq in seqs {
            let record = match read_back(spool, seq).await {
                Ok(Some(record)) => record,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(
                        seq,
                        error = %e,
                        "a spooled entry could not be read back: its object is not \
                         visible through the relay until the drainer delivers it"
                    );
                    continue;
                }
            };
            let mut table = self.table();
            if table.by_name.len() as u64 >= spool.config().max_files {
                break;
            }
            if !table.by_name.contains_key(&record.name) {
                table.insert(Acknowledged { seq, record });
                learned += 1;
            }
        }
        learned
    }
}

/// The object entry `seq` holds, as it will be in the bucket: `None` when the
/// entry is gone (delivered meanwhile).
async fn read_back(spool: &Spool, seq: u64) -> std::io::Result<Option<ObjectRecord>> {
    let Some((entry, file_bytes)) = spool.entry_file(seq) else {
        return Ok(None);
    };
    let longest = spool::entry::head_bytes(
        spool::name::MAX_NAME_BYTES,
        spool::entry::MAX_ATTRIBUTE_BYTES,
    );
    let head = match spool
        .disk()
        .read_range(&entry, 0, file_bytes.min(longest as u64))
        .await
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        read => read?,
    };
    let (header, offset) = spool::entry::decode_header(&head).map_err(std::io::Error::other)?;
    let mut hashing = Hashing::default();
    let (mut at, end) = (offset as u64, offset as u64 + header.payload_len);
    while at < end {
        let piece = spool
            .disk()
            .read_range(&entry, at, (end - at).min(PIECE_BYTES))
            .await?;
        if piece.is_empty() {
            return Err(std::io::Error::other("the entry ended before its payload"));
        }
        hashing.update(&piece);
        at += piece.len() as u64;
    }
    let digests = hashing.finish();
    if digests.crc32c != header.payload_crc32c {
        return Err(std::io::Error::other(
            "the payload's crc32c is not the header's",
        ));
    }
    let (content_type, attributes) = crate::answer::object_attributes(&header.attributes);
    let content_type = match content_type {
        Some(given) => std::borrow::Cow::Owned(given),
        None => std::borrow::Cow::Borrowed(DEFAULT_CONTENT_TYPE),
    };
    Ok(Some(ObjectRecord {
        generation: i64::try_from(header.created_unix_ms.saturating_mul(1000)).unwrap_or(i64::MAX),
        name: header.name,
        size: header.payload_len,
        crc32c: digests.crc32c,
        md5: digests.md5,
        created_unix_ms: header.created_unix_ms,
        content_type,
        attributes: attributes.boxed(),
        component_count: None,
    }))
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
