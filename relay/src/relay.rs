//! The relay ([`Relay`]): its configuration, its state (the uploader, the resumable
//! sessions, the generation counter, the request counters), and what every upload
//! is checked against before its bytes are read.
//!
//! It promises that an upload is answered 200 only after the uploader made it safe
//! (stored upstream, or synced to the spool), and that nothing reaches the uploader
//! that the spool could not honour later: another bucket than the upstream's (404),
//! a precondition other than create-if-absent (400), an option it cannot carry
//! through the spool (400, by name), bytes that differ from the digests the client
//! declared (400).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_gcs::wire::{Digests, ObjectRecord, Preconditions, Rejection, RequestHead, Upload};
use spool::{Clock, Spool, SpoolConfig, Uploader};

use crate::answer;
use crate::metrics::RelayMetrics;
use crate::passthrough::PassThrough;
use crate::sessions::{Limits, SessionStore};
use crate::spooled::{Copy, Found, PendingDeletes, SpooledObjects};

/// Room for a multipart body's metadata part and boundaries beside its media:
/// a request body may be this much larger than the largest object. As much as
/// the largest JSON resource a request may carry.
pub const MULTIPART_OVERHEAD_BYTES: u64 = crate::body::MAX_RESOURCE_BYTES;

/// Cloud Storage's largest object, and the relay's default limit when the spool
/// can hold it.
pub const CLOUD_STORAGE_MAX_OBJECT_BYTES: u64 = 5 << 40;

/// The most an entry's header takes beside its payload (a name of 1,024 bytes and
/// 8 KiB of attributes): an object of the spool's `max_bytes` less this fits.
pub const MAX_ENTRY_HEAD_BYTES: u64 = (spool::entry::FIXED_HEADER_BYTES
    + spool::name::MAX_NAME_BYTES
    + spool::entry::MAX_ATTRIBUTE_BYTES) as u64;

/// How a [`Relay`] serves. Build it with [`RelayConfig::new`], which sets the
/// defaults documented on each field; [`Relay::new`] refuses a configuration that
/// does not hold together ([`ConfigError`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// The bucket uploads must name: the upstream's. An upload to another bucket is
    /// answered 404 (`The specified bucket does not exist.`).
    pub bucket: String,
    /// Names the store uploads go to (its URL, and the endpoint when one is given):
    /// a resumable session opened for one upstream never completes into another
    /// after a restart on the same directory. Default `gs://{bucket}`.
    pub upstream: String,
    /// The largest object accepted, in bytes: a media body, a multipart body's media
    /// part, a resumable session's total; larger is 413, refused as soon as it is
    /// known. Every upload passes through the spool, so it can be at most the
    /// largest entry the spool holds (its `max_bytes` less
    /// [`MAX_ENTRY_HEAD_BYTES`]). `None` (the default): that, or Cloud Storage's
    /// 5 TiB if smaller.
    pub max_object_bytes: Option<u64>,
    /// Resumable sessions open at once; opening one more is refused with 503 (never
    /// by forgetting one in progress). As many completed sessions keep their answer
    /// (the oldest is dropped first). Default 1,000. At least 1.
    pub max_sessions: usize,
    /// Bytes all open resumable sessions may hold on disk beside the spool; a chunk
    /// past it is refused with 503 until sessions complete. Default 8 GiB. Not zero.
    pub max_session_bytes: u64,
    /// How long a resumable session lives from its opening; after it, its requests
    /// get 404 and its files are removed. Default 7 days, as Cloud Storage. Not zero.
    pub session_ttl: Duration,
    /// Seed for resumable session IDs; `None` (the default) seeds from the OS, as
    /// production must (an ID is the session's only secret). Simulations set it.
    pub session_id_seed: Option<u64>,
    /// `Retry-After` on a 503 (the spool is full, or not taking writes now), in whole
    /// seconds, rounded up (at least 1). Default 1 s.
    pub retry_after: Duration,
    /// Bytes of uploads up to the uploader's `direct_max_bytes` held in memory, in
    /// all, while they arrive and are tried in the store: such an upload needs no
    /// room in the spool unless the store fails it. Past it, uploads are staged in
    /// the spool as they arrive. Default 64 MiB; at most 4 GiB; 0 stages every
    /// upload.
    pub max_buffered_bytes: u64,
    /// Where requests that are not uploads go (reads, lists, deletes, metadata,
    /// compose): the upstream, or nowhere ([`PassThrough::off`], the default:
    /// they are answered 501).
    pub pass_through: PassThrough,
}

