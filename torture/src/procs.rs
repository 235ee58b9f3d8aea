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
pub async fn start(command: Command, log: &Path, label: &str, field: &str) -> anyhow::Result<Proc> {
    let (proc, _rest) = start_watching(command, log, label, field, false).await?;
    Ok(proc)
}

/// Lines a process writes, stdout and stderr, its own and those of the processes it
/// starts with them (a relay's successor after a SIGHUP).
pub type Lines = mpsc::UnboundedReceiver<String>;

/// As [`start`]; with `watch`, the lines after the `listening` one (stdout and
/// stderr) are kept for the caller, else dropped (they are in the log).
pub async fn start_watching(
    mut command: Command,
    log: &Path,
    label: &str,
    field: &str,
    watch: bool,
) -> anyhow::Result<(Proc, Lines)> {
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
    copy_lines(stdout, file.try_clone()?, Some(lines.clone()));
    copy_lines(stderr, file, watch.then_some(lines));
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
        Ok(Some(value)) => {
            if !watch {
                // Later lines are only in the log.
                listening.close();
                while listening.try_recv().is_ok() {}
            }
            let proc = Proc {
                child,
                listening: value,
            };
            Ok((proc, listening))
        }
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

/// The next of `lines` for which `wanted` holds, within `within`.
pub async fn next_line(
    lines: &mut Lines,
    within: Duration,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let found = async {
        while let Some(line) = lines.recv().await {
            if wanted(&line) {
                return Ok(line);
            }
        }
        bail!("the output ended before {what}")
    };
    match tokio::time::timeout(within, found).await {
        Ok(found) => found,
        Err(_) => bail!("no {what} within {within:?}"),
    }
}

/// The value of `name=VALUE` in a log line.
pub fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
}

/// Makes this process the reaper of its descendants' orphans: a relay started by a
/// relay this process started (a SIGHUP hand-over) becomes its child when that one
/// exits, so that its exit status can be read ([`wait_pid`]).
pub fn become_subreaper() -> anyhow::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| anyhow!("cannot become a child subreaper (prctl): {e}"))
}

/// Sends `signal` to process `pid` (if it still runs).
pub fn signal_pid(pid: u32, signal: Signal) -> anyhow::Result<()> {
    let raw = i32::try_from(pid).map_err(|_| anyhow!("pid {pid} out of range"))?;
    match kill(Pid::from_raw(raw), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(anyhow!("cannot send {signal} to {pid}: {e}")),
    }
}

/// Waits until process `pid`, a child of this one (adopted: [`become_subreaper`]),
/// has exited, at most `within`; its exit status, or `None` if it still runs.
pub async fn wait_pid(pid: u32, within: Duration) -> anyhow::Result<Option<ExitStatus>> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use std::os::unix::process::ExitStatusExt as _;
    let raw = i32::try_from(pid).map_err(|_| anyhow!("pid {pid} out of range"))?;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => {
                return Ok(Some(ExitStatus::from_raw((code & 0xff) << 8)));
            }
            Ok(WaitStatus::Signaled(_, signal, core)) => {
                let core = if core { 0x80 } else { 0 };
                return Ok(Some(ExitStatus::from_raw(signal as i32 | core)));
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => bail!("cannot wait for pid {pid} (not a child of this process?): {e}"),
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// SIGTERM to process `pid` (a child, adopted); its exit status if it exits within
/// `within`, else `None` (then it is killed).
pub async fn terminate_pid(pid: u32, within: Duration) -> anyhow::Result<Option<ExitStatus>> {
    signal_pid(pid, Signal::SIGTERM)?;
    if let Some(status) = wait_pid(pid, within).await? {
        return Ok(Some(status));
    }
    kill_pid_now(pid).await?;
    Ok(None)
}

/// SIGKILL to process `pid` (a child, adopted), and wait until it is gone.
pub async fn kill_pid_now(pid: u32) -> anyhow::Result<ExitStatus> {
    signal_pid(pid, Signal::SIGKILL)?;
    wait_pid(pid, Duration::from_secs(60))
        .await?
        .with_context(|| format!("pid {pid} still runs a minute after SIGKILL"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_by_their_exact_name() {
        let line = "2026-12-03T09:53:35Z  INFO spool_relay: SIGHUP: handed the listening \
                    socket to a new spool-relay; finishing the requests in flight and stopping \
                    xpid=1 pid=26764";
        assert_eq!(field(line, "pid"), Some("26764"));
        assert_eq!(field(line, "inherited"), None);
    }

    #[tokio::test]
    async fn an_orphan_is_adopted_and_its_exit_status_read() {
        become_subreaper().unwrap();
        // sh starts a grandchild that outlives it and exits 3.
        let output = Command::new("sh")
            .args(["-c", "(sleep 0.3; exit 3) >/dev/null 2>&1 & echo $!"])
            .output()
            .await
            .unwrap();
        let pid: u32 = String::from_utf8(output.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let status = wait_pid(pid, Duration::from_secs(10)).await.unwrap();
        assert_eq!(status.and_then(|s| s.code()), Some(3));
        // Gone and reaped: no longer a child.
        assert!(wait_pid(pid, Duration::ZERO).await.is_err());
    }
}
