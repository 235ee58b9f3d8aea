//! The on-disk entry format: one file per pending object.
//!
//! Version 3 (written since 2026-12-06; versions 1 and 2 are still read):
//!
//! ```text
//! offset  size  field
//!      0     8  magic "SPOOLENT"
//!      8     1  format version (3); versions 1 and 2 wrote a little-endian u16 here,
//!               so their byte 9 is zero
//!      9     1  flags: bit 0 set for WriteMode::Overwrite, clear for
//!               CreateIfAbsent; the other bits zero (versions 1 and 2: zero, every
//!               entry create-if-absent)
//!     10     2  object name length n, in bytes (at most 1024), little-endian like
//!               every integer below
//!     12     4  attribute block length a, in bytes (at most 8 KiB; version 1: zero)
//!     16     8  sequence number (the entry's place in the drain order)
//!     24     8  creation time, milliseconds since the Unix epoch (for ages)
//!     32     8  payload length in bytes
//!     40     4  crc32c of the payload
//!     44     4  crc32c of bytes 0..44, then the name, then the attribute block
//!     48     n  object name, UTF-8
//!   48+n     a  attributes (below)
//! 48+n+a     m  payload
//! ```
//!
//! The attribute block holds the object's attributes (content type, encoding,
//! language, disposition, cache control, storage class, custom metadata), each as
//! `kind: u8`, for custom metadata `key length: u16, key`, then `value length: u16,
//! value`, sorted by kind and key so that the same attributes always encode alike.
//!
//! The header checksum covers the name and attributes, so a torn or bit-flipped
//! header is never mistaken for a valid one; the payload has its own checksum so a
//! reader can check the header without hashing the whole object. A file that fails
//! any check is [`Corrupt`] and is quarantined by the spool, never uploaded.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};
use object_store::{Attribute, AttributeValue, Attributes};

use crate::disk::Contents;
use crate::write_mode::WriteMode;

/// The first eight bytes of every entry file.
pub const MAGIC: [u8; 8] = *b"SPOOLENT";
/// The format version this code writes.
pub const FORMAT_VERSION: u16 = 3;
/// The oldest format version this code reads.
pub const OLDEST_READABLE_VERSION: u16 = 1;
/// Size of the fixed part of the header, before the object name.
pub const FIXED_HEADER_BYTES: usize = 48;
/// Largest attribute block, in bytes: Cloud Storage's limit on custom metadata.
pub const MAX_ATTRIBUTE_BYTES: usize = 8 * 1024;
/// Flag bit: the entry overwrites ([`WriteMode::Overwrite`]).
const FLAG_OVERWRITE: u8 = 1;

/// Everything an entry records about its object, except the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Position in the drain order; unique within a spool directory.
    pub seq: u64,
    /// When the entry was written, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// The object name the payload is to be written under.
    pub name: String,
    /// The object's attributes, sent with its drain write.
    pub attributes: Attributes,
    /// What its drain write does to an object already under its name.
    pub mode: WriteMode,
    /// Length of the encoded attribute block, in bytes.
    pub attribute_bytes: u32,
    /// Payload length in bytes.
    pub payload_len: u64,
    /// crc32c of the payload.
    pub payload_crc32c: u32,
}

impl Header {
    /// Size of the whole entry file this header describes.
    pub fn file_bytes(&self) -> u64 {
        file_bytes(
            self.name.len(),
            self.attribute_bytes as usize,
            self.payload_len,
        )
    }
}

/// Size of an entry file for a name of `name_len` bytes, an attribute block of
/// `attribute_len` bytes and a payload of `payload_len` bytes. This is what counts
/// against a spool's `max_bytes`.
pub fn file_bytes(name_len: usize, attribute_len: usize, payload_len: u64) -> u64 {
    head_bytes(name_len, attribute_len) as u64 + payload_len
}

