//! The mutant catalogue (`sim::mutants`): each planted bug must make a shipped
//! scenario fail, and the same scenarios must pass without it. Prints the kill
//! table; a mutant that survives fails the suite.

use std::collections::BTreeMap;

use sim::checker::Verdict;
use sim::mutants::{DiskMutant, Mutant, StoreMutant};
use sim::world::Options;

/// The shipped scenario that must kill each mutant.
fn killer(mutant: Mutant) -> &'static str {
    match mutant {
        Mutant::Disk(DiskMutant::DataNotSynced)
        | Mutant::Disk(DiskMutant::RenameNotAwaited)
        | Mutant::Disk(DiskMutant::DirSyncSkipped)
        | Mutant::Disk(DiskMutant::ListingDropsEntries) => "crash-loop",
        Mutant::Disk(DiskMutant::DirSyncErrorHidden) => "bad-disk",
        Mutant::Disk(DiskMutant::ShortWriteIgnored) | Mutant::Store(StoreMutant::LosesWrites) => {
            "demo"
        }
        Mutant::Store(StoreMutant::ConflictAsSuccess)
        | Mutant::Store(StoreMutant::ConflictSameSizeAsSuccess)
        | Mutant::Store(StoreMutant::DropsAttributes) => "conflicts",
    }
}

fn run(scenario: &str, mutant: Option<Mutant>) -> Verdict {
    let path = format!(
        "{}/../scenarios/{scenario}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let scenario = sim::scenario::load(std::path::Path::new(&path)).unwrap();
    let output = sim::world::run(
        scenario,
        Options {
            mutant,
            ..Options::default()
        },
    )
    .unwrap();
    sim::checker::check(&output)
}

fn failed(verdict: &Verdict) -> Vec<&'static str> {
    verdict
        .invariants
        .iter()
        .filter(|i| !i.held())
        .map(|i| i.name)
        .collect()
}

#[test]
fn every_mutant_is_killed_by_a_shipped_scenario_that_passes_without_it() {
    let mut baselines: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut table = String::from("| mutant | scenario | killed by |\n|---|---|---|\n");
    let mut survivors = Vec::new();
    for mutant in Mutant::ALL {
        let scenario = killer(mutant);
        baselines
            .entry(scenario)
            .or_insert_with(|| failed(&run(scenario, None)).to_vec());
        let killed_by = failed(&run(scenario, Some(mutant)));
        if killed_by.is_empty() {
            survivors.push(mutant);
        }
        table += &format!(
            "| {mutant} | {scenario} | {} |\n",
            if killed_by.is_empty() {
                "SURVIVED".to_string()
            } else {
                killed_by.join(", ")
            }
        );
    }
    println!("{table}");
    for (scenario, failures) in &baselines {
        assert!(
            failures.is_empty(),
            "{scenario} fails without any mutant: {failures:?}"
        );
    }
    assert!(
        survivors.is_empty(),
        "mutants survived: {survivors:?}\n{table}"
    );
}
