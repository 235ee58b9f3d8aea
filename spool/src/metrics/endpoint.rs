//! The metrics endpoint (feature `http`): `GET /metrics` over HTTP/1 with hyper.
//! Encoding stays in the core ([`super::encode`]); this is only the transport.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use prometheus_client::registry::Registry;

use super::{CONTENT_TYPE, encode};

/// The default address of the metrics endpoint: loopback only, port 9464 (the
/// OpenTelemetry Prometheus exporter's). Expose it wider deliberately.
pub const DEFAULT_METRICS_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9464);

/// Binds `addr` (use [`DEFAULT_METRICS_ADDR`] for loopback:9464) and serves
/// `registry` at `GET /metrics` until the task is dropped. Fails at once if the
/// address cannot be bound.
pub async fn bind_and_serve(addr: SocketAddr, registry: Arc<Registry>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot serve metrics on {addr}: {e}"))
    })?;
    serve(listener, registry).await
}

/// Serves `registry` at `GET /metrics` on `listener` until the task is dropped.
///
/// ```no_run
/// # async fn demo(spool: spool::Spool) -> std::io::Result<()> {
/// let mut registry = prometheus_client::registry::Registry::default();
/// spool.register_metrics(&mut registry);
/// let listener = tokio::net::TcpListener::bind(spool::metrics::DEFAULT_METRICS_ADDR).await?;
/// tokio::spawn(spool::metrics::serve(listener, std::sync::Arc::new(registry)));
/// # Ok(()) }
/// ```
pub async fn serve(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let registry = registry.clone();
                async move { Ok::<_, std::convert::Infallible>(respond(&req, &registry)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "metrics connection ended with an error");
            }
        });
    }
}

fn respond<B>(req: &hyper::Request<B>, registry: &Registry) -> hyper::Response<Full<Bytes>> {
    let builder = hyper::Response::builder();
    let response = if req.method() != hyper::Method::GET {
        builder
            .status(hyper::StatusCode::METHOD_NOT_ALLOWED)
            .body(Full::new(Bytes::from_static(b"only GET\n")))
    } else if req.uri().path() != "/metrics" {
        builder
            .status(hyper::StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(b"metrics are at /metrics\n")))
    } else {
        builder
            .header(hyper::header::CONTENT_TYPE, CONTENT_TYPE)
            .body(Full::new(Bytes::from(encode(registry))))
    };
    response.expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{UploadOutcome, WritePath};
    use crate::{Spool, SpoolConfig};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: spool\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    #[tokio::test]
    async fn the_endpoint_serves_gauges_counters_and_histograms() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::open(dir.path(), SpoolConfig::default())
            .await
            .unwrap();
        spool.put("a", Bytes::from_static(b"12345")).await.unwrap();
        spool.metrics().upload(UploadOutcome::Spooled);
        spool.metrics().store_error(WritePath::Direct, "503".into());
        let mut registry = Registry::default();
        spool.register_metrics(&mut registry);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, Arc::new(registry)));

        let response = get(addr, "/metrics").await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.contains(CONTENT_TYPE), "{response}");
        for line in [
            "\nspool_files 1.0\n",
            &format!("\nspool_bytes {}.0\n", crate::entry::file_bytes(1, 0, 5)),
            "\nspool_max_files 100000.0\n",
            "\nspool_broken 0.0\n",
            "\nspool_uploads_total{outcome=\"spooled\"} 1\n",
            "\nspool_store_errors_total{path=\"direct\",kind=\"503\"} 1\n",
            "# TYPE spool_upload_direct_seconds histogram",
            "# TYPE spool_oldest_age_seconds gauge",
        ] {
            assert!(response.contains(line), "missing {line:?} in\n{response}");
        }
        assert!(get(addr, "/other").await.starts_with("HTTP/1.1 404"));
        server.abort();
    }

    #[tokio::test]
    async fn an_address_in_use_is_an_error_that_names_it() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = bind_and_serve(addr, Arc::new(Registry::default()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
