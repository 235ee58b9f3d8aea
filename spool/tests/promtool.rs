//! Prometheus's own `promtool` judges what the crate generates: the shipped rules and
//! the dashboard's queries parse (`promtool check rules`), the hand-written rule unit
//! tests in `spool/alerts/tests/` pass (`promtool test rules`), and the Rust model of
//! the rules (`spool::alerts::Scrapes`) fires exactly when Prometheus does on the same
//! series. Skipped with a notice when `promtool` is not on `PATH`, unless
//! `SPOOL_REQUIRE_PROMTOOL=1`.

mod common;

use std::path::Path;
use std::time::Duration;

use spool::alerts::{PromtoolTest, RULES, RulesOptions, Scrape, Scrapes, rules_yaml_with};
use spool::testing::tools;

/// Runs promtool with `args` in `dir`; the combined output, or a panic that shows it.
fn promtool(promtool: &Path, dir: &Path, args: &[&str]) -> String {
    tools::run(promtool, dir, args)
        .unwrap_or_else(|text| panic!("promtool {} failed:\n{text}", args.join(" ")))
}

#[test]
fn the_shipped_rules_and_every_dashboard_query_pass_promtool_check_rules() {
    let Some(bin) = common::tool("promtool") else {
        return;
    };
    let out = promtool(
        &bin,
        common::crate_dir(),
        &[
            "check",
            "rules",
            "alerts/spool.rules.yml",
            "alerts/dashboard.rules.yml",
        ],
    );
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", RULES.len())),
        "{out}"
    );
    let queries: usize = spool::metrics::dashboard::panels()
        .iter()
        .map(|p| p.queries.len())
        .sum();
    assert!(
        out.contains(&format!("SUCCESS: {queries} rules found")),
        "{out}"
    );
}

#[test]
fn the_rules_rendered_with_other_options_pass_promtool_check_rules() {
    let Some(bin) = common::tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (file, options) in [
        (
            "linked.yml",
            RulesOptions {
                runbook_base: "https://example.com/spool/runbook",
                annotations: true,
            },
        ),
        (
            "bare.yml",
            RulesOptions {
                annotations: false,
                ..RulesOptions::default()
            },
        ),
    ] {
        std::fs::write(dir.path().join(file), rules_yaml_with(&options)).unwrap();
        promtool(&bin, dir.path(), &["check", "rules", file]);
    }
}

#[test]
fn the_rule_unit_tests_pass_promtool_test_rules() {
    let Some(bin) = common::tool("promtool") else {
        return;
    };
    let dir = common::crate_dir().join("alerts/tests");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yml"))
        .collect();
    files.sort();
    // One file per rule, at least.
    assert!(files.len() >= RULES.len(), "{files:?}");
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(String::as_str));
    let out = promtool(&bin, &dir, &args);
    assert_eq!(out.matches("SUCCESS").count(), files.len(), "{out}");
}

/// A spool's day in 190 scrapes a minute apart, built to walk through every rule: an
/// outage that fills it (stale, filling, nearly full, refusing), uploads failing for
/// 20 minutes, a drain during which some removals fail, dead letters and
/// quarantine, a short and a long break, recoveries, a restart that resets the
/// counters, a long scrape outage, and a drain that loops at the end.
fn a_bad_day() -> Vec<Option<Scrape>> {
    (0..190u64)
        .map(|m| {
            let down = (130..133).contains(&m) || (150..166).contains(&m);
            if down {
                return None;
            }
            let backlog = match m {
                10..70 => (m - 10).min(49),
                70..80 => 49 - 49 * (m - 70) / 10,
                _ => 0,
            };
            let restarted = m >= 133;
            let rejected = if restarted {
                0
            } else {
                3 * m.clamp(60, 70) - 180
            };
            let recoveries = u64::from(m >= 104) + u64::from(m >= 118);
            Some(Scrape {
                files: 2 * backlog,
                bytes: 20 * backlog,
                max_files: 103,
                max_bytes: 997,
                oldest_age_seconds: if backlog > 0 {
                    60.0 * (m.min(80) - 10) as f64
                } else {
                    0.0
                },
                dead_letter_files: u64::from((75..95).contains(&m)),
                quarantined_files: if (40..45).contains(&m) { 2 } else { 0 },
                broken: (100..103).contains(&m) || (110..118).contains(&m),
                rejected_total: rejected,
                recoveries_total: if restarted { 0 } else { recoveries },
                failed_total: if restarted { 0 } else { m.clamp(20, 40) - 20 },
                remove_errors_total: if restarted {
                    m.clamp(168, 185) - 168
                } else {
                    m.clamp(70, 80) - 70
                },
            })
        })
        .collect()
}

