//! EIO from crashfs: the spool on crashfs (in this process), a backlog spooled
//! behind a failing store; then every directory fsync and half the writes and file
//! fsyncs fail with EIO for a while; then, the store healed, every unlink (crashfs: a failed unlink
//! happened anyway half the time, as on a real disk).
//!
//! Expected (docs/runbook.md SpoolBroken, SpoolUploadsFailing, SpoolDrainLooping):
//! 503 with `Retry-After` while the disk fails; the spool broken after the failed
//! directory fsync (SpoolBroken once it lasts) and reopened by itself once the disk
//! answers again; failed removals retried after pauses of 1 s doubling to 64 s, so
//! the store sees a bounded number of requests per entry, not a tight
//! upload-412-HEAD loop.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crashfs::faults::{Errno, OpKind};
use tokio::time::Instant;

use super::client::Writers;
use super::{Bed, Bins, Report};
use crate::disk::CrashDisk;

const OBJECT_BYTES: usize = 128 << 10;
/// How long writes and syncs fail.
const EIO_FOR: Duration = Duration::from_secs(14);
/// How long unlinks fail.
const UNLINK_EIO_FOR: Duration = Duration::from_secs(30);

pub async fn run(bins: &Bins, dir: &Path) -> anyhow::Result<Report> {
    let (mnt, backing) = (dir.join("mnt"), dir.join("backing"));
    std::fs::create_dir_all(&mnt)?;
    std::fs::create_dir_all(&backing)?;
    let mut disk = CrashDisk::mount(&mnt, &backing, 1).await?;
    let result = on_crashfs(bins, dir, &disk).await;
    disk.clear_faults();
    let unmounted = disk.unmount().await;
    let report = result?;
    unmounted?;
    Ok(report)
}

