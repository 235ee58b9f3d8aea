//! The fake's clock seam: elapsed time (which drives the fault schedule and the
//! capacity model) and wall time (which stamps `timeCreated`, `Last-Modified` and
//! generations).
//!
//! [`TokioClock`] serves a real port; a simulation brings its own (the bench's reads
//! turmoil's simulated time), so nothing here reads real time on a simulated path.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the fake reads time.
pub trait SimClock: Send + Sync + 'static {
    /// Time since t = 0 of the run; fault windows are offsets on this axis.
    fn elapsed(&self) -> Duration;
    /// Wall time, in milliseconds since the Unix epoch.
    fn now_unix_ms(&self) -> u64;
}

/// Tokio time for a real port: `elapsed` counts from construction on
/// [`tokio::time::Instant`] (so paused-time tests control it) and wall time is the
/// system clock.
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

    // The one read of the system clock: a fake on a real port stamps objects with
    // real time, as Cloud Storage does. Simulations pass their own clock.
    #[allow(clippy::disallowed_methods)]
    fn now_unix_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    }
}
