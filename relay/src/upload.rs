//! Uploads whose request body is the object, or holds it (JSON media and multipart,
//! XML `PUT`): the upload's head is parsed and checked ([`Relay::admit`], the name
//! and attributes the spool takes) before a byte of the body is read; each piece is
//! hashed and kept where [`Sink`] says; the declared digests are checked; then the
//! uploader tries the store and spools the object if that fails retryably.
//!
//! Where the bytes wait while they arrive ([`Sink`]): an object up to the
//! uploader's `direct_max_bytes` (8 MiB) in memory, within the relay's
//! [`RelayConfig::max_buffered_bytes`](crate::RelayConfig::max_buffered_bytes) in
//! all, so that an upload the store takes never needs the spool's room (a stalled
//! one held another client's upload out of a nearly full spool while the store was
//! healthy, review finding M6); past either, staged in the spool
//! ([`spool::Spool::stage`]), whose room it then takes piece by piece. Memory per
//! upload is one piece ([`crate::body::PIECE_BYTES`]) and what the buffer holds.

use bytes::{Bytes, BytesMut};
use fake_gcs::wire::{
    Api, Digests, Hashing, MultipartError, MultipartStream, Rejection, Reply, RequestHead, Upload,
    multipart_boundary,
};
use object_store::Attributes;
use spool::{PutError, Staged, StoreError, UploadError, WriteMode};

use crate::answer;
use crate::body::{BodyError, Pieces};
use crate::relay::Relay;
use crate::spooled::Found;

/// Where a streamed upload's bytes are in its body.
pub(crate) enum Framing {
    /// The whole body (media, XML `PUT`), described by this head.
    Whole(Box<Upload>),
    /// The second part of a `multipart/related` body; the head comes from the first.
    Multipart {
        /// The bucket in the path.
        bucket: String,
    },
}

impl Relay {
    /// Streams one upload's body into the spool and answers it as Cloud Storage does,
    /// with links under `base`.
    pub(crate) async fn upload_streamed(
        &self,
        base: &str,
        framing: Framing,
        head: RequestHead<'_>,
        mut body: Pieces,
    ) -> Result<Reply, Rejection> {
        let (upload, mut multipart, first) = match framing {
            Framing::Whole(upload) => (*upload, None, Bytes::new()),
            Framing::Multipart { bucket } => {
                let (upload, stream, first) = multipart_head(&bucket, head, &mut body).await?;
                (upload, Some(stream), first)
            }
        };
        self.admit(&upload)?;
        let attributes = answer::attributes(&upload);
        self.spoolable(&upload, &attributes)?;
        let mut stream = Stream {
            relay: self,
            sink: Sink::Memory {
                buffer: BytesMut::new(),
                held: None,
            },
            name: &upload.name,
            mode: crate::relay::write_mode(&upload.preconditions),
            attributes: &attributes,
            hashing: Hashing::default(),
            api: upload.api,
        };
        if let Some(reply) = stream.feed(first).await? {
            return Ok(reply);
        }
        while let Some(piece) = body.next().await.map_err(BodyError::rejection)? {
            let media = match &mut multipart {
                Some(m) => m.media(&piece)?,
                None => piece,
            };
            if let Some(reply) = stream.feed(media).await? {
                return Ok(reply);
            }
        }
        if let Some(m) = &multipart {
            m.finish()?;
        }
        let Stream { sink, hashing, .. } = stream;
        self.finish_streamed(base, upload, sink, hashing, &attributes)
            .await
    }

    /// 400 for a name or attributes the spool would refuse, before the body is read
    /// (the bytes may never reach the spool, but could have to).
    fn spoolable(&self, upload: &Upload, attributes: &Attributes) -> Result<(), Rejection> {
        spool::name::check_writable(&upload.name).map_err(|e| Rejection::invalid(e.to_string()))?;
        let encoded = spool::entry::encode_attributes(attributes);
        encoded.map_err(|e| Rejection::invalid(e.to_string()))?;
        Ok(())
    }

    /// An upload whose bytes are all in: checks the digests the client declared,
    /// then makes it safe through the uploader and answers.
    pub(crate) async fn finish_streamed(
        &self,
        base: &str,
        upload: Upload,
        sink: Sink,
        hashing: Hashing,
        attributes: &Attributes,
    ) -> Result<Reply, Rejection> {
        let size = hashing.len();
        let digests = hashing.finish();
        if let Some(mismatch) = upload.declared.mismatch(&digests) {
            if let Sink::Staged(staged) = sink {
                staged.discard().await;
            }
            return Err(Rejection::BadDigest(mismatch));
        }
        // Never waits for the earlier run's objects to be learned: an upload is not
        // held up by a read of the whole backlog after a restart.
        let known = self.spooled_so_far();
        let _turn = known.finishing(&upload.name).await;
        let mode = crate::relay::write_mode(&upload.preconditions);
        // An overwrite goes behind what is spooled (the uploader spools it, keeping
        // the name's order); a create-if-absent one is answered as the bucket will
        // answer it once the spooled object is there.
        let found = match known.find(self.spool(), &upload.name) {
            Some(found) if mode == WriteMode::CreateIfAbsent => {
                known.digested(self.spool(), found).await
            }
            _ => None,
        };
        if let Some(spooled) = found {
            if let Sink::Staged(staged) = sink {
                staged.discard().await;
            }
            return Ok(self.spooled_again(base, &upload, &spooled, size, &digests));
        }
        let uploader = self.uploader();
        let result = match sink {
            Sink::Memory { buffer, held } => {
                let payload = buffer.freeze();
                debug_assert_eq!(size, payload.len() as u64);
                let result = uploader
                    .upload_with_mode(&upload.name, payload, attributes, mode)
                    .await;
                drop(held);
                result
            }
            Sink::Staged(staged) => {
                debug_assert_eq!(size, staged.payload_len());
                debug_assert_eq!(staged.mode(), mode);
                uploader.upload_staged(staged, attributes).await
            }
        };
        Ok(match result {
            Ok(outcome) => {
                let record = self.record(&upload, size, digests);
                self.acknowledged(&record, outcome).await;
                answer::uploaded(upload.api, base, &upload.bucket, &record, outcome)
            }
            Err(error) => self.refused(upload.api, error),
        })
    }

