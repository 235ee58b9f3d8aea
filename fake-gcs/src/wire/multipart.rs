//! `multipart/related` bodies (RFC 2046), as the JSON API's multipart upload sends
//! them: the object's resource, then its bytes.
//!
//! One parser, [`MultipartStream`], reads a body as it arrives and resumes where the
//! last call stopped; [`parse_multipart`] is the same parser fed a whole body. What
//! it promises, for any bytes a client sends:
//!
//! - Linear time: every search for the delimiter is a `memchr::memmem` search that
//!   starts where the last one stopped, and a boundary is at most
//!   [`MAX_BOUNDARY_BYTES`] (70, RFC 2046's limit) long.
//! - Bounded memory: at most [`MAX_MULTIPART_HEAD_BYTES`] before the media bytes
//!   start, then what one call brings plus the few bytes the closing delimiter could
//!   begin with.
//! - The media bytes handed on are exactly those between the media part's header
//!   block and the line break before the closing delimiter: a part's headers end at
//!   its first empty line (a part may have none), and a blank line inside the data
//!   is data.
//! - A bad body says what kind of bad ([`MultipartError`]): a head too large is 413,
//!   anything else 400.
//!
//! Accepted as clients send them: `\r\n` or `\n` line breaks, the body's own decided
//! by the line after its first delimiter (RFC 2046 and the official clients send
//! `\r\n`; gsutil, through apitools, bare `\n`, and then media that ends in `\r`
//! keeps it: the line break before the closing delimiter is `\n` alone), a boundary
//! quoted with
//! `"` or `'` (gsutil), a media part with no headers at all (rclone, for an empty
//! content type), transport padding (spaces or tabs) after a delimiter, a preamble
//! before the first one, and white space after the closing one.

use bytes::{Buf, Bytes, BytesMut};
use memchr::memmem::Finder;

use crate::wire::error::Rejection;

/// RFC 2046's limit on a boundary's length, in bytes.
pub const MAX_BOUNDARY_BYTES: usize = 70;

/// The most a multipart upload's first part (the JSON resource) and the media part's
/// headers may take, with their delimiters, before the media bytes start.
pub const MAX_MULTIPART_HEAD_BYTES: usize = 64 * 1024;

/// Why a multipart body (or its content type) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultipartError {
    /// The content type is not `multipart/related` with a `boundary` parameter.
    #[error("uploadType=multipart needs Content-Type: multipart/related; boundary=...")]
    NoBoundary,
    /// The boundary is longer than RFC 2046 allows, empty, or holds a line break.
    #[error(
        "the multipart boundary is {len} bytes; RFC 2046 allows 1 to {MAX_BOUNDARY_BYTES} \
         without line breaks"
    )]
    BadBoundary {
        /// Its length, in bytes.
        len: usize,
    },
    /// The resource part and the media part's headers take more than
    /// [`MAX_MULTIPART_HEAD_BYTES`].
    #[error(
        "the multipart resource and media headers take more than {MAX_MULTIPART_HEAD_BYTES} bytes"
    )]
    HeadTooLarge,
    /// The body is not two parts delimited by the boundary.
    #[error("malformed multipart body: {0}")]
    Malformed(&'static str),
}

impl MultipartError {
    /// The HTTP status a server answers it with: 413 for a head too large, 400 else.
    pub fn status(&self) -> u16 {
        match self {
            MultipartError::HeadTooLarge => 413,
            _ => 400,
        }
    }
}

impl From<MultipartError> for Rejection {
    fn from(e: MultipartError) -> Self {
        Rejection::status(e.status(), e.to_string())
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

/// The `boundary` parameter of a `multipart/related` content type, unquoted (`"..."`
/// or, as gsutil sends it, `'...'`), at most [`MAX_BOUNDARY_BYTES`].
pub fn multipart_boundary(content_type: &str) -> Result<String, MultipartError> {
    let mut params = content_type.split(';');
    let kind = params.next().unwrap_or_default().trim();
    if !kind.eq_ignore_ascii_case("multipart/related") {
        return Err(MultipartError::NoBoundary);
    }
    let value = params
        .find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("boundary")
                .then_some(v.trim())
        })
        .ok_or(MultipartError::NoBoundary)?;
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
        .unwrap_or(value);
    let len = unquoted.len();
    if len == 0 || len > MAX_BOUNDARY_BYTES || unquoted.contains(['\r', '\n']) {
        return Err(MultipartError::BadBoundary { len });
    }
    Ok(unquoted.to_string())
}

