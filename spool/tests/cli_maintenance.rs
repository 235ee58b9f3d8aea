//! The commands that change a spool (`requeue`, `drain`) on spools as services leave
//! them: one that holds more than the library's default bounds (a relay run with
//! `--max-bytes 20GiB`), and a relative directory that does not exist yet.

use std::process::Command;

use bytes::Bytes;
use spool::{Spool, SpoolConfig};

fn run_in(cwd: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_spool"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
    (out.status.code().unwrap(), text)
}

#[tokio::test]
async fn requeue_on_a_spool_larger_than_the_default_bounds_is_not_refused_as_full() {
    // What broke: requeue opened the spool with the default bounds (1 GiB), so a
    // service's spool holding more than that refused every entry as "full".
    let dir = tempfile::tempdir().unwrap();
    let service = SpoolConfig {
        max_bytes: 20 << 30,
        ..SpoolConfig::default()
    };
    let spool = Spool::open(dir.path(), service).await.unwrap();
    spool
        .put("refused-once", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let claim = spool.claim_oldest().unwrap();
    spool
        .dead_letter(claim, "HTTP 403 Forbidden")
        .await
        .unwrap();
    drop(spool);
    // A 1.2 GB backlog as open sees it: open indexes entries from their names
    // (sequence, creation time, size, name key) without reading them, so 60 files named as
    // 20 MB entries stand for it without writing one.
    for seq in 1000..1060 {
        let name = spool::layout::entry_file_name(seq, 1_791_453_600_000, 20_000_000, seq);
        std::fs::write(dir.path().join("entries").join(name), b"").unwrap();
    }

    let path = dir.path().to_str().unwrap();
    let (code, out) = run_in(
        dir.path(),
        &["requeue", path, "--from", "dead-letter", "--all"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 requeued, 0 refused"), "{out}");
}

#[test]
fn drain_into_a_relative_directory_that_does_not_exist_yet_creates_it() {
    // What broke: a relative path's last ancestor is the empty path, which the
    // spool tried to create (ENOENT) before it created the directory.
    let cwd = tempfile::tempdir().unwrap();
    let (code, out) = run_in(cwd.path(), &["drain", "new/spool", "--to", "memory://"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("drained 0 of 0 entries"), "{out}");
    assert!(cwd.path().join("new/spool/entries").is_dir());
}
