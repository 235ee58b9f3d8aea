//! Tests of `SimDisk` itself: crash points at the spool's calls.

use std::path::Path;

use spool::disk::{Contents, Disk};

use super::*;

fn file(text: &'static str) -> Contents {
    Contents::from(Bytes::from_static(text.as_bytes()))
}

/// Runs `f` on a runtime of its own (outside turmoil: no faults apply), whose time
/// moves only when every task waits: `None` if `f` never finishes (a frozen host).
fn run<T>(f: impl std::future::Future<Output = T>) -> Option<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(3600), f).await })
        .ok()
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    run(f).expect("finishes")
}

#[test]
fn power_goes_right_after_the_nth_rename_before_the_sync_that_follows() {
    let disk = SimDisk::new(DiskConfig::default(), 1);
    let dir = Path::new("/d");
    block_on(disk.create_dir_all(dir)).unwrap();
    disk.crash_at(&[CrashPoint::AfterNth(OpKind::Rename, 2)]);
    for n in 1..=2 {
        let (tmp, path) = (dir.join(format!("{n}.tmp")), dir.join(format!("{n}")));
        block_on(disk.write_and_rename(&tmp, &path, file("data"))).unwrap();
    }
    assert_eq!(
        disk.tripped(),
        Some(CrashPoint::AfterNth(OpKind::Rename, 2))
    );
    let ops = disk.ops();
    assert!(
        run(disk.sync_dir(dir)).is_none(),
        "the sync after the crash point never happens"
    );
    assert_eq!(disk.ops(), ops);
    assert_eq!(disk.files(dir), ["1", "2"], "both renames are live");
    disk.power_loss();
    assert_eq!(disk.tripped(), None);
    let states = disk.crash_states();
    assert_eq!(states.power_losses, 1);
    assert_eq!(
        states.unsynced_ops_kept + states.unsynced_ops_lost,
        4,
        "two creates and two renames were pending: {states:?}"
    );
    block_on(disk.sync_dir(dir)).unwrap();
}

#[test]
fn power_goes_right_after_a_mkdir_before_its_parent_is_synced() {
    let disk = SimDisk::new(DiskConfig::default(), 1);
    disk.crash_at(&[CrashPoint::AfterNth(OpKind::Mkdir, 2)]);
    let made = run(disk.create_dir_all(Path::new("/a/b/c")));
    assert!(made.is_none(), "frozen after the second mkdir");
    assert_eq!(disk.tripped(), Some(CrashPoint::AfterNth(OpKind::Mkdir, 2)));
    disk.power_loss();
    let states = disk.crash_states();
    assert_eq!(
        states.unsynced_ops_kept + states.unsynced_ops_lost,
        1,
        "only /a/b's entry in /a was pending: {states:?}"
    );
    assert_eq!(states.directories_lost, states.unsynced_ops_lost);
}

/// The checker's view of a directory: every file, sorted, with the bytes it holds
/// now (two pieces joined), a directory left out, a bad sector an error of that
/// file alone; nothing for a directory that does not exist.
#[test]
fn visit_files_with_contents_gives_each_file_its_bytes_or_its_error() {
    let disk = SimDisk::new(DiskConfig::default(), 1);
    let dir = Path::new("/d");
    block_on(disk.create_dir_all(&dir.join("sub"))).unwrap();
    let pieces = Contents::new(Bytes::from_static(b"he"), Bytes::from_static(b"ad"));
    block_on(disk.create_synced(&dir.join("b"), pieces)).unwrap();
    block_on(disk.create_synced(&dir.join("a"), file("one"))).unwrap();
    block_on(disk.create_synced(&dir.join("c"), file("bad"))).unwrap();
    {
        let mut s = disk.lock_state();
        let ino = s.fs.lookup(&dir.join("c")).unwrap();
        s.fs.make_unreadable(ino);
    }
    let mut files = Vec::new();
    disk.visit_files_with_contents(dir, |name, read| files.push((name.to_owned(), read)));
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(files[0].1.as_ref().unwrap().to_bytes(), b"one".as_slice());
    assert_eq!(files[1].1.as_ref().unwrap().to_bytes(), b"head".as_slice());
    assert!(files[2].1.is_err(), "the bad sector's file fails alone");
    let mut visited = 0;
    disk.visit_files_with_contents(Path::new("/none"), |_, _| visited += 1);
    assert_eq!(visited, 0);
}

/// Disk operations with no simulated time passing (outside turmoil the instant is
/// always none) are a livelock: not at `LIVELOCK_OPS` less a read's interval, and
/// within a read's interval past it, though the clock is read only now and then.
#[test]
fn operations_without_time_passing_are_a_livelock() {
    let disk = SimDisk::new(DiskConfig::default(), 1);
    let root = Path::new("/");
    block_on(async {
        for _ in 0..LIVELOCK_OPS - LIVELOCK_READ_EVERY {
            disk.sync_dir(root).await.unwrap();
        }
    });
    let more = std::panic::catch_unwind(|| {
        block_on(async {
            for _ in 0..2 * LIVELOCK_READ_EVERY {
                disk.sync_dir(root).await.unwrap();
            }
        })
    });
    let message = more.expect_err("a livelock").downcast::<String>().unwrap();
    assert!(message.starts_with("livelock: "), "{message}");
}
