//! The resumable sessions the relay keeps, and what one request of a session leads
//! to: an answer (308, a completed session's 200, a busy 503), or an upload to
//! complete. No I/O and no uploader here: [`crate::resumable`] drives them.

use std::collections::BTreeSet;

use bytes::Bytes;
use fake_gcs::wire::{self, Api, Declared, Progress, Rejection, Reply, Session, Sessions, Upload};

pub(crate) const NO_SESSION: &str = "No such upload session.";

/// The sessions the relay keeps, and which of them are completing now.
#[derive(Debug)]
pub(crate) struct SessionTable {
    sessions: Sessions<Reply>,
    /// Sessions whose completed upload is with the uploader.
    completing: BTreeSet<String>,
}

/// What one request of a session leads to.
pub(crate) enum Step {
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

    /// Opens a session; returns its ID.
    pub(crate) fn open(&mut self, session: Session<Reply>) -> String {
        self.sessions.open(session)
    }

    /// Forgets session `id`, if it is kept.
    pub(crate) fn remove(&mut self, id: &str) -> Option<Session<Reply>> {
        self.sessions.remove(id)
    }

    /// Takes one request of session `id`.
    pub(crate) fn step(
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
    pub(crate) fn settle(&mut self, id: &str, reply: Option<&Reply>, data: &Bytes, max_bytes: u64) {
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
pub(crate) struct Chunk<'a> {
    pub(crate) content_range: Option<&'a str>,
    pub(crate) data: &'a [u8],
    pub(crate) declared: Declared,
}
