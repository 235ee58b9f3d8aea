//! The resumable sessions the relay keeps, durably, beside the spool
//! (`<spool dir>/sessions/`, through the spool's own disk), so that a session
//! survives a restart or a deploy of the relay as Cloud Storage's survive its own
//! (for a week). What the store promises:
//!
//! - A session ID is 128 random bits (from the OS, or from a seed under simulation),
//!   and a session answers only to requests that name its bucket, on a relay with
//!   its upstream: an ID cannot be guessed, one client's session is never another's
//!   after a restart, and a session never completes into another upstream.
//! - Every byte counted in a 308 is durable first: a chunk is written to a partial
//!   file, synced, renamed to a name that carries its offset, length and crc32c, and
//!   the directory synced, before the session's count moves. A status query after a
//!   power loss answers what is on disk, never more. One path to the disk
//!   ([`disk::SessionDisk`]) latches the first failed sync.
//! - Every byte a session puts on disk is counted against `max_session_bytes` before
//!   it is written (a chunk arriving, a file a broken request left behind, until it
//!   is removed), and at most `max_sessions` sessions are open, the place taken
//!   before any await; the totals are checked after every change
//!   ([`table::Table::check`]).
//! - Loading (once, at the first session request) keeps each session's chunks that
//!   follow on from offset 0 and match their crc32c, and drops the rest with what
//!   was never acknowledged (partial files), expired sessions and sessions of
//!   another upstream.
//!
//! Files: see `files.rs`. Bounds: `max_sessions` open (one more is refused with
//! 503, never by forgetting one in progress) and as many completed ones kept (the
//! oldest answer is dropped first), `max_session_bytes` in all (past it a chunk is
//! refused with 503), and `session_ttl` of life from the opening (a completed
//! session keeps only its answer, for [`FINISHED_KEEP`]). Expired sessions are
//! removed, with their files, as new ones open.

mod disk;
mod files;
mod table;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use fake_gcs::wire::{Query, Rejection, Reply, RequestHead, Upload};
use http::HeaderMap;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use spool::{Clock, Disk};

use self::disk::SessionDisk;
use self::files::{
    DoneFile, FORMAT_VERSION, OpeningFile, done_name, id_of, opening_name, parse_chunk_name,
    partial_name,
};
use self::table::{Open, Session, State, Table};

/// The directory beside the spool's `entries/` that holds the sessions.
pub const SESSIONS_DIR: &str = "sessions";

/// How long a completed session keeps its answer for a retried final request. The
/// official clients retry for minutes (Node's default deadline is 10 minutes,
/// Python's 2); an hour covers them, and keeps a busy relay from holding every
/// completed upload's answer for the whole `session_ttl`.
pub const FINISHED_KEEP: Duration = Duration::from_secs(3600);

/// How often (in the clock's time) opening a session also removes the expired
/// ones: often enough that they do not pile up, rarely enough that the walk over
/// the table costs nothing per session.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// How often, at most, a full table is walked for expired sessions: a flood of
/// opens refused for a full table must not each walk it.
const PURGE_WHEN_FULL_EVERY: Duration = Duration::from_secs(1);

/// How often, at most, session requests try to take durable steps again after a
/// failed sync.
const RECOVER_EVERY: Duration = Duration::from_secs(1);

/// Limits on the sessions kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Open at once; as many completed ones are kept.
    pub(crate) max_sessions: usize,
    pub(crate) max_session_bytes: u64,
    pub(crate) ttl: Duration,
}

