//! A sweep's report: for every variant, the distribution of its runs' figures
//! (p50, p90, p99 and the maximum, with the seed of the maximum so it can be
//! replayed alone), the chance of filling the spool as a function of its size, the
//! `max_bytes` that keeps that chance under a target, and every finding (a run that
//! failed an invariant or could not run) with the command that replays it.
//!
//! Files: `sweep.md`, `sweep.json`, `runs.csv` (one row per run), `overflow.png`
//! (chance of overflow against disk size, a line per variant) and, when variants
//! set a key, `sweep.png` (a figure's median against the first key). Everything is
//! a function of the merged results: a sweep merged from shards writes the same
//! bytes as the same sweep run in one process.
//!
//! The overflow curve reads each run's peak bytes as the disk that run needed: true
//! when the scenario's `max_bytes` did not refuse writes in that run; runs where it
//! did are counted, and the report says how many.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::sweep::{Figures, Outcome, RunResult};

/// The figures a sweep summarizes, by name, and the one charted against a key.
pub const METRICS: &[&str] = &[
    "peak_files",
    "peak_bytes",
    "peak_oldest_age_seconds",
    "drain_seconds",
    "rejected",
    "store_requests",
    "store_shed",
];

/// The value of `metric` in a run's figures: `drain_seconds` is infinite when the
/// spool never emptied.
pub fn metric_value(figures: &Figures, metric: &str) -> Option<f64> {
    Some(match metric {
        "peak_files" => figures.peak_files as f64,
        "peak_bytes" => figures.peak_bytes as f64,
        "peak_oldest_age_seconds" => figures.peak_oldest_age_seconds,
        "drain_seconds" => figures.drain_seconds.unwrap_or(f64::INFINITY),
        "rejected" => figures.rejected as f64,
        "store_requests" => figures.store_requests as f64,
        "store_shed" => figures.store_shed as f64,
        _ => return None,
    })
}

/// A figure's distribution over one variant's runs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Percentiles {
    /// Median (nearest rank).
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// The largest value.
    pub max: f64,
    /// The seed of the run with the largest value (the first such seed).
    pub max_seed: u64,
}

/// One variant's summary.
#[derive(Debug, Clone, Serialize)]
pub struct VariantSummary {
    /// Its label.
    pub variant: String,
    /// Runs that ran to the end.
    pub runs: usize,
    /// Runs that failed an invariant or could not run.
    pub findings: usize,
    /// Runs whose `max_bytes` refused writes (their peak is the cap, not the need).
    pub capped: usize,
    /// Each figure's distribution, by name (see [`METRICS`]).
    pub figures: std::collections::BTreeMap<&'static str, Percentiles>,
    /// The smallest `max_bytes` that the target share of runs at most would have
    /// overflowed.
    pub max_bytes_for_target: Option<u64>,
}

/// The report's JSON.
#[derive(Debug, Clone, Serialize)]
pub struct SweepSummary {
    /// The sweep's identity.
    pub sweep: crate::sweep::SweepId,
    /// The overflow target (a share of runs, 0.01 for 1%).
    pub target_overflow: f64,
    /// Per variant.
    pub variants: Vec<VariantSummary>,
    /// Every finding: (variant, seed, what, replay command).
    pub findings: Vec<Finding>,
}

/// A run that failed an invariant or could not run.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Its variant.
    pub variant: String,
    /// Its seed.
    pub seed: u64,
    /// What went wrong.
    pub what: String,
    /// The command that replays it alone.
    pub replay: String,
}

/// Writes the report of the merged `results` into `dir`, charting `metric` against
/// the first swept key; returns its summary.
pub fn write(
    dir: &Path,
    results: &[RunResult],
    target_overflow: f64,
    metric: &str,
) -> anyhow::Result<SweepSummary> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let summary = summarize(results, target_overflow);
    let json = serde_json::to_string_pretty(&summary)? + "\n";
    std::fs::write(dir.join("sweep.json"), json).context("cannot write sweep.json")?;
    std::fs::write(dir.join("runs.csv"), runs_csv(results)).context("cannot write runs.csv")?;
    let mut charts = Vec::new();
    charts.extend(overflow_chart(dir, &summary, results)?);
    charts.extend(metric_chart(dir, &summary, metric)?);
    std::fs::write(dir.join("sweep.md"), markdown(&summary, &charts))
        .context("cannot write sweep.md")?;
    Ok(summary)
}

/// The summary of `results` (merged, in the sweep's order).
pub fn summarize(results: &[RunResult], target_overflow: f64) -> SweepSummary {
    let sweep = results[0].sweep.clone();
    let variants = (0..sweep.variants.len())
        .map(|v| {
            let runs: Vec<&RunResult> = results.iter().filter(|r| r.variant == v).collect();
            variant_summary(&sweep.variants[v], &runs, target_overflow)
        })
        .collect();
    let findings = results
        .iter()
        .filter_map(|r| {
            let what = match &r.outcome {
                Outcome::Passed => return None,
                Outcome::Failed { invariants } => invariants.join("; "),
                Outcome::Error { message } => message.clone(),
            };
            Some(Finding {
                variant: sweep.variants[r.variant].clone(),
                seed: r.seed,
                what,
                replay: r.replay.clone(),
            })
        })
        .collect();
    SweepSummary {
        sweep,
        target_overflow,
        variants,
        findings,
    }
}

