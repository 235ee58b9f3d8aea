//! The turmoil world: the fake Cloud Storage host, the app hosts and (with
//! `[relay]`) the relay host, stepped through the scenario's duration while its
//! events (crash, restart, deploy) are applied, then wound down so every host stops
//! gracefully (the app hosts first, so the relay answers their last writes), and
//! every spool's inventory is taken.
//!
//! Everything a run decides comes from the scenario's seed, through [`derive_seed`]:
//! turmoil's world RNG (network latency), the fake's fault RNG, each host's disk
//! (faults and what survives power loss), each host boot's producer and drainer. Nothing reads real time or real randomness, so the
//! same scenario and seed step through the same states.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use fake_gcs::{FakeGcs, FakeGcsConfig, FakeStats, Objects, Refusal, RequestEvent};

use crate::hosts::control::{BUCKET, Command, GCS_HOST, GCS_PORT, Phase, Role, Shared};
use crate::hosts::gcs::{self, TurmoilClock};
use crate::hosts::{app, node, relay};
use crate::ledger::Ledger;
use crate::mutants::Mutant;
use crate::recorder::{Recorder, TimelineEvent};
use crate::scenario::{Event, EventKind, Scenario, When};
use crate::seed::{derive_seed, purpose};
use crate::simdisk::{CrashPoint, DiskReport};

/// How long the wind-down may take before the run gives up on a host.
const WIND_DOWN_LIMIT: Duration = Duration::from_secs(600);

/// Progress reported while a run steps.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Simulated time done.
    pub simulated: Duration,
    /// Simulated time to do.
    pub total: Duration,
}

/// Options that are not part of the scenario.
#[derive(Default)]
pub struct Options {
    /// Called every few thousand steps.
    pub progress: Option<Box<dyn FnMut(Progress)>>,
    /// A bug planted at a seam, to show the bench catches it (`sim::mutants`).
    pub mutant: Option<Mutant>,
}

/// Everything a run produced, for the checker and the report.
#[derive(Debug)]
pub struct RunOutput {
    /// The scenario.
    pub scenario: Arc<Scenario>,
    /// What every caller was told.
    pub ledger: Ledger,
    /// Samples, events, checks and inventories.
    pub recorder: Recorder,
    /// The bucket's objects at the end.
    pub bucket: Objects,
    /// The fake's counters.
    pub fake: FakeStats,
    /// Steps taken (each one `tick` of simulated time).
    pub steps: u64,
    /// Hosts that did not finish their wind-down in time (app hosts, then the
    /// relay).
    pub unfinished_hosts: Vec<u32>,
    /// Hosts that were not serving when the scenario ended (down after an event, or
    /// stopping for a deploy).
    pub down_at_end: Vec<u32>,
    /// What each host's disk did: crash states reached, faults injected, damage
    /// (with the relay on, the app hosts' disks are idle).
    pub disks: Vec<DiskReport>,
}

/// A deploy waiting for its host to stop gracefully.
struct PendingDeploy {
    host: u32,
    down_for: Duration,
    at: Duration,
}

/// Runs `scenario` to the end and returns what happened.
pub fn run(mut scenario: Scenario, mut options: Options) -> anyhow::Result<RunOutput> {
    scenario.draw_fault_windows();
    let scenario = Arc::new(scenario);
    let shared = Arc::new(Shared::new(scenario.clone(), options.mutant));
    let fake = start_fake(&scenario, &shared)?;
    shared.fake.set(fake.clone()).expect("one fake per run");
    let mut world = World {
        sim: build_sim(&scenario),
        disk_crashes: disk_crashes(&scenario, &shared),
        shared,
        fake,
        deploys: Vec::new(),
        next_sample: 1,
        steps: 0,
    };
    world.add_hosts();
    world.step_through(&mut options)?;

    let down_at_end = world.down_at_end();
    let unfinished_hosts = world.wind_down()?;
    world.take_inventories();
    crate::logging::set_world_time(None);
    if let Some(progress) = options.progress.as_mut() {
        progress(Progress {
            simulated: scenario.duration,
            total: scenario.duration,
        });
    }
    world.into_output(scenario, unfinished_hosts, down_at_end)
}

