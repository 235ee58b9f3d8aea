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

// ---------------------------------------------------------------------------------
// Fonts.

/// DejaVu Sans, parsed once.
struct Faces {
    regular: FontRef<'static>,
    bold: FontRef<'static>,
}

/// Loads DejaVu Sans once per process, also registering it as plotters' "sans-serif"
/// (plotters lays out its empty mesh labels with it), and returns a pen that writes
/// with it.
fn fonts() -> anyhow::Result<Pen> {
    static FACES: OnceLock<Option<Faces>> = OnceLock::new();
    let faces = FACES.get_or_init(|| {
        let (regular, bold) = (dejavu::sans::regular(), dejavu::sans::bold());
        register_font("sans-serif", FontStyle::Normal, regular).ok()?;
        register_font("sans-serif", FontStyle::Bold, bold).ok()?;
        Some(Faces {
            regular: FontRef::try_from_slice(regular).ok()?,
            bold: FontRef::try_from_slice(bold).ok()?,
        })
    });
    let faces = faces
        .as_ref()
        .context("the embedded DejaVu Sans font did not load")?;
    Ok(Pen(faces))
}

// ---------------------------------------------------------------------------------
// The four run charts.

type RunChart = fn(&Path, &str, &Frame, &RunOutput, &Series) -> anyhow::Result<()>;

fn depth_chart(
    path: &Path,
    title: &str,
    frame: &Frame,
    run: &RunOutput,
    series: &Series,
) -> anyhow::Result<()> {
    let spool = &run.scenario.spool;
    // The spools' caps: one per app host, or the relay's alone.
    let hosts = u64::from(run.scenario.spool_hosts());
    let caps = (
        (spool.max_files * hosts) as f64,
        (spool.max_bytes * hosts) as f64,
    );
    let files = gauge(&series.rows, |r| r.files as f64);
    let bytes = gauge(&series.rows, |r| r.bytes as f64);
    let (files_max, files_cap) = scale_with_limit(peak(&files), caps.0);
    let (bytes_max, bytes_cap) = scale_with_limit(peak(&bytes), caps.1);
    let unit = ByteUnit::for_max(bytes_max);

    let mut top = Panel::new("entries".to_string(), files_max);
    top.x_labels = false;
    top.lines.push(Line::new("entries", ENTRIES, files));
    top.limits.extend(files_cap);
    let mut bottom = Panel::new(format!("bytes ({})", unit.name), bytes_max / unit.size);
    let scaled = bytes.iter().map(|&(t, v)| (t, v / unit.size)).collect();
    bottom.lines.push(Line::new("bytes", BYTES, scaled));
    bottom.limits.extend(bytes_cap.map(|y| y / unit.size));

    let summed = if hosts == 1 { "" } else { ", all hosts" };
    let mut legend = vec![
        Entry::line(format!("entries{summed}"), ENTRIES, false),
        Entry::line(format!("bytes{summed}"), BYTES, false),
        cap_entry(hosts, caps, (files_cap.is_some(), bytes_cap.is_some())),
    ];
    legend.extend(frame.legend());

    let root = BitMapBackend::new(path, (WIDTH, DEPTH_HEIGHT)).into_drawing_area();
    let plot = canvas(&root, frame.pen, &frame.title(title), &legend)?;
    let (upper, lower) = plot.split_vertically((plot.dim_in_pixel().1 - X_AREA) / 2);
    draw_panel(&upper, frame, &top)?;
    draw_panel(&lower, frame, &bottom)?;
    root.present()?;
    Ok(())
}

/// The legend entry for the depth caps (files, bytes), saying when one is above the
/// chart.
fn cap_entry(hosts: u64, caps: (f64, f64), shown: (bool, bool)) -> Entry {
    let per = if hosts == 1 {
        String::new()
    } else {
        format!(" × {hosts} hosts")
    };
    let off = match shown {
        (true, true) => "",
        (false, true) => " (entries cap above the chart)",
        (true, false) => " (bytes cap above the chart)",
        (false, false) => " (above the charts)",
    };
    let (files, bytes) = (format::count(caps.0 as u64), ByteUnit::human(caps.1));
    Entry::line(
        format!("cap{per}: {files} entries, {bytes}{off}"),
        LIMIT,
        true,
    )
}

fn age_chart(
    path: &Path,
    title: &str,
    frame: &Frame,
    _run: &RunOutput,
    series: &Series,
) -> anyhow::Result<()> {
    let (rule, threshold) = stale_rule();
    let ages = gauge(&series.rows, |r| r.oldest_age_seconds);
    let (data_max, limit) = scale_with_limit(peak(&ages), threshold);
    let unit = TimeUnit::for_max(data_max);
    let firing = firing_by_rule(&series.alerts, frame.span);
    let y_max = data_max / unit.size / (1.0 - STRIP * firing.len() as f64);

    let mut panel = Panel::new(format!("oldest entry age ({})", unit.name), y_max);
    let scaled = ages.iter().map(|&(t, v)| (t, v / unit.size)).collect();
    panel.lines.push(Line::new("age", AGE, scaled));
    panel.limits.extend(limit.map(|y| y / unit.size));
    let above = if limit.is_some() {
        ""
    } else {
        " (above the chart)"
    };
    let over_hosts = if frame.hosts == 1 {
        ""
    } else {
        " (max over hosts)"
    };
    let mut legend = vec![
        Entry::line(format!("oldest entry age{over_hosts}"), AGE, false),
        Entry::line(
            format!("{rule} threshold: {}{above}", TimeUnit::human(threshold)),
            LIMIT,
            true,
        ),
    ];
    for (i, (name, periods)) in firing.into_iter().enumerate() {
        let color = ALERT_COLORS[i % ALERT_COLORS.len()];
        legend.push(Entry::fill(format!("{name} firing"), color.to_rgba()));
        panel.strips.push(Strip { color, periods });
    }
    legend.extend(frame.legend());
    one_panel(path, &frame.title(title), &legend, frame, &panel)
}

