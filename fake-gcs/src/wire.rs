//! Cloud Storage's encodings, as pure functions: digests in the forms the APIs use
//! (base64 big-endian crc32c, base64 and hex MD5), `x-goog-hash` parsing, dates
//! (RFC 3339 with milliseconds, HTTP dates), query strings, `Content-Range`,
//! `multipart/related` bodies, and the JSON and XML error bodies real clients parse.
//!
//! Nothing here touches the fake's state or time; callers pass both in.

use std::borrow::Cow;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use md5::{Digest, Md5};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// The digests Cloud Storage keeps for every object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digests {
    /// CRC32C (Castagnoli) of the bytes.
    pub crc32c: u32,
    /// MD5 of the bytes.
    pub md5: [u8; 16],
}

impl Digests {
    /// Digests of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self {
            crc32c: crc32c::crc32c(bytes),
            md5: Md5::digest(bytes).into(),
        }
    }
}

/// Cloud Storage's content type for an upload that names none.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// The content type to record for an upload: the default is shared rather than
/// allocated per object (the long replays keep millions of records).
pub fn content_type(given: Option<&str>) -> Cow<'static, str> {
    match given {
        None | Some(DEFAULT_CONTENT_TYPE) => Cow::Borrowed(DEFAULT_CONTENT_TYPE),
        Some(other) => Cow::Owned(other.to_string()),
    }
}

/// crc32c as the JSON API and `x-goog-hash` give it: base64 of the big-endian u32.
pub fn crc32c_base64(crc: u32) -> String {
    B64.encode(crc.to_be_bytes())
}

/// MD5 as the JSON API and `x-goog-hash` give it: base64 of the 16 bytes.
pub fn md5_base64(md5: &[u8; 16]) -> String {
    B64.encode(md5)
}

/// MD5 as lowercase hex: the XML API's ETag (quoted) for non-composite objects.
pub fn md5_hex(md5: &[u8; 16]) -> String {
    // Once per stored object and per XML response: no `format!` per byte.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(32);
    for b in md5 {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    hex
}

/// Digests a client declared: `x-goog-hash: crc32c=<b64>,md5=<b64>`, the multipart
/// metadata's `crc32c`/`md5Hash`, or `Content-MD5`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// Declared crc32c, base64 as sent.
    pub crc32c: Option<String>,
    /// Declared MD5, base64 as sent.
    pub md5: Option<String>,
}

impl Declared {
    /// Parses an `x-goog-hash` value (several may be joined with commas). Unknown
    /// algorithms are ignored, as Cloud Storage does.
    pub fn parse_goog_hash(&mut self, value: &str) {
        for item in value.split(',') {
            if let Some((algo, digest)) = item.trim().split_once('=') {
                match algo.trim() {
                    "crc32c" => self.crc32c = Some(digest.trim().to_string()),
                    "md5" => self.md5 = Some(digest.trim().to_string()),
                    _ => {}
                }
            }
        }
    }

    /// The first declared digest that differs from `actual`: (algorithm, declared,
    /// computed).
    pub fn mismatch(&self, actual: &Digests) -> Option<(&'static str, String, String)> {
        if let Some(crc) = &self.crc32c {
            let ours = crc32c_base64(actual.crc32c);
            if *crc != ours {
                return Some(("CRC32C", crc.clone(), ours));
            }
        }
        if let Some(md5) = &self.md5 {
            let ours = md5_base64(&actual.md5);
            if *md5 != ours {
                return Some(("MD5", md5.clone(), ours));
            }
        }
        None
    }
}

/// RFC 3339 with milliseconds, UTC: `2026-10-08T11:00:00.000Z`.
pub fn rfc3339_millis(unix_ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(unix_ms)).to_string()
}

/// An HTTP date (RFC 7231 IMF-fixdate): `Thu, 08 Oct 2026 11:00:00 GMT`.
pub fn http_date(unix_ms: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // Reuse humantime's calendar: "YYYY-MM-DDTHH:MM:SSZ".
    let secs = unix_ms / 1000;
    let iso = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string();
    let year = &iso[0..4];
    let month: usize = iso[5..7].parse().unwrap_or(1);
    let day = &iso[8..10];
    let time = &iso[11..19];
    let weekday = DAYS[((secs / 86_400) % 7) as usize];
    format!(
        "{weekday}, {day} {} {year} {time} GMT",
        MONTHS[month.clamp(1, 12) - 1]
    )
}

/// Bytes percent-encoded in object names inside URLs we build (`mediaLink`,
/// `selfLink`, resumable `Location`): everything but unreserved characters.
const URL_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes one URL path segment or query value.
pub fn encode_component(s: &str) -> String {
    utf8_percent_encode(s, URL_COMPONENT).to_string()
}

/// Percent-decodes a path segment; `None` when the result is not UTF-8.
pub fn decode_path(s: &str) -> Option<String> {
    percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|c| c.into_owned())
}

