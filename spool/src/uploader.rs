//! The uploader: the call a service makes instead of writing to the object store.
//!
//! It tries the store once, with a timeout. On a retryable failure it puts the object
//! in the spool, where the drainer picks it up; on a permanent one it returns the
//! error untouched; when the spool cannot take it either, the caller is told
//! (backpressure). An object is never dropped silently: every call ends in
//! [`Outcome::Stored`], [`Outcome::Spooled`] or an error the caller must handle.

use std::time::Duration;

use bytes::Bytes;
use object_store::Attributes;
use tokio::time::Instant;

use crate::error::{PutError, StoreError, UploadError};
use crate::metrics::{UploadOutcome, WritePath};
use crate::remote::{Existing, Remote};
use crate::spool::{Spool, Staged};
use crate::write_mode::WriteMode;

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
    /// A streamed object ([`Uploader::upload_staged`]) up to this size is read back
    /// whole and tried in one request; a larger one streams from its temp file in
    /// parts of `part_bytes`, to a staging name copied create-if-absent
    /// (`remote/streamed.rs`), for at most `put_timeout` plus its size at
    /// `min_bytes_per_second`, and is spooled if that fails. Default 8 MiB.
    /// (`upload_with` always writes in one request: its caller holds the bytes.)
    pub direct_max_bytes: u64,
    /// The part a larger streamed object is sent in, and all the write holds of it
    /// in memory. Default 8 MiB.
    pub part_bytes: u64,
    /// The slowest rate a larger streamed object's write is allowed, in bytes per
    /// second (see `direct_max_bytes`). Default 1 MiB/s. At least 1.
    pub min_bytes_per_second: u64,
}

impl Default for UploaderConfig {
    fn default() -> Self {
        Self {
            put_timeout: Duration::from_secs(10),
            ordered: false,
            direct_max_bytes: 8 << 20,
            part_bytes: 8 << 20,
            min_bytes_per_second: 1 << 20,
        }
    }
}

/// What a direct write decided.
enum Direct {
    /// The store has the object (written now, or proven there already).
    Stored,
    /// Retryable: the object goes to the spool.
    Spool(StoreError),
    /// Refused for good.
    Refused(StoreError),
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

    /// The spool objects go to when the store fails them.
    pub fn spool(&self) -> &Spool {
        &self.spool
    }

    /// The settings.
    pub fn config(&self) -> &UploaderConfig {
        &self.config
    }

    /// Makes `payload` safe under the object name `name`: in the store, or durably in
    /// the spool. See [`Uploader::upload_with`].
    pub async fn upload(&self, name: &str, payload: Bytes) -> Result<Outcome, UploadError> {
        self.upload_with(name, payload, &Attributes::new()).await
    }

    /// Makes `payload` safe under the object name `name`, with `attributes`,
    /// create-if-absent: [`Uploader::upload_with_mode`] with
    /// [`WriteMode::CreateIfAbsent`].
    pub async fn upload_with(
        &self,
        name: &str,
        payload: Bytes,
        attributes: &Attributes,
    ) -> Result<Outcome, UploadError> {
        (self.upload_with_mode(name, payload, attributes, WriteMode::CreateIfAbsent)).await
    }

    /// Makes `payload` safe under the object name `name`, with `attributes` (content
    /// type, encoding, cache control, disposition, custom metadata: `object_store`'s
    /// [`Attributes`], as in its `PutOptions`), written in `mode`: in the store, or
    /// durably in the spool, whose drainer writes the same attributes in the same
    /// mode.
    ///
    /// The name is checked first and nothing is sent if the client cannot write it
    /// exactly. While the spool holds an entry of `name` ([`Spool::holds_name`]),
    /// the object is spooled behind it rather than written past it, so that the
    /// store sees one name's writes in the order they were made safe. A
    /// create-if-absent write answered "already exists" is [`Outcome::Stored`]
    /// when the object there is proven to hold these bytes (an earlier try landed),
    /// and refused when it holds others or cannot be checked.
    pub async fn upload_with_mode(
        &self,
        name: &str,
        payload: Bytes,
        attributes: &Attributes,
        mode: WriteMode,
    ) -> Result<Outcome, UploadError> {
        let result = self.try_upload(name, payload, attributes, mode).await;
        self.spool.metrics().upload(UploadOutcome::of(&result));
        result
    }

