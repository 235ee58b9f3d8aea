//! `torture`: a torture run of the real binaries (docs/torture.md).
//!
//! It starts `fake-gcs` (the upstream store), mounts crashfs in this process at
//! `<work>/mnt` over `<work>/backing`, starts `spool-relay` with its spool on the
//! mount in front of the fake, and starts writers through the relay: the official
//! Node and Python clients (media, multipart and resumable uploads of several
//! chunks, clients/torture/) and `object_store`'s GCS client (XML `PUT`), with hard
//! names, attributes and sizes from 0 bytes to several MiB. Then rounds of chaos,
//! drawn from `--seed` ([`schedule`]): SIGKILL and crashfs power loss, plain SIGKILL,
//! SIGTERM deploys, store outages. At the end the store heals, the writers finish
//! their upload in progress, the spool drains and the relay stops on SIGTERM; the
//! checker ([`check`]) compares what every writer was told with the bucket, and
//! `spool verify` reads the spool. It prints the summary ([`report`]) and exits 1
//! on any loss or failure, 2 when it cannot run.
//!
//! | module | what |
//! |---|---|
//! | `args` | flags and the paths of what it runs |
//! | `schedule` | the rounds, from the seed |
//! | `chaos` | the rounds played against the processes |
//! | `disk` | crashfs through its library |
//! | `relay`, `fake`, `procs` | the real processes |
//! | `writers`, `workload` | the writers and what the `object_store` one writes |
//! | `ledger`, `check` | the writers' logs, and the check against the bucket |
//! | `report` | the summary |
//! | `http` | the harness's own HTTP requests |
//! | `clock` | wall-clock times for the logs |
//! | `faults` | `torture faults`: real file-system faults (docs/faults.md) |
//! | `deploys` | `torture deploys`: SIGHUP deploys and kill -9 under a supervisor holding the socket, none may refuse a connection (docs/torture.md) |

mod args;
mod chaos;
mod check;
mod clock;
mod deploys;
mod disk;
mod fake;
mod faults;
mod http;
mod ledger;
mod procs;
mod relay;
mod report;
mod schedule;
mod workload;
mod writers;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser as _;
use tokio::time::Instant;

use crate::args::{Args, Paths};
use crate::chaos::World;
use crate::disk::CrashDisk;
use crate::fake::Fake;
use crate::ledger::Ledger;
use crate::relay::Relay;
use crate::report::{Report, Verify};
use crate::writers::Writer;

/// A file that marks a directory as a torture run's, so that `--work` never empties
/// anything else.
const MARKER: &str = ".torture-work";

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Some(args::Command::Faults(faults)) => return run_faults(faults),
        Some(args::Command::Deploys(deploys)) => return run_deploys(deploys),
        None => {}
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("torture: {e}");
            return ExitCode::from(2);
        }
    };
    // On SIGINT or SIGTERM the run is dropped: every child process is killed (they
    // are spawned with kill_on_drop) and crashfs unmounted (Mount's Drop, or lazily
    // after it when a killed process still held it).
    let interrupted = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    let mountpoint = args.paths().map(|p| p.work.join("mnt"));
    let result = runtime.block_on(async {
        tokio::select! {
            result = run(args) => Some(result),
            () = interrupted => None,
        }
    });
    match result {
        Some(Ok(true)) => ExitCode::SUCCESS,
        Some(Ok(false)) => ExitCode::from(1),
        Some(Err(e)) => {
            eprintln!("torture: {e:#}");
            ExitCode::from(2)
        }
        None => {
            // The relay may not have been reaped when the mount was dropped.
            if let Ok(mountpoint) = mountpoint
                && let Err(e) = disk::unmount_stale(&mountpoint)
            {
                eprintln!("torture: {e:#}");
            }
            eprintln!("torture: interrupted; its processes are killed and crashfs unmounted");
            ExitCode::from(2)
        }
    }
}

