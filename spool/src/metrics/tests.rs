use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::SpoolConfig;

/// The samples of an OpenMetrics text: `name{labels}` to value, in order. Panics on
/// a series that appears twice, which Prometheus would reject.
fn samples(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
        let previous = out.insert(series.to_string(), value.to_string());
        assert!(previous.is_none(), "{series} appears twice in\n{text}");
    }
    out
}

/// The metric names of a text's samples, with histogram suffixes folded into the
/// histogram's name.
fn names_in(text: &str) -> BTreeSet<String> {
    samples(text)
        .keys()
        .map(|series| {
            let name = series.split('{').next().unwrap();
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|n| n.ends_with("_seconds")))
                .unwrap_or(name)
                .to_string()
        })
        .collect()
}

fn stats() -> Stats {
    Stats {
        files: 3,
        bytes: 4096,
        reserved_files: 1,
        reserved_bytes: 512,
        claimed: 2,
        oldest_created_unix_ms: Some(1_790_000_000_250),
        oldest_age: Duration::from_millis(61_500),
        quarantined_files: 4,
        dead_letter_files: 5,
        broken: Some("fsync failed".into()),
        disk_refused: None,
        max_files: 100,
        max_bytes: 1 << 20,
    }
}

#[test]
fn every_series_is_named_by_convention_and_listed_in_names() {
    let mut registry = Registry::default();
    let metrics = Metrics::default();
    metrics.upload(UploadOutcome::Stored);
    metrics.store_error(WritePath::Drain, "503".into());
    metrics.register(&mut registry, stats);
    let text = encode(&registry);

    let expected: BTreeSet<String> = names::ALL.iter().map(|n| n.to_string()).collect();
    assert_eq!(names_in(&text), expected, "in\n{text}");
    assert!(names::ALL.iter().all(|n| n.starts_with("spool_")));
}

#[test]
fn gauges_carry_the_stats_in_base_units() {
    let mut registry = Registry::default();
    Metrics::default().register(&mut registry, stats);
    let s = samples(&encode(&registry));
    let version = env!("CARGO_PKG_VERSION");
    for (series, value) in [
        ("spool_files", "3.0"),
        ("spool_bytes", "4096.0"),
        ("spool_oldest_age_seconds", "61.5"),
        (
            "spool_oldest_entry_created_timestamp_seconds",
            "1790000000.25",
        ),
        ("spool_claimed_files", "2.0"),
        ("spool_reserved_files", "1.0"),
        ("spool_reserved_bytes", "512.0"),
        ("spool_max_files", "100.0"),
        ("spool_max_bytes", "1048576.0"),
        ("spool_quarantined_files", "4.0"),
        ("spool_dead_letter_files", "5.0"),
        ("spool_broken", "1.0"),
        (&format!("spool_build_info{{version=\"{version}\"}}"), "1"),
    ] {
        assert_eq!(s.get(series).map(String::as_str), Some(value), "{series}");
    }
}

#[test]
fn an_empty_spool_has_no_oldest_entry_timestamp_and_an_age_of_zero() {
    let mut registry = Registry::default();
    Metrics::default().register(&mut registry, Stats::default);
    let s = samples(&encode(&registry));
    assert_eq!(s["spool_oldest_age_seconds"], "0.0");
    assert!(
        !s.keys()
            .any(|k| k.starts_with(names::OLDEST_ENTRY_CREATED_TIMESTAMP_SECONDS)),
        "{s:?}"
    );
}

#[test]
fn every_outcome_is_exported_at_zero_before_it_happens() {
    let mut registry = Registry::default();
    Metrics::default().register(&mut registry, Stats::default);
    let s = samples(&encode(&registry));
    for outcome in UploadOutcome::ALL.map(UploadOutcome::label) {
        assert_eq!(
            s[&format!("spool_uploads_total{{outcome=\"{outcome}\"}}")],
            "0"
        );
    }
    for outcome in DrainOutcome::ALL.map(DrainOutcome::label) {
        assert_eq!(
            s[&format!("spool_drained_total{{outcome=\"{outcome}\"}}")],
            "0"
        );
    }
}

#[test]
fn counters_count_under_their_outcome_label() {
    let metrics = Metrics::default();
    metrics.upload(UploadOutcome::Rejected);
    metrics.upload(UploadOutcome::Rejected);
    metrics.drained(DrainOutcome::AlreadyPresent);
    let mut registry = Registry::default();
    metrics.register(&mut registry, Stats::default);
    let s = samples(&encode(&registry));
    assert_eq!(s["spool_uploads_total{outcome=\"rejected\"}"], "2");
    assert_eq!(s["spool_drained_total{outcome=\"already_present\"}"], "1");
    assert_eq!(metrics.uploads_total(UploadOutcome::Rejected), 2);
    assert_eq!(metrics.drained_total(DrainOutcome::AlreadyPresent), 1);
}

#[tokio::test]
async fn two_spools_with_different_constant_labels_share_one_registry() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Spool::open(a_dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    let b = Spool::open(b_dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    a.put("x", Bytes::from_static(b"1")).await.unwrap();
    b.metrics().upload(UploadOutcome::Spooled);

    let mut registry = Registry::default();
    a.register_metrics_with_labels(&mut registry, [("spool", "uploads")])
        .unwrap();
    b.register_metrics_with_labels(&mut registry, [("spool", "exports"), ("tier", "cold")])
        .unwrap();
    let text = encode(&registry);
    let s = samples(&text); // panics on a duplicate series

    assert_eq!(s["spool_files{spool=\"uploads\"}"], "1.0");
    assert_eq!(s["spool_files{spool=\"exports\",tier=\"cold\"}"], "0.0");
    assert_eq!(
        s["spool_uploads_total{spool=\"exports\",tier=\"cold\",outcome=\"spooled\"}"],
        "1"
    );
    assert_eq!(
        s["spool_uploads_total{spool=\"uploads\",outcome=\"spooled\"}"],
        "0"
    );
    assert!(
        s.contains_key("spool_oldest_entry_created_timestamp_seconds{spool=\"uploads\"}"),
        "{text}"
    );
    assert!(s.keys().all(|k| k.contains("spool=\"")), "{text}");
}

#[test]
fn constant_labels_are_checked_and_the_error_names_the_label() {
    let metrics = Metrics::default();
    let mut registry = Registry::default();
    for (labels, expected) in [
        (vec![("9lives", "x")], LabelError::Invalid("9lives".into())),
        (vec![("a-b", "x")], LabelError::Invalid("a-b".into())),
        (
            vec![("__name__", "x")],
            LabelError::Invalid("__name__".into()),
        ),
        (vec![("", "x")], LabelError::Invalid(String::new())),
        (
            vec![("outcome", "x")],
            LabelError::Reserved("outcome".into()),
        ),
        (
            vec![("spool", "a"), ("spool", "b")],
            LabelError::Duplicate("spool".into()),
        ),
    ] {
        let err = metrics
            .register_with_labels(&mut registry, labels, Stats::default)
            .unwrap_err();
        assert_eq!(err, expected);
        let name = match &err {
            LabelError::Invalid(n) | LabelError::Reserved(n) | LabelError::Duplicate(n) => n,
        };
        assert!(err.to_string().contains(&format!("{name:?}")), "{err}");
    }
    assert_eq!(encode(&registry), "# EOF\n", "nothing registered on error");
}

#[test]
fn the_readme_metrics_table_lists_every_series() {
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("### Metrics and alerts")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("README has a Metrics and alerts section");
    for name in names::ALL {
        assert!(
            section.contains(&format!("`{name}")),
            "README's metrics table does not list {name}"
        );
    }
}
