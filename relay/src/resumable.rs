//! Resumable uploads through the relay, as Cloud Storage runs them: a session opened
//! by `uploadType=resumable` (after the same checks as any upload), filled by
//! requests whose `Content-Range` says where their bytes go, each chunk durable in
//! the session's files ([`crate::sessions`]) before the 308 that counts it, and
//! completed into the spool through the uploader once every byte is in. This file
//! is the one place a [`SessionError`] becomes an HTTP answer.
//!
//! Promises:
//! - A status query (or any request) after a restart answers the bytes on disk.
//! - Bytes a client sends again (an offset below what was received) are compared
//!   with those received: the same bytes are skipped, other bytes are refused (400),
//!   so two uploads are never mixed into one object.
//! - Every chunk but the last is a multiple of [`CHUNK_GRANULARITY`] (256 KiB), as
//!   Cloud Storage requires; a body longer than its `Content-Range` says is refused
//!   as soon as it is (400), so a request never writes more than it declared.
//! - An object larger than the relay takes is refused (413) as soon as that is
//!   known (a declared `X-Upload-Content-Length`, a range, the bytes themselves),
//!   and its session forgotten.
//! - A completed session answers a retried final request with the same 200; a
//!   session whose upload could not be made safe now (503, including an I/O error
//!   reading its chunks) keeps its bytes, so the client's retry of the final
//!   request completes it; any other final answer, or a cancel, forgets it.
//! - Memory per request is one piece of the body, whatever the chunk's size.

use bytes::Bytes;
use fake_gcs::wire::{
    self, Api, ChunkRange, Declared, Hashing, Rejection, Reply, RequestHead, Upload, header,
    parse_content_range,
};
use http::HeaderMap;

use crate::body::{PIECE_BYTES, Pieces};
use crate::relay::Relay;
use crate::sessions::{Chunk, Hold, Opening, Request, SessionError};

/// Cloud Storage's chunk granularity: every chunk of a resumable upload but the
/// last is a multiple of it (262,144 bytes).
pub const CHUNK_GRANULARITY: u64 = 256 * 1024;

/// Where one request's bytes go in its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placement {
    /// Offset of the body's first byte.
    first: u64,
    /// The body's length when the `Content-Range` gives it (`A-B`); `Some(0)` for
    /// `*` (no body).
    expected_len: Option<u64>,
    /// The object's total size when given, or implied (`A-*/*` ends the object).
    total: Total,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Total {
    Known(u64),
    /// Unknown: more may come.
    Open,
    /// This body ends the object (`A-*/*`, or no `Content-Range`).
    EndsHere,
}

impl Placement {
    fn of(content_range: Option<&str>, received: u64) -> Result<Self, Rejection> {
        let Some(value) = content_range else {
            return Ok(Placement {
                first: received,
                expected_len: None,
                total: Total::EndsHere,
            });
        };
        let range = parse_content_range(value)
            .ok_or_else(|| Rejection::invalid(format!("Invalid Content-Range {value:?}.")))?;
        let total = range.total.map_or(Total::Open, Total::Known);
        Ok(match range.range {
            ChunkRange::Empty => Placement {
                first: received,
                expected_len: Some(0),
                total,
            },
            ChunkRange::EmptyAt(first) => Placement {
                first,
                expected_len: Some(0),
                total,
            },
            ChunkRange::Bytes(first, last) => Placement {
                first,
                expected_len: Some((last - first).checked_add(1).ok_or_else(|| {
                    Rejection::invalid(format!("Content-Range {value:?} is too large."))
                })?),
                total,
            },
            ChunkRange::From(first) => Placement {
                first,
                expected_len: None,
                total: range.total.map_or(Total::EndsHere, Total::Known),
            },
        })
    }
}

impl Placement {
    /// Where the body ends, when the range says.
    fn declared_end(&self) -> Option<u64> {
        self.first.checked_add(self.expected_len?)
    }

