//! The sweep chart: one figure against a swept value.

use super::*;

/// The words of a sweep chart.
pub(super) fn draw_sweep(
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

pub(super) fn sorted_finite(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .copied()
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

pub(super) fn sweep_color(i: usize) -> RGBColor {
    // Blue first, then the rest of the palette.
    PALETTE[(i + PALETTE.len() - 1) % PALETTE.len()]
}

/// The x axis of a sweep: a tick at every distinct x when there are at most 15 (swept
/// values, or category indices), round ticks otherwise.
pub(super) fn sweep_x_axis(points: &[(f64, f64)]) -> Ticked {
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
