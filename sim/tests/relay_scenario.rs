//! `scenarios/relay.toml`: two app hosts write through the production spool-relay,
//! which loses power mid-outage (at a time, and in the middle of a disk operation),
//! restarts and is deployed. Every invariant holds, the relay really lost power,
//! and the relay really spooled writes and refused them once full: its callers were
//! told `spooled` and `rejected`, and its own `spool_uploads_total` counted them.

use std::path::Path;

use sim::ledger::Told;
use sim::scenario::{EventKind, When};

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
