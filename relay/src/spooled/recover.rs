//! What an earlier run on the same directory spooled, read back from its entries in
//! two steps, so that a restart never waits for a whole read of the backlog before
//! its first answer:
//!
//! 1. [`head`]: an entry's header (its name, size, crc32c, creation time and
//!    attributes), one read of at most an entry's largest head (9,264 bytes). Reads,
//!    lists and deletes wait for this step over the backlog (a read of a name
//!    cannot know it is not there before).
//! 2. [`digest`]: its payload, read 1 MiB at a time for its MD5 (checked against the
//!    header's crc32c), in the background once step 1 is done, or first by a
//!    request that needs that object's MD5.

use std::borrow::Cow;

use fake_gcs::wire::{DEFAULT_CONTENT_TYPE, Hashing, ObjectRecord};
use spool::Spool;

/// The most a piece of a payload read at once.
pub(super) const PIECE_BYTES: u64 = 1 << 20;

/// Headers read at once while learning an earlier run's entries.
pub(super) const HEADS_AT_ONCE: usize = 32;

/// The object entry `seq` holds, as it will be in the bucket, from its header
/// alone (its MD5 not read: all zeros); `None` when the entry is gone (delivered
/// meanwhile).
pub(super) async fn head(spool: &Spool, seq: u64) -> std::io::Result<Option<ObjectRecord>> {
    let Some((entry, file_bytes)) = spool.entry_file(seq) else {
        return Ok(None);
    };
    let longest = spool::entry::head_bytes(
        spool::name::MAX_NAME_BYTES,
        spool::entry::MAX_ATTRIBUTE_BYTES,
    );
    let read = spool
        .disk()
        .read_range(&entry, 0, file_bytes.min(longest as u64));
    let head = match read.await {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        read => read?,
    };
    let (header, _) = spool::entry::decode_header(&head).map_err(std::io::Error::other)?;
    let (content_type, attributes) = crate::answer::object_attributes(&header.attributes);
    let content_type = match content_type {
        Some(given) => Cow::Owned(given),
        None => Cow::Borrowed(DEFAULT_CONTENT_TYPE),
    };
    Ok(Some(ObjectRecord {
        generation: i64::try_from(header.created_unix_ms.saturating_mul(1000)).unwrap_or(i64::MAX),
        name: header.name,
        size: header.payload_len,
        crc32c: header.payload_crc32c,
        md5: [0; 16],
        created_unix_ms: header.created_unix_ms,
        content_type,
        attributes: attributes.boxed(),
        component_count: None,
    }))
}

/// The MD5 of entry `seq`'s payload of `size` bytes, read from its file; `None`
/// when the entry is gone. Refused when the payload's crc32c is not `crc32c` (the
/// header's).
pub(super) async fn digest(
    spool: &Spool,
    seq: u64,
    size: u64,
    crc32c: u32,
) -> std::io::Result<Option<[u8; 16]>> {
    let Some((entry, file_bytes)) = spool.entry_file(seq) else {
        return Ok(None);
    };
    let Some(offset) = file_bytes.checked_sub(size) else {
        return Err(std::io::Error::other(
            "the entry is shorter than its payload",
        ));
    };
    let mut hashing = Hashing::default();
    let (mut at, end) = (offset, file_bytes);
    while at < end {
        let read = spool
            .disk()
            .read_range(&entry, at, (end - at).min(PIECE_BYTES));
        let piece = match read.await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            read => read?,
        };
        if piece.is_empty() {
            return Err(std::io::Error::other("the entry ended before its payload"));
        }
        hashing.update(&piece);
        at += piece.len() as u64;
    }
    let digests = hashing.finish();
    if digests.crc32c != crc32c {
        return Err(std::io::Error::other(
            "the payload's crc32c is not the header's",
        ));
    }
    Ok(Some(digests.md5))
}
