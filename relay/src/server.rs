//! The relay's HTTP/1.1 server: an accept loop on a real listener, one task per
//! connection, and graceful shutdown.
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
use tokio::net::{TcpListener, TcpStream};

use crate::handler;
use crate::relay::Relay;

/// How long a client may take to send a request's headers (hyper's default, stated
/// here). A slow body is bounded by the client's own timeouts.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `relay` on `listener` until `shutdown` resolves, then stops accepting and
/// waits up to `grace` for the requests in flight. Accept errors (such as running
/// out of file descriptors) are logged and retried after 100 ms.
pub async fn serve(
    relay: Relay,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => connection(&relay, &graceful, stream),
                Err(e) => {
                    tracing::warn!(target: "spool_relay", "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    let open = graceful.count();
    tracing::info!(
        target: "spool_relay",
        open_connections = open,
        "stopped accepting; finishing requests in flight"
    );
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            target: "spool_relay",
            grace = %humantime::format_duration(grace),
            "requests still in flight after the grace period; closing their connections"
        );
    }
}

/// Serves one accepted connection on its own task, watched for shutdown.
fn connection(relay: &Relay, graceful: &GracefulShutdown, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let relay = relay.clone();
    let service = service_fn(move |req| {
        let relay = relay.clone();
        async move { Ok::<_, Infallible>(handler::handle(relay, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    let conn = graceful.watch(conn);
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(target: "spool_relay", "connection ended: {e}");
        }
    });
}
