//! Random scenarios, all invariants: random fault windows and mixes, crash, restart
//! and deploy times, caps, rates, disk faults and seeds, over short simulated spans.
//! A failure prints the scenario as TOML; save it to a file and replay it with
//! `cargo run -p sim -- FILE`.
//!
//! The generator is a swarm (Groce et al., "Swarm Testing", ISSTA 2012): each case
//! turns on its own subset of features (fault windows, timed events, crashes at a
//! random disk operation, crashes right after the n-th disk operation of each kind,
//! disk faults, a capacity) instead of all of them at a low rate, so that no feature
//! always masks another. The crashes right after an operation of a kind put the
//! power loss where its loss matters (CrashMonkey): after a rename before the
//! directory sync, after a write before its fdatasync, inside a batch of removals,
//! after a `mkdir` before its parent's sync. From 500 cases up the run fails unless
//! every crash state of the disk model came up at least [`MIN_PER_STATE`] times.
//!
//! A few cases run with `cargo test`; `PROPTEST_CASES=500 PROPTEST_RNG_SEED=1 cargo
//! test --release -p sim --test properties -- --nocapture` runs five hundred and
//! prints the crash states reached.

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

/// A disk operation a case may cut power right after.
struct Target {
    /// Its name in the scenario format (`after_disk_op`).
    op: &'static str,
    /// How many of them one host surely does in a short case: `nth` is drawn up to it.
    upto: u64,
    /// How often it is drawn against the others.
    weight: usize,
    /// Only a spool that takes writes does it: the case needs the store to fail.
    spooling: bool,
}

const fn target(op: &'static str, upto: u64, weight: usize, spooling: bool) -> Target {
    Target {
        op,
        upto,
        weight,
        spooling,
    }
}

const TARGETS: [Target; 11] = [
    // The first boot makes /var, /var/spool, /var/spool/uploads and its three
    // directories, each followed by a sync of its parent: a lost directory.
    target("mkdir", 6, 3, false),
    // Before the temp file's fdatasync: unsynced data lost, kept, zeroed, emptied.
    target("write", 20, 9, true),
    // Before the directory sync that acknowledges the put: a rename kept unsynced.
    target("rename", 20, 4, true),
    // Inside the remover's batch, before its directory sync: a batch split.
    target("unlink", 20, 4, true),
    target("create", 20, 1, true),
    target("sync_file", 20, 1, true),
    target("sync_dir", 20, 1, true),
    target("open", 10, 1, true),
    target("read", 10, 1, true),
    // Each boot lists the three directories and takes the lock once.
    target("readdir", 3, 1, false),
    target("lock", 2, 1, false),
];

/// A power loss right after a host's `nth` disk operation of kind `TARGETS[kind]`.
#[derive(Debug, Clone)]
struct Targeted {
    kind: usize,
    nth: u64,
    host: u32,
    down_ms: u64,
}

fn targeted(hosts: u32) -> impl Strategy<Value = Targeted> {
    let weighted: Vec<usize> = (0..TARGETS.len())
        .flat_map(|i| std::iter::repeat_n(i, TARGETS[i].weight))
        .collect();
    (
        prop::sample::select(weighted),
        any::<prop::sample::Index>(),
        0..hosts,
        0u64..3000,
    )
        .prop_map(|(kind, nth, host, down_ms)| Targeted {
            kind,
            nth: 1 + nth.index(TARGETS[kind].upto as usize) as u64,
            host,
            down_ms,
        })
}

/// The store refusing every write for a while, so that the spool takes them: what
/// a crash at a put's or a removal's operation needs to happen at all (the uploader
/// writes to the store first and spools only what it could not store).
#[derive(Debug, Clone)]
struct Outage {
    from: u64,
    len: u64,
    outcome: &'static str,
}

fn outage(duration: u64) -> impl Strategy<Value = Outage> {
    (
        0..duration / 4,
        2..duration / 2,
        prop::sample::select(vec!["503", "500", "429", "reset"]),
    )
        .prop_map(|(from, len, outcome)| Outage { from, len, outcome })
}

/// Which features a case turns on (swarm testing); each is on in about half the
/// cases.
#[derive(Debug, Clone)]
struct Features {
    fault_windows: bool,
    timed_events: bool,
    crashes_at_random_ops: bool,
    /// The uploader keeps arrival order: while the spool holds anything, new writes
    /// go to it.
    ordered: bool,
    /// Per kind of [`TARGETS`]: crashes right after an operation of that kind.
    targets: Vec<bool>,
}

