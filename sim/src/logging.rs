//! The bench's log lines: stamped with the scenario's clock, plain off a terminal.
//!
//! A replay covers 32 simulated hours in a few wall minutes, so a wall-clock stamp
//! says nothing about when, in the outage, something happened. Every line is stamped
//! with the simulated time instead: the running host's clock (turmoil's epoch, the
//! scenario's `start`, plus simulated time) inside a host, the world's clock
//! ([`set_world_time`]) between steps, and `-` outside a run (writing the report).
//! Colour codes go only to a terminal, and never when `NO_COLOR` is set.

use std::cell::Cell;
use std::io::IsTerminal as _;
use std::time::{Duration, SystemTime};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

thread_local! {
    /// The world's simulated time since the Unix epoch, while this thread steps one.
    static WORLD_TIME: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// Records the world's simulated time (since the Unix epoch) for log lines written
/// between steps on this thread; `None` once the run has stepped its last.
pub fn set_world_time(since_epoch: Option<Duration>) {
    WORLD_TIME.with(|t| t.set(since_epoch));
}

/// Stamps a line with the simulated time, as RFC 3339 with milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimulatedTime;

impl FormatTime for SimulatedTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        let since_epoch = turmoil::since_epoch().or_else(|| WORLD_TIME.with(Cell::get));
        match since_epoch {
            Some(t) => write!(
                w,
                "{}",
                humantime::format_rfc3339_millis(SystemTime::UNIX_EPOCH + t)
            ),
            None => write!(w, "{:>24}", "-"),
        }
    }
}

/// Whether log lines may carry colour codes: stderr is a terminal and `NO_COLOR` is
/// unset (<https://no-color.org>).
pub fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the bench's subscriber: `filter` (overridden by `RUST_LOG`), simulated
/// time, stderr, colour only on a terminal.
pub fn init(default_filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_timer(SimulatedTime)
        .with_ansi(colour_on_stderr())
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> String {
        let mut text = String::new();
        SimulatedTime
            .format_time(&mut Writer::new(&mut text))
            .expect("formats");
        text
    }

    #[test]
    fn a_line_between_steps_carries_the_worlds_simulated_time() {
        set_world_time(Some(Duration::from_millis(1_791_457_200_123)));
        assert_eq!(stamp(), "2026-10-08T11:00:00.123Z");
        set_world_time(None);
        assert_eq!(stamp().trim(), "-");
    }
}