/// Writes the rules (without annotations) and a promtool test of `scrapes` with
/// `expected` into `dir`, and runs it.
fn promtool_test(
    bin: &Path,
    dir: &Path,
    scrapes: &Scrapes,
    expected: &[(&str, u64, bool)],
) -> Result<String, String> {
    let rules = rules_yaml_with(&RulesOptions {
        annotations: false,
        ..RulesOptions::default()
    });
    std::fs::write(dir.join("rules.yml"), rules).unwrap();
    let series = scrapes.input_series();
    let test = PromtoolTest {
        rule_file: "rules.yml",
        interval: scrapes.interval,
        target_labels: &[("instance", "host0")],
        series: &series,
        expected,
    }
    .to_yaml()
    .unwrap();
    std::fs::write(dir.join("test.yml"), test).unwrap();
    tools::run(bin, dir, &["test", "rules", "test.yml"])
}

#[test]
fn the_rust_model_of_the_rules_fires_exactly_when_prometheus_does() {
    let scrapes = a_bad_day();
    let scrapes = Scrapes {
        interval: Duration::from_secs(60),
        scrapes: &scrapes,
    };
    // The day is only a test of the model if every rule both fires and rests in it.
    for rule in RULES {
        let firing = scrapes.firing(&rule);
        assert!(
            firing.contains(&true) && firing.contains(&false),
            "{} never changes state in the test day: {:?}",
            rule.name,
            scrapes.windows(&rule)
        );
    }
    let Some(bin) = common::tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let expected = scrapes.expectations();
    assert_eq!(expected.len(), RULES.len() * 190);
    if let Err(out) = promtool_test(&bin, dir.path(), &scrapes, &expected) {
        panic!("promtool disagrees with spool::alerts::Scrapes:\n{out}");
    }
}

#[test]
fn promtool_catches_a_model_that_is_one_evaluation_off() {
    let Some(bin) = common::tool("promtool") else {
        return;
    };
    let scrapes = a_bad_day();
    let scrapes = Scrapes {
        interval: Duration::from_secs(60),
        scrapes: &scrapes,
    };
    let dir = tempfile::tempdir().unwrap();
    for rule in RULES {
        // The alert's first firing, claimed one evaluation early.
        let first = scrapes.windows(&rule)[0].from.as_secs();
        let early = [(rule.name, first - 60, true), (rule.name, first, true)];
        let err = promtool_test(&bin, dir.path(), &scrapes, &early)
            .expect_err("promtool accepted an alert one evaluation early");
        assert!(
            err.contains(rule.name) && err.contains("FAILED"),
            "{}: {err}",
            rule.name
        );
    }
}

/// A scrape of a spool that has done a bit of everything, as `curl` gets it (the
/// text format), passes `promtool check metrics`, lint included; in OpenMetrics
/// (what Prometheus asks for) promtool refuses the `info` type, as it did every
/// scrape before the endpoint served the text format (issue 57).
#[tokio::test]
async fn a_scrape_in_the_text_format_passes_promtool_check_metrics() {
    use spool::metrics::{Format, encode_as};
    use spool::testing::{FlakyStore, Mode};
    use spool::{Remote, Spool, SpoolConfig, Uploader, UploaderConfig};

    let Some(bin) = common::tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    // One upload stored, one spooled while the store fails (a store error counted).
    let store = FlakyStore::new(Mode::Healthy);
    let uploader = Uploader::new(
        spool.clone(),
        Remote::new(store.clone()),
        UploaderConfig::default(),
    );
    uploader
        .upload("a", bytes::Bytes::from_static(b"1"))
        .await
        .unwrap();
    store.set_mode(Mode::Down);
    uploader
        .upload("b", bytes::Bytes::from_static(b"2"))
        .await
        .unwrap();
    assert_eq!(spool.stats().files, 1);
    let mut registry = prometheus_client::registry::Registry::default();
    spool.register_metrics(&mut registry);
    let text = encode_as(&registry, Format::Text);
    if let Err(said) = tools::check_metrics(&bin, &text) {
        panic!("promtool: {said}\n{text}");
    }
    let open = encode_as(&registry, Format::OpenMetrics);
    assert!(
        tools::check_metrics(&bin, &open).is_err(),
        "promtool took OpenMetrics"
    );
}