fn variant_summary(label: &str, runs: &[&RunResult], target: f64) -> VariantSummary {
    let ran: Vec<(u64, &Figures)> = runs
        .iter()
        .filter_map(|r| r.figures.as_ref().map(|f| (r.seed, f)))
        .collect();
    let figures = METRICS
        .iter()
        .filter_map(|&m| percentiles(&ran, m).map(|p| (m, p)))
        .collect();
    let mut peaks: Vec<u64> = ran.iter().map(|(_, f)| f.peak_bytes).collect();
    peaks.sort_unstable();
    VariantSummary {
        variant: label.to_string(),
        runs: ran.len(),
        findings: runs.iter().filter(|r| r.is_finding()).count(),
        capped: ran.iter().filter(|(_, f)| f.rejected > 0).count(),
        figures,
        max_bytes_for_target: quantile(&peaks, 1.0 - target),
    }
}

/// Nearest-rank quantile `q` (0 < q <= 1) of sorted `values`.
fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

fn percentiles(ran: &[(u64, &Figures)], metric: &str) -> Option<Percentiles> {
    let mut values: Vec<(f64, u64)> = ran
        .iter()
        .filter_map(|(seed, f)| metric_value(f, metric).map(|v| (v, *seed)))
        .collect();
    values.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let sorted: Vec<f64> = values.iter().map(|(v, _)| *v).collect();
    let max = *sorted.last()?;
    let max_seed = values.iter().find(|(v, _)| *v == max)?.1;
    Some(Percentiles {
        p50: quantile(&sorted, 0.5)?,
        p90: quantile(&sorted, 0.9)?,
        p99: quantile(&sorted, 0.99)?,
        max,
        max_seed,
    })
}

/// The chance that a spool of `size` bytes overflows: the share of runs whose peak
/// was above it.
pub fn overflow_chance(sorted_peaks: &[u64], size: u64) -> f64 {
    if sorted_peaks.is_empty() {
        return 0.0;
    }
    let above = sorted_peaks.len() - sorted_peaks.partition_point(|&p| p <= size);
    above as f64 / sorted_peaks.len() as f64
}

fn runs_csv(results: &[RunResult]) -> String {
    let mut csv = String::from(
        "variant,seed,outcome,writes,rejected,lost,peak_files,peak_bytes,peak_oldest_age_seconds,drain_seconds,max_bytes\n",
    );
    for r in results {
        let outcome = match r.outcome {
            Outcome::Passed => "passed",
            Outcome::Failed { .. } => "failed",
            Outcome::Error { .. } => "error",
        };
        let _ = write!(
            csv,
            "\"{}\",{},{outcome}",
            r.sweep.variants[r.variant], r.seed
        );
        match &r.figures {
            Some(f) => {
                let drain = f
                    .drain_seconds
                    .map_or("never".to_string(), |d| d.to_string());
                let _ = writeln!(
                    csv,
                    ",{},{},{},{},{},{},{drain},{}",
                    f.writes,
                    f.rejected,
                    f.lost,
                    f.peak_files,
                    f.peak_bytes,
                    f.peak_oldest_age_seconds,
                    f.max_bytes
                );
            }
            None => csv.push_str(",,,,,,,,\n"),
        }
    }
    csv
}

fn overflow_chart(
    dir: &Path,
    summary: &SweepSummary,
    results: &[RunResult],
) -> anyhow::Result<Option<(String, String)>> {
    let mut lines = Vec::new();
    for (v, variant) in summary.variants.iter().enumerate() {
        let mut peaks: Vec<u64> = (results.iter())
            .filter(|r| r.variant == v)
            .filter_map(|r| r.figures.map(|f| f.peak_bytes))
            .collect();
        peaks.sort_unstable();
        peaks.dedup();
        let mut all: Vec<u64> = (results.iter())
            .filter(|r| r.variant == v)
            .filter_map(|r| r.figures.map(|f| f.peak_bytes))
            .collect();
        all.sort_unstable();
        let points: Vec<(f64, f64)> = std::iter::once(0)
            .chain(peaks)
            .map(|size| (size as f64, 100.0 * overflow_chance(&all, size)))
            .collect();
        lines.push((variant.variant.clone(), points));
    }
    if lines.iter().all(|(_, p)| p.len() < 2) {
        return Ok(None);
    }
    let title = format!(
        "Chance of overflow against disk size ({})",
        summary.sweep.scenario
    );
    let chart = super::charts::SweepChart {
        file: "overflow.png",
        title: &title,
        x_label: "spool max_bytes (bytes)",
        y_label: "runs that would overflow (%)",
        categories: &[],
    };
    super::charts::render_sweep(dir, &chart, &lines).map(Some)
}

