//! `report.md`: the run for people, with the charts inline. One section a method,
//! in the order they appear.

use std::fmt::Write as _;
use std::time::Duration;

use crate::checker::Verdict;
use crate::report::series::Series;
use crate::report::summary::{Report, count, human_bytes, human_duration, rfc3339};
use crate::world::RunOutput;

/// `report.md` of a run. `charts` are the chart files (name, title).
pub(crate) fn markdown(
    run: &RunOutput,
    verdict: &Verdict,
    series: &Series,
    report: &Report,
    charts: &[(String, String)],
) -> String {
    let mut page = Page {
        run,
        verdict,
        series,
        report,
        md: String::new(),
    };
    page.heading();
    page.summary();
    page.invariants();
    page.spool();
    page.capacity();
    page.alerts();
    page.store();
    page.timeline();
    page.charts(charts);
    page.reproduce();
    page.md
}

/// The page being written, and what it is written from.
struct Page<'a> {
    run: &'a RunOutput,
    verdict: &'a Verdict,
    series: &'a Series,
    report: &'a Report,
    md: String,
}

impl Page<'_> {
    /// The scenario's wall-clock time at offset `d`.
    fn at(&self, d: Duration) -> String {
        rfc3339(self.run.scenario.wall(d))
    }

    /// Title, the run's settings, and the scenario file's description.
    fn heading(&mut self) {
        let scenario = &self.run.scenario;
        let verdict_word = if self.report.passed {
            "passed"
        } else {
            "FAILED"
        };
        let (from, to) = (self.at(Duration::ZERO), self.at(scenario.duration));
        let md = &mut self.md;
        let _ = writeln!(md, "# `{}`: {verdict_word}\n", scenario.name);
        let _ = writeln!(
            md,
            "Seed {} · {from} to {to} ({}) · {} host(s) × {} writes/s · tick {} · sample {}\n",
            scenario.seed,
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
    }

    /// Where every write ended up.
    fn summary(&mut self) {
        let t = &self.verdict.tally;
        let md = &mut self.md;
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
    }

    fn invariants(&mut self) {
        let md = &mut self.md;
        md.push_str("## Invariants\n\n| invariant | result | detail |\n|---|---|---|\n");
        for (inv, json) in self.verdict.invariants.iter().zip(&self.report.invariants) {
            let mark = match json.status.as_str() {
                "held" => "held",
                "explained" => "held (explained)",
                _ => "**FAILED**",
            };
            let _ = writeln!(md, "| {} | {mark} | {} |", inv.statement, json.detail);
        }
        md.push('\n');
    }

    /// Peaks, and the drain after each fault window.
    fn spool(&mut self) {
        let (files, bytes, age) = self.series.peaks();
        let peaks = format!(
            "- Peak depth: **{} files** at {}; peak size: **{}** at {}; oldest entry: **{}** at {}.",
            count(files.value as u64),
            self.at(files.at),
            human_bytes(bytes.value as u64),
            self.at(bytes.at),
            human_duration(Duration::from_secs_f64(age.value)),
            self.at(age.at),
        );
        let drains: Vec<String> = self
            .series
            .drains
            .iter()
            .map(|d| {
                let took = match d.empty {
                    Some(e) => format!(
                        "empty at {} (**{}** after recovery)",
                        self.at(e),
                        human_duration(e - d.recovered)
                    ),
                    None => "not empty by the end".to_string(),
                };
                format!(
                    "- After \"{}\" ended at {}: backlog {} entries; {took}; drained at {:.1} entries/s.",
                    d.window,
                    self.at(d.recovered),
                    count(d.backlog),
                    d.drain_rate
                )
            })
            .collect();
        let md = &mut self.md;
        md.push_str("## The spool\n\n");
        let _ = writeln!(md, "{peaks}");
        for drain in drains {
            let _ = writeln!(md, "{drain}");
        }
        md.push('\n');
    }

    /// What each spool needs, against what it was given.
    fn capacity(&mut self) {
        let c = &self.report.capacity;
        let md = &mut self.md;
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
    }

    fn alerts(&mut self) {
        let rows: Vec<String> = self
            .series
            .alerts
            .iter()
            .map(|a| {
                let resolved = a
                    .resolved
                    .map(|r| self.at(r))
                    .unwrap_or_else(|| "still firing at the end".into());
                format!(
                    "| {} | {} | {} | {resolved} |",
                    a.name,
                    a.host,
                    self.at(a.fired)
                )
            })
            .collect();
        let md = &mut self.md;
        md.push_str("## Alerts\n\nWhen the shipped rules (`spool/alerts/spool.rules.yml`) would have fired, evaluated on the sampled gauges:\n\n");
        if rows.is_empty() {
            md.push_str("None fired.\n\n");
            return;
        }
        md.push_str("| alert | host | fired | resolved |\n|---|---:|---|---|\n");
        for row in rows {
            let _ = writeln!(md, "{row}");
        }
        md.push('\n');
    }

    /// The store's side: requests, 412s, shedding, injected faults.
    fn store(&mut self) {
        let fake = &self.run.fake;
        let md = &mut self.md;
        md.push_str("## Store\n\n");
        let _ = writeln!(
            md,
            "{} requests; {} answered 412 (already exists); {} shed by the capacity model.\n",
            count(fake.requests),
            count(fake.precondition_failures),
            count(fake.shed)
        );
        if !fake.by_fault.is_empty() {
            md.push_str("| injected fault | requests |\n|---|---:|\n");
            for (kind, n) in &fake.by_fault {
                let _ = writeln!(md, "| {kind} | {} |", count(*n));
            }
            md.push('\n');
        }
    }

    /// The fault windows, then the crashes, restarts and deploys.
    fn timeline(&mut self) {
        let mut lines = Vec::new();
        for (i, w) in self.run.scenario.faults.windows.iter().enumerate() {
            let name = w.name.clone().unwrap_or_else(|| format!("fault[{i}]"));
            let until = w
                .until
                .map(|u| self.at(u))
                .unwrap_or_else(|| "the end".into());
            lines.push(format!(
                "- {} to {}: {name} (share {}, {})",
                self.at(w.from),
                until,
                w.share,
                mix_text(&w.mix)
            ));
        }
        for e in &self.run.recorder.timeline {
            lines.push(format!(
                "- {}: host {} {} (down {}; {} writes in flight became unknown)",
                self.at(e.at),
                e.host,
                e.kind.as_str(),
                human_duration(e.down_for),
                count(e.unknown)
            ));
        }
        let md = &mut self.md;
        md.push_str("## Timeline\n\n");
        for line in lines {
            let _ = writeln!(md, "{line}");
        }
        md.push('\n');
    }

    fn charts(&mut self, charts: &[(String, String)]) {
        if charts.is_empty() {
            return;
        }
        self.md.push_str("## Charts\n\n");
        for (file, title) in charts {
            let _ = writeln!(self.md, "![{title}]({file})\n");
        }
    }

    fn reproduce(&mut self) {
        let scenario = &self.run.scenario;
        self.md.push_str("## Reproduce\n\n");
        let _ = writeln!(
            self.md,
            "```sh\ncargo run --release -p sim -- scenarios/{}.toml --seed {}\n```",
            scenario.name, scenario.seed
        );
    }
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

fn mix_text(mix: &std::collections::BTreeMap<fake_gcs::Outcome, f64>) -> String {
    if mix.is_empty() {
        return "no errors".into();
    }
    mix.iter()
        .map(|(o, p)| format!("{} {:.0}%", o.as_str(), p * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}
