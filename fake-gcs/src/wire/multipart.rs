//! `multipart/related` bodies (RFC 2046), as the JSON API's multipart upload sends
//! them: the object's metadata, then its bytes.

use bytes::Bytes;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
