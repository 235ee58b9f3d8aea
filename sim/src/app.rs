//! The app host: what a service embedding the spool runs, on a turmoil host.
//!
//! Each boot opens the production [`spool::Spool`] on the simulated disk, starts the
//! production [`spool::Drainer`] and [`spool::Uploader`] against the fake Cloud
//! Storage through the production `object_store` GCS client, and runs a producer that
//! issues writes at the scenario's rate (Poisson arrivals, open loop: a slow upload
//! does not slow the arrivals) and records what every caller was told in the
//! [`Ledger`], which lives outside the host.
//!
//! The world controls a host through [`HostControl`]: a boot delay (how long the host
//! stays down after a crash, restart or deploy) and a command (`Run`, `Stop` for a
//! graceful deploy, `Finish` at the end of the run, which also takes the inventory).

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use fake_gcs::FakeGcs;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use spool::metrics::UploadOutcome;
use spool::{Drainer, DrainerConfig, Metrics, Outcome, Remote, Spool, UploadError, Uploader};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::ledger::{self, Ledger, Told};
use crate::mutants::{LyingStore, Mutant};
use crate::recorder::{HostSample, Recorder, ReopenCheck};
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

/// The world's handle on one app host; outlives the host's crashes.
#[derive(Debug)]
pub struct HostControl {
    /// The host index.
    pub index: u32,
    /// The host's disk: outlives its boots, loses power with it.
    pub disk: SimDisk,
    /// The current command.
    pub command: watch::Sender<Command>,
    state: Mutex<HostState>,
}

