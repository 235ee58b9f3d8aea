//! Random scenarios, all invariants: random fault windows and mixes, crash, restart
//! and deploy times, caps, rates, disk faults and seeds, over short simulated spans.
//! A failure prints the scenario as TOML; save it to a file and replay it with
//! `cargo run -p sim -- FILE`.
//!
//! A few cases run with `cargo test`; `PROPTEST_CASES=2000 cargo test --release -p sim
//! --test properties` runs thousands.

use std::fmt::Write as _;

use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use sim::simdisk::CrashStates;

const OUTCOMES: [&str; 10] = [
    "503",
    "429",
    "500",
    "408",
    "hang",
    "reset",
    "stall",
    "slow",
    "commit_then_503",
    "commit_then_hang",
];

#[derive(Debug, Clone)]
struct Window {
    from: u64,
    len: u64,
    share: f64,
    weights: Vec<(usize, f64)>,
    total: f64,
}

#[derive(Debug, Clone)]
struct Ev {
    at: u64,
    kind: &'static str,
    host: u32,
    down_ms: u64,
}

fn window(duration: u64) -> impl Strategy<Value = Window> {
    (
        0..duration,
        1..duration.max(2),
        prop_oneof![Just(1.0), 0.2f64..1.0],
        prop::collection::vec((0..OUTCOMES.len(), 0.05f64..1.0), 1..4),
        0.3f64..1.0,
    )
        .prop_map(|(from, len, share, weights, total)| Window {
            from,
            len,
            share,
            weights,
            total,
        })
}

fn event(duration: u64, hosts: u32) -> impl Strategy<Value = Ev> {
    (
        1..duration - 1,
        prop_oneof![Just("crash"), Just("restart"), Just("deploy")],
        0..hosts,
        0u64..4000,
    )
        .prop_map(|(at, kind, host, down_ms)| Ev {
            at,
            kind,
            host,
            down_ms,
        })
}

/// Every kind of disk fault, each at a random rate (or none), over a random window.
fn disk_faults() -> impl Strategy<Value = String> {
    const KINDS: [&str; 12] = [
        "eio_open",
        "eio_read",
        "eio_write",
        "eio_fsync",
        "eio_rename",
        "eio_unlink",
        "eio_readdir",
        "enospc_create",
        "enospc_write",
        "enospc_rename",
        "sticky_read",
        "corrupt_at_rest",
    ];
    (
        prop::collection::vec(prop_oneof![Just(0.0), 0.0f64..0.02], KINDS.len()),
        0u64..20,
        prop::option::of(1u64..40),
    )
        .prop_map(|(rates, from, len)| {
            let mut t = format!("faults_from = \"{from}s\"\n");
            if let Some(len) = len {
                let _ = writeln!(t, "faults_until = \"{}s\"", from + len);
            }
            for (kind, rate) in KINDS.iter().zip(rates) {
                let _ = writeln!(t, "{kind} = {rate:.5}");
            }
            t
        })
}

prop_compose! {
    fn scenario()(duration in 20u64..50, hosts in 1u32..=3)(
        seed in any::<u64>(),
        duration in Just(duration),
        hosts in Just(hosts),
        rate in 5.0f64..60.0,
        size_min in 64u64..4096,
        size_factor in 1u64..8,
        max_files in prop_oneof![20u64..200, 200u64..5000],
        max_bytes_kib in prop_oneof![64u64..1024, 1024u64..65536],
        put_timeout_ms in 300u64..3000,
        workers in 1usize..8,
        jitter in prop_oneof![Just("none"), Just("equal"), Just("full"), Just("decorrelated")],
        poison in prop_oneof![3 => Just(0.0), 1 => 0.0f64..0.1],
        windows in prop::collection::vec(window(duration), 0..3),
        events in prop::collection::vec(event(duration, hosts), 0..4),
        block in prop_oneof![Just(512u64), Just(4096)],
        disk_faults in prop_oneof![2 => Just(None), 1 => disk_faults().prop_map(Some)],
        disk_crashes in prop::collection::vec((1u64..20_000, 0..hosts, 0u64..3000), 0..3),
        capacity_kib in prop::option::of(256u64..4096),
    ) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "name = \"property\"\nseed = {seed}\nstart = 2026-10-08T10:00:00Z\nduration = \"{duration}s\"\nsample = \"500ms\"\n");
        let _ = writeln!(t, "[workload]\nhosts = {hosts}\nrate = {rate:.3}\nstop_at = \"{}s\"", duration * 3 / 4);
        let _ = writeln!(t, "size = {{ min = \"{size_min}B\", max = \"{}B\" }}\npoison = {poison:.4}\n", size_min * size_factor);
        let _ = writeln!(t, "[spool]\nmax_files = {max_files}\nmax_bytes = \"{max_bytes_kib}KiB\"\nremove_sync_batch = 4\n");
        let _ = writeln!(t, "[uploader]\nput_timeout = \"{put_timeout_ms}ms\"\n");
        let _ = writeln!(t, "[drainer]\nworkers = {workers}\nbase = \"100ms\"\ncap = \"2s\"\njitter = \"{jitter}\"\nput_timeout = \"2s\"\n");
        for w in &windows {
            let sum: f64 = w.weights.iter().map(|(_, x)| x).sum();
            let mut mix = std::collections::BTreeMap::new();
            for (i, x) in &w.weights {
                *mix.entry(OUTCOMES[*i]).or_insert(0.0) += x / sum * w.total * 0.999;
            }
            let mix: Vec<String> = mix.iter().map(|(k, v)| format!("\"{k}\" = {v:.4}")).collect();
            let _ = writeln!(
                t,
                "[[fault]]\nfrom = \"{}s\"\nuntil = \"{}s\"\nshare = {:.3}\nmix = {{ {} }}\nhang_for = \"30s\"\nslow = {{ min = \"100ms\", max = \"3s\" }}\nstall_after = \"1KiB\"\n",
                w.from, w.from + w.len, w.share, mix.join(", ")
            );
        }
        for e in &events {
            let _ = writeln!(t, "[[event]]\nat = \"{}s\"\nkind = \"{}\"\nhost = {}\ndown_for = \"{}ms\"\n", e.at, e.kind, e.host, e.down_ms);
        }
        for (ops, host, down_ms) in &disk_crashes {
            let _ = writeln!(t, "[[event]]\nafter_disk_ops = {ops}\nkind = \"crash\"\nhost = {host}\ndown_for = \"{down_ms}ms\"\n");
        }
        let _ = writeln!(t, "[disk]\nblock = \"{block}B\"");
        if let Some(f) = &disk_faults {
            t.push_str(f);
        }
        if let Some(kib) = capacity_kib {
            let _ = writeln!(t, "capacity = \"{kib}KiB\"");
        }
        t
    }
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok());
    Config {
        cases: cases.unwrap_or(6),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/proptest-regressions/properties.txt",
        ))),
        ..Config::default()
    }
}

