//! Routing: which Cloud Storage operation a request's method, path and query name,
//! and with which bucket and object (percent-decoded).
//!
//! | path | API |
//! |---|---|
//! | `/upload/storage/v1/b/{bucket}/o?uploadType=...` (and `&upload_id=` for a resumable session's requests; `/resumable/upload/...` too, as gsutil sends it) | JSON uploads |
//! | `/download/storage/v1/b/{bucket}/o/{object}` | JSON downloads |
//! | `/storage/v1/b`, `/storage/v1/b/{bucket}`, `.../o`, `.../o/{object}` | JSON buckets and objects |
//! | `POST /storage/v1/b/{bucket}/o/{destination}/compose` | JSON compose |
//! | `/{bucket}`, `/{bucket}/{object}` | XML |
//!
//! Any other path under `/storage/v1`, `/upload/storage/v1` or
//! `/download/storage/v1` is a JSON 404 naming the request, never an XML object
//! in a bucket named `storage`. The JSON API's metadata requests (bucket
//! changes, ACLs, IAM, notifications, HMAC keys, ...) are
//! [`MetaRoute`](crate::wire::MetaRoute)'s; here they are 404s too.

use http::{HeaderMap, Method, Uri};

use crate::wire::encoding::{decode_path, decode_query_component, query_component_is_utf8};
use crate::wire::operation::Operation;

/// Which API a request came by: decides the shape of its answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// The JSON API (`/storage/v1/...`, `/upload/...`, `/download/...`).
    Json,
    /// The XML API (`/{bucket}/{object}`).
    Xml,
}

