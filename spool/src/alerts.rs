//! The alert rules that ship with the spool, defined once in [`RULES`], and what is
//! derived from them:
//!
//! - the Prometheus rules file `spool/alerts/spool.rules.yml` ([`rules_yaml`]; a test
//!   keeps the two identical; `cargo run -p spool --example print_alert_rules`
//!   regenerates it, `--runbook-base URL` points the runbook links elsewhere);
//! - a model of every condition in Rust ([`Condition::holds`] on a [`Sample`]), which
//!   the simulation uses to say when each alert would have fired; [`Scrapes`] turns
//!   one spool's scrapes into samples and firing windows;
//! - promtool unit tests of those windows ([`PromtoolTest`]), so that Prometheus
//!   itself says whether the model agrees with the PromQL.
//!
//! The hand-written promtool tests of the rules, annotations included, are in
//! `spool/alerts/tests/`; the runbook each alert links to is `docs/runbook.md`.
//!
//! ## How the Rust model follows the PromQL
//!
//! Prometheus evaluates the rules every interval; an alert is pending from the first
//! evaluation at which its expression has a result, and firing once it has had one
//! for `for` ([`AlertRule::hold_for`]); it resolves at the first evaluation without
//! one. [`Scrapes::windows`] does the same on samples taken at the same instants.
//!
//! | condition | PromQL | Rust, on a [`Sample`] |
//! |---|---|---|
//! | [`Condition::OldestAgeAbove`] | `spool_oldest_age_seconds > s` | `oldest_age_seconds > s` |
//! | [`Condition::FullerThan`] | `spool_bytes / spool_max_bytes > r or spool_files / spool_max_files > r` | the same divisions in `f64` (a zero bound gives infinity or NaN, as in PromQL) |
//! | [`Condition::FullWithin`] | `(predict_linear(spool_bytes[l], h) > spool_max_bytes and deriv(spool_bytes[g]) > 0) or (the same of spool_files)` | `predicted_bytes > max_bytes` and `bytes_slope > 0`, or the same of files: [`predict_linear`] over the scrapes in `[t - l, t]`, [`deriv`] over those in `[t - g, t]`; none with fewer than two |
//! | [`Condition::Rejecting`] | `increase(spool_uploads_total{outcome="rejected"}[w]) > 0` | `rejected_in_window > 0`: [`counter_increase`] over the scrapes in `[t - w, t]` (a drop is a counter reset); PromQL's extrapolation scales a positive increase and never changes its sign |
//! | [`Condition::DeadLetterFiles`] | `spool_dead_letter_files > 0` | `dead_letter_files > 0` |
//! | [`Condition::QuarantineFiles`] | `spool_quarantined_files > 0` | `quarantined_files > 0` |
//! | [`Condition::Broken`] | `spool_broken == 1` | `broken` |
//! | [`Condition::Reopened`] | `increase(spool_recoveries_total[w]) > 0` | `recoveries_in_window > 0`, as for `Rejecting` |
//! | [`Condition::Failing`] | `increase(spool_uploads_total{outcome="failed"}[w]) > 0` | `failed_in_window > 0`, as for `Rejecting` |
//! | [`Condition::DrainLooping`] | `increase(spool_remove_errors_total[w]) > 0 and delta(spool_files[w]) >= 0` | `remove_errors_in_window > 0` and `files_change_in_window >= 0`: the last scrape's `spool_files` minus the first's in `[t - w, t]`, none with fewer than two (PromQL's `delta()` extrapolates, which never changes its sign) |
//! | [`Condition::Absent`] | `absent(spool_files)` | `metrics_absent` |
//!
//! When the target is down its series are stale (Prometheus writes staleness markers
//! when a scrape fails): an instant selector has no value, so while `metrics_absent`
//! [`Condition::holds`] is false for every condition that reads one (all but
//! `Absent`, `Rejecting`, `Reopened`, `Failing` and `DrainLooping`). A range selector still holds the scrapes
//! taken before within its range, so `increase()` can keep a `Rejecting` or
//! `Reopened` alert firing while the target is down; the model computes the windowed
//! fields from the scrapes taken and agrees (`tests/promtool.rs` checks it). Prometheus's `absent(spool_files)` looks
//! at every spool it scrapes; the model, like the simulation, evaluates one spool.

use std::fmt::Write as _;
use std::time::Duration;

use crate::metrics::names::{
    BROKEN, BYTES, DEAD_LETTER_FILES, FILES, MAX_BYTES, MAX_FILES, OLDEST_AGE_SECONDS,
    QUARANTINED_FILES, RECOVERIES_TOTAL, REMOVE_ERRORS_TOTAL, UPLOADS_TOTAL,
};
use crate::metrics::{Metrics, UploadOutcome};
use crate::stats::Stats;

