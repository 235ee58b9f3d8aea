//! `report.md`: the run for people, with the charts inline.

use std::fmt::Write as _;
use std::time::Duration;

use crate::checker::Verdict;
use crate::report::series::Series;
use crate::report::summary::{Report, count, human_bytes, human_duration, rfc3339};
use crate::world::RunOutput;

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

pub(crate) fn markdown(
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
