//! Panels (one y axis and what is drawn against it), the title and the legend.

use super::*;

/// One line of data.
pub(super) struct Line {
    pub(super) label: String,
    pub(super) color: RGBColor,
    pub(super) width: u32,
    pub(super) dashed: bool,
    /// Leave out stretches at zero, so idle rates keep the axis clear.
    pub(super) skip_idle: bool,
    pub(super) points: Vec<(f64, f64)>,
}

impl Line {
    pub(super) fn new(label: &str, color: RGBColor, points: Vec<(f64, f64)>) -> Self {
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
pub(super) struct Strip {
    pub(super) color: RGBColor,
    pub(super) periods: Vec<(f64, f64)>,
}

/// One plot with its own y axis (from 0), sharing the frame's time axis.
pub(super) struct Panel {
    pub(super) y_desc: String,
    pub(super) y_max: f64,
    pub(super) lines: Vec<Line>,
    /// Horizontal dashed reference lines (caps, thresholds).
    pub(super) limits: Vec<f64>,
    pub(super) strips: Vec<Strip>,
    pub(super) x_labels: bool,
}

impl Panel {
    pub(super) fn new(y_desc: String, y_max: f64) -> Self {
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

pub(super) fn draw_panel(area: &Area, frame: &Frame, panel: &Panel) -> anyhow::Result<()> {
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
pub(super) fn draw_overlays(chart: &mut Chart, frame: &Frame, y_max: f64) -> anyhow::Result<()> {
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
pub(super) fn draw_strips(chart: &mut Chart, strips: &[Strip], y_max: f64) -> anyhow::Result<()> {
    for (i, strip) in strips.iter().enumerate() {
        let top = y_max * (1.0 - STRIP * i as f64);
        let bottom = top - y_max * STRIP * 0.8;
        chart.draw_series(strip.periods.iter().map(|&(from, to)| {
            Rectangle::new([(from, bottom), (to, top)], strip.color.filled())
        }))?;
    }
    Ok(())
}

pub(super) fn draw_line(chart: &mut Chart, line: &Line) -> anyhow::Result<()> {
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
pub(super) fn busy_segments(points: &[(f64, f64)]) -> Vec<&[(f64, f64)]> {
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

/// What a legend entry shows beside its label.
#[derive(Debug, Clone, Copy)]
pub(super) enum Swatch {
    Line { color: RGBColor, dashed: bool },
    Fill(RGBAColor),
    Mark(RGBAColor),
}

/// One legend entry.
pub(super) struct Entry {
    pub(super) label: String,
    pub(super) swatch: Swatch,
}

impl Entry {
    pub(super) fn line(label: String, color: RGBColor, dashed: bool) -> Self {
        let swatch = Swatch::Line { color, dashed };
        Self { label, swatch }
    }

    pub(super) fn fill(label: String, color: RGBAColor) -> Self {
        let swatch = Swatch::Fill(color);
        Self { label, swatch }
    }

    pub(super) fn mark(label: String, color: RGBAColor) -> Self {
        let swatch = Swatch::Mark(color);
        Self { label, swatch }
    }
}

pub(super) const SWATCH_WIDTH: i32 = 30;
pub(super) const SWATCH_GAP: i32 = 8;
pub(super) const ENTRY_GAP: i32 = 26;

/// Fills `root`, writes the title and the legend strip; returns the area left for
/// the plot.
pub(super) fn canvas<'a>(
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
pub(super) fn place_legend(pen: Pen, legend: &[Entry]) -> Vec<(&Entry, usize, i32)> {
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

pub(super) fn draw_entry(
    area: &Area,
    pen: Pen,
    entry: &Entry,
    (x, y): (i32, i32),
) -> anyhow::Result<()> {
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
