//! An object as the APIs describe it: [`ObjectRecord`] (what is kept per object),
//! the JSON API's object resource, the XML API's response headers, ETags and
//! `x-goog-hash`, and the answer to a successful upload.
//!
//! Composite objects (made by compose) are described as Cloud Storage describes
//! them: no MD5 anywhere (no `md5Hash`, `x-goog-hash` with `crc32c` only), a
//! `componentCount`, and an XML ETag that is not an MD5 (see
//! [`ObjectRecord::xml_etag`]).

use std::borrow::Cow;
use std::num::NonZeroU32;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::wire::attributes::{NO_ATTRIBUTES, ObjectAttributes};
use crate::wire::digest::{self, Digests};
use crate::wire::encoding::{encode_component, http_date, rfc3339_millis};
use crate::wire::reply::Reply;
use crate::wire::route::Api;

/// What the JSON API's metadata calls (patch, update, ACL changes, a rewrite to
/// another storage class) changed on an object after it was written: an object
/// that was never changed has none, and is shown with metageneration 1.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The metageneration: 1 when written, one more with each change.
    pub metageneration: i64,
    /// Wall time of the last change, milliseconds since the Unix epoch.
    pub updated_unix_ms: u64,
    /// The storage class, when not `STANDARD`.
    pub storage_class: Option<String>,
    /// Other fields of the resource set by a patch or update (`temporaryHold`,
    /// `eventBasedHold`, `customTime`, ...), shown as given.
    pub extra: serde_json::Map<String, Value>,
}

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
    /// MD5 of the bytes. The fake knows it for every object, but shows it only for
    /// objects that are not composite, as Cloud Storage does.
    pub md5: [u8; 16],
    /// Wall time of creation, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// The content type given at upload.
    pub content_type: Cow<'static, str>,
    /// The other attributes given at upload; `None` when none was (see
    /// [`attributes`](Self::attributes) for a reference either way).
    pub attributes: Option<Box<ObjectAttributes>>,
    /// For a composite object (made by compose): how many non-composite objects
    /// it is made of. `None` for every other object.
    pub component_count: Option<NonZeroU32>,
}

impl ObjectRecord {
    /// The attributes beside the content type (all unset when there are none).
    pub fn attributes(&self) -> &ObjectAttributes {
        self.attributes.as_deref().unwrap_or(&NO_ATTRIBUTES)
    }

    /// Whether the object is composite: its ETag is not an MD5 and no MD5 is shown.
    pub fn is_composite(&self) -> bool {
        self.component_count.is_some()
    }

    /// crc32c as the JSON API shows it (base64 of the big-endian u32).
    pub fn crc32c_base64(&self) -> String {
        digest::crc32c_base64(self.crc32c)
    }

    /// MD5 as the JSON API shows it (base64).
    pub fn md5_base64(&self) -> String {
        digest::md5_base64(&self.md5)
    }

    /// MD5 as lowercase hex (the XML API's ETag of a non-composite object, without
    /// quotes).
    pub fn md5_hex(&self) -> String {
        digest::md5_hex(&self.md5)
    }

