//! Durable put throughput: 4 KiB and 1 MiB objects at 1, 8, 32 and 128 concurrent
//! callers, beside the bare syscall sequence a naive spool would do per object
//! (create + write + fsync + rename + directory fsync) at the same concurrency. The
//! spool's group commit shares directory fsyncs, so it should pull ahead as
//! concurrency grows.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use benches::scratch_root;
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use spool::{Spool, SpoolConfig};

fn put(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (label, size) in [("4KiB", 4 << 10), ("1MiB", 1 << 20)] {
        let mut group = c.benchmark_group(format!("put/{label}"));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(5));
        group.throughput(Throughput::Elements(1));
        let payload = Bytes::from(vec![0x42; size]);
        for callers in [1usize, 8, 32, 128] {
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

criterion_group!(benches, put);
criterion_main!(benches);
