//! An object's attributes beside its content type ([`ObjectAttributes`]): content
//! encoding, cache control, content disposition, content language and custom
//! metadata. Read from an upload (the JSON object resource of a multipart,
//! resumable or compose request; the XML API's request headers) and shown again
//! (the JSON object resource; the response headers of a download or `HEAD`).
//!
//! Cloud Storage stores these as given and serves them back; so does the fake. It
//! does not transcode: an object stored with `Content-Encoding: gzip` is served as
//! stored, with that header, whatever the request's `Accept-Encoding`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use http::HeaderMap;
use serde_json::{Map, Value};

/// The prefix of the XML API's custom metadata headers.
pub const META_HEADER_PREFIX: &str = "x-goog-meta-";

/// An object's attributes other than its content type (which every object has).
/// Most objects have none: records keep them boxed, as
/// `Option<Box<ObjectAttributes>>`, so that an object without any costs one
/// pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ObjectAttributes {
    /// `contentEncoding` / `Content-Encoding` (for example `gzip`).
    pub content_encoding: Option<String>,
    /// `cacheControl` / `Cache-Control`.
    pub cache_control: Option<String>,
    /// `contentDisposition` / `Content-Disposition`.
    pub content_disposition: Option<String>,
    /// `contentLanguage` / `Content-Language`.
    pub content_language: Option<String>,
    /// Custom metadata: the JSON resource's `metadata` object, or the XML API's
    /// `x-goog-meta-{key}` headers (whose keys arrive lower-cased).
    pub metadata: BTreeMap<String, String>,
    /// `customTime` (RFC 3339), from the JSON resource of an upload, compose,
    /// copy or patch; shown in the JSON resource only.
    pub custom_time: Option<String>,
}

/// The attributes of an object that has none.
pub(crate) static NO_ATTRIBUTES: ObjectAttributes = ObjectAttributes {
    content_encoding: None,
    cache_control: None,
    content_disposition: None,
    content_language: None,
    metadata: BTreeMap::new(),
    custom_time: None,
};

/// Each single-valued attribute's JSON field and HTTP header name.
const FIELDS: [(&str, &str); 4] = [
    ("contentEncoding", "content-encoding"),
    ("cacheControl", "cache-control"),
    ("contentDisposition", "content-disposition"),
    ("contentLanguage", "content-language"),
];

impl ObjectAttributes {
    /// Whether no attribute is set.
    pub fn is_empty(&self) -> bool {
        self.values().iter().all(|v| v.is_none())
            && self.metadata.is_empty()
            && self.custom_time.is_none()
    }

    /// The attributes boxed, or `None` when none is set: the form records keep.
    pub fn boxed(self) -> Option<Box<ObjectAttributes>> {
        (!self.is_empty()).then(|| Box::new(self))
    }

    /// The attributes a JSON object resource gives (`contentEncoding`,
    /// `cacheControl`, `contentDisposition`, `contentLanguage`, and the string
    /// values of `metadata`); other fields and non-string values are ignored.
    pub fn from_resource(resource: &Value) -> Self {
        let mut attributes = ObjectAttributes::default();
        for ((field, _), slot) in FIELDS.iter().zip(attributes.values_mut()) {
            *slot = resource
                .get(field)
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        if let Some(Value::Object(custom)) = resource.get("metadata") {
            attributes.metadata = custom
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect();
        }
        attributes.custom_time = (resource.get("customTime"))
            .and_then(Value::as_str)
            .map(str::to_string);
        attributes
    }

    /// The attributes an XML API request's headers give: `Content-Encoding`,
    /// `Cache-Control`, `Content-Disposition`, `Content-Language` and
    /// `x-goog-meta-*` (what `object_store` sends for its `Attributes`). A value
    /// that is not printable ASCII (raw UTF-8 bytes in a header) is refused with
    /// the header's name, never dropped: an object must not lose an attribute
    /// its writer was told it has.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, String> {
        let text = |name: &str, value: &http::HeaderValue| {
            value.to_str().map(str::to_string).map_err(|_| {
                format!(
                    "header {name} is not printable ASCII; send non-ASCII attribute values through the JSON API"
                )
            })
        };
        let mut attributes = ObjectAttributes::default();
        for ((_, name), slot) in FIELDS.iter().zip(attributes.values_mut()) {
            *slot = headers.get(*name).map(|v| text(name, v)).transpose()?;
        }
        for (k, v) in headers {
            if let Some(key) = k.as_str().strip_prefix(META_HEADER_PREFIX) {
                attributes
                    .metadata
                    .insert(key.to_string(), text(k.as_str(), v)?);
            }
        }
        Ok(attributes)
    }

