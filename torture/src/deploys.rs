//! `torture deploys`: deploys and restarts of the real relay under load that must
//! refuse no connection (issue 40). Each mode runs with its own fake, spool and
//! writers (the official Node and Python clients and `object_store`, as in the
//! torture run; no crashfs, no power loss):
//!
//! - `sighup`: the relay binds its own `--listen` port; each deploy is a SIGHUP,
//!   on which it hands its socket to a new process of its own command line
//!   (descriptor 3, `LISTEN_FDS=1`), finishes its requests and exits 0, while the
//!   new one waits for the spool's lock and says `listening ... inherited=true`.
//!   This process is a child subreaper, so each new relay becomes its child when
//!   the old one exits, and each old one's exit status is read.
//! - `kill`: this harness binds the socket once and starts the relay on it
//!   (descriptor 3, `LISTEN_FDS=1`, no `LISTEN_PID`), as systemd socket activation
//!   does; each deploy is a SIGKILL and a start on the same socket.
//! - `rebind` (the control, not run by default): SIGKILL and a start that binds
//!   `--listen` again, as before socket activation; it must fail, with refusals.
//!
//! Before each deploy, and after the last, a gap of load drawn from the seed. The
//! writers log every connection refused as it happens (`ev: "refused"`: the
//! clients retry a refused request themselves, so an upload's answer would hide
//! it), and the harness's own probe connects every few milliseconds. At the end
//! the writers finish their upload in progress, the spool drains, the relay stops
//! on SIGTERM (exit 0), `spool verify` reads the spool, and the checker
//! ([`check`](crate::check)) compares every acknowledged upload with the bucket. A
//! mode fails on a refused connection (a client's or the probe's), an
//! acknowledged upload not in the bucket as written, a deploy that did not happen
//! as it should, or an end that failed. Failed uploads (a client that gave up) are
//! counted and shown, not judged.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::args::{DeployMode, DeploysArgs, Paths};
use crate::check::{self, Findings};
use crate::fake::Fake;
use crate::ledger::{Answer, Ledger};
use crate::procs::Lines;
use crate::relay::Relay;
use crate::report::Verify;
use crate::writers::{self, Writer};
use crate::{clock, procs, report};

/// Kinds of failed uploads, and exceptions, shown in the summary (every failed
/// upload is in `failed.txt`).
const FAILED_SHOWN: usize = 10;

/// The whole run, every mode; whether every mode passed.
pub async fn run(args: DeploysArgs) -> anyhow::Result<bool> {
    let began = Instant::now();
    if args.min_gap_ms > args.max_gap_ms {
        anyhow::bail!("--min-gap-ms is above --max-gap-ms");
    }
    let mut paths = args.paths()?;
    crate::empty_work(&paths.work)?;
    paths.copy_binaries(&paths.work.join("bin"))?;
    if args.modes.contains(&DeployMode::Sighup) {
        procs::become_subreaper()?;
    }
    let mut outcomes = Vec::new();
    for &mode in &args.modes {
        let outcome = run_mode(&args, &paths, mode).await?;
        let text = outcome.render(&args);
        eprintln!("{text}");
        std::fs::write(
            paths.work.join(mode.label()).join("logs/summary.txt"),
            &text,
        )?;
        outcomes.push(outcome);
    }
    let text = table(&args, &outcomes, began.elapsed());
    println!("{text}");
    std::fs::write(paths.work.join("summary.txt"), &text)?;
    Ok(outcomes.iter().all(|o| o.passed(&args)))
}

/// One mode with its own fake, spool and writers, in `<work>/<mode>/`.
async fn run_mode(args: &DeploysArgs, paths: &Paths, mode: DeployMode) -> anyhow::Result<Outcome> {
    let began = Instant::now();
    let logs = paths.work.join(mode.label()).join("logs");
    std::fs::create_dir_all(&logs)?;
    let fake = Fake::start(&paths.fake, args.seed, &logs.join("fake-gcs.log")).await?;
    let result = with_fake(args, paths, mode, &fake, &logs).await;
    fake.stop().await?;
    let mut outcome = result?;
    outcome.took = began.elapsed();
    Ok(outcome)
}

