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
            spool::name::key("x"),
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

fn json(args: &[&str]) -> serde_json::Value {
    let (code, out) = run(args);
    assert_eq!(code, 0, "{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// A spool with three entries (one dead-lettered), closed so that commands can
/// take its lock.
async fn spool_with_a_dead_letter(dir: &std::path::Path) {
    let spool = Spool::open(dir, SpoolConfig::default()).await.unwrap();
    for (name, bytes) in [("poison", "refused"), ("a/ü 1%.json", "{}"), ("b", "bee")] {
        spool.put(name, Bytes::from(bytes)).await.unwrap();
    }
    let claim = spool.claim_oldest().unwrap();
    spool
        .dead_letter(claim, "HTTP 403 Forbidden")
        .await
        .unwrap();
}

#[tokio::test]
async fn stat_ls_and_verify_print_json_for_machines() {
    let dir = tempfile::tempdir().unwrap();
    spool_with_a_dead_letter(dir.path()).await;
    let path = dir.path().to_str().unwrap();
    let stat = json(&["stat", path, "--json"]);
    assert_eq!(
        (stat["entries"].as_u64(), stat["dead_letters"].as_u64()),
        (Some(2), Some(1))
    );
    let ls = json(&["ls", path, "--json", "--limit", "1"]);
    assert_eq!(ls["total"], 2);
    assert_eq!(ls["entries"][0]["name"], "a/ü 1%.json");
    assert_eq!(ls["entries"].as_array().unwrap().len(), 1);
    let verify = json(&["verify", path, "--json"]);
    assert_eq!(verify["verified"], 2);
    assert_eq!(verify["dead_letters"][0]["note"], "HTTP 403 Forbidden");
}

#[tokio::test]
// A real child process: its deadline can only be on the real clock.
#[allow(clippy::disallowed_methods)]
async fn ls_with_a_limit_reads_only_the_headers_it_shows() {
    let dir = tempfile::tempdir().unwrap();
    spool_with_a_dead_letter(dir.path()).await;
    // A FIFO named as the newest entry: reading it would block for ever.
    let fifo = dir
        .path()
        .join("entries")
        .join(spool::layout::entry_file_name(99, 0, 100, 0));
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_spool"))
        .args(["ls", dir.path().to_str().unwrap(), "--limit", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("ls --limit 1 read past the entries it shows");
        }
        std::thread::yield_now();
    };
    assert!(status.success());
}

#[tokio::test]
async fn cat_writes_the_verified_payload() {
    let dir = tempfile::tempdir().unwrap();
    spool_with_a_dead_letter(dir.path()).await;
    let path = dir.path().to_str().unwrap();
    assert_eq!(run(&["cat", path, "2"]), (0, "{}".to_string()));
    assert_eq!(
        run(&["cat", path, "1", "--from", "dead-letter"]),
        (0, "refused".to_string())
    );
    let (code, out) = run(&["cat", path, "7"]);
    assert_eq!(code, 1);
    assert!(out.contains("no entry 7"), "{out}");
}

#[tokio::test]
async fn cat_header_says_what_a_dead_letter_was_and_why_it_was_set_aside() {
    // What the runbook promises for a dead letter: its object's name, attributes
    // and the store's refusal, beside the payload `cat` prints.
    let dir = tempfile::tempdir().unwrap();
    spool_with_a_dead_letter(dir.path()).await;
    let path = dir.path().to_str().unwrap();
    let dead = json(&["cat", path, "1", "--from", "dead-letter", "--header"]);
    assert_eq!(dead["name"], "poison");
    assert_eq!(dead["mode"], "create_if_absent");
    assert_eq!(dead["payload_bytes"], 7);
    assert_eq!(dead["payload_crc32c"], crc32c::crc32c(b"refused"));
    assert_eq!(dead["note"], "HTTP 403 Forbidden");
    let pending = json(&["cat", path, "2", "--header"]);
    assert_eq!(pending["name"], "a/ü 1%.json");
    assert!(pending.get("note").is_none(), "{pending}");
}

#[tokio::test]
async fn requeue_puts_a_dead_letter_back_in_order_and_refuses_a_locked_spool() {
    let dir = tempfile::tempdir().unwrap();
    spool_with_a_dead_letter(dir.path()).await;
    let path = dir.path().to_str().unwrap();
    let done = json(&["requeue", path, "--from", "dead-letter", "--all", "--json"]);
    assert_eq!(done["requeued"][0]["seq"], 1);
    let stat = json(&["stat", path, "--json"]);
    assert_eq!(
        (stat["entries"].as_u64(), stat["dead_letters"].as_u64()),
        (Some(3), Some(0))
    );
    // Oldest first again: the requeued entry drains first.
    let ls = json(&["ls", path, "--json", "--limit", "1"]);
    assert_eq!(ls["entries"][0]["name"], "poison");

    let held = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    let (code, out) = run(&["requeue", path, "--from", "quarantine", "--all"]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("in use") && out.contains("running service"),
        "{out}"
    );
    drop(held);
}

#[tokio::test]
async fn drain_empties_a_spool_into_a_store_under_the_exact_names() {
    let dir = tempfile::tempdir().unwrap();
    spool_with_a_dead_letter(dir.path()).await;
    let store = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let url = format!("file://{}", store.path().display());
    let (code, out) = run(&["drain", path, "--to", &url]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("drained 2 of 2"), "{out}");
    assert_eq!(
        std::fs::read(store.path().join("a/ü 1%.json")).unwrap(),
        b"{}"
    );
    assert_eq!(std::fs::read(store.path().join("b")).unwrap(), b"bee");
    let stat = json(&["stat", path, "--json"]);
    assert_eq!(
        (stat["entries"].as_u64(), stat["dead_letters"].as_u64()),
        (Some(0), Some(1))
    );

    let held = Spool::open(dir.path(), SpoolConfig::default())
        .await
        .unwrap();
    let (code, out) = run(&["drain", path, "--to", &url]);
    assert_eq!(code, 3, "{out}");
    drop(held);
    let (code, out) = run(&["drain", path, "--to", "s3://bucket"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("\"s3\""), "{out}");
}

#[test]
fn rules_prints_the_shipped_alert_rules() {
    let (code, out) = run(&["rules"]);
    assert_eq!(code, 0);
    assert_eq!(out, include_str!("../alerts/spool.rules.yml"));
}

#[test]
fn rules_link_an_absolute_runbook_url_when_given_one() {
    // An alert notification (Alertmanager, PagerDuty) carries the runbook_url to
    // someone with no checkout: the shipped relative path leads nowhere there.
    let base = "https://git.example.com/ops/spool/blob/main/docs/runbook.md";
    let (code, out) = run(&["rules", "--runbook-url", base]);
    assert_eq!(code, 0, "{out}");
    let links: Vec<&str> = (out.lines())
        .filter_map(|l| l.trim().strip_prefix("runbook_url: "))
        .collect();
    assert_eq!(links.len(), spool::alerts::RULES.len(), "{out}");
    for link in links {
        assert!(
            link.trim_matches('"').starts_with(&format!("{base}#")),
            "{link}"
        );
    }
    for bad in ["docs/runbook.md", "ftp://x/r", "https://", "https://h/r#x"] {
        let (code, out) = run(&["rules", "--runbook-url", bad]);
        assert_eq!(code, 2, "{bad}: {out}");
        assert!(out.contains("--runbook-url"), "{out}");
    }
}
