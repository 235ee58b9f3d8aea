//! How far a run has come, for the person waiting on it.
//!
//! On a terminal: a bar (simulated time done, speed, ETA), redrawn in place. Off a
//! terminal (CI logs, `2> file`, `| tee`): a plain line every [`LINE_EVERY_PERCENT`]
//! percent of the simulated time, with the scenario's clock, the rate in simulated
//! seconds per wall second, the wall time so far and an estimate of what is left, so
//! a log shows that a long replay is moving and when it will end. The wall clock read
//! here never reaches the report.

use std::io::IsTerminal as _;
use std::time::{Duration, SystemTime};

use sim::report::pipeline::Stopwatch;
use sim::world::Progress;

/// Off a terminal, one line per this many percent of the simulated time.
pub const LINE_EVERY_PERCENT: u64 = 5;

/// Reports a run's progress on stderr: a bar on a terminal, lines otherwise.
pub struct Reporter {
    start: SystemTime,
    stopwatch: Stopwatch,
    /// The bar, on a terminal.
    bar: Option<indicatif::ProgressBar>,
    /// Off a terminal: the next percentage that prints a line.
    next_percent: u64,
}

impl Reporter {
    /// A reporter for a run of `total` simulated time from the scenario's `start`.
    pub fn new(total: Duration, start: SystemTime) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| terminal_bar(total));
        Self {
            start,
            stopwatch: Stopwatch::start(),
            bar,
            next_percent: LINE_EVERY_PERCENT,
        }
    }

    /// Takes one report from the world.
    pub fn update(&mut self, progress: Progress) {
        if let Some(bar) = &self.bar {
            bar.set_position(progress.simulated.as_secs());
            return;
        }
        let percent = percent(progress);
        if percent >= self.next_percent {
            eprintln!("{}", self.line(progress, self.stopwatch.elapsed()));
            self.next_percent = (percent / LINE_EVERY_PERCENT + 1) * LINE_EVERY_PERCENT;
        }
    }

    /// One progress line: `wall` is the wall time since the run started.
    fn line(&self, progress: Progress, wall: Duration) -> String {
        let simulated = progress.simulated.as_secs_f64();
        let rate = simulated / wall.as_secs_f64().max(1e-3);
        let left = progress
            .total
            .saturating_sub(progress.simulated)
            .as_secs_f64();
        let clock = humantime::format_rfc3339_seconds(self.start + progress.simulated);
        format!(
            "sim: {:>3}% simulated ({} of {}, at {clock}), {:.0} simulated s per wall s, {} wall, about {} left",
            percent(progress),
            whole_seconds(progress.simulated),
            whole_seconds(progress.total),
            rate,
            whole_seconds(wall),
            whole_seconds(Duration::from_secs_f64(left / rate.max(1e-9))),
        )
    }
}

impl Drop for Reporter {
    /// Clears the bar when the run no longer reports (the lines stay).
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The share of the simulated time done, in whole percent.
fn percent(progress: Progress) -> u64 {
    let total = progress.total.as_millis().max(1);
    (progress.simulated.as_millis() * 100 / total).min(100) as u64
}

fn whole_seconds(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(d.as_secs()))
}

fn terminal_bar(total: Duration) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total.as_secs());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} simulated s  {per_sec}  ETA {eta}",
        )
        .expect("static template"),
    );
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(simulated_s: u64) -> Progress {
        Progress {
            simulated: Duration::from_secs(simulated_s),
            total: Duration::from_secs(1000),
        }
    }

    #[test]
    fn a_line_names_the_share_the_scenario_clock_the_rate_and_what_is_left() {
        let reporter = Reporter {
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_791_453_600),
            stopwatch: Stopwatch::start(),
            bar: None,
            next_percent: LINE_EVERY_PERCENT,
        };
        let line = reporter.line(at(250), Duration::from_secs(5));
        assert_eq!(
            line,
            "sim:  25% simulated (4m 10s of 16m 40s, at 2026-10-08T10:04:10Z), 50 simulated s per wall s, 5s wall, about 15s left"
        );
    }

    #[test]
    fn off_a_terminal_a_line_is_due_every_few_percent_not_every_report() {
        let mut reporter = Reporter {
            start: SystemTime::UNIX_EPOCH,
            stopwatch: Stopwatch::start(),
            bar: None,
            next_percent: LINE_EVERY_PERCENT,
        };
        let mut due = Vec::new();
        for s in (0..=1000).step_by(7).chain([1000]) {
            let before = reporter.next_percent;
            reporter.update(at(s));
            if reporter.next_percent != before {
                due.push(percent(at(s)));
            }
        }
        assert_eq!(due.len(), (100 / LINE_EVERY_PERCENT) as usize, "{due:?}");
        assert!(
            due.windows(2).all(|w| w[1] >= w[0] + LINE_EVERY_PERCENT),
            "{due:?}"
        );
    }
}