/// The three ways the JSON API uploads an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadKind {
    /// `uploadType=media`: the body is the object.
    Media,
    /// `uploadType=multipart`: metadata and bytes in one `multipart/related` body.
    Multipart,
    /// `uploadType=resumable`: opens a session that later requests fill.
    Resumable,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /storage/v1/b`.
    BucketsList,
    /// `GET /storage/v1/b/{bucket}`.
    BucketGet {
        /// The bucket.
        bucket: String,
    },
    /// JSON `GET .../o` or XML `GET /{bucket}`.
    ObjectList {
        /// The API.
        api: Api,
        /// The bucket.
        bucket: String,
    },
    /// An object's resource or bytes.
    ObjectGet {
        /// The API.
        api: Api,
        /// The bucket.
        bucket: String,
        /// The object.
        name: String,
        /// The bytes rather than the JSON resource.
        media: bool,
        /// XML `HEAD`: the headers only.
        head: bool,
    },
    /// JSON or XML `DELETE` of an object.
    ObjectDelete {
        /// The API.
        api: Api,
        /// The bucket.
        bucket: String,
        /// The object.
        name: String,
    },
    /// A JSON upload (media, multipart, or the start of a resumable one).
    Upload {
        /// The bucket.
        bucket: String,
        /// Which kind.
        kind: UploadKind,
    },
    /// A request of a resumable session: a chunk, the last one, or a status query.
    ResumableChunk {
        /// The bucket the session's URL names (a session is bound to it).
        bucket: String,
        /// The session.
        upload_id: String,
    },
    /// `DELETE` of a resumable session.
    ResumableCancel {
        /// The bucket the session's URL names.
        bucket: String,
        /// The session.
        upload_id: String,
    },
    /// `POST /storage/v1/b/{bucket}/o/{destination}/compose`.
    Compose {
        /// The bucket.
        bucket: String,
        /// The destination object.
        destination: String,
    },
    /// XML `PUT /{bucket}/{object}`.
    XmlPut {
        /// The bucket.
        bucket: String,
        /// The object.
        name: String,
    },
    /// A step of an XML API multipart upload of `/{bucket}/{name}`.
    XmlMultipart {
        /// The bucket.
        bucket: String,
        /// The object.
        name: String,
        /// Which step.
        step: MultipartStep,
    },
    /// A request that cannot be served: `status` (404 or 400) with `message`.
    Invalid {
        /// The API whose error body to answer with.
        api: Api,
        /// The status.
        status: u16,
        /// Why.
        message: String,
    },
}

/// Decoded query parameters, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
    /// The first pair, as sent, that does not decode to UTF-8.
    not_utf8: Option<String>,
}

impl Query {
    /// Parses `application/x-www-form-urlencoded` pairs (`+` is a space). A pair that
    /// does not decode to UTF-8 is kept lossily and remembered
    /// ([`Query::not_utf8`]): routing refuses the request, as Cloud Storage answers
    /// 400 for `name=%FF` rather than storing U+FFFD.
    pub fn parse(query: Option<&str>) -> Self {
        let mut not_utf8 = None;
        let pairs = query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                let utf8 = query_component_is_utf8(k) && query_component_is_utf8(v);
                if not_utf8.is_none() && !utf8 {
                    not_utf8 = Some(pair.to_string());
                }
                (decode_query_component(k), decode_query_component(v))
            })
            .collect();
        Query { pairs, not_utf8 }
    }

    /// The first parameter, as sent, that is not UTF-8 once percent-decoded.
    pub fn not_utf8(&self) -> Option<&str> {
        self.not_utf8.as_deref()
    }

    /// Every value of `key`, in order (`permissions=a&permissions=b`).
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A JSON boolean parameter (absent or empty: false); 400 naming it otherwise.
    /// The Python client sends `True`: booleans are read without case.
    pub fn flag(&self, key: &str) -> Result<bool, crate::wire::Rejection> {
        match self.get(key).filter(|v| !v.is_empty()) {
            None => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(other) => Err(crate::wire::Rejection::invalid(format!(
                "Invalid {key} {other:?}: true or false"
            ))),
        }
    }
}

/// A header's value, when it is text.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Why `path` cannot be routed as sent, if it cannot: a dot segment (`.` or `..`,
/// however percent-encoded: `%2e`, `.%2E`, ...) or a raw backslash. URL parsers
/// (RFC 3986's `remove_dot_segments`, the WHATWG URL standard that reqwest and
/// browsers follow) resolve dot segments and read `\` as `/`, so such a path names
/// one resource to a server that routes it as sent and another to one that parses
/// it first: a relay would check one bucket and reach another. Cloud Storage's
/// documentation does not say what such a path names; the fake and the relay
/// refuse it (400), so that every server on the way routes the same resource. A
/// name with `.`/`..` segments or a backslash is sent percent-encoded as one
/// segment (`a%2F..%2Fb`, `a%5Cb`), as every client encodes names.
pub fn ambiguous_path(path: &str) -> Option<String> {
    if path.contains('\\') {
        return Some(format!(
            "The request path {path:?} holds a backslash, which URL parsers read as '/': \
             percent-encode it (%5C)."
        ));
    }
    let dot = path.split('/').skip(1).find(|segment| {
        segment.len() <= 6
            && matches!(
                percent_encoding::percent_decode_str(segment)
                    .collect::<Vec<u8>>()
                    .as_slice(),
                b"." | b".."
            )
    })?;
    Some(format!(
        "The request path {path:?} holds the dot segment {dot:?}, which URL parsers resolve \
         against its parent: send a name with '.' or '..' segments percent-encoded as one \
         segment ('/' as %2F)."
    ))
}

impl Route {
    /// The route of `method uri`; never fails: what cannot be served is
    /// [`Route::Invalid`].
    pub fn parse(method: &Method, uri: &Uri, query: &Query) -> Route {
        let request = Request {
            method,
            path: uri.path(),
            query,
        };
        request.route().unwrap_or_else(|invalid| invalid)
    }

    /// 404 for `method path`, with `api`'s error body.
    pub fn not_found(api: Api, method: &Method, path: &str) -> Route {
        Route::Invalid {
            api,
            status: 404,
            message: format!("Not Found: the fake serves no {method} {path}"),
        }
    }

    /// The operation, as the storage-testbench names it.
    pub fn operation(&self) -> Operation {
        match self {
            Route::BucketsList => Operation::BucketsList,
            Route::BucketGet { .. } => Operation::BucketsGet,
            Route::ObjectList { .. } => Operation::ObjectsList,
            Route::ObjectGet { .. } => Operation::ObjectsGet,
            Route::ObjectDelete { .. } => Operation::ObjectsDelete,
            Route::Upload { .. }
            | Route::ResumableChunk { .. }
            | Route::ResumableCancel { .. }
            | Route::XmlPut { .. } => Operation::ObjectsInsert,
            Route::XmlMultipart { step, .. } => match step {
                MultipartStep::ListParts { .. } => Operation::ObjectsGet,
                _ => Operation::ObjectsInsert,
            },
            Route::Compose { .. } => Operation::ObjectsCompose,
            Route::Invalid { .. } => Operation::Unknown,
        }
    }

    /// The API the answer must speak.
    pub fn api(&self) -> Api {
        match self {
            Route::ObjectList { api, .. }
            | Route::ObjectGet { api, .. }
            | Route::ObjectDelete { api, .. }
            | Route::Invalid { api, .. } => *api,
            Route::XmlPut { .. } | Route::XmlMultipart { .. } => Api::Xml,
            _ => Api::Json,
        }
    }

    /// The bucket named in the path, if any.
    pub fn bucket(&self) -> Option<&str> {
        match self {
            Route::BucketGet { bucket }
            | Route::ObjectList { bucket, .. }
            | Route::ObjectGet { bucket, .. }
            | Route::ObjectDelete { bucket, .. }
            | Route::Upload { bucket, .. }
            | Route::Compose { bucket, .. }
            | Route::XmlMultipart { bucket, .. }
            | Route::XmlPut { bucket, .. } => Some(bucket),
            _ => None,
        }
    }

    /// The object named in the path, if any (an upload names it in its query or
    /// body; a compose names its destination).
    pub fn object(&self) -> Option<&str> {
        match self {
            Route::ObjectGet { name, .. }
            | Route::ObjectDelete { name, .. }
            | Route::XmlMultipart { name, .. }
            | Route::XmlPut { name, .. } => Some(name),
            Route::Compose { destination, .. } => Some(destination),
            _ => None,
        }
    }
}

/// A step of an XML API multipart upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultipartStep {
    /// `POST ?uploads`: start one; answered with its upload ID.
    Start,
    /// `PUT ?partNumber=N&uploadId=U`: one part.
    Part {
        /// The upload.
        upload_id: String,
        /// The part's number, 1 to 10,000.
        part_number: u32,
    },
    /// `POST ?uploadId=U`: complete it from the parts its body lists.
    Complete {
        /// The upload.
        upload_id: String,
    },
    /// `DELETE ?uploadId=U`: abort it.
    Abort {
        /// The upload.
        upload_id: String,
    },
    /// `GET ?uploadId=U`: list its parts.
    ListParts {
        /// The upload.
        upload_id: String,
    },
}

/// One request being routed. Each step returns the route, or `Err` with the
/// [`Route::Invalid`] to answer.
struct Request<'a> {
    method: &'a Method,
    path: &'a str,
    query: &'a Query,
}

type Routed = Result<Route, Route>;

impl Request<'_> {
    fn route(&self) -> Routed {
        let path = self.path;
        let api = match path.starts_with("/upload/")
            || path.starts_with("/storage/")
            || path.starts_with("/download/")
            || path.starts_with("/resumable/")
        {
            true => Api::Json,
            false => Api::Xml,
        };
        if let Some(message) = ambiguous_path(path) {
            return Err(Route::Invalid {
                api,
                status: 400,
                message,
            });
        }
        if let Some(pair) = self.query.not_utf8() {
            return Err(Route::Invalid {
                api,
                status: 400,
                message: format!(
                    "The query parameter {pair:?} is not UTF-8 after percent-decoding."
                ),
            });
        }
        // gsutil opens its resumable uploads at `/resumable/upload/storage/v1/b/`.
        let upload = (path.strip_prefix("/upload/storage/v1/b/"))
            .or_else(|| path.strip_prefix("/resumable/upload/storage/v1/b/"));
        if let Some(rest) = upload {
            return self.json_upload(rest);
        }
        if let Some(rest) = path.strip_prefix("/download/storage/v1/b/") {
            return self.json_download(rest);
        }
        if path == "/storage/v1/b" {
            return self.json_api("");
        }
        if let Some(rest) = path.strip_prefix("/storage/v1/b/") {
            return self.json_api(rest);
        }
        // The JSON API's other paths (projects, batch, ...) are never objects of
        // the XML API in a bucket named `storage`, `upload` or `download`, however
        // their segments are spelled (`%76%31` is `v1`).
        let json_prefixes: [&[&str]; 3] = [
            &["storage", "v1"],
            &["upload", "storage", "v1"],
            &["download", "storage", "v1"],
        ];
        let segments: Vec<Option<String>> =
            path.split('/').skip(1).take(3).map(decode_path).collect();
        if json_prefixes.iter().any(|prefix| {
            prefix.len() <= segments.len()
                && (prefix.iter().zip(&segments)).all(|(p, s)| s.as_deref() == Some(*p))
        }) {
            return Ok(self.not_found(Api::Json));
        }
        self.xml_api()
    }

    /// `/upload/storage/v1/b/{rest}`: `{bucket}/o` with `uploadType`, or a session's
    /// request with `upload_id`.
    fn json_upload(&self, rest: &str) -> Routed {
        let Some((bucket, "o" | "o/")) = rest.split_once('/') else {
            return Ok(self.not_found(Api::Json));
        };
        let bucket = self.decode(Api::Json, bucket)?;
        if let Some(upload_id) = self.query.get("upload_id") {
            let upload_id = upload_id.to_string();
            return Ok(match *self.method {
                Method::PUT | Method::POST => Route::ResumableChunk { bucket, upload_id },
                Method::DELETE => Route::ResumableCancel { bucket, upload_id },
                _ => self.not_found(Api::Json),
            });
        }
        if *self.method != Method::POST {
            return Ok(self.not_found(Api::Json));
        }
        let kind = self.upload_kind()?;
        Ok(Route::Upload { bucket, kind })
    }

    fn upload_kind(&self) -> Result<UploadKind, Route> {
        match self.query.get("uploadType") {
            Some("media") => Ok(UploadKind::Media),
            Some("multipart") => Ok(UploadKind::Multipart),
            Some("resumable") => Ok(UploadKind::Resumable),
            other => Err(Route::Invalid {
                api: Api::Json,
                status: 400,
                message: format!("uploadType must be media, multipart or resumable, got {other:?}"),
            }),
        }
    }

    /// `/download/storage/v1/b/{bucket}/o/{object}`.
    fn json_download(&self, rest: &str) -> Routed {
        let Some((bucket, name)) = rest.split_once("/o/") else {
            return Ok(self.not_found(Api::Json));
        };
        if *self.method != Method::GET {
            return Ok(self.not_found(Api::Json));
        }
        Ok(Route::ObjectGet {
            api: Api::Json,
            bucket: self.decode(Api::Json, bucket)?,
            name: self.decode(Api::Json, name)?,
            media: true,
            head: false,
        })
    }

    /// `/storage/v1/b/{rest}`: the buckets, a bucket, its objects or one object.
    fn json_api(&self, rest: &str) -> Routed {
        let (bucket, tail) = match rest.split_once('/') {
            Some((bucket, tail)) => (bucket, Some(tail)),
            None => (rest, None),
        };
        Ok(match (self.method, bucket, tail) {
            (&Method::GET, "", None) => Route::BucketsList,
            (&Method::GET, bucket, None | Some("")) => Route::BucketGet {
                bucket: self.decode(Api::Json, bucket)?,
            },
            (&Method::GET, bucket, Some("o" | "o/")) => Route::ObjectList {
                api: Api::Json,
                bucket: self.decode(Api::Json, bucket)?,
            },
            (_, bucket, Some(tail)) if tail.starts_with("o/") => {
                self.json_object(bucket, &tail[2..])?
            }
            _ => self.not_found(Api::Json),
        })
    }

    /// `GET` or `DELETE /storage/v1/b/{bucket}/o/{name}`, or `POST .../{name}/compose`.
    fn json_object(&self, bucket: &str, name: &str) -> Routed {
        let bucket = self.decode(Api::Json, bucket)?;
        if *self.method == Method::POST
            && let Some(destination) = name.strip_suffix("/compose")
        {
            let destination = self.decode(Api::Json, destination)?;
            return Ok(Route::Compose {
                bucket,
                destination,
            });
        }
        let name = self.decode(Api::Json, name)?;
        Ok(match *self.method {
            Method::GET => Route::ObjectGet {
                api: Api::Json,
                bucket,
                name,
                media: self.query.get("alt") == Some("media"),
                head: false,
            },
            Method::DELETE => Route::ObjectDelete {
                api: Api::Json,
                bucket,
                name,
            },
            _ => self.not_found(Api::Json),
        })
    }

    /// The XML API: `/{bucket}` and `/{bucket}/{object}`.
    fn xml_api(&self) -> Routed {
        let Some(rest) = self.path.strip_prefix('/').filter(|r| !r.is_empty()) else {
            return Ok(self.not_found(Api::Xml));
        };
        let (bucket, name) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket = self.decode(Api::Xml, bucket)?;
        if name.is_empty() {
            return Ok(match *self.method {
                Method::GET => Route::ObjectList {
                    api: Api::Xml,
                    bucket,
                },
                _ => self.not_found(Api::Xml),
            });
        }
        let name = self.decode(Api::Xml, name)?;
        if let Some(step) = self.multipart_step()? {
            return Ok(Route::XmlMultipart { bucket, name, step });
        }
        Ok(match *self.method {
            Method::PUT => Route::XmlPut { bucket, name },
            Method::GET | Method::HEAD => Route::ObjectGet {
                api: Api::Xml,
                bucket,
                name,
                media: true,
                head: *self.method == Method::HEAD,
            },
            Method::DELETE => Route::ObjectDelete {
                api: Api::Xml,
                bucket,
                name,
            },
            _ => self.not_found(Api::Xml),
        })
    }

    /// The multipart upload step an XML request on an object is, by its query
    /// (`uploads`, `uploadId`, `partNumber`); `None` for a plain object request.
    fn multipart_step(&self) -> Result<Option<MultipartStep>, Route> {
        let upload_id = self.query.get("uploadId").map(str::to_string);
        let invalid = |message: String| Route::Invalid {
            api: Api::Xml,
            status: 400,
            message,
        };
        Ok(Some(match (self.method, upload_id) {
            (&Method::POST, None) if self.query.get("uploads").is_some() => MultipartStep::Start,
            (&Method::PUT, Some(upload_id)) => {
                let number = self.query.get("partNumber").unwrap_or("");
                let part_number = match number.parse::<u32>() {
                    Ok(n @ 1..=10_000) => n,
                    _ => {
                        return Err(invalid(format!(
                            "partNumber must be 1 to 10000, got {number:?}"
                        )));
                    }
                };
                MultipartStep::Part {
                    upload_id,
                    part_number,
                }
            }
            (&Method::POST, Some(upload_id)) => MultipartStep::Complete { upload_id },
            (&Method::DELETE, Some(upload_id)) => MultipartStep::Abort { upload_id },
            (&Method::GET, Some(upload_id)) => MultipartStep::ListParts { upload_id },
            _ => return Ok(None),
        }))
    }

    fn not_found(&self, api: Api) -> Route {
        Route::not_found(api, self.method, self.path)
    }

    /// A percent-decoded path segment, or 400 when it is not UTF-8.
    fn decode(&self, api: Api, segment: &str) -> Result<String, Route> {
        decode_path(segment).ok_or_else(|| Route::Invalid {
            api,
            status: 400,
            message: format!("path segment {segment:?} is not UTF-8 after percent-decoding"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_that_is_not_utf8_is_refused_not_stored_as_u_fffd() {
        let uri: Uri = "/upload/storage/v1/b/bkt/o?uploadType=media&name=%FF"
            .parse()
            .unwrap();
        let query = Query::parse(uri.query());
        assert_eq!(query.not_utf8(), Some("name=%FF"));
        let Route::Invalid { status, api, .. } = Route::parse(&Method::POST, &uri, &query) else {
            panic!("routed");
        };
        assert_eq!((status, api), (400, Api::Json));
        // A name that really holds U+FFFD is a name like any other.
        assert_eq!(Query::parse(Some("name=%EF%BF%BD")).not_utf8(), None);
    }

    fn route(method: Method, uri: &str) -> Route {
        let uri: Uri = uri.parse().unwrap();
        let query = Query::parse(uri.query());
        Route::parse(&method, &uri, &query)
    }

    #[test]
    fn routes_cover_the_json_and_xml_apis() {
        assert_eq!(
            route(Method::PUT, "/bkt/spool%2Fa%20b%2Ebin"),
            Route::XmlPut {
                bucket: "bkt".into(),
                name: "spool/a b.bin".into()
            }
        );
        assert_eq!(
            route(Method::GET, "/storage/v1/b/bkt/o/a%2Fb?alt=media"),
            Route::ObjectGet {
                api: Api::Json,
                bucket: "bkt".into(),
                name: "a/b".into(),
                media: true,
                head: false
            }
        );
        assert_eq!(
            route(
                Method::POST,
                "/upload/storage/v1/b/bkt/o?uploadType=multipart"
            ),
            Route::Upload {
                bucket: "bkt".into(),
                kind: UploadKind::Multipart
            }
        );
        assert_eq!(
            route(
                Method::PUT,
                "/upload/storage/v1/b/bkt/o?uploadType=resumable&upload_id=x"
            ),
            Route::ResumableChunk {
                bucket: "bkt".into(),
                upload_id: "x".into()
            }
        );
        // The XML API's multipart upload steps, by their query.
        let step = |method, uri| match route(method, uri) {
            Route::XmlMultipart { step, .. } => step,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            step(Method::POST, "/bkt/a%2Fb?uploads"),
            MultipartStep::Start
        );
        assert_eq!(
            step(Method::PUT, "/bkt/o?partNumber=2&uploadId=u"),
            MultipartStep::Part {
                upload_id: "u".into(),
                part_number: 2
            }
        );
        assert_eq!(
            step(Method::POST, "/bkt/o?uploadId=u"),
            MultipartStep::Complete {
                upload_id: "u".into()
            }
        );
        assert!(matches!(
            route(Method::PUT, "/bkt/o?partNumber=0&uploadId=u"),
            Route::Invalid { status: 400, .. }
        ));
        // gsutil's resumable route opens a session like the usual one.
        assert_eq!(
            route(
                Method::POST,
                "/resumable/upload/storage/v1/b/bkt/o?uploadType=resumable"
            ),
            Route::Upload {
                bucket: "bkt".into(),
                kind: UploadKind::Resumable
            }
        );
        assert_eq!(
            route(Method::GET, "/bkt?list-type=2&prefix=a"),
            Route::ObjectList {
                api: Api::Xml,
                bucket: "bkt".into()
            }
        );
        assert_eq!(route(Method::GET, "/storage/v1/b"), Route::BucketsList);
        assert_eq!(
            route(Method::GET, "/storage/v1/b/bkt"),
            Route::BucketGet {
                bucket: "bkt".into()
            }
        );
        assert!(matches!(
            route(Method::PATCH, "/storage/v1/b/bkt/o/x"),
            Route::Invalid { status: 404, .. }
        ));
        for path in [
            "/storage/v1/projects/p/hmacKeys/ID",
            "/storage/v1/projects/p/unknown",
            "/upload/storage/v1/projects/p",
            "/download/storage/v1",
        ] {
            assert!(
                matches!(
                    route(Method::PUT, path),
                    Route::Invalid { status: 404, api: Api::Json, ref message }
                        if message.contains("the fake serves no PUT")
                ),
                "{path} fell through to the XML API"
            );
        }
        assert!(matches!(
            route(Method::GET, "/"),
            Route::Invalid {
                status: 404,
                api: Api::Xml,
                ..
            }
        ));
        assert!(matches!(
            route(Method::GET, "/bkt/%FF"),
            Route::Invalid { status: 400, .. }
        ));
    }

    #[test]
    fn compose_names_its_destination_and_copy_is_not_served() {
        assert_eq!(
            route(Method::POST, "/storage/v1/b/bkt/o/a%2Fb/compose"),
            Route::Compose {
                bucket: "bkt".into(),
                destination: "a/b".into()
            }
        );
        assert_eq!(
            route(Method::POST, "/storage/v1/b/bkt/o/a%2Fb/compose").object(),
            Some("a/b")
        );
        assert!(matches!(
            route(Method::POST, "/storage/v1/b/bkt/o/a/copyTo/b/bkt/o/c"),
            Route::Invalid { status: 404, .. }
        ));
    }

    #[test]
    fn a_bad_upload_type_or_method_is_refused_in_json() {
        let refused = [
            (Method::POST, "/upload/storage/v1/b/bkt/o?uploadType=x", 400),
            (
                Method::GET,
                "/upload/storage/v1/b/bkt/o?uploadType=media",
                404,
            ),
            (Method::POST, "/download/storage/v1/b/bkt/o/x", 404),
        ];
        for (method, uri, expected) in refused {
            let got = route(method, uri);
            let status = match &got {
                Route::Invalid {
                    api: Api::Json,
                    status,
                    ..
                } => *status,
                _ => 0,
            };
            assert_eq!(status, expected, "{uri}: {got:?}");
        }
    }

    #[test]
    fn a_json_api_path_spelled_with_percent_escapes_is_not_an_xml_object() {
        // Found by the route fuzz target: `/storage/%76%31` routed as the XML object
        // `v1` in bucket `storage`, while the same name encoded as a client encodes
        // it (`/storage/v1`) is the JSON API's 404; `%76` is `v` (RFC 3986: an
        // escaped unreserved character is the character).
        for path in [
            "/storage/%76%31",
            "/%73torage/v1/x",
            "/upload/storage/%76%31",
            "/download/%73torage/v1",
        ] {
            assert!(
                matches!(
                    route(Method::PUT, path),
                    Route::Invalid {
                        status: 404,
                        api: Api::Json,
                        ..
                    }
                ),
                "{path}: {:?}",
                route(Method::PUT, path)
            );
        }
        // An escaped slash is part of a name, not a separator.
        assert_eq!(
            route(Method::PUT, "/storage/v1%2Fb"),
            Route::XmlPut {
                bucket: "storage".into(),
                name: "v1/b".into()
            }
        );
    }

    #[test]
    fn queries_decode_plus_and_percent() {
        let query = Query::parse(Some("name=a%2Fb+c&ifGenerationMatch=0&flag"));
        assert_eq!(query.get("name"), Some("a/b c"));
        assert_eq!(query.get("ifGenerationMatch"), Some("0"));
        assert_eq!(query.get("flag"), Some(""));
        assert_eq!(query.get("other"), None);
    }
}
