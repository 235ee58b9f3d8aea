//! The fault model: a schedule of windows, each a mix of outcomes with
//! probabilities, plus a capacity model, all drawn from one seeded RNG; see
//! [`FaultPlan`].

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use bytesize::ByteSize;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::retry_test::Instruction;
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
    fn matches(self, op: Operation) -> bool {
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
    fn sample(&self, rng: &mut ChaCha8Rng) -> Duration {
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
    /// No answer for `hang_for`, then the connection drops.
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
    /// A full token bucket at `now`.
    fn bucket(&self, now: Duration) -> TokenBucket {
        let burst = self.burst.unwrap_or(self.requests_per_second).max(1.0);
        TokenBucket::new(self.requests_per_second, burst, now)
    }

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

/// A fault the fake injected into one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The capacity model shed the request with 503: the global `[capacity]`
    /// (`window: None`) or a window's `capacity_rps`.
    Shed {
        /// The window whose capacity ran out, if not the global one.
        window: Option<usize>,
    },
    /// A window's outcome.
    Window {
        /// Index of the window in the plan.
        window: usize,
        /// What it did.
        outcome: Outcome,
    },
    /// A storage-testbench instruction (an `x-retry-test-id` test or
    /// [`FakeGcs::script`](crate::FakeGcs::script)).
    Scripted(Instruction),
    /// A `[[refuse]]` rule refused the object for good.
    Refused {
        /// Index of the rule in the plan.
        rule: usize,
    },
}

impl Fault {
    /// A short label for logs and statistics: `shed`, `503`, `hang`,
    /// `return-reset-connection`, ...
    pub fn label(&self) -> String {
        match self {
            Fault::Shed { .. } => "shed".into(),
            Fault::Window { outcome, .. } => outcome.as_str().into(),
            Fault::Scripted(instruction) => instruction.to_string(),
            Fault::Refused { .. } => "refused".into(),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// How the server carries out a fault (crate-internal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Read the whole request body, then answer this status.
    Respond(u16),
    /// Requests with a body: read this many bytes, then answer the status. Requests
    /// without one: break the response stream after this many bytes.
    RespondAfter { status: u16, after: u64 },
    /// Drop the connection without reading further or answering.
    Reset,
    /// Hold the request, then drop the connection.
    Hang(Duration),
    /// Move `after` bytes (request body, or response body for downloads), hold for
    /// `hold`, then drop (`resume: false`) or carry on normally (`resume: true`).
    Stall {
        after: u64,
        hold: Duration,
        resume: bool,
    },
    /// Requests with a body: read `after` bytes (all when `None`) and drop the
    /// connection. Without: send `after` bytes of the response (half when `None`),
    /// then drop.
    BrokenStream { after: Option<u64> },
    /// Wait, then serve normally.
    Slow(Duration),
    /// Serve normally, then answer 503 instead.
    CommitThen503,
    /// Serve normally, then hold and drop the connection.
    CommitThenHang(Duration),
}

impl Action {
    /// True when the request's object is stored (a slow or stalled-then-resumed
    /// success, or a commit-then-fail).
    fn commits(&self) -> bool {
        matches!(
            self,
            Action::Slow(_)
                | Action::CommitThen503
                | Action::CommitThenHang(_)
                | Action::Stall { resume: true, .. }
        )
    }

    pub(crate) fn from_instruction(instruction: &Instruction) -> Action {
        match *instruction {
            Instruction::Return(status) => Action::Respond(status),
            Instruction::ResetConnection => Action::Reset,
            Instruction::BrokenStream => Action::BrokenStream { after: None },
            Instruction::ReturnAfter {
                status,
                after_bytes,
            } => Action::RespondAfter {
                status,
                after: after_bytes,
            },
            Instruction::BrokenStreamAfter { after_bytes } => Action::BrokenStream {
                after: Some(after_bytes),
            },
            Instruction::StallAfter { hold, after_bytes } => Action::Stall {
                after: after_bytes,
                hold,
                resume: true,
            },
        }
    }
}

/// A token bucket on simulated time.
#[derive(Debug, Clone)]
struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Duration,
}

impl TokenBucket {
    fn new(rate: f64, burst: f64, now: Duration) -> Self {
        Self {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes one token if there is one.
    fn try_take(&mut self, now: Duration) -> bool {
        let dt = now.saturating_sub(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        self.last = self.last.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The plan, compiled: decides each request's fate with the seeded RNG.
#[derive(Debug)]
pub(crate) struct FaultEngine {
    plan: FaultPlan,
    rng: ChaCha8Rng,
    global: Option<TokenBucket>,
    window_buckets: Vec<Option<TokenBucket>>,
}

impl FaultEngine {
    /// Compiles a validated plan.
    pub(crate) fn new(plan: FaultPlan, seed: u64) -> Self {
        let global = plan.capacity.map(|c| c.bucket(Duration::ZERO));
        let window_buckets = vec![None; plan.windows.len()];
        Self {
            plan,
            rng: ChaCha8Rng::seed_from_u64(seed),
            global,
            window_buckets,
        }
    }

    /// The plan in force.
    pub(crate) fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// Adds a validated `plan` whose offsets count from `now`: its windows go
    /// first, its refusals after those in force, its capacity (full at `now`)
    /// replaces the one in force.
    pub(crate) fn add(&mut self, plan: FaultPlan, now: Duration) {
        let windows = plan.windows.into_iter().map(|w| FaultWindow {
            from: w.from + now,
            until: w.until.map(|until| until + now),
            ..w
        });
        let added: Vec<FaultWindow> = windows.collect();
        self.window_buckets
            .splice(0..0, std::iter::repeat_n(None, added.len()));
        self.plan.windows.splice(0..0, added);
        self.plan.refusals.extend(plan.refusals);
        if let Some(capacity) = plan.capacity {
            self.global = Some(capacity.bucket(now));
            self.plan.capacity = Some(capacity);
        }
    }

    /// No windows, refusals or capacity any more; the RNG carries on.
    pub(crate) fn clear(&mut self) {
        self.plan = FaultPlan::none();
        self.global = None;
        self.window_buckets.clear();
    }

    /// Decides what happens to a request for `op` arriving at `now`: `None` to
    /// serve it normally.
    pub(crate) fn decide(
        &mut self,
        op: Operation,
        object: Option<&str>,
        now: Duration,
    ) -> Option<(Fault, Action)> {
        let window = self.decide_window(op, now);
        // An outage can answer before permissions are checked, but an outcome that
        // lands the object has passed them: a refused name is refused instead.
        if window.as_ref().is_some_and(|(_, action)| !action.commits()) {
            return window;
        }
        let refusal = object
            .filter(|_| Ops::Writes.matches(op))
            .and_then(|name| {
                self.plan
                    .refusals
                    .iter()
                    .enumerate()
                    .find(|(_, r)| name.starts_with(&r.prefix))
            })
            .map(|(i, r)| (Fault::Refused { rule: i }, Action::Respond(r.status)));
        refusal.or(window)
    }

    fn decide_window(&mut self, op: Operation, now: Duration) -> Option<(Fault, Action)> {
        if let Some(bucket) = &mut self.global
            && !bucket.try_take(now)
        {
            return Some((Fault::Shed { window: None }, Action::Respond(503)));
        }
        for (i, window) in self.plan.windows.iter().enumerate() {
            if !window.is_active(now) || !window.ops.matches(op) {
                continue;
            }
            let taken: f64 = self.rng.random();
            if taken >= window.share {
                continue;
            }
            if let Some(rps) = window.capacity_rps {
                let bucket = self.window_buckets[i]
                    .get_or_insert_with(|| TokenBucket::new(rps, rps.max(1.0), now));
                if !bucket.try_take(now) {
                    return Some((Fault::Shed { window: Some(i) }, Action::Respond(503)));
                }
            }
            let draw: f64 = self.rng.random();
            let mut cumulative = 0.0;
            for (&outcome, &p) in &window.mix {
                cumulative += p;
                if draw < cumulative {
                    let action = match outcome {
                        Outcome::Status503 => Action::Respond(503),
                        Outcome::Status429 => Action::Respond(429),
                        Outcome::Status500 => Action::Respond(500),
                        Outcome::Status408 => Action::Respond(408),
                        Outcome::Hang => Action::Hang(window.hang_for),
                        Outcome::Reset => Action::Reset,
                        Outcome::Stall => Action::Stall {
                            after: window.stall_after.as_u64(),
                            hold: window.hang_for,
                            resume: false,
                        },
                        Outcome::Slow => Action::Slow(window.slow.sample(&mut self.rng)),
                        Outcome::CommitThen503 => Action::CommitThen503,
                        Outcome::CommitThenHang => Action::CommitThenHang(window.hang_for),
                    };
                    return Some((Fault::Window { window: i, outcome }, action));
                }
            }
            return None;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
        [[fault]]
        name = "outage"
        from = "2s"
        until = "8s"
        ops = "writes"
        share = 0.5
        mix = { "503" = 0.5, hang = 0.25, slow = 0.25 }
        hang_for = "1m"
        slow = { min = "500ms", max = "20s" }
        stall_after = "64KiB"
        capacity_rps = 100

        [capacity]
        requests_per_second = 400
        burst = 800
    "#;

    #[test]
    fn the_documented_plan_parses() {
        let plan = FaultPlan::from_toml(EXAMPLE).unwrap();
        let w = &plan.windows[0];
        assert_eq!(w.name.as_deref(), Some("outage"));
        assert_eq!(
            (w.from, w.until),
            (Duration::from_secs(2), Some(Duration::from_secs(8)))
        );
        assert_eq!(w.share, 0.5);
        assert_eq!(w.mix[&Outcome::Status503], 0.5);
        assert_eq!(w.mix[&Outcome::Hang], 0.25);
        assert_eq!(w.hang_for, Duration::from_secs(60));
        assert_eq!(w.stall_after, ByteSize::kib(64));
        assert_eq!(w.capacity_rps, Some(100.0));
        assert_eq!(
            plan.capacity,
            Some(RequestCapacity {
                requests_per_second: 400.0,
                burst: Some(800.0)
            })
        );
        // The same plan through plain serde (as a scenario file embeds it).
        let via_serde: FaultPlan = toml::from_str(EXAMPLE).unwrap();
        assert_eq!(via_serde, plan);
        let window = FaultPlan::from_toml("[[fault]]\nmix = { reset = 1 }\n").unwrap();
        assert_eq!(
            window.windows[0],
            FaultWindow {
                mix: [(Outcome::Reset, 1.0)].into(),
                ..FaultWindow::default()
            }
        );
    }

    fn error(text: &str) -> String {
        FaultPlan::from_toml(text).unwrap_err().to_string()
    }

    #[test]
    fn a_wrong_key_is_named_with_its_window() {
        let e = error("[[fault]]\nmix = {}\n[[fault]]\nshar = 0.5\n");
        assert!(e.starts_with("fault[1]: unknown field `shar`"), "{e}");
        let e = error("[capacity]\nrps = 3\n");
        assert!(e.starts_with("capacity: unknown field `rps`"), "{e}");
        let e = error("[[faults]]\n");
        assert!(e.starts_with("faults: unknown key"), "{e}");
    }

    #[test]
    fn probabilities_that_sum_past_one_are_refused() {
        let e = error("[[fault]]\n[[fault]]\n[[fault]]\nmix = { \"503\" = 0.7, hang = 0.6 }\n");
        assert!(
            e.starts_with("fault[2].mix: probabilities sum to 1.3;"),
            "{e}"
        );
        let e = error("[[fault]]\nmix = { hang = -0.1 }\n");
        assert!(e.starts_with("fault[0].mix.hang: probability -0.1"), "{e}");
    }

    #[test]
    fn an_unknown_outcome_is_named_with_the_choices() {
        let e = error("[[fault]]\nmix = { \"504\" = 0.5 }\n");
        assert!(
            e.starts_with("fault[0].mix: unknown outcome \"504\""),
            "{e}"
        );
        assert!(e.contains("commit_then_503"), "{e}");
        // Plain serde (a scenario file) names it too.
        let e = toml::from_str::<FaultPlan>("[[fault]]\nmix = { \"504\" = 0.5 }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown outcome \"504\""), "{e}");
    }

    #[test]
    fn other_bad_values_name_their_field() {
        for (text, prefix) in [
            (
                "[[fault]]\nfrom = \"5s\"\nuntil = \"1s\"\n",
                "fault[0].until:",
            ),
            ("[[fault]]\nshare = 1.5\n", "fault[0].share:"),
            ("[[fault]]\nhang_for = \"0s\"\n", "fault[0].hang_for:"),
            (
                "[[fault]]\nslow = { min = \"2s\", max = \"1s\" }\n",
                "fault[0].slow:",
            ),
            ("[[fault]]\ncapacity_rps = 0\n", "fault[0].capacity_rps:"),
            (
                "[capacity]\nrequests_per_second = 0\n",
                "capacity.requests_per_second:",
            ),
            ("[[fault]]\nfrom = \"soon\"\n", "fault[0]:"),
        ] {
            let e = error(text);
            assert!(e.starts_with(prefix), "{text:?} gave {e}");
        }
    }

    fn plan(window: FaultWindow) -> FaultPlan {
        FaultPlan {
            windows: vec![window],
            ..FaultPlan::default()
        }
    }

    fn outcomes(seed: u64, plan: &FaultPlan, n: usize) -> Vec<Option<Fault>> {
        let mut engine = FaultEngine::new(plan.clone(), seed);
        (0..n)
            .map(|i| {
                engine
                    .decide(
                        Operation::ObjectsInsert,
                        None,
                        Duration::from_millis(i as u64),
                    )
                    .map(|(fault, _)| fault)
            })
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_outcomes_and_another_seed_does_not() {
        let plan = plan(FaultWindow {
            share: 0.8,
            mix: [
                (Outcome::Status503, 0.3),
                (Outcome::Hang, 0.3),
                (Outcome::Slow, 0.2),
            ]
            .into(),
            ..FaultWindow::default()
        });
        let a = outcomes(7, &plan, 200);
        assert_eq!(a, outcomes(7, &plan, 200));
        assert_ne!(a, outcomes(8, &plan, 200));
        let hangs = a
            .iter()
            .filter(|f| {
                matches!(
                    f,
                    Some(Fault::Window {
                        outcome: Outcome::Hang,
                        ..
                    })
                )
            })
            .count();
        // 200 * 0.8 * 0.3 = 48 expected.
        assert!((25..75).contains(&hangs), "{hangs} hangs");
    }

    #[test]
    fn windows_apply_only_to_their_operations_and_time() {
        let plan = plan(FaultWindow {
            from: Duration::from_secs(1),
            until: Some(Duration::from_secs(2)),
            mix: [(Outcome::Status503, 1.0)].into(),
            ..FaultWindow::default()
        });
        let mut engine = FaultEngine::new(plan, 1);
        let at = Duration::from_millis;
        assert_eq!(engine.decide(Operation::ObjectsInsert, None, at(999)), None);
        assert_eq!(engine.decide(Operation::ObjectsGet, None, at(1500)), None);
        assert_eq!(
            engine
                .decide(Operation::ObjectsInsert, None, at(1500))
                .map(|d| d.1),
            Some(Action::Respond(503))
        );
        assert_eq!(
            engine.decide(Operation::ObjectsDelete, None, at(2000)),
            None
        );
    }

    #[test]
    fn slow_latencies_stay_within_their_bounds() {
        let slow = SlowLatency {
            min: Duration::from_millis(100),
            max: Duration::from_secs(10),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let samples: Vec<_> = (0..1000).map(|_| slow.sample(&mut rng)).collect();
        assert!(samples.iter().all(|d| *d >= slow.min && *d <= slow.max));
        // Log-uniform: about half below the geometric mean (1s).
        let below = samples
            .iter()
            .filter(|d| **d < Duration::from_secs(1))
            .count();
        assert!((400..600).contains(&below), "{below}");
    }

    #[test]
    fn capacity_sheds_past_the_rate_and_refills_with_time() {
        let plan = FaultPlan {
            capacity: Some(RequestCapacity {
                requests_per_second: 10.0,
                burst: Some(5.0),
            }),
            ..FaultPlan::default()
        };
        let mut engine = FaultEngine::new(plan, 1);
        let t0 = Duration::from_secs(1);
        let shed = (0..8)
            .filter(|_| engine.decide(Operation::ObjectsGet, None, t0).is_some())
            .count();
        // The bucket starts full with 5 and refills 10/s; at t0 it is still full.
        assert_eq!(shed, 3);
        // 100 ms later one token is back.
        let later = t0 + Duration::from_millis(100);
        assert_eq!(engine.decide(Operation::ObjectsGet, None, later), None);
        assert_eq!(
            engine.decide(Operation::ObjectsGet, None, later),
            Some((Fault::Shed { window: None }, Action::Respond(503)))
        );
    }

    #[test]
    fn a_window_capacity_applies_to_its_share_only() {
        let plan = plan(FaultWindow {
            capacity_rps: Some(2.0),
            ..FaultWindow::default()
        });
        let mut engine = FaultEngine::new(plan, 1);
        let t = Duration::from_secs(3);
        let shed: Vec<_> = (0..4)
            .map(|_| engine.decide(Operation::ObjectsInsert, None, t).is_some())
            .collect();
        assert_eq!(shed, [false, false, true, true]);
        assert_eq!(engine.decide(Operation::ObjectsGet, None, t), None);
    }

    #[test]
    fn refusals_apply_to_matching_writes_when_no_window_takes_them() {
        let text = r#"
[[fault]]
from = "0s"
until = "1s"
mix = { "503" = 1.0 }

[[refuse]]
prefix = "poison/"
"#;
        let plan = FaultPlan::from_toml(text).unwrap();
        let mut engine = FaultEngine::new(plan, 1);
        let insert = Operation::ObjectsInsert;
        let during = Duration::from_millis(500);
        let after = Duration::from_secs(2);
        // The outage answers first; afterwards the permanent refusal shows.
        assert_eq!(
            engine
                .decide(insert, Some("poison/a"), during)
                .map(|(f, _)| f.label()),
            Some("503".to_string())
        );
        assert_eq!(
            engine.decide(insert, Some("poison/a"), after),
            Some((Fault::Refused { rule: 0 }, Action::Respond(403)))
        );
        assert_eq!(engine.decide(insert, Some("ok/a"), after), None);
        // An outcome that would land the object cannot land a refused one.
        let plan = FaultPlan::from_toml(
            "[[fault]]\nmix = { commit_then_503 = 1.0 }\n[[refuse]]\nprefix = \"poison/\"\n",
        )
        .unwrap();
        let mut engine = FaultEngine::new(plan, 1);
        assert_eq!(
            engine
                .decide(insert, Some("poison/a"), during)
                .map(|(f, _)| f),
            Some(Fault::Refused { rule: 0 })
        );
        assert_eq!(
            engine
                .decide(insert, Some("ok/a"), during)
                .map(|(f, _)| f.label()),
            Some("commit_then_503".to_string())
        );
        assert_eq!(
            engine.decide(Operation::ObjectsGet, Some("poison/a"), after),
            None
        );
    }

    #[test]
    fn a_refusal_must_be_a_permanent_client_error() {
        let err = FaultPlan::from_toml("[[refuse]]\nprefix = \"p\"\nstatus = 503\n").unwrap_err();
        assert_eq!(err.field, "refuse[0].status");
        let err = FaultPlan::from_toml("[[refuse]]\nprefix = \"\"\n").unwrap_err();
        assert_eq!(err.field, "refuse[0].prefix");
    }

    #[test]
    fn a_json_plan_reads_as_the_toml_one_and_names_a_bad_field() {
        let json =
            br#"{"fault": [{"until": "30s", "mix": {"503": 1.0}}], "refuse": [{"prefix": "p/"}]}"#;
        let toml =
            "[[fault]]\nuntil = \"30s\"\nmix = { \"503\" = 1.0 }\n[[refuse]]\nprefix = \"p/\"\n";
        assert_eq!(
            FaultPlan::from_json(json).unwrap(),
            FaultPlan::from_toml(toml).unwrap()
        );
        let e = FaultPlan::from_json(br#"{"fault": [{}, {"shar": 1}]}"#).unwrap_err();
        assert!(
            e.to_string().starts_with("fault[1]: unknown field `shar`"),
            "{e}"
        );
        let e = FaultPlan::from_json(b"[1]").unwrap_err();
        assert_eq!(e.field, "(json)");
    }

    #[test]
    fn windows_added_later_count_from_then_and_come_first() {
        let started = FaultPlan::from_toml("[[fault]]\nmix = { \"429\" = 1.0 }\n").unwrap();
        let mut engine = FaultEngine::new(started, 1);
        let now = Duration::from_secs(100);
        let outage = FaultPlan::from_toml(
            "[[fault]]\nuntil = \"30s\"\nmix = { \"503\" = 1.0 }\n[capacity]\nrequests_per_second = 1\n",
        )
        .unwrap();
        engine.add(outage, now);
        let window = &engine.plan().windows[0];
        assert_eq!(
            (window.from, window.until),
            (now, Some(now + Duration::from_secs(30)))
        );
        let label = |engine: &mut FaultEngine, at| {
            engine
                .decide(Operation::ObjectsInsert, None, at)
                .map(|(fault, _)| fault.label())
        };
        assert_eq!(label(&mut engine, now), Some("503".to_string()));
        // The capacity added at `now` started full (one request), and is empty.
        assert_eq!(label(&mut engine, now), Some("shed".to_string()));
        let later = now + Duration::from_secs(31);
        assert_eq!(label(&mut engine, later), Some("429".to_string()));
        engine.clear();
        assert_eq!(label(&mut engine, later), None);
        assert_eq!(engine.plan(), &FaultPlan::none());
    }
}
