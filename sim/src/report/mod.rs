//! Reporting: what a finished run recorded, turned into files. Everything here is a
//! function of the scenario and its seed, so the same run writes the same bytes;
//! how fast the run went is written apart, to `timing.json`, because it is not.
//!
//! | file | what |
//! |---|---|
//! | `series.rs` | the run as a time series; peaks, alert windows, drains |
//! | `summary.rs` | `report.json` ([`Report`]) |
//! | `markdown.rs` | `report.md` |
//! | `timeseries.rs` | `timeseries.csv` |
//! | `charts.rs` | the PNG charts of a run and of a sweep |
//! | `pipeline.rs` | one run from scenario to report, and its timing |
//! | `sweep.rs` | a scenario run over a grid of settings, summarized |
//! | `plan.rs` | the closed-form planner beside a simulation of its inputs |

use std::path::Path;

use anyhow::Context;

use crate::checker::Verdict;
use crate::world::RunOutput;
use series::Series;

pub mod charts;
mod markdown;
pub mod pipeline;
pub mod plan;
pub mod series;
pub mod summary;
pub mod sweep;
mod timeseries;

pub use summary::Report;

/// Writes `report.json`, `report.md` and `timeseries.csv` into `dir`, and returns
/// the report. `charts` are the chart files already rendered there (name, title).
pub fn write(
    dir: &Path,
    run: &RunOutput,
    verdict: &Verdict,
    series: &Series,
    charts: &[(String, String)],
) -> anyhow::Result<Report> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let report = summary::build(run, verdict, series);
    let json = serde_json::to_string_pretty(&report)? + "\n";
    write_file(&dir.join("report.json"), &json)?;
    write_file(
        &dir.join("report.md"),
        &markdown::markdown(run, verdict, series, &report, charts),
    )?;
    write_file(&dir.join("timeseries.csv"), &timeseries::csv(run, series))?;
    Ok(report)
}

fn write_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    std::fs::write(path, contents).with_context(|| format!("cannot write {}", path.display()))
}
