//! The `spool-relay` process: started on its spool directory (on the crashfs mount)
//! in front of the fake, always on the same two ports, killed, deployed (SIGTERM) and
//! started again; its `spool_files` gauge read from `/metrics`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::args::BUCKET;
use crate::{http, procs};

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
    child: Option<Child>,
    /// Starts so far.
    pub boots: u64,
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
            child: None,
            boots: 0,
        })
    }

    /// Whether it was started and not stopped since.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The base URL clients write to.
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    fn command(&self) -> Command {
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
        command
    }

    /// Starts it (it must not be running); how long it took to listen.
    pub async fn start(&mut self, why: &str) -> anyhow::Result<Duration> {
        let began = Instant::now();
        for _ in 0..BIND_ATTEMPTS {
            let label = format!("spool-relay boot {} ({why})", self.boots + 1);
            match procs::start(self.command(), &self.log, &label, "addr").await {
                Ok(proc) => {
                    if proc.listening != self.listen.to_string() {
                        bail!(
                            "the relay listens on {}, not {}",
                            proc.listening,
                            self.listen
                        );
                    }
                    self.child = Some(proc.child);
                    self.boots += 1;
                    return Ok(began.elapsed());
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
        let mut command = self.command();
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
        if let Some(mut child) = self.child.take() {
            procs::kill_now(&mut child).await?;
        }
        Ok(())
    }

    /// SIGTERM; the exit status if it ended within its grace and a margin, else
    /// `None` (it was killed).
    pub async fn terminate(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        let Some(mut child) = self.child.take() else {
            bail!("the relay is not running");
        };
        procs::terminate(&mut child, self.grace + Duration::from_secs(5)).await
    }

    /// The spool's pending entries (`spool_files`) from its metrics.
    pub async fn spool_files(&self) -> anyhow::Result<u64> {
        let body = http::get_ok(self.metrics, "/metrics").await?;
        let text = String::from_utf8_lossy(&body);
        gauge(&text, "spool_files").context("no spool_files in the relay's metrics")
    }
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
}