    async fn try_upload(
        &self,
        name: &str,
        payload: Bytes,
        attributes: &Attributes,
        mode: WriteMode,
    ) -> Result<Outcome, UploadError> {
        // Checked once, before anything is sent; the spool takes them as checked.
        let path = self.remote.path(name)?;
        let encoded = crate::entry::encode_attributes(attributes)?;
        let object = (name, mode);
        if self.spool_first(name) {
            return self.spool_it(object, payload, encoded, None).await;
        }
        match self
            .write_direct(name, &path, &payload, attributes, mode)
            .await
        {
            Direct::Stored => Ok(Outcome::Stored),
            Direct::Spool(e) => self.spool_it(object, payload, encoded, Some(e)).await,
            Direct::Refused(e) => Err(UploadError::Refused(e)),
        }
    }

    /// Whether a write of `name` must go to the spool without trying the store:
    /// an entry of the name is there (its writes keep their order), or order is
    /// kept for every name and the spool is not empty.
    fn spool_first(&self, name: &str) -> bool {
        (self.config.ordered && !self.spool.is_empty()) || self.spool.holds_name(name)
    }

    /// Makes a streamed object safe, as [`Uploader::upload_with_mode`] does an
    /// object in memory: `staged` holds its payload in the spool's temp file, with
    /// `attributes` (those it was staged with), to be written in its mode
    /// ([`Staged::mode`]). Up to `direct_max_bytes` it is read back and tried in the
    /// store once, larger ones streamed from the file; it is committed to the spool
    /// when that fails retryably, or at once when the spool holds an entry of its
    /// name (or order is kept and the spool is not empty), and discarded otherwise.
    pub async fn upload_staged(
        &self,
        staged: Staged,
        attributes: &Attributes,
    ) -> Result<Outcome, UploadError> {
        let result = self.try_upload_staged(staged, attributes).await;
        self.spool.metrics().upload(UploadOutcome::of(&result));
        result
    }

    async fn try_upload_staged(
        &self,
        staged: Staged,
        attributes: &Attributes,
    ) -> Result<Outcome, UploadError> {
        if self.spool_first(staged.name()) {
            return self.commit_staged(staged, None).await;
        }
        if staged.payload_len() > self.config.direct_max_bytes {
            return match self.write_streamed(&staged, attributes).await {
                Ok(Direct::Stored) => {
                    staged.discard().await;
                    Ok(Outcome::Stored)
                }
                Ok(Direct::Spool(e)) => self.commit_staged(staged, Some(e)).await,
                Ok(Direct::Refused(e)) => {
                    staged.discard().await;
                    Err(UploadError::Refused(e))
                }
                Err(spool_error) => Err(UploadError::NotSpooled {
                    store_error: None,
                    spool_error,
                }),
            };
        }
        let payload = match staged.read_payload().await {
            Ok(payload) => payload,
            Err(spool_error) => {
                return Err(UploadError::NotSpooled {
                    store_error: None,
                    spool_error,
                });
            }
        };
        let name = staged.name().to_owned();
        // `Spool::stage` checked the name; an error here would be a bug, and the
        // object is refused without anything sent.
        let path = match self.remote.path(&name) {
            Ok(path) => path,
            Err(e) => {
                staged.discard().await;
                return Err(UploadError::Refused(StoreError::InvalidName(e)));
            }
        };
        let mode = staged.mode();
        match (self.write_direct(&name, &path, &payload, attributes, mode)).await {
            Direct::Stored => {
                staged.discard().await;
                Ok(Outcome::Stored)
            }
            Direct::Spool(e) => self.commit_staged(staged, Some(e)).await,
            Direct::Refused(e) => {
                staged.discard().await;
                Err(UploadError::Refused(e))
            }
        }
    }

