//! Serves one HTTP request: routes it, decides its fault, moves its body as the
//! fault says, has the API answer it under the lock with the whole body in hand
//! ([`crate::api`]), and records what happened (statistics, a `tracing` event, the
//! observer).
//!
//! A request that must end without a response returns [`Dropped`]; hyper then closes
//! the connection without writing anything.

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Body, Frame, Incoming};

use crate::api::{Served, Then};
use crate::fake::{FakeGcs, RequestEvent};
use crate::faults::{Action, Fault};
use crate::retry_test::{Instruction, UnknownTest};
use crate::target::Target;
use crate::wire;
use crate::wire::{Api, Operation, Query, Reply, Route, UploadKind, error_reply, header};

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

/// Serves one request (hyper's service function).
pub(crate) async fn handle(
    fake: FakeGcs,
    req: Request<Incoming>,
) -> Result<Response<ResponseBody>, Dropped> {
    let at = fake.inner.clock.elapsed();
    let (parts, body) = req.into_parts();
    let query = Query::parse(parts.uri.query());
    let target = Target::parse(&parts.method, &parts.uri, &query);
    let api = target.api();
    let mut track = Track::new(&fake, at, &target);
    track.method = parts.method.clone();
    track.uri = parts.uri.clone();
    let mut body = RequestBody::new(body, fake.inner.limits.max_request_bytes);
    let (after, data) = match prepare(&fake, &mut track, &parts.headers, &mut body, api).await {
        Ok(prepared) => prepared,
        Err(Early::Respond(reply)) => return Ok(track.respond(reply.into(), None)),
        Err(Early::Drop(why)) => return Err(track.drop_connection(why)),
    };
    let mut served = fake.serve(&target, &parts.headers, &query, data);
    if let Some(fault) = served.fault.take() {
        track.fault = Some(fault);
    }
    let after = served.then.take().map_or(after, After::from);
    finish(after, served, track, api).await
}

