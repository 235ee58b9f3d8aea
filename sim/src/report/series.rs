//! The run as a time series, one row per sample interval: the spool gauges (summed over
//! hosts; the oldest age is the maximum), what callers were told, what the drainers
//! delivered and what the store answered. Also the derived figures the report needs:
//! peaks, alert windows and drain times.
//!
//! Gauges come from each host's samples, carried forward while a host is down (its
//! disk still holds the spool). Per-interval counts come from the ledger (by the time
//! the caller was told), the fake's request log, and the drainers' counters (as
//! deltas within one boot, since counters restart with the process).

use std::collections::BTreeMap;
use std::time::Duration;

use spool::alerts::{RULES, Scrape, Scrapes};

use crate::ledger::Answers;
use crate::recorder::HostSample;
use crate::world::RunOutput;

/// One sample interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// End of the interval, from t = 0.
    pub t: Duration,
    /// Entries in all spools.
    pub files: u64,
    /// Bytes in all spools.
    pub bytes: u64,
    /// The oldest entry's age, in seconds, over all spools.
    pub oldest_age_seconds: f64,
    /// Objects in the bucket.
    pub in_bucket: u64,
    /// Writes issued in the interval, and callers told in it (an answer counts in
    /// the interval it was given; `unknown` at the crash).
    pub told: Answers,
    /// Entries the drainers removed (delivered or already present).
    pub drained: u64,
    /// Requests the store received.
    pub store_requests: u64,
    /// Failed store requests by kind.
    pub store_errors: BTreeMap<String, u64>,
}

/// A period in which an alert would have fired.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertWindow {
    /// The rule's name.
    pub name: &'static str,
    /// The host whose metrics fired it.
    pub host: u32,
    /// When it fired (the condition had held for the rule's `for`).
    pub fired: Duration,
    /// When the condition stopped holding, if it did.
    pub resolved: Option<Duration>,
}

/// The drain after one fault window.
#[derive(Debug, Clone, PartialEq)]
pub struct Drain {
    /// The window's name or index.
    pub window: String,
    /// When the window ended (the store recovered).
    pub recovered: Duration,
    /// Entries in the spools then.
    pub backlog: u64,
    /// When the spools were first empty afterwards, if they were.
    pub empty: Option<Duration>,
    /// Entries removed per second between recovery and empty (or the end).
    pub drain_rate: f64,
}

/// The whole series and the figures derived from it.
#[derive(Debug, Clone)]
pub struct Series {
    /// One row per sample interval.
    pub rows: Vec<Row>,
    /// Every error kind seen, for column headers.
    pub error_kinds: Vec<String>,
    /// Per host, gauges per interval (carried forward).
    pub host_rows: Vec<Vec<HostSample>>,
    /// Alert windows over all hosts, by time.
    pub alerts: Vec<AlertWindow>,
    /// The drain after each fault window.
    pub drains: Vec<Drain>,
}

fn at_ms(ms: u32) -> Duration {
    Duration::from_millis(u64::from(ms))
}

