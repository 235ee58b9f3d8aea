//! The `sim` command: run a scenario (`sim SCENARIO`), or serve the Cloud Storage
//! fake on a real port (`sim fake-gcs`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod progress;
mod sweep;

// A simulation allocates and frees millions of small buffers (HTTP messages, entry
// files); mimalloc does that measurably faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Deterministic outage bench for the spool.
#[derive(Debug, Parser)]
#[command(name = "sim", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Scenario file (TOML) to run.
    scenario: Option<PathBuf>,
    /// Directory for the report.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed overriding the scenario's.
    #[arg(long)]
    seed: Option<u64>,
    /// KEY=VALUE: a dotted key of the scenario file set to a value (repeatable), as
    /// a sweep's variant sets it (`sim sweep` prints these to replay a run).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Cloud Storage fake on a real port, logging every request (the same
    /// as the `fake-gcs` binary).
    FakeGcs(fake_gcs::cli::Args),
    /// Run a scenario over seeds (--seeds) and variants (--set KEY=V1,V2,...; several
    /// make a grid), on this machine's cores or as one shard of many (--shard), and
    /// report each variant's distribution.
    Sweep(sweep::SweepArgs),
    /// Merge a sharded sweep's results (a directory or gs://BUCKET/PREFIX) into its
    /// report, refusing gaps, duplicates and mixed builds.
    Merge(sweep::MergeArgs),
    /// How much disk a spool needs for an outage, and how long it takes to drain:
    /// closed form beside a simulation of the same inputs.
    Plan(PlanArgs),
}

