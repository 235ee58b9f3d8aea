//! The spool's Prometheus series: their names (once, in [`names`], in base units),
//! the counters and histograms the uploader, drainer and spool update ([`Metrics`]),
//! the gauges read from a [`Stats`] view at scrape time, constant labels that let
//! several spools share one registry, the endpoint that serves them (feature `http`),
//! and the Grafana dashboard built on them ([`dashboard`]).
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `spool_files` | gauge | entries stored |
//! | `spool_bytes` | gauge | bytes of entry files stored |
//! | `spool_oldest_age_seconds` | gauge | age of the oldest entry by the spool's clock (0 when empty) |
//! | `spool_oldest_entry_created_timestamp_seconds` | gauge | creation time of the oldest entry, Unix seconds; absent when the spool is empty |
//! | `spool_claimed_files` | gauge | entries claimed by drainer workers: being sent, or read ahead |
//! | `spool_reserved_files`, `spool_reserved_bytes` | gauge | room held by puts in progress |
//! | `spool_max_files`, `spool_max_bytes` | gauge | the configured bounds |
//! | `spool_quarantined_files`, `spool_dead_letter_files` | gauge | files set aside, still on disk |
//! | `spool_broken` | gauge | 1 while the spool refuses writes after a failed directory sync (it reopens itself) |
//! | `spool_build_info{version}` | info | 1, labelled with the library's version |
//! | `spool_uploads_total{outcome}` | counter | `stored` (directly), `spooled`, `rejected` (spool full or too large: backpressure), `failed` (refused by the store, invalid, or the spool broken) |
//! | `spool_store_errors_total{path,kind}` | counter | failed store writes; `path` is `direct` or `drain`, `kind` a status (`503`), `timeout`, `transport`, `already_exists` (a 412 whose object was gone when checked), `conflict` (a 412 over other bytes), `refused` or `invalid_name`. A 412 proven ours (an earlier try landed) is no error: the upload is `stored`, the entry `already_present` |
//! | `spool_drained_total{outcome}` | counter | entries removed after the store took them: `uploaded`, or `already_present` (412: an earlier try had landed) |
//! | `spool_dead_lettered_total` | counter | entries moved to `dead-letter/` |
//! | `spool_quarantined_total` | counter | entries moved to `quarantine/` |
//! | `spool_drain_retries_total` | counter | drain attempts that failed and will be retried |
//! | `spool_recoveries_total` | counter | times the spool reopened itself after a failed directory sync |
//! | `spool_remove_errors_total` | counter | settled entries that could not leave `entries/`: a removal after delivery, or a move to `dead-letter/` or `quarantine/`, failed (the entry is tried again after a pause) |
//! | `spool_upload_direct_seconds` | histogram | latency of direct store writes |
//! | `spool_put_seconds` | histogram | latency of durable spool puts |
//! | `spool_drain_write_seconds` | histogram | latency of drain store writes |
//!
//! Every `outcome` value is exported from the start (at 0), so that `increase()` sees
//! the first rejection. Register into a registry without a prefix: the alert rules
//! ([`crate::alerts`]) and the dashboard use these names as they are.
//!
//! Two spools in one registry need constant labels to tell their series apart:
//! [`Spool::register_metrics_with_labels`] (or [`Metrics::register_with_labels`]).

pub mod dashboard;
#[cfg(feature = "http")]
mod endpoint;
mod exposition;
#[cfg(feature = "http")]
pub use endpoint::{
    DEFAULT_METRICS_ADDR, EndpointConfig, Readiness, bind_and_serve, serve, serve_with,
};
pub use exposition::{Format, TEXT_CONTENT_TYPE, text_format};

use std::borrow::Cow;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::Spool;
use crate::stats::Stats;