/// The rule that watches the oldest entry's age, and its threshold in seconds.
fn stale_rule() -> (&'static str, f64) {
    spool::alerts::RULES
        .iter()
        .find_map(|r| match r.condition {
            spool::alerts::Condition::OldestAgeAbove(s) => Some((r.name, s)),
            _ => None,
        })
        .unwrap_or(("SpoolOldestEntryStale", 900.0))
}

fn outcomes_chart(
    path: &Path,
    title: &str,
    frame: &Frame,
    _run: &RunOutput,
    series: &Series,
) -> anyhow::Result<()> {
    type Pick = fn(&Row) -> u64;
    let kinds: [(&str, RGBColor, Pick); 6] = [
        ("stored", STORED, |r| r.told.stored),
        ("spooled", SPOOLED, |r| r.told.spooled),
        ("refused (spool full)", REFUSED, |r| r.told.rejected),
        ("failed", FAILED, |r| r.told.failed),
        ("unknown (in flight when killed)", UNKNOWN, |r| {
            r.told.unknown
        }),
        ("drained", DRAINED, |r| r.drained),
    ];
    let lines = kinds
        .iter()
        .map(|&(label, color, pick)| {
            let total: u64 = series.rows.iter().map(pick).sum();
            let points = rate(&series.rows, frame.sample, |r| pick(r) as f64);
            let mut line = Line::new(&format!("{label}: {}", format::count(total)), color, points);
            line.width = if color == REFUSED { 3 } else { 2 };
            line.dashed = color == DRAINED;
            line
        })
        .collect();
    rates_chart(path, &frame.title(title), frame, "writes/s", lines)
}

fn store_chart(
    path: &Path,
    title: &str,
    frame: &Frame,
    _run: &RunOutput,
    series: &Series,
) -> anyhow::Result<()> {
    let total: u64 = series.rows.iter().map(|r| r.store_requests).sum();
    let requests = rate(&series.rows, frame.sample, |r| r.store_requests as f64);
    let label = format!("requests: {}", format::count(total));
    let mut lines = vec![Line::new(&label, REQUESTS, requests)];
    for (i, kind) in series.error_kinds.iter().enumerate() {
        let count = |r: &Row| r.store_errors.get(kind).copied().unwrap_or(0);
        let total: u64 = series.rows.iter().map(count).sum();
        let points = rate(&series.rows, frame.sample, |r| count(r) as f64);
        // The last palette colour is the requests' blue.
        let color = PALETTE[i % (PALETTE.len() - 1)];
        let label = format!("failed, {kind}: {}", format::count(total));
        lines.push(Line::new(&label, color, points));
    }
    rates_chart(path, &frame.title(title), frame, "requests/s", lines)
}

/// A one-panel chart of per-second rates.
fn rates_chart(
    path: &Path,
    title: &str,
    frame: &Frame,
    y_desc: &str,
    mut lines: Vec<Line>,
) -> anyhow::Result<()> {
    let y_max = lines.iter().map(|l| peak(&l.points)).fold(0.0, f64::max) * 1.1;
    let mut legend: Vec<Entry> = lines
        .iter()
        .map(|l| Entry::line(l.label.clone(), l.color, l.dashed))
        .collect();
    legend.extend(frame.legend());
    let mut panel = Panel::new(y_desc.to_string(), y_max.max(1.0));
    for line in &mut lines {
        line.skip_idle = true;
    }
    panel.lines = lines;
    one_panel(path, title, &legend, frame, &panel)
}

fn one_panel(
    path: &Path,
    title: &str,
    legend: &[Entry],
    frame: &Frame,
    panel: &Panel,
) -> anyhow::Result<()> {
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    let plot = canvas(&root, frame.pen, title, legend)?;
    draw_panel(&plot, frame, panel)?;
    root.present()?;
    Ok(())
}

// ---------------------------------------------------------------------------------
// Data preparation.

/// Whether a series keeps its column maxima or means when downsampled.
#[derive(Debug, Clone, Copy)]
enum Reduce {
    Max,
    Mean,
}

/// A gauge as (seconds from t = 0, value), downsampled by maximum.
fn gauge(rows: &[Row], value: impl Fn(&Row) -> f64) -> Vec<(f64, f64)> {
    let points = rows.iter().map(|r| (r.t.as_secs_f64(), value(r))).collect();
    downsample(points, Reduce::Max)
}

/// A per-interval count as a rate per second, downsampled by mean.
fn rate(rows: &[Row], sample: Duration, count: impl Fn(&Row) -> f64) -> Vec<(f64, f64)> {
    let per = sample.as_secs_f64().max(1e-9);
    let points = rows
        .iter()
        .map(|r| (r.t.as_secs_f64(), count(r) / per))
        .collect();
    downsample(points, Reduce::Mean)
}

/// At most [`COLUMNS`] points: consecutive runs of points reduced to one each.
fn downsample(points: Vec<(f64, f64)>, reduce: Reduce) -> Vec<(f64, f64)> {
    let n = points.len();
    if n <= COLUMNS {
        return points;
    }
    (0..COLUMNS)
        .map(|c| {
            let bucket = &points[c * n / COLUMNS..(c + 1) * n / COLUMNS];
            let values = bucket.iter().map(|p| p.1);
            let value = match reduce {
                Reduce::Max => values.fold(f64::MIN, f64::max),
                Reduce::Mean => values.sum::<f64>() / bucket.len() as f64,
            };
            (bucket[bucket.len() / 2].0, value)
        })
        .collect()
}

