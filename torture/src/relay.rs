//! The `spool-relay` process: started on its spool directory (on the crashfs mount)
//! in front of the fake, always on the same two ports, killed, deployed (SIGTERM) and
//! started again; its `spool_files` gauge read from `/metrics`. For `torture
//! deploys` also: started on a listening socket this harness holds (descriptor 3,
//! `LISTEN_FDS=1`, as systemd socket activation starts it), and deployed by SIGHUP,
//! after which the process running is the one the old relay started.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use command_fds::{CommandFdExt as _, FdMapping};
use nix::sys::signal::Signal;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::args::BUCKET;
use crate::procs::Lines;
use crate::{http, procs};

/// How long after a SIGHUP the old relay may take to say it handed its socket on.
const HANDED_WITHIN: Duration = Duration::from_secs(30);

/// How long after the old relay exited the new one may take to listen.
const LISTENING_WITHIN: Duration = Duration::from_secs(60);

/// Tries to bind the relay's fixed ports before giving up (a port still held by a
/// connection of the process just killed is freed within moments).
const BIND_ATTEMPTS: u32 = 100;

/// How to run the relay, and the one running now.
#[derive(Debug)]
pub struct Relay {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub fake: SocketAddr,
    pub listen: SocketAddr,
    pub metrics: SocketAddr,
    pub grace: Duration,
    pub extra: Vec<String>,
    pub log: PathBuf,
    /// The listening socket this harness holds and passes to every start, if any.
    socket: Option<std::net::TcpListener>,
    child: Option<Running>,
    /// Starts so far (hand-overs included).
    pub boots: u64,
}

/// The relay process running now.
#[derive(Debug)]
enum Running {
    /// Started here.
    Child(Child),
    /// Started by a relay started here (a SIGHUP hand-over), and this process's
    /// child since that one exited ([`procs::become_subreaper`]).
    Adopted(u32),
}

impl Running {
    fn pid(&self) -> Option<u32> {
        match self {
            Running::Child(child) => child.id(),
            Running::Adopted(pid) => Some(*pid),
        }
    }

    async fn kill(self) -> anyhow::Result<()> {
        match self {
            Running::Child(mut child) => procs::kill_now(&mut child).await?,
            Running::Adopted(pid) => procs::kill_pid_now(pid).await?,
        };
        Ok(())
    }

    /// SIGTERM, and its exit status within `within` (else it is killed: `None`).
    async fn terminate(self, within: Duration) -> anyhow::Result<Option<ExitStatus>> {
        match self {
            Running::Child(mut child) => procs::terminate(&mut child, within).await,
            Running::Adopted(pid) => procs::terminate_pid(pid, within).await,
        }
    }

    /// Its exit status once it exits by itself within `within` (else it is killed:
    /// `None`).
    async fn exited(self, within: Duration) -> anyhow::Result<Option<ExitStatus>> {
        match self {
            Running::Child(mut child) => match tokio::time::timeout(within, child.wait()).await {
                Ok(status) => Ok(Some(status?)),
                Err(_) => {
                    procs::kill_now(&mut child).await?;
                    Ok(None)
                }
            },
            Running::Adopted(pid) => match procs::wait_pid(pid, within).await? {
                Some(status) => Ok(Some(status)),
                None => {
                    procs::kill_pid_now(pid).await?;
                    Ok(None)
                }
            },
        }
    }
}

impl Drop for Relay {
    /// An adopted relay is not killed on drop as a child is (`kill_on_drop`).
    fn drop(&mut self) {
        if let Some(Running::Adopted(pid)) = self.child {
            let _ = procs::signal_pid(pid, Signal::SIGKILL);
        }
    }
}

/// One SIGHUP deploy, as it went.
#[derive(Debug)]
pub struct HandOver {
    pub old_pid: u32,
    pub new_pid: u32,
    /// From the SIGHUP to the new process's `listening` line.
    pub listening_after: Duration,
    /// The old process's exit status; `None`: it still ran its grace and a margin
    /// after the SIGHUP, and was killed.
    pub old_exit: Option<ExitStatus>,
}

