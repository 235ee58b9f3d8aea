//! `sim sweep` and `sim merge`: a sweep run here on every core, or as one shard of
//! a batch engine's job (results to a directory or `gs://`), then merged into its
//! report. A run that fails is a finding: listed with its replay command, and the
//! exit status says so; the other runs still count.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use sim::sweep::{Location, Plan, Shard};

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Scenario file (TOML).
    scenario: PathBuf,
    /// KEY=V1,V2,... : a dotted key of the scenario file and the values to try
    /// (e.g. drainer.jitter=none,equal,full,decorrelated). Repeat for a grid.
    #[arg(long = "set", value_name = "KEY=V1,V2,...")]
    sets: Vec<String>,
    /// Seeds to run each variant with: A..B (B excluded), A..=B, or one seed
    /// (default: the scenario's own).
    #[arg(long, value_name = "RANGE")]
    seeds: Option<String>,
    /// Directory for the report (default reports/<scenario>-sweep).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where each run's result file goes: a directory or gs://BUCKET/PREFIX
    /// (default <out>/results). Required with --shard.
    #[arg(long, value_name = "LOCATION")]
    results: Option<String>,
    /// Run only shard I of N: every run whose index is I modulo N. I may name an
    /// environment variable: JOB_COMPLETION_INDEX/16 (Kubernetes Indexed Job),
    /// SLURM_ARRAY_TASK_ID/16 (Slurm array). A shard writes results, no report:
    /// `sim merge` makes it.
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// An emulator for gs:// results (http://host:port); default
    /// STORAGE_EMULATOR_HOST when set.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// The command that runs a shard of this sweep again, with {shard} for its
    /// index: the batch engine's (deploy/slurm-array.sh and k8s-indexed-job.sh give
    /// theirs). Kept beside the results as shardIofN.rerun, so that `sim merge`
    /// names it for a shard whose results are missing. Default: this `sim sweep`
    /// with --shard {shard}/N.
    #[arg(long, value_name = "COMMAND")]
    rerun: Option<String>,
    /// Runs at once (default: the cores, fewer when memory is short).
    #[arg(long)]
    jobs: Option<usize>,
    /// Share of runs allowed to fill the spool: the report names the max_bytes
    /// that keeps overflow at or below it (e.g. 1%).
    #[arg(long, default_value = "1%", value_parser = parse_share)]
    target_overflow: f64,
    /// The figure to chart (its median over seeds) against the first swept key.
    #[arg(long, default_value = "drain_seconds", value_parser = clap::builder::PossibleValuesParser::new(sim::report::sweep::METRICS))]
    metric: String,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Where the shards wrote their results: a directory or gs://BUCKET/PREFIX.
    location: String,
    /// Directory for the report (default reports/<scenario>-sweep).
    #[arg(long)]
    out: Option<PathBuf>,
    /// An emulator for gs:// results (default STORAGE_EMULATOR_HOST when set).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Share of runs allowed to fill the spool (e.g. 1%).
    #[arg(long, default_value = "1%", value_parser = parse_share)]
    target_overflow: f64,
    /// The figure to chart (its median over seeds) against the first swept key.
    #[arg(long, default_value = "drain_seconds", value_parser = clap::builder::PossibleValuesParser::new(sim::report::sweep::METRICS))]
    metric: String,
}

pub fn parse_share(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(percent) => (percent, 100.0),
        None => (text, 1.0),
    };
    let share = number
        .trim()
        .parse::<f64>()
        .map_err(|e| format!("{text:?}: {e}"))?
        / scale;
    if share > 0.0 && share < 1.0 {
        Ok(share)
    } else {
        Err(format!("{text:?} is not a share between 0 and 100%"))
    }
}

/// The scenario at `path` with `sets` (KEY=VALUE each) applied: one variant.
pub fn one_variant(path: &Path, sets: &[String]) -> anyhow::Result<sim::scenario::Scenario> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {file}"))?;
    let sets = parse_sets(sets)?;
    if let Some(set) = sets.iter().find(|s| s.values.len() != 1) {
        anyhow::bail!(
            "--set {}: a run takes one value per key (sweeps take several)",
            set.key
        );
    }
    let mut variants = sim::sweep::variants(&file, &text, &sets)?;
    Ok(variants.remove(0).scenario)
}

fn parse_sets(sets: &[String]) -> anyhow::Result<Vec<sim::sweep::SetArg>> {
    sets.iter().map(|s| sim::sweep::parse_set(s)).collect()
}

