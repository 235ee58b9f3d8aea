//! `scenarios/relay.toml`: two app hosts write through the production spool-relay,
//! which loses power mid-outage (at a time, and in the middle of a disk operation),
//! restarts and is deployed. Every invariant holds, the relay really lost power,
//! and the relay really spooled writes and refused them once full: its callers were
//! told `spooled` and `rejected`, and its own `spool_uploads_total` counted them.

use std::path::Path;

use sim::ledger::Told;
use sim::scenario::{EventKind, When};

/// Runs `scenario` and asserts that every invariant held.
fn run_checked(
    scenario: sim::scenario::Scenario,
) -> (sim::world::RunOutput, sim::checker::Verdict) {
    let output = sim::world::run(scenario, Default::default()).unwrap();
    let verdict = sim::checker::check(&output);
    for invariant in &verdict.invariants {
        assert!(
            invariant.held(),
            "{}: {:?}",
            invariant.name,
            invariant.status
        );
    }
    (output, verdict)
}

#[test]
fn writes_through_a_relay_that_loses_power_mid_outage_are_never_lost() {
    let path = format!("{}/../scenarios/relay.toml", env!("CARGO_MANIFEST_DIR"));
    let scenario = sim::scenario::load(Path::new(&path)).unwrap();
    let relay = scenario.relay_host().expect("the scenario puts a relay in");
    assert!(
        (scenario.events.iter())
            .any(|e| matches!(e.when, When::AfterDiskOps(_)) && e.hosts == [relay]),
        "the relay is meant to lose power at a disk operation too"
    );
    let (output, verdict) = run_checked(scenario);

    let power_losses = (output.recorder.timeline.iter())
        .filter(|e| e.host == relay && e.kind == EventKind::Crash)
        .count();
    assert!(
        power_losses >= 2,
        "the relay lost power {power_losses} times"
    );
    let disk = &output.disks[relay as usize];
    assert!(
        disk.operations > 6000,
        "{} disk operations",
        disk.operations
    );
    // App hosts writing through the relay touch no disk.
    assert!(
        output.disks[..relay as usize]
            .iter()
            .all(|d| d.operations == 0)
    );

    let told = |what: Told| {
        (output.ledger.hosts().iter())
            .flat_map(|h| &h.writes)
            .filter(|w| w.told == what)
            .count() as u64
    };
    let counted = |outcome: &str| -> u64 {
        (output.recorder.boot_uploads.iter())
            .filter(|((host, _), _)| *host == relay)
            .map(|(_, counts)| counts.get(outcome).copied().unwrap_or(0))
            .sum()
    };
    assert!(told(Told::Spooled) > 100, "{} spooled", told(Told::Spooled));
    assert!(counted("spooled") >= told(Told::Spooled));
    assert!(told(Told::Stored) > 100 && counted("stored") >= told(Told::Stored));
    // The relay's spool fills: 503 is backpressure to its callers.
    assert!(told(Told::Rejected) > 100 && counted("rejected") > 100);
    assert!(
        told(Told::Unknown) > 0,
        "no write was in flight at a relay crash"
    );
    assert!(
        output.recorder.relay_unreached > 0,
        "no write found the relay down"
    );

    // The app hosts keep no spool; the relay's is the one inventory, and it ends
    // with nothing pending.
    let inventories: Vec<u32> = output.recorder.inventories.keys().copied().collect();
    assert_eq!(inventories, vec![relay]);
    assert_eq!(verdict.tally.lost, 0);
    assert!(verdict.tally.in_bucket > 1000);
}

#[test]
fn bugs_planted_in_the_relays_spool_and_upstream_client_are_caught() {
    // The same scenario must fail when the relay's disk or its client to the store
    // lies: the invariants judge the relay, not just the app hosts around it.
    use sim::mutants::{DiskMutant, Mutant, StoreMutant};
    let path = format!("{}/../scenarios/relay.toml", env!("CARGO_MANIFEST_DIR"));
    for mutant in [
        Mutant::Disk(DiskMutant::DirSyncSkipped),
        Mutant::Store(StoreMutant::LosesWrites),
        Mutant::Store(StoreMutant::DropsAttributes),
    ] {
        let scenario = sim::scenario::load(Path::new(&path)).unwrap();
        let options = sim::world::Options {
            mutant: Some(mutant),
            ..Default::default()
        };
        let output = sim::world::run(scenario, options).unwrap();
        let verdict = sim::checker::check(&output);
        let killed_by: Vec<&str> = (verdict.invariants.iter())
            .filter(|i| !i.held())
            .map(|i| i.name)
            .collect();
        println!("{mutant}: killed by {killed_by:?}");
        assert!(
            !killed_by.is_empty(),
            "{mutant} survived the relay scenario"
        );
    }
}