/// With the fake running: the relay, the writers and the probe, the deploys, the
/// end and the check.
async fn with_fake(
    args: &DeploysArgs,
    paths: &Paths,
    mode: DeployMode,
    fake: &Fake,
    logs: &Path,
) -> anyhow::Result<Outcome> {
    let grace = Duration::from_secs(args.shutdown_grace_secs);
    let mut relay = Relay::new(
        paths.relay.clone(),
        logs.with_file_name("spool"),
        fake.addr,
        grace,
        args.relay_args.clone(),
        logs.join("spool-relay.log"),
    )?;
    if mode == DeployMode::Kill {
        relay.hold_socket()?;
    }
    let watch_lines = mode == DeployMode::Sighup;
    let (_, mut lines) = relay.start_watching("first boot", watch_lines).await?;
    let setup = writers::Setup {
        paths: paths.clone(),
        logs: logs.to_path_buf(),
        relay_url: relay.url(),
        max_bytes: args.load.max_bytes,
        seed: args.seed,
    };
    let mut writers = writers::start_all(&setup, &args.load)?;
    let probe = Probe::start(relay.listen, args.probe_ms);
    eprintln!(
        "torture deploys: {}: fake-gcs {}, spool-relay {} ({}), {} writers, logs in {}",
        mode.label(),
        fake.addr,
        relay.url(),
        match mode {
            DeployMode::Sighup => "its own --listen",
            DeployMode::Kill => "on the socket this harness holds",
            DeployMode::Rebind => "its own --listen, bound again at each start",
        },
        writers.len(),
        logs.display()
    );
    let mut events = std::fs::File::create(logs.join("events.log"))?;
    let deploys = deploy(
        args,
        mode,
        &mut relay,
        &mut lines,
        &mut writers,
        &mut events,
    )
    .await;
    drop(lines);
    eprintln!(
        "torture deploys: {}: {} deploys; stopping the writers, draining",
        mode.label(),
        deploys.done
    );
    let mut end_failures = finish_writers(args, &mut relay, writers).await;
    // Before the last SIGTERM, which closes the socket in the sighup mode.
    let probe = match probe {
        Some(probe) => Some(probe.stop().await?),
        None => None,
    };
    let verify = stop_relay(args, paths, &mut relay, &mut end_failures).await;
    let objects = fake.list().await?;
    crate::write_listing(&logs.join("bucket.ndjson"), &objects)?;
    let ledger = Ledger::read(&writers::logs(logs)?)?;
    let findings = check::check(&ledger.attempts, &ledger.uncaught, &objects);
    std::fs::write(logs.join("findings.txt"), format!("{findings:#?}\n"))?;
    let outcome = Outcome::new(
        mode,
        deploys,
        end_failures,
        verify,
        probe,
        &ledger,
        findings,
    );
    std::fs::write(logs.join("failed.txt"), outcome.failed_uploads.join("\n"))?;
    Ok(Outcome {
        objects: objects.len(),
        ..outcome
    })
}

/// What the deploys did.
#[derive(Debug, Default)]
struct Deploys {
    done: u64,
    /// SIGHUPs whose new relay failed (`--failing-successors`), the old relay
    /// serving on or starting again.
    failed_successors: u64,
    /// From the signal to the relay (the new one) listening, per deploy.
    took: Vec<Duration>,
    /// Deploys that happened but not as they should (an old relay that did not
    /// exit 0 after its hand-over).
    failures: Vec<String>,
    /// What stopped the deploys early.
    fatal: Option<String>,
}

