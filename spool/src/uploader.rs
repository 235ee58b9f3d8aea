//! The uploader: the call a service makes instead of writing to the object store.
//!
//! It tries the store once, with a timeout. On a retryable failure it puts the object
//! in the spool, where the drainer picks it up; on a permanent one it returns the
//! error untouched; when the spool cannot take it either, the caller is told
//! (backpressure). An object is never dropped silently: every call ends in
//! [`Outcome::Stored`], [`Outcome::Spooled`] or an error the caller must handle.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::error::{PutError, StoreError, UploadError};
use crate::metrics::{UploadOutcome, WritePath};
use crate::remote::Remote;
use crate::store::Spool;

/// Settings for an [`Uploader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploaderConfig {
    /// How long a direct store write may take before it counts as failed and the
    /// object is spooled. Default 10 s: well above a healthy write, and short enough
    /// that callers are not held for minutes during an outage (the Node.js client's
    /// in-request retries can take up to 600 s).
    pub put_timeout: Duration,
    /// Keep arrival order: while the spool holds anything, new objects go straight to
    /// the spool instead of overtaking it. Default off. Strict order also needs a
    /// drainer with one worker.
    pub ordered: bool,
}

impl Default for UploaderConfig {
    fn default() -> Self {
        Self {
            put_timeout: Duration::from_secs(10),
            ordered: false,
        }
    }
}

/// Where an accepted object went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The store has it.
    Stored,
    /// The spool has it, durably; the drainer will deliver it.
    Spooled {
        /// Its sequence number in the spool.
        seq: u64,
    },
}

/// Writes objects to the store, falling back to the spool.
///
/// ```no_run
/// # async fn demo(spool: spool::Spool, remote: spool::Remote) {
/// use spool::{Outcome, UploadError, Uploader, UploaderConfig};
/// let uploader = Uploader::new(spool, remote, UploaderConfig::default());
/// match uploader.upload("events/1.json", bytes::Bytes::from("{}")).await {
///     Ok(Outcome::Stored | Outcome::Spooled { .. }) => {} // safe
///     Err(e) if e.is_transient() => {} // spool full: slow down and retry
///     Err(e) => eprintln!("upload failed for good: {e}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Uploader {
    spool: Spool,
    remote: Remote,
    config: UploaderConfig,
}

impl Uploader {
    /// An uploader writing to `remote` and spooling to `spool`.
    pub fn new(spool: Spool, remote: Remote, config: UploaderConfig) -> Self {
        Self {
            spool,
            remote,
            config,
        }
    }

    /// Makes `payload` safe under the object name `name`: in the store, or durably in
    /// the spool.
    pub async fn upload(&self, name: &str, payload: Bytes) -> Result<Outcome, UploadError> {
        let result = self.try_upload(name, payload).await;
        let outcome = match &result {
            Ok(Outcome::Stored) => UploadOutcome::Stored,
            Ok(Outcome::Spooled { .. }) => UploadOutcome::Spooled,
            Err(UploadError::SpoolFull { .. })
            | Err(UploadError::NotSpooled {
                spool_error: PutError::TooLarge { .. },
                ..
            }) => UploadOutcome::Rejected,
            Err(_) => UploadOutcome::Failed,
        };
        self.spool.metrics().upload(outcome);
        result
    }

    async fn try_upload(&self, name: &str, payload: Bytes) -> Result<Outcome, UploadError> {
        self.remote.check_name(name)?;
        if self.config.ordered && !self.spool.is_empty() {
            return self.spool_it(name, payload, None).await;
        }
        let metrics = self.spool.metrics();
        let started = Instant::now();
        let result = self
            .remote
            .put_if_absent(name, payload.clone(), self.config.put_timeout)
            .await;
        metrics
            .upload_direct_seconds
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(()) => Ok(Outcome::Stored),
            Err(e) => {
                metrics.store_error(WritePath::Direct, e.kind_label());
                if e.is_retryable() {
                    tracing::debug!(%name, error = %e, "store write failed; spooling");
                    self.spool_it(name, payload, Some(e)).await
                } else {
                    Err(UploadError::Refused(e))
                }
            }
        }
    }

    async fn spool_it(
        &self,
        name: &str,
        payload: Bytes,
        store_error: Option<StoreError>,
    ) -> Result<Outcome, UploadError> {
        let started = Instant::now();
        let result = self.spool.put(name, payload).await;
        self.spool
            .metrics()
            .spool_put_seconds
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(receipt) => Ok(Outcome::Spooled { seq: receipt.seq }),
            Err(PutError::Full(reason)) => Err(UploadError::SpoolFull {
                store_error,
                reason,
            }),
            Err(PutError::InvalidName(e)) => Err(UploadError::InvalidName(e)),
            Err(spool_error) => Err(UploadError::NotSpooled {
                store_error,
                spool_error,
            }),
        }
    }
}
