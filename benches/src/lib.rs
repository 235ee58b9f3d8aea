//! Shared helpers for the criterion benches in `benches/`: prepared spool directories,
//! a counting allocator, and the size lists (large sizes only with
//! `SPOOL_BENCH_LARGE=1`).
//!
//! Benches measure real time on the real disk; that is their job, so they are the one
//! place outside `spool::clock` allowed to read `std::time::Instant`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicIsize, Ordering};

use spool::entry;
use spool::store::{ENTRIES_DIR, entry_file_name};

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
/// create at 1M entries): `target/bench-spools/`.
pub fn scratch_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-spools");
    std::fs::create_dir_all(&root).unwrap();
    root
}

/// A spool directory holding exactly `n` valid entries with `payload_len`-byte
/// payloads, written directly (no fsync: this is bench setup) and reused across runs.
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
        let data = entry::encode(seq, 1_791_453_600_000 + seq, &name, &payload);
        std::fs::write(entries.join(entry_file_name(seq)), data).unwrap();
    }
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
