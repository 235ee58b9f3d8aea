//! The session table in memory: each session's state as a type ([`State`]), and the
//! totals the limits are checked against, changed only by [`Table`]'s methods, each
//! of which ends in [`Table::check`] (debug builds), which recomputes them.
//!
//! Totals:
//! - `bytes`: what open sessions hold on disk or have reserved: their chunks, the
//!   bytes reserved by the request writing a chunk now, and the files requests left
//!   behind ([`Open::leftovers`]) until they are removed. Every byte a session
//!   writes to disk is reserved here first, so `max_session_bytes` bounds the disk.
//! - `open`: sessions open, plus `opening`: places taken by opens still writing
//!   their first file (taken under the lock before any await, so that concurrent
//!   opens cannot overshoot `max_sessions`).
//! - `finished`: completed sessions kept for a retried final request.

use std::collections::{BTreeMap, BTreeSet};

use fake_gcs::wire::Reply;

use super::files::{done_name, opening_name};
use super::{Chunk, Found, Opening, SessionError};

/// One session.
#[derive(Debug)]
pub(crate) struct Session {
    /// The bucket its URL must name.
    pub(crate) bucket: String,
    /// The upstream it writes to, when known.
    pub(crate) upstream: Option<String>,
    /// When it was opened (Unix ms).
    pub(crate) created_ms: u64,
    pub(crate) state: State,
}

/// Where a session stands.
#[derive(Debug)]
pub(crate) enum State {
    /// Taking chunks.
    Open(Open),
    /// Its upload was made safe: the answer, for a retried final request.
    Finished {
        reply: Reply,
        /// When (Unix ms).
        finished_ms: u64,
    },
}

/// An open session.
#[derive(Debug)]
pub(crate) struct Open {
    pub(crate) opening: Opening,
    /// Durable chunks, following on from offset 0.
    pub(crate) chunks: Vec<Chunk>,
    /// A request holds the session now.
    pub(crate) busy: bool,
    /// Bytes that request reserved for the chunk it writes (0 when not busy).
    pub(crate) reserved: u64,
    /// Files requests left behind (a partial chunk of a request that broke off, a
    /// chunk whose directory sync failed), each with the bytes still counted for it
    /// until it is removed.
    pub(crate) leftovers: Vec<(String, u64)>,
}

impl Open {
    /// A session with no bytes yet.
    pub(crate) fn new(opening: Opening) -> Self {
        Open {
            opening,
            chunks: Vec::new(),
            busy: false,
            reserved: 0,
            leftovers: Vec::new(),
        }
    }

    /// Bytes received and durable.
    pub(crate) fn received(&self) -> u64 {
        self.chunks.last().map_or(0, Chunk::end)
    }

    /// Bytes counted against `max_session_bytes`.
    fn held(&self) -> u64 {
        self.received() + self.reserved + self.leftovers.iter().map(|(_, b)| b).sum::<u64>()
    }
}

impl Session {
    /// When it ends (Unix ms): `ttl_ms` after its opening, and a completed one at
    /// most `finished_keep_ms` after it completed.
    pub(crate) fn expires_ms(&self, ttl_ms: u64, finished_keep_ms: u64) -> u64 {
        let end = self.created_ms.saturating_add(ttl_ms);
        match &self.state {
            State::Finished { finished_ms, .. } => {
                end.min(finished_ms.saturating_add(finished_keep_ms))
            }
            State::Open(_) => end,
        }
    }

    /// Every file it may have on disk.
    pub(crate) fn files(&self, id: &str) -> Vec<String> {
        let mut names = vec![opening_name(id), done_name(id)];
        if let State::Open(open) = &self.state {
            names.extend(open.chunks.iter().map(|c| c.file_name(id)));
            names.extend(open.leftovers.iter().map(|(name, _)| name.clone()));
        }
        names
    }

    fn busy(&self) -> bool {
        matches!(&self.state, State::Open(open) if open.busy)
    }
}

/// The sessions and their totals; see the module doc.
#[derive(Debug, Default)]
pub(crate) struct Table {
    sessions: BTreeMap<String, Session>,
    bytes: u64,
    open: usize,
    opening: usize,
    finished: usize,
    /// When (Unix ms) opening a session next removes the expired ones.
    pub(crate) next_purge_ms: u64,
    /// The same when the table is full.
    pub(crate) next_full_purge_ms: u64,
}