/// Why an entry file cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corrupt {
    /// Shorter than its header says it is.
    #[error("file is {len} bytes, shorter than its {needed}-byte header")]
    Truncated {
        /// Actual file length.
        len: usize,
        /// Bytes the header needs.
        needed: usize,
    },
    /// Does not start with [`MAGIC`].
    #[error("not a spool entry (bad magic)")]
    BadMagic,
    /// Written by a format version this code does not read.
    #[error("unsupported entry format version {0}")]
    UnsupportedVersion(u16),
    /// Flag bits this version of the spool does not know.
    #[error("unknown entry flags {0:#04x}")]
    UnknownFlags(u8),
    /// The header checksum does not match.
    #[error("header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    HeaderChecksum {
        /// Stored value.
        stored: u32,
        /// Value computed from the bytes read.
        computed: u32,
    },
    /// The object name is not UTF-8.
    #[error("object name is not valid UTF-8")]
    NameNotUtf8,
    /// The attribute block does not decode.
    #[error("attribute block is malformed: {0}")]
    Attributes(&'static str),
    /// The file length disagrees with the header.
    #[error("file is {actual} bytes but its header says {expected}")]
    LengthMismatch {
        /// Length the header implies.
        expected: u64,
        /// Actual length.
        actual: u64,
    },
    /// The payload checksum does not match.
    #[error("payload checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    PayloadChecksum {
        /// Stored value.
        stored: u32,
        /// Value computed from the bytes read.
        computed: u32,
    },
}

/// Attributes the entry format cannot store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidAttributes {
    /// An attribute kind this version of the spool does not know.
    #[error("attribute {0} cannot be spooled")]
    Unsupported(String),
    /// A value (or a custom metadata key) that cannot travel in an HTTP header:
    /// object stores' write APIs take attributes as headers, which carry printable
    /// ASCII only. Encode such values first (percent-encoding or base64).
    #[error("attribute {attribute} {text:?} cannot be sent: {reason}")]
    NotHeaderSafe {
        /// The attribute (`content-type`, `metadata owner`, ...).
        attribute: String,
        /// The refused key or value.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The encoded attributes exceed [`MAX_ATTRIBUTE_BYTES`].
    #[error("attributes take {bytes} bytes; at most {MAX_ATTRIBUTE_BYTES} can be spooled")]
    TooLarge {
        /// Their encoded size.
        bytes: usize,
    },
}

const CONTENT_DISPOSITION: u8 = 1;
const CONTENT_ENCODING: u8 = 2;
const CONTENT_LANGUAGE: u8 = 3;
const CONTENT_TYPE: u8 = 4;
const CACHE_CONTROL: u8 = 5;
const STORAGE_CLASS: u8 = 6;
const METADATA: u8 = 7;

fn kind_of(attribute: &Attribute) -> Result<(u8, &str), InvalidAttributes> {
    Ok(match attribute {
        Attribute::ContentDisposition => (CONTENT_DISPOSITION, ""),
        Attribute::ContentEncoding => (CONTENT_ENCODING, ""),
        Attribute::ContentLanguage => (CONTENT_LANGUAGE, ""),
        Attribute::ContentType => (CONTENT_TYPE, ""),
        Attribute::CacheControl => (CACHE_CONTROL, ""),
        Attribute::StorageClass => (STORAGE_CLASS, ""),
        Attribute::Metadata(key) => (METADATA, key.as_ref()),
        other => return Err(InvalidAttributes::Unsupported(format!("{other:?}"))),
    })
}

/// Encodes `attributes` as an attribute block, sorted, or says why it cannot.
pub fn encode_attributes(attributes: &Attributes) -> Result<Vec<u8>, InvalidAttributes> {
    let mut items = Vec::with_capacity(attributes.len());
    for (attribute, value) in attributes {
        let (kind, key) = kind_of(attribute)?;
        check_header_safe(attribute, key, value.as_ref())?;
        items.push((kind, key, value.as_ref()));
    }
    items.sort_unstable();
    let mut out = Vec::new();
    for (kind, key, value) in items {
        out.push(kind);
        if kind == METADATA {
            put_str(&mut out, key)?;
        }
        put_str(&mut out, value)?;
    }
    if out.len() > MAX_ATTRIBUTE_BYTES {
        return Err(InvalidAttributes::TooLarge { bytes: out.len() });
    }
    Ok(out)
}

