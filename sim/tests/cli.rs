//! The `sim` command as a newcomer meets it in a log or a pipe: stderr is not a
//! terminal, so no colour codes; a progress line still shows; every log line carries
//! the scenario's clock, never the wall clock.

use std::process::Command;

#[test]
fn off_a_terminal_the_log_carries_simulated_time_progress_and_no_colour() {
    let out = tempfile::tempdir().expect("temp dir");
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/demo.toml");
    let run = Command::new(env!("CARGO_BIN_EXE_sim"))
        .arg(scenario)
        .arg("--out")
        .arg(out.path())
        // The fake logs every request at info: plenty of lines from inside hosts.
        .env("RUST_LOG", "info")
        .env_remove("NO_COLOR")
        .output()
        .expect("sim runs");
    assert!(run.status.success(), "sim failed: {run:?}");
    let stderr = String::from_utf8(run.stderr).expect("UTF-8");

    assert!(!stderr.contains('\u{1b}'), "colour codes off a terminal");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("sim: 100% simulated (20s of 20s, at 2026-10-08T10:00:20Z)")),
        "no progress line off a terminal:\n{stderr}"
    );
    let logged: Vec<&str> = stderr.lines().filter(|l| l.contains(" INFO ")).collect();
    assert!(
        logged.iter().any(|l| l.contains("fake_gcs: request")),
        "no request logged from inside the fake's host:\n{stderr}"
    );
    for line in logged {
        // demo.toml starts at 2026-10-08T10:00:00Z and runs 20 s; lines logged outside
        // a run's clock say "-".
        assert!(
            line.starts_with("2026-10-08T10:00:") || line.trim_start().starts_with("- "),
            "a log line without the simulated time: {line}"
        );
    }
}