impl Table {
    /// Session `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&Session> {
        self.sessions.get(id)
    }

    /// Bytes held by open sessions.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Open sessions, and places taken by opens in progress.
    pub(crate) fn open(&self) -> usize {
        self.open + self.opening
    }

    /// Completed sessions kept.
    #[cfg(test)]
    pub(crate) fn finished(&self) -> usize {
        self.finished
    }

    fn open_mut(&mut self, id: &str) -> Option<&mut Open> {
        match &mut self.sessions.get_mut(id)?.state {
            State::Open(open) => Some(open),
            State::Finished { .. } => None,
        }
    }

    /// Takes a place for a session about to be opened, if fewer than `max` are
    /// open or opening.
    pub(crate) fn take_place(&mut self, max: usize) -> Result<(), SessionError> {
        if self.open() >= max {
            return Err(SessionError::TooManySessions { max });
        }
        self.opening += 1;
        self.check();
        Ok(())
    }

    /// Gives back a place taken by an open that did not complete.
    pub(crate) fn give_back_place(&mut self) {
        debug_assert!(self.opening > 0);
        self.opening -= 1;
        self.check();
    }

    /// Session `id`, opened on a place taken with [`Table::take_place`].
    pub(crate) fn insert_opened(&mut self, id: String, session: Session) {
        debug_assert!(self.opening > 0);
        debug_assert!(matches!(&session.state, State::Open(o) if o.held() == 0));
        self.opening -= 1;
        self.open += 1;
        let before = self.sessions.insert(id, session);
        debug_assert!(before.is_none(), "a session ID repeated");
        self.check();
    }

    /// A session read from disk.
    pub(crate) fn insert_loaded(&mut self, id: String, session: Session) {
        match &session.state {
            State::Open(open) => {
                debug_assert!(!open.busy && open.reserved == 0);
                self.open += 1;
                self.bytes += open.held();
            }
            State::Finished { .. } => self.finished += 1,
        }
        self.sessions.insert(id, session);
        self.check();
    }

    /// Holds open session `id` (named with `bucket`, for `upstream`) for one
    /// request, or says why not.
    pub(crate) fn hold(
        &mut self,
        id: &str,
        bucket: &str,
        upstream: &str,
        alive: impl Fn(&Session) -> bool,
    ) -> Result<Found, SessionError> {
        let session = self
            .sessions
            .get_mut(id)
            .filter(|s| s.bucket == bucket && alive(s))
            .filter(|s| s.upstream.as_ref().is_none_or(|u| u == upstream))
            .ok_or(SessionError::NotFound)?;
        let open = match &mut session.state {
            State::Finished { reply, .. } => return Ok(Found::Finished(reply.clone())),
            State::Open(open) => open,
        };
        if open.busy {
            return Err(SessionError::InUse);
        }
        open.busy = true;
        let found = Found::Open {
            received: open.received(),
            opening: open.opening.clone(),
            leftovers: open.leftovers.iter().map(|(n, _)| n.clone()).collect(),
        };
        self.check();
        Ok(found)
    }

    /// Reserves `bytes` more for the chunk the request holding `id` writes, if the
    /// total stays within `max_total`.
    pub(crate) fn reserve(
        &mut self,
        id: &str,
        bytes: u64,
        max_total: u64,
    ) -> Result<(), SessionError> {
        if self.bytes.saturating_add(bytes) > max_total {
            return Err(SessionError::TooManyBytes { held: self.bytes });
        }
        let open = self.open_mut(id).expect("held");
        debug_assert!(open.busy);
        open.reserved += bytes;
        self.bytes += bytes;
        self.check();
        Ok(())
    }

    /// The chunk the request holding `id` wrote is durable: its reserved bytes are
    /// now the chunk's.
    pub(crate) fn committed(&mut self, id: &str, chunk: Chunk) {
        let open = self.open_mut(id).expect("held");
        debug_assert!(open.busy && open.reserved >= chunk.len);
        debug_assert_eq!(open.received(), chunk.offset, "chunks follow on");
        open.reserved -= chunk.len;
        open.chunks.push(chunk);
        self.check();
    }

    /// The request holding `id` ends. What it reserved is given back, except for
    /// `left` (a file it leaves behind), whose bytes stay counted until removed.
    pub(crate) fn release(&mut self, id: &str, left: Option<String>) {
        let Some(open) = self.open_mut(id) else {
            return; // forgotten meanwhile (cancelled, expired, finished)
        };
        debug_assert!(open.busy);
        let reserved = std::mem::take(&mut open.reserved);
        open.busy = false;
        match left {
            Some(name) => open.leftovers.push((name, reserved)),
            None => self.bytes -= reserved,
        }
        self.check();
    }

    /// Leftover files of `id` removed: their bytes are no longer counted.
    pub(crate) fn leftovers_removed(&mut self, id: &str, names: &[String]) {
        let Some(open) = self.open_mut(id) else {
            return;
        };
        let mut freed = 0;
        open.leftovers.retain(|(name, bytes)| {
            let removed = names.contains(name);
            freed += if removed { *bytes } else { 0 };
            !removed
        });
        self.bytes -= freed;
        self.check();
    }

    /// Session `id` completed with `reply`: it keeps only the answer. Returns the
    /// files to remove (its chunks, opening and leftovers, and those of the oldest
    /// completed sessions past `max_finished`).
    pub(crate) fn finish(
        &mut self,
        id: &str,
        reply: Reply,
        finished_ms: u64,
        max_finished: usize,
    ) -> Vec<String> {
        let held = match self.sessions.get(id).map(|s| &s.state) {
            Some(State::Open(open)) => open.held(),
            _ => return Vec::new(),
        };
        let session = self.sessions.get_mut(id).expect("found");
        let mut files: Vec<String> = session.files(id);
        files.retain(|name| *name != done_name(id));
        session.state = State::Finished { reply, finished_ms };
        self.bytes -= held;
        self.open -= 1;
        self.finished += 1;
        while self.finished > max_finished {
            let Some(oldest) = self.oldest_finished() else {
                break;
            };
            let evicted = self.remove(&oldest).expect("found");
            files.extend(evicted.files(&oldest));
        }
        self.check();
        files
    }

    fn oldest_finished(&self) -> Option<String> {
        (self.sessions.iter())
            .filter_map(|(id, s)| match &s.state {
                State::Finished { finished_ms, .. } => Some((*finished_ms, id)),
                State::Open(_) => None,
            })
            .min()
            .map(|(_, id)| id.clone())
    }

    /// Takes session `id` out, with what it held.
    pub(crate) fn remove(&mut self, id: &str) -> Option<Session> {
        let session = self.sessions.remove(id)?;
        match &session.state {
            State::Open(open) => {
                self.bytes -= open.held();
                self.open -= 1;
            }
            State::Finished { .. } => self.finished -= 1,
        }
        self.check();
        Some(session)
    }

    /// Sessions no request holds for which `expired` holds.
    pub(crate) fn expired(&self, expired: impl Fn(&Session) -> bool) -> Vec<String> {
        (self.sessions.iter())
            .filter(|(_, s)| !s.busy() && expired(s))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// After the directory was listed again (a failed sync): each open session
    /// keeps only the chunks found in `present`, and leftovers not found are no
    /// longer counted.
    pub(crate) fn keep_present(&mut self, present: &BTreeSet<&str>) {
        let mut freed = 0;
        for (id, session) in &mut self.sessions {
            let State::Open(open) = &mut session.state else {
                continue;
            };
            let before = open.held();
            let whole = (open.chunks.iter())
                .take_while(|c| present.contains(c.file_name(id).as_str()))
                .count();
            if whole < open.chunks.len() {
                tracing::warn!(
                    target: "spool_relay",
                    session = %id,
                    kept = whole,
                    lost = open.chunks.len() - whole,
                    "resumable sessions: chunks missing after a failed sync; the client resends them"
                );
            }
            open.chunks.truncate(whole);
            open.leftovers
                .retain(|(name, _)| present.contains(name.as_str()));
            freed += before - open.held();
        }
        self.bytes -= freed;
        self.check();
    }

    /// Recomputes the totals and checks every session's shape (debug builds).
    pub(crate) fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let (mut bytes, mut open, mut finished) = (0, 0, 0);
        for session in self.sessions.values() {
            match &session.state {
                State::Open(o) => {
                    open += 1;
                    bytes += o.held();
                    assert!(
                        o.busy || o.reserved == 0,
                        "a free session holds a reservation"
                    );
                    let mut end = 0;
                    for chunk in &o.chunks {
                        assert_eq!(chunk.offset, end, "chunks follow on from 0");
                        end = chunk.end();
                    }
                }
                State::Finished { .. } => finished += 1,
            }
        }
        assert_eq!(self.bytes, bytes, "session bytes drifted");
        assert_eq!(self.open, open, "open sessions drifted");
        assert_eq!(self.finished, finished, "finished sessions drifted");
    }
}
