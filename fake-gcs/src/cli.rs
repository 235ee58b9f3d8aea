//! The command line of the `fake-gcs` binary (also `sim fake-gcs`): the flags, and
//! serving the fake on a real port with them until interrupted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::clock::TokioClock;
use crate::fake::{FakeGcs, FakeGcsConfig};
use crate::faults::FaultPlan;

/// Flags of `fake-gcs` (and `sim fake-gcs`). The field docs are clap's help text.
#[derive(Debug, Clone, clap::Args)]
#[allow(rustdoc::broken_intra_doc_links)]
pub struct Args {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:4443")]
    pub listen: SocketAddr,
    /// A bucket that exists (repeatable). Without any, every bucket name is
    /// created on first use.
    #[arg(long = "bucket", value_name = "NAME")]
    pub buckets: Vec<String>,
    /// Fault plan (TOML: [[fault]] windows and [capacity]).
    #[arg(long, value_name = "FILE")]
    pub faults: Option<PathBuf>,
    /// Seed of the fault RNG.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Keep object bytes so they can be downloaded (otherwise only digests).
    #[arg(long)]
    pub keep_bytes: bool,
}

/// Serves the fake on `args.listen` in a new tokio runtime, logging every request
/// (`tracing`, target `fake_gcs`, level info), until the process is stopped. Fails
/// when the fault plan cannot be read or is invalid, or the address cannot be bound.
pub fn run(args: Args) -> anyhow::Result<()> {
    let faults = match &args.faults {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            FaultPlan::from_toml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => FaultPlan::none(),
    };
    let config = FakeGcsConfig {
        auto_create_buckets: args.buckets.is_empty(),
        buckets: args.buckets,
        keep_bytes: args.keep_bytes,
        seed: args.seed,
        faults,
        ..FakeGcsConfig::default()
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        tracing::info!(
            target: "fake_gcs",
            addr = %listener.local_addr()?,
            seed = config.seed,
            windows = config.faults.windows.len(),
            keep_bytes = config.keep_bytes,
            "fake Cloud Storage listening"
        );
        let fake = FakeGcs::new(config, Arc::new(TokioClock::start()))?;
        fake.serve_tcp(listener).await?;
        Ok(())
    })
}
