//! What the relay answers, in Cloud Storage's shapes (built with `fake_gcs::wire`):
//! the object resource (JSON API) or object headers (XML API) of an upload, built
//! from what was written, with [`OUTCOME_HEADER`]; and each refusal of the uploader
//! with the status a client treats the right way.
//!
//! | uploader result | status |
//! |---|---|
//! | `Stored`, `Spooled` | 200, `x-spool-outcome: stored` or `spooled` |
//! | invalid name or attributes | 400 |
//! | refused by the upstream (401, 403, 404, other 4xx) | the same status |
//! | the name holds other bytes (conflict, already exists) | 412 |
//! | spool full, or not taking writes now (I/O error, reopening) | 503 with `Retry-After` |
//! | larger than the spool can ever hold | 413 |
//!
//! The answer's generation and times are the relay's (its clock), not the
//! upstream's: a spooled object has none yet.

use std::time::Duration;

use fake_gcs::wire::{
    self, Api, DEFAULT_CONTENT_TYPE, Digests, ObjectAttributes, ObjectRecord, Reply, Upload,
    error_reply,
};
use object_store::{Attribute, AttributeValue, Attributes};
use spool::{Outcome, PutError, StoreError, UploadError};

/// The response header that says where an acknowledged upload is: `stored` (the
/// upstream has it) or `spooled` (the spool holds it durably; the drainer delivers
/// it).
pub const OUTCOME_HEADER: &str = "x-spool-outcome";
/// The response header every answer of the relay carries: the request's id, which
/// every line the relay logged while serving it carries too (`request{id=N}`).
pub const REQUEST_ID_HEADER: &str = "x-spool-request-id";
/// [`OUTCOME_HEADER`]'s value when the upstream stored the object.
pub const OUTCOME_STORED: &str = "stored";
/// [`OUTCOME_HEADER`]'s value when the spool holds the object.
pub const OUTCOME_SPOOLED: &str = "spooled";

/// `upload`'s content type and attributes as `object_store` writes them (the
/// default content type is left out: the upstream client sends it anyway).
pub(crate) fn attributes(upload: &Upload) -> Attributes {
    let mut out = Attributes::new();
    if upload.content_type != DEFAULT_CONTENT_TYPE {
        out.insert(Attribute::ContentType, value(&upload.content_type));
    }
    let given = &upload.attributes;
    let single = [
        (Attribute::ContentEncoding, &given.content_encoding),
        (Attribute::CacheControl, &given.cache_control),
        (Attribute::ContentDisposition, &given.content_disposition),
        (Attribute::ContentLanguage, &given.content_language),
    ];
    for (attribute, given) in single {
        if let Some(given) = given {
            out.insert(attribute, value(given));
        }
    }
    for (key, given) in &given.metadata {
        out.insert(Attribute::Metadata(key.clone().into()), value(given));
    }
    out
}

/// `object_store`'s attributes as Cloud Storage keeps them: the content type apart,
/// the rest (custom metadata included) in [`ObjectAttributes`]. The inverse of
/// [`attributes`]: how an object read back from a spool entry is described.
pub fn object_attributes(attributes: &Attributes) -> (Option<String>, ObjectAttributes) {
    let mut content_type = None;
    let mut out = ObjectAttributes::default();
    for (key, value) in attributes {
        let value = value.to_string();
        match key {
            Attribute::ContentType => content_type = Some(value),
            Attribute::ContentEncoding => out.content_encoding = Some(value),
            Attribute::CacheControl => out.cache_control = Some(value),
            Attribute::ContentDisposition => out.content_disposition = Some(value),
            Attribute::ContentLanguage => out.content_language = Some(value),
            Attribute::Metadata(k) => {
                out.metadata.insert(k.to_string(), value);
            }
            // Storage class and anything newer: not part of an object's identity.
            _ => {}
        }
    }
    (content_type, out)
}

fn value(text: &str) -> AttributeValue {
    AttributeValue::from(text.to_string())
}

/// The object `upload` wrote, as the answer describes it.
pub(crate) fn record(
    upload: &Upload,
    size: u64,
    digests: Digests,
    generation: i64,
    now_ms: u64,
) -> ObjectRecord {
    ObjectRecord {
        name: upload.name.clone(),
        generation,
        size,
        crc32c: digests.crc32c,
        md5: digests.md5,
        created_unix_ms: now_ms,
        content_type: upload.content_type.clone(),
        attributes: upload.attributes.clone().boxed(),
        component_count: None,
    }
}

/// 200 for an upload the uploader made safe: Cloud Storage's answer for `record`,
/// and where it is in [`OUTCOME_HEADER`].
pub(crate) fn uploaded(
    api: Api,
    base: &str,
    bucket: &str,
    record: &ObjectRecord,
    outcome: Outcome,
) -> Reply {
    let where_ = match outcome {
        Outcome::Stored => OUTCOME_STORED,
        Outcome::Spooled { .. } => OUTCOME_SPOOLED,
    };
    written(api, base, bucket, record).header(OUTCOME_HEADER, where_)
}

