//! Drain on loopback, in CPU per entry: what the spool's own work costs beyond the
//! client's, against the bare system calls of one entry file. The budget
//! (docs/ARCHITECTURE.md, "The design's constraints and budgets"): the spool's own CPU
//! per drained entry at most 1.3x the bare calls.
//!
//! Three loops, each over [`ROUND`] entries of 1 KiB, run in turn in every one of
//! [`ROUNDS`] rounds (so that the machine's load falls on all three alike), each
//! measured in the process's CPU time (all threads, to the nanosecond):
//! - `drain`: the spool's drainer with [`WORKERS`] workers moves entries from a
//!   spool of [`BACKLOG`] through the real `object_store` GCS client to the fake on
//!   a loopback port in this process (the spool refilled between rounds, untimed;
//!   the end awaited by sleeping, not spinning);
//! - `put_loop`: the same client puts as many objects from as many tasks (the
//!   client's and the fake's CPU, which the drain pays too);
//! - `bare`: `open`, `read`, `close` and `unlink` of as many 1 KiB files, one
//!   after another on one thread, in a directory beside the spool (the files are
//!   written and synced untimed first).
//!
//! Before the drain and before the bare loop, the page cache is dropped (untimed,
//! as root): the drain takes the oldest entries, which a restart or a long outage
//! leaves cold, and a baseline reading files it has just written would count the
//! disk's reads against the spool alone. Where the cache cannot be dropped, the
//! bench says so and both loops read what the cache holds.
//!
//! The spool's own CPU per entry is (`drain` - `put_loop`) / entries; its ratio to
//! `bare` per entry is the figure. Prints each round and the medians.
//!
//! For a profile of the drain alone: `SPOOL_BENCH_PROFILE_DRAIN_CPU=1` drains
//! [`PROFILE_ENTRIES`] entries of the backlog in one go (no refill, no other loop),
//! prints its CPU per entry and exits (the next run prepares the backlog again); run
//! the bench binary under `perf record -g` with it set.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use benches::{
    BUCKET, Backlog, DRAIN_PAYLOAD, mark_clean, median, process_cpu_ns, put_loop, run_token,
    scratch_root, start_fake,
};
use bytes::Bytes;
use spool::testing::{FlakyStore, Mode};

const BACKLOG: u64 = 10_000;
const ROUND: u64 = 2_000;
const ROUNDS: usize = 10;
const WORKERS: usize = 4;
/// Entries the profiling run drains.
const PROFILE_ENTRIES: u64 = 8_000;

/// CPU per entry of each loop in one round.
struct Round {
    drain: Duration,
    put_loop: Duration,
    bare: Duration,
}

impl Round {
    /// The spool's own CPU per entry (the drain's beyond the client's).
    fn own(&self) -> Duration {
        self.drain.saturating_sub(self.put_loop)
    }

