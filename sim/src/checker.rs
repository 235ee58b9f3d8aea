//! The invariants, checked after every run from outside the system they judge: the
//! producers' ledger (what callers were told), the fake's bucket (what landed), each
//! host's final inventory (taken after a last power loss and a reopen, every entry
//! decoded in full: [`crate::inventory`]), and what the simulated disk says it
//! destroyed.
//!
//! | invariant | holds when |
//! |---|---|
//! | `acknowledged_writes_delivered` | every write acknowledged (stored or spooled) is in the bucket with its bytes, or set aside, or still pending in a spool with its length and crc32c; or (explained) its file was destroyed by the disk |
//! | `bucket_holds_only_what_was_written` | every object was issued by a producer, with the same size, crc32c and attributes, or is the other writer's object a producer's write found under its name; no write replaced another writer's object |
//! | `callers_told_and_counted` | no caller is left without an answer, and each boot's `uploads_total` equals what its callers were told (with the relay: its counters over all its boots, less answers lost to a process that died) |
//! | `unknown_only_at_crashes` | writes without an answer exist only where a process died mid-upload |
//! | `spool_ends_empty` | every spool is empty at the end, or the store was still failing (explained) or the drain was still progressing (explained) |
//! | `gauges_match_disk_after_reopen` | after every open, `spool_files`/`spool_bytes` equal the entry files on the simulated disk; the final inventory's reopen (faults off) succeeds |
//! | `set_aside_only_for_a_reason` | an acknowledged write is dead-lettered only when the store refused it for good (poison, or a conflict), quarantined only when the disk damaged its file, and no poison object is in the bucket |
//! | `conflicts_caught` | a write whose name another writer took first with other bytes is never told stored and never removed from a spool as if it had landed: its caller is told rejected, or it is dead-lettered (or still pending) |
//!
//! A failure names the writes it concerns: object name, host, and the simulated
//! times the write was issued and answered.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::ledger::{Answers, Told};
use crate::recorder::HostSample;
use crate::scenario::EventKind;
use crate::workload::{Shape, object_attributes, parse_object_name};
use crate::world::RunOutput;
use fake_gcs::ObjectRecord;

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
    /// Acknowledged writes whose entry file the disk destroyed (a bad sector, a bit
    /// flipped at rest): the one way the bench allows an acknowledged write to be
    /// missing.
    pub destroyed_by_disk: u64,
    /// Writes whose name another writer had taken first, with other bytes.
    pub conflicts: u64,
    /// Of those, writes whose caller was told `stored` (the other writer's bytes
    /// passed for theirs).
    #[serde(skip)]
    pub conflicts_told_stored: u64,
    /// Of those, spooled writes that are neither dead-lettered nor pending: removed
    /// as if they had landed.
    #[serde(skip)]
    pub conflicts_removed: u64,
    /// Writes that replaced the other writer's object under their name.
    #[serde(skip)]
    pub overwrote_other_writer: u64,
    /// Objects with their write's bytes but other attributes.
    #[serde(skip)]
    pub attributes_differ: u64,
    /// Acknowledged writes quarantined although the disk did not damage them.
    #[serde(skip)]
    pub quarantined_without_cause: u64,
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
    /// Up to ten lost writes, each with its host and times.
    pub lost_examples: Vec<String>,
    /// Up to ten writes set aside without a reason, each with its host and times.
    pub set_aside_examples: Vec<String>,
    /// Up to ten conflicting writes told stored or removed, and objects with wrong
    /// attributes or another writer's object replaced.
    pub conflict_examples: Vec<String>,
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
/// The disk destroyed its file.
const DAMAGED: u8 = 16;
/// The bucket holds, under its name, the object another writer put there first.
const OTHER_WRITERS: u8 = 32;

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
    let others = other_writers(run);
    tally.conflicts = others.len() as u64;
    let mut conflict_examples = Vec::new();
    look_in_bucket(run, &others, &mut found, &mut tally, &mut conflict_examples);
    look_in_inventories(run, &others, &mut found, &mut tally);
    look_at_disk_damage(run, &mut found);
    let followed = follow_each_write(run, &others, &found, &mut tally);
    conflict_examples.extend(followed.conflict_examples);
    conflict_examples.truncate(10);

    let invariants = vec![
        acknowledged_writes_delivered(&tally, &followed.lost_examples),
        bucket_holds_only_what_was_written(&tally),
        callers_told_and_counted(run, followed.in_flight),
        unknown_only_at_crashes(run, &tally),
        spool_ends_empty(run),
        gauges_match_disk(run),
        set_aside_only_for_a_reason(&tally, &followed.set_aside_examples),
        conflicts_caught(&tally, &conflict_examples),
    ];
    Verdict {
        invariants,
        tally,
        lost_examples: followed.lost_examples,
        set_aside_examples: followed.set_aside_examples,
        conflict_examples,
    }
}

