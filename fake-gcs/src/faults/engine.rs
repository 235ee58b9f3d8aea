//! The fault engine: a plan applied to requests as they arrive, every draw from one
//! seeded RNG, and what each decision does to the request ([`Action`]).

use std::fmt;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::plan::{FaultPlan, FaultWindow, Ops, Outcome, RequestCapacity};
use crate::retry_test::Instruction;
use crate::wire::Operation;

impl RequestCapacity {
    /// A full token bucket at `now`.
    fn bucket(&self, now: Duration) -> TokenBucket {
        let burst = self.burst.unwrap_or(self.requests_per_second).max(1.0);
        TokenBucket::new(self.requests_per_second, burst, now)
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
            // Left queued off a resumable session's requests (see
            // `Instruction::only_for_sessions`); were one taken, it breaks the answer.
            Instruction::BrokenStreamFinalChunkAfter { after_bytes } => Action::BrokenStream {
                after: Some(after_bytes),
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