    /// Whether `bytes` are this object's contents (size, crc32c and MD5 agree).
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let d = Digests::of(bytes);
        self.size == bytes.len() as u64 && self.crc32c == d.crc32c && self.md5 == d.md5
    }

    /// `x-goog-hash`: `crc32c=...,md5=...`, or `crc32c=...` alone for a composite
    /// object.
    pub fn goog_hash(&self) -> String {
        match self.is_composite() {
            true => format!("crc32c={}", self.crc32c_base64()),
            false => format!("crc32c={},md5={}", self.crc32c_base64(), self.md5_base64()),
        }
    }

    /// The JSON API's opaque ETag, as Cloud Storage forms it: base64 of a protocol
    /// buffer holding the generation (field 1) and metageneration (field 2), e.g.
    /// `CKicn7fM/eECEAE=`.
    pub fn json_etag(&self) -> String {
        json_etag(self.generation, 1)
    }

    /// The XML API's ETag, quoted. For a non-composite object, the lowercase hex
    /// MD5, as Cloud Storage gives it. For a composite object, `-` and the JSON
    /// ETag (`"-CKicn7fM/eECEAE="`), the form Cloud Storage gives composite
    /// objects: it changes with the generation and is never 32 hex digits.
    pub fn xml_etag(&self) -> String {
        match self.is_composite() {
            true => format!("\"-{}\"", self.json_etag()),
            false => format!("\"{}\"", self.md5_hex()),
        }
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
        self.json_resource_with(base, bucket, None)
    }

    /// The JSON API's object resource, with what metadata calls changed (`meta`):
    /// its metageneration (and so its `etag`), `updated`, storage class and other
    /// fields.
    pub fn json_resource_with(&self, base: &str, bucket: &str, meta: Option<&ObjectMeta>) -> Value {
        let mut resource = self.base_resource(base, bucket);
        if let (Some(meta), Value::Object(fields)) = (meta, &mut resource) {
            let metageneration = meta.metageneration;
            fields.insert("metageneration".into(), json!(metageneration.to_string()));
            fields.insert(
                "etag".into(),
                json!(json_etag(self.generation, metageneration)),
            );
            fields.insert(
                "updated".into(),
                json!(rfc3339_millis(meta.updated_unix_ms)),
            );
            if let Some(class) = &meta.storage_class {
                fields.insert("storageClass".into(), json!(class));
            }
            for (key, value) in &meta.extra {
                fields.insert(key.clone(), value.clone());
            }
        }
        resource
    }

    fn base_resource(&self, base: &str, bucket: &str) -> Value {
        let (b, o) = (encode_component(bucket), encode_component(&self.name));
        let time = rfc3339_millis(self.created_unix_ms);
        let mut resource = json!({
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
            "storageClass": "STANDARD",
            "size": self.size.to_string(),
            "crc32c": self.crc32c_base64(),
            "etag": self.json_etag(),
            "timeCreated": time,
            "updated": time,
            "timeStorageClassUpdated": time,
        });
        let Value::Object(fields) = &mut resource else {
            unreachable!("a JSON object literal");
        };
        // An object composed without a content type has none, as in Cloud Storage.
        if !self.content_type.is_empty() {
            fields.insert("contentType".into(), json!(self.content_type));
        }
        match self.component_count {
            Some(count) => fields.insert("componentCount".into(), json!(count.get())),
            None => fields.insert("md5Hash".into(), json!(self.md5_base64())),
        };
        self.attributes().add_to_resource(fields);
        resource
    }
}

/// The JSON API's opaque ETag of an object: base64 of a protocol buffer holding
/// the generation (field 1) and metageneration (field 2).
pub fn json_etag(generation: i64, metageneration: i64) -> String {
    let mut message = vec![0x08];
    push_varint(&mut message, generation as u64);
    message.push(0x10);
    push_varint(&mut message, metageneration as u64);
    B64.encode(message)
}

/// Appends `value` as a protocol buffer varint.
fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

impl Reply {
    /// Adds the headers that describe `record` on an XML `PUT` and on a download:
    /// `etag` (already in the request's API's form), `Last-Modified`, generation,
    /// metageneration, `x-goog-hash`, the stored length and encoding, and for a
    /// composite object `x-goog-component-count`.
    pub fn object_headers(self, record: &ObjectRecord, etag: String) -> Reply {
        let encoding = record.attributes().content_encoding.as_deref();
        let reply = self
            .header("etag", etag)
            .header("last-modified", http_date(record.created_unix_ms))
            .header("x-goog-generation", record.generation.to_string())
            .header("x-goog-metageneration", "1")
            .header("x-goog-hash", record.goog_hash())
            .header("x-goog-stored-content-length", record.size.to_string())
            .header(
                "x-goog-stored-content-encoding",
                encoding.unwrap_or("identity"),
            );
        match record.component_count {
            Some(count) => reply.header("x-goog-component-count", count.to_string()),
            None => reply,
        }
    }

