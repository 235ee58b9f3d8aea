//! `crashfs MOUNT --backing DIR --seed N [--control PATH]`: mounts crashfs at MOUNT
//! over DIR, serves the control protocol (`crashfs::control`) on the Unix socket
//! PATH, and unmounts on SIGTERM or SIGINT.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};

/// A crash file system: a FUSE passthrough to DIR that loses unsynced data and
/// namespace operations on command.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Where to mount.
    mountpoint: PathBuf,
    /// The directory whose contents it serves (they count as durable at the start).
    #[arg(long)]
    backing: PathBuf,
    /// Decides every power loss given no seed of its own, and every fault.
    #[arg(long)]
    seed: u64,
    /// A Unix socket to serve the control protocol on (one command a line:
    /// `power-loss [SEED]`, `fault KIND ERRNO PROBABILITY`, `fault clear`, `stats`).
    #[arg(long)]
    control: Option<PathBuf>,
    /// Granularity of what unsynced data survives, in bytes.
    #[arg(long, default_value_t = crashfs::DEFAULT_BLOCK_BYTES)]
    block_bytes: u64,
    /// Let other users use the mount.
    #[arg(long)]
    allow_other: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let options = crashfs::MountOptions {
        seed: args.seed,
        block_bytes: args.block_bytes,
        allow_other: args.allow_other,
    };
    let mount = crashfs::mount_with(&args.mountpoint, &args.backing, &options)
        .with_context(|| format!("mounting crashfs at {}", args.mountpoint.display()))?;
    let banner = format!(
        "crashfs: SEED={} block_bytes={} mounted at {} over {}{}",
        args.seed,
        args.block_bytes,
        mount.mountpoint().display(),
        mount.backing().display(),
        args.control
            .as_ref()
            .map(|c| format!(", control socket {}", c.display()))
            .unwrap_or_default()
    );
    let mount = Arc::new(mount);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(serve(mount.clone(), args.control.as_deref(), &banner));
    drop(runtime); // ends the control connections and their hold on the mount
    if let Some(control) = &args.control {
        let _ = std::fs::remove_file(control);
    }
    let unmounted = match Arc::try_unwrap(mount) {
        Ok(mount) => mount.unmount().context("unmounting"),
        Err(_) => bail!("the mount is still in use by a control connection"),
    };
    served.and(unmounted)
}

/// Serves control connections until SIGTERM or SIGINT, or until the file system is
/// unmounted from outside. Prints `banner` once the socket accepts connections.
async fn serve(
    mount: Arc<crashfs::Mount>,
    control: Option<&Path>,
    banner: &str,
) -> anyhow::Result<()> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let listener = match control {
        Some(path) => {
            if path.exists() {
                std::fs::remove_file(path)
                    .with_context(|| format!("removing stale {}", path.display()))?;
            }
            Some(UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?)
        }
        None => None,
    };
    eprintln!("{banner}");
    // Only to notice an unmount from outside (fusermount3 -u); nothing waits on it.
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
            _ = check.tick() => if !mount.is_mounted() {
                bail!("the file system was unmounted from outside");
            },
            stream = accept(listener.as_ref()) => {
                tokio::spawn(client(mount.clone(), stream?));
            }
        }
    }
}

async fn accept(listener: Option<&UnixListener>) -> std::io::Result<UnixStream> {
    match listener {
        Some(listener) => listener.accept().await.map(|(stream, _)| stream),
        None => std::future::pending().await,
    }
}

/// Answers one connection's commands in order, each after it took effect.
async fn client(mount: Arc<crashfs::Mount>, stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mount = mount.clone();
        let answer = tokio::task::spawn_blocking(move || crashfs::control::execute(&mount, &line))
            .await
            .unwrap_or_else(|e| format!("error {e}"));
        if write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}
