//! Retry delays: exponential backoff with a choice of jitter, as compared in AWS's
//! "Exponential Backoff And Jitter" study. Pure functions of the failure count, the
//! previous delay and an RNG the caller owns, so a seeded RNG gives the same delays
//! every run.
//!
//! With `exp = min(cap, base * 2^failures)`:
//!
//! | jitter | delay |
//! |---|---|
//! | `none` | `exp` |
//! | `equal` | `exp/2 + uniform(0, exp/2)` |
//! | `full` | `uniform(0, exp)` (the default: least total work under contention) |
//! | `decorrelated` | `min(cap, uniform(base, 3 * previous))` |

use std::time::Duration;

use rand::Rng;

/// How a retry delay is randomised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jitter {
    /// No randomness: every client retries at the same instants (a synchronized herd).
    None,
    /// Half fixed, half random.
    Equal,
    /// Uniform between zero and the exponential delay.
    #[default]
    Full,
    /// Each delay drawn between `base` and three times the previous one.
    Decorrelated,
}

impl Jitter {
    /// All strategies, for sweeps and comparisons.
    pub const ALL: [Jitter; 4] = [
        Jitter::None,
        Jitter::Equal,
        Jitter::Full,
        Jitter::Decorrelated,
    ];

    /// The strategy's name as written in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            Jitter::None => "none",
            Jitter::Equal => "equal",
            Jitter::Full => "full",
            Jitter::Decorrelated => "decorrelated",
        }
    }
}

impl std::str::FromStr for Jitter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Jitter::ALL
            .into_iter()
            .find(|j| j.as_str() == s)
            .ok_or_else(|| {
                format!("unknown jitter {s:?}; expected none, equal, full or decorrelated")
            })
    }
}

impl std::fmt::Display for Jitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Retry delay settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// Delay scale for the first retry. Default 1 s (the Node.js and C++ Cloud Storage
    /// clients' initial delay).
    pub base: Duration,
    /// Largest delay. Default 64 s (the Node.js client's maximum delay). Set equal to
    /// `base` for a constant delay.
    pub cap: Duration,
    /// How delays are randomised. Default [`Jitter::Full`].
    pub jitter: Jitter,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(64),
            jitter: Jitter::Full,
        }
    }
}

/// The delay before the next retry after `failures` consecutive failures (0 for the
/// first retry). `previous` is the last delay returned, used only by
/// [`Jitter::Decorrelated`].
pub fn next_backoff<R: Rng + ?Sized>(
    config: &BackoffConfig,
    failures: u32,
    previous: Duration,
    rng: &mut R,
) -> Duration {
    let cap = config.cap.max(config.base);
    let exp = config
        .base
        .checked_mul(1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(cap)
        .min(cap);
    match config.jitter {
        Jitter::None => exp,
        Jitter::Equal => exp / 2 + uniform(rng, Duration::ZERO, exp / 2),
        Jitter::Full => uniform(rng, Duration::ZERO, exp),
        Jitter::Decorrelated => {
            let high = previous.saturating_mul(3).max(config.base);
            uniform(rng, config.base, high).min(cap)
        }
    }
}

fn uniform<R: Rng + ?Sized>(rng: &mut R, low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    let nanos = rng.random_range(low.as_nanos() as u64..=high.as_nanos() as u64);
    Duration::from_nanos(nanos)
}

/// Backoff state for one retrying worker: counts consecutive failures.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    failures: u32,
    previous: Duration,
}

