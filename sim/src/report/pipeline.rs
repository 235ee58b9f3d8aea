//! One run from scenario to report: simulate, check the invariants, build the time
//! series, render the charts, write the report, and (apart, since it is not
//! deterministic) how fast it went.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::checker::{self, Verdict};
use crate::report::series;
use crate::report::{self, Report};
use crate::scenario::Scenario;
use crate::world::{self, Options, RunOutput};

/// What a finished run left behind.
#[derive(Debug)]
pub struct Finished {
    /// Where the report is.
    pub dir: PathBuf,
    /// `report.json`'s contents.
    pub report: Report,
    /// The checker's findings.
    pub verdict: Verdict,
    /// How fast it ran.
    pub timing: Timing,
}

/// `timing.json`: how fast the simulation ran on this machine. Not deterministic,
/// so kept out of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Wall-clock seconds for the whole run (simulation, checks, report).
    pub wall_seconds: f64,
    /// Wall-clock seconds spent stepping the simulation.
    pub simulate_seconds: f64,
    /// Simulated seconds.
    pub simulated_seconds: f64,
    /// Simulated seconds per wall-clock second of stepping.
    pub speedup: f64,
    /// Simulation steps taken.
    pub steps: u64,
    /// Object-store requests served.
    pub requests: u64,
}

/// A stopwatch on real time, for `timing.json` only: the one place the bench reads
/// the wall clock, never on a simulated path.
pub struct Stopwatch(std::time::Instant);

impl Stopwatch {
    /// Starts now.
    #[allow(clippy::disallowed_methods)]
    pub fn start() -> Self {
        Self(std::time::Instant::now())
    }

    /// Time since start.
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Runs `scenario`, writes its report into `dir` (charts too when `charts`), and
/// returns the outcome.
pub fn run(
    scenario: Scenario,
    dir: &Path,
    options: Options,
    charts: bool,
) -> anyhow::Result<Finished> {
    let whole = Stopwatch::start();
    let simulated = scenario.duration;
    let output: RunOutput = world::run(scenario, options)?;
    let simulate_seconds = whole.elapsed().as_secs_f64();
    let verdict = checker::check(&output);
    let series = series::build(&output);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let chart_files = if charts {
        crate::report::charts::render_run(dir, &output, &series)?
    } else {
        Vec::new()
    };
    let report = report::write(dir, &output, &verdict, &series, &chart_files)?;
    let timing = Timing {
        wall_seconds: whole.elapsed().as_secs_f64(),
        simulate_seconds,
        simulated_seconds: simulated.as_secs_f64(),
        speedup: simulated.as_secs_f64() / simulate_seconds.max(1e-9),
        steps: output.steps,
        requests: output.fake.requests,
    };
    let json = serde_json::to_string_pretty(&timing)? + "\n";
    std::fs::write(dir.join("timing.json"), json).context("cannot write timing.json")?;
    Ok(Finished {
        dir: dir.to_path_buf(),
        report,
        verdict,
        timing,
    })
}
