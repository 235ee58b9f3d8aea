//! What the XML API takes from a client: the one XML body the fake parses, the
//! `CompleteMultipartUpload` list of parts of an XML multipart upload, and the
//! headers of an XML `PUT` (`Upload::xml_put`, `ObjectAttributes::from_headers`),
//! the digests and preconditions in headers (`x-goog-hash`, `Content-MD5`,
//! `x-goog-if-generation-match`) and a download's `Range` (`resolve_range`).
//!
//! The completion body's parser is private to the fake's server (`api/`), so it is
//! driven end to end: a `FakeGcs` served over an in-memory stream (a new one per
//! input, on a current-thread runtime) is sent `POST /bkt/obj?uploads` with the
//! input's headers, parts 1 to 3 (`one,`, `two,`, `three,`), then `POST
//! /bkt/obj?uploadId=...` with the input's body.
//!
//! Input: header lines `name: value` separated by `\n` (a line that is not a valid
//! header is skipped), an empty line, then the completion body; the first line's
//! bytes also give the object size a `Range` is resolved against. Asserts:
//!
//! - No panic; every request to the fake is answered, never with a 500.
//! - A completion answered 200 stores the parts it may (uploaded ones, in ascending
//!   order, each at most once) concatenated: the object's bytes split into parts
//!   in strictly ascending order; and the object has the attributes the start's
//!   headers gave.
//! - Attributes read from headers round-trip: `headers()` then `from_headers` gives
//!   them back; each is the header's value; a header that is not printable ASCII is
//!   refused (an attribute is never dropped).
//! - `xml_put` takes exactly those attributes, `Content-MD5` (trimmed) over
//!   `x-goog-hash`'s MD5, and the generation precondition of its header.
//! - A resolved `Range` is within the object: `first <= last < size`.

#![no_main]

use std::sync::Arc;

use bytes::Bytes;
use fake_gcs::wire::{Declared, ObjectAttributes, Query, RequestHead, Upload, resolve_range};
use fake_gcs::{FakeGcs, FakeGcsConfig, TokioClock};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The parts uploaded before the completion, by number.
const PARTS: [&[u8]; 3] = [b"one,", b"two,", b"three,"];

fuzz_target!(|data: &[u8]| {
    let (head, body) = match memchr::memmem::find(data, b"\n\n") {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        // As HTTP carries it: a field value has no leading or trailing spaces or
        // tabs (RFC 9110, 5.5), and the fake's hyper drops them.
        let blank = |b: &u8| *b == b' ' || *b == b'\t';
        let start = value.iter().position(|b| !blank(b)).unwrap_or(value.len());
        let end = value
            .iter()
            .rposition(|b| !blank(b))
            .map_or(start, |i| i + 1);
        let value = &value[start..end.max(start)];
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            headers.append(name, value);
        }
    }

    // Attributes from headers, and back.
    let attributes = ObjectAttributes::from_headers(&headers);
    match &attributes {
        Ok(attributes) => {
            let mut again = HeaderMap::new();
            for (name, value) in attributes.headers() {
                let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
                again.append(name, HeaderValue::from_str(&value).unwrap());
            }
            assert_eq!(
                ObjectAttributes::from_headers(&again).as_ref(),
                Ok(attributes)
            );
            for (name, value) in attributes.headers() {
                if !name.starts_with(fake_gcs::wire::META_HEADER_PREFIX) {
                    assert_eq!(headers[name.as_ref()].to_str().ok(), Some(value.as_str()));
                }
            }
        }
        Err(message) => {
            // Refused only for a value that is not printable ASCII, named.
            let named = headers
                .iter()
                .any(|(name, value)| value.to_str().is_err() && message.contains(name.as_str()));
            assert!(named, "{message}");
        }
    }

    // The XML PUT.
    let query = Query::default();
    let head = RequestHead {
        query: &query,
        headers: &headers,
    };
    let put = Upload::xml_put("bkt", "obj", head, Bytes::from_static(b"hello"));
    if let Ok(upload) = &put {
        assert_eq!(Ok(&upload.attributes), attributes.as_ref());
        let mut declared = Declared::from_headers(&headers);
        if let Some(md5) = headers.get("content-md5").and_then(|v| v.to_str().ok()) {
            declared.md5 = Some(md5.trim().to_string());
        }
        assert_eq!(upload.declared, declared);
        let given = headers
            .get("x-goog-if-generation-match")
            .and_then(|v| v.to_str().ok());
        let expected = given.map(|g| g.trim().parse::<i64>().unwrap());
        assert_eq!(upload.preconditions.if_generation_match, expected);
        let _ = upload.digests();
        assert_eq!(
            (upload.name.as_str(), &upload.data[..]),
            ("obj", &b"hello"[..])
        );
    }

    // A download's Range.
    let size = data.first().map_or(0, |b| u64::from(*b) * 37);
    for value in headers.get_all("range") {
        if let Ok(value) = value.to_str()
            && let Some((first, last)) = resolve_range(value, size)
        {
            assert!(
                first <= last && last < size,
                "{value:?} of {size}: {first}-{last}"
            );
        }
    }

    // The XML multipart upload, completed with the input's body.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(multipart_upload(&headers, body, attributes.ok()));
});

