//! What the run records as it goes, outside the hosts (so it survives their crashes):
//! each host's sampled gauges and counters, the fake's requests per interval, the
//! timeline of events, the checks made at every reopen, and each host's final
//! inventory. The report turns it into a time series.

use std::collections::BTreeMap;
use std::time::Duration;

use spool::Stats;

pub use crate::inventory::Inventory;

use crate::scenario::EventKind;

/// One host's gauges and counters at a sample instant.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostSample {
    /// Which boot of the host took it (counters restart with each boot).
    pub boot: u16,
    /// The spool's stats.
    pub stats: Stats,
    /// `drained_total` (both ways) since the boot.
    pub drained: u64,
    /// `dead_lettered_total` since the boot.
    pub dead_lettered: u64,
    /// What a Prometheus scrape of the host reads now (for the alert rules).
    pub scrape: spool::alerts::Scrape,
}

/// The fake's requests in one interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Requests received.
    pub requests: u64,
    /// Failed requests by kind: the injected fault's label (`503`, `hang`, `shed`,
    /// ...) or the status (`412`, `403`).
    pub errors: BTreeMap<String, u64>,
}

/// Something that happened to a host.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEvent {
    /// When, from t = 0.
    pub at: Duration,
    /// The host.
    pub host: u32,
    /// What.
    pub kind: EventKind,
    /// How long it stayed down.
    pub down_for: Duration,
    /// Writes in flight that became unknown.
    pub unknown: u64,
}

/// The check made right after a spool was opened.
#[derive(Debug, Clone, PartialEq)]
pub struct ReopenCheck {
    /// When, from t = 0.
    pub at: Duration,
    /// The host.
    pub host: u32,
    /// Its boot.
    pub boot: u16,
    /// `spool_files` and `spool_bytes` after open.
    pub gauges: (u64, u64),
    /// Entry files and their bytes, listed independently on the simulated disk.
    pub on_disk: (u64, u64),
    /// Open failed: why.
    pub open_error: Option<String>,
}

/// What a read through the relay got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAnswer {
    /// 200 with these bytes (their length and crc32c); `from_spool` when the relay
    /// said it served them from its spool (`x-spool-outcome: spooled`).
    Bytes {
        /// Length in bytes.
        len: u64,
        /// crc32c of the bytes.
        crc32c: u32,
        /// Served from the relay's spool, not the bucket.
        from_spool: bool,
    },
    /// 404: no such object, through the relay.
    NotFound,
    /// Any other failure (a 503 passed through, no connection, no answer).
    Failed,
}

/// A read through the relay (`[relay] reads_per_write`) of one write's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayRead {
    /// The reading host (the write's producer).
    pub host: u32,
    /// The write read.
    pub seq: u64,
    /// Milliseconds from t = 0 when the read was sent.
    pub issued_ms: u32,
    /// Milliseconds from t = 0 when it was answered (or failed).
    pub answered_ms: u32,
    /// What it got.
    pub answer: ReadAnswer,
}

/// What a delete through the relay got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteAnswer {
    /// 2xx: deleted.
    Deleted,
    /// 404: no such object, through the relay.
    NotFound,
    /// Any other failure (a 503, no connection, no answer): it may or may not have
    /// been deleted.
    Failed,
}

/// A delete through the relay (`[relay] deletes_per_write`) of one write's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayDelete {
    /// The deleting host (the write's producer).
    pub host: u32,
    /// The write deleted.
    pub seq: u64,
    /// Milliseconds from t = 0 when the delete was sent.
    pub issued_ms: u32,
    /// Milliseconds from t = 0 when it was answered (or failed).
    pub answered_ms: u32,
    /// What it got.
    pub answer: DeleteAnswer,
}

/// A list through the relay (`[relay] lists_per_write`): every page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayList {
    /// The listing host.
    pub host: u32,
    /// The prefix listed.
    pub prefix: String,
    /// Milliseconds from t = 0 when the list was sent.
    pub issued_ms: u32,
    /// Milliseconds from t = 0 when its last page came back.
    pub answered_ms: u32,
    /// The names listed, in the order given; `None` when a page failed.
    pub names: Option<Vec<String>>,
}

/// Everything recorded during a run.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    /// The sample interval.
    pub sample: Duration,
    /// Per host, samples by interval index.
    pub host_samples: Vec<BTreeMap<u64, HostSample>>,
    /// The fake's requests by interval index.
    pub requests: BTreeMap<u64, RequestCounts>,
    /// Objects in the bucket at each sample instant (by interval index).
    pub in_bucket: BTreeMap<u64, u64>,
    /// Crashes, restarts and deploys as they happened.
    pub timeline: Vec<TimelineEvent>,
    /// The check after every open.
    pub reopens: Vec<ReopenCheck>,
    /// Per host and boot, `uploads_total` by outcome at the end of the boot (or its
    /// last sample before a crash).
    pub boot_uploads: BTreeMap<(u32, u16), BTreeMap<&'static str, u64>>,
    /// Each host's final inventory.
    pub inventories: BTreeMap<u32, Inventory>,
    /// With the relay on: writes whose callers were told they failed because they
    /// never reached the relay (it was down: connection refused). The relay's
    /// counters never saw them.
    pub relay_unreached: u64,
    /// Reads through the relay, in the order they were answered.
    pub relay_reads: Vec<RelayRead>,
    /// Lists through the relay, in the order they were answered.
    pub relay_lists: Vec<RelayList>,
    /// Deletes through the relay, in the order they were answered.
    pub relay_deletes: Vec<RelayDelete>,
}

impl Recorder {
    /// A recorder for `hosts` hosts (app hosts and the relay) sampling every
    /// `sample`.
    pub fn new(hosts: u32, sample: Duration) -> Self {
        Self {
            sample,
            host_samples: vec![BTreeMap::new(); hosts as usize],
            ..Self::default()
        }
    }

    /// The interval index of time `t`.
    pub fn index(&self, t: Duration) -> u64 {
        (t.as_nanos() / self.sample.as_nanos().max(1)) as u64
    }
}
