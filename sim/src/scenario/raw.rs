//! The scenario file as written (serde, `deny_unknown_fields`), then checked into a
//! [`Scenario`]: every bound and probability, each error naming its field.

use std::time::{Duration, SystemTime};

use bytesize::ByteSize;
use fake_gcs::FaultPlan;
use serde::Deserialize;
use spool::{BackoffConfig, DrainerConfig, Jitter, SpoolConfig, UploaderConfig};

use super::*;

fn default_tick() -> Duration {
    Duration::from_millis(10)
}

fn default_sample() -> Duration {
    Duration::from_secs(1)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
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
    #[serde(default)]
    overwrites: f64,
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
    after_disk_op: Option<String>,
    nth: Option<u64>,
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
    reads_per_write: Option<f64>,
    lists_per_write: Option<f64>,
    deletes_per_write: Option<f64>,
}

type Checked<T> = Result<T, (String, String)>;

/// The most reads (or lists) through the relay per write a scenario may ask for.
const MAX_READS_PER_WRITE: f64 = 10.0;

fn ensure(ok: bool, field: &str, message: impl Into<String>) -> Checked<()> {
    if ok {
        Ok(())
    } else {
        Err((field.to_string(), message.into()))
    }
}

/// Overwrites are judged by the order of each name's writes, which the checker
/// does not (yet) combine with another writer taking names first, poison names, or
/// reads, lists and deletes through the relay (whose judge expects one write a name).
fn overwrites_alone(workload: &Workload, relay: Option<&RelayOptions>) -> Checked<()> {
    if workload.overwrites == 0.0 {
        return Ok(());
    }
    let reading = relay.is_some_and(|r| {
        r.reads_per_write > 0.0 || r.lists_per_write > 0.0 || r.deletes_per_write > 0.0
    });
    for (other, on) in [
        ("workload.conflicts", workload.conflicts > 0.0),
        ("workload.poison", workload.poison > 0.0),
        (
            "relay.reads_per_write, lists_per_write or deletes_per_write",
            reading,
        ),
    ] {
        ensure(
            !on,
            "workload.overwrites",
            format!("cannot be combined with {other} yet"),
        )?;
    }
    Ok(())
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
    pub(super) fn check(self, text: &str) -> Checked<Scenario> {
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
        let (faults, fault_shapes) = faults(&self.faults, self.capacity.as_ref(), start)?;
        let relay = self.relay.check()?;
        overwrites_alone(&workload, relay.as_ref())?;
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
            fault_shapes,
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
            overwrites: probability(self.overwrites, "workload.overwrites")?,
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
            ..default
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
        let given = self.retry_after.is_some()
            || self.shutdown_grace.is_some()
            || self.reads_per_write.is_some()
            || self.lists_per_write.is_some()
            || self.deletes_per_write.is_some();
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
            reads_per_write: self.reads_per_write.unwrap_or(0.0),
            lists_per_write: self.lists_per_write.unwrap_or(0.0),
            deletes_per_write: self.deletes_per_write.unwrap_or(0.0),
        };
        ensure(
            !options.shutdown_grace.is_zero(),
            "relay.shutdown_grace",
            "must be longer than zero",
        )?;
        for (field, per_write) in [
            ("relay.reads_per_write", options.reads_per_write),
            ("relay.lists_per_write", options.lists_per_write),
            ("relay.deletes_per_write", options.deletes_per_write),
        ] {
            ensure(
                (0.0..=MAX_READS_PER_WRITE).contains(&per_write),
                field,
                format!("must be from 0 to {MAX_READS_PER_WRITE} (got {per_write})"),
            )?;
        }
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
        let when = self.when(&field, start, duration)?;
        let disk_field = match when {
            When::AfterDiskOp { .. } => field("after_disk_op"),
            _ => field("after_disk_ops"),
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
            &disk_field,
            "only a crash (power loss) can happen at a disk operation",
        )?;
        ensure(
            matches!(when, When::At(_)) || !relay || hosts == [app_hosts],
            &disk_field,
            "with the relay on, app hosts keep no spool and their disks see no operation: \
             crash the relay (host = \"relay\") at a disk operation",
        )?;
        Ok(Event {
            at: match when {
                When::At(at) => at,
                When::AfterDiskOps(_) | When::AfterDiskOp { .. } => Duration::MAX,
            },
            when,
            kind,
            hosts,
            down_for: self.down_for.unwrap_or(Duration::ZERO),
        })
    }

    /// When the event happens: exactly one of `at`, `after_disk_ops` and
    /// `after_disk_op` (with `nth`, only there).
    fn when(
        &self,
        field: &dyn Fn(&str) -> String,
        start: SystemTime,
        duration: Duration,
    ) -> Checked<When> {
        ensure(
            self.nth.is_none() || self.after_disk_op.is_some(),
            &field("nth"),
            "counts operations of the kind after_disk_op names: give after_disk_op too",
        )?;
        match (&self.at, self.after_disk_ops, &self.after_disk_op) {
            (Some(at), None, None) => {
                let at = at.offset(start).map_err(|m| (field("at"), m))?;
                ensure(
                    at < duration,
                    &field("at"),
                    "is at or after the end of the scenario",
                )?;
                Ok(When::At(at))
            }
            (None, Some(ops), None) => {
                ensure(ops > 0, &field("after_disk_ops"), "must be at least 1")?;
                Ok(When::AfterDiskOps(ops))
            }
            (None, None, Some(name)) => {
                let kind = OpKind::parse(name).ok_or_else(|| {
                    (
                        field("after_disk_op"),
                        format!(
                            "unknown disk operation {name:?}; expected one of {}",
                            OpKind::names()
                        ),
                    )
                })?;
                let nth = self.nth.unwrap_or(1);
                ensure(nth > 0, &field("nth"), "must be at least 1")?;
                Ok(When::AfterDiskOp { kind, nth })
            }
            (at, ops, _) => {
                // Name a key that is there, so that the error has a line.
                let name = if at.is_none() && ops.is_some() {
                    "after_disk_ops"
                } else {
                    "at"
                };
                Err((
                    field(name),
                    "give exactly one of at, after_disk_ops and after_disk_op".to_string(),
                ))
            }
        }
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

/// Converts `[[fault]]` tables (whose `from`/`until` may be RFC 3339 times, `from`
/// and `length` distributions) and the `[capacity]` table into the fake's
/// [`FaultPlan`], with offsets from `start`, and each window's shape. A window
/// drawn per seed holds its typical value (the median) until a run draws its own.
fn faults(
    raw: &[toml::Table],
    capacity: Option<&toml::Table>,
    start: SystemTime,
) -> Checked<(FaultPlan, Vec<WindowShape>)> {
    let mut windows = Vec::with_capacity(raw.len());
    let mut shapes = Vec::with_capacity(raw.len());
    for (i, table) in raw.iter().enumerate() {
        let mut table = table.clone();
        let shape = window_shape(i, &mut table)?;
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
        if let Some(length) = &shape.length {
            let from = table
                .get("from")
                .and_then(toml::Value::as_str)
                .and_then(|ms| humantime::parse_duration(ms).ok())
                .unwrap_or_default();
            let until = from + length.typical();
            table.insert("until".into(), format!("{}ms", until.as_millis()).into());
        }
        windows.push(toml::Value::Table(table));
        shapes.push(shape);
    }
    let mut plan = toml::Table::new();
    plan.insert("fault".into(), toml::Value::Array(windows));
    if let Some(capacity) = capacity {
        plan.insert("capacity".into(), toml::Value::Table(capacity.clone()));
    }
    let text = toml::to_string(&plan).map_err(|e| ("fault".to_string(), e.to_string()))?;
    let plan = FaultPlan::from_toml(&text).map_err(|e| (e.field.clone(), e.message.clone()))?;
    Ok((plan, shapes))
}

/// Takes a window's `length` and a `from` written as a distribution out of its
/// table (which then holds the typical start), as its shape.
fn window_shape(i: usize, table: &mut toml::Table) -> Checked<WindowShape> {
    let mut shape = WindowShape::default();
    if let Some(toml::Value::Table(from)) = table.get("from") {
        let drawn = Drawn::parse(from, &format!("fault[{i}].from"))?;
        table.insert(
            "from".into(),
            format!("{}ms", drawn.typical().as_millis()).into(),
        );
        shape.from = Some(drawn);
    }
    if let Some(length) = table.remove("length") {
        ensure(
            !table.contains_key("until"),
            &format!("fault[{i}].length"),
            "give until or length, not both",
        )?;
        let field = format!("fault[{i}].length");
        shape.length = Some(match length {
            toml::Value::Table(t) => Drawn::parse(&t, &field)?,
            toml::Value::String(text) => {
                let fixed = humantime::parse_duration(&text)
                    .map_err(|e| (field.clone(), format!("{text:?}: {e}")))?;
                Drawn::OneOf(vec![fixed])
            }
            _ => return Err((field, "expected a duration or a distribution".into())),
        });
    }
    Ok(shape)
}
