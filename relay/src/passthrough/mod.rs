//! Pass-through: every request to the upstream's bucket that is not an upload
//! (object metadata and bytes, lists, deletes, patches, copies, compose; the XML
//! API's `GET`, `HEAD`, list and `DELETE`) goes to the upstream, and its answer
//! comes back as the upstream gave it.
//!
//! What it owns: which requests pass through ([`plan`]), and the two ways to the
//! upstream ([`PassThrough`]):
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
//! - Another bucket is 404, whatever the route.
//! - The relay's own token (`Authorization`) never reaches the upstream: the relay
//!   reads with its own credentials, so whoever may write through it may read the
//!   bucket through it (docs/relay.md).

#[cfg(feature = "http-upstream")]
mod http;
mod store;

use std::sync::Arc;

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
    #[cfg(feature = "http-upstream")]
    pub fn http(
        endpoint: &str,
        credentials: Option<GcpCredentialProvider>,
    ) -> Result<Self, PassThroughError> {
        let upstream = http::HttpUpstream::new(endpoint, credentials)?;
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

/// A [`PassThrough`] that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PassThroughError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("pass-through endpoint {endpoint:?} is not an http:// or https:// URL")]
    BadEndpoint {
        /// The endpoint given.
        endpoint: String,
    },
    /// The HTTP client could not be built.
    #[cfg(feature = "http-upstream")]
    #[error("cannot build the pass-through HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// What the relay does with a request, by its route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Not a pass-through route: the handler serves it.
    Serve,
    /// A pass-through route on another bucket than the upstream's: 404.
    OtherBucket,
    /// Passed through to the upstream.
    Forward(Op),
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

/// What `pass_through` does with `route` (`path` as sent) for a relay writing to
/// `bucket`.
pub(crate) fn plan(pass_through: &PassThrough, route: &Route, path: &str, bucket: &str) -> Plan {
    if !pass_through.is_on() {
        return Plan::Serve;
    }
    let (named, op) = match route {
        Route::ObjectGet {
            bucket,
            media,
            head,
            ..
        } => (bucket.as_str(), object_get_op(*media, *head)),
        Route::ObjectList { api, bucket } => (bucket.as_str(), Op::List(*api)),
        Route::ObjectDelete { api, bucket, .. } => (bucket.as_str(), Op::Delete(*api)),
        Route::Compose { bucket, .. } => (bucket.as_str(), Op::Other),
        Route::BucketGet { bucket } if pass_through.forwards_everything() => {
            (bucket.as_str(), Op::Other)
        }
        Route::Invalid {
            api: Api::Json,
            status: 404,
            ..
        } => match json_object_path_bucket(path) {
            Some(named) => (named, Op::Other),
            None => return Plan::Serve,
        },
        _ => return Plan::Serve,
    };
    match named == bucket {
        true => Plan::Forward(op),
        false => Plan::OtherBucket,
    }
}

fn object_get_op(media: bool, head: bool) -> Op {
    match (media, head) {
        (_, true) => Op::Head,
        (true, false) => Op::Media,
        (false, false) => Op::Metadata,
    }
}

/// The bucket of a JSON API request on an object that `wire` does not route
/// (`PATCH`/`PUT` of an object, `POST .../copyTo/...`, `.../rewriteTo/...`).
fn json_object_path_bucket(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/storage/v1/b/")?;
    let (bucket, tail) = rest.split_once('/')?;
    tail.starts_with("o/").then_some(bucket)
}

/// One request passed through, its body not yet read.
// A store reads neither the method, the URI nor the body.
#[cfg_attr(not(feature = "http-upstream"), allow(dead_code))]
pub(crate) struct Forward<'a> {
    pub(crate) op: Op,
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
    /// The answer to the client.
    pub(crate) fn rejection(self) -> Rejection {
        match self {
            PassError::Unreachable { .. } | PassError::Credentials { .. } => {
                Rejection::status(503, self.to_string())
            }
            PassError::NotServed { .. } => Rejection::status(501, self.to_string()),
            PassError::Refused(rejection) => rejection,
            PassError::Store(object_store::Error::NotFound { .. }) => {
                Rejection::status(404, "No such object.")
            }
            PassError::Store(object_store::Error::InvalidPath { .. }) => {
                Rejection::invalid(self.to_string())
            }
            PassError::Store(_) => Rejection::status(503, self.to_string()),
        }
    }
}

impl PassThrough {
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

#[cfg(all(test, feature = "http-upstream"))]
mod tests {
    use super::*;

    fn route(method: &str, uri: &str) -> Route {
        let uri: ::http::Uri = uri.parse().unwrap();
        let method: ::http::Method = method.parse().unwrap();
        Route::parse(&method, &uri, &Query::parse(uri.query()))
    }

    fn plan_of(method: &str, uri: &str) -> Plan {
        let on = PassThrough::http("http://127.0.0.1:1", None).unwrap();
        let path = uri.split('?').next().unwrap();
        plan(&on, &route(method, uri), path, "bkt")
    }

    #[test]
    fn reads_lists_deletes_and_patches_of_the_bucket_pass_through() {
        let cases = [
            ("GET", "/storage/v1/b/bkt/o/a", Op::Metadata),
            ("GET", "/storage/v1/b/bkt/o/a?alt=media", Op::Media),
            ("GET", "/download/storage/v1/b/bkt/o/a?alt=media", Op::Media),
            ("GET", "/storage/v1/b/bkt/o?prefix=a", Op::List(Api::Json)),
            ("DELETE", "/storage/v1/b/bkt/o/a", Op::Delete(Api::Json)),
            ("PATCH", "/storage/v1/b/bkt/o/a", Op::Other),
            (
                "POST",
                "/storage/v1/b/bkt/o/a/rewriteTo/b/bkt/o/b",
                Op::Other,
            ),
            ("POST", "/storage/v1/b/bkt/o/a/compose", Op::Other),
            ("GET", "/storage/v1/b/bkt", Op::Other),
            ("GET", "/bkt/a", Op::Media),
            ("HEAD", "/bkt/a", Op::Head),
            ("GET", "/bkt", Op::List(Api::Xml)),
            ("DELETE", "/bkt/a", Op::Delete(Api::Xml)),
        ];
        for (method, uri, op) in cases {
            assert_eq!(plan_of(method, uri), Plan::Forward(op), "{method} {uri}");
        }
    }

    #[test]
    fn uploads_stay_with_the_relay_and_other_buckets_are_404() {
        assert_eq!(
            plan_of("POST", "/upload/storage/v1/b/bkt/o?uploadType=media&name=a"),
            Plan::Serve
        );
        assert_eq!(plan_of("PUT", "/bkt/a"), Plan::Serve);
        assert_eq!(plan_of("GET", "/storage/v1/b/other/o/a"), Plan::OtherBucket);
        assert_eq!(
            plan_of("PATCH", "/storage/v1/b/other/o/a"),
            Plan::OtherBucket
        );
        assert_eq!(plan_of("GET", "/other/a"), Plan::OtherBucket);
        assert_eq!(plan_of("GET", "/nothing/here/at/all?x"), Plan::OtherBucket);
        let off = PassThrough::off();
        let get = route("GET", "/storage/v1/b/bkt/o/a");
        assert_eq!(
            plan(&off, &get, "/storage/v1/b/bkt/o/a", "bkt"),
            Plan::Serve
        );
    }
}
