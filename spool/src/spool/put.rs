//! Putting an entry: capacity reserved before the first await, then (in a spawned
//! task, so a caller that gives up cannot leave the index and the directory
//! disagreeing) encode, create and sync the temp file, rename it into place, and wait
//! for a directory sync that started after the rename. Only then is the entry indexed
//! and the put acknowledged.
//!
//! What a failure costs: out of space anywhere is a full spool; an error on the temp
//! file or the rename fails this put only (its files are removed, best effort); an
//! error from the directory sync fails this put and every put until the spool has
//! reopened itself.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use object_store::Attributes;

use super::layout::{entry_file_name, temp_file_name};
use super::{Meta, Naming, Spool, is_out_of_descriptors, is_out_of_space};
use crate::entry;
use crate::error::{FullReason, PutError};
use crate::name;
use crate::write_mode::WriteMode;

/// What a successful [`Spool::put`] stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The entry's sequence number (its place in the drain order).
    pub seq: u64,
    /// Size of the entry file, as counted against `max_bytes`.
    pub file_bytes: u64,
    /// When the entry was written, in ms since the Unix epoch.
    pub created_unix_ms: u64,
}

/// Capacity held by a put in progress; given back if the put does not complete.
pub(super) struct Reservation {
    spool: Spool,
    pub(super) seq: u64,
    pub(super) file_bytes: u64,
    /// The key of the entry's object name ([`name::key`]).
    pub(super) name_key: u64,
    held: bool,
}

impl Reservation {
    /// Holds `extra` more bytes (a streamed entry's next piece), or says why not:
    /// the entry would pass `max_bytes`, or the spool is full or stopped.
    pub(super) fn grow(&mut self, extra: u64) -> Result<(), PutError> {
        debug_assert!(self.held, "grew a reservation already given back");
        let config = &self.spool.inner.config;
        let wanted = self.file_bytes.saturating_add(extra);
        if wanted > config.max_bytes {
            return Err(PutError::TooLarge {
                entry_bytes: wanted,
                max_bytes: config.max_bytes,
            });
        }
        let mut state = self.spool.state();
        if let Some(reason) = &state.broken {
            return Err(PutError::Broken {
                reason: reason.clone(),
            });
        }
        if state.index.bytes() + state.reserved_bytes + extra > config.max_bytes {
            return Err(PutError::Full(FullReason::Bytes {
                max_bytes: config.max_bytes,
            }));
        }
        state.reserved_bytes += extra;
        self.file_bytes = wanted;
        state.check(config);
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.held {
            let mut state = self.spool.state();
            state.reserved_files -= 1;
            state.reserved_bytes -= self.file_bytes;
            drop(state);
            self.spool.inner.changed.notify_waiters();
        }
    }
}

/// What a put writes.
struct NewEntry {
    name: String,
    mode: WriteMode,
    attributes: Vec<u8>,
    payload: Bytes,
}

impl Spool {
    /// Stores `payload` under the object name `name`, without attributes, and returns
    /// once it is durable. See [`Spool::put_with`].
    pub async fn put(&self, name: &str, payload: Bytes) -> Result<Receipt, PutError> {
        self.put_with(name, payload, &Attributes::new()).await
    }

    /// Stores `payload` under the object name `name` with `attributes` (sent with
    /// the drain write), to be written create-if-absent, and returns once it is
    /// durable. See [`Spool::put_with_mode`].
    pub async fn put_with(
        &self,
        name: &str,
        payload: Bytes,
        attributes: &Attributes,
    ) -> Result<Receipt, PutError> {
        (self.put_with_mode(name, payload, attributes, WriteMode::CreateIfAbsent)).await
    }