impl Relay {
    /// A relay that is not running yet, on two free ports it keeps.
    pub fn new(
        bin: PathBuf,
        dir: PathBuf,
        fake: SocketAddr,
        grace: Duration,
        extra: Vec<String>,
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            bin,
            dir,
            fake,
            listen: procs::free_port()?,
            metrics: procs::free_port()?,
            grace,
            extra,
            log,
            socket: None,
            child: None,
            boots: 0,
        })
    }

    /// Binds the listening socket here, once, on a free loopback port, and passes
    /// it to every start from now on as descriptor 3 with `LISTEN_FDS=1` (no
    /// `LISTEN_PID`), as a systemd `.socket` unit does: connections that arrive
    /// while no relay runs wait in its backlog.
    pub fn hold_socket(&mut self) -> anyhow::Result<()> {
        let socket = std::net::TcpListener::bind("127.0.0.1:0")?;
        self.listen = socket.local_addr()?;
        self.socket = Some(socket);
        Ok(())
    }

    /// Whether it was started and not stopped since.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Running::pid)
    }

    /// The base URL clients write to.
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    fn command(&self) -> anyhow::Result<Command> {
        let mut command = Command::new(&self.bin);
        command
            .arg("--dir")
            .arg(&self.dir)
            .arg("--upstream")
            .arg(format!("gs://{BUCKET}"))
            .arg("--endpoint")
            .arg(format!("http://{}", self.fake))
            .arg("--listen")
            .arg(self.listen.to_string())
            .arg("--metrics")
            .arg(self.metrics.to_string())
            .arg("--backoff-cap")
            .arg("1s")
            .arg("--shutdown-grace")
            .arg(format!("{}s", self.grace.as_secs()))
            .args(&self.extra)
            .env_remove("STORAGE_EMULATOR_HOST");
        if let Some(socket) = &self.socket {
            pass_socket(&mut command, socket)?;
        }
        Ok(command)
    }

    /// Starts it (it must not be running); how long it took to listen.
    pub async fn start(&mut self, why: &str) -> anyhow::Result<Duration> {
        let (took, _) = self.start_watching(why, false).await?;
        Ok(took)
    }

    /// As [`Relay::start`]; with `watch`, also every line it (and a relay it hands
    /// over to) writes after its `listening` line.
    pub async fn start_watching(
        &mut self,
        why: &str,
        watch: bool,
    ) -> anyhow::Result<(Duration, Lines)> {
        let began = Instant::now();
        for _ in 0..BIND_ATTEMPTS {
            let label = format!("spool-relay boot {} ({why})", self.boots + 1);
            let command = self.command()?;
            match procs::start_watching(command, &self.log, &label, "addr", watch).await {
                Ok((proc, lines)) => {
                    if proc.listening != self.listen.to_string() {
                        bail!(
                            "the relay listens on {}, not {}",
                            proc.listening,
                            self.listen
                        );
                    }
                    self.child = Some(Running::Child(proc.child));
                    self.boots += 1;
                    return Ok((began.elapsed(), lines));
                }
                Err(e) if procs::tail(&self.log, 3).contains("in use") => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => {
                    let tail = procs::tail(&self.log, 30);
                    return Err(e.context(format!("the relay's log ends:\n{tail}")));
                }
            }
        }
        bail!(
            "the relay's ports {} and {} stayed in use",
            self.listen,
            self.metrics
        )
    }

    /// Starts it and SIGKILLs it `after` later, whether it listens by then or not
    /// (a crash during its start); returns once it is gone.
    pub async fn start_and_kill(&mut self, after: Duration, why: &str) -> anyhow::Result<()> {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        writeln!(log, "== spool-relay boot {} ({why})", self.boots + 1)?;
        let mut command = self.command()?;
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        let mut child = command.spawn().context("cannot start spool-relay")?;
        self.boots += 1;
        tokio::time::sleep(after).await;
        procs::kill_now(&mut child).await?;
        Ok(())
    }

    /// SIGKILL; returns once it is gone.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(running) = self.child.take() {
            running.kill().await?;
        }
        Ok(())
    }

    /// SIGTERM; the exit status if it ended within its grace and a margin, else
    /// `None` (it was killed).
    pub async fn terminate(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        let Some(running) = self.child.take() else {
            bail!("the relay is not running");
        };
        running.terminate(self.grace + Duration::from_secs(5)).await
    }

    /// A deploy by SIGHUP: the relay hands its listening socket to a new process
    /// of its own command line, which from then on is the one running. `lines` are
    /// the relay's (from [`Relay::start_watching`]): its `SIGHUP: handed the
    /// listening socket ... pid=N` line names the new process, which must then say
    /// `spool-relay listening ... inherited=true`; the old one must exit within its
    /// grace and a margin (its status is returned, not judged).
    pub async fn hand_over(&mut self, lines: &mut Lines, why: &str) -> anyhow::Result<HandOver> {
        let old = self.child.take().context("the relay is not running")?;
        let old_pid = old.pid().context("the relay has no pid")?;
        if let Ok(mut log) = std::fs::OpenOptions::new().append(true).open(&self.log) {
            let _ = writeln!(log, "== SIGHUP to spool-relay pid {old_pid} ({why})");
        }
        let began = Instant::now();
        procs::signal_pid(old_pid, Signal::SIGHUP)?;
        let handed = procs::next_line(lines, HANDED_WITHIN, "hand-over line", |line| {
            line.contains("handed the listening socket")
                || line.contains("cannot hand the listening socket")
        })
        .await;
        let handed = match handed {
            Ok(line) if line.contains("handed the listening socket") => line,
            other => {
                self.child = Some(old);
                let what = other.unwrap_or_else(|e| format!("{e:#}"));
                bail!("pid {old_pid} did not hand its socket on: {what}");
            }
        };
        let new_pid: u32 = procs::field(&handed, "pid")
            .and_then(|pid| pid.parse().ok())
            .with_context(|| format!("no pid= in {handed:?}"))?;
        self.child = Some(Running::Adopted(new_pid));
        self.boots += 1;
        let old_exit = old.exited(self.grace + Duration::from_secs(5)).await?;
        let listening = procs::next_line(lines, LISTENING_WITHIN, "listening line", |line| {
            line.contains("spool-relay listening") || line.starts_with("spool-relay: ")
        })
        .await
        .with_context(|| format!("the relay pid {new_pid} started by pid {old_pid}"))?;
        if !listening.contains("inherited=true") {
            bail!("the relay pid {new_pid} started by pid {old_pid}: {listening}");
        }
        let addr = format!("addr={}", self.listen);
        if !listening.split_whitespace().any(|word| word == addr) {
            bail!(
                "the relay pid {new_pid} does not listen on {}: {listening}",
                self.listen
            );
        }
        Ok(HandOver {
            old_pid,
            new_pid,
            listening_after: began.elapsed(),
            old_exit,
        })
    }

    /// A SIGHUP whose new relay cannot take over: the relay's binary is replaced
    /// by a script that fails at once (`late: false`) or after saying `prepared` on
    /// the hand-over socket (`late: true`), then put back. At once, the old relay
    /// must say it serves on; late, it must say the new one failed after it
    /// stopped, start its own binary again in its place (the same pid) and listen
    /// on the inherited socket. Returns how long from the SIGHUP until it serves.
    pub async fn failed_hand_over(
        &mut self,
        lines: &mut Lines,
        why: &str,
        late: bool,
    ) -> anyhow::Result<Duration> {
        let pid = self.pid().context("the relay is not running")?;
        let real = self.bin.with_extension("real");
        std::fs::copy(&self.bin, &real)?;
        replace_file(&self.bin, failing_successor(late).as_bytes(), 0o755)?;
        if let Ok(mut log) = std::fs::OpenOptions::new().append(true).open(&self.log) {
            let kind = if late {
                "after it is prepared"
            } else {
                "at once"
            };
            let _ = writeln!(
                log,
                "== SIGHUP to pid {pid}, a new relay that fails {kind} ({why})"
            );
        }
        let began = Instant::now();
        procs::signal_pid(pid, Signal::SIGHUP)?;
        let settled = self.serves_on_after_failure(lines, pid, late).await;
        let put_back =
            std::fs::read(&real).and_then(|binary| replace_file(&self.bin, &binary, 0o755));
        settled?;
        put_back.with_context(|| format!("cannot put {} back", self.bin.display()))?;
        self.boots += u64::from(late);
        Ok(began.elapsed())
    }

    /// What the relay pid `pid` says after a SIGHUP whose new relay fails.
    async fn serves_on_after_failure(
        &self,
        lines: &mut Lines,
        pid: u32,
        late: bool,
    ) -> anyhow::Result<()> {
        if !late {
            let line = procs::next_line(lines, HANDED_WITHIN, "serving-on line", |line| {
                line.contains("cannot hand the listening socket")
                    || line.contains("handed the listening socket")
            })
            .await?;
            if !line.contains("serving on") {
                bail!("pid {pid} after a new relay failed at once: {line}");
            }
            return Ok(());
        }
        let restarting = procs::next_line(lines, LISTENING_WITHIN, "restart line", |line| {
            line.contains("failed after this one stopped")
                || line.contains("cannot hand the listening socket")
        })
        .await?;
        if !restarting.contains("starting this one's binary again") {
            bail!("pid {pid} after a new relay failed late: {restarting}");
        }
        let listening = procs::next_line(lines, LISTENING_WITHIN, "listening line", |line| {
            line.contains("spool-relay listening") || line.starts_with("spool-relay: ")
        })
        .await?;
        if !listening.contains("inherited=true") {
            bail!("pid {pid} started again: {listening}");
        }
        Ok(())
    }

    /// The spool's pending entries (`spool_files`) from its metrics.
    pub async fn spool_files(&self) -> anyhow::Result<u64> {
        let body = http::get_ok(self.metrics, "/metrics").await?;
        let text = String::from_utf8_lossy(&body);
        gauge(&text, "spool_files").context("no spool_files in the relay's metrics")
    }
}