/// The median of `metric` against the first swept key (numbers on the axis, or the
/// values in order when they are not numbers), one line per value of the other keys.
fn metric_chart(
    dir: &Path,
    summary: &SweepSummary,
    metric: &str,
) -> anyhow::Result<Option<(String, String)>> {
    let settings: Vec<Vec<(&str, &str)>> = (summary.variants.iter())
        .map(|v| {
            v.variant
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .collect()
        })
        .collect();
    let Some(key) = settings.first().and_then(|s| s.first()).map(|(k, _)| *k) else {
        return Ok(None);
    };
    let mut categories: Vec<String> = Vec::new();
    for s in &settings {
        let value = s[0].1.to_string();
        if !categories.contains(&value) {
            categories.push(value);
        }
    }
    let numeric = categories.iter().all(|c| c.parse::<f64>().is_ok());
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (s, v) in settings.iter().zip(&summary.variants) {
        let Some(p) = v.figures.get(metric).filter(|p| p.p50.is_finite()) else {
            continue;
        };
        let x = match numeric {
            true => s[0].1.parse().unwrap_or(0.0),
            false => categories.iter().position(|c| c == s[0].1).unwrap_or(0) as f64,
        };
        let rest: Vec<String> = s[1..].iter().map(|(k, v)| format!("{k}={v}")).collect();
        let name = if rest.is_empty() {
            format!("{metric} (median)")
        } else {
            rest.join(",")
        };
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, points)) => points.push((x, p.p50)),
            None => lines.push((name, vec![(x, p.p50)])),
        }
    }
    if lines.iter().all(|(_, p)| p.len() < 2) {
        return Ok(None);
    }
    let title = format!("{metric} (median over seeds) by {key}");
    let chart = super::charts::SweepChart {
        file: "sweep.png",
        title: &title,
        x_label: key,
        y_label: metric,
        categories: if numeric { &[] } else { &categories },
    };
    super::charts::render_sweep(dir, &chart, &lines).map(Some)
}

fn markdown(summary: &SweepSummary, charts: &[(String, String)]) -> String {
    let id = &summary.sweep;
    let mut md = format!(
        "# Sweep of {}\n\n{} variant(s) x seeds {}..={}: {} runs. Scenario hash {}; {}.\n\n",
        id.scenario,
        id.variants.len(),
        id.seeds[0],
        id.seeds[1],
        id.runs(),
        id.scenario_hash,
        id.build
    );
    md.push_str("| variant | runs | findings | drain (p50) | peak bytes (p50) | oldest age (p50) | store requests (p50) | shed (p50) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for v in &summary.variants {
        let p50 = |name: &str| {
            v.figures
                .get(name)
                .map_or("-".to_string(), |p| show_value(name, p.p50))
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            v.variant,
            v.runs,
            v.findings,
            p50("drain_seconds"),
            p50("peak_bytes"),
            p50("peak_oldest_age_seconds"),
            p50("store_requests"),
            p50("store_shed")
        );
    }
    md.push_str("\n## Findings\n\n");
    if summary.findings.is_empty() {
        md.push_str("None: every run held every invariant.\n\n");
    }
    for f in &summary.findings {
        let _ = writeln!(
            md,
            "- {} seed {}: {}. Replay: `{}`",
            f.variant, f.seed, f.what, f.replay
        );
    }
    for v in &summary.variants {
        let _ = writeln!(
            md,
            "\n## {}\n\n{} runs, {} findings, {} refused writes at their cap.\n",
            v.variant, v.runs, v.findings, v.capped
        );
        md.push_str(
            "| figure | p50 | p90 | p99 | max | seed of max |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for (name, p) in &v.figures {
            let show = |x: f64| show_value(name, x);
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} | {} | {} |",
                show(p.p50),
                show(p.p90),
                show(p.p99),
                show(p.max),
                p.max_seed
            );
        }
        match (v.max_bytes_for_target, v.capped) {
            (Some(bytes), 0) => {
                let _ = writeln!(
                    md,
                    "\nA spool of {} ({bytes} bytes) overflows in at most {}% of these runs.",
                    spool::format::bytes(bytes),
                    summary.target_overflow * 100.0
                );
            }
            (_, capped) if capped > 0 => {
                let _ = writeln!(
                    md,
                    "\n{capped} runs refused writes at the spool's caps: their peak is the cap, \
                     not what the outage needed. To size a spool, sweep with caps above any \
                     peak (`--set spool.max_bytes=... --set spool.max_files=...`)."
                );
            }
            _ => {}
        }
    }
    for (file, title) in charts {
        let _ = writeln!(md, "\n![{title}]({file})");
    }
    md
}

fn show_value(metric: &str, x: f64) -> String {
    match metric {
        _ if x.is_infinite() => "never".to_string(),
        "peak_bytes" => spool::format::bytes(x as u64),
        "peak_oldest_age_seconds" | "drain_seconds" => format!("{x:.0} s"),
        _ => format!("{x:.0}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles_and_the_overflow_chance() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 1.0), Some(100));
        assert_eq!(quantile::<u64>(&[], 0.5), None);
        assert_eq!(overflow_chance(&v, 99), 0.01);
        assert_eq!(overflow_chance(&v, 100), 0.0);
        assert_eq!(overflow_chance(&v, 0), 1.0);
    }
}
