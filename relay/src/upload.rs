//! Uploads whose request body is the object, or holds it (JSON media and multipart,
//! XML `PUT`), streamed into the spool as they arrive: the upload's head is parsed,
//! checked ([`Relay::admit`]) and staged in the spool ([`spool::Spool::stage`])
//! before a byte of the body is read, so a full spool refuses at once; each piece is
//! hashed and appended to the staged entry; the declared digests are checked; then
//! the uploader tries the store or keeps the entry ([`spool::Uploader::upload_staged`]).
//!
//! Memory per upload is one piece ([`crate::body::PIECE_BYTES`]) while the bytes
//! arrive, and the object itself only for a direct try of an object up to the
//! uploader's `direct_max_bytes`.

use bytes::Bytes;
use fake_gcs::wire::{
    Api, Hashing, MultipartError, MultipartStream, Rejection, Reply, RequestHead, Upload,
    multipart_boundary,
};
use object_store::Attributes;
use spool::{PutError, Staged, UploadError};

use crate::answer;
use crate::body::{BodyError, Pieces};
use crate::relay::Relay;

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
        let staged = match self.spool().stage(&upload.name, &attributes).await {
            Ok(staged) => staged,
            Err(e) => return Ok(self.staging_failed(upload.api, e)),
        };
        let mut stream = Stream {
            relay: self,
            staged,
            hashing: Hashing::default(),
            api: upload.api,
        };
        if let Some(reply) = stream.feed(first).await? {
            return Ok(reply);
        }
        while let Some(piece) = body.next().await.map_err(body_rejection)? {
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
        self.finish_streamed(base, upload, stream.staged, stream.hashing, &attributes)
            .await
    }

    /// An upload whose bytes are all staged: checks the digests the client declared,
    /// then makes it safe through the uploader and answers.
    pub(crate) async fn finish_streamed(
        &self,
        base: &str,
        upload: Upload,
        staged: Staged,
        hashing: Hashing,
        attributes: &Attributes,
    ) -> Result<Reply, Rejection> {
        let size = hashing.len();
        let digests = hashing.finish();
        if let Some(mismatch) = upload.declared.mismatch(&digests) {
            staged.discard().await;
            return Err(Rejection::BadDigest(mismatch));
        }
        debug_assert_eq!(size, staged.payload_len());
        let result = self.uploader().upload_staged(staged, attributes).await;
        Ok(match result {
            Ok(outcome) => {
                let record = self.record(&upload, size, digests);
                answer::uploaded(upload.api, base, &upload.bucket, &record, outcome)
            }
            Err(error) => self.refused(upload.api, error),
        })
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

/// An upload's bytes on their way into its staged entry.
struct Stream<'a> {
    relay: &'a Relay,
    staged: Staged,
    hashing: Hashing,
    api: Api,
}

impl Stream<'_> {
    /// Hashes and appends `piece`; an answer when the upload must stop here (larger
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
        match self.staged.append(piece).await {
            Ok(()) => Ok(None),
            Err(e) => Ok(Some(self.relay.staging_failed(self.api, e))),
        }
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
        let piece = body.next().await.map_err(body_rejection)?;
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

/// A body that could not be read: too large (413) or broken (400).
pub(crate) fn body_rejection(e: BodyError) -> Rejection {
    let status = match e {
        BodyError::TooLarge { .. } => 413,
        BodyError::Broken(_) => 400,
    };
    Rejection::status(status, e.to_string())
}
