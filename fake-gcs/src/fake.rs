//! The fake itself: its configuration, the state one mutex guards, what it counts
//! and reports per request, what a test or a checker can read back, and what it
//! can change without a request (objects placed directly, faults from now, a
//! reset).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::bucket::{Bucket, Objects, StoredObject};
use crate::clock::SimClock;
use crate::faults::{Fault, FaultEngine, FaultPlan, PlanError};
use crate::metadata::HmacKeys;
use crate::retry_test::{Instruction, RetryTests};
use crate::wire::{self, Digests, ObjectAttributes, ObjectRecord, Operation, Sessions};

/// Bounds on what the fake holds. Each has a default suited to both the long
/// replays and ad-hoc use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body (one upload, or one resumable upload in total), in
    /// bytes; larger ones get 413. Default 64 MiB.
    pub max_request_bytes: u64,
    /// Resumable sessions kept at once; the oldest is forgotten first. Default
    /// 10,000.
    pub max_upload_sessions: usize,
    /// Storage-testbench retry tests kept at once; the oldest is forgotten first.
    /// Default 10,000.
    pub max_retry_tests: usize,
    /// Most entries per list page (`maxResults`/`max-keys` are capped to it).
    /// Default 1,000, as Cloud Storage.
    pub max_list_results: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_bytes: 64 * 1024 * 1024,
            max_upload_sessions: 10_000,
            max_retry_tests: 10_000,
            max_list_results: 1_000,
        }
    }
}

/// How to build a [`FakeGcs`].
#[derive(Debug, Clone, Default)]
pub struct FakeGcsConfig {
    /// Buckets that exist from the start.
    pub buckets: Vec<String>,
    /// Create a bucket the first time a request names it (instead of 404). Default
    /// false.
    pub auto_create_buckets: bool,
    /// Keep object bytes (needed to download and compose); otherwise only digests
    /// are kept and a download gets 501. Default false: the long replays write
    /// millions of objects. (The `fake-gcs` binary keeps them unless told
    /// `--drop-bytes`.) Objects placed with [`FakeGcs::insert_object`] keep their
    /// bytes either way.
    pub keep_bytes: bool,
    /// Seed of the one RNG every fault draw comes from.
    pub seed: u64,
    /// The fault schedule and capacity model.
    pub faults: FaultPlan,
    /// Bounds on held state.
    pub limits: Limits,
}

/// Counters over all requests so far (those of the `/_fake/` control API are not
/// counted). `by_status` plus `dropped` add up to `requests` once every request
/// has finished.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FakeStats {
    /// Requests received.
    pub requests: u64,
    /// Requests per operation name (`storage.objects.insert`, ...).
    pub by_operation: BTreeMap<String, u64>,
    /// Responses per status code (including injected ones).
    pub by_status: BTreeMap<u16, u64>,
    /// Requests that ended with the connection dropped and no response.
    pub dropped: u64,
    /// Injected faults per label (`503`, `hang`, `shed`, `return-503`, ...).
    pub by_fault: BTreeMap<String, u64>,
    /// Requests the capacity model shed (also counted in `by_fault` as `shed`).
    pub shed: u64,
    /// Objects written by requests (each successful create, overwrite or compose).
    pub objects_committed: u64,
    /// Objects placed with [`FakeGcs::insert_object`], not by a request.
    pub objects_inserted: u64,
    /// Writes refused by a precondition (412).
    pub precondition_failures: u64,
}

/// One finished request, as the observer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestEvent {
    /// Arrival, as elapsed time since t = 0 of the fake's clock.
    pub at: Duration,
    /// From arrival to the response head (or to the dropped connection).
    pub took: Duration,
    /// What the request did.
    pub operation: Operation,
    /// The bucket it named, if any.
    pub bucket: Option<String>,
    /// The object it named, if any.
    pub object: Option<String>,
    /// The fault injected, if any.
    pub fault: Option<Fault>,
    /// The status sent; `None` when the connection was dropped without one.
    pub status: Option<u16>,
    /// Whether this request wrote an object (true for `commit_then_*` too).
    pub committed: bool,
}

/// A callback for every finished request (see [`FakeGcs::set_observer`]).
pub type Observer = Arc<dyn Fn(&RequestEvent) + Send + Sync>;

