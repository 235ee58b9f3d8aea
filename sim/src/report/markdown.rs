//! `report.md`: the run for people, with the charts inline. One method a section,
//! in the order they appear.

use std::fmt::Write as _;
use std::time::Duration;

use spool::format;

use crate::checker::Verdict;
use crate::report::series::Series;
use crate::report::summary::Report;
use crate::world::RunOutput;

/// `report.md` of a run. `charts` are the chart files (name, title).
pub(crate) fn markdown(
    run: &RunOutput,
    verdict: &Verdict,
    series: &Series,
    report: &Report,
    charts: &[(String, String)],
) -> String {
    let page = Page {
        run,
        verdict,
        series,
        report,
    };
    let mut md = page.heading();
    let mut section = |title: &str, body: String| {
        let _ = write!(md, "## {title}\n\n{body}");
    };
    section("Summary", page.summary());
    section("Invariants", page.invariants());
    section("The spool", page.spool());
    section("Capacity", page.capacity());
    section("Alerts", page.alerts());
    section("Store", page.store());
    section("Disk", page.disk());
    section("Timeline", page.timeline());
    if !charts.is_empty() {
        section("Charts", Page::charts(charts));
    }
    section("Reproduce", page.reproduce());
    md
}

/// What the page is written from.
struct Page<'a> {
    run: &'a RunOutput,
    verdict: &'a Verdict,
    series: &'a Series,
    report: &'a Report,
}