/// Why a session request could not be served; `resumable.rs` maps each to HTTP.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// No session by that ID, bucket and upstream (or it expired).
    #[error("No such upload session.")]
    NotFound,
    /// Another request holds the session.
    #[error("Another request of this session is in progress; retry the request.")]
    InUse,
    /// `max_sessions` are open.
    #[error(
        "The relay keeps at most {max} resumable sessions open at once (--max-sessions); \
         retry later."
    )]
    TooManySessions {
        /// The limit.
        max: usize,
    },
    /// `max_session_bytes` are held.
    #[error(
        "The relay's resumable sessions hold {held} bytes, its limit (--max-session-bytes); \
         retry later."
    )]
    TooManyBytes {
        /// Bytes held now.
        held: u64,
    },
    /// A session file could not be written or read.
    #[error("resumable session storage failed on {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the disk said.
        source: std::io::Error,
    },
    /// Durable steps are refused since a sync failed (see `disk.rs`).
    #[error("resumable session storage stopped taking writes after a failed sync ({reason})")]
    Stopped {
        /// The first failure.
        reason: String,
    },
    /// A chunk file does not hold what its name says.
    #[error("the chunk file of this session's bytes from offset {at} is damaged")]
    Damaged {
        /// Where the damaged chunk starts.
        at: u64,
    },
}

/// The opening request of a session, as kept: enough to parse its upload again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Opening {
    pub(crate) bucket: String,
    /// The query string as the client sent it.
    pub(crate) query: String,
    pub(crate) upload_content_type: Option<String>,
    /// The JSON resource the opening request carried (may be empty).
    pub(crate) resource: Bytes,
}

impl Opening {
    /// The upload this session completes into (without its bytes).
    pub(crate) fn upload(&self) -> Result<Upload, Rejection> {
        let query = Query::parse(Some(&self.query));
        let mut headers = HeaderMap::new();
        if let Some(kind) = &self.upload_content_type
            && let Ok(value) = kind.parse()
        {
            headers.insert("x-upload-content-type", value);
        }
        let head = RequestHead {
            query: &query,
            headers: &headers,
        };
        Upload::resumable(&self.bucket, head, &self.resource)
    }

    fn file(&self, created_ms: u64, upstream: &str) -> OpeningFile {
        OpeningFile {
            version: FORMAT_VERSION,
            bucket: self.bucket.clone(),
            query: self.query.clone(),
            upload_content_type: self.upload_content_type.clone(),
            resource: String::from_utf8_lossy(&self.resource).into_owned(),
            created_ms,
            upstream: Some(upstream.to_string()),
        }
    }

    fn from_file(file: OpeningFile) -> Self {
        Opening {
            bucket: file.bucket,
            query: file.query,
            upload_content_type: file.upload_content_type,
            resource: Bytes::from(file.resource),
        }
    }
}

/// One chunk on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) crc32c: u32,
}