/// Every series name the spool exports, as it appears on the wire (with the `_total`
/// and unit suffixes the encoder adds). Rules and dashboards are written with these.
pub mod names {
    /// Gauge: entries stored.
    pub const FILES: &str = "spool_files";
    /// Gauge: bytes of entry files stored.
    pub const BYTES: &str = "spool_bytes";
    /// Gauge: age of the oldest entry (0 when empty).
    pub const OLDEST_AGE_SECONDS: &str = "spool_oldest_age_seconds";
    /// Gauge: creation time of the oldest entry in Unix seconds; absent when empty.
    pub const OLDEST_ENTRY_CREATED_TIMESTAMP_SECONDS: &str =
        "spool_oldest_entry_created_timestamp_seconds";
    /// Gauge: entries claimed by drainer workers.
    pub const CLAIMED_FILES: &str = "spool_claimed_files";
    /// Gauge: entries being written by puts in progress.
    pub const RESERVED_FILES: &str = "spool_reserved_files";
    /// Gauge: bytes reserved by puts in progress.
    pub const RESERVED_BYTES: &str = "spool_reserved_bytes";
    /// Gauge: the configured `max_files`.
    pub const MAX_FILES: &str = "spool_max_files";
    /// Gauge: the configured `max_bytes`.
    pub const MAX_BYTES: &str = "spool_max_bytes";
    /// Gauge: files in `quarantine/`.
    pub const QUARANTINED_FILES: &str = "spool_quarantined_files";
    /// Gauge: files in `dead-letter/`.
    pub const DEAD_LETTER_FILES: &str = "spool_dead_letter_files";
    /// Gauge: 1 while the spool refuses writes after a failed directory sync.
    pub const BROKEN: &str = "spool_broken";
    /// Info: 1, with the library's `version` as a label.
    pub const BUILD_INFO: &str = "spool_build_info";
    /// Counter: upload calls by `outcome`.
    pub const UPLOADS_TOTAL: &str = "spool_uploads_total";
    /// Counter: failed store writes by `path` and `kind`.
    pub const STORE_ERRORS_TOTAL: &str = "spool_store_errors_total";
    /// Counter: drained entries by `outcome`.
    pub const DRAINED_TOTAL: &str = "spool_drained_total";
    /// Counter: entries moved to `dead-letter/`.
    pub const DEAD_LETTERED_TOTAL: &str = "spool_dead_lettered_total";
    /// Counter: entries moved to `quarantine/`.
    pub const QUARANTINED_TOTAL: &str = "spool_quarantined_total";
    /// Counter: failed drain attempts that will be retried.
    pub const DRAIN_RETRIES_TOTAL: &str = "spool_drain_retries_total";
    /// Counter: times the spool reopened itself after a failed directory sync.
    pub const RECOVERIES_TOTAL: &str = "spool_recoveries_total";
    /// Counter: settled entries that could not leave `entries/` (a removal after
    /// delivery, or a move to `dead-letter/` or `quarantine/`, failed).
    pub const REMOVE_ERRORS_TOTAL: &str = "spool_remove_errors_total";
    /// Histogram: latency of direct store writes.
    pub const UPLOAD_DIRECT_SECONDS: &str = "spool_upload_direct_seconds";
    /// Histogram: latency of durable spool puts.
    pub const PUT_SECONDS: &str = "spool_put_seconds";
    /// Histogram: latency of drain store writes.
    pub const DRAIN_WRITE_SECONDS: &str = "spool_drain_write_seconds";

    /// Every name above, for tests and documentation checks.
    pub const ALL: [&str; 24] = [
        FILES,
        BYTES,
        OLDEST_AGE_SECONDS,
        OLDEST_ENTRY_CREATED_TIMESTAMP_SECONDS,
        CLAIMED_FILES,
        RESERVED_FILES,
        RESERVED_BYTES,
        MAX_FILES,
        MAX_BYTES,
        QUARANTINED_FILES,
        DEAD_LETTER_FILES,
        BROKEN,
        BUILD_INFO,
        UPLOADS_TOTAL,
        STORE_ERRORS_TOTAL,
        DRAINED_TOTAL,
        DEAD_LETTERED_TOTAL,
        QUARANTINED_TOTAL,
        DRAIN_RETRIES_TOTAL,
        RECOVERIES_TOTAL,
        REMOVE_ERRORS_TOTAL,
        UPLOAD_DIRECT_SECONDS,
        PUT_SECONDS,
        DRAIN_WRITE_SECONDS,
    ];
}

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
    /// Every outcome, in label order.
    pub const ALL: [UploadOutcome; 4] = [
        UploadOutcome::Stored,
        UploadOutcome::Spooled,
        UploadOutcome::Rejected,
        UploadOutcome::Failed,
    ];

    /// The value of the `outcome` label.
    pub fn label(self) -> &'static str {
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
    /// Every outcome, in label order.
    pub const ALL: [DrainOutcome; 2] = [DrainOutcome::Uploaded, DrainOutcome::AlreadyPresent];

    /// The value of the `outcome` label.
    pub fn label(self) -> &'static str {
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

