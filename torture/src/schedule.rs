//! The schedule of chaos, drawn from the seed alone: each round lets the writers run
//! for a while (log-uniform, 50 ms to 3 s, so that events fall anywhere in an
//! upload), maybe starts a store outage during it, and ends with one event.
//!
//! | event | share | what happens |
//! |---|---|---|
//! | power loss | 60% | SIGKILL the relay, cut crashfs's power (its own seed), sometimes unmount and mount again, restart the relay |
//! | kill | 10% | SIGKILL the relay, restart it (the page cache kept) |
//! | deploy | 10% | SIGTERM: it must exit 0 within its grace; restart it |
//! | first boot | 10% | SIGKILL the relay; start a second relay on a new directory of the mount and SIGKILL it while it creates its spool (at 5% to 120% of the relay's mean start time so far); cut the power; that relay must then start on what is left and stop on SIGTERM; restart the relay |
//! | quiet | 10% | nothing: the round only ran (and maybe had an outage) |
//!
//! An outage (in 35% of rounds) is a fault window on the fake's writes from a moment
//! inside the round, lasting 300 ms to 8 s (so it may outlive the round): every
//! write answered 503, or a flaky mix (503s, resets, writes that land but answer
//! 503, slow successes), or hangs (requests held 2 s and dropped).

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What ends a round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// SIGKILL, power loss decided by `seed`, restart; `remount`: unmount and mount
    /// crashfs again before the restart.
    PowerLoss { seed: u64, remount: bool },
    /// SIGKILL, restart.
    Kill,
    /// SIGTERM, which must end the relay with 0 within its grace; restart.
    Deploy,
    /// A power loss during a relay's first boot on a new directory, killed at
    /// `at` times the relay's mean start time (measured: the moment its directories
    /// are created depends on the machine) after its start; decided by `seed`.
    FirstBoot { seed: u64, at: f64 },
    /// Nothing.
    Quiet,
}

/// How the store fails during an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Every write 503.
    Unavailable,
    /// 503s, resets, commits answered 503, slow successes; the rest succeed.
    Flaky,
    /// Writes held 2 s, then dropped; or 503.
    Hangs,
}

/// A fault window on the fake's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// From the start of the round.
    pub after: Duration,
    pub lasts: Duration,
    pub mix: Mix,
}

/// One round of the schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// How long the writers run before the event.
    pub run_for: Duration,
    pub outage: Option<Outage>,
    pub event: Event,
}

/// The rounds, one after another, from a seed.
#[derive(Debug)]
pub struct Schedule {
    rng: ChaCha8Rng,
}

/// Log-uniform in `[lo, hi]` milliseconds.
fn log_uniform_ms(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> Duration {
    let ms = (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp();
    Duration::from_micros((ms * 1000.0) as u64)
}

impl Schedule {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The next round.
    pub fn next_round(&mut self) -> Round {
        let rng = &mut self.rng;
        let run_for = log_uniform_ms(rng, 50.0, 3_000.0);
        let outage = rng.random_bool(0.35).then(|| Outage {
            after: run_for.mul_f64(rng.random::<f64>()),
            lasts: log_uniform_ms(rng, 300.0, 8_000.0),
            mix: match rng.random_range(0..3) {
                0 => Mix::Unavailable,
                1 => Mix::Flaky,
                _ => Mix::Hangs,
            },
        });
        let event = match rng.random_range(0..100) {
            0..60 => Event::PowerLoss {
                seed: rng.random(),
                remount: rng.random_bool(0.1),
            },
            60..70 => Event::Kill,
            70..80 => Event::Deploy,
            80..90 => Event::FirstBoot {
                seed: rng.random(),
                at: rng.random_range(0.05..1.2),
            },
            _ => Event::Quiet,
        };
        Round {
            run_for,
            outage,
            event,
        }
    }
}

impl Outage {
    /// The fake's fault plan for it (TOML; offsets from when it is posted), named
    /// `name`.
    pub fn plan(&self, name: &str) -> String {
        let mix = match self.mix {
            Mix::Unavailable => r#"{ "503" = 1.0 }"#,
            Mix::Flaky => r#"{ "503" = 0.3, reset = 0.2, commit_then_503 = 0.2, slow = 0.1 }"#,
            Mix::Hangs => r#"{ hang = 0.6, "503" = 0.4 }"#,
        };
        format!(
            "[[fault]]\nname = \"{name}\"\nuntil = \"{}ms\"\nops = \"writes\"\nmix = {mix}\n\
             hang_for = \"2s\"\nslow = {{ min = \"50ms\", max = \"1s\" }}\n",
            self.lasts.as_millis().max(1)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(seed: u64, n: usize) -> Vec<Round> {
        let mut schedule = Schedule::new(seed);
        (0..n).map(|_| schedule.next_round()).collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_rounds_and_another_seed_others() {
        assert_eq!(rounds(7, 200), rounds(7, 200));
        assert_ne!(rounds(7, 200), rounds(8, 200));
    }

    #[test]
    fn every_event_and_mix_occurs_in_its_share_within_bounds() {
        let all = rounds(1, 10_000);
        let count = |f: &dyn Fn(&Round) -> bool| all.iter().filter(|r| f(r)).count();
        let power = count(&|r| matches!(r.event, Event::PowerLoss { .. }));
        assert!((5_500..6_500).contains(&power), "{power} power losses");
        let remounts = count(&|r| matches!(r.event, Event::PowerLoss { remount: true, .. }));
        assert!((300..900).contains(&remounts), "{remounts} remounts");
        for event in [Event::Kill, Event::Deploy, Event::Quiet] {
            assert!(count(&|r| r.event == event) > 800, "{event:?}");
        }
        let first_boots: Vec<f64> = (all.iter())
            .filter_map(|r| match r.event {
                Event::FirstBoot { at, .. } => Some(at),
                _ => None,
            })
            .collect();
        assert!(
            (800..1_200).contains(&first_boots.len()),
            "{}",
            first_boots.len()
        );
        assert!(first_boots.iter().all(|at| (0.05..1.2).contains(at)));
        for mix in [Mix::Unavailable, Mix::Flaky, Mix::Hangs] {
            assert!(
                count(&|r| r.outage.is_some_and(|o| o.mix == mix)) > 800,
                "{mix:?}"
            );
        }
        for round in &all {
            assert!(round.run_for >= Duration::from_millis(50));
            assert!(round.run_for <= Duration::from_millis(3_000));
            if let Some(outage) = round.outage {
                assert!(outage.after <= round.run_for);
                assert!(outage.lasts >= Duration::from_millis(300));
                assert!(outage.lasts <= Duration::from_millis(8_000));
            }
        }
    }

    #[test]
    fn every_outage_is_a_plan_the_fake_accepts() {
        for mix in [Mix::Unavailable, Mix::Flaky, Mix::Hangs] {
            let outage = Outage {
                after: Duration::ZERO,
                lasts: Duration::from_millis(1_500),
                mix,
            };
            let plan = fake_gcs::FaultPlan::from_toml(&outage.plan("outage 3"))
                .unwrap_or_else(|e| panic!("{mix:?}: {e}"));
            assert_eq!(plan.windows.len(), 1, "{mix:?}");
        }
    }
}