/// `torture faults`: 0 when every fault passed, 1 when one failed, 2 when it could
/// not run.
fn run_faults(args: args::FaultsArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("torture faults: {e}");
            return ExitCode::from(2);
        }
    };
    // On SIGINT or SIGTERM the run is dropped: its processes are killed (spawned
    // with kill_on_drop), then its mounts undone. The handlers are installed before
    // the run starts, so that a signal during its first steps is not fatal.
    let work = args.work.clone();
    let result = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return Some(faults::run(args).await);
        };
        tokio::select! {
            _ = term.recv() => None,
            _ = int.recv() => None,
            result = faults::run(args) => Some(result),
        }
    });
    match result {
        Some(Ok(true)) => ExitCode::SUCCESS,
        Some(Ok(false)) => ExitCode::from(1),
        Some(Err(e)) => {
            eprintln!("torture faults: {e:#}");
            ExitCode::from(2)
        }
        None => {
            drop(runtime);
            faults::unmount_all(work.as_deref());
            eprintln!(
                "torture faults: interrupted; its processes are killed and its mounts undone"
            );
            ExitCode::from(2)
        }
    }
}

/// `torture deploys`: 0 when every mode passed, 1 when one failed, 2 when it could
/// not run. On SIGINT or SIGTERM the run is dropped: its processes are killed (the
/// relays it started with kill_on_drop, those a relay started by Relay's Drop).
fn run_deploys(args: args::DeploysArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("torture deploys: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return Some(deploys::run(args).await);
        };
        tokio::select! {
            _ = term.recv() => None,
            _ = int.recv() => None,
            result = deploys::run(args) => Some(result),
        }
    });
    match result {
        Some(Ok(true)) => ExitCode::SUCCESS,
        Some(Ok(false)) => ExitCode::from(1),
        Some(Err(e)) => {
            eprintln!("torture deploys: {e:#}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("torture deploys: interrupted; its processes are killed");
            ExitCode::from(2)
        }
    }
}

/// The whole run; whether it passed.
async fn run(args: Args) -> anyhow::Result<bool> {
    let began = Instant::now();
    let mut paths = args.paths()?;
    let (logs, mountpoint, backing) = prepare(&paths.work)?;
    paths.copy_binaries(&paths.work.join("bin"))?;
    let fake = Fake::start(&paths.fake, args.seed, &logs.join("fake-gcs.log")).await?;
    let mut disk = CrashDisk::mount(&mountpoint, &backing, args.seed).await?;
    let result = on_the_mount(&args, &paths, &fake, &mut disk, &logs, began).await;
    let unmounted = disk.unmount().await;
    fake.stop().await?;
    let passed = result?;
    unmounted?;
    Ok(passed)
}

/// Empties the working directory (one of ours, or new) and makes its parts: the
/// logs, the mount point and the backing directory.
fn prepare(work: &Path) -> anyhow::Result<(PathBuf, PathBuf, PathBuf)> {
    let mountpoint = work.join("mnt");
    disk::unmount_stale(&mountpoint)?;
    empty_work(work)?;
    let (logs, backing) = (work.join("logs"), work.join("backing"));
    for dir in [&logs, &mountpoint, &backing] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok((logs, mountpoint, backing))
}

/// Empties the working directory (one of ours, or new), and marks it as ours.
fn empty_work(work: &Path) -> anyhow::Result<()> {
    if work.exists() {
        let empty = std::fs::read_dir(work)?.next().is_none();
        if !empty && !work.join(MARKER).exists() {
            bail!(
                "{} is not empty and not a torture run's directory: give another --work",
                work.display()
            );
        }
        std::fs::remove_dir_all(work)
            .with_context(|| format!("cannot empty {}", work.display()))?;
    }
    std::fs::create_dir_all(work).with_context(|| format!("cannot create {}", work.display()))?;
    std::fs::write(work.join(MARKER), "a torture run's working directory\n")?;
    Ok(())
}

