//! A point-in-time view of a spool: what its gauges show and what tests compare. Its
//! own module so that the metrics can read it without knowing the spool.

use std::time::Duration;

/// A point-in-time view of a spool, for gauges and tests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    /// Entries stored (durable and indexed).
    pub files: u64,
    /// Bytes of entry files stored.
    pub bytes: u64,
    /// Entries being written by puts in progress.
    pub reserved_files: u64,
    /// Bytes reserved by puts in progress.
    pub reserved_bytes: u64,
    /// Entries a drainer worker is working on.
    pub claimed: u64,
    /// Creation time of the oldest stored entry, in ms since the Unix epoch.
    pub oldest_created_unix_ms: Option<u64>,
    /// Age of the oldest stored entry by the spool's clock; zero when empty.
    pub oldest_age: Duration,
    /// Files in `quarantine/` (not counting reason files).
    pub quarantined_files: u64,
    /// Files in `dead-letter/` (not counting error files).
    pub dead_letter_files: u64,
    /// Why the spool stopped accepting writes, if it did.
    pub broken: Option<String>,
    /// What the disk said when it refused the last put that failed on it (out of
    /// space, read-only, an I/O error), until a put is durable again.
    pub disk_refused: Option<String>,
    /// The configured bounds.
    pub max_files: u64,
    /// The configured bounds.
    pub max_bytes: u64,
}
