//! One HTTP request to the relay: routed by `wire`'s [`Route`], its body read
//! (bounded by [`RelayConfig::max_request_bytes`](crate::RelayConfig)), served, and
//! counted. What it serves:
//!
//! | route | answer |
//! |---|---|
//! | JSON media and multipart uploads, XML `PUT` | [`Relay::upload`] |
//! | JSON resumable start, its session's requests, `DELETE` of a session | `resumable.rs` |
//! | `GET /storage/v1/b/{bucket}` of the upstream's bucket | its bucket resource (clients look it up) |
//! | reads, metadata, lists, deletes, compose, other buckets' resources | 501, saying it is not passed through |
//! | anything else | 404 or 400, as `wire` routes it |
//!
//! Every answer, refusals too, is in the request's API (JSON or XML error bodies).

use bytes::Bytes;
use fake_gcs::wire::{
    self, Api, Query, Rejection, Reply, RequestHead, Route, Upload, UploadKind, error_reply, header,
};
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;

use crate::metrics::route_label;
use crate::relay::{Relay, other_preconditions};

/// Serves one request (hyper's service function); never fails.
pub(crate) async fn handle(relay: Relay, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let query = Query::parse(parts.uri.query());
    let route = Route::parse(&parts.method, &parts.uri, &query);
    let api = route.api();
    let base = format!(
        "http://{}",
        header(&parts.headers, "host").unwrap_or("localhost")
    );
    let reply = match read_body(body, relay.config().max_request_bytes(), api).await {
        Err(reply) => reply,
        Ok(data) => {
            relay.metrics().received(data.len());
            let request = Served {
                relay: &relay,
                method: &parts.method,
                path: parts.uri.path(),
                headers: &parts.headers,
                query: &query,
                base: &base,
            };
            request
                .serve(&route, data)
                .await
                .unwrap_or_else(|rejection| rejection.reply(api))
        }
    };
    let label = route_label(&route);
    relay.metrics().answered(label, reply.status);
    tracing::debug!(
        target: "spool_relay",
        route = label,
        bucket = route.bucket().unwrap_or(""),
        object = route.object().unwrap_or(""),
        status = reply.status,
        "request"
    );
    let body = Full::new(reply.body.clone());
    reply.into_response(body)
}

/// The whole body, or the answer when it is larger than `limit` bytes (413) or
/// broke (400); both close the connection.
async fn read_body(body: Incoming, limit: u64, api: Api) -> Result<Bytes, Reply> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => {
            let (status, message) = match e.downcast_ref::<LengthLimitError>() {
                Some(_) => (
                    413,
                    format!("The request body exceeds the relay's limit of {limit} bytes."),
                ),
                None => (400, format!("The request body could not be read: {e}")),
            };
            Err(error_reply(api, status, Some(&message)).header("connection", "close"))
        }
    }
}

/// One request, its body read, against the relay.
struct Served<'a> {
    relay: &'a Relay,
    method: &'a Method,
    path: &'a str,
    headers: &'a HeaderMap,
    query: &'a Query,
    /// `http://host:port` as the client addressed the relay: links and session URLs.
    base: &'a str,
}

impl Served<'_> {
    async fn serve(&self, route: &Route, data: Bytes) -> Result<Reply, Rejection> {
        let head = RequestHead {
            query: self.query,
            headers: self.headers,
        };
        let relay = self.relay;
        match route {
            Route::Upload { bucket, kind } => {
                other_preconditions(head)?;
                let upload = match kind {
                    UploadKind::Media => Upload::media(bucket, head, data)?,
                    UploadKind::Multipart => Upload::multipart(bucket, head, data)?,
                    UploadKind::Resumable => {
                        let start = Upload::resumable(bucket, head, &data)?;
                        return relay.start_resumable(self.base, start);
                    }
                };
                relay.upload(self.base, upload).await
            }
            Route::XmlPut { bucket, name } => {
                other_preconditions(head)?;
                let upload = Upload::xml_put(bucket, name, head, data)?;
                relay.upload(self.base, upload).await
            }
            Route::ResumableChunk { upload_id } => {
                relay
                    .resumable_chunk(self.base, upload_id, self.headers, data)
                    .await
            }
            Route::ResumableCancel { upload_id } => relay.cancel_resumable(upload_id),
            Route::BucketGet { bucket } if *bucket == relay.config().bucket => Ok(Reply::json(
                200,
                &wire::bucket_resource(self.base, bucket, 0),
            )),
            Route::Invalid { status: 404, .. } => Err(self.not_found()),
            Route::Invalid {
                status, message, ..
            } => Err(Rejection::status(*status, message.clone())),
            other => Err(not_passed_through(other)),
        }
    }

    /// 404 in the relay's words (`wire`'s name the fake).
    fn not_found(&self) -> Rejection {
        let message = format!(
            "Not Found: the relay serves no {} {}",
            self.method, self.path
        );
        Rejection::status(404, message)
    }
}

/// 501 for what the relay does not pass through to the upstream.
fn not_passed_through(route: &Route) -> Rejection {
    Rejection::status(
        501,
        format!(
            "spool-relay does not pass {} through: it serves uploads only (JSON API media, \
             multipart and resumable uploads, XML API PUT). Read, list and delete through \
             Cloud Storage directly.",
            route.operation().name()
        ),
    )
}