/// The deploys, each after a gap of load.
async fn deploy(
    args: &DeploysArgs,
    mode: DeployMode,
    relay: &mut Relay,
    lines: &mut Lines,
    writers: &mut [Writer],
    events: &mut std::fs::File,
) -> Deploys {
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut gap =
        move || Duration::from_millis(rng.random_range(args.min_gap_ms..=args.max_gap_ms));
    let mut deploys = Deploys::default();
    let mut reported = Instant::now();
    let failing = match mode {
        DeployMode::Sighup => args.failing_successors,
        _ => 0,
    };
    let rounds = args.deploys + failing;
    // The failing ones spread evenly among the rounds.
    let fails: Vec<u64> = (1..=failing).map(|k| k * rounds / (failing + 1)).collect();
    let mut n = 0;
    for round in 1..=rounds {
        tokio::time::sleep(gap()).await;
        if fails.contains(&round) {
            let late = deploys.failed_successors % 2 == 1;
            let why = format!("failing successor {}", deploys.failed_successors + 1);
            let pid = relay.pid().unwrap_or_default();
            let _ = writeln!(
                events,
                "{} {why}: SIGHUP to pid {pid}, late={late}",
                clock::rfc3339()
            );
            match relay.failed_hand_over(lines, &why, late).await {
                Ok(took) => {
                    deploys.failed_successors += 1;
                    let _ = writeln!(
                        events,
                        "{} {why}: pid {pid} serves again {took:?} after the SIGHUP",
                        clock::rfc3339()
                    );
                }
                Err(e) => {
                    deploys.fatal = Some(format!("{why}: {e:#}"));
                    break;
                }
            }
            continue;
        }
        n += 1;
        if let Some(dead) = writers.iter_mut().find_map(|w| {
            let name = w.name().to_string();
            w.exited()
                .map(|status| format!("writer {name} exited early ({status})"))
        }) {
            deploys.fatal = Some(dead);
            break;
        }
        let why = format!("deploy {n}");
        let pid = relay.pid().unwrap_or_default();
        let _ = writeln!(events, "{} {why}: {mode:?} to pid {pid}", clock::rfc3339());
        let result = match mode {
            DeployMode::Sighup => relay.hand_over(lines, &why).await.map(|handed| {
                if !handed.old_exit.is_some_and(|status| status.success()) {
                    deploys.failures.push(format!(
                        "{why}: the old relay pid {} {} after handing its socket to pid {}",
                        handed.old_pid,
                        handed
                            .old_exit
                            .map_or("did not exit in time".into(), |s| format!("exited {s}")),
                        handed.new_pid
                    ));
                }
                let _ = writeln!(
                    events,
                    "{} {why}: pid {} handed its socket to pid {}, listening {:?} after the SIGHUP; the old one {:?}",
                    clock::rfc3339(),
                    handed.old_pid,
                    handed.new_pid,
                    handed.listening_after,
                    handed.old_exit
                );
                handed.listening_after
            }),
            DeployMode::Kill | DeployMode::Rebind => {
                let began = Instant::now();
                let restarted = async {
                    relay.kill().await?;
                    relay.start(&why).await
                };
                restarted.await.map(|_| {
                    let took = began.elapsed();
                    let _ = writeln!(
                        events,
                        "{} {why}: killed, listening again {took:?} after the SIGKILL",
                        clock::rfc3339()
                    );
                    took
                })
            }
        };
        match result {
            Ok(took) => {
                deploys.done += 1;
                deploys.took.push(took);
            }
            Err(e) => {
                deploys.fatal = Some(format!("{why}: {e:#}"));
                break;
            }
        }
        if reported.elapsed() >= Duration::from_secs(15) {
            reported = Instant::now();
            eprintln!(
                "torture deploys: {}: {n} of {} deploys",
                mode.label(),
                args.deploys
            );
        }
    }
    if deploys.fatal.is_none() {
        // Load after the last deploy too.
        tokio::time::sleep(gap()).await;
    }
    deploys
}

/// The end, first: the writers finish their upload in progress (the relay started
/// if a failed deploy left it stopped). What failed.
async fn finish_writers(
    args: &DeploysArgs,
    relay: &mut Relay,
    writers: Vec<Writer>,
) -> Vec<String> {
    writers::finish_through(relay, writers, args.settle_secs).await
}

