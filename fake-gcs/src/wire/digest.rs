//! Digests in the forms Cloud Storage's APIs use (base64 big-endian crc32c, base64
//! and hex MD5), and the digests a client declares with an upload, checked against
//! what arrived.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use http::HeaderMap;
use md5::{Digest, Md5};
use serde_json::Value;

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

/// [`Digests`] of bytes that arrive in pieces (a streamed body), with their count.
#[derive(Debug, Clone, Default)]
pub struct Hashing {
    crc32c: u32,
    md5: Md5,
    len: u64,
}

impl Hashing {
    /// Adds the next piece.
    pub fn update(&mut self, piece: &[u8]) {
        self.crc32c = crc32c::crc32c_append(self.crc32c, piece);
        self.md5.update(piece);
        self.len += piece.len() as u64;
    }

    /// Bytes seen so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no byte has been seen.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The digests of every piece, in order.
    pub fn finish(self) -> Digests {
        Digests {
            crc32c: self.crc32c,
            md5: self.md5.finalize().into(),
        }
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

/// Digests a client declared: `x-goog-hash: crc32c=<b64>,md5=<b64>`, the JSON
/// metadata's `crc32c`/`md5Hash`, or `Content-MD5`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// Declared crc32c, base64 as sent.
    pub crc32c: Option<String>,
    /// Declared MD5, base64 as sent.
    pub md5: Option<String>,
}

/// A declared digest that differs from the one computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// `CRC32C` or `MD5`.
    pub algorithm: &'static str,
    /// What the client declared (base64).
    pub declared: String,
    /// What the bytes have (base64).
    pub computed: String,
}

impl Declared {
    /// The digests of every `x-goog-hash` header.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut declared = Declared::default();
        for value in headers.get_all("x-goog-hash") {
            if let Ok(value) = value.to_str() {
                declared.parse_goog_hash(value);
            }
        }
        declared
    }

    /// The digests of a JSON object resource given with an upload (`crc32c`,
    /// `md5Hash`).
    pub fn from_metadata(metadata: &Value) -> Self {
        let field = |k: &str| metadata.get(k).and_then(Value::as_str).map(str::to_string);
        Declared {
            crc32c: field("crc32c"),
            md5: field("md5Hash"),
        }
    }

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

    /// Each digest as declared here, else as declared in `fallback`.
    pub fn or(self, fallback: Declared) -> Declared {
        Declared {
            crc32c: self.crc32c.or(fallback.crc32c),
            md5: self.md5.or(fallback.md5),
        }
    }

    /// The first declared digest that differs from `actual`.
    pub fn mismatch(&self, actual: &Digests) -> Option<Mismatch> {
        let differs = |algorithm, declared: &String, computed: String| {
            (*declared != computed).then(|| Mismatch {
                algorithm,
                declared: declared.clone(),
                computed,
            })
        };
        let crc32c = self.crc32c.as_ref();
        let md5 = self.md5.as_ref();
        crc32c
            .and_then(|d| differs("CRC32C", d, crc32c_base64(actual.crc32c)))
            .or_else(|| md5.and_then(|d| differs("MD5", d, md5_base64(&actual.md5))))
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
    fn declared_hashes_are_compared_per_algorithm() {
        let d = Digests::of(b"hello");
        let mut ok = Declared::default();
        ok.parse_goog_hash("crc32c=mnG7TA==, md5=XUFAKrxLKna5cZ2REBfFkg==");
        assert_eq!(ok.mismatch(&d), None);
        let mut bad = Declared::default();
        bad.parse_goog_hash("crc32c=AAAAAA==");
        assert_eq!(
            bad.mismatch(&d),
            Some(Mismatch {
                algorithm: "CRC32C",
                declared: "AAAAAA==".into(),
                computed: "mnG7TA==".into()
            })
        );
        let md5_only = Declared {
            md5: Some("AAAA".into()),
            ..Declared::default()
        };
        assert_eq!(md5_only.mismatch(&d).unwrap().algorithm, "MD5");
    }

    #[test]
    fn digests_declared_in_one_place_fill_in_for_another() {
        let metadata = serde_json::json!({ "crc32c": "mnG7TA==" });
        let headers = Declared {
            crc32c: Some("other".into()),
            md5: Some("XUFAKrxLKna5cZ2REBfFkg==".into()),
        };
        let merged = Declared::from_metadata(&metadata).or(headers);
        assert_eq!(merged.crc32c.as_deref(), Some("mnG7TA=="));
        assert_eq!(merged.md5.as_deref(), Some("XUFAKrxLKna5cZ2REBfFkg=="));
    }

    #[test]
    fn digests_in_pieces_are_the_digests_of_the_whole() {
        let whole: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut hashing = Hashing::default();
        for piece in whole.chunks(777) {
            hashing.update(piece);
        }
        assert_eq!(hashing.len(), 10_000);
        assert_eq!(hashing.finish(), Digests::of(&whole));
    }
}
