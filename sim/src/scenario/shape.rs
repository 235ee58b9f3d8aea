//! Fault windows whose start and length are drawn per seed, so that a sweep over
//! seeds is a sweep over outage shapes:
//!
//! ```toml
//! [[fault]]
//! from = { median = "2h", p99 = "20h" }      # lognormal, by its median and 99th percentile
//! length = { median = "5h", p99 = "18h" }    # instead of `until`
//! # length = { one_of = ["5h41m", "12h30m", "2h"] }   # an empirical list, one drawn
//! ```
//!
//! A fixed value (`"5h"`, or a time for `from`) draws nothing. Each window draws
//! from its own stream (the scenario's seed, the window's index), so adding a window
//! shifts no other's draws, and a scenario without distributions draws nothing at
//! all: its runs are what they were.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::seed::{derive_seed, purpose};

/// A duration drawn per seed.
#[derive(Debug, Clone, PartialEq)]
pub enum Drawn {
    /// Lognormal with this median and 99th percentile.
    LogNormal {
        /// The median.
        median: Duration,
        /// The 99th percentile (at least the median).
        p99: Duration,
    },
    /// One of these, each as likely.
    OneOf(Vec<Duration>),
}

/// The standard normal's 99th percentile.
const Z99: f64 = 2.326_347_874;

impl Drawn {
    /// Parses `{ median = "..", p99 = ".." }` or `{ one_of = [..] }`; `field` names
    /// the key in errors.
    pub(super) fn parse(table: &toml::Table, field: &str) -> Result<Drawn, (String, String)> {
        let duration = |value: &toml::Value, at: &str| -> Result<Duration, (String, String)> {
            let text = value.as_str().ok_or_else(|| {
                (
                    at.to_string(),
                    "expected a duration such as \"5h\"".to_string(),
                )
            })?;
            humantime::parse_duration(text).map_err(|e| (at.to_string(), format!("{text:?}: {e}")))
        };
        let keys: Vec<&str> = table.keys().map(String::as_str).collect();
        match keys.as_slice() {
            ["median", "p99"] | ["p99", "median"] => {
                let median = duration(&table["median"], &format!("{field}.median"))?;
                let p99 = duration(&table["p99"], &format!("{field}.p99"))?;
                if median.is_zero() || p99 < median {
                    return Err((field.into(), "needs 0 < median <= p99".into()));
                }
                Ok(Drawn::LogNormal { median, p99 })
            }
            ["one_of"] => {
                let list = table["one_of"]
                    .as_array()
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| {
                        (
                            format!("{field}.one_of"),
                            "expected a non-empty list of durations".into(),
                        )
                    })?;
                let at = format!("{field}.one_of");
                Ok(Drawn::OneOf(
                    list.iter()
                        .map(|v| duration(v, &at))
                        .collect::<Result<_, _>>()?,
                ))
            }
            _ => Err((
                field.into(),
                "expected { median = \"..\", p99 = \"..\" } or { one_of = [\"..\", ...] }".into(),
            )),
        }
    }

    /// A value to stand in until a seed draws one (the median, or the first).
    pub(super) fn typical(&self) -> Duration {
        match self {
            Drawn::LogNormal { median, .. } => *median,
            Drawn::OneOf(list) => list[0],
        }
    }

    fn draw(&self, rng: &mut ChaCha8Rng) -> Duration {
        match self {
            Drawn::LogNormal { median, p99 } => {
                let mu = median.as_secs_f64().ln();
                let sigma = (p99.as_secs_f64().ln() - mu) / Z99;
                Duration::from_secs_f64((mu + sigma * standard_normal(rng)).exp())
            }
            Drawn::OneOf(list) => list[rng.random_range(0..list.len())],
        }
    }
}

/// A standard normal draw (Box-Muller).
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]: ln is finite
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// How one fault window's start and length are drawn (`None`: as written).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowShape {
    /// The start, as an offset from the scenario's start.
    pub from: Option<Drawn>,
    /// The length (the window's `until` is its start plus this).
    pub length: Option<Drawn>,
}

impl WindowShape {
    /// Whether this window draws anything.
    pub fn is_drawn(&self) -> bool {
        self.from.is_some() || self.length.is_some()
    }

    /// This window's (from, until) for `seed`: `written` where nothing is drawn.
    pub fn draw(
        &self,
        seed: u64,
        window: usize,
        written: (Duration, Option<Duration>),
    ) -> (Duration, Option<Duration>) {
        let mut rng =
            ChaCha8Rng::seed_from_u64(derive_seed(seed, &[purpose::FAULT_SHAPE, window as u64]));
        let from = self.from.as_ref().map_or(written.0, |d| d.draw(&mut rng));
        let until = match &self.length {
            Some(length) => Some(from + length.draw(&mut rng)),
            None => written.1.map(|until| until.max(from)),
        };
        (from, until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lognormal_draws_match_their_median_and_p99() {
        let shape = WindowShape {
            from: None,
            length: Some(Drawn::LogNormal {
                median: Duration::from_secs(3600),
                p99: Duration::from_secs(36_000),
            }),
        };
        let mut lengths: Vec<f64> = (0..20_000)
            .map(|seed| {
                let (from, until) = shape.draw(seed, 0, (Duration::ZERO, None));
                (until.unwrap() - from).as_secs_f64()
            })
            .collect();
        lengths.sort_by(f64::total_cmp);
        let (median, p99) = (lengths[10_000], lengths[19_800]);
        assert!((median / 3600.0 - 1.0).abs() < 0.05, "median {median}");
        assert!((p99 / 36_000.0 - 1.0).abs() < 0.15, "p99 {p99}");
        assert_eq!(
            shape.draw(7, 0, (Duration::ZERO, None)),
            shape.draw(7, 0, (Duration::ZERO, None))
        );
        assert_ne!(
            shape.draw(7, 0, (Duration::ZERO, None)),
            shape.draw(7, 1, (Duration::ZERO, None))
        );
    }

    #[test]
    fn distributions_parse_and_bad_ones_name_their_field() {
        let table = |text: &str| text.parse::<toml::Table>().unwrap();
        let one_of = Drawn::parse(&table("one_of = [\"1h\", \"2h\"]"), "fault[0].length").unwrap();
        assert_eq!(
            one_of,
            Drawn::OneOf(vec![Duration::from_secs(3600), Duration::from_secs(7200)])
        );
        let err =
            Drawn::parse(&table("median = \"2h\"\np99 = \"1h\""), "fault[0].length").unwrap_err();
        assert_eq!(err.0, "fault[0].length");
        let err = Drawn::parse(&table("mean = \"2h\""), "fault[1].from").unwrap_err();
        assert_eq!(err.0, "fault[1].from");
    }
}