/// Cloud Storage's answer to an upload of `record` as the relay gives it: the
/// XML API's headers, or the JSON resource ([`resource`]).
pub(crate) fn written(api: Api, base: &str, bucket: &str, record: &ObjectRecord) -> Reply {
    match api {
        Api::Json => Reply::json(200, &resource(base, bucket, record)),
        Api::Xml => wire::uploaded(api, base, bucket, record),
    }
}

/// The JSON resource of an object the relay describes itself (an upload's answer,
/// a spooled object's metadata, its entry in a merged list). Its `mediaLink` names
/// no generation: the relay's is not the bucket's, and a client that follows the
/// link once the object is delivered must read the live object, not 404.
pub(crate) fn resource(base: &str, bucket: &str, record: &ObjectRecord) -> serde_json::Value {
    let mut resource = record.json_resource(base, bucket);
    let media_link = format!(
        "{base}/download/storage/v1/b/{}/o/{}?alt=media",
        wire::encode_component(bucket),
        wire::encode_component(&record.name)
    );
    resource["mediaLink"] = serde_json::Value::String(media_link);
    resource
}

/// The answer to an upload the uploader did not make safe (see the module's table).
pub(crate) fn refused(api: Api, error: &UploadError, retry_after: Duration) -> Reply {
    let message = client_message(error);
    match status_of(error) {
        Status::Permanent(status) => error_reply(api, status, Some(&message)),
        Status::RetryLater => error_reply(api, 503, Some(&message))
            .header("retry-after", retry_after_seconds(retry_after).to_string()),
    }
}

/// What the client is told of a refusal: the error's own words, except where they
/// name the spool's files (a local path is the operator's business, not the
/// client's): those go to the log, and the client gets what to do.
fn client_message(error: &UploadError) -> String {
    let local = match error {
        UploadError::NotSpooled {
            spool_error: PutError::Io { source, .. },
            ..
        } => {
            tracing::warn!(target: "spool_relay", error = %error, "upload not made safe");
            return format!(
                "The relay could not write the object to its spool now ({}; its log says \
                 where, under this answer's x-spool-request-id); retry the request.",
                disk_trouble(source)
            );
        }
        UploadError::NotSpooled {
            spool_error: PutError::Broken { .. },
            ..
        } => {
            "The relay's spool stopped taking writes after a failed directory sync and is \
              reopening itself (its log says why); retry the request."
        }
        UploadError::Refused(StoreError::Conflict { .. } | StoreError::AlreadyExists { .. }) => {
            // The detail (the stored object's size, its MD5) describes an object the
            // writer may not be allowed to read: the operator's log only.
            tracing::info!(target: "spool_relay", error = %error, "upload refused: the name holds another object");
            return "An object of this name already exists with other contents, and the \
                    upload asked to create it only if absent (ifGenerationMatch=0)."
                .to_string();
        }
        UploadError::Refused(StoreError::Refused { status, .. }) => {
            // The client's text names the upstream's URL: the operator's, not the
            // client's business.
            tracing::warn!(target: "spool_relay", error = %error, "upstream refused an upload");
            return match status {
                Some(status) => format!("The upstream store refused the write (HTTP {status})."),
                None => "The upstream store refused the write.".to_string(),
            };
        }
        UploadError::Refused(StoreError::InvalidName(e)) => return e.to_string(),
        UploadError::Refused(_) => {
            tracing::warn!(target: "spool_relay", error = %error, "upstream refused an upload");
            return format!("The upstream store refused the write. {SEE_THE_LOG}");
        }
        UploadError::SpoolFull { reason, .. } => {
            // The store's error names the upstream's URL and the client's internals:
            // the log has it.
            tracing::info!(target: "spool_relay", error = %error, "upload refused: the spool is full");
            return format!(
                "The upstream did not take the write now and the relay's spool is full \
                 ({}); retry the request later.",
                full_reason(reason)
            );
        }
        UploadError::NotSpooled {
            spool_error:
                PutError::TooLarge {
                    entry_bytes,
                    max_bytes,
                },
            ..
        } => {
            return format!(
                "The object takes {entry_bytes} bytes in the relay's spool, which holds at \
                 most {max_bytes} (--max-bytes): the relay can never keep it while the \
                 upstream is failing. Write it to Cloud Storage directly."
            );
        }
        UploadError::InvalidName(_) | UploadError::InvalidAttributes(_) => {
            return error.to_string();
        }
        UploadError::NotSpooled { spool_error, .. } => {
            tracing::warn!(target: "spool_relay", error = %error, "upload not made safe");
            return format!("The relay's spool could not take the write ({spool_error}).");
        }
        // A kind added to the library later: its words, which carry no store error.
        other => {
            tracing::warn!(target: "spool_relay", error = %other, "upload not made safe");
            return format!("The relay could not make the upload safe. {SEE_THE_LOG}");
        }
    };
    tracing::warn!(target: "spool_relay", error = %error, "upload not made safe");
    local.to_string()
}

