//! The resumable sessions the relay keeps, durably, beside the spool
//! (`<spool dir>/sessions/`, through the spool's own disk), so that a session
//! survives a restart or a deploy of the relay as Cloud Storage's survive its own
//! (for a week). What the table promises:
//!
//! - A session ID is 128 random bits (from the OS, or from a seed under simulation),
//!   and a session answers only to requests that name its bucket: an ID cannot be
//!   guessed, and one client's session is never another's after a restart.
//! - Every byte counted in a 308 is durable first: a chunk is written to a
//!   `.partial` file, synced, renamed to a name that carries its offset, length and
//!   crc32c, and the directory synced, before the session's count moves. A status
//!   query after a power loss answers what is on disk, never more.
//! - Loading (once, at the first session request) keeps each session's chunks that
//!   follow on from offset 0 and match their crc32c, and drops the rest with what
//!   was never acknowledged (`.partial` files) and expired sessions.
//!
//! On disk, session `ID` is:
//!
//! | file | what | durable |
//! |---|---|---|
//! | `ID.session` | the opening request (bucket, query, upload content type, resource) and its time, JSON | before the session's URL is answered |
//! | `ID.OFFSET.LEN.CRC.chunk` | bytes `OFFSET..OFFSET+LEN` (OFFSET 20 digits, CRC 8 hex digits) | before the 308 that counts them |
//! | `ID.OFFSET.partial` | a chunk arriving | never (dropped at load) |
//! | `ID.done` | the final answer and its time, JSON, for a retried final request (with `ID.session`, for [`FINISHED_KEEP`]) | after the upload was made safe |
//!
//! Bounds: at most `max_sessions` sessions open at once (one more is refused with
//! 503, never by forgetting one in progress), `max_session_bytes` of chunks in all
//! (past it a chunk is refused with 503), each session at most `max_object_bytes`,
//! and `session_ttl` of life from its opening (a completed one keeps its answer
//! for [`FINISHED_KEEP`]). Expired sessions are removed, with their files, as new
//! ones open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use fake_gcs::wire::{Query, Rejection, Reply, RequestHead, Upload};
use http::HeaderMap;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde_json::{Value, json};
use spool::{Clock, Disk};

/// The directory beside the spool's `entries/` that holds the sessions.
pub const SESSIONS_DIR: &str = "sessions";

const NO_SESSION: &str = "No such upload session.";

/// How long a completed session keeps its answer for a retried final request. The
/// official clients retry for minutes (Node's default deadline is 10 minutes,
/// Python's 2); an hour covers them, and keeps a busy relay from holding every
/// completed upload's answer, in memory and on disk, for the whole `session_ttl`.
pub const FINISHED_KEEP: Duration = Duration::from_secs(3600);

/// How often (in the clock's time) opening a session also removes the expired
/// ones: often enough that they do not pile up, rarely enough that the walk over
/// the table costs nothing per session.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// How often, at most, a full table is walked for expired sessions: a flood of
/// opens refused for a full table must not each walk it.
const PURGE_WHEN_FULL_EVERY: Duration = Duration::from_secs(1);

/// Limits on the sessions kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max_sessions: usize,
    pub(crate) max_session_bytes: u64,
    pub(crate) ttl: Duration,
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

    fn to_json(&self, created_ms: u64) -> Vec<u8> {
        let resource = String::from_utf8_lossy(&self.resource);
        json!({
            "bucket": self.bucket,
            "query": self.query,
            "uploadContentType": self.upload_content_type,
            "resource": resource,
            "createdMs": created_ms,
        })
        .to_string()
        .into_bytes()
    }

    fn from_json(data: &[u8]) -> Option<(Self, u64)> {
        let value: Value = serde_json::from_slice(data).ok()?;
        let text = |key: &str| value.get(key)?.as_str().map(str::to_string);
        let opening = Opening {
            bucket: text("bucket")?,
            query: text("query")?,
            upload_content_type: text("uploadContentType"),
            resource: Bytes::from(text("resource")?),
        };
        Some((opening, value.get("createdMs")?.as_u64()?))
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
    fn file_name(&self, id: &str) -> String {
        format!(
            "{id}.{:020}.{}.{:08x}.chunk",
            self.offset, self.len, self.crc32c
        )
    }

    fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// One session in the table.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) opening: Opening,
    created_ms: u64,
    pub(crate) chunks: Vec<Chunk>,
    /// A request is writing to it or completing it now.
    busy: bool,
    /// The final answer, once its upload was made safe.
    pub(crate) finalized: Option<Reply>,
    /// When it was made safe (Unix ms), once it was.
    finished_ms: u64,
    /// A request that broke off may have left bytes in the partial chunk file.
    partial_left: bool,
}

