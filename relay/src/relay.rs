//! The relay ([`Relay`]): its configuration, its state (the uploader, the resumable
//! sessions, the generation counter, the request counters) and one upload, from a
//! parsed [`Upload`] to Cloud Storage's answer.
//!
//! It promises that an upload is answered 200 only after
//! [`Uploader::upload_with`] made it safe (stored upstream, or synced to the spool),
//! and that nothing reaches the uploader that the spool could not honour later:
//! another bucket than the upstream's (404), a precondition other than
//! create-if-absent (400), bytes that differ from the digests the client declared
//! (400).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fake_gcs::wire::{Digests, ObjectRecord, Preconditions, Rejection, Reply, RequestHead, Upload};
use spool::{Clock, Uploader};

use crate::answer;
use crate::metrics::RelayMetrics;
use crate::sessions::SessionTable;

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
    /// part, a resumable session's total. Larger is 413. Default 32 MiB.
    pub max_object_bytes: u64,
    /// Resumable sessions kept at once; opening one more forgets the oldest (its
    /// next request gets 404, as an expired session does). Default 64; at least 1.
    pub max_sessions: usize,
    /// `Retry-After` on a 503 (the spool is full, or not taking writes now), in whole
    /// seconds, rounded up. Default 1 s.
    pub retry_after: Duration,
}

impl RelayConfig {
    /// The defaults, for uploads to `bucket`.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            max_object_bytes: 32 << 20,
            max_sessions: 64,
            retry_after: Duration::from_secs(1),
        }
    }

    /// The largest request body read: an object and its multipart metadata.
    pub(crate) fn max_request_bytes(&self) -> u64 {
        self.max_object_bytes
            .saturating_add(MULTIPART_OVERHEAD_BYTES)
    }
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
    sessions: Mutex<SessionTable>,
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
    pub fn new(config: RelayConfig, uploader: Uploader, clock: Arc<dyn Clock>) -> Self {
        let sessions = SessionTable::new(config.max_sessions);
        Self {
            inner: Arc::new(Inner {
                config,
                uploader,
                clock,
                metrics: RelayMetrics::default(),
                sessions: Mutex::new(sessions),
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

    pub(crate) fn sessions(&self) -> MutexGuard<'_, SessionTable> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `upload` safe through the uploader and answers as Cloud Storage does,
    /// with links under `base`. A refusal the uploader gives is an answer too
    /// (`Ok`); `Err` is a request refused before anything was sent or spooled.
    pub(crate) async fn upload(&self, base: &str, upload: Upload) -> Result<Reply, Rejection> {
        self.admit(&upload)?;
        let digests = upload.digests()?;
        let attributes = answer::attributes(&upload);
        let result = self
            .inner
            .uploader
            .upload_with(&upload.name, upload.data.clone(), &attributes)
            .await;
        Ok(match result {
            Ok(outcome) => {
                let record = self.record(&upload, digests);
                answer::uploaded(upload.api, base, &upload.bucket, &record, outcome)
            }
            Err(error) => answer::refused(upload.api, &error, self.inner.config.retry_after),
        })
    }

    /// Refuses an upload the spool could not honour: to another bucket than the
    /// upstream's, or with a precondition other than create-if-absent.
    pub(crate) fn admit(&self, upload: &Upload) -> Result<(), Rejection> {
        if upload.bucket != self.inner.config.bucket {
            return Err(Rejection::NoSuchBucket(upload.bucket.clone()));
        }
        generation_preconditions(&upload.preconditions)
    }

    /// The object as the answer describes it: digests of the bytes received, a
    /// generation and creation time from the relay's clock.
    fn record(&self, upload: &Upload, digests: Digests) -> ObjectRecord {
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
        answer::record(upload, digests, generation, now_ms)
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
