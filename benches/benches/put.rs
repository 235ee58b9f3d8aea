//! Durable put throughput: 4 KiB and 1 MiB objects at 1, 8, 32 and 128 concurrent
//! callers, beside the bare syscall sequence a naive spool would do per object
//! (create + write + fsync + rename + directory fsync) at the same concurrency. The
//! spool's group commit shares directory fsyncs, so it should pull ahead as
//! concurrency grows. First, the two fsyncs every put waits for, alone and one at a
//! time: a new 4 KiB file's data sync, and a directory sync after a rename.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use benches::{Summary, scratch_root};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput};
use spool::{Spool, SpoolConfig};

const CALLERS: [usize; 4] = [1, 8, 32, 128];
const SIZES: [(&str, usize); 2] = [("4KiB", 4 << 10), ("1MiB", 1 << 20)];

/// The device's sync latency, one operation at a time: what bounds a single caller.
fn fsync(c: &mut Criterion) {
    let mut group = c.benchmark_group("fsync");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    let dir = fresh_dir("fsync");
    let page = vec![0x42u8; 4 << 10];
    group.bench_function("file_4KiB", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                let path = dir.join(format!("{i}.tmp"));
                let mut file = std::fs::File::create_new(&path).unwrap();
                file.write_all(&page).unwrap();
                let started = Instant::now();
                file.sync_data().unwrap();
                total += started.elapsed();
            }
            std::fs::remove_dir_all(&dir).unwrap();
            std::fs::create_dir_all(&dir).unwrap();
            total
        })
    });
    // One file renamed back and forth: each sync has exactly one rename to persist.
    let mut names = (dir.join("a"), dir.join("b"));
    std::fs::write(&names.0, b"x").unwrap();
    group.bench_function("dir_after_rename", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                std::fs::rename(&names.0, &names.1).unwrap();
                std::mem::swap(&mut names.0, &mut names.1);
                let started = Instant::now();
                std::fs::File::open(&dir).unwrap().sync_all().unwrap();
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

fn put(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (label, size) in SIZES {
        let mut group = c.benchmark_group(format!("put/{label}"));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(5));
        group.throughput(Throughput::Elements(1));
        let payload = Bytes::from(vec![0x42; size]);
        for callers in CALLERS {
            let dir = fresh_dir(&format!("put-spool-{label}-{callers}"));
            let config = SpoolConfig {
                max_files: u64::MAX / 2,
                max_bytes: u64::MAX / 2,
                ..SpoolConfig::default()
            };
            let spool = rt.block_on(Spool::open(&dir, config)).unwrap();
            group.bench_with_input(
                BenchmarkId::new("spool", callers),
                &callers,
                |b, &callers| {
                    b.iter_custom(|iters| {
                        let elapsed = rt.block_on(spool_puts(&spool, &payload, iters, callers));
                        rt.block_on(empty(&spool));
                        elapsed
                    })
                },
            );
            drop(spool);
            let bare = fresh_dir(&format!("put-bare-{label}-{callers}"));
            group.bench_with_input(
                BenchmarkId::new("bare", callers),
                &callers,
                |b, &callers| {
                    b.iter_custom(|iters| {
                        let elapsed = rt.block_on(bare_puts(&bare, &payload, iters, callers));
                        std::fs::remove_dir_all(&bare).unwrap();
                        std::fs::create_dir_all(&bare).unwrap();
                        elapsed
                    })
                },
            );
        }
        group.finish();
    }
}

fn fresh_dir(label: &str) -> PathBuf {
    let dir = scratch_root().join(label);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `iters` puts shared among `callers` concurrent tasks.
async fn spool_puts(spool: &Spool, payload: &Bytes, iters: u64, callers: usize) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers as u64)
        .map(|caller| {
            let (spool, payload) = (spool.clone(), payload.clone());
            tokio::spawn(async move {
                for i in (caller..iters).step_by(callers) {
                    spool.put(&format!("o/{i}"), payload.clone()).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

async fn empty(spool: &Spool) {
    while let Some(claim) = spool.claim_oldest() {
        spool.remove(claim).await.unwrap();
    }
}

/// The same work done naively: every object pays its own directory fsync.
async fn bare_puts(dir: &Path, payload: &Bytes, iters: u64, callers: usize) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers as u64)
        .map(|caller| {
            let (dir, payload) = (dir.to_path_buf(), payload.clone());
            tokio::task::spawn_blocking(move || {
                for i in (caller..iters).step_by(callers) {
                    let tmp = dir.join(format!("{i}.tmp"));
                    let mut file = std::fs::File::create_new(&tmp).unwrap();
                    file.write_all(&payload).unwrap();
                    file.sync_data().unwrap();
                    std::fs::rename(&tmp, dir.join(format!("{i}.entry"))).unwrap();
                    std::fs::File::open(&dir).unwrap().sync_all().unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

fn summary(since: SystemTime) {
    let mut table = Summary::new(
        "durable put: spool beside the bare sequence",
        "puts/s",
        since,
    );
    for (label, _) in SIZES {
        let group = format!("put/{label}");
        for callers in CALLERS {
            let n = callers.to_string();
            table = table.row(
                &format!("{label} x{callers}"),
                [&group, "spool", &n],
                Some([&group, "bare", &n]),
            );
        }
    }
    table.print();
}

fn main() {
    let since = benches::started();
    let mut criterion = Criterion::default().configure_from_args();
    fsync(&mut criterion);
    put(&mut criterion);
    criterion.final_summary();
    summary(since);
}