impl Session {
    /// When the session ends (Unix ms): `ttl_ms` after its opening, and a completed
    /// one at most [`FINISHED_KEEP`] after it completed.
    fn expires_ms(&self, ttl_ms: u64) -> u64 {
        let end = self.created_ms.saturating_add(ttl_ms);
        match self.finalized {
            Some(_) => end.min(
                self.finished_ms
                    .saturating_add(FINISHED_KEEP.as_millis() as u64),
            ),
            None => end,
        }
    }

    /// Bytes received and durable.
    pub(crate) fn received(&self) -> u64 {
        self.chunks.last().map_or(0, Chunk::end)
    }
}

/// What a request of a session finds.
pub(crate) enum Found {
    /// The session completed: its answer.
    Finalized(Reply),
    /// Open, and now held by this request until the guard drops.
    Open {
        received: u64,
        opening: Opening,
        guard: Busy,
    },
}

#[derive(Debug, Default)]
struct Table {
    sessions: BTreeMap<String, Session>,
    /// Chunk bytes held on disk by open sessions, and reserved by chunks arriving.
    bytes: u64,
    /// Sessions not yet completed (counted, so that an open need not walk the table).
    open_sessions: usize,
    /// When (Unix ms) opening a session next removes the expired ones.
    next_purge_ms: u64,
    /// The same when the table is full.
    next_full_purge_ms: u64,
}

impl Table {
    /// Takes session `id` out, and the bytes it held when it was open.
    fn remove(&mut self, id: &str) -> Option<Session> {
        let session = self.sessions.remove(id)?;
        if session.finalized.is_none() {
            self.bytes = self.bytes.saturating_sub(session.received());
            self.open_sessions -= 1;
        }
        Some(session)
    }
}

