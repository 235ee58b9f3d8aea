//! The metrics endpoint (feature `http`): `GET /metrics` over HTTP/1 with hyper,
//! and an orchestrator's probes (`GET /healthz`, `GET /readyz`). Encoding stays in
//! the core ([`super::encode`]); this is only the transport.
//!
//! Promises: it serves until its task is dropped. A failed accept (EMFILE or ENFILE
//! when the process or the system is out of file descriptors, ECONNABORTED, ENOBUFS)
//! is logged at warn with what to do and retried after a pause: 100 ms, doubling
//! to 5 s while accepts keep failing, back to 100 ms after one succeeds. Bounds that
//! hold before any request is read ([`EndpointConfig`]): at most
//! `max_connections` (16) connections (one idle for a second, that has sent no
//! request or is between requests, is closed to make room for the next; more wait
//! in the listen backlog while every one serves a request), 10 s to
//! send a request's headers. Then, for each request: on a loopback listener a
//! `Host` that is not a loopback name is refused (403: DNS rebinding would let a web
//! page read the metrics); with a token, `/metrics` needs `Authorization: Bearer
//! TOKEN` (401). The probes need neither token nor anything else: `/healthz` is 200
//! while the process serves, `/readyz` 200 when [`EndpointConfig::ready`] says so
//! and 503 with its reason otherwise, and `/uploadz` (when
//! [`EndpointConfig::uploads`] is set) the same for whether uploads are taken.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use prometheus_client::registry::Registry;

use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::places::{Place, Places, accept_error_advice};

use super::{Format, encode_as};

/// The default address of the metrics endpoint: loopback only, port 9464 (the
/// OpenTelemetry Prometheus exporter's). Expose it wider deliberately.
pub const DEFAULT_METRICS_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9464);

/// The pause after a failed accept; it doubles with each failure in a row, up to
/// [`ACCEPT_RETRY_MAX`], and starts again after a connection is accepted.
const ACCEPT_RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between accepts that keep failing.
const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(5);
/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What `/readyz` answers: `Ok` is 200, `Err(reason)` 503 with the reason.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// How the endpoint serves; see the module doc.
#[derive(Clone)]
pub struct EndpointConfig {
    /// Most connections open at once; more wait in the listen backlog. Default 16
    /// (a scraper and a few probes need one each). At least 1.
    pub max_connections: usize,
    /// Refuse a `Host` that is not a loopback name. [`EndpointConfig::for_addr`]
    /// sets it for a loopback address.
    pub loopback_hosts_only: bool,
    /// A bearer token `GET /metrics` must carry; `None`: none.
    pub token: Option<Arc<str>>,
    /// What `/readyz` answers; `None`: 200 while the endpoint serves.
    pub ready: Option<Readiness>,
    /// What `/uploadz` answers (whether uploads are taken now, for an operator to
    /// gate on apart from readiness); `None`: 404.
    pub uploads: Option<Readiness>,
}

impl std::fmt::Debug for EndpointConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointConfig")
            .field("max_connections", &self.max_connections)
            .field("loopback_hosts_only", &self.loopback_hosts_only)
            .field("token", &self.token.as_ref().map(|_| "(not shown)"))
            .field("ready", &self.ready.is_some())
            .field("uploads", &self.uploads.is_some())
            .finish()
    }
}

impl EndpointConfig {
    /// The defaults for an endpoint on `addr`: the Host check when it is loopback,
    /// no token, `/readyz` 200.
    pub fn for_addr(addr: SocketAddr) -> Self {
        EndpointConfig {
            max_connections: 16,
            loopback_hosts_only: addr.ip().is_loopback(),
            token: None,
            ready: None,
            uploads: None,
        }
    }
}

/// Binds `addr` (use [`DEFAULT_METRICS_ADDR`] for loopback:9464) and serves
/// `registry` at `GET /metrics` until the task is dropped. Fails at once if the
/// address cannot be bound.
pub async fn bind_and_serve(addr: SocketAddr, registry: Arc<Registry>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot serve metrics on {addr}: {e}"))
    })?;
    serve(listener, registry).await
}

