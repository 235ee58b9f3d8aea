//! The relay's own Prometheus series, registered in the spool's registry beside the
//! spool's (whose names, alert rules and dashboard apply unchanged to a relay):
//!
//! | metric | type | meaning |
//! |---|---|---|
//! | `spool_relay_requests_total{route,code}` | counter | requests answered, by route (see [`ROUTES`]) and HTTP status |
//! | `spool_relay_received_bytes_total` | counter | request body bytes read |
//! | `spool_relay_connections` | gauge | connections open (at most `--max-connections`) |
//! | `spool_relay_reads` | gauge | reads in flight: requests passed through or served from the spool (at most `--max-reads`) |
//! | `spool_relay_refusing_uploads{reason}` | gauge | 1 for each reason the relay refuses uploads now (`Relay::refusing_uploads`), 0 for the others |
//!
//! Where acknowledged uploads went (stored or spooled) is the spool's
//! `spool_uploads_total{outcome}`; a 503 for backpressure is also counted there as
//! `rejected`.

use fake_gcs::wire::{Route, UploadKind};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The series names, as they appear on the wire.
pub mod names {
    /// Counter: requests answered, by `route` and `code`.
    pub const REQUESTS_TOTAL: &str = "spool_relay_requests_total";
    /// Counter: request body bytes read.
    pub const RECEIVED_BYTES_TOTAL: &str = "spool_relay_received_bytes_total";
    /// Gauge: connections open.
    pub const CONNECTIONS: &str = "spool_relay_connections";
    /// Gauge: reads in flight (requests passed through or served from the spool).
    pub const READS: &str = "spool_relay_reads";
    /// Gauge, by `reason`: 1 while the relay refuses uploads for it.
    pub const REFUSING_UPLOADS: &str = "spool_relay_refusing_uploads";
}

/// Every `route` label value: the upload kinds, a resumable session's requests,
/// the bucket lookup, what is passed through to the upstream and what is not, and
/// requests `wire` refuses.
pub const ROUTES: [&str; 11] = [
    "media",
    "multipart",
    "resumable_start",
    "resumable_chunk",
    "resumable_cancel",
    "xml_put",
    "bucket_get",
    "pass_through",
    "spooled_read",
    "not_passed_through",
    "invalid",
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    code: u16,
}

/// The relay's counters. Cheap to clone; clones share values.
#[derive(Debug, Clone, Default)]
pub struct RelayMetrics {
    requests: Family<RequestLabels, Counter>,
    received_bytes: Counter,
    pub(crate) connections: Gauge,
    pub(crate) reads: Gauge,
}

impl RelayMetrics {
    /// Registers the counters in `registry` (the one the spool's metrics are in).
    pub fn register(&self, registry: &mut Registry) {
        let total = |name: &'static str| name.strip_suffix("_total").expect("a counter name");
        registry.register(
            total(names::REQUESTS_TOTAL),
            "Requests the relay answered, by route and HTTP status",
            self.requests.clone(),
        );
        registry.register(
            total(names::RECEIVED_BYTES_TOTAL),
            "Request body bytes the relay read",
            self.received_bytes.clone(),
        );
        registry.register(
            names::CONNECTIONS,
            "Connections open to the relay (at most --max-connections)",
            self.connections.clone(),
        );
        registry.register(
            names::READS,
            "Reads in flight: requests passed through to the upstream or served from the \
             spool (at most --max-reads)",
            self.reads.clone(),
        );
    }

    /// Connections open now.
    pub fn connections(&self) -> i64 {
        self.connections.get()
    }

    /// Reads in flight now.
    pub fn reads(&self) -> i64 {
        self.reads.get()
    }

    /// Requests of `route` answered with `code` so far.
    pub fn requests_total(&self, route: &'static str, code: u16) -> u64 {
        self.requests
            .get_or_create(&RequestLabels { route, code })
            .get()
    }

    /// Request body bytes read so far.
    pub fn received_bytes_total(&self) -> u64 {
        self.received_bytes.get()
    }

    pub(crate) fn answered(&self, route: &'static str, code: u16) {
        self.requests
            .get_or_create(&RequestLabels { route, code })
            .inc();
    }

    pub(crate) fn received(&self, bytes: usize) {
        self.received_bytes.inc_by(bytes as u64);
    }
}

/// The `route` label of a request (one of [`ROUTES`]).
pub(crate) fn route_label(route: &Route) -> &'static str {
    match route {
        Route::Upload { kind, .. } => match kind {
            UploadKind::Media => "media",
            UploadKind::Multipart => "multipart",
            UploadKind::Resumable => "resumable_start",
        },
        Route::ResumableChunk { .. } => "resumable_chunk",
        Route::ResumableCancel { .. } => "resumable_cancel",
        Route::XmlPut { .. } => "xml_put",
        Route::BucketGet { .. } => "bucket_get",
        Route::Invalid { .. } => "invalid",
        Route::BucketsList
        | Route::ObjectList { .. }
        | Route::ObjectGet { .. }
        | Route::ObjectDelete { .. }
        | Route::XmlMultipart { .. }
        | Route::Compose { .. } => "not_passed_through",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_exported_under_their_names() {
        let metrics = RelayMetrics::default();
        metrics.answered("media", 200);
        metrics.received(5);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let text = spool::metrics::encode(&registry);
        assert!(
            text.contains("spool_relay_requests_total{route=\"media\",code=\"200\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("spool_relay_received_bytes_total 5"),
            "{text}"
        );
        assert_eq!(metrics.requests_total("media", 200), 1);
        assert!(ROUTES.contains(&route_label(&Route::BucketsList)));
    }
}

/// `spool_relay_refusing_uploads{reason}`, read at each scrape from what `now`
/// says: every reason of [`crate::REFUSING_REASONS`], 1 when it holds.
pub(crate) struct RefusingGauges<F>(pub(crate) F);

impl<F> std::fmt::Debug for RefusingGauges<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefusingGauges")
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

impl<F> prometheus_client::collector::Collector for RefusingGauges<F>
where
    F: Fn() -> Vec<crate::Refusing> + Send + Sync + 'static,
{
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric as _;
        use prometheus_client::metrics::TypedMetric as _;
        let now = (self.0)();
        let mut family = encoder.encode_descriptor(
            names::REFUSING_UPLOADS,
            "1 for each reason the relay refuses uploads now (see /uploadz for the message)",
            None,
            prometheus_client::metrics::gauge::ConstGauge::<i64>::TYPE,
        )?;
        for reason in crate::REFUSING_REASONS {
            let held = now.iter().any(|refusing| refusing.reason == reason);
            let gauge = prometheus_client::metrics::gauge::ConstGauge::new(i64::from(held));
            gauge.encode(family.encode_family(&ReasonLabel { reason })?)?;
        }
        Ok(())
    }
}
