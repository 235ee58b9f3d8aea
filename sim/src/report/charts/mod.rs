//! PNG charts of a run ([`render_run`]) and of a parameter sweep ([`render_sweep`]).
//!
//! Owns how the report's pictures look; the numbers come from [`Series`] and
//! [`RunOutput`] unchanged. Promises:
//!
//! - Sizes: `depth.png` is 1200×700 (entries above bytes), every other chart 1200×500.
//! - A run chart's x axis is the scenario's wall-clock time in UTC (`scenario.start + t`):
//!   HH:MM:SS for runs under 10 minutes, HH:MM within one day, `Oct 08 12:00` when the
//!   run crosses midnight. Ticks fall on round wall-clock times.
//! - Every run chart shades the store's fault windows (light red; lighter when a window
//!   takes only a share of requests), draws a vertical line at each crash, restart and
//!   deploy (one colour per kind) and shades the host's down time grey.
//! - `age.png` marks along its top when each shipped alert rule would have fired
//!   (`Series::alerts`, any host); caps and thresholds are dashed lines, or named "above
//!   the chart" in the legend when the data stays under a tenth of them.
//! - Legends sit in a strip between the title and the plot and never cover data; rate
//!   lines are labelled with their run totals and leave out idle stretches at zero.
//! - At most one point per pixel column: a longer series keeps each column's maximum
//!   (gauges) or mean (rates).
//! - Text is DejaVu Sans compiled into the binary (the `dejavu` crate; no system fonts,
//!   fontconfig or freetype), laid out here with `ab_glyph` (plotters 0.3.7's own
//!   ab_glyph text drops each glyph's side bearing, so letters would sit unevenly).
//!   Its licence is in `LICENSES/DejaVu.txt`.
//! - Nothing here reads the clock or randomness.
//!
//! | file | what |
//! |---|---|
//! | `run.rs` | the four run charts (depth, age, outcomes, store) and the data they draw |
//! | `frame.rs` | what every run chart shares: the time axis, the fault and host overlays |
//! | `sweep.rs` | the sweep chart |
//! | `panel.rs` | panels (a y axis and its lines), the title and the legend |
//! | `axes.rs` | ticks on round values and wall-clock times; numbers and units for people |
//! | `text.rs` | the embedded font, laid out with ab_glyph |

mod axes;
mod frame;
mod panel;
mod run;
mod sweep;
#[cfg(test)]
mod tests;
mod text;

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ab_glyph::{Font, FontRef, Glyph, ScaleFont, point};
use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, VPos};
use plotters_backend::{BackendCoord, DrawingErrorKind};
use spool::format;

use crate::report::series::{AlertWindow, Row, Series};
use crate::scenario::EventKind;
use crate::world::RunOutput;

/// Width of every chart, in pixels.
const WIDTH: u32 = 1200;
/// Height of a one-panel chart.
const HEIGHT: u32 = 500;
/// Height of the two-panel depth chart.
const DEPTH_HEIGHT: u32 = 700;
/// Height of the title band.
const TITLE_HEIGHT: u32 = 44;
/// Space around each plot.
const MARGIN: u32 = 12;
/// Space right of a plot, so the last time label fits.
const RIGHT_MARGIN: u32 = 44;
/// Width left of a plot for the y tick labels and description.
const Y_AREA: u32 = 84;
/// Height below a plot for the x tick labels and description.
const X_AREA: u32 = 58;
/// Pixel columns of a plot: lines longer than this are downsampled.
const COLUMNS: usize = (WIDTH - Y_AREA - MARGIN - RIGHT_MARGIN) as usize;
/// Height of one legend row.
const LEGEND_ROW: u32 = 24;
/// Share of the y range each alert strip takes at the top of the age chart.
const STRIP: f64 = 0.05;
/// A reference line (cap, threshold) is drawn when the data reaches this share of it;
/// below, it would flatten the data, so the legend says it is above the chart.
const LIMIT_SHOWN_FROM: f64 = 0.1;

/// Text sizes, in pixels from the font's ascender to its descender.
const TITLE_SIZE: f32 = 25.0;
const DESC_SIZE: f32 = 18.0;
const TICK_SIZE: f32 = 16.0;
const LEGEND_SIZE: f32 = 16.0;

