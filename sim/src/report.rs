//! The per-run report: `report.json` (machine-readable, stable top-level fields),
//! `report.md` (for people, with the charts inline), `timeseries.csv` (one row per
//! sample) and the PNG charts. Everything here is a function of the scenario and its
//! seed: the same run writes the same bytes. How fast the run went is written apart,
//! to `timing.json`, because it is not.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::Serialize;

use crate::checker::{Status, Verdict};
use crate::series::{Drain, Series};
use crate::world::RunOutput;

/// Headroom added to the peak when sizing a spool: 25%, for a longer outage than
/// the one simulated or a burst of larger objects.
pub const HEADROOM: f64 = 0.25;

/// `report.json`. Top-level fields are stable (a user's CI reads them); see README.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// The seed the run used.
    pub seed: u64,
    /// Simulated wall time at t = 0 (RFC 3339).
    pub start: String,
    /// Length of the run, in seconds.
    pub duration_seconds: f64,
    /// True when every invariant held or was explained.
    pub passed: bool,
    /// Writes issued by the producers.
    pub writes: u64,
    /// Callers told `Stored` (written directly).
    pub stored: u64,
    /// Callers told `Spooled`.
    pub spooled: u64,
    /// Callers told the spool was full (backpressure).
    pub rejected: u64,
    /// Callers told of another error (store refused for good, ...).
    pub failed: u64,
    /// Writes in flight when their process died.
    pub unknown: u64,
    /// Unknown writes that landed anyway.
    pub unknown_landed: u64,
    /// Objects in the bucket at the end.
    pub in_bucket: u64,
    /// Acknowledged writes that are nowhere (must be 0).
    pub lost: u64,
    /// Retries answered 412: an earlier try had landed (duplicates avoided).
    pub duplicates: u64,
    /// Acknowledged writes in dead-letter folders.
    pub dead_lettered: u64,
    /// Acknowledged writes in quarantine folders.
    pub quarantined: u64,
    /// Acknowledged writes still in a spool at the end.
    pub pending: u64,
    /// Most entries in all spools at once.
    pub peak_files: u64,
    /// Most bytes in all spools at once.
    pub peak_bytes: u64,
    /// Oldest entry's largest age, in seconds.
    pub peak_oldest_age_seconds: f64,
    /// When each peak was reached (seconds from t = 0).
    pub peak_at_seconds: PeakTimes,
    /// Seconds from the end of the fault window with the largest backlog to empty
    /// spools; null when they never emptied.
    pub drain_seconds: Option<f64>,
    /// The drain after every fault window.
    pub drains: Vec<DrainJson>,
    /// What a spool needs for this scenario.
    pub capacity: Capacity,
    /// When the shipped alert rules would have fired.
    pub alerts: Vec<AlertJson>,
    /// The store's side.
    pub store: StoreJson,
    /// Crashes, restarts and deploys.
    pub events: Vec<EventJson>,
    /// Every invariant with its result.
    pub invariants: Vec<InvariantJson>,
}

/// When the peaks were reached.
#[derive(Debug, Clone, Serialize)]
pub struct PeakTimes {
    /// `peak_files`.
    pub files: f64,
    /// `peak_bytes`.
    pub bytes: f64,
    /// `peak_oldest_age_seconds`.
    pub oldest_age: f64,
}

/// One drain.
#[derive(Debug, Clone, Serialize)]
pub struct DrainJson {
    /// The fault window.
    pub window: String,
    /// When it ended (seconds from t = 0).
    pub recovered_at_seconds: f64,
    /// Entries spooled then.
    pub backlog: u64,
    /// Seconds until the spools were empty; null when they never were.
    pub drain_seconds: Option<f64>,
    /// Entries removed per second while draining.
    pub drain_rate_per_second: f64,
}

/// Sizing figures.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    /// The most files one host's spool held.
    pub peak_files_per_host: u64,
    /// The most bytes one host's spool held.
    pub peak_bytes_per_host: u64,
    /// Headroom added (fraction).
    pub headroom: f64,
    /// `max_files` to configure: peak plus headroom.
    pub files_needed: u64,
    /// Disk (and `max_bytes`) to give each spool: peak plus headroom.
    pub bytes_needed: u64,
    /// The scenario's configured `max_files`.
    pub configured_max_files: u64,
    /// The scenario's configured `max_bytes`.
    pub configured_max_bytes: u64,
}

/// One alert window.
#[derive(Debug, Clone, Serialize)]
pub struct AlertJson {
    /// Rule name.
    pub name: String,
    /// Host index.
    pub host: u32,
    /// Fired at (seconds from t = 0).
    pub fired_at_seconds: f64,
    /// Resolved at; null if still firing at the end.
    pub resolved_at_seconds: Option<f64>,
}

