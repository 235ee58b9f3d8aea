//! A read-only remount: the spool on a tmpfs, a backlog spooled while the store
//! fails, then `mount -o remount,ro` while the relay runs and the store heals (the
//! drainer delivers entries it cannot remove; new uploads cannot be staged), then
//! `mount -o remount,rw`.
//!
//! Expected (docs/runbook.md SpoolDrainLooping): 503 with `Retry-After` while
//! read-only for what needs the disk (resumable sessions, an upload the store does
//! not take), SpoolDrainLooping fires, the spool is not broken; after the remount
//! read-write it takes uploads and drains without a restart. Uploads that fit the
//! relay's memory buffer (8 MiB) go to the healed store without touching the disk
//! (since ecc9910), so few uploads fail and SpoolUploadsFailing is not required.

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use super::client::Writers;
use super::full::df;
use super::{Bed, Bins, Report, mount_tmpfs, remount, unmount_tmpfs};

const DISK_BYTES: u64 = 256 << 20;
const OBJECT_BYTES: usize = 128 << 10;
/// How long the file system stays read-only: SpoolDrainLooping needs 10 s (the
/// test's 10 minutes) in which `spool_files` did not fall, then 10 s more (`for`);
/// a put in flight at the remount can leave an index entry whose file never was,
/// forgotten when the drainer finds it gone (`spool_files` falls by one then).
const READ_ONLY_FOR: Duration = Duration::from_secs(30);
/// How long `remount,ro` is retried while the kernel says the mount is busy.
const REMOUNT_WITHIN: Duration = Duration::from_secs(10);

pub async fn run(bins: &Bins, dir: &Path) -> anyhow::Result<Report> {
    let mnt = dir.join("mnt");
    mount_tmpfs(&mnt, DISK_BYTES)?;
    let result = on_tmpfs(bins, dir, &mnt).await;
    let _ = remount(&mnt, "rw");
    unmount_tmpfs(&mnt);
    result
}

async fn on_tmpfs(bins: &Bins, dir: &Path, mnt: &Path) -> anyhow::Result<Report> {
    let mut report = Report {
        fault: "readonly",
        must_fire: vec!["SpoolDrainLooping"],
        must_not_fire: vec!["SpoolQuarantineFiles"],
        ..Report::default()
    };
    let bed = Bed::start(bins, dir, mnt.join("spool"), &[]).await?;
    report.did.push(format!(
        "spool-relay --dir {} on a tmpfs of {} MiB",
        mnt.join("spool").display(),
        DISK_BYTES >> 20
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    bed.phase("1 store down, a backlog");
    bed.store_down().await?;
    let writers = Writers::start(
        bed.relay.listen,
        "faults/readonly",
        4,
        OBJECT_BYTES,
        Duration::from_millis(200),
        &bed.tally,
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let backlog = bed.relay.spool_files().await.unwrap_or(0);
    report.did.push(format!(
        "fake-gcs fails every write for 3 s; 4 writers of {} KiB objects: {backlog} entries spooled",
        OBJECT_BYTES >> 10
    ));
    bed.phase("2 read-only, store healed");
    let began = Instant::now();
    let mut attempts = 0u32;
    let remounted = loop {
        attempts += 1;
        match remount(mnt, "ro") {
            Ok(()) => break Ok(began.elapsed()),
            Err(e) if began.elapsed() < REMOUNT_WITHIN => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => break Err(e),
        }
    };
    bed.fake.heal().await?;
    match &remounted {
        Ok(took) => report.did.push(format!(
            "mount -o remount,ro {}: done after {attempts} attempt(s) in {:.2} s (the kernel \
             refuses it while a file on the mount is open for writing); the store healed",
            mnt.display(),
            took.as_secs_f64()
        )),
        Err(e) => report.did.push(format!(
            "mount -o remount,ro failed for {} s ({attempts} attempts): {e:#}",
            REMOUNT_WITHIN.as_secs()
        )),
    }
    report.check(
        "mount -o remount,ro succeeds while the relay runs",
        remounted.is_ok(),
    );
    tokio::time::sleep(READ_ONLY_FOR).await;
    let during = bed.relay.spool_files().await.unwrap_or(0);
    bed.phase("3 read-write again");
    let rw = remount(mnt, "rw");
    report.did.push(format!(
        "read-only for {} s ({during} entries still spooled at its end); mount -o remount,rw: {}",
        READ_ONLY_FOR.as_secs(),
        match &rw {
            Ok(()) => "done".to_string(),
            Err(e) => format!("{e:#}"),
        }
    ));
    tokio::time::sleep(Duration::from_secs(8)).await;
    writers.stop().await;
    bed.phase("4 writers stopped, draining");
    let drained = bed.drained(Duration::from_secs(90)).await;
    report
        .did
        .push(format!("writers stopped; disk: {}", df(mnt)));
    report.check(
        format!("the spool drains to 0 after remount,rw, no restart ({drained:?})"),
        drained.is_ok(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let finished = bed.finish().await?;
    let t = &finished.tally;
    let ro = "2 read-only, store healed";
    let kinds = t.backpressure_in(ro);
    report.check(
        format!(
            "read-only is answered 503 with Retry-After ({} such answers, {} answered 200; \
             kinds: {kinds:?})",
            t.with_status(Some(ro), "503"),
            t.with_status(Some(ro), "200"),
        ),
        !kinds.is_empty() || remounted.is_err(),
    );
    let again = t.with_status(Some("3 read-write again"), "200");
    report.check(
        format!("uploads are taken again after remount,rw ({again} answered 200)"),
        again > 0,
    );
    let broken = finished.recorded.max(|s| u64::from(s.scrape.broken));
    report.gauges.push(format!(
        "spool_broken max {broken} (a directory fsync on a read-only tmpfs succeeds)"
    ));
    report.test_comment = format!(
        "Recorded by `torture faults --only readonly` on {} (docs/faults.md): spool-relay's\n\
         /metrics scraped every second; a backlog spooled behind a failing store, then the\n\
         spool's tmpfs remounted read-only while the store healed, then read-write again.\n\
         Time is scaled: each 1 s scrape is one 1m step here, so `for: 10m` is 10 s of the run\n\
         (and the drainer's removal pauses, 1 s doubling, are minutes here).",
        crate::clock::rfc3339()
    );
    report.finished(finished);
    Ok(report)
}
