//! `torture faults`: real file-system faults under the real `spool-relay`
//! (docs/faults.md). Each fault starts `fake-gcs` and the relay on a file system of
//! its own, runs writers through the relay (XML `PUT`, JSON media and resumable
//! uploads, in this process), scrapes the relay's `/metrics` every second, produces
//! the fault, lifts it, lets the spool drain and checks the bucket:
//!
//! | fault | file system | what is done |
//! |---|---|---|
//! | `full` | tmpfs of 24 MiB | the store fails every write, the writers fill the disk (ENOSPC), the store heals |
//! | `readonly` | tmpfs | a backlog spooled, then `mount -o remount,ro` with the store healed, then `remount,rw` |
//! | `fds` | the work directory | `prlimit --nofile=64:64` on the running relay, hundreds of connections, a backlog draining |
//! | `eio` | crashfs | EIO on every directory fsync and half the writes and fsyncs for a while, then on every unlink |
//!
//! Each prints what was done, what the clients were answered, the gauges, the alerts
//! the recorded scrapes fire (promtool's test of them: [`record`]) and PASS or FAIL.

mod client;
mod eio;
mod fds;
mod full;
mod readonly;
mod record;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};

use tokio::time::Instant;

use crate::args::{BUCKET, FaultKind, FaultsArgs};
use crate::fake::Fake;
use crate::relay::Relay;
use client::{SharedTally, Tally};
use record::{Recorded, Recorder};

/// The binaries a fault run starts.
#[derive(Debug, Clone)]
struct Bins {
    relay: PathBuf,
    fake: PathBuf,
    spool: PathBuf,
}

/// Runs the faults asked for; whether all passed.
pub async fn run(args: FaultsArgs) -> anyhow::Result<bool> {
    let exe = std::env::current_exe().context("cannot find this binary's path")?;
    let exe_dir = exe.parent().unwrap_or(Path::new(".")).to_path_buf();
    let bin_dir = args.bin_dir.clone().unwrap_or_else(|| exe_dir.clone());
    let target = exe_dir.parent().unwrap_or(Path::new(".")).to_path_buf();
    let work = args.work.clone().unwrap_or_else(|| target.join("faults"));
    let tests_dir = args
        .tests_dir
        .clone()
        .unwrap_or_else(|| work.join("alerts"));
    let bins = Bins {
        relay: bin_dir.join("spool-relay"),
        fake: bin_dir.join("fake-gcs"),
        spool: bin_dir.join("spool"),
    };
    for bin in [&bins.relay, &bins.fake, &bins.spool] {
        if !bin.is_file() {
            bail!(
                "{} is missing: cargo build -p relay --bin spool-relay -p fake-gcs --bin fake-gcs \
                 -p torture && cargo build -p spool --features cli --bin spool",
                bin.display()
            );
        }
    }
    prepare(&work)?;
    std::fs::create_dir_all(&tests_dir)?;
    let began = Instant::now();
    let mut verdicts = Vec::new();
    for &fault in &args.only {
        let dir = work.join(fault.label());
        std::fs::create_dir_all(&dir)?;
        println!(
            "\n=== fault: {} ({})",
            fault.label(),
            crate::clock::rfc3339()
        );
        let started = Instant::now();
        let report = match fault {
            FaultKind::Full => full::run(&bins, &dir).await,
            FaultKind::Readonly => readonly::run(&bins, &dir).await,
            FaultKind::Fds => fds::run(&bins, &dir).await,
            FaultKind::Eio => eio::run(&bins, &dir).await,
        };
        let passed = match report {
            Ok(mut report) => {
                report.took = started.elapsed();
                report.alerts_checked(&tests_dir, fault)?;
                print!("{}", report.render());
                report.passed()
            }
            Err(e) => {
                println!("  could not run: {e:#}\n  FAIL");
                false
            }
        };
        verdicts.push((fault, passed));
    }
    println!("\n=== summary ({:.0} s)", began.elapsed().as_secs_f64());
    for (fault, passed) in &verdicts {
        println!(
            "  {:<9} {}",
            fault.label(),
            if *passed { "PASS" } else { "FAIL" }
        );
    }
    Ok(verdicts.iter().all(|(_, p)| *p))
}

