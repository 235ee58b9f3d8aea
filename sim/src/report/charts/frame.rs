//! What every run chart shares: the time axis (the scenario's wall clock) and the fault and host overlays.

use super::*;

/// The run-wide context of every run chart.
pub(super) struct Frame {
    pub(super) pen: Pen,
    pub(super) scenario: String,
    pub(super) hosts: u32,
    pub(super) sample: Duration,
    pub(super) span: f64,
    pub(super) clock: Clock,
    pub(super) faults: Vec<Band>,
    pub(super) events: Vec<Mark>,
}

/// A fault window, in seconds from t = 0.
pub(super) struct Band {
    pub(super) from: f64,
    pub(super) to: f64,
    pub(super) partial: bool,
}

/// A crash, restart or deploy, in seconds from t = 0.
pub(super) struct Mark {
    pub(super) at: f64,
    pub(super) up: f64,
    pub(super) kind: EventKind,
    pub(super) host: u32,
}

impl Frame {
    pub(super) fn new(run: &RunOutput, pen: Pen) -> Self {
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
    pub(super) fn title(&self, what: &str) -> String {
        let hosts = if self.hosts == 1 { "host" } else { "hosts" };
        format!("{what} — {} ({} {hosts})", self.scenario, self.hosts)
    }

    /// Legend entries for the overlays present, once per kind.
    pub(super) fn legend(&self) -> Vec<Entry> {
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
    pub(super) fn event_label(&self, kind: EventKind) -> String {
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
pub(super) fn bands(run: &RunOutput, span: f64) -> Vec<Band> {
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
pub(super) fn marks(run: &RunOutput, span: f64) -> Vec<Mark> {
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

pub(super) fn fault_fill(partial: bool) -> RGBAColor {
    FAULT.mix(if partial {
        PARTIAL_FAULT_ALPHA
    } else {
        FAULT_ALPHA
    })
}

pub(super) fn event_color(kind: EventKind) -> RGBAColor {
    let color = match kind {
        EventKind::Crash => CRASH,
        EventKind::Restart => RESTART,
        EventKind::Deploy => DEPLOY,
    };
    color.mix(EVENT_ALPHA)
}

/// How tick labels of the time axis are written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ClockStyle {
    /// `10:00:05`, for runs under 10 minutes.
    Seconds,
    /// `10:05`, within one day.
    Minutes,
    /// `Oct 08 12:00`, across days.
    Dated,
}

/// The wall-clock time axis: `start + t`, with ticks on round times.
pub(super) struct Clock {
    pub(super) start_ms: u64,
    pub(super) end_ms: u64,
    pub(super) style: ClockStyle,
    pub(super) ticks: Vec<f64>,
}

/// Tick spacings, in seconds.
pub(super) const TICK_STEPS: [u64; 21] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    172_800, 604_800, 2_592_000,
];

impl Clock {
    pub(super) fn new(start: SystemTime, span: f64) -> Self {
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
    pub(super) fn label(&self, t: f64) -> String {
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
    pub(super) fn desc(&self) -> String {
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

pub(super) fn month(number: &str) -> &'static str {
    pub(super) const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let index = number.parse::<usize>().unwrap_or(0).wrapping_sub(1);
    MONTHS.get(index).copied().unwrap_or("???")
}
