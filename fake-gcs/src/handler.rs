//! Serves one HTTP request: routes it, decides its fault, moves its body as the
//! fault says, applies the JSON or XML API against the fake's state (under the lock,
//! with the whole body in hand) and records what happened (statistics, a `tracing`
//! event, the observer).
//!
//! A request that must end without a response returns [`Dropped`]; hyper then closes
//! the connection without writing anything.

use std::borrow::Cow;
use std::io;
use std::ops::Bound;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Body, Frame, Incoming};
use serde_json::{Value, json};

use crate::bucket::{Bucket, ObjectRecord, Preconditions, StoredObject};
use crate::fake::{FakeGcs, RequestEvent, State};
use crate::faults::{Action, Fault};
use crate::operation::Operation;
use crate::retry_test::UnknownTest;
use crate::uploads::Session;
use crate::wire::{self, ChunkRange, Declared, Digests};

/// The body of every response the fake sends.
pub(crate) type ResponseBody = UnsyncBoxBody<Bytes, io::Error>;

/// The request ended by dropping the connection, without a response.
#[derive(Debug)]
pub(crate) struct Dropped(&'static str);

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connection dropped: {}", self.0)
    }
}

impl std::error::Error for Dropped {}

/// Which API a route belongs to: decides the shape of error bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Json,
    Xml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UploadKind {
    Media,
    Multipart,
    Resumable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    RetryTestCreate,
    RetryTestList,
    RetryTestGet(String),
    RetryTestDelete(String),
    BucketsList,
    BucketGet {
        bucket: String,
    },
    ObjectList {
        api: Api,
        bucket: String,
    },
    ObjectGet {
        api: Api,
        bucket: String,
        name: String,
        media: bool,
        head: bool,
    },
    ObjectDelete {
        api: Api,
        bucket: String,
        name: String,
    },
    Upload {
        bucket: String,
        kind: UploadKind,
    },
    ResumableChunk {
        upload_id: String,
    },
    ResumableCancel {
        upload_id: String,
    },
    XmlPut {
        bucket: String,
        name: String,
    },
    Invalid {
        api: Api,
        status: u16,
        message: String,
    },
}

/// Decoded query parameters.
#[derive(Debug, Default)]
struct Query(Vec<(String, String)>);

impl Query {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn not_found(api: Api, what: &str) -> Route {
    Route::Invalid {
        api,
        status: 404,
        message: format!("Not Found: the fake serves no {what}"),
    }
}

impl Route {
    fn parse(method: &Method, uri: &Uri, query: &Query) -> Route {
        let path = uri.path();
        let decode = |api: Api, s: &str| {
            wire::decode_path(s).ok_or_else(|| Route::Invalid {
                api,
                status: 400,
                message: format!("path segment {s:?} is not UTF-8 after percent-decoding"),
            })
        };
        let route = || -> Result<Route, Route> {
            let route_text = format!("{method} {path}");
            if path == "/retry_test" || path == "/retry_tests" {
                return Ok(match *method {
                    Method::POST if path == "/retry_test" => Route::RetryTestCreate,
                    Method::GET => Route::RetryTestList,
                    _ => not_found(Api::Json, &route_text),
                });
            }
            if let Some(id) = path.strip_prefix("/retry_test/") {
                return Ok(match *method {
                    Method::GET => Route::RetryTestGet(id.to_string()),
                    Method::DELETE => Route::RetryTestDelete(id.to_string()),
                    _ => not_found(Api::Json, &route_text),
                });
            }
            if let Some(rest) = path.strip_prefix("/upload/storage/v1/b/") {
                let Some((bucket, "o" | "o/")) = rest.split_once('/') else {
                    return Ok(not_found(Api::Json, &route_text));
                };
                let bucket = decode(Api::Json, bucket)?;
                if let Some(upload_id) = query.get("upload_id") {
                    let upload_id = upload_id.to_string();
                    return Ok(match *method {
                        Method::PUT | Method::POST => Route::ResumableChunk { upload_id },
                        Method::DELETE => Route::ResumableCancel { upload_id },
                        _ => not_found(Api::Json, &route_text),
                    });
                }
                if *method != Method::POST {
                    return Ok(not_found(Api::Json, &route_text));
                }
                let kind = match query.get("uploadType") {
                    Some("media") => UploadKind::Media,
                    Some("multipart") => UploadKind::Multipart,
                    Some("resumable") => UploadKind::Resumable,
                    other => {
                        return Ok(Route::Invalid {
                            api: Api::Json,
                            status: 400,
                            message: format!(
                                "uploadType must be media, multipart or resumable, got {other:?}"
                            ),
                        });
                    }
                };
                return Ok(Route::Upload { bucket, kind });
            }
            if let Some(rest) = path.strip_prefix("/download/storage/v1/b/") {
                let Some((bucket, name)) = rest.split_once("/o/") else {
                    return Ok(not_found(Api::Json, &route_text));
                };
                if *method != Method::GET {
                    return Ok(not_found(Api::Json, &route_text));
                }
                return Ok(Route::ObjectGet {
                    api: Api::Json,
                    bucket: decode(Api::Json, bucket)?,
                    name: decode(Api::Json, name)?,
                    media: true,
                    head: false,
                });
            }
            let json_rest = if path == "/storage/v1/b" {
                Some("")
            } else {
                path.strip_prefix("/storage/v1/b/")
            };
            if let Some(rest) = json_rest {
                let (bucket, tail) = match rest.split_once('/') {
                    Some((bucket, tail)) => (bucket, Some(tail)),
                    None => (rest, None),
                };
                return Ok(match (method, bucket, tail) {
                    (&Method::GET, "", None) => Route::BucketsList,
                    (&Method::GET, bucket, None | Some("")) => Route::BucketGet {
                        bucket: decode(Api::Json, bucket)?,
                    },
                    (&Method::GET, bucket, Some("o" | "o/")) => Route::ObjectList {
                        api: Api::Json,
                        bucket: decode(Api::Json, bucket)?,
                    },
                    (method, bucket, Some(tail)) if tail.starts_with("o/") => {
                        let bucket = decode(Api::Json, bucket)?;
                        let name = decode(Api::Json, &tail[2..])?;
                        match *method {
                            Method::GET => Route::ObjectGet {
                                api: Api::Json,
                                bucket,
                                name,
                                media: query.get("alt") == Some("media"),
                                head: false,
                            },
                            Method::DELETE => Route::ObjectDelete {
                                api: Api::Json,
                                bucket,
                                name,
                            },
                            _ => not_found(Api::Json, &route_text),
                        }
                    }
                    _ => not_found(Api::Json, &route_text),
                });
            }
            // The XML API: /{bucket} and /{bucket}/{object}.
            let Some(rest) = path.strip_prefix('/').filter(|r| !r.is_empty()) else {
                return Ok(not_found(Api::Xml, &route_text));
            };
            let (bucket, name) = match rest.split_once('/') {
                Some((bucket, name)) => (bucket, name),
                None => (rest, ""),
            };
            let bucket = decode(Api::Xml, bucket)?;
            if name.is_empty() {
                return Ok(match *method {
                    Method::GET => Route::ObjectList {
                        api: Api::Xml,
                        bucket,
                    },
                    _ => not_found(Api::Xml, &route_text),
                });
            }
            let name = decode(Api::Xml, name)?;
            Ok(match *method {
                Method::PUT => Route::XmlPut { bucket, name },
                Method::GET | Method::HEAD => Route::ObjectGet {
                    api: Api::Xml,
                    bucket,
                    name,
                    media: true,
                    head: *method == Method::HEAD,
                },
                Method::DELETE => Route::ObjectDelete {
                    api: Api::Xml,
                    bucket,
                    name,
                },
                _ => not_found(Api::Xml, &route_text),
            })
        };
        route().unwrap_or_else(|invalid| invalid)
    }

