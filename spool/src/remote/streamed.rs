//! Objects of any size, their bytes read from a file on the spool's disk one part at
//! a time: memory is one part (`part_bytes`), whatever the object's size. An
//! overwrite is one multipart upload to the object's name; a create-if-absent write
//! takes the three steps below.
//!
//! Cloud Storage cannot put a precondition on a multipart upload (Google's "Request
//! preconditions": 400 `NotImplemented`), and `object_store`'s multipart uploads
//! have no create-if-absent mode (arrow-rs-object-store issues 289 and 396), but a
//! copy can be conditional (`copy_if_not_exists`: on Cloud Storage an XML copy with
//! `x-goog-if-generation-match: 0`). So a large object is written in three steps:
//!
//! 1. a multipart upload to a staging name, `STAGING_PREFIX` + a key unique to the
//!    object being written (a retry overwrites its own staging object), with the
//!    object's attributes; its payload's crc32c is checked against the one the
//!    caller recorded before the upload completes, so damaged bytes never land;
//! 2. `copy_if_not_exists` from the staging name to the object's name: "already
//!    exists" is settled as any 412 is, by the bytes ([`Remote::check_existing_streamed`]);
//! 3. the staging object deleted, best effort (a failed delete is logged; a
//!    lifecycle rule on `STAGING_PREFIX` removes what a crash leaves).
//!
//! The cost is one server-side copy per large object. An object written this way
//! has no MD5 (a multipart upload's object is a composite), so a 412 on it is
//! settled by reading the bytes back, part by part.

use std::path::Path;
use std::time::Duration;

use md5::{Digest, Md5};
use object_store::path::Path as ObjectPath;
use object_store::{
    Attributes, GetOptions, GetRange, ObjectStoreExt as _, PutMultipartOptions, PutPayload,
};

use super::{Existing, Remote, classify, hex, md5_etag};
use crate::disk::Disk;
use crate::error::StoreError;
use crate::write_mode::WriteMode;

/// Where large objects are uploaded before they are copied under their names. Give
/// it a lifecycle rule that deletes objects older than a day: a crash between the
/// copy and the delete leaves one behind.
pub const STAGING_PREFIX: &str = ".spool-staging/";

/// A payload in a file on the spool's disk: an entry file after its header, or a
/// staged upload's temp file.
#[derive(Clone, Copy)]
pub struct PayloadFile<'a> {
    /// The disk it is on.
    pub disk: &'a dyn Disk,
    /// The file.
    pub path: &'a Path,
    /// Where the payload starts in the file, in bytes.
    pub offset: u64,
    /// The payload's length, in bytes.
    pub len: u64,
    /// The payload's crc32c, as recorded when it was written.
    pub crc32c: u32,
}

impl std::fmt::Debug for PayloadFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadFile")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Why a streamed write did not land.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The store failed or refused it (classified as any write is).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The payload file could not be read.
    #[error("cannot read the payload from {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The payload read back is not what was written (its crc32c or length): it was
    /// damaged on disk, and nothing was written under the object's name.
    #[error("the payload in {path} is damaged: {detail}")]
    Damaged {
        /// The file.
        path: std::path::PathBuf,
        /// What differed.
        detail: String,
    },
}

/// The staging key of an object: the name's MD5 (so that two spools writing
/// different objects never share one) and the caller's `tag` (what makes this
/// write of the name unique: a sequence number, a creation time, a crc).
pub fn staging_key(name: &str, tag: &str) -> String {
    format!("{}-{tag}", hex(&Md5::digest(name.as_bytes())))
}

/// The payload's parts, read in order, checked at the end against its length and
/// crc32c.
struct Parts<'a> {
    file: PayloadFile<'a>,
    part_bytes: u64,
    at: u64,
    crc32c: u32,
}

impl<'a> Parts<'a> {
    fn new(file: PayloadFile<'a>, part_bytes: u64) -> Self {
        Parts {
            file,
            part_bytes: part_bytes.max(1),
            at: 0,
            crc32c: 0,
        }
    }

