//! The app host: what a service embedding the spool runs, on a turmoil host.
//!
//! Each boot of a host with a spool ([`super::node`]) opens the production
//! [`spool::Spool`] on the simulated disk, starts the production [`spool::Drainer`]
//! and [`spool::Uploader`] against the fake Cloud Storage through the production
//! `object_store` GCS client, and samples the spool's gauges. An app host then runs
//! a producer that issues writes at the scenario's rate (Poisson arrivals, open
//! loop: a slow upload does not slow the arrivals) and records what every caller was
//! told in the [`Ledger`](crate::ledger::Ledger), which lives outside the host. With the relay on, an app
//! host keeps no spool: its producer writes through the relay over HTTP
//! (`Writer::Relay`), and between its writes reads, lists and deletes through the
//! relay when the scenario asks ([`super::relay_reader`]).

use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use spool::metrics::UploadOutcome;
use spool::{Outcome, UploadError, Uploader};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::control::{BUCKET, Command, Phase, Shared, begin, now, stopped_phase};
use super::node::Node;
use super::relay_client::{RelayAnswer, RelayClient};
use super::relay_reader::RelayReader;
use crate::ledger::{self, Told};
use crate::scenario::SizeDist;
use crate::seed::{derive_seed, purpose};
use crate::workload::{OtherWriter, Shape};
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
    let shape = Shape::of(scenario);
    let mut reader = match writer {
        Writer::Relay(client) => RelayReader::of(shared, host, boot, client),
        Writer::Spool(_) => None,
    };
    let mut in_flight = JoinSet::new();
    let mut next = now() + exponential(&mut rng, workload.rate);
    // One timer for the whole loop, moved to each next arrival, and finished writes
    // reaped as each new one starts rather than on each finish: a write then costs
    // one timer and one wake of this task, not two of each.
    let arrival = tokio::time::sleep(next.saturating_sub(now()));
    tokio::pin!(arrival);
    // One wait for a command for the whole loop, as for the arrivals: a new one per
    // write registered and dropped a waiter each time (about 1% of the bench's
    // 90-minute slice in a profile, docs/benchmarks-log.md, 2026-12-06).
    let command = commands.changed();
    tokio::pin!(command);
    loop {
        let producing = next < workload.stop_at;
        tokio::select! {
            biased;
            _ = &mut command => break,
            () = &mut arrival, if producing => {
                while in_flight.try_join_next().is_some() {}
                // The simulated clock read once per write: a read looks the host
                // up in turmoil's world.
                let at = now();
                let size = draw_size(&mut rng, workload.size);
                let poison = workload.poison > 0.0 && rng.random_bool(workload.poison);
                let seq = shared.ledger().next_seq(host);
                let payload = ledger::payload(payload_seed, host, seq, size as usize);
                let crc = crc32c::crc32c(&payload);
                let issued = shared.ledger().issue(host, boot, at, size, crc, poison);
                debug_assert_eq!(issued, seq);
                let name = shape.name(host, seq, poison);
                let attributes = shape.attributes(host, seq);
                if let Some(other) = shape.other_writer(host, seq, poison, &payload) {
                    plant(shared, &name, other);
                }
                let mode = shape.write_mode();
                let (writer, shared) = (writer.clone(), shared.clone());
                // Boxed: the write's future is about 2.3 KiB, which tokio would
                // otherwise copy into the task, into its finished stage and out of
                // it again; the task then holds a pointer.
                in_flight.spawn(Box::pin(async move {
                    if let Some(told) = writer.write(&shared, &name, payload, &attributes, mode).await {
                        shared.ledger().tell(host, seq, now(), told);
                    }
                }));
                if let Some(reader) = &mut reader {
                    reader.issue(&shape, seq, &mut in_flight);
                }
                next += exponential(&mut rng, workload.rate);
                // Anchored on the timer's clock at each arrival, not once: with a tick
                // that is not whole milliseconds the two clocks may drift apart.
                arrival.as_mut().reset(tokio::time::Instant::now() + next.saturating_sub(at));
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
        mode: spool::WriteMode,
    ) -> Option<Told> {
        match self {
            Writer::Spool(uploader) => Some(told(
                uploader
                    .upload_with_mode(name, payload, attributes, mode)
                    .await,
            )),
            Writer::Relay(client) => match client.write(name, payload, attributes, mode).await {
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
