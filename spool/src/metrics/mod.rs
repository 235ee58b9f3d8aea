//! Metric names, in one place and in base units, and the endpoint that serves them.
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `spool_files` | gauge | entries stored |
//! | `spool_bytes` | gauge | bytes of entry files stored |
//! | `spool_oldest_age_seconds` | gauge | age of the oldest entry (0 when empty) |
//! | `spool_max_files`, `spool_max_bytes` | gauge | the configured bounds |
//! | `spool_quarantined_files`, `spool_dead_letter_files` | gauge | files set aside |
//! | `spool_broken` | gauge | 1 once the spool stopped accepting writes after an I/O error |
//! | `uploads_total{outcome}` | counter | `stored` (directly), `spooled`, `rejected` (spool full or too large: backpressure), `failed` (refused by the store, invalid, or the spool broken) |
//! | `store_errors_total{path,kind}` | counter | failed store writes; `path` is `direct` or `drain`, `kind` a status (`503`), `timeout`, `transport`, `already_exists`, `conflict` or `refused` |
//! | `drained_total{how}` | counter | entries removed after the store took them: `uploaded`, or `already_present` (412: an earlier try had landed) |
//! | `dead_lettered_total` | counter | entries moved to `dead-letter/` |
//! | `quarantined_total` | counter | entries moved to `quarantine/` |
//! | `drain_retries_total` | counter | drain attempts that failed and will be retried |
//! | `upload_direct_seconds` | histogram | latency of direct store writes |
//! | `spool_put_seconds` | histogram | latency of durable spool puts |
//! | `drain_write_seconds` | histogram | latency of drain store writes |
//!
//! Gauges are computed from the spool's index at scrape time. Alert rules that use
//! these names ship in `spool/alerts/spool.rules.yml`.

#[cfg(feature = "http")]
mod endpoint;
#[cfg(feature = "http")]
pub use endpoint::{DEFAULT_METRICS_ADDR, bind_and_serve, serve};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::stats::Stats;

/// What happened to one [`Uploader::upload`](crate::Uploader::upload) call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UploadOutcome {
    /// Written to the store directly.
    Stored,
    /// Written to the spool; the drainer will deliver it.
    Spooled,
    /// Refused because the spool is full or the object too large for it.
    Rejected,
    /// Refused by the store for good, invalid, or the spool is broken.
    Failed,
}

impl UploadOutcome {
    fn label(self) -> &'static str {
        match self {
            UploadOutcome::Stored => "stored",
            UploadOutcome::Spooled => "spooled",
            UploadOutcome::Rejected => "rejected",
            UploadOutcome::Failed => "failed",
        }
    }
}

/// How a drained entry left the spool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DrainOutcome {
    /// The store took the upload.
    Uploaded,
    /// The store already had the object with the same size and checksum.
    AlreadyPresent,
}

impl DrainOutcome {
    fn label(self) -> &'static str {
        match self {
            DrainOutcome::Uploaded => "uploaded",
            DrainOutcome::AlreadyPresent => "already_present",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DrainLabels {
    how: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreErrorLabels {
    path: &'static str,
    kind: String,
}

/// Which code path a store write was on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePath {
    /// The uploader's first attempt.
    Direct,
    /// A drainer attempt.
    Drain,
}

impl WritePath {
    fn label(self) -> &'static str {
        match self {
            WritePath::Direct => "direct",
            WritePath::Drain => "drain",
        }
    }
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 65 s: a healthy write, a slow one, and a full timeout.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Counters and histograms of one spool, its uploader and its drainer. Cheap to clone;
/// clones share values.
#[derive(Debug, Clone)]
pub struct Metrics {
    uploads: Family<OutcomeLabels, Counter>,
    store_errors: Family<StoreErrorLabels, Counter>,
    drained: Family<DrainLabels, Counter>,
    pub(crate) dead_lettered: Counter,
    pub(crate) quarantined: Counter,
    pub(crate) drain_retries: Counter,
    pub(crate) recoveries: Counter,
    pub(crate) upload_direct_seconds: Histogram,
    pub(crate) spool_put_seconds: Histogram,
    pub(crate) drain_write_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            uploads: Family::default(),
            store_errors: Family::default(),
            drained: Family::default(),
            dead_lettered: Counter::default(),
            quarantined: Counter::default(),
            drain_retries: Counter::default(),
            recoveries: Counter::default(),
            upload_direct_seconds: latency_histogram(),
            spool_put_seconds: latency_histogram(),
            drain_write_seconds: latency_histogram(),
        }
    }
}

