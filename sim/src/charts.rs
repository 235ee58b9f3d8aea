//! PNG charts of a run (being written; see `render_run`).

use std::path::Path;

use crate::series::Series;
use crate::world::RunOutput;

/// Renders the run's charts into `dir`; returns (file name, title) of each.
pub fn render_run(
    _dir: &Path,
    _run: &RunOutput,
    _series: &Series,
) -> anyhow::Result<Vec<(String, String)>> {
    Ok(Vec::new())
}

/// Renders a sweep chart (being written).
pub fn render_sweep(
    _dir: &Path,
    file: &str,
    title: &str,
    _x_label: &str,
    _y_label: &str,
    _series: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<(String, String)> {
    Ok((file.to_string(), title.to_string()))
}