/// What a multipart body holds before its media bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartHead {
    /// The first part: the object's resource.
    pub resource: Part,
    /// The second part's headers (its `body` is empty: the bytes follow).
    pub media: Part,
}

/// A whole `multipart/related` body of two parts: its head and the media bytes.
pub fn parse_multipart(
    body: &[u8],
    boundary: &str,
) -> Result<(MultipartHead, Bytes), MultipartError> {
    let mut stream = MultipartStream::new(boundary)?;
    let head = stream.head(body)?.ok_or(MultipartError::Malformed(
        "the body ended before its media part",
    ))?;
    let media = stream.media(&[])?;
    stream.finish()?;
    Ok((head, media))
}

/// A `multipart/related` upload body read as it arrives (see the module doc): the
/// first part (the object's resource) whole, then the second part's bytes in
/// pieces.
#[derive(Debug)]
pub struct MultipartStream {
    /// Finds `--boundary`.
    delimiter: Finder<'static>,
    /// Bytes not yet consumed.
    pending: BytesMut,
    /// How far into `pending` the delimiter is known not to start (searches resume
    /// here).
    searched: usize,
    /// Bytes consumed before the media bytes.
    head_bytes: usize,
    phase: Phase,
    /// The resource part, once read.
    resource: Option<Part>,
    /// The headers of the part being read.
    headers: Vec<(String, String)>,
    /// The body's line breaks, as the line after its first delimiter ends: with
    /// bare `\n` (gsutil), the `\r` before a delimiter's `\n` is data.
    bare_lf: Option<bool>,
}

/// Where the parser is. Parts are numbered 0 (the resource) and 1 (the media).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the first delimiter.
    Preamble,
    /// Just after a delimiter that opens part `n`: padding, then a line break.
    Opened(u8),
    /// In part `n`'s header lines.
    Headers(u8),
    /// In part 0's bytes.
    Resource,
    /// In the media bytes.
    Media,
    /// The media's closing delimiter was read.
    Closed,
}

/// What the next bytes of `pending` say.
enum Step {
    /// The phase moved on: look again.
    Moved,
    /// More bytes are needed.
    NeedMore,
}

impl MultipartStream {
    /// A reader for a body whose parts are delimited by `boundary` (as
    /// [`multipart_boundary`] returns it).
    pub fn new(boundary: &str) -> Result<Self, MultipartError> {
        let len = boundary.len();
        if len == 0 || len > MAX_BOUNDARY_BYTES || boundary.contains(['\r', '\n']) {
            return Err(MultipartError::BadBoundary { len });
        }
        let delimiter = format!("--{boundary}").into_bytes();
        Ok(Self {
            delimiter: Finder::new(&delimiter).into_owned(),
            pending: BytesMut::new(),
            searched: 0,
            head_bytes: 0,
            phase: Phase::Preamble,
            resource: None,
            headers: Vec::new(),
            bare_lf: None,
        })
    }

    /// Takes the next bytes of the body while the head is not complete; returns the
    /// head once it is (the media bytes after it wait for [`MultipartStream::media`]).
    pub fn head(&mut self, data: &[u8]) -> Result<Option<MultipartHead>, MultipartError> {
        if self.phase == Phase::Media || self.phase == Phase::Closed {
            return Err(MultipartError::Malformed("the head was already read"));
        }
        self.pending.extend_from_slice(data);
        while self.phase != Phase::Media {
            if let Step::NeedMore = self.step_head()? {
                if self.head_bytes + self.pending.len() > MAX_MULTIPART_HEAD_BYTES {
                    return Err(MultipartError::HeadTooLarge);
                }
                return Ok(None);
            }
            if self.head_bytes > MAX_MULTIPART_HEAD_BYTES {
                return Err(MultipartError::HeadTooLarge);
            }
        }
        Ok(Some(MultipartHead {
            resource: self.resource.take().expect("read before the media"),
            media: Part {
                headers: std::mem::take(&mut self.headers),
                body: Bytes::new(),
            },
        }))
    }

