//! An upload, whichever way it came (JSON media, multipart or resumable; XML `PUT`),
//! parsed into one [`Upload`]: where it goes, its bytes, content type, custom
//! metadata, the digests the client declared and its preconditions. A server checks
//! [`Upload::digests`] before accepting the bytes, then stores them its own way.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::Value;

use crate::wire::digest::{Declared, Digests};
use crate::wire::error::Rejection;
use crate::wire::multipart::{multipart_boundary, split_multipart};
use crate::wire::precondition::Preconditions;
use crate::wire::route::{Api, Query, header};

/// Cloud Storage's content type for an upload that names none.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// The content type to record for an upload: the default is shared rather than
/// allocated per object (the long replays keep millions of records).
pub fn content_type(given: Option<&str>) -> Cow<'static, str> {
    match given {
        None | Some(DEFAULT_CONTENT_TYPE) => Cow::Borrowed(DEFAULT_CONTENT_TYPE),
        Some(other) => Cow::Owned(other.to_string()),
    }
}

/// One object upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The API it came by (and answers in).
    pub api: Api,
    /// The bucket.
    pub bucket: String,
    /// The object name, never empty.
    pub name: String,
    /// The object's bytes (empty for the request that starts a resumable upload:
    /// they follow in the session's requests).
    pub data: Bytes,
    /// The content type given, or [`DEFAULT_CONTENT_TYPE`].
    pub content_type: Cow<'static, str>,
    /// Custom metadata: the JSON resource's `metadata` object (string values), or
    /// the XML API's `x-goog-meta-*` headers.
    pub metadata: BTreeMap<String, String>,
    /// Digests the client declared.
    pub declared: Declared,
    /// Conditions on the object's current generation.
    pub preconditions: Preconditions,
}

const NAME_MISSING: &str = "Required: the object name is missing.";

impl Upload {
    /// `uploadType=media`: the body is the object, the name is in the query, digests
    /// in `x-goog-hash`.
    pub fn media(
        bucket: &str,
        query: &Query,
        headers: &HeaderMap,
        data: Bytes,
    ) -> Result<Upload, Rejection> {
        let preconditions = Preconditions::parse(query, headers)?;
        Upload {
            api: Api::Json,
            bucket: bucket.to_string(),
            name: query.get("name").unwrap_or("").to_string(),
            data,
            content_type: content_type(header(headers, "content-type")),
            metadata: BTreeMap::new(),
            declared: Declared::from_headers(headers),
            preconditions,
        }
        .named()
    }

    /// `uploadType=multipart`: a `multipart/related` body of two parts, the JSON
    /// resource then the bytes. The query's `name` wins over the resource's; digests
    /// in the resource win over `x-goog-hash`.
    pub fn multipart(
        bucket: &str,
        query: &Query,
        headers: &HeaderMap,
        data: Bytes,
    ) -> Result<Upload, Rejection> {
        let preconditions = Preconditions::parse(query, headers)?;
        let Some(boundary) = header(headers, "content-type").and_then(multipart_boundary) else {
            return Err(Rejection::invalid(
                "uploadType=multipart needs Content-Type: multipart/related; boundary=...",
            ));
        };
        let parts = match split_multipart(&data, &boundary) {
            Ok(parts) if parts.len() == 2 => parts,
            Ok(parts) => {
                return Err(Rejection::invalid(format!(
                    "multipart upload has {} parts; expected 2",
                    parts.len()
                )));
            }
            Err(e) => return Err(Rejection::invalid(format!("malformed multipart body: {e}"))),
        };
        let Ok(metadata @ Value::Object(_)) = serde_json::from_slice::<Value>(&parts[0].body)
        else {
            return Err(Rejection::invalid(
                "the first multipart part must be a JSON object",
            ));
        };
        let media_type = parts[1].header("content-type");
        Upload {
            api: Api::Json,
            bucket: bucket.to_string(),
            name: name(query, &metadata),
            data: parts[1].body.clone(),
            content_type: content_type(string(&metadata, "contentType").or(media_type)),
            metadata: custom_metadata(&metadata),
            declared: Declared::from_metadata(&metadata).or(Declared::from_headers(headers)),
            preconditions,
        }
        .named()
    }

    /// `uploadType=resumable`'s first request, whose body is the JSON resource (or
    /// empty): the upload without its bytes, which the session's requests bring.
    /// The content type may come as `X-Upload-Content-Type`; digests only from the
    /// resource (the last request may declare more).
    pub fn resumable(
        bucket: &str,
        query: &Query,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Upload, Rejection> {
        let preconditions = Preconditions::parse(query, headers)?;
        let metadata = if body.is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_slice(body) {
                Ok(Value::Object(m)) => Value::Object(m),
                _ => return Err(Rejection::invalid("the metadata must be a JSON object")),
            }
        };
        let upload_type = header(headers, "x-upload-content-type");
        Upload {
            api: Api::Json,
            bucket: bucket.to_string(),
            name: name(query, &metadata),
            data: Bytes::new(),
            content_type: content_type(string(&metadata, "contentType").or(upload_type)),
            metadata: custom_metadata(&metadata),
            declared: Declared::from_metadata(&metadata),
            preconditions,
        }
        .named()
    }

