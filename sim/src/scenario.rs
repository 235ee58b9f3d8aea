//! Scenario files: what a run simulates, in TOML.
//!
//! Parsed in two steps (as ripgrep does with its flags): serde into raw structs with
//! `deny_unknown_fields`, so a wrong key or type is a TOML error with its line; then a
//! checked conversion into [`Scenario`] whose errors name the file, the line and the
//! field (`scenarios/x.toml:14: drainer.cap: must be at least drainer.base (2s)`).
//!
//! ```toml
//! name = "demo"
//! seed = 42
//! start = 2026-10-08T10:00:00Z   # simulated wall time at t = 0 (TOML datetime or RFC 3339 string)
//! duration = "20s"
//! tick = "10ms"                  # simulation step (default 10ms)
//! sample = "1s"                  # time-series interval (default 1s)
//!
//! [workload]
//! hosts = 1                      # app hosts (default 1)
//! rate = 50                      # writes per second per host, Poisson arrivals
//! stop_at = "10s"                # producers stop (default: at the end)
//! size = "1KiB"                  # or { min = "256B", max = "4KiB" } (log-uniform)
//! poison = 0.0                   # share of writes the store refuses for good (403)
//! names = "plain"                # plain: h<host>/<seq>; hard: every character Cloud Storage allows, up to 1,024 bytes
//! attributes = false             # writes carry content type, cache control, ..., custom metadata
//! conflicts = 0.0                # share of writes whose name another writer takes first
//!
//! [spool]                        # spool::SpoolConfig
//! max_files = 200
//! max_bytes = "5MiB"
//!
//! [uploader]                     # spool::UploaderConfig
//! put_timeout = "2s"
//!
//! [drainer]                      # spool::DrainerConfig
//! workers = 4
//! base = "100ms"
//! cap = "2s"
//! jitter = "full"                # none | equal | full | decorrelated
//! put_timeout = "2s"
//!
//! [[fault]]                      # the fake GCS's fault windows (see docs/fake-gcs.md);
//! from = "2s"                    # from/until also take RFC 3339 times
//! until = "8s"
//! mix = { "503" = 0.5, hang = 0.5 }
//!
//! [[event]]
//! at = "5s"                      # or an RFC 3339 time; or instead:
//! # after_disk_ops = 30000       # power lost just before the host's 30,000th disk
//! #                              # operation (crash only)
//! kind = "crash"                 # crash (power loss) | restart (process only) | deploy (graceful)
//! host = 0                       # or "all" (every app host), or "relay" (default 0)
//! down_for = "1s"
//!
//! [relay]                        # a spool-relay host between the app hosts and the store
//! enabled = false                # on: app hosts write through it over HTTP and keep no
//!                                # spool; the relay's spool, uploader and drainer take
//!                                # [spool], [uploader] and [drainer]
//! retry_after = "1s"             # Retry-After on its 503 (spool full)
//! shutdown_grace = "30s"         # requests in flight may finish this long at a deploy
//!
//! [disk]                         # the simulated disk (sim::simdisk), per host
//! capacity = "10MiB"             # bytes of file data before ENOSPC
//! block = "4KiB"                 # what unsynced data survives a power loss in
//! faults_from = "0s"             # the faults below apply from ...
//! faults_until = "1m"            # ... until (default: the end)
//! io_error_probability = 0.0     # EIO on every kind of operation (default for the next seven)
//! eio_open = 0.0                 # per operation of each kind, overriding the above
//! eio_read = 0.0
//! eio_write = 0.0
//! eio_fsync = 0.0                # fsync of a file or a directory
//! eio_rename = 0.0
//! eio_unlink = 0.0
//! eio_readdir = 0.0
//! enospc_create = 0.0            # ENOSPC or EDQUOT
//! enospc_write = 0.0
//! enospc_rename = 0.0
//! sticky_read = 0.0              # a read finds a bad sector: the file stays unreadable
//! corrupt_at_rest = 0.0          # a read finds a bit of synced data flipped
//!
//! [network]
//! min_latency = "1ms"
//! max_latency = "10ms"
//! ```

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytesize::ByteSize;
use fake_gcs::FaultPlan;
use serde::Deserialize;
use spool::{BackoffConfig, DrainerConfig, Jitter, SpoolConfig, UploaderConfig};

pub use crate::simdisk::{DiskConfig, FaultRates};

