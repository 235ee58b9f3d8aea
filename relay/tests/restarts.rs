//! Restarts and deploys of the `spool-relay` binary that refuse no connection
//! (issue 40): the listening socket outlives the process, so connections that
//! arrive while no process accepts wait in the kernel's backlog.
//!
//! - Killed with SIGKILL over and over while a client writes, under a supervisor
//!   that holds the socket and starts the relay again on it (`LISTEN_FDS`, as
//!   systemd socket activation does).
//! - Deployed with SIGHUP over and over: each relay hands its socket to a new
//!   process, finishes its requests and exits.
//!
//! A client writes all the while with a fresh connection per upload (so a refused
//! connection would show), retrying an upload that got no answer (create-if-absent
//! settles whether it landed). No connection may be refused, and every upload
//! acknowledged must be in the bucket with its bytes.

mod common;

use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use command_fds::{CommandFdExt, FdMapping};
use common::{BUCKET, PATIENCE, encode, line_with, log_lines, real_fake, stored};

/// What the writer saw.
#[derive(Debug, Default)]
struct Tally {
    acknowledged: AtomicU64,
    refused: AtomicU64,
    retried: AtomicU64,
}

/// Uploads `w/N` one after another, each on a new connection, until `stop`; an
/// upload without an answer is sent again. Returns the names acknowledged.
async fn write_until(base: String, stop: Arc<AtomicBool>, tally: Arc<Tally>) -> Vec<String> {
    // reqwest is built without a bundled TLS provider (twice is harmless).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut acknowledged = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let name = format!("w/{n}");
        let url = format!(
            "{base}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&ifGenerationMatch=0&name={}",
            encode(&name)
        );
        let sent = http.post(&url).body(format!("payload {n}")).send().await;
        match sent {
            Ok(answer) if answer.status() == 200 => {
                tally.acknowledged.fetch_add(1, Ordering::SeqCst);
                acknowledged.push(name);
                n += 1;
            }
            Ok(answer) if answer.status() == 503 => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(answer) => panic!("{name}: {}", answer.status()),
            Err(e) if is_refused(&e) => {
                tally.refused.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(_) => {
                // No answer (the process died mid-request): the same name again.
                tally.retried.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    acknowledged
}

fn is_refused(e: &reqwest::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = err.source();
    }
    false
}

fn relay_command(dir: &std::path::Path, fake_base: &str) -> Command {
    relay_command_of(env!("CARGO_BIN_EXE_spool-relay").as_ref(), dir, fake_base)
}

/// [`relay_command`], of the binary at `program`.
fn relay_command_of(program: &std::path::Path, dir: &std::path::Path, fake_base: &str) -> Command {
    let mut command = Command::new(program);
    command
        .arg("--dir")
        .arg(dir)
        .args([
            "--upstream",
            &format!("gs://{BUCKET}"),
            "--endpoint",
            fake_base,
        ])
        .args(["--shutdown-grace", "10s"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// Waits until `tally` counts `more` acknowledgements than it did.
async fn more_acknowledged(tally: &Tally, more: u64) {
    let start = tally.acknowledged.load(Ordering::SeqCst);
    let grown = async {
        while tally.acknowledged.load(Ordering::SeqCst) < start + more {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(PATIENCE, grown)
        .await
        .expect("uploads go on");
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

/// Waits until process `pid` has exited.
async fn wait_gone(pid: u32) {
    let gone = async {
        loop {
            let mut alive = Command::new("kill");
            alive.args(["-0", &pid.to_string()]).stderr(Stdio::null());
            if !alive.status().unwrap().success() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(PATIENCE, gone)
        .await
        .expect("the relay exits");
}

/// Processes to kill when the test ends, whatever happened.
struct Reap(Vec<u32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in &self.0 {
            let mut kill = Command::new("kill");
            kill.args(["-KILL", &pid.to_string()]).stderr(Stdio::null());
            let _already_gone_is_fine = kill.status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_again_and_again_under_a_supervisor_holding_the_socket_no_connection_is_refused() {
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    // The supervisor's socket, bound once.
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", socket.local_addr().unwrap());
    let start = || {
        let fd: OwnedFd = socket.as_fd().try_clone_to_owned().unwrap();
        let mut command = relay_command(dir.path(), &fake_base);
        command.env("LISTEN_FDS", "1").env_remove("LISTEN_PID");
        let mapping = FdMapping {
            parent_fd: fd,
            child_fd: 3,
        };
        command.fd_mappings(vec![mapping]).unwrap();
        command.spawn().unwrap()
    };
    let mut relay = start();
    let mut reap = Reap(vec![relay.id()]);
    let mut lines = log_lines(&mut relay);
    assert!(
        line_with(&mut lines, "spool-relay listening")
            .await
            .contains("inherited=true")
    );
    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let writer = tokio::spawn(write_until(base, stop.clone(), tally.clone()));
    for _ in 0..5 {
        more_acknowledged(&tally, 20).await;
        relay.kill().unwrap();
        relay.wait().unwrap();
        relay = start();
        reap.0.push(relay.id());
        lines = log_lines(&mut relay);
        line_with(&mut lines, "spool-relay listening").await;
    }
    more_acknowledged(&tally, 20).await;
    stop.store(true, Ordering::SeqCst);
    let acknowledged = writer.await.unwrap();
    signal(relay.id(), "TERM");
    assert!(relay.wait().unwrap().success());
    assert_eq!(tally.refused.load(Ordering::SeqCst), 0, "{tally:?}");
    for (n, name) in acknowledged.iter().enumerate() {
        let want = format!("payload {}", name.trim_start_matches("w/"));
        let got = stored(&fake, name);
        assert_eq!(got.as_deref(), Some(want.as_bytes()), "{n}: {name}");
    }
    assert!(acknowledged.len() >= 120, "{tally:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployed_again_and_again_with_sighup_no_connection_is_refused() {
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let mut command = relay_command(dir.path(), &fake_base);
    command.args(["--listen", "127.0.0.1:0"]);
    let mut first = command.spawn().unwrap();
    let mut reap = Reap(vec![first.id()]);
    let mut lines = log_lines(&mut first);
    let listening = line_with(&mut lines, "spool-relay listening").await;
    let addr = listening
        .split_whitespace()
        .find_map(|field| field.strip_prefix("addr="))
        .unwrap()
        .to_string();
    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let writer = tokio::spawn(write_until(
        format!("http://{addr}"),
        stop.clone(),
        tally.clone(),
    ));
    let mut pid = first.id();
    for _ in 0..5 {
        more_acknowledged(&tally, 20).await;
        signal(pid, "HUP");
        let handed = line_with(&mut lines, "handed the listening socket").await;
        pid = handed
            .split_whitespace()
            .find_map(|field| field.strip_prefix("pid="))
            .unwrap()
            .parse()
            .unwrap();
        reap.0.push(pid);
        let next = line_with(&mut lines, "spool-relay listening").await;
        assert!(next.contains("inherited=true"), "{next}");
    }
    more_acknowledged(&tally, 20).await;
    stop.store(true, Ordering::SeqCst);
    let acknowledged = writer.await.unwrap();
    signal(pid, "TERM");
    wait_gone(pid).await;
    assert!(
        first.wait().unwrap().success(),
        "the first relay exits 0 after its hand-over"
    );
    assert_eq!(tally.refused.load(Ordering::SeqCst), 0, "{tally:?}");
    for name in &acknowledged {
        let want = format!("payload {}", name.trim_start_matches("w/"));
        assert_eq!(
            stored(&fake, name).as_deref(),
            Some(want.as_bytes()),
            "{name}"
        );
    }
    assert!(acknowledged.len() >= 120, "{tally:?}");
}

/// A successor that cannot take over: a script put where the relay's binary was,
/// which fails at once (`early`) or says `prepared` on the hand-over socket first
/// (descriptor 4) and then fails.
fn failing_successor(path: &std::path::Path, late: bool) {
    use std::os::unix::fs::PermissionsExt as _;
    let script = match late {
        false => "#!/bin/sh\necho 'spool-relay: broken deploy' >&2\nexit 3\n",
        true => "#!/bin/sh\necho prepared >&4\necho 'spool-relay: broken late' >&2\nexit 3\n",
    };
    let _ = std::fs::remove_file(path);
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_whose_new_relay_fails_leaves_the_port_served() {
    // Found by review (52/8): after SIGHUP the old process exited even when the new
    // one failed to start, and the port went dark.
    let (fake, fake_base) = real_fake().await;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("spool-relay");
    std::fs::copy(env!("CARGO_BIN_EXE_spool-relay"), &bin).unwrap();
    let spool = dir.path().join("spool");
    let mut command = relay_command_of(&bin, &spool, &fake_base);
    command.args(["--listen", "127.0.0.1:0"]);
    let mut relay = command.spawn().unwrap();
    let pid = relay.id();
    let _reap = Reap(vec![pid]);
    let mut lines = log_lines(&mut relay);
    let listening = line_with(&mut lines, "spool-relay listening").await;
    let addr = listening
        .split_whitespace()
        .find_map(|field| field.strip_prefix("addr="))
        .unwrap()
        .to_string();
    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let writer = tokio::spawn(write_until(
        format!("http://{addr}"),
        stop.clone(),
        tally.clone(),
    ));
    more_acknowledged(&tally, 20).await;
    // A new binary that fails at once: the old relay serves on.
    failing_successor(&bin, false);
    signal(pid, "HUP");
    let failed = line_with(&mut lines, "cannot hand the listening socket").await;
    assert!(failed.contains("exit status: 3"), "{failed}");
    more_acknowledged(&tally, 20).await;
    // One that fails after it said it is prepared (the old relay has stopped):
    // the old relay starts its own binary again, on the same socket, same pid.
    failing_successor(&bin, true);
    signal(pid, "HUP");
    line_with(&mut lines, "handed the listening socket").await;
    let restarted = line_with(&mut lines, "failed after this one stopped").await;
    assert!(
        restarted.contains("starting this one's binary again"),
        "{restarted}"
    );
    let again = line_with(&mut lines, "spool-relay listening").await;
    assert!(again.contains("inherited=true"), "{again}");
    more_acknowledged(&tally, 20).await;
    stop.store(true, Ordering::SeqCst);
    let acknowledged = writer.await.unwrap();
    signal(pid, "TERM");
    assert!(relay.wait().unwrap().success());
    assert_eq!(tally.refused.load(Ordering::SeqCst), 0, "{tally:?}");
    for name in &acknowledged {
        let want = format!("payload {}", name.trim_start_matches("w/"));
        assert_eq!(
            stored(&fake, name).as_deref(),
            Some(want.as_bytes()),
            "{name}"
        );
    }
}