fn peak(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(0.0, f64::max)
}

/// The top of the y range for data peaking at `peak` against `limit`, and the limit
/// when it is drawn (when the data reaches [`LIMIT_SHOWN_FROM`] of it).
fn scale_with_limit(peak: f64, limit: f64) -> (f64, Option<f64>) {
    let shown = peak >= LIMIT_SHOWN_FROM * limit;
    let top = if shown { peak.max(limit) } else { peak };
    ((top * 1.1).max(1.0), shown.then_some(limit))
}

/// Each alert's firing periods (over all hosts), in order of first firing.
fn firing_by_rule(alerts: &[AlertWindow], span: f64) -> Vec<(&'static str, Vec<(f64, f64)>)> {
    let mut out: Vec<(&'static str, Vec<(f64, f64)>)> = Vec::new();
    for a in alerts {
        let period = (
            a.fired.as_secs_f64(),
            a.resolved.map_or(span, |r| r.as_secs_f64()),
        );
        match out.iter_mut().find(|(name, _)| *name == a.name) {
            Some((_, periods)) => periods.push(period),
            None => out.push((a.name, vec![period])),
        }
    }
    out
}

// ---------------------------------------------------------------------------------
// What every run chart shares: the time axis and the fault and host overlays.

/// The run-wide context of every run chart.
struct Frame {
    pen: Pen,
    scenario: String,
    hosts: u32,
    sample: Duration,
    span: f64,
    clock: Clock,
    faults: Vec<Band>,
    events: Vec<Mark>,
}

/// A fault window, in seconds from t = 0.
struct Band {
    from: f64,
    to: f64,
    partial: bool,
}

/// A crash, restart or deploy, in seconds from t = 0.
struct Mark {
    at: f64,
    up: f64,
    kind: EventKind,
    host: u32,
}

impl Frame {
    fn new(run: &RunOutput, pen: Pen) -> Self {
        let scenario = &run.scenario;
        let span = scenario.duration.as_secs_f64().max(1e-3);
        Self {
            pen,
            scenario: scenario.name.clone(),
            hosts: scenario.workload.hosts,
            sample: run.recorder.sample,
            span,
            clock: Clock::new(scenario.start, span),
            faults: bands(run, span),
            events: marks(run, span),
        }
    }

    /// The chart's title with the scenario's name.
    fn title(&self, what: &str) -> String {
        let hosts = if self.hosts == 1 { "host" } else { "hosts" };
        format!("{what} — {} ({} {hosts})", self.scenario, self.hosts)
    }

    /// Legend entries for the overlays present, once per kind.
    fn legend(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        if self.faults.iter().any(|b| !b.partial) {
            out.push(Entry::fill("store fault".to_string(), fault_fill(false)));
        }
        if self.faults.iter().any(|b| b.partial) {
            let label = "store fault on a share of requests".to_string();
            out.push(Entry::fill(label, fault_fill(true)));
        }
        for kind in [EventKind::Crash, EventKind::Restart, EventKind::Deploy] {
            if self.events.iter().any(|m| m.kind == kind) {
                out.push(Entry::mark(self.event_label(kind), event_color(kind)));
            }
        }
        if self.events.iter().any(|m| m.up > m.at) {
            out.push(Entry::fill("host down".to_string(), DOWN));
        }
        out
    }

    /// `crash (power loss), host 0: 7`: the kind, which hosts and how many.
    fn event_label(&self, kind: EventKind) -> String {
        let name = match kind {
            EventKind::Crash => "crash (power loss)",
            EventKind::Restart => "restart (process)",
            EventKind::Deploy => "deploy",
        };
        let of_kind = self.events.iter().filter(|m| m.kind == kind);
        let mut hosts: Vec<u32> = of_kind.clone().map(|m| m.host).collect();
        hosts.sort_unstable();
        hosts.dedup();
        let list = || {
            let names: Vec<String> = hosts.iter().map(u32::to_string).collect();
            names.join(", ")
        };
        let on = match hosts.len() {
            _ if self.hosts == 1 => String::new(),
            1 => format!(", host {}", list()),
            2 | 3 => format!(", hosts {}", list()),
            n => format!(", {n} hosts"),
        };
        format!("{name}{on}: {}", of_kind.count())
    }
}

/// The fault windows that change what the store does, clipped to the run.
fn bands(run: &RunOutput, span: f64) -> Vec<Band> {
    run.scenario
        .faults
        .windows
        .iter()
        .filter(|w| !w.mix.is_empty() || w.capacity_rps.is_some())
        .map(|w| Band {
            from: w.from.as_secs_f64().min(span),
            to: w.until.map_or(span, |u| u.as_secs_f64().min(span)),
            partial: w.share < 1.0,
        })
        .filter(|b| b.to > b.from)
        .collect()
}

/// Crashes, restarts and deploys as they happened, clipped to the run.
fn marks(run: &RunOutput, span: f64) -> Vec<Mark> {
    run.recorder
        .timeline
        .iter()
        .map(|e| Mark {
            at: e.at.as_secs_f64(),
            up: (e.at + e.down_for).as_secs_f64().min(span),
            kind: e.kind,
            host: e.host,
        })
        .filter(|m| m.at <= span)
        .collect()
}

fn fault_fill(partial: bool) -> RGBAColor {
    FAULT.mix(if partial {
        PARTIAL_FAULT_ALPHA
    } else {
        FAULT_ALPHA
    })
}

fn event_color(kind: EventKind) -> RGBAColor {
    let color = match kind {
        EventKind::Crash => CRASH,
        EventKind::Restart => RESTART,
        EventKind::Deploy => DEPLOY,
    };
    color.mix(EVENT_ALPHA)
}

/// How tick labels of the time axis are written.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ClockStyle {
    /// `10:00:05`, for runs under 10 minutes.
    Seconds,
    /// `10:05`, within one day.
    Minutes,
    /// `Oct 08 12:00`, across days.
    Dated,
}

