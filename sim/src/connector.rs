//! `object_store` HTTP transport over turmoil's simulated TCP, and helpers that build
//! the GCS store the spool writes through, inside turmoil or against a real port.
//!
//! [`TurmoilConnector`] is an [`HttpConnector`]: HTTP/1.1 with
//! `hyper::client::conn::http1` on [`turmoil::net::TcpStream`], a keep-alive pool of
//! at most [`TurmoilConnector::max_idle`] idle connections (default 8), and no
//! timeout of its own: the caller's timeout (the spool's `Remote::put_if_absent`)
//! bounds a request, and dropping the request future drops its connection.
//!
//! A request that carries an [`Exchange`] in its extensions (`object_store`'s
//! `PutOptions::extensions` reach the HTTP request) gets what the transport saw
//! recorded in it: whether a connection was up, and the response's status and
//! headers, which `object_store` does not return.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use http::header::HOST;
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpRequestBody,
    HttpResponse, HttpResponseBody, HttpService,
};
use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
use object_store::{ClientOptions, ObjectStore, StaticCredentialProvider};

/// What the transport saw of one request, for a caller that needs more than
/// `object_store` returns. Cheap to clone; clones share what is recorded.
#[derive(Debug, Clone, Default)]
pub struct Exchange(Arc<Mutex<Seen>>);

/// What an [`Exchange`] recorded.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    /// A connection to the server was up (dialled, or taken from the pool): the
    /// request may have reached the server.
    pub connected: bool,
    /// The response's status, if a response came.
    pub status: Option<u16>,
    /// The response's headers.
    pub headers: HeaderMap,
}

impl Seen {
    /// The response header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<String> {
        let value = self.headers.get(name)?;
        value.to_str().ok().map(str::to_string)
    }
}

impl Exchange {
    /// What was recorded so far.
    pub fn seen(&self) -> Seen {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection is up for the request.
    pub(crate) fn connected(&self) {
        self.lock().connected = true;
    }

    /// The response's head arrived.
    pub(crate) fn answered(&self, status: StatusCode, headers: &HeaderMap) {
        let mut seen = self.lock();
        seen.status = Some(status.as_u16());
        seen.headers = headers.clone();
    }
}

/// Builds [`TurmoilHttp`] clients for `object_store`.
#[derive(Debug, Clone, Copy)]
pub struct TurmoilConnector {
    /// Idle keep-alive connections kept per client; the oldest is closed first.
    /// Default 8; 0 disables reuse.
    pub max_idle: usize,
}

impl Default for TurmoilConnector {
    fn default() -> Self {
        Self { max_idle: 8 }
    }
}

impl HttpConnector for TurmoilConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(TurmoilHttp::new(self.max_idle)))
    }
}

/// An HTTP/1.1 client over turmoil TCP, usable directly (it is an
/// [`HttpService`]) to send raw requests inside a simulation.
#[derive(Debug, Clone)]
pub struct TurmoilHttp {
    pool: Arc<Mutex<Pool>>,
}

#[derive(Debug)]
struct Pool {
    idle: VecDeque<(String, SendRequest<HttpRequestBody>)>,
    max_idle: usize,
}

impl TurmoilHttp {
    /// A client keeping at most `max_idle` idle connections.
    pub fn new(max_idle: usize) -> Self {
        Self {
            pool: Arc::new(Mutex::new(Pool {
                idle: VecDeque::new(),
                max_idle,
            })),
        }
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection to `authority` that is ready for a request. Closed ones
    /// are discarded; busy ones (still reading a response body) are kept.
    fn checkout(&self, authority: &str) -> Option<SendRequest<HttpRequestBody>> {
        let mut pool = self.pool();
        pool.idle.retain(|(_, sender)| !sender.is_closed());
        let at = pool
            .idle
            .iter()
            .position(|(a, sender)| a == authority && sender.is_ready())?;
        pool.idle.remove(at).map(|(_, sender)| sender)
    }

    fn checkin(&self, authority: String, sender: SendRequest<HttpRequestBody>) {
        let mut pool = self.pool();
        if pool.max_idle == 0 {
            return;
        }
        while pool.idle.len() >= pool.max_idle {
            pool.idle.pop_front();
        }
        pool.idle.push_back((authority, sender));
    }

    async fn dial(&self, authority: &str) -> Result<SendRequest<HttpRequestBody>, HttpError> {
        let (host, port) = split_authority(authority)?;
        let stream = turmoil::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| HttpError::new(HttpErrorKind::Connect, e))?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| HttpError::new(HttpErrorKind::Connect, e))?;
        let peer = authority.to_string();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(target: "sim::connector", peer, "connection ended: {e}");
            }
        });
        Ok(sender)
    }
}

