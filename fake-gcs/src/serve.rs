//! Serving connections: hyper's HTTP/1.1 server on any byte stream, and an accept
//! loop for a real port. One task per connection; a request that must end without a
//! response makes hyper close the connection.

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::fake::FakeGcs;
use crate::handler;

impl FakeGcs {
    /// Serves the fake on a real listener, until the task is dropped. Accept errors
    /// (such as running out of file descriptors) are logged and retried after
    /// 100 ms.
    pub async fn serve_tcp(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let fake = self.clone();
                    tokio::spawn(async move {
                        if let Err(e) = fake.serve_connection(stream).await {
                            tracing::debug!(target: "fake_gcs", %peer, "connection ended: {e}");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(target: "fake_gcs", "accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Serves HTTP/1.1 on one accepted stream of any transport (a real socket, a
    /// simulated one, an in-memory pipe) until the client closes it or a fault drops
    /// it. The error is hyper's, for the caller's log: a fault that drops the
    /// connection ends it with one.
    pub async fn serve_connection<S>(self, stream: S) -> Result<(), hyper::Error>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let fake = self;
        let service = service_fn(move |req| handler::handle(fake.clone(), req));
        http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await
    }
}
