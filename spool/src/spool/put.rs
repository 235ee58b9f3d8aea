//! Putting an entry: capacity reserved before the first await, then (in a spawned
//! task, so a caller that gives up cannot leave the index and the directory
//! disagreeing) encode, create and sync the temp file, rename it into place, and wait
//! for a directory sync that started after the rename. Only then is the entry indexed
//! and the put acknowledged.

use bytes::Bytes;

use super::layout::{entry_file_name, temp_file_name};
use super::{Meta, Spool, is_out_of_space};
use crate::entry;
use crate::error::{FullReason, PutError};
use crate::name;

/// What a successful [`Spool::put`] stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The entry's sequence number (its place in the drain order).
    pub seq: u64,
    /// Size of the entry file, as counted against `max_bytes`.
    pub file_bytes: u64,
}

/// Capacity held by a put in progress; given back if the put does not complete.
pub(super) struct Reservation {
    spool: Spool,
    seq: u64,
    file_bytes: u64,
    held: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.held {
            let mut state = self.spool.state();
            state.reserved_files -= 1;
            state.reserved_bytes -= self.file_bytes;
        }
    }
}

impl Spool {
    /// Stores `payload` under the object name `name` and returns once it is durable.
    ///
    /// Refuses, without storing anything, a name Cloud Storage would reject, an entry
    /// larger than `max_bytes`, and any entry while the spool is full or broken. The
    /// write runs to completion even if the returned future is dropped, so the index
    /// never disagrees with the directory.
    pub async fn put(&self, name: &str, payload: Bytes) -> Result<Receipt, PutError> {
        name::check(name)?;
        let file_bytes = entry::file_bytes(name.len(), payload.len() as u64);
        let reservation = self.reserve(file_bytes)?;
        let spool = self.clone();
        let name = name.to_owned();
        tokio::spawn(async move { spool.write_entry(reservation, name, payload).await })
            .await
            .unwrap_or_else(|e| {
                Err(PutError::Broken {
                    reason: format!("put task failed: {e}").into(),
                })
            })
    }

    /// Takes a sequence number and room for `file_bytes`, or says why not.
    fn reserve(&self, file_bytes: u64) -> Result<Reservation, PutError> {
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
        if state.bytes + state.reserved_bytes + file_bytes > config.max_bytes {
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
            held: true,
        })
    }

    async fn write_entry(
        &self,
        mut reservation: Reservation,
        name: String,
        payload: Bytes,
    ) -> Result<Receipt, PutError> {
        let inner = &*self.inner;
        let seq = reservation.seq;
        let created_unix_ms = inner.clock.now_unix_ms();
        let data = entry::encode(seq, created_unix_ms, &name, &payload);
        let tmp = inner.entries_dir.join(temp_file_name(seq));
        let path = inner.entries_dir.join(entry_file_name(seq));

        if let Err(e) = inner.disk.create_synced(&tmp, data).await {
            // Best effort: open deletes leftovers anyway.
            let _ = inner.disk.remove(&tmp).await;
            return Err(if is_out_of_space(&e) {
                PutError::Full(FullReason::Disk)
            } else {
                self.break_spool(format!("writing {}: {e}", tmp.display()))
            });
        }
        if let Err(e) = inner.disk.rename(&tmp, &path).await {
            return Err(self.break_spool(format!("renaming {}: {e}", tmp.display())));
        }
        let ticket = inner.dir_sync.ticket();
        #[cfg(feature = "mutations")]
        let skip_sync = self.mutation_is(super::Mutation::AckBeforeDirSync);
        #[cfg(not(feature = "mutations"))]
        let skip_sync = false;
        if !skip_sync
            && let Err(e) = inner
                .dir_sync
                .wait_durable(&*inner.disk, &inner.entries_dir, ticket)
                .await
        {
            return Err(self.break_spool(format!(
                "syncing directory {}: {e}",
                inner.entries_dir.display()
            )));
        }
        self.index_new(&mut reservation, created_unix_ms);
        inner.changed.notify_waiters();
        Ok(Receipt {
            seq,
            file_bytes: reservation.file_bytes,
        })
    }

    /// Turns a durable put's reservation into an indexed entry.
    fn index_new(&self, reservation: &mut Reservation, created_unix_ms: u64) {
        let mut state = self.state();
        reservation.held = false;
        state.reserved_files -= 1;
        state.reserved_bytes -= reservation.file_bytes;
        let previous = state.index.insert(
            reservation.seq,
            Meta {
                file_bytes: reservation.file_bytes,
                created_unix_ms,
                claimed: false,
            },
        );
        debug_assert!(
            previous.is_none(),
            "sequence {} indexed twice",
            reservation.seq
        );
        state.bytes += reservation.file_bytes;
        state.check(&self.inner.config);
    }

    /// Marks the spool broken (first reason wins) and returns the error for the caller.
    pub(super) fn break_spool(&self, reason: String) -> PutError {
        let mut state = self.state();
        let reason = state
            .broken
            .get_or_insert_with(|| {
                tracing::error!(%reason, "spool stopped accepting writes");
                reason.into()
            })
            .clone();
        PutError::Broken { reason }
    }
}