/// With the fake running and crashfs mounted: the relay, the writers, the chaos,
/// the end and the check.
async fn on_the_mount(
    args: &Args,
    paths: &Paths,
    fake: &Fake,
    disk: &mut CrashDisk,
    logs: &Path,
    began: Instant,
) -> anyhow::Result<bool> {
    let grace = Duration::from_secs(args.shutdown_grace_secs);
    let spool_dir = disk.mountpoint.join("spool");
    let relay_log = logs.join("spool-relay.log");
    let extra = args.relay_args.clone();
    let mut relay = Relay::new(
        paths.relay.clone(),
        spool_dir,
        fake.addr,
        grace,
        extra,
        relay_log,
    )?;
    relay.start("first boot").await?;
    let mut writers = start_writers(args, paths, logs, &relay)?;
    eprintln!(
        "torture: fake-gcs {}, spool-relay {} (spool {}), {} writers, logs in {}",
        fake.addr,
        relay.url(),
        relay.dir.display(),
        writers.len(),
        logs.display()
    );
    let mut world = World {
        fake,
        relay: &mut relay,
        disk,
        writers: &mut writers,
        events: std::fs::File::create(logs.join("events.log"))?,
    };
    let power_losses = args.power_losses.unwrap_or_default();
    let counters = chaos::run(&mut world, args.seed, power_losses, args.time_bound()).await;
    eprintln!("torture: chaos over; healing the store, stopping the writers, draining");
    let (end_failures, verify) = settle(args, paths, fake, &mut relay, writers, disk).await;
    let outcome = Outcome {
        counters: &counters,
        end_failures: &end_failures,
        verify: &verify,
        disk,
    };
    check_and_report(args, fake, logs, &outcome, began).await
}

/// What the chaos and the end left to report.
struct Outcome<'a> {
    counters: &'a chaos::Counters,
    end_failures: &'a [String],
    verify: &'a Verify,
    disk: &'a CrashDisk,
}

/// Every writer of every kind asked for, writing through the relay.
fn start_writers(
    args: &Args,
    paths: &Paths,
    logs: &Path,
    relay: &Relay,
) -> anyhow::Result<Vec<Writer>> {
    let setup = writers::Setup {
        paths: paths.clone(),
        logs: logs.to_path_buf(),
        relay_url: relay.url(),
        max_bytes: args.load.max_bytes,
        seed: args.seed,
    };
    writers::start_all(&setup, &args.load)
}

/// Lists the bucket, checks the writers' logs against it, prints the summary (and
/// keeps it, the listing and the findings in the logs); whether the run passed.
async fn check_and_report(
    args: &Args,
    fake: &Fake,
    logs: &Path,
    outcome: &Outcome<'_>,
    began: Instant,
) -> anyhow::Result<bool> {
    let objects = fake.list().await?;
    write_listing(&logs.join("bucket.ndjson"), &objects)?;
    let ledger = Ledger::read(&writers::logs(logs)?)?;
    let findings = check::check(&ledger.attempts, &ledger.uncaught, &objects);
    let report = Report {
        seed: args.seed,
        writers: describe_writers(args),
        counters: outcome.counters,
        mounts: outcome.disk.mounts,
        produced: outcome.disk.produced,
        attempts: &ledger.attempts,
        unreadable_lines: ledger.unreadable.len(),
        uncaught: ledger.uncaught.len(),
        objects: objects.len(),
        findings: &findings,
        verify: outcome.verify,
        end_failures: outcome.end_failures,
        took: began.elapsed(),
    };
    let text = report.render();
    println!("{text}");
    std::fs::write(logs.join("summary.txt"), &text)?;
    std::fs::write(logs.join("findings.txt"), format!("{findings:#?}\n"))?;
    Ok(report.passed())
}

