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
//! overwrites = 0.0               # share of writes that rewrite one of their host's last 8 names
//!                                # (then every write overwrites, without a precondition)
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
//! # from = { median = "2h", p99 = "20h" }   # or drawn per seed: lognormal by median and p99,
//! # length = { median = "5h", p99 = "18h" } # instead of until; or an empirical list:
//! # length = { one_of = ["5h41m", "12h30m"] } # one drawn (see `shape.rs`)
//!
//! [[event]]
//! at = "5s"                      # or an RFC 3339 time; or instead:
//! # after_disk_ops = 30000       # power lost just before the host's 30,000th disk
//! #                              # operation (crash only); or instead:
//! # after_disk_op = "rename"     # power lost right after the host's nth disk operation
//! # nth = 3                      # of this kind (crash only; nth defaults to 1): mkdir,
//! #                              # create, write, sync_file, rename, sync_dir, unlink,
//! #                              # readdir, open, read, lock (counted over the run)
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

mod error;
mod raw;
mod shape;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fake_gcs::FaultPlan;
use spool::{DrainerConfig, SpoolConfig, UploaderConfig};

pub use crate::simdisk::{DiskConfig, FaultRates, OpKind};
pub use error::{ScenarioError, locate};
pub use shape::{Drawn, WindowShape};

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
    /// What the fake Cloud Storage does over time, with offsets from t = 0. A
    /// window drawn per seed holds its typical start and length until
    /// [`Scenario::draw_fault_windows`] draws the seed's.
    pub faults: FaultPlan,
    /// How each fault window's start and length are drawn per seed (in `faults`'
    /// order).
    pub fault_shapes: Vec<WindowShape>,
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
    /// Share of writes that take again the name of one of their host's last eight
    /// writes; in a scenario with any, every write is unconditional (overwrites).
    pub overwrites: f64,
}

impl Workload {
    /// Writes a host issues, with room for chance (the mean of its Poisson count
    /// and four standard deviations), up to a million: what its ledger reserves.
    pub fn expected_writes_per_host(&self) -> usize {
        let mean = self.rate * self.stop_at.as_secs_f64();
        let expected = mean + 4.0 * mean.sqrt();
        if expected.is_finite() {
            (expected.ceil() as usize).min(1 << 20)
        } else {
            0
        }
    }
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
    /// Right after the host's n-th disk operation of one kind (counted over the
    /// run): a power loss right after the operation whose loss matters.
    AfterDiskOp {
        /// The kind of operation.
        kind: OpKind,
        /// Which one of that kind, from 1.
        nth: u64,
    },
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelayOptions {
    /// `Retry-After` on a 503 (spool full). Default 1 s.
    pub retry_after: Duration,
    /// How long requests in flight may take to finish when the relay stops
    /// gracefully (a deploy, the end of the run). Default 30 s.
    pub shutdown_grace: Duration,
    /// Reads through the relay per write, on average: each a `GET` of one of the
    /// host's last 100 writes. Default 0.
    pub reads_per_write: f64,
    /// Lists through the relay per write, on average: each of everything under the
    /// host's prefix (`h0/`), every page. Default 0.
    pub lists_per_write: f64,
    /// Deletes through the relay per write, on average: each of one of the host's
    /// last 100 writes acknowledged and not yet deleted. Default 0.
    pub deletes_per_write: f64,
}

impl RelayOptions {
    /// Whether the app hosts read, list or delete through the relay besides
    /// writing.
    pub fn reads_through(&self) -> bool {
        let per_write = [
            self.reads_per_write,
            self.lists_per_write,
            self.deletes_per_write,
        ];
        per_write.iter().any(|&n| n > 0.0)
    }
}

/// Network latency between hosts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Network {
    /// Smallest one-way message latency.
    pub min_latency: Duration,
    /// Largest one-way message latency.
    pub max_latency: Duration,
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
    let raw: raw::RawScenario = toml::from_str(text).map_err(|e| ScenarioError {
        file: file.to_string(),
        line: e.span().map(|s| error::line_at(text, s.start)),
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

impl Scenario {
    /// Draws this scenario's seed's start and length for every fault window that is
    /// a distribution; a scenario without distributions is left as it is.
    pub fn draw_fault_windows(&mut self) {
        for (i, shape) in self.fault_shapes.iter().enumerate() {
            if !shape.is_drawn() {
                continue;
            }
            let window = &mut self.faults.windows[i];
            (window.from, window.until) = shape.draw(self.seed, i, (window.from, window.until));
        }
    }

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
