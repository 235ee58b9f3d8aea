//! The invariants, checked after every run from outside the system they judge: the
//! producers' ledger (what callers were told), the fake's bucket (what landed), and
//! each host's final inventory (what its spool still holds or set aside).
//!
//! | invariant | holds when |
//! |---|---|
//! | `acknowledged_writes_delivered` | every write acknowledged (stored or spooled) is in the bucket with its bytes, or visibly set aside (dead-letter, quarantine) or still pending in a spool |
//! | `bucket_holds_only_what_was_written` | every object was issued by a producer, with the same size and crc32c |
//! | `callers_told_and_counted` | no caller is left without an answer, and each boot's `uploads_total` equals what its callers were told |
//! | `unknown_only_at_crashes` | writes without an answer exist only where a process died mid-upload |
//! | `spool_ends_empty` | every spool is empty at the end, or the store was still failing (explained) or the drain was still progressing (explained) |
//! | `gauges_match_disk_after_reopen` | after every open, `spool_files`/`spool_bytes` equal the entry files on the simulated disk |
//! | `only_poison_dead_lettered` | nothing but poison objects was dead-lettered, and no poison object is in the bucket |

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::ledger::{Answers, Told, parse_object_name};
use crate::recorder::HostSample;
use crate::scenario::EventKind;
use crate::world::RunOutput;

/// Whether an invariant held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// It held.
    Held,
    /// It held in the only way the run allows, with the reason (for example the
    /// scenario ends mid-outage, so the spool cannot be empty).
    Explained(String),
    /// It failed; the detail says how.
    Failed(String),
}

impl Status {
    /// Failed with `detail` when `failed`, else held.
    fn failed_if(failed: bool, detail: impl FnOnce() -> String) -> Status {
        if failed {
            Status::Failed(detail())
        } else {
            Status::Held
        }
    }
}

/// One checked invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invariant {
    /// Stable name (used in `report.json`).
    pub name: &'static str,
    /// What it says, for people.
    pub statement: &'static str,
    /// Whether it held.
    pub status: Status,
}

impl Invariant {
    /// False only for [`Status::Failed`].
    pub fn held(&self) -> bool {
        !matches!(self.status, Status::Failed(_))
    }
}

/// Where every write ended up. Serialized as `report.json`'s tally fields (the
/// diagnostic counts behind the invariants are left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Writes issued and what their callers were told.
    #[serde(flatten)]
    pub told: Answers,
    /// Unknown writes that landed anyway.
    pub unknown_landed: u64,
    /// Objects in the bucket at the end.
    pub in_bucket: u64,
    /// Acknowledged writes that are nowhere: the failure the bench exists to catch
    /// (must be 0).
    pub lost: u64,
    /// 412 answers: retries that found their object already written (duplicates
    /// avoided).
    #[serde(rename = "duplicates")]
    pub duplicates_avoided: u64,
    /// Acknowledged writes in a dead-letter folder.
    pub dead_lettered: u64,
    /// Acknowledged writes in a quarantine folder.
    pub quarantined: u64,
    /// Acknowledged writes still in a spool at the end.
    pub pending: u64,
    /// Rejected or failed writes that landed anyway (commit-then-fail).
    #[serde(skip)]
    pub refused_landed: u64,
    /// Acknowledged writes in the bucket.
    #[serde(skip)]
    pub delivered: u64,
    /// Objects whose size or crc32c differ from what was written.
    #[serde(skip)]
    pub corrupt: u64,
    /// Objects no producer wrote.
    #[serde(skip)]
    pub foreign: u64,
    /// Poison objects found in the bucket.
    #[serde(skip)]
    pub poison_in_bucket: u64,
    /// Dead-lettered objects that were not poison.
    #[serde(skip)]
    pub good_dead_lettered: u64,
}

/// The checker's findings.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Every invariant, in the order of the module table.
    pub invariants: Vec<Invariant>,
    /// Where every write ended up.
    pub tally: Tally,
    /// Up to ten examples of lost writes (object names), for debugging.
    pub lost_examples: Vec<String>,
}