    /// Takes the next bytes of the body once the head is read (`data` may be empty)
    /// and returns the media bytes known not to be the closing delimiter.
    pub fn media(&mut self, data: &[u8]) -> Result<Bytes, MultipartError> {
        match self.phase {
            Phase::Media => {}
            Phase::Closed if data.iter().all(u8::is_ascii_whitespace) => return Ok(Bytes::new()),
            Phase::Closed => {
                return Err(MultipartError::Malformed(
                    "bytes after the closing multipart delimiter",
                ));
            }
            _ => {
                return Err(MultipartError::Malformed(
                    "the multipart head is not complete",
                ));
            }
        }
        self.pending.extend_from_slice(data);
        match self.find_closing()? {
            Some((end, after)) => {
                let media = self.pending.split_to(end).freeze();
                // The line break, the delimiter and its `--`.
                self.pending.advance(after - end + 2);
                let rest_all_white = self.pending.iter().all(u8::is_ascii_whitespace);
                self.pending.clear();
                self.phase = Phase::Closed;
                if !rest_all_white {
                    return Err(MultipartError::Malformed(
                        "bytes after the closing multipart delimiter",
                    ));
                }
                Ok(media)
            }
            None => {
                // Whatever could still begin a line break and the delimiter stays.
                // Whatever could still begin the closing delimiter's line stays:
                // nothing at or after `searched`.
                let keep = self.delimiter.needle().len() + 2;
                let emit = self.pending.len().saturating_sub(keep).min(self.searched);
                self.searched -= emit;
                Ok(self.pending.split_to(emit).freeze())
            }
        }
    }

    /// The body ended: the media part must have been closed.
    pub fn finish(&self) -> Result<(), MultipartError> {
        match self.phase {
            Phase::Closed => Ok(()),
            Phase::Media => Err(MultipartError::Malformed("the body is not terminated")),
            _ => Err(MultipartError::Malformed(
                "the body ended before its media part",
            )),
        }
    }

    /// One step of the head's phases.
    fn step_head(&mut self) -> Result<Step, MultipartError> {
        match self.phase {
            Phase::Preamble => self.step_preamble(),
            Phase::Opened(part) => self.step_opened(part),
            Phase::Headers(part) => self.step_header_line(part),
            Phase::Resource => self.step_resource(),
            Phase::Media | Phase::Closed => unreachable!("not the head"),
        }
    }

    /// Skips the preamble up to the first delimiter.
    fn step_preamble(&mut self) -> Result<Step, MultipartError> {
        let needle = self.delimiter.needle().len();
        match self.delimiter.find(&self.pending[self.searched..]) {
            Some(at) => {
                self.consume(self.searched + at + needle);
                self.phase = Phase::Opened(0);
                Ok(Step::Moved)
            }
            None => {
                // Drop what cannot hold the start of a delimiter.
                let drop = self.pending.len().saturating_sub(needle);
                self.consume(drop);
                Ok(Step::NeedMore)
            }
        }
    }

    /// After the delimiter that opens part `part`: optional padding, then a line
    /// break; `--` closes the body too early.
    fn step_opened(&mut self, part: u8) -> Result<Step, MultipartError> {
        let padding = self
            .pending
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
        self.consume(padding);
        let rest = &self.pending[..];
        if rest.starts_with(b"--") {
            return Err(MultipartError::Malformed(match part {
                0 => "the body has no parts",
                _ => "the upload has 1 part; expected 2 (the resource, then the media)",
            }));
        }
        match line_break(rest) {
            LineBreak::Found(len) => {
                self.bare_lf.get_or_insert(len == 1);
                self.consume(len);
                self.phase = Phase::Headers(part);
                Ok(Step::Moved)
            }
            LineBreak::NeedMore => Ok(Step::NeedMore),
            LineBreak::Not => Err(MultipartError::Malformed(
                "a multipart delimiter is not followed by a line break",
            )),
        }
    }

