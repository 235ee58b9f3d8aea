//! `Content-Range` of resumable uploads, and the fake's session state machine
//! (`fake_gcs::wire::Session::accept`) fed a sequence of requests.
//!
//! Input, as text lines (so that seeds are readable): a header value to parse
//! alone; the session's `max_bytes`; then up to 32 requests, each `LEN VARIANT
//! RANGE`: a body of `LEN` bytes (at most 300,000; 1,000,000 in all) that are a pattern of the offset and
//! one of four variants (so that every byte a session holds can be traced to a
//! request that sent it), and its `Content-Range` (`-` for none), in which `R`
//! stands for the bytes received, `E` for `R + LEN - 1` and `T` for `R + LEN`
//! (`bytes R-E/*` is the next chunk, `bytes R-E/T` the last one).
//!
//! Asserts:
//! - `parse_content_range`: `A-B` has `A <= B < u64::MAX`, and `B < T` when a total
//!   `T` is given; `A-*/T` and the empty `A-(A-1)/T` have `A <= T` (RFC 7233: a
//!   complete length is more than the last byte).
//! - `Session::accept` never panics; the bytes received never go down, never pass
//!   `max_bytes`, and every byte held is one sent at its offset by some request; a
//!   request accepted with `A-B` (or `A-*` and a body of `n`) leaves at least `B + 1`
//!   (`A + n`) bytes received, exactly when it started at or below the bytes
//!   received; `Complete` only when a total is known and every byte of it is in,
//!   and the completed upload holds exactly those bytes.

#![no_main]

use fake_gcs::wire::{
    ChunkRange, ContentRange, Declared, Progress, Query, RequestHead, Session, Upload,
    parse_content_range,
};
use libfuzzer_sys::fuzz_target;

/// `value` with `R`, `E` and `T` replaced for a body of `len` bytes after
/// `received`.
fn substituted(value: &str, received: u64, len: u64) -> String {
    let mut out = String::new();
    for c in value.chars() {
        match c {
            'R' => out.push_str(&received.to_string()),
            'E' => out.push_str(&(received as i128 + len as i128 - 1).to_string()),
            'T' => out.push_str(&(received + len).to_string()),
            c => out.push(c),
        }
    }
    out
}

/// The byte a request of `variant` sends at `offset`: the four variants differ at
/// every offset.
fn pattern(variant: u8, offset: u64) -> u8 {
    ((offset % 251) as u8) ^ ((variant % 4) << 6)
}

fn check_parsed(value: &str) {
    let Some(ContentRange { range, total }) = parse_content_range(value) else {
        return;
    };
    match range {
        ChunkRange::Bytes(a, b) => {
            assert!(a <= b && b < u64::MAX, "{value:?} parsed to {range:?}");
            if let Some(t) = total {
                assert!(b < t, "{value:?}: last byte {b} is not below the total {t}");
            }
        }
        ChunkRange::From(a) | ChunkRange::EmptyAt(a) => {
            if let Some(t) = total {
                assert!(a <= t, "{value:?}: first byte {a} is past the total {t}");
            }
        }
        ChunkRange::Empty => {}
    }
}

fn new_session() -> Session<()> {
    let query = Query::parse(Some("uploadType=resumable&name=o"));
    let headers = http::HeaderMap::new();
    let head = RequestHead {
        query: &query,
        headers: &headers,
    };
    Session::new(Upload::resumable("b", head, b"").unwrap())
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.lines();
    check_parsed(lines.next().unwrap_or_default());
    let max_bytes: u64 = match lines.next().map(|l| l.trim().parse()) {
        Some(Ok(max)) => max,
        _ => return,
    };
    let mut session = new_session();
    // What was sent to the current session: (first, bytes).
    let mut sent: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut bodies = 0;
    for line in lines.take(32) {
        let mut fields = line.splitn(3, ' ');
        let (Some(Ok(len)), Some(Ok(variant)), Some(range)) = (
            fields.next().map(str::parse::<u64>),
            fields.next().map(str::parse::<u8>),
            fields.next(),
        ) else {
            continue;
        };
        if len > 300_000 || bodies + len > 1_000_000 {
            continue;
        }
        bodies += len;
        let header = match range {
            "-" => None,
            range => Some(substituted(range, session.received(), len)),
        };
        if let Some(h) = &header {
            check_parsed(h);
        }
        let before = session.received();
        // Where the body's bytes go, as far as the request says.
        let parsed = header.as_deref().map(parse_content_range);
        let first = match parsed {
            None => Some(before),
            Some(Some(ContentRange {
                range: ChunkRange::Bytes(a, _) | ChunkRange::From(a),
                ..
            })) => Some(a),
            Some(_) => None,
        };
        let body: Vec<u8> = (0..len)
            .map(|i| pattern(variant, first.unwrap_or(0).wrapping_add(i)))
            .collect();
        if let Some(first) = first {
            sent.push((first, body.clone()));
        }
        let answer = session.accept(header.as_deref(), &body, max_bytes);
        let after = session.received();
        assert!(after >= before, "received went from {before} to {after}");
        assert!(
            after <= max_bytes.max(before),
            "received {after} > max {max_bytes}"
        );
        if after > before {
            assert!(
                answer.is_ok(),
                "{header:?}: bytes taken by a refused request"
            );
        }
        let Ok(progress) = answer else {
            continue;
        };
        // An accepted request leaves its bytes received.
        match parsed {
            Some(Some(ContentRange {
                range: ChunkRange::Bytes(a, b),
                ..
            })) => {
                assert!(a <= before, "{header:?} accepted with {before} received");
                assert_eq!(after, before.max(b + 1), "{header:?}");
            }
            None
            | Some(Some(ContentRange {
                range: ChunkRange::From(_),
                ..
            })) => {
                let a = first.unwrap();
                assert!(a <= before, "{header:?} accepted with {before} received");
                assert_eq!(after, before.max(a + len), "{header:?}");
            }
            _ => assert_eq!(after, before, "{header:?}: no bytes, yet received moved"),
        }
        if progress == Progress::Complete {
            let total = match parsed {
                Some(Some(ContentRange { total: Some(t), .. })) => t,
                // Without a total, a body through its end ends the object.
                None
                | Some(Some(ContentRange {
                    range: ChunkRange::From(_),
                    ..
                })) => first.unwrap() + len,
                other => panic!("{header:?} completed with no total: {other:?}"),
            };
            assert_eq!(after, total, "{header:?} completed");
            let upload = session.complete(Declared::default());
            assert_eq!(upload.data.len() as u64, total);
            for (i, byte) in upload.data.iter().enumerate() {
                let i = i as u64;
                let sent_here = sent.iter().any(|(first, bytes)| {
                    i >= *first
                        && i - first < bytes.len() as u64
                        && bytes[(i - first) as usize] == *byte
                });
                assert!(
                    sent_here,
                    "byte {i} of the upload ({byte}) was never sent there"
                );
            }
            session = new_session();
            sent.clear();
        }
    }
});