/// The Cloud Storage fake. See the [crate docs](crate).
#[derive(Clone)]
pub struct FakeGcs {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) clock: Arc<dyn SimClock>,
    /// The buckets and seed of the configuration, for a reset.
    pub(crate) initial_buckets: Vec<String>,
    pub(crate) seed: u64,
    pub(crate) keep_bytes: bool,
    pub(crate) auto_create_buckets: bool,
    pub(crate) limits: Limits,
    state: Mutex<State>,
    observer: Mutex<Option<Observer>>,
}

/// Everything the mutex guards.
pub(crate) struct State {
    pub(crate) buckets: BTreeMap<String, Bucket>,
    pub(crate) faults: FaultEngine,
    pub(crate) retry_tests: RetryTests,
    /// Resumable upload sessions; a completed one remembers its object.
    pub(crate) uploads: Sessions<ObjectRecord>,
    /// XML API multipart uploads in progress, by upload ID.
    pub(crate) xml_uploads: BTreeMap<String, XmlUpload>,
    /// XML multipart uploads started (their IDs).
    pub(crate) xml_upload_ids: u64,
    /// Buckets deleted by a request: not created again on first use (until a
    /// bucket insert or a reset).
    pub(crate) deleted_buckets: BTreeSet<String>,
    /// The projects' HMAC keys.
    pub(crate) hmac_keys: HmacKeys,
    pub(crate) last_generation: i64,
    pub(crate) stats: FakeStats,
}

impl fmt::Debug for FakeGcs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("FakeGcs")
            .field("buckets", &state.buckets.keys().collect::<Vec<_>>())
            .field("keep_bytes", &self.inner.keep_bytes)
            .field("stats", &state.stats)
            .finish_non_exhaustive()
    }
}

/// An object about to be stored: all but its generation and creation time.
/// An XML API multipart upload in progress: where it goes, what its object will
/// be described as, and the parts received by number.
#[derive(Debug)]
pub(crate) struct XmlUpload {
    pub(crate) bucket: String,
    pub(crate) name: String,
    pub(crate) content_type: Cow<'static, str>,
    pub(crate) attributes: ObjectAttributes,
    pub(crate) parts: BTreeMap<u32, XmlPart>,
}

/// One part of an XML multipart upload: its digests and length, and its bytes when
/// the fake keeps bytes (a fake that drops them holds no upload in memory).
#[derive(Debug)]
pub(crate) struct XmlPart {
    pub(crate) bytes: Option<Bytes>,
    pub(crate) len: u64,
    pub(crate) digests: Digests,
}

/// An object as the state records it, without its bytes.
pub(crate) struct Described {
    pub(crate) name: String,
    pub(crate) size: u64,
    pub(crate) digests: Digests,
    pub(crate) content_type: Cow<'static, str>,
    pub(crate) attributes: ObjectAttributes,
    pub(crate) component_count: Option<NonZeroU32>,
    /// Resource fields given with it (see [`crate::wire::KEPT_FIELDS`]).
    pub(crate) fields: Map<String, Value>,
}

pub(crate) struct NewObject {
    pub(crate) name: String,
    pub(crate) data: Bytes,
    pub(crate) digests: Digests,
    pub(crate) content_type: Cow<'static, str>,
    pub(crate) attributes: ObjectAttributes,
    pub(crate) component_count: Option<NonZeroU32>,
    /// Resource fields given with it (see [`crate::wire::KEPT_FIELDS`]).
    pub(crate) fields: Map<String, Value>,
}

impl State {
    /// The state of a fake just built: `buckets` (empty, created at `now_ms`), the
    /// plan's faults drawn from `seed`, nothing else.
    fn new(buckets: &[String], faults: FaultPlan, seed: u64, limits: Limits, now_ms: u64) -> Self {
        State {
            buckets: buckets
                .iter()
                .map(|b| (b.clone(), Bucket::new(now_ms)))
                .collect(),
            faults: FaultEngine::new(faults, seed),
            retry_tests: RetryTests::new(limits.max_retry_tests),
            uploads: Sessions::new(limits.max_upload_sessions),
            xml_uploads: BTreeMap::new(),
            xml_upload_ids: 0,
            deleted_buckets: BTreeSet::new(),
            hmac_keys: HmacKeys::default(),
            last_generation: 0,
            stats: FakeStats::default(),
        }
    }