/// The bucket's final listing, one JSON line per object, for a reader of a failure.
fn write_listing(path: &Path, objects: &[fake::Object]) -> anyhow::Result<()> {
    let mut text = String::new();
    for o in objects {
        let line = serde_json::json!({
            "name": o.name, "size": o.size, "md5": o.md5, "crc32c": o.crc32c,
            "contentType": o.content_type, "cacheControl": o.cache_control,
            "metadata": o.metadata,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    Ok(std::fs::write(path, text)?)
}

fn describe_writers(args: &Args) -> String {
    writers::describe(&args.load)
}

/// The end: the store heals, the writers finish their upload in progress, the spool
/// drains, the relay stops on SIGTERM (exit 0), one more power loss, `spool verify`.
/// Returns what failed and what verify said.
async fn settle(
    args: &Args,
    paths: &Paths,
    fake: &Fake,
    relay: &mut Relay,
    writers: Vec<Writer>,
    disk: &mut CrashDisk,
) -> (Vec<String>, Verify) {
    let mut failures = Vec::new();
    if let Err(e) = fake.heal().await {
        failures.push(format!("cannot heal the store: {e:#}"));
    }
    failures.extend(writers::finish_through(relay, writers, args.settle_secs).await);
    let deadline = Instant::now() + Duration::from_secs(args.settle_secs);
    if let Err(e) = drain(relay, deadline).await {
        failures.push(format!("{e:#}"));
    }
    match relay.terminate().await {
        Ok(Some(status)) if status.success() => {}
        Ok(Some(status)) => failures.push(format!("the last SIGTERM: the relay exited {status}")),
        Ok(None) => failures.push("the last SIGTERM: the relay did not exit in time".into()),
        Err(e) => failures.push(format!("the last SIGTERM: {e:#}")),
    }
    // The spool drained and the relay stopped cleanly: every removal is durable (the
    // remover syncs entries/ when the spool empties), so a power loss now must bring
    // no entry back. During the chaos a delivered entry may come back by design (up
    // to remove_sync_batch removals are left unsynced); only here is it a finding.
    if relay.running() {
        failures.push("the relay still runs: no power loss after the end".into());
    } else if let Err(e) = disk
        .power_loss(crashfs::model::seed_keeping_almost_nothing())
        .await
    {
        failures.push(format!("the power loss after the end: {e:#}"));
    }
    let mut verify = match spool_verify(&paths.spool, &relay.dir).await {
        Ok(verify) => verify,
        Err(e) => Verify {
            entries: 0,
            problems: vec![format!("spool verify: {e:#}")],
        },
    };
    if verify.entries > 0 {
        verify.problems.push(format!(
            "{} entries back in the spool after it drained, the relay stopped cleanly and the power was cut: removals not made durable",
            verify.entries
        ));
    }
    (failures, verify)
}

/// Waits until the relay's spool is empty.
async fn drain(relay: &Relay, deadline: Instant) -> anyhow::Result<()> {
    let mut last = None;
    while Instant::now() < deadline {
        match relay.spool_files().await {
            Ok(0) => return Ok(()),
            Ok(n) => last = Some(n),
            Err(e) => eprintln!("torture: reading the relay's metrics: {e:#}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the spool did not drain in time: {last:?} entries left")
}

/// `spool verify --json DIR`: what it found wrong.
async fn spool_verify(bin: &Path, dir: &Path) -> anyhow::Result<Verify> {
    let output = tokio::process::Command::new(bin)
        .args(["verify", "--json"])
        .arg(dir)
        .output()
        .await
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "spool verify exited {} without JSON: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let mut problems = Vec::new();
    for (key, label) in [
        ("corrupt", "CORRUPT"),
        ("quarantined", "QUARANTINED"),
        ("dead_letters", "DEAD-LETTER"),
    ] {
        for item in json[key].as_array().into_iter().flatten() {
            problems.push(format!("{label} {item}"));
        }
    }
    if !output.status.success() && problems.is_empty() {
        problems.push(format!("spool verify exited {}", output.status));
    }
    Ok(Verify {
        entries: json["verified"].as_u64().unwrap_or_default(),
        problems,
    })
}
