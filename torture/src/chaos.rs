//! The chaos: the schedule's rounds played against the real processes, in real time,
//! until enough power losses (or the time bound). A power loss goes in Jepsen's
//! order: SIGKILL the relay first (a process still running would write through the
//! cut), then crashfs's power loss, then (sometimes) unmount and mount, then the
//! relay again on the same directory and the same address (clients keep resumable
//! session URLs with the relay's address in them).

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use tokio::time::Instant;

use crate::clock;
use crate::disk::CrashDisk;
use crate::fake::Fake;
use crate::relay::Relay;
use crate::schedule::{Event, Round, Schedule};
use crate::writers::Writer;

/// What the chaos did, and what went wrong with the processes.
#[derive(Debug, Default)]
pub struct Counters {
    pub rounds: u64,
    pub power_losses: u64,
    pub remounts: u64,
    pub kills: u64,
    pub deploys: u64,
    /// Power losses during a relay's first boot on a new directory.
    pub first_boots: u64,
    pub outages: u64,
    /// From the signal to the relay listening again, over every restart.
    pub restart_total: Duration,
    pub restart_max: Duration,
    pub restarts: u64,
    /// From starting the relay to its `listening` line, over every restart.
    pub start_total: Duration,
    pub start_max: Duration,
    /// crashfs's power losses alone (each renames every surviving file).
    pub power_loss_total: Duration,
    pub power_loss_max: Duration,
    pub elapsed: Duration,
    /// Deploys that did not end with exit 0 within the grace, and the like.
    pub failures: Vec<String>,
    /// What stopped the chaos early, if anything did (the relay would not start).
    pub fatal: Option<String>,
}

/// The processes the chaos works on, and the log of its events.
pub struct World<'a> {
    pub fake: &'a Fake,
    pub relay: &'a mut Relay,
    pub disk: &'a mut CrashDisk,
    pub writers: &'a mut [Writer],
    /// `<logs>/events.log`: a line per event with its wall-clock time.
    pub events: std::fs::File,
}

impl World<'_> {
    fn note(&mut self, what: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.events, "{} {what}", clock::rfc3339());
    }
}

/// Plays rounds until `power_losses` power losses or `bound` has passed.
pub async fn run(
    world: &mut World<'_>,
    seed: u64,
    power_losses: u64,
    bound: Option<Duration>,
) -> Counters {
    let mut schedule = Schedule::new(seed);
    let mut counters = Counters::default();
    let started = Instant::now();
    let mut reported = Instant::now();
    while counters.power_losses < power_losses && bound.is_none_or(|b| started.elapsed() < b) {
        let round = schedule.next_round();
        counters.rounds += 1;
        if let Err(e) = play(world, &round, &mut counters).await {
            counters.fatal = Some(format!("round {}: {e:#}", counters.rounds));
            break;
        }
        if let Some(dead) = world.writers.iter_mut().find_map(|w| {
            let name = w.name().to_string();
            w.exited()
                .map(|status| format!("writer {name} exited early ({status})"))
        }) {
            counters.fatal = Some(dead);
            break;
        }
        if reported.elapsed() >= Duration::from_secs(15) {
            reported = Instant::now();
            eprintln!(
                "torture: {:>5.0}s  round {}  power losses {}/{power_losses}  kills {}  deploys {}  outages {}",
                started.elapsed().as_secs_f64(),
                counters.rounds,
                counters.power_losses,
                counters.kills,
                counters.deploys,
                counters.outages,
            );
        }
    }
    counters.elapsed = started.elapsed();
    counters
}

