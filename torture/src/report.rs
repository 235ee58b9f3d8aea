//! The summary a run prints: rounds and events, writes by client, kind and answer,
//! lost writes (must be 0), unexpected objects, aborted uploads, `spool verify`,
//! the crash states crashfs produced, and every failure; PASS or FAIL.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::chaos::Counters;
use crate::check::Findings;
use crate::disk::Produced;
use crate::ledger::{Answer, Attempt};

/// What `spool verify --json` said about the relay's spool after the drain.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verify {
    pub entries: u64,
    /// Corrupt entries, quarantined and dead-lettered files: each a finding.
    pub problems: Vec<String>,
}

/// Everything the summary shows.
#[derive(Debug)]
pub struct Report<'a> {
    pub seed: u64,
    pub writers: String,
    pub counters: &'a Counters,
    pub mounts: u64,
    pub produced: Produced,
    pub attempts: &'a [Attempt],
    pub unreadable_lines: usize,
    /// Exceptions clients threw outside an upload's promise.
    pub uncaught: usize,
    pub objects: usize,
    pub findings: &'a Findings,
    pub verify: &'a Verify,
    /// Failures of the end: no drain, a final SIGTERM that failed, writers that
    /// had to be killed.
    pub end_failures: &'a [String],
    pub took: Duration,
}

/// Counts per (client, kind).
#[derive(Debug, Default, Clone, Copy)]
struct Row {
    ok: u64,
    error: u64,
    unfinished: u64,
    lost: u64,
}

