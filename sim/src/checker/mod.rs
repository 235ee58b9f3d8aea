//! The invariants, checked after every run from outside the system they judge: the
//! producers' ledger (what callers were told), the fake's bucket (what landed), each
//! host's final inventory (taken after a last power loss and a reopen, every entry
//! decoded in full: [`crate::inventory`]), and what the simulated disk says it
//! destroyed.
//!
//! | invariant | holds when |
//! |---|---|
//! | `acknowledged_writes_delivered` | every write acknowledged (stored or spooled) is in the bucket with its bytes, or set aside, or still pending in a spool with its length and crc32c, or was deleted through the relay; or (explained) its file was destroyed by the disk |
//! | `bucket_holds_only_what_was_written` | every object was issued by a producer, with the same size, crc32c and attributes, or is the other writer's object a producer's write found under its name; no write replaced another writer's object |
//! | `callers_told_and_counted` | no caller is left without an answer, and each boot's `uploads_total` equals what its callers were told (with the relay: its counters over all its boots, less answers lost to a process that died) |
//! | `unknown_only_at_crashes` | writes without an answer exist only where a process died mid-upload |
//! | `spool_ends_empty` | every spool is empty at the end, or the store was still failing (explained) or the drain was still progressing (explained) |
//! | `gauges_match_disk_after_reopen` | after every open, `spool_files`/`spool_bytes` equal the entry files on the simulated disk; the final inventory's reopen (faults off) succeeds |
//! | `set_aside_only_for_a_reason` | an acknowledged write is dead-lettered only when the store refused it for good (poison, or a conflict), quarantined only when the disk damaged its file, and no poison object is in the bucket |
//! | `conflicts_caught` | a write whose name another writer took first with other bytes is never told stored and never removed from a spool as if it had landed: its caller is told rejected, or it is dead-lettered (or still pending) |
//! | `overwrites_land_in_order` (only with `workload.overwrites`) | no name ends in the bucket with the bytes of a write answered before another acknowledged write of it began: each name ends with its last acknowledged write's bytes, or with those of a write that overlapped it |
//! | `relay_reads_see_acknowledged_writes` (only with reads, lists or deletes through the relay) | every read through the relay gets the write's bytes; a write the relay acknowledged before a read or list, and that ends in the bucket or a spool, is found by it; a write deleted through the relay is found by no later read or list, and is gone at the end (`reads.rs`) |
//!
//! A failure names the writes it concerns: object name, host, and the simulated
//! times the write was issued and answered.

