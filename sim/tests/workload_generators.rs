//! The workload's generators at the seed that found hard names past Cloud
//! Storage's 1,024 bytes (issue 42): every such name is now one the spool takes
//! (`spool::name::check_writable`, the rule the uploader, the spool and the relay
//! apply), and `scenarios/hard-names.toml` at that seed runs to completion in the
//! debug build with every invariant.

use std::path::Path;

use sim::workload::{Shape, parse_object_name};

/// Writes whose hard names went past 1,024 bytes at seed 99173 before issue 42's
/// fix, as `(host, seq, poison)`: the debug build stopped at `workload.rs`'s
/// assertion, and a release build's spool refused each as too long.
const OVERSHOT_AT_99173: [(u32, u64, bool); 12] = [
    (0, 13207, false),
    (1, 9064, true),
    (1, 9784, false),
    (2, 16218, false),
    (3, 8745, true),
    (3, 15379, false),
    (4, 5051, false),
    (5, 17895, false),
    (7, 109, false),
    (7, 6023, true),
    (7, 7499, true),
    (7, 9123, true),
];

fn hard(seed: u64) -> Shape {
    Shape {
        hard_names: true,
        attributes: true,
        conflicts: 0.1,
        seed,
    }
}

#[test]
fn the_names_that_went_past_1024_bytes_at_seed_99173_are_ones_the_spool_takes() {
    for (host, seq, poison) in OVERSHOT_AT_99173 {
        let name = hard(99173).name(host, seq, poison);
        assert!(
            spool::name::check_writable(&name).is_ok(),
            "h{host} #{seq} (poison: {poison}): {} bytes, {:?}",
            name.len(),
            spool::name::check_writable(&name)
        );
        assert_eq!(parse_object_name(&name), Some((host, seq, poison)));
    }
}

#[test]
fn the_hard_names_scenario_at_seed_99173_runs_to_completion_with_every_invariant() {
    let path = format!(
        "{}/../scenarios/hard-names.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let scenario = sim::scenario::load(Path::new(&path)).unwrap();
    assert_eq!(scenario.seed, 99173);
    // 1,026 bytes before the fix.
    assert_eq!(Shape::of(&scenario).name(7, 109, false).len(), 1024);
    assert!(scenario.workload.hard_names && scenario.workload.attributes);
    assert!(scenario.workload.conflicts > 0.0 && scenario.workload.poison > 0.0);
    let output = sim::world::run(scenario, Default::default()).unwrap();

    // The scenario reaches host 7's write 109, not as poison: the write whose name
    // went past the limit.
    let write = output.ledger.hosts()[7].writes.get(109);
    assert!(
        write.is_some_and(|w| !w.poison),
        "host 7's write 109: {write:?}"
    );
    let verdict = sim::checker::check(&output);
    for invariant in &verdict.invariants {
        assert!(
            invariant.held(),
            "{}: {:?}",
            invariant.name,
            invariant.status
        );
    }
}