    fn operation(&self) -> Operation {
        match self {
            Route::RetryTestCreate
            | Route::RetryTestList
            | Route::RetryTestGet(_)
            | Route::RetryTestDelete(_) => Operation::RetryTest,
            Route::BucketsList => Operation::BucketsList,
            Route::BucketGet { .. } => Operation::BucketsGet,
            Route::ObjectList { .. } => Operation::ObjectsList,
            Route::ObjectGet { .. } => Operation::ObjectsGet,
            Route::ObjectDelete { .. } => Operation::ObjectsDelete,
            Route::Upload { .. }
            | Route::ResumableChunk { .. }
            | Route::ResumableCancel { .. }
            | Route::XmlPut { .. } => Operation::ObjectsInsert,
            Route::Invalid { .. } => Operation::Unknown,
        }
    }

    fn api(&self) -> Api {
        match self {
            Route::ObjectList { api, .. }
            | Route::ObjectGet { api, .. }
            | Route::ObjectDelete { api, .. }
            | Route::Invalid { api, .. } => *api,
            Route::XmlPut { .. } => Api::Xml,
            _ => Api::Json,
        }
    }

    fn bucket(&self) -> Option<&str> {
        match self {
            Route::BucketGet { bucket }
            | Route::ObjectList { bucket, .. }
            | Route::ObjectGet { bucket, .. }
            | Route::ObjectDelete { bucket, .. }
            | Route::Upload { bucket, .. }
            | Route::XmlPut { bucket, .. } => Some(bucket),
            _ => None,
        }
    }

    fn object(&self) -> Option<&str> {
        match self {
            Route::ObjectGet { name, .. }
            | Route::ObjectDelete { name, .. }
            | Route::XmlPut { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// A response before it becomes an HTTP response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
    /// `Content-Length` to advertise without sending a body (HEAD, 304).
    head_len: Option<u64>,
    /// The request wrote an object.
    committed: bool,
    /// The bucket and object the request turned out to name (multipart names the
    /// object in the body, resumable chunks name neither).
    bucket: Option<String>,
    object: Option<String>,
}

impl Reply {
    fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
            head_len: None,
            committed: false,
            bucket: None,
            object: None,
        }
    }

    fn json(status: u16, value: &Value) -> Self {
        Self::new(status)
            .header("content-type", "application/json; charset=UTF-8")
            .body(value.to_string())
    }

    fn xml(status: u16, text: String) -> Self {
        Self::new(status)
            .header("content-type", "application/xml; charset=UTF-8")
            .body(text)
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    fn into_response(self, body: ResponseBody) -> Response<ResponseBody> {
        let mut response = Response::new(body);
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = response.headers_mut();
        for (name, value) in self.headers {
            match HeaderValue::from_str(&value) {
                Ok(value) => {
                    headers.append(HeaderName::from_static(name), value);
                }
                Err(_) => tracing::warn!(name, value, "header value not representable; skipped"),
            }
        }
        let len = self.head_len.unwrap_or(self.body.len() as u64);
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(len));
        response
    }
}

fn error_reply(api: Api, status: u16, message: Option<&str>) -> Reply {
    let (reason, code, default) = wire::status_wording(status);
    let message = message.unwrap_or(default);
    match api {
        Api::Json => Reply::new(status)
            .header("content-type", "application/json; charset=UTF-8")
            .body(wire::json_error_body(status, reason, message)),
        Api::Xml => Reply::xml(status, wire::xml_error_body(code, message, None)),
    }
}

fn no_such_bucket(api: Api, bucket: &str) -> Reply {
    match api {
        Api::Json => error_reply(api, 404, Some("The specified bucket does not exist.")),
        Api::Xml => Reply::xml(
            404,
            wire::xml_error_body(
                "NoSuchBucket",
                "The specified bucket does not exist.",
                Some(&format!("No such bucket: {bucket}")),
            ),
        ),
    }
}

fn no_such_object(api: Api, bucket: &str, name: &str) -> Reply {
    let details = format!("No such object: {bucket}/{name}");
    match api {
        Api::Json => error_reply(api, 404, Some(&details)),
        Api::Xml => Reply::xml(
            404,
            wire::xml_error_body(
                "NoSuchKey",
                "The specified key does not exist.",
                Some(&details),
            ),
        ),
    }
}

fn precondition_failed(api: Api) -> Reply {
    let message = "At least one of the pre-conditions you specified did not hold.";
    match api {
        Api::Json => Reply::new(412)
            .header("content-type", "application/json; charset=UTF-8")
            .body(
                json!({
                    "error": {
                        "code": 412,
                        "message": message,
                        "errors": [{
                            "message": message,
                            "domain": "global",
                            "reason": "conditionNotMet",
                            "locationType": "header",
                            "location": "If-Match",
                        }],
                    }
                })
                .to_string(),
            ),
        Api::Xml => Reply::xml(
            412,
            wire::xml_error_body(
                "PreconditionFailed",
                message,
                Some("Preconditions failed on the object's generation."),
            ),
        ),
    }
}

fn full_body(bytes: Bytes) -> ResponseBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A response body that sends `after` bytes, optionally waits `hold`, then either
/// sends the rest (`resume`) or fails, which makes hyper drop the connection.
fn cut_body(bytes: Bytes, after: usize, hold: Option<Duration>, resume: bool) -> ResponseBody {
    let after = after.min(bytes.len());
    let head = bytes.slice(..after);
    let tail = bytes.slice(after..);
    let first = futures::stream::iter((!head.is_empty()).then(|| Ok(Frame::data(head))));
    let rest = futures::stream::once(async move {
        if let Some(hold) = hold {
            tokio::time::sleep(hold).await;
        }
        if resume {
            Ok(Frame::data(tail))
        } else {
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "fault injected: broken stream",
            ))
        }
    });
    use futures::StreamExt as _;
    StreamBody::new(first.chain(rest)).boxed_unsync()
}

