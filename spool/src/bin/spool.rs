//! `spool`: look at and repair a spool directory.
//!
//! `stat`, `ls`, `verify` and `cat` only read: safe on a live spool, no lock taken.
//! `requeue` and `drain` change the spool, so they take its lock and refuse, saying
//! so, when a running service holds it. They open it with bounds no lower than what
//! the directory holds (entries and set-aside entries: `inspect::held`), whatever
//! bounds the service ran with: they add no bytes to the disk (`requeue` renames
//! files back), so the service's `max_bytes` is not theirs to enforce, and a spool
//! larger than the library's defaults is not refused as full.
//!
//! Exit codes: 0 done; 1 done, with findings (corrupt entries, files not requeued,
//! entries left or set aside by a drain); 2 usage, I/O or store error; 3 the spool is
//! locked by a running service.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};
use spool::clock::{Clock, SystemClock};
use spool::inspect::{self, Depth, EntryInfo};
use spool::{
    Drainer, DrainerConfig, OpenError, Remote, SetAside, Spool, SpoolConfig, format, layout,
};

const FINDINGS: u8 = 1;
const ERROR: u8 = 2;
const LOCKED: u8 = 3;

#[derive(Parser)]
#[command(version, about = "Look at and repair a spool directory")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Files, bytes, oldest and newest entry, quarantine and dead-letter counts
    /// (from the directory listing; read-only).
    Stat(Target),
    /// The oldest pending entries: sequence, created, age, bytes, name (read-only;
    /// reads only the headers it shows).
    Ls {
        #[command(flatten)]
        target: Target,
        /// Show at most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Read every entry in full and check lengths and checksums; list quarantined
    /// and dead-lettered files with their reasons. Exits 1 if any entry is corrupt.
    Verify(Target),
    /// Write one entry's payload to standard output, after verifying it; with
    /// --header, what the entry holds besides (object name, write mode, attributes,
    /// sizes and crc32c, and why it was set aside) as JSON instead.
    Cat {
        /// The spool directory.
        dir: PathBuf,
        /// The entry's sequence number.
        seq: u64,
        /// Where the entry is.
        #[arg(long, value_enum, default_value = "entries")]
        from: Place,
        /// Print the entry's header (and the note of a set-aside entry) as JSON, not
        /// its payload.
        #[arg(long)]
        header: bool,
    },
    /// Move dead-lettered or quarantined entries back into the queue (after fixing
    /// what made the store refuse them). Takes the spool's lock.
    Requeue {
        /// The spool directory.
        dir: PathBuf,
        /// Where to take entries from.
        #[arg(long, value_enum)]
        from: From,
        /// Sequence numbers to requeue.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        seqs: Vec<u64>,
        /// Requeue every entry there.
        #[arg(long)]
        all: bool,
        /// Print a JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Empty a spool into a store with the library's drainer (for example a host
    /// being retired). Takes the spool's lock; stops when the spool is empty or no
    /// entry has drained for --stall-timeout.
    Drain(DrainArgs),
    /// Print the alert rules (Prometheus rules file).
    Rules {
        /// Where your copy of the runbook is (an http or https URL, such as your
        /// repository's docs/runbook.md or your wiki's page): each alert's
        /// `runbook_url` is `URL#its-section`, a link an alert notification can
        /// carry. Without it, the repository's relative `docs/runbook.md`.
        #[arg(long, value_name = "URL", value_parser = absolute_url)]
        runbook_url: Option<String>,
    },
}

/// An absolute http(s) URL without a fragment (the rules add each alert's).
fn absolute_url(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("must be an absolute http:// or https:// URL")?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err("names no host".into());
    }
    if url.contains('#') || url.chars().any(char::is_whitespace) {
        return Err("must have no '#' (each alert adds its section's) and no spaces".into());
    }
    Ok(url.to_owned())
}

