//! `multipart/related` bodies (RFC 2046), as the JSON API's multipart upload sends
//! them: the object's metadata, then its bytes.

use bytes::{Buf, Bytes, BytesMut};

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

/// The most a multipart upload's first part (the JSON resource) and the media part's
/// headers may take, with their delimiters, before the media bytes start.
pub const MAX_MULTIPART_HEAD_BYTES: usize = 64 * 1024;

/// A `multipart/related` upload body read as it arrives: the first part (the
/// object's resource) whole, then the second part's bytes in pieces, holding back
/// only the bytes the closing delimiter could begin with. Memory: at most
/// [`MAX_MULTIPART_HEAD_BYTES`] before the media, then what one `feed` brings.
#[derive(Debug)]
pub struct MultipartStream {
    /// `--boundary`.
    delimiter: Vec<u8>,
    pending: BytesMut,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the media part's bytes: the resource and the media headers.
    Head,
    /// Inside the media part.
    Media,
    /// The closing delimiter was read.
    Closed,
}

/// What a multipart body holds before its media bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartHead {
    /// The first part: the object's resource.
    pub resource: Part,
    /// The second part's headers (its `body` is empty: the bytes follow).
    pub media: Part,
}

impl MultipartStream {
    /// A reader for a body whose parts are delimited by `boundary`.
    pub fn new(boundary: &str) -> Self {
        Self {
            delimiter: format!("--{boundary}").into_bytes(),
            pending: BytesMut::new(),
            phase: Phase::Head,
        }
    }

    /// Takes the next bytes of the body while the head is not complete; returns the
    /// head once it is (the media bytes after it wait for [`MultipartStream::media`]).
    pub fn head(&mut self, data: &[u8]) -> Result<Option<MultipartHead>, String> {
        debug_assert_eq!(self.phase, Phase::Head);
        self.pending.extend_from_slice(data);
        let Some((resource, media, media_start)) = self.split_head()? else {
            if self.pending.len() > MAX_MULTIPART_HEAD_BYTES {
                return Err(format!(
                    "the multipart resource and media headers take more than {MAX_MULTIPART_HEAD_BYTES} bytes"
                ));
            }
            return Ok(None);
        };
        self.pending.advance(media_start);
        self.phase = Phase::Media;
        Ok(Some(MultipartHead { resource, media }))
    }

    /// Takes the next bytes of the body once the head is read (`data` may be empty)
    /// and returns the media bytes known not to be the closing delimiter.
    pub fn media(&mut self, data: &[u8]) -> Result<Bytes, String> {
        match self.phase {
            Phase::Head => return Err("the multipart head is not complete".into()),
            Phase::Closed if data.iter().all(u8::is_ascii_whitespace) => return Ok(Bytes::new()),
            Phase::Closed => return Err("bytes after the closing multipart delimiter".into()),
            Phase::Media => {}
        }
        self.pending.extend_from_slice(data);
        if let Some((end, after)) = find_delimiter(&self.pending, &self.delimiter) {
            if self.pending.len() < after + 2 {
                return Ok(Bytes::new()); // cannot tell a close from a third part yet
            }
            if &self.pending[after..after + 2] != b"--" {
                return Err("multipart upload has more than 2 parts; expected 2".into());
            }
            let media = self.pending.split_to(end).freeze();
            self.pending.clear();
            self.phase = Phase::Closed;
            return Ok(media);
        }
        // Whatever could still begin a line break and the delimiter stays.
        let keep = (self.delimiter.len() + 2).min(self.pending.len());
        Ok(self.pending.split_to(self.pending.len() - keep).freeze())
    }

    /// The body ended: the media part must have been closed.
    pub fn finish(&self) -> Result<(), String> {
        match self.phase {
            Phase::Closed => Ok(()),
            Phase::Head => Err("the multipart body ended before its media part".into()),
            Phase::Media => Err("multipart body is not terminated".into()),
        }
    }

