//! Resumable uploads through the relay, as Cloud Storage runs them: a session opened
//! by `uploadType=resumable` (after the same checks as any upload), filled by
//! requests whose `Content-Range` says where their bytes go, each chunk durable in
//! the session's files ([`crate::sessions`]) before the 308 that counts it, and
//! completed into the spool through the uploader once every byte is in.
//!
//! Promises:
//! - A status query (or any request) after a restart answers the bytes on disk.
//! - Bytes a client sends again (an offset below what was received) are compared
//!   with those received: the same bytes are skipped, other bytes are refused (400),
//!   so two uploads are never mixed into one object.
//! - A completed session answers a retried final request with the same 200; a
//!   session whose upload the uploader could not take now (503) keeps its bytes, so
//!   the client's retry of the final request completes it; a permanent refusal or a
//!   cancel forgets the session.
//! - Memory per request is one piece of the body, whatever the chunk's size.

use bytes::Bytes;
use fake_gcs::wire::{
    self, Api, ChunkRange, Declared, Hashing, Rejection, Reply, RequestHead, Upload, header,
    parse_content_range,
};
use http::HeaderMap;

use crate::body::{PIECE_BYTES, Pieces};
use crate::relay::Relay;
use crate::sessions::{Busy, Chunk, Found, Opening};
use crate::upload::body_rejection;

