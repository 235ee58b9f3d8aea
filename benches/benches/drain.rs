//! Drain throughput: entries per second from a spool holding a backlog of 1k, 10k,
//! 100k (and 1M with `SPOOL_BENCH_LARGE=1`) entries into an in-memory object store,
//! with 1, 4 and 16 workers. Each iteration drains 1,000 entries and is timed; the
//! spool is refilled to its backlog between iterations (untimed). The per-entry cost
//! must not grow with the backlog.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::{backlog_sizes, mark_clean, mark_dirty, prepared_spool};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use spool::{Drainer, DrainerConfig, Remote, Spool, SpoolConfig};

const BATCH: u64 = 1_000;
const PAYLOAD: usize = 1024;

fn drain(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("drain");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(BATCH));
    for backlog in backlog_sizes() {
        let dir = prepared_spool("drain", backlog, PAYLOAD);
        let config = SpoolConfig {
            max_files: backlog * 2,
            max_bytes: u64::MAX / 2,
            ..SpoolConfig::default()
        };
        let spool = rt.block_on(Spool::open(&dir, config)).unwrap();
        mark_dirty(&dir);
        let remote = Remote::new(Arc::new(object_store::memory::InMemory::new()));
        let mut refill_seq = 0u64;
        for workers in [1, 4, 16] {
            let id = BenchmarkId::new(format!("{workers}w"), backlog);
            group.bench_with_input(id, &workers, |b, &workers| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        rt.block_on(refill(&spool, backlog, &mut refill_seq));
                        total += rt.block_on(drain_batch(&spool, &remote, workers));
                    }
                    total
                })
            });
        }
        rt.block_on(refill(&spool, backlog, &mut refill_seq));
        drop(spool);
        mark_clean(&dir);
    }
    group.finish();
}

/// Tops the spool back up to `backlog` entries.
async fn refill(spool: &Spool, backlog: u64, seq: &mut u64) {
    let missing = backlog - spool.stats().files.min(backlog);
    let payload = Bytes::from(vec![0xa5; PAYLOAD]);
    let puts = (0..missing).map(|_| {
        *seq += 1;
        let name = format!("refill/{seq:010}");
        let spool = spool.clone();
        let payload = payload.clone();
        async move { spool.put(&name, payload).await.unwrap() }
    });
    let mut puts = futures::stream::iter(puts).buffer_unordered(64);
    while futures::StreamExt::next(&mut puts).await.is_some() {}
}

use futures::StreamExt as _;

/// Time to drain `BATCH` entries with `workers` workers.
async fn drain_batch(spool: &Spool, remote: &Remote, workers: usize) -> Duration {
    let target = spool.stats().files - BATCH;
    let config = DrainerConfig {
        workers,
        rng_seed: Some(1),
        ..DrainerConfig::default()
    };
    let started = Instant::now();
    let drainer = Drainer::start(spool.clone(), remote.clone(), config);
    while spool.stats().files > target {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let elapsed = started.elapsed();
    drainer.shutdown().await;
    elapsed
}

criterion_group!(benches, drain);
criterion_main!(benches);
