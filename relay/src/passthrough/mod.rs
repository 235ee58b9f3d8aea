//! Pass-through: every request to the upstream's bucket that is not an upload
//! (object metadata and bytes, lists, deletes, patches, copies, compose; the XML
//! API's `GET`, `HEAD`, list and `DELETE`) goes to the upstream, and its answer
//! comes back as the upstream gave it.
//!
//! What it owns: which requests pass through, and the path the upstream is asked
//! for (`target.rs`: [`plan`], built from the checked route, never the path as
//! sent), and the two ways to the upstream ([`PassThrough`]):
//!
//! | upstream | how | what |
//! |---|---|---|
//! | Cloud Storage, or an emulator (`gs://` with `--endpoint`) | `http.rs`: the request forwarded over HTTP(S) with the relay's credentials (none to an emulator) | every route: the status, every header that is not hop-by-hop, and the body, streamed both ways |
//! | any `object_store` (`file://`) | `store.rs`: answered through the `ObjectStore` trait in Cloud Storage's JSON shapes | object metadata, bytes (with `Range`), XML `GET`/`HEAD`, JSON and XML lists, deletes; 501 naming the route for the rest |
//! | none ([`PassThrough::off`], the library's default) | | 501, as before: the relay serves uploads only |
//!
//! What it promises:
//!
//! - A response body is never held whole: it streams from the upstream (or the
//!   store) as the client reads it. A request body (metadata, compose and rewrite
//!   requests only) is at most 64 KiB, read before it is forwarded.
//! - The upstream's failures pass through as they are (a 503 keeps its
//!   `Retry-After`); an upstream that cannot be reached is 503 naming it.
//! - Another bucket is 404, whatever the route; a copy or rewrite into another
//!   bucket too. Nothing but the bucket's objects (and its own resource) is asked
//!   for with the relay's credentials (`target.rs`).
//! - The relay's own token (`Authorization`) never reaches the upstream: the relay
//!   reads with its own credentials, so whoever may write through it may read the
//!   bucket through it (docs/relay.md).

#[cfg(feature = "http-upstream")]
mod http;
mod store;
mod target;

pub(crate) use target::{Plan, plan};

use std::sync::Arc;

use ::http::{Method, Uri};
use bytes::Bytes;
use fake_gcs::wire::{Api, Query, Rejection, Route};
use http_body_util::BodyExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use object_store::ObjectStore;
#[cfg(feature = "http-upstream")]
use object_store::gcp::GcpCredentialProvider;

/// The error a streamed response body may end with.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every answer of the relay: small ones whole, passed-through ones
/// streamed.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, BoxError>;

