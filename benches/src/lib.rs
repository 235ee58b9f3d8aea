//! Shared helpers for the criterion benches in `benches/`: prepared spool directories,
//! the drain loop the drain benches time, an object store wrapper that says exactly
//! when a batch is done, a counting allocator, and a summary of the run's medians and
//! ratios read back from criterion's output.
//!
//! Sizes: backlogs of 1k, 10k and 100k entries by default, 1M with
//! `SPOOL_BENCH_LARGE=1`. Payloads of drained entries are 1 KiB. Spool directories
//! live under `target/bench-spools/` unless `SPOOL_BENCH_DIR` names another place.
//!
//! Benches measure real time on the real disk; that is their job, so they are the one
//! place outside `spool::clock` allowed to read `std::time::Instant`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use fake_gcs::{FakeGcs, FakeGcsConfig, TokioClock};
use futures::StreamExt;
use spool::layout::{ENTRIES_DIR, entry_file_name};
use spool::metrics::DrainOutcome;
use spool::testing::FlakyStore;
use spool::{Drainer, DrainerConfig, Remote, Spool, SpoolConfig, WriteMode};
use spool::{entry, name};

/// The bucket every bench writes to.
pub const BUCKET: &str = "bench";

/// Starts the fake on `127.0.0.1:<any port>`, serving until the runtime ends, with
/// [`BUCKET`]; answering every write after `latency_ms` (its `slow` fault) when that
/// is not zero, about what Cloud Storage takes.
pub async fn start_fake(latency_ms: u64) -> (FakeGcs, std::net::SocketAddr) {
    let faults = if latency_ms == 0 {
        fake_gcs::FaultPlan::none()
    } else {
        fake_gcs::FaultPlan::from_toml(&format!(
            "[[fault]]\nfrom = \"0s\"\nmix = {{ slow = 1.0 }}\nslow = {{ min = \"{latency_ms}ms\", max = \"{latency_ms}ms\" }}\n"
        ))
        .expect("a valid fault plan")
    };
    let config = FakeGcsConfig {
        buckets: vec![BUCKET.to_string()],
        faults,
        ..FakeGcsConfig::default()
    };
    let fake = FakeGcs::new(config, Arc::new(TokioClock::start())).expect("the fake starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(fake.clone().serve_tcp(listener));
    (fake, addr)
}

/// The text of `scenarios/<file>`.
pub fn scenario_text(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `scenarios/us-central1.toml` cut to its first `length` (whole minutes): named
/// `us-central1-<N>m`, its `duration` set, its events dropped (they come later than
/// the slices the benches take, and the scenario check refuses events after the end).
pub fn us_central1_slice(length: Duration) -> String {
    let minutes = length.as_secs() / 60;
    assert_eq!(length.as_secs(), minutes * 60, "a slice of whole minutes");
    let mut table: toml::Table = scenario_text("us-central1.toml")
        .parse()
        .expect("us-central1.toml is TOML");
    table.insert("name".into(), format!("us-central1-{minutes}m").into());
    table.insert("duration".into(), format!("{minutes}m").into());
    table.remove("event");
    toml::to_string(&table).expect("a TOML table")
}

/// Builds `bin` of `package` with the cargo that runs the bench (release, or the
/// dev profile README's commands use) and returns the executable's path, from
/// cargo's own account of what it built.
pub fn cargo_build(package: &str, bin: &str, release: bool) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    command.args([
        "build",
        "-p",
        package,
        "--bin",
        bin,
        "--message-format=json",
    ]);
    if release {
        command.arg("--release");
    }
    let output = command
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo build of {package} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("cargo writes UTF-8");
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == bin)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo names the {bin} executable it built"))
}

/// Spool sizes to measure: 1k, 10k, 100k, and 1M with `SPOOL_BENCH_LARGE=1`.
pub fn backlog_sizes() -> Vec<u64> {
    let mut sizes = vec![1_000, 10_000, 100_000];
    if large() {
        sizes.push(1_000_000);
    }
    sizes
}

/// True when `SPOOL_BENCH_LARGE=1`.
pub fn large() -> bool {
    std::env::var("SPOOL_BENCH_LARGE").is_ok_and(|v| v == "1")
}

