//! The README's main job in the profile README runs it in, against a release build.
//!
//! README gives `cargo run -p sim -- scenarios/us-central1.toml`: the dev profile,
//! with debug assertions and overflow checks on (the workspace optimizes the code at
//! opt-level 2 there). DESIGN's budget: that run within 1.5x of a release build. A
//! debug-build check that walks a structure after every change (the spool's index
//! was summed after every put) turns the replay quadratic and shows here first.
//!
//! What it does: builds the `sim` binary in both profiles (`cargo build`, the same
//! cargo that runs the bench), writes the first [`SLICE`] of
//! `scenarios/us-central1.toml` (an hour healthy, then the first half hour of
//! window 1, the spool growing to about 90,000 entries) to a scratch file, and runs
//! the two binaries in turn, [`PAIRS`] times each (`PROFILES_PAIRS` to change it), so
//! that drift in the machine's speed falls on both. Each run's figure is the
//! simulation's own wall time from its `timing.json` (no build, no start-up, no
//! charts). The two builds must write the same `report.json`, byte for byte.
//!
//! Run: `cargo bench -p benches --bench profiles`.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Length of the replay's slice.
const SLICE: Duration = Duration::from_secs(90 * 60);
/// Runs of each build, taken in turn.
const PAIRS: usize = 3;
/// DESIGN.md: the README's profile within this many times release.
const BUDGET: f64 = 1.5;

fn main() {
    let pairs = std::env::var("PROFILES_PAIRS")
        .ok()
        .map(|v| v.parse().expect("PROFILES_PAIRS is a count"))
        .unwrap_or(PAIRS);
    let scratch = benches::scratch_root().join("profiles");
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let scenario = scratch.join("us-central1-slice.toml");
    std::fs::write(&scenario, benches::us_central1_slice(SLICE)).expect("slice written");

    let builds = [("dev", build_sim(false)), ("release", build_sim(true))];
    let mut seconds: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut reports: [Option<Vec<u8>>; 2] = [None, None];
    for pair in 0..pairs {
        for (i, (profile, binary)) in builds.iter().enumerate() {
            let out = scratch.join(format!("{profile}-{pair}"));
            let run = run_slice(binary, &scenario, &out);
            eprintln!("  {profile:<8} run {pair}: {:.2} s", run.simulate_seconds);
            seconds[i].push(run.simulate_seconds);
            check_same_report(&mut reports[i], run.report, profile);
        }
    }
    assert_eq!(
        reports[0], reports[1],
        "the dev and release builds wrote different report.json files"
    );
    print_summary(&seconds, pairs);
}

/// Builds `sim` (dev profile, or release) and returns the binary's path.
fn build_sim(release: bool) -> PathBuf {
    benches::cargo_build("sim", "sim", release)
}

/// One run's figure and its report.
struct Run {
    simulate_seconds: f64,
    report: Vec<u8>,
}

fn run_slice(binary: &Path, scenario: &Path, out: &Path) -> Run {
    let status = Command::new(binary)
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("sim runs");
    assert!(status.success(), "{} failed on the slice", binary.display());
    let timing: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("timing.json")).expect("the run wrote timing.json"),
    )
    .expect("timing.json is JSON");
    Run {
        simulate_seconds: timing["simulate_seconds"]
            .as_f64()
            .expect("timing.json has simulate_seconds"),
        report: std::fs::read(out.join("report.json")).expect("the run wrote report.json"),
    }
}

/// Every run of one build writes the same report.
fn check_same_report(kept: &mut Option<Vec<u8>>, report: Vec<u8>, profile: &str) {
    match kept {
        Some(first) => assert!(*first == report, "two {profile} runs differ"),
        None => *kept = Some(report),
    }
}

fn print_summary(seconds: &[Vec<f64>; 2], pairs: usize) {
    let (dev, release) = (benches::median(&seconds[0]), benches::median(&seconds[1]));
    let ratios: Vec<String> = (seconds[0].iter().zip(&seconds[1]))
        .map(|(d, r)| format!("{:.2}", d / r))
        .collect();
    println!(
        "\nREADME's profile against release: the us-central1 replay's first {} min, \
         {pairs} runs each in turn (simulation wall time, median)",
        SLICE.as_secs() / 60
    );
    println!("  dev (README)  {dev:>8.2} s");
    println!("  release       {release:>8.2} s");
    println!(
        "  ratio         {:>8.2}   (each pair: {}; budget {BUDGET})",
        dev / release,
        ratios.join(", ")
    );
}