/// The wall-clock time axis: `start + t`, with ticks on round times.
struct Clock {
    start_ms: u64,
    end_ms: u64,
    style: ClockStyle,
    ticks: Vec<f64>,
}

/// Tick spacings, in seconds.
const TICK_STEPS: [u64; 21] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    172_800, 604_800, 2_592_000,
];

impl Clock {
    fn new(start: SystemTime, span: f64) -> Self {
        let since_epoch = start.duration_since(UNIX_EPOCH).unwrap_or_default();
        let start_ms = since_epoch.as_millis() as u64;
        let end_ms = start_ms + (span * 1000.0) as u64;
        let style = if span < 600.0 {
            ClockStyle::Seconds
        } else if format::rfc3339_seconds(start_ms)[..10] == format::rfc3339_seconds(end_ms)[..10] {
            ClockStyle::Minutes
        } else {
            ClockStyle::Dated
        };
        // Dated labels are half as wide again.
        let max_ticks = if style == ClockStyle::Dated {
            9.0
        } else {
            11.0
        };
        let step = TICK_STEPS
            .iter()
            .map(|s| s * 1000)
            .find(|&s| span * 1000.0 / s as f64 <= max_ticks)
            .unwrap_or(TICK_STEPS[TICK_STEPS.len() - 1] * 1000);
        let first = start_ms.div_ceil(step) * step;
        let ticks = (first..=end_ms)
            .step_by(step as usize)
            .map(|ms| (ms - start_ms) as f64 / 1000.0)
            .collect();
        Self {
            start_ms,
            end_ms,
            style,
            ticks,
        }
    }

    /// The tick label at `t` seconds from the start.
    fn label(&self, t: f64) -> String {
        let text = format::rfc3339_seconds(self.start_ms + (t.max(0.0) * 1000.0).round() as u64);
        match self.style {
            ClockStyle::Seconds => text[11..19].to_string(),
            ClockStyle::Minutes => text[11..16].to_string(),
            ClockStyle::Dated => {
                format!("{} {} {}", month(&text[5..7]), &text[8..10], &text[11..16])
            }
        }
    }

    /// The axis description, with the date when the ticks do not show it.
    fn desc(&self) -> String {
        let (first, last) = (
            format::rfc3339_seconds(self.start_ms),
            format::rfc3339_seconds(self.end_ms),
        );
        match self.style {
            ClockStyle::Dated => "time (UTC)".to_string(),
            _ if first[..10] == last[..10] => format!("time (UTC) on {}", &first[..10]),
            _ => format!("time (UTC) from {} to {}", &first[..10], &last[..10]),
        }
    }
}

fn month(number: &str) -> &'static str {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let index = number.parse::<usize>().unwrap_or(0).wrapping_sub(1);
    MONTHS.get(index).copied().unwrap_or("???")
}

// ---------------------------------------------------------------------------------
// Axes.

/// A linear f64 axis with grid lines exactly at the given ticks. (plotters'
/// `WithKeyPoints` loses the f64 axis's formatting, which `configure_mesh` needs.)
#[derive(Clone)]
struct Ticked {
    axis: RangedCoordf64,
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(range: Range<f64>, ticks: Vec<f64>) -> Self {
        let axis = RangedCoordf64::from(range.clone());
        Self { axis, range, ticks }
    }

    /// A range from `lo` to `hi` with about six round ticks.
    fn round(lo: f64, hi: f64) -> Self {
        Self::new(lo..hi, round_ticks(lo, hi, 6))
    }

    fn middle(&self) -> f64 {
        (self.range.start + self.range.end) / 2.0
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.axis.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// At most `n` ticks on multiples of 1, 2, 2.5 or 5 × 10^k between `lo` and `hi`.
fn round_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let raw = (hi - lo).max(1e-9) / n as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// The words around a plot: tick labels and axis descriptions.
struct AxisText<'f> {
    /// Without it, no x tick labels either (a panel stacked above another).
    x_desc: Option<String>,
    y_desc: String,
    x_tick: &'f dyn Fn(f64) -> String,
}

/// A chart on `area` with grid lines at the axes' ticks and no text yet.
fn build_chart<'a, 'b>(
    area: &'a Area<'b>,
    x: Ticked,
    y: Ticked,
    x_labels: bool,
) -> anyhow::Result<Chart<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN)
        .margin_right(RIGHT_MARGIN)
        .x_label_area_size(if x_labels { X_AREA } else { 0 })
        .y_label_area_size(Y_AREA)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|_| String::new())
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(AXIS)
        .draw()?;
    Ok(chart)
}

