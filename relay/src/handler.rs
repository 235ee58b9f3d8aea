//! One HTTP request to the relay: routed by `wire`'s [`Route`] from its head alone,
//! then served, and counted. A body is read only by the route that takes it, in
//! pieces as it arrives (`body.rs`): an upload's straight into the spool, a session
//! chunk's into the session's file; a route that takes no body (404, 501, a
//! passed-through read) never reads one. What it serves:
//!
//! | route | answer |
//! |---|---|
//! | JSON media and multipart uploads, XML `PUT` | `upload.rs`, streamed into the spool |
//! | JSON resumable start, its session's requests, `DELETE` of a session | `resumable.rs` |
//! | reads, metadata, lists, deletes, patches, copies, compose on the upstream's bucket | passed through (`passthrough/`): the upstream's answer, streamed; 501 when [`RelayConfig::pass_through`] is off |
//! | the same on another bucket, with pass-through on | 404 (`The specified bucket does not exist.`) |
//! | metadata and media `GET` of an object this relay answered `spooled`, not yet delivered | served from its spool entry (`spooled.rs`) |
//! | a JSON or XML list while such objects are in the spool | the upstream's page merged with them (`listing.rs`) |
//! | `GET /storage/v1/b/{bucket}` of the upstream's bucket | passed through to an HTTP upstream; otherwise its bucket resource (clients look it up) |
//! | XML multipart uploads, the bucket list | 501, saying it is not passed through |
//! | anything else | 404 or 400, as `wire` routes it |
//!
//! Every answer, refusals too, is in the request's API (JSON or XML error bodies);
//! a passed-through one is the upstream's. Every request is logged at info with
//! its status and bytes (a streamed answer's bytes are its `Content-Length`).

use bytes::Bytes;
use fake_gcs::wire::{
    self, Query, Rejection, Reply, RequestHead, Route, Upload, UploadKind, header,
};
use http::{HeaderMap, Method, Request, Response};
use hyper::body::Incoming;

use crate::answer::OUTCOME_HEADER;
use crate::body::Pieces;
use crate::metrics::route_label;
use crate::passthrough::{self, Forward, Op, Plan, ResponseBody};
use crate::relay::{Relay, other_preconditions, unsupported_options};
use crate::spooled::{Deleting, TakenBack};
use crate::upload::Framing;

/// How a connection reached the relay, in its requests' extensions: the scheme of
/// the links and session URLs the answers carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// The reads a server lets run at once, in each request's extensions: a read
/// (any request passed through to the upstream or served from the spool) takes a
/// slot for as long as its answer streams, and one more is answered 503 at once,
/// so that reads never hold every connection while uploads wait
/// (`ServerConfig::max_reads`).
#[derive(Debug, Clone)]
pub(crate) struct ReadSlots {
    pub(crate) slots: std::sync::Arc<tokio::sync::Semaphore>,
    pub(crate) max_reads: usize,
}

/// One of [`ReadSlots`], counted in `spool_relay_reads` while held.
struct ReadSlot {
    _permit: tokio::sync::OwnedSemaphorePermit,
    reads: prometheus_client::metrics::gauge::Gauge,
}

impl Drop for ReadSlot {
    fn drop(&mut self) {
        self.reads.dec();
    }
}

