//! Drain throughput: entries per second from a spool holding a backlog of 1k, 10k,
//! 100k (and 1M with `SPOOL_BENCH_LARGE=1`) entries of 1 KiB into an in-memory object
//! store, with 1, 4 and 16 workers. Each iteration drains 500 entries and is timed
//! (start of the drainer to the 500th entry removed); the spool is refilled to its
//! backlog between iterations (untimed) and each batch gets an empty store. The
//! per-entry cost must not grow with the backlog: after the run, a table gives each
//! backlog's rate beside the 1k rate at the same worker count.
//!
//! For a profile without the refills: `SPOOL_BENCH_PROFILE_DRAIN=<workers>` skips
//! criterion and drains 50,000 entries of the 100k backlog in one go, printing the
//! rate, and exits (the next run prepares the backlog again). Run the bench binary
//! under `perf record` or `perf trace -s` with it set.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::time::SystemTime;

use benches::{
    Backlog, DRAIN_BATCH, Summary, backlog_sizes, batch_group, mark_clean, timed_batches,
};
use criterion::{BenchmarkId, Criterion};
use spool::testing::{FlakyStore, Mode};

const WORKERS: [usize; 3] = [1, 4, 16];

fn drain(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = batch_group(c, "drain");
    for backlog in backlog_sizes() {
        let (mut rig, dir) = Backlog::open(&rt, "drain", backlog);
        for workers in WORKERS {
            let id = BenchmarkId::new(format!("{workers}w"), backlog);
            group.bench_with_input(id, &workers, |b, &workers| {
                b.iter_custom(|iters| {
                    timed_batches(iters, || {
                        rt.block_on(rig.refill());
                        let store = FlakyStore::new(Mode::Healthy);
                        rt.block_on(rig.drain(&store, workers, DRAIN_BATCH))
                    })
                })
            });
        }
        rt.block_on(rig.refill());
        rig.assert_clean_path();
        drop(rig);
        mark_clean(&dir);
    }
    group.finish();
}

fn summary(since: SystemTime) {
    let mut table = Summary::new(
        "drain into InMemory: each backlog beside the 1k backlog",
        "entries/s",
        since,
    );
    for backlog in backlog_sizes() {
        for workers in WORKERS {
            let (w, n) = (format!("{workers}w"), backlog.to_string());
            let baseline = (backlog != 1_000).then_some(["drain", w.as_str(), "1000"]);
            table = table.row(&format!("{w} backlog {n}"), ["drain", &w, &n], baseline);
        }
    }
    table.print();
}

/// One long drain for a profiler: 50,000 of the 100k backlog. The directory is left
/// marked dirty, so the next run prepares it again.
fn profile(workers: usize) {
    const COUNT: u64 = 50_000;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (rig, _dir) = Backlog::open(&rt, "drain", 100_000);
    let store = FlakyStore::new(Mode::Healthy);
    let took = rt.block_on(rig.drain(&store, workers, COUNT));
    println!(
        "drained {COUNT} entries with {workers} workers in {took:?}: {:.0} entries/s",
        COUNT as f64 / took.as_secs_f64()
    );
    rig.assert_clean_path();
}

fn main() {
    if let Ok(workers) = std::env::var("SPOOL_BENCH_PROFILE_DRAIN") {
        return profile(
            workers
                .parse()
                .expect("SPOOL_BENCH_PROFILE_DRAIN=<workers>"),
        );
    }
    let since = benches::started();
    let mut criterion = Criterion::default().configure_from_args();
    drain(&mut criterion);
    criterion.final_summary();
    summary(since);
}
