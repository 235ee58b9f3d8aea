//! The alert rules that ship with the spool, defined once: rendered as the Prometheus
//! rules file `spool/alerts/spool.rules.yml` (a test keeps the two identical), and
//! evaluated by the simulation on its time series to say when each would have fired.

use std::time::Duration;

/// What an alert watches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    /// `spool_oldest_age_seconds` above this many seconds.
    OldestAgeAbove(f64),
    /// `spool_bytes / spool_max_bytes` or `spool_files / spool_max_files` above this
    /// ratio.
    FullerThan(f64),
    /// `dead_lettered_total` increased within the window.
    DeadLettersRising(Duration),
    /// `spool_broken == 1`.
    Broken,
}

/// One alert rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlertRule {
    /// Alert name.
    pub name: &'static str,
    /// What it watches.
    pub condition: Condition,
    /// How long the condition must hold before the alert fires.
    pub hold_for: Duration,
    /// `warning` or `critical`.
    pub severity: &'static str,
    /// One line for the person paged.
    pub summary: &'static str,
}

/// The gauges and counter deltas an alert condition reads, at one instant.
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
    /// Increase of `dead_lettered_total` over the rule's window ending now.
    pub dead_lettered_in_window: u64,
    /// `spool_broken`.
    pub broken: bool,
}

impl Condition {
    /// The PromQL expression.
    pub fn promql(&self) -> String {
        match self {
            Condition::OldestAgeAbove(s) => format!("spool_oldest_age_seconds > {s}"),
            Condition::FullerThan(r) => format!(
                "spool_bytes / spool_max_bytes > {r} or spool_files / spool_max_files > {r}"
            ),
            Condition::DeadLettersRising(w) => {
                format!(
                    "increase(dead_lettered_total[{}]) > 0",
                    humantime::format_duration(*w)
                )
            }
            Condition::Broken => "spool_broken == 1".into(),
        }
    }

    /// Whether the condition holds for `s`.
    pub fn holds(&self, s: &Sample) -> bool {
        let ratio = |v: u64, max: u64| if max == 0 { 0.0 } else { v as f64 / max as f64 };
        match *self {
            Condition::OldestAgeAbove(secs) => s.oldest_age_seconds > secs,
            Condition::FullerThan(r) => {
                ratio(s.bytes, s.max_bytes) > r || ratio(s.files, s.max_files) > r
            }
            Condition::DeadLettersRising(_) => s.dead_lettered_in_window > 0,
            Condition::Broken => s.broken,
        }
    }
}

/// The shipped rules.
pub const RULES: [AlertRule; 4] = [
    AlertRule {
        name: "SpoolOldestEntryStale",
        condition: Condition::OldestAgeAbove(900.0),
        hold_for: Duration::from_secs(300),
        severity: "warning",
        summary: "An entry has waited in the spool for over 15 minutes: the object store is failing writes or the drainer is not keeping up",
    },
    AlertRule {
        name: "SpoolNearlyFull",
        condition: Condition::FullerThan(0.8),
        hold_for: Duration::from_secs(120),
        severity: "critical",
        summary: "The spool is over 80% of max_bytes or max_files: at 100% uploads are refused (backpressure)",
    },
    AlertRule {
        name: "SpoolDeadLetters",
        condition: Condition::DeadLettersRising(Duration::from_secs(600)),
        hold_for: Duration::ZERO,
        severity: "warning",
        summary: "Entries were moved to dead-letter/: the store refused them for good; inspect with `spool verify DIR`",
    },
    AlertRule {
        name: "SpoolBroken",
        condition: Condition::Broken,
        hold_for: Duration::ZERO,
        severity: "critical",
        summary: "The spool stopped accepting writes after an I/O error (fsync failed); restart the service after checking the disk",
    },
];

/// The Prometheus rules file for [`RULES`].
pub fn rules_yaml() -> String {
    let mut out = String::from(
        "# Generated from spool/src/alerts.rs (a test checks they match); edit there.\ngroups:\n  - name: spool\n    rules:\n",
    );
    for rule in RULES {
        out += &format!("      - alert: {}\n", rule.name);
        out += &format!("        expr: {}\n", rule.condition.promql());
        if !rule.hold_for.is_zero() {
            out += &format!(
                "        for: {}\n",
                humantime::format_duration(rule.hold_for)
            );
        }
        out += &format!("        labels:\n          severity: {}\n", rule.severity);
        out += &format!(
            "        annotations:\n          summary: {:?}\n",
            rule.summary
        );
    }
    out
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
    fn conditions_read_the_sample_as_the_promql_says() {
        let base = Sample {
            max_files: 100,
            max_bytes: 1000,
            ..Sample::default()
        };
        let [stale, full, dead, broken] = RULES.map(|r| r.condition);
        assert!(!stale.holds(&Sample {
            oldest_age_seconds: 900.0,
            ..base
        }));
        assert!(stale.holds(&Sample {
            oldest_age_seconds: 900.5,
            ..base
        }));
        assert!(!full.holds(&Sample {
            bytes: 800,
            files: 80,
            ..base
        }));
        assert!(full.holds(&Sample { bytes: 801, ..base }));
        assert!(full.holds(&Sample { files: 81, ..base }));
        assert!(dead.holds(&Sample {
            dead_lettered_in_window: 1,
            ..base
        }));
        assert!(!dead.holds(&base));
        assert!(broken.holds(&Sample {
            broken: true,
            ..base
        }));
        assert!(
            full.promql()
                .contains("spool_bytes / spool_max_bytes > 0.8")
        );
    }
}