    /// Refuses, before the body is read, what the range alone shows to be wrong: an
    /// object larger than `max_object_bytes` (413), a chunk that is not the last
    /// and not a multiple of [`CHUNK_GRANULARITY`] (400).
    fn check(&self, max_object_bytes: u64) -> Result<(), Rejection> {
        let total = match self.total {
            Total::Known(total) => Some(total),
            _ => None,
        };
        if let Some(end) = total.or(self.declared_end())
            && end > max_object_bytes
        {
            return Err(object_too_large(max_object_bytes));
        }
        if let Some(end) = self.declared_end()
            && total != Some(end)
            && self.total != Total::EndsHere
            && self.expected_len != Some(0)
            && !end.is_multiple_of(CHUNK_GRANULARITY)
        {
            return Err(not_a_whole_chunk(end - self.first));
        }
        Ok(())
    }
}

impl Relay {
    /// Opens a session for the upload the opening request describes (`resource`,
    /// its whole small body) after the checks every upload gets; answers with the
    /// session's URL under `base`.
    pub(crate) async fn start_resumable(
        &self,
        base: &str,
        bucket: &str,
        head: RequestHead<'_>,
        raw_query: &str,
        resource: Bytes,
    ) -> Result<Reply, Rejection> {
        let upload = Upload::resumable(bucket, head, &resource)?;
        self.admit(&upload)?;
        crate::relay::unsupported_resource(&resource)?;
        spool::name::check_writable(&upload.name).map_err(|e| Rejection::invalid(e.to_string()))?;
        spool::entry::encode_attributes(&crate::answer::attributes(&upload))
            .map_err(|e| Rejection::invalid(e.to_string()))?;
        let declared: Option<u64> =
            header(head.headers, "x-upload-content-length").and_then(|v| v.trim().parse().ok());
        if declared.is_some_and(|len| len > self.max_object_bytes()) {
            return Err(object_too_large(self.max_object_bytes()));
        }
        let opening = Opening {
            bucket: bucket.to_string(),
            query: raw_query.to_string(),
            upload_content_type: header(head.headers, "x-upload-content-type").map(str::to_string),
            resource,
        };
        let id = self
            .sessions()
            .open(opening)
            .await
            .map_err(session_rejection)?;
        Ok(wire::started(base, bucket, &upload.name, &id))
    }

    /// One request of session `id` (named with `bucket` in its URL): a chunk (308),
    /// the last one (the upload's answer), or a status query.
    pub(crate) async fn resumable_chunk(
        &self,
        base: &str,
        bucket: &str,
        id: &str,
        headers: &HeaderMap,
        mut body: Pieces,
    ) -> Result<Reply, Rejection> {
        let found = self
            .sessions()
            .find(id, bucket)
            .await
            .map_err(session_rejection)?;
        let (received, opening, mut hold) = match found {
            Request::Finished(reply) => return Ok(reply),
            Request::Open {
                received,
                opening,
                hold,
            } => (received, opening, hold),
        };
        let taken = self
            .take_chunk(&mut hold, headers, received, &mut body)
            .await;
        let (now, total) = match taken {
            Ok(taken) => taken,
            Err(rejection) => return Err(self.refuse_chunk(hold, rejection).await),
        };
        match total {
            Some(total) if now == total => {
                let declared = Declared::from_headers(headers);
                self.complete(base, opening, declared, hold).await
            }
            _ => Ok(wire::incomplete(id, now)),
        }
    }