    /// XML `PUT /{bucket}/{name}`: the body is the object; digests in `x-goog-hash`
    /// and `Content-MD5` (which wins for MD5), metadata in `x-goog-meta-*`.
    pub fn xml_put(
        bucket: &str,
        name: &str,
        query: &Query,
        headers: &HeaderMap,
        data: Bytes,
    ) -> Result<Upload, Rejection> {
        let preconditions = Preconditions::parse(query, headers)?;
        let mut declared = Declared::from_headers(headers);
        if let Some(md5) = header(headers, "content-md5") {
            declared.md5 = Some(md5.trim().to_string());
        }
        let metadata = headers
            .iter()
            .filter_map(|(k, v)| {
                let key = k.as_str().strip_prefix("x-goog-meta-")?;
                Some((key.to_string(), v.to_str().ok()?.to_string()))
            })
            .collect();
        Upload {
            api: Api::Xml,
            bucket: bucket.to_string(),
            name: name.to_string(),
            data,
            content_type: content_type(header(headers, "content-type")),
            metadata,
            declared,
            preconditions,
        }
        .named()
    }

    /// The digests of the bytes, or [`Rejection::BadDigest`] when a declared one
    /// differs.
    pub fn digests(&self) -> Result<Digests, Rejection> {
        let digests = Digests::of(&self.data);
        match self.declared.mismatch(&digests) {
            Some(mismatch) => Err(Rejection::BadDigest(mismatch)),
            None => Ok(digests),
        }
    }

    /// The upload, if it names an object.
    fn named(self) -> Result<Upload, Rejection> {
        if self.name.is_empty() {
            return Err(Rejection::invalid(NAME_MISSING));
        }
        Ok(self)
    }
}

/// The object name: the query's `name`, else the resource's.
fn name(query: &Query, metadata: &Value) -> String {
    query
        .get("name")
        .or_else(|| string(metadata, "name"))
        .unwrap_or("")
        .to_string()
}

fn string<'a>(metadata: &'a Value, key: &str) -> Option<&'a str> {
    metadata.get(key).and_then(Value::as_str)
}

/// The resource's `metadata` object, its string values only.
fn custom_metadata(metadata: &Value) -> BTreeMap<String, String> {
    let Some(Value::Object(custom)) = metadata.get("metadata") else {
        return BTreeMap::new();
    };
    custom
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::digest::crc32c_base64;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_the_default_content_type_is_shared() {
        assert!(matches!(
            content_type(None),
            Cow::Borrowed(DEFAULT_CONTENT_TYPE)
        ));
        assert!(matches!(
            content_type(Some(DEFAULT_CONTENT_TYPE)),
            Cow::Borrowed(_)
        ));
        assert_eq!(content_type(Some("text/plain")), "text/plain");
    }

    #[test]
    fn every_kind_of_upload_parses_into_one_value() {
        let media = Upload::media(
            "b",
            &Query::parse(Some("name=a%2Fb&ifGenerationMatch=0")),
            &headers(&[("content-type", "text/plain")]),
            Bytes::from_static(b"hello"),
        )
        .unwrap();
        assert_eq!(
            (media.name.as_str(), &media.content_type[..]),
            ("a/b", "text/plain")
        );
        assert_eq!(media.preconditions.if_generation_match, Some(0));

        let body = Bytes::from_static(
            b"--x\r\ncontent-type: application/json\r\n\r\n{\"name\":\"n\",\"metadata\":{\"k\":\"v\"},\"crc32c\":\"mnG7TA==\"}\r\n--x\r\ncontent-type: text/csv\r\n\r\nhello\r\n--x--\r\n",
        );
        let multipart = Upload::multipart(
            "b",
            &Query::default(),
            &headers(&[("content-type", "multipart/related; boundary=x")]),
            body,
        )
        .unwrap();
        assert_eq!(multipart.name, "n");
        assert_eq!(&multipart.data[..], b"hello");
        assert_eq!(multipart.content_type, "text/csv");
        assert_eq!(multipart.metadata.get("k").map(String::as_str), Some("v"));
        assert_eq!(
            multipart.digests().map(|d| crc32c_base64(d.crc32c)),
            Ok("mnG7TA==".to_string())
        );

        let put = Upload::xml_put(
            "b",
            "o",
            &Query::default(),
            &headers(&[("x-goog-meta-k", "v"), ("content-md5", "AAAA")]),
            Bytes::from_static(b"hello"),
        )
        .unwrap();
        assert_eq!(put.api, Api::Xml);
        assert_eq!(put.metadata.get("k").map(String::as_str), Some("v"));
        assert!(matches!(put.digests(), Err(Rejection::BadDigest(_))));
    }

    #[test]
    fn an_upload_without_a_name_is_refused() {
        let none = Upload::media("b", &Query::default(), &HeaderMap::new(), Bytes::new());
        assert_eq!(none, Err(Rejection::invalid(NAME_MISSING)));
        let start = Upload::resumable("b", &Query::default(), &HeaderMap::new(), b"{}");
        assert_eq!(start, Err(Rejection::invalid(NAME_MISSING)));
        let not_json = Upload::resumable("b", &Query::default(), &HeaderMap::new(), b"[]");
        assert!(matches!(
            not_json,
            Err(Rejection::Status { status: 400, .. })
        ));
    }
}
