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
//!
//! With a spread ([`Spread`]: the outage's length lognormal, `--outage` its median
//! and `--outage-p99` its 99th percentile), both answers are distributions: the
//! closed form at the outage's quantiles (p50, p90, p99, and the one that keeps
//! overflow at the target), the simulation as a sweep over seeds, each seed drawing
//! its own outage.

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

/// An outage whose length is drawn: lognormal with the input's `outage` as its
/// median and `p99` as its 99th percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The outage's 99th percentile.
    pub p99: Duration,
    /// Share of outages the spool may overflow in (0.01 for 1%).
    pub target_overflow: f64,
}

/// The `q` quantile (0 < q < 1) of a lognormal with this median and p99.
pub fn outage_quantile(median: Duration, p99: Duration, q: f64) -> Duration {
    let mu = median.as_secs_f64().ln();
    let sigma = (p99.as_secs_f64().ln() - mu) / normal_quantile(0.99);
    Duration::from_secs_f64((mu + sigma * normal_quantile(q)).exp())
}

/// The standard normal's `p` quantile (Acklam's rational approximation, relative
/// error under 1.2e-9).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    match p {
        p if p < 0.02425 => tail((-2.0 * p.ln()).sqrt()),
        p if p > 1.0 - 0.02425 => -tail((-2.0 * (1.0 - p).ln()).sqrt()),
        p => {
            let q = p - 0.5;
            let r = q * q;
            (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
                / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
        }
    }
}

