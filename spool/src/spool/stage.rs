//! Entries written as their bytes arrive ([`Staged`]): a request body streamed into
//! the spool holds one piece in memory, never the object.
//!
//! A staged entry is a temp file in `entries/` (deleted at the next open if the
//! process dies first) that starts with a placeholder header and grows by
//! [`Staged::append`]; its reservation grows with it, so a stream can never take the
//! spool past `max_bytes` (the piece that would is refused: [`PutError::Full`] or
//! [`PutError::TooLarge`]). [`Staged::commit`] writes the real header over the
//! placeholder, syncs the file, renames it into place and waits for the directory
//! sync, exactly as a put does: only then is it an entry, drained like any other.
//! Dropped without a commit, its temp file is removed and its room given back.
//!
//! What it costs: nothing is synced while the bytes arrive (one `fdatasync` at the
//! commit), so a staged entry that is then stored upstream directly and discarded
//! never waited on the disk.

use std::path::PathBuf;

use bytes::Bytes;
use object_store::Attributes;

use super::Spool;
use super::layout::temp_file_name;
use super::put::Reservation;
use crate::entry;
use crate::error::PutError;
use crate::name;
use crate::write_mode::WriteMode;

/// An entry being written as its bytes arrive; see the module doc.
pub struct Staged {
    spool: Spool,
    /// `None` once committed (or handed to the commit task).
    reservation: Option<Reservation>,
    tmp: PathBuf,
    name: String,
    mode: WriteMode,
    attributes: Vec<u8>,
    payload_len: u64,
    payload_crc32c: u32,
    /// An append failed: what the file holds is unknown, so it cannot be committed.
    failed: bool,
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("tmp", &self.tmp)
            .field("name", &self.name)
            .field("payload_len", &self.payload_len)
            .finish_non_exhaustive()
    }
}

impl Spool {
    /// Starts an entry for the object `name` with `attributes`, to be written
    /// create-if-absent, whose payload will arrive in pieces ([`Staged::append`]).
    /// See [`Spool::stage_with_mode`].
    pub async fn stage(&self, name: &str, attributes: &Attributes) -> Result<Staged, PutError> {
        (self.stage_with_mode(name, attributes, WriteMode::CreateIfAbsent)).await
    }

    /// Starts an entry for the object `name` with `attributes`, to be written in
    /// `mode`, whose payload will arrive in pieces ([`Staged::append`]). Refuses,
    /// before anything is written, a name Cloud Storage would reject or the client
    /// could not write exactly, attributes the entry format cannot hold, and any
    /// entry while the spool is full or stopped.
    pub async fn stage_with_mode(
        &self,
        name: &str,
        attributes: &Attributes,
        mode: WriteMode,
    ) -> Result<Staged, PutError> {
        name::check_writable(name)?;
        let attributes = entry::encode_attributes(attributes)?;
        let head_len = entry::head_bytes(name.len(), attributes.len());
        let reservation = self.reserve(head_len as u64, name::key(name))?;
        let tmp = self
            .inner
            .entries
            .path
            .join(temp_file_name(reservation.seq));
        let staged = Staged {
            spool: self.clone(),
            reservation: Some(reservation),
            tmp,
            name: name.to_owned(),
            mode,
            attributes,
            payload_len: 0,
            payload_crc32c: 0,
            failed: false,
        };
        let placeholder = Bytes::from(vec![0; head_len]);
        if let Err(e) = self.inner.disk.append(&staged.tmp, placeholder).await {
            return Err(self.put_failed(&staged.tmp, e));
        }
        Ok(staged)
    }
}

impl Staged {
    /// The object name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What its write does to an object already under its name.
    pub fn mode(&self) -> WriteMode {
        self.mode
    }

    /// Payload bytes appended so far.
    pub fn payload_len(&self) -> u64 {
        self.payload_len
    }

    /// crc32c of the payload appended so far.
    pub fn payload_crc32c(&self) -> u32 {
        self.payload_crc32c
    }

    /// Its sequence number in the spool (the entry's, once committed).
    pub fn seq(&self) -> u64 {
        self.reservation.as_ref().map_or(0, |r| r.seq)
    }

