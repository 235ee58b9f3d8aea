//! The resumable upload protocol: a session opened by `uploadType=resumable`, fed by
//! requests whose `Content-Range` says where their bytes go (`bytes A-B/T`, `A-B/*`,
//! `A-*/*`, status queries `*/T` and `*/*`), answered 308 with `Range` until the
//! bytes received reach the total, then completed as one [`Upload`].
//!
//! A session keeps its bytes until it completes (each bounded by the caller's
//! `max_bytes`). A completed session remembers what it answered (`T`), so that a
//! retried final request gets the same answer. [`Sessions`] keeps at most a given
//! number; the oldest is forgotten first (its next request gets 404, as an expired
//! session does on Cloud Storage).

use std::collections::BTreeMap;

use bytes::BytesMut;

use crate::wire::digest::Declared;
use crate::wire::encoding::encode_component;
use crate::wire::error::Rejection;
use crate::wire::reply::Reply;
use crate::wire::upload::Upload;

/// A parsed `Content-Range` of a resumable upload request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentRange {
    /// Which bytes of the object this request's body holds.
    pub range: ChunkRange,
    /// Total object size when the client knows it (final chunk or status query).
    pub total: Option<u64>,
}

/// The byte range part of a `Content-Range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkRange {
    /// `*`: no bytes (a status query, or finalizing with `*/T`).
    Empty,
    /// `A-B`: first and last byte, inclusive.
    Bytes(u64, u64),
    /// `A-*`: from byte A through the end of this request's body, which is the end
    /// of the object when the total is `*` too (the Node client's single-request
    /// resumable upload sends `bytes 0-*/*`).
    From(u64),
    /// `A-(A-1)`: no bytes, at offset A. The Node client names an empty last chunk
    /// so (`bytes N-(N-1)/N` when the object's size is a multiple of its chunk size,
    /// `bytes 0--1/0` for an empty object).
    EmptyAt(u64),
}

/// Parses `bytes A-B/T`, `bytes A-B/*`, `bytes A-*/T`, `bytes A-*/*`, `bytes */T` or
/// `bytes */*`. A range is within its total when one is given (RFC 7233: the
/// complete length is more than the last byte): `B < T`, and `A <= T` for `A-*` and
/// the empty `A-(A-1)`; any other is refused (`None`).
pub fn parse_content_range(value: &str) -> Option<ContentRange> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    let range = match range.trim() {
        "*" => ChunkRange::Empty,
        r => {
            let (a, b) = r.split_once('-')?;
            let a: u64 = a.trim().parse().ok()?;
            match b.trim() {
                "*" => ChunkRange::From(a),
                "-1" if a == 0 => ChunkRange::EmptyAt(0),
                b => {
                    let b: u64 = b.parse().ok()?;
                    match b.checked_add(1)?.cmp(&a) {
                        std::cmp::Ordering::Less => return None,
                        std::cmp::Ordering::Equal => ChunkRange::EmptyAt(a),
                        std::cmp::Ordering::Greater => ChunkRange::Bytes(a, b),
                    }
                }
            }
        }
    };
    let within = match (range, total) {
        (ChunkRange::Bytes(_, last), Some(total)) => last < total,
        (ChunkRange::From(first) | ChunkRange::EmptyAt(first), Some(total)) => first <= total,
        _ => true,
    };
    within.then_some(ContentRange { range, total })
}

/// Cloud Storage's answer to a request whose bytes start after those received.
pub fn beyond_received(first: u64, received: u64) -> Rejection {
    Rejection::invalid(format!(
        "Invalid request. According to the Content-Range header, the upload offset is \
         {first} byte(s), which exceeds already uploaded size of {received} byte(s)."
    ))
}

/// One resumable upload.
#[derive(Debug)]
pub struct Session<T> {
    /// The upload as the first request described it, without its bytes.
    pub upload: Upload,
    received: BytesMut,
    /// Set once the upload completed (successfully): what to answer a retry with.
    pub finalized: Option<T>,
}

/// Where a session stands after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More bytes to come: answer [`incomplete`].
    Incomplete,
    /// Every byte is in: [`Session::complete`] gives the upload.
    Complete,
}

/// The bytes a request brings: the first one's offset, the last one's (`None`
/// for no bytes) and the total when known.
struct Chunk {
    first: u64,
    last: Option<u64>,
    total: Option<u64>,
}

impl<T> Session<T> {
    /// A session for `upload` (from [`Upload::resumable`]).
    pub fn new(upload: Upload) -> Self {
        Self {
            upload,
            received: BytesMut::new(),
            finalized: None,
        }
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received.len() as u64
    }

