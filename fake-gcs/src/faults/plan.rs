//! The fault plan: what the fake's backend does over time, as data. Windows of
//! outcome mixes and a capacity model, read from TOML and checked field by field.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytesize::ByteSize;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::wire::Operation;

/// A schedule of fault windows and an optional capacity model: what the fake's
/// backend does over time, all drawn from one seeded RNG. Read it from TOML with
/// [`from_toml`](FaultPlan::from_toml), which checks it and names a bad field
/// ([`FakeGcs::new`](crate::FakeGcs::new) checks a plan built in code).
///
/// What it injects, and why a client must survive each (Cloud Storage did all of
/// these on 2026-10-08/09):
///
/// | outcome | the client sees | why it matters |
/// |---|---|---|
/// | `503`, `500`, `429`, `408` | that status with Cloud Storage's error body | retryable per Google's guidance |
/// | `hang` | nothing until it gives up (closes the connection) or `hang_for` passes; then the connection drops | only a client timeout ends it |
/// | `reset` | the connection drops without a response | a transport error, not a status |
/// | `stall` | the server reads `stall_after` bytes of the body (or sends that much of a download), then hangs like `hang` | half-done transfers |
/// | `slow` | success after a latency drawn log-uniformly from `slow` | tail latency; the write does land |
/// | `commit_then_503` | 503, but the object was written | the retry must accept 412 as success |
/// | `commit_then_hang` | nothing (as `hang`), but the object was written | a timeout is not a failure |
/// | shed (capacity) | 503 once the token bucket is empty | synchronized retries hurt, jitter helps |
///
/// Determinism: one [`ChaCha8Rng`] seeded from the fake's seed makes every draw, in
/// request-arrival order. The same seed and the same request sequence give the same
/// answers.
///
/// ## The plan file
///
/// ```toml
/// [[fault]]
/// name = "us-central1 write outage"   # optional, for reports
/// from = "2s"           # offset from t = 0 (default 0s)
/// until = "8s"          # exclusive end (default: never)
/// ops = "writes"        # writes | reads | all (default writes)
/// share = 1.0           # fraction of matching requests the window takes (default 1.0)
/// mix = { "503" = 0.5, hang = 0.3 }   # outcome -> probability, sum <= 1; the rest succeed
/// hang_for = "10m"      # how long hang/stall/commit_then_hang hold a request (default 10m)
/// slow = { min = "500ms", max = "20s" }   # latency of `slow` (default 500ms..20s)
/// stall_after = "16KiB" # bytes moved before a `stall` (default 16KiB)
/// capacity_rps = 100    # optional: the backend takes this many requests/s of the
///                       # window's share; past that it sheds with 503
///
/// [capacity]            # optional, for all requests at all times
/// requests_per_second = 400
/// burst = 400           # bucket size (default: one second of requests)
/// ```
///
/// Windows are consulted in file order; the first one that is active, matches the
/// operation and takes the request (by `share`) decides it. The global capacity is
/// checked before any window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultPlan {
    /// The windows, in priority order (`[[fault]]` in TOML).
    #[serde(default, rename = "fault", skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<FaultWindow>,
    /// The backend's capacity at all times, if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<RequestCapacity>,
    /// Object names the store refuses for good (`[[refuse]]` in TOML): poison
    /// objects, such as a name the service account may not write.
    #[serde(default, rename = "refuse", skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<Refusal>,
}

/// Writes of objects whose name starts with `prefix` are refused with `status`
/// whenever no fault window took the request (an outage answers before permissions
/// are checked). Matched against the object name in the URL: XML API paths and the
/// JSON API's `name=` parameter.
///
/// ```toml
/// [[refuse]]
/// prefix = "poison/"
/// status = 403        # default 403; any 4xx
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// Object-name prefix.
    pub prefix: String,
    /// The permanent error status. Default 403.
    #[serde(default = "default_refusal_status")]
    pub status: u16,
}

fn default_refusal_status() -> u16 {
    403
}