/// Label names the spool's own series use; a constant label may not take one.
const OWN_LABELS: [&str; 5] = ["outcome", "path", "kind", "version", "le"];

/// Why constant labels for a spool's series were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// Not a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`).
    #[error(
        "{0:?} is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)"
    )]
    Invalid(String),
    /// A label the spool's own series already carry.
    #[error("{0:?} is a label the spool's own series use (outcome, path, kind, version, le)")]
    Reserved(String),
    /// The same label name given twice.
    #[error("the constant label {0:?} is given twice")]
    Duplicate(String),
}

fn check_labels(labels: &[(Cow<'static, str>, Cow<'static, str>)]) -> Result<(), LabelError> {
    for (i, (name, _)) in labels.iter().enumerate() {
        let mut chars = name.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with("__");
        if !valid {
            return Err(LabelError::Invalid(name.to_string()));
        }
        if OWN_LABELS.contains(&name.as_ref()) {
            return Err(LabelError::Reserved(name.to_string()));
        }
        if labels[..i].iter().any(|(earlier, _)| earlier == name) {
            return Err(LabelError::Duplicate(name.to_string()));
        }
    }
    Ok(())
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 65 s: a healthy write, a slow one, and a full timeout.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// `name` without the suffix the encoder adds back (`_total`, `_seconds`, `_bytes`).
fn registered_as<'a>(name: &'a str, suffix: &str) -> &'a str {
    name.strip_suffix(suffix)
        .unwrap_or_else(|| panic!("metric name {name} does not end with {suffix}"))
}

/// Counters and histograms of one spool, its uploader and its drainer. Cheap to clone;
/// clones share values.
#[derive(Debug, Clone)]
pub struct Metrics {
    uploads: Family<OutcomeLabels, Counter>,
    store_errors: Family<StoreErrorLabels, Counter>,
    drained: Family<OutcomeLabels, Counter>,
    pub(crate) dead_lettered: Counter,
    pub(crate) quarantined: Counter,
    pub(crate) drain_retries: Counter,
    pub(crate) recoveries: Counter,
    pub(crate) remove_errors: Counter,
    pub(crate) upload_direct_seconds: Histogram,
    pub(crate) spool_put_seconds: Histogram,
    pub(crate) drain_write_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let metrics = Self {
            uploads: Family::default(),
            store_errors: Family::default(),
            drained: Family::default(),
            dead_lettered: Counter::default(),
            quarantined: Counter::default(),
            drain_retries: Counter::default(),
            recoveries: Counter::default(),
            remove_errors: Counter::default(),
            upload_direct_seconds: latency_histogram(),
            spool_put_seconds: latency_histogram(),
            drain_write_seconds: latency_histogram(),
        };
        // Every outcome exists from the start, at 0: `increase()` cannot see the rise
        // of a series whose first sample is already 1.
        for outcome in UploadOutcome::ALL {
            drop(metrics.uploads.get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            }));
        }
        for outcome in DrainOutcome::ALL {
            drop(metrics.drained.get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            }));
        }
        metrics
    }
}

impl Metrics {
    /// Registers the counters and histograms, and gauges computed on each scrape
    /// from `stats` (a view of the spool they describe). One spool per registry; for
    /// more, see [`Metrics::register_with_labels`].
    pub fn register(
        &self,
        registry: &mut Registry,
        stats: impl Fn() -> Stats + Send + Sync + 'static,
    ) {
        self.register_unlabelled(registry, stats);
    }