/// What an alert watches. The PromQL is [`Condition::promql`]; the Rust evaluation
/// is [`Condition::holds`] (see the module documentation for how they correspond).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    /// `spool_oldest_age_seconds` above this many seconds.
    OldestAgeAbove(f64),
    /// `spool_bytes / spool_max_bytes` or `spool_files / spool_max_files` above this
    /// ratio.
    FullerThan(f64),
    /// At the trend of the last `lookback`, bytes or files pass their bound within
    /// `horizon` (`predict_linear`), and are still growing over the last `growing`
    /// (`deriv > 0`): a ramp that has stopped no longer forecasts anything, though
    /// the lookback still holds it.
    FullWithin {
        /// How much history the trend is fitted to.
        lookback: Duration,
        /// How far ahead it is extended.
        horizon: Duration,
        /// Over how much of the latest history the series must still grow.
        growing: Duration,
    },
    /// Uploads were refused (`outcome="rejected"`: spool full or object too large)
    /// within the window.
    Rejecting(Duration),
    /// Files are in `dead-letter/`.
    DeadLetterFiles,
    /// Files are in `quarantine/`.
    QuarantineFiles,
    /// `spool_broken == 1`: the spool refuses writes after a failed directory sync.
    Broken,
    /// The spool reopened itself after a failed directory sync within the window.
    Reopened(Duration),
    /// Uploads failed (`outcome="failed"`: the store failed them and the spool could
    /// not take them, such as an I/O error on the spool's disk or the spool broken;
    /// or the store refused them for good; or they were invalid) within the window.
    Failing(Duration),
    /// Within the window, settled entries could not leave `entries/` (a removal or
    /// a move failed, `spool_remove_errors_total` rose) and `spool_files` did not
    /// fall: the remover tries the same removals again and again.
    DrainLooping(Duration),
    /// No `spool_files` series is scraped at all.
    Absent,
}

/// The gauges, counter increases and forecasts an alert condition reads, at one
/// evaluation instant. Windowed fields cover the window of the condition evaluated
/// ([`Condition::range`]), ending now. `Default` is a healthy, scraped spool with
/// zero bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// `spool_files`.
    pub files: u64,
    /// `spool_bytes`.
    pub bytes: u64,
    /// `spool_max_files`.
    pub max_files: u64,
    /// `spool_max_bytes`.
    pub max_bytes: u64,
    /// `spool_oldest_age_seconds`.
    pub oldest_age_seconds: f64,
    /// Increase of `spool_dead_lettered_total` over the window ending now. No shipped
    /// rule reads it any more: dead letters alert on the files present
    /// ([`Condition::DeadLetterFiles`]), so that the alert lasts as long as they do.
    pub dead_lettered_in_window: u64,
    /// `spool_broken`.
    pub broken: bool,
    /// `spool_dead_letter_files`.
    pub dead_letter_files: u64,
    /// `spool_quarantined_files`.
    pub quarantined_files: u64,
    /// Increase of `spool_uploads_total{outcome="rejected"}` over the window ending
    /// now ([`counter_increase`], without extrapolation).
    pub rejected_in_window: u64,
    /// Increase of `spool_recoveries_total` over the window ending now.
    pub recoveries_in_window: u64,
    /// Increase of `spool_uploads_total{outcome="failed"}` over the window ending now.
    pub failed_in_window: u64,
    /// Increase of `spool_remove_errors_total` over the window ending now.
    pub remove_errors_in_window: u64,
    /// `spool_files` at the last scrape in the window minus at the first (the sign of
    /// `delta(spool_files[w])`); `None` with fewer than two scrapes in the window.
    pub files_change_in_window: Option<f64>,
    /// `predict_linear(spool_bytes[lookback], horizon)`; `None` with fewer than two
    /// scrapes in the lookback.
    pub predicted_bytes: Option<f64>,
    /// `predict_linear(spool_files[lookback], horizon)`; `None` as above.
    pub predicted_files: Option<f64>,
    /// `deriv(spool_bytes[growing])`, per second; `None` with fewer than two
    /// scrapes in that range.
    pub bytes_slope: Option<f64>,
    /// `deriv(spool_files[growing])`; `None` as above.
    pub files_slope: Option<f64>,
    /// No `spool_files` series at this instant (the target is down or not scraped):
    /// the instant values above are stale; the windowed fields still count the
    /// scrapes taken within the window.
    pub metrics_absent: bool,
}

impl Condition {
    /// The PromQL expression.
    pub fn promql(&self) -> String {
        match *self {
            Condition::OldestAgeAbove(s) => format!("{OLDEST_AGE_SECONDS} > {s}"),
            Condition::FullerThan(r) => {
                format!("{BYTES} / {MAX_BYTES} > {r} or {FILES} / {MAX_FILES} > {r}")
            }
            Condition::FullWithin {
                lookback,
                horizon,
                growing,
            } => {
                let (l, h) = (prometheus_duration(lookback), horizon.as_secs_f64());
                let g = prometheus_duration(growing);
                format!(
                    "(predict_linear({BYTES}[{l}], {h}) > {MAX_BYTES} and deriv({BYTES}[{g}]) > 0) or (predict_linear({FILES}[{l}], {h}) > {MAX_FILES} and deriv({FILES}[{g}]) > 0)"
                )
            }
            Condition::Rejecting(w) => format!(
                "increase({UPLOADS_TOTAL}{{outcome=\"{}\"}}[{}]) > 0",
                UploadOutcome::Rejected.label(),
                prometheus_duration(w)
            ),
            Condition::DeadLetterFiles => format!("{DEAD_LETTER_FILES} > 0"),
            Condition::QuarantineFiles => format!("{QUARANTINED_FILES} > 0"),
            Condition::Broken => format!("{BROKEN} == 1"),
            Condition::Reopened(w) => {
                format!(
                    "increase({RECOVERIES_TOTAL}[{}]) > 0",
                    prometheus_duration(w)
                )
            }
            Condition::Failing(w) => format!(
                "increase({UPLOADS_TOTAL}{{outcome=\"{}\"}}[{}]) > 0",
                UploadOutcome::Failed.label(),
                prometheus_duration(w)
            ),
            Condition::DrainLooping(w) => {
                let w = prometheus_duration(w);
                format!("increase({REMOVE_ERRORS_TOTAL}[{w}]) > 0 and delta({FILES}[{w}]) >= 0")
            }
            Condition::Absent => format!("absent({FILES})"),
        }
    }