    /// Adds the attributes that are set to a JSON object resource.
    pub fn add_to_resource(&self, resource: &mut Map<String, Value>) {
        for ((field, _), value) in FIELDS.iter().zip(self.values()) {
            if let Some(value) = value {
                resource.insert(field.to_string(), Value::String(value.clone()));
            }
        }
        if !self.metadata.is_empty() {
            let custom = self
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            resource.insert("metadata".into(), Value::Object(custom));
        }
        if let Some(time) = &self.custom_time {
            resource.insert("customTime".into(), Value::String(time.clone()));
        }
    }

    /// The response headers that carry the attributes that are set, as the XML
    /// API sends them on a download or `HEAD`.
    pub fn headers(&self) -> Vec<(Cow<'static, str>, String)> {
        let single = FIELDS
            .iter()
            .zip(self.values())
            .filter_map(|((_, name), value)| Some((Cow::Borrowed(*name), value.clone()?)));
        let custom = self
            .metadata
            .iter()
            .map(|(k, v)| (Cow::Owned(format!("{META_HEADER_PREFIX}{k}")), v.clone()));
        single.chain(custom).collect()
    }

    /// The single-valued attributes, in [`FIELDS`] order.
    fn values(&self) -> [&Option<String>; 4] {
        [
            &self.content_encoding,
            &self.cache_control,
            &self.content_disposition,
            &self.content_language,
        ]
    }

    fn values_mut(&mut self) -> [&mut Option<String>; 4] {
        [
            &mut self.content_encoding,
            &mut self.cache_control,
            &mut self.content_disposition,
            &mut self.content_language,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full() -> ObjectAttributes {
        ObjectAttributes {
            content_encoding: Some("gzip".into()),
            cache_control: Some("no-store".into()),
            content_disposition: Some("attachment; filename=\"a.txt\"".into()),
            content_language: Some("fr".into()),
            metadata: [("k".to_string(), "v".to_string())].into(),
            custom_time: None,
        }
    }

    #[test]
    fn attributes_round_trip_through_the_json_resource() {
        let mut resource = Map::new();
        full().add_to_resource(&mut resource);
        let resource = Value::Object(resource);
        assert_eq!(
            resource["contentDisposition"],
            "attachment; filename=\"a.txt\""
        );
        assert_eq!(resource["metadata"], json!({ "k": "v" }));
        assert_eq!(ObjectAttributes::from_resource(&resource), full());
        let numbers = json!({ "metadata": { "n": 1, "s": "x" }, "cacheControl": 5 });
        let parsed = ObjectAttributes::from_resource(&numbers);
        assert_eq!(parsed.metadata, [("s".to_string(), "x".to_string())].into());
        assert_eq!(parsed.cache_control, None);
    }

    #[test]
    fn attributes_round_trip_through_xml_headers() {
        let mut headers = HeaderMap::new();
        for (name, value) in full().headers() {
            let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
            headers.append(name, value.parse().unwrap());
        }
        assert_eq!(headers["x-goog-meta-k"], "v");
        assert_eq!(headers["content-language"], "fr");
        assert_eq!(ObjectAttributes::from_headers(&headers), Ok(full()));
    }

    #[test]
    fn a_header_value_that_is_not_ascii_is_refused_by_name_not_dropped() {
        for name in ["x-goog-meta-owner", "content-disposition"] {
            let mut headers = HeaderMap::new();
            headers.insert(
                http::HeaderName::from_static(name),
                http::HeaderValue::from_bytes("sre ☃".as_bytes()).unwrap(),
            );
            let err = ObjectAttributes::from_headers(&headers).unwrap_err();
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn only_attributes_that_are_set_are_boxed() {
        assert!(ObjectAttributes::default().is_empty());
        assert_eq!(ObjectAttributes::default().boxed(), None);
        assert_eq!(NO_ATTRIBUTES, ObjectAttributes::default());
        let one = ObjectAttributes {
            content_language: Some("de".into()),
            ..Default::default()
        };
        assert_eq!(one.clone().boxed(), Some(Box::new(one)));
        assert!(ObjectAttributes::default().headers().is_empty());
    }
}
