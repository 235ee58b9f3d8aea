//! An upload, whichever way it came (JSON media, multipart or resumable; XML `PUT`),
//! parsed into one [`Upload`]: where it goes, its bytes, content type, other
//! attributes, the digests the client declared and its preconditions. A server
//! checks [`Upload::digests`] before accepting the bytes, then stores them its own
//! way.
//!
//! Where each kind carries the object's attributes:
//!
//! | kind | content type | other attributes |
//! |---|---|---|
//! | media | `Content-Type` | `contentEncoding` query parameter only |
//! | multipart | resource `contentType`, else the media part's `Content-Type` | resource `contentEncoding`, `cacheControl`, `contentDisposition`, `contentLanguage`, `metadata` |
//! | resumable | resource `contentType`, else `X-Upload-Content-Type` | the first request's resource, as multipart |
//! | XML `PUT` | `Content-Type` | `Content-Encoding`, `Cache-Control`, `Content-Disposition`, `Content-Language`, `x-goog-meta-*` |
//!
//! On every JSON upload the `contentEncoding` query parameter, when given, sets the
//! content encoding (Cloud Storage's `objects.insert` parameter).

use std::borrow::Cow;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Map, Value};

use crate::wire::attributes::ObjectAttributes;
use crate::wire::digest::{Declared, Digests};
use crate::wire::error::Rejection;
use crate::wire::multipart::{Part, multipart_boundary, parse_multipart};
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

/// What an upload is parsed from beside its body: the request's decoded query and
/// its headers.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The query, decoded.
    pub query: &'a Query,
    /// The headers.
    pub headers: &'a HeaderMap,
}

impl RequestHead<'_> {
    fn preconditions(&self) -> Result<Preconditions, Rejection> {
        Preconditions::parse(self.query, self.headers)
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
    /// The other attributes (see the module's table for where they come from).
    pub attributes: ObjectAttributes,
    /// Digests the client declared.
    pub declared: Declared,
    /// Conditions on the object's current generation.
    pub preconditions: Preconditions,
    /// Fields of the JSON resource the object keeps as given and the bucket
    /// checks or completes ([`KEPT_FIELDS`]; `kmsKeyName` also from the query
    /// or, in the XML API, a header).
    pub fields: Map<String, Value>,
}

/// The fields of an upload's JSON resource kept beside its attributes: the Cloud
/// KMS key to encrypt it with and its object retention.
pub const KEPT_FIELDS: [&str; 2] = ["kmsKeyName", "retention"];

const NAME_MISSING: &str = "Required: the object name is missing.";

impl Upload {
    /// `uploadType=media`: the body is the object, the name is in the query, digests
    /// in `x-goog-hash`, the content encoding in the `contentEncoding` parameter.
    pub fn media(bucket: &str, head: RequestHead<'_>, data: Bytes) -> Result<Upload, Rejection> {
        let preconditions = head.preconditions()?;
        let name = head.query.get("name").unwrap_or("");
        let given_type = header(head.headers, "content-type");
        Upload {
            data,
            declared: Declared::from_headers(head.headers),
            ..Upload::new(Api::Json, bucket, name, given_type, preconditions)
        }
        .encoded_as(head.query)
        .named()
    }

    /// `uploadType=multipart`: a `multipart/related` body of two parts, the JSON
    /// resource then the bytes. The query's `name` wins over the resource's; digests
    /// in the resource win over `x-goog-hash`.
    pub fn multipart(
        bucket: &str,
        head: RequestHead<'_>,
        data: Bytes,
    ) -> Result<Upload, Rejection> {
        let preconditions = head.preconditions()?;
        let (resource, media) = resource_and_media(head.headers, &data)?;
        let media_type = media.header("content-type");
        let upload = Upload::described(bucket, head.query, &resource, media_type, preconditions);
        Upload {
            data: media.body.clone(),
            declared: upload
                .declared
                .clone()
                .or(Declared::from_headers(head.headers)),
            ..upload
        }
        .encoded_as(head.query)
        .named()
    }

    /// `uploadType=multipart` read as it arrives: the upload its head describes (the
    /// resource, the media part's content type), without its bytes, which follow
    /// ([`crate::wire::MultipartStream::media`]).
    pub fn multipart_head(
        bucket: &str,
        head: RequestHead<'_>,
        parts: &crate::wire::MultipartHead,
    ) -> Result<Upload, Rejection> {
        let preconditions = head.preconditions()?;
        let resource = match serde_json::from_slice::<Value>(&parts.resource.body) {
            Ok(resource @ Value::Object(_)) => resource,
            _ => {
                return Err(Rejection::invalid(
                    "the first multipart part must be a JSON object",
                ));
            }
        };
        let media_type = parts.media.header("content-type");
        let upload = Upload::described(bucket, head.query, &resource, media_type, preconditions);
        Upload {
            declared: upload
                .declared
                .clone()
                .or(Declared::from_headers(head.headers)),
            ..upload
        }
        .encoded_as(head.query)
        .named()
    }