    /// The range of history the condition reads (its `[...]`), if any: the window of
    /// a [`Sample`]'s windowed fields.
    pub fn range(&self) -> Option<Duration> {
        match *self {
            Condition::Rejecting(w)
            | Condition::Reopened(w)
            | Condition::Failing(w)
            | Condition::DrainLooping(w) => Some(w),
            Condition::FullWithin { lookback, .. } => Some(lookback),
            _ => None,
        }
    }

    /// Whether the condition holds for `s`, as the PromQL would have a result.
    pub fn holds(&self, s: &Sample) -> bool {
        let instant_values_stale = s.metrics_absent;
        let reads_only_ranges = matches!(
            self,
            Condition::Rejecting(_)
                | Condition::Reopened(_)
                | Condition::Failing(_)
                | Condition::DrainLooping(_)
        );
        if instant_values_stale && !reads_only_ranges {
            return *self == Condition::Absent;
        }
        let above = |v: Option<f64>, max: u64| v.is_some_and(|v| v > max as f64);
        match *self {
            Condition::OldestAgeAbove(secs) => s.oldest_age_seconds > secs,
            Condition::FullerThan(r) => {
                s.bytes as f64 / s.max_bytes as f64 > r || s.files as f64 / s.max_files as f64 > r
            }
            Condition::FullWithin { .. } => {
                let growing = |slope: Option<f64>| slope.is_some_and(|d| d > 0.0);
                (above(s.predicted_bytes, s.max_bytes) && growing(s.bytes_slope))
                    || (above(s.predicted_files, s.max_files) && growing(s.files_slope))
            }
            Condition::Rejecting(_) => s.rejected_in_window > 0,
            Condition::DeadLetterFiles => s.dead_letter_files > 0,
            Condition::QuarantineFiles => s.quarantined_files > 0,
            Condition::Broken => s.broken,
            Condition::Reopened(_) => s.recoveries_in_window > 0,
            Condition::Failing(_) => s.failed_in_window > 0,
            Condition::DrainLooping(_) => {
                s.remove_errors_in_window > 0 && s.files_change_in_window.is_some_and(|c| c >= 0.0)
            }
            Condition::Absent => false,
        }
    }

    /// The labels a firing alert carries besides the rule's own (`severity`) and
    /// `alertname`, when the scraped series carry `target` (for example
    /// `instance`): `absent()` keeps none, a selector's matchers add theirs.
    pub fn alert_labels(&self, target: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut labels: Vec<(String, String)> = match self {
            Condition::Absent => Vec::new(),
            _ => target
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        match self {
            Condition::Rejecting(_) => {
                labels.push(("outcome".into(), UploadOutcome::Rejected.label().into()));
            }
            Condition::Failing(_) => {
                labels.push(("outcome".into(), UploadOutcome::Failed.label().into()));
            }
            _ => {}
        }
        labels.sort();
        labels
    }
}

/// One alert rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlertRule {
    /// Alert name; also the runbook section ([`AlertRule::runbook_anchor`]).
    pub name: &'static str,
    /// What it watches.
    pub condition: Condition,
    /// How long the condition must hold before the alert fires (`for`).
    pub hold_for: Duration,
    /// `warning` or `critical`.
    pub severity: &'static str,
    /// One line for the person paged (a Prometheus template).
    pub summary: &'static str,
    /// What is wrong and what it means for callers (a Prometheus template).
    pub description: &'static str,
}

impl AlertRule {
    /// The anchor of the rule's section in `docs/runbook.md` (the heading is the
    /// alert's name).
    pub fn runbook_anchor(&self) -> String {
        self.name.to_ascii_lowercase()
    }
}