async fn multipart_upload(headers: &HeaderMap, body: &[u8], attributes: Option<ObjectAttributes>) {
    let config = FakeGcsConfig {
        buckets: vec!["bkt".into()],
        keep_bytes: true,
        ..FakeGcsConfig::default()
    };
    let fake = FakeGcs::new(config, Arc::new(TokioClock::start())).unwrap();
    let mut start_headers = Vec::new();
    for (name, value) in headers {
        if !matches!(
            name.as_str(),
            "content-length"
                | "host"
                | "transfer-encoding"
                | "connection"
                | "expect"
                | "upgrade"
                | "te"
                | "trailer"
        ) {
            start_headers.push((name.as_str(), value.as_bytes()));
        }
    }
    let start = exchange(&fake, "POST", "/bkt/obj?uploads", &start_headers, b"").await;
    if start.status != 200 {
        return;
    }
    let text = String::from_utf8_lossy(&start.body);
    let id = text
        .split("<UploadId>")
        .nth(1)
        .and_then(|t| t.split("</UploadId>").next())
        .expect("an UploadId")
        .to_string();
    for (i, part) in PARTS.iter().enumerate() {
        let target = format!("/bkt/obj?partNumber={}&uploadId={id}", i + 1);
        let put = exchange(&fake, "PUT", &target, &[], part).await;
        assert_eq!(put.status, 200, "part {}", i + 1);
    }
    let target = format!("/bkt/obj?uploadId={id}");
    let done = exchange(&fake, "POST", &target, &[], body).await;
    if done.status != 200 {
        return;
    }
    let object = fake
        .object_bytes("bkt", "obj")
        .expect("a completed upload's object");
    let mut rest = &object[..];
    let mut last = 0;
    while !rest.is_empty() {
        let (number, part) = (PARTS.iter().enumerate())
            .find(|(_, p)| rest.starts_with(p))
            .unwrap_or_else(|| panic!("{object:?} is not made of the parts"));
        assert!(
            number + 1 > last,
            "{object:?}: parts not in ascending order"
        );
        last = number + 1;
        rest = &rest[part.len()..];
    }
    assert!(last > 0, "a completed upload of no part");
    if let Some(attributes) = attributes {
        let record = fake.object("bkt", "obj").unwrap();
        let stored = record.attributes.map(|a| *a).unwrap_or_default();
        assert_eq!(stored, attributes);
    }
}

/// An answer of the fake, as far as the checks need.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// One request to `fake` on a new in-memory connection.
async fn exchange(
    fake: &FakeGcs,
    method: &str,
    target: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> Answer {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    tokio::spawn(fake.clone().serve_connection(server));
    // The fake's hyper does not serve a half-closed connection: the client asks it
    // to close after the answer instead.
    let mut request =
        format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n")
            .into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    request.extend_from_slice(body);
    client.write_all(&request).await.unwrap();
    let mut raw = Vec::new();
    let _ = client.read_to_end(&mut raw).await;
    let end = memchr::memmem::find(&raw, b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {target} was not answered: {raw:?}"));
    let status: u16 = std::str::from_utf8(&raw[9..12]).unwrap().parse().unwrap();
    assert_ne!(
        status,
        500,
        "{method} {target}: {}",
        String::from_utf8_lossy(&raw)
    );
    Answer {
        status,
        body: raw[end + 4..].to_vec(),
    }
}
