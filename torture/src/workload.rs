//! What the `object_store` writer uploads, by the same rules as the Node and Python
//! writers (clients/torture/writer.js, writer.py): unique names
//! `torture/<writer>/<seq>/<hard path>` from the bench's alphabet of hard
//! characters, sizes log-uniform from 1 byte to `max_bytes` (5% empty), a content
//! type, sometimes a cache control, and custom metadata.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use md5::{Digest as _, Md5};
use rand::{Rng, RngCore as _, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Characters hard names are drawn from (besides `/`): sim/src/workload.rs's.
pub const HARD_CHARS: &[&str] = &[
    "a", "Z", "0", "9", " ", "%", "%2F", "%25", "#", "?", "*", "[", "]", "{", "}", "^", "|", "<",
    ">", "\"", "~", "`", "\\", "+", "&", "=", ";", ":", "@", "$", ",", "'", "!", "(", ")", "-",
    "_", ".", "é", "ü", "ß", "Ω", "☃", "中", "文", "𝄞", "\u{a0}",
];
const CONTENT_TYPES: &[&str] = &[
    "application/octet-stream",
    "text/plain; charset=utf-8",
    "application/json",
    "image/png",
    "application/x-torture",
];
const CACHE_CONTROLS: &[&str] = &["no-store", "public, max-age=60", "private, max-age=0"];
const NOTE_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,_-=+:";

/// One upload to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub name: String,
    pub data: Bytes,
    pub content_type: String,
    pub cache_control: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

fn pick<'a>(rng: &mut ChaCha8Rng, list: &[&'a str]) -> &'a str {
    list[rng.random_range(0..list.len())]
}

/// Log-uniform in `[lo, hi]`.
pub fn log_uniform(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> u64 {
    let (l, h) = ((lo as f64).ln(), ((hi + 1) as f64).ln());
    let x = (l + rng.random::<f64>() * (h - l)).exp() as u64;
    x.clamp(lo, hi)
}

/// Segments of hard characters joined by `/`: none empty, none `.` or `..`.
pub fn hard_path(rng: &mut ChaCha8Rng) -> String {
    let count = log_uniform(rng, 1, 60);
    let mut out = String::new();
    let mut segment = String::new();
    for i in 0..count {
        segment.push_str(pick(rng, HARD_CHARS));
        if i + 1 < count && segment != "." && segment != ".." && rng.random_bool(0.1) {
            out.push_str(&segment);
            out.push('/');
            segment.clear();
        }
    }
    if segment == "." || segment == ".." {
        segment.push('a');
    }
    out + &segment
}

/// Upload `seq` of `writer`, drawn from `rng`.
pub fn upload(rng: &mut ChaCha8Rng, writer: &str, seq: u64, max_bytes: u64) -> Upload {
    let size = if rng.random_bool(0.05) {
        0
    } else {
        log_uniform(rng, 1, max_bytes.max(1))
    };
    let name = format!("torture/{writer}/{seq:06}/{}", hard_path(rng));
    let mut data = vec![0; size as usize];
    ChaCha8Rng::seed_from_u64(rng.random()).fill_bytes(&mut data);
    let content_type = pick(rng, CONTENT_TYPES).to_string();
    let cache_control = rng
        .random_bool(0.5)
        .then(|| pick(rng, CACHE_CONTROLS).to_string());
    let length = rng.random_range(0..30);
    let mut note = String::from("n");
    for _ in 0..length {
        note.push(NOTE_CHARS[rng.random_range(0..NOTE_CHARS.len())] as char);
    }
    note.push('z');
    let metadata = BTreeMap::from([
        ("writer".to_string(), writer.to_string()),
        ("seq".to_string(), seq.to_string()),
        ("note".to_string(), note),
    ]);
    Upload {
        name,
        data: Bytes::from(data),
        content_type,
        cache_control,
        metadata,
    }
}

/// MD5 and crc32c of `data`, base64 as Cloud Storage gives them.
pub fn digests(data: &[u8]) -> (String, String) {
    let md5 = STANDARD.encode(Md5::digest(data));
    let crc = STANDARD.encode(crc32c::crc32c(data).to_be_bytes());
    (md5, crc)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn names_are_unique_hard_and_writable_by_every_entry_point() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut names = BTreeSet::new();
        let mut hard = 0;
        for seq in 0..2_000 {
            let upload = upload(&mut rng, "object-store-0", seq, 1 << 10);
            spool::name::check_writable(&upload.name)
                .unwrap_or_else(|e| panic!("{:?}: {e}", upload.name));
            hard += usize::from(!upload.name.is_ascii());
            assert!(names.insert(upload.name));
        }
        assert!(hard > 200, "{hard} names with non-ASCII characters");
    }

    #[test]
    fn sizes_span_empty_to_the_largest() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let sizes: Vec<u64> = (0..2_000)
            .map(|seq| upload(&mut rng, "w", seq, 1 << 20).data.len() as u64)
            .collect();
        assert!(sizes.contains(&0));
        assert!(sizes.iter().any(|&s| (1..16).contains(&s)));
        assert!(sizes.iter().any(|&s| s > 512 << 10));
        assert!(sizes.iter().all(|&s| s <= 1 << 20));
    }

    #[test]
    fn digests_are_cloud_storages() {
        // The MD5 and crc32c Cloud Storage gives for "hello".
        let (md5, crc) = digests(b"hello");
        assert_eq!(md5, "XUFAKrxLKna5cZ2REBfFkg==");
        assert_eq!(crc, "mnG7TA==");
    }
}