/// The size and crc32c of the object another writer put first under each write's
/// name, for the writes where those bytes differ from the write's own (a same-bytes
/// conflict is an earlier try that landed: the write is as good as stored).
type OtherWriters = BTreeMap<(u32, u64), (u64, u32)>;

fn other_writers(run: &RunOutput) -> OtherWriters {
    let shape = Shape::of(&run.scenario);
    let payload_seed =
        crate::seed::derive_seed(run.scenario.seed, &[crate::seed::purpose::PAYLOAD]);
    let mut others = BTreeMap::new();
    for (host, h) in run.ledger.hosts().iter().enumerate() {
        let host = host as u32;
        for (seq, w) in h.writes.iter().enumerate() {
            let seq = seq as u64;
            if w.poison || shape.conflict(host, seq).is_none() {
                continue;
            }
            let own = crate::ledger::payload(payload_seed, host, seq, w.size as usize);
            if let Some(other) = shape.other_writer(host, seq, w.poison, &own)
                && other.bytes != own
            {
                let crc = crc32c::crc32c(&other.bytes);
                others.insert((host, seq), (other.bytes.len() as u64, crc));
            }
        }
    }
    others
}

/// Marks every object in the bucket against the write it names; counts objects no
/// one wrote, objects with other bytes or attributes, poison objects, and writes
/// that replaced another writer's object.
fn look_in_bucket(
    run: &RunOutput,
    others: &OtherWriters,
    found: &mut Found,
    tally: &mut Tally,
    examples: &mut Vec<String>,
) {
    let ledger = &run.ledger;
    let shape = Shape::of(&run.scenario);
    for object in run.bucket.records() {
        let write = write_named(&shape, &object.name)
            .and_then(|(host, seq, poison)| Some((host, seq, poison, ledger.get(host, seq)?)));
        let Some((host, seq, poison, w)) = write.filter(|(_, _, poison, w)| w.poison == *poison)
        else {
            tally.foreign += 1;
            continue;
        };
        let other = others.get(&(host, seq));
        let flag = if (u64::from(w.size), w.crc32c) == (object.size, object.crc32c) {
            if other.is_some() {
                tally.overwrote_other_writer += 1;
                examples.push(format!("{} replaced another writer's object", object.name));
            } else if !attributes_match(&shape, host, seq, &object) {
                tally.attributes_differ += 1;
                examples.push(format!("{} has other attributes than written", object.name));
            }
            IN_BUCKET
        } else if other == Some(&(object.size, object.crc32c)) {
            OTHER_WRITERS
        } else {
            tally.corrupt += 1;
            IN_BUCKET
        };
        if poison {
            tally.poison_in_bucket += 1;
        }
        if let Some(f) = found.get_mut(host, seq) {
            *f |= flag;
        }
    }
}

/// Whether `object` carries the attributes write `(host, seq)` was given (its
/// content type only when the write named one: otherwise the store picks it).
fn attributes_match(shape: &Shape, host: u32, seq: u64, object: &ObjectRecord) -> bool {
    let (content_type, attributes) = object_attributes(&shape.attributes(host, seq));
    content_type.is_none_or(|t| t == object.content_type) && &attributes == object.attributes()
}

/// Marks the writes each host's spool still holds (with the length and crc32c they
/// were written with: an entry with other bytes counts as missing), dead-lettered or
/// quarantined; counts good objects that were dead-lettered.
fn look_in_inventories(
    run: &RunOutput,
    others: &OtherWriters,
    found: &mut Found,
    tally: &mut Tally,
) {
    let shape = Shape::of(&run.scenario);
    for inventory in run.recorder.inventories.values() {
        for (entries, flag) in [
            (&inventory.pending, PENDING),
            (&inventory.dead_letter, DEAD),
            (&inventory.quarantine, QUARANTINED),
        ] {
            for entry in entries {
                let Some((host, seq, poison)) = write_named(&shape, &entry.name) else {
                    continue;
                };
                let intact = run
                    .ledger
                    .get(host, seq)
                    .is_some_and(|w| u64::from(w.size) == entry.size && w.crc32c == entry.crc32c);
                if let Some(f) = found.get_mut(host, seq)
                    && intact
                {
                    *f |= flag;
                    if flag == DEAD && !poison && !others.contains_key(&(host, seq)) {
                        tally.good_dead_lettered += 1;
                    }
                }
            }
        }
    }
}