impl Verdict {
    /// True when every invariant held (or was explained).
    pub fn passed(&self) -> bool {
        self.invariants.iter().all(Invariant::held)
    }
}

/// Where each write was found, per host and sequence number: a set of the flags
/// below.
struct Found(Vec<Vec<u8>>);

const IN_BUCKET: u8 = 1;
const PENDING: u8 = 2;
const DEAD: u8 = 4;
const QUARANTINED: u8 = 8;

impl Found {
    fn get_mut(&mut self, host: u32, seq: u64) -> Option<&mut u8> {
        self.0.get_mut(host as usize)?.get_mut(seq as usize)
    }
}

/// Checks every invariant on a finished run.
pub fn check(run: &RunOutput) -> Verdict {
    let mut found = Found(
        run.ledger
            .hosts()
            .iter()
            .map(|h| vec![0; h.writes.len()])
            .collect(),
    );
    let mut tally = Tally {
        in_bucket: run.bucket.len() as u64,
        duplicates_avoided: run.fake.precondition_failures,
        ..Tally::default()
    };
    look_in_bucket(run, &mut found, &mut tally);
    look_in_inventories(run, &mut found, &mut tally);
    let (in_flight, lost_examples) = follow_each_write(run, &found, &mut tally);

    let invariants = vec![
        acknowledged_writes_delivered(&tally, &lost_examples),
        bucket_holds_only_what_was_written(&tally),
        callers_told_and_counted(run, in_flight),
        unknown_only_at_crashes(run, &tally),
        spool_ends_empty(run),
        gauges_match_disk(run),
        only_poison_dead_lettered(&tally),
    ];
    Verdict {
        invariants,
        tally,
        lost_examples,
    }
}

/// Marks every object in the bucket against the write it names; counts objects no
/// one wrote, objects with other bytes, and poison objects.
fn look_in_bucket(run: &RunOutput, found: &mut Found, tally: &mut Tally) {
    let ledger = &run.ledger;
    for object in &run.bucket {
        let write = parse_object_name(&object.name)
            .and_then(|(host, seq, poison)| Some((host, seq, poison, ledger.get(host, seq)?)));
        match write {
            Some((host, seq, poison, w)) if w.poison == poison => {
                if u64::from(w.size) != object.size || w.crc32c != object.crc32c {
                    tally.corrupt += 1;
                }
                if poison {
                    tally.poison_in_bucket += 1;
                }
                if let Some(f) = found.get_mut(host, seq) {
                    *f |= IN_BUCKET;
                }
            }
            _ => tally.foreign += 1,
        }
    }
}

/// Marks the writes each host's spool still holds, dead-lettered or quarantined;
/// counts good objects that were dead-lettered.
fn look_in_inventories(run: &RunOutput, found: &mut Found, tally: &mut Tally) {
    for inventory in run.recorder.inventories.values() {
        for (names, flag) in [
            (&inventory.pending, PENDING),
            (&inventory.dead_letter, DEAD),
            (&inventory.quarantine, QUARANTINED),
        ] {
            for name in names {
                if let Some((host, seq, poison)) = parse_object_name(name)
                    && let Some(f) = found.get_mut(host, seq)
                {
                    *f |= flag;
                    if flag == DEAD && !poison {
                        tally.good_dead_lettered += 1;
                    }
                }
            }
        }
    }
}

