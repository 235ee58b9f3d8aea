//! Simulation speed: simulated seconds per wall-clock second of `sim::world::run` (the
//! turmoil world stepped through the scenario, then wound down; no checks, report or
//! charts, which `timing.json` also leaves out of its `speedup`) for
//! `scenarios/demo.toml` (20 s) and for the first 90 minutes of
//! `scenarios/us-central1.toml` (1 h healthy, then 30 min of window 1; its deploy and
//! crash come later and are left out). Criterion's throughput is in simulated
//! seconds, so its "elem/s" is simulated seconds per second.
//!
//! Runs on mimalloc, as the `sim` binary does. After the run, the wall time per step
//! and per object-store request is printed beside each figure.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::cell::Cell;
use std::path::Path;
use std::time::{Duration, SystemTime};

use benches::{Summary, estimate};
use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use sim::scenario::Scenario;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Length of the us-central1 slice.
const SLICE: Duration = Duration::from_secs(90 * 60);

fn scenario_text(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn demo() -> Scenario {
    sim::scenario::parse("demo.toml", &scenario_text("demo.toml")).unwrap()
}

/// `us-central1.toml` cut to its first 90 minutes: `duration` set, and its events
/// (all later than that: the checker refuses events after the end) dropped.
fn us_central1_slice() -> Scenario {
    let text = scenario_text("us-central1.toml");
    let whole = sim::scenario::parse("us-central1.toml", &text).unwrap();
    assert!(
        whole.events.iter().all(|e| e.at >= SLICE),
        "an event in the slice"
    );
    let mut table: toml::Table = text.parse().unwrap();
    table.insert("name".into(), "us-central1-90m".into());
    table.insert("duration".into(), "90m".into());
    table.remove("event");
    let slice = sim::scenario::parse(
        "us-central1.toml, 90 min",
        &toml::to_string(&table).unwrap(),
    )
    .unwrap();
    assert_eq!(slice.duration, SLICE);
    slice
}

/// What one run did, to turn a median into cost per step and per request.
#[derive(Default, Clone, Copy)]
struct Work {
    steps: u64,
    requests: u64,
}

fn simulation(c: &mut Criterion) -> Vec<(&'static str, Work)> {
    let mut group = c.benchmark_group("simulation");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1));
    let mut work = Vec::new();
    // About 0.2 s and 8 s a run on the machine in BENCHMARKS.md: ten runs of each.
    for (label, scenario, measure) in [
        ("demo", demo(), Duration::from_secs(3)),
        (
            "us-central1-90m",
            us_central1_slice(),
            Duration::from_secs(80),
        ),
    ] {
        group.measurement_time(measure);
        group.throughput(Throughput::Elements(scenario.duration.as_secs()));
        let last = Cell::new(Work::default());
        group.bench_function(label, |b| {
            b.iter_batched(
                || scenario.clone(),
                |scenario| {
                    let output = sim::world::run(scenario, sim::world::Options::default())
                        .expect("the scenario runs");
                    last.set(Work {
                        steps: output.steps,
                        requests: output.fake.requests,
                    });
                    output
                },
                BatchSize::PerIteration,
            )
        });
        work.push((label, last.get()));
    }
    group.finish();
    work
}

fn summary(since: SystemTime, work: &[(&str, Work)]) {
    let mut table = Summary::new("simulation speed", "simulated s per wall s", since);
    for (label, _) in work {
        table = table.row(label, ["simulation", label, ""], None);
    }
    table.print();
    for (label, work) in work {
        let Some(e) = estimate(["simulation", label, ""], since) else {
            continue;
        };
        if work.steps == 0 {
            continue;
        }
        println!(
            "  {label}: {} steps, {} requests a run; {:.1} us wall per step, {:.1} us per request",
            work.steps,
            work.requests,
            e.median_ns / 1e3 / work.steps as f64,
            e.median_ns / 1e3 / work.requests.max(1) as f64,
        );
    }
}

fn main() {
    let since = benches::started();
    let mut criterion = Criterion::default().configure_from_args();
    let work = simulation(&mut criterion);
    criterion.final_summary();
    summary(since, &work);
}
