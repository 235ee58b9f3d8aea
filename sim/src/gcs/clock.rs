//! The fake's clock seam: simulated elapsed time (which drives the fault schedule and
//! the capacity model) and wall time (which stamps `timeCreated`, `Last-Modified` and
//! generations).
//!
//! Two implementations: [`TurmoilClock`] inside a turmoil simulation and
//! [`TokioClock`] on a real port. Neither reads real time on a simulated path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use spool::Clock;

/// Where the fake reads time.
pub trait SimClock: Send + Sync + 'static {
    /// Time since t = 0 of the run; fault windows are offsets on this axis.
    fn elapsed(&self) -> Duration;
    /// Wall time, in milliseconds since the Unix epoch.
    fn now_unix_ms(&self) -> u64;
}

/// Simulated time inside turmoil: `elapsed` is [`turmoil::sim_elapsed`] and wall time
/// is [`turmoil::since_epoch`] (so set `Builder::epoch` explicitly).
///
/// Outside a running host (for example when a checker reads the fake after
/// `Sim::run` returned) both return the last value read inside the simulation.
#[derive(Debug, Default)]
pub struct TurmoilClock {
    last_elapsed_ns: AtomicU64,
    last_wall_ms: AtomicU64,
}

impl TurmoilClock {
    /// A clock reading turmoil's simulated time.
    pub fn new() -> Self {
        Self::default()
    }
}

impl SimClock for TurmoilClock {
    fn elapsed(&self) -> Duration {
        match turmoil::sim_elapsed() {
            Some(elapsed) => {
                self.last_elapsed_ns
                    .fetch_max(elapsed.as_nanos() as u64, Ordering::SeqCst);
                elapsed
            }
            None => Duration::from_nanos(self.last_elapsed_ns.load(Ordering::SeqCst)),
        }
    }

    fn now_unix_ms(&self) -> u64 {
        match turmoil::since_epoch() {
            Some(since) => {
                let ms = since.as_millis() as u64;
                self.last_wall_ms.fetch_max(ms, Ordering::SeqCst);
                ms
            }
            None => self.last_wall_ms.load(Ordering::SeqCst),
        }
    }
}

/// Tokio time for a real port: `elapsed` counts from construction on
/// [`tokio::time::Instant`] (so paused-time tests control it) and wall time comes
/// from [`spool::SystemClock`].
#[derive(Debug)]
pub struct TokioClock {
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Starts the clock now. Construct it inside the runtime when that runtime's time
    /// is paused, so both read the same clock.
    pub fn start() -> Self {
        Self {
            start: tokio::time::Instant::now(),
        }
    }
}

impl SimClock for TokioClock {
    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn now_unix_ms(&self) -> u64 {
        spool::SystemClock.now_unix_ms()
    }
}

/// A clock a test moves by hand. Wall time is `epoch_unix_ms` plus the elapsed time.
#[derive(Debug, Default)]
pub struct ManualClock {
    epoch_unix_ms: u64,
    elapsed_ns: AtomicU64,
}

impl ManualClock {
    /// A clock at t = 0 whose wall time starts at `epoch_unix_ms`.
    pub fn new(epoch_unix_ms: u64) -> Self {
        Self {
            epoch_unix_ms,
            elapsed_ns: AtomicU64::new(0),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.elapsed_ns
            .fetch_add(by.as_nanos() as u64, Ordering::SeqCst);
    }
}

impl SimClock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.elapsed_ns.load(Ordering::SeqCst))
    }

    fn now_unix_ms(&self) -> u64 {
        self.epoch_unix_ms + self.elapsed().as_millis() as u64
    }
}