/// The end, then: the spool drains, the relay stops on SIGTERM (exit 0), `spool
/// verify` reads the spool; what went wrong is added to `failures`, and what
/// verify said returned.
async fn stop_relay(
    args: &DeploysArgs,
    paths: &Paths,
    relay: &mut Relay,
    failures: &mut Vec<String>,
) -> Verify {
    let deadline = Instant::now() + Duration::from_secs(args.settle_secs);
    if let Err(e) = crate::drain(relay, deadline).await {
        failures.push(format!("{e:#}"));
    }
    match relay.terminate().await {
        Ok(Some(status)) if status.success() => {}
        Ok(Some(status)) => failures.push(format!("the last SIGTERM: the relay exited {status}")),
        Ok(None) => failures.push("the last SIGTERM: the relay did not exit in time".into()),
        Err(e) => failures.push(format!("the last SIGTERM: {e:#}")),
    }
    let mut verify = match crate::spool_verify(&paths.spool, &relay.dir).await {
        Ok(verify) => verify,
        Err(e) => Verify {
            entries: 0,
            problems: vec![format!("spool verify: {e:#}")],
        },
    };
    if verify.entries > 0 {
        verify.problems.push(format!(
            "{} entries left in the spool after it drained and the relay stopped",
            verify.entries
        ));
    }
    verify
}

/// The harness's own probe: a TCP connect to the relay's address at every tick,
/// closed at once.
struct Probe {
    stop: watch::Sender<bool>,
    task: JoinHandle<ProbeTally>,
    every: Duration,
}

/// What the probe saw.
#[derive(Debug, Default, Clone)]
struct ProbeTally {
    every: Duration,
    connected: u64,
    refused: u64,
    /// Connects that failed otherwise, or took over 5 s.
    other: u64,
    /// When the first refusal happened.
    first_refused: Option<String>,
}

impl Probe {
    /// Probes `addr` every `every_ms` (none at 0).
    fn start(addr: SocketAddr, every_ms: u64) -> Option<Probe> {
        if every_ms == 0 {
            return None;
        }
        let every = Duration::from_millis(every_ms);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(probe(addr, every, stopped));
        Some(Probe { stop, task, every })
    }

    async fn stop(self) -> anyhow::Result<ProbeTally> {
        let _ = self.stop.send(true);
        let mut tally = self.task.await?;
        tally.every = self.every;
        Ok(tally)
    }
}

async fn probe(addr: SocketAddr, every: Duration, mut stop: watch::Receiver<bool>) -> ProbeTally {
    let mut tally = ProbeTally::default();
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return tally,
            _ = ticks.tick() => {}
        }
        match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                tally.connected += 1;
                drop(stream);
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tally.refused += 1;
                tally.first_refused.get_or_insert_with(clock::rfc3339);
            }
            Ok(Err(_)) | Err(_) => tally.other += 1,
        }
    }
}

/// What each client saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// Uploads the client call returned for: the write was acknowledged.
    acknowledged: u64,
    /// Connections the server refused (each attempt, retried or not).
    refused: u64,
    /// Uploads the client gave up on (its call failed, after its own retries).
    failed: u64,
    /// Uploads without an answer (a writer stopped during one).
    unfinished: u64,
    /// Acknowledged uploads not in the bucket as written.
    lost: u64,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.acknowledged += other.acknowledged;
        self.refused += other.refused;
        self.failed += other.failed;
        self.unfinished += other.unfinished;
        self.lost += other.lost;
    }
}

/// One mode's result.
#[derive(Debug)]
struct Outcome {
    mode: DeployMode,
    deploys: Deploys,
    end_failures: Vec<String>,
    verify: Verify,
    probe: Option<ProbeTally>,
    /// Per client (`node`, `python`, `object-store`).
    counts: BTreeMap<String, Counts>,
    /// Every failed upload: `writer seq kind [code] error`.
    failed_uploads: Vec<String>,
    /// Failed uploads by client, kind, code and error (URLs and numbers folded).
    failed_kinds: BTreeMap<String, u64>,
    /// Exceptions the Node client threw outside an upload's promise.
    uncaught: Vec<String>,
    unreadable_lines: usize,
    findings: Findings,
    objects: usize,
    took: Duration,
}

