//! Running a sweep's runs: each one a whole simulation, single-threaded and
//! deterministic; threads only run different runs side by side. A run that fails
//! an invariant, errors or panics is a finding with its replay command, never the
//! end of the sweep. Each result is written to the results location as soon as its
//! run ends, so a shard killed half-way keeps what it finished.

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;

use super::result::{Figures, Outcome, RunResult};
use super::{Location, Plan, Shard};
use crate::checker;
use crate::report::series;
use crate::report::summary;
use crate::world::{self, Options};

/// Runs variant `variant` of `plan` with `seed`, to its result.
pub fn run_one(plan: &Plan, variant: usize, seed: u64) -> RunResult {
    let mut scenario = plan.variants[variant].scenario.clone();
    scenario.seed = seed;
    let max_bytes = scenario.spool.max_bytes;
    let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
        world::run(scenario, Options::default()).map(|output| {
            let verdict = checker::check(&output);
            let series = series::build(&output);
            summary::build(&output, &verdict, &series)
        })
    }));
    let (outcome, figures) = match ran {
        Ok(Ok(report)) => {
            let failed: Vec<String> = (report.invariants.iter())
                .filter(|i| !i.held)
                .map(|i| format!("{}: {}", i.name, i.detail))
                .collect();
            let outcome = match failed.is_empty() {
                true => Outcome::Passed,
                false => Outcome::Failed { invariants: failed },
            };
            let figures = Figures {
                writes: report.tally.told.writes,
                rejected: report.tally.told.rejected,
                lost: report.tally.lost,
                peak_files: report.peak_files,
                peak_bytes: report.peak_bytes,
                peak_oldest_age_seconds: report.peak_oldest_age_seconds,
                drain_seconds: report.drain_seconds,
                max_bytes,
                store_requests: report.store.requests,
                store_shed: report.store.shed,
            };
            (outcome, Some(figures))
        }
        Ok(Err(e)) => (
            Outcome::Error {
                message: format!("{e:#}"),
            },
            None,
        ),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic without a message".into());
            (
                Outcome::Error {
                    message: format!("panicked: {message}"),
                },
                None,
            )
        }
    };
    plan.result(variant, seed, outcome, figures)
}

/// Runs the runs `shard` takes, on `jobs` threads, writing each result to
/// `location` as it ends; returns them in the plan's order.
pub fn run_shard(
    plan: &Plan,
    shard: Shard,
    jobs: usize,
    location: &Location,
) -> anyhow::Result<Vec<RunResult>> {
    run_shard_with(plan, shard, jobs, location, run_one)
}

/// [`run_shard`], each run made by `run` (a test's stand-in for a simulation).
fn run_shard_with(
    plan: &Plan,
    shard: Shard,
    jobs: usize,
    location: &Location,
    run: impl Fn(&Plan, usize, u64) -> RunResult + Sync,
) -> anyhow::Result<Vec<RunResult>> {
    let mine: Vec<u64> = (0..plan.runs()).filter(|&i| shard.takes(i)).collect();
    let total = mine.len();
    let queue = Mutex::new(mine.into_iter().rev().collect::<Vec<_>>());
    let done = AtomicU64::new(0);
    let results: Mutex<Vec<(u64, RunResult)>> = Mutex::new(Vec::new());
    let failed_write: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the runtime that writes results")?;
    let suffix = shard.suffix();
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    // The queue's lock is let go before the run: held in a `while
                    // let`'s condition it would last the whole run, one run at a time
                    // whatever `jobs` says.
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(i) = next else { break };
                    let (variant, seed) = plan.key(i);
                    let result = run(plan, variant, seed);
                    let json = serde_json::to_vec_pretty(&result).expect("results serialize");
                    let name = result.file_name(&suffix);
                    if let Err(e) = runtime.block_on(location.write(&name, json)) {
                        failed_write
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                    let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                    let mark = if result.is_finding() { "FINDING" } else { "ok" };
                    eprintln!(
                        "sweep: {n}/{total} {} seed {seed}: {mark}",
                        plan.variants[variant].label()
                    );
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, result));
                }
            });
        }
    });
    if let Some(e) = failed_write.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    Ok(results.into_iter().map(|(_, r)| r).collect())
}

/// Threads for a sweep by default: the cores, but no more than the memory a run of
/// `plan`'s scenarios needs leaves room for (from `/proc/meminfo`'s MemAvailable
/// where there is one): the full us-central1 replay holds about 1.4 GB.
pub fn default_jobs(plan: &Plan) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_run = plan
        .variants
        .iter()
        .map(|v| bytes_per_run(&v.scenario))
        .max()
        .unwrap_or(0);
    let available = available_memory_bytes().unwrap_or(u64::MAX);
    let by_memory = (available / per_run.max(1)).max(1) as usize;
    cores.min(by_memory)
}

/// About what one run of `scenario` holds at its peak: 260 bytes per write (the
/// full replay: 1.4 GB for 5.7M writes) and 64 MiB besides.
pub fn bytes_per_run(scenario: &crate::scenario::Scenario) -> u64 {
    let workload = &scenario.workload;
    let active = workload.stop_at.min(scenario.duration);
    let writes = workload.rate * f64::from(workload.hosts) * active.as_secs_f64();
    (writes * 260.0) as u64 + (64 << 20)
}

fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    use super::*;

    /// Runs meet: each waits until `jobs` runs are in progress at once. Run one at
    /// a time, none would ever see the others; the wait is bounded so that such a
    /// sweep fails the test instead of hanging it (a passing sweep never waits).
    #[test]
    fn jobs_runs_are_in_progress_at_once() {
        let jobs = 3;
        let plan = Plan::new(
            "t.toml",
            super::super::variant::tests::BASE,
            &[],
            Some(1..=6),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let location = Location::parse(dir.path().to_str().unwrap(), None).unwrap();
        // (runs in progress, most at once, a wait ran out)
        let in_progress = (Mutex::new((0usize, 0usize, false)), Condvar::new());
        let run = |plan: &Plan, variant: usize, seed: u64| {
            let (lock, met) = &in_progress;
            let mut counts = lock.lock().unwrap();
            counts.0 += 1;
            counts.1 = counts.1.max(counts.0);
            met.notify_all();
            let (mut counts, waited) = met
                .wait_timeout_while(counts, Duration::from_secs(30), |c| c.1 < jobs && !c.2)
                .unwrap();
            counts.2 |= waited.timed_out();
            counts.0 -= 1;
            plan.result(variant, seed, Outcome::Passed, None)
        };
        let results = run_shard_with(&plan, Shard::WHOLE, jobs, &location, run).unwrap();
        assert_eq!(results.len(), 6);
        assert_eq!(in_progress.0.lock().unwrap().1, jobs, "most runs at once");
    }
}
