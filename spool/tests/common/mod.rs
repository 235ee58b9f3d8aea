//! Finding Prometheus's own tools for the tests that run them. Debian's `prometheus`
//! package installs both `promtool` and the `prometheus` server (`.ci/run` installs
//! it). Without them a test prints a notice and passes, unless
//! `SPOOL_REQUIRE_PROMTOOL=1`, which CI sets: then a missing tool fails the test.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The environment variable that makes a missing tool a failure.
pub const REQUIRE: &str = "SPOOL_REQUIRE_PROMTOOL";

/// `name`'s path on `PATH`; `None` (after a notice) to skip the test.
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

/// The repository's `spool/` directory.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
