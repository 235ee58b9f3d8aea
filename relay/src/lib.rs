//! # relay: a local Cloud Storage upload endpoint backed by the spool
//!
//! `spool-relay` listens on the service's own host and speaks the part of Cloud
//! Storage's API that official clients upload with: JSON API media, multipart and
//! resumable uploads, and XML `PUT`. Point a client at it (`apiEndpoint`,
//! `api_endpoint`, `STORAGE_EMULATOR_HOST`) and every upload goes through
//! [`spool::Uploader::upload_with`]: into the upstream bucket, or durably into the
//! spool when the upstream fails, to be delivered by the [`spool::Drainer`].
//!
//! ## What it promises
//!
//! - 200 only when the object is safe: stored upstream, or synced to the spool. The
//!   answer is Cloud Storage's (the JSON object resource, or the XML API's headers),
//!   computed from the bytes received, so clients' checksum validation passes; the
//!   header [`OUTCOME_HEADER`] (`x-spool-outcome: stored|spooled`) says which.
//! - Every write is create-if-absent (`ifGenerationMatch=0`), which is what the
//!   spool can honour later; other preconditions, and options it cannot carry
//!   through the spool (encryption keys, ACLs, holds), are refused with 400.
//! - What passes through is confined to the upstream's bucket: the upstream's path
//!   is built from the route the relay checked, and a path with dot segments or a
//!   backslash is refused before routing (`passthrough/target.rs`).
//! - A full spool is 503 with `Retry-After`: the client's own retry loop is the
//!   backpressure. Permanent refusals (400, 403, 404, 412, 413) are passed through.
//! - Everything else on the upstream's bucket (reads, metadata, lists, deletes,
//!   patches, copies, compose) passes through to the upstream when
//!   [`RelayConfig::pass_through`] says where ([`PassThrough`]; the command sets
//!   it): the upstream's answer comes back as it gave it, its body streamed.
//!   Without it (the library's default) they are answered 501, saying so. The
//!   relay reads with its own credentials: whoever may write through it may read
//!   the bucket through it; the token and loopback rules apply to every route.
//!
//! ## Design constraints
//!
//! - Request bodies stream in pieces of at most 1 MiB (`body.rs`): into the
//!   spool's staged entry, or a resumable session's chunk file, never whole. An
//!   object is at most [`Relay::max_object_bytes`]: what the spool can hold (its
//!   `max_bytes` less [`MAX_ENTRY_HEAD_BYTES`]), or less.
//! - Resumable sessions live on disk beside the spool: at most
//!   [`RelayConfig::max_sessions`] open (1,000), at most
//!   [`RelayConfig::max_session_bytes`] (8 GiB) on disk in all, each for
//!   [`RelayConfig::session_ttl`] (7 days).
//! - At most [`ServerConfig::max_connections`] (256) connections, each given 30 s
//!   for a request's head and [`ServerConfig::body_timeout`] (60 s) without progress.
//! - Time comes from the spool's [`spool::Clock`] (generations, `timeCreated`,
//!   session ages); the relay reads no clock of its own.
//! - Shutdown stops accepting, lets requests in flight finish (bounded by a grace
//!   period), then stops the drainer between entries.
//!
//! ## Layout
//!
//! | file | what |
//! |---|---|
//! | `relay.rs` | [`Relay`]: its configuration and state, one upload from parsed request to answer |
//! | `resumable.rs` | resumable uploads: open a session, take its chunks, complete it through [`Relay`], cancel it |
//! | `sessions/` | the resumable sessions, durable beside the spool: unguessable IDs, chunks on disk, limits (`mod.rs`); the table and its checked totals (`table.rs`); the one latching path to the disk (`disk.rs`); file names and formats (`files.rs`) |
//! | `handler.rs` | one HTTP request: route it from its head, serve it or pass it through, count and log it |
//! | `spooled/` | read-your-writes: objects answered `spooled` (in this run or an earlier one on the spool), served from their spool entries to metadata and media `GET`s until delivered (`mod.rs`); their table by name and by entry (`table.rs`); an earlier run's learned from headers, MD5s later (`recover.rs`); deletes owed to a failing upstream (`deletes.rs`) |
//! | `listing.rs` | lists that show spooled objects: the upstream's page merged in name order with what the spool still holds, O((page + skipped) log n), page tokens across both |
//! | `passthrough/` | [`PassThrough`]: which requests go to the upstream and on what path, built from the checked route (`target.rs`), forwarded over HTTP(S) with the relay's credentials (`http.rs`, feature `http-upstream`), or answered from a `file://` store in Cloud Storage's shapes (`store.rs`) |
//! | `body.rs` | a request body read in pieces as it arrives, never whole |
//! | `upload.rs` | media, multipart and XML uploads, streamed into the spool |
//! | `answer.rs` | answers: the object resource built from what was written, refusals with their statuses |
//! | `server.rs` | [`Connections`]: each connection over any byte stream, and graceful shutdown; the accept loop ([`serve`]) with its bounds ([`ServerConfig`]) |
//! | `auth.rs` | [`Access`]: who may send requests (browsers refused, loopback `Host` names, a bearer [`Token`]), checked before the handler |
//! | `timeout_io.rs` | a connection's byte stream whose reads and writes time out without progress (`--body-timeout`) |
//! | `metrics.rs` | [`RelayMetrics`]: the relay's request counters, in the spool's registry |
//! | `cli.rs` | the `spool-relay` command line (`cli::main`; feature `cli`, on by default) |
//! | `handoff.rs` | the command's listening socket: inherited (systemd socket activation, an old relay) or bound, and handed to a new process on SIGHUP |

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod answer;
pub mod auth;
mod body;
#[cfg(feature = "cli")]
pub mod cli;
mod handler;
#[cfg(feature = "cli")]
mod handoff;
mod listing;
pub mod metrics;
mod passthrough;
#[allow(clippy::module_inception)]
mod relay;
mod resumable;
mod server;
mod sessions;
mod spooled;
mod timeout_io;
mod upload;

pub use answer::{
    OUTCOME_HEADER, OUTCOME_SPOOLED, OUTCOME_STORED, REQUEST_ID_HEADER, object_attributes,
};
pub use auth::{Access, Token};
pub use metrics::RelayMetrics;
pub use passthrough::{DEFAULT_UPSTREAM_TIMEOUT, PassThrough, PassThroughError, upstream_request};
pub use relay::{
    CLOUD_STORAGE_MAX_OBJECT_BYTES, ConfigError, MAX_ENTRY_HEAD_BYTES, MULTIPART_OVERHEAD_BYTES,
    REFUSING_REASONS, Refusing, Relay, RelayConfig,
};
pub use server::{
    Connections, DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, HEADER_READ_TIMEOUT, ServerConfig,
    serve, serve_with, serve_with_tls,
};
