//! Serving connections: one accept loop for turmoil's simulated TCP, one for a real
//! port, and hyper's HTTP/1.1 server on each accepted stream. One task per
//! connection; a request that must end without a response makes hyper close the
//! connection.

use std::net::SocketAddr;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::FakeGcs;
use super::handler;

impl FakeGcs {
    /// Serves the fake inside a turmoil host on `0.0.0.0:port`, until the host stops.
    ///
    /// ```no_run
    /// # fn demo(sim: &mut turmoil::Sim<'_>, fake: sim::gcs::FakeGcs) {
    /// sim.host("gcs", move || {
    ///     let fake = fake.clone();
    ///     async move {
    ///         fake.serve_turmoil(4443).await?;
    ///         Ok(())
    ///     }
    /// });
    /// # }
    /// ```
    pub async fn serve_turmoil(self, port: u16) -> std::io::Result<()> {
        let listener = turmoil::net::TcpListener::bind(("0.0.0.0", port)).await?;
        loop {
            let (stream, peer) = listener.accept().await?;
            tokio::spawn(self.clone().serve_connection(stream, peer));
        }
    }

    /// Serves the fake on a real listener, until the task is dropped. Accept errors
    /// (such as running out of file descriptors) are logged and retried after
    /// 100 ms.
    pub async fn serve_tcp(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(self.clone().serve_connection(stream, peer));
                }
                Err(e) => {
                    tracing::warn!(target: "sim::gcs", "accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Serves HTTP/1.1 on one accepted stream until the client closes it or a fault
    /// drops it.
    pub async fn serve_connection<S>(self, stream: S, peer: SocketAddr)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let fake = self;
        let service = service_fn(move |req| handler::handle(fake.clone(), req));
        if let Err(e) = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await
        {
            tracing::debug!(target: "sim::gcs", %peer, "connection ended: {e}");
        }
    }
}
