//! `report.json`: a run's figures, machine-readable, with stable top-level fields
//! (a user's CI reads them).

use std::time::Duration;

use serde::Serialize;

use crate::checker::{Invariant, Status, Tally, Verdict};
use crate::recorder::TimelineEvent;
use crate::report::series::{AlertWindow, Drain, Series};
use crate::world::RunOutput;

/// Headroom added to the peak when sizing a spool: 25%, for a longer outage than
/// the one simulated or a burst of larger objects.
pub const HEADROOM: f64 = 0.25;

/// `report.json`. Top-level fields are stable (a user's CI reads them); see docs/bench.md, Reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// The seed the run used.
    pub seed: u64,
    /// Simulated wall time at t = 0 (RFC 3339).
    pub start: String,
    /// Length of the run, in seconds.
    pub duration_seconds: f64,
    /// True when every invariant held or was explained.
    pub passed: bool,
    /// Where every write ended up (`writes`, `stored`, `spooled`, `rejected`,
    /// `failed`, `unknown`, `unknown_landed`, `in_bucket`, `lost`, `duplicates`,
    /// `dead_lettered`, `quarantined`, `pending`, `destroyed_by_disk`, `conflicts`, in
    /// this order).
    #[serde(flatten)]
    pub tally: Tally,
    /// Most entries in all spools at once.
    pub peak_files: u64,
    /// Most bytes in all spools at once.
    pub peak_bytes: u64,
    /// Oldest entry's largest age, in seconds.
    pub peak_oldest_age_seconds: f64,
    /// When each peak was reached (seconds from t = 0).
    pub peak_at_seconds: PeakTimes,
    /// Seconds from the end of the fault window with the largest backlog to empty
    /// spools; null when they never emptied.
    pub drain_seconds: Option<f64>,
    /// The drain after every fault window.
    pub drains: Vec<DrainJson>,
    /// What a spool needs for this scenario.
    pub capacity: Sizing,
    /// When the shipped alert rules would have fired.
    pub alerts: Vec<AlertJson>,
    /// The store's side.
    pub store: StoreJson,
    /// The disks' side: operations, faults injected and the crash states power
    /// losses produced, over every host.
    pub disk: DiskJson,
    /// Crashes, restarts and deploys.
    pub events: Vec<EventJson>,
    /// Every invariant with its result.
    pub invariants: Vec<InvariantJson>,
}

/// When the peaks were reached.
#[derive(Debug, Clone, Serialize)]
pub struct PeakTimes {
    /// `peak_files`.
    pub files: f64,
    /// `peak_bytes`.
    pub bytes: f64,
    /// `peak_oldest_age_seconds`.
    pub oldest_age: f64,
}

/// One drain.
#[derive(Debug, Clone, Serialize)]
pub struct DrainJson {
    /// The fault window.
    pub window: String,
    /// When it ended (seconds from t = 0).
    pub recovered_at_seconds: f64,
    /// Entries spooled then.
    pub backlog: u64,
    /// Seconds until the spools were empty; null when they never were.
    pub drain_seconds: Option<f64>,
    /// Entries removed per second while draining.
    pub drain_rate_per_second: f64,
}

/// How large a spool this scenario needs, beside what it was given (`capacity` in
/// `report.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Sizing {
    /// The most files one host's spool held.
    pub peak_files_per_host: u64,
    /// The most bytes one host's spool held.
    pub peak_bytes_per_host: u64,
    /// Headroom added (fraction).
    pub headroom: f64,
    /// `max_files` to configure: peak plus headroom.
    pub files_needed: u64,
    /// Disk (and `max_bytes`) to give each spool: peak plus headroom.
    pub bytes_needed: u64,
    /// The scenario's configured `max_files`.
    pub configured_max_files: u64,
    /// The scenario's configured `max_bytes`.
    pub configured_max_bytes: u64,
}

/// One alert window.
#[derive(Debug, Clone, Serialize)]
pub struct AlertJson {
    /// Rule name.
    pub name: String,
    /// Host index.
    pub host: u32,
    /// Fired at (seconds from t = 0).
    pub fired_at_seconds: f64,
    /// Resolved at; null if still firing at the end.
    pub resolved_at_seconds: Option<f64>,
}

/// The store's counters.
#[derive(Debug, Clone, Serialize)]
pub struct StoreJson {
    /// Requests received.
    pub requests: u64,
    /// Requests shed by the capacity model.
    pub shed: u64,
    /// 412 answers.
    pub precondition_failures: u64,
    /// Injected faults by kind.
    pub faults: std::collections::BTreeMap<String, u64>,
}

/// What the hosts' disks did, summed.
#[derive(Debug, Clone, Serialize)]
pub struct DiskJson {
    /// Primitive disk operations.
    pub operations: u64,
    /// Faults injected, by kind.
    pub faults: std::collections::BTreeMap<String, u64>,
    /// Files the disk damaged (bad sectors, bits flipped at rest).
    pub damaged_files: u64,
    /// The states power losses left behind.
    pub crash_states: crate::simdisk::CrashStates,
}

