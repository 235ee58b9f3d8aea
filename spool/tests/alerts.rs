//! The alert rules' evaluation model, as the simulation uses it: each condition read
//! from a sample as its PromQL reads the series, windows and forecasts over scrapes,
//! firing after the hold time, and the promtool tests written from them. That promtool
//! agrees is checked in `tests/promtool.rs`.

use std::time::Duration;

use spool::alerts::*;
use spool::metrics::names;

const MIN: Duration = Duration::from_secs(60);

/// Scrapes a minute apart.
fn minutely(scrapes: &[Option<Scrape>]) -> Scrapes<'_> {
    Scrapes {
        interval: MIN,
        scrapes,
    }
}

fn rule(name: &str) -> AlertRule {
    *RULES
        .iter()
        .find(|r| r.name == name)
        .expect("a shipped rule")
}

#[test]
fn conditions_read_the_sample_as_the_promql_says() {
    let base = Sample {
        max_files: 100,
        max_bytes: 1000,
        ..Sample::default()
    };
    let with = |set: fn(&mut Sample)| {
        let mut s = base;
        set(&mut s);
        s
    };
    let stale = rule("SpoolOldestEntryStale").condition;
    let full = rule("SpoolNearlyFull").condition;
    let filling = rule("SpoolFullWithinAnHour").condition;
    let rejecting = rule("SpoolRejectingUploads").condition;
    let dead = rule("SpoolDeadLetterFiles").condition;
    let quarantine = rule("SpoolQuarantineFiles").condition;
    let broken = rule("SpoolBroken").condition;
    let reopened = rule("SpoolReopened").condition;
    let failing = rule("SpoolUploadsFailing").condition;
    let looping = rule("SpoolDrainLooping").condition;
    let absent = rule("SpoolMetricsAbsent").condition;
    let unbounded = |set: fn(&mut Sample)| {
        let mut s = Sample::default();
        set(&mut s);
        s
    };
    let cases = [
        (stale, with(|s| s.oldest_age_seconds = 900.0), false),
        (stale, with(|s| s.oldest_age_seconds = 900.5), true),
        (full, with(|s| (s.bytes, s.files) = (800, 80)), false),
        (full, with(|s| s.bytes = 801), true),
        (full, with(|s| s.files = 81), true),
        (full, unbounded(|s| s.bytes = 1), true), // 1 / 0 = +Inf
        (full, Sample::default(), false),         // 0 / 0 = NaN
        (
            filling,
            with(|s| (s.predicted_bytes, s.bytes_slope) = (Some(1000.0), Some(1.0))),
            false,
        ),
        (
            filling,
            with(|s| (s.predicted_bytes, s.bytes_slope) = (Some(1000.5), Some(1.0))),
            true,
        ),
        (
            filling,
            with(|s| (s.predicted_files, s.files_slope) = (Some(101.0), Some(0.1))),
            true,
        ),
        // Past the bound at the 30-minute trend, but no longer growing.
        (filling, with(|s| s.predicted_bytes = Some(1000.5)), false),
        (
            filling,
            with(|s| (s.predicted_bytes, s.bytes_slope) = (Some(1000.5), Some(0.0))),
            false,
        ),
        (
            filling,
            with(|s| (s.predicted_files, s.bytes_slope) = (Some(101.0), Some(1.0))),
            false,
        ),
        (filling, base, false),
        (rejecting, with(|s| s.rejected_in_window = 1), true),
        (rejecting, with(|s| s.dead_lettered_in_window = 1), false),
        (dead, with(|s| s.dead_letter_files = 1), true),
        (dead, with(|s| s.dead_lettered_in_window = 3), false),
        (quarantine, with(|s| s.quarantined_files = 2), true),
        (quarantine, base, false),
        (broken, with(|s| s.broken = true), true),
        (broken, base, false),
        (reopened, with(|s| s.recoveries_in_window = 1), true),
        (reopened, base, false),
        (failing, with(|s| s.failed_in_window = 1), true),
        (failing, with(|s| s.rejected_in_window = 1), false),
        (
            looping,
            with(|s| (s.remove_errors_in_window, s.files_change_in_window) = (1, Some(0.0))),
            true,
        ),
        (
            looping,
            with(|s| (s.remove_errors_in_window, s.files_change_in_window) = (1, Some(-1.0))),
            false,
        ),
        (looping, with(|s| s.remove_errors_in_window = 1), false), // one scrape: no delta
        (
            looping,
            with(|s| s.files_change_in_window = Some(5.0)),
            false,
        ),
        (absent, base, false),
        (absent, with(|s| s.metrics_absent = true), true),
    ];
    for (condition, sample, expected) in cases {
        assert_eq!(
            condition.holds(&sample),
            expected,
            "{condition:?} on {sample:?}"
        );
    }
}

