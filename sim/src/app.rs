//! The app host: what a service embedding the spool runs, on a turmoil host; and
//! what the world knows of every host ([`HostControl`], [`Shared`]).
//!
//! Each boot of a host with a spool ([`crate::node`]) opens the production
//! [`spool::Spool`] on the simulated disk, starts the production [`spool::Drainer`]
//! and [`spool::Uploader`] against the fake Cloud Storage through the production
//! `object_store` GCS client, and samples the spool's gauges. An app host then runs
//! a producer that issues writes at the scenario's rate (Poisson arrivals, open
//! loop: a slow upload does not slow the arrivals) and records what every caller was
//! told in the [`Ledger`], which lives outside the host. With the relay on, an app
//! host keeps no spool: its producer writes through the relay over HTTP
//! (`Writer::Relay`).
//!
//! The world controls a host through [`HostControl`]: a boot delay (how long the host
//! stays down after a crash, restart or deploy) and a command (`Run`, `Stop` for a
//! graceful deploy, `Finish` at the end of the run, which also takes the inventory).

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use fake_gcs::FakeGcs;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use spool::metrics::UploadOutcome;
use spool::{Metrics, Outcome, UploadError, Uploader};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::ledger::{self, Ledger, Told};
use crate::mutants::Mutant;
use crate::node::Node;
use crate::recorder::Recorder;
use crate::relay_host::{RelayAnswer, RelayClient};
use crate::scenario::{Scenario, SizeDist};
use crate::simdisk::SimDisk;
use crate::workload::OtherWriter;

/// The bucket every host writes to.
pub const BUCKET: &str = "spool-sim";
/// The fake Cloud Storage host.
pub const GCS_HOST: &str = "gcs";
/// The fake's port.
pub const GCS_PORT: u16 = 4443;
/// Where each host keeps its spool.
pub const SPOOL_DIR: &str = "/var/spool/uploads";

/// Turmoil host name of app host `i`.
pub fn host_name(i: u32) -> String {
    format!("app-{i}")
}

/// Derives an independent seed for one purpose from the scenario seed.
pub fn derive_seed(seed: u64, parts: &[u64]) -> u64 {
    let mut z = seed;
    for &p in parts {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_add(p);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
    }
    z
}