    /// The payload appended so far, where it is on disk (for a write that streams
    /// it to the store, `remote/streamed.rs`).
    pub fn payload_file(&self) -> crate::remote::PayloadFile<'_> {
        let head_len = entry::head_bytes(self.name.len(), self.attributes.len());
        crate::remote::PayloadFile {
            disk: &*self.spool.inner.disk,
            path: &self.tmp,
            offset: head_len as u64,
            len: self.payload_len,
            crc32c: self.payload_crc32c,
        }
    }

    /// Appends the next piece of the payload, after taking room for it. Nothing is
    /// synced until [`Staged::commit`]. After an error the entry cannot be
    /// committed; drop it.
    pub async fn append(&mut self, piece: Bytes) -> Result<(), PutError> {
        if self.failed {
            return Err(self.unusable());
        }
        let reservation = self.reservation.as_mut().expect("not committed");
        reservation.grow(piece.len() as u64)?;
        let crc = crc32c::crc32c_append(self.payload_crc32c, &piece);
        let len = piece.len() as u64;
        match self.spool.inner.disk.append(&self.tmp, piece).await {
            Ok(()) => {
                self.payload_crc32c = crc;
                self.payload_len += len;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(self.spool.put_failed(&self.tmp, e))
            }
        }
    }

    /// The payload appended so far, read back from the temp file (for a direct
    /// write upstream before deciding to keep the entry). Holds it all in memory.
    pub async fn read_payload(&self) -> Result<Bytes, PutError> {
        let head_len = entry::head_bytes(self.name.len(), self.attributes.len());
        let read = self
            .spool
            .inner
            .disk
            .read_range(&self.tmp, head_len as u64, self.payload_len);
        let payload = read
            .await
            .map_err(|e| self.spool.put_failed(&self.tmp, e))?;
        if payload.len() as u64 != self.payload_len
            || crc32c::crc32c(&payload) != self.payload_crc32c
        {
            let message = format!(
                "read back {} bytes that differ from the {} bytes appended",
                payload.len(),
                self.payload_len
            );
            return Err(PutError::Io {
                path: self.tmp.clone(),
                source: std::sync::Arc::new(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    message,
                )),
            });
        }
        Ok(payload.into())
    }

    /// Makes the entry durable and indexes it, as [`Spool::put`] would have: the
    /// header written over the placeholder, the file synced, renamed into place and
    /// the directory synced. Runs to completion even if the returned future is
    /// dropped.
    pub async fn commit(mut self) -> Result<super::Receipt, PutError> {
        if self.failed {
            return Err(self.unusable());
        }
        let reservation = self.reservation.take().expect("committed once");
        let spool = self.spool.clone();
        let tmp = self.tmp.clone();
        let head = (
            self.name.clone(),
            self.mode,
            std::mem::take(&mut self.attributes),
        );
        let payload = (self.payload_len, self.payload_crc32c);
        tokio::spawn(async move { spool.commit_staged(reservation, tmp, head, payload).await })
            .await
            .unwrap_or_else(|e| {
                Err(PutError::Broken {
                    reason: format!("commit task failed: {e}").into(),
                })
            })
    }

    /// Gives the entry up: its temp file is removed and its room given back. (Dropping
    /// it does the same, the removal in a task of its own.)
    pub async fn discard(mut self) {
        if self.reservation.take().is_some() {
            let _ = self.spool.inner.disk.remove(&self.tmp).await;
        }
    }

    fn unusable(&self) -> PutError {
        PutError::Io {
            path: self.tmp.clone(),
            source: std::sync::Arc::new(std::io::Error::other(
                "an earlier append to this entry failed",
            )),
        }
    }
}

impl Drop for Staged {
    /// An entry never committed: its temp file is removed (best effort; the next open
    /// deletes what is left) and its room given back.
    fn drop(&mut self) {
        if self.reservation.is_none() {
            return;
        }
        let (disk, tmp) = (self.spool.inner.disk.clone(), self.tmp.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = disk.remove(&tmp).await;
            });
        }
    }
}

impl Spool {
    async fn commit_staged(
        &self,
        reservation: Reservation,
        tmp: PathBuf,
        (name, mode, attributes): (String, WriteMode, Vec<u8>),
        (payload_len, payload_crc32c): (u64, u32),
    ) -> Result<super::Receipt, PutError> {
        let inner = &*self.inner;
        let created_unix_ms = inner.clock.now_unix_ms();
        let head = entry::encode_head(
            reservation.seq,
            created_unix_ms,
            &name,
            mode,
            &attributes,
            payload_len,
            payload_crc32c,
        );
        debug_assert_eq!(
            reservation.file_bytes,
            entry::file_bytes(name.len(), attributes.len(), payload_len)
        );
        let (staged_tmp, path) = self.entry_paths(&reservation, created_unix_ms);
        debug_assert_eq!(staged_tmp, tmp);
        let written = async {
            inner.disk.write_at(&tmp, 0, head).await?;
            inner.disk.sync_file(&tmp).await?;
            inner.disk.rename(&tmp, &path).await
        }
        .await;
        self.settle_entry(reservation, created_unix_ms, &tmp, path, written)
            .await
    }
}