#[test]
fn while_the_metrics_are_absent_only_absent_and_the_range_conditions_hold() {
    let everything_wrong = Sample {
        files: 100,
        bytes: 1000,
        oldest_age_seconds: 1e6,
        broken: true,
        dead_letter_files: 1,
        quarantined_files: 1,
        rejected_in_window: 1,
        recoveries_in_window: 1,
        predicted_bytes: Some(1e9),
        metrics_absent: true,
        ..Sample::default()
    };
    let holding: Vec<&str> = RULES
        .iter()
        .filter(|r| r.condition.holds(&everything_wrong))
        .map(|r| r.name)
        .collect();
    assert_eq!(
        holding,
        [
            "SpoolRejectingUploads",
            "SpoolReopened",
            "SpoolMetricsAbsent"
        ]
    );
}

#[test]
fn an_increase_keeps_firing_while_the_target_is_down() {
    // promtool found this: a range selector still holds the scrapes taken before
    // the target went down, staleness markers or not; an instant selector does not.
    let up = |rejected_total| {
        Some(Scrape {
            quarantined_files: 1,
            rejected_total,
            ..Scrape::default()
        })
    };
    let scrapes = [up(0), up(2), None, None, up(2)];
    let s = minutely(&scrapes);
    let rejecting = rule("SpoolRejectingUploads");
    let while_down = s.sample(3, &rejecting.condition);
    assert!(while_down.metrics_absent);
    assert_eq!(while_down.rejected_in_window, 2);
    assert_eq!(s.firing(&rejecting), [false, true, true, true, true]);
    let quarantine = rule("SpoolQuarantineFiles");
    assert_eq!(s.firing(&quarantine), [true, true, false, false, true]);
}

#[test]
fn counter_increase_counts_a_drop_as_a_reset() {
    assert_eq!(counter_increase(&[0.0, 1.0, 1.0]), Some(1.0));
    assert_eq!(counter_increase(&[5.0, 0.0]), Some(0.0));
    assert_eq!(counter_increase(&[5.0, 2.0, 3.0]), Some(3.0));
    assert_eq!(counter_increase(&[3.0]), None);
}

#[test]
fn predict_linear_extends_the_least_squares_line() {
    let close = |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() < 1e-9);
    let rising = [(-120.0, 0.0), (-60.0, 1.0), (0.0, 2.0)];
    assert!(close(predict_linear(&rising, 600.0), 12.0));
    let noisy = [(-120.0, 1.0), (-60.0, 0.0), (0.0, 2.0)];
    // slope 0.5 a minute through the mean (-60 s, 1): 1.5 now, 2 a minute ahead.
    assert!(close(predict_linear(&noisy, 60.0), 2.0));
    assert_eq!(
        predict_linear(&[(-60.0, 4.0), (0.0, 4.0)], 3600.0),
        Some(4.0)
    );
    assert_eq!(predict_linear(&[(0.0, 1.0)], 60.0), None);
}

fn up(rejected_total: u64) -> Option<Scrape> {
    Some(Scrape {
        max_files: 100,
        max_bytes: 1000,
        rejected_total,
        ..Scrape::default()
    })
}

#[test]
fn a_window_holds_the_scrapes_from_t_minus_the_range_to_t_inclusive() {
    // Prometheus 2.42 (promtool) fires increase(c[5m]) > 0 at 5m for a rise
    // between 0m and 1m, and not at 6m.
    let scrapes = [up(0), up(1), up(1), up(1), up(1), up(1), up(1)];
    let s = minutely(&scrapes);
    let rejecting = rule("SpoolRejectingUploads").condition;
    assert_eq!(s.sample(5, &rejecting).rejected_in_window, 1);
    assert_eq!(s.sample(6, &rejecting).rejected_in_window, 0);
    assert_eq!(s.sample(0, &rejecting).rejected_in_window, 0);
}

#[test]
fn a_restart_resets_the_counter_without_hiding_a_rise() {
    let scrapes = [up(4), None, up(0), up(2)];
    let s = minutely(&scrapes);
    let rejecting = rule("SpoolRejectingUploads").condition;
    assert_eq!(s.sample(2, &rejecting).rejected_in_window, 0);
    assert_eq!(s.sample(3, &rejecting).rejected_in_window, 2);
    assert!(s.sample(1, &rejecting).metrics_absent);
}