/// How a request ends before the API serves it.
enum Early {
    /// With this reply.
    Respond(Reply),
    /// By dropping the connection, for this reason.
    Drop(&'static str),
}

/// Decides the request's fault, applies what the fault does before serving, and
/// reads the body: what to do after serving, and the body.
async fn prepare(
    fake: &FakeGcs,
    track: &mut Track,
    headers: &HeaderMap,
    body: &mut RequestBody,
    api: Api,
) -> Result<(After, Bytes), Early> {
    let test_id = header(headers, "x-retry-test-id");
    let request = Arrival {
        op: track.operation,
        object: track.object.as_deref(),
        test_id,
        at: track.at,
        session: track.session,
    };
    let action = match fake.arrive(&request) {
        Ok(decision) => decision.map(|(fault, action)| {
            track.fault = Some(fault);
            action
        }),
        Err(UnknownTest) => {
            let message = format!("unknown x-retry-test-id {:?}", test_id.unwrap_or(""));
            return Err(Early::Respond(error_reply(api, 400, Some(&message))));
        }
    };
    let after = match action {
        None => After::Nothing,
        Some(action) => before_serving(action, body, api).await?,
    };
    let data = match body.read_to_end().await {
        Ok(data) => {
            track.received_bytes = data.len() as u64;
            data
        }
        Err(BodyError::Broken) => return Err(Early::Drop("request body broke")),
        Err(BodyError::TooLarge) => {
            let message = format!(
                "the request body exceeds the fake's limit of {} bytes",
                body.limit
            );
            let reply = error_reply(api, 413, Some(&message)).header("connection", "close");
            return Err(Early::Respond(reply));
        }
    };
    Ok((after, data))
}

/// What a fault does before the request is served: end it early, delay it, or
/// leave a mark for after serving. A fault on a request with a body acts on the
/// body; on one without, on the response.
async fn before_serving(action: Action, body: &mut RequestBody, api: Api) -> Result<After, Early> {
    let has_body = body.has_body;
    match action {
        Action::Reset => return Err(Early::Drop("reset")),
        Action::Hang(hold) => {
            // The body is taken in (and dropped) while no answer comes, as a server
            // whose socket still reads: once it is in, hyper sees the client close
            // the connection and drops this request then, as a real front end
            // abandons one whose client went away. Left unread, a body larger than
            // what hyper reads with the head kept the request, its timer and its
            // connection for all of `hold`.
            let until = tokio::time::Instant::now() + hold;
            if body.discard_rest().await.is_err() {
                return Err(Early::Drop("request body broke"));
            }
            tokio::time::sleep_until(until).await;
            return Err(Early::Drop("hang"));
        }
        Action::Respond(status) => {
            if body.read_to_end().await.is_err() {
                return Err(Early::Drop("request body broke"));
            }
            return Err(Early::Respond(error_reply(api, status, None)));
        }
        Action::RespondAfter { status, after } if has_body => {
            if matches!(body.fill(after).await, Err(BodyError::Broken)) {
                return Err(Early::Drop("request body broke"));
            }
            let reply = error_reply(api, status, None).header("connection", "close");
            return Err(Early::Respond(reply));
        }
        Action::RespondAfter { after, .. } => return Ok(After::Cut { after: Some(after) }),
        Action::Stall {
            after,
            hold,
            resume,
        } if has_body => {
            let _ = body.fill(after).await;
            tokio::time::sleep(hold).await;
            if !resume {
                return Err(Early::Drop("stall"));
            }
        }
        Action::Stall {
            after,
            hold,
            resume,
        } => {
            return Ok(After::Stall {
                after,
                hold,
                resume,
            });
        }
        Action::BrokenStream { after } if has_body => {
            let _ = body.fill(after.unwrap_or(u64::MAX)).await;
            return Err(Early::Drop("broken stream"));
        }
        Action::BrokenStream { after } => return Ok(After::Cut { after }),
        Action::Slow(latency) => tokio::time::sleep(latency).await,
        Action::CommitThen503 => return Ok(After::Replace503),
        Action::CommitThenHang(hold) => return Ok(After::Hold(hold)),
    }
    Ok(After::Nothing)
}

/// Sends what the API served, as the fault decided before serving.
async fn finish(
    after: After,
    served: Served,
    mut track: Track,
    api: Api,
) -> Result<Response<ResponseBody>, Dropped> {
    match after {
        After::Nothing => Ok(track.respond(served, None)),
        After::Replace503 => {
            track.committed |= served.committed;
            let failed = Served {
                reply: error_reply(api, 503, None),
                committed: false,
                ..served
            };
            Ok(track.respond(failed, None))
        }
        After::Hold(hold) => {
            track.committed |= served.committed;
            tokio::time::sleep(hold).await;
            Err(track.drop_connection("commit then hang"))
        }
        After::Drop => {
            track.committed |= served.committed;
            Err(track.drop_connection("broken stream"))
        }
        After::Delay(hold) => {
            tokio::time::sleep(hold).await;
            Ok(track.respond(served, None))
        }
        After::Cut { .. } | After::Stall { .. } if served.reply.body.is_empty() => {
            // Nothing to cut: the stream breaks before the response.
            track.committed |= served.committed;
            Err(track.drop_connection("broken stream"))
        }
        After::Cut { after } => {
            let cut = after.map_or(served.reply.body.len() / 2, |a| a as usize);
            let body = cut_body(served.reply.body.clone(), cut, None, false);
            Ok(track.respond(served, Some(body)))
        }
        After::Stall {
            after,
            hold,
            resume,
        } => {
            let body = cut_body(
                served.reply.body.clone(),
                after as usize,
                Some(hold),
                resume,
            );
            Ok(track.respond(served, Some(body)))
        }
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
struct RequestBody {
    body: Incoming,
    buf: BytesMut,
    /// Whether the request has a body at all.
    has_body: bool,
    done: bool,
    limit: u64,
}

enum BodyError {
    TooLarge,
    Broken,
}

impl RequestBody {
    fn new(body: Incoming, limit: u64) -> Self {
        let done = body.is_end_stream();
        Self {
            body,
            buf: BytesMut::new(),
            has_body: !done,
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

    /// Reads the rest of the body and keeps none of it.
    async fn discard_rest(&mut self) -> Result<(), BodyError> {
        while !self.done {
            match self.body.frame().await {
                None => self.done = true,
                Some(Err(_)) => return Err(BodyError::Broken),
                Some(Ok(_)) => {}
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
    /// Whether the request belongs to a resumable session (opens one, or is one
    /// of its requests): instructions that count a session's bytes wait for the
    /// API.
    session: bool,
    bucket: Option<String>,
    object: Option<String>,
    fault: Option<Fault>,
    status: Option<u16>,
    committed: bool,
    dropped: Option<&'static str>,
    /// The request line, for the log (cheap clones: a `Uri` shares its bytes).
    method: http::Method,
    uri: http::Uri,
    /// Bytes of the request's body and of the answer's.
    received_bytes: u64,
    sent_bytes: u64,
    /// A refusal's message, when the log is on.
    message: Option<String>,
}

impl Track {
    fn new(fake: &FakeGcs, at: Duration, target: &Target) -> Self {
        let (bucket, object) = target.names();
        let session = matches!(
            target,
            Target::Api(Route::ResumableChunk { .. })
                | Target::Api(Route::Upload {
                    kind: UploadKind::Resumable,
                    ..
                })
        );
        Track {
            fake: fake.clone(),
            at,
            operation: target.operation(),
            session,
            bucket: bucket.map(str::to_string),
            object: object.map(str::to_string),
            fault: None,
            status: None,
            committed: false,
            dropped: None,
            method: http::Method::GET,
            uri: http::Uri::default(),
            received_bytes: 0,
            sent_bytes: 0,
            message: None,
        }
    }

    fn respond(mut self, served: Served, body: Option<ResponseBody>) -> Response<ResponseBody> {
        self.status = Some(served.reply.status);
        self.committed |= served.committed;
        if served.bucket.is_some() {
            self.bucket = served.bucket;
        }
        if served.object.is_some() {
            self.object = served.object;
        }
        let reply = served.reply;
        self.sent_bytes = reply.body.len() as u64;
        if tracing::enabled!(target: "fake_gcs", tracing::Level::INFO) {
            self.message = wire::refusal_message(&reply);
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
            method = %self.method,
            path = self.uri.path(),
            query = %wire::redacted_query(self.uri.query().unwrap_or("")),
            op = self.operation.name(),
            bucket = self.bucket.as_deref().unwrap_or(""),
            object = self.object.as_deref().unwrap_or(""),
            fault = fault.as_deref().unwrap_or("none"),
            status = self.status.map_or_else(|| "dropped".to_string(), |s| s.to_string()),
            took_ms = took.as_millis() as u64,
            received_bytes = self.received_bytes,
            sent_bytes = self.sent_bytes,
            dropped = self.dropped.unwrap_or(""),
            message = self.message.as_deref().unwrap_or(""),
            "request"
        );
        if self.operation.is_counted() {
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
    /// Drop the connection without answering.
    Drop,
    /// Wait, then answer.
    Delay(Duration),
    Cut {
        after: Option<u64>,
    },
    Stall {
        after: u64,
        hold: Duration,
        resume: bool,
    },
}

impl From<Then> for After {
    fn from(then: Then) -> Self {
        match then {
            Then::Drop => After::Drop,
            Then::Cut(after) => After::Cut { after: Some(after) },
            Then::Delay(hold) => After::Delay(hold),
        }
    }
}

/// A request as it arrives, for deciding its fault.
struct Arrival<'a> {
    op: Operation,
    object: Option<&'a str>,
    test_id: Option<&'a str>,
    at: Duration,
    /// Whether it belongs to a resumable session (see [`Track`]).
    session: bool,
}

impl FakeGcs {
    /// Counts the request and decides its fault, in one critical section. A
    /// testbench instruction that counts a session's bytes stays queued for the
    /// API when the request belongs to a session; one that acts only on sessions
    /// stays queued for any other request.
    fn arrive(&self, request: &Arrival<'_>) -> Result<Option<(Fault, Action)>, UnknownTest> {
        let Arrival {
            op,
            object,
            test_id,
            at,
            session,
        } = *request;
        if !op.is_counted() {
            return Ok(None);
        }
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
        let leave = |i: &Instruction| match session {
            true => i.counts_session_bytes(),
            false => i.only_for_sessions(),
        };
        let decision = match state.retry_tests.next(test_id, op, leave)? {
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