    /// Stores `object` in `bucket` (created if missing) as a new generation, with
    /// its bytes when `keep_bytes`; returns its record. Preconditions are the
    /// caller's to check first, under the same lock.
    pub(crate) fn commit(
        &mut self,
        bucket: &str,
        object: NewObject,
        now_ms: u64,
        keep_bytes: bool,
    ) -> ObjectRecord {
        let size = object.data.len() as u64;
        let data = keep_bytes.then_some(object.data);
        let described = Described {
            name: object.name,
            size,
            digests: object.digests,
            content_type: object.content_type,
            attributes: object.attributes,
            component_count: object.component_count,
            fields: object.fields,
        };
        self.commit_described(bucket, described, data, now_ms)
    }

    /// Stores a new generation of an object known by its description (and its
    /// bytes, when they are kept).
    pub(crate) fn commit_described(
        &mut self,
        bucket: &str,
        object: Described,
        data: Option<Bytes>,
        now_ms: u64,
    ) -> ObjectRecord {
        let generation = self.next_generation(now_ms);
        let record = ObjectRecord {
            name: object.name,
            generation,
            size: object.size,
            crc32c: object.digests.crc32c,
            md5: object.digests.md5,
            created_unix_ms: now_ms,
            content_type: object.content_type,
            attributes: object.attributes.boxed(),
            component_count: object.component_count,
        };
        let (key, mut stored) = StoredObject::new(record.clone(), data);
        let b = self.buckets.entry(bucket.to_string());
        let b = b.or_insert_with(|| Bucket::new(now_ms));
        stored.add_fields(b.new_object_fields(now_ms, object.fields));
        b.put(key, stored, now_ms);
        record
    }

    /// A new generation, at `now_ms`: strictly more than every one before.
    pub(crate) fn next_generation(&mut self, now_ms: u64) -> i64 {
        let generation = (self.last_generation + 1).max(now_ms as i64 * 1000);
        self.last_generation = generation;
        generation
    }
}