/// Serves one request (hyper's service function); never fails.
pub(crate) async fn handle(relay: Relay, req: Request<Incoming>) -> Response<ResponseBody> {
    let (parts, body) = req.into_parts();
    let query = Query::parse(parts.uri.query());
    let route = Route::parse(&parts.method, &parts.uri, &query);
    let api = route.api();
    let scheme = parts.extensions.get::<Scheme>().copied();
    let base = format!(
        "{}://{}",
        scheme.map_or("http", Scheme::name),
        header(&parts.headers, "host").unwrap_or("localhost")
    );
    let started = tokio::time::Instant::now();
    let received = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let limit = relay.max_request_bytes();
    let body = Pieces::new(body, limit)
        .counted(relay.metrics())
        .tallied(received.clone());
    let plan = passthrough::plan(
        &relay.config().pass_through,
        &parts.method,
        &route,
        parts.uri.path(),
        &relay.config().bucket,
    );
    let logged = Logged {
        relay: &relay,
        parts: &parts,
        started,
        received: &received,
    };
    if let Plan::Forward(upstream) = &plan {
        let slot = match read_slot(&relay, &parts.extensions) {
            Ok(slot) => slot,
            Err(refused) => return logged.reply(PASS_THROUGH, refused.reply(api)),
        };
        let forward = Forward {
            op: upstream.op,
            path: &upstream.path,
            route: &route,
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            query: &query,
            body,
            base: &base,
        };
        let answer = pass_on(&relay, &logged, forward).await;
        return match slot {
            Some(slot) => answer.map(|body| passthrough::holding(body, slot)),
            None => answer,
        };
    }
    let request = Served {
        relay: &relay,
        method: &parts.method,
        path: parts.uri.path(),
        raw_query: parts.uri.query().unwrap_or(""),
        headers: &parts.headers,
        query: &query,
        base: &base,
    };
    let reply = match (declared_too_large(&parts.headers, limit), plan) {
        // Refused before a byte of the body is read.
        (Some(rejection), _) => rejection.reply(api),
        (None, Plan::OtherBucket) => request.no_such_bucket().reply(api),
        (None, Plan::Refused(rejection)) => rejection.reply(api),
        (None, _) => request
            .serve(&route, body)
            .await
            .unwrap_or_else(|rejection| rejection.reply(api)),
    };
    let reply = wire::answer_308_as_asked(reply, &parts.headers);
    logged.reply(route_label(&route), reply)
}

/// A slot for one more read, if the server bounds them (`None` when it does not);
/// 503 when every slot is taken.
fn read_slot(relay: &Relay, extensions: &http::Extensions) -> Result<Option<ReadSlot>, Rejection> {
    let Some(bounded) = extensions.get::<ReadSlots>() else {
        return Ok(None);
    };
    match bounded.slots.clone().try_acquire_owned() {
        Ok(permit) => {
            let reads = relay.metrics().reads.clone();
            reads.inc();
            Ok(Some(ReadSlot {
                _permit: permit,
                reads,
            }))
        }
        Err(_) => Err(Rejection::status(
            503,
            format!(
                "spool-relay is serving as many reads as it serves at once ({}, \
                 --max-reads), so that uploads always find a connection: retry the read",
                bounded.max_reads
            ),
        )),
    }
}