#[derive(Args)]
struct Target {
    /// The spool directory.
    dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct DrainArgs {
    /// The spool directory.
    dir: PathBuf,
    /// The store: gs://BUCKET, file:///PATH or memory://.
    #[arg(long)]
    to: String,
    /// A Cloud Storage emulator to send gs:// writes to (for example fake-gcs);
    /// default $STORAGE_EMULATOR_HOST.
    #[arg(long)]
    endpoint: Option<String>,
    /// Concurrent drain writes.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Give up when nothing has drained for this long.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    stall_timeout: Duration,
}

#[derive(Clone, Copy, ValueEnum)]
enum From {
    DeadLetter,
    Quarantine,
}

#[derive(Clone, Copy, ValueEnum)]
enum Place {
    Entries,
    DeadLetter,
    Quarantine,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Stat(target) => stat(&target),
        Command::Ls { target, limit } => ls(&target, limit),
        Command::Verify(target) => verify(&target),
        Command::Cat {
            dir,
            seq,
            from,
            header,
        } => cat(&dir, seq, from, header),
        Command::Requeue {
            dir,
            from,
            seqs,
            all,
            json,
        } => runtime().block_on(requeue(&dir, from, (!all).then_some(&seqs[..]), json)),
        Command::Drain(args) => runtime().block_on(drain(&args)),
        Command::Rules { runbook_url } => {
            let options = spool::alerts::RulesOptions {
                runbook_base: runbook_url
                    .as_deref()
                    .unwrap_or(spool::alerts::DEFAULT_RUNBOOK_BASE),
                ..Default::default()
            };
            print!("{}", spool::alerts::rules_yaml_with(&options));
            Ok(ExitCode::SUCCESS)
        }
    };
    result.unwrap_or_else(|(code, message)| {
        eprintln!("spool: {message}");
        ExitCode::from(code)
    })
}

type Outcome = Result<ExitCode, (u8, String)>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

fn io_error(e: impl std::fmt::Display) -> (u8, String) {
    (ERROR, e.to_string())
}

fn now_ms() -> u64 {
    SystemClock.now_unix_ms()
}

fn age(then_ms: u64) -> String {
    format::duration(Duration::from_secs(now_ms().saturating_sub(then_ms) / 1000))
}

fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).expect("JSON values serialize")
    );
}

fn stat(target: &Target) -> Outcome {
    let s = inspect::summary(&target.dir).map_err(io_error)?;
    if target.json {
        print_json(&json!({
            "dir": target.dir,
            "entries": s.entries,
            "entry_bytes": s.entry_bytes,
            "oldest_created_unix_ms": s.oldest_created_unix_ms,
            "newest_created_unix_ms": s.newest_created_unix_ms,
            "temp_files": s.temp_files,
            "unreadable": s.unreadable,
            "quarantined": s.quarantined,
            "dead_letters": s.dead_letters,
        }));
        return Ok(ExitCode::SUCCESS);
    }
    println!("spool {}", target.dir.display());
    println!(
        "  entries      {} files, {}",
        s.entries,
        format::bytes(s.entry_bytes)
    );
    for (label, created) in [
        ("oldest", s.oldest_created_unix_ms),
        ("newest", s.newest_created_unix_ms),
    ] {
        if let Some(created) = created {
            println!(
                "  {label:<12} {} (age {})",
                format::rfc3339_millis(created),
                age(created)
            );
        }
    }
    println!("  in progress  {} temp files", s.temp_files);
    println!(
        "  unreadable   {} files (quarantined at next open or read)",
        s.unreadable
    );
    println!("  quarantine   {} files", s.quarantined);
    println!("  dead-letter  {} files", s.dead_letters);
    Ok(ExitCode::SUCCESS)
}

fn entry_json(e: &EntryInfo) -> Value {
    let h = &e.header;
    let attributes: serde_json::Map<String, Value> = h
        .attributes
        .iter()
        .map(|(k, v)| (format!("{k:?}"), Value::from(v.as_ref())))
        .collect();
    json!({
        "seq": h.seq,
        "file": e.file,
        "name": h.name,
        "mode": h.mode.as_str(),
        "created_unix_ms": h.created_unix_ms,
        "payload_bytes": h.payload_len,
        "payload_crc32c": h.payload_crc32c,
        "file_bytes": h.file_bytes(),
        "attributes": attributes,
    })
}