impl Chunk {
    pub(crate) fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// What the table finds for a request (before the store holds it).
#[derive(Debug)]
pub(crate) enum Found {
    Finished(Reply),
    Open {
        received: u64,
        opening: Opening,
        /// Files earlier requests left behind, to remove before writing.
        leftovers: Vec<String>,
    },
}

/// What a request of a session finds.
pub(crate) enum Request {
    /// The session completed: its answer.
    Finished(Reply),
    /// Open, and now held by this request until the [`Hold`] drops.
    Open {
        received: u64,
        opening: Opening,
        hold: Hold,
    },
}

/// The sessions, on disk and in memory; see the module doc.
pub(crate) struct SessionStore {
    disk: SessionDisk,
    clock: Arc<dyn Clock>,
    limits: Limits,
    /// Who the sessions write to: a session opened for another upstream is not
    /// found.
    upstream: String,
    ids: Mutex<ChaCha20Rng>,
    table: Mutex<Table>,
    loaded: tokio::sync::OnceCell<()>,
    /// Partial files written by this run, for unique names.
    partials: std::sync::atomic::AtomicU64,
    /// The failure (its epoch) requests try to recover from, and when (Unix ms)
    /// they next try.
    recovery: Mutex<(u64, u64)>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("dir", &self.disk.dir())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl SessionStore {
    /// Sessions under `spool_dir/sessions/` on `disk`, writing to `upstream`; IDs
    /// from `id_seed` (under simulation) or from the OS.
    pub(crate) fn new(
        disk: Arc<dyn Disk>,
        spool_dir: &Path,
        clock: Arc<dyn Clock>,
        limits: Limits,
        id_seed: Option<u64>,
        upstream: String,
    ) -> Self {
        let ids = match id_seed {
            Some(seed) => ChaCha20Rng::seed_from_u64(seed),
            None => ChaCha20Rng::from_os_rng(),
        };
        Self {
            disk: SessionDisk::new(disk, spool_dir.join(SESSIONS_DIR)),
            clock,
            limits,
            upstream,
            ids: Mutex::new(ids),
            table: Mutex::new(Table::default()),
            loaded: tokio::sync::OnceCell::new(),
            partials: Default::default(),
            recovery: Mutex::new((0, 0)),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ttl_ms(&self) -> u64 {
        self.limits.ttl.as_millis() as u64
    }

    fn alive(&self, now: u64) -> impl Fn(&Session) -> bool {
        let ttl_ms = self.ttl_ms();
        move |s: &Session| now <= s.expires_ms(ttl_ms, FINISHED_KEEP.as_millis() as u64)
    }

    /// A new session ID: 128 random bits, as 32 lower-case hex digits.
    fn new_id(&self) -> String {
        let bits: u128 = self.ids.lock().unwrap_or_else(|e| e.into_inner()).random();
        format!("{bits:032x}")
    }

    /// Opens a session for `opening`; returns its ID once it is durable.
    pub(crate) async fn open(self: &Arc<Self>, opening: Opening) -> Result<String, SessionError> {
        self.ready().await?;
        self.purge_expired().await;
        let place = Place::take(self)?;
        let id = self.new_id();
        let created_ms = self.clock.now_unix_ms();
        let file = opening.file(created_ms, &self.upstream);
        let json = serde_json::to_vec(&file).expect("a session file serializes");
        self.disk.create_synced(&opening_name(&id), json).await?;
        let session = Session {
            bucket: opening.bucket.clone(),
            upstream: Some(self.upstream.clone()),
            created_ms,
            state: State::Open(Open::new(opening)),
        };
        place.fill(id.clone(), session);
        Ok(id)
    }

    /// Finds session `id` for a request that names `bucket`, and holds it for that
    /// request when it is open, after removing the files earlier requests left.
    pub(crate) async fn find(
        self: &Arc<Self>,
        id: &str,
        bucket: &str,
    ) -> Result<Request, SessionError> {
        self.ready().await?;
        let now = self.clock.now_unix_ms();
        let found = self
            .table()
            .hold(id, bucket, &self.upstream, self.alive(now))?;
        let (received, opening, leftovers) = match found {
            Found::Finished(reply) => return Ok(Request::Finished(reply)),
            Found::Open {
                received,
                opening,
                leftovers,
            } => (received, opening, leftovers),
        };
        let hold = Hold {
            store: self.clone(),
            id: id.to_string(),
            partial: None,
        };
        if !leftovers.is_empty()
            && self
                .disk
                .remove_best_effort(&leftovers, "left by a request that did not finish")
                .await
        {
            self.table().leftovers_removed(id, &leftovers);
        }
        Ok(Request::Open {
            received,
            opening,
            hold,
        })
    }

    /// Why session writes are refused now (a failed sync, not yet recovered from).
    pub(crate) fn stopped(&self) -> Option<String> {
        self.disk.stopped().map(|(reason, _)| reason)
    }

    /// The session's chunks that hold bytes from `from` on (all of them for 0).
    pub(crate) fn chunks_from(&self, id: &str, from: u64) -> Vec<Chunk> {
        let table = self.table();
        let Some(State::Open(open)) = table.get(id).map(|s| &s.state) else {
            return Vec::new();
        };
        let first = open.chunks.partition_point(|c| c.end() <= from);
        open.chunks[first..].to_vec()
    }

    /// `len` bytes of `chunk` of session `id` from `at` (an offset in the object).
    pub(crate) async fn read(
        &self,
        id: &str,
        chunk: &Chunk,
        at: u64,
        len: u64,
    ) -> Result<Vec<u8>, SessionError> {
        debug_assert!(chunk.offset <= at && at + len <= chunk.end());
        let read = self
            .disk
            .read_range(&chunk.file_name(id), at - chunk.offset, len)
            .await?;
        match read.len() as u64 == len {
            true => Ok(read),
            false => Err(SessionError::Damaged { at: chunk.offset }),
        }
    }

    /// Session `id`, held by `hold`, completed with `reply`: its answer is kept
    /// (durably, with the session's bucket) for a retried final request; its
    /// chunks and opening are removed.
    pub(crate) async fn finish(&self, hold: &Hold, reply: &Reply) -> Result<(), SessionError> {
        let id = &hold.id;
        let finished_ms = self.clock.now_unix_ms();
        let (bucket, created_ms) = {
            let table = self.table();
            let session = table.get(id).ok_or(SessionError::NotFound)?;
            (session.bucket.clone(), session.created_ms)
        };
        let file = DoneFile {
            version: FORMAT_VERSION,
            status: reply.status,
            headers: reply
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            body: String::from_utf8_lossy(&reply.body).into_owned(),
            finished_ms,
            bucket: Some(bucket),
            created_ms: Some(created_ms),
            upstream: Some(self.upstream.clone()),
        };
        let json = serde_json::to_vec(&file).expect("a session file serializes");
        self.disk.create_synced(&done_name(id), json).await?;
        let max_finished = self.limits.max_sessions;
        let removed = self
            .table()
            .finish(id, reply.clone(), finished_ms, max_finished);
        self.disk
            .remove_best_effort(&removed, "a completed session's chunks")
            .await;
        Ok(())
    }

    /// Forgets session `id` and its files (cancelled, or refused for good).
    pub(crate) async fn forget(&self, id: &str) -> bool {
        let Some(session) = self.table().remove(id) else {
            return false;
        };
        let files = session.files(id);
        self.disk
            .remove_best_effort(&files, "a session forgotten")
            .await;
        self.disk.sync_after_removals().await;
        true
    }

    /// Loaded, and taking durable steps (or recovered now, when a failed sync had
    /// stopped them and a second has passed since the last try).
    async fn ready(&self) -> Result<(), SessionError> {
        self.loaded.get_or_try_init(|| self.load()).await?;
        let Some((reason, epoch)) = self.disk.stopped() else {
            return Ok(());
        };
        let now = self.clock.now_unix_ms();
        {
            let mut recovery = self.recovery.lock().unwrap_or_else(|e| e.into_inner());
            let (seen, next_ms) = &mut *recovery;
            let due = *seen == epoch && now >= *next_ms;
            *seen = epoch;
            if !due {
                // A failure just seen waits a while: a disk that fails syncs is not
                // listed and synced on every request.
                if *next_ms <= now {
                    *next_ms = now + RECOVER_EVERY.as_millis() as u64;
                }
                return Err(SessionError::Stopped { reason });
            }
            *next_ms = now + RECOVER_EVERY.as_millis() as u64;
        }
        let names = self.disk.recover().await?;
        let present: BTreeSet<&str> = names.iter().collect();
        self.table().keep_present(&present);
        Ok(())
    }

    /// Removes the sessions that expired (an abandoned upload past `session_ttl`,
    /// a completed one past [`FINISHED_KEEP`]) and their files, at most once per
    /// [`PURGE_EVERY`], and when the table is full of open sessions at most once per
    /// [`PURGE_WHEN_FULL_EVERY`] (an expired one must not keep a new one out).
    async fn purge_expired(&self) {
        let now = self.clock.now_unix_ms();
        let alive = self.alive(now);
        let files: Vec<String> = {
            let mut table = self.table();
            let full = table.open() >= self.limits.max_sessions;
            let due = now >= table.next_purge_ms || (full && now >= table.next_full_purge_ms);
            if !due {
                return;
            }
            table.next_purge_ms = now.saturating_add(PURGE_EVERY.as_millis() as u64);
            table.next_full_purge_ms = now.saturating_add(PURGE_WHEN_FULL_EVERY.as_millis() as u64);
            let expired = table.expired(|s| !alive(s));
            (expired.iter())
                .filter_map(|id| Some(table.remove(id)?.files(id)))
                .flatten()
                .collect()
        };
        if files.is_empty() {
            return;
        }
        tracing::info!(target: "spool_relay", files = files.len(), "resumable sessions: removing expired sessions");
        self.disk
            .remove_best_effort(&files, "expired sessions")
            .await;
        self.disk.sync_after_removals().await;
    }

    /// Reads the sessions from disk.
    async fn load(&self) -> Result<(), SessionError> {
        let names = self.disk.list().await?;
        let mut by_id: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for name in names.iter() {
            by_id.entry(id_of(name)).or_default().push(name);
        }
        let now = self.clock.now_unix_ms();
        let mut loaded = Table::default();
        let mut stale = Vec::new();
        for (id, names) in by_id {
            match self.load_session(id, &names, now).await? {
                Some((session, dropped)) => {
                    stale.extend(dropped);
                    loaded.insert_loaded(id.to_string(), session);
                }
                None => stale.extend(names.iter().map(|n| n.to_string())),
            }
        }
        if !stale.is_empty() {
            tracing::info!(
                target: "spool_relay",
                files = stale.len(),
                "resumable sessions: removing files never acknowledged, expired, damaged or \
                 of another upstream"
            );
            self.disk.remove_best_effort(&stale, "found at load").await;
            self.disk.sync_after_removals().await;
        }
        *self.table() = loaded;
        Ok(())
    }

    /// One session from its files, and the files to drop; `None` when the whole
    /// session goes (no opening on disk, expired, unreadable, another upstream).
    async fn load_session(
        &self,
        id: &str,
        names: &[&str],
        now: u64,
    ) -> Result<Option<(Session, Vec<String>)>, SessionError> {
        let (done, meta) = (done_name(id), opening_name(id));
        let done_file: Option<DoneFile> = match names.contains(&done.as_str()) {
            true => serde_json::from_slice(&self.disk.read(&done).await?).ok(),
            false => None,
        };
        let opening_file: Option<OpeningFile> = match names.contains(&meta.as_str()) {
            true => serde_json::from_slice(&self.disk.read(&meta).await?).ok(),
            false => None,
        };
        // A version 1 answer names no bucket: its opening stays beside it.
        let answer_needs_opening = done_file.as_ref().is_some_and(|d| d.bucket.is_none());
        let session = match (done_file, opening_file) {
            (Some(done), opening) => finished_session(done, opening),
            (None, Some(opening)) => Some(Session {
                bucket: opening.bucket.clone(),
                upstream: opening.upstream.clone(),
                created_ms: opening.created_ms,
                state: State::Open(Open::new(Opening::from_file(opening))),
            }),
            (None, None) => None,
        };
        let Some(mut session) = session else {
            return Ok(None);
        };
        let other_upstream = session
            .upstream
            .as_ref()
            .is_some_and(|u| *u != self.upstream);
        if other_upstream || !self.alive(now)(&session) {
            return Ok(None);
        }
        let mut keep = vec![done];
        if let State::Open(open) = &mut session.state {
            open.chunks = self.verified_chunks(id, names).await;
            keep.extend(open.chunks.iter().map(|c| c.file_name(id)));
            keep.push(meta);
        } else if answer_needs_opening {
            keep.push(meta);
        }
        let dropped = (names.iter())
            .filter(|name| !keep.iter().any(|k| k == *name))
            .map(|name| name.to_string())
            .collect();
        Ok(Some((session, dropped)))
    }

    /// The chunk files of session `id` that follow on from offset 0 and hold what
    /// their names say.
    async fn verified_chunks(&self, id: &str, names: &[&str]) -> Vec<Chunk> {
        let mut found: Vec<Chunk> = names
            .iter()
            .filter_map(|name| parse_chunk_name(id, name))
            .collect();
        found.sort_by_key(|c| c.offset);
        let mut chunks = Vec::new();
        let mut end = 0;
        for chunk in found {
            if chunk.offset == end && self.crc_matches(id, chunk).await {
                end = chunk.end();
                chunks.push(chunk);
            }
        }
        chunks
    }

    async fn crc_matches(&self, id: &str, chunk: Chunk) -> bool {
        let mut crc = 0;
        let mut at = chunk.offset;
        while at < chunk.end() {
            let step = (chunk.end() - at).min(crate::body::PIECE_BYTES as u64);
            match self.read(id, &chunk, at, step).await {
                Ok(piece) => crc = crc32c::crc32c_append(crc, &piece),
                Err(_) => return false,
            }
            at += step;
        }
        crc == chunk.crc32c
    }
}

/// A completed session from its `ID.done` (and, for version 1, its `ID.session`).
fn finished_session(done: DoneFile, opening: Option<OpeningFile>) -> Option<Session> {
    let bucket = done
        .bucket
        .or_else(|| Some(opening.as_ref()?.bucket.clone()))?;
    let created_ms = done
        .created_ms
        .or_else(|| Some(opening.as_ref()?.created_ms))?;
    let upstream = done.upstream.or_else(|| opening?.upstream);
    let mut reply = Reply::new(done.status);
    for (name, value) in done.headers {
        reply = reply.header(name, value);
    }
    Some(Session {
        bucket,
        upstream,
        created_ms,
        state: State::Finished {
            reply: reply.body(done.body),
            finished_ms: done.finished_ms.max(created_ms),
        },
    })
}

/// A place in the table for a session being opened, taken before any await; given
/// back when dropped unfilled (the open failed, or its request was dropped).
struct Place<'a> {
    store: &'a SessionStore,
    filled: bool,
}

impl<'a> Place<'a> {
    fn take(store: &'a SessionStore) -> Result<Self, SessionError> {
        store.table().take_place(store.limits.max_sessions)?;
        Ok(Place {
            store,
            filled: false,
        })
    }

    fn fill(mut self, id: String, session: Session) {
        self.store.table().insert_opened(id, session);
        self.filled = true;
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if !self.filled {
            self.store.table().give_back_place();
        }
    }
}

/// A request's hold on an open session: while it lives no other request of the
/// session proceeds; the bytes it reserves stay counted while the file it writes
/// exists.
pub(crate) struct Hold {
    store: Arc<SessionStore>,
    pub(crate) id: String,
    /// The partial file this request has written to, not yet committed or removed.
    partial: Option<String>,
}

impl Hold {
    /// Reserves `bytes` more of the sessions' room for this request's chunk, or
    /// refuses past `max_session_bytes` in all.
    pub(crate) fn reserve(&mut self, bytes: u64) -> Result<(), SessionError> {
        let max = self.store.limits.max_session_bytes;
        self.store.table().reserve(&self.id, bytes, max)
    }

    /// Appends `piece` (reserved first) to this request's partial chunk file, which
    /// starts at `offset`.
    pub(crate) async fn append(&mut self, offset: u64, piece: Bytes) -> Result<(), SessionError> {
        let name = self.partial.get_or_insert_with(|| {
            use std::sync::atomic::Ordering::Relaxed;
            let n = self.store.partials.fetch_add(1, Relaxed);
            partial_name(&self.id, offset, n)
        });
        self.store.disk.append(name, piece).await
    }

    /// Makes the partial file durable as `chunk` and counts it.
    pub(crate) async fn commit(&mut self, chunk: Chunk) -> Result<(), SessionError> {
        let partial = self.partial.take().expect("a chunk was written");
        match self
            .store
            .disk
            .commit(&partial, &chunk.file_name(&self.id))
            .await
        {
            Ok(()) => {
                self.store.table().committed(&self.id, chunk);
                Ok(())
            }
            Err((e, left)) => {
                self.partial = Some(left);
                Err(e)
            }
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.store.table().release(&self.id, self.partial.take());
    }
}