#[test]
fn the_forecast_is_fitted_to_the_lookback_and_extended_by_the_horizon() {
    // bytes grow by 10 a minute; 1000 is the bound: at 400 bytes, 60 minutes
    // ahead is exactly 1000 (not above), at 410 it is 1010.
    let scrapes: Vec<Option<Scrape>> = (0..=41)
        .map(|m| {
            Some(Scrape {
                bytes: 10 * m,
                max_bytes: 1000,
                max_files: 100,
                ..Scrape::default()
            })
        })
        .collect();
    let s = minutely(&scrapes);
    let filling = rule("SpoolFullWithinAnHour").condition;
    let at_40 = s.sample(40, &filling);
    assert!(
        (at_40.predicted_bytes.unwrap() - 1000.0).abs() < 1e-6,
        "{at_40:?}"
    );
    assert!(!filling.holds(&Sample {
        predicted_bytes: Some(1000.0),
        ..at_40
    }));
    let at_41 = s.sample(41, &filling);
    assert!((at_41.predicted_bytes.unwrap() - 1010.0).abs() < 1e-6);
    assert!((at_41.bytes_slope.unwrap() - 10.0 / 60.0).abs() < 1e-9);
    assert!(filling.holds(&at_41));
    assert_eq!(s.sample(0, &filling).predicted_bytes, None);

    // The growth stops at 41 minutes: the 30-minute trend still forecasts past a
    // bound of 900, but once the last 5 minutes are flat the condition ends.
    let mut stopped = scrapes.clone();
    stopped.extend((0..5).map(|_| scrapes[41]));
    let s = minutely(&stopped);
    let bound = |sample: Sample| Sample {
        max_bytes: 900,
        ..sample
    };
    let at_45 = bound(s.sample(45, &filling));
    assert!(at_45.predicted_bytes.unwrap() > 900.0, "{at_45:?}");
    assert!(filling.holds(&at_45), "41..45 still holds a step of growth");
    let at_46 = bound(s.sample(46, &filling));
    assert!(at_46.predicted_bytes.unwrap() > 900.0, "{at_46:?}");
    assert_eq!(at_46.bytes_slope, Some(0.0));
    assert!(!filling.holds(&at_46));
}

#[test]
fn an_alert_fires_after_its_hold_time_and_resolves_when_the_condition_ends() {
    let broken = |b: bool| {
        Some(Scrape {
            broken: b,
            ..Scrape::default()
        })
    };
    let scrapes: Vec<Option<Scrape>> = (0..12).map(|m| broken((2..9).contains(&m))).collect();
    let s = minutely(&scrapes);
    let rule = rule("SpoolBroken");
    assert_eq!(rule.hold_for, 5 * MIN);
    assert_eq!(
        s.windows(&rule),
        [Firing {
            from: 7 * MIN,
            until: Some(9 * MIN)
        }]
    );
    let firing = s.firing(&rule);
    assert_eq!(firing.iter().filter(|f| **f).count(), 2);
}

#[test]
fn absent_metrics_fire_after_ten_minutes_and_a_gap_resets_other_alerts() {
    let mut scrapes: Vec<Option<Scrape>> = vec![
        Some(Scrape {
            dead_letter_files: 1,
            ..Scrape::default()
        });
        3
    ];
    scrapes.extend([None; 12]);
    scrapes.push(scrapes[0]);
    let s = minutely(&scrapes);
    assert_eq!(
        s.windows(&rule("SpoolMetricsAbsent")),
        [Firing {
            from: 13 * MIN,
            until: Some(15 * MIN)
        }]
    );
    assert_eq!(
        s.windows(&rule("SpoolDeadLetterFiles")),
        [
            Firing {
                from: Duration::ZERO,
                until: Some(3 * MIN)
            },
            Firing {
                from: 15 * MIN,
                until: None
            },
        ]
    );
}