/// The shipped rules.
pub const RULES: [AlertRule; 11] = [
    AlertRule {
        name: "SpoolOldestEntryStale",
        condition: Condition::OldestAgeAbove(900.0),
        hold_for: Duration::from_secs(300),
        severity: "warning",
        summary: "Spool entries on {{ $labels.instance }} have waited over 15 minutes",
        description: "The oldest entry in the spool on {{ $labels.instance }} has waited {{ $value | humanizeDuration }} for the object store: the store is failing writes, or the drainer is not keeping up. The entries are safe on local disk until the spool fills.",
    },
    AlertRule {
        name: "SpoolNearlyFull",
        condition: Condition::FullerThan(0.8),
        hold_for: Duration::from_secs(120),
        severity: "critical",
        summary: "The spool on {{ $labels.instance }} is over 80% full",
        description: "The spool on {{ $labels.instance }} is at {{ $value | humanizePercentage }} of max_bytes or max_files. When it is full, uploads the store fails are refused (backpressure) instead of spooled.",
    },
    AlertRule {
        name: "SpoolFullWithinAnHour",
        condition: Condition::FullWithin {
            lookback: Duration::from_secs(1800),
            horizon: Duration::from_secs(3600),
            growing: Duration::from_secs(300),
        },
        hold_for: Duration::from_secs(600),
        severity: "warning",
        summary: "The spool on {{ $labels.instance }} will be full within an hour",
        description: "At the trend of the last 30 minutes the spool on {{ $labels.instance }} passes max_bytes or max_files within an hour (forecast {{ $value | humanize }} bytes or files), and it grew over the last 5 minutes. When it is full, uploads the store fails are refused.",
    },
    AlertRule {
        name: "SpoolRejectingUploads",
        condition: Condition::Rejecting(Duration::from_secs(300)),
        hold_for: Duration::ZERO,
        severity: "critical",
        summary: "The spool on {{ $labels.instance }} is refusing uploads",
        description: "About {{ $value | printf \"%.0f\" }} uploads on {{ $labels.instance }} were refused in the last 5 minutes because the spool is full or the object is larger than it: the callers got an error and still hold those bytes.",
    },
    AlertRule {
        name: "SpoolDeadLetterFiles",
        condition: Condition::DeadLetterFiles,
        hold_for: Duration::ZERO,
        severity: "warning",
        summary: "Dead-lettered entries wait on {{ $labels.instance }}",
        description: "Files in dead-letter/ of the spool on {{ $labels.instance }}: {{ $value }}. The store refused these entries for good (a permanent error, or a different object already under the name). They stay there until an operator deals with them; the alert resolves when dead-letter/ is empty.",
    },
    AlertRule {
        name: "SpoolQuarantineFiles",
        condition: Condition::QuarantineFiles,
        hold_for: Duration::ZERO,
        severity: "warning",
        summary: "Quarantined entries wait on {{ $labels.instance }}",
        description: "Files in quarantine/ of the spool on {{ $labels.instance }}: {{ $value }}. These entries failed verification or kept failing to read, each with a .reason file. They stay there until an operator deals with them; the alert resolves when quarantine/ is empty.",
    },
    AlertRule {
        name: "SpoolBroken",
        condition: Condition::Broken,
        hold_for: Duration::from_secs(300),
        severity: "critical",
        summary: "The spool on {{ $labels.instance }} has refused writes for over 5 minutes",
        description: "A directory sync failed on {{ $labels.instance }}. Since then the spool refuses writes (uploads the store fails return errors to callers) and tries to reopen itself, retrying with backoff up to 60 s; it has not managed to for 5 minutes, so the disk or file system is failing.",
    },
    AlertRule {
        name: "SpoolReopened",
        condition: Condition::Reopened(Duration::from_secs(3600)),
        hold_for: Duration::ZERO,
        severity: "warning",
        summary: "The spool on {{ $labels.instance }} reopened itself after a failed directory sync",
        description: "The spool on {{ $labels.instance }} reopened itself after a failed directory sync in the last hour (reopenings counted: {{ $value | printf \"%.0f\" }}); each time the puts in flight failed. The disk may be failing.",
    },
    AlertRule {
        name: "SpoolUploadsFailing",
        condition: Condition::Failing(Duration::from_secs(300)),
        hold_for: Duration::from_secs(600),
        severity: "critical",
        summary: "Uploads on {{ $labels.instance }} have kept failing for 10 minutes",
        description: "Uploads on {{ $labels.instance }} have failed in every 5 minutes for 10 minutes (about {{ $value | printf \"%.0f\" }} in the last 5): the store did not take them and the spool could not either (an I/O error such as EIO, EROFS or EACCES on the spool's disk, or the spool broken), or the store refused them for good. The callers got errors (spool-relay answers 503) and still hold those bytes.",
    },
    AlertRule {
        name: "SpoolDrainLooping",
        condition: Condition::DrainLooping(Duration::from_secs(600)),
        hold_for: Duration::from_secs(600),
        severity: "warning",
        summary: "The drainer on {{ $labels.instance }} cannot remove the entries it delivered",
        description: "For 10 minutes the spool on {{ $labels.instance }} has failed to remove or move entries it had settled (failed removals or moves in the last 10 minutes: {{ $value | printf \"%.0f\" }}) and has not shrunk: the entries are delivered (the objects are in the bucket) and the remover tries their removal again after each pause. The spool's directory refuses removals (read-only, permissions, or a failing disk).",
    },
    AlertRule {
        name: "SpoolMetricsAbsent",
        condition: Condition::Absent,
        hold_for: Duration::from_secs(600),
        severity: "warning",
        summary: "No spool metrics have been scraped for 10 minutes",
        description: "Prometheus has no spool_files series: every spool's metrics endpoint is down or unreachable, or no longer scraped. No other spool alert can fire while this lasts.",
    },
];

/// Where `runbook_url` annotations point by default: the runbook's path in the
/// repository. Give [`RulesOptions::runbook_base`] a full URL to link elsewhere.
pub const DEFAULT_RUNBOOK_BASE: &str = "docs/runbook.md";

