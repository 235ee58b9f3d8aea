//! The relay's HTTP/1.1 server: [`Connections`], which serves each connection over
//! any byte stream (a TCP stream, or a simulator's) on its own task and shuts them
//! down gracefully; and [`serve`], the accept loop on a real listener that uses it.
//!
//! Promises: once `shutdown` resolves, no connection is accepted (the listener is
//! closed), idle keep-alive connections are closed, and requests in flight finish
//! and are answered, for at most `grace`; [`serve`] returns after that. Stopping the
//! drainer is the caller's next step.

use std::convert::Infallible;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use crate::handler;
use crate::relay::Relay;

/// How long a client may take to send a request's headers (hyper's default, stated
/// here). A slow body is bounded by the client's own timeouts.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// No connections yet, for `relay`.
    pub fn new(relay: Relay) -> Self {
        Self {
            relay,
            graceful: GracefulShutdown::new(),
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
        let relay = self.relay.clone();
        let service = service_fn(move |req| {
            let relay = relay.clone();
            async move { Ok::<_, Infallible>(handler::handle(relay, req).await) }
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(io), service);
        let conn = self.graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(target: "spool_relay", "connection ended: {e}");
            }
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

/// Serves `relay` on `listener` until `shutdown` resolves, then stops accepting and
/// waits up to `grace` for the requests in flight. Accept errors (such as running
/// out of file descriptors) are logged and retried after 100 ms.
pub async fn serve(
    relay: Relay,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let connections = Connections::new(relay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    connections.serve_connection(stream);
                }
                Err(e) => {
                    tracing::warn!(target: "spool_relay", "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    connections.shutdown(grace).await;
}
