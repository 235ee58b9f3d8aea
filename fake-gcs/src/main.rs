//! `fake-gcs`: the Cloud Storage fake on a real port (see docs/fake-gcs.md).

use std::io::IsTerminal as _;
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
    // Colours only on a terminal, so that a CI log (or a script reading the
    // `addr=` of the first line) gets plain text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal())
        .init();
    match fake_gcs::cli::run(cli.args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake-gcs: {e:#}");
            ExitCode::FAILURE
        }
    }
}