/// `bytes` as a [`ResponseBody`].
pub(crate) fn whole(bytes: Bytes) -> ResponseBody {
    http_body_util::Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// `body`, holding `guard` until it is sent or dropped: a read's slot, a merged
/// list's share of the merge budget.
pub(crate) fn holding(body: ResponseBody, guard: impl Send + Unpin + 'static) -> ResponseBody {
    Holding {
        body,
        _guard: guard,
    }
    .boxed_unsync()
}

struct Holding<G> {
    body: ResponseBody,
    _guard: G,
}

impl<G: Send + Unpin + 'static> hyper::body::Body for Holding<G> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        std::pin::Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Where requests that are not uploads go. Cheap to clone. The default is
/// [`PassThrough::off`].
#[derive(Clone, Default)]
pub struct PassThrough {
    way: Way,
}

#[derive(Clone, Default)]
enum Way {
    #[default]
    Off,
    #[cfg(feature = "http-upstream")]
    Http(Arc<http::HttpUpstream>),
    Store(Arc<dyn ObjectStore>),
    Unavailable(Arc<str>),
}

impl PassThrough {
    /// Nothing passes through: reads, lists and deletes are answered 501.
    pub fn off() -> Self {
        Self::default()
    }

    /// Forwards (feature `http-upstream`) to the Cloud Storage endpoint `endpoint` (`https://storage.googleapis.com`,
    /// or an emulator's `http://host:port`), adding a bearer token from
    /// `credentials` when given (none for an emulator).
    /// The upstream has [`DEFAULT_UPSTREAM_TIMEOUT`] to begin each answer and
    /// between its pieces ([`PassThrough::http_with_timeout`]).
    #[cfg(feature = "http-upstream")]
    pub fn http(
        endpoint: &str,
        credentials: Option<GcpCredentialProvider>,
    ) -> Result<Self, PassThroughError> {
        Self::http_with_timeout(endpoint, credentials, DEFAULT_UPSTREAM_TIMEOUT)
    }

    /// [`PassThrough::http`], where the upstream has `upstream_timeout` to begin
    /// an answer (from the request's start) and between two pieces of its body: an
    /// answer that does not begin in time is 503 (with `Retry-After`), one that
    /// stalls midway is cut off, so a hanging upstream holds no connection of the
    /// relay's longer than that. Not zero.
    #[cfg(feature = "http-upstream")]
    pub fn http_with_timeout(
        endpoint: &str,
        credentials: Option<GcpCredentialProvider>,
        upstream_timeout: std::time::Duration,
    ) -> Result<Self, PassThroughError> {
        let upstream = http::HttpUpstream::new(endpoint, credentials, upstream_timeout)?;
        Ok(Self {
            way: Way::Http(Arc::new(upstream)),
        })
    }

    /// Answers from `store` (a `file://` upstream) in Cloud Storage's shapes.
    pub fn store(store: Arc<dyn ObjectStore>) -> Self {
        Self {
            way: Way::Store(store),
        }
    }

    /// Every request that would pass through is answered 501 saying `why`.
    pub fn unavailable(why: impl Into<String>) -> Self {
        Self {
            way: Way::Unavailable(why.into().into()),
        }
    }

    /// Whether anything passes through.
    pub fn is_on(&self) -> bool {
        !matches!(self.way, Way::Off)
    }

    /// Whether every route goes upstream as it is (an HTTP upstream), the bucket's
    /// own resource included.
    fn forwards_everything(&self) -> bool {
        match self.way {
            #[cfg(feature = "http-upstream")]
            Way::Http(_) => true,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match &self.way {
            Way::Off => "off".into(),
            #[cfg(feature = "http-upstream")]
            Way::Http(upstream) => format!("http {}", upstream.endpoint()),
            Way::Store(store) => format!("store {store}"),
            Way::Unavailable(why) => format!("unavailable: {why}"),
        }
    }
}

impl std::fmt::Debug for PassThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PassThrough({})", self.describe())
    }
}

/// How long an HTTP upstream has to begin an answer, and between two pieces of
/// it, by default ([`PassThrough::http`]).
pub const DEFAULT_UPSTREAM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// What the relay's first log line says: `off`, `http ENDPOINT`, `store STORE` or
/// `unavailable: WHY`.
impl std::fmt::Display for PassThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl PartialEq for PassThrough {
    fn eq(&self, other: &Self) -> bool {
        match (&self.way, &other.way) {
            (Way::Store(a), Way::Store(b)) => Arc::ptr_eq(a, b),
            _ => self.describe() == other.describe(),
        }
    }
}

impl Eq for PassThrough {}

/// An object upstream, as [`PassThrough::live_object`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiveObject {
    pub(crate) size: u64,
    /// Its crc32c (base64, as the JSON API gives it), when the upstream keeps one.
    pub(crate) crc32c: Option<String>,
    /// Its generation, when the upstream has generations.
    pub(crate) generation: Option<i64>,
}

/// A [`PassThrough`] that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PassThroughError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("pass-through endpoint {endpoint:?} is not an http:// or https:// URL")]
    BadEndpoint {
        /// The endpoint given.
        endpoint: String,
    },
    /// The upstream timeout is zero.
    #[error("pass-through upstream timeout (--upstream-timeout) must be longer than 0")]
    ZeroTimeout,
    /// The HTTP client could not be built.
    #[cfg(feature = "http-upstream")]
    #[error("cannot build the pass-through HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// A request that passes through, as the store-backed upstream tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// An object's JSON resource.
    Metadata,
    /// An object's bytes (JSON `alt=media`, XML `GET`).
    Media,
    /// XML `HEAD`: an object's headers.
    Head,
    /// A JSON or XML list.
    List(Api),
    /// A JSON or XML `DELETE` of an object.
    Delete(Api),
    /// Anything else on the bucket (patch, update, copy, rewrite, compose, the
    /// bucket's resource).
    Other,
}