/// Counts what each write's caller was told and where an acknowledged write
/// ended up (the bucket first, then set aside, then pending; else lost). Returns
/// the writes still in flight and up to ten lost ones.
fn follow_each_write(run: &RunOutput, found: &Found, tally: &mut Tally) -> (u64, Vec<String>) {
    let mut in_flight = 0;
    let mut lost_examples = Vec::new();
    for (host, h) in run.ledger.hosts().iter().enumerate() {
        for (seq, w) in h.writes.iter().enumerate() {
            let f = found.0[host][seq];
            tally.told.writes += 1;
            match w.told {
                Told::InFlight => in_flight += 1,
                told => tally.told.tell(told),
            }
            if w.told.acknowledged() {
                if f & IN_BUCKET != 0 {
                    tally.delivered += 1;
                } else if f & DEAD != 0 {
                    tally.dead_lettered += 1;
                } else if f & QUARANTINED != 0 {
                    tally.quarantined += 1;
                } else if f & PENDING != 0 {
                    tally.pending += 1;
                } else {
                    tally.lost += 1;
                    if lost_examples.len() < 10 {
                        lost_examples.push(crate::ledger::object_name(
                            host as u32,
                            seq as u64,
                            w.poison,
                        ));
                    }
                }
            } else if f & IN_BUCKET != 0 {
                match w.told {
                    Told::Unknown | Told::InFlight => tally.unknown_landed += 1,
                    _ => tally.refused_landed += 1,
                }
            }
        }
    }
    (in_flight, lost_examples)
}

fn acknowledged_writes_delivered(tally: &Tally, lost_examples: &[String]) -> Invariant {
    Invariant {
        name: "acknowledged_writes_delivered",
        statement: "Every write the app acknowledged (stored or spooled) is in the bucket with the same bytes, or visibly set aside, or still pending in a spool",
        status: Status::failed_if(tally.lost > 0, || {
            let examples = lost_examples.join(", ");
            format!(
                "{} acknowledged writes are nowhere (e.g. {examples})",
                tally.lost
            )
        }),
    }
}

fn bucket_holds_only_what_was_written(tally: &Tally) -> Invariant {
    Invariant {
        name: "bucket_holds_only_what_was_written",
        statement: "Nothing is in the bucket that no producer wrote, and every object has the bytes it was written with",
        status: Status::failed_if(tally.foreign > 0 || tally.corrupt > 0, || {
            format!(
                "{} unknown objects, {} with wrong bytes",
                tally.foreign, tally.corrupt
            )
        }),
    }
}

fn only_poison_dead_lettered(tally: &Tally) -> Invariant {
    Invariant {
        name: "only_poison_dead_lettered",
        statement: "Only objects the store refuses for good are dead-lettered, and none of them is in the bucket",
        status: Status::failed_if(
            tally.good_dead_lettered > 0 || tally.poison_in_bucket > 0,
            || {
                let (good, poison) = (tally.good_dead_lettered, tally.poison_in_bucket);
                format!("{good} good objects dead-lettered, {poison} poison objects in the bucket")
            },
        ),
    }
}

fn callers_told_and_counted(run: &RunOutput, in_flight: u64) -> Invariant {
    let mut told: BTreeMap<(u32, u16), BTreeMap<&'static str, u64>> = BTreeMap::new();
    for (host, h) in run.ledger.hosts().iter().enumerate() {
        for w in &h.writes {
            let outcome = match w.told {
                Told::Stored => "stored",
                Told::Spooled => "spooled",
                Told::Rejected => "rejected",
                Told::Failed => "failed",
                Told::Unknown | Told::InFlight => continue,
            };
            *told
                .entry((host as u32, w.boot))
                .or_default()
                .entry(outcome)
                .or_default() += 1;
        }
    }
    let mut problems = Vec::new();
    if in_flight > 0 {
        problems.push(format!("{in_flight} callers never got an answer"));
    }
    for (&(host, boot), counted) in &run.recorder.boot_uploads {
        let said = told.remove(&(host, boot)).unwrap_or_default();
        for outcome in ["stored", "spooled", "rejected", "failed"] {
            let (c, t) = (
                counted.get(outcome).copied().unwrap_or(0),
                said.get(outcome).copied().unwrap_or(0),
            );
            if c != t {
                problems.push(format!("host {host} boot {boot}: uploads_total{{outcome=\"{outcome}\"}} is {c}, callers were told {t}"));
            }
        }
    }
    for ((host, boot), said) in told {
        problems.push(format!(
            "host {host} boot {boot}: {} answered writes but no counters recorded",
            said.values().sum::<u64>()
        ));
    }
    Invariant {
        name: "callers_told_and_counted",
        statement: "Every caller was told what happened to its write (refusals included), and the metrics count exactly what callers were told",
        status: Status::failed_if(!problems.is_empty(), || problems.join("; ")),
    }
}

