//! Capacity planning: how much disk one instance's spool needs to ride out an outage
//! of length D at R writes/s of size S, and how long the backlog takes to drain once
//! the store is back. Answered twice, so the answers check each other:
//!
//! - in closed form: backlog = R × D × (share of writes failing); bytes = backlog ×
//!   (S + 48-byte header + name), plus 25% headroom; drain time = backlog / (X − R),
//!   where X is the writes/s the store accepts from this instance after recovery,
//!   shared by new writes and the drain;
//! - by simulation: the same inputs as a scenario (one host, the fake's capacity set
//!   to X), run through the real spool.

use std::fmt::Write as _;
use std::time::Duration;

use spool::format;

use crate::report::summary::HEADROOM;

/// Bytes of name in a typical entry (`h0/0000012345` is 13; leave room).
pub const NAME_BYTES: u64 = 20;

/// What to plan for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Input {
    /// Writes per second, per instance.
    pub rate: f64,
    /// Mean object size in bytes.
    pub size: u64,
    /// Outage length.
    pub outage: Duration,
    /// Share of writes that fail during the outage (1.0 = all).
    pub failing_share: f64,
    /// Writes/s the store accepts from this instance after recovery.
    pub drain_rate: f64,
}

/// The closed-form answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClosedForm {
    /// Entries spooled by the end of the outage.
    pub backlog_entries: f64,
    /// Their bytes on disk.
    pub backlog_bytes: f64,
    /// `max_files` to configure (with headroom).
    pub files_needed: u64,
    /// `max_bytes` / disk to give the spool (with headroom).
    pub bytes_needed: u64,
    /// Time to drain after recovery; `None` when the store takes no more than the
    /// write rate (the backlog never shrinks).
    pub drain: Option<Duration>,
}

/// Computes the closed-form answer.
pub fn closed_form(input: &Input) -> ClosedForm {
    let backlog_entries = input.rate * input.outage.as_secs_f64() * input.failing_share;
    let entry_bytes = (input.size + spool::entry::FIXED_HEADER_BYTES as u64 + NAME_BYTES) as f64;
    let backlog_bytes = backlog_entries * entry_bytes;
    let spare = input.drain_rate - input.rate;
    ClosedForm {
        backlog_entries,
        backlog_bytes,
        files_needed: (backlog_entries * (1.0 + HEADROOM)).ceil() as u64,
        bytes_needed: (backlog_bytes * (1.0 + HEADROOM)).ceil() as u64,
        drain: (spare > 0.0).then(|| Duration::from_secs_f64(backlog_entries / spare)),
    }
}

/// The simulated answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulated {
    /// Most entries the spool held.
    pub peak_files: u64,
    /// Most bytes it held.
    pub peak_bytes: u64,
    /// Time from recovery to an empty spool, if it emptied.
    pub drain: Option<Duration>,
    /// Whether every invariant held.
    pub passed: bool,
}

/// Seconds of normal operation before the outage in the simulated scenario.
const LEAD: Duration = Duration::from_secs(10);

/// The inputs as a scenario file: one host, a fixed object size, the outage as a
/// window in which `failing_share` of writes get 503, and the store's capacity set
/// to `drain_rate` so new writes and the drain share it.
pub fn scenario_text(input: &Input, seed: u64) -> String {
    let closed = closed_form(input);
    let drain = closed
        .drain
        .unwrap_or(input.outage)
        .max(Duration::from_secs(30));
    let duration = LEAD + input.outage + drain.mul_f64(1.5) + Duration::from_secs(60);
    let sample = Duration::from_secs((duration.as_secs() / 2000).max(1));
    // Enough workers that the store's capacity, not the drainer, limits the drain.
    let workers = ((input.drain_rate / 10.0).ceil() as usize).clamp(4, 256);
    let mut text = String::new();
    let _ = writeln!(text, "# sim plan: {input:?}");
    let _ = writeln!(
        text,
        "name = \"plan\"\nseed = {seed}\nstart = 2026-10-08T10:00:00Z"
    );
    let _ = writeln!(
        text,
        "duration = \"{}s\"\ntick = \"20ms\"\nsample = \"{}s\"",
        duration.as_secs(),
        sample.as_secs()
    );
    let _ = writeln!(
        text,
        "\n[workload]\nrate = {}\nsize = \"{}B\"",
        input.rate, input.size
    );
    let _ = writeln!(
        text,
        "\n[spool]\nmax_files = {}\nmax_bytes = \"{}B\"",
        closed.files_needed.max(1000) * 2,
        closed.bytes_needed.max(1 << 20) * 2
    );
    let _ = writeln!(
        text,
        "\n[drainer]\nworkers = {workers}\nbase = \"250ms\"\ncap = \"5s\""
    );
    let _ = writeln!(
        text,
        "\n[capacity]\nrequests_per_second = {}\nburst = {}",
        input.drain_rate,
        input.drain_rate.max(1.0)
    );
    let _ = writeln!(
        text,
        "\n[[fault]]\nname = \"outage\"\nfrom = \"{}s\"\nuntil = \"{}ms\"\nmix = {{ \"503\" = {} }}",
        LEAD.as_secs(),
        (LEAD + input.outage).as_millis(),
        input.failing_share
    );
    text
}

