//! Tests of the scenario format: parsing, checks, and where errors point.

use spool::Jitter;

use super::*;

const GOOD: &str = r#"
name = "t"
seed = 7
start = 2026-10-08T10:00:00Z
duration = "1h"

[workload]
rate = 50
size = { min = "256B", max = "4KiB" }

[drainer]
workers = 2
base = "100ms"
cap = "2s"
jitter = "decorrelated"

[[fault]]
from = 2026-10-08T11:00:00Z
until = "2026-10-08T11:30:00Z"
mix = { "503" = 0.5, hang = 0.5 }

[[event]]
at = "30m"
kind = "crash"
down_for = "10s"
"#;

fn err(text: &str) -> ScenarioError {
    parse("s.toml", text).unwrap_err()
}

#[test]
fn a_good_scenario_converts_times_to_offsets() {
    let s = parse("s.toml", GOOD).unwrap();
    assert_eq!(s.duration, Duration::from_secs(3600));
    assert_eq!(s.tick, Duration::from_millis(10));
    assert_eq!(s.faults.windows[0].from, Duration::from_secs(3600));
    assert_eq!(s.faults.windows[0].until, Some(Duration::from_secs(5400)));
    assert_eq!(s.events[0].at, Duration::from_secs(1800));
    assert_eq!(s.events[0].kind, EventKind::Crash);
    assert_eq!(s.drainer.backoff.jitter, Jitter::Decorrelated);
    assert_eq!(s.drainer.workers, 2);
    assert_eq!(
        s.workload.size,
        SizeDist::LogUniform {
            min: 256,
            max: 4096
        }
    );
    assert_eq!(s.wall_ms(Duration::ZERO), 1_791_453_600_000);
}

#[test]
fn an_unknown_key_names_its_line() {
    let e = err(&GOOD.replace("rate = 50", "rat = 50"));
    assert_eq!(e.line, Some(8), "{e}");
    assert!(e.to_string().contains("unknown field `rat`"), "{e}");
    assert!(e.to_string().starts_with("s.toml:8: unknown field"), "{e}");
}

#[test]
fn a_wrong_type_names_its_line() {
    let e = err(&GOOD.replace("workers = 2", "workers = \"two\""));
    assert_eq!(e.line, Some(12), "{e}");
}

#[test]
fn a_bad_value_names_the_field_and_its_line() {
    let e = err(&GOOD.replace("cap = \"2s\"", "cap = \"10ms\""));
    assert_eq!(
        (e.field.as_deref(), e.line),
        (Some("drainer.cap"), Some(14)),
        "{e}"
    );
    assert!(e.to_string().contains("at least drainer.base"), "{e}");

    let e = err(&GOOD.replace("jitter = \"decorrelated\"", "jitter = \"fuzzy\""));
    assert_eq!(e.field.as_deref(), Some("drainer.jitter"), "{e}");

    let e = err(&GOOD.replace("kind = \"crash\"", "kind = \"explode\""));
    assert_eq!(
        (e.field.as_deref(), e.line),
        (Some("event[0].kind"), Some(24)),
        "{e}"
    );
}

#[test]
fn a_bad_fault_window_names_the_window() {
    let e = err(&GOOD.replace("hang = 0.5", "hang = 0.9"));
    assert_eq!(e.field.as_deref(), Some("fault[0].mix"), "{e}");
    assert_eq!(e.line, Some(20), "{e}");
    assert!(
        e.to_string()
            .starts_with("s.toml:20: fault[0].mix: probabilities"),
        "{e}"
    );
    let e = err(&GOOD.replace("from = 2026-10-08T11:00:00Z", "from = 2026-10-07T11:00:00Z"));
    assert!(e.to_string().contains("before the scenario start"), "{e}");
}

#[test]
fn an_event_for_a_missing_host_is_refused() {
    let e = err(&GOOD.replace("down_for = \"10s\"", "down_for = \"10s\"\nhost = 3"));
    assert_eq!(e.field.as_deref(), Some("event[0].host"), "{e}");
}

#[test]
fn the_relay_is_the_host_after_the_app_hosts() {
    let text = format!(
        "{GOOD}\n[[event]]\nat = \"40m\"\nkind = \"crash\"\nhost = \"relay\"\n\n[relay]\nenabled = true\n"
    );
    let s = parse("s.toml", &text).unwrap();
    assert_eq!(s.relay_host(), Some(1));
    assert_eq!(s.spool_hosts(), 1);
    assert_eq!(s.events[1].hosts, vec![1]);
    assert_eq!(s.relay.unwrap().retry_after, Duration::from_secs(1));
    assert_eq!(parse("s.toml", GOOD).unwrap().relay, None);
}

#[test]
fn reads_through_the_relay_are_a_rate_per_write_within_bounds() {
    let relay = |extra: &str| format!("{GOOD}\n[relay]\nenabled = true\n{extra}");
    let s = parse(
        "s.toml",
        &relay("reads_per_write = 1.5\nlists_per_write = 0.05\n"),
    )
    .unwrap();
    let options = s.relay.unwrap();
    assert_eq!(
        (options.reads_per_write, options.lists_per_write),
        (1.5, 0.05)
    );
    assert_eq!(
        parse("s.toml", &relay(""))
            .unwrap()
            .relay
            .unwrap()
            .reads_per_write,
        0.0
    );
    let deletes = parse("s.toml", &relay("deletes_per_write = 0.1\n")).unwrap();
    assert_eq!(deletes.relay.unwrap().deletes_per_write, 0.1);
    let e = err(&relay("deletes_per_write = 20\n"));
    assert_eq!(e.field.as_deref(), Some("relay.deletes_per_write"), "{e}");
    let e = err(&relay("lists_per_write = -1\n"));
    assert_eq!(e.field.as_deref(), Some("relay.lists_per_write"), "{e}");
    let e = err(&relay("reads_per_write = 11\n"));
    assert!(
        e.to_string().contains("must be from 0 to 10 (got 11)"),
        "{e}"
    );
    let e = err(&format!("{GOOD}\n[relay]\nreads_per_write = 1\n"));
    assert_eq!(e.field.as_deref(), Some("relay"), "{e}");
}