    /// `uploadType=resumable`'s first request, whose body is the JSON resource (or
    /// empty): the upload without its bytes, which the session's requests bring.
    /// The content type may come as `X-Upload-Content-Type`; digests only from the
    /// resource (the last request may declare more).
    pub fn resumable(
        bucket: &str,
        head: RequestHead<'_>,
        body: &[u8],
    ) -> Result<Upload, Rejection> {
        let preconditions = head.preconditions()?;
        let resource = match body.is_empty() {
            true => Value::Object(Default::default()),
            false => match serde_json::from_slice(body) {
                Ok(Value::Object(m)) => Value::Object(m),
                _ => return Err(Rejection::invalid("the metadata must be a JSON object")),
            },
        };
        let upload_type = header(head.headers, "x-upload-content-type");
        Upload::described(bucket, head.query, &resource, upload_type, preconditions)
            .encoded_as(head.query)
            .named()
    }

    /// XML `PUT /{bucket}/{name}`: the body is the object; digests in `x-goog-hash`
    /// and `Content-MD5` (which wins for MD5), attributes in headers (see
    /// [`ObjectAttributes::from_headers`]), the Cloud KMS key in
    /// `x-goog-encryption-kms-key-name`.
    pub fn xml_put(
        bucket: &str,
        name: &str,
        head: RequestHead<'_>,
        data: Bytes,
    ) -> Result<Upload, Rejection> {
        let preconditions = head.preconditions()?;
        let headers = head.headers;
        let mut declared = Declared::from_headers(headers);
        if let Some(md5) = header(headers, "content-md5") {
            declared.md5 = Some(md5.trim().to_string());
        }
        let given_type = header(headers, "content-type");
        let key = header(headers, "x-goog-encryption-kms-key-name");
        let fields = key.map(|k| ("kmsKeyName".to_string(), Value::String(k.to_string())));
        Upload {
            data,
            attributes: ObjectAttributes::from_headers(headers).map_err(Rejection::invalid)?,
            declared,
            fields: fields.into_iter().collect(),
            ..Upload::new(Api::Xml, bucket, name, given_type, preconditions)
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

    /// An upload to `bucket/name` of no bytes, with no attributes and no declared
    /// digests yet.
    fn new(
        api: Api,
        bucket: &str,
        name: &str,
        given_type: Option<&str>,
        preconditions: Preconditions,
    ) -> Upload {
        Upload {
            api,
            bucket: bucket.to_string(),
            name: name.to_string(),
            data: Bytes::new(),
            content_type: content_type(given_type),
            attributes: ObjectAttributes::default(),
            declared: Declared::default(),
            preconditions,
            fields: Map::new(),
        }
    }

    /// A JSON API upload as its object `resource` describes it (name unless the
    /// query gives one, content type unless absent, attributes, digests).
    fn described(
        bucket: &str,
        query: &Query,
        resource: &Value,
        fallback_type: Option<&str>,
        preconditions: Preconditions,
    ) -> Upload {
        let name = query
            .get("name")
            .or_else(|| string(resource, "name"))
            .unwrap_or("");
        let given_type = string(resource, "contentType").or(fallback_type);
        let fields = KEPT_FIELDS
            .iter()
            .filter_map(|&f| Some((f.to_string(), resource.get(f)?.clone())))
            .collect();
        Upload {
            attributes: ObjectAttributes::from_resource(resource),
            declared: Declared::from_metadata(resource),
            fields,
            ..Upload::new(Api::Json, bucket, name, given_type, preconditions)
        }
    }

    /// The upload, with the content encoding the `contentEncoding` query parameter
    /// sets and the key its `kmsKeyName` names, if they do.
    fn encoded_as(mut self, query: &Query) -> Upload {
        if let Some(encoding) = query.get("contentEncoding") {
            self.attributes.content_encoding = Some(encoding.to_string());
        }
        if let Some(key) = query.get("kmsKeyName") {
            self.fields
                .insert("kmsKeyName".into(), Value::String(key.to_string()));
        }
        self
    }

    /// The upload, if it names an object.
    fn named(self) -> Result<Upload, Rejection> {
        if self.name.is_empty() {
            return Err(Rejection::invalid(NAME_MISSING));
        }
        Ok(self)
    }
}

/// A multipart upload's two parts: the JSON resource and the media.
fn resource_and_media(headers: &HeaderMap, data: &Bytes) -> Result<(Value, Part), Rejection> {
    let content_type = header(headers, "content-type").unwrap_or_default();
    let boundary = multipart_boundary(content_type)?;
    let (head, media) = parse_multipart(data, &boundary)?;
    let media = Part {
        body: media,
        ..head.media
    };
    match serde_json::from_slice::<Value>(&head.resource.body) {
        Ok(resource @ Value::Object(_)) => Ok((resource, media)),
        _ => Err(Rejection::invalid(
            "the first multipart part must be a JSON object",
        )),
    }
}

fn string<'a>(metadata: &'a Value, key: &str) -> Option<&'a str> {
    metadata.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::digest::crc32c_base64;