    /// Takes one request's bytes into the session and makes its new chunk durable:
    /// the bytes the session now holds, and the object's total when known.
    async fn take_chunk(
        &self,
        hold: &mut Hold,
        headers: &HeaderMap,
        received: u64,
        body: &mut Pieces,
    ) -> Result<(u64, Option<u64>), Rejection> {
        let place = Placement::of(header(headers, "content-range"), received)?;
        if place.first > received {
            return Err(wire::beyond_received(place.first, received));
        }
        place.check(self.max_object_bytes())?;
        let written = self.take_body(hold, place, received, body).await?;
        if let Some(expected) = place.expected_len
            && written.body_len != expected
        {
            return Err(Rejection::invalid(format!(
                "Content-Range covers {expected} bytes but the body has {}.",
                written.body_len
            )));
        }
        let now = received + written.chunk.map_or(0, |c| c.len);
        let total = match place.total {
            Total::Known(total) => Some(total),
            Total::EndsHere => Some(place.first + written.body_len),
            Total::Open => None,
        };
        match total {
            Some(total) if now > total => {
                return Err(Rejection::invalid(format!(
                    "Received {now} bytes, more than the total {total}."
                )));
            }
            Some(total) if now == total => {}
            _ if written.chunk.is_some() && !now.is_multiple_of(CHUNK_GRANULARITY) => {
                return Err(not_a_whole_chunk(written.chunk.map_or(0, |c| c.len)));
            }
            _ => {}
        }
        if let Some(chunk) = written.chunk {
            hold.commit(chunk).await.map_err(session_rejection)?;
        }
        Ok((now, total))
    }

    /// A refused chunk: the session is free for the client's next request at once
    /// (what the chunk wrote stays counted until that request removes it), and a
    /// session whose object can never be taken (413) is forgotten with its files.
    async fn refuse_chunk(&self, hold: Hold, rejection: Rejection) -> Rejection {
        if rejection.http_status() == 413 {
            let id = hold.id.clone();
            drop(hold);
            self.sessions().forget(&id).await;
        }
        rejection
    }

    /// Reads one request's body into the session: bytes below `received` are
    /// compared with those on disk, the rest (reserved first) written to this
    /// request's partial chunk file. Refuses a body longer than its range says (400)
    /// or an object past `max_object_bytes` (413) before writing the piece that
    /// would be.
    async fn take_body(
        &self,
        hold: &mut Hold,
        place: Placement,
        received: u64,
        body: &mut Pieces,
    ) -> Result<Written, Rejection> {
        let max_object_bytes = self.max_object_bytes();
        let id = hold.id.clone();
        let mut stored = Stored::new(self, &id, place.first.min(received), received);
        let mut at = place.first;
        let mut fresh = Hashing::default();
        while let Some(mut piece) = body
            .next()
            .await
            .map_err(crate::body::BodyError::rejection)?
        {
            let end = at + piece.len() as u64;
            if let Some(declared_end) = place.declared_end()
                && end > declared_end
            {
                return Err(Rejection::invalid(format!(
                    "The body is longer than the {} bytes its Content-Range covers.",
                    declared_end - place.first
                )));
            }
            if at < received {
                let again = (received - at).min(piece.len() as u64);
                stored.compare(at, &piece[..again as usize]).await?;
                at += again;
                piece = piece.slice(again as usize..);
            }
            if piece.is_empty() {
                continue;
            }
            if end > max_object_bytes {
                return Err(object_too_large(max_object_bytes));
            }
            hold.reserve(piece.len() as u64)
                .map_err(session_rejection)?;
            fresh.update(&piece);
            hold.append(received, piece)
                .await
                .map_err(session_rejection)?;
            at = end;
        }
        let chunk = (!fresh.is_empty()).then(|| Chunk {
            offset: received,
            len: fresh.len(),
            crc32c: fresh.finish().crc32c,
        });
        Ok(Written {
            body_len: at - place.first,
            chunk,
        })
    }

    /// Every byte of the session is in: makes the upload safe and answers. A 200 is
    /// kept for a retried final request; a 503 keeps the session for the client's
    /// retry; any other answer forgets it.
    async fn complete(
        &self,
        base: &str,
        opening: Opening,
        declared_now: Declared,
        hold: Hold,
    ) -> Result<Reply, Rejection> {
        let answer = self
            .complete_upload(base, opening, declared_now, &hold)
            .await;
        let status = match &answer {
            Ok(reply) => reply.status,
            Err(rejection) => rejection.http_status(),
        };
        match (&answer, status) {
            (Ok(reply), 200) => {
                if let Err(e) = self.sessions().finish(&hold, reply).await {
                    // The upload is safe; a retried final request uploads it again
                    // and is answered 200 on proof that the bytes are the same.
                    tracing::warn!(target: "spool_relay", error = %e, "keeping a session's answer failed");
                }
            }
            (_, 503) => {}
            _ => {
                let id = hold.id.clone();
                drop(hold);
                self.sessions().forget(&id).await;
            }
        }
        answer
    }

