//! Object-store access: writes with a timeout, create-if-absent or overwriting
//! ([`WriteMode`]), the proof that an existing object is ours, and the one place
//! where a client error becomes a retry decision.
//!
//! Any `object_store` backend works; with Cloud Storage, `PutMode::Create` sends
//! `x-goog-if-generation-match: 0`, so a retry of a write that already landed gets
//! 412 instead of writing twice. The client's own retries must be off
//! (`ClientOptions`/`with_retry(RetryConfig { max_retries: 0, ..Default::default() })`):
//! the spool does the retrying, with its own clock and RNG, and object_store's
//! backoff draws from an unseedable RNG and real time.
//!
//! Names: [`Remote::path`] is the only place an object name becomes a store path,
//! and the path it checks is the path every write, head and read uses. A name the
//! client would rewrite (`object_store`'s `Path::from` percent-encodes `%`, `#`, non-
//! ASCII and more, and drops empty segments) is refused before anything is sent.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use md5::{Digest, Md5};
use object_store::path::Path;
use object_store::{Attributes, GetOptions, ObjectStore, ObjectStoreExt, PutOptions, PutPayload};

use crate::error::StoreError;
use crate::name::InvalidName;
use crate::write_mode::WriteMode;

mod streamed;

pub use streamed::{PayloadFile, STAGING_PREFIX, StreamError, staging_key};

/// The object store the spool writes to. Objects up to a caller's threshold go in
/// one request ([`Remote::put_if_absent`]); larger ones stream from a file on the
/// spool's disk with memory bounded by one part ([`Remote::put_streamed_if_absent`],
/// `streamed.rs`).
#[derive(Debug, Clone)]
pub struct Remote {
    store: Arc<dyn ObjectStore>,
}

/// What is known of an object that was there when a create-if-absent write was
/// answered "already exists".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// Proven to hold the bytes we hold: same size and MD5 (when the ETag is one), or
    /// the same bytes read back.
    Matches,
    /// The store does not have the object (it was deleted after the 412).
    Missing,
    /// Proven different: another writer used this name.
    Differs(String),
    /// Neither proven the same nor different (the ETag is not an MD5 and the object
    /// cannot be read): never counted as delivered.
    Unverifiable(String),
}