const TEXT: RGBColor = RGBColor(20, 20, 20);
const AXIS: RGBColor = RGBColor(90, 90, 90);
const GRID: RGBAColor = RGBAColor(0, 0, 0, 0.10);
const LIMIT: RGBColor = RGBColor(60, 60, 60);
const FAULT: RGBColor = RGBColor(214, 39, 40);
const FAULT_ALPHA: f64 = 0.16;
const PARTIAL_FAULT_ALPHA: f64 = 0.07;
const DOWN: RGBAColor = RGBAColor(0, 0, 0, 0.10);
const CRASH: RGBColor = RGBColor(0, 0, 0);
const RESTART: RGBColor = RGBColor(140, 86, 75);
const DEPLOY: RGBColor = RGBColor(227, 119, 194);
/// Event lines are drawn a little see-through so the data they cross stays readable.
const EVENT_ALPHA: f64 = 0.65;
const ENTRIES: RGBColor = RGBColor(31, 119, 180);
const BYTES: RGBColor = RGBColor(148, 103, 189);
const AGE: RGBColor = RGBColor(31, 119, 180);
const REQUESTS: RGBColor = RGBColor(31, 119, 180);
const STORED: RGBColor = RGBColor(44, 160, 44);
const SPOOLED: RGBColor = RGBColor(31, 119, 180);
const REFUSED: RGBColor = RGBColor(214, 39, 40);
const FAILED: RGBColor = RGBColor(255, 127, 14);
const UNKNOWN: RGBColor = RGBColor(148, 103, 189);
const DRAINED: RGBColor = RGBColor(23, 190, 207);
/// Colours for lines without a fixed meaning (error kinds, sweep lines), apart from
/// the event colours.
const PALETTE: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
    RGBColor(31, 119, 180),
];
/// Colours of alert strips, by rule in order of first firing.
const ALERT_COLORS: [RGBColor; 4] = [
    RGBColor(245, 166, 35),
    RGBColor(230, 81, 0),
    RGBColor(106, 27, 154),
    RGBColor(183, 28, 28),
];

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<Ticked, Ticked>>;

/// Renders the run's charts into `dir`; returns (file name, title) of each, in the
/// order depth, age, outcomes, store.
pub fn render_run(
    dir: &Path,
    run: &RunOutput,
    series: &Series,
) -> anyhow::Result<Vec<(String, String)>> {
    let frame = Frame::new(run, fonts()?);
    let charts: [(&str, &str, RunChart); 4] = [
        ("depth.png", "Spool depth", depth_chart),
        ("age.png", "Oldest entry age", age_chart),
        ("outcomes.png", "Writes per second", outcomes_chart),
        ("store.png", "Store requests per second", store_chart),
    ];
    let mut out = Vec::with_capacity(charts.len());
    for (file, title, draw) in charts {
        let path = dir.join(file);
        draw(&path, title, &frame, run, series)
            .with_context(|| format!("cannot render {}", path.display()))?;
        out.push((file.to_string(), title.to_string()));
    }
    Ok(out)
}

/// What a sweep chart shows.
#[derive(Debug, Clone, Copy)]
pub struct SweepChart<'a> {
    /// File name in the output directory.
    pub file: &'a str,
    /// Title.
    pub title: &'a str,
    /// The swept key.
    pub x_label: &'a str,
    /// The figure charted.
    pub y_label: &'a str,
    /// Names of the x positions 0, 1, 2, ... when the swept values are not numbers
    /// (jitter strategies); empty for numeric values.
    pub categories: &'a [String],
}

/// Renders one figure against a swept value into `dir/<file>` (1200×500): one line
/// with markers per named series of (x, y) points. When there are at most 15 distinct
/// x values each gets a tick, labelled with its category when there are categories.
/// Returns (file, title).
pub fn render_sweep(
    dir: &Path,
    chart: &SweepChart,
    series: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<(String, String)> {
    let pen = fonts()?;
    let path = dir.join(chart.file);
    draw_sweep(&path, pen, chart, series)
        .with_context(|| format!("cannot render {}", path.display()))?;
    Ok((chart.file.to_string(), chart.title.to_string()))
}

use axes::*;
use frame::*;
use panel::*;
use run::*;
use sweep::*;
use text::*;
