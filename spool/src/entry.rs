//! The on-disk entry format: one file per pending object.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "SPOOLENT"
//!      8     2  format version (1), little-endian like every integer below
//!     10     2  object name length in bytes (at most 1024)
//!     12     4  reserved, zero
//!     16     8  sequence number (the entry's place in the drain order)
//!     24     8  creation time, milliseconds since the Unix epoch (for ages)
//!     32     8  payload length in bytes
//!     40     4  crc32c of the payload
//!     44     4  crc32c of bytes 0..44 followed by the name
//!     48     n  object name, UTF-8
//!   48+n     m  payload
//! ```
//!
//! The header checksum covers the name, so a torn or bit-flipped header is never
//! mistaken for a valid one; the payload has its own checksum so a reader can check
//! the header without hashing the whole object. A file that fails any check is
//! [`Corrupt`] and is quarantined by the spool, never uploaded.

use bytes::{BufMut, Bytes, BytesMut};

/// The first eight bytes of every entry file.
pub const MAGIC: [u8; 8] = *b"SPOOLENT";
/// The format version this code writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Size of the fixed part of the header, before the object name.
pub const FIXED_HEADER_BYTES: usize = 48;

/// Everything an entry records about its object, except the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Position in the drain order; unique within a spool directory.
    pub seq: u64,
    /// When the entry was written, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// The object name the payload is to be written under.
    pub name: String,
    /// Payload length in bytes.
    pub payload_len: u64,
    /// crc32c of the payload.
    pub payload_crc32c: u32,
}

impl Header {
    /// Size of the whole entry file this header describes.
    pub fn file_bytes(&self) -> u64 {
        file_bytes(self.name.len(), self.payload_len)
    }
}

/// Size of an entry file for a name of `name_len` bytes and a payload of
/// `payload_len` bytes. This is what counts against a spool's `max_bytes`.
pub fn file_bytes(name_len: usize, payload_len: u64) -> u64 {
    (FIXED_HEADER_BYTES + name_len) as u64 + payload_len
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

/// Encodes a complete entry file.
pub fn encode(seq: u64, created_unix_ms: u64, name: &str, payload: &[u8]) -> Bytes {
    let name_len = u16::try_from(name.len()).expect("object names are checked to be <= 1024 bytes");
    let mut buf = BytesMut::with_capacity(file_bytes(name.len(), payload.len() as u64) as usize);
    buf.put_slice(&MAGIC);
    buf.put_u16_le(FORMAT_VERSION);
    buf.put_u16_le(name_len);
    buf.put_u32_le(0);
    buf.put_u64_le(seq);
    buf.put_u64_le(created_unix_ms);
    buf.put_u64_le(payload.len() as u64);
    buf.put_u32_le(crc32c::crc32c(payload));
    let header_crc = crc32c::crc32c_append(crc32c::crc32c(&buf[..44]), name.as_bytes());
    buf.put_u32_le(header_crc);
    buf.put_slice(name.as_bytes());
    buf.put_slice(payload);
    buf.freeze()
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
    let version = u16_at(8);
    if version != FORMAT_VERSION {
        return Err(Corrupt::UnsupportedVersion(version));
    }
    let name_end = FIXED_HEADER_BYTES + usize::from(u16_at(10));
    if file.len() < name_end {
        return Err(Corrupt::Truncated {
            len: file.len(),
            needed: name_end,
        });
    }
    let stored = u32_at(44);
    let computed = crc32c::crc32c_append(
        crc32c::crc32c(&file[..44]),
        &file[FIXED_HEADER_BYTES..name_end],
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
        payload_len: u64_at(32),
        payload_crc32c: u32_at(40),
    };
    Ok((header, name_end))
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
    use super::*;

    fn sample() -> Bytes {
        encode(7, 1_700_000_000_000, "dir/obj.bin", b"hello world")
    }

    #[test]
    fn round_trips_header_and_payload() {
        let (header, payload) = decode(sample()).unwrap();
        assert_eq!(
            header,
            Header {
                seq: 7,
                created_unix_ms: 1_700_000_000_000,
                name: "dir/obj.bin".into(),
                payload_len: 11,
                payload_crc32c: crc32c::crc32c(b"hello world"),
            }
        );
        assert_eq!(&payload[..], b"hello world");
        assert_eq!(header.file_bytes(), sample().len() as u64);
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
                // A flip in the reserved word is the one change the checksum still
                // catches through the header crc; nothing may decode as valid.
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
    fn crc32c_matches_the_cloud_storage_reference_value() {
        // gcs-wire reference: crc32c("hello") is base64 "mnG7TA==" = 0x9a71bb4c.
        assert_eq!(crc32c::crc32c(b"hello"), 0x9a71_bb4c);
    }
}