    /// The resource part, the media part's headers, and where the media bytes
    /// start, once the pending bytes hold them all.
    fn split_head(&self) -> Result<Option<(Part, Part, usize)>, String> {
        let body = &self.pending[..];
        let delimiter = &self.delimiter[..];
        let Some(first) = find(body, delimiter, 0) else {
            return Ok(None);
        };
        let mut start = first + delimiter.len();
        let Some(lb) = line_break_len(&body[start..]) else {
            return if body.len() < start + 2 {
                Ok(None)
            } else {
                Err("malformed multipart delimiter line".into())
            };
        };
        start += lb;
        let Some((end, after)) = find_delimiter(&body[start..], delimiter) else {
            return Ok(None);
        };
        let resource = parse_part(Bytes::copy_from_slice(&body[start..start + end]))?;
        let media_at = start + after;
        let Some(lb) = line_break_len(&body[media_at..]) else {
            return if body.len() < media_at + 2 {
                Ok(None)
            } else {
                Err("multipart upload has 1 part; expected 2".into())
            };
        };
        let headers_at = media_at + lb;
        // No headers at all: the part starts with the blank line.
        let rest = &body[headers_at..];
        let (head_len, sep_len) = if rest.starts_with(b"\r\n") {
            (0, 2)
        } else if rest.starts_with(b"\n") {
            (0, 1)
        } else {
            match find(body, b"\r\n\r\n", headers_at) {
                Some(i) => (i - headers_at, 4),
                None => match find(body, b"\n\n", headers_at) {
                    Some(i) => (i - headers_at, 2),
                    None => return Ok(None),
                },
            }
        };
        let media = match head_len {
            0 => Part {
                headers: Vec::new(),
                body: Bytes::new(),
            },
            _ => parse_part(Bytes::copy_from_slice(
                &body[headers_at..headers_at + head_len + sep_len],
            ))?,
        };
        Ok(Some((resource, media, headers_at + head_len + sep_len)))
    }
}

/// Where the line break before `delimiter` starts in `body`, and where the bytes
/// after the delimiter start.
fn find_delimiter(body: &[u8], delimiter: &[u8]) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(at) = find(body, delimiter, from) {
        let after = at + delimiter.len();
        if at >= 2 && &body[at - 2..at] == b"\r\n" {
            return Some((at - 2, after));
        }
        if at >= 1 && body[at - 1] == b'\n' {
            return Some((at - 1, after));
        }
        from = at + 1;
    }
    None
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

    /// Every split of a body into two feeds gives the same head and media as the
    /// whole-body parser.
    #[test]
    fn a_multipart_body_read_in_pieces_is_the_body_read_whole() {
        let media: Vec<u8> = (0..3_000u32).map(|i| b"ab\r\n-"[i as usize % 5]).collect();
        let mut body = b"--b0\r\ncontent-type: application/json\r\n\r\n{\"name\":\"n\"}\r\n--b0\r\ncontent-type: text/csv\r\n\r\n".to_vec();
        body.extend_from_slice(&media);
        body.extend_from_slice(b"\r\n--b0--\r\n");
        let whole = split_multipart(&Bytes::from(body.clone()), "b0").unwrap();
        for cut in (0..body.len())
            .step_by(37)
            .chain([1, body.len() - 3, body.len() - 1])
        {
            let mut stream = MultipartStream::new("b0");
            let mut got = Vec::new();
            let mut head = None;
            for piece in [&body[..cut], &body[cut..], &[]] {
                let mut piece = piece;
                if head.is_none() {
                    head = stream.head(piece).unwrap();
                    piece = &[];
                    if head.is_none() {
                        continue;
                    }
                }
                got.extend_from_slice(&stream.media(piece).unwrap());
            }
            stream
                .finish()
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            let head = head.unwrap();
            assert_eq!(head.resource, whole[0], "cut at {cut}");
            assert_eq!(head.media.header("content-type"), Some("text/csv"));
            assert!(got == whole[1].body, "cut at {cut}: media differs");
        }
    }

    #[test]
    fn a_multipart_stream_refuses_a_third_part_and_an_unterminated_body() {
        let three = b"--x\r\n\r\n{}\r\n--x\r\n\r\nmedia\r\n--x\r\n\r\nmore\r\n--x--";
        let mut stream = MultipartStream::new("x");
        stream.head(three).unwrap().unwrap();
        assert!(stream.media(&[]).unwrap_err().contains("more than 2 parts"));
        let open = b"--x\r\n\r\n{}\r\n--x\r\n\r\nmedia without an end";
        let mut stream = MultipartStream::new("x");
        stream.head(open).unwrap().unwrap();
        stream.media(&[]).unwrap();
        assert!(stream.finish().is_err());
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
}