    /// Copies the session's chunks into a staged spool entry, checks the digests,
    /// and makes the upload safe.
    async fn complete_upload(
        &self,
        base: &str,
        opening: Opening,
        declared_now: Declared,
        hold: &Hold,
    ) -> Result<Reply, Rejection> {
        let mut upload = opening.upload()?;
        upload.declared = declared_now.or(upload.declared.clone());
        let attributes = crate::answer::attributes(&upload);
        let mode = crate::relay::write_mode(&upload.preconditions);
        let staged = self
            .spool()
            .stage_with_mode(&upload.name, &attributes, mode);
        let mut staged = match staged.await {
            Ok(staged) => staged,
            Err(e) => return Ok(self.staging_failed(upload.api, e)),
        };
        let mut hashing = Hashing::default();
        for chunk in self.sessions().chunks_from(&hold.id, 0) {
            let copied = self.copy_chunk(&hold.id, chunk, &mut staged, &mut hashing);
            if let Some(reply) = copied.await? {
                return Ok(reply);
            }
        }
        let sink = crate::upload::Sink::Staged(staged);
        self.finish_streamed(base, upload, sink, hashing, &attributes)
            .await
    }

    /// Copies one chunk file into `staged`, checking it holds what its name says.
    /// `Ok(Some(reply))`: the spool refused a piece.
    async fn copy_chunk(
        &self,
        id: &str,
        chunk: Chunk,
        staged: &mut spool::Staged,
        hashing: &mut Hashing,
    ) -> Result<Option<Reply>, Rejection> {
        let mut crc = 0;
        let mut at = chunk.offset;
        while at < chunk.end() {
            let step = (chunk.end() - at).min(PIECE_BYTES as u64);
            let piece = self.sessions().read(id, &chunk, at, step).await;
            let piece = Bytes::from(piece.map_err(session_rejection)?);
            crc = crc32c::crc32c_append(crc, &piece);
            hashing.update(&piece);
            if let Err(e) = staged.append(piece).await {
                return Ok(Some(self.staging_failed(Api::Json, e)));
            }
            at += step;
        }
        match crc == chunk.crc32c {
            true => Ok(None),
            false => Err(session_rejection(SessionError::Damaged {
                at: chunk.offset,
            })),
        }
    }

    /// `DELETE` of session `id`: 499, as Cloud Storage answers a cancelled upload.
    pub(crate) async fn cancel_resumable(
        &self,
        bucket: &str,
        id: &str,
    ) -> Result<Reply, Rejection> {
        let found = self
            .sessions()
            .find(id, bucket)
            .await
            .map_err(session_rejection)?;
        drop(found);
        self.sessions().forget(id).await;
        Ok(Reply::new(499))
    }
}

/// The bytes a session holds, read back to compare with bytes a client sends again.
struct Stored<'a> {
    relay: &'a Relay,
    id: &'a str,
    /// The chunks that hold bytes from the first offset compared on.
    chunks: std::vec::IntoIter<Chunk>,
    chunk: Option<Chunk>,
}

impl<'a> Stored<'a> {
    fn new(relay: &'a Relay, id: &'a str, from: u64, received: u64) -> Self {
        let chunks = match from < received {
            true => relay.sessions().chunks_from(id, from),
            false => Vec::new(),
        };
        Stored {
            relay,
            id,
            chunks: chunks.into_iter(),
            chunk: None,
        }
    }

