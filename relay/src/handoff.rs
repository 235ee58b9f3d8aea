//! The listening socket of the `spool-relay` command (feature `cli`), and how it
//! outlives a process, so that a restart or a deploy refuses no connection:
//! connections that arrive while no process accepts wait in the kernel's listen
//! backlog and are served by the next one.
//!
//! - **Inherited** ([`inherited`]): under systemd socket activation the `.socket`
//!   unit owns the socket and hands it over as file descriptor 3 (`LISTEN_FDS=1`,
//!   `LISTEN_PID` = this process; sd_listen_fds(3)); an old relay hands it over the
//!   same way without `LISTEN_PID`. Read before any thread starts (the variables are
//!   removed from the environment).
//! - **Handed on** ([`hand_over`], on SIGHUP): the relay starts its own command line
//!   again (`argv[0]`, so a binary replaced on disk is the one started) with the
//!   socket as descriptor 3 and `LISTEN_FDS=1`, then stops accepting, finishes the
//!   requests in flight and exits; the new process waits for the spool's lock
//!   ([`OPEN_WAIT`] past the grace period) and accepts on the same socket.

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context as _, bail};
use command_fds::{CommandFdExt, FdMapping};

/// How long a relay that inherited its socket waits, beyond the old relay's grace
/// period, for the spool's lock: the old process stops its drainer and exits.
pub(crate) const OPEN_WAIT: Duration = Duration::from_secs(30);

/// The listening socket passed in by systemd or an old relay, if any. Call it
/// before any thread starts: it reads and removes `LISTEN_FDS` and `LISTEN_PID`.
pub(crate) fn inherited() -> anyhow::Result<Option<std::net::TcpListener>> {
    let mut fds = listenfd::ListenFd::from_env();
    match fds.len() {
        0 => Ok(None),
        1 => {
            let listener = fds
                .take_tcp_listener(0)
                .context("the socket passed in LISTEN_FDS is not a listening TCP socket")?;
            Ok(listener)
        }
        n => bail!(
            "{n} sockets were passed in LISTEN_FDS; spool-relay serves one (give its \
             .socket unit one ListenStream=)"
        ),
    }
}

/// The socket to serve on: `inherited`, or `listen` bound now; and whether it was
/// inherited.
pub(crate) async fn listener(
    inherited: Option<std::net::TcpListener>,
    listen: SocketAddr,
) -> anyhow::Result<(tokio::net::TcpListener, bool)> {
    match inherited {
        Some(std) => {
            std.set_nonblocking(true)?;
            Ok((tokio::net::TcpListener::from_std(std)?, true))
        }
        None => {
            let bound = tokio::net::TcpListener::bind(listen).await;
            let listener = bound.with_context(|| format!("cannot listen on {listen}"))?;
            Ok((listener, false))
        }
    }
}

/// A copy of the listening socket's descriptor, kept to hand on.
pub(crate) fn keep(listener: &tokio::net::TcpListener) -> anyhow::Result<OwnedFd> {
    let fd = listener.as_fd().try_clone_to_owned();
    fd.context("cannot keep a copy of the listening socket to hand on")
}

/// Starts this command line again with `socket` as its listening socket (descriptor
/// 3, `LISTEN_FDS=1`); returns the new process's id. The caller then stops
/// accepting and exits.
pub(crate) fn hand_over(socket: &OwnedFd) -> anyhow::Result<u32> {
    let mut argv = std::env::args_os();
    let program = argv.next().context("no argv[0] to start again")?;
    let mut command = std::process::Command::new(&program);
    command
        .args(argv)
        .env("LISTEN_FDS", "1")
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDNAMES");
    let socket = socket
        .try_clone()
        .context("cannot copy the listening socket")?;
    let mapping = FdMapping {
        parent_fd: socket,
        child_fd: 3,
    };
    command
        .fd_mappings(vec![mapping])
        .map_err(|e| anyhow::anyhow!("cannot pass the listening socket: {e:?}"))?;
    let child = command
        .spawn()
        .with_context(|| format!("cannot start {}", program.to_string_lossy()))?;
    Ok(child.id())
}