#[test]
fn a_relay_event_needs_the_relay_and_app_hosts_have_no_disk_under_it() {
    let e = err(&GOOD.replace("down_for = \"10s\"", "down_for = \"10s\"\nhost = \"relay\""));
    assert_eq!(e.field.as_deref(), Some("event[0].host"), "{e}");
    assert!(e.to_string().contains("[relay] enabled = true"), "{e}");
    let at_disk_op = GOOD.replace("at = \"30m\"", "after_disk_ops = 100");
    let e = err(&format!("{at_disk_op}\n[relay]\nenabled = true\n"));
    assert_eq!(e.field.as_deref(), Some("event[0].after_disk_ops"), "{e}");
    let e = err(&format!("{GOOD}\n[relay]\nretry_after = \"2s\"\n"));
    assert_eq!(e.field.as_deref(), Some("relay"), "{e}");
    assert!(e.line.is_some(), "{e}");
}

#[test]
fn log_uniform_mean_is_between_the_bounds() {
    let mean = SizeDist::LogUniform {
        min: 256,
        max: 4096,
    }
    .mean();
    assert!((1300.0..1400.0).contains(&mean), "{mean}");
    assert_eq!(SizeDist::Fixed(10).mean(), 10.0);
}

#[test]
fn a_crash_right_after_the_nth_disk_operation_of_a_kind() {
    let at_op = |keys: &str| GOOD.replace("at = \"30m\"", keys);
    let s = parse("s.toml", &at_op("after_disk_op = \"rename\"\nnth = 3")).unwrap();
    assert_eq!(
        s.events[0].when,
        When::AfterDiskOp {
            kind: OpKind::Rename,
            nth: 3
        }
    );
    assert_eq!(s.events[0].at, Duration::MAX);
    let s = parse("s.toml", &at_op("after_disk_op = \"mkdir\"")).unwrap();
    assert_eq!(
        s.events[0].when,
        When::AfterDiskOp {
            kind: OpKind::Mkdir,
            nth: 1
        }
    );
    for (keys, field, says) in [
        ("after_disk_op = \"fsync\"", "after_disk_op", "sync_file"),
        ("after_disk_op = \"write\"\nnth = 0", "nth", "at least 1"),
        ("nth = 2", "nth", "give after_disk_op too"),
        (
            "after_disk_op = \"write\"\nafter_disk_ops = 9",
            "after_disk_ops",
            "exactly one",
        ),
    ] {
        let e = err(&at_op(keys));
        assert_eq!(
            e.field.as_deref(),
            Some(&*format!("event[0].{field}")),
            "{e}"
        );
        assert!(e.to_string().contains(says), "{e}");
        assert!(e.line.is_some(), "{e}");
    }
    let restart = at_op("after_disk_op = \"write\"").replace("\"crash\"", "\"restart\"");
    let e = err(&restart);
    assert_eq!(e.field.as_deref(), Some("event[0].after_disk_op"), "{e}");
}

#[test]
fn a_fault_window_drawn_per_seed_parses_and_draws_the_seeds_shape() {
    let text = r#"
name = "shapes"
seed = 1
start = 2026-10-08T10:00:00Z
duration = "10h"
[workload]
rate = 5
size = "1KiB"
[[fault]]
from = { median = "1h", p99 = "3h" }
length = { one_of = ["30m", "2h"] }
mix = { "503" = 1.0 }
"#;
    let mut s = parse("shapes.toml", text).unwrap();
    // Until a run draws, the window holds its typical start and length.
    let w = &s.faults.windows[0];
    assert_eq!(
        (w.from, w.until),
        (Duration::from_secs(3600), Some(Duration::from_secs(5400)))
    );
    let mut shapes = std::collections::BTreeSet::new();
    for seed in 0..40 {
        s.seed = seed;
        let mut drawn = s.clone();
        drawn.draw_fault_windows();
        let w = &drawn.faults.windows[0];
        let length = w.until.unwrap() - w.from;
        assert!(length == Duration::from_secs(1800) || length == Duration::from_secs(7200));
        shapes.insert((w.from.as_millis(), length.as_millis()));
    }
    assert!(shapes.len() > 20, "seeds drew {} shapes", shapes.len());

    let both = text.replace("length = ", "until = \"5h\"\nlength = ");
    let err = parse("shapes.toml", &both).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("fault[0].length"), "{err}");
}

#[test]
fn overwrites_are_a_probability_and_not_yet_combined_with_conflicts_or_poison() {
    let with = |extra: &str| GOOD.replace("rate = 50", &format!("rate = 50\n{extra}"));
    let s = parse("s.toml", &with("overwrites = 0.25")).unwrap();
    assert_eq!(s.workload.overwrites, 0.25);
    assert_eq!(parse("s.toml", GOOD).unwrap().workload.overwrites, 0.0);
    let e = err(&with("overwrites = 1.5"));
    assert_eq!(e.field.as_deref(), Some("workload.overwrites"), "{e}");
    for other in ["conflicts = 0.1", "poison = 0.01"] {
        let e = err(&with(&format!("overwrites = 0.25\n{other}")));
        assert_eq!(e.field.as_deref(), Some("workload.overwrites"), "{e}");
        assert!(e.to_string().contains("cannot be combined"), "{e}");
    }
}
