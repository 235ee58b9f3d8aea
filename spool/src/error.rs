//! Errors a caller can match on: full (back off) versus broken (page someone) versus
//! refused (fix the request), with messages that say what to do.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::entry::InvalidAttributes;
use crate::name::InvalidName;

/// Why [`Spool::open`](crate::Spool::open) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Another process (or another `Spool` in this one) holds the directory's lock.
    #[error(
        "spool directory {dir} is in use: {message}; stop the other process or use another directory"
    )]
    Locked {
        /// The spool directory.
        dir: PathBuf,
        /// Who holds the lock, when known.
        message: String,
    },
    /// A configuration value is out of range.
    #[error("invalid spool configuration: {0}")]
    Config(String),
    /// The directory could not be read or prepared.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Which bound a put ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullReason {
    /// `max_files` entries are stored or being written.
    Files {
        /// The configured bound.
        max_files: u64,
    },
    /// The entry would take the spool over `max_bytes`.
    Bytes {
        /// The configured bound.
        max_bytes: u64,
    },
    /// The file system itself ran out of space (ENOSPC or quota).
    Disk,
}

impl std::fmt::Display for FullReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FullReason::Files { max_files } => write!(f, "{max_files} files (max_files)"),
            FullReason::Bytes { max_bytes } => write!(f, "{max_bytes} bytes (max_bytes)"),
            FullReason::Disk => f.write_str("no space left on the device"),
        }
    }
}

/// Why [`Spool::put`](crate::Spool::put) did not store an entry. Nothing was stored
/// in every case: the caller still owns the bytes.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PutError {
    /// The spool is at a bound. Transient: retry after the drainer has made room.
    #[error("spool is full: {0}")]
    Full(FullReason),
    /// The entry is larger than `max_bytes`, so it can never be stored.
    #[error("entry of {entry_bytes} bytes can never fit a spool of max_bytes {max_bytes}")]
    TooLarge {
        /// Size of the entry file (header, name and payload).
        entry_bytes: u64,
        /// The configured bound.
        max_bytes: u64,
    },
    /// The object name would be refused by Cloud Storage.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// The attributes cannot be stored with the entry.
    #[error(transparent)]
    InvalidAttributes(#[from] InvalidAttributes),
    /// Writing this entry failed (an I/O error on its own file); nothing was stored
    /// and the spool goes on.
    #[error("cannot store the entry {path}: {source}")]
    Io {
        /// The entry's temporary file.
        path: PathBuf,
        /// The error, with its kind (a read-only disk, say); shared, so that the
        /// error stays `Clone`.
        source: Arc<std::io::Error>,
    },
    /// The spool stopped accepting writes after a directory sync failed (the kernel
    /// may have dropped what it held); it is reopening itself from what is on disk
    /// and takes writes again when that succeeds (`spool_broken` goes back to 0).
    #[error("spool stopped accepting writes until it has reopened itself: {reason}")]
    Broken {
        /// The first error, with the directory it concerned.
        reason: Arc<str>,
    },
}

impl PutError {
    /// True when the same put may succeed later without any change by the caller:
    /// the spool is full, one write failed, or the spool is reopening itself.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            PutError::Full(_) | PutError::Io { .. } | PutError::Broken { .. }
        )
    }
}