/// Passes `socket` to `command` as systemd socket activation does: descriptor 3,
/// `LISTEN_FDS=1`, and no `LISTEN_PID` (which would name the harness, not the
/// relay; sd_listen_fds(3) ignores the variables when it names another process).
fn pass_socket(command: &mut Command, socket: &std::net::TcpListener) -> anyhow::Result<()> {
    let mapping = FdMapping {
        parent_fd: socket.try_clone()?.into(),
        child_fd: 3,
    };
    command
        .env("LISTEN_FDS", "1")
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDNAMES")
        .as_std_mut()
        .fd_mappings(vec![mapping])
        .map_err(|e| anyhow::anyhow!("cannot pass the listening socket: {e:?}"))?;
    Ok(())
}

/// The value of the unlabelled series `name` in a Prometheus text exposition.
pub fn gauge(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(' ')?;
        rest.split_whitespace()
            .next()?
            .parse::<f64>()
            .ok()
            .map(|v| v as u64)
    })
}

/// A script standing for a new relay's binary that fails: at once, or after it
/// says `prepared` on the hand-over socket (descriptor 4).
fn failing_successor(late: bool) -> &'static str {
    match late {
        false => "#!/bin/sh\necho 'spool-relay: a deploy that fails at once' >&2\nexit 3\n",
        true => {
            "#!/bin/sh\necho prepared >&4\necho 'spool-relay: a deploy that fails late' >&2\nexit 3\n"
        }
    }
}

