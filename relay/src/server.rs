//! The relay's HTTP/1.1 server: [`Connections`], which serves each connection over
//! any byte stream (a TCP stream, or a simulator's) on its own task and shuts them
//! down gracefully; and [`serve`] / [`serve_with`], the accept loop on a real
//! listener that uses it.
//!
//! Promises: once `shutdown` resolves, no connection is accepted (the listener is
//! closed), idle keep-alive connections are closed, and requests in flight finish
//! and are answered, for at most `grace`; [`serve`] returns after that. Stopping the
//! drainer is the caller's next step.
//!
//! Bounds ([`ServerConfig`], each with its default):
//!
//! - Every request passes [`Access::check`] (`auth.rs`) before the handler runs:
//!   browsers (an `Origin` header) are refused, and, as configured, requests without
//!   the token or naming a non-loopback `Host`.
//! - At most [`ServerConfig::max_connections`] (256) connections are served at once.
//!   Over it, the accept loop stops accepting: new connections wait in the kernel's
//!   listen backlog (their TCP handshake completes, no byte is read) until one
//!   closes, and are then served in order; when the backlog is full too, the kernel
//!   drops or refuses them. None is accepted and then closed.
//! - A client gets [`HEADER_READ_TIMEOUT`] (30 s) to send a request's headers, which
//!   also closes idle keep-alive connections; a read or write that waits
//!   [`ServerConfig::body_timeout`] (60 s) without moving a byte (a body that stops
//!   midway, an answer nobody reads) closes the connection (`timeout_io.rs`).
//! - hyper enforces `Content-Length`: a body shorter than it (the client closes
//!   early) fails the request (answered 400, closing the connection), and the
//!   upload is neither stored nor spooled.
//! - A failed accept (EMFILE: out of file descriptors; ECONNABORTED) is logged at
//!   warn with the open-file limit, the first of a run and every 100th after, and
//!   retried after 100 ms.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use fake_gcs::wire::{Query, Route};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::{Access, Refusal};
use crate::handler;
use crate::metrics::route_label;
use crate::relay::Relay;
use crate::timeout_io::TimeoutIo;

/// How long a client may take to send a request's headers (hyper's default, stated
/// here); an idle keep-alive connection is closed after this long too.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// [`ServerConfig::body_timeout`]'s default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// [`ServerConfig::max_connections`]'s default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The pause after a failed accept.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// How the server bounds who may send requests, and how many and how slowly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Who may send requests. Default: anyone who can connect, browsers refused.
    pub access: Access,
    /// A connection whose read or write waits this long without moving a byte is
    /// closed: a client that stops sending a body midway, or stops reading the
    /// answer. Default 60 s ([`DEFAULT_BODY_TIMEOUT`]). Not zero.
    pub body_timeout: Duration,
    /// Most connections [`serve_with`] serves at once; more wait in the listen
    /// backlog. Default 256 ([`DEFAULT_MAX_CONNECTIONS`]). At least 1.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            access: Access::default(),
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The connections a relay serves, each on its own task, watched for a graceful
/// shutdown. [`serve`] feeds it from a TCP listener; a simulator feeds it its own
/// streams, so both run the same code from the first byte of a request on.
///
/// ```no_run
/// # async fn demo(relay: relay::Relay, listener: tokio::net::TcpListener) {
/// let connections = relay::Connections::new(relay);
/// for _ in 0..3 {
///     let (stream, _) = listener.accept().await.unwrap();
///     connections.serve_connection(stream);
/// }
/// connections.shutdown(std::time::Duration::from_secs(30)).await;
/// # }
/// ```
pub struct Connections {
    relay: Relay,
    graceful: GracefulShutdown,
    access: Arc<Access>,
    body_timeout: Duration,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("relay", &self.relay)
            .field("open", &self.graceful.count())
            .finish()
    }
}

impl Connections {
    /// No connections yet, for `relay`, with the default [`ServerConfig`].
    pub fn new(relay: Relay) -> Self {
        Self::with_config(relay, &ServerConfig::default())
    }