#[test]
fn reads_and_lists_through_the_relay_see_every_acknowledged_write_across_its_power_loss() {
    // scenarios/relay-storm.toml: the app hosts read their recent objects and list
    // their prefix through the relay between their writes, while the store fails
    // every write and the relay loses power and restarts with objects spooled.
    let path = format!(
        "{}/../scenarios/relay-storm.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let scenario = sim::scenario::load(Path::new(&path)).unwrap();
    let relay = scenario.relay_host().expect("the scenario puts a relay in");
    let (output, verdict) = run_checked(scenario);
    assert!(
        (verdict.invariants.iter()).any(|i| i.name == "relay_reads_see_acknowledged_writes"),
        "the reads through the relay were not judged"
    );
    let reads = verdict
        .relay_reads
        .clone()
        .expect("the scenario reads through the relay");
    println!("{reads:?}");
    assert!(reads.reads > 2000 && reads.from_spool > 100, "{reads:?}");
    assert!(
        reads.lists > 100 && reads.names_listed > 50_000,
        "{reads:?}"
    );
    assert!(reads.deletes > 200 && reads.deleted > 200, "{reads:?}");
    assert!(verdict.tally.deleted_through_relay > 200);
    assert_eq!(verdict.tally.lost, 0);

    // The relay lost power with objects spooled, and reads after its restart found
    // objects an earlier process had acknowledged, in its spool: learned from the
    // entries, not remembered.
    let restarted_ms = (output.recorder.timeline.iter())
        .filter(|e| e.host == relay && e.kind == EventKind::Crash)
        .map(|e| (e.at + e.down_for).as_millis() as u32)
        .next()
        .expect("the relay loses power");
    let spooled_before = |host: u32, seq: u64| {
        output
            .ledger
            .get(host, seq)
            .is_some_and(|w| w.told == Told::Spooled && w.told_ms < restarted_ms - 2000)
    };
    let recovered = (output.recorder.relay_reads.iter())
        .filter(|r| r.issued_ms > restarted_ms && spooled_before(r.host, r.seq))
        .filter(|r| {
            matches!(
                r.answer,
                sim::recorder::ReadAnswer::Bytes {
                    from_spool: true,
                    ..
                }
            )
        })
        .count();
    assert!(
        recovered > 20,
        "{recovered} reads of objects spooled before the power loss"
    );

    // The invariant can fail: each way a relay could answer a reader wrongly,
    // planted in what the readers recorded, is caught.
    the_reads_invariant_catches_wrong_answers(output);
}

/// Plants one wrong answer at a time in `output`'s recorded reads and lists and
/// checks that `relay_reads_see_acknowledged_writes` fails for each.
fn the_reads_invariant_catches_wrong_answers(mut output: sim::world::RunOutput) {
    use sim::recorder::ReadAnswer;
    let reads_held = |run: &sim::world::RunOutput| {
        let verdict = sim::checker::check(run);
        let invariant = (verdict.invariants.iter())
            .find(|i| i.name == "relay_reads_see_acknowledged_writes")
            .unwrap();
        invariant.held()
    };
    assert!(reads_held(&output));
    // A read from the spool sent after the write's caller was told `spooled`, of a
    // write never deleted.
    let deleted = |host: u32, seq: u64| {
        (output.recorder.relay_deletes.iter()).any(|d| (d.host, d.seq) == (host, seq))
    };
    let from_spool = (output.recorder.relay_reads.iter())
        .position(|r| {
            let told = output.ledger.get(r.host, r.seq).unwrap();
            matches!(
                r.answer,
                ReadAnswer::Bytes {
                    from_spool: true,
                    ..
                }
            ) && told.told == Told::Spooled
                && told.told_ms <= r.issued_ms
                && !deleted(r.host, r.seq)
        })
        .unwrap();
    let full_list = (output.recorder.relay_lists.iter())
        .position(|l| l.names.as_ref().is_some_and(|n| n.len() > 100))
        .unwrap();
    type Plant = fn(&mut sim::recorder::Recorder, usize, usize);
    let plants: [(&str, Plant); 5] = [
        ("a spooled object read as 404", |r, read, _| {
            r.relay_reads[read].answer = ReadAnswer::NotFound
        }),
        ("other bytes", |r, read, _| {
            if let ReadAnswer::Bytes { crc32c, .. } = &mut r.relay_reads[read].answer {
                *crc32c ^= 1;
            }
        }),
        ("names left out of a list", |r, _, list| {
            r.relay_lists[list].names.as_mut().unwrap().truncate(10);
        }),
        ("a name listed twice", |r, _, list| {
            let names = r.relay_lists[list].names.as_mut().unwrap();
            names.insert(50, names[50].clone());
        }),
        (
            "an object deleted yet read and in the bucket",
            |r, read, _| {
                let read = &r.relay_reads[read];
                r.relay_deletes.push(sim::recorder::RelayDelete {
                    host: read.host,
                    seq: read.seq,
                    issued_ms: 1,
                    answered_ms: 1,
                    answer: sim::recorder::DeleteAnswer::Deleted,
                });
            },
        ),
    ];
    let recorded = output.recorder.clone();
    for (wrong, plant) in plants {
        plant(&mut output.recorder, from_spool, full_list);
        assert!(!reads_held(&output), "{wrong} passed the check");
        output.recorder = recorded.clone();
    }
}

#[test]
fn overwrites_through_the_relay_land_in_order_across_its_power_loss() {
    // scenarios/overwrites.toml: three writes in ten rewrite a recent name, without
    // a precondition, while the store fails most writes and the relay loses power
    // and restarts with several writes of one name spooled.
    let path = format!(
        "{}/../scenarios/overwrites.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let scenario = sim::scenario::load(Path::new(&path)).unwrap();
    let (mut output, verdict) = run_checked(scenario);
    assert!(
        (verdict.invariants.iter()).any(|i| i.name == "overwrites_land_in_order"),
        "the order of overwrites was not judged"
    );
    let tally = &verdict.tally;
    assert!(tally.overwritten > 500, "{tally:?}");
    assert!(
        tally.told.stored > 1000 && tally.told.spooled > 1000,
        "{tally:?}"
    );
    assert_eq!(tally.lost, 0);

    // The invariant can fail: a write overwritten by one of its name's writes that
    // was answered before it began is caught.
    let shape = sim::workload::Shape::of(&output.scenario);
    let mut writes_of_name = std::collections::BTreeMap::<(u32, u64), Vec<u64>>::new();
    for (host, h) in output.ledger.hosts().iter().enumerate() {
        for seq in 0..h.writes.len() as u64 {
            let first = shape.first_of_name(host as u32, seq);
            writes_of_name
                .entry((host as u32, first))
                .or_default()
                .push(seq);
        }
    }
    let (host, winner, loser) = (output.bucket.records())
        .find_map(|object| {
            let (host, first, _) = sim::workload::parse_object_name(&object.name)?;
            let writes = &writes_of_name[&(host, first)];
            let write = |seq: &&u64| output.ledger.get(host, **seq).unwrap();
            let winner = *writes.iter().find(|s| write(s).crc32c == object.crc32c)?;
            let loser = *writes
                .iter()
                .find(|s| **s != winner && write(s).told.acknowledged())?;
            Some((host, winner, loser))
        })
        .expect("a name written twice, both acknowledged");
    let answered_ms = output.ledger.get(host, winner).unwrap().told_ms;
    let planted = output.ledger.get_mut(host, loser).unwrap();
    planted.issued_ms = answered_ms + 1;
    planted.told_ms = planted.told_ms.max(planted.issued_ms);
    let verdict = sim::checker::check(&output);
    let order = (verdict.invariants.iter())
        .find(|i| i.name == "overwrites_land_in_order")
        .unwrap();
    assert!(
        !order.held(),
        "an older write landing last passed: {order:?}"
    );
}