/// Serves `registry` at `GET /metrics` on `listener` with the defaults for its
/// address ([`EndpointConfig::for_addr`]) until the task is dropped. Never returns:
/// a failed accept is logged and retried after a pause (see the module's promises);
/// the `Result` is kept for callers that spawn it.
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
    let config = EndpointConfig::for_addr(listener.local_addr()?);
    serve_with(listener, registry, config).await
}

/// [`serve`] as `config` says.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    config: EndpointConfig,
) -> std::io::Result<()> {
    serve_accepted(listener, registry, config).await
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
    config: EndpointConfig,
) -> std::io::Result<()> {
    if config.max_connections == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the metrics endpoint's max_connections must be at least 1",
        ));
    }
    let places = Places::new(
        "the metrics endpoint",
        config.max_connections,
        Gauge::default(),
    );
    let config = Arc::new(config);
    let mut pause = ACCEPT_RETRY_FIRST;
    loop {
        // A place first: over the limit a connection waits unread in the backlog,
        // and one that sends nothing is closed to make room (`places.rs`).
        let place = places.take().await;
        match listener.accept().await {
            Ok(stream) => {
                pause = ACCEPT_RETRY_FIRST;
                serve_connection(stream, registry.clone(), config.clone(), place);
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    retry_in = ?pause,
                    "the metrics endpoint cannot accept a connection; {}",
                    accept_error_advice(&e, "the metrics endpoint", "its max_connections")
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(ACCEPT_RETRY_MAX);
            }
        }
    }
}

