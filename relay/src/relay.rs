//! The relay ([`Relay`]): its configuration, its state (the uploader, the resumable
//! sessions, the generation counter, the request counters), and what every upload
//! is checked against before its bytes are read.
//!
//! It promises that an upload is answered 200 only after the uploader made it safe
//! (stored upstream, or synced to the spool), and that nothing reaches the uploader
//! that the spool could not honour later: another bucket than the upstream's (404),
//! a precondition other than create-if-absent (400), bytes that differ from the
//! digests the client declared (400).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_gcs::wire::{Digests, ObjectRecord, Preconditions, Rejection, RequestHead, Upload};
use spool::{Clock, Spool, Uploader};

use crate::answer;
use crate::metrics::RelayMetrics;
use crate::sessions::{Limits, SessionStore};

/// Room for a multipart body's metadata part and boundaries beside its media:
/// a request body may be this much larger than [`RelayConfig::max_object_bytes`].
pub const MULTIPART_OVERHEAD_BYTES: u64 = 64 * 1024;

/// How a [`Relay`] serves. Build it with [`RelayConfig::new`], which sets the
/// defaults documented on each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// The bucket uploads must name: the upstream's. An upload to another bucket is
    /// answered 404 (`The specified bucket does not exist.`).
    pub bucket: String,
    /// The largest object accepted, in bytes: a media body, a multipart body's media
    /// part, a resumable session's total. Larger is 413. Bodies stream to disk, so
    /// this bounds disk, not memory; the spool's `max_bytes` bounds it too. Default
    /// 5 GiB (Cloud Storage's limit for one request).
    pub max_object_bytes: u64,
    /// Resumable sessions open at once; opening one more is refused with 503 (never
    /// by forgetting one in progress). Default 1,000.
    pub max_sessions: usize,
    /// Bytes all open resumable sessions may hold on disk beside the spool; a chunk
    /// past it is refused with 503 until sessions complete. Default 8 GiB.
    pub max_session_bytes: u64,
    /// How long a resumable session lives from its opening; after it, its requests
    /// get 404 and its files are removed. Default 7 days, as Cloud Storage.
    pub session_ttl: Duration,
    /// Seed for resumable session IDs; `None` (the default) seeds from the OS, as
    /// production must (an ID is the session's only secret). Simulations set it.
    pub session_id_seed: Option<u64>,
    /// `Retry-After` on a 503 (the spool is full, or not taking writes now), in whole
    /// seconds, rounded up. Default 1 s.
    pub retry_after: Duration,
}

impl RelayConfig {
    /// The defaults, for uploads to `bucket`.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            max_object_bytes: 5 << 30,
            max_sessions: 1_000,
            max_session_bytes: 8 << 30,
            session_ttl: Duration::from_secs(7 * 24 * 3600),
            session_id_seed: None,
            retry_after: Duration::from_secs(1),
        }
    }

    /// The largest request body read: an object and its multipart metadata.
    pub(crate) fn max_request_bytes(&self) -> u64 {
        self.max_object_bytes
            .saturating_add(MULTIPART_OVERHEAD_BYTES)
    }

    /// The largest body of a request that carries no object bytes (a resumable
    /// session's opening resource).
    pub(crate) const MAX_RESOURCE_BYTES: u64 = MULTIPART_OVERHEAD_BYTES;
}

/// The relay's state. Cheap to clone (an `Arc` inside); serve it with
/// [`serve`](crate::serve).
#[derive(Clone)]
pub struct Relay {
    inner: Arc<Inner>,
}

