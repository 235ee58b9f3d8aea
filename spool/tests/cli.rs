//! The operator CLI on a real spool directory.

use std::process::Command;

use bytes::Bytes;
use spool::{Spool, SpoolConfig};

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_spool"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
    (out.status.code().unwrap(), text)
}

#[tokio::test]
async fn stat_ls_and_verify_describe_a_live_spool() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    spool
        .put("logs/a.json", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    spool
        .put("logs/b.json", Bytes::from_static(b"{\"b\":1}"))
        .await
        .unwrap();
    let claim = spool.claim_oldest().unwrap();
    spool
        .dead_letter(claim, "HTTP 403 Forbidden")
        .await
        .unwrap();

    // The spool is open (its lock held) while the CLI runs.
    let (code, out) = run(&["stat", path]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("entries      1 files"), "{out}");
    assert!(out.contains("dead-letter  1 files"), "{out}");

    let (code, out) = run(&["ls", path]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("logs/b.json") && !out.contains("logs/a.json"),
        "{out}"
    );

    let (code, out) = run(&["verify", path]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("DEAD-LETTER") && out.contains("HTTP 403 Forbidden"),
        "{out}"
    );
}

#[tokio::test]
async fn verify_exits_1_and_names_a_corrupt_entry() {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    let receipt = spool
        .put("x", Bytes::from_static(b"payload"))
        .await
        .unwrap();
    drop(spool);
    let file = dir
        .path()
        .join("entries")
        .join(spool::layout::entry_file_name(
            receipt.seq,
            receipt.created_unix_ms,
            receipt.file_bytes,
        ));
    let mut bytes = std::fs::read(&file).unwrap();
    *bytes.last_mut().unwrap() ^= 0x40;
    std::fs::write(&file, bytes).unwrap();

    let (code, out) = run(&["verify", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("CORRUPT") && out.contains("payload checksum"),
        "{out}"
    );
}

#[test]
fn a_missing_directory_is_an_error_that_names_it() {
    let (code, out) = run(&["stat", "/nonexistent/spool"]);
    assert_eq!(code, 2);
    assert!(out.contains("/nonexistent/spool"), "{out}");
}
