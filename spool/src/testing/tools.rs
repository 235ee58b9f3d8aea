//! Prometheus's own tools for tests that run them (`promtool`, `prometheus`):
//! finding them on `PATH`, and running one in a directory. Debian's `prometheus`
//! package installs both. Without them a test prints a notice and passes, unless
//! `SPOOL_REQUIRE_PROMTOOL=1` (CI sets it): then a missing tool fails the test.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that makes a missing tool a failure.
pub const REQUIRE: &str = "SPOOL_REQUIRE_PROMTOOL";

/// `name`'s path on `PATH`; `None` (after a notice on stderr) to skip the test.
///
/// # Panics
///
/// When `name` is missing and [`REQUIRE`] is `1`.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        let required = std::env::var(REQUIRE).is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{name} is not on PATH and {REQUIRE}=1: install Debian's prometheus package \
             (apt-get install -y --no-install-recommends prometheus)"
        );
        // Straight to stderr, past the test harness's capture, so the skip shows.
        let _ = writeln!(
            std::io::stderr(),
            "NOTICE: skipped: {name} is not on PATH (install Debian's prometheus package, \
             or set {REQUIRE}=1 to make this a failure)"
        );
    }
    found
}

/// Runs `bin` with `args` in `dir`: its stdout and stderr together, as `Ok` when it
/// exited successfully and `Err` otherwise.
///
/// # Panics
///
/// When `bin` cannot be started.
pub fn run(bin: &Path, dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// `promtool check metrics` (lint included) on a scrape: what it said, as `Ok` when
/// the scrape passed with nothing to say and `Err` otherwise.
///
/// # Panics
///
/// When `promtool` cannot be started or fed.
pub fn check_metrics(promtool: &Path, scrape: &str) -> Result<(), String> {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", promtool.display()));
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin
        .write_all(scrape.as_bytes())
        .expect("promtool reads its input");
    drop(stdin);
    let out = child.wait_with_output().expect("promtool runs");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said.trim().is_empty() {
        Ok(())
    } else {
        Err(said)
    }
}