/// Builds the series of a finished run.
pub fn build(run: &RunOutput) -> Series {
    let recorder = &run.recorder;
    let sample = recorder.sample;
    let last = recorder.index(run.scenario.duration);
    let mut rows: Vec<Row> = (0..=last)
        .map(|k| Row {
            t: sample * k as u32,
            ..Row::default()
        })
        .collect();
    let row = |t: Duration| (recorder.index(t).min(last)) as usize;

    for h in run.ledger.hosts() {
        for w in &h.writes {
            rows[row(at_ms(w.issued_ms))].told.writes += 1;
            rows[row(at_ms(w.told_ms))].told.tell(w.told);
        }
    }
    let mut error_kinds = std::collections::BTreeSet::new();
    for (&k, counts) in &recorder.requests {
        let Some(r) = rows.get_mut(k as usize) else {
            continue;
        };
        r.store_requests += counts.requests;
        for (kind, n) in &counts.errors {
            *r.store_errors.entry(kind.clone()).or_default() += n;
            error_kinds.insert(kind.clone());
        }
    }
    let mut in_bucket = 0;
    for r in rows.iter_mut() {
        let k = recorder.index(r.t);
        if let Some(&n) = recorder.in_bucket.get(&k) {
            in_bucket = n;
        }
        r.in_bucket = in_bucket;
    }

    let host_rows: Vec<Vec<HostSample>> = recorder
        .host_samples
        .iter()
        .map(|samples| carried_forward(samples, last))
        .collect();
    for host in &host_rows {
        let mut previous: Option<&HostSample> = None;
        for (k, s) in host.iter().enumerate() {
            let r = &mut rows[k];
            r.files += s.stats.files;
            r.bytes += s.stats.bytes;
            r.oldest_age_seconds = r.oldest_age_seconds.max(s.stats.oldest_age.as_secs_f64());
            r.drained += match previous {
                Some(p) if p.boot == s.boot => s.drained.saturating_sub(p.drained),
                // A new boot's counters start at zero.
                _ => s.drained,
            };
            previous = Some(s);
        }
    }
    let alerts = alerts(&recorder.host_samples, last, sample);
    let drains = drains(run, &rows);
    Series {
        rows,
        error_kinds: error_kinds.into_iter().collect(),
        host_rows,
        alerts,
        drains,
    }
}

/// Samples at every index up to `last`, the latest one repeated while none is taken.
fn carried_forward(samples: &BTreeMap<u64, HostSample>, last: u64) -> Vec<HostSample> {
    let mut out = Vec::with_capacity(last as usize + 1);
    let mut current = HostSample::default();
    for k in 0..=last {
        if let Some(s) = samples.get(&k) {
            current = s.clone();
        }
        out.push(current.clone());
    }
    out
}

/// When each shipped alert rule would have fired, per host: the rules evaluated by
/// `spool::alerts` at every sample instant on that host's scrapes, as Prometheus
/// would on its own (a host that is down has no scrape there, as a target that
/// cannot be reached).
fn alerts(
    host_samples: &[BTreeMap<u64, HostSample>],
    last: u64,
    sample: Duration,
) -> Vec<AlertWindow> {
    let mut out = Vec::new();
    for (host, samples) in host_samples.iter().enumerate() {
        let scrapes: Vec<Option<Scrape>> = (0..=last)
            .map(|k| samples.get(&k).map(|s| s.scrape))
            .collect();
        let scrapes = Scrapes {
            interval: sample,
            scrapes: &scrapes,
        };
        for rule in RULES {
            out.extend(scrapes.windows(&rule).into_iter().map(|w| AlertWindow {
                name: rule.name,
                host: host as u32,
                fired: w.from,
                resolved: w.until,
            }));
        }
    }
    out.sort_by(|a, b| {
        a.fired
            .cmp(&b.fired)
            .then(a.name.cmp(b.name))
            .then(a.host.cmp(&b.host))
    });
    out
}

/// For each fault window that fails requests: the backlog when it ended and how long
/// the spools took to empty.
fn drains(run: &RunOutput, rows: &[Row]) -> Vec<Drain> {
    let sample = run.recorder.sample;
    let mut out = Vec::new();
    for (i, w) in run.scenario.faults.windows.iter().enumerate() {
        let Some(until) = w.until else { continue };
        if w.mix.is_empty() && w.capacity_rps.is_none() || until >= run.scenario.duration {
            continue;
        }
        let k = (until.as_nanos() / sample.as_nanos().max(1)) as usize;
        let Some(at) = rows.get(k) else { continue };
        let empty_k = rows[k..].iter().position(|r| r.files == 0).map(|p| k + p);
        let end_k = empty_k.unwrap_or(rows.len() - 1);
        let drained: u64 = rows[k + 1..=end_k.max(k)].iter().map(|r| r.drained).sum();
        let seconds = (end_k.saturating_sub(k)) as f64 * sample.as_secs_f64();
        out.push(Drain {
            window: w.name.clone().unwrap_or_else(|| format!("fault[{i}]")),
            recovered: until,
            backlog: at.files,
            empty: empty_k.map(|k| sample * k as u32),
            drain_rate: if seconds > 0.0 {
                drained as f64 / seconds
            } else {
                0.0
            },
        });
    }
    out
}