fn features() -> impl Strategy<Value = Features> {
    (
        any::<(bool, bool, bool, bool)>(),
        prop::collection::vec(any::<bool>(), TARGETS.len()),
    )
        .prop_map(
            |((fault_windows, timed_events, random_ops, ordered), targets)| Features {
                fault_windows,
                timed_events,
                crashes_at_random_ops: random_ops,
                ordered,
                targets,
            },
        )
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

/// One generated case, before it is written as a scenario file.
#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    duration: u64,
    hosts: u32,
    rate: f64,
    size_min: u64,
    size_factor: u64,
    max_files: u64,
    max_bytes_kib: u64,
    remove_sync_batch: u32,
    put_timeout_ms: u64,
    workers: usize,
    jitter: &'static str,
    poison: f64,
    windows: Vec<Window>,
    outage: Outage,
    events: Vec<Ev>,
    block: u64,
    disk_faults: Option<String>,
    /// `(k, host, down_ms)`: power lost before the host's k-th disk operation.
    disk_crashes: Vec<(u64, u32, u64)>,
    targeted: Vec<Targeted>,
    capacity_kib: Option<u64>,
    features: Features,
}

prop_compose! {
    fn scenario()(duration in 20u64..50, hosts in 1u32..=3)(
        seed in any::<u64>(),
        duration in Just(duration),
        hosts in Just(hosts),
        (rate, size_min, size_factor) in (5.0f64..60.0, 64u64..4096, 1u64..8),
        max_files in prop_oneof![20u64..200, 200u64..5000],
        max_bytes_kib in prop_oneof![64u64..1024, 1024u64..65536],
        remove_sync_batch in 1u32..=16,
        put_timeout_ms in 300u64..3000,
        workers in 1usize..8,
        jitter in prop_oneof![Just("none"), Just("equal"), Just("full"), Just("decorrelated")],
        poison in prop_oneof![3 => Just(0.0), 1 => 0.0f64..0.1],
        windows in prop::collection::vec(window(duration), 1..4),
        outage in outage(duration),
        events in prop::collection::vec(event(duration, hosts), 0..4),
        block in prop_oneof![Just(512u64), Just(4096)],
        disk_faults in prop_oneof![2 => Just(None), 1 => disk_faults().prop_map(Some)],
        disk_crashes in prop::collection::vec((1u64..20_000, 0..hosts, 0u64..3000), 1..3),
        targeted in prop::collection::vec(targeted(hosts), 0..12),
        capacity_kib in prop::option::of(256u64..4096),
        features in features(),
    ) -> String {
        Case {
            seed, duration, hosts, rate, size_min, size_factor, max_files, max_bytes_kib,
            remove_sync_batch, put_timeout_ms, workers, jitter, poison, windows, outage,
            events, block, disk_faults, disk_crashes, targeted, capacity_kib, features,
        }
        .toml()
    }
}