    /// Takes one request: its `Content-Range` (none means "the rest of the object")
    /// and its body. Bytes already received are skipped (a retried chunk); a gap,
    /// a length that disagrees with the range, or more than `max_bytes` in all is
    /// refused.
    pub fn accept(
        &mut self,
        content_range: Option<&str>,
        data: &[u8],
        max_bytes: u64,
    ) -> Result<Progress, Rejection> {
        let chunk = self.chunk(content_range, data.len() as u64)?;
        if let (Some(last), Some(total)) = (chunk.last, chunk.total)
            && last >= total
        {
            // Refused before its bytes are taken.
            return Err(Rejection::invalid(format!(
                "The body ends at byte {last}, past the total {total}."
            )));
        }
        if let Some(last) = chunk.last {
            self.append(chunk.first, last, data, max_bytes)?;
        }
        let received = self.received();
        match chunk.total {
            Some(total) if received > total => Err(Rejection::invalid(format!(
                "Received {received} bytes, more than the total {total}."
            ))),
            Some(total) if received == total => Ok(Progress::Complete),
            _ => Ok(Progress::Incomplete),
        }
    }

    /// Where a request's `len` bytes go, from its `Content-Range`.
    fn chunk(&self, content_range: Option<&str>, len: u64) -> Result<Chunk, Rejection> {
        let received = self.received();
        let range = match content_range {
            Some(value) => parse_content_range(value)
                .ok_or_else(|| Rejection::invalid(format!("Invalid Content-Range {value:?}.")))?,
            // No Content-Range: the body is the rest of the object.
            None => ContentRange {
                range: ChunkRange::From(received),
                total: None,
            },
        };
        Ok(match range.range {
            ChunkRange::Bytes(first, last) => Chunk {
                first,
                last: Some(last),
                total: range.total,
            },
            // Through the end of this body; with an unknown total, this body ends
            // the object.
            ChunkRange::From(first) => {
                let end = first.checked_add(len).ok_or_else(|| {
                    Rejection::invalid(format!(
                        "Content-Range {:?} ends past the largest offset.",
                        content_range.unwrap_or_default()
                    ))
                })?;
                Chunk {
                    first,
                    last: end.checked_sub(1),
                    total: range.total.or(Some(end)),
                }
            }
            ChunkRange::Empty if len == 0 => Chunk {
                first: received,
                last: None,
                total: range.total,
            },
            ChunkRange::EmptyAt(first) if len == 0 && first <= received => Chunk {
                first,
                last: None,
                total: range.total,
            },
            ChunkRange::EmptyAt(first) if len == 0 => return Err(beyond_received(first, received)),
            ChunkRange::Empty | ChunkRange::EmptyAt(_) => {
                return Err(Rejection::invalid(format!(
                    "Content-Range {:?} names no bytes but the request has a body.",
                    content_range.unwrap_or_default()
                )));
            }
        })
    }

    /// Appends what `data` (bytes `first..=last`) adds to the bytes received.
    fn append(
        &mut self,
        first: u64,
        last: u64,
        data: &[u8],
        max_bytes: u64,
    ) -> Result<(), Rejection> {
        let received = self.received();
        if last + 1 - first != data.len() as u64 {
            return Err(Rejection::invalid(format!(
                "Content-Range covers {} bytes but the body has {}.",
                last + 1 - first,
                data.len()
            )));
        }
        if first > received {
            return Err(beyond_received(first, received));
        }
        let skip = (received - first) as usize;
        if skip < data.len() {
            if received + (data.len() - skip) as u64 > max_bytes {
                return Err(Rejection::Status {
                    status: 413,
                    message: None,
                });
            }
            self.received.extend_from_slice(&data[skip..]);
        }
        Ok(())
    }

    /// The completed upload, with the bytes received (taken out of the session) and
    /// the digests `declared_now` by the last request, else by the first.
    pub fn complete(&mut self, declared_now: Declared) -> Upload {
        Upload {
            data: self.received.split().freeze(),
            declared: declared_now.or(self.upload.declared.clone()),
            ..self.upload.clone()
        }
    }
}

/// The sessions a server keeps, by `upload_id`.
#[derive(Debug)]
pub struct Sessions<T> {
    sessions: BTreeMap<u64, Session<T>>,
    next_id: u64,
    max_sessions: usize,
}

impl<T> Sessions<T> {
    /// Keeps at most `max_sessions` (at least one).
    pub fn new(max_sessions: usize) -> Self {
        Self {
            sessions: BTreeMap::new(),
            next_id: 1,
            max_sessions: max_sessions.max(1),
        }
    }

    /// Opens a session, forgetting the oldest when full; returns its `upload_id`.
    pub fn open(&mut self, session: Session<T>) -> String {
        while self.sessions.len() >= self.max_sessions {
            self.sessions.pop_first();
        }
        let id = self.next_id;
        self.next_id += 1;
        self.sessions.insert(id, session);
        format!("session-{id}")
    }

