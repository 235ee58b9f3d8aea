//! The eight invariants every run is judged by (the ninth, for reads through the
//! relay, is `reads.rs`), each judged from the tally of every write and from what the
//! run recorded; each returns whether it held, and the writes it concerns if not.

use super::*;

pub(super) fn acknowledged_writes_delivered(tally: &Tally, lost_examples: &[String]) -> Invariant {
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

pub(super) fn bucket_holds_only_what_was_written(tally: &Tally) -> Invariant {
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

pub(super) fn conflicts_caught(tally: &Tally, examples: &[String]) -> Invariant {
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

pub(super) fn overwrites_land_in_order(tally: &Tally, examples: &[String]) -> Invariant {
    Invariant {
        name: "overwrites_land_in_order",
        statement: "The writes of one name land in the order their callers saw: no name ends in the bucket with the bytes of a write answered before another acknowledged write of it began",
        status: Status::failed_if(tally.overwritten_out_of_order > 0, || {
            format!(
                "{} acknowledged writes were overwritten by an earlier write of their name ({} overwritten in order) (e.g. {})",
                tally.overwritten_out_of_order,
                tally.overwritten,
                examples.join("; ")
            )
        }),
    }
}

pub(super) fn set_aside_only_for_a_reason(tally: &Tally, examples: &[String]) -> Invariant {
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
pub(super) type ToldPerBoot = BTreeMap<(u32, u16), BTreeMap<&'static str, u64>>;

pub(super) const OUTCOMES: [&str; 4] = ["stored", "spooled", "rejected", "failed"];

pub(super) fn callers_told_and_counted(run: &RunOutput, in_flight: u64) -> Invariant {
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
pub(super) fn counted_per_boot(run: &RunOutput, mut told: ToldPerBoot) -> Vec<String> {
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
pub(super) fn counted_by_relay(run: &RunOutput, relay: u32, told: &ToldPerBoot) -> Vec<String> {
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

pub(super) fn unknown_only_at_crashes(run: &RunOutput, tally: &Tally) -> Invariant {
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

pub(super) fn spool_ends_empty(run: &RunOutput) -> Invariant {
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
pub(super) fn why_entries_are_left(
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
pub(super) fn drain_progress(run: &RunOutput) -> Option<f64> {
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
pub(super) fn drained_across_boots<'a>(samples: impl Iterator<Item = &'a HostSample>) -> u64 {
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

pub(super) fn gauges_match_disk(run: &RunOutput) -> Invariant {
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