/// Where prepared spool directories are kept between runs (they take minutes to
/// create at 1M entries), and where the put and fsync benches write:
/// `target/bench-spools/`, or `$SPOOL_BENCH_DIR` (to measure another file system).
pub fn scratch_root() -> PathBuf {
    let root = match std::env::var_os("SPOOL_BENCH_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-spools"),
    };
    std::fs::create_dir_all(&root).unwrap();
    root
}

/// A spool directory holding exactly `n` valid entries with `payload_len`-byte
/// payloads, written directly and reused across runs. The files are not synced one by
/// one (bench setup), but the whole file system is synced once at the end: a file
/// still waiting for write-back is far cheaper to delete (no blocks to free; 5 us
/// against 60 us to 3.7 ms on the machine in BENCHMARKS.md), and a real spool's
/// entries are all on disk.
pub fn prepared_spool(label: &str, n: u64, payload_len: usize) -> PathBuf {
    let dir = scratch_root().join(format!("{label}-{n}-{payload_len}"));
    let entries = dir.join(ENTRIES_DIR);
    let count = std::fs::read_dir(&entries)
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    if count == n && !dir.join("dirty").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&entries).unwrap();
    let payload = vec![0x5a; payload_len];
    for seq in 1..=n {
        let name = format!("bench/{seq:08}");
        let created = 1_791_453_600_000 + seq;
        let data = entry::encode(
            seq,
            created,
            &name,
            WriteMode::CreateIfAbsent,
            &[],
            &payload,
        );
        let file = entry_file_name(seq, created, data.len() as u64, name::key(&name));
        std::fs::write(entries.join(file), data).unwrap();
    }
    let synced = std::process::Command::new("sync").status();
    assert!(
        synced.as_ref().is_ok_and(|s| s.success()),
        "sync failed: {synced:?}"
    );
    dir
}

/// Marks a prepared directory as changed, so the next run rebuilds it.
pub fn mark_dirty(dir: &Path) {
    std::fs::write(dir.join("dirty"), b"").unwrap();
}

/// Clears the dirty mark once a bench has restored the directory to `n` entries.
pub fn mark_clean(dir: &Path) {
    let _ = std::fs::remove_file(dir.join("dirty"));
}

/// A token unique to this process run, for object names that must not repeat across
/// runs (prepared spools keep the previous run's refilled entries, and a name seen
/// twice by one store takes the drainer's "already exists" path instead).
#[allow(clippy::disallowed_methods)] // bench setup: real time only makes a name unique
pub fn run_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{}-{nanos:x}", std::process::id())
}

/// Entries drained per timed iteration. Every backlog is at least twice this, so a
/// batch never empties the spool (an emptying spool idles workers in its last
/// entries and adds a directory sync: the smallest backlog would pay for both).
pub const DRAIN_BATCH: u64 = 500;
/// Payload of every drained entry.
pub const DRAIN_PAYLOAD: usize = 1024;

/// The criterion group of the batch benches (drain, http, relay): ten samples of
/// whole batches (flat sampling), 1 s of warm-up, 4 s of measuring, rates counted in
/// the [`DRAIN_BATCH`] entries of a batch.
pub fn batch_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(DRAIN_BATCH));
    group
}

/// The body of criterion's `iter_custom` for batches: `iters` calls of `batch`, each
/// returning its own timed part (set-up it does untimed is not counted), summed.
pub fn timed_batches(iters: u64, mut batch: impl FnMut() -> Duration) -> Duration {
    (0..iters).map(|_| batch()).sum()
}

/// A spool kept at a fixed backlog: refilled (untimed, through durable puts) after
/// every timed batch.
pub struct Backlog {
    /// The spool.
    pub spool: Spool,
    backlog: u64,
    token: String,
    refill_seq: u64,
    payload: Bytes,
}

impl Backlog {
    /// Opens the prepared spool `label` of `backlog` entries (see [`prepared_spool`]),
    /// with room for twice that, and marks it dirty until the bench calls
    /// [`mark_clean`] on the returned directory.
    pub fn open(rt: &tokio::runtime::Runtime, label: &str, backlog: u64) -> (Self, PathBuf) {
        assert!(backlog >= 2 * DRAIN_BATCH, "backlog {backlog} too small");
        let dir = prepared_spool(label, backlog, DRAIN_PAYLOAD);
        let config = SpoolConfig {
            max_files: backlog * 2,
            max_bytes: u64::MAX / 2,
            ..SpoolConfig::default()
        };
        let spool = rt.block_on(Spool::open(&dir, config)).unwrap();
        mark_dirty(&dir);
        let rig = Self {
            spool,
            backlog,
            token: run_token(),
            refill_seq: 0,
            payload: Bytes::from(vec![0xa5; DRAIN_PAYLOAD]),
        };
        (rig, dir)
    }

