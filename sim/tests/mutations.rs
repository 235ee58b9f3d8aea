//! The bench can fail: a spool with a deliberate bug (the `mutations` feature) is
//! caught by the invariants, while the same scenario passes with the real spool.

use sim::checker::{Status, Verdict};
use sim::world::{Options, RunOutput};
use spool::Mutation;

/// A short outage with a power loss in the middle: writes are spooled, then the
/// host loses power, then the store recovers and the spool drains.
const SCENARIO: &str = r#"
name = "mutation"
seed = 11
start = 2026-10-08T10:00:00Z
duration = "40s"

[workload]
rate = 40
stop_at = "30s"
size = "2KiB"

[uploader]
put_timeout = "1s"

[drainer]
workers = 2
base = "200ms"
cap = "1s"

[[fault]]
from = "5s"
until = "20s"
mix = { "503" = 1.0 }

[[event]]
at = "12s"
kind = "crash"
down_for = "1s"
"#;

fn run(mutation: Option<Mutation>) -> (RunOutput, Verdict) {
    let scenario = sim::scenario::parse("mutation.toml", SCENARIO).unwrap();
    let output = sim::world::run(
        scenario,
        Options {
            mutation,
            ..Options::default()
        },
    )
    .unwrap();
    let verdict = sim::checker::check(&output);
    (output, verdict)
}

fn status<'a>(verdict: &'a Verdict, name: &str) -> &'a Status {
    &verdict
        .invariants
        .iter()
        .find(|i| i.name == name)
        .unwrap()
        .status
}

#[test]
fn the_real_spool_passes_the_scenario_the_mutants_fail() {
    let (_, verdict) = run(None);
    assert!(verdict.passed(), "{:#?}", verdict.invariants);
    assert!(
        verdict.tally.told.spooled > 100,
        "the scenario must spool: {:?}",
        verdict.tally
    );
}

#[test]
fn acknowledging_a_put_before_the_directory_sync_loses_writes_at_power_loss() {
    let (_, verdict) = run(Some(Mutation::AckBeforeDirSync));
    assert!(!verdict.passed());
    assert!(verdict.tally.lost > 0, "{:?}", verdict.tally);
    assert!(
        matches!(status(&verdict, "acknowledged_writes_delivered"), Status::Failed(d) if d.contains("acknowledged writes are nowhere")),
        "{:?}",
        status(&verdict, "acknowledged_writes_delivered")
    );
}

#[test]
fn a_drainer_that_removes_before_uploading_loses_writes_during_an_outage() {
    let (_, verdict) = run(Some(Mutation::RemoveBeforeUpload));
    assert!(!verdict.passed());
    assert!(verdict.tally.lost > 0, "{:?}", verdict.tally);
    assert!(matches!(
        status(&verdict, "acknowledged_writes_delivered"),
        Status::Failed(_)
    ));
}