impl Metrics {
    /// Registers the counters and histograms, and gauges computed on each scrape
    /// from `stats` (a view of the spool they describe).
    pub fn register(
        &self,
        registry: &mut Registry,
        stats: impl Fn() -> Stats + Send + Sync + 'static,
    ) {
        registry.register(
            "uploads",
            "Upload calls by outcome: stored, spooled, rejected (backpressure) or failed",
            self.uploads.clone(),
        );
        registry.register(
            "store_errors",
            "Failed object-store writes by path (direct, drain) and kind",
            self.store_errors.clone(),
        );
        registry.register(
            "drained",
            "Entries removed from the spool after the store took them",
            self.drained.clone(),
        );
        registry.register(
            "dead_lettered",
            "Entries moved to dead-letter/ after a non-retryable store error",
            self.dead_lettered.clone(),
        );
        registry.register(
            "quarantined",
            "Entries moved to quarantine/ after failing verification",
            self.quarantined.clone(),
        );
        registry.register(
            "drain_retries",
            "Drain attempts that failed with a retryable error",
            self.drain_retries.clone(),
        );
        registry.register(
            "spool_recoveries",
            "Times the spool reopened itself in place after a failed directory sync",
            self.recoveries.clone(),
        );
        registry.register_with_unit(
            "upload_direct",
            "Latency of direct object-store writes",
            Unit::Seconds,
            self.upload_direct_seconds.clone(),
        );
        registry.register_with_unit(
            "spool_put",
            "Latency of durable spool puts",
            Unit::Seconds,
            self.spool_put_seconds.clone(),
        );
        registry.register_with_unit(
            "drain_write",
            "Latency of drain object-store writes",
            Unit::Seconds,
            self.drain_write_seconds.clone(),
        );
        registry.register_collector(Box::new(SpoolGauges(stats)));
    }

    pub(crate) fn upload(&self, outcome: UploadOutcome) {
        self.uploads
            .get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            })
            .inc();
    }

    pub(crate) fn drained(&self, how: DrainOutcome) {
        self.drained
            .get_or_create(&DrainLabels { how: how.label() })
            .inc();
    }

    pub(crate) fn store_error(&self, path: WritePath, kind: String) {
        self.store_errors
            .get_or_create(&StoreErrorLabels {
                path: path.label(),
                kind,
            })
            .inc();
    }

    /// Upload calls that ended with `outcome` so far.
    pub fn uploads_total(&self, outcome: UploadOutcome) -> u64 {
        self.uploads
            .get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            })
            .get()
    }

    /// Entries drained with `how` so far.
    pub fn drained_total(&self, how: DrainOutcome) -> u64 {
        self.drained
            .get_or_create(&DrainLabels { how: how.label() })
            .get()
    }

    /// Entries dead-lettered so far.
    pub fn dead_lettered_total(&self) -> u64 {
        self.dead_lettered.get()
    }

    /// Entries quarantined so far (at open and while draining).
    pub fn quarantined_total(&self) -> u64 {
        self.quarantined.get()
    }

    /// Times the spool reopened itself after a failed directory sync, so far.
    pub fn recoveries_total(&self) -> u64 {
        self.recoveries.get()
    }

    /// Failed drain attempts that will be retried, so far.
    pub fn drain_retries_total(&self) -> u64 {
        self.drain_retries.get()
    }
}

/// The spool's gauges, computed on each scrape from a view of the spool.
struct SpoolGauges<F>(F);

impl<F> std::fmt::Debug for SpoolGauges<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpoolGauges")
    }
}

impl<F: Fn() -> Stats + Send + Sync + 'static> Collector for SpoolGauges<F> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = (self.0)();
        let gauges: [(&str, &str, Option<Unit>, f64); 8] = [
            (
                "spool_files",
                "Entries stored in the spool",
                None,
                s.files as f64,
            ),
            (
                "spool",
                "Bytes of entry files stored in the spool",
                Some(Unit::Bytes),
                s.bytes as f64,
            ),
            (
                "spool_oldest_age",
                "Age of the oldest entry in the spool (0 when empty)",
                Some(Unit::Seconds),
                s.oldest_age.as_secs_f64(),
            ),
            (
                "spool_max_files",
                "Configured bound on entries (max_files)",
                None,
                s.max_files as f64,
            ),
            (
                "spool_max",
                "Configured bound on bytes (max_bytes)",
                Some(Unit::Bytes),
                s.max_bytes as f64,
            ),
            (
                "spool_quarantined_files",
                "Files in quarantine/",
                None,
                s.quarantined_files as f64,
            ),
            (
                "spool_dead_letter_files",
                "Files in dead-letter/",
                None,
                s.dead_letter_files as f64,
            ),
            (
                "spool_broken",
                "1 once the spool stopped accepting writes after an I/O error",
                None,
                f64::from(u8::from(s.broken.is_some())),
            ),
        ];
        for (name, help, unit, value) in gauges {
            let gauge = ConstGauge::new(value);
            let metric =
                encoder.encode_descriptor(name, help, unit.as_ref(), gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// The content type of the OpenMetrics text `prometheus-client` encodes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Encodes `registry` as OpenMetrics text.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)
        .expect("writing to a String cannot fail");
    out
}