/// Marks the writes whose entry file the disk damaged, read from the disk's own
/// record of what the file held before.
fn look_at_disk_damage(run: &RunOutput, found: &mut Found) {
    for disk in &run.disks {
        for damage in &disk.damage {
            let name = spool::entry::decode_header(&damage.original).map(|(h, _)| h.name);
            if let Ok(name) = name
                && let Some((host, seq, _)) = write_named(&Shape::of(&run.scenario), &name)
                && let Some(f) = found.get_mut(host, seq)
            {
                *f |= DAMAGED;
            }
        }
    }
}

/// What following every write found besides the tally.
struct Followed {
    in_flight: u64,
    lost_examples: Vec<String>,
    set_aside_examples: Vec<String>,
    conflict_examples: Vec<String>,
}

/// The write `name` is the exact name of, if any: a name that only starts like one
/// (the client rewrote it) names no write.
fn write_named(shape: &Shape, name: &str) -> Option<(u32, u64, bool)> {
    parse_object_name(name).filter(|&(host, seq, poison)| shape.name(host, seq, poison) == name)
}

/// A write, for a person: its name, host and when it was issued and answered.
fn describe(shape: &Shape, host: usize, seq: usize, w: &crate::ledger::Write) -> String {
    format!(
        "{} (host {host}, issued at {:.3} s, told {} at {:.3} s)",
        shape.name(host as u32, seq as u64, w.poison),
        f64::from(w.issued_ms) / 1000.0,
        w.told.as_str(),
        f64::from(w.told_ms) / 1000.0,
    )
}

/// Counts what each write's caller was told and where an acknowledged write
/// ended up (the bucket first, then set aside, then pending; else destroyed by the
/// disk, or lost).
fn follow_each_write(
    run: &RunOutput,
    others: &OtherWriters,
    found: &Found,
    tally: &mut Tally,
) -> Followed {
    let shape = Shape::of(&run.scenario);
    let mut followed = Followed {
        in_flight: 0,
        lost_examples: Vec::new(),
        set_aside_examples: Vec::new(),
        conflict_examples: Vec::new(),
    };
    for (host, h) in run.ledger.hosts().iter().enumerate() {
        for (seq, w) in h.writes.iter().enumerate() {
            let f = found.0[host][seq];
            tally.told.writes += 1;
            match w.told {
                Told::InFlight => followed.in_flight += 1,
                told => tally.told.tell(told),
            }
            if !w.told.acknowledged() {
                if f & IN_BUCKET != 0 {
                    match w.told {
                        Told::Unknown | Told::InFlight => tally.unknown_landed += 1,
                        _ => tally.refused_landed += 1,
                    }
                }
                continue;
            }
            let example = |list: &mut Vec<String>| {
                if list.len() < 10 {
                    list.push(describe(&shape, host, seq, w));
                }
            };
            let conflict = others.contains_key(&(host as u32, seq as u64));
            if conflict && w.told == Told::Stored {
                tally.conflicts_told_stored += 1;
                example(&mut followed.conflict_examples);
            } else if f & IN_BUCKET != 0 {
                tally.delivered += 1;
            } else if f & DEAD != 0 {
                tally.dead_lettered += 1;
                if !w.poison && !conflict {
                    example(&mut followed.set_aside_examples);
                }
            } else if f & QUARANTINED != 0 {
                tally.quarantined += 1;
                if f & DAMAGED == 0 {
                    tally.quarantined_without_cause += 1;
                    example(&mut followed.set_aside_examples);
                }
            } else if f & PENDING != 0 {
                tally.pending += 1;
            } else if f & DAMAGED != 0 {
                tally.destroyed_by_disk += 1;
            } else if conflict {
                tally.conflicts_removed += 1;
                example(&mut followed.conflict_examples);
            } else {
                tally.lost += 1;
                example(&mut followed.lost_examples);
            }
        }
    }
    followed
}