/// Serves one connection on its own task, holding `place` until it closes.
/// Closed to make room when idle (no request in progress) while every place is
/// held: a probe always finds one, whatever idle connections are open.
fn serve_connection(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    registry: Arc<Registry>,
    config: Arc<EndpointConfig>,
    place: Place,
) {
    let serving = place.serving();
    tokio::spawn(async move {
        let service = hyper::service::service_fn(move |req| {
            let registry = registry.clone();
            let config = config.clone();
            let serving = serving.clone();
            async move {
                serving.started();
                let response = respond(&req, &registry, &config);
                serving.ended();
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        tokio::pin!(conn);
        let ended = tokio::select! {
            ended = conn.as_mut() => ended,
            () = place.closing() => match place.is_idle() {
                true => Ok(()),
                false => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            },
        };
        if let Err(e) = ended {
            tracing::debug!(error = %e, "metrics connection ended with an error");
        }
        drop(place);
    });
}

fn respond<B>(
    req: &hyper::Request<B>,
    registry: &Registry,
    config: &EndpointConfig,
) -> hyper::Response<Full<Bytes>> {
    use hyper::StatusCode;
    let text = |status: StatusCode, body: String| (status, body);
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let (status, body) = if req.method() != hyper::Method::GET {
        text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into())
    } else if config.loopback_hosts_only
        && !crate::access::is_loopback_host(header("host").unwrap_or(""))
    {
        let message = "this endpoint listens on loopback and answers requests addressed to a \
                       loopback name only (localhost, 127.0.0.1, [::1])\n";
        text(StatusCode::FORBIDDEN, message.into())
    } else {
        match req.uri().path() {
            "/healthz" => text(StatusCode::OK, "ok\n".into()),
            "/readyz" => match config.ready.as_ref().map_or(Ok(()), |ready| ready()) {
                Ok(()) => text(StatusCode::OK, "ready\n".into()),
                Err(why) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\n"),
                ),
            },
            "/uploadz" if config.uploads.is_some() => match config.uploads.as_ref().map(|u| u()) {
                Some(Err(why)) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("refusing uploads: {why}\n"),
                ),
                _ => text(StatusCode::OK, "taking uploads\n".into()),
            },
            "/metrics" => match &config.token {
                Some(token) if !crate::access::bearer_matches(header("authorization"), token) => {
                    let message = "the metrics need Authorization: Bearer TOKEN\n";
                    let response = hyper::Response::builder()
                        .status(StatusCode::UNAUTHORIZED)
                        .header(hyper::header::WWW_AUTHENTICATE, "Bearer")
                        .body(Full::new(Bytes::from_static(message.as_bytes())));
                    return response.expect("static response parts are valid");
                }
                _ => {
                    let format = Format::for_accept(header("accept"));
                    let response = hyper::Response::builder()
                        .header(hyper::header::CONTENT_TYPE, format.content_type())
                        .header(hyper::header::VARY, "Accept")
                        .body(Full::new(Bytes::from(encode_as(registry, format))));
                    return response.expect("static response parts are valid");
                }
            },
            _ => text(
                StatusCode::NOT_FOUND,
                "metrics are at /metrics, probes at /healthz and /readyz\n".into(),
            ),
        }
    };
    let response = hyper::Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(body)));
    response.expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{UploadOutcome, WritePath};
    use crate::{Spool, SpoolConfig};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> String {
        get_with(addr, path, "").await
    }

    /// A GET of `path` with `headers` (each line ending in CRLF).
    async fn get_with(addr: SocketAddr, path: &str, headers: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n");
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

        // Prometheus asks for OpenMetrics; curl and promtool get the text format.
        let prometheus = "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2\r\n";
        let open = get_with(addr, "/metrics", prometheus).await;
        assert!(open.contains(crate::metrics::CONTENT_TYPE), "{open}");
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert!(open.contains("# TYPE spool_uploads counter\n"), "{open}");
        let response = get(addr, "/metrics").await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(
            response.contains(super::super::TEXT_CONTENT_TYPE),
            "{response}"
        );
        assert!(
            !response.contains("# EOF") && !response.contains("# UNIT"),
            "{response}"
        );
        assert!(
            response.contains("# TYPE spool_uploads_total counter\n"),
            "{response}"
        );
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
        let config = EndpointConfig::for_addr(DEFAULT_METRICS_ADDR);
        let server = tokio::spawn(serve_accepted(
            Scripted(accepts),
            Arc::new(Registry::default()),
            config,
        ));

        let request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
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
        let e = std::io::Error::from_raw_os_error(24);
        let advice = accept_error_advice(&e, "the metrics endpoint", "its max_connections");
        assert!(advice.contains("LimitNOFILE"), "{advice}");
        if cfg!(target_os = "linux") {
            assert!(
                advice.contains("open files") && !advice.contains("unknown"),
                "{advice}"
            );
        }
    }

    /// One request with `headers` to an endpoint served with `config` over an
    /// in-memory stream: the answer.
    async fn ask(config: EndpointConfig, path: &str, headers: &str) -> String {
        let (script, accepts) = tokio::sync::mpsc::unbounded_channel();
        let (mut client, server_end) = tokio::io::duplex(1 << 16);
        script.send(Ok(server_end)).unwrap();
        let registry = Arc::new(Registry::default());
        let server = tokio::spawn(serve_accepted(Scripted(accepts), registry, config));
        let request = format!("GET {path} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n");
        client.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        client.read_to_string(&mut response).await.unwrap();
        server.abort();
        response
    }

    #[tokio::test]
    async fn a_loopback_endpoint_refuses_other_host_names() {
        // Found by review (L1): the endpoint checked no Host, so a page whose name
        // resolves to 127.0.0.1 (DNS rebinding) could read the metrics.
        let config = || EndpointConfig::for_addr(DEFAULT_METRICS_ADDR);
        let rebound = ask(config(), "/metrics", "Host: rebound.example:9464\r\n").await;
        assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
        let local = ask(config(), "/metrics", "Host: 127.0.0.1:9464\r\n").await;
        assert!(local.starts_with("HTTP/1.1 200"), "{local}");
        let wide = EndpointConfig::for_addr("0.0.0.0:9464".parse().unwrap());
        let named = ask(wide, "/metrics", "Host: relay.internal:9464\r\n").await;
        assert!(named.starts_with("HTTP/1.1 200"), "{named}");
    }

    #[tokio::test]
    async fn with_a_token_the_metrics_need_it_and_the_probes_do_not() {
        let config = || EndpointConfig {
            token: Some("0123456789abcdef0123456789abcdef".into()),
            ready: Some(Arc::new(|| Err("the spool is full".to_string()))),
            ..EndpointConfig::for_addr("0.0.0.0:9464".parse().unwrap())
        };
        let host = "Host: relay:9464\r\n";
        let without = ask(config(), "/metrics", host).await;
        assert!(without.starts_with("HTTP/1.1 401"), "{without}");
        let with = format!("{host}Authorization: Bearer 0123456789abcdef0123456789abcdef\r\n");
        assert!(
            ask(config(), "/metrics", &with)
                .await
                .starts_with("HTTP/1.1 200")
        );
        assert!(
            ask(config(), "/healthz", host)
                .await
                .starts_with("HTTP/1.1 200")
        );
        let ready = ask(config(), "/readyz", host).await;
        assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
        assert!(ready.contains("not ready: the spool is full"), "{ready}");
        // /uploadz is its own probe: 404 unless asked for, then what it says.
        let absent = ask(config(), "/uploadz", host).await;
        assert!(absent.starts_with("HTTP/1.1 404"), "{absent}");
        let refusing = EndpointConfig {
            uploads: Some(Arc::new(|| Err("the disk is read-only".to_string()))),
            ..config()
        };
        let uploads = ask(refusing, "/uploadz", host).await;
        assert!(uploads.starts_with("HTTP/1.1 503"), "{uploads}");
        assert!(
            uploads.contains("refusing uploads: the disk is read-only"),
            "{uploads}"
        );
        let taking = EndpointConfig {
            uploads: Some(Arc::new(|| Ok(()))),
            ..config()
        };
        assert!(
            ask(taking, "/uploadz", host)
                .await
                .contains("taking uploads")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_connections_at_the_cap_make_room_for_a_probe() {
        // Found by review (52/9): 16 connections that sent nothing kept /healthz and
        // /readyz out for their whole header timeout, so the kubelet's liveness probe
        // failed and it restarted a healthy relay.
        let (script, accepts) = tokio::sync::mpsc::unbounded_channel();
        let config = EndpointConfig::for_addr(DEFAULT_METRICS_ADDR);
        let mut idle = Vec::new();
        for _ in 0..config.max_connections {
            let (client, server_end) = tokio::io::duplex(1 << 16);
            script.send(Ok(server_end)).unwrap();
            idle.push(client);
        }
        let (mut probe, probe_end) = tokio::io::duplex(1 << 16);
        script.send(Ok(probe_end)).unwrap();
        let registry = Arc::new(Registry::default());
        let server = tokio::spawn(serve_accepted(Scripted(accepts), registry, config));
        let request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        probe.write_all(request.as_bytes()).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut head = [0u8; 12];
        let answered = tokio::time::timeout(HEADER_READ_TIMEOUT / 2, probe.read_exact(&mut head));
        assert!(
            answered.await.is_ok(),
            "the probe waited behind idle connections"
        );
        assert_eq!(&head, b"HTTP/1.1 200");
        let waited = started.elapsed();
        assert!(
            waited <= crate::places::IDLE_BEFORE_CLOSING * 2,
            "{waited:?}"
        );
        // Idle connections were closed for it (and for the place the accept loop
        // takes before its next accept); not all of them.
        let mut closed = 0;
        for client in &mut idle {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_millis(1), client.read(&mut byte));
            if let Ok(Ok(0)) = read.await {
                closed += 1;
            }
        }
        assert!((1..=2).contains(&closed), "{closed} closed");
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
