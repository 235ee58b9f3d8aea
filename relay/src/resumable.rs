//! Resumable uploads through the relay: a session opened by `uploadType=resumable`
//! (after the same checks as any upload), filled by requests that `wire`'s
//! [`Session`] takes, and completed through [`Relay::upload`] once every byte is in.
//!
//! Promises: a completed session answers a retried final request with the same
//! 200; a session whose upload the uploader could not take now (503) keeps its
//! bytes, so the client's retry of the final request completes it; a request that
//! arrives while the session's upload is with the uploader is answered 503 with
//! `Retry-After` rather than misread as a gap; a permanent refusal forgets the
//! session. A request dropped mid-upload (the client went away) gives the bytes
//! back to its session too.

use bytes::Bytes;
use fake_gcs::wire::{self, Api, Declared, Rejection, Reply, Session, Upload, header};
use http::HeaderMap;

use crate::answer;
use crate::relay::Relay;
use crate::sessions::{Chunk, NO_SESSION, Step};

/// A session's upload with the uploader; settles the session when dropped, also
/// when the request is dropped mid-way.
struct Completion {
    relay: Relay,
    id: String,
    data: Bytes,
    reply: Option<Reply>,
}

impl Drop for Completion {
    fn drop(&mut self) {
        let max_bytes = self.relay.config().max_object_bytes;
        self.relay
            .sessions()
            .settle(&self.id, self.reply.as_ref(), &self.data, max_bytes);
    }
}

impl Relay {
    /// Opens a session for `upload` (from `Upload::resumable`) after the checks
    /// every upload gets; answers with its URL under `base`.
    pub(crate) fn start_resumable(&self, base: &str, upload: Upload) -> Result<Reply, Rejection> {
        self.admit(&upload)?;
        let (bucket, name) = (upload.bucket.clone(), upload.name.clone());
        let id = self.sessions().open(Session::new(upload));
        Ok(wire::started(base, &bucket, &name, &id))
    }

    /// One request of session `id`: a chunk (308), the last one (the upload's
    /// answer), or a status query.
    pub(crate) async fn resumable_chunk(
        &self,
        base: &str,
        id: &str,
        headers: &HeaderMap,
        data: Bytes,
    ) -> Result<Reply, Rejection> {
        let chunk = Chunk {
            content_range: header(headers, "content-range"),
            data: &data,
            declared: Declared::from_headers(headers),
        };
        let config = self.config();
        let retry_after = answer::retry_after_seconds(config.retry_after).to_string();
        let step = self
            .sessions()
            .step(id, chunk, config.max_object_bytes, &retry_after)?;
        let upload = match step {
            Step::Answer(reply) => return Ok(reply),
            Step::Complete(upload) => upload,
        };
        let mut completion = Completion {
            relay: self.clone(),
            id: id.to_string(),
            data: upload.data.clone(),
            reply: None,
        };
        let reply = self
            .upload(base, *upload)
            .await
            .unwrap_or_else(|rejection| rejection.reply(Api::Json));
        completion.reply = Some(reply.clone());
        Ok(reply)
    }

    /// `DELETE` of session `id`: 499, as Cloud Storage answers a cancelled upload.
    pub(crate) fn cancel_resumable(&self, id: &str) -> Result<Reply, Rejection> {
        match self.sessions().remove(id) {
            Some(_) => Ok(Reply::new(499)),
            None => Err(Rejection::status(404, NO_SESSION)),
        }
    }
}