/// Simulates the inputs; the run's report goes to `dir`.
pub fn simulate(input: &Input, seed: u64, dir: &std::path::Path) -> anyhow::Result<Simulated> {
    let text = scenario_text(input, seed);
    let scenario =
        crate::scenario::parse("(sim plan)", &text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let finished =
        crate::report::pipeline::run(scenario, dir, crate::world::Options::default(), true)?;
    let r = &finished.report;
    Ok(Simulated {
        peak_files: r.capacity.peak_files_per_host,
        peak_bytes: r.capacity.peak_bytes_per_host,
        drain: r.drain_seconds.map(Duration::from_secs_f64),
        passed: r.passed,
    })
}

/// The side-by-side table `sim plan` prints.
pub fn table(input: &Input, closed: &ClosedForm, simulated: Option<&Simulated>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} writes/s of {} for {}, {:.0}% failing; the store then accepts {} writes/s from this instance\n",
        input.rate,
        format::bytes(input.size),
        format::duration(input.outage),
        input.failing_share * 100.0,
        input.drain_rate
    );
    let sim = |f: &dyn Fn(&Simulated) -> String| simulated.map(f).unwrap_or_else(|| "-".into());
    let drain = |d: Option<Duration>| d.map(format::duration).unwrap_or_else(|| "never".into());
    let _ = writeln!(out, "{:<24}{:>22}{:>22}", "", "closed form", "simulated");
    let _ = writeln!(
        out,
        "{:<24}{:>22}{:>22}",
        "backlog (entries)",
        format!("{:.0}", closed.backlog_entries),
        sim(&|s| s.peak_files.to_string())
    );
    let _ = writeln!(
        out,
        "{:<24}{:>22}{:>22}",
        "backlog (disk)",
        format::bytes(closed.backlog_bytes as u64),
        sim(&|s| format::bytes(s.peak_bytes))
    );
    let _ = writeln!(
        out,
        "{:<24}{:>22}{:>22}",
        "drain time",
        drain(closed.drain),
        sim(&|s| drain(s.drain))
    );
    let _ = writeln!(
        out,
        "\nGive each instance's spool max_files = {} and max_bytes = {} ({:.0}% headroom over the closed-form backlog).",
        closed.files_needed,
        format::bytes(closed.bytes_needed),
        HEADROOM * 100.0
    );
    if closed.drain.is_none() {
        let _ = writeln!(
            out,
            "The store takes no more than the write rate after recovery, so the backlog never drains: more capacity, fewer writes, or ordered shedding is needed."
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> Input {
        Input {
            rate: 50.0,
            size: 1024,
            outage: Duration::from_secs(3600),
            failing_share: 1.0,
            drain_rate: 150.0,
        }
    }

    #[test]
    fn backlog_and_drain_follow_the_formulas() {
        let c = closed_form(&input());
        assert_eq!(c.backlog_entries, 180_000.0);
        assert_eq!(c.backlog_bytes, 180_000.0 * (1024.0 + 48.0 + 20.0));
        assert_eq!(c.files_needed, 225_000);
        assert_eq!(c.bytes_needed, (c.backlog_bytes * 1.25).ceil() as u64);
        // 180,000 entries at 150 - 50 = 100 entries/s net.
        assert_eq!(c.drain, Some(Duration::from_secs(1800)));
    }

    #[test]
    fn a_partial_outage_and_a_store_without_spare_capacity() {
        let c = closed_form(&Input {
            failing_share: 0.25,
            drain_rate: 50.0,
            ..input()
        });
        assert_eq!(c.backlog_entries, 45_000.0);
        assert_eq!(c.drain, None);
        assert!(table(&input(), &c, None).contains("never drains"));
    }

    #[test]
    fn the_simulation_agrees_with_the_closed_form() {
        let input = Input {
            rate: 20.0,
            size: 1024,
            outage: Duration::from_secs(60),
            failing_share: 1.0,
            drain_rate: 60.0,
        };
        let dir = tempfile::tempdir().unwrap();
        let closed = closed_form(&input);
        let sim = simulate(&input, 1, dir.path()).unwrap();
        assert!(sim.passed);
        let backlog_error =
            (sim.peak_files as f64 - closed.backlog_entries).abs() / closed.backlog_entries;
        assert!(
            backlog_error < 0.15,
            "simulated backlog {} vs {}",
            sim.peak_files,
            closed.backlog_entries
        );
        let (closed_drain, sim_drain) = (
            closed.drain.unwrap().as_secs_f64(),
            sim.drain.unwrap().as_secs_f64(),
        );
        assert!(
            (sim_drain - closed_drain).abs() / closed_drain < 0.35,
            "simulated drain {sim_drain} s vs {closed_drain} s"
        );
    }
}