/// One event.
#[derive(Debug, Clone, Serialize)]
pub struct EventJson {
    /// `crash`, `restart` or `deploy`.
    pub kind: String,
    /// Host index.
    pub host: u32,
    /// When (seconds from t = 0).
    pub at_seconds: f64,
    /// How long the host was down.
    pub down_seconds: f64,
    /// Writes in flight that became unknown.
    pub unknown: u64,
}

/// One invariant.
#[derive(Debug, Clone, Serialize)]
pub struct InvariantJson {
    /// Stable name.
    pub name: String,
    /// Whether it held (true also when explained).
    pub held: bool,
    /// `held`, `explained` or `failed`.
    pub status: String,
    /// The explanation or failure detail.
    pub detail: String,
}

pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Builds `report.json`'s contents.
pub fn build(run: &RunOutput, verdict: &Verdict, series: &Series) -> Report {
    let scenario = &run.scenario;
    let (files, bytes, age) = series.peaks();
    let main_drain = series.drains.iter().max_by_key(|d| d.backlog);
    Report {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        start: spool::format::rfc3339_seconds(scenario.wall_ms(Duration::ZERO)),
        duration_seconds: secs(scenario.duration),
        passed: verdict.passed(),
        tally: verdict.tally.clone(),
        peak_files: files.value as u64,
        peak_bytes: bytes.value as u64,
        peak_oldest_age_seconds: age.value,
        peak_at_seconds: PeakTimes {
            files: secs(files.at),
            bytes: secs(bytes.at),
            oldest_age: secs(age.at),
        },
        drain_seconds: main_drain.and_then(|d| d.empty.map(|e| secs(e - d.recovered))),
        drains: series.drains.iter().map(drain_json).collect(),
        capacity: sizing(run, series),
        alerts: series.alerts.iter().map(alert_json).collect(),
        store: StoreJson {
            requests: run.fake.requests,
            shed: run.fake.shed,
            precondition_failures: run.fake.precondition_failures,
            faults: run.fake.by_fault.clone(),
        },
        disk: disk_json(run),
        events: run.recorder.timeline.iter().map(event_json).collect(),
        invariants: verdict.invariants.iter().map(invariant_json).collect(),
    }
}

fn sizing(run: &RunOutput, series: &Series) -> Sizing {
    let (host_files, host_bytes) = series.per_host_peaks();
    let spool = &run.scenario.spool;
    Sizing {
        peak_files_per_host: host_files,
        peak_bytes_per_host: host_bytes,
        headroom: HEADROOM,
        files_needed: (host_files as f64 * (1.0 + HEADROOM)).ceil() as u64,
        bytes_needed: (host_bytes as f64 * (1.0 + HEADROOM)).ceil() as u64,
        configured_max_files: spool.max_files,
        configured_max_bytes: spool.max_bytes,
    }
}

fn alert_json(a: &AlertWindow) -> AlertJson {
    AlertJson {
        name: a.name.to_string(),
        host: a.host,
        fired_at_seconds: secs(a.fired),
        resolved_at_seconds: a.resolved.map(secs),
    }
}

fn disk_json(run: &RunOutput) -> DiskJson {
    let mut disk = DiskJson {
        operations: 0,
        faults: std::collections::BTreeMap::new(),
        damaged_files: 0,
        crash_states: crate::simdisk::CrashStates::default(),
    };
    for report in &run.disks {
        disk.operations += report.operations;
        for (kind, n) in &report.injected {
            *disk.faults.entry(kind.to_string()).or_default() += n;
        }
        disk.damaged_files += report.damage.len() as u64;
        disk.crash_states.add(&report.crash_states);
    }
    disk
}

fn event_json(e: &TimelineEvent) -> EventJson {
    EventJson {
        kind: e.kind.as_str().to_string(),
        host: e.host,
        at_seconds: secs(e.at),
        down_seconds: secs(e.down_for),
        unknown: e.unknown,
    }
}

fn invariant_json(i: &Invariant) -> InvariantJson {
    let (status, detail) = match &i.status {
        Status::Held => ("held", String::new()),
        Status::Explained(d) => ("explained", d.clone()),
        Status::Failed(d) => ("failed", d.clone()),
    };
    InvariantJson {
        name: i.name.to_string(),
        held: i.held(),
        status: status.to_string(),
        detail,
    }
}

fn drain_json(d: &Drain) -> DrainJson {
    DrainJson {
        window: d.window.clone(),
        recovered_at_seconds: secs(d.recovered),
        backlog: d.backlog,
        drain_seconds: d.empty.map(|e| secs(e - d.recovered)),
        drain_rate_per_second: (d.drain_rate * 100.0).round() / 100.0,
    }
}