/// Refuses what an HTTP header cannot carry: a value with anything but printable
/// ASCII, spaces and tabs (raw UTF-8 would be mangled or refused by the store), or
/// a metadata key that is not an HTTP token.
fn check_header_safe(
    attribute: &Attribute,
    key: &str,
    value: &str,
) -> Result<(), InvalidAttributes> {
    let name = || match attribute {
        Attribute::Metadata(key) => format!("metadata {key:?}"),
        other => format!("{other:?}"),
    };
    let value_ok = value
        .bytes()
        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b));
    if !value_ok {
        return Err(InvalidAttributes::NotHeaderSafe {
            attribute: name(),
            text: value.into(),
            reason: "values must be printable ASCII (percent-encode or base64 anything else)",
        });
    }
    // Header names arrive lower-cased, so an upper-case key would come back renamed.
    let token =
        |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b);
    if matches!(attribute, Attribute::Metadata(_)) && (key.is_empty() || !key.bytes().all(token)) {
        return Err(InvalidAttributes::NotHeaderSafe {
            attribute: name(),
            text: key.into(),
            reason: "metadata keys must be lower-case HTTP tokens (a-z, 0-9 and !#$%&'*+-.^_`|~): header names arrive lower-cased",
        });
    }
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &str) -> Result<(), InvalidAttributes> {
    let len = u16::try_from(s.len()).map_err(|_| InvalidAttributes::TooLarge { bytes: s.len() })?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn decode_attributes(mut block: &[u8]) -> Result<Attributes, Corrupt> {
    fn take_str<'a>(block: &mut &'a [u8]) -> Result<&'a str, Corrupt> {
        let len_bytes = block
            .get(..2)
            .ok_or(Corrupt::Attributes("truncated length"))?;
        let len = usize::from(u16::from_le_bytes([len_bytes[0], len_bytes[1]]));
        let s = block
            .get(2..2 + len)
            .ok_or(Corrupt::Attributes("truncated string"))?;
        *block = &block[2 + len..];
        std::str::from_utf8(s).map_err(|_| Corrupt::Attributes("not UTF-8"))
    }
    let mut attributes = Attributes::new();
    while let Some((&kind, rest)) = block.split_first() {
        block = rest;
        let attribute = match kind {
            CONTENT_DISPOSITION => Attribute::ContentDisposition,
            CONTENT_ENCODING => Attribute::ContentEncoding,
            CONTENT_LANGUAGE => Attribute::ContentLanguage,
            CONTENT_TYPE => Attribute::ContentType,
            CACHE_CONTROL => Attribute::CacheControl,
            STORAGE_CLASS => Attribute::StorageClass,
            METADATA => Attribute::Metadata(Cow::Owned(take_str(&mut block)?.to_owned())),
            _ => return Err(Corrupt::Attributes("unknown attribute kind")),
        };
        let value = take_str(&mut block)?.to_owned();
        attributes.insert(attribute, AttributeValue::from(value));
    }
    Ok(attributes)
}

/// Encodes a complete entry file. `attributes` is an attribute block from
/// [`encode_attributes`].
pub fn encode(
    seq: u64,
    created_unix_ms: u64,
    name: &str,
    mode: WriteMode,
    attributes: &[u8],
    payload: &[u8],
) -> Bytes {
    encode_pieces(
        seq,
        created_unix_ms,
        name,
        mode,
        attributes,
        Bytes::copy_from_slice(payload),
    )
    .to_bytes()
}

/// Encodes an entry file as two pieces: the header with the name and attributes, then
/// `payload` itself, not copied (what a put hands to [`crate::Disk`]).
pub fn encode_pieces(
    seq: u64,
    created_unix_ms: u64,
    name: &str,
    mode: WriteMode,
    attributes: &[u8],
    payload: Bytes,
) -> Contents {
    let head = encode_head(
        seq,
        created_unix_ms,
        name,
        mode,
        attributes,
        payload.len() as u64,
        crc32c::crc32c(&payload),
    );
    let contents = Contents::new(head, payload);
    debug_assert_eq!(
        contents.len() as u64,
        file_bytes(name.len(), attributes.len(), contents.body.len() as u64)
    );
    contents
}