fn draw_axis_text(chart: &Chart, pen: Pen, text: &AxisText) -> anyhow::Result<()> {
    let area = chart.plotting_area();
    let (x, y) = (chart.x_range(), chart.y_range());
    let (x_axis, y_axis) = (x_spec(chart), y_spec(chart));
    for &v in &y_axis.ticks {
        let label = pen.text(number(v), (x.start, v), TICK_SIZE);
        area.draw(&label.anchor(HPos::Right, VPos::Center).nudge(-8, 0))?;
    }
    let y_desc = pen.text(text.y_desc.clone(), (x.start, y_axis.middle()), DESC_SIZE);
    let y_desc = y_desc
        .anchor(HPos::Center, VPos::Top)
        .nudge(-(Y_AREA as i32), 0);
    area.draw(&y_desc.rotated())?;
    let Some(x_desc) = &text.x_desc else {
        return Ok(());
    };
    for &t in &x_axis.ticks {
        let words = (text.x_tick)(t);
        // A label centred on the last tick may not fit: move it just far enough in.
        let overhang = chart.backend_coord(&(t, y.start)).0 + pen.width(&words, TICK_SIZE) / 2
            - (WIDTH as i32 - 4);
        let label = pen.text(words, (t, y.start), TICK_SIZE);
        area.draw(
            &label
                .anchor(HPos::Center, VPos::Top)
                .nudge(-overhang.max(0), 8),
        )?;
    }
    let desc = pen.text(x_desc.clone(), (x_axis.middle(), y.start), DESC_SIZE);
    area.draw(
        &desc
            .anchor(HPos::Center, VPos::Bottom)
            .nudge(0, X_AREA as i32),
    )?;
    Ok(())
}

fn x_spec<'c>(chart: &'c Chart) -> &'c Ticked {
    chart.as_coord_spec().x_spec()
}

fn y_spec<'c>(chart: &'c Chart) -> &'c Ticked {
    chart.as_coord_spec().y_spec()
}

// ---------------------------------------------------------------------------------
// Panels: one y axis and what is drawn against it.

/// One line of data.
struct Line {
    label: String,
    color: RGBColor,
    width: u32,
    dashed: bool,
    /// Leave out stretches at zero, so idle rates keep the axis clear.
    skip_idle: bool,
    points: Vec<(f64, f64)>,
}

impl Line {
    fn new(label: &str, color: RGBColor, points: Vec<(f64, f64)>) -> Self {
        Self {
            label: label.to_string(),
            color,
            width: 2,
            dashed: false,
            skip_idle: false,
            points,
        }
    }
}

/// Periods drawn as a bar along the top of a panel.
struct Strip {
    color: RGBColor,
    periods: Vec<(f64, f64)>,
}

/// One plot with its own y axis (from 0), sharing the frame's time axis.
struct Panel {
    y_desc: String,
    y_max: f64,
    lines: Vec<Line>,
    /// Horizontal dashed reference lines (caps, thresholds).
    limits: Vec<f64>,
    strips: Vec<Strip>,
    x_labels: bool,
}

impl Panel {
    fn new(y_desc: String, y_max: f64) -> Self {
        Self {
            y_desc,
            y_max,
            lines: Vec::new(),
            limits: Vec::new(),
            strips: Vec::new(),
            x_labels: true,
        }
    }
}

fn draw_panel(area: &Area, frame: &Frame, panel: &Panel) -> anyhow::Result<()> {
    let x = Ticked::new(0.0..frame.span, frame.clock.ticks.clone());
    let y = Ticked::round(0.0, panel.y_max);
    let mut chart = build_chart(area, x, y, panel.x_labels)?;
    draw_overlays(&mut chart, frame, panel.y_max)?;
    draw_strips(&mut chart, &panel.strips, panel.y_max)?;
    for &y in &panel.limits {
        let points = [(0.0, y), (frame.span, y)];
        chart.draw_series(DashedLineSeries::new(points, 12, 7, LIMIT.stroke_width(2)))?;
    }
    for line in &panel.lines {
        draw_line(&mut chart, line)?;
    }
    let time = |t: f64| frame.clock.label(t);
    let text = AxisText {
        x_desc: panel.x_labels.then(|| frame.clock.desc()),
        y_desc: panel.y_desc.clone(),
        x_tick: &time,
    };
    draw_axis_text(&chart, frame.pen, &text)
}

/// Fault windows and host down time shaded, events as vertical lines.
fn draw_overlays(chart: &mut Chart, frame: &Frame, y_max: f64) -> anyhow::Result<()> {
    let down = frame.events.iter().filter(|m| m.up > m.at);
    chart.draw_series(down.map(|m| Rectangle::new([(m.at, 0.0), (m.up, y_max)], DOWN.filled())))?;
    chart.draw_series(frame.faults.iter().map(|b| {
        Rectangle::new(
            [(b.from, 0.0), (b.to, y_max)],
            fault_fill(b.partial).filled(),
        )
    }))?;
    chart.draw_series(frame.events.iter().map(|m| {
        let style = event_color(m.kind).stroke_width(2);
        PathElement::new(vec![(m.at, 0.0), (m.at, y_max)], style)
    }))?;
    Ok(())
}

/// Alert periods as bars stacked along the top of the plot.
fn draw_strips(chart: &mut Chart, strips: &[Strip], y_max: f64) -> anyhow::Result<()> {
    for (i, strip) in strips.iter().enumerate() {
        let top = y_max * (1.0 - STRIP * i as f64);
        let bottom = top - y_max * STRIP * 0.8;
        chart.draw_series(strip.periods.iter().map(|&(from, to)| {
            Rectangle::new([(from, bottom), (to, top)], strip.color.filled())
        }))?;
    }
    Ok(())
}

fn draw_line(chart: &mut Chart, line: &Line) -> anyhow::Result<()> {
    let style = line.color.stroke_width(line.width);
    let segments = if line.skip_idle {
        busy_segments(&line.points)
    } else {
        vec![line.points.as_slice()]
    };
    for segment in segments {
        let points = segment.iter().copied();
        if line.dashed {
            chart.draw_series(DashedLineSeries::new(points, 10, 5, style))?;
        } else {
            chart.draw_series(LineSeries::new(points, style))?;
        }
    }
    Ok(())
}

