//! `fake-gcs`: the Cloud Storage fake on a real port (see docs/fake-gcs.md).

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Serve the Cloud Storage fake on a real port, logging every request.
#[derive(Debug, Parser)]
#[command(name = "fake-gcs", version)]
struct Cli {
    #[command(flatten)]
    args: fake_gcs::cli::Args,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    match fake_gcs::cli::run(cli.args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake-gcs: {e:#}");
            ExitCode::FAILURE
        }
    }
}
