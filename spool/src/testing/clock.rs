//! A wall clock for tests.

use std::time::Duration;

use crate::clock::Clock;

/// A clock that reads a fixed time, for tests.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicU64);

impl ManualClock {
    /// A clock reading `unix_ms`.
    pub fn new(unix_ms: u64) -> Self {
        Self(unix_ms.into())
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.0
            .fetch_add(by.as_millis() as u64, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_unix_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}