/// A [`RelayConfig`] that does not hold together, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field that must be set is empty or zero.
    #[error("relay config: {field} must be {expected}")]
    Invalid {
        /// The field (its command-line flag in brackets).
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// The largest object is more than the spool can hold.
    #[error(
        "relay config: max_object_bytes (--max-object-bytes) is {max_object_bytes} bytes, but \
         every upload passes through the spool, whose max_bytes (--max-bytes) of {spool_max_bytes} \
         holds objects of at most {largest} bytes: raise --max-bytes or lower --max-object-bytes"
    )]
    ObjectLargerThanSpool {
        /// The configured limit.
        max_object_bytes: u64,
        /// The spool's `max_bytes`.
        spool_max_bytes: u64,
        /// The largest object the spool holds.
        largest: u64,
    },
}

impl RelayConfig {
    /// The defaults, for uploads to `bucket`.
    pub fn new(bucket: impl Into<String>) -> Self {
        let bucket = bucket.into();
        Self {
            upstream: format!("gs://{bucket}"),
            bucket,
            max_object_bytes: None,
            max_sessions: 1_000,
            max_session_bytes: 8 << 30,
            session_ttl: Duration::from_secs(7 * 24 * 3600),
            session_id_seed: None,
            retry_after: Duration::from_secs(1),
            max_buffered_bytes: 64 << 20,
            pass_through: PassThrough::off(),
        }
    }

    /// Refuses a configuration that does not hold together with the spool's; the
    /// largest object it accepts otherwise.
    pub fn validate(&self, spool: &SpoolConfig) -> Result<u64, ConfigError> {
        let invalid = |field, expected| Err(ConfigError::Invalid { field, expected });
        if self.bucket.is_empty() {
            return invalid("bucket", "a bucket name");
        }
        if self.max_sessions == 0 {
            return invalid("max_sessions (--max-sessions)", "at least 1");
        }
        if self.max_session_bytes == 0 {
            return invalid("max_session_bytes (--max-session-bytes)", "more than 0");
        }
        if self.session_ttl.is_zero() {
            return invalid("session_ttl", "longer than 0");
        }
        if self.max_buffered_bytes > u64::from(u32::MAX) {
            return invalid("max_buffered_bytes", "at most 4 GiB");
        }
        let largest = spool.max_bytes.saturating_sub(MAX_ENTRY_HEAD_BYTES);
        match self.max_object_bytes {
            Some(0) => invalid("max_object_bytes (--max-object-bytes)", "more than 0"),
            Some(max_object_bytes) if max_object_bytes > largest => {
                Err(ConfigError::ObjectLargerThanSpool {
                    max_object_bytes,
                    spool_max_bytes: spool.max_bytes,
                    largest,
                })
            }
            Some(max) => Ok(max),
            None => Ok(largest.min(CLOUD_STORAGE_MAX_OBJECT_BYTES)),
        }
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
    /// `config.max_object_bytes`, or what it defaults to.
    max_object_bytes: u64,
    uploader: Uploader,
    clock: Arc<dyn Clock>,
    metrics: RelayMetrics,
    sessions: Arc<SessionStore>,
    /// The last generation handed out: generations are the clock's microseconds,
    /// strictly increasing.
    last_generation: Mutex<i64>,
    /// What is left of `max_buffered_bytes`, one permit a byte.
    buffers: Arc<tokio::sync::Semaphore>,
    /// Objects answered `spooled`, served to reads until delivered.
    spooled: SpooledObjects,
    /// The entries in the spool when the relay was made (an earlier run's), whose
    /// objects [`spooled`](Self::spooled) learns once, before it is first asked.
    earlier_entries: Vec<u64>,
    /// The learning of them: started by the first request that needs it, in a task
    /// of its own, so that a client that goes away does not cancel it (and the
    /// next one start it over); every request meanwhile awaits the same one.
    recovery: Mutex<Option<futures::future::Shared<futures::future::BoxFuture<'static, ()>>>>,
    /// Why the upstream's bucket is missing, when a check found it so.
    bucket_missing: Mutex<Option<String>>,
    /// Upstream list page bytes being merged with the spool, one permit a byte
    /// (`listing.rs`).
    merge_budget: Arc<tokio::sync::Semaphore>,
    /// Deletes of spooled names owed to the upstream (`spooled/deletes.rs`).
    deletes: Arc<PendingDeletes>,
    /// Requests served so far: the next one's id ([`Relay::next_request_id`]).
    requests: std::sync::atomic::AtomicU64,
}

/// Every reason [`Relay::refusing_uploads`] names, as the metric's label.
pub const REFUSING_REASONS: [&str; 6] = [
    "spool_stopped",
    "spool_full_files",
    "spool_full_bytes",
    "spool_disk",
    "sessions_stopped",
    "bucket_missing",
];

/// One reason the relay refuses uploads now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusing {
    /// Its name, one of [`REFUSING_REASONS`].
    pub reason: &'static str,
    /// What an operator reads, with the numbers and the flag to change.
    pub message: String,
}