/// How [`rules_yaml_with`] renders the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RulesOptions<'a> {
    /// The runbook's URL; each rule links to `{runbook_base}#{anchor}`.
    pub runbook_base: &'a str,
    /// Whether to render annotations. Without them a promtool test can compare
    /// firing alerts by labels alone ([`PromtoolTest`]).
    pub annotations: bool,
}

impl Default for RulesOptions<'_> {
    fn default() -> Self {
        RulesOptions {
            runbook_base: DEFAULT_RUNBOOK_BASE,
            annotations: true,
        }
    }
}

/// The shipped Prometheus rules file for [`RULES`] (`spool/alerts/spool.rules.yml`).
pub fn rules_yaml() -> String {
    rules_yaml_with(&RulesOptions::default())
}

/// The Prometheus rules file for [`RULES`], rendered as `options` say.
pub fn rules_yaml_with(options: &RulesOptions) -> String {
    let mut out = String::from(
        "# Generated from spool/src/alerts.rs (a test checks they match); edit there and run\n\
         # cargo run -p spool --example print_alert_rules > spool/alerts/spool.rules.yml\n\
         groups:\n  - name: spool\n    rules:\n",
    );
    for rule in RULES {
        let _ = writeln!(out, "      - alert: {}", rule.name);
        let _ = writeln!(out, "        expr: {}", quoted(&rule.condition.promql()));
        if !rule.hold_for.is_zero() {
            let _ = writeln!(out, "        for: {}", prometheus_duration(rule.hold_for));
        }
        let _ = writeln!(
            out,
            "        labels:\n          severity: {}",
            rule.severity
        );
        if options.annotations {
            let url = format!("{}#{}", options.runbook_base, rule.runbook_anchor());
            let _ = writeln!(out, "        annotations:");
            let _ = writeln!(out, "          summary: {}", quoted(rule.summary));
            let _ = writeln!(out, "          description: {}", quoted(rule.description));
            let _ = writeln!(out, "          runbook_url: {}", quoted(&url));
        }
    }
    out
}

/// `d` in Prometheus's duration syntax (`1h30m`, `1m30s`, `250ms`, `0s`), to the
/// millisecond (Prometheus's resolution; anything finer is dropped).
pub fn prometheus_duration(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        if ms >= size {
            let _ = write!(out, "{}{unit}", ms / size);
            ms %= size;
        }
    }
    out
}

/// `s` as a JSON string literal, which is also a YAML double-quoted scalar (YAML 1.2
/// reads JSON): for the rules files here and the dashboard's JSON.
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// PromQL's `increase()` before extrapolation: the rise over `values` (oldest
/// first), where a drop is a counter reset (the counter restarted from zero).
/// `None` with fewer than two values, where PromQL has no result.
pub fn counter_increase(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let rise = values
        .windows(2)
        .map(|w| if w[1] >= w[0] { w[1] - w[0] } else { w[1] })
        .sum();
    Some(rise)
}

/// PromQL's `predict_linear()`: the least-squares line through `points` (seconds
/// relative to the evaluation time, so at most 0; value), extended `horizon_seconds`
/// past the evaluation time. `None` with fewer than two points. A constant series
/// predicts itself, as in Prometheus; otherwise rounding may differ from Prometheus's
/// in the last bits.
pub fn predict_linear(points: &[(f64, f64)], horizon_seconds: f64) -> Option<f64> {
    let (slope, intercept) = least_squares(points)?;
    Some(intercept + slope * horizon_seconds)
}

/// PromQL's `deriv()`: the slope, per second, of the least-squares line through
/// `points`; `None` with fewer than two.
pub fn deriv(points: &[(f64, f64)]) -> Option<f64> {
    least_squares(points).map(|(slope, _)| slope)
}

/// The least-squares line through `points` as (slope, value at x = 0); a constant
/// series is exactly flat (as Prometheus gives it, without rounding).
fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let first = points[0].1;
    if points.iter().all(|&(_, v)| v == first) {
        return Some((0.0, first));
    }
    let n = points.len() as f64;
    let (mut sx, mut sy, mut sxy, mut sxx) = (0.0, 0.0, 0.0, 0.0);
    for &(x, y) in points {
        sx += x;
        sy += y;
        sxy += x * y;
        sxx += x * x;
    }
    let slope = (sxy - sx * sy / n) / (sxx - sx * sx / n);
    let intercept = sy / n - slope * sx / n;
    Some((slope, intercept))
}

/// What one scrape of one spool returns, as far as the rules read it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scrape {
    /// `spool_files`.
    pub files: u64,
    /// `spool_bytes`.
    pub bytes: u64,
    /// `spool_max_files`.
    pub max_files: u64,
    /// `spool_max_bytes`.
    pub max_bytes: u64,
    /// `spool_oldest_age_seconds`.
    pub oldest_age_seconds: f64,
    /// `spool_dead_letter_files`.
    pub dead_letter_files: u64,
    /// `spool_quarantined_files`.
    pub quarantined_files: u64,
    /// `spool_broken`.
    pub broken: bool,
    /// `spool_uploads_total{outcome="rejected"}` (restarts at 0 with the process).
    pub rejected_total: u64,
    /// `spool_recoveries_total` (restarts at 0 with the process).
    pub recoveries_total: u64,
    /// `spool_uploads_total{outcome="failed"}` (restarts at 0 with the process).
    pub failed_total: u64,
    /// `spool_remove_errors_total` (restarts at 0 with the process).
    pub remove_errors_total: u64,
}