/// Where a client is sent for what its answer leaves out.
pub(crate) const SEE_THE_LOG: &str =
    "The relay's log has the details, under this answer's x-spool-request-id.";

/// A full spool's bound, in the relay's flags.
fn full_reason(reason: &spool::FullReason) -> String {
    match reason {
        spool::FullReason::Files { max_files } => format!("{max_files} entries, --max-files"),
        spool::FullReason::Bytes { max_bytes } => format!("{max_bytes} bytes, --max-bytes"),
        spool::FullReason::Disk => "its disk is full".to_string(),
    }
}

/// How the client should take a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Do not retry this request as it is: this status.
    Permanent(u16),
    /// 503 with `Retry-After`.
    RetryLater,
}

fn status_of(error: &UploadError) -> Status {
    match error {
        UploadError::InvalidName(_) | UploadError::InvalidAttributes(_) => Status::Permanent(400),
        UploadError::Refused(store) => store_status(store),
        UploadError::NotSpooled {
            spool_error: PutError::TooLarge { .. },
            ..
        } => Status::Permanent(413),
        e if e.is_transient() => Status::RetryLater,
        UploadError::NotSpooled { .. } => Status::Permanent(400),
        _ => Status::Permanent(500),
    }
}

/// The status of a write the upstream refused for good.
fn store_status(error: &StoreError) -> Status {
    match error {
        StoreError::Refused {
            status: Some(status),
            ..
        } if (400..500).contains(status) => Status::Permanent(*status),
        StoreError::Refused { .. } | StoreError::InvalidName(_) => Status::Permanent(400),
        StoreError::Conflict { .. } | StoreError::AlreadyExists { .. } => Status::Permanent(412),
        e if e.is_retryable() => Status::RetryLater,
        _ => Status::Permanent(500),
    }
}

/// What a person can act on in a disk error the relay met: a full disk is named as
/// such (the caller's retry will work once the spool drains), a read-only one too,
/// anything else as an I/O error of the relay's.
pub(crate) fn disk_trouble(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => "its disk is full",
        std::io::ErrorKind::ReadOnlyFilesystem => "its disk is read-only",
        _ => "an I/O error on its disk",
    }
}

/// `Retry-After` in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after_seconds(retry_after: Duration) -> u64 {
    let whole = retry_after.as_secs();
    let rounded = if retry_after.subsec_nanos() > 0 {
        whole + 1
    } else {
        whole
    };
    rounded.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spool::FullReason;

    #[test]
    fn a_full_spool_is_503_with_retry_after_in_whole_seconds() {
        let full = UploadError::SpoolFull {
            store_error: None,
            reason: FullReason::Files { max_files: 1 },
        };
        let reply = refused(Api::Json, &full, Duration::from_millis(1500));
        assert_eq!(reply.status, 503);
        assert!(
            reply
                .headers
                .contains(&("retry-after".into(), "2".to_string()))
        );
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(3)), 3);
    }

    #[test]
    fn a_full_or_read_only_disk_is_named_as_such() {
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        assert_eq!(disk_trouble(&full), "its disk is full");
        let quota = std::io::Error::from(std::io::ErrorKind::QuotaExceeded);
        assert_eq!(disk_trouble(&quota), "its disk is full");
        let read_only = std::io::Error::from(std::io::ErrorKind::ReadOnlyFilesystem);
        assert_eq!(disk_trouble(&read_only), "its disk is read-only");
        assert_eq!(
            disk_trouble(&std::io::Error::other("x")),
            "an I/O error on its disk"
        );
    }

    #[test]
    fn a_conflict_does_not_tell_the_writer_what_the_bucket_holds() {
        // Found by review (M3): the 412's message carried the stored object's size
        // and MD5, which the writer may not be allowed to read.
        let conflict = UploadError::Refused(StoreError::Conflict {
            detail: "stored object has MD5 0123456789abcdef0123456789abcdef, spooled entry has x"
                .into(),
        });
        let reply = refused(Api::Json, &conflict, Duration::from_secs(1));
        let body = String::from_utf8_lossy(&reply.body);
        assert_eq!(reply.status, 412);
        assert!(
            !body.contains("0123456789abcdef") && !body.contains("MD5"),
            "{body}"
        );
        assert!(body.contains("already exists"), "{body}");
    }

    #[test]
    fn refusals_keep_their_meaning() {
        let conflict = UploadError::Refused(StoreError::Conflict {
            detail: "other bytes".into(),
        });
        assert_eq!(status_of(&conflict), Status::Permanent(412));
        let too_large = UploadError::NotSpooled {
            store_error: None,
            spool_error: PutError::TooLarge {
                entry_bytes: 10,
                max_bytes: 5,
            },
        };
        assert_eq!(status_of(&too_large), Status::Permanent(413));
        let reply = refused(Api::Xml, &conflict, Duration::from_secs(1));
        assert_eq!(reply.status, 412);
        assert!(
            std::str::from_utf8(&reply.body)
                .unwrap()
                .contains("<Error>")
        );
    }
}
