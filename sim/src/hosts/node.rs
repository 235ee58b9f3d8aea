//! One boot of a host that keeps a spool, shared by the app host ([`super::app`])
//! and the relay host ([`super::relay`]): the production [`spool::Spool`]
//! opened on the host's `SimDisk` (retried as a supervisor would, its gauges
//! checked against the files on the disk), the production [`spool::Uploader`] and
//! [`spool::Drainer`] through the production `object_store` GCS client to the fake,
//! the sampler of its gauges and counters, and the graceful stop that records the
//! boot's `uploads_total`. What runs in front of it (a producer, or the relay's
//! server) is the host's own.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use spool::metrics::UploadOutcome;
use spool::{Drainer, DrainerConfig, Metrics, Remote, Spool, Uploader};
use tokio::sync::watch;

use super::control::{
    BUCKET, Command, GCS_HOST, GCS_PORT, Phase, SPOOL_DIR, Shared, now, stopped_phase,
};
use crate::mutants::{LyingStore, Mutant};
use crate::recorder::{HostSample, ReopenCheck};
use crate::scenario::Scenario;
use crate::seed::{derive_seed, purpose};
use crate::simdisk::SimDisk;

/// The spool's wall clock (and the relay's): the scenario's start plus simulated
/// time.
#[derive(Debug)]
pub(crate) struct SimWallClock {
    start_unix_ms: u64,
}

impl SimWallClock {
    pub(crate) fn new(scenario: &Scenario) -> Self {
        Self {
            start_unix_ms: scenario.wall_ms(Duration::ZERO),
        }
    }
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

/// One boot of a host that keeps a spool: the spool, its uploader and drainer (the
/// drainer only while serving) through the production GCS client, and the sampler.
pub(crate) struct Node {
    boot: u16,
    spool: Spool,
    metrics: Metrics,
    /// Puts objects in the store, or in the spool.
    pub(crate) uploader: Uploader,
    /// The production GCS client to the fake the uploader and drainer write
    /// through (the relay reads through it too).
    pub(crate) store: Arc<dyn object_store::ObjectStore>,
    drainer: Option<Drainer>,
    sampler: tokio::task::JoinHandle<()>,
}

impl Node {
    /// Opens the spool (retrying until it opens or the run finishes: `None` then,
    /// the host marked finished) and starts the rest.
    pub(crate) async fn start(
        shared: &Arc<Shared>,
        host: u32,
        boot: u16,
        commands: &mut watch::Receiver<Command>,
    ) -> Result<Option<Node>, String> {
        let control = &shared.hosts[host as usize];
        let Some(spool) = open_spool(shared, host, boot, commands).await else {
            // The run ended while the spool could not be opened; the world takes the
            // inventory from the disk.
            control.set_phase(Phase::Finished);
            return Ok(None);
        };
        let metrics = spool.metrics().clone();
        control.set_metrics(boot, metrics.clone());
        control.set_phase(Phase::Running);

        let scenario = &shared.scenario;
        let mut store =
            crate::connector::gcs_store(&format!("http://{GCS_HOST}:{GCS_PORT}"), BUCKET)
                .map_err(|e| format!("cannot build the GCS client: {e}"))?;
        if let Some(Mutant::Store(lie)) = shared.mutant {
            store = LyingStore::wrap(store, lie);
        }
        let remote = Remote::new(store.clone());
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
        Ok(Some(Node {
            boot,
            spool,
            metrics,
            uploader,
            store,
            drainer,
            sampler,
        }))
    }

    /// Whether the host serves this boot (it was not told to finish before it was up).
    pub(crate) fn serving(&self) -> bool {
        self.drainer.is_some()
    }

    /// Stops gracefully: the drainer between entries, the sampler; records the
    /// boot's counters.
    pub(crate) async fn stop(
        self,
        shared: &Shared,
        host: u32,
        commands: &watch::Receiver<Command>,
    ) {
        if let Some(drainer) = self.drainer {
            drainer.shutdown().await;
        }
        self.sampler.abort();
        shared
            .recorder()
            .boot_uploads
            .insert((host, self.boot), upload_counts(&self.metrics));
        shared.hosts[host as usize].set_phase(stopped_phase(commands));
        drop(self.uploader);
        drop(self.spool);
    }
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
        let clock = Arc::new(SimWallClock::new(scenario));
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
                    entries_on_disk(&control.disk, &dir.join(spool::layout::ENTRIES_DIR));
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
fn entries_on_disk(disk: &SimDisk, dir: &Path) -> (u64, u64) {
    disk.file_sizes(dir)
        .into_iter()
        .filter(|(name, _)| spool::layout::parse_seq(name).is_some())
        .fold((0, 0), |(files, bytes), (_, size)| {
            (files + 1, bytes + size)
        })
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