/// The closed form at the outage's quantiles: (label, outage, answer), for p50,
/// p90, p99 and, when it is another, the quantile that keeps overflow at the
/// target (last).
pub fn closed_quantiles(input: &Input, spread: &Spread) -> Vec<(String, Duration, ClosedForm)> {
    let target = 1.0 - spread.target_overflow;
    let mut quantiles = vec![
        (0.5, "p50".to_string()),
        (0.9, "p90".into()),
        (0.99, "p99".into()),
    ];
    if !quantiles.iter().any(|(q, _)| (q - target).abs() < 1e-9) {
        let label = format!("p{}", target * 100.0);
        quantiles.push((target, label));
        quantiles.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    quantiles
        .into_iter()
        .map(|(q, label)| {
            let outage = outage_quantile(input.outage, spread.p99, q);
            (label, outage, closed_form(&Input { outage, ..*input }))
        })
        .collect()
}

/// The closed form for the outage that only the target share of outages exceeds.
pub fn closed_for_target(input: &Input, spread: &Spread) -> ClosedForm {
    let outage = outage_quantile(input.outage, spread.p99, 1.0 - spread.target_overflow);
    closed_form(&Input { outage, ..*input })
}

/// The inputs as a scenario whose outage length is drawn per seed, long enough for
/// the outage's p99 and its drain.
pub fn spread_scenario_text(input: &Input, spread: &Spread) -> String {
    let tail = Input {
        outage: outage_quantile(input.outage, spread.p99, 0.999).max(spread.p99),
        ..*input
    };
    let text = scenario_text(&tail, 1);
    let window = format!("until = \"{}ms\"", (LEAD + tail.outage).as_millis());
    let length = format!(
        "length = {{ median = \"{}s\", p99 = \"{}s\" }}",
        input.outage.as_secs().max(1),
        spread.p99.as_secs().max(1)
    );
    text.replace(&window, &length)
}

/// Simulates the spread over `seeds` seeds, as a sweep whose report goes to `dir`.
pub fn simulate_spread(
    input: &Input,
    spread: &Spread,
    seeds: u64,
    dir: &std::path::Path,
) -> anyhow::Result<crate::report::sweep::SweepSummary> {
    use crate::sweep::{Location, Plan, Shard};
    let text = spread_scenario_text(input, spread);
    let plan = Plan::new("(sim plan)", &text, &[], Some(1..=seeds.max(1)))?;
    let results = Location::Dir(dir.join("results"));
    let jobs = crate::sweep::default_jobs(&plan);
    crate::sweep::run_shard(&plan, Shard::WHOLE, jobs, &results)?;
    let files = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(results.read_all())?;
    let merged = crate::sweep::merge(&files)?;
    crate::report::sweep::write(dir, &merged, spread.target_overflow, "peak_bytes")
}

/// The table `sim plan --outage-p99` prints: the closed form at each quantile, and
/// the simulated percentiles beside it.
pub fn spread_table(
    input: &Input,
    spread: &Spread,
    simulated: Option<&crate::report::sweep::SweepSummary>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} writes/s of {}, outages lognormal with median {} and p99 {}, {:.0}% failing; the store then accepts {} writes/s\n",
        input.rate,
        format::bytes(input.size),
        format::duration(input.outage),
        format::duration(spread.p99),
        input.failing_share * 100.0,
        input.drain_rate
    );
    let figures = simulated
        .and_then(|s| s.variants.first())
        .map(|v| &v.figures);
    let pick = |metric: &str, label: &str| -> Option<f64> {
        let p = figures?.get(metric)?;
        Some(match label {
            "p50" => p.p50,
            "p90" => p.p90,
            "p99" => p.p99,
            _ => return None,
        })
    };
    let _ = writeln!(
        out,
        "{:<10}{:>12}{:>18}{:>18}{:>16}{:>16}",
        "quantile", "outage", "disk (closed)", "disk (simulated)", "drain (closed)", "drain (sim.)"
    );
    for (label, outage, closed) in closed_quantiles(input, spread) {
        let drain = closed
            .drain
            .map(format::duration)
            .unwrap_or_else(|| "never".into());
        let sim_disk = pick("peak_bytes", &label).map_or("-".into(), |b| format::bytes(b as u64));
        let sim_drain = pick("drain_seconds", &label).map_or("-".into(), |d| {
            if d.is_finite() {
                format::duration(Duration::from_secs_f64(d))
            } else {
                "never".into()
            }
        });
        let _ = writeln!(
            out,
            "{label:<10}{:>12}{:>18}{sim_disk:>18}{drain:>16}{sim_drain:>16}",
            format::duration(outage),
            format::bytes(closed.bytes_needed)
        );
    }
    let _ = writeln!(
        out,
        "\nGive each instance's spool max_bytes = {} for at most {}% of such outages to overflow it (closed form, {:.0}% headroom).",
        format::bytes(closed_for_target(input, spread).bytes_needed),
        spread.target_overflow * 100.0,
        HEADROOM * 100.0
    );
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
    fn lognormal_outage_quantiles_meet_their_median_and_p99() {
        assert!(normal_quantile(0.5).abs() < 1e-9);
        assert!((normal_quantile(0.99) - 2.326_347_874).abs() < 1e-6);
        assert!((normal_quantile(0.001) + 3.090_232_306).abs() < 1e-6);
        let (median, p99) = (Duration::from_secs(3600), Duration::from_secs(4 * 3600));
        let q = |p| outage_quantile(median, p99, p).as_secs_f64();
        assert!((q(0.5) - 3600.0).abs() < 1e-6);
        assert!((q(0.99) - 14_400.0).abs() < 1e-3);
        assert!(q(0.9) > 3600.0 && q(0.9) < 14_400.0);
        let spread = Spread {
            p99,
            target_overflow: 0.01,
        };
        let rows = closed_quantiles(&input(), &spread);
        let labels: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(labels, ["p50", "p90", "p99"]);
        assert!(
            rows.windows(2)
                .all(|w| w[0].2.bytes_needed < w[1].2.bytes_needed)
        );
        let strict = Spread {
            target_overflow: 0.001,
            ..spread
        };
        let labels: Vec<String> = closed_quantiles(&input(), &strict)
            .into_iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(labels, ["p50", "p90", "p99", "p99.9"]);
        let text = spread_scenario_text(&input(), &spread);
        assert!(
            text.contains("length = { median = \"3600s\", p99 = \"14400s\" }"),
            "{text}"
        );
        crate::scenario::parse("plan.toml", &text).unwrap();
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