/// Undoes the mounts of a fault run in `work` (default: `<target>/faults`), after
/// an interruption.
pub fn unmount_all(work: Option<&Path>) {
    let work = match work {
        Some(work) => work.to_path_buf(),
        None => match std::env::current_exe() {
            Ok(exe) => exe
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("."))
                .join("faults"),
            Err(_) => return,
        },
    };
    for fault in ["full", "readonly", "fds", "eio"] {
        let mnt = work.join(fault).join("mnt");
        let _ = remount(&mnt, "rw");
        let _ = crate::disk::unmount_stale(&mnt);
        unmount_tmpfs(&mnt);
    }
}

/// A marker for `--work`, as the torture run's.
const MARKER: &str = ".faults-work";

fn prepare(work: &Path) -> anyhow::Result<()> {
    if work.exists() {
        for fault in ["full", "readonly", "fds", "eio"] {
            let mnt = work.join(fault).join("mnt");
            crate::disk::unmount_stale(&mnt)?;
            unmount_tmpfs(&mnt);
        }
        let empty = std::fs::read_dir(work)?.next().is_none();
        if !empty && !work.join(MARKER).exists() {
            bail!(
                "{} is not empty and not a fault run's directory: give another --work",
                work.display()
            );
        }
        std::fs::remove_dir_all(work)
            .with_context(|| format!("cannot empty {}", work.display()))?;
    }
    std::fs::create_dir_all(work)?;
    std::fs::write(work.join(MARKER), "a fault run's working directory\n")?;
    Ok(())
}

/// `mount -t tmpfs -o size=BYTES`.
fn mount_tmpfs(dir: &Path, bytes: u64) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    run_mount(
        &[
            "-t",
            "tmpfs",
            "-o",
            &format!("size={bytes},mode=0755"),
            "tmpfs",
        ],
        dir,
    )
}

/// `mount -o remount,OPTION`; its error text on failure.
fn remount(dir: &Path, option: &str) -> anyhow::Result<()> {
    run_mount(&["-o", &format!("remount,{option}")], dir)
}