fn ls(target: &Target, limit: usize) -> Outcome {
    let (entries, total) = inspect::oldest(&target.dir, limit).map_err(io_error)?;
    if target.json {
        print_json(&json!({
            "total": total,
            "entries": entries.iter().map(entry_json).collect::<Vec<_>>(),
        }));
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:>20}  {:24}  {:>10}  {:>10}  name",
        "seq", "created", "age", "bytes"
    );
    for e in &entries {
        let h = &e.header;
        println!(
            "{:>20}  {:24}  {:>10}  {:>10}  {}",
            h.seq,
            format::rfc3339_millis(h.created_unix_ms),
            age(h.created_unix_ms),
            h.payload_len,
            h.name
        );
    }
    if total > entries.len() as u64 {
        println!("... {} more", total - entries.len() as u64);
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(target: &Target) -> Outcome {
    let scan = inspect::scan(&target.dir, Depth::Full).map_err(io_error)?;
    let code = if scan.corrupt.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FINDINGS)
    };
    if target.json {
        let notes = |files: &[inspect::SetAside]| {
            files
                .iter()
                .map(|f| json!({"file": f.file, "note": f.note}))
                .collect::<Vec<_>>()
        };
        print_json(&json!({
            "verified": scan.entries.len(),
            "verified_bytes": scan.entry_bytes(),
            "corrupt": scan.corrupt.iter().map(|(f, r)| json!({"file": f, "reason": r})).collect::<Vec<_>>(),
            "quarantined": notes(&scan.quarantined),
            "dead_letters": notes(&scan.dead_letters),
        }));
        return Ok(code);
    }
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
    if !scan.corrupt.is_empty() {
        println!(
            "{} corrupt entries; the drainer moves each to quarantine/ instead of uploading it",
            scan.corrupt.len()
        );
    }
    Ok(code)
}

fn cat(dir: &Path, seq: u64, place: Place, header: bool) -> Outcome {
    let (sub, note_suffix) = match place {
        Place::Entries => (layout::ENTRIES_DIR, None),
        Place::DeadLetter => (layout::DEAD_LETTER_DIR, Some(layout::ERROR_SUFFIX)),
        Place::Quarantine => (layout::QUARANTINE_DIR, Some(layout::REASON_SUFFIX)),
    };
    let sub_dir = dir.join(sub);
    let file = std::fs::read_dir(&sub_dir)
        .map_err(|e| io_error(format!("{}: {e}", sub_dir.display())))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| note_suffix.is_none_or(|suffix| !f.ends_with(suffix)))
        .find(|f| layout::parse_seq(f) == Some(seq))
        .ok_or_else(|| (FINDINGS, format!("no entry {seq} in {}", sub_dir.display())))?;
    let data = std::fs::read(sub_dir.join(&file)).map_err(io_error)?;
    let (entry, payload) =
        layout::verify(&file, data.into()).map_err(|e| (FINDINGS, format!("{sub}/{file}: {e}")))?;
    if header {
        let mut shown = entry_json(&inspect::EntryInfo {
            file: file.clone(),
            header: entry,
        });
        if let Some(suffix) = note_suffix {
            let note = std::fs::read_to_string(sub_dir.join(format!("{file}{suffix}")));
            shown["note"] = Value::from(note.unwrap_or_default().trim_end());
        }
        print_json(&shown);
        return Ok(ExitCode::SUCCESS);
    }
    use std::io::Write;
    std::io::stdout().write_all(&payload).map_err(io_error)?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the spool for a command that changes it, with bounds no lower than what it
/// holds (see the module's documentation); a held lock is exit code 3.
async fn open_locked(dir: &Path) -> Result<Spool, (u8, String)> {
    // Absolute first: the spool creates missing parents and syncs each one's
    // parent, and a relative path's last ancestor is the empty path.
    let dir = std::path::absolute(dir)
        .map_err(|e| io_error(format!("cannot resolve {}: {e}", dir.display())))?;
    let held = inspect::held(&dir).map_err(|e| io_error(format!("{}: {e}", dir.display())))?;
    let defaults = SpoolConfig::default();
    let config = SpoolConfig {
        max_files: defaults.max_files.max(held.files),
        max_bytes: defaults.max_bytes.max(held.bytes),
        ..defaults
    };
    Spool::open(&dir, config).await.map_err(|e| match e {
        OpenError::Locked { .. } => (
            LOCKED,
            format!("{e} (a running service holds it: stop the service, or use its own drainer)"),
        ),
        other => io_error(other),
    })
}

