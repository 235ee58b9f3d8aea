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

use std::collections::BTreeSet;

use bytes::Bytes;
use fake_gcs::wire::{
    self, Api, Declared, Progress, Rejection, Reply, Session, Sessions, Upload, header,
};
use http::HeaderMap;

use crate::answer;
use crate::relay::Relay;

const NO_SESSION: &str = "No such upload session.";

/// The sessions the relay keeps, and which of them are completing now.
#[derive(Debug)]
pub(crate) struct SessionTable {
    sessions: Sessions<Reply>,
    /// Sessions whose completed upload is with the uploader.
    completing: BTreeSet<String>,
}

/// What one request of a session leads to.
enum Step {
    /// Answer this (308, a completed session's 200, a busy 503).
    Answer(Reply),
    /// Every byte is in: upload this.
    Complete(Box<Upload>),
}

impl SessionTable {
    /// Keeps at most `max_sessions` sessions (at least one).
    pub(crate) fn new(max_sessions: usize) -> Self {
        Self {
            sessions: Sessions::new(max_sessions),
            completing: BTreeSet::new(),
        }
    }

    /// Takes one request of session `id`.
    fn step(
        &mut self,
        id: &str,
        chunk: Chunk<'_>,
        max_bytes: u64,
        retry_after: &str,
    ) -> Result<Step, Rejection> {
        if self.completing.contains(id) {
            let busy = "This session's upload is being completed; retry the request.";
            let reply = wire::error_reply(Api::Json, 503, Some(busy));
            return Ok(Step::Answer(reply.header("retry-after", retry_after)));
        }
        let session = self
            .sessions
            .get_mut(id)
            .ok_or_else(|| Rejection::status(404, NO_SESSION))?;
        if let Some(reply) = &session.finalized {
            return Ok(Step::Answer(reply.clone()));
        }
        match session.accept(chunk.content_range, chunk.data, max_bytes)? {
            Progress::Incomplete => Ok(Step::Answer(wire::incomplete(id, session.received()))),
            Progress::Complete => {
                self.completing.insert(id.to_string());
                Ok(Step::Complete(Box::new(session.complete(chunk.declared))))
            }
        }
    }

    /// Ends the completion of session `id`: `reply` is what the upload of its
    /// `data` was answered, `None` when the request went away before an answer.
    fn settle(&mut self, id: &str, reply: Option<&Reply>, data: &Bytes, max_bytes: u64) {
        self.completing.remove(id);
        let Some(session) = self.sessions.get_mut(id) else {
            return; // cancelled, or forgotten for a newer one, meanwhile
        };
        match reply {
            Some(reply) if reply.status == 200 => session.finalized = Some(reply.clone()),
            Some(reply) if reply.status != 503 => {
                self.sessions.remove(id);
            }
            // Not taken now: the bytes go back, for the client's retry.
            _ if data.is_empty() => {}
            _ => {
                let all = format!("bytes 0-{}/*", data.len() - 1);
                let restored = session.accept(Some(&all), data, max_bytes);
                debug_assert_eq!(restored, Ok(Progress::Incomplete));
            }
        }
    }
}

/// One request's part of a session: its `Content-Range`, body, and digests it
/// declares (`x-goog-hash`, typically on the last).
struct Chunk<'a> {
    content_range: Option<&'a str>,
    data: &'a [u8],
    declared: Declared,
}

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
        let id = self.sessions().sessions.open(Session::new(upload));
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
        match self.sessions().sessions.remove(id) {
            Some(_) => Ok(Reply::new(499)),
            None => Err(Rejection::status(404, NO_SESSION)),
        }
    }
}
