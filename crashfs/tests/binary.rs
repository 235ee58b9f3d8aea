//! The `crashfs` binary: mounts, answers the control protocol on its socket, and
//! unmounts cleanly on SIGTERM.

#![cfg(feature = "fuse")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

fn mounted(mountpoint: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let needle = format!(" {} ", mountpoint.display());
    mounts.lines().any(|l| l.contains(&needle))
}

/// Sends one command and returns the answer line.
fn command(stream: &mut BufReader<UnixStream>, line: &str) -> String {
    writeln!(stream.get_mut(), "{line}").unwrap();
    let mut answer = String::new();
    stream.read_line(&mut answer).unwrap();
    answer.trim_end().to_string()
}

#[test]
fn the_binary_mounts_answers_control_commands_and_unmounts_on_sigterm() {
    if !fuse_available("the_binary_mounts_answers_control_commands") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mnt, backing, socket) = (
        dir.path().join("mnt"),
        dir.path().join("backing"),
        dir.path().join("ctl"),
    );
    std::fs::create_dir(&mnt).unwrap();
    std::fs::create_dir(&backing).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_crashfs"))
        .arg(&mnt)
        .args(["--backing".as_ref(), backing.as_os_str()])
        .args(["--seed", "42", "--control"])
        .arg(&socket)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The banner comes once the socket accepts connections.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut banner = String::new();
    stderr.read_line(&mut banner).unwrap();
    assert!(banner.contains("SEED=42"), "{banner:?}");
    let mnt = mnt.canonicalize().unwrap();
    assert!(mounted(&mnt));

    write_file(&mnt.join("f"), b"unsynced", false).unwrap();
    let mut control = BufReader::new(UnixStream::connect(&socket).unwrap());
    assert_eq!(command(&mut control, "fault create ENOSPC 1"), "ok");
    let refused = write_file(&mnt.join("g"), b"x", false).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(28));
    assert_eq!(command(&mut control, "fault clear"), "ok");
    let answer = command(&mut control, "power-loss 3");
    let loss: serde_json::Value =
        serde_json::from_str(answer.strip_prefix("ok ").unwrap()).unwrap();
    assert_eq!(loss["crash_states"]["power_losses"], 1, "{answer}");
    assert_eq!(
        loss["crash_states"]["unsynced_ops_kept"].as_u64().unwrap()
            + loss["crash_states"]["unsynced_ops_lost"].as_u64().unwrap(),
        1
    );
    let answer = command(&mut control, "stats");
    let stats: serde_json::Value =
        serde_json::from_str(answer.strip_prefix("ok ").unwrap()).unwrap();
    assert_eq!(stats["faults_injected"]["create"]["ENOSPC"], 1, "{answer}");
    assert_eq!(stats["crash_states"]["power_losses"], 1);
    assert!(command(&mut control, "fault write EAGAIN 1").starts_with("error "));
    assert!(command(&mut control, "lose power").starts_with("error "));
    drop(control);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(!mounted(&mnt), "still mounted after SIGTERM");
    assert!(!socket.exists(), "the socket outlived the process");
}
