//! A low open-file limit: `prlimit --pid PID --nofile=64:64` on the running relay,
//! a backlog spooled behind a failing store, then the store heals while hundreds
//! of connections that send nothing and writers take every descriptor, then the
//! connections close. Twice: with `--max-connections` at its default (256, above
//! what the limit allows: every accept, every file the spool opens can fail with
//! EMFILE) and at 16 (what docs/relay.md asks: the limit above `--max-connections`
//! plus about 64... here 16 + 48).
//!
//! Expected: connections wait (or are refused by the kernel), never a broken spool,
//! no entry quarantined for EMFILE, the metrics endpoint answers (with the limit set
//! as documented, every scrape), and nothing acknowledged lost.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpStream;

use super::client::Writers;
use super::{Bed, Bins, Report};

/// The relay's open-file limit.
const NOFILE: u64 = 64;
/// Connections opened that send nothing.
const IDLE_CONNECTIONS: usize = 300;
const OBJECT_BYTES: usize = 96 << 10;
/// How long the descriptors are starved.
const STARVED_FOR: Duration = Duration::from_secs(12);

pub async fn run(bins: &Bins, dir: &Path) -> anyhow::Result<Report> {
    let mut report = Report {
        fault: "fds",
        must_not_fire: vec!["SpoolBroken", "SpoolQuarantineFiles", "SpoolReopened"],
        ..Report::default()
    };
    // The documented configuration first: its scrapes are the recorded test.
    let documented = starve(bins, &dir.join("max16"), Some(16), &mut report).await?;
    let missed = documented.recorded.missed();
    report.check(
        format!("with --max-connections 16 every scrape of /metrics answered ({missed} missed)"),
        missed == 0,
    );
    let mut default = Report::default();
    let over = starve(bins, &dir.join("max256"), None, &mut default).await?;
    let r = &over.recorded;
    let broken = r.max(|s| u64::from(s.scrape.broken));
    let quarantined = r.max(|s| s.quarantined_total);
    let lost = over.lost.len();
    report.did.extend(default.did);
    report.gauges.push(format!(
        "--max-connections 256 under nofile {NOFILE}: scrapes {} ({} unanswered); spool_broken \
         max {broken}; spool_quarantined_total {quarantined}; uploads failed {}; \
         spool_recoveries_total {}",
        r.samples.len(),
        r.missed(),
        r.max(|s| s.scrape.failed_total),
        r.max(|s| s.scrape.recoveries_total),
    ));
    report.check(
        format!("with --max-connections 256: spool_broken stays 0 (max {broken})"),
        broken == 0,
    );
    report.check(
        format!("with --max-connections 256: no entry quarantined ({quarantined})"),
        quarantined == 0,
    );
    report.check(
        format!(
            "with --max-connections 256: every acknowledged upload in the bucket ({} acknowledged, \
             {lost} missing)",
            over.tally.acknowledged.len()
        ),
        lost == 0,
    );
    let last = r.samples.last().copied().flatten();
    report.check(
        "with --max-connections 256: /metrics answers again once the connections closed",
        last.is_some(),
    );
    report.check(
        format!(
            "with --max-connections 256: no 5xx but 503 ({}), every 503 with Retry-After ({} without)",
            over.tally.server_errors(),
            over.tally.bare_503s()
        ),
        over.tally.server_errors() == 0 && over.tally.bare_503s() == 0,
    );
    let default_tally = over.tally.render();
    let default_log = over.log.clone();
    report.test_comment = format!(
        "Recorded by `torture faults --only fds` on {} (docs/faults.md): spool-relay under\n\
         `prlimit --nofile={NOFILE}:{NOFILE}` with --max-connections 16, /metrics scraped every\n\
         second; a backlog spooled behind a failing store, then the store healed while\n\
         idle connections (up to {IDLE_CONNECTIONS}: as many as the kernel answered) and 24\n\
         writers pressed on it. No alert fires.\n\
         Time is scaled: each 1 s scrape is one 1m step here.",
        crate::clock::rfc3339()
    );
    report.finished(documented);
    report
        .tally
        .push_str("    --- with --max-connections 256:\n");
    report.tally.push_str(&default_tally);
    report.log.push_str("    --- with --max-connections 256:\n");
    report.log.push_str(&default_log);
    Ok(report)
}

/// One relay under the limit: `max_connections` (`None`: its default).
async fn starve(
    bins: &Bins,
    dir: &Path,
    max_connections: Option<u32>,
    report: &mut Report,
) -> anyhow::Result<super::Finished> {
    let spool = dir.join("spool");
    let flag = max_connections.map(|n| format!("--max-connections={n}"));
    let extra: Vec<&str> = flag.iter().map(String::as_str).collect();
    let bed = Bed::start(bins, dir, spool, &extra).await?;
    let pid = bed.relay.pid().context("the relay has no pid")?;
    let status = std::process::Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={NOFILE}:{NOFILE}"))
        .status()
        .context("cannot run prlimit")?;
    anyhow::ensure!(status.success(), "prlimit failed: {status}");
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let label = max_connections.map_or("256 (default)".to_string(), |n| n.to_string());
    report.did.push(format!(
        "--max-connections {label}: prlimit --pid {pid} --nofile={NOFILE}:{NOFILE} on the \
         running relay ({open} descriptors open then)"
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    bed.phase("1 store down, a backlog");
    bed.store_down().await?;
    let writers = Writers::start(
        bed.relay.listen,
        "faults/fds/a",
        4,
        OBJECT_BYTES,
        Duration::from_millis(100),
        &bed.tally,
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    writers.stop().await;
    let backlog = bed.relay.spool_files().await.unwrap_or(0);
    bed.phase("2 starved, store healed");
    bed.fake.heal().await?;
    let mut idle = Vec::new();
    // Past what the relay accepts and its listen backlog holds, the kernel drops
    // the handshake: a connect then waits, so stop at the first that does.
    for _ in 0..IDLE_CONNECTIONS {
        let connect = TcpStream::connect(bed.relay.listen);
        match tokio::time::timeout(Duration::from_millis(300), connect).await {
            Ok(Ok(stream)) => idle.push(stream),
            _ => break,
        }
    }
    let opened = idle.len();
    let writers = Writers::start(
        bed.relay.listen,
        "faults/fds/b",
        24,
        OBJECT_BYTES,
        Duration::from_millis(100),
        &bed.tally,
    );
    tokio::time::sleep(STARVED_FOR).await;
    let peak = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    bed.phase("3 idle connections closed");
    drop(idle);
    tokio::time::sleep(Duration::from_secs(5)).await;
    writers.stop().await;
    report.did.push(format!(
        "  {backlog} entries spooled behind a failing store; then the store healed, \
         {opened} connections opened that send nothing (the next one's handshake \
         not answered) and 24 writers for {} s ({peak} \
         descriptors open at the end); then the idle connections closed, writers on for 5 s",
        STARVED_FOR.as_secs()
    ));
    bed.phase("4 draining");
    let drained = bed.drained(Duration::from_secs(60)).await;
    report.check(
        format!("--max-connections {label}: the spool drains to 0 ({drained:?})"),
        drained.is_ok(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    bed.finish().await
}