    /// No connections yet, for `relay`, checking requests and timing connections as
    /// `config` says (its `max_connections` is [`serve_with`]'s to enforce).
    pub fn with_config(relay: Relay, config: &ServerConfig) -> Self {
        Self {
            relay,
            graceful: GracefulShutdown::new(),
            access: Arc::new(config.access.clone()),
            body_timeout: config.body_timeout.max(Duration::from_millis(1)),
        }
    }

    /// Serves one accepted connection, any byte stream, on its own task (spawned on
    /// the current tokio runtime) until the client closes it or [`shutdown`] ends
    /// it.
    ///
    /// [`shutdown`]: Connections::shutdown
    pub fn serve_connection<I>(&self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        self.serve_holding(io, None);
    }

    /// [`Connections::serve_connection`], holding `permit` (a place under the
    /// connection limit) until the connection ends.
    fn serve_holding<I>(&self, io: I, permit: Option<OwnedSemaphorePermit>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let relay = self.relay.clone();
        let access = self.access.clone();
        let service = service_fn(move |req| {
            let relay = relay.clone();
            let access = access.clone();
            async move {
                let response = match access.check(req.headers()) {
                    Ok(()) => handler::handle(relay, req).await,
                    Err(refusal) => refuse(&relay, &req, &refusal),
                };
                Ok::<_, Infallible>(response)
            }
        });
        let io = TimeoutIo::new(io, self.body_timeout);
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            // No read for an early EOF while a request is served: the body timeout
            // then counts only waits for the client (see timeout_io.rs), and a
            // request whose body was read is answered whatever the client does.
            .half_close(true)
            .serve_connection(TokioIo::new(io), service);
        let conn = self.graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(target: "spool_relay", "connection ended: {e}");
            }
            drop(permit);
        });
    }

    /// Connections still open.
    pub fn count(&self) -> usize {
        self.graceful.count()
    }

    /// Ends every connection gracefully: idle ones close now, ones with a request
    /// in flight once it is answered. Waits at most `grace`; returns false when
    /// requests were still in flight then (their connections are closed as this
    /// returns and their tasks see the close).
    pub async fn shutdown(self, grace: Duration) -> bool {
        let open = self.graceful.count();
        tracing::info!(
            target: "spool_relay",
            open_connections = open,
            "stopped accepting; finishing requests in flight"
        );
        let finished = tokio::time::timeout(grace, self.graceful.shutdown())
            .await
            .is_ok();
        if !finished {
            tracing::warn!(
                target: "spool_relay",
                grace = %humantime::format_duration(grace),
                "requests still in flight after the grace period; closing their connections"
            );
        }
        finished
    }
}

/// The answer to a request [`Access::check`] refused, counted like any other.
fn refuse(
    relay: &Relay,
    req: &http::Request<Incoming>,
    refusal: &Refusal,
) -> http::Response<http_body_util::Full<bytes::Bytes>> {
    let query = Query::parse(req.uri().query());
    let route = Route::parse(req.method(), req.uri(), &query);
    let label = route_label(&route);
    relay.metrics().answered(label, refusal.status);
    tracing::info!(
        target: "spool_relay",
        route = label,
        status = refusal.status,
        "refused a request: {}",
        refusal.message
    );
    let reply = refusal.reply(route.api());
    let body = http_body_util::Full::new(reply.body.clone());
    reply.into_response(body)
}

/// Serves `relay` on `listener` with the default [`ServerConfig`] until `shutdown`
/// resolves, then stops accepting and waits up to `grace` for the requests in
/// flight. See [`serve_with`].
pub async fn serve(
    relay: Relay,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    serve_with(relay, listener, shutdown, grace, ServerConfig::default()).await;
}