    /// The next part, `None` after the last.
    async fn next(&mut self) -> Result<Option<bytes::Bytes>, StreamError> {
        if self.at == self.file.len {
            return Ok(None);
        }
        let len = (self.file.len - self.at).min(self.part_bytes);
        let offset = self.file.offset + self.at;
        let read = self.file.disk.read_range(self.file.path, offset, len).await;
        let part = read.map_err(|source| StreamError::Read {
            path: self.file.path.to_path_buf(),
            source,
        })?;
        if part.len() as u64 != len {
            return Err(self.damaged(format!(
                "{} bytes at offset {} where {len} were written",
                part.len(),
                self.at
            )));
        }
        self.crc32c = crc32c::crc32c_append(self.crc32c, &part);
        self.at += len;
        Ok(Some(part.into()))
    }

    /// After the last part: whether the bytes read are those written.
    fn check(&self) -> Result<(), StreamError> {
        match self.crc32c == self.file.crc32c {
            true => Ok(()),
            false => Err(self.damaged(format!(
                "crc32c {:08x} where {:08x} was written",
                self.crc32c, self.file.crc32c
            ))),
        }
    }

    fn damaged(&self, detail: String) -> StreamError {
        StreamError::Damaged {
            path: self.file.path.to_path_buf(),
            detail,
        }
    }
}

impl Remote {
    /// Writes the payload in `file` with `attributes` as `name` only if no object of
    /// that name exists, in parts of `part_bytes` (see the module doc), giving up
    /// after `timeout`. `staging_key` names the staging object ([`staging_key`]).
    pub async fn put_streamed_if_absent(
        &self,
        name: &str,
        staging_key: &str,
        file: PayloadFile<'_>,
        attributes: &Attributes,
        part_bytes: u64,
        timeout: Duration,
    ) -> Result<(), StreamError> {
        let mode = WriteMode::CreateIfAbsent;
        let put = self.put_streamed(name, staging_key, file, attributes, mode, part_bytes);
        match tokio::time::timeout(timeout, put).await {
            Ok(result) => result,
            Err(_) => Err(StreamError::Store(StoreError::Timeout(timeout))),
        }
    }

    /// Writes the payload in `file` with `attributes` as `name` in `mode`, in parts
    /// of `part_bytes`, with no timeout of its own: create-if-absent through a
    /// staging object and a conditional copy (see the module doc); an overwrite
    /// straight to the name (a multipart upload's object appears whole at its
    /// completion or not at all).
    pub async fn put_streamed(
        &self,
        name: &str,
        staging_key: &str,
        file: PayloadFile<'_>,
        attributes: &Attributes,
        mode: WriteMode,
        part_bytes: u64,
    ) -> Result<(), StreamError> {
        let path = self.path(name).map_err(StoreError::InvalidName)?;
        if mode == WriteMode::Overwrite {
            return (self.upload_staging(&path, file, attributes, part_bytes)).await;
        }
        let staging = self.path(&format!("{STAGING_PREFIX}{staging_key}"));
        let staging = staging.map_err(StoreError::InvalidName)?;
        self.upload_staging(&staging, file, attributes, part_bytes)
            .await?;
        let copied = self.store.copy_if_not_exists(&staging, &path).await;
        if let Err(e) = self.store.delete(&staging).await {
            tracing::warn!(staging = %staging, error = %e, "cannot delete a staging object; a lifecycle rule on the staging prefix removes it");
        }
        copied.map_err(|e| StreamError::Store(classify(e)))
    }