/// The stretches of `points` that are not idle; a point is idle when it and its
/// neighbours are zero, so each stretch still comes down to the axis at its ends.
fn busy_segments(points: &[(f64, f64)]) -> Vec<&[(f64, f64)]> {
    let zero = |i: usize| points[i].1 == 0.0;
    let idle =
        |i: usize| zero(i) && (i == 0 || zero(i - 1)) && (i + 1 == points.len() || zero(i + 1));
    let mut out = Vec::new();
    let mut start = None;
    for i in 0..points.len() {
        match (idle(i), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push(&points[s..i]);
                start = None;
            }
            _ => {}
        }
    }
    out.extend(start.map(|s| &points[s..]));
    out
}

// ---------------------------------------------------------------------------------
// The sweep chart.

/// The words of a sweep chart.
fn draw_sweep(
    path: &Path,
    pen: Pen,
    labels: &SweepChart,
    series: &[(String, Vec<(f64, f64)>)],
) -> anyhow::Result<()> {
    let lines: Vec<Vec<(f64, f64)>> = series.iter().map(|s| sorted_finite(&s.1)).collect();
    let all: Vec<(f64, f64)> = lines.iter().flatten().copied().collect();
    let x = sweep_x_axis(&all);
    let y_min = all.iter().map(|p| p.1).fold(0.0, f64::min) * 1.1;
    let y_max = all.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
    let y_max = if y_max > y_min { y_max } else { y_min + 1.0 };
    let legend: Vec<Entry> = series
        .iter()
        .enumerate()
        .map(|(i, s)| Entry::line(s.0.clone(), sweep_color(i), false))
        .collect();

    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    let plot = canvas(&root, pen, labels.title, &legend)?;
    let mut chart = build_chart(&plot, x, Ticked::round(y_min, y_max), true)?;
    for (i, line) in lines.iter().enumerate() {
        let color = sweep_color(i);
        chart.draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))?;
        chart.draw_series(line.iter().map(|&p| Circle::new(p, 5, color.filled())))?;
    }
    let category = |x: f64| {
        let at = x.round();
        match labels.categories.get(at as usize) {
            Some(name) if at >= 0.0 && (x - at).abs() < 1e-9 => name.clone(),
            _ => number(x),
        }
    };
    let text = AxisText {
        x_desc: Some(labels.x_label.to_string()),
        y_desc: labels.y_label.to_string(),
        x_tick: &category,
    };
    draw_axis_text(&chart, pen, &text)?;
    root.present()?;
    Ok(())
}

fn sorted_finite(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .copied()
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

fn sweep_color(i: usize) -> RGBColor {
    // Blue first, then the rest of the palette.
    PALETTE[(i + PALETTE.len() - 1) % PALETTE.len()]
}

/// The x axis of a sweep: a tick at every distinct x when there are at most 15 (swept
/// values, or category indices), round ticks otherwise.
fn sweep_x_axis(points: &[(f64, f64)]) -> Ticked {
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let (lo, hi) = match (xs.first(), xs.last()) {
        (Some(&lo), Some(&hi)) => (lo, hi),
        _ => (0.0, 1.0),
    };
    let categories = xs.len() > 1 && xs.iter().all(|x| x.fract() == 0.0);
    let pad = if hi <= lo {
        0.5
    } else if categories {
        ((hi - lo) * 0.05).max(0.3)
    } else {
        (hi - lo) * 0.05
    };
    let ticks = if !xs.is_empty() && xs.len() <= 15 {
        xs
    } else {
        round_ticks(lo, hi, 10)
    };
    Ticked::new((lo - pad)..(hi + pad), ticks)
}

// ---------------------------------------------------------------------------------
// Title and legend.

/// What a legend entry shows beside its label.
#[derive(Debug, Clone, Copy)]
enum Swatch {
    Line { color: RGBColor, dashed: bool },
    Fill(RGBAColor),
    Mark(RGBAColor),
}

/// One legend entry.
struct Entry {
    label: String,
    swatch: Swatch,
}

impl Entry {
    fn line(label: String, color: RGBColor, dashed: bool) -> Self {
        let swatch = Swatch::Line { color, dashed };
        Self { label, swatch }
    }

    fn fill(label: String, color: RGBAColor) -> Self {
        let swatch = Swatch::Fill(color);
        Self { label, swatch }
    }

    fn mark(label: String, color: RGBAColor) -> Self {
        let swatch = Swatch::Mark(color);
        Self { label, swatch }
    }
}

const SWATCH_WIDTH: i32 = 30;
const SWATCH_GAP: i32 = 8;
const ENTRY_GAP: i32 = 26;

/// Fills `root`, writes the title and the legend strip; returns the area left for
/// the plot.
fn canvas<'a>(
    root: &Area<'a>,
    pen: Pen,
    title: &str,
    legend: &[Entry],
) -> anyhow::Result<Area<'a>> {
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(TITLE_HEIGHT);
    let centre = ((WIDTH / 2) as i32, (TITLE_HEIGHT / 2) as i32 + 2);
    let title = pen.text(title.to_string(), centre, TITLE_SIZE).bold();
    head.draw(&title.anchor(HPos::Center, VPos::Center))?;
    let placed = place_legend(pen, legend);
    let rows = placed.iter().map(|p| p.1 + 1).max().unwrap_or(0) as u32;
    let (strip, plot) = body.split_vertically(rows * LEGEND_ROW + 6);
    for (entry, row, x) in placed {
        let y = row as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        draw_entry(&strip, pen, entry, (x, y))?;
    }
    Ok(plot)
}

