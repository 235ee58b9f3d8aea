//! `multipart/related` upload bodies: `multipart_boundary` of a content type, then
//! `MultipartStream` fed the body cut at arbitrary points against `parse_multipart`
//! fed it whole.
//!
//! Input: the content type's line (up to the first `\n`), then up to 8 cut points
//! (one byte each, scaled to the body), then a `\n` and the body; a seed is readable
//! as a content type, a line of cut bytes, and a body. Asserts:
//!
//! - `multipart_boundary` gives 1 to 70 bytes without line breaks, or an error.
//! - Whole and in pieces, the same answer: both refused, or both the same head and
//!   the same media bytes.
//! - The media is never longer than the body, and is a run of the body's bytes
//!   (what a parser hands on was sent, in order).
//! - Once the body is read, media pieces are never handed on after an error.

#![no_main]

use fake_gcs::wire::{
    MAX_BOUNDARY_BYTES, MultipartHead, MultipartStream, multipart_boundary, parse_multipart,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (content_type, rest) = split_line(data);
    let (cuts, body) = split_line(rest);
    let Ok(content_type) = std::str::from_utf8(content_type) else {
        return;
    };
    let Ok(boundary) = multipart_boundary(content_type) else {
        return;
    };
    assert!(
        (1..=MAX_BOUNDARY_BYTES).contains(&boundary.len()) && !boundary.contains(['\r', '\n']),
        "{content_type:?} gave the boundary {boundary:?}"
    );

    let whole = parse_multipart(body, &boundary);
    let mut cuts: Vec<usize> = cuts
        .iter()
        .take(8)
        .map(|c| usize::from(*c) * body.len() / 256)
        .collect();
    cuts.sort_unstable();
    let streamed = streamed(body, &boundary, &cuts);

    match (&whole, &streamed) {
        (Ok((head, media)), Ok((streamed_head, streamed_media))) => {
            assert_eq!(head, streamed_head, "cut at {cuts:?}");
            assert!(
                media[..] == streamed_media[..],
                "media differs cut at {cuts:?}: {media:?} whole, {streamed_media:?} in pieces"
            );
            assert!(media.len() <= body.len());
            assert!(
                media.is_empty() || memchr::memmem::find(body, media).is_some(),
                "the media is not a run of the body's bytes"
            );
            assert!(head.resource.body.len() <= body.len());
        }
        (Err(_), Err(_)) => {}
        _ => panic!(
            "whole: {:?}; cut at {cuts:?}: {:?}",
            whole.as_ref().map(|(_, m)| m.len()),
            streamed.as_ref().map(|(_, m)| m.len())
        ),
    }
});

fn split_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// The body fed to a `MultipartStream` in pieces cut at `cuts`, as a server reads
/// it: the head until it is complete, then media pieces, then the end.
fn streamed(
    body: &[u8],
    boundary: &str,
    cuts: &[usize],
) -> Result<(MultipartHead, Vec<u8>), fake_gcs::wire::MultipartError> {
    let mut stream = MultipartStream::new(boundary)?;
    let mut head = None;
    let mut media = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain([&body.len()]) {
        let piece = &body[from..to];
        from = to;
        match head {
            None => {
                head = stream.head(piece)?;
                if head.is_some() {
                    media.extend_from_slice(&stream.media(&[])?);
                }
            }
            Some(_) => media.extend_from_slice(&stream.media(piece)?),
        }
        assert!(media.len() <= to, "more media than body so far");
    }
    stream.finish()?;
    let head = head.expect("finish succeeded without a head");
    Ok((head, media))
}