    /// Refuses `sent` (the client's bytes at `at`, all below what was received)
    /// unless they are those stored.
    async fn compare(&mut self, mut at: u64, mut sent: &[u8]) -> Result<(), Rejection> {
        while !sent.is_empty() {
            let chunk = match self.chunk {
                Some(chunk) if chunk.end() > at => chunk,
                _ => {
                    self.chunk = self.chunks.next();
                    self.chunk.ok_or_else(|| resent_bytes_differ(at))?
                }
            };
            let len = (chunk.end() - at).min(sent.len() as u64);
            let stored = self.relay.sessions().read(self.id, &chunk, at, len).await;
            if stored.map_err(session_rejection)?[..] != sent[..len as usize] {
                return Err(resent_bytes_differ(at));
            }
            at += len;
            sent = &sent[len as usize..];
        }
        Ok(())
    }
}

/// What one request's body did.
struct Written {
    /// Bytes in the body.
    body_len: u64,
    /// The new chunk it wrote, if it brought bytes not yet received.
    chunk: Option<Chunk>,
}

/// A session request refused for `e`: the one place a [`SessionError`] becomes an
/// answer. Local paths stay in the log.
pub(crate) fn session_rejection(e: SessionError) -> Rejection {
    match &e {
        SessionError::NotFound => Rejection::status(404, e.to_string()),
        SessionError::InUse
        | SessionError::TooManySessions { .. }
        | SessionError::TooManyBytes { .. } => Rejection::status(503, e.to_string()),
        SessionError::Io { source, .. } => {
            tracing::warn!(target: "spool_relay", error = %e, "resumable session storage failed");
            Rejection::status(
                503,
                format!(
                    "The relay could not store or read this session's bytes now ({}); retry                      the request.",
                    crate::answer::disk_trouble(source)
                ),
            )
        }
        SessionError::Stopped { .. } => {
            tracing::warn!(target: "spool_relay", error = %e, "session request refused");
            Rejection::status(
                503,
                "The relay's session storage stopped taking writes after a failed sync and is                  recovering (its log says why); retry the request.",
            )
        }
        SessionError::Damaged { at } => {
            tracing::error!(target: "spool_relay", error = %e, "a resumable session's chunk file is damaged");
            Rejection::status(
                404,
                format!(
                    "No such upload session. Its bytes from offset {at} were lost; start the upload again."
                ),
            )
        }
    }
}

fn object_too_large(max: u64) -> Rejection {
    Rejection::status(
        413,
        format!("The object exceeds the relay's limit of {max} bytes (--max-object-bytes)."),
    )
}

fn not_a_whole_chunk(len: u64) -> Rejection {
    Rejection::invalid(format!(
        "Invalid request. Every chunk but the last must be a multiple of {CHUNK_GRANULARITY}          bytes; this one is {len} bytes."
    ))
}

fn resent_bytes_differ(at: u64) -> Rejection {
    Rejection::invalid(format!(
        "The bytes sent again at offset {at} differ from those this session received:          this is not the upload the session holds. Start a new upload."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_place_a_body_in_its_session() {
        let at = |range: Option<&str>| Placement::of(range, 100).unwrap();
        assert_eq!(
            at(Some("bytes 100-199/*")),
            Placement {
                first: 100,
                expected_len: Some(100),
                total: Total::Open
            }
        );
        assert_eq!(at(Some("bytes */300")).total, Total::Known(300));
        assert_eq!(at(Some("bytes */300")).expected_len, Some(0));
        assert_eq!(at(Some("bytes 0-*/*")).total, Total::EndsHere);
        assert_eq!(at(None).first, 100);
        // A range near u64::MAX is refused, not overflowed.
        let huge = format!("bytes 0-{}/*", u64::MAX);
        assert!(Placement::of(Some(&huge), 0).is_err());
        assert!(Placement::of(Some("bytes 5-1/*"), 0).is_err());
        let empty_last = at(Some("bytes 100-99/100"));
        assert_eq!((empty_last.first, empty_last.expected_len), (100, Some(0)));
        assert_eq!(empty_last.total, Total::Known(100));
    }
}