/// Serves `relay` on `listener` as `config` says until `shutdown` resolves, then
/// stops accepting and waits up to `grace` for the requests in flight. At most
/// `config.max_connections` connections are served at once (more wait in the listen
/// backlog); accept errors (such as running out of file descriptors) are logged and
/// retried after 100 ms.
pub async fn serve_with(
    relay: Relay,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    config: ServerConfig,
) {
    let connections = Connections::with_config(relay, &config);
    accept_loop(&connections, listener, shutdown, config.max_connections).await;
    connections.shutdown(grace).await;
}

/// Where the server's connections come from: a TCP listener, or a test's streams.
trait Acceptor: Send {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Acceptor for TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&mut self) -> std::io::Result<Self::Stream> {
        let (stream, _) = TcpListener::accept(self).await?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

/// Accepts connections into `connections` until `shutdown` resolves, at most
/// `max_connections` open at once; then closes the listener.
async fn accept_loop(
    connections: &Connections,
    mut listener: impl Acceptor,
    shutdown: impl Future<Output = ()>,
    max_connections: usize,
) {
    let max_connections = max_connections.max(1);
    let places = Arc::new(Semaphore::new(max_connections));
    let mut failed_in_a_row: u64 = 0;
    let mut waits: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let permit = match places.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                waits += 1;
                if waits == 1 || waits.is_multiple_of(100) {
                    tracing::warn!(
                        target: "spool_relay",
                        max_connections,
                        times = waits,
                        "serving --max-connections connections: new connections wait in the \
                         listen backlog until one closes"
                    );
                }
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    permit = places.clone().acquire_owned() => {
                        permit.expect("the semaphore is never closed")
                    }
                }
            }
        };
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(stream) => {
                    if failed_in_a_row > 0 {
                        tracing::info!(
                            target: "spool_relay",
                            failed = failed_in_a_row,
                            "accepting connections again"
                        );
                        failed_in_a_row = 0;
                    }
                    connections.serve_holding(stream, Some(permit));
                }
                Err(e) => {
                    failed_in_a_row += 1;
                    if failed_in_a_row == 1 || failed_in_a_row.is_multiple_of(100) {
                        tracing::warn!(
                            target: "spool_relay",
                            failed_in_a_row,
                            "accept failed: {e}; {}; retrying every {}",
                            accept_error_advice(&e),
                            humantime::format_duration(ACCEPT_RETRY)
                        );
                    }
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            },
        }
    }
    drop(listener);
}

/// What an operator can do about a failed accept.
fn accept_error_advice(e: &std::io::Error) -> String {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    match e.raw_os_error() {
        Some(EMFILE) => format!(
            "spool-relay has run out of file descriptors ({}; each connection takes one): \
             raise the limit (LimitNOFILE= in the systemd unit, ulimit -n) above \
             --max-connections plus 64, or lower --max-connections",
            open_files_limit()
        ),
        Some(ENFILE) => {
            "the system has run out of file descriptors (fs.file-max): see what holds them".into()
        }
        _ => "a client's connection failed before it was accepted".into(),
    }
}