fn acknowledged_writes_delivered(tally: &Tally, lost_examples: &[String]) -> Invariant {
    let status = if tally.lost > 0 {
        let examples = lost_examples.join("; ");
        Status::Failed(format!(
            "{} acknowledged writes are nowhere (e.g. {examples})",
            tally.lost
        ))
    } else if tally.destroyed_by_disk > 0 {
        Status::Explained(format!(
            "{} acknowledged writes were destroyed by the disk (a bad sector or a bit flipped at rest in their entry file); every other one is accounted for",
            tally.destroyed_by_disk
        ))
    } else {
        Status::Held
    };
    Invariant {
        name: "acknowledged_writes_delivered",
        statement: "Every write the app acknowledged (stored or spooled) is in the bucket with the same bytes, or visibly set aside, or still pending in a spool with its length and crc32c",
        status,
    }
}

fn bucket_holds_only_what_was_written(tally: &Tally) -> Invariant {
    let failed = tally.foreign > 0
        || tally.corrupt > 0
        || tally.attributes_differ > 0
        || tally.overwrote_other_writer > 0;
    Invariant {
        name: "bucket_holds_only_what_was_written",
        statement: "Nothing is in the bucket that no producer wrote; every object has the name, bytes and attributes it was written with (or is the object another writer put there first, untouched)",
        status: Status::failed_if(failed, || {
            format!(
                "{} unknown objects, {} with wrong bytes, {} with wrong attributes, {} writes replaced another writer's object",
                tally.foreign, tally.corrupt, tally.attributes_differ, tally.overwrote_other_writer
            )
        }),
    }
}

fn conflicts_caught(tally: &Tally, examples: &[String]) -> Invariant {
    let failed = tally.conflicts_told_stored > 0 || tally.conflicts_removed > 0;
    Invariant {
        name: "conflicts_caught",
        statement: "A write whose name another writer took first with other bytes is never told stored and never removed as if it had landed: it is refused, or dead-lettered as a conflict",
        status: Status::failed_if(failed, || {
            format!(
                "{} of {} conflicting writes were told stored, {} were removed from a spool (e.g. {})",
                tally.conflicts_told_stored,
                tally.conflicts,
                tally.conflicts_removed,
                examples.join("; ")
            )
        }),
    }
}

fn set_aside_only_for_a_reason(tally: &Tally, examples: &[String]) -> Invariant {
    let failed = tally.good_dead_lettered > 0
        || tally.quarantined_without_cause > 0
        || tally.poison_in_bucket > 0;
    Invariant {
        name: "set_aside_only_for_a_reason",
        statement: "An acknowledged write is dead-lettered only when the store refused it for good, quarantined only when the disk damaged its file, and no refused object is in the bucket",
        status: Status::failed_if(failed, || {
            format!(
                "{} good objects dead-lettered, {} quarantined without damage, {} poison objects in the bucket (e.g. {})",
                tally.good_dead_lettered,
                tally.quarantined_without_cause,
                tally.poison_in_bucket,
                examples.join("; ")
            )
        }),
    }
}

/// Outcomes by caller host and boot: what the callers were told.
type ToldPerBoot = BTreeMap<(u32, u16), BTreeMap<&'static str, u64>>;

const OUTCOMES: [&str; 4] = ["stored", "spooled", "rejected", "failed"];

fn callers_told_and_counted(run: &RunOutput, in_flight: u64) -> Invariant {
    let mut told: ToldPerBoot = BTreeMap::new();
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
    problems.extend(match run.scenario.relay_host() {
        None => counted_per_boot(run, told),
        Some(relay) => counted_by_relay(run, relay, &told),
    });
    Invariant {
        name: "callers_told_and_counted",
        statement: "Every caller was told what happened to its write (refusals included), and the metrics count exactly what callers were told",
        status: Status::failed_if(!problems.is_empty(), || problems.join("; ")),
    }
}