/// The sessions, on disk and in memory; see the module doc.
pub(crate) struct SessionStore {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    limits: Limits,
    ids: Mutex<ChaCha20Rng>,
    table: Mutex<Table>,
    loaded: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("dir", &self.dir)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl SessionStore {
    /// Sessions under `spool_dir/sessions/` on `disk`; IDs from `id_seed` (under
    /// simulation) or from the OS.
    pub(crate) fn new(
        disk: Arc<dyn Disk>,
        spool_dir: &Path,
        clock: Arc<dyn Clock>,
        limits: Limits,
        id_seed: Option<u64>,
    ) -> Self {
        let ids = match id_seed {
            Some(seed) => ChaCha20Rng::seed_from_u64(seed),
            None => ChaCha20Rng::from_os_rng(),
        };
        Self {
            disk,
            dir: spool_dir.join(SESSIONS_DIR),
            clock,
            limits,
            ids: Mutex::new(ids),
            table: Mutex::new(Table::default()),
            loaded: tokio::sync::OnceCell::new(),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A new session ID: 128 random bits, as 32 lower-case hex digits.
    fn new_id(&self) -> String {
        let bits: u128 = self.ids.lock().unwrap_or_else(|e| e.into_inner()).random();
        format!("{bits:032x}")
    }

    /// Opens a session for `opening`; returns its ID once it is durable.
    pub(crate) async fn open(&self, opening: Opening) -> Result<String, Rejection> {
        self.load().await?;
        self.purge_expired().await;
        {
            let table = self.table();
            if table.open_sessions >= self.limits.max_sessions {
                return Err(busy_rejection(format!(
                    "The relay keeps at most {} resumable sessions open at once \
                     (--max-sessions); retry later.",
                    self.limits.max_sessions
                )));
            }
        }
        let id = self.new_id();
        let created_ms = self.clock.now_unix_ms();
        let meta = opening.to_json(created_ms);
        let path = self.path(&format!("{id}.session"));
        self.disk
            .create_synced(&path, meta.into())
            .await
            .map_err(io_rejection)?;
        self.disk.sync_dir(&self.dir).await.map_err(io_rejection)?;
        let mut table = self.table();
        table.open_sessions += 1;
        table.sessions.insert(
            id.clone(),
            Session {
                opening,
                created_ms,
                chunks: Vec::new(),
                busy: false,
                finalized: None,
                finished_ms: 0,
                partial_left: false,
            },
        );
        Ok(id)
    }

    /// Removes the sessions that expired (an abandoned upload past `session_ttl`,
    /// a completed one past [`FINISHED_KEEP`]) and their files, at most once per
    /// [`PURGE_EVERY`], and when the table is full of open sessions at most once per
    /// [`PURGE_WHEN_FULL_EVERY`] (an expired one must not keep a new one out).
    async fn purge_expired(&self) {
        let now = self.clock.now_unix_ms();
        let ttl_ms = self.limits.ttl.as_millis() as u64;
        let expired: Vec<(String, Session)> = {
            let mut table = self.table();
            let full = table.open_sessions >= self.limits.max_sessions;
            let due = now >= table.next_purge_ms || (full && now >= table.next_full_purge_ms);
            if !due {
                return;
            }
            table.next_purge_ms = now.saturating_add(PURGE_EVERY.as_millis() as u64);
            table.next_full_purge_ms = now.saturating_add(PURGE_WHEN_FULL_EVERY.as_millis() as u64);
            let ids: Vec<String> = (table.sessions.iter())
                .filter(|(_, s)| !s.busy && now > s.expires_ms(ttl_ms))
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| table.remove(&id).map(|s| (id, s)))
                .collect()
        };
        if expired.is_empty() {
            return;
        }
        tracing::info!(target: "spool_relay", sessions = expired.len(), "resumable sessions: removing expired sessions");
        let paths: Vec<PathBuf> = (expired.iter())
            .flat_map(|(id, session)| self.files_of(id, session))
            .collect();
        let _ = self.disk.remove_all(&paths).await;
        let _ = self.disk.sync_dir(&self.dir).await;
    }

    /// Every file session `id` may have on disk.
    fn files_of(&self, id: &str, session: &Session) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = (session.chunks.iter())
            .map(|c| self.path(&c.file_name(id)))
            .collect();
        paths.push(self.path(&format!("{id}.session")));
        paths.push(self.path(&format!("{id}.done")));
        paths
    }

    /// Finds session `id` for a request that names `bucket`, and holds it for that
    /// request when it is open.
    pub(crate) async fn find(self: &Arc<Self>, id: &str, bucket: &str) -> Result<Found, Rejection> {
        self.load().await?;
        let now = self.clock.now_unix_ms();
        let mut table = self.table();
        let ttl_ms = self.limits.ttl.as_millis() as u64;
        let session = table
            .sessions
            .get_mut(id)
            .filter(|s| s.opening.bucket == bucket && now <= s.expires_ms(ttl_ms))
            .ok_or_else(|| Rejection::status(404, NO_SESSION))?;
        if let Some(reply) = &session.finalized {
            return Ok(Found::Finalized(reply.clone()));
        }
        if session.busy {
            return Err(busy_rejection(
                "Another request of this session is in progress; retry the request.".into(),
            ));
        }
        session.busy = true;
        Ok(Found::Open {
            received: session.received(),
            opening: session.opening.clone(),
            guard: Busy {
                store: self.clone(),
                id: id.to_string(),
                reserved: 0,
                partial_left: session.partial_left,
                writing_partial: false,
            },
        })
    }

    /// Where a chunk of session `id` starting at `offset` is written as it arrives.
    pub(crate) fn partial_path(&self, id: &str, offset: u64) -> PathBuf {
        self.path(&format!("{id}.{offset:020}.partial"))
    }

    /// Removes the partial chunk file `partial` if it exists: bytes of a request
    /// that broke off, never counted, which the next request must not append to.
    pub(crate) async fn discard_partial(&self, partial: &Path) -> std::io::Result<()> {
        match self.disk.remove(partial).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Makes the chunk written to its partial file durable and counts it.
    pub(crate) async fn commit_chunk(&self, guard: &Busy, chunk: Chunk) -> Result<(), Rejection> {
        let partial = self.partial_path(&guard.id, chunk.offset);
        let path = self.path(&chunk.file_name(&guard.id));
        self.disk.sync_file(&partial).await.map_err(io_rejection)?;
        self.disk
            .rename(&partial, &path)
            .await
            .map_err(io_rejection)?;
        self.disk.sync_dir(&self.dir).await.map_err(io_rejection)?;
        let mut table = self.table();
        if let Some(session) = table.sessions.get_mut(&guard.id) {
            debug_assert_eq!(session.received(), chunk.offset, "chunks follow on");
            session.chunks.push(chunk);
        }
        Ok(())
    }

    /// Up to `len` bytes of session `id` from `offset`, from its chunk files.
    pub(crate) async fn read(&self, id: &str, offset: u64, len: u64) -> Result<Vec<u8>, Rejection> {
        let chunks = self.chunks(id);
        let mut out = Vec::new();
        for chunk in chunks
            .iter()
            .filter(|c| c.end() > offset && c.offset < offset + len)
        {
            let from = offset.max(chunk.offset);
            let to = (offset + len).min(chunk.end());
            let path = self.path(&chunk.file_name(id));
            let read = self.disk.read_range(&path, from - chunk.offset, to - from);
            out.extend_from_slice(&read.await.map_err(io_rejection)?);
        }
        Ok(out)
    }

    /// The chunks of session `id`, in order.
    pub(crate) fn chunks(&self, id: &str) -> Vec<Chunk> {
        self.table()
            .sessions
            .get(id)
            .map(|s| s.chunks.clone())
            .unwrap_or_default()
    }

    /// Session `id` completed with `reply`: kept (its opening and answer) for a
    /// retried final request until it expires; its chunks removed.
    pub(crate) async fn finalize(&self, id: &str, reply: &Reply) -> Result<(), Rejection> {
        let done = self.path(&format!("{id}.done"));
        let finished_ms = self.clock.now_unix_ms();
        self.disk
            .create_synced(&done, reply_json(reply, finished_ms).into())
            .await
            .map_err(io_rejection)?;
        self.disk.sync_dir(&self.dir).await.map_err(io_rejection)?;
        let removed = {
            let mut table = self.table();
            let held = table.sessions.get(id).map_or(0, Session::received);
            table.bytes = table.bytes.saturating_sub(held);
            if table
                .sessions
                .get(id)
                .is_some_and(|s| s.finalized.is_none())
            {
                table.open_sessions -= 1;
            }
            let session = table.sessions.get_mut(id);
            session.map(|s| {
                s.finalized = Some(reply.clone());
                s.finished_ms = finished_ms;
                std::mem::take(&mut s.chunks)
            })
        };
        let paths: Vec<PathBuf> = (removed.unwrap_or_default().iter())
            .map(|c| self.path(&c.file_name(id)))
            .collect();
        let _ = self.disk.remove_all(&paths).await;
        Ok(())
    }

    /// Forgets session `id` and its files (cancelled, or refused for good).
    pub(crate) async fn forget(&self, id: &str) -> bool {
        let Some(session) = self.table().remove(id) else {
            return false;
        };
        let _ = self.disk.remove_all(&self.files_of(id, &session)).await;
        let _ = self.disk.sync_dir(&self.dir).await;
        true
    }

    /// Reads the sessions from disk, once.
    async fn load(&self) -> Result<(), Rejection> {
        self.loaded
            .get_or_try_init(|| async { self.load_now().await.map_err(io_rejection) })
            .await?;
        Ok(())
    }

    async fn load_now(&self) -> std::io::Result<()> {
        self.disk.create_dir_all(&self.dir).await?;
        let names = self.disk.list(&self.dir).await?;
        let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in names.iter() {
            let id = name.split('.').next().unwrap_or_default().to_string();
            files.entry(id).or_default().push(name.to_string());
        }
        let now = self.clock.now_unix_ms();
        let mut loaded = Table::default();
        let mut stale = Vec::new();
        for (id, names) in files {
            match self.load_session(&id, &names, now).await? {
                Some((session, dropped)) => {
                    stale.extend(dropped);
                    if session.finalized.is_none() {
                        loaded.bytes += session.received();
                        loaded.open_sessions += 1;
                    }
                    loaded.sessions.insert(id, session);
                }
                None => stale.extend(names),
            }
        }
        if !stale.is_empty() {
            tracing::info!(
                target: "spool_relay",
                files = stale.len(),
                "resumable sessions: removing files never acknowledged, expired or damaged"
            );
            let paths: Vec<PathBuf> = stale.iter().map(|n| self.path(n)).collect();
            let _ = self.disk.remove_all(&paths).await;
            self.disk.sync_dir(&self.dir).await?;
        }
        *self.table() = loaded;
        Ok(())
    }

    /// One session from its files, and the files to drop; `None` when the whole
    /// session goes (no opening on disk, expired, unreadable).
    async fn load_session(
        &self,
        id: &str,
        names: &[String],
        now: u64,
    ) -> std::io::Result<Option<(Session, Vec<String>)>> {
        let done = format!("{id}.done");
        let meta = format!("{id}.session");
        let finalized = match names.contains(&done) {
            true => reply_from_json(&self.disk.read(&self.path(&done)).await?),
            false => None,
        };
        let (finalized, finished_ms) = match finalized {
            Some((reply, finished_ms)) => (Some(reply), finished_ms),
            None => (None, 0),
        };
        let opening = match names.contains(&meta) {
            true => Opening::from_json(&self.disk.read(&self.path(&meta)).await?),
            false => None,
        };
        let Some((opening, created_ms)) = opening else {
            return Ok(None);
        };
        let ttl_ms = self.limits.ttl.as_millis() as u64;
        let finished_ms = finished_ms.max(created_ms);
        if now > created_ms.saturating_add(ttl_ms) {
            return Ok(None);
        }
        let mut dropped = Vec::new();
        let mut chunks = Vec::new();
        if finalized.is_none() {
            chunks = self.verified_chunks(id, names, &mut dropped).await?;
        }
        for name in names {
            let is_chunk = chunks.iter().any(|c| c.file_name(id) == *name);
            if !is_chunk && *name != meta && *name != done && !dropped.contains(name) {
                dropped.push(name.clone());
            }
        }
        let session = Session {
            opening,
            created_ms,
            chunks,
            busy: false,
            finalized,
            finished_ms,
            partial_left: false,
        };
        if now > session.expires_ms(ttl_ms) {
            return Ok(None);
        }
        Ok(Some((session, dropped)))
    }

    /// The chunk files of session `id` that follow on from offset 0 and hold what
    /// their names say; the others are added to `dropped`.
    async fn verified_chunks(
        &self,
        id: &str,
        names: &[String],
        dropped: &mut Vec<String>,
    ) -> std::io::Result<Vec<Chunk>> {
        let mut found: Vec<Chunk> = names
            .iter()
            .filter_map(|name| parse_chunk_name(id, name))
            .collect();
        found.sort_by_key(|c| c.offset);
        let mut chunks = Vec::new();
        let mut end = 0;
        for chunk in found {
            let name = chunk.file_name(id);
            let whole = chunk.offset == end && self.crc_matches(&name, chunk).await;
            if whole {
                end = chunk.end();
                chunks.push(chunk);
            } else {
                dropped.push(name);
            }
        }
        Ok(chunks)
    }

    async fn crc_matches(&self, name: &str, chunk: Chunk) -> bool {
        let path = self.path(name);
        let mut crc = 0;
        let mut at = 0;
        while at < chunk.len {
            let step = (chunk.len - at).min(crate::body::PIECE_BYTES as u64);
            match self.disk.read_range(&path, at, step).await {
                Ok(piece) if piece.len() as u64 == step => {
                    crc = crc32c::crc32c_append(crc, &piece);
                    at += step;
                }
                _ => return false,
            }
        }
        crc == chunk.crc32c
    }
}

/// A request's hold on an open session: while it lives no other request of the
/// session proceeds; it also holds the bytes its chunk reserves.
pub(crate) struct Busy {
    store: Arc<SessionStore>,
    pub(crate) id: String,
    reserved: u64,
    /// An earlier request left a partial chunk file behind.
    partial_left: bool,
    /// This request has written to the partial chunk file, not yet committed.
    writing_partial: bool,
}

impl Busy {
    /// Holds `bytes` more of the relay's session storage for this request's chunk,
    /// or refuses: past `max_session_bytes` in all (503), or past `max_bytes` for
    /// this session (413).
    pub(crate) fn reserve(
        &mut self,
        bytes: u64,
        session_end: u64,
        max_bytes: u64,
    ) -> Result<(), Rejection> {
        if session_end > max_bytes {
            return Err(Rejection::Status {
                status: 413,
                message: Some(format!(
                    "The object exceeds the relay's limit of {max_bytes} bytes (--max-object-bytes)."
                )),
            });
        }
        let mut table = self.store.table();
        if table.bytes + bytes > self.store.limits.max_session_bytes {
            return Err(busy_rejection(format!(
                "The relay's resumable sessions hold {} bytes, its limit (--max-session-bytes); \
                 retry later.",
                table.bytes
            )));
        }
        table.bytes += bytes;
        self.reserved += bytes;
        Ok(())
    }

    /// This request starts writing the session's partial chunk file: whether that
    /// file must be emptied first (an earlier request broke off after writing to
    /// it). Known from memory, so the usual request costs no extra system call; a
    /// restart drops every partial file anyway.
    pub(crate) fn start_partial(&mut self) -> bool {
        self.writing_partial = true;
        std::mem::take(&mut self.partial_left)
    }

    /// The partial file became a committed chunk; its reserved bytes stay held, as
    /// the session's.
    pub(crate) fn chunk_committed(&mut self) {
        self.reserved = 0;
        self.writing_partial = false;
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut table = self.store.table();
        table.bytes = table.bytes.saturating_sub(self.reserved);
        if let Some(session) = table.sessions.get_mut(&self.id) {
            session.busy = false;
            session.partial_left |= self.partial_left || self.writing_partial;
        }
    }
}

fn parse_chunk_name(id: &str, name: &str) -> Option<Chunk> {
    let rest = name
        .strip_prefix(id)?
        .strip_prefix('.')?
        .strip_suffix(".chunk")?;
    let mut parts = rest.split('.');
    let offset = parts.next()?.parse().ok()?;
    let len = parts.next()?.parse().ok()?;
    let crc32c = u32::from_str_radix(parts.next()?, 16).ok()?;
    parts.next().is_none().then_some(Chunk {
        offset,
        len,
        crc32c,
    })
}

/// A completed session's answer and when it completed (Unix ms), as kept in
/// `ID.done`.
fn reply_json(reply: &Reply, finished_ms: u64) -> Vec<u8> {
    let headers: Vec<[&str; 2]> = reply
        .headers
        .iter()
        .map(|(k, v)| [&**k, v.as_str()])
        .collect();
    json!({
        "status": reply.status,
        "headers": headers,
        "body": String::from_utf8_lossy(&reply.body),
        "finished_ms": finished_ms,
    })
    .to_string()
    .into_bytes()
}

/// [`reply_json`]'s answer and time (0, the session's opening then stands in for
/// it, when the file predates the field).
fn reply_from_json(data: &[u8]) -> Option<(Reply, u64)> {
    let value: Value = serde_json::from_slice(data).ok()?;
    let finished_ms = value
        .get("finished_ms")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut reply = Reply::new(u16::try_from(value.get("status")?.as_u64()?).ok()?);
    for pair in value.get("headers")?.as_array()? {
        let (name, value) = (pair.get(0)?.as_str()?, pair.get(1)?.as_str()?);
        reply = reply.header(name.to_string(), value);
    }
    Some((
        reply.body(value.get("body")?.as_str()?.to_string()),
        finished_ms,
    ))
}

/// 503 with `Retry-After`: the relay cannot take this now.
pub(crate) fn busy_rejection(message: String) -> Rejection {
    Rejection::Status {
        status: 503,
        message: Some(message),
    }
}

/// A session file that could not be written or read: the request fails (503) and
/// the session stays as it was on disk. Paths stay in the log, not the answer.
fn io_rejection(e: std::io::Error) -> Rejection {
    tracing::warn!(target: "spool_relay", error = %e, "resumable session storage failed");
    busy_rejection(format!(
        "The relay could not store this session's bytes now ({}); retry the request.",
        disk_trouble(&e)
    ))
}

/// What a person can act on in a disk error a session met: a full disk is named as
/// such (the caller's retry will work once the spool drains), anything else as an
/// I/O error of the relay's.
pub(crate) fn disk_trouble(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => "its disk is full",
        std::io::ErrorKind::ReadOnlyFilesystem => "its disk is read-only",
        _ => "an I/O error on its disk",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_named_as_such_in_the_answer() {
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let Rejection::Status { status, message } = io_rejection(full) else {
            panic!("not a status");
        };
        assert_eq!(status, 503);
        assert!(message.unwrap().contains("its disk is full"));
        let quota = std::io::Error::from(std::io::ErrorKind::QuotaExceeded);
        assert_eq!(disk_trouble(&quota), "its disk is full");
        assert_eq!(
            disk_trouble(&std::io::Error::other("x")),
            "an I/O error on its disk"
        );
    }

    #[test]
    fn chunk_names_round_trip_and_foreign_names_are_not_chunks() {
        let chunk = Chunk {
            offset: 262_144,
            len: 1000,
            crc32c: 0xdead_beef,
        };
        let name = chunk.file_name("abc");
        assert_eq!(name, "abc.00000000000000262144.1000.deadbeef.chunk");
        assert_eq!(parse_chunk_name("abc", &name), Some(chunk));
        assert_eq!(parse_chunk_name("ab", &name), None);
        assert_eq!(
            parse_chunk_name("abc", "abc.00000000000000000000.partial"),
            None
        );
        assert_eq!(parse_chunk_name("abc", "abc.session"), None);
    }

    #[test]
    fn a_final_answer_and_an_opening_round_trip_through_json() {
        let reply = Reply::json(200, &json!({"name": "o"})).header("x-spool-outcome", "spooled");
        assert_eq!(reply_from_json(&reply_json(&reply, 42)), Some((reply, 42)));
        let opening = Opening {
            bucket: "b".into(),
            query: "uploadType=resumable&name=a%2Fb".into(),
            upload_content_type: Some("text/csv".into()),
            resource: Bytes::from_static(br#"{"metadata":{"k":"v"}}"#),
        };
        assert_eq!(
            Opening::from_json(&opening.to_json(7)),
            Some((opening.clone(), 7))
        );
        let upload = opening.upload().unwrap();
        assert_eq!(
            (upload.name.as_str(), &*upload.content_type),
            ("a/b", "text/csv")
        );
    }
}
