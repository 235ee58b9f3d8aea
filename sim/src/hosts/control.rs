//! What the world and the hosts share, below both: host names and ports, the
//! world's handle on each host ([`HostControl`]: its role, disk, boot delay, phase
//! and command), the run's [`Shared`] state (scenario, ledger, recorder, the fake),
//! and the start of every boot (`begin`).
//!
//! The world controls a host through [`HostControl`]: a boot delay (how long the host
//! stays down after a crash, restart or deploy) and a command (`Run`, `Stop` for a
//! graceful deploy, `Finish` at the end of the run, which also takes the inventory).

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use fake_gcs::FakeGcs;
use spool::Metrics;
use tokio::sync::watch;

use crate::ledger::Ledger;
use crate::mutants::Mutant;
use crate::recorder::Recorder;
use crate::scenario::Scenario;
use crate::seed::{derive_seed, purpose};
use crate::simdisk::SimDisk;

/// The bucket every host writes to.
pub const BUCKET: &str = "spool-sim";
/// The fake Cloud Storage host.
pub const GCS_HOST: &str = "gcs";
/// The fake's port.
pub const GCS_PORT: u16 = 4443;
/// Where each host keeps its spool.
pub const SPOOL_DIR: &str = "/var/spool/uploads";

/// The relay's turmoil host name.
pub const RELAY_HOST: &str = "relay";
/// The port the relay serves the upload API on.
pub const RELAY_PORT: u16 = 4443;

/// Turmoil host name of app host `i`.
pub fn host_name(i: u32) -> String {
    format!("app-{i}")
}

/// What the world asks of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Serve.
    Run,
    /// Stop gracefully (deploy).
    Stop,
    /// Stop gracefully and take the inventory (end of run).
    Finish,
}

/// What a host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An app host with its own spool.
    App,
    /// An app host writing through the relay; it keeps no spool.
    ThroughRelay,
    /// The relay host: a spool, and the upload API in front of it.
    Relay,
}

impl Role {
    /// Whether the host keeps a spool on its disk (and has an inventory).
    pub fn keeps_spool(self) -> bool {
        matches!(self, Role::App | Role::Relay)
    }
}

/// Where a host is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting out its boot delay, or opening its spool.
    Booting,
    /// Serving.
    Running,
    /// Stopped gracefully, waiting to be started again.
    Stopped,
    /// Finished: inventory taken.
    Finished,
}

#[derive(Debug)]
struct HostState {
    boots: u16,
    boot_delay: Duration,
    phase: Phase,
    metrics: Option<(u16, Metrics)>,
}

/// The world's handle on one host; outlives the host's crashes.
#[derive(Debug)]
pub struct HostControl {
    /// The host index: app hosts first, then the relay.
    pub index: u32,
    /// Its turmoil host name.
    pub name: String,
    /// What it runs.
    pub role: Role,
    /// The host's disk: outlives its boots, loses power with it.
    pub disk: SimDisk,
    /// The current command.
    pub command: watch::Sender<Command>,
    state: Mutex<HostState>,
}