mod invariants;
mod names;
mod reads;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::ledger::{Answers, Told};
use crate::recorder::HostSample;
use crate::scenario::EventKind;
use crate::workload::{Shape, object_attributes, parse_object_name};
use crate::world::RunOutput;
use fake_gcs::ObjectRecord;
use invariants::*;
use names::Names;
use reads::Deletes;
pub use reads::ReadTally;

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
    /// Acknowledged writes found nowhere that were deleted through the relay
    /// (`[relay] deletes_per_write`).
    #[serde(skip)]
    pub deleted_through_relay: u64,
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
    /// Acknowledged writes whose name holds the bytes of a write of it that may
    /// have come after them (`workload.overwrites`).
    #[serde(skip)]
    pub overwritten: u64,
    /// Acknowledged writes whose name holds the bytes of a write of it answered
    /// before they began: an older write landed over a newer one.
    #[serde(skip)]
    pub overwritten_out_of_order: u64,
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
    /// What reads and lists through the relay got, when the scenario sends any.
    pub relay_reads: Option<ReadTally>,
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
    let names = Names::of(&Shape::of(&run.scenario), &run.ledger);
    let mut conflict_examples = Vec::new();
    look_in_bucket(
        run,
        &names,
        &others,
        &mut found,
        &mut tally,
        &mut conflict_examples,
    );
    look_in_inventories(run, &names, &others, &mut found, &mut tally);
    look_at_disk_damage(run, &names, &mut found);
    let deletes = Deletes::of(run);
    let seen = Seen {
        names: &names,
        others: &others,
        found: &found,
        deletes: &deletes,
    };
    let followed = follow_each_write(run, &seen, &mut tally);
    conflict_examples.extend(followed.conflict_examples);
    conflict_examples.truncate(10);

    let relay_reads = reads::relay_reads_see_acknowledged_writes(run, &found, &others, &deletes);
    let mut invariants = vec![
        acknowledged_writes_delivered(&tally, &followed.lost_examples),
        bucket_holds_only_what_was_written(&tally),
        callers_told_and_counted(run, followed.in_flight),
        unknown_only_at_crashes(run, &tally),
        spool_ends_empty(run),
        gauges_match_disk(run),
        set_aside_only_for_a_reason(&tally, &followed.set_aside_examples),
        conflicts_caught(&tally, &conflict_examples),
    ];
    if run.scenario.workload.overwrites > 0.0 {
        invariants.push(overwrites_land_in_order(
            &tally,
            &followed.out_of_order_examples,
        ));
    }
    let relay_reads = relay_reads.map(|(invariant, tally)| {
        invariants.push(invariant);
        tally
    });
    Verdict {
        invariants,
        tally,
        lost_examples: followed.lost_examples,
        set_aside_examples: followed.set_aside_examples,
        conflict_examples,
        relay_reads,
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
    names: &Names,
    others: &OtherWriters,
    found: &mut Found,
    tally: &mut Tally,
    examples: &mut Vec<String>,
) {
    let ledger = &run.ledger;
    let shape = Shape::of(&run.scenario);
    for object in run.bucket.records() {
        let write = write_named(&shape, &object.name).and_then(|(host, first, poison)| {
            let seq = names.holding(ledger, host, first, object.size, object.crc32c);
            Some((host, seq, poison, ledger.get(host, seq)?))
        });
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
    names: &Names,
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
                let Some((host, first, poison)) = write_named(&shape, &entry.name) else {
                    continue;
                };
                let seq = names.holding(&run.ledger, host, first, entry.size, entry.crc32c);
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
fn look_at_disk_damage(run: &RunOutput, names: &Names, found: &mut Found) {
    for disk in &run.disks {
        for damage in &disk.damage {
            let name = spool::entry::decode_header(&damage.original).map(|(h, _)| h.name);
            // Every write of the name: which one's bytes the file held is gone.
            if let Ok(name) = name
                && let Some((host, first, _)) = write_named(&Shape::of(&run.scenario), &name)
            {
                for seq in names.writes(host, first) {
                    if let Some(f) = found.get_mut(host, seq) {
                        *f |= DAMAGED;
                    }
                }
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
    out_of_order_examples: Vec<String>,
}

/// What the checker saw of the run before following each write.
struct Seen<'a> {
    names: &'a Names,
    others: &'a OtherWriters,
    found: &'a Found,
    deletes: &'a Deletes,
}

impl Seen<'_> {
    /// The write of `(host, seq)`'s name whose bytes the bucket holds, if another.
    fn overwritten_by(&self, shape: &Shape, host: u32, seq: u64) -> Option<u64> {
        let first = shape.first_of_name(host, seq);
        self.names.writes(host, first).find(|&other| {
            other != seq && self.found.0[host as usize][other as usize] & IN_BUCKET != 0
        })
    }
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
fn follow_each_write(run: &RunOutput, seen: &Seen, tally: &mut Tally) -> Followed {
    let shape = Shape::of(&run.scenario);
    let (others, found, deletes) = (seen.others, seen.found, seen.deletes);
    let mut followed = Followed {
        in_flight: 0,
        lost_examples: Vec::new(),
        set_aside_examples: Vec::new(),
        conflict_examples: Vec::new(),
        out_of_order_examples: Vec::new(),
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
            } else if let Some(last) = seen.overwritten_by(&shape, host as u32, seq as u64) {
                let last_write = &h.writes[last as usize];
                if names::began_after(w, last_write) {
                    tally.overwritten_out_of_order += 1;
                    if followed.out_of_order_examples.len() < 10 {
                        followed.out_of_order_examples.push(format!(
                            "{} was overwritten by the earlier {}",
                            describe(&shape, host, seq, w),
                            describe(&shape, host, last as usize, last_write)
                        ));
                    }
                } else {
                    tally.overwritten += 1;
                }
            } else if conflict {
                tally.conflicts_removed += 1;
                example(&mut followed.conflict_examples);
            } else if deletes.sent(host as u32, seq as u64) {
                // Deleted through the relay (or maybe: its DELETE failed); what a
                // DELETE answered must leave is judged in `reads.rs`.
                tally.deleted_through_relay += 1;
            } else {
                tally.lost += 1;
                example(&mut followed.lost_examples);
            }
        }
    }
    followed
}