struct Inner {
    config: RelayConfig,
    uploader: Uploader,
    clock: Arc<dyn Clock>,
    metrics: RelayMetrics,
    sessions: Arc<SessionStore>,
    /// The last generation handed out: generations are the clock's microseconds,
    /// strictly increasing.
    last_generation: Mutex<i64>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// A relay writing through `uploader` (whose spool a [`spool::Drainer`] drains),
    /// reading wall time from `clock` (the spool's: [`spool::SystemClock`] in
    /// production).
    ///
    /// Resumable sessions are kept in `sessions/` beside the uploader's spool,
    /// through the spool's disk; they are read at the first session request.
    pub fn new(config: RelayConfig, uploader: Uploader, clock: Arc<dyn Clock>) -> Self {
        let spool = uploader.spool();
        let limits = Limits {
            max_sessions: config.max_sessions.max(1),
            max_session_bytes: config.max_session_bytes,
            ttl: config.session_ttl,
        };
        let sessions = SessionStore::new(
            spool.disk().clone(),
            spool.dir(),
            clock.clone(),
            limits,
            config.session_id_seed,
        );
        Self {
            inner: Arc::new(Inner {
                config,
                uploader,
                clock,
                metrics: RelayMetrics::default(),
                sessions: Arc::new(sessions),
                last_generation: Mutex::new(0),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.inner.config
    }

    /// The relay's request counters (register them beside the spool's).
    pub fn metrics(&self) -> &RelayMetrics {
        &self.inner.metrics
    }

    pub(crate) fn sessions(&self) -> &Arc<SessionStore> {
        &self.inner.sessions
    }

    pub(crate) fn uploader(&self) -> &Uploader {
        &self.inner.uploader
    }

    pub(crate) fn spool(&self) -> &Spool {
        self.inner.uploader.spool()
    }

    /// Refuses an upload the spool could not honour: to another bucket than the
    /// upstream's, or with a precondition other than create-if-absent.
    pub(crate) fn admit(&self, upload: &Upload) -> Result<(), Rejection> {
        if upload.bucket != self.inner.config.bucket {
            return Err(Rejection::NoSuchBucket(upload.bucket.clone()));
        }
        generation_preconditions(&upload.preconditions)
    }

    /// The object as the answer describes it: its size and the digests of the bytes
    /// received, a generation and creation time from the relay's clock.
    pub(crate) fn record(&self, upload: &Upload, size: u64, digests: Digests) -> ObjectRecord {
        let now_ms = self.inner.clock.now_unix_ms();
        let generation = {
            let mut last = self
                .inner
                .last_generation
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let micros = i64::try_from(now_ms.saturating_mul(1000)).unwrap_or(i64::MAX);
            *last = micros.max(last.saturating_add(1));
            *last
        };
        answer::record(upload, size, digests, generation, now_ms)
    }
}

/// Conditions a request may carry beside `ifGenerationMatch`, none of which the
/// relay can honour: (where, name).
const OTHER_CONDITIONS: [(Where, &str); 6] = [
    (Where::Query, "ifGenerationNotMatch"),
    (Where::Query, "ifMetagenerationMatch"),
    (Where::Query, "ifMetagenerationNotMatch"),
    (Where::Header, "x-goog-if-metageneration-match"),
    (Where::Header, "if-match"),
    (Where::Header, "if-none-match"),
];

#[derive(Debug, Clone, Copy)]
enum Where {
    Query,
    Header,
}

/// 400 when an upload request carries a precondition other than
/// `ifGenerationMatch` (metageneration, ETag, generation-not-match): the spool
/// writes create-if-absent and cannot check a condition on a live object later.
pub(crate) fn other_preconditions(head: RequestHead<'_>) -> Result<(), Rejection> {
    for (place, name) in OTHER_CONDITIONS {
        let value = match place {
            Where::Query => head.query.get(name),
            Where::Header => fake_gcs::wire::header(head.headers, name),
        };
        if let Some(value) = value {
            return Err(cannot_honour(name, value));
        }
    }
    Ok(())
}

/// 400 unless `ifGenerationMatch` is absent or 0: both are written create-if-absent.
fn generation_preconditions(preconditions: &Preconditions) -> Result<(), Rejection> {
    if let Some(g) = preconditions.if_generation_not_match {
        return Err(cannot_honour("ifGenerationNotMatch", &g.to_string()));
    }
    match preconditions.if_generation_match {
        None | Some(0) => Ok(()),
        Some(g) => Err(cannot_honour("ifGenerationMatch", &g.to_string())),
    }
}

fn cannot_honour(name: &str, value: &str) -> Rejection {
    Rejection::invalid(format!(
        "The relay cannot honour the precondition {name}={value} while spooling: it writes \
         every object create-if-absent (ifGenerationMatch=0), possibly later, when the \
         object may have changed. Send ifGenerationMatch=0 or no precondition, or write \
         to Cloud Storage directly."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fake_gcs::wire::Query;
    use http::HeaderMap;

    #[test]
    fn only_create_if_absent_is_honoured() {
        let pre = |m, n| Preconditions {
            if_generation_match: m,
            if_generation_not_match: n,
        };
        assert!(generation_preconditions(&pre(None, None)).is_ok());
        assert!(generation_preconditions(&pre(Some(0), None)).is_ok());
        for refused in [pre(Some(7), None), pre(Some(0), Some(3))] {
            let Err(Rejection::Status { status, message }) = generation_preconditions(&refused)
            else {
                panic!("{refused:?} was admitted");
            };
            assert_eq!(status, 400);
            assert!(message.unwrap().contains("cannot honour"));
        }
    }

    #[test]
    fn metageneration_and_etag_conditions_are_refused() {
        let headers = HeaderMap::new();
        let query = Query::parse(Some("name=a&ifMetagenerationMatch=1"));
        let head = RequestHead {
            query: &query,
            headers: &headers,
        };
        assert!(other_preconditions(head).is_err());
        let mut headers = HeaderMap::new();
        headers.insert("if-none-match", "*".parse().unwrap());
        let query = Query::parse(Some("name=a&ifGenerationMatch=0"));
        let head = RequestHead {
            query: &query,
            headers: &headers,
        };
        assert!(other_preconditions(head).is_err());
        let none = HeaderMap::new();
        let head = RequestHead {
            query: &query,
            headers: &none,
        };
        assert!(other_preconditions(head).is_ok());
    }
}