    fn head<'a>(query: &'a Query, headers: &'a HeaderMap) -> RequestHead<'a> {
        RequestHead { query, headers }
    }

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
        let query = Query::parse(Some("name=a%2Fb&ifGenerationMatch=0"));
        let text = headers(&[("content-type", "text/plain")]);
        let media = Upload::media("b", head(&query, &text), Bytes::from_static(b"hello")).unwrap();
        assert_eq!(
            (media.name.as_str(), &media.content_type[..]),
            ("a/b", "text/plain")
        );
        assert_eq!(media.preconditions.if_generation_match, Some(0));

        let body = Bytes::from_static(
            b"--x\r\ncontent-type: application/json\r\n\r\n{\"name\":\"n\",\"metadata\":{\"k\":\"v\"},\"crc32c\":\"mnG7TA==\"}\r\n--x\r\ncontent-type: text/csv\r\n\r\nhello\r\n--x--\r\n",
        );
        let none = Query::default();
        let related = headers(&[("content-type", "multipart/related; boundary=x")]);
        let multipart = Upload::multipart("b", head(&none, &related), body).unwrap();
        assert_eq!(multipart.name, "n");
        assert_eq!(&multipart.data[..], b"hello");
        assert_eq!(multipart.content_type, "text/csv");
        assert_eq!(multipart.attributes.metadata["k"], "v");
        assert_eq!(
            multipart.digests().map(|d| crc32c_base64(d.crc32c)),
            Ok("mnG7TA==".to_string())
        );

        let meta = headers(&[("x-goog-meta-k", "v"), ("content-md5", "AAAA")]);
        let put =
            Upload::xml_put("b", "o", head(&none, &meta), Bytes::from_static(b"hello")).unwrap();
        assert_eq!(put.api, Api::Xml);
        assert_eq!(put.attributes.metadata["k"], "v");
        assert!(matches!(put.digests(), Err(Rejection::BadDigest(_))));
    }

    #[test]
    fn an_upload_without_a_name_is_refused() {
        let (query, headers) = (Query::default(), HeaderMap::new());
        let nothing = head(&query, &headers);
        let none = Upload::media("b", nothing, Bytes::new());
        assert_eq!(none, Err(Rejection::invalid(NAME_MISSING)));
        let start = Upload::resumable("b", nothing, b"{}");
        assert_eq!(start, Err(Rejection::invalid(NAME_MISSING)));
        let not_json = Upload::resumable("b", nothing, b"[]");
        assert!(matches!(
            not_json,
            Err(Rejection::Status { status: 400, .. })
        ));
    }

    #[test]
    fn every_kind_of_upload_carries_attributes_where_cloud_storage_takes_them() {
        let encoded = Query::parse(Some("name=m&contentEncoding=gzip"));
        let none = HeaderMap::new();
        let media = Upload::media("b", head(&encoded, &none), Bytes::new()).unwrap();
        assert_eq!(media.attributes.content_encoding.as_deref(), Some("gzip"));

        let resource = br#"{"name":"r","contentType":"text/csv","contentEncoding":"br","cacheControl":"no-store","contentDisposition":"inline","contentLanguage":"en","metadata":{"k":"v"}}"#;
        let named = Query::default();
        let resumable = Upload::resumable("b", head(&named, &none), resource).unwrap();
        let expected = ObjectAttributes {
            content_encoding: Some("br".into()),
            cache_control: Some("no-store".into()),
            content_disposition: Some("inline".into()),
            content_language: Some("en".into()),
            metadata: [("k".to_string(), "v".to_string())].into(),
            custom_time: None,
        };
        assert_eq!(resumable.attributes, expected);
        assert_eq!(resumable.content_type, "text/csv");
        // The query parameter wins over the resource.
        let over = Upload::resumable("b", head(&encoded, &none), resource).unwrap();
        assert_eq!(over.attributes.content_encoding.as_deref(), Some("gzip"));

        let xml = headers(&[
            ("content-encoding", "br"),
            ("cache-control", "no-store"),
            ("content-disposition", "inline"),
            ("content-language", "en"),
            ("x-goog-meta-k", "v"),
        ]);
        let put = Upload::xml_put("b", "o", head(&named, &xml), Bytes::new()).unwrap();
        assert_eq!(put.attributes, expected);
    }
}