/// A [`Relay`] that a background task (an owed delete's retries, reading an
/// earlier run's MD5s) holds without keeping it (and its spool's lock) alive once
/// every other handle is dropped.
#[derive(Clone)]
pub(crate) struct WeakRelay(std::sync::Weak<Inner>);

impl WeakRelay {
    /// The relay, while any other handle on it lives.
    pub(crate) fn upgrade(&self) -> Option<Relay> {
        self.0.upgrade().map(|inner| Relay { inner })
    }
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
    /// production); refuses a `config` that does not hold together with the
    /// uploader's spool ([`RelayConfig::validate`]).
    ///
    /// Resumable sessions are kept in `sessions/` beside the uploader's spool,
    /// through the spool's disk; they are read at the first session request.
    pub fn new(
        config: RelayConfig,
        uploader: Uploader,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ConfigError> {
        let spool = uploader.spool();
        let max_object_bytes = config.validate(spool.config())?;
        let limits = Limits {
            max_sessions: config.max_sessions,
            max_session_bytes: config.max_session_bytes,
            ttl: config.session_ttl,
        };
        let max_buffered_bytes = config.max_buffered_bytes;
        let earlier_entries = match config.pass_through.is_on() {
            true => spool.entry_seqs(),
            false => Vec::new(),
        };
        let sessions = SessionStore::new(
            spool.disk().clone(),
            spool.dir(),
            clock.clone(),
            limits,
            config.session_id_seed,
            config.upstream.clone(),
        );
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                max_object_bytes,
                uploader,
                clock,
                metrics: RelayMetrics::default(),
                sessions: Arc::new(sessions),
                last_generation: Mutex::new(0),
                buffers: Arc::new(tokio::sync::Semaphore::new(max_buffered_bytes as usize)),
                spooled: SpooledObjects::default(),
                earlier_entries,
                recovery: Mutex::new(None),
                bucket_missing: Mutex::new(None),
                merge_budget: Arc::new(tokio::sync::Semaphore::new(
                    crate::listing::MERGE_BUDGET_BYTES,
                )),
                deletes: Arc::default(),
                requests: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// The id of the next request served: 1, 2, ... in this process, in every log
    /// line of the request and in its answer's `x-spool-request-id`.
    pub(crate) fn next_request_id(&self) -> u64 {
        (self.inner.requests).fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }

    /// A handle that does not keep the relay alive.
    pub(crate) fn downgrade(&self) -> WeakRelay {
        WeakRelay(Arc::downgrade(&self.inner))
    }

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.inner.config
    }

    /// The largest object accepted, in bytes (`max_object_bytes`, or its default).
    pub fn max_object_bytes(&self) -> u64 {
        self.inner.max_object_bytes
    }

    /// What list pages being merged with the spool may hold at once.
    pub(crate) fn merge_budget(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.inner.merge_budget
    }

    /// The largest request body read: an object and its multipart metadata.
    pub(crate) fn max_request_bytes(&self) -> u64 {
        self.max_object_bytes()
            .saturating_add(MULTIPART_OVERHEAD_BYTES)
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

    /// Remembers an upload answered `spooled`, for reads through the relay until it
    /// is delivered (only when reads pass through); cancels a delete of its name
    /// still owed to the upstream (what is written after a `DELETE` is never
    /// deleted by it). Called in the name's turn (`SpooledObjects::finishing`).
    pub(crate) async fn acknowledged(&self, record: &ObjectRecord, outcome: spool::Outcome) {
        if self.inner.deletes.len() > 0 {
            self.inner.deletes.cancel(self.spool(), &record.name).await;
        }
        if let spool::Outcome::Spooled { seq } = outcome
            && self.config().pass_through.is_on()
        {
            self.inner.spooled.acknowledged(self.spool(), record, seq);
        }
    }

    /// Owes the upstream the delete of `name`'s `copies` (a `DELETE` that took a
    /// spooled object back while the upstream failed): durable when `Ok`, then
    /// settled in the background.
    pub(crate) async fn owe_delete(&self, name: &str, copies: Vec<Copy>) -> std::io::Result<()> {
        self.inner.deletes.owe(self.spool(), name, copies).await?;
        self.inner.deletes.settle_in_background(self);
        Ok(())
    }

    /// The object `name`, when this relay (or an earlier run on its spool)
    /// answered it `spooled` and the spool still holds it.
    pub(crate) async fn spooled(&self, name: &str) -> Option<Found> {
        let objects = self.spooled_objects().await;
        let found = objects.find(self.spool(), name)?;
        objects.digested(self.spool(), found).await
    }

    /// The objects answered `spooled` known now, without waiting for an earlier
    /// run's to be learned (all of them once a read, list or delete has asked
    /// [`Self::spooled_objects`]).
    pub(crate) fn spooled_so_far(&self) -> &SpooledObjects {
        &self.inner.spooled
    }

    /// The objects this relay (or an earlier run on its spool) answered `spooled`
    /// that the spool still holds. The first call learns the earlier run's from
    /// their entries; calls meanwhile wait for it.
    pub(crate) async fn spooled_objects(&self) -> &SpooledObjects {
        self.recovery().await;
        &self.inner.spooled
    }

    /// Starts learning what an earlier run on this spool left (the objects it
    /// spooled, the deletes it owes the upstream) now, in a task of its own, rather
    /// than at the first read, list or delete: the command does at start.
    pub fn begin_learning(&self) {
        drop(self.recovery());
    }

    /// The one learning of the earlier run's objects, started at the first call.
    fn recovery(&self) -> futures::future::Shared<futures::future::BoxFuture<'static, ()>> {
        use futures::FutureExt as _;
        let mut recovery = self
            .inner
            .recovery
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let started = recovery.get_or_insert_with(|| {
            let relay = self.clone();
            let learning = tokio::spawn(async move {
                let inner = &relay.inner;
                let learned = (inner.spooled)
                    .recover(relay.spool(), &inner.earlier_entries)
                    .await;
                let owed = inner.deletes.load(relay.spool()).await;
                if owed > 0 {
                    tracing::info!(target: "spool_relay", owed, "deletes an earlier run owed the upstream are settled next");
                    inner.deletes.settle_in_background(&relay);
                }
                tracing::info!(
                    target: "spool_relay",
                    learned,
                    entries = inner.earlier_entries.len(),
                    "objects spooled by an earlier run are visible through the relay (their \
                     headers read; their MD5s are read next)"
                );
                // Their MD5s, in the background (a request that needs one first
                // reads it itself), for as long as the relay lives.
                let digesting = relay.downgrade();
                tokio::spawn(async move {
                    let mut read = 0;
                    while let Some(relay) = digesting.upgrade() {
                        match (relay.inner.spooled).digest_next(relay.spool()).await {
                            Some(()) => read += 1,
                            None => break,
                        }
                    }
                    tracing::info!(
                        target: "spool_relay",
                        read,
                        "the MD5s of the objects spooled by an earlier run are read"
                    );
                });
            });
            async move {
                let _ = learning.await;
            }
            .boxed()
            .shared()
        });
        started.clone()
    }

    /// Takes `bytes` more of the in-memory buffer budget into `held`, if that
    /// much is left.
    pub(crate) fn buffer(
        &self,
        held: &mut Option<tokio::sync::OwnedSemaphorePermit>,
        bytes: usize,
    ) -> bool {
        let Ok(bytes) = u32::try_from(bytes) else {
            return false;
        };
        let Ok(more) = self.inner.buffers.clone().try_acquire_many_owned(bytes) else {
            return false;
        };
        match held {
            Some(held) => held.merge(more),
            None => *held = Some(more),
        }
        true
    }

    /// Why the relay refuses uploads (or some of them) now, each with its reason's
    /// name (one of [`REFUSING_REASONS`]); empty when it takes them. What
    /// `/uploadz` answers and `spool_relay_refusing_uploads{reason}` counts: the
    /// spool stopped after a failed directory sync (reopening itself), full by
    /// entries or by bytes, its disk refusing writes (out of space, read-only, I/O
    /// errors), resumable sessions stopped after a failed sync, the upstream's
    /// bucket missing when last checked ([`Relay::bucket_checked`]).
    pub fn refusing_uploads(&self) -> Vec<Refusing> {
        let stats = self.spool().stats();
        let mut refusing = Vec::new();
        let mut refuse = |reason: &'static str, message: String| {
            refusing.push(Refusing { reason, message });
        };
        if let Some(why) = stats.broken {
            refuse(
                "spool_stopped",
                format!(
                    "the spool stopped taking writes after a failed directory sync and is \
                     reopening itself ({why})"
                ),
            );
        }
        if stats.files + stats.reserved_files >= stats.max_files {
            let held = stats.files + stats.reserved_files;
            refuse(
                "spool_full_files",
                format!(
                    "the spool is full: {held} entries of at most {} (--max-files)",
                    stats.max_files
                ),
            );
        }
        if stats.bytes + stats.reserved_bytes >= stats.max_bytes {
            let held = stats.bytes + stats.reserved_bytes;
            refuse(
                "spool_full_bytes",
                format!(
                    "the spool is full: {held} bytes of at most {} (--max-bytes)",
                    stats.max_bytes
                ),
            );
        }
        if let Some(why) = stats.disk_refused {
            refuse(
                "spool_disk",
                format!("the spool's disk refused its last write: {why}"),
            );
        }
        if let Some(why) = self.sessions().stopped() {
            refuse(
                "sessions_stopped",
                format!("resumable sessions stopped taking writes after a failed sync ({why})"),
            );
        }
        if let Some(why) = self.bucket_missing() {
            refuse("bucket_missing", why);
        }
        refusing
    }

