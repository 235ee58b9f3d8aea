//! The listening socket of the `spool-relay` command (feature `cli`), and how it
//! outlives a process, so that a restart or a deploy refuses no connection:
//! connections that arrive while no process accepts wait in the kernel's listen
//! backlog and are served by the next one.
//!
//! - **Inherited** ([`inherited`]): under systemd socket activation the `.socket`
//!   unit owns the socket and hands it over as file descriptor 3 (`LISTEN_FDS=1`,
//!   `LISTEN_PID` = this process; sd_listen_fds(3)); an old relay hands it over the
//!   same way without `LISTEN_PID`, with a second descriptor (4, named `handover`
//!   in `LISTEN_FDNAMES`): a Unix socket to tell it how the start goes. Read before
//!   any thread starts (the variables are removed from the environment).
//! - **Handed on** ([`hand_over`], on SIGHUP), never leaving the port dark:
//!
//!   1. The old relay starts its own command line again (`argv[0]`, so a binary
//!      replaced on disk is the one started) with the socket as descriptor 3 and
//!      the hand-over socket as 4, and goes on serving.
//!   2. The new one reads its flags, its token, its certificate, its upstream and
//!      the socket (everything that can fail but the spool) and says `prepared`
//!      ([`Predecessor::tell`]). One that exits first, or says nothing within
//!      [`PREPARE_WAIT`], is reported and the old relay serves on: nothing
//!      changed.
//!   3. On `prepared` the old relay stops accepting, finishes its requests in
//!      flight, stops its drainer and lets the spool go; the new one, waiting for
//!      the spool's lock ([`OPEN_WAIT`] past the grace period), opens it, listens
//!      and says `ready`, and the old one exits 0.
//!   4. A new relay that exits before `ready`, or is not ready within
//!      [`READY_WAIT`] (it is then killed), leaves the old one to start again on
//!      the same socket: it replaces itself ([`restart`]) with the binary it was
//!      started from (`/proc/self/exe`, the old binary even when the file was
//!      replaced), which takes the spool and listens. Connections wait in the
//!      backlog meanwhile; none is refused.

use std::io::{BufRead as _, Write as _};
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{Context as _, bail};
use command_fds::{CommandFdExt, FdMapping};

/// How long a relay that inherited its socket waits, beyond the old relay's grace
/// period, for the spool's lock: the old process stops its drainer and exits.
pub(crate) const OPEN_WAIT: Duration = Duration::from_secs(30);

/// How long an old relay waits for the new one to say `prepared`.
pub(crate) const PREPARE_WAIT: Duration = Duration::from_secs(60);

/// How long an old relay, stopped, waits for the new one to say `ready`: its wait
/// for the lock and its start.
pub(crate) const READY_WAIT: Duration = Duration::from_secs(120);

/// The name the hand-over socket has in `LISTEN_FDNAMES`.
const HANDOVER_NAME: &str = "handover";

/// What an old relay or systemd passed in.
#[derive(Debug, Default)]
pub(crate) struct Inherited {
    /// The listening socket.
    pub(crate) listener: Option<std::net::TcpListener>,
    /// The old relay's hand-over socket, when an old relay started this one.
    pub(crate) predecessor: Option<Predecessor>,
}

