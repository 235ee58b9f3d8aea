//! Resumable upload sessions: created by `uploadType=resumable`, fed by `PUT`s with
//! `Content-Range`, finalized when the bytes received reach the declared total.
//!
//! A session keeps its bytes until it is finalized (each upload is bounded by
//! `Limits::max_request_bytes`). A finalized session remembers its object so a
//! retried final request gets the same answer. At most
//! `Limits::max_upload_sessions` sessions are kept; the oldest is forgotten first
//! (its next request gets 404, as an expired session does on Cloud Storage).

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::BytesMut;

use crate::bucket::{ObjectRecord, Preconditions};
use crate::wire::Declared;

/// One resumable upload.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) bucket: String,
    pub(crate) name: String,
    pub(crate) content_type: Cow<'static, str>,
    pub(crate) preconditions: Preconditions,
    /// Digests declared in the initiating metadata.
    pub(crate) declared: Declared,
    pub(crate) received: BytesMut,
    /// Set once the upload completed (successfully).
    pub(crate) finalized: Option<ObjectRecord>,
}

/// The open sessions.
#[derive(Debug)]
pub(crate) struct Uploads {
    sessions: BTreeMap<u64, Session>,
    next_id: u64,
    max_sessions: usize,
}

impl Uploads {
    pub(crate) fn new(max_sessions: usize) -> Self {
        Self {
            sessions: BTreeMap::new(),
            next_id: 1,
            max_sessions: max_sessions.max(1),
        }
    }

    /// Opens a session; returns its `upload_id`.
    pub(crate) fn open(&mut self, session: Session) -> String {
        while self.sessions.len() >= self.max_sessions {
            self.sessions.pop_first();
        }
        let id = self.next_id;
        self.next_id += 1;
        self.sessions.insert(id, session);
        format!("session-{id}")
    }

    fn parse_id(id: &str) -> Option<u64> {
        id.strip_prefix("session-")?.parse().ok()
    }

    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.get_mut(&Self::parse_id(id)?)
    }

    pub(crate) fn remove(&mut self, id: &str) -> Option<Session> {
        self.sessions.remove(&Self::parse_id(id)?)
    }
}
