//! An object as the APIs describe it: [`ObjectRecord`] (what is kept per object),
//! the JSON API's object resource, the XML API's response headers, ETags and
//! `x-goog-hash`, and the answer to a successful upload.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::wire::digest::{self, Digests};
use crate::wire::encoding::{encode_component, http_date, rfc3339_millis};
use crate::wire::reply::Reply;
use crate::wire::route::Api;

/// What is known about one stored object: enough for every resource and header
/// Cloud Storage gives for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    /// The object name.
    pub name: String,
    /// Its generation (microseconds of wall time at creation, strictly increasing).
    pub generation: i64,
    /// Length in bytes.
    pub size: u64,
    /// CRC32C of the bytes.
    pub crc32c: u32,
    /// MD5 of the bytes.
    pub md5: [u8; 16],
    /// Wall time of creation, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// The content type given at upload.
    pub content_type: Cow<'static, str>,
}

impl ObjectRecord {
    /// crc32c as the JSON API shows it (base64 of the big-endian u32).
    pub fn crc32c_base64(&self) -> String {
        digest::crc32c_base64(self.crc32c)
    }

    /// MD5 as the JSON API shows it (base64).
    pub fn md5_base64(&self) -> String {
        digest::md5_base64(&self.md5)
    }

    /// MD5 as lowercase hex (the XML API's ETag, without quotes).
    pub fn md5_hex(&self) -> String {
        digest::md5_hex(&self.md5)
    }

    /// Whether `bytes` are this object's contents (size, crc32c and MD5 agree).
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let d = Digests::of(bytes);
        self.size == bytes.len() as u64 && self.crc32c == d.crc32c && self.md5 == d.md5
    }

    /// `x-goog-hash`: `crc32c=...,md5=...`.
    pub fn goog_hash(&self) -> String {
        format!("crc32c={},md5={}", self.crc32c_base64(), self.md5_base64())
    }

    /// The JSON API's opaque ETag: base64 of the generation and metageneration.
    pub fn json_etag(&self) -> String {
        B64.encode(format!("{}/1", self.generation))
    }

    /// The XML API's ETag: the quoted lowercase hex MD5, as Cloud Storage gives for
    /// non-composite objects.
    pub fn xml_etag(&self) -> String {
        format!("\"{}\"", self.md5_hex())
    }

    /// The ETag of `api`.
    pub fn etag(&self, api: Api) -> String {
        match api {
            Api::Json => self.json_etag(),
            Api::Xml => self.xml_etag(),
        }
    }

    /// The JSON API's object resource, with links under `base` (`http://host:port`).
    pub fn json_resource(&self, base: &str, bucket: &str) -> Value {
        let (b, o) = (encode_component(bucket), encode_component(&self.name));
        let time = rfc3339_millis(self.created_unix_ms);
        json!({
            "kind": "storage#object",
            "id": format!("{bucket}/{}/{}", self.name, self.generation),
            "selfLink": format!("{base}/storage/v1/b/{b}/o/{o}"),
            "mediaLink": format!(
                "{base}/download/storage/v1/b/{b}/o/{o}?generation={}&alt=media",
                self.generation
            ),
            "name": self.name,
            "bucket": bucket,
            "generation": self.generation.to_string(),
            "metageneration": "1",
            "contentType": self.content_type,
            "storageClass": "STANDARD",
            "size": self.size.to_string(),
            "md5Hash": self.md5_base64(),
            "crc32c": self.crc32c_base64(),
            "etag": self.json_etag(),
            "timeCreated": time,
            "updated": time,
            "timeStorageClassUpdated": time,
        })
    }
}

impl Reply {
    /// Adds the headers that describe `record` on an XML `PUT` and on a download:
    /// `etag` (already in the request's API's form), `Last-Modified`, generation,
    /// metageneration, `x-goog-hash` and the stored length and encoding.
    pub fn object_headers(self, record: &ObjectRecord, etag: String) -> Reply {
        self.header("etag", etag)
            .header("last-modified", http_date(record.created_unix_ms))
            .header("x-goog-generation", record.generation.to_string())
            .header("x-goog-metageneration", "1")
            .header("x-goog-hash", record.goog_hash())
            .header("x-goog-stored-content-length", record.size.to_string())
            .header("x-goog-stored-content-encoding", "identity")
    }
}

/// The answer to an upload that stored `record` in `bucket`: the object resource
/// (JSON API) or its headers (XML API).
pub fn uploaded(api: Api, base: &str, bucket: &str, record: &ObjectRecord) -> Reply {
    match api {
        Api::Json => Reply::json(200, &record.json_resource(base, bucket)),
        Api::Xml => Reply::new(200).object_headers(record, record.xml_etag()),
    }
}

/// `If-Match`/`If-None-Match` against an ETag: `*` or any listed tag.
pub fn etag_matches(condition: &str, etag: &str) -> bool {
    let bare = etag.trim_matches('"');
    condition
        .split(',')
        .map(|c| c.trim().trim_start_matches("W/").trim_matches('"'))
        .any(|c| c == "*" || c == bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> ObjectRecord {
        let d = Digests::of(b"hello");
        ObjectRecord {
            name: "a b".into(),
            generation: 7,
            size: 5,
            crc32c: d.crc32c,
            md5: d.md5,
            created_unix_ms: 1_791_457_200_000,
            content_type: Cow::Borrowed("text/plain"),
        }
    }

    #[test]
    fn etag_conditions_accept_lists_and_stars() {
        assert!(etag_matches("\"abc\"", "\"abc\""));
        assert!(etag_matches("\"x\", \"abc\"", "\"abc\""));
        assert!(etag_matches("*", "\"abc\""));
        assert!(!etag_matches("\"x\"", "\"abc\""));
    }

    #[test]
    fn an_object_is_described_as_each_api_does() {
        let r = hello();
        assert!(r.matches(b"hello") && !r.matches(b"hellO"));
        assert_eq!(r.xml_etag(), "\"5d41402abc4b2a76b9719d911017c592\"");
        assert_eq!(
            r.goog_hash(),
            "crc32c=mnG7TA==,md5=XUFAKrxLKna5cZ2REBfFkg=="
        );
        let resource = r.json_resource("http://h", "bkt");
        assert_eq!(resource["selfLink"], "http://h/storage/v1/b/bkt/o/a%20b");
        assert_eq!(resource["generation"], "7");
        assert_eq!(resource["timeCreated"], "2026-10-08T11:00:00.000Z");
        let put = uploaded(Api::Xml, "http://h", "bkt", &r);
        assert_eq!(put.headers[0], ("etag", r.xml_etag()));
        assert_eq!(put.headers[1].1, "Thu, 08 Oct 2026 11:00:00 GMT");
    }
}