    /// Step 1: the multipart upload to `staging` (or, for an overwrite, to the
    /// object's own name), one part in memory at a time, aborted (best effort)
    /// when a part fails or the bytes are damaged.
    async fn upload_staging(
        &self,
        staging: &ObjectPath,
        file: PayloadFile<'_>,
        attributes: &Attributes,
        part_bytes: u64,
    ) -> Result<(), StreamError> {
        let options = PutMultipartOptions {
            attributes: attributes.clone(),
            ..PutMultipartOptions::default()
        };
        let started = self.store.put_multipart_opts(staging, options).await;
        let mut upload = started.map_err(|e| StreamError::Store(classify(e)))?;
        let mut parts = Parts::new(file, part_bytes);
        let uploaded = async {
            while let Some(part) = parts.next().await? {
                let put = upload.put_part(PutPayload::from(part)).await;
                put.map_err(|e| StreamError::Store(classify(e)))?;
            }
            parts.check()
        };
        if let Err(e) = uploaded.await {
            if let Err(abort) = upload.abort().await {
                tracing::debug!(staging = %staging, error = %abort, "aborting a multipart upload failed");
            }
            return Err(e);
        }
        let completed = upload.complete().await;
        completed.map_err(|e| StreamError::Store(classify(e)))?;
        Ok(())
    }

    /// After a streamed create-if-absent write was answered "already exists": is
    /// the object there the one in `file`? Proof as for [`Remote::check_existing`]:
    /// a different size; the MD5 when the ETag is one (the file's MD5 computed part
    /// by part); otherwise the object read back part by part and compared.
    pub async fn check_existing_streamed(
        &self,
        name: &str,
        file: PayloadFile<'_>,
        part_bytes: u64,
        timeout: Duration,
    ) -> Result<Existing, StreamError> {
        let path = self.path(name).map_err(StoreError::InvalidName)?;
        let check = async {
            let meta = match self.store.head(&path).await {
                Err(object_store::Error::NotFound { .. }) => return Ok(Existing::Missing),
                Err(e) => return Err(StreamError::Store(classify(e))),
                Ok(meta) => meta,
            };
            if meta.size != file.len {
                return Ok(Existing::Differs(format!(
                    "stored object is {} bytes, the spooled one {}",
                    meta.size, file.len
                )));
            }
            match meta.e_tag.as_deref().and_then(md5_etag) {
                Some(stored_md5) => {
                    let ours = file_md5(file, part_bytes).await?;
                    Ok(match stored_md5 == ours {
                        true => Existing::Matches,
                        false => Existing::Differs(format!(
                            "stored object has MD5 {stored_md5}, the spooled one {ours}"
                        )),
                    })
                }
                None => self.compare_parts(&path, file, part_bytes).await,
            }
        };
        match tokio::time::timeout(timeout, check).await {
            Ok(result) => result,
            Err(_) => Err(StreamError::Store(StoreError::Timeout(timeout))),
        }
    }

    /// Reads the stored object part by part and compares it with `file`.
    async fn compare_parts(
        &self,
        path: &ObjectPath,
        file: PayloadFile<'_>,
        part_bytes: u64,
    ) -> Result<Existing, StreamError> {
        let mut parts = Parts::new(file, part_bytes);
        let mut at = 0;
        while let Some(ours) = parts.next().await? {
            let range = GetRange::Bounded(at..at + ours.len() as u64);
            let options = GetOptions {
                range: Some(range),
                ..GetOptions::default()
            };
            let read = async { self.store.get_opts(path, options).await?.bytes().await };
            let stored = match read.await {
                Err(object_store::Error::NotFound { .. }) => return Ok(Existing::Missing),
                Err(e) => match classify(e) {
                    e if e.is_retryable() => return Err(StreamError::Store(e)),
                    e => {
                        return Ok(Existing::Unverifiable(format!(
                            "its ETag is not an MD5 and it cannot be read back: {e}"
                        )));
                    }
                },
                Ok(stored) => stored,
            };
            if stored != ours {
                return Ok(Existing::Differs(format!(
                    "stored object has other bytes than the spooled one in {at}..{}",
                    at + ours.len() as u64
                )));
            }
            at += ours.len() as u64;
        }
        parts.check()?;
        Ok(Existing::Matches)
    }
}

/// The MD5 of the payload in `file`, in lower-case hex, read part by part.
async fn file_md5(file: PayloadFile<'_>, part_bytes: u64) -> Result<String, StreamError> {
    let mut parts = Parts::new(file, part_bytes);
    let mut md5 = Md5::new();
    while let Some(part) = parts.next().await? {
        md5.update(&part);
    }
    parts.check()?;
    Ok(hex(&md5.finalize()))
}