/// The fake, with the scenario's faults (and a refusal of poison objects) and its
/// seed, reporting every request to the recorder.
fn start_fake(scenario: &Scenario, shared: &Arc<Shared>) -> anyhow::Result<FakeGcs> {
    let mut faults = scenario.faults.clone();
    if scenario.workload.poison > 0.0 {
        faults.refusals.push(Refusal {
            prefix: crate::workload::POISON_PREFIX.to_string(),
            status: 403,
        });
    }
    let fake = FakeGcs::new(
        FakeGcsConfig {
            buckets: vec![BUCKET.to_string()],
            seed: derive_seed(scenario.seed, &[purpose::FAKE]),
            faults,
            // Reads through the relay download what was delivered; a replay
            // without them keeps digests only (millions of objects).
            keep_bytes: scenario.relay.is_some_and(|relay| relay.reads_through()),
            ..FakeGcsConfig::default()
        },
        Arc::new(TurmoilClock::new()),
    )
    .context("invalid fault plan")?;
    let shared = shared.clone();
    fake.set_observer(Arc::new(move |event: &RequestEvent| {
        record_request(&shared, event)
    }));
    Ok(fake)
}

/// A run in progress: the turmoil world and what the run keeps outside it.
struct World {
    sim: turmoil::Sim<'static>,
    shared: Arc<Shared>,
    fake: FakeGcs,
    /// Deploys waiting for their host to stop.
    deploys: Vec<PendingDeploy>,
    /// Per host, each crash scheduled at a disk operation with its down time, sorted.
    disk_crashes: Vec<Vec<(CrashPoint, Duration)>>,
    /// The next sample instant's index at which to count the bucket.
    next_sample: u64,
    /// Steps taken.
    steps: u64,
}

impl World {
    /// The fake's host, one host per app instance, and the relay's.
    fn add_hosts(&mut self) {
        let fake = self.fake.clone();
        self.sim.host(GCS_HOST, move || {
            let fake = fake.clone();
            async move {
                gcs::serve(fake, GCS_PORT).await?;
                Ok(())
            }
        });
        for control in &self.shared.hosts {
            let (shared, host) = (self.shared.clone(), control.index);
            match control.role {
                Role::App => self.sim.host(control.name.as_str(), move || {
                    app::run_host(shared.clone(), host)
                }),
                Role::ThroughRelay => self.sim.host(control.name.as_str(), move || {
                    app::run_through_relay(shared.clone(), host)
                }),
                Role::Relay => self.sim.host(control.name.as_str(), move || {
                    relay::run(shared.clone(), host)
                }),
            }
        }
    }

    /// Steps to the end of the scenario: at each step, the events that are due, the
    /// deploys whose host has stopped, the bucket's count at each sample instant.
    fn step_through(&mut self, options: &mut Options) -> anyhow::Result<()> {
        let scenario = self.shared.scenario.clone();
        let mut events = scenario.events.iter().peekable();
        loop {
            let t = self.sim.elapsed();
            if t >= scenario.duration {
                return Ok(());
            }
            while let Some(event) = events.next_if(|e| e.at <= t) {
                self.apply(event, t);
            }
            self.crash_tripped_disks(t);
            self.restart_stopped_deploys(t);
            self.count_bucket(t);
            if self.steps.is_multiple_of(4096)
                && let Some(progress) = options.progress.as_mut()
            {
                progress(Progress {
                    simulated: t,
                    total: scenario.duration,
                });
            }
            self.step()
                .map_err(|e| anyhow::anyhow!("simulation failed at {t:?}: {e}"))?;
        }
    }

    /// Steps the world one tick; log lines written between steps carry its time.
    fn step(&mut self) -> turmoil::Result<bool> {
        crate::logging::set_world_time(Some(self.sim.since_epoch()));
        let stepped = self.sim.step();
        self.steps += 1;
        stepped
    }

    /// A crash or restart kills its hosts now; a deploy asks them to stop.
    fn apply(&mut self, event: &Event, t: Duration) {
        for &host in &event.hosts {
            match event.kind {
                EventKind::Crash | EventKind::Restart => {
                    self.deploys.retain(|d| d.host != host);
                    kill(
                        &mut self.sim,
                        &self.shared,
                        host,
                        event.kind,
                        event.down_for,
                        t,
                    );
                }
                EventKind::Deploy => {
                    self.shared.hosts[host as usize]
                        .command
                        .send_replace(Command::Stop);
                    self.deploys.push(PendingDeploy {
                        host,
                        down_for: event.down_for,
                        at: t,
                    });
                }
            }
        }
    }

    /// Crashes the hosts whose disk lost power at a scheduled operation: they are
    /// frozen mid-operation until now.
    fn crash_tripped_disks(&mut self, t: Duration) {
        for host in 0..self.shared.hosts.len() {
            let Some(point) = self.shared.hosts[host].disk.tripped() else {
                continue;
            };
            let scheduled = &mut self.disk_crashes[host];
            let down_for = match scheduled.iter().position(|(p, _)| *p == point) {
                Some(i) => scheduled.remove(i).1,
                None => Duration::ZERO,
            };
            self.deploys.retain(|d| d.host as usize != host);
            kill(
                &mut self.sim,
                &self.shared,
                host as u32,
                EventKind::Crash,
                down_for,
                t,
            );
        }
    }