impl Op {
    /// The route's name in a 501.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Metadata => "object metadata GET",
            Op::Media => "object media GET",
            Op::Head => "object HEAD",
            Op::List(Api::Json) => "JSON object list",
            Op::List(Api::Xml) => "XML object list",
            Op::Delete(_) => "object DELETE",
            Op::Other => "this request",
        }
    }
}

/// One request passed through, its body not yet read.
// A store reads neither the method, the URI nor the body.
#[cfg_attr(not(feature = "http-upstream"), allow(dead_code))]
pub(crate) struct Forward<'a> {
    pub(crate) op: Op,
    /// The upstream's path, built from the checked route ([`Upstream::path`]).
    pub(crate) path: &'a str,
    pub(crate) route: &'a Route,
    pub(crate) method: &'a ::http::Method,
    pub(crate) uri: &'a ::http::Uri,
    pub(crate) headers: &'a ::http::HeaderMap,
    pub(crate) query: &'a Query,
    /// The request's body, read only by requests that carry one.
    pub(crate) body: crate::body::Pieces,
    /// `http://host:port` as the client addressed the relay.
    pub(crate) base: &'a str,
}

/// Why a request could not be passed through.
// A store is never unreachable and takes no credentials.
#[cfg_attr(not(feature = "http-upstream"), allow(dead_code))]
#[derive(Debug, thiserror::Error)]
pub(crate) enum PassError {
    /// The upstream did not answer (refused, reset, timed out before its head).
    #[error("the upstream {upstream} cannot be reached: {reason}")]
    Unreachable {
        /// The upstream's endpoint.
        upstream: String,
        /// What failed.
        reason: String,
    },
    /// The relay's credentials for the upstream could not be had.
    #[error("spool-relay has no credentials for the upstream {upstream}: {reason}")]
    Credentials {
        /// The upstream's endpoint.
        upstream: String,
        /// What failed.
        reason: String,
    },
    /// This upstream does not serve this route.
    #[error(
        "spool-relay does not pass {route} through to {upstream}: {why}. Send it to the \
         store directly."
    )]
    NotServed {
        /// The route.
        route: &'static str,
        /// The upstream.
        upstream: String,
        /// Why.
        why: String,
    },
    /// The request's own body or query cannot be passed on.
    #[error("the request cannot be passed on ({})", .0.http_status())]
    Refused(Rejection),
    /// The store answered with an error.
    #[error("the store failed: {0}")]
    Store(#[from] object_store::Error),
}

impl PassError {
    /// The answer to the client. The upstream's address and what its client said are
    /// the operator's: they go to the log (in the request's span), and the client is
    /// told what to do.
    pub(crate) fn rejection(self) -> Rejection {
        use crate::answer::SEE_THE_LOG;
        match self {
            PassError::Unreachable { .. } => {
                tracing::warn!(target: "spool_relay", error = %self, "the upstream cannot be reached");
                Rejection::status(
                    503,
                    format!(
                        "spool-relay cannot reach its upstream now; retry the request. {SEE_THE_LOG}"
                    ),
                )
            }
            PassError::Credentials { .. } => {
                tracing::warn!(target: "spool_relay", error = %self, "no credentials for the upstream");
                Rejection::status(
                    503,
                    format!(
                        "spool-relay has no credentials for its upstream now; retry the \
                         request. {SEE_THE_LOG}"
                    ),
                )
            }
            PassError::NotServed { .. } => Rejection::status(501, self.to_string()),
            PassError::Refused(rejection) => rejection,
            PassError::Store(object_store::Error::NotFound { .. }) => {
                Rejection::status(404, "No such object.")
            }
            PassError::Store(object_store::Error::InvalidPath { .. }) => {
                Rejection::invalid(self.to_string())
            }
            PassError::Store(_) => {
                tracing::warn!(target: "spool_relay", error = %self, "the upstream store failed");
                Rejection::status(
                    503,
                    format!("The upstream store failed; retry the request. {SEE_THE_LOG}"),
                )
            }
        }
    }
}