/// A request for the upstream: a metadata or media `GET` of an object this relay
/// answered `spooled` and the spool still holds is served from the spool
/// (read-your-writes); the rest passes through.
async fn pass_on(
    relay: &Relay,
    logged: &Logged<'_>,
    forward: Forward<'_>,
) -> Response<ResponseBody> {
    let api = forward.route.api();
    if matches!(forward.op, Op::Metadata | Op::Media)
        && let Some(name) = forward.route.object()
        && let Some(found) = relay.spooled(name).await
    {
        return match forward.op {
            Op::Metadata => {
                let resource = found.resource(forward.base, &relay.config().bucket);
                logged.reply(SPOOLED, resource)
            }
            _ => logged.streamed(SPOOLED, found.media(relay.spool(), api, forward.headers)),
        };
    }
    if let Op::Delete(_) = forward.op
        && let Some(name) = forward.route.object()
    {
        let deleting = match relay.spooled(name).await {
            Some(found) => found.deleting(forward.query, forward.headers),
            None => Ok(Deleting::Spooled),
        };
        let copies = relay.spooled_objects().await.copies(name);
        let taken_back = match deleting {
            Ok(Deleting::Spooled) => take_back(relay, name).await,
            Ok(Deleting::OtherGeneration) => TakenBack::NotSpooled,
            Err(refused) => return logged.reply(SPOOLED, refused.reply(api)),
        };
        match taken_back {
            TakenBack::NotSpooled => {}
            TakenBack::Removed => {
                let removed = removed_upstream(relay, forward, name, copies).await;
                return match removed {
                    Ok(()) => {
                        logged.reply(SPOOLED, Reply::new(204).header(OUTCOME_HEADER, "removed"))
                    }
                    Err(Refused::Upstream(answer)) => logged.streamed(SPOOLED, answer),
                    Err(Refused::Relay(refused)) => logged.reply(SPOOLED, refused.reply(api)),
                };
            }
            TakenBack::Failed(e) => {
                tracing::warn!(target: "spool_relay", error = %e, "a spooled object could not be taken back");
                let message = format!(
                    "The spooled object could not be removed now; retry the request. {}",
                    crate::answer::SEE_THE_LOG
                );
                return logged.reply(SPOOLED, Rejection::status(503, message).reply(api));
            }
            TakenBack::Delivering | TakenBack::Withdrawn => {
                unreachable!("take_back waits for the drainer")
            }
        }
    }
    if let Op::List(list_api) = forward.op {
        let spooled = relay.spooled_objects().await;
        if spooled.any(relay.spool()) {
            let merging = crate::listing::Merging {
                api: list_api,
                bucket: relay.config().bucket.clone(),
                base: forward.base.to_string(),
            };
            let prepared = match crate::listing::prepare(&forward, merging) {
                Ok(prepared) => prepared,
                Err(failed) => return logged.reply(PASS_THROUGH, failed.rejection().reply(api)),
            };
            let upstream = Forward {
                uri: &prepared.uri,
                query: &prepared.query,
                ..forward
            };
            let answer = relay.config().pass_through.serve(upstream).await;
            let merged = match answer {
                Ok(answer) => {
                    let budget = relay.merge_budget();
                    prepared
                        .merged(answer, spooled, relay.spool(), budget)
                        .await
                }
                Err(failed) => Err(failed),
            };
            return match merged {
                Ok(response) => logged.streamed(PASS_THROUGH, response),
                Err(failed) => logged.reply(PASS_THROUGH, failed.rejection().reply(api)),
            };
        }
    }
    match relay.config().pass_through.serve(forward).await {
        Ok(response) => logged.streamed(PASS_THROUGH, response),
        Err(failed) => logged.reply(PASS_THROUGH, failed.rejection().reply(api)),
    }
}

/// Why the upstream half of a `DELETE` of a spooled name is not done: the
/// upstream's own answer, or the relay's.
enum Refused {
    Upstream(Response<ResponseBody>),
    Relay(Rejection),
}

/// The upstream half of a `DELETE` whose spooled entries are taken back (gone for
/// good: they never land from the spool). The upstream may hold a copy too (a
/// delivery attempt, or the upload's own first try, that landed with its answer
/// lost), so the `DELETE` goes upstream as well: its success or 404 says the
/// object is gone. When the upstream fails (the outage that spooled the object: a
/// 5xx, a 429, no answer), the relay owes it the delete (durable, settled in the
/// background, deleting only a copy of the entries taken back:
/// `spooled/deletes.rs`) and the client is told it is gone all the same; its retry
/// must not be told 503 for the whole outage. Any other answer is the client's.
async fn removed_upstream(
    relay: &Relay,
    forward: Forward<'_>,
    name: &str,
    copies: Vec<crate::spooled::Copy>,
) -> Result<(), Refused> {
    let gone = |status: u16| (200..300).contains(&status) || status == 404;
    let failing = |status: u16| status >= 500 || status == 429;
    let status = match relay.config().pass_through.serve(forward).await {
        Ok(answer) if gone(answer.status().as_u16()) => return Ok(()),
        Ok(answer) if !failing(answer.status().as_u16()) => {
            return Err(Refused::Upstream(answer));
        }
        Ok(answer) => answer.status().as_u16(),
        Err(failed) => {
            let refused = failed.rejection();
            let status = refused.http_status();
            match (gone(status), failing(status) && status != 501) {
                (true, _) => return Ok(()),
                (false, false) => return Err(Refused::Relay(refused)),
                (false, true) => status,
            }
        }
    };
    match relay.owe_delete(name, copies).await {
        Ok(()) => {
            tracing::info!(
                target: "spool_relay",
                name,
                upstream_status = status,
                "a DELETE took a spooled object back while the upstream failed: the delete \
                 is owed to the upstream and settled when it answers"
            );
            Ok(())
        }
        Err(e) => Err(Refused::Relay(Rejection::status(
            503,
            format!(
                "the spooled object is taken back, but the delete owed to the upstream could not be kept: {e}"
            ),
        ))),
    }
}