/// What passed in `LISTEN_FDS`. Call it before any thread starts: it reads and
/// removes `LISTEN_FDS` and `LISTEN_PID`.
pub(crate) fn inherited() -> anyhow::Result<Inherited> {
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    let mut fds = listenfd::ListenFd::from_env();
    let handover = names.split(':').nth(1) == Some(HANDOVER_NAME);
    match (fds.len(), handover) {
        (0, _) => Ok(Inherited::default()),
        (1, false) | (2, true) => {
            let listener = fds
                .take_tcp_listener(0)
                .context("the socket passed in LISTEN_FDS is not a listening TCP socket")?;
            let predecessor = match handover {
                false => None,
                true => {
                    let stream: Option<UnixStream> = fds
                        .take_custom(1, libc::AF_UNIX, libc::SOCK_STREAM, "the hand-over socket")
                        .context("the hand-over socket passed in LISTEN_FDS is not one")?;
                    stream.map(Predecessor)
                }
            };
            Ok(Inherited {
                listener,
                predecessor,
            })
        }
        (n, _) => bail!(
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

/// A new relay this one started on SIGHUP, and what it says of its start.
#[derive(Debug)]
pub(crate) struct Successor {
    child: std::process::Child,
    told: std::io::BufReader<UnixStream>,
}

/// Starts this command line again with `socket` as its listening socket
/// (descriptor 3) and a hand-over socket (4); the new process, whose start the
/// caller follows ([`Successor::prepared`]).
pub(crate) fn hand_over(socket: &OwnedFd) -> anyhow::Result<Successor> {
    let mut argv = std::env::args_os();
    let program = argv.next().context("no argv[0] to start again")?;
    let mut command = std::process::Command::new(&program);
    command.args(argv);
    let (ours, theirs) = UnixStream::pair().context("cannot make the hand-over socket")?;
    pass_socket(&mut command, socket, Some(OwnedFd::from(theirs)))?;
    let child = command
        .spawn()
        .with_context(|| format!("cannot start {}", program.to_string_lossy()))?;
    Ok(Successor {
        child,
        told: std::io::BufReader::new(ours),
    })
}

/// Sets `command` up to inherit `socket` as descriptor 3 (`LISTEN_FDS`), and the
/// hand-over socket `handover` as 4 when given.
fn pass_socket(
    command: &mut std::process::Command,
    socket: &OwnedFd,
    handover: Option<OwnedFd>,
) -> anyhow::Result<()> {
    let socket = socket
        .try_clone()
        .context("cannot copy the listening socket")?;
    let mut mappings = vec![FdMapping {
        parent_fd: socket,
        child_fd: 3,
    }];
    command.env_remove("LISTEN_PID");
    match handover {
        Some(handover) => {
            mappings.push(FdMapping {
                parent_fd: handover,
                child_fd: 4,
            });
            command
                .env("LISTEN_FDS", "2")
                .env("LISTEN_FDNAMES", format!("listener:{HANDOVER_NAME}"));
        }
        None => {
            command.env("LISTEN_FDS", "1").env_remove("LISTEN_FDNAMES");
        }
    }
    command
        .fd_mappings(mappings)
        .map_err(|e| anyhow::anyhow!("cannot pass the listening socket: {e:?}"))?;
    Ok(())
}

impl Successor {
    /// The new process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (on a blocking thread) for the new relay to say `prepared`; `Err`
    /// says why it will not take over (it exited, said something else, or said
    /// nothing within [`PREPARE_WAIT`]; it is then killed). The old relay serves on
    /// meanwhile, and after an `Err`.
    pub(crate) async fn prepared(self) -> Result<Successor, String> {
        let waited = tokio::task::spawn_blocking(move || {
            let mut this = self;
            match this.expect("prepared", PREPARE_WAIT) {
                Ok(()) => Ok(this),
                Err(why) => Err(this.give_up(why)),
            }
        });
        waited.await.unwrap_or_else(|e| Err(e.to_string()))
    }

    /// Waits (blocking) for the new relay, which now waits for the spool, to say
    /// `ready`; `Err` says why it did not (it is then killed).
    pub(crate) fn ready(mut self) -> Result<(), String> {
        match self.expect("ready", READY_WAIT) {
            Ok(()) => Ok(()),
            Err(why) => Err(self.give_up(why)),
        }
    }

    /// Reads the next line the new relay says, expecting `word`, within `within`.
    fn expect(&mut self, word: &str, within: Duration) -> Result<(), String> {
        let stream = self.told.get_ref();
        stream
            .set_read_timeout(Some(within))
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        match self.told.read_line(&mut line) {
            Ok(0) => Err(format!("it ended without saying {word:?}")),
            Ok(_) if line.trim_end() == word => Ok(()),
            Ok(_) => Err(format!("it said {:?}, not {word:?}", line.trim_end())),
            Err(e) if is_timeout(&e) => Err(format!(
                "it did not say {word:?} within {}",
                humantime::format_duration(within)
            )),
            Err(e) => Err(format!("its hand-over socket failed: {e}")),
        }
    }

    /// Stops a new relay that will not take over: killed if it still runs; `why`
    /// with its exit status.
    fn give_up(&mut self, why: String) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(status)) => status,
            _ => {
                let _ = self.child.kill();
                match self.child.wait() {
                    Ok(status) => status,
                    Err(e) => return format!("{why}; it could not be waited for: {e}"),
                }
            }
        };
        format!("{why} ({status})")
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// The relay that started this one, told how its start goes.
#[derive(Debug)]
pub(crate) struct Predecessor(UnixStream);

impl Predecessor {
    /// Tells the old relay `word` (`prepared`, `ready`); a predecessor that went
    /// away is logged and forgotten (it no longer waits).
    pub(crate) fn tell(&mut self, word: &str) {
        if let Err(e) = writeln!(self.0, "{word}") {
            tracing::warn!(
                target: "spool_relay",
                "the relay this one takes over from no longer listens ({e}); going on"
            );
        }
    }
}

/// Replaces this process with the binary it was started from (`/proc/self/exe`,
/// with the same arguments), serving `socket`: how an old relay starts again when
/// its successor failed after it stopped. Returns only when that fails.
pub(crate) fn restart(socket: &OwnedFd) -> anyhow::Error {
    use std::os::unix::process::CommandExt as _;
    let mut argv = std::env::args_os();
    let Some(argv0) = argv.next() else {
        return anyhow::anyhow!("no argv[0] to start again");
    };
    let mut command = std::process::Command::new("/proc/self/exe");
    command.arg0(argv0).args(argv);
    if let Err(e) = pass_socket(&mut command, socket, None) {
        return e;
    }
    let error = command.exec();
    anyhow::anyhow!("cannot start /proc/self/exe again: {error}")
}
