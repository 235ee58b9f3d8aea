//! The metrics endpoint (feature `http`): `GET /metrics` over HTTP/1 with hyper.
//! Encoding stays in the core ([`super::encode`]); this is only the transport.
//!
//! Promises: it serves until its task is dropped. A failed accept (EMFILE or ENFILE
//! when the process or the system is out of file descriptors, ECONNABORTED, ENOBUFS)
//! is logged at warn with what to do and retried after a pause: 100 ms, doubling
//! to 5 s while accepts keep failing, back to 100 ms after one succeeds. A client
//! gets 10 s to send its request's headers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use prometheus_client::registry::Registry;

use tokio::io::{AsyncRead, AsyncWrite};

use super::{CONTENT_TYPE, encode};

/// The default address of the metrics endpoint: loopback only, port 9464 (the
/// OpenTelemetry Prometheus exporter's). Expose it wider deliberately.
pub const DEFAULT_METRICS_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9464);

/// The pause after a failed accept; it doubles with each failure in a row, up to
/// [`ACCEPT_RETRY_MAX`], and starts again after a connection is accepted.
const ACCEPT_RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between accepts that keep failing.
const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(5);

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
/// Never returns: a failed accept is logged and retried after a pause (see the
/// module's promises); the `Result` is kept for callers that spawn it.
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
    serve_accepted(listener, registry).await
}

/// Where the endpoint's connections come from: a TCP listener, or a test's streams.
trait Acceptor: Send {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&mut self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Acceptor for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&mut self) -> std::io::Result<Self::Stream> {
        tokio::net::TcpListener::accept(self)
            .await
            .map(|(stream, _)| stream)
    }
}

async fn serve_accepted(
    mut listener: impl Acceptor,
    registry: Arc<Registry>,
) -> std::io::Result<()> {
    let mut pause = ACCEPT_RETRY_FIRST;
    loop {
        match listener.accept().await {
            Ok(stream) => {
                pause = ACCEPT_RETRY_FIRST;
                serve_connection(stream, registry.clone());
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    retry_in = ?pause,
                    "the metrics endpoint cannot accept a connection; {}",
                    accept_error_advice(&e)
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(ACCEPT_RETRY_MAX);
            }
        }
    }
}

/// What an operator can do about a failed accept.
fn accept_error_advice(e: &std::io::Error) -> String {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    match e.raw_os_error() {
        Some(EMFILE) => format!(
            "the process has run out of file descriptors ({}): raise it (LimitNOFILE= in \
             the systemd unit, ulimit -n) or look for a descriptor leak",
            open_files_limit()
        ),
        Some(ENFILE) => {
            "the system has run out of file descriptors (fs.file-max): see what holds them".into()
        }
        _ => "retrying".into(),
    }
}

/// The process's open-file limit as `/proc/self/limits` gives it (Linux), or that
/// it is unknown.
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

/// Serves one connection on its own task.
fn serve_connection(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    registry: Arc<Registry>,
) {
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

    /// Accepts what the test sends: errors, or in-memory streams.
    struct Scripted(tokio::sync::mpsc::UnboundedReceiver<std::io::Result<tokio::io::DuplexStream>>);

    impl Acceptor for Scripted {
        type Stream = tokio::io::DuplexStream;
        async fn accept(&mut self) -> std::io::Result<Self::Stream> {
            match self.0.recv().await {
                Some(next) => next,
                None => std::future::pending().await,
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn accept_errors_are_retried_after_a_pause_and_the_endpoint_keeps_serving() {
        // What broke: the first failed accept (EMFILE when the process ran out of
        // file descriptors, ECONNABORTED) ended the endpoint for good, unnoticed:
        // Prometheus then saw the target down until the service restarted.
        let (script, accepts) = tokio::sync::mpsc::unbounded_channel();
        let emfile = || std::io::Error::from_raw_os_error(24);
        for _ in 0..3 {
            script.send(Err(emfile())).unwrap();
        }
        let (mut client, server_end) = tokio::io::duplex(1 << 16);
        script.send(Ok(server_end)).unwrap();
        let started = tokio::time::Instant::now();
        let server = tokio::spawn(serve_accepted(
            Scripted(accepts),
            Arc::new(Registry::default()),
        ));

        let request = "GET /metrics HTTP/1.1\r\nHost: spool\r\nConnection: close\r\n\r\n";
        client.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        client.read_to_string(&mut response).await.unwrap();
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "no answer after accept errors: {response:?}"
        );
        assert!(!server.is_finished(), "the endpoint stopped serving");
        // Three failures: pauses of 100, 200 and 400 ms, not a busy loop.
        let paused = ACCEPT_RETRY_FIRST * (1 + 2 + 4);
        assert!(started.elapsed() >= paused, "{:?}", started.elapsed());
        server.abort();
    }

    #[test]
    fn running_out_of_file_descriptors_names_the_limit_and_the_fix() {
        let advice = accept_error_advice(&std::io::Error::from_raw_os_error(24));
        assert!(advice.contains("LimitNOFILE"), "{advice}");
        if cfg!(target_os = "linux") {
            assert!(
                advice.contains("open files") && !advice.contains("unknown"),
                "{advice}"
            );
        }
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