const NO_SESSION: &str = "No such upload session.";

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
        spool::name::check_writable(&upload.name).map_err(|e| Rejection::invalid(e.to_string()))?;
        spool::entry::encode_attributes(&crate::answer::attributes(&upload))
            .map_err(|e| Rejection::invalid(e.to_string()))?;
        let opening = Opening {
            bucket: bucket.to_string(),
            query: raw_query.to_string(),
            upload_content_type: header(head.headers, "x-upload-content-type").map(str::to_string),
            resource,
        };
        let id = self.sessions().open(opening).await?;
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
        let (received, opening, mut guard) = match self.sessions().find(id, bucket).await? {
            Found::Finalized(reply) => return Ok(reply),
            Found::Open {
                received,
                opening,
                guard,
            } => (received, opening, guard),
        };
        let place = Placement::of(header(headers, "content-range"), received)?;
        if place.first > received {
            return Err(wire::beyond_received(place.first, received));
        }
        let written = self
            .take_body(&mut guard, place.first, received, &mut body)
            .await?;
        if let Some(expected) = place.expected_len
            && written.body_len != expected
        {
            return Err(Rejection::invalid(format!(
                "Content-Range covers {expected} bytes but the body has {}.",
                written.body_len
            )));
        }
        if let Some(chunk) = written.chunk {
            self.sessions().commit_chunk(&guard, chunk).await?;
            guard.chunk_committed();
        }
        let now = received + written.chunk.map_or(0, |c| c.len);
        let total = match place.total {
            Total::Known(total) => Some(total),
            Total::EndsHere => Some(place.first + written.body_len),
            Total::Open => None,
        };
        match total {
            Some(total) if now > total => Err(Rejection::invalid(format!(
                "Received {now} bytes, more than the total {total}."
            ))),
            Some(total) if now == total => {
                let declared = Declared::from_headers(headers);
                self.complete(base, opening, declared, guard).await
            }
            _ => Ok(wire::incomplete(id, now)),
        }
    }

    /// Reads one request's body into session `guard.id`: bytes below `received` are
    /// compared with those on disk, the rest written to a partial chunk file, which
    /// is emptied first when an earlier request of the session broke off after
    /// writing to it (its bytes were never counted; appending to them would put
    /// them before this request's).
    async fn take_body(
        &self,
        guard: &mut Busy,
        first: u64,
        received: u64,
        body: &mut Pieces,
    ) -> Result<Written, Rejection> {
        let store = self.sessions();
        let max_object_bytes = self.config().max_object_bytes;
        let partial = store.partial_path(&guard.id, received);
        let mut at = first;
        let mut fresh = Hashing::default();
        while let Some(mut piece) = body.next().await.map_err(body_rejection)? {
            if at < received {
                let again = (received - at).min(piece.len() as u64) as usize;
                let stored = store.read(&guard.id, at, again as u64).await?;
                if stored[..] != piece[..again] {
                    return Err(resent_bytes_differ(at));
                }
                at += again as u64;
                piece = piece.slice(again..);
            }
            if piece.is_empty() {
                continue;
            }
            let end = at + piece.len() as u64;
            guard.reserve(piece.len() as u64, end, max_object_bytes)?;
            if fresh.is_empty() && guard.start_partial() {
                store
                    .discard_partial(&partial)
                    .await
                    .map_err(chunk_not_stored)?;
            }
            fresh.update(&piece);
            let disk = self.spool().disk();
            disk.append(&partial, piece)
                .await
                .map_err(chunk_not_stored)?;
            at = end;
        }
        let chunk = (!fresh.is_empty()).then(|| Chunk {
            offset: received,
            len: fresh.len(),
            crc32c: fresh.finish().crc32c,
        });
        Ok(Written {
            body_len: at - first,
            chunk,
        })
    }

    /// Every byte of the session is in: copies its chunks into a staged spool entry,
    /// checks the digests, and makes the upload safe. A 200 is kept for a retried
    /// final request; a 503 keeps the session for the client's retry; anything else
    /// forgets it.
    async fn complete(
        &self,
        base: &str,
        opening: Opening,
        declared_now: Declared,
        guard: Busy,
    ) -> Result<Reply, Rejection> {
        let mut upload = opening.upload()?;
        upload.declared = declared_now.or(upload.declared.clone());
        let attributes = crate::answer::attributes(&upload);
        let api = upload.api;
        let mut staged = match self.spool().stage(&upload.name, &attributes).await {
            Ok(staged) => staged,
            Err(e) => return Ok(self.staging_failed(api, e)),
        };
        let store = self.sessions();
        let mut hashing = Hashing::default();
        for chunk in store.chunks(&guard.id) {
            match self
                .copy_chunk(&guard.id, chunk, &mut staged, &mut hashing)
                .await
            {
                Ok(None) => {}
                Ok(Some(reply)) => return Ok(reply),
                Err(rejection) => {
                    store.forget(&guard.id).await;
                    return Err(rejection);
                }
            }
        }
        let answer = self
            .finish_streamed(base, upload, staged, hashing, &attributes)
            .await;
        match &answer {
            Ok(reply) if reply.status == 200 => {
                if let Err(e) = store.finalize(&guard.id, reply).await {
                    // The upload is safe; a retried final request uploads it again
                    // and is answered 200 on proof that the bytes are the same.
                    tracing::warn!(target: "spool_relay", ?e, "keeping a session's answer failed");
                }
            }
            Ok(reply) if reply.status == 503 => {}
            _ => {
                store.forget(&guard.id).await;
            }
        }
        answer
    }

    /// Copies one chunk file into `staged`, checking it holds what its name says.
    /// `Ok(Some(reply))`: the spool refused a piece (the session is kept).
    async fn copy_chunk(
        &self,
        id: &str,
        chunk: Chunk,
        staged: &mut spool::Staged,
        hashing: &mut Hashing,
    ) -> Result<Option<Reply>, Rejection> {
        let store = self.sessions();
        let mut crc = 0;
        let mut at = chunk.offset;
        while at < chunk.offset + chunk.len {
            let step = (chunk.offset + chunk.len - at).min(PIECE_BYTES as u64);
            let piece = Bytes::from(store.read(id, at, step).await?);
            if piece.len() as u64 != step {
                return Err(damaged(at));
            }
            crc = crc32c::crc32c_append(crc, &piece);
            hashing.update(&piece);
            if let Err(e) = staged.append(piece).await {
                return Ok(Some(self.staging_failed(Api::Json, e)));
            }
            at += step;
        }
        match crc == chunk.crc32c {
            true => Ok(None),
            false => Err(damaged(chunk.offset)),
        }
    }

    /// `DELETE` of session `id`: 499, as Cloud Storage answers a cancelled upload.
    pub(crate) async fn cancel_resumable(
        &self,
        bucket: &str,
        id: &str,
    ) -> Result<Reply, Rejection> {
        match self.sessions().find(id, bucket).await? {
            Found::Finalized(_) | Found::Open { .. } => {
                self.sessions().forget(id).await;
                Ok(Reply::new(499))
            }
        }
    }
}

/// What one request's body did.
struct Written {
    /// Bytes in the body.
    body_len: u64,
    /// The new chunk it wrote, if it brought bytes not yet received.
    chunk: Option<Chunk>,
}

fn chunk_not_stored(e: std::io::Error) -> Rejection {
    tracing::warn!(target: "spool_relay", error = %e, "writing a session chunk failed");
    crate::sessions::busy_rejection(format!(
        "The relay could not store this chunk now ({}); retry the request.",
        crate::sessions::disk_trouble(&e)
    ))
}

fn resent_bytes_differ(at: u64) -> Rejection {
    Rejection::invalid(format!(
        "The bytes sent again at offset {at} differ from those this session received: \
         this is not the upload the session holds. Start a new upload."
    ))
}

fn damaged(at: u64) -> Rejection {
    tracing::error!(target: "spool_relay", offset = at, "a resumable session's chunk file is damaged");
    Rejection::status(
        404,
        format!("{NO_SESSION} Its bytes from offset {at} were lost; start the upload again."),
    )
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