    /// The answer to a create-if-absent upload of a name still spooled, as the bucket
    /// will answer it once the spooled object is delivered: the same bytes are that
    /// object (200, `spooled`: a retry of the upload that spooled it) and other bytes
    /// are a 412.
    fn spooled_again(
        &self,
        base: &str,
        upload: &Upload,
        spooled: &Found,
        size: u64,
        digests: &Digests,
    ) -> Reply {
        if spooled.holds(size, digests) {
            return spooled.uploaded(upload.api, base, &upload.bucket);
        }
        let detail = format!(
            "{:?} is still in the spool with other bytes ({size} bytes sent)",
            upload.name
        );
        self.refused(
            upload.api,
            UploadError::Refused(StoreError::Conflict { detail }),
        )
    }

    /// The answer to an upload whose staged entry the spool refused (at its start or
    /// a piece), counted in `spool_uploads_total` as the uploader counts its own
    /// refusals: every upload the relay answers is counted once.
    pub(crate) fn staging_failed(&self, api: Api, e: PutError) -> Reply {
        let error = self.uploader().refused_staging(e);
        self.refused(api, error)
    }

    /// The answer to an upload the uploader or the spool did not make safe.
    pub(crate) fn refused(&self, api: Api, error: UploadError) -> Reply {
        answer::refused(api, &error, self.config().retry_after)
    }
}

/// Where an upload's bytes wait while they arrive: see the module doc.
pub(crate) enum Sink {
    /// In memory, the buffer's bytes taken from the relay's budget (`held`).
    Memory {
        buffer: BytesMut,
        held: Option<tokio::sync::OwnedSemaphorePermit>,
    },
    /// In a staged spool entry.
    Staged(Staged),
}

/// An upload's bytes on their way into its sink.
struct Stream<'a> {
    relay: &'a Relay,
    sink: Sink,
    name: &'a str,
    mode: WriteMode,
    attributes: &'a Attributes,
    hashing: Hashing,
    api: Api,
}

impl Stream<'_> {
    /// Hashes and keeps `piece`; an answer when the upload must stop here (larger
    /// than the relay takes, or the spool refused the piece).
    async fn feed(&mut self, piece: Bytes) -> Result<Option<Reply>, Rejection> {
        if piece.is_empty() {
            return Ok(None);
        }
        let max = self.relay.max_object_bytes();
        if self.hashing.len() + piece.len() as u64 > max {
            return Err(Rejection::Status {
                status: 413,
                message: Some(format!(
                    "The object exceeds the relay's limit of {max} bytes (--max-object-bytes)."
                )),
            });
        }
        self.hashing.update(&piece);
        if let Sink::Memory { buffer, held } = &mut self.sink {
            let fits = self.hashing.len() <= self.relay.uploader().config().direct_max_bytes;
            if fits && self.relay.buffer(held, piece.len()) {
                buffer.extend_from_slice(&piece);
                return Ok(None);
            }
            // Too large to hold, or the relay holds all it may: to the spool, with
            // what was held.
            let held_bytes = std::mem::take(buffer).freeze();
            let spool = self.relay.spool();
            let staged = match spool
                .stage_with_mode(self.name, self.attributes, self.mode)
                .await
            {
                Ok(staged) => staged,
                Err(e) => return Ok(Some(self.relay.staging_failed(self.api, e))),
            };
            self.sink = Sink::Staged(staged);
            if let Some(reply) = self.append(held_bytes).await {
                return Ok(Some(reply));
            }
        }
        Ok(self.append(piece).await)
    }

    /// Appends `piece` to the staged entry; the answer when the spool refuses it.
    async fn append(&mut self, piece: Bytes) -> Option<Reply> {
        let Sink::Staged(staged) = &mut self.sink else {
            unreachable!("appended only once staged");
        };
        if piece.is_empty() {
            return None;
        }
        let appended = staged.append(piece).await;
        appended
            .err()
            .map(|e| self.relay.staging_failed(self.api, e))
    }
}

/// Reads a multipart body up to its media bytes: the upload its resource describes,
/// the stream to read the rest with, and the media bytes read so far.
async fn multipart_head(
    bucket: &str,
    head: RequestHead<'_>,
    body: &mut Pieces,
) -> Result<(Upload, MultipartStream, Bytes), Rejection> {
    let content_type = fake_gcs::wire::header(head.headers, "content-type").unwrap_or_default();
    let mut stream = MultipartStream::new(&multipart_boundary(content_type)?)?;
    loop {
        let piece = body.next().await.map_err(BodyError::rejection)?;
        let Some(piece) = piece else {
            let ended = MultipartError::Malformed("the body ended before its media part");
            return Err(ended.into());
        };
        if let Some(parts) = stream.head(&piece)? {
            crate::relay::unsupported_resource(&parts.resource.body)?;
            let upload = Upload::multipart_head(bucket, head, &parts)?;
            let first = stream.media(&[])?;
            return Ok((upload, stream, first));
        }
    }
}