/// A checked scenario, ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short name; reports go to `reports/<name>/`.
    pub name: String,
    /// The seed every random choice of the run derives from.
    pub seed: u64,
    /// Simulated wall-clock time at t = 0.
    pub start: SystemTime,
    /// Length of the run.
    pub duration: Duration,
    /// Simulation step.
    pub tick: Duration,
    /// Time-series interval.
    pub sample: Duration,
    /// The producers.
    pub workload: Workload,
    /// Each host's spool.
    pub spool: SpoolConfig,
    /// Each host's uploader.
    pub uploader: UploaderConfig,
    /// Each host's drainer (its seed is derived per host and boot).
    pub drainer: DrainerConfig,
    /// What the fake Cloud Storage does over time, with offsets from t = 0.
    pub faults: FaultPlan,
    /// Crashes, restarts and deploys, in time order.
    pub events: Vec<Event>,
    /// The simulated disk, per host.
    pub disk: DiskConfig,
    /// Network latency between hosts.
    pub network: Network,
    /// A relay host between the app hosts and the store, if the scenario puts one
    /// there (`[relay] enabled = true`).
    pub relay: Option<RelayOptions>,
    /// The file's text, kept for the report.
    pub source: String,
}

/// The producers' load.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// App hosts.
    pub hosts: u32,
    /// Writes per second per host (Poisson arrivals).
    pub rate: f64,
    /// When producers stop issuing writes.
    pub stop_at: Duration,
    /// Object sizes.
    pub size: SizeDist,
    /// Share of writes named `poison/...`, which the fake refuses with 403.
    pub poison: f64,
    /// Names from the hard alphabet.
    pub hard_names: bool,
    /// Writes carry attributes.
    pub attributes: bool,
    /// Share of writes whose name another writer takes first.
    pub conflicts: f64,
}

/// Object size distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeDist {
    /// Every object this size.
    Fixed(u64),
    /// Log-uniform between the bounds (inclusive).
    LogUniform {
        /// Smallest size.
        min: u64,
        /// Largest size.
        max: u64,
    },
}

impl SizeDist {
    /// The mean size in bytes.
    pub fn mean(&self) -> f64 {
        match *self {
            SizeDist::Fixed(n) => n as f64,
            SizeDist::LogUniform { min, max } if min == max => min as f64,
            SizeDist::LogUniform { min, max } => {
                let (a, b) = (min.max(1) as f64, max as f64);
                (b - a) / (b / a).ln()
            }
        }
    }
}

/// What happens to a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    /// Power loss: the process dies and unsynced data is gone.
    Crash,
    /// The process dies; the page cache (unsynced data) survives.
    Restart,
    /// Graceful stop (in-flight uploads finish, the drainer stops between entries),
    /// then start.
    Deploy,
}

impl EventKind {
    /// The name used in scenario files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Crash => "crash",
            EventKind::Restart => "restart",
            EventKind::Deploy => "deploy",
        }
    }
}

/// When an event happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum When {
    /// At an offset from t = 0.
    At(Duration),
    /// Just before the host's k-th disk operation (counted over the run): a power
    /// loss in the middle of whatever the spool was doing.
    AfterDiskOps(u64),
}

/// A scheduled event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When, as an offset from t = 0 (`Duration::MAX` for an event at a disk
    /// operation: it is applied when the disk reaches it).
    pub at: Duration,
    /// When, as the scenario says it.
    pub when: When,
    /// What.
    pub kind: EventKind,
    /// Which hosts (indices).
    pub hosts: Vec<u32>,
    /// How long the host stays down before its software starts again.
    pub down_for: Duration,
}

/// The relay host (`[relay]`): the production `spool-relay` (its spool, uploader and
/// drainer configured by `[spool]`, `[uploader]` and `[drainer]`), which the app
/// hosts write through with the production GCS client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayOptions {
    /// `Retry-After` on a 503 (spool full). Default 1 s.
    pub retry_after: Duration,
    /// How long requests in flight may take to finish when the relay stops
    /// gracefully (a deploy, the end of the run). Default 30 s.
    pub shutdown_grace: Duration,
}

/// Network latency between hosts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Network {
    /// Smallest one-way message latency.
    pub min_latency: Duration,
    /// Largest one-way message latency.
    pub max_latency: Duration,
}

/// A scenario that cannot be run, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {}{message}", location(file, *line), field.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// The line, when known.
    pub line: Option<usize>,
    /// The field path (`drainer.cap`, `fault[1].mix`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

fn location(file: &str, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{file}:{line}"),
        None => file.to_string(),
    }
}