/// The store's counters.
#[derive(Debug, Clone, Serialize)]
pub struct StoreJson {
    /// Requests received.
    pub requests: u64,
    /// Requests shed by the capacity model.
    pub shed: u64,
    /// 412 answers.
    pub precondition_failures: u64,
    /// Injected faults by kind.
    pub faults: std::collections::BTreeMap<String, u64>,
}

/// One event.
#[derive(Debug, Clone, Serialize)]
pub struct EventJson {
    /// `crash`, `restart` or `deploy`.
    pub kind: String,
    /// Host index.
    pub host: u32,
    /// When (seconds from t = 0).
    pub at_seconds: f64,
    /// How long the host was down.
    pub down_seconds: f64,
    /// Writes in flight that became unknown.
    pub unknown: u64,
}

/// One invariant.
#[derive(Debug, Clone, Serialize)]
pub struct InvariantJson {
    /// Stable name.
    pub name: String,
    /// Whether it held (true also when explained).
    pub held: bool,
    /// `held`, `explained` or `failed`.
    pub status: String,
    /// The explanation or failure detail.
    pub detail: String,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Builds `report.json`'s contents.
pub fn build(run: &RunOutput, verdict: &Verdict, series: &Series) -> Report {
    let t = &verdict.tally;
    let scenario = &run.scenario;
    let (files, bytes, age) = series.peaks();
    let (host_files, host_bytes) = series.per_host_peaks();
    let main_drain = series.drains.iter().max_by_key(|d| d.backlog);
    Report {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        start: rfc3339(scenario.start),
        duration_seconds: secs(scenario.duration),
        passed: verdict.passed(),
        writes: t.writes,
        stored: t.stored,
        spooled: t.spooled,
        rejected: t.rejected,
        failed: t.failed,
        unknown: t.unknown,
        unknown_landed: t.unknown_landed,
        in_bucket: t.in_bucket,
        lost: t.lost,
        duplicates: t.duplicates_avoided,
        dead_lettered: t.dead_lettered,
        quarantined: t.quarantined,
        pending: t.pending,
        peak_files: files.value as u64,
        peak_bytes: bytes.value as u64,
        peak_oldest_age_seconds: age.value,
        peak_at_seconds: PeakTimes {
            files: secs(files.at),
            bytes: secs(bytes.at),
            oldest_age: secs(age.at),
        },
        drain_seconds: main_drain.and_then(|d| d.empty.map(|e| secs(e - d.recovered))),
        drains: series.drains.iter().map(drain_json).collect(),
        capacity: Capacity {
            peak_files_per_host: host_files,
            peak_bytes_per_host: host_bytes,
            headroom: HEADROOM,
            files_needed: (host_files as f64 * (1.0 + HEADROOM)).ceil() as u64,
            bytes_needed: (host_bytes as f64 * (1.0 + HEADROOM)).ceil() as u64,
            configured_max_files: scenario.spool.max_files,
            configured_max_bytes: scenario.spool.max_bytes,
        },
        alerts: series
            .alerts
            .iter()
            .map(|a| AlertJson {
                name: a.name.to_string(),
                host: a.host,
                fired_at_seconds: secs(a.fired),
                resolved_at_seconds: a.resolved.map(secs),
            })
            .collect(),
        store: StoreJson {
            requests: run.fake.requests,
            shed: run.fake.shed,
            precondition_failures: run.fake.precondition_failures,
            faults: run.fake.by_fault.clone(),
        },
        events: run
            .recorder
            .timeline
            .iter()
            .map(|e| EventJson {
                kind: e.kind.as_str().to_string(),
                host: e.host,
                at_seconds: secs(e.at),
                down_seconds: secs(e.down_for),
                unknown: e.unknown,
            })
            .collect(),
        invariants: verdict
            .invariants
            .iter()
            .map(|i| {
                let (status, detail) = match &i.status {
                    Status::Held => ("held", String::new()),
                    Status::Explained(d) => ("explained", d.clone()),
                    Status::Failed(d) => ("failed", d.clone()),
                };
                InvariantJson {
                    name: i.name.to_string(),
                    held: i.held(),
                    status: status.to_string(),
                    detail,
                }
            })
            .collect(),
    }
}

fn drain_json(d: &Drain) -> DrainJson {
    DrainJson {
        window: d.window.clone(),
        recovered_at_seconds: secs(d.recovered),
        backlog: d.backlog,
        drain_seconds: d.empty.map(|e| secs(e - d.recovered)),
        drain_rate_per_second: (d.drain_rate * 100.0).round() / 100.0,
    }
}

/// RFC 3339, seconds precision.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A count for people: `5,743,426`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte count for people: `1.4 GiB`.
pub fn human_bytes(n: u64) -> String {
    bytesize::ByteSize(n).display().iec().to_string()
}

/// A duration for people, to the second.
pub fn human_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{} ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Writes `report.json`, `report.md` and `timeseries.csv` into `dir`, and returns
/// the report. `charts` are the chart files already rendered there (name, title).
pub fn write(
    dir: &Path,
    run: &RunOutput,
    verdict: &Verdict,
    series: &Series,
    charts: &[(String, String)],
) -> anyhow::Result<Report> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let report = build(run, verdict, series);
    let json = serde_json::to_string_pretty(&report)? + "\n";
    write_file(&dir.join("report.json"), &json)?;
    write_file(
        &dir.join("report.md"),
        &markdown(run, verdict, series, &report, charts),
    )?;
    write_file(&dir.join("timeseries.csv"), &csv(run, series))?;
    Ok(report)
}