impl Backoff {
    /// Fresh state: the next delay is the first retry's.
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            config,
            failures: 0,
            previous: config.base,
        }
    }

    /// Records a failure and returns how long to wait before trying again.
    pub fn next_delay<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let delay = next_backoff(&self.config, self.failures, self.previous, rng);
        self.failures = self.failures.saturating_add(1);
        self.previous = delay;
        delay
    }

    /// Records a success.
    pub fn reset(&mut self) {
        self.failures = 0;
        self.previous = self.config.base;
    }

    /// Consecutive failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// An RNG that always draws the same value: 0 pins a range's low end, `u64::MAX`
    /// its high end.
    struct StepRng(u64);

    impl StepRng {
        fn new(value: u64, _step: u64) -> Self {
            Self(value)
        }
    }

    impl RngCore for StepRng {
        fn next_u32(&mut self) -> u32 {
            self.0 as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(self.0 as u8);
        }
    }

    fn config(jitter: Jitter) -> BackoffConfig {
        BackoffConfig {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(10),
            jitter,
        }
    }

    #[test]
    fn exponential_delay_doubles_then_stops_at_the_cap() {
        let c = config(Jitter::None);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let delays: Vec<u64> = (0..10)
            .map(|n| next_backoff(&c, n, Duration::ZERO, &mut rng).as_millis() as u64)
            .collect();
        assert_eq!(
            delays,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
        // Huge failure counts neither overflow nor exceed the cap.
        assert_eq!(next_backoff(&c, u32::MAX, Duration::ZERO, &mut rng), c.cap);
    }

    #[test]
    fn full_jitter_spans_zero_to_the_exponential_delay() {
        let c = config(Jitter::Full);
        // StepRng pins the random draw: 0 gives the low end, u64::MAX the high end.
        assert_eq!(
            next_backoff(&c, 3, Duration::ZERO, &mut StepRng::new(0, 0)),
            Duration::ZERO
        );
        assert_eq!(
            next_backoff(&c, 3, Duration::ZERO, &mut StepRng::new(u64::MAX, 0)),
            Duration::from_millis(800)
        );
    }

    #[test]
    fn equal_jitter_keeps_half_of_the_delay() {
        let c = config(Jitter::Equal);
        assert_eq!(
            next_backoff(&c, 3, Duration::ZERO, &mut StepRng::new(0, 0)),
            Duration::from_millis(400)
        );
        assert_eq!(
            next_backoff(&c, 3, Duration::ZERO, &mut StepRng::new(u64::MAX, 0)),
            Duration::from_millis(800)
        );
    }

    #[test]
    fn decorrelated_jitter_grows_from_the_previous_delay_and_respects_the_cap() {
        let c = config(Jitter::Decorrelated);
        let prev = Duration::from_secs(2);
        assert_eq!(next_backoff(&c, 5, prev, &mut StepRng::new(0, 0)), c.base);
        assert_eq!(
            next_backoff(&c, 5, prev, &mut StepRng::new(u64::MAX, 0)),
            Duration::from_secs(6)
        );
        assert_eq!(
            next_backoff(
                &c,
                5,
                Duration::from_secs(9),
                &mut StepRng::new(u64::MAX, 0)
            ),
            c.cap
        );
    }

    #[test]
    fn random_delays_stay_in_range_and_are_reproducible_from_a_seed() {
        for jitter in Jitter::ALL {
            let c = config(jitter);
            let run = |seed| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let mut b = Backoff::new(c);
                (0..50).map(|_| b.next_delay(&mut rng)).collect::<Vec<_>>()
            };
            let delays = run(42);
            assert_eq!(delays, run(42), "{jitter}: same seed, different delays");
            assert!(
                delays.iter().all(|d| *d <= c.cap),
                "{jitter}: delay above cap"
            );
        }
    }

    #[test]
    fn reset_starts_over_from_the_first_delay() {
        let mut b = Backoff::new(config(Jitter::None));
        let mut rng = StepRng::new(0, 0);
        for _ in 0..5 {
            b.next_delay(&mut rng);
        }
        assert_eq!(b.failures(), 5);
        b.reset();
        assert_eq!(b.next_delay(&mut rng), Duration::from_millis(100));
    }

    #[test]
    fn jitter_names_round_trip() {
        for j in Jitter::ALL {
            assert_eq!(j.as_str().parse::<Jitter>(), Ok(j));
        }
        assert!("fuzzy".parse::<Jitter>().unwrap_err().contains("fuzzy"));
    }
}