impl HostControl {
    fn new(index: u32, role: Role, disk: SimDisk) -> Self {
        let name = match role {
            Role::Relay => RELAY_HOST.to_string(),
            Role::App | Role::ThroughRelay => host_name(index),
        };
        Self {
            index,
            name,
            role,
            disk,
            command: watch::Sender::new(Command::Run),
            state: Mutex::new(HostState {
                boots: 0,
                boot_delay: Duration::ZERO,
                phase: Phase::Booting,
                metrics: None,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, HostState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next boot waits `delay` before opening its spool.
    pub fn set_boot_delay(&self, delay: Duration) {
        self.state().boot_delay = delay;
    }

    /// Where the host is.
    pub fn phase(&self) -> Phase {
        self.state().phase
    }

    pub(crate) fn set_phase(&self, phase: Phase) {
        self.state().phase = phase;
    }

    /// The current boot `boot` opened its spool, whose counters are `metrics`.
    pub(crate) fn set_metrics(&self, boot: u16, metrics: Metrics) {
        self.state().metrics = Some((boot, metrics));
    }

    /// The current boot's counters, with the boot number, if it opened its spool.
    pub fn metrics(&self) -> Option<(u16, Metrics)> {
        self.state().metrics.clone()
    }

    fn begin_boot(&self) -> (u16, Duration) {
        let mut state = self.state();
        let boot = state.boots;
        state.boots += 1;
        state.phase = Phase::Booting;
        state.metrics = None;
        (boot, std::mem::take(&mut state.boot_delay))
    }
}

/// State shared by the world and every host.
#[derive(Debug)]
pub struct Shared {
    /// The scenario being run.
    pub scenario: Arc<Scenario>,
    /// What every caller was told.
    pub ledger: Mutex<Ledger>,
    /// Samples, events and checks.
    pub recorder: Mutex<Recorder>,
    /// One per app host, then the relay's (when there is one).
    pub hosts: Vec<HostControl>,
    /// A deliberate bug planted at a seam (the mutant catalogue's tests only).
    pub mutant: Option<Mutant>,
    /// The fake, once started: producers plant other writers' objects in it.
    pub fake: OnceLock<FakeGcs>,
}

impl Shared {
    /// Shared state for `scenario`.
    pub fn new(scenario: Arc<Scenario>, mutant: Option<Mutant>) -> Self {
        let app_hosts = scenario.workload.hosts;
        let disk = |host: u32| {
            let disk = SimDisk::new(
                scenario.disk,
                derive_seed(scenario.seed, &[purpose::DISK, host.into()]),
            );
            if let Some(Mutant::Disk(lie)) = mutant {
                disk.set_mutant(Some(lie));
            }
            disk
        };
        let app_role = match scenario.relay {
            Some(_) => Role::ThroughRelay,
            None => Role::App,
        };
        let mut hosts: Vec<HostControl> = (0..app_hosts)
            .map(|h| HostControl::new(h, app_role, disk(h)))
            .collect();
        if let Some(relay) = scenario.relay_host() {
            hosts.push(HostControl::new(relay, Role::Relay, disk(relay)));
        }
        Self {
            ledger: Mutex::new(Ledger::new(
                app_hosts,
                scenario.workload.expected_writes_per_host(),
            )),
            recorder: Mutex::new(Recorder::new(hosts.len() as u32, scenario.sample)),
            hosts,
            scenario,
            mutant,
            fake: OnceLock::new(),
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The recorder.
    pub fn recorder(&self) -> MutexGuard<'_, Recorder> {
        self.recorder.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The process of `host` ended at `at` (crash, restart, or a deploy's stop):
    /// the writes its callers were waiting on become unknown. For the relay, that
    /// is every write in flight on any app host (each is a request to it). Returns
    /// how many.
    pub fn end_boot(&self, host: u32, at: Duration) -> u64 {
        match self.hosts[host as usize].role {
            Role::Relay => self.ledger().end_all(at),
            Role::App | Role::ThroughRelay => self.ledger().end_boot(host, at),
        }
    }
}

/// Simulated time since t = 0.
pub fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

/// A boot begins: counts it and waits out its boot delay (cut short by a command).
pub(crate) async fn begin(shared: &Shared, host: u32) -> (u16, watch::Receiver<Command>) {
    let control = &shared.hosts[host as usize];
    let (boot, delay) = control.begin_boot();
    let mut commands = control.command.subscribe();
    if !delay.is_zero() && *commands.borrow_and_update() == Command::Run {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = commands.changed() => {}
        }
    }
    (boot, commands)
}

/// Where a host goes once it has stopped gracefully.
pub(crate) fn stopped_phase(commands: &watch::Receiver<Command>) -> Phase {
    if *commands.borrow() == Command::Finish {
        Phase::Finished
    } else {
        Phase::Stopped
    }
}