    /// Like [`Metrics::register`], with constant labels on every series (for
    /// example `[("spool", "uploads")]`), so that several spools can share one
    /// registry. Refuses label names that are not Prometheus label names, that the
    /// spool's own series use, or that repeat.
    pub fn register_with_labels<K, V>(
        &self,
        registry: &mut Registry,
        labels: impl IntoIterator<Item = (K, V)>,
        stats: impl Fn() -> Stats + Send + Sync + 'static,
    ) -> Result<(), LabelError>
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
    {
        let labels: Vec<(Cow<'static, str>, Cow<'static, str>)> = labels
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        check_labels(&labels)?;
        self.register_unlabelled(registry.sub_registry_with_labels(labels.into_iter()), stats);
        Ok(())
    }

    fn register_unlabelled(
        &self,
        registry: &mut Registry,
        stats: impl Fn() -> Stats + Send + Sync + 'static,
    ) {
        use names::*;
        let counter = |name| registered_as(name, "_total");
        let seconds = |name| registered_as(name, "_seconds");
        registry.register(
            counter(UPLOADS_TOTAL),
            "Upload calls by outcome: stored, spooled, rejected (backpressure) or failed",
            self.uploads.clone(),
        );
        registry.register(
            counter(STORE_ERRORS_TOTAL),
            "Failed object-store writes by path (direct, drain) and kind",
            self.store_errors.clone(),
        );
        registry.register(
            counter(DRAINED_TOTAL),
            "Entries removed from the spool after the store took them, by outcome",
            self.drained.clone(),
        );
        registry.register(
            counter(DEAD_LETTERED_TOTAL),
            "Entries moved to dead-letter/ after a non-retryable store error",
            self.dead_lettered.clone(),
        );
        registry.register(
            counter(QUARANTINED_TOTAL),
            "Entries moved to quarantine/ after failing verification",
            self.quarantined.clone(),
        );
        registry.register(
            counter(DRAIN_RETRIES_TOTAL),
            "Drain attempts that failed with a retryable error",
            self.drain_retries.clone(),
        );
        registry.register(
            counter(RECOVERIES_TOTAL),
            "Times the spool reopened itself in place after a failed directory sync",
            self.recoveries.clone(),
        );
        registry.register(
            counter(REMOVE_ERRORS_TOTAL),
            "Settled entries that could not leave entries/ (a removal or a move failed); each is tried again after a pause",
            self.remove_errors.clone(),
        );
        registry.register_with_unit(
            seconds(UPLOAD_DIRECT_SECONDS),
            "Latency of direct object-store writes",
            Unit::Seconds,
            self.upload_direct_seconds.clone(),
        );
        registry.register_with_unit(
            seconds(PUT_SECONDS),
            "Latency of durable spool puts",
            Unit::Seconds,
            self.spool_put_seconds.clone(),
        );
        registry.register_with_unit(
            seconds(DRAIN_WRITE_SECONDS),
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

    pub(crate) fn drained(&self, outcome: DrainOutcome) {
        self.drained
            .get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            })
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

    /// Entries drained with `outcome` so far.
    pub fn drained_total(&self, outcome: DrainOutcome) -> u64 {
        self.drained
            .get_or_create(&OutcomeLabels {
                outcome: outcome.label(),
            })
            .get()
    }

    /// Store errors of `kind` (a [`crate::StoreError::kind_label`]) on `path` so far.
    pub fn store_errors_total(&self, path: WritePath, kind: &str) -> u64 {
        self.store_errors
            .get_or_create(&StoreErrorLabels {
                path: path.label(),
                kind: kind.to_owned(),
            })
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

    /// Settled entries that could not leave `entries/` so far: a removal after
    /// delivery, or a move to `dead-letter/` or `quarantine/`, that failed.
    pub fn remove_errors_total(&self) -> u64 {
        self.remove_errors.get()
    }

    /// Failed drain attempts that will be retried, so far.
    pub fn drain_retries_total(&self) -> u64 {
        self.drain_retries.get()
    }
}

impl Spool {
    /// Registers the spool's metrics like [`Spool::register_metrics`], with constant
    /// labels on every series, so that several spools share one registry:
    ///
    /// ```no_run
    /// # async fn demo(uploads: spool::Spool, exports: spool::Spool) -> Result<(), spool::metrics::LabelError> {
    /// let mut registry = prometheus_client::registry::Registry::default();
    /// uploads.register_metrics_with_labels(&mut registry, [("spool", "uploads")])?;
    /// exports.register_metrics_with_labels(&mut registry, [("spool", "exports")])?;
    /// # Ok(()) }
    /// ```
    pub fn register_metrics_with_labels<K, V>(
        &self,
        registry: &mut Registry,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), LabelError>
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
    {
        let spool = self.clone();
        self.metrics()
            .register_with_labels(registry, labels, move || spool.stats())
    }
}

/// The spool's gauges, computed on each scrape from a view of the spool.
struct SpoolGauges<F>(F);

impl<F> std::fmt::Debug for SpoolGauges<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpoolGauges")
    }
}