impl Outcome {
    fn new(
        mode: DeployMode,
        deploys: Deploys,
        end_failures: Vec<String>,
        verify: Verify,
        probe: Option<ProbeTally>,
        ledger: &Ledger,
        findings: Findings,
    ) -> Outcome {
        let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
        let mut failed_uploads = Vec::new();
        let mut failed_kinds = BTreeMap::new();
        for attempt in &ledger.attempts {
            let row = counts.entry(attempt.client().to_string()).or_default();
            match &attempt.answer {
                Answer::Ok => row.acknowledged += 1,
                Answer::Error { text, code } => {
                    row.failed += 1;
                    let code = code.map_or("-".to_string(), |c| c.to_string());
                    failed_uploads.push(format!(
                        "{} {} {} [{code}] {text}",
                        attempt.writer, attempt.seq, attempt.kind
                    ));
                    let folded = format!(
                        "{} {} [{code}] {}",
                        attempt.client(),
                        attempt.kind,
                        report::fold(text)
                    );
                    *failed_kinds.entry(folded).or_default() += 1;
                }
                Answer::Unfinished => row.unfinished += 1,
            }
        }
        for refused in &ledger.refused {
            counts
                .entry(refused.client().to_string())
                .or_default()
                .refused += 1;
        }
        for lost in &findings.lost {
            let client = lost.what.split(' ').next().unwrap_or_default();
            counts.entry(client.to_string()).or_default().lost += 1;
        }
        let uncaught = ledger
            .uncaught
            .iter()
            .map(|u| format!("{} {}: {}", u.writer, u.seq, u.text))
            .collect();
        Outcome {
            mode,
            deploys,
            end_failures,
            verify,
            probe,
            counts,
            failed_uploads,
            failed_kinds,
            uncaught,
            unreadable_lines: ledger.unreadable.len(),
            findings,
            objects: 0,
            took: Duration::ZERO,
        }
    }

    fn total(&self) -> Counts {
        let mut all = Counts::default();
        for counts in self.counts.values() {
            all.add(*counts);
        }
        all
    }

    fn probe_refused(&self) -> u64 {
        self.probe.as_ref().map_or(0, |p| p.refused)
    }

    /// No connection refused, nothing acknowledged lost, every deploy done as it
    /// should, a clean end.
    fn passed(&self, args: &DeploysArgs) -> bool {
        self.problems(args).is_empty()
    }

    /// Why it failed, if it did.
    fn problems(&self, args: &DeploysArgs) -> Vec<String> {
        let mut problems = Vec::new();
        let total = self.total();
        if total.refused > 0 {
            problems.push(format!(
                "{} connections refused to the clients",
                total.refused
            ));
        }
        if self.probe_refused() > 0 {
            problems.push(format!(
                "{} connections refused to the probe",
                self.probe_refused()
            ));
        }
        if !self.findings.is_clean() {
            problems.push(format!(
                "the check: {} acknowledged uploads lost, {} unexpected objects, {} uploads aborted for lost bytes",
                self.findings.lost.len(),
                self.findings.unexpected.len(),
                self.findings.aborted_for_lost_bytes.len()
            ));
        }
        if self.deploys.done < args.deploys {
            problems.push(format!(
                "{} of {} deploys done",
                self.deploys.done, args.deploys
            ));
        }
        if self.mode == DeployMode::Sighup
            && self.deploys.failed_successors < args.failing_successors
        {
            problems.push(format!(
                "{} of {} SIGHUPs with a failing new relay done",
                self.deploys.failed_successors, args.failing_successors
            ));
        }
        problems.extend(self.deploys.fatal.iter().cloned());
        problems.extend(self.deploys.failures.iter().cloned());
        problems.extend(self.end_failures.iter().cloned());
        problems.extend(self.verify.problems.iter().cloned());
        problems
    }

