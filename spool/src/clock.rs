//! The clock seam: wall time, used only to stamp entries and compute their ages.
//!
//! Timeouts and backoff sleeps use `tokio::time`, which a simulation already controls;
//! this seam exists because entry ages must survive restarts, so they need a wall
//! clock, and a simulation must be able to say what that wall clock reads.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_unix_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_ms(&self) -> u64 {
        // The one production read of real time; simulations inject their own Clock.
        #[allow(clippy::disallowed_methods)]
        let now = SystemTime::now();
        now.duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis() as u64
    }
}
