//! The relay's resumable session state machine, end to end: a `relay::Relay` over an
//! in-memory spool (`spool::testing::mem_spool`) writing to an
//! `object_store::memory::InMemory`, served by `relay::Connections` over in-memory
//! streams, fed raw HTTP/1.1 requests derived from the input: sessions opened with
//! `POST /upload/storage/v1/b/bkt/o?uploadType=resumable&name=...`, then `PUT`s with a
//! `Content-Range` and a body, status queries (`bytes */*`, `bytes */T`) and
//! `DELETE`s, on a current-thread runtime with paused time (a new one per input).
//!
//! Input, as text lines (so that seeds are readable), at most 16 requests:
//!
//! - `open NAME DECLARED TYPE`: opens a session for object `NAME` (the first 8
//!   bytes, `[a-z0-9]`; names may repeat: every write is create-if-absent), with
//!   `X-Upload-Content-Length: DECLARED` unless it is `-`, and
//!   `X-Upload-Content-Type` when `TYPE` is `1`.
//! - `put S LEN VARIANT FLAGS RANGE`: a `PUT` to session `S` (modulo those opened)
//!   with `LEN` bytes (at most 300,000; at most 600,000 in all) and
//!   `Content-Range: RANGE` (none for `-`), where `R` stands for the bytes the last
//!   308 counted, `E` for `R + LEN - 1` and `T` for `R + LEN` (`bytes R-E/*` is the
//!   next chunk, `bytes R-E/T` the last, `bytes */*` a status query). `FLAGS`: `w`
//!   names another bucket in the URL, `t` sends half the body and closes.
//! - `delete S`: `DELETE` of session `S`.
//!
//! Bodies are a pattern of the offset and one of four variants (`VARIANT`), so every
//! byte the relay holds can be traced to a request that sent it at that offset.
//!
//! Asserts:
//! - Every request whose bytes were all sent gets an HTTP response, never a 500.
//! - A 308's `Range: bytes=0-N` never counts more than the bytes sent to that
//!   session (`N + 1` is at most the end of the furthest body sent to it), and
//!   never goes down while the session lives.
//! - A 200 completing an upload as `stored` leaves in the store an object whose
//!   every byte was sent to that session at that offset, as long as the answer's
//!   `size` says, ending where a request said the object ends.