    fn parse_id(id: &str) -> Option<u64> {
        id.strip_prefix("session-")?.parse().ok()
    }

    /// The session `id`, if kept.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Session<T>> {
        self.sessions.get_mut(&Self::parse_id(id)?)
    }

    /// Forgets the session `id`.
    pub fn remove(&mut self, id: &str) -> Option<Session<T>> {
        self.sessions.remove(&Self::parse_id(id)?)
    }
}

/// The answer to the request that opened session `id` for `bucket/name`: 200 with
/// the session's URL under `base` in `Location`.
pub fn started(base: &str, bucket: &str, name: &str, id: &str) -> Reply {
    let location = format!(
        "{base}/upload/storage/v1/b/{}/o?uploadType=resumable&name={}&upload_id={id}",
        encode_component(bucket),
        encode_component(name)
    );
    Reply::new(200)
        .header("location", location)
        .header("x-guploader-uploadid", id)
}

/// 308 Resume Incomplete, with the bytes received so far in `Range`.
pub fn incomplete(upload_id: &str, received: u64) -> Reply {
    let reply = Reply::new(308).header("x-guploader-uploadid", upload_id);
    if received == 0 {
        return reply;
    }
    reply.header("range", format!("bytes=0-{}", received - 1))
}

/// A 308 as a client that sent `X-Guploader-No-308: yes` asks for it: 200 with
/// `X-Http-Status-Code-Override: 308` and the same headers (the Go client and
/// rclone send it for chunked uploads, and refuse a bare 308). Other answers, and
/// requests without the header, are left as they are.
pub fn answer_308_as_asked(reply: Reply, headers: &http::HeaderMap) -> Reply {
    let asked = crate::wire::header(headers, "x-guploader-no-308")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("yes"));
    if !asked || reply.status != 308 {
        return reply;
    }
    Reply {
        status: 200,
        ..reply
    }
    .header("x-http-status-code-override", "308")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::route::Query;
    use crate::wire::upload::RequestHead;

    #[test]
    fn a_range_from_the_largest_offset_is_refused_not_overflowed() {
        // Found by review: `first + len` overflowed (a panic in debug builds).
        let query = Query::parse(Some("uploadType=resumable&name=o"));
        let headers = http::HeaderMap::new();
        let head = RequestHead {
            query: &query,
            headers: &headers,
        };
        let upload = Upload::resumable("b", head, b"").unwrap();
        let mut session: Session<()> = Session::new(upload);
        let huge = format!("bytes {}-*/*", u64::MAX);
        let refused = session.accept(Some(&huge), b"x", u64::MAX);
        assert!(matches!(
            refused,
            Err(Rejection::Status { status: 400, .. })
        ));
    }

    #[test]
    fn a_308_becomes_a_200_with_the_override_when_the_client_asks() {
        let mut asked = http::HeaderMap::new();
        asked.insert("x-guploader-no-308", "yes".parse().unwrap());
        let reply = answer_308_as_asked(incomplete("id", 10), &asked);
        assert_eq!(reply.status, 200);
        assert!(
            reply
                .headers
                .iter()
                .any(|(k, v)| k == "x-http-status-code-override" && v == "308")
        );
        assert!(
            reply
                .headers
                .iter()
                .any(|(k, v)| k == "range" && v == "bytes=0-9")
        );
        let plain = answer_308_as_asked(incomplete("id", 10), &http::HeaderMap::new());
        assert_eq!(plain.status, 308);
    }

    #[test]
    fn content_ranges_of_resumable_chunks_parse() {
        let cr = |s| parse_content_range(s);
        let range = |range, total| Some(ContentRange { range, total });
        assert_eq!(
            cr("bytes 0-99/100"),
            range(ChunkRange::Bytes(0, 99), Some(100))
        );
        assert_eq!(
            cr("bytes 100-199/*"),
            range(ChunkRange::Bytes(100, 199), None)
        );
        assert_eq!(cr("bytes 0-*/*"), range(ChunkRange::From(0), None));
        assert_eq!(cr("bytes 5-*/10"), range(ChunkRange::From(5), Some(10)));
        assert_eq!(cr("bytes */100"), range(ChunkRange::Empty, Some(100)));
        assert_eq!(cr("bytes */*"), range(ChunkRange::Empty, None));
        assert_eq!(cr("bytes 5-1/10"), None);
        // An empty range where its bytes would start: the Node client's empty last
        // chunk, and its empty object.
        assert_eq!(
            cr("bytes 10-9/10"),
            range(ChunkRange::EmptyAt(10), Some(10))
        );
        assert_eq!(cr("bytes 0--1/0"), range(ChunkRange::EmptyAt(0), Some(0)));
        assert_eq!(cr("bytes 5--1/5"), None);
        // A range that cannot be counted is refused, not overflowed.
        assert_eq!(cr("bytes 0-18446744073709551615/*"), None);
        assert_eq!(cr("items 0-1/2"), None);
    }

    #[test]
    fn a_range_past_its_total_is_refused() {
        // Found by the content_range fuzz target: `bytes 4-5/0` parsed, a range whose
        // last byte is past the object's complete length (RFC 7233 calls it
        // invalid); the session then took its bytes before refusing the request.
        for past in [
            "bytes 4-5/0",
            "bytes 0-99/50",
            "bytes 0-5/5",
            "bytes 6-*/5",
            "bytes 6-5/5",
        ] {
            assert_eq!(parse_content_range(past), None, "{past}");
        }
        let cr = |s| parse_content_range(s).map(|c: ContentRange| (c.range, c.total));
        assert_eq!(cr("bytes 0-4/5"), Some((ChunkRange::Bytes(0, 4), Some(5))));
        assert_eq!(cr("bytes 5-*/5"), Some((ChunkRange::From(5), Some(5))));
        assert_eq!(cr("bytes 5-4/5"), Some((ChunkRange::EmptyAt(5), Some(5))));
        let mut s = session();
        assert!(s.accept(Some("bytes 0-5/5"), b"abcdef", 100).is_err());
        assert_eq!(s.received(), 0, "a refused request's bytes were taken");
        assert!(s.accept(Some("bytes 0-*/5"), b"abcdef", 100).is_err());
        assert_eq!(s.received(), 0, "a refused request's bytes were taken");
        assert_eq!(
            s.accept(Some("bytes 0-*/5"), b"abcde", 100),
            Ok(Progress::Complete)
        );
    }

    fn session() -> Session<()> {
        let (query, headers) = (Query::parse(Some("name=o")), Default::default());
        let head = RequestHead {
            query: &query,
            headers: &headers,
        };
        let upload = Upload::resumable("b", head, b"").unwrap();
        Session::new(upload)
    }

    #[test]
    fn a_session_takes_chunks_skips_repeats_and_refuses_gaps() {
        let mut s = session();
        assert_eq!(
            s.accept(Some("bytes 0-2/*"), b"abc", 100),
            Ok(Progress::Incomplete)
        );
        // A retried chunk adds only what is new.
        assert_eq!(
            s.accept(Some("bytes 1-3/*"), b"bcd", 100),
            Ok(Progress::Incomplete)
        );
        assert_eq!(s.received(), 4);
        assert!(s.accept(Some("bytes 6-6/*"), b"g", 100).is_err());
        assert!(s.accept(Some("bytes 4-5/*"), b"e", 100).is_err());
        assert_eq!(
            s.accept(Some("bytes */*"), b"", 100),
            Ok(Progress::Incomplete)
        );
        assert_eq!(
            s.accept(Some("bytes 4-5/6"), b"ef", 5),
            Err(Rejection::Status {
                status: 413,
                message: None
            })
        );
        assert_eq!(
            s.accept(Some("bytes 4-5/6"), b"ef", 100),
            Ok(Progress::Complete)
        );
        let done = s.complete(Declared::default());
        assert_eq!((&done.data[..], done.name.as_str()), (&b"abcdef"[..], "o"));
    }

    #[test]
    fn an_empty_range_at_the_end_completes_and_elsewhere_is_refused() {
        let mut s = session();
        assert_eq!(
            s.accept(Some("bytes 0-2/*"), b"abc", 100),
            Ok(Progress::Incomplete)
        );
        assert!(
            s.accept(Some("bytes 4-3/4"), b"", 100).is_err(),
            "past the bytes received"
        );
        assert!(
            s.accept(Some("bytes 3-2/3"), b"x", 100).is_err(),
            "a body in an empty range"
        );
        assert_eq!(
            s.accept(Some("bytes 3-2/3"), b"", 100),
            Ok(Progress::Complete)
        );
    }

    #[test]
    fn a_body_without_a_range_ends_the_object() {
        let mut s = session();
        assert_eq!(s.accept(None, b"abc", 100), Ok(Progress::Complete));
        let mut sessions = Sessions::new(1);
        let first = sessions.open(session());
        let second = sessions.open(session());
        assert!(
            sessions.get_mut(&first).is_none(),
            "the oldest is forgotten"
        );
        assert!(sessions.remove(&second).is_some());
        assert_eq!(incomplete("x", 0).headers.len(), 1);
        assert_eq!(
            incomplete("x", 5).headers[1],
            ("range".into(), "bytes=0-4".to_string())
        );
    }
}