    /// Tells every host to finish, restarts any that is down, and steps until all
    /// have stopped (a disk that reaches a scheduled crash meanwhile crashes its host,
    /// which then starts again and finishes): the app hosts first, then the relay,
    /// which serves their last writes meanwhile. Returns the hosts that did not
    /// finish in time.
    fn wind_down(&mut self) -> anyhow::Result<Vec<u32>> {
        let (relays, apps): (Vec<u32>, Vec<u32>) = (self.shared.hosts.iter())
            .map(|h| h.index)
            .partition(|&h| self.shared.hosts[h as usize].role == Role::Relay);
        let end = self.sim.elapsed() + WIND_DOWN_LIMIT;
        let mut unfinished = Vec::new();
        for group in [apps, relays] {
            if !group.is_empty() {
                unfinished.extend(self.finish(&group, end)?);
            }
        }
        for &host in &unfinished {
            let at = self.sim.elapsed();
            self.shared.end_boot(host, at);
        }
        Ok(unfinished)
    }

    /// Tells `hosts` to finish, restarts any that is down, and steps until they
    /// have stopped or `end`. Returns those that did not.
    fn finish(&mut self, hosts: &[u32], end: Duration) -> anyhow::Result<Vec<u32>> {
        let shared = self.shared.clone();
        let controls = || hosts.iter().map(|&h| &shared.hosts[h as usize]);
        for control in controls() {
            control.command.send_replace(Command::Finish);
            if control.phase() == Phase::Stopped {
                control.set_boot_delay(Duration::ZERO);
                self.sim.bounce(control.name.as_str());
            }
        }
        while controls().any(|h| h.phase() != Phase::Finished) && self.sim.elapsed() < end {
            let t = self.sim.elapsed();
            self.crash_tripped_disks(t);
            self.step()
                .map_err(|e| anyhow::anyhow!("simulation failed while winding down: {e}"))?;
        }
        Ok(controls()
            .filter(|h| h.phase() != Phase::Finished)
            .map(|h| h.index)
            .collect())
    }

    /// Every spool's disk loses power and is read, outside the simulation (app
    /// hosts writing through the relay keep none).
    fn take_inventories(&mut self) {
        let end = self.shared.scenario.wall_ms(self.sim.elapsed());
        for control in self.shared.hosts.iter().filter(|h| h.role.keeps_spool()) {
            let inventory = crate::inventory::take(&control.disk, &self.shared.scenario.spool, end);
            self.shared
                .recorder()
                .inventories
                .insert(control.index, inventory);
        }
    }

    /// Starts again, after their down time, the deployed hosts that have stopped.
    fn restart_stopped_deploys(&mut self, t: Duration) {
        let (shared, sim) = (&self.shared, &mut self.sim);
        self.deploys.retain(|d| {
            let control = &shared.hosts[d.host as usize];
            if control.phase() != Phase::Stopped {
                return true;
            }
            let unknown = shared.end_boot(d.host, t);
            shared.recorder().timeline.push(TimelineEvent {
                at: d.at,
                host: d.host,
                kind: EventKind::Deploy,
                down_for: d.down_for + (t - d.at),
                unknown,
            });
            control.set_boot_delay(d.down_for);
            control.command.send_replace(Command::Run);
            sim.bounce(control.name.as_str());
            false
        });
    }

    /// Records the bucket's object count at every sample instant up to `t`.
    fn count_bucket(&mut self, t: Duration) {
        while self.shared.recorder().index(t) >= self.next_sample {
            let count = self.fake.object_count(BUCKET) as u64;
            self.shared
                .recorder()
                .in_bucket
                .insert(self.next_sample, count);
            self.next_sample += 1;
        }
    }

    /// Hosts not serving when the scenario ends: down after an event, or stopping
    /// for a deploy.
    fn down_at_end(&self) -> Vec<u32> {
        self.shared
            .hosts
            .iter()
            .filter(|h| {
                h.phase() != Phase::Running || self.deploys.iter().any(|d| d.host == h.index)
            })
            .map(|h| h.index)
            .collect()
    }

