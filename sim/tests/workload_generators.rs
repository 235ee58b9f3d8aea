//! What the producers write is something the spool takes, at every seed: every
//! name `Shape::name` makes (plain or hard, poison or not) passes
//! `spool::name::check_writable`, the rule the uploader, the spool and the relay
//! apply, and parses back to its write; every attribute set encodes with
//! `spool::entry::encode_attributes`; every other writer's object is the kind of
//! conflict drawn for it. A name the spool refused would be a write refused for a
//! reason the scenario never asked for (issue 42: seed 99173 made hard names past
//! 1,024 bytes).
//!
//! `PROPTEST_CASES=2000 cargo test --release -p sim --test workload_generators`
//! runs more cases than the default 256.

use std::path::Path;

use object_store::{Attribute, Attributes};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use sim::workload::{Conflict, OtherWriter, POISON_PREFIX, Shape, parse_object_name};

/// Consecutive writes each case checks, from its first sequence number: names near
/// the limit are one in ten and filling a budget to the byte is rarer, so a case is
/// a run of writes rather than one.
const WRITES_A_CASE: u64 = 1024;

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
        overwrites: 0.0,
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

/// The other writer's object as `object_store` attributes, the inverse of
/// `sim::workload::object_attributes`.
fn as_attributes(other: &OtherWriter) -> Attributes {
    let mut out = Attributes::new();
    let a = &other.attributes;
    for (key, value) in [
        (Attribute::ContentType, &other.content_type),
        (Attribute::ContentEncoding, &a.content_encoding),
        (Attribute::CacheControl, &a.cache_control),
        (Attribute::ContentDisposition, &a.content_disposition),
        (Attribute::ContentLanguage, &a.content_language),
    ] {
        if let Some(value) = value {
            out.insert(key, value.clone().into());
        }
    }
    for (key, value) in &a.metadata {
        out.insert(
            Attribute::Metadata(key.clone().into()),
            value.clone().into(),
        );
    }
    out
}

/// Every generator's output for write `(host, seq)`, as poison and not, checked
/// against what the spool accepts and what the checker relies on.
fn check_write(shape: &Shape, host: u32, seq: u64, size: usize) -> Result<(), TestCaseError> {
    for poison in [false, true] {
        let name = shape.name(host, seq, poison);
        let writable = spool::name::check_writable(&name);
        prop_assert!(
            writable.is_ok(),
            "h{host} #{seq} (poison: {poison}), {} bytes: {writable:?}",
            name.len()
        );
        prop_assert_eq!(
            parse_object_name(&name),
            Some((host, seq, poison)),
            "{:?}",
            name
        );
        prop_assert_eq!(name.starts_with(POISON_PREFIX), poison, "{:?}", name);
        let plain = format!(
            "{}h{host}/{seq:010}",
            if poison { POISON_PREFIX } else { "" }
        );
        if shape.hard_names {
            let rest = name.strip_prefix(&plain).and_then(|r| r.strip_prefix('/'));
            prop_assert!(rest.is_some_and(|r| !r.is_empty()), "{:?}", name);
        } else {
            prop_assert_eq!(&name, &plain);
        }
        prop_assert_eq!(&name, &shape.name(host, seq, poison), "not deterministic");
    }

    let attributes = shape.attributes(host, seq);
    let encoded = spool::entry::encode_attributes(&attributes);
    prop_assert!(
        encoded.is_ok(),
        "h{host} #{seq}: {attributes:?}: {encoded:?}"
    );
    prop_assert!(shape.attributes || attributes.is_empty());

    let conflict = shape.conflict(host, seq);
    prop_assert!(shape.conflicts > 0.0 || conflict.is_none());
    prop_assert!(shape.conflicts < 1.0 || conflict.is_some());
    let own = sim::ledger::payload(shape.seed ^ 0x5eed, host, seq, size);
    prop_assert!(shape.other_writer(host, seq, true, &own).is_none());
    let other = shape.other_writer(host, seq, false, &own);
    prop_assert_eq!(other.is_some(), conflict.is_some());
    let (Some(conflict), Some(other)) = (conflict, other) else {
        return Ok(());
    };
    prop_assert_eq!(other.composite, shape.conflict_is_composite(host, seq));
    let encoded = spool::entry::encode_attributes(&as_attributes(&other));
    prop_assert!(encoded.is_ok(), "{other:?}: {encoded:?}");
    match conflict {
        Conflict::SameBytes => {
            prop_assert_eq!(&other.bytes, &own);
            let (content_type, attributes) = sim::workload::object_attributes(&attributes);
            prop_assert_eq!(
                (other.content_type, other.attributes),
                (content_type, attributes)
            );
        }
        Conflict::SameSize => {
            prop_assert_ne!(&other.bytes, &own, "size {}", size);
            // No other bytes are as long as an empty payload: one byte then.
            prop_assert_eq!(other.bytes.len(), size.max(1));
        }
        Conflict::OtherSize => {
            prop_assert_ne!(&other.bytes, &own, "size {}", size);
            prop_assert_ne!(other.bytes.len(), size);
        }
    }
    Ok(())
}

fn config() -> Config {
    Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/proptest-regressions/workload_generators.txt",
        ))),
        ..Config::default()
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        any::<u64>(),
        prop_oneof![3 => Just(true), 1 => Just(false)],
        any::<bool>(),
        prop_oneof![Just(0.0), Just(1.0), 0.0f64..=1.0],
    )
        .prop_map(|(seed, hard_names, attributes, conflicts)| Shape {
            hard_names,
            attributes,
            conflicts,
            overwrites: 0.0,
            seed,
        })
}

proptest! {
    #![proptest_config(config())]

    /// Every generator a scenario can switch on (`names = "hard"`, `attributes`,
    /// `conflicts`, `poison`), at any seed, for a scenario's hosts (1 to 64) and
    /// beyond, for runs of writes anywhere in the ten-digit sequence numbers and
    /// payloads from empty to 64 KiB.
    #[test]
    fn every_generated_write_is_one_the_spool_accepts(
        shape in shape(),
        host in prop_oneof![4 => 0u32..64, 1 => any::<u32>()],
        first in prop_oneof![Just(0u64), 0..10_000_000_000 - WRITES_A_CASE],
        size in prop_oneof![Just(0usize), 1usize..64, 64usize..=64 << 10],
    ) {
        for seq in first..first + WRITES_A_CASE {
            check_write(&shape, host, seq, size)?;
        }
    }
}