impl Remote {
    /// Wraps an object store. Turn its client retries off first (`RetryConfig {
    /// max_retries: 0, .. }`).
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Self { store }
    }

    /// The wrapped store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The store path for the object name `name`, exactly as given, or why the
    /// client cannot express it: Cloud Storage's naming rules, then `object_store`'s
    /// (no empty segments, no leading or trailing `/`, no `.`/`..` segments, no
    /// control characters).
    pub fn path(&self, name: &str) -> Result<Path, InvalidName> {
        crate::name::check_writable(name)
    }

    /// Writes `payload` with `attributes` as `name` only if no object of that name
    /// exists, giving up after `timeout`.
    pub async fn put_if_absent(
        &self,
        name: &str,
        payload: Bytes,
        attributes: &Attributes,
        timeout: Duration,
    ) -> Result<(), StoreError> {
        let path = self.path(name).map_err(StoreError::InvalidName)?;
        self.put_if_absent_at(&path, payload, attributes, timeout)
            .await
    }

    /// [`Remote::put_if_absent`] to a path from [`Remote::path`].
    pub async fn put_if_absent_at(
        &self,
        path: &Path,
        payload: Bytes,
        attributes: &Attributes,
        timeout: Duration,
    ) -> Result<(), StoreError> {
        (self.put_at(
            path,
            payload,
            attributes,
            WriteMode::CreateIfAbsent,
            timeout,
        ))
        .await
    }

    /// Writes `payload` with `attributes` at `path` (from [`Remote::path`]) in
    /// `mode`, giving up after `timeout`. Only a create-if-absent write can be
    /// answered [`StoreError::AlreadyExists`].
    pub async fn put_at(
        &self,
        path: &Path,
        payload: Bytes,
        attributes: &Attributes,
        mode: WriteMode,
        timeout: Duration,
    ) -> Result<(), StoreError> {
        let options = PutOptions {
            mode: mode.put_mode(),
            attributes: attributes.clone(),
            ..PutOptions::default()
        };
        let put = self
            .store
            .put_opts(path, PutPayload::from_bytes(payload), options);
        match tokio::time::timeout(timeout, put).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(classify(e)),
            Err(_) => Err(StoreError::Timeout(timeout)),
        }
    }

    /// After a create-if-absent write was answered "already exists": is the object
    /// there the one we hold? Proof, in order: a different size; the MD5 when the
    /// ETag is one (Cloud Storage's ETag for objects written in one request without
    /// customer keys); otherwise the object's bytes, read back and compared. An
    /// object whose ETag is not an MD5 and that cannot be read is
    /// [`Existing::Unverifiable`], never a match.
    pub async fn check_existing(
        &self,
        name: &str,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<Existing, StoreError> {
        let path = self.path(name).map_err(StoreError::InvalidName)?;
        let head = tokio::time::timeout(timeout, self.store.head(&path)).await;
        let meta = match head {
            Err(_) => return Err(StoreError::Timeout(timeout)),
            Ok(Err(object_store::Error::NotFound { .. })) => return Ok(Existing::Missing),
            Ok(Err(e)) => match classify(e) {
                e if e.is_retryable() => return Err(e),
                // HEAD refused (a create-only account): reading may still be allowed.
                _ => return self.compare_bytes(&path, payload, timeout).await,
            },
            Ok(Ok(meta)) => meta,
        };
        if meta.size != payload.len() as u64 {
            return Ok(Existing::Differs(format!(
                "stored object is {} bytes, spooled entry is {}",
                meta.size,
                payload.len()
            )));
        }
        match meta.e_tag.as_deref().and_then(md5_etag) {
            Some(stored_md5) => {
                let ours = hex(&Md5::digest(payload));
                Ok(if stored_md5 == ours {
                    Existing::Matches
                } else {
                    Existing::Differs(format!(
                        "stored object has MD5 {stored_md5}, spooled entry has {ours}"
                    ))
                })
            }
            None => self.compare_bytes(&path, payload, timeout).await,
        }
    }

    /// Reads the object back and compares it with `payload`.
    async fn compare_bytes(
        &self,
        path: &Path,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<Existing, StoreError> {
        let read = async {
            let result = self.store.get_opts(path, GetOptions::default()).await?;
            result.bytes().await
        };
        match tokio::time::timeout(timeout, read).await {
            Err(_) => Err(StoreError::Timeout(timeout)),
            Ok(Err(object_store::Error::NotFound { .. })) => Ok(Existing::Missing),
            Ok(Err(e)) => match classify(e) {
                e if e.is_retryable() => Err(e),
                e => Ok(Existing::Unverifiable(format!(
                    "its ETag is not an MD5 and it cannot be read back: {e}"
                ))),
            },
            Ok(Ok(stored)) if stored[..] == payload[..] => Ok(Existing::Matches),
            Ok(Ok(stored)) => Ok(Existing::Differs(format!(
                "stored object ({} bytes) has other bytes than the spooled entry ({} bytes)",
                stored.len(),
                payload.len()
            ))),
        }
    }
}

/// An ETag that is a plain MD5 (32 hex digits, optionally quoted), lower-cased.
fn md5_etag(etag: &str) -> Option<String> {
    let bare = etag.trim_matches('"');
    (bare.len() == 32 && bare.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| bare.to_ascii_lowercase())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .map(char::from)
        .collect()
}

/// Classifies an `object_store` error: the only place the spool decides what is
/// retryable.
///
/// - 412 to a create (`AlreadyExists`/`Precondition`) and 409: already exists.
/// - 401, 403, 404 and other typed refusals: refused.
/// - Transport failures (connect, request, timeout, interrupted, decode): retryable.
/// - HTTP 408, 429 and 5xx: retryable; other 4xx: refused.
/// - Anything unrecognised: retryable. Misjudging a permanent error as transient
///   costs retries and shows in `spool_oldest_age_seconds`; the reverse would
///   dead-letter good writes during an outage. Both keep the bytes.
pub fn classify(error: object_store::Error) -> StoreError {
    use object_store::Error as E;
    match error {
        E::AlreadyExists { .. } | E::Precondition { .. } => {
            StoreError::AlreadyExists { source: error }
        }
        E::NotFound { .. } => StoreError::Refused {
            status: Some(404),
            source: error,
        },
        E::PermissionDenied { .. } => StoreError::Refused {
            status: Some(403),
            source: error,
        },
        E::Unauthenticated { .. } => StoreError::Refused {
            status: Some(401),
            source: error,
        },
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented { .. } => {
            StoreError::Refused {
                status: None,
                source: error,
            }
        }
        _ => match http_status(&error) {
            Some(status) if retryable_status(status) => StoreError::Unavailable {
                status: Some(status),
                source: error,
            },
            Some(status) => StoreError::Refused {
                status: Some(status),
                source: error,
            },
            None => StoreError::Unavailable {
                status: None,
                source: error,
            },
        },
    }
}

/// Cloud Storage's retry guidance: 408, 429 and every 5xx.
pub fn retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..600).contains(&status)
}

