//! The clients of a fault run: in this process, over plain HTTP/1.1 (a connection per
//! request), the three ways an upload reaches the relay, each create-if-absent: an
//! XML API `PUT`, a JSON API media upload, and a resumable upload of two chunks (the
//! first 256 KiB, then the rest). Each answer is kept with its status, whether it
//! carried `Retry-After`, and `x-spool-outcome`; an upload answered 200 is
//! acknowledged and must be in the bucket at the end.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use md5::Digest as _;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use tokio::net::TcpStream;

use crate::args::BUCKET;

/// How long one request may take, connecting included.
const DEADLINE: Duration = Duration::from_secs(30);
/// A resumable upload's first chunk (Cloud Storage's chunk granularity).
const CHUNK: usize = 256 * 1024;

/// The way an upload is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `PUT /BUCKET/NAME` (XML API), `x-goog-if-generation-match: 0`.
    Xml,
    /// `POST /upload/storage/v1/b/BUCKET/o?uploadType=media&name=NAME&ifGenerationMatch=0`.
    Media,
    /// `POST ...?uploadType=resumable`, then the chunks (the answer counted is the
    /// first chunk's, or the start's when it failed; the last chunk's when it was
    /// reached).
    Resumable,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Xml, Kind::Media, Kind::Resumable];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Xml => "xml PUT",
            Kind::Media => "json media",
            Kind::Resumable => "resumable",
        }
    }
}

/// What a request was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status, or `None` when no answer came (refused, reset, timed out).
    pub status: Option<u16>,
    pub retry_after: bool,
    pub outcome: Option<String>,
    pub location: Option<String>,
    /// The error text (no answer), or the start of a refusal's body.
    pub text: String,
}

/// One request of a resumable upload, as the tally counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// The whole upload (XML, media).
    Whole,
    /// The session's start (`POST ...uploadType=resumable`).
    Start,
    /// The first chunk (`PUT`, 308 expected).
    Chunk,
    /// The last chunk (`PUT`, 200 expected).
    Last,
}

/// What an answer is counted under: (phase, kind, step, status or "none",
/// `Retry-After` present).
pub type Key = (String, Kind, Step, String, bool);

/// Answers counted by (kind, step, status or "none", `Retry-After` present), with
/// one example text each.
#[derive(Debug, Default)]
pub struct Tally {
    /// The phase answers are counted under now.
    pub phase: String,
    pub counts: BTreeMap<Key, (u64, String)>,
    /// Uploads answered 200: (name, MD5 in base64, size).
    pub acknowledged: Vec<(String, String, u64)>,
}

impl Tally {
    fn add(&mut self, kind: Kind, step: Step, answer: &Answer) {
        let status = answer.status.map_or("none".to_string(), |s| s.to_string());
        let entry = self
            .counts
            .entry((self.phase.clone(), kind, step, status, answer.retry_after))
            .or_insert((0, String::new()));
        entry.0 += 1;
        if entry.1.is_empty() {
            entry.1 = answer.text.chars().take(160).collect();
        }
    }

    /// Answers in `phase` (all phases: `None`) with this status, any kind and step.
    pub fn with_status(&self, phase: Option<&str>, status: &str) -> u64 {
        (self.counts.iter())
            .filter(|((p, _, _, s, _), _)| phase.is_none_or(|phase| p == phase) && s == status)
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// 503s without `Retry-After`.
    pub fn bare_503s(&self) -> u64 {
        (self.counts.iter())
            .filter(|((_, _, _, s, ra), _)| s == "503" && !ra)
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// Statuses of 500 and above other than 503.
    pub fn server_errors(&self) -> u64 {
        (self.counts.iter())
            .filter(|((_, _, _, s, _), _)| s.starts_with('5') && s != "503")
            .map(|(_, (n, _))| n)
            .sum()
    }

    /// The kinds that got a 503 with `Retry-After` at some step in `phase`.
    pub fn backpressure_in(&self, phase: &str) -> Vec<Kind> {
        let mut kinds: Vec<Kind> = (self.counts.keys())
            .filter(|(p, _, _, s, ra)| p == phase && s == "503" && *ra)
            .map(|(_, k, _, _, _)| *k)
            .collect();
        kinds.dedup();
        kinds
    }

    /// One line per (phase, kind, step, status, Retry-After).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut last_phase = None;
        for ((phase, kind, step, status, retry_after), (n, text)) in &self.counts {
            if last_phase != Some(phase) {
                out.push_str(&format!("    [{phase}]\n"));
                last_phase = Some(phase);
            }
            let step = match step {
                Step::Whole => "",
                Step::Start => " start",
                Step::Chunk => " chunk",
                Step::Last => " last chunk",
            };
            let ra = if *retry_after { " Retry-After" } else { "" };
            let text = if status == "200" || status == "308" {
                String::new()
            } else {
                format!("  ({text})")
            };
            out.push_str(&format!(
                "      {:<22} {status}{ra}: {n}{text}\n",
                format!("{}{step}", kind.label())
            ));
        }
        out
    }
}

/// A shared tally for writers.
pub type SharedTally = Arc<Mutex<Tally>>;

/// Uploads `data` under `name` the `kind` way; counts every answer in `tally`.
pub async fn upload(relay: SocketAddr, kind: Kind, name: &str, data: Bytes, tally: &SharedTally) {
    let md5 = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(&data));
    let size = data.len() as u64;
    let encoded = utf8_percent_encode(name, NON_ALPHANUMERIC).to_string();
    let acknowledged = match kind {
        Kind::Xml => {
            let path = format!("/{BUCKET}/{}", xml_path(name));
            let headers = [("x-goog-if-generation-match", "0".to_string())];
            let answer = send(relay, Method::PUT, &path, &headers, data).await;
            count(tally, kind, Step::Whole, &answer);
            answer.status == Some(200)
        }
        Kind::Media => {
            let path = format!(
                "/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={encoded}&ifGenerationMatch=0"
            );
            let headers = [("content-type", "application/octet-stream".to_string())];
            let answer = send(relay, Method::POST, &path, &headers, data).await;
            count(tally, kind, Step::Whole, &answer);
            answer.status == Some(200)
        }
        Kind::Resumable => resumable(relay, &encoded, data, tally).await,
    };
    if acknowledged {
        let mut tally = tally.lock().expect("tally");
        tally.acknowledged.push((name.to_string(), md5, size));
    }
}