impl Page<'_> {
    /// The scenario's wall-clock time at offset `d`.
    fn at(&self, d: Duration) -> String {
        format::rfc3339_seconds(self.run.scenario.wall_ms(d))
    }

    /// Title, the run's settings, and the scenario file's description.
    fn heading(&self) -> String {
        let scenario = &self.run.scenario;
        let verdict_word = if self.report.passed {
            "passed"
        } else {
            "FAILED"
        };
        let mut md = format!("# `{}`: {verdict_word}\n\n", scenario.name);
        let _ = writeln!(
            md,
            "Seed {} · {} to {} ({}) · {} host(s){} × {} writes/s · tick {} · sample {}\n",
            scenario.seed,
            self.at(Duration::ZERO),
            self.at(scenario.duration),
            format::duration(scenario.duration),
            scenario.workload.hosts,
            scenario
                .relay_host()
                .map(|h| format!(" through a relay (host {h})"))
                .unwrap_or_default(),
            scenario.workload.rate,
            format::duration(scenario.tick),
            format::duration(scenario.sample),
        );
        let about = description(&scenario.source);
        if !about.is_empty() {
            for line in about.lines() {
                let _ = writeln!(md, "> {line}");
            }
            md.push('\n');
        }
        md
    }

    /// Where every write ended up.
    fn summary(&self) -> String {
        let t = &self.verdict.tally;
        let c = format::count;
        format!(
            "| writes | stored | spooled | refused (spool full) | failed | unknown (crash) | in bucket | lost | duplicates avoided (412) | dead-lettered | quarantined | still spooled |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n\
             | {} | {} | {} | {} | {} | {} ({} landed) | {} | **{}** | {} | {} | {} | {} |\n\n",
            c(t.told.writes),
            c(t.told.stored),
            c(t.told.spooled),
            c(t.told.rejected),
            c(t.told.failed),
            c(t.told.unknown),
            c(t.unknown_landed),
            c(t.in_bucket),
            c(t.lost),
            c(t.duplicates_avoided),
            c(t.dead_lettered),
            c(t.quarantined),
            c(t.pending)
        ) + &self.relay_reads()
    }

    /// What reads and lists through the relay got, when the scenario sends any.
    fn relay_reads(&self) -> String {
        let Some(r) = &self.verdict.relay_reads else {
            return String::new();
        };
        let c = format::count;
        format!(
            "Through the relay:\n\n\
             | reads | from its spool | 404 | failed (the store failing, the relay down) | lists (every page) | lists failed | names listed | deletes | deleted | deletes failed |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n\
             | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n\n",
            c(r.reads),
            c(r.from_spool),
            c(r.not_found),
            c(r.failed),
            c(r.lists),
            c(r.lists_failed),
            c(r.names_listed),
            c(r.deletes),
            c(r.deleted),
            c(r.deletes_failed)
        )
    }

    fn invariants(&self) -> String {
        let mut md = String::from("| invariant | result | detail |\n|---|---|---|\n");
        for (inv, json) in self.verdict.invariants.iter().zip(&self.report.invariants) {
            let mark = match json.status.as_str() {
                "held" => "held",
                "explained" => "held (explained)",
                _ => "**FAILED**",
            };
            let _ = writeln!(md, "| {} | {mark} | {} |", inv.statement, json.detail);
        }
        md + "\n"
    }

    /// Peaks, and the drain after each fault window.
    fn spool(&self) -> String {
        let (files, bytes, age) = self.series.peaks();
        let mut md = format!(
            "- Peak depth: **{} files** at {}; peak size: **{}** at {}; oldest entry: **{}** at {}.\n",
            format::count(files.value as u64),
            self.at(files.at),
            format::bytes(bytes.value as u64),
            self.at(bytes.at),
            format::duration(Duration::from_secs_f64(age.value)),
            self.at(age.at),
        );
        for d in &self.series.drains {
            let took = match d.empty {
                Some(e) => format!(
                    "empty at {} (**{}** after recovery)",
                    self.at(e),
                    format::duration(e - d.recovered)
                ),
                None => "not empty by the end".to_string(),
            };
            let _ = writeln!(
                md,
                "- After \"{}\" ended at {}: backlog {} entries; {took}; drained at {:.1} entries/s.",
                d.window,
                self.at(d.recovered),
                format::count(d.backlog),
                d.drain_rate
            );
        }
        md + "\n"
    }

    /// What each spool needs, against what it was given.
    fn capacity(&self) -> String {
        let s = &self.report.capacity;
        format!(
            "The largest single spool held {} files and {}. With {:.0}% headroom, give each instance **max_files = {}** and **max_bytes = {}** (disk), against {} and {} configured here.\n\n",
            format::count(s.peak_files_per_host),
            format::bytes(s.peak_bytes_per_host),
            s.headroom * 100.0,
            format::count(s.files_needed),
            format::bytes(s.bytes_needed),
            format::count(s.configured_max_files),
            format::bytes(s.configured_max_bytes),
        )
    }

    fn alerts(&self) -> String {
        let mut md = String::from(
            "When the shipped rules (`spool/alerts/spool.rules.yml`) would have fired, evaluated on the sampled gauges:\n\n",
        );
        if self.series.alerts.is_empty() {
            return md + "None fired.\n\n";
        }
        md.push_str("| alert | host | fired | resolved |\n|---|---:|---|---|\n");
        for a in &self.series.alerts {
            let resolved = a
                .resolved
                .map(|r| self.at(r))
                .unwrap_or_else(|| "still firing at the end".into());
            let fired = self.at(a.fired);
            let _ = writeln!(md, "| {} | {} | {fired} | {resolved} |", a.name, a.host);
        }
        md + "\n"
    }

    /// The store's side: requests, 412s, shedding, injected faults.
    fn store(&self) -> String {
        let fake = &self.run.fake;
        let mut md = format!(
            "{} requests; {} answered 412 (already exists); {} shed by the capacity model.\n\n",
            format::count(fake.requests),
            format::count(fake.precondition_failures),
            format::count(fake.shed)
        );
        if !fake.by_fault.is_empty() {
            md.push_str("| injected fault | requests |\n|---|---:|\n");
            for (kind, n) in &fake.by_fault {
                let _ = writeln!(md, "| {kind} | {} |", format::count(*n));
            }
            md.push('\n');
        }
        md
    }

    /// The disks' operations, faults and what power losses left behind.
    fn disk(&self) -> String {
        let disk = &self.report.disk;
        let c = &disk.crash_states;
        let mut md = format!(
            "{} disk operations; {} files damaged by the disk.\n\n",
            format::count(disk.operations),
            format::count(disk.damaged_files)
        );
        if !disk.faults.is_empty() {
            md.push_str("| injected fault | operations |\n|---|---:|\n");
            for (kind, n) in &disk.faults {
                let _ = writeln!(md, "| {kind} | {} |", format::count(*n));
            }
            md.push('\n');
        }
        if c.power_losses > 0 {
            md.push_str("| after a power loss | count |\n|---|---:|\n");
            for (what, n) in [
                ("power losses", c.power_losses),
                ("unsynced namespace operations kept", c.unsynced_ops_kept),
                ("unsynced namespace operations lost", c.unsynced_ops_lost),
                (
                    "renames kept without a directory sync",
                    c.renames_kept_unsynced,
                ),
                ("removal batches split", c.removal_batches_split),
                ("files whose unsynced data was lost", c.unsynced_data_lost),
                ("files whose unsynced data was kept", c.unsynced_data_kept),
                ("files back at length zero", c.zero_length_files),
                ("files back with zeroed blocks", c.zero_filled_files),
                ("directories lost", c.directories_lost),
            ] {
                let _ = writeln!(md, "| {what} | {} |", format::count(n));
            }
            md.push('\n');
        }
        md
    }

    /// The fault windows, then the crashes, restarts and deploys.
    fn timeline(&self) -> String {
        let mut md = String::new();
        for (i, w) in self.run.scenario.faults.windows.iter().enumerate() {
            let name = w.name.clone().unwrap_or_else(|| format!("fault[{i}]"));
            let until = w.until.map(|u| self.at(u));
            let _ = writeln!(
                md,
                "- {} to {}: {name} (share {}, {})",
                self.at(w.from),
                until.as_deref().unwrap_or("the end"),
                w.share,
                mix_text(&w.mix)
            );
        }
        let relay = self.run.scenario.relay_host();
        for e in &self.run.recorder.timeline {
            let who = match relay {
                Some(relay) if relay == e.host => format!("the relay (host {relay})"),
                _ => format!("host {}", e.host),
            };
            let _ = writeln!(
                md,
                "- {}: {who} {} (down {}; {} writes in flight became unknown)",
                self.at(e.at),
                e.kind.as_str(),
                format::duration(e.down_for),
                format::count(e.unknown)
            );
        }
        md + "\n"
    }

    fn charts(charts: &[(String, String)]) -> String {
        charts
            .iter()
            .map(|(file, title)| format!("![{title}]({file})\n\n"))
            .collect()
    }

    fn reproduce(&self) -> String {
        let scenario = &self.run.scenario;
        format!(
            "```sh\ncargo run --release -p sim -- scenarios/{}.toml --seed {}\n```\n",
            scenario.name, scenario.seed
        )
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