impl Scrape {
    /// What a scrape of the spool with `stats` and `metrics` returns now.
    pub fn new(stats: &Stats, metrics: &Metrics) -> Scrape {
        Scrape {
            files: stats.files,
            bytes: stats.bytes,
            max_files: stats.max_files,
            max_bytes: stats.max_bytes,
            oldest_age_seconds: stats.oldest_age.as_secs_f64(),
            dead_letter_files: stats.dead_letter_files,
            quarantined_files: stats.quarantined_files,
            broken: stats.broken.is_some(),
            rejected_total: metrics.uploads_total(UploadOutcome::Rejected),
            recoveries_total: metrics.recoveries_total(),
            failed_total: metrics.uploads_total(UploadOutcome::Failed),
            remove_errors_total: metrics.remove_errors_total(),
        }
    }

    /// The series a scrape carries, by name (with its selector's own labels), and
    /// their values.
    fn series(&self) -> [(String, f64); 12] {
        let outcome = |o: UploadOutcome| format!("{UPLOADS_TOTAL}{{outcome=\"{}\"}}", o.label());
        let rejected = outcome(UploadOutcome::Rejected);
        [
            (FILES.into(), self.files as f64),
            (BYTES.into(), self.bytes as f64),
            (MAX_FILES.into(), self.max_files as f64),
            (MAX_BYTES.into(), self.max_bytes as f64),
            (OLDEST_AGE_SECONDS.into(), self.oldest_age_seconds),
            (DEAD_LETTER_FILES.into(), self.dead_letter_files as f64),
            (QUARANTINED_FILES.into(), self.quarantined_files as f64),
            (BROKEN.into(), f64::from(u8::from(self.broken))),
            (rejected, self.rejected_total as f64),
            (RECOVERIES_TOTAL.into(), self.recoveries_total as f64),
            (outcome(UploadOutcome::Failed), self.failed_total as f64),
            (REMOVE_ERRORS_TOTAL.into(), self.remove_errors_total as f64),
        ]
    }
}

/// A time span during which an alert was firing, from t = 0 of the scrapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Firing {
    /// The first evaluation at which it fired.
    pub from: Duration,
    /// The first evaluation at which it no longer did; `None` if still firing at the
    /// last one.
    pub until: Option<Duration>,
}

/// One spool's scrapes, taken every `interval` from t = 0 (`scrapes[k]` at
/// `k * interval`), with the rules evaluated at the same instants: `None` where the
/// target could not be scraped.
#[derive(Debug, Clone, Copy)]
pub struct Scrapes<'a> {
    /// Time between scrapes, and between rule evaluations.
    pub interval: Duration,
    /// The scrapes.
    pub scrapes: &'a [Option<Scrape>],
}