    /// What the run produced, once the simulation is dropped and the hosts have let
    /// go of the shared state.
    fn into_output(
        self,
        scenario: Arc<Scenario>,
        unfinished_hosts: Vec<u32>,
        down_at_end: Vec<u32>,
    ) -> anyhow::Result<RunOutput> {
        let World {
            sim,
            shared,
            fake,
            steps,
            ..
        } = self;
        fake.clear_observer();
        drop(sim);
        let disks = shared.hosts.iter().map(|h| h.disk.report()).collect();
        let bucket = fake.take_objects(BUCKET);
        let shared = Arc::try_unwrap(shared)
            .map_err(|_| anyhow::anyhow!("a host still holds the shared state after the run"))?;
        Ok(RunOutput {
            scenario,
            ledger: shared
                .ledger
                .into_inner()
                .unwrap_or_else(|e| e.into_inner()),
            recorder: shared
                .recorder
                .into_inner()
                .unwrap_or_else(|e| e.into_inner()),
            bucket,
            fake: fake.stats(),
            steps,
            unfinished_hosts,
            down_at_end,
            disks,
        })
    }
}

/// The turmoil world `scenario` runs in, with no hosts yet: its epoch, tick, seed,
/// network latency and TCP capacity. The simulation bench builds its bare hyper
/// baseline on it, so that both measure the same network.
pub fn build_sim(scenario: &Scenario) -> turmoil::Sim<'static> {
    let mut builder = turmoil::Builder::new();
    builder
        .epoch(scenario.start)
        .tick_duration(scenario.tick)
        .simulation_duration(scenario.duration + WIND_DOWN_LIMIT + Duration::from_secs(60))
        .rng_seed(derive_seed(scenario.seed, &[purpose::TURMOIL]))
        .min_message_latency(scenario.network.min_latency)
        .max_message_latency(scenario.network.max_latency)
        .tcp_capacity(16_384);
    builder.build()
}

/// Arms each host's disk with the crashes scheduled at its operations; returns them
/// with their down times, per host, sorted (of two crashes at the same point, the
/// shorter down time is taken first).
fn disk_crashes(scenario: &Scenario, shared: &Shared) -> Vec<Vec<(CrashPoint, Duration)>> {
    let mut points: Vec<Vec<(CrashPoint, Duration)>> = vec![Vec::new(); shared.hosts.len()];
    for event in &scenario.events {
        let point = match event.when {
            When::At(_) => continue,
            When::AfterDiskOps(ops) => CrashPoint::BeforeOp(ops),
            When::AfterDiskOp { kind, nth } => CrashPoint::AfterNth(kind, nth),
        };
        for &host in &event.hosts {
            points[host as usize].push((point, event.down_for));
        }
    }
    for (host_points, control) in points.iter_mut().zip(&shared.hosts) {
        host_points.sort();
        let armed: Vec<CrashPoint> = host_points.iter().map(|(point, _)| *point).collect();
        control.disk.crash_at(&armed);
    }
    points
}

/// A crash (power loss) or restart (process only): the host's tasks die at their
/// await points; it starts again after `down_for`.
fn kill(
    sim: &mut turmoil::Sim<'static>,
    shared: &Arc<Shared>,
    host: u32,
    kind: EventKind,
    down_for: Duration,
    at: Duration,
) {
    let control = &shared.hosts[host as usize];
    if let Some((boot, metrics)) = control.metrics() {
        shared
            .recorder()
            .boot_uploads
            .insert((host, boot), node::upload_counts(&metrics));
    }
    let name = control.name.as_str();
    if kind == EventKind::Crash {
        sim.crash(name);
        control.disk.power_loss();
    }
    let unknown = shared.end_boot(host, at);
    shared.recorder().timeline.push(TimelineEvent {
        at,
        host,
        kind,
        down_for,
        unknown,
    });
    control.set_boot_delay(down_for);
    // A crash during the wind-down starts the host again to finish.
    if *control.command.borrow() != Command::Finish {
        control.command.send_replace(Command::Run);
    }
    sim.bounce(name);
}

/// Adds one request of the fake to the interval it arrived in.
fn record_request(shared: &Shared, event: &RequestEvent) {
    let mut recorder = shared.recorder();
    let index = recorder.index(event.at);
    let counts = recorder.requests.entry(index).or_default();
    counts.requests += 1;
    let failed = event.fault.is_some() || event.status.is_none_or(|s| s >= 400);
    if failed {
        let kind = match (&event.fault, event.status) {
            (Some(fault), _) => fault.label(),
            (None, Some(status)) => status.to_string(),
            (None, None) => "dropped".to_string(),
        };
        *counts.errors.entry(kind).or_default() += 1;
    }
}
