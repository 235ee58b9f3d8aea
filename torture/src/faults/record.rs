//! The relay's metrics, scraped every second during a fault run, and what the alert
//! rules make of them: [`Recorder`] keeps one [`Scrape`] a second (none when the
//! endpoint did not answer within the second), with the phases of the run marked;
//! [`Recorded::promtool_test`] writes them as a promtool rule test whose input series
//! are the recorded values and whose expectations are the firing windows the spool's
//! own model of the rules computes ([`Scrapes::windows`]); promtool then says whether
//! Prometheus agrees.
//!
//! Time is scaled: a second of the run is a minute of the test (`interval: 1m`), so
//! that the rules' `for: 5m` and `for: 10m` and their 5 and 10 minute windows are 5
//! and 10 seconds of the run. Every pause and backoff of the relay is real time, so
//! in the test they are 60 times longer than they were.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use spool::alerts::{Firing, PromtoolTest, RULES, RulesOptions, Scrape, Scrapes, rules_yaml_with};
use tokio::time::{Instant, MissedTickBehavior};

use crate::http;

/// Real time between scrapes.
pub const SCRAPE_EVERY: Duration = Duration::from_secs(1);
/// The promtool test's interval: one scrape per minute of test time.
pub const TEST_INTERVAL: Duration = Duration::from_secs(60);
/// Where the labels-only rules go, relative to a directory of recorded tests.
pub const LABELS_ONLY_RULES: &str = "recorded/labels-only.rules.yml";

/// One scrape: what the rules read, and a few more series for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    pub scrape: Scrape,
    pub quarantined_total: u64,
    pub rejected_total: u64,
    pub drained_already_present: u64,
}

/// The scrapes so far, and the phases marked.
#[derive(Debug, Default)]
pub struct Recorded {
    pub samples: Vec<Option<Sample>>,
    /// (scrape index, label) at which each phase began.
    pub marks: Vec<(usize, String)>,
}

/// Scrapes the relay's metrics every second until dropped.
#[derive(Debug)]
pub struct Recorder {
    pub recorded: Arc<Mutex<Recorded>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    pub fn start(metrics: SocketAddr) -> Self {
        let recorded = Arc::new(Mutex::new(Recorded::default()));
        let shared = recorded.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(SCRAPE_EVERY);
            tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
            let began = Instant::now();
            loop {
                tick.tick().await;
                let k = (began.elapsed().as_millis() / SCRAPE_EVERY.as_millis()) as usize;
                let scrape = tokio::time::timeout(SCRAPE_EVERY * 9 / 10, scrape(metrics)).await;
                let sample = scrape.ok().and_then(Result::ok);
                let mut recorded = shared.lock().expect("recorded");
                while recorded.samples.len() < k {
                    recorded.samples.push(None);
                }
                recorded.samples.push(sample);
            }
        });
        Self { recorded, task }
    }

    /// Marks the start of a phase at the next scrape.
    pub fn mark(&self, label: &str) {
        let mut recorded = self.recorded.lock().expect("recorded");
        let at = recorded.samples.len();
        recorded.marks.push((at, label.to_string()));
    }

    /// The last scrape taken, if it answered.
    pub fn last(&self) -> Option<Sample> {
        let recorded = self.recorded.lock().expect("recorded");
        recorded.samples.last().copied().flatten()
    }

    /// Stops scraping; what was recorded.
    pub fn stop(self) -> Recorded {
        self.task.abort();
        let recorded = self.recorded.lock().expect("recorded");
        Recorded {
            samples: recorded.samples.clone(),
            marks: recorded.marks.clone(),
        }
    }
}

async fn scrape(metrics: SocketAddr) -> anyhow::Result<Sample> {
    let body = http::get_ok(metrics, "/metrics").await?;
    parse(&String::from_utf8_lossy(&body))
}

/// Reads the series the rules and the report use from an exposition.
pub fn parse(text: &str) -> anyhow::Result<Sample> {
    let get = |selector: &str| value(text, selector).unwrap_or(0.0) as u64;
    if value(text, "spool_files").is_none() {
        bail!("no spool_files in the exposition");
    }
    let scrape = Scrape {
        files: get("spool_files"),
        bytes: get("spool_bytes"),
        max_files: get("spool_max_files"),
        max_bytes: get("spool_max_bytes"),
        oldest_age_seconds: value(text, "spool_oldest_age_seconds").unwrap_or(0.0),
        dead_letter_files: get("spool_dead_letter_files"),
        quarantined_files: get("spool_quarantined_files"),
        broken: get("spool_broken") == 1,
        rejected_total: get("spool_uploads_total{outcome=\"rejected\"}"),
        recoveries_total: get("spool_recoveries_total"),
        failed_total: get("spool_uploads_total{outcome=\"failed\"}"),
        remove_errors_total: get("spool_remove_errors_total"),
    };
    Ok(Sample {
        scrape,
        quarantined_total: get("spool_quarantined_total"),
        rejected_total: scrape.rejected_total,
        drained_already_present: get("spool_drained_total{outcome=\"already_present\"}"),
    })
}

