//! Text encodings of Cloud Storage's wire formats: its dates (RFC 3339 with
//! milliseconds in JSON, HTTP dates in headers), percent-encoding of names in paths
//! and links, and XML escaping. These are protocol formats, not formatting for
//! people.

use std::time::{Duration, UNIX_EPOCH};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// RFC 3339 with milliseconds, UTC: `2026-10-08T11:00:00.000Z`.
pub fn rfc3339_millis(unix_ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(unix_ms)).to_string()
}

/// An HTTP date (RFC 7231 IMF-fixdate): `Thu, 08 Oct 2026 11:00:00 GMT`.
pub fn http_date(unix_ms: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix_ms / 1000))
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

/// Percent-decodes a query key or value, where `+` is a space; what does not decode
/// to UTF-8 is kept lossily.
/// Whether a query component is UTF-8 once percent-decoded.
pub(crate) fn query_component_is_utf8(s: &str) -> bool {
    percent_decode_str(&s.replace('+', " "))
        .decode_utf8()
        .is_ok()
}

pub(crate) fn decode_query_component(s: &str) -> String {
    percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_formatted_as_rfc3339_and_http_dates() {
        // 2026-10-08T11:00:00Z, a Thursday.
        let ms = 1_791_457_200_000;
        assert_eq!(rfc3339_millis(ms), "2026-10-08T11:00:00.000Z");
        assert_eq!(http_date(ms + 999), "Thu, 08 Oct 2026 11:00:00 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            http_date(1_709_251_199_000),
            "Thu, 29 Feb 2024 23:59:59 GMT"
        );
    }

    #[test]
    fn names_round_trip_through_percent_encoding() {
        let name = "spool/a b+é.bin";
        assert_eq!(encode_component(name), "spool%2Fa%20b%2B%C3%A9.bin");
        assert_eq!(decode_path(&encode_component(name)).as_deref(), Some(name));
        assert_eq!(decode_path("%FF"), None);
        assert_eq!(xml_escape("<a & 'b'>"), "&lt;a &amp; &apos;b&apos;&gt;");
    }
}
