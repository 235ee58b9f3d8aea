//! `spool`: look at a spool directory during an incident, without stopping the
//! service that owns it (no lock is taken, nothing is moved).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use spool::clock::{Clock, SystemClock};
use spool::format;
use spool::inspect::{self, Depth, Scan};

#[derive(Parser)]
#[command(
    version,
    about = "Inspect a spool directory (read-only; safe on a live spool)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Files, bytes, oldest age, quarantine and dead-letter counts.
    Stat {
        /// The spool directory.
        dir: PathBuf,
    },
    /// One line per pending entry, oldest first: sequence, created, age, bytes, name.
    Ls {
        /// The spool directory.
        dir: PathBuf,
        /// Show at most this many entries.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Read every entry in full and check lengths and checksums; also lists
    /// quarantined and dead-lettered files with their reasons. Exits 1 if any entry
    /// is corrupt.
    Verify {
        /// The spool directory.
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (dir, depth) = match &cli.command {
        Command::Stat { dir } | Command::Ls { dir, .. } => (dir, Depth::Headers),
        Command::Verify { dir } => (dir, Depth::Full),
    };
    let scan = match inspect::scan(dir, depth) {
        Ok(scan) => scan,
        Err(e) => {
            eprintln!("spool: {e}");
            return ExitCode::from(2);
        }
    };
    let now_ms = SystemClock.now_unix_ms();
    match cli.command {
        Command::Stat { dir } => stat(&dir, &scan, now_ms),
        Command::Ls { limit, .. } => ls(&scan, limit, now_ms),
        Command::Verify { .. } => return verify(&scan),
    }
    ExitCode::SUCCESS
}

fn stat(dir: &std::path::Path, scan: &Scan, now_ms: u64) {
    println!("spool {}", dir.display());
    println!(
        "  entries      {} files, {}",
        scan.entries.len(),
        format::bytes(scan.entry_bytes())
    );
    if let Some(oldest) = scan.entries.first() {
        let created = oldest.header.created_unix_ms;
        println!(
            "  oldest       {} (age {})",
            format::rfc3339_millis(created),
            age(now_ms, created)
        );
    }
    if let Some(newest) = scan.entries.iter().max_by_key(|e| e.header.created_unix_ms) {
        let created = newest.header.created_unix_ms;
        println!(
            "  newest       {} (age {})",
            format::rfc3339_millis(created),
            age(now_ms, created)
        );
    }
    println!("  in progress  {} temp files", scan.temp_files);
    println!(
        "  unreadable   {} files (quarantined at next open)",
        scan.corrupt.len()
    );
    println!("  quarantine   {} files", scan.quarantined.len());
    println!("  dead-letter  {} files", scan.dead_letters.len());
}

fn ls(scan: &Scan, limit: Option<usize>, now_ms: u64) {
    println!(
        "{:>20}  {:24}  {:>10}  {:>10}  name",
        "seq", "created", "age", "bytes"
    );
    for e in scan.entries.iter().take(limit.unwrap_or(usize::MAX)) {
        let h = &e.header;
        println!(
            "{:>20}  {:24}  {:>10}  {:>10}  {}",
            h.seq,
            format::rfc3339_millis(h.created_unix_ms),
            age(now_ms, h.created_unix_ms),
            h.payload_len,
            h.name
        );
    }
    if let Some(limit) = limit.filter(|l| *l < scan.entries.len()) {
        println!("... {} more", scan.entries.len() - limit);
    }
}

fn verify(scan: &Scan) -> ExitCode {
    println!(
        "{} entries verified ({})",
        scan.entries.len(),
        format::bytes(scan.entry_bytes())
    );
    for (file, reason) in &scan.corrupt {
        println!("CORRUPT  entries/{file}: {reason}");
    }
    for q in &scan.quarantined {
        println!("QUARANTINED  quarantine/{}: {}", q.file, q.note);
    }
    for d in &scan.dead_letters {
        println!("DEAD-LETTER  dead-letter/{}: {}", d.file, d.note);
    }
    if scan.corrupt.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!(
            "{} corrupt entries; the service moves them to quarantine/ when it next opens the spool",
            scan.corrupt.len()
        );
        ExitCode::from(1)
    }
}

fn age(now_ms: u64, then_ms: u64) -> String {
    format::duration(Duration::from_secs(now_ms.saturating_sub(then_ms) / 1000))
}