    /// Registers the relay's series in `registry` (the one the spool's are in):
    /// its counters and gauges ([`RelayMetrics`]) and, read at each scrape,
    /// `spool_relay_refusing_uploads{reason}`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.metrics().register(registry);
        let relay = self.clone();
        let gauges = crate::metrics::RefusingGauges(move || relay.refusing_uploads());
        registry.register_collector(Box::new(gauges));
    }

    /// Records what a check of the upstream's bucket found: `Some(why)` when it does
    /// not exist (uploads to it would fail, and spooled ones could never be
    /// delivered), `None` when it does or could not be asked.
    pub fn bucket_checked(&self, missing: Option<String>) {
        *self
            .inner
            .bucket_missing
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = missing;
    }

    fn bucket_missing(&self) -> Option<String> {
        (self.inner.bucket_missing.lock())
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Refuses an upload the spool could not honour: to another bucket than the
    /// upstream's, or with a precondition other than none (an overwrite) or
    /// create-if-absent.
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

/// Options an upload may carry that the relay cannot honour, refused by name rather
/// than dropped: in the query, in headers (by prefix), in the JSON resource.
const UNSUPPORTED_QUERY: [&str; 3] = ["kmsKeyName", "predefinedAcl", "encryptionKey"];
const UNSUPPORTED_HEADER_PREFIXES: [&str; 4] = [
    "x-goog-encryption-",
    "x-goog-copy-source",
    "x-goog-acl",
    "x-goog-storage-class",
];
const UNSUPPORTED_RESOURCE: [&str; 9] = [
    "acl",
    "kmsKeyName",
    "customerEncryption",
    "temporaryHold",
    "eventBasedHold",
    "retention",
    "customTime",
    "storageClass",
    "contexts",
];

/// 400 for an upload request whose query or headers ask for what the relay cannot
/// honour (customer-supplied or KMS encryption keys, ACLs, a copy, a storage
/// class): written without them, the object would not be what the client asked for.
pub(crate) fn unsupported_options(head: RequestHead<'_>) -> Result<(), Rejection> {
    if let Some(name) = UNSUPPORTED_QUERY
        .iter()
        .find(|n| head.query.get(n).is_some())
    {
        return Err(cannot_carry(&format!("the query parameter {name}")));
    }
    for (name, _) in head.headers {
        let name = name.as_str();
        if UNSUPPORTED_HEADER_PREFIXES
            .iter()
            .any(|p| name.starts_with(p))
        {
            return Err(cannot_carry(&format!("the header {name}")));
        }
    }
    Ok(())
}

/// 400 for a JSON resource (a multipart upload's first part, a resumable
/// session's opening) that sets a field the relay cannot honour.
pub(crate) fn unsupported_resource(resource: &[u8]) -> Result<(), Rejection> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(resource) else {
        return Ok(()); // an empty or malformed resource is the upload parser's to refuse
    };
    match UNSUPPORTED_RESOURCE
        .iter()
        .find(|f| fields.contains_key(**f))
    {
        Some(field) => Err(cannot_carry(&format!("the resource field {field:?}"))),
        None => Ok(()),
    }
}

fn cannot_carry(what: &str) -> Rejection {
    Rejection::invalid(format!(
        "spool-relay cannot carry {what} through its spool (encryption keys, ACLs, holds, \
         retention, custom times, storage classes and copies are not kept with a spooled \
         object), and will not write the object without it. Write this object to Cloud \
         Storage directly."
    ))
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

/// What an upload's write does to an object already under its name, as the bucket
/// would do it: `ifGenerationMatch=0` creates only if absent, no precondition
/// overwrites. (Any other precondition was refused at [`Relay::admit`].)
pub(crate) fn write_mode(preconditions: &Preconditions) -> spool::WriteMode {
    match preconditions.if_generation_match {
        Some(0) => spool::WriteMode::CreateIfAbsent,
        _ => spool::WriteMode::Overwrite,
    }
}

/// 400 unless `ifGenerationMatch` is absent (an overwrite) or 0 (create-if-absent).
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
        "The relay cannot honour the precondition {name}={value} while spooling: a spooled \
         write reaches the bucket later, when the object may have changed. Send no \
         precondition (the write overwrites) or ifGenerationMatch=0 (it creates the object \
         only if absent), or write to Cloud Storage directly."
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