#[test]
fn a_promtool_test_lists_series_with_staleness_and_expected_alerts_with_labels() {
    let series = [
        (
            "spool_broken".to_string(),
            vec![(0, 0.0), (60, 1.0), (240, 1.0)],
        ),
        (
            "spool_uploads_total{outcome=\"rejected\"}".to_string(),
            vec![(60, 2.0)],
        ),
    ];
    let yaml = PromtoolTest {
        rule_file: "rules.yml",
        interval: MIN,
        target_labels: &[("instance", "h0")],
        series: &series,
        expected: &[
            ("SpoolBroken", 60, false),
            ("SpoolRejectingUploads", 120, true),
            ("SpoolMetricsAbsent", 600, true),
        ],
    }
    .to_yaml()
    .unwrap();
    let expected = r#"# Generated by spool::alerts::PromtoolTest.
rule_files:
  - "rules.yml"
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: "spool_broken{instance=\"h0\"}"
        values: "0 1 stale _ 1"
      - series: "spool_uploads_total{outcome=\"rejected\",instance=\"h0\"}"
        values: "_ 2"
    alert_rule_test:
      - eval_time: 1m
        alertname: SpoolBroken
        exp_alerts: []
      - eval_time: 2m
        alertname: SpoolRejectingUploads
        exp_alerts:
          - exp_labels:
              instance: "h0"
              outcome: "rejected"
              severity: "critical"
      - eval_time: 10m
        alertname: SpoolMetricsAbsent
        exp_alerts:
          - exp_labels:
              severity: "warning"
"#;
    assert_eq!(yaml, expected);
}

#[test]
fn a_promtool_test_refuses_what_promtool_could_not_check() {
    let test = |series: &[(String, Vec<(u64, f64)>)], expected: &[(&str, u64, bool)]| {
        PromtoolTest {
            rule_file: "r.yml",
            interval: MIN,
            target_labels: &[],
            series,
            expected,
        }
        .to_yaml()
        .unwrap_err()
    };
    let files = |points: Vec<(u64, f64)>| [("spool_files".to_string(), points)];
    assert!(matches!(
        test(&files(vec![(30, 1.0)]), &[]),
        PromtoolTestError::Point { at: 30, .. }
    ));
    assert!(matches!(
        test(&files(vec![(60, 1.0), (60, 2.0)]), &[]),
        PromtoolTestError::Point { at: 60, .. }
    ));
    assert!(matches!(
        test(&files(vec![(0, f64::NAN)]), &[]),
        PromtoolTestError::Value { at: 0, .. }
    ));
    let err = test(&[], &[("NoSuchAlert", 0, true)]);
    assert!(err.to_string().contains("NoSuchAlert"), "{err}");
    assert!(matches!(
        test(&[], &[("SpoolBroken", 90, true)]),
        PromtoolTestError::EvalTime { at: 90, .. }
    ));
    let zero = PromtoolTest {
        rule_file: "r.yml",
        interval: Duration::from_millis(1500),
        target_labels: &[],
        series: &[],
        expected: &[],
    };
    assert!(matches!(
        zero.to_yaml(),
        Err(PromtoolTestError::Interval(_))
    ));
}

#[test]
fn input_series_skip_the_scrapes_not_taken() {
    let scrapes = [up(1), None, up(3)];
    let s = minutely(&scrapes);
    let series = s.input_series();
    let (_, rejected) = series
        .iter()
        .find(|(name, _)| name.starts_with("spool_uploads_total"))
        .unwrap();
    assert_eq!(rejected, &[(0, 1.0), (120, 3.0)]);
    assert_eq!(series.len(), 12);
    assert_eq!(s.expectations().len(), RULES.len() * 3);
}

#[test]
fn every_rule_reads_only_series_the_spool_exports() {
    for rule in RULES {
        let expr = rule.condition.promql();
        let words = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        for word in words.filter(|w| w.starts_with("spool_")) {
            assert!(
                names::ALL.contains(&word),
                "{}: {word} is not exported",
                rule.name
            );
        }
    }
}

#[test]
fn every_rule_links_to_its_section_of_the_runbook() {
    let runbook = include_str!("../../docs/runbook.md");
    let yaml = rules_yaml_with(&RulesOptions {
        runbook_base: "https://example.com/runbook",
        annotations: true,
    });
    for rule in RULES {
        assert!(
            rule.name.starts_with("Spool"),
            "the dashboard selects Spool.*"
        );
        assert!(
            runbook.contains(&format!("\n## {}\n", rule.name)),
            "docs/runbook.md has no section ## {}",
            rule.name
        );
        assert!(yaml.contains(&format!(
            "runbook_url: \"https://example.com/runbook#{}\"",
            rule.name.to_ascii_lowercase()
        )));
    }
}

#[test]
fn rules_for_promtool_tests_have_no_annotations() {
    let yaml = rules_yaml_with(&RulesOptions {
        annotations: false,
        ..RulesOptions::default()
    });
    assert!(!yaml.contains("annotations:"));
    assert_eq!(yaml.matches("- alert: ").count(), RULES.len());
}