/// Reads and checks the scenario file at `path`.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: file.clone(),
        line: None,
        field: None,
        message: format!("cannot read: {e}"),
    })?;
    parse(&file, &text)
}

/// Parses and checks scenario `text`; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = toml::from_str(text).map_err(|e| ScenarioError {
        file: file.to_string(),
        line: e.span().map(|s| line_at(text, s.start)),
        field: None,
        message: e.message().trim_end().to_string(),
    })?;
    let error = |field: &str, message: String| ScenarioError {
        file: file.to_string(),
        line: locate(text, field),
        field: Some(field.to_string()),
        message,
    };
    raw.check(text)
        .map_err(|(field, message)| error(&field, message))
}

/// The 1-based line of byte offset `at`.
fn line_at(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// The line where the field at `path` (`a.b`, `fault[2].mix`) is written, if found.
pub fn locate(text: &str, path: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut span = root.span();
    let mut value: Option<&toml::Spanned<DeValue>> = None;
    let mut table = Some(root.get_ref());
    for segment in path.split('.') {
        let (key, index) = match segment.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        let mut next = match (table, value) {
            (Some(t), _) => t.get(key)?,
            (None, Some(v)) => v.get_ref().get(key)?,
            _ => return None,
        };
        if let Some(i) = index {
            next = next.get_ref().get(i)?;
        }
        span = next.span();
        value = Some(next);
        table = None;
    }
    Some(line_at(text, span.start))
}

fn default_tick() -> Duration {
    Duration::from_millis(10)
}

fn default_sample() -> Duration {
    Duration::from_secs(1)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    seed: u64,
    start: TimeOrOffset,
    #[serde(with = "humantime_serde")]
    duration: Duration,
    #[serde(default = "default_tick", with = "humantime_serde")]
    tick: Duration,
    #[serde(default = "default_sample", with = "humantime_serde")]
    sample: Duration,
    workload: RawWorkload,
    #[serde(default)]
    spool: RawSpool,
    #[serde(default)]
    uploader: RawUploader,
    #[serde(default)]
    drainer: RawDrainer,
    #[serde(default, rename = "fault")]
    faults: Vec<toml::Table>,
    #[serde(default)]
    capacity: Option<toml::Table>,
    #[serde(default, rename = "event")]
    events: Vec<RawEvent>,
    #[serde(default)]
    disk: RawDisk,
    #[serde(default)]
    network: RawNetwork,
    #[serde(default)]
    relay: RawRelay,
}

/// A time written as a TOML datetime, an RFC 3339 string, or a duration offset.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum TimeOrOffset {
    Datetime(toml::value::Datetime),
    Text(String),
}

impl TimeOrOffset {
    /// As an absolute time, if it is one.
    fn absolute(&self) -> Result<Option<SystemTime>, String> {
        let text = match self {
            TimeOrOffset::Datetime(d) => d.to_string(),
            TimeOrOffset::Text(t) => t.clone(),
        };
        if humantime::parse_duration(&text).is_ok() {
            return Ok(None);
        }
        humantime::parse_rfc3339_weak(&text)
            .map(Some)
            .map_err(|e| format!("{text:?} is neither an RFC 3339 time nor a duration: {e}"))
    }