    /// One header line of part `part`; an empty line ends the headers.
    fn step_header_line(&mut self, part: u8) -> Result<Step, MultipartError> {
        let Some(found) = memchr::memchr(b'\n', &self.pending[self.searched..]) else {
            self.searched = self.pending.len();
            return Ok(Step::NeedMore);
        };
        let newline = self.searched + found;
        let line = &self.pending[..newline];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            self.consume(newline + 1);
            self.phase = match part {
                0 => Phase::Resource,
                _ => Phase::Media,
            };
            return Ok(Step::Moved);
        }
        let line = std::str::from_utf8(line)
            .map_err(|_| MultipartError::Malformed("a part's headers are not UTF-8"))?;
        if let Some((name, value)) = line.split_once(':') {
            let header = (name.trim().to_ascii_lowercase(), value.trim().to_string());
            self.headers.push(header);
        }
        self.consume(newline + 1);
        Ok(Step::Moved)
    }

    /// The resource part's bytes, up to the delimiter that opens the media part.
    fn step_resource(&mut self) -> Result<Step, MultipartError> {
        let Some((end, after)) = self.find_delimiter() else {
            return Ok(Step::NeedMore);
        };
        let body = self.pending.split_to(end).freeze();
        self.searched = 0;
        self.head_bytes += end;
        self.consume(after - end);
        let headers = std::mem::take(&mut self.headers);
        self.resource = Some(Part { headers, body });
        self.phase = Phase::Opened(1);
        Ok(Step::Moved)
    }

    /// In the media bytes: where the closing delimiter's line break starts and where
    /// the bytes after the delimiter start, once the
    /// delimiter and the `--` after it are in `pending`. A delimiter followed by a
    /// line break opens a third part (refused); followed by anything else it is not
    /// a delimiter, and the search goes on past it.
    fn find_closing(&mut self) -> Result<Option<(usize, usize)>, MultipartError> {
        loop {
            let Some((end, after)) = self.find_delimiter() else {
                return Ok(None);
            };
            let rest = &self.pending[after..];
            if rest.len() < 2 {
                self.searched = end;
                return Ok(None);
            }
            if rest.starts_with(b"--") {
                return Ok(Some((end, after)));
            }
            let padding = rest
                .iter()
                .take_while(|b| matches!(b, b' ' | b'\t'))
                .count();
            match line_break(&rest[padding..]) {
                LineBreak::Found(_) => {
                    return Err(MultipartError::Malformed(
                        "the upload has more than 2 parts; expected 2",
                    ));
                }
                LineBreak::NeedMore => {
                    self.searched = end;
                    return Ok(None);
                }
                LineBreak::Not => self.searched = after,
            }
        }
    }

    /// The next delimiter at the start of a line in `pending`, from where the last
    /// search stopped: where its line break starts and where the bytes after it
    /// start. Moves `searched` past what holds none.
    fn find_delimiter(&mut self) -> Option<(usize, usize)> {
        let needle = self.delimiter.needle().len();
        loop {
            let Some(found) = self.delimiter.find(&self.pending[self.searched..]) else {
                self.searched = self
                    .pending
                    .len()
                    .saturating_sub(needle + 1)
                    .max(self.searched);
                return None;
            };
            let at = self.searched + found;
            let before = &self.pending[..at];
            // The line break before a delimiter is the body's own: with bare `\n`
            // line breaks a `\r` before it is the data's last byte.
            let line_start = if before.ends_with(b"\r\n") && self.bare_lf != Some(true) {
                Some(at - 2)
            } else if before.ends_with(b"\n") {
                Some(at - 1)
            } else {
                None
            };
            match line_start {
                Some(end) => {
                    self.searched = end;
                    return Some((end, at + needle));
                }
                None => self.searched = at + 1,
            }
        }
    }

    /// Drops `n` bytes of the head from `pending`.
    fn consume(&mut self, n: usize) {
        self.pending.advance(n);
        self.searched = self.searched.saturating_sub(n);
        self.head_bytes += n;
    }
}

/// What the bytes at the start of a line's end are.
enum LineBreak {
    /// `\r\n` or `\n`, of this many bytes.
    Found(usize),
    /// Empty, or a lone `\r` so far.
    NeedMore,
    /// Something else.
    Not,
}

