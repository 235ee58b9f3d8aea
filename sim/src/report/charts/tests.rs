//! Tests of the charts: sizes, axes, legends, downsampling.

use super::*;

#[test]
fn tick_labels_are_short() {
    assert_eq!(number(0.0), "0");
    assert_eq!(number(2.5), "2.5");
    assert_eq!(number(0.6000000000000001), "0.6");
    assert_eq!(number(150.0), "150");
    assert_eq!(number(12_500.0), "12.5k");
    assert_eq!(number(1_500_000.0), "1.5M");
    assert_eq!(ByteUnit::human(5.0 * 1_048_576.0), "5 MiB");
    assert_eq!(TimeUnit::human(900.0), "15 min");
}

#[test]
fn the_time_axis_follows_the_span() {
    let start = humantime::parse_rfc3339("2026-10-08T10:00:00Z").unwrap();
    let short = Clock::new(start, 20.0);
    assert_eq!(short.style, ClockStyle::Seconds);
    assert_eq!(short.label(5.0), "10:00:05");
    let day = Clock::new(start, 4.0 * 3600.0);
    assert_eq!(day.style, ClockStyle::Minutes);
    assert_eq!(day.label(day.ticks[1]), "10:30");
    let long = Clock::new(start, 30.0 * 3600.0);
    assert_eq!(long.style, ClockStyle::Dated);
    assert_eq!(long.label(14.0 * 3600.0), "Oct 09 00:00");
    assert!(long.ticks.len() <= 9);
    let midnight = humantime::parse_rfc3339("2026-10-08T23:59:50Z").unwrap();
    let across = Clock::new(midnight, 20.0);
    assert_eq!(across.label(15.0), "00:00:05");
    assert_eq!(across.desc(), "time (UTC) from 2026-10-08 to 2026-10-09");
}

#[test]
fn downsampling_keeps_gauge_peaks_and_rate_means() {
    let points: Vec<(f64, f64)> = (0..10 * COLUMNS)
        .map(|i| (i as f64, (i % 10) as f64))
        .collect();
    let peaks = downsample(points.clone(), Reduce::Max);
    assert_eq!(peaks.len(), COLUMNS);
    assert!(peaks.iter().all(|p| p.1 == 9.0));
    let means = downsample(points, Reduce::Mean);
    assert!(means.iter().all(|p| p.1 == 4.5));
}

#[test]
fn idle_stretches_are_left_out_but_lines_reach_the_axis() {
    let points: Vec<(f64, f64)> = [0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 2.0]
        .iter()
        .enumerate()
        .map(|(i, &v)| (i as f64, v))
        .collect();
    let segments = busy_segments(&points);
    let xs: Vec<Vec<f64>> = segments
        .iter()
        .map(|s| s.iter().map(|p| p.0).collect())
        .collect();
    assert_eq!(xs, vec![vec![2.0, 3.0, 4.0], vec![6.0, 7.0]]);
}

#[test]
fn round_ticks_land_on_round_numbers() {
    assert_eq!(
        round_ticks(0.0, 220.0, 6),
        vec![0.0, 50.0, 100.0, 150.0, 200.0]
    );
    assert_eq!(round_ticks(0.0, 1.1, 6).len(), 6);
    assert_eq!(
        round_ticks(0.0, 132.0, 6),
        vec![0.0, 25.0, 50.0, 75.0, 100.0, 125.0]
    );
}