/// The process's open-file limit as `/proc/self/limits` gives it (Linux).
fn open_files_limit() -> String {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            let soft = line.split_whitespace().nth(3)?;
            Some(format!("limit {soft} open files"))
        })
        .unwrap_or_else(|| "limit unknown".into())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use object_store::memory::InMemory;
    use spool::{Remote, SpoolConfig, SystemClock, Uploader, UploaderConfig};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::sync::mpsc;

    use super::*;
    use crate::RelayConfig;

    /// Accepts what the test sends (streams or errors), counting the calls.
    struct Scripted {
        next: mpsc::UnboundedReceiver<std::io::Result<DuplexStream>>,
        calls: Arc<AtomicUsize>,
    }

    impl Acceptor for Scripted {
        type Stream = DuplexStream;
        async fn accept(&mut self) -> std::io::Result<DuplexStream> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            match self.next.recv().await {
                Some(next) => next,
                None => std::future::pending().await,
            }
        }
    }

    async fn connections(max_connections: usize) -> Connections {
        let (spool, _disk) = spool::testing::mem_spool(SpoolConfig::default()).await;
        let remote = Remote::new(Arc::new(InMemory::new()));
        let uploader = Uploader::new(spool, remote, UploaderConfig::default());
        let relay = Relay::new(RelayConfig::new("bkt"), uploader, Arc::new(SystemClock));
        let config = ServerConfig {
            max_connections,
            ..ServerConfig::default()
        };
        Connections::with_config(relay, &config)
    }

    const BUCKET_GET: &[u8] = b"GET /storage/v1/b/bkt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

    /// The status line of the answer to `BUCKET_GET` on `client`, if one comes
    /// within a (paused) second.
    async fn answered(client: &mut DuplexStream) -> Option<String> {
        let mut head = [0u8; 12];
        let read = tokio::time::timeout(Duration::from_secs(1), client.read_exact(&mut head));
        read.await
            .ok()
            .map(|r| String::from_utf8_lossy(&head[..r.map_or(0, |_| 12)]).into_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn over_max_connections_the_loop_stops_accepting_until_one_closes() {
        let connections = connections(1).await;
        let (script, next) = mpsc::unbounded_channel();
        let calls = Arc::new(AtomicUsize::new(0));
        let (mut first, first_end) = tokio::io::duplex(1 << 16);
        let (mut second, second_end) = tokio::io::duplex(1 << 16);
        script.send(Ok(first_end)).unwrap();
        script.send(Ok(second_end)).unwrap();
        let acceptor = Scripted {
            next,
            calls: calls.clone(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = accept_loop(&connections, acceptor, async { drop(stopped.await) }, 1);
        let test = async {
            first.write_all(BUCKET_GET).await.unwrap();
            assert_eq!(answered(&mut first).await.as_deref(), Some("HTTP/1.1 200"));
            second.write_all(BUCKET_GET).await.unwrap();
            // The first connection is open (keep-alive): the second waits unaccepted.
            assert_eq!(answered(&mut second).await, None);
            assert_eq!(calls.load(Ordering::SeqCst), 1);
            assert_eq!(connections.count(), 1);
            drop(first);
            assert_eq!(answered(&mut second).await.as_deref(), Some("HTTP/1.1 200"));
            assert_eq!(calls.load(Ordering::SeqCst), 2);
            stop.send(()).unwrap();
        };
        tokio::join!(serving, test);
    }

    #[tokio::test(start_paused = true)]
    async fn accept_errors_are_retried_and_the_loop_goes_on_serving() {
        let connections = connections(4).await;
        let (script, next) = mpsc::unbounded_channel();
        let calls = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            script
                .send(Err(std::io::Error::from_raw_os_error(24)))
                .unwrap();
        }
        let (mut client, server_end) = tokio::io::duplex(1 << 16);
        script.send(Ok(server_end)).unwrap();
        let acceptor = Scripted {
            next,
            calls: calls.clone(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = accept_loop(&connections, acceptor, async { drop(stopped.await) }, 4);
        let started = tokio::time::Instant::now();
        let test = async {
            client.write_all(BUCKET_GET).await.unwrap();
            let mut head = [0u8; 12];
            client.read_exact(&mut head).await.unwrap();
            assert_eq!(&head, b"HTTP/1.1 200");
            // Three failed, the fourth served (and a fifth waits for the next).
            assert!(calls.load(Ordering::SeqCst) >= 4);
            assert!(started.elapsed() >= ACCEPT_RETRY * 3);
            stop.send(()).unwrap();
        };
        tokio::join!(serving, test);
    }

    #[test]
    fn running_out_of_file_descriptors_names_the_limit_and_the_fix() {
        let advice = accept_error_advice(&std::io::Error::from_raw_os_error(24));
        assert!(advice.contains("LimitNOFILE") && advice.contains("--max-connections"));
        if cfg!(target_os = "linux") {
            assert!(
                advice.contains("open files") && !advice.contains("unknown"),
                "{advice}"
            );
        }
    }
}