/// Encodes the header with the name and attributes (everything before the payload)
/// for a payload of `payload_len` bytes whose crc32c is `payload_crc32c`: what a
/// streamed entry writes over its placeholder once its payload is in.
pub fn encode_head(
    seq: u64,
    created_unix_ms: u64,
    name: &str,
    mode: WriteMode,
    attributes: &[u8],
    payload_len: u64,
    payload_crc32c: u32,
) -> Bytes {
    let name_len = u16::try_from(name.len()).expect("object names are checked to be <= 1024 bytes");
    let attribute_len =
        u32::try_from(attributes.len()).expect("attributes are checked to be <= 8 KiB");
    let head_len = head_bytes(name.len(), attributes.len());
    let mut buf = BytesMut::with_capacity(head_len);
    buf.put_slice(&MAGIC);
    buf.put_u8(FORMAT_VERSION as u8);
    buf.put_u8(match mode {
        WriteMode::CreateIfAbsent => 0,
        WriteMode::Overwrite => FLAG_OVERWRITE,
    });
    buf.put_u16_le(name_len);
    buf.put_u32_le(attribute_len);
    buf.put_u64_le(seq);
    buf.put_u64_le(created_unix_ms);
    buf.put_u64_le(payload_len);
    buf.put_u32_le(payload_crc32c);
    let header_crc = crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(&buf[..44]), name.as_bytes()),
        attributes,
    );
    buf.put_u32_le(header_crc);
    buf.put_slice(name.as_bytes());
    buf.put_slice(attributes);
    debug_assert_eq!(buf.len(), head_len);
    buf.freeze()
}

/// Size of the header with a name of `name_len` bytes and an attribute block of
/// `attribute_len` bytes: where the payload starts.
pub fn head_bytes(name_len: usize, attribute_len: usize) -> usize {
    FIXED_HEADER_BYTES + name_len + attribute_len
}