#[derive(Debug, Args)]
struct PlanArgs {
    /// Writes per second per instance.
    #[arg(long)]
    rate: f64,
    /// Mean object size (e.g. 4KiB).
    #[arg(long)]
    size: bytesize::ByteSize,
    /// Outage length (e.g. 12h30m).
    #[arg(long, value_parser = humantime::parse_duration)]
    outage: std::time::Duration,
    /// Writes/s the store accepts from the instance after recovery (default: three
    /// times the write rate).
    #[arg(long)]
    drain_rate: Option<f64>,
    /// Share of writes that fail during the outage.
    #[arg(long, default_value_t = 1.0)]
    failing_share: f64,
    /// The outage's 99th percentile: the length is then lognormal with --outage as
    /// its median, and both answers are distributions (the simulation a sweep over
    /// --seeds seeds, each drawing its own outage).
    #[arg(long, value_parser = humantime::parse_duration)]
    outage_p99: Option<std::time::Duration>,
    /// Seeds the spread's simulation runs (with --outage-p99).
    #[arg(long, default_value_t = 50)]
    seeds: u64,
    /// Share of outages the spool may overflow in (with --outage-p99), e.g. 1%.
    #[arg(long, default_value = "1%", value_parser = sweep::parse_share)]
    target_overflow: f64,
    /// Print only the closed form (the simulation of a long outage takes a while).
    #[arg(long)]
    no_simulate: bool,
    /// Directory for the simulated run's report (default reports/plan).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The fake logs every request at info: right for `fake-gcs`, a flood in a replay;
    // dead-lettering and quarantine are expected in scenarios that cause them.
    let default_filter = match cli.command {
        Some(Command::FakeGcs(_)) => "info",
        _ => "warn,spool=error",
    };
    sim::logging::init(default_filter);
    match cli.command {
        Some(Command::FakeGcs(args)) => match fake_gcs::cli::run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sim fake-gcs: {e:#}");
                ExitCode::FAILURE
            }
        },
        Some(Command::Sweep(args)) => match sweep::sweep(args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("sim sweep: {e:#}");
                ExitCode::from(2)
            }
        },
        Some(Command::Merge(args)) => match sweep::merge(args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("sim merge: {e:#}");
                ExitCode::from(2)
            }
        },
        Some(Command::Plan(args)) => match plan(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sim plan: {e:#}");
                ExitCode::from(2)
            }
        },
        None => {
            let Some(path) = cli.scenario else {
                eprintln!(
                    "sim: give a scenario file (sim SCENARIO) or a subcommand; see sim --help"
                );
                return ExitCode::from(2);
            };
            match run_scenario(&path, cli.out, cli.seed, &cli.sets) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("sim: {e:#}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

fn run_scenario(
    path: &std::path::Path,
    out: Option<PathBuf>,
    seed: Option<u64>,
    sets: &[String],
) -> anyhow::Result<bool> {
    let mut scenario = match sets.is_empty() {
        true => sim::scenario::load(path)?,
        false => sweep::one_variant(path, sets)?,
    };
    if let Some(seed) = seed {
        scenario.seed = seed;
    }
    let dir = out.unwrap_or_else(|| PathBuf::from("reports").join(&scenario.name));
    eprintln!(
        "sim: {} (seed {}, {} simulated) -> {}",
        scenario.name,
        scenario.seed,
        humantime::format_duration(scenario.duration),
        dir.display()
    );
    // The world drops the reporter (and clears its bar) when the run has stepped.
    let mut reporter = progress::Reporter::new(scenario.duration, scenario.start);
    let options = sim::world::Options {
        progress: Some(Box::new(move |p: sim::world::Progress| reporter.update(p))),
        ..Default::default()
    };
    let finished = sim::report::pipeline::run(scenario, &dir, options, true)?;
    let r = &finished.report;
    let t = &finished.timing;
    println!(
        "{}: {} writes, {} stored, {} spooled, {} refused, {} unknown, {} in bucket, {} lost; peak {} files",
        r.scenario,
        r.tally.told.writes,
        r.tally.told.stored,
        r.tally.told.spooled,
        r.tally.told.rejected,
        r.tally.told.unknown,
        r.tally.in_bucket,
        r.tally.lost,
        r.peak_files
    );
    for inv in &r.invariants {
        let mark = if inv.held { "ok  " } else { "FAIL" };
        let detail = if inv.detail.is_empty() {
            String::new()
        } else {
            format!(": {}", inv.detail)
        };
        println!("  {mark} {}{detail}", inv.name);
    }
    println!(
        "simulated {} in {:.1} s wall ({:.0} simulated seconds per second, {} requests); report in {}",
        humantime::format_duration(std::time::Duration::from_secs(t.simulated_seconds as u64)),
        t.wall_seconds,
        t.speedup,
        t.requests,
        finished.dir.join("report.md").display()
    );
    Ok(r.passed)
}

fn plan(args: PlanArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.rate > 0.0, "--rate must be above 0");
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.failing_share),
        "--failing-share must be between 0 and 1"
    );
    let input = sim::report::plan::Input {
        rate: args.rate,
        size: args.size.as_u64(),
        outage: args.outage,
        failing_share: args.failing_share,
        drain_rate: args.drain_rate.unwrap_or(3.0 * args.rate),
    };
    if let Some(p99) = args.outage_p99 {
        anyhow::ensure!(
            p99 >= args.outage,
            "--outage-p99 must be at least --outage (the median)"
        );
        let spread = sim::report::plan::Spread {
            p99,
            target_overflow: args.target_overflow,
        };
        let simulated = match args.no_simulate {
            true => None,
            false => {
                let dir = args.out.unwrap_or_else(|| PathBuf::from("reports/plan"));
                eprintln!(
                    "sim plan: simulating {} seeds (report in {})",
                    args.seeds,
                    dir.display()
                );
                Some(sim::report::plan::simulate_spread(
                    &input, &spread, args.seeds, &dir,
                )?)
            }
        };
        print!(
            "{}",
            sim::report::plan::spread_table(&input, &spread, simulated.as_ref())
        );
        return Ok(());
    }
    let closed = sim::report::plan::closed_form(&input);
    let simulated = if args.no_simulate {
        None
    } else {
        let dir = args.out.unwrap_or_else(|| PathBuf::from("reports/plan"));
        eprintln!(
            "sim plan: simulating the same inputs (report in {})",
            dir.display()
        );
        Some(sim::report::plan::simulate(&input, args.seed, &dir)?)
    };
    print!(
        "{}",
        sim::report::plan::table(&input, &closed, simulated.as_ref())
    );
    Ok(())
}