    /// One write of `payload` as `name` (at `path`, its store path) in `mode`,
    /// timed and counted, with a 412 to a create-if-absent write proven or refused.
    async fn write_direct(
        &self,
        name: &str,
        path: &object_store::path::Path,
        payload: &Bytes,
        attributes: &Attributes,
        mode: WriteMode,
    ) -> Direct {
        let metrics = self.spool.metrics();
        let started = Instant::now();
        let timeout = self.config.put_timeout;
        let result = self
            .remote
            .put_at(path, payload.clone(), attributes, mode, timeout)
            .await;
        metrics
            .upload_direct_seconds
            .observe(started.elapsed().as_secs_f64());
        let error = match result {
            Ok(()) => {
                self.spool.store_took_a_write();
                return Direct::Stored;
            }
            Err(e) => e,
        };
        let error = match error {
            StoreError::AlreadyExists { .. } => {
                self.settle_already_exists(name, payload, error).await
            }
            other => other,
        };
        if let StoreError::AlreadyExists { .. } = error {
            // Proven ours (an earlier try landed): a write stored, not an error.
            return Direct::Stored;
        }
        metrics.store_error(WritePath::Direct, error.kind_label());
        match error {
            e if e.is_retryable() => {
                tracing::debug!(%name, error = %e, "store write failed; spooling");
                self.spool.store_failed_a_write(&e);
                Direct::Spool(e)
            }
            e => Direct::Refused(e),
        }
    }

    /// One write of a staged object too large to hold, streamed from its temp
    /// file in its mode, timed and counted, with a 412 to a create-if-absent write
    /// proven or refused; `Err` when the temp file cannot be read or is damaged
    /// (nothing is written then).
    async fn write_streamed(
        &self,
        staged: &Staged,
        attributes: &Attributes,
    ) -> Result<Direct, PutError> {
        let metrics = self.spool.metrics();
        let file = staged.payload_file();
        let config = &self.config;
        let transfer = file.len as f64 / config.min_bytes_per_second.max(1) as f64;
        let timeout = config.put_timeout + Duration::from_secs_f64(transfer);
        let tag = format!("direct-{}-{}-{:08x}", staged.seq(), file.len, file.crc32c);
        let key = crate::remote::staging_key(staged.name(), &tag);
        let name = staged.name();
        let started = Instant::now();
        let put = (self.remote).put_streamed(
            name,
            &key,
            file,
            attributes,
            staged.mode(),
            config.part_bytes,
        );
        let result = match tokio::time::timeout(timeout, put).await {
            Ok(result) => result,
            Err(_) => Err(crate::remote::StreamError::Store(StoreError::Timeout(
                timeout,
            ))),
        };
        metrics
            .upload_direct_seconds
            .observe(started.elapsed().as_secs_f64());
        let error = match result {
            Ok(()) => {
                self.spool.store_took_a_write();
                return Ok(Direct::Stored);
            }
            Err(e) => stream_failure(staged, e)?,
        };
        let error = match error {
            StoreError::AlreadyExists { .. } => {
                let existing =
                    self.remote
                        .check_existing_streamed(name, file, config.part_bytes, timeout);
                match existing.await {
                    Ok(existing) => self.settled(existing, error),
                    Err(e) => stream_failure(staged, e)?,
                }
            }
            other => other,
        };
        if let StoreError::AlreadyExists { .. } = error {
            // Proven ours: a write stored, not an error.
            return Ok(Direct::Stored);
        }
        metrics.store_error(WritePath::Direct, error.kind_label());
        Ok(match error {
            e if e.is_retryable() => {
                tracing::debug!(%name, error = %e, "streamed store write failed; spooling");
                self.spool.store_failed_a_write(&e);
                Direct::Spool(e)
            }
            e => Direct::Refused(e),
        })
    }

    /// A direct write was answered "already exists": an earlier try that timed out
    /// may have landed. Returns the original error when the object is proven to be
    /// ours (the caller is told `Stored`), a retryable error when the store cannot
    /// say now or the object has gone (the write is spooled), and a refusal
    /// otherwise.
    async fn settle_already_exists(
        &self,
        name: &str,
        payload: &[u8],
        already: StoreError,
    ) -> StoreError {
        match self
            .remote
            .check_existing(name, payload, self.config.put_timeout)
            .await
        {
            Ok(existing) => self.settled(existing, already),
            Err(e) => e,
        }
    }

    /// What a comparison after "already exists" comes to: the original error when
    /// the object is ours, a retryable error when it has gone, a conflict otherwise.
    fn settled(&self, existing: Existing, already: StoreError) -> StoreError {
        match existing {
            Existing::Matches => already,
            Existing::Missing => StoreError::Unavailable {
                status: None,
                source: object_store::Error::Generic {
                    store: "spool",
                    source: "the object was deleted after answering \"already exists\"".into(),
                },
            },
            Existing::Differs(detail) => StoreError::Conflict { detail },
            Existing::Unverifiable(detail) => StoreError::Conflict {
                detail: format!("cannot verify: {detail}"),
            },
        }
    }