fn run_mount(args: &[&str], dir: &Path) -> anyhow::Result<()> {
    let output = std::process::Command::new("mount")
        .args(args)
        .arg(dir)
        .output()
        .context("cannot run mount")?;
    if !output.status.success() {
        bail!(
            "mount {} {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Unmounts a tmpfs (lazily if busy), if one is mounted at `dir`.
fn unmount_tmpfs(dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Ok(target) = std::path::absolute(dir) else {
        return;
    };
    let target = target.to_string_lossy().to_string();
    if mounts
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(target.as_str()))
    {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&target)
            .status();
    }
}

/// The fake and the relay of one fault, with the recorder on the relay's metrics.
struct Bed {
    fake: Fake,
    relay: Relay,
    recorder: Recorder,
    tally: SharedTally,
    logs: PathBuf,
}

impl Bed {
    /// Starts the fake and the relay on `spool_dir` with `extra` flags.
    async fn start(
        bins: &Bins,
        dir: &Path,
        spool_dir: PathBuf,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let fake = Fake::start(&bins.fake, 1, &logs.join("fake-gcs.log")).await?;
        let extra = extra.iter().map(|s| s.to_string()).collect();
        let mut relay = Relay::new(
            bins.relay.clone(),
            spool_dir,
            fake.addr,
            Duration::from_secs(10),
            extra,
            logs.join("spool-relay.log"),
        )?;
        relay.start("fault run").await?;
        let recorder = Recorder::start(relay.metrics);
        Ok(Self {
            fake,
            relay,
            recorder,
            tally: SharedTally::default(),
            logs,
        })
    }

    /// Starts phase `label`: marked in the scrapes, and the clients' answers counted
    /// under it.
    fn phase(&self, label: &str) {
        self.recorder.mark(label);
        self.tally.lock().expect("tally").phase = label.to_string();
    }

    /// The store fails every write with 503 until healed.
    async fn store_down(&self) -> anyhow::Result<()> {
        let plan = "[[fault]]\nname = \"store down\"\nuntil = \"1h\"\nops = \"writes\"\n\
                    mix = { \"503\" = 1.0 }\n";
        self.fake.add_faults(plan).await
    }

    /// Waits until `spool_files` is 0 (within `within`); how long it took.
    async fn drained(&self, within: Duration) -> anyhow::Result<Duration> {
        let began = Instant::now();
        let mut last = None;
        while began.elapsed() < within {
            match self.relay.spool_files().await {
                Ok(0) => return Ok(began.elapsed()),
                Ok(n) => last = Some(n),
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("the spool did not drain within {within:?}: {last:?} entries left")
    }

    /// Stops the relay (SIGTERM; it must exit 0) and the fake; the scrapes and the
    /// answers, and whether every acknowledged upload is in the bucket as written
    /// (missing or different names).
    async fn finish(mut self) -> anyhow::Result<Finished> {
        let recorded = self.recorder.stop();
        let exit = match self.relay.terminate().await {
            Ok(Some(status)) if status.success() => None,
            Ok(Some(status)) => Some(format!("the relay exited {status} on SIGTERM")),
            Ok(None) => Some("the relay did not exit on SIGTERM in time".to_string()),
            Err(e) => Some(format!("SIGTERM: {e:#}")),
        };
        let objects = self.fake.list().await?;
        let in_bucket: BTreeMap<String, Option<String>> =
            objects.into_iter().map(|o| (o.name, o.md5)).collect();
        let tally = std::mem::take(&mut *self.tally.lock().expect("tally"));
        let lost: Vec<String> = (tally.acknowledged.iter())
            .filter(|(name, md5, _)| in_bucket.get(name) != Some(&Some(md5.clone())))
            .map(|(name, _, _)| name.clone())
            .collect();
        self.fake.stop().await?;
        let log = log_summary(&self.logs.join("spool-relay.log"));
        Ok(Finished {
            recorded,
            tally,
            lost,
            exit,
            log,
        })
    }
}

/// What a fault's bed left.
struct Finished {
    recorded: Recorded,
    tally: Tally,
    lost: Vec<String>,
    exit: Option<String>,
    log: String,
}

/// The relay's warnings and errors, by message, most frequent first.
fn log_summary(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for line in text.lines() {
        let Some(at) = line.find(" WARN ").or_else(|| line.find(" ERROR ")) else {
            continue;
        };
        let rest = &line[at..];
        // "LEVEL target: message key=value ...": the level and the message.
        let message = rest.split(" error=").next().unwrap_or(rest);
        let message: String = message
            .split(" file=")
            .next()
            .unwrap_or(message)
            .trim()
            .into();
        *counts
            .entry(message.chars().take(150).collect())
            .or_default() += 1;
    }
    let mut sorted: Vec<(String, u64)> = counts.into_iter().collect();
    sorted.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    sorted
        .iter()
        .take(6)
        .map(|(m, n)| format!("    {n} x {m}\n"))
        .collect()
}

/// What a fault did, saw and concluded.
#[derive(Default)]
struct Report {
    fault: &'static str,
    did: Vec<String>,
    tally: String,
    gauges: Vec<String>,
    log: String,
    /// The promtool test's comment (what was done, the time scale).
    test_comment: String,
    recorded: Option<Recorded>,
    /// Alerts that must fire (by name), and that must not.
    must_fire: Vec<&'static str>,
    must_not_fire: Vec<&'static str>,
    alerts: Vec<String>,
    checks: Vec<(String, bool)>,
    took: Duration,
}

impl Report {
    fn check(&mut self, what: impl Into<String>, ok: bool) {
        self.checks.push((what.into(), ok));
    }

    /// Writes the recorded promtool test, runs promtool on it, and checks the alerts
    /// that must and must not fire.
    fn alerts_checked(&mut self, tests_dir: &Path, fault: FaultKind) -> anyhow::Result<()> {
        let Some(recorded) = self.recorded.take() else {
            return Ok(());
        };
        let fired = recorded.alerts();
        for (name, windows) in &fired {
            let spans: Vec<String> = (windows.iter())
                .map(|w| match w.until {
                    Some(until) => format!("{}-{} s", w.from.as_secs() / 60, until.as_secs() / 60),
                    None => format!("from {} s to the end", w.from.as_secs() / 60),
                })
                .collect();
            self.alerts.push(format!("{name}: {}", spans.join(", ")));
        }
        let names: Vec<&str> = fired.iter().map(|(n, _)| *n).collect();
        for &alert in &self.must_fire.clone() {
            self.check(format!("{alert} fires"), names.contains(&alert));
        }
        for &alert in &self.must_not_fire.clone() {
            self.check(format!("{alert} does not fire"), !names.contains(&alert));
        }
        let comment = format!(
            "{}\n\nPhases (second of the run = minute of this test):\n{}\n\
             Scrapes that did not answer within the second: {} (stale, then gaps).",
            self.test_comment,
            recorded.phases(),
            recorded.missed()
        );
        let test = recorded.promtool_test(&comment)?;
        let name = format!("recorded-{}.yml", fault.label());
        match record::write_and_check(tests_dir, &name, &test) {
            Ok((path, ok, output)) => {
                let last = (output.lines().map(str::trim))
                    .rfind(|l| !l.is_empty())
                    .unwrap_or("")
                    .to_string();
                self.check(
                    format!("promtool test rules {}: {last}", path.display()),
                    ok,
                );
                if !ok {
                    self.alerts.push(format!("promtool said:\n{output}"));
                }
            }
            Err(e) => self.check(format!("promtool: {e:#}"), false),
        }
        Ok(())
    }

    fn passed(&self) -> bool {
        self.checks.iter().all(|(_, ok)| *ok)
    }

    fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("  what was done:\n");
        for line in &self.did {
            out.push_str(&format!("    {line}\n"));
        }
        out.push_str("  what the clients were answered (phase; kind; status; count):\n");
        out.push_str(&self.tally);
        out.push_str("  gauges and counters (from the scrapes):\n");
        for line in &self.gauges {
            out.push_str(&format!("    {line}\n"));
        }
        out.push_str("  the relay's warnings and errors:\n");
        out.push_str(if self.log.is_empty() {
            "    none\n"
        } else {
            &self.log
        });
        out.push_str("  alerts fired on the recorded scrapes (promtool-checked):\n");
        if self.alerts.is_empty() {
            out.push_str("    none\n");
        }
        for line in &self.alerts {
            out.push_str(&format!("    {line}\n"));
        }
        out.push_str("  checks:\n");
        for (what, ok) in &self.checks {
            out.push_str(&format!(
                "    [{}] {what}\n",
                if *ok { "ok" } else { "FAILED" }
            ));
        }
        out.push_str(&format!(
            "  {} {} in {:.0} s\n",
            self.fault,
            if self.passed() { "PASS" } else { "FAIL" },
            self.took.as_secs_f64()
        ));
        out
    }

    /// The common checks and lines of a finished bed.
    fn finished(&mut self, finished: Finished) {
        let Finished {
            recorded,
            tally,
            lost,
            exit,
            log,
        } = finished;
        self.tally = tally.render();
        self.log = log;
        let r = &recorded;
        self.gauges.push(format!(
            "scrapes {} ({} unanswered); spool_files max {}; spool_broken max {}; \
             spool_quarantined_files max {}; spool_quarantined_total {}",
            r.samples.len(),
            r.missed(),
            r.max(|s| s.scrape.files),
            r.max(|s| u64::from(s.scrape.broken)),
            r.max(|s| s.scrape.quarantined_files),
            r.max(|s| s.quarantined_total),
        ));
        self.gauges.push(format!(
            "uploads failed {}, rejected {}; spool_remove_errors_total {}; \
             spool_recoveries_total {}; drained already_present {}",
            r.max(|s| s.scrape.failed_total),
            r.max(|s| s.rejected_total),
            r.max(|s| s.scrape.remove_errors_total),
            r.max(|s| s.scrape.recoveries_total),
            r.max(|s| s.drained_already_present),
        ));
        let acknowledged = tally.acknowledged.len();
        self.check(
            format!(
                "every acknowledged upload is in the bucket as written ({acknowledged} \
                 acknowledged, {} missing or different{})",
                lost.len(),
                lost.first()
                    .map(|n| format!(", e.g. {n}"))
                    .unwrap_or_default()
            ),
            lost.is_empty() && acknowledged > 0,
        );
        self.check(
            format!("no 5xx but 503 ({} seen)", tally.server_errors()),
            tally.server_errors() == 0,
        );
        self.check(
            format!(
                "every 503 carries Retry-After ({} without)",
                tally.bare_503s()
            ),
            tally.bare_503s() == 0,
        );
        self.check(
            format!(
                "no entry quarantined (spool_quarantined_total {})",
                r.max(|s| s.quarantined_total)
            ),
            r.max(|s| s.quarantined_total) == 0 && r.max(|s| s.scrape.quarantined_files) == 0,
        );
        match exit {
            None => self.check("the relay exits 0 on SIGTERM", true),
            Some(e) => self.check(e, false),
        }
        self.recorded = Some(recorded);
        let _ = BUCKET;
    }
}
