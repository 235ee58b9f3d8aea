//! Serving connections: hyper's HTTP/1.1 server on any byte stream, and an accept
//! loop for a real port. One task per connection; a request that must end without a
//! response makes hyper close the connection.

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::fake::FakeGcs;
use crate::{handler, tls};

impl FakeGcs {
    /// Serves the fake on a real listener, until the task is dropped. Accept errors
    /// (such as running out of file descriptors) are logged and retried after
    /// 100 ms.
    pub async fn serve_tcp(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        self.serve_tcp_with(listener, None).await
    }

    /// [`serve_tcp`](Self::serve_tcp), over TLS when `tls` is given: each
    /// connection's handshake within [`tls::HANDSHAKE_TIMEOUT`], then HTTP/1.1.
    pub async fn serve_tcp_with(
        self,
        listener: tokio::net::TcpListener,
        tls: Option<tls::TlsAcceptor>,
    ) -> std::io::Result<()> {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let fake = self.clone();
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        let ended = match tls {
                            None => fake
                                .serve_connection(stream)
                                .await
                                .map_err(|e| e.to_string()),
                            Some(tls) => fake.serve_tls(stream, &tls).await,
                        };
                        if let Err(e) = ended {
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

    /// The TLS handshake on `stream`, then HTTP/1.1 over it.
    async fn serve_tls(
        self,
        stream: tokio::net::TcpStream,
        tls: &tls::TlsAcceptor,
    ) -> Result<(), String> {
        let handshake = tokio::time::timeout(tls::HANDSHAKE_TIMEOUT, tls.accept(stream));
        match handshake.await {
            Err(_) => Err("no TLS handshake within its time".into()),
            Ok(Err(e)) => Err(format!("TLS handshake: {e}")),
            Ok(Ok(stream)) => self
                .serve_connection(stream)
                .await
                .map_err(|e| e.to_string()),
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