    /// Tops the spool back up to the backlog, 64 durable puts at a time.
    pub async fn refill(&mut self) {
        let missing = self.backlog - self.spool.stats().files.min(self.backlog);
        let puts = (0..missing).map(|_| {
            self.refill_seq += 1;
            let name = format!("refill/{}/{:010}", self.token, self.refill_seq);
            let (spool, payload) = (self.spool.clone(), self.payload.clone());
            async move { spool.put(&name, payload).await.unwrap() }
        });
        let mut puts = futures::stream::iter(puts).buffer_unordered(64);
        while puts.next().await.is_some() {}
    }

    /// Time for `workers` drainer workers to move `count` entries (at most the backlog
    /// less [`DRAIN_BATCH`]) into `store`: from starting the drainer to the last of
    /// them removed. The end
    /// is signalled by `store` (no polling on a timer, whose 1 ms granularity would
    /// be a visible share of a batch).
    #[allow(clippy::disallowed_methods)] // benches measure real time
    pub async fn drain(&self, store: &Arc<FlakyStore>, workers: usize, count: u64) -> Duration {
        self.drain_polling(store, workers, count, None).await
    }

    /// [`Backlog::drain`], waiting for the last removals by sleeping `poll` between
    /// looks (`None`: by yielding, which spins: right for wall time, where a timer's
    /// millisecond would show, wrong for CPU time, which the spinning would inflate).
    #[allow(clippy::disallowed_methods)] // benches measure real time
    pub async fn drain_polling(
        &self,
        store: &Arc<FlakyStore>,
        workers: usize,
        count: u64,
        poll: Option<Duration>,
    ) -> Duration {
        let spool = &self.spool;
        let files_at_end = spool.stats().files - count;
        assert!(
            files_at_end >= DRAIN_BATCH,
            "the batch would empty the spool"
        );
        let puts_at_end = store.puts() + count;
        let config = DrainerConfig {
            workers,
            rng_seed: Some(1),
            ..DrainerConfig::default()
        };
        let remote = Remote::new(store.clone());
        let cpu_at_start = process_cpu();
        let started = std::time::Instant::now();
        let drainer = Drainer::start(spool.clone(), remote, config);
        store.wait_for_puts(puts_at_end).await;
        let uploaded = started.elapsed();
        // At most `workers` removals are still in flight: wait for them briefly.
        while spool.stats().files > files_at_end {
            match poll {
                Some(poll) => tokio::time::sleep(poll).await,
                None => tokio::task::yield_now().await,
            }
        }
        let elapsed = started.elapsed();
        if tracing_batches() {
            let cpu = process_cpu().saturating_sub(cpu_at_start);
            eprintln!(
                "drain w={workers} uploaded {:.1} ms removed {:.1} ms cpu {} ms",
                uploaded.as_secs_f64() * 1e3,
                elapsed.as_secs_f64() * 1e3,
                cpu.as_millis()
            );
        }
        drainer.shutdown().await;
        elapsed
    }

    /// Panics unless every drain so far took the plain path: uploaded first time, no
    /// "already exists", no retry, nothing set aside. A bench that measured another
    /// path would report the wrong figure.
    pub fn assert_clean_path(&self) {
        let m = self.spool.metrics();
        assert_eq!(
            m.drained_total(DrainOutcome::AlreadyPresent),
            0,
            "412 path taken"
        );
        assert_eq!(m.drain_retries_total(), 0, "drain retried");
        assert_eq!(m.dead_lettered_total() + m.quarantined_total(), 0);
    }
}