/// The value of the series written exactly as `selector` (name and labels).
fn value(text: &str, selector: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(selector)?.strip_prefix(' ')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

impl Recorded {
    /// The scrapes, as the rules model reads them.
    pub fn scrapes(&self) -> Vec<Option<Scrape>> {
        self.samples.iter().map(|s| s.map(|s| s.scrape)).collect()
    }

    /// Each shipped rule that fired, with its windows (in scrapes, i.e. seconds of
    /// the run).
    pub fn alerts(&self) -> Vec<(&'static str, Vec<Firing>)> {
        let scrapes = self.scrapes();
        let model = Scrapes {
            interval: TEST_INTERVAL,
            scrapes: &scrapes,
        };
        RULES
            .iter()
            .map(|rule| (rule.name, model.windows(rule)))
            .filter(|(_, windows)| !windows.is_empty())
            .collect()
    }

    /// Scrapes that did not answer.
    pub fn missed(&self) -> usize {
        self.samples.iter().filter(|s| s.is_none()).count()
    }

    /// The largest value of `f` over the scrapes taken.
    pub fn max(&self, f: impl Fn(&Sample) -> u64) -> u64 {
        self.samples.iter().flatten().map(f).max().unwrap_or(0)
    }

    /// The promtool test of these scrapes: every shipped rule asserted just before
    /// and at each start and end of its firing windows, and at the last evaluation.
    /// `comment` opens the file.
    pub fn promtool_test(&self, comment: &str) -> anyhow::Result<String> {
        let scrapes = self.scrapes();
        let model = Scrapes {
            interval: TEST_INTERVAL,
            scrapes: &scrapes,
        };
        let series = model.input_series();
        let step = TEST_INTERVAL.as_secs();
        let last = scrapes.len().saturating_sub(1) as u64;
        let mut expected: Vec<(&str, u64, bool)> = Vec::new();
        for rule in RULES {
            let firing = model.firing(&rule);
            let mut at: Vec<u64> = vec![last];
            for w in model.windows(&rule) {
                let from = w.from.as_secs() / step;
                at.extend([from.saturating_sub(1), from]);
                if let Some(until) = w.until {
                    let until = until.as_secs() / step;
                    at.extend([until - 1, until]);
                }
            }
            at.sort_unstable();
            at.dedup();
            for k in at {
                expected.push((rule.name, k * step, firing[k as usize]));
            }
        }
        let test = PromtoolTest {
            rule_file: LABELS_ONLY_RULES,
            interval: TEST_INTERVAL,
            target_labels: &[("instance", "spool-relay")],
            series: &series,
            expected: &expected,
        };
        let yaml = test.to_yaml().context("the promtool test")?;
        let mut out = String::new();
        for line in comment.lines() {
            let _ = if line.is_empty() {
                writeln!(out, "#")
            } else {
                writeln!(out, "# {line}")
            };
        }
        out.push_str(&yaml);
        Ok(out)
    }

    /// The marks as text, one a line: `N s: label`.
    pub fn phases(&self) -> String {
        let parts: Vec<String> = (self.marks.iter())
            .map(|(at, label)| format!("  {at} s: {label}"))
            .collect();
        parts.join("\n")
    }
}

/// The shipped rules without annotations, which a recorded test names (it compares
/// alerts by their labels: the annotations' `$value`s are checked by the
/// hand-written tests).
pub fn labels_only_rules() -> String {
    let body = rules_yaml_with(&RulesOptions {
        annotations: false,
        ..RulesOptions::default()
    });
    format!(
        "# The shipped rules (spool/alerts/spool.rules.yml) without their annotations, for the\n\
         # recorded tests beside it (torture faults; docs/faults.md), which compare firing\n\
         # alerts by their labels. Written by `torture faults`; a test checks it matches.\n{body}"
    )
}

/// Writes `test` as `dir/name` and the labels-only rules beside it; runs `promtool
/// test rules` on it; promtool's output, and whether it passed.
pub fn write_and_check(
    dir: &Path,
    name: &str,
    test: &str,
) -> anyhow::Result<(PathBuf, bool, String)> {
    let rules = dir.join(LABELS_ONLY_RULES);
    std::fs::create_dir_all(rules.parent().context("a rules path without a directory")?)?;
    std::fs::write(&rules, labels_only_rules())?;
    let path = dir.join(name);
    std::fs::write(&path, test).with_context(|| format!("cannot write {}", path.display()))?;
    let output = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&path)
        .output()
        .context("cannot run promtool (apt-get install prometheus)")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((path, output.status.success(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_labels_only_rules_match_the_shipped_rules() {
        let committed = include_str!("../../../spool/alerts/tests/recorded/labels-only.rules.yml");
        assert_eq!(
            committed,
            labels_only_rules(),
            "regenerate: torture faults --tests-dir spool/alerts/tests (docs/faults.md)"
        );
    }

    #[test]
    fn series_are_read_by_name_and_labels() {
        let text = "spool_files 3\nspool_broken 1\nspool_uploads_total{outcome=\"failed\"} 7\n\
                    spool_uploads_total{outcome=\"rejected\"} 2\nspool_remove_errors_total 4\n";
        let sample = parse(text).unwrap();
        assert_eq!(sample.scrape.files, 3);
        assert!(sample.scrape.broken);
        assert_eq!(sample.scrape.failed_total, 7);
        assert_eq!(sample.scrape.rejected_total, 2);
        assert_eq!(sample.scrape.remove_errors_total, 4);
        assert!(parse("spool_bytes 1\n").is_err());
    }
}