/// Parses `application/x-www-form-urlencoded` query pairs (`+` is a space). Pairs
/// that do not decode to UTF-8 are kept lossily.
pub fn parse_query(query: Option<&str>) -> Vec<(String, String)> {
    let Some(query) = query else {
        return Vec::new();
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let dec = |s: &str| {
                percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

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
}

/// Parses `bytes A-B/T`, `bytes A-B/*`, `bytes A-*/T`, `bytes A-*/*`, `bytes */T` or
/// `bytes */*`.
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
                b => {
                    let b: u64 = b.parse().ok()?;
                    if b < a {
                        return None;
                    }
                    ChunkRange::Bytes(a, b)
                }
            }
        }
    };
    Some(ContentRange { range, total })
}

/// A parsed single-range `Range: bytes=...` request header, resolved against the
/// object size: the inclusive first and last byte. `None` means "not satisfiable".
pub fn resolve_range(value: &str, size: u64) -> Option<(u64, u64)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') || size == 0 {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    match (a.trim(), b.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().ok()?;
            (n > 0).then(|| (size.saturating_sub(n), size - 1))
        }
        (start, "") => {
            let start: u64 = start.parse().ok()?;
            (start < size).then_some((start, size - 1))
        }
        (start, end) => {
            let (start, end): (u64, u64) = (start.parse().ok()?, end.parse().ok()?);
            (start <= end && start < size).then(|| (start, end.min(size - 1)))
        }
    }
}

/// One part of a `multipart/related` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Header names lower-cased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The part's bytes.
    pub body: Bytes,
}