    /// Puts an object (its name and mode) whose name and attributes `try_upload`
    /// checked (`encoded`: the attributes as the entry holds them) into the spool.
    async fn spool_it(
        &self,
        (name, mode): (&str, WriteMode),
        payload: Bytes,
        encoded: Vec<u8>,
        store_error: Option<StoreError>,
    ) -> Result<Outcome, UploadError> {
        let started = Instant::now();
        let result = self.spool.put_checked(name, mode, payload, encoded).await;
        self.spooled(started, result, store_error)
    }

    async fn commit_staged(
        &self,
        staged: Staged,
        store_error: Option<StoreError>,
    ) -> Result<Outcome, UploadError> {
        let started = Instant::now();
        let result = staged.commit().await;
        self.spooled(started, result, store_error)
    }

    /// What the caller is told of a put into the spool.
    #[allow(clippy::result_large_err)] // the error every upload returns, unboxed
    fn spooled(
        &self,
        started: Instant,
        result: Result<crate::Receipt, PutError>,
        store_error: Option<StoreError>,
    ) -> Result<Outcome, UploadError> {
        self.spool
            .metrics()
            .spool_put_seconds
            .observe(started.elapsed().as_secs_f64());
        result
            .map(|receipt| Outcome::Spooled { seq: receipt.seq })
            .map_err(|e| put_refusal(e, store_error))
    }

    /// A streamed object the spool refused before it was whole (at
    /// [`Spool::stage`] or a [`Staged::append`]): counted in `uploads_total` as the
    /// upload it is, and returned as the error [`Uploader::upload_staged`] would
    /// have given.
    pub fn refused_staging(&self, e: PutError) -> UploadError {
        let error = put_refusal(e, None);
        self.spool.metrics().upload(UploadOutcome::of_error(&error));
        error
    }
}

/// A streamed write's result as the uploader takes it: the store's answer, or the
/// temp file's failure (unreadable or damaged: nothing was written, and the object
/// cannot be spooled from that file either).
fn stream_failure(staged: &Staged, e: crate::remote::StreamError) -> Result<StoreError, PutError> {
    use crate::remote::StreamError;
    match e {
        StreamError::Store(e) => Ok(e),
        StreamError::Read { source, .. } => Err(PutError::Io {
            path: staged.payload_file().path.to_path_buf(),
            source: std::sync::Arc::new(source),
        }),
        StreamError::Damaged { detail, .. } => Err(PutError::Io {
            path: staged.payload_file().path.to_path_buf(),
            source: std::sync::Arc::new(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                detail,
            )),
        }),
    }
}

/// What a caller is told of a put the spool refused (`store_error`: why the store
/// was not written, if it was tried).
fn put_refusal(e: PutError, store_error: Option<StoreError>) -> UploadError {
    match e {
        PutError::Full(reason) => UploadError::SpoolFull {
            store_error,
            reason,
        },
        PutError::InvalidName(e) => UploadError::InvalidName(e),
        PutError::InvalidAttributes(e) => UploadError::InvalidAttributes(e),
        spool_error => UploadError::NotSpooled {
            store_error,
            spool_error,
        },
    }
}

impl UploadOutcome {
    /// How an [`Uploader::upload`] result is counted in `uploads_total`: the one
    /// place that sorts errors into backpressure (`Rejected`) and the rest.
    pub fn of(result: &Result<Outcome, UploadError>) -> Self {
        match result {
            Ok(Outcome::Stored) => UploadOutcome::Stored,
            Ok(Outcome::Spooled { .. }) => UploadOutcome::Spooled,
            Err(error) => UploadOutcome::of_error(error),
        }
    }