/// How an object-store write failed, classified once (see
/// [`remote::classify`](crate::remote::classify)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No answer within the configured timeout. Retryable: the object may or may not
    /// have landed, and a create-if-absent retry settles which.
    #[error("object store did not answer within {0:?}")]
    Timeout(Duration),
    /// A failure worth retrying: 408, 429, 5xx, or a connection that failed or broke.
    #[error("object store unavailable{}: {source}", status_suffix(*.status))]
    Unavailable {
        /// The HTTP status, when there was a response.
        status: Option<u16>,
        /// The client's error.
        source: object_store::Error,
    },
    /// The object already exists (412 to a create-if-absent write).
    #[error("object already exists: {source}")]
    AlreadyExists {
        /// The client's error.
        source: object_store::Error,
    },
    /// The store refused the write for good (400, 401, 403, 404, ...). Retrying the
    /// same request cannot help.
    #[error("object store refused the write{}: {source}", status_suffix(*.status))]
    Refused {
        /// The HTTP status, when known.
        status: Option<u16>,
        /// The client's error.
        source: object_store::Error,
    },
    /// The object exists with different contents: another writer used this name.
    #[error("object exists with different contents: {detail}")]
    Conflict {
        /// What differed.
        detail: String,
    },
    /// The object name cannot be written exactly through this client.
    #[error(transparent)]
    InvalidName(InvalidName),
}

fn after_store_error(e: &Option<StoreError>) -> String {
    e.as_ref()
        .map(|e| format!(" after the store failed: {e}"))
        .unwrap_or_default()
}

fn status_suffix(status: Option<u16>) -> String {
    status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
}

impl StoreError {
    /// True when trying the same write again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            StoreError::Timeout(_) | StoreError::Unavailable { .. }
        )
    }

    /// A short, bounded label for metrics: `timeout`, `transport`, the HTTP status
    /// (`503`), `already_exists`, `conflict`, `refused` or `invalid_name`.
    pub fn kind_label(&self) -> String {
        match self {
            StoreError::Timeout(_) => "timeout".into(),
            StoreError::Unavailable {
                status: Some(s), ..
            }
            | StoreError::Refused {
                status: Some(s), ..
            } => s.to_string(),
            StoreError::Unavailable { status: None, .. } => "transport".into(),
            StoreError::Refused { status: None, .. } => "refused".into(),
            StoreError::AlreadyExists { .. } => "already_exists".into(),
            StoreError::Conflict { .. } => "conflict".into(),
            StoreError::InvalidName(_) => "invalid_name".into(),
        }
    }
}

/// Why [`Uploader::upload`](crate::Uploader::upload) did not make the object safe.
/// In every case the caller still owns the bytes; nothing was dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UploadError {
    /// The object name would be refused by Cloud Storage or cannot be expressed by the
    /// client. Nothing was sent.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// The attributes cannot be spooled or sent: an unknown kind, over 8 KiB, or a
    /// value or metadata key an HTTP header cannot carry (non-ASCII, control
    /// characters, an upper-case key). Nothing was sent.
    #[error(transparent)]
    InvalidAttributes(#[from] InvalidAttributes),
    /// The store refused the write for good (not retryable); it was not spooled,
    /// because retrying it later cannot succeed either.
    #[error(transparent)]
    Refused(StoreError),
    /// The store failed with a retryable error and the spool is full: back off and try
    /// again (this is the spool's backpressure).
    #[error(
        "spool is full ({reason}), so the write was refused{}",
        after_store_error(store_error)
    )]
    SpoolFull {
        /// Why the store write failed; `None` in ordered mode, where the write went to
        /// the spool without trying the store.
        store_error: Option<StoreError>,
        /// Which bound was hit.
        reason: FullReason,
    },
    /// The store failed and the spool cannot take the entry for another reason (too
    /// large for it, an I/O error writing it, or reopening itself after a failed
    /// directory sync).
    #[error(
        "the spool could not take the write: {spool_error}{}",
        after_store_error(store_error)
    )]
    NotSpooled {
        /// Why the store write failed; `None` in ordered mode.
        store_error: Option<StoreError>,
        /// Why the spool refused.
        spool_error: PutError,
    },
}

impl UploadError {
    /// True when the same upload may succeed later without any change by the caller:
    /// back off and retry.
    pub fn is_transient(&self) -> bool {
        match self {
            UploadError::SpoolFull { .. } => true,
            UploadError::NotSpooled { spool_error, .. } => spool_error.is_transient(),
            _ => false,
        }
    }
}