#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use object_store::ObjectStoreExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use relay::{Connections, Relay, RelayConfig};
use spool::testing::ManualClock;
use spool::{Remote, SpoolConfig, Uploader, UploaderConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most bytes one request's body, and all of an input's, may have.
const MAX_BODY: u64 = 300_000;
const MAX_BODIES: u64 = 600_000;

/// One session as the client knows it.
struct Session {
    id: String,
    name: String,
    /// Every body sent to it whose offset the request named: (first, bytes).
    sent: Vec<(u64, Vec<u8>)>,
    /// The bytes the last 308 counted.
    received: u64,
    /// Whether the relay forgot it (404) or completed it.
    ended: bool,
}

impl Session {
    fn sent_end(&self) -> u64 {
        self.sent
            .iter()
            .map(|(first, bytes)| first + bytes.len() as u64)
            .max()
            .unwrap_or(0)
    }

    fn sent_at(&self, offset: u64, byte: u8) -> bool {
        self.sent.iter().any(|(first, bytes)| {
            offset >= *first
                && offset - first < bytes.len() as u64
                && bytes[(offset - first) as usize] == byte
        })
    }
}

fn pattern(variant: u8, offset: u64) -> u8 {
    ((offset % 251) as u8) ^ ((variant % 4) << 6)
}

/// An HTTP answer, parsed as far as the checks need.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn parse(raw: &[u8]) -> Option<Answer> {
        let end = memchr::memmem::find(raw, b"\r\n\r\n")?;
        let head = std::str::from_utf8(&raw[..end]).ok()?;
        let mut lines = head.split("\r\n");
        let status = lines
            .next()?
            .strip_prefix("HTTP/1.1 ")?
            .get(..3)?
            .parse()
            .ok()?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Some(Answer {
            status,
            headers,
            body: raw[end + 4..].to_vec(),
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` (its body cut to `send` bytes, then the write side closed) on a
/// new connection; the bytes answered.
async fn exchange(connections: &Connections, request: &[u8]) -> Vec<u8> {
    let answer = exchange_quietly(connections, request).await;
    if trace() {
        let line = |b: &[u8]| {
            let end = memchr::memchr(b'\r', b).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        };
        let range = String::from_utf8_lossy(request)
            .lines()
            .find(|l| l.starts_with("Content-Range"))
            .map(str::to_string)
            .unwrap_or_default();
        let answered = String::from_utf8_lossy(&answer)
            .lines()
            .find(|l| l.starts_with("range:") || l.starts_with("x-spool-outcome:"))
            .map(str::to_string)
            .unwrap_or_default();
        eprintln!(
            "{} [{range}] -> {} {answered}",
            line(request),
            line(&answer)
        );
    }
    answer
}

/// Whether to print each exchange (`FUZZ_TRACE=1`, when running one input).
fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("FUZZ_TRACE").is_some())
}

async fn exchange_quietly(connections: &Connections, request: &[u8]) -> Vec<u8> {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    connections.serve_connection(server).await;
    // A refusal may close the connection before the body is read.
    let _ = client.write_all(request).await;
    let _ = client.shutdown().await;
    let mut answer = Vec::new();
    let _ = client.read_to_end(&mut answer).await;
    answer
}

fn request(method: &str, target: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:4443\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn session_target(bucket: &str, session: &Session) -> String {
    format!(
        "/upload/storage/v1/b/{bucket}/o?uploadType=resumable&name={}&upload_id={}",
        session.name, session.id
    )
}

/// A header value made of `s`'s printable ASCII.
fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .collect()
}

/// `bytes=0-N` as a count of bytes; 0 without the header.
fn range_count(answer: &Answer) -> u64 {
    match answer.header("range") {
        None => 0,
        Some(range) => {
            let last: u64 = range
                .strip_prefix("bytes=0-")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("a 308 with Range {range:?}"));
            last + 1
        }
    }
}

/// `value` with `R`, `E` and `T` replaced for a body of `len` bytes after
/// `received`.
fn substituted(value: &str, received: u64, len: u64) -> String {
    let mut out = String::new();
    for c in value.chars() {
        match c {
            'R' => out.push_str(&received.to_string()),
            'E' => out.push_str(&(i128::from(received) + i128::from(len) - 1).to_string()),
            'T' => out.push_str(&(received + len).to_string()),
            c => out.push(c),
        }
    }
    out
}

async fn run(text: &str) {
    let (spool, _disk) = spool::testing::mem_spool(SpoolConfig::default()).await;
    let store = Arc::new(InMemory::new());
    let uploader = Uploader::new(spool, Remote::new(store.clone()), UploaderConfig::default());
    let config = RelayConfig {
        max_object_bytes: Some(1 << 20),
        max_sessions: 4,
        max_session_bytes: 1 << 20,
        session_id_seed: Some(7),
        ..RelayConfig::new("bkt")
    };
    let clock = Arc::new(ManualClock::new(1_791_453_600_000));
    let relay = Relay::new(config, uploader, clock).expect("the relay's config holds");
    let connections = Connections::new(relay);

    let mut sessions: Vec<Session> = Vec::new();
    let mut bodies = 0;
    for line in text.lines().take(16) {
        let fields: Vec<&str> = line.splitn(6, ' ').collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        match fields[0] {
            "open" => {
                let name: String = fields
                    .get(1)
                    .unwrap_or(&"")
                    .chars()
                    .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    .take(8)
                    .collect();
                let mut headers = Vec::new();
                if let Some(len) = number(2) {
                    headers.push(("X-Upload-Content-Length", len.to_string()));
                }
                if fields.get(3) == Some(&"1") {
                    headers.push(("X-Upload-Content-Type", "text/plain".to_string()));
                }
                let target = format!("/upload/storage/v1/b/bkt/o?uploadType=resumable&name={name}");
                let raw = exchange(&connections, &request("POST", &target, &headers, b"")).await;
                let answer = Answer::parse(&raw).expect("an opening request is answered");
                assert_ne!(answer.status, 500);
                if answer.status != 200 {
                    continue;
                }
                let location = answer.header("location").expect("a session's Location");
                let id = location
                    .split("upload_id=")
                    .nth(1)
                    .expect("an upload_id in Location")
                    .to_string();
                sessions.push(Session {
                    id,
                    name,
                    sent: Vec::new(),
                    received: 0,
                    ended: false,
                });
            }
            "put" => {
                let (Some(at), Some(len), Some(variant), Some(flags), Some(range)) = (
                    number(1),
                    number(2),
                    number(3),
                    fields.get(4),
                    fields.get(5),
                ) else {
                    continue;
                };
                if sessions.is_empty() || len > MAX_BODY || bodies + len > MAX_BODIES {
                    continue;
                }
                bodies += len;
                let count = sessions.len();
                let s = &mut sessions[at as usize % count];
                let content_range = match *range {
                    "-" => None,
                    range => Some(printable(&substituted(range, s.received, len))),
                };
                // The offset the relay reads the body at, when the range says.
                let first = match &content_range {
                    None => Some(s.received),
                    Some(value) => fake_gcs::wire::parse_content_range(value).map(|parsed| {
                        match parsed.range {
                            fake_gcs::wire::ChunkRange::Bytes(a, _)
                            | fake_gcs::wire::ChunkRange::From(a)
                            | fake_gcs::wire::ChunkRange::EmptyAt(a) => a,
                            fake_gcs::wire::ChunkRange::Empty => s.received,
                        }
                    }),
                };
                let start = first.unwrap_or(0);
                let body: Vec<u8> = (0..len)
                    .map(|i| pattern(variant as u8, start.saturating_add(i)))
                    .collect();
                let mut headers = Vec::new();
                if let Some(value) = &content_range {
                    headers.push(("Content-Range", value.clone()));
                }
                let own_bucket = !flags.contains('w');
                let bucket = if own_bucket { "bkt" } else { "other" };
                let mut bytes = request("PUT", &session_target(bucket, s), &headers, &body);
                let cut = flags.contains('t').then_some(body.len() / 2);
                if let Some(cut) = cut {
                    bytes.truncate(bytes.len() - body.len() + cut);
                }
                // Whatever the relay makes of the request, these bytes were sent there.
                if first.is_some() {
                    s.sent
                        .push((start, body[..cut.unwrap_or(body.len())].to_vec()));
                }
                let raw = exchange(&connections, &bytes).await;
                let Some(answer) = Answer::parse(&raw) else {
                    assert!(
                        cut.is_some_and(|c| c < body.len()),
                        "no answer to a whole request: {raw:?}"
                    );
                    continue;
                };
                check_session_answer(s, &answer, &store, own_bucket).await;
            }
            "delete" => {
                let Some(at) = number(1) else { continue };
                if sessions.is_empty() {
                    continue;
                }
                let count = sessions.len();
                let s = &mut sessions[at as usize % count];
                let bytes = request("DELETE", &session_target("bkt", s), &[], b"");
                let raw = exchange(&connections, &bytes).await;
                let answer = Answer::parse(&raw).expect("a DELETE is answered");
                assert_ne!(answer.status, 500);
                if answer.status == 499 {
                    s.ended = true;
                }
            }
            _ => {}
        }
    }
}

/// The checks on an answer to a request of session `s` (in a URL that names its
/// bucket when `own_bucket`).
async fn check_session_answer(
    s: &mut Session,
    answer: &Answer,
    store: &InMemory,
    own_bucket: bool,
) {
    assert_ne!(
        answer.status,
        500,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    match answer.status {
        308 => {
            assert!(!s.ended, "a 308 from a session that had ended");
            let count = range_count(answer);
            assert!(
                count <= s.sent_end(),
                "308 counts {count} bytes; the furthest byte sent ends at {}",
                s.sent_end()
            );
            assert!(
                count >= s.received,
                "308 counts {count} bytes after {}",
                s.received
            );
            s.received = count;
        }
        200 if answer.header(relay::OUTCOME_HEADER) == Some(relay::OUTCOME_STORED) && !s.ended => {
            s.ended = true;
            let resource: serde_json::Value =
                serde_json::from_slice(&answer.body).expect("a 200's body is the resource");
            let size: u64 = resource["size"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("the resource's size");
            let object = store
                .get(&Path::from(s.name.as_str()))
                .await
                .expect("a stored upload is in the store")
                .bytes()
                .await
                .unwrap();
            assert_eq!(
                object.len() as u64,
                size,
                "the answer's size is the object's"
            );
            for (i, byte) in object.iter().enumerate() {
                assert!(
                    s.sent_at(i as u64, *byte),
                    "byte {i} ({byte}) of {} was never sent to its session there",
                    s.name
                );
            }
        }
        // Forgotten (another bucket's URL is 404 without touching it).
        404 if own_bucket => s.ended = true,
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(run(&text));
});