    /// Stores `payload` under the object name `name` with `attributes`, to be
    /// written in `mode` (sent with the drain write), and returns once it is
    /// durable. Entries of one name are delivered in the order their puts returned.
    ///
    /// Refuses, without storing anything, a name Cloud Storage would reject or the
    /// client could not write exactly ([`name::check_writable`]), attributes the
    /// entry format cannot hold, an entry larger than `max_bytes`, and
    /// any entry while the spool is full or stopped. The write runs to completion even
    /// if the returned future is dropped, so the index never disagrees with the
    /// directory.
    pub async fn put_with_mode(
        &self,
        name: &str,
        payload: Bytes,
        attributes: &Attributes,
        mode: WriteMode,
    ) -> Result<Receipt, PutError> {
        name::check_writable(name)?;
        let attributes = entry::encode_attributes(attributes)?;
        self.put_checked(name, mode, payload, attributes).await
    }

    /// [`Spool::put_with`] of a name [`name::check_writable`] accepted, with its
    /// attributes encoded ([`entry::encode_attributes`]): for a caller that checked
    /// both already.
    pub(crate) async fn put_checked(
        &self,
        name: &str,
        mode: WriteMode,
        payload: Bytes,
        attributes: Vec<u8>,
    ) -> Result<Receipt, PutError> {
        debug_assert!(
            name::check_writable(name).is_ok(),
            "unchecked name {name:?}"
        );
        let file_bytes = entry::file_bytes(name.len(), attributes.len(), payload.len() as u64);
        let reservation = self.reserve(file_bytes, name::key(name))?;
        let spool = self.clone();
        let new = NewEntry {
            name: name.to_owned(),
            mode,
            attributes,
            payload,
        };
        // Boxed, so the task holds a pointer rather than the whole write's future,
        // which tokio would copy on spawn and again as the task finishes.
        tokio::spawn(Box::pin(async move {
            spool.write_entry(reservation, new).await
        }))
        .await
        .unwrap_or_else(|e| {
            Err(PutError::Broken {
                reason: format!("put task failed: {e}").into(),
            })
        })
    }

    /// Takes a sequence number and room for `file_bytes` of an entry of the name
    /// whose key is `name_key`, or says why not.
    pub(super) fn reserve(&self, file_bytes: u64, name_key: u64) -> Result<Reservation, PutError> {
        let config = &self.inner.config;
        if file_bytes > config.max_bytes {
            return Err(PutError::TooLarge {
                entry_bytes: file_bytes,
                max_bytes: config.max_bytes,
            });
        }
        let mut state = self.state();
        if let Some(reason) = &state.broken {
            return Err(PutError::Broken {
                reason: reason.clone(),
            });
        }
        if state.index.len() as u64 + state.reserved_files >= config.max_files {
            return Err(PutError::Full(FullReason::Files {
                max_files: config.max_files,
            }));
        }
        if state.index.bytes() + state.reserved_bytes + file_bytes > config.max_bytes {
            return Err(PutError::Full(FullReason::Bytes {
                max_bytes: config.max_bytes,
            }));
        }
        state.reserved_files += 1;
        state.reserved_bytes += file_bytes;
        let seq = state.next_seq;
        state.next_seq += 1;
        state.check(config);
        Ok(Reservation {
            spool: self.clone(),
            seq,
            file_bytes,
            name_key,
            held: true,
        })
    }

    async fn write_entry(
        &self,
        reservation: Reservation,
        new: NewEntry,
    ) -> Result<Receipt, PutError> {
        let inner = &*self.inner;
        let created_unix_ms = inner.clock.now_unix_ms();
        let data = entry::encode_pieces(
            reservation.seq,
            created_unix_ms,
            &new.name,
            new.mode,
            &new.attributes,
            new.payload,
        );
        debug_assert_eq!(data.len() as u64, reservation.file_bytes);
        let (tmp, path) = self.entry_paths(&reservation, created_unix_ms);
        let written = inner.disk.write_and_rename(&tmp, &path, data).await;
        self.settle_entry(reservation, created_unix_ms, &tmp, path, written)
            .await
    }