async fn resumable(relay: SocketAddr, encoded: &str, data: Bytes, tally: &SharedTally) -> bool {
    let kind = Kind::Resumable;
    let path = format!(
        "/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name={encoded}&ifGenerationMatch=0"
    );
    let headers = [("content-type", "application/json".to_string())];
    let start = send(relay, Method::POST, &path, &headers, Bytes::new()).await;
    count(tally, kind, Step::Start, &start);
    let Some(location) = start.location.filter(|_| start.status == Some(200)) else {
        return false;
    };
    // The session URL names the relay; keep its path and query.
    let session = match location.split_once("://") {
        Some((_, rest)) => rest
            .find('/')
            .map_or("/".to_string(), |i| rest[i..].to_string()),
        None => location,
    };
    let total = data.len();
    let first = data.slice(..CHUNK.min(total));
    if total > CHUNK {
        let range = format!("bytes 0-{}/*", CHUNK - 1);
        let answer = send(
            relay,
            Method::PUT,
            &session,
            &[("content-range", range)],
            first,
        )
        .await;
        count(tally, kind, Step::Chunk, &answer);
        if answer.status != Some(308) {
            return false;
        }
    }
    let from = if total > CHUNK { CHUNK } else { 0 };
    let range = if total == 0 {
        "bytes */0".to_string()
    } else {
        format!("bytes {from}-{}/{total}", total - 1)
    };
    let rest = data.slice(from..);
    let answer = send(
        relay,
        Method::PUT,
        &session,
        &[("content-range", range)],
        rest,
    )
    .await;
    count(tally, kind, Step::Last, &answer);
    answer.status == Some(200)
}

fn count(tally: &SharedTally, kind: Kind, step: Step, answer: &Answer) {
    tally.lock().expect("tally").add(kind, step, answer);
}

/// An object name as an XML API path: each segment percent-encoded, `/` kept.
fn xml_path(name: &str) -> String {
    name.split('/')
        .map(|s| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// One request on a new connection; never fails: a failure is an answer without a
/// status.
pub async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Bytes,
) -> Answer {
    let exchange = exchange(addr, method, path, headers, body);
    match tokio::time::timeout(DEADLINE, exchange).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => no_answer(format!("{e:#}")),
        Err(_) => no_answer(format!("no answer within {DEADLINE:?}")),
    }
}

fn no_answer(text: String) -> Answer {
    Answer {
        status: None,
        retry_after: false,
        outcome: None,
        location: None,
        text,
    }
}

async fn exchange(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Bytes,
) -> anyhow::Result<Answer> {
    let stream = TcpStream::connect(addr).await.context("connect")?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let connection = tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, addr.to_string())
        .header(http::header::CONTENT_LENGTH, body.len().to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = sender.send_request(request.body(Full::new(body))?).await?;
    let status = response.status().as_u16();
    let header = |name: &str| {
        (response.headers().get(name))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (retry_after, outcome, location) = (
        header("retry-after").is_some(),
        header("x-spool-outcome"),
        header("location"),
    );
    let body = response.into_body().collect().await?.to_bytes();
    connection.abort();
    Ok(Answer {
        status: Some(status),
        retry_after,
        outcome,
        location,
        text: String::from_utf8_lossy(&body).replace('\n', " "),
    })
}

/// Writers: `count` tasks, each uploading objects of `size` bytes under
/// `prefix/<writer>/<seq>`, cycling through the kinds, until `stop` is set; a 503
/// or no answer is followed by `pause`.
pub struct Writers {
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Writers {
    pub fn start(
        relay: SocketAddr,
        prefix: &str,
        count: usize,
        size: usize,
        pause: Duration,
        tally: &SharedTally,
    ) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks = (0..count)
            .map(|w| {
                let (stop, tally, prefix) = (stop.clone(), tally.clone(), prefix.to_string());
                tokio::spawn(async move {
                    let mut seq = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let kind = Kind::ALL[(seq as usize + w) % Kind::ALL.len()];
                        let name = format!("{prefix}/w{w}/{seq:06}");
                        let data = payload(w, seq, size);
                        let before = tally.lock().expect("tally").acknowledged.len();
                        upload(relay, kind, &name, data, &tally).await;
                        let after = tally.lock().expect("tally").acknowledged.len();
                        if after == before {
                            tokio::time::sleep(pause).await;
                        }
                        seq += 1;
                    }
                })
            })
            .collect();
        Self { stop, tasks }
    }

    /// Tells every writer to stop after its upload in progress, and waits.
    pub async fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// `size` bytes that differ per writer and object.
fn payload(writer: usize, seq: u64, size: usize) -> Bytes {
    let mut state = (writer as u64) << 40 ^ seq ^ 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(size);
    Bytes::from(out)
}