/// What the cases reached, over the whole property run.
#[derive(Debug, Default)]
struct Totals {
    cases: u64,
    writes: u64,
    acknowledged: u64,
    lost: u64,
    destroyed_by_disk: u64,
    crash_states: CrashStates,
    faults_injected: u64,
}

/// One case: the scenario run and checked; its counts added to `totals`.
fn one_case(text: &str, totals: &Mutex<Totals>) -> Result<(), TestCaseError> {
    let scenario = sim::scenario::parse("property.toml", text)
        .map_err(|e| TestCaseError::fail(format!("generated an invalid scenario: {e}\n{text}")))?;
    let output = sim::world::run(scenario, sim::world::Options::default())
        .map_err(|e| TestCaseError::fail(format!("run failed: {e:#}\n{text}")))?;
    let verdict = sim::checker::check(&output);
    {
        let mut t = totals.lock().unwrap();
        t.cases += 1;
        t.writes += verdict.tally.told.writes;
        t.acknowledged += verdict.tally.told.stored + verdict.tally.told.spooled;
        t.lost += verdict.tally.lost;
        t.destroyed_by_disk += verdict.tally.destroyed_by_disk;
        for disk in &output.disks {
            t.crash_states.add(&disk.crash_states);
            t.faults_injected += disk.injected.values().sum::<u64>();
        }
    }
    let failed: Vec<String> = verdict
        .invariants
        .iter()
        .filter(|i| !i.held())
        .map(|i| format!("{}: {:?}", i.name, i.status))
        .collect();
    prop_assert!(
        failed.is_empty(),
        "invariants failed:\n{}\n--- scenario (save as a .toml and run `cargo run -p sim -- FILE`) ---\n{}",
        failed.join("\n"),
        text
    );
    Ok(())
}

#[test]
fn every_invariant_holds_in_random_scenarios() {
    let totals = Mutex::new(Totals::default());
    let mut runner = TestRunner::new(config());
    let result = runner.run(&scenario(), |text| one_case(&text, &totals));
    let t = totals.into_inner().unwrap();
    println!(
        "{} cases: {} writes, {} acknowledged, {} lost, {} destroyed by the disk, {} disk faults injected",
        t.cases, t.writes, t.acknowledged, t.lost, t.destroyed_by_disk, t.faults_injected
    );
    println!("crash states reached: {:#?}", t.crash_states);
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_eq!(t.lost, 0);
    // Over a long run every crash state the model can produce must have come up;
    // a state never reached is a hole in the proof.
    if t.cases >= 500 {
        let c = t.crash_states;
        for (state, n) in [
            ("power losses", c.power_losses),
            ("unsynced namespace operations kept", c.unsynced_ops_kept),
            ("unsynced namespace operations lost", c.unsynced_ops_lost),
            (
                "renames kept without a directory sync",
                c.renames_kept_unsynced,
            ),
            ("removal batches partly persisted", c.removal_batches_split),
            ("unsynced data lost whole", c.unsynced_data_lost),
            ("zero-length files", c.zero_length_files),
            ("zero-filled files", c.zero_filled_files),
            ("unsynced data kept", c.unsynced_data_kept),
        ] {
            assert!(n > 0, "no case reached: {state}");
        }
    }
}