impl Scrapes<'_> {
    /// The sample `condition` reads at `scrapes[k]`; its windowed fields cover the
    /// condition's [`Condition::range`]: the scrapes taken in `[t - range, t]`.
    /// `dead_lettered_in_window` stays 0 (the dead-letter counter is not scraped here).
    pub fn sample(&self, k: usize, condition: &Condition) -> Sample {
        let mut sample = match self.scrapes[k] {
            Some(now) => Sample {
                files: now.files,
                bytes: now.bytes,
                max_files: now.max_files,
                max_bytes: now.max_bytes,
                oldest_age_seconds: now.oldest_age_seconds,
                broken: now.broken,
                dead_letter_files: now.dead_letter_files,
                quarantined_files: now.quarantined_files,
                ..Sample::default()
            },
            // The instant values are stale; the range functions still see the
            // scrapes taken before.
            None => Sample {
                metrics_absent: true,
                ..Sample::default()
            },
        };
        let Some(range) = condition.range() else {
            return sample;
        };
        let step = self.interval.as_nanos().max(1);
        let t = self.interval.as_nanos() * k as u128;
        let first = t.saturating_sub(range.as_nanos()).div_ceil(step) as usize;
        // (index, seconds relative to now, scrape) for the scrapes in the range.
        let window: Vec<(usize, f64, Scrape)> = (first..=k)
            .filter_map(|j| {
                let x = -((k - j) as f64) * self.interval.as_secs_f64();
                self.scrapes[j].map(|s| (j, x, s))
            })
            .collect();
        let increase = |counter: fn(&Scrape) -> u64| {
            let values: Vec<f64> = window.iter().map(|(_, _, s)| counter(s) as f64).collect();
            counter_increase(&values).unwrap_or(0.0) as u64
        };
        sample.rejected_in_window = increase(|s| s.rejected_total);
        sample.recoveries_in_window = increase(|s| s.recoveries_total);
        sample.failed_in_window = increase(|s| s.failed_total);
        sample.remove_errors_in_window = increase(|s| s.remove_errors_total);
        if let [(_, _, first), .., (_, _, last)] = window[..] {
            sample.files_change_in_window = Some(last.files as f64 - first.files as f64);
        }
        if let Condition::FullWithin {
            horizon, growing, ..
        } = *condition
        {
            // The scrapes in `[t - growing, t]`, chosen as the range's are.
            let recent_first = t.saturating_sub(growing.as_nanos()).div_ceil(step) as usize;
            let recent: Vec<(usize, f64, Scrape)> =
                (window.iter().filter(|(j, ..)| *j >= recent_first).copied()).collect();
            let points = |scrapes: &[(usize, f64, Scrape)], gauge: fn(&Scrape) -> u64| {
                let points: Vec<(f64, f64)> = scrapes
                    .iter()
                    .map(|(_, x, s)| (*x, gauge(s) as f64))
                    .collect();
                points
            };
            let h = horizon.as_secs_f64();
            sample.predicted_bytes = predict_linear(&points(&window, |s| s.bytes), h);
            sample.predicted_files = predict_linear(&points(&window, |s| s.files), h);
            sample.bytes_slope = deriv(&points(&recent, |s| s.bytes));
            sample.files_slope = deriv(&points(&recent, |s| s.files));
        }
        sample
    }

    /// Whether `rule` fires at each evaluation, as Prometheus decides it: pending
    /// from the first evaluation at which the condition holds, firing once it has
    /// held for `hold_for`, inactive at the first evaluation at which it does not.
    pub fn firing(&self, rule: &AlertRule) -> Vec<bool> {
        let mut since: Option<Duration> = None;
        (0..self.scrapes.len())
            .map(|k| {
                let t = self.interval * k as u32;
                let sample = self.sample(k, &rule.condition);
                if rule.condition.holds(&sample) {
                    t - *since.get_or_insert(t) >= rule.hold_for
                } else {
                    since = None;
                    false
                }
            })
            .collect()
    }

    /// When `rule` fired, as spans ([`Scrapes::firing`] run together).
    pub fn windows(&self, rule: &AlertRule) -> Vec<Firing> {
        let mut out: Vec<Firing> = Vec::new();
        for (k, firing) in self.firing(rule).into_iter().enumerate() {
            let t = self.interval * k as u32;
            let open = out.last().is_some_and(|w| w.until.is_none());
            match (firing, open) {
                (true, false) => out.push(Firing {
                    from: t,
                    until: None,
                }),
                (false, true) => {
                    if let Some(w) = out.last_mut() {
                        w.until = Some(t);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// For every shipped rule and every evaluation, whether the rule fires: the
    /// expectations of a [`PromtoolTest`] of these scrapes.
    pub fn expectations(&self) -> Vec<(&'static str, u64, bool)> {
        let mut out = Vec::new();
        for rule in RULES {
            for (k, firing) in self.firing(&rule).into_iter().enumerate() {
                out.push((rule.name, (self.interval * k as u32).as_secs(), firing));
            }
        }
        out
    }

    /// The scrapes as the input series of a [`PromtoolTest`]: one per series the
    /// rules read, with a point at every scrape taken (none where the target was
    /// down).
    pub fn input_series(&self) -> Vec<(String, Vec<(u64, f64)>)> {
        let mut out: Vec<(String, Vec<(u64, f64)>)> = Scrape::default()
            .series()
            .into_iter()
            .map(|(name, _)| (name, Vec::new()))
            .collect();
        for (k, scrape) in self.scrapes.iter().enumerate() {
            let Some(scrape) = scrape else { continue };
            let at = (self.interval * k as u32).as_secs();
            for (series, (_, value)) in out.iter_mut().zip(scrape.series()) {
                series.1.push((at, value));
            }
        }
        out
    }
}

/// A promtool rule unit test (`promtool test rules FILE`) of what the shipped rules
/// do on given input series: [`PromtoolTest::to_yaml`] writes the test file.
///
/// Render the rules it names with [`rules_yaml_with`] and `annotations: false`: the
/// test compares firing alerts by their labels only (annotations are checked by the
/// hand-written tests in `spool/alerts/tests/`).
#[derive(Debug, Clone, Copy)]
pub struct PromtoolTest<'a> {
    /// The rules file, as promtool opens it (relative to the test file).
    pub rule_file: &'a str,
    /// Spacing of the input series' points, and of rule evaluations.
    pub interval: Duration,
    /// Labels every input series carries, as a scraped target's do (for example
    /// `[("instance", "host0")]`); firing alerts carry them too.
    pub target_labels: &'a [(&'a str, &'a str)],
    /// Input series: a selector without the target labels (`spool_files`,
    /// `spool_uploads_total{outcome="rejected"}`) and its points, (seconds, value),
    /// in time order on the interval's grid. Between two points a missing grid point
    /// means the target was down: the first is written as a staleness marker (what
    /// Prometheus records when a scrape fails), the rest as gaps.
    pub series: &'a [(String, Vec<(u64, f64)>)],
    /// What promtool must find: (alert name, seconds, firing). At seconds on the
    /// interval's grid.
    pub expected: &'a [(&'a str, u64, bool)],
}

/// Why [`PromtoolTest::to_yaml`] could not write a test.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PromtoolTestError {
    /// The interval is zero or not a whole number of seconds.
    #[error("the interval must be a whole, non-zero number of seconds; got {0:?}")]
    Interval(Duration),
    /// A point is not on the interval's grid, or not after the one before.
    #[error(
        "series {series}: the point at {at} s is not on the {interval} s grid after the previous one"
    )]
    Point {
        /// The series.
        series: String,
        /// The point's time, in seconds.
        at: u64,
        /// The interval, in seconds.
        interval: u64,
    },
    /// A value promtool cannot read (infinite or NaN).
    #[error("series {series}: the value at {at} s is not finite")]
    Value {
        /// The series.
        series: String,
        /// The point's time, in seconds.
        at: u64,
    },
    /// An expectation names no shipped rule.
    #[error("no shipped alert rule is named {0:?}")]
    UnknownAlert(String),
    /// An expectation is not at an evaluation instant.
    #[error("{alert} is expected at {at} s, which is not on the {interval} s evaluation grid")]
    EvalTime {
        /// The alert.
        alert: String,
        /// The time, in seconds.
        at: u64,
        /// The interval, in seconds.
        interval: u64,
    },
}

