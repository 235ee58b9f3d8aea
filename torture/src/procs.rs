//! The real processes: starting one with its output appended to a log, reading the
//! address from its `listening` line, and ending it by signal.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long a process may take to say it listens.
const LISTEN_WITHIN: Duration = Duration::from_secs(60);

/// A process started with [`start`].
#[derive(Debug)]
pub struct Proc {
    pub child: Child,
    /// The value of `field=` on its first `listening` line.
    pub listening: String,
}

/// Starts `command` with stdout and stderr appended to `log` (after a line `== label`)
/// and waits until a line containing `listening` shows `field=VALUE`.
pub async fn start(
    mut command: Command,
    log: &Path,
    label: &str,
    field: &str,
) -> anyhow::Result<Proc> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    writeln!(file, "== {label}")?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {label}"))?;
    let (lines, mut listening) = mpsc::unbounded_channel();
    let stdout = child.stdout.take().context("no stdout")?;
    let stderr = child.stderr.take().context("no stderr")?;
    copy_lines(stdout, file.try_clone()?, Some(lines));
    copy_lines(stderr, file, None);
    let prefix = format!(" {field}=");
    let wait = async {
        while let Some(line) = listening.recv().await {
            if line.contains("listening")
                && let Some((_, rest)) = line.split_once(&prefix)
            {
                return Some(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
        None
    };
    match tokio::time::timeout(LISTEN_WITHIN, wait).await {
        Ok(Some(value)) => Ok(Proc {
            child,
            listening: value,
        }),
        Ok(None) => {
            let status = child.wait().await?;
            bail!(
                "{label} exited ({status}) before listening; see {}",
                log.display()
            )
        }
        Err(_) => bail!(
            "{label} did not listen within {LISTEN_WITHIN:?}; see {}",
            log.display()
        ),
    }
}

/// Appends each line of `from` to `to`, and sends it to `lines` if given.
fn copy_lines(
    from: impl AsyncRead + Unpin + Send + 'static,
    mut to: std::fs::File,
    lines: Option<mpsc::UnboundedSender<String>>,
) {
    tokio::spawn(async move {
        let mut reader = BufReader::new(from).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            let _ = writeln!(to, "{line}");
            if let Some(lines) = &lines {
                let _ = lines.send(line);
            }
        }
    });
}

/// Sends `signal` to `child` (if it still runs).
pub fn signal(child: &Child, signal: Signal) -> anyhow::Result<()> {
    let Some(pid) = child.id() else {
        return Ok(());
    };
    let pid = i32::try_from(pid).map_err(|_| anyhow!("pid {pid} out of range"))?;
    match kill(Pid::from_raw(pid), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(anyhow!("cannot send {signal} to {pid}: {e}")),
    }
}

/// SIGKILL, and wait until it is gone.
pub async fn kill_now(child: &mut Child) -> anyhow::Result<ExitStatus> {
    signal(child, Signal::SIGKILL)?;
    Ok(child.wait().await?)
}

/// SIGTERM; its exit status if it exits within `within`, else `None` (then it is
/// killed).
pub async fn terminate(child: &mut Child, within: Duration) -> anyhow::Result<Option<ExitStatus>> {
    signal(child, Signal::SIGTERM)?;
    match tokio::time::timeout(within, child.wait()).await {
        Ok(status) => Ok(Some(status?)),
        Err(_) => {
            kill_now(child).await?;
            Ok(None)
        }
    }
}

/// A free port on loopback: bound, read and released (used at once by the relay,
/// which then keeps it across restarts).
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}

/// The last `lines` lines of `path`, for error messages.
pub fn tail(path: &PathBuf, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