fn split_authority(authority: &str) -> Result<(&str, u16), HttpError> {
    let invalid = || {
        HttpError::new(
            HttpErrorKind::Connect,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("no host:port in {authority:?}"),
            ),
        )
    };
    match authority.rsplit_once(':') {
        Some((host, port)) => Ok((host, port.parse().map_err(|_| invalid())?)),
        None if !authority.is_empty() => Ok((authority, 80)),
        None => Err(invalid()),
    }
}

/// Maps a hyper client error to the kind `object_store` retries on.
fn map_hyper_error(e: hyper::Error) -> HttpError {
    HttpError::new(hyper_error_kind(&e), e)
}

fn hyper_error_kind(e: &hyper::Error) -> HttpErrorKind {
    if e.is_timeout() {
        HttpErrorKind::Timeout
    } else if e.is_incomplete_message() {
        // The connection closed before the response was complete.
        HttpErrorKind::Interrupted
    } else if e.is_canceled() || e.is_closed() || e.is_body_write_aborted() || e.is_user() {
        HttpErrorKind::Request
    } else if e.is_parse() || e.is_parse_status() || e.is_parse_too_large() {
        HttpErrorKind::Decode
    } else {
        match io_error_kind(e) {
            Some(
                std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof,
            ) => HttpErrorKind::Interrupted,
            _ => HttpErrorKind::Request,
        }
    }
}

fn io_error_kind(e: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = s.source();
    }
    None
}

#[async_trait::async_trait]
impl HttpService for TurmoilHttp {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let (mut parts, body) = req.into_parts();
        let authority = parts
            .uri
            .authority()
            .map(|a| a.as_str().to_string())
            .ok_or_else(|| {
                HttpError::new(
                    HttpErrorKind::Request,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("request URI {} has no authority", parts.uri),
                    ),
                )
            })?;
        // HTTP/1.1 origin-form and a Host header: hyper's low-level client sends the
        // request line as given.
        let origin: Uri = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|e| HttpError::new(HttpErrorKind::Request, e))?;
        parts.uri = origin;
        let host = HeaderValue::from_str(&authority)
            .map_err(|e| HttpError::new(HttpErrorKind::Request, e))?;
        parts.headers.insert(HOST, host);

        let exchange = parts.extensions.get::<Exchange>().cloned();
        let mut sender = match self.checkout(&authority) {
            Some(sender) => sender,
            None => self.dial(&authority).await?,
        };
        if let Some(exchange) = &exchange {
            exchange.connected();
        }
        let response = sender
            .send_request(http::Request::from_parts(parts, body))
            .await
            .map_err(map_hyper_error)?;
        if let Some(exchange) = &exchange {
            exchange.answered(response.status(), response.headers());
        }
        // Back to the pool now; it becomes ready again once this body is read.
        self.checkin(authority, sender);
        let (parts, incoming) = response.into_parts();
        // A body that breaks off is an interrupted response, whatever hyper calls it.
        let body = incoming.map_err(|e| {
            let kind = match hyper_error_kind(&e) {
                HttpErrorKind::Request => HttpErrorKind::Interrupted,
                kind => kind,
            };
            HttpError::new(kind, e)
        });
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
    }
}

/// `object_store`'s own retries off: the spool retries, with its own clock and
/// seeded jitter.
fn no_client_retries() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 0,
        ..Default::default()
    }
}

fn empty_bearer() -> Arc<StaticCredentialProvider<GcpCredential>> {
    Arc::new(StaticCredentialProvider::new(GcpCredential {
        bearer: String::new(),
    }))
}

/// The GCS store the spool writes through, inside turmoil: `base_url` such as
/// `http://gcs:4443` (a turmoil host name), no credentials, `object_store`'s own
/// retries off, transport [`TurmoilConnector`] with its default pool.
pub fn gcs_store(base_url: &str, bucket: &str) -> object_store::Result<Arc<dyn ObjectStore>> {
    gcs_store_over(base_url, bucket, TurmoilConnector::default())
}

/// [`gcs_store`] over `connector` (another pool size, say).
pub fn gcs_store_over(
    base_url: &str,
    bucket: &str,
    connector: TurmoilConnector,
) -> object_store::Result<Arc<dyn ObjectStore>> {
    let store = GoogleCloudStorageBuilder::new()
        .with_bucket_name(bucket)
        .with_base_url(base_url)
        .with_credentials(empty_bearer())
        .with_retry(no_client_retries())
        .with_http_connector(connector)
        .build()?;
    Ok(Arc::new(store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(split_authority("gcs:4443").unwrap(), ("gcs", 4443));
        assert_eq!(split_authority("gcs").unwrap(), ("gcs", 80));
        assert!(split_authority("gcs:x").is_err());
    }
}