/// The one place a line break is recognised: `\r\n` or `\n`.
fn line_break(s: &[u8]) -> LineBreak {
    match s {
        [b'\r', b'\n', ..] => LineBreak::Found(2),
        [b'\n', ..] => LineBreak::Found(1),
        [] | [b'\r'] => LineBreak::NeedMore,
        _ => LineBreak::Not,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes rich in what confuses a multipart parser: dashes, line breaks, blank
    /// lines, spaces and the boundary's letters.
    fn tricky(max: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(b"-\r\n bx".to_vec()), 0..max)
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2_000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever the media bytes (blank lines and boundary-like runs included),
        /// the line breaks, the media part's headers and how the body is cut, a body
        /// that parses gives back exactly the media sent, read whole or in pieces;
        /// and media that never holds the boundary always parses.
        #[test]
        fn a_parsed_body_gives_back_exactly_the_media_sent(
            media in tricky(200),
            crlf in any::<bool>(),
            with_headers in any::<bool>(),
            preamble in tricky(20),
            cuts in prop::collection::vec(0usize..400, 0..6),
        ) {
            let nl: &[u8] = if crlf { b"\r\n" } else { b"\n" };
            let mut body = Vec::new();
            if !preamble.windows(3).any(|w| w == b"--b") {
                body.extend_from_slice(&preamble);
                body.extend_from_slice(nl);
            }
            body.extend_from_slice(b"--bx");
            body.extend_from_slice(nl);
            body.extend_from_slice(b"content-type: application/json");
            body.extend_from_slice(nl);
            body.extend_from_slice(nl);
            body.extend_from_slice(b"{}");
            body.extend_from_slice(nl);
            body.extend_from_slice(b"--bx");
            body.extend_from_slice(nl);
            if with_headers {
                body.extend_from_slice(b"content-type: text/plain");
                body.extend_from_slice(nl);
            }
            body.extend_from_slice(nl);
            body.extend_from_slice(&media);
            body.extend_from_slice(nl);
            body.extend_from_slice(b"--bx--");
            body.extend_from_slice(nl);
            let whole = parse_multipart(&body, "bx");
            if !media.windows(4).any(|w| w == b"--bx") {
                prop_assert!(whole.is_ok(), "{whole:?}");
            }
            if let Ok((head, got)) = &whole {
                prop_assert_eq!(&got[..], &media[..]);
                prop_assert_eq!(head.media.headers.is_empty(), !with_headers);
            }
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c < body.len()).collect();
            cuts.sort();
            let mut stream = MultipartStream::new("bx").unwrap();
            let mut streamed = Vec::new();
            let mut head = None;
            let mut from = 0;
            let mut result = Ok(());
            for to in cuts.into_iter().chain([body.len()]) {
                let piece = &body[from..to];
                from = to;
                let step = match head {
                    None => stream.head(piece).map(|h| {
                        head = h;
                    }).and_then(|()| match head {
                        Some(_) => stream.media(&[]).map(|m| streamed.extend_from_slice(&m)),
                        None => Ok(()),
                    }),
                    Some(_) => stream.media(piece).map(|m| streamed.extend_from_slice(&m)),
                };
                if let Err(e) = step {
                    result = Err(e);
                    break;
                }
            }
            let result = result.and_then(|()| stream.finish());
            match &whole {
                Ok((_, got)) => {
                    prop_assert!(result.is_ok(), "{result:?}");
                    prop_assert_eq!(&streamed[..], &got[..]);
                }
                Err(_) => prop_assert!(result.is_err()),
            }
        }
    }

    fn body(resource: &[u8], media_head: &[u8], media: &[u8], boundary: &str) -> Vec<u8> {
        let mut body =
            format!("--{boundary}\r\ncontent-type: application/json\r\n\r\n").into_bytes();
        body.extend_from_slice(resource);
        body.extend_from_slice(format!("\r\n--{boundary}\r\n").as_bytes());
        body.extend_from_slice(media_head);
        body.extend_from_slice(media);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        body
    }

    /// Feeds `body` cut at `cuts` and returns the head and the media.
    fn streamed(body: &[u8], boundary: &str, cuts: &[usize]) -> (MultipartHead, Vec<u8>) {
        let mut stream = MultipartStream::new(boundary).unwrap();
        let mut head = None;
        let mut media = Vec::new();
        let mut from = 0;
        for &to in cuts.iter().chain([&body.len()]) {
            let piece = &body[from..to];
            from = to;
            match head {
                None => {
                    head = stream.head(piece).unwrap();
                    if head.is_some() {
                        media.extend_from_slice(&stream.media(&[]).unwrap());
                    }
                }
                Some(_) => media.extend_from_slice(&stream.media(piece).unwrap()),
            }
        }
        stream.finish().unwrap();
        (head.unwrap(), media)
    }

    /// Every split of a body into two feeds gives the same head and media as the
    /// whole-body parser.
    #[test]
    fn a_multipart_body_read_in_pieces_is_the_body_read_whole() {
        let media: Vec<u8> = (0..3_000u32).map(|i| b"ab\r\n-"[i as usize % 5]).collect();
        let body = body(
            b"{\"name\":\"n\"}",
            b"content-type: text/csv\r\n\r\n",
            &media,
            "b0",
        );
        let (whole_head, whole_media) = parse_multipart(&body, "b0").unwrap();
        assert_eq!(&whole_head.resource.body[..], b"{\"name\":\"n\"}");
        assert_eq!(whole_media[..], media[..]);
        for cut in (0..body.len())
            .step_by(37)
            .chain([1, body.len() - 3, body.len() - 1])
        {
            let (head, got) = streamed(&body, "b0", &[cut]);
            assert_eq!(head, whole_head, "cut at {cut}");
            assert_eq!(head.media.header("content-type"), Some("text/csv"));
            assert!(got == media, "cut at {cut}: media differs");
        }
    }

    #[test]
    fn media_ending_in_cr_keeps_it_when_line_breaks_are_bare_lf() {
        // Found by review (issue 53): gsutil (apitools) separates the parts with
        // bare `\n`, and the parser took a trailing `\r\n` for the delimiter's line
        // break, so a file whose last byte is `\r` was stored one byte short with a
        // 200 (about one file in 256).
        let boundary = "===============7330845974216740156==";
        let body = format!(
            "--{boundary}\ncontent-type: application/json\nMIME-Version: 1.0\n\n\
             {{\"name\": \"f\"}}\n--{boundary}\ncontent-type: text/plain\nMIME-Version: \
             1.0\nContent-Transfer-Encoding: binary\n\nends in CR\r\n--{boundary}--"
        );
        let (_, media) = parse_multipart(body.as_bytes(), boundary).unwrap();
        assert_eq!(&media[..], b"ends in CR\r");
        // Read a byte at a time, the same.
        let cuts: Vec<usize> = (1..body.len()).collect();
        let (_, streamed_media) = streamed(body.as_bytes(), boundary, &cuts);
        assert_eq!(&streamed_media[..], b"ends in CR\r");
        // With CR LF line breaks a trailing CR is data too.
        let body = body.replace('\n', "\r\n");
        let (_, media) = parse_multipart(body.as_bytes(), boundary).unwrap();
        assert_eq!(&media[..], b"ends in CR\r");
    }

    #[test]
    fn a_media_part_without_headers_keeps_a_blank_line_in_its_data() {
        // rclone sends no header for an empty content type; the data's own blank
        // line must not be taken for the end of headers.
        let body = body(b"{}", b"\r\n", b"hello\n\nworld\n", "x");
        let (head, media) = parse_multipart(&body, "x").unwrap();
        assert!(head.media.headers.is_empty());
        assert_eq!(&media[..], b"hello\n\nworld\n");
        let lf_only = b"--x\n\n{}\n--x\n\nhello\n\nworld\n\n--x--\n";
        let (_, media) = parse_multipart(lf_only, "x").unwrap();
        assert_eq!(&media[..], b"hello\n\nworld\n");
    }

    #[test]
    fn a_multipart_stream_refuses_a_third_part_and_an_unterminated_body() {
        let three = b"--x\r\n\r\n{}\r\n--x\r\n\r\nmedia\r\n--x\r\n\r\nmore\r\n--x--";
        let mut stream = MultipartStream::new("x").unwrap();
        stream.head(three).unwrap().unwrap();
        assert_eq!(
            stream.media(&[]).unwrap_err(),
            MultipartError::Malformed("the upload has more than 2 parts; expected 2")
        );
        let open = b"--x\r\n\r\n{}\r\n--x\r\n\r\nmedia without an end";
        let mut stream = MultipartStream::new("x").unwrap();
        stream.head(open).unwrap().unwrap();
        stream.media(&[]).unwrap();
        assert!(stream.finish().is_err());
        let one = b"--x\r\n\r\n{}\r\n--x--\r\n";
        assert!(matches!(
            parse_multipart(one, "x"),
            Err(MultipartError::Malformed(m)) if m.contains("1 part")
        ));
        let trailing = b"--x\r\n\r\n{}\r\n--x\r\n\r\nmedia\r\n--x--\r\nmore data";
        assert!(parse_multipart(trailing, "x").is_err());
    }

    #[test]
    fn a_delimiter_inside_a_line_or_followed_by_other_bytes_is_data() {
        let media = b"a--x b\r\n--xy is data\r\n--x\tnot a part";
        let body = body(b"{}", b"\r\n", media, "x");
        let (_, got) = parse_multipart(&body, "x").unwrap();
        assert_eq!(&got[..], media);
    }

    #[test]
    fn multipart_bodies_split_into_metadata_and_media() {
        let body = b"preamble\r\n--abc  \r\nContent-Type: application/json\r\n\r\n{\"name\":\"a\"}\r\n--abc\r\ncontent-type: text/plain\r\n\r\nhel\r\nlo\r\n--abc--\r\n";
        let (head, media) = parse_multipart(body, "abc").unwrap();
        assert_eq!(
            head.resource.header("content-type"),
            Some("application/json")
        );
        assert_eq!(&head.resource.body[..], b"{\"name\":\"a\"}");
        assert_eq!(head.media.header("content-type"), Some("text/plain"));
        assert_eq!(&media[..], b"hel\r\nlo");
        assert!(parse_multipart(b"--abc\r\n\r\nx", "abc").is_err());
    }

    #[test]
    fn boundaries_are_unquoted_and_bounded_by_rfc_2046() {
        let boundary = |t: &str| multipart_boundary(t);
        assert_eq!(
            boundary("multipart/related; boundary=\"=== x ===\"").as_deref(),
            Ok("=== x ===")
        );
        // gsutil quotes with single quotes.
        assert_eq!(
            boundary("multipart/related; boundary='===============1234=='").as_deref(),
            Ok("===============1234==")
        );
        assert_eq!(
            boundary("application/json"),
            Err(MultipartError::NoBoundary)
        );
        assert_eq!(
            boundary("multipart/related"),
            Err(MultipartError::NoBoundary)
        );
        let long = format!("multipart/related; boundary={}", "b".repeat(71));
        assert_eq!(
            boundary(&long),
            Err(MultipartError::BadBoundary { len: 71 })
        );
        let longest = format!("multipart/related; boundary={}", "b".repeat(70));
        assert!(boundary(&longest).is_ok());
        assert_eq!(
            boundary("multipart/related; boundary=\"\""),
            Err(MultipartError::BadBoundary { len: 0 })
        );
        assert!(MultipartStream::new(&"b".repeat(128 * 1024)).is_err());
    }

    #[test]
    fn a_head_over_its_limit_is_413_whatever_the_pieces() {
        let resource = vec![b' '; MAX_MULTIPART_HEAD_BYTES];
        let body = body(&resource, b"\r\n", b"m", "x");
        assert_eq!(
            parse_multipart(&body, "x").unwrap_err(),
            MultipartError::HeadTooLarge
        );
        let mut stream = MultipartStream::new("x").unwrap();
        let mut refused = None;
        for piece in body.chunks(1000) {
            if let Err(e) = stream.head(piece) {
                refused = Some(e);
                break;
            }
        }
        assert_eq!(refused, Some(MultipartError::HeadTooLarge));
        assert_eq!(MultipartError::HeadTooLarge.status(), 413);
        // A preamble without a delimiter is bounded the same way.
        let mut stream = MultipartStream::new("x").unwrap();
        let noise = vec![b'-'; 4096];
        let refused = (0..100).find_map(|_| stream.head(&noise).err());
        assert_eq!(refused, Some(MultipartError::HeadTooLarge));
    }

    #[test]
    fn media_fed_a_byte_at_a_time_holds_back_only_the_delimiters_length() {
        let media: Vec<u8> = (0..10_000usize).map(|i| b"-\r\nboundar"[i % 10]).collect();
        let body = body(b"{}", b"\r\n", &media, "boundary");
        let cuts: Vec<usize> = (1..body.len()).collect();
        let (_, got) = streamed(&body, "boundary", &cuts);
        assert!(got == media);
        let mut stream = MultipartStream::new("boundary").unwrap();
        let head_end = body.len() - media.len() - "\r\n--boundary--\r\n".len();
        stream.head(&body[..head_end]).unwrap().unwrap();
        for byte in &media {
            stream.media(std::slice::from_ref(byte)).unwrap();
            assert!(stream.pending.len() <= "--boundary".len() + 2);
        }
    }
}