/// Seed purposes, for [`derive_seed`].
pub mod purpose {
    /// turmoil's world RNG.
    pub const TURMOIL: u64 = 1;
    /// The fake's fault RNG.
    pub const FAKE: u64 = 2;
    /// A host boot's producer.
    pub const PRODUCER: u64 = 3;
    /// A host boot's drainer jitter.
    pub const DRAINER: u64 = 4;
    /// Payload bytes.
    pub const PAYLOAD: u64 = 5;
    /// A host's disk (faults and what survives power loss).
    pub const DISK: u64 = 6;
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
            Role::Relay => crate::relay_host::RELAY_HOST.to_string(),
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
            ledger: Mutex::new(Ledger::new(app_hosts)),
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

/// The app host's software with its own spool: one boot, from boot delay to
/// graceful stop.
pub async fn run_host(shared: Arc<Shared>, host: u32) -> turmoil::Result {
    let (boot, mut commands) = begin(&shared, host).await;
    let Some(node) = Node::start(&shared, host, boot, &mut commands).await? else {
        return Ok(());
    };
    if node.serving() {
        let writer = Writer::Spool(node.uploader.clone());
        produce(&shared, host, boot, &writer, &mut commands).await;
    }
    node.stop(&shared, host, &commands).await;
    Ok(())
}

/// The app host's software with the relay on: no spool; the producer writes
/// through the relay. One boot, from boot delay to graceful stop.
pub async fn run_through_relay(shared: Arc<Shared>, host: u32) -> turmoil::Result {
    let (boot, mut commands) = begin(&shared, host).await;
    let control = &shared.hosts[host as usize];
    control.set_phase(Phase::Running);
    if *commands.borrow_and_update() == Command::Run {
        let client =
            RelayClient::new().map_err(|e| format!("cannot build the relay's client: {e}"))?;
        produce(&shared, host, boot, &Writer::Relay(client), &mut commands).await;
    }
    control.set_phase(stopped_phase(&commands));
    Ok(())
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

/// Issues writes at the scenario's rate until told to stop or the workload ends,
/// then waits for the uploads in flight.
async fn produce(
    shared: &Arc<Shared>,
    host: u32,
    boot: u16,
    writer: &Writer,
    commands: &mut watch::Receiver<Command>,
) {
    let scenario = &shared.scenario;
    let workload = &scenario.workload;
    let mut rng = ChaCha8Rng::seed_from_u64(derive_seed(
        scenario.seed,
        &[purpose::PRODUCER, host.into(), boot.into()],
    ));
    let payload_seed = derive_seed(scenario.seed, &[purpose::PAYLOAD]);
    let shape = scenario.shape();
    let mut in_flight = JoinSet::new();
    let mut next = now() + exponential(&mut rng, workload.rate);
    loop {
        let producing = next < workload.stop_at;
        let wait = next.saturating_sub(now());
        tokio::select! {
            biased;
            _ = commands.changed() => break,
            Some(_) = in_flight.join_next() => {}
            _ = tokio::time::sleep(wait), if producing => {
                let size = draw_size(&mut rng, workload.size);
                let poison = workload.poison > 0.0 && rng.random_bool(workload.poison);
                let seq = shared.ledger().next_seq(host);
                let payload = ledger::payload(payload_seed, host, seq, size as usize);
                let crc = crc32c::crc32c(&payload);
                let issued = shared.ledger().issue(host, boot, now(), size, crc, poison);
                debug_assert_eq!(issued, seq);
                let name = shape.name(host, seq, poison);
                let attributes = shape.attributes(host, seq);
                if let Some(other) = shape.other_writer(host, seq, poison, &payload) {
                    plant(shared, &name, other);
                }
                let (writer, shared) = (writer.clone(), shared.clone());
                in_flight.spawn(async move {
                    if let Some(told) = writer.write(&shared, &name, payload, &attributes).await {
                        shared.ledger().tell(host, seq, now(), told);
                    }
                });
                next += exponential(&mut rng, workload.rate);
            }
            else => break,
        }
    }
    while in_flight.join_next().await.is_some() {}
}

/// Puts `other`'s object under `name` in the bucket, as another writer would have
/// just before the producer's write.
fn plant(shared: &Shared, name: &str, other: OtherWriter) {
    let fake = shared.fake.get().expect("the fake starts before any host");
    fake.insert_object(
        BUCKET,
        name,
        other.bytes,
        other.content_type.as_deref(),
        other.attributes,
        other.composite,
    );
}

/// How a producer writes: through its own spool's uploader, or through the relay.
#[derive(Debug, Clone)]
pub(crate) enum Writer {
    /// The production uploader, in process.
    Spool(Uploader),
    /// The production GCS client, pointed at the relay.
    Relay(RelayClient),
}

impl Writer {
    /// Writes one object; what its caller is told, or `None` when the request
    /// reached the relay and no answer came back (the relay's process ended: the
    /// world makes it unknown).
    async fn write(
        &self,
        shared: &Shared,
        name: &str,
        payload: bytes::Bytes,
        attributes: &object_store::Attributes,
    ) -> Option<Told> {
        match self {
            Writer::Spool(uploader) => {
                Some(told(uploader.upload_with(name, payload, attributes).await))
            }
            Writer::Relay(client) => match client.write(name, payload, attributes).await {
                RelayAnswer::Told(told) => Some(told),
                RelayAnswer::Unreached => {
                    shared.recorder().relay_unreached += 1;
                    Some(Told::Failed)
                }
                RelayAnswer::NoAnswer => None,
            },
        }
    }
}

fn told(result: Result<Outcome, UploadError>) -> Told {
    match UploadOutcome::of(&result) {
        UploadOutcome::Stored => Told::Stored,
        UploadOutcome::Spooled => Told::Spooled,
        UploadOutcome::Rejected => Told::Rejected,
        UploadOutcome::Failed => Told::Failed,
    }
}

/// An exponential inter-arrival time for `rate` events per second.
fn exponential(rng: &mut ChaCha8Rng, rate: f64) -> Duration {
    let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    Duration::from_secs_f64(-u.ln() / rate)
}

fn draw_size(rng: &mut ChaCha8Rng, size: SizeDist) -> u32 {
    match size {
        SizeDist::Fixed(n) => n as u32,
        SizeDist::LogUniform { min, max } if min >= max => min as u32,
        SizeDist::LogUniform { min, max } => {
            let (lo, hi) = ((min.max(1) as f64).ln(), (max as f64).ln());
            (rng.random_range(lo..=hi).exp().round() as u64).clamp(min, max) as u32
        }
    }
}
