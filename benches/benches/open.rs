//! Opening a spool: 10k, 100k (and 1M with `SPOOL_BENCH_LARGE=1`) entries of 1 KiB,
//! beside two baselines over the same directory: a bare listing (names only, no
//! stat, no read: the limit of an open that reads names only; the budget is 1.2x of
//! it), and a listing with one metadata read per entry. Before measuring, prints the
//! heap the index keeps per entry.
#![allow(clippy::disallowed_methods)] // benches measure real time

use std::path::Path;
use std::time::{Duration, SystemTime};

use benches::{CountingAlloc, Summary, large, prepared_spool};
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use spool::layout::ENTRIES_DIR;
use spool::{Spool, SpoolConfig};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn sizes() -> Vec<u64> {
    let mut sizes = vec![10_000, 100_000];
    if large() {
        sizes.push(1_000_000);
    }
    sizes
}

fn config(n: u64) -> SpoolConfig {
    SpoolConfig {
        max_files: n * 2,
        max_bytes: u64::MAX / 2,
        ..SpoolConfig::default()
    }
}

fn open(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("open");
    // Flat sampling: ten opens per figure, not criterion's default 55 (at 1M entries
    // an open takes seconds).
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .measurement_time(Duration::from_secs(10));
    for n in sizes() {
        let dir = prepared_spool("open", n, 1024);
        let before = CountingAlloc::live_bytes();
        let spool = rt.block_on(Spool::open(&dir, config(n))).unwrap();
        let per_entry = (CountingAlloc::live_bytes() - before) as f64 / n as f64;
        eprintln!("open/{n}: index keeps {per_entry:.1} heap bytes per entry");
        drop(spool);

        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::new("spool", n), &n, |b, &n| {
            b.iter(|| drop(rt.block_on(Spool::open(&dir, config(n))).unwrap()))
        });
        group.bench_with_input(BenchmarkId::new("list", n), &n, |b, _| {
            b.iter(|| list(&dir.join(ENTRIES_DIR)))
        });
        group.bench_with_input(BenchmarkId::new("list+stat", n), &n, |b, _| {
            b.iter(|| list_and_stat(&dir.join(ENTRIES_DIR)))
        });
    }
    group.finish();
}

/// The floor for any open: every name in the directory, nothing else (`getdents64`).
fn list(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().len())
        .sum()
}

/// The floor for an open that looks at every entry: list, and one metadata read each.
fn list_and_stat(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

fn summary(since: SystemTime) {
    let mut table = Summary::new(
        "open: spool beside a bare listing, and beside list+stat",
        "entries/s",
        since,
    );
    for n in sizes() {
        let n = n.to_string();
        table = table
            .row(
                &format!("{n} entries / list"),
                ["open", "spool", &n],
                Some(["open", "list", &n]),
            )
            .row(
                &format!("{n} entries / list+stat"),
                ["open", "spool", &n],
                Some(["open", "list+stat", &n]),
            );
    }
    table.print();
}

fn main() {
    let since = benches::started();
    let mut criterion = Criterion::default().configure_from_args();
    open(&mut criterion);
    criterion.final_summary();
    summary(since);
}