/// One period in which some requests fail. See [`FaultPlan`] for the TOML form and
/// the meaning of each outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultWindow {
    /// A label for logs and reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Start, as an offset from t = 0. Default 0s.
    #[serde(default, with = "humantime_serde")]
    pub from: Duration,
    /// Exclusive end, as an offset from t = 0. Default: the window never ends.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub until: Option<Duration>,
    /// Which operations the window affects. Default `writes`.
    #[serde(default)]
    pub ops: Ops,
    /// Fraction of matching requests the window takes, in [0, 1] (a zone-only outage
    /// takes about a third). Default 1.0.
    #[serde(default = "default_share")]
    pub share: f64,
    /// Outcome -> probability for the requests the window takes; the probabilities
    /// sum to at most 1 and the remainder succeed normally. Default: empty (all
    /// succeed, which with `capacity_rps` models a capacity drop alone).
    #[serde(default)]
    pub mix: BTreeMap<Outcome, f64>,
    /// How long `hang`, `stall` and `commit_then_hang` hold a request before the
    /// server drops the connection. Bounded so held requests do not pile up.
    /// Default 10m.
    #[serde(default = "default_hang_for", with = "humantime_serde")]
    pub hang_for: Duration,
    /// Latency of `slow` successes. Default 500ms..20s.
    #[serde(default)]
    pub slow: SlowLatency,
    /// Bytes of the request body read (or of a download sent) before a `stall`
    /// holds. Default 16KiB.
    #[serde(default = "default_stall_after")]
    pub stall_after: ByteSize,
    /// Requests per second the backend can take of this window's share while the
    /// window is active (token bucket of one second's size); the excess is shed with
    /// 503. Default: unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_rps: Option<f64>,
}

impl Default for FaultWindow {
    fn default() -> Self {
        Self {
            name: None,
            from: Duration::ZERO,
            until: None,
            ops: Ops::default(),
            share: default_share(),
            mix: BTreeMap::new(),
            hang_for: default_hang_for(),
            slow: SlowLatency::default(),
            stall_after: default_stall_after(),
            capacity_rps: None,
        }
    }
}

fn default_share() -> f64 {
    1.0
}

fn default_hang_for() -> Duration {
    Duration::from_secs(600)
}

fn default_stall_after() -> ByteSize {
    ByteSize::kib(16)
}

/// Which operations a window affects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ops {
    /// Uploads, deletes and composes (`storage.objects.insert`,
    /// `storage.objects.delete`, `storage.objects.compose`).
    #[default]
    Writes,
    /// Everything else: gets, lists, bucket metadata.
    Reads,
    /// Every operation.
    All,
}

impl Ops {
    pub(super) fn matches(self, op: Operation) -> bool {
        match self {
            Ops::Writes => op.is_write(),
            Ops::Reads => !op.is_write(),
            Ops::All => true,
        }
    }
}

/// The latency distribution of `slow` successes: log-uniform in [min, max].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowLatency {
    /// Shortest latency. Default 500ms.
    #[serde(with = "humantime_serde")]
    pub min: Duration,
    /// Longest latency. Default 20s.
    #[serde(with = "humantime_serde")]
    pub max: Duration,
}

impl Default for SlowLatency {
    fn default() -> Self {
        Self {
            min: Duration::from_millis(500),
            max: Duration::from_secs(20),
        }
    }
}

impl SlowLatency {
    pub(super) fn sample(&self, rng: &mut ChaCha8Rng) -> Duration {
        let u: f64 = rng.random();
        if self.max <= self.min {
            return self.min;
        }
        let (lo, hi) = (self.min.as_secs_f64().ln(), self.max.as_secs_f64().ln());
        Duration::from_secs_f64((lo + u * (hi - lo)).exp()).clamp(self.min, self.max)
    }
}

/// The backend's capacity in requests (`[capacity]` in TOML): a token bucket refilled
/// by simulated time. A request that finds it empty is shed with 503 (counted as
/// `shed`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestCapacity {
    /// Sustained requests per second.
    pub requests_per_second: f64,
    /// Bucket size, in requests. Default: one second of requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<f64>,
}

/// What a window does to a request it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// `503` Service Unavailable.
    Status503,
    /// `429` Too Many Requests.
    Status429,
    /// `500` Internal Server Error.
    Status500,
    /// `408` Request Timeout.
    Status408,
    /// No answer for `hang_for`, then the connection drops; the body is taken in
    /// meanwhile, and a client that goes away ends the hang.
    Hang,
    /// The connection drops at once, without a response.
    Reset,
    /// `stall_after` bytes move, then the request hangs like `Hang`.
    Stall,
    /// Success after a latency drawn from `slow`.
    Slow,
    /// The request takes effect, then the client gets 503.
    CommitThen503,
    /// The request takes effect, then the client gets nothing (as `Hang`).
    CommitThenHang,
}