/// Each entry with its row and left edge, flowing left to right from the plot's left
/// edge and wrapping at the chart's right margin.
fn place_legend(pen: Pen, legend: &[Entry]) -> Vec<(&Entry, usize, i32)> {
    let left = (MARGIN + Y_AREA) as i32;
    let right = (WIDTH - MARGIN) as i32;
    let (mut row, mut x) = (0, left);
    let mut out = Vec::with_capacity(legend.len());
    for entry in legend {
        let width = SWATCH_WIDTH + SWATCH_GAP + pen.width(&entry.label, LEGEND_SIZE);
        if x > left && x + width > right {
            row += 1;
            x = left;
        }
        out.push((entry, row, x));
        x += width + ENTRY_GAP;
    }
    out
}

fn draw_entry(area: &Area, pen: Pen, entry: &Entry, (x, y): (i32, i32)) -> anyhow::Result<()> {
    let end = x + SWATCH_WIDTH;
    match entry.swatch {
        Swatch::Line {
            color,
            dashed: false,
        } => {
            area.draw(&PathElement::new(
                vec![(x, y), (end, y)],
                color.stroke_width(3),
            ))?;
        }
        Swatch::Line {
            color,
            dashed: true,
        } => {
            for start in [x, x + 11, x + 22] {
                let dash = vec![(start, y), ((start + 7).min(end), y)];
                area.draw(&PathElement::new(dash, color.stroke_width(3)))?;
            }
        }
        Swatch::Fill(color) => {
            let corners = [(x, y - 8), (end, y + 8)];
            area.draw(&Rectangle::new(corners, color.filled()))?;
            area.draw(&Rectangle::new(corners, GRID.stroke_width(1)))?;
        }
        Swatch::Mark(color) => {
            let mid = x + SWATCH_WIDTH / 2;
            let line = vec![(mid, y - 10), (mid, y + 10)];
            area.draw(&PathElement::new(line, color.stroke_width(2)))?;
        }
    }
    let label = pen.text(entry.label.clone(), (end + SWATCH_GAP, y), LEGEND_SIZE);
    area.draw(&label.anchor(HPos::Left, VPos::Center))?;
    Ok(())
}

// ---------------------------------------------------------------------------------
// Text.

/// Writes with the embedded DejaVu Sans.
#[derive(Clone, Copy)]
struct Pen(&'static Faces);

impl Pen {
    /// Black regular text of `size` pixels whose top-left corner is at `at`.
    fn text<C>(self, text: String, at: C, size: f32) -> Label<C> {
        Label {
            font: &self.0.regular,
            bold: &self.0.bold,
            text,
            at,
            size,
            nudge: (0, 0),
            anchor: (HPos::Left, VPos::Top),
            rotated: false,
        }
    }

    /// The width of `text` in regular type of `size` pixels.
    fn width(self, text: &str, size: f32) -> i32 {
        layout(&self.0.regular, text, size).1.ceil() as i32
    }
}

/// A line of text as a plotters element, anchored at a point in any coordinates.
struct Label<C> {
    font: &'static FontRef<'static>,
    bold: &'static FontRef<'static>,
    text: String,
    at: C,
    size: f32,
    /// Pixels added to `at` once mapped.
    nudge: (i32, i32),
    /// Which point of the text's box is at `at`.
    anchor: (HPos, VPos),
    /// Turned a quarter counter-clockwise (reads upwards), about `at`.
    rotated: bool,
}

impl<C> Label<C> {
    fn anchor(self, h: HPos, v: VPos) -> Self {
        Self {
            anchor: (h, v),
            ..self
        }
    }

    fn nudge(self, dx: i32, dy: i32) -> Self {
        Self {
            nudge: (dx, dy),
            ..self
        }
    }

    fn rotated(self) -> Self {
        Self {
            rotated: true,
            ..self
        }
    }

    fn bold(self) -> Self {
        Self {
            font: self.bold,
            ..self
        }
    }

    /// The offset of the text's top-left corner from the anchor point.
    fn offset(&self, width: f32, height: f32) -> (f32, f32) {
        let dx = match self.anchor.0 {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let dy = match self.anchor.1 {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        (dx, dy)
    }
}

impl<'a, C: 'a> PointCollection<'a, C> for &'a Label<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;

    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Label<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut points: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = points.next() else {
            return Ok(());
        };
        let origin = (x + self.nudge.0, y + self.nudge.1);
        let (glyphs, width) = layout(self.font, &self.text, self.size);
        let scaled = self.font.as_scaled(self.size);
        let (dx, dy) = self.offset(width, scaled.ascent() - scaled.descent());
        for mut glyph in glyphs {
            glyph.position.x += dx;
            glyph.position.y += dy;
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue;
            };
            let min = outline.px_bounds().min;
            let mut pixels = Vec::new();
            outline.draw(|gx, gy, coverage| {
                if coverage > 0.0 {
                    pixels.push((min.x as i32 + gx as i32, min.y as i32 + gy as i32, coverage));
                }
            });
            for (lx, ly, coverage) in pixels {
                let at = if self.rotated {
                    (origin.0 + ly, origin.1 - lx)
                } else {
                    (origin.0 + lx, origin.1 + ly)
                };
                let color = TEXT.mix(f64::from(coverage.min(1.0)));
                backend.draw_pixel(at, color.to_backend_color())?;
            }
        }
        Ok(())
    }
}