/// Reads a request body incrementally, bounded by `limit` bytes.
struct BodyReader {
    body: Incoming,
    buf: BytesMut,
    done: bool,
    limit: u64,
}

enum BodyError {
    TooLarge,
    Broken,
}

impl BodyReader {
    fn new(body: Incoming, limit: u64) -> Self {
        let done = body.is_end_stream();
        Self {
            body,
            buf: BytesMut::new(),
            done,
            limit,
        }
    }

    /// Reads until at least `want` bytes are buffered or the body ends.
    async fn fill(&mut self, want: u64) -> Result<(), BodyError> {
        while !self.done && (self.buf.len() as u64) < want {
            match self.body.frame().await {
                None => self.done = true,
                Some(Err(_)) => return Err(BodyError::Broken),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if (self.buf.len() + data.len()) as u64 > self.limit {
                            return Err(BodyError::TooLarge);
                        }
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
        Ok(())
    }

    async fn read_to_end(&mut self) -> Result<Bytes, BodyError> {
        self.fill(u64::MAX).await?;
        Ok(self.buf.split().freeze())
    }
}

/// Records one request's fate and reports it when dropped: exactly one event per
/// request, also when hyper drops the request mid-way.
struct Track {
    fake: FakeGcs,
    at: Duration,
    operation: Operation,
    bucket: Option<String>,
    object: Option<String>,
    fault: Option<Fault>,
    status: Option<u16>,
    committed: bool,
    dropped: Option<&'static str>,
}

impl Track {
    fn respond(mut self, reply: Reply, body: Option<ResponseBody>) -> Response<ResponseBody> {
        self.status = Some(reply.status);
        self.committed |= reply.committed;
        if reply.bucket.is_some() {
            self.bucket.clone_from(&reply.bucket);
        }
        if reply.object.is_some() {
            self.object.clone_from(&reply.object);
        }
        let body = body.unwrap_or_else(|| full_body(reply.body.clone()));
        reply.into_response(body)
    }

    fn drop_connection(mut self, why: &'static str) -> Dropped {
        self.status = None;
        self.dropped = Some(why);
        Dropped(why)
    }
}

impl Drop for Track {
    fn drop(&mut self) {
        let took = self.fake.inner.clock.elapsed().saturating_sub(self.at);
        let fault = self.fault.as_ref().map(Fault::label);
        tracing::info!(
            target: "fake_gcs",
            op = self.operation.name(),
            bucket = self.bucket.as_deref().unwrap_or(""),
            object = self.object.as_deref().unwrap_or(""),
            fault = fault.as_deref().unwrap_or("none"),
            status = self.status.map_or_else(|| "dropped".to_string(), |s| s.to_string()),
            took_ms = took.as_millis() as u64,
            dropped = self.dropped.unwrap_or(""),
            "request"
        );
        {
            let mut state = self.fake.state();
            match self.status {
                Some(status) => *state.stats.by_status.entry(status).or_default() += 1,
                None => state.stats.dropped += 1,
            }
        }
        let event = RequestEvent {
            at: self.at,
            took,
            operation: self.operation,
            bucket: self.bucket.take(),
            object: self.object.take(),
            fault: self.fault.take(),
            status: self.status,
            committed: self.committed,
        };
        self.fake.emit(&event);
    }
}

/// What to do after serving normally.
enum After {
    Nothing,
    Replace503,
    Hold(Duration),
    Cut {
        after: Option<u64>,
    },
    Stall {
        after: u64,
        hold: Duration,
        resume: bool,
    },
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

impl FakeGcs {
    /// Counts the request and decides its fault, in one critical section.
    fn arrive(
        &self,
        op: Operation,
        object: Option<&str>,
        test_id: Option<&str>,
        at: Duration,
    ) -> Result<Option<(Fault, Action)>, UnknownTest> {
        let mut state = self.state();
        state.stats.requests += 1;
        *state
            .stats
            .by_operation
            .entry(op.name().to_string())
            .or_default() += 1;
        if !op.is_faultable() {
            return Ok(None);
        }
        let decision = match state.retry_tests.next(test_id, op)? {
            Some(instruction) => Some((
                Fault::Scripted(instruction),
                Action::from_instruction(&instruction),
            )),
            None => state.faults.decide(op, object, at),
        };
        if let Some((fault, _)) = &decision {
            *state.stats.by_fault.entry(fault.label()).or_default() += 1;
            if matches!(fault, Fault::Shed { .. }) {
                state.stats.shed += 1;
            }
        }
        Ok(decision)
    }
}

/// Serves one request (hyper's service function).
pub(crate) async fn handle(
    fake: FakeGcs,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Dropped> {
    let at = fake.inner.clock.elapsed();
    let (parts, body) = req.into_parts();
    let query = Query(wire::parse_query(parts.uri.query()));
    let route = Route::parse(&parts.method, &parts.uri, &query);
    let api = route.api();
    let operation = route.operation();
    let mut track = Track {
        fake: fake.clone(),
        at,
        operation,
        bucket: route.bucket().map(str::to_string),
        object: route.object().map(str::to_string),
        fault: None,
        status: None,
        committed: false,
        dropped: None,
    };
    let has_body = !body.is_end_stream();
    let mut body = BodyReader::new(body, fake.inner.limits.max_request_bytes);
    let test_id = header(&parts.headers, "x-retry-test-id");
    let action = match fake.arrive(operation, track.object.as_deref(), test_id, at) {
        Ok(decision) => decision.map(|(fault, action)| {
            track.fault = Some(fault);
            action
        }),
        Err(UnknownTest) => {
            let message = format!("unknown x-retry-test-id {:?}", test_id.unwrap_or(""));
            return Ok(track.respond(error_reply(api, 400, Some(&message)), None));
        }
    };

    let mut after = After::Nothing;
    match action {
        None => {}
        Some(Action::Reset) => return Err(track.drop_connection("reset")),
        Some(Action::Hang(hold)) => {
            tokio::time::sleep(hold).await;
            return Err(track.drop_connection("hang"));
        }
        Some(Action::Respond(status)) => {
            if body.read_to_end().await.is_err() {
                return Err(track.drop_connection("request body broke"));
            }
            return Ok(track.respond(error_reply(api, status, None), None));
        }
        Some(Action::RespondAfter { status, after }) if has_body => {
            if matches!(body.fill(after).await, Err(BodyError::Broken)) {
                return Err(track.drop_connection("request body broke"));
            }
            let reply = error_reply(api, status, None).header("connection", "close");
            return Ok(track.respond(reply, None));
        }
        Some(Action::RespondAfter { after: cut, .. }) => after = After::Cut { after: Some(cut) },
        Some(Action::Stall {
            after: cut,
            hold,
            resume,
        }) if has_body => {
            let _ = body.fill(cut).await;
            tokio::time::sleep(hold).await;
            if !resume {
                return Err(track.drop_connection("stall"));
            }
        }
        Some(Action::Stall {
            after: cut,
            hold,
            resume,
        }) => {
            after = After::Stall {
                after: cut,
                hold,
                resume,
            }
        }
        Some(Action::BrokenStream { after: cut }) if has_body => {
            let _ = body.fill(cut.unwrap_or(u64::MAX)).await;
            return Err(track.drop_connection("broken stream"));
        }
        Some(Action::BrokenStream { after: cut }) => after = After::Cut { after: cut },
        Some(Action::Slow(latency)) => tokio::time::sleep(latency).await,
        Some(Action::CommitThen503) => after = After::Replace503,
        Some(Action::CommitThenHang(hold)) => after = After::Hold(hold),
    }

    let data = match body.read_to_end().await {
        Ok(data) => data,
        Err(BodyError::Broken) => return Err(track.drop_connection("request body broke")),
        Err(BodyError::TooLarge) => {
            let message = format!(
                "the request body exceeds the fake's limit of {} bytes",
                fake.inner.limits.max_request_bytes
            );
            let reply = error_reply(api, 413, Some(&message)).header("connection", "close");
            return Ok(track.respond(reply, None));
        }
    };
    let reply = fake.serve(&route, &parts.headers, &query, data);

    match after {
        After::Nothing => Ok(track.respond(reply, None)),
        After::Replace503 => {
            track.committed |= reply.committed;
            let mut failed = error_reply(api, 503, None);
            failed.bucket = reply.bucket;
            failed.object = reply.object;
            Ok(track.respond(failed, None))
        }
        After::Hold(hold) => {
            track.committed |= reply.committed;
            tokio::time::sleep(hold).await;
            Err(track.drop_connection("commit then hang"))
        }
        After::Cut { .. } | After::Stall { .. } if reply.body.is_empty() => {
            // Nothing to cut: the stream breaks before the response.
            track.committed |= reply.committed;
            Err(track.drop_connection("broken stream"))
        }
        After::Cut { after } => {
            let cut = after.map_or(reply.body.len() / 2, |a| a as usize);
            let body = cut_body(reply.body.clone(), cut, None, false);
            Ok(track.respond(reply, Some(body)))
        }
        After::Stall {
            after,
            hold,
            resume,
        } => {
            let body = cut_body(reply.body.clone(), after as usize, Some(hold), resume);
            Ok(track.respond(reply, Some(body)))
        }
    }
}

/// The synchronous part of a request, under the lock.
struct Ctx<'a> {
    fake: &'a FakeGcs,
    state: &'a mut State,
    headers: &'a HeaderMap,
    query: &'a Query,
    /// `http://host:port` as the client addressed us, for links we hand out.
    base: String,
    now_ms: u64,
}

impl FakeGcs {
    fn serve(&self, route: &Route, headers: &HeaderMap, query: &Query, data: Bytes) -> Reply {
        let now_ms = self.inner.clock.now_unix_ms();
        let base = format!("http://{}", header(headers, "host").unwrap_or("localhost"));
        let mut state = self.state();
        let mut ctx = Ctx {
            fake: self,
            state: &mut state,
            headers,
            query,
            base,
            now_ms,
        };
        ctx.serve(route, data)
    }
}

impl Ctx<'_> {
    fn serve(&mut self, route: &Route, data: Bytes) -> Reply {
        match route {
            Route::RetryTestCreate => match self.state.retry_tests.create_json(&data) {
                Ok(test) => Reply::json(200, &test),
                Err(message) => error_reply(Api::Json, 400, Some(&message)),
            },
            Route::RetryTestList => Reply::json(200, &self.state.retry_tests.list_json()),
            Route::RetryTestGet(id) => match self.state.retry_tests.get_json(id) {
                Some(test) => Reply::json(200, &test),
                None => error_reply(Api::Json, 404, Some(&format!("no retry test {id:?}"))),
            },
            Route::RetryTestDelete(id) => match self.state.retry_tests.delete(id) {
                true => Reply::json(200, &json!({})),
                false => error_reply(Api::Json, 404, Some(&format!("no retry test {id:?}"))),
            },
            Route::BucketsList => {
                let items: Vec<Value> = self
                    .state
                    .buckets
                    .iter()
                    .map(|(name, b)| Self::bucket_resource(&self.base, name, b))
                    .collect();
                Reply::json(200, &json!({ "kind": "storage#buckets", "items": items }))
            }
            Route::BucketGet { bucket } => {
                match self.bucket(bucket).then(|| &self.state.buckets[bucket]) {
                    Some(b) => {
                        let resource = Self::bucket_resource(&self.base, bucket, b);
                        Reply::json(200, &resource)
                    }
                    None => no_such_bucket(Api::Json, bucket),
                }
            }
            Route::ObjectList { api, bucket } => self.list(*api, bucket),
            Route::ObjectGet {
                api,
                bucket,
                name,
                media,
                head,
            } => self.get(*api, bucket, name, *media, *head),
            Route::ObjectDelete { api, bucket, name } => self.delete(*api, bucket, name),
            Route::Upload { bucket, kind } => match kind {
                UploadKind::Media => self.upload_media(bucket, data),
                UploadKind::Multipart => self.upload_multipart(bucket, data),
                UploadKind::Resumable => self.start_resumable(bucket, data),
            },
            Route::ResumableChunk { upload_id } => self.resumable_chunk(upload_id, data),
            Route::ResumableCancel { upload_id } => match self.state.uploads.remove(upload_id) {
                Some(_) => Reply::new(499),
                None => error_reply(Api::Json, 404, Some("No such upload session.")),
            },
            Route::XmlPut { bucket, name } => self.xml_put(bucket, name, data),
            Route::Invalid {
                api,
                status,
                message,
            } => error_reply(*api, *status, Some(message)),
        }
    }

    /// Whether the bucket exists, creating it first when the fake creates buckets on
    /// demand.
    fn bucket(&mut self, name: &str) -> bool {
        self.ensure_bucket(name);
        self.state.buckets.contains_key(name)
    }

    fn ensure_bucket(&mut self, name: &str) {
        if self.fake.inner.auto_create_buckets && !self.state.buckets.contains_key(name) {
            self.state
                .buckets
                .insert(name.to_string(), Bucket::new(self.now_ms));
        }
    }

    fn bucket_resource(base: &str, name: &str, b: &Bucket) -> Value {
        let created = wire::rfc3339_millis(b.created_unix_ms);
        json!({
            "kind": "storage#bucket",
            "id": name,
            "selfLink": format!("{base}/storage/v1/b/{}", wire::encode_component(name)),
            "projectNumber": "0",
            "name": name,
            "timeCreated": created,
            "updated": created,
            "metageneration": "1",
            "location": "US-CENTRAL1",
            "locationType": "region",
            "storageClass": "STANDARD",
            "etag": "CAE=",
        })
    }

    fn object_resource(base: &str, bucket: &str, r: &ObjectRecord) -> Value {
        let (b, o) = (
            wire::encode_component(bucket),
            wire::encode_component(&r.name),
        );
        let time = wire::rfc3339_millis(r.created_unix_ms);
        json!({
            "kind": "storage#object",
            "id": format!("{bucket}/{}/{}", r.name, r.generation),
            "selfLink": format!("{base}/storage/v1/b/{b}/o/{o}"),
            "mediaLink": format!(
                "{base}/download/storage/v1/b/{b}/o/{o}?generation={}&alt=media",
                r.generation
            ),
            "name": r.name,
            "bucket": bucket,
            "generation": r.generation.to_string(),
            "metageneration": "1",
            "contentType": r.content_type,
            "storageClass": "STANDARD",
            "size": r.size.to_string(),
            "md5Hash": r.md5_base64(),
            "crc32c": r.crc32c_base64(),
            "etag": json_etag(r),
            "timeCreated": time,
            "updated": time,
            "timeStorageClassUpdated": time,
        })
    }

    /// Preconditions from the query and the `x-goog-if-generation-match` header.
    fn preconditions(&self, api: Api) -> Result<Preconditions, Box<Reply>> {
        let parse = |name: &str, value: Option<&str>| -> Result<Option<i64>, Box<Reply>> {
            value
                .map(|v| {
                    v.trim().parse::<i64>().map_err(|_| {
                        let message = format!("Invalid argument: {name}={v:?} is not an integer.");
                        Box::new(error_reply(api, 400, Some(&message)))
                    })
                })
                .transpose()
        };
        let if_generation_match = parse(
            "ifGenerationMatch",
            self.query
                .get("ifGenerationMatch")
                .or_else(|| header(self.headers, "x-goog-if-generation-match")),
        )?;
        let if_generation_not_match = parse(
            "ifGenerationNotMatch",
            self.query.get("ifGenerationNotMatch"),
        )?;
        Ok(Preconditions {
            if_generation_match,
            if_generation_not_match,
        })
    }

    fn list(&mut self, api: Api, bucket: &str) -> Reply {
        let max_limit = self.fake.inner.limits.max_list_results.max(1);
        let (max_key, token_key, after_key) = match api {
            Api::Json => ("maxResults", "pageToken", "startOffset"),
            Api::Xml => ("max-keys", "continuation-token", "start-after"),
        };
        let max = match self.query.get(max_key).map(str::parse::<usize>) {
            None => max_limit,
            Some(Ok(n)) => n.clamp(1, max_limit),
            Some(Err(_)) => return error_reply(api, 400, Some(&format!("Invalid {max_key}."))),
        };
        let resume = match self.query.get(token_key) {
            Some(token) => match URL_SAFE_NO_PAD
                .decode(token)
                .ok()
                .and_then(|t| String::from_utf8(t).ok())
            {
                Some(after) => Some(after),
                None => return error_reply(api, 400, Some(&format!("Invalid {token_key}."))),
            },
            None => None,
        };
        let prefix = self.query.get("prefix").unwrap_or("").to_string();
        let delimiter = self.query.get("delimiter").map(str::to_string);
        // A page token resumes after a name; JSON `startOffset` starts at a name
        // (inclusive), XML `start-after` after one.
        let (after, from) = match (resume, api) {
            (Some(resume), _) => (Some(resume), None),
            (None, Api::Json) => (None, self.query.get(after_key).map(str::to_string)),
            (None, Api::Xml) => (self.query.get(after_key).map(str::to_string), None),
        };
        if !self.bucket(bucket) {
            return no_such_bucket(api, bucket);
        }
        let b = &self.state.buckets[bucket];
        let after = after.or_else(|| {
            // Inclusive start: resume after the largest name below it.
            let from = from?;
            b.objects
                .range::<str, _>((Bound::Unbounded, Bound::Excluded(from.as_str())))
                .next_back()
                .map(|(k, _)| k.clone())
        });
        let page = b.list(&prefix, delimiter.as_deref(), after.as_deref(), max);
        let token = page
            .resume_after
            .as_ref()
            .map(|after| URL_SAFE_NO_PAD.encode(after.as_bytes()));
        match api {
            Api::Json => {
                let mut body = json!({ "kind": "storage#objects" });
                if !page.objects.is_empty() {
                    let items: Vec<Value> = page
                        .objects
                        .iter()
                        .map(|r| Self::object_resource(&self.base, bucket, r))
                        .collect();
                    body["items"] = Value::Array(items);
                }
                if !page.prefixes.is_empty() {
                    body["prefixes"] = json!(page.prefixes);
                }
                if let Some(token) = token {
                    body["nextPageToken"] = Value::String(token);
                }
                Reply::json(200, &body)
            }
            Api::Xml => {
                let mut xml = String::from("<?xml version='1.0' encoding='UTF-8'?>");
                xml.push_str("<ListBucketResult xmlns=\"http://doc.s3.amazonaws.com/2006-03-01\">");
                let esc = wire::xml_escape;
                xml.push_str(&format!(
                    "<Name>{}</Name><Prefix>{}</Prefix><KeyCount>{}</KeyCount><MaxKeys>{max}</MaxKeys>",
                    esc(bucket),
                    esc(&prefix),
                    page.objects.len() + page.prefixes.len()
                ));
                if let Some(d) = &delimiter {
                    xml.push_str(&format!("<Delimiter>{}</Delimiter>", esc(d)));
                }
                xml.push_str(&format!("<IsTruncated>{}</IsTruncated>", token.is_some()));
                if let Some(token) = &token {
                    xml.push_str(&format!(
                        "<NextContinuationToken>{token}</NextContinuationToken>"
                    ));
                }
                for r in &page.objects {
                    xml.push_str(&format!(
                        "<Contents><Key>{}</Key><Generation>{}</Generation><MetaGeneration>1</MetaGeneration><LastModified>{}</LastModified><ETag>\"{}\"</ETag><Size>{}</Size></Contents>",
                        esc(&r.name),
                        r.generation,
                        wire::rfc3339_millis(r.created_unix_ms),
                        r.md5_hex(),
                        r.size
                    ));
                }
                for p in &page.prefixes {
                    xml.push_str(&format!(
                        "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
                        esc(p)
                    ));
                }
                xml.push_str("</ListBucketResult>");
                Reply::xml(200, xml)
            }
        }
    }

    fn get(&mut self, api: Api, bucket: &str, name: &str, media: bool, head: bool) -> Reply {
        let pre = match self.preconditions(api) {
            Ok(pre) => pre,
            Err(reply) => return *reply,
        };
        let generation = self.query.get("generation").map(str::to_string);
        if !self.bucket(bucket) {
            return no_such_bucket(api, bucket);
        }
        let b = &self.state.buckets[bucket];
        let Some(object) = b.objects.get(name) else {
            return no_such_object(api, bucket, name);
        };
        if generation.is_some_and(|g| g != object.generation.to_string()) {
            return no_such_object(api, bucket, name);
        }
        let object = object.clone();
        if !pre.hold(Some(object.generation)) {
            return precondition_failed(api);
        }
        let r = &object.record(name);
        if !media {
            return Reply::json(200, &Self::object_resource(&self.base, bucket, r));
        }
        let etag = match api {
            Api::Json => json_etag(r),
            Api::Xml => format!("\"{}\"", r.md5_hex()),
        };
        if api == Api::Xml {
            if let Some(if_match) = header(self.headers, "if-match")
                && !etag_matches(if_match, &etag)
            {
                return precondition_failed(api);
            }
            if let Some(if_none_match) = header(self.headers, "if-none-match")
                && etag_matches(if_none_match, &etag)
            {
                let mut reply = Reply::new(304).header("etag", etag);
                reply.head_len = Some(0);
                return reply;
            }
        }
        let range = match header(self.headers, "range") {
            None => None,
            Some(value) => match wire::resolve_range(value, r.size) {
                Some(range) => Some(range),
                None => {
                    return error_reply(api, 416, Some("The requested range cannot be satisfied."))
                        .header("content-range", format!("bytes */{}", r.size));
                }
            },
        };
        let mut reply = Reply::new(if range.is_some() { 206 } else { 200 })
            .header("content-type", r.content_type.to_string())
            .header("etag", etag)
            .header("last-modified", wire::http_date(r.created_unix_ms))
            .header("x-goog-generation", r.generation.to_string())
            .header("x-goog-metageneration", "1")
            .header("x-goog-hash", goog_hash(r))
            .header("x-goog-stored-content-length", r.size.to_string())
            .header("x-goog-stored-content-encoding", "identity")
            .header("x-goog-storage-class", "STANDARD")
            .header("accept-ranges", "bytes");
        let (start, end) = range.unwrap_or((0, r.size.saturating_sub(1)));
        if let Some((start, end)) = range {
            reply = reply.header("content-range", format!("bytes {start}-{end}/{}", r.size));
        }
        let len = if r.size == 0 { 0 } else { end - start + 1 };
        if head {
            reply.head_len = Some(len);
            return reply;
        }
        match &object.bytes {
            Some(bytes) if len > 0 => reply.body(bytes.slice(start as usize..=end as usize)),
            Some(_) => reply,
            None => error_reply(
                api,
                501,
                Some(
                    "This fake keeps only digests of objects (keep_bytes is off); \
                     run it with --keep-bytes to download contents.",
                ),
            ),
        }
    }

    fn delete(&mut self, api: Api, bucket: &str, name: &str) -> Reply {
        let pre = match self.preconditions(api) {
            Ok(pre) => pre,
            Err(reply) => return *reply,
        };
        self.ensure_bucket(bucket);
        let state = &mut *self.state;
        let Some(b) = state.buckets.get_mut(bucket) else {
            return no_such_bucket(api, bucket);
        };
        let Some(object) = b.objects.get(name) else {
            return no_such_object(api, bucket, name);
        };
        if !pre.hold(Some(object.generation)) {
            state.stats.precondition_failures += 1;
            return precondition_failed(api);
        }
        b.objects.remove(name);
        Reply::new(204)
    }

    /// Stores an object if the bucket exists, the declared digests match and the
    /// preconditions hold.
    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        api: Api,
        bucket: &str,
        name: &str,
        content_type: Cow<'static, str>,
        data: Bytes,
        declared: &Declared,
        pre: Preconditions,
    ) -> Reply {
        if name.is_empty() {
            return error_reply(api, 400, Some("Required: the object name is missing."));
        }
        self.ensure_bucket(bucket);
        let keep_bytes = self.fake.inner.keep_bytes;
        let now_ms = self.now_ms;
        let state = &mut *self.state;
        let Some(b) = state.buckets.get_mut(bucket) else {
            return no_such_bucket(api, bucket);
        };
        let digests = Digests::of(&data);
        if let Some((algo, theirs, ours)) = declared.mismatch(&digests) {
            return match api {
                Api::Json => error_reply(
                    api,
                    400,
                    Some(&format!(
                        "Provided {algo} \"{theirs}\" doesn't match calculated {algo} \"{ours}\"."
                    )),
                ),
                Api::Xml => Reply::xml(
                    400,
                    wire::xml_error_body(
                        "BadDigest",
                        &format!("The {algo} you specified did not match what we computed."),
                        Some(&format!("declared {theirs}, computed {ours}")),
                    ),
                ),
            };
        }
        let current = b.objects.get(name).map(|o| o.generation);
        if !pre.hold(current) {
            state.stats.precondition_failures += 1;
            let mut reply = precondition_failed(api);
            reply.object = Some(name.to_string());
            return reply;
        }
        let generation = (state.last_generation + 1).max(now_ms as i64 * 1000);
        state.last_generation = generation;
        let record = ObjectRecord {
            name: name.to_string(),
            generation,
            size: data.len() as u64,
            crc32c: digests.crc32c,
            md5: digests.md5,
            created_unix_ms: now_ms,
            content_type,
        };
        let (key, stored) = StoredObject::new(record.clone(), keep_bytes.then_some(data));
        b.objects.insert(key, stored);
        state.stats.objects_committed += 1;
        let mut reply = match api {
            Api::Json => Reply::json(200, &Self::object_resource(&self.base, bucket, &record)),
            Api::Xml => Reply::new(200)
                .header("etag", format!("\"{}\"", record.md5_hex()))
                .header("last-modified", wire::http_date(record.created_unix_ms))
                .header("x-goog-generation", record.generation.to_string())
                .header("x-goog-metageneration", "1")
                .header("x-goog-hash", goog_hash(&record))
                .header("x-goog-stored-content-length", record.size.to_string())
                .header("x-goog-stored-content-encoding", "identity"),
        };
        reply.committed = true;
        reply.object = Some(record.name);
        reply
    }

    fn declared_from_headers(&self) -> Declared {
        let mut declared = Declared::default();
        for value in self.headers.get_all("x-goog-hash") {
            if let Ok(value) = value.to_str() {
                declared.parse_goog_hash(value);
            }
        }
        declared
    }

    fn content_type(&self) -> Cow<'static, str> {
        wire::content_type(header(self.headers, "content-type"))
    }

