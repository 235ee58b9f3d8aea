//! # spool: object-store writes that survive outages
//!
//! When the object store fails a write, the bytes go to a bounded, crash-safe spool on
//! local disk; a drainer delivers them with jittered retries once the store recovers;
//! Prometheus gauges show the backlog. Callers get backpressure when the spool is
//! full. Nothing is dropped silently.
//!
//! ## Design constraints
//!
//! - One file per pending object: a 48-byte header, the object name (at most 1024
//!   bytes), the payload. Both header and payload carry a crc32c.
//! - Bounded by `max_files` (default 100,000) and `max_bytes` (default 1 GiB),
//!   reserved before the first await: concurrent puts never overshoot.
//! - A put is acknowledged only when durable: file data synced, renamed into place,
//!   directory synced. Concurrent puts share directory syncs.
//! - The directory is listed once, at open; afterwards each put, claim and removal is
//!   O(log n) in an in-memory index of about 60 bytes per entry.
//! - An fsync error is never retried: the spool stops accepting writes. A full disk is
//!   backpressure, not a crash.
//! - Four seams, one narrow trait each, are where a simulation swaps the world:
//!   [`Disk`], the object store ([`object_store::ObjectStore`] behind [`Remote`]),
//!   [`Clock`], and the drainer's RNG seed ([`DrainerConfig::rng_seed`]).
//!
//! ## Example
//!
//! ```no_run
//! # async fn demo(gcs: std::sync::Arc<dyn object_store::ObjectStore>) -> Result<(), Box<dyn std::error::Error>> {
//! use spool::{Drainer, DrainerConfig, Remote, Spool, SpoolConfig, Uploader, UploaderConfig};
//!
//! let spool = Spool::open("/var/spool/uploads", SpoolConfig::default()).await?;
//! let remote = Remote::new(gcs); // built with its own retries off (`RetryConfig { max_retries: 0, .. }`)
//! let drainer = Drainer::start(spool.clone(), remote.clone(), DrainerConfig::default());
//! let uploader = Uploader::new(spool, remote, UploaderConfig::default());
//!
//! uploader.upload("events/2026-10-08/1.json", bytes::Bytes::from("{}")).await?;
//! drainer.shutdown().await;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "http")]
pub mod access;
pub mod alerts;
pub mod backoff;
pub mod clock;
#[cfg(feature = "connect")]
pub mod connect;
pub mod disk;
pub mod drainer;
pub mod entry;
pub mod error;
pub mod format;
#[cfg(any(feature = "testing", feature = "connect"))]
pub mod hooked;
pub mod inspect;
pub mod metrics;
pub mod name;
#[cfg(feature = "http")]
pub mod places;
pub mod remote;
mod spool;
pub mod stats;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod uploader;
pub mod write_mode;

pub use backoff::{BackoffConfig, Jitter};
pub use clock::{Clock, SystemClock};
pub use disk::{Contents, Disk, StdDisk};
pub use drainer::{Drainer, DrainerConfig};
pub use error::{FullReason, OpenError, PutError, StoreError, UploadError};
pub use metrics::Metrics;
pub use remote::Remote;
pub use spool::layout;
pub use spool::{
    Claim, OpenReport, ReadError, Receipt, Requeued, SetAside, Spool, SpoolConfig, Staged,
};
pub use stats::Stats;
pub use uploader::{Outcome, Uploader, UploaderConfig};
pub use write_mode::WriteMode;