    fn describe(&self) -> &'static str {
        match self.mode {
            DeployMode::Sighup => {
                "deploys by SIGHUP: the relay binds its own --listen, each one hands the socket to a new process of its command line"
            }
            DeployMode::Kill => {
                "kill -9 under a supervisor: this harness holds the socket and starts the relay on it (fd 3, LISTEN_FDS=1)"
            }
            DeployMode::Rebind => {
                "kill -9 without socket activation (the control): the relay binds --listen again at each start, refusing connections meanwhile"
            }
        }
    }

    /// The mode's summary.
    fn render(&self, args: &DeploysArgs) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n== {}: {} of {} {}",
            self.mode.label(),
            self.deploys.done,
            args.deploys,
            self.describe()
        );
        let _ = writeln!(
            out,
            "writers: {}, objects up to {} bytes; gaps of load {}-{} ms; seed {}",
            writers::describe(&args.load),
            args.load.max_bytes,
            args.min_gap_ms,
            args.max_gap_ms,
            args.seed
        );
        if self.mode == DeployMode::Sighup {
            let _ = writeln!(
                out,
                "SIGHUPs whose new relay failed (--failing-successors): {} of {}, the old relay \
                 serving on or starting again on its socket",
                self.deploys.failed_successors, args.failing_successors
            );
        }
        let took = &self.deploys.took;
        if let Some(max) = took.iter().max() {
            let mean = took.iter().sum::<Duration>() / took.len() as u32;
            let _ = writeln!(
                out,
                "from the signal to the relay listening again: mean {mean:.2?}, max {max:.2?}"
            );
        }
        let _ = writeln!(
            out,
            "\n{:<14}{:>13}{:>9}{:>8}{:>12}{:>6}",
            "client", "acknowledged", "refused", "failed", "unfinished", "lost"
        );
        let rows = self.counts.iter().map(|(c, n)| (c.as_str(), *n));
        for (client, c) in rows.chain([("all", self.total())]) {
            let _ = writeln!(
                out,
                "{client:<14}{:>13}{:>9}{:>8}{:>12}{:>6}",
                c.acknowledged, c.refused, c.failed, c.unfinished, c.lost
            );
        }
        if let Some(p) = &self.probe {
            let _ = writeln!(
                out,
                "\nprobe (a TCP connect every {:?}): {} connected, {} refused{}, {} failed otherwise",
                p.every,
                p.connected,
                p.refused,
                p.first_refused
                    .as_ref()
                    .map_or(String::new(), |t| format!(" (the first at {t})")),
                p.other
            );
        }
        let f = &self.findings;
        let _ = writeln!(
            out,
            "bucket: {} objects; acknowledged uploads not in it as written: {}; objects no writer wrote: {}; uploads aborted for lost bytes: {}",
            self.objects,
            f.lost.len(),
            f.unexpected.len(),
            f.aborted_for_lost_bytes.len()
        );
        for lost in f.lost.iter().take(10) {
            let _ = writeln!(out, "  LOST {} {:?}: {}", lost.what, lost.name, lost.why);
        }
        for line in f
            .unexpected
            .iter()
            .chain(&f.aborted_for_lost_bytes)
            .take(10)
        {
            let _ = writeln!(out, "  {line:.300}");
        }
        if !f.client_gave_up_unanswered.is_empty() || !f.client_gave_up_complete.is_empty() {
            let _ = writeln!(
                out,
                "node uploads given up after the client's own status query failed (clients/torture/node_status_query_reset.js): {}; after it answered 200 with the object stored: {}",
                f.client_gave_up_unanswered.len(),
                f.client_gave_up_complete.len()
            );
        }
        self.render_failed(&mut out);
        let _ = writeln!(
            out,
            "spool verify after the drain: {} entries, {} problems",
            self.verify.entries,
            self.verify.problems.len()
        );
        if self.unreadable_lines > 0 {
            let _ = writeln!(out, "unreadable log lines: {}", self.unreadable_lines);
        }
        let problems = self.problems(args);
        for problem in &problems {
            let _ = writeln!(out, "FAILURE {problem}");
        }
        let verdict = if problems.is_empty() { "PASS" } else { "FAIL" };
        let _ = writeln!(out, "{}: {verdict} ({:.0?})", self.mode.label(), self.took);
        out
    }

    /// The failed uploads by client, kind and error, and the exceptions thrown.
    fn render_failed(&self, out: &mut String) {
        if self.failed_uploads.is_empty() && self.uncaught.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "failed uploads by client, kind, [code] and error ({} in all, each in failed.txt):",
            self.failed_uploads.len()
        );
        let mut kinds: Vec<(&String, &u64)> = self.failed_kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        for (text, n) in kinds.iter().take(FAILED_SHOWN) {
            let _ = writeln!(out, "  {n:>5}  {text}");
        }
        for line in self.uncaught.iter().take(FAILED_SHOWN) {
            let _ = writeln!(out, "  thrown outside an upload: {line:.300}");
        }
    }
}