/// One gauge: its name on the wire, help, unit, and value (`None`: not exported).
type GaugeRow = (&'static str, &'static str, Option<Unit>, Option<f64>);

fn gauges(s: &Stats) -> [GaugeRow; 12] {
    use names::*;
    let n = |v: u64| Some(v as f64);
    [
        (FILES, "Entries stored in the spool", None, n(s.files)),
        (
            BYTES,
            "Bytes of entry files stored in the spool",
            Some(Unit::Bytes),
            n(s.bytes),
        ),
        (
            OLDEST_AGE_SECONDS,
            "Age of the oldest entry in the spool by the spool's clock (0 when empty)",
            Some(Unit::Seconds),
            Some(s.oldest_age.as_secs_f64()),
        ),
        (
            OLDEST_ENTRY_CREATED_TIMESTAMP_SECONDS,
            "Creation time of the oldest entry in the spool, Unix seconds (absent when empty)",
            Some(Unit::Seconds),
            s.oldest_created_unix_ms.map(|ms| ms as f64 / 1000.0),
        ),
        (
            CLAIMED_FILES,
            "Entries claimed by drainer workers: being sent, or read ahead to be sent next",
            None,
            n(s.claimed),
        ),
        (
            RESERVED_FILES,
            "Entries being written by puts in progress",
            None,
            n(s.reserved_files),
        ),
        (
            RESERVED_BYTES,
            "Bytes reserved by puts in progress",
            Some(Unit::Bytes),
            n(s.reserved_bytes),
        ),
        (
            MAX_FILES,
            "Configured bound on entries (max_files)",
            None,
            n(s.max_files),
        ),
        (
            MAX_BYTES,
            "Configured bound on bytes (max_bytes)",
            Some(Unit::Bytes),
            n(s.max_bytes),
        ),
        (
            QUARANTINED_FILES,
            "Files in quarantine/",
            None,
            n(s.quarantined_files),
        ),
        (
            DEAD_LETTER_FILES,
            "Files in dead-letter/",
            None,
            n(s.dead_letter_files),
        ),
        (
            BROKEN,
            "1 while the spool refuses writes after a failed directory sync (it reopens itself)",
            None,
            Some(f64::from(u8::from(s.broken.is_some()))),
        ),
    ]
}

impl<F: Fn() -> Stats + Send + Sync + 'static> Collector for SpoolGauges<F> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, help, unit, value) in gauges(&(self.0)()) {
            let Some(value) = value else { continue };
            let base = match &unit {
                Some(Unit::Bytes) => registered_as(name, "_bytes"),
                Some(Unit::Seconds) => registered_as(name, "_seconds"),
                _ => name,
            };
            let gauge = ConstGauge::new(value);
            let metric =
                encoder.encode_descriptor(base, help, unit.as_ref(), gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        let mut info = encoder.encode_descriptor(
            registered_as(names::BUILD_INFO, "_info"),
            "The spool library's version",
            None,
            MetricType::Info,
        )?;
        info.encode_info(&[("version", env!("CARGO_PKG_VERSION"))])
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

/// Encodes `registry` in `format` (a scrape's, [`Format::for_accept`]).
pub fn encode_as(registry: &Registry, format: Format) -> String {
    match format {
        Format::OpenMetrics => encode(registry),
        Format::Text => text_format(&encode(registry)),
    }
}

#[cfg(test)]
mod tests;