impl Report<'_> {
    /// Whether the run passed: nothing lost, nothing unexpected, no failure.
    pub fn passed(&self) -> bool {
        self.findings.is_clean()
            && self.verify.problems.is_empty()
            && self.counters.failures.is_empty()
            && self.counters.fatal.is_none()
            && self.end_failures.is_empty()
    }

    /// The summary, as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.events(&mut out);
        self.writes(&mut out);
        self.checks(&mut out);
        self.crash_states(&mut out);
        self.failures(&mut out);
        let verdict = if self.passed() { "PASS" } else { "FAIL" };
        let _ = writeln!(out, "\nresult: {verdict} ({:.0?} in all)", self.took);
        out
    }

    fn events(&self, out: &mut String) {
        let c = self.counters;
        let mean = c
            .restart_total
            .checked_div(c.restarts.max(1) as u32)
            .unwrap_or_default();
        let _ = writeln!(out, "torture: seed {}, writers {}", self.seed, self.writers);
        let _ = writeln!(
            out,
            "rounds {} in {:.0?}: power losses {} (remounts {}, during a first boot {}), SIGKILLs \
             {}, deploys {}, outages {}",
            c.rounds,
            c.elapsed,
            c.power_losses,
            c.remounts,
            c.first_boots,
            c.kills,
            c.deploys,
            c.outages
        );
        let _ = writeln!(
            out,
            "relay restarts {}: mean {:.0?}, longest {:.0?} (signal to listening); of which the \
             relay's start mean {:.0?}, longest {:.0?}; crashfs's power loss mean {:.0?}, longest \
             {:.0?}",
            c.restarts,
            mean,
            c.restart_max,
            c.start_total
                .checked_div(c.restarts.max(1) as u32)
                .unwrap_or_default(),
            c.start_max,
            c.power_loss_total
                .checked_div(c.power_losses.max(1) as u32)
                .unwrap_or_default(),
            c.power_loss_max,
        );
    }

    fn writes(&self, out: &mut String) {
        let mut rows: BTreeMap<String, Row> = BTreeMap::new();
        for a in self.attempts {
            let row = rows
                .entry(format!("{} {}", a.client(), a.kind))
                .or_default();
            match a.answer {
                Answer::Ok => row.ok += 1,
                Answer::Error { .. } => row.error += 1,
                Answer::Unfinished => row.unfinished += 1,
            }
        }
        for lost in &self.findings.lost {
            rows.entry(lost.what.clone()).or_default().lost += 1;
        }
        let _ = writeln!(out, "\nwrites by answer");
        let line = |out: &mut String, label: &str, r: &Row| {
            let (ok, error, unfinished, lost) = (r.ok, r.error, r.unfinished, r.lost);
            let _ = writeln!(
                out,
                "  {label:<24} {ok:>7} {error:>7} {unfinished:>10} {lost:>5}"
            );
        };
        let _ = writeln!(
            out,
            "  {:<24} {:>7} {:>7} {:>10} {:>5}",
            "", "ok", "error", "unfinished", "lost"
        );
        let mut all = Row::default();
        for (label, r) in &rows {
            line(out, label, r);
            all.ok += r.ok;
            all.error += r.error;
            all.unfinished += r.unfinished;
            all.lost += r.lost;
        }
        line(out, "all", &all);
        self.common_errors(out);
    }

    /// The most common error texts (digits folded), so that a reader sees what the
    /// clients were told.
    fn common_errors(&self, out: &mut String) {
        let mut texts: BTreeMap<String, u64> = BTreeMap::new();
        for a in self.attempts {
            if let Answer::Error { text, code } = &a.answer {
                let folded = fold(text);
                let code = code.map_or("-".to_string(), |c| c.to_string());
                *texts
                    .entry(format!("{} [{code}] {folded}", a.client()))
                    .or_default() += 1;
            }
        }
        let mut common: Vec<(String, u64)> = texts.into_iter().collect();
        common.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if !common.is_empty() {
            let _ = writeln!(out, "most common errors (client [code] text):");
        }
        for (text, n) in common.iter().take(10) {
            let _ = writeln!(out, "  {n:>6}  {text}");
        }
    }

    fn checks(&self, out: &mut String) {
        let f = self.findings;
        let _ = writeln!(
            out,
            "\nchecks against the bucket ({} objects)",
            self.objects
        );
        let _ = writeln!(
            out,
            "  lost acknowledged writes: {} (must be 0)",
            f.lost.len()
        );
        for l in f.lost.iter().take(20) {
            let _ = writeln!(out, "    LOST {} {:?}: {}", l.what, l.name, l.why);
        }
        let _ = writeln!(out, "  unexpected objects: {}", f.unexpected.len());
        for u in f.unexpected.iter().take(20) {
            let _ = writeln!(out, "    UNEXPECTED {u}");
        }
        let _ = writeln!(
            out,
            "  uploads aborted for lost or changed bytes: {}",
            f.aborted_for_lost_bytes.len()
        );
        for a in f.aborted_for_lost_bytes.iter().take(20) {
            let _ = writeln!(out, "    ABORTED {a:.400}");
        }
        let gave_up = &f.client_gave_up_unanswered;
        if !gave_up.is_empty() {
            let _ = writeln!(
                out,
                "  Node uploads given up after a status query with no answer (client bug, not \
                 counted): {}",
                gave_up.len()
            );
        }
        let complete = &f.client_gave_up_complete;
        if !complete.is_empty() {
            let _ = writeln!(
                out,
                "  Node uploads given up although complete and in the bucket (client bug, not \
                 counted): {}",
                complete.len()
            );
        }
        if self.uncaught > 0 {
            let _ = writeln!(
                out,
                "  client exceptions thrown outside an upload: {}",
                self.uncaught
            );
        }
        if self.unreadable_lines > 0 {
            let _ = writeln!(
                out,
                "  writer log lines unreadable (cut short): {}",
                self.unreadable_lines
            );
        }
        let v = self.verify;
        let _ = writeln!(
            out,
            "  spool verify: {} entries left, {} problems",
            v.entries,
            v.problems.len()
        );
        for p in v.problems.iter().take(20) {
            let _ = writeln!(out, "    {p}");
        }
    }

    fn crash_states(&self, out: &mut String) {
        let s = &self.produced.crash_states;
        let states = [
            ("power_losses", s.power_losses),
            ("unsynced_ops_kept", s.unsynced_ops_kept),
            ("unsynced_ops_lost", s.unsynced_ops_lost),
            ("renames_kept_unsynced", s.renames_kept_unsynced),
            ("removal_batches_split", s.removal_batches_split),
            ("unsynced_data_lost", s.unsynced_data_lost),
            ("zero_length_files", s.zero_length_files),
            ("zero_filled_files", s.zero_filled_files),
            ("unsynced_data_kept", s.unsynced_data_kept),
            ("directories_lost", s.directories_lost),
        ];
        let reached = states.iter().filter(|(_, n)| *n > 0).count();
        let _ = writeln!(
            out,
            "\ncrash states reached: {reached} of {} (crashfs, {} mounts)",
            states.len(),
            self.mounts
        );
        for (name, n) in states {
            let mark = if n == 0 { "  <- not reached" } else { "" };
            let _ = writeln!(out, "  {name:<26} {n:>8}{mark}");
        }
        let p = &self.produced;
        let _ = writeln!(
            out,
            "  zero_length_after_rename {}, blocks_reverted {}, stale_handles {}",
            p.zero_length_after_rename, p.blocks_reverted, p.stale_handles
        );
    }

    fn failures(&self, out: &mut String) {
        let c = self.counters;
        let all: Vec<&String> = c
            .fatal
            .iter()
            .chain(&c.failures)
            .chain(self.end_failures)
            .collect();
        if all.is_empty() {
            return;
        }
        let _ = writeln!(out, "\nfailures:");
        for f in all {
            let _ = writeln!(out, "  {f}");
        }
    }
}

/// An error's text for counting alike ones together: URLs and numbers folded (a
/// number becomes `#`), at
/// most 110 characters.
pub fn fold(text: &str) -> String {
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| if w.contains("://") { "<url>" } else { w })
        .collect();
    let mut out = String::new();
    for c in words.join(" ").chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    out.chars().take(110).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_that_differ_in_urls_and_numbers_fold_together() {
        let a = "Error performing PUT http://127.0.0.1:4/bkt/a%2F1 in 101.3ms - HTTP error";
        let b = "Error performing PUT http://127.0.0.1:5/bkt/b in 2.7ms - HTTP error";
        assert_eq!(fold(a), fold(b));
        assert_eq!(fold(a), "Error performing PUT <url> in #.#ms - HTTP error");
        assert_eq!(fold(&"x".repeat(500)).len(), 110);
    }
}