/// Every mode in one table, as docs/torture.md records it.
fn table(args: &DeploysArgs, outcomes: &[Outcome], took: Duration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ntorture deploys: {} deploys per mode, writers {}, seed {}",
        args.deploys,
        writers::describe(&args.load),
        args.seed
    );
    let _ = writeln!(
        out,
        "\n| mode | deploys | acknowledged | refused | failed | acknowledged in the bucket | probe connects refused | result |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for o in outcomes {
        let total = o.total();
        let probe = o.probe.as_ref().map_or("-".to_string(), |p| {
            format!("{} of {}", p.refused, p.connected + p.refused + p.other)
        });
        let verdict = if o.passed(args) { "PASS" } else { "FAIL" };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} of {} | {probe} | {verdict} |",
            o.mode.label(),
            o.deploys.done,
            total.acknowledged,
            total.refused,
            total.failed,
            total.acknowledged - total.lost,
            total.acknowledged,
        );
    }
    let passed = outcomes.iter().all(|o| o.passed(args));
    let verdict = if passed { "PASS" } else { "FAIL" };
    let _ = writeln!(out, "\nresult: {verdict} ({took:.0?} in all)");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Ledger;

    const LOG: &str = r#"{"ev":"begin","writer":"node-0","seq":0,"name":"a","kind":"media","size":1,"md5":"m","crc32c":"c","contentType":"t"}
{"ev":"refused","writer":"node-0","seq":0,"error":"connect ECONNREFUSED 127.0.0.1:9"}
{"ev":"end","writer":"node-0","seq":0,"name":"a","answer":"ok"}
{"ev":"begin","writer":"node-0","seq":1,"name":"b","kind":"resumable","size":2,"md5":"m","crc32c":"c","contentType":"t"}
{"ev":"end","writer":"node-0","seq":1,"name":"b","answer":"error","error":"socket hang up"}
{"ev":"begin","writer":"python-1","seq":0,"name":"c","kind":"media","size":2,"md5":"m","crc32c":"c","contentType":"t"}
{"ev":"end","writer":"python-1","seq":0,"name":"c","answer":"ok"}
"#;

    #[test]
    fn counts_are_per_client_and_a_refusal_fails_the_mode_though_the_upload_succeeded() {
        let mut ledger = Ledger::default();
        ledger.add_lines(LOG, "log");
        let findings = Findings::default();
        let outcome = Outcome::new(
            DeployMode::Sighup,
            Deploys {
                done: 1,
                failed_successors: 2,
                ..Deploys::default()
            },
            Vec::new(),
            Verify::default(),
            None,
            &ledger,
            findings,
        );
        let node = outcome.counts["node"];
        assert_eq!(
            (node.acknowledged, node.refused, node.failed),
            (1, 1, 1),
            "{node:?}"
        );
        assert_eq!(outcome.counts["python"].acknowledged, 1);
        assert_eq!(outcome.total().acknowledged, 2);
        assert_eq!(
            outcome.failed_uploads,
            ["node-0 1 resumable [-] socket hang up"]
        );
        let args = <crate::args::Args as clap::Parser>::try_parse_from([
            "torture",
            "deploys",
            "--deploys",
            "1",
        ])
        .unwrap();
        let Some(crate::args::Command::Deploys(args)) = args.command else {
            panic!("not parsed as deploys");
        };
        let problems = outcome.problems(&args);
        assert_eq!(problems, ["1 connections refused to the clients"]);
        assert!(outcome.render(&args).contains("sighup: FAIL"));
    }
}