impl Series {
    /// The row with the most spooled files, bytes and oldest age (earliest on ties).
    pub fn peaks(&self) -> (Peak, Peak, Peak) {
        let peak = |value: &dyn Fn(&Row) -> f64| {
            self.rows.iter().fold(Peak::default(), |best, r| {
                let v = value(r);
                if v > best.value {
                    Peak { value: v, at: r.t }
                } else {
                    best
                }
            })
        };
        (
            peak(&|r| r.files as f64),
            peak(&|r| r.bytes as f64),
            peak(&|r| r.oldest_age_seconds),
        )
    }

    /// The largest number of files and bytes any single host's spool held.
    pub fn per_host_peaks(&self) -> (u64, u64) {
        let files = self
            .host_rows
            .iter()
            .flatten()
            .map(|s| s.stats.files)
            .max()
            .unwrap_or(0);
        let bytes = self
            .host_rows
            .iter()
            .flatten()
            .map(|s| s.stats.bytes)
            .max()
            .unwrap_or(0);
        (files, bytes)
    }
}

/// A maximum and when it was reached.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Peak {
    /// The value.
    pub value: f64,
    /// When it was first reached.
    pub at: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(files: u64, age_s: u64, dead_letter_files: u64) -> HostSample {
        HostSample {
            scrape: Scrape {
                files,
                max_files: 100,
                max_bytes: 1 << 30,
                oldest_age_seconds: age_s as f64,
                dead_letter_files,
                ..Scrape::default()
            },
            ..HostSample::default()
        }
    }

    fn fired(windows: &[AlertWindow], name: &str) -> Vec<(u64, Option<u64>)> {
        windows
            .iter()
            .filter(|w| w.name == name)
            .map(|w| (w.fired.as_secs(), w.resolved.map(|r| r.as_secs())))
            .collect()
    }

    fn one_host(
        rows: impl IntoIterator<Item = HostSample>,
    ) -> (Vec<BTreeMap<u64, HostSample>>, u64) {
        let samples: BTreeMap<u64, HostSample> = rows
            .into_iter()
            .enumerate()
            .map(|(k, s)| (k as u64, s))
            .collect();
        let last = samples.len() as u64 - 1;
        (vec![samples], last)
    }

    #[test]
    fn alerts_fire_after_their_hold_time_and_resolve_when_the_condition_ends() {
        // One sample a minute: 81 files (over 80% of 100) from minute 1 to 4, the oldest
        // entry older than 15 min from minute 3 to 9.
        let (hosts, last) = one_host((0..12).map(|m| {
            let files = if (1..=4).contains(&m) { 81 } else { 10 };
            let age = if (3..=9).contains(&m) { 1000 } else { 0 };
            sample(files, age, 0)
        }));
        let windows = alerts(&hosts, last, Duration::from_secs(60));
        // Holds from 60 s; fires once it has held 2 min (180 s); ends at 300 s.
        assert_eq!(fired(&windows, "SpoolNearlyFull"), [(180, Some(300))]);
        // Holds from 180 s; fires after 5 min (480 s); ends at 600 s.
        assert_eq!(fired(&windows, "SpoolOldestEntryStale"), [(480, Some(600))]);
        assert!(fired(&windows, "SpoolDeadLetterFiles").is_empty());
    }

    #[test]
    fn a_condition_that_breaks_before_its_hold_time_never_fires() {
        let (hosts, last) =
            one_host((0..10).map(|m| sample(if m % 2 == 0 { 90 } else { 10 }, 0, 0)));
        assert!(
            fired(
                &alerts(&hosts, last, Duration::from_secs(60)),
                "SpoolNearlyFull"
            )
            .is_empty()
        );
    }

    #[test]
    fn dead_letter_files_fire_at_once_and_last_while_the_files_are_there() {
        // A dead letter from minute 2 to minute 9, when an operator requeued it.
        let (hosts, last) = one_host((0..15).map(|m| sample(0, 0, u64::from((2..9).contains(&m)))));
        let windows = alerts(&hosts, last, Duration::from_secs(60));
        assert_eq!(fired(&windows, "SpoolDeadLetterFiles"), [(120, Some(540))]);
    }
}