impl Part {
    /// A header's value by lower-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The `boundary` parameter of a `multipart/related` content type.
pub fn multipart_boundary(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let kind = params.next()?.trim();
    if !kind.eq_ignore_ascii_case("multipart/related") {
        return None;
    }
    params.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Splits a `multipart/related` body into its parts (RFC 2046): each part starts
/// after `--boundary` and a line break, has headers up to a blank line, and ends
/// before the line break preceding the next delimiter. Accepts `\n` as well as
/// `\r\n` line breaks.
pub fn split_multipart(body: &Bytes, boundary: &str) -> Result<Vec<Part>, String> {
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut at = find(body, delimiter, 0).ok_or("no multipart boundary in the body")?;
    let mut parts = Vec::new();
    loop {
        let mut start = at + delimiter.len();
        if body[start..].starts_with(b"--") {
            return Ok(parts);
        }
        start += line_break_len(&body[start..]).ok_or("malformed multipart delimiter line")?;
        let next = find(body, delimiter, start).ok_or("multipart body is not terminated")?;
        // The line break before the next delimiter belongs to the delimiter.
        let mut end = next;
        if end >= start + 2 && &body[end - 2..end] == b"\r\n" {
            end -= 2;
        } else if end > start && body[end - 1] == b'\n' {
            end -= 1;
        }
        parts.push(parse_part(body.slice(start..end))?);
        at = next;
    }
}

fn parse_part(part: Bytes) -> Result<Part, String> {
    let (head_len, sep_len) = match find(&part, b"\r\n\r\n", 0) {
        Some(i) => (i, 4),
        None => match find(&part, b"\n\n", 0) {
            Some(i) => (i, 2),
            None if part.starts_with(b"\r\n") => (0, 2),
            None => return Err("multipart part has no header/body separator".into()),
        },
    };
    let head = std::str::from_utf8(&part[..head_len])
        .map_err(|_| "multipart part headers are not UTF-8".to_string())?;
    let headers = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body_start = (head_len + sep_len).min(part.len());
    Ok(Part {
        headers,
        body: part.slice(body_start..),
    })
}

fn line_break_len(s: &[u8]) -> Option<usize> {
    if s.starts_with(b"\r\n") {
        Some(2)
    } else if s.starts_with(b"\n") {
        Some(1)
    } else {
        None
    }
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() || from > haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// Escapes text for XML element content.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The JSON API's error body:
/// `{"error":{"code":412,"message":..,"errors":[{"message":..,"domain":"global","reason":..}]}}`.
pub fn json_error_body(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "error": {
            "code": code,
            "message": message,
            "errors": [{ "message": message, "domain": "global", "reason": reason }],
        }
    })
    .to_string()
}

/// The XML API's error body: `<?xml ...?><Error><Code>..</Code><Message>..</Message></Error>`.
pub fn xml_error_body(code: &str, message: &str, details: Option<&str>) -> String {
    let details = details
        .map(|d| format!("<Details>{}</Details>", xml_escape(d)))
        .unwrap_or_default();
    format!(
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>{}</Code><Message>{}</Message>{details}</Error>",
        xml_escape(code),
        xml_escape(message)
    )
}

/// Cloud Storage's wording for an error status: (JSON reason, XML code, message).
pub fn status_wording(status: u16) -> (&'static str, &'static str, &'static str) {
    match status {
        400 => ("invalid", "InvalidArgument", "Invalid argument."),
        401 => (
            "required",
            "AuthenticationRequired",
            "Authentication required.",
        ),
        403 => ("forbidden", "AccessDenied", "Access denied."),
        404 => ("notFound", "NoSuchKey", "The specified key does not exist."),
        408 => ("requestTimeout", "RequestTimeout", "Request Timeout"),
        409 => ("conflict", "Conflict", "Conflict."),
        412 => (
            "conditionNotMet",
            "PreconditionFailed",
            "At least one of the pre-conditions you specified did not hold.",
        ),
        413 => ("uploadTooLarge", "EntityTooLarge", "Upload too large."),
        429 => (
            "rateLimitExceeded",
            "SlowDown",
            "The rate of change requests to the object is too high. Please slow down.",
        ),
        500 => (
            "backendError",
            "InternalError",
            "We encountered an internal error. Please try again.",
        ),
        501 => ("notImplemented", "NotImplemented", "Not implemented."),
        502 => (
            "backendError",
            "BadGateway",
            "Bad gateway. Please try again.",
        ),
        503 => (
            "backendError",
            "ServiceUnavailable",
            "We encountered an internal error. Please try again.",
        ),
        504 => (
            "backendError",
            "GatewayTimeout",
            "Gateway timeout. Please try again.",
        ),
        _ => ("error", "Error", "Error."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_use_the_encodings_cloud_storage_documents() {
        let d = Digests::of(b"hello");
        assert_eq!(crc32c_base64(d.crc32c), "mnG7TA==");
        assert_eq!(md5_base64(&d.md5), "XUFAKrxLKna5cZ2REBfFkg==");
        assert_eq!(md5_hex(&d.md5), "5d41402abc4b2a76b9719d911017c592");
    }

    #[test]
    fn md5_hex_is_lowercase_and_zero_padded() {
        let md5: [u8; 16] = std::array::from_fn(|i| (i as u8) * 17);
        let expected: String = md5.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(md5_hex(&md5), expected);
        assert_eq!(&md5_hex(&md5)[..4], "0011");
    }

    #[test]
    fn only_the_default_content_type_is_shared() {
        assert!(matches!(
            content_type(None),
            Cow::Borrowed(DEFAULT_CONTENT_TYPE)
        ));
        assert!(matches!(
            content_type(Some(DEFAULT_CONTENT_TYPE)),
            Cow::Borrowed(_)
        ));
        assert_eq!(content_type(Some("text/plain")), "text/plain");
    }

    #[test]
    fn declared_hashes_are_compared_per_algorithm() {
        let d = Digests::of(b"hello");
        let mut ok = Declared::default();
        ok.parse_goog_hash("crc32c=mnG7TA==, md5=XUFAKrxLKna5cZ2REBfFkg==");
        assert_eq!(ok.mismatch(&d), None);
        let mut bad = Declared::default();
        bad.parse_goog_hash("crc32c=AAAAAA==");
        let (algo, declared, ours) = bad.mismatch(&d).unwrap();
        assert_eq!(
            (algo, declared.as_str(), ours.as_str()),
            ("CRC32C", "AAAAAA==", "mnG7TA==")
        );
    }

    #[test]
    fn dates_are_formatted_as_rfc3339_and_http_dates() {
        // 2026-10-08T11:00:00Z, a Thursday.
        let ms = 1_791_457_200_000;
        assert_eq!(rfc3339_millis(ms), "2026-10-08T11:00:00.000Z");
        assert_eq!(http_date(ms + 999), "Thu, 08 Oct 2026 11:00:00 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
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
        assert_eq!(cr("items 0-1/2"), None);
    }

    #[test]
    fn ranges_resolve_against_the_object_size() {
        assert_eq!(resolve_range("bytes=0-3", 10), Some((0, 3)));
        assert_eq!(resolve_range("bytes=4-", 10), Some((4, 9)));
        assert_eq!(resolve_range("bytes=-3", 10), Some((7, 9)));
        assert_eq!(resolve_range("bytes=5-100", 10), Some((5, 9)));
        assert_eq!(resolve_range("bytes=10-", 10), None);
        assert_eq!(resolve_range("bytes=0-1,3-4", 10), None);
    }

    #[test]
    fn multipart_bodies_split_into_metadata_and_media() {
        let body = Bytes::from_static(
            b"--abc\r\nContent-Type: application/json\r\n\r\n{\"name\":\"a\"}\r\n--abc\r\ncontent-type: text/plain\r\n\r\nhel\r\nlo\r\n--abc--\r\n",
        );
        let parts = split_multipart(&body, "abc").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].header("content-type"), Some("application/json"));
        assert_eq!(&parts[0].body[..], b"{\"name\":\"a\"}");
        assert_eq!(parts[1].header("content-type"), Some("text/plain"));
        assert_eq!(&parts[1].body[..], b"hel\r\nlo");
        assert!(split_multipart(&Bytes::from_static(b"--abc\r\n\r\nx"), "abc").is_err());
        assert_eq!(
            multipart_boundary("multipart/related; boundary=\"=== x ===\"").as_deref(),
            Some("=== x ===")
        );
        assert_eq!(multipart_boundary("application/json"), None);
    }

    #[test]
    fn queries_decode_plus_and_percent() {
        assert_eq!(
            parse_query(Some("name=a%2Fb+c&ifGenerationMatch=0&flag")),
            vec![
                ("name".to_string(), "a/b c".to_string()),
                ("ifGenerationMatch".to_string(), "0".to_string()),
                ("flag".to_string(), String::new()),
            ]
        );
    }
}