async fn on_crashfs(bins: &Bins, dir: &Path, disk: &CrashDisk) -> anyhow::Result<Report> {
    let mut report = Report {
        fault: "eio",
        must_fire: vec!["SpoolBroken", "SpoolReopened", "SpoolUploadsFailing"],
        must_not_fire: vec!["SpoolQuarantineFiles"],
        ..Report::default()
    };
    let bed = Bed::start(bins, dir, disk.mountpoint.join("spool"), &[]).await?;
    report.did.push(format!(
        "spool-relay --dir {} on crashfs (over {})",
        disk.mountpoint.join("spool").display(),
        disk.backing.display()
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    bed.phase("1 store down, a backlog");
    bed.store_down().await?;
    let writers = Writers::start(
        bed.relay.listen,
        "faults/eio",
        4,
        OBJECT_BYTES,
        Duration::from_millis(200),
        &bed.tally,
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let backlog = bed.relay.spool_files().await.unwrap_or(0);
    report.did.push(format!(
        "fake-gcs fails every write; 4 writers of {} KiB objects for 4 s: {backlog} entries spooled",
        OBJECT_BYTES >> 10
    ));

    // Every directory fsync fails, and half the writes and file fsyncs: a put
    // that fails at its write or its file's fsync fails alone (PutError::Io); one
    // that gets through to its directory's fsync breaks the spool.
    bed.phase("2 EIO on fsyncdir, half of write and fsync");
    disk.set_fault(OpKind::Fsyncdir, Errno::EIO, 1.0)?;
    disk.set_fault(OpKind::Write, Errno::EIO, 0.5)?;
    disk.set_fault(OpKind::Fsync, Errno::EIO, 0.5)?;
    tokio::time::sleep(EIO_FOR).await;
    let broken_then = bed.recorder.last().map(|s| s.scrape.broken);
    disk.clear_faults();
    bed.phase("3 faults cleared, store down");
    let began = Instant::now();
    let reopened = loop {
        if bed.recorder.last().is_some_and(|s| !s.scrape.broken) {
            break Some(began.elapsed());
        }
        if began.elapsed() > Duration::from_secs(90) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    writers.stop().await;
    report.did.push(format!(
        "crashfs: fault fsyncdir EIO 1.0, write and fsync EIO 0.5, for {} s (spool_broken at \
         its end: {broken_then:?}), then fault clear: the spool took writes again after {}",
        EIO_FOR.as_secs(),
        reopened.map_or("more than 90 s".to_string(), |d| format!(
            "{:.1} s",
            d.as_secs_f64()
        ))
    ));
    report.check(
        "the spool reopens by itself once the disk answers again",
        reopened.is_some(),
    );

    let fake_log = bed.logs.join("fake-gcs.log");
    let from = std::fs::metadata(&fake_log).map_or(0, |m| m.len());
    let files_before = bed.relay.spool_files().await.unwrap_or(0);
    bed.phase("4 EIO on unlink, store healed");
    disk.set_fault(OpKind::Unlink, Errno::EIO, 1.0)?;
    bed.fake.heal().await?;
    tokio::time::sleep(UNLINK_EIO_FOR).await;
    let files_after = bed.relay.spool_files().await.unwrap_or(0);
    let to = std::fs::metadata(&fake_log).map_or(0, |m| m.len());
    disk.clear_faults();
    bed.phase("5 faults cleared, draining");
    let requests = store_requests(&fake_log, from, to);
    let inserts: Vec<u64> = requests.values().map(|r| r.0).collect();
    let (objects, total_inserts) = (inserts.len(), inserts.iter().sum::<u64>());
    let max_inserts = inserts.iter().copied().max().unwrap_or(0);
    let others: u64 = requests.values().map(|r| r.1).sum();
    // Tries of one entry within the phase: at 0 s, then after pauses of 1, 2, 4, ...
    // s: n tries take 2^(n-1) - 1 s; one more for a try that began just before.
    let bound = (UNLINK_EIO_FOR.as_secs_f64() + 1.0).log2().floor() as u64 + 2;
    report.did.push(format!(
        "crashfs: fault unlink EIO 1.0 for {} s with the store healed: spool_files {files_before} \
         -> {files_after}; the store got {total_inserts} writes of {objects} objects (at most \
         {max_inserts} of one; {others} other requests: HEAD/GET of the 412 proof), crashfs \
         injected {}",
        UNLINK_EIO_FOR.as_secs(),
        disk.faults_injected()
    ));
    report.check(
        format!(
            "failed removals do not loop: at most {bound} writes of one object in {} s \
             (pauses 1 s doubling; a tight loop would be hundreds), {max_inserts} seen",
            UNLINK_EIO_FOR.as_secs()
        ),
        max_inserts <= bound,
    );
    let drained = bed.drained(Duration::from_secs(90)).await;
    report.check(
        format!("the spool drains to 0 once unlinks work ({drained:?})"),
        drained.is_ok(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let finished = bed.finish().await?;
    let t = &finished.tally;
    let failing = "2 EIO on fsyncdir, half of write and fsync";
    let kinds = t.backpressure_in(failing);
    report.check(
        format!(
            "EIO is answered 503 with Retry-After ({} such answers, {} answered 200; kinds: {kinds:?})",
            t.with_status(Some(failing), "503"),
            t.with_status(Some(failing), "200")
        ),
        !kinds.is_empty(),
    );
    report.test_comment = format!(
        "Recorded by `torture faults --only eio` on {} (docs/faults.md): spool-relay on\n\
         crashfs, /metrics scraped every second; a backlog spooled behind a failing store,\n\
         then EIO on every directory fsync and half the writes and fsyncs for {} s, then (the\n\
         store healed) EIO on every unlink for {} s, then the faults cleared and the spool\n\
         drained.\n\
         Time is scaled: each 1 s scrape is one 1m step here, so `for: 5m` is 5 s of the run\n\
         (and the spool's reopening and removal pauses are minutes here).",
        crate::clock::rfc3339(),
        EIO_FOR.as_secs(),
        UNLINK_EIO_FOR.as_secs()
    );
    report.finished(finished);
    Ok(report)
}

/// The fake's requests per object between byte offsets `from` and `to` of its log:
/// (writes, other requests).
fn store_requests(log: &Path, from: u64, to: u64) -> BTreeMap<String, (u64, u64)> {
    let bytes = std::fs::read(log).unwrap_or_default();
    let (from, to) = (from as usize, (to as usize).min(bytes.len()));
    let text = String::from_utf8_lossy(bytes.get(from..to).unwrap_or_default());
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for line in text.lines() {
        let (Some(op), Some(object)) = (field(line, "op"), field(line, "object")) else {
            continue;
        };
        if object.is_empty() {
            continue;
        }
        let entry = out.entry(object.to_string()).or_default();
        if op == "storage.objects.insert" {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    out
}

/// `key="value"` in a log line (values here have no quotes inside).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {key}=\""))? + key.len() + 3;
    let rest = &line[start..];
    Some(&rest[..rest.find('"')?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_field_is_read_by_its_key() {
        let line = r#"2026 INFO fake_gcs: request op="storage.objects.insert" bucket="bkt" object="a/b" status="200""#;
        assert_eq!(field(line, "op"), Some("storage.objects.insert"));
        assert_eq!(field(line, "object"), Some("a/b"));
        assert_eq!(field(line, "nope"), None);
    }
}