impl FakeGcs {
    /// Builds the fake. Fails when the fault plan is invalid.
    pub fn new(config: FakeGcsConfig, clock: Arc<dyn SimClock>) -> Result<Self, PlanError> {
        config.faults.validate()?;
        let state = State::new(
            &config.buckets,
            config.faults,
            config.seed,
            config.limits,
            clock.now_unix_ms(),
        );
        Ok(Self {
            inner: Arc::new(Inner {
                clock,
                initial_buckets: config.buckets,
                seed: config.seed,
                keep_bytes: config.keep_bytes,
                auto_create_buckets: config.auto_create_buckets,
                limits: config.limits,
                state: Mutex::new(state),
                observer: Mutex::new(None),
            }),
        })
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a way
        // that matters more than losing the fake; keep serving.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The objects of `bucket` in name order (empty when there is no such bucket).
    pub fn objects(&self, bucket: &str) -> Vec<ObjectRecord> {
        self.state()
            .buckets
            .get(bucket)
            .map(|b| b.objects.iter().map(|(name, o)| o.record(name)).collect())
            .unwrap_or_default()
    }

    /// Removes the objects of `bucket` and returns them (none when there is no such
    /// bucket): for the end of a run, where a copy would hold millions of records
    /// twice. The bucket stays, empty.
    pub fn take_objects(&self, bucket: &str) -> Objects {
        self.state()
            .buckets
            .get_mut(bucket)
            .map(|b| Objects::new(std::mem::take(&mut b.objects)))
            .unwrap_or_default()
    }

    /// Number of objects in `bucket`.
    pub fn object_count(&self, bucket: &str) -> usize {
        self.state()
            .buckets
            .get(bucket)
            .map_or(0, |b| b.objects.len())
    }

    /// One object's record.
    pub fn object(&self, bucket: &str, name: &str) -> Option<ObjectRecord> {
        let state = self.state();
        Some(state.buckets.get(bucket)?.objects.get(name)?.record(name))
    }

    /// Places an object directly, without a request (objects that exist before a
    /// run, or another writer's during one): `bytes` become the live generation of
    /// `bucket/name` (the bucket is created if missing), with `content_type` (the
    /// default `application/octet-stream` when `None`) and `attributes`. A
    /// `composite` object is described as Cloud Storage describes one made by
    /// compose (of one component): no MD5 is shown and its XML ETag is not an MD5.
    ///
    /// Its bytes are kept even when [`FakeGcsConfig::keep_bytes`] is off, so that
    /// a client can read them back. Takes the fake's one lock briefly (the digests
    /// are computed before); callable from any thread, inside or outside a
    /// runtime. Counted in [`FakeStats::objects_inserted`], not as a request.
    pub fn insert_object(
        &self,
        bucket: &str,
        name: &str,
        bytes: Bytes,
        content_type: Option<&str>,
        attributes: ObjectAttributes,
        composite: bool,
    ) -> ObjectRecord {
        let object = NewObject {
            name: name.to_string(),
            digests: Digests::of(&bytes),
            data: bytes,
            content_type: wire::content_type(content_type),
            attributes,
            component_count: composite.then_some(NonZeroU32::MIN),
            fields: Map::new(),
        };
        let now_ms = self.inner.clock.now_unix_ms();
        let mut state = self.state();
        state.stats.objects_inserted += 1;
        state.commit(bucket, object, now_ms, true)
    }

    /// One object's bytes, when the fake keeps them (see
    /// [`FakeGcsConfig::keep_bytes`] and [`insert_object`](Self::insert_object)).
    pub fn object_bytes(&self, bucket: &str, name: &str) -> Option<Bytes> {
        let state = self.state();
        state.buckets.get(bucket)?.objects.get(name)?.bytes.clone()
    }

    /// The counters so far.
    pub fn stats(&self) -> FakeStats {
        self.state().stats.clone()
    }

    /// Time since t = 0 of the fake's clock: the axis fault windows are placed on.
    pub fn elapsed(&self) -> Duration {
        self.inner.clock.elapsed()
    }

    /// Adds `plan`'s fault windows, refusals and capacity with offsets relative to
    /// now (the fake's clock): a window `from = "0s", until = "30s"` covers the
    /// next 30 seconds. Its windows are consulted before those already in force,
    /// so an outage asked for now is not hidden by the plan the fake started with;
    /// its capacity, if any, replaces the one in force. Now is taken to the
    /// millisecond (so offsets read `1m 40s 250ms`, not nanoseconds). Returns the
    /// plan now in force (offsets from t = 0). Fails, changing nothing, when
    /// `plan` is invalid.
    pub fn add_faults(&self, plan: FaultPlan) -> Result<FaultPlan, PlanError> {
        plan.validate()?;
        let now = Duration::from_millis(self.elapsed().as_millis() as u64);
        let mut state = self.state();
        state.faults.add(plan, now);
        Ok(state.faults.plan().clone())
    }

    /// The fault plan in force, with offsets from t = 0 of the fake's clock.
    pub fn faults(&self) -> FaultPlan {
        self.state().faults.plan().clone()
    }

    /// Removes every fault window, refusal and capacity limit.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Back to the state the fake was built in, without its faults: the
    /// configured buckets, empty (others are forgotten); no faults (the RNG
    /// seeded again); no statistics, upload sessions, retry tests or scripted
    /// instructions. Generations keep growing from where they were.
    pub fn reset(&self) {
        let now_ms = self.inner.clock.now_unix_ms();
        let inner = &self.inner;
        let mut state = self.state();
        let last_generation = state.last_generation;
        *state = State::new(
            &inner.initial_buckets,
            FaultPlan::none(),
            inner.seed,
            inner.limits,
            now_ms,
        );
        state.last_generation = last_generation;
    }

    /// Calls `observer` for every finished request, outside the fake's lock.
    /// Replaces any previous observer.
    pub fn set_observer(&self, observer: Observer) {
        *self.observer_slot() = Some(observer);
    }

    /// Stops calling the observer.
    pub fn clear_observer(&self) {
        *self.observer_slot() = None;
    }

    fn observer_slot(&self) -> MutexGuard<'_, Option<Observer>> {
        self.inner
            .observer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues storage-testbench instructions that the next requests of `op` consume
    /// (one each), whether or not they carry `x-retry-test-id`. Scripted
    /// instructions take precedence over the capacity model and fault windows.
    pub fn script(&self, op: Operation, instructions: impl IntoIterator<Item = Instruction>) {
        self.state().retry_tests.script(op, instructions);
    }

    /// Registers a storage-testbench retry test, as `POST /retry_test` does; requests
    /// with `x-retry-test-id: <returned id>` consume its instructions.
    pub fn create_retry_test(&self, instructions: BTreeMap<Operation, Vec<Instruction>>) -> String {
        let by_name = instructions
            .into_iter()
            .map(|(op, list)| (op.name().to_string(), list))
            .collect();
        self.state().retry_tests.create(by_name, "HTTP".into())
    }

    pub(crate) fn emit(&self, event: &RequestEvent) {
        let observer = self.observer_slot().clone();
        if let Some(observer) = observer {
            observer(event);
        }
    }
}