    /// As an offset from `start`.
    fn offset(&self, start: SystemTime) -> Result<Duration, String> {
        match self.absolute()? {
            Some(t) => t.duration_since(start).map_err(|_| {
                format!(
                    "{} is before the scenario start",
                    humantime::format_rfc3339(t)
                )
            }),
            None => match self {
                TimeOrOffset::Text(t) => Ok(humantime::parse_duration(t).expect("checked above")),
                TimeOrOffset::Datetime(_) => unreachable!("a datetime is absolute"),
            },
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    #[serde(default = "one")]
    hosts: u32,
    rate: f64,
    #[serde(default, with = "humantime_serde")]
    stop_at: Option<Duration>,
    size: RawSize,
    #[serde(default)]
    poison: f64,
    names: Option<String>,
    #[serde(default)]
    attributes: bool,
    #[serde(default)]
    conflicts: f64,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawSize {
    Fixed(ByteSize),
    Range { min: ByteSize, max: ByteSize },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpool {
    max_files: Option<u64>,
    max_bytes: Option<ByteSize>,
    remove_sync_batch: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUploader {
    #[serde(default, with = "humantime_serde")]
    put_timeout: Option<Duration>,
    ordered: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDrainer {
    workers: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    put_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    base: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    cap: Option<Duration>,
    jitter: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: Option<TimeOrOffset>,
    after_disk_ops: Option<u64>,
    kind: String,
    #[serde(default)]
    host: Option<RawHost>,
    #[serde(default, with = "humantime_serde")]
    down_for: Option<Duration>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawHost {
    Index(u32),
    Name(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDisk {
    capacity: Option<ByteSize>,
    block: Option<ByteSize>,
    faults_from: Option<TimeOrOffset>,
    faults_until: Option<TimeOrOffset>,
    io_error_probability: Option<f64>,
    eio_open: Option<f64>,
    eio_read: Option<f64>,
    eio_write: Option<f64>,
    eio_fsync: Option<f64>,
    eio_rename: Option<f64>,
    eio_unlink: Option<f64>,
    eio_readdir: Option<f64>,
    enospc_create: Option<f64>,
    enospc_write: Option<f64>,
    enospc_rename: Option<f64>,
    sticky_read: Option<f64>,
    corrupt_at_rest: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    #[serde(default, with = "humantime_serde")]
    min_latency: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    max_latency: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRelay {
    #[serde(default)]
    enabled: bool,
    #[serde(default, with = "humantime_serde")]
    retry_after: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    shutdown_grace: Option<Duration>,
}

type Checked<T> = Result<T, (String, String)>;

fn ensure(ok: bool, field: &str, message: impl Into<String>) -> Checked<()> {
    if ok {
        Ok(())
    } else {
        Err((field.to_string(), message.into()))
    }
}

fn probability(value: f64, field: &str) -> Checked<f64> {
    ensure(
        (0.0..=1.0).contains(&value),
        field,
        format!("{value} is not a probability in [0, 1]"),
    )?;
    Ok(value)
}

impl RawScenario {
    fn check(self, text: &str) -> Checked<Scenario> {
        ensure(!self.name.is_empty(), "name", "must not be empty")?;
        ensure(
            self.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "name",
            format!(
                "{:?} may only use letters, digits, '-', '_' and '.' (it names the report folder)",
                self.name
            ),
        )?;
        let start = self
            .start
            .absolute()
            .map_err(|m| ("start".to_string(), m))?
            .ok_or_else(|| ("start".to_string(), "must be an RFC 3339 time".to_string()))?;
        ensure(
            !self.duration.is_zero(),
            "duration",
            "must be longer than zero",
        )?;
        ensure(
            self.tick > Duration::ZERO && self.tick <= Duration::from_secs(1),
            "tick",
            "must be between 1ns and 1s",
        )?;
        ensure(
            self.sample >= self.tick,
            "sample",
            format!("must be at least the tick ({:?})", self.tick),
        )?;
        let workload = self.workload.check(self.duration)?;
        let spool = self.spool.check()?;
        let uploader = self.uploader.check()?;
        let drainer = self.drainer.check()?;
        let faults = faults(&self.faults, self.capacity.as_ref(), start)?;
        let relay = self.relay.check()?;
        let mut events = Vec::with_capacity(self.events.len());
        for (i, raw) in self.events.iter().enumerate() {
            events.push(raw.check(i, start, self.duration, workload.hosts, relay.is_some())?);
        }
        events.sort_by_key(|e| e.when);
        let disk = self.disk.check(start)?;
        let network = self.network.check()?;
        let _ = text;
        Ok(Scenario {
            name: self.name,
            seed: self.seed,
            start,
            duration: self.duration,
            tick: self.tick,
            sample: self.sample,
            workload,
            spool,
            uploader,
            drainer,
            faults,
            events,
            disk,
            network,
            relay,
            source: text.to_string(),
        })
    }
}

impl RawWorkload {
    fn check(self, duration: Duration) -> Checked<Workload> {
        ensure(
            (1..=64).contains(&self.hosts),
            "workload.hosts",
            "must be between 1 and 64",
        )?;
        ensure(
            self.rate > 0.0 && self.rate <= 100_000.0,
            "workload.rate",
            format!("{} writes/s must be above 0 and at most 100000", self.rate),
        )?;
        let stop_at = self.stop_at.unwrap_or(duration);
        ensure(
            stop_at <= duration,
            "workload.stop_at",
            "must not be after the scenario's duration",
        )?;
        let size = match self.size {
            RawSize::Fixed(n) => SizeDist::Fixed(n.as_u64()),
            RawSize::Range { min, max } => {
                ensure(
                    min <= max,
                    "workload.size",
                    format!("min {min} is larger than max {max}"),
                )?;
                SizeDist::LogUniform {
                    min: min.as_u64(),
                    max: max.as_u64(),
                }
            }
        };
        let max_size = match size {
            SizeDist::Fixed(n) | SizeDist::LogUniform { max: n, .. } => n,
        };
        ensure(
            max_size <= 64 << 20,
            "workload.size",
            "objects above 64 MiB are not simulated",
        )?;
        let hard_names = match self.names.as_deref() {
            None | Some("plain") => false,
            Some("hard") => true,
            Some(other) => {
                return Err((
                    "workload.names".into(),
                    format!("unknown style {other:?}; expected plain or hard"),
                ));
            }
        };
        Ok(Workload {
            hosts: self.hosts,
            rate: self.rate,
            stop_at,
            size,
            poison: probability(self.poison, "workload.poison")?,
            hard_names,
            attributes: self.attributes,
            conflicts: probability(self.conflicts, "workload.conflicts")?,
        })
    }
}

impl RawSpool {
    fn check(self) -> Checked<SpoolConfig> {
        let default = SpoolConfig::default();
        let config = SpoolConfig {
            max_files: self.max_files.unwrap_or(default.max_files),
            max_bytes: self.max_bytes.map_or(default.max_bytes, |b| b.as_u64()),
            remove_sync_batch: self.remove_sync_batch.unwrap_or(default.remove_sync_batch),
        };
        ensure(
            config.max_files >= 1,
            "spool.max_files",
            "must be at least 1",
        )?;
        ensure(
            config.max_bytes >= 1,
            "spool.max_bytes",
            "must be at least 1 byte",
        )?;
        ensure(
            config.remove_sync_batch >= 1,
            "spool.remove_sync_batch",
            "must be at least 1",
        )?;
        Ok(config)
    }
}

impl RawUploader {
    fn check(self) -> Checked<UploaderConfig> {
        let default = UploaderConfig::default();
        let config = UploaderConfig {
            put_timeout: self.put_timeout.unwrap_or(default.put_timeout),
            ordered: self.ordered.unwrap_or(default.ordered),
        };
        ensure(
            !config.put_timeout.is_zero(),
            "uploader.put_timeout",
            "must be longer than zero",
        )?;
        Ok(config)
    }
}

impl RawDrainer {
    fn check(self) -> Checked<DrainerConfig> {
        let default = DrainerConfig::default();
        let backoff = BackoffConfig {
            base: self.base.unwrap_or(default.backoff.base),
            cap: self.cap.unwrap_or(default.backoff.cap),
            jitter: match &self.jitter {
                Some(j) => j
                    .parse::<Jitter>()
                    .map_err(|m| ("drainer.jitter".to_string(), m))?,
                None => default.backoff.jitter,
            },
        };
        let config = DrainerConfig {
            workers: self.workers.unwrap_or(default.workers),
            put_timeout: self.put_timeout.unwrap_or(default.put_timeout),
            backoff,
            ..default
        };
        ensure(
            (1..=256).contains(&config.workers),
            "drainer.workers",
            "must be between 1 and 256",
        )?;
        ensure(
            !backoff.base.is_zero(),
            "drainer.base",
            "must be longer than zero",
        )?;
        ensure(
            backoff.cap >= backoff.base,
            "drainer.cap",
            format!(
                "must be at least drainer.base ({})",
                humantime::format_duration(backoff.base)
            ),
        )?;
        ensure(
            !config.put_timeout.is_zero(),
            "drainer.put_timeout",
            "must be longer than zero",
        )?;
        Ok(config)
    }
}

impl RawRelay {
    fn check(self) -> Checked<Option<RelayOptions>> {
        let given = self.retry_after.is_some() || self.shutdown_grace.is_some();
        ensure(
            self.enabled || !given,
            "relay",
            "the relay's settings are given but it is not enabled (enabled = true)",
        )?;
        if !self.enabled {
            return Ok(None);
        }
        let options = RelayOptions {
            retry_after: self.retry_after.unwrap_or(Duration::from_secs(1)),
            shutdown_grace: self.shutdown_grace.unwrap_or(Duration::from_secs(30)),
        };
        ensure(
            !options.shutdown_grace.is_zero(),
            "relay.shutdown_grace",
            "must be longer than zero",
        )?;
        Ok(Some(options))
    }
}

impl RawEvent {
    fn check(
        &self,
        i: usize,
        start: SystemTime,
        duration: Duration,
        app_hosts: u32,
        relay: bool,
    ) -> Checked<Event> {
        let field = |name: &str| format!("event[{i}].{name}");
        let when = match (&self.at, self.after_disk_ops) {
            (Some(at), None) => {
                let at = at.offset(start).map_err(|m| (field("at"), m))?;
                ensure(
                    at < duration,
                    &field("at"),
                    "is at or after the end of the scenario",
                )?;
                When::At(at)
            }
            (None, Some(ops)) => {
                ensure(ops > 0, &field("after_disk_ops"), "must be at least 1")?;
                When::AfterDiskOps(ops)
            }
            _ => {
                return Err((
                    field("at"),
                    "give exactly one of at and after_disk_ops".to_string(),
                ));
            }
        };
        let kind = match self.kind.as_str() {
            "crash" => EventKind::Crash,
            "restart" => EventKind::Restart,
            "deploy" => EventKind::Deploy,
            other => {
                return Err((
                    field("kind"),
                    format!("unknown kind {other:?}; expected crash, restart or deploy"),
                ));
            }
        };
        let hosts = self.hosts(&field("host"), app_hosts, relay)?;
        ensure(
            matches!(when, When::At(_)) || kind == EventKind::Crash,
            &field("after_disk_ops"),
            "only a crash (power loss) can happen at a disk operation",
        )?;
        ensure(
            matches!(when, When::At(_)) || !relay || hosts == [app_hosts],
            &field("after_disk_ops"),
            "with the relay on, app hosts keep no spool and their disks see no operation: \
             crash the relay (host = \"relay\") at a disk operation",
        )?;
        Ok(Event {
            at: match when {
                When::At(at) => at,
                When::AfterDiskOps(_) => Duration::MAX,
            },
            when,
            kind,
            hosts,
            down_for: self.down_for.unwrap_or(Duration::ZERO),
        })
    }

    /// The hosts the event names: an app host's index, "all" app hosts, or the
    /// relay (whose index follows the app hosts').
    fn hosts(&self, field: &str, app_hosts: u32, relay: bool) -> Checked<Vec<u32>> {
        Ok(match &self.host {
            None => vec![0],
            Some(RawHost::Name(n)) if n == "all" => (0..app_hosts).collect(),
            Some(RawHost::Name(n)) if n == "relay" => {
                ensure(
                    relay,
                    field,
                    "there is no relay host: set [relay] enabled = true",
                )?;
                vec![app_hosts]
            }
            Some(RawHost::Name(n)) => {
                return Err((
                    field.to_string(),
                    format!("{n:?} is not a host index, \"all\" or \"relay\""),
                ));
            }
            Some(RawHost::Index(h)) => {
                ensure(
                    *h < app_hosts,
                    field,
                    format!("host {h} does not exist (workload.hosts = {app_hosts})"),
                )?;
                vec![*h]
            }
        })
    }
}

impl RawDisk {
    fn check(self, start: SystemTime) -> Checked<DiskConfig> {
        let default = DiskConfig::default();
        let block = self.block.map_or(default.block_bytes, |b| b.as_u64());
        ensure(block > 0, "disk.block", "must be at least 1 byte")?;
        let offset = |t: &Option<TimeOrOffset>, field: &str| -> Checked<Option<Duration>> {
            t.as_ref()
                .map(|t| t.offset(start).map_err(|m| (field.to_string(), m)))
                .transpose()
        };
        let faults_from = offset(&self.faults_from, "disk.faults_from")?.unwrap_or_default();
        let faults_until = offset(&self.faults_until, "disk.faults_until")?;
        ensure(
            faults_until.is_none_or(|u| u > faults_from),
            "disk.faults_until",
            "must be after disk.faults_from",
        )?;
        let eio = probability(
            self.io_error_probability.unwrap_or(0.0),
            "disk.io_error_probability",
        )?;
        let rate = |value: Option<f64>, fallback: f64, field: &str| {
            probability(value.unwrap_or(fallback), &format!("disk.{field}"))
        };
        let faults = FaultRates {
            eio_open: rate(self.eio_open, eio, "eio_open")?,
            eio_read: rate(self.eio_read, eio, "eio_read")?,
            eio_write: rate(self.eio_write, eio, "eio_write")?,
            eio_fsync: rate(self.eio_fsync, eio, "eio_fsync")?,
            eio_rename: rate(self.eio_rename, eio, "eio_rename")?,
            eio_unlink: rate(self.eio_unlink, eio, "eio_unlink")?,
            eio_readdir: rate(self.eio_readdir, eio, "eio_readdir")?,
            enospc_create: rate(self.enospc_create, 0.0, "enospc_create")?,
            enospc_write: rate(self.enospc_write, 0.0, "enospc_write")?,
            enospc_rename: rate(self.enospc_rename, 0.0, "enospc_rename")?,
            sticky_read: rate(self.sticky_read, 0.0, "sticky_read")?,
            corrupt_at_rest: rate(self.corrupt_at_rest, 0.0, "corrupt_at_rest")?,
        };
        Ok(DiskConfig {
            capacity: self.capacity.map(|c| c.as_u64()),
            block_bytes: block,
            faults,
            faults_from,
            faults_until,
        })
    }
}

impl RawNetwork {
    fn check(self) -> Checked<Network> {
        let min = self.min_latency.unwrap_or(Duration::from_millis(1));
        let max = self.max_latency.unwrap_or(Duration::from_millis(10));
        ensure(
            max >= min,
            "network.max_latency",
            "must be at least network.min_latency",
        )?;
        Ok(Network {
            min_latency: min,
            max_latency: max,
        })
    }
}

/// Converts `[[fault]]` tables (whose `from`/`until` may be RFC 3339 times) and the
/// `[capacity]` table into the fake's [`FaultPlan`], with offsets from `start`.
fn faults(
    raw: &[toml::Table],
    capacity: Option<&toml::Table>,
    start: SystemTime,
) -> Checked<FaultPlan> {
    let mut windows = Vec::with_capacity(raw.len());
    for (i, table) in raw.iter().enumerate() {
        let mut table = table.clone();
        for key in ["from", "until"] {
            let Some(value) = table.get(key) else {
                continue;
            };
            let time: TimeOrOffset = value
                .clone()
                .try_into()
                .map_err(|e| (format!("fault[{i}].{key}"), format!("{e}")))?;
            let offset = time
                .offset(start)
                .map_err(|m| (format!("fault[{i}].{key}"), m))?;
            table.insert(
                key.into(),
                toml::Value::String(format!("{}ms", offset.as_millis())),
            );
        }
        windows.push(toml::Value::Table(table));
    }
    let mut plan = toml::Table::new();
    plan.insert("fault".into(), toml::Value::Array(windows));
    if let Some(capacity) = capacity {
        plan.insert("capacity".into(), toml::Value::Table(capacity.clone()));
    }
    let text = toml::to_string(&plan).map_err(|e| ("fault".to_string(), e.to_string()))?;
    FaultPlan::from_toml(&text).map_err(|e| (e.field.clone(), e.message.clone()))
}

impl Scenario {
    /// The relay's host index (after the app hosts'), when there is a relay.
    pub fn relay_host(&self) -> Option<u32> {
        self.relay.map(|_| self.workload.hosts)
    }

    /// How many spools the run has: the relay's, or one per app host.
    pub fn spool_hosts(&self) -> u32 {
        match self.relay {
            Some(_) => 1,
            None => self.workload.hosts,
        }
    }

    /// Simulated wall-clock time at offset `t`.
    pub fn wall(&self, t: Duration) -> SystemTime {
        self.start + t
    }

    /// Milliseconds since the Unix epoch at offset `t`.
    pub fn wall_ms(&self, t: Duration) -> u64 {
        self.wall(t)
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
seed = 7
start = 2026-10-08T10:00:00Z
duration = "1h"

[workload]
rate = 50
size = { min = "256B", max = "4KiB" }

[drainer]
workers = 2
base = "100ms"
cap = "2s"
jitter = "decorrelated"

[[fault]]
from = 2026-10-08T11:00:00Z
until = "2026-10-08T11:30:00Z"
mix = { "503" = 0.5, hang = 0.5 }

[[event]]
at = "30m"
kind = "crash"
down_for = "10s"
"#;

    fn err(text: &str) -> ScenarioError {
        parse("s.toml", text).unwrap_err()
    }

    #[test]
    fn a_good_scenario_converts_times_to_offsets() {
        let s = parse("s.toml", GOOD).unwrap();
        assert_eq!(s.duration, Duration::from_secs(3600));
        assert_eq!(s.tick, Duration::from_millis(10));
        assert_eq!(s.faults.windows[0].from, Duration::from_secs(3600));
        assert_eq!(s.faults.windows[0].until, Some(Duration::from_secs(5400)));
        assert_eq!(s.events[0].at, Duration::from_secs(1800));
        assert_eq!(s.events[0].kind, EventKind::Crash);
        assert_eq!(s.drainer.backoff.jitter, Jitter::Decorrelated);
        assert_eq!(s.drainer.workers, 2);
        assert_eq!(
            s.workload.size,
            SizeDist::LogUniform {
                min: 256,
                max: 4096
            }
        );
        assert_eq!(s.wall_ms(Duration::ZERO), 1_791_453_600_000);
    }

    #[test]
    fn an_unknown_key_names_its_line() {
        let e = err(&GOOD.replace("rate = 50", "rat = 50"));
        assert_eq!(e.line, Some(8), "{e}");
        assert!(e.to_string().contains("unknown field `rat`"), "{e}");
        assert!(e.to_string().starts_with("s.toml:8: unknown field"), "{e}");
    }

    #[test]
    fn a_wrong_type_names_its_line() {
        let e = err(&GOOD.replace("workers = 2", "workers = \"two\""));
        assert_eq!(e.line, Some(12), "{e}");
    }

    #[test]
    fn a_bad_value_names_the_field_and_its_line() {
        let e = err(&GOOD.replace("cap = \"2s\"", "cap = \"10ms\""));
        assert_eq!(
            (e.field.as_deref(), e.line),
            (Some("drainer.cap"), Some(14)),
            "{e}"
        );
        assert!(e.to_string().contains("at least drainer.base"), "{e}");

        let e = err(&GOOD.replace("jitter = \"decorrelated\"", "jitter = \"fuzzy\""));
        assert_eq!(e.field.as_deref(), Some("drainer.jitter"), "{e}");

        let e = err(&GOOD.replace("kind = \"crash\"", "kind = \"explode\""));
        assert_eq!(
            (e.field.as_deref(), e.line),
            (Some("event[0].kind"), Some(24)),
            "{e}"
        );
    }

    #[test]
    fn a_bad_fault_window_names_the_window() {
        let e = err(&GOOD.replace("hang = 0.5", "hang = 0.9"));
        assert_eq!(e.field.as_deref(), Some("fault[0].mix"), "{e}");
        assert_eq!(e.line, Some(20), "{e}");
        assert!(
            e.to_string()
                .starts_with("s.toml:20: fault[0].mix: probabilities"),
            "{e}"
        );
        let e = err(&GOOD.replace("from = 2026-10-08T11:00:00Z", "from = 2026-10-07T11:00:00Z"));
        assert!(e.to_string().contains("before the scenario start"), "{e}");
    }

    #[test]
    fn an_event_for_a_missing_host_is_refused() {
        let e = err(&GOOD.replace("down_for = \"10s\"", "down_for = \"10s\"\nhost = 3"));
        assert_eq!(e.field.as_deref(), Some("event[0].host"), "{e}");
    }

    #[test]
    fn the_relay_is_the_host_after_the_app_hosts() {
        let text = format!(
            "{GOOD}\n[[event]]\nat = \"40m\"\nkind = \"crash\"\nhost = \"relay\"\n\n[relay]\nenabled = true\n"
        );
        let s = parse("s.toml", &text).unwrap();
        assert_eq!(s.relay_host(), Some(1));
        assert_eq!(s.spool_hosts(), 1);
        assert_eq!(s.events[1].hosts, vec![1]);
        assert_eq!(s.relay.unwrap().retry_after, Duration::from_secs(1));
        assert_eq!(parse("s.toml", GOOD).unwrap().relay, None);
    }

    #[test]
    fn a_relay_event_needs_the_relay_and_app_hosts_have_no_disk_under_it() {
        let e = err(&GOOD.replace("down_for = \"10s\"", "down_for = \"10s\"\nhost = \"relay\""));
        assert_eq!(e.field.as_deref(), Some("event[0].host"), "{e}");
        assert!(e.to_string().contains("[relay] enabled = true"), "{e}");
        let at_disk_op = GOOD.replace("at = \"30m\"", "after_disk_ops = 100");
        let e = err(&format!("{at_disk_op}\n[relay]\nenabled = true\n"));
        assert_eq!(e.field.as_deref(), Some("event[0].after_disk_ops"), "{e}");
        let e = err(&format!("{GOOD}\n[relay]\nretry_after = \"2s\"\n"));
        assert_eq!(e.field.as_deref(), Some("relay"), "{e}");
        assert!(e.line.is_some(), "{e}");
    }

    #[test]
    fn log_uniform_mean_is_between_the_bounds() {
        let mean = SizeDist::LogUniform {
            min: 256,
            max: 4096,
        }
        .mean();
        assert!((1300.0..1400.0).contains(&mean), "{mean}");
        assert_eq!(SizeDist::Fixed(10).mean(), 10.0);
    }
}
