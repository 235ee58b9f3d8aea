//! The fake Cloud Storage ([`fake_gcs`]) as a turmoil host: its accept loop on
//! turmoil's simulated TCP, and its clock on turmoil's simulated time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fake_gcs::{FakeGcs, SimClock};

/// Serves `fake` inside a turmoil host on `0.0.0.0:port`, until the host stops.
///
/// ```no_run
/// # fn demo(sim: &mut turmoil::Sim<'_>, fake: fake_gcs::FakeGcs) {
/// sim.host("gcs", move || {
///     let fake = fake.clone();
///     async move {
///         sim::hosts::gcs::serve(fake, 4443).await?;
///         Ok(())
///     }
/// });
/// # }
/// ```
pub async fn serve(fake: FakeGcs, port: u16) -> std::io::Result<()> {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", port)).await?;
    loop {
        let (stream, peer) = listener.accept().await?;
        let fake = fake.clone();
        tokio::spawn(async move {
            if let Err(e) = fake.serve_connection(stream).await {
                tracing::debug!(target: "fake_gcs", %peer, "connection ended: {e}");
            }
        });
    }
}

/// Simulated time inside turmoil: `elapsed` is [`turmoil::sim_elapsed`] and wall time
/// is [`turmoil::since_epoch`] (so set `Builder::epoch` explicitly).
///
/// Outside a running host (for example when a checker reads the fake after
/// `Sim::run` returned) both return the last value read inside the simulation.
#[derive(Debug, Default)]
pub struct TurmoilClock {
    last_elapsed_ns: AtomicU64,
    last_wall_ms: AtomicU64,
}

impl TurmoilClock {
    /// A clock reading turmoil's simulated time.
    pub fn new() -> Self {
        Self::default()
    }
}

impl SimClock for TurmoilClock {
    fn elapsed(&self) -> Duration {
        match turmoil::sim_elapsed() {
            Some(elapsed) => {
                self.last_elapsed_ns
                    .fetch_max(elapsed.as_nanos() as u64, Ordering::SeqCst);
                elapsed
            }
            None => Duration::from_nanos(self.last_elapsed_ns.load(Ordering::SeqCst)),
        }
    }

    fn now_unix_ms(&self) -> u64 {
        match turmoil::since_epoch() {
            Some(since) => {
                let ms = since.as_millis() as u64;
                self.last_wall_ms.fetch_max(ms, Ordering::SeqCst);
                ms
            }
            None => self.last_wall_ms.load(Ordering::SeqCst),
        }
    }
}
