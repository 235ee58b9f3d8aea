//! The four run charts (depth, age, outcomes, store), each a family of panels over the run's time, and the data they draw.

use super::*;

pub(super) type RunChart = fn(&Path, &str, &Frame, &RunOutput, &Series) -> anyhow::Result<()>;

pub(super) fn depth_chart(
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
pub(super) fn cap_entry(hosts: u64, caps: (f64, f64), shown: (bool, bool)) -> Entry {
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

pub(super) fn age_chart(
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
pub(super) fn stale_rule() -> (&'static str, f64) {
    spool::alerts::RULES
        .iter()
        .find_map(|r| match r.condition {
            spool::alerts::Condition::OldestAgeAbove(s) => Some((r.name, s)),
            _ => None,
        })
        .unwrap_or(("SpoolOldestEntryStale", 900.0))
}

pub(super) fn outcomes_chart(
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

pub(super) fn store_chart(
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
pub(super) fn rates_chart(
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

pub(super) fn one_panel(
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

/// Whether a series keeps its column maxima or means when downsampled.
#[derive(Debug, Clone, Copy)]
pub(super) enum Reduce {
    Max,
    Mean,
}

/// A gauge as (seconds from t = 0, value), downsampled by maximum.
pub(super) fn gauge(rows: &[Row], value: impl Fn(&Row) -> f64) -> Vec<(f64, f64)> {
    let points = rows.iter().map(|r| (r.t.as_secs_f64(), value(r))).collect();
    downsample(points, Reduce::Max)
}

/// A per-interval count as a rate per second, downsampled by mean.
pub(super) fn rate(rows: &[Row], sample: Duration, count: impl Fn(&Row) -> f64) -> Vec<(f64, f64)> {
    let per = sample.as_secs_f64().max(1e-9);
    let points = rows
        .iter()
        .map(|r| (r.t.as_secs_f64(), count(r) / per))
        .collect();
    downsample(points, Reduce::Mean)
}

/// At most [`COLUMNS`] points: consecutive runs of points reduced to one each.
pub(super) fn downsample(points: Vec<(f64, f64)>, reduce: Reduce) -> Vec<(f64, f64)> {
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

pub(super) fn peak(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(0.0, f64::max)
}

/// The top of the y range for data peaking at `peak` against `limit`, and the limit
/// when it is drawn (when the data reaches [`LIMIT_SHOWN_FROM`] of it).
pub(super) fn scale_with_limit(peak: f64, limit: f64) -> (f64, Option<f64>) {
    let shown = peak >= LIMIT_SHOWN_FROM * limit;
    let top = if shown { peak.max(limit) } else { peak };
    ((top * 1.1).max(1.0), shown.then_some(limit))
}

/// Each alert's firing periods (over all hosts), in order of first firing.
pub(super) fn firing_by_rule(
    alerts: &[AlertWindow],
    span: f64,
) -> Vec<(&'static str, Vec<(f64, f64)>)> {
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