/// Takes every entry of `name` back out of the spool; while a drainer holds one
/// (delivering it, or retrying during an outage), withdraws it and waits at most
/// 5 s for the drainer to let it go: removed, or delivered by an attempt already
/// under way (either way [`TakenBack::Removed`]: the caller deletes the upstream's
/// copy too); then 503 (retry).
async fn take_back(relay: &Relay, name: &str) -> TakenBack {
    let spooled = relay.spooled_objects().await;
    let (mut withdrawn, mut removed) = (false, false);
    for _ in 0..100 {
        match spooled.take_back(relay.spool(), name).await {
            TakenBack::Withdrawn => {
                withdrawn = true;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            TakenBack::Delivering => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            // The name may have more entries (spooled again after a restart): every
            // one is taken back.
            TakenBack::Removed => removed = true,
            // Gone from the index (removed, or delivered by an attempt under way);
            // durable before the answer: after a power loss it must not come back.
            TakenBack::NotSpooled if withdrawn => {
                return match relay.spool().sync_removals().await {
                    Ok(()) => TakenBack::Removed,
                    Err(e) => TakenBack::Failed(e),
                };
            }
            TakenBack::NotSpooled if removed => return TakenBack::Removed,
            done => return done,
        }
    }
    TakenBack::Failed(std::io::Error::other(
        "the drainer holds it to deliver it; retry the DELETE",
    ))
}

/// The metrics label of every request passed through.
const PASS_THROUGH: &str = "pass_through";
/// The metrics label of a read served from the spool (read-your-writes).
const SPOOLED: &str = "spooled_read";

/// A request being answered: what its log line and counters need.
struct Logged<'a> {
    relay: &'a Relay,
    parts: &'a http::request::Parts,
    started: tokio::time::Instant,
    received: &'a std::sync::atomic::AtomicU64,
}

impl Logged<'_> {
    /// `reply` as the relay sends its own answers: a 503 says when to retry, and a
    /// refusal closes the connection (its body may be unread).
    fn reply(&self, label: &'static str, mut reply: Reply) -> Response<ResponseBody> {
        if reply.status == 503 && !reply.headers.iter().any(|(name, _)| name == "retry-after") {
            // Every 503 of the relay means "not now": a refusal of the sessions'
            // store (a full or failing disk, --max-sessions) or an upstream that
            // cannot be reached says when to retry as the uploader's do
            // (docs/faults.md).
            let seconds = crate::answer::retry_after_seconds(self.relay.config().retry_after);
            reply = reply.header("retry-after", seconds.to_string());
        }
        if reply.status >= 400 {
            // The body may be unread: the connection cannot carry another request.
            reply = reply.header("connection", "close");
        }
        let sent = reply.body.len() as u64;
        let outcome = (reply.headers.iter())
            .find(|(name, _)| name == OUTCOME_HEADER)
            .map(|(_, value)| value.as_str());
        let message = wire::refusal_message(&reply);
        self.log(label, reply.status, sent, outcome, message);
        let body = passthrough::whole(reply.body.clone());
        reply.into_response(body)
    }

    /// The upstream's answer, passed on as it came; its body streams after this
    /// line is logged (the bytes sent are its `Content-Length`).
    fn streamed(
        &self,
        label: &'static str,
        response: Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        let sent = (response.headers().get(http::header::CONTENT_LENGTH))
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        let outcome = (response.headers().get(OUTCOME_HEADER)).and_then(|v| v.to_str().ok());
        self.log(label, response.status().as_u16(), sent, outcome, None);
        response
    }

    /// Logs the request's line; an upload's says where its bytes went
    /// (`outcome=stored|spooled`, as its answer's `x-spool-outcome`).
    fn log(
        &self,
        label: &'static str,
        status: u16,
        sent: u64,
        outcome: Option<&str>,
        message: Option<String>,
    ) {
        self.relay.metrics().answered(label, status);
        let parts = self.parts;
        tracing::info!(
            target: "spool_relay",
            method = %parts.method,
            path = parts.uri.path(),
            query = %wire::redacted_query(parts.uri.query().unwrap_or("")),
            route = label,
            status,
            outcome = outcome.unwrap_or("-"),
            received_bytes = self.received.load(std::sync::atomic::Ordering::Relaxed),
            sent_bytes = sent,
            millis = self.started.elapsed().as_millis() as u64,
            refusal = message.unwrap_or_default(),
            "request"
        );
    }
}