    /// Adds the headers a download or `HEAD` carries for the object's attributes:
    /// `Content-Type`, and those of its [`ObjectAttributes`] that are set
    /// (`Content-Encoding`, `Cache-Control`, `Content-Disposition`,
    /// `Content-Language`, `x-goog-meta-*`), which `object_store` reads back as
    /// its `Attributes`.
    pub fn attribute_headers(self, record: &ObjectRecord) -> Reply {
        let content_type = match record.content_type.as_ref() {
            "" => crate::wire::DEFAULT_CONTENT_TYPE,
            given => given,
        };
        let mut reply = self.header("content-type", content_type.to_string());
        reply.headers.extend(record.attributes().headers());
        reply
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
            attributes: None,
            component_count: None,
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
        assert_eq!(put.headers[0], ("etag".into(), r.xml_etag()));
        assert_eq!(put.headers[1].1, "Thu, 08 Oct 2026 11:00:00 GMT");
    }

    #[test]
    fn etags_take_cloud_storages_forms() {
        // A generation Cloud Storage answered with `CKicn7fM/eECEAE=`.
        let r = ObjectRecord {
            generation: 1_556_825_902_665_256,
            ..hello()
        };
        assert_eq!(r.json_etag(), "CKicn7fM/eECEAE=");
        let composite = ObjectRecord {
            component_count: NonZeroU32::new(2),
            ..r
        };
        assert_eq!(composite.xml_etag(), "\"-CKicn7fM/eECEAE=\"");
    }

    #[test]
    fn a_changed_object_shows_its_metageneration_and_fields() {
        let r = hello();
        let meta = ObjectMeta {
            metageneration: 3,
            updated_unix_ms: 1_791_457_260_000,
            storage_class: Some("NEARLINE".into()),
            extra: [("temporaryHold".to_string(), json!(true))]
                .into_iter()
                .collect(),
        };
        let resource = r.json_resource_with("http://h", "bkt", Some(&meta));
        assert_eq!(resource["metageneration"], "3");
        assert_eq!(resource["etag"], json_etag(7, 3));
        assert_ne!(resource["etag"], r.json_etag());
        assert_eq!(resource["storageClass"], "NEARLINE");
        assert_eq!(resource["temporaryHold"], true);
        assert_eq!(resource["updated"], "2026-10-08T11:01:00.000Z");
        assert_eq!(
            r.json_resource_with("http://h", "bkt", None),
            r.json_resource("http://h", "bkt")
        );
    }

    #[test]
    fn a_composite_object_shows_no_md5() {
        let r = ObjectRecord {
            component_count: NonZeroU32::new(3),
            attributes: ObjectAttributes {
                cache_control: Some("no-cache".into()),
                ..Default::default()
            }
            .boxed(),
            ..hello()
        };
        let etag = r.xml_etag();
        let bare = etag.trim_matches('"');
        assert!(bare.len() != 32 || !bare.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(r.goog_hash(), "crc32c=mnG7TA==");
        let resource = r.json_resource("http://h", "bkt");
        assert_eq!(resource.get("md5Hash"), None);
        assert_eq!(resource["componentCount"], 3);
        assert_eq!(resource["cacheControl"], "no-cache");
        let get = Reply::new(200)
            .object_headers(&r, etag)
            .attribute_headers(&r);
        let header = |name: &str| {
            get.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("x-goog-component-count"), Some("3"));
        assert_eq!(header("cache-control"), Some("no-cache"));
        assert_eq!(header("content-type"), Some("text/plain"));
        assert_eq!(header("x-goog-hash"), Some("crc32c=mnG7TA=="));
    }
}