    fn upload_media(&mut self, bucket: &str, data: Bytes) -> Reply {
        let pre = match self.preconditions(Api::Json) {
            Ok(pre) => pre,
            Err(reply) => return *reply,
        };
        let name = self.query.get("name").unwrap_or("").to_string();
        let declared = self.declared_from_headers();
        let content_type = self.content_type();
        self.store(Api::Json, bucket, &name, content_type, data, &declared, pre)
    }

    fn upload_multipart(&mut self, bucket: &str, data: Bytes) -> Reply {
        let pre = match self.preconditions(Api::Json) {
            Ok(pre) => pre,
            Err(reply) => return *reply,
        };
        let bad = |message: String| error_reply(Api::Json, 400, Some(&message));
        let Some(boundary) =
            header(self.headers, "content-type").and_then(wire::multipart_boundary)
        else {
            return bad(
                "uploadType=multipart needs Content-Type: multipart/related; boundary=...".into(),
            );
        };
        let parts = match wire::split_multipart(&data, &boundary) {
            Ok(parts) if parts.len() == 2 => parts,
            Ok(parts) => {
                return bad(format!(
                    "multipart upload has {} parts; expected 2",
                    parts.len()
                ));
            }
            Err(e) => return bad(format!("malformed multipart body: {e}")),
        };
        let metadata: Value = match serde_json::from_slice(&parts[0].body) {
            Ok(Value::Object(m)) => Value::Object(m),
            _ => return bad("the first multipart part must be a JSON object".into()),
        };
        let name = self
            .query
            .get("name")
            .or_else(|| metadata.get("name").and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        let content_type = wire::content_type(
            metadata
                .get("contentType")
                .and_then(Value::as_str)
                .or_else(|| parts[1].header("content-type")),
        );
        let mut declared = declared_from_metadata(&metadata);
        let from_headers = self.declared_from_headers();
        declared.crc32c = declared.crc32c.or(from_headers.crc32c);
        declared.md5 = declared.md5.or(from_headers.md5);
        let media = parts[1].body.clone();
        self.store(
            Api::Json,
            bucket,
            &name,
            content_type,
            media,
            &declared,
            pre,
        )
    }

    fn start_resumable(&mut self, bucket: &str, data: Bytes) -> Reply {
        let pre = match self.preconditions(Api::Json) {
            Ok(pre) => pre,
            Err(reply) => return *reply,
        };
        let metadata = if data.is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_slice(&data) {
                Ok(Value::Object(m)) => Value::Object(m),
                _ => {
                    return error_reply(Api::Json, 400, Some("the metadata must be a JSON object"));
                }
            }
        };
        let name = self
            .query
            .get("name")
            .or_else(|| metadata.get("name").and_then(Value::as_str))
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            return error_reply(
                Api::Json,
                400,
                Some("Required: the object name is missing."),
            );
        }
        let content_type = wire::content_type(
            metadata
                .get("contentType")
                .and_then(Value::as_str)
                .or_else(|| header(self.headers, "x-upload-content-type")),
        );
        if !self.bucket(bucket) {
            return no_such_bucket(Api::Json, bucket);
        }
        let b = &self.state.buckets[bucket];
        if !pre.hold(b.objects.get(&name).map(|o| o.generation)) {
            self.state.stats.precondition_failures += 1;
            return precondition_failed(Api::Json);
        }
        let id = self.state.uploads.open(Session {
            bucket: bucket.to_string(),
            name: name.clone(),
            content_type,
            preconditions: pre,
            declared: declared_from_metadata(&metadata),
            received: BytesMut::new(),
            finalized: None,
        });
        let location = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=resumable&name={}&upload_id={id}",
            self.base,
            wire::encode_component(bucket),
            wire::encode_component(&name)
        );
        let mut reply = Reply::new(200)
            .header("location", location)
            .header("x-guploader-uploadid", id);
        reply.object = Some(name);
        reply
    }

    fn resumable_chunk(&mut self, upload_id: &str, data: Bytes) -> Reply {
        let named = self
            .state
            .uploads
            .get_mut(upload_id)
            .map(|s| (s.bucket.clone(), s.name.clone()));
        let mut reply = self.resumable_chunk_inner(upload_id, data);
        if let Some((bucket, name)) = named {
            reply.bucket = Some(bucket);
            reply.object = Some(name);
        }
        reply
    }

    fn resumable_chunk_inner(&mut self, upload_id: &str, data: Bytes) -> Reply {
        let max_bytes = self.fake.inner.limits.max_request_bytes;
        let content_range = header(self.headers, "content-range").map(str::to_string);
        let declared_now = self.declared_from_headers();
        let Some(session) = self.state.uploads.get_mut(upload_id) else {
            return error_reply(Api::Json, 404, Some("No such upload session."));
        };
        if let Some(record) = session.finalized.clone() {
            let bucket = session.bucket.clone();
            let mut reply = Reply::json(200, &Self::object_resource(&self.base, &bucket, &record));
            reply.object = Some(record.name);
            return reply;
        }
        let received = session.received.len() as u64;
        let range = match content_range {
            Some(value) => match wire::parse_content_range(&value) {
                Some(range) => range,
                None => {
                    let message = format!("Invalid Content-Range {value:?}.");
                    return error_reply(Api::Json, 400, Some(&message));
                }
            },
            // No Content-Range: the body is the rest of the object.
            None => wire::ContentRange {
                range: ChunkRange::From(received),
                total: None,
            },
        };
        let (first, last, total) = match range.range {
            ChunkRange::Bytes(first, last) => (first, Some(last), range.total),
            // Through the end of this body; with an unknown total, this body ends
            // the object.
            ChunkRange::From(first) => {
                let end = first + data.len() as u64;
                (first, end.checked_sub(1), range.total.or(Some(end)))
            }
            ChunkRange::Empty if data.is_empty() => (received, None, range.total),
            ChunkRange::Empty => {
                return error_reply(Api::Json, 400, Some("Content-Range bytes */N with a body."));
            }
        };
        if let Some(last) = last {
            if last + 1 - first != data.len() as u64 {
                let message = format!(
                    "Content-Range covers {} bytes but the body has {}.",
                    last + 1 - first,
                    data.len()
                );
                return error_reply(Api::Json, 400, Some(&message));
            }
            if first > received {
                let message = format!(
                    "Invalid request. According to the Content-Range header, the upload \
                     offset is {first} byte(s), which exceeds already uploaded size of \
                     {received} byte(s)."
                );
                return error_reply(Api::Json, 400, Some(&message));
            }
            let skip = (received - first) as usize;
            if skip < data.len() {
                if received + (data.len() - skip) as u64 > max_bytes {
                    return error_reply(Api::Json, 413, None);
                }
                session.received.extend_from_slice(&data[skip..]);
            }
        }
        let received = session.received.len() as u64;
        match total {
            Some(total) if received > total => {
                let message = format!("Received {received} bytes, more than the total {total}.");
                error_reply(Api::Json, 400, Some(&message))
            }
            Some(total) if received == total => self.finalize(upload_id, declared_now),
            _ => {
                let mut reply = Reply::new(308).header("x-guploader-uploadid", upload_id);
                if received > 0 {
                    reply = reply.header("range", format!("bytes=0-{}", received - 1));
                }
                reply
            }
        }
    }

    fn finalize(&mut self, upload_id: &str, declared_now: Declared) -> Reply {
        let Some(session) = self.state.uploads.get_mut(upload_id) else {
            return error_reply(Api::Json, 404, Some("No such upload session."));
        };
        let data = session.received.split().freeze();
        let (bucket, name) = (session.bucket.clone(), session.name.clone());
        let content_type = session.content_type.clone();
        let pre = session.preconditions;
        let declared = Declared {
            crc32c: declared_now.crc32c.or(session.declared.crc32c.clone()),
            md5: declared_now.md5.or(session.declared.md5.clone()),
        };
        let reply = self.store(
            Api::Json,
            &bucket,
            &name,
            content_type,
            data,
            &declared,
            pre,
        );
        if reply.committed {
            let record = self
                .state
                .buckets
                .get(&bucket)
                .and_then(|b| b.objects.get(&name))
                .map(|o| o.record(&name));
            if let Some(session) = self.state.uploads.get_mut(upload_id) {
                session.finalized = record;
            }
        } else {
            self.state.uploads.remove(upload_id);
        }
        reply
    }

    fn xml_put(&mut self, bucket: &str, name: &str, data: Bytes) -> Reply {
        let pre = match self.preconditions(Api::Xml) {
            Ok(pre) => pre,
            Err(reply) => return *reply,
        };
        let mut declared = self.declared_from_headers();
        if let Some(md5) = header(self.headers, "content-md5") {
            declared.md5 = Some(md5.trim().to_string());
        }
        let content_type = self.content_type();
        self.store(Api::Xml, bucket, name, content_type, data, &declared, pre)
    }
}