/// The HTTP status behind an `object_store` error, if there was a response.
///
/// `object_store` keeps its request error type private; its message is stable
/// ("Server returned non-2xx status code: 503 Service Unavailable: ...") and the tests
/// pin it against errors produced by the real client.
fn http_status(error: &object_store::Error) -> Option<u16> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        let text = e.to_string();
        if let Some(at) = text.find("status code: ") {
            let digits = &text[at + "status code: ".len()..];
            if let Some(status) = digits.get(..3).and_then(|d| d.parse().ok()) {
                return Some(status);
            }
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::client::{
        HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    };
    use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
    use object_store::{ClientOptions, StaticCredentialProvider};

    /// An HTTP client that answers every request with one canned outcome, so the
    /// classification is tested against errors the real GCS client builds.
    #[derive(Debug, Clone)]
    enum Canned {
        Status(u16, &'static [(&'static str, &'static str)]),
        Fail(HttpErrorKind),
        Hang,
    }

    #[async_trait::async_trait]
    impl HttpService for Canned {
        async fn call(&self, _req: HttpRequest) -> Result<HttpResponse, HttpError> {
            match self {
                Canned::Status(status, headers) => {
                    let mut resp = http::Response::builder().status(*status);
                    for (k, v) in *headers {
                        resp = resp.header(*k, *v);
                    }
                    let body = Bytes::from_static(b"<Error><Code>X</Code></Error>");
                    Ok(resp.body(body.into()).unwrap())
                }
                Canned::Fail(kind) => Err(HttpError::new(
                    *kind,
                    std::io::Error::other("canned failure"),
                )),
                Canned::Hang => std::future::pending().await,
            }
        }
    }

    impl HttpConnector for Canned {
        fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
            Ok(HttpClient::new(self.clone()))
        }
    }

    fn gcs(canned: Canned) -> Remote {
        let store = GoogleCloudStorageBuilder::new()
            .with_bucket_name("bkt")
            .with_base_url("http://fake")
            .with_credentials(Arc::new(StaticCredentialProvider::new(GcpCredential {
                bearer: String::new(),
            })))
            .with_retry(object_store::RetryConfig {
                max_retries: 0,
                ..Default::default()
            })
            .with_http_connector(canned)
            .build()
            .unwrap();
        Remote::new(Arc::new(store))
    }

    async fn put_error(canned: Canned) -> StoreError {
        gcs(canned)
            .put_if_absent(
                "a",
                Bytes::from_static(b"x"),
                &Attributes::new(),
                Duration::from_secs(5),
            )
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn statuses_from_the_real_gcs_client_are_classified() {
        for (status, retryable, label) in [
            (503, true, "503"),
            (500, true, "500"),
            (502, true, "502"),
            (429, true, "429"),
            (408, true, "408"),
            (400, false, "400"),
            (403, false, "403"),
            (401, false, "401"),
            (404, false, "404"),
            (412, false, "already_exists"),
            (409, false, "already_exists"),
        ] {
            let err = put_error(Canned::Status(status, &[])).await;
            assert_eq!(err.is_retryable(), retryable, "{status}: {err}");
            assert_eq!(err.kind_label(), label, "{status}: {err}");
        }
    }

    #[tokio::test]
    async fn transport_failures_are_retryable() {
        for kind in [
            HttpErrorKind::Connect,
            HttpErrorKind::Request,
            HttpErrorKind::Timeout,
            HttpErrorKind::Interrupted,
            HttpErrorKind::Decode,
            HttpErrorKind::Unknown,
        ] {
            let err = put_error(Canned::Fail(kind)).await;
            assert!(err.is_retryable(), "{kind:?}: {err}");
            assert_eq!(err.kind_label(), "transport", "{kind:?}: {err}");
        }
    }

    #[tokio::test]
    async fn a_success_without_an_etag_is_retryable_not_lost() {
        // object_store rejects a 2xx without ETag; the write may have landed, and a
        // create-if-absent retry settles it.
        let err = put_error(Canned::Status(200, &[])).await;
        assert!(err.is_retryable(), "{err}");
    }

    #[tokio::test]
    async fn success_with_an_etag_is_ok() {
        let remote = gcs(Canned::Status(200, &[("etag", "\"abc\"")]));
        remote
            .put_if_absent(
                "a",
                Bytes::from_static(b"x"),
                &Attributes::new(),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_never_answers_times_out() {
        let err = put_error(Canned::Hang).await;
        assert!(
            matches!(err, StoreError::Timeout(d) if d == Duration::from_secs(5)),
            "{err}"
        );
        assert!(err.is_retryable());
    }

    #[tokio::test]
    async fn existing_objects_are_compared_by_size_and_md5() {
        let store = Arc::new(object_store::memory::InMemory::new());
        let remote = Remote::new(store.clone());
        let t = Duration::from_secs(5);
        assert_eq!(
            remote.check_existing("a", b"abc", t).await.unwrap(),
            Existing::Missing
        );
        remote
            .put_if_absent("a", Bytes::from_static(b"abc"), &Attributes::new(), t)
            .await
            .unwrap();
        assert_eq!(
            remote.check_existing("a", b"abc", t).await.unwrap(),
            Existing::Matches
        );
        assert!(matches!(
            remote.check_existing("a", b"abcd", t).await.unwrap(),
            Existing::Differs(d) if d.contains("3 bytes")
        ));
        let again = remote
            .put_if_absent("a", Bytes::from_static(b"abc"), &Attributes::new(), t)
            .await
            .unwrap_err();
        assert!(matches!(again, StoreError::AlreadyExists { .. }), "{again}");
    }

    #[tokio::test]
    async fn without_an_md5_etag_the_bytes_are_read_back_and_compared() {
        // InMemory's ETags are counters, like Cloud Storage's composite objects'.
        let store = Arc::new(object_store::memory::InMemory::new());
        let remote = Remote::new(store.clone());
        let t = Duration::from_secs(5);
        remote
            .put_if_absent("a", Bytes::from_static(b"xyz"), &Attributes::new(), t)
            .await
            .unwrap();
        // Same size, other bytes: someone else's object, not ours.
        assert!(matches!(
            remote.check_existing("a", b"abc", t).await.unwrap(),
            Existing::Differs(d) if d.contains("other bytes")
        ));
        assert_eq!(
            remote.check_existing("a", b"xyz", t).await.unwrap(),
            Existing::Matches
        );
    }

    #[test]
    fn md5_etags_are_recognised_and_others_ignored() {
        assert_eq!(
            md5_etag("\"5D41402ABC4B2A76B9719D911017C592\"").as_deref(),
            Some("5d41402abc4b2a76b9719d911017c592")
        );
        assert_eq!(md5_etag("CKih16GjycICEAE="), None);
        assert_eq!(md5_etag("\"1\""), None);
    }

    #[test]
    fn names_the_client_would_rewrite_are_refused_and_the_rest_kept_exactly() {
        let remote = Remote::new(Arc::new(object_store::memory::InMemory::new()));
        for good in [
            "a/b c.bin",
            "logs/100%.json",
            "ünï/cødé ☃",
            "a#b?c*[d]{e}^|<>\"~`",
        ] {
            assert_eq!(remote.path(good).unwrap().as_ref(), good);
        }
        for bad in ["/a", "a/", "a//b", "a/./b", "a\u{1}b"] {
            assert!(
                matches!(remote.path(bad), Err(InvalidName::Unrepresentable { .. })),
                "{bad:?} accepted"
            );
        }
        assert_eq!(remote.path(""), Err(InvalidName::Empty));
    }
}