    /// The temp file an entry is written as, and the name it is renamed to.
    pub(super) fn entry_paths(
        &self,
        reservation: &Reservation,
        created_unix_ms: u64,
    ) -> (PathBuf, PathBuf) {
        let dir = &self.inner.entries.path;
        let tmp = dir.join(temp_file_name(reservation.seq));
        let path = dir.join(entry_file_name(
            reservation.seq,
            created_unix_ms,
            reservation.file_bytes,
            reservation.name_key,
        ));
        (tmp, path)
    }

    /// Finishes a put whose file was written, synced and renamed from `tmp` to
    /// `path` (`written`): waits for a directory sync that covers the rename and
    /// indexes the entry. When `written` failed, which step failed is unknown here:
    /// both names are removed. An entry file that cannot be removed is a complete
    /// entry (written, synced, renamed): it is indexed, not acknowledged, so that it
    /// drains and the gauges count it. A temp file left behind is deleted at the
    /// next open.
    pub(super) async fn settle_entry(
        &self,
        mut reservation: Reservation,
        created_unix_ms: u64,
        tmp: &Path,
        path: PathBuf,
        written: std::io::Result<()>,
    ) -> Result<Receipt, PutError> {
        let inner = &*self.inner;
        if let Err(e) = written {
            let removed = inner.disk.remove_all(&[tmp.to_path_buf(), path]).await;
            let entry_left = match removed {
                Ok(results) => results.get(1).is_some_and(|r| {
                    r.as_ref()
                        .is_err_and(|e| e.kind() != std::io::ErrorKind::NotFound)
                }),
                Err(_) => true,
            };
            if entry_left {
                self.index_new(&mut reservation, created_unix_ms);
                inner.changed.notify_waiters();
            }
            return Err(self.put_failed(tmp, e));
        }
        let ticket = inner.entries.sync.ticket();
        if let Err(e) = self.sync_dir_upto(&inner.entries, ticket).await {
            if is_out_of_descriptors(&e) {
                // Not synced, and nothing dropped: the entry is complete on disk, so
                // it is indexed (it drains) but not acknowledged, as one that could
                // not be removed.
                self.index_new(&mut reservation, created_unix_ms);
                inner.changed.notify_waiters();
                let message = format!("cannot sync {}: {e}", inner.entries.path.display());
                return Err(PutError::Io {
                    path,
                    source: std::sync::Arc::new(std::io::Error::new(e.kind(), message)),
                });
            }
            let reason = self
                .state()
                .broken
                .clone()
                .unwrap_or_else(|| "broken".into());
            return Err(PutError::Broken { reason });
        }
        self.index_new(&mut reservation, created_unix_ms);
        self.state().disk_refused = None;
        inner.changed.notify_waiters();
        Ok(Receipt {
            seq: reservation.seq,
            file_bytes: reservation.file_bytes,
            created_unix_ms,
        })
    }

    /// Turns a durable put's reservation into an indexed entry.
    pub(super) fn index_new(&self, reservation: &mut Reservation, created_unix_ms: u64) {
        let mut state = self.state();
        reservation.held = false;
        state.reserved_files -= 1;
        state.reserved_bytes -= reservation.file_bytes;
        let meta = Meta::new(
            reservation.file_bytes,
            created_unix_ms,
            reservation.name_key,
            Naming::Keyed,
        );
        state.index.insert(reservation.seq, meta);
        state.check(&self.inner.config);
    }
}

impl Spool {
    /// The error for a put whose own file failed: full when out of space, otherwise
    /// an I/O error of this put alone. Remembered until a put is durable again
    /// ([`Stats::disk_refused`](crate::Stats::disk_refused)).
    pub(super) fn put_failed(&self, path: &Path, e: std::io::Error) -> PutError {
        let refused: std::sync::Arc<str> = format!("{e} ({})", path.display()).into();
        self.state().disk_refused = Some(refused);
        if is_out_of_space(&e) {
            PutError::Full(FullReason::Disk)
        } else {
            PutError::Io {
                path: path.to_path_buf(),
                source: std::sync::Arc::new(e),
            }
        }
    }
}