    fn ratio(&self) -> f64 {
        self.own().as_secs_f64() / self.bare.as_secs_f64()
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (fake, addr) = rt.block_on(start_fake(0));
    let store = FlakyStore::wrapping(
        spool::connect::store_from_url(&format!("gs://{BUCKET}"), Some(&format!("http://{addr}")))
            .unwrap(),
        Mode::Healthy,
    );
    let (mut rig, dir) = Backlog::open(&rt, "drain_cpu", BACKLOG);
    if std::env::var_os("SPOOL_BENCH_PROFILE_DRAIN_CPU").is_some() {
        let poll = Some(Duration::from_millis(1));
        let before = process_cpu_ns();
        rt.block_on(rig.drain_polling(&store, WORKERS, PROFILE_ENTRIES, poll));
        let cpu = (process_cpu_ns() - before) / PROFILE_ENTRIES as u32;
        println!(
            "drained {PROFILE_ENTRIES} entries: {:.1} us of CPU per entry",
            us(cpu)
        );
        return;
    }
    let bare_dir = scratch_root().join("drain_cpu-bare");
    let (token, payload) = (run_token(), Bytes::from(vec![0xa5; DRAIN_PAYLOAD]));
    let mut rounds = Vec::with_capacity(ROUNDS);
    println!("drain_cpu: CPU per entry, {WORKERS} workers, {ROUND} entries of 1 KiB per loop");
    println!("  round     drain  put_loop      own      bare   own/bare");
    for r in 0..ROUNDS {
        rt.block_on(rig.refill());
        drop_page_cache();
        let drain = per_entry(|| {
            let poll = Some(Duration::from_millis(1));
            rt.block_on(rig.drain_polling(&store, WORKERS, ROUND, poll));
        });
        let first = r as u64 * ROUND;
        let put_loop = per_entry(|| {
            rt.block_on(put_loop(
                &store,
                &token,
                &payload,
                WORKERS,
                first..first + ROUND,
            ));
        });
        write_files(&bare_dir, ROUND);
        drop_page_cache();
        let bare = per_entry(|| read_and_unlink(&bare_dir, ROUND));
        let round = Round {
            drain,
            put_loop,
            bare,
        };
        println!(
            "  {r:>5} {:>8.1}us {:>8.1}us {:>7.1}us {:>7.1}us {:>9.2}",
            us(round.drain),
            us(round.put_loop),
            us(round.own()),
            us(round.bare),
            round.ratio()
        );
        rounds.push(round);
    }
    rt.block_on(rig.refill());
    rig.assert_clean_path();
    drop(rig);
    mark_clean(&dir);
    let _ = std::fs::remove_dir_all(&bare_dir);
    assert!(fake.stats().by_status.keys().all(|&s| s == 200));
    summary(&rounds);
}

/// The process's CPU time spent in `run`, per entry of a loop.
fn per_entry(run: impl FnOnce()) -> Duration {
    let before = process_cpu_ns();
    run();
    (process_cpu_ns() - before) / ROUND as u32
}

/// `n` entry-sized files in `dir`, written and synced (as a spool's entries are).
fn write_files(dir: &Path, n: u64) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let data = vec![0x5a; DRAIN_PAYLOAD + 64];
    for i in 0..n {
        std::fs::write(dir.join(format!("{i:08}.entry")), &data).unwrap();
    }
    let synced = std::process::Command::new("sync").status().unwrap();
    assert!(synced.success());
}

/// Writes dirty pages out and drops the clean ones (`/proc/sys/vm/drop_caches`,
/// root only), so that the next loop reads from the disk; says once if it cannot.
fn drop_page_cache() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let synced = std::process::Command::new("sync").status().unwrap();
    assert!(synced.success());
    if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", "1") {
        WARNED.call_once(|| {
            eprintln!("drain_cpu: the page cache is not dropped ({e}): both loops read warm files")
        });
    }
}

/// What a drain must do to each entry file at the least: open, read, close, unlink.
fn read_and_unlink(dir: &Path, n: u64) {
    let mut buf = Vec::with_capacity(2 * DRAIN_PAYLOAD);
    for i in 0..n {
        let path = dir.join(format!("{i:08}.entry"));
        let mut file = std::fs::File::open(&path).unwrap();
        buf.clear();
        file.read_to_end(&mut buf).unwrap();
        drop(file);
        std::fs::remove_file(&path).unwrap();
    }
    assert!(buf.len() > DRAIN_PAYLOAD);
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn summary(rounds: &[Round]) {
    let of = |f: fn(&Round) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    println!(
        "\ndrain_cpu medians of {} rounds: drain {:.1} us, put_loop {:.1} us, the spool's own \
         {:.1} us, bare calls {:.1} us per entry; own/bare {:.2} (budget <= 1.3)",
        rounds.len(),
        of(|r| us(r.drain)),
        of(|r| us(r.put_loop)),
        of(|r| us(r.own())),
        of(|r| us(r.bare)),
        of(Round::ratio),
    );
}