/// Decodes and checks the header, without reading or hashing the payload. Returns
/// the header and the offset at which the payload starts.
pub fn decode_header(file: &[u8]) -> Result<(Header, usize), Corrupt> {
    if file.len() < FIXED_HEADER_BYTES {
        return Err(Corrupt::Truncated {
            len: file.len(),
            needed: FIXED_HEADER_BYTES,
        });
    }
    if file[..8] != MAGIC {
        return Err(Corrupt::BadMagic);
    }
    let u16_at = |at: usize| u16::from_le_bytes(file[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(file[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap());
    let mode = decode_version_and_flags(file[8], file[9])?;
    let name_end = FIXED_HEADER_BYTES + usize::from(u16_at(10));
    // Version 1 kept these four bytes zero; they are covered by the checksum.
    let attribute_bytes = u32_at(12);
    let header_end = name_end + attribute_bytes as usize;
    if file.len() < header_end {
        return Err(Corrupt::Truncated {
            len: file.len(),
            needed: header_end,
        });
    }
    let stored = u32_at(44);
    let computed = crc32c::crc32c_append(
        crc32c::crc32c(&file[..44]),
        &file[FIXED_HEADER_BYTES..header_end],
    );
    if stored != computed {
        return Err(Corrupt::HeaderChecksum { stored, computed });
    }
    let name = std::str::from_utf8(&file[FIXED_HEADER_BYTES..name_end])
        .map_err(|_| Corrupt::NameNotUtf8)?
        .to_owned();
    let header = Header {
        seq: u64_at(16),
        created_unix_ms: u64_at(24),
        name,
        attributes: decode_attributes(&file[name_end..header_end])?,
        mode,
        attribute_bytes,
        payload_len: u64_at(32),
        payload_crc32c: u32_at(40),
    };
    Ok((header, header_end))
}

/// The write mode bytes 8 and 9 of a header say, or why they cannot be read: a
/// version this code does not read (versions 1 and 2 wrote a `u16`, so a second byte
/// other than zero is a version past 255), or flags it does not know.
fn decode_version_and_flags(version: u8, flags: u8) -> Result<WriteMode, Corrupt> {
    let version = u16::from(version);
    if version < 3 && flags != 0 || !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(Corrupt::UnsupportedVersion(
            version | (u16::from(flags) << 8),
        ));
    }
    match flags {
        0 => Ok(WriteMode::CreateIfAbsent),
        FLAG_OVERWRITE => Ok(WriteMode::Overwrite),
        unknown => Err(Corrupt::UnknownFlags(unknown)),
    }
}

/// Decodes a whole entry file and checks every field, the length and both checksums.
/// Returns the header and the payload.
pub fn decode(file: Bytes) -> Result<(Header, Bytes), Corrupt> {
    let (header, payload_at) = decode_header(&file)?;
    let expected = header.file_bytes();
    if file.len() as u64 != expected {
        return Err(Corrupt::LengthMismatch {
            expected,
            actual: file.len() as u64,
        });
    }
    let payload = file.slice(payload_at..);
    let computed = crc32c::crc32c(&payload);
    if computed != header.payload_crc32c {
        return Err(Corrupt::PayloadChecksum {
            stored: header.payload_crc32c,
            computed,
        });
    }
    Ok((header, payload))
}

#[cfg(test)]
mod tests {
    #[test]
    fn attributes_a_header_cannot_carry_are_refused_by_name() {
        use object_store::{Attribute, Attributes};
        let refused = [
            (
                Attribute::Metadata("owner".into()),
                "sre ☃",
                "metadata \"owner\"",
            ),
            (
                Attribute::ContentDisposition,
                "attachment; filename=\"é.txt\"",
                "ContentDisposition",
            ),
            (Attribute::CacheControl, "no-store\r\nx: y", "CacheControl"),
            (
                Attribute::Metadata("Owner".into()),
                "sre",
                "metadata \"Owner\"",
            ),
            (Attribute::Metadata("a b".into()), "sre", "metadata \"a b\""),
        ];
        for (attribute, value, named) in refused {
            let mut attributes = Attributes::new();
            attributes.insert(attribute, value.into());
            let err = super::encode_attributes(&attributes).unwrap_err();
            assert!(
                matches!(err, super::InvalidAttributes::NotHeaderSafe { .. }),
                "{err}"
            );
            assert!(
                err.to_string().contains(named),
                "{err} does not name {named}"
            );
        }
        let mut fine = Attributes::new();
        fine.insert(Attribute::Metadata("x-run_1".into()), "a\tb ~!".into());
        assert!(super::encode_attributes(&fine).is_ok());
    }

    use super::*;

    #[test]
    fn an_entry_in_pieces_is_the_flat_entry_and_keeps_the_callers_payload() {
        let payload = Bytes::from_static(b"the caller's bytes");
        let pieces = encode_pieces(3, 17, "a/b", WriteMode::Overwrite, &[], payload.clone());
        assert_eq!(
            pieces.body.as_ptr(),
            payload.as_ptr(),
            "the payload was copied"
        );
        assert_eq!(
            pieces.to_bytes(),
            encode(3, 17, "a/b", WriteMode::Overwrite, &[], &payload)
        );
        let (header, body) = decode(pieces.to_bytes()).unwrap();
        assert_eq!((header.seq, header.payload_len), (3, payload.len() as u64));
        assert_eq!(header.mode, WriteMode::Overwrite);
        assert_eq!(body, payload);
    }

    fn attributes() -> Attributes {
        let mut a = Attributes::new();
        a.insert(Attribute::ContentType, "application/json".into());
        a.insert(Attribute::Metadata("team".into()), "sre, on-call".into());
        a.insert(Attribute::CacheControl, "no-cache".into());
        a
    }

    fn sample() -> Bytes {
        let block = encode_attributes(&attributes()).unwrap();
        encode(
            7,
            1_700_000_000_000,
            "dir/obj.bin",
            WriteMode::CreateIfAbsent,
            &block,
            b"hello world",
        )
    }

    #[test]
    fn round_trips_header_attributes_and_payload() {
        let (header, payload) = decode(sample()).unwrap();
        assert_eq!(header.seq, 7);
        assert_eq!(header.created_unix_ms, 1_700_000_000_000);
        assert_eq!(header.name, "dir/obj.bin");
        assert_eq!(header.attributes, attributes());
        assert_eq!(header.mode, WriteMode::CreateIfAbsent);
        assert_eq!(header.payload_len, 11);
        assert_eq!(header.payload_crc32c, crc32c::crc32c(b"hello world"));
        assert_eq!(&payload[..], b"hello world");
        assert_eq!(header.file_bytes(), sample().len() as u64);
    }

    #[test]
    fn the_same_attributes_encode_alike_whatever_their_insertion_order() {
        let mut reversed = Attributes::new();
        let mut items: Vec<_> = attributes()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        items.reverse();
        for (k, v) in items {
            reversed.insert(k, v);
        }
        assert_eq!(
            encode_attributes(&reversed).unwrap(),
            encode_attributes(&attributes()).unwrap()
        );
    }

    #[test]
    fn attributes_over_the_limit_are_refused() {
        let mut a = Attributes::new();
        a.insert(Attribute::Metadata("k".into()), "v".repeat(9000).into());
        assert!(matches!(
            encode_attributes(&a),
            Err(InvalidAttributes::TooLarge { .. })
        ));
    }

    #[test]
    fn every_truncation_is_detected() {
        let file = sample();
        for len in 0..file.len() {
            assert!(
                decode(file.slice(..len)).is_err(),
                "truncated to {len} bytes was accepted"
            );
        }
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let file = sample();
        for byte in 0..file.len() {
            for bit in 0..8 {
                let mut bad = file.to_vec();
                bad[byte] ^= 1 << bit;
                assert!(
                    decode(Bytes::from(bad)).is_err(),
                    "flip at byte {byte} bit {bit}"
                );
            }
        }
    }

    #[test]
    fn trailing_garbage_is_a_length_mismatch() {
        let mut file = sample().to_vec();
        file.push(0);
        assert!(matches!(
            decode(Bytes::from(file)),
            Err(Corrupt::LengthMismatch { .. })
        ));
    }

    #[test]
    fn a_version_1_entry_still_decodes() {
        // Written by the format of 2026-10 (no attributes, version 1): bytes 12..16
        // were reserved and zero.
        let file = include_bytes!("../tests/fixtures/v1-entry.bin");
        let (header, payload) = decode(Bytes::from_static(file)).unwrap();
        assert_eq!(
            (header.seq, header.name.as_str()),
            (1, "logs/2026-10-08/a.json")
        );
        assert!(header.attributes.is_empty());
        assert_eq!(header.mode, WriteMode::CreateIfAbsent);
        assert_eq!(&payload[..], b"{\"outage\":true}");
    }

    /// A header whose bytes 8 and 9 are `version` and `flags`, checksummed.
    fn with_version_and_flags(version: u8, flags: u8) -> Bytes {
        let mut file = sample().to_vec();
        (file[8], file[9]) = (version, flags);
        let name_end = FIXED_HEADER_BYTES + "dir/obj.bin".len();
        let header_end = name_end + encode_attributes(&attributes()).unwrap().len();
        let crc = crc32c::crc32c_append(
            crc32c::crc32c(&file[..44]),
            &file[FIXED_HEADER_BYTES..header_end],
        );
        file[44..48].copy_from_slice(&crc.to_le_bytes());
        Bytes::from(file)
    }

    #[test]
    fn versions_and_flags_are_read_as_written_and_unknown_ones_refused() {
        let mode =
            |version, flags| decode(with_version_and_flags(version, flags)).map(|e| e.0.mode);
        assert_eq!(mode(2, 0), Ok(WriteMode::CreateIfAbsent));
        assert_eq!(mode(3, 0), Ok(WriteMode::CreateIfAbsent));
        assert_eq!(mode(3, 1), Ok(WriteMode::Overwrite));
        // Version 2 wrote a u16: a second byte is a version past 255.
        assert_eq!(mode(2, 1), Err(Corrupt::UnsupportedVersion(0x0102)));
        assert_eq!(mode(4, 0), Err(Corrupt::UnsupportedVersion(4)));
        assert_eq!(mode(3, 2), Err(Corrupt::UnknownFlags(2)));
    }

    #[test]
    fn crc32c_matches_the_cloud_storage_reference_value() {
        // gcs-wire reference: crc32c("hello") is base64 "mnG7TA==" = 0x9a71bb4c.
        assert_eq!(crc32c::crc32c(b"hello"), 0x9a71_bb4c);
    }
}
