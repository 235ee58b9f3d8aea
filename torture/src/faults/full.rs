//! A full disk: the spool on a tmpfs of [`DISK_BYTES`], the store failing every
//! write so that every upload is spooled, writers until the disk is full and then
//! some; then the store heals and the spool drains while the writers go on.
//!
//! Expected (docs/relay.md "What it answers", docs/runbook.md SpoolRejectingUploads):
//! backpressure, 503 with `Retry-After`, never a broken spool; uploads taken again
//! once room frees; every acknowledged upload in the bucket at the end.

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use super::client::Writers;
use super::{Bed, Bins, Report, mount_tmpfs, unmount_tmpfs};

/// The tmpfs's size.
const DISK_BYTES: u64 = 24 << 20;
/// Each object's size (a resumable upload sends 256 KiB, then the rest).
const OBJECT_BYTES: usize = 384 << 10;
/// How long the writers go on once the disk refused the first upload.
const FULL_FOR: Duration = Duration::from_secs(12);

pub async fn run(bins: &Bins, dir: &Path) -> anyhow::Result<Report> {
    let mnt = dir.join("mnt");
    mount_tmpfs(&mnt, DISK_BYTES)?;
    let result = on_tmpfs(bins, dir, &mnt).await;
    unmount_tmpfs(&mnt);
    result
}

async fn on_tmpfs(bins: &Bins, dir: &Path, mnt: &Path) -> anyhow::Result<Report> {
    let mut report = Report {
        fault: "full",
        must_fire: vec!["SpoolRejectingUploads"],
        must_not_fire: vec!["SpoolBroken", "SpoolUploadsFailing", "SpoolQuarantineFiles"],
        ..Report::default()
    };
    let bed = Bed::start(bins, dir, mnt.join("spool"), &[]).await?;
    report.did.push(format!(
        "spool-relay --dir {} on a tmpfs of {} MiB (mount -t tmpfs -o size={DISK_BYTES}), \
         --max-bytes 1GiB (its default: the disk fills first)",
        mnt.join("spool").display(),
        DISK_BYTES >> 20
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    bed.phase("1 store down, filling");
    bed.store_down().await?;
    let writers = Writers::start(
        bed.relay.listen,
        "faults/full",
        6,
        OBJECT_BYTES,
        Duration::from_millis(200),
        &bed.tally,
    );
    report.did.push(format!(
        "fake-gcs answers every write 503; 6 writers, {} KiB objects, cycling XML PUT, JSON \
         media, resumable (256 KiB chunk + rest); 200 ms pause after a refusal",
        OBJECT_BYTES >> 10
    ));
    let began = Instant::now();
    let full_at = loop {
        let refused = bed.tally.lock().expect("tally").with_status(None, "503");
        if refused > 0 {
            break Some(began.elapsed());
        }
        if began.elapsed() > Duration::from_secs(60) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    report.did.push(match full_at {
        Some(at) => format!(
            "the first 503 came {:.1} s in; the writers went on for {} s",
            at.as_secs_f64(),
            FULL_FOR.as_secs()
        ),
        None => "no 503 within 60 s".to_string(),
    });
    tokio::time::sleep(FULL_FOR).await;
    let df = df(mnt);
    bed.phase("2 store healed");
    bed.fake.heal().await?;
    report.did.push(format!(
        "disk while full: {df}; then the store healed, writers on for 8 s"
    ));
    tokio::time::sleep(Duration::from_secs(8)).await;
    writers.stop().await;
    bed.phase("3 writers stopped, draining");
    let drained = bed.drained(Duration::from_secs(60)).await;
    report.check(
        format!("the spool drains to 0 ({drained:?})"),
        drained.is_ok(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let full_phase = "1 store down, filling";
    let healed = "2 store healed";
    let finished = bed.finish().await?;
    let t = &finished.tally;
    let kinds = t.backpressure_in(full_phase);
    report.check(
        format!(
            "the full disk is answered 503 with Retry-After ({} such answers; kinds: {:?})",
            t.with_status(Some(full_phase), "503"),
            kinds
        ),
        !kinds.is_empty(),
    );
    report.check(
        format!(
            "uploads are taken again once the store healed ({} answered 200)",
            t.with_status(Some(healed), "200")
        ),
        t.with_status(Some(healed), "200") > 0,
    );
    let broken = finished.recorded.max(|s| u64::from(s.scrape.broken));
    report.check(format!("spool_broken stays 0 (max {broken})"), broken == 0);
    report.test_comment = format!(
        "Recorded by `torture faults --only full` on {} (docs/faults.md): spool-relay's\n\
         /metrics scraped every second while its spool's tmpfs ({} MiB) filled up behind a\n\
         store failing every write, then the store healed and the spool drained.\n\
         Time is scaled: each 1 s scrape is one 1m step here, so `for: 5m` is 5 s of the run.",
        crate::clock::rfc3339(),
        DISK_BYTES >> 20
    );
    report.finished(finished);
    Ok(report)
}

/// `df`'s used and available bytes of `dir`, as text.
pub fn df(dir: &Path) -> String {
    let output = std::process::Command::new("df")
        .args(["-k", "--output=used,avail"])
        .arg(dir)
        .output();
    match output {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            let nums: Vec<&str> = text
                .lines()
                .nth(1)
                .unwrap_or("")
                .split_whitespace()
                .collect();
            format!(
                "{} KiB used, {} KiB available",
                nums.first().unwrap_or(&"?"),
                nums.get(1).unwrap_or(&"?")
            )
        }
        Err(e) => format!("df failed: {e}"),
    }
}