fn declared_from_metadata(metadata: &Value) -> Declared {
    let field = |k: &str| metadata.get(k).and_then(Value::as_str).map(str::to_string);
    Declared {
        crc32c: field("crc32c"),
        md5: field("md5Hash"),
    }
}

fn goog_hash(r: &ObjectRecord) -> String {
    format!("crc32c={},md5={}", r.crc32c_base64(), r.md5_base64())
}

/// The JSON API's opaque ETag: base64 of the generation and metageneration.
fn json_etag(r: &ObjectRecord) -> String {
    use base64::engine::general_purpose::STANDARD;
    STANDARD.encode(format!("{}/1", r.generation))
}

/// `If-Match`/`If-None-Match` against an ETag: `*` or any listed tag.
fn etag_matches(condition: &str, etag: &str) -> bool {
    let bare = etag.trim_matches('"');
    condition
        .split(',')
        .map(|c| c.trim().trim_start_matches("W/").trim_matches('"'))
        .any(|c| c == "*" || c == bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: Method, uri: &str) -> Route {
        let uri: Uri = uri.parse().unwrap();
        let query = Query(wire::parse_query(uri.query()));
        Route::parse(&method, &uri, &query)
    }

    #[test]
    fn routes_cover_the_json_and_xml_apis() {
        assert_eq!(
            route(Method::PUT, "/bkt/spool%2Fa%20b%2Ebin"),
            Route::XmlPut {
                bucket: "bkt".into(),
                name: "spool/a b.bin".into()
            }
        );
        assert_eq!(
            route(Method::GET, "/storage/v1/b/bkt/o/a%2Fb?alt=media"),
            Route::ObjectGet {
                api: Api::Json,
                bucket: "bkt".into(),
                name: "a/b".into(),
                media: true,
                head: false
            }
        );
        assert_eq!(
            route(
                Method::POST,
                "/upload/storage/v1/b/bkt/o?uploadType=multipart"
            ),
            Route::Upload {
                bucket: "bkt".into(),
                kind: UploadKind::Multipart
            }
        );
        assert_eq!(
            route(
                Method::PUT,
                "/upload/storage/v1/b/bkt/o?uploadType=resumable&upload_id=x"
            ),
            Route::ResumableChunk {
                upload_id: "x".into()
            }
        );
        assert_eq!(
            route(Method::GET, "/bkt?list-type=2&prefix=a"),
            Route::ObjectList {
                api: Api::Xml,
                bucket: "bkt".into()
            }
        );
        assert_eq!(route(Method::GET, "/storage/v1/b"), Route::BucketsList);
        assert_eq!(
            route(Method::GET, "/storage/v1/b/bkt"),
            Route::BucketGet {
                bucket: "bkt".into()
            }
        );
        assert!(matches!(
            route(Method::PATCH, "/storage/v1/b/bkt/o/x"),
            Route::Invalid { status: 404, .. }
        ));
        assert!(matches!(
            route(Method::GET, "/"),
            Route::Invalid {
                status: 404,
                api: Api::Xml,
                ..
            }
        ));
        assert!(matches!(
            route(Method::GET, "/bkt/%FF"),
            Route::Invalid { status: 400, .. }
        ));
    }

    #[test]
    fn etag_conditions_accept_lists_and_stars() {
        assert!(etag_matches("\"abc\"", "\"abc\""));
        assert!(etag_matches("\"x\", \"abc\"", "\"abc\""));
        assert!(etag_matches("*", "\"abc\""));
        assert!(!etag_matches("\"x\"", "\"abc\""));
    }
}