/// One round: the writers run (with an outage maybe), then the event.
async fn play(world: &mut World<'_>, round: &Round, counters: &mut Counters) -> anyhow::Result<()> {
    match round.outage {
        Some(outage) => {
            tokio::time::sleep(outage.after).await;
            let name = format!("torture outage {}", counters.outages + 1);
            world.fake.add_faults(&outage.plan(&name)).await?;
            counters.outages += 1;
            world.note(format_args!(
                "{name}: {:?} for {:?}",
                outage.mix, outage.lasts
            ));
            tokio::time::sleep(round.run_for.saturating_sub(outage.after)).await;
        }
        None => tokio::time::sleep(round.run_for).await,
    }
    let began = Instant::now();
    world.note(format_args!("round {}: {:?}", counters.rounds, round.event));
    let why = match round.event {
        Event::Quiet => return Ok(()),
        Event::PowerLoss { seed, remount } => {
            world.relay.kill().await?;
            power_loss(world, seed, counters).await?;
            if remount {
                world.disk.remount().await?;
                counters.remounts += 1;
            }
            format!("after power loss {}", counters.power_losses)
        }
        Event::Kill => {
            world.relay.kill().await?;
            counters.kills += 1;
            format!("after SIGKILL {}", counters.kills)
        }
        Event::Deploy => {
            counters.deploys += 1;
            deploy(world.relay, counters).await?;
            format!("after deploy {}", counters.deploys)
        }
        Event::FirstBoot { seed, at } => {
            // The relay's mean start so far (before any: 40 ms).
            let mean = (counters.start_total)
                .checked_div(counters.restarts as u32)
                .unwrap_or(Duration::from_millis(40));
            let kill_after = mean.mul_f64(at);
            world.relay.kill().await?;
            first_boot(world, seed, kill_after, counters).await?;
            format!(
                "after power loss {} (a first boot's)",
                counters.power_losses
            )
        }
    };
    let start = world.relay.start(&why).await?;
    counters.start_total += start;
    counters.start_max = counters.start_max.max(start);
    let took = began.elapsed();
    world.note(format_args!(
        "relay listening {why}, {took:?} after the signal"
    ));
    counters.restarts += 1;
    counters.restart_total += took;
    counters.restart_max = counters.restart_max.max(took);
    Ok(())
}

/// crashfs loses power (the relay must be dead), timed.
async fn power_loss(
    world: &mut World<'_>,
    seed: u64,
    counters: &mut Counters,
) -> anyhow::Result<()> {
    let began = Instant::now();
    let lost = world.disk.power_loss(seed).await?;
    let took = began.elapsed();
    world.note(format_args!(
        "power loss {}: {}",
        counters.power_losses + 1,
        produced(&lost)
    ));
    counters.power_losses += 1;
    counters.power_loss_total += took;
    counters.power_loss_max = counters.power_loss_max.max(took);
    Ok(())
}

/// The crash states a power loss produced, those above zero, as `name=count`.
fn produced(lost: &crashfs::PowerLoss) -> String {
    let value = serde_json::to_value(lost).unwrap_or_default();
    let mut parts = Vec::new();
    for fields in [&value, &value["crash_states"]] {
        for (name, count) in fields.as_object().into_iter().flatten() {
            if count.as_u64().is_some_and(|n| n > 0) && name != "power_losses" {
                parts.push(format!("{name}={count}"));
            }
        }
    }
    parts.join(" ")
}

/// SIGTERM: the relay must exit 0 within its grace.
async fn deploy(relay: &mut Relay, counters: &mut Counters) -> anyhow::Result<()> {
    let began = Instant::now();
    match relay.terminate().await? {
        Some(status) if status.success() => {}
        Some(status) => counters.failures.push(format!(
            "deploy {}: the relay exited with {status} after SIGTERM ({:?})",
            counters.deploys,
            began.elapsed()
        )),
        None => counters.failures.push(format!(
            "deploy {}: the relay still ran {:?} after SIGTERM (grace {:?}); killed",
            counters.deploys,
            began.elapsed(),
            relay.grace
        )),
    }
    Ok(())
}

/// With the relay killed: a second relay starts on a new directory of the mount and
/// is killed `kill_after` later, the power goes (decided by `seed`), and that relay
/// must then start on whatever its first boot left, and stop on SIGTERM.
async fn first_boot(
    world: &mut World<'_>,
    seed: u64,
    kill_after: Duration,
    counters: &mut Counters,
) -> anyhow::Result<()> {
    counters.first_boots += 1;
    let n = counters.first_boots;
    let main = &world.relay;
    let mut fresh = Relay::new(
        main.bin.clone(),
        main.dir.with_file_name(format!("first-boot-{n}")),
        main.fake,
        main.grace,
        main.extra.clone(),
        main.log.with_file_name("first-boots.log"),
    )?;
    let why = format!("first boot {n}, killed {kill_after:?} after its start");
    fresh.start_and_kill(kill_after, &why).await?;
    power_loss(world, seed, counters).await?;
    world.note(format_args!("{why}; power lost"));
    fresh
        .start(&format!("first boot {n}, after the power loss"))
        .await
        .with_context(|| format!("a relay whose first boot lost power ({why}) does not start"))?;
    match fresh.terminate().await? {
        Some(status) if status.success() => {}
        other => counters.failures.push(format!(
            "first boot {n}: after SIGTERM the relay {}",
            other.map_or("did not exit in time".to_string(), |s| format!(
                "exited {s}"
            ))
        )),
    }
    Ok(())
}