impl HostControl {
    fn new(index: u32, disk: SimDisk) -> Self {
        Self {
            index,
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

    fn set_phase(&self, phase: Phase) {
        self.state().phase = phase;
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
    /// One per app host.
    pub hosts: Vec<HostControl>,
    /// A deliberate bug planted at a seam (the mutant catalogue's tests only).
    pub mutant: Option<Mutant>,
    /// The fake, once started: producers plant other writers' objects in it.
    pub fake: OnceLock<FakeGcs>,
}

impl Shared {
    /// Shared state for `scenario`.
    pub fn new(scenario: Arc<Scenario>, mutant: Option<Mutant>) -> Self {
        let hosts = scenario.workload.hosts;
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
        Self {
            ledger: Mutex::new(Ledger::new(hosts)),
            recorder: Mutex::new(Recorder::new(hosts, scenario.sample)),
            hosts: (0..hosts).map(|h| HostControl::new(h, disk(h))).collect(),
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
}

/// Simulated time since t = 0.
pub fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

/// The spool's wall clock: the scenario's start plus simulated time.
#[derive(Debug)]
struct SimWallClock {
    start_unix_ms: u64,
}

impl spool::Clock for SimWallClock {
    fn now_unix_ms(&self) -> u64 {
        self.start_unix_ms + now().as_millis() as u64
    }
}

/// `uploads_total` by outcome.
pub fn upload_counts(metrics: &Metrics) -> std::collections::BTreeMap<&'static str, u64> {
    [
        ("stored", UploadOutcome::Stored),
        ("spooled", UploadOutcome::Spooled),
        ("rejected", UploadOutcome::Rejected),
        ("failed", UploadOutcome::Failed),
    ]
    .into_iter()
    .map(|(name, outcome)| (name, metrics.uploads_total(outcome)))
    .collect()
}

/// The host software: one boot, from boot delay to graceful stop.
pub async fn run_host(shared: Arc<Shared>, host: u32) -> turmoil::Result {
    let control = &shared.hosts[host as usize];
    let (boot, delay) = control.begin_boot();
    let mut commands = control.command.subscribe();
    if !delay.is_zero() && *commands.borrow_and_update() == Command::Run {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = commands.changed() => {}
        }
    }
    let Some(spool) = open_spool(&shared, host, boot, &mut commands).await else {
        // The run ended while the spool could not be opened; the world takes the
        // inventory from the disk.
        control.set_phase(Phase::Finished);
        return Ok(());
    };
    let metrics = spool.metrics().clone();
    control.state().metrics = Some((boot, metrics.clone()));
    control.set_phase(Phase::Running);

    let scenario = &shared.scenario;
    let mut store = crate::connector::gcs_store(&format!("http://{GCS_HOST}:{GCS_PORT}"), BUCKET)
        .map_err(|e| format!("cannot build the GCS client: {e}"))?;
    if let Some(Mutant::Store(lie)) = shared.mutant {
        store = LyingStore::new(store, lie);
    }
    let remote = Remote::new(store);
    let run = *commands.borrow_and_update() == Command::Run;
    let drainer = run.then(|| {
        let config = DrainerConfig {
            rng_seed: Some(derive_seed(
                scenario.seed,
                &[purpose::DRAINER, host.into(), boot.into()],
            )),
            ..scenario.drainer
        };
        Drainer::start(spool.clone(), remote.clone(), config)
    });
    let uploader = Uploader::new(spool.clone(), remote, scenario.uploader);
    let sampler = tokio::spawn(sample(shared.clone(), host, boot, spool.clone()));

    if run {
        produce(&shared, host, boot, &uploader, &mut commands).await;
    }
    if let Some(drainer) = drainer {
        drainer.shutdown().await;
    }
    sampler.abort();
    shared
        .recorder()
        .boot_uploads
        .insert((host, boot), upload_counts(&metrics));
    if *commands.borrow() == Command::Finish {
        control.set_phase(Phase::Finished);
    } else {
        control.set_phase(Phase::Stopped);
    }
    drop(uploader);
    drop(spool);
    Ok(())
}

/// Opens the spool, retrying every second (as a supervisor would restart a service
/// that fails at start) until it opens or the run finishes. Records the check of the
/// gauges against the disk.
async fn open_spool(
    shared: &Arc<Shared>,
    host: u32,
    boot: u16,
    commands: &mut watch::Receiver<Command>,
) -> Option<Spool> {
    let control = &shared.hosts[host as usize];
    let scenario = &shared.scenario;
    let dir = Path::new(SPOOL_DIR);
    loop {
        let clock = Arc::new(SimWallClock {
            start_unix_ms: scenario.wall_ms(Duration::ZERO),
        });
        let opened = Spool::open_with(
            dir,
            scenario.spool.clone(),
            Arc::new(control.disk.clone()),
            clock,
            Metrics::default(),
        )
        .await;
        let mut check = ReopenCheck {
            at: now(),
            host,
            boot,
            gauges: (0, 0),
            on_disk: (0, 0),
            open_error: None,
        };
        match opened {
            Ok((spool, _)) => {
                let stats = spool.stats();
                check.gauges = (stats.files, stats.bytes);
                check.on_disk =
                    entries_on_disk(&control.disk, &dir.join(spool::layout::ENTRIES_DIR)).await;
                shared.recorder().reopens.push(check);
                return Some(spool);
            }
            Err(e) => {
                check.open_error = Some(e.to_string());
                shared.recorder().reopens.push(check);
                if *commands.borrow() == Command::Finish {
                    return None;
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = commands.changed() => {}
                }
            }
        }
    }
}

/// Entry files in `dir` and their total size, read straight from the simulated disk
/// (the file sizes, not what their names say).
async fn entries_on_disk(disk: &SimDisk, dir: &Path) -> (u64, u64) {
    disk.file_sizes(dir)
        .into_iter()
        .filter(|(name, _)| spool::layout::parse_seq(name).is_some())
        .fold((0, 0), |(files, bytes), (_, size)| {
            (files + 1, bytes + size)
        })
}

/// Issues writes at the scenario's rate until told to stop or the workload ends,
/// then waits for the uploads in flight.
async fn produce(
    shared: &Arc<Shared>,
    host: u32,
    boot: u16,
    uploader: &Uploader,
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
                let (uploader, shared) = (uploader.clone(), shared.clone());
                in_flight.spawn(async move {
                    let told = told(uploader.upload_with(&name, payload, &attributes).await);
                    shared.ledger().tell(host, seq, now(), told);
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

/// Records the spool's gauges and counters at every sample instant.
async fn sample(shared: Arc<Shared>, host: u32, boot: u16, spool: Spool) {
    let interval = shared.scenario.sample;
    loop {
        let index = shared.recorder().index(now()) + 1;
        let at = interval * index as u32;
        tokio::time::sleep(at.saturating_sub(now())).await;
        let metrics = spool.metrics();
        let stats = spool.stats();
        let sample = HostSample {
            boot,
            scrape: spool::alerts::Scrape::new(&stats, metrics),
            stats,
            drained: metrics.drained_total(spool::metrics::DrainOutcome::Uploaded)
                + metrics.drained_total(spool::metrics::DrainOutcome::AlreadyPresent),
            dead_lettered: metrics.dead_lettered_total(),
        };
        let mut recorder = shared.recorder();
        let index = recorder.index(now());
        recorder.host_samples[host as usize].insert(index, sample);
    }
}