async fn requeue(dir: &Path, from: From, seqs: Option<&[u64]>, json_out: bool) -> Outcome {
    let spool = open_locked(dir).await?;
    let place = match from {
        From::DeadLetter => SetAside::DeadLetter,
        From::Quarantine => SetAside::Quarantine,
    };
    let done = spool.requeue(place, seqs).await.map_err(io_error)?;
    if let Some(seqs) = seqs {
        let missing: Vec<u64> = seqs
            .iter()
            .copied()
            .filter(|s| !done.moved.iter().any(|(_, m)| m == s))
            .filter(|s| {
                !done
                    .refused
                    .iter()
                    .any(|(f, _)| layout::parse_seq(f) == Some(*s))
            })
            .collect();
        if !missing.is_empty() {
            return Err((FINDINGS, format!("no such set-aside entries: {missing:?}")));
        }
    }
    if json_out {
        print_json(&json!({
            "requeued": done.moved.iter().map(|(f, s)| json!({"file": f, "seq": s})).collect::<Vec<_>>(),
            "refused": done.refused.iter().map(|(f, r)| json!({"file": f, "reason": r})).collect::<Vec<_>>(),
        }));
    } else {
        for (file, seq) in &done.moved {
            println!("REQUEUED  {seq}  {file}");
        }
        for (file, reason) in &done.refused {
            println!("REFUSED   {file}: {reason}");
        }
        println!(
            "{} requeued, {} refused",
            done.moved.len(),
            done.refused.len()
        );
    }
    Ok(if done.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FINDINGS)
    })
}

async fn drain(args: &DrainArgs) -> Outcome {
    let store =
        spool::connect::store_from_url(&args.to, args.endpoint.as_deref()).map_err(io_error)?;
    let spool = open_locked(&args.dir).await?;
    let before = spool.stats();
    let drainer = Drainer::start(
        spool.clone(),
        Remote::new(store),
        DrainerConfig {
            workers: args.workers.max(1),
            ..DrainerConfig::default()
        },
    );
    let bar = indicatif::ProgressBar::new(before.files);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} entries  {msg}")
            .expect("a valid template"),
    );
    let stalled = watch_until_done(&spool, &bar, args.stall_timeout).await;
    drainer.shutdown().await;
    bar.finish_and_clear();
    let after = spool.stats();
    let set_aside = (after.dead_letter_files + after.quarantined_files)
        .saturating_sub(before.dead_letter_files + before.quarantined_files);
    println!(
        "drained {} of {} entries into {}; {} left; {} set aside (spool verify {} lists why)",
        (before.files - after.files).saturating_sub(set_aside),
        before.files,
        args.to,
        after.files,
        set_aside,
        args.dir.display()
    );
    if stalled {
        eprintln!(
            "spool: nothing drained for {}; the store is failing writes (see the log)",
            format::duration(args.stall_timeout)
        );
    }
    Ok(if after.files == 0 && set_aside == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(FINDINGS)
    })
}

/// Follows the drain until the spool is empty (false), nothing drains for
/// `stall_timeout` (true), or Ctrl-C (true).
async fn watch_until_done(
    spool: &Spool,
    bar: &indicatif::ProgressBar,
    stall_timeout: Duration,
) -> bool {
    let total = spool.stats().files;
    let mut left = total;
    let mut last_progress = tokio::time::Instant::now();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let stats = spool.stats();
        if stats.files < left {
            left = stats.files;
            last_progress = tokio::time::Instant::now();
        }
        bar.set_position(total - left);
        bar.set_message(format::bytes(stats.bytes));
        if left == 0 {
            return false;
        }
        if last_progress.elapsed() >= stall_timeout {
            return true;
        }
        tokio::select! {
            _ = &mut ctrl_c => return true,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}