/// The glyphs of `text` at `size` pixels with the box's top-left corner at (0, 0),
/// kerned, and the text's advance width.
fn layout(font: &FontRef<'static>, text: &str, size: f32) -> (Vec<Glyph>, f32) {
    let scaled = font.as_scaled(size);
    let mut glyphs = Vec::with_capacity(text.len());
    let mut pen_x = 0.0;
    let mut previous = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(previous) = previous {
            pen_x += scaled.kern(previous, id);
        }
        glyphs.push(id.with_scale_and_position(size, point(pen_x, scaled.ascent())));
        pen_x += scaled.h_advance(id);
        previous = Some(id);
    }
    (glyphs, pen_x)
}

// ---------------------------------------------------------------------------------
// Numbers and units.

/// A tick label: `0`, `2.5`, `150`, `12.5k`, `1.5M`.
fn number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trimmed(v / 1e6, 2))
    } else if a >= 1e4 {
        format!("{}k", trimmed(v / 1e3, 1))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        trimmed(v, 2)
    }
}

/// `v` with at most `decimals` decimals and no trailing zeros.
fn trimmed(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".to_string() } else { s }
}

/// A binary byte unit for an axis.
struct ByteUnit {
    name: &'static str,
    size: f64,
}

impl ByteUnit {
    /// The largest unit in which `max` is at least 1.
    fn for_max(max: f64) -> Self {
        let units = [
            ("B", 1.0),
            ("KiB", 1024.0),
            ("MiB", 1_048_576.0),
            ("GiB", 1_073_741_824.0),
            ("TiB", 1_099_511_627_776.0),
        ];
        let (name, size) = units
            .into_iter()
            .rev()
            .find(|&(_, size)| max >= size)
            .unwrap_or(units[0]);
        Self { name, size }
    }

    /// `512 MiB`.
    fn human(bytes: f64) -> String {
        let unit = Self::for_max(bytes);
        format!("{} {}", trimmed(bytes / unit.size, 1), unit.name)
    }
}

/// A time unit for an axis.
struct TimeUnit {
    name: &'static str,
    size: f64,
}

impl TimeUnit {
    /// Seconds up to 3 minutes, minutes up to 3 hours, hours beyond.
    fn for_max(max_seconds: f64) -> Self {
        let (name, size) = if max_seconds <= 180.0 {
            ("s", 1.0)
        } else if max_seconds <= 3.0 * 3600.0 {
            ("min", 60.0)
        } else {
            ("h", 3600.0)
        };
        Self { name, size }
    }

    /// `15 min`.
    fn human(seconds: f64) -> String {
        let unit = Self::for_max(seconds);
        format!("{} {}", trimmed(seconds / unit.size, 1), unit.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(0.6000000000000001), "0.6");
        assert_eq!(number(150.0), "150");
        assert_eq!(number(12_500.0), "12.5k");
        assert_eq!(number(1_500_000.0), "1.5M");
        assert_eq!(ByteUnit::human(5.0 * 1_048_576.0), "5 MiB");
        assert_eq!(TimeUnit::human(900.0), "15 min");
    }

    #[test]
    fn the_time_axis_follows_the_span() {
        let start = humantime::parse_rfc3339("2026-10-08T10:00:00Z").unwrap();
        let short = Clock::new(start, 20.0);
        assert_eq!(short.style, ClockStyle::Seconds);
        assert_eq!(short.label(5.0), "10:00:05");
        let day = Clock::new(start, 4.0 * 3600.0);
        assert_eq!(day.style, ClockStyle::Minutes);
        assert_eq!(day.label(day.ticks[1]), "10:30");
        let long = Clock::new(start, 30.0 * 3600.0);
        assert_eq!(long.style, ClockStyle::Dated);
        assert_eq!(long.label(14.0 * 3600.0), "Oct 09 00:00");
        assert!(long.ticks.len() <= 9);
        let midnight = humantime::parse_rfc3339("2026-10-08T23:59:50Z").unwrap();
        let across = Clock::new(midnight, 20.0);
        assert_eq!(across.label(15.0), "00:00:05");
        assert_eq!(across.desc(), "time (UTC) from 2026-10-08 to 2026-10-09");
    }

    #[test]
    fn downsampling_keeps_gauge_peaks_and_rate_means() {
        let points: Vec<(f64, f64)> = (0..10 * COLUMNS)
            .map(|i| (i as f64, (i % 10) as f64))
            .collect();
        let peaks = downsample(points.clone(), Reduce::Max);
        assert_eq!(peaks.len(), COLUMNS);
        assert!(peaks.iter().all(|p| p.1 == 9.0));
        let means = downsample(points, Reduce::Mean);
        assert!(means.iter().all(|p| p.1 == 4.5));
    }

    #[test]
    fn idle_stretches_are_left_out_but_lines_reach_the_axis() {
        let points: Vec<(f64, f64)> = [0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 2.0]
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, v))
            .collect();
        let segments = busy_segments(&points);
        let xs: Vec<Vec<f64>> = segments
            .iter()
            .map(|s| s.iter().map(|p| p.0).collect())
            .collect();
        assert_eq!(xs, vec![vec![2.0, 3.0, 4.0], vec![6.0, 7.0]]);
    }

    #[test]
    fn round_ticks_land_on_round_numbers() {
        assert_eq!(
            round_ticks(0.0, 220.0, 6),
            vec![0.0, 50.0, 100.0, 150.0, 200.0]
        );
        assert_eq!(round_ticks(0.0, 1.1, 6).len(), 6);
        assert_eq!(
            round_ticks(0.0, 132.0, 6),
            vec![0.0, 25.0, 50.0, 75.0, 100.0, 125.0]
        );
    }
}