impl PromtoolTest<'_> {
    /// The test file, in promtool's format.
    pub fn to_yaml(&self) -> Result<String, PromtoolTestError> {
        let step = self.interval.as_secs();
        if step == 0 || self.interval.subsec_nanos() != 0 {
            return Err(PromtoolTestError::Interval(self.interval));
        }
        let interval = prometheus_duration(self.interval);
        let mut out = String::from("# Generated by spool::alerts::PromtoolTest.\n");
        let _ = writeln!(out, "rule_files:\n  - {}", quoted(self.rule_file));
        let _ = writeln!(out, "evaluation_interval: {interval}\ntests:");
        let _ = writeln!(out, "  - interval: {interval}\n    input_series:");
        for (selector, points) in self.series {
            let _ = writeln!(
                out,
                "      - series: {}\n        values: {}",
                quoted(&self.with_target_labels(selector)),
                quoted(&values(selector, points, step)?)
            );
        }
        let _ = writeln!(out, "    alert_rule_test:");
        for &(alert, at, firing) in self.expected {
            let rule = RULES
                .iter()
                .find(|r| r.name == alert)
                .ok_or_else(|| PromtoolTestError::UnknownAlert(alert.into()))?;
            if at % step != 0 {
                return Err(PromtoolTestError::EvalTime {
                    alert: alert.into(),
                    at,
                    interval: step,
                });
            }
            let _ = writeln!(
                out,
                "      - eval_time: {}\n        alertname: {alert}",
                prometheus_duration(Duration::from_secs(at))
            );
            if !firing {
                let _ = writeln!(out, "        exp_alerts: []");
                continue;
            }
            let _ = writeln!(out, "        exp_alerts:\n          - exp_labels:");
            let mut labels = rule.condition.alert_labels(self.target_labels);
            labels.push(("severity".into(), rule.severity.into()));
            for (name, value) in labels {
                let _ = writeln!(out, "              {name}: {}", quoted(&value));
            }
        }
        Ok(out)
    }

    /// `selector` with the target labels added to its own.
    fn with_target_labels(&self, selector: &str) -> String {
        let target: Vec<String> = self
            .target_labels
            .iter()
            .map(|(k, v)| format!("{k}={}", quoted(v)))
            .collect();
        let (name, own) = match selector.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (selector, ""),
        };
        let all: Vec<&str> = own
            .split(',')
            .filter(|l| !l.is_empty())
            .chain(target.iter().map(String::as_str))
            .collect();
        if all.is_empty() {
            name.to_string()
        } else {
            format!("{name}{{{}}}", all.join(","))
        }
    }
}

/// promtool's expanding notation for one series: a value per step from 0 to the
/// last point, `stale` for the first step missing after a point, `_` for the others.
fn values(series: &str, points: &[(u64, f64)], step: u64) -> Result<String, PromtoolTestError> {
    let mut out: Vec<String> = Vec::new();
    let mut next = 0u64;
    for &(at, value) in points {
        if at % step != 0 || at < next {
            return Err(PromtoolTestError::Point {
                series: series.into(),
                at,
                interval: step,
            });
        }
        if !value.is_finite() {
            return Err(PromtoolTestError::Value {
                series: series.into(),
                at,
            });
        }
        for missing in 0..(at - next) / step {
            let after_a_point = missing == 0 && !out.is_empty();
            out.push(if after_a_point { "stale" } else { "_" }.into());
        }
        out.push(format!("{value}"));
        next = at + step;
    }
    Ok(out.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_rules_file_matches_the_rules() {
        let shipped = include_str!("../alerts/spool.rules.yml");
        assert_eq!(
            shipped,
            rules_yaml(),
            "regenerate: cargo run -p spool --example print_alert_rules > spool/alerts/spool.rules.yml"
        );
    }

    #[test]
    fn durations_are_written_in_prometheus_syntax() {
        for (d, expected) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(1500), "1s500ms"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(5400), "1h30m"),
            (Duration::from_secs(86_401), "1d1s"),
            (Duration::from_micros(1_000_500), "1s"),
        ] {
            assert_eq!(prometheus_duration(d), expected, "{d:?}");
        }
        assert!(!rules_yaml().contains("m 30s"));
    }

    #[test]
    fn strings_are_quoted_for_json_and_yaml_alike() {
        assert_eq!(quoted(r#"a "b" \c"#), r#""a \"b\" \\c""#);
        assert_eq!(quoted("x\ny\u{1}\t"), r#""x\ny\u0001\t""#);
    }
}