fn unknown_only_at_crashes(run: &RunOutput, tally: &Tally) -> Invariant {
    let deaths = run
        .recorder
        .timeline
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Crash | EventKind::Restart))
        .count();
    let recorded: u64 = run.recorder.timeline.iter().map(|e| e.unknown).sum();
    let status = if tally.told.unknown != recorded {
        Status::Failed(format!(
            "{} unknown writes but {recorded} were in flight at crashes or restarts",
            tally.told.unknown
        ))
    } else if deaths == 0 && tally.told.unknown > 0 {
        Status::Failed(format!(
            "{} writes unanswered without any crash",
            tally.told.unknown
        ))
    } else if tally.told.unknown > 0 {
        Status::Explained(format!(
            "{} writes were in flight at {deaths} crashes or restarts: {} landed, {} did not (their callers got no answer and would retry)",
            tally.told.unknown,
            tally.unknown_landed,
            tally.told.unknown - tally.unknown_landed
        ))
    } else {
        Status::Held
    };
    Invariant {
        name: "unknown_only_at_crashes",
        statement: "Writes in flight when a process died are counted as unknown (landed or not), never as lost; there are no others",
        status,
    }
}

fn spool_ends_empty(run: &RunOutput) -> Invariant {
    let left: u64 = run
        .recorder
        .inventories
        .values()
        .map(|i| i.stats.files)
        .sum();
    let bytes: u64 = run
        .recorder
        .inventories
        .values()
        .map(|i| i.stats.bytes)
        .sum();
    let scenario = &run.scenario;
    let end = scenario.duration;
    let still_failing = scenario
        .faults
        .windows
        .iter()
        .any(|w| w.from < end && w.until.is_none_or(|u| u >= end) && !w.mix.is_empty());
    // A write spooled just before recovery, or a worker asleep in its backoff when the
    // store came back, needs up to this long before the drain shows progress.
    let grace =
        scenario.uploader.put_timeout + scenario.drainer.backoff.cap + scenario.drainer.put_timeout;
    let recovered = scenario
        .faults
        .windows
        .iter()
        .filter(|w| !w.mix.is_empty() || w.capacity_rps.is_some())
        .filter_map(|w| w.until)
        .filter(|u| *u <= end)
        .max()
        .unwrap_or_default();
    let status = if !run.unfinished_hosts.is_empty() {
        Status::Failed(format!(
            "hosts {:?} did not finish their wind-down",
            run.unfinished_hosts
        ))
    } else if left == 0 {
        Status::Held
    } else if still_failing {
        Status::Explained(format!(
            "{left} entries ({bytes} bytes) left: the store was still failing when the scenario ended"
        ))
    } else if !run.down_at_end.is_empty() {
        Status::Explained(format!(
            "{left} entries ({bytes} bytes) left: hosts {:?} were down or stopping when the scenario ended",
            run.down_at_end
        ))
    } else if end - recovered < grace {
        Status::Explained(format!(
            "{left} entries ({bytes} bytes) left: the store recovered only {} before the end, within the drainer's backoff cap and timeouts ({})",
            humantime::format_duration(end - recovered),
            humantime::format_duration(grace)
        ))
    } else {
        match drain_progress(run) {
            Some(rate) if rate > 0.0 => Status::Explained(format!(
                "{left} entries ({bytes} bytes) left, still draining at {rate:.1} entries/s at the end: about {} more",
                humantime::format_duration(Duration::from_secs((left as f64 / rate).ceil() as u64))
            )),
            _ => Status::Failed(format!(
                "{left} entries ({bytes} bytes) left and the drain made no progress over the last minute"
            )),
        }
    };
    Invariant {
        name: "spool_ends_empty",
        statement: "Every spool ends empty, or the report says how much is left and why",
        status,
    }
}

