//! Axes: round ticks, wall-clock ticks, and numbers and units for people.

use super::*;

/// A linear f64 axis with grid lines exactly at the given ticks. (plotters'
/// `WithKeyPoints` loses the f64 axis's formatting, which `configure_mesh` needs.)
#[derive(Clone)]
pub(super) struct Ticked {
    pub(super) axis: RangedCoordf64,
    pub(super) range: Range<f64>,
    pub(super) ticks: Vec<f64>,
}

impl Ticked {
    pub(super) fn new(range: Range<f64>, ticks: Vec<f64>) -> Self {
        let axis = RangedCoordf64::from(range.clone());
        Self { axis, range, ticks }
    }

    /// A range from `lo` to `hi` with about six round ticks.
    pub(super) fn round(lo: f64, hi: f64) -> Self {
        Self::new(lo..hi, round_ticks(lo, hi, 6))
    }

    pub(super) fn middle(&self) -> f64 {
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
pub(super) fn round_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
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
pub(super) struct AxisText<'f> {
    /// Without it, no x tick labels either (a panel stacked above another).
    pub(super) x_desc: Option<String>,
    pub(super) y_desc: String,
    pub(super) x_tick: &'f dyn Fn(f64) -> String,
}

/// A chart on `area` with grid lines at the axes' ticks and no text yet.
pub(super) fn build_chart<'a, 'b>(
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

pub(super) fn draw_axis_text(chart: &Chart, pen: Pen, text: &AxisText) -> anyhow::Result<()> {
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

pub(super) fn x_spec<'c>(chart: &'c Chart) -> &'c Ticked {
    chart.as_coord_spec().x_spec()
}

pub(super) fn y_spec<'c>(chart: &'c Chart) -> &'c Ticked {
    chart.as_coord_spec().y_spec()
}

/// A tick label: `0`, `2.5`, `150`, `12.5k`, `1.5M`.
pub(super) fn number(v: f64) -> String {
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
pub(super) fn trimmed(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".to_string() } else { s }
}

/// A binary byte unit for an axis.
pub(super) struct ByteUnit {
    pub(super) name: &'static str,
    pub(super) size: f64,
}

impl ByteUnit {
    /// The largest unit in which `max` is at least 1.
    pub(super) fn for_max(max: f64) -> Self {
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
    pub(super) fn human(bytes: f64) -> String {
        let unit = Self::for_max(bytes);
        format!("{} {}", trimmed(bytes / unit.size, 1), unit.name)
    }
}

/// A time unit for an axis.
pub(super) struct TimeUnit {
    pub(super) name: &'static str,
    pub(super) size: f64,
}

impl TimeUnit {
    /// Seconds up to 3 minutes, minutes up to 3 hours, hours beyond.
    pub(super) fn for_max(max_seconds: f64) -> Self {
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
    pub(super) fn human(seconds: f64) -> String {
        let unit = Self::for_max(seconds);
        format!("{} {}", trimmed(seconds / unit.size, 1), unit.name)
    }
}