impl Case {
    /// The case as a scenario file, with only the features it turned on.
    fn toml(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "name = \"property\"\nseed = {}\nstart = 2026-10-08T10:00:00Z\nduration = \"{}s\"\nsample = \"500ms\"\n",
            self.seed, self.duration
        );
        let _ = writeln!(
            t,
            "[workload]\nhosts = {}\nrate = {:.3}\nstop_at = \"{}s\"",
            self.hosts,
            self.rate,
            self.duration * 3 / 4
        );
        let _ = writeln!(
            t,
            "size = {{ min = \"{}B\", max = \"{}B\" }}\npoison = {:.4}\n",
            self.size_min,
            self.size_min * self.size_factor,
            self.poison
        );
        let _ = writeln!(
            t,
            "[spool]\nmax_files = {}\nmax_bytes = \"{}KiB\"\nremove_sync_batch = {}\n",
            self.max_files, self.max_bytes_kib, self.remove_sync_batch
        );
        let _ = writeln!(
            t,
            "[uploader]\nput_timeout = \"{}ms\"\nordered = {}\n",
            self.put_timeout_ms, self.features.ordered
        );
        let _ = writeln!(
            t,
            "[drainer]\nworkers = {}\nbase = \"100ms\"\ncap = \"2s\"\njitter = \"{}\"\nput_timeout = \"2s\"\n",
            self.workers, self.jitter
        );
        self.write_faults(&mut t);
        self.write_events(&mut t);
        let _ = writeln!(t, "[disk]\nblock = \"{}B\"", self.block);
        if let Some(f) = &self.disk_faults {
            t.push_str(f);
        }
        if let Some(kib) = self.capacity_kib {
            let _ = writeln!(t, "capacity = \"{kib}KiB\"");
        }
        t
    }

    /// The crashes right after an operation that this case's features turn on.
    fn targeted(&self) -> impl Iterator<Item = &Targeted> {
        self.targeted
            .iter()
            .filter(|c| self.features.targets[c.kind])
    }

    /// The fault windows, if turned on, and the outage a crash at a spooling
    /// operation needs.
    fn write_faults(&self, t: &mut String) {
        let windows: &[Window] = if self.features.fault_windows {
            &self.windows
        } else {
            &[]
        };
        for w in windows {
            let sum: f64 = w.weights.iter().map(|(_, x)| x).sum();
            let mut mix = std::collections::BTreeMap::new();
            for (i, x) in &w.weights {
                *mix.entry(OUTCOMES[*i]).or_insert(0.0) += x / sum * w.total * 0.999;
            }
            let mix: Vec<String> = mix
                .iter()
                .map(|(k, v)| format!("\"{k}\" = {v:.4}"))
                .collect();
            let _ = writeln!(
                t,
                "[[fault]]\nfrom = \"{}s\"\nuntil = \"{}s\"\nshare = {:.3}\nmix = {{ {} }}\nhang_for = \"30s\"\nslow = {{ min = \"100ms\", max = \"3s\" }}\nstall_after = \"1KiB\"\n",
                w.from,
                w.from + w.len,
                w.share,
                mix.join(", ")
            );
        }
        if self.targeted().any(|c| TARGETS[c.kind].spooling) {
            let o = &self.outage;
            let _ = writeln!(
                t,
                "[[fault]]\nfrom = \"{}s\"\nuntil = \"{}s\"\nmix = {{ \"{}\" = 1.0 }}\n",
                o.from,
                o.from + o.len,
                o.outcome
            );
        }
    }

    /// Crashes, restarts and deploys at times, crashes at random disk operations and
    /// right after the n-th operation of a kind: those the case turned on.
    fn write_events(&self, t: &mut String) {
        if self.features.timed_events {
            for e in &self.events {
                let _ = writeln!(
                    t,
                    "[[event]]\nat = \"{}s\"\nkind = \"{}\"\nhost = {}\ndown_for = \"{}ms\"\n",
                    e.at, e.kind, e.host, e.down_ms
                );
            }
        }
        if self.features.crashes_at_random_ops {
            for (ops, host, down_ms) in &self.disk_crashes {
                let _ = writeln!(
                    t,
                    "[[event]]\nafter_disk_ops = {ops}\nkind = \"crash\"\nhost = {host}\ndown_for = \"{down_ms}ms\"\n"
                );
            }
        }
        for c in self.targeted() {
            let _ = writeln!(
                t,
                "[[event]]\nafter_disk_op = \"{}\"\nnth = {}\nkind = \"crash\"\nhost = {}\ndown_for = \"{}ms\"\n",
                TARGETS[c.kind].op, c.nth, c.host, c.down_ms
            );
        }
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
    spooled: u64,
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
        t.spooled += verdict.tally.told.spooled;
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

/// How many times a run from [`THRESHOLD_CASES`] cases up must reach each crash state.
const MIN_PER_STATE: u64 = 10;

/// From this many cases up, every crash state must come up [`MIN_PER_STATE`] times.
const THRESHOLD_CASES: u64 = 500;

/// Every crash state the disk model produces, named, with how often a run reached it.
fn crash_state_counts(c: &CrashStates) -> [(&'static str, u64); 10] {
    [
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
        ("directories lost", c.directories_lost),
    ]
}

#[test]
fn every_invariant_holds_in_random_scenarios() {
    let totals = Mutex::new(Totals::default());
    let config = config();
    println!(
        "proptest seed {} (PROPTEST_RNG_SEED), {} cases",
        config.rng_seed, config.cases
    );
    let mut runner = TestRunner::new(config);
    let result = runner.run(&scenario(), |text| one_case(&text, &totals));
    let t = totals.into_inner().unwrap();
    println!(
        "{} cases: {} writes, {} acknowledged ({} spooled), {} lost, {} destroyed by the disk, {} disk faults injected",
        t.cases,
        t.writes,
        t.acknowledged,
        t.spooled,
        t.lost,
        t.destroyed_by_disk,
        t.faults_injected
    );
    println!("crash states reached:");
    let counts = crash_state_counts(&t.crash_states);
    for (state, n) in counts {
        println!("  {n:>8}  {state}");
    }
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_eq!(t.lost, 0);
    // Over a long run every crash state the model can produce must have come up,
    // each often enough that it is no accident; a state never reached is a hole in
    // the proof.
    if t.cases >= THRESHOLD_CASES {
        let short: Vec<String> = counts
            .iter()
            .filter(|(_, n)| *n < MIN_PER_STATE)
            .map(|(state, n)| format!("{state}: {n}"))
            .collect();
        assert!(
            short.is_empty(),
            "crash states reached fewer than {MIN_PER_STATE} times in {} cases: {}",
            t.cases,
            short.join(", ")
        );
    }
}
