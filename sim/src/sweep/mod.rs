//! Sweeps: one scenario run over variants (a grid of `--set` values) and a range
//! of seeds, each (variant, seed) an independent, deterministic run, so that a
//! sweep can be split by index over any batch engine and merged back.
//!
//! - [`Plan`]: the variants and seeds, in a fixed order (variant by variant, seed by
//!   seed); run `i` of the plan is the same run wherever it is run.
//! - [`Shard`]: `--shard I/N` takes every run whose index is I modulo N (I may name
//!   the engine's own index variable); it leaves the command that reruns it beside
//!   its results.
//! - [`run_shard`]: the runs on threads, each result written to a [`Location`] (a
//!   directory, or `gs://BUCKET/PREFIX`) as soon as it ends; a failed run is a
//!   finding, with the command that replays it.
//! - [`merge`]: every result back from the location, checked (every run exactly
//!   once, one scenario, one build; a missing shard named with the command that
//!   reruns it), for the distribution report
//!   ([`crate::report::sweep`]).
//!
//! | file | what |
//! |---|---|
//! | `variant.rs` | `--set` arguments and the scenario variants they make |
//! | `result.rs` | one run's result file |
//! | `shard.rs` | which runs a shard takes |
//! | `location.rs` | where results go: a directory or an object store |
//! | `run.rs` | running runs, on threads, as findings when they fail |
//! | `merge.rs` | reading results back, refusing gaps, duplicates and mixtures |

mod location;
mod merge;
mod result;
mod run;
mod shard;
mod variant;

use std::ops::RangeInclusive;

use anyhow::{Context, bail};

pub use location::Location;
pub use merge::merge;
pub use result::{FORMAT, Figures, Outcome, RunResult, SweepId};
pub use run::{bytes_per_run, default_jobs, run_one, run_shard};
pub use shard::{PLACEHOLDER, Shard};
pub use variant::{AS_WRITTEN, SetArg, Variant, parse_set, value_text, variants};

/// A sweep: its variants and seeds, and what identifies it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The scenario file, as given on the command line (for replay commands).
    pub file: String,
    /// The variants, in order.
    pub variants: Vec<Variant>,
    /// What every result of this sweep carries.
    pub id: SweepId,
}

impl Plan {
    /// The plan for the scenario file `file` holding `text`, with `sets` and the
    /// seeds `seeds` (the scenario's own seed when `None`).
    pub fn new(
        file: &str,
        text: &str,
        sets: &[SetArg],
        seeds: Option<RangeInclusive<u64>>,
    ) -> anyhow::Result<Plan> {
        let variants = variants(file, text, sets)?;
        let own = variants[0].scenario.seed;
        let seeds = seeds.unwrap_or(own..=own);
        if seeds.is_empty() {
            bail!(
                "--seeds {}..={}: no seed in that range",
                seeds.start(),
                seeds.end()
            );
        }
        let hash = variants
            .iter()
            .fold(0, |crc, v| crc32c::crc32c_append(crc, v.text.as_bytes()));
        let id = SweepId {
            scenario: variants[0].scenario.name.clone(),
            scenario_hash: format!("{hash:08x}"),
            build: build_id(),
            variants: variants.iter().map(Variant::label).collect(),
            seeds: [*seeds.start(), *seeds.end()],
        };
        Ok(Plan {
            file: file.to_string(),
            variants,
            id,
        })
    }

    /// How many runs.
    pub fn runs(&self) -> u64 {
        self.id.runs()
    }

    /// Run `i`'s (variant, seed).
    pub fn key(&self, i: u64) -> (usize, u64) {
        let seeds = self.id.seeds[1] - self.id.seeds[0] + 1;
        ((i / seeds) as usize, self.id.seeds[0] + i % seeds)
    }

    /// A result of this plan.
    pub fn result(
        &self,
        variant: usize,
        seed: u64,
        outcome: Outcome,
        figures: Option<Figures>,
    ) -> RunResult {
        let sets = self.variants[variant].set_args();
        RunResult {
            format: FORMAT,
            sweep: self.id.clone(),
            variant,
            seed,
            outcome,
            figures,
            replay: format!("sim {} --seed {seed}{sets}", self.file),
        }
    }
}

/// Parses `A..B` (B excluded, as in Rust), `A..=B`, or one seed `A`.
pub fn parse_seeds(text: &str) -> anyhow::Result<RangeInclusive<u64>> {
    let number = |s: &str| -> anyhow::Result<u64> {
        s.trim()
            .parse()
            .with_context(|| format!("--seeds {text:?}: {s:?} is not a seed"))
    };
    let range = if let Some((a, b)) = text.split_once("..=") {
        number(a)?..=number(b)?
    } else if let Some((a, b)) = text.split_once("..") {
        let end = number(b)?
            .checked_sub(1)
            .with_context(|| format!("--seeds {text:?} is empty"))?;
        number(a)?..=end
    } else {
        let seed = number(text)?;
        seed..=seed
    };
    if range.is_empty() {
        bail!("--seeds {text:?} is empty");
    }
    Ok(range)
}

/// The build that runs a sweep: the version and the crc32c of the running
/// executable, so that results from two builds are never merged as one.
pub fn build_id() -> String {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|path| std::fs::read(path).ok());
    match exe {
        Some(bytes) => format!(
            "sim {} (executable crc32c {:08x})",
            env!("CARGO_PKG_VERSION"),
            crc32c::crc32c(&bytes)
        ),
        None => format!("sim {} (executable unreadable)", env!("CARGO_PKG_VERSION")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_ranges_read_as_rust_ranges() {
        assert_eq!(parse_seeds("1..1000").unwrap(), 1..=999);
        assert_eq!(parse_seeds("1..=1000").unwrap(), 1..=1000);
        assert_eq!(parse_seeds("7").unwrap(), 7..=7);
        assert!(parse_seeds("5..5").is_err());
        assert!(parse_seeds("0..0").is_err());
        assert!(parse_seeds("a..3").is_err());
    }

    const BASE: &str = r#"
name = "t"
seed = 9
start = 2026-10-08T10:00:00Z
duration = "10s"
[workload]
rate = 5
size = "1KiB"
"#;

    #[test]
    fn a_plan_orders_runs_variant_by_variant_and_names_how_to_replay_each() {
        let sets = [parse_set("drainer.workers=1,2").unwrap()];
        let plan = Plan::new("t.toml", BASE, &sets, Some(3..=5)).unwrap();
        assert_eq!(plan.runs(), 6);
        let keys: Vec<_> = (0..6).map(|i| plan.key(i)).collect();
        assert_eq!(keys, [(0, 3), (0, 4), (0, 5), (1, 3), (1, 4), (1, 5)]);
        let result = plan.result(1, 4, Outcome::Passed, None);
        assert_eq!(
            result.replay,
            "sim t.toml --seed 4 --set 'drainer.workers=2'"
        );
        let own = Plan::new("t.toml", BASE, &[], None).unwrap();
        assert_eq!((own.runs(), own.key(0)), (1, (0, 9)));
        assert_eq!(own.id.variants, [AS_WRITTEN]);
    }
}