pub fn sweep(args: SweepArgs) -> anyhow::Result<bool> {
    let file = args.scenario.display().to_string();
    let text =
        std::fs::read_to_string(&args.scenario).with_context(|| format!("cannot read {file}"))?;
    let seeds = args
        .seeds
        .as_deref()
        .map(sim::sweep::parse_seeds)
        .transpose()?;
    let plan = Plan::new(&file, &text, &parse_sets(&args.sets)?, seeds)?;
    let dir = (args.out.clone()).unwrap_or_else(|| default_dir(&plan.id.scenario));
    let shard = match &args.shard {
        Some(text) => Shard::parse(text, |name| std::env::var(name).ok())?,
        None => Shard::WHOLE,
    };
    let results = match (&args.results, args.shard.is_some()) {
        (Some(location), _) => Location::parse(location, args.endpoint.as_deref())?,
        (None, false) => Location::Dir(dir.join("results")),
        (None, true) => anyhow::bail!("--shard needs --results: where the shards' results meet"),
    };
    let rerun = match &args.rerun {
        Some(command) => command.clone(),
        None => default_rerun(&args, &plan, shard, &results),
    };
    block_on(results.write(&shard.rerun_file_name(), format!("{rerun}\n").into_bytes()))
        .context("cannot write the shard's rerun file beside its results")?;
    let jobs = args.jobs.unwrap_or_else(|| sim::sweep::default_jobs(&plan));
    eprintln!(
        "sim sweep: {} runs ({} variants x seeds {}..={}), shard {}/{}, on {jobs} threads -> {results}",
        plan.runs(),
        plan.variants.len(),
        plan.id.seeds[0],
        plan.id.seeds[1],
        shard.index,
        shard.count,
    );
    let mine = sim::sweep::run_shard(&plan, shard, jobs, &results)?;
    let findings: Vec<_> = mine.iter().filter(|r| r.is_finding()).collect();
    if shard.count > 1 {
        // A shard's own findings, last in its log (a Kubernetes Pod's termination
        // message is the end of its log); the whole sweep's are in report()'s.
        for f in &findings {
            println!(
                "FINDING {} seed {}: replay with `{}`",
                plan.variants[f.variant].label(),
                f.seed,
                f.replay
            );
        }
        println!(
            "shard {}/{}: {} runs, {} findings; merge with `sim merge {results}`",
            shard.index,
            shard.count,
            mine.len(),
            findings.len()
        );
        return Ok(findings.is_empty());
    }
    // Read back from where they were written, as `sim merge` would: the report is
    // the same whether the sweep ran here or in shards.
    let merged = sim::sweep::merge(&block_on(results.read_all())?)?;
    report(&merged, &dir, args.target_overflow, &args.metric)
}

pub fn merge(args: MergeArgs) -> anyhow::Result<bool> {
    let location = Location::parse(&args.location, args.endpoint.as_deref())?;
    // Each file read once, merged once.
    let merged = sim::sweep::merge(&block_on(location.read_all())?)?;
    let dir = (args.out).unwrap_or_else(|| default_dir(&merged[0].sweep.scenario));
    report(&merged, &dir, args.target_overflow, &args.metric)
}

fn default_dir(scenario: &str) -> PathBuf {
    PathBuf::from("reports").join(format!("{scenario}-sweep"))
}

fn block_on<T>(work: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(work)
}

/// This sweep's own command for shard {shard} of `shard.count`: the scenario by its
/// absolute path (a rerun may start elsewhere), the seeds, the --set grid, the
/// results and the emulator.
fn default_rerun(args: &SweepArgs, plan: &Plan, shard: Shard, results: &Location) -> String {
    let scenario = std::fs::canonicalize(&args.scenario).unwrap_or_else(|_| args.scenario.clone());
    let mut words = vec![
        "sim".to_string(),
        "sweep".to_string(),
        shell_word(&scenario.display().to_string()),
        "--seeds".to_string(),
        format!("{}..={}", plan.id.seeds[0], plan.id.seeds[1]),
    ];
    for set in &args.sets {
        words.extend(["--set".to_string(), shell_word(set)]);
    }
    if shard.count > 1 {
        words.extend([
            "--shard".to_string(),
            format!("{}/{}", sim::sweep::PLACEHOLDER, shard.count),
        ]);
    }
    words.extend(["--results".to_string(), shell_word(&results.to_string())]);
    if let Some(endpoint) = &args.endpoint {
        words.extend(["--endpoint".to_string(), shell_word(endpoint)]);
    }
    words.join(" ")
}

/// `word` as one word of a shell command: as it is when nothing in it is special.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c);
    match !word.is_empty() && word.chars().all(plain) {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

/// Writes the report of the `merged` results into `dir`; true when no run is a
/// finding.
fn report(
    merged: &[sim::sweep::RunResult],
    dir: &Path,
    target_overflow: f64,
    metric: &str,
) -> anyhow::Result<bool> {
    let summary = sim::report::sweep::write(dir, merged, target_overflow, metric)?;
    for v in &summary.variants {
        let p = |name: &str| {
            v.figures.get(name).map_or("-".to_string(), |p| {
                format!(
                    "p50 {:.0} p99 {:.0} max {:.0} (seed {})",
                    p.p50, p.p99, p.max, p.max_seed
                )
            })
        };
        println!(
            "{:40} {} runs, {} findings; peak bytes {}; drain s {}",
            v.variant,
            v.runs,
            v.findings,
            p("peak_bytes"),
            p("drain_seconds")
        );
    }
    // Every finding of the sweep (a shard prints only its own), to replay alone.
    for f in &summary.findings {
        println!(
            "FINDING {} seed {}: {}; replay with `{}`",
            f.variant, f.seed, f.what, f.replay
        );
    }
    println!("report in {}", dir.join("sweep.md").display());
    Ok(summary.findings.is_empty())
}
