//! A Cloud Storage fake that real clients accept and that fails on a seeded schedule.
//!
//! [`FakeGcs`] owns the buckets, the fault model and the statistics; it is cheap to
//! clone (an `Arc` inside) and is built outside any runtime, so its state outlives
//! the simulated hosts that serve it, when they crash or bounce. Serve it on a real
//! port with [`FakeGcs::serve_tcp`], or on any other byte stream (a simulated
//! network's, an in-memory pipe) with [`FakeGcs::serve_connection`]; the `fake-gcs`
//! binary ([`cli`]) does the former. It knows nothing of the spool or of any
//! simulator: time comes in through [`SimClock`].
//!
//! ## What it speaks
//!
//! - JSON API: uploads (`POST /upload/storage/v1/b/{b}/o` with `uploadType=media`,
//!   `multipart` (chunked bodies accepted) and `resumable` (then `PUT`s with
//!   `Content-Range`)); `GET /storage/v1/b/{b}/o/{o}` (metadata, `alt=media` for
//!   bytes, also under `/download/...`); `GET /storage/v1/b/{b}/o` (list: `prefix`,
//!   `delimiter`, `maxResults`, `pageToken`, `versions`); `GET /storage/v1/b[/{b}]`;
//!   `DELETE`;
//!   `POST /storage/v1/b/{b}/o/{o}/compose` (composite objects, with Cloud
//!   Storage's non-MD5 ETags and `componentCount`).
//! - The JSON API's metadata calls, kept in memory ([`wire::MetaRoute`]): bucket
//!   insert, patch, update and delete (with a metageneration and its
//!   preconditions), the retention lock, IAM policies and permissions, bucket,
//!   default object and object ACLs, notification configurations, object patch,
//!   update, copy, rewrite and move, HMAC keys and the service account. Any other
//!   path under `/storage/v1` is a JSON 404 naming the request.
//! - XML API: `PUT`/`GET`/`HEAD`/`DELETE /{b}/{o}` (percent-decoded names; `ETag` =
//!   quoted hex MD5; `x-goog-generation`, `x-goog-hash`, `Last-Modified`; `Range`,
//!   `If-Match`, `If-None-Match`) and `GET /{b}?list-type=2` (what `object_store`
//!   lists with).
//! - Object attributes ([`wire::ObjectAttributes`]: content encoding, cache
//!   control, content disposition, content language, custom metadata) from every
//!   upload kind, shown in the JSON resource and as `GET`/`HEAD` headers.
//! - Object versioning: under a bucket's `versioning.enabled`, replaced and
//!   deleted objects stay as noncurrent versions, read, copied, composed, listed
//!   and deleted by generation.
//! - Preconditions on every write (`ifGenerationMatch`, `ifGenerationNotMatch`,
//!   `x-goog-if-generation-match`): 412 with Cloud Storage's JSON or XML error body.
//! - Declared digests (`x-goog-hash`, multipart metadata `crc32c`/`md5Hash`,
//!   `Content-MD5`) are checked: a mismatch is 400 and nothing is stored.
//! - The storage-testbench control API (`/retry_test`, `x-retry-test-id`), see
//!   [`Instruction`]: enough of it, and of the API, that Google's retry
//!   conformance scenarios pass through the official clients
//!   (`clients/conformance/`).
//! - Its own control API under `/_fake/`: fault windows relative to now
//!   ([`FakeGcs::add_faults`]), a reset ([`FakeGcs::reset`]) and the statistics as
//!   JSON ([`FakeStats`]).
//!
//! ## Design constraints
//!
//! - One mutex guards all state; it is never held across an await. Request bodies
//!   are read before the lock is taken, so a write and its precondition check are
//!   atomic.
//! - Per object 88 bytes plus the name (a pointer more, with its content type and
//!   attributes behind it, when they are not the defaults), and the bytes only with
//!   [`FakeGcsConfig::keep_bytes`], for composite objects, or for objects placed
//!   with [`FakeGcs::insert_object`]. Request bodies are bounded by
//!   [`Limits::max_request_bytes`] (default 64 MiB).
//! - Every random choice comes from one seeded RNG ([`FaultPlan`]); time comes from a
//!   [`SimClock`]. No real time, no hash-map iteration.
//! - A held request (hang, stall) is released after its window's `hang_for` (default
//!   10 min), so held tasks cannot pile up without bound.
//!
//! ## Layout
//!
//! The protocol is apart from the fake, so that a second server (a relay that writes
//! uploads into a spool) can use it: [`wire`] parses requests into typed values and
//! builds answers, and knows nothing of buckets, faults or time. The rest is the
//! fake's own:
//!
//! | file | what |
//! |---|---|
//! | `fake.rs` | [`FakeGcs`], its configuration, statistics and request events |
//! | `serve.rs` | connections: any byte stream, or a real listener |
//! | `target.rs` | what a request asks for: the fake's control API, the testbench's, or Cloud Storage's |
//! | `handler.rs` | one request: its fault decided and applied, its body read, its fate recorded |
//! | `api/` | the JSON and XML APIs against the state, under the lock (`mod.rs`: object bytes; `buckets.rs`, `acl.rs`, `objects.rs`, `managed_folders.rs`, `projects.rs`: metadata calls) |
//! | `bucket.rs` | what a bucket holds (live objects, noncurrent versions), listing in name order |
//! | `metadata/` | bucket metadata (fields, metageneration, IAM, notifications), ACLs, object edits, HMAC keys |
//! | `faults/` | [`FaultPlan`]: fault windows and capacity, one seeded RNG |
//! | `retry_test.rs` | the storage-testbench control API and its [`Instruction`]s |
//! | `control.rs` | the fake's own control API (`/_fake/faults`, `/_fake/reset`, `/_fake/stats`) |
//! | `clock.rs` | [`SimClock`], [`TokioClock`] |
//! | `cli.rs` | the `fake-gcs` command line and its `FAKE_GCS_*` variables ([`cli::run`]) |
//! | `wire/` | Cloud Storage's wire protocol (see [`wire`]) |

#![warn(missing_docs)]

mod api;
mod bucket;
pub mod cli;
mod clock;
mod control;
mod fake;
mod faults;
mod handler;
mod metadata;
mod retry_test;
mod serve;
mod target;
pub mod tls;
pub mod wire;

pub use bucket::Objects;
pub use clock::{SimClock, TokioClock};
pub use fake::{FakeGcs, FakeGcsConfig, FakeStats, Limits, Observer, RequestEvent};
pub use faults::{
    Fault, FaultPlan, FaultWindow, Ops, Outcome, PlanError, Refusal, RequestCapacity, SlowLatency,
};
pub use retry_test::Instruction;
pub use wire::{ObjectAttributes, ObjectRecord, Operation};