    /// How an upload refused with `error` is counted: backpressure (`Rejected`) or
    /// `Failed`.
    pub fn of_error(error: &UploadError) -> Self {
        match error {
            UploadError::SpoolFull { .. }
            | UploadError::NotSpooled {
                spool_error: PutError::TooLarge { .. },
                ..
            } => UploadOutcome::Rejected,
            _ => UploadOutcome::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::SpoolConfig;
    use crate::error::FullReason;
    use crate::metrics::UploadOutcome as O;
    use crate::name::InvalidName;
    use crate::testing::{FlakyStore, Mode, mem_spool};

    async fn setup(mode: Mode, config: UploaderConfig) -> (Uploader, Spool, Arc<FlakyStore>) {
        let (spool, _) = mem_spool(SpoolConfig {
            max_files: 2,
            ..SpoolConfig::default()
        })
        .await;
        let store = FlakyStore::new(mode);
        let uploader = Uploader::new(spool.clone(), Remote::new(store.clone()), config);
        (uploader, spool, store)
    }

    fn counts(spool: &Spool) -> [u64; 4] {
        [O::Stored, O::Spooled, O::Rejected, O::Failed].map(|o| spool.metrics().uploads_total(o))
    }

    #[tokio::test]
    async fn a_healthy_store_gets_the_object_directly() {
        let (up, spool, store) = setup(Mode::Healthy, UploaderConfig::default()).await;
        assert_eq!(
            up.upload("a", Bytes::from_static(b"1")).await.unwrap(),
            Outcome::Stored
        );
        assert_eq!(
            store.contents().await,
            [("a".to_string(), Bytes::from_static(b"1"))]
        );
        assert!(spool.is_empty());
        assert_eq!(counts(&spool), [1, 0, 0, 0]);
    }

    async fn staged(spool: &Spool, name: &str, payload: &[u8]) -> Staged {
        let mut staged = spool.stage(name, &Attributes::new()).await.unwrap();
        staged
            .append(Bytes::copy_from_slice(payload))
            .await
            .unwrap();
        staged
    }

    /// A streamed object goes the way one in memory goes: stored directly (its temp
    /// entry given back), spooled on a retryable failure, refused for good otherwise.
    #[tokio::test]
    async fn a_streamed_object_is_stored_spooled_or_refused_as_one_in_memory() {
        let none = Attributes::new();
        let (up, spool, store) = setup(Mode::Healthy, UploaderConfig::default()).await;
        let outcome = up
            .upload_staged(staged(&spool, "a", b"1").await, &none)
            .await;
        assert_eq!(outcome.unwrap(), Outcome::Stored);
        assert_eq!(
            store.contents().await,
            [("a".into(), Bytes::from_static(b"1"))]
        );
        assert!(
            spool.is_empty(),
            "the staged entry was kept: {:?}",
            spool.stats()
        );

        store.set_mode(Mode::Down);
        let outcome = up
            .upload_staged(staged(&spool, "b", b"2").await, &none)
            .await;
        assert!(
            matches!(outcome, Ok(Outcome::Spooled { .. })),
            "{outcome:?}"
        );
        assert_eq!(spool.stats().files, 1);

        store.set_mode(Mode::Forbidden);
        let outcome = up
            .upload_staged(staged(&spool, "c", b"3").await, &none)
            .await;
        assert!(
            matches!(outcome, Err(UploadError::Refused(_))),
            "{outcome:?}"
        );
        assert_eq!((spool.stats().files, spool.stats().reserved_files), (1, 0));
        assert_eq!(counts(&spool), [1, 1, 0, 1]);
    }

    /// Past `direct_max_bytes` a streamed object is spooled without a direct write,
    /// which would hold it all in memory.
    #[tokio::test]
    async fn a_streamed_object_over_the_direct_limit_streams_to_the_store_create_if_absent() {
        // Found by review (M8): objects over 8 MiB were spooled without any
        // create-if-absent check, so a name that held other bytes was answered as
        // spooled and dead-lettered later, where the relay promises 412.
        let config = UploaderConfig {
            direct_max_bytes: 4,
            part_bytes: 2,
            ..UploaderConfig::default()
        };
        let (up, spool, store) = setup(Mode::Healthy, config).await;
        let big = staged(&spool, "big", b"12345").await;
        let outcome = up.upload_staged(big, &Attributes::new()).await.unwrap();
        assert_eq!(outcome, Outcome::Stored);
        assert_eq!(
            store.contents().await,
            [("big".to_string(), Bytes::from_static(b"12345"))]
        );
        assert_eq!(spool.stats().files + spool.stats().reserved_files, 0);
        // The same bytes again: stored (proven by the bytes); other bytes: 412.
        let again = staged(&spool, "big", b"12345").await;
        assert_eq!(
            up.upload_staged(again, &Attributes::new()).await.unwrap(),
            Outcome::Stored
        );
        let other = staged(&spool, "big", b"54321").await;
        let refused = up
            .upload_staged(other, &Attributes::new())
            .await
            .unwrap_err();
        assert!(
            matches!(refused, UploadError::Refused(StoreError::Conflict { .. })),
            "{refused}"
        );
        // The store down: spooled.
        store.set_mode(Mode::Down);
        let down = staged(&spool, "later", b"123456").await;
        let outcome = up.upload_staged(down, &Attributes::new()).await.unwrap();
        assert!(matches!(outcome, Outcome::Spooled { .. }));
    }

    #[tokio::test]
    async fn a_retryable_failure_spools_the_object() {
        let (up, spool, store) = setup(Mode::Down, UploaderConfig::default()).await;
        let outcome = up.upload("a", Bytes::from_static(b"1")).await.unwrap();
        assert_eq!(outcome, Outcome::Spooled { seq: 1 });
        assert_eq!(spool.stats().files, 1);
        assert!(store.contents().await.is_empty());
        assert_eq!(counts(&spool), [0, 1, 0, 0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_hangs_is_given_up_on_after_the_timeout_and_the_object_spooled() {
        let (up, spool, _) = setup(Mode::Hang, UploaderConfig::default()).await;
        let started = tokio::time::Instant::now();
        let outcome = up.upload("a", Bytes::from_static(b"1")).await.unwrap();
        assert!(matches!(outcome, Outcome::Spooled { .. }));
        assert_eq!(started.elapsed(), UploaderConfig::default().put_timeout);
        assert_eq!(spool.stats().files, 1);
    }

    #[tokio::test]
    async fn a_permanent_refusal_is_returned_and_not_spooled() {
        let (up, spool, _) = setup(Mode::Forbidden, UploaderConfig::default()).await;
        let err = up.upload("a", Bytes::from_static(b"1")).await.unwrap_err();
        assert!(
            matches!(
                err,
                UploadError::Refused(StoreError::Refused {
                    status: Some(403),
                    ..
                })
            ),
            "{err}"
        );
        assert!(!err.is_transient());
        assert!(spool.is_empty());
        assert_eq!(counts(&spool), [0, 0, 0, 1]);
    }

    #[tokio::test]
    async fn a_full_spool_is_reported_to_the_caller_as_backpressure() {
        let (up, spool, _) = setup(Mode::Down, UploaderConfig::default()).await;
        for i in 0..2 {
            up.upload(&format!("o/{i}"), Bytes::from_static(b"1"))
                .await
                .unwrap();
        }
        let err = up
            .upload("o/2", Bytes::from_static(b"1"))
            .await
            .unwrap_err();
        match &err {
            UploadError::SpoolFull {
                store_error: Some(e),
                reason: FullReason::Files { max_files: 2 },
            } => assert!(e.is_retryable()),
            other => panic!("expected SpoolFull, got {other}"),
        }
        assert!(err.is_transient());
        assert_eq!(counts(&spool), [0, 2, 1, 0]);
    }

    #[tokio::test]
    async fn ordered_mode_sends_new_objects_through_a_non_empty_spool() {
        let config = UploaderConfig {
            ordered: true,
            ..UploaderConfig::default()
        };
        let (up, spool, store) = setup(Mode::Down, config).await;
        assert!(spool.is_empty());
        up.upload("first", Bytes::from_static(b"1")).await.unwrap();
        store.set_mode(Mode::Healthy);
        let attempts = store.put_attempts.load(Ordering::SeqCst);
        let outcome = up.upload("second", Bytes::from_static(b"2")).await.unwrap();
        assert_eq!(outcome, Outcome::Spooled { seq: 2 });
        assert_eq!(
            store.put_attempts.load(Ordering::SeqCst),
            attempts,
            "store was tried"
        );
    }

    #[tokio::test]
    async fn a_retry_of_a_write_that_landed_is_told_stored() {
        // The first try landed but its caller saw a failure (and the object was
        // spooled); the caller's own retry is answered 412 and the bytes match.
        let (up, spool, store) = setup(Mode::CommitThenFail, UploaderConfig::default()).await;
        assert!(matches!(
            up.upload("a", Bytes::from_static(b"1")).await.unwrap(),
            Outcome::Spooled { .. }
        ));
        // The entry delivered and its removal durable: the name is free again.
        let claim = spool.claim_oldest().unwrap();
        spool.remove(claim).await.unwrap();
        spool.sync_removals().await.unwrap();
        store.set_mode(Mode::Healthy);
        assert_eq!(
            up.upload("a", Bytes::from_static(b"1")).await.unwrap(),
            Outcome::Stored
        );
        // The 412 was ours: a write stored, not a store error (issue 57).
        let errors = |kind| spool.metrics().store_errors_total(WritePath::Direct, kind);
        assert_eq!(errors("already_exists"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_of_a_name_the_spool_holds_is_spooled_behind_it_not_sent_past_it() {
        let (up, spool, store) = setup(Mode::Down, UploaderConfig::default()).await;
        let mode = WriteMode::Overwrite;
        let none = &Attributes::new();
        let first = up.upload_with_mode("latest.json", Bytes::from_static(b"1"), none, mode);
        assert!(matches!(first.await.unwrap(), Outcome::Spooled { .. }));
        store.set_mode(Mode::Healthy);
        let attempts = store.put_attempts.load(Ordering::SeqCst);
        // The store is healthy, but a direct write would land before the spooled one
        // and be overwritten by it: the newer write goes behind the older.
        let second = up.upload_with_mode("latest.json", Bytes::from_static(b"2"), none, mode);
        assert!(matches!(second.await.unwrap(), Outcome::Spooled { .. }));
        let other = up.upload_with_mode("other.json", Bytes::from_static(b"3"), none, mode);
        assert_eq!(
            other.await.unwrap(),
            Outcome::Stored,
            "other names go direct"
        );
        assert_eq!(store.put_attempts.load(Ordering::SeqCst), attempts + 1);
        // Delivered in order, the name ends with the newer bytes; once the removals
        // are durable, writes of it go direct again.
        let drainer = crate::Drainer::start(spool.clone(), up.remote.clone(), Default::default());
        tokio::time::timeout(std::time::Duration::from_secs(30), spool.wait_until_empty())
            .await
            .unwrap();
        drainer.shutdown().await;
        let latest = || async {
            let contents = store.contents().await;
            let found = contents.iter().find(|(name, _)| name == "latest.json");
            found.map(|(_, bytes)| bytes.clone()).unwrap()
        };
        assert_eq!(latest().await, "2");
        spool.sync_removals().await.unwrap();
        let third = up.upload_with_mode("latest.json", Bytes::from_static(b"4"), none, mode);
        assert_eq!(third.await.unwrap(), Outcome::Stored);
        assert_eq!(latest().await, "4");
    }

    #[tokio::test]
    async fn a_name_taken_by_other_bytes_is_refused_as_a_conflict() {
        let (up, spool, _) = setup(Mode::Healthy, UploaderConfig::default()).await;
        up.upload("a", Bytes::from_static(b"1")).await.unwrap();
        let err = up.upload("a", Bytes::from_static(b"2")).await.unwrap_err();
        assert!(
            matches!(err, UploadError::Refused(StoreError::Conflict { .. })),
            "{err}"
        );
        assert!(spool.is_empty());
    }

    #[tokio::test]
    async fn names_with_every_special_character_reach_the_store_exactly() {
        let (up, _, store) = setup(Mode::Healthy, UploaderConfig::default()).await;
        let names = [
            "logs/100%.json",
            "a#b",
            "q?x=1",
            "star*",
            "[br]{ce}",
            "c^r|t",
            "<lt>",
            "\"quoted\"",
            "til~de",
            "back`tick",
            "ünï/cødé ☃",
        ];
        for name in names {
            assert_eq!(
                up.upload(name, Bytes::from(name)).await.unwrap(),
                Outcome::Stored,
                "{name}"
            );
        }
        let mut stored: Vec<String> = store.contents().await.into_iter().map(|(n, _)| n).collect();
        let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        stored.sort();
        expected.sort();
        assert_eq!(stored, expected);
    }

    #[tokio::test]
    async fn a_name_the_client_cannot_express_is_refused_before_sending() {
        let (up, spool, store) = setup(Mode::Healthy, UploaderConfig::default()).await;
        let err = up
            .upload("a//b", Bytes::from_static(b"1"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                UploadError::InvalidName(InvalidName::Unrepresentable { .. })
            ),
            "{err}"
        );
        assert_eq!(store.put_attempts.load(Ordering::SeqCst), 0);
        assert_eq!(counts(&spool), [0, 0, 0, 1]);
    }
}