/// Time to write the objects numbered `seqs` (`loop/<token>/<seq>`, each `payload`)
/// through `store` from `tasks` concurrent tasks, each one create-if-absent put at a
/// time: what a drain into `store` costs without its disk work.
#[allow(clippy::disallowed_methods)] // benches measure real time
pub async fn put_loop(
    store: &Arc<FlakyStore>,
    token: &str,
    payload: &Bytes,
    tasks: usize,
    seqs: std::ops::Range<u64>,
) -> Duration {
    let started = std::time::Instant::now();
    let handles: Vec<_> = (0..tasks as u64)
        .map(|t| {
            let store = store.clone();
            let (token, payload) = (token.to_string(), payload.clone());
            let mine = (seqs.start + t..seqs.end).step_by(tasks);
            tokio::spawn(async move {
                let options = || object_store::PutOptions {
                    mode: object_store::PutMode::Create,
                    ..Default::default()
                };
                for seq in mine {
                    let path = object_store::path::Path::from(format!("loop/{token}/{seq:010}"));
                    let payload = object_store::PutPayload::from_bytes(payload.clone());
                    object_store::ObjectStore::put_opts(&*store, &path, payload, options())
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
    started.elapsed()
}

/// Whether `DRAIN_TRACE` is set: batch benches then print, for every timed batch,
/// its wall time and the CPU time the whole process spent in it.
pub fn tracing_batches() -> bool {
    std::env::var_os("DRAIN_TRACE").is_some()
}

/// The median of `values` (the upper of the two middle ones when their number is
/// even): the figure of a bench that measures in rounds, which one slow round
/// cannot move. Panics on an empty slice.
pub fn median(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "the median of no values");
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// CPU time (user and system, all threads) this process has used so far, from
/// `/proc/self/stat`, in 10 ms ticks (`USER_HZ` is 100 on Linux's mainstream
/// architectures); zero where there is no `/proc`. Over a batch of tens of
/// milliseconds one figure is coarse: compare sums over many batches.
pub fn process_cpu() -> Duration {
    std::fs::read_to_string("/proc/self/stat").map_or(Duration::ZERO, |stat| cpu_of_stat(&stat))
}

/// CPU time (user and system, all threads) this process has used so far, to the
/// nanosecond (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`): for figures of a few
/// microseconds per operation, where [`process_cpu`]'s 10 ms ticks are too coarse.
pub fn process_cpu_ns() -> Duration {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .expect("clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(now.tv_sec() as u64, now.tv_nsec() as u32)
}

/// utime plus stime of a `/proc/<pid>/stat` line, at 100 ticks a second.
fn cpu_of_stat(stat: &str) -> Duration {
    // Fields after the command name (in parentheses, and it may hold spaces and
    // parentheses): the state is the 3rd field, utime and stime the 14th and 15th.
    let after_name = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let ticks: u64 = after_name
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// A global allocator that counts live heap bytes, for memory-per-entry figures.
pub struct CountingAlloc;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

impl CountingAlloc {
    /// Heap bytes allocated and not yet freed.
    pub fn live_bytes() -> isize {
        LIVE_BYTES.load(Ordering::SeqCst)
    }
}

// The one unsafe block in the workspace: a GlobalAlloc must be an unsafe impl. It
// delegates every call to the system allocator unchanged.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// One benchmark's result as criterion saved it in this run: the median time per
/// iteration with the 95% confidence interval of that median, and the elements per
/// iteration.
#[derive(Debug, Clone, Copy)]
pub struct Estimate {
    /// Median nanoseconds per iteration.
    pub median_ns: f64,
    /// Lower end of the median's 95% confidence interval.
    pub low_ns: f64,
    /// Upper end.
    pub high_ns: f64,
    /// Elements per iteration (the benchmark's `Throughput::Elements`), 1 if none.
    pub elements: f64,
}

impl Estimate {
    /// Elements per second at the median, with the interval: `(median, low, high)`.
    pub fn rate(&self) -> (f64, f64, f64) {
        let per_s = |ns: f64| self.elements * 1e9 / ns;
        (
            per_s(self.median_ns),
            per_s(self.high_ns),
            per_s(self.low_ns),
        )
    }
}

/// Where criterion writes its results.
fn criterion_home() -> PathBuf {
    match std::env::var_os("CRITERION_HOME") {
        Some(home) => PathBuf::from(home),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion"),
    }
}

/// A benchmark's name as criterion files it: group, function and value.
pub type Id<'a> = [&'a str; 3];

/// The estimate criterion saved for `id`, if it was saved after `since` (so a
/// filtered run never reports a stale figure).
pub fn estimate(id: Id<'_>, since: SystemTime) -> Option<Estimate> {
    let dir = id
        .iter()
        .fold(criterion_home(), |dir, part| {
            dir.join(criterion_dir_name(part))
        })
        .join("new");
    let estimates = dir.join("estimates.json");
    let modified = std::fs::metadata(&estimates).ok()?.modified().ok()?;
    if modified < since {
        return None;
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&estimates).ok()?).ok()?;
    let bench: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("benchmark.json")).ok()?).ok()?;
    let median = &json["median"];
    Some(Estimate {
        median_ns: median["point_estimate"].as_f64()?,
        low_ns: median["confidence_interval"]["lower_bound"].as_f64()?,
        high_ns: median["confidence_interval"]["upper_bound"].as_f64()?,
        elements: bench["throughput"]["Elements"].as_f64().unwrap_or(1.0),
    })
}

/// The directory name criterion makes for one part of an id.
fn criterion_dir_name(part: &str) -> String {
    part.replace(['?', '"', '/', '\\', '*', '<', '>', ':', '|', '^'], "_")
}

/// A table of rates, each beside a baseline measured in the same run, printed after
/// the benches: `label  rate [interval]  baseline [interval]  ratio`.
pub struct Summary {
    title: String,
    unit: String,
    since: SystemTime,
    rows: Vec<(String, [String; 3], Option<[String; 3]>)>,
}

impl Summary {
    /// A table titled `title` of rates in `unit` (such as "entries/s") for
    /// benchmarks saved after `since`.
    pub fn new(title: &str, unit: &str, since: SystemTime) -> Self {
        Self {
            title: title.into(),
            unit: unit.into(),
            since,
            rows: Vec::new(),
        }
    }

    /// A row: the benchmark `id`, and the one it is compared with, if any.
    pub fn row(mut self, label: &str, id: Id<'_>, baseline: Option<Id<'_>>) -> Self {
        let owned = |id: Id<'_>| id.map(str::to_string);
        self.rows
            .push((label.into(), owned(id), baseline.map(owned)));
        self
    }

    /// Prints the rows whose figures were measured in this run (none: prints nothing).
    pub fn print(&self) {
        let fmt = |e: Option<Estimate>| match e {
            Some(e) => {
                let (median, low, high) = e.rate();
                format!("{median:>10.0} [{low:.0}, {high:.0}]")
            }
            None => format!("{:>10}", "-"),
        };
        let mut lines = Vec::new();
        for (label, id, baseline) in &self.rows {
            fn borrow(id: &[String; 3]) -> Id<'_> {
                [&id[0], &id[1], &id[2]]
            }
            let ours = estimate(borrow(id), self.since);
            let base = baseline
                .as_ref()
                .and_then(|b| estimate(borrow(b), self.since));
            if ours.is_none() && base.is_none() {
                continue;
            }
            let ratio = match (ours, base) {
                (Some(a), Some(b)) => format!("{:.2}", a.rate().0 / b.rate().0),
                _ => "-".into(),
            };
            lines.push(format!(
                "  {label:<24} {:<32} {:<32} {ratio}",
                fmt(ours),
                if baseline.is_some() {
                    fmt(base)
                } else {
                    String::new()
                }
            ));
        }
        if lines.is_empty() {
            return;
        }
        println!(
            "\n{} ({}, median [95% CI of the median])",
            self.title, self.unit
        );
        println!("  {:<24} {:<32} {:<32} ratio", "", "measured", "baseline");
        for line in lines {
            println!("{line}");
        }
    }
}

/// The time a bench binary started, for [`Summary`]: call first thing in `main`.
#[allow(clippy::disallowed_methods)] // benches measure real time
pub fn started() -> SystemTime {
    SystemTime::now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_utime_plus_stime_whatever_the_command_name() {
        // proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt
        // cminflt majflt cmajflt utime stime cutime cstime ...
        let stat = "4242 (http) (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 37 5 2 1 20 0 3";
        assert_eq!(cpu_of_stat(stat), Duration::from_millis(420));
        assert_eq!(cpu_of_stat("garbage"), Duration::ZERO);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let spin: u64 = (0..20_000_000u64).fold(0, |a, i| a.wrapping_add(i * i));
        std::hint::black_box(spin);
        if Path::new("/proc/self/stat").exists() {
            assert!(process_cpu() > Duration::ZERO);
        }
    }
}