/// One request against the relay, its body not yet read.
struct Served<'a> {
    relay: &'a Relay,
    method: &'a Method,
    path: &'a str,
    /// The query string as sent (kept with a resumable session).
    raw_query: &'a str,
    headers: &'a HeaderMap,
    query: &'a Query,
    /// `http://host:port` as the client addressed the relay: links and session URLs.
    base: &'a str,
}

impl Served<'_> {
    async fn serve(&self, route: &Route, body: Pieces) -> Result<Reply, Rejection> {
        let head = RequestHead {
            query: self.query,
            headers: self.headers,
        };
        let relay = self.relay;
        match route {
            Route::Upload { bucket, kind } => {
                other_preconditions(head)?;
                unsupported_options(head)?;
                let framing = match kind {
                    UploadKind::Media => {
                        Framing::Whole(Box::new(Upload::media(bucket, head, Bytes::new())?))
                    }
                    UploadKind::Multipart => Framing::Multipart {
                        bucket: bucket.clone(),
                    },
                    UploadKind::Resumable => {
                        let resource = small_body(body).await?;
                        return relay
                            .start_resumable(self.base, bucket, head, self.raw_query, resource)
                            .await;
                    }
                };
                relay.upload_streamed(self.base, framing, head, body).await
            }
            Route::XmlPut { bucket, name } => {
                other_preconditions(head)?;
                unsupported_options(head)?;
                let upload = Upload::xml_put(bucket, name, head, Bytes::new())?;
                relay
                    .upload_streamed(self.base, Framing::Whole(Box::new(upload)), head, body)
                    .await
            }
            Route::ResumableChunk { bucket, upload_id } => {
                relay
                    .resumable_chunk(self.base, bucket, upload_id, self.headers, body)
                    .await
            }
            Route::ResumableCancel { bucket, upload_id } => {
                relay.cancel_resumable(bucket, upload_id).await
            }
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

    /// 404 for a request on another bucket than the upstream's.
    fn no_such_bucket(&self) -> Rejection {
        Rejection::status(404, "The specified bucket does not exist.")
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

/// 413 for a request whose `Content-Length` is over the relay's limit.
fn declared_too_large(headers: &HeaderMap, limit: u64) -> Option<Rejection> {
    let declared: u64 = header(headers, "content-length")?.trim().parse().ok()?;
    (declared > limit).then(|| crate::body::BodyError::TooLarge { limit }.rejection())
}

/// The whole body of a request that carries no object bytes, at most
/// [`crate::body::MAX_RESOURCE_BYTES`].
async fn small_body(body: Pieces) -> Result<Bytes, Rejection> {
    body.limited(crate::body::MAX_RESOURCE_BYTES)
        .whole()
        .await
        .map_err(crate::body::BodyError::rejection)
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