/// Entries drained per second over the last minute of samples, all hosts.
fn drain_progress(run: &RunOutput) -> Option<f64> {
    let recorder = &run.recorder;
    let last = recorder.index(run.scenario.duration);
    let window =
        (Duration::from_secs(60).as_nanos() / recorder.sample.as_nanos().max(1)).max(1) as u64;
    let first = last.saturating_sub(window);
    let drained: u64 = recorder
        .host_samples
        .iter()
        .map(|samples| drained_across_boots(samples.range(first..=last).map(|(_, s)| s)))
        .sum();
    // A run shorter than the window is measured over its own length.
    let seconds = ((last - first).max(1) as f64) * recorder.sample.as_secs_f64();
    Some(drained as f64 / seconds)
}

/// Entries drained over consecutive samples of one host. The counter restarts at each
/// boot, so a boot that began inside the samples counts from zero; a crash or deploy
/// in the window must not hide the drain that went on around it.
fn drained_across_boots<'a>(samples: impl Iterator<Item = &'a HostSample>) -> u64 {
    let mut total = 0;
    // (boot, counter at the segment's start, latest counter)
    let mut segment: Option<(u16, u64, u64)> = None;
    for sample in samples {
        match &mut segment {
            Some((boot, _, latest)) if *boot == sample.boot => *latest = sample.drained,
            _ => {
                let from = match segment {
                    Some((_, start, latest)) => {
                        total += latest.saturating_sub(start);
                        0
                    }
                    // The first boot seen may have started before the samples.
                    None => sample.drained,
                };
                segment = Some((sample.boot, from, sample.drained));
            }
        }
    }
    if let Some((_, start, latest)) = segment {
        total += latest.saturating_sub(start);
    }
    total
}

fn gauges_match_disk(run: &RunOutput) -> Invariant {
    let mismatches: Vec<String> = run
        .recorder
        .reopens
        .iter()
        .filter(|c| c.open_error.is_none() && c.gauges != c.on_disk)
        .map(|c| {
            format!(
                "host {} boot {} at {:?}: gauges say {} files/{} bytes, disk has {}/{}",
                c.host, c.boot, c.at, c.gauges.0, c.gauges.1, c.on_disk.0, c.on_disk.1
            )
        })
        .collect();
    let failed_opens = run
        .recorder
        .reopens
        .iter()
        .filter(|c| c.open_error.is_some())
        .count();
    let status = if !mismatches.is_empty() {
        Status::Failed(mismatches.join("; "))
    } else if failed_opens > 0 {
        Status::Explained(format!(
            "{failed_opens} opens failed on disk errors and were retried; every open that succeeded matched the disk"
        ))
    } else {
        Status::Held
    };
    Invariant {
        name: "gauges_match_disk_after_reopen",
        statement: "After every (re)open, spool_files and spool_bytes equal the entry files on disk",
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(boot: u16, drained: u64) -> HostSample {
        HostSample {
            boot,
            stats: spool::Stats::default(),
            drained,
            dead_lettered: 0,
        }
    }

    #[test]
    fn drain_progress_adds_up_across_a_reboot() {
        // Boot 0 drains 40 -> 70 in the window, boot 1 starts from zero and drains 25.
        let samples = [
            sample(0, 40),
            sample(0, 70),
            sample(1, 0),
            sample(1, 10),
            sample(1, 25),
        ];
        assert_eq!(drained_across_boots(samples.iter()), 30 + 25);
    }

    #[test]
    fn a_boot_that_began_in_the_window_counts_its_first_sample() {
        let samples = [sample(0, 5), sample(0, 5), sample(1, 8)];
        assert_eq!(drained_across_boots(samples.iter()), 8);
        assert_eq!(drained_across_boots([sample(2, 9)].iter()), 0);
        assert_eq!(drained_across_boots(std::iter::empty()), 0);
    }
}