impl Outcome {
    /// Every outcome, in order.
    pub(crate) const ALL: [Outcome; 10] = [
        Outcome::Status503,
        Outcome::Status429,
        Outcome::Status500,
        Outcome::Status408,
        Outcome::Hang,
        Outcome::Reset,
        Outcome::Stall,
        Outcome::Slow,
        Outcome::CommitThen503,
        Outcome::CommitThenHang,
    ];

    /// The name used in plan files, logs and statistics.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Status503 => "503",
            Outcome::Status429 => "429",
            Outcome::Status500 => "500",
            Outcome::Status408 => "408",
            Outcome::Hang => "hang",
            Outcome::Reset => "reset",
            Outcome::Stall => "stall",
            Outcome::Slow => "slow",
            Outcome::CommitThen503 => "commit_then_503",
            Outcome::CommitThenHang => "commit_then_hang",
        }
    }

    fn expected() -> String {
        Outcome::ALL.map(Outcome::as_str).join(", ")
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Outcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Outcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown outcome {s:?}; expected one of {}",
                    Outcome::expected()
                )
            })
    }
}

impl Serialize for Outcome {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A fault plan that is not valid: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PlanError {
    /// The offending field, e.g. `fault[2].mix`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl PlanError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl FaultPlan {
    /// A plan without faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses and validates a plan file. Errors name the field and window index
    /// (`fault[1].mix: probabilities sum to 1.3; ...`).
    pub fn from_toml(text: &str) -> Result<FaultPlan, PlanError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| PlanError::new("(toml)", e.to_string()))?;
        Self::from_table(table)
    }

    /// Parses and validates a plan written as JSON, with the keys of the TOML
    /// form: `{"fault": [{"until": "30s", "mix": {"503": 1.0}}], "capacity": {...},
    /// "refuse": [...]}`. Errors name the field as [`from_toml`](Self::from_toml)
    /// does.
    pub fn from_json(text: &[u8]) -> Result<FaultPlan, PlanError> {
        let table: toml::Table = serde_json::from_slice(text)
            .map_err(|e| PlanError::new("(json)", format!("not a JSON object: {e}")))?;
        Self::from_table(table)
    }

    fn from_table(table: toml::Table) -> Result<FaultPlan, PlanError> {
        let mut plan = FaultPlan::default();
        for (key, value) in table {
            match key.as_str() {
                "fault" => {
                    let toml::Value::Array(windows) = value else {
                        return Err(PlanError::new("fault", "must be [[fault]] tables"));
                    };
                    for (i, window) in windows.into_iter().enumerate() {
                        plan.windows.push(parse_window(i, window)?);
                    }
                }
                "capacity" => {
                    let capacity = value
                        .try_into()
                        .map_err(|e: toml::de::Error| PlanError::new("capacity", e.message()))?;
                    plan.capacity = Some(capacity);
                }
                "refuse" => {
                    let toml::Value::Array(refusals) = value else {
                        return Err(PlanError::new("refuse", "must be [[refuse]] tables"));
                    };
                    for (i, refusal) in refusals.into_iter().enumerate() {
                        let refusal = refusal.try_into().map_err(|e: toml::de::Error| {
                            PlanError::new(format!("refuse[{i}]"), e.message())
                        })?;
                        plan.refusals.push(refusal);
                    }
                }
                other => {
                    return Err(PlanError::new(
                        other,
                        "unknown key; a fault plan has [[fault]] tables, a [capacity] table \
                         and [[refuse]] tables",
                    ));
                }
            }
        }
        plan.validate()?;
        Ok(plan)
    }

    /// Checks every field; the error names the first bad one.
    pub(crate) fn validate(&self) -> Result<(), PlanError> {
        for (i, window) in self.windows.iter().enumerate() {
            window.validate(&format!("fault[{i}]"))?;
        }
        if let Some(capacity) = &self.capacity {
            capacity.validate("capacity")?;
        }
        for (i, refusal) in self.refusals.iter().enumerate() {
            if refusal.prefix.is_empty() {
                return Err(PlanError::new(
                    format!("refuse[{i}].prefix"),
                    "must not be empty (it would refuse every write)",
                ));
            }
            if !(400..500).contains(&refusal.status)
                || refusal.status == 408
                || refusal.status == 429
            {
                return Err(PlanError::new(
                    format!("refuse[{i}].status"),
                    format!(
                        "{} is not a permanent client error (4xx other than 408 and 429)",
                        refusal.status
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn parse_window(i: usize, value: toml::Value) -> Result<FaultWindow, PlanError> {
    let field = format!("fault[{i}]");
    let toml::Value::Table(mut table) = value else {
        return Err(PlanError::new(field, "must be a table"));
    };
    // `mix` is parsed here so an unknown outcome is reported as `fault[i].mix`.
    let mix = table.remove("mix");
    let mut window: FaultWindow = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| PlanError::new(&field, e.message()))?;
    if let Some(mix) = mix {
        let field = format!("{field}.mix");
        let toml::Value::Table(mix) = mix else {
            return Err(PlanError::new(
                field,
                "must be a table of outcome = probability",
            ));
        };
        for (outcome, p) in mix {
            let outcome: Outcome = outcome.parse().map_err(|e| PlanError::new(&field, e))?;
            let p = match p {
                toml::Value::Float(p) => p,
                toml::Value::Integer(p) => p as f64,
                other => {
                    return Err(PlanError::new(
                        format!("{field}.{outcome}"),
                        format!("probability must be a number, got {other}"),
                    ));
                }
            };
            window.mix.insert(outcome, p);
        }
    }
    Ok(window)
}

impl FaultWindow {
    /// Whether the window is active at `t`.
    pub(crate) fn is_active(&self, t: Duration) -> bool {
        t >= self.from && self.until.is_none_or(|until| t < until)
    }

    fn validate(&self, at: &str) -> Result<(), PlanError> {
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        if let Some(until) = self.until
            && until <= self.from
        {
            return Err(PlanError::new(
                format!("{at}.until"),
                format!("{} is not after from ({})", fmt(until), fmt(self.from)),
            ));
        }
        if !(0.0..=1.0).contains(&self.share) {
            return Err(PlanError::new(
                format!("{at}.share"),
                format!("{} is not between 0 and 1", self.share),
            ));
        }
        for (outcome, p) in &self.mix {
            if !(0.0..=1.0).contains(p) {
                return Err(PlanError::new(
                    format!("{at}.mix.{outcome}"),
                    format!("probability {p} is not between 0 and 1"),
                ));
            }
        }
        // Rounded to nine places so 0.7 + 0.6 reads 1.3.
        let sum = (self.mix.values().sum::<f64>() * 1e9).round() / 1e9;
        if sum > 1.0 {
            return Err(PlanError::new(
                format!("{at}.mix"),
                format!("probabilities sum to {sum}; at most 1 (the rest succeed)"),
            ));
        }
        if self.hang_for.is_zero() {
            return Err(PlanError::new(
                format!("{at}.hang_for"),
                "must be more than 0",
            ));
        }
        if self.slow.min.is_zero() || self.slow.min > self.slow.max {
            return Err(PlanError::new(
                format!("{at}.slow"),
                format!(
                    "min ({}) must be more than 0 and at most max ({})",
                    fmt(self.slow.min),
                    fmt(self.slow.max)
                ),
            ));
        }
        if let Some(rps) = self.capacity_rps
            && !(rps.is_finite() && rps > 0.0)
        {
            return Err(PlanError::new(
                format!("{at}.capacity_rps"),
                format!("{rps} is not a positive number of requests per second"),
            ));
        }
        Ok(())
    }
}

impl RequestCapacity {
    fn validate(&self, at: &str) -> Result<(), PlanError> {
        let rps = self.requests_per_second;
        if !(rps.is_finite() && rps > 0.0) {
            return Err(PlanError::new(
                format!("{at}.requests_per_second"),
                format!("{rps} is not a positive number"),
            ));
        }
        if let Some(burst) = self.burst
            && !(burst.is_finite() && burst >= 1.0)
        {
            return Err(PlanError::new(
                format!("{at}.burst"),
                format!("{burst} is less than one request"),
            ));
        }
        Ok(())
    }
}
