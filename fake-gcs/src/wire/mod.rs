//! Cloud Storage's wire protocol for the requests the fake serves, apart from any
//! state: a second server reuses it as it is. Nothing here touches a bucket, a fault
//! or a clock; callers pass state and time in.
//!
//! A server built on it (the fake; a relay that writes uploads into a spool instead
//! of a bucket) serves a request in four steps:
//!
//! 1. [`Route::parse`] the method, path and [`Query`]: which operation, which
//!    bucket and object, which API (JSON or XML) the answer must speak.
//! 2. Parse an upload into one [`Upload`] ([`Upload::media`],
//!    [`Upload::multipart`], [`Upload::xml_put`]; [`Upload::resumable`] opens a
//!    [`Session`] whose requests [`Session::accept`] takes until it is
//!    [`Progress::Complete`]), with its [`Preconditions`] and declared digests.
//! 3. Check [`Upload::digests`], then store the bytes its own way.
//! 4. Answer: [`uploaded`] with the [`ObjectRecord`] stored, or a [`Rejection`]'s
//!    [`reply`](Rejection::reply) in the request's API; [`Reply::into_response`]
//!    makes the HTTP response.
//!
//! | file | what |
//! |---|---|
//! | `route.rs` | [`Route`], [`Api`], [`UploadKind`], [`Query`] |
//! | `meta_route.rs` | [`MetaRoute`]: the JSON API's requests about buckets, ACLs, IAM, notifications, object metadata, copies, HMAC keys |
//! | `operation.rs` | [`Operation`]: the storage-testbench's name for each |
//! | `upload.rs` | [`Upload`]: media, multipart, resumable start, XML `PUT` |
//! | `attributes.rs` | [`ObjectAttributes`]: encoding, cache control, disposition, language, custom metadata |
//! | `compose.rs` | [`Compose`]: the compose request |
//! | `multipart.rs` | `multipart/related` bodies |
//! | `resumable.rs` | `Content-Range`, [`Session`], [`Sessions`], 308 answers |
//! | `object.rs` | [`ObjectRecord`]: JSON resource, XML headers, ETags (composite objects too) |
//! | `bucket.rs` | the JSON bucket resource, its ETag, the fields a client may set |
//! | `list.rs` | list parameters and pages, in JSON and XML |
//! | `log.rs` | a request log line's query (secrets redacted) and refusal message |
//! | `range.rs` | the `Range` header of downloads |
//! | `precondition.rs` | [`Preconditions`] (`ifGenerationMatch`, ...) |
//! | `digest.rs` | [`Digests`] (crc32c, MD5), [`Declared`] digests |
//! | `error.rs` | [`Rejection`], JSON and XML error bodies |
//! | `reply.rs` | [`Reply`]: a response before it is sent |
//! | `encoding.rs` | dates, percent-encoding, XML escaping |

mod attributes;
mod bucket;
mod compose;
mod digest;
mod encoding;
mod error;
mod list;
mod log;
mod meta_route;
mod multipart;
mod object;
mod operation;
mod precondition;
mod range;
mod reply;
mod resumable;
mod route;
mod upload;

pub use attributes::{META_HEADER_PREFIX, ObjectAttributes};
pub use compose::{Compose, ComposeSource, MAX_COMPONENTS, MAX_COMPOSE_SOURCES};
pub use digest::{Declared, Digests, Hashing, Mismatch, crc32c_base64, md5_base64, md5_hex};
pub use error::{Rejection, error_reply};
pub use log::{redacted_query, refusal_message};
pub use meta_route::{AclScope, MetaRoute, Routed, Verb};
pub use multipart::{
    MAX_BOUNDARY_BYTES, MAX_MULTIPART_HEAD_BYTES, MultipartError, MultipartHead, MultipartStream,
    Part, multipart_boundary, parse_multipart,
};
pub use object::{ObjectMeta, ObjectRecord, json_etag, uploaded};
pub use operation::Operation;
pub use precondition::{Conditions, Preconditions};
pub use reply::Reply;
pub use resumable::{
    ChunkRange, ContentRange, Progress, Session, Sessions, answer_308_as_asked, beyond_received,
    incomplete, parse_content_range, started,
};
pub use route::{Api, MultipartStep, Query, Route, UploadKind, ambiguous_path, header};
pub use upload::{DEFAULT_CONTENT_TYPE, KEPT_FIELDS, RequestHead, Upload};

/// The JSON bucket resource and bucket list: the fake serves its buckets with them,
/// and a relay answers `GET /storage/v1/b/{bucket}` for the one bucket it writes to.
pub use bucket::{
    BUCKET_READ_ONLY_FIELDS, bucket_etag, bucket_list, bucket_resource, bucket_resource_with,
    location_type,
};
/// Percent-encoding of names in URLs and its inverse, the download `Range` header
/// and the list parameters: exported for the fuzz targets (fuzz/).
pub use encoding::{decode_path, encode_component};
/// XML text and times as the XML API writes them: a relay answering lists from
/// another store renders them the same way.
pub use encoding::{http_date, rfc3339_millis, xml_escape};
pub(crate) use list::ListPage;
pub use list::{ListQuery, NameGlob, XmlContents, xml_list_page};
pub(crate) use object::etag_matches;
pub use range::resolve_range;
pub(crate) use upload::content_type;