/// Puts `contents` at `path` by a rename (a running binary cannot be written in
/// place), with permissions `mode`.
fn replace_file(path: &std::path::Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let staged = path.with_extension("staged");
    std::fs::write(&staged, contents)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))?;
    std::fs::rename(&staged, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_is_read_by_its_exact_name() {
        let text = "# TYPE spool_files gauge\nspool_files_total 9\nspool_files 3\nspool_bytes 7\n";
        assert_eq!(gauge(text, "spool_files"), Some(3));
        assert_eq!(gauge(text, "spool_bytes"), Some(7));
        assert_eq!(gauge(text, "spool_dead"), None);
    }

    #[tokio::test]
    async fn the_held_socket_is_descriptor_3_with_listen_fds_and_no_listen_pid() {
        use std::os::fd::AsRawFd as _;
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut command = Command::new("sh");
        command
            .args([
                "-c",
                r#"echo "fds=$LISTEN_FDS pid=${LISTEN_PID-unset}"; readlink /proc/self/fd/3"#,
            ])
            .env("LISTEN_PID", "1");
        pass_socket(&mut command, &socket).unwrap();
        let output = command.output().await.unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        let fd = socket.as_raw_fd();
        let ours = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert_eq!(
            text,
            format!("fds=1 pid=unset\n{}\n", ours.display()),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
