//! The command line of the `fake-gcs` binary (also `sim fake-gcs`): the flags and
//! the environment variables behind them, and serving the fake on a real port with
//! them until interrupted.
//!
//! On a real port the fake keeps object bytes unless told `--drop-bytes`: a user
//! expects to read back what was written. (A library user, such as the
//! simulation, keeps [`FakeGcsConfig::keep_bytes`]'s default of false.)

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::builder::BoolishValueParser;

use crate::clock::TokioClock;
use crate::fake::{FakeGcs, FakeGcsConfig};
use crate::faults::FaultPlan;

/// Flags of `fake-gcs` (and `sim fake-gcs`). The field docs are clap's help text;
/// each flag can also come from the environment variable it names.
#[derive(Debug, Clone, clap::Args)]
#[allow(rustdoc::broken_intra_doc_links)]
pub struct Args {
    /// Address to listen on (loopback by default).
    #[arg(long, env = "FAKE_GCS_LISTEN", default_value = "127.0.0.1:4443")]
    pub listen: SocketAddr,
    /// A bucket that exists (repeatable; the variable takes a comma-separated
    /// list). Other buckets exist once created (`POST /storage/v1/b`), as in
    /// Cloud Storage, unless --create-buckets-on-use.
    #[arg(
        long = "bucket",
        value_name = "NAME",
        env = "FAKE_GCS_BUCKETS",
        value_delimiter = ','
    )]
    pub buckets: Vec<String>,
    /// Serve HTTPS with this certificate chain (PEM), for clients that speak only
    /// HTTPS (gsutil's JSON API); needs --tls-key.
    #[arg(
        long,
        value_name = "PEM",
        env = "FAKE_GCS_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "PEM",
        env = "FAKE_GCS_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Create a bucket the first time a request names it (a valid name, not one
    /// deleted since), instead of answering 404 as Cloud Storage does.
    #[arg(long, env = "FAKE_GCS_CREATE_BUCKETS_ON_USE")]
    pub create_buckets_on_use: bool,
    /// Fault plan (TOML: [[fault]] windows, [capacity], [[refuse]]).
    #[arg(long, value_name = "FILE", env = "FAKE_GCS_FAULTS")]
    pub faults: Option<PathBuf>,
    /// Seed of the fault RNG.
    #[arg(long, env = "FAKE_GCS_SEED", default_value_t = 0)]
    pub seed: u64,
    /// Keep only digests of objects, not their bytes (downloads then answer 501):
    /// for long runs that write more than memory holds. The variable takes
    /// true/false, 1/0, yes/no or on/off.
    #[arg(
        long,
        env = "FAKE_GCS_DROP_BYTES",
        value_parser = BoolishValueParser::new(),
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub drop_bytes: bool,
    /// Accepted for old scripts and ignored: bytes are kept unless --drop-bytes.
    #[arg(long, hide = true, conflicts_with = "drop_bytes")]
    pub keep_bytes: bool,
}

impl Args {
    /// The fake's configuration: the buckets (any bucket on first use with
    /// --create-buckets-on-use), the plan read from `--faults`, the seed, and bytes kept unless
    /// `--drop-bytes`. Fails when the plan cannot be read or is invalid.
    pub fn config(&self) -> anyhow::Result<FakeGcsConfig> {
        let faults = match &self.faults {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the fault plan {}", path.display()))?;
                FaultPlan::from_toml(&text).with_context(|| format!("in {}", path.display()))?
            }
            None => FaultPlan::none(),
        };
        // Names trimmed, empty ones dropped: `FAKE_GCS_BUCKETS=` means none.
        let buckets: Vec<String> = (self.buckets.iter())
            .map(|b| b.trim())
            .filter(|b| !b.is_empty())
            .map(str::to_string)
            .collect();
        Ok(FakeGcsConfig {
            auto_create_buckets: self.create_buckets_on_use,
            buckets,
            keep_bytes: !self.drop_bytes,
            seed: self.seed,
            faults,
            ..FakeGcsConfig::default()
        })
    }
}

/// Serves the fake on `args.listen` in a new tokio runtime, logging every request
/// (`tracing`, target `fake_gcs`, level info), until the process is stopped. Fails
/// when the fault plan cannot be read or is invalid, or the address cannot be bound.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.config()?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::acceptor(cert, key)?),
        _ => None,
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
            scheme = if tls.is_some() { "https" } else { "http" },
            "fake Cloud Storage listening"
        );
        let fake = FakeGcs::new(config, Arc::new(TokioClock::start()))?;
        fake.serve_tcp_with(listener, tls).await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        let argv = std::iter::once("fake-gcs").chain(flags.iter().copied());
        Cli::try_parse_from(argv).map(|cli| cli.args)
    }

    // Environment variables are tested on the binary (tests/binary.rs): setting
    // them here would race with other tests in this process.

    #[test]
    fn bytes_are_kept_unless_dropped() {
        let plain = parse(&["--listen", "127.0.0.1:0"]).unwrap();
        assert!(plain.config().unwrap().keep_bytes);
        assert!(!plain.config().unwrap().auto_create_buckets);
        let on_use = parse(&["--create-buckets-on-use"]).unwrap();
        assert!(on_use.config().unwrap().auto_create_buckets);
        let dropped = parse(&["--drop-bytes"]).unwrap();
        assert!(!dropped.config().unwrap().keep_bytes);
        let old = parse(&["--keep-bytes"]).unwrap();
        assert!(old.config().unwrap().keep_bytes);
        let both = parse(&["--keep-bytes", "--drop-bytes"]).unwrap_err();
        assert!(both.to_string().contains("cannot be used with"), "{both}");
    }

    #[test]
    fn buckets_repeat_or_come_as_a_list() {
        let args = parse(&["--bucket", "a", "--bucket", "b, c,"]).unwrap();
        let config = args.config().unwrap();
        assert_eq!(config.buckets, ["a", "b", "c"]);
        assert!(!config.auto_create_buckets);
        // An empty list (as `FAKE_GCS_BUCKETS=` gives) names no bucket.
        let empty = parse(&["--bucket", ""]).unwrap().config().unwrap();
        assert!(empty.buckets.is_empty() && !empty.auto_create_buckets);
    }

    #[test]
    fn a_missing_plan_file_is_named() {
        let args = parse(&["--faults", "/nonexistent/plan.toml"]).unwrap();
        let e = format!("{:#}", args.config().unwrap_err());
        assert!(
            e.contains("cannot read the fault plan /nonexistent/plan.toml"),
            "{e}"
        );
    }
}
