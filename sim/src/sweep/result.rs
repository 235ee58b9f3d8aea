//! One run's result, as a file: what it decided (passed, failed an invariant, or
//! could not run), its figures, the sweep it belongs to (the scenario's hash, the
//! build, every variant and the seed range, so that merge knows what to expect), and
//! the one-line command that replays it alone. Nothing in it depends on wall time
//! or on which shard ran it, so a run gives the same bytes wherever it runs.

use serde::{Deserialize, Serialize};

/// The format of result files this code writes.
pub const FORMAT: u32 = 1;

/// What identifies a sweep: every result of one sweep carries the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepId {
    /// The scenario's name.
    pub scenario: String,
    /// crc32c (hex) of every variant's scenario text, in order.
    pub scenario_hash: String,
    /// The `sim` build that ran it: version and the crc32c of its executable.
    pub build: String,
    /// Every variant's label, in order.
    pub variants: Vec<String>,
    /// First and last seed, inclusive.
    pub seeds: [u64; 2],
}

impl SweepId {
    /// How many runs the sweep has.
    pub fn runs(&self) -> u64 {
        self.variants.len() as u64 * (self.seeds[1] - self.seeds[0] + 1)
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Every invariant held.
    Passed,
    /// These invariants failed: a finding, with the command that replays it.
    Failed {
        /// The failed invariants, `name: detail`.
        invariants: Vec<String>,
    },
    /// The run could not finish (an error, or a panic): a finding too.
    Error {
        /// What went wrong.
        message: String,
    },
}

/// A run's figures, for the distributions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Writes issued.
    pub writes: u64,
    /// Writes their callers were told were refused (backpressure).
    pub rejected: u64,
    /// Acknowledged writes lost (must be 0).
    pub lost: u64,
    /// Most entries the spool held at once.
    pub peak_files: u64,
    /// Most bytes the spool held at once: the disk this scenario needs, when its
    /// `max_bytes` did not refuse writes.
    pub peak_bytes: u64,
    /// Oldest entry's greatest age, in seconds.
    pub peak_oldest_age_seconds: f64,
    /// Seconds from the last fault window's end to an empty spool; `None` when it
    /// never emptied.
    pub drain_seconds: Option<f64>,
    /// The spool's cap on bytes in this run.
    pub max_bytes: u64,
    /// Requests the store served (new writes, drain writes, retries).
    pub store_requests: u64,
    /// Requests the store's capacity shed.
    pub store_shed: u64,
}

/// One run's result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// [`FORMAT`].
    pub format: u32,
    /// The sweep it belongs to.
    pub sweep: SweepId,
    /// Index of its variant in `sweep.variants`.
    pub variant: usize,
    /// Its seed.
    pub seed: u64,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Its figures, when it ran to the end.
    pub figures: Option<Figures>,
    /// The command that replays this run alone, with its report.
    pub replay: String,
}

impl RunResult {
    /// The file name of this run's result: by variant and seed, so that two runs
    /// of the same (variant, seed) are two files only when two shards ran it.
    pub fn file_name(&self, shard_suffix: &str) -> String {
        format!("v{:04}.s{:020}{shard_suffix}.json", self.variant, self.seed)
    }

    /// Whether the run counts as a finding (failed or could not run).
    pub fn is_finding(&self) -> bool {
        !matches!(self.outcome, Outcome::Passed)
    }
}