/// Each boot's `uploads_total` against what that boot's callers were told.
fn counted_per_boot(run: &RunOutput, mut told: ToldPerBoot) -> Vec<String> {
    let mut problems = Vec::new();
    for (&(host, boot), counted) in &run.recorder.boot_uploads {
        let said = told.remove(&(host, boot)).unwrap_or_default();
        for outcome in OUTCOMES {
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
    problems
}

/// With the relay, the callers are its HTTP clients and its boots are not theirs:
/// the relay's `uploads_total`, summed over its boots, against what all callers
/// were told. Refusals are compared as one class (a 503 is backpressure to the
/// caller whether the relay's spool was full, counted `rejected`, or failed a
/// write, counted `failed`), less the writes that never reached the relay. A
/// class may count more than its callers heard only by answers lost when a
/// process died with the write in flight: at most the unknown writes in all.
fn counted_by_relay(run: &RunOutput, relay: u32, told: &ToldPerBoot) -> Vec<String> {
    let sum = |maps: &mut dyn Iterator<Item = &BTreeMap<&'static str, u64>>, of: &[&str]| {
        maps.map(|m| {
            of.iter()
                .map(|o| m.get(o).copied().unwrap_or(0))
                .sum::<u64>()
        })
        .sum::<u64>()
    };
    let relay_boots = || {
        (run.recorder.boot_uploads.iter())
            .filter(move |((host, _), _)| *host == relay)
            .map(|(_, counted)| counted)
    };
    let unknown = (run.ledger.hosts().iter())
        .flat_map(|h| &h.writes)
        .filter(|w| w.told == Told::Unknown)
        .count() as u64;
    let mut problems = Vec::new();
    let mut lost_answers = 0;
    let classes: [(&str, &[&str]); 3] = [
        ("stored", &["stored"]),
        ("spooled", &["spooled"]),
        ("rejected or failed", &["rejected", "failed"]),
    ];
    for (class, outcomes) in classes {
        let counted = sum(&mut relay_boots(), outcomes);
        let mut said = sum(&mut told.values(), outcomes);
        if outcomes.len() > 1 {
            said = said.saturating_sub(run.recorder.relay_unreached);
        }
        match counted.checked_sub(said) {
            Some(excess) => lost_answers += excess,
            None => problems.push(format!(
                "the relay's uploads_total counts {counted} {class}, its callers were told {said}"
            )),
        }
    }
    if lost_answers > unknown {
        problems.push(format!(
            "the relay counted {lost_answers} uploads its callers never heard of, but only {unknown} writes lost their answer to a process that died"
        ));
    }
    problems
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
    // What is on the disks, not what the spools say they hold. An entry whose object
    // is already in the bucket came back after the last power loss (its removal was
    // never made durable): the next start sends it, is answered "already exists",
    // and removes it. Only the others are left to drain.
    let (resurrected, undelivered): (Vec<_>, Vec<_>) = run
        .recorder
        .inventories
        .iter()
        .flat_map(|(host, i)| i.pending.iter().map(move |e| (host, e)))
        .partition(|(_, e)| {
            run.bucket
                .get(&e.name)
                .is_some_and(|o| o.crc32c == e.crc32c)
        });
    let left = undelivered.len() as u64;
    let bytes: u64 = undelivered
        .iter()
        .map(|(_, e)| spool::entry::file_bytes(e.name.len(), 0, e.size))
        .sum();
    let status = if !run.unfinished_hosts.is_empty() {
        Status::Failed(format!(
            "hosts {:?} did not finish their wind-down",
            run.unfinished_hosts
        ))
    } else if left == 0 && resurrected.is_empty() {
        Status::Held
    } else if left == 0 {
        Status::Explained(format!(
            "{} delivered entries came back after the last power loss (their removal was not yet durable); the next start removes them after an \"already exists\"",
            resurrected.len()
        ))
    } else {
        why_entries_are_left(run, &undelivered, bytes)
    };
    Invariant {
        name: "spool_ends_empty",
        statement: "Every spool ends empty, or the report says how much is left and why",
        status,
    }
}

/// Why `undelivered` entries (`bytes` in all) are left at the end: the store still
/// failing, hosts down, a recovery too recent, a drain still progressing; or a
/// failure naming a few of them when none of these holds.
fn why_entries_are_left(
    run: &RunOutput,
    undelivered: &[(&u32, &crate::inventory::Entry)],
    bytes: u64,
) -> Status {
    let left = undelivered.len() as u64;
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
    if still_failing {
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
            _ => {
                let examples: Vec<String> = undelivered
                    .iter()
                    .take(5)
                    .map(|(host, e)| format!("{} (host {host})", e.name))
                    .collect();
                Status::Failed(format!(
                    "{left} entries ({bytes} bytes) left and the drain made no progress over the last minute (e.g. {})",
                    examples.join("; ")
                ))
            }
        }
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
    // The final reopen runs with the disk's faults off: nothing excuses a failure.
    let failed_final: Vec<String> = run
        .recorder
        .inventories
        .iter()
        .filter_map(|(host, i)| {
            let error = i.open_error.as_ref()?;
            Some(format!("host {host}: the final reopen failed: {error}"))
        })
        .collect();
    let status = if !mismatches.is_empty() || !failed_final.is_empty() {
        Status::Failed([mismatches, failed_final].concat().join("; "))
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
            drained,
            ..HostSample::default()
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