fn write_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    std::fs::write(path, contents).with_context(|| format!("cannot write {}", path.display()))
}

/// `timeseries.csv`: one row per sample interval.
pub fn csv(run: &RunOutput, series: &Series) -> String {
    let mut out = String::from(
        "t_seconds,time,spool_files,spool_bytes,oldest_age_seconds,in_bucket,writes,stored,spooled,rejected,failed,unknown,drained,store_requests",
    );
    for kind in &series.error_kinds {
        let _ = write!(out, ",errors_{kind}");
    }
    out.push('\n');
    for r in &series.rows {
        let _ = write!(
            out,
            "{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{}",
            secs(r.t),
            rfc3339(run.scenario.wall(r.t)),
            r.files,
            r.bytes,
            r.oldest_age_seconds,
            r.in_bucket,
            r.writes,
            r.stored,
            r.spooled,
            r.rejected,
            r.failed,
            r.unknown,
            r.drained,
            r.store_requests
        );
        for kind in &series.error_kinds {
            let _ = write!(out, ",{}", r.store_errors.get(kind).copied().unwrap_or(0));
        }
        out.push('\n');
    }
    out
}

/// The scenario file's leading comment block, without the `#`s.
fn description(source: &str) -> String {
    source
        .lines()
        .take_while(|l| l.starts_with('#') || l.trim().is_empty())
        .map(|l| {
            l.trim_start_matches('#')
                .strip_prefix(' ')
                .unwrap_or(l.trim_start_matches('#'))
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

fn markdown(
    run: &RunOutput,
    verdict: &Verdict,
    series: &Series,
    report: &Report,
    charts: &[(String, String)],
) -> String {
    let scenario = &run.scenario;
    let at = |d: Duration| rfc3339(scenario.wall(d));
    let t = &verdict.tally;
    let mut md = String::new();
    let verdict_word = if report.passed { "passed" } else { "FAILED" };
    let _ = writeln!(md, "# `{}`: {verdict_word}\n", scenario.name);
    let _ = writeln!(
        md,
        "Seed {} · {} to {} ({}) · {} host(s) × {} writes/s · tick {} · sample {}\n",
        scenario.seed,
        at(Duration::ZERO),
        at(scenario.duration),
        human_duration(scenario.duration),
        scenario.workload.hosts,
        scenario.workload.rate,
        human_duration(scenario.tick),
        human_duration(scenario.sample),
    );
    let about = description(&scenario.source);
    if !about.is_empty() {
        for line in about.lines() {
            let _ = writeln!(md, "> {line}");
        }
        md.push('\n');
    }

    md.push_str("## Summary\n\n");
    md.push_str("| writes | stored | spooled | refused (spool full) | failed | unknown (crash) | in bucket | lost | duplicates avoided (412) | dead-lettered | quarantined | still spooled |\n");
    md.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} | {} ({} landed) | {} | **{}** | {} | {} | {} | {} |\n",
        count(t.writes),
        count(t.stored),
        count(t.spooled),
        count(t.rejected),
        count(t.failed),
        count(t.unknown),
        count(t.unknown_landed),
        count(t.in_bucket),
        count(t.lost),
        count(t.duplicates_avoided),
        count(t.dead_lettered),
        count(t.quarantined),
        count(t.pending)
    );

    md.push_str("## Invariants\n\n| invariant | result | detail |\n|---|---|---|\n");
    for (inv, json) in verdict.invariants.iter().zip(&report.invariants) {
        let mark = match json.status.as_str() {
            "held" => "held",
            "explained" => "held (explained)",
            _ => "**FAILED**",
        };
        let _ = writeln!(md, "| {} | {mark} | {} |", inv.statement, json.detail);
    }
    md.push('\n');

    let (files, bytes, age) = series.peaks();
    md.push_str("## The spool\n\n");
    let _ = writeln!(
        md,
        "- Peak depth: **{} files** at {}; peak size: **{}** at {}; oldest entry: **{}** at {}.",
        count(files.value as u64),
        at(files.at),
        human_bytes(bytes.value as u64),
        at(bytes.at),
        human_duration(Duration::from_secs_f64(age.value)),
        at(age.at),
    );
    for d in &series.drains {
        let took = match d.empty {
            Some(e) => format!(
                "empty at {} (**{}** after recovery)",
                at(e),
                human_duration(e - d.recovered)
            ),
            None => "not empty by the end".to_string(),
        };
        let _ = writeln!(
            md,
            "- After \"{}\" ended at {}: backlog {} entries; {took}; drained at {:.1} entries/s.",
            d.window,
            at(d.recovered),
            count(d.backlog),
            d.drain_rate
        );
    }
    md.push('\n');

    let c = &report.capacity;
    md.push_str("## Capacity\n\n");
    let _ = writeln!(
        md,
        "The largest single spool held {} files and {}. With {:.0}% headroom, give each instance **max_files = {}** and **max_bytes = {}** (disk), against {} and {} configured here.\n",
        count(c.peak_files_per_host),
        human_bytes(c.peak_bytes_per_host),
        c.headroom * 100.0,
        count(c.files_needed),
        human_bytes(c.bytes_needed),
        count(c.configured_max_files),
        human_bytes(c.configured_max_bytes),
    );

    md.push_str("## Alerts\n\nWhen the shipped rules (`spool/alerts/spool.rules.yml`) would have fired, evaluated on the sampled gauges:\n\n");
    if series.alerts.is_empty() {
        md.push_str("None fired.\n\n");
    } else {
        md.push_str("| alert | host | fired | resolved |\n|---|---:|---|---|\n");
        for a in &series.alerts {
            let resolved = a
                .resolved
                .map(at)
                .unwrap_or_else(|| "still firing at the end".into());
            let _ = writeln!(
                md,
                "| {} | {} | {} | {resolved} |",
                a.name,
                a.host,
                at(a.fired)
            );
        }
        md.push('\n');
    }

    md.push_str("## Store\n\n");
    let _ = writeln!(
        md,
        "{} requests; {} answered 412 (already exists); {} shed by the capacity model.\n",
        count(run.fake.requests),
        count(run.fake.precondition_failures),
        count(run.fake.shed)
    );
    if !run.fake.by_fault.is_empty() {
        md.push_str("| injected fault | requests |\n|---|---:|\n");
        for (kind, n) in &run.fake.by_fault {
            let _ = writeln!(md, "| {kind} | {} |", count(*n));
        }
        md.push('\n');
    }

    md.push_str("## Timeline\n\n");
    for (i, w) in scenario.faults.windows.iter().enumerate() {
        let name = w.name.clone().unwrap_or_else(|| format!("fault[{i}]"));
        let until = w.until.map(at).unwrap_or_else(|| "the end".into());
        let _ = writeln!(
            md,
            "- {} to {}: {name} (share {}, {})",
            at(w.from),
            until,
            w.share,
            mix_text(&w.mix)
        );
    }
    for e in &run.recorder.timeline {
        let _ = writeln!(
            md,
            "- {}: host {} {} (down {}; {} writes in flight became unknown)",
            at(e.at),
            e.host,
            e.kind.as_str(),
            human_duration(e.down_for),
            count(e.unknown)
        );
    }
    md.push('\n');

    if !charts.is_empty() {
        md.push_str("## Charts\n\n");
        for (file, title) in charts {
            let _ = writeln!(md, "![{title}]({file})\n");
        }
    }

    md.push_str("## Reproduce\n\n");
    let _ = writeln!(
        md,
        "```sh\ncargo run --release -p sim -- scenarios/{}.toml --seed {}\n```",
        scenario.name, scenario.seed
    );
    md
}

fn mix_text(mix: &std::collections::BTreeMap<fake_gcs::Outcome, f64>) -> String {
    if mix.is_empty() {
        return "no errors".into();
    }
    mix.iter()
        .map(|(o, p)| format!("{} {:.0}%", o.as_str(), p * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(5_743_426), "5,743,426");
    }
}