impl PassThrough {
    /// Whether the upstream holds the bucket `bucket`, asked with the relay's own
    /// credentials: `Ok(false)` when it answers 404; `Ok(true)` when it answers 200,
    /// or cannot tell (a store has no buckets; nothing passes through); `Err` when
    /// it cannot be asked now.
    pub async fn bucket_exists(&self, bucket: &str) -> Result<bool, String> {
        match &self.way {
            #[cfg(feature = "http-upstream")]
            Way::Http(upstream) => upstream.bucket_exists(bucket).await,
            Way::Store(_) | Way::Off | Way::Unavailable(_) => Ok(true),
        }
    }

    /// The live object `name` of `bucket` upstream, as a pending delete checks it
    /// (`spooled/deletes.rs`): its size, crc32c (none from a store, which keeps no
    /// checksum) and generation; `None` when there is none; `Err` when the upstream
    /// cannot be asked now.
    pub(crate) async fn live_object(
        &self,
        bucket: &str,
        name: &str,
    ) -> Result<Option<LiveObject>, String> {
        match &self.way {
            #[cfg(feature = "http-upstream")]
            Way::Http(upstream) => upstream.live_object(bucket, name).await,
            Way::Store(store) => {
                use object_store::ObjectStoreExt as _;
                let path = object_store::path::Path::from(name);
                match store.head(&path).await {
                    Ok(meta) => Ok(Some(LiveObject {
                        size: meta.size,
                        crc32c: None,
                        generation: None,
                    })),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e.to_string()),
                }
            }
            Way::Off | Way::Unavailable(_) => Err("nothing passes through".into()),
        }
    }

    /// Deletes generation `generation` of `name` in `bucket` upstream (any
    /// generation when `None`: a store has none); `Ok` when it is gone or was
    /// replaced meanwhile (404, 412), `Err` when the upstream cannot say now.
    pub(crate) async fn delete_live(
        &self,
        bucket: &str,
        name: &str,
        generation: Option<i64>,
    ) -> Result<(), String> {
        match &self.way {
            #[cfg(feature = "http-upstream")]
            Way::Http(upstream) => upstream.delete_live(bucket, name, generation).await,
            Way::Store(store) => {
                use object_store::ObjectStoreExt as _;
                let path = object_store::path::Path::from(name);
                match store.delete(&path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(e.to_string()),
                }
            }
            Way::Off | Way::Unavailable(_) => Err("nothing passes through".into()),
        }
    }

    /// Passes `forward` to the upstream; its answer, streamed.
    pub(crate) async fn serve(
        &self,
        forward: Forward<'_>,
    ) -> Result<::http::Response<ResponseBody>, PassError> {
        match &self.way {
            #[cfg(feature = "http-upstream")]
            Way::Http(upstream) => upstream.forward(forward).await,
            Way::Store(store) => store::answer(store.as_ref(), forward).await,
            Way::Unavailable(why) => Err(PassError::NotServed {
                route: forward.op.name(),
                upstream: "the upstream".into(),
                why: why.to_string(),
            }),
            Way::Off => Err(PassError::NotServed {
                route: forward.op.name(),
                upstream: "the upstream".into(),
                why: "pass-through is off".into(),
            }),
        }
    }
}

/// The path and query an upstream is asked for `method uri` by a relay writing to
/// `bucket` that forwards every route (an HTTP upstream); `None` when the relay
/// sends it nowhere (it serves the request itself, or refuses it). The property
/// `relay/tests/paths.rs` and the fuzz target `upstream_path` hold it to: whatever
/// the path, what is sent names only `bucket`'s own resources.
pub fn upstream_request(bucket: &str, method: &Method, uri: &Uri) -> Option<String> {
    let query = Query::parse(uri.query());
    let route = Route::parse(method, uri, &query);
    let everything = PassThrough {
        way: Way::Unavailable("a plan only".into()),
    };
    match target::plan_for(&everything, true, method, &route, uri.path(), bucket) {
        Plan::Forward(upstream) => Some(match uri.query() {
            Some(query) => format!("{}?{query}", upstream.path),
            None => upstream.path,
        }),
        Plan::Serve | Plan::OtherBucket | Plan::Refused(_) => None,
    }
}
